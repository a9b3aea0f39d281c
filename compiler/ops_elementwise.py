"""Elementwise rules: operators, math, predicates, `where`/`clip`, casts, attributes, array literals."""
from __future__ import annotations

import math
import operator

import ml_dtypes
import numpy as np

from . import abi, emit
from .emit import hlo
from .diagnostics import Label
from .optable import OPERATORS, CallCx, _pair_cx, broadcast_shapes, check_literal, concrete, elementwise_type, \
    float_dtype_for, register, source_text
from .types import (BOOL, DTYPES, I32, ArrayType, Dim, DType, int_range, promote, shape_str, true_divide_dtype,
                    wide_int_dtype, wrap_int)
from .values import DeferredBool, DTypeVal, TupleVal, Val, affine_parts, describe


# ---- binary operators --------------------------------------------------------------------
def _require_arrays(cx: CallCx, args: list, what: str, tuple_help: str | None = None) -> None:
    for i, a in enumerate(args):
        if not isinstance(a, Val):
            cx.error("E0210", f"operand of {what} must be an array or scalar, found {describe(a)}",
                     f"this is {describe(a)}", at=i, help=tuple_help if isinstance(a, TupleVal) else None)


def result_type(operand: Val, dtype: DType, shape: tuple, weak: bool) -> ArrayType:
    """The ArrayType of an op's result: its operand's own where that is the same type (most ops keep their
    operand's dtype and shape; one ArrayType less per op, and equal operand types compared by identity)."""
    t = operand.type
    if t.dtype is dtype and t.shape is shape and t.weak == weak:
        return t
    return ArrayType(dtype, shape, weak)


def arithmetic(op_name: str, build_float, build_int=None, allow_bool=False):
    build_int = build_int or build_float
    what = f"`{op_name}`"

    def rule(cx: CallCx, x, y):
        operands = [x, y]
        _require_arrays(cx, operands, what)
        folded = _fold(op_name, x, y) if x.static is not None and y.static is not None else None
        if isinstance(folded, Dim) and folded.is_const:
            _refuse_past_max_bits(cx, abs(folded.value).bit_length())        # (`t = t * t` grew without end)
        folded_float = _fold_float(op_name, x, y)
        dtype, weak, shape = elementwise_type(cx, operands, what, exact=isinstance(folded, Dim) and folded.is_const
                                              or folded_float is not None)
        if dtype.is_bool and not allow_bool:
            cx.error("E0201", f"`{op_name}` is not defined on bool", "both operands are bool",
                     help="convert with `.astype(i32)` first")
        static = folded if dtype.is_int else folded_float if weak else None
        if isinstance(static, Dim) and not weak and static.is_const:
            static = Dim.const(wrap_int(static.value, dtype))     # a typed integer wraps, as at run time

        def build():
            return (build_float if dtype.is_float else build_int)(cx.ir(x, dtype, shape), cx.ir(y, dtype, shape), dtype)
        t = result_type(x, dtype, shape, weak)
        if static is not None:
            return Val(t, None, static)
        result = cx.value(t, build)
        result.affine = _affine(op_name, x, y, dtype) if dtype.is_int and not shape else None
        return result
    return rule


def _affine(op: str, x: Val, y: Val, dtype):
    """Track a run-time integer as `i * scale + offset`, `i` a run-time integer and the others compile-time
    ones (literals, consts or shape variables: Dims), through `+ c`, `- c`, `c - i` and `* c`, so that slices
    like `x[i:i + 4]`, `x[i:i + m]` and `x[k * b:(k + 1) * b]` have a provable length (`affine_parts`). Every
    step is in one dtype (wrapping modulo its range, as the exact value does), so a range of the exact value
    that fits it is the run-time one (`value_range`); a value widened by promotion is a new base, as what
    wrapped in the narrower dtype stays wrapped."""
    cx_, cy = (v.static if isinstance(v.static, Dim) else None for v in (x, y))
    if (cx_ is None) == (cy is None):
        return None
    v, c = (x, cy) if cy is not None else (y, cx_)
    base, scale, off = affine_parts(v) if v.type.dtype == dtype else (v, Dim.const(1), Dim.const(0))
    if op == "+":
        return base, scale, off + c
    if op == "-":
        return (base, scale, off - c) if v is x else (base, -scale, c - off)
    if op == "*":
        return base, scale * c, off * c
    return None


def _fold(op: str, x: Val, y: Val):
    """Compile-time integers stay compile-time (shape arithmetic: `n + 1`, `2 * n`)."""
    if not (isinstance(x.static, Dim) and isinstance(y.static, Dim)) or x.type.rank or y.type.rank:
        return None
    a, b = x.static, y.static
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "//":
        if b == 0:
            return None
        return Dim.quotient(a, b)
    if op == "%" and a.is_const and b.is_const and b.value != 0:
        return Dim.const(a.value % b.value)          # Python's and NumPy's sign rule (that of the divisor)
    return None


_FLOAT_FOLDS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "**": math.pow}


def _fold_float(op: str, x: Val, y: Val) -> float | None:
    """Float arithmetic of literals is Python's, in f64, as JAX with x64 sees `1.0 / 3.0` (`_fold_math`); None
    unless the result is a float: a float literal's, or a true division's (`1 / 3`; other integer arithmetic of
    literals folds exactly, `_fold`, `_fold_power`).
    Its operands are then not checked each in the dtype the result takes: `f64(1e308 * 1)` is 1e308, and
    warned (W0005) that 1e308 becomes inf in f32."""
    if op not in _FLOAT_FOLDS or not (op == "/" or isinstance(x.static, float) or isinstance(y.static, float)):
        return None
    return _fold_math(_FLOAT_FOLDS[op], x, y)


