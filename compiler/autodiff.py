"""Reverse-mode automatic differentiation of StableHLO (LANGUAGE.md section 15): `value_and_grad` turns a
function `f(args) -> y` (a float scalar) into `f(args) -> (y, dy/d args[i] for i in wrt)`, and `jvp`
makes forward mode of two reverse sweeps. Used by the
pass `value-and-grad` (passes/autodiff.py), the API's `arrc.grad`, and `grad(f)(...)` in arr code.

The backward sweep walks the entry block from its end: each operation whose results have cotangents gives
its operands theirs through its rule in VJP (JAX's lax rules, `jax/_src/lax/lax.py`, as templates, so the
values and the conventions at singular points are JAX's: `sqrt'(0) = inf`, max/min ties split evenly).
Cotangents of a value used several times are added. Every adjoint operation is built under
`Location.name("vjp(<op>)", childLoc=<the forward op's location>)`, so a guard that finds a NaN in the
backward pass blames the forward operation's span.

It differentiates elementwise math, broadcasts, reshapes, transposes, reductions, dot_general, slices,
concatenation, gathers, scatters, dynamic slices and updates, sorts, cumulative sums, products and
extremes (reduce_windows), selects, casts, `if` (each branch computed again in the backward `if`) and
loops (unrolled when the trip count is known and small, taped as JAX's scan when it is known or bounded
by `bound=`, otherwise recomputed: `_while_vjp`); host callbacks of print and assert run in the forward
pass only. docs/autodiff.md lists the rules and their conventions.
"""
from __future__ import annotations

import contextlib
import itertools
import threading
from typing import Callable

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func
from jaxlib.mlir.dialects import stablehlo as hlo

from . import abi, effects, emit
from .diagnostics import Diagnostic
from .locations import name_of, span_of
from .ops_linalg import LIVE, SHARD, STOP_GRADIENT, is_linalg, lapack_kernel, linalg_call, linalg_op
from .types import DTYPES, DType
from .walk import walk_ops


def dtype_of(value: ir.Value) -> DType:
    return emit.element_dtype(value.type)


def _is_float(value: ir.Value) -> bool:
    return dtype_of(value).is_float


def _shape(value: ir.Value) -> tuple:
    return emit.shape_of(value)


def _c(value, like: ir.Value) -> ir.Value:
    return emit.const(value, dtype_of(like), _shape(like))


def _bin(name: str, a: ir.Value, b: ir.Value) -> ir.Value:
    return emit.same_type(name, a, b)


def _mul(a, b):
    return _bin("stablehlo.multiply", a, b)


def _div(a, b):
    return _bin("stablehlo.divide", a, b)


def _neg(a):
    return emit.same_type("stablehlo.negate", a)


def _un(name: str, a):
    return emit.same_type(name, a)


def _select(pred, a, b):
    return emit.select(pred, a, b)


def _eq(a, b):
    return emit.compare(a, b, "EQ", dtype_of(a))


def _sum_to(ct: ir.Value, dims: list, out_shape: tuple) -> ir.Value:
    """`ct` summed over `dims`, then reshaped to `out_shape` (which keeps size-1 dimensions)."""
    dt = dtype_of(ct)
    if dims:
        ct = emit.reduce(ct, emit.const(0, dt, ()), list(dims), hlo.add, dt)
    if _shape(ct) != tuple(out_shape):
        ct = emit.op("stablehlo.reshape", emit.tensor_type(out_shape, dt), [ct])
    return ct


def _broadcast_to(x: ir.Value, shape: tuple, dims: list) -> ir.Value:
    return emit.op("stablehlo.broadcast_in_dim", emit.tensor_type(shape, dtype_of(x)), [x],
                   {"broadcast_dimensions": ir.DenseI64ArrayAttr.get(list(dims))})


def _attr_ints(op, name: str) -> list[int]:
    return list(ir.DenseI64ArrayAttr(op.attributes[name]))


# ---- the rules: rule(op, cts) -> cotangents of op's operands (None: none) ------------------------------
# `cts` are the cotangents of op's results (None where a result has none); `op.operands`, `op.results`.
# A cotangent may be a function that builds it: the sweep calls it only where that operand's is wanted.

def _elementwise(jvp: Callable) -> Callable:
    """A rule from `jvp(g, ans, x) -> [tangent contribution]` (JAX's defjvp2 form) for a one-operand op."""
    def rule(op, cts):
        return jvp(cts[0], op.results[0], *op.operands)
    return rule


def _binary(lhs: Callable, rhs: Callable) -> Callable:
    """A rule from `lhs(g, ans, x, y)` and `rhs(...)`, each operand's contribution, built only where the sweep
    wants it (a constant exponent's, `log(base) * ans`, would be NaN for a negative base)."""
    def rule(op, cts):
        args = (cts[0], op.results[0], *op.operands)
        return [lambda: lhs(*args), lambda: rhs(*args)]
    return rule


def _balanced_eq(x, ans, y):
    """JAX's `_balanced_eq`: 1 where x is the answer and y is not, 1/2 where both are, else 0."""
    one, half, zero = _c(1.0, x), _c(0.5, x), _c(0.0, x)
    return _select(_eq(x, ans), _select(_eq(y, ans), half, one), zero)


def _pow_lhs(g, ans, x, y, integer: bool):
    """JAX's: y * x ** (y - 1), NaN at x = y = 0 for a float exponent (jax's `pow`). For an exponent that was
    an integer: a constant one as jax's integer_pow, whose derivative n * x ** (n - 1) is an integer power
    again, so every higher derivative keeps the rule (`x ** 2`: 2 * x, then 2, then 0); an integer array
    as jax's `pow` of one, 0 where y is 0 (`_replace_zero`), its x ** (y - 1) a float power, as JAX's."""
    power = _bin("stablehlo.power", x, _bin("stablehlo.subtract", y, _c(1.0, y)))
    if not integer:
        return _mul(g, _mul(y, power))
    exponent = emit.constant_array(y)
    if exponent is not None and exponent.size and (exponent == exponent.flat[0]).all():
        n = float(exponent.flat[0])
        if n == 0:
            return _zeros(x)
        if n == 1:
            return g
        return _mul(g, _mul(_c(n, x), emit.mark(_bin("stablehlo.power", x, _c(n - 1, x)), abi.INTEGER_EXPONENT)))
    is_zero = _eq(y, _c(0.0, y))
    return _mul(g, _select(is_zero, _c(0.0, y), _mul(_select(is_zero, _c(1.0, y), y), power)))


def _power_vjp(op, cts):
    integer = abi.INTEGER_EXPONENT in op.attributes
    return _binary(lambda *args: _pow_lhs(*args, integer=integer), _pow_rhs)(op, cts)


def _pow_rhs(g, ans, x, y):
    safe_x = _select(_eq(x, _c(0.0, x)), _c(1.0, x), x)
    return _mul(g, _mul(_un("stablehlo.log", safe_x), ans))


def _one_minus_square(x):
    return _bin("stablehlo.subtract", _c(1.0, x), _mul(x, x))


def _round_toward_zero(x):
    return _mul(_un("stablehlo.sign", x), _un("stablehlo.floor", _un("stablehlo.abs", x)))


VJP: dict[str, Callable] = {
    "stablehlo.add": _binary(lambda g, ans, x, y: g, lambda g, ans, x, y: g),
    "stablehlo.subtract": _binary(lambda g, ans, x, y: g, lambda g, ans, x, y: _neg(g)),
    "stablehlo.multiply": _binary(lambda g, ans, x, y: _mul(g, y), lambda g, ans, x, y: _mul(x, g)),
    "stablehlo.divide": _binary(lambda g, ans, x, y: _div(g, y),
                                lambda g, ans, x, y: _mul(_mul(_neg(g), x), _div(_c(1.0, y), _mul(y, y)))),
    "stablehlo.negate": _elementwise(lambda g, ans, x: [_neg(g)]),
    "stablehlo.exponential": _elementwise(lambda g, ans, x: [_mul(g, ans)]),
    "stablehlo.exponential_minus_one": _elementwise(lambda g, ans, x: [
        _mul(g, _bin("stablehlo.add", ans, _c(1.0, ans)))]),
    "stablehlo.log": _elementwise(lambda g, ans, x: [_div(g, x)]),
    "stablehlo.log_plus_one": _elementwise(lambda g, ans, x: [_div(g, _bin("stablehlo.add", x, _c(1.0, x)))]),
    "stablehlo.sine": _elementwise(lambda g, ans, x: [_mul(g, _un("stablehlo.cosine", x))]),
    "stablehlo.cosine": _elementwise(lambda g, ans, x: [_neg(_mul(g, _un("stablehlo.sine", x)))]),
    "stablehlo.tanh": _elementwise(lambda g, ans, x: [
        _mul(g, _bin("stablehlo.subtract", _c(1.0, ans), _mul(ans, ans)))]),
    "stablehlo.logistic": _elementwise(lambda g, ans, x: [
        _mul(g, _mul(ans, _bin("stablehlo.subtract", _c(1.0, ans), ans)))]),
    "stablehlo.sqrt": _elementwise(lambda g, ans, x: [_mul(g, _div(_c(0.5, ans), ans))]),
    "stablehlo.rsqrt": _elementwise(lambda g, ans, x: [_mul(g, _mul(_c(-0.5, x), _div(ans, x)))]),
    "stablehlo.abs": _elementwise(lambda g, ans, x: [_select(emit.compare(x, _c(0.0, x), "GE", dtype_of(x)),
                                                             g, _neg(g))]),
    "stablehlo.sign": _elementwise(lambda g, ans, x: [None]),
    "stablehlo.floor": _elementwise(lambda g, ans, x: [None]),
    "stablehlo.ceil": _elementwise(lambda g, ans, x: [None]),
    "stablehlo.round_nearest_even": _elementwise(lambda g, ans, x: [None]),
    "stablehlo.power": _power_vjp,
    "stablehlo.tan": _elementwise(lambda g, ans, x: [_mul(g, hlo.add(_c(1.0, ans), _mul(ans, ans)))]),
    "stablehlo.cbrt": _elementwise(lambda g, ans, x: [_mul(g, _div(_c(1.0 / 3.0, ans), _mul(ans, ans)))]),
    "chlo.square": _elementwise(lambda g, ans, x: [_mul(g, _mul(_c(2.0, x), x))]),      # (jnp.square, var, std)
    "chlo.sinh": _elementwise(lambda g, ans, x: [_mul(g, _un("chlo.cosh", x))]),
    "chlo.cosh": _elementwise(lambda g, ans, x: [_mul(g, _un("chlo.sinh", x))]),
    "chlo.asin": _elementwise(lambda g, ans, x: [_mul(g, _un("stablehlo.rsqrt", _one_minus_square(x)))]),
    "chlo.acos": _elementwise(lambda g, ans, x: [_neg(_mul(g, _un("stablehlo.rsqrt", _one_minus_square(x))))]),
    "chlo.atan": _elementwise(lambda g, ans, x: [_div(g, hlo.add(_c(1.0, x), _mul(x, x)))]),
    "chlo.erf": _elementwise(lambda g, ans, x: [_mul(g, _mul(_c(2.0 / np.sqrt(np.pi), x),
                                                               _un("stablehlo.exponential", _neg(_mul(x, x)))))]),
    "chlo.erfc": _elementwise(lambda g, ans, x: [_mul(g, _mul(_c(-2.0 / np.sqrt(np.pi), x),
                                                                _un("stablehlo.exponential", _neg(_mul(x, x)))))]),
    "chlo.erf_inv": _elementwise(lambda g, ans, x: [_mul(_c(np.sqrt(np.pi) / 2.0, x),     # (truncated_normal's
                                                         _mul(g, _un("stablehlo.exponential", _mul(ans, ans))))]),  # bounds)
    "stablehlo.atan2": _binary(lambda g, ans, x, y: _mul(g, _div(y, hlo.add(_mul(x, x), _mul(y, y)))),
                               lambda g, ans, x, y: _mul(g, _div(_neg(x), hlo.add(_mul(x, x), _mul(y, y))))),
    "stablehlo.remainder": _binary(lambda g, ans, x, y: g,
                                   lambda g, ans, x, y: _mul(_neg(g), _round_toward_zero(_div(x, y)))),
    "stablehlo.round_nearest_afz": _elementwise(lambda g, ans, x: [None]),
    "stablehlo.maximum": _binary(lambda g, ans, x, y: _mul(g, _balanced_eq(x, ans, y)),
                                 lambda g, ans, x, y: _mul(g, _balanced_eq(y, ans, x))),
    "stablehlo.minimum": _binary(lambda g, ans, x, y: _mul(g, _balanced_eq(x, ans, y)),
                                 lambda g, ans, x, y: _mul(g, _balanced_eq(y, ans, x))),
}


