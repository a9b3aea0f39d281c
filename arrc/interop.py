"""An arr function inside JAX (LANGUAGE.md section 18, docs/interop.md): `Function.as_jax()` is a function JAX
can trace. It binds a JAX primitive whose abstract evaluation is arr's checker (the result types of the
function lowered for the arguments' types) and whose lowering merges arr's StableHLO into JAX's module as a
private function and calls it, so XLA compiles the arr and JAX operations together (and fuses them).
For a function of float results, `jax.jvp` is arr's `jvp` with respect to its float arguments
(`jax.custom_jvp`), whose tangent primitive is linear with arr's vjp as its transpose, so `jax.grad` and
`jax.hessian` work too; otherwise (an integer result) `jax.grad`/`jax.vjp` go through `jax.custom_vjp`, with
arr's vjp as the backward pass. `jax.vmap` goes through the primitive's batching rule, arr's `vmap`
(compiler/batching.py).

A `key` parameter takes a JAX typed key array (Threefry-2x32) or its words, a uint32 `[..., 2]`
(`jax.random.PRNGKey`): the primitive's operand is the words, packed into arr's keys in the lowering; a key
result comes back as a typed key.

A function that prints or asserts, or a module with guards, has host callbacks: they are registered with the
executable JAX compiles and record what they see; the call of that executable raises it, arr's own error
(`_Raising`). Its derivatives are arr's, with their own callbacks (their prints silenced: the function's own
call prints).

One primitive, `arr`, calls every arr function: the function is its parameter `callee` (as JAX's own
`custom_jvp_call` and `jit` carry theirs), so nothing registered with JAX keeps a function alive, and what is
made for a function (its results' types, programs, vmaps, eager calls' executables) is kept on it (`_kept`):
it dies with it.
"""
from __future__ import annotations

import contextlib
import functools
import threading
import weakref

_lock = threading.Lock()


