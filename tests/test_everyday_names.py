"""The everyday NumPy/JAX names of issue 17 ("Missing everyday names"; `roll`, `diag`, `tril`, `triu` of
"Found by writing 38 real programs"), end to end against jax.numpy and jax.nn (x64 on, see conftest):

- elementwise: log2 log10 square softplus gelu silu logaddexp hypot deg2rad rad2deg (compiler/ops_elementwise.py);
- construction and comparison: zeros_like ones_like full_like isclose allclose, and tensordot;
- matrices: roll diag tril triu trace;

each at random points and at edge cases (0, -0, inf, NaN, huge values, empty results, out-of-range diagonals),
with jnp's dtypes (integers compute in f32, 64-bit ones in f64: arr's 32-bit rule, LANGUAGE.md section 4);
their gradients against jax.grad; their diagnostics with codes and spans.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from conftest import (arr_batch, assert_close, assert_value_and_grad_match_jax, filecheck, lower_text, np_dtype,
                      short_name)

import arrc
from arrc.compiler.types import DTYPES

RNG = np.random.default_rng(17)
SPECIALS = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 2.5]


def math_dtype(dt: str) -> str:
    """The dtype float math computes in for inputs of `dt` (floats: itself; ints and bool: f32, 64-bit: f64)."""
    return dt if DTYPES[dt].is_float else "f64" if DTYPES[dt].bits == 64 else "f32"


def as_np(x, dt: str) -> np.ndarray:
    return np.asarray(x).astype(np_dtype(dt))


@functools.lru_cache(maxsize=None)
def load(src: str) -> arrc.Module:
    return arrc.loads(src)


def fn(signature: str, body: str):
    """The function `f` of a one-function module: `fn("(x: f32[n]) -> f32[n]", "return x")`."""
    return load(f"def f{signature}:\n    return {body}\n").f


def same(actual, expected, dt: str | None = None) -> None:
    """Equal shape and dtype (`dt`, else the oracle's), values within the dtype's tolerance (NaNs where jnp's)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    want = np_dtype(dt) if dt else expected.dtype
    assert actual.dtype == want, (actual.dtype, want)
    assert_close(actual, expected.astype(actual.dtype) if actual.dtype != expected.dtype else expected,
                 short_name(actual.dtype))


# ---- elementwise: one argument -----------------------------------------------------------------------------
UNARY = {       # name -> (arr template, jax oracle)
    "log2": ("log2({0})", jnp.log2), "log10": ("log10({0})", jnp.log10),
    "deg2rad": ("deg2rad({0})", jnp.deg2rad), "rad2deg": ("rad2deg({0})", jnp.rad2deg),
    "softplus": ("softplus({0})", jax.nn.softplus), "silu": ("silu({0})", jax.nn.silu),
    "gelu": ("gelu({0})", jax.nn.gelu),                      # jax.nn.gelu's default: approximate=True
    "gelu_exact": ("gelu({0}, approximate=false)", functools.partial(jax.nn.gelu, approximate=False)),
}
UNARY_DTYPES = ["f16", "bf16", "f32", "f64", "i8", "i32", "i64", "u8", "bool"]


def unary_input(dt: str) -> np.ndarray:
    if dt == "bool":
        return np.array([True, False, True])
    if DTYPES[dt].is_int:
        info = np.iinfo(np_dtype(dt))
        values = {int(info.min), -7, -1, 0, 1, 2, 9, 100, int(info.max)}
        return np.array(sorted(v for v in values if info.min <= v <= info.max), dtype=np_dtype(dt))
    big = {"f16": 30.0, "bf16": 300.0, "f32": 300.0, "f64": 3000.0}[dt]     # e**big overflows
    values = np.concatenate([RNG.uniform(-6, 6, 24), SPECIALS, [big, -big, 1e-3, -1e-3, 0.75, -3.0]])
    return values.astype(ml_dtypes.bfloat16 if dt == "bf16" else np_dtype(dt))


@pytest.mark.parametrize("dt", UNARY_DTYPES)
def test_unary_math_matches_jax(dt):
    x = unary_input(dt)
    out = math_dtype(dt)
    got = arr_batch([(template, [(dt, x)], out) for template, _ in UNARY.values()])
    for (name, (_, oracle)), value in zip(UNARY.items(), got):
        expected = oracle(jnp.asarray(as_np(x, out)))          # jnp on the dtype arr computes in
        assert np.asarray(value).dtype == np_dtype(out), name
        assert_close(value, expected, out)


@pytest.mark.parametrize("dt", UNARY_DTYPES)
def test_square_keeps_integers_and_makes_bools_i32(dt):
    x = unary_input(dt)
    want = jnp.square(jnp.asarray(x))              # integers wrap as jnp's; bool -> i32 as jnp's
    out = short_name(want.dtype)
    (got,) = arr_batch([("square({0})", [(dt, x)], out)])
    same(got, want, out)


def test_weak_literals_keep_the_other_operands_dtype():
    f = fn("(h: f16[n], b: bf16[n]) -> (f16[n], bf16[n], f16[n], f32, f16[n])",
           "log2(8.0) * h, logaddexp(b, 0.0), hypot(h, 3), softplus(1.0), square(2.0) * h")
    h, b = np.array([1.0, -2.0], np.float16), np.array([0.5, 7.0], ml_dtypes.bfloat16)
    got = f(h, b)
    # log2 of a literal stays weak, as exp and log do in jnp and arr; jnp's log2 and log10 make it strong (their
    # constant 1 / log(2) is a typed array), a quirk not copied.
    want = [np.float16(3.0) * h, jnp.logaddexp(b, 0.0), jnp.hypot(h, 3), jax.nn.softplus(np.float32(1.0)),
            jnp.square(2.0) * h]
    for g, w in zip(got, want):
        same(g, w)


# ---- elementwise: two arguments ----------------------------------------------------------------------------
BINARY = {"logaddexp": jnp.logaddexp, "hypot": jnp.hypot}
PAIRS = [("f16", "f16"), ("bf16", "bf16"), ("f32", "f32"), ("f64", "f64"), ("f32", "f64"), ("i32", "i32"),
         ("i64", "i64"), ("u8", "i8"), ("bool", "f16")]


def grid(dt: str) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of special values, then random ones (ints: a range of each dtype)."""
    if DTYPES[dt].is_int or dt == "bool":
        values = unary_input(dt)
    else:
        values = np.concatenate([SPECIALS, RNG.uniform(-40, 40, 6)]).astype(ml_dtypes.bfloat16 if dt == "bf16"
                                                                           else np_dtype(dt))
    a, b = np.meshgrid(values, values)
    return a.ravel(), b.ravel()


@pytest.mark.parametrize("pair", PAIRS, ids="-".join)
def test_binary_math_matches_jax(pair):
    dx, dy = pair
    x, _ = grid(dx)
    _, y = grid(dy)
    n = min(len(x), len(y))
    x, y = x[:n], y[:n]
    out = math_dtype(short_name(jnp.promote_types(np_dtype(dx), np_dtype(dy))))
    if pair == ("u8", "i8"):
        out = "f32"                       # u8 and i8 promote to i16: f32 math
    got = arr_batch([(f"{name}({{0}}, {{1}})", [(dx, x), (dy, y)], out) for name in BINARY])
    for (name, oracle), value in zip(BINARY.items(), got):
        expected = oracle(jnp.asarray(as_np(x, out)), jnp.asarray(as_np(y, out)))
        assert np.asarray(value).dtype == np_dtype(out), name
        assert_close(value, expected, out)


def test_logaddexp_and_hypot_at_extremes():
    f = fn("(x: f64[n], y: f64[n]) -> (f64[n], f64[n], f32[n])",
           "logaddexp(x, y), hypot(x, y), hypot(x.astype(f32), y.astype(f32))")
    x = np.array([1e308, -1e308, 800.0, -800.0, 1e-320, np.inf, np.nan, -np.inf, 3e200, 0.0])
    y = np.array([1e308, 1e308, 800.0, -801.0, 0.0, np.nan, np.inf, -np.inf, 4e200, -0.0])
    lae, hyp, hyp32 = f(x, y)
    same(lae, jnp.logaddexp(x, y))
    same(hyp, jnp.hypot(x, y))
    with np.errstate(over="ignore"):            # (3e200 is inf in f32)
        same(hyp32, jnp.hypot(x.astype(np.float32), y.astype(np.float32)))


# ---- isclose / allclose ------------------------------------------------------------------------------------
def test_isclose_matches_jax():
    f = fn("(x: f64[n], y: f64[n], h: f16[n], i: i32[n], j: i32[n], r: f32) -> "
           "(bool[n], bool[n], bool[n], bool[n], bool[n], bool[n], bool[n])",
           "isclose(x, y), isclose(x, y, equal_nan=true), isclose(x, y, rtol=0.5, atol=0.25), isclose(h, y), "
           "isclose(i, j), isclose(i, j, rtol=0, atol=1), isclose(x.astype(f32), y.astype(f32), rtol=r)")
    base = RNG.standard_normal(12)
    x = np.concatenate([base, SPECIALS, [1e-9, 1.0, 1e10, np.nan, np.inf]])
    y = np.concatenate([base * (1 + RNG.uniform(-2e-5, 2e-5, 12)), SPECIALS[::-1], [0.0, 1.00001, 1e10 + 1e5,
                                                                                       np.nan, -np.inf]])
    with np.errstate(over="ignore"):
        h = x.astype(np.float16)
    i = np.arange(len(x), dtype=np.int32) * 1000 - 9000
    j = i + np.int32(1)
    r = np.float32(0.3)
    got = f(x, y, h, i, j, r)
    want = [jnp.isclose(x, y), jnp.isclose(x, y, equal_nan=True), jnp.isclose(x, y, rtol=0.5, atol=0.25),
            jnp.isclose(h, y), jnp.isclose(i.astype(np.float32), j.astype(np.float32)),
            jnp.isclose(i, j, rtol=0, atol=1), jnp.isclose(x.astype(np.float32), y.astype(np.float32), rtol=r)]
    for g, w in zip(got, want):
        same(g, w)


def test_allclose_matches_jax():
    f = fn("(x: f64[n, m], y: f64[n, m]) -> (bool, bool, bool, bool)",
           "allclose(x, y), allclose(x, x), allclose(x, y, atol=1.0), allclose(x, x, equal_nan=true)")
    x = RNG.standard_normal((3, 4))
    for y in [x + 1e-7, x + 0.5]:
        got = f(x, y)
        same(got[0], jnp.allclose(x, y))
        same(got[2], jnp.allclose(x, y, atol=1.0))
        assert bool(got[1]) and bool(got[3])
    xn = x.copy()
    xn[1, 2] = np.nan
    got = f(xn, xn)
    same(got[1], jnp.allclose(xn, xn))            # NaN is not close to NaN ...
    same(got[3], jnp.allclose(xn, xn, equal_nan=True))     # ... unless equal_nan
    assert not bool(got[1]) and bool(got[3])


# ---- zeros_like ones_like full_like ------------------------------------------------------------------------
@pytest.mark.parametrize("dt", ["bool", "u8", "i32", "i64", "f16", "bf16", "f64"])
def test_like_constructors_match_jax(dt):
    f = fn(f"(x: {dt}[n, 3], v: f32[3]) -> ({dt}[n, 3], {dt}[n, 3], {dt}[n, 3], f16[n, 3], i32[n, 3], {dt}[n, 3])",
           "zeros_like(x), ones_like(x), full_like(x, 1), zeros_like(x, dtype=f16), full_like(x, 2.7, dtype=i32), "
           "full_like(x, v)")
    v = np.array([0.0, 1.5, -2.5], np.float32)
    for n in (2, 0):
        x = np.zeros((n, 3), ml_dtypes.bfloat16 if dt == "bf16" else np_dtype(dt))
        got = f(x, v)
        # a float fill converts to an integer dtype as casts do in arr (toward zero, saturating: -2.5 -> u8 0)
        cast = np.clip(np.trunc(v), np.iinfo(np_dtype(dt)).min, np.iinfo(np_dtype(dt)).max) if DTYPES[dt].is_int else v
        want = [jnp.zeros_like(x), jnp.ones_like(x), jnp.full_like(x, 1), jnp.zeros_like(x, dtype=jnp.float16),
                jnp.full_like(x, 2.7, dtype=jnp.int32), jnp.full_like(x, cast)]
        for g, w in zip(got, want):
            same(g, w)


def test_like_constructors_keep_weakness():
    f = fn("(h: f16[2]) -> (f16[2], f16[2], f32[2])",
           "zeros_like(1.5) + h, full_like(2.0, 3.0) * h, full_like(h, 2.5, dtype=f32) + h")
    h = np.array([1.0, 2.0], np.float16)
    got = f(h)
    want = [jnp.zeros_like(1.5) + h, jnp.full_like(2.0, 3.0) * h, jnp.full_like(h, 2.5, dtype=jnp.float32) + h]
    for g, w in zip(got, want):
        same(g, w)


# ---- tensordot ---------------------------------------------------------------------------------------------
TENSORDOT = [       # (x shape, y shape, arr axes, jnp axes)
    ((3, 4), (4, 5), "1", 1), ((2, 3, 4), (3, 4, 5), "2", 2), ((2, 3, 4), (3, 4, 5), None, 2),
    ((3, 4), (5, 6), "0", 0), ((3, 4), (4, 3), "(0, 1)", (0, 1)), ((2, 3, 4), (4, 2, 5), "((0, 2), (1, 0))",
                                                                    ((0, 2), (1, 0))),
    ((2, 3, 4), (4, 3), "((-1, 1), (0, -1))", ((-1, 1), (0, -1))), ((4,), (4,), "1", 1), ((0, 3), (3, 2), "1", 1),
    # list literals, as NumPy's docs write them (they were E0204 '`axes` must be an integer, found i32[2, 2]')
    ((2, 3, 4), (4, 2, 5), "[[0, 2], [1, 0]]", [[0, 2], [1, 0]]), ((2, 3, 4), (3, 5), "[1, 0]", [1, 0]),
    ((2, 3, 4), (4, 5), "([2], [0])", ([2], [0])),
]


@pytest.mark.parametrize("dts", [("f64", "f64"), ("f32", "f32"), ("f32", "f64"), ("i32", "i32"), ("u8", "i8"),
                                 ("f16", "f16")], ids="-".join)
def test_tensordot_matches_jax(dts):
    dx, dy = dts
    params = ", ".join(f"x{i}: {dx}[{', '.join(map(str, sx))}], y{i}: {dy}[{', '.join(map(str, sy))}]"
                       for i, (sx, sy, _, _) in enumerate(TENSORDOT))
    bodies = [f"tensordot(x{i}, y{i})" if a is None else f"tensordot(x{i}, y{i}, axes={a})"
              for i, (_, _, a, _) in enumerate(TENSORDOT)]
    args, wants = [], []
    for sx, sy, _, ax in TENSORDOT:
        x = (RNG.standard_normal(sx) * 3).astype(np_dtype(dx))
        y = (RNG.standard_normal(sy) * 3).astype(np_dtype(dy))
        args += [x, y]
        wants.append(jnp.tensordot(x, y, axes=ax))
    out = short_name(wants[0].dtype)
    types = ", ".join(f"{out}[{', '.join(map(str, w.shape))}]" for w in wants)
    got = load(f"def f({params}) -> ({types}):\n    return {', '.join(bodies)}\n").f(*args)
    for g, w in zip(got, wants):
        same(g, w)


def test_tensordot_with_shape_variables():
    f = fn("(x: f64[b, n, k], y: f64[n, k, m]) -> f64[b, m]", "tensordot(x, y, axes=2)")
    for b, n, k, m in [(2, 3, 4, 5), (1, 1, 1, 1), (0, 2, 2, 3)]:
        x, y = RNG.standard_normal((b, n, k)), RNG.standard_normal((n, k, m))
        same(f(x, y), jnp.tensordot(x, y, axes=2))


# ---- roll --------------------------------------------------------------------------------------------------
ROLLS = [("1", None), ("-1", None), ("7", None), ("(1, 2)", None), ("1", "0"), ("-2", "1"), ("5", "-1"),
         ("(1, -2)", "(0, 1)"), ("(1, 2)", "(1, 1)"), ("1", "(0, 1)"), ("0", "0"), ("-13", "0")]


def _literal(text):
    return None if text is None else eval(text)        # the arr literal as Python (ints and tuples)


@pytest.mark.parametrize("dt", ["f64", "i32", "bool", "bf16"])
def test_roll_matches_jax(dt):
    bodies = [f"roll(x, {s})" if a is None else f"roll(x, {s}, axis={a})" for s, a in ROLLS]
    f = fn(f"(x: {dt}[n, m]) -> ({', '.join([f'{dt}[n, m]'] * len(ROLLS))})", ", ".join(bodies))
    for shape in [(3, 4), (1, 5), (0, 3)]:
        x = (RNG.standard_normal(shape) * 4).astype(ml_dtypes.bfloat16 if dt == "bf16" else np_dtype(dt))
        for (s, a), g in zip(ROLLS, f(x)):
            same(g, jnp.roll(x, _literal(s), axis=_literal(a)))


def test_roll_by_a_shape_variable_and_of_a_scalar():
    f = fn("(x: f64[n], s: f64) -> (f64[n], f64[n], f64)", "roll(x, n // 2), roll(x, n), roll(s, 3)")
    for n in (1, 4, 5):
        x = np.arange(n, dtype=np.float64)
        half, whole, scalar = f(x, 2.5)
        same(half, jnp.roll(x, n // 2))
        same(whole, x)
        same(scalar, jnp.roll(2.5, 3))


@pytest.mark.parametrize("dt, shifts", [("i32", [0, 1, -1, 7, -12, 2**31 - 1, -2**31]), ("i8", [-128, 127, -3]),
                                       ("u8", [255, 3]), ("u32", [2**32 - 1, 7]), ("i64", [-2**63, 2**63 - 1]),
                                       ("u64", [2**64 - 1, 2**63, 5])])
def test_roll_by_a_runtime_shift(dt, shifts):
    # as jnp.roll with a traced shift: Python's s mod n for every integer dtype, alone or next to a static one
    f = fn(f"(x: f64[3, 5], s: {dt}) -> (f64[3, 5], f64[3, 5], f64[3, 5])",
           "roll(x, s), roll(x, s, axis=1), roll(x, (s, 2), axis=(1, 0))")
    x = np.arange(15.0).reshape(3, 5)
    for s in shifts:
        flat, along, both = f(x, np_dtype(dt).type(s))
        same(flat, np.roll(x, s % 15))
        same(along, np.roll(x, s % 5, axis=1))
        same(both, np.roll(x, (s % 5, 2), axis=(1, 0)))


# ---- diag tril triu trace ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", ["f64", "i32", "bool", "f16"])
def test_diag_matches_jax(dt):
    ks = [-4, -2, -1, 0, 1, 2, 3, 5]
    x = (RNG.standard_normal((3, 5)) * 4).astype(np_dtype(dt))
    v = (RNG.standard_normal(3) * 4).astype(np_dtype(dt))
    mats = [jnp.diag(x, k) for k in ks]
    vecs = [jnp.diag(v, k) for k in ks]
    types = [f"{dt}[{w.shape[0]}]" for w in mats] + [f"{dt}[{w.shape[0]}, {w.shape[1]}]" for w in vecs]
    bodies = [f"diag(x, {k})" for k in ks] + [f"diag(v, k={k})" for k in ks]
    got = fn(f"(x: {dt}[3, 5], v: {dt}[3]) -> ({', '.join(types)})", ", ".join(bodies))(x, v)
    for g, w in zip(got, mats + vecs):
        same(g, w)
    square = fn(f"(x: {dt}[n, n], v: {dt}[n]) -> ({dt}[n], {dt}[n, n], {dt}[n + 2, n + 2])",
                "diag(x), diag(v), diag(v, -2)")
    for n in (4, 1, 0):
        y = (RNG.standard_normal((n, n)) * 4).astype(np_dtype(dt))
        u = (RNG.standard_normal(n) * 4).astype(np_dtype(dt))
        for g, w in zip(square(y, u), [jnp.diag(y), jnp.diag(u), jnp.diag(u, -2)]):
            same(g, w)


def test_diag_of_a_symbolic_rectangle_is_sized_per_call():
    f = fn("(x: f64[n, m]) -> f64", "sum(diag(x, 1))")
    for shape in [(3, 5), (5, 3), (2, 1), (1, 1)]:
        x = RNG.standard_normal(shape)
        same(f(x), jnp.sum(jnp.diag(x, 1)))


@pytest.mark.parametrize("dt", ["f64", "i32", "bool", "u8"])
def test_tril_triu_match_jax(dt):
    ks = [-3, -1, 0, 1, 2, 6]
    bodies = [f"tril(x, {k})" for k in ks] + [f"triu(x, k={k})" for k in ks] + ["tril(b)", "triu(b, -1)"]
    types = [f"{dt}[n, m]"] * (2 * len(ks)) + [f"{dt}[2, n, m]"] * 2
    f = fn(f"(x: {dt}[n, m], b: {dt}[2, n, m]) -> ({', '.join(types)})", ", ".join(bodies))
    for shape in [(4, 4), (3, 5), (5, 2), (0, 2)]:
        x = (RNG.standard_normal(shape) * 4).astype(np_dtype(dt))
        b = (RNG.standard_normal((2,) + shape) * 4).astype(np_dtype(dt))
        want = [jnp.tril(x, k) for k in ks] + [jnp.triu(x, k) for k in ks] + [jnp.tril(b), jnp.triu(b, -1)]
        for g, w in zip(f(x, b), want):
            same(g, w)


def test_trace_matches_jax():
    f = fn("(x: f64[n, m], t: f32[2, 3, 4], i: i32[3, 3], h: f16[3, 3], b: bool[3, 3]) -> "
           "(f64, f64, f64, f64, f32[3], f32[2], i32, f64, f16, i32)",
           "trace(x), trace(x, 1), trace(x, offset=-2), trace(x, 9), trace(t, axis1=0, axis2=2), "
           "trace(t, -1, axis1=-1, axis2=1), trace(i), trace(i, dtype=f64), trace(h), trace(b)")
    t = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    i = RNG.integers(-9, 9, (3, 3)).astype(np.int32)
    h = RNG.standard_normal((3, 3)).astype(np.float16)
    b = RNG.random((3, 3)) < 0.5
    for shape in [(4, 4), (3, 5), (0, 2)]:
        x = RNG.standard_normal(shape)
        got = f(x, t, i, h, b)
        want = [jnp.trace(x), jnp.trace(x, 1), jnp.trace(x, -2), jnp.trace(x, 9), jnp.trace(t, axis1=0, axis2=2),
                jnp.trace(t, -1, axis1=-1, axis2=1)]
        for g, w in zip(got, want):
            same(g, w)
        # integers and bools sum as `sum` does (32-bit accumulators, LANGUAGE.md); jnp with x64 gives i64
        same(got[6], jnp.trace(i).astype(np.int32))
        same(got[7], jnp.trace(i, dtype=jnp.float64))
        same(got[8], jnp.trace(h))
        same(got[9], jnp.trace(b).astype(np.int32))


# ---- gradients -------------------------------------------------------------------------------------------
GRADS = {       # name -> (arr body over x: f64[6], y: f64[6], jax twin)
    "logs": ("sum(log2(x * x + 0.5) * log10(y * y + 2.0))",
             lambda x, y: jnp.sum(jnp.log2(x * x + 0.5) * jnp.log10(y * y + 2.0))),
    "square_angles": ("sum(square(x) * deg2rad(y) + rad2deg(x))",
                      lambda x, y: jnp.sum(jnp.square(x) * jnp.deg2rad(y) + jnp.rad2deg(x))),
    "activations": ("sum(softplus(x) * y + gelu(y) * x + silu(x * y))",
                    lambda x, y: jnp.sum(jax.nn.softplus(x) * y + jax.nn.gelu(y) * x + jax.nn.silu(x * y))),
    "logaddexp": ("sum(logaddexp(x, y) + logaddexp(x, x))",
                  lambda x, y: jnp.sum(jnp.logaddexp(x, y) + jnp.logaddexp(x, x))),
    "hypot": ("sum(hypot(x, y) * x)", lambda x, y: jnp.sum(jnp.hypot(x, y) * x)),
    "tensordot": ("sum(tensordot(reshape(x, (2, 3)), reshape(y, (3, 2)), 1) ** 2) + "
                  "tensordot(x, y, axes=((0,), (0,)))",
                  lambda x, y: jnp.sum(jnp.tensordot(x.reshape(2, 3), y.reshape(3, 2), 1) ** 2)
                  + jnp.tensordot(x, y, axes=((0,), (0,)))),
    "roll": ("sum(roll(x, 2) * y) + sum(roll(reshape(x, (2, 3)), (1, -1), axis=(0, 1)) * reshape(y, (2, 3)))",
             lambda x, y: jnp.sum(jnp.roll(x, 2) * y)
             + jnp.sum(jnp.roll(x.reshape(2, 3), (1, -1), axis=(0, 1)) * y.reshape(2, 3))),
    "diag": ("sum(diag(reshape(x, (2, 3)), 1) * y[:2]) + sum(diag(x, -1) @ diag(concat((y, zeros(1, dtype=f64)))))",
             lambda x, y: jnp.sum(jnp.diag(x.reshape(2, 3), 1) * y[:2]) + jnp.sum(jnp.diag(x, -1)
                                                                                 @ jnp.diag(jnp.pad(y, (0, 1))))),
    "triangles": ("sum(tril(reshape(x, (2, 3))) * 2.0 + triu(reshape(y, (3, 2)), 1).T * reshape(x, (2, 3)))",
                  lambda x, y: jnp.sum(jnp.tril(x.reshape(2, 3)) * 2.0 + jnp.triu(y.reshape(3, 2), 1).T
                                       * x.reshape(2, 3))),
    "trace": ("trace(outer(x, y)) + trace(reshape(x, (2, 3)), 1) * trace(reshape(y, (3, 2)))",
              lambda x, y: jnp.trace(jnp.outer(x, y)) + jnp.trace(x.reshape(2, 3), 1) * jnp.trace(y.reshape(3, 2))),
    "like": ("sum(full_like(x, y[0]) * x + zeros_like(y) + ones_like(x) * y)",
             lambda x, y: jnp.sum(jnp.full_like(x, y[0]) * x + jnp.zeros_like(y) + jnp.ones_like(x) * y)),
}


@pytest.fixture(scope="module")
def grad_cases():
    src = "".join(f"def case_{name}(x: f64[6], y: f64[6]) -> f64:\n    return {text}\n\n"
                  for name, (text, _) in GRADS.items())
    return arrc.loads(src)


@pytest.mark.parametrize("name", list(GRADS))
def test_gradients_match_jax(grad_cases, name):
    assert_value_and_grad_match_jax(grad_cases["case_" + name], GRADS[name][1])


def test_gradients_at_ties_and_zeros_follow_jax():
    """logaddexp(a, a) and softplus(0) have derivative 1/2 per operand, as JAX's custom rule gives."""
    mod = arrc.loads("def f(x: f64[3], y: f64[3]) -> f64:\n    return sum(logaddexp(x, y) + softplus(x))\n")
    x = np.array([0.0, 1.5, -2.0])
    gx, gy = arrc.grad(mod.f, argnums=(0, 1))(x, x.copy())
    wx, wy = jax.grad(lambda a, b: jnp.sum(jnp.logaddexp(a, b) + jax.nn.softplus(a)), argnums=(0, 1))(x, x.copy())
    np.testing.assert_allclose(gx, wx, rtol=1e-14)
    np.testing.assert_allclose(gy, wy, rtol=1e-14)


def test_exact_gelu_differentiates_as_jax():
    """gelu(approximate=false) uses erfc, as jax.nn.gelu does (1 + erf would round the far negative tail to
    0); erfc's derivative is -2/sqrt(pi) exp(-x^2)."""
    mod = arrc.loads("def f(x: f64[5]) -> f64:\n    return sum(gelu(x, approximate=false))\n")
    x = np.array([-6.0, -1.0, 0.0, 0.5, 3.0])
    np.testing.assert_allclose(arrc.grad(mod.f)(x), jax.grad(lambda x: jnp.sum(jax.nn.gelu(x, approximate=False)))(x),
                               rtol=1e-13, atol=1e-300)


# ---- diagnostics -----------------------------------------------------------------------------------------
SIGNATURE = "def f(x: f32[n], m: f32[n, 3], t: f32[2, 3, 4], b: bool[3, 3], u: u8[3], s: i32) -> f32:\n    v = "
DIAGNOSTICS = [       # (the call, code, the text its span covers, a word of the message)
    ("gelu(x, approximate=x)", "E0204", "approximate=x", "approximate"),
    ("logaddexp(x, m)", "E0202", "logaddexp(x, m)", "broadcast"),
    ("hypot(x, \"a\")", "E0210", "\"a\"", "operand"),
    ("isclose(x, x, rtol=m)", "E0204", "rtol=m", "rtol"),
    ("allclose(x, x, equal_nan=x)", "E0204", "equal_nan=x", "equal_nan"),
    ("zeros_like(x, dtype=3)", "E0210", "dtype=3", "dtype"),
    ("full_like(x, m)", "E0202", "m", "broadcast"),
    ("full_like(u, 300)", "E0211", "300", "300"),
    ("tensordot(m, t, axes=3)", "E0204", "axes=3", "axes"),
    ("tensordot(m, t)", "E0202", "tensordot(m, t)", "contract"),
    ("tensordot(m, t, axes=((1,), (0, 1)))", "E0204", "axes=((1,), (0, 1))", "1 axis(es) of x"),
    ("tensordot(m, t, axes=((1,), (5,)))", "E0204", "axes=((1,), (5,))", "out of range"),
    ("tensordot(m, t, axes=[1, 0, 1])", "E0204", "axes=[1, 0, 1]", "a pair"),
    ("tensordot(b, b, 1)", "E0201", "tensordot(b, b, 1)", "bool"),
    ("roll(m, 1, axis=2)", "E0204", "axis=2", "out of range"),
    ("roll(x, 1.5)", "E0204", "1.5", "must be an integer"),
    ("roll(m, (1, 2, 3), axis=(0, 1))", "E0204", "(1, 2, 3)", "shifts"),
    ("diag(t)", "E0204", "t", "1-D or 2-D"),
    ("diag(m, k=s)", "E0207", "k=s", "compile time"),
    ("tril(x)", "E0204", "x", "rank 2"),
    ("triu(m, k=1.5)", "E0204", "k=1.5", "integer"),
    ("trace(x)", "E0204", "x", "rank 2"),
    ("trace(m, axis1=1, axis2=-1)", "E0204", "axis2=-1", "different"),
    ("trace(t, axis1=3)", "E0204", "axis1=3", "out of range"),
]


@pytest.mark.parametrize("call, code, spanned, word", DIAGNOSTICS, ids=[d[0] for d in DIAGNOSTICS])
def test_wrong_inputs_get_diagnostics(call, code, spanned, word):
    with pytest.raises(arrc.CompileError) as info:
        arrc.loads(SIGNATURE + call + "\n    return 0.0\n")
    diag = info.value.diagnostics[0]
    line = SIGNATURE.splitlines()[1] + call
    assert (diag.code, diag.span.line, diag.span.end_line) == (code, 2, 2), (diag.code, diag.span, diag.message)
    assert line[diag.span.col - 1:diag.span.end_col - 1] == spanned, diag.message
    assert word in diag.message


@pytest.mark.parametrize("typo, name", [("sqaure", "square"), ("logaddexpp", "logaddexp"),
                                        ("zero_like", "zeros_like"), ("hypto", "hypot"), ("tensor_dot", "tensordot")])
def test_did_you_mean_finds_the_new_names(typo, name):
    with pytest.raises(arrc.CompileError) as info:
        arrc.loads(f"def f(x: f32[3]) -> f32[3]:\n    return {typo}(x)\n")
    diag = info.value.diagnostics[0]
    assert diag.code == "E0101" and f"`{name}`" in (diag.help or "")


# ---- what they lower to ------------------------------------------------------------------------------------
def test_they_lower_to_plain_stablehlo():
    """No custom calls: formulas of StableHLO ops (so autodiff's rules cover them), locations named by the
    builtin."""
    mod = load("def f(x: f32[4, 4], v: f32[4]) -> (f32[4], f32[4, 4], f32[3], f32[6, 6], f32[4, 4], f32):\n"
               "    return log2(v), roll(x, 1, axis=1), diag(x, 1), diag(v, -2), tril(x), trace(x)\n")
    text = lower_text(mod, "f", "f32[4, 4]", "f32[4]")
    filecheck(text, """
        CHECK: stablehlo.log
        CHECK: stablehlo.divide
        CHECK: stablehlo.slice {{.*}}[0:4, 3:4]
        CHECK: stablehlo.slice {{.*}}[0:4, 0:3]
        CHECK: stablehlo.concatenate {{.*}}dim = 1
        CHECK: stablehlo.slice {{.*}}[1:12:5]
        CHECK: stablehlo.pad {{.*}}low = [12], high = [2], interior = [6]
        CHECK: stablehlo.compare LE
        CHECK: stablehlo.select
        CHECK: stablehlo.compare EQ
        CHECK: stablehlo.select
        CHECK: stablehlo.reduce{{.*}}stablehlo.add across dimensions = [0, 1]
        CHECK-NOT: custom_call
    """)
    assert 'loc("log2"' in text and 'loc("roll"' in text and 'loc("diag"' in text and 'loc("trace"' in text


def test_method_forms_are_the_builtins():
    """NumPy's array methods: `x.sum()` is `sum(x)`; `reshape`/`transpose` also take their integers
    unpacked, `flatten`/`ravel` are `reshape(x, (-1,))`."""
    mod = arrc.loads("""
def f(x: f64[2, 3]) -> (f64, f64[3], f64[2], f64[3, 2], f64[6], f64[3, 2], f64[2, 3], i32[2], f64[6], f64[2]):
    return x.sum(), x.mean(axis=0), x.max(axis=1), x.reshape(3, 2), x.flatten(), x.transpose(1, 0), \\
        x.clip(0.0, 0.5), x.argmax(axis=1), x.ravel().cumsum(), x.std(axis=1, ddof=1)
""")
    x = np.random.default_rng(13).standard_normal((2, 3))
    want = (x.sum(), x.mean(axis=0), x.max(axis=1), x.reshape(3, 2), x.flatten(), x.transpose(1, 0),
            x.clip(0, 0.5), x.argmax(axis=1), x.ravel().cumsum(), x.std(axis=1, ddof=1))
    for got, w in zip(mod.f(x), want):
        np.testing.assert_allclose(got, w, rtol=1e-13)
    with pytest.raises(arrc.CompileError, match=r"E0210.*has no method `foo`(.|\n)*the methods are .astype, .sum"):
        arrc.loads("def f(x: f64[2]) -> f64:\n    return x.foo()\n")
    with pytest.raises(arrc.CompileError, match=r"E0103.*`.flatten\(\)` takes no arguments"):
        arrc.loads("def f(x: f64[2]) -> f64[2]:\n    return x.flatten(1)\n")


def test_integer_array_literals_keep_full_precision_until_they_take_a_dtype():
    """Issue 17: `[9007199254740993, -1]` as i64[2] (directly or through `i64(...)`) is exact; the range is
    checked where the literal takes its dtype."""
    mod = arrc.loads("def a() -> i64[2]:\n    return [9007199254740993, -1]\n"
                     "def b() -> i64[2]:\n    return i64([9007199254740993, -1])\n")
    for f in (mod.a, mod.b):
        assert np.asarray(f()).tolist() == [9007199254740993, -1]
    with pytest.raises(arrc.CompileError, match=r"E0211.*literal 3000000000 is out of range for i32"):
        arrc.loads("def c(x: i32[2]) -> i32[2]:\n    return x + [3000000000, -1]\n")


U64_MAX = 2**64 - 1


@pytest.mark.parametrize("body, want", [
    (f"return [{U64_MAX}, 1]", [U64_MAX, 1]),
    (f"return x | [{U64_MAX}, 0]", [U64_MAX, 2]),
    (f"return u64([[{U64_MAX}, 1], [2, 3]])[0]", [U64_MAX, 1]),
    (f"return where(x > 2, [{U64_MAX}, 1], u64(0))", [U64_MAX, 0]),
    (f"return u64([{U64_MAX}, 1]) + [1, 2]", [0, 3]),
])
def test_u64_literals_beyond_i64_are_exact(body, want):
    """NumPy makes float64 of `[2**64 - 1, 1]`, which read back as u64 was `[0, 1]`: a literal's integers
    are exact in the narrowest 64-bit dtype that holds them all."""
    mod = arrc.loads(f"def f(x: u64[2]) -> u64[2]:\n    {body}\n")
    got = mod.f(np.array([3, 2], np.uint64))
    assert got.dtype == np.uint64 and got.tolist() == want


@pytest.mark.parametrize("literal, shape", [("[2 ** 64]", "1"), (f"[-1, {U64_MAX}]", "2"),
                                            ("[[2 ** 64], [1]]", "2, 1")])     # (a literal 2**64 is E0211 itself)
def test_integer_literals_beyond_every_dtype_are_E0211(literal, shape):
    with pytest.raises(arrc.CompileError, match=r"E0211(.|\n)*no integer dtype holds"):
        arrc.loads(f"def f() -> u64[{shape}]:\n    return {literal}\n")


@pytest.mark.parametrize("expr, want", [("sum([3000000000, 1])", 3000000001), ("max([3000000000, 1])", 3000000000),
                                        ("sort([3000000000, 1])[0]", 1), ("[3000000000, 1][0]", 3000000000),
                                        ("abs(-3000000000)", 3000000000), ("(-[3000000000, 1])[0]", -3000000000),
                                        ("flip([3000000000, 1])[1]", 3000000000),
                                        ("concatenate(([3000000000, 1], [2]))[0]", 3000000000)])
def test_an_integer_literal_computed_in_its_own_i32_is_range_checked(expr, want):
    """A literal past i32 that an operation takes as it is (no other operand gives it a dtype) is E0211 at
    the literal, as `jnp.asarray(3000000000)` is an OverflowError without x64: before, it wrapped silently
    (`max([3000000000, 1])` was 1). With one element written `i64(...)`, it computes in i64."""
    with pytest.raises(arrc.CompileError, match=r"E0211(.|\n)*literal -?3000000000 is out of range for i32"
                                                r"(.|\n)*write `i64\("):
        arrc.loads(f"def f() -> i32:\n    return {expr}\n").f()
    wide = expr.replace("3000000000", "i64(3000000000)").replace("[2]", "[i64(2)]")
    assert arrc.loads(f"def f() -> i64:\n    return {wide}\n").f() == want


def test_float_arithmetic_of_literals_is_exact_in_f64_until_it_takes_a_dtype():
    """`1.0 / 3.0` is Python's (f64) value, as JAX with x64 sees it, rounded once where it takes its dtype:
    a declared f64 const or result keeps it (before: 0.3333333432674408, rounded through f32)."""
    mod = arrc.loads("const E: f64 = 1.0 / 3.0\nconst B: f64 = 0.1 + 0.2\n"
                     "def f(x: f64[2]) -> (f64, f64, f64[2], f64, f32, f32):\n"
                     "    return E, B, x * (1.0 / 3.0), 2 * 0.1 - 1.5, 1.0 / 3.0, 0.1 * 3\n")
    x = np.array([1.0, -1.0])
    e, b, scaled, mixed, e32, b32 = mod.f(x)
    assert (float(e), float(b), float(mixed)) == (1.0 / 3.0, 0.1 + 0.2, 2 * 0.1 - 1.5)
    np.testing.assert_array_equal(scaled, x * (1.0 / 3.0))
    assert (e32, b32) == (np.float32(1.0 / 3.0), np.float32(0.1 * 3))


def test_math_of_literals_is_exact_in_f64_until_it_takes_a_dtype():
    """`x_f64 * sqrt(2.0)`, `1 / sqrt(2.0 * pi)`, `exp(-0.5)`, `2.0 ** 0.5`, `abs(-0.1)`: as jax.numpy with x64
    (a weak f64 value), not computed at run time in the literals' f32 (before: sqrt(2.0) was 1.4142135381698608
    there). Where it takes f32 it is rounded once; a non-finite value (`log(-1.0)`) is left to run time."""
    src = ("const C: f64 = 1.0 / sqrt(2.0 * pi)\n"
           "def f(x: f64[2]) -> (f64, f64[2], f64[2], f64[2], f32, f32):\n"
           "    return C, x * sqrt(2.0), x * exp(-0.5) + log(3.0), x * 2.0 ** 0.5 + abs(-0.1) * tanh(2), "
           "sigmoid(0.3) * 3, log(-1.0)\n")
    x = np.array([1.0, -3.0])
    c, a, b, d, s32, nan32 = arrc.loads(src).f(x)
    assert float(c) == float(1.0 / jnp.sqrt(2.0 * jnp.pi))
    np.testing.assert_array_equal(a, x * jnp.sqrt(2.0))
    np.testing.assert_allclose(b, x * jnp.exp(-0.5) + jnp.log(3.0), rtol=1e-15)
    np.testing.assert_allclose(d, x * 2.0 ** 0.5 + jnp.abs(-0.1) * jnp.tanh(2.0), rtol=1e-15)
    assert s32 == np.float32(jax.nn.sigmoid(0.3) * 3) and np.isnan(nan32)
    assert a.dtype == np.float64 and s32.dtype == np.float32
