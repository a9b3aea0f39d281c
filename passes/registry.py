"""The table of module passes (passes/base.py `ModulePass`), by name: a pipeline is a list of names or pass
objects, so it can be printed and chosen from the command line."""
from __future__ import annotations

from jaxlib.mlir import ir

from ..compiler.diagnostics import internal_error
from .autodiff import ValueAndGrad
from .base import ModulePass
from .guards import GuardPass
from .linalg import LowerLinalg
from .speculate import SpeculateSmallIfs
from .spmd import ClampUpdateStarts, ReportPast, SplittableReductions
from .unroll import UnrollShortLoops
from .verify_backend import VerifyBackend
from .verify_foreign import VerifyForeignCalls
from .verify_static_shapes import VerifyStaticShapes

PASSES: dict[str, type[ModulePass]] = {p.name: p for p in (VerifyStaticShapes, VerifyForeignCalls, GuardPass,
                                                           ValueAndGrad, LowerLinalg, VerifyBackend,
                                                           ClampUpdateStarts, ReportPast, SplittableReductions,
                                                           UnrollShortLoops, SpeculateSmallIfs)}


def run_passes(module, passes: list) -> list:
    """Run the passes in order (names, with default options, or pass objects), verifying the module after
    each; returns their diagnostics. A pass that leaves an invalid module is arrc's bug: E0601, and the
    passes after it do not run. A pass that reports an error stops there too (it may have left the module
    half rewritten)."""
    diags = []
    for p in passes:
        p = PASSES[p]() if isinstance(p, str) else p
        diags.extend(p.apply(module))
        if any(d.severity == "error" for d in diags):
            return diags
        try:
            module.operation.verify()
        except ir.MLIRError as err:
            return diags + [internal_error(RuntimeError(f"pass `{p.name}` left an invalid module: {err}"))]
    return diags
