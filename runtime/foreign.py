"""Running StableHLO that arrc did not write (`arrc run in.mlir`, `arrc guard`): a module from text or
bytecode, checked by `verify-static-shapes`, optionally guarded, called with NumPy arguments."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from jaxlib.mlir import ir

from ..compiler import emit
from ..compiler.diagnostics import CompileError, Diagnostic
from ..compiler.span import Span
from ..compiler.types import DTYPES
from ..passes.guards import GuardOptions, guard_module, guarded_kinds
from ..passes.registry import run_passes
from ..passes.rewrite import ABI_RUN, entry, int_attr
from .guards import FileSources, raise_faults


def parse_module(data: bytes, name: str):
    """(context, module) from StableHLO text or MLIR bytecode; E0502 for anything else."""
    context = emit.make_context()
    with context:
        try:
            module = ir.Module.parse(data if data[:4] == b"ML\xefR" else data.decode("utf-8"))
        except (ir.MLIRError, UnicodeDecodeError, ValueError) as err:
            first = str(err).splitlines()[0] if str(err) else type(err).__name__
            raise CompileError([Diagnostic("E0502", f"cannot read {name} as StableHLO: {first}",
                                           Span(name, 1, 1, 1, 2))]) from None
    return context, module


def check_static(context, module, name: str) -> None:
    with context:
        diags = run_passes(module, ["verify-static-shapes"])
    if diags:
        raise CompileError(diags, FileSources())


def guard_text(data: bytes, name: str, options: GuardOptions) -> str:
    """`arrc guard`: the module instrumented with guards, as text with its locations."""
    context, module = parse_module(data, name)
    check_static(context, module, name)
    diags = guard_module(module, options)
    if diags:
        raise CompileError(diags, FileSources())
    with context:
        module.operation.verify()
        return module.operation.get_asm(enable_debug_info=True)


class ForeignFunction:
    """The entry of a StableHLO file, callable with NumPy values by position (arg0, arg1, ...)."""

    def __init__(self, path: str, kinds=frozenset(), scope: str = "results", platform: str = "cpu"):
        self.path = path
        self.platform = platform
        self.data = Path(path).read_bytes()
        self.options = GuardOptions(frozenset(kinds), scope)
        context, module = parse_module(self.data, path)
        check_static(context, module, path)
        with context:
            fop = entry(module)
            ftype = ir.FunctionType(ir.TypeAttr(fop.attributes["function_type"]).value)
            hidden = {int_attr(fop, ABI_RUN), int_attr(fop, "arrc.io_arg")}
            self.params = [_dtype_shape(t) for i, t in enumerate(ftype.inputs) if i not in hidden]
            self.name = ir.StringAttr(fop.attributes["sym_name"]).value
            already = guarded_kinds(fop)
        if already and not self.options.kinds:      # a module from `arrc guard`: use its guards
            self.options = GuardOptions(already, scope)
        self.sources = FileSources()
        self._builds: dict = {}

    @property
    def param_names(self) -> list[str]:
        return [f"arg{i}" for i in range(len(self.params))]

    def _build(self, origins: bool):
        if origins not in self._builds:
            from .call import Compiled
            context, module = parse_module(self.data, self.path)
            diags = guard_module(module, GuardOptions(self.options.kinds, self.options.scope, origins))
            if diags:
                raise CompileError(diags, self.sources)
            self._builds[origins] = Compiled(module, context, self.sources, platform=self.platform)
        return self._builds[origins]

    def __call__(self, values: list):
        if len(values) != len(self.params):
            raise TypeError(f"{self.path} takes {len(self.params)} arguments ({', '.join(self.param_names)}), "
                            f"{len(values)} given")
        arrays = [_convert(v, dt, shape, name) for v, (dt, shape), name in zip(values, self.params, self.param_names)]
        results, state = self._build(False)(arrays)
        if state is not None:
            raise_faults(state, self.options.scope, lambda: self._build(True)(arrays, quiet=True)[1],
                         self.name, self.sources)
        return results


def _dtype_shape(t: ir.Type):
    t = ir.RankedTensorType(t)
    for dt in DTYPES.values():
        if emit.ir_dtype(dt) == t.element_type:
            return dt, tuple(t.shape)
    raise CompileError([Diagnostic("E0502", f"unsupported parameter type {t}", None)])


def _convert(value, dt, shape, name):
    arr = np.asarray(value)
    if isinstance(value, np.ndarray) and arr.dtype != dt.np:
        raise TypeError(f"argument {name} has dtype {arr.dtype}, expected {dt}")
    arr = arr.astype(dt.np)
    if arr.shape != shape:
        raise TypeError(f"argument {name} has shape {list(arr.shape)}, expected {list(shape)}")
    return arr
