"""`lower-linalg`: each linear-algebra placeholder (`stablehlo.custom_call @arrc.linalg`, compiler/ops_linalg.py)
becomes a call of JAX's own lowering of the same `jax.numpy.linalg` call for the module's PJRT platform
(`cpu`: jaxlib's LAPACK kernels, `cuda`: cuSOLVER, `rocm`: hipSOLVER, `tpu`: XLA's), merged into the module
as private functions. Writing those custom calls by hand would repeat what JAX does well, and get wrong
what it gets right (workspace sizes, batch layouts, the NaN JAX returns where a factorization fails).

A placeholder differentiated k times (abi.LINALG_DERIVATIVE, made by compiler/autodiff.py) is JAX's
`jax.vjp` applied k times to the function: its operands are the primal operands and then the cotangents of
the float results, its results the cotangents of the operands. JAX's lowering recomputes the forward
factorization inside; XLA removes what it can share.

JAX is imported only when a module has a placeholder (`arrc check` and a module without linear algebra never
import it); the lowering of each call (operation, parameters, types, platform) is made once per process.
"""
from __future__ import annotations

import contextlib
import functools
import json
import math
import threading
from dataclasses import dataclass
from typing import ClassVar

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func

from ..compiler import abi, emit
from ..compiler.cache import cached_text
from ..compiler.diagnostics import Diagnostic, Label, first_line, internal_error
from ..compiler.locations import span_of
from ..compiler.ops_linalg import (EXTERN, LIVE, SHARD, STOP_GRADIENT, extern_callable, extern_function, is_exported,
                                   is_linalg, linalg_call)
from .base import ModulePass
from .lapack_calls import initialize_lapack
from ..compiler.walk import walk_ops

_lowered: dict = {}
_lock = threading.Lock()


@dataclass
class LowerLinalg(ModulePass):
    name: ClassVar[str] = "lower-linalg"
    platform: str = "cpu"
    externs_only: bool = False      # only the calls of `extern def`s (before the guard pass, which sees their ops)
    lane_loops: bool = False        # an extern under arr's vmap runs its lanes one by one (`lax.map`), in a loop
                                    # marked as vmap's: a guard report names the lane, and the index inside it
    mesh: tuple = ()                # (axis name, size) pairs: `shard` constrains over it; without, it goes

    def apply(self, module: ir.Module) -> list:
        calls = []

        def visit(op):      # (the name first: a call of is_linalg for each of a module's ops cost 5 ms in 8,000)
            if op.name == "stablehlo.custom_call" and is_linalg(op) and \
                    (not self.externs_only or linalg_call(op)[0] == EXTERN):
                calls.append(op.operation)
            return ir.WalkResult.ADVANCE
        walk_ops(module.operation, visit)
        problem = _branch_layouts([c for c in calls if linalg_call(c)[0] == SHARD]) if self.mesh else None
        if problem is not None:
            return [problem]
        # (taken out of `calls` before they are erased: comparing an erased op with another raises)
        stops, shards = ([c for c in calls if linalg_call(c)[0] == name] for name in (STOP_GRADIENT, SHARD))
        calls = [c for c in calls if linalg_call(c)[0] not in (STOP_GRADIENT, SHARD)]
        for call in stops:
            call.results[0].replace_all_uses_with(call.operands[0])         # (its derivative is taken)
            call.erase()
        for call in shards:
            problem = _constrain(call, self.mesh)
            if problem is not None:
                return [problem]
        if not calls:
            return []
        from jaxlib.mlir.dialects import sdy
        sdy.register_dialect(ir.Context.current)   # JAX's custom calls carry Shardy rules: loaded before parsing
        merged: dict = {}
        for call in calls:
            lane_loops = self.lane_loops and bool(linalg_call(call)[1].get("lanes"))    # (else one lowering
            key = (*_key(call), self.platform, lane_loops)                              # serves both builds)
            callee = merged.get(key)
            if callee is None:
                try:
                    text = _lowering(key)
                except Exception as err:        # noqa: BLE001 - JAX refuses the call: a diagnostic at it
                    return [_refused(call, key, err)]
                kind = "extern" if self.externs_only else "linalg"      # (both passes merge into one module)
                callee = merged[key] = _merge(module, text, f"{kind}_{len(merged)}_", key[0] == EXTERN)
                if lane_loops:
                    _mark_lane_loops(module, callee, linalg_call(call)[1]["lanes"])
            with ir.InsertionPoint(call), call.location:
                done = func.CallOp([r.type for r in call.results], ir.FlatSymbolRefAttr.get(callee), list(call.operands))
            if key[0] == EXTERN:
                done.attributes[abi.EXTERN_CALL] = ir.BoolAttr.get(True)
            for old, new in zip(call.results, done.results):
                old.replace_all_uses_with(new)
            call.erase()
        return []


