"""Run-time indexing end to end: `x[i]` / `x[i, :]` / `x[i:i + 4]` (dynamic slices), `dynamic_slice`,
`dynamic_update_slice`, integer-array gathers `x[idx]` (negative indices count from the end), indexed
updates (`x[i] = v`, `x[i, :] += v`, `x[1:3] = 0`, `x[idx] = v`: functional, callers never see them),
clamping of out-of-range run-time indices (XLA semantics), and the diagnostics E0303 (boolean mask
indexing) and E0304 (a slice whose length is not provably static).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_close, cached_module

import arrc

SRC = """\
def at(x: f32[n], i: i32) -> f32:
    return x[i]

def at64(x: f64[n], i: i64) -> f64:
    return x[i]

def at_u(x: f32[n], i: u32) -> f32:
    return x[i]

def row(x: f32[n, m], i: i32) -> f32[m]:
    return x[i, :]

def row_short(x: f32[n, m], i: i32) -> f32[m]:
    return x[i]

def col(x: f32[n, m], j: i32) -> f32[n]:
    return x[:, j]

def elem(x: f32[n, m], i: i32, j: i32) -> f32:
    return x[i, j]

def mixed(x: f32[n, m, p], i: i32) -> f32[m]:
    return x[i, :, -1]

def ellipsis(x: f32[n, m, p], k: i32) -> f32[n, m]:
    return x[..., k]

def window(x: f32[n], i: i32) -> f32[4]:
    return x[i:i + 4]

def window_offset(x: f32[n], i: i32) -> f32[2]:
    return x[i + 1:i + 3]

def window_step(x: f32[n], i: i32) -> f32[2]:
    return x[i:i + 4:2]

def window_before(x: f32[n], i: i32) -> f32[3]:
    return x[i - 3:i]

def window_via_local(x: f32[n], i: i32) -> f32[4]:
    j = i + 2
    return x[j:i + 6]

def window_rows(x: f32[n, m], i: i32) -> f32[2, m]:
    return x[i:i + 2, :]

def ds(x: f32[n, m], i: i32, j: i32) -> f32[2, 3]:
    return dynamic_slice(x, (i, j), (2, 3))

def ds1(x: f32[n], i: i32) -> f32[4]:
    return dynamic_slice(x, (i,), (4,))

def dus(x: f32[n], v: f32[2], i: i32) -> f32[n]:
    return dynamic_update_slice(x, v, (i,))

def dus2(x: f32[n, m], v: f32[2, 2], i: i32, j: i32) -> f32[n, m]:
    return dynamic_update_slice(x, v, (i, j))

def gather(x: f32[n], idx: i32[k]) -> f32[k]:
    return x[idx]

def gather64(x: f64[n], idx: i64[k]) -> f64[k]:
    return x[idx]

def gather_rows(x: f32[n, m], idx: i32[k]) -> f32[k, m]:
    return x[idx]

def gather_2d_index(x: f32[n, m], idx: i32[a, b]) -> f32[a, b, m]:
    return x[idx]

def gather_cols(x: f32[n, m], idx: i32[k]) -> f32[n, k]:
    return x[:, idx]

def gather_nonzero(x: f32[n]) -> f32[3]:
    return x[nonzero(x > 0.0, size=3, fill=0)]

def set_at(x: f32[n], i: i32, v: f32) -> f32[n]:
    x[i] = v
    return x

def set_last(x: f32[n]) -> f32[n]:
    x[-1] = 7.0
    return x

def add_row(x: f32[n, m], i: i32, v: f32[m]) -> f32[n, m]:
    x[i, :] += v
    return x

def fill_col(x: f32[n, m], j: i32) -> f32[n, m]:
    x[:, j] = 5.0
    return x

def zero_range(x: f32[n]) -> f32[n]:
    x[1:3] = 0
    return x

def set_range_literal(x: i32[n]) -> i32[n]:
    x[1:3] = [7, 8]
    return x

def scale_window(x: f32[n], i: i32) -> f32[n]:
    x[i:i + 2] *= 10.0
    return x

def scatter(x: f32[n], idx: i32[k], v: f32[k]) -> f32[n]:
    x[idx] = v
    return x

def scatter_scalar(x: f32[n], idx: i32[k]) -> f32[n]:
    x[idx] = -1.0
    return x

def scatter_add(x: f32[n], idx: i32[k]) -> f32[n]:
    x[idx] += 1.0
    return x

def scatter_rows(x: f32[n, m], idx: i32[k], v: f32[k, m]) -> f32[n, m]:
    x[idx] = v
    return x

def int_into_float(x: f32[n], i: i32) -> f32[n]:
    x[i] = 3
    return x

def keeps_caller(x: f32[n]) -> (f32[n], f32[n], f32[n]):
    y = x
    z = set_last(x)
    x[0] = -1.0
    return x, y, z

def alias_in_loop(x: f32[n]) -> (f32[n], f32[n]):
    y = x
    for i in range(n):
        x[i] = i * 1.0
    return x, y

def running_max(x: f32[n]) -> f32[n]:
    out = zeros(n)
    best = x[0]
    for i in range(n):
        best = maximum(best, x[i])
        out[i] = best
    return out