def as_jax(fn, derive, make_vmap, error: type = TypeError, spmd: bool = False, quiet: bool = False,
           origins: bool = False):
    """A JAX-traceable function computing `fn` (an arr Function, checked by the caller: arrc/api.py
    `Function.as_jax`). `derive(fn, kind)`: what makes `fn`'s "vjp" or "jvp" with respect to its float
    arguments (None without any; a jvp, None unless its results are all floats); `make_vmap(fn,
    in_axes)`: arr's vmap of a function, lanes first; `error`: what a wrong argument raises (arrc.ArgumentError).
    Its results are a tuple where `fn` returns one. `spmd`: arrc/sharding.py's, where a function with host
    callbacks (print, assert, guards) takes the run id they report to first, and the nan/inf guards at the
    results are left to the caller; otherwise its callbacks report to a run of its own, which the JAX call that
    ran them raises (`_raise_after`), its guards all checked inside the program; `quiet`: its prints print
    nothing (a derivative's: the function's own call has printed); `origins` (with `spmd`): the module's origin
    build, whose nan/inf guards report each operation that made a value reaching a result (passes/guards.py)."""
    import jax
    from jax._src import core
    callee = _callee(fn, make_vmap, origins=origins)
    tuple_result = fn._sig.tuple_result
    n, k = len(fn._sig.params), len(fn._sig.results)
    floats = [i for i, (_, t, _) in enumerate(fn._sig.params) if t.dtype.is_float]
    keys_in = [t.dtype.is_key for _, t, _ in fn._sig.params]
    keys_out = [t.dtype.is_key for t in fn._sig.results]
    # Called eagerly, its 64-bit values stay 64-bit, as in a call of `fn`: JAX's 64-bit mode is on for the call
    wide = any(t.dtype.is_64bit and not t.dtype.is_key for t in [p for _, p, _ in fn._sig.params] + fn._sig.results)

    def operands(args):     # each as a call of `fn` takes it (`_python_argument`), a key as its words, a Python
        return [_key_words(a, fn._sig.params[i][0], error) if keys_in[i] else        # scalar that jax.jit traced
                fn._traced_scalar(a, i) if _weak_scalar(a) else fn._python_argument(a, i)     # in its dtype
                for i, a in enumerate(args)]

    def jax_fn(*args, **kwargs):         # (keywords placed and defaults filled, as a call of `fn` does)
        eager = isinstance(core_trace(), core.EvalTrace)
        with jax.enable_x64(True) if eager and wide else contextlib.nullcontext():
            values = operands(fn._positional(args, kwargs))
            fn._check_operands(values, traced=not eager)
            return f(*_varying_alike(values))
    jax_fn.__signature__ = _python_signature(fn)    # (JAX's messages name the arguments by it: `x`, not `args[0]`)

    def apply(*args):
        out = [jax.random.wrap_key_data(r) if key else r
               for r, key in zip(_primitive().bind(*args, callee=callee, mesh=_mesh(),
                                                   run=None if spmd else _run_for(fn, quiet)), keys_out)]
        return tuple(out) if tuple_result else out[0]

    if spmd and (origins or has_effects(fn, spmd=True)):
        return lambda run_id, *args: apply(run_id, *operands(args))
    make_backward, make_tangent = derive(fn, "vjp"), derive(fn, "jvp")     # (each made when differentiated:
    backward = functools.lru_cache(maxsize=None)(make_backward or (lambda: None))   # its warnings, e.g. W0004, then)

    if make_tangent is not None:
        pull = functools.lru_cache(maxsize=None)(lambda: as_jax(backward(), derive, make_vmap, error, quiet=True))
        tangent = functools.lru_cache(maxsize=None)(make_tangent)

        @functools.lru_cache(maxsize=None)
        def tangents_of():              # (primals, tangents) -> tangents, differentiable again (second derivatives)
            return _Callee(tangent(), make_vmap, drop=k, pull=lambda *a: pull()(*a)[k:], primals=n)
        f = jax.custom_jvp(apply)

        @f.defjvp
        def push(primals, tangents):        # (an integer argument's tangent is JAX's float0: arr's jvp takes none)
            out = _primitive().bind(*_varying_alike([*primals, *(tangents[i] for i in floats)]),
                                    callee=tangents_of(), mesh=_mesh(), run=_run_for(tangent(), quiet=True))
            return f(*primals), tuple(out) if tuple_result else out[0]
        return jax_fn

    f = jax.custom_vjp(apply)

    def forward(*args):
        return f(*args), args

    def back(args, ct):
        import numpy as np
        cts = [c if t.dtype.is_float else       # (an integer's or key's is JAX's float0: arr's vjp ignores it)
               np.zeros(np.shape(c) + (2,), np.uint32) if t.dtype.is_key else np.zeros(np.shape(c), t.dtype.np)
               for c, t in zip(ct if tuple_result else (ct,), fn._sig.results)]
        pulled = _primitive().bind(*_varying_alike([*args, *cts]), callee=_callee(backward(), make_vmap, drop=k),
                                   mesh=_mesh(), run=_run_for(backward(), quiet=True)) if backward() else []
        grads = dict(zip(floats, pulled))
        return tuple(grads[i] if i in grads else np.zeros(np.shape(a), jax.dtypes.float0)
                     for i, a in enumerate(args))
    f.defvjp(forward, back)
    return jax_fn


def _mesh() -> tuple:
    """The (axis name, size) pairs of the mesh JAX traces under (`jax.set_mesh`; arrc/sharding.py sets it), over
    which a `shard(...)` of the function constrains its value: its Auto axes (inside `shard_map` the manual
    ones are not the partitioner's); none without one (passes/linalg.py)."""
    import jax
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty:
        return ()
    auto = jax.sharding.AxisType.Auto
    return tuple((n, s) for n, s, t in zip(mesh.axis_names, mesh.axis_sizes, mesh.axis_types) if t == auto)


def _python_signature(fn):
    """`fn`'s parameters as a Python signature (its defaults included), for JAX's messages and `static_argnames`;
    None (JAX's *args then) where a name is no Python parameter's (a Python keyword)."""
    import inspect
    try:
        return inspect.Signature([inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                    default=fn._sig.defaults[name][1] if name in fn._sig.defaults
                                                    else inspect.Parameter.empty) for name, _, _ in fn._sig.params])
    except ValueError:
        return None


