"""Reductions end to end against jax.numpy (x64 on): every reduction, dtype families, axis forms, keepdims.

All cases for one input dtype run in ONE compiled arr function (a tuple of results), so the suite
compiles a handful of programs instead of hundreds.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import jax.scipy.special
import ml_dtypes
import numpy as np
import pytest
from conftest import assert_close, cached_module, filecheck, np_dtype, sample, short_name

import arrc
from arrc.compiler.types import DTYPES

SHAPE = (2, 3, 4)
DIMS = ("a", "b", "c")
AXES = [None, 0, 1, -1, (0, 2), (-1, 0), (0, 1, 2)]
KEEPDIMS = [False, True]
DTYPES_UNDER_TEST = ["f16", "bf16", "f32", "f64", "i8", "i32", "i64", "u8", "u32", "bool"]

ORACLES = {
    "sum": jnp.sum, "prod": jnp.prod, "mean": jnp.mean, "max": jnp.max, "min": jnp.min, "any": jnp.any,
    "all": jnp.all, "var": jnp.var, "std": jnp.std, "logsumexp": jax.scipy.special.logsumexp,
    "argmax": jnp.argmax, "argmin": jnp.argmin,
}


def result_dtype(op: str, dt: str) -> str:
    """arr's result dtype (JAX with x64 would widen the integer accumulators and indices to 64 bits)."""
    d = DTYPES[dt]
    if op in ("sum", "prod"):
        if d.is_bool or (d.kind == "int" and d.bits < 32):
            return "i32"
        if d.kind == "uint" and d.bits < 32:
            return "u32"
        return dt
    if op in ("max", "min"):
        return dt
    if op in ("any", "all"):
        return "bool"
    if op in ("argmax", "argmin"):
        return "i32"
    return dt if d.is_float else ("f64" if d.bits == 64 else "f32")


def result_dims(axis, keepdims: bool) -> list[str]:
    axes = range(3) if axis is None else [a % 3 for a in (axis if isinstance(axis, tuple) else (axis,))]
    if keepdims:
        return ["1" if i in axes else d for i, d in enumerate(DIMS)]
    return [d for i, d in enumerate(DIMS) if i not in axes]


def arr_type(dt: str, dims: list[str]) -> str:
    return f"{dt}[{', '.join(dims)}]" if dims else dt


def call_text(op: str, var: str, axis, keepdims: bool) -> str:
    args = [var]
    if axis is not None:
        args.append(f"axis={axis}" if not isinstance(axis, tuple) else f"axis=({', '.join(map(str, axis))})")
    if keepdims:
        args.append("keepdims=true")
    return f"{op}({', '.join(args)})"


# The whole axis x keepdims matrix for a few (op, dtype) pairs; two variants for all the others
# (XLA compile time grows with every reduction in the batch).
FULL_MATRIX = {"f32": ("sum", "max", "argmax", "mean"), "i32": ("sum", "argmin"), "f64": ("logsumexp", "var")}
SMALL = [(None, False), ((0, 2), True)]
SMALL_ARG = [(None, False), (-1, True)]


def cases_for(dt: str) -> list[tuple]:
    out = []
    for op in ORACLES:
        if dt == "bool" and op not in ("sum", "prod", "max", "min", "any", "all", "argmax", "argmin", "mean"):
            continue
        arg = op in ("argmax", "argmin")
        if op in FULL_MATRIX.get(dt, ()):
            variants = [(a, k) for a in AXES for k in KEEPDIMS if not (arg and isinstance(a, tuple))]
        else:
            variants = SMALL_ARG if arg else SMALL
        out.extend((op, axis, keepdims) for axis, keepdims in variants)
    return out


def inputs_for(dt: str) -> dict:
    """Per-op input data, in ranges where every op is well defined and no integer accumulator overflows."""
    if dt == "bool":
        x = sample(dt, SHAPE)
        return {op: x for op in ORACLES}
    base = sample(dt, SHAPE, -3, 3)
    data = {op: base for op in ORACLES}
    if DTYPES[dt].is_float:
        data["prod"] = sample(dt, SHAPE, 0.5, 1.5, seed=1)
        x = base.astype(np.float64)
        x[0, 1, 2] = x[1, 2, 3] = x[0, 0, 0]          # ties for argmax/argmin
        data["argmax"] = data["argmin"] = x.astype(base.dtype)
    else:
        rng = np.random.default_rng(2)
        pool = [1, 2] if DTYPES[dt].kind == "uint" else [1, 2, -1]
        data["prod"] = rng.choice(pool, size=SHAPE).astype(np_dtype(dt))
    return data