def histogram(idx: i32[k], bins: i32) -> i32[5]:
    h = zeros(5, dtype=i32)
    for t in range(k):
        b = idx[t]
        if b < bins:
            h[b] += 1
    return h
"""


@pytest.fixture(scope="module")
def mod():
    return cached_module(SRC, "indexing.arr")


def text_of(fn, *types: str) -> str:
    return fn.lower(*(arrc.spec(t) for t in types)).as_text()


def clamp(i: int, n: int, length: int = 1) -> int:
    """XLA's dynamic_slice start: negative counts from the end (for x[i]), then clamped so the window fits."""
    return min(max(i, 0), n - length)


X = np.arange(6, dtype=np.float32) * 10
M = np.arange(12, dtype=np.float32).reshape(3, 4)
T = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


# ---- x[i] -------------------------------------------------------------------------------------
@pytest.mark.parametrize("i", [0, 2, 5, -1, -6])
def test_runtime_index_in_range(mod, i):
    assert float(mod.at(X, i)) == X[i]


@pytest.mark.parametrize("i,expected", [(6, 50.0), (100, 50.0), (-7, 0.0), (-100, 0.0), (2**31 - 1, 50.0)])
def test_runtime_index_out_of_range_clamps(mod, i, expected):
    assert float(mod.at(X, i)) == expected


def test_runtime_index_matches_jax(mod):
    for i in range(-8, 9):
        assert float(mod.at(X, i)) == float(jax.jit(lambda x, i: x[i])(X, i))


def test_runtime_index_other_dtypes(mod):
    x = np.arange(5, dtype=np.float64) / 3
    assert float(np.asarray(mod.at64(x, np.int64(-2)))) == x[-2]
    assert np.asarray(mod.at64(x, np.int64(1))).dtype == np.float64
    assert float(mod.at_u(X, np.uint32(3))) == X[3]
    assert float(mod.at_u(X, np.uint32(4000000000))) == X[-1]


@pytest.mark.parametrize("i", [0, 1, -1, 2, 7])
def test_runtime_row(mod, i):
    expected = M[clamp(i + 3 if i < 0 else i, 3)]
    assert_close(mod.row(M, i), expected)
    assert_close(mod.row_short(M, i), expected)


@pytest.mark.parametrize("j", [0, 3, -1, -4])
def test_runtime_column(mod, j):
    assert_close(mod.col(M, j), M[:, j])


@pytest.mark.parametrize("i,j", [(0, 0), (2, 3), (-1, -2), (1, -4)])
def test_two_runtime_indices(mod, i, j):
    assert float(mod.elem(M, i, j)) == M[i, j]


@pytest.mark.parametrize("i", [0, 1, -1, -2])
def test_runtime_index_mixed_with_static(mod, i):
    assert_close(mod.mixed(T, i), T[i, :, -1])


@pytest.mark.parametrize("k", [0, 3, -1])
def test_runtime_index_after_ellipsis(mod, k):
    assert_close(mod.ellipsis(T, k), T[..., k])


def test_runtime_index_lowering(mod):
    text = text_of(mod.row, "f32[3, 4]", "i32")
    assert "stablehlo.dynamic_slice" in text and "stablehlo.gather" not in text
    assert "?" not in text.split("module")[1]            # fully static shapes


# ---- x[i:i + c] ---------------------------------------------------------------------------
@pytest.mark.parametrize("i", [0, 1, 2])
def test_window(mod, i):
    assert_close(mod.window(X, i), X[i:i + 4])


@pytest.mark.parametrize("i", [3, 5, 50])
def test_window_past_the_end_is_clamped(mod, i):
    # XLA clamps the start so that the whole window stays inside the array
    assert_close(mod.window(X, i), X[2:6])


@pytest.mark.parametrize("i", [0, 1, 3])
def test_window_offsets_steps_and_locals(mod, i):
    assert_close(mod.window_offset(X, i), X[i + 1:i + 3])
    assert_close(mod.window_step(X, i), X[i:i + 4:2])
    assert_close(mod.window_via_local(np.arange(10, dtype=np.float32), i), np.arange(i + 2, i + 6))


@pytest.mark.parametrize("i", [3, 5])
def test_window_ending_at_index(mod, i):
    assert_close(mod.window_before(X, i), X[i - 3:i])


BLOCKS = """\
def block(x: f32[n], k: i32) -> f32[4]:
    return x[k * 4:(k + 1) * 4]

def block_rows(x: f32[n, m], k: i32) -> f32[2, m]:
    return x[2 * k + 1:2 * k + 3, :]

def block_sums(x: f32[64]) -> f32[8]:
    out = zeros((8,), f32)
    for k in range(8):
        out[k] = sum(x[k * 8:(k + 1) * 8])
    return out

def reversed_copy(x: f32[n]) -> f32[n]:
    y = x
    for i in range(n):
        y[i] = x[n - 1 - i]
    return y

def before_the_end(x: f32[n], i: i32) -> f32[3]:
    return x[n - i - 3:n - i]
"""


