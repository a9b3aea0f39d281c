"""Indexing, slicing and indexed updates.

Static: `x[2]`, `x[-1]`, `x[1:3]`, `x[:, 0]`, `x[::-1]`, `x[..., 0]`. Run-time: `x[i]`, `x[i, :]`,
`x[i:i + 4]` (its length is provably 4) as dynamic slices, clamped into range like XLA; `x[idx]` with an
integer array gathers. Updates `x[...] = v` lower to dynamic_update_slice (or scatter for `x[idx]`).
"""
from __future__ import annotations

from dataclasses import dataclass


from . import abi, emit
from .emit import hlo
from .optable import CallCx, concrete, register
from .types import I32, I64, ArrayType, Dim, int_range, promote
from .values import TupleVal, Val, describe


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


def affine_parts(v: Val) -> tuple[object, int]:
    """(base, offset) of a run-time integer: `i + 4` is (i, 4), so `x[i:i + 4]` has a static length."""
    return v.affine if v.affine is not None else (v, 0)


def _is_runtime_int(v) -> bool:
    return isinstance(v, Val) and v.type.rank == 0 and v.type.dtype.is_int and not isinstance(v.static, Dim)


def _check_index_value(cx: CallCx, v, what: str) -> None:
    if isinstance(v, Val) and v.type.dtype.is_bool and v.type.rank > 0:
        cx.error("E0303", "boolean mask indexing gives a value-dependent shape", "a bool mask",
                 help="use `where(mask, x, 0)` to keep the shape, or `nonzero(mask, size=N, fill=v)` "
                      "for at most N indices",
                 notes=["the number of true elements is only known at run time, so the result shape would be too"])
    if not isinstance(v, Val) or not (v.type.dtype.is_int or isinstance(v.static, Dim)):
        cx.error("E0204", f"{what} must be an integer, found {describe(v)}", f"this is {describe(v)}")


def _normalize(cx: CallCx, i: Dim, size: Dim) -> Dim:
    """A negative constant index counts from the end; out of range is an error once sizes are known."""
    raw = i
    if i.is_const and i.value < 0:
        i = size + i
    if i.is_const and size.is_const and not 0 <= i.value < size.value:
        cx.error("E0208", f"index {raw.value} is out of range for a dimension of size {size.value}",
                 f"valid indices are {-size.value}..{size.value - 1}")
    return i


def _slice_axis(cx: CallCx, parts, size: Dim) -> _Axis:
    for p in parts:
        if p is not None:
            _check_index_value(cx, p, "a slice bound")
    start, stop, step = parts
    if step is not None and not (isinstance(step.static, Dim) and step.static.is_const):
        cx.error("E0204", "slice step must be a literal integer or const", "not a constant step")
    step_v = 1 if step is None else step.static.value
    if step_v == 0:
        cx.error("E0204", "slice step cannot be zero", "zero step")
    if _is_runtime_int(start) or _is_runtime_int(stop):
        return _dynamic_slice_axis(cx, start, stop, step_v)
    start = None if start is None else start.static
    stop = None if stop is None else stop.static
    if size.is_const and all(p is None or p.is_const for p in (start, stop)):
        indices = range(size.value)[slice(None if start is None else start.value,
                                          None if stop is None else stop.value, step_v)]
        first = indices.start if len(indices) else 0
        return _Axis(Dim.const(first), Dim.const(len(indices)), step_v)

    # Symbolic size: Python's clamping cannot be decided, so bounds are taken as given.
    def bound(b: Dim | None, default: Dim) -> Dim:
        if b is None:
            return default
        return size + b if b.is_const and b.value < 0 else b
    if step_v > 0:
        lo, hi = bound(start, Dim.const(0)), bound(stop, size)
        return _Axis(lo, _ceil_div(hi - lo, step_v), step_v)
    hi = bound(start, size - Dim.const(1))
    lo_excl = bound(stop, Dim.const(-1)) if stop is not None else Dim.const(-1)
    return _Axis(hi, _ceil_div(hi - lo_excl, -step_v), step_v)


