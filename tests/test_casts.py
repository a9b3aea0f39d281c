"""Casts: the table of LANGUAGE.md section 4, exactly, plus bitcast and 64-bit values at the boundary."""
from __future__ import annotations

import functools
import math

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from conftest import INTS, arr_batch, cached_module, np_dtype, short_name

import arrc
from arrc.compiler.types import DTYPES, int_range

SOURCE_FLOATS = ["f16", "bf16", "f32", "f64"]


def float_to_int_reference(values: np.ndarray, dst: str) -> np.ndarray:
    """Truncate toward zero, saturate to the range of `dst`, NaN -> 0; computed exactly in Python."""
    lo, hi = int_range(DTYPES[dst])
    out = []
    for v in values.astype(np.float64).tolist():
        if math.isnan(v):
            out.append(0)
        elif math.isinf(v):
            out.append(hi if v > 0 else lo)
        else:
            out.append(min(max(math.trunc(v), lo), hi))
    return np.array(out, dtype=np_dtype(dst))


FLOAT_SAMPLES = [
    0.0, -0.0, 0.5, -0.5, 0.99, -0.99, 1.5, -1.5, 2.5, -2.5, 254.0, 255.0, 256.0, 257.0, -1.0,
    127.0, 127.9, 128.0, -128.0, -128.9, -129.0, 32767.0, 32768.0, -32768.0, -32769.0, 65504.0, 65535.0, 65536.0,
    2.0 ** 31 - 256, 2.0 ** 31, -(2.0 ** 31), -(2.0 ** 31) - 2048, 2.0 ** 32, 2.0 ** 32 - 512, 2.0 ** 53,
    2.0 ** 63, -(2.0 ** 63), 2.0 ** 63 - 2 ** 40, 2.0 ** 64, 2.0 ** 64 - 2 ** 41, 1e30, -1e30,
    float("nan"), float("inf"), float("-inf"),
]


def float_samples(src: str) -> np.ndarray:
    with np.errstate(over="ignore"):
        return np.array(FLOAT_SAMPLES).astype(np_dtype(src))


@functools.lru_cache(maxsize=None)
def float_to_int_results(src: str) -> dict:
    x = float_samples(src)
    dsts = [d for d in INTS if d != "u64"]
    got = arr_batch([(f"{{0}}.astype({d})", [(src, x)], d) for d in dsts])
    return {d: (x, g) for d, g in zip(dsts, got)}


@pytest.mark.parametrize("src", SOURCE_FLOATS)
@pytest.mark.parametrize("dst", [d for d in INTS if d != "u64"])
def test_float_to_int_truncates_saturates_and_maps_nan_to_zero(src, dst):
    x, got = float_to_int_results(src)[dst]
    assert short_name(got.dtype) == dst
    np.testing.assert_array_equal(np.asarray(got), float_to_int_reference(x, dst))


@pytest.mark.parametrize("src", ["f32", "f64"])
def test_float_to_u64(src):
    x = float_samples(src)
    got = cached_module(f"def f(x: {src}[n]) -> u64[n]:\n    return x.astype(u64)\n").f(x)
    np.testing.assert_array_equal(np.asarray(got), float_to_int_reference(x, "u64"))


@pytest.mark.parametrize("src", ["f16", "f32", "f64"])
def test_spec_example_to_u8(src):
    mod = cached_module(f"def f(x: {src}[n]) -> u8[n]:\n    return x.astype(u8)\n")
    x = np.array([254.0, 255.0, 256.0, 257.0, -1.0, np.nan]).astype(np_dtype(src))
    np.testing.assert_array_equal(np.asarray(mod.f(x)), np.array([254, 255, 255, 255, 0, 0], np.uint8))


def test_infinities_saturate():
    mod = cached_module("def f(x: f32[n]) -> (i8[n], i32[n], i64[n], u8[n], u32[n]):\n"
                        "    return x.astype(i8), x.astype(i32), x.astype(i64), x.astype(u8), x.astype(u32)\n")
    got = [np.asarray(v).tolist() for v in mod.f(np.array([np.inf, -np.inf], np.float32))]
    assert got == [[127, -128], [2 ** 31 - 1, -2 ** 31], [2 ** 63 - 1, -2 ** 63], [255, 0], [2 ** 32 - 1, 0]]