def _varying_alike(operands: list) -> list:
    """The operands varying over the same manual axes of `jax.shard_map` (JAX's `pvary` of those that vary
    over fewer, as its own operations and `ffi_call` do), which `_abstract` gives the results: their
    derivatives then vary as JAX's rules expect (a `jax.grad` inside `shard_map` checks it)."""
    from jax._src import core
    return core.auto_insert_reshard(*operands)


def _key_words(a, name: str, ArgumentError: type):
    """A `key` argument as its uint32 words `[..., 2]`: a typed key array's (Threefry-2x32), or the words."""
    import jax
    from arrc.compiler.types import typed_key_data
    try:
        data = typed_key_data(a)
    except TypeError as err:
        raise ArgumentError(f"argument `{name}`: {err}") from None
    if data is not None:
        return data
    if getattr(a, "dtype", None) != jax.numpy.uint32 or not a.ndim or a.shape[-1] != 2:
        raise ArgumentError(f"argument `{name}` must be a JAX key (`jax.random.key(0)`) or key data, a uint32 "
                            f"array of shape [..., 2] (`jax.random.PRNGKey(0)`)")
    return a


def _weak_scalar(a) -> bool:
    """A Python scalar that `jax.jit` traced (weakly typed, rank 0)."""
    aval = getattr(a, "aval", None)
    return bool(getattr(aval, "weak_type", False)) and not getattr(aval, "shape", (0,))


class _Callee:
    """The primitive's parameter `callee`: arr Function `fn` without its first `drop` results, with `origins` of
    its origin build; `make_vmap` (`as_jax`) for its batching rule. A tangent's (`pull`, taking `primals`
    primals) is linear in its operands after those: its transpose `pull(primals, cotangents)` -> cotangents of
    the float primals, arr's vjp. Hashed by identity (JAX keys its caches by a primitive's parameters), shown
    in a jaxpr as the function's name."""

    def __init__(self, fn, make_vmap, drop: int = 0, origins: bool = False, pull=None, primals: int = 0):
        self._fn, self.name = (lambda: fn), fn.shown_name
        self.make_vmap, self.drop, self.origins, self.pull, self.primals = make_vmap, drop, origins, pull, primals

    @property
    def fn(self):
        return self._fn()

    def weakly(self) -> _Callee:
        """This call, referring to its function weakly: an eager call's (`_impl`)."""
        weak = _Callee.__new__(_Callee)
        weak.__dict__.update(self.__dict__, _fn=weakref.ref(self.fn), pull=None)
        return weak

    def __repr__(self) -> str:
        return self.name


def _callee(fn, make_vmap, drop: int = 0, origins: bool = False) -> _Callee:
    """The call of `fn`, one per Function (the same parameters: JAX's compiled call again)."""
    return _kept(fn, ("callee", make_vmap, drop, origins), lambda: _Callee(fn, make_vmap, drop, origins))


def _kept(fn, key, make):
    """`make()` made once for arr Function `fn` under `key`, kept on it (`Function._jax`): it dies with it."""
    kept = fn._jax
    if key not in kept:
        kept[key] = make()
    return kept[key]


def _primitive():
    """The JAX primitive of every arr function (`_Callee`), made once."""
    global _PRIMITIVE
    with _lock:
        if _PRIMITIVE is None:
            from jax._src import util
            from jax._src.interpreters import ad, batching, mlir
            from jax.extend.core import Primitive
            util.weakref_cache_key_types.add(_Callee)   # (JAX's caches keyed by parameters: as a jaxpr, weakly)
            prim = Primitive("arr")
            prim.multiple_results = True
            prim.def_impl(_impl)
            prim.def_effectful_abstract_eval(_abstract)
            mlir.register_lowering(prim, _lower)
            batching.primitive_batchers[prim] = _batch
            ad.primitive_transposes[prim] = _transpose
            _PRIMITIVE = prim
    return _PRIMITIVE


_PRIMITIVE = None


