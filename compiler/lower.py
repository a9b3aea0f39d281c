"""Specialization and lowering: a checked Program plus concrete argument types -> a StableHLO module."""
from __future__ import annotations

import sys
import threading
from contextlib import nullcontext

import numpy as np
from jaxlib.mlir import ir

from . import abi
from . import effects, emit
from .ast import WRAPPER_PREFIX
from .autodiff import jvp, value_and_grad
from .batching import vmap_function
from .check import FunctionWalk, unify
from .control import IO
from .diagnostics import CompileError, Diagnostic, Label, Reporter, first_line
from .emit import func, hlo
from .types import I32, ArrayType
from .values import Val


MAX_INLINED_CALLS = 20_000
MAX_CALL_DEPTH = 1_000
_NO_LOCATION = nullcontext()
_name_location, _file_location = ir.Location.name, ir.Location.file


class Lowered:
    """A lowered entry point: the MLIR module and the types at its boundary."""

    def __init__(self, module: ir.Module, context: ir.Context, arg_types: list, result_types: list,
                 tuple_result: bool, warnings: list, effect_sites: list | None = None):
        self.module = module
        self.effect_sites = effect_sites or []     # non-empty: the entry takes (run id, io) first, returns io last
        self.context = context
        self.arg_types = arg_types
        self.result_types = result_types
        self.tuple_result = tuple_result
        self.warnings = warnings
        self.compile_for_types = None   # what `compile()` calls: set by arrc's `Function.lower`

    def compile(self):
        """The program compiled for these argument types, as `jax.jit(f).lower(x).compile()` (an
        `arrc.Compiled`: a call with other types is a TypeError)."""
        if self.compile_for_types is None:
            raise TypeError("only a module lowered by an arrc function's `lower(...)` can be compiled")
        return self.compile_for_types()

    def as_text(self, debug_info: bool = False) -> str:
        """StableHLO text; `debug_info=True` keeps the source locations (off by default, as JAX's
        `Lowered.as_text()`: printing them costs as much as a third of the front end on long programs)."""
        with self.context:
            return self.module.operation.get_asm(enable_debug_info=bool(debug_info))

    def as_bytecode(self) -> bytes:
        import io
        buf = io.BytesIO()
        with self.context:
            self.module.operation.write_bytecode(buf)
        return buf.getvalue()


