"""`verify-backend`: an operation the target backend cannot compile or run for its dtype is a compile
error at that operation (E0504), before XLA sees it. JAX has no such check: on ROCm an f64 convolution
aborts the process, and TPUs have no 64-bit integer convolutions and no f64 LU decomposition. It runs
before passes/linalg.py, which sees linear algebra as arr's operations.

The table is keyed by PJRT platform (`cpu`, `cuda`, `rocm`, `tpu`: what the device's client reports);
what it lists comes from the backends' issue trackers (XLA's ROCm convolutions go through MIOpen, which
has no f64, complex or integer kernels) and from measurements (TPU: below). A platform that is not
in the table is probed: once per platform, operation and dtype, a subprocess runs a small convolution of
that dtype there (an unsupported one may abort the process, as on ROCm), and the answer is kept with the
compile cache (in the process only where the cache is off), so later compiles read it.
"""
from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from typing import Callable, ClassVar

from jaxlib.mlir import ir

from ..compiler.diagnostics import Diagnostic
from ..compiler.locations import span_of
from ..compiler.ops_linalg import is_linalg, linalg_call
from .base import ModulePass
from ..compiler.walk import walk_ops

# PJRT platform -> operations whose refusal below is XLA aborting the process rather than an error. TPU: an
# f32 SVD with its singular vectors aborts in XLA's TransposeFolding (check failure "buffer != nullptr";
# jnp.linalg.svd and pinv too; measured on a v5e with JAX 0.10.2; f64, and the singular values alone, run).
ABORTS: dict[str, set[str]] = {"tpu": {"svd", "pinv", "lstsq"}}

# PJRT platform -> operation -> the element types (arr's names) of its result it cannot have there. TPU:
# measured on a v5e with JAX 0.10.2 (2026-12-05): f64 and complex128 convolutions run and equal the CPU's
# (XLA splits them into 32-bit parts); i64 and u64 ones are UNIMPLEMENTED there.
UNSUPPORTED: dict[str, dict[str, set[str]]] = {
    "cpu": {},
    "tpu": {"stablehlo.convolution": {"i64", "u64"},
            # JAX lowers these to an `LuDecomposition` custom call that XLA refuses for f64 (measured as above;
            # cholesky, qr and eigh run)
            **{f"linalg {name}": {"f64"} for name in ("solve", "inv", "det", "slogdet", "lu")},
            **{f"linalg {name}": {"f32"} for name in ABORTS["tpu"]}},
    "rocm": {"stablehlo.convolution": {"f64", "complex64", "complex128", "i8", "i16", "i32", "i64", "u8", "u16",
                                       "u32", "u64"}},
}
WORDS = {"stablehlo.convolution": "convolution",
         **{f"linalg {name}": f"`{name}` (an LU decomposition there)" for name in ("solve", "inv", "det", "slogdet", "lu")},
         "linalg svd": "`svd` with its singular vectors",
         **{f"linalg {name}": f"`{name}` (an SVD with singular vectors there)" for name in ("pinv", "lstsq")}}
PROBED = "stablehlo.convolution"            # what a platform not in the table is probed for


@dataclass
class VerifyBackend(ModulePass):
    name: ClassVar[str] = "verify-backend"
    platform: str = "cpu"
    probe: Callable[[str, str], bool] | None = None     # (platform, dtype) -> whether it convolves (tests)

    def apply(self, module: ir.Module) -> list[Diagnostic]:
        known = UNSUPPORTED.get(self.platform)
        diags = []

        def visit(op):
            op = op.operation
            kind, typed = (_linalg_kind(op), op.operands) if is_linalg(op) else (op.name, op.results)
            if kind in WORDS and typed and (known is not None or kind == PROBED):
                dtype = _arr_name(ir.RankedTensorType(typed[0].type).element_type)
                if known is not None:
                    refused, why = dtype in known.get(kind, ()), "table"
                else:
                    refused, why = not _probed(self.platform, dtype, self.probe or probe_in_subprocess), "probe"
                if refused:
                    diags.append(_refusal(self.platform, op, kind, dtype, why))
            return ir.WalkResult.ADVANCE
        walk_ops(module.operation, visit)
        return diags


