"""An arr function inside JAX (LANGUAGE.md section 18, docs/interop.md): `Function.as_jax()` is a function JAX
can trace. It binds a JAX primitive whose abstract evaluation is arr's checker (the result types of the
function lowered for the arguments' types) and whose lowering merges arr's StableHLO into JAX's module as a
private function and calls it, so XLA compiles the arr and JAX operations together (and fuses them).
`jax.grad`/`jax.vjp` go through `jax.custom_vjp`, the backward pass arr's own (`arrc.vjp`); `jax.vmap`
through the primitive's batching rule, arr's `vmap` (compiler/batching.py).

Not yet: functions that print or assert, modules with guards (their host callbacks are arrc's runtime's,
which JAX's executables do not have), keys, and forward mode (`jax.jvp` of a custom_vjp function).
"""
from __future__ import annotations

import functools
import threading

_lock = threading.Lock()
_primitives: dict = {}


def as_jax(fn, backward, make_vmap):
    """A JAX-traceable function computing `fn` (an arr Function, checked by the caller: arrc/api.py
    `Function.as_jax`): called eagerly, under `jax.jit`, `jax.grad`, `jax.vjp` and `jax.vmap`. `backward`:
    `fn`'s vjp with respect to its float arguments (None without any); `make_vmap(fn, in_axes)`: arr's vmap of
    a function, lanes first. Its results are a tuple where `fn` returns one."""
    import jax
    prim = _primitive(fn, make_vmap)
    tuple_result = fn._sig.tuple_result
    floats = [i for i, (_, t, _) in enumerate(fn._sig.params) if t.dtype.is_float]
    dtypes = [t.dtype.np for _, t, _ in fn._sig.params]

    def jax_fn(*args):      # a Python scalar takes its parameter's dtype, as in a call of `fn`
        return f(*(jax.numpy.asarray(a, dt) if type(a) in (bool, int, float) else a for a, dt in zip(args, dtypes)))

    @jax.custom_vjp
    def f(*args):
        out = prim.bind(*args)
        return tuple(out) if tuple_result else out[0]

    def forward(*args):
        return f(*args), args

    def back(args, ct):
        import numpy as np
        cts = ct if tuple_result else (ct,)
        pulled = _primitive(backward, make_vmap).bind(*args, *cts)[len(fn._sig.results):] if backward else []
        grads = dict(zip(floats, pulled))
        return tuple(grads[i] if i in grads else np.zeros(np.shape(a), jax.dtypes.float0)
                     for i, a in enumerate(args))
    f.defvjp(forward, back)
    return jax_fn


def _primitive(fn, make_vmap):
    """The JAX primitive of arr Function `fn` (made once per Function)."""
    with _lock:
        prim = _primitives.get(id(fn))
        if prim is not None and prim[0] is fn:
            return prim[1]
    from jax._src import dispatch
    from jax._src.interpreters import batching, mlir
    from jax.extend.core import Primitive
    prim = Primitive(f"arr_{getattr(fn, 'label', fn.name)}")
    prim.multiple_results = True
    prim.def_impl(functools.partial(dispatch.apply_primitive, prim))
    prim.def_abstract_eval(functools.partial(_abstract, fn))
    mlir.register_lowering(prim, functools.partial(_lower, fn))
    batching.primitive_batchers[prim] = functools.partial(_batch, fn, make_vmap)
    with _lock:
        _primitives[id(fn)] = (fn, prim)
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


def _abstract(fn, *avals):
    from jax._src.core import ShapedArray
    key = tuple((tuple(a.shape), a.dtype) for a in avals)
    return [ShapedArray(shape, dtype) for shape, dtype in _result_types(fn, key)]


def _lower(fn, ctx, *args):
    from jax._src.interpreters import mlir
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import func
    platform = ctx.module_context.platforms[0]
    text = _lowered(fn, ctx.avals_in, platform).as_text()
    source = ir.Module.parse(text, context=ctx.module_context.context)
    name = mlir.merge_mlir_modules(ctx.module_context.module, f"arr_{fn.name}", source)
    call = func.CallOp([mlir.aval_to_ir_type(ctx.module_context, a) for a in ctx.avals_out],
                       ir.FlatSymbolRefAttr.get(name), list(args))
    return list(call.results)


def _batch(fn, make_vmap, args, dims):
    """jax.vmap of the primitive: arr's vmap of `fn` over the mapped arguments, the lanes first."""
    from jax._src.interpreters import batching
    in_axes = tuple(None if d is None or isinstance(d, batching.NotMapped) else d for d in dims)
    out = _primitive(_mapped(fn, make_vmap, in_axes), make_vmap).bind(*args)
    return out, [0] * len(out)


@functools.lru_cache(maxsize=None)
def _mapped(fn, make_vmap, in_axes: tuple):
    return make_vmap(fn, in_axes)
