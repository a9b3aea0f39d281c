"""End-to-end tests of construction, shape, linear-algebra and neural-net builtins (compiler/ops_shape.py).

Each program is compiled once (module-level cache) and run on a few shapes; results are compared with
NumPy or jax.numpy (x64 enabled, so 64-bit inputs stay 64-bit).
"""
from __future__ import annotations

import functools
import re
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import arrc

jax.config.update("jax_enable_x64", True)

RNG = np.random.default_rng(0)


@functools.lru_cache(maxsize=None)
def load(src: str) -> arrc.Module:
    return arrc.loads(textwrap.dedent(src).strip() + "\n")


def fn(signature: str, body: str):
    """The function `f` of a one-function module: `fn("(x: f32[n]) -> f32[n]", "return x")`."""
    return load(f"def f{signature}:\n    {body}\n").f


def rand(shape, dtype) -> np.ndarray:
    if np.dtype(dtype).kind == "f":
        return RNG.standard_normal(shape).astype(dtype)
    if np.dtype(dtype).kind == "b":
        return RNG.random(shape) < 0.5
    return RNG.integers(-5, 6, shape).astype(dtype)


def same(actual, expected, exact: bool = False) -> None:
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if exact or actual.dtype.kind in "biu":
        np.testing.assert_array_equal(actual, expected)
    else:
        tol = 1e-5 if actual.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(actual, expected, rtol=tol, atol=tol, equal_nan=True)


def error_of(src: str, *call_args):
    """The first diagnostic of compiling `src` (or of calling its `f` with `call_args`)."""
    with pytest.raises(arrc.CompileError) as info:
        module = arrc.loads(textwrap.dedent(src).strip() + "\n")
        module.f(*call_args)
    return info.value.diagnostics[0]


# ---- construction ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["f32", "f64", "i32", "u8", "bool"])
def test_zeros_ones_full(dtype):
    f = fn(f"(x: f32[n, m]) -> ({dtype}[n, m], {dtype}[m], {dtype}[2, n])",
           f"return zeros(x.shape, dtype={dtype}), ones(m, dtype={dtype}), full((2, n), 1, dtype={dtype})")
    npd = np.dtype({"f32": np.float32, "f64": np.float64, "i32": np.int32, "u8": np.uint8, "bool": np.bool_}[dtype])
    for n, m in [(2, 3), (1, 4)]:
        z, o, full = f(np.zeros((n, m), np.float32))
        same(z, np.zeros((n, m), npd))
        same(o, np.ones(m, npd))
        same(full, np.full((2, n), 1, npd))


def test_construction_defaults_and_consts():
    f = fn("(x: f32[n]) -> (f32[3, n], f32[n], i32[2], f32[3], f64[2], i32[2])",
           "return zeros((3, n)), ones(n), full(2, 7), full(3, 1.5), full(2, 0.1, dtype=f64), "
           "full(2, 1.9, dtype=i32)")
    outs = f(np.zeros(4, np.float32))
    expected = [np.zeros((3, 4), np.float32), np.ones(4, np.float32), np.full(2, 7, np.int32),
                np.full(3, 1.5, np.float32), np.full(2, 0.1, np.float64), np.full(2, 1, np.int32)]
    for a, e in zip(outs, expected):
        same(a, e, exact=True)
    g = load("const K: i32 = 3\ndef g(x: f32[n]) -> f32[K, n]:\n    return zeros((K, n)) + x\n").g
    same(g(np.arange(2, dtype=np.float32)), np.tile(np.arange(2, dtype=np.float32), (3, 1)))


def test_full_run_time_and_array_fill():
    f = fn("(v: f64, row: i32[m], x: f32[n]) -> (f64[n], i32[n, m], f32[n], u8[2])",
           "return full(n, v), full((n, m), row), full(n, v, dtype=f32), full(2, -1.5 * v, dtype=u8)")
    a, b, c, d = f(np.float64(2.5), np.array([1, 2, 3], np.int32), np.zeros(2, np.float32))
    same(a, np.full(2, 2.5))
    same(b, np.array([[1, 2, 3]] * 2, np.int32))
    same(c, np.full(2, 2.5, np.float32))
    same(d, np.zeros(2, np.uint8))          # cast semantics: negative float -> u8 saturates at 0


@pytest.mark.parametrize("body, length, expected", [
    ("arange(n)", "n", lambda n: np.arange(n, dtype=np.int32)),
    ("arange(2, n)", "n - 2", lambda n: np.arange(2, n, dtype=np.int32)),
    ("arange(n, dtype=i64)", "n", lambda n: np.arange(n, dtype=np.int64)),
    ("arange(1, n, dtype=f64)", "n - 1", lambda n: np.arange(1, n, dtype=np.float64)),
    ("arange(n + 1, 1, -1)", "n", lambda n: np.arange(n + 1, 1, -1, dtype=np.int32)),
])
def test_arange_symbolic(body, length, expected):
    name = {np.int32: "i32", np.int64: "i64", np.float64: "f64"}[expected(1).dtype.type]
    f = fn(f"(x: f32[n]) -> {name}[{length}]", f"return {body}")
    for n in (2, 5):
        same(f(np.zeros(n, np.float32)), expected(n), exact=True)


def test_arange_length_not_a_polynomial():
    # ceil((n - 1) / 3) is not a polynomial in n: the length is only known per call.
    f = fn("(x: f32[n]) -> (i32, i32)", "y = arange(1, n, 3)\n    return sum(y), y.shape[0]")
    for n in (1, 2, 7, 8):
        total, size = f(np.zeros(n, np.float32))
        assert (total, size) == (np.arange(1, n, 3).sum(), len(np.arange(1, n, 3)))