def test_call_form_of_casts():
    mod = cached_module("def f(x: f32[n]) -> (u8[n], f64[n], bool[n]):\n    return u8(x), f64(x), bool(x)\n")
    a, b, c = mod.f(np.array([256.0, -1.5, 0.0], np.float32))
    np.testing.assert_array_equal(np.asarray(a), [255, 0, 0])
    np.testing.assert_array_equal(np.asarray(b), [256.0, -1.5, 0.0])
    np.testing.assert_array_equal(np.asarray(c), [True, True, False])


def test_astype_with_a_dtype_attribute():
    mod = cached_module("def f(x: f32[n], y: i16[n]) -> i16[n]:\n    return x.astype(y.dtype) + y\n")
    got = mod.f(np.array([1.9, -1.9, 70000.0], np.float32), np.array([1, 1, 0], np.int16))
    assert got.dtype == np.int16
    np.testing.assert_array_equal(np.asarray(got), [2, 0, 32767])


# ---- int -> int -------------------------------------------------------------------------------------------
def int_samples(src: str) -> np.ndarray:
    lo, hi = int_range(DTYPES[src])
    values = {lo, hi, 0, 1, 2, 127, 128, 255, 256, 257, 32767, 32768, 65535, 65536, 2 ** 31 - 1, 2 ** 31,
              2 ** 32 - 1, 2 ** 32 + 5, 2 ** 63 - 1, -1, -2, -128, -129, -32769, -2 ** 31, -2 ** 31 - 1, -2 ** 63,
              lo + 1, hi - 1}
    return np.array(sorted(v for v in values if lo <= v <= hi), dtype=np_dtype(src))


@functools.lru_cache(maxsize=None)
def int_to_int_results(src: str) -> dict:
    x = int_samples(src)
    dsts = [d for d in INTS if d != src]
    got = arr_batch([(f"{{0}}.astype({d})", [(src, x)], d) for d in dsts])
    return {d: (x, g) for d, g in zip(dsts, got)}


@pytest.mark.parametrize("src, dst", [(s, d) for s in INTS for d in INTS if s != d])
def test_int_to_int_wraps_like_numpy(src, dst):
    x, got = int_to_int_results(src)[dst]
    assert short_name(got.dtype) == dst
    np.testing.assert_array_equal(np.asarray(got), x.astype(np_dtype(dst)))


def test_literal_cast_wraps():
    mod = cached_module("def f() -> (u8, i8, u8):\n    return (300).astype(u8), (200).astype(i8), (-1).astype(u8)\n")
    assert [int(v) for v in mod.f()] == [44, -56, 255]


# ---- int -> float, float -> float -----------------------------------------------------------------------
def to_float_reference(x: np.ndarray, dst: str) -> np.ndarray:
    with np.errstate(over="ignore"):
        return x.astype(np_dtype(dst))


@functools.lru_cache(maxsize=None)
def int_to_float_results(src: str) -> dict:
    lo, hi = int_range(DTYPES[src])
    values = {lo, hi, 0, 1, -1, 2049, 2051, 4097, 65519, 65520, 70000, 2 ** 24 + 1, 2 ** 24 + 3,
              2 ** 31 - 1, -2 ** 31 + 1, 2 ** 53 + 1, 2 ** 63 - 1, 2 ** 64 - 1, 2 ** 63 + 2 ** 39 + 1}
    x = np.array(sorted(v for v in values if lo <= v <= hi), dtype=np_dtype(src))
    dsts = ["f16", "f32", "f64"]
    got = arr_batch([(f"{{0}}.astype({d})", [(src, x)], d) for d in dsts])
    return {d: (x, g) for d, g in zip(dsts, got)}


