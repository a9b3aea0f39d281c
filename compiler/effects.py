"""Run-time effects: `print` and `assert`, lowered to host callbacks ordered by a hidden `$io` value.

Each effect site becomes a `stablehlo.custom_call @xla_ffi_python_cpu_callback` (the target that
`jax.debug.print` uses) whose operands are the run id, the `$io` value and the printed values, and whose
result is the next `$io`. The data dependency on `$io` keeps every effect in program order, including
inside loops and branches and across calls; `has_side_effect` keeps XLA from removing it.
An `assert` computes its verdict on the device and calls back only when it fails.
A derivative through a loop with a `bound=` checks it (compiler/autodiff.py `_while_vjp`): the first run
past a bound is a value [loop site, iterations] (`PAST`, iterations 0 for none) that the function returns
(abi.BOUND_RESULT, read after the call: no host callback, so such calls keep the C++ fast path); in a
function with effects it is reported at once, by a third kind of callback, "bound" (R0006), so that the
prints after it do not run, as after a failed assert.
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
from .types import BOOL, I32, I64, ArrayType, Dim
from .values import StrVal, Val
from .walk import walk_ops

CALLBACK_TARGET = {"cpu": "xla_ffi_python_cpu_callback", "gpu": "xla_ffi_python_gpu_callback"}
RUN = "$run"
PAST = "$past"      # the hidden variable of a run past a loop's bound: i64[2] [loop site, iterations]
PAST_TYPE = ArrayType(I64, (Dim.const(2),))


@dataclass
class PrintSite:
    span: Span
    pieces: list          # str for literal text, ArrayType for a value slot (read back: None, KEY for keys)


@dataclass
class AssertSite:
    span: Span
    message: str
    shape: tuple          # concrete shape of the condition (for unravelling the failing index)
    in_function: str
    loop_depth: int
    call_chain: list = field(default_factory=list)
    lanes: list = field(default_factory=list)     # per loop counter: "vmap(f)" where it counts vmap's lanes
    order: tuple = ()     # its place among the guards' checks (passes/guards.py: abi.ORDER), where it has one


@dataclass
class BoundSite:
    """A loop with a `bound=` whose derivative checks it: described by attributes of its (recording)
    `stablehlo.while` (`arrc.bound_site`, its number among the module's sites, and `arrc.loop_bound`)."""
    span: Span
    bound: int
    loop: str = "for"                           # or "while"
    chain: list = field(default_factory=list)   # [(name, call span)] around the loop, innermost first


class BoundReport:
    """The host callback that reports a run past a bound in a function with effects (kind "bound")."""


def site_attributes(site) -> dict:
    """The attributes that describe `site` on its custom_call (read back by runtime/effects.py `sites`)."""
    if isinstance(site, PrintSite):
        # A value slot is an array, ["key"] for keys (printed as their words), else empty: text pieces are strings.
        pieces = [ir.StringAttr.get(p) if isinstance(p, str) else
                  ir.ArrayAttr.get([ir.StringAttr.get("key")] if p.dtype.is_key else []) for p in site.pieces]
        return {abi.KIND: ir.StringAttr.get("print"), abi.PIECES: ir.ArrayAttr.get(pieces)}
    if isinstance(site, BoundReport):
        return {abi.KIND: ir.StringAttr.get("bound")}
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


def sites_in(root) -> list:
    """A list to number new sites after those of the module (or func) `root`: its callbacks' (any custom
    call with an index: a foreign module's too) and its bounded loops' (`number_loop`), placeholders, one
    per number used."""
    used = [-1]

    def visit(op):
        op = op.operation
        if op.name == "stablehlo.custom_call" and "backend_config" in op.attributes:
            try:
                used.append(ir.IntegerAttr(ir.DictAttr(op.attributes["backend_config"])["index"]).value)
            except (ValueError, KeyError, TypeError):
                pass                    # another kind of backend_config: not a callback index
        elif abi.BOUND_SITE in op.attributes:
            used.append(emit.int_attr(op, abi.BOUND_SITE))
        return ir.WalkResult.ADVANCE
    walk_ops(root.operation, visit)
    return [None] * (max(used) + 1)


def number_loop(loop, sites: list, bound: int) -> int:
    """The site number of a loop whose derivative checks its `bound` (abi.BOUND_SITE: the number it has,
    or the next one of `sites`)."""
    if abi.BOUND_SITE not in loop.attributes:
        sites.append(BoundSite(span_of(loop.location), bound))
        emit.set_int_attr(loop, abi.BOUND_SITE, len(sites) - 1)
    return emit.int_attr(loop, abi.BOUND_SITE)


def past_bound(site: int, count: ir.Value, fits: ir.Value) -> ir.Value:
    """The PAST value of a loop numbered `site` that ran `count` (u64) iterations: [site, count], or none
    where it `fits` its bound."""
    ran = hlo.reshape(emit.tensor_type((1,), I64), hlo.convert(emit.tensor_type((), I64), count))
    return hlo.select(fits, no_past(), hlo.concatenate([emit.const(site, I64, (1,)), ran], 0))


def past_type() -> ir.Type:
    return emit.tensor_type(PAST_TYPE.concrete_shape, I64)


def no_past() -> ir.Value:
    return emit.const(0, I64, PAST_TYPE.concrete_shape)


def _records_none(past: ir.Value) -> ir.Value:
    """Whether a PAST value records no run past a bound (its iterations are 0)."""
    ran = hlo.reshape(emit.tensor_type((), I64), hlo.slice(past, [1], [2], [1]))
    return emit.compare(ran, emit.const(0, I64), "EQ", I64)


def first_past(earlier: ir.Value, later: ir.Value) -> ir.Value:
    """The first of two PAST values that records a run past a bound (`earlier` where both do)."""
    return hlo.select(_records_none(earlier), later, earlier)


def report_past(sites: list, run: ir.Value, io: ir.Value, past: ir.Value) -> ir.Value:
    """At the insertion point of a function with effects: report `past` (R0006) if it records a run past a
    bound, by a host callback that orders it among the effects; the next io value."""
    op = hlo.IfOp([io.type], _records_none(past))
    with ir.InsertionPoint(op.true_branch.blocks.append()):
        hlo.return_([io])
    with ir.InsertionPoint(op.false_branch.blocks.append()):
        hlo.return_([_callback(sites, BoundReport(), [run, io, past])])
    return op.results[0]


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
