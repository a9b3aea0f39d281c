"""Indexing, slicing and indexed updates.

Static: `x[2]`, `x[-1]`, `x[1:3]`, `x[:, 0]`, `x[::-1]`, `x[..., 0]`. Run-time: `x[i]`, `x[i, :]`,
`x[i:i + 4]` (its length is provably 4) as dynamic slices, clamped into range like XLA; `x[idx]` with an
integer array gathers. Updates `x[...] = v` lower to dynamic_update_slice (or scatter for `x[idx]`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from . import abi, ast, emit
from .diagnostics import Label
from .emit import hlo
from .optable import CallCx, concrete, register, source_text
from .parse import grouped
from .types import BOOL, I32, I64, U64, ArrayType, Dim, int_range, promote, shape_str
from .values import ArrError, TupleVal, Val, affine_parts, describe, is_runtime_int


@dataclass
class _Axis:
    """What one dimension of the indexed array becomes.

    `start` is a Dim (static) or a run-time integer Val; `length` and `step` are static. `dropped` marks
    an integer index (the dimension disappears); `gather` holds an integer index array.
    """
    start: object
    length: Dim
    step: int = 1
    dropped: bool = False
    gather: Val | None = None


def _check_index_value(cx: CallCx, v, what: str, mask_help: str | None = None) -> None:
    """`mask_help`: the help for a bool mask where the index is that of an assignment."""
    if isinstance(v, Val) and v.type.dtype.is_bool and v.type.rank > 0:
        mask_error(cx, mask_help or "use `where(mask, x, 0)` to keep the shape, or `nonzero(mask, size=N, fill=v)` "
                                    "for at most N indices", assignment=mask_help is not None)
    if not isinstance(v, Val) or not (v.type.dtype.is_int or isinstance(v.static, Dim)):
        cx.error("E0204", f"{what} must be an integer, found {describe(v)}", f"this is {describe(v)}")


def mask_error(cx: CallCx, help: str, assignment: bool = False):
    note = "the number of true elements is only known at run time, so the result shape would be too"
    if assignment:
        note = "arr has no indexing by a mask, as `x[mask]` alone would have a value-dependent shape"
    cx.error("E0303", "boolean mask indexing gives a value-dependent shape", "a bool mask", help=help, notes=[note])


def mask_assignment_help(name: str, mask: str | None, mask_rank: int, rank: int, value: str | None,
                         op: str | None = None) -> str:
    """`x[mask] = v` (`op`: `x[mask] += v`) keeps x's shape, as `where` does: the help writes that `where`."""
    mask = mask or "mask"
    if mask_rank < rank:                        # NumPy's mask of the leading axes: its rows are selected
        mask = f"{grouped(mask)}[{', '.join([':'] * mask_rank + ['None'] * (rank - mask_rank))}]"
    value = value or "v"
    new = f"{name} {op} {value}" if op else value
    return f"an assignment through a mask keeps the shape: write `{name} = where({mask}, {new}, {name})`"


def _normalize(cx: CallCx, i: Dim, size: Dim) -> Dim:
    """A negative constant index counts from the end; out of range is an error once sizes are known."""
    raw = i
    if i.is_const and i.value < 0:
        i = size + i
    if i.is_const and size.is_const and not 0 <= i.value < size.value:
        cx.error("E0208", f"index {raw.value} is out of range for a dimension of size {size.value}",
                 f"valid indices are {-size.value}..{size.value - 1}")
    return i


def _slice_axis(cx: CallCx, parts, size: Dim, site: "_Site | None" = None) -> _Axis:
    for p in parts:
        if p is not None:
            _check_index_value(cx, p, "a slice bound")
    start, stop, step = parts
    if step is not None and not (isinstance(step.static, Dim) and step.static.is_const):
        cx.error("E0204", "slice step must be a literal integer or const", "not a constant step")
    step_v = 1 if step is None else step.static.value
    if step_v == 0:
        cx.error("E0204", "slice step cannot be zero", "zero step")
    if is_runtime_int(start) or is_runtime_int(stop):
        return _dynamic_slice_axis(cx, start, stop, step_v, size, site)
    start = None if start is None else start.static
    stop = None if stop is None else stop.static
    if size.is_const and all(p is None or p.is_const for p in (start, stop)):
        indices = range(size.value)[slice(None if start is None else start.value,
                                          None if stop is None else stop.value, step_v)]
        first = indices.start if len(indices) else 0
        return _Axis(Dim.const(first), Dim.const(len(indices)), step_v)

    # Symbolic size: Python's clamping cannot be decided, so bounds are taken as given; one that is never
    # positive counts from the end where it is always negative (`-k - 1`), and is refused where it may be 0
    # (`-k`: NumPy's x[-0:] is all of x, x[-k:] for k > 0 its last k), which no one type describes.
    def bound(b: Dim | None, default: Dim) -> Dim:
        if b is None:
            return default
        if b.is_const:
            return size + b if b.value < 0 else b
        if all(c < 0 for m, c in b.terms.items() if m) and b.terms.get((), 0) <= 0:
            if b.terms.get((), 0) == 0:
                cx.error("E0204", f"slice bound `{b}` counts from the end only while it is negative, and it is 0 "
                                  f"where {', '.join(sorted(b.variables))} is 0 (x[-0:] is all of x)",
                         "negative, or 0", help=f"count from the start: `{size + b}`")
            return size + b
        return b
    if step_v > 0:
        lo, hi = bound(start, Dim.const(0)), bound(stop, size)
        return _Axis(lo, _ceil_div(hi - lo, step_v), step_v)
    hi = bound(start, size - Dim.const(1))
    lo_excl = bound(stop, Dim.const(-1)) if stop is not None else Dim.const(-1)
    return _Axis(hi, _ceil_div(hi - lo_excl, -step_v), step_v)


