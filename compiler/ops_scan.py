"""Scans and sorting: cumsum cumprod cummax sort argsort top_k, quantiles (by sorting), and nonzero(mask,
size=N, fill=v)."""
from __future__ import annotations

import numpy as np
from jaxlib.mlir import ir

from . import emit
from .emit import hlo
from .ops_reduce import _accumulator_dtype
from .optable import CallCx, concrete, float_dtype_for, register
from .types import BOOL, I32, ArrayType, Dim
from .values import StrVal, TupleVal, Val, describe


def _flat_or_axis(cx: CallCx, x: Val, axis, what: str):
    """(the shape, the axis) a scan or sort of `x` runs along; NumPy's axis=None: the flattened array."""
    if axis is None:
        size = Dim.const(1)
        for d in x.type.shape:
            size = size * d
        return (size,), 0
    ax = cx.axes(axis, x.type.rank)
    if len(ax) != 1:
        cx.error("E0204", f"{what} takes a single axis", at="axis")
    return x.type.shape, ax[0]


def _operand(cx: CallCx, x: Val, shape, dt=None) -> ir.Value:
    """x's IR (as `dt`), flattened where `shape` is that of axis=None."""
    value = cx.ir(x, dt)
    if shape != x.type.shape:
        value = hlo.reshape(emit.tensor_type(concrete(shape), dt or x.type.dtype), value)
    return value


def scan(combine, identity, accumulate: bool):
    def rule(cx: CallCx, x, axis=None):
        x = cx.array(x, "x")
        shape, ax = _flat_or_axis(cx, x, axis, "a scan")
        dt = _accumulator_dtype(x.type.dtype) if accumulate else x.type.dtype

        def build():
            return cumulative(_operand(cx, x, shape, dt), ax, combine, identity(dt), dt)
        return cx.value(ArrayType(dt, tuple(shape)), build)
    return rule


def cumulative(value: ir.Value, axis: int, combine, identity, dt, reverse: bool = False) -> ir.Value:
    """The inclusive scan of `value` along `axis` by `combine` (a reduce_window over all preceding, or with
    `reverse` all following, elements); `dt`: its dtype."""
    shape = emit.shape_of(value)
    n = shape[axis]
    if n <= 1:
        return value                 # nothing to combine (and a window of 1 would name no axis for the vjp)
    window = [n if d == axis else 1 for d in range(len(shape))]
    padding = [([0, n - 1] if reverse else [n - 1, 0]) if d == axis else [0, 0] for d in range(len(shape))]
    op = hlo.ReduceWindowOp([value.type], [value], [emit.const(identity, dt)], window_dimensions=window,
                            padding=ir.DenseElementsAttr.get(np.array(padding, np.int64)))
    scalar = emit.tensor_type((), dt)
    block = op.body.blocks.append(scalar, scalar)
    with ir.InsertionPoint(block):
        hlo.return_([combine(block.arguments[0], block.arguments[1])])
    return op.results[0]


register("cumsum", params="x, axis=None",
         family="Scans and sorting", doc="cumulative sum along axis")(scan(hlo.add, lambda dt: 0, True))
register("cumprod", params="x, axis=None",
         family="Scans and sorting", doc="cumulative product along axis")(scan(hlo.multiply, lambda dt: 1, True))
register("cummax", params="x, axis=None",
         family="Scans and sorting",
         doc="cumulative maximum along axis")(scan(hlo.maximum, emit.scalar_arith_min, False))
register("cummin", params="x, axis=None",
         family="Scans and sorting",
         doc="cumulative minimum along axis")(scan(hlo.minimum, emit.scalar_arith_max, False))


def _less(a, b, dt):
    """a < b with NaN sorted last (as NumPy)."""
    lt = emit.compare(a, b, "LT", dt)
    if not dt.is_float:
        return lt
    a_nan = emit.compare(a, a, "NE", dt)
    b_nan = emit.compare(b, b, "NE", dt)
    return hlo.or_(hlo.and_(lt, hlo.not_(a_nan)), hlo.and_(b_nan, hlo.not_(a_nan)))


