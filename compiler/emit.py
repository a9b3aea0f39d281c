"""Small helpers over jaxlib's MLIR bindings used by the lowering rules.

Every helper expects an active context, location and insertion point (the
lowering driver owns them), and works on concrete shapes (tuples of ints).
"""
from __future__ import annotations

import functools

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir._mlir_libs import _jax_mlir_ext
# builtin is imported here, before anything is lowered, so that the C++ bindings never import it: they
# import a dialect's module (jaxlib.mlir.dialects.<name>) the first time they hand a value, type or op of
# that dialect to Python (`list(block.arguments)`: builtin), from a nanobind caster that cannot pass an
# exception on, so a Ctrl-C landing in that import's Python code aborted the process (std::terminate).
# Every dialect a lowering makes is imported here; tests/test_limits.py checks that lowering imports nothing.
from jaxlib.mlir.dialects import builtin, chlo, func, stablehlo as hlo  # noqa: F401  (chlo, func, hlo: for rules)

from . import abi
from .locations import printed_string
from .types import F32, I32, U64, DType, int_range, wrap_int


@functools.lru_cache(maxsize=1)
def _registry() -> ir.DialectRegistry:
    registry = ir.DialectRegistry()
    _jax_mlir_ext.register_dialects(registry)
    return registry


def make_context() -> ir.Context:
    """A fresh context with stablehlo, chlo and func loaded; every other dialect jaxlib knows is
    registered and loads on first use (loading all of them up front cost ~2 ms per lowering)."""
    ctx = ir.Context()
    ctx.append_dialect_registry(_registry())
    hlo.register_dialect(ctx)
    chlo.register_dialect(ctx)
    ctx.dialects["func"]
    return ctx


_cache: tuple = (None, {})
_UNKNOWN = object()


def _context_cache() -> dict:
    """MLIR types belong to their context: one cache, for the context in use (the latest one)."""
    global _cache
    ctx = ir.Context.current
    cache = _cache            # a local reference: another thread may replace the global meanwhile
    if cache[0] is not ctx:
        cache = _cache = (ctx, {})
    return cache[1]


def ir_dtype(dt: DType) -> ir.Type:
    cache = _context_cache()
    t = cache.get(dt)
    if t is None:
        t = cache[dt] = _make_ir_dtype(dt)
    return t


def _make_ir_dtype(dt: DType) -> ir.Type:
    if dt.kind == "bool":
        return ir.IntegerType.get_signless(1)
    if dt.kind == "int":
        return ir.IntegerType.get_signless(dt.bits)
    if dt.kind in ("uint", "key"):      # a key: its two u32 words in one u64 (compiler/types.py KEY)
        return ir.IntegerType.get_unsigned(dt.bits)
    if dt.kind == "complex":
        return ir.ComplexType.get(ir.F32Type.get() if dt.bits == 64 else ir.F64Type.get())
    return {"f16": ir.F16Type, "bf16": ir.BF16Type, "f32": ir.F32Type, "f64": ir.F64Type}[dt.name].get()


def tensor_type(shape, dt: DType) -> ir.RankedTensorType:
    cache = _context_cache()
    key = (tuple(shape), dt)
    t = cache.get(key)
    if t is None:
        t = cache[key] = ir.RankedTensorType.get(list(shape), ir_dtype(dt))
    return t


def shape_of(x: ir.Value) -> tuple[int, ...]:
    return tuple(ir.RankedTensorType(x.type).shape)


def element_dtype(t: ir.Type) -> DType:
    """arr's dtype of a tensor type's elements (f32, bf16, i32, `ui8` as u8, `i1` as bool)."""
    from .types import DTYPES
    name = str(ir.RankedTensorType(t).element_type)
    return DTYPES["bool" if name == "i1" else "u" + name[2:] if name.startswith("ui") else name]


def op(name: str, result_type: ir.Type, operands, attributes: dict | None = None) -> ir.Value:
    """Create the op `name` with a known result type: ~3x cheaper than the generated builders (hlo.add,
    ...), which infer the result type."""
    return ir.Operation.create(name, results=[result_type], operands=operands, attributes=attributes).result


def same_type(name: str, *operands: ir.Value) -> ir.Value:
    """An elementwise op whose result has the type of its first operand (`stablehlo.add` of equal types)."""
    return ir.Operation.create(name, results=[operands[0].type], operands=operands).result