@functools.lru_cache(maxsize=None)
def results_for(dt: str) -> dict:
    cases = cases_for(dt)
    data = inputs_for(dt)
    ops = list(dict.fromkeys(op for op, _, _ in cases))
    params = ", ".join(f"x_{op}: {dt}[{', '.join(DIMS)}]" for op in ops)
    outs = ", ".join(arr_type(result_dtype(op, dt), result_dims(axis, kd)) for op, axis, kd in cases)
    body = ", ".join(call_text(op, f"x_{op}", axis, kd) for op, axis, kd in cases)
    mod = cached_module(f"def f({params}) -> ({outs}):\n    return {body}\n")
    got = mod.f(*[data[op] for op in ops])

    def oracle(*xs):
        by_op = dict(zip(ops, xs))
        return [ORACLES[op](by_op[op], axis=axis, keepdims=kd) for op, axis, kd in cases]
    expected = jax.jit(oracle)(*[jnp.asarray(data[op]) for op in ops])
    return {case: (g, e) for case, g, e in zip(cases, got, expected)}


ALL_CASES = [(dt, *case) for dt in DTYPES_UNDER_TEST for case in cases_for(dt)]


@pytest.mark.parametrize("dt, op, axis, keepdims", ALL_CASES,
                         ids=[f"{op}-{dt}-axis={axis}-keep={int(kd)}" for dt, op, axis, kd in ALL_CASES])
def test_reduction_matches_jax(dt, op, axis, keepdims):
    got, expected = results_for(dt)[(op, axis, keepdims)]
    out = result_dtype(op, dt)
    assert short_name(got.dtype) == out
    assert got.shape == expected.shape
    rtol = atol = None
    if out in ("f16", "bf16") and op in ("var", "std", "mean", "sum", "logsumexp"):
        rtol, atol = (2e-2, 2e-2) if out == "bf16" else (4e-3, 4e-3)    # arr accumulates in the dtype itself
    assert_close(got, np.asarray(expected).astype(np.asarray(got).dtype), out, rtol=rtol, atol=atol)


# ---- values that need care ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def special():
    return cached_module(
        "def am(x: f32[n]) -> (i32, i32):\n    return argmax(x), argmin(x)\n\n"
        "def am2(x: f64[n, m]) -> (i32, i32[m], i32[n], i32[n, 1]):\n"
        "    return argmax(x), argmax(x, axis=0), argmin(x, axis=-1), argmax(x, axis=1, keepdims=true)\n\n"
        "def ami(x: i8[n]) -> (i32, i32):\n    return argmax(x), argmin(x)\n\n"
        "def amb(x: bool[n]) -> (i32, i32):\n    return argmax(x), argmin(x)\n\n"
        "def mm(x: f32[n]) -> (f32, f32, f32, f32):\n    return max(x), min(x), sum(x), logsumexp(x)\n\n"
        "def truth(x: f32[n]) -> (bool, bool):\n    return any(x), all(x)\n\n"
        "def stats(x: f64[n]) -> (f64, f64, f64, f64):\n"
        "    return var(x), var(x, ddof=1), std(x), std(x, ddof=1)\n\n"
        "def count(x: bool[n, m]) -> (i32[m], f32):\n    return sum(x, axis=0), mean(x)\n\n"
        "def ints(x: i32[n]) -> (i32, f32, i32, i32):\n    return sum(x), mean(x), max(x), min(x)\n\n"
        "def wide(x: i64[n]) -> (i64, f64, i64):\n    return sum(x), mean(x), prod(x)\n\n"
        "def keep_all(x: f32[n, m]) -> f32[1, 1]:\n    return sum(x, keepdims=true)\n\n"
        "def no_axes(x: f32[n, m]) -> f32[n, m]:\n    return sum(x, axis=())\n\n"
        "def scalar(x: f32) -> (f32, i32):\n    return sum(x), argmax(x)\n"
    )