def _greater_total(a, b, dt):
    """a > b in IEEE total order (-NaN < -inf < -0 < +0 < inf < +NaN), the comparator of XLA's TopK and so
    of jax.lax.top_k."""
    kind = "TOTALORDER" if dt.is_float else emit.compare_type(dt)
    return hlo.compare(a, b, hlo.ComparisonDirectionAttr.get("GT"), compare_type=hlo.ComparisonTypeAttr.get(kind))


def _sort(values: list, dtypes: list, axis: int, descending: bool = False):
    """A stable sort by values[0], ascending with NaN last (NumPy's) or `descending` in total order (lax.top_k's)."""
    types = [v.type for v in values]
    op = hlo.SortOp(types, values, dimension=axis, is_stable=True)
    scalars = []
    for dt in dtypes:
        scalars += [emit.tensor_type((), dt)] * 2
    block = op.comparator.blocks.append(*scalars)
    with ir.InsertionPoint(block):
        a, b = block.arguments[0], block.arguments[1]
        hlo.return_([_greater_total(a, b, dtypes[0]) if descending else _less(a, b, dtypes[0])])
    return list(op.results)


@register("sort", params="x, axis=-1", nullable=("axis",), family="Scans and sorting", doc="x sorted along axis")
def _sort_rule(cx: CallCx, x, axis=-1):
    x = cx.array(x, "x")
    shape, ax = _flat_or_axis(cx, x, axis, "sorting")
    return cx.value(ArrayType(x.type.dtype, shape), lambda: _sort([_operand(cx, x, shape)], [x.type.dtype], ax)[0])


@register("argsort", params="x, axis=-1", nullable=("axis",), family="Scans and sorting",
          doc="the indices that sort x along axis")
def _argsort(cx: CallCx, x, axis=-1):
    x = cx.array(x, "x")
    shape, ax = _flat_or_axis(cx, x, axis, "sorting")

    def build():
        iota = hlo.iota(emit.tensor_type(concrete(shape), I32), ax)
        return _sort([_operand(cx, x, shape), iota], [x.type.dtype, I32], ax)[1]
    return cx.value(ArrayType(I32, shape), build)


QUANTILE_METHODS = ("linear", "lower", "higher", "midpoint", "nearest")


@register("quantile", params='x, q, axis=None, keepdims=False, method="linear"', family="Reductions",
          doc="the q-th quantiles of x over axis (q in [0, 1], known at compile time), as jnp.quantile")
def _quantile(cx: CallCx, x, q, axis=None, keepdims=False, method="linear"):
    return _quantiles(cx, x, _levels(cx, q, 1), axis, keepdims, method)


@register("percentile", params='x, q, axis=None, keepdims=False, method="linear"', family="Reductions",
          doc="the q-th percentiles of x over axis (q in [0, 100], known at compile time), as jnp.percentile")
def _percentile(cx: CallCx, x, q, axis=None, keepdims=False, method="linear"):
    return _quantiles(cx, x, _levels(cx, q, 100), axis, keepdims, method)


@register("median", params="x, axis=None, keepdims=False", family="Reductions",
          doc="the median of x over axis (the mean of the middle two for an even count), as jnp.median")
def _median(cx: CallCx, x, axis=None, keepdims=False):
    return _quantiles(cx, x, np.float64(0.5), axis, keepdims, "linear")


def _known_number(v):
    """The number `v` is at compile time (a literal, a const, a list literal's values), else None."""
    if not isinstance(v, Val):
        return None
    if isinstance(v.static, Dim):
        return v.static.value if v.static.is_const else None
    return v.static if v.type.dtype.kind in ("int", "uint", "float") else None


def _levels(cx: CallCx, q, scale: int) -> np.ndarray:
    """`q` as quantile levels in [0, 1]: a number or a 1-D list known at compile time, divided by `scale`."""
    items = q.items if isinstance(q, TupleVal) else [q]
    if not items:
        cx.error("E0204", "`q` must be a number or a list of them, found ()", "no levels", at="q")
    statics = [_known_number(i) for i in items]
    if any(v is None for v in statics):
        cx.error("E0207", "`q` must be known at compile time, but it is a run-time value", "a run-time value",
                 at="q",
                 help="give the levels as literals or consts (`[0.25, 0.5, 0.75]`); a run-time level would make "
                      "the elements to interpolate depend on the values")
    levels = np.asarray(statics if isinstance(q, TupleVal) else statics[0], np.float64) / scale
    if levels.ndim > 1:
        cx.error("E0204", f"`q` must be a number or a 1-D list of them, found {describe(q)}", "rank > 1", at="q")
    if not ((levels >= 0) & (levels <= 1)).all():
        cx.error("E0204", f"`q` must lie in [0, {scale}], found {np.asarray(levels * scale).tolist()}",
                 "out of range", at="q")
    return levels