def _linalg_kind(op) -> str:
    """`linalg <name>`; the singular values alone (`svd(a, compute_uv=false)`, not differentiated: the
    derivative needs the vectors) are `linalg svd values`."""
    name, params, derivative = linalg_call(op)
    if name == "svd" and not params.get("compute_uv", True) and not derivative:
        return "linalg svd values"
    return f"linalg {name}"


def _refusal(platform: str, op, kind: str, dtype: str, why: str) -> Diagnostic:
    word = WORDS[kind]
    other = "complex64" if dtype.startswith("complex") else "f64" if dtype == "f32" else "f32"
    a = "an" if dtype[0] in "fi" else "a"         # an f64, an i32, a u8, a complex64
    note = f"{platform} has no {word} kernels for {', '.join(sorted(UNSUPPORTED[platform][kind]))}" \
        if why == "table" else f"a test {word} in {dtype} failed on {platform} (probed once in a subprocess; " \
                               f"the answer is kept with the compile cache)"
    if why == "table" and kind.removeprefix("linalg ") in ABORTS.get(platform, ()):
        note = f"XLA aborts the process compiling it for {platform} (JAX's {kind[7:]} of {dtype} too)"
    return Diagnostic("E0504", f"the {platform} backend cannot run {a} {dtype} {word}", span_of(op.location),
                      f"{a} {dtype} {word}", notes=[note],
                      help=f"cast the operands (`.astype({other})`) or run it on another device (`device=\"cpu\"`)")


_answers: dict = {}


def _probed(platform: str, dtype: str, probe) -> bool:
    """Whether `platform` convolves `dtype`: this process's answer, the compile cache's, or a new probe."""
    from ..compiler import cache
    key = (platform, dtype)
    if key not in _answers:
        disk = cache.default_cache()
        entry = disk.key(b"verify-backend probe", b"stablehlo.convolution", platform, dtype) if disk else None
        stored = disk.get(entry) if disk else None
        if stored in (b"yes", b"no"):
            _answers[key] = stored == b"yes"
        else:
            _answers[key] = bool(probe(platform, dtype))
            if disk:
                disk.put(entry, b"yes" if _answers[key] else b"no")
    return _answers[key]


PROBE = """\
import sys
import numpy as np
import jax
jax.config.update("jax_enable_x64", True)
device = jax.devices(sys.argv[1])[0]
dtype = jax.numpy.dtype(sys.argv[2])
x = jax.device_put(np.ones((1, 2, 5, 5), dtype), device)
w = jax.device_put(np.ones((3, 2, 3, 3), dtype), device)
out = np.asarray(jax.lax.conv_general_dilated(x, w, (1, 1), "VALID"))
print("ok" if out.shape == (1, 3, 3, 3) and bool(np.all(out == 18)) else "wrong")
"""
NUMPY_NAMES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64", "complex64": "complex64",
               "complex128": "complex128", "bool": "bool"}


def probe_in_subprocess(platform: str, dtype: str, timeout_s: float = 120.0) -> bool:
    """Run a small convolution of `dtype` on `platform` in a new process: True if it gives the right answer
    (a crash, an error or a wrong answer there is False, and never reaches this process)."""
    name = NUMPY_NAMES.get(dtype) or ("int" if dtype[0] == "i" else "uint") + dtype[1:]
    try:
        done = subprocess.run([sys.executable, "-c", PROBE, platform, name], capture_output=True, text=True,
                              timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and done.stdout.strip() == "ok"


def _arr_name(element: ir.Type) -> str:
    """arr's name of an MLIR element type: f32, i32 (signless), u8 (`ui8`), complex64 (`complex<f32>`)."""
    text = str(element)
    if text.startswith("complex<"):
        return "complex64" if text == "complex<f32>" else "complex128"
    return "bool" if text == "i1" else "u" + text[2:] if text.startswith("ui") else text
