"""An arr function inside JAX (LANGUAGE.md section 18, docs/interop.md): `Function.as_jax()` is a function JAX
can trace. It binds a JAX primitive whose abstract evaluation is arr's checker (the result types of the
function lowered for the arguments' types) and whose lowering merges arr's StableHLO into JAX's module as a
private function and calls it, so XLA compiles the arr and JAX operations together (and fuses them).
For a function of float arguments and results, `jax.jvp` is arr's `jvp` (`jax.custom_jvp`), whose tangent
primitive is linear with arr's vjp as its transpose, so `jax.grad` and `jax.hessian` work too; otherwise
`jax.grad`/`jax.vjp` go through `jax.custom_vjp`, with arr's vjp as the backward pass. `jax.vmap` goes
through the primitive's batching rule, arr's `vmap` (compiler/batching.py).

Not yet: functions that print or assert, modules with guards (their host callbacks are arrc's runtime's,
which JAX's executables do not have), keys, and forward mode of a function with integer arguments.
"""
from __future__ import annotations

import functools
import threading

_lock = threading.Lock()
_primitives: dict = {}


def as_jax(fn, derive, make_vmap):
    """A JAX-traceable function computing `fn` (an arr Function, checked by the caller: arrc/api.py
    `Function.as_jax`). `derive(fn, kind)`: `fn`'s "vjp" with respect to its float arguments (None without
    any) or its "jvp" (None unless its arguments and results are all floats); `make_vmap(fn, in_axes)`: arr's
    vmap of a function, lanes first. Its results are a tuple where `fn` returns one."""
    import jax
    prim = _primitive(fn, make_vmap)
    tuple_result = fn._sig.tuple_result
    n, k = len(fn._sig.params), len(fn._sig.results)
    floats = [i for i, (_, t, _) in enumerate(fn._sig.params) if t.dtype.is_float]
    dtypes = [t.dtype.np for _, t, _ in fn._sig.params]
    backward, tangent = derive(fn, "vjp"), derive(fn, "jvp")

    def jax_fn(*args):      # a Python scalar takes its parameter's dtype, as in a call of `fn` (also when
        return f(*(jax.numpy.asarray(a, dt) if _weak_scalar(a) else a for a, dt in zip(args, dtypes)))  # traced)

    def apply(*args):
        out = prim.bind(*args)
        return tuple(out) if tuple_result else out[0]

    if tangent is not None:
        tangents_of = _primitive(tangent, make_vmap, drop=k)          # (primals, tangents) -> tangents
        pull = functools.lru_cache(maxsize=None)(lambda: as_jax(backward, derive, make_vmap))   # made when used:
        _transposed_by(tangents_of, lambda *a: pull()(*a)[k:], n)     # differentiable again (second derivatives)
        f = jax.custom_jvp(apply)

        @f.defjvp
        def push(primals, tangents):
            out = tangents_of.bind(*primals, *tangents)
            return f(*primals), tuple(out) if tuple_result else out[0]
        return jax_fn

    f = jax.custom_vjp(apply)

    def forward(*args):
        return f(*args), args

    def back(args, ct):
        import numpy as np
        cts = ct if tuple_result else (ct,)
        pulled = _primitive(backward, make_vmap, drop=k).bind(*args, *cts) if backward else []
        grads = dict(zip(floats, pulled))
        return tuple(grads[i] if i in grads else np.zeros(np.shape(a), jax.dtypes.float0)
                     for i, a in enumerate(args))
    f.defvjp(forward, back)
    return jax_fn


def _weak_scalar(a) -> bool:
    """A Python scalar, or one that `jax.jit` traced (weakly typed, rank 0)."""
    if type(a) in (bool, int, float):
        return True
    aval = getattr(a, "aval", None)
    return bool(getattr(aval, "weak_type", False)) and not getattr(aval, "shape", (0,))


def _transposed_by(tangents_of, pull, n: int) -> None:
    """Make `tangents_of` (primals, tangents) -> tangents linear in its tangents for JAX, its transpose
    `pull(primals, cotangents)` -> cotangents of the primals: reverse mode of the jvp is arr's vjp."""
    from jax._src.interpreters import ad

    def transpose(cts, *args):
        cts = [ad.instantiate_zeros(ct) for ct in cts]
        return [None] * n + list(pull(*args[:n], *cts))
    ad.primitive_transposes[tangents_of] = transpose