def _dynamic_slice_axis(cx: CallCx, start, stop, step: int) -> _Axis:
    def fail():
        cx.error("E0304", "the length of this slice is not known at compile time", "run-time length",
                 help="write the stop as the start plus a constant (`x[i:i + 4]`), or use "
                      "`dynamic_slice(x, (i,), (4,))`")
    if start is None or stop is None or step < 0:
        fail()
    if _is_runtime_int(start) and _is_runtime_int(stop):
        base_a, off_a = affine_parts(start)
        base_b, off_b = affine_parts(stop)
        if base_a is not base_b:
            fail()
        length = off_b - off_a
    else:
        fail()
    if length < 0:
        cx.error("E0204", f"slice length {length} is negative", "stop is before start")
    return _Axis(start, _ceil_div(Dim.const(length), step), step)


def _ceil_div(a: Dim, k: int) -> Dim:
    if k == 1:
        return a
    num = a + Dim.const(k - 1)
    out = num.floordiv(Dim.const(k))
    return out if out is not None else Dim.var(f"(({num}) // {k})")


def resolve(cx: CallCx, x: Val, subscripts) -> list[_Axis]:
    """One _Axis per dimension of `x` (missing trailing subscripts are full slices)."""
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
    for (kind, value, node), size in zip(expanded, x.type.shape):
        sub = CallCx(cx.walk, node, cx.arg_spans, cx.kw_spans) if node is not None else cx
        if kind == "slice":
            axes.append(_slice_axis(sub, value, size))
            continue
        if isinstance(value, Val) and value.type.dtype.is_bool and value.type.rank > 0:
            _check_index_value(cx, value, "an index")          # E0303 at the whole `x[mask]`
        _check_index_value(sub, value, "an index")
        if value.type.rank > 0:
            axes.append(_Axis(Dim.const(0), size, 1, False, gather=value))
        elif isinstance(value.static, Dim):
            axes.append(_Axis(_normalize(sub, value.static, size), Dim.const(1), 1, True))
        else:
            axes.append(_Axis(value, Dim.const(1), 1, True))
    for a, size in zip(axes, x.type.shape):
        if isinstance(a.start, Val) and a.length.is_const and size.is_const and a.length.value > size.value:
            cx.error("E0208", f"a run-time index of length {a.length.value} cannot fit a dimension of size "
                              f"{size.value}", f"this is {x.type}")
        if (a.gather is not None or isinstance(a.start, Val)) and size.is_const and size.value == 0:
            cx.error("E0208", "a run-time index into a dimension of size 0", f"this is {x.type}")
    gathers = [a for a in axes if a.gather is not None]
    if len(gathers) > 1 or (gathers and any(a.dropped or a.length != s or a.step != 1 or
                                            (isinstance(a.start, Dim) and a.start != 0)
                                            for a, s in zip(axes, x.type.shape) if a.gather is None)):
        cx.error("E0204", "an integer-array index must be the only index that is not a full slice `:`",
                 help="index in two steps, e.g. `y = x[idx]` then `y[:, 0]`")
    return axes


def _out_shape(x: Val, axes: list[_Axis]) -> tuple:
    shape = []
    for a in axes:
        if a.gather is not None:
            shape.extend(a.gather.type.shape)
        elif not a.dropped:
            shape.append(a.length)
    return tuple(shape)


