"""Guard passes: make a StableHLO module detect its own faults (LANGUAGE.md section 7).

Two builds of the same function, both produced here:

- the **fast** build, used for every call: a NaN/Inf check of the returned values only (one fused
  reduction, so XLA keeps its fusions), plus `bounds`/`div0` checks at the index and division
  operations themselves. A check that fails calls the host (`stablehlo.custom_call` to the Python
  callback target, inside a `stablehlo.if` so the no-fault path never leaves the device);
- the **origin** build, compiled only after the fast build saw a non-finite result (or always, for
  `--guard-scope all-ops`): every floating-point operation also reports where its result is non-finite
  while its operands were finite, and (results scope) each element carries the site its non-finite value
  came from, so the host can keep the reports whose values reached a bad result. The host picks the first
  of those in execution order: the origin.

Reports carry the operation's location (so arrc's spans and call chains, or a JAX export's Python
lines), the element index, the operand values there, and the iteration of every enclosing loop (each
`stablehlo.while` gets an iteration counter). The site of each report is described by attributes on
its custom_call, so a guarded module is self-describing: `arrc guard` writes one, `arrc run` runs it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func
from jaxlib.mlir.dialects import stablehlo as hlo

from ..compiler import abi, emit
from ..compiler.effects import CALLBACK_TARGET, sites_in
from ..compiler.autodiff import adjoint_id
from ..compiler.locations import jax_backward, name_of
from ..compiler.ops_linalg import SHARD, STOP_GRADIENT, is_linalg, linalg_call
from ..compiler.types import BOOL, DTYPES, F32, I64
from .base import ModulePass
from .rewrite import attr_text, count_iterations, entry, i64s, inline_calls, run_argument
from ..compiler.walk import walk_ops

KINDS, SCOPES = abi.GUARD_KINDS, abi.GUARD_SCOPES
STRUCTURAL = {"stablehlo.while", "stablehlo.if", "stablehlo.case", "func.call",
              "stablehlo.custom_call", "stablehlo.return", "func.return", "stablehlo.iota",
              "stablehlo.optimization_barrier", "stablehlo.get_tuple_element", "stablehlo.tuple"}
DESCEND = {"stablehlo.while", "stablehlo.if", "stablehlo.case"}
INDEXING = {"stablehlo.dynamic_slice", "stablehlo.dynamic_update_slice", "stablehlo.gather", "stablehlo.scatter"}
# Operations that only move elements: the origin build moves each element's origin with it (`_origin_of`).
MOVES = {"stablehlo.broadcast_in_dim", "stablehlo.reshape", "stablehlo.transpose", "stablehlo.slice",
         "stablehlo.reverse", "stablehlo.dynamic_slice", "stablehlo.gather", "stablehlo.concatenate",
         "stablehlo.pad", "stablehlo.dynamic_update_slice"}
# Operations that keep only some elements of a float operand (`_drops_nonfinite`).
DROPS = {"stablehlo.select", "stablehlo.slice", "stablehlo.dynamic_slice", "stablehlo.gather"}
# Operations whose operands and result may have one shape although an element does not depend on the element
# of its operands at the same index.
SPATIAL = MOVES | {"stablehlo.dot_general", "stablehlo.dot", "stablehlo.convolution", "stablehlo.fft",
                   "stablehlo.cholesky", "stablehlo.triangular_solve", "stablehlo.sort", "stablehlo.scatter",
                   "stablehlo.reduce_window", "stablehlo.select_and_scatter", "stablehlo.reduce"}
# Per-element origins (flow tracking): `site << 32 | flat index of the element in the site's result`; CLEAN for no
# non-finite value, UNTRACED for one whose origin is lost (it came out of a loop or a branch; the host then falls
# back to the static def-use flow of `_results_reached`).
CLEAN, UNTRACED, SITE_SHIFT = 2 ** 63 - 1, -1, 32


@dataclass(frozen=True)
class GuardOptions:
    kinds: frozenset = frozenset()
    scope: str = "results"
    origins: bool = False       # the origin build: every floating-point operation reports

    @property
    def floats(self) -> frozenset:
        return self.kinds & {"nan", "inf"}


# On main, in the results scope: the float kinds its results are checked for. The check is a second, small
# executable run on the result buffers (`results_check`), so the computation itself is compiled exactly as
# it is without guards and its numbers cannot change.


def guarded_kinds(fop) -> frozenset:
    try:
        return parse_kinds(attr_text(fop.attributes[abi.GUARDED]))
    except KeyError:
        return frozenset()


def parse_kinds(text) -> frozenset:
    """`"nan,inf"`, `"all"`, `"off"`, a list, or None -> a set of guard kinds; ValueError for unknown ones."""
    if text is None or text in ("", "off", "none"):
        return frozenset()
    if not isinstance(text, (str, list, tuple, set, frozenset)):
        raise TypeError(f"guards are a str such as \"nan,inf\" or \"all\", or a list of kinds, not {text!r}")
    items = text.split(",") if isinstance(text, str) else list(text)
    kinds = set()
    for item in (i.strip() for i in items):
        if item == "all":
            kinds |= set(KINDS)
        elif item in KINDS:
            kinds.add(item)
        elif item:
            raise ValueError(f"unknown guard {item!r}: use {', '.join(KINDS)} or all")
    return frozenset(kinds)


# ---- small emitters ------------------------------------------------------------------------
def _element_dtype(t: ir.Type):
    elem = ir.RankedTensorType(t).element_type
    for dt in DTYPES.values():
        if emit.ir_dtype(dt) == elem:
            return dt
    return None


def _nonfinite(x: ir.Value, kinds: frozenset) -> ir.Value:
    if _is_complex(x.type):         # a module from elsewhere
        return hlo.or_(_nonfinite(hlo.real(x), kinds), _nonfinite(hlo.imag(x), kinds))
    dt = _element_dtype(x.type)
    if kinds >= {"nan", "inf"}:
        return hlo.not_(hlo.is_finite(x))
    if "nan" in kinds:
        return emit.compare(x, x, "NE", dt)
    return emit.compare(hlo.abs(x), emit.const(np.inf, dt, emit.shape_of(x)), "EQ", dt)


def _any(mask: ir.Value) -> ir.Value:
    shape = emit.shape_of(mask)
    if not shape:
        return mask
    return emit.reduce(mask, emit.const(False, BOOL), list(range(len(shape))), hlo.or_, BOOL)


# XLA:CPU runs an executable whose cost analysis counts fewer than 1,000 flops on the calling thread and any
# other on a worker thread: a hand-off measured at 5-90 us on a 2-core machine, several times the sum of a
# few thousand elements. A `while` loop's cost counts one iteration, so on CPU a result of up to
# SUMMED_IN_A_LOOP elements is summed CHUNK at a time in a loop (at 4,096 elements after a loop program: a
# 38 us call with its check 48 us so, 134 us with one reduction). Past that the reduction's own time
# dominates, and one reduction is the fastest (XLA:CPU vectorizes a reduction of a parameter).
CHUNK, SUMMED_IN_A_LOOP = 512, 1 << 16


def _sum_not_finite(x: ir.Value, platform: str) -> ir.Value:
    """Whether the sum of `x`'s elements is not finite (one i1): it is wherever an element is (an addition
    propagates NaN and infinity in any order; a vectorized `max` does not propagate NaN), and otherwise
    only where the sum overflows. A reduction of the result itself, not fused with an elementwise test,
    is XLA:CPU's fastest (4M f32 elements in 0.21 ms, against 1.2 ms for `any(!is_finite(x))`). f16 and
    bf16 are summed in f32, where they cannot overflow. Complex values: the exact test."""
    if _is_complex(x.type):
        return _any(_nonfinite(x, frozenset({"nan", "inf"})))
    dt = _element_dtype(x.type)
    if dt.bits < 32:
        x, dt = emit.cast(x, dt, F32), F32
    shape = emit.shape_of(x)
    size = int(np.prod(shape)) if shape else 1
    if platform == "cpu" and CHUNK < size <= SUMMED_IN_A_LOOP:
        total = _sum_in_chunks(_flat(x), dt)
    else:
        total = emit.reduce(x, emit.const(0.0, dt), list(range(len(shape))), hlo.add, dt) if shape else x
    return hlo.not_(hlo.is_finite(total))


def _sum_in_chunks(flat: ir.Value, dt) -> ir.Value:
    """The sum of a vector, CHUNK elements an iteration of a `while` (the last chunk's start is clamped
    into range, so it sums some elements twice: a sum that only says whether they are finite)."""
    size = emit.shape_of(flat)[0]
    index, scalar = emit.tensor_type((), I64), emit.tensor_type((), dt)
    loop = hlo.WhileOp([index, scalar], [emit.const(0, I64), emit.const(0.0, dt)])
    cond = loop.cond.blocks.append(index, scalar)
    with ir.InsertionPoint(cond):
        hlo.return_([emit.compare(cond.arguments[0], emit.const(-(-size // CHUNK), I64), "LT", I64)])
    body = loop.body.blocks.append(index, scalar)
    with ir.InsertionPoint(body):
        i, total = body.arguments
        chunk = hlo.dynamic_slice(flat, [hlo.multiply(i, emit.const(CHUNK, I64))], [CHUNK])
        total = hlo.add(total, emit.reduce(chunk, emit.const(0.0, dt), [0], hlo.add, dt))
        hlo.return_([hlo.add(i, emit.const(1, I64)), total])
    return loop.results[1]


def _flat(x: ir.Value) -> ir.Value:
    shape = emit.shape_of(x)
    size = int(np.prod(shape)) if shape else 1
    return hlo.reshape(ir.RankedTensorType.get([size], ir.RankedTensorType(x.type).element_type), x)


def _first(mask: ir.Value) -> ir.Value:
    """Flat index of the first true element of `mask` (i64)."""
    flat = _flat(mask)
    n = emit.shape_of(flat)[0]
    iota = hlo.iota(emit.tensor_type((n,), I64), 0)
    candidates = hlo.select(flat, iota, emit.const(n, I64, (n,)))
    return emit.reduce(candidates, emit.const(n, I64), [0], hlo.minimum, I64)


def _at(x: ir.Value, index: ir.Value) -> ir.Value:
    """Element `index` (flat) of `x`: a float as it is (a convert to f64 inside the program read a subnormal
    as 0: XLA runs programs flushing them, so `1.0 / 1e-40` reported `y = 0.0`), complex<f64> for complex
    numbers, u64 for u64 (its values past i64 shown as they are) and i64 for other integers."""
    dt = _element_dtype(x.type)
    if emit.shape_of(x):
        x = hlo.reshape(ir.RankedTensorType.get([], ir.RankedTensorType(x.type).element_type),
                        hlo.dynamic_slice(_flat(x), [index], [1]))
    if _is_complex(x.type):
        return hlo.convert(ir.RankedTensorType.get([], ir.ComplexType.get(ir.F64Type.get())), x)
    wide = dt if dt.is_float or dt == DTYPES["u64"] else I64
    return emit.convert(x, dt, wide) if dt != wide else x


def _i64_array(values) -> ir.Attribute:
    return ir.DenseI64ArrayAttr.get([int(v) for v in values])


def _strings(values) -> ir.Attribute:
    return ir.ArrayAttr.get([ir.StringAttr.get(v) for v in values])


# ---- the pass ---------------------------------------------------------------------------------
class _Guarder:
    def __init__(self, module: ir.Module, options: GuardOptions):
        self.module = module
        self.options = options
        self.fop = entry(module)
        self.next_callback = len(sites_in(module))     # after the callbacks and bounded loops numbered
        self.lane_loops: dict = {}          # position of a loop over vmap's lanes -> "vmap(f)"
        self.unrolled_at: dict = {}         # (unrolled loop id, adjoint?) -> its position (`_unrolled`)
        self.run = None
        self.position = 0
        self.reaches = None        # origin build: the results the current top-level operation flows into
        self.forward = None        # forward id -> the operations with it (compiler/autodiff.py), made on demand
        self.places = None
        # Origin build, results scope: each element's origin (the index of the report site that made it
        # non-finite) for the values of the entry block; a `flow` report at the return sends the result's.
        self.flow = options.origins and options.scope == "results" and bool(options.floats)
        self.top = False
        self.origins = {}
        self.arg_sites = {}
        self.deferred = []         # the entry block's origin reports, made at its return
        self.program = None        # the function's own operations, before any check was added (`_live`)

    def _batch_of(self, op):
        """The vmaps whose lanes are the first dimensions of `op`'s result (abi.BATCH_OF), or None: an adjoint's
        are its forward operation's where it has that one's result shape (a cotangent of the same value)."""
        if abi.BATCH_OF in op.attributes:
            return op.attributes[abi.BATCH_OF]
        forward = self._forward_of(op)
        if forward is None or abi.BATCH_OF not in forward.attributes or len(op.results) != 1 \
                or op.results[0].type != forward.results[0].type:
            return None
        return forward.attributes[abi.BATCH_OF]

    def _forward_of(self, op):
        """For an adjoint operation (compiler/autodiff.py: a `vjp(<op>)#<id>` location), the forward operation
        with that id whose values it can see (a copy before it in its block or an enclosing one), or None."""
        forward_id = adjoint_id(op.location)
        if forward_id is None:
            return None
        if self.forward is None:
            self.forward, self.places = {}, {}

            def visit(inner):
                inner = inner.operation
                if abi.FORWARD_ID in inner.attributes:
                    self.forward.setdefault(ir.IntegerAttr(inner.attributes[abi.FORWARD_ID]).value, []).append(inner)
                return ir.WalkResult.ADVANCE
            walk_ops(self.fop.operation, visit)
        candidates = self.forward.get(forward_id, [])
        best = None
        for here in _enclosing(op):                # op, then the ops holding it, innermost first
            for cand in candidates:
                if cand.block == here.block and self._place(cand) < self._place(here):
                    if best is None or self._place(cand) > self._place(best):
                        best = cand
            if best is not None:
                return best
        return None

    def _place(self, op) -> int:
        """`op`'s position in its block (each block numbered once)."""
        if op not in self.places:
            for i, o in enumerate(op.block.operations):
                self.places[o.operation] = i
        return self.places[op]

    def run_arg(self) -> ir.Value:
        if self.run is None:
            self.run = run_argument(self.fop)
        return self.run

    # -- driving ------------------------------------------------------------------------------
    def instrument(self) -> None:
        body = self.fop.regions[0].blocks[0]
        already = guarded_kinds(self.fop)
        if _instruments_operations(self.options):
            self._add_loop_counters()
            self.program = set()
            walk_ops(self.fop.operation, lambda op: self.program.add(op.operation) or ir.WalkResult.ADVANCE)
            # Flow is traced where an operation can drop a non-finite value (elsewhere the def-use chains say as
            # much); the arguments' sites come first, as their reports do.
            self.flow = self.flow and any(map(_drops_nonfinite, self.program))
            if self.flow:
                hidden = self._hidden_args()
                for i, arg in enumerate(body.arguments):
                    if i not in hidden and _is_inexact(arg.type):
                        self.arg_sites[i] = self.next_callback
                        self.next_callback += 1
            self._block(body, [], _results_reached(body) if self.options.origins else None)
            if self.options.floats and (self.options.origins or self.options.scope == "all-ops"):
                self._check_arguments(body)      # after the walk: these checks are not instrumented again
        if self.options.floats and self.options.scope == "results" and not self.options.origins and not already:
            self.fop.attributes[abi.CHECK_RESULTS] = ir.StringAttr.get(",".join(sorted(self.options.floats)))
        self.fop.attributes[abi.GUARDED] = ir.StringAttr.get(",".join(sorted(self.options.kinds | already)))

    def _add_loop_counters(self) -> None:
        """An iteration counter for every loop that has a check inside (reports name the iteration); the
        other loops stay exactly as they were (`_block` does not enter them)."""
        loops = []

        def collect(op):
            if op.operation.name == "stablehlo.while" and self._has_checks(op.operation):
                loops.append(op.operation)
            return ir.WalkResult.ADVANCE
        walk_ops(self.fop.operation, collect)
        for op in loops:
            if abi.COUNTED not in op.attributes:     # an already guarded module's loops keep their counters
                count_iterations(op)

    def _may_check(self, op) -> bool:
        """Whether `_checks` may instrument `op` (an over-approximation is harmless)."""
        kinds, name = self.options.kinds, op.name
        return ("div0" in kinds and (abi.DIV0 in op.attributes or name in ("stablehlo.divide", "stablehlo.remainder")
                                     and abi.SAFE_DIVISOR not in op.attributes and not _is_float(op.results[0].type))
                or "bounds" in kinds and name in INDEXING and abi.IN_BOUNDS not in op.attributes
                or bool(self.options.floats) and (self.options.origins or self.options.scope == "all-ops")
                and _computes(op))

    def _has_checks(self, root) -> bool:
        """Whether an operation inside `root` (a loop, or the module) may get a check."""
        return _contains(root, lambda op: op != root and self._may_check(op))

    def _block(self, block, loops: list, reaches: list | None = None) -> None:
        for i, op in enumerate(list(block.operations)):
            if reaches is not None:
                self.reaches = reaches[i]
            self.top = reaches is not None
            self.position += 1
            position = self.position
            name = op.operation.name
            if self.flow and self.top and name == "func.return":
                self._flow_report(op.operation, position)
                continue
            unrolled = self._unrolled(op.operation, position)
            here = loops + unrolled
            if name == "stablehlo.custom_call" and not unrolled and abi.KIND in op.attributes \
                    and attr_text(op.attributes[abi.KIND]) == "assert":     # its place among the checks: a fault
                op.attributes[abi.ORDER] = _i64_array([p for p, _ in loops] + [position])   # before it comes first
            if name in DESCEND:
                self._regions(op.operation, here, position)
                continue
            self._checks(op.operation, here, position)

    def _unrolled(self, op, position: int) -> list:
        """(loop position, iteration) for each loop unrolled by autodiff whose copy holds `op` (abi.UNROLLED;
        an adjoint's are its forward operation's), as a loop's counter: a report names the iteration. A loop's
        position is where its first copy (or first adjoint) was met, so reports order by iteration; an
        adjoint's is negative, its copies running the iterations last first (as a backward loop's)."""
        source = op
        if abi.UNROLLED not in op.attributes:
            if not self.unrolled_at:
                return []                       # (no copy met yet: adjoints come after their forward ops)
            source = self._forward_of(op)
            if source is None or abi.UNROLLED not in source.attributes:
                return []
        pairs = i64s(source.attributes[abi.UNROLLED])
        # (an adjoint may carry its forward operation's marks itself: compiler/autodiff.py _mark_unrolled_adjoints)
        adjoint = source is not op or adjoint_id(op.location) is not None
        sign = -1 if adjoint else 1
        out = [(sign * self.unrolled_at.setdefault((loop, adjoint), position), k)
               for loop, k in zip(pairs[::2], pairs[1::2])]
        if abi.UNROLLED_LANES in source.attributes:         # a copy of vmap's lanes: a report names the lane
            for (at, _), lane in zip(out, ir.ArrayAttr(source.attributes[abi.UNROLLED_LANES])):
                if emit.attr_text(lane):
                    self.lane_loops[at] = emit.attr_text(lane)
        return out

    def _regions(self, op, loops: list, position: int) -> None:
        if op.name == "stablehlo.while":
            if abi.COUNTED not in op.attributes:
                return                   # nothing inside is checked: the loop stays as it was
            cond, body = op.regions[0].blocks[0], op.regions[1].blocks[0]
            if abi.LANES in op.attributes:      # vmap's lanes, one by one: reports name the lane
                self.lane_loops[position] = emit.attr_text(op.attributes[abi.LANES])
            # A loop counting down (a backward loop) has its position negative: the report orders its
            # iterations by execution, the highest counter first (runtime/guards.py Event.key).
            at = -position if abi.COUNTS_DOWN in op.attributes else position
            self._block(cond, loops + [(at, cond.arguments[len(cond.arguments) - 1])])
            self._block(body, loops + [(at, body.arguments[len(body.arguments) - 1])])
            return
        for region in op.regions:
            for block in region.blocks:
                self._block(block, loops)

    # -- what each operation gets ---------------------------------------------------------------
    def _checks(self, op, loops, position) -> None:
        kinds = self.options.kinds
        ip = ir.InsertionPoint.after(op)       # one point per op: checks are inserted in order after it
        if "div0" in kinds:
            self._div0(ip, op, loops, position)
        if "bounds" in kinds and op.name in INDEXING:
            self._bounds(ip, op, loops, position)
        if self.options.floats and (self.options.origins or self.options.scope == "all-ops") and _computes(op):
            self._origin(ip, op, loops, position)

    def _div0(self, ip, op, loops, position) -> None:
        if abi.DIV0 in op.attributes:
            if _never_zero(op.operands[2]):
                return                  # `v // 2`: a literal divisor has nothing to report
            # arrc's `select(divisor == 0, 1, divisor)`: the test is operand 0; the dividend is operand 0 of
            # the division that uses the select.
            division = _division_using(op.results[0])
            values = [("dividend", division.operands[0])] if division is not None else []
            # the expression's result: arrc's `select(divisor == 0, 0, quotient)`
            fixed = [u.owner.operation for u in op.operands[0].uses if u.owner.name == "stablehlo.select"
                     and u.operand_number == 0 and u.owner.operation != op]
            ip, bad = self._reaching(ip, op, op.operands[0], fixed[0].results[0] if len(fixed) == 1 else None)
            self._report(ip, op, bad, loops, position, "div0", values + [("divisor", op.operands[2])])
            return
        if op.name in ("stablehlo.divide", "stablehlo.remainder") and abi.SAFE_DIVISOR not in op.attributes:
            dt = _element_dtype(op.results[0].type)
            if dt is not None and dt.is_int and not _never_zero(op.operands[1]):
                replaced = _zero_replaced(op.operands[1])
                divisor = replaced or op.operands[1]
                with ip, op.location:
                    bad = emit.compare(divisor, emit.const(0, dt, emit.shape_of(divisor)), "EQ", dt)
                ip, bad = self._reaching(ip, op, bad, op.results[0])
                self._report(ip, op, bad, loops, position, "div0", [("dividend", op.operands[0])]
                             + ([("divisor", replaced)] if replaced else []))

    def _live_at_end(self, op, value, masked: bool = False):
        """(the block's end, where `value`'s elements reach a result of the block: `_live`), or None where
        every element may. For an op vmap computes for lanes that drop it (`masked`), a derivative's tape
        is no result: the backward pass reads a dropped lane's value only for adjoints masked as the op is."""
        block = op.block
        end = ir.InsertionPoint.at_block_terminator(block)     # (indexing the list walks it: quadratic)
        with end, op.location:
            live = _live(value, block, self.program, tapes=not masked)
        return None if live is None else (end, live)

    def _reaching(self, ip, op, bad, quotient):
        """(insertion point, elements to report) for a division by zero at `bad` whose elements become
        `quotient` (or an index out of range at `bad`, a scalar where it is a slice's, whose read elements
        become `quotient`): only those that a `where`/`select` does not drop on their way to a result, as
        the nan guard reports only NaNs that reach one. The test needs the selects' conditions, so it goes
        at the end of the block; it is `bad` unchanged where no select masks the quotient."""
        whole = not emit.shape_of(bad)          # one test for all of `quotient`: reported if any element reaches
        if quotient is None or not whole and emit.shape_of(quotient) != emit.shape_of(bad):
            return ip, bad
        live = self._live_at_end(op, quotient)
        if live is None:
            return ip, bad
        with live[0], op.location:
            return live[0], hlo.and_(bad, _any(live[1]) if whole else live[1])

    def _bounds(self, ip, op, loops, position) -> None:
        name = op.name
        if abi.IN_BOUNDS in op.attributes:
            return                      # `x[i]` for `i` in `range(len)`: in range by construction
        with ip, op.location:
            if name in ("stablehlo.dynamic_slice", "stablehlo.dynamic_update_slice"):
                operand = op.operands[0]
                dims = emit.shape_of(operand)
                if name == "stablehlo.dynamic_slice":
                    starts = list(op.operands[1:])
                    sizes = list(ir.DenseI64ArrayAttr(op.attributes["slice_sizes"]))
                else:
                    starts = list(op.operands[2:])
                    sizes = emit.shape_of(op.operands[1])
                bad = None
                raws = []
                for start, dim, size in zip(starts, dims, sizes):
                    dt = _element_dtype(start.type)
                    out = hlo.or_(emit.compare(start, emit.const(0, dt), "LT", dt),
                                  emit.compare(start, emit.const(dim - size, dt), "GT", dt))
                    bad = out if bad is None else hlo.or_(bad, out)
                    raws.append(_raw_index(start))
                extra = {abi.DIMS: _i64_array(dims), abi.SIZES: _i64_array(sizes)}
                values = [(f"index {d}", r) for d, r in enumerate(raws)]
                asked = starts
            else:
                axis, indices, size, dims = _single_axis_indexing(op)
                if axis is None:
                    return
                dt = _element_dtype(indices.type)
                shape = emit.shape_of(indices)
                bad = hlo.or_(emit.compare(indices, emit.const(0, dt, shape), "LT", dt),
                              emit.compare(indices, emit.const(dims[axis] - size, dt, shape), "GT", dt))
                extra = {abi.DIMS: _i64_array([dims[axis]]), abi.SIZES: _i64_array([size]),
                         abi.AXIS: _i64_array([axis])}
                values = [("index", _raw_index(indices))]
                asked = [indices]
        if any(raw != index for (_, raw), index in zip(values, asked)):
            extra[abi.WRAPPED_INDEX] = ir.BoolAttr.get(True)    # the report counts negatives from the end
        if name in ("stablehlo.gather", "stablehlo.dynamic_slice"):
            # a read out of range is reported where what it read reaches a result: `where(i < n, x[i], 0.0)`
            # drops it (and JAX's fill mode, `take`'s default, gathers, then selects its fill there)
            ip, bad = self._reaching(ip, op, bad, op.results[0])
        self._report(ip, op, bad, loops, position, "bounds", values, extra=extra)

    def _origin(self, ip, op, loops, position) -> None:
        floats = [r for r in op.results if _is_inexact(r.type)]
        if not floats or _constant(op.results[0]) and not _used_structurally(op):
            return       # a literal's value is reported by the operations that use it (`where(x > 0, x, -inf)`)
        kinds = self.options.floats
        for result in floats:
            shape = emit.shape_of(result)
            # In a loop or branch, where no per-element trace runs: only where no `where` of the same block
            # drops it (`where(i == 2, log(c - 10), c + 1)` in a scan is NaN only at i == 2). Found before
            # the check below adds uses of `result`.
            masked = abi.MASKED in op.attributes
            live = self._live_at_end(op, result, masked) if (self.options.scope == "results" or masked) \
                and not (self.flow and self.top) else None
            operands = [o for o in op.operands if _is_inexact(o.type)]
            computed = [o for o in operands if not _constant(o)]    # a literal's non-finite value is this op's
            elementwise = op.name not in SPATIAL and not is_linalg(op) and all(emit.shape_of(o) == shape
                                                                                for o in operands)
            with ip, op.location:
                bad = _nonfinite(result, kinds)
                if op.name == "stablehlo.select":       # fresh where the chosen branch was finite
                    finite = [emit.const(True, BOOL, shape) if _constant(o) else hlo.not_(_nonfinite(o, kinds))
                              for o in op.operands[1:]]
                    bad = hlo.and_(bad, hlo.select(op.operands[0], *finite))
                    computed = []
                for o in computed:
                    if elementwise:
                        bad = hlo.and_(bad, hlo.not_(_nonfinite(o, kinds)))
                    else:
                        clean = hlo.not_(_any(_nonfinite(o, kinds)))
                        bad = hlo.and_(bad, emit.broadcast(clean, shape))
                kept = _lanes_kept(op, shape) if masked and (elementwise or is_linalg(op)) else None
                if kept is not None:     # (where a reduction or product stands before the select, `live` is None)
                    bad = hlo.and_(bad, kept)
            values = ([(_label(o, op), o) for o in operands] if elementwise else []) + [("result", result)]
            forward = self._forward_of(op)
            if forward is not None:                 # an adjoint: the forward operation's operands, same index
                values[-1:-1] = [(abi.FORWARD_LABEL + _label(o, forward), o) for o in forward.operands
                                 if _is_inexact(o.type) and emit.shape_of(o) == shape]
            extra = {abi.REACHES: _i64_array(self.reaches)} if self.reaches is not None else {}
            failed = _factorization(op)
            if failed is not None:           # its report names the matrix that failed (runtime/guards.py)
                extra[abi.LINALG] = ir.StringAttr.get(failed[0])
                extra[abi.LINALG_BATCH] = _i64_array([failed[1]])
            if self.flow and self.top and 0 not in shape:
                # reported at the return, at the element that reached a result (`_flow_report`)
                site = self.next_callback
                self.next_callback += 1
                self.deferred.append((site, op, bad, loops, position, values, extra))
                with ip, op.location:
                    self.origins[result] = self._origin_of(ip, op, result, site, computed, elementwise)
            else:
                if live is not None:
                    with live[0], op.location:
                        bad = hlo.and_(bad, live[1])
                    ip = live[0]
                self._report(ip, op, bad, loops, position, "origin", values, extra=extra)

    # -- per-element flow (origin build, results scope) ----------------------------------------------
    def _origin_of(self, ip, op, result, site, computed, elementwise) -> ir.Value:
        """Each element's origin in `result`: the site of the operand's non-finite value it came from (the
        earliest site where several did), or `site` where this operation made it; CLEAN where it is finite."""
        shape = emit.shape_of(result)
        clean = emit.const(CLEAN, I64, shape)
        if op.name == "stablehlo.select":           # only the chosen branch reaches the result
            inherited = hlo.select(op.operands[0], self._origins(op.operands[1], ip),
                                   self._origins(op.operands[2], ip))
        elif op.name in MOVES:                      # the same movement, applied to the origins
            moved = [self._origins(o, ip) if _is_inexact(o.type) else o for o in op.operands]
            inherited = ir.Operation.create(op.name, results=[emit.tensor_type(shape, I64)], operands=moved,
                                            attributes=dict(op.attributes.items())).results[0]
        else:
            inherited = clean
            for o in computed:
                first = self._origins(o, ip)
                inherited = hlo.minimum(inherited, first if elementwise else emit.broadcast(_least(first), shape))
        inherited = hlo.select(emit.compare(inherited, clean, "EQ", I64), _keys(site, shape), inherited)
        return hlo.select(_nonfinite(result, self.options.floats), inherited, clean)

    def _origins(self, value, ip) -> ir.Value:
        """The origins of `value`'s elements, built at `ip` where they are not known yet: an argument's
        non-finite elements come from its site, a literal's are CLEAN (its user reports them), and those of
        a value from inside a loop or branch are UNTRACED."""
        if value in self.origins:
            return self.origins[value]
        shape = emit.shape_of(value)
        if _constant(value):
            return emit.const(CLEAN, I64, shape)
        body = self.fop.regions[0].blocks[0]
        site = None
        if isinstance(value, ir.BlockArgument) and value.owner == body and value.arg_number in self.arg_sites:
            site = self.arg_sites[value.arg_number]
            ip = ir.InsertionPoint(body.operations[0])     # once, for every use
        with ip:
            lost = emit.const(UNTRACED, I64, shape)
            origins = hlo.select(_nonfinite(value, self.options.floats), lost if site is None else _keys(site, shape),
                                 emit.const(CLEAN, I64, shape))
        if site is not None:
            self.origins[value] = origins
        return origins

    def _flow_report(self, ret, position) -> None:
        """At the entry's return: the earliest origin of each float result (runtime/guards.py `_reaching`), and
        the entry block's origin reports, each at the element that reached a result if one did (else at its
        first non-finite one)."""
        ip = ir.InsertionPoint(ret)
        values = []
        with ip, ret.location:
            for i, value in enumerate(ret.operands):
                if _is_inexact(value.type) and 0 not in emit.shape_of(value):
                    values.append((str(i), _least(self._origins(value, ip))))
            if values:
                self._report(ip, ret, emit.const(True, BOOL), [], position, "flow", values)
        for site, op, bad, loops, at, labelled, extra in self.deferred:     # (loops: unrolled ones only)
            with ip, op.location:
                reached = emit.const(CLEAN, I64)
                for _, key in values:
                    mine = emit.compare(hlo.shift_right_arithmetic(key, emit.const(SITE_SHIFT, I64)),
                                        emit.const(site, I64), "EQ", I64)
                    reached = hlo.minimum(reached, hlo.select(mine, hlo.and_(key, emit.const(2 ** SITE_SHIFT - 1, I64)),
                                                              emit.const(CLEAN, I64)))
                first = hlo.select(emit.compare(reached, emit.const(CLEAN, I64), "EQ", I64), _first(bad), reached)
            self._report(ip, op, bad, loops, at, "origin", labelled, extra=extra, site=site, first=first)

    def _hidden_args(self) -> set:
        from .rewrite import int_attr
        return {int_attr(self.fop, abi.RUN_ARG)} | _effect_args(self.fop)

    def _check_arguments(self, body) -> None:
        hidden = self._hidden_args()
        ip = ir.InsertionPoint(body.operations[0])
        for i, arg in enumerate(body.arguments):
            if i in hidden or not _is_inexact(arg.type):
                continue
            with ip, self.fop.location:
                bad = _nonfinite(arg, self.options.floats)
            self._report(ip, self.fop, bad, [], -len(body.arguments) + i, "argument", [(_label(arg), arg)],
                         loc=_value_location(arg, self.fop.location), extra={abi.ARG: _i64_array([i])},
                         site=self.arg_sites.get(i))

    # -- one report site ------------------------------------------------------------------------------
    def _report(self, ip, op, bad, loops, position, kind, values, loc=None, extra=None, site=None,
                first=None) -> int | None:
        """A report site for the elements `bad` marks, at its first one or at `first` (its callback index `site`
        if given); returns the index."""
        if 0 in emit.shape_of(bad):
            return None                      # an empty array has no element to report
        if site is None:
            site = self.next_callback
            self.next_callback += 1
        loc = loc or op.location
        with ip, loc:
            any_bad = _any(bad)
            first = _first(bad) if first is None else first
            branch = hlo.IfOp([], any_bad)
            with ir.InsertionPoint(branch.true_branch.blocks.append()):
                operands = [self.run_arg(), first] + [counter if isinstance(counter, ir.Value) else emit.const(counter, I64)
                                                      for _, counter in loops]       # (an unrolled loop's: an int)
                operands += [_at(v, first) if emit.shape_of(v) == emit.shape_of(bad) else _at(v, emit.const(0, I64))
                             for _, v in values]
                call = hlo.CustomCallOp([], operands, call_target_name=CALLBACK_TARGET["cpu"],
                                        has_side_effect=ir.BoolAttr.get(True),
                                        api_version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 4),
                                        backend_config=ir.DictAttr.get({"index": ir.IntegerAttr.get(
                                            ir.IntegerType.get_unsigned(64), site)}))
                attrs = call.operation.attributes
                attrs[abi.KIND] = ir.StringAttr.get(kind)
                attrs[abi.ORDER] = _i64_array([p for p, _ in loops] + [position])
                lanes = [self.lane_loops.get(p, "") for p, _ in loops]         # (lane loops never count down)
                if any(lanes):
                    attrs[abi.LANES] = _strings(lanes)
                batch_of = self._batch_of(op.operation)
                if batch_of is not None:        # vmap's lanes are its results' first dimension
                    attrs[abi.BATCH_OF] = batch_of
                attrs[abi.SHAPE] = _i64_array(emit.shape_of(bad))
                attrs[abi.LABELS] = _strings([label for label, _ in values])
                attrs[abi.OP] = ir.StringAttr.get(op.operation.name)
                for key, value in (extra or {}).items():
                    attrs[key] = value
                hlo.return_([])
            with ir.InsertionPoint(branch.false_branch.blocks.append()):
                hlo.return_([])
        return site