def _constrain(call, mesh: tuple) -> Diagnostic | None:
    """A `shard` placeholder made Shardy's constraint over `mesh` (its mesh inline, as JAX builds one), or
    dropped without a mesh; E0204 where the mesh lacks an axis it names or does not divide its dimension."""
    x, sizes = call.operands[0], dict(mesh)
    if mesh:
        from jaxlib.mlir.dialects import sdy
        axes = _axes(call)
        named = [n for names in axes for n in names]
        shape = "(" + ", ".join(f"{n}={s}" for n, s in mesh) + ")"
        for n in named:
            if n not in sizes or named.count(n) > 1:
                why = f"is not an axis of the mesh {shape}" if n not in sizes else "splits two dimensions"
                return Diagnostic("E0204", f"`shard`: mesh axis `{n}` {why}", span_of(call.location), f"`{n}` here")
        lanes = len(linalg_call(call)[1].get("lanes", []))      # (vmap's, first: not the written value's)
        for dim, names in enumerate(axes):
            size, ways = ir.RankedTensorType(x.type).shape[dim], math.prod(sizes[n] for n in names)
            if size % ways:
                return Diagnostic("E0204", f"`shard`: dimension {dim - lanes} has size {size}, which "
                                  f"{' x '.join(names)} ({ways} devices) does not divide", span_of(call.location),
                                  f"dimension {dim - lanes} over {ways} devices")
        sdy.register_dialect(ir.Context.current)    # (before building its attributes)
        sharding = sdy.TensorShardingAttr.get(
            sdy.MeshAttr.get([sdy.MeshAxisAttr.get(n, s) for n, s in mesh]),
            [sdy.DimensionShardingAttr.get([sdy.AxisRefAttr.get(n) for n in names], is_closed=True) for names in axes],
            replicated_axes=[], unreduced_axes=[])
        with ir.InsertionPoint(call), call.location:
            x = sdy.ShardingConstraintOp(x, sharding).result
    call.results[0].replace_all_uses_with(x)
    call.erase()
    return None


def _axes(call) -> list:
    """The mesh axes a `shard` placeholder splits each dimension over (none: not split)."""
    return [[] if part is None else [part] if isinstance(part, str) else list(part)
            for part in linalg_call(call)[1]["axes"]]


def _branch_layouts(shards: list) -> Diagnostic | None:
    """E0204 where branches of a run-time `if` end in `shard`s (of `shards`, the module's) of the same value
    with different layouts: XLA's verifier refuses such a conditional ("Inconsistent conditional sharding";
    JAX's too), where a `shard` that is not the branch's last operation on the value is partitioned as any."""
    conditionals = list(dict.fromkeys(call.parent for call in shards if call.parent is not None
                                      and call.parent.name in ("stablehlo.if", "stablehlo.case")))
    for cond in conditionals:
        first: dict = {}            # result index -> the first branch's `shard` that makes it
        for region in cond.regions:
            ops = region.blocks[0].operations
            for k, value in enumerate(ops[len(ops) - 1].operands):
                made = value.owner
                if isinstance(made, ir.Block) or not is_linalg(made) or linalg_call(made)[0] != SHARD \
                        or made.operation.parent != cond:
                    continue
                other = first.setdefault(k, made)
                if _axes(other) != _axes(made):
                    return Diagnostic(
                        "E0204", "`shard`: the branches of an `if` end in different layouts of the same value",
                        span_of(made.location), f"split as {_layout(made)} here",
                        labels=[Label(span_of(other.location), f"split as {_layout(other)} here")],
                        notes=["XLA cannot partition a conditional whose branches end in different layouts"],
                        help="`shard` the value after the `if`, or in one branch only")
    return None