@pytest.mark.parametrize("src", INTS)
@pytest.mark.parametrize("dst", ["f16", "f32", "f64"])
def test_int_to_float_rounds_to_nearest_even(src, dst):
    x, got = int_to_float_results(src)[dst]
    assert short_name(got.dtype) == dst
    np.testing.assert_array_equal(np.asarray(got), to_float_reference(x, dst))


@pytest.mark.parametrize("src", ["i8", "i32", "u16", "i64"])
def test_int_to_bf16(src):
    lo, hi = int_range(DTYPES[src])
    x = np.array([v for v in [lo, hi, 0, 1, -1, 255, 257, 259, 1000, 65535] if lo <= v <= hi], np_dtype(src))
    got = cached_module(f"def f(x: {src}[n]) -> bf16[n]:\n    return x.astype(bf16)\n").f(x)
    np.testing.assert_array_equal(np.asarray(got).astype(np.float64),
                                  x.astype(np.float64).astype(ml_dtypes.bfloat16).astype(np.float64))


NARROWING = [("f64", "f32"), ("f64", "f16"), ("f64", "bf16"), ("f32", "f16"), ("f32", "bf16"), ("f16", "bf16"),
             ("bf16", "f16")]


def narrowing_samples(src: str, dst: str) -> np.ndarray:
    rng = np.random.default_rng(5)
    finfo = ml_dtypes.finfo(np_dtype(dst))
    big = float(finfo.max)
    ulp = float(finfo.eps)
    values = [0.0, -0.0, 1.0, -1.0, 1 / 3, -2 / 3, np.pi, np.nan, np.inf, -np.inf, 1e-3,
              1 + ulp / 2, 1 + 3 * ulp / 2, -(1 + ulp / 2), 2 + ulp,          # ties: to even
              big, -big, big * (1 + ulp / 4), big * 1.5, -big * 4,              # overflow -> inf
              float(finfo.tiny), float(finfo.tiny) * 2]
    values += list(rng.uniform(-100, 100, 20)) + list(rng.standard_normal(10) * 1e-3)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.array(values).astype(np_dtype(src))


@functools.lru_cache(maxsize=None)
def narrowing_results() -> dict:
    inputs = {pair: narrowing_samples(*pair) for pair in NARROWING}
    got = arr_batch([(f"{{0}}.astype({dst})", [(src, inputs[(src, dst)])], dst) for src, dst in NARROWING])
    return {pair: (inputs[pair], g) for pair, g in zip(NARROWING, got)}


@pytest.mark.parametrize("src, dst", NARROWING)
def test_float_narrowing_rounds_to_nearest_even_and_overflows_to_inf(src, dst):
    x, got = narrowing_results()[(src, dst)]
    assert short_name(got.dtype) == dst
    expected = to_float_reference(x, dst)
    np.testing.assert_array_equal(np.asarray(got).astype(np.float64), expected.astype(np.float64))
    assert np.isinf(np.asarray(got).astype(np.float64)).sum() >= 3


@pytest.mark.parametrize("dst, x, nearest", [("f16", 1 + 2 ** -11 + 2 ** -40, 1 + 2 ** -10),
                                             ("bf16", 1 + 2 ** -8 + 2 ** -40, 1 + 2 ** -7)])
def test_f64_to_half_rounds_once(dst, x, nearest):
    # x lies just above the midpoint between 1 and the next value of dst, so it rounds up. (ml_dtypes
    # rounds f64 -> bf16 through f32 and gets 1.0, so it cannot be the oracle here.)
    got = cached_module(f"def f(x: f64[n]) -> {dst}[n]:\n    return x.astype({dst})\n").f(np.array([x]))
    assert float(np.asarray(got)[0]) == nearest