def test_arange_values_with_step():
    f = fn("(x: f32[n]) -> (i32[4], i32[3], f32[10], f64[7], i32[0], u8[3])",
           "return arange(0, 12, 3), arange(7, 1, -2), arange(0.0, 1.0, 0.1), arange(-1.5, 2, 0.5, dtype=f64), "
           "arange(5, 2), arange(3, dtype=u8)")
    got = f(np.zeros(1, np.float32))
    want = [np.arange(0, 12, 3, dtype=np.int32), np.arange(7, 1, -2, dtype=np.int32),
            np.arange(0.0, 1.0, 0.1, dtype=np.float32), np.arange(-1.5, 2, 0.5, dtype=np.float64),
            np.arange(5, 2, dtype=np.int32), np.arange(3, dtype=np.uint8)]
    for g, w in zip(got, want):
        same(g, w, exact=True)


@pytest.mark.parametrize("bounds", ["1.0, 2.0, 0.1", "10.0, -3.0, -0.35", "1e6, 1e6 + 100, 0.37", "-2.7, 3.2, 1.1",
                                    "0.5, 3.5, 1.5"])
@pytest.mark.parametrize("dtype", ["f32", "f64", "f16", "bf16", "i32"])
def test_arange_float_bounds_match_jax(bounds, dtype):
    # jnp.arange steps as start + step * iota (in f32 for f16/bf16); NumPy's float32 arange drifts from it
    # (arange(1.0, 2.0, 0.1)[3] is 1.3000001 there, 1.3 in jnp; in f16 1.299, and inf - inf = nan past 65504).
    want = np.asarray(jnp.arange(*eval(bounds), dtype=jnp.dtype({"f32": "float32", "f64": "float64", "f16": "float16",
                                                                 "bf16": "bfloat16", "i32": "int32"}[dtype])))
    got = fn(f"() -> {dtype}[{len(want)}]", f"return arange({bounds}, dtype={dtype})")()
    same(got, want, exact=True)


@pytest.mark.parametrize("dtype", ["f32", "f64", "i32", "bool"])
def test_eye(dtype):
    f = fn(f"(x: f32[n, m]) -> ({dtype}[n], {dtype}[n, m], {dtype}[n, m], {dtype}[m, n])",
           f"return sum(eye(n, dtype={dtype}), axis=0).astype({dtype}), eye(n, m, dtype={dtype}), "
           f"eye(n, m, 1, dtype={dtype}), eye(m, n, k=-1, dtype={dtype})")
    npd = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "bool": np.bool_}[dtype]
    for n, m in [(3, 3), (2, 4), (4, 2)]:
        s, a, b, c = f(np.zeros((n, m), np.float32))
        same(s, np.eye(n, dtype=npd).sum(axis=0).astype(npd))
        same(a, np.eye(n, m, dtype=npd))
        same(b, np.eye(n, m, 1, dtype=npd))
        same(c, np.eye(m, n, k=-1, dtype=npd))


def test_eye_default_dtype():
    same(fn("(x: f32[n]) -> f32[n, n]", "return eye(n)")(np.zeros(3, np.float32)), np.eye(3, dtype=np.float32))


@pytest.mark.parametrize("num", [0, 1, 2, 5, 7])
def test_linspace(num):
    f = fn(f"(a: f64, b: f64) -> (f32[{num}], f64[{num}], f32[{num}], i32[{num}])",
           f"return linspace(0, 1, {num}), linspace(a, b, {num}), linspace(-2.0, 3, num={num}, endpoint=false), "
           f"linspace(a, b, {num}, dtype=i32)")
    a, b = np.float64(-1.25), np.float64(4.5)
    r0, r1, r2, r3 = f(a, b)
    same(r0, jnp.linspace(0, 1, num, dtype=jnp.float32))
    same(r1, jnp.linspace(a, b, num))
    same(r2, jnp.linspace(-2.0, 3, num, endpoint=False, dtype=jnp.float32))
    same(r3, jnp.linspace(a, b, num, dtype=jnp.int32))


def test_linspace_symbolic_num():
    f = fn("(x: f32[n]) -> f32[n]", "return x + linspace(0, 10, n)")
    same(f(np.zeros(6, np.float32)), np.linspace(0, 10, 6, dtype=np.float32))


# ---- shape manipulation --------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_reshape(dtype):
    name = {np.float32: "f32", np.float64: "f64", np.int32: "i32"}[dtype]
    f = fn(f"(x: {name}[n, m]) -> ({name}[m, n], {name}[n * m], {name}[2, n * m], {name}[n, m, 1])",
           "return reshape(x, (m, n)), reshape(x, -1), reshape(concat((x, x)), (2, -1)), "
           "reshape(x, (n, -1, 1))")
    for shape in [(2, 3), (1, 5), (4, 4)]:
        x = rand(shape, dtype)
        a, b, c, d = f(x)
        same(a, x.reshape(shape[1], shape[0]))
        same(b, x.reshape(-1))
        same(c, np.concatenate([x, x]).reshape(2, -1))
        same(d, x.reshape(shape[0], -1, 1))


def test_reshape_deferred_divisibility():
    # n // 2 is not a polynomial: accepted at definition, checked per call.
    f = fn("(x: f32[n]) -> f32[2]", "return sum(reshape(x, (-1, 2)), axis=0)")
    x = np.arange(6, dtype=np.float32)
    same(f(x), x.reshape(-1, 2).sum(axis=0))
    with pytest.raises(arrc.CompileError) as info:
        f(np.arange(5, dtype=np.float32))
    diag = info.value.diagnostics[0]
    assert diag.code == "E0202" and (diag.span.line, diag.span.col) == (2, 24)
    assert "5 is not a multiple of 2" in diag.message and any("n = 5" in n for n in diag.notes)


