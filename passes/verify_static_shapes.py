"""`verify-static-shapes`: reject any dynamic dimension or dynamic-shape operation in a module.

arrc's own output is static by construction; this pass guards StableHLO from elsewhere (`arrc run`,
`arrc guard` on a module exported by JAX) before anything is compiled.
"""
from __future__ import annotations

from jaxlib.mlir import ir

from ..compiler.diagnostics import Diagnostic
from .base import ModulePass
from ..compiler.locations import span_of
from ..compiler.walk import walk_ops

DYNAMIC_SHAPE_OPS = {
    "stablehlo.dynamic_broadcast_in_dim", "stablehlo.dynamic_reshape", "stablehlo.dynamic_iota",
    "stablehlo.dynamic_pad", "stablehlo.dynamic_gather", "stablehlo.dynamic_conv", "stablehlo.real_dynamic_slice",
    "stablehlo.get_dimension_size", "stablehlo.set_dimension_size", "shape.shape_of",
}


def _dynamic(t: ir.Type) -> bool:
    if isinstance(t, ir.RankedTensorType):
        return not t.has_static_shape
    return isinstance(t, ir.UnrankedTensorType)


class VerifyStaticShapes(ModulePass):
    name = "verify-static-shapes"

    def apply(self, module: ir.Module) -> list[Diagnostic]:
        return verify_static_shapes(module)


def verify_static_shapes(module: ir.Module) -> list[Diagnostic]:
    diags: list[Diagnostic] = []

    def visit(op):
        op = op.operation if hasattr(op, "operation") else op
        name = op.name
        bad = None
        if name in DYNAMIC_SHAPE_OPS:
            bad = f"`{name}` computes a shape at run time"
        else:
            types = [r.type for r in op.results] + [o.type for o in op.operands]
            for region in op.regions:
                for block in region.blocks:
                    types += [a.type for a in block.arguments]
            dynamic = next((t for t in types if _dynamic(t)), None)
            if dynamic is not None:
                bad = f"`{name}` has a dynamic type {dynamic}"
        if bad:
            diags.append(Diagnostic("E0501", f"dynamic shape in StableHLO: {bad}", span_of(op.location),
                                    "dynamic here",
                                    help="export the module with static shapes (e.g. jax.jit(f).lower() on "
                                         "concrete arrays, no symbolic dimensions)"))
        return ir.WalkResult.ADVANCE

    walk_ops(module.operation, visit)
    return diags