def const(value, dt: DType, shape=()) -> ir.Value:
    """A constant of dtype `dt` and `shape`; `value` is a Python scalar or an array of that shape."""
    if dt.is_key:
        dt = U64            # keys are their words (compiler/types.py KEY): the same MLIR type
    if type(value) not in (float, int, bool):
        arr = np.asarray(value)
        if arr.ndim:
            return _const_array(arr, dt, shape)
        value = arr.item()
    value = _attribute_scalar(value, dt)
    ttype = tensor_type(shape, dt)
    elem = ir_dtype(dt)
    if dt.kind == "bool":
        scalar_attr = ir.BoolAttr.get(value)
    elif dt.is_float:
        scalar_attr = ir.FloatAttr.get(elem, value)
    else:
        if dt.kind == "uint" and value >= 2 ** 63:
            value -= 2 ** 64          # IntegerAttr takes an int64: the same bits, read as signed
        scalar_attr = ir.IntegerAttr.get(elem, value)
    return op("stablehlo.constant", ttype, [], {"value": ir.DenseElementsAttr.get_splat(ttype, scalar_attr)})


def _const_array(arr: np.ndarray, dt: DType, shape) -> ir.Value:
    if dt.kind == "bool":
        return hlo.constant(ir.DenseElementsAttr.get(arr.astype(np.bool_), type=ir_dtype(dt), shape=list(shape)))
    arr = np.ascontiguousarray(arr.astype(dt.np))
    if dt.name == "bf16":
        arr = arr.view(np.uint16)
    return hlo.constant(ir.DenseElementsAttr.get(arr, type=ir_dtype(dt), shape=list(shape)))


def _attribute_scalar(v, dt: DType):
    if dt.kind == "bool":
        return bool(v)
    if dt.is_int:
        return wrap_int(int(v), dt)     # literals are range-checked before; wrap for safety
    return float(v)     # FloatAttr rounds to the dtype as NumPy does (to nearest, ties to even; inf past max)


def inline_block(block: ir.Block, args) -> tuple[list, list]:
    """Move the operations of `block` but its terminator to the insertion point, its arguments replaced by
    `args`: (the moved operations, the values the terminator returned)."""
    for arg, value in zip(block.arguments, args):
        arg.replace_all_uses_with(value)
    ops = list(block.operations)
    here = ir.InsertionPoint.current
    for op in ops[:-1]:
        op.operation.detach_from_parent()
        here.insert(op.operation)
    return ops[:-1], list(ops[-1].operands)


def attr_text(attr) -> str:
    """The text of a string or flat symbol-reference attribute, never failing on bytes that are not UTF-8
    (compiler/locations.py `printed_string`)."""
    if isinstance(attr, ir.FlatSymbolRefAttr):
        return printed_string(str(attr)[1:])
    return ir.StringAttr(attr).value_bytes.decode("utf-8", "replace")


def int_attr(op, name: str, default=None):
    try:
        return ir.IntegerAttr(op.attributes[name]).value
    except KeyError:
        return default


def set_int_attr(op, name: str, value: int) -> None:
    op.attributes[name] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)


def _set_function_type(fop, inputs: list, results: list) -> None:
    fop.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, results))


def run_argument(fop) -> ir.Value:
    """The run-id argument of `fop`, added at the end when the function has none yet."""
    block = fop.regions[0].blocks[0]
    index = int_attr(fop, abi.RUN_ARG)
    if index is not None:
        return block.arguments[index]
    ftype = ir.FunctionType(ir.TypeAttr(fop.attributes["function_type"]).value)
    with fop.location:
        run_type = tensor_type((), I32)
    arg = block.add_argument(run_type, ir.Location.name("$run", childLoc=fop.location))
    _set_function_type(fop, list(ftype.inputs) + [run_type], list(ftype.results))
    set_int_attr(fop, abi.RUN_ARG, len(ftype.inputs))
    _extend_arg_attrs(fop)
    return arg


def _extend_arg_attrs(fop) -> None:
    if "arg_attrs" in fop.attributes:
        attrs = list(ir.ArrayAttr(fop.attributes["arg_attrs"]))
        fop.attributes["arg_attrs"] = ir.ArrayAttr.get(attrs + [ir.DictAttr.get({})])


