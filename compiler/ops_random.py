"""Random numbers with explicit keys (LANGUAGE.md section 12): `key`, `split`, `fold_in`, `key_data`,
`wrap_key` and the samplers, bit-identical to `jax.random` (the recipes are in compiler/threefry.py).

A key is one u64 element holding Threefry's two u32 key words, the first in the high half (compiler/types.py
KEY): `words` and `pack` are the only places that know it.
"""
from __future__ import annotations

from jaxlib.mlir import ir

from . import emit, threefry
from .emit import hlo
from .diagnostics import Label
from .ops_linalg import STOP_GRADIENT, linalg_op
from .optable import CallCx, concrete, literal_out_of_range, register, source_text
from .types import (BOOL, F32, F64, I32, I64, KEY, U32, U64, ArrayType, Dim, DType, int_range, shape_str,
                    wide_int_dtype)
from .values import Val

FLOATS = tuple(threefry.FLOAT_LAYOUT)


def words(keys: ir.Value) -> tuple[ir.Value, ir.Value]:
    """The two u32 words of a tensor of keys (the first, the second), each of the keys' shape."""
    shape = emit.shape_of(keys)
    u32 = emit.tensor_type(shape, U32)
    high = emit.same_type("stablehlo.shift_right_logical", keys, emit.const(32, U64, shape))
    return emit.op("stablehlo.convert", u32, [high]), emit.op("stablehlo.convert", u32, [keys])


def pack(first: ir.Value, second: ir.Value) -> ir.Value:
    """Keys from their two u32 words (tensors of one shape)."""
    shape = emit.shape_of(first)
    u64 = emit.tensor_type(shape, KEY)
    high = emit.op("stablehlo.convert", u64, [first])
    high = emit.same_type("stablehlo.shift_left", high, emit.const(32, U64, shape))
    return emit.same_type("stablehlo.or", high, emit.op("stablehlo.convert", u64, [second]))


# ---- argument readers --------------------------------------------------------------------------------
# `split` of an array of numbers is NumPy's `np.split`, which arr spells with slices.
ARRAY_SPLIT_HELP = ("arr's `split` splits random keys (`jax.random.split`); to cut an array into pieces "
                    "(`np.split`), slice it: `{x}[:k]` and `{x}[k:]`, or unpack the rows of `reshape({x}, (2, -1))`")


def _key(cx: CallCx, v, name: str = "key", help: str = "") -> Val:
    v = cx.array(v, name)
    if not v.type.dtype.is_key:
        cx.error("E0210", f"`{name}` must be a key, found {v.type}", f"this is {v.type}", at=name,
                 help=help or "make one with `key(seed)`, or from its u32 words with `wrap_key(data)`")
    if v.type.rank:
        cx.error("E0204", f"`{name}` must be a single key, found {v.type}", "an array of keys", at=name,
                 help="index one key of them (`ks[i]`), in a loop if each is to be used")
    return v


def _drawing_key(cx: CallCx, v, help: str = "") -> Val:
    """The key a sampler or `split` draws from (a single key), its use checked by `_consume`."""
    k = _key(cx, v, help=help)
    _consume(cx, k)
    return k


def _key_words(cx: CallCx, k: Val) -> tuple[ir.Value, ir.Value]:
    return words(cx.ir(k))


def _consume(cx: CallCx, k: Val) -> None:
    """W0003 where a sampler or `split` uses a key that was used already (by one of them), or one from
    outside the loop it is in: the same key draws the same numbers. A key's identity is its Val (a name
    read twice gives the same one); the same span met again is one use seen by another walk of a body."""
    walk, span = cx.walk, cx.at("key")
    loop = next((header for outer, header in walk.outer_keys if id(k) in outer), None)
    if loop is not None:
        cx.warn("W0003", "a key from outside the loop is used in every iteration: each draws the same numbers",
                "the same key every iteration", at="key", labels=[Label(loop, "in this loop")],
                help="use `fold_in(k, i)` with the loop's counter, or split the key in the loop")
        return
    first = walk.key_uses.get(id(k))
    if first is None:
        walk.key_uses[id(k)] = (k, span)
    elif first[1] != span:
        cx.warn("W0003", "this key was used already: it draws the same numbers again", "used again here",
                at="key", labels=[Label(first[1], "first used here")],
                help="split it first (`k1, k2 = split(k)`) and use each key once")