def _computes(op) -> bool:
    """Whether `op` computes values (the origin guard's business), not structure: a linear-algebra
    placeholder does (not `shard`'s, which lays its operand out), any other custom_call (a host callback)
    does not."""
    return op.name not in STRUCTURAL or is_linalg(op) and linalg_call(op)[0] not in (SHARD, STOP_GRADIENT)


# JAX's lowering of a factorization selects NaN where the kernel's info says it failed: the kernel's family
# names the operation (a module from elsewhere, or arr's after passes/linalg.py).
FAILING_KERNELS = {"potrf": "cholesky"}


def _factorization(op) -> tuple[str, int] | None:
    """(the linear-algebra operation, its batch rank) where `op` is one (arr's placeholder) or JAX's select
    of NaN where a factorization kernel failed; else None."""
    if is_linalg(op):
        return linalg_call(op)[0], _batch_rank(op)
    if op.name != "stablehlo.select" or not _constant(op.operands[2]):
        return None
    kernel = op.operands[1].owner
    if getattr(kernel, "name", "") != "stablehlo.custom_call":
        return None
    target = emit.attr_text(kernel.attributes["call_target_name"])
    family = next((f for f in FAILING_KERNELS if target.endswith(f"{f}_ffi")), None)    # lapack_dpotrf_ffi, cusolver_potrf_ffi
    if family is None:
        return None
    return FAILING_KERNELS[family], max(len(emit.shape_of(kernel.operands[0])) - 2, 0)