def zeros_like_type(shape, dt: DType) -> ir.Value:
    return const(0, dt, shape)


def broadcast(x: ir.Value, to_shape) -> ir.Value:
    """NumPy broadcasting of `x` to `to_shape` (right-aligned, size-1 dims stretch)."""
    cache = _context_cache()
    key = ("broadcast", x.type, tuple(to_shape))
    how = cache.get(key, _UNKNOWN)        # (result type, attributes), or None: `x` has that shape already
    if how is _UNKNOWN:
        x_type = ir.RankedTensorType(key[1])
        from_shape = tuple(x_type.shape)
        how = None
        if from_shape != key[2]:
            offset = len(to_shape) - len(from_shape)
            dims = ir.DenseI64ArrayAttr.get(list(range(offset, len(to_shape))))
            how = ir.RankedTensorType.get(list(to_shape), x_type.element_type), {"broadcast_dimensions": dims}
        cache[key] = how
    if how is None:
        return x
    return op("stablehlo.broadcast_in_dim", how[0], [x], how[1])


def convert(x: ir.Value, src: DType, dst: DType) -> ir.Value:
    """Implicit promotion between dtypes (value-preserving or rounding; never out of range)."""
    if src == dst:
        return x
    shape = shape_of(x)
    if dst.kind == "bool":
        return compare(x, const(0, src, shape), "NE", src)
    return op("stablehlo.convert", tensor_type(shape, dst), [x])


def constant_array(value: ir.Value) -> np.ndarray | None:
    """The elements of `value` where it is a constant or a broadcast of one (as NumPy's), else None."""
    owner = value.owner
    name = getattr(owner, "name", "")
    if name == "stablehlo.broadcast_in_dim":
        return constant_array(owner.operands[0])
    if name != "stablehlo.constant":
        return None
    attr = ir.DenseElementsAttr(owner.attributes["value"])
    elements = np.asarray(attr)
    if elements.dtype == object:        # NumPy cannot read a bf16 buffer: it wraps the attribute
        if not attr.is_splat:
            return None
        return np.full(ir.ShapedType(attr.type).shape, ir.FloatAttr(attr.get_splat_value()).value)
    return elements


def mark(value: ir.Value, name: str) -> ir.Value:
    """Tag the op producing `value` for the guard passes (e.g. `arrc.div0` on a divisor == 0 test)."""
    value.owner.attributes[name] = ir.BoolAttr.get(True)    # not a UnitAttr: VHLO (portable artifacts) has none
    return value


def compare_type(dt: DType) -> str:
    return {"float": "FLOAT", "int": "SIGNED", "uint": "UNSIGNED", "bool": "UNSIGNED"}[dt.kind]


def compare(a: ir.Value, b: ir.Value, direction: str, dt: DType) -> ir.Value:
    return hlo.compare(a, b, hlo.ComparisonDirectionAttr.get(direction),
                       compare_type=hlo.ComparisonTypeAttr.get(compare_type(dt)))


