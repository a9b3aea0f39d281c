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


SAMPLER_SEEDS = [0, 1, 42, 2 ** 32 + 5]
SAMPLER_SHAPES = [(), (1,), (7,), (3, 5), (2, 3, 4)]


def assert_same_bits(got, want, name, msg):
    want = np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype, msg)
    np.testing.assert_array_equal(got.view(UVIEW[name]), want.view(UVIEW[name]), strict=True, err_msg=msg)


@pytest.mark.parametrize("name", list(FLOATS))
def test_normal_gumbel(name):
    """Bit for bit, chlo.erf_inv included (XLA expands it as it does JAX's), f16/bf16 in their own dtype
    (JAX does not upcast either)."""
    dt, npdt = DTYPES[name], FLOATS[name]
    fn = compile_fn(with_key(lambda key: [f(key, s, dt) for s in SAMPLER_SHAPES
                                          for f in (threefry.normal, threefry.gumbel)]), [U32, U32])
    for seed in SAMPLER_SEEDS:
        key = jax.random.key(seed)
        got = iter(fn(*key_words(seed)))
        for shape in SAMPLER_SHAPES:
            for f in (jax.random.normal, jax.random.gumbel):
                assert_same_bits(next(got), f(key, shape, npdt), name, f"{f.__name__} {seed=} {shape=}")


def ulps_apart(got, want, name) -> int:
    """The largest distance in units in the last place (same-sign finite values)."""
    g, w = (np.asarray(v).astype(np.float64) for v in (got, want))
    assert np.all(np.sign(g) == np.sign(w)), (got, want)
    bits = UVIEW[name]
    gi, wi = (np.asarray(v).view(bits).astype(np.int64) for v in (got, want))
    return int(np.max(np.abs(gi - wi), initial=0))


@pytest.mark.parametrize("name", list(FLOATS))
def test_truncated_normal(name):
    """Not bit for bit with Python bounds; within 16 ulps of JAX's jit with the same constant bounds, and
    inside [lower, upper] (as rounded to the dtype). The uniform draw underneath is bit-identical (test_uniform, and
    test_truncated_normal_bounds_as_values gives bit identity when a, b agree). Why: with Python bounds
    XLA constant-folds erf(bound / sqrt(2)) here and in that jit, but the erf_inv/multiply/clip on the
    sample fuse differently in the two programs and XLA's CPU code rounds a last bit differently for some
    samples (f32 (0.3, 0.7): up to 3 ulps apart; f16, bf16, f64 agreed to 2 ulps when this was written). The eager `jax.random.truncated_normal`
    is further off in the far tail: it passes the bounds as arguments, and XLA computes
    erf(bound * (1 / sqrt(2))) at run time, one ulp off the folded erf(-4 / sqrt(2)) in f32, which moves a
    sample at (-4, -3.5) by ~150 ulps (erf_inv is steep near -1)."""
    dt, npdt = DTYPES[name], FLOATS[name]
    bounds = [(-1.0, 2.0), (0.3, 0.7), (-4.0, -3.5)]
    cases = [(shape, lo, hi) for shape in SAMPLER_SHAPES for lo, hi in bounds]
    fn = compile_fn(with_key(lambda key: [threefry.truncated_normal(key, lo, hi, shape, dt)
                                          for shape, lo, hi in cases]), [U32, U32])
    reference = jax.jit(lambda k: [jax.random.truncated_normal(k, lo, hi, shape, npdt) for shape, lo, hi in cases])
    for seed in SAMPLER_SEEDS:
        for (shape, lo, hi), got, want in zip(cases, fn(*key_words(seed)), reference(jax.random.key(seed))):
            msg = f"{seed=} {shape=} ({lo}, {hi})"
            assert got.dtype == want.dtype, msg
            assert ulps_apart(got, want, name) <= 16, msg
            g = got.astype(np.float64)
            assert np.all((g >= float(npdt(lo))) & (g <= float(npdt(hi)))), msg


