"""Type promotion: JAX's lattice (jnp.promote_types, x64 on), weak literals with arr's 32-bit defaults,
literal range checks (E0211) and the lossy-promotion warning (W0001)."""
from __future__ import annotations

import itertools

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import ALL_DTYPES, cached_module, np_dtype, sample, short_name

import arrc
from arrc.compiler.diagnostics import CompileError
from arrc.compiler.types import DTYPES, ArrayType, lossy_promotion, promote

PAIRS = list(itertools.product(ALL_DTYPES, ALL_DTYPES))


def jax_promote(a: str, b: str) -> str:
    return short_name(jnp.promote_types(np_dtype(a), np_dtype(b)))


# ---- the table itself ---------------------------------------------------------------------------------
@pytest.mark.parametrize("a, b", PAIRS)
def test_promote_matches_jax(a, b):
    dtype, weak = promote([ArrayType(DTYPES[a]), ArrayType(DTYPES[b])])
    assert dtype.name == jax_promote(a, b)
    assert weak is False


def test_promotion_is_symmetric_and_n_ary_matches_result_type():
    # Not associative in general (JAX's neither): i64 + u64 is f64, but result_type(i64, u64, f16) is f16.
    for a, b, c in itertools.product(ALL_DTYPES, repeat=3):
        t = [ArrayType(DTYPES[x]) for x in (a, b, c)]
        assert promote(t[:2])[0] == promote(t[1::-1])[0]
        expected = short_name(jnp.result_type(np_dtype(a), np_dtype(b), np_dtype(c)))
        assert promote(t)[0].name == expected, (a, b, c)


# ---- the same, through the compiler: `x + y` has the promoted type (checked at definition) ------------------
def _add_src(a: str, b: str, out: str) -> str:
    return f"def f(x: {a}[n], y: {b}[n]) -> {out}[n]:\n    return x + y\n"


@pytest.mark.parametrize("a, b", [p for p in PAIRS if "bool" not in p])
def test_binary_operator_result_dtype(a, b):
    out = jax_promote(a, b)
    arrc.loads(_add_src(a, b, out))          # a wrong result dtype would be E0203 here


@pytest.mark.parametrize("a, b", [("i8", "u8"), ("u32", "i32"), ("f16", "bf16"), ("u64", "i8"), ("i64", "f16"),
                                  ("u16", "f32"), ("bool", "u8"), ("i32", "f64")])
def test_mixed_values_match_jax(a, b):
    out = jax_promote(a, b)
    mod = cached_module(f"def f(x: {a}[n], y: {b}[n]) -> ({out}[n], {out}[n], bool[n]):\n"
                        f"    return x + y, x * y, x < y\n")
    x, y = sample(a, (9,), -2, 2), sample(b, (9,), -2, 2, seed=1)
    s, p, lt = mod.f(x, y)
    jx, jy = jnp.asarray(x), jnp.asarray(y)
    for got, expected in ((s, jx + jy), (p, jx * jy), (lt, jx < jy)):
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(np.asarray(got).astype(np.float64), np.asarray(expected).astype(np.float64))


# ---- weak literals -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", [d for d in ALL_DTYPES if d != "bool"])
def test_int_literal_keeps_the_array_dtype(dt):
    mod = cached_module(f"def f(x: {dt}[n]) -> ({dt}[n], {dt}[n], {dt}[n]):\n    return x + 1, 2 * x, x - 1\n")
    x = sample(dt, (5,), 0, 3)
    a, b, c = mod.f(x)
    assert a.dtype == b.dtype == c.dtype == x.dtype
    jx = jnp.asarray(x)
    for got, expected in ((a, jx + 1), (b, 2 * jx), (c, jx - 1)):
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(np.asarray(got).astype(np.float64), np.asarray(expected).astype(np.float64))


@pytest.mark.parametrize("dt", ["f16", "bf16", "f32", "f64"])
def test_float_literal_keeps_the_float_dtype(dt):
    mod = cached_module(f"def f(x: {dt}[n]) -> {dt}[n]:\n    return x * 2.5 + nan * 0 + 1e-3\n")
    x = sample(dt, (4,))
    got = mod.f(x)
    assert short_name(got.dtype) == dt
    assert np.isnan(np.asarray(got).astype(np.float64)).all()


