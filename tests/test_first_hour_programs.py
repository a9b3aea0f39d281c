"""Issue 17, "the first hour of a NumPy/JAX user": what the 38 real programs needed, end to end against
jax.numpy (x64 on, see conftest) and NumPy:

- `None`/`newaxis` in indexing and indexed assignment; `clip` with NumPy 2's `min=`/`max=`, NumPy 1's
  `a_min=`/`a_max=` or one bound; `sum`/`prod` with `dtype=`; W0006 (a narrow-integer sum that can
  overflow its 32-bit accumulator);
- `x[i:i + m]` with a shape variable `m` (a static length); `f32[dm // h]` in signatures;
- the scatter/gather names: `take`, `take_along_axis`, `searchsorted`, `add_at`, `bincount`, with their
  gradients against jax.grad and their diagnostics.

The rendered diagnostics are goldens (tests/golden/diagnostics/: W0006_*, E0206_shape_variable_only_in_quotient,
E0205_dimension_divided_by_zero, E0304_*, E0201_bitwise_wrong_operand, E0101_unknown_function_repeated,
E0206_bad_signature_no_cascade, E0103_clip_*).
"""
from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_value_and_grad_match_jax, lower_text

import arrc

RNG = np.random.default_rng(1717)


@functools.lru_cache(maxsize=None)
def load(src: str) -> arrc.Module:
    return arrc.loads(src)


def same(actual, expected) -> None:
    """Equal dtype, shape and values (NaNs where the oracle's)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    np.testing.assert_array_equal(actual, expected)


def diagnostics(src: str) -> list:
    with pytest.raises(arrc.CompileError) as info:
        arrc.loads(src)
    return info.value.diagnostics


def spanned(src: str, diag) -> str:
    """The source text under a one-line diagnostic's span."""
    assert diag.span.line == diag.span.end_line
    return src.splitlines()[diag.span.line - 1][diag.span.col - 1:diag.span.end_col - 1]


# ---- None / newaxis --------------------------------------------------------------------------------------
NEWAXIS = ["x[None, :]", "x[:, None]", "x[..., None]", "x[None]", "x[newaxis, 1]", "x[None, i]", "x[i, None]",
           "x[:, None, i]", "x[None, :, None, ..., None]", "x[None, v]", "x[v, None]", "x[None, w]", "x[:, None, w]",
           "x[None, 1:3, None]", "x[None, i:i + 2]", "x[-1, None, ::2]"]


def test_newaxis_indexing_matches_jax():
    x = RNG.standard_normal((3, 4))
    i, v, w = 1, np.array([2, 0, 1], np.int32), np.array([[0, 3], [1, 2]], np.int32)
    env = {"x": jnp.asarray(x), "i": i, "v": v, "w": w, "None": None, "newaxis": jnp.newaxis}
    want = [eval(e, {}, env) for e in NEWAXIS]
    types = ", ".join(f"f64[{', '.join(map(str, np.shape(t)))}]" for t in want)
    f = load(f"def f(x: f64[3, 4], i: i32, v: i32[3], w: i32[2, 2]) -> ({types}):\n    return {', '.join(NEWAXIS)}\n").f
    for got, expect in zip(f(x, i, v, w), want):
        same(got, expect)


def test_newaxis_with_shape_variables_and_scalars():
    f = load("def f(x: f64[n], s: f64) -> (f64[1, n], f64[n, 1], f64[1], f64[1, 1]):\n"
             "    return x[None], x[:, None], s[None], s[None, None]\n").f
    x = RNG.standard_normal(5)
    for got, expect in zip(f(x, 2.5), [x[None], x[:, None], np.float64(2.5)[None], np.float64(2.5)[None, None]]):
        same(got, expect)