def _rule(*names: str):
    def wrap(fn):
        for n in names:
            VJP[n] = fn
        return fn
    return wrap


@_rule("stablehlo.custom_call")
def _custom_call_vjp(op, cts):
    """A linear-algebra operation (compiler/ops_linalg.py), or one of jaxlib's LAPACK kernels that a module from
    elsewhere calls and JAX has a rule for (`lapack_kernel`): its derivative is one more placeholder, JAX's vjp
    of it (passes/linalg.py), on its operands and the cotangents of its float results. A host callback has
    no derivative (None)."""
    if not is_linalg(op):
        kernel = lapack_kernel(op)
        if kernel is None:
            return None
        name, params, derivative = kernel[0], kernel[1], 0
    else:
        name, params, derivative = linalg_call(op)
    if name == STOP_GRADIENT:
        return [None]
    if name == SHARD:                       # (JAX's transpose of a sharding constraint: the same constraint)
        return [linalg_op(name, [cts[0]], [cts[0].type], params).result] if cts[0] is not None else [None]
    cotangents = [ct for r, ct in zip(op.results, cts) if _is_float(r)]
    live = [i for i, ct in enumerate(cotangents) if ct is not None]
    if len(live) < len(cotangents):     # JAX's symbolic zeros: a result without a cotangent is dropped from the
        params = {**params, LIVE: [*params.get(LIVE, [None] * derivative), live]}  # vjp (`eigh`'s vectors'
    elif LIVE in params:                # 1 / (w_i - w_j) at repeated eigenvalues would make 0 * inf = NaN)
        params = {**params, LIVE: [*params[LIVE], None]}
    operands = list(op.operands)
    return list(linalg_op(name, operands + [cotangents[i] for i in live], [v.type for v in operands], params,
                          derivative + 1).results)


@_rule("stablehlo.select")
def _select_vjp(op, cts):
    pred, a, b = op.operands
    zero = _c(0.0, cts[0])
    if abi.RELU in op.attributes:       # jax.nn.relu's custom derivative: g where x > 0, else 0 (NaN too)
        return [None, None, _select(emit.compare(b, _c(0.0, b), "GT", dtype_of(b)), cts[0], zero)]
    if _shape(pred) != _shape(cts[0]):
        pred = _broadcast_to(pred, _shape(cts[0]), [])
    return [None, _select(pred, cts[0], zero), _select(pred, zero, cts[0])]


@_rule("stablehlo.clamp")
def _clamp_vjp(op, cts):
    """JAX's clamp rule (lax.clamp, jnp.clip in a JAX export): the cotangent goes to the operand strictly
    inside (min, max), to min where min > operand (and min < max), to max where max < operand; a scalar
    bound's is summed."""
    low, x, high = op.operands
    g, shape, dt = cts[0], _shape(x), dtype_of(x)

    def full(v):
        return v if _shape(v) == shape else _broadcast_to(v, shape, [])

    def gt(a, b):
        return emit.compare(a, b, "GT", dt)
    lo, hi, zero = full(low), full(high), _c(0.0, x)
    into = [_select(hlo.and_(gt(lo, x), gt(hi, lo)), g, zero), _select(hlo.and_(gt(x, lo), gt(hi, x)), g, zero),
            _select(gt(x, hi), g, zero)]
    return [ct if _shape(v) == shape else _sum_to(ct, list(range(len(shape))), ())
            for v, ct in zip((low, x, high), into)]


@_rule("stablehlo.convert")
def _convert_vjp(op, cts):
    (x,) = op.operands
    if not _is_float(x):
        return [None]
    return [emit.op("stablehlo.convert", x.type, [cts[0]])]


@_rule("stablehlo.bitcast_convert")
def _bitcast_vjp(op, cts):
    """The end of a rounding done on a float's bits (abi.ROUNDED, emit.py's f64 -> f16 rounding to odd):
    its value is that float's, rounded, so its derivative is a cast's, to the float whose bits it read.
    Any other bitcast has a zero derivative, as jax's (`ad.defjvp_zero(bitcast_convert_type_p)`)."""
    if abi.ROUNDED not in op.attributes:
        return [None]
    pending, seen = [op.operands[0]], set()
    while pending:                      # back through the integer ops on the bits, to the float read
        value = pending.pop()
        owner = value.owner
        if not isinstance(owner, ir.Operation) and not hasattr(owner, "operation") or value in seen:
            continue
        seen.add(value)
        owner = getattr(owner, "operation", owner)
        if owner.name == "stablehlo.bitcast_convert" and _is_float(owner.operands[0]):
            return {owner.operands[0]: emit.op("stablehlo.convert", owner.operands[0].type, [cts[0]])}
        pending += list(owner.operands)
    return None


@_rule("stablehlo.broadcast_in_dim")
def _broadcast_vjp(op, cts):
    (x,) = op.operands
    dims = _attr_ints(op, "broadcast_dimensions")
    out, xs = _shape(op.results[0]), _shape(x)
    summed = [d for d in range(len(out)) if d not in dims]
    summed += [d for i, d in enumerate(dims) if xs[i] == 1 and out[d] != 1]
    return [_sum_to(cts[0], sorted(summed), xs)]


@_rule("stablehlo.reshape")
def _reshape_vjp(op, cts):
    (x,) = op.operands
    return [emit.op("stablehlo.reshape", x.type, [cts[0]])]


@_rule("stablehlo.transpose")
def _transpose_vjp(op, cts):
    (x,) = op.operands
    perm = _attr_ints(op, "permutation")
    inverse = list(np.argsort(perm))
    return [emit.op("stablehlo.transpose", x.type, [cts[0]], {"permutation": ir.DenseI64ArrayAttr.get(inverse)})]


@_rule("stablehlo.reduce")
def _reduce_vjp(op, cts):
    if len(op.results) != 1:
        return None                         # variadic reduces (argmax) give integer results only
    x, _ = op.operands
    dims = _attr_ints(op, "dimensions")
    kept = [d for d in range(len(_shape(x))) if d not in dims]
    g = _broadcast_to(cts[0], _shape(x), kept)
    body = _reducer(op)
    if body == "stablehlo.add":
        return [g, None]
    if body in ("stablehlo.maximum", "stablehlo.minimum", "stablehlo.select"):
        # a chooser (max/min, arr's NaN-propagating ones select): JAX's _reduce_chooser_jvp_rule, ties split
        ans = _broadcast_to(op.results[0], _shape(x), kept)
        where = emit.op("stablehlo.convert", x.type, [_eq(x, ans)])
        counts = _broadcast_to(_sum_to(where, dims, tuple(_shape(op.results[0]))), _shape(x), kept)
        return [_mul(_div(g, counts), where), None]     # (as JAX orders it: a NaN answer, counted 0 times, is NaN)
    if body == "stablehlo.multiply":
        return [_mul(g, _product_of_others(x, dims)), None]
    return None


def _product_of_others(x: ir.Value, dims: list) -> ir.Value:
    """For each element of `x`, the product of the others in its reduction over `dims` (exact where `x`
    has zeros, unlike prod / x): the reduced dimensions moved last and flattened, the product of those
    before times those after, each an exclusive scan."""
    from .ops_scan import cumulative
    shape, dt = _shape(x), dtype_of(x)
    kept = [d for d in range(len(shape)) if d not in dims]
    perm = kept + list(dims)
    moved = tuple(shape[d] for d in perm)
    flat = tuple(shape[d] for d in kept) + (int(np.prod([shape[d] for d in dims])),)
    xt = emit.op("stablehlo.reshape", emit.tensor_type(flat, dt), [emit.op(
        "stablehlo.transpose", emit.tensor_type(moved, dt), [x], {"permutation": ir.DenseI64ArrayAttr.get(perm)})])
    last = len(flat) - 1
    before = _shift(cumulative(xt, last, hlo.multiply, 1.0, dt), last, 1, 1.0)
    after = _shift(cumulative(xt, last, hlo.multiply, 1.0, dt, reverse=True), last, -1, 1.0)
    others = emit.op("stablehlo.reshape", emit.tensor_type(moved, dt), [_mul(before, after)])
    return emit.op("stablehlo.transpose", x.type, [others],
                   {"permutation": ir.DenseI64ArrayAttr.get([int(a) for a in np.argsort(perm)])})


def _scan_axis(op) -> tuple:
    """(the axis, whether from the end) of an inclusive scan (ops_scan.cumulative: a window over all
    preceding, or following, elements of one axis, strides and dilations 1), or (None, None)."""
    shape = _shape(op.operands[0])
    window = _attr_ints(op, "window_dimensions")
    padding = np.asarray(ir.DenseIntElementsAttr(op.attributes["padding"])).reshape(len(shape), 2).tolist() \
        if "padding" in op.attributes else [[0, 0]] * len(shape)
    axes = [d for d, w in enumerate(window) if w != 1]
    if len(axes) != 1 or window[axes[0]] != shape[axes[0]] or \
            padding[axes[0]] not in ([shape[axes[0]] - 1, 0], [0, shape[axes[0]] - 1]):
        return None, None
    for name in ("window_strides", "base_dilations", "window_dilations"):
        if name in op.attributes and set(_attr_ints(op, name)) != {1}:
            return None, None
    return axes[0], padding[axes[0]][0] == 0 and shape[axes[0]] > 1