@pytest.mark.parametrize("dt, out", [
    ("bool", "f32"), ("i8", "f32"), ("u8", "f32"), ("i16", "f32"), ("u16", "f32"), ("i32", "f32"), ("u32", "f32"),
    ("i64", "f64"), ("u64", "f64"),
])
def test_int_array_times_float_literal(dt, out):
    # JAX with x64 would give f64 for i32 * 2.5; arr stays at 32 bits unless a 64-bit value takes part.
    mod = cached_module(f"def f(x: {dt}[n]) -> {out}[n]:\n    return x * 2.5\n")
    x = sample(dt, (4,), 0, 3)
    got = mod.f(x)
    assert short_name(got.dtype) == out
    np.testing.assert_allclose(np.asarray(got), x.astype(np.float64) * 2.5)


@pytest.mark.parametrize("a, b, out", [
    ("i32", "i32", "f32"), ("i8", "u8", "f32"), ("u32", "u32", "f32"), ("bool", "bool", "f32"),
    ("i64", "i64", "f64"), ("u64", "u64", "f64"), ("i32", "i64", "f64"), ("u8", "i64", "f64"),
    ("i32", "f16", "f16"), ("f16", "f16", "f16"), ("bf16", "f32", "f32"),
])
def test_true_division_dtype(a, b, out):
    mod = cached_module(f"def f(x: {a}[n], y: {b}[n]) -> {out}[n]:\n    return x / y\n")
    x, y = sample(a, (6,), 1, 4), sample(b, (6,), 1, 4, seed=3)
    got = mod.f(x, y)
    assert short_name(got.dtype) == out
    with np.errstate(all="ignore"):
        expected = (x.astype(np.float64) / y.astype(np.float64)).astype(np_dtype(out))
    np.testing.assert_allclose(np.asarray(got).astype(np.float64), expected.astype(np.float64), rtol=1e-3)


def test_literals_alone_default_to_32_bits():
    mod = cached_module("def f() -> (i32, f32, f32, i32, f32):\n    return 1 + 2, 1.5 * 2, 7 / 2, 7 // 2, 2 ** 0.5\n")
    got = mod.f()
    assert [short_name(v.dtype) for v in got] == ["i32", "f32", "f32", "i32", "f32"]
    assert [float(v) for v in got] == pytest.approx([3, 3.0, 3.5, 3, 2 ** 0.5])


def test_array_literals_of_numbers_are_weak():
    # docs/language.md (choice): an array literal of numbers is weakly typed like its elements.
    mod = cached_module(
        "def f(x: u8[3]) -> u8[3]:\n    return x + [1, 2, 3]\n\n"
        "def g(x: f16[3]) -> f16[3]:\n    return x + [1.0, 2.0, 3.0]\n\n"
        "def h(x: i8[n], k: i32) -> i32[n]:\n    return x + k\n\n"
        "def k(x: f64[3]) -> f64[3]:\n    return x + [0.1, 0.2, 0.3]\n")
    np.testing.assert_array_equal(np.asarray(mod.f(np.array([255, 1, 2], np.uint8))), [0, 3, 5])
    assert short_name(mod.g(np.ones(3, np.float16)).dtype) == "f16"
    assert short_name(mod.h(np.array([1, 2], np.int8), 5).dtype) == "i32"     # a scalar parameter is strong
    # next to f64 the literal is f64 without rounding through f32
    np.testing.assert_array_equal(np.asarray(mod.k(np.zeros(3))), [0.1, 0.2, 0.3])


def test_array_literal_dtype():
    mod = cached_module("def f() -> (i32[2], f32[2], f32[2], bool[2]):\n"
                        "    return [1, 2], [1.0, 2.0], [1, 2.5], [true, false]\n")
    assert [short_name(v.dtype) for v in mod.f()] == ["i32", "f32", "f32", "bool"]