def _dynamic_slice_axis(cx: CallCx, start, stop, step: int, size: Dim, site) -> _Axis:
    def fail():
        notes = ["a static length: the stop is the start plus a literal, `const` or shape variable "
                 "(`x[i:i + 4]`, `x[i:i + m]`, `x[k * b:(k + 1) * b]`), or `dynamic_slice(x, (i,), (4,))`"]
        reversed_window = _reversed_window_text(cx, step, site)
        if reversed_window:                   # (the mask of the help keeps the order: it reverses nothing)
            notes.append(f"a run-time window is taken forward, then reversed: {reversed_window}")
        cx.error("E0304", "the length of this slice is not known at compile time", "run-time length", notes=notes,
                 help=_mask_help(cx, size, step, site) if site is not None else None)
    if start is None or stop is None or step < 0:
        fail()
    if is_runtime_int(start) and is_runtime_int(stop):
        base_a, scale_a, off_a = affine_parts(start)
        base_b, scale_b, off_b = affine_parts(stop)
        if base_a is not base_b or scale_a != scale_b:
            fail()
        length = off_b - off_a
    else:
        fail()
    if length.is_const and length.value < 0:      # (a symbolic one is decided at specialization, concretely)
        cx.error("E0204", f"slice length {length} is negative", "stop is before start")
    return _Axis(start, _ceil_div(length, step), step)


def _reversed_window_text(cx: CallCx, step: int, site) -> str | None:
    """For `x[:, a:b:-k]` with run-time bounds, "`x[:, b + 1:a + 1][:, ::-k]` is `x[:, a:b:-k]`" (equal where
    the window is in range); None in an assignment, or where the other subscripts are not all `:` (their axes
    would move)."""
    first, last = (source_text(cx, getattr(getattr(cx.node, part, None), "span", None)) for part in ("start", "stop"))
    subscripts = getattr(site and site.outer, "subscripts", None)
    if step > 0 or not first or not last or subscripts is None or site.update or \
            any(s is not cx.node and not (isinstance(s, ast.Slice) and s.start is s.stop is s.step is None)
                for s in subscripts):
        return None
    base = source_text(cx, getattr(site.outer.base, "span", None)) or "x"
    lead = ":, " * subscripts.index(cx.node)
    return f"`{base}[{lead}{last} + 1:{first} + 1][{lead}::{step}]` is `{base}[{lead}{first}:{last}:{step}]`"


@dataclass
class _Site:
    """Where a slice is, for E0304's help: axis `axis` of a rank-`rank` array, in the subscripts of `outer`
    (an Index, or the IndexTarget of an indexed assignment: `update`)."""
    axis: int
    rank: int
    outer: object
    update: bool = False


def _mask_help(cx: CallCx, size: Dim, step: int, site: _Site) -> str:
    """The help of E0304: keep the whole axis and mask what lies outside the run-time bounds (the idiom
    that keeps shapes static), written with the slice's own bounds and axis."""
    start, stop = (source_text(cx, getattr(getattr(cx.node, part, None), "span", None)) for part in ("start", "stop"))
    k = f"arange({size})" + ("" if site.axis == site.rank - 1 else
                             "[" + ", ".join([":"] + ["None"] * (site.rank - 1 - site.axis)) + "]")
    conditions = ([f"{k} {'>=' if step > 0 else '<='} {start}"] if start else []) + \
        ([f"{k} {'<' if step > 0 else '>'} {stop}"] if stop else [])
    if abs(step) != 1:
        conditions.append(f"({k} - {start}) % {step} == 0" if start else f"{k} % {step} == 0" if step > 0
                          else f"({size} - 1 - {k}) % {-step} == 0")
    mask = " & ".join(f"({c})" for c in conditions) if len(conditions) > 1 else conditions[0]
    outer = site.outer
    base = source_text(cx, getattr(getattr(outer, "base", None), "span", None)) or "x"
    others = [s for s in getattr(outer, "subscripts", ()) if s is not cx.node]
    full = all(isinstance(s, ast.EllipsisIndex) or isinstance(s, ast.Slice) and s.start is s.stop is s.step is None
               for s in others)
    lead = "for a run-time length, keep the shape and mask the rest"
    value = _assigned_text(cx, outer, base)
    if site.update or value is not None:
        if not full or value is None:
            grouped = mask if len(conditions) > 1 else f"({mask})"
            return f"{lead}: `{base} = where({grouped} & ..., new, {base})` (a condition for each subscript)"
        return f"{lead}: `{base} = where({mask}, {value}, {base})`"
    texts = [":" if s is cx.node else source_text(cx, s.span) for s in getattr(outer, "subscripts", ())]
    rest = "" if full else "[" + ", ".join(texts) + "]" if None not in texts else None
    if rest is None:
        return f"{lead}: `where({mask}, {base}, 0)`, then index it"
    return f"{lead}: `where({mask}, {base}, 0){rest}`"


_ASSIGNED = re.compile(r"\s*(\*\*|//|<<|>>|[-+*/%@&|^])?=(?!=)\s*(.*?)\s*$")


def _assigned_text(cx: CallCx, target, base: str) -> str | None:
    """Where `target` is assigned on its line, the new value of its elements: `value` for `target = value`,
    `x + 1.0` for `x[i:] += 1.0` (whose read of `x[i:]` comes first); else None."""
    span = target.span
    source = cx.walk.program.sources.get(span.file)
    if source is None:
        return None
    m = _ASSIGNED.match(source.line_text(span.end_line)[span.end_col - 1:].split("#")[0])
    if m is None or not m.group(2) or m.group(2).count("(") != m.group(2).count(")"):
        return None
    op, value = m.groups()
    return value if op is None else f"{base} {op} {value if ' ' not in value else f'({value})'}"


def _ceil_div(a: Dim, k: int) -> Dim:
    if k == 1:
        return a
    return Dim.quotient(a + Dim.const(k - 1), Dim.const(k))