def test_truncated_normal_bounds_as_values():
    """Bounds of another float dtype are converted in the program, as JAX does; the default shape is theirs."""
    f32, f64 = DTYPES["f32"], DTYPES["f64"]
    fn = compile_fn(lambda k0, k1, lo, hi: threefry.truncated_normal((k0, k1), lo, hi, None, f32),
                    [U32, U32, f64, f64], [(), (), (3, 1), (4,)])
    lo, hi = np.array([[-2.0], [0.1], [1.0]]), np.array([0.5, 1.5, 2.0, 3.0])
    for seed in [0, 42]:
        (got,) = fn(*key_words(seed), lo, hi)
        assert_same_bits(got, jax.random.truncated_normal(jax.random.key(seed), lo, hi, None, np.float32), "f32", "")


def test_bernoulli():
    """A Python p is float64 (x64), so the draw is a f64 one; a value p draws in its own dtype."""
    ps = [0.0, 0.3, 0.5, 1.0]
    fn = compile_fn(with_key(lambda key: [threefry.bernoulli(key, p, s) for p in ps for s in SAMPLER_SHAPES]),
                    [U32, U32])
    for seed in SAMPLER_SEEDS:
        got = iter(fn(*key_words(seed)))
        for p in ps:
            for shape in SAMPLER_SHAPES:
                want = np.asarray(jax.random.bernoulli(jax.random.key(seed), p, shape))
                np.testing.assert_array_equal(next(got), want, strict=True, err_msg=f"{p=} {seed=} {shape=}")
    for name, npdt in FLOATS.items():
        dt = DTYPES[name]
        fn = compile_fn(lambda k0, k1, p: [threefry.bernoulli((k0, k1), p, (3, 5)), threefry.bernoulli((k0, k1), p)],
                        [U32, U32, dt], [(), (), (5,)])
        p = np.array([0.0, 0.1, 0.3, 0.7, 1.0], npdt)
        for seed in [0, 42]:
            got = fn(*key_words(seed), p)
            key = jax.random.key(seed)
            for g, want in zip(got, [jax.random.bernoulli(key, p, (3, 5)), jax.random.bernoulli(key, p)]):
                np.testing.assert_array_equal(g, np.asarray(want), strict=True, err_msg=f"{name} {seed=}")


INTS = ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"]


@pytest.mark.parametrize("name", INTS)
def test_randint(name):
    """Python-int bounds (int64 in JAX: wrapped to int32 under 32 bits, clipped, maxval = max + 1 taking the
    whole range, empty ranges giving minval) and bounds as values of the dtype (one compiled function)."""
    dt = DTYPES[name]
    info = np.iinfo(dt.np)
    mn, mx = int(info.min), min(int(info.max), 2 ** 63 - 1)     # JAX rejects Python ints beyond int64
    ranges = [(0, 10), (-5, 10), (mn, mx), (mn, mx + 1) if mx < 2 ** 63 - 1 else (mn + 1, mx),
              (mx - 3, mx), (mn, mn + 5), (5, 5), (7, 3), (-2 ** 40, 2 ** 40), (0, 2 ** 33), (-2 ** 63, 2 ** 63 - 1)]
    value_ranges = [(0, 10), (int(info.min), int(info.max)), (int(info.max) - 2, int(info.max)),
                    (int(info.min), int(info.min) + 1), (3, 1)]
    shapes = [(), (2, 3, 4)]

    def body(k0, k1, lo, hi):
        outs = [threefry.randint((k0, k1), s, a, b, dt) for s in shapes for a, b in ranges]
        return outs + [threefry.randint((k0, k1), (3, 5), lo, hi, dt), threefry.randint((k0, k1), (2, 3), 1, hi, dt)]
    fn = compile_fn(body, [U32, U32, dt, dt])
    for seed in [0, 2 ** 32 + 5]:
        key = jax.random.key(seed)
        for vlo, vhi in value_ranges:
            lo, hi = dt.np.type(vlo), dt.np.type(vhi)
            got = iter(fn(*key_words(seed), lo, hi))
            if (vlo, vhi) == value_ranges[0]:
                for shape in shapes:
                    for a, b in ranges:
                        want = np.asarray(jax.random.randint(key, shape, a, b, dt.np))
                        np.testing.assert_array_equal(next(got), want, strict=True, err_msg=f"{seed=} {shape=} {a, b}")
            else:
                for _ in range(len(shapes) * len(ranges)):
                    next(got)
            for shape, a in [((3, 5), lo), ((2, 3), 1)]:
                want = np.asarray(jax.random.randint(key, shape, a, hi, dt.np))
                np.testing.assert_array_equal(next(got), want, strict=True, err_msg=f"{seed=} {shape=} {a, hi}")


