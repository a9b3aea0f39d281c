"""The Python API (LANGUAGE.md section 10): load, loads, spec, modules and their functions."""
from __future__ import annotations

import functools
import gc
import math
import operator
import sys
import threading
import warnings as pywarnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from arrc.compiler import ast
from arrc.compiler.check import unify
from arrc.compiler.diagnostics import CompileError, Diagnostic, render
from arrc.compiler.lower import Lowered, ModuleLowering
from arrc.compiler.parse import decode, parse
from arrc.compiler.ops_linalg import is_exported
from arrc.compiler.program import Program, check_module, check_program
from arrc.compiler.span import Source
from arrc.compiler.types import KEY, ArrayType, Dim, dtype_of_numpy, key_words, typed_key_data
from arrc.compiler.values import ArrError, Val
from arrc.runtime import pjrt          # (cheap: it binds jax on the first executable)


@contextmanager
def _gc_paused():
    """The front end allocates many small objects that reference counting frees; the cyclic GC's passes
    over the growing heap cost ~25% of its time, more the larger the program: pause it meanwhile. (Moving
    the objects made meanwhile to the oldest generation on leaving, `freeze` then `unfreeze`, saved the
    ~30 ms scan that follows a 2000-statement program, but on Python 3.11 such objects never count towards
    a full collection: their cyclic garbage was never freed, 1.1M objects after 60 loads.)"""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


DEVICES = ("cpu", "gpu", "tpu")


class ArgumentError(TypeError):
    """An argument does not match the function's signature (names the parameter, expected and actual type)."""


class ArrWarning(UserWarning):
    """A compile-time warning (W0001 lossy promotion, W0003 a key used twice, W0004 a loop differentiated by
    recomputation, ...) of a module made by `load`/`loads` with `warnings="warn"`: its text is the rendered
    diagnostic, `.diagnostic` the `Diagnostic` itself (also in `Module.warnings`).
    `warnings.simplefilter("error", arrc.ArrWarning)` makes them exceptions, as `warnings="error"` does."""

    def __init__(self, message: str, diagnostic: Diagnostic | None = None):
        super().__init__(message)
        self.diagnostic = diagnostic


WARNING_MODES = ("warn", "ignore", "error")


def _check_warnings_mode(mode) -> None:
    if mode not in WARNING_MODES:
        raise ValueError(f"warnings must be one of {', '.join(map(repr, WARNING_MODES))}, not {mode!r}")


def _warn(diag: Diagnostic, sources: dict) -> None:
    """`diag` as a Python `ArrWarning` pointing at the user's line: the first frame outside arrc and JAX (a
    derivative made while JAX differentiates `as_jax()`'s function is made deep inside both)."""
    inside = tuple({str(Path(module.__file__).parent) + "/" for name, module in list(sys.modules.items())
                    if name.partition(".")[0] in ("arrc", "jax", "jaxlib") and getattr(module, "__file__", None)})
    frame, level = sys._getframe(1), 2
    while frame.f_back is not None and frame.f_code.co_filename.startswith(inside):
        frame, level = frame.f_back, level + 1
    pywarnings.warn(ArrWarning(render(diag, sources).rstrip("\n"), diag), stacklevel=level)


def _emit_warnings(module: "Module", mode: str) -> None:
    """`warnings="warn"`: each of the module's warnings as a Python `ArrWarning`, pointing at the caller's
    `load`/`loads`."""
    if mode != "warn":
        return
    for diag in module.warnings:
        _warn(diag, module.sources)


def loads(source: str, filename: str = "<string>", guards=None, warnings: str = "warn",
          constants: dict | None = None, guard_scope: str = "results", device: str = "cpu",
          externs: dict | None = None) -> "Module":
    """Compile arr source text into a module of callable functions.

    `warnings`: "warn" (each compile-time warning is also a Python `arrc.ArrWarning`), "ignore" (only
    `Module.warnings` lists them) or "error" (they are errors: `CompileError`). `externs`: the JAX function
    (or `jax.export.Exported`) of each `extern def`, by name (docs/interop.md).

    >>> mod = loads("def add(x: f32[n], y: f32[n]) -> f32[n]:\\n    return x + y\\n")
    >>> mod.add.signature
    '(x: f32[n], y: f32[n]) -> f32[n]'
    """
    _check_warnings_mode(warnings)
    _require_text(source, "loads takes the program's text", "arrc.loads(data.decode())")
    _require_text(filename, "filename is a name", None)
    if constants is not None and not (isinstance(constants, dict) and all(isinstance(k, str) for k in constants)):
        what = "a dict with a name that is not a str" if isinstance(constants, dict) else type(constants).__name__
        raise TypeError(f"constants is a dict of values by their names in the program (str), not {what}")
    with _gc_paused():
        program = check_program(Source(filename, source), werror=(warnings == "error"), constants=constants)
    _bind_externs(program, externs, filename)
    module = Module(program, guards=guards, guard_scope=guard_scope, device=device)
    module.warning_mode = warnings
    _emit_warnings(module, warnings)
    return module


def load(path, guards=None, warnings: str = "warn", guard_scope: str = "results", device: str = "cpu",
         externs: dict | None = None) -> "Module":
    """Compile the arr file at `path` (`warnings` and `externs` as for `loads`)."""
    _check_warnings_mode(warnings)
    path = Path(path)
    source = decode(path.read_bytes(), str(path))
    with _gc_paused():
        program = check_program(source, werror=(warnings == "error"))
    _bind_externs(program, externs, str(path))
    module = Module(program, guards=guards, guard_scope=guard_scope, device=device)
    module.warning_mode = warnings
    _emit_warnings(module, warnings)
    return module


def _require_text(value, what: str, bytes_help: str | None) -> None:
    """A TypeError in the API's words where a str is expected (the parser's own said "a bytes-like object is
    required, not 'str'" for bytes, the reverse of the mistake)."""
    if isinstance(value, str):
        return
    hint = f"; for bytes, {bytes_help}" if bytes_help and isinstance(value, (bytes, bytearray)) else ""
    raise TypeError(f"{what} (a str), not {type(value).__name__}{hint}")


def _bind_externs(program: Program, externs: dict | None, filename: str) -> None:
    """`externs` (name -> JAX callable or jax.export.Exported) as the functions of the module's `extern def`s;
    each is checked against its declaration where a call of it is compiled (compiler/lower.py `extern`)."""
    if externs is not None and not isinstance(externs, dict):
        raise TypeError(f"externs is a dict of JAX functions by the names of `extern def`s, not "
                        f"{type(externs).__name__}")
    declared = sorted(name for name, fn in program.functions.items() if fn.extern)
    for name, function in (externs or {}).items():
        if name not in declared:
            listed = ", ".join(f"`{n}`" for n in declared) or "none"
            raise ValueError(f"externs: `{name}` is not declared by `extern def` in {filename} (its extern defs: "
                             f"{listed})")
        if not callable(function) and not is_exported(function):
            raise TypeError(f"externs: `{name}` must be a JAX function or a jax.export.Exported, "
                            f"not {type(function).__name__}")
    program.extern_functions = dict(externs or {})
    if externs:                         # reports inside them show the JAX function's Python lines
        from arrc.runtime.foreign import SafeSources
        program.sources = SafeSources(program.sources)


def from_items(items, sources: dict, guards=None, warnings: str = "warn", constants: dict | None = None,
               guard_scope: str = "results", device: str = "cpu") -> "Module":
    """A module of definitions parsed elsewhere, each with spans in its own source among `sources` (the
    REPL's cells and loaded files): diagnostics, MLIR locations and reports name where each was written.
    Its warnings are only listed (`Module.warnings`): the REPL renders them itself."""
    _check_warnings_mode(warnings)
    with _gc_paused():
        program = check_module(ast.Module(None, tuple(items)), sources, werror=(warnings == "error"),
                               constants=constants)
    return Module(program, guards=guards, guard_scope=guard_scope, device=device)


