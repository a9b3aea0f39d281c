"""Running StableHLO that arrc did not write (`arrc run in.mlir`, `arrc guard`): a module from text,
bytecode or a portable artifact, read in a child process, checked by `verify-static-shapes` and
`verify-foreign-calls`, optionally guarded, called with NumPy arguments.

The file is untrusted: MLIR's readers can crash on mutated bytes, and XLA runs whatever a custom_call
names. So the bytes are parsed only in a child (runtime/mlir_reader.py), which hands back MLIR's own
bytecode of the verified module; this process parses only that, and refuses (E0503) any module that
calls something arrc did not register before anything is compiled.
"""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo as hlo

from ..compiler import abi, emit
from ..compiler.diagnostics import CompileError, Diagnostic
from ..compiler.effects import CALLBACK_TARGET
from ..compiler.span import Span
from ..compiler.locations import span_of
from ..compiler.types import COMPLEX_DTYPES, DTYPES, int_range
from ..passes.guards import GuardOptions, GuardPass, guarded_kinds
from ..passes.registry import run_passes
from ..passes.rewrite import attr_text, entry, int_attr, ops_named, set_int_attr, unpack_own_attributes
from . import mlir_reader
from .pipeline import uses_lapack
from .guards import FileSources, raise_faults

READER = mlir_reader.__file__            # run as a script in the child
READ_TIMEOUT_S = 60.0
READ_CPU_MARGIN_S = 5                  # the reader's CPU time is bounded at its timeout and this much more
MAX_SOURCE_BYTES = 16 * 2 ** 20        # a location's file is shown in reports only if it is this small


def read_module(data: bytes, name: str, timeout: float = READ_TIMEOUT_S, device: str | None = None):
    """(context, module) from StableHLO text, MLIR bytecode or a portable artifact, checked: E0502 when
    it cannot be read (the reader's crash included), E0501/E0503 when arrc cannot run it safely. A
    multi-platform `jax.export` keeps its platforms in the module (abi.PLATFORMS); for a `device` to run
    on, its platform index is filled in (`for_platform`).

        >>> read_module(b"func.func @main() {\\n  return\\n}", "f.mlir")[1].operation.name
        'builtin.module'
    """
    written, platforms = read_in_child(data, name, timeout)
    context = mlir_reader.make_context()
    with context:
        module = ir.Module.parse(written)          # bytecode MLIR wrote for a verified module
        unpack_own_attributes(module)               # (a module JAX lowered with arr's in it: `arrc compile --mesh`)
        if platforms:
            module.operation.attributes[abi.PLATFORMS] = ir.ArrayAttr.get([ir.StringAttr.get(p) for p in platforms])
    check_module(context, module, name)
    with context:
        _entry_named_main(module)
    if device is not None:
        for_platform(context, module, name, device)
    return context, module


def _entry_named_main(module) -> None:
    """XLA compiles the function named `main`: an entry by another name (the only public function,
    `entry`) takes that name, and a private `main` another, so that what `arrc guard`/`arrc grad` write
    runs too (both were `MLIR module must have a main function`, or ran the private `main`)."""
    fop = entry(module)
    name = attr_text(fop.attributes["sym_name"])
    if name == "main":
        return
    names = {attr_text(op.attributes["sym_name"]) for op in module.body.operations if "sym_name" in op.attributes}
    if "main" in names:
        fresh = next(f"main_{i}" for i in range(len(names) + 1) if f"main_{i}" not in names)
        ir.SymbolTable.replace_all_symbol_uses("main", fresh, module.operation)
        ir.SymbolTable.set_symbol_name(next(op for op in module.body.operations if "sym_name" in op.attributes
                                            and attr_text(op.attributes["sym_name"]) == "main"), fresh)
    ir.SymbolTable.replace_all_symbol_uses(name, "main", module.operation)
    ir.SymbolTable.set_symbol_name(fop, "main")