def test_randint_rejects_bounds_beyond_int64():
    def body(k0, k1):
        threefry.randint((k0, k1), (3,), 0, 2 ** 64 - 1, DTYPES["u64"])
        return k0
    with pytest.raises(OverflowError):
        compile_fn(body, [U32, U32])


@pytest.mark.parametrize("name", list(FLOATS))
def test_categorical(name):
    """argmax of gumbel noise + logits, with JAX's reduce: NaN wins, ties go to the first index; int64."""
    dt, npdt = DTYPES[name], FLOATS[name]
    logits = np.random.default_rng(0).normal(size=(3, 5)).astype(npdt)
    logits[0, 1] = np.nan
    logits[1, :] = 0
    logits[2, 3] = np.inf
    cases = [(1, None), (0, None), (-1, (2, 3)), (-2, (4, 5)), (1, (2, 1, 3))]
    fn = compile_fn(lambda k0, k1, lg: [threefry.categorical((k0, k1), lg, a, s) for a, s in cases],
                    [U32, U32, dt], [(), (), logits.shape])
    wide = np.random.default_rng(1).normal(size=(1, 40)).astype(npdt)
    fn_wide = compile_fn(lambda k0, k1, lg: threefry.categorical((k0, k1), lg, -1, (6, 4)),
                         [U32, U32, dt], [(), (), wide.shape])
    for seed in SAMPLER_SEEDS:
        key = jax.random.key(seed)
        for (axis, shape), got in zip(cases, fn(*key_words(seed), logits)):
            want = np.asarray(jax.random.categorical(key, logits, axis, shape))
            np.testing.assert_array_equal(got, want, strict=True, err_msg=f"{seed=} {axis=} {shape=}")
        (got,) = fn_wide(*key_words(seed), wide)
        np.testing.assert_array_equal(got, np.asarray(jax.random.categorical(key, wide, -1, (6, 4))), strict=True)


def test_permutation():
    """Shuffled aranges (int64, or the dtype asked for) of sizes taking 0, 1 and 2 sort rounds, and arrays
    shuffled along each axis."""
    ns = [0, 1, 2, 10, 1625, 1626]
    x = np.random.default_rng(0).normal(size=(4, 3, 2)).astype(np.float32)
    axes = [0, 1, 2, -1]

    def body(k0, k1, arr):
        key = (k0, k1)
        return ([threefry.permutation(key, n) for n in ns] + [threefry.permutation(key, 10, dt=DTYPES["i32"])]
                + [threefry.permutation(key, arr, a) for a in axes])
    fn = compile_fn(body, [U32, U32, DTYPES["f32"]], [(), (), x.shape])
    for seed in SAMPLER_SEEDS:
        key = jax.random.key(seed)
        got = iter(fn(*key_words(seed), x))
        for n in ns:
            np.testing.assert_array_equal(next(got), np.asarray(jax.random.permutation(key, n)), strict=True,
                                          err_msg=f"{seed=} {n=}")
        np.testing.assert_array_equal(next(got), np.asarray(jax.random.permutation(key, 10)).astype(np.int32),
                                      strict=True)
        for a in axes:
            np.testing.assert_array_equal(next(got), np.asarray(jax.random.permutation(key, x, a)), strict=True,
                                          err_msg=f"{seed=} axis={a}")