@pytest.mark.parametrize("x", [
    [1.0, 3.0, 3.0, 2.0],                           # tie: first index
    [1.0, np.nan, 5.0, np.nan],                     # NaN counts as the maximum and the minimum: first NaN
    [np.nan, np.nan],
    [-np.inf, -np.inf, -np.inf],
    [np.inf, 1.0, np.inf],
    [2.0, -0.0, 0.0, -1.0, -1.0],
    [7.0],
])
def test_argmax_argmin_nan_and_ties(special, x):
    x = np.array(x, np.float32)
    amax, amin = special.am(x)
    assert int(amax) == np.argmax(x) == int(jnp.argmax(x))
    assert int(amin) == np.argmin(x) == int(jnp.argmin(x))


def test_argmax_over_axes_and_flattened(special):
    x = np.array([[1.0, 5.0, 5.0], [9.0, np.nan, 0.0], [9.0, 2.0, 2.0], [0.0, 0.0, 0.0]])
    flat, by_col, by_row, keep = special.am2(x)
    assert int(flat) == np.argmax(x) == 4                # index into the raveled array
    np.testing.assert_array_equal(np.asarray(by_col), np.argmax(x, axis=0))
    np.testing.assert_array_equal(np.asarray(by_row), np.argmin(x, axis=-1))
    np.testing.assert_array_equal(np.asarray(keep), np.argmax(x, axis=1)[:, None])


def test_argmax_integers_and_bool(special):
    x = np.array([-128, 127, 5, 127, -128], np.int8)
    assert [int(v) for v in special.ami(x)] == [1, 0]
    b = np.array([False, True, True, False])
    assert [int(v) for v in special.amb(b)] == [1, 0]
    assert [int(v) for v in special.amb(np.array([True, True]))] == [0, 0]


def test_max_min_sum_propagate_nan(special):
    got = [float(v) for v in special.mm(np.array([1.0, np.nan, 3.0], np.float32))]
    assert all(np.isnan(got))
    got = [float(v) for v in special.mm(np.array([1.0, -np.inf, np.inf], np.float32))]
    expected = [np.inf, -np.inf, np.nan, float(jax.scipy.special.logsumexp(np.array([1.0, -np.inf, np.inf])))]
    np.testing.assert_array_equal(got, np.array(expected, np.float32))


def test_logsumexp_is_stable(special):
    x = np.array([1000.0, 1000.0, -1000.0], np.float32)
    assert float(special.mm(x)[3]) == pytest.approx(1000.0 + np.log(2.0), rel=1e-6)
    assert float(special.mm(np.full(3, -np.inf, np.float32))[3]) == -np.inf


@pytest.mark.parametrize("x, expected", [
    ([0.0, -0.0, 0.0], (False, False)),
    ([np.nan, 0.0], (True, False)),                 # NaN is truthy
    ([1.0, np.nan, -2.0], (True, True)),
    ([0.0, 1e-30], (True, False)),
])
def test_any_all_on_floats(special, x, expected):
    got = special.truth(np.array(x, np.float32))
    assert (bool(got[0]), bool(got[1])) == expected


def test_var_std_ddof(special):
    x = np.array([1.0, 2.0, 4.0, 8.0, 1 + 2 ** -40])
    got = [float(v) for v in special.stats(x)]
    expected = [np.var(x), np.var(x, ddof=1), np.std(x), np.std(x, ddof=1)]
    np.testing.assert_allclose(got, expected, rtol=1e-14)


@pytest.mark.parametrize("name", ["f16", "bf16"])
def test_var_std_layer_norm_of_16_bit_floats_accumulate_in_f32_as_jax(name):
    """jnp.var and jax.nn.standardize (two-pass) accumulate 16-bit floats in f32 and round once: bit for bit.
    Before, they summed in f16/bf16: var of 4,096 values near 1000 was inf in f16 and 260.0 (not 8.06) in
    bf16, and layer_norm of rows near 100 all NaN."""
    mod = cached_module(f"def f(x: {name}[n]) -> ({name}, {name}, {name}[n]):\n"
                        f"    return var(x), std(x, ddof=1), layer_norm(x)\n")
    r = np.random.default_rng(3)
    for x in (1000 + r.uniform(0, 8, 4096), 100 + r.standard_normal(4096), r.standard_normal(100000)):
        x = x.astype(np_dtype(name))
        want = (jnp.var(x), jnp.std(x, ddof=1), jax.nn.standardize(x, algorithm="stable"))
        for got, w in zip(mod.f(x), want, strict=True):
            np.testing.assert_array_equal(np.asarray(got, np.float64), np.asarray(w, np.float64))