def _impl(*args, callee: _Callee, **params):
    """An eager call: JAX's `dispatch.apply_primitive`, with its compiled call kept on the function (JAX's cache
    of every primitive's would keep each, ~3 MB, after the function has gone). What it compiles calls the
    function weakly: JAX's caches, keyed (weakly) by the compiled call's function, keep its jaxpr, which must
    not keep that function alive through `fn`."""
    from jax._src import config, dispatch
    call = _kept(callee.fn, ("eager", callee, *sorted(params.items())),     # (JAX's own function, uncached)
                 lambda: dispatch.xla_primitive_callable.__wrapped__(_primitive(), callee=callee.weakly(), **params))
    prev = config.disable_jit.swap_local(False)
    try:
        return call(*args)
    finally:
        config.disable_jit.set_local(prev)


def _transpose(cts, *args, callee: _Callee, mesh: tuple, run: int | None):
    """Reverse mode of a tangent's call (`as_jax`): arr's vjp."""
    from jax._src.interpreters import ad
    if callee.pull is None:
        raise NotImplementedError(f"Transpose rule (for reverse-mode differentiation) for 'arr' of {callee} "
                                  f"not implemented: it is not a tangent")
    cts = [ad.instantiate_zeros(ct) for ct in cts]
    n = callee.primals
    return [None] * n + list(callee.pull(*args[:n], *cts))


def _arr_types(fn, shapes_dtypes) -> list:
    """What `fn.lower` takes for the primitive's operands (shape, dtype): a key parameter's is its words."""
    import jax
    from arrc.compiler.types import KEY, ArrayType, Dim
    return [ArrayType(KEY, tuple(Dim.const(int(d)) for d in shape[:-1])) if t.dtype.is_key
            else jax.ShapeDtypeStruct(shape, dtype) for (shape, dtype), (_, t, _) in zip(shapes_dtypes, fn._sig.params)]


def _program(fn, key: tuple, platform: str, mesh: tuple, spmd: bool, origins: bool) -> tuple[str, bool]:
    """`fn` lowered for the operands' (shape, dtype) `key` through the passes of a compile for `platform` (its
    guards that check inside the program, `in_program`), `shard` over `mesh`, and what a program inside JAX's
    needs written out: its text with locations (sites' lines), and whether it has host callbacks."""
    return _kept(fn, ("program", key, platform, mesh, spmd, origins),
                 lambda: _lowered_program(fn, key, platform, mesh, spmd, origins))


def _lowered_program(fn, key: tuple, platform: str, mesh: tuple, spmd: bool, origins: bool) -> tuple[str, bool]:
    from arrc.compiler import abi
    from arrc.passes.rewrite import ops_named
    from arrc.passes.spmd import ClampUpdateStarts, ReportPast, SplittableReductions
    from arrc.passes.lapack_calls import initialize_lapack
    from arrc.runtime.pipeline import apply_passes, around, passes_for, uses_lapack
    lowered = fn.lower(*_arr_types(fn, key))
    apply_passes(lowered.module, lowered.context, [ReportPast()] + around(passes_for(in_program(fn, spmd, origins)),
                                                                          platform, mesh)
                 + [ClampUpdateStarts(), SplittableReductions()], fn.sources)
    if platform == "cpu" and uses_lapack(lowered.module):   # (its lowering from the compile cache did not:
        initialize_lapack()                                 # JAX's executable would call null pointers)
    with lowered.context:
        calls = any(abi.KIND in op.attributes for op in ops_named(lowered.module, "stablehlo.custom_call"))
    return lowered.as_text(debug_info=True), calls


def _result_types(fn, key: tuple) -> list:
    """(shape, dtype, is a key) of each result, a key's shape and dtype its words'."""
    return _kept(fn, ("results", key), lambda: _lowered_result_types(fn, key))


def _lowered_result_types(fn, key: tuple) -> list:
    import numpy as np
    from arrc.compiler.optable import concrete
    return [(concrete(t.shape) + (2,), np.dtype(np.uint32), True) if t.dtype.is_key else
            (concrete(t.shape), t.dtype.np, False) for t in fn.lower(*_arr_types(fn, key)).result_types]