def split_newaxes(subscripts) -> tuple[list, list[int]]:
    """The subscripts without `None`/`newaxis`, and where those insert an axis of size 1 in the result: a
    position among the result's dimensions (NumPy's rule: every subscript adds its dimensions in order, a
    slice one, an integer none, an integer array its own, `...` the axes it stands for, `None` a new 1)."""
    rest = [s for s in subscripts if s[0] != "newaxis"]
    if len(rest) == len(subscripts):
        return rest, []
    return rest, [i for i, s in enumerate(subscripts) if s[0] == "newaxis"]


def _newaxis_positions(x: Val, subscripts, marks: list[int]) -> list[int]:
    """The result positions of the `None`s at subscript indices `marks` (see split_newaxes)."""
    explicit = sum(1 for s in subscripts if s[0] not in ("...", "newaxis"))
    out, at = [], 0
    for i, (kind, value, _) in enumerate(subscripts):
        if i in marks:
            out.append(at)
            at += 1
        elif kind == "slice":
            at += 1
        elif kind == "...":
            at += max(x.type.rank - explicit, 0)
        elif isinstance(value, Val):
            at += value.type.rank
    return out


def _with_newaxes(shape: tuple, positions: list[int]) -> tuple:
    out = list(shape)
    for p in positions:                    # (increasing: each counts the ones inserted before it)
        out.insert(p, Dim.const(1))
    return tuple(out)


def _empty(idx: Val) -> bool:
    """Whether an index array has no elements: it reads none, so it may index a dimension of size 0."""
    return any(d == 0 for d in idx.type.shape)


def resolve(cx: CallCx, x: Val, subscripts, update: bool = False, value_text: str | None = None) -> list[_Axis]:
    """One _Axis per dimension of `x` (missing trailing subscripts are full slices); `update`: they are
    those of an indexed assignment (of the value written `value_text`)."""
    rank = x.type.rank
    explicit = [s for s in subscripts if s[0] != "..."]
    if sum(1 for s in subscripts if s[0] == "...") > 1:
        cx.error("E0204", "an index can have only one `...`")
    if len(explicit) > rank:
        cx.error("E0208", f"too many indices: {len(explicit)} for an array of rank {rank}", f"this is {x.type}", at=0)
    expanded = []
    for kind, value, node in subscripts:
        if kind == "...":
            expanded += [("slice", [None, None, None], node)] * (rank - len(explicit))
        else:
            expanded.append((kind, value, node))
    expanded += [("slice", [None, None, None], None)] * (rank - len(expanded))
    axes = []
    for d, ((kind, value, node), size) in enumerate(zip(expanded, x.type.shape)):
        sub = CallCx(cx.walk, node, cx.arg_spans, cx.kw_spans) if node is not None else cx
        if kind == "slice":
            axes.append(_slice_axis(sub, value, size, _Site(d, rank, cx.node, update)))
            continue
        if isinstance(value, Val) and value.type.dtype.is_bool and value.type.rank > 0:
            help = mask_assignment_help(source_text(cx, cx.at(0)) or "x", source_text(cx, node.span),
                                        value.type.rank, rank, value_text) if update else None
            _check_index_value(cx, value, "an index", help)          # E0303 at the whole `x[mask]`
        _check_index_value(sub, value, "an index")
        if value.type.rank > 0:
            known = value.static if isinstance(value.static, np.ndarray) else None     # a literal, `x[[5, 0]]`
            if known is not None and known.size and size.is_const and \
                    not (-size.value <= known.min() and known.max() < size.value):
                bad = next(int(i) for i in known.flat if not -size.value <= i < size.value)
                sub.error("E0208", f"index {bad} is out of range for a dimension of size {size.value}",
                          f"valid indices are {-size.value}..{size.value - 1}")
            axes.append(_Axis(Dim.const(0), size, 1, False, gather=value))
        elif isinstance(value.static, Dim):
            axes.append(_Axis(_normalize(sub, value.static, size), Dim.const(1), 1, True))
        else:
            axes.append(_Axis(value, Dim.const(1), 1, True))
    for a, size in zip(axes, x.type.shape):
        if isinstance(a.start, Val) and a.length.is_const and size.is_const and a.length.value > size.value:
            cx.error("E0208", f"a run-time index of length {a.length.value} cannot fit a dimension of size "
                              f"{size.value}", f"this is {x.type}")
        if (a.gather is not None and not _empty(a.gather) or isinstance(a.start, Val)) and size == 0:
            cx.error("E0208", "a run-time index into a dimension of size 0", f"this is {x.type}")
    gathers = [a for a in axes if a.gather is not None]
    if len(gathers) > 1 or (gathers and any(a.dropped or a.length != s or a.step != 1 or
                                            (isinstance(a.start, Dim) and a.start != 0)
                                            for a, s in zip(axes, x.type.shape) if a.gather is None)):
        nodes = [node for (kind, _, node), a in zip(expanded, axes) if a.gather is not None]
        cx.error("E0204", "an integer-array index must be the only index that is not a full slice `:`",
                 help=_paired_gather_help(cx, x, gathers, nodes) or
                 "index in two steps, e.g. `y = x[idx]` then `y[:, 0]`")
    return axes


def _paired_gather_help(cx: CallCx, x: Val, gathers: list[_Axis], nodes) -> str | None:
    """NumPy's `x[rows, cols]` of a matrix picks x[rows[k], cols[k]] (the cross-entropy idiom
    `p[arange(b), y]`); two steps would give the block x[rows][:, cols], so the help picks along the rows."""
    if x.type.rank != 2 or len(gathers) != 2 or gathers[0].gather.type.rank != 1 \
            or gathers[0].gather.type.shape != gathers[1].gather.type.shape:
        return None
    name, rows, cols = (source_text(cx, cx.at(0)), *(source_text(cx, n.span) for n in nodes))
    if not (name and rows and cols):
        return None
    picked = name if re.fullmatch(r"arange\(\w+\)", rows) else f"{grouped(name)}[{rows}]"
    return (f"NumPy pairs the index arrays element by element; arr takes one integer array per index: "
            f"write `take_along_axis({picked}, {grouped(cols)}[:, None], axis=1)[:, 0]`")