class ModuleLowering:
    """Builds one StableHLO module with a single public `@main` for an entry point.

    Calls between arr functions are inlined while lowering (each call site walks the callee with its
    concrete types), so every operation carries a call-site location: a guard report can name the chain.
    """

    def __init__(self, program, context: ir.Context | None = None, at_definition: bool = False):
        self.program = program
        self.context = context or emit.make_context()
        self.reporter = Reporter()
        self.effect_sites: list = []
        self.call_sites: list = []          # file locations of the active calls, innermost last
        self.active: list = []              # names of the functions being walked, the entry first
        self.entry_calls: list = []         # (callee, span) of the entry's own calls
        self.inlined = 0                    # calls inlined so far (bounded: a call tree can grow exponentially)
        self.at_definition = at_definition  # lowering in place of the check walk: see `lower_at_definition`

    def lower(self, entry: str, arg_types: list[ArrayType]) -> Lowered:
        sig = self.program.signatures[entry]
        self._check_sizes(entry, sig, arg_types)
        with self.context, ir.Location.unknown():
            self.module = ir.Module.create()
            params = [Val(t) for t in arg_types]
            env = unify(sig, params, [s for _, _, s in sig.params], None)
            bindings = {k: v.value for k, v in env.items()}
            self._check_results(sig, bindings)
            self._entry(entry, arg_types, bindings)
            if self.reporter.errors:
                raise CompileError(self.reporter.diagnostics, self.program.sources)
            self.module.operation.verify()
        results = [t.subs(bindings) for t in sig.results]
        return Lowered(self.module, self.context, arg_types, results, sig.tuple_result,
                       list(self.program.warnings), self.effect_sites if entry in self.program.effectful else [])

    def _check_sizes(self, entry: str, sig, arg_types: list) -> None:
        """Parameter types from `--shape n=...` can be too large to ever exist: say so before lowering."""
        from .types import too_large
        for (name, _, span), t in zip(sig.params, arg_types):
            problem = too_large(t)
            if problem:
                raise CompileError([Diagnostic("E0215", f"array too large: {problem}", span,
                                               f"`{name}` is {t}")],
                                   self.program.sources)

    def _check_results(self, sig, bindings: dict) -> None:
        """A result type whose dimension is negative for these sizes (`f32[n - 3]` with n = 2) cannot exist:
        E0205 at it, before MLIR is asked for such a type."""
        for t, span in zip(sig.results, sig.result_spans):
            shape = t.subs(bindings).concrete_shape
            if any(d < 0 for d in shape):
                used = set().union(*(d.variables for d in t.shape))
                sizes = ", ".join(f"{k} = {v}" for k, v in sorted(bindings.items()) if k in used)
                raise CompileError([Diagnostic("E0205", f"negative dimension in the result type {t}", span,
                                               f"{t} is [{', '.join(map(str, shape))}] here",
                                               notes=[f"for {sizes}" if sizes else "for these argument sizes"],
                                               help="a size is never negative: call it with larger arguments, "
                                                    "or write the result's size so that it cannot be")],
                                   self.program.sources)

    def _entry(self, name: str, arg_types: list, bindings: dict) -> None:
        sig = self.program.signatures[name]
        fn_ast = self.program.functions[name]
        results = [t.subs(bindings) for t in sig.results]
        in_types = [emit.tensor_type(t.concrete_shape, t.dtype) for t in arg_types]
        out_types = [emit.tensor_type(t.concrete_shape, t.dtype) for t in results]
        arg_locs = [ir.Location.name(pname, childLoc=self._file_loc(span)) for pname, _, span in sig.params]
        effectful = name in self.program.effectful
        # A function that checks a loop's bound in a derivative returns the first run past one (PAST); one
        # with effects reports it at once instead (`derivative`).
        checks = name in self.program.checks_bounds and not effectful
        if checks:
            out_types = out_types + [effects.past_type()]
        if effectful:
            io_type = emit.tensor_type((), I32)
            in_types, out_types = [io_type, io_type] + in_types, out_types + [io_type]
            arg_locs = [ir.Location.name(n, childLoc=self._file_loc(fn_ast.name_span)) for n in (effects.RUN, IO)] \
                + arg_locs
        with ir.InsertionPoint(self.module.body), self.location(fn_ast.name_span, name):
            fop = func.FuncOp("main", ir.FunctionType.get(in_types, out_types))
            fop.attributes["sym_visibility"] = ir.StringAttr.get("public")
            fop.attributes[abi.ENTRY] = ir.StringAttr.get(name)
            if effectful:       # the calling convention of effects; see passes/rewrite.py for the names
                i64 = ir.IntegerType.get_signless(64)
                fop.attributes[abi.RUN_ARG] = ir.IntegerAttr.get(i64, 0)
                fop.attributes[abi.IO_ARG] = ir.IntegerAttr.get(i64, 1)
                fop.attributes[abi.EXTRA_RESULTS] = ir.IntegerAttr.get(i64, 1)
            if checks:
                emit.set_int_attr(fop, abi.EXTRA_RESULTS, 1)
                emit.set_int_attr(fop, abi.BOUND_RESULT, len(out_types) - 1)
            block = fop.body.blocks.append(*in_types, arg_locs=arg_locs)
        if fn_ast.extern:           # `vmap(f)` of an `extern def` f: its JAX function on the parameters
            with ir.InsertionPoint(block), self.location(fn_ast.name_span, name):
                func.ReturnOp(FunctionLowering(self).extern(name, list(block.arguments), arg_types, fn_ast.name_span))
            return
        walk = FunctionWalk(self.program, fn_ast, self.reporter, FunctionLowering(self), bindings)
        self.active, self.entry_calls = [name], walk.calls
        args = list(block.arguments)
        if effectful:
            walk.env[effects.RUN] = Val(ArrayType(I32, ()), args[0])
            walk.env[IO] = Val(ArrayType(I32, ()), args[1])
            args = args[2:]
        with ir.InsertionPoint(block):
            if checks:
                walk.env[effects.PAST] = Val(effects.PAST_TYPE, effects.no_past())
            returned = walk.run([Val(t, arg) for t, arg in zip(arg_types, args)])
            self._raise_if_failed(returned)
            with self.location(fn_ast.body[-1].span, "return"):
                outs = [r.ir for r in returned]
                if checks:
                    outs.append(walk.materialize(walk.env[effects.PAST]))
                if effectful:
                    outs.append(walk.materialize(walk.env[IO]))
                func.ReturnOp(outs)

    def _raise_if_failed(self, returned) -> None:
        if self.reporter.errors or returned is None or any(not isinstance(r, Val) for r in returned):
            raise CompileError(self.reporter.diagnostics or [], self.program.sources)

    def _file_loc(self, span) -> ir.Location:
        return ir.Location.file(span.file, span.line, span.col, span.end_line, span.end_col)

    def location(self, span, what: str):
        """The location for the ops of `what` at `span`, inside the active calls: enter it with `with`
        (a plain `with` exits it even on KeyboardInterrupt, so the context's location stack stays balanced)."""
        if span is None:
            return _NO_LOCATION
        loc = _name_location(what, _file_location(span.file, span.line, span.col, span.end_line,
                                                  span.end_col))   # (`_file_loc`, inline: once an op)
        if self.call_sites:
            for caller in reversed(self.call_sites):
                loc = ir.Location.callsite(loc, [caller])
        return loc


