#!/usr/bin/env bash
# The GPU checks, run on a lent GPU machine from the repository root (it has no package registry): arrc is
# installed into that image's Python beside its own jax and CUDA plugin; the pure-Python wheels the image
# lacks travel in .whl (lark, prompt_toolkit, wcwidth). Writes log.txt and bench_gpu.json under $OUT.
# Steps stop the run early only when arrc cannot run on the GPU at all.
set -u
OUT=${OUT:-/tmp/gpu-check}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
export PYTHONUNBUFFERED=1
step() { echo; echo "== $* ($(date -u +%T))"; }

step install
python3 -m pip install -q --no-index --no-deps --no-compile .whl/*.whl &&
    python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . || exit 1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import jax, jaxlib, sys; print('python', sys.version.split()[0], 'jax', jax.__version__, 'jaxlib', jaxlib.__version__, jax.devices())"

step smoke
timeout 120 python3 - <<'EOF' || exit 1
import numpy as np, arrc
m = arrc.loads("def f(x: f32[4]) -> f32[4]:\n    return exp(x)\n", device="gpu", guards="all")
out = m.f(np.arange(4, dtype=np.float32))
print(out, out.devices())
EOF

step probes
for dt in f16 f32 f64 i8 i32 i64 u8; do timeout 60 python3 bench/gpu_probes.py conv "$dt" || echo "probe: conv $dt: exit $?"; done
timeout 120 python3 bench/gpu_probes.py || echo "probes: exit $?"

step tests
timeout 240 python3 -m pytest -p no:warnings -p no:cacheprovider -q tests/test_gpu.py tests/test_devices.py tests/test_linalg.py -k "gpu or golden" || echo "tests: exit $?"

step bench
timeout "${BENCH_SECONDS:-240}" python3 bench/run.py --quick --device gpu --skip scaling,cli \
    --only "softmax,mlp,layer_norm,nansum,chain20,power_iteration,grad of,uniform,kmeans,conv block,solve f64,cholesky,eigh,vmap of,add f32" \
    --out "$OUT/bench_gpu.json" || echo "bench: exit $?"
step done