def _primitive(fn, make_vmap, drop: int = 0):
    """The JAX primitive of arr Function `fn` (made once per Function), without its first `drop` results."""
    with _lock:
        prim = _primitives.get((id(fn), drop))
        if prim is not None and prim[0] is fn:
            return prim[1]
    from jax._src import dispatch
    from jax._src.interpreters import batching, mlir
    from jax.extend.core import Primitive
    prim = Primitive(f"arr_{getattr(fn, 'label', fn.name)}")
    prim.multiple_results = True
    prim.def_impl(functools.partial(dispatch.apply_primitive, prim))
    prim.def_abstract_eval(functools.partial(_abstract, fn, drop))
    mlir.register_lowering(prim, functools.partial(_lower, fn, drop))
    batching.primitive_batchers[prim] = functools.partial(_batch, fn, make_vmap, drop, prim)
    with _lock:
        _primitives[(id(fn), drop)] = (fn, prim)
    return prim


def _lowered(fn, avals, platform: str = "cpu"):
    """`fn` lowered for `avals` through its passes, linear algebra for `platform`."""
    import jax
    from arrc.passes.linalg import LowerLinalg
    from arrc.runtime.pipeline import apply_passes, passes_for
    lowered = fn.lower(*(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals))
    apply_passes(lowered.module, lowered.context, passes_for(None) + [LowerLinalg(platform)], fn.sources)
    return lowered


@functools.lru_cache(maxsize=None)
def _result_types(fn, key: tuple) -> list:
    import jax
    from arrc.compiler.optable import concrete
    avals = [jax.ShapeDtypeStruct(s, d) for s, d in key]
    return [(concrete(t.shape), t.dtype.np) for t in fn.lower(*avals).result_types]


def _abstract(fn, drop: int, *avals):
    from jax._src.core import ShapedArray
    key = tuple((tuple(a.shape), a.dtype) for a in avals)
    return [ShapedArray(shape, dtype) for shape, dtype in _result_types(fn, key)[drop:]]


def _lower(fn, drop: int, ctx, *args):
    from jax._src.interpreters import mlir
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import func
    platform = ctx.module_context.platforms[0]
    text = _lowered(fn, ctx.avals_in, platform).as_text()
    source = ir.Module.parse(text, context=ctx.module_context.context)
    name = mlir.merge_mlir_modules(ctx.module_context.module, f"arr_{fn.name}", source)
    every = _abstract(fn, 0, *ctx.avals_in)                  # the call returns them all; the primitive `drop`s some
    call = func.CallOp([mlir.aval_to_ir_type(ctx.module_context, a) for a in every], ir.FlatSymbolRefAttr.get(name),
                       list(args))
    return list(call.results)[drop:]


def _batch(fn, make_vmap, drop: int, prim, args, dims):
    """jax.vmap of the primitive: arr's vmap of `fn` over the mapped arguments, the lanes first; for a
    derivative (which arr's vmap does not take from Python), the primitive once per lane (`lax.map`)."""
    import jax
    from jax._src.interpreters import batching
    in_axes = tuple(None if d is None or isinstance(d, batching.NotMapped) else d for d in dims)
    try:
        mapped = _mapped(fn, make_vmap, in_axes)
    except TypeError:
        mapped = None
    if mapped is not None:
        out = _primitive(mapped, make_vmap, drop).bind(*args)
        return out, [0] * len(out)
    moved = [jax.numpy.moveaxis(a, d, 0) if d is not None else a for a, d in zip(args, in_axes)]

    def lane(xs):
        rows = iter(xs)
        return prim.bind(*(next(rows) if d is not None else a for a, d in zip(moved, in_axes)))
    out = jax.lax.map(lane, [a for a, d in zip(moved, in_axes) if d is not None])
    return list(out), [0] * len(out)


@functools.lru_cache(maxsize=None)
def _mapped(fn, make_vmap, in_axes: tuple):
    return make_vmap(fn, in_axes)