def _quantiles(cx: CallCx, x, levels: np.ndarray, axis, keepdims, method) -> Val:
    """jnp.quantile for levels known at compile time: each row over `axis` sorted (NaN last, and a row that
    holds a NaN all NaN, as jnp's), then the two elements around level * (count - 1) combined by `method`."""
    x = cx.array(x, "x")
    rank = x.type.rank
    axes = cx.axes(axis, rank)
    axes = list(range(rank)) if axes is None else sorted(axes)
    keep = cx.bool_flag(keepdims, "keepdims")
    method = method.text if isinstance(method, StrVal) else method
    if method not in QUANTILE_METHODS:
        found = repr(method) if isinstance(method, str) else describe(method)
        cx.error("E0204", f"`method` must be one of {', '.join(map(repr, QUANTILE_METHODS))}, found {found}",
                 "unknown method", at="method")
    count = Dim.const(1)
    for a in axes:
        count = count * x.type.shape[a]
    if count.is_const and count.value == 0:
        cx.error("E0204", f"quantiles of an empty array: {x.type} has no elements over axis {axes}", "empty",
                 at=0, help="NumPy's quantile raises here (its median warns and gives nan); give the array at "
                            "least one element")
    kept = [a for a in range(rank) if a not in axes]
    reduced = tuple(Dim.const(1) if a in axes else d for a, d in enumerate(x.type.shape)) if keep else \
        tuple(x.type.shape[a] for a in kept)
    dt = float_dtype_for(x.type.dtype)
    out_shape = ((Dim.const(len(levels)),) if levels.ndim else ()) + reduced

    def build():
        shape = concrete(x.type.shape)
        rows = [shape[a] for a in kept]
        n = int(np.prod([shape[a] for a in axes], dtype=np.int64))
        value = cx.ir(x, dt)
        if kept + axes != list(range(rank)):
            value = hlo.transpose(value, kept + axes)
        value = hlo.reshape(emit.tensor_type(rows + [n], dt), value)
        if x.type.dtype.is_float:   # a row holding a NaN has NaN quantiles (jnp.quantile; nanquantile would skip them)
            nan_in_row = emit.reduce(emit.compare(value, value, "NE", dt), emit.const(False, BOOL), [len(rows)],
                                     hlo.or_, BOOL)
            value = hlo.select(hlo.broadcast_in_dim(emit.tensor_type(rows + [n], BOOL), nan_in_row,
                                                    list(range(len(rows)))),
                               emit.const(np.nan, dt, rows + [n]), value)
        ordered = _sort([value], [dt], len(rows))[0]

        def element(i: int) -> ir.Value:
            picked = hlo.slice(ordered, [0] * len(rows) + [i], rows + [i + 1], [1] * (len(rows) + 1))
            return hlo.reshape(emit.tensor_type(rows, dt), picked)

        def at_level(level: float) -> ir.Value:
            position = level * (n - 1)          # (jnp: q * (count - 1), each weight then rounded to x's dtype)
            low, high = int(np.floor(position)), int(np.ceil(position))
            high_weight = position - low
            below, above = element(low), element(high)
            if method == "lower" or (method == "nearest" and high_weight <= 0.5):
                return below
            if method in ("higher", "nearest"):
                return above
            if method == "midpoint":
                return hlo.multiply(hlo.add(below, above), emit.const(0.5, dt, rows))
            return hlo.add(hlo.multiply(below, emit.const(1 - high_weight, dt, rows)),
                           hlo.multiply(above, emit.const(high_weight, dt, rows)))
        if levels.ndim == 0:
            result = at_level(float(levels))
        else:
            stacked = [hlo.reshape(emit.tensor_type([1] + rows, dt), at_level(float(v))) for v in levels]
            result = hlo.concatenate(stacked, 0) if len(stacked) > 1 else stacked[0]
        return hlo.reshape(emit.tensor_type(concrete(out_shape), dt), result)
    return cx.value(ArrayType(dt, out_shape), build)


