"""Threefry-2x32 random numbers emitted as StableHLO integer ops, bit-identical to `jax.random`.

A port of JAX 0.10.2's default PRNG (`threefry2x32`, with `jax_threefry_partitionable=True`, the default
there): `jax/_src/random/threefry2x32.py` (`threefry_seed`, `_threefry2x32_lowering`, `apply_round`,
`rotate_left`, `_threefry_split_foldlike`, `_threefry_fold_in`, `_threefry_random_bits_partitionable`),
`jax/_src/random/prng.py` (`iota_2x32_shape` and its lowering) and `jax/_src/random/core.py` (`_uniform`,
`_normal_real`, `_bernoulli`, `randint`/`_randint`, `_gumbel`, `_categorical`, `_truncated_normal`,
`permutation`/`_shuffle`), with `jnp.argmax`'s and `lax.sort`'s lowerings for `categorical` and `permutation`.

A key is a pair `(k0, k1)` of `u32[]` values (`jax.random.key_data(key)` is `[k0, k1]`). Every function
emits at the active insertion point and location (as the `ops_*` rules do) and works on static shapes.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo as hlo

from . import abi, emit
from .types import DTYPES, DType, int_range

U8, U16, U32, U64, I32, I64, F64 = (DTYPES[n] for n in ("u8", "u16", "u32", "u64", "i32", "i64", "f64"))
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


def _float_dtype(x: ir.Value) -> DType:
    name = str(ir.RankedTensorType(x.type).element_type)
    if name not in FLOAT_LAYOUT:
        raise ValueError(f"expected a f16, bf16, f32 or f64 value, not {name}")
    return DTYPES[name]


def _unary(name: str, x: ir.Value) -> ir.Value:
    return emit.same_type(name, x)


def _opaque(*values: ir.Value) -> list[ir.Value]:
    """`values` through a `stablehlo.optimization_barrier`: XLA does not constant-fold what they feed."""
    return list(hlo.OptimizationBarrierOp(list(values)).results)


def run_time(*values: ir.Value) -> list[ir.Value]:
    """Integer `values` unchanged, as values XLA only knows at run time. A key made from a literal (`key(3)`)
    would make every sample drawn from it a constant, and XLA:CPU then folds the code it runs (the last
    iterations of a vectorized loop, which LLVM unrolls, or all of a small one) without the fused
    multiply-adds of the run-time code's log and erf_inv: `gumbel(key(0), (1003,))` differed from jax.random's
    at elements 1000 and 1002. An optimization barrier does not survive XLA:CPU's pipeline; a `while` does:
    two iterations XOR a constant into the values, and back. Its trip count is marked unknown (-1), so arrc's
    unroll pass leaves it and the call keeps the runtime's fast path. Values that depend on an argument are
    run-time values already, and returned as they are (the loop costs ~0.6 us a call)."""
    if not _foldable(values):
        return list(values)
    i32 = DTYPES["i32"]
    start = [_c(0, i32, ())] + list(values)
    loop = hlo.WhileOp([v.type for v in start], start)
    emit.set_int_attr(loop.operation, abi.TRIP_COUNT, -1)
    cond = loop.cond.blocks.append(*[v.type for v in start])
    with ir.InsertionPoint(cond):
        hlo.return_([emit.compare(cond.arguments[0], _c(2, i32, ()), "LT", i32)])
    body = loop.body.blocks.append(*[v.type for v in start])
    with ir.InsertionPoint(body):
        flipped = [_bin("stablehlo.xor", v, _c(0x5A5A5A5A, _int_dtype(v), emit.shape_of(v))) for v in body.arguments[1:]]
        hlo.return_([_bin("stablehlo.add", body.arguments[0], _c(1, i32, ()))] + flipped)
    return list(loop.results[1:])


def _foldable(values, budget: int = 64) -> bool:
    """Whether XLA may fold `values`: no argument (a block's) among the operands they are computed from, as far
    as `budget` operations tell (past it: yes). `key(abs(-3))`, `wrap_key(u32([0, 7]))` are; `key(seed)` is not."""
    pending = list(values)
    while pending:
        owner = pending.pop().owner
        if isinstance(owner, ir.Block):
            return False
        budget -= 1
        if budget < 0:
            return True
        pending.extend(owner.operands)
    return True


def _key_at(pairs, i: int) -> tuple[ir.Value, ir.Value]:
    """Key `i` of `split_pairs(key, num)`: the two `u32[]` words at index `i`."""
    scalar, one = emit.tensor_type((), U32), emit.tensor_type((1,), U32)
    attrs = {"start_indices": ir.DenseI64ArrayAttr.get([i]), "limit_indices": ir.DenseI64ArrayAttr.get([i + 1]),
             "strides": ir.DenseI64ArrayAttr.get([1])}
    return tuple(emit.op("stablehlo.reshape", scalar, [emit.op("stablehlo.slice", one, [w], attrs)]) for w in pairs)


def _split2(key) -> tuple[tuple, tuple]:
    """`k1, k2 = jax.random.split(key)` (`_split(key)`, num=2)."""
    pairs = split_pairs(key, 2)
    return _key_at(pairs, 0), _key_at(pairs, 1)


def normal(key, shape, dt: DType) -> ir.Value:
    """`jax.random.normal(key, shape, dt)` for f16, bf16, f32, f64 (`_normal_real`): sqrt(2) *
    erf_inv(uniform(key, shape, dt, nextafter(-1, 0), 1)), in `dt` throughout (no upcast, as JAX)."""
    shape = tuple(shape)
    lo = np.nextafter(np.array(-1., dt.np), np.array(0., dt.np), dtype=dt.np)
    u = uniform(key, shape, dt, float(lo), 1.0)
    return _bin("stablehlo.multiply", _c(float(np.sqrt(2)), dt, shape), _unary("chlo.erf_inv", u))


def bernoulli(key, p=0.5, shape=None) -> ir.Value:
    """`jax.random.bernoulli(key, p, shape)` (`_bernoulli`, mode "low"): uniform(key, shape, dtype(p)) < p,
    an i1 tensor of `shape` (default: p's shape). `p`: a float value, or a Python number, which JAX (x64)
    types float64, so the draw is a f64 one."""
    if not isinstance(p, ir.Value):
        p = _c(float(p), F64, ())
    dt = _float_dtype(p)
    shape = emit.shape_of(p) if shape is None else tuple(shape)
    return emit.compare(uniform(key, shape, dt), emit.broadcast(p, shape), "LT", dt)


def randint(key, shape, minval, maxval, dt: DType) -> ir.Value:
    """`jax.random.randint(key, shape, minval, maxval, dt)` for i8..i64 and u8..u64: a `dt` tensor of `shape`.
    `minval`, `maxval`: Python ints (int64 in JAX) or `dt` values (scalars, or tensors broadcasting to
    `shape`). Dtypes under 32 bits are sampled as int32 and converted (wrapping), as `randint` does."""
    if not dt.is_int or dt.bits not in UINT:
        raise ValueError(f"randint only accepts 8-, 16-, 32- or 64-bit integer dtypes, not {dt}")
    shape = tuple(shape)
    sdt = I32 if dt.bits < 32 else dt
    lo, _ = _randint_bound(minval, dt, sdt, upper=False)
    hi, hi_out_of_range = _randint_bound(maxval, dt, sdt, upper=True)
    out = _randint(key, shape, lo, hi, hi_out_of_range, sdt)
    return out if sdt is dt else emit.op("stablehlo.convert", emit.tensor_type(shape, dt), [out])


def _randint_bound(v, dt: DType, sdt: DType, upper: bool) -> tuple[ir.Value, bool]:
    """A bound as `_randint` sees it, in the sampling dtype `sdt`, and whether it lies above `dt`'s range
    (`maxval_out_of_range`; always False for a value of dtype `sdt`). A Python int is an int64: under 32
    bits `randint` wraps it to int32 and clips it to [min, max] (maxval: [min, max + 1]); otherwise
    `_convert_and_clip_integer` clips it to `dt`'s range."""
    lo, hi = int_range(dt)
    if isinstance(v, ir.Value):
        if _int_dtype(v) is not dt:
            raise ValueError(f"randint bounds must be Python ints or {dt} values, not {_int_dtype(v)}")
        if sdt is not dt:
            v = emit.op("stablehlo.convert", emit.tensor_type(emit.shape_of(v), sdt), [v])
        return v, False
    v = int(v)
    if not -2 ** 63 <= v < 2 ** 63:
        raise OverflowError(f"Python int {v} too large to convert to int64")
    if sdt is not dt:
        v = (v + 2 ** 31) % 2 ** 32 - 2 ** 31
        return _c(min(max(v, lo), hi + upper), sdt, ()), False
    lo, hi = max(lo, -2 ** 63), min(hi, 2 ** 63 - 1)
    return _c(min(max(v, lo), hi), sdt, ()), v > hi


def _remainder(a: ir.Value, span: ir.Value) -> ir.Value:
    """`a % span` as XLA defines it (`a` where `span` is 0, the full range), marked as no division of the
    program's: the div0 guard does not check it (it reported `randint` over a dtype's whole range)."""
    return emit.mark(_bin("stablehlo.remainder", a, span), abi.SAFE_DIVISOR)


def _randint(key, shape, lo: ir.Value, hi: ir.Value, hi_out_of_range: bool, dt: DType) -> ir.Value:
    """`_randint` on clipped bounds `lo`, `hi` of `dt` (broadcasting to `shape`): two draws of random bits
    (from the halves of `split(key)`) folded into the span with
    (higher % span * (2**nbits % span) + lower % span) % span, the remainders XLA's (x % 0 == x)."""
    k1, k2 = _split2(key)
    nbits = dt.bits
    udt = UINT[nbits]
    higher, lower = random_bits(k1, nbits, shape), random_bits(k2, nbits, shape)
    bshape = tuple(np.broadcast_shapes(emit.shape_of(lo), emit.shape_of(hi)))
    lo, hi = emit.broadcast(lo, bshape), emit.broadcast(hi, bshape)
    span = emit.op("stablehlo.convert", emit.tensor_type(bshape, udt), [_bin("stablehlo.subtract", hi, lo)])
    span = emit.select(emit.compare(hi, lo, "LE", dt), _c(1, udt, bshape), span)
    if hi_out_of_range:     # the span is one larger (wrapping to 0, "no remainder", for the full range)
        span = emit.select(emit.compare(hi, lo, "GT", dt), _bin("stablehlo.add", span, _c(1, udt, bshape)), span)
    # XLA's constant folding of a remainder by a constant 0 raises SIGFPE during compilation (jax.jit of
    # `lax.rem(np.uint32(1), np.uint32(0))` does too), and constant bounds of the full range make this
    # span one: kept opaque, the multiplier's remainders run as XLA defines them (x % 0 == x).
    (opaque_span,) = _opaque(span)
    multiplier = _remainder(_c(2 ** (nbits // 2), udt, bshape), opaque_span)
    multiplier = _remainder(_bin("stablehlo.multiply", multiplier, multiplier), opaque_span)
    span, multiplier = emit.broadcast(span, shape), emit.broadcast(multiplier, shape)
    offset = _bin("stablehlo.add", _bin("stablehlo.multiply", _remainder(higher, span), multiplier),
                  _remainder(lower, span))
    offset = _remainder(offset, span)
    return _bin("stablehlo.add", emit.broadcast(lo, shape),
                emit.op("stablehlo.convert", emit.tensor_type(shape, dt), [offset]))


def gumbel(key, shape, dt: DType) -> ir.Value:
    """`jax.random.gumbel(key, shape, dt)` in its default mode "low" (`_gumbel`):
    -log(-log(uniform(key, shape, dt, finfo(dt).tiny, 1)))."""
    shape = tuple(shape)
    u = uniform(key, shape, dt, float(ml_dtypes.finfo(dt.np).tiny), 1.0)
    return _unary("stablehlo.negate", _unary("stablehlo.log", _unary("stablehlo.negate", _unary("stablehlo.log", u))))


def categorical(key, logits: ir.Value, axis: int = -1, shape=None, dt: DType = I64) -> ir.Value:
    """`jax.random.categorical(key, logits, axis, shape)` (with replacement, gumbel mode "low"):
    argmax(gumbel(key, ...) + logits) along `axis`, indices of dtype `dt` (JAX gives int64 with x64, the
    default, int32 without) and of `shape` (default: logits' shape without `axis`; a given `shape` is
    that batch shape with leading sample dimensions, or one it broadcasts to)."""
    lshape = emit.shape_of(logits)
    nd = len(lshape)
    if not -nd <= axis < nd:
        raise ValueError(f"axis {axis} is out of bounds for logits of rank {nd}")
    axis %= nd
    batch = lshape[:axis] + lshape[axis + 1:]
    shape = batch if shape is None else tuple(shape)
    if len(shape) < len(batch) or tuple(np.broadcast_shapes(shape, batch)) != shape:
        raise ValueError(f"shape {shape} does not broadcast the batch shape {batch}")
    prefix = shape[:len(shape) - len(batch)]
    logits_shape = list(shape[len(prefix):])
    logits_shape.insert(axis, lshape[axis])
    noise_shape = (*prefix, *logits_shape)
    noisy = _bin("stablehlo.add", gumbel(key, noise_shape, _float_dtype(logits)), emit.broadcast(logits, noise_shape))
    return _argmax(noisy, len(prefix) + axis, dt)


def _argmax(x: ir.Value, axis: int, dt: DType) -> ir.Value:
    """`jnp.argmax(x, axis)` for a float `x` as JAX lowers it (`lax.argmax`), indices of dtype `dt`."""
    index = hlo.iota(emit.tensor_type(emit.shape_of(x), dt), axis)
    return emit.arg_reduce(x, index, [axis], _float_dtype(x), dt, "GT")


def truncated_normal(key, lower, upper, shape=None, dt: DType = F64, stop_gradient=None) -> ir.Value:
    """`jax.random.truncated_normal(key, lower, upper, shape, dt)` (`_truncated_normal`): sqrt(2) *
    erf_inv(uniform(key, shape, dt, erf(lower / sqrt(2)), erf(upper / sqrt(2)))) clipped to
    [nextafter(lower, inf), nextafter(upper, -inf)]. `lower`, `upper`: Python numbers (float64 in JAX,
    converted to `dt` in the program as there) or float values (scalars, or tensors broadcasting to
    `shape`; default shape: theirs broadcast together).

    Python bounds are constants here, so XLA folds erf(bound / sqrt(2)), as it does in
    `jax.jit(lambda k: jax.random.truncated_normal(k, lower, upper, ...))`; an eager call passes them to
    the jitted `_truncated_normal` as arguments, and XLA then computes bound * (1 / sqrt(2)) with its
    compiled erf, which can differ from the folded value in the last bit (a different sample near a
    bound far in the tail). Bounds given as values compute as in the eager call.

    `stop_gradient`: a function of a value giving it without a derivative, which the clip's bounds go
    through, as JAX's do (`lax.nextafter(lax.stop_gradient(lower), inf)`: nextafter has no derivative)."""
    lower, upper = _to_float(lower, dt), _to_float(upper, dt)
    if shape is None:
        shape = tuple(np.broadcast_shapes(emit.shape_of(lower), emit.shape_of(upper)))
    shape = tuple(shape)
    sqrt2 = float(np.sqrt(2))
    a, b = (_unary("chlo.erf", _bin("stablehlo.divide", v, _c(sqrt2, dt, emit.shape_of(v)))) for v in (lower, upper))
    u = uniform(key, shape, dt, a, b)
    out = _bin("stablehlo.multiply", _c(sqrt2, dt, shape), _unary("chlo.erf_inv", u))
    if stop_gradient is not None:
        lower, upper = stop_gradient(lower), stop_gradient(upper)
    lo = _bin("chlo.next_after", lower, _c(np.inf, dt, emit.shape_of(lower)))
    hi = _bin("chlo.next_after", upper, _c(-np.inf, dt, emit.shape_of(upper)))
    return _bin("stablehlo.minimum", emit.broadcast(hi, shape), _bin("stablehlo.maximum", emit.broadcast(lo, shape), out))


def _to_float(v, dt: DType) -> ir.Value:
    """`lax.convert_element_type(v, dt)` in the program (a Python number is a float64 constant, as JAX
    passes it)."""
    if not isinstance(v, ir.Value):
        v = _c(float(v), F64, ())
    if _float_dtype(v) is dt:
        return v
    return emit.op("stablehlo.convert", emit.tensor_type(emit.shape_of(v), dt), [v])


def permutation(key, n_or_x, axis: int = 0, dt: DType = I64) -> ir.Value:
    """`jax.random.permutation(key, n_or_x, axis)`: for a Python int n, a shuffled `arange(n)` of dtype `dt`
    (JAX gives int64 with x64, the default, int32 without); for a tensor x, x with its slices along `axis`
    shuffled (one permutation for all of them, `independent=False`). Ports `_shuffle`:
    ceil(3 ln(n) / ln(2**32 - 1)) rounds of `key, subkey = split(key)` and a stable sort by
    `bits(subkey, (n,))`. For x of rank > 1 JAX shuffles `arange(n)` and takes; sorting x along `axis` by
    the same keys broadcast over the other dimensions gives the same permutation."""
    if isinstance(n_or_x, ir.Value):
        x = n_or_x
        xshape = emit.shape_of(x)
        if not xshape:
            raise ValueError("permutation takes a Python int or an array of rank >= 1")
        if not -len(xshape) <= axis < len(xshape):
            raise ValueError(f"axis {axis} is out of bounds for an array of rank {len(xshape)}")
        axis %= len(xshape)
    else:
        n = int(n_or_x)
        x = emit.op("stablehlo.iota", emit.tensor_type((n,), dt), [],
                    {"iota_dimension": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0)})
        xshape, axis = (n,), 0
    n = xshape[axis]
    num_rounds = int(np.ceil(3 * np.log(max(1, n)) / np.log(np.iinfo(np.uint32).max)))
    key_type = emit.tensor_type(xshape, U32)
    for _ in range(num_rounds):
        key, subkey = _split2(key)
        sort_keys = random_bits(subkey, 32, (n,))
        if len(xshape) > 1:
            sort_keys = emit.op("stablehlo.broadcast_in_dim", key_type, [sort_keys],
                                {"broadcast_dimensions": ir.DenseI64ArrayAttr.get([axis])})
        x = _sort_by_u32(sort_keys, x, axis)
    return x


def _sort_by_u32(keys: ir.Value, x: ir.Value, axis: int) -> ir.Value:
    """`lax.sort_key_val(keys, x, axis)` for `u32` keys as JAX lowers it: a stable `stablehlo.sort` of
    (keys, x) whose comparator is keys' `LT, UNSIGNED`."""
    op = hlo.SortOp([keys.type, x.type], [keys, x], dimension=axis, is_stable=True)
    sk = emit.tensor_type((), U32)
    sx = ir.RankedTensorType.get([], ir.RankedTensorType(x.type).element_type)
    block = op.comparator.blocks.append(sk, sk, sx, sx)
    with ir.InsertionPoint(block):
        hlo.return_([emit.compare(block.arguments[0], block.arguments[1], "LT", U32)])
    return op.results[1]