def test_newaxis_in_indexed_assignment_matches_numpy():
    f = load("""
def f(x: f64[3, 4], i: i32, row: f64[4], v: i32[2]) -> (f64[3, 4], f64[3, 4], f64[3, 4], f64[3, 4]):
    a = x
    a[None, i] = row
    b = x
    b[i, None] += 1.0
    c = x
    c[:, None] = x[:, None] * 2.0
    d = x
    d[None, v] = zeros((1, 2, 4), dtype=f64)
    return a, b, c, d
""").f
    x, row, v = RNG.standard_normal((3, 4)), RNG.standard_normal(4), np.array([2, 0], np.int32)
    a, b, c, d = x.copy(), x.copy(), x.copy(), x.copy()
    a[None, 1] = row
    b[1, None] += 1.0
    c[:, None] = x[:, None] * 2.0
    d[None, v] = np.zeros((1, 2, 4))
    for got, expect in zip(f(x, 1, row, v), [a, b, c, d]):
        same(got, expect)


def test_newaxis_mistakes_get_diagnostics():
    src = "def f(x: f64[3, 4]) -> f64[3, 4]:\n    x[None, 0] = zeros((2, 4), dtype=f64)\n    return x\n"
    d = diagnostics(src)[0]
    assert d.code == "E0202" and "[1, 4]" in d.message and spanned(src, d) == "zeros((2, 4), dtype=f64)"
    src = "def f(x: f64[3, 4]) -> f64:\n    return x[1, 2, 3, None]\n"
    assert diagnostics(src)[0].code == "E0208"


# ---- clip -------------------------------------------------------------------------------------------------
def test_clip_spellings_match_jax():
    calls = ["clip(x, -1.0, 1.0)", "clip(x, min=-1.0)", "clip(x, max=0.5)", "clip(x, a_min=-1.0, a_max=1.0)",
             "clip(x, a_max=0.5)", "clip(x, lo, 0.0)", "clip(x, max=lo, min=0.0)", "clip(x, a_min=lo)",
             "x.clip(max=0.25)", "clip(x, 1.0, -1.0)"]
    want = [lambda x, lo: jnp.clip(x, -1.0, 1.0), lambda x, lo: jnp.clip(x, min=-1.0),
            lambda x, lo: jnp.clip(x, max=0.5), lambda x, lo: np.clip(x, a_min=-1.0, a_max=1.0),
            lambda x, lo: np.clip(x, None, 0.5), lambda x, lo: jnp.clip(x, lo, 0.0),
            lambda x, lo: jnp.clip(x, max=lo, min=0.0), lambda x, lo: jnp.clip(x, min=lo),
            lambda x, lo: jnp.clip(x, max=0.25), lambda x, lo: jnp.clip(x, 1.0, -1.0)]
    f = load(f"def f(x: f64[n], lo: f64[n]) -> ({', '.join(['f64[n]'] * len(calls))}):\n"
             f"    return {', '.join(calls)}\n").f
    x = np.concatenate([RNG.standard_normal(6) * 2, [np.nan, np.inf, -np.inf, -0.0]])
    lo = RNG.standard_normal(x.size)
    for got, w in zip(f(x, lo), want):
        same(got, np.asarray(w(x, lo)))


def test_clip_of_integers_keeps_their_dtype():
    f = load("def f(k: i32[n], u: u8[n]) -> (i32[n], u8[n], f32[n]):\n"
             "    return clip(k, 0, 5), clip(u, min=3), clip(k, max=2.5)\n").f
    k, u = np.array([-3, 0, 4, 9], np.int32), np.array([0, 2, 3, 255], np.uint8)
    a, b, c = f(k, u)
    same(a, np.asarray(jnp.clip(k, 0, 5)))
    same(b, np.asarray(jnp.clip(u, min=3)))
    same(c, np.minimum(k, 2.5).astype(np.float32))        # a float bound makes f32 (arr's 32-bit default)


@pytest.mark.parametrize("call, spans, words", [
    ("clip(x, min=0.0, a_min=0.5)", "a_min=0.5", "both `min` and `a_min`"),
    ("clip(x, 0.0, a_min=0.5)", "a_min=0.5", "both `min` and `a_min`"),
    ("clip(x, a_max=1.0, max=2.0)", "a_max=1.0", "both `max` and `a_max`"),
    ("clip(x)", "clip(x)", "needs a bound"),
    ("x.clip()", "x.clip()", "needs a bound"),
    ("clip(x, 0.0, 1.0, 2.0)", "2.0", "at most 3 positional"),
    ("clip(x, lo=0.0)", "lo=0.0", "no parameter `lo`"),
])
def test_clip_mistakes_are_e0103(call, spans, words):
    src = f"def f(x: f32[n]) -> f32[n]:\n    return {call}\n"
    d = diagnostics(src)[0]
    assert d.code == "E0103" and words in d.message, d.message
    assert spanned(src, d) == spans


