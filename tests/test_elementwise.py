"""Elementwise builtins and operators end to end, against jax.numpy (x64 on) and NumPy."""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import jax.scipy.special
import ml_dtypes
import numpy as np
import pytest
from conftest import FLOATS, arr_batch, assert_close, cached_module, np_dtype, sample, short_name

import arrc
from arrc.compiler.types import DTYPES


def math_dtype(dt: str) -> str:
    """The dtype float math computes in for inputs of dtype `dt` (ints: f32, 64-bit ints: f64)."""
    if DTYPES[dt].is_float:
        return dt
    return "f64" if DTYPES[dt].bits == 64 else "f32"


def unary_module(op: str, dt: str, out: str):
    body = "-x" if op == "negate" else "~x" if op == "invert" else f"{op}(x)"
    return cached_module(f"def f(x: {dt}[n]) -> {out}[n]:\n    return {body}\n")


def binary_module(op: str, dt_x: str, dt_y: str, out: str):
    expr = f"{op}(x, y)" if op.isidentifier() and op not in ("and", "or") else f"x {op} y"
    return cached_module(f"def f(x: {dt_x}[n], y: {dt_y}[n]) -> {out}[n]:\n    return {expr}\n")


def as_jnp(x, dt: str):
    return jnp.asarray(np.asarray(x).astype(np_dtype(dt)))


def jnp_batch(fns: list, args: list) -> list:
    """The jax.numpy oracle for several cases, in one jit (one XLA compile)."""
    return list(jax.jit(lambda *xs: [f(*a) for f, a in zip(fns, _split(xs, args))])(*[a for aa in args for a in aa]))


def _split(flat, like):
    out, i = [], 0
    for aa in like:
        out.append(flat[i:i + len(aa)])
        i += len(aa)
    return out


# ---- unary float math -------------------------------------------------------------------------------
# name -> (jax oracle, input range)
FLOAT_MATH = {
    "exp": (jnp.exp, (-4, 4)), "expm1": (jnp.expm1, (-2, 2)), "log": (jnp.log, (0.05, 8)),
    "log1p": (jnp.log1p, (-0.9, 8)), "sqrt": (jnp.sqrt, (0, 9)), "rsqrt": (jax.lax.rsqrt, (0.1, 9)),
    "cbrt": (jnp.cbrt, (-8, 8)), "sin": (jnp.sin, (-4, 4)), "cos": (jnp.cos, (-4, 4)), "tan": (jnp.tan, (-1.3, 1.3)),
    "asin": (jnp.arcsin, (-1, 1)), "acos": (jnp.arccos, (-1, 1)), "atan": (jnp.arctan, (-5, 5)),
    "sinh": (jnp.sinh, (-3, 3)), "cosh": (jnp.cosh, (-3, 3)), "tanh": (jnp.tanh, (-3, 3)),
    "erf": (jax.scipy.special.erf, (-2.5, 2.5)), "sigmoid": (jax.nn.sigmoid, (-6, 6)),
}
SPECIALS = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1.0, -1.0])


FLOAT_MATH_DTYPES = FLOATS + ["i32", "i64", "u8", "bool"]


@functools.lru_cache(maxsize=None)
def float_math_results(dt: str) -> dict:
    out = math_dtype(dt)
    inputs = {}
    for op, (_, (lo, hi)) in FLOAT_MATH.items():
        if DTYPES[dt].is_float:
            x = np.concatenate([sample(dt, (16,), lo, hi).astype(np.float64), SPECIALS]).astype(np_dtype(dt))
        elif dt == "bool":
            x = np.array([True, False, True])
        else:
            x = np.clip(np.arange(-3, 9), max(lo, np.iinfo(np_dtype(dt)).min), hi).astype(np_dtype(dt))
        inputs[op] = x
    got = arr_batch([(f"{op}({{0}})", [(dt, inputs[op])], out) for op in FLOAT_MATH])
    expected = jnp_batch([FLOAT_MATH[op][0] for op in FLOAT_MATH], [[as_jnp(inputs[op], out)] for op in FLOAT_MATH])
    return {op: (g, e) for op, g, e in zip(FLOAT_MATH, got, expected)}


