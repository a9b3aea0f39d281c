"""Scans, sorting and shape-safe selection: cumsum cumprod cummax cummin (axis=None flattens, as NumPy),
sort argsort (stable, NaN last) top_k (largest first, lower index first on ties, as jax.lax.top_k),
nonzero(mask, size=N, fill=v), and pad/tile/flip used with them; against NumPy / jax.numpy (x64 on).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_close, cached_module

import arrc

SRC = """\
def scans2(x: f32[n, m]) -> (f32[n, m], f32[n, m], f32[n, m], f32[n, m], f32[n * m]):
    return cumsum(x, axis=0), cumprod(x, axis=1), cummax(x, axis=-1), cummin(x, axis=0), cumsum(x)

def scans3(x: f64[a, b, c]) -> (f64[a, b, c], f64[a, b, c], f64[a, b, c], f64[a * b * c]):
    return cumsum(x, axis=1), cumprod(x, axis=-1), cummax(x, axis=0), cummin(x)

def scans1(x: f64[n]) -> (f64[n], f64[n], f64[n], f64[n]):
    return cumsum(x), cumprod(x), cummax(x), cummin(x)

def int_scans(x: i32[n]) -> (i32[n], i32[n], i32[n], i32[n]):
    return cumsum(x), cumprod(x), cummax(x), cummin(x)

def i64_scans(x: i64[n]) -> (i64[n], i64[n]):
    return cumsum(x), cumprod(x)

def small_int_scans(x: u8[n], y: i8[n]) -> (u32[n], i32[n], u8[n], i8[n]):
    return cumsum(x), cumsum(y), cummax(x), cummin(y)

def bool_cumsum(x: bool[n]) -> i32[n]:
    return cumsum(x)

def bool_scans(x: bool[n, m]) -> (bool[n, m], bool[n * m], i32[n, m]):
    return cummax(x, axis=1), cummin(x), cumprod(x, axis=0)

def sorts(x: f32[n, m]) -> (f32[n, m], i32[n, m], f32[n, m], i32[n, m]):
    return sort(x), argsort(x), sort(x, axis=0), argsort(x, axis=0)

def flat_sorts(x: f32[a, b, c], y: i32[n]) -> (f32[a * b * c], i32[a * b * c], i32[n], i32[n]):
    return sort(x, axis=None), argsort(x, axis=None), sort(y, axis=None), argsort(y, axis=None)

def sorts64(x: f64[n]) -> (f64[n], i32[n]):
    return sort(x), argsort(x)

def int_sorts(x: i64[n], u: u8[n], b: bool[n]) -> (i64[n], i32[n], u8[n], bool[n]):
    return sort(x), argsort(x), sort(u), sort(b)

def topk(x: f32[n, m]) -> (f32[n, 2], i32[n, 2]):
    return top_k(x, 2)

def topk_int(x: i32[n]) -> (i32[3], i32[3]):
    return top_k(x, 3)

def topk_all(x: f64[9]) -> (f64[9], i32[9]):
    return top_k(x, 9)

def nz(mask: bool[n]) -> i32[3]:
    return nonzero(mask, size=3, fill=-1)

def nz_default_fill(mask: bool[n]) -> i32[3]:
    return nonzero(mask, size=3)

def nz_numbers(x: f32[n]) -> i32[4]:
    return nonzero(x, size=4, fill=-1)

def nz2(mask: bool[a, b]) -> (i32[4], i32[4]):
    return nonzero(mask, size=4, fill=-1)

def masked_values(x: f32[n]) -> f32[3]:
    return x[nonzero(x > 0.0, size=3, fill=0)]