def _abstract(*avals, callee: _Callee, mesh: tuple, run: int | None):
    """The result types, and JAX's effect where `fn`'s program has host callbacks: JAX then neither drops a call
    whose results are unused nor runs one it should not (a branch of a `cond`). Only there: an effect sends
    every call of JAX's executable down its Python path (a guarded function with nothing to check in it, 8
    devices: ~500 us more a call)."""
    from jax._src import core
    fn, drop, origins = callee.fn, callee.drop, callee.origins
    operand = _run_operand(fn, run, origins)
    avals = avals[1:] if operand else avals
    key = tuple((tuple(a.shape), a.dtype) for a in avals)
    varying = core.standard_vma_rule(f"arr_{fn.name}", *avals)        # (`_varying_alike`)
    manual = dict(sharding=core.get_cur_mesh_sharding(), manual_axis_type=core.ManualAxisType(varying=varying)) \
        if varying else {}
    types = [core.ShapedArray(shape, dtype, **manual) for shape, dtype, _ in _result_types(fn, key)[drop:]]
    calls = (operand or run is not None) and (bool(fn.module._program.extern_functions)  # (lowered per platform)
                                              or _program(fn, key, "cpu", mesh, run is None, origins)[1])
    return types, {_effect()} if calls else set()


def _lower(ctx, *args, callee: _Callee, mesh: tuple, run: int | None):
    """arr's module of `fn` for the operands' types merged into JAX's (its host callbacks registered there) and
    called: with the run id and an io token where it has callbacks, its extra results dropped."""
    import numpy as np
    from jax._src.interpreters import mlir
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import func
    from arrc.compiler import abi, emit
    from arrc.compiler.ops_random import keys_of_words, words_of_keys
    from arrc.passes.rewrite import entry, pack_own_attributes
    fn, drop, origins = callee.fn, callee.drop, callee.origins
    platform = ctx.module_context.platforms[0]
    operand = _run_operand(fn, run, origins)
    avals = ctx.avals_in[1:] if operand else ctx.avals_in
    key = tuple((tuple(a.shape), a.dtype) for a in avals)
    source = ir.Module.parse(_program(fn, key, platform, mesh, run is None, origins)[0],
                             context=ctx.module_context.context)
    _host_callbacks(ctx, source, fn, platform, run)
    main = entry(source)
    hidden = sorted((emit.int_attr(main, a), a) for a in (abi.RUN_ARG, abi.IO_ARG) if emit.int_attr(main, a) is not None)
    types = list(ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value).results)
    pack_own_attributes(source)
    name = mlir.merge_mlir_modules(ctx.module_context.module, f"arr_{fn.name}", source)
    every = _result_types(fn, key)          # (the primitive `drop`s some)
    operands = [keys_of_words(a, tuple(v.shape[:-1])) if t.dtype.is_key else a
                for a, v, (_, t, _) in zip(args[operand:], avals, fn._sig.params)]
    for position, attr in hidden:
        if attr == abi.RUN_ARG and not operand and run is None:
            raise AssertionError(f"arrc: {fn.shown_name} has host callbacks where `has_effects` said it has none")
        operands.insert(position, args[0] if attr == abi.RUN_ARG and operand else
                        mlir.ir_constant(np.int32(run if attr == abi.RUN_ARG else 0)))
    call = func.CallOp(types, ir.FlatSymbolRefAttr.get(name), operands)     # (its extra results, e.g. io, dropped)
    return [words_of_keys(r, shape[:-1]) if key else r for r, (shape, _, key) in zip(call.results, every)][drop:]


def has_effects(fn, spmd: bool) -> bool:
    """Whether arr Function `fn` has host callbacks: it prints or asserts (or calls one that does), a derivative
    in it checks a loop's `bound=` (passes/spmd.py `ReportPast`), or its module has guards checked inside the
    program (`in_program`)."""
    return fn.name in fn.module._program.effectful or fn.checks_bounds or bool(in_program(fn, spmd).kinds)