def test_blocks_of_a_run_time_index_have_a_static_length():
    """`x[k * b:(k + 1) * b]`, the blocked-loop idiom: start and stop are the same run-time integer times a
    compile-time one plus compile-time offsets, so the length is the offsets' difference (JAX's indexing
    refuses a traced start; `lax.dynamic_slice` is its way). A loop counter's blocks that stay in range
    need no bounds check; others keep theirs. `n - 1 - i` counts down the same way."""
    mod = arrc.loads(BLOCKS, filename="b.arr", guards="bounds")
    x = np.arange(20, dtype=np.float32)
    for k in (0, 2, 4):
        assert_close(mod.block(x, k), x[k * 4:(k + 1) * 4])
    m = np.arange(24, dtype=np.float32).reshape(8, 3)
    assert_close(mod.block_rows(m, 2), m[5:7])
    with pytest.raises(arrc.BoundsError, match="index 20 is out of range"):
        mod.block(x, 5)
    y = np.arange(64, dtype=np.float32)
    assert_close(mod.block_sums(y), y.reshape(8, 8).sum(1))
    assert 'arrc.kind = "bounds"' not in mod.block_sums.lower(y, guarded=True).as_text()
    assert 'arrc.kind = "bounds"' in mod.block.lower(x, np.int32(0), guarded=True).as_text()
    assert_close(mod.reversed_copy(x), x[::-1])             # `c - i` too: a scale of -1
    assert 'arrc.kind = "bounds"' not in mod.reversed_copy.lower(x, guarded=True).as_text()
    assert_close(mod.before_the_end(x, 2), x[15:18])



def test_an_index_that_wrapped_before_a_promotion_keeps_its_bounds_check():
    """`i * 7` wraps in i32 before `+ C` widens it to i64, and `i - 5` in u32 before `+ D`: the exact value's
    range (in bounds) is not the run-time one, so the check stays and reports (found in review: the
    tracking went through the promotion, and the index was clamped with no report)."""
    mod = arrc.loads("const C: i64 = -2147483652\nconst D: i64 = 10\n"
                     "def f(x: f32[16]) -> f32[2]:\n    out = zeros((2,), f32)\n"
                     "    for i in range(306783379, 306783381):\n        out[i - 306783379] = x[i * 7 + C]\n"
                     "    return out\n"
                     "def g(x: f32[16]) -> f32[4]:\n    out = zeros((4,), f32)\n"
                     "    for i in range(u32(0), u32(4)):\n        out[i] = x[i - 5 + D]\n    return out\n",
                     guards="bounds")
    x = np.arange(16, dtype=np.float32)
    with pytest.raises(arrc.BoundsError, match="index -4294967295 is out of range"):
        mod.f(x)
    with pytest.raises(arrc.BoundsError, match="index 4294967301 is out of range"):
        mod.g(x)


def test_window_rows(mod):
    assert_close(mod.window_rows(M, 1), M[1:3])
    assert "stablehlo.dynamic_slice" in text_of(mod.window, "f32[6]", "i32")


# ---- dynamic_slice / dynamic_update_slice -------------------------------------------------------
@pytest.mark.parametrize("i,j", [(0, 0), (1, 1), (5, 5), (1, 0)])
def test_dynamic_slice_matches_lax(mod, i, j):
    assert_close(mod.ds(M, i, j), jax.lax.dynamic_slice(M, (i, j), (2, 3)))


@pytest.mark.parametrize("i", [0, 2, 9])
def test_dynamic_update_slice_matches_lax(mod, i):
    v = np.array([1.5, 2.5], np.float32)
    assert_close(mod.dus(X, v, i), jax.lax.dynamic_update_slice(X, v, (i,)))
    v2 = np.full((2, 2), -1.0, np.float32)
    assert_close(mod.dus2(M, v2, i, 1), jax.lax.dynamic_update_slice(M, v2, (i, 1)))


@pytest.mark.parametrize("i", [-1, -3])
def test_dynamic_slice_negative_start_counts_from_end(mod, i):
    v = np.array([1.5, 2.5], np.float32)
    assert_close(mod.ds1(X, i), jax.lax.dynamic_slice(X, (i,), (4,)))
    assert_close(mod.dus(X, v, i), jax.lax.dynamic_update_slice(X, v, (i,)))


def test_dynamic_slice_lowering(mod):
    assert "stablehlo.dynamic_slice" in text_of(mod.ds, "f32[3, 4]", "i32", "i32")
    assert "stablehlo.dynamic_update_slice" in text_of(mod.dus, "f32[6]", "f32[2]", "i32")


# ---- gathers ------------------------------------------------------------------------------
@pytest.mark.parametrize("idx", [[0, -1, 2, -2], [5, 5, 0], [-6], [3, 1, 4, 1, 5]])
def test_gather_with_negative_indices(mod, idx):
    idx = np.array(idx, np.int32)
    assert_close(mod.gather(X, idx), X[idx])
    assert_close(mod.gather(X, idx), jnp.asarray(X)[idx])


def test_gather_out_of_range_clamps(mod):
    idx = np.array([6, -7, 100, -100], np.int32)
    assert_close(mod.gather(X, idx), [50.0, 0.0, 50.0, 0.0])