def read_in_child(data: bytes, name: str, timeout: float = READ_TIMEOUT_S) -> tuple[bytes, list[str] | None]:
    """MLIR's bytecode of the module in `data`, parsed and verified in a child process (runtime/mlir_reader.py:
    ~0.35 s of CPU), so that no input can take this process down; with the platforms of a multi-platform
    `jax.export` (else None)."""
    try:
        done = subprocess.run(reader_command(timeout), input=data, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise _unreadable(name, f"reading it took longer than {timeout:g} s") from None
    except OSError as err:
        raise _unreadable(name, f"the MLIR reader could not be started ({err.strerror or err})") from None
    xcpu = getattr(signal, "SIGXCPU", None)          # (not on Windows)
    if xcpu is not None and done.returncode == -xcpu:
        raise _unreadable(name, f"reading it took more than {reader_cpu_seconds(timeout)} s of CPU time")
    if done.returncode < 0:
        number = -done.returncode
        try:
            what = f"signal {number}, {signal.Signals(number).name}"
        except ValueError:
            what = f"signal {number}"
        raise _unreadable(name, f"the MLIR reader crashed ({what})")
    header, _, written = done.stdout.partition(b"\n")
    try:
        reply = json.loads(header)
    except ValueError:
        reply = None
    if done.returncode != 0 or not isinstance(reply, dict):
        last = (done.stderr.decode("utf-8", "replace").strip().splitlines() or ["no message"])[-1]
        raise _unreadable(name, f"the MLIR reader failed ({last[:200]})")
    if "error" in reply:
        file = reply.get("file") or name
        line, col = max(1, int(reply.get("line", 1))), max(1, int(reply.get("col", 1)))
        raise _unreadable(name, str(reply["error"]), Span(file, line, col, line, col + 1))
    platforms = reply.get("platforms")
    if platforms is not None and not (isinstance(platforms, list) and all(isinstance(p, str) for p in platforms)):
        raise _unreadable(name, "the MLIR reader failed (its platforms are not a list of names)")
    return written, platforms


def reader_command(timeout: float = READ_TIMEOUT_S) -> list[str]:
    """The child's command line: it dies with this process and after a little more CPU time than `timeout`
    (runtime/mlir_reader.py `bound_process`), so that a reader looping on a mutated file is not left behind
    when this process is killed before it stops waiting. -P: the reader's own folder (runtime/) is not put
    on the child's path."""
    return [sys.executable, "-P", READER, str(os.getpid()), str(reader_cpu_seconds(timeout))]


def reader_cpu_seconds(timeout: float) -> int:
    return math.ceil(timeout) + READ_CPU_MARGIN_S


def _unreadable(name: str, reason: str, span: Span | None = None) -> CompileError:
    return CompileError([Diagnostic("E0502", f"cannot read {name} as StableHLO: {reason}",
                                    span or Span(name, 1, 1, 1, 2))], SafeSources())


def check_module(context, module, name: str) -> None:
    """The checks every module from elsewhere passes before it is guarded or compiled."""
    with context:
        from .pipeline import foreign_checks
        diags = run_passes(module, foreign_checks())
        if not diags:
            try:
                diags = _platform_index_problems(module, entry(module), name)
            except ValueError as err:
                diags = [Diagnostic("E0502", f"{name} has no entry point: {err}", None)]
    if diags:
        raise CompileError([_in_file(d, name) for d in diags], SafeSources())


def platform_index(fop) -> int | None:
    """The position of the argument of a multi-platform `jax.export`'s `main` that takes the index of the
    platform it runs on (JAX marks it `jax.global_constant = "_platform_index"`), or None."""
    if "arg_attrs" not in fop.attributes:
        return None
    for i, attrs in enumerate(ir.ArrayAttr(fop.attributes["arg_attrs"])):
        attrs = ir.DictAttr(attrs)
        if "jax.global_constant" in attrs and _text(attrs["jax.global_constant"]) == abi.PLATFORM_INDEX:
            return i
    return None


def _text(attr) -> str | None:
    return attr.value if isinstance(attr, ir.StringAttr) else None


def recorded_platforms(module) -> list[str] | None:
    attrs = module.operation.attributes
    if abi.PLATFORMS not in attrs or not isinstance(attrs[abi.PLATFORMS], ir.ArrayAttr):
        return None
    names = [_text(a) for a in ir.ArrayAttr(attrs[abi.PLATFORMS])]
    return names if names and None not in names else None


def _argument_span(fop, arg, name: str) -> Span:
    """Where a diagnostic about `fop`'s argument `arg` points: its location, else the function's, else the
    start of the file `name`."""
    return span_of(arg.location) or span_of(fop.location) or Span(name, 1, 1, 1, 2)


def _platform_index_problems(module, fop, name: str) -> list[Diagnostic]:
    """A `main` that takes the index of its platform must say which platform each index means: JAX keeps
    that list in the `jax.export` serialization, outside the module (`Exported.platforms`)."""
    index = platform_index(fop)
    if index is None:
        return []
    arg = fop.regions[0].blocks[0].arguments[index]
    where = _argument_span(fop, arg, name)
    if str(arg.type) not in ("tensor<i32>", "tensor<i64>"):        # (i64 where JAX exported with x64 on)
        return [Diagnostic("E0503", f"the platform index of @{attr_text(fop.attributes['sym_name'])} (argument "
                                    f"{index}) is a {arg.type}, not an integer scalar", where, "cannot run this")]
    if recorded_platforms(module) is None:
        return [Diagnostic("E0503", f"@{attr_text(fop.attributes['sym_name'])} takes the index of the platform "
                                    f"it runs on (argument {index}, a multi-platform `jax.export`), and the "
                                    "module does not say which platform each index means", where,
                           "cannot run this",
                           help="run the `jax.export` serialization (`Exported.serialize()`), which lists the "
                                "platforms, or export for one platform (`platforms=('cpu',)`)")]
    return []


def for_platform(context, module, name: str, device: str) -> None:
    """Fill in a multi-platform `jax.export`'s platform index for `device`'s PJRT platform, as JAX's
    `Exported.call` does: the argument becomes that constant and leaves `main`'s signature. E0503 when
    the module was not exported for that platform."""
    with context:
        fop = entry(module)
        index = platform_index(fop)
        if index is None:
            return
        platforms = recorded_platforms(module)
        from .pjrt import backend
        target = backend(device).platform
        block = fop.regions[0].blocks[0]
        arg = block.arguments[index]
        if target not in platforms:
            raise CompileError([_in_file(Diagnostic(
                "E0503", f"{name} was exported for {', '.join(platforms)}, not for {target} (the device "
                         f"`{device}`)", _argument_span(fop, arg, name),
                "cannot run this",
                help=f"export it with {target} among `jax.export.export(..., platforms=...)`"), name)],
                SafeSources())
        with ir.InsertionPoint.at_block_begin(block), arg.location:
            chosen = ir.IntegerAttr.get(ir.RankedTensorType(arg.type).element_type, platforms.index(target))
            value = hlo.ConstantOp(ir.DenseElementsAttr.get_splat(arg.type, chosen)).result
        arg.replace_all_uses_with(value)
        block.erase_argument(index)
        ftype = ir.FunctionType(ir.TypeAttr(fop.attributes["function_type"]).value)
        inputs = [t for i, t in enumerate(ftype.inputs) if i != index]
        fop.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, list(ftype.results)))
        attrs = [a for i, a in enumerate(ir.ArrayAttr(fop.attributes["arg_attrs"])) if i != index]
        fop.attributes["arg_attrs"] = ir.ArrayAttr.get(attrs)
        for key in (abi.RUN_ARG, abi.IO_ARG):       # arrc's hidden arguments after it (a module `arrc guard` wrote)
            at = int_attr(fop, key)
            if at is not None and at > index:
                set_int_attr(fop, key, at - 1)
        del module.operation.attributes[abi.PLATFORMS]