def _fold_math(fn, *operands: Val) -> float | None:
    """`fn` of number literals, computed by Python in f64, as JAX with x64 computes `1.0 / 3.0` or
    `jnp.sqrt(2.0)`: a literal until it takes its dtype (`x_f64 * sqrt(2.0)` is exact; computed at run time in
    the literal's f32 it was not), rounded once there. None where an operand is not a literal, and where the
    f64 result is not finite (`1.0 / 0.0`, `log(-1.0)`, `exp(1000.0)`): that happens at run time, in the
    dtype taken, where the guards see it."""
    values = []
    for v in operands:
        s = v.static.value if isinstance(v.static, Dim) and v.static.is_const else v.static
        if type(s) not in (float, int):
            return None
        values.append(s)
    try:
        value = float(fn(*values))
    except (ArithmeticError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _divisor(a, b, dt: DType):
    """(shape, 0, 1, b == 0, b with 0 replaced by 1) for an integer division of `a` by `b`; the
    replacing select is the div0 guard's site (passes/guards.py)."""
    shape = emit.shape_of(a)
    zero, one = emit.const(0, dt, shape), emit.const(1, dt, shape)
    is_zero = emit.compare(b, zero, "EQ", dt)
    return shape, zero, one, is_zero, emit.mark(emit.select(is_zero, one, b), abi.DIV0)


def _floor_div_int(a, b, dt: DType):
    shape, zero, one, is_zero, safe = _divisor(a, b, dt)
    if dt.kind == "uint":
        return emit.select(is_zero, zero, emit.mark(hlo.divide(a, safe), abi.SAFE_DIVISOR))
    minus_one = emit.const(-1, dt, shape)
    by_minus_one = emit.compare(safe, minus_one, "EQ", dt)
    safe = emit.select(by_minus_one, one, safe)              # INT_MIN / -1 overflows in hardware
    q = emit.mark(hlo.divide(a, safe), abi.SAFE_DIVISOR)
    r = emit.mark(hlo.remainder(a, safe), abi.SAFE_DIVISOR)
    adjust = hlo.and_(emit.compare(r, zero, "NE", dt),
                      emit.compare(emit.compare(r, zero, "LT", dt), emit.compare(safe, zero, "LT", dt), "NE", BOOL))
    q = emit.select(adjust, hlo.subtract(q, one), q)
    q = emit.select(by_minus_one, hlo.negate(a), q)
    return emit.select(is_zero, zero, q)


def _mod_int(a, b, dt: DType):
    shape, zero, one, is_zero, safe = _divisor(a, b, dt)
    if dt.kind == "int":
        safe = emit.select(emit.compare(safe, emit.const(-1, dt, shape), "EQ", dt), one, safe)
    r = emit.mark(hlo.remainder(a, safe), abi.SAFE_DIVISOR)
    if dt.kind == "int":
        adjust = hlo.and_(emit.compare(r, zero, "NE", dt),
                          emit.compare(emit.compare(r, zero, "LT", dt), emit.compare(safe, zero, "LT", dt), "NE", BOOL))
        r = emit.select(adjust, hlo.add(r, safe), r)
    return emit.select(is_zero, zero, r)


def _float_mod(a, b, dt: DType):
    # jax.numpy.remainder: the sign of the divisor.
    shape = emit.shape_of(a)
    zero = emit.const(0, dt, shape)
    r = hlo.remainder(a, b)
    adjust = hlo.and_(emit.compare(r, zero, "NE", dt),
                      emit.compare(emit.compare(r, zero, "LT", dt), emit.compare(b, zero, "LT", dt), "NE", BOOL))
    return emit.select(adjust, hlo.add(r, b), r)


def _float_floor_div(a, b, dt: DType):
    # jax.numpy.floor_divide on floats (NumPy's divmod formula).
    shape = emit.shape_of(a)
    zero, one = emit.const(0, dt, shape), emit.const(1, dt, shape)
    mod = hlo.remainder(a, b)
    div = hlo.divide(hlo.subtract(a, mod), b)
    ind = hlo.and_(emit.compare(mod, zero, "NE", dt),
                   emit.compare(emit.compare(mod, zero, "LT", dt), emit.compare(b, zero, "LT", dt), "NE", BOOL))
    div = emit.select(ind, hlo.subtract(div, one), div)
    # By zero NumPy returns a / b (inf, -inf or nan); elsewhere the divmod formula (inf // 2 is nan).
    div = emit.select(emit.compare(b, zero, "EQ", dt), hlo.divide(a, b), div)
    # (a - mod) / b is an integer only up to rounding: round it (as jnp and NumPy do), never floor it. The
    # round comes last (it keeps inf and nan) so that the derivative stops there, as jnp's symbolic zero
    # does: nothing reaches a / b, whose derivative at a = inf would be 0 * inf = nan.
    return hlo.round_nearest_afz(div)


def _binary(name: str):
    """A builder (a, b, dtype) of the elementwise op `name` on operands of one type."""
    return lambda a, b, dt: emit.same_type(name, a, b)


register("+", params="x, y", table=OPERATORS,
         display="add", words="addition")(arithmetic("+", _binary("stablehlo.add")))
register("-", params="x, y", table=OPERATORS,
         display="subtract", words="subtraction")(arithmetic("-", _binary("stablehlo.subtract")))
register("*", params="x, y", table=OPERATORS,
         display="multiply", words="multiplication")(arithmetic("*", _binary("stablehlo.multiply")))
register("//", params="x, y", table=OPERATORS,
         display="floor_divide", words="floor division")(arithmetic("//", _float_floor_div, _floor_div_int))
register("%", params="x, y", table=OPERATORS,
         display="remainder", words="remainder")(arithmetic("%", _float_mod, _mod_int))
register("maximum", params="x, y",
         family="Elementwise",
         doc="elementwise larger of x and y")(arithmetic("maximum", _binary("stablehlo.maximum"), allow_bool=True))
register("minimum", params="x, y",
         family="Elementwise",
         doc="elementwise smaller of x and y")(arithmetic("minimum", _binary("stablehlo.minimum"), allow_bool=True))
@register("atan2", params="x, y",
          family="Elementwise", doc="elementwise arctan(x / y) in the quadrant of the point (y, x), as np.arctan2")
def _atan2(cx: CallCx, x, y):
    _require_arrays(cx, [x, y], "`atan2`")
    dtype, weak, shape = elementwise_type(cx, [x, y], "`atan2`")
    dtype = float_dtype_for(dtype)
    return cx.value(ArrayType(dtype, shape, weak), lambda: hlo.atan2(cx.ir(x, dtype, shape), cx.ir(y, dtype, shape)))


@register("/", params="x, y", table=OPERATORS, display="divide", words="division")
def _true_divide(cx: CallCx, x, y):
    _require_arrays(cx, [x, y], "`/`")
    folded = _fold_float("/", x, y)
    dtype, weak, shape = elementwise_type(cx, [x, y], "`/`", exact=folded is not None)
    if not dtype.is_float:      # (weak stays weak: `1 / 3` is a Python float to JAX, `x_f16 * (1 / 3)` is f16)
        dtype = true_divide_dtype(dtype)
    static = folded if weak else None
    if static is not None:
        return Val(ArrayType(dtype, shape, weak), None, static)
    return cx.value(ArrayType(dtype, shape, weak),
                    lambda: emit.same_type("stablehlo.divide", cx.ir(x, dtype, shape), cx.ir(y, dtype, shape)))


def _power(cx: CallCx, x, y):
    _require_arrays(cx, [x, y], "`**`")
    folded_float = _fold_float("**", x, y)
    dtype, weak, shape = elementwise_type(cx, [x, y], "`**`", exact=folded_float is not None)
    if dtype.is_bool:
        cx.error("E0201", "`**` is not defined on bool", help="convert with `.astype(i32)` first")
    static = (_fold_power(cx, x, y) if dtype.is_int else folded_float) if weak else None
    if static is not None:
        return Val(ArrayType(dtype, shape, weak), None, static)
    if not dtype.is_int:
        power = (lambda: emit.mark(hlo.power(cx.ir(x, dtype, shape), cx.ir(y, dtype, shape)), abi.INTEGER_EXPONENT)) \
            if y.type.dtype.is_int else (lambda: hlo.power(cx.ir(x, dtype, shape), cx.ir(y, dtype, shape)))
        return cx.value(ArrayType(dtype, shape, weak), power)
    known = y.static.value if isinstance(y.static, Dim) and y.static.is_const and y.static.value >= 0 else None
    if known is not None:
        return cx.value(ArrayType(dtype, shape, weak), lambda: _integer_pow(cx.ir(x, dtype, shape), known))
    return cx.value(ArrayType(dtype, shape, weak), lambda: _int_power(cx.ir(x, dtype, shape), cx.ir(y, dtype, shape)))


def _integer_pow(a, k: int):
    """`a ** k` for an exponent known at compile time: jax.lax.integer_pow's binary exponentiation (what
    jnp.power does for a concrete integer exponent), exact modulo the dtype as NumPy's."""
    acc = None
    while k:
        if k & 1:
            acc = a if acc is None else hlo.multiply(acc, a)
        k >>= 1
        if k:
            a = hlo.multiply(a, a)
    return acc if acc is not None else emit.const(1, emit.element_dtype(a.type), emit.shape_of(a))


def _int_power(a, b):
    """An integer power whose exponent is a run-time value: binary exponentiation over every bit of the
    exponent, NumPy's exact value modulo the dtype. (XLA's `stablehlo.power` and jnp's loop read 6 bits of
    the exponent: `0 ** 64` was 1 and `3 ** 128` in u8 0.) A negative (signed) exponent gives 1 // a**-b, so
    1 and -1 keep their powers and any other base gives 0, 0 as `//` by zero does (NumPy raises; XLA's own
    result there depended on how it compiled the power: `0 ** -1` was -1 for a scalar, 0 in an array)."""
    dt, shape = emit.element_dtype(a.type), emit.shape_of(a)
    zero, one = emit.const(0, dt, shape), emit.const(1, dt, shape)
    base, acc = a, one
    bits = dt.bits - (dt.kind == "int")         # (a signed exponent's sign bit: the negative case below)
    for i in range(bits):
        bit = emit.compare(hlo.and_(b, emit.const(1 << i, dt, shape)), zero, "NE", dt)
        acc = emit.select(bit, hlo.multiply(acc, base), acc)
        if i < bits - 1:
            base = hlo.multiply(base, base)
    if dt.kind == "uint":
        return acc
    minus_one = emit.const(-1, dt, shape)
    odd = emit.compare(hlo.and_(b, one), zero, "NE", dt)
    inverse = emit.select(emit.compare(a, one, "EQ", dt), one,
                          emit.select(emit.compare(a, minus_one, "EQ", dt), emit.select(odd, minus_one, one), zero))
    return emit.select(emit.compare(b, zero, "LT", dt), inverse, acc)


def _fold_power(cx: CallCx, x: Val, y: Val) -> Dim | None:
    """`2**64` of integer literals is the literal 18446744073709551616 (computed in i32 at run time it wrapped
    to 0 unseen), so that where it takes a dtype it is checked like any literal (E0211: `u64(2**200)`; a float
    takes it, `f64(2**200)`). One of more than MAX_POWER_BITS, past every dtype, is not computed: E0211 (it
    was left to run time, in i32, where `2**200` wrapped to 0)."""
    if not (isinstance(x.static, Dim) and isinstance(y.static, Dim) and y.static.is_const):
        return None
    exponent = y.static.value
    if exponent < 0:
        return None
    if not x.static.is_const:           # a shape's power (`n ** 2`): a compile-time integer, as `n * n` is
        return _dim_power(x.static, exponent)
    base = x.static.value
    if abs(base) > 1:
        _refuse_past_max_bits(cx, (abs(base).bit_length() - 1) * exponent,
                              ": write a float (`2.0**5000` is inf)")
    return Dim.const(base ** exponent)


def _dim_power(base: Dim, k: int) -> Dim:
    """`base ** k` by squaring (a Dim too large to expand stays whole: types.py `ProductName`)."""
    acc = Dim.const(1)
    while k:
        if k & 1:
            acc = acc * base
        k >>= 1
        if k:
            base = base * base
    return acc


MAX_POWER_BITS = 1100       # an integer literal computed at compile time, at most (f64 ends at 2**1024)


def _refuse_past_max_bits(cx: CallCx, bits: int, more_help: str = "") -> None:
    """E0211 for an integer literal of `bits` bits (at least) past MAX_POWER_BITS, before Python computes it."""
    if bits > MAX_POWER_BITS:
        cx.error("E0211", "integer literal too large", f"more than {MAX_POWER_BITS} bits",
                 help=f"no dtype holds it (f64's largest is about 2**1024){more_help}")


register("**", params="x, y", table=OPERATORS, display="power", words="power")(_power)
register("pow", params="x, y", family="Elementwise", doc="elementwise x**y (the `**` operator)")(_power)


_COMPARE = {"==": lambda d: d == 0, "!=": lambda d: d != 0, "<": lambda d: d < 0, "<=": lambda d: d <= 0,
            ">": lambda d: d > 0, ">=": lambda d: d >= 0}


def _fold_comparison(op: str, x: Val, y: Val):
    """Comparisons of compile-time integers are compile-time bools (`if K > 2:` chooses a branch
    statically); on shape variables they are decided when the function is specialized."""
    if not (isinstance(x.static, Dim) and isinstance(y.static, Dim)) or x.type.rank or y.type.rank:
        return None
    difference = x.static - y.static
    if difference.is_const:
        return _COMPARE[op](difference.value)
    return DeferredBool()


def comparison(op: str):
    what = f"`{op}`"

    def rule(cx: CallCx, x, y):
        operands = [x, y]
        _require_arrays(cx, operands, what)
        dtype, _, shape = elementwise_type(cx, operands, what)
        static = _fold_comparison(op, x, y)
        if static is not None:
            return Val(ArrayType(BOOL, shape), None, static)
        return cx.value(ArrayType(BOOL, shape),
                        lambda: emit.compare_op(cx.ir(x, dtype, shape), cx.ir(y, dtype, shape), op, dtype))
    return rule


for _op in ("==", "!=", "<", "<=", ">", ">="):
    register(_op, params="x, y", table=OPERATORS, display="compare")(comparison(_op))


def bitwise(op: str, build, bool_only=False):
    what = f"`{op}`"

    def rule(cx: CallCx, x, y):
        operands = [x, y]
        _require_arrays(cx, operands, what)
        dtype, weak, shape = elementwise_type(cx, operands, what)
        if dtype.is_float or (bool_only and not dtype.is_bool):
            kinds = "bool" if bool_only else "bool or integer"
            wrong = [Label(cx.at(i), f"this is {v.type}") for i, v in enumerate(operands)
                     if v.type.dtype.is_float or (bool_only and not v.type.dtype.is_bool)]
            cx.error("E0201", f"`{op}` needs {kinds} operands, found {x.type.dtype} and {y.type.dtype}",
                     f"computed in {dtype}", labels=wrong if len(wrong) < 2 else [],
                     help="compare first (e.g. `x > 0`) to get bools" if bool_only else
                     "use `and`/`or` on comparisons, or cast to an integer dtype")
        return cx.value(ArrayType(dtype, shape, weak), lambda: build(cx.ir(x, dtype, shape), cx.ir(y, dtype, shape)))
    return rule


register("&", params="x, y", table=OPERATORS, display="and")(bitwise("&", hlo.and_))
register("|", params="x, y", table=OPERATORS, display="or")(bitwise("|", hlo.or_))
register("^", params="x, y", table=OPERATORS, display="xor")(bitwise("^", hlo.xor))
register("and", params="x, y", table=OPERATORS, display="and")(bitwise("and", hlo.and_, bool_only=True))
register("or", params="x, y", table=OPERATORS, display="or")(bitwise("or", hlo.or_, bool_only=True))


def shift(op: str):
    """`<<` and `>>` (NumPy's left_shift/right_shift): `>>` is arithmetic on signed and logical on unsigned
    integers; a count >= the bit width, or negative, gives 0 (-1 for `>>` of a negative signed value), as
    jax.numpy (StableHLO's shifts read the count as unsigned)."""
    what = f"`{op}`"

    def rule(cx: CallCx, x, y):
        operands = [x, y]
        _require_arrays(cx, operands, what)
        folded = _fold_shift(cx, op, x, y) if x.type.weak and y.type.weak else None
        dtype, weak, shape = elementwise_type(cx, operands, what, exact=folded is not None)
        if folded is not None:
            return Val(ArrayType(dtype, shape, weak), None, folded)
        if not dtype.is_int:
            wrong = [Label(cx.at(i), f"this is {v.type}") for i, v in enumerate(operands) if not v.type.dtype.is_int]
            cx.error("E0201", f"{what} needs integer operands, found {x.type.dtype} and {y.type.dtype}",
                     f"computed in {dtype}", labels=wrong if len(wrong) < 2 else [],
                     help="cast to an integer dtype first (`i32(x)`); to scale a float by a power of two, "
                          "multiply by `2.0 ** k`")
        name = "shift_left" if op == "<<" else "shift_right_logical" if dtype.kind == "uint" else \
            "shift_right_arithmetic"
        return cx.value(ArrayType(dtype, shape, weak),
                        lambda: emit.same_type(f"stablehlo.{name}", cx.ir(x, dtype, shape), cx.ir(y, dtype, shape)))
    return rule


def _fold_shift(cx: CallCx, op: str, x: Val, y: Val) -> Dim | None:
    """`1 << 40` of integer literals is the literal 2**40, as Python computes it before jnp sees it (in i32 at
    run time it was 0: `x_i64 + (1 << 40)` added 0); checked where it takes a dtype, as `2**40` is."""
    a, b = x.static_int, y.static_int
    if a is None or b is None or b < 0:
        return None
    if op == "<<" and a:
        _refuse_past_max_bits(cx, abs(a).bit_length() + b)
    return Dim.const(a << b if op == "<<" else a >> b)


register("<<", params="x, y", table=OPERATORS, display="left_shift")(shift("<<"))
register(">>", params="x, y", table=OPERATORS, display="right_shift")(shift(">>"))


# ---- unary operators ------------------------------------------------------------------------
@register("unary-", params="x", table=OPERATORS, display="negate", words="negation")
def _negate(cx: CallCx, x):
    _require_arrays(cx, [x], "unary `-`")
    if x.type.dtype.is_bool:
        cx.error("E0201", "unary `-` is not defined on bool", help="use `not x` or `~x`")
    if isinstance(x.static, Dim):
        return Val(x.type, None, -x.static)
    if isinstance(x.static, float):
        return Val(x.type, None, -x.static)
    return cx.value(x.type, lambda: hlo.negate(cx.ir(x)))


@register("unary+", params="x", table=OPERATORS, display="positive")
def _positive(cx: CallCx, x):
    _require_arrays(cx, [x], "unary `+`")
    return x


@register("unary~", params="x", table=OPERATORS, display="not")
def _invert(cx: CallCx, x):
    _require_arrays(cx, [x], "`~`")
    if x.type.dtype.is_float:
        cx.error("E0201", f"`~` needs a bool or integer operand, found {x.type.dtype}", f"this is {x.type}")
    return cx.value(x.type.strong() if x.type.dtype.is_bool else x.type, lambda: hlo.not_(cx.ir(x)))


@register("unarynot", params="x", table=OPERATORS, display="not")
def _not(cx: CallCx, x):
    _require_arrays(cx, [x], "`not`")
    if not x.type.dtype.is_bool:
        cx.error("E0201", f"`not` needs a bool operand, found {x.type.dtype}", f"this is {x.type}",
                 help="compare first, e.g. `not (x > 0)`, or use `~` for bitwise not")
    if isinstance(x.static, (bool, np.bool_)):
        return Val(x.type, None, not x.static)
    return cx.value(x.type, lambda: hlo.not_(cx.ir(x)))


# ---- elementwise math ---------------------------------------------------------------------
def unary_float(op_name: str, fold):
    """Float math of one StableHLO op; `fold` is the same function in Python, for a literal (`_fold_math`)."""
    def rule(cx: CallCx, x):
        x = cx.array(x, "x")
        dtype = float_dtype_for(x.type.dtype)
        t = result_type(x, dtype, x.type.shape, x.type.weak)
        static = _fold_math(fold, x) if x.type.weak else None
        if static is not None:
            return Val(t, None, static)
        return cx.value(t, lambda: emit.same_type(op_name, cx.ir(x, dtype)))
    return rule


_UNARY_FLOAT = {       # name: (StableHLO op, the function in Python's f64, doc line)
    "exp": ("stablehlo.exponential", math.exp, "elementwise e**x"),
    "expm1": ("stablehlo.exponential_minus_one", math.expm1, "elementwise e**x - 1, accurate near 0"),
    "log": ("stablehlo.log", math.log, "elementwise natural logarithm"),
    "log1p": ("stablehlo.log_plus_one", math.log1p, "elementwise log(1 + x), accurate near 0"),
    "sqrt": ("stablehlo.sqrt", math.sqrt, "elementwise square root"),
    "rsqrt": ("stablehlo.rsqrt", lambda v: 1 / math.sqrt(v), "elementwise 1 / sqrt(x)"),
    "cbrt": ("stablehlo.cbrt", np.cbrt, "elementwise cube root"),
    "sin": ("stablehlo.sine", math.sin, "elementwise sine"),
    "cos": ("stablehlo.cosine", math.cos, "elementwise cosine"),
    "tan": ("stablehlo.tan", math.tan, "elementwise tangent"),
    "tanh": ("stablehlo.tanh", math.tanh, "elementwise hyperbolic tangent"),
    "asin": ("chlo.asin", math.asin, "elementwise inverse sine"),
    "acos": ("chlo.acos", math.acos, "elementwise inverse cosine"),
    "atan": ("chlo.atan", math.atan, "elementwise inverse tangent"),
    "sinh": ("chlo.sinh", math.sinh, "elementwise hyperbolic sine"),
    "cosh": ("chlo.cosh", math.cosh, "elementwise hyperbolic cosine"),
    "erf": ("chlo.erf", math.erf, "elementwise error function"),
    "sigmoid": ("stablehlo.logistic", lambda v: 1 / (1 + math.exp(-v)), "elementwise 1 / (1 + e**-x)"),
}
for _name, (_op_name, _in_python, _doc) in _UNARY_FLOAT.items():
    register(_name, family="Elementwise", doc=_doc)(unary_float(_op_name, _in_python))


# ---- float math composed of StableHLO ops (jax.numpy's and jax.nn's formulas, op for op) -----------------
def _c(value, like, dt: DType):
    """A constant of `dt` with the shape of the MLIR value `like` (rounded to `dt` as NumPy rounds)."""
    return emit.const(value, dt, emit.shape_of(like))


def unary_float_composite(build):
    """Float math built of several ops: `build(value, dtype)` on the input converted to its float dtype
    (ints compute in f32, 64-bit ints in f64; the weakness of a literal is kept, as jax.numpy)."""
    def rule(cx: CallCx, x):
        x = cx.array(x, "x")
        dtype = float_dtype_for(x.type.dtype)
        return cx.value(ArrayType(dtype, x.type.shape, x.type.weak), lambda: build(cx.ir(x, dtype), dtype))
    return rule


def _log2(x, dt):           # jnp.log2: log(x) / log(2)
    return hlo.divide(hlo.log(x), _c(np.log(2.0), x, dt))


def _log10(x, dt):          # jnp.log10: log(x) * (1 / log(10))
    return hlo.multiply(hlo.log(x), _c(0.4342944819032518, x, dt))


def _silu(x, dt):           # jax.nn.silu: x * sigmoid(x)
    return hlo.multiply(x, hlo.logistic(x))


def logaddexp_ir(a, b, dt: DType):
    """log(e**a + e**b) as jax.lax.logaddexp: max + log1p(e**-|a - b|), and a + b where a - b is NaN (a NaN,
    or infinities of one sign). Written `min - max` for `-|a - b|` (the same number): the derivative then
    comes from the rules of max and min, which split a tie evenly, so it is 1/2 at a == b as JAX's."""
    high, low = hlo.maximum(a, b), hlo.minimum(a, b)
    delta = hlo.subtract(low, high)
    return hlo.select(emit.compare(delta, delta, "NE", dt), hlo.add(a, b),
                      hlo.add(high, hlo.log_plus_one(hlo.exponential(delta))))


def _softplus(x, dt):       # jax.nn.softplus: logaddexp(x, 0)
    return logaddexp_ir(x, _c(0, x, dt), dt)


register("log2", family="Elementwise", doc="elementwise base-2 logarithm")(unary_float_composite(_log2))
register("log10", family="Elementwise", doc="elementwise base-10 logarithm")(unary_float_composite(_log10))
register("deg2rad", family="Elementwise", doc="elementwise degrees to radians, x * pi / 180")(
    unary_float_composite(lambda x, dt: hlo.multiply(x, _c(np.pi / 180, x, dt))))
register("rad2deg", family="Elementwise", doc="elementwise radians to degrees, x * 180 / pi")(
    unary_float_composite(lambda x, dt: hlo.multiply(x, _c(180 / np.pi, x, dt))))
register("softplus", family="Elementwise", doc="elementwise log(1 + e**x), computed without overflow (jax.nn)")(
    unary_float_composite(_softplus))
register("silu", family="Elementwise", doc="elementwise x * sigmoid(x) (jax.nn.silu, also called swish)")(
    unary_float_composite(_silu))


@register("gelu", params="x, approximate=True", family="Elementwise",
          doc="elementwise GELU as jax.nn.gelu: the tanh approximation by default, approximate=false for erf")
def _gelu(cx: CallCx, x, approximate=True):
    x = cx.array(x, "x")
    approximate = cx.bool_flag(approximate, "approximate")
    dtype = float_dtype_for(x.type.dtype)

    def build():
        v = cx.ir(x, dtype)
        half = _c(0.5, v, dtype)
        if approximate:     # x * 0.5 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))
            cubed = hlo.multiply(hlo.multiply(v, v), v)
            inner = hlo.multiply(_c(np.sqrt(2 / np.pi), v, dtype),
                                 hlo.add(v, hlo.multiply(_c(0.044715, v, dtype), cubed)))
            return hlo.multiply(v, hlo.multiply(half, hlo.add(_c(1, v, dtype), hlo.tanh(inner))))
        # 0.5 * x * erfc(-x * sqrt(1/2)): erfc keeps the far negative tail that 1 + erf(...) would round to 0
        erfc = emit.same_type("chlo.erfc", hlo.multiply(hlo.negate(v), _c(np.sqrt(0.5), v, dtype)))
        return hlo.multiply(hlo.multiply(half, v), erfc)
    return cx.value(ArrayType(dtype, x.type.shape, x.type.weak), build)


@register("square", family="Elementwise", doc="elementwise x * x (integers stay integers; bool gives i32, as jnp)")
def _square(cx: CallCx, x):
    x = cx.array(x, "x")
    t = x.type if not x.type.dtype.is_bool else ArrayType(I32, x.type.shape)

    def build():
        v = cx.ir(x, t.dtype)
        return hlo.multiply(v, v)
    return cx.value(t, build)


def binary_float(name: str, build):
    """Float math of two broadcast operands (promoted as jax.numpy's `promote_args_inexact`)."""
    what = f"`{name}`"

    def rule(cx: CallCx, x, y):
        _require_arrays(cx, [x, y], what)
        dtype, weak, shape = elementwise_type(cx, [x, y], what)
        dtype = float_dtype_for(dtype)
        return cx.value(ArrayType(dtype, shape, weak), lambda: build(cx.ir(x, dtype, shape), cx.ir(y, dtype, shape),
                                                                      dtype))
    return rule


def _hypot(a, b, dt):
    """jnp.hypot: with p = max(|a|, |b|), q = min(|a|, |b|), p * sqrt(1 + (q / p)**2) (0 where p is 0), inf
    where either is inf (even if the other is NaN)."""
    a, b = hlo.abs(a), hlo.abs(b)
    inf = _c(np.inf, a, dt)
    is_inf = hlo.or_(emit.compare(a, inf, "EQ", dt), emit.compare(b, inf, "EQ", dt))
    p, q = hlo.maximum(a, b), hlo.minimum(a, b)
    p_zero = emit.compare(p, _c(0, p, dt), "EQ", dt)
    ratio = hlo.divide(q, hlo.select(p_zero, _c(1, p, dt), p))
    scaled = hlo.multiply(p, hlo.sqrt(hlo.add(_c(1, p, dt), hlo.multiply(ratio, ratio))))
    return hlo.select(is_inf, inf, hlo.select(p_zero, p, scaled))


register("logaddexp", params="x, y", family="Elementwise",
         doc="elementwise log(e**x + e**y), computed without overflow")(binary_float("logaddexp", logaddexp_ir))
register("hypot", params="x, y", family="Elementwise",
         doc="elementwise sqrt(x**2 + y**2), computed without overflow")(binary_float("hypot", _hypot))


def unary_same(build_float, build_int=None, allow_bool=False, fold=None):
    """Ops that keep the dtype; `build_int` None means the op is the identity on integers.
    Builders take (mlir value, dtype); `fold` is the op in Python, for a float literal (`_fold_math`)."""
    def rule(cx: CallCx, x):
        x = cx.array(x, "x")
        dt = x.type.dtype
        if dt.is_bool and not allow_bool:
            cx.error("E0201", "this operation is not defined on bool", f"this is {x.type}", at=0,
                     help="convert with `.astype(i32)` or `.astype(f32)` first")
        if dt.is_float:
            static = _fold_math(fold, x) if fold is not None and x.type.weak else None
            if static is not None:
                return Val(x.type, None, static)
            return cx.value(x.type, lambda: build_float(cx.ir(x), dt))
        if build_int is None:
            return x
        check_literal(cx, x, dt, 0, literals_only=True)     # (as its lowering's `cx.ir` does: in the check too)
        return cx.value(x.type, lambda: build_int(cx.ir(x), dt))
    return rule


def _zero(x, dt: DType):
    return emit.const(0, dt, emit.shape_of(x))


def _sign_int(x, dt: DType):
    if dt.kind == "int":
        return hlo.sign(x)
    return hlo.convert(x.type, emit.compare(x, _zero(x, dt), "NE", dt))


def _trunc(x, dt: DType):
    return hlo.select(emit.compare(x, _zero(x, dt), "LT", dt), hlo.ceil(x), hlo.floor(x))


register("abs",
         family="Elementwise",
         doc="elementwise absolute value |x|")(
    unary_same(lambda x, dt: hlo.abs(x), lambda x, dt: hlo.abs(x) if dt.kind == "int" else x, fold=abs))
register("sign",
         family="Elementwise",
         doc="elementwise sign of x: -1, 0 or 1")(unary_same(lambda x, dt: hlo.sign(x), _sign_int, fold=np.sign))
register("floor",
         family="Elementwise",
         doc="elementwise floor: the largest integer <= x")(unary_same(lambda x, dt: hlo.floor(x), fold=np.floor))
register("ceil",
         family="Elementwise",
         doc="elementwise ceiling: the smallest integer >= x")(unary_same(lambda x, dt: hlo.ceil(x), fold=np.ceil))
_round_half_even = unary_same(lambda x, dt: hlo.round_nearest_even(x), fold=np.round)


@register("round", params="x, decimals=0", family="Elementwise",
          doc="elementwise rounding to `decimals` places (an integer by default), half to even (as jnp.round)")
def _round(cx: CallCx, x, decimals=0):
    places = cx.static_int(decimals, "decimals")
    if not places.is_const:
        cx.error("E0204", f"`decimals` must be a literal or a const, found `{places}`", "symbolic", at="decimals")
    d = places.value
    if d == 0:
        return _round_half_even(cx, x)
    x = cx.array(x, "x")
    dt = x.type.dtype
    if not dt.is_float:
        if dt.is_int and d < 0:         # (NumPy rounds to tens; jnp.round refuses)
            cx.error("E0204", "`round` of an integer with negative `decimals` is not supported, as in jax.numpy",
                     f"this is {x.type}", at="x", help="convert to a float first: `round(f32(x), -1)`")
        return _round_half_even(cx, x)      # integers: unchanged (bool: the error of `round(x)`)
    literal = x.type.weak and x.static is not None      # (rounded in f64, as jnp.round of a Python float with x64)
    if d > math.log10(float(ml_dtypes.finfo(np.float64 if literal else dt.np).max)):
        return x                            # 10**d past the dtype's range: a no-op, as jnp.round's same test
    factor = 10 ** d                        # (as jnp's: an exact int for d > 0, rounded once to the dtype)
    static = _fold_math(lambda v: np.rint(v * float(factor)) / float(factor), x) if literal else None
    if static is not None:
        return Val(x.type, None, static)

    def build():    # jnp.round: round(x * 10**d) / 10**d, f16 through f32
        work = DTYPES["f32"] if dt.name == "f16" else dt
        v = cx.ir(x, work)
        scale = emit.const(factor, work, emit.shape_of(v))
        out = hlo.divide(hlo.round_nearest_even(hlo.multiply(v, scale)), scale)
        return emit.convert(out, work, dt) if work != dt else out
    return cx.value(x.type, build)
register("trunc", family="Elementwise", doc="elementwise rounding toward zero")(unary_same(_trunc, fold=np.trunc))
def _relu(x, dt: DType):
    """max(x, 0) for floats written as `x <= 0 ? 0 : x`: the same values (NaN stays NaN), marked for the
    derivative of `jax.nn.relu`, which its custom_jvp defines: 0 where x > 0 is false, at 0 (`maximum`
    splits the tie: 0.5) and at NaN (the select's would be 1) (compiler/autodiff.py `_select_vjp`)."""
    zero = _zero(x, dt)
    return emit.mark(emit.select(emit.compare(x, zero, "LE", dt), zero, x), abi.RELU)


register("relu",
         family="Elementwise",
         doc="elementwise max(x, 0)")(unary_same(_relu, lambda x, dt: hlo.maximum(x, _zero(x, dt))))


def predicate(build_float, int_value: bool):
    def rule(cx: CallCx, x):
        x = cx.array(x, "x")
        t = ArrayType(BOOL, x.type.shape)
        if not x.type.dtype.is_float:
            return cx.value(t, lambda: emit.const(int_value, BOOL, concrete(x.type.shape)))
        return cx.value(t, lambda: build_float(cx.ir(x), x.type.dtype))
    return rule


def _isnan(x, dt):
    return emit.compare(x, x, "NE", dt)


def _isinf(x, dt):
    return emit.compare(hlo.abs(x), emit.const(np.inf, dt, emit.shape_of(x)), "EQ", dt)


register("isnan", family="Elementwise", doc="elementwise whether x is NaN")(predicate(_isnan, False))
register("isinf", family="Elementwise", doc="elementwise whether x is infinite")(predicate(_isinf, False))
register("isfinite",
         family="Elementwise",
         doc="elementwise whether x is neither infinite nor NaN")(predicate(lambda x, dt: hlo.is_finite(x), True))


@register("where", params="condition, x, y", keys=True, family="Elementwise",
          doc="elementwise x where condition is true, else y")
def _where(cx: CallCx, condition, x, y):
    _require_arrays(cx, [condition, x, y], "`where`")
    if not condition.type.dtype.is_bool:
        cx.error("E0201", f"`where` needs a bool condition, found {condition.type}", "not bool", at=0,
                 help="compare to get a bool array, e.g. `where(x > 0, x, 0)`")
    dtype, weak, shape = elementwise_type(_pair_cx(cx, 1, 2), [x, y], "`where`")
    shape = broadcast_shapes(_pair_cx(cx, 0, 1), condition.type, ArrayType(dtype, shape), "`where`")
    return cx.value(ArrayType(dtype, shape, weak),
                    lambda: hlo.select(cx.ir(condition, BOOL, shape), cx.ir(x, dtype, shape), cx.ir(y, dtype, shape)))


@register("clip", params="x, min=None, max=None, a_min=None, a_max=None", family="Elementwise",
          doc="elementwise x limited to [min, max] (either may be left out; NumPy's a_min/a_max also), as jnp.clip")
def _clip(cx: CallCx, x, min=None, max=None, a_min=None, a_max=None):
    """jnp.clip: `minimum(maximum(x, min), max)`; the bounds by position or as NumPy 2's and jax.numpy's
    `min=`/`max=`, or NumPy 1's `a_min=`/`a_max=` (each bound once, at least one of them)."""
    if len(cx.arg_spans) > 3:
        cx.error("E0103", f"`clip` takes at most 3 positional arguments (x, min, max), {len(cx.arg_spans)} given",
                 "too many arguments", at=3)
    given = {"min": min, "max": max, "a_min": a_min, "a_max": a_max}
    for new, old in (("min", "a_min"), ("max", "a_max")):
        if given[new] is not None and given[old] is not None:
            cx.error("E0103", f"`clip` got both `{new}` and `{old}`, which name the same bound",
                     f"the same bound as `{new}`", at=old, help=f"give the bound once: `{new}=`")
    names = [name for name in ("min", "a_min", "max", "a_max") if given[name] is not None]
    if not names:
        cx.error("E0103", "`clip` needs a bound: `min`, `max` or both", "no bound given",
                 help="e.g. `clip(x, 0.0, 1.0)`, `clip(x, min=0.0)` (NumPy and JAX refuse a clip without one)")
    lo = min if min is not None else a_min
    hi = max if max is not None else a_max
    operands = [x] + [given[name] for name in names]
    _require_arrays(cx, operands, "`clip`")
    spans = CallCx(cx.walk, cx.node, [cx.at("x")] + [cx.at(name) for name in names], cx.kw_spans)
    dtype, weak, shape = elementwise_type(spans, operands, "`clip`")

    def build():
        value = cx.ir(x, dtype, shape)
        if lo is not None:
            value = hlo.maximum(value, cx.ir(lo, dtype, shape))
        if hi is not None:
            value = hlo.minimum(value, cx.ir(hi, dtype, shape))
        return value
    return cx.value(ArrayType(dtype, shape, weak), build)


def _tolerance(cx: CallCx, v, name: str):
    """A tolerance of `isclose`: a Python default or a scalar number (converted to the compared dtype as
    `.astype` converts, as jnp's `convert_element_type`)."""
    if not isinstance(v, float) and (not isinstance(v, Val) or v.type.rank or v.type.dtype.is_bool):
        cx.error("E0204", f"`{name}` must be a scalar number, found {describe(v)}", "not a scalar number", at=name)
    return v


def _tolerance_ir(cx: CallCx, v, dt: DType, shape):
    if isinstance(v, float):
        return emit.const(v, dt, shape)
    value = cx.ir(v, dt) if v.type.weak and v.static is not None else emit.cast(cx.ir(v), v.type.dtype, dt)
    return emit.broadcast(value, shape)


def isclose_rule(cx: CallCx, x, y, rtol, atol, equal_nan) -> Val:
    """jnp.isclose: x == y, or |x - y| <= atol + rtol * |y| where y is finite; NaN is close to NaN only with
    equal_nan. Integers and bools are compared as floats (f32, or f64 for 64-bit ones), as jnp does."""
    _require_arrays(cx, [x, y], "`isclose`")
    dtype, _, shape = elementwise_type(cx, [x, y], "`isclose`")
    dtype = float_dtype_for(dtype)
    rtol, atol = _tolerance(cx, rtol, "rtol"), _tolerance(cx, atol, "atol")
    equal_nan = cx.bool_flag(equal_nan, "equal_nan")

    def build():
        a, b = cx.ir(x, dtype, shape), cx.ir(y, dtype, shape)
        s = concrete(shape)
        bound = hlo.add(_tolerance_ir(cx, atol, dtype, s), hlo.multiply(_tolerance_ir(cx, rtol, dtype, s), hlo.abs(b)))
        in_range = emit.compare(hlo.abs(hlo.subtract(a, b)), bound, "LE", dtype)
        out = hlo.or_(emit.compare(a, b, "EQ", dtype), hlo.and_(hlo.is_finite(b), in_range))
        if equal_nan:
            out = hlo.or_(out, hlo.and_(emit.compare(a, a, "NE", dtype), emit.compare(b, b, "NE", dtype)))
        return out
    return cx.value(ArrayType(BOOL, shape), build)


register("isclose", params="x, y, rtol=1e-05, atol=1e-08, equal_nan=False", family="Elementwise",
         doc="elementwise whether |x - y| <= atol + rtol * |y| (NaNs equal with equal_nan), as jnp.isclose")(
    isclose_rule)


@register("__cond__", params="cond, x, y", keys=True)
def _cond_expr(cx: CallCx, cond, x, y):
    _require_arrays(cx, [cond, x, y], "`if ... else`",  # (a compile-time condition chooses tuples: `_dropped_side`)
                    tuple_help="with a run-time condition, choose each item (`u = a if c else b`), or assign "
                               "them in the branches of an `if` statement")
    if cond.type.rank != 0 or not cond.type.dtype.is_bool:
        cx.error("E0213", f"the condition of `a if c else b` must be a scalar bool, found {cond.type}",
                 f"this is {cond.type}", at=0, help="for elementwise choice use `where(c, a, b)`")
    if x.type.dtype.is_key or y.type.dtype.is_key:      # keys are chosen between, never promoted
        if x.type.strong() != y.type.strong():
            cx.error("E0201", f"`a if c else b` chooses between {x.type} and {y.type}: both must be keys of "
                              f"one shape", "differs", at=2 if x.type.dtype.is_key else 1)
        dtype, weak, shape = x.type.dtype, False, x.type.shape
    else:
        dtype, weak, shape = elementwise_type(_pair_cx(cx, 1, 2), [x, y], "`if ... else`")
    if isinstance(cond.static, (bool, np.bool_)):
        chosen = x if cond.static else y
        static = chosen.static if isinstance(chosen.static, Dim) and not shape else None
        return cx.value(ArrayType(dtype, shape, weak), lambda: cx.ir(chosen, dtype, shape), static)
    return cx.value(ArrayType(dtype, shape, weak),
                    lambda: hlo.select(cx.ir(cond, BOOL, shape), cx.ir(x, dtype, shape), cx.ir(y, dtype, shape)))


@register("<as>", params="x, like", keys=True)
def _as_type_of(cx: CallCx, x, like):
    """x converted and broadcast to the type of `like` (a side of `a if c else b` made the select's type, where
    it is an `if`: check.py FunctionWalk._cond_as_if)."""
    return cx.value(like.type, lambda: cx.ir(x, like.type.dtype, like.type.shape))


# ---- casts -----------------------------------------------------------------------------------
@register(".astype", params="x, dtype", method=True, doc="x converted to dtype")
def _astype(cx: CallCx, x, dtype):
    x = cx.array(x, "x")
    dt = cx.dtype(dtype, "dtype")
    static = None
    if x.type.weak and x.static is not None and not isinstance(x.static, np.ndarray):
        static = x.static_int
    if static is not None and dt.is_int:
        # The constructor does not wrap an integer literal (`u64(2**64)` is not 0): NumPy's and JAX's
        # `uint64(2**64)` raise OverflowError. `.astype` wraps it, as NumPy's `astype` does.
        lo, hi = int_range(dt)
        constructor = getattr(getattr(cx.node, "func", None), "id", None) in DTYPES
        if not lo <= static <= hi and constructor:
            wrapped = wrap_int(static, dt)
            cx.error("E0211", f"literal {static} is out of range for {dt} ({lo}..{hi})", f"does not fit in {dt}",
                     at=0, help=f"`{dt}(...)` does not wrap a literal: write `{dt}({wrapped})` or "
                                f"`({static}).astype({dt})` if the wrapped value is meant")
        if lo <= static <= hi:
            return Val(ArrayType(dt, ()), None, x.static)
    if x.type.weak and x.static is not None:
        # Cast a literal from its full-precision value: `[1e8 + 0.25].astype(f64)` keeps the 0.25. An integer
        # literal beyond i64 (`f64(2**64)`, `bool(2**64)`) goes through f64, where it does not wrap to 0.
        i64_lo, i64_hi = int_range(DTYPES["i64"])
        beyond_i64 = static is not None and not dt.is_int and not i64_lo <= static <= i64_hi
        past_i64 = static is not None and static > i64_hi or getattr(x.static, "dtype", None) == np.uint64
        wide_int = DTYPES["u64" if past_i64 else "i64"]       # (the cast wraps it from there, as NumPy's)
        wide = DTYPES["f64"] if x.type.dtype.is_float or beyond_i64 else wide_int if x.type.dtype.is_int \
            else x.type.dtype
        return cx.value(ArrayType(dt, x.type.shape), lambda: emit.cast(cx.ir(x, wide), wide, dt))
    return cx.value(ArrayType(dt, x.type.shape), lambda: emit.cast(cx.ir(x), x.type.dtype, dt))


@register("bitcast", params="x, dtype",
          family="Casts", doc="x with its bits reinterpreted as dtype (of the same width)")
def _bitcast(cx: CallCx, x, dtype):
    x = cx.array(x, "x")
    dt = cx.dtype(dtype, "dtype")
    if dt.bits != x.type.dtype.bits or dt.is_bool or x.type.dtype.is_bool:
        cx.error("E0201", f"bitcast needs dtypes of the same width: {x.type.dtype} is {x.type.dtype.bits} bits, "
                          f"{dt} is {dt.bits}", f"this is {x.type}", at=0)
    return cx.value(ArrayType(dt, x.type.shape),
                    lambda: hlo.bitcast_convert(emit.tensor_type(concrete(x.type.shape), dt), cx.ir(x)))


# ---- attributes ------------------------------------------------------------------------------
def _int_val(d: Dim) -> Val:
    return Val(ArrayType(I32, (), weak=True), None, d)


@register(".shape", keys=True, doc="the shape of x, a tuple of ints")
def _shape_attr(cx: CallCx, x):
    x = cx.array(x, "x")
    return TupleVal([_int_val(d) for d in x.type.shape])


@register(".ndim", keys=True, doc="the rank of x")
def _ndim_attr(cx: CallCx, x):
    return _int_val(Dim.const(cx.array(x, "x").type.rank))


@register(".size", keys=True, doc="the number of elements of x")
def _size_attr(cx: CallCx, x):
    size = Dim.const(1)
    for d in cx.array(x, "x").type.shape:
        size = size * d
    return _int_val(size)


@register(".dtype", keys=True, doc="the dtype of x")
def _dtype_attr(cx: CallCx, x):
    return DTypeVal(cx.array(x, "x").type.dtype)


# ---- array literals ----------------------------------------------------------------------------
@register("__array__", params="elems")
def array_literal(cx: CallCx, elems: list) -> Val:
    if not elems:
        cx.error("E0204", "empty array literal has no dtype",
                 help="an empty array is `zeros(0, dtype=f32)`; the shape of a scalar (no dimensions) is `()`")
    # a tuple of numbers is a row, as in NumPy: `[(1, 2), (3, 4)]` is an i32[2, 2]
    elems = [array_literal(cx, list(e.items)) if isinstance(e, TupleVal) and e.items
             and all(isinstance(i, Val) for i in e.items) else e for e in elems]
    for i, e in enumerate(elems):
        if not isinstance(e, Val):
            cx.error("E0210", f"array literal elements must be numbers or arrays, found {describe(e)}", at=i)
    shapes = [e.type.shape for e in elems]
    for i, s in enumerate(shapes):
        if s != shapes[0]:
            items = [source_text(cx, cx.at(j)) for j in range(len(elems))]
            help = None         # NumPy's `concatenate([ones((n, 1)), X], axis=1)`: arr's takes a tuple
            if all(items) and any(e.type.rank and _literal_static(e) is None for e in elems):
                help = (f"`[...]` stacks arrays of one shape; to join these along an axis, write "
                        f"`concatenate(({', '.join(items)}), axis=...)` (a tuple)")
            cx.error("E0202", f"array literal is not rectangular: element {i} has shape {shape_str(s)}, "
                              f"element 0 has {shape_str(shapes[0])}", f"shape {shape_str(s)}", at=i, help=help)
    keys = [e.type.dtype.is_key for e in elems]
    if any(keys) and not all(keys):     # (at the element that mixes them; keys alone promote to keys)
        cx.error("E0201", "an array literal cannot mix keys and numbers: keys are not numbers",
                 "a key" if not keys[0] else "a number", at=keys.index(not keys[0]),
                 help="make arrays of keys from keys only (`[k1, k2]`, `split(k)`)")
    dtype, weak = promote([e.type for e in elems])
    literal = not dtype.is_key and all(_literal_static(e) is not None for e in elems)
    for i, e in enumerate(elems):
        if not (weak and literal):               # a literal of literals is checked where it takes its dtype
            check_literal(cx, e, dtype, i)
    shape = (Dim.const(len(elems)),) + tuple(shapes[0])
    if literal and len(shape) > _NUMPY_MAX_RANK:
        cx.error("E0215", f"array literal of rank {len(shape)}: a literal holds at most {_NUMPY_MAX_RANK} "
                          "dimensions (NumPy's limit)", f"rank {len(shape)}", help="nest it less deeply")
    if literal:
        # A literal of numbers is weakly typed like its elements (`[0.1, 0.2]` is f32 alone, f64 next to f64),
        # and keeps full precision until it takes its dtype.
        return Val(ArrayType(dtype, shape, weak), None, _literal_data([_literal_static(e) for e in elems], dtype))
    t = ArrayType(dtype, shape)

    def build():
        inner = concrete(shapes[0])
        parts = [hlo.reshape(emit.tensor_type((1,) + inner, dtype), cx.ir(e, dtype)) for e in elems]
        return hlo.concatenate(parts, 0)
    return cx.value(t, build)


_NUMPY_MAX_RANK = 64


def _literal_data(values: list, dtype: DType) -> np.ndarray:
    """The exact values of a literal of literals. Integers keep every digit: NumPy makes float64 of
    `[2**64 - 1, 1]` (no int64 holds the first, no uint64 a negative), so they go through Python ints into
    the narrowest of int64 / uint64 that holds them all, else stay Python ints for the range check."""
    if dtype.is_float:
        return np.array(values, dtype=np.float64)
    if dtype.is_bool:
        return np.array(values).astype(np.bool_)
    data = np.array(values, dtype=object)
    wide = wide_int_dtype(int(data.min()), int(data.max()))
    return data if wide is None else data.astype(wide.np)


def _literal_static(e: Val):
    s = e.static
    if isinstance(s, Dim):
        return s.value if s.is_const else None
    if isinstance(s, (float, bool, np.bool_, np.ndarray)):
        return s
    return None