def key(seed):
    """`jax.random.key(seed)` as arr's `key(seed)` makes it: a Python int is taken as int64 (JAX with x64
    on), a NumPy integer as its own dtype. A JAX typed key (Threefry-2x32), accepted for `key` parameters."""
    import jax
    if isinstance(seed, int) and not isinstance(seed, bool):
        if not -2 ** 63 <= seed < 2 ** 63:
            raise OverflowError(f"seed {seed} does not fit in int64")
        seed = np.int64(seed)
    value = np.asarray(seed)
    if value.ndim or value.dtype.kind not in "iu":
        raise TypeError(f"a key's seed must be an integer, not {seed!r}")
    wide = int(value) & (2 ** 64 - 1)       # two's complement, sign-extended as jax's threefry_seed does
    high = wide >> 32 if value.dtype.itemsize == 8 else 0
    return jax.random.wrap_key_data(np.array([high, wide & 0xFFFFFFFF], np.uint32))


def spec(text: str) -> ArrayType:
    """An argument type from its arr spelling, e.g. `spec("f32[2, 3]")`, for `Function.lower`."""
    from arrc.compiler.check import type_of
    _require_text(text, 'spec takes a type\'s text such as "f32[2, 3]"', None)
    texpr = parse(Source("<spec>", text), start="type")
    errors: list = []
    t = type_of(texpr, {}, [], errors)
    if errors or t is None:
        raise CompileError(errors, {"<spec>": Source("<spec>", text)})
    if not t.is_concrete:
        raise ValueError(f"spec {text!r} must have concrete dimensions")
    return t


_NOT_PICKLED = ("an arr {} cannot be pickled: it holds compiled programs bound to this process's devices; "
                "pickle its source (`mod.source.text`) and compile it again with `arrc.loads` there")


class Module:
    def __init__(self, program: Program, guards=None, guard_scope: str = "results", device: str = "cpu"):
        from arrc.passes.guards import SCOPES, parse_kinds
        if device not in DEVICES:
            raise ValueError(f"device must be one of {', '.join(DEVICES)}, not {device!r}")
        self.device = device          # PJRT platform the functions compile for and run on
        self.warning_mode = "ignore"  # load/loads set it: "warn" also warns when arrc.grad(...) is taken
        self._program = program
        self.guards = guards
        self.guard_kinds = parse_kinds(guards)
        if guard_scope not in SCOPES:
            raise ValueError(f"guard_scope must be one of {', '.join(SCOPES)}")
        self.guard_scope = guard_scope
        self.warnings: list[Diagnostic] = list(program.warnings)
        self._functions = {name: Function(self, name) for name in program.signatures
                           if not getattr(program.functions.get(name), "extern", False)}   # (JAX's to call)
        for name, fn in self._functions.items():    # `mod.f` found without __getattr__ (1-2 us a call)
            if not hasattr(type(self), name) and name not in self.__dict__:
                self.__dict__[name] = fn

    REPR_FUNCTIONS = 12           # functions `repr` lists before "... and N more"

    def __repr__(self) -> str:
        """`<arr module 'model.arr' (guards='all'): 3 functions` then one signature a line, e.g.
        `  softmax(x: f32[b, k]) -> f32[b, k]`, the first REPR_FUNCTIONS of them."""
        names = self.functions
        options = [f"{k}={v!r}" for k, v, default in [("guards", self.guards, None),
                                                      ("guard_scope", self.guard_scope, "results"),
                                                      ("device", self.device, "cpu")] if v != default]
        head = f"<arr module {self.source.name!r}" + (f" ({', '.join(options)})" if options else "")
        if not names:
            return head + ": no functions>"
        lines = [f"{head}: {len(names)} function{'s' if len(names) != 1 else ''}"]
        lines += [f"  {n}{self._functions[n].signature}" for n in names[:self.REPR_FUNCTIONS]]
        if len(names) > self.REPR_FUNCTIONS:
            lines.append(f"  ... and {len(names) - self.REPR_FUNCTIONS} more (`.functions` lists them all)")
        return "\n".join(lines) + ">"

    def __getattr__(self, name: str) -> "Function":
        try:
            return self.__dict__["_functions"][name]
        except KeyError:
            raise AttributeError(f"module has no function `{name}`") from None

    def __getitem__(self, name: str) -> "Function":
        try:
            return self._functions[name]
        except KeyError:
            raise KeyError(f"module has no function `{name}`") from None

    def __contains__(self, name: str) -> bool:
        return name in self._functions

    def __iter__(self):
        raise TypeError("an arr module is not iterable: `mod.functions` lists the names of its functions")

    def __dir__(self):
        return sorted(set(self.functions) | set(super().__dir__()))

    def __reduce__(self):
        raise TypeError(_NOT_PICKLED.format("module"))

    def __copy__(self):             # (its functions are pure and its caches only grow: copies may share them)
        return self

    def __deepcopy__(self, memo):
        return self

    @property
    def source(self) -> Source:
        """The source text it was compiled from (the first, if it was made of several)."""
        return next(iter(self._program.sources.values()))

    @property
    def sources(self) -> dict:
        return self._program.sources

    @property
    def functions(self) -> list[str]:
        return [n for n in self._functions if not n.startswith("__")]

    def expression(self, expr, source: Source | None = None, label: str = "the expression") -> "Function":
        """A function of no arguments computing the arr expression `expr` with this module's names in scope:
        its text, or its AST parsed from `source`; reports call it `label`.

        >>> loads("const K: i32 = 3\\n").expression("K * 2.5")().item()
        7.5
        """
        from arrc.compiler.program import expression_function
        if isinstance(expr, str):
            source = Source("<expr>", expr)
            expr = parse(source, start="expr")
        elif not isinstance(expr, ast.Node):
            _require_text(expr, "expression takes an arr expression's text", "mod.expression(data.decode())")
        elif source is None:
            raise TypeError("an expression given as its AST needs the source it was parsed from")
        name = expression_function(self._program, expr, source, f"__expr_{len(self._functions)}__", label)
        fn = Function(self, name, {**self.sources, source.name: source})
        self._functions[name] = fn
        return fn