def test_gather_i64_indices(mod):
    x = np.linspace(0, 1, 7)
    idx = np.array([-1, 0, 3], np.int64)
    out = np.asarray(mod.gather64(x, idx))
    assert out.dtype == np.float64
    assert_close(out, x[idx], "f64")


def test_gather_rows_and_index_arrays_of_rank_2(mod):
    idx = np.array([2, -3, -1], np.int32)
    assert_close(mod.gather_rows(M, idx), M[idx])
    idx2 = np.array([[0, -1], [1, 1]], np.int32)
    assert_close(mod.gather_2d_index(M, idx2), M[idx2])


def test_gather_columns(mod):
    idx = np.array([0, -1, 3, 1], np.int32)
    assert_close(mod.gather_cols(M, idx), M[:, idx])


def test_gather_with_nonzero(mod):
    x = np.array([-1.0, 2.0, -3.0, 4.0, 5.0, 6.0], np.float32)
    assert_close(mod.gather_nonzero(x), [2.0, 4.0, 5.0])
    x = np.array([-1.0, -2.0, 3.0], np.float32)
    assert_close(mod.gather_nonzero(x), [3.0, -1.0, -1.0])      # filled with index 0


def test_gather_lowering(mod):
    assert "stablehlo.gather" in text_of(mod.gather, "f32[6]", "i32[3]")


# ---- indexed updates -----------------------------------------------------------------------
@pytest.mark.parametrize("i", [0, 3, -1, -6])
def test_set_at(mod, i):
    expected = X.copy()
    expected[i] = 99.0
    before = X.copy()
    assert_close(mod.set_at(X, i, np.float32(99)), expected)
    np.testing.assert_array_equal(X, before)          # the caller's array is untouched


@pytest.mark.parametrize("i,pos", [(6, 5), (100, 5), (-7, 0), (-100, 0)])
def test_set_at_out_of_range_clamps(mod, i, pos):
    expected = X.copy()
    expected[pos] = 99.0
    assert_close(mod.set_at(X, i, np.float32(99)), expected)


def test_static_negative_update(mod):
    assert_close(mod.set_last(X), np.r_[X[:-1], 7.0])


@pytest.mark.parametrize("i", [0, 2, -1])
def test_row_augmented_update(mod, i):
    v = np.array([1.0, -1.0, 0.5, 2.0], np.float32)
    expected = M.copy()
    expected[i, :] += v
    assert_close(mod.add_row(M, i, v), expected)
    np.testing.assert_array_equal(M, np.arange(12, dtype=np.float32).reshape(3, 4))


@pytest.mark.parametrize("j", [0, -1])
def test_column_update_broadcasts_scalar(mod, j):
    expected = M.copy()
    expected[:, j] = 5.0
    assert_close(mod.fill_col(M, j), expected)


def test_static_slice_updates(mod):
    expected = X.copy()
    expected[1:3] = 0
    assert_close(mod.zero_range(X), expected)
    out = mod.set_range_literal(np.arange(5, dtype=np.int32))
    assert np.asarray(out).dtype == np.int32
    np.testing.assert_array_equal(out, [0, 7, 8, 3, 4])


STRIDED_UPDATES = ["::2", "::-3", "8:2:-2", "1::3", "-3::-5", "3:1:2", "1, ::-2", "::-2, 3", ":, 5:0:-2", "None, ::2, 1"]


@pytest.mark.parametrize("sl", STRIDED_UPDATES)
def test_strided_slice_update_matches_numpy(sl):
    # x[::2] = v and x[::-2] += 1 are NumPy's (jnp's .at[::2].set): values land on the strided positions,
    # in the slice's order along a negative step.
    x = np.arange(60, dtype=np.float32).reshape(6, 10) if "," in sl else np.arange(10, dtype=np.float32)
    region = x[eval(f"np.s_[{sl}]")]
    v = np.arange(region.size, dtype=np.float32).reshape(region.shape) + 100
    shape = ", ".join(map(str, x.shape))
    mod = cached_module(f"def f(x: f32[{shape}], v: f32[{', '.join(map(str, region.shape))}]) -> (f32[{shape}], f32[{shape}]):\n"
                        f"    y = x\n    y[{sl}] = v\n    x[{sl}] += 1\n    return y, x\n")
    set_, add = mod.f(x, v)
    want_set, want_add = x.copy(), x.copy()
    want_set[eval(f"np.s_[{sl}]")] = v
    want_add[eval(f"np.s_[{sl}]")] += 1
    np.testing.assert_array_equal(set_, want_set)
    np.testing.assert_array_equal(add, want_add)


def test_strided_update_with_a_runtime_index_is_an_error():
    with pytest.raises(arrc.CompileError, match="E0204"):
        arrc.loads("def f(x: f32[4, 4], i: i32) -> f32[4, 4]:\n    x[i, ::2] = 0\n    return x\n")


@pytest.mark.parametrize("i", [0, 3, 4, 9])
def test_window_update(mod, i):
    expected = X.copy()
    s = clamp(i, 6, 2)
    expected[s:s + 2] *= 10
    assert_close(mod.scale_window(X, i), expected)