class FunctionLowering:
    """What a FunctionWalk needs from the module being built."""

    def extern(self, name: str, args: list, param_types: list, span) -> list:
        """A call of `extern def name`: its JAX function (`Program.extern_functions`) checked against the
        declaration for these concrete types, and called through a placeholder that passes/linalg.py
        replaces by JAX's lowering of the function (so autodiff differentiates it as JAX does)."""
        program = self.m.program
        fn, sig = program.functions[name], program.signatures[name]
        env = unify(sig, [Val(t) for t in param_types], [s for _, _, s in sig.params], span)
        results = [t.subs({k: v.value for k, v in env.items()}) for t in sig.results]
        function = program.extern_functions.get(name)

        def error(code, message, at, label, labels=(), help=None):
            raise CompileError([Diagnostic(code, message, at, label, list(labels), help=help)], program.sources)
        if function is None:
            error("E0101", f"extern `{name}` has no function", fn.name_span, "declared here, supplied by nobody",
                  [Label(span, "called here")],
                  help=f"give it from Python: `arrc.load(path, externs={{\"{name}\": jax_function}})` "
                       "(a JAX function or a jax.export.Exported); the command line cannot supply one")
        import jax
        from .ops_linalg import EXTERN, extern_results, linalg_op, register_extern
        arguments = ", ".join(str(t) for t in param_types)
        try:
            found = extern_results(function, param_types)
        except Exception as err:        # noqa: BLE001 - the user's JAX function fails on these types
            error("E0203", f"the JAX function of extern `{name}` fails on ({arguments}): {first_line(err)}", span,
                  "called here", [Label(fn.name_span, "declared here")])
        if found != [(tuple(t.concrete_shape), t.dtype.name) for t in results]:
            gives = ", ".join(_type_text(s, d) for s, d in found)
            wanted = ", ".join(str(t) for t in results)
            error("E0203", f"extern `{name}` is declared to return {wanted} here; its JAX function returns {gives}",
                  fn.results[0].span if len(fn.results) == 1 else fn.name_span, f"declared {wanted} for "
                  f"({arguments})", [Label(span, f"called with ({arguments})")],
                  help="change the declaration to what the JAX function returns, or the JAX function")
        with self.location(span, name):
            op = linalg_op(EXTERN, args, [emit.tensor_type(t.concrete_shape, t.dtype) for t in results],
                           {"key": register_extern(function), "name": name, "arity": len(args),
                            "keys": [i for i, t in enumerate(param_types) if t.dtype.is_key]})
        return list(op.results)

    def __init__(self, module_lowering: ModuleLowering):
        self.m = module_lowering
        self.location = module_lowering.location

    def derivative(self, walk, kind: str, name: str, span, args: list, arg_types: list, wrt: tuple) -> list:
        """A derivative of `name` inside a function being lowered (`grad(name)(args)`, `value_and_grad`, `jvp`,
        `vjp`: `kind`, as passes/autodiff.py `ValueAndGrad.of` names them): `name` lowered on its own for its
        parameters' types (the first of `arg_types`, in the same context), differentiated, and its body moved
        to the insertion point with its arguments replaced by `args` (the tangents or cotangents last).
        Returns the values it returns. A `name` that prints or asserts does so in the forward pass, once:
        its run id and io token are the caller's (`walk`'s), its callback sites join the module's, and the
        io token it returns is the caller's from then on."""
        program = self.m.program
        n = len(program.signatures[name].params)
        sub_lowering = ModuleLowering(program, self.m.context)
        sub_lowering.effect_sites = self.m.effect_sites           # one numbering of the module's callbacks
        sub_lowering.call_sites = self.m.call_sites + [           # reports name the derivative and its callers
            ir.Location.name(f"{kind}({name})", childLoc=self.m._file_loc(span))]
        sub = sub_lowering.lower(name, arg_types[:n])
        fn = next(op for op in sub.module.body.operations if op.operation.name == "func.func")
        hidden = [walk.materialize(walk.env[effects.RUN]), walk.materialize(walk.env[IO])] if sub.effect_sites else []
        wrt = tuple(i + len(hidden) for i in wrt)
        sites = self.m.effect_sites
        diags = jvp(fn, wrt, sites) if kind == "jvp" else value_and_grad(fn, wrt, kind != "grad", kind == "vjp", sites)
        if diags:
            raise CompileError(diags, program.sources)
        args = hidden + list(args)
        past_at = emit.int_attr(fn, abi.BOUND_RESULT)
        results = emit.inline_block(fn.regions[0].blocks[0], args)[1]
        fn.operation.erase()
        past = results.pop(past_at) if past_at is not None else None
        if hidden:
            walk.env[IO] = Val(ArrayType(I32, ()), results.pop())
        if past is not None:
            self._past(walk, past)
        return results

    def vmap(self, walk, name: str, span, args: list, lane_types: list, in_axes: list, out_axes: list,
             size: int) -> list:
        """`vmap(name, in_axes, out_axes)(args)` inside a function being lowered: `name` lowered on its own for
        one lane's types (`lane_types`), batched over `size` lanes (compiler/batching.py: by rules, or lane by
        lane), and moved to the insertion point; `args` have their lanes along `in_axes` (None: shared).
        Prints and asserts of `name` use the caller's run id and io token, passed from lane to lane."""
        program = self.m.program
        shown = program.functions[name].shown_name      # (arrc.vmap's wrapper: `vmap(f)`, not its own name)
        sub_lowering = ModuleLowering(program, self.m.context)
        sub_lowering.effect_sites = self.m.effect_sites
        sub_lowering.call_sites = self.m.call_sites if walk.fn.name.startswith(WRAPPER_PREFIX) else \
            self.m.call_sites + [ir.Location.name(f"vmap({shown})", childLoc=self.m._file_loc(span))]   # (arrc.vmap's
        # wrapper is the entry, named `vmap(name)`: a report says "in vmap(f)", not where the wrapper calls it)
        sub = sub_lowering.lower(name, lane_types)
        fn = next(op for op in sub.module.body.operations if op.operation.name == "func.func")
        if abi.BOUND_RESULT in fn.attributes:
            raise CompileError([Diagnostic("E0216", f"`vmap` of `{name}`, whose derivative checks a loop's bound, "
                                                    "is not supported yet", span, "here",
                                           help="call the derivative inside the mapped function's caller")],
                               program.sources)
        hidden = [walk.materialize(walk.env[effects.RUN]), walk.materialize(walk.env[IO])] if sub.effect_sites else []
        n_results = len(ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value).results)
        threaded = {n_results - 1: 1} if hidden else {}
        moved = [a if axis in (None, 0) else hlo.transpose(a, [axis] + [d for d in range(len(emit.shape_of(a)))
                                                                       if d != axis])
                 for a, axis in zip(args, in_axes)]
        batched_fn, _ = vmap_function(fn, [False] * len(hidden) + [axis is not None for axis in in_axes], size,
                                      threaded, f"vmap({shown})")
        results = emit.inline_block(batched_fn.regions[0].blocks[0], hidden + moved)[1]
        batched_fn.operation.erase()
        if hidden:
            walk.env[IO] = Val(ArrayType(I32, ()), results.pop())
        out = []
        for r, axis in zip(results, out_axes):
            rank = len(emit.shape_of(r))
            out.append(r if axis == 0 else hlo.transpose(r, [d + 1 if d < axis else 0 if d == axis else d
                                                             for d in range(rank)]))
        return out

    def _past(self, walk, past: ir.Value) -> None:
        """A derivative's PAST value: reported now in a function with effects (after the prints before it,
        before those after it), else the first of the function's (returned by its entry)."""
        if effects.RUN in walk.env:
            io = effects.report_past(self.m.effect_sites, walk.materialize(walk.env[effects.RUN]),
                                     walk.materialize(walk.env[IO]), past)
            walk.env[IO] = Val(ArrayType(I32, ()), io)
        elif isinstance(walk.env.get(effects.PAST), Val):
            walk.env[effects.PAST] = Val(effects.PAST_TYPE,
                                         effects.first_past(walk.materialize(walk.env[effects.PAST]), past))
        else:
            raise NotAtDefinition("a derivative that checks a loop's bound")

    def call(self, walk, name: str, args: list, param_types: list, span) -> list:
        """Inline a call: walk the callee's body with the arguments' values and concrete types."""
        program = self.m.program
        if program.functions[name].extern:
            return self.extern(name, args, param_types, span)
        if self.m.at_definition and name in self.m.active:
            raise NotAtDefinition(f"recursive call of `{name}`")
        sig = program.signatures[name]
        env = unify(sig, [Val(t) for t in param_types], [s for _, _, s in sig.params], span)
        bindings = {k: v.value for k, v in env.items()}
        self.m.inlined += 1
        if self.m.inlined > MAX_INLINED_CALLS:
            raise CompileError([Diagnostic(
                "E0004", f"more than {MAX_INLINED_CALLS} calls to inline: the call tree is too large", span,
                "this call", help="compute shared values once and pass them, instead of calling a function "
                                  "several times from each level")],
                program.sources)
        if len(self.m.call_sites) >= MAX_CALL_DEPTH:
            raise CompileError([Diagnostic(
                "E0004", f"calls nested more than {MAX_CALL_DEPTH} deep", span, "this call",
                help="call fewer functions inside one another")], program.sources)
        callee = FunctionWalk(program, program.functions[name], self.m.reporter, self, bindings)
        callee.loop_counters = list(walk.loop_counters)
        for hidden in (effects.RUN, IO, effects.PAST):
            if hidden in walk.env:
                callee.env[hidden] = walk.env[hidden]
        # The callee is walked on top of its caller's frames (~12 per call): give them back, so that an
        # inlined function may nest as deep as it could when it was checked on its own.
        frames = _frames_since_run()
        _add_to_recursion_limit(frames)
        self.m.call_sites.append(ir.Location.name(name, childLoc=self.m._file_loc(span)))
        self.m.active.append(name)
        try:
            returned = callee.run([Val(t, a) for t, a in zip(param_types, args)])
        finally:
            self.m.active.pop()
            self.m.call_sites.pop()
            _add_to_recursion_limit(-frames)
        self.m._raise_if_failed(returned)
        for hidden in (IO, effects.PAST):
            if hidden in callee.env:
                walk.env[hidden] = callee.env[hidden]
        return [r.ir for r in returned]

    def print(self, walk, stmt, values) -> None:
        if self.m.at_definition:
            raise NotAtDefinition("an effect")
        effects.lower_print(walk, self.m.effect_sites, stmt, values)

    def assert_(self, walk, stmt, cond, message) -> None:
        if self.m.at_definition:
            raise NotAtDefinition("an effect")
        effects.lower_assert(walk, self.m.effect_sites, stmt, cond, message)