def _in_file(diag: Diagnostic, name: str) -> Diagnostic:
    """MLIR names the text it parsed "-": that text is the file `name`."""
    if diag.span is None or diag.span.file != "-":
        return diag
    return replace(diag, span=replace(diag.span, file=name))


class SafeSources(FileSources):
    """Sources for reports, read only from regular files of a sane size: a module's locations can name
    any path (a FIFO would hang the report, /dev/zero exhaust memory)."""

    def get(self, name, default=None):
        if name not in self:
            try:
                path = Path(name)
                if not path.is_file() or path.stat().st_size > MAX_SOURCE_BYTES:
                    self[name] = None
            except (OSError, TypeError, ValueError):
                self[name] = None
        return super().get(name, default)


def guard_text(data: bytes, name: str, options: GuardOptions) -> str:
    """`arrc guard`: the module instrumented with guards, as text with its locations."""
    from .pipeline import apply_passes
    context, module = read_module(data, name)
    with context:
        _parameters(entry(module), name)        # (a module `arrc run` would refuse is refused now)
    apply_passes(module, context, [GuardPass(options)], SafeSources())
    with context:
        return module.operation.get_asm(enable_debug_info=True)


class ForeignFunction:
    """The entry of a StableHLO file, callable with NumPy values by position; `param_names` are JAX's
    recorded names, or arg0, arg1, ..."""

    def __init__(self, path: str, kinds=frozenset(), scope: str = "results", platform: str = "cpu"):
        self.path = path
        self.platform = platform
        self.options = GuardOptions(frozenset(kinds), scope)
        context, module = read_module(Path(path).read_bytes(), path, device=platform)
        self.bytecode = mlir_reader.bytecode(module)        # what each build parses again
        with context:
            fop = entry(module)
            self.params, self.param_names = _parameters(fop, path)
            self.name = attr_text(fop.attributes["sym_name"])
            # the arr function it was compiled from (`arrc compile --entry vec` names its entry `main`)
            self.arr_name = attr_text(fop.attributes[abi.ENTRY]) if abi.ENTRY in fop.attributes else None
            already = guarded_kinds(fop)
            self.uses_lapack = uses_lapack(module)
        if self.uses_lapack and platform != "cpu":
            raise CompileError([Diagnostic("E0503", f"{path} calls LAPACK kernels, which run only on the CPU",
                                           None, help="run it with --device cpu")])
        if already and not self.options.kinds:      # a module from `arrc guard`: use its guards
            self.options = GuardOptions(already, scope)
        self.sources = SafeSources()
        self._builds: dict = {}

    def _build(self, origins: bool):
        if origins not in self._builds:
            from .pipeline import apply_passes, compile_module
            context = mlir_reader.make_context()
            with context:
                module = ir.Module.parse(self.bytecode)
                _callbacks_on_cpu(module)
            apply_passes(module, context, [GuardPass(GuardOptions(self.options.kinds, self.options.scope, origins))],
                         self.sources)
            with _xla_errors(f"XLA cannot compile {self.path}"):
                build = compile_module(module, context, self.sources, [], self.platform)
            for site in build.sites.values():
                _in_file_named(site, self.path)
            self._builds[origins] = build
        return self._builds[origins]

    def __call__(self, values: list):
        if len(values) != len(self.params):
            raise TypeError(f"{self.path} takes {len(self.params)} arguments ({', '.join(self.param_names)}), "
                            f"{len(values)} given")
        arrays = [_convert(v, dt, shape, name) for v, (dt, shape), name in zip(values, self.params, self.param_names)]
        build = self._build(False)
        with _xla_errors(f"XLA failed running {self.path}"):
            results, state = build(arrays)
        if state is not None:
            raise_faults(state, self.options.scope, lambda: self._build(True)(arrays, quiet=True)[1],
                         self.arr_name or self.name, self.sources)     # (`in f`, as a run of the source says)
        return results