class Function:
    # `f(...)` calls `f._entry`: jaxlib's C++ dispatcher once the first call has made it, so a call with
    # argument types seen before runs without a Python frame (as `jax.jit` does); else the Python path.
    # A property, because Python looks `__call__` up on the type.
    __call__ = property(operator.attrgetter("_entry"))

    def __init__(self, module: Module, name: str, sources: dict | None = None):
        self.module = module
        self.name = name
        self.sources = module.sources if sources is None else sources    # for its diagnostics and reports
        self._sig = module._program.signatures[name]
        # Key parameters take JAX's key data (passes/key_words.py), on the C++ fast path; key results are
        # arr's packed words, made JAX's typed keys by the Python path (`_as_jax_keys`).
        self._key_params = tuple(i for i, (_, p, _) in enumerate(self._sig.params) if p.dtype.is_key)
        self._key_results = any(t.dtype.is_key for t in self._sig.results)
        self._keys = bool(self._key_params) or self._key_results
        self._compiled: dict = {}
        # Argument keys (`_argument_key`) of calls made before -> their types and program: the Python
        # path's own dispatch, for the calls jaxlib's cannot run (guards, effects; ~60 us less a call).
        self._known: dict = {}
        # The types of a fast call's results -> the results filter of the program that returns them.
        self._checks: dict = {}
        self._lock = threading.Lock()
        self._jax: dict = {}        # what arrc/interop.py makes for this function (`_kept`): it dies with it

    @property
    def signature(self) -> str:
        return str(self._sig)

    def __repr__(self) -> str:
        return f"<arr function {self.shown_name}{self._sig}>"

    @property
    def __signature__(self):
        """Its parameters for `inspect.signature` (which cannot read them from `__call__`, a property), each
        positional or keyword, with its default."""
        import inspect
        defaults = {name: value.tolist() for name, (_, value, _) in self._sig.defaults.items()}
        return inspect.Signature([inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                    default=defaults.get(name, inspect.Parameter.empty))
                                  for name, _, _ in self._sig.params])

    def __reduce__(self):
        raise TypeError(_NOT_PICKLED.format("function"))

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    @property
    def shape_vars(self) -> list[str]:
        return list(self._sig.shape_vars)

    def arg_types_for(self, shapes: dict[str, int]) -> list[ArrayType]:
        """Concrete argument types with each shape variable set from `shapes` (e.g. for `--shape n=8`)."""
        missing = [v for v in self._sig.shape_vars if v not in shapes]
        if missing:
            raise ArgumentError(f"{self.shown_name}{self._sig} needs a size for shape variable `{missing[0]}` "
                                f"(e.g. --shape {missing[0]}=8)")
        return [t.subs(shapes) for _, t, _ in self._sig.params]

    def as_jax(self):
        """This function as one JAX can trace: under `jax.jit`, `jax.grad`, `jax.vjp` and `jax.vmap`, its
        StableHLO merged into JAX's (arrc/interop.py, docs/interop.md). Its prints print, and a failed assert
        or a guard's fault raises arr's error from the JAX call that ran it."""
        from arrc.interop import as_jax
        if self.module.guard_kinds & {"nan", "inf"} and self.module.guard_scope == "results":
            raise TypeError(f"{self.shown_name}: under as_jax the nan and inf guards check every operation: load "
                            f"the module with guard_scope=\"all-ops\" (JAX's code reads the results, which arrc "
                            f"cannot check after it; docs/interop.md)")
        return as_jax(self, _derivative_for_jax, _vmap_lanes_first, ArgumentError)

    def _as_jax_spmd(self, origins: bool = False):
        """`as_jax` for arrc/sharding.py: the run id of its callbacks first, nan/inf at the results left to it;
        with `origins`, its origin build."""
        from arrc.interop import as_jax
        return as_jax(self, _derivative_for_jax, _vmap_lanes_first, ArgumentError, spmd=True, origins=origins)

    def sharded(self, mesh, in_specs=None, out_specs=None):
        """This function as one SPMD program over `mesh` (`arrc.mesh(data=4, model=2)`): argument i split as
        `in_specs[i]` (a tuple of mesh axis names or None per dimension, or None: replicated), the results as
        `out_specs` (None: as XLA chooses). Returns a callable (arrc/sharding.py, docs/sharding.md)."""
        from arrc.sharding import Sharded
        return Sharded(self, mesh, in_specs, out_specs, ArgumentError)

    def lower(self, *args, guarded: bool = False, **kwargs) -> Lowered:
        """Specialize to the arguments' types and lower to StableHLO, as `jax.jit(f).lower(*args)`: each
        argument an `arrc.spec(...)` type, a NumPy or JAX array or a `jax.ShapeDtypeStruct` (its shape and
        dtype), or a Python scalar (the parameter's dtype, as a call takes it), bound as a call binds them
        (by position or name, defaults filled).

        The text is the front end's StableHLO (`arrc compile --emit stablehlo`), without guards; with
        `guarded=True`, the module the runtime compiles: after the passes, with the module's guards (all
        kinds if it has none, as `--emit guarded`).

        >>> mod = loads("def f(x: f32[n]) -> f32[n]:\\n    return x / 2.0\\n")
        >>> "tensor<3xf32>" in mod.f.lower(np.ones(3, np.float32)).as_text()
        True
        """
        types = self._types_of(args, kwargs)
        lowered = self._lower(types)
        if guarded:
            from arrc.passes.guards import KINDS, GuardOptions
            from arrc.runtime.pipeline import apply_passes, passes_for
            kinds = self.module.guard_kinds or frozenset(KINDS)
            apply_passes(lowered.module, lowered.context,
                         passes_for(GuardOptions(kinds, self.module.guard_scope, False)), self.sources)
        lowered.compile_for_types = lambda: self.compile(*types)
        return lowered

    def _lower(self, types: list[ArrayType]) -> Lowered:
        self._check_types(types)
        made = self.module._program.take_lowered(self.name, types)
        if made is not None:
            return made
        try:
            with _gc_paused():
                return ModuleLowering(self.module._program).lower(self.name, list(types))
        except CompileError as err:
            raise CompileError(err.diagnostics, {**self.sources, **err.sources}) from None

    def _types_of(self, args: tuple, kwargs: dict) -> list[ArrayType]:
        """The concrete types of `lower`/`compile`'s arguments (`_arg_type`; bound as in a call)."""
        return [_arg_type(a, ptype, pname)
                for a, (pname, ptype, _) in zip(self._positional(args, kwargs), self._sig.params)]

    def _check_types(self, types: list[ArrayType], values: list | None = None, narrowed: bool = False) -> dict:
        """`types` against the signature; a mismatch is an ArgumentError that says what to do about a dtype
        (`_dtype_hint`, which looks at the argument `values` where there are some; `narrowed`: `_check_operands`).
        Returns the shape variables' sizes."""
        if len(types) != len(self._sig.params):
            raise ArgumentError(f"{self.shown_name}{self._sig} takes {len(self._sig.params)} argument(s), "
                                f"{len(types)} given")
        try:
            return unify(self._sig, [Val(t) for t in types], [s for *_, s in self._sig.params], None)
        except ArrError as err:
            message = err.diag.message + "".join(f"; {n}" for n in err.diag.notes)
            mapped, wrappers = ast.mapped_function(self.name)   # (of arrc.vmap's wrapper, f's parameter is declared)
            raise ArgumentError(message + _dtype_hint(self._sig.params, types, values, narrowed,
                                                      mapped if wrappers else None)) from None

    def _check_operands(self, values: list, traced: bool) -> None:
        """`as_jax`'s operands (`_python_argument`'s, a key's words) checked as a call checks its arguments.
        `traced`: inside a JAX trace, where with JAX's 64-bit mode off JAX makes a 64-bit value 32 bits (an
        argument of `jax.jit` before arr sees it, a NumPy array as it is bound): checked as JAX makes it."""
        import jax
        narrowed = traced and _x64_off()
        types = []
        for v, (name, p, _) in zip(values, self._sig.params):
            _check_sizes(v.shape, name, p)
            t = _type_of_value(v, p)        # (a key's words: `_type_of_value` drops their last dimension)
            if narrowed and p.dtype.is_64bit and not p.dtype.is_key:
                t = ArrayType(dtype_of_numpy(jax.dtypes.canonicalize_dtype(v.dtype)), t.shape)
            types.append(t)
        self._check_types(types, values, narrowed)

    def _first_call(self, /, *args, **kwargs):       # (`/`: an arr parameter may be named `self`)
        """Make the C++ dispatcher (it needs jax, so not before the first call), then call through it; a
        function whose results are checked for NaN/Inf gets a second one for the check (`_checking`)."""
        from arrc.runtime.pjrt import dispatcher
        main = dispatcher(self.name, self._dispatch_miss)
        if main is not None and self._returns_past:
            main = self._reading_past(main)
        if main is not None and self._checks_results:
            main = self._checking(main, dispatcher(self.name, self._check_miss))
        self._entry = main or self._call_plain
        return self._entry(*args, **kwargs)

    @property
    def _checks_results(self) -> bool:
        """Whether its fast build checks the results for NaN/Inf (passes/guards.py `results_check`). Not one
        with effects: each of its calls is a full call, which checks them (and a second would print again)."""
        return bool(self.module.guard_kinds & {"nan", "inf"}) and self.module.guard_scope == "results" \
            and any(t.dtype.is_float for t in self._sig.results) and not self._keys \
            and self.name not in self.module._program.effectful

    @property
    def checks_bounds(self) -> bool:
        """Whether a derivative in it checks a loop's `bound=` (compiler/effects.py PAST)."""
        return self.name in self.module._program.checks_bounds

    @property
    def _returns_past(self) -> bool:
        """Whether its module returns the first run of a loop past its bound in a derivative, as a last
        result (compiler/effects.py PAST; a function with effects reports it by a callback instead)."""
        program = self.module._program
        return self.name in program.checks_bounds and self.name not in program.effectful

    def _reading_past(self, main):
        """A call through `main` (the dispatcher), which returns the results and the PAST value last
        (`_dispatch_miss` too); where a loop ran past its bound, the full call runs again and raises
        its report (R0006)."""
        full, read = self._call, pjrt.read_when_ready
        # `**kwargs` passed on empty costs ~4 us a call; a single result unpacked as a list then indexed, ~2.5
        if self._sig.tuple_result:
            def call(*args, **kwargs):
                *out, past = main(*args, **kwargs) if kwargs else main(*args)
                if read(past, 1, self._polls):
                    return full(args, kwargs)[0]
                return tuple(out)
            return call

        def call_one(*args, **kwargs):
            out, past = main(*args, **kwargs) if kwargs else main(*args)
            if read(past, 1, self._polls):
                return full(args, kwargs)[0]
            return out
        return call_one

    _polls = False      # per instance: whether a program its dispatchers run is not inline (`_dispatch_miss`,
                        # `_check_miss`): its small results are then read polling (`read_when_ready`)

    def _checking(self, main, check):
        """A call through `main` (the dispatcher), then a test of the float results, both without a Python
        frame of arrc's on a hit: a scalar's value read, arrays tested on the host where they are few and
        on the CPU (runtime/pjrt.py `finite_on_host`), else the results filter (runtime/call.py
        `Compiled.results_filter`) through `check`, a dispatcher of its own. The test ends before the call
        returns: the call stays synchronous, and a fault raises from the call that made it, as an
        `arrc.GuardError`. Where the test does not prove the results finite, the full call runs the
        function again, checks each element and raises the report if there is a fault (a function is pure:
        running it twice repeats nothing)."""
        full, tuple_result, read = self._call, self._sig.tuple_result, pjrt.read_when_ready
        scalars = [i for i in self._sig.float_results if self._sig.results[i].rank == 0]
        arrays = [i for i in self._sig.float_results if self._sig.results[i].rank > 0]
        on_host = self.module.device == "cpu"

        def call(*args, **kwargs):
            out = main(*args, **kwargs) if kwargs else main(*args)
            leaves = out if tuple_result else (out,)
            for i in scalars:           # (read: ~1 us each)
                if not math.isfinite(read(leaves[i], 0, self._polls)):
                    return full(args, kwargs)[0]
            if arrays:
                clean = pjrt.finite_on_host([leaves[i] for i in arrays], self._polls) if on_host else None
                if clean is None:
                    clean = not read(check(out), 0, self._polls)
                if not clean:
                    return full(args, kwargs)[0]
            return out
        return call

    def _check_miss(self, out):
        """The check dispatcher's miss: the results filter of the program that returned `out`, run, and
        handed to the dispatcher (results with these types come from that program: `_dispatch_miss`)."""
        leaves = list(out) if isinstance(out, tuple) else [out]
        compiled = self._checks.get(_result_key(leaves))
        check = compiled.results_filter if compiled is not None else None
        if check is None:           # (a program with nothing to check: only empty float results)
            return np.False_, None, False
        if not check.runs_inline:
            self._polls = True
        return check(leaves)[0], check.fastpath(leaves, "single"), False

    _entry = _first_call                # per instance, the first call replaces it

    def _call_plain(self, /, *args, **kwargs):
        return self._call(args, kwargs)[0]

    def _dispatch_miss(self, /, *args, **kwargs):
        """The dispatcher has not seen these argument types: make the full call, and hand it the
        executable to run itself next time (positional calls of one without effects or guards)."""
        results, compiled, tuple_result = self._call(args, kwargs)
        leaves = list(results) if tuple_result else [results]
        # as the executable returns them (`_reading_past` reads the PAST value, which `_call` checked)
        out = leaves + [_NO_PAST] if self._returns_past else results
        if compiled is None:            # (an SPMD call: jax.jit's own dispatcher runs it)
            return out, None, False
        if not compiled.executable.runs_inline:     # (its results are read polling: `read_when_ready`)
            self._polls = True
        if compiled.check is not None and self._checks_results:
            self._checks[_result_key(leaves)] = compiled      # (its results filter is compiled at its first use)
        fast = None
        names = [name for name, _, _ in self._sig.params]
        # jaxlib passes the positional arguments, then the keyword ones sorted by name: the executable's
        # parameter order only where the keywords are the last parameters in that order (all given)
        in_order = names[len(args):] == sorted(kwargs)
        if in_order and compiled.run_arg is None and (compiled.check is None or self._checks_results) \
                and not compiled.may_not_end \
                and not self._key_results:
            given = list(args) + [kwargs[name] for name in sorted(kwargs)]
            transferred = [_as_dispatched(a, p) for a, (_, p, _) in zip(given, self._sig.params)]
            if all(t is not None for t in transferred):
                fast = compiled.executable.fastpath(transferred, "list" if self._returns_past else
                                                    "tuple" if tuple_result else "single")
        return out, fast, False

    def _call(self, args, kwargs):
        """The full call: bind and check the arguments, compile if needed, run, raise faults.
        Returns (result, the runtime.call.Compiled that ran, whether the result is a tuple); a call on arguments
        sharded over several devices runs as one SPMD program (arrc/sharding.py; None for the Compiled)."""
        from arrc.sharding import spans_devices
        self._refuse_tracers(args, kwargs)
        if spans_devices(args) or kwargs and spans_devices(kwargs.values()):
            from arrc.sharding import spmd_call
            return spmd_call(self, self._positional(args, kwargs), ArgumentError), None, self._sig.tuple_result
        key = _argument_key(args) if not kwargs and not self._keys and len(args) == len(self._sig.params) \
            else None
        known = self._known.get(key) if key is not None else None
        if known is not None:       # an earlier call's types: no binding or checking again
            types, compiled, tuple_result = known
            values = [_as_taken(a, p, name) for a, (name, p, _) in zip(args, self._sig.params)]
        else:
            values = self._bind(args, kwargs)
            types = tuple(_type_of_value(v, p) for v, (_, p, _) in zip(values, self._sig.params))
            self._check_types(types, values)
            compiled, tuple_result = self._build(types, origins=False)
            if key is not None:
                self._known[key] = types, compiled, tuple_result
        results, state = compiled(values)
        if state is not None:
            self._raise_faults(state, tuple(types), values)
        if self._keys:
            results = [_as_jax_keys(r) if t.dtype.is_key else r for r, t in zip(results, self._sig.results)]
        return (tuple(results) if tuple_result else results[0]), compiled, tuple_result

    def compile(self, *args, **kwargs) -> "Compiled":
        """Specialize and compile for the arguments' types now (calls with those types then only run);
        the arguments as for `lower`. Returns the function for those types only, as JAX's `Compiled`."""
        types = self._types_of(args, kwargs)
        self._check_types(types)
        self._build(tuple(types), origins=False)
        return Compiled(self, types)

    def _build(self, types: tuple, origins: bool):
        """The compiled program for `types`: the fast build, or the origin build used after a fault."""
        key = (types, origins)
        found = self._compiled.get(key)
        if found is not None:
            return found
        with self._lock:
            found = self._compiled.get(key)
            if found is None:
                from arrc.passes.guards import GuardOptions
                from arrc.runtime.pipeline import compile_lowered
                lowered = self.lower(*types)
                options = GuardOptions(self.module.guard_kinds, self.module.guard_scope, origins)
                found = (compile_lowered(lowered, self.sources, options, self.module.device, self._key_params),
                         lowered.tuple_result)
                self._compiled[key] = found
        return found

    def _raise_faults(self, state, types: tuple, values: list) -> None:
        from arrc.runtime.guards import raise_faults

        def origin_run():
            origin_build, _ = self._build(types, origins=True)
            return origin_build(values, quiet=True)[1]
        raise_faults(state, self.module.guard_scope, origin_run, self.shown_name, self.sources)

    @property
    def shown_name(self) -> str:
        """What reports call it (`the expression`, `the cell` for functions without a name of their own)."""
        return self.module._program.functions[self.name].shown_name

    def _python_argument(self, value, i: int):
        """A value given for parameter i, as a call takes it: a list or Python scalar in its dtype (checked), an
        array as it is (its dtype supported)."""
        pname, ptype, _ = self._sig.params[i]
        return _to_array(value, ptype, pname)

    def _traced_scalar(self, value, i: int):
        """A Python scalar that jax.jit traced (weakly typed, rank 0) for parameter i, in its dtype: its kind
        checked as a call checks a Python scalar's (its range cannot be: it is a run-time value)."""
        import jax.numpy as jnp
        pname, ptype, _ = self._sig.params[i]
        _check_kind(np.dtype(value.dtype), ptype, pname)
        return jnp.asarray(value, ptype.dtype.np)

    def _bind(self, args, kwargs) -> list:
        return [_to_array(value, ptype, name) for value, (name, ptype, _) in
                zip(self._positional(args, kwargs), self._sig.params)]

    def _refuse_tracers(self, args, kwargs) -> None:
        """A call inside jax.jit, grad or vmap gets JAX's tracers, not values: an ArgumentError that says what
        runs there (`as_jax`), where JAX's ConcretizationTypeError came from arrc's own code."""
        from jax.core import Tracer

        def traced(value) -> bool:      # (a list of them too: `f([x[0], x[1]])`)
            return isinstance(value, Tracer) or isinstance(value, (list, tuple)) and any(map(traced, value))
        names = [name for name, _, _ in self._sig.params][:len(args)] + list(kwargs)
        for name, value in zip(names, [*args, *kwargs.values()]):
            if traced(value):
                raise ArgumentError(f"argument `{name}` is a JAX tracer: `{self.shown_name}` is called inside a JAX "
                                    f"transformation (jax.jit, jax.grad, jax.vmap); call its `as_jax()` there "
                                    f"(e.g. `mod.f.as_jax()(...)`), which JAX traces")

    def _positional(self, args, kwargs) -> list:
        """The arguments in the order of the parameters: keywords placed, defaults filled (as a call binds)."""
        params = self._sig.params
        if len(args) > len(params):
            raise ArgumentError(f"{self.shown_name}{self._sig} takes {len(params)} argument(s), {len(args)} given")
        by_name = dict(zip([p[0] for p in params], args))
        for k, v in kwargs.items():
            if k not in [p[0] for p in params]:
                raise ArgumentError(f"{self.shown_name}() has no parameter `{k}`")
            if k in by_name:
                raise ArgumentError(f"{self.shown_name}() got `{k}` twice")
            by_name[k] = v
        for name, (_, value, _) in self._sig.defaults.items():
            by_name.setdefault(name, value)
        missing = [p[0] for p in params if p[0] not in by_name]
        if missing:
            raise ArgumentError(f"{self.shown_name}{self._sig} takes {len(params)} argument(s), "
                                f"{len(args) + len(kwargs)} given: missing argument `{missing[0]}`")
        return [by_name[name] for name, _, _ in params]


