#!/usr/bin/env bash
# The TPU checks, run on a lent TPU machine from the repository root (it has no package registry): arrc and
# the pure-Python wheels the image lacks (lark, prompt_toolkit, wcwidth, pygments, flatbuffers) travel in
# .whl-tpu and are installed under /tmp/site, after the image's own jax/jaxlib/libtpu on PYTHONPATH.
# Build the wheels first (on a machine with a registry, from the repository root):
#   echo /.whl-tpu/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.11 --implementation cp \
#       --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl-tpu NAME==VERSION   # each
#   .venv/bin/pip wheel --no-deps --no-build-isolation -w .whl-tpu .      # arrc itself (pure Python)
# Writes log.txt and bench_tpu.json under $OUT. One program holds the chip at a time: every step runs
# after the last has ended. ARRC_CHECK_SECONDS (default 560) bounds the whole run; the bench gets what is left.
set -u
OUT=${OUT:-/tmp/tpu-check}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
export PYTHONUNBUFFERED=1
TOTAL=${ARRC_CHECK_SECONDS:-560}
step() { echo; echo "== $* ($(date -u +%T), ${SECONDS} s in)"; }
left() { echo $(( TOTAL - SECONDS )); }

step install
PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target /tmp/site .whl-tpu/*.whl || exit 1
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}/tmp/site
python3 -c 'import platform; print("glibc", platform.libc_ver())'

step smoke
timeout 120 python3 bench/tpu_probes.py smoke || { echo "smoke: exit $?"; exit 1; }

step probes
sleep 3
timeout 200 python3 bench/tpu_probes.py info examples guards random grad || echo "probes: exit $?"
sleep 3
timeout 90 python3 bench/tpu_probes.py conv || echo "probes conv: exit $?"
sleep 3
timeout 120 python3 bench/tpu_probes.py linalg || echo "probes linalg: exit $?"

step bench
sleep 3
budget=$(left)
if [ "$budget" -gt 30 ]; then
    timeout "$budget" python3 bench/tpu_probes.py bench --quick --device "${ARRC_PROBE_DEVICE:-tpu}" --skip scaling,cli \
        --only "softmax,mlp,layer_norm,chain20,power_iteration,grad of,uniform,kmeans,conv block,vmap of,add f32" \
        --out "$OUT/bench_tpu.json" || echo "bench: exit $? (budget ${budget} s)"
else
    echo "bench: skipped, ${budget} s left"
fi
step done