# ---- sum / prod with dtype= ----------------------------------------------------------------------------------
def test_sum_and_prod_with_dtype_match_jax():
    calls = {
        "sum(u, dtype=u64)": lambda u, b, x: jnp.sum(u, dtype=jnp.uint64),
        "sum(u, 0, dtype=i64)": lambda u, b, x: jnp.sum(u, 0, dtype=jnp.int64),
        "sum(u, dtype=u8)": lambda u, b, x: jnp.sum(u, dtype=jnp.uint8),
        "sum(u, dtype=i8)": lambda u, b, x: jnp.sum(u, dtype=jnp.int8),
        "prod(u, dtype=f64)": lambda u, b, x: jnp.prod(u, dtype=jnp.float64),
        "prod(u, 1, dtype=i64)": lambda u, b, x: jnp.prod(u, 1, dtype=jnp.int64),
        "prod(x, dtype=f32)": lambda u, b, x: jnp.prod(x, dtype=jnp.float32),
        "sum(x, axis=1, dtype=i32)": lambda u, b, x: jnp.sum(x, axis=1, dtype=jnp.int32),
        "sum(x, 1, true, f32)": lambda u, b, x: jnp.sum(x, 1, keepdims=True, dtype=jnp.float32),
        "sum(b, dtype=bool)": lambda u, b, x: jnp.sum(b, dtype=bool),
        "sum(b, 0, dtype=bool)": lambda u, b, x: jnp.sum(b, 0, dtype=bool),
        "prod(b, 1, dtype=bool)": lambda u, b, x: jnp.prod(b, 1, dtype=bool),
        "sum(x, 0, dtype=bool)": lambda u, b, x: jnp.sum(x, 0, dtype=bool),
        "prod(x, dtype=bool)": lambda u, b, x: jnp.prod(x, dtype=bool),
        "u.sum(dtype=u64)": lambda u, b, x: jnp.sum(u, dtype=jnp.uint64),
    }
    u = RNG.integers(0, 256, (2, 3)).astype(np.uint8)
    b = np.array([[True, False, False], [False, False, False]])
    x = np.array([[1.5, -2.0, 3.0], [0.0, 0.25, 4.0]])
    want = [np.asarray(w(u, b, x)) for w in calls.values()]
    types = ", ".join(f"{np.dtype(w.dtype).name}{list(w.shape) if w.shape else ''}" for w in want)
    for short, name in [("uint", "u"), ("int", "i"), ("float", "f")]:
        types = types.replace(short, name)
    f = load(f"def f(u: u8[2, 3], b: bool[2, 3], x: f64[2, 3]) -> ({types}):\n    return {', '.join(calls)}\n").f
    for got, w, call in zip(f(u, b, x), want, calls):
        assert np.asarray(got).dtype == w.dtype, call
        same(got, w)


def test_sum_with_dtype_widens_where_u32_would_wrap():
    """The issue's image: 2000 pixels of 255 in one u8 row would not wrap u32, but in u8 they would; the
    accumulator is the dtype given (NumPy's rule), u64 here as NumPy's default."""
    f = load("def f(img: u8[n]) -> (u64, u32, u8):\n    return sum(img, dtype=u64), sum(img), sum(img, dtype=u8)\n").f
    img = np.full(2000, 255, np.uint8)
    wide, default, narrow = f(img)
    assert int(wide) == int(np.sum(img)) == 510000
    assert int(default) == 510000
    assert int(narrow) == int(np.sum(img, dtype=np.uint8))