# ---- literal range: E0211 ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("src", [
    "def f(x: u8[n]) -> u8[n]:\n    return x + 300\n",
    "def f(x: u8[n]) -> u8[n]:\n    return x + 256\n",
    "def f(x: u8[n]) -> u8[n]:\n    return x - -1\n",
    "def f(x: i8[n]) -> i8[n]:\n    return x * 128\n",
    "def f(x: i8[n]) -> i8[n]:\n    return x + -129\n",
    "def f(x: u16[n]) -> bool[n]:\n    return x < 70000\n",
    "def f(x: i32[n]) -> i32[n]:\n    return x + 2147483648\n",
    "def f(x: u32[n]) -> u32[n]:\n    return maximum(x, -1)\n",
    "def f(x: i64[n]) -> i64[n]:\n    return x + 9223372036854775808\n",
    "def f(x: i64) -> i64:\n    return x + abs(3000000000)\n",        # (an op on literals alone: in i32, at load
    "def f(x: i64[n]) -> i64[n]:\n    return x + sign(3000000000)\n",  # as `arrc check`, not at the first call)
])
def test_literal_out_of_range(src):
    with pytest.raises(CompileError) as info:
        arrc.loads(src)
    [d] = info.value.diagnostics
    assert d.code == "E0211"
    assert "out of range" in d.message


@pytest.mark.parametrize("src", [
    "def f(x: u8[n]) -> u8[n]:\n    return x + 255\n",
    "def f(x: i8[n]) -> i8[n]:\n    return x * -128\n",
    "def f(x: u64[n]) -> u64[n]:\n    return x + 9223372036854775807\n",
    "def f(x: f16[n]) -> f16[n]:\n    return x + 100000\n",       # floats take any integer literal
])
def test_literal_at_the_edge_of_the_range(src):
    arrc.loads(src)


def test_float_literal_into_an_integer_op_is_an_error():
    with pytest.raises(CompileError) as info:
        arrc.loads("def f(x: i32[n]) -> i32[n]:\n    return x & 1.5\n")
    assert info.value.diagnostics[0].code == "E0201"


def test_in_range_literal_arithmetic_wraps_at_run_time():
    mod = cached_module("def f(x: u8[n]) -> u8[n]:\n    return x + 200\n")
    np.testing.assert_array_equal(np.asarray(mod.f(np.array([10, 100], np.uint8))), [210, 44])


# ---- W0001: lossy implicit promotion -------------------------------------------------------------------------
LOSSY = [("i64", "f32", "f32"), ("u64", "i64", "f64"), ("i32", "f16", "f16"), ("i64", "bf16", "bf16"),
         ("u32", "f16", "f16"), ("u64", "f32", "f32"), ("i32", "bf16", "bf16"), ("u64", "i8", "f64")]
NOT_LOSSY = [("i8", "f16", "f16"), ("i32", "f64", "f64"), ("u8", "bf16", "bf16"), ("f32", "f64", "f64"),
             ("i32", "i64", "i64"), ("u32", "i64", "i64"), ("u8", "i8", "i16"), ("bool", "f16", "f16"),
             ("f16", "bf16", "f32"), ("i32", "f32", "f32"), ("i64", "f64", "f64")]


@pytest.mark.parametrize("a, b, out", LOSSY)
def test_lossy_promotion_warns(a, b, out):
    mod = arrc.loads(_add_src(a, b, out), filename="w.arr")
    [w] = mod.warnings
    assert (w.code, w.severity) == ("W0001", "warning")
    assert w.message == f"implicit promotion of {a} and {b} to {out} may lose precision"
    assert (w.span.line, w.span.col, w.span.end_col) == (2, 12, 17)
    assert lossy_promotion([ArrayType(DTYPES[a]), ArrayType(DTYPES[b])], DTYPES[out]) is not None


@pytest.mark.parametrize("a, b, out", NOT_LOSSY)
def test_value_preserving_promotion_is_silent(a, b, out):
    assert arrc.loads(_add_src(a, b, out)).warnings == []


def test_weak_literal_does_not_warn():
    assert arrc.loads("def f(x: i64[n]) -> f64[n]:\n    return x * 2.5\n").warnings == []
    assert arrc.loads("def f(x: i32[n]) -> f32[n]:\n    return x / 3\n").warnings == []


@pytest.mark.parametrize("a, b, out", LOSSY[:3])
def test_warnings_as_errors(a, b, out):
    with pytest.raises(CompileError) as info:
        arrc.loads(_add_src(a, b, out), warnings="error")
    [d] = info.value.diagnostics
    assert (d.code, d.severity) == ("W0001", "error")
    assert str(info.value).startswith("error[W0001]: implicit promotion")


def test_warning_module_still_runs():
    mod = arrc.loads(_add_src("i64", "f32", "f32"))
    got = mod.f(np.array([2 ** 40 + 1], np.int64), np.array([0.5], np.float32))
    assert got.dtype == np.float32
    assert float(got[0]) == float(np.float32(2 ** 40))