def _index(i) -> int | None:
    """An integer argument as JAX takes one (a Python or NumPy integer, not a bool), else None."""
    if isinstance(i, (bool, np.bool_)):
        return None
    try:
        return operator.index(i)
    except TypeError:
        return None


def _refuse_sharded(fn, kind: str) -> None:
    """A TypeError saying how to transform a sharded function (`f.sharded(mesh)`, arrc/sharding.py), if `fn` is
    one: the transformation first, then `.sharded`."""
    from arrc.sharding import Sharded               # (only on the way to a TypeError)
    if isinstance(fn, Sharded):
        raise TypeError(f"{kind} takes an arr function, not a sharded one ({fn!r}): transform the function first, "
                        f"then shard the result: `arrc.{kind}(mod.{fn.fn.name}).sharded(mesh, ...)`")


def value_and_grad(fn: Function, argnums=0) -> "Derivative":
    """`jax.value_and_grad(f, argnums)` for an arr function: a Function returning (value, derivatives), the
    derivatives one array for an int `argnums`, a tuple for a tuple."""
    return Derivative(fn, argnums, "value_and_grad")


def grad(fn: Function, argnums=0) -> "Derivative":
    """`jax.grad(f, argnums)` for an arr function: a Function returning the derivatives of its float scalar
    result with respect to the arguments `argnums` (an int: one array; a tuple: a tuple of them)."""
    return Derivative(fn, argnums, "grad")