def _shift(v: ir.Value, axis: int, by: int, fill) -> ir.Value:
    """`v` moved `by` places along `axis` (later for by > 0), `fill` coming in."""
    rank = len(_shape(v))
    low, high = [0] * rank, [0] * rank
    low[axis], high[axis] = by, -by
    return emit.op("stablehlo.pad", v.type, [v, emit.const(fill, dtype_of(v), ())], {
        "edge_padding_low": ir.DenseI64ArrayAttr.get(low), "edge_padding_high": ir.DenseI64ArrayAttr.get(high),
        "interior_padding": ir.DenseI64ArrayAttr.get([0] * rank)})


def _cumprod_vjp(x, g, axis: int) -> ir.Value:
    """d/dx_k of sum_i g_i prod_{j<=i} x_j = prod_{j<k} x_j * S_k, S_k = g_k + x_{k+1} S_{k+1}: the
    recurrence solved by doubling (log2 n steps), so exact at zeros, unlike dividing by x."""
    from .ops_scan import cumulative
    before = _shift(cumulative(x, axis, hlo.multiply, 1.0, dtype_of(x)), axis, 1, 1.0)
    a, b = _shift(x, axis, -1, 0.0), g                # S_k = b_k + a_k S_{k+d}, d = 1, 2, 4, ...
    d = 1
    while d < _shape(x)[axis]:
        b = hlo.add(b, _mul(a, _shift(b, axis, -d, 0.0)))
        a = _mul(a, _shift(a, axis, -d, 0.0))
        d *= 2
    return _mul(before, b)


def _cumulative_chooser_vjp(x, ans, g, axis: int) -> ir.Value:
    """cummax/cummin: each g_i goes to the element that is the running maximum at i (of ties, the last
    one reached), by a scatter-add along `axis` (the other axes as batch dimensions)."""
    from .ops_scan import cumulative
    i32 = DTYPES["i32"]
    shape = _shape(x)
    iota = hlo.iota(emit.tensor_type(shape, i32), axis)
    holder = cumulative(_select(_eq(x, ans), iota, emit.const(-1, i32, shape)), axis, hlo.maximum, -1, i32)
    batch = [d for d in range(len(shape)) if d != axis]
    dnums = hlo.ScatterDimensionNumbers.get(
        update_window_dims=[], inserted_window_dims=[axis], input_batching_dims=batch,
        scatter_indices_batching_dims=batch, scattered_dims_to_operand_dims=[axis], index_vector_dim=len(shape))
    return emit.scatter(_zeros(x), holder, g, dnums, hlo.add)


@_rule("stablehlo.reduce_window")
def _reduce_window_vjp(op, cts):
    """JAX's `_reduce_window_sum_transpose_rule` (cumsum is one): the cotangent padded by the window's
    complement and summed over the same window; and the scans cumprod, cummax and cummin."""
    if len(op.results) != 1:
        return None
    x, _ = op.operands
    body = _reducer(op)
    if body != "stablehlo.add":
        axis, reverse = _scan_axis(op)
        if axis is None or body not in ("stablehlo.multiply", "stablehlo.maximum", "stablehlo.minimum"):
            return None
        flip = (lambda v: emit.op("stablehlo.reverse", v.type, [v], {"dimensions": ir.DenseI64ArrayAttr.get([axis])})) \
            if reverse else (lambda v: v)             # a scan from the end: the scan of the reversed array
        x_, ans, g = flip(x), flip(op.results[0]), flip(cts[0])
        ct = _cumprod_vjp(x_, g, axis) if body == "stablehlo.multiply" else _cumulative_chooser_vjp(x_, ans, g, axis)
        return [flip(ct), None]
    rank = len(_shape(x))
    ones = [1] * rank
    window = _attr_ints(op, "window_dimensions")
    strides = _attr_ints(op, "window_strides") if "window_strides" in op.attributes else ones
    for name in ("base_dilations", "window_dilations"):
        if name in op.attributes and _attr_ints(op, name) != ones:
            return None
    padding = np.asarray(ir.DenseIntElementsAttr(op.attributes["padding"])).reshape(rank, 2).tolist() \
        if "padding" in op.attributes else [[0, 0]] * rank
    out = _shape(op.results[0])
    low = [w - lo - 1 for w, (lo, _) in zip(window, padding)]
    high = [n + w - 1 - ((o - 1) * st + 1) - b for n, w, o, st, b in zip(_shape(x), window, out, strides, low)]
    dt = dtype_of(x)
    padded_shape = tuple(o + (o - 1) * (st - 1) + lo + hi for o, st, lo, hi in zip(out, strides, low, high))
    padded = emit.op("stablehlo.pad", emit.tensor_type(padded_shape, dt), [cts[0], emit.const(0.0, dt, ())], {
        "edge_padding_low": ir.DenseI64ArrayAttr.get(low), "edge_padding_high": ir.DenseI64ArrayAttr.get(high),
        "interior_padding": ir.DenseI64ArrayAttr.get([st - 1 for st in strides])})
    summed = hlo.ReduceWindowOp([x.type], [padded], [emit.const(0.0, dt, ())], window_dimensions=window)
    scalar = emit.tensor_type((), dt)
    block = summed.body.blocks.append(scalar, scalar)
    with ir.InsertionPoint(block):
        hlo.return_([hlo.add(*block.arguments)])
    return [summed.results[0], None]


def _reducer(op) -> str:
    """The operation that makes a reduce body's result (`stablehlo.add` for a sum)."""
    block = op.regions[0].blocks[0]
    returned = list(block.operations)[-1].operands[0]
    return getattr(returned.owner, "name", "")          # (a block argument's owner is the block)


def _ranges_like(*xs):
    start = 0
    for x in xs:
        yield list(range(start, start + len(x)))
        start += len(x)


def _dot_transpose_lhs(g, x, y, contract, batch, swap_ans=False):
    """JAX's `_dot_general_transpose_lhs`: the cotangent of `x` in dot_general(x, y)."""
    (x_contract, y_contract), (x_batch, y_batch) = contract, batch
    x_kept = [d for d in range(len(_shape(x))) if d not in x_contract and d not in x_batch]
    y_kept = [d for d in range(len(_shape(y))) if d not in y_contract and d not in y_batch]
    if swap_ans:
        ans_batch, ans_y, _ = _ranges_like(x_batch, y_kept, x_kept)
    else:
        ans_batch, _, ans_y = _ranges_like(x_batch, x_kept, y_kept)
    dims = hlo.DotDimensionNumbers.get(lhs_batching_dimensions=ans_batch, rhs_batching_dimensions=list(y_batch),
                                       lhs_contracting_dimensions=ans_y, rhs_contracting_dimensions=y_kept)
    x_contract_sorted_by_y = list(np.take(x_contract, np.argsort(y_contract))) if x_contract else []
    order = list(x_batch) + x_kept + x_contract_sorted_by_y
    gs, ys = _shape(g), _shape(y)
    shape = [gs[d] for d in ans_batch] + [gs[d] for d in range(len(gs)) if d not in ans_batch and d not in ans_y] + \
        [ys[d] for d in range(len(ys)) if d not in y_kept and d not in y_batch]
    out = hlo.dot_general(emit.tensor_type(tuple(shape), dtype_of(g)), g, y, dims)
    out_axes = [int(a) for a in np.argsort(order)]
    if out_axes != list(range(len(out_axes))):
        out = emit.op("stablehlo.transpose", x.type, [out], {"permutation": ir.DenseI64ArrayAttr.get(out_axes)})
    return out


@_rule("stablehlo.dot_general")
def _dot_general_vjp(op, cts):
    x, y = op.operands
    numbers = hlo.DotDimensionNumbers(op.attributes["dot_dimension_numbers"])
    contract = (list(numbers.lhs_contracting_dimensions), list(numbers.rhs_contracting_dimensions))
    batch = (list(numbers.lhs_batching_dimensions), list(numbers.rhs_batching_dimensions))
    g = cts[0]
    return [_dot_transpose_lhs(g, x, y, contract, batch),
            _dot_transpose_lhs(g, y, x, contract[::-1], batch[::-1], swap_ans=True)]


def _conv_attrs(op) -> dict:
    """A convolution's window: strides, padding pairs and dilations (XLA's defaults where absent)."""
    n = len(_shape(op.operands[0])) - 2
    ints = {name: _attr_ints(op, name) if name in op.attributes else [1] * n
            for name in ("window_strides", "lhs_dilation", "rhs_dilation")}
    padding = np.asarray(ir.DenseIntElementsAttr(op.attributes["padding"])).reshape(n, 2).tolist() \
        if "padding" in op.attributes else [[0, 0]] * n
    return {**ints, "padding": [tuple(p) for p in padding]}


def _dilate(sizes, dilation) -> list:
    return [0 if d == 0 else 1 + r * (d - 1) for d, r in zip(sizes, dilation)]


