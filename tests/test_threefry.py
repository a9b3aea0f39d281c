"""compiler/threefry.py: StableHLO random numbers bit for bit against jax.random (x64 on, see conftest)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func

from arrc.compiler import emit, threefry
from arrc.compiler.types import DTYPES
from arrc.runtime.pjrt import Executable

SEEDS = [0, 1, 42, 2 ** 31 - 1, 2 ** 32 + 5, -1]
SHAPES = [(), (1,), (7,), (3, 5), (2, 3, 4), (1000,)]
U32 = DTYPES["u32"]


def compile_fn(body, arg_dtypes, arg_shapes=None):
    """Build `func.func @main(args...)` whose body is `body(*block args)` (a value or a sequence of values)
    and compile it for CPU; returns a function of NumPy arguments giving the NumPy results."""
    arg_shapes = arg_shapes or [()] * len(arg_dtypes)
    ctx = emit.make_context()
    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            in_types = [emit.tensor_type(shape, dt) for shape, dt in zip(arg_shapes, arg_dtypes)]
            # the result types are known only after emitting: set the function type afterwards
            f = func.FuncOp("main", ir.FunctionType.get(in_types, []))
            block = f.add_entry_block()
            with ir.InsertionPoint(block):
                outs = body(*block.arguments)
                outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
                func.ReturnOp(outs)
            f.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(in_types, [o.type for o in outs]))
        assert module.operation.verify()
        exe = Executable(module, "cpu", cache=False)
    return lambda *args: [np.asarray(r) for r in exe([np.asarray(a, dt.np) for a, dt in zip(args, arg_dtypes)])]


def run(body, args, arg_dtypes):
    """Compile `body` for arguments like `args` and run it once."""
    return compile_fn(body, arg_dtypes, [np.shape(a) for a in args])(*args)


def key_words(seed) -> np.ndarray:
    return np.asarray(jax.random.key_data(jax.random.key(seed)))


def with_key(fn):
    """A body taking the key as two u32 scalars."""
    return lambda k0, k1: fn((k0, k1))


def test_jax_defaults_are_the_ones_ported():
    assert jax.config.jax_threefry_partitionable
    assert jax.config.jax_enable_x64
    assert jax.config.jax_default_prng_impl == "threefry2x32"


def test_threefry2x32_block_cipher():
    rng = np.random.default_rng(0)
    x0, x1 = (rng.integers(0, 2 ** 32, (3, 5), dtype=np.uint32) for _ in range(2))
    from jax._src.random.threefry2x32 import threefry2x32_p
    for key in [(0, 0), (0x13198A2E, 0x03707344), (0xFFFFFFFF, 1)]:
        k = [np.uint32(w) for w in key]
        want = [np.asarray(w) for w in threefry2x32_p.bind(jnp.uint32(k[0]), jnp.uint32(k[1]), x0, x1)]
        got = run(threefry.threefry2x32, [k[0], k[1], x0, x1], [U32] * 4)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w, strict=True)
    # the Random123 known-answer vector for 20 rounds
    got = run(threefry.threefry2x32, [np.uint32(0x13198A2E), np.uint32(0x03707344),
                                      np.uint32(0x243F6A88), np.uint32(0x85A308D3)], [U32] * 4)
    assert [int(g) for g in got] == [0xC4923A9C, 0x483DF7A0]


@pytest.mark.parametrize("seed", [0, 1, 42, 2 ** 31 - 1, 2 ** 32 + 5, -1, -2 ** 63, 2 ** 63 - 1])
def test_key_from_int64_seed(seed):
    got = run(lambda s: threefry.key_from_seed(s), [np.int64(seed)], [DTYPES["i64"]])
    np.testing.assert_array_equal(np.stack(got), key_words(seed), strict=True)


@pytest.mark.parametrize("name", ["i8", "i16", "i32", "u8", "u32", "u64"])
def test_key_from_narrower_or_unsigned_seed(name):
    dt = DTYPES[name]
    info = np.iinfo(dt.np)
    for seed in sorted({0, 1, 42, int(info.max), int(info.min), -1 if info.min < 0 else 7}):
        s = dt.np.type(seed)
        got = run(lambda v: threefry.key_from_seed(v), [s], [dt])
        np.testing.assert_array_equal(np.stack(got), key_words(s), strict=True, err_msg=f"{name} {seed}")


@pytest.mark.parametrize("bits", [8, 16, 32, 64])
def test_random_bits(bits):
    dt = np.dtype(f"uint{bits}")
    fn = compile_fn(with_key(lambda key: [threefry.random_bits(key, bits, shape) for shape in SHAPES]), [U32, U32])
    for seed in SEEDS:
        for shape, got in zip(SHAPES, fn(*key_words(seed))):
            want = np.asarray(jax.random.bits(jax.random.key(seed), shape, dt))
            np.testing.assert_array_equal(got, want, strict=True, err_msg=f"seed={seed} shape={shape}")


def test_split():
    nums = [1, 2, 3, 7, 100]
    fn = compile_fn(with_key(lambda k: [threefry.split(k, num) for num in nums]), [U32, U32])
    for seed in SEEDS:
        key = jax.random.key(seed)
        for num, got in zip(nums, fn(*key_words(seed))):
            want = np.asarray(jax.random.key_data(jax.random.split(key, num)))
            np.testing.assert_array_equal(got, want, strict=True, err_msg=f"seed={seed} num={num}")


def test_fold_in():
    fn = compile_fn(lambda k0, k1, d: threefry.fold_in((k0, k1), d), [U32, U32, U32])
    for seed in SEEDS:
        key = jax.random.key(seed)
        for data in [0, 1, 42, 2 ** 31 - 1, 2 ** 32 - 1]:
            got = fn(*key_words(seed), np.uint32(data))
            want = np.asarray(jax.random.key_data(jax.random.fold_in(key, data)))
            np.testing.assert_array_equal(np.stack(got), want, strict=True, err_msg=f"seed={seed} data={data}")


def test_seed_split_fold_in_bits_chain():
    """All in one module: key(seed) -> fold_in -> split -> bits of the second subkey."""
    def body(s):
        key = threefry.fold_in(threefry.key_from_seed(s), emit.const(7, U32))
        first, second = threefry.split_pairs(key, 3)
        sub = tuple(emit.op("stablehlo.reshape", emit.tensor_type((), U32),
                            [emit.op("stablehlo.slice", emit.tensor_type((1,), U32), [w],
                                     {"start_indices": ir.DenseI64ArrayAttr.get([1]),
                                      "limit_indices": ir.DenseI64ArrayAttr.get([2]),
                                      "strides": ir.DenseI64ArrayAttr.get([1])})])
                    for w in (first, second))
        return threefry.random_bits(sub, 32, (4, 5))
    fn = compile_fn(body, [DTYPES["i64"]])
    for seed in SEEDS:
        (got,) = fn(np.int64(seed))
        k = jax.random.split(jax.random.fold_in(jax.random.key(seed), 7), 3)[1]
        np.testing.assert_array_equal(got, np.asarray(jax.random.bits(k, (4, 5), jnp.uint32)), strict=True)


FLOATS = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64}
UVIEW = {"f16": np.uint16, "bf16": np.uint16, "f32": np.uint32, "f64": np.uint64}


@pytest.mark.parametrize("name", list(FLOATS))
def test_uniform(name):
    dt, npdt = DTYPES[name], FLOATS[name]
    cases = [(shape, lo, hi) for shape in SHAPES for lo, hi in [(0.0, 1.0), (-3.0, 2.5), (0.1, 0.3)]]
    fn = compile_fn(with_key(lambda key: [threefry.uniform(key, shape, dt, lo, hi) for shape, lo, hi in cases]),
                    [U32, U32])
    for seed in SEEDS:
        for (shape, lo, hi), got in zip(cases, fn(*key_words(seed))):
            want = np.asarray(jax.random.uniform(jax.random.key(seed), shape, npdt, lo, hi))
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got.view(UVIEW[name]), want.view(UVIEW[name]), strict=True,
                                          err_msg=f"seed={seed} shape={shape} range=({lo}, {hi})")


@pytest.mark.parametrize("name", ["f32", "bf16"])
def test_uniform_with_bounds_as_values(name):
    dt, npdt = DTYPES[name], FLOATS[name]
    for seed in [0, -1]:
        got = run(lambda k0, k1, lo, hi: threefry.uniform((k0, k1), (3, 5), dt, lo, hi),
                  [*key_words(seed), npdt(-2.0), npdt(5.0)], [U32, U32, dt, dt])[0]
        want = np.asarray(jax.random.uniform(jax.random.key(seed), (3, 5), npdt, npdt(-2.0), npdt(5.0)))
        np.testing.assert_array_equal(got.view(UVIEW[name]), want.view(UVIEW[name]), strict=True)