def test_widening_is_exact():
    mod = cached_module("def f(x: f16[n], y: bf16[m], z: f32[k]) -> (f64[n], f64[m], f64[k]):\n"
                        "    return x.astype(f64), y.astype(f64), z.astype(f64)\n")
    x = np.array([65504.0, 6e-8, -1 / 3, np.nan, np.inf], np.float16)
    y = np.array([3e38, 1 / 3, -np.inf], ml_dtypes.bfloat16)
    z = np.array([np.float32(0.1), 3.4028235e38, 1e-45], np.float32)
    a, b, c = mod.f(x, y, z)
    np.testing.assert_array_equal(np.asarray(a), x.astype(np.float64))
    np.testing.assert_array_equal(np.asarray(b), y.astype(np.float64))
    np.testing.assert_array_equal(np.asarray(c)[:2], z.astype(np.float64)[:2])


# ---- bool -------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def to_bool_results() -> dict:
    floats = {dt: np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1e-3, -2.0]).astype(np_dtype(dt))
              for dt in ["f16", "bf16", "f32", "f64"]}
    ints = {dt: int_samples(dt) for dt in INTS}
    inputs = {**floats, **ints}
    got = arr_batch([("{0}.astype(bool)", [(dt, x)], "bool") for dt, x in inputs.items()])
    return {dt: (inputs[dt], g) for dt, g in zip(inputs, got)}


@pytest.mark.parametrize("src", ["f16", "bf16", "f32", "f64"] + INTS)
def test_anything_to_bool_is_not_equal_zero(src):
    x, got = to_bool_results()[src]
    assert got.dtype == np.bool_
    expected = x.astype(np.float64) != 0 if DTYPES[src].is_float else x != 0
    np.testing.assert_array_equal(np.asarray(got), expected)
    if DTYPES[src].is_float:
        assert np.asarray(got).tolist()[:3] == [False, False, True]     # NaN -> true


@functools.lru_cache(maxsize=None)
def from_bool_results() -> dict:
    dsts = [d for d in DTYPES if d != "bool"]
    got = arr_batch([(f"{{0}}.astype({d})", [("bool", np.array([True, False, True]))], d) for d in dsts])
    return dict(zip(dsts, got))


@pytest.mark.parametrize("dst", [d for d in DTYPES if d != "bool"])
def test_bool_to_number_is_zero_or_one(dst):
    got = from_bool_results()[dst]
    assert short_name(got.dtype) == dst
    assert np.asarray(got).astype(np.float64).tolist() == [1.0, 0.0, 1.0]


# ---- bitcast ----------------------------------------------------------------------------------------------
BITCASTS = [("f32", "u32"), ("f32", "i32"), ("u32", "f32"), ("i32", "f32"), ("f64", "i64"), ("f64", "u64"),
            ("i64", "f64"), ("u64", "f64"), ("f16", "u16"), ("f16", "i16"), ("bf16", "u16"), ("u16", "f16"),
            ("u16", "bf16"), ("i8", "u8"), ("u8", "i8"), ("i64", "u64"), ("f16", "bf16")]


