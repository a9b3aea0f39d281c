"""Construction, shape manipulation, linear algebra and neural-net helpers (LANGUAGE.md section 6).

Construction: zeros ones full zeros_like ones_like full_like arange eye linspace.
Shape: reshape transpose broadcast_to concat stack expand_dims squeeze flip pad tile roll diag tril triu.
Linear algebra: `@` matmul dot einsum outer tensordot.
Neural-net helpers: softmax log_softmax layer_norm one_hot.

Every rule computes its result type from `Dim`s, so the same code checks symbolically at definition and
concretely at specialization; what cannot be decided symbolically (divisibility in `reshape`, the size of a
squeezed axis) is left to the concrete run, where the dims are constants.
"""
from __future__ import annotations

import numpy as np

from . import ast, emit
from .optable import (OPERATORS, CallCx, accumulation_dtype, check_literal, concrete, elementwise_type, float_dtype_for,
                      listed_ints, register, source_text)
from .diagnostics import Label
from .emit import hlo
from .types import BOOL, F32, I32, I64, ArrayType, DType, Dim, int_range, promote, shape_str
from .values import ArrError, StrVal, TupleVal, Val, describe, is_runtime_int

ONE = Dim.const(1)


# ---- helpers ---------------------------------------------------------------------------------
def _fail(code: str, message: str, span, label: str = "", **kw):
    raise ArrError(code, message, span, label, **kw)


def _prod(dims) -> Dim:
    out = ONE
    for d in dims:
        out = out * d
    return out


def _opaque(d: Dim) -> bool:
    """Whether `d` holds a stand-in for a non-polynomial expression such as `(n // 2)`."""
    return any(not v.isidentifier() for v in d.atoms)


def _monomial_quotient(m: tuple, d: tuple) -> tuple | None:
    rest = list(m)
    for v in d:
        if v not in rest:
            return None
        rest.remove(v)
    return tuple(sorted(rest))