def _integer(cx: CallCx, v, name: str, weak_as: DType, wide_help: str) -> tuple[Val, DType]:
    """An integer scalar (run-time allowed) and the dtype it is used in: its own, or `weak_as` for a literal
    (JAX with x64 on takes a Python int as int64). `wide_help`: E0211's help for a literal past `weak_as`,
    with `{typed}` for the literal written in a 64-bit dtype that holds it (there is no other operand to cast)."""
    v = cx.array(v, name)
    if v.type.rank or not v.type.dtype.is_int:
        cx.error("E0210", f"`{name}` must be an integer scalar, found {v.type}", f"this is {v.type}", at=name)
    dt = weak_as if v.type.weak else v.type.dtype
    problem = literal_out_of_range(v.static_int, dt) if v.type.weak and v.static_int is not None else None
    if problem is not None:
        wide = wide_int_dtype(v.static_int, v.static_int)
        help = "no integer dtype holds it" if wide is None else \
            wide_help.format(typed=f"{wide}({source_text(cx, cx.at(name)) or v.static_int})")
        cx.error("E0211", *problem, at=name, help=help)
    return v, dt


def _float_dtype(cx: CallCx, dtype) -> DType:
    if dtype is None:
        return F32
    dt = cx.dtype(dtype, "dtype")
    if dt.name not in FLOATS:
        cx.error("E0201", f"`dtype` must be a float dtype ({', '.join(FLOATS)}), found {dt}", f"dtype {dt}",
                 at="dtype")
    return dt


def _float_bound(cx: CallCx, v, name: str, dt: DType):
    """`minval`/`maxval`: a Python default, or a real scalar (run-time allowed) taken as `dt`."""
    if isinstance(v, float):
        return v
    v = cx.array(v, name)
    if v.type.rank or not (v.type.dtype.is_float or v.type.dtype.is_int):
        cx.error("E0210", f"`{name}` must be a number, found {v.type}", f"this is {v.type}", at=name)
    return v


def _shape(cx: CallCx, shape) -> tuple:
    """A sampler's shape: a tuple of compile-time ints or shape variables; () when not given."""
    return () if shape == () else cx.shape(shape, "shape")


def _bound_ir(cx: CallCx, v, dt: DType):
    return v if isinstance(v, float) else cx.ir(v, dt)


# ---- keys ----------------------------------------------------------------------------------------
@register("key", params="seed", keys=True, family="Random numbers",
          doc="a PRNG key (Threefry-2x32) from an integer seed, as jax.random.key")
def _key_from_seed(cx: CallCx, seed) -> Val:
    seed, dt = _integer(cx, seed, "seed", I64, "a literal seed is an i64, as JAX (x64 on) reads a Python int; give it "
                                                "as a typed value: `key({typed})`")
    return cx.value(ArrayType(KEY), lambda: pack(*threefry.run_time(*threefry.key_from_seed(cx.ir(seed, dt), dt))))


@register("split", params="key, num=2", keys=True, family="Random numbers",
          doc="num new keys from one, as jax.random.split (a key[num])")
def _split(cx: CallCx, key, num=2) -> Val:
    k = _drawing_key(cx, key, help=ARRAY_SPLIT_HELP.replace("{x}", source_text(cx, cx.at("key")) or "x"))
    n = cx.count(num, "num")
    return cx.value(ArrayType(KEY, (n,)),
                    lambda: pack(*threefry.split_pairs(_key_words(cx, k), concrete((n,))[0])))


@register("fold_in", params="key, data", keys=True, family="Random numbers",
          doc="a new key from a key and an integer (run-time allowed), as jax.random.fold_in")