@_rule("stablehlo.convolution")
def _convolution_vjp(op, cts):
    """JAX's `_conv_general_dilated_transpose_lhs` and `_rhs` (jax/_src/lax/convolution.py): the input's
    cotangent is the cotangent convolved with the kernel reversed in space (the roles of strides and
    input dilation swapped, groups moved into the kernel's input features), the kernel's the input
    convolved with the cotangent (feature groups become batch groups and batch groups feature groups:
    the kernel's cotangent of a grouped convolution has batch groups, and its own derivative, in a
    jvp or a second derivative, feature groups again)."""
    lhs, rhs = op.operands
    g = cts[0]
    d = hlo.ConvDimensionNumbers(op.attributes["dimension_numbers"])
    groups = ir.IntegerAttr(op.attributes["feature_group_count"]).value
    batch_groups = ir.IntegerAttr(op.attributes["batch_group_count"]).value
    reversal = "window_reversal" in op.attributes and any(ir.DenseBoolArrayAttr(op.attributes["window_reversal"]))
    if groups > 1 and batch_groups > 1 or reversal:
        return None                 # (not what arr or JAX's conv emits: E0216)
    a = _conv_attrs(op)
    lhs_spec = (d.input_batch_dimension, d.input_feature_dimension, list(d.input_spatial_dimensions))
    rhs_spec = (d.kernel_output_feature_dimension, d.kernel_input_feature_dimension, list(d.kernel_spatial_dimensions))
    out_spec = (d.output_batch_dimension, d.output_feature_dimension, list(d.output_spatial_dimensions))
    lhs_shape, rhs_shape, g_shape = _shape(lhs), _shape(rhs), _shape(g)
    in_sizes = [lhs_shape[i] for i in lhs_spec[2]]
    windows = [rhs_shape[i] for i in rhs_spec[2]]
    out_sizes = [g_shape[i] for i in out_spec[2]]
    lhs_dilated, rhs_dilated = _dilate(in_sizes, a["lhs_dilation"]), _dilate(windows, a["rhs_dilation"])
    out_dilated = _dilate(out_sizes, a["window_strides"])
    dt = dtype_of(g)
    # the input's cotangent: the kernel's out-features (G, O/G) -> the G into its in-features, major
    grouped = max(groups, batch_groups)
    kernel = _axis_into(_axis_out_of(rhs, rhs_spec[0], grouped), rhs_spec[0], rhs_spec[1]) if grouped > 1 else rhs
    before = [k - lo - 1 for k, (lo, _) in zip(rhs_dilated, a["padding"])]
    after = [ld + k - 1 - od - b for ld, k, od, b in zip(lhs_dilated, rhs_dilated, out_dilated, before)]
    reversed_kernel = hlo.reverse(kernel, rhs_spec[2])
    lhs_type = lhs.type
    if batch_groups > 1:        # made as [N / B, B * C, ...], then the B moved into the batch, major
        grouped_shape = list(lhs_shape)
        grouped_shape[lhs_spec[0]] //= batch_groups
        grouped_shape[lhs_spec[1]] *= batch_groups
        lhs_type = emit.tensor_type(tuple(grouped_shape), dt)
    lhs_ct = emit.convolution(lhs_type, g, reversed_kernel,
                              (out_spec, (rhs_spec[1], rhs_spec[0], rhs_spec[2]), lhs_spec),
                              a["lhs_dilation"], list(zip(before, after)), a["window_strides"], a["rhs_dilation"],
                              features=grouped)
    if batch_groups > 1:
        lhs_ct = _axis_into(_axis_out_of(lhs_ct, lhs_spec[1], batch_groups), lhs_spec[1], lhs_spec[0])
    # the kernel's cotangent
    lows = [lo for lo, _ in a["padding"]]
    highs = [od - ld + (k - lo - 1) for od, ld, k, lo in zip(out_dilated, lhs_dilated, rhs_dilated, lows)]
    rhs_ct = emit.convolution(rhs.type, lhs, g, ((lhs_spec[1], lhs_spec[0], lhs_spec[2]),
                                                 (out_spec[1], out_spec[0], out_spec[2]),
                                                 (rhs_spec[1], rhs_spec[0], rhs_spec[2])),
                              a["rhs_dilation"], list(zip(lows, highs)), a["lhs_dilation"], a["window_strides"],
                              features=batch_groups, batches=groups)
    return [lhs_ct, rhs_ct]


def _axis_out_of(x: ir.Value, axis: int, size: int) -> ir.Value:
    """JAX's `_reshape_axis_out_of`: dimension `axis` of `x` split into (size, the rest)."""
    shape = list(_shape(x))
    shape[axis:axis + 1] = [size, shape[axis] // size]
    return hlo.reshape(emit.tensor_type(tuple(shape), dtype_of(x)), x)


def _axis_into(x: ir.Value, src: int, dst: int) -> ir.Value:
    """JAX's `_reshape_axis_into`: dimension `src` of `x` merged into `dst` (numbered without `src`), major."""
    shape = _shape(x)
    perm = [k for k in range(len(shape)) if k != src]
    perm.insert(dst, src)
    merged = [shape[k] for k in range(len(shape)) if k != src]
    merged[dst] *= shape[src]
    return hlo.reshape(emit.tensor_type(tuple(merged), dtype_of(x)), hlo.transpose(x, perm))


@_rule("stablehlo.slice")
def _slice_vjp(op, cts):
    (x,) = op.operands
    start, limit, strides = (_attr_ints(op, n) for n in ("start_indices", "limit_indices", "strides"))
    out = _shape(op.results[0])
    high = [d - (s + (n - 1) * st + 1) if n else d - s for d, s, n, st in zip(_shape(x), start, out, strides)]
    return [emit.op("stablehlo.pad", x.type, [cts[0], emit.const(0.0, dtype_of(x), ())], {
        "edge_padding_low": ir.DenseI64ArrayAttr.get(start), "edge_padding_high": ir.DenseI64ArrayAttr.get(high),
        "interior_padding": ir.DenseI64ArrayAttr.get([st - 1 for st in strides])})]


@_rule("stablehlo.pad")
def _pad_vjp(op, cts):
    """JAX's `_pad_transpose`: the cotangent unpadded (edges negated) and strided past the interior; the
    padding value's is what remains."""
    x, value = op.operands
    low, high, interior = (_attr_ints(op, n) for n in ("edge_padding_low", "edge_padding_high", "interior_padding"))
    g = cts[0]
    dt = dtype_of(g)
    unpadded_shape = tuple(n - lo - hi for n, lo, hi in zip(_shape(g), low, high))
    unpadded = emit.op("stablehlo.pad", emit.tensor_type(unpadded_shape, dt), [g, emit.const(0.0, dt, ())], {
        "edge_padding_low": ir.DenseI64ArrayAttr.get([-v for v in low]),
        "edge_padding_high": ir.DenseI64ArrayAttr.get([-v for v in high]),
        "interior_padding": ir.DenseI64ArrayAttr.get([0] * len(low))})
    taken = emit.op("stablehlo.slice", x.type, [unpadded], {
        "start_indices": ir.DenseI64ArrayAttr.get([0] * len(low)),
        "limit_indices": ir.DenseI64ArrayAttr.get(list(unpadded_shape)),
        "strides": ir.DenseI64ArrayAttr.get([i + 1 for i in interior])})
    everything = list(range(len(low)))
    rest = _bin("stablehlo.subtract", _sum_to(g, everything, ()), _sum_to(taken, everything, ()))
    return [taken, rest]


@_rule("stablehlo.reverse")
def _reverse_vjp(op, cts):
    return [emit.op("stablehlo.reverse", op.operands[0].type, [cts[0]], {"dimensions": op.attributes["dimensions"]})]


@_rule("stablehlo.optimization_barrier")
def _barrier_vjp(op, cts):
    return list(cts)


@_rule("stablehlo.dynamic_slice")
def _dynamic_slice_vjp(op, cts):
    x, *starts = op.operands            # clamped into range by both ops alike
    zeros = emit.const(0.0, dtype_of(x), _shape(x))
    return [emit.op("stablehlo.dynamic_update_slice", x.type, [zeros, cts[0], *starts])] + [None] * len(starts)


@_rule("stablehlo.concatenate")
def _concatenate_vjp(op, cts):
    axis = ir.IntegerAttr(op.attributes["dimension"]).value
    out, at = [], 0
    for x in op.operands:
        xs = _shape(x)
        start = [0] * len(xs)
        start[axis] = at
        limit = list(_shape(cts[0]))
        limit[axis] = at + xs[axis]
        at += xs[axis]
        out.append(emit.op("stablehlo.slice", x.type, [cts[0]], {
            "start_indices": ir.DenseI64ArrayAttr.get(start), "limit_indices": ir.DenseI64ArrayAttr.get(limit),
            "strides": ir.DenseI64ArrayAttr.get([1] * len(xs))}) if _is_float(x) else None)
    return out


@_rule("stablehlo.dynamic_update_slice")
def _dynamic_update_slice_vjp(op, cts):
    x, update, *starts = op.operands           # both ops clamp the starts alike
    kept = emit.op("stablehlo.dynamic_update_slice", x.type, [cts[0], _zeros(update), *starts])
    taken = emit.op("stablehlo.dynamic_slice", update.type, [cts[0], *starts],
                    {"slice_sizes": ir.DenseI64ArrayAttr.get(list(_shape(update)))})
    return [kept, taken] + [None] * len(starts)


def _index_bounds(indices, index_map: list, vector_dim: int, operand_shape, sizes) -> tuple:
    """(0, the largest in-range start) per component of `indices`, as tensors of its shape."""
    ishape, idt = _shape(indices), dtype_of(indices)
    highs = [operand_shape[d] - sizes[d] for d in index_map]
    if vector_dim == len(ishape):
        high = emit.const(highs[0], idt, ishape)
    else:
        high = _broadcast_to(emit.const(np.array(highs), idt, (len(highs),)), ishape, [vector_dim])
    return emit.const(0, idt, ishape), high


@_rule("stablehlo.gather")
def _gather_vjp(op, cts):
    """JAX's `_gather_transpose_rule`: the cotangent scatter-added into zeros (repeated indices
    accumulate), at the starts the gather clamped them to (a scatter would drop them instead)."""
    x, indices = op.operands
    d = hlo.GatherDimensionNumbers(op.attributes["dimension_numbers"])
    sizes = _attr_ints(op, "slice_sizes")
    low, high = _index_bounds(indices, list(d.start_index_map), d.index_vector_dim, _shape(x), sizes)
    clamped = hlo.clamp(low, indices, high)
    dnums = hlo.ScatterDimensionNumbers.get(
        update_window_dims=list(d.offset_dims), inserted_window_dims=list(d.collapsed_slice_dims),
        input_batching_dims=list(d.operand_batching_dims),
        scatter_indices_batching_dims=list(d.start_indices_batching_dims),
        scattered_dims_to_operand_dims=list(d.start_index_map), index_vector_dim=d.index_vector_dim)
    return [emit.scatter(_zeros(x), clamped, cts[0], dnums, hlo.add), None]


@_rule("stablehlo.scatter")
def _scatter_vjp(op, cts):
    """JAX's scatter transposes: an update's cotangent is the result's cotangent gathered where it went
    (zero where the scatter dropped it as out of range). `add`: the operand's passes through. A plain
    store: only what no update overwrote reaches the operand, and of repeated indices only the update
    that won (found as JAX's `_scatter_jvp` does, by scattering ids)."""
    if len(op.results) != 1:
        return None
    x, indices, updates = op.operands
    block = op.regions[0].blocks[0]
    returned = list(block.operations)[-1].operands[0]
    add = getattr(returned.owner, "name", "") == "stablehlo.add"
    if not add and returned != block.arguments[1]:
        return None
    d = hlo.ScatterDimensionNumbers(op.attributes["scatter_dimension_numbers"])
    window = list(d.update_window_dims)
    sizes, at = [], 0
    for i in range(len(_shape(x))):
        if i in d.inserted_window_dims or i in d.input_batching_dims:
            sizes.append(1)
        else:
            sizes.append(_shape(updates)[window[at]])
            at += 1
    gdnums = hlo.GatherDimensionNumbers.get(
        offset_dims=window, collapsed_slice_dims=list(d.inserted_window_dims),
        operand_batching_dims=list(d.input_batching_dims),
        start_indices_batching_dims=list(d.scatter_indices_batching_dims),
        start_index_map=list(d.scattered_dims_to_operand_dims), index_vector_dim=d.index_vector_dim)
    low, high = _index_bounds(indices, list(d.scattered_dims_to_operand_dims), d.index_vector_dim, _shape(x), sizes)
    ishape = _shape(indices)
    inside = hlo.and_(emit.compare(indices, low, "GE", dtype_of(indices)),
                      emit.compare(indices, high, "LE", dtype_of(indices)))
    if d.index_vector_dim < len(ishape):
        inside = emit.reduce(inside, emit.const(True, DTYPES["bool"], ()), [d.index_vector_dim], hlo.and_,
                             DTYPES["bool"])
    scatter_dims = [i for i in range(len(_shape(updates))) if i not in window]
    taken = _select(_broadcast_to(inside, _shape(updates), scatter_dims),
                    hlo.gather(cts[0], indices, gdnums, sizes, indices_are_sorted=False), _zeros(updates))
    if add:
        return [cts[0], None, taken]
    i32 = DTYPES["i32"]
    batch = [_shape(updates)[i] for i in scatter_dims]
    count = int(np.prod(batch))
    ids = hlo.add(hlo.iota(emit.tensor_type((count,), i32), 0), emit.const(1, i32, (count,)))  # 0: not overwritten
    ids = _broadcast_to(emit.op("stablehlo.reshape", emit.tensor_type(tuple(batch), i32), [ids]),
                        _shape(updates), scatter_dims)
    won = emit.scatter(emit.const(0, i32, _shape(x)), indices, ids, op.attributes["scatter_dimension_numbers"])
    kept = _select(_eq(won, emit.const(0, i32, _shape(x))), cts[0], _zeros(x))
    winner = _eq(hlo.gather(won, indices, gdnums, sizes, indices_are_sorted=False), ids)
    return [kept, None, _select(winner, taken, _zeros(updates))]


@_rule("stablehlo.sort")
def _sort_vjp(op, cts):
    """The sort again with the positions (an iota) as one more operand gives the permutation; each
    cotangent goes back to where its element came from by sorting it along with the permutation."""
    from . import ops_scan
    dim = ir.IntegerAttr(op.attributes["dimension"]).value
    operands = list(op.operands)
    i32 = DTYPES["i32"]
    shape = _shape(operands[0])
    iota = hlo.iota(emit.tensor_type(shape, i32), dim)
    again = _sort_again(op, operands + [iota], dim)
    perm = again[-1]
    out = []
    for x, ct in zip(operands, cts):
        out.append(None if ct is None or not _is_float(x) else ops_scan._sort([perm, ct], [i32, dtype_of(ct)], dim)[1])
    return out


def _sort_again(op, values: list, dim: int) -> list:
    """`values` (op's operands, then more) sorted along `dim` by the comparator of the sort `op` on its own
    operands, the extra values riding along."""
    sort = hlo.SortOp([v.type for v in values], values, dimension=dim, is_stable=True)
    block = sort.comparator.blocks.append(*[emit.tensor_type((), dtype_of(v)) for v in values for _ in (0, 1)])
    with ir.InsertionPoint(block):
        hlo.return_(_recompute(op, 0, list(block.arguments[:2 * len(op.operands)]))[1])
    return list(sort.results)


NOT_DIFFERENTIABLE = {"stablehlo.constant", "stablehlo.iota", "stablehlo.compare", "stablehlo.and",
                      "stablehlo.or", "stablehlo.not", "stablehlo.xor", "stablehlo.is_finite"}


# ---- the transformation ----------------------------------------------------------------------------
def value_and_grad(fn, wrt: tuple, keep_value: bool = True, seeded: bool = False, sites: list | None = None) -> list:
    """Rewrite the func.func `fn` in place to return its value(s) (if `keep_value`) and derivatives with
    respect to the arguments `wrt`: of its one result (a float scalar), or with `seeded`, of the sum of each
    result's product with a cotangent that `fn` takes as a new argument after its own, one per result
    (`jax.vjp`; an integer result's cotangent is ignored, as JAX's float0). Returns diagnostics (E0216 for
    an operation this step cannot differentiate). A loop with a `bound=` and a run-time trip count checks
    it: `fn` then returns the first run past a bound (compiler/effects.py PAST) as an extra result before
    its io token (abi.BOUND_RESULT), the loop numbered after `sites` (the module's, or where None those
    its module holds: `effects.sites_in`)."""
    block = fn.regions[0].blocks[0]
    if count_ops(fn, MAX_DIFFERENTIATED_OPS) > MAX_DIFFERENTIATED_OPS:
        return [_too_large(fn)]
    unroll_counted_loops(block)
    _number_from(fn)
    ops = list(block.operations)
    forward = {o.operation for o in ops[:-1]}
    ret = ops[-1]
    extra = max(emit.int_attr(fn, abi.EXTRA_RESULTS, -1), 0)
    results = list(ret.operands)[:len(ret.operands) - extra]
    extras = list(ret.operands)[len(results):]          # the io token of prints and asserts: stays last
    given = [block.add_argument(r.type, ret.location) for r in results] if seeded else []
    with ir.InsertionPoint(ret), ret.location:
        seeds = {} if seeded else {results[0]: emit.const(1.0, dtype_of(results[0]), ())}
        for r, seed in zip(results, given):
            if _is_float(r):
                seeds[r] = hlo.add(seeds[r], seed) if r in seeds else seed
        _building.bounds.append(_Bounds(effects.sites_in(fn.operation.parent) if sites is None else sites))
        _building.masked.append(set())
        try:
            cts = sweep(ops[:-1], seeds, {block.arguments[i] for i in wrt})
        finally:
            pasts = _building.bounds.pop().regions[0]
            masked = _building.masked.pop()
        if isinstance(cts, Diagnostic):
            return [cts]
        grads = [cts.get(block.arguments[i]) or _zeros(block.arguments[i]) for i in wrt]
        held = emit.int_attr(fn, abi.BOUND_RESULT)
        past = ret.operands[held] if held is not None else None
        if pasts:
            merged = _merged(([past] if past is not None else []) + pasts)
            extras = [merged if v == past else v for v in extras] if past is not None else [merged] + extras
            past = merged
        outs = (results if keep_value else []) + grads + extras
        func.ReturnOp(outs)
    ret.erase()
    _mark_unrolled_adjoints(block, forward)
    _mark_masked_adjoints(fn, masked)
    # cotangents nothing uses (the all-ops guards would check them; a constant exponent's, `log(base) * ans`,
    # is NaN for a negative base). Not ops with regions: erasing one leaves the Python objects of the ops
    # inside it pointing at freed memory (a later walk crashed)
    erase_dead([o for o in list(block.operations)[:-1] if o.operation not in forward and not o.operation.regions])
    erase_dead([o for o in ops[:-1] if o.operation.name == "stablehlo.while"])     # loops replaced by tapes
    if past is not None:
        emit.set_int_attr(fn, abi.BOUND_RESULT, outs.index(past))
        emit.set_int_attr(fn, abi.EXTRA_RESULTS, len(extras))
    types = [v.type for v in outs]
    inputs = [a.type for a in block.arguments]
    fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, types))
    if "res_attrs" in fn.attributes:                # one per result before (a JAX export's)
        del fn.attributes["res_attrs"]
    if "arg_attrs" in fn.attributes:                # the cotangent arguments have none
        attrs = list(ir.ArrayAttr(fn.attributes["arg_attrs"]))
        fn.attributes["arg_attrs"] = ir.ArrayAttr.get(attrs + [ir.DictAttr.get({})] * (len(inputs) - len(attrs)))
    return []