@pytest.mark.parametrize("idx", [[0, -1, 2], [5], [-6, 1]])
def test_scatter_with_negative_indices(mod, idx):
    idx = np.array(idx, np.int32)
    v = np.arange(len(idx), dtype=np.float32) + 100
    expected = X.copy()
    expected[idx] = v
    assert_close(mod.scatter(X, idx, v), expected)
    expected = X.copy()
    expected[idx] = -1.0
    assert_close(mod.scatter_scalar(X, idx), expected)


def test_scatter_augmented_matches_numpy(mod):
    # NumPy's x[idx] += 1 with a repeated index adds once (read, add, write)
    idx = np.array([0, 0, -1], np.int32)
    expected = X.copy()
    expected[idx] += 1.0
    assert_close(mod.scatter_add(X, idx), expected)


def test_scatter_rows(mod):
    idx = np.array([0, -1], np.int32)
    v = np.ones((2, 4), np.float32)
    expected = M.copy()
    expected[idx] = v
    assert_close(mod.scatter_rows(M, idx, v), expected)


def test_scatter_out_of_range_clamps(mod):
    idx = np.array([6, -7], np.int32)
    v = np.array([1.0, 2.0], np.float32)
    assert_close(mod.scatter(X, idx, v), [2.0, 10.0, 20.0, 30.0, 40.0, 1.0])


def test_update_lowering(mod):
    assert "stablehlo.dynamic_update_slice" in text_of(mod.set_at, "f32[6]", "i32", "f32")
    assert "stablehlo.scatter" in text_of(mod.scatter, "f32[6]", "i32[2]", "f32[2]")


def test_weak_int_literal_stored_into_float(mod):
    out = mod.int_into_float(X, 2)
    assert np.asarray(out).dtype == np.float32
    assert float(np.asarray(out)[2]) == 3.0


def test_updates_are_functional_inside_arr(mod):
    x, y, z = (np.asarray(v) for v in mod.keeps_caller(X))
    assert_close(x, np.r_[-1.0, X[1:]])
    assert_close(y, X)                       # the alias made before the update keeps the old value
    assert_close(z, np.r_[X[:-1], 7.0])      # the callee's update did not leak into x


def test_update_in_loop_does_not_touch_alias(mod):
    x, y = mod.alias_in_loop(X)
    assert_close(x, np.arange(6))
    assert_close(y, X)


def test_loop_with_indexed_update(mod):
    x = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0], np.float32)
    assert_close(mod.running_max(x), np.maximum.accumulate(x))


def test_histogram_with_branch_and_update_in_loop(mod):
    idx = np.array([0, 1, 1, 4, 3, 3, 3, 2], np.int32)
    out = np.asarray(mod.histogram(idx, 4))
    np.testing.assert_array_equal(out, np.bincount(idx[idx < 4], minlength=5))


# ---- run-time indexing into dimensions that are too small -----------------------------------------
@pytest.fixture(scope="module")
def small():
    return cached_module("""\
def at(x: f32[n], i: i32) -> f32:
    return x[i]

def gather(x: f32[n], idx: i32[k]) -> f32[k]:
    return x[idx]

def window(x: f32[n], i: i32) -> f32[2]:
    return x[i:i + 2]

def dus(x: f32[n], v: f32[m], i: i32) -> f32[n]:
    return dynamic_update_slice(x, v, (i,))

def set_window(x: f32[n], i: i32) -> f32[n]:
    x[i:i + 3] = 1.0
    return x

def ds(x: f32[n], i: i32) -> f32[4]:
    return dynamic_slice(x, (i,), (4,))
""", "small.arr")


def test_dynamic_slice_larger_than_the_array_is_e0208(small):
    with pytest.raises(arrc.CompileError) as info:
        small.ds(np.zeros(2, np.float32), 0)
    d = info.value.diagnostics[0]
    assert d.code == "E0208" and "n = 2" in str(info.value)


@pytest.mark.parametrize("call", ["at", "gather", "window", "dus", "set_window"])
def test_too_small_dimension_is_a_diagnostic(small, call):
    args = {"at": (np.zeros(0, np.float32), 0),
            "gather": (np.zeros(0, np.float32), np.zeros(1, np.int32)),
            "window": (np.zeros(1, np.float32), 0),
            "dus": (np.zeros(2, np.float32), np.zeros(3, np.float32), 0),
            "set_window": (np.zeros(2, np.float32), 0)}[call]
    with pytest.raises(arrc.CompileError):
        small[call](*args)


# ---- E0303: boolean mask indexing -------------------------------------------------------------
def compile_error(src: str) -> arrc.CompileError:
    with pytest.raises(arrc.CompileError) as info:
        arrc.loads(src, filename="t.arr")
    return info.value


def first(err, code):
    d = err.diagnostics[0]
    assert d.code == code, str(err)
    return d


def span(d):
    return (d.span.line, d.span.col, d.span.end_line, d.span.end_col)


def test_e0303_rendered():
    err = compile_error("""\
def f(x: f32[n]) -> f32:
    return sum(x[x > 0])
""")
    assert str(err) == """\
error[E0303]: boolean mask indexing gives a value-dependent shape
 --> t.arr:2:16
  |
2 |     return sum(x[x > 0])
  |                ^^^^^^^^ a bool mask
  |
  = note: the number of true elements is only known at run time, so the result shape would be too
  = help: use `where(mask, x, 0)` to keep the shape, or `nonzero(mask, size=N, fill=v)` for at most N indices
"""


