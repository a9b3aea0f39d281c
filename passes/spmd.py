"""What a program run inside JAX's (`as_jax`) or over a mesh of devices (arrc/sharding.py) needs written out:
`clamp-update-starts` and `splittable-reductions`, what one device does by itself; `report-past`, what a call
from Python reads back."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func
from jaxlib.mlir.dialects import stablehlo as hlo

from ..compiler import abi, effects, emit
from ..compiler.types import BOOL, I32
from .base import ModulePass
from .rewrite import entry, ops_named


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


@dataclass
class SplittableReductions(ModulePass):
    """Each float max / min (compiler/ops_reduce.py `_extreme`: a reduce whose body keeps NaN by compare and
    select) written as XLA's SPMD partitioner can split it across devices: a reduce by `maximum` / `minimum`,
    and NaN where a second reduce, by `or`, finds one among the elements. The partitioner splits no other body
    ("UNIMPLEMENTED: Unsupported reduction computation": max of a sharded f32 crashed). Not on one device:
    there XLA:CPU compiles this form about twice as slowly (softmax: 450 against 230 ms)."""
    name: ClassVar[str] = "splittable-reductions"

    def apply(self, module: ir.Module) -> list:
        for op in ops_named(module, "stablehlo.reduce"):
            combine = _nan_keeping_chooser(op)
            if combine is None:
                continue
            x, init = op.operands
            dims, dt = list(ir.DenseI64ArrayAttr(op.attributes["dimensions"])), emit.element_dtype(x.type)
            with ir.InsertionPoint(op), op.location:
                chosen = emit.reduce(x, init, dims, combine, dt)
                has_nan = emit.reduce(emit.compare(x, x, "NE", dt), emit.const(False, BOOL), dims, hlo.or_, BOOL)
                out = hlo.select(has_nan, emit.const(float("nan"), dt, emit.shape_of(chosen)), chosen)
            op.results[0].replace_all_uses_with(out)
            op.erase()
        return []


def _nan_keeping_chooser(op):
    """`hlo.maximum` or `hlo.minimum` for a one-operand float reduce whose body is arr's NaN-keeping max or min
    (`select(a > b or a != a, a, b)`, `<` for min), else None."""
    if len(op.operands) != 2 or not emit.element_dtype(op.operands[0].type).is_float:
        return None
    body = list(op.regions[0].blocks[0].operations)
    names = [o.operation.name for o in body]
    if names != ["stablehlo.compare"] * 2 + ["stablehlo.or", "stablehlo.select", "stablehlo.return"]:
        return None
    direction = str(body[0].attributes["comparison_direction"])
    return hlo.maximum if "GT" in direction else hlo.minimum if "LT" in direction else None


@dataclass
class ReportPast(ModulePass):
    """A run past a loop's `bound=` in a derivative (compiler/effects.py PAST, the result abi.BOUND_RESULT,
    which a call from Python reads) reported by a host callback at the end of the program instead (R0006, after
    its prints), its result now the next io value: a program inside JAX's has no caller that reads it."""
    name: ClassVar[str] = "report-past"

    def apply(self, module: ir.Module) -> list:
        fop = entry(module)
        held = emit.int_attr(fop, abi.BOUND_RESULT)
        if held is None:
            return []
        ret = fop.regions[0].blocks[0].operations[-1]
        outs = list(ret.operands)
        run = emit.run_argument(fop)
        with ir.InsertionPoint(ret), ret.location:
            io = outs[-1] if emit.int_attr(fop, abi.IO_ARG) is not None else emit.const(0, I32)
            outs[held] = effects.report_past(effects.sites_in(module), run, io, outs[held])
            func.ReturnOp(outs)
        ret.erase()
        del fop.attributes[abi.BOUND_RESULT]
        inputs = ir.FunctionType(ir.TypeAttr(fop.attributes["function_type"]).value).inputs
        fop.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(list(inputs), [v.type for v in outs]))
        return []