MAX_DIFFERENTIATED_OPS = 100_000    # operations (nested ones included) of a function to differentiate


def _too_large(fn) -> Diagnostic:
    """E0004 for a function too large to differentiate: a derivative holds several times its function's
    operations (a taped loop's body three times over), so each order of a derivative of a derivative
    multiplied the program (6 to 9 times through a loop: order 7 took 29 s and 1.5 GB, order 8 minutes)."""
    return Diagnostic("E0004", f"more than {MAX_DIFFERENTIATED_OPS:,} operations to differentiate",
                      span_of(fn.location), "this function, with what it calls and the derivatives it takes",
                      help="take fewer derivatives of derivatives, or differentiate a smaller function")


def _mark_unrolled_adjoints(block, forward: set) -> None:
    """Give each adjoint of an operation in a copy of an unrolled loop that copy's marks (abi.UNROLLED,
    abi.UNROLLED_LANES): the guard pass reads an adjoint's from its forward operation, which is erased where
    the derivative does not use its value (`x ** 0.5`'s is `0.5 * x ** -0.5`), and a report lost the iteration."""
    marks = {ir.IntegerAttr(o.attributes[abi.FORWARD_ID]).value: o for o in forward
             if abi.UNROLLED in o.attributes and abi.FORWARD_ID in o.attributes}
    if not marks:
        return
    for op in block.operations:
        op = op.operation
        source = marks.get(adjoint_id(op.location)) if op not in forward else None
        for attr in (abi.UNROLLED, abi.UNROLLED_LANES):
            if source is not None and attr in source.attributes and attr not in op.attributes:
                op.attributes[attr] = source.attributes[attr]


def _mark_masked_adjoints(fn, masked: set) -> None:
    """Mark abi.MASKED each adjoint (at any depth) of an operation vmap computes for lanes whose select drops
    it (compiler/batching.py `_mark_masked`; `masked`: their forward ids, gathered by the sweep, as a taped
    loop's copies of them are gone): such a lane gets a zero cotangent there, which the derivative may make
    NaN (`0 * inf`, sqrt's at 0) before the gate's select drops it, and the all-ops guards reported it.
    Marked, they report only what reaches a result, as the forward operation does."""
    def visit(op):
        op = op.operation
        if adjoint_id(op.location) in masked:
            op.attributes[abi.MASKED] = ir.BoolAttr.get(True)
        return ir.WalkResult.ADVANCE
    if masked:
        walk_ops(fn.operation, visit)


class _Bounds:
    """The checks of loop bounds in the derivative being built: the sites of its module (a loop's number
    is its index there) and, per region being swept (the function's block, then the body of a backward
    loop or a branch inside it), the PAST values of its loops (compiler/effects.py), to be returned."""

    def __init__(self, sites: list):
        self.sites, self.regions = sites, [[]]


class _Building(threading.local):
    """What the derivative being built in this thread keeps while its sweeps run (threads lower concurrently)."""

    def __init__(self):
        self.bounds: list = []      # the _Bounds of the derivative being built
        self.varied: list = []      # the varied values of each sweep in progress, outermost first
        self.masked: list = []      # per derivative being built: the forward ids of the abi.MASKED ops swept


_building = _Building()


@contextlib.contextmanager
def _region_pasts():
    """Collect the PAST values of a region swept inside another (a list; `_merged` makes one of them)."""
    found: list = []
    _building.bounds[-1].regions.append(found)
    try:
        yield found
    finally:
        _building.bounds[-1].regions.pop()