def vjp(fn: Function) -> "Derivative":
    """`jax.vjp` for an arr function: a Function of (its arguments..., a cotangent of each result) returning
    (its value, the cotangents of all its arguments as a tuple), the vector-Jacobian product.

    >>> v = vjp(loads("def f(x: f64[2]) -> (f64, f64[2]):\\n    return sum(x), x * x\\n").f)
    >>> v.signature
    '(x: f64[2], cotangent0: f64, cotangent1: f64[2]) -> (f64, f64[2], f64[2])'
    >>> v([1.0, 2.0], 1.0, [1.0, 1.0])[1][0].tolist()
    [3.0, 5.0]
    """
    return Derivative(fn, None, "vjp")


def jvp(fn: Function) -> "Derivative":
    """`jax.jvp` for an arr function: a Function of (its arguments..., a tangent of each argument) returning
    (its value, the tangent of its value: J t), the Jacobian-vector product, each a tuple where the function
    returns one.

    >>> j = jvp(loads("def f(x: f64[2]) -> f64:\\n    return sum(x * x)\\n").f)
    >>> j.signature
    '(x: f64[2], x_dot: f64[2]) -> (f64, f64)'
    >>> j([1.0, 2.0], [1.0, 0.0])[1].item()
    2.0
    """
    return Derivative(fn, None, "jvp")


def vmap(fn: Function, in_axes=0, out_axes=0) -> Function:
    """`jax.vmap(f, in_axes, out_axes)` for an arr function: a Function over a batch of lanes, f called once
    per lane. `in_axes`: an int, None (the argument is shared by every lane) or a tuple of those, one per
    argument; `out_axes` likewise per result. It is arr's `vmap(f, ...)(...)` (compiler/batching.py) in a
    function added to a copy of f's module.

    >>> v = vmap(loads("def f(x: f32[3], a: f32) -> f32:\\n    return sum(x) * a\\n").f, in_axes=(0, None))
    >>> v.signature
    '(x: f32[lanes, 3], a: f32) -> f32[lanes]'
    >>> v([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], 2.0).tolist()
    [12.0, 30.0]
    """
    if type(fn) is not Function:
        _refuse_sharded(fn, "vmap")
        raise TypeError(f"vmap takes a function of an arr module (e.g. `mod.f`), not {fn!r}: for a derivative, "
                        f"write `vmap` and `grad` in arr, or transform in JAX: `jax.vmap(jax.grad(mod.f.as_jax()))`")
    if fn._returns_past:    # (the check's E0216 would point into the wrapper's text, which the user never wrote)
        raise TypeError(f"vmap of `{fn.name}`, whose derivative checks a loop's bound, is not supported yet (E0216): "
                        f"`jax.vmap(mod.{fn.name}.as_jax())` runs it lane by lane")
    sig = fn._sig
    ins, outs = _axes(in_axes, len(sig.params), "in_axes"), _axes(out_axes, len(sig.results), "out_axes")
    if None in outs:        # (the check's E0204 would point into the wrapper's text, which the user never wrote)
        raise ValueError(f"out_axes: every result has its lanes, so each needs an axis (e.g. out_axes=0), not "
                         f"{out_axes!r}")
    if not isinstance(in_axes, (tuple, list)):      # a parameter left to its default is shared (jax.vmap's
        ins = [None if name in sig.defaults else a for a, (name, _, _) in zip(ins, sig.params)]  # in_axes=0 too)
    if all(a is None for a in ins):
        raise ValueError(f"vmap needs an argument with an axis to map over; in_axes is {in_axes!r} (as jax.vmap)")
    program = fn.module._program        # (its constants given from Python and its externs too)
    taken = set(sig.shape_vars) | {name for name, _, _ in sig.params} | set(program.functions) | set(program.consts)
    lanes = next(v for v in ("lanes", *(f"lanes{i}" for i in range(1, 999))) if v not in taken)
    sources = list(program.sources.values())
    if len(sources) != 1 or fn.name not in program.functions:
        raise TypeError(f"vmap takes a function of a module compiled from one source, not {fn!r}")
    params = ", ".join(f"{name}: {_with_lanes(t, axis, lanes)}" + (f" = {sig.defaults[name][2]}" if axis is None
                       and name in sig.defaults else "") for (name, t, _), axis in zip(sig.params, ins))
    results = [_with_lanes(t, axis, lanes) for t, axis in zip(sig.results, outs)]
    shown = f"({', '.join(results)})" if sig.tuple_result else results[0]
    axes = ", ".join("None" if a is None else str(a) for a in ins)
    wrapper = ast.WRAPPER_PREFIX + fn.name      # (the vmap it calls is one nothing shadows: VMAP_OF_API)
    text = (f"\n\ndef {wrapper}({params}) -> {shown}:\n    return {ast.VMAP_OF_API}({fn.name}, in_axes=({axes},), "
            f"out_axes=({', '.join(map(str, outs))},))({', '.join(name for name, _, _ in sig.params)})\n")
    constants = {name: _as_jax_keys(value) if program.const_types[name].dtype.is_key else value
                 for name, value in program.externals.items()}
    module = loads(sources[0].text.rstrip("\n") + "\n" + text, filename=sources[0].name, guards=fn.module.guards,
                   warnings="ignore", guard_scope=fn.module.guard_scope, device=fn.module.device,
                   constants=constants, externs=program.extern_functions)
    return module[wrapper]           # (reports name it `vmap(f)`: ast.FunctionDef.shown_name)