def _fold_in(cx: CallCx, key, data) -> Val:
    k = _key(cx, key)
    data, dt = _integer(cx, data, "data", U32,        # JAX: jnp.asarray(data, dtype='uint32')
                        "`fold_in` reads a literal as u32, as JAX does; a typed value wraps modulo 2**32: "
                        "`fold_in(k, {typed})`")

    def build():
        as_u32 = emit.op("stablehlo.convert", emit.tensor_type((), U32), [cx.ir(data, dt)])
        return pack(*threefry.fold_in(_key_words(cx, k), as_u32))
    return cx.value(ArrayType(KEY), build)


@register("key_data", params="keys", keys=True, family="Random numbers",
          doc="the two u32 words of each key: a u32[..., 2], as jax.random.key_data")
def _key_data(cx: CallCx, keys) -> Val:
    ks = cx.array(keys, "keys")
    if not ks.type.dtype.is_key:
        cx.error("E0210", f"`keys` must be keys, found {ks.type}", f"this is {ks.type}", at="keys")
    shape = ks.type.shape + (Dim.const(2),)
    return cx.value(ArrayType(U32, shape), lambda: words_of_keys(cx.ir(ks), concrete(ks.type.shape)))


def words_of_keys(keys: ir.Value, dims: tuple) -> ir.Value:
    """The u32[*dims, 2] words of keys[*dims] (the first word the high half, compiler/types.py KEY)."""
    column = emit.tensor_type(dims + (1,), U32)
    parts = [emit.op("stablehlo.reshape", column, [w]) for w in words(keys)]
    return emit.op("stablehlo.concatenate", emit.tensor_type(dims + (2,), U32), parts,
                   {"dimension": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), len(dims))})


def keys_of_words(data: ir.Value, dims: tuple) -> ir.Value:
    """keys[*dims] of their u32[*dims, 2] words (`words_of_keys`' inverse)."""
    rank = len(dims)
    column = []
    for w in range(2):
        piece = emit.op("stablehlo.slice", emit.tensor_type(dims + (1,), U32), [data], {
            "start_indices": ir.DenseI64ArrayAttr.get([0] * rank + [w]),
            "limit_indices": ir.DenseI64ArrayAttr.get(list(dims) + [w + 1]),
            "strides": ir.DenseI64ArrayAttr.get([1] * (rank + 1))})
        column.append(emit.op("stablehlo.reshape", emit.tensor_type(dims, U32), [piece]))
    return pack(*column)


@register("wrap_key", params="data", keys=True, family="Random numbers",
          doc="keys from their u32 words (a u32[..., 2]), as jax.random.wrap_key_data")
def _wrap_key(cx: CallCx, data) -> Val:
    d = cx.array(data, "data")
    if d.type.dtype is not U32 or not d.type.shape or d.type.shape[-1] != 2:
        cx.error("E0210", f"`data` must be a u32[..., 2] of key words, found {d.type}", f"this is {d.type}",
                 at="data", help="`key_data(k)` gives them; from integers, `.astype(u32)` first")
    shape = d.type.shape[:-1]
    return cx.value(ArrayType(KEY, shape), lambda: threefry.run_time(keys_of_words(cx.ir(d), concrete(shape)))[0])


# ---- samplers ------------------------------------------------------------------------------------
@register("uniform", params="key, shape=(), dtype=None, minval=0.0, maxval=1.0", keys=True,
          family="Random numbers", doc="floats uniform in [minval, maxval), as jax.random.uniform (dtype f32)")
def _uniform(cx: CallCx, key, shape=(), dtype=None, minval=0.0, maxval=1.0) -> Val:
    k = _drawing_key(cx, key)
    dims = _shape(cx, shape)
    dt = _float_dtype(cx, dtype)
    lo, hi = _float_bound(cx, minval, "minval", dt), _float_bound(cx, maxval, "maxval", dt)
    return cx.value(ArrayType(dt, dims), lambda: threefry.uniform(
        _key_words(cx, k), concrete(dims), dt, _bound_ir(cx, lo, dt), _bound_ir(cx, hi, dt)))