def _batch_rank(op) -> int:
    """The batch dimensions of a linear-algebra operation: its matrix operands' leading ones (a right-hand
    side that is a vector has none)."""
    if linalg_call(op)[0] in ("norm", "lstsq"):
        return 0
    return max(max(len(emit.shape_of(o)) - 2, 0) for o in op.operands)


LIVE_DEPTH = 64         # elementwise operations `_live` follows from a division before it says "may reach"


def _live(value: ir.Value, block, program: set, depth: int = LIVE_DEPTH, seen: dict | None = None,
          tapes: bool = True) -> ir.Value | None:
    """Where the elements of `value` can reach a result of `block` (an i1 mask built at the insertion point):
    through elementwise operations and the chosen branch of selects in `block` (a value nothing uses reaches
    nothing; without `tapes`, a derivative's tape is not a use; nor is an operation not in `program`: a check
    made for another operation, whose mask may read a select's condition that `value` flows into); None
    where every element may (a use of another kind, or deeper than `depth`). `seen` holds the values already
    followed (one mask each: a value used twice is not followed twice)."""
    seen = {} if seen is None else seen
    if value in seen:
        return seen[value]
    shape = emit.shape_of(value)
    uses = [use for use in value.uses if use.owner.operation in program
            and (tapes or not _records(use.owner.operation))]
    live = None if uses else emit.const(False, BOOL, shape)
    for use in uses:
        user = use.owner.operation
        reshape = user.name == "stablehlo.reshape"          # the same elements in the same order
        # `stop_gradient` is its operand (vmap's gates hold one: compiler/batching.py `_gated`)
        same = reshape or is_linalg(user) and linalg_call(user)[0] == STOP_GRADIENT
        if depth == 0 or user.block != block or user.name in STRUCTURAL | SPATIAL and not same \
                or len(user.results) != 1 or emit.shape_of(user.results[0]) != shape and not reshape:
            live = None
            break
        after = _live(user.results[0], block, program, depth - 1, seen, tapes)
        if reshape and after is not None:
            term = emit.op("stablehlo.reshape", emit.tensor_type(shape, BOOL), [after])
        elif user.name == "stablehlo.select" and use.operand_number > 0:
            pred = emit.broadcast(user.operands[0], shape)
            chosen = emit.const(True, BOOL, shape) if user.operands[1] == user.operands[2] \
                else pred if use.operand_number == 1 else hlo.not_(pred)
            term = chosen if after is None else hlo.and_(chosen, after)
        elif user.name in ("stablehlo.and", "stablehlo.or") and use.operand_number == 1 \
                and _element_dtype(value.type) is BOOL:
            # `a and b`, `a or b`: Python reads b only where a does not decide (`i < n and x[i] > 0`)
            first = user.operands[0]
            chosen = first if user.name == "stablehlo.and" else hlo.not_(first)
            term = chosen if after is None else hlo.and_(chosen, after)
        elif after is None:
            live = None
            break
        else:
            term = after
        live = term if live is None else hlo.or_(live, term)
    seen[value] = live
    return live