def _derivative_for_jax(fn: Function, kind: str):
    """What makes `fn`'s vjp or jvp with respect to its float arguments (None without any; a jvp, None unless
    its results are all floats; a vjp takes a cotangent of an integer result and ignores it), for
    arrc/interop.py: made when JAX differentiates `fn`."""
    floats = tuple(i for i, (_, t, _) in enumerate(fn._sig.params) if t.dtype.is_float)
    if not floats or kind == "jvp" and not all(t.dtype.is_float for t in fn._sig.results):
        return None
    return functools.partial(Derivative, fn, floats, kind, integer_results=True)


def _vmap_lanes_first(fn: Function, in_axes: tuple) -> Function:
    return vmap(fn, in_axes=in_axes, out_axes=0)


def _axes(axes, count: int, what: str) -> list:
    items = list(axes) if isinstance(axes, (tuple, list)) else [axes] * count
    if len(items) != count or not all(a is None or isinstance(a, int) and not isinstance(a, bool) for a in items):
        raise ValueError(f"{what} must be an int, None or a tuple of {count} of those, not {axes!r}")
    return items


def _with_lanes(t: ArrayType, axis, lanes: str) -> str:
    if axis is None:
        return str(t)
    dims = [str(d) for d in t.shape]
    if not -(len(dims) + 1) <= axis <= len(dims):
        raise ValueError(f"axis {axis} is out of range for {t} with its lanes")
    dims.insert(axis % (len(dims) + 1), lanes)
    return f"{t.dtype}[{', '.join(dims)}]"


class Compiled:
    """`fn.compile(*args)`, `fn.lower(*args).compile()`: `fn` compiled for those arguments' types, as JAX's
    `jax.jit(f).lower(x).compile()`; a call with arguments of other types is a TypeError (`fn` itself
    compiles for each), with the same types it is a call of `fn`."""

    def __init__(self, function: Function, types: list[ArrayType]):
        self.function, self.types = function, types

    def __call__(self, *args, **kwargs):
        types = self.function._types_of(args, kwargs)
        if types != self.types:
            shown = lambda ts: ", ".join(map(str, ts))
            raise TypeError(f"{self.function.shown_name} was compiled for ({shown(self.types)}), called with "
                            f"({shown(types)}): compile it for these, or call {self.function.shown_name}, which "
                            f"compiles for each")
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<arrc compiled {self.function.shown_name}({', '.join(map(str, self.types))})>"


class Derivative(Function):
    """The derivative of a Function, made by reverse mode over its StableHLO (passes/autodiff.py); called,
    lowered and compiled like any Function (guards cover the backward pass too). `kind`: grad,
    value_and_grad, vjp (the cotangents of the results are new last arguments) or jvp (the tangents of the
    arguments are)."""

    def __init__(self, base: Function, argnums, kind: str, integer_results: bool = False):
        """`argnums`: those of grad and value_and_grad; None (all the arguments) for vjp and jvp.
        `integer_results` (a vjp for arrc/interop.py): an integer result is allowed, its cotangent taken and
        ignored (JAX's float0)."""
        from arrc.compiler.check import Signature
        if not isinstance(base, Function):
            _refuse_sharded(base, kind)
            raise TypeError(f"{kind} takes an arr function (e.g. `mod.loss`), not {base!r}")
        super().__init__(base.module, base.name, base.sources)
        sig = base._sig
        argnums = tuple(range(len(sig.params))) if argnums is None and kind in ("vjp", "jvp") else argnums
        self._base, self._kind = base, kind
        self._keep_value = kind != "grad"
        self._single = _index(argnums) is not None
        wrt = (argnums,) if self._single else tuple(argnums) if isinstance(argnums, (tuple, list)) else None
        wrt = wrt and tuple(_index(i) for i in wrt)
        if not wrt and kind in ("grad", "value_and_grad") or None in (wrt or ()):
            raise TypeError(f"argnums must be an int or a tuple of ints, not {argnums!r}")
        n = len(sig.params)
        if any(not -n <= i < n for i in wrt):
            raise ValueError(f"argnums {argnums} is out of range for {base.name}{sig}, which has {n} parameter(s)")
        self._wrt = tuple(i % n for i in wrt)
        if base.module.warning_mode == "warn":
            from arrc.compiler.program import unbounded_loop_warnings
            for diag in unbounded_loop_warnings(base.module._program, kind, base.name):
                _warn(diag, base.module.sources)
        shown = "(" + ", ".join(map(str, sig.results)) + ")" if sig.tuple_result else str(sig.results[0])
        base_name = getattr(base, "label", base.name)        # (`grad(s)` for a derivative: its signature's)
        if kind in ("grad", "value_and_grad"):
            if sig.tuple_result or sig.results[0].rank or not sig.results[0].dtype.is_float:
                raise TypeError(f"grad needs a function with one float scalar result; {base_name}{sig} returns "
                                f"{shown}")
        elif not all(t.dtype.is_float for t in sig.results) and not (integer_results and kind == "vjp"):
            raise TypeError(f"{kind} needs a function with float results; {base_name}{sig} returns {shown}")
        for i in self._wrt:
            pname, ptype, _ = sig.params[i]
            if not ptype.dtype.is_float:
                raise TypeError(f"cannot differentiate with respect to `{pname}`: it is {ptype}, not a float "
                                f"array (derivatives are taken with respect to float arguments only)")
        self.label = f"{kind}({getattr(base, 'label', base.name)})"
        values = list(sig.results) if self._keep_value else []
        if kind == "jvp":
            extra = [(f"{name}_dot", t, span) for name, t, span in (sig.params[i] for i in self._wrt)]
            results = values + list(sig.results)
        else:
            names = ["cotangent"] if len(sig.results) == 1 else [f"cotangent{i}" for i in range(len(sig.results))]
            extra = list(zip(names, sig.results, sig.result_spans)) if kind == "vjp" else []
            results = values + [sig.params[i][1] for i in self._wrt]
        self._sig = Signature(self.label, sig.params + extra, results, [sig.result_spans[0]] * len(results),
                              len(results) > 1, sig.shape_vars, sig.defaults)
        self._entry = self._call_structured        # its results are restructured: not the C++ fast path

    def __repr__(self) -> str:
        return f"<arr function {self.label}{self._sig}>"

    @property
    def checks_bounds(self) -> bool:
        """It checks the `bound=` of each loop it differentiates with a run-time trip count too (its forward
        mode as well: compiler/autodiff.py `jvp` is made of reverse sweeps)."""
        from arrc.compiler.program import reachable
        program = self.module._program
        return self._base.checks_bounds or any(program.bounded_loops.get(f) for f in reachable(program, self._base.name))

    @property
    def shown_name(self) -> str:
        return self.label

    def _lower(self, arg_types: list[ArrayType]) -> Lowered:
        """The base function lowered for its own arguments' types, then differentiated (passes/autodiff.py)."""
        from arrc.passes.autodiff import ValueAndGrad
        from arrc.runtime.pipeline import apply_passes
        self._check_types(list(arg_types))
        base = self._base._sig
        lowered = self._base.lower(*arg_types[:len(base.params)])
        hidden = 2 if lowered.effect_sites else 0          # the run id and io token of prints and asserts
        apply_passes(lowered.module, lowered.context,
                     [ValueAndGrad.of(self._kind, tuple(i + hidden for i in self._wrt))], self.sources)
        values = lowered.result_types if self._keep_value else []
        lowered.arg_types = list(arg_types)
        lowered.result_types = values + (lowered.result_types if self._kind == "jvp" else
                                         [list(arg_types)[i] for i in self._wrt])
        lowered.tuple_result = len(lowered.result_types) > 1
        return lowered

    def _call_structured(self, /, *args, **kwargs):
        """The flat results as JAX gives them: `g`, `(g0, g1)`, `(value, g)`, `(value, (g0, g1))`, and for
        a function with several results `((y0, y1), ...)`."""
        out = self._call(args, kwargs)[0]
        flat = list(out) if isinstance(out, tuple) else [out]
        base = self._base._sig
        k = len(base.results) if self._keep_value else 0
        values, derivs = flat[:k], flat[k:]
        value = tuple(values) if base.tuple_result else values[0] if values else None
        if self._kind == "jvp":
            deriv = tuple(derivs) if base.tuple_result else derivs[0]
        else:
            deriv = derivs[0] if self._single else tuple(derivs)
        return (value, deriv) if self._keep_value else deriv


