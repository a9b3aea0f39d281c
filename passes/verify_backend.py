"""`verify-backend`: an operation the target backend cannot compile or run for its dtype is a compile
error at that operation (E0504), before XLA sees it. JAX has no such check: on ROCm an f64 convolution
aborts the process, and TPUs have no 64-bit convolutions.

The table is keyed by PJRT platform (`cpu`, `cuda`, `rocm`, `tpu`: what the device's client reports);
what it lists comes from the backends' issue trackers (XLA's ROCm convolutions go through MIOpen, which
has no f64, complex or integer kernels; TPU convolutions have no 64-bit types). A platform that is not
in the table is not checked.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from jaxlib.mlir import ir

from ..compiler.diagnostics import Diagnostic
from ..compiler.locations import span_of
from .base import ModulePass

# PJRT platform -> operation -> the element types (arr's names) of its result it cannot have there
UNSUPPORTED: dict[str, dict[str, set[str]]] = {
    "tpu": {"stablehlo.convolution": {"f64", "i64", "u64", "complex128"}},
    "rocm": {"stablehlo.convolution": {"f64", "complex64", "complex128", "i8", "i16", "i32", "i64", "u8", "u16",
                                       "u32", "u64"}},
}
WORDS = {"stablehlo.convolution": "convolution"}


@dataclass
class VerifyBackend(ModulePass):
    name: ClassVar[str] = "verify-backend"
    platform: str = "cpu"

    def apply(self, module: ir.Module) -> list[Diagnostic]:
        refused = UNSUPPORTED.get(self.platform, {})
        if not refused:
            return []
        diags = []

        def visit(op):
            op = op.operation
            if op.name in refused and op.results:
                dtype = _arr_name(ir.RankedTensorType(op.results[0].type).element_type)
                if dtype in refused[op.name]:
                    word = WORDS.get(op.name, op.name)
                    other = "complex64" if dtype.startswith("complex") else "f32"
                    a = "an" if dtype[0] in "fi" else "a"         # an f64, an i32, a u8, a complex64
                    diags.append(Diagnostic(
                        "E0504", f"the {self.platform} backend cannot run {a} {dtype} {word}", span_of(op.location),
                        f"{a} {dtype} {word}",
                        notes=[f"{self.platform} has no {word} kernels for {', '.join(sorted(refused[op.name]))}"],
                        help=f"cast the operands (`.astype({other})`) or run it on another device "
                             f"(`device=\"cpu\"`)"))
            return ir.WalkResult.ADVANCE
        module.operation.walk(visit)
        return diags


def _arr_name(element: ir.Type) -> str:
    """arr's name of an MLIR element type: f32, i32 (signless), u8 (`ui8`), complex64 (`complex<f32>`)."""
    text = str(element)
    if text.startswith("complex<"):
        return "complex64" if text == "complex<f32>" else "complex128"
    return "bool" if text == "i1" else "u" + text[2:] if text.startswith("ui") else text