def _standard_floats(draw):
    """The rule of a sampler of floats with no parameters of its own: `draw(key words, shape, dtype)`."""
    def rule(cx: CallCx, key, shape=(), dtype=None) -> Val:
        k = _drawing_key(cx, key)
        dims = _shape(cx, shape)
        dt = _float_dtype(cx, dtype)
        return cx.value(ArrayType(dt, dims), lambda: draw(_key_words(cx, k), concrete(dims), dt))
    return rule


register("normal", params="key, shape=(), dtype=None", keys=True, family="Random numbers",
         doc="standard normal floats, as jax.random.normal (dtype f32)")(_standard_floats(threefry.normal))
register("gumbel", params="key, shape=(), dtype=None", keys=True, family="Random numbers",
         doc="standard Gumbel floats, as jax.random.gumbel (dtype f32)")(_standard_floats(threefry.gumbel))


def _static_or_value(cx: CallCx, v, name: str, dt: DType | None):
    """A sampler's number: a literal as the Python number it is (JAX with x64 types it 64-bit), or a scalar
    value (run-time allowed) as an MLIR value, in `dt` when given (else its own dtype)."""
    v = cx.array(v, name)
    if v.type.dtype.is_key:
        cx.error("E0210", f"`{name}` must be a number, found {v.type}", f"this is {v.type}", at=name)
    if v.type.rank:
        cx.error("E0204", f"`{name}` must be a scalar, found {v.type}", f"this is {v.type}", at=name)
    if v.type.weak and v.static is not None and not (isinstance(v.static, Dim) and not v.static.is_const):
        return float(v.static) if isinstance(v.static, float) else int(v.static.value)
    return lambda: cx.ir(v, dt)         # (a shape variable too: a number only once the function is specialized)


def _emit_number(x):
    return x() if callable(x) else x


@register("bernoulli", params="key, p=0.5, shape=None", keys=True, family="Random numbers",
          doc="true with probability p, as jax.random.bernoulli (a literal p draws in f64, as JAX with x64)")
def _bernoulli(cx: CallCx, key, p=0.5, shape=None) -> Val:
    k = _drawing_key(cx, key)
    dims = () if shape is None else _shape(cx, shape)
    if not isinstance(p, float):
        pv = cx.array(p, "p")
        if not (pv.type.dtype.is_float or pv.type.weak):
            cx.error("E0201", f"`p` must be a float, found {pv.type}", f"this is {pv.type}", at="p")
        p = _static_or_value(cx, pv, "p", None if pv.type.weak else pv.type.dtype)
    return cx.value(ArrayType(BOOL, dims),
                    lambda: threefry.bernoulli(_key_words(cx, k), _emit_number(p), concrete(dims)))


@register("randint", params="key, shape, minval, maxval, dtype=None", keys=True, family="Random numbers",
          doc="integers uniform in [minval, maxval), as jax.random.randint (dtype i32)")
def _randint(cx: CallCx, key, shape, minval, maxval, dtype=None) -> Val:
    k = _drawing_key(cx, key)
    dims = _shape(cx, shape)
    dt = I32 if dtype is None else cx.dtype(dtype, "dtype")
    if not dt.is_int:
        cx.error("E0201", f"`dtype` must be an integer dtype, found {dt}", f"dtype {dt}", at="dtype")
    bounds = []
    for v, name in ((minval, "minval"), (maxval, "maxval")):
        b = cx.array(v, name)
        if not b.type.dtype.is_int or (not b.type.weak and b.type.dtype is not dt):
            cx.error("E0201", f"`{name}` must be an integer literal or a {dt} value, found {b.type}",
                     f"this is {b.type}", at=name, help=f"convert it with `.astype({dt})`")
        bounds.append(_static_or_value(cx, b, name, dt))
        lo, hi = int_range(I64)
        if not callable(bounds[-1]) and not lo <= bounds[-1] <= hi:     # (JAX types a literal bound int64)
            cx.error("E0211", f"literal {bounds[-1]} is out of range for i64, the dtype of a literal bound of "
                              f"`randint` (as in JAX)", "does not fit in i64", at=name,
                     help=f"give it as a {dt} value, e.g. `{dt}({source_text(cx, cx.at(name)) or bounds[-1]})`"
                     if dt.kind == "uint" else "a bound past i64 is past every integer dtype's values")
    return cx.value(ArrayType(dt, dims), lambda: threefry.randint(
        _key_words(cx, k), concrete(dims), _emit_number(bounds[0]), _emit_number(bounds[1]), dt))