def _lanes_kept(op, shape: list) -> ir.Value | None:
    """For an elementwise or linear-algebra op of a branch vmap computes for every lane (abi.MASKED): an i1
    mask of `shape` (the lanes first, as its operands'), true in the lanes that took the branch. From the gate
    vmap put on a batched operand (compiler/batching.py `_gated`), whose condition holds a lane's `keep`;
    None where no operand is gated."""
    for o in op.operands:
        gate = o.owner
        if not _has_attr(gate, abi.LANE_GATE) or gate.name != "stablehlo.select":
            continue
        keep = gate.operands[0]
        dims = emit.shape_of(keep)
        if not dims or not shape or dims[0] != shape[0]:
            continue
        lanes = emit.reduce(keep, emit.const(False, BOOL), list(range(1, len(dims))), hlo.or_, BOOL) \
            if len(dims) > 1 else keep
        return hlo.broadcast_in_dim(emit.tensor_type(shape, BOOL), lanes, [0])
    return None


def _records(op) -> bool:
    """Whether `op` writes its operand on a derivative's tape (directly, or reshaped to a row of it)."""
    if op.name == "stablehlo.reshape":
        return all(_records(use.owner.operation) for use in op.results[0].uses)
    return _has_attr(op, abi.TAPE_WRITE)