def _merged(pasts: list) -> ir.Value:
    """One PAST value of several (in program order: the first run past a bound wins), or none."""
    if not pasts:
        return effects.no_past()
    out = pasts[0]
    for p in pasts[1:]:
        out = effects.first_past(out, p)
    return out


def _checks_a_bound(op) -> bool:
    """Whether a loop in the regions of `op` has a `bound=` and a run-time trip count (its derivative
    checks the bound: a region that sweeps it returns a PAST value)."""
    found = []

    def visit(inner):
        inner = inner.operation
        if inner.name == "stablehlo.while" and abi.LOOP_BOUND in inner.attributes \
                and emit.int_attr(inner, abi.TRIP_COUNT, -1) < 0:
            found.append(inner)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE
    for region in op.operation.regions:
        for block in region.blocks:
            for inner in block.operations:
                walk_ops(inner.operation, visit)
                if found:
                    return True
    return False


def jvp(fn, wrt: tuple, sites: list | None = None) -> list:
    """Rewrite the func.func `fn(x...) -> (y...)` (float results) in place to `fn(x..., t...) -> (y...,
    J t...)`: its results and their tangents, given a tangent `t` of each argument in `wrt` (`jax.jvp`).

    Forward mode by linear transposition, so every reverse rule serves it too: the seeded reverse sweep
    makes g(x, c) = (y, J(x)^T c), linear in the cotangents c; the seeded reverse sweep of g with respect
    to c, with seeds s for y and t for J^T c, is s * dy/dc + (J^T)^T t = J t, the same at every c and s
    (both 0 here). y stays among g's results in the second sweep so that the values it names stay those
    of the rewritten function (the sweeps replace loops). About one forward and two backward sweeps of
    work before XLA removes what the results do not use (J^T c, the sweep from y, cotangents of x).
    Returns diagnostics (E0216, as value_and_grad)."""
    block = fn.regions[0].blocks[0]
    extra = max(emit.int_attr(fn, abi.EXTRA_RESULTS, -1), 0)
    n, m, k = len(block.arguments), len(list(block.operations)[-1].operands) - extra, len(wrt)
    diags = value_and_grad(fn, wrt, keep_value=True, seeded=True, sites=sites)      # (x, c) -> (y, J^T c)
    if diags:
        return diags
    diags = value_and_grad(fn, tuple(range(n, n + m)), keep_value=True, seeded=True, sites=sites)
    if diags:                                                    # (x, c, s, t) -> (y, J^T c, J t)
        return diags
    ret = list(block.operations)[-1]
    before = list(ret.operands)
    outs = before[:m] + before[m + k:]               # (y, J t, the past result, io...)
    if abi.BOUND_RESULT in fn.attributes:
        emit.set_int_attr(fn, abi.BOUND_RESULT, outs.index(before[emit.int_attr(fn, abi.BOUND_RESULT)]))
    with ir.InsertionPoint(ret), ret.location:
        func.ReturnOp(outs)
    ret.erase()
    with ir.InsertionPoint.at_block_begin(block), fn.location:
        for c in list(block.arguments)[n:n + 2 * m]:
            c.replace_all_uses_with(_zeros(c))
    for i in reversed(range(n, n + 2 * m)):
        block.erase_argument(i)
    inputs = [a.type for a in block.arguments]
    fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, [v.type for v in outs]))
    erase_dead(list(block.operations)[:-1])
    return []


def _adjoint_location(loc, name: str):
    """`vjp(<op>)#<id>` around the forward operation's location, inside the same call sites (the guards read
    the call chain from the outside in, the forward operation from the innermost frame, and with the id
    (`_forward_id`) its operands)."""
    if isinstance(loc, ir.CallSiteLoc):
        return ir.Location.callsite(_adjoint_location(loc.callee, name), [loc.caller])
    return ir.Location.name(name, childLoc=loc)


def adjoint_id(loc) -> int | None:
    """The forward operation's id in an adjoint's location (`_adjoint_location`: `vjp(<op>)#<id>`), or None
    for a location that is not an adjoint's."""
    name = name_of(loc) or ""
    return int(name.rsplit("#", 1)[1]) if name.startswith("vjp(") and "#" in name else None


_FORWARD_IDS = itertools.count(1)     # (re)started per differentiated function: the same input, the same ids


def _number_from(fn) -> None:
    """Start the forward ids of `fn`'s sweep after those it holds (a derivative of a derivative)."""
    held = [0]

    def visit(op):
        if abi.FORWARD_ID in op.operation.attributes:
            held.append(ir.IntegerAttr(op.operation.attributes[abi.FORWARD_ID]).value)
        return ir.WalkResult.ADVANCE
    walk_ops(fn.operation, visit)
    global _FORWARD_IDS
    _FORWARD_IDS = itertools.count(max(held) + 1)


def _forward_id(op) -> int:
    """The id that ties `op` to its adjoints (abi.FORWARD_ID; clones keep it, so a report made in the
    backward pass can show the forward operation's operands where a copy of it precedes the adjoint)."""
    if abi.FORWARD_ID not in op.attributes:
        op.attributes[abi.FORWARD_ID] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), next(_FORWARD_IDS))
    return ir.IntegerAttr(op.attributes[abi.FORWARD_ID]).value


def sweep(ops: list, cts: dict, sources: set):
    """The backward sweep over `ops` (in program order), emitted at the current insertion point: from the
    cotangents `cts` (value -> cotangent) of values they make, the cotangents of the values they use
    (their operands, and for ops with regions the values those capture). The dict, or a Diagnostic.
    A cotangent goes only where a value of `sources` flows (`_varied`): the float ops of a random sample,
    made from its key's bits, of a constant, or of an argument the derivative is not taken with respect
    to, need no derivative, as in JAX (a constant exponent's, `log(base) * ans`, would be NaN)."""
    varied = _varied(ops, sources)
    _building.varied.append(varied)
    try:
        return _sweep(ops, cts, varied)
    finally:
        _building.varied.pop()


def _sweep(ops: list, cts: dict, varied: set):
    for op in reversed(ops):
        outs = [cts.pop(r, None) for r in op.results]
        if all(c is None for c in outs) or not any(r in varied for r in op.results):
            continue
        name = op.operation.name
        if name in NOT_DIFFERENTIABLE:
            continue
        rule = VJP.get(name)
        if rule is None:
            return _cannot(name, op)
        if abi.MASKED in op.attributes:
            _building.masked[-1].add(_forward_id(op))
        with _adjoint_location(op.location, f"vjp({name.split('.')[-1]})#{_forward_id(op)}"):
            ins = rule(op, outs)
            if isinstance(ins, Diagnostic):
                return ins
            if ins is None:
                return _cannot(name, op)
            pairs = ins.items() if isinstance(ins, dict) else zip(op.operands, ins)
            for operand, ct in pairs:
                if ct is None or not _is_float(operand) or operand not in varied:
                    continue
                ct = ct() if callable(ct) else ct
                cts[operand] = ct if operand not in cts else hlo.add(cts[operand], ct)
    return cts


def _varied(ops: list, sources: set) -> set:
    """The values a derivative can flow through: `sources` and the results of `ops` that depend on one, not
    through a `stop_gradient` (what follows it needs no derivative: truncated_normal's nextafter of its bounds)."""
    varied = set(sources)
    for op in ops:
        inputs = list(op.operands) + (captured(op) if op.regions else [])
        if any(v in varied for v in inputs) and not _stops_gradient(op):
            varied.update(op.results)
    return varied


def _stops_gradient(op) -> bool:
    return op.operation.name == "stablehlo.custom_call" and is_linalg(op) and linalg_call(op)[0] == STOP_GRADIENT


# ---- loops: a short `for` loop with a compile-time trip count is unrolled before the sweep ----------
MAX_UNROLLED = 8            # iterations; longer counted loops get a tape (_while_vjp), as jax.grad of a scan
MAX_UNROLLED_OPS = 8192     # operations in all the copies of a loop that holds loops, their copies included


def unroll_counted_loops(block) -> None:
    """Replace each `stablehlo.while` of `block` that `_unrolled_size` admits (its trip count, `arrc.trip_count`
    from arr's `for` lowering, at most MAX_UNROLLED, and its copies at most MAX_UNROLLED_OPS operations) by copies
    of its body, the loops inside them too (exact; no loop overhead, and XLA fuses across the copies). Other
    loops are left to `_while_vjp`. The block is read once, then only the copies each unrolling makes (reading
    it again after each took time quadratic in its loops)."""
    pending = [op for op in block.operations if op.operation.name == "stablehlo.while"][::-1]
    while pending:
        loop = pending.pop()
        if _unrolled_size(loop) is not None:
            made = unroll(loop, mark=True)
            pending += [op for op in reversed(made) if op.operation.name == "stablehlo.while"]


def _unrolled_size(loop) -> int | None:
    """The operations (nested ones included) of the copies that unrolling `loop` makes, the loops in its body
    unrolled too; None where `loop` is not admitted: its trip count is unknown or past MAX_UNROLLED, a loop in
    its body is not admitted (copies of a taped loop fuse nothing and each has its own tape), or it holds
    loops and the copies would hold more than MAX_UNROLLED_OPS operations (a nest of short loops multiplied
    the program by 8 per level). A loop that holds none is unrolled whatever its body: the copies grow with
    the source, and a long body taped ran ~2x slower (8 trips of 256 statements: 4.5 s against 2.1 s)."""
    trips = emit.int_attr(loop, abi.TRIP_COUNT, -1)
    if trips not in range(MAX_UNROLLED + 1):
        return None
    size, nested = 0, False
    for op in loop.regions[1].blocks[0].operations:
        inner = _unrolled_size(op) if op.operation.name == "stablehlo.while" else count_ops(op, MAX_UNROLLED_OPS)
        nested = nested or op.operation.name == "stablehlo.while"
        if inner is None:
            return None
        size += trips * inner
        if nested and size > MAX_UNROLLED_OPS:
            return None
    return size


def count_ops(op, limit: int) -> int:
    """The operations of `op`, itself and those nested in it, counted up to just past `limit`."""
    count = 0

    def visit(_):
        nonlocal count
        count += 1
        return ir.WalkResult.ADVANCE if count <= limit else ir.WalkResult.INTERRUPT
    walk_ops(op.operation, visit)
    return count