def exact_div(a: Dim, b: Dim) -> Dim | None:
    """`a / b` when it is a polynomial with integer coefficients, else None.

    Long division under the graded-lex order: if b divides a, the leading term of every remainder is a
    multiple of b's leading term, so a failed step proves there is no polynomial quotient.
    """
    if not b.terms:
        return None
    names = sorted(a.atoms | b.atoms)

    def key(m):
        return len(m), tuple(m.count(v) for v in names)
    lead_b = max(b.terms, key=key)
    quotient, rest = Dim({}), a
    while rest.terms:
        lead_r = max(rest.terms, key=key)
        m = _monomial_quotient(lead_r, lead_b)
        if m is None or rest.terms[lead_r] % b.terms[lead_b]:
            return None
        term = Dim({m: rest.terms[lead_r] // b.terms[lead_b]})
        quotient, rest = quotient + term, rest - term * b
    return quotient


def _ceil_div(a: Dim, k: int) -> Dim:
    out = exact_div(a + Dim.const(k - 1), Dim.const(k))
    return out if out is not None else Dim.var(f"ceil(({a}) / {k})")


def _promoted(cx: CallCx, vals: list, what: str) -> tuple[DType, bool]:
    """Dtype and weakness of operands promoted as an elementwise op would (shapes are the caller's business)."""
    stand_ins = [Val(ArrayType(v.type.dtype, (), v.type.weak), None, v.static if v.type.rank == 0 else None)
                 for v in vals]
    dtype, weak, _ = elementwise_type(cx, stand_ins, what)
    return dtype, weak


def _axis_list(cx: CallCx, axis, rank: int, name: str = "axis") -> list[int]:
    """Normalized axes; None means all; Python ints are defaults."""
    if axis is None:
        return list(range(rank))
    if isinstance(axis, int) and not isinstance(axis, bool):
        if not -rank <= axis < rank:
            cx.error("E0204", f"axis {axis} is out of range for an array of rank {rank}", f"rank is {rank}",
                     at=name)
        return [axis % rank]
    return cx.axes(axis, rank, name)


def _single_axis(cx: CallCx, axis, rank: int, name: str = "axis") -> int:
    if isinstance(axis, TupleVal):
        cx.error("E0204", f"`{name}` must be a single integer here", "a tuple", at=name)
    return _axis_list(cx, axis, rank, name)[0]


def _dtype_or(cx: CallCx, v, default: DType) -> DType:
    return default if v is None else cx.dtype(v, "dtype")


def _scalar_as(cx: CallCx, v: Val, dtype: DType):
    """The MLIR value of scalar `v` in `dtype`: literals exactly, run-time values with cast semantics."""
    if v.type.weak and v.static is not None and not (isinstance(v.static, float) and not dtype.is_float):
        return cx.ir(v, dtype)
    return emit.cast(cx.ir(v), v.type.dtype, dtype)


def _check_fill(cx: CallCx, v: Val, dtype: DType, at) -> None:
    """An integer literal must fit the dtype it fills; float literals are converted like `.astype`."""
    if v.type.weak and isinstance(v.static, Dim):
        check_literal(cx, v, dtype, at)


def _kept(rank: int, axes) -> list[int]:
    return [i for i in range(rank) if i not in axes]


def _reduce_keep(value, axes, init, body, dt: DType):
    """Reduce over `axes` and broadcast back to the input shape (a keepdims reduction, ready to combine)."""
    shape = emit.shape_of(value)
    reduced = emit.reduce(value, emit.const(init, dt), axes, body, dt)
    return hlo.broadcast_in_dim(emit.tensor_type(shape, dt), reduced, _kept(len(shape), axes))


def _tuple_items(cx: CallCx, xs, name: str) -> tuple[list[Val], list]:
    """The arrays of a tuple argument `(a, b, ...)` and their spans (the items' own spans when written inline)."""
    node = cx.node
    expr = node.args[0] if isinstance(node, ast.Call) and node.args else None
    for kw in getattr(node, "kwargs", ()):
        if kw.name == name:
            expr = kw.value
    if not isinstance(xs, TupleVal) or not xs.items:
        items = [source_text(cx, e.span) for e in expr.elems] if isinstance(expr, ast.ArrayLit) else []
        cx.error("E0210", f"`{name}` must be a tuple of arrays such as `(a, b)`, found {describe(xs)}",
                 f"this is {describe(xs)}", at=name,
                 help=f"NumPy's list `[...]` is an array literal in arr (its items stacked); write a tuple: "
                      f"`({', '.join(items)}{',' if len(items) == 1 else ''})`" if items and all(items) else None)
    spans = [cx.at(name)] * len(xs.items)
    if isinstance(expr, ast.TupleLit) and len(expr.elems) == len(xs.items):
        spans = [e.span for e in expr.elems]
    for item, span in zip(xs.items, spans):
        if not isinstance(item, Val):
            _fail("E0210", f"items of `{name}` must be arrays, found {describe(item)}", span,
                  f"this is {describe(item)}")
    return list(xs.items), spans


# ---- construction ----------------------------------------------------------------------------
def _filled(fill):
    def rule(cx: CallCx, shape, dtype=None) -> Val:
        dims = cx.shape(shape, "shape")
        dt = _dtype_or(cx, dtype, F32)
        return cx.value(ArrayType(dt, dims), lambda: emit.const(fill, dt, concrete(dims)))
    return rule


register("zeros", params="shape, dtype=None",
         family="Construction", doc="an array of the given shape filled with 0")(_filled(0))
register("ones", params="shape, dtype=None",
         family="Construction", doc="an array of the given shape filled with 1")(_filled(1))


@register("full", params="shape, fill_value, dtype=None",
          family="Construction", doc="an array of the given shape filled with fill_value")
def _full(cx: CallCx, shape, fill_value, dtype=None) -> Val:
    dims = cx.shape(shape, "shape")
    v = cx.array(fill_value, "fill_value")
    if dtype is None:
        dt, weak = v.type.dtype, v.type.weak       # as jax.numpy.full: the fill value's (weak) type
    else:
        dt, weak = cx.dtype(dtype, "dtype"), False
    _check_fill(cx, v, dt, "fill_value")
    _broadcast_check(cx, v.type, dims, "fill_value")
    return cx.value(ArrayType(dt, dims, weak), lambda: emit.broadcast(_scalar_as(cx, v, dt), concrete(dims)))


def _filled_like(fill):
    def rule(cx: CallCx, x, dtype=None) -> Val:
        x = cx.array(x, "x")
        # as jnp.zeros_like: x's dtype (and weakness) unless dtype is given
        t = x.type if dtype is None else ArrayType(cx.dtype(dtype, "dtype"), x.type.shape)
        return cx.value(t, lambda: emit.const(fill, t.dtype, concrete(t.shape)))
    return rule


register("zeros_like", params="x, dtype=None",
         family="Construction", doc="an array of x's shape (and dtype, unless dtype is given) filled with 0")(
    _filled_like(0))
register("ones_like", params="x, dtype=None",
         family="Construction", doc="an array of x's shape (and dtype, unless dtype is given) filled with 1")(
    _filled_like(1))


@register("full_like", params="x, fill_value, dtype=None",
          family="Construction", doc="an array of x's shape (and dtype, unless dtype is given) filled with fill_value")
def _full_like(cx: CallCx, x, fill_value, dtype=None) -> Val:
    x = cx.array(x, "x")
    v = cx.array(fill_value, "fill_value")
    dt, weak = (x.type.dtype, x.type.weak) if dtype is None else (cx.dtype(dtype, "dtype"), False)
    dims = x.type.shape
    _check_fill(cx, v, dt, "fill_value")
    _broadcast_check(cx, v.type, dims, "fill_value")
    return cx.value(ArrayType(dt, dims, weak), lambda: emit.broadcast(_scalar_as(cx, v, dt), concrete(dims)))


def _static_number(cx: CallCx, v, name: str) -> Dim | float:
    if isinstance(v, Val) and v.type.rank == 0 and isinstance(v.static, float):
        return v.static
    if isinstance(v, Val) and v.type.rank == 0 and v.static is None:
        cx.error("E0207", f"`{name}` must be known at compile time, but it is a run-time value",
                 "depends on run-time values", at=name,
                 help="use a literal, a `const` or a shape variable: the length of the result depends on it")
    return cx.static_int(v, name)


def _float_arange(start: float, stop: float, step: float, dt: DType) -> np.ndarray:
    """jnp.arange's values for float bounds: `start + step * iota` in the dtype (f32 for f16/bf16, rounded
    once at the end), not NumPy's, which steps by `(start + step) - start` and drifts from it (f16 visibly)."""
    size = max(0, int(np.ceil((stop - start) / step)))
    work = F32.np if dt.is_float and dt.bits < 32 else dt.np
    if dt.is_int:       # the bounds cast as arr casts floats to integers: toward zero, saturating
        info = np.iinfo(work)
        start, step = (min(max(int(np.trunc(b)), info.min), info.max) for b in (start, step))
    with np.errstate(over="ignore"):
        return (work.type(start) + work.type(step) * np.arange(size, dtype=work)).astype(dt.np)


@register("arange", params="start, stop=None, step=None, dtype=None",
          family="Construction", doc="evenly spaced values in [start, stop) with spacing step")
def _arange(cx: CallCx, start, stop=None, step=None, dtype=None) -> Val:
    names = ["start", "stop", "step"]
    if stop is None:
        start, stop, names = 0, start, ["start", "start", "step"]    # arange(n): the one argument is the stop
    lo = _static_number(cx, start, names[0])
    hi = _static_number(cx, stop, names[1])
    by = _static_number(cx, 1 if step is None else step, "step")
    is_float = any(isinstance(b, float) for b in (lo, hi, by))
    dt = _dtype_or(cx, dtype, F32 if is_float else I32)
    if dt.is_bool:
        cx.error("E0201", "`arange` cannot make a bool array", "dtype bool", at="dtype",
                 help="compare instead, e.g. `arange(n) < k`")
    if is_float:
        bounds = []
        for b, name in zip((lo, hi, by), names):
            if isinstance(b, Dim) and not b.is_const:
                cx.error("E0204", f"with float bounds, `{name}` must be a literal or a const, found `{b}`",
                         "symbolic", at=name)
            bounds.append(b.value if isinstance(b, Dim) else b)
        if bounds[2] == 0:
            cx.error("E0204", "`step` cannot be zero", "zero step", at="step")
        if not all(np.isfinite(b) for b in bounds):
            cx.error("E0204", "`arange` bounds must be finite numbers", "not finite")
        if abs((bounds[1] - bounds[0]) / bounds[2]) > 2 ** 40:
            cx.error("E0215", "array too large: `arange` would have more than 2**40 elements", "too large")
        values = _float_arange(*bounds, dt)
        return cx.value(ArrayType(dt, (Dim.const(len(values)),)), lambda: emit.const(values, dt, values.shape))
    if not by.is_const:
        cx.error("E0204", f"`step` must be a literal or a const, found `{by}`", "symbolic", at="step")
    k = by.value
    if k == 0:
        cx.error("E0204", "`step` cannot be zero", "zero step", at="step")
    if lo.is_const and hi.is_const:
        length = Dim.const(len(range(lo.value, hi.value, k)))
    else:
        length = _ceil_div(hi - lo, k) if k > 0 else _ceil_div(lo - hi, -k)

    def build():
        n = concrete((length,))
        iota = hlo.iota(emit.tensor_type(n, dt), 0)
        scaled = iota if k == 1 else hlo.multiply(iota, emit.const(k, dt, n))
        return scaled if lo.value == 0 else hlo.add(scaled, emit.const(lo.value, dt, n))
    return cx.value(ArrayType(dt, (length,)), build)


@register("eye", params="N, M=None, k=0, dtype=None",
          family="Construction", doc="an N x M array with ones on the k-th diagonal and zeros elsewhere")
def _eye(cx: CallCx, N, M=None, k=0, dtype=None) -> Val:
    rows = cx.count(N, "N")
    cols = rows if M is None else cx.count(M, "M")
    diag = cx.static_int(k, "k")
    dt = _dtype_or(cx, dtype, F32)
    shape = (rows, cols)

    def build():
        s = concrete(shape)
        t = emit.tensor_type(s, I64)
        offset = hlo.subtract(hlo.iota(t, 1), hlo.iota(t, 0))
        on_diag = emit.compare(offset, emit.const(diag.value, I64, s), "EQ", I64)
        return emit.convert(on_diag, BOOL, dt)
    return cx.value(ArrayType(dt, shape), build)


@register("linspace", params="start, stop, num=50, endpoint=True, dtype=None",
          family="Construction", doc="num evenly spaced values from start to stop")
def _linspace(cx: CallCx, start, stop, num=50, endpoint=True, dtype=None) -> Val:
    lo, hi = cx.array(start, "start"), cx.array(stop, "stop")
    for v, name in ((lo, "start"), (hi, "stop")):
        if v.type.rank:
            cx.error("E0204", f"`{name}` must be a scalar, found {v.type}", f"this is {v.type}", at=name)
    count = cx.count(num, "num")
    endpoint = endpoint if isinstance(endpoint, bool) else cx.bool_flag(endpoint, "endpoint")
    dt = float_dtype_for(promote([lo.type, hi.type])[0]) if dtype is None else cx.dtype(dtype, "dtype")
    ct = float_dtype_for(dt)        # computed in floats (as jax.numpy), floored for integer dtypes

    def build():
        n = count.value
        if n == 0:
            return emit.const(0, dt, (0,))
        a, b = _scalar_as(cx, lo, ct), _scalar_as(cx, hi, ct)
        if n == 1:
            out = hlo.reshape(emit.tensor_type((1,), ct), a)
        else:
            div = n - 1 if endpoint else n
            s = (div,)
            step = hlo.divide(hlo.iota(emit.tensor_type(s, ct), 0), emit.const(div, ct, s))
            one_minus = hlo.subtract(emit.const(1, ct, s), step)
            out = hlo.add(hlo.multiply(emit.broadcast(a, s), one_minus), hlo.multiply(emit.broadcast(b, s), step))
            if endpoint:
                out = hlo.concatenate([out, hlo.reshape(emit.tensor_type((1,), ct), b)], 0)
        if dt.is_int:
            out = hlo.floor(out)
        return emit.cast(out, ct, dt)
    return cx.value(ArrayType(dt, (count,)), build)


# ---- shape manipulation ----------------------------------------------------------------------
def _with_hole(dims: list) -> str:
    """`dims` written as a shape with its first dimension inferred: (-1, 3)."""
    return "-1" if len(dims) == 1 else "(" + ", ".join(["-1"] + [str(d) for d in dims[1:]]) + ")"


@register("reshape", params="x, shape", keys=True, family="Shape",
          doc="x with a new shape of the same size (one -1 is inferred)")
def _reshape(cx: CallCx, x, shape) -> Val:
    x = cx.array(x, "x")
    dims = list(cx.static_ints(shape, "shape"))
    holes = [i for i, d in enumerate(dims) if d == -1]
    if len(holes) > 1:
        cx.error("E0204", f"`shape` can have only one -1, found {len(holes)}", "more than one -1", at="shape",
                 help="-1 stands for the one dimension that is inferred from the others")
    for d in dims:
        if d.is_const and d.value < -1:
            cx.error("E0204", f"negative dimension {d.value} in `shape`", "negative", at="shape")
    total = _prod(x.type.shape)
    known = _prod(d for i, d in enumerate(dims) if i not in holes)
    target = shape_str(["-1" if i in holes else d for i, d in enumerate(dims)])
    if holes:
        inferred = exact_div(total, known)
        if inferred is None:
            if total.is_const and known.is_const:
                reason = "the other dimensions are 0" if known == 0 else \
                    f"{total.value} is not a multiple of {known.value}"
                cx.error("E0202", f"cannot reshape {x.type} ({total} elements) into shape {target}: {reason}",
                         "sizes do not divide", at="x",
                         labels=[Label(cx.at("shape"), f"the known dimensions hold {known} elements")])
            # Not decidable as polynomials (e.g. `n` into (-1, 2)): checked when the shape is concrete.
            inferred = Dim.quotient(total, known)
        dims[holes[0]] = inferred
    elif total != known and (total.is_const and known.is_const or not (_opaque(total) or _opaque(known))):
        cx.error("E0202", f"cannot reshape {x.type} ({total} elements) into shape {target} ({known} elements)",
                 "element counts differ", at="x",
                 labels=[Label(cx.at("shape"), f"{known} elements")],
                 help=f"use -1 for the dimension to infer, e.g. `reshape(x, {_with_hole(dims)})`" if dims else None,
                 notes=[] if total.is_const and known.is_const else
                 ["element counts are compared as polynomials over the shape variables"])
    out = tuple(dims)
    return cx.value(x.type.with_shape(out),
                    lambda: hlo.reshape(emit.tensor_type(concrete(out), x.type.dtype), cx.ir(x)))


@register("transpose", params="x, axes=None", keys=True, family="Shape",
          doc="x with its axes permuted (reversed by default)")
def _transpose(cx: CallCx, x, axes=None) -> Val:
    x = cx.array(x, "x")
    rank = x.type.rank
    perm = list(range(rank))[::-1] if axes is None else cx.axes(axes, rank, "axes")
    if len(perm) != rank:
        cx.error("E0204", f"`axes` must name every axis of {x.type} once: found {len(perm)} of {rank}",
                 f"{len(perm)} axes", at="axes", help=f"give a permutation of 0..{rank - 1}")
    return _permuted(cx, x, perm)


def _permuted(cx: CallCx, x: Val, perm: list[int]) -> Val:
    """x with its axes in the order `perm` (a permutation of its axes)."""
    return cx.value(x.type.with_shape([x.type.shape[p] for p in perm]), lambda: hlo.transpose(cx.ir(x), perm))


@register(".T", keys=True, doc="x with its axes reversed")
def _transpose_attr(cx: CallCx, x):
    x = cx.array(x, "x")
    return _permuted(cx, x, list(range(x.type.rank))[::-1])


@register("swapaxes", params="x, axis1, axis2", keys=True, family="Shape", doc="x with two axes interchanged")
def _swapaxes(cx: CallCx, x, axis1, axis2) -> Val:
    x = cx.array(x, "x")
    perm = list(range(x.type.rank))
    a, b = (_single_axis(cx, axis, x.type.rank, name) for axis, name in ((axis1, "axis1"), (axis2, "axis2")))
    perm[a], perm[b] = b, a
    return _permuted(cx, x, perm)


@register("moveaxis", params="x, source, destination", keys=True, family="Shape",
          doc="x with the axes source moved to the places destination, the others in their order")
def _moveaxis(cx: CallCx, x, source, destination) -> Val:
    x = cx.array(x, "x")
    rank = x.type.rank
    moved, places = cx.axes(source, rank, "source"), cx.axes(destination, rank, "destination")
    if len(moved) != len(places):
        cx.error("E0204", f"`source` names {len(moved)} axes and `destination` {len(places)}: they are moved in "
                          f"pairs", "unequal counts", at="destination")
    perm = [a for a in range(rank) if a not in moved]
    for place, axis in sorted(zip(places, moved)):
        perm.insert(place, axis)
    return _permuted(cx, x, perm)


def _broadcast_check(cx: CallCx, t: ArrayType, target: tuple, name: str) -> None:
    """NumPy's rule for broadcasting `t` to the shape `target`."""
    mismatch = t.rank > len(target)
    for d, want in zip(t.shape[::-1], target[::-1]):
        mismatch = mismatch or not (d == want or d == 1)
    if mismatch:
        cx.error("E0202", f"cannot broadcast {t} to shape {shape_str(target)}", f"this is {t}", at=name,
                 notes=["aligned from the right, each dimension must equal the target's or be 1"] +
                 (["two different shape variables never match"]
                  if any(d.variables for d in t.shape) and any(d.variables for d in target) else []))


@register("broadcast_to", params="x, shape", keys=True, family="Shape", doc="x broadcast to shape")
def _broadcast_to(cx: CallCx, x, shape) -> Val:
    x = cx.array(x, "x")
    dims = cx.shape(shape, "shape")
    _broadcast_check(cx, x.type, dims, "x")
    return cx.value(x.type.with_shape(dims), lambda: emit.broadcast(cx.ir(x), concrete(dims)))


@register("concat", "concatenate", params="arrays, axis=0", nullable=("axis",),
          family="Shape", doc="a tuple of arrays joined along an existing axis (flattened first for axis=None)")
def _concat(cx: CallCx, arrays, axis=0) -> Val:
    items, spans = _tuple_items(cx, arrays, "arrays")
    if axis is None:    # NumPy's and jnp's axis=None: the arrays flattened, then joined
        items, axis = [_reshaped(cx, v, (_prod(v.type.shape),)) for v in items], 0
    first = items[0].type
    if first.rank == 0:
        _fail("E0204", "cannot concatenate scalars", spans[0], "a scalar", help="use `stack` to join scalars")
    ax = _single_axis(cx, axis, first.rank)
    for item, span in zip(items[1:], spans[1:]):
        t = item.type
        if t.rank != first.rank or any(a != b for i, (a, b) in enumerate(zip(t.shape, first.shape)) if i != ax):
            _fail("E0202", f"cannot concatenate {first} and {t} along axis {ax}", span, f"this is {t}",
                  labels=[Label(spans[0], f"this is {first}")],
                  notes=[f"all arrays must have the same rank and the same dimensions except along axis {ax}"])
    dtype, weak = _promoted(cx, items, "`concat`")
    shape = list(first.shape)
    shape[ax] = Dim.const(0)
    for item in items:
        shape[ax] = shape[ax] + item.type.shape[ax]
    return cx.value(ArrayType(dtype, tuple(shape), weak),
                    lambda: hlo.concatenate([cx.ir(v, dtype) for v in items], ax))


@register("stack", params="arrays, axis=0", family="Shape", doc="a tuple of arrays joined along a new axis")
def _stack(cx: CallCx, arrays, axis=0) -> Val:
    items, spans = _tuple_items(cx, arrays, "arrays")
    first = items[0].type
    for item, span in zip(items[1:], spans[1:]):
        if item.type.shape != first.shape:
            _fail("E0202", f"cannot stack {first} and {item.type}: shapes differ", span, f"this is {item.type}",
                  labels=[Label(spans[0], f"this is {first}")], notes=["all arrays must have the same shape"])
    ax = _single_axis(cx, axis, first.rank + 1)
    dtype, weak = _promoted(cx, items, "`stack`")
    shape = first.shape[:ax] + (Dim.const(len(items)),) + first.shape[ax:]
    part = first.shape[:ax] + (ONE,) + first.shape[ax:]

    def build():
        part_t = emit.tensor_type(concrete(part), dtype)
        return hlo.concatenate([hlo.reshape(part_t, cx.ir(v, dtype)) for v in items], ax)
    return cx.value(ArrayType(dtype, shape, weak), build)


def _reshaped(cx: CallCx, x: Val, shape: tuple) -> Val:
    return cx.value(x.type.with_shape(shape),
                    lambda: hlo.reshape(emit.tensor_type(concrete(shape), x.type.dtype), cx.ir(x)))


@register("expand_dims", params="x, axis", keys=True, family="Shape",
          doc="x with a new axis of size 1 inserted at axis")
def _expand_dims(cx: CallCx, x, axis) -> Val:
    x = cx.array(x, "x")
    rank = x.type.rank + len(cx.static_ints(axis, "axis"))
    axes = cx.axes(axis, rank, "axis")
    rest = iter(x.type.shape)
    return _reshaped(cx, x, tuple(ONE if i in axes else next(rest) for i in range(rank)))


@register("squeeze", params="x, axis=None", keys=True, family="Shape", doc="x with axes of size 1 removed")
def _squeeze(cx: CallCx, x, axis=None) -> Val:
    x = cx.array(x, "x")
    shape = x.type.shape
    if axis is None:
        unknown = [str(d) for d in shape if not d.is_const]
        if unknown:
            # Whether a symbolic dimension is 1 differs per call, so the result rank would too.
            cx.error("E0204", f"`squeeze` without `axis` on {x.type}: whether `{unknown[0]}` is 1 is only known "
                              f"per call", f"this is {x.type}", at="x",
                     help="name the axes to remove, e.g. `squeeze(x, axis="
                          f"{next((i for i, d in enumerate(shape) if d == 1), 0)})`")
        axes = [i for i, d in enumerate(shape) if d == 1]
    else:
        axes = cx.axes(axis, x.type.rank, "axis")
        for a in axes:
            if shape[a].is_const and shape[a] != 1:     # symbolic sizes are checked once concrete
                cx.error("E0204", f"cannot squeeze axis {a} of {x.type}: its size is {shape[a]}, not 1",
                         f"axis {a} has size {shape[a]}", at="axis",
                         help="only axes of size 1 can be removed; use `reshape` or index to drop others")
    return _reshaped(cx, x, tuple(d for i, d in enumerate(shape) if i not in axes))


@register("flip", params="x, axis=None", keys=True, family="Shape",
          doc="x with the order of its elements reversed along axis")
def _flip(cx: CallCx, x, axis=None) -> Val:
    x = cx.array(x, "x")
    axes = _axis_list(cx, axis, x.type.rank)
    return cx.value(x.type, lambda: hlo.reverse(cx.ir(x), axes) if axes else cx.ir(x))


def _pad_pair(cx: CallCx, v) -> tuple[Dim, Dim]:
    if isinstance(v, TupleVal):
        if len(v.items) != 2:
            cx.error("E0204", f"each entry of `pad_width` must be a pair (before, after), found {describe(v)}",
                     "not a pair", at="pad_width")
        return cx.static_int(v.items[0], "pad_width"), cx.static_int(v.items[1], "pad_width")
    p = cx.static_int(v, "pad_width")
    return p, p


def _pad_widths(cx: CallCx, pad_width, rank: int) -> list[tuple[Dim, Dim]]:
    """np.pad's forms: n, (n,), (before, after), ((before, after),) or one pair per axis."""
    static = pad_width.static if isinstance(pad_width, Val) else None
    if isinstance(static, np.ndarray) and static.ndim and pad_width.type.dtype.is_int:
        # a list literal (`[(1, 2)]`, `[[1, 1], [0, 2]]`, `[[1], [2]]`): an integer array, broadcast to one
        # pair per axis as np.pad does (pairs stay as they are: a wrong count of them is said so below)
        try:
            static = np.broadcast_to(static, static.shape if static.shape[1:] == (2,) else (rank, 2))
        except ValueError:
            cx.error("E0204", f"`pad_width` must be an int, a pair (before, after), or one pair per axis; "
                              f"found {describe(pad_width)}", "not a padding", at="pad_width",
                     help="e.g. `pad(x, [(1, 1), (0, 2)])` for a rank-2 array")
        pairs = [(Dim.const(int(a)), Dim.const(int(b))) for a, b in static]
    elif isinstance(pad_width, TupleVal) and any(isinstance(i, TupleVal) for i in pad_width.items):
        pairs = [_pad_pair(cx, i) for i in pad_width.items]
    elif isinstance(pad_width, TupleVal) and len(pad_width.items) == 2:
        pairs = [_pad_pair(cx, pad_width)]
    elif isinstance(pad_width, TupleVal) and len(pad_width.items) == 1:
        pairs = [_pad_pair(cx, pad_width.items[0])]
    elif isinstance(pad_width, TupleVal):
        cx.error("E0204", f"`pad_width` must be an int, a pair (before, after), or one pair per axis; "
                          f"found {describe(pad_width)}", "not a padding", at="pad_width",
                 help="e.g. `pad(x, ((1, 1), (0, 2)))` for a rank-2 array")
    else:
        pairs = [_pad_pair(cx, pad_width)]
    if len(pairs) == 1:
        pairs = pairs * rank
    if len(pairs) != rank:
        cx.error("E0204", f"`pad_width` has {len(pairs)} pairs for an array of rank {rank}",
                 f"{len(pairs)} pairs", at="pad_width", help="give one (before, after) pair per axis")
    for d in (d for pair in pairs for d in pair):
        if d.is_const and d.value < 0:
            cx.error("E0204", f"`pad_width` cannot be negative, found {d.value}", "negative", at="pad_width",
                     help="to remove elements, slice instead: `x[1:-1]`")
    return pairs


@register("pad", params="x, pad_width, constant_values=0",
          family="Shape", doc="x padded with constant_values (np.pad widths)")
def _pad(cx: CallCx, x, pad_width, constant_values=0) -> Val:
    x = cx.array(x, "x")
    pairs = _pad_widths(cx, pad_width, x.type.rank)
    dt = x.type.dtype
    if not isinstance(constant_values, int):    # given in the source (the default is the Python int 0)
        if not isinstance(constant_values, Val) or constant_values.type.rank:
            cx.error("E0204", f"`constant_values` must be a scalar, found {describe(constant_values)}",
                     f"this is {describe(constant_values)}", at="constant_values",
                     help="np.pad's (before, after) values per axis are not supported: pad once per value"
                     if isinstance(constant_values, TupleVal) else None)
        _check_fill(cx, constant_values, dt, "constant_values")
    shape = tuple(d + lo + hi for d, (lo, hi) in zip(x.type.shape, pairs))

    def build():
        fill = _scalar_as(cx, constant_values, dt) if isinstance(constant_values, Val) else \
            emit.const(constant_values, dt)
        return hlo.pad(cx.ir(x), fill, [lo.value for lo, _ in pairs], [hi.value for _, hi in pairs],
                       [0] * len(pairs))
    return cx.value(x.type.with_shape(shape), build)


@register("tile", params="x, reps", keys=True, family="Shape", doc="x repeated reps times along each axis")
def _tile(cx: CallCx, x, reps) -> Val:
    x = cx.array(x, "x")
    counts = cx.static_ints(reps, "reps")
    for r in counts:
        if r.is_const and r.value < 0:
            cx.error("E0204", f"`reps` cannot be negative, found {r.value}", "negative", at="reps")
    n = max(x.type.rank, len(counts))
    counts = [ONE] * (n - len(counts)) + list(counts)
    dims = [ONE] * (n - x.type.rank) + list(x.type.shape)
    shape = tuple(d * r for d, r in zip(dims, counts))

    def build():
        interleaved = [v for r, d in zip(counts, dims) for v in (r.value, d.value)]
        value = hlo.reshape(emit.tensor_type(concrete(dims), x.type.dtype), cx.ir(x))
        value = hlo.broadcast_in_dim(emit.tensor_type(interleaved, x.type.dtype), value, list(range(1, 2 * n, 2)))
        return hlo.reshape(emit.tensor_type(concrete(shape), x.type.dtype), value)
    return cx.value(x.type.with_shape(shape), build)


@register("repeat", params="x, repeats, axis=None", keys=True, family="Shape",
          doc="each element of x repeated `repeats` times along axis (of the flattened x by default)")
def _repeat(cx: CallCx, x, repeats, axis=None) -> Val:
    x = cx.array(x, "x")
    if isinstance(repeats, Val) and repeats.type.rank:
        cx.error("E0204", f"`repeats` must be one compile-time integer, found {describe(repeats)}",
                 "counts per element", at="repeats",
                 help="a count per element makes the result's size depend on the counts; repeat each part by "
                      "its own count and `concat` them")
    count = cx.count(repeats, "repeats")
    if axis is None:
        x = _reshaped(cx, x, (_prod(x.type.shape),))
    a = _single_axis(cx, 0 if axis is None else axis, x.type.rank)
    dims = x.type.shape
    shape = dims[:a] + (dims[a] * count,) + dims[a + 1:]

    def build():
        spread = concrete(dims[:a + 1]) + (count.value,) + concrete(dims[a + 1:])
        kept = [i if i <= a else i + 1 for i in range(len(dims))]
        value = hlo.broadcast_in_dim(emit.tensor_type(spread, x.type.dtype), cx.ir(x), kept)
        return hlo.reshape(emit.tensor_type(concrete(shape), x.type.dtype), value)
    return cx.value(x.type.with_shape(shape), build)


def _slice_along(value, axis: int, start: int, stop: int, step: int = 1):
    shape = emit.shape_of(value)
    starts, limits = [0] * len(shape), list(shape)
    starts[axis], limits[axis] = start, stop
    strides = [1] * len(shape)
    strides[axis] = step
    return hlo.slice(value, starts, limits, strides)


def _roll_axes(cx: CallCx, axis, rank: int) -> list[int]:
    """The axes of `roll`, normalized; unlike elsewhere an axis may repeat (its shifts add up, as in jnp)."""
    out = []
    for a in cx.static_ints(axis, "axis"):
        if not a.is_const:
            cx.error("E0204", f"`axis` must be an integer literal or const, found `{a}`", "symbolic", at="axis")
        if not -rank <= a.value < rank:
            cx.error("E0204", f"axis {a.value} is out of range for an array of rank {rank}", f"rank is {rank}",
                     at="axis")
        out.append(a.value % rank)
    return out


@register("roll", params="x, shift, axis=None", keys=True, family="Shape",
          doc="x with its elements shifted cyclically by shift places along axis (of the flattened x by default)")
def _roll(cx: CallCx, x, shift, axis=None) -> Val:
    x = cx.array(x, "x")
    shifts = [s if is_runtime_int(s) else cx.static_int(s, "shift")
              for s in (shift.items if isinstance(shift, TupleVal) else [shift])]
    flat = axis is None                      # as jnp.roll: roll the flattened array, then restore the shape
    axes = [0] if flat else _roll_axes(cx, axis, x.type.rank)
    if len(shifts) != len(axes) and 1 not in (len(shifts), len(axes)):
        cx.error("E0204", f"`roll` got {len(shifts)} shifts for {len(axes)} axes", f"{len(shifts)} shifts",
                 at="shift", help="give one shift per axis, or one shift for all of them")
    pairs = list(zip(axes * len(shifts) if len(axes) == 1 else axes,
                     shifts * len(axes) if len(shifts) == 1 else shifts))

    def build():
        value = cx.ir(x)
        size = int(np.prod(concrete(x.type.shape)))
        if flat:
            value = hlo.reshape(emit.tensor_type((size,), x.type.dtype), value)
        for ax, s in pairs:
            n = emit.shape_of(value)[ax]
            if isinstance(s, Val):
                value = _roll_by_runtime(value, ax, cx.ir(s), s.type.dtype)
                continue
            by = s.value % n if n else 0
            if by:
                value = hlo.concatenate([_slice_along(value, ax, n - by, n), _slice_along(value, ax, 0, n - by)], ax)
        if flat:
            value = hlo.reshape(emit.tensor_type(concrete(x.type.shape), x.type.dtype), value)
        return value
    return cx.value(x.type, build)


def _roll_by_runtime(value, ax: int, s, dt: DType):
    """`value` rolled along `ax` by a run-time integer `s` of dtype `dt`: the window of [value, value] that
    starts at n - (s mod n), with Python's mod for every integer dtype (u64 and i64 extremes included)."""
    shape = emit.shape_of(value)
    n = shape[ax]
    if n <= 1:
        return value
    idt = I64 if dt.bits == 64 or 2 * n > int_range(I32)[1] else I32
    if dt.kind == "uint":           # s mod n in s's own dtype (when n fits there), then < n: fits idt
        by = s if n > int_range(dt)[1] else hlo.remainder(s, emit.const(n, dt))
        by = emit.convert(by, dt, idt)
    else:
        by = hlo.remainder(emit.convert(s, dt, idt), emit.const(n, idt))
        by = hlo.select(emit.compare(by, emit.const(0, idt), "LT", idt), hlo.add(by, emit.const(n, idt)), by)
    starts = [emit.const(0, idt)] * len(shape)
    starts[ax] = hlo.subtract(emit.const(n, idt), by)
    return hlo.dynamic_slice(hlo.concatenate([value, value], ax), starts, shape)


def _min_dim(a: Dim, b: Dim) -> Dim:
    """min(a, b), not below 0: exact where a - b is a constant, else a stand-in decided once concrete."""
    d = a - b
    if not d.is_const:
        return Dim.var(f"min({a}, {b})")
    low = b if d.value >= 0 else a
    return Dim.const(max(low.value, 0)) if low.is_const else low


def _diagonal_ir(value, rows: int, cols: int, k: int, length: int, dt: DType):
    """The k-th diagonal of a (rows, cols) matrix: a strided slice (stride cols + 1) of the flattened matrix."""
    if length == 0:
        return emit.const(0, dt, (0,))
    flat = hlo.reshape(emit.tensor_type((rows * cols,), dt), value)
    start = k if k >= 0 else -k * cols
    return _slice_along(flat, 0, start, start + (length - 1) * (cols + 1) + 1, cols + 1)


@register("diag", params="x, k=0", family="Shape",
          doc="the k-th diagonal of a 2-D x, or a square 2-D array with the 1-D x on its k-th diagonal")
def _diag(cx: CallCx, x, k=0) -> Val:
    x = cx.array(x, "x")
    k = k if isinstance(k, int) else cx.const_int(k, "k")
    dt = x.type.dtype
    if x.type.rank == 1:
        n = x.type.shape[0]
        size = n + Dim.const(abs(k))
        shape = (size, size)

        def build():
            big = size.value
            if n.value == 0:
                return emit.const(0, dt, (big, big))
            # x[i] goes to the flat index i * (big + 1) + low: one pad with `big` elements between each two
            low = k if k >= 0 else -k * big
            high = big * big - (low + n.value + (n.value - 1) * big)
            padded = hlo.pad(cx.ir(x), emit.const(0, dt), [low], [high], [big])
            return hlo.reshape(emit.tensor_type((big, big), dt), padded)
        return cx.value(x.type.with_shape(shape), build)
    if x.type.rank != 2:
        cx.error("E0204", f"`diag` takes a 1-D or 2-D array, found {x.type}", f"this is {x.type}", at="x",
                 help="for the diagonals of a stack of matrices use `x * eye(n)` and `sum`, or index")
    rows, cols = x.type.shape
    length = _min_dim(rows, cols - Dim.const(k)) if k >= 0 else _min_dim(rows + Dim.const(k), cols)
    return cx.value(x.type.with_shape((length,)),
                    lambda: _diagonal_ir(cx.ir(x), rows.value, cols.value, k, length.value, dt))


def _triangle(name: str, direction: str):
    """tril ("LE": keep j - i <= k) / triu ("GE": keep j - i >= k) on the last two axes, zeros elsewhere."""
    def rule(cx: CallCx, x, k=0) -> Val:
        x = cx.array(x, "x")
        if x.type.rank < 2:
            cx.error("E0204", f"`{name}` needs an array of rank 2 or more, found {x.type}", f"this is {x.type}",
                     at="x", help="as in jax.numpy, 1-D arrays are not promoted to matrices")
        offset = cx.static_int(k, "k")
        dt, rank = x.type.dtype, x.type.rank

        def build():
            s = concrete(x.type.shape)
            t = emit.tensor_type(s, I64)
            column_minus_row = hlo.subtract(hlo.iota(t, rank - 1), hlo.iota(t, rank - 2))
            keep = emit.compare(column_minus_row, emit.const(offset.value, I64, s), direction, I64)
            return hlo.select(keep, cx.ir(x), emit.const(0, dt, s))
        return cx.value(x.type, build)
    return rule


register("tril", params="x, k=0", family="Shape",
         doc="x with the elements above its k-th diagonal set to 0 (on the last two axes)")(_triangle("tril", "LE"))
register("triu", params="x, k=0", family="Shape",
         doc="x with the elements below its k-th diagonal set to 0 (on the last two axes)")(_triangle("triu", "GE"))


# ---- linear algebra --------------------------------------------------------------------------
def _dot_general(lhs, rhs, out_shape, dt: DType, batch: tuple, contract: tuple):
    """`batch` and `contract` are (lhs dims, rhs dims) pairs."""
    dims = hlo.DotDimensionNumbers.get(lhs_batching_dimensions=list(batch[0]),
                                       rhs_batching_dimensions=list(batch[1]),
                                       lhs_contracting_dimensions=list(contract[0]),
                                       rhs_contracting_dimensions=list(contract[1]))
    return hlo.dot_general(emit.tensor_type(out_shape, dt), lhs, rhs, dims)


def _matmul(cx: CallCx, x, y, what: str) -> Val:
    x, y = cx.array(x, "x"), cx.array(y, "y")
    tx, ty = x.type, y.type
    if tx.rank == 0 or ty.rank == 0:
        cx.error("E0204", f"{what} needs arrays of rank 1 or more, found {tx} and {ty}",
                 f"this is {tx if tx.rank == 0 else ty}", at="x" if tx.rank == 0 else "y",
                 help="use `*` to multiply by a scalar")
    dtype, weak = _promoted(cx, [x, y], what)
    kx = tx.shape[-1]
    ky = ty.shape[-2] if ty.rank >= 2 else ty.shape[0]
    labels = [Label(cx.at("x"), f"this is {tx}"), Label(cx.at("y"), f"this is {ty}")]
    if kx != ky:
        which = "second-to-last" if ty.rank >= 2 else "only"
        cx.error("E0202", f"cannot multiply {tx} by {ty} in {what}: contracted dimensions {kx} and {ky} differ",
                 f"{kx} vs {ky}", labels=labels,
                 notes=[f"the last axis of the left operand is contracted with the {which} axis of the right one"]
                 + (["two different shape variables never match"] if kx.variables and ky.variables else []))
    bx, by = tx.shape[:-2], ty.shape[:-2]
    batch = []
    for i in range(1, max(len(bx), len(by)) + 1):
        a = bx[-i] if i <= len(bx) else ONE
        b = by[-i] if i <= len(by) else ONE
        if not (a == b or a == 1 or b == 1):
            cx.error("E0202", f"batch dimensions of {tx} and {ty} do not broadcast in {what}", f"{a} vs {b}",
                     labels=labels, notes=["all axes but the last two broadcast like elementwise operands"])
        batch.insert(0, a if b == 1 else b)
    batch = tuple(batch)
    core_x, core_y = tx.shape[-2:], ty.shape[-2:]
    out = batch + (tx.shape[-2:-1] if tx.rank >= 2 else ()) + (ty.shape[-1:] if ty.rank >= 2 else ())

    def build():
        if ty.rank <= 2:    # rows of any batch times one matrix (or vector): one dot_general, as jnp.matmul
            return _dot_general(cx.ir(x, dtype), cx.ir(y, dtype), concrete(out), dtype, ((), ()),
                                ([tx.rank - 1], [0]))
        nb = len(batch)
        lhs = emit.broadcast(cx.ir(x, dtype), concrete(batch + core_x))
        rhs = emit.broadcast(cx.ir(y, dtype), concrete(batch + core_y))
        return _dot_general(lhs, rhs, concrete(out), dtype, (range(nb), range(nb)),
                            ([nb + len(core_x) - 1], [nb]))
    return cx.value(ArrayType(dtype, out, weak), build)


@register("@", params="x, y", table=OPERATORS, display="matmul", words="matrix product")
def _matmul_op(cx: CallCx, x, y) -> Val:
    return _matmul(cx, x, y, "`@`")


@register("matmul", params="x, y",
          family="Linear algebra", doc="matrix product with NumPy batching (the `@` operator)", words="matrix product")
def _matmul_fn(cx: CallCx, x, y) -> Val:
    return _matmul(cx, x, y, "`matmul`")


@register("dot", params="x, y", family="Linear algebra", doc="dot product of arrays of rank 2 or less")
def _dot(cx: CallCx, x, y) -> Val:
    x, y = cx.array(x, "x"), cx.array(y, "y")
    for v, name in ((x, "x"), (y, "y")):
        if v.type.rank > 2:
            cx.error("E0204", f"`dot` takes arrays of rank 2 or less, found {v.type}", f"this is {v.type}",
                     at=name, help="use `x @ y` (matmul) or `einsum` for batched products")
    if x.type.rank == 0 or y.type.rank == 0:
        return OPERATORS["*"].fn(cx, x, y)
    return _matmul(cx, x, y, "`dot`")


def _parse_einsum(cx: CallCx, text: str, operands: list) -> tuple[list[str], str]:
    spec = text.replace(" ", "")
    if "->" not in spec:
        letters = spec.replace(",", "")
        implicit = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
        cx.error("E0204", f"einsum spec \"{text}\" has no output: arr needs an explicit `->`", "no `->`",
                 at="subscripts", help=f"write \"{spec}->{implicit}\" for NumPy's implicit output")
    inputs, output = spec.split("->", 1)
    terms = inputs.split(",")
    bad = sorted({c for c in inputs.replace(",", "") + output if not ("a" <= c.lower() <= "z")})
    if bad:
        cx.error("E0204", f"einsum spec \"{text}\" has characters other than letters: {' '.join(bad)}",
                 "letters a-z and A-Z only", at="subscripts",
                 help="write every axis as a letter (`...` is not supported)" if "." in bad else None)
    if len(terms) != len(operands):
        cx.error("E0204", f"einsum spec \"{text}\" has {len(terms)} input term(s) but {len(operands)} "
                          f"operand(s) were given", f"{len(terms)} terms", at="subscripts")
    for i, (term, v) in enumerate(zip(terms, operands)):
        if len(term) != v.type.rank:
            cx.error("E0202", f"einsum term `{term}` has {len(term)} letter(s) but operand {i + 1} is {v.type} "
                              f"(rank {v.type.rank})", f"this is {v.type}", at=i + 1,
                     labels=[Label(cx.at("subscripts"), f"term `{term}`")])
        repeated = [c for c in term if term.count(c) > 1]
        if repeated:
            cx.error("E0204", f"letter `{repeated[0]}` repeats in einsum term `{term}`: diagonals and traces "
                              f"are not supported", "repeated letter", at="subscripts")
    for c in output:
        if output.count(c) > 1:
            cx.error("E0204", f"letter `{c}` repeats in the einsum output `{output}`", "repeated letter",
                     at="subscripts")
        if c not in inputs:
            cx.error("E0204", f"output letter `{c}` of einsum spec \"{text}\" is not in any input",
                     f"`{c}` has no size", at="subscripts")
    return terms, output


@register("einsum", params="subscripts, x, y=None",
          family="Linear algebra", doc="Einstein summation over one or two operands")
def _einsum(cx: CallCx, subscripts, x, y=None) -> Val:
    if not isinstance(subscripts, StrVal):
        cx.error("E0210", f"the first argument of `einsum` must be a spec string such as \"ij,jk->ik\", "
                          f"found {describe(subscripts)}", "not a string", at="subscripts")
    operands = [cx.array(x, "x")] + ([] if y is None else [cx.array(y, "y")])
    terms, output = _parse_einsum(cx, subscripts.text, operands)
    sizes: dict[str, tuple[Dim, int]] = {}
    for i, (term, v) in enumerate(zip(terms, operands)):
        for c, d in zip(term, v.type.shape):
            if c in sizes and sizes[c][0] != d:
                j = sizes[c][1]
                cx.error("E0202", f"einsum letter `{c}` has size {sizes[c][0]} in operand {j + 1} "
                                  f"({operands[j].type}) but {d} in operand {i + 1} ({v.type})",
                         f"`{c}` is {d} here", at=i + 1,
                         labels=[Label(cx.at(j + 1), f"`{c}` is {sizes[c][0]} here")])
            sizes.setdefault(c, (d, i))
    dtype, weak = _promoted(cx, operands, "`einsum`")
    if dtype.is_bool:
        cx.error("E0201", "`einsum` is not defined on bool", "bool operands", help="convert with `.astype(i32)`")
    out = tuple(sizes[c][0] for c in output)

    def summed(v: Val, term: str, other: str):
        """Sum out the letters that only this operand has and the output drops."""
        value = cx.ir(v, dtype)
        drop = [i for i, c in enumerate(term) if c not in output and c not in other]
        if drop:
            value = emit.reduce(value, emit.const(0, dtype), drop, hlo.add, dtype)
        return value, "".join(c for i, c in enumerate(term) if i not in drop)

    def build():
        if len(operands) == 1:
            value, letters = summed(operands[0], terms[0], "")
        else:
            a, ta = summed(operands[0], terms[0], terms[1])
            b, tb = summed(operands[1], terms[1], terms[0])
            batch = [c for c in ta if c in tb and c in output]
            contract = [c for c in ta if c in tb and c not in output]
            letters = "".join(batch) + "".join(c for c in ta if c not in tb) + "".join(c for c in tb if c not in ta)
            shape = concrete(sizes[c][0] for c in letters)
            value = _dot_general(a, b, shape, dtype, ([ta.index(c) for c in batch], [tb.index(c) for c in batch]),
                                 ([ta.index(c) for c in contract], [tb.index(c) for c in contract]))
        perm = [letters.index(c) for c in output]
        return value if perm == sorted(perm) else hlo.transpose(value, perm)
    return cx.value(ArrayType(dtype, out, weak), build)


@register("outer", params="x, y", family="Linear algebra", doc="outer product of the flattened x and y")
def _outer(cx: CallCx, x, y) -> Val:
    x, y = cx.array(x, "x"), cx.array(y, "y")
    dtype, weak = _promoted(cx, [x, y], "`outer`")
    if dtype.is_bool:
        cx.error("E0201", "`outer` is not defined on bool", "both operands are bool",
                 help="convert with `.astype(i32)` first")
    sx, sy = _prod(x.type.shape), _prod(y.type.shape)

    def build():
        shape = concrete((sx, sy))
        flat_x = hlo.reshape(emit.tensor_type(shape[:1], dtype), cx.ir(x, dtype))
        flat_y = hlo.reshape(emit.tensor_type(shape[1:], dtype), cx.ir(y, dtype))
        t = emit.tensor_type(shape, dtype)
        return hlo.multiply(hlo.broadcast_in_dim(t, flat_x, [0]), hlo.broadcast_in_dim(t, flat_y, [1]))
    return cx.value(ArrayType(dtype, (sx, sy), weak), build)


def _contracted(cx: CallCx, axes, rx: int, ry: int) -> tuple[list[int], list[int]]:
    """jnp.tensordot's `axes`: N (the last N axes of x with the first N of y) or a pair (x's axes, y's axes)."""
    listed = listed_ints(axes)
    if listed is not None:
        # a list literal, as NumPy and jnp read one: [[1, 2], [0, 1]], or [2, 1] for one axis of each
        pair = [[Dim.const(int(a)) for a in np.atleast_1d(row)] for row in listed]
    elif isinstance(axes, TupleVal):
        pair = [cx.static_ints(a, "axes") for a in axes.items]
    else:
        n = cx.const_int(axes, "axes")
        if not 0 <= n <= min(rx, ry):
            cx.error("E0204", f"`axes={n}` contracts {n} axes, but the arrays have rank {rx} and {ry}",
                     f"0..{min(rx, ry)} here", at="axes")
        return list(range(rx - n, rx)), list(range(n))
    if len(pair) != 2:
        cx.error("E0204", f"`axes` must be an integer or a pair (axes of x, axes of y), found {describe(axes)}",
                 "not a pair", at="axes", help="e.g. `tensordot(x, y, axes=((1, 2), (0, 1)))`")
    if len(pair[0]) != len(pair[1]):
        cx.error("E0204", f"`axes` names {len(pair[0])} axis(es) of x but {len(pair[1])} of y: they are "
                          f"contracted in pairs", "unequal counts", at="axes")
    out = []
    for dims, rank in zip(pair, (rx, ry)):
        normalized = []
        for d in dims:
            if not d.is_const or not -rank <= d.value < rank:
                cx.error("E0204", f"axis {d} is out of range for an array of rank {rank}", f"rank is {rank}",
                         at="axes")
            if d.value % rank in normalized:
                cx.error("E0204", f"axis {d.value % rank} appears twice in `axes`", "repeated", at="axes")
            normalized.append(d.value % rank)
        out.append(normalized)
    return out[0], out[1]


@register("tensordot", params="x, y, axes=2", family="Linear algebra",
          doc="sum of products over the axes of x and y given by axes (N, or a pair of axis tuples), as jnp")
def _tensordot(cx: CallCx, x, y, axes=2) -> Val:
    x, y = cx.array(x, "x"), cx.array(y, "y")
    tx, ty = x.type, y.type
    ax, ay = _contracted(cx, axes, tx.rank, ty.rank)
    for i, j in zip(ax, ay):
        if tx.shape[i] != ty.shape[j]:
            cx.error("E0202", f"cannot contract axis {i} of {tx} with axis {j} of {ty}: sizes {tx.shape[i]} and "
                              f"{ty.shape[j]} differ", f"{tx.shape[i]} vs {ty.shape[j]}",
                     labels=[Label(cx.at("x"), f"this is {tx}"), Label(cx.at("y"), f"this is {ty}")])
    dtype, weak = _promoted(cx, [x, y], "`tensordot`")
    if dtype.is_bool:
        cx.error("E0201", "`tensordot` is not defined on bool", "both operands are bool",
                 help="convert with `.astype(i32)` first")
    out = tuple(d for i, d in enumerate(tx.shape) if i not in ax) + tuple(d for j, d in enumerate(ty.shape)
                                                                         if j not in ay)
    return cx.value(ArrayType(dtype, out, weak), lambda: _dot_general(cx.ir(x, dtype), cx.ir(y, dtype), concrete(out),
                                                                     dtype, ((), ()), (ax, ay)))


# ---- neural-net helpers ----------------------------------------------------------------------
def _nn_input(cx: CallCx, x, axis) -> tuple[Val, list[int], DType]:
    x = cx.array(x, "x")
    return x, _axis_list(cx, axis, x.type.rank), float_dtype_for(x.type.dtype)


def _shifted(cx: CallCx, x: Val, axes, dt: DType):
    """x - max(x) over `axes` (as jax.nn: a row of -inf gives NaN, an +inf gives NaN)."""
    value = cx.ir(x, dt)
    return hlo.subtract(value, _reduce_keep(value, axes, -np.inf, hlo.maximum, dt))


@register("softmax", params="x, axis=-1", family="Neural-net helpers", doc="e**x / sum(e**x) along axis")
def _softmax(cx: CallCx, x, axis=-1) -> Val:
    x, axes, dt = _nn_input(cx, x, axis)

    def build():
        unnormalized = hlo.exponential(_shifted(cx, x, axes, dt))
        return hlo.divide(unnormalized, _reduce_keep(unnormalized, axes, 0, hlo.add, dt))
    return cx.value(x.type.with_dtype(dt, x.type.weak), build)


@register("log_softmax", params="x, axis=-1",
          family="Neural-net helpers", doc="log(softmax(x)) along axis, computed without overflow")
def _log_softmax(cx: CallCx, x, axis=-1) -> Val:
    x, axes, dt = _nn_input(cx, x, axis)

    def build():
        shifted = _shifted(cx, x, axes, dt)
        return hlo.subtract(shifted, hlo.log(_reduce_keep(hlo.exponential(shifted), axes, 0, hlo.add, dt)))
    return cx.value(x.type.with_dtype(dt, x.type.weak), build)


@register("layer_norm", params="x, axis=-1, epsilon=None",
          family="Neural-net helpers", doc="(x - mean) / sqrt(var + epsilon) along axis")
def _layer_norm(cx: CallCx, x, axis=-1, epsilon=None) -> Val:
    """(x - mean) / sqrt(var + epsilon) over `axis`, without scale or bias (jax.nn.standardize, two-pass)."""
    x, axes, dt = _nn_input(cx, x, axis)
    if epsilon is not None and (not isinstance(epsilon, Val) or epsilon.type.rank):
        cx.error("E0204", f"`epsilon` must be a scalar, found {describe(epsilon)}", "not a scalar", at="epsilon")

    wide = accumulation_dtype(dt)

    def build():
        value = cx.ir(x, dt)
        shape = emit.shape_of(value)
        count = emit.const(int(np.prod([shape[a] for a in axes])), wide, shape)

        def mean(v):        # jnp.mean(v, axes, keepdims=True): accumulated in `wide`, rounded to dt once
            return emit.convert(hlo.divide(_reduce_keep(emit.convert(v, dt, wide), axes, 0, hlo.add, wide), count),
                                wide, dt)
        centered = hlo.subtract(value, mean(value))
        var = mean(hlo.multiply(centered, centered))
        eps = emit.const(1e-5, dt, shape) if epsilon is None else emit.broadcast(_scalar_as(cx, epsilon, dt), shape)
        return hlo.multiply(centered, hlo.rsqrt(hlo.add(var, eps)))
    return cx.value(x.type.with_dtype(dt, x.type.weak), build)


@register("one_hot", params="x, num_classes, dtype=None",
          family="Neural-net helpers", doc="x encoded as one-hot vectors of num_classes entries")
def _one_hot(cx: CallCx, x, num_classes, dtype=None) -> Val:
    x = cx.array(x, "x")
    if not x.type.dtype.is_int:
        cx.error("E0201", f"`one_hot` needs integer class indices, found {x.type}", f"this is {x.type}", at="x",
                 help="convert with `.astype(i32)` first")
    k = cx.count(num_classes, "num_classes")
    dt = _dtype_or(cx, dtype, F32)
    shape = x.type.shape + (k,)

    def build():
        s = concrete(shape)
        # Compare in x's dtype when every class index fits it, else in i64 (a u8 index with 300 classes).
        ct = x.type.dtype if k.value == 0 or k.value - 1 <= np.iinfo(x.type.dtype.np).max else I64
        index = hlo.broadcast_in_dim(emit.tensor_type(s, ct), cx.ir(x, ct), list(range(x.type.rank)))
        hit = emit.compare(index, hlo.iota(emit.tensor_type(s, ct), len(s) - 1), "EQ", ct)
        return emit.convert(hit, BOOL, dt)
    return cx.value(ArrayType(dt, shape), build)