def _contains(root, test) -> bool:
    """Whether `test(op)` holds for an operation inside `root` (or `root` itself)."""
    found = []

    def visit(op):
        if test(op.operation):
            found.append(op)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE
    walk_ops(root, visit)
    return bool(found)


def _drops_nonfinite(op) -> bool:
    """Whether `op` can drop a non-finite element of a float operand where the def-use chains cannot see it:
    a `where`, a slice or a gather keeps some elements only; a comparison or a cast to an integer makes a
    value that is finite anyway (`sum(isnan(y))`, `y > 0`). (Arithmetic such as `1.0 / inf` is not counted.)"""
    if op.name in ("func.return", "stablehlo.return"):
        return False
    return any(_is_inexact(o.type) for o in op.operands) and (
        op.name in DROPS or not any(_is_inexact(r.type) for r in op.results))


def _enclosing(op):
    """`op` and the operations that hold it, innermost first, up to the function's."""
    op = op.operation
    while op is not None and op.name != "func.func":
        yield op
        op = op.parent and op.parent.operation


def _is_float(t: ir.Type) -> bool:
    return isinstance(t, ir.RankedTensorType) and (_element_dtype(t) or DTYPES["i32"]).is_float


def _is_complex(t: ir.Type) -> bool:
    return isinstance(t, ir.RankedTensorType) and isinstance(t.element_type, ir.ComplexType)


