"""Run-time effects: `print` and `assert`, lowered to host callbacks ordered by a hidden `$io` value.

Each effect site becomes a `stablehlo.custom_call @xla_ffi_python_cpu_callback` (the target that
`jax.debug.print` uses) whose operands are the run id, the `$io` value and the printed values, and whose
result is the next `$io`. The data dependency on `$io` keeps every effect in program order, including
inside loops and branches and across calls; `has_side_effect` keeps XLA from removing it.
An `assert` computes its verdict on the device and calls back only when it fails.
A derivative through a loop with a `bound=` adds a third kind, "bound": a run past the bound is reported
(R0006) from the backward pass (compiler/autodiff.py `_while_vjp`).
Every site describes itself with attributes on its custom_call (`arrc.kind` = "print", "assert" or
"bound", and what the host needs to render it), as guard sites do, so a module written by `arrc compile` runs under
`arrc run` with the same effects: the runtime (runtime/effects.py) reads the sites back from the module.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from jaxlib.mlir import ir

from . import abi, emit
from .emit import hlo
from .locations import span_of
from .span import Span
from .types import BOOL, I32, I64, ArrayType
from .values import StrVal, Val

CALLBACK_TARGET = {"cpu": "xla_ffi_python_cpu_callback", "gpu": "xla_ffi_python_gpu_callback"}
RUN = "$run"


@dataclass
class PrintSite:
    span: Span
    pieces: list          # str for literal text, ArrayType for a value slot


@dataclass
class AssertSite:
    span: Span
    message: str
    shape: tuple          # concrete shape of the condition (for unravelling the failing index)
    in_function: str
    loop_depth: int
    call_chain: list = field(default_factory=list)


@dataclass
class BoundSite:
    span: Span
    bound: int
    loop: str = "for"                           # or "while"
    chain: list = field(default_factory=list)   # [(name, call span)] around the loop, innermost first


def site_attributes(site) -> dict:
    """The attributes that describe `site` on its custom_call (read back by runtime/effects.py `sites`)."""
    if isinstance(site, PrintSite):
        # A value slot is the empty array: text pieces are strings.
        pieces = [ir.StringAttr.get(p) if isinstance(p, str) else ir.ArrayAttr.get([]) for p in site.pieces]
        return {abi.KIND: ir.StringAttr.get("print"), abi.PIECES: ir.ArrayAttr.get(pieces)}
    if isinstance(site, BoundSite):
        return {abi.KIND: ir.StringAttr.get("bound"),
                abi.LOOP_BOUND: ir.IntegerAttr.get(ir.IntegerType.get_signless(64), site.bound)}
    return {abi.KIND: ir.StringAttr.get("assert"), abi.MESSAGE: ir.StringAttr.get(site.message),
            abi.SHAPE: ir.DenseI64ArrayAttr.get([int(d) for d in site.shape]),
            abi.FUNCTION: ir.StringAttr.get(site.in_function)}


def _callback(sites: list, site, operands: list):
    op = _callback_op(site, operands)
    _number(op, sites, site)
    return op.results[0]


def _callback_op(site, operands: list):
    io_type = emit.tensor_type((), I32)
    op = hlo.CustomCallOp([io_type], operands, call_target_name=CALLBACK_TARGET["cpu"],
                          has_side_effect=ir.BoolAttr.get(True),
                          api_version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 4))
    for name, value in site_attributes(site).items():
        op.operation.attributes[name] = value
    return op


def _number(op, sites: list, site) -> None:
    sites.append(site)
    op.operation.attributes["backend_config"] = ir.DictAttr.get(
        {"index": ir.IntegerAttr.get(ir.IntegerType.get_unsigned(64), len(sites) - 1)})


def report_past_bound(run: ir.Value, count: ir.Value, bound: int) -> None:
    """At the insertion point, inside the branch taken when the loop at the current location ran `count`
    (u64) iterations, more than its `bound`: the call reports it (R0006). Its callback index is given by
    `number_new_sites` once the derivative is built (the rules that call this have no list of sites)."""
    count = hlo.convert(emit.tensor_type((), I64), count)
    _callback_op(BoundSite(span_of(ir.Location.current), bound), [run, emit.const(0, I32), count])


def number_new_sites(fn, sites: list | None) -> None:
    """Number the callbacks that `report_past_bound` added to func `fn`, after `sites` (the callback sites
    of the module being lowered, extended), or where `sites` is None after every callback of its module."""
    new, used = [], [-1]

    def visit(op):
        op = op.operation
        if op.name == "stablehlo.custom_call" and abi.KIND in op.attributes:
            if "backend_config" in op.attributes:
                used.append(ir.IntegerAttr(ir.DictAttr(op.attributes["backend_config"])["index"]).value)
            else:
                new.append(op)
        return ir.WalkResult.ADVANCE
    (fn.operation.parent if sites is None else fn.operation).walk(visit)
    sites = [None] * (max(used) + 1) if sites is None else sites
    for op in new:
        _number(op, sites, BoundSite(span_of(op.location), ir.IntegerAttr(op.attributes[abi.LOOP_BOUND]).value))


def lower_print(walk, sites: list, stmt, values: list) -> None:
    pieces, operands = [], [walk.materialize(walk.env[RUN]), walk.materialize(walk.env["$io"])]
    for v in values:
        if isinstance(v, StrVal):
            pieces.append(v.text)
        else:
            pieces.append(v.type)
            operands.append(walk.materialize(v))
    with walk.location(stmt, "print"):
        walk.env["$io"] = Val(ArrayType(I32, ()), _callback(sites, PrintSite(stmt.span, pieces), operands))


def lower_assert(walk, sites: list, stmt, cond: Val, message: str) -> None:
    with walk.location(stmt, "assert"):
        shape = cond.type.concrete_shape
        flat = walk.materialize(cond)
        size = 1
        for d in shape:
            size *= d
        flat = hlo.reshape(emit.tensor_type((size,), BOOL), flat)
        ok = emit.reduce(flat, emit.const(True, BOOL), [0], hlo.and_, BOOL)
        # First failing index: min over (i where not c, else size).
        iota = hlo.iota(emit.tensor_type((size,), I64), 0)
        failing = hlo.select(flat, emit.const(size, I64, (size,)), iota)
        first = emit.reduce(failing, emit.const(size, I64), [0], hlo.minimum, I64)
        counters = [walk.materialize(c, I64) for c in walk.loop_counters]
        site = AssertSite(stmt.span, message, shape, walk.fn.shown_name, len(counters))
        io_type = emit.tensor_type((), I32)
        op = hlo.IfOp([io_type], ok)
        with ir.InsertionPoint(op.true_branch.blocks.append()):
            hlo.return_([walk.materialize(walk.env["$io"])])
        with ir.InsertionPoint(op.false_branch.blocks.append()):
            operands = [walk.materialize(walk.env[RUN]), walk.materialize(walk.env["$io"]), first] + counters
            hlo.return_([_callback(sites, site, operands)])
        walk.env["$io"] = Val(ArrayType(I32, ()), op.results[0])