def _as_jax_keys(result):
    """Keys computed by arr (uint64 words) as JAX typed keys (Threefry-2x32), as `jax.random.key` gives."""
    import jax
    return jax.random.wrap_key_data(key_words(np.asarray(result)))


def _to_keys(value, ptype: ArrayType, pname: str):
    """A `key` argument: a JAX typed key array (Threefry-2x32, e.g. `arrc.key(0)`, `jax.random.key(0)`) or
    raw key data, a uint32 `[..., 2]` array (`jax.random.PRNGKey(0)`), as its u32 words, which the
    executables the API compiles take (passes/key_words.py): a jax array stays where it is."""
    try:
        data = typed_key_data(value)
    except TypeError as err:
        raise ArgumentError(f"argument `{pname}`: {err}") from None
    if data is not None:
        return data
    if not hasattr(value, "dtype") or np.dtype(value.dtype).newbyteorder("=") != np.uint32 or value.ndim == 0 \
            or value.shape[-1] != 2:
        raise ArgumentError(f"argument `{pname}` must be {ptype}: a JAX key (`arrc.key(0)`, `jax.random.key(0)`) "
                            f"or key data, a uint32 array of shape [..., 2] (`jax.random.PRNGKey(0)`)")
    if _is_jax_array(value):
        return value
    return np.asarray(value, np.uint32)     # (words in the other byte order, e.g. read from a file: this machine's)


_NO_PAST = np.zeros(2, np.int64)      # compiler/effects.py PAST: no loop ran past its bound


def _result_key(results: list) -> tuple:
    return tuple((r.shape, r.dtype) for r in results)


def _argument_key(args: tuple) -> tuple | None:
    """What a call's argument types are made of, as jaxlib's dispatcher keys them: each NumPy or jax
    array's exact dtype and shape, a Python scalar's type (its value is checked by `_as_taken`);
    None for anything else (lists, NumPy scalars, other objects: the full path converts or refuses)."""
    key = []
    for a in args:
        t = type(a)
        if (t is np.ndarray and a.dtype.isnative) or t is pjrt._ArrayImpl:
            key.append((t, a.dtype, a.shape))
        elif t in (bool, int, float):
            key.append(t)
        else:
            return None
    return tuple(key)


def _as_dispatched(value, ptype: ArrayType):
    """An argument as the C++ dispatcher transfers it (a Python scalar as runtime/pjrt.py
    `transferred_scalar` makes it), or None where that is not what the parameter takes (a Python float
    for an f64 parameter with jax_enable_x64 off: the Python path converts it)."""
    if type(value) not in (bool, int, float):
        return value
    leaf = pjrt.transferred_scalar(value)
    return leaf if leaf is not None and ptype.rank == 0 and leaf.dtype == ptype.dtype.np else None


def _as_taken(value, ptype: ArrayType, pname: str):
    """An argument of a call whose argument types are known (`Function._known`): a Python scalar as
    `_to_array` makes it (the cheap case first: its default dtype's, `scalar_argument`), an array as it is."""
    if type(value) not in (bool, int, float):
        return value
    leaf = pjrt.scalar_argument(value)
    if leaf is not None and leaf.dtype == ptype.dtype.np:
        return leaf
    return _to_array(value, ptype, pname)


def _check_kind(dtype: np.dtype, ptype: ArrayType, pname: str, rank: int = 0) -> None:
    """A Python value's kind must fit its parameter's: a bool a bool, an int any int or float, a float a float
    (`rank`: of the value, a list's)."""
    kind, pk = dtype.kind, ptype.dtype.kind
    if not ((kind == "b" and pk == "bool") or (kind in "iu" and pk in ("int", "uint", "float")) or
            (kind == "f" and pk == "float")):
        noun = {"b": "bool", "i": "int", "u": "int", "f": "float", "c": "complex", "U": "str", "S": "bytes"}.get(kind)
        plural = "complex numbers" if noun == "complex" else f"{noun}s"
        what = (f"is a Python {noun}" if noun else "is not a number") if rank == 0 else \
            f"holds Python {plural}" if noun else "holds values that are not all numbers of one kind"
        raise ArgumentError(f"argument `{pname}` {what}, expected {ptype}")


def _to_array(value, ptype: ArrayType, pname: str):
    """NumPy/JAX arrays keep their dtype (checked); Python scalars and lists take the parameter's dtype.
    A NumPy array in the other byte order (e.g. `'>f4'` read from a file) is taken as the same numbers in
    this machine's order, as `np.asarray(x, np.float32)` would. Keys: `_to_keys`."""
    if ptype.dtype.is_key:
        return _to_keys(value, ptype, pname)
    try:
        import jax
        if isinstance(value, jax.Array):
            if jax.dtypes.issubdtype(value.dtype, jax.dtypes.prng_key):
                raise ArgumentError(f"argument `{pname}` is a JAX key ({value.dtype}), expected {ptype}")
            if dtype_of_numpy(value.dtype) is None:
                raise ArgumentError(f"argument `{pname}`: unsupported dtype {value.dtype}")
            return value
    except ImportError:
        pass
    if isinstance(value, np.ndarray) or isinstance(value, np.generic):
        arr = np.asarray(value)
        if not arr.dtype.isnative:
            arr = arr.astype(arr.dtype.newbyteorder("="))
        if dtype_of_numpy(arr.dtype) is None:
            raise ArgumentError(f"argument `{pname}`: unsupported dtype {arr.dtype}, expected {ptype}")
        return arr
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError) as err:
        if type(err).__name__ == "TracerArrayConversionError":     # (a list of a traced function's values)
            raise ArgumentError(f"argument `{pname}` is a list or tuple holding values that JAX traces: give it as one "
                                f"array (e.g. `jnp.stack(...)`), expected {ptype}") from None
        raise ArgumentError(f"argument `{pname}`: cannot convert to an array ({err}), expected {ptype}") from None
    if arr.dtype == object and arr.size and all(type(v) in (int, float) for v in arr.ravel()):
        if ptype.dtype.is_float:            # ints past 64 bits (NumPy holds i64's least to u64's largest); past
            arr = np.array([_as_float(v) for v in arr.ravel()]).reshape(arr.shape)     # f64's, inf as 1e400 is
        elif all(type(v) is int for v in arr.ravel()):
            raise ArgumentError(f"argument `{pname}`: value out of range for {ptype.dtype}")
    if arr.size == 0:       # an empty list holds no value of any kind (NumPy calls it float64)
        return np.empty(arr.shape, ptype.dtype.np)
    _check_kind(arr.dtype, ptype, pname, arr.ndim)
    if arr.dtype.kind in "iu" and ptype.dtype.is_int:
        from arrc.compiler.types import int_range
        lo, hi = int_range(ptype.dtype)
        if arr.size and (arr.min() < lo or arr.max() > hi):
            raise ArgumentError(f"argument `{pname}`: value out of range for {ptype.dtype}")
    # a float past the dtype's range is inf, as jnp.asarray makes it; a signalling NaN a quiet one: no warning
    with np.errstate(over="ignore", invalid="ignore"):
        return arr.astype(ptype.dtype.np)