@contextmanager
def _xla_errors(what: str):
    """An error XLA reports for a module from elsewhere is that module's: E0502 with XLA's reason."""
    from jax.errors import JaxRuntimeError
    try:
        yield
    except JaxRuntimeError as err:
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise CompileError([Diagnostic("E0502", f"{what}: {reason[:500]}", None)]) from None


def _param_names(fop, shown: list[int]) -> list[str]:
    """The parameters' names: JAX's own where it recorded them (the name location of each argument, the
    argument's path in the function's pytree: `params['w']`, `x`), else `arg0`, `arg1`, ... by position
    (all of them positional where the names are missing or repeat)."""
    from ..compiler.locations import name_of
    block = fop.regions[0].blocks[0]
    names = [name_of(block.arguments[i].location) for i in shown]
    if None in names or len(set(names)) != len(names) or any(n.startswith("arg") and n[3:].isdigit() for n in names):
        return [f"arg{k}" for k in range(len(shown))]
    return names


def _in_file_named(site, path: str) -> None:
    """A module read from text has its own lines as locations, in the file MLIR calls "-" (a module
    without locations of its own): a report names `path` there, and shows its line."""
    def named(span):
        return replace(span, file=path) if span is not None and span.file == "-" else span
    site.span = named(site.span)
    if hasattr(site, "chain"):
        site.chain = [(name, named(span)) for name, span in site.chain]
    if hasattr(site, "labels"):
        # an operand by where it is made (MLIR's position of an op or argument, not an expression to show)
        site.labels = [f"value at {path}:{':'.join(label[3:].split(':')[:2])}" if label.startswith("@-:") else label
                       for label in site.labels]