def _layout(call) -> str:
    """A `shard`'s layout as written: `("data", None)`."""
    def part(p):
        return "None" if p is None else f'"{p}"' if isinstance(p, str) else "(" + ", ".join(f'"{n}"' for n in p) + ")"
    return "(" + ", ".join(part(p) for p in linalg_call(call)[1]["axes"]) + ")"


def _refused(call, key: tuple, err: Exception) -> Diagnostic:
    """JAX's refusal to lower (or differentiate) a call, as arr's diagnostic at the call."""
    name, derivative, reason = key[0], key[2], first_line(err)
    if name == EXTERN:
        label = json.loads(key[1])["name"]
        what = "differentiate" if derivative else "lower"
        return Diagnostic("E0216" if derivative else "E0203", f"JAX could not {what} the extern `{label}` here: "
                          f"{reason}", span_of(call.location), f"this call of `{label}`")
    if derivative:
        return Diagnostic("E0216", f"cannot differentiate `{name}` here: {reason}", span_of(call.location),
                          f"the derivative of this `{name}`", notes=["JAX has no derivative for it either"],
                          help="use `svd(a, full_matrices=false)`: JAX differentiates that" if name == "svd" else None)
    return internal_error(RuntimeError(f"JAX could not lower `{name}` for {key[-2]}: {reason}"))


def _key(call) -> tuple:
    name, params, derivative = linalg_call(call)
    return name, json.dumps(params, sort_keys=True), derivative, tuple(str(o.type) for o in call.operands)


def _lowering(key: tuple) -> str:
    """JAX's StableHLO text for the call `key` describes: made once per process, and kept in the compile
    cache's directory for the next ones, with this file's digest (its recipe: `jax_function`). Not an extern's,
    which depends on the user's Python function."""
    with _lock:
        text = _lowered.get(key)
        if text is None:
            make = functools.partial(_lower_with_jax, *key)
            text = _lowered[key] = make() if key[0] == EXTERN else cached_text(".linalg", (*key, _recipe()), make)
        return text


@functools.cache
def _recipe() -> str:
    """The digest of this file, whose `jax_function` says which JAX function lowers each call."""
    import hashlib
    return hashlib.sha256(open(__file__, "rb").read()).hexdigest()


def _lower_with_jax(name: str, params: str, derivative: int, operand_types: tuple, platform: str,
                    lane_loops: bool = False) -> str:
    import jax
    import jax.numpy as jnp
    avals = [jax.ShapeDtypeStruct(*_shape_dtype(t)) for t in operand_types]
    if platform == "cpu":       # (before JAX's lowering does: ours leaves scipy.linalg unimported)
        initialize_lapack()
    with jax.enable_x64(True), _own_source_info():
        p = json.loads(params)
        fn, n = jax_function(name, p, lane_loops), p["arity"] if name == EXTERN else _arity(name)
        levels = p.get(LIVE, [None] * derivative)
        for live in levels:         # the next one's operands: these, then the live float results' cotangents
            floats = sum(jnp.issubdtype(r.dtype, jnp.floating) for r in jax.eval_shape(fn, *avals[:n]))
            live = list(range(floats)) if live is None else live
            fn, n = _vjp_of(fn, n, live), n + len(live)
        assert n == len(avals), (name, derivative, operand_types)
        return _module_text(jax.make_jaxpr(fn)(*avals), platform, locations=name == EXTERN)


