"""Indexing and slicing with static indices: `x[2]`, `x[-1]`, `x[1:3]`, `x[:, 0]`, `x[::-1]`, `x[..., 0]`."""
from __future__ import annotations

from dataclasses import dataclass

from . import emit
from .builtins import CallCx, concrete, register
from .emit import hlo
from .types import ArrayType, Dim
from .values import TupleVal, Val, describe


@dataclass
class _Axis:
    """What one source dimension becomes: kept with (start, length, step), or taken at `start` (dropped)."""
    start: Dim
    length: Dim
    step: int
    dropped: bool


def _static_index(cx: CallCx, v, node, what: str) -> Dim:
    if isinstance(v, Val) and v.type.rank == 0 and isinstance(v.static, Dim):
        return v.static
    if isinstance(v, Val) and v.type.dtype.is_bool and v.type.rank > 0:
        cx.error("E0303", "boolean mask indexing gives a value-dependent shape", "a bool mask", at=None,
                 help="use `where(mask, x, 0)` to keep the shape, or `nonzero(mask, size=N, fill=v)` "
                      "for at most N indices",
                 notes=["the number of true elements is only known at run time, so the result shape would be too"])
    if isinstance(v, Val) and v.type.rank == 0 and v.type.dtype.is_int:
        cx.error("E0106", f"run-time {what} is not supported yet", "run-time value", at=None,
                 help="index with a literal, a const or a shape variable")
    cx.error("E0204", f"{what} must be an integer, found {describe(v)}", f"this is {describe(v)}")


def _normalize(cx: CallCx, i: Dim, size: Dim, node) -> Dim:
    """A negative constant index counts from the end; out of range is an error once sizes are known."""
    if i.is_const and i.value < 0:
        i = size + i
    if i.is_const and size.is_const and not 0 <= i.value < size.value:
        raw = i.value - size.value if i.value < 0 else i.value
        cx.error("E0208", f"index {raw if raw >= 0 else i.value} is out of range for a dimension of size "
                          f"{size.value}", f"valid indices are {-size.value}..{size.value - 1}", at=None)
    return i


def _slice_axis(cx: CallCx, parts, size: Dim) -> _Axis:
    start, stop, step = (None if p is None else _static_index(cx, p, None, "slice bound") for p in parts)
    if step is not None and not step.is_const:
        cx.error("E0204", "slice step must be a literal integer", "symbolic step")
    step_v = 1 if step is None else step.value
    if step_v == 0:
        cx.error("E0204", "slice step cannot be zero", "zero step")
    if size.is_const and all(p is None or p.is_const for p in (start, stop)):
        indices = range(size.value)[slice(None if start is None else start.value,
                                          None if stop is None else stop.value, step_v)]
        first = indices.start if len(indices) else 0
        return _Axis(Dim.const(first), Dim.const(len(indices)), step_v, False)
    # Symbolic size: Python's clamping cannot be decided, so bounds are taken as given (checked when lowering).
    def bound(b: Dim | None, default: Dim) -> Dim:
        if b is None:
            return default
        return size + b if b.is_const and b.value < 0 else b
    if step_v > 0:
        lo, hi = bound(start, Dim.const(0)), bound(stop, size)
        length = hi - lo if step_v == 1 else _ceil_div(hi - lo, step_v)
        return _Axis(lo, length, step_v, False)
    hi = bound(start, size - Dim.const(1))
    lo_excl = bound(stop, Dim.const(-1)) if stop is not None else Dim.const(-1)
    length = _ceil_div(hi - lo_excl, -step_v)
    return _Axis(hi, length, step_v, False)


def _ceil_div(a: Dim, k: int) -> Dim:
    if k == 1:
        return a
    num = a + Dim.const(k - 1)
    out = num.floordiv(Dim.const(k))
    return out if out is not None else Dim.var(f"(({num}) // {k})")


@register("__index__", params="x, subscripts")
def index(cx: CallCx, x, subscripts):
    if isinstance(x, TupleVal):
        return _index_tuple(cx, x, subscripts)
    x = cx.array(x, "x")
    rank = x.type.rank
    explicit = [s for s in subscripts if s[0] != "..."]
    if sum(1 for s in subscripts if s[0] == "...") > 1:
        cx.error("E0204", "an index can have only one `...`")
    if len(explicit) > rank:
        cx.error("E0208", f"too many indices: {len(explicit)} for an array of rank {rank}", f"this is {x.type}",
                 at=0)
    expanded = []
    for kind, value, node in subscripts:
        if kind == "...":
            expanded += [("slice", [None, None, None], node)] * (rank - len(explicit))
        else:
            expanded.append((kind, value, node))
    expanded += [("slice", [None, None, None], None)] * (rank - len(expanded))
    axes = []
    for (kind, value, node), size in zip(expanded, x.type.shape):
        sub_cx = CallCx(cx.walk, node or cx.node, cx.arg_spans, cx.kw_spans) if node is not None else cx
        if kind == "index" and isinstance(value, Val) and value.type.dtype.is_bool and value.type.rank > 0:
            _static_index(cx, value, node, "index")           # reports E0303 at the whole `x[mask]`
        if kind == "index":
            i = _normalize(sub_cx, _static_index(sub_cx, value, node, "index"), size, node)
            axes.append(_Axis(i, Dim.const(1), 1, True))
        else:
            axes.append(_slice_axis(sub_cx, value, size))
    out_shape = tuple(a.length for a in axes if not a.dropped)
    t = ArrayType(x.type.dtype, out_shape)

    def build():
        value = cx.ir(x)
        reversed_dims = [d for d, a in enumerate(axes) if a.step < 0]
        sizes = concrete(x.type.shape)
        starts, limits, strides = [], [], []
        for d, a in enumerate(axes):
            start, length, step = a.start.value, a.length.value, abs(a.step)
            if a.step < 0:
                start = sizes[d] - 1 - start           # position in the reversed dimension
            starts.append(start)
            limits.append(start + (length - 1) * step + 1 if length else start)
            strides.append(step)
        if reversed_dims:
            value = hlo.reverse(value, reversed_dims)
        value = hlo.slice(value, starts, limits, strides)
        if any(a.dropped for a in axes):
            value = hlo.reshape(emit.tensor_type(concrete(out_shape), x.type.dtype), value)
        return value
    return cx.value(t, build)


def _index_tuple(cx: CallCx, x: TupleVal, subscripts):
    if len(subscripts) != 1 or subscripts[0][0] != "index":
        cx.error("E0204", "a tuple takes one integer index")
    i = _static_index(cx, subscripts[0][1], None, "tuple index")
    n = len(x.items)
    if not i.is_const or not -n <= i.value < n:
        cx.error("E0208", f"tuple index {i} is out of range for a tuple of {n}", f"{n} items")
    return x.items[i.value]
