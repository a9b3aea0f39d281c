"""Specialization and lowering: a checked Program plus concrete argument types -> a StableHLO module."""
from __future__ import annotations

from contextlib import contextmanager

from jaxlib.mlir import ir

from . import effects, emit
from .check import FunctionWalk, unify
from .control import IO
from .diagnostics import CompileError, Reporter
from .emit import func, hlo
from .types import I32, ArrayType
from .values import ArrError, Val


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

    def as_text(self, debug_info: bool = True) -> str:
        """StableHLO text; `debug_info` keeps the source locations."""
        with self.context:
            return self.module.operation.get_asm(enable_debug_info=debug_info)

    def as_bytecode(self) -> bytes:
        import io
        buf = io.BytesIO()
        with self.context:
            self.module.operation.write_bytecode(buf)
        return buf.getvalue()


class ModuleLowering:
    def __init__(self, program, context: ir.Context | None = None):
        self.program = program
        self.context = context or emit.make_context()
        self.instances: dict = {}
        self.reporter = Reporter()
        self.symbol_counts: dict = {}
        self.effect_sites: list = []

    def lower(self, entry: str, arg_types: list[ArrayType]) -> Lowered:
        sig = self.program.signatures[entry]
        with self.context, ir.Location.unknown():
            self.module = ir.Module.create()
            params = [Val(t) for t in arg_types]
            env = unify(sig, params, [s for _, _, s in sig.params], None)
            bindings = {k: v.value for k, v in env.items()}
            self._instance(entry, arg_types, bindings, public=True)
            if self.reporter.errors:
                raise CompileError(self.reporter.diagnostics, {self.program.source.name: self.program.source})
            self.module.operation.verify()
        results = [t.subs(bindings) for t in sig.results]
        return Lowered(self.module, self.context, arg_types, results, sig.tuple_result,
                       list(self.program.warnings), self.effect_sites if entry in self.program.effectful else [])

    def _instance(self, name: str, arg_types: list, bindings: dict, public: bool = False) -> tuple[str, list]:
        key = (name, tuple(arg_types), public)
        if key in self.instances:
            return self.instances[key]
        sig = self.program.signatures[name]
        fn_ast = self.program.functions[name]
        results = [t.subs(bindings) for t in sig.results]
        symbol = "main" if public else self._symbol(name)
        in_types = [emit.tensor_type(t.concrete_shape, t.dtype) for t in arg_types]
        out_types = [emit.tensor_type(t.concrete_shape, t.dtype) for t in results]
        effectful = name in self.program.effectful
        if effectful:
            io_type = emit.tensor_type((), I32)
            in_types, out_types = [io_type, io_type] + in_types, out_types + [io_type]
        with ir.InsertionPoint(self.module.body), self.location(fn_ast.name_span, name):
            fop = func.FuncOp(symbol, ir.FunctionType.get(in_types, out_types))
            fop.attributes["sym_visibility"] = ir.StringAttr.get("public" if public else "private")
            arg_locs = [self._file_loc(span) for _, _, span in sig.params]
            if effectful:
                arg_locs = [self._file_loc(fn_ast.name_span)] * 2 + arg_locs
            block = fop.body.blocks.append(*in_types, arg_locs=arg_locs)
        self.instances[key] = (symbol, results)
        walk = FunctionWalk(self.program, fn_ast, self.reporter, FunctionLowering(self), bindings)
        args = list(block.arguments)
        if effectful:
            walk.env[effects.RUN] = Val(ArrayType(I32, ()), args[0])
            walk.env[IO] = Val(ArrayType(I32, ()), args[1])
            args = args[2:]
        with ir.InsertionPoint(block):
            returned = walk.run([Val(t, arg) for t, arg in zip(arg_types, args)])
            if self.reporter.errors or returned is None or any(not isinstance(r, Val) for r in returned):
                raise CompileError(self.reporter.diagnostics or [], {self.program.source.name: self.program.source})
            last = fn_ast.body[-1].span
            with self.location(last, "return"):
                outs = [r.ir for r in returned]
                if effectful:
                    outs.append(walk.materialize(walk.env[IO]))
                func.ReturnOp(outs)
        return symbol, results

    def _symbol(self, name: str) -> str:
        n = self.symbol_counts.get(name, 0)
        self.symbol_counts[name] = n + 1
        return name if n == 0 else f"{name}_{n}"

    def _file_loc(self, span) -> ir.Location:
        return ir.Location.file(span.file, span.line, span.col, span.end_line, span.end_col)

    @contextmanager
    def location(self, span, what: str):
        if span is None:
            yield
            return
        with ir.Location.name(what, childLoc=self._file_loc(span)):
            yield


class FunctionLowering:
    """What a FunctionWalk needs from the module being built."""

    def __init__(self, module_lowering: ModuleLowering):
        self.m = module_lowering

    def location(self, span, what: str):
        return self.m.location(span, what)

    def call(self, walk, name: str, args: list, param_types: list, span) -> list:
        sig = self.m.program.signatures[name]
        env = unify(sig, [Val(t) for t in param_types], [s for _, _, s in sig.params], span)
        bindings = {k: v.value for k, v in env.items()}
        symbol, results = self.m._instance(name, param_types, bindings)
        out_types = [emit.tensor_type(t.concrete_shape, t.dtype) for t in results]
        if name not in self.m.program.effectful:
            return list(func.CallOp(out_types, ir.FlatSymbolRefAttr.get(symbol), args).results)
        io = [walk.materialize(walk.env[effects.RUN]), walk.materialize(walk.env[IO])]
        call = func.CallOp(out_types + [emit.tensor_type((), I32)], ir.FlatSymbolRefAttr.get(symbol), io + args)
        *outs, new_io = list(call.results)
        walk.env[IO] = Val(ArrayType(I32, ()), new_io)
        return outs

    def print(self, walk, stmt, values) -> None:
        effects.lower_print(walk, self.m.effect_sites, stmt, values)

    def assert_(self, walk, stmt, cond, message) -> None:
        effects.lower_assert(walk, self.m.effect_sites, stmt, cond, message)