@contextlib.contextmanager
def _own_source_info():
    """JAX's source-info context of a trace of its own, where each op takes its own Python line (an extern's:
    its report's location). Lowered while JAX lowers an arr call (as_jax, `sharded`), JAX's context is that
    call's, whose traceback every op traced in it takes: arrc's own line, kept in `_lowered` for the process.
    (jax 0.10's `_source_info_context`: `user_context(None)` keeps the traceback it would replace.)"""
    from jax._src import source_info_util
    held = source_info_util._source_info_context.context
    source_info_util._source_info_context.context = source_info_util.new_source_info()
    try:
        yield
    finally:
        source_info_util._source_info_context.context = held


def _module_text(jaxpr, platform: str, locations: bool = False) -> str:
    """JAX's StableHLO of `jaxpr` for `platform`, lowered without a PJRT client: `jax.jit(...).lower` would
    start one (~0.1 s, and `arrc compile` runs no program); every argument is kept, as keep_unused does.
    With `locations`, JAX's (the Python file and line of each op)."""
    from jax._src import sharding_impls
    from jax._src.interpreters import mlir
    lowered = mlir.lower_jaxpr_to_module(
        "linalg", jaxpr, num_const_args=0, in_avals=jaxpr.in_avals, ordered_effects=[], platforms=[platform],
        backend=None, axis_context=sharding_impls.ShardingContext(1), donated_args=[False] * len(jaxpr.in_avals),
        lowering_parameters=mlir.LoweringParameters())
    if lowered.host_callbacks:      # (their indices name this lowering's list, which no executable of arr's has)
        raise ValueError("it calls back into Python (jax.debug.print, jax.pure_callback, io_callback, or an arr "
                         "function's print, assert or guards under as_jax), which an arr program cannot run inside "
                         "an extern; remove the callback from the function given as the extern")
    module = lowered.module
    if lowered.shape_poly_state.uses_dim_vars:      # an Exported with symbolic dimensions: made static, as
        module = mlir.refine_polymorphic_shapes(module)     # jax.jit's compile does for these operand types
    if locations:
        return module.operation.get_asm(enable_debug_info=True)
    return str(module)


def _arity(name: str) -> int:
    return 2 if name in ("solve", "triangular_solve", "lstsq", "lapack_trsm") else 1


def jax_function(name: str, p: dict, lane_loops: bool = False):
    """The jax.numpy function arr's operation `name` with parameters `p` is, returning a tuple of arrays."""
    import jax
    if name == EXTERN:                  # (under arr's vmap, every operand has the lanes: one level each)
        function = extern_function(p["key"])
        fn = extern_callable(function, p["keys"])
        exported = is_exported(function)        # (JAX's call of one has no batching rule)
        for _ in p.get("lanes", []):
            fn = _lane_by_lane(fn) if lane_loops or exported else jax.vmap(fn)
        return fn
    import jax.numpy as jnp
    import jax.scipy.linalg as jsl
    from jax import lax
    linalg = jnp.linalg
    table = {
        "solve": linalg.solve,
        "inv": linalg.inv,
        "det": linalg.det,
        "slogdet": linalg.slogdet,
        "cholesky": lambda a: linalg.cholesky(a, upper=p["upper"]),
        "qr": lambda a: linalg.qr(a, mode=p["mode"]),
        "eigh": lambda a: linalg.eigh(a, UPLO=p["UPLO"], symmetrize_input=p["symmetrize_input"]),
        "svd": _finite_or_nan(lambda a: linalg.svd(a, full_matrices=p["full_matrices"], compute_uv=p["compute_uv"])),
        "lu": jnp.vectorize(jsl.lu, signature="(m,n)->(m,m),(m,k),(k,n)"),      # (batches: jsl.lu has none)
        "triangular_solve": lambda a, b: jsl.solve_triangular(*_matrix_batches(a, b), trans=p["trans"],
                                                              lower=p["lower"], unit_diagonal=p["unit_diagonal"]),
        "lstsq": _finite_or_nan(lambda a, b: linalg.lstsq(a, b, rcond=p["rcond"])),
        "pinv": _finite_or_nan(lambda a: linalg.pinv(a, rtol=p["rtol"], hermitian=p["hermitian"])),
        "norm": lambda x: _norm(x, p["ord"], tuple(p["axis"]) if isinstance(p["axis"], list) else p["axis"],
                                p["keepdims"]),
        # jaxlib's LAPACK kernels in a module from elsewhere (compiler/ops_linalg.py `lapack_kernel`): the
        # primitive each computes, differentiated by JAX's rule on the whole matrix as jax.grad does
        # (`cho_factor` does not symmetrize); the triangle potrf leaves alone passes through it.
        "lapack_trsm": lambda a, b: lax.linalg.triangular_solve(a, b, **p),
        "lapack_getrf": lambda a: lax.linalg.lu(a)[0],
        "lapack_potrf": lambda a: jnp.tril(lax.linalg.cholesky(a, symmetrize_input=False)) + jnp.triu(a, 1)
        if p["lower"] else jnp.triu(_mt(lax.linalg.cholesky(_mt(a), symmetrize_input=False))) + jnp.tril(a, -1),
        "lapack_syevd": lambda a: lax.linalg.eigh(a, lower=p["lower"], symmetrize_input=False),
    }
    fn = table[name]
    return lambda *args: tuple(jax.tree.leaves(fn(*args)))