@pytest.mark.parametrize("line,expr_col,expr", [
    ("    y = x[mask, :]", 9, "x[mask, :]"),
    ("    y = x[~isnan(x[:, 0])]", 9, "x[~isnan(x[:, 0])]"),
    ("    x[mask] = 0.0", 5, "x[mask]"),
    ("    x[mask] += 1.0", 5, "x[mask]"),
])
def test_e0303_variants_span_the_whole_indexing(line, expr_col, expr):
    d = first(compile_error(f"""\
def f(x: f32[n, m], mask: bool[n]) -> f32:
{line}
    return 1.0
"""), "E0303")
    assert span(d) == (2, expr_col, 2, expr_col + len(expr))
    if line.startswith("    y ="):
        assert "where" in d.help and "nonzero(mask, size=N" in d.help
    else:           # an assignment: the `where` that does it (tests/test_porting_habits.py)
        assert "x = where(mask[:, None], " in d.help


def test_nonzero_without_size_is_an_error():
    d = first(compile_error("""\
def f(x: f32[n]) -> i32[n]:
    return nonzero(x > 0.0)
"""), "E0207")
    assert "size=" in d.message


# ---- E0304: slices whose length is not provably static ------------------------------------------
def test_e0304_rendered():
    err = compile_error("""\
def f(x: f32[n], i: i32, j: i32) -> f32:
    return sum(x[i:j])
""")
    assert str(err) == """\
error[E0304]: the length of this slice is not known at compile time
 --> t.arr:2:18
  |
2 |     return sum(x[i:j])
  |                  ^^^ run-time length
  |
  = note: a static length: the stop is the start plus a literal, `const` or shape variable (`x[i:i + 4]`, `x[i:i + m]`, `x[k * b:(k + 1) * b]`), or `dynamic_slice(x, (i,), (4,))`
  = help: for a run-time length, keep the shape and mask the rest: `where((arange(n) >= i) & (arange(n) < j), x, 0)`
"""


@pytest.mark.parametrize("expr,col,text,mask", [
    ("sum(x[i:])", 18, "i:", "where(arange(n) >= i, x, 0)"),
    ("sum(x[:i])", 18, ":i", "where(arange(n) < i, x, 0)"),
    ("sum(x[i:2 * i])", 18, "i:2 * i", "where((arange(n) >= i) & (arange(n) < 2 * i), x, 0)"),
    ("sum(x[i:j + 1])", 18, "i:j + 1", "where((arange(n) >= i) & (arange(n) < j + 1), x, 0)"),
    ("sum(x[i:i + 4:-1])", 18, "i:i + 4:-1", "where((arange(n) <= i) & (arange(n) > i + 4), x, 0)"),
    ("sum(x[i:j:3])", 18, "i:j:3", "where((arange(n) >= i) & (arange(n) < j) & ((arange(n) - i) % 3 == 0), x, 0)"),
    ("sum(x[i * j:(i + 1) * j])", 18, "i * j:(i + 1) * j", "where((arange(n) >= i * j) & (arange(n) < (i + 1) * j), x, 0)"),
    ("sum(x[2 * i:3 * i])", 18, "2 * i:3 * i", "where((arange(n) >= 2 * i) & (arange(n) < 3 * i), x, 0)"),
])
def test_e0304_variants(expr, col, text, mask):
    d = first(compile_error(f"""\
def f(x: f32[n], i: i32, j: i32) -> f32:
    return {expr}
"""), "E0304")
    assert span(d) == (2, col, 2, col + len(text))
    assert any("dynamic_slice(x, (i,), (4,))" in n for n in d.notes)
    assert f"`{mask}`" in d.help


@pytest.mark.parametrize("source, mask", [
    ("return sum(m[:, i:j])", "where((arange(k) >= i) & (arange(k) < j), m, 0)`"),
    ("return sum(m[i:, 0])", "where(arange(n)[:, None] >= i, m, 0)[:, 0]`"),
    ("x[i:] = 0.5\n    return 0.0", "x = where(arange(n) >= i, 0.5, x)`"),
    ("x[:j] *= 2.0 + x\n    return 0.0", "x = where(arange(n) < j, x * (2.0 + x), x)`"),
    ("m[:j, 1] = 0.0\n    return 0.0", "m = where((arange(n)[:, None] < j) & ..., new, m)`"),
])
def test_e0304_help_writes_the_mask_idiom(source, mask):
    """E0304's help: keep the shape and mask the run-time range (`where` over `arange` of that axis)."""
    d = first(compile_error(f"def f(x: f32[n], m: f32[n, k], i: i32, j: i32) -> f32:\n    {source}\n"), "E0304")
    assert mask in d.help, d.help