# ---- W0006 --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("src", [
    "def f(x: u8[5000, 4000]) -> u32[4000]:\n    return sum(x, 0)\n",          # 5000 * 255 fits
    "def f(x: u8[5000, 4000]) -> u64:\n    return sum(x, dtype=u64)\n",        # the accumulator given
    "def f(x: u8[n]) -> u32:\n    return sum(x)\n",                            # size unknown at definition
    "def f(x: i16[60000]) -> i32:\n    return sum(x)\n",                       # 60000 * 32767 fits i32
    "def f(x: i32[5000, 4000]) -> i32:\n    return sum(x)\n",                  # no widening: as jnp
    "def f(x: u8[5000, 4000]) -> f32:\n    return mean(x)\n",                  # mean computes in f32
    "def f(x: i8[30000, 30000]) -> i32:\n    return trace(x)\n",               # 30000 * 127 fits
])
def test_sums_that_cannot_overflow_do_not_warn(src):
    assert not [w for w in arrc.loads(src).warnings if w.code == "W0006"]


def test_w0006_warns_for_the_whole_image_and_werror_refuses_it():
    src = "def f(x: u8[5000, 4000]) -> u32:\n    return x.sum()\n"
    (w,) = [w for w in arrc.loads(src).warnings if w.code == "W0006"]
    assert "20,000,000 u8 elements" in w.message and "dtype=u64" in w.help
    with pytest.raises(arrc.CompileError, match="W0006"):
        arrc.loads(src, warnings="error")
    (w,) = arrc.loads("def f(x: bool[3000000000]) -> i32:\n    return sum(x)\n").warnings
    assert w.code == "W0006" and "i32" in w.message


# ---- x[i:i + m] with a shape variable -----------------------------------------------------------------------
def test_slice_of_shape_variable_length_matches_numpy():
    f = load("""
def f(x: f64[n], w: f64[m], i: i32) -> (f64[m], f64[m], f64[m + 1], f64, f64[2 * m], f64[(m + 1) // 2], f64[n]):
    y = x
    y[i:i + m] = w
    return x[i:i + m], x[i + 1:m + i + 1], x[i - 1:i + m], sum(x[i:i + m] * w), x[i:i + 2 * m], x[i:i + m:2], y
""").f
    x = RNG.standard_normal(12)
    for m in (3, 4):
        w = RNG.standard_normal(m)
        for i in (1, 4):
            y = x.copy()
            y[i:i + m] = w
            want = [x[i:i + m], x[i + 1:m + i + 1], x[i - 1:i + m], np.sum(x[i:i + m] * w), x[i:i + 2 * m],
                    x[i:i + m:2], y]
            for got, expect in zip(f(x, w, i), want):
                np.testing.assert_allclose(got, expect, rtol=1e-15)


def test_negative_shape_variable_length_is_e0204_at_specialization():
    mod = arrc.loads("def f(x: f64[n], w: f64[m], i: i32) -> f64:\n    return sum(x[i:i + m - 4])\n")
    assert float(mod.f(np.ones(10), np.ones(6), 1)) == 2.0
    with pytest.raises(arrc.CompileError) as info:
        mod.f(np.ones(10), np.ones(3), 1)
    d = info.value.diagnostics[0]
    assert d.code == "E0204" and "slice length -1 is negative" in d.message
    assert any("m = 3" in n for n in d.notes)


# ---- f32[dm // h] ---------------------------------------------------------------------------------------------
HEADS = """
def split_heads(x: f64[t, dm], heads: f64[h]) -> f64[h, t, dm // h]:
    return transpose(reshape(x, (t, h, dm // h)), (1, 0, 2))

def merge_heads(y: f64[h, t, dm // h], x: f64[t, dm]) -> f64[t, dm]:
    return reshape(transpose(y, (1, 0, 2)), (t, dm))

def roundtrip(x: f64[t, dm], heads: f64[h]) -> f64[t, dm]:
    return merge_heads(split_heads(x, heads), x)

def halves(x: f64[n]) -> (f64[n // 2], f64[n - n // 2]):
    return x[:n // 2], x[n // 2:]
"""


