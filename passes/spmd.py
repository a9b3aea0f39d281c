"""`clamp-update-starts`: what a program run over a mesh of devices (arrc/sharding.py, `as_jax`) needs written
out that one device does by itself."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo as hlo

from ..compiler import emit
from .base import ModulePass
from .rewrite import ops_named


@dataclass
class ClampUpdateStarts(ModulePass):
    """Each run-time start of a `dynamic_update_slice` clamped into range by an explicit `clamp`, as the
    operation itself clamps it: XLA's SPMD partitioner (jaxlib 0.10.2) drops an update whose start is out of
    range on a split dimension (`x[9, 0] = 5.0` on f32[8, 8] split by rows wrote nothing; JAX's own
    `lax.dynamic_update_slice` and its gradient of `dynamic_slice` too). Runs after the guard pass, which
    checks the start the program asked for."""
    name: ClassVar[str] = "clamp-update-starts"

    def apply(self, module: ir.Module) -> list:
        for op in ops_named(module, "stablehlo.dynamic_update_slice"):
            dims, sizes = emit.shape_of(op.operands[0]), emit.shape_of(op.operands[1])
            for k, (start, dim, size) in enumerate(zip(list(op.operands[2:]), dims, sizes)):
                if getattr(start.owner, "name", None) == "stablehlo.constant":
                    continue
                dt = emit.element_dtype(start.type)
                with ir.InsertionPoint(op), op.location:
                    op.operands[2 + k] = hlo.clamp(emit.const(0, dt), start, emit.const(dim - size, dt))
        return []