def test_e0304_mask_idiom_computes_the_slice():
    """The idiom of the help gives the sum of the run-time slice, as NumPy's."""
    mod = arrc.loads("def f(x: f64[n], i: i32, j: i32) -> f64:\n"
                     "    return sum(where((arange(n) >= i) & (arange(n) < j), x, 0))\n")
    x = np.arange(1.0, 8.0)
    for i, j in [(0, 7), (2, 5), (3, 3), (5, 2)]:
        assert float(mod.f(x, i, j)) == float(np.sum(x[i:j]))


def test_e0304_in_second_dimension_and_in_update():
    d = first(compile_error("""\
def f(x: f32[n, m], i: i32) -> f32:
    return sum(x[0, i:])
"""), "E0304")
    assert span(d) == (2, 21, 2, 23)
    d = first(compile_error("""\
def f(x: f32[n], i: i32) -> f32[n]:
    x[i:] = 0.0
    return x
"""), "E0304")
    assert span(d) == (2, 7, 2, 9)


def test_negative_static_length_is_rejected():
    d = first(compile_error("""\
def f(x: f32[n], i: i32) -> f32:
    return sum(x[i + 4:i])
"""), "E0204")
    assert "negative" in d.message


def test_a_stride_over_a_symbolic_dimension_has_its_exact_length():
    """`(2 * n + 1) // 2` is `n`: `x[::2]` of an f32[2 * n] is an f32[n] (was E0203, the length left as an
    opaque quotient), and of an f32[2 * n + 1] an f32[n + 1]; as NumPy's."""
    mod = arrc.loads("def f(x: f32[2 * n]) -> f32[n]:\n    return x[::2]\n"
                     "def g(x: f32[2 * n + 1]) -> f32[n]:\n    return x[1::2]\n"
                     "def h(x: f32[2 * n + 1]) -> f32[n + 1]:\n    return x[::2]\n")
    x = np.arange(7, dtype=np.float32)
    np.testing.assert_array_equal(mod.f(x[:6]), x[:6][::2])
    np.testing.assert_array_equal(mod.g(x), x[1::2])
    np.testing.assert_array_equal(mod.h(x), x[::2])


def test_a_u64_start_next_to_a_signed_one_is_clamped_not_cut_to_32_bits():
    """u64 with i32 promotes to f64 (JAX's lattice): the starts were computed in i32 then, 2**32 + 1 read
    as row 1; now in i64, a u64 past its range saturating (clamped as any start past the end, as jnp)."""
    mod = arrc.loads("def f(x: f32[4, 5], i: u64, j: i32) -> f32:\n    return x[i, j]\n\n"
                     "def g(x: f32[4, 5], i: u64, j: i32) -> f32[2, 2]:\n    return dynamic_slice(x, (i, j), (2, 2))\n\n"
                     "def h(x: f32[4, 5], i: u64, j: i64) -> f32[4, 5]:\n    x[i, j] = -1.0\n    return x\n")
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    for i in (np.uint64(2 ** 32 + 1), np.uint64(2 ** 63), np.uint64(2 ** 64 - 1)):
        assert float(mod.f(x, i, np.int32(0))) == 15.0
        np.testing.assert_array_equal(mod.g(x, i, np.int32(0)), x[2:4, 0:2])
        np.testing.assert_array_equal(np.asarray(mod.h(x, i, np.int64(0)))[:, 0], [0, 5, 10, -1])
    assert float(mod.f(x, np.uint64(2), np.int32(-1))) == 14.0
    guarded = arrc.loads(mod.sources["<string>"].text, guards="bounds")
    for i in (2 ** 32 + 1, 2 ** 64 - 1):             # the index the program gave, not the saturated one
        with pytest.raises(arrc.BoundsError) as info:
            guarded.f(x, np.uint64(i), np.int32(0))
        assert f"index {i} is out of range for dimension 0 of size 4" in str(info.value)


@pytest.mark.parametrize("step", ["2**63", "-2**63", "2**64", "-7"])
def test_a_slice_step_past_i64_takes_one_element_as_numpy(step):
    """`x[::2**63]` was a TypeError building the slice's strides attribute (an i64 array)."""
    x = np.arange(5, dtype=np.float32)
    mod = arrc.loads(f"def f(x: f32[5]) -> f32[1]:\n    return x[::{step}]\n\n"
                     f"def g(x: f32[5], i: i32) -> f32[1]:\n    return x[i:i + 1:{step.lstrip('-')}]\n")
    np.testing.assert_array_equal(mod.f(x), x[::eval(step)])
    np.testing.assert_array_equal(mod.g(x, 2), x[2:3:abs(eval(step))])


def test_a_literal_index_array_out_of_range_is_E0208_as_a_literal_index():
    """`x[[5, 0]]` on 2 rows clamped 5 to 1 silently: its values are known, as `x[5]`'s (E0208)."""
    for body in ("return x[[5, 0]]", "x[[0, -3]] = 1.0\n    return x"):
        with pytest.raises(arrc.CompileError) as info:
            arrc.loads(f"def f(x: f32[2, 3]) -> f32[2, 3]:\n    {body}\n")
        [d] = info.value.diagnostics
        assert d.code == "E0208" and d.message.endswith("is out of range for a dimension of size 2")
    mod = arrc.loads("def f(x: f32[2, 3]) -> f32[2, 2]:\n    return x[:, [2, -3]]\n")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(mod.f(x), x[:, [2, -3]])