def test_quotient_dimensions_specialize():
    mod = load(HEADS)
    x = RNG.standard_normal((5, 64))
    got = mod.split_heads(x, np.ones(8))
    same(got, np.asarray(jnp.transpose(jnp.reshape(x, (5, 8, 8)), (1, 0, 2))))
    same(mod.roundtrip(x, np.ones(8)), x)
    same(mod.merge_heads(np.asarray(got), x), x)
    for n in (5, 6, 1):
        a, b = mod.halves(np.arange(float(n)))
        same(a, np.arange(float(n))[:n // 2])
        same(b, np.arange(float(n))[n // 2:])


def test_quotient_dimension_mismatch_names_the_dimension():
    mod = load(HEADS)
    with pytest.raises(arrc.ArgumentError, match=r"expected f64\[8, 5, 8\].*dm = 64"):
        mod.merge_heads(np.ones((8, 5, 9)), np.ones((5, 64)))


def test_quotient_dimension_diagnostics():
    d = diagnostics("def f(x: f32[n // 2]) -> f32:\n    return sum(x)\n")[0]
    assert d.code == "E0206" and "`n`" in d.message
    d = diagnostics("def f(x: f32[n], y: f32[n // 0]) -> f32:\n    return sum(x)\n")[0]
    assert d.code == "E0205" and "by zero" in d.message


# ---- take, take_along_axis, searchsorted, add_at, bincount -------------------------------------------------
def test_take_matches_jax():
    f = load("""
def f(x: f64[3, 4], i: i32[5], j: i32[3, 2], s: i32) -> \
        (f64[5], f64[3, 5], f64[5, 4], f64[3, 3, 2], f64[4], f64, f64[2]):
    return take(x, i), take(x, i, axis=1), take(x, i, 0), take(x, j, axis=-1), take(x, s, axis=0), take(x, 7), \\
        take(x, [11, -12])
""").f
    x = RNG.standard_normal((3, 4))
    i, j = np.array([0, -1, 2, 1, 2], np.int32), np.array([[0, 3], [-1, 1], [2, 2]], np.int32)
    want = [jnp.take(x, i), jnp.take(x, i, axis=1), jnp.take(x, i, 0), jnp.take(x, j, axis=-1), jnp.take(x, 1, axis=0),
            jnp.take(x, 7), jnp.take(x, jnp.array([11, -12]))]
    for got, w in zip(f(x, i, j, 1), want):
        same(got, np.asarray(w))


def test_take_out_of_range_is_clamped_and_reported_by_the_guard():
    """arr's index rule (that of `x[idx]`), not jnp's default NaN fill: clamped, as jnp's mode="clip" for
    indices past the end, and reported by the bounds guard."""
    x, i = np.arange(5.0), np.array([1, 9], np.int32)
    same(load("def f(x: f64[5], i: i32[2]) -> f64[2]:\n    return take(x, i)\n").f(x, i),
         np.asarray(jnp.take(x, i, mode="clip")))
    guarded = arrc.loads("def f(x: f64[5], i: i32[2]) -> f64[2]:\n    return take(x, i)\n", guards="all")
    with pytest.raises(arrc.BoundsError, match="index 9 is out of range for dimension 0 of size 5"):
        guarded.f(x, i)


def test_take_along_axis_matches_jax():
    f = load("""
def f(x: f64[3, 4], j: i32[3, 2], r: i32[1, 4], t: f64[2, 3, 4]) -> (f64[3, 2], f64[3, 4], f64[1, 4], f64[3, 1],
                                                                       f64[2, 3, 4], f64[2, 1, 4]):
    return take_along_axis(x, j, axis=1), take_along_axis(x, argsort(x, axis=0), 0), take_along_axis(x, r, 0), \\
        take_along_axis(x, argmax(x, axis=1, keepdims=true), axis=-1), take_along_axis(t, argsort(t, axis=1), 1), \\
        take_along_axis(t, argmin(t, axis=1, keepdims=true), axis=1)
""").f
    x, t = RNG.standard_normal((3, 4)), RNG.standard_normal((2, 3, 4))
    j, r = np.array([[0, 3], [-1, 1], [2, 2]], np.int32), np.array([[2, 0, -1, 1]], np.int32)
    want = [jnp.take_along_axis(x, j, axis=1), jnp.take_along_axis(x, jnp.argsort(x, axis=0), 0),
            jnp.take_along_axis(x, r, 0), jnp.take_along_axis(x, jnp.argmax(x, axis=1, keepdims=True), -1),
            jnp.take_along_axis(t, jnp.argsort(t, axis=1), 1),
            jnp.take_along_axis(t, jnp.argmin(t, axis=1, keepdims=True), 1)]
    for got, w in zip(f(x, j, r, t), want):
        same(got, np.asarray(w))


@pytest.mark.parametrize("x_shape, idx_shape, axis", [((2, 0), (2, 0), 0), ((0, 3), (0, 3), 1), ((0, 3), (0, 2), 1),
                                                     ((2, 0, 3), (2, 0, 1), 2)])
def test_take_along_axis_with_another_axis_empty_is_empty(x_shape, idx_shape, axis):
    """A size-0 dimension other than `axis` made the gather's slice of 1 too large for it (an MLIRError)."""
    dims = ", ".join("abc"[:len(x_shape)])
    paired = ", ".join("k" if d == axis else "abc"[d] for d in range(len(x_shape)))
    f = load(f"def f(x: f32[{dims}], i: i32[{paired}]) -> f32[{paired}]:\n    return take_along_axis(x, i, {axis})\n").f
    x, i = np.zeros(x_shape, np.float32), np.zeros(idx_shape, np.int32)
    same(f(x, i), np.take_along_axis(x, i, axis))
    g = load("def g(x: f32[n, m]) -> f32[n, m]:\n    return take_along_axis(x, argsort(x, axis=0), 0)\n").g
    x = np.zeros((2, 0), np.float32)
    same(g(x), np.take_along_axis(x, np.argsort(x, axis=0), 0))


def test_searchsorted_matches_jax():
    f = load("""
def f(a: f64[n], v: f64[m], k: i32[4], w: i32[2, 3]) -> (i32[m], i32[m], i32, i32[2, 3], i32[2, 3]):
    return searchsorted(a, v), searchsorted(a, v, side="right"), searchsorted(a, 2.0), searchsorted(k, w), \\
        searchsorted(k, w, "right")
""").f
    a = np.array([-np.inf, -1.0, -0.0, 0.0, 2.0, 2.0, 3.5, np.nan])
    v = np.array([2.0, np.nan, -5.0, 0.0, -0.0, 9.0, -np.inf, np.inf, 3.5, 2.5])
    k, w = np.array([1, 3, 3, 7], np.int32), np.array([[0, 1, 3], [4, 7, 9]], np.int32)
    want = [jnp.searchsorted(a, v), jnp.searchsorted(a, v, side="right"), jnp.searchsorted(a, 2.0),
            jnp.searchsorted(k, w), jnp.searchsorted(k, w, side="right")]
    for got, expect in zip(f(a, v, k, w), want):
        same(got, np.asarray(expect))
    for n in (0, 1):
        got = f(a[:n], v, k, w)
        same(got[0], np.asarray(jnp.searchsorted(a[:n], v)))


def _add_at(x, indices, values):
    out = np.array(x, copy=True)
    np.add.at(out, indices, values)
    return out


def test_add_at_accumulates_repeated_indices_as_numpy():
    f = load("""
def f(x: f64[5], i: i32[6], v: f64[6], m: f64[4, 3], r: i32[3], mv: f64[3, 3], c: i32[4], b: bool[4]) -> \\
        (f64[5], f64[5], f64[4, 3], f64[4, 3], f64[5], i32[4], bool[4]):
    return add_at(x, i, v), add_at(x, i, 1.0), add_at(m, r, mv), add_at(m, r, mv[0]), add_at(x, 2, 0.5), \\
        add_at(c, [0, 0, 3], 1), add_at(b, [1, 1], true)
""").f
    x, i, v = RNG.standard_normal(5), np.array([0, 1, 1, 4, -1, 3], np.int32), RNG.standard_normal(6)
    m, r, mv = RNG.standard_normal((4, 3)), np.array([1, 1, 3], np.int32), RNG.standard_normal((3, 3))
    c, b = np.array([1, 2, 3, 4], np.int32), np.array([False, False, True, False])
    want = [_add_at(x, i, v), _add_at(x, i, 1.0), _add_at(m, r, mv), _add_at(m, r, mv[0]), _add_at(x, 2, 0.5),
            _add_at(c, [0, 0, 3], 1), b | np.array([False, True, False, False])]
    for got, w in zip(f(x, i, v, m, r, mv, c, b), want):
        np.testing.assert_allclose(got, w, rtol=1e-15)
        assert np.asarray(got).dtype == w.dtype


def test_indexed_add_counts_a_repeated_index_once_and_add_at_every_time():
    """docs/language.md: `counts[idx] += 1` is NumPy's fancy assignment (each index once); add_at accumulates."""
    f = load("def f(idx: i32[n]) -> (i32[4], i32[4], i32[4]):\n    counts = zeros(4, dtype=i32)\n"
             "    once = counts\n    once[idx] += 1\n"
             "    return once, add_at(counts, idx, 1), bincount(idx, length=4)\n").f
    idx = np.array([1, 1, 1, 3], np.int32)
    once, every, bins = f(idx)
    numpy_once = np.zeros(4, np.int32)
    numpy_once[idx] += 1
    same(once, numpy_once)
    same(every, _add_at(np.zeros(4, np.int32), idx, 1))
    same(bins, np.bincount(idx, minlength=4).astype(np.int32))


def test_bincount_matches_jax():
    f = load("""
def f(x: i32[n], w: f64[n], u: u8[n], labels: i32[k], h: f64[c]) -> (i32[4], f64[4], i32[300], i32[c], f64[0], f32[3]):
    return bincount(x, length=4), bincount(x, weights=w, length=4), bincount(u, length=300), \\
        bincount(labels, length=c), bincount(x, w, length=0), bincount(x, weights=2.0, length=3)
""").f
    x, w = np.array([0, 1, 1, -2, 7, 3, 3, 3], np.int32), RNG.standard_normal(8)
    u, labels = np.array([0, 255, 255, 1, 7, 7, 299 % 256, 200], np.uint8), np.array([2, 0, 2, 2, 5], np.int32)
    got = f(x, w, u, labels, np.zeros(3))
    want = [jnp.bincount(x, length=4).astype(np.int32), jnp.bincount(x, weights=w, length=4),
            jnp.bincount(u, length=300).astype(np.int32), jnp.bincount(labels, length=3).astype(np.int32),
            np.zeros(0), jnp.bincount(x, weights=jnp.full(8, 2.0, np.float32), length=3)]
    for g, expect in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(expect), rtol=1e-15)
        assert np.asarray(g).dtype == np.asarray(expect).dtype


SCATTER_GRADS = {     # name -> (arr body over x: f64[6], y: f64[6], jax twin)
    "take": ("sum(take(x, [0, 2, 2, -1]) ** 2) + sum(take(reshape(x, (2, 3)), [1, 1, 0], axis=1) * reshape(y, (2, 3)))",
             lambda x, y: jnp.sum(jnp.take(x, jnp.array([0, 2, 2, -1])) ** 2)
             + jnp.sum(jnp.take(x.reshape(2, 3), jnp.array([1, 1, 0]), axis=1) * y.reshape(2, 3))),
    "take_along_axis": ("sum(take_along_axis(reshape(x, (2, 3)), argsort(reshape(y, (2, 3)), axis=1), axis=1) * "
                        "reshape(y, (2, 3))) + sum(take_along_axis(reshape(x, (3, 2)), [[1, 1]], 0) ** 2)",
                        lambda x, y: jnp.sum(jnp.take_along_axis(x.reshape(2, 3), jnp.argsort(y.reshape(2, 3), axis=1),
                                                                 axis=1) * y.reshape(2, 3))
                        + jnp.sum(jnp.take_along_axis(x.reshape(3, 2), jnp.array([[1, 1]]), 0) ** 2)),
    "add_at": ("sum(add_at(x * 2.0, [0, 0, 3, 5, 5], y[:5] * x[1:]) ** 2 * y) + "
               "sum(bincount([0, 1, 1, 3], weights=x[:4] * y[2:], length=5) ** 2)",
               lambda x, y: jnp.sum((x * 2.0).at[jnp.array([0, 0, 3, 5, 5])].add(y[:5] * x[1:]) ** 2 * y)
               + jnp.sum(jnp.bincount(jnp.array([0, 1, 1, 3]), weights=x[:4] * y[2:], length=5) ** 2)),
}


@pytest.fixture(scope="module")
def scatter_grads():
    return arrc.loads("".join(f"def case_{name}(x: f64[6], y: f64[6]) -> f64:\n    return {text}\n\n"
                              for name, (text, _) in SCATTER_GRADS.items()))


@pytest.mark.parametrize("name", list(SCATTER_GRADS))
def test_gradients_match_jax(scatter_grads, name):
    assert_value_and_grad_match_jax(scatter_grads["case_" + name], SCATTER_GRADS[name][1])


def test_they_lower_to_plain_stablehlo():
    """Gathers, scatters, compares and reduces: ops autodiff has rules for (no custom calls)."""
    mod = load("def f(x: f32[4, 3], i: i32[2], v: f32[4]) -> (f32[2, 3], f32[4, 1], f32[4, 3], i32[4], i32[4]):\n"
               "    return take(x, i, axis=0), take_along_axis(x, argmax(x, axis=1, keepdims=true), 1), "
               "add_at(x, i, 1.0), bincount(i, length=4), searchsorted(v, v)\n")
    text = lower_text(mod, "f", "f32[4, 3]", "i32[2]", "f32[4]")
    for op in ("stablehlo.gather", "stablehlo.scatter", "stablehlo.compare", "stablehlo.reduce"):
        assert op in text
    assert "custom_call" not in text
    for name in ("take", "take_along_axis", "add_at", "bincount", "searchsorted"):
        assert f'loc("{name}"' in text


SIGNATURE = "def f(x: f32[n], m: f32[n, 3], k: i32[n], b: bool[n], s: i32) -> f32:\n    v = "
DIAGNOSTICS = [       # (the call, code, the text its span covers, a word of the message)
    ("take(x, x)", "E0204", "x", "integers"),
    ("take(x, b)", "E0204", "b", "integers"),
    ("take(m, k, axis=2)", "E0204", "axis=2", "out of range"),
    ("take(m, k, axis=(0, 1))", "E0204", "axis=(0, 1)", "one integer"),
    ("take(m, k, axis=s)", "E0207", "axis=s", "compile time"),
    ("take(zeros((0, 3)), k)", "E0208", "zeros((0, 3))", "size 0"),
    ("take_along_axis(m, k, axis=1)", "E0204", "k", "rank"),
    ("take_along_axis(m, zeros((2, 3), dtype=i32), 1)", "E0202", "zeros((2, 3), dtype=i32)", "axis 0"),
    ("add_at(x, k, m)", "E0202", "m", "broadcast"),
    ("add_at(k, k, x)", "E0201", "x", "losing information"),
    ("add_at(s, k, 1)", "E0204", "s", "rank 1"),
    ("add_at(k, k, 3000000000)", "E0211", "3000000000", "out of range"),
    ("bincount(k)", "E0103", "bincount(k)", "length"),
    ("bincount(x, length=3)", "E0204", "x", "integers"),
    ("bincount(m, length=3)", "E0204", "m", "integers"),
    ("bincount(k, length=s)", "E0207", "length=s", "compile time"),
    ("bincount(k, length=-1)", "E0204", "length=-1", "negative"),
    ("bincount(k, weights=b, length=3)", "E0201", "weights=b", "numbers"),
    ("bincount(k, weights=m, length=3)", "E0202", "weights=m", "broadcast"),
    ("bincount(k, minlength=3)", "E0103", "minlength=3", "minlength"),
    ("searchsorted(m, x)", "E0204", "m", "1-D"),
    ("searchsorted(x, x, side=\"middle\")", "E0204", "side=\"middle\"", "\"middle\""),
    ("searchsorted(x, x, side=1)", "E0204", "side=1", "side"),
]


@pytest.mark.parametrize("call, code, text, word", DIAGNOSTICS, ids=[d[0] for d in DIAGNOSTICS])
def test_wrong_inputs_get_diagnostics(call, code, text, word):
    src = SIGNATURE + call + "\n    return 0.0\n"
    d = diagnostics(src)[0]
    assert (d.code, d.span.line) == (code, 2), (d.code, d.message)
    assert spanned(src, d) == text, d.message
    assert word in d.message