def in_program(fn, spmd: bool, origins: bool = False):
    """The guards of `fn`'s module that check inside the program, as passes/guards.py takes them: all of them
    (`as_jax` takes nan and inf in the all-ops scope only: JAX's code reads arr's results), or for
    arrc/sharding.py all but nan and inf at the results, which it checks itself; with `origins`, its origin
    build's (all of them)."""
    from arrc.passes.guards import GuardOptions
    module = fn.module
    if origins:
        return GuardOptions(module.guard_kinds, module.guard_scope, origins=True)
    at_results = module.guard_scope == "results" and spmd
    return GuardOptions(module.guard_kinds - ({"nan", "inf"} if at_results else set()), module.guard_scope)


def _run_operand(fn, run: int | None, origins: bool = False) -> bool:
    """Whether the primitive's first operand is the run id (arrc/sharding.py's calls), not `run`, a constant."""
    return run is None and (origins or has_effects(fn, spmd=True))


def _host_callbacks(ctx, module, fn, platform: str, run: int | None) -> None:
    """arr's print/assert/guard callbacks of `module` registered with the JAX module being lowered (its
    executable keeps them, as `jax.debug.print`'s), each run once on the program's first device: a MAXIMAL
    sharding, which XLA's partitioner requires of every operation with a side effect. Reporting to `run`
    (not None), they make the executable raise what they report (`_raise_after`)."""
    import numpy as np
    from jax._src.callback import _callback_op_sharding
    from jax._src.core import ShapedArray
    from jax._src.interpreters import mlir
    from jaxlib.mlir import ir
    from arrc.compiler import abi
    from arrc.compiler.effects import BoundSite, CALLBACK_TARGET
    from arrc.passes.rewrite import attr_text, ops_named, retarget_callbacks
    from arrc.runtime.call import callback_of
    from arrc.runtime.guards import sites
    found = sites(module)
    loops = {index: site for index, site in found.items() if isinstance(site, BoundSite)}
    for op in ops_named(module, "stablehlo.custom_call"):
        if attr_text(op.attributes["call_target_name"]) != CALLBACK_TARGET["cpu"] or abi.KIND not in op.attributes:
            continue                    # (a JAX callback of an extern's is JAX's)
        index = ir.IntegerAttr(ir.DictAttr(op.attributes["backend_config"])["index"]).value
        callback = callback_of(found[index], fn.sources, loops)
        ctx.module_context.add_host_callback(callback if run is None else _Reporting(callback, run, fn))
        op.attributes["backend_config"] = ir.DictAttr.get({"index": ir.IntegerAttr.get(
            ir.IntegerType.get_unsigned(64), len(ctx.module_context.host_callbacks) - 1)})
        mlir.set_sharding(ctx.module_context, op, _callback_op_sharding(       # (JAX's, as for its callbacks)
            ctx.module_context.axis_context, None, [ShapedArray((), np.int32)]))
    retarget_callbacks(module, "gpu" if platform in ("cuda", "rocm") else platform)
    if run is not None:
        _raise_after()


def _batch(args, dims, callee: _Callee, mesh: tuple, run: int | None):
    """jax.vmap of the primitive: arr's vmap of `fn` over the mapped arguments, the lanes first; for what arr's
    vmap does not take (a derivative from Python), the primitive once per lane (`lax.map`). A result that
    no mapped argument reaches is unbatched (`_unbatched`), as JAX leaves it."""
    import jax
    from jax._src.interpreters import batching
    fn, make_vmap = callee.fn, callee.make_vmap
    in_axes = tuple(None if d is None or isinstance(d, batching.NotMapped) else d for d in dims)
    try:                # (nor a function that differentiates through a loop's `bound=`: E0216)
        mapped = None if fn.checks_bounds else _kept(fn, ("vmap", make_vmap, in_axes), lambda: make_vmap(fn, in_axes))
    except TypeError:
        mapped = None
    if mapped is not None:
        if run is not None:             # (its callbacks report to a run of their own, under its name)
            from arrc.runtime import effects
            run = _run_for(mapped, effects.runs()[run].quiet)
        out = _primitive().bind(*args, callee=_callee(mapped, make_vmap, callee.drop), mesh=mesh, run=run)
        return _unbatched(out, args, in_axes, callee, mesh, run)
    moved = [jax.numpy.moveaxis(a, d, 0) if d is not None else a for a, d in zip(args, in_axes)]

    def lane(xs):
        rows = iter(xs)
        return _primitive().bind(*(next(rows) if d is not None else a for a, d in zip(moved, in_axes)),
                                 callee=callee, mesh=mesh, run=run)
    out = jax.lax.map(lane, [a for a, d in zip(moved, in_axes) if d is not None])
    return _unbatched(list(out), args, in_axes, callee, mesh, run)