def _mt(a):
    import jax.numpy as jnp
    return jnp.swapaxes(a, -1, -2)


def _finite_or_nan(fn):
    """`fn`, whose first operand `a` is a batch of matrices it takes the SVD of, safe from LAPACK's: `gesdd`
    never returns for some matrices holding an infinity (Reference-LAPACK lapack#1409, with reference LAPACK
    and OpenBLAS alike; NumPy checks first and raises). Each matrix holding a non-finite element is replaced by
    zeros, and `fn`'s float results for it are NaN, what the SVD gives where it returns."""
    import jax
    import jax.numpy as jnp

    def safe(a, *rest):
        finite = jnp.isfinite(a).all(axis=(-2, -1))
        out = fn(jnp.where(finite[..., None, None], a, jnp.zeros_like(a)), *rest)
        return jax.tree.map(lambda r: _nan_where_not(finite, r), out)
    return safe


def _nan_where_not(finite, r):
    """`r` (a result of a batch of matrices whose batch `finite` marks), NaN in the lanes `finite` does not mark;
    an integer result (lstsq's rank) as it is."""
    import jax.numpy as jnp
    if not jnp.issubdtype(r.dtype, jnp.inexact):
        return r
    return jnp.where(finite.reshape(finite.shape + (1,) * (r.ndim - finite.ndim)), r, jnp.nan)


def _norm(x, ord, axis, keepdims: bool):
    """jnp.linalg.norm; its SVD-based matrix norms (ord 2, -2, "nuc") as `_finite_or_nan` makes them, on the
    matrices' axes moved last (as jnp's `_multi_svd_norm` moves them)."""
    import jax.numpy as jnp
    pair = axis if isinstance(axis, tuple) and len(axis) == 2 else (0, 1) if axis is None and x.ndim == 2 else None
    if ord not in (2, -2, "nuc") or pair is None:
        return jnp.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)
    out = _finite_or_nan(lambda m: jnp.linalg.norm(m, ord=ord, axis=(-2, -1)))(jnp.moveaxis(x, pair, (-2, -1)))
    return jnp.expand_dims(out, sorted(a % x.ndim for a in pair)) if keepdims else out


