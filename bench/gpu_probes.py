"""Facts about a GPU that arrc's choices rest on, printed one per line (bench/gpu_check.sh runs it on a lent
GPU machine): the precision of an f32 matrix product (XLA's default may use TF32 on NVIDIA GPUs), which
dtypes a convolution runs on (passes/verify_backend.py's table: `gpu_probes.py conv i32`, one per process),
and the PJRT platform names."""
from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

import arrc


def show(what: str, value) -> None:
    print(f"probe: {what}: {value}", flush=True)


def matmul_precision(gpu) -> None:
    r = np.random.default_rng(0)
    a, b = r.normal(size=(1024, 1024)), r.normal(size=(1024, 1024))
    exact = a @ b
    a32, b32 = (jax.device_put(v.astype(np.float32), gpu) for v in (a, b))
    mod = arrc.loads("def mm(a: f32[n, k], b: f32[k, m]) -> f32[n, m]:\n    return a @ b\n", device="gpu")

    def error(c):
        return float(np.max(np.abs(np.asarray(c, np.float64) - exact)) / np.max(np.abs(exact)))
    show("f32 1024^3 product, max error / max |exact|, arrc", f"{error(mod.mm(a32, b32)):.2e}")
    show("the same, jnp.matmul (default precision)", f"{error(jnp.matmul(a32, b32)):.2e}")
    show("the same, jnp.matmul (precision=HIGHEST)",
         f"{error(jnp.matmul(a32, b32, precision=jax.lax.Precision.HIGHEST)):.2e}")
    big = [jax.device_put(r.normal(size=(8192, 8192)).astype(np.float32), gpu) for _ in range(2)]
    for name, precision in (("default", None), ("HIGHEST", jax.lax.Precision.HIGHEST)):
        f = jax.jit(lambda x, y, p=precision: jnp.matmul(x, y, precision=p))
        f(*big).block_until_ready()
        start = time.perf_counter()
        for _ in range(10):
            out = f(*big)
        out.block_until_ready()
        seconds = (time.perf_counter() - start) / 10
        show(f"f32 8192^3 product, {name} precision, TFLOP/s", f"{2 * 8192 ** 3 / seconds / 1e12:.1f}")


CONV_DTYPES = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i8": np.int8, "i32": np.int32,
               "i64": np.int64, "u8": np.uint8}


def conv_dtype(dt: str) -> None:
    """One dtype per process: an unsupported convolution may abort it."""
    np_dt = CONV_DTYPES[dt]
    src = f"def c(x: {dt}[2, 4, 9, 9], w: {dt}[3, 4, 3, 3]) -> {dt}[2, 3, 7, 7]:\n    return conv(x, w)\n"
    try:
        out = arrc.loads(src, device="gpu").c(np.ones((2, 4, 9, 9), np_dt), np.ones((3, 4, 3, 3), np_dt))
        got = np.asarray(out, np.float64)
        show(f"conv {dt} on the GPU", f"runs; every element {got.min()}..{got.max()} (want 36)")
    except Exception as e:                      # noqa: BLE001 - a probe reports whatever happens
        show(f"conv {dt} on the GPU", f"{type(e).__name__}: {str(e).splitlines()[0][:300]}")


def main(argv: list) -> None:
    if argv:                                    # `conv DTYPE`
        return conv_dtype(argv[1])
    gpu = jax.devices("gpu")[0]
    show("jax", f"{jax.__version__}, devices {jax.devices()}")
    show("device kind / platform", f"{gpu.device_kind} / {gpu.client.platform} {gpu.client.platform_version}")
    from arrc.runtime.pjrt import backend
    show("arrc backend('gpu').platform", backend("gpu").platform)
    matmul_precision(gpu)


if __name__ == "__main__":
    import sys
    main(sys.argv[1:])