def test_reshape_polynomial_division():
    f = fn("(x: f32[n, m, 3]) -> f32[m, 3 * n]", "return reshape(transpose(x, (1, 0, 2)), (m, -1))")
    x = rand((2, 4, 3), np.float32)
    same(f(x), x.transpose(1, 0, 2).reshape(4, -1))
    g = fn("(x: f32[n + 1, m]) -> f32[m, n + 1]", "return reshape(x, (m, -1))")
    x = rand((3, 2), np.float32)
    same(g(x), x.reshape(2, 3))


def test_a_power_of_a_shape_is_a_compile_time_integer():
    """`n ** 2` is a size as `n * n` is (it was E0207, "`shape` must be known at compile time")."""
    f = fn("(x: f32[n]) -> (f32[n * n], i32, i32)", "return reshape(outer(x, x), n ** 2), sum(ones((n + 1) ** 3, i32)), "
                                                   "sum(ones(n ** 0, i32))")
    x = rand((3,), np.float32)
    flat, cube, one = f(x)
    same(flat, np.outer(x, x).reshape(9))
    assert (int(cube), int(one)) == (64, 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_transpose(dtype):
    name = {np.float32: "f32", np.float64: "f64", np.int32: "i32"}[dtype]
    f = fn(f"(x: {name}[a, b, c]) -> ({name}[c, b, a], {name}[b, c, a], {name}[a, c, b])",
           "return transpose(x), transpose(x, (1, 2, 0)), transpose(x, (0, -1, -2))")
    for shape in [(2, 3, 4), (1, 1, 5)]:
        x = rand(shape, dtype)
        a, b, c = f(x)
        same(a, x.transpose())
        same(b, x.transpose(1, 2, 0))
        same(c, x.transpose(0, 2, 1))


def test_broadcast_to():
    f = fn("(x: f64[n], y: i32[1, m]) -> (f64[3, n], i32[2, n, m], f64[n])",
           "return broadcast_to(x, (3, n)), broadcast_to(y, (2, n, m)), broadcast_to(x, x.shape)")
    for n, m in [(2, 3), (4, 1)]:
        x, y = rand(n, np.float64), rand((1, m), np.int32)
        a, b, c = f(x, y)
        same(a, np.broadcast_to(x, (3, n)))
        same(b, np.broadcast_to(y, (2, n, m)))
        same(c, x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_concat(dtype):
    name = {np.float32: "f32", np.float64: "f64", np.int32: "i32"}[dtype]
    f = fn(f"(x: {name}[n, 3], y: {name}[m, 3], z: {name}[n, 2]) -> ({name}[n + m + n, 3], {name}[n, 5], "
           f"{name}[n, 8])",
           "return concat((x, y, x)), concatenate((x, z), axis=1), concat(arrays=(x, z, x), axis=-1)")
    for n, m in [(2, 1), (1, 4)]:
        x, y, z = rand((n, 3), dtype), rand((m, 3), dtype), rand((n, 2), dtype)
        a, b, c = f(x, y, z)
        same(a, np.concatenate([x, y, x]))
        same(b, np.concatenate([x, z], axis=1))
        same(c, np.concatenate([x, z, x], axis=-1))


def test_concat_axis_none_flattens_as_numpy():
    """np.concatenate(arrays, axis=None) joins the flattened arrays (scalars too); it was E0101 'undefined name
    `None`' although `sort(x, axis=None)` is accepted."""
    f = fn("(x: f64[n, m], y: i32[k], s: f64) -> f64[n * m + k + 1]", "return concatenate((x, y, s), axis=None)")
    for n, m in [(2, 3), (0, 3)]:
        x, y, s = rand((n, m), np.float64), rand((4,), np.int32), np.float64(2.5)
        same(f(x, y, s), np.asarray(jnp.concatenate([x, y, s], axis=None)))


def test_concat_promotes():
    f = fn("(x: i32[n], y: f32[m]) -> (f32[n + m], f32[n + 1])", "return concat((x, y)), concat((x, full(1, 1.5)))")
    x, y = np.array([1, 2], np.int32), np.array([0.5], np.float32)
    a, b = f(x, y)
    same(a, np.asarray(jnp.concatenate([x, y])))
    same(b, np.array([1, 2, 1.5], np.float32))


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_stack(dtype):
    name = {np.float32: "f32", np.int32: "i32"}[dtype]
    f = fn(f"(x: {name}[n, m], y: {name}[n, m], s: {name}) -> ({name}[2, n, m], {name}[n, 3, m], "
           f"{name}[n, m, 2], {name}[3])",
           "return stack((x, y)), stack((x, y, x), axis=1), stack((x, y), axis=-1), stack((s, s, s))")
    for shape in [(2, 3), (1, 1)]:
        x, y, s = rand(shape, dtype), rand(shape, dtype), rand((), dtype)
        a, b, c, d = f(x, y, s)
        same(a, np.stack([x, y]))
        same(b, np.stack([x, y, x], axis=1))
        same(c, np.stack([x, y], axis=-1))
        same(d, np.stack([s, s, s]))


def test_expand_dims_squeeze():
    f = fn("(x: f32[n, m]) -> (f32[1, n, m], f32[n, m, 1], f32[1, n, 1, m], f32[n, m])",
           "return expand_dims(x, 0), expand_dims(x, -1), expand_dims(x, (0, 2)), "
           "squeeze(expand_dims(x, (0, 2)), (0, 2))")
    x = rand((2, 3), np.float32)
    a, b, c, d = f(x)
    same(a, np.expand_dims(x, 0))
    same(b, np.expand_dims(x, -1))
    same(c, np.expand_dims(x, (0, 2)))
    same(d, x)
    g = fn("(x: i32[1, 3, 1]) -> (i32[3], i32[3, 1], i32[1, 3])",
           "return squeeze(x), squeeze(x, 0), squeeze(x, axis=-1)")
    x = rand((1, 3, 1), np.int32)
    for got, want in zip(g(x), [np.squeeze(x), np.squeeze(x, 0), np.squeeze(x, -1)]):
        same(got, want)


def test_squeeze_symbolic_axis_checked_per_call():
    f = fn("(x: f32[n, m]) -> f32[n]", "return squeeze(x, 1)")
    x = rand((3, 1), np.float32)
    same(f(x), x[:, 0])
    with pytest.raises(arrc.CompileError) as info:
        f(rand((3, 2), np.float32))
    diag = info.value.diagnostics[0]
    assert diag.code == "E0204" and (diag.span.line, diag.span.col) == (2, 23) and "size is 2" in diag.message


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.bool_])
def test_flip(dtype):
    name = {np.float64: "f64", np.int32: "i32", np.bool_: "bool"}[dtype]
    f = fn(f"(x: {name}[n, m]) -> ({name}[n, m], {name}[n, m], {name}[n, m], {name}[n, m])",
           "return flip(x), flip(x, 0), flip(x, axis=-1), flip(x, (0, 1))")
    x = rand((3, 4), dtype)
    for got, want in zip(f(x), [np.flip(x), np.flip(x, 0), np.flip(x, -1), np.flip(x, (0, 1))]):
        same(got, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_pad(dtype):
    name = {np.float32: "f32", np.float64: "f64", np.int32: "i32"}[dtype]
    f = fn(f"(x: {name}[n, m], v: {name}) -> ({name}[n + 2, m + 2], {name}[n + 3, m + 3], "
           f"{name}[n + 1, m + 3], {name}[n, m + 1], {name}[n + 4, m + 4])",
           "return pad(x, 1), pad(x, (1, 2), 7), pad(x, ((0, 1), (2, 1)), constant_values=v), "
           "pad(x, ((0, 0), (1, 0))), pad(x, (2,))")
    x, v = rand((2, 3), dtype), dtype(-3)
    a, b, c, d, e = f(x, v)
    same(a, np.pad(x, 1))
    same(b, np.pad(x, (1, 2), constant_values=7))
    same(c, np.pad(x, ((0, 1), (2, 1)), constant_values=v))
    same(d, np.pad(x, ((0, 0), (1, 0))))
    same(e, np.pad(x, (2,)))


def test_pad_widths_as_list_literals_as_np_pad_reads_them():
    """A list literal is an integer array (`[(1, 2)]` is i32[1, 2]): it was refused ("must be an integer,
    found i32[1, 2]") where np.pad, and `conv`'s padding=, take lists."""
    f = fn("(x: f32[n, m]) -> (f32[n + 3, m + 3], f32[n + 1, m + 3], f32[n + 4, m + 4], f32[n + 6, m + 6], "
           "f32[n + 2, m + 2], f32[n + 2, m + 6])",
           "return pad(x, [(1, 2)]), pad(x, [[0, 1], [2, 1]]), pad(x, [2]), pad(x, [2, 4]), pad(x, [[1]]), "
           "pad(x, [[1], [3]])")
    x = rand((2, 3), np.float32)
    for got, width in zip(f(x), [[(1, 2)], [[0, 1], [2, 1]], [2], [2, 4], [[1]], [[1], [3]]]):
        same(got, np.pad(x, width))
    for width, message in (("[1, 2, 3]", "must be an int, a pair"), ("[(1, 1), (1, 1), (1, 1)]", "3 pairs"),
                           ("[[1], [2], [3]]", "must be an int, a pair"), ("[[[1, 2]]]", "must be an int, a pair"),
                           ("[(1, -1)]", "cannot be negative")):
        with pytest.raises(arrc.CompileError, match=re.escape(message)):
            arrc.loads(f"def g(x: f32[2, 3]) -> f32[2, 3]:\n    return pad(x, {width})\n")


def test_pad_symbolic_width():
    f = fn("(x: f32[n], y: f32[k]) -> f32[n + 2 * k]", "return pad(x, k, 1.5)")
    x = rand(3, np.float32)
    same(f(x, np.zeros(2, np.float32)), np.pad(x, 2, constant_values=1.5))


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_tile(dtype):
    name = {np.float32: "f32", np.int32: "i32"}[dtype]
    f = fn(f"(x: {name}[n, m]) -> ({name}[n, 3 * m], {name}[2 * n, 2 * m], {name}[2, n, m])",
           "return tile(x, 3), tile(x, (2, 2)), tile(x, (2, 1, 1))")
    x = rand((2, 3), dtype)
    for got, want in zip(f(x), [np.tile(x, 3), np.tile(x, (2, 2)), np.tile(x, (2, 1, 1))]):
        same(got, want)
    g = fn(f"(v: {name}[n], r: {name}[k]) -> {name}[k, 2 * n]", "return tile(v, (k, 2))")
    v = rand(3, dtype)
    same(g(v, rand(4, dtype)), np.tile(v, (4, 2)))


def test_swapaxes_moveaxis_and_repeat_as_numpy():
    """NumPy's `swapaxes`, `moveaxis` and `repeat` (and the methods `x.swapaxes`, `x.repeat`) were E0101
    "unknown function"; derivatives and vmap come from the StableHLO they lower to, as jax.grad's."""
    f = fn("(x: f32[2, 3, 4]) -> (f32[4, 3, 2], f32[3, 4, 2], f32[4, 2, 3], f32[3, 2, 4])",
           "return swapaxes(x, 0, -1), moveaxis(x, 0, -1), moveaxis(x, (1, 2), (2, 0)), x.swapaxes(0, 1)")
    x = rand((2, 3, 4), np.float32)
    for got, want in zip(f(x), [np.swapaxes(x, 0, -1), np.moveaxis(x, 0, -1), np.moveaxis(x, (1, 2), (2, 0)),
                                x.swapaxes(0, 1)]):
        same(got, want, exact=True)
    r = fn("(x: i32[n, m]) -> (i32[2 * n * m], i32[n, 3 * m], i32[0, m], i32[n, m])",
           "return repeat(x, 2), x.repeat(3, axis=1), repeat(x, 0, axis=0), repeat(x, 1, axis=-1)")
    y = rand((2, 3), np.int32)
    for got, want in zip(r(y), [np.repeat(y, 2), y.repeat(3, axis=1), np.repeat(y, 0, axis=0), y]):
        same(got, want)
    loss = load("def loss(v: f64[n]) -> f64:\n    return sum(repeat(v, 3) ** 3)\n").loss
    v = rand(4, np.float64)
    same(arrc.grad(loss)(v), jax.grad(lambda v: jnp.sum(jnp.repeat(v, 3) ** 3))(v))
    moved = load("def m(a: f64[2, 3, 4], w: f64[4, 2, 3]) -> f64:\n"
                 "    return sum(moveaxis(a, (1, 2), (2, 0)) * w) + sum(swapaxes(a, 0, 2) ** 2)\n").m
    a, w = rand((2, 3, 4), np.float64), rand((4, 2, 3), np.float64)
    jax_m = lambda a, w: jnp.sum(jnp.moveaxis(a, (1, 2), (2, 0)) * w) + jnp.sum(jnp.swapaxes(a, 0, 2) ** 2)
    same(arrc.grad(moved)(a, w), jax.grad(jax_m)(a, w))
    same(arrc.vmap(moved, in_axes=(0, None))(np.stack([a, 2 * a]), w), jax.vmap(jax_m, in_axes=(0, None))(
        np.stack([a, 2 * a]), w))
    assert "repeats` must be one compile-time integer" in error_of(
        "def f(x: f32[3]) -> f32[6]:\n    return repeat(x, [1, 2, 3])\n").message
    assert "`source` names 2 axes and `destination` 1" in error_of(
        "def f(x: f32[2, 3, 4]) -> f32[2, 3, 4]:\n    return moveaxis(x, (0, 1), 2)\n").message
    assert "`repeats` must not be negative" in error_of(
        "def f(x: f32[3]) -> f32[3]:\n    return repeat(x, -1)\n").message


# ---- linear algebra ------------------------------------------------------------------------------
MATMUL_SHAPES = [
    ((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (4, 5)), ((4,), (2, 4, 5)),
    ((2, 1, 3, 4), (5, 4, 2)), ((1, 3, 4), (2, 4, 6)), ((2, 3, 4), (4,)),
]


def _type(name: str, shape) -> str:
    return f"{name}[{', '.join(map(str, shape))}]" if shape else name


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("shapes", MATMUL_SHAPES)
def test_matmul(shapes, dtype):
    name = {np.float32: "f32", np.float64: "f64", np.int32: "i32"}[dtype]
    (sa, sb) = shapes
    x, y = rand(sa, dtype), rand(sb, dtype)
    want = np.matmul(x, y)
    f = fn(f"(x: {_type(name, sa)}, y: {_type(name, sb)}) -> ({_type(name, want.shape)}, {_type(name, want.shape)})",
           "return x @ y, matmul(x, y)")
    for got in f(x, y):
        same(got, want)


def test_matmul_symbolic_and_promotion():
    f = fn("(a: f32[b, n, k], c: i32[k, m]) -> f32[b, n, m]", "return a @ c")
    for b, n, k, m in [(1, 2, 3, 4), (3, 1, 2, 2)]:
        a, c = rand((b, n, k), np.float32), rand((k, m), np.int32)
        same(f(a, c), np.asarray(jnp.matmul(a, c)))
    g = fn("(a: f64[n, k], c: f32[k]) -> f64[n]", "return matmul(a, c)")
    a, c = rand((2, 3), np.float64), rand(3, np.float32)
    same(g(a, c), np.asarray(jnp.matmul(a, c)))


def test_dot():
    f = fn("(a: f32[n, k], b: f32[k, m], v: f32[k], w: f32[k], s: f32) -> (f32[n, m], f32[n], f32, f32[k], f32[n, k])",
           "return dot(a, b), dot(a, v), dot(v, w), dot(v, s), dot(2, a)")
    a, b, v, w, s = rand((2, 3), np.float32), rand((3, 4), np.float32), rand(3, np.float32), \
        rand(3, np.float32), np.float32(1.5)
    for got, want in zip(f(a, b, v, w, s), [a @ b, a @ v, np.dot(v, w), v * s, 2 * a]):
        same(got, np.asarray(want, np.float32))


EINSUM_CASES = [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bij,bjk->bki", [(2, 3, 4), (2, 4, 5)]), ("ij,kj->ki", [(2, 3), (4, 3)]), ("i,j->ij", [(3,), (4,)]),
    ("i,i->", [(5,), (5,)]), ("ij,jk->", [(2, 3), (3, 4)]), ("ijk,k->ji", [(2, 3, 4), (4,)]),
    ("ij,ik->kj", [(3, 2), (3, 4)]), ("abc,cd->dba", [(2, 3, 4), (4, 2)]), ("ij,k->ik", [(2, 3), (4,)]),
    ("ij->ji", [(2, 3)]), ("ij->", [(2, 3)]), ("ijk->kj", [(2, 3, 4)]), ("ij->ij", [(2, 3)]),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("spec, shapes", EINSUM_CASES)
def test_einsum(spec, shapes, dtype):
    name = {np.float32: "f32", np.float64: "f64", np.int32: "i32"}[dtype]
    args = [rand(s, dtype) for s in shapes]
    want = np.einsum(spec, *args)
    params = ", ".join(f"{p}: {_type(name, s)}" for p, s in zip("xy", shapes))
    f = fn(f"({params}) -> {_type(name, want.shape)}", f"return einsum(\"{spec}\", {', '.join('xy'[:len(args)])})")
    same(f(*args), want.astype(dtype))


def test_einsum_symbolic():
    f = fn("(a: f32[b, n, k], c: f32[b, k, m]) -> f32[m, b, n]", 'return einsum("bnk, bkm -> mbn", a, c)')
    a, c = rand((2, 3, 4), np.float32), rand((2, 4, 5), np.float32)
    same(f(a, c), np.einsum("bnk,bkm->mbn", a, c))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_outer(dtype):
    name = {np.float32: "f32", np.float64: "f64", np.int32: "i32"}[dtype]
    f = fn(f"(x: {name}[n], y: {name}[m, 2]) -> ({name}[n, 2 * m], {name}[n, n])", "return outer(x, y), outer(x, x)")
    x, y = rand(3, dtype), rand((2, 2), dtype)
    a, b = f(x, y)
    same(a, np.outer(x, y))
    same(b, np.outer(x, x))


# ---- neural-net helpers --------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_log_softmax(dtype):
    name = {np.float32: "f32", np.float64: "f64"}[dtype]
    f = fn(f"(x: {name}[n, m]) -> ({name}[n, m], {name}[n, m], {name}[n, m], {name}[n, m], {name}[n, m])",
           "return softmax(x), softmax(x, axis=0), log_softmax(x), log_softmax(x, 0), softmax(x, (0, 1))")
    for shape in [(2, 3), (4, 1)]:
        x = rand(shape, dtype) * 10
        got = f(x)
        want = [jax.nn.softmax(x), jax.nn.softmax(x, axis=0), jax.nn.log_softmax(x), jax.nn.log_softmax(x, axis=0),
                jax.nn.softmax(x, axis=(0, 1))]
        for g, w in zip(got, want):
            same(g, np.asarray(w))


def test_softmax_infinities_match_jax():
    f = fn("(x: f32[n, m]) -> (f32[n, m], f32[n, m])", "return softmax(x), log_softmax(x)")
    x = np.array([[-np.inf, -np.inf, -np.inf], [0.0, -np.inf, 1.0], [np.inf, 0.0, 1.0], [1e30, -1e30, 0]],
                 np.float32)
    a, b = f(x)
    same(a, np.asarray(jax.nn.softmax(x)))
    same(b, np.asarray(jax.nn.log_softmax(x)))


def test_softmax_of_integers():
    f = fn("(x: i32[n]) -> f32[n]", "return softmax(x)")
    x = np.array([1, 2, 3], np.int32)
    same(f(x), np.asarray(jax.nn.softmax(x.astype(np.float32))))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_layer_norm(dtype):
    name = {np.float32: "f32", np.float64: "f64"}[dtype]
    f = fn(f"(x: {name}[n, m]) -> ({name}[n, m], {name}[n, m], {name}[n, m])",
           "return layer_norm(x), layer_norm(x, axis=0, epsilon=0.1), layer_norm(x, (0, 1))")
    for shape in [(2, 3), (3, 1)]:
        x = rand(shape, dtype) * 3 + 1
        got = f(x)
        want = [jax.nn.standardize(x, algorithm="stable"), jax.nn.standardize(x, 0, epsilon=0.1, algorithm="stable"),
                jax.nn.standardize(x, (0, 1), algorithm="stable")]
        for g, w in zip(got, want):
            same(g, np.asarray(w))


def test_one_hot():
    f = fn("(i: i32[n], j: u8[n, m]) -> (f32[n, 4], i32[n, m, 3], f64[n, 300])",
           "return one_hot(i, 4), one_hot(j, 3, dtype=i32), one_hot(j[:, 0], 300, dtype=f64)")
    i = np.array([0, 3, 4, -1, 2], np.int32)
    j = np.array([[0, 1], [2, 3], [255, 1], [7, 0], [2, 2]], np.uint8)
    a, b, c = f(i, j)
    same(a, np.asarray(jax.nn.one_hot(i, 4, dtype=jnp.float32)))
    same(b, np.asarray(jax.nn.one_hot(j, 3, dtype=jnp.int32)))
    # jax.nn.one_hot compares in u8 here, so its iota wraps at 256; arr compares in a wide enough dtype.
    same(c, (j[:, :1] == np.arange(300)).astype(np.float64))
    g = fn("(i: i32[n]) -> f32[n, n]", "return one_hot(i, n)")
    same(g(np.array([1, 0, 5], np.int32)), np.asarray(jax.nn.one_hot(np.array([1, 0, 5]), 3, dtype=jnp.float32)))


# ---- compile errors: code and position of each error path --------------------------------------
ERRORS = [
    # construction
    ("def f(x: i32[n]) -> f32[n]:\n    k = x[0]\n    return zeros(k)", "E0207", 3, 18),
    ("def f(x: f32[n]) -> f32[3]:\n    return zeros((3, -1))", "E0204", 2, 18),
    ("def f(x: f32[n]) -> f32[3]:\n    return ones(3, dtype=2)", "E0210", 2, 20),
    ("def f(x: f32[n]) -> u8[3]:\n    return full(3, 300, dtype=u8)", "E0211", 2, 20),
    ("def f(x: f32[n]) -> f32[3]:\n    return full(3, x)", "E0202", 2, 20),
    ("def f(x: f32[n]) -> i32[3]:\n    return arange(x[0])", "E0207", 2, 19),
    ("def f(x: i32[n]) -> i32[3]:\n    return arange(0, x[0])", "E0207", 2, 22),
    ("def f(x: f32[n]) -> i32[3]:\n    return arange(0, 3, 0)", "E0204", 2, 25),
    ("def f(x: f32[n]) -> i32[3]:\n    return arange(0, n, n)", "E0204", 2, 25),
    ("def f(x: f32[n]) -> f32[3]:\n    return arange(0.0, n, 0.5)", "E0204", 2, 24),
    ("def f(x: f32[n]) -> f32[3]:\n    return arange(0.0, 1.0, 0.0)", "E0204", 2, 29),
    ("def f(x: f32[n]) -> f32[3, 3]:\n    return eye(-3)", "E0204", 2, 16),
    ("def f(x: f32[n]) -> f32[3]:\n    return linspace(x, 1.0, 3)", "E0204", 2, 21),
    ("def f(x: f32[n]) -> f32[3]:\n    return linspace(0, 1, -3)", "E0204", 2, 27),
    ("def f(x: i32[n]) -> f32[3]:\n    return linspace(0, 1, x[0])", "E0207", 2, 27),
    # reshape and friends
    ("def f(x: f32[n]) -> f32[2, 3]:\n    return reshape(x, (2, 3))", "E0202", 2, 20),
    ("def f(x: f32[6]) -> f32[4, 2]:\n    return reshape(x, (4, -1))", "E0202", 2, 20),
    ("def f(x: f32[6]) -> f32[6]:\n    return reshape(x, (-1, -1))", "E0204", 2, 23),
    ("def f(x: f32[6]) -> f32[6]:\n    return reshape(x, (-2, 3))", "E0204", 2, 23),
    ("def f(x: f32[0]) -> f32[0]:\n    return reshape(x, (0, -1))", "E0202", 2, 20),
    ("def f(x: f32[3, 4]) -> f32[4, 3]:\n    return transpose(x, (0,))", "E0204", 2, 25),
    ("def f(x: f32[3, 4]) -> f32[4, 3]:\n    return transpose(x, (0, 2))", "E0204", 2, 25),
    ("def f(x: f32[3]) -> f32[3, 4]:\n    return broadcast_to(x, (3, 4))", "E0202", 2, 25),
    ("def f(x: f32[n]) -> f32[3]:\n    return broadcast_to(x, 3)", "E0202", 2, 25),
    ("def f(x: f32[3, 4]) -> f32[4]:\n    return broadcast_to(x, 4)", "E0202", 2, 25),
    ("def f(x: f32[n, 3], y: f32[n, 4]) -> f32[n, 7]:\n    return concat((x, y))", "E0202", 2, 23),
    ("def f(x: f32[n, 3], y: f32[n]) -> f32[n, 4]:\n    return concat((x, y), axis=1)", "E0202", 2, 23),
    ("def f(x: f32, y: f32) -> f32[2]:\n    return concat((x, y))", "E0204", 2, 20),
    ("def f(x: f32[n], y: f32[n]) -> f32[n]:\n    return concat(x)", "E0210", 2, 19),
    ("def f(x: f32[n], y: f32[n]) -> f32[n]:\n    return concat((x, f32))", "E0210", 2, 23),
    ("def f(x: f32[n], y: f32[n]) -> f32[n]:\n    return concat((x, y), axis=(0, 1))", "E0204", 2, 27),
    ("def f(x: f32[n], y: f32[n]) -> f32[n]:\n    return concat((x, y), axis=1)", "E0204", 2, 27),
    ("def f(x: f32[n], y: f32[m]) -> f32[2, n]:\n    return stack((x, y))", "E0202", 2, 22),
    ("def f(x: f32[n], y: f32[n]) -> f32[2, n]:\n    return stack((x, y), axis=2)", "E0204", 2, 26),
    ("def f(x: f32[n]) -> f32[n]:\n    return expand_dims(x, 2)", "E0204", 2, 27),
    ("def f(x: f32[n, 1]) -> f32[n]:\n    return squeeze(x)", "E0204", 2, 20),
    ("def f(x: f32[3, 1]) -> f32[1]:\n    return squeeze(x, 0)", "E0204", 2, 23),
    ("def f(x: f32[3]) -> f32[3]:\n    return flip(x, 1)", "E0204", 2, 20),
    ("def f(x: f32[3]) -> f32[5]:\n    return pad(x, (1, -1))", "E0204", 2, 19),
    ("def f(x: f32[3, 3]) -> f32[5, 5]:\n    return pad(x, ((1, 1), (1, 1), (1, 1)))", "E0204", 2, 19),
    ("def f(x: f32[3, 3]) -> f32[5, 5]:\n    return pad(x, (1, 1, 1))", "E0204", 2, 19),
    ("def f(x: f32[3, 3]) -> f32[5, 5]:\n    return pad(x, ((1, 1, 1),))", "E0204", 2, 19),
    ("def f(x: f32[3]) -> f32[5]:\n    return pad(x, 1, x)", "E0204", 2, 22),
    ("def f(x: u8[3]) -> u8[5]:\n    return pad(x, 1, 300)", "E0211", 2, 22),
    # np.pad's per-side values (and any other non-scalar) are refused; they reached MLIR as a TypeError
    ("def f(x: f32[3]) -> f32[5]:\n    return pad(x, 1, constant_values=(3, 4))", "E0204", 2, 22),
    ("def f(x: f32[3]) -> f32[5]:\n    return pad(x, 1, \"a\")", "E0204", 2, 22),
    ("def f(x: f32[3]) -> f32[6]:\n    return tile(x, -2)", "E0204", 2, 20),
    # linear algebra
    ("def f(x: f32[n, k], y: f32[m, j]) -> f32[n, j]:\n    return x @ y", "E0202", 2, 12),
    ("def f(x: f32[2, 3], y: f32[4]) -> f32[2]:\n    return matmul(x, y)", "E0202", 2, 12),
    ("def f(x: f32[2, 3, 4], y: f32[5, 4, 2]) -> f32[2, 3, 2]:\n    return x @ y", "E0202", 2, 12),
    ("def f(x: f32, y: f32[3]) -> f32[3]:\n    return x @ y", "E0204", 2, 12),
    ("def f(x: f32[2, 3, 4], y: f32[4]) -> f32:\n    return dot(x, y)", "E0204", 2, 16),
    ("def f(x: f32[3, 4], y: f32[4, 5]) -> f32[3, 5]:\n    return einsum(\"ij,jk\", x, y)", "E0204", 2, 19),
    ("def f(x: f32[3, 4], y: f32[4, 5]) -> f32[3, 5]:\n    return einsum(\"...j,jk->k\", x, y)", "E0204", 2, 19),
    ("def f(x: f32[3, 4], y: f32[4, 5]) -> f32[3, 5]:\n    return einsum(\"ij->ij\", x, y)", "E0204", 2, 19),
    ("def f(x: f32[3, 4], y: f32[4, 5]) -> f32[3, 5]:\n    return einsum(\"ijk,jk->ik\", x, y)", "E0202", 2, 33),
    ("def f(x: f32[3, 4], y: f32[5, 5]) -> f32[3, 5]:\n    return einsum(\"ij,jk->ik\", x, y)", "E0202", 2, 35),
    ("def f(x: f32[3, 3]) -> f32[3]:\n    return einsum(\"ii->i\", x)", "E0204", 2, 19),
    ("def f(x: f32[3, 4]) -> f32[3, 3]:\n    return einsum(\"ij->ii\", x)", "E0204", 2, 19),
    ("def f(x: f32[3, 4]) -> f32[3]:\n    return einsum(\"ij->k\", x)", "E0204", 2, 19),
    ("def f(x: f32[3, 4]) -> f32[3]:\n    return einsum(x, x)", "E0210", 2, 19),
    ("def f(x: bool[3], y: bool[3]) -> bool:\n    return einsum(\"i,i->\", x, y)", "E0201", 2, 12),
    ("def f(x: bool[3], y: bool[3]) -> bool[3, 3]:\n    return outer(x, y)", "E0201", 2, 12),
    # neural-net helpers
    ("def f(x: f32[3]) -> f32[3]:\n    return softmax(x, axis=1)", "E0204", 2, 23),
    ("def f(x: f32) -> f32:\n    return log_softmax(x)", "E0204", 2, 12),
    ("def f(x: f32[3]) -> f32[3]:\n    return layer_norm(x, epsilon=x)", "E0204", 2, 26),
    ("def f(x: f32[3]) -> f32[3, 4]:\n    return one_hot(x, 4)", "E0201", 2, 20),
    ("def f(x: i32[3]) -> f32[3, 4]:\n    return one_hot(x, x[0])", "E0207", 2, 23),
    ("def f(x: i32[3]) -> f32[3, 4]:\n    return one_hot(x, -1)", "E0204", 2, 23),
]


@pytest.mark.parametrize("src, code, line, col", ERRORS)
def test_compile_errors(src, code, line, col):
    diag = error_of(src)
    assert (diag.code, diag.span.line, diag.span.col) == (code, line, col), str(diag.message)


@pytest.mark.parametrize("call, tuple_text", [("concatenate([x, x])", "(x, x)"), ("stack([x], axis=1)", "(x,)"),
                                              ("concat(arrays=[x[0], x[1]])", "(x[0], x[1])")])
def test_numpy_list_of_arrays_says_which_tuple_to_write(call, tuple_text):
    """np.concatenate([a, b]) is the everyday spelling; in arr `[a, b]` is an array literal (the items stacked),
    so the E0210 says so and writes the tuple."""
    diag = error_of(f"def f(x: f32[2, 3]) -> f32:\n    y = {call}\n    return 0.0")
    assert diag.code == "E0210" and f"write a tuple: `{tuple_text}`" in diag.help, diag.help


def test_matmul_error_names_both_operands():
    diag = error_of("def f(x: f32[2, 3], y: f32[4, 5]) -> f32[2, 5]:\n    return x @ y")
    assert "f32[2, 3]" in diag.message and "f32[4, 5]" in diag.message
    assert [(l.span.line, l.span.col) for l in diag.labels] == [(2, 12), (2, 16)]


def test_einsum_missing_arrow_suggests_output():
    diag = error_of('def f(x: f32[3, 4], y: f32[4, 5]) -> f32[3, 5]:\n    return einsum("ij,jk", x, y)')
    assert diag.help == 'write "ij,jk->ik" for NumPy\'s implicit output'
