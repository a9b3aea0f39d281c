"""Threefry-2x32 random numbers emitted as StableHLO integer ops, bit-identical to `jax.random`.

A port of JAX 0.10.2's default PRNG (`threefry2x32`, with `jax_threefry_partitionable=True`, the default
there): `jax/_src/random/threefry2x32.py` (`threefry_seed`, `_threefry2x32_lowering`, `apply_round`,
`rotate_left`, `_threefry_split_foldlike`, `_threefry_fold_in`, `_threefry_random_bits_partitionable`),
`jax/_src/random/prng.py` (`iota_2x32_shape` and its lowering) and `jax/_src/random/core.py` (`_uniform`).

A key is a pair `(k0, k1)` of `u32[]` values (`jax.random.key_data(key)` is `[k0, k1]`). Every function
emits at the active insertion point and location (as the `ops_*` rules do) and works on static shapes.
"""
from __future__ import annotations

import math

import numpy as np
from jaxlib.mlir import ir

from . import emit
from .types import DTYPES, DType

U8, U16, U32, U64, I64 = (DTYPES[n] for n in ("u8", "u16", "u32", "u64", "i64"))
UINT = {8: U8, 16: U16, 32: U32, 64: U64}
# (bits, mantissa bits) as `jnp.finfo` gives them: `_uniform` draws max(8, ...) random bits per mantissa.
FLOAT_LAYOUT = {"f16": (16, 10), "bf16": (16, 7), "f32": (32, 23), "f64": (64, 52)}

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def _bin(name: str, a: ir.Value, b: ir.Value) -> ir.Value:
    return emit.same_type(name, a, b)


def _c(value: int, dt: DType, shape) -> ir.Value:
    return emit.const(value, dt, tuple(shape))


def _rotate_left(x: ir.Value, d: int, shape) -> ir.Value:
    # lax.shift_left(x, d) | lax.shift_right_logical(x, 32 - d)
    return _bin("stablehlo.or", _bin("stablehlo.shift_left", x, _c(d, U32, shape)),
                _bin("stablehlo.shift_right_logical", x, _c(32 - d, U32, shape)))


def _apply_round(v: list, rot: int, shape) -> list:
    v0 = _bin("stablehlo.add", v[0], v[1])
    v1 = _rotate_left(v[1], rot, shape)
    v1 = _bin("stablehlo.xor", v0, v1)
    return [v0, v1]


def threefry2x32(key0: ir.Value, key1: ir.Value, x0: ir.Value, x1: ir.Value) -> tuple[ir.Value, ir.Value]:
    """The Threefry-2x32 block cipher (20 rounds) on `u32` tensors `x0`, `x1` of one shape; the key words
    are `u32` scalars or tensors of that shape (scalars are broadcast)."""
    shape = emit.shape_of(x0)
    assert emit.shape_of(x1) == shape, (emit.shape_of(x1), shape)
    k0 = emit.broadcast(key0, shape)
    k1 = emit.broadcast(key1, shape)
    k2 = _bin("stablehlo.xor", _bin("stablehlo.xor", k0, k1), _c(0x1BD11BDA, U32, shape))
    ks = [k0, k1, k2]
    x = [_bin("stablehlo.add", x0, ks[0]), _bin("stablehlo.add", x1, ks[1])]
    for i in range(5):                         # the unrolled form of `_threefry2x32_lowering`
        for r in _ROTATIONS[i % 2]:
            x = _apply_round(x, r, shape)
        x[0] = _bin("stablehlo.add", x[0], ks[(i + 1) % 3])
        x[1] = _bin("stablehlo.add", _bin("stablehlo.add", x[1], ks[(i + 2) % 3]), _c(i + 1, U32, shape))
    return x[0], x[1]


def iota_2x32_shape(shape) -> tuple[ir.Value, ir.Value]:
    """(hi, lo) 32-bit words of the row-major u64 iota over `shape` (`prng.iota_2x32_shape`)."""
    shape = tuple(shape)
    if not shape:
        zero = _c(0, U32, ())
        return zero, zero
    u64_type = emit.tensor_type(shape, U64)
    strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
    counts = None
    for d, stride in enumerate(strides):
        iota = emit.op("stablehlo.iota", u64_type, [],
                       {"iota_dimension": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), d)})
        term = _bin("stablehlo.multiply", _c(stride, U64, shape), iota)
        counts = term if counts is None else _bin("stablehlo.add", counts, term)
    u32_type = emit.tensor_type(shape, U32)
    hi = emit.op("stablehlo.convert", u32_type,
                 [_bin("stablehlo.shift_right_logical", counts, _c(32, U64, shape))])
    lo = emit.op("stablehlo.convert", u32_type, [counts])
    return hi, lo