def _unbatched(out: list, args, in_axes: tuple, callee: _Callee, mesh: tuple, run: int | None):
    """`out`, every result with the lanes first, and its batch dimensions: JAX's `not_mapped` (None) for a
    result that no mapped argument reaches (the same in every lane: lane 0's), as jax.vmap of the same JAX
    code leaves it, so that `out_axes=None` takes it. Without lanes there is no lane 0: such a result is then
    `fn` called once on zeros, or left with its lanes (none) where that call would have effects (print,
    assert, guards) that no lane makes."""
    import jax
    fn = callee.fn
    lanes = [a.shape[d] for a, d in zip(args, in_axes) if d is not None][0]
    one = [(tuple(s for i, s in enumerate(a.shape) if i != d), a.dtype) for a, d in zip(args, in_axes)]
    operand = _run_operand(fn, run, callee.origins)
    batched = _batched_results(fn, tuple(one[operand:]), tuple(d is not None for d in in_axes[operand:]))
    batched = batched[callee.drop:]
    if all(batched) or not lanes and has_effects(fn, spmd=False):
        return out, [0] * len(out)
    if lanes:
        alone = [r[0] for r in out]
    else:
        alone = _primitive().bind(*(jax.numpy.zeros(*t) if d is not None else a
                                    for a, d, t in zip(args, in_axes, one)), callee=callee, mesh=mesh, run=run)
    return [r if b else a for r, a, b in zip(out, alone, batched)], [0 if b else None for b in batched]


def _batched_results(fn, key: tuple, mapped: tuple) -> list:
    """Which results of `fn`, for one lane's operands (shape, dtype) `key`, a mapped argument (`mapped`, a flag
    per parameter) reaches: compiler/batching.py `batched_results` on its lowering, once per function and
    types."""
    return _kept(fn, ("batched", key, mapped), lambda: _lowered_batched_results(fn, key, mapped))


def _lowered_batched_results(fn, key: tuple, mapped: tuple) -> list:
    from arrc.compiler import abi, emit
    from arrc.compiler.batching import batched_results
    from arrc.passes.rewrite import entry
    lowered = fn.lower(*_arr_types(fn, key))
    with lowered.context:
        main = entry(lowered.module)
        hidden = {emit.int_attr(main, a) for a in (abi.RUN_ARG, abi.IO_ARG)}    # (not a parameter: unmapped)
        block = main.regions[0].blocks[0]
        flags = iter(mapped)
        args = [False if i in hidden else next(flags) for i in range(len(block.arguments))]
        return batched_results(block, args)[:len(fn._sig.results)]


# ---- host callbacks in JAX's executables (`as_jax`) -------------------------------------------------------
# A host callback that raises makes JAX raise its own JaxRuntimeError (and again at interpreter exit). So arr's
# callbacks in a JAX executable only record what they see, in a RunState made for the trace that bound them
# (`_new_run`), and the executable's call raises it, arr's own error class, once its results are ready.
_run_locks: dict = {}               # run id -> the lock of its RunState, which serves one call at a time