@register("top_k", params="x, k",
          family="Scans and sorting", doc="the k largest values along the last axis, and their indices")
def _top_k(cx: CallCx, x, k):
    """The k largest entries along the last axis and their indices, largest first (as jax.lax.top_k)."""
    x = cx.array(x, "x")
    if x.type.rank == 0:
        cx.error("E0204", "top_k needs an array of rank >= 1", f"this is {x.type}", at=0)
    k_dim = cx.static_int(k, "k")            # a literal, a const or a shape variable
    last = x.type.shape[-1]
    if k_dim.is_const and (k_dim.value < 0 or (last.is_const and k_dim.value > last.value)):
        cx.error("E0204", f"k = {k_dim} is out of range for a last dimension of size {last}", at="k")
    out_shape = x.type.shape[:-1] + (k_dim,)
    ax = x.type.rank - 1

    def both():
        shape = concrete(x.type.shape)
        iota = hlo.iota(emit.tensor_type(shape, I32), ax)
        values, indices = _sort([cx.ir(x), iota], [x.type.dtype, I32], ax, descending=True)
        limit = list(shape[:-1]) + [k_dim.value]
        zeros = [0] * len(shape)
        ones = [1] * len(shape)
        return hlo.slice(values, zeros, limit, ones), hlo.slice(indices, zeros, limit, ones)
    if cx.lowering:
        values, indices = both()
        return TupleVal([Val(ArrayType(x.type.dtype, out_shape), values), Val(ArrayType(I32, out_shape), indices)])
    return TupleVal([Val(ArrayType(x.type.dtype, out_shape)), Val(ArrayType(I32, out_shape))])


@register("nonzero", params="mask, size=None, fill=0",
          family="Selection", doc="the indices of the true elements of mask, padded with fill to size")
def _nonzero(cx: CallCx, mask, size=None, fill=0):
    """Indices of the true elements, padded with `fill` to a static `size` (jnp.nonzero(..., size=N))."""
    mask = cx.array(mask, "mask")
    if size is None:
        cx.error("E0207", "`nonzero` needs `size=`: the number of true elements is only known at run time",
                 "no size", help="pass the largest count you expect, e.g. `nonzero(mask, size=10, fill=-1)`")
    n_dim = cx.count(size, "size")           # a literal, a const or a shape variable
    fill_value = fill if isinstance(fill, int) else cx.const_int(fill, "fill")
    if not -2 ** 31 <= fill_value < 2 ** 31:
        cx.error("E0211", f"fill {fill_value} is out of range for the i32 indices", at="fill")
    if mask.type.rank == 0:
        cx.error("E0204", "`nonzero` needs an array", at=0)
    out = ArrayType(I32, (n_dim,))
    shape = mask.type.shape

    def indices():
        n = n_dim.value
        dims = concrete(shape)
        total = int(np.prod(dims))
        if total == 0:                       # nothing is true: every index is the fill
            return [emit.const(fill_value, I32, (n,)) for _ in dims]
        flat = hlo.reshape(emit.tensor_type((total,), mask.type.dtype), cx.ir(mask))
        truth = flat if mask.type.dtype.is_bool else emit.convert(flat, mask.type.dtype, BOOL)
        iota = hlo.iota(emit.tensor_type((total,), I32), 0)
        keys = hlo.select(truth, iota, emit.const(total, I32, (total,)))
        ordered = _sort([keys], [I32], 0)[0]
        if n > total:
            ordered = hlo.pad(ordered, emit.const(total, I32), [0], [n - total], [0])
        else:
            ordered = hlo.slice(ordered, [0], [n], [1])
        missing = emit.compare(ordered, emit.const(total, I32, (n,)), "EQ", I32)
        coords = []
        rest = ordered
        for d in reversed(dims):
            coords.append(hlo.remainder(rest, emit.const(d, I32, (n,))))
            rest = hlo.divide(rest, emit.const(d, I32, (n,)))
        return [hlo.select(missing, emit.const(fill_value, I32, (n,)), c) for c in reversed(coords)]
    if mask.type.rank == 1:
        return cx.value(out, lambda: indices()[0])
    if cx.lowering:
        return TupleVal([Val(out, c) for c in indices()])
    return TupleVal([Val(out) for _ in shape])