def test_an_empty_index_array_into_a_size_0_dimension_reads_nothing_as_numpy():
    """`x[idx]` with x: f32[0] and idx: i32[0] was E0208 (a run-time index into a size-0 dimension), yet no
    element is read: NumPy gives an empty array; a scalar run-time index there stays E0208."""
    mod = arrc.loads("""\
def f(x: f32[n, m], i: i32[k], j: i32[k, 2]) -> (f32[k, m], f32[k, 2, m], f32[m, k], f32[k], f32[n, m]):
    y = x
    y[i] = 1.0
    return x[i], x[j], transpose(x)[:, i], take(x, i), y

def g(x: f32[n], i: i32[k], v: f32[k]) -> (f32[n], f32[n]):
    return take_along_axis(x, argsort(x), 0), add_at(x, i, v)
""")
    x, i, j = np.zeros((0, 3), np.float32), np.zeros(0, np.int32), np.zeros((0, 2), np.int32)
    for got, want in zip(mod.f(x, i, j), (x[i], x[j], x.T[:, i], np.take(x, i), x)):
        assert np.asarray(got).shape == want.shape
    v = np.zeros(0, np.float32)
    for got, want in zip(mod.g(v, i, v), (np.take_along_axis(v, np.argsort(v), 0), v)):
        assert np.asarray(got).shape == want.shape and np.asarray(got).dtype == want.dtype
    for args in ((np.zeros(2, np.int32),), (np.int32(0),)):
        kind = "i32[k]" if args[0].ndim else "i32"
        with pytest.raises(arrc.CompileError) as info:
            arrc.loads(f"def h(x: f32[n], i: {kind}) -> f32:\n    return sum(x[i])\n").h(np.zeros(0, np.float32), *args)
        assert info.value.diagnostics[0].code == "E0208"


def test_a_slice_bound_that_is_always_negative_counts_from_the_end():
    """`x[:-k - 1]` with a shape variable k: always negative, so the end minus k + 1 (it was taken as a position
    from the start, of a negative length); `x[-k:]` may be 0 and is E0204 (golden)."""
    mod = arrc.loads("def f(x: f32[n], y: f32[k]) -> f32[n - k - 1]:\n    return x[:-k - 1]\n")
    x = np.arange(6, dtype=np.float32)
    for k in (0, 2):
        np.testing.assert_array_equal(mod.f(x, np.zeros(k, np.float32)), x[:-k - 1])


def test_a_shape_tuple_takes_static_slices_as_python():
    """`x.shape[1:]`, `x.shape[::-1]`, `x.shape[-2:]`: a tuple of compile-time ints slices like a Python tuple
    (it was E0204 "a tuple takes one compile-time integer index"); a run-time bound stays E0204."""
    mod = arrc.loads("def f(x: f32[a, b, c]) -> (f32[b, c], f32[c, b, a], i32, f32[a, b]):\n"
                     "    p, q = x.shape[-2:]\n"
                     "    return zeros(x.shape[1:]), reshape(x, x.shape[::-1]), p * 10 + q, ones(x.shape[:-1])\n")
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    got = mod.f(x)
    for g, want in zip(got, (np.zeros((3, 4)), x.reshape(4, 3, 2), 34, np.ones((2, 3)))):
        np.testing.assert_array_equal(np.asarray(g), want)
    with pytest.raises(arrc.CompileError) as info:
        arrc.loads("def g(x: f32[2, 3], i: i32) -> f32[3]:\n    return zeros(x.shape[i:])\n").g(x[0, :2, :3], 1)
    assert info.value.diagnostics[0].code == "E0204"


def test_e0304_of_a_reversed_run_time_window_notes_the_forward_window_reversed():
    """`x[:, i + 3:i:-1]`: E0304's mask help keeps the elements in their order, so the note writes the window
    that is taken forward and then reversed; the text it writes compiles and equals NumPy's reversed window."""
    with pytest.raises(arrc.CompileError) as info:
        arrc.loads("def f(y: f32[4, 10], i: i32) -> f32[4, 2]:\n    return y[:, i + 3:i:-2]\n").f
    (diag,) = info.value.diagnostics
    note = "`y[:, i + 1:i + 3 + 1][:, ::-2]` is `y[:, i + 3:i:-2]`"
    assert diag.code == "E0304" and any(note in n for n in diag.notes)
    fixed = arrc.loads("def f(y: f32[4, 10], i: i32) -> f32[4, 2]:\n    return y[:, i + 1:i + 3 + 1][:, ::-2]\n")
    y = np.arange(40, dtype=np.float32).reshape(4, 10)
    for i in (0, 2, 6):
        np.testing.assert_array_equal(np.asarray(fixed.f(y, np.int32(i))), y[:, i + 3:i:-2])
    with pytest.raises(arrc.CompileError) as info:      # an assignment cannot write into a reversed copy
        arrc.loads("def g(y: f32[10], i: i32) -> f32[10]:\n    y[i + 3:i:-1] = 0.0\n    return y\n").g
    assert not any("reversed" in n for n in info.value.diagnostics[0].notes)