def _out_shape(x: Val, axes: list[_Axis]) -> tuple:
    shape = []
    for a in axes:
        if a.gather is not None:
            shape.extend(a.gather.type.shape)
        elif not a.dropped:
            shape.append(a.length)
    return tuple(shape)


def _start_ir(cx: CallCx, a: _Axis, size: int, index_dtype):
    """A scalar start index; run-time negative indices count from the end, as NumPy (not one that is
    never negative: a loop counter)."""
    if isinstance(a.start, Dim):
        start = a.start.value
        if a.step < 0:
            start = size - 1 - start       # position in the reversed dimension
        return emit.const(start, index_dtype)
    if a.start.type.dtype == U64 and index_dtype != U64:     # next to a signed start: clamped as any start past
        start = cx.ir(a.start)                               # the end is, not wrapped into the negatives
        highest = emit.const(int_range(index_dtype)[1], U64)
        return emit.mark(emit.convert(hlo.minimum(start, highest), U64, index_dtype), abi.SATURATED_INDEX)
    least, _ = value_range(a.start)
    if least is not None and least >= 0:
        return cx.ir(a.start, index_dtype)
    return _wrap_negative(cx.ir(a.start, index_dtype), size, index_dtype)


def value_range(v: Val) -> tuple:
    """(least, greatest) of a run-time integer where known, else None for either: a loop counter's
    (control.py `_counter_range`), scaled and shifted by constants (`i + 1`, `4 * i - 1`) where that
    cannot wrap around."""
    if v.range is not None:
        return v.range
    if v.affine is not None:
        base, scale, offset = v.affine
        if isinstance(base, Val) and base.range is not None and scale.is_const and offset.is_const:
            least, greatest = base.range
            s, c = scale.value, offset.value
            if greatest is None:            # (a counter with no known end: only shifted)
                return (least + c, None) if s == 1 else (None, None)
            ends = sorted((least * s + c, greatest * s + c))
            low, high = int_range(v.type.dtype)
            return tuple(ends) if low <= ends[0] and ends[1] <= high else (None, None)
    return None, None


def _in_bounds(axes, sizes) -> bool:
    """Whether every run-time start is in range by construction (`x[i]` for `i` in `range(len)`): the
    bounds guard has nothing to check (what a start wrapped from the end means is not assumed)."""
    for a, size in zip(axes, sizes):
        if isinstance(a.start, Val):
            least, greatest = value_range(a.start)
            span = (a.length.value - 1) * abs(a.step) + 1 if a.length.value else 0
            if least is None or greatest is None or least < 0 or greatest > size - span:
                return False
    return True


def _proven(value, axes, sizes):
    if _in_bounds(axes, sizes):
        emit.mark(value, abi.IN_BOUNDS)
    return value


def _wrap_negative(indices, size: int, idt, shape=()):
    """Run-time indices with the negative ones counted from the end (`i + size`), as NumPy; marked, so
    the bounds guard reports the index the program asked for."""
    zero = emit.const(0, idt, shape)
    wrapped = hlo.add(indices, emit.const(size, idt, shape))
    return emit.mark(hlo.select(emit.compare(indices, zero, "LT", idt), wrapped, indices), abi.WRAPPED_INDEX)


def _index_dtype(axes, sizes):
    """The integer type the start indices are computed in: theirs, widened when it cannot hold the
    sizes (an i8 index on a dimension of 200 would wrap the size while counting from the end)."""
    dts = [a.start.type for a in axes if isinstance(a.start, Val)] + [a.gather.type for a in axes if a.gather]
    dt, _ = promote(dts) if dts else (I32, True)
    # (u64 with a signed type promotes to f64, as in JAX: i64 then, a u64 start past it saturating: `_start_ir`)
    return _holding(dt if dt.is_int else I64, max(sizes, default=0))


def _holding(dt, size: int):
    """`dt`, or a signed type holding both its values and `size`."""
    if int_range(dt)[1] >= size:
        return dt
    return I64 if dt.bits == 64 or size > int_range(I32)[1] else I32


@register("__index__", params="x, subscripts", keys=True)
def index(cx: CallCx, x, subscripts):
    if isinstance(x, TupleVal):
        return _index_tuple(cx, x, subscripts)
    x = cx.array(x, "x")
    plain, marks = split_newaxes(subscripts)
    axes = resolve(cx, x, plain)
    out_shape = _out_shape(x, axes)
    if not marks:
        return cx.value(ArrayType(x.type.dtype, out_shape), lambda: _lower_index(cx, x, axes, out_shape))
    shape = _with_newaxes(out_shape, _newaxis_positions(x, subscripts, marks))
    return cx.value(ArrayType(x.type.dtype, shape),
                    lambda: hlo.reshape(emit.tensor_type(concrete(shape), x.type.dtype),
                                        _lower_index(cx, x, axes, out_shape)))


def _lower_index(cx: CallCx, x: Val, axes: list[_Axis], out_shape):
    value = cx.ir(x)
    sizes = concrete(x.type.shape)
    dt = x.type.dtype
    gather = next((d for d, a in enumerate(axes) if a.gather is not None), None)
    if gather is not None:
        return _lower_gather(cx, value, axes[gather].gather, gather, sizes, dt, out_shape)
    reversed_dims = [d for d, a in enumerate(axes) if a.step < 0]
    if reversed_dims:
        value = hlo.reverse(value, reversed_dims)
    spans = [(a.length.value - 1) * abs(a.step) + 1 if a.length.value else 0 for a in axes]
    if any(isinstance(a.start, Val) for a in axes):
        idt = _index_dtype(axes, sizes)
        starts = [_start_ir(cx, a, size, idt) for a, size in zip(axes, sizes)]
        value = _proven(hlo.dynamic_slice(value, starts, spans), axes, sizes)
        if any(_stride(a) != 1 for a in axes):
            value = hlo.slice(value, [0] * len(axes), spans, [_stride(a) for a in axes])
    else:
        starts = [_start_ir_static(a, size) for a, size in zip(axes, sizes)]
        value = hlo.slice(value, starts, [s + n for s, n in zip(starts, spans)], [_stride(a) for a in axes])
    if any(a.dropped for a in axes):
        value = hlo.reshape(emit.tensor_type(concrete(out_shape), dt), value)
    return value