def test_var_and_std_without_degrees_of_freedom_are_nan_as_jax():
    """ddof at or past the count: NaN, as jnp.var (before: a negative variance, ddof = 4 of 3 gave -4.67)."""
    mod = cached_module("def f(x: f64[n]) -> (f64, f64, f64, f64):\n"
                        "    return var(x, ddof=4), std(x, ddof=3), var(x, ddof=2), var(x[:0])\n")
    got = mod.f(np.array([1.0, 2.0, 4.0]))
    assert np.isnan(got[:2]).all() and np.isnan(got[3]) and got[2] == jnp.var(np.array([1.0, 2.0, 4.0]), ddof=2)


def test_sum_of_bool_counts_and_int_mean_is_float(special):
    x = np.array([[True, False, True], [True, True, False]])
    counts, frac = special.count(x)
    assert counts.dtype == np.int32 and frac.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(counts), [2, 1, 1])
    assert float(frac) == pytest.approx(4 / 6)
    s, m, hi, lo = special.ints(np.array([2 ** 31 - 1, 1, -5], np.int32))
    assert int(s) == np.array([2 ** 31 - 1, 1, -5], np.int32).sum(dtype=np.int32)   # i32 accumulator wraps
    assert m.dtype == np.float32 and float(m) == pytest.approx((2 ** 31 - 5) / 3, rel=1e-6)
    assert (int(hi), int(lo)) == (2 ** 31 - 1, -5)


def test_i64_reductions_are_64_bit(special):
    x = np.array([2 ** 60, 1, 2], np.int64)
    s, m, p = special.wide(x)
    assert s.dtype == np.int64 and int(s) == 2 ** 60 + 3
    assert m.dtype == np.float64 and float(m) == pytest.approx((2 ** 60 + 3) / 3, rel=1e-15)
    assert int(p) == 2 ** 61


def test_keepdims_all_and_empty_axis_tuple(special):
    x = sample("f32", (2, 3))
    got = special.keep_all(x)
    assert got.shape == (1, 1)
    assert_close(got, np.sum(x, keepdims=True), "f32")
    np.testing.assert_array_equal(np.asarray(special.no_axes(x)), np.asarray(jnp.sum(x, axis=())))


def test_reduction_of_a_scalar(special):
    s, i = special.scalar(np.float32(2.5))
    assert float(s) == 2.5 and int(i) == 0


@pytest.mark.parametrize("src, code", [
    ("def f(x: f32[n]) -> f32:\n    return sum(x, axis=1)\n", "E0204"),
    ("def f(x: f32[n, m]) -> f32:\n    return sum(x, axis=(1, -1))\n", "E0204"),
    ("def f(x: f32[n, m]) -> i32:\n    return argmax(x, axis=(0, 1))\n", "E0204"),
    ("def f(x: f32[n]) -> f32:\n    return sum(x, keepdims=1)\n", "E0204"),
    ("def f(x: f32[n, m], k: i32) -> f32[m]:\n    return sum(x, axis=k)\n", "E0207"),
    ("def f(x: f32[n]) -> f32:\n    return sum(x, axes=0)\n", "E0103"),
    ("def f(x: f32[n]) -> f32:\n    return sum(x, 0, false, f32, 1)\n", "E0103"),
    ("def f(x: f32[n]) -> f32:\n    return sum(x, 0, false, 1)\n", "E0210"),      # the 4th is `dtype`
    ("def f(x: f32[n]) -> f32:\n    return var(x, ddof=x)\n", "E0204"),
])
def test_reduction_argument_errors(src, code):
    with pytest.raises(arrc.CompileError) as info:
        arrc.loads(src)
    assert info.value.diagnostics[0].code == code


@pytest.mark.parametrize("dt", ["f16", "bf16"])
def test_low_precision_sum_accumulates_in_f32(dt):
    mod = cached_module(f"def f(x: {dt}[n]) -> ({dt}, {dt}):\n    return sum(x), mean(x)\n")
    x = np.full(4096, 0.1).astype(ml_dtypes.bfloat16 if dt == "bf16" else np.float16)
    s, m = mod.f(x)
    np.testing.assert_array_equal(np.asarray(s), np.asarray(jnp.sum(x)))
    np.testing.assert_array_equal(np.asarray(m), np.asarray(jnp.mean(x)))


@pytest.mark.parametrize("op, out", [("min", "u64"), ("argmin", "i32")])
def test_u64_min_and_argmin(op, out):
    mod = cached_module(f"def f(x: u64[n]) -> {out}:\n    return {op}(x)\n")
    x = np.array([5, 2 ** 64 - 1, 3], np.uint64)
    assert int(mod.f(x)) == int(getattr(np, op)(x))


