"""Reductions: sum prod mean max min argmax argmin any all var std logsumexp (axis=, keepdims=); allclose,
trace."""
from __future__ import annotations

import numpy as np

from . import emit
from .emit import hlo
from .ops_elementwise import isclose_rule
from .ops_shape import _prod
from .optable import CallCx, accumulation_dtype, concrete, float_dtype_for, register, source_text
from .types import BOOL, DTYPES, I32, I64, ArrayType, Dim, int_range


def _reduced_shape(shape, axes, keepdims: bool):
    if keepdims:
        return tuple(Dim.const(1) if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _accumulator_dtype(dt):
    """sum/prod of small integers accumulate in 32 bits (as jax.numpy); bool counts in i32."""
    if dt.is_bool:
        return I32
    if dt.kind == "int" and dt.bits < 32:
        return I32
    if dt.kind == "uint" and dt.bits < 32:
        return DTYPES["u32"]
    return dt


def _finish(cx, x, axes, keepdims, out_dtype, reduced_ir_fn):
    """Shape bookkeeping shared by all reductions; `reduced_ir_fn()` returns the reduced value (no keepdims)."""
    out_shape = _reduced_shape(x.type.shape, axes, keepdims)
    t = ArrayType(out_dtype, out_shape)

    def build():
        value = reduced_ir_fn()
        if keepdims:
            value = hlo.reshape(emit.tensor_type(concrete(out_shape), out_dtype), value)
        return value
    return cx.value(t, build)


def _read(cx: CallCx, x, axis, keepdims):
    x = cx.array(x, "x")
    axes = cx.axes(axis, x.type.rank)
    axes = list(range(x.type.rank)) if axes is None else sorted(axes)
    keepdims = cx.bool_flag(keepdims, "keepdims")
    return x, axes, keepdims


def _require_nonempty(cx: CallCx, name: str, x, axes) -> None:
    """max/min/argmax/argmin have no identity: of no elements they are an error, as in NumPy and JAX (the
    shapes are static, so it is a compile error; with a shape variable, when it is specialized to 0)."""
    for a in axes:
        d = x.type.shape[a]
        if d.is_const and d.value == 0:
            cx.error("E0204", f"`{name}` of an empty array: axis {a} has size 0", f"this is {x.type}", at=0,
                     help=f"`{name}` of no elements is undefined (NumPy and JAX raise); use a non-empty array "
                          f"or `sum`/`prod`/`any`/`all`, which have an identity")


def warn_if_sum_can_overflow(cx: CallCx, name: str, x, count: Dim, acc) -> None:
    """W0006 where `name` (a sum) widens x's narrow integers (or bools) to the 32-bit `acc` and `count`
    elements at x's extreme would not fit it: `sum` of a u8[20000000] image of 255s is 5.1e9, which u32
    wraps (NumPy and jax.numpy with x64 sum in 64 bits). Decided where the count is known: at definition
    for literal shapes (also when specialized, but compiler/lower.py keeps only the definition's warnings)."""
    dt = x.type.dtype
    if not count.is_const or acc is dt or not acc.is_int or not (dt.is_int or dt.is_bool):
        return
    lo, hi = int_range(dt)
    acc_lo, acc_hi = int_range(acc)
    n = count.value
    if hi * n <= acc_hi and lo * n >= acc_lo:
        return
    wide = DTYPES["i64" if acc.kind == "int" else "u64"]
    extreme = hi * n if hi * n > acc_hi else lo * n
    cx.warn("W0006", f"`{name}` of {n:,} {dt} elements can overflow its {acc} accumulator", f"accumulates in {acc}",
            at=0, notes=[f"{n:,} elements of {hi if extreme > 0 else lo} add up to {extreme:,}, beyond {acc}'s "
                         f"{acc_hi if extreme > 0 else acc_lo:,}: the sum would wrap around",
                         f"arr sums {dt} in {acc}, as jax.numpy does without x64 (NumPy, and jax.numpy with x64, "
                         "sum in 64 bits)"],
            help=f"accumulate in 64 bits: `{name}({source_text(cx, cx.at(0)) or 'x'}, dtype={wide})` (NumPy's "
                 f"`dtype=`)")


def _sum_dtype(cx: CallCx, x, dtype, dtype_rule):
    """The dtype a sum/prod accumulates and returns: `dtype=` where given (NumPy's), else the rule's."""
    if dtype is None:
        return dtype_rule(cx, x.type.dtype)
    return cx.dtype(dtype, "dtype")


def monoid(name: str, combine_for, identity, dtype_rule):
    """A reduction by one associative combiner; `combine_for(acc_dtype)` returns it, an (a, b) -> value
    builder. sum and prod take NumPy's `dtype=` (the dtype they accumulate and return)."""
    def reduce_rule(cx: CallCx, x, axis, keepdims, dtype):
        x, axes, keepdims = _read(cx, x, axis, keepdims)
        if name in ("max", "min"):
            _require_nonempty(cx, name, x, axes)
        dt = _sum_dtype(cx, x, dtype, dtype_rule)
        acc = accumulation_dtype(dt) if name in ("sum", "prod") else dt
        combine = combine_for(acc)
        if acc.is_bool and name in ("sum", "prod"):        # `dtype=bool`: any / all, as NumPy's
            combine = hlo.or_ if name == "sum" else hlo.and_
        if name == "sum" and dtype is None:
            warn_if_sum_can_overflow(cx, name, x, _prod([x.type.shape[a] for a in axes]), acc)

        def reduced():
            value = emit.reduce(cx.ir(x, acc), emit.const(identity(acc), acc), axes, combine, acc)
            return emit.convert(value, acc, dt)
        return _finish(cx, x, axes, keepdims, dt, reduced)

    if name in ("sum", "prod"):
        def rule(cx: CallCx, x, axis=None, keepdims=False, dtype=None):
            return reduce_rule(cx, x, axis, keepdims, dtype)
    else:
        def rule(cx: CallCx, x, axis=None, keepdims=False):
            return reduce_rule(cx, x, axis, keepdims, None)
    return rule


def _numeric(name):
    def rule(cx, dt):
        return _accumulator_dtype(dt)
    return rule


def _same(cx, dt):
    return dt


def _as_bool(cx, dt):
    return BOOL


def _always(combine):
    return lambda dt: combine


def _extreme(direction: str, int_combine):
    """The max ("GT") / min ("LT") combiner: a NaN wins, by construction.

    For floats it is `a if a > b or a != a else b`, compare and select only, not `stablehlo.maximum`:
    XLA:CPU hands a reduce whose body is a bare maximum/minimum to a vectorized kernel (YNNPACK) that
    drops NaN from about 10K elements on (jax.jit(jnp.max) too). This body keeps NaN on any backend and
    costs 1.4-2.3x that kernel (max of f32[4M]: 1.1 vs 0.8 ms). A tie of -0 and +0 may give either, as in NumPy.
    """
    def combine_for(dt):
        if not dt.is_float:
            return int_combine

        def combine(a, b):
            take_a = hlo.or_(emit.compare(a, b, direction, dt), emit.compare(a, a, "NE", dt))
            return hlo.select(take_a, a, b)
        return combine
    return combine_for


register("sum", params="x, axis=None, keepdims=False, dtype=None", family="Reductions",
         doc="sum of the elements over axis (in dtype, if given)")(
    monoid("sum", _always(hlo.add), lambda dt: 0, _numeric("sum")))
register("prod", params="x, axis=None, keepdims=False, dtype=None", family="Reductions",
         doc="product of the elements over axis (in dtype, if given)")(
    monoid("prod", _always(hlo.multiply), lambda dt: 1, _numeric("prod")))
register("max", params="x, axis=None, keepdims=False", family="Reductions", doc="largest element over axis")(
    monoid("max", _extreme("GT", hlo.maximum), emit.scalar_arith_min, _same))
register("min", params="x, axis=None, keepdims=False", family="Reductions", doc="smallest element over axis")(
    monoid("min", _extreme("LT", hlo.minimum), emit.scalar_arith_max, _same))
register("any", params="x, axis=None, keepdims=False",
         family="Reductions", doc="whether any element over axis is true")(
    monoid("any", _always(hlo.or_), lambda dt: False, _as_bool))
register("all", params="x, axis=None, keepdims=False",
         family="Reductions", doc="whether all elements over axis are true")(
    monoid("all", _always(hlo.and_), lambda dt: True, _as_bool))


def _count(x, axes) -> int:
    return int(np.prod([concrete(x.type.shape)[a] for a in axes])) if axes else 1


def _mean_ir(cx, x, axes, dt, keep_shape=False):
    total = emit.reduce(cx.ir(x, dt), emit.const(0, dt), axes, hlo.add, dt)
    shape = emit.shape_of(total)
    return hlo.divide(total, emit.const(_count(x, axes), dt, shape))


@register("mean", params="x, axis=None, keepdims=False", family="Reductions", doc="arithmetic mean over axis")
def _mean(cx: CallCx, x, axis=None, keepdims=False):
    x, axes, keepdims = _read(cx, x, axis, keepdims)
    dt = float_dtype_for(x.type.dtype)
    wide = accumulation_dtype(dt)
    return _finish(cx, x, axes, keepdims, dt, lambda: emit.convert(_mean_ir(cx, x, axes, wide), wide, dt))


def _variance_ir(cx, x, axes, dt, ddof: int):
    """jnp.var's: computed in `dt`'s accumulation dtype and rounded to `dt` once; NaN where `ddof` leaves no
    degree of freedom (as JAX; NumPy gives inf or a negative count's quotient)."""
    wide = accumulation_dtype(dt)
    value = cx.ir(x, wide)
    in_shape = concrete(x.type.shape)
    mean = _mean_ir(cx, x, axes, wide)
    kept = [i for i in range(len(in_shape)) if i not in axes]
    mean_b = hlo.broadcast_in_dim(emit.tensor_type(in_shape, wide), mean, kept)
    centered = hlo.subtract(value, mean_b)
    sq = hlo.multiply(centered, centered)
    total = emit.reduce(sq, emit.const(0, wide), axes, hlo.add, wide)
    freedom = _count(x, axes) - ddof
    variance = hlo.divide(total, emit.const(freedom if freedom > 0 else np.nan, wide, emit.shape_of(total)))
    return emit.convert(variance, wide, dt)


@register("var", params="x, axis=None, keepdims=False, ddof=0",
          family="Reductions", doc="variance over axis, with ddof delta degrees of freedom")
def _var(cx: CallCx, x, axis=None, keepdims=False, ddof=0):
    x, axes, keepdims = _read(cx, x, axis, keepdims)
    ddof = ddof if isinstance(ddof, int) else cx.const_int(ddof, "ddof")
    dt = float_dtype_for(x.type.dtype)
    return _finish(cx, x, axes, keepdims, dt, lambda: _variance_ir(cx, x, axes, dt, ddof))


@register("std", params="x, axis=None, keepdims=False, ddof=0",
          family="Reductions", doc="standard deviation over axis, with ddof delta degrees of freedom")
def _std(cx: CallCx, x, axis=None, keepdims=False, ddof=0):
    x, axes, keepdims = _read(cx, x, axis, keepdims)
    ddof = ddof if isinstance(ddof, int) else cx.const_int(ddof, "ddof")
    dt = float_dtype_for(x.type.dtype)
    return _finish(cx, x, axes, keepdims, dt, lambda: hlo.sqrt(_variance_ir(cx, x, axes, dt, ddof)))


def logsumexp_ir(cx, x, axes, dt):
    value = cx.ir(x, dt)
    in_shape = concrete(x.type.shape)
    kept = [i for i in range(len(in_shape)) if i not in axes]
    peak = emit.reduce(value, emit.const(-np.inf, dt), axes, hlo.maximum, dt)
    # A row whose max is +-inf (all -inf, or an inf) must not produce inf - inf = nan.
    safe_peak = hlo.select(hlo.is_finite(peak), peak, emit.const(0, dt, emit.shape_of(peak)))
    peak_b = hlo.broadcast_in_dim(emit.tensor_type(in_shape, dt), safe_peak, kept)
    total = emit.reduce(hlo.exponential(hlo.subtract(value, peak_b)), emit.const(0, dt), axes, hlo.add, dt)
    return hlo.add(hlo.log(total), safe_peak)


@register("logsumexp", params="x, axis=None, keepdims=False",
          family="Reductions", doc="log(sum(e**x)) over axis, computed without overflow")
def _logsumexp(cx: CallCx, x, axis=None, keepdims=False):
    x, axes, keepdims = _read(cx, x, axis, keepdims)
    dt = float_dtype_for(x.type.dtype)
    return _finish(cx, x, axes, keepdims, dt, lambda: logsumexp_ir(cx, x, axes, dt))


def arg_reduce(direction: str):
    """argmax/argmin: first index of the extreme value; NaN counts as the extreme (as NumPy)."""
    def rule(cx: CallCx, x, axis=None, keepdims=False):
        x = cx.array(x, "x")
        if axis is None:
            axes = list(range(x.type.rank))
        else:
            axes = cx.axes(axis, x.type.rank)
            if len(axes) != 1:
                cx.error("E0204", "argmax/argmin take a single axis", at="axis")
        keepdims = cx.bool_flag(keepdims, "keepdims")
        _require_nonempty(cx, "argmax" if direction == "GT" else "argmin", x, axes)
        dt = x.type.dtype

        def reduced():
            value = cx.ir(x)
            in_shape = concrete(x.type.shape)
            if axis is None:            # flatten: index into the raveled array, as NumPy
                value = hlo.reshape(emit.tensor_type((int(np.prod(in_shape)),), dt), value)
                red_axes = [0]
                in_shape = (int(np.prod(in_shape)),)
            else:
                red_axes = axes
            index = hlo.iota(emit.tensor_type(in_shape, I32), red_axes[0])
            return emit.arg_reduce(value, index, red_axes, dt, I32, direction)
        return _finish(cx, x, axes, keepdims, I32, reduced)
    return rule


register("argmax", params="x, axis=None, keepdims=False",
         family="Reductions", doc="index of the first largest element over axis")(arg_reduce("GT"))
register("argmin", params="x, axis=None, keepdims=False",
         family="Reductions", doc="index of the first smallest element over axis")(arg_reduce("LT"))


@register("allclose", params="x, y, rtol=1e-05, atol=1e-08, equal_nan=False", family="Reductions",
          doc="whether all elements of x and y are close, all(isclose(x, y, rtol, atol, equal_nan)), as jnp")
def _allclose(cx: CallCx, x, y, rtol=1e-05, atol=1e-08, equal_nan=False):
    close = isclose_rule(cx, x, y, rtol, atol, equal_nan)
    axes = list(range(close.type.rank))
    return _finish(cx, close, axes, False, BOOL,
                   lambda: emit.reduce(cx.ir(close), emit.const(True, BOOL), axes, hlo.and_, BOOL))


def _one_axis(cx: CallCx, axis, rank: int, name: str) -> int:
    axes = cx.axes(axis, rank, name)
    if len(axes) != 1:
        cx.error("E0204", f"`{name}` must be a single axis, found {len(axes)}", "not one axis", at=name)
    return axes[0]


@register("trace", params="x, offset=0, axis1=0, axis2=1, dtype=None", family="Linear algebra",
          doc="sum of the offset-th diagonal of x over axis1 and axis2 (dtypes as `sum`)")
def _trace(cx: CallCx, x, offset=0, axis1=0, axis2=1, dtype=None):
    x = cx.array(x, "x")
    if x.type.rank < 2:
        cx.error("E0204", f"`trace` needs an array of rank 2 or more, found {x.type}", f"this is {x.type}", at="x")
    k = cx.static_int(offset, "offset")
    a1, a2 = (_one_axis(cx, a, x.type.rank, name) for a, name in ((axis1, "axis1"), (axis2, "axis2")))
    if a1 == a2:
        cx.error("E0204", f"`axis1` and `axis2` are both axis {a1}: the diagonal needs two different axes",
                 "the same axis", at="axis2")
    dt = _accumulator_dtype(x.type.dtype) if dtype is None else cx.dtype(dtype, "dtype")
    acc = accumulation_dtype(dt)
    if dtype is None:
        shape = x.type.shape
        diagonal = _diagonal_length(shape[a1], shape[a2], k)
        others = [x.type.shape[d] for d in range(x.type.rank) if d not in (a1, a2)]
        warn_if_sum_can_overflow(cx, "trace", x, diagonal * _prod(others), acc)

    def reduced():
        value = cx.ir(x, acc)
        s = concrete(x.type.shape)
        t = emit.tensor_type(s, I64)
        on_diagonal = emit.compare(hlo.subtract(hlo.iota(t, a2), hlo.iota(t, a1)), emit.const(k.value, I64, s),
                                   "EQ", I64)
        masked = hlo.select(on_diagonal, value, emit.const(0, acc, s))
        total = emit.reduce(masked, emit.const(0, acc), sorted((a1, a2)),
                            hlo.or_ if acc.is_bool else hlo.add, acc)
        return emit.convert(total, acc, dt)
    return _finish(cx, x, sorted((a1, a2)), False, dt, reduced)


def _diagonal_length(rows: Dim, cols: Dim, k: Dim) -> Dim:
    """The length of the k-th diagonal of a rows x cols matrix, where all three are known (else symbolic)."""
    if not (rows.is_const and cols.is_const and k.is_const):
        return Dim.var("diagonal")
    r, c, k = rows.value, cols.value, k.value
    return Dim.const(max(0, min(r, c - k) if k >= 0 else min(r + k, c)))