def _stride(a: _Axis) -> int:
    """The slice's stride: its step's size, 1 where it takes one element or none (`x[::2**63]`: a step past
    i64, which the attribute cannot hold, takes the first element only)."""
    return abs(a.step) if a.length.value > 1 else 1


def _start_ir_static(a: _Axis, size: int) -> int:
    if a.length.value == 0:
        return 0                           # an empty slice starts anywhere (also in an empty dimension)
    return size - 1 - a.start.value if a.step < 0 else a.start.value


def _lower_gather(cx: CallCx, value, idx: Val, axis: int, sizes, dt, out_shape):
    idt = _holding(idx.type.dtype, sizes[axis])
    indices = _wrap_negative(cx.ir(idx, idt), sizes[axis], idt, concrete(idx.type.shape))
    k = idx.type.rank
    rank = len(sizes)
    offset_dims = list(range(axis)) + list(range(axis + k, rank - 1 + k))
    dnums = hlo.GatherDimensionNumbers.get(
        offset_dims=offset_dims, collapsed_slice_dims=[axis], operand_batching_dims=[],
        start_indices_batching_dims=[], start_index_map=[axis], index_vector_dim=k)
    slice_sizes = [min(s, 1) if d == axis else s for d, s in enumerate(sizes)]
    return hlo.gather(value, indices, dnums, slice_sizes, indices_are_sorted=False)


def _index_tuple(cx: CallCx, x: TupleVal, subscripts):
    def constant(v) -> bool:
        return isinstance(v, Val) and isinstance(v.static, Dim) and v.static.is_const
    if len(subscripts) == 1 and subscripts[0][0] == "slice" and \
            all(p is None or constant(p) for p in subscripts[0][1]):   # `x.shape[1:]`, `x.shape[::-1]`
        start, stop, step = (None if p is None else p.static.value for p in subscripts[0][1])
        if step == 0:
            cx.error("E0204", "slice step cannot be zero", "zero step")
        return TupleVal(x.items[start:stop:step])
    if len(subscripts) != 1 or subscripts[0][0] != "index" or not isinstance(subscripts[0][1], Val) or \
            not isinstance(subscripts[0][1].static, Dim):
        cx.error("E0204", "a tuple takes one compile-time integer index, or a slice of compile-time integers",
                 f"this is {describe(x)}")
    i = subscripts[0][1].static
    n = len(x.items)
    if not i.is_const or not -n <= i.value < n:
        cx.error("E0208", f"tuple index {i} is out of range for a tuple of {n}", f"{n} items")
    return x.items[i.value]


# ---- indexed updates ------------------------------------------------------------------------
def update(cx: CallCx, x: Val, subscripts, new, value_span=None) -> Val:
    """`x[subscripts] = new`, functionally: the result is an updated copy of `x`. `value_span`: where `new`
    is written (the right-hand side), which a diagnostic about it points at (else the target)."""
    target_span = cx.span
    at_value = value_span or target_span
    target = [Label(target_span, f"into {x.type}" if isinstance(x, Val) else "the target")] \
        if value_span is not None else []
    if not isinstance(new, Val):
        cx.error("E0210", f"cannot store {describe(new)} into an array", f"this is {describe(new)}")
    plain, marks = split_newaxes(subscripts)
    axes = resolve(cx, x, plain, update=True, value_text=value_span and source_text(cx, value_span))
    region = _out_shape(x, axes)
    shown = _with_newaxes(region, _newaxis_positions(x, subscripts, marks)) if marks else region
    dt = x.type.dtype
    if not _stores_into(new, x):
        if dt.is_key or new.type.dtype.is_key:
            raise ArrError("E0201", f"cannot store {new.type} into {x.type}: keys are not numbers", at_value,
                           f"this is {new.type}", labels=target, help="store keys into arrays of keys only")
        raise ArrError("E0201", f"cannot store {new.type} into {x.type} without losing information", at_value,
                       f"this is {new.type}", labels=target, help=f"convert it first: `.astype({dt})`")
    from .optable import broadcast_shapes, check_literal
    check_literal(CallCx(cx.walk, cx.node, [at_value], {}), new, dt, 0,
                  stored_into=source_text(cx, cx.at(0)) or "x")
    value_cx = CallCx(cx.walk, cx.node, [target_span, at_value], cx.kw_spans)
    shape = broadcast_shapes(value_cx, ArrayType(dt, shown), new.type, "an indexed assignment")
    if shape != shown:
        raise ArrError("E0202", f"cannot store {new.type} into a region of shape [{', '.join(map(str, shown))}]",
                       at_value, f"this is {new.type}", labels=target)
    strided = any(a.step != 1 for a in axes)
    if strided and any(not isinstance(a.start, Dim) or a.gather is not None for a in axes):
        cx.error("E0204", "an assignment to a strided slice takes static indices and slices only",
                 "a strided slice with a run-time index",
                 help="build the strided result with `where` or update element by element in a loop")

    def build():
        target = cx.ir(x)
        sizes = concrete(x.type.shape)
        gather = next((d for d, a in enumerate(axes) if a.gather is not None), None)
        values = cx.ir(new, dt, concrete(shown))
        if marks:
            values = hlo.reshape(emit.tensor_type(concrete(region), dt), values)
        if gather is not None:
            return _lower_scatter(cx, target, axes[gather].gather, gather, sizes, values)
        full = tuple(1 if a.dropped else a.length.value for a in axes)
        values = hlo.reshape(emit.tensor_type(full, dt), values)
        if strided:
            return _strided_update(target, values, axes, sizes, full, dt)
        idt = _index_dtype(axes, sizes)
        starts = [_start_ir(cx, a, size, idt) for a, size in zip(axes, sizes)]
        return _proven(hlo.dynamic_update_slice(target, values, starts), axes, sizes)
    return cx.value(x.type.strong(), build)