def random_bits(key, bit_width: int, shape) -> ir.Value:
    """`jax.random.bits(key, shape, uint<bit_width>)`: a `u<bit_width>` tensor of `shape`."""
    if bit_width not in UINT:
        raise ValueError(f"bit_width must be 8, 16, 32 or 64, not {bit_width}")
    shape = tuple(shape)
    if math.prod(shape) > 2 ** 64:
        raise NotImplementedError("random bits array of size exceeding 2 ** 64")
    counts_hi, counts_lo = iota_2x32_shape(shape)
    bits1, bits2 = threefry2x32(key[0], key[1], counts_hi, counts_lo)
    dt = UINT[bit_width]
    if bit_width == 64:
        hi = emit.op("stablehlo.convert", emit.tensor_type(shape, U64), [bits1])
        lo = emit.op("stablehlo.convert", emit.tensor_type(shape, U64), [bits2])
        return _bin("stablehlo.or", _bin("stablehlo.shift_left", hi, _c(32, U64, shape)), lo)
    bits = _bin("stablehlo.xor", bits1, bits2)
    if bit_width == 32:
        return bits
    return emit.op("stablehlo.convert", emit.tensor_type(shape, dt), [bits])     # truncation


def split(key, num: int) -> ir.Value:
    """`jax.random.key_data(jax.random.split(key, num))`: a `u32[num, 2]` tensor."""
    bits1, bits2 = split_pairs(key, num)
    col = emit.tensor_type((num, 1), U32)
    parts = [emit.op("stablehlo.reshape", col, [b]) for b in (bits1, bits2)]
    return emit.op("stablehlo.concatenate", emit.tensor_type((num, 2), U32), parts,
                   {"dimension": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 1)})


def split_pairs(key, num: int) -> tuple[ir.Value, ir.Value]:
    """The two `u32[num]` columns of `split(key, num)` (new key i is `(first[i], second[i])`)."""
    counts_hi, counts_lo = iota_2x32_shape((num,))
    return threefry2x32(key[0], key[1], counts_hi, counts_lo)


def fold_in(key, data: ir.Value) -> tuple[ir.Value, ir.Value]:
    """`jax.random.fold_in(key, data)` for a `u32[]` `data`: threefry_2x32(key, threefry_seed(data)), and
    the seed of a u32 is `[0, data]`."""
    return threefry2x32(key[0], key[1], _c(0, U32, ()), data)


def _int_dtype(x: ir.Value) -> DType:
    t = ir.IntegerType(ir.RankedTensorType(x.type).element_type)
    return DTYPES[("u" if t.is_unsigned else "i") + str(t.width)]


def key_from_seed(seed: ir.Value, dt: DType | None = None) -> tuple[ir.Value, ir.Value]:
    """`jax.random.key(seed)` (`threefry_seed`) for an integer scalar `seed` (Python ints become int64 in
    JAX): k0 = the seed shifted right (logically) by 32 (0 for a seed of 32 bits or fewer), k1 = its low
    32 bits after sign extension (so int32 -1 gives [0, 0xFFFFFFFF] and int64 -1 [0xFFFFFFFF, 0xFFFFFFFF])."""
    dt = dt or _int_dtype(seed)
    assert dt.is_int and emit.shape_of(seed) == (), (dt, emit.shape_of(seed))
    u32_type = emit.tensor_type((), U32)
    if dt.bits == 64:
        hi = emit.op("stablehlo.convert", u32_type,
                     [_bin("stablehlo.shift_right_logical", seed, _c(32, dt, ()))])
        wide = seed
    else:                 # an XLA logical shift by >= the width gives 0
        hi = _c(0, U32, ())
        wide = emit.op("stablehlo.convert", emit.tensor_type((), I64 if dt.kind == "int" else U64), [seed])
    lo = emit.op("stablehlo.convert", u32_type, [wide])
    return hi, lo


def uniform(key, shape, dt: DType, minval=0.0, maxval=1.0) -> ir.Value:
    """`jax.random.uniform(key, shape, dt, minval, maxval)` for f16, bf16, f32, f64. `minval`, `maxval`:
    Python numbers (rounded to `dt` as NumPy does) or `dt` scalars (or tensors of `shape`)."""
    if dt.name not in FLOAT_LAYOUT:
        raise ValueError(f"uniform only accepts f16, bf16, f32 or f64, not {dt}")
    shape = tuple(shape)
    nbits, nmant = FLOAT_LAYOUT[dt.name]
    rng_bits = 8 if nmant < 8 else nbits
    uint = UINT[nbits]
    bits = random_bits(key, rng_bits, shape)
    if rng_bits != nbits:
        bits = emit.op("stablehlo.convert", emit.tensor_type(shape, uint), [bits])
    float_bits = _bin("stablehlo.shift_right_logical", bits, _c(rng_bits - nmant, uint, shape))
    one_bits = int(np.array(1.0, dt.np).view(uint.np))
    float_bits = _bin("stablehlo.or", float_bits, _c(one_bits, uint, shape))
    ftype = emit.tensor_type(shape, dt)
    floats = _bin("stablehlo.subtract", emit.op("stablehlo.bitcast_convert", ftype, [float_bits]),
                  _c(1.0, dt, shape))
    lo = _float_operand(minval, dt, shape)
    hi = _float_operand(maxval, dt, shape)
    scaled = _bin("stablehlo.add", _bin("stablehlo.multiply", floats, _bin("stablehlo.subtract", hi, lo)), lo)
    return _bin("stablehlo.maximum", lo, scaled)


def _float_operand(v, dt: DType, shape) -> ir.Value:
    if isinstance(v, ir.Value):
        return emit.broadcast(v, shape)
    return _c(float(v), dt, shape)