def _is_inexact(t: ir.Type) -> bool:
    """A float or complex tensor: the nan/inf guards' business (a complex one, from a module from elsewhere,
    is non-finite where a part is)."""
    return _is_float(t) or _is_complex(t)


def _never_zero(value: ir.Value) -> bool:
    """Whether `value` is a constant (or a broadcast of one) with no zero element."""
    elements = emit.constant_array(value)
    return elements is not None and bool(np.all(elements != 0))


def _zero_replaced(divisor: ir.Value) -> ir.Value | None:
    """`d` where `divisor` is `select(d == 0, c, d)` with a nonzero constant `c`, the program's own divisor
    that JAX's `jnp.remainder` replaces where it is 0 (which makes `a % 0` 0, as NumPy); else None."""
    found = _selected_unless(divisor, "EQ")
    return found[0] if found is not None and _never_zero(found[1]) else None


def _selected_unless(value: ir.Value, direction: str) -> tuple[ir.Value, ir.Value] | None:
    """(v, c) where `value` is `select(compare(v, 0, direction), c, v)` (v, except where it compares so with
    zero), else None."""
    select = value.owner
    if getattr(select, "name", "") != "stablehlo.select":
        return None
    test, chosen, v = select.operands
    compare = test.owner
    if getattr(compare, "name", "") != "stablehlo.compare" or compare.operands[0] != v \
            or direction not in str(compare.attributes["comparison_direction"]):
        return None
    zero = emit.constant_array(compare.operands[1])
    return (v, chosen) if zero is not None and not np.any(zero) else None