def _callbacks_on_cpu(module: ir.Module) -> None:
    """Callbacks written for another platform (`arrc compile --target gpu`) start from the CPU's target:
    runtime/call.py points them at the platform they run on."""
    for op in ops_named(module, "stablehlo.custom_call"):
        if attr_text(op.attributes["call_target_name"]) in CALLBACK_TARGET.values():
            op.attributes["call_target_name"] = ir.StringAttr.get(CALLBACK_TARGET["cpu"])


def _parameters(fop, name: str) -> tuple[list, list[str]]:
    """The (dtype, shape) and the name of each parameter a call passes (the hidden run id and io token left
    out); E0502 at the first of a type arrc cannot pass."""
    ftype = ir.FunctionType(ir.TypeAttr(fop.attributes["function_type"]).value)
    hidden = {int_attr(fop, abi.RUN_ARG), int_attr(fop, abi.IO_ARG)}
    shown = [i for i in range(len(ftype.inputs)) if i not in hidden]
    names = _param_names(fop, shown)
    params = []
    for i, param in zip(shown, names):
        found = _dtype_shape(ftype.inputs[i])
        if found is None:
            arg = fop.regions[0].blocks[0].arguments[i]
            raise CompileError([_in_file(Diagnostic(
                "E0502", f"parameter `{param}` of {name} has type {ftype.inputs[i]}, which arrc cannot pass",
                _argument_span(fop, arg, name), "this parameter",
                help="arrc passes tensors of bool, integers, f16, bf16, f32, f64 and complex numbers "
                     "(not tokens, tuples or 8- and 4-bit floats)"), name)], SafeSources())
        params.append(found)
    return params, names


def _dtype_shape(t: ir.Type):
    if isinstance(t, ir.RankedTensorType):
        for dt in (*DTYPES.values(), *COMPLEX_DTYPES.values()):
            if emit.ir_dtype(dt) == t.element_type:
                return dt, tuple(t.shape)
    return None


def _convert(value, dt, shape, name):
    arr = np.asarray(value)
    if isinstance(value, np.ndarray) and arr.dtype != dt.np:
        raise TypeError(f"argument {name} has dtype {arr.dtype}, expected {dt}")
    if not isinstance(value, np.ndarray) and dt.is_int and arr.dtype.kind in "iuO":     # Python ints (O: past
        lo, hi = int_range(dt)                                                           # 64 bits) not wrapped
        if any(type(v) is not int or not lo <= v <= hi for v in arr.ravel().tolist()):
            raise TypeError(f"argument {name}: value out of range for {dt}")
    arr = arr.astype(dt.np)
    if arr.shape != shape:
        raise TypeError(f"argument {name} has shape {list(arr.shape)}, expected {list(shape)}")
    return arr