def unroll(loop, mark: bool = False) -> list:
    """Replace `stablehlo.while` `loop`, whose trip count is known (`arrc.trip_count`), by that many copies of
    its body, effects and all, and return the copies' operations. With `mark` (before the guard pass), each
    copy's ops are marked with the loop's id and their iteration (abi.UNROLLED, after the loop's own mark where
    it is a copy too): a guard report names the iteration, as it does a loop's."""
    values = list(loop.operands)
    outer = list(ir.DenseI64ArrayAttr(loop.attributes[abi.UNROLLED])) if abi.UNROLLED in loop.attributes else []
    lanes = [emit.attr_text(a) for a in ir.ArrayAttr(loop.attributes[abi.UNROLLED_LANES])] \
        if abi.UNROLLED_LANES in loop.attributes else [""] * (len(outer) // 2)
    lanes.append(emit.attr_text(loop.attributes[abi.LANES]) if abi.LANES in loop.attributes else "")
    loop_id = _forward_id(loop.operation) if mark else 0
    made = []
    with ir.InsertionPoint(loop):
        for k in range(emit.int_attr(loop, abi.TRIP_COUNT, -1)):
            ops, values = _recompute(loop, 1, values, effects=True)
            made += ops
            for o in ops if mark else ():
                o.operation.attributes[abi.UNROLLED] = ir.DenseI64ArrayAttr.get(outer + [loop_id, k])
                if any(lanes):          # (a copy of vmap's lanes, one by one: a report names the lane)
                    o.operation.attributes[abi.UNROLLED_LANES] = ir.ArrayAttr.get([ir.StringAttr.get(x) for x in lanes])
    for result, value in zip(loop.results, values):
        result.replace_all_uses_with(value)
    loop.operation.erase()
    return made


@_rule("stablehlo.while")
def _while_vjp(op, cts):
    """Any loop not unrolled. The backward loop runs j = T-1 down to 0 and in each step sweeps one iteration
    of the body at the state of iteration j. That state comes from a tape where the trip count T is known
    at compile time or bounded by the source (`bound=N`, abi.LOOP_BOUND): the forward loop is replaced by
    one that records it (T forward iterations in all; a run past the bound is returned as a PAST value,
    R0006, and its derivative is zeros). Otherwise by recomputation: a forward run counts T, and each step runs the body j times
    from the initial values (T * (T + 3) / 2 forward iterations). The values the body captures accumulate
    their cotangents across steps."""
    inits = list(op.operands)
    floats = [i for i, v in enumerate(inits) if _is_float(v)]
    captured = _captured(op)
    u64 = DTYPES["u64"]
    seeds = [cts[i] if cts[i] is not None else _zeros(op.results[i]) for i in floats]
    known = emit.int_attr(op, abi.TRIP_COUNT, -1)
    bound = known if known >= 0 else emit.int_attr(op, abi.LOOP_BOUND, -1)
    if known < 0 and bound > 0:
        effects.number_loop(op, _building.bounds[-1].sites, bound)
    recording = _record(op, bound)

    def recomputed(j):
        return _run_body(op, j, inits)

    def taped(j):
        return _read_tapes(_tapes(recording, len(inits))[0], j, _carried_locations(op))
    if recording is None:
        results = _backward(op, floats, captured, seeds, _count_iterations(op, inits), recomputed)
    elif known >= 0:
        results = _backward(op, floats, captured, seeds, emit.const(known, u64, ()), taped, recording)
    else:
        count = recording.results[len(inits)]          # the iterations it ran
        fits = emit.compare(count, emit.const(bound, u64, ()), "LE", u64)
        _building.bounds[-1].regions[-1].append(effects.past_bound(emit.int_attr(op, abi.BOUND_SITE), count, fits))
        # Past the bound the backward loop reads the whole tape only and its results are zeros: without
        # a conditional (XLA:CPU runs one as a separate step, ~5 us on a small loop), never returned.
        within = emit.select(fits, count, emit.const(bound, u64, ()))
        results = _backward(op, floats, captured, seeds, within, taped, recording)
        if not isinstance(results, Diagnostic):
            results = [emit.select(fits, r, _zeros(r)) for r in results]
    if isinstance(results, Diagnostic):
        return results
    out: dict = {}
    for value, ct in zip([inits[i] for i in floats] + captured, results):
        out[value] = ct if value not in out else hlo.add(out[value], ct)
    if recording is not None:   # a taped `op` is dead now, replaced by its recording loop, which prints: without
        _strip_effects(op)      # its own prints and asserts, XLA drops it (they ran twice)
    return out


def _backward(op, floats: list, captured: list, seeds: list, count: ir.Value, state_at, recording=None):
    """The backward loop of `op`: j = count-1 down to 0, one iteration of the body swept at `state_at(j)`
    from the carried floats' cotangents (`seeds` at the start). The cotangents of the carried floats'
    initial values and of `captured`; or a Diagnostic. With `recording` (the state from its tapes), the
    residuals are taped too (`_tape_residuals`)."""
    u64, i64 = DTYPES["u64"], DTYPES["i64"]
    nested = _checks_a_bound(op)                # a loop with a bound in the body: the backward loop carries PAST
    # Last, the forward iteration it sweeps (count-1 down to 0), as the counter a guard report names
    # (abi.COUNTED): "in loop iteration k" is the forward loop's k, not the backward step.
    forward_iteration = _bin("stablehlo.subtract", emit.convert(count, u64, i64), emit.const(1, i64, ()))
    start = [emit.const(0, u64, ())] + list(seeds) + [_zeros(v) for v in captured] \
        + ([effects.no_past()] if nested else []) + [forward_iteration]
    backward, body = _counter_loop(start, count)
    backward.attributes[abi.COUNTED] = ir.BoolAttr.get(True)
    backward.attributes[abi.COUNTS_DOWN] = ir.BoolAttr.get(True)        # (reports order by execution: j down)
    if abi.LANES in op.attributes:      # vmap's lanes, one by one: the backward loop's counter is the lane too
        backward.attributes[abi.LANES] = op.attributes[abi.LANES]
    with ir.InsertionPoint(body):
        step, carried_cts, sums = body.arguments[0], body.arguments[1:1 + len(floats)], \
            body.arguments[1 + len(floats):1 + len(floats) + len(captured)]
        j = _bin("stablehlo.subtract", _bin("stablehlo.subtract", count, emit.const(1, u64, ())), step)
        state = state_at(j)
        ops, returned = _recompute(op, 1, state)
        seeded: dict = {}
        for i, ct in zip(floats, carried_cts):
            key = returned[i]
            seeded[key] = ct if key not in seeded else hlo.add(seeded[key], ct)
        with _region_pasts() as pasts:
            found = sweep(ops, seeded, {state[i] for i in _varied_carried(op, floats, captured)} | set(captured))
        if isinstance(found, Diagnostic):
            return found
        hlo.return_([hlo.add(step, emit.const(1, u64, ()))]
                    + [found.get(state[i]) or _zeros(state[i]) for i in floats]
                    + [hlo.add(acc, found[v]) if v in found else acc for acc, v in zip(sums, captured)]
                    + ([_merged([body.arguments[-2]] + pasts)] if nested else [])
                    + [_bin("stablehlo.subtract", body.arguments[-1], emit.const(1, i64, ()))])
    if recording is not None:
        _tape_residuals(op, recording, ops, j)
    if nested:
        _building.bounds[-1].regions[-1].append(backward.results[-2])
    return list(backward.results[1:1 + len(floats) + len(captured)])


def _varied_carried(loop, floats: list, captured: list) -> list:
    """Which of the carried floats `floats` (indices) of `loop` a derivative flows through: those whose initial
    value the sweep in progress varies, and those the body makes from a varied carried value or from
    `captured` (the varied values it captures), to a fixpoint (a carried exponent that only a constant
    feeds needs no cotangent, and `log(base) * ans` would be NaN for a negative base)."""
    body = loop.regions[1].blocks[0]
    ops = list(body.operations)
    returned = list(ops[-1].operands)
    varied = {i for i in floats if loop.operands[i] in _building.varied[-1]}
    while True:
        sources = {body.arguments[i] for i in varied} | set(captured)
        reached = _varied(ops[:-1], sources)
        more = {i for i in floats if returned[i] in reached}
        if more <= varied:
            return sorted(varied)
        varied |= more


def _tape_residuals(loop, recording, ops: list, j: ir.Value) -> None:
    """Where the sweep of one iteration (in the backward loop, after `ops`, the body computed again at the
    taped state) uses values of `ops`, record those too, as JAX's scan saves its residuals: `recording` is
    replaced by a loop that also tapes them, the sweep reads them at iteration `j`, and what of `ops` is
    then unused is erased (the backward loop no longer runs the forward body)."""
    inside = set(o.operation for o in ops)
    positions = [(i, r) for i, o in enumerate(ops) if o.operation.name not in ("stablehlo.constant", "stablehlo.iota")
                 for r, value in enumerate(o.results) if any(_outside(use.owner, inside) for use in value.uses)]
    if not positions:
        return
    n = len(loop.operands)
    again = _record(loop, _shape(_tapes(recording, n)[0][0])[0], positions)
    if again is None:                        # the residuals' tapes would not fit: compute them again
        return
    for old, new in zip(recording.results, again.results):
        old.replace_all_uses_with(new)
    recording.operation.erase()
    with ir.InsertionPoint(ops[0]):         # (each read where its value was made: reports name it so)
        reads = _read_tapes(_tapes(again, n)[1], j, [ops[i].operation.location for i, _ in positions])
    for (i, r), read in zip(positions, reads):
        ops[i].results[r].replace_all_uses_with(read)
    erase_dead(ops)


def erase_dead(ops: list) -> None:
    """Erase the operations of `ops` whose results are unused (host callbacks stay, and those that hold
    one), last first."""
    for o in reversed(ops):
        if all(not list(v.uses) for v in o.results) and not _calls_the_host(o):
            o.operation.erase()


def _calls_the_host(op) -> bool:
    found = []

    def visit(inner):
        if inner.operation.name == "stablehlo.custom_call" and not is_linalg(inner):
            found.append(inner)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE
    walk_ops(op.operation, visit)
    return bool(found)


def _outside(user, inside: set) -> bool:
    """Whether the operation `user` is not one of `inside`, nor inside one of them."""
    op = user.operation
    while op is not None:
        if op in inside:
            return False
        op = op.parent and op.parent.operation
    return True


def _record(loop, count: int, residuals: list = ()):
    """A loop in place of `loop` (which is not erased: the caller still clones it) that also records, in a
    tape `[count, *shape]` per carried value, the state each iteration starts from, and per position
    (op index, result index) in `residuals` that value of the body; None where the trip count is unknown
    or the tapes would not fit in memory (E0215's limit)."""
    from .types import MAX_ARRAY_BYTES
    carried = list(loop.operands)
    body_ops = list(loop.regions[1].blocks[0].operations)
    residual_values = [body_ops[i].results[r] for i, r in residuals]
    if count <= 0 or sum(count * int(np.prod(_shape(v))) * max(1, dtype_of(v).bits // 8)
                         for v in carried + residual_values) > MAX_ARRAY_BYTES:
        return None
    u64 = DTYPES["u64"]
    n = len(carried)
    with ir.InsertionPoint(loop), loop.location:
        start = carried + [emit.const(0, u64, ())] + \
            [emit.const(0, dtype_of(v), (count,) + _shape(v)) for v in carried + residual_values]
        recording = hlo.WhileOp([v.type for v in start], start)
        _copy_loop_facts(loop, recording)
        locs = _carried_locations(loop, after=len(start) - n)
        cond = recording.cond.blocks.append(*[v.type for v in start], arg_locs=locs)
        with ir.InsertionPoint(cond):
            hlo.return_(_recompute(loop, 0, list(cond.arguments[:n]), effects=True)[1])
        body = recording.body.blocks.append(*[v.type for v in start], arg_locs=locs)
        with ir.InsertionPoint(body):
            state, k, tapes = list(body.arguments[:n]), body.arguments[n], body.arguments[n + 1:]
            ops, returned = _recompute(loop, 1, state, effects=True)          # the forward loop itself
            values = state + [ops[i].results[r] for i, r in residuals]
            # in range, except past a bound, where the call reports R0006 instead of its results: not guarded
            written = [emit.mark(emit.mark(emit.op("stablehlo.dynamic_update_slice", t.type, [
                t, emit.op("stablehlo.reshape", emit.tensor_type((1,) + _shape(v), dtype_of(v)), [v]),
                *([k] + [emit.const(0, u64, ())] * len(_shape(v)))]), abi.IN_BOUNDS), abi.TAPE_WRITE)
                for t, v in zip(tapes, values)]
            hlo.return_(returned + [hlo.add(k, emit.const(1, u64, ()))] + written)
    for old, new in zip(loop.results, recording.results[:n]):
        old.replace_all_uses_with(new)
    return recording


def _tapes(recording, n: int) -> tuple:
    """(the state's tapes, the residuals' tapes) of a recording loop of a loop carrying `n` values."""
    results = list(recording.results)
    return results[n + 1:2 * n + 1], results[2 * n + 1:]


def _copy_loop_facts(loop, other) -> None:
    """`other` runs as often as `loop`: the same trip-count mark (none for a `while`: it may not end), bound
    and site number where its bound is checked."""
    for name in (abi.TRIP_COUNT, abi.LOOP_BOUND, abi.BOUND_SITE):
        if name in loop.attributes:
            other.attributes[name] = loop.attributes[name]


def _read_tapes(tapes: list, j: ir.Value, locations: list | None = None) -> list:
    """The state recorded at iteration `j`; each read at its location of `locations`, if given."""
    state = []
    for t, location in zip(tapes, locations or [None] * len(tapes)):
        with location or contextlib.nullcontext():
            shape, dt = _shape(t)[1:], dtype_of(t)
            row = emit.mark(emit.op("stablehlo.dynamic_slice", emit.tensor_type((1,) + shape, dt),
                                    [t, j] + [emit.const(0, DTYPES["u64"], ())] * len(shape),
                                    {"slice_sizes": ir.DenseI64ArrayAttr.get([1] + list(shape))}), abi.IN_BOUNDS)
            state.append(emit.op("stablehlo.reshape", emit.tensor_type(shape, dt), [row]))
    return state


def _counter_loop(start: list, limit: ir.Value, like=None):
    """A `stablehlo.while` carrying `start` (a ui64 counter first) while the counter is below `limit`; its
    body block is left empty for the caller to fill, its arguments after the counter located as those of
    the loop `like` (where given: a report names them as the variables they carry). It ends (`limit`
    counts a loop that ended), as a `for` loop: marked with a trip count, -1 where unknown, it keeps the
    runtime's fast path."""
    loop = hlo.WhileOp([v.type for v in start], start)
    loop.attributes[abi.TRIP_COUNT] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), -1)
    cond = loop.cond.blocks.append(*[v.type for v in start])
    with ir.InsertionPoint(cond):
        hlo.return_([emit.compare(cond.arguments[0], limit, "LT", DTYPES["u64"])])
    locs = _carried_locations(like, before=1) if like is not None else None
    return loop, loop.body.blocks.append(*[v.type for v in start], arg_locs=locs)