class NotAtDefinition(Exception):
    """The function needs the check walk first (it has an effect, or a call that recurses)."""


def lower_at_definition(program, name: str, context: ir.Context | None = None) -> tuple[Lowered, list] | None:
    """Lower the function `name`, whose parameter types are concrete, in place of its check walk.

    With concrete types the lowering walk applies every rule the check walk applies (and emits), so one
    walk does both: the Lowered is kept for the first `lower` and the function is not walked twice. Returns
    (the Lowered, the calls it makes), or None where the check walk must run instead: any diagnostic
    (the check walk reports them all, and warnings once per function), an effect (`program.effectful` is
    not known yet) or a recursive call (reported by the check). `context`: the MLIR context to lower in
    (the definition-time lowerings of a program share one; see `program._lower_entries`).
    """
    lowering = ModuleLowering(program, context, at_definition=True)
    try:
        lowered = lowering.lower(name, [t for _, t, _ in program.signatures[name].params])
    except Exception:   # noqa: BLE001  errors, effects, recursion, or a lowering bug `lower` will meet again
        return None
    if lowering.reporter.diagnostics:
        return None
    return lowered, lowering.entry_calls


_RUN = FunctionWalk.run.__code__
_limit_lock = threading.Lock()


def _frames_since_run() -> int:
    """The Python frames from the innermost `FunctionWalk.run` (included) to the caller (included)."""
    frame, count = sys._getframe(1), 1
    while frame is not None and frame.f_code is not _RUN:
        frame, count = frame.f_back, count + 1
    return count


def _add_to_recursion_limit(frames: int) -> None:
    # A change, not a set: lowerings in other threads change the limit too, each undoing its own change.
    with _limit_lock:
        sys.setrecursionlimit(sys.getrecursionlimit() + frames)


def _type_text(shape, name: str) -> str:
    """An arr type written for a shape and a dtype's name: `f32[8, 64]`."""
    return f"{name}[{', '.join(map(str, shape))}]" if shape else name