def _strided_update(target, values, axes, sizes, full, dt):
    """`x[::2, 1] = values` with static indices: stablehlo.pad's interior padding spreads the values (reversed
    along negative steps) onto their positions, and a mask padded the same way selects them over x."""
    if 0 in full:
        return target
    values = hlo.reverse(values, [d for d, a in enumerate(axes) if a.step < 0]) \
        if any(a.step < 0 for a in axes) else values
    low = [a.start.value + (n - 1) * a.step if a.step < 0 else a.start.value for a, n in zip(axes, full)]
    interior = [abs(a.step) - 1 for a in axes]
    high = [size - first - (n - 1) * (gap + 1) - 1 for size, first, n, gap in zip(sizes, low, full, interior)]
    spread = hlo.pad(values, emit.const(0, dt), low, high, interior)
    mask = hlo.pad(emit.const(True, BOOL, full), emit.const(False, BOOL), low, high, interior)
    return hlo.select(mask, spread, target)


def _stores_into(new: Val, x: Val) -> bool:
    """Whether `new` can be stored into (or added to) `x` without a lossy conversion."""
    from .optable import weak_literal_fits
    dt = x.type.dtype
    if dt.is_key or new.type.dtype.is_key:     # keys are stored into keys only
        return new.type.dtype == dt
    return new.type.dtype == dt or (new.type.weak and weak_literal_fits(new.type, dt)) or \
        promote([x.type, new.type.strong()])[0] == dt


def _lower_scatter(cx: CallCx, target, idx: Val, axis: int, sizes, values, combine=None):
    idt = _holding(idx.type.dtype, sizes[axis])
    ishape = concrete(idx.type.shape)
    indices = _wrap_negative(cx.ir(idx, idt), sizes[axis], idt, ishape)
    # XLA's scatter drops out-of-range updates; clamp instead, like reads and `x[i] = v` (the bounds guard
    # looks through the marked clamp).
    indices = emit.mark(hlo.clamp(emit.const(0, idt, ishape), indices, emit.const(sizes[axis] - 1, idt, ishape)),
                        abi.CLAMPED_INDEX)
    k = idx.type.rank
    rank = len(sizes)
    dnums = hlo.ScatterDimensionNumbers.get(
        update_window_dims=list(range(axis)) + list(range(axis + k, rank - 1 + k)),
        inserted_window_dims=[axis], input_batching_dims=[], scatter_indices_batching_dims=[],
        scattered_dims_to_operand_dims=[axis], index_vector_dim=k)
    return emit.scatter(target, indices, values, dnums, combine)


@register("dynamic_slice", params="x, start, sizes",
          family="Indexing", doc="the slice of x of the given sizes at a run-time start", words="dynamic_slice")
def _dynamic_slice(cx: CallCx, x, start, sizes):
    x = cx.array(x, "x")
    starts = start.items if isinstance(start, TupleVal) else [start]
    lengths = cx.shape(sizes, "sizes")
    if len(starts) != x.type.rank or len(lengths) != x.type.rank:
        cx.error("E0204", f"dynamic_slice needs one start and one size per dimension ({x.type.rank})",
                 f"this is {x.type}", at=0)
    for s in starts:
        _check_index_value(cx, s, "a start index")
    for d, (n, size) in enumerate(zip(lengths, x.type.shape)):
        if n.is_const and size.is_const and n.value > size.value:
            cx.error("E0208", f"slice size {n.value} is larger than dimension {d} of size {size.value}", at="sizes")
    axes = [_Axis(s.static if isinstance(s.static, Dim) else s, n) for s, n in zip(starts, lengths)]
    t = ArrayType(x.type.dtype, tuple(lengths))

    def build():
        sizes = concrete(x.type.shape)
        idt = _index_dtype(axes, sizes)
        return hlo.dynamic_slice(cx.ir(x), [_builtin_start(cx, a, n, idt) for a, n in zip(axes, sizes)],
                                 concrete(lengths))
    return cx.value(t, build)


def _builtin_start(cx: CallCx, a: _Axis, size: int, idt):
    """A start of dynamic_slice/dynamic_update_slice: negative ones count from the end, like `x[i]`."""
    start = a.start.value if isinstance(a.start, Dim) else None
    if start is not None:
        return emit.const(start + size if start < 0 else start, idt)
    return _start_ir(cx, a, size, idt)


@register("dynamic_update_slice", params="x, values, start",
          family="Indexing", doc="x with values written at a run-time start")
def _dus(cx: CallCx, x, values, start):
    x = cx.array(x, "x")
    values = cx.array(values, "values")
    starts = start.items if isinstance(start, TupleVal) else [start]
    if len(starts) != x.type.rank or values.type.rank != x.type.rank:
        cx.error("E0204", f"dynamic_update_slice needs values of rank {x.type.rank} and one start per dimension",
                 f"this is {values.type}", at=1)
    if values.type.dtype != x.type.dtype and not values.type.weak:
        cx.error("E0201", f"values have dtype {values.type.dtype}, the array {x.type.dtype}", at=1,
                 help=f"convert with `.astype({x.type.dtype})`")
    for s in starts:
        _check_index_value(cx, s, "a start index")
    axes = [_Axis(s.static if isinstance(s.static, Dim) else s, n) for s, n in zip(starts, values.type.shape)]

    for d, (n, size) in enumerate(zip(values.type.shape, x.type.shape)):
        if n.is_const and size.is_const and n.value > size.value:
            cx.error("E0208", f"values of size {n.value} do not fit in dimension {d} of size {size.value}", at=1)

    def build():
        sizes = concrete(x.type.shape)
        idt = _index_dtype(axes, sizes)
        starts = [_builtin_start(cx, a, n, idt) for a, n in zip(axes, sizes)]
        return hlo.dynamic_update_slice(cx.ir(x), cx.ir(values, x.type.dtype), starts)
    return cx.value(x.type.strong(), build)