def bitcast_input(src: str) -> np.ndarray:
    dt = np_dtype(src)
    if DTYPES[src].is_float:
        return np.array([0.0, -0.0, 1.0, -2.5, np.inf, np.nan, 1e-3]).astype(dt)
    info = np.iinfo(dt)
    return np.array([0, 1, info.max, info.min, info.max // 3], dtype=dt)


@functools.lru_cache(maxsize=None)
def bitcast_results() -> dict:
    got = arr_batch([(f"bitcast({{0}}, {dst})", [(src, bitcast_input(src))], dst) for src, dst in BITCASTS])
    return dict(zip(BITCASTS, got))


@pytest.mark.parametrize("src, dst", BITCASTS)
def test_bitcast_reinterprets_bits(src, dst):
    got = bitcast_results()[(src, dst)]
    x = bitcast_input(src)
    assert short_name(got.dtype) == dst
    assert np.asarray(got).tobytes() == x.view(np_dtype(dst)).tobytes()


@pytest.mark.parametrize("src", [
    "def f(x: f32[n]) -> u16[n]:\n    return bitcast(x, u16)\n",
    "def f(x: bool[n]) -> u8[n]:\n    return bitcast(x, u8)\n",
    "def f(x: u8[n]) -> bool[n]:\n    return bitcast(x, bool)\n",
    "def f(x: f32[n]) -> u32[n]:\n    return bitcast(x, 3)\n",
])
def test_bitcast_errors(src):
    with pytest.raises(arrc.CompileError) as info:
        arrc.loads(src)
    assert info.value.diagnostics[0].code in ("E0201", "E0210")


# ---- 64-bit values at the boundary --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def wide():
    return cached_module(
        "def f64_id(x: f64[n]) -> f64[n]:\n    return x\n\n"
        "def f64_add(x: f64[n], y: f64[n]) -> f64[n]:\n    return x + y\n\n"
        "def f64_scalar(x: f64) -> f64:\n    return x * 1.0\n\n"
        "def i64_id(x: i64[n]) -> i64[n]:\n    return x + 0\n\n"
        "def u64_id(x: u64[n]) -> u64[n]:\n    return x + 0\n\n"
        "def i64_to_f64(x: i64[n]) -> f64[n]:\n    return x.astype(f64)\n")


def test_f64_arguments_keep_their_precision(wide):
    x = np.array([1 + 2 ** -40, 1e300, 5e-324])
    got = wide.f64_id(x)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(np.asarray(got), x)
    added = wide.f64_add(np.array([1.0]), np.array([2 ** -40]))
    assert float(np.asarray(added)[0]) == 1 + 2 ** -40
    assert float(wide.f64_scalar(1 + 2 ** -40)) == 1 + 2 ** -40          # Python float argument


def test_i64_and_u64_arguments_keep_their_bits(wide):
    x = np.array([2 ** 60 + 1, -2 ** 63, 2 ** 63 - 1], np.int64)
    got = wide.i64_id(x)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(np.asarray(got), x)
    u = np.array([2 ** 64 - 1, 2 ** 63 + 1], np.uint64)
    np.testing.assert_array_equal(np.asarray(wide.u64_id(u)), u)
    assert int(np.asarray(wide.i64_id([2 ** 60 + 1]))[0]) == 2 ** 60 + 1   # Python int argument


def test_i64_to_f64_rounds_to_nearest_even(wide):
    x = np.array([2 ** 53 + 1, 2 ** 53 + 3, 2 ** 63 - 1, -2 ** 63], np.int64)
    np.testing.assert_array_equal(np.asarray(wide.i64_to_f64(x)), x.astype(np.float64))


def test_int_to_bf16_rounds_through_f32_as_jax_numpy():
    """docs/language.md (choice): int -> bf16 is XLA's convert, through f32 as jax.numpy and ml_dtypes, the same on
    CPU and TPU; so 16842753 (2**24 + 2**16 + 1) rounds twice, to 2**24, where f64 -> bf16 rounds once."""
    x = np.array([16842753, 2 ** 30 + 2 ** 22 + 1, 257, -16842753], np.int32)
    mod = cached_module("def f(x: i32[n]) -> (bf16[n], bf16[n]):\n    return bf16(x), bf16(f64(x))\n")
    via_f32, once = (np.asarray(v).astype(np.float64) for v in mod.f(x))
    np.testing.assert_array_equal(via_f32, np.asarray(jnp.asarray(x).astype(jnp.bfloat16)).astype(np.float64))
    np.testing.assert_array_equal(via_f32, [2 ** 24, 2 ** 30, 256, -2 ** 24])
    np.testing.assert_array_equal(once, [2 ** 24 + 2 ** 17, 2 ** 30 + 2 ** 23, 256, -2 ** 24 - 2 ** 17])


def test_int_constant_to_bf16_rounds_through_f32_as_at_run_time():
    """docs/language.md's `bf16(i32(16842753))` is 16777216: a constant operand is folded by XLA, which converted
    s32 -> bf16 in one rounding (16908288), unlike the same cast of an argument."""
    mod = cached_module("def f() -> (bf16, bf16, bf16[1]):\n"
                        "    return bf16(i32(16842753)), bf16(16842753), i32([16842753]).astype(bf16)\n")
    assert [float(np.asarray(v).ravel()[0]) for v in mod.f()] == [2 ** 24] * 3