def _division_using(divisor: ir.Value, depth: int = 3):
    """The divide/remainder that `divisor` flows into as its right operand (through arrc's selects)."""
    for use in divisor.uses:
        owner = use.owner
        name = getattr(owner, "name", "")
        if name in ("stablehlo.divide", "stablehlo.remainder"):
            return owner
        if name == "stablehlo.select" and depth:
            found = _division_using(owner.results[0], depth - 1)
            if found is not None:
                return found
    return None


def _constant(value: ir.Value) -> bool:
    """Whether `value` is a literal: a constant, or one broadcast, reshaped or converted (arrc's `-inf` in
    `where(x > 0, x, -inf)`, a reduction's initial value)."""
    name = getattr(value.owner, "name", "")
    if name in ("stablehlo.broadcast_in_dim", "stablehlo.reshape", "stablehlo.convert"):
        return _constant(value.owner.operands[0])
    return name == "stablehlo.constant"


def _used_structurally(op) -> bool:
    """Whether a result of `op` goes where no operation reports it: returned, carried by a loop, called."""
    return any(use.owner.name in STRUCTURAL for r in op.results for use in r.uses)


def _least(x: ir.Value) -> ir.Value:
    """The least element of an i64 array (a scalar as it is)."""
    shape = emit.shape_of(x)
    return emit.reduce(x, emit.const(CLEAN, I64), list(range(len(shape))), hlo.minimum, I64) if shape else x


def _keys(site: int, shape) -> ir.Value:
    """The origin keys of `site`'s elements: `site << 32 | flat index` (module comment at CLEAN)."""
    base = emit.const(site << SITE_SHIFT, I64, shape)
    if not shape:
        return base
    size = int(np.prod(shape))
    index = hlo.reshape(emit.tensor_type(shape, I64), hlo.iota(emit.tensor_type((size,), I64), 0))
    return hlo.or_(base, index)


def _results_reached(body) -> list[list[int]]:
    """For each operation of the entry block, the indices of the returned values its results flow into
    (through the def-use chains of the block; an operation nested in a loop or branch counts as its
    top-level ancestor). The origin build uses it to blame a non-finite value that reached a bad result
    rather than one the program masked on the way to another result."""
    ops = [op.operation for op in body.operations]
    position = {op: i for i, op in enumerate(ops)}
    reached: list[set] = [set() for _ in ops]
    ret = ops[-1]
    for i, op in reversed(list(enumerate(ops))):
        for result in op.results:
            for use in result.uses:
                user = use.owner.operation if hasattr(use.owner, "operation") else use.owner
                if user == ret:
                    reached[i].add(use.operand_number)
                    continue
                while user.parent is not None and user not in position:
                    user = user.parent.operation
                if user in position and position[user] > i:
                    reached[i] |= reached[position[user]]
    return [sorted(r) for r in reached]


def _has_attr(owner, name: str) -> bool:
    try:
        return name in owner.attributes
    except (AttributeError, TypeError):
        return False


def _raw_index(value: ir.Value) -> ir.Value:
    """The index the program asked for, before arrc wrapped a negative one (`-1` -> `n - 1`) or saturated
    a u64 one into i64 (compiler/ops_index.py `_start_ir`: convert(minimum(u64 index, i64 max)))."""
    owner = value.owner
    if isinstance(owner, ir.Operation) or hasattr(owner, "attributes"):
        try:
            if abi.WRAPPED_INDEX in owner.attributes:
                return owner.operands[2]
            if abi.SATURATED_INDEX in owner.attributes:
                return owner.operands[0].owner.operands[0]
        except (AttributeError, TypeError):
            pass
    return _jax_wrapped(value) or value


def _jax_wrapped(index: ir.Value) -> ir.Value | None:
    """`i` where `index` is JAX's `select(i < 0, i + n, i)`, a negative index counted from the end (`x[-1]`),
    or that select reshaped or broadcast (a gather's indices; the same operation is made of `i`)."""
    move = index.owner
    if getattr(move, "name", "") in ("stablehlo.reshape", "stablehlo.broadcast_in_dim"):
        inner = _jax_wrapped(move.operands[0])
        return None if inner is None else ir.Operation.create(
            move.name, results=[index.type], operands=[inner], attributes=dict(move.attributes.items())).results[0]
    found = _selected_unless(index, "LT")
    return found[0] if found is not None and getattr(found[1].owner, "name", "") == "stablehlo.add" else None


def _single_axis_indexing(op):
    """(axis, indices, slice size, operand dims) for a gather/scatter indexing one axis; axis None otherwise."""
    if op.name == "stablehlo.gather":
        dn = hlo.GatherDimensionNumbers(op.attributes["dimension_numbers"])
        index_map = list(dn.start_index_map)
        operand, indices = op.operands[0], op.operands[1]
        sizes = list(ir.DenseI64ArrayAttr(op.attributes["slice_sizes"]))
    else:
        dn = hlo.ScatterDimensionNumbers(op.attributes["scatter_dimension_numbers"])
        index_map = list(dn.scattered_dims_to_operand_dims)
        operand, indices = op.operands[0], op.operands[1]
        sizes = None
    if _has_attr(indices.owner, abi.CLAMPED_INDEX):
        indices = indices.owner.operands[1]          # check what the program asked for, not the clamped value
    shape = emit.shape_of(indices)
    rank = len(shape)
    if len(index_map) != 1:
        return None, None, None, None
    if dn.index_vector_dim == rank - 1 and shape and shape[-1] == 1:
        # JAX's form: indices [k, 1] with the index vector in the last dimension.
        indices = hlo.reshape(ir.RankedTensorType.get(list(shape[:-1]), ir.RankedTensorType(indices.type).element_type),
                              indices)
    elif dn.index_vector_dim != rank:
        return None, None, None, None
    axis = index_map[0]
    return axis, indices, (sizes[axis] if sizes else 1), emit.shape_of(operand)