def test_u64_max_and_argmax():
    mod = cached_module("def f(x: u64[n]) -> (u64, i32, u64):\n    return max(x), argmax(x), sum(x)\n")
    x = np.array([5, 2 ** 64 - 1, 3], np.uint64)
    m, i, s = mod.f(x)
    assert int(m) == 2 ** 64 - 1 and int(i) == 1 and int(s) == (2 ** 64 - 1 + 8) % 2 ** 64


# ---- NaN at every size --------------------------------------------------------------------------------
# XLA:CPU hands a reduce whose body is a bare stablehlo.maximum/minimum to a vectorized kernel that drops
# NaN from about 10K elements on (jax.jit(jnp.max) misses them too); arr's max/min combiner is
# NaN-propagating by construction. The oracle is NumPy: a NaN propagates, argmax/argmin give the first NaN.
EXTREMES = {dt: cached_module(f"def f(x: {dt}[n]) -> ({dt}, {dt}, i32, i32):\n"
                              "    return max(x), min(x), argmax(x), argmin(x)\n")
            for dt in ("f16", "bf16", "f32", "f64")}


def with_nans(dt: str, n: int, nans, seed: int, specials=()) -> np.ndarray:
    """A normal sample of `n` values with NaN at `nans` (a count: random positions; or a list of indices)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n)
    for value in specials:                               # +-inf, at random positions
        x[rng.integers(n)] = value
    positions = rng.choice(n, nans, replace=False) if isinstance(nans, int) else nans
    x[positions] = np.nan
    return x.astype(np_dtype(dt))


def assert_extremes_match_numpy(dt: str, x: np.ndarray) -> None:
    got = EXTREMES[dt].f(x)
    wide = x.astype(np.float64)      # exact for every dtype here, and the order (hence each index) is kept
    np.testing.assert_array_equal(np.asarray(got[0]).astype(np.float64), np.max(wide))
    np.testing.assert_array_equal(np.asarray(got[1]).astype(np.float64), np.min(wide))
    assert (int(got[2]), int(got[3])) == (np.argmax(wide), np.argmin(wide))
    if dt in ("f32", "f64", "f16"):
        assert (int(got[2]), int(got[3])) == (np.argmax(x), np.argmin(x))


NAN_CASES = [("f32", n, nans, seed) for n in (10 ** 3, 10 ** 4, 10 ** 5, 10 ** 6)
             for seed, nans in enumerate((1, 3, 40))]
NAN_CASES += [("f32", 10 ** 6, [0], 0), ("f32", 10 ** 6, [10 ** 6 - 1], 1), ("f32", 10 ** 5, 0, 2)]
NAN_CASES += [("f64", n, nans, seed) for n in (10 ** 4, 10 ** 6) for seed, nans in enumerate((1, 5))]
NAN_CASES += [(dt, n, nans, seed) for dt in ("f16", "bf16") for n in (10 ** 3, 10 ** 5)
              for seed, nans in enumerate((1, 5))]


@pytest.mark.parametrize("dt, n, nans, seed", NAN_CASES,
                         ids=[f"{dt}-{n}-nans={nans}-seed={seed}" for dt, n, nans, seed in NAN_CASES])
def test_max_min_argmax_argmin_keep_nan_at_every_size(dt, n, nans, seed):
    assert_extremes_match_numpy(dt, with_nans(dt, n, nans, seed))


def test_max_min_keep_nan_at_ten_million():
    assert_extremes_match_numpy("f32", with_nans("f32", 10 ** 7, 2, seed=7))


@pytest.mark.parametrize("dt, n", [("f32", 10 ** 5), ("f32", 10 ** 6), ("f64", 10 ** 5), ("bf16", 10 ** 4)])
@pytest.mark.parametrize("nans", [0, 1, 4])
def test_infinities_with_and_without_nan(dt, n, nans):
    assert_extremes_match_numpy(dt, with_nans(dt, n, nans, seed=11, specials=(np.inf, -np.inf, np.inf, -np.inf)))


@pytest.mark.parametrize("n", [10, 10 ** 5])
def test_all_nan_and_all_infinite(n):
    assert_extremes_match_numpy("f32", np.full(n, np.nan, np.float32))
    assert_extremes_match_numpy("f32", np.full(n, -np.inf, np.float32))
    assert_extremes_match_numpy("f32", np.full(n, np.inf, np.float32))


def test_nan_over_axes_at_a_million_elements():
    mod = cached_module(
        "def f(x: f32[n, m]) -> (f32[m], f32[n], f32[n, 1], f32[m], i32[m], i32[n], i32[1, m], i32[n]):\n"
        "    return max(x, axis=0), max(x, axis=1), min(x, axis=-1, keepdims=true), min(x, axis=0), "
        "argmax(x, axis=0), argmax(x, axis=1), argmin(x, axis=0, keepdims=true), argmin(x, axis=1)\n")
    x = with_nans("f32", 10 ** 6, 300, seed=5).reshape(1000, 1000)    # some rows and columns clean, some not
    expected = [np.max(x, axis=0), np.max(x, axis=1), np.min(x, axis=-1, keepdims=True), np.min(x, axis=0),
                np.argmax(x, axis=0), np.argmax(x, axis=1), np.argmin(x, axis=0, keepdims=True),
                np.argmin(x, axis=1)]
    for got, want in zip(mod.f(x), expected):
        np.testing.assert_array_equal(np.asarray(got), want)


def test_elementwise_extremes_scans_and_sort_keep_nan_at_a_million_elements():
    mod = cached_module(
        "def f(x: f32[n], y: f32[n]) -> (f32[n], f32[n], f32[n], f32[n], f32[n], f32[n], f32[n], f32, f32):\n"
        "    return maximum(x, y), maximum(y, x), minimum(x, y), minimum(y, x), cummax(x), cummin(y), "
        "clip(x, -1.0, 1.0), sum(maximum(x, y)), max(x * 2.0)\n")
    n = 10 ** 6
    x, y = with_nans("f32", n, 30, seed=1), with_nans("f32", n, 30, seed=2)
    expected = [np.maximum(x, y), np.maximum(y, x), np.minimum(x, y), np.minimum(y, x),
                np.maximum.accumulate(x), np.minimum.accumulate(y), np.clip(x, -1, 1),
                np.float32(np.nan), np.float32(np.nan)]
    for got, want in zip(mod.f(x, y), expected):
        np.testing.assert_array_equal(np.asarray(got), want)
    srt = cached_module("def f(x: f32[n]) -> (f32[n], i32[n], f32[8], i32[8]):\n"
                        "    v, i = top_k(x, 8)\n    return sort(x), argsort(x), v, i\n")
    x = with_nans("f32", 10 ** 5, 5, seed=3)
    s, a, v, i = srt.f(x)
    np.testing.assert_array_equal(np.asarray(s), np.sort(x))
    np.testing.assert_array_equal(np.asarray(a), np.argsort(x, kind="stable"))
    np.testing.assert_array_equal(np.asarray(i)[:5], np.flatnonzero(np.isnan(x)))   # NaN first, in order
    np.testing.assert_array_equal(np.asarray(v)[5:], np.sort(x[~np.isnan(x)])[::-1][:3])


def test_argmin_reducer_is_jaxs():
    """argmin/argmax lower to the reducer `lax.argmin` lowers to (nine operations): a longer one, which
    also ordered two NaNs, made XLA:CPU split the reduction across threads and k-means ran 1.4-1.8x of
    `jax.jit` at 1,000-2,000 points (compiler/emit.py `arg_reduce`)."""
    mod = arrc.loads("def f(x: f32[4, 3]) -> i32[4]:\n    return argmin(x, axis=1)\n")
    text = mod.f.lower(np.ones((4, 3), np.float32)).as_text()
    body = text[text.index("reducer("):text.index("stablehlo.return")]
    filecheck(body, """
        CHECK: [[LT:%[0-9]+]] = stablehlo.compare LT, [[A:%arg[0-9]+]], [[B:%arg[0-9]+]], FLOAT
        CHECK-NEXT: [[NAN:%[0-9]+]] = stablehlo.compare NE, [[A]], [[A]], FLOAT
        CHECK-NEXT: [[PICK:%[0-9]+]] = stablehlo.or [[LT]], [[NAN]]
        CHECK-NEXT: [[EQ:%[0-9]+]] = stablehlo.compare EQ, [[A]], [[B]], FLOAT
        CHECK-NEXT: [[FIRST:%[0-9]+]] = stablehlo.compare LT
        CHECK-SAME: SIGNED
        CHECK-NEXT: [[TIE:%[0-9]+]] = stablehlo.and [[EQ]], [[FIRST]]
        CHECK-NEXT: stablehlo.select [[PICK]], [[A]], [[B]]
        CHECK-NEXT: [[TAKE:%[0-9]+]] = stablehlo.or [[PICK]], [[TIE]]
        CHECK-NEXT: stablehlo.select [[TAKE]]
    """)
    assert body.count("stablehlo.") == 9


# ---- quantiles -----------------------------------------------------------------------------------
QUANTILES = """
def q(x: f64[a, b, c]) -> (f64, f64[3, b], f64[a, 1, 1], f64[b], f64[c], f64[2, a, 1, c], f64[a])
    return (median(x), quantile(x, [0.1, 0.5, 0.9], axis=(0, 2)), percentile(x, 25, axis=(2, 1), keepdims=true),
            median(x, axis=(0, 2)), quantile(x, 0.5, axis=(0, 1), method="lower"),
            quantile(x, (0.3, 1.0), axis=1, keepdims=true, method="nearest"),
            quantile(x, 0.4, axis=(1, 2), method="midpoint"))