def test_u64_literal_above_the_i64_range():
    mod = cached_module("def f(x: u64[n]) -> u64[n]:\n    return x ^ 18446744073709551615\n")
    x = np.array([0, 1, 2 ** 63], np.uint64)
    np.testing.assert_array_equal(np.asarray(mod.f(x)), x ^ np.uint64(2 ** 64 - 1))


def test_float_literals_taking_f64_are_not_rounded_through_f32():
    mod = cached_module("const C: f64 = 0.1\n\n"
                        "def f() -> (f64, f64):\n    return 0.1, C\n\n"
                        "def g(x: f64[n]) -> f64[n]:\n    return x * 0.1 + 1e-300\n")
    a, c = mod.f()
    assert float(a) == 0.1 and float(c) == 0.1
    got = np.asarray(mod.g(np.array([1.0, 0.0])))
    np.testing.assert_array_equal(got, [0.1 + 1e-300, 1e-300])


def test_float_arithmetic_of_literals_is_checked_as_its_result_not_each_literal_in_f32():
    """`f64(1e308 * 1)` is 1e308, computed in f64 as JAX with x64 does, but each literal was checked in the f32
    that a lone literal takes: W0005 'literal 1e+308 ... becomes inf' for a finite result (an error under
    `--werror`). The value is checked where it takes its dtype: `1e30 * 1e30` as f32 still warns."""
    mod = arrc.loads("def f(x: f64, y: f16) -> (f64, f64, f64, f16):\n"
                     "    return f64(1e308 * 1), x + 1e200 * 1e-190, 1e300 / 1e290 + 2.0 ** 1000 / 1e300, y + 1e-5 * 1e5\n",
                     warnings="error")
    assert [float(v) for v in mod.f(np.float64(1.0), np.float16(1.0))] == [1e308, 1.0 + 1e10, 1e10 + 2.0 ** 1000 / 1e300,
                                                                             2.0]
    [w] = arrc.loads("def f() -> f32:\n    return 1e30 * 1e30\n").warnings
    assert (w.code, w.message, w.span.col, w.span.end_col) == (
        "W0005", "literal 1.0000000000000001e+60 is too large for f32 and becomes inf", 12, 23)


def test_true_division_of_integer_literals_is_a_weak_float_as_a_python_float_is_to_jax():
    """`1 / 3` is a Python float to JAX (weak): `x_f16 * (1 / 3)` stays f16 and `const H: f64 = 1 / 2` holds it.
    It was a strong f32 (E0203: the f16 function returned f32, the f64 constant had f32). A typed integer's
    quotient is still a strong float (`i / 2` of an i32 is f32, as `jnp.int32(1) / 2` is)."""
    mod = arrc.loads("const H: f64 = 1 / 2\n"
                     "def f(x: f16[3], i: i32) -> (f16[3], f64, f32, f64):\n"
                     "    return x * (1 / 3), H + 1 / 3, i / 2, 1 / 3\n")
    x = np.array([1, 2, 3], np.float16)
    half, third, quotient, exact = mod.f(x, np.int32(3))
    expected = np.asarray(jnp.asarray(x) * (1 / 3))         # (conftest turns x64 on)
    assert half.dtype == np.float16 and np.array_equal(np.asarray(half), expected)
    assert float(third) == 0.5 + 1 / 3 and float(exact) == 1 / 3
    assert np.asarray(quotient).dtype == np.float32 and float(quotient) == 1.5


def test_arithmetic_of_integer_literals_is_exact_until_it_takes_a_dtype():
    """`2**64 - 1`, `2**40 * 3`: Python computes them before jnp sees them, and arr folds `+ - * // %` of integer
    literals exactly too; the value is checked where it takes a dtype (its parts were each checked in i32:
    `u64(2**64 - 1)` was E0211 'no integer dtype holds 18446744073709551616')."""
    mod = arrc.loads("def f(x: i64, y: u64) -> (u64, i64, i64, u64, i64):\n"
                     "    return u64(2**64 - 1), i64(2**63 - 1), x + 2**40 * 3, y & (2**64 - 1), i64(2**40 % 7)\n")
    got = [int(v) for v in mod.f(np.int64(1), np.uint64(5))]
    assert got == [2**64 - 1, 2**63 - 1, 2**40 * 3 + 1, 5, 2**40 % 7]
    for src, value in [("def f() -> i32:\n    return 2147483647 + 1\n", 2147483648),   # still past its dtype
                       ("def f(x: i8) -> i8:\n    return x + (100 + 100)\n", 200)]:
        with pytest.raises(CompileError) as info:
            arrc.loads(src)
        [d] = info.value.diagnostics
        assert (d.code, d.message.split(" is")[0]) == ("E0211", f"literal {value}")