# ---- gathers and scatters by name: take, take_along_axis, add_at, bincount, searchsorted ----------------
def _integer_array(cx: CallCx, v, name: str) -> Val:
    v = cx.array(v, name)
    if not v.type.dtype.is_int:
        cx.error("E0204", f"`{name}` must be integers, found {v.type}", f"this is {v.type}", at=name,
                 help="a bool mask selects a number of elements known only at run time: use `where(mask, x, 0)`, "
                      "or `nonzero(mask, size=N, fill=v)` for at most N indices" if v.type.dtype.is_bool else
                 "convert with `i32(...)`" if v.type.dtype.is_float else None)
    return v


def _require_broadcast(cx: CallCx, v: Val, name: str, shape: tuple, against: str) -> None:
    """E0202 unless `v` (the argument `name`) broadcasts to `shape`, which `against` describes."""
    vs = v.type.shape
    if len(vs) > len(shape) or any(a != b and a != 1 for a, b in zip(vs[::-1], shape[::-1])):
        cx.error("E0202", f"`{name}` of shape {shape_str(vs)} does not broadcast to {against}, of shape "
                          f"{shape_str(shape)}", f"this is {v.type}", at=name,
                 notes=["shapes broadcast when, aligned from the right, each dimension is equal or 1"])


def _one_axis(cx: CallCx, axis, rank: int) -> int:
    axes = cx.axes(axis, rank)
    if len(axes) != 1:
        cx.error("E0204", "`axis` must be one integer here", f"{len(axes)} axes", at="axis")
    return axes[0]


def _nonempty_axis(cx: CallCx, size: Dim, x: Val, idx: Val) -> None:
    if size == 0 and not _empty(idx):
        cx.error("E0208", "a run-time index into a dimension of size 0", f"this is {x.type}", at="x")


def _flat(x: Val) -> tuple:
    n = Dim.const(1)
    for d in x.type.shape:
        n = n * d
    return (n,)


@register("take", params="x, indices, axis=None", family="Indexing",
          doc="the elements of x at integer indices along axis (of the flattened x by default); x[indices] there")
def _take(cx: CallCx, x, indices, axis=None):
    """jnp.take with arr's index rule (that of `x[idx]`): negative indices count from the end, out-of-range
    ones are clamped and reported by the bounds guard (jnp's default mode fills NaN there instead)."""
    x = cx.array(x, "x")
    idx = _integer_array(cx, indices, "indices")
    shape = _flat(x) if axis is None else x.type.shape
    ax = 0 if axis is None else _one_axis(cx, axis, x.type.rank)
    _nonempty_axis(cx, shape[ax], x, idx)
    out = shape[:ax] + idx.type.shape + shape[ax + 1:]

    def build():
        value = cx.ir(x)
        if axis is None:
            value = hlo.reshape(emit.tensor_type(concrete(shape), x.type.dtype), value)
        return _lower_gather(cx, value, idx, ax, concrete(shape), x.type.dtype, out)
    return cx.value(ArrayType(x.type.dtype, out), build)


def _paired_shape(cx: CallCx, x: Val, idx: Val, ax: int, what: str) -> tuple:
    """The shape of take_along_axis's result: idx's along `ax`, x's and idx's broadcast on the others."""
    if idx.type.rank != x.type.rank:
        cx.error("E0204", f"`indices` must have the rank of x ({x.type.rank}), found {idx.type}",
                 f"this is {idx.type}", at="indices", help="add axes of size 1 with `None` (`idx[:, None]`)")
    out = []
    for d, (a, b) in enumerate(zip(x.type.shape, idx.type.shape)):
        if d != ax and a != b and 1 not in (a, b):
            cx.error("E0202", f"`indices` {idx.type} does not match x {x.type} on axis {d} in {what}",
                     f"dimension {b} does not match {a}", at="indices",
                     notes=["on the axes other than `axis`, the sizes must be equal or 1 (they broadcast)"])
        out.append(b if d == ax or a == 1 else a)
    return tuple(out)


@register("take_along_axis", params="x, indices, axis", family="Indexing",
          doc="the elements of x at indices along axis, paired by position on the other axes (of argsort, argmax)")
def _take_along_axis(cx: CallCx, x, indices, axis):
    x = cx.array(x, "x")
    idx = _integer_array(cx, indices, "indices")
    ax = _one_axis(cx, axis, x.type.rank)
    out = _paired_shape(cx, x, idx, ax, "`take_along_axis`")
    _nonempty_axis(cx, x.type.shape[ax], x, idx)

    def build():
        shape, size = concrete(out), x.type.shape[ax].value
        value = emit.broadcast(cx.ir(x), shape[:ax] + (size,) + shape[ax + 1:])
        idt = _holding(idx.type.dtype, size)
        starts = _wrap_negative(emit.broadcast(cx.ir(idx, idt), shape), size, idt, shape)
        batch = [d for d in range(len(shape)) if d != ax]
        dnums = hlo.GatherDimensionNumbers.get(
            offset_dims=[], collapsed_slice_dims=[ax], operand_batching_dims=batch,
            start_indices_batching_dims=batch, start_index_map=[ax], index_vector_dim=len(shape))
        return hlo.gather(value, starts, dnums, [min(s, 1) for s in emit.shape_of(value)], indices_are_sorted=False)
    return cx.value(ArrayType(x.type.dtype, out), build)


@register("add_at", params="x, indices, values", family="Indexing",
          doc="x with values added at integer indices along axis 0, repeated indices accumulating (np.add.at)")