@pytest.mark.parametrize("dt", FLOAT_MATH_DTYPES)
@pytest.mark.parametrize("op", list(FLOAT_MATH))
def test_float_math(op, dt):
    out = math_dtype(dt)
    got, expected = float_math_results(dt)[op]
    assert short_name(got.dtype) == out
    assert_close(got, expected, out)


# ---- unary ops that keep the dtype -------------------------------------------------------------------
SAME = {
    "abs": jnp.abs, "sign": jnp.sign, "floor": jnp.floor, "ceil": jnp.ceil, "round": jnp.round, "trunc": jnp.trunc,
    "relu": jax.nn.relu, "negate": jnp.negative,
}
INT_EDGES = {dt: np.array([np.iinfo(np_dtype(dt)).min, np.iinfo(np_dtype(dt)).max, 0, 1, 2, 7],
                          dtype=np_dtype(dt)) for dt in ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"]}


SAME_DTYPES = FLOATS + ["i8", "i32", "i64", "u8", "u32"]


@functools.lru_cache(maxsize=None)
def same_results(dt: str) -> dict:
    if DTYPES[dt].is_float:
        x = np.concatenate([sample(dt, (12,), -4, 4).astype(np.float64),
                            [0.5, 1.5, 2.5, -0.5, -1.5, -2.5], SPECIALS]).astype(np_dtype(dt))
    else:
        x = np.concatenate([sample(dt, (8,)), INT_EDGES[dt]]).astype(np_dtype(dt))
    template = {"negate": "-{0}"}
    got = arr_batch([(template.get(op, f"{op}({{0}})"), [(dt, x)], dt) for op in SAME])
    expected = jnp_batch(list(SAME.values()), [[jnp.asarray(x)] for _ in SAME])
    return {op: (g, e) for op, g, e in zip(SAME, got, expected)}


@pytest.mark.parametrize("dt", SAME_DTYPES)
@pytest.mark.parametrize("op", list(SAME))
def test_dtype_preserving_ops(op, dt):
    got, expected = same_results(dt)[op]
    assert short_name(got.dtype) == dt
    assert_close(got, expected, dt)


def test_round_is_half_to_even():
    mod = unary_module("round", "f32", "f32")
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 3.5, 1e7 + 0.5], np.float32)
    np.testing.assert_array_equal(np.asarray(mod.f(x)), np.round(x))


@pytest.mark.parametrize("dt", ["f32", "f64", "f16", "bf16"])
def test_round_to_decimals_matches_jnp(dt):
    # round(x, d) / x.round(d): jnp.round's round(x * 10**d) / 10**d (f16 through f32, a no-op past the
    # dtype's precision); integers unchanged, negative places on integers an error as in jnp.
    x = np.concatenate([sample(dt, (40,), -300, 300), [0.125, 2.675, -2.5, 0.05, 1234.5678, np.nan, -np.inf]]
                       ).astype(np_dtype(dt))
    mod = cached_module(f"def f(x: {dt}[n]) -> ({dt}[n], {dt}[n], {dt}[n], {dt}[n]):\n"
                        f"    return round(x, 2), x.round(1), round(x, decimals=-1), round(x, 400)\n")
    for d, got in zip((2, 1, -1, 400), mod.f(x)):
        want = np.asarray(jax.jit(lambda v: jnp.round(v, d))(x))
        assert np.asarray(got).dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got, np.float64), want.astype(np.float64))   # (bf16 NaNs too)
    ints = cached_module("def f(x: i32[n]) -> i32[n]:\n    return round(x, 2)\n")
    np.testing.assert_array_equal(ints.f(np.array([15, -25], np.int32)), [15, -25])
    with pytest.raises(arrc.CompileError, match="E0204"):
        arrc.loads("def f(x: i32[n]) -> i32[n]:\n    return round(x, -1)\n")


@pytest.mark.parametrize("op", ["abs", "sign", "floor", "relu", "negate"])
def test_bool_arithmetic_is_an_error(op):
    with pytest.raises(arrc.CompileError) as info:
        unary_module(op, "bool", "bool")
    assert info.value.diagnostics[0].code == "E0201"


@pytest.mark.parametrize("dt", ["i8", "i32", "u8", "u64", "bool"])
def test_invert(dt):
    mod = unary_module("invert", dt, dt)
    x = np.array([True, False]) if dt == "bool" else INT_EDGES.get(dt, sample(dt))
    assert_close(mod.f(x), np.invert(x), dt)