def test_a_product_of_literals_past_every_dtype_is_refused_not_computed():
    """`t = t * t` of literals, repeated: exact folding computed 3**(2**24) (9 s, then a ValueError from printing
    its 8M digits), and a few more lines ran without end. Past MAX_POWER_BITS, as a power, it is E0211."""
    src = "def f() -> i64:\n    t = 3\n" + "    t = t * t\n" * 40 + "    return t\n"
    with pytest.raises(CompileError) as info:
        arrc.loads(src)
    [d] = info.value.diagnostics
    assert (d.code, d.message, d.span.line) == ("E0211", "integer literal too large", 12)    # 3**1024: 1624 bits


def test_a_power_of_literals_is_the_literal_it_makes_at_any_size():
    """`2**200` is that literal (it was left to run time, in i32, where it wrapped to 0: `u64(2**200)` was 0 and
    `f64(2**200)` 0.0): an integer dtype refuses it, a float takes it; one past every dtype is not computed."""
    mod = arrc.loads("def f(b: f32) -> (f64, f32, f32, f32):\n"
                     "    return f64(2**200), b + (-2147483648)**3, b + (-1)**1000001, b + 1**1000000\n")
    assert [float(v) for v in mod.f(np.float32(1.0))] == [2.0 ** 200, float(np.float32(1 - 2.0 ** 93)), 0.0, 2.0]
    for src, message in [("def f() -> u64:\n    return u64(2**200)\n", f"literal {2**200} is out of range for u64 "
                                                                           f"(0..{2**64 - 1})"),
                         ("def f() -> f64:\n    return f64(2**5000)\n", "integer literal too large")]:
        with pytest.raises(CompileError) as info:
            arrc.loads(src)
        [d] = info.value.diagnostics
        assert (d.code, d.message) == ("E0211", message)


@pytest.mark.parametrize("call, param", [("g(3000000000)", "i32"), ("g(2**40 * 3)", "i32"), ("g(300)", "u8"),
                                         ("g(-1)", "u32")])
def test_an_integer_literal_argument_past_the_parameter_dtype_is_e0211(call, param):
    """`g(3000000000)` for `g(x: i32)` takes the parameter's dtype, as `i32(3000000000)` does (E0211); it was
    passed wrapped (-1294967296), silently. An argument that fits is exact (`g(3000000000)` for an i64)."""
    with pytest.raises(CompileError) as info:
        arrc.loads(f"def g(x: {param}) -> {param}:\n    return x\n\ndef f() -> {param}:\n    return {call}\n")
    [d] = info.value.diagnostics
    assert d.code == "E0211" and d.span.line == 5 and f"out of range for {param}" in d.message
    mod = arrc.loads("def g(x: i64) -> i64:\n    return x\n\ndef f() -> i64:\n    return g(2**40 * 3)\n")
    assert int(mod.f()) == 2**40 * 3


def test_a_shift_of_integer_literals_is_exact_until_it_takes_a_dtype():
    """`1 << 40` is 2**40 in Python before jnp sees it; computed in i32 at run time it was 0, silently
    (`x_i64 + (1 << 40)` added nothing). Checked where it takes a dtype, as `2**40` is."""
    mod = arrc.loads("def f(x: i64) -> (i64, u64, i32):\n"
                     "    return x + (1 << 40), u64((1 << 64) - 1), (1 << 4) + (-8 >> 1) + (5 >> 100) + (-1 >> 100)\n")
    assert [int(v) for v in mod.f(np.int64(1))] == [2**40 + 1, 2**64 - 1, 16 - 4 + 0 - 1]
    with pytest.raises(CompileError) as info:
        arrc.loads("def f() -> i32:\n    return 1 << 40\n")
    assert info.value.diagnostics[0].code == "E0211"