@register("truncated_normal", params="key, lower, upper, shape=(), dtype=None", keys=True,
          family="Random numbers", doc="normal floats truncated to (lower, upper), as jax.random.truncated_normal")
def _truncated_normal(cx: CallCx, key, lower, upper, shape=(), dtype=None) -> Val:
    k = _drawing_key(cx, key)
    dims = _shape(cx, shape)
    dt = _float_dtype(cx, dtype)
    lo, hi = (_static_or_value(cx, v, name, dt) for v, name in ((lower, "lower"), (upper, "upper")))
    return cx.value(ArrayType(dt, dims), lambda: threefry.truncated_normal(
        _key_words(cx, k), _as_argument(_emit_number(lo)), _as_argument(_emit_number(hi)), concrete(dims), dt,
        lambda v: linalg_op(STOP_GRADIENT, [v], [v.type], {}).result))


def _as_argument(bound):
    """A literal bound of `truncated_normal` as an f64 behind an optimization barrier, closer to the run-time
    argument eager `jax.random.truncated_normal` passes to its jitted body than a folded constant: the same
    bits for f16, bf16, f64 and f32 bounds near the centre, not in f32 tails (docs/random.md)."""
    if isinstance(bound, ir.Value):
        return bound
    return hlo.OptimizationBarrierOp([emit.const(float(bound), F64, ())]).results[0]


@register("categorical", params="key, logits, axis=-1, shape=None", keys=True, family="Random numbers",
          doc="indices drawn with probabilities softmax(logits) along axis, as jax.random.categorical (i32)")
def _categorical(cx: CallCx, key, logits, axis=-1, shape=None) -> Val:
    k = _drawing_key(cx, key)
    x = cx.array(logits, "logits")
    if not x.type.dtype.is_float or x.type.rank == 0:
        cx.error("E0201", f"`logits` must be a float array, found {x.type}", f"this is {x.type}", at="logits")
    ax = cx.axes(axis, x.type.rank)[0]
    batch = x.type.shape[:ax] + x.type.shape[ax + 1:]
    dims = batch if shape is None else _shape(cx, shape)
    if len(dims) < len(batch) or any(d != b and b != 1 for d, b in zip(dims[len(dims) - len(batch):], batch)):
        cx.error("E0202", f"`shape` {shape_str(dims)} does not end with the batch shape {shape_str(batch)} of the "
                          f"logits", "does not match", at="shape")
    return cx.value(ArrayType(I32, dims), lambda: threefry.categorical(
        _key_words(cx, k), cx.ir(x), ax, concrete(dims), I32))


@register("permutation", params="key, x, axis=0", keys=True, family="Random numbers",
          doc="a shuffled arange(x) for an integer x, else x shuffled along axis, as jax.random.permutation")
def _permutation(cx: CallCx, key, x, axis=0) -> Val:
    k = _drawing_key(cx, key)
    v = cx.array(x, "x")
    if v.type.rank == 0:
        n = cx.count(v, "x")
        return cx.value(ArrayType(I32, (n,)), lambda: threefry.permutation(
            _key_words(cx, k), concrete((n,))[0], 0, I32))
    ax = cx.axes(axis, v.type.rank)[0]
    return cx.value(v.type.strong(), lambda: threefry.permutation(_key_words(cx, k), cx.ir(v), ax))