def _as_float(v: int | float) -> float:
    try:
        return float(v)
    except OverflowError:           # (an int past f64's range)
        return math.inf if v > 0 else -math.inf


def _type_of_value(value, ptype: ArrayType) -> ArrayType:
    """The type of an argument as `_to_array`/`_to_keys` made it."""
    if ptype.dtype.is_key:          # (its words: `_to_keys`)
        return ArrayType(KEY, tuple(Dim.const(d) for d in value.shape[:-1]))
    return ArrayType(dtype_of_numpy(value.dtype), tuple(Dim.const(d) for d in value.shape))


def _check_sizes(shape, pname: str, ptype: ArrayType) -> None:
    """The sizes of an argument that JAX traced (`as_jax`), or of a `jax.ShapeDtypeStruct` (`lower`), are
    integers: a symbolic dimension (`jax.export.symbolic_shape("b")`) is an ArgumentError, where it was JAX's
    InconclusiveDimensionOperation. arr compiles a function for each call's sizes (an `extern` takes an
    Exported with symbolic dimensions at them; an arr function is not exported with them)."""
    symbolic = [str(d) for d in shape if not isinstance(d, (int, np.integer))]
    if symbolic:
        raise ArgumentError(f"argument `{pname}` has symbolic dimensions ({', '.join(symbolic)}), expected {ptype}: "
                            f"an arr function is compiled for concrete sizes, and symbolic dimensions "
                            f"(jax.export.symbolic_shape) are not supported here: give fixed shapes (under "
                            f"jax.export, an export per set of sizes)")


def _arg_type(arg, ptype: ArrayType, pname: str) -> ArrayType:
    """An argument of `lower`/`compile` as a concrete type: an ArrayType (`arrc.spec`), a
    `jax.ShapeDtypeStruct`, or a value that a call takes (NumPy or JAX array, Python scalar), as its type."""
    if isinstance(arg, ArrayType):
        return arg
    if isinstance(arg, (np.ndarray, np.generic, bool, int, float)):
        return _type_of_value(_to_array(arg, ptype, pname), ptype)
    import jax
    if isinstance(arg, jax.Array):
        return _type_of_value(_to_array(arg, ptype, pname), ptype)
    if isinstance(arg, jax.ShapeDtypeStruct):
        _check_sizes(arg.shape, pname, ptype)
        shape = tuple(Dim.const(int(d)) for d in arg.shape)
        if jax.dtypes.issubdtype(arg.dtype, jax.dtypes.prng_key):
            return ArrayType(KEY, shape)
        dtype = dtype_of_numpy(arg.dtype)
        if dtype is None:
            raise ArgumentError(f"argument `{pname}`: unsupported dtype {arg.dtype}, expected {ptype}")
        return ArrayType(dtype, shape)
    raise TypeError(f"argument `{pname}` of lower/compile must be a type (`arrc.spec(\"{ptype}\")` with "
                    f"concrete sizes), a NumPy or JAX array, a `jax.ShapeDtypeStruct` or a Python scalar, "
                    f"not {type(arg).__name__} (a list: `np.asarray(...)` first)")


def _numpy_name(dtype) -> str:
    """How NumPy spells an arr dtype in `x.astype(...)`: `np.float32`, `ml_dtypes.bfloat16`, `bool`."""
    name = np.dtype(dtype.np).name
    return "bool" if name == "bool" else "ml_dtypes.bfloat16" if name == "bfloat16" else f"np.{name}"


def _is_jax_array(value) -> bool:
    import jax
    return isinstance(value, jax.Array)


def _x64_off() -> bool:
    import jax
    return not jax.config.jax_enable_x64


def _dtype_hint(params: list, types: list[ArrayType], values: list | None, narrowed: bool = False,
                mapped: str | None = None) -> str:
    """What to do about the argument whose dtype or rank `unify` rejected (the first such, as it checks
    them in order); "" when the mismatch is one of sizes only. arr never converts an array argument between
    dtypes, so the hint says how to convert it or what to declare, and why not silently (docs/api.md).
    `narrowed`: JAX made 64-bit values 32 bits before arr saw them (`Function._check_operands`). `mapped`:
    the function an arrc.vmap wrapper maps, whose parameter the user would declare (the wrapper's has lanes)."""
    for i, ((pname, ptype, _), at) in enumerate(zip(params, types)):
        if at.dtype == ptype.dtype and at.rank == ptype.rank:
            continue
        if at.dtype == ptype.dtype or ptype.dtype.is_key or at.dtype.is_key or at.rank != ptype.rank or \
                any(d.is_const and a.is_const and d.value != a.value for d, a in zip(ptype.shape, at.shape)):
            return ""           # (its size differs too: neither converting nor declaring its dtype would do)
        value = values[i] if values is not None else None
        want, have = ptype.dtype, at.dtype
        declared = ArrayType(have, ptype.shape)
        convert = f"`{pname}.astype({_numpy_name(want)})`"
        if narrowed and want.is_64bit and have.kind == want.kind and have.bits == 32:
            return (f". JAX's 64-bit mode is off (its default), and under a JAX transformation (jax.jit, jax.grad, "
                    f"jax.vmap, ...) JAX makes every 64-bit value 32 bits before arr sees it: the value arrived as "
                    f"{have}, whatever it was given as (a {np.dtype(want.np).name} array arrives as "
                    f"{np.dtype(have.np).name}). Turn on JAX's 64-bit mode at start-up "
                    f"(`jax.config.update(\"jax_enable_x64\", True)`), or call the function outside JAX's "
                    f"transformations, where its {want} arguments stay {want} (docs/interop.md)")
        if value is not None and _is_jax_array(value) and want.is_64bit \
                and have.kind == want.kind and have.bits == 32 and _x64_off():
            return (f". It is a jax.Array of {np.dtype(have.np).name}, and JAX's 64-bit mode is off (its default): "
                    f"JAX computes in 32 bits, so if it came from a JAX operation on an arr {want} result (e.g. "
                    f"`r + 1`), that operation rounded it to {have}. Keep arr's results as NumPy arrays for your "
                    f"own arithmetic (`r = np.asarray(mod.f(...))`: NumPy keeps {np.dtype(want.np).name}), or turn "
                    f"on JAX's 64-bit mode at start-up: `jax.config.update(\"jax_enable_x64\", True)`; "
                    f"`np.asarray({pname}, {_numpy_name(want)})` widens the {have} values as they are "
                    f"(see docs/api.md)")
        default = "NumPy's default float dtype is float64. " if have.name == "f64" else \
            "NumPy's default integer dtype is int64 (`np.arange`, `np.array([1, 2])`). " if have.name == "i64" else ""
        if have.is_float and want.is_float and have.bits > want.bits:
            why = (f"{have} -> {want} loses precision, and arr never loses it silently, where JAX with its "
                   f"64-bit mode off truncates float64 to float32 without a word")
        elif have.kind == want.kind and have.bits > want.bits or have.is_float and not want.is_float:
            why = f"{have} -> {want} can change values, and arr never changes them silently"
        else:
            why = "an array argument's dtype is part of its type, as in the signature"
        declare = f"the parameter `{pname}` of `{mapped}` with dtype {have}" if mapped else \
            f"the parameter `{declared}`"
        return (f". {default}Convert it with {convert}, or declare {declare} "
                f"(arr does not convert it for you: {why}; see docs/api.md)")
    return ""