def _run_for(fn, quiet: bool) -> int | None:
    """The run that the host callbacks of a call of `fn` report to, or None where it has none: one per trace
    that `jax.jit` compiles, or inside one (see `_Raising`); otherwise (a call made eagerly, a derivative JAX
    stages to transpose, a call that `jax.vmap` maps eagerly) one per function, or each eager call would make
    a run (never freed) and JAX would compile it again (~40 ms: it compiles an eager call once per
    primitive's parameters). An eager call's executable has arr's callbacks only, which never call back into
    Python code that could call `fn` again: its run is never held by a call that waits on another call of it.
    (`jax.linearize`'s function compiled by `jax.jit` keeps its tangent's shared run: a JAX callback in that
    program that called the same jvp eagerly would wait on it.)"""
    from jax._src.interpreters import partial_eval
    if not has_effects(fn, spmd=False):
        return None
    trace = core_trace()
    while trace is not None:                # (a call vmapped inside jax.jit is compiled with it)
        if isinstance(trace, partial_eval.DynamicJaxprTrace):
            return _new_run(quiet)
        trace = getattr(trace, "parent_trace", None)
    with _lock:
        return _kept(fn, ("eager run", quiet), lambda: _new_run(quiet))


def core_trace():
    """The trace JAX is binding primitives in (jax 0.10's `core.trace_ctx`)."""
    from jax._src import core
    return core.trace_ctx.trace


def _new_run(quiet: bool = False) -> int:
    """The run id of a traced call's host callbacks in JAX's executables: a RunState kept for the process;
    `quiet` (a derivative's, whose forward pass the function's own call has run): its prints print nothing."""
    from arrc.runtime import effects
    run = effects.begin(quiet)[0]
    _run_locks[run] = threading.Lock()
    return run


class _Reporting:
    """An arr host callback in a JAX executable, with the run it reports to and who reports it."""

    def __init__(self, callback, run: int, fn):
        self.callback, self.run, self.entry, self.sources = callback, run, fn.shown_name, fn.sources
        self.scope = fn.module.guard_scope

    def __call__(self, *args):
        return self.callback(*args)


class _Raising:
    """A JAX executable's call (pxla.ExecuteReplicated) that holds arr's callbacks: their runs emptied before
    it runs, and the first fault they saw raised (arr's error) when its results are ready. A run serves one
    call at a time; each trace has its own, so a call made from inside another (a JAX callback of an
    executable calling the same arr function) runs another executable, with other runs."""

    def __init__(self, call, reporting: list):
        self.call, self.reporting = call, reporting

    def __getattr__(self, name):
        return getattr(self.call, name)

    def __call__(self, *args):
        import jax
        from arrc.runtime import effects
        from arrc.runtime.guards import raise_faults
        with contextlib.ExitStack() as held:
            for run in sorted({r.run for r in self.reporting}):     # (in one order: no two calls wait on each other)
                held.enter_context(_run_locks[run])
            states = [effects.runs()[r.run] for r in self.reporting]
            for state in states:
                state.reset()
            out = self.call(*args)
            jax.block_until_ready(out)
            for r, state in zip(self.reporting, states):
                raise_faults(state, r.scope, None, r.entry, r.sources)
        return out


def _raise_after() -> None:
    """Make JAX's executables that hold arr's callbacks `_Raising` (once per process): the call of an
    executable is what `UnloadedMeshExecutable.build_unsafe_call` builds (jax 0.10)."""
    from jax._src.interpreters import pxla
    build = pxla.UnloadedMeshExecutable.build_unsafe_call
    if getattr(build, "arrc", False):
        return

    def build_unsafe_call(self):
        call = build(self)
        reporting = list({id(c): c for c in self.host_callbacks if isinstance(c, _Reporting)}.values())
        return _Raising(call, reporting) if reporting else call
    build_unsafe_call.arrc = True
    pxla.UnloadedMeshExecutable.build_unsafe_call = build_unsafe_call


def _effect():
    """JAX's effect of an arr function with host callbacks (made once, registered as `jax.debug.print`'s)."""
    global _EFFECT
    if _EFFECT is None:
        from jax._src import effects

        class ArrHostCallbacks(effects.Effect):
            __str__ = lambda self: "arr host callbacks"     # noqa: E731
        for kind in (effects.lowerable_effects, effects.control_flow_allowed_effects, effects.remat_allowed_effects,
                     effects.custom_derivatives_allowed_effects, effects.partial_eval_kept_effects):
            kind.add_type(ArrHostCallbacks)
        _EFFECT = ArrHostCallbacks()
    return _EFFECT


_EFFECT = None