def select(pred: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
    return op("stablehlo.select", a.type, [pred, a, b])


def cast(x: ir.Value, src: DType, dst: DType) -> ir.Value:
    """Explicit casts, with one meaning on every backend (LANGUAGE.md section 4)."""
    if src == dst:
        return x
    shape = shape_of(x)
    if dst.kind == "bool":
        return compare(x, const(0, src, shape), "NE", src)
    if src.kind == "bool":
        return hlo.convert(tensor_type(shape, dst), x)
    if src.is_float and dst.is_float:
        if src.bits == 64 and dst.bits == 16:
            return hlo.convert(tensor_type(shape, dst), _f64_to_f32_round_to_odd(x, shape))
        return hlo.convert(tensor_type(shape, dst), x)     # IEEE: round to nearest even, overflow -> inf
    if src.is_int and dst.is_float:
        if dst.name == "bf16":      # through f32 as jax.numpy and ml_dtypes do, also where XLA folds a constant
            x = hlo.convert(tensor_type(shape, F32), x)
        return hlo.convert(tensor_type(shape, dst), x)
    if src.is_float:
        return _float_to_int(x, src, dst, shape)
    return _int_to_int(x, src, dst, shape)


def _f64_to_f32_round_to_odd(x, shape) -> ir.Value:
    """f64 -> f32 rounding to odd: a second rounding to f16/bf16 (RNE) is then exact, unlike XLA's
    f64 -> f16, which rounds twice through f32 (1 + 2**-11 + 2**-40 would become 1.0).

    Done on the bits: keep the 23 mantissa bits f32 has, and set the lowest kept bit when any dropped
    bit was set (a sticky bit). A round trip through f32 cannot be used to test exactness: XLA's
    excess-precision simplification removes convert(convert(x, f32), f64).
    """
    from .types import DTYPES
    u64 = DTYPES["u64"]
    bits = hlo.bitcast_convert(tensor_type(shape, u64), x)
    dropped = (1 << 29) - 1
    low = hlo.and_(bits, const(dropped, u64, shape))
    kept = hlo.and_(bits, const(~dropped & (2 ** 64 - 1), u64, shape))
    sticky = select(compare(low, const(0, u64, shape), "NE", u64), const(1 << 29, u64, shape),
                    const(0, u64, shape))
    odd = mark(hlo.bitcast_convert(tensor_type(shape, DTYPES["f64"]), hlo.or_(kept, sticky)), abi.ROUNDED)
    return hlo.convert(tensor_type(shape, DTYPES["f32"]), odd)       # (abi.ROUNDED: differentiated as a cast)


def _float_to_int(x, src: DType, dst: DType, shape) -> ir.Value:
    # Compare in a float wide enough to hold the powers of two bounding dst exactly.
    from .types import DTYPES
    wide = src if src.bits >= 32 else DTYPES["f32"]
    xw = hlo.convert(tensor_type(shape, wide), x) if wide != src else x
    lo, hi = int_range(dst)
    upper = float(hi + 1)               # a power of two: exact in f32/f64
    result = hlo.convert(tensor_type(shape, dst), xw)
    too_big = compare(xw, const(upper, wide, shape), "GE", wide)
    result = select(too_big, const(hi, dst, shape), result)
    if dst.kind == "uint":
        too_small = compare(xw, const(0.0, wide, shape), "LT", wide)
        result = select(too_small, const(0, dst, shape), result)
    else:
        too_small = compare(xw, const(float(lo), wide, shape), "LE", wide)
        result = select(too_small, const(lo, dst, shape), result)
    is_nan = compare(xw, xw, "NE", wide)
    return select(is_nan, const(0, dst, shape), result)


def _int_to_int(x, src: DType, dst: DType, shape) -> ir.Value:
    """Two's-complement wrap, built from conversions that never leave their range."""
    from .types import DTYPES
    unsigned = {b: DTYPES[f"u{b}"] for b in (8, 16, 32, 64)}
    signed = {b: DTYPES[f"i{b}"] for b in (8, 16, 32, 64)}
    same_kind = (unsigned if src.kind == "uint" else signed)
    if dst.bits >= src.bits:
        widened = x if dst.bits == src.bits else hlo.convert(tensor_type(shape, same_kind[dst.bits]), x)
        if same_kind[dst.bits] == dst:
            return widened
        return hlo.bitcast_convert(tensor_type(shape, dst), widened)
    as_unsigned = x if src.kind == "uint" else hlo.bitcast_convert(tensor_type(shape, unsigned[src.bits]), x)
    mask = const(2 ** dst.bits - 1, unsigned[src.bits], shape)
    low_bits = hlo.and_(as_unsigned, mask)
    narrowed = hlo.convert(tensor_type(shape, unsigned[dst.bits]), low_bits)
    if dst.kind == "uint":
        return narrowed
    return hlo.bitcast_convert(tensor_type(shape, dst), narrowed)


def reduce(x: ir.Value, init: ir.Value, dims, body, dt: DType) -> ir.Value:
    """Reduce `x` over `dims` with the binary `body(a, b)` (an hlo op builder)."""
    in_shape = shape_of(x)
    out_shape = [d for i, d in enumerate(in_shape) if i not in dims]
    op = hlo.ReduceOp([tensor_type(out_shape, dt)], [x], [init], list(dims))
    scalar = tensor_type((), dt)
    block = op.body.blocks.append(scalar, scalar)
    with ir.InsertionPoint(block):
        hlo.return_([body(block.arguments[0], block.arguments[1])])
    return op.result


def arg_reduce(x: ir.Value, index: ir.Value, dims, dt: DType, index_dt: DType, direction: str) -> ir.Value:
    """The index of the first largest (`direction` "GT") or smallest ("LT") element of `x` over `dims`, as
    JAX's `lax.argmax`/`argmin` lower it: a reduce over (value, `index`) pairs where the left pair wins
    when its value is better or NaN, its index also on equal values with the smaller index. (A body
    with more operations, e.g. one that also orders two NaNs, made XLA:CPU split the fusion across
    threads: k-means 1.4-1.8x of JAX at 1,000-2,000 points.)"""
    out_shape = [d for i, d in enumerate(shape_of(x)) if i not in dims]
    init = scalar_arith_min(dt) if direction == "GT" else scalar_arith_max(dt)
    op = hlo.ReduceOp([tensor_type(out_shape, dt), tensor_type(out_shape, index_dt)], [x, index],
                      [const(init, dt), const(0, index_dt)], list(dims))
    sv, si = tensor_type((), dt), tensor_type((), index_dt)
    block = op.body.blocks.append(sv, si, sv, si)
    with ir.InsertionPoint(block):
        av, ai, bv, bi = block.arguments
        pick_a = compare(av, bv, direction, dt)
        if dt.is_float:
            pick_a = hlo.or_(pick_a, compare(av, av, "NE", dt))         # NaN wins
        first = hlo.and_(compare(av, bv, "EQ", dt), compare(ai, bi, "LT", index_dt))
        hlo.return_([select(pick_a, av, bv), select(hlo.or_(pick_a, first), ai, bi)])
    return op.results[1]


def scatter(target: ir.Value, indices: ir.Value, updates: ir.Value, dnums, combine=None) -> ir.Value:
    """`target` with `updates` scattered at `indices` (`dnums`: ScatterDimensionNumbers): each update
    stored, or with `combine` (an hlo op builder, e.g. hlo.add) combined with what is there."""
    op = hlo.ScatterOp([target.type], [target], indices, [updates], dnums, indices_are_sorted=False,
                       unique_indices=False)
    scalar = ir.RankedTensorType.get([], ir.RankedTensorType(target.type).element_type)
    block = op.update_computation.blocks.append(scalar, scalar)
    with ir.InsertionPoint(block):
        hlo.return_([combine(*block.arguments) if combine else block.arguments[1]])
    return op.results[0]


def scalar_arith_min(dt: DType):
    """The identity of `max` for dtype `dt` (-inf for floats)."""
    if dt.is_float:
        return -np.inf
    return int_range(dt)[0]


def scalar_arith_max(dt: DType):
    if dt.is_float:
        return np.inf
    return int_range(dt)[1]


@functools.lru_cache(maxsize=None)
def _direction(op: str) -> str:
    return {"==": "EQ", "!=": "NE", "<": "LT", "<=": "LE", ">": "GT", ">=": "GE"}[op]


def compare_op(a, b, op: str, dt: DType):
    return compare(a, b, _direction(op), dt)


def convolution(out_type, lhs, rhs, specs, strides, padding, lhs_dilation, rhs_dilation, features=1, batches=1):
    """A stablehlo.convolution; `specs`: (input, kernel, output) as (batch or out-feature dim, feature or
    in-feature dim, spatial dims), JAX's ConvDimensionNumbers."""
    (ib, if_, isp), (ko, ki, ksp), (ob, of, osp) = specs
    numbers = hlo.ConvDimensionNumbers.get(
        input_batch_dimension=ib, input_feature_dimension=if_, input_spatial_dimensions=list(isp),
        kernel_input_feature_dimension=ki, kernel_output_feature_dimension=ko, kernel_spatial_dimensions=list(ksp),
        output_batch_dimension=ob, output_feature_dimension=of, output_spatial_dimensions=list(osp))
    pads = ir.DenseIntElementsAttr.get(np.asarray(padding, np.int64).reshape(len(isp), 2))
    return hlo.convolution(out_type, lhs, rhs, numbers, features, batches, window_strides=list(strides),
                           padding=pads, lhs_dilation=list(lhs_dilation), rhs_dilation=list(rhs_dilation))