def _add_at(cx: CallCx, x, indices, values):
    """NumPy's `np.add.at(x, indices, values)` as a function: the updated copy. Unlike `x[idx] += v`
    (which reads all of x[idx] first, so a repeated index counts once), every update is added. Indices
    follow `x[idx]` (negative from the end, out of range clamped and reported by the bounds guard)."""
    from .optable import check_literal
    x = cx.array(x, "x")
    idx = _integer_array(cx, indices, "indices")
    values = cx.array(values, "values")
    if x.type.rank == 0:
        cx.error("E0204", "`add_at` needs an array of rank 1 or more", f"this is {x.type}", at="x")
    _nonempty_axis(cx, x.type.shape[0], x, idx)
    region = idx.type.shape + x.type.shape[1:]
    dt = x.type.dtype
    if not _stores_into(values, x):
        cx.error("E0201", f"cannot add {values.type} into {x.type} without losing information",
                 f"this is {values.type}", at="values", help=f"convert it first: `.astype({dt})`")
    check_literal(cx, values, dt, "values", stored_into=source_text(cx, cx.at("x")) or "x")
    _require_broadcast(cx, values, "values", region, "x[indices]")

    def build():
        combine = hlo.or_ if dt.is_bool else hlo.add
        return _lower_scatter(cx, cx.ir(x), idx, 0, concrete(x.type.shape), cx.ir(values, dt, region), combine)
    return cx.value(x.type.strong(), build)


@register("bincount", params="x, weights=None, length=None", family="Indexing",
          doc="counts (or summed weights) of each value 0..length-1 in the 1-D integer x, as jnp.bincount")
def _bincount(cx: CallCx, x, weights=None, length=None):
    """jnp.bincount(x, weights, length=N): N bins, known at compile time; as jnp's, negative values count
    in bin 0 and values >= N are dropped. Counts are i32 (arr's 32-bit default; jnp with x64: i64)."""
    x = _integer_array(cx, x, "x")
    if x.type.rank != 1:
        cx.error("E0204", f"`bincount` takes a 1-D array, found {x.type}", f"this is {x.type}", at="x",
                 help="flatten it first: `reshape(x, (-1,))`")
    if length is None:
        cx.error("E0103", "`bincount` needs `length=`, the number of bins", "no `length`",
                 help="give it as a literal, `const` or shape variable: `bincount(x, length=10)` (the result "
                      "shape must be known at compile time; values >= length are dropped)")
    n = cx.count(length, "length")
    dt = I32
    if weights is not None:
        weights = cx.array(weights, "weights")
        if weights.type.dtype.is_bool or not (weights.type.dtype.is_int or weights.type.dtype.is_float):
            cx.error("E0201", f"`weights` must be numbers, found {weights.type}", f"this is {weights.type}",
                     at="weights", help="convert bools with `i32(w)`")
        dt = weights.type.strong().dtype
        _require_broadcast(cx, weights, "weights", x.type.shape, "x")

    def build():
        bins, shape = n.value, concrete(x.type.shape)
        if bins == 0:
            return emit.const(0, dt, (0,))
        idt = _holding(x.type.dtype, bins)
        values = cx.ir(x, idt)
        inside = emit.compare(values, emit.const(bins, idt, shape), "LT", idt)
        w = emit.const(1, dt, shape) if weights is None else cx.ir(weights, dt, x.type.shape)
        w = emit.select(inside, w, emit.const(0, dt, shape))
        at = hlo.clamp(emit.const(0, idt, shape), values, emit.const(bins - 1, idt, shape))
        dnums = hlo.ScatterDimensionNumbers.get(
            update_window_dims=[], inserted_window_dims=[0], input_batching_dims=[],
            scatter_indices_batching_dims=[], scattered_dims_to_operand_dims=[0], index_vector_dim=1)
        return emit.scatter(emit.const(0, dt, (bins,)), at, w, dnums, hlo.add)
    return cx.value(ArrayType(dt, (n,)), build)


@register("searchsorted", params='a, v, side="left"', family="Scans and sorting",
          doc="where the values v would be inserted into the sorted 1-D a to keep it sorted (i32 indices)")
def _searchsorted(cx: CallCx, a, v, side="left"):
    """jnp.searchsorted: `side="left"` counts the elements of `a` below each v, `"right"` those not above,
    in sort order (NaN after every number, -0.0 equal to 0.0), by comparing each v with all of `a` (plain
    compares and a sum: O(len(a)) per value, no loop)."""
    from .values import StrVal
    if isinstance(side, StrVal) or side != "left":
        if not isinstance(side, StrVal) or side.text not in ("left", "right"):
            found = f'"{side.text}"' if isinstance(side, StrVal) else describe(side)
            cx.error("E0204", f'`side` must be "left" or "right", found {found}', "not a side", at="side")
        side = side.text
    a, v = cx.array(a, "a"), cx.array(v, "v")
    if a.type.rank != 1:
        cx.error("E0204", f"`searchsorted` needs a sorted 1-D `a`, found {a.type}", f"this is {a.type}", at="a")
    dt, _ = promote([a.type, v.type])
    rank = v.type.rank

    def build():
        shape = concrete(v.type.shape) + concrete(a.type.shape)
        sorted_ = hlo.broadcast_in_dim(emit.tensor_type(shape, dt), cx.ir(a, dt), [rank])
        values = hlo.broadcast_in_dim(emit.tensor_type(shape, dt), cx.ir(v, dt), list(range(rank)))
        hit = _sort_less(sorted_, values, dt) if side == "left" else hlo.not_(_sort_less(values, sorted_, dt))
        return emit.reduce(emit.convert(hit, BOOL, I32), emit.const(0, I32), [rank], hlo.add, I32)
    return cx.value(ArrayType(I32, v.type.shape), build)


def _sort_less(p, q, dt):
    """p < q in sort order: floats with NaN above everything (as sort and jnp.searchsorted)."""
    less = emit.compare(p, q, "LT", dt)
    if not dt.is_float:
        return less
    nan_q, nan_p = emit.compare(q, q, "NE", dt), emit.compare(p, p, "NE", dt)
    return hlo.or_(less, hlo.and_(nan_q, hlo.not_(nan_p)))