def _carried_locations(loop, before: int = 0, after: int = 0) -> list:
    """Locations for the arguments of a block that carries `loop`'s state between `before` and `after` values
    of its own (at the current location): those of `loop`'s, so a guard report names them as the variables
    they carry (not `for`, or `vjp(while)#2`)."""
    here = ir.Location.current
    return [here] * before + [a.location for a in loop.regions[1].blocks[0].arguments] + [here] * after


def _run_body(loop, n: ir.Value, state: list) -> list:
    """The carried values after `n` iterations of `loop`'s body from `state` (its condition unchecked: `n`
    is at most the loop's own trip count)."""
    u64 = DTYPES["u64"]
    steps, body = _counter_loop([emit.const(0, u64, ())] + list(state), n, like=loop)
    with ir.InsertionPoint(body):
        returned = _recompute(loop, 1, list(body.arguments[1:]))[1]
        hlo.return_([hlo.add(body.arguments[0], emit.const(1, u64, ()))] + returned)
    return list(steps.results[1:])


def _count_iterations(loop, state: list) -> ir.Value:
    """How many iterations `loop` runs from `state` (a ui64 scalar): the loop run again, counting."""
    u64 = DTYPES["u64"]
    start = [emit.const(0, u64, ())] + list(state)
    counting = hlo.WhileOp([v.type for v in start], start)
    _copy_loop_facts(loop, counting)
    locs = _carried_locations(loop, before=1)
    cond = counting.cond.blocks.append(*[v.type for v in start], arg_locs=locs)
    with ir.InsertionPoint(cond):
        hlo.return_(_recompute(loop, 0, list(cond.arguments[1:]))[1])
    body = counting.body.blocks.append(*[v.type for v in start], arg_locs=locs)
    with ir.InsertionPoint(body):
        returned = _recompute(loop, 1, list(body.arguments[1:]))[1]
        hlo.return_([hlo.add(body.arguments[0], emit.const(1, u64, ()))] + returned)
    return counting.results[0]


def _zeros(like: ir.Value) -> ir.Value:
    return emit.const(0.0, dtype_of(like), _shape(like))


# ---- branches: the chosen branch is computed again inside the backward `if`, then swept ----------
def _captured(op) -> list:
    """The float values defined outside `op` that the operations in its regions use and the sweep in progress
    varies (their cotangents are wanted), in order."""
    return [v for v in captured(op) if _is_float(v) and v in _building.varied[-1]]


def captured(op) -> list:
    """The values defined outside `op` that the operations in its regions use, in order (vmap's too)."""
    inside, found = set(), []

    def visit(inner):
        for r in inner.results:
            inside.add(r)
        for region in inner.regions:
            for block in region.blocks:
                for a in block.arguments:
                    inside.add(a)
                for nested in block.operations:
                    visit(nested.operation)
                    for v in nested.operation.operands:
                        if v not in inside and v not in found:
                            found.append(v)
    visit(op.operation)
    return [v for v in found if v not in inside]


@_rule("stablehlo.if", "stablehlo.case")
def _branches_vjp(op, cts):
    """An `if` (or a `case`, JAX's lax.cond and lax.switch) on the same operand whose branches compute their
    forward branch again and sweep it."""
    captured = _captured(op)
    nested = _checks_a_bound(op)                # a loop with a bound in a branch: the backward `if` returns PAST
    types = [v.type for v in captured] + ([effects.past_type()] if nested else [])
    if op.operation.name == "stablehlo.if":
        backward = hlo.IfOp(types, op.operands[0])
        regions = (backward.true_branch, backward.false_branch)
    else:
        backward = hlo.CaseOp(types, op.operands[0], len(op.regions))
        regions = list(backward.branches)
    for index, region in enumerate(regions):
        with ir.InsertionPoint(region.blocks.append()):
            with _region_pasts() as pasts:
                ops, returned = _recompute(op, index)
                branch_cts = sweep(ops, {v: ct for v, ct in zip(returned, cts) if ct is not None}, set(captured))
            if isinstance(branch_cts, Diagnostic):
                return branch_cts
            hlo.return_([branch_cts.get(v) or _zeros(v) for v in captured] + ([_merged(pasts)] if nested else []))
    if nested:
        _building.bounds[-1].regions[-1].append(backward.results[-1])
    return dict(zip(captured, backward.results))


def _recompute(op, index: int, args: list = (), effects: bool = False):
    """The forward ops of region `index` of `op`, cloned to the insertion point with its block arguments
    replaced by `args`; and the values the region returns (a clone of `op` is taken apart, as
    passes/rewrite.py inlines a call). Without `effects` the clone's prints and asserts are taken out
    (their io token passed through): computing forward values again for a derivative repeats no effect."""
    copy = op.operation.clone()
    if not effects:
        _strip_effects(copy)
    moved = emit.inline_block(copy.regions[index].blocks[0], args)
    copy.erase()
    return moved


def _strip_effects(op) -> None:
    found = []

    def visit(inner):
        inner = inner.operation
        if inner.name == "stablehlo.custom_call" and abi.KIND in inner.attributes \
                and emit.attr_text(inner.attributes[abi.KIND]) in abi.EFFECT_KINDS:
            found.append(inner)
        return ir.WalkResult.ADVANCE
    walk_ops(op, visit)
    for call in found:                       # (run id, io token, values...) -> io token
        call.results[0].replace_all_uses_with(call.operands[1])
        call.erase()


_WORDS = {"custom_call": "a host callback", "reduce_window": "a windowed reduction"}


def _cannot(name: str, op) -> Diagnostic:
    short = name.split(".")[-1]
    what = _WORDS.get(short, f"`{short}`")
    if short == "custom_call" and abi.KIND not in op.attributes:
        # A kernel call, from a module from elsewhere: the only ones a foreign module may make (E0503) are
        # jaxlib's LAPACK kernels; "linear algebra" in the general note would contradict the refusal.
        what = f"the custom call `{emit.attr_text(op.attributes['call_target_name'])}`"
        return Diagnostic("E0216", f"cannot differentiate {what} yet", span_of(op.location), f"{what} here",
                          notes=["this is one of jaxlib's LAPACK kernels, what `jnp.linalg` becomes in a CPU "
                                 "lowering; of those `arrc grad` differentiates getrf, trsm, potrf and syevd "
                                 "(`solve`, `inv`, `det`, `cholesky`, `cho_solve`, `eigh`) by JAX's rules, not "
                                 "the others yet"],
                          help="take the derivative in JAX (`jax.grad`) before exporting, or write the function "
                               "in arr")
    return Diagnostic("E0216", f"cannot differentiate {what} yet", span_of(op.location), f"{what} here",
                      notes=["arr's autodiff covers elementwise math, reductions, matrix products, shape operations, "
                             "indexing, gathers and indexed updates, sorting, scans, convolution, linear algebra, "
                             "`if`, `for` and `while` so far (docs/autodiff.md)"])