# ---- predicates ---------------------------------------------------------------------------------------
PREDICATES = {"isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite}


@functools.lru_cache(maxsize=None)
def predicate_results(dt: str) -> dict:
    if DTYPES[dt].is_float:
        x = np.concatenate([SPECIALS, [65504.0, -3.5]]).astype(np_dtype(dt))
    else:
        x = np.array([0, 1, 1]).astype(np_dtype(dt))
    got = arr_batch([(f"{op}({{0}})", [(dt, x)], "bool") for op in PREDICATES])
    return {op: (g, PREDICATES[op](x.astype(np.float64))) for op, g in zip(PREDICATES, got)}


@pytest.mark.parametrize("dt", FLOATS + ["i32", "u8", "bool"])
@pytest.mark.parametrize("op", list(PREDICATES))
def test_predicates(op, dt):
    got, expected = predicate_results(dt)[op]
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(np.asarray(got), expected)


# ---- binary arithmetic -----------------------------------------------------------------------------------
ARITH = {
    "+": jnp.add, "-": jnp.subtract, "*": jnp.multiply, "maximum": jnp.maximum, "minimum": jnp.minimum,
    "**": jnp.power, "pow": jnp.power,
}
BINARY_DTYPES = FLOATS + ["i8", "i16", "i32", "i64", "u8", "u32", "u64"]


def _pair(dt, op, seed=0):
    x, y = sample(dt, (24,), -4, 4, seed=seed), sample(dt, (24,), -4, 4, seed=seed + 1)
    if op in ("**", "pow"):
        if DTYPES[dt].is_float:
            x = np.abs(x.astype(np.float64)).astype(x.dtype)
        else:
            y = (np.abs(y.astype(np.int64)) % 4).astype(y.dtype)      # non-negative integer exponents
            x = (x.astype(np.int64) % 6).astype(x.dtype)
    return x, y


def _template(op: str) -> str:
    return f"{op}({{0}}, {{1}})" if op.isidentifier() and op not in ("and", "or") else f"{{0}} {op} {{1}}"


@functools.lru_cache(maxsize=None)
def arith_results(dt: str) -> dict:
    pairs = {op: _pair(dt, op) for op in ARITH}
    got = arr_batch([(_template(op), [(dt, pairs[op][0]), (dt, pairs[op][1])], dt) for op in ARITH])
    expected = jnp_batch(list(ARITH.values()), [[jnp.asarray(v) for v in pairs[op]] for op in ARITH])
    return {op: (g, e) for op, g, e in zip(ARITH, got, expected)}


@pytest.mark.parametrize("dt", BINARY_DTYPES)
@pytest.mark.parametrize("op", list(ARITH))
def test_arithmetic(op, dt):
    got, expected = arith_results(dt)[op]
    assert short_name(got.dtype) == dt
    assert_close(got, expected, dt)


@pytest.mark.parametrize("dt", ["i8", "i32", "i64", "u8", "u32"])
@pytest.mark.parametrize("op", ["+", "-", "*"])
def test_integer_overflow_wraps(op, dt):
    info = np.iinfo(np_dtype(dt))
    x = np.array([info.max, info.min, info.max, info.min, 3], np_dtype(dt))
    y = np.array([1, 1, 2, info.max, 0], np_dtype(dt))
    with np.errstate(all="ignore"):
        expected = {"+": np.add, "-": np.subtract, "*": np.multiply}[op](x, y)
    np.testing.assert_array_equal(np.asarray(binary_module(op, dt, dt, dt).f(x, y)), expected)


@pytest.mark.parametrize("dt", FLOATS)
def test_maximum_minimum_propagate_nan(dt):
    x = np.array([np.nan, 1.0, np.nan, -np.inf, 0.0]).astype(np_dtype(dt))
    y = np.array([1.0, np.nan, np.nan, np.inf, -0.0]).astype(np_dtype(dt))
    for op, oracle in (("maximum", jnp.maximum), ("minimum", jnp.minimum)):
        got = binary_module(op, dt, dt, dt).f(x, y)
        assert_close(got, oracle(jnp.asarray(x), jnp.asarray(y)), dt)


@pytest.mark.parametrize("dt", FLOATS)
def test_float_division_and_atan2(dt):
    x = np.concatenate([sample(dt, (12,), -4, 4).astype(np.float64), [1.0, -1.0, 0.0, np.inf]]).astype(np_dtype(dt))
    y = np.concatenate([sample(dt, (12,), -4, 4, seed=3).astype(np.float64), [0.0, 0.0, 0.0, 2.0]]
                       ).astype(np_dtype(dt))
    with np.errstate(all="ignore"):
        assert_close(binary_module("/", dt, dt, dt).f(x, y), jnp.divide(jnp.asarray(x), jnp.asarray(y)), dt)
        assert_close(binary_module("atan2", dt, dt, dt).f(x, y), jnp.arctan2(jnp.asarray(x), jnp.asarray(y)), dt)


@pytest.mark.parametrize("dt", ["i8", "i32", "i64", "u8", "u32", "u64", "bool"])
def test_integer_true_division_is_float(dt):
    out = "f64" if DTYPES[dt].bits == 64 else "f32"
    mod = binary_module("/", dt, dt, out)
    if dt == "bool":
        x, y = np.array([True, False, True]), np.array([True, True, False])
    else:
        x = np.array([7, 1, 0, 5, np.iinfo(np_dtype(dt)).max], np_dtype(dt))
        y = np.array([2, 3, 0, 0, 1]).astype(np_dtype(dt))
    got = mod.f(x, y)
    assert short_name(got.dtype) == out
    with np.errstate(all="ignore"):
        expected = x.astype(np.float64) / y.astype(np.float64)
    assert_close(got, expected.astype(np_dtype(out)), out)


# ---- floor division and modulo ----------------------------------------------------------------------------
def _int_grid(dt):
    lo = 0 if DTYPES[dt].kind == "uint" else -7
    a, b = np.meshgrid(np.arange(lo, 8), np.arange(-3 if lo else 0, 4))
    info, d = np.iinfo(np_dtype(dt)), np_dtype(dt)
    a = np.concatenate([a.ravel().astype(d), np.array([info.min, info.max, info.min, info.max, info.min], d)])
    b = np.concatenate([b.ravel().astype(d), np.array([-1 if lo else 1, -1 if lo else 1, 2, 2, 0], d)])
    return a, b


@functools.lru_cache(maxsize=None)
def int_division_results(dt: str) -> dict:
    a, b = _int_grid(dt)
    got = arr_batch([(f"{{0}} {op} {{1}}", [(dt, a), (dt, b)], dt) for op in ("//", "%")])
    with np.errstate(all="ignore"):
        return {"//": (got[0], np.floor_divide(a, b)), "%": (got[1], np.remainder(a, b))}


@pytest.mark.parametrize("dt", ["i8", "i16", "i32", "i64", "u8", "u32", "u64"])
@pytest.mark.parametrize("op", ["//", "%"])
def test_integer_floor_division_and_modulo(op, dt):
    """Floor semantics (sign of the divisor for %), division by zero gives 0 (NumPy), INT_MIN // -1 wraps."""
    got, expected = int_division_results(dt)[op]
    assert short_name(got.dtype) == dt
    np.testing.assert_array_equal(np.asarray(got), expected)


def test_integer_division_examples():
    mod = binary_module("//", "i32", "i32", "i32")
    rem = binary_module("%", "i32", "i32", "i32")
    a = np.array([7, -7, 7, -7, 5, 0], np.int32)
    b = np.array([2, 2, -2, -2, 0, 0], np.int32)
    np.testing.assert_array_equal(np.asarray(mod.f(a, b)), [3, -4, -4, 3, 0, 0])
    np.testing.assert_array_equal(np.asarray(rem.f(a, b)), [1, 1, -1, -1, 0, 0])


@pytest.mark.parametrize("dt", ["i8", "i32", "i64"])
def test_integer_power_of_a_negative_exponent_is_one_floor_divided_by_the_power(dt):
    """`a ** -b` is `1 // a**b`: 1 and -1 keep their powers, any other base gives 0 (0 as `//` by zero), for
    a scalar as for an array (XLA:CPU's own power gave `0 ** -1` -1 for a scalar and 0 in an array; NumPy
    raises there). A non-negative exponent is jax.numpy's power."""
    def oracle(a, b):
        return a ** b if b >= 0 else 1 if a == 1 else (-1) ** (-b) if a == -1 else 0
    bases, exps = np.array([0, 1, -1, 2, -2, 3, 5]), np.array([-3, -2, -1, 0, 1, 2, 3])
    a, b = (v.ravel().astype(np_dtype(dt)) for v in np.meshgrid(bases, exps))
    expected = [oracle(int(p), int(q)) for p, q in zip(a, b)]
    np.testing.assert_array_equal(np.asarray(binary_module("**", dt, dt, dt).f(a, b)), expected)
    scalar = arrc.loads(f"def f(x: {dt}, y: {dt}) -> {dt}:\n    return x ** y\n"
                        "def g() -> i32:\n    return 0 ** -1 + 2 ** -1\n")
    assert [int(scalar.f(p, q)) for p, q in zip(a, b)] == expected
    assert int(scalar.g()) == 0
    nonneg = b >= 0
    np.testing.assert_array_equal(expected, np.where(nonneg, jnp.power(a, np.where(nonneg, b, 0)), expected))


@pytest.mark.parametrize("dt", ["i8", "i32", "i64", "u8", "u32", "u64"])
def test_integer_power_is_numpys_exact_value_for_every_exponent(dt):
    """Every bit of the exponent counts, as in NumPy (wrapping in the dtype): XLA's `stablehlo.power` and
    jnp's loop read 6 bits, so `0 ** 64` was 1, i64 `x ** 64` 1 for every x, u8 `3 ** 128` 0. A literal
    exponent is jax.lax.integer_pow's binary exponentiation (what jnp.power does for one)."""
    info = np.iinfo(np_dtype(dt))
    bases = np.array([0, 1, 2, 3, 5, 7, info.max, info.min + (info.min < 0)], np_dtype(dt))
    exps = np.array([e for e in (0, 1, 2, 63, 64, 65, 128, 200, info.max - 1, info.max, info.max // 2 + 1)
                     if e <= info.max], np_dtype(dt))
    a, b = (v.ravel() for v in np.meshgrid(bases, exps))
    np.testing.assert_array_equal(np.asarray(binary_module("**", dt, dt, dt).f(a, b)), np.power(a, b))
    literal = arrc.loads(f"def f(x: {dt}[{len(bases)}]) -> ({dt}[{len(bases)}], {dt}[{len(bases)}]):\n"
                         f"    return x ** 64, x ** {info.max}\n")
    for got, k in zip(literal.f(bases), (64, int(info.max))):
        np.testing.assert_array_equal(np.asarray(got), np.power(bases, np_dtype(dt).type(k)))


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("op", ["//", "%"])
def test_float_floor_division_and_modulo(op, dt):
    a = np.array([7.5, -7.5, 7.5, -7.5, 1.0, -1.0, 0.0, 3.0, 6.0, 2.0, -3.0]).astype(np_dtype(dt))
    b = np.array([2.0, 2.0, -2.0, -2.0, 0.0, 0.0, 0.0, np.inf, 3.0, -np.inf, np.inf]).astype(np_dtype(dt))
    oracle = jnp.floor_divide if op == "//" else jnp.remainder
    got = binary_module(op, dt, dt, dt).f(a, b)
    assert_close(got, oracle(jnp.asarray(a), jnp.asarray(b)), dt)


@pytest.mark.parametrize("dt", ["f32", "f64"])
def test_float_modulo_of_infinity_is_nan(dt):
    a = np.array([np.inf, -np.inf, np.nan]).astype(np_dtype(dt))
    b = np.array([2.0, 3.0, 2.0]).astype(np_dtype(dt))
    got = binary_module("%", dt, dt, dt).f(a, b)
    assert np.isnan(np.asarray(got)).all()


@pytest.mark.parametrize("dt", ["f16", "f32", "f64"])
def test_float_floor_division_of_infinity(dt):
    a = np.array([np.inf, -np.inf, np.inf]).astype(np_dtype(dt))
    b = np.array([2.0, 2.0, -3.0]).astype(np_dtype(dt))
    got = binary_module("//", dt, dt, dt).f(a, b)
    with np.errstate(all="ignore"):
        expected = np.floor_divide(a, b)
    assert_close(got, expected, dt)
    assert_close(got, jnp.floor_divide(jnp.asarray(a), jnp.asarray(b)), dt)


# ---- comparisons, bitwise, logical ---------------------------------------------------------------------
COMPARE = {"==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater,
           ">=": np.greater_equal}


@functools.lru_cache(maxsize=None)
def compare_results(dt: str) -> dict:
    if DTYPES[dt].is_float:
        x = np.array([1.0, 2.0, np.nan, np.nan, -0.0, np.inf, 3.0]).astype(np_dtype(dt))
        y = np.array([1.0, 1.0, 1.0, np.nan, 0.0, np.inf, 4.0]).astype(np_dtype(dt))
    elif dt == "bool":
        x, y = np.array([True, True, False, False]), np.array([True, False, True, False])
    else:
        info = np.iinfo(np_dtype(dt))
        x = np.array([info.min, info.max, 0, 5, 3], np_dtype(dt))
        y = np.array([info.max, info.min, 0, 3, 5], np_dtype(dt))
    got = arr_batch([(f"{{0}} {op} {{1}}", [(dt, x), (dt, y)], "bool") for op in COMPARE])
    with np.errstate(all="ignore"):
        return {op: (g, COMPARE[op](x, y)) for op, g in zip(COMPARE, got)}


@pytest.mark.parametrize("dt", ["f16", "bf16", "f32", "f64", "i8", "i64", "u8", "u64", "bool"])
@pytest.mark.parametrize("op", list(COMPARE))
def test_comparisons(op, dt):
    got, expected = compare_results(dt)[op]
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(np.asarray(got), expected)


def test_mixed_dtype_comparison_promotes():
    mod = binary_module("<", "i64", "f64", "bool")
    x = np.array([2 ** 53 + 1, 3], np.int64)
    y = np.array([2.0 ** 53, 3.5])
    np.testing.assert_array_equal(np.asarray(mod.f(x, y)), np.asarray(jnp.asarray(x) < jnp.asarray(y)))


BITWISE = {"&": np.bitwise_and, "|": np.bitwise_or, "^": np.bitwise_xor}


@functools.lru_cache(maxsize=None)
def bitwise_results(dt: str) -> dict:
    if dt == "bool":
        x, y = np.array([True, True, False, False]), np.array([True, False, True, False])
    else:
        x, y = INT_EDGES[dt], INT_EDGES[dt][::-1].copy()
    got = arr_batch([(f"{{0}} {op} {{1}}", [(dt, x), (dt, y)], dt) for op in BITWISE])
    return {op: (g, BITWISE[op](x, y)) for op, g in zip(BITWISE, got)}


@pytest.mark.parametrize("dt", ["bool", "i8", "i32", "i64", "u8", "u32", "u64"])
@pytest.mark.parametrize("op", list(BITWISE))
def test_bitwise(op, dt):
    got, expected = bitwise_results(dt)[op]
    np.testing.assert_array_equal(np.asarray(got), expected)


@pytest.mark.parametrize("op, oracle", [("and", np.logical_and), ("or", np.logical_or)])
def test_logical(op, oracle):
    x, y = np.array([True, True, False, False]), np.array([True, False, True, False])
    np.testing.assert_array_equal(np.asarray(binary_module(op, "bool", "bool", "bool").f(x, y)), oracle(x, y))
    mod = cached_module("def f(x: bool[n]) -> bool[n]:\n    return not x\n")
    np.testing.assert_array_equal(np.asarray(mod.f(x)), ~x)


# ---- where, clip, conditional expression ---------------------------------------------------------------
@pytest.mark.parametrize("dt", ["f16", "bf16", "f32", "f64", "i32", "u8", "bool"])
def test_where(dt):
    mod = cached_module(f"def f(c: bool[n], x: {dt}[n], y: {dt}[n]) -> {dt}[n]:\n    return where(c, x, y)\n")
    c = np.array([True, False, True, False, True])
    x, y = sample(dt, (5,)), sample(dt, (5,), seed=4)
    assert_close(mod.f(c, x, y), jnp.where(c, x, y), dt)


def test_where_broadcasts_scalars_and_keeps_dtype():
    mod = cached_module("def f(x: f16[n, m]) -> f16[n, m]:\n    return where(x > 0, x, 0)\n\n"
                        "def g(x: f32[n, m], c: bool[m]) -> f32[n, m]:\n    return where(c, x, -1.0)\n")
    x = sample("f16", (2, 3))
    got = mod.f(x)
    assert got.dtype == np.float16
    assert_close(got, jnp.where(x > 0, x, 0), "f16")
    x32, c = sample("f32", (2, 3)), np.array([True, False, True])
    assert_close(mod.g(x32, c), jnp.where(c, x32, -1.0), "f32")


@pytest.mark.parametrize("dt", ["f16", "f32", "f64", "i8", "i32", "u8"])
def test_clip(dt):
    mod = cached_module(f"def f(x: {dt}[n]) -> {dt}[n]:\n    return clip(x, 1, 5)\n")
    x = sample(dt, (16,), -8, 8)
    assert_close(mod.f(x), jnp.clip(jnp.asarray(x), 1, 5), dt)


def test_clip_with_array_bounds():
    mod = cached_module("def f(x: f32[n], lo: f32[n], hi: f32) -> f32[n]:\n    return clip(x, lo, hi)\n")
    x, lo = sample("f32", (9,)), sample("f32", (9,), -1, 0, seed=7)
    assert_close(mod.f(x, lo, np.float32(0.5)), jnp.clip(x, lo, np.float32(0.5)), "f32")


def test_conditional_expression():
    mod = cached_module("def f(x: f32[n], c: bool) -> f32[n]:\n    return x * 2.0 if c else -x\n\n"
                        "def g(x: f32[n]) -> f32:\n    return 1.0 if sum(x) > 0 else 2.0\n")
    x = sample("f32", (4,))
    assert_close(mod.f(x, True), x * 2, "f32")
    assert_close(mod.f(x, False), -x, "f32")
    assert float(mod.g(np.ones(3, np.float32))) == 1.0
    assert float(mod.g(-np.ones(3, np.float32))) == 2.0


# ---- literals, constants and composite expressions ------------------------------------------------------
def test_named_constants_and_array_literals():
    mod = cached_module(
        "const SCALE: f64 = 0.5\n"
        "const N: i32 = 3\n\n"
        "def f() -> f32[5]:\n    return [1.0, 2.0, nan, inf, -inf]\n\n"
        "def g(x: f64[n]) -> f64[n]:\n    return x * SCALE + N\n\n"
        "def h() -> i32[2, 2]:\n    return [[1, 2], [3, 4]]\n\n"
        "def k(x: f32[n]) -> f32[2, n]:\n    return [x, -x]\n\n"
        "def m() -> bool[2]:\n    return [true, false]\n")
    np.testing.assert_array_equal(np.asarray(mod.f()), np.array([1, 2, np.nan, np.inf, -np.inf], np.float32))
    x = np.array([1.0, 2.0])
    assert_close(mod.g(x), x * 0.5 + 3, "f64")
    np.testing.assert_array_equal(np.asarray(mod.h()), [[1, 2], [3, 4]])
    xk = sample("f32", (3,))
    assert_close(mod.k(xk), np.stack([xk, -xk]), "f32")
    np.testing.assert_array_equal(np.asarray(mod.m()), [True, False])


def test_expression_matches_jax():
    src = ("def f(x: f32[n], y: f32[n]) -> f32[n]:\n"
           "    a = x * y + 2 ** -x - x / (1 + y * y)\n"
           "    b = -x ** 2\n"
           "    a += b\n"
           "    a *= 0.5\n"
           "    return maximum(a, -1.5) % 3\n")
    mod = cached_module(src)
    x, y = sample("f32", (32,)), sample("f32", (32,), seed=9)
    jx, jy = jnp.asarray(x), jnp.asarray(y)
    a = jx * jy + 2 ** -jx - jx / (1 + jy * jy)
    a = (a + (-jx ** 2)) * 0.5
    assert_close(mod.f(x, y), jnp.remainder(jnp.maximum(a, -1.5), 3), "f32", rtol=1e-5, atol=1e-5)


def test_unsigned_negation_wraps():
    mod = unary_module("negate", "u8", "u8")
    x = np.array([0, 1, 255, 128], np.uint8)
    np.testing.assert_array_equal(np.asarray(mod.f(x)), (-x.astype(np.int64)) % 256)


def test_bf16_values_are_bf16():
    mod = binary_module("*", "bf16", "bf16", "bf16")
    x = np.array([1.0, 3.0, 1 / 3], ml_dtypes.bfloat16)
    got = mod.f(x, x)
    assert got.dtype == ml_dtypes.bfloat16
    assert_close(got, (x.astype(np.float32) ** 2).astype(ml_dtypes.bfloat16), "bf16")


# ---- static indexing and slicing (values; the emitted ops are in test_stablehlo.py) ----------------------
INDEX_EXPRS = ["x[2]", "x[-1]", "x[1:3]", "x[:, 0]", "x[::2]", "x[::-1]", "x[..., 0]", "x[1:-1, ::-2]",
               "x[-3:, 1]", "x[-1, -1]", "x[3:1]", "x[:, 10:]", "x[::-1][1:3]", "x[1:, ...]", "x[:, -2::-2]",
               "x[-10:2]", "x.T[1]", "x[0:4:3, 4:0:-2]"]


@functools.lru_cache(maxsize=None)
def index_results():
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    shapes = [eval(e, {"x": x}).shape for e in INDEX_EXPRS]          # noqa: S307  (NumPy is the oracle)
    outs = ", ".join(f"f32[{', '.join(map(str, s))}]" if s else "f32" for s in shapes)
    mod = cached_module(f"def f(x: f32[4, 5]) -> ({outs}):\n    return {', '.join(INDEX_EXPRS)}\n")
    return x, mod.f(x)


@pytest.mark.parametrize("i, expr", list(enumerate(INDEX_EXPRS)), ids=INDEX_EXPRS)
def test_static_indexing_matches_numpy(i, expr):
    x, got = index_results()
    expected = eval(expr, {"x": x})                                    # noqa: S307
    assert got[i].shape == expected.shape
    np.testing.assert_array_equal(np.asarray(got[i]), expected)


def test_indexing_with_shape_variables():
    mod = cached_module("def f(x: f32[n]) -> (f32, f32[n - 1], f32[n]):\n    return x[n - 1], x[1:], x[::-1]\n")
    x = np.arange(6, dtype=np.float32)
    last, tail, rev = mod.f(x)
    assert float(last) == 5.0
    np.testing.assert_array_equal(np.asarray(tail), x[1:])
    np.testing.assert_array_equal(np.asarray(rev), x[::-1])


@pytest.mark.parametrize("dt", ["f64", "f32", "f16"])
def test_round_of_a_literal_to_decimals_is_computed_before_it_takes_a_dtype(dt):
    # round(2.675, 2) is jnp.round of a Python float (f64 with x64), then taken by the result's dtype; it
    # was computed in the literal's f32 (2.680000066757202 for f64, where jnp gives 2.68)
    literals = [(2.675, 2), (0.1 + 1e-9, 9), (1234.5678, -2), (-0.00015, 4), (1e300, -299)]
    mod = cached_module(f"def f() -> ({', '.join([dt] * len(literals))}):\n"
                        f"    return {', '.join(f'round({v!r}, {d})' for v, d in literals)}\n")
    want = [np.asarray(jnp.round(jnp.float64(v), d)).astype(np_dtype(dt)) for v, d in literals]
    np.testing.assert_array_equal(np.array(mod.f()), np.array(want))


def test_round_to_an_enormous_number_of_decimals_is_the_value_not_a_hang():
    """`round(x, 2147483647)`: the scale 10**d was computed before the test that makes such a round a no-op
    (as jnp's), a 2-billion-digit integer (the fuzz campaign's wrong-kind arguments hung CI there)."""
    mod = arrc.loads("def f(x: f32[2]) -> (f32[2], f64, f32[2]):\n"
                     "    return round(x, 2147483647), round(2.5, 2147483647), round(x, -2147483647)\n")
    x = np.array([1.25, -3.5], np.float32)
    a, b, c = mod.f(x)
    np.testing.assert_array_equal(np.asarray(a), x)
    assert float(b) == 2.5
    np.testing.assert_array_equal(np.asarray(c), np.asarray(jax.jit(lambda v: jnp.round(v, -2147483647))(x)))