def _label(value: ir.Value, user=None) -> str:
    """How a report names an operand of `user`: its source text position, an argument's or a loop-carried
    variable's name, a literal's value, or the op kind."""
    owner = value.owner
    name = getattr(owner, "name", None)
    if name == "stablehlo.constant":
        return "literal"
    if name in ("stablehlo.broadcast_in_dim", "stablehlo.convert") and user is not None \
            and owner.location == user.location:
        return _label(owner.operands[0], owner)     # arrc's implicit broadcast or promotion: the operand's own
    if owner is not None and _has_attr(owner, abi.LANE_GATE):
        return _label(owner.operands[1], user)      # vmap's gate of an operand in a branch: the operand's own
    batched = _lane_row_of(owner) if name in ("stablehlo.reshape", "stablehlo.dynamic_slice") else None
    if batched is not None:
        return _label(batched, user)                # a lane's row of a batched value: that value's name
    from ..compiler.locations import call_frames, span_of
    if name == "stablehlo.while":                   # a loop's result: the name of the variable it carries
        carried = name_of(_value_location(owner.regions[1].blocks[0].arguments[value.result_number], None))
        if carried and carried != "for":
            return carried
    loc = _value_location(value, None)
    if loc is not None and (adjoint_id(loc) is not None or jax_backward(name_of(loc))):
        # made by a derivative's rule (`1 - x * x` of asin's, `y - 1` of a power's), at the forward operation's
        # location: that operation's text would name a value it did not compute
        return f"`{name.split('.')[-1]}` in the derivative" if name else "a value of the derivative"
    if loc is not None and user is not None:
        # made inside a call the user's function inlined: the call is the operand in the user's text
        frames, depth = call_frames(loc), len(call_frames(user.location))
        loc = frames[len(frames) - depth] if len(frames) > depth else loc
    if loc is not None:
        span = span_of(loc)
        name = name_of(loc)
        if isinstance(value, ir.BlockArgument) and name:
            return name
        if span is not None:
            return f"@{span.file}:{span.line}:{span.col}:{span.end_line}:{span.end_col}"
    owner = value.owner
    return getattr(owner, "name", "value")


def _lane_row_of(op):
    """The batched value whose row `op` reads inside a loop that runs vmap's lanes one by one (a
    `dynamic_slice` of a value the loop carries, or of one from outside it at the lane counter, maybe
    reshaped to drop the lane dimension), or None."""
    if op.name == "stablehlo.reshape":
        op = op.operands[0].owner
        if getattr(op, "name", None) != "stablehlo.dynamic_slice":
            return None
    source, start = op.operands[0], op.operands[1]
    if (loop := _lanes_loop_of(source)) is not None:
        return loop.operands[source.arg_number]
    return source if _lanes_loop_of(start) is not None else None


def _lanes_loop_of(value):
    """The loop running vmap's lanes one by one whose body takes `value` as an argument, or None."""
    loop = value.owner.owner if isinstance(value, ir.BlockArgument) else None
    return loop if getattr(loop, "name", None) == "stablehlo.while" and abi.LANES in loop.attributes else None


def _value_location(value: ir.Value, default):
    try:
        return value.location
    except Exception:  # noqa: BLE001  (older bindings lack Value.location)
        return default


def _effect_args(fop) -> set:
    from .rewrite import int_attr
    io = int_attr(fop, abi.IO_ARG)
    return set() if io is None else {io}


def guard_module(module: ir.Module, options: GuardOptions) -> list:
    """Instrument `module` in place; returns diagnostics (E0502) for what cannot be guarded."""
    if not options.kinds:
        return []
    with module.context, ir.Location.unknown():
        return _guard(module, options)


def _guard(module: ir.Module, options: GuardOptions) -> list:
    from ..compiler.diagnostics import Diagnostic
    already = guarded_kinds(entry(module))
    if already and not options.origins:
        return []                    # a module from `arrc guard`: its checks are in place
    if already:
        # The origin build of an already guarded module adds only the origin reports.
        options = GuardOptions(already & {"nan", "inf"}, options.scope, True)
    guarder = _Guarder(module, options)
    # Calls are inlined only when something inside will be checked: inlining alone can change the numbers
    # (XLA then folds a callee's constant inputs at compile time, with its own evaluator).
    if _instruments_operations(options) and guarder._has_checks(module.operation) and inline_calls(module):
        return [Diagnostic("E0502", "guards need a module without calls inside loops or branches",
                           None, help="inline the module's functions before guarding it")]
    guarder.instrument()
    return []


def _instruments_operations(options: GuardOptions) -> bool:
    """Whether checks go inside the computation (else only the results are checked, by a second executable)."""
    return bool(options.kinds & {"bounds", "div0"}) or bool(
        options.floats and (options.origins or options.scope == "all-ops"))


def results_check(fop) -> tuple[ir.Module | None, list[int]]:
    """For a main with `arrc.check_results`: a module whose main takes main's own results (all of them, so
    a caller passes them as they come) and returns one i1, whether a float result holds a value of the
    checked kinds (NaN, infinity), and the indices of the results it reads; (None, []) when there is
    nothing to check. Built in main's (active) context."""
    return _results_module(fop, lambda value, kinds: _any(_nonfinite(value, kinds)))


def results_filter(fop, platform: str) -> ir.Module | None:
    """`results_check`'s module made cheaper: false only where every float result is finite, through the
    sum of each (`_sum_not_finite`); true also where a finite result's sum overflows. A guarded call runs
    it after each call; where it is true the full call checks the elements (`results_check`)."""
    return _results_module(fop, lambda value, kinds: _sum_not_finite(value, platform))[0]


def _results_module(fop, test) -> tuple[ir.Module | None, list[int]]:
    from .rewrite import int_attr
    if abi.CHECK_RESULTS not in fop.attributes:
        return None, []
    kinds = parse_kinds(attr_text(fop.attributes[abi.CHECK_RESULTS]))
    results = list(ir.FunctionType(ir.TypeAttr(fop.attributes["function_type"]).value).results)
    own = results[: len(results) - int_attr(fop, abi.EXTRA_RESULTS, 0)]
    checked = [i for i, t in enumerate(own) if _is_inexact(t) and 0 not in ir.RankedTensorType(t).shape]
    if not checked:
        return None, []
    with ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            check = func.FuncOp("main", ir.FunctionType.get(own, [emit.tensor_type((), BOOL)]))
        with ir.InsertionPoint(check.add_entry_block()):
            flag = emit.const(False, BOOL)
            for i in checked:
                flag = hlo.or_(flag, test(check.arguments[i], kinds))
            func.ReturnOp([flag])
    return module, checked


@dataclass(frozen=True)
class GuardPass(ModulePass):
    """Run-time checks of the `options` kinds and scope (all kinds, results scope by default)."""
    name: ClassVar[str] = "guard"
    options: GuardOptions = GuardOptions(frozenset(KINDS))

    def apply(self, module: ir.Module) -> list:
        return guard_module(module, self.options)