def small(x: f32[n]) -> (f32, f32)
    return median(x), percentile(x, 90.0, method="higher")
def ints(x: i32[n]) -> f32:
    return median(x)
""".replace(")\n    return", "):\n    return")


def test_quantiles_are_jnps():
    """median, quantile and percentile were E0101 "not in arr yet"; with levels known at compile time
    they are jnp's (methods linear, lower, higher, midpoint, nearest; a row with a NaN is NaN)."""
    mod = cached_module(QUANTILES, "quantiles.arr")
    x = np.random.default_rng(3).standard_normal((3, 4, 5))
    x[2, 1, 3] = np.nan
    want = (jnp.median(x), jnp.quantile(x, jnp.array([0.1, 0.5, 0.9]), axis=(0, 2)),
            jnp.percentile(x, 25, axis=(2, 1), keepdims=True), jnp.median(x, axis=(0, 2)),
            jnp.quantile(x, 0.5, axis=(0, 1), method="lower"),
            jnp.quantile(x, jnp.array([0.3, 1.0]), axis=1, keepdims=True, method="nearest"),
            jnp.quantile(x, 0.4, axis=(1, 2), method="midpoint"))
    for got, expected in zip(mod.q(x), want):
        np.testing.assert_allclose(got, expected, rtol=1e-14, equal_nan=True)
        assert got.shape == expected.shape
    v = np.random.default_rng(4).standard_normal(8).astype(np.float32)
    for got, expected in zip(mod.small(v), (jnp.median(v), jnp.percentile(v, 90.0, method="higher"))):
        np.testing.assert_allclose(got, expected, rtol=1e-6)
        assert got.dtype == expected.dtype
    assert mod.ints(np.array([4, 1, 3, 2], np.int32)) == jnp.median(np.array([4, 1, 3, 2], np.int32)) == 2.5
    median_of = arrc.loads("def m(x: f64[n]) -> f64:\n    return median(x)\n").m
    w = np.random.default_rng(5).standard_normal(6)
    np.testing.assert_allclose(arrc.grad(median_of)(w), jax.grad(jnp.median)(w))
    np.testing.assert_allclose(arrc.vmap(median_of)(x.reshape(12, 5)), jax.vmap(jnp.median)(x.reshape(12, 5)),
                               equal_nan=True)


@pytest.mark.parametrize("call, message", [
    ("quantile(x, y)", "`q` must be known at compile time, but it is a run-time value"),
    ("quantile(x, 1.5)", "`q` must lie in [0, 1], found 1.5"),
    ("percentile(x, [10, 101])", "`q` must lie in [0, 100], found [10.0, 101.0]"),
    ('quantile(x, 0.5, method="cubic")', "`method` must be one of 'linear', 'lower', 'higher', 'midpoint', "
                                          "'nearest', found 'cubic'"),
    ("median(zeros((0,)))", "quantiles of an empty array"),
    ("percentile(x, ())", "`q` must be a number or a list of them, found ()"),     # (an IndexError)
])
def test_quantile_mistakes(call, message):
    with pytest.raises(arrc.CompileError) as info:
        arrc.loads(f"def f(x: f32[3], y: f32) -> f32:\n    return {call}\n")
    assert message in info.value.diagnostics[0].message
    assert info.value.diagnostics[0].code == ("E0207" if "run-time" in message else "E0204")