def median(x: f64[n]) -> f64:
    s = sort(x)
    return 0.5 * (s[(n - 1) // 2] + s[n // 2])

def moving_sum(x: f32[n]) -> f32[n - 2]:
    c = cumsum(pad(x, (1, 0)))
    return c[3:] - c[:n - 2]

def running_mean(x: f64[n]) -> f64[n]:
    return cumsum(x) / arange(1, n + 1, dtype=f64)

def flip_scan(x: f32[n]) -> f32[n]:
    return flip(cumsum(flip(x)))

def tiled_max(x: f32[n]) -> f32[3 * n]:
    return cummax(tile(x, 3))

def rank_of(x: f32[n]) -> i32[n]:
    return argsort(argsort(x))

def scan_in_loop(x: f32[n], k: i32) -> f32[n]:
    y = x
    for i in range(k):
        y = cumsum(y) / n
    return y
"""


@pytest.fixture(scope="module")
def mod():
    return cached_module(SRC, "scans.arr")


def rng(seed=0):
    return np.random.default_rng(seed)


def numpy_cummax(x, axis):
    return np.maximum.accumulate(x, axis=axis)


def numpy_cummin(x, axis):
    return np.minimum.accumulate(x, axis=axis)


# ---- cumulative scans -------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1])
def test_float_scans_along_axes(mod, seed):
    x = rng(seed).uniform(-2, 2, (3, 5)).astype(np.float32)
    got = mod.scans2(x)
    want = [jnp.cumsum(x, axis=0), jnp.cumprod(x, axis=1), jax.lax.cummax(x, axis=1),
            jax.lax.cummin(x, axis=0), jnp.cumsum(x)]
    for g, w in zip(got, want):
        assert np.asarray(g).dtype == np.float32
        assert_close(g, w, rtol=1e-5, atol=1e-5)


def test_scans_rank3_f64(mod):
    x = rng(2).uniform(0.5, 1.5, (2, 3, 4))
    got = [np.asarray(v) for v in mod.scans3(x)]
    want = [np.cumsum(x, axis=1), np.cumprod(x, axis=-1), numpy_cummax(x, 0), numpy_cummin(x.ravel(), 0)]
    for g, w in zip(got, want):
        assert g.dtype == np.float64
        assert_close(g, w, "f64")


def test_f64_cumsum_keeps_precision(mod):
    x = np.array([1e8, 0.25, 0.25, 0.125, -1e8, 1e-3])
    got = [np.asarray(v) for v in mod.scans1(x)]
    assert_close(got[0], np.cumsum(x), "f64", atol=1e-7)
    assert got[0][3] == 100000000.625                  # lost in f32


def test_scans_with_nan(mod):
    x = np.array([3.0, 1.0, np.nan, 5.0, 0.5])
    cs, cp, cmax, cmin = (np.asarray(v) for v in mod.scans1(x))
    assert_close(cs, np.cumsum(x), "f64")
    assert_close(cp, np.cumprod(x), "f64")
    assert_close(cmax, numpy_cummax(x, 0), "f64")       # NaN propagates, as np.maximum.accumulate
    assert_close(cmin, numpy_cummin(x, 0), "f64")


def test_integer_scans(mod):
    x = np.array([3, -1, 4, -1, 5, -9, 2, 6], np.int32)
    got = [np.asarray(v) for v in mod.int_scans(x)]
    want = [np.cumsum(x), np.cumprod(x), numpy_cummax(x, 0), numpy_cummin(x, 0)]
    for g, w in zip(got, want):
        assert g.dtype == np.int32
        np.testing.assert_array_equal(g, w.astype(np.int32))


def test_int32_cumsum_wraps_like_numpy(mod):
    x = np.array([2**31 - 1, 1, 5], np.int32)
    np.testing.assert_array_equal(np.asarray(mod.int_scans(x)[0]), np.cumsum(x, dtype=np.int32))


def test_i64_scans(mod):
    x = np.array([2**40, -5, 3, 3], np.int64)
    cs, cp = (np.asarray(v) for v in mod.i64_scans(x))
    assert cs.dtype == np.int64 and cp.dtype == np.int64
    np.testing.assert_array_equal(cs, np.cumsum(x))
    np.testing.assert_array_equal(cp, np.cumprod(x))


def test_small_integer_cumsum_accumulates_in_32_bits(mod):
    # as `sum`: small integers accumulate in 32 bits, so the running sum of u8/i8 does not wrap
    u = np.array([200, 3, 255, 0, 3], np.uint8)
    i = np.array([100, 100, -3, 120, -128], np.int8)
    cu, ci, mu, mi = (np.asarray(v) for v in mod.small_int_scans(u, i))
    assert (cu.dtype, ci.dtype, mu.dtype, mi.dtype) == (np.uint32, np.int32, np.uint8, np.int8)
    np.testing.assert_array_equal(cu, np.cumsum(u.astype(np.int64)))
    np.testing.assert_array_equal(ci, np.cumsum(i.astype(np.int64)))
    np.testing.assert_array_equal(mu, numpy_cummax(u, 0))
    np.testing.assert_array_equal(mi, numpy_cummin(i, 0))


def test_bool_cumsum_counts(mod):
    b = np.array([True, False, True, True, False])
    out = np.asarray(mod.bool_cumsum(b))
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, np.cumsum(b))


def test_bool_cummax_cummin_stay_bool_as_numpy(mod):
    """cummax/cummin of bool widened to i32 as cumsum does (np.maximum.accumulate keeps bool)."""
    b = rng(3).random((3, 4)) < 0.5
    mx, mn, pr = (np.asarray(a) for a in mod.bool_scans(b))
    assert (mx.dtype, mn.dtype, pr.dtype) == (np.bool_, np.bool_, np.int32)
    np.testing.assert_array_equal(mx, np.maximum.accumulate(b, axis=1))
    np.testing.assert_array_equal(mn, np.minimum.accumulate(b.ravel()))
    np.testing.assert_array_equal(pr, np.cumprod(b, axis=0))


def test_scan_lowering(mod):
    text = mod.scans1.lower(arrc.spec("f64[5]")).as_text()
    assert text.count("stablehlo.reduce_window") == 4
    assert "f32" not in text


# ---- sort / argsort ---------------------------------------------------------------------------
def test_sort_and_argsort_axes(mod):
    x = np.array([[3, np.nan, 1, 1], [2, 2, -np.inf, 0], [0, -1, np.inf, 1]], np.float32)
    got = mod.sorts(x)
    want = [np.sort(x), np.argsort(x, kind="stable"), np.sort(x, axis=0), np.argsort(x, axis=0, kind="stable")]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), w)


def test_sort_axis_none_sorts_the_flattened_array_as_numpy(mod):
    """sort/argsort(x, axis=None) was E0101 undefined name `None` (cumsum's axis=None flattens)."""
    x = rng(2).choice(np.array([np.nan, -1.0, 0.0, 2.0, 2.0], np.float32), size=(2, 3, 4))
    y = np.array([3, 1, 3, 0], np.int32)
    want = (np.sort(x, axis=None), np.argsort(x, axis=None, kind="stable"), np.sort(y, axis=None),
            np.argsort(y, axis=None, kind="stable"))
    got = [np.asarray(g) for g in mod.flat_sorts(x, y)]
    assert [g.dtype for g in got] == [np.float32, np.int32, np.int32, np.int32]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("seed", [0, 3])
def test_sort_random_f64_matches_jax(mod, seed):
    x = rng(seed).integers(-3, 4, 40).astype(np.float64)      # many ties: stability matters
    x[::7] = np.nan
    s, a = (np.asarray(v) for v in mod.sorts64(x))
    assert s.dtype == np.float64 and a.dtype == np.int32
    np.testing.assert_array_equal(s, jnp.sort(x))
    np.testing.assert_array_equal(a, jnp.argsort(x))
    np.testing.assert_array_equal(a, np.argsort(x, kind="stable"))


def test_sort_integers_and_bools(mod):
    x = np.array([2**40, -5, 3, 3, -(2**50)], np.int64)
    u = np.array([200, 3, 255, 0, 3], np.uint8)
    b = np.array([True, False, True, False, False])
    sx, ax, su, sb = (np.asarray(v) for v in mod.int_sorts(x, u, b))
    np.testing.assert_array_equal(sx, np.sort(x))
    np.testing.assert_array_equal(ax, np.argsort(x, kind="stable"))
    np.testing.assert_array_equal(su, np.sort(u))
    np.testing.assert_array_equal(sb, np.sort(b))
    assert sx.dtype == np.int64 and su.dtype == np.uint8 and sb.dtype == np.bool_


# ---- top_k ------------------------------------------------------------------------------------
def test_top_k_matches_lax(mod):
    x = np.array([[3, np.nan, 1, 1], [2, 2, -np.inf, 0], [0, -1, np.inf, 1]], np.float32)
    v, i = mod.topk(x)
    wv, wi = jax.lax.top_k(x, 2)
    np.testing.assert_array_equal(np.asarray(v), np.asarray(wv))
    np.testing.assert_array_equal(np.asarray(i), np.asarray(wi))


TOPK_DTYPES = {"f16": np.float16, "bf16": jnp.bfloat16, "f32": np.float32, "f64": np.float64}


@pytest.mark.parametrize("dt", TOPK_DTYPES)
def test_top_k_orders_signed_nans_zeros_and_ties_as_lax(dt):
    """lax.top_k's order is IEEE total order: -NaN below -inf, -0 below +0, NaN payloads by their bits."""
    dtype = np.dtype(TOPK_DTYPES[dt])
    bits = np.dtype(f"u{dtype.itemsize}")
    sign = bits.type(1 << (8 * dtype.itemsize - 1))
    nan = np.array(np.nan, dtype).view(bits)
    specials = np.array([nan, nan | 1, nan | sign, (nan | 1) | sign], bits).view(dtype)
    pool = np.concatenate([specials, np.array([np.inf, -np.inf, 0.0, -0.0, 1, -1, 2], dtype)])
    mod = arrc.loads(f"def f(x: {dt}[4, 12]) -> ({dt}[4, 7], i32[4, 7]):\n    return top_k(x, 7)\n",
                     filename="t.arr")
    x = rng(5).choice(pool, size=(4, 12))
    x[0] = pool[np.arange(12) % len(pool)]
    v, i = mod.f(x)
    wv, wi = jax.jit(lambda x: jax.lax.top_k(x, 7))(x)
    np.testing.assert_array_equal(np.asarray(v).view(bits), np.asarray(wv).view(bits))
    np.testing.assert_array_equal(np.asarray(i), np.asarray(wi))


def test_top_k_ties_take_lower_index_first(mod):
    x = np.array([1, 5, 5, 2, 5], np.int32)
    v, i = mod.topk_int(x)
    np.testing.assert_array_equal(np.asarray(v), [5, 5, 5])
    np.testing.assert_array_equal(np.asarray(i), [1, 2, 4])


def test_top_k_all_is_descending_sort(mod):
    x = rng(4).standard_normal(9)
    v, i = (np.asarray(a) for a in mod.topk_all(x))
    assert v.dtype == np.float64
    np.testing.assert_array_equal(v, np.sort(x)[::-1])
    np.testing.assert_array_equal(i, np.argsort(-x, kind="stable"))


def test_shape_variable_as_static_count():
    try:
        mod = arrc.loads("def f(x: f32[n]) -> (f32[n], i32[n], i32[n]):\n"
                         "    v, i = top_k(x, n)\n"
                         "    return v, i, nonzero(x > 0.0, size=n, fill=-1)\n", filename="t.arr")
    except arrc.CompileError as err:
        pytest.fail(str(err))
    x = np.array([1.0, -2.0, 3.0], np.float32)
    v, i, nz = (np.asarray(a) for a in mod.f(x))
    np.testing.assert_array_equal(v, [3.0, 1.0, -2.0])
    np.testing.assert_array_equal(nz, [0, 2, -1])


def test_top_k_out_of_range_is_a_compile_error():
    with pytest.raises(arrc.CompileError) as info:
        arrc.loads("def f(x: f32[4]) -> (f32[5], i32[5]):\n    return top_k(x, 5)\n", filename="t.arr")
    assert info.value.diagnostics[0].code == "E0204"


# ---- nonzero ---------------------------------------------------------------------------------
@pytest.mark.parametrize("mask", [[0, 1, 0, 1, 1, 1], [0, 0, 0, 0, 0, 0], [0, 0, 0, 1, 0, 0], [1, 1, 1, 0, 0, 0]])
def test_nonzero_with_size_and_fill(mod, mask):
    mask = np.array(mask, bool)
    got = np.asarray(mod.nz(mask))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, jnp.nonzero(mask, size=3, fill_value=-1)[0])
    np.testing.assert_array_equal(np.asarray(mod.nz_default_fill(mask)), jnp.nonzero(mask, size=3)[0])


def test_nonzero_size_larger_than_input(mod):
    mask = np.array([True, False], bool)
    np.testing.assert_array_equal(np.asarray(mod.nz(mask)), [0, -1, -1])


def test_nonzero_of_numbers_treats_nan_as_true(mod):
    x = np.array([0.0, np.nan, -0.0, 2.0, 0.0, 1.0], np.float32)
    np.testing.assert_array_equal(np.asarray(mod.nz_numbers(x)), [1, 3, 5, -1])


def test_nonzero_rank_2_gives_one_index_array_per_axis(mod):
    mask = np.array([[0, 1, 0], [1, 0, 1]], bool)
    rows, cols = (np.asarray(v) for v in mod.nz2(mask))
    wr, wc = jnp.nonzero(mask, size=4, fill_value=-1)
    np.testing.assert_array_equal(rows, wr)
    np.testing.assert_array_equal(cols, wc)


def test_nonzero_feeds_a_gather(mod):
    x = np.array([-1.0, 2.0, -3.0, 4.0, 5.0, 6.0], np.float32)
    assert_close(mod.masked_values(x), [2.0, 4.0, 5.0])


# ---- combined with pad/tile/flip and control flow ------------------------------------------------
@pytest.mark.parametrize("n", [1, 4, 7])
def test_median_via_sort(mod, n):
    x = rng(n).standard_normal(n)
    assert float(np.asarray(mod.median(x))) == np.median(x)


def test_moving_sum_via_pad_and_cumsum(mod):
    x = np.arange(1, 8, dtype=np.float32)
    assert_close(mod.moving_sum(x), np.convolve(x, np.ones(3), "valid"))


def test_running_mean_f64(mod):
    x = rng(5).standard_normal(10)
    assert_close(mod.running_mean(x), np.cumsum(x) / np.arange(1, 11), "f64")


def test_reverse_cumsum_via_flip(mod):
    x = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    assert_close(mod.flip_scan(x), np.cumsum(x[::-1])[::-1])


def test_cummax_of_tile(mod):
    x = np.array([2.0, -1.0, 5.0], np.float32)
    assert_close(mod.tiled_max(x), numpy_cummax(np.tile(x, 3), 0))


def test_ranks_via_double_argsort(mod):
    x = np.array([0.3, -2.0, 7.0, 0.0, 1.5], np.float32)
    np.testing.assert_array_equal(np.asarray(mod.rank_of(x)), np.argsort(np.argsort(x)))


@pytest.mark.parametrize("k", [0, 1, 3])
def test_scan_inside_loop(mod, k):
    x = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    y = x.copy()
    for _ in range(k):
        y = np.cumsum(y) / 4
    assert_close(mod.scan_in_loop(x, k), y, rtol=1e-6)