def _matrix_batches(a, b):
    """`a` and a `b` of rank 2 or more broadcast to one batch: arr reads such a `b` as a batch of matrices, as
    NumPy 2 and `solve` do (compiler/ops_linalg.py `_system`), where JAX 0.10's `solve_triangular` reads a `b`
    of one dimension fewer than `a` as a batch of vectors when their last dimensions are equal."""
    import jax.numpy as jnp
    if b.ndim < 2:
        return a, b
    batch = jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return jnp.broadcast_to(a, batch + a.shape[-2:]), jnp.broadcast_to(b, batch + b.shape[-2:])


def _lane_by_lane(fn):
    import jax
    return lambda *args: jax.lax.map(lambda lane: fn(*lane), args)


def _mark_lane_loops(module: ir.Module, callee: str, labels: list) -> None:
    """Mark the loops `_lane_by_lane` made in the merged function `callee` (the outermost `while` of its
    body, then the outermost of that one's body, one per vmap level) as vmap's lane loops."""
    body = next(op for op in module.body.operations
                if ir.StringAttr(op.attributes["sym_name"]).value == callee).regions[0].blocks[0]
    for label in labels:
        loop = next((op for op in body.operations if op.operation.name == "stablehlo.while"), None)
        if loop is None:                # (no lanes: lax.map of nothing makes no loop)
            return
        loop.operation.attributes[abi.LANES] = ir.StringAttr.get(label)
        body = loop.operation.regions[1].blocks[0]


def _vjp_of(fn, n: int, live: list):
    """(fn's `n` arguments..., cotangents of its float results numbered `live`...) -> the cotangents of its
    arguments. The other float results are dropped before the vjp, as JAX drops a symbolic zero's path."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    def kept(*args):
        results = fn(*args)
        floats = [i for i, r in enumerate(results) if jnp.issubdtype(r.dtype, jnp.floating)]
        dead = {floats[i] for i in range(len(floats)) if i not in live}
        return tuple(r for i, r in enumerate(results) if i not in dead)

    def pulled(*args):
        cts = list(args[n:])
        results, pull = jax.vjp(kept, *args[:n])
        full = tuple(cts.pop(0) if jnp.issubdtype(r.dtype, jnp.floating) else np.zeros(r.shape, jax.dtypes.float0)
                     for r in results)
        return tuple(jnp.zeros(a.shape, a.dtype) if g.dtype == jax.dtypes.float0 else g     # (an integer's: 0)
                     for g, a in zip(pull(full), args[:n]))
    return pulled


def _shape_dtype(type_text: str):
    t = ir.Type.parse(type_text)
    return tuple(ir.RankedTensorType(t).shape), emit.element_dtype(t).np


def _merge(module: ir.Module, text: str, prefix: str, flat: bool = False) -> str:
    """Parse JAX's module `text` into `module`'s context, rename its functions with `prefix` (private), move
    them into `module`; returns the name of its entry. `flat`: with JAX's own calls inlined first (an
    extern's: its ops, inlined at the arr call, then all take that call site, passes/rewrite.py)."""
    jax_module = ir.Module.parse(text)
    if flat:
        from .rewrite import inline_calls
        inline_calls(jax_module)
    names = [ir.StringAttr(f.attributes["sym_name"]).value for f in jax_module.body.operations]
    entry = None
    for old in names:
        new = prefix + old
        ir.SymbolTable.replace_all_symbol_uses(old, new, jax_module.operation)
        if old == "main":
            entry = new
    def ends(op):        # JAX's loops there are fori_loops: they end, so calls keep the runtime's fast path
        if op.operation.name == "stablehlo.while" and abi.TRIP_COUNT not in op.operation.attributes:
            emit.set_int_attr(op.operation, abi.TRIP_COUNT, -1)
        return ir.WalkResult.ADVANCE
    walk_ops(jax_module.operation, ends)
    for fop in list(jax_module.body.operations):
        fop = fop.operation
        fop.attributes["sym_name"] = ir.StringAttr.get(prefix + ir.StringAttr(fop.attributes["sym_name"]).value)
        fop.attributes["sym_visibility"] = ir.StringAttr.get("private")
        fop.detach_from_parent()
        module.body.append(fop)
    return entry