def _start_ir(cx: CallCx, a: _Axis, size: int, index_dtype):
    """A scalar start index; run-time negative indices count from the end, as NumPy."""
    if isinstance(a.start, Dim):
        start = a.start.value
        if a.step < 0:
            start = size - 1 - start       # position in the reversed dimension
        return emit.const(start, index_dtype)
    return _wrap_negative(cx.ir(a.start, index_dtype), size, index_dtype)


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
    return _holding(dt if dt.is_int else I32, max(sizes, default=0))


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
    axes = resolve(cx, x, subscripts)
    out_shape = _out_shape(x, axes)
    return cx.value(ArrayType(x.type.dtype, out_shape), lambda: _lower_index(cx, x, axes, out_shape))


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
        value = hlo.dynamic_slice(value, starts, spans)
        if any(abs(a.step) != 1 for a in axes):
            value = hlo.slice(value, [0] * len(axes), spans, [abs(a.step) for a in axes])
    else:
        starts = [_start_ir_static(a, size) for a, size in zip(axes, sizes)]
        value = hlo.slice(value, starts, [s + n for s, n in zip(starts, spans)], [abs(a.step) for a in axes])
    if any(a.dropped for a in axes):
        value = hlo.reshape(emit.tensor_type(concrete(out_shape), dt), value)
    return value


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
    slice_sizes = [1 if d == axis else s for d, s in enumerate(sizes)]
    return hlo.gather(value, indices, dnums, slice_sizes, indices_are_sorted=False)


def _index_tuple(cx: CallCx, x: TupleVal, subscripts):
    if len(subscripts) != 1 or subscripts[0][0] != "index" or not isinstance(subscripts[0][1], Val) or \
            not isinstance(subscripts[0][1].static, Dim):
        cx.error("E0204", "a tuple takes one compile-time integer index")
    i = subscripts[0][1].static
    n = len(x.items)
    if not i.is_const or not -n <= i.value < n:
        cx.error("E0208", f"tuple index {i} is out of range for a tuple of {n}", f"{n} items")
    return x.items[i.value]


# ---- indexed updates ------------------------------------------------------------------------
def update(cx: CallCx, x: Val, subscripts, new) -> Val:
    """`x[subscripts] = new`, functionally: the result is an updated copy of `x`."""
    if not isinstance(new, Val):
        cx.error("E0210", f"cannot store {describe(new)} into an array", f"this is {describe(new)}")
    axes = resolve(cx, x, subscripts)
    region = _out_shape(x, axes)
    dt = x.type.dtype
    fits = new.type.dtype == dt or (new.type.weak and _weak_fits(new, dt)) or promote([x.type, new.type.strong()])[0] == dt
    if not fits:
        cx.error("E0201", f"cannot store {new.type} into {x.type} without losing information",
                 f"this is {new.type}", help=f"convert it first: `.astype({dt})`")
    from .optable import broadcast_shapes, check_literal
    check_literal(cx, new, dt, None)
    shape = broadcast_shapes(cx, ArrayType(dt, region), new.type, "an indexed assignment")
    if shape != region:
        cx.error("E0202", f"cannot store {new.type} into a region of shape [{', '.join(map(str, region))}]",
                 f"this is {new.type}")
    if any(a.step != 1 for a in axes):
        cx.error("E0204", "indexed assignment supports step-1 slices only", "a strided slice",
                 help="build the strided result with `where` or update element by element in a loop")

    def build():
        target = cx.ir(x)
        sizes = concrete(x.type.shape)
        gather = next((d for d, a in enumerate(axes) if a.gather is not None), None)
        values = cx.ir(new, dt, concrete(region))
        if gather is not None:
            return _lower_scatter(cx, target, axes[gather].gather, gather, sizes, values)
        full = tuple(1 if a.dropped else a.length.value for a in axes)
        values = hlo.reshape(emit.tensor_type(full, dt), values)
        idt = _index_dtype(axes, sizes)
        starts = [_start_ir(cx, a, size, idt) for a, size in zip(axes, sizes)]
        return hlo.dynamic_update_slice(target, values, starts)
    return cx.value(x.type.strong(), build)


def _weak_fits(v: Val, dt) -> bool:
    from .optable import weak_literal_fits
    return weak_literal_fits(v.type, dt)


def _lower_scatter(cx: CallCx, target, idx: Val, axis: int, sizes, values):
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
    return emit.scatter(target, indices, values, dnums)


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
