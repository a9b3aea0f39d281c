"""The session's state and how a cell runs: definitions, bindings, and the modules compiled from them.

The session keeps the top-level items in order: definitions (`def`, `const`: their parsed AST, each with
spans in the cell or file it was written in) and value bindings (`name = expr`: a NumPy value, given to
the compiler as a host constant). Every evaluation compiles the module made of exactly the items it
depends on (found by following names through the definitions) with the *current* bindings, through
`arrc.api.from_items`; compiled code is cached under a key made of those items' serial numbers and the
bindings' versions. Rebinding a value or redefining a function changes the key of everything that
depends on it, so nothing can run a stale compiled version of anything it uses.

A statement cell runs as a function the session builds from the statement's AST (`cell_function`): the
bindings it assigns are its parameters and its results. Nothing is rewritten as text: every span the
compiler reports is already one in a cell or a file.
"""
from __future__ import annotations

import contextlib
import io
import sys
from collections import OrderedDict
from dataclasses import replace

import numpy as np

from arrc import api
from arrc.compiler import ast
from arrc.compiler.check import NAMED_CONSTANTS
from arrc.compiler.signals import raise_lost_interrupt
from arrc.compiler.diagnostics import CompileError, Diagnostic, Label, internal_error, plural, render_all
from arrc.compiler.fastparse import KEYWORDS as RESERVED_WORDS
from arrc.compiler.parse import decode, parse
from arrc.compiler.span import Source, Span
from arrc.compiler.types import DTYPES, host_keys
from arrc.exits import EXIT_COMPILE, EXIT_INTERNAL, EXIT_OK, EXIT_RUNTIME
from arrc.lexer import BUILTIN_NAMES
from arrc.runtime import pjrt
from arrc.runtime.reports import GuardError

from .cells import split_cells
from .commands import load_file, run_command
from .display import show
from .items import CELL_FN, CELL_LABEL, Binding, CellError, Item, StaticValue, assigned_names, cell_function
from .items import item_deps, names_used, span_text
from .reports import reported

KEYWORDS = tuple(sorted(RESERVED_WORDS))
RESERVED = set(KEYWORDS) | set(DTYPES) | set(NAMED_CONSTANTS) | set(BUILTIN_NAMES)
MAX_MODULES, MAX_EXPRESSIONS = 64, 256      # compiled code kept, least recently used dropped first


def static_value(mod, tree, source: Source, failure: CellError) -> None:
    """Raise StaticValue for an expression that is no array but is shown all the same: a dtype, as NumPy
    prints one (`x.dtype` is `float32`), a tuple of compile-time integers no function returns (`()`,
    `((1, 2), 3)`). Returns for anything else (`failure`, E0210, stands)."""
    from arrc.compiler.program import expression_value
    from arrc.compiler.types import numpy_dtype_name
    from arrc.compiler.values import DTypeVal, describe, tuple_text
    try:
        value = expression_value(mod._program, tree, {source.name: source})
    except CompileError:
        return
    if tuple_text(value) is not None:      # `()`, `((1, 2), 3)`: no function returns these
        raise StaticValue(describe(value), tuple_text(value), failure)
    if isinstance(value, DTypeVal):
        raise StaticValue("dtype", numpy_dtype_name(value.dtype), failure)


def expression_warnings(fn) -> list[Diagnostic]:
    """The warnings of the function `Module.expression` made (which raises its errors and keeps no
    warnings): its body checked again, as `check_module` checks every function."""
    from arrc.compiler.check import FunctionWalk
    from arrc.compiler.diagnostics import Reporter
    program = fn.module._program
    reporter = Reporter()
    FunctionWalk(program, program.functions[fn.name], reporter).run([])
    return [d for d in reporter.diagnostics if d.severity == "warning"]


def host_value(value):
    """A result kept by the session: a NumPy array, or JAX typed keys as the API returns them."""
    return value if host_keys(value) is not None else pjrt.as_numpy(value)


class Session:
    """One REPL session: its items, bindings and settings; `run(text)` runs one cell and prints."""

    def __init__(self, out=None, width: int = 75, color: bool = False, guards: str | None = None,
                 device: str = "cpu", err=None):
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else self.out     # diagnostics, notes, `interrupted`
        self.width = width
        self.color = color
        self.guards = guards
        self.device = device
        self.items: dict[str, Item] = {}
        self.bindings: dict[str, Binding] = {}
        self.sources: dict[str, Source] = {}        # every cell and file, for rendering diagnostics
        self.loaded: dict[str, list[str]] = {}      # file -> the names it defined
        self.cells = 0
        self.serials = 0
        self.exit_code = EXIT_OK                    # the first failing cell's code
        self.quit = False
        self._modules: OrderedDict = OrderedDict()  # compile key -> Module
        self._exprs: OrderedDict = OrderedDict()    # (compile key, expression text) -> Function

    def next_serial(self) -> int:
        self.serials += 1
        return self.serials

    # ---- output ------------------------------------------------------------------------------
    def write(self, text: str) -> None:
        """Results: values, what commands show, what the program prints."""
        self.out.write(text)
        self.out.flush()

    def write_err(self, text: str) -> None:
        """Errors, warnings and notes: stderr when piped (`arrc repl < s.arr > out.txt` keeps only values)."""
        if self.err is not self.out:
            self.out.flush()
        self.err.write(text)
        self.err.flush()

    def write_diagnostics(self, text: str) -> None:
        if self.color:
            from arrc.lexer import colorize_diagnostics
            text = colorize_diagnostics(text)
        self.write_err(text)

    def render(self, diags: list[Diagnostic]) -> str:
        return render_all(diags, self.sources)

    def warn(self, diags: list[Diagnostic], source: Source) -> bool:
        """Show the warnings among `diags` that point into `source`: those of items from earlier cells (a
        module has all its items' warnings) were shown with their cell. Whether there were any."""
        warnings = [d for d in diags if d.severity == "warning" and d.span is not None and d.span.file == source.name]
        if warnings:
            self.write_diagnostics(self.render(warnings))
        return bool(warnings)

    def error(self, diag: Diagnostic) -> CellError:
        return CellError(self.render([diag]))

    def compile_error(self, err: CompileError) -> CellError:
        for name, src in err.sources.items():
            self.sources.setdefault(name, src)
        return CellError(self.render([self.in_session(d) for d in err.diagnostics]))

    @staticmethod
    def in_session(diag: Diagnostic) -> Diagnostic:
        """What a diagnostic means at the prompt: a function unknown (and no typo of another name) may be
        one the user has yet to define, or one defined after its caller in a script."""
        if diag.code != "E0101" or not diag.message.startswith("unknown function `") or diag.help:
            return diag
        name = diag.message.split("`")[1]
        return replace(diag, help=f"`{name}` is not defined yet: define it before the cell that calls it or in the "
                                  f"same cell (definitions that follow each other are one cell), or `:load` its "
                                  f"file")

    def runtime_error(self, err: Exception) -> CellError:
        diag = getattr(err, "diagnostic", None)
        if isinstance(diag, Diagnostic):
            return CellError(self.render([reported(diag, self.sources)]), EXIT_RUNTIME)
        return CellError(str(err), EXIT_RUNTIME)

    # ---- running cells -------------------------------------------------------------------------
    def run(self, text: str) -> bool:
        """Run the cells in `text`, what Enter gave at the prompt (split like a script: each top-level
        statement or block is a cell). A paste stops at its first failing cell, as IPython's and Python's
        prompts do (the cells after it would mostly fail for want of what it defines), and says how many
        were not run. Returns whether all succeeded."""
        try:
            cells = split_cells(text)
            for n, cell in enumerate(cells, 1):
                if not self.run_cell(cell):
                    if n < len(cells):
                        self.write_err(f"note: {plural(len(cells) - n, 'more cell')} not run: a paste stops at "
                                       f"its first failing cell\n")
                    return False
                if self.quit:
                    break
        except KeyboardInterrupt:       # while a long paste is split, or between its cells (in one: `guarded`)
            self.write_err("interrupted\n")
            return self.failed(EXIT_RUNTIME)
        return True

    def run_cell(self, text: str) -> bool:
        """Run one cell; print its result or its error: never raises, but for an output that cannot be
        written (OSError, which ends the session). Ctrl-C is a failure of the cell (`interrupted`, EXIT_RUNTIME),
        at the prompt and in a script alike."""
        text = text.rstrip()
        if all(not line.strip() or line.lstrip().startswith("#") for line in text.splitlines()):
            return True                 # blank, or comments only (as Python's REPL)
        self.cells += 1
        return self.guarded(self.run_source, f"<cell {self.cells}>", text)

    def run_source(self, name: str, text: str) -> None:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:      # bytes that are not UTF-8, kept as surrogates by the reader (`main`)
            decode(text.encode("utf-8", "surrogateescape"), name)      # E0003 at the first, as for a file
        source = Source(name, text)
        self.sources[name] = source
        if text.lstrip().startswith(":"):
            run_command(self, source)
        else:
            self.statement(source)

    def load(self, path: str) -> bool:
        """`arrc repl FILE`: load a file as `:load` does, without taking a cell number (the first cell typed
        is `<cell 1>`)."""
        return self.guarded(load_file, self, path)

    def guarded(self, fn, *args) -> bool:
        """`fn(*args)` with every failure shown (never a traceback); whether it succeeded."""
        try:
            fn(*args)
            raise_lost_interrupt()
            return True
        except (CellError, CompileError) as err:
            return self.failed(self.show_failure(err))
        except KeyboardInterrupt:
            # A program interrupted while it runs keeps running on its helper thread (runtime/call.py
            # `interruptible`), and its function's dispatcher waits for it before another call of the
            # same types: the session's compiled code is dropped, so later cells compile their own.
            self._modules.clear()
            self._exprs.clear()
            self.write_err("interrupted\n")
            return self.failed(EXIT_RUNTIME)
        except RecursionError:
            self.write_err("error: this cell is nested too deeply\n")
            return self.failed(EXIT_COMPILE)
        except OSError:         # the output is gone (a closed pipe, a full disk): the session ends (terminal.main)
            raise
        except Exception as err:               # a bug or an unexpected failure: no traceback
            detail = str(err).strip().splitlines()
            first = detail[0] if detail else ""
            if type(err).__name__ == "DeviceUnavailable" or isinstance(err, MemoryError) \
                    or first.startswith("RESOURCE_EXHAUSTED"):
                self.write_err(f"error: {first}\n")       # e.g. out of device memory
                return self.failed(EXIT_RUNTIME)
            self.write_diagnostics(render_all([internal_error(err)], {}))    # E0601, as `arrc` reports it
            return self.failed(EXIT_INTERNAL)

    def show_failure(self, err: CellError | CompileError) -> int:
        """Show the error of a failed cell (or part of one); its exit status."""
        if isinstance(err, CompileError):
            err = self.compile_error(err)
        (self.write_diagnostics if err.diagnostic else self.write_err)(err.text)
        return err.code

    def failed(self, code: int) -> bool:
        self.exit_code = self.exit_code or code
        return False

    def parse(self, source: Source, start: str):
        try:
            return parse(source, start=start)
        except CompileError as err:
            raise self.compile_error(err) from None

    def statement(self, source: Source) -> None:
        text = source.text
        first = text.lstrip().split(None, 1)[0] if text.strip() else ""
        if first in ("def", "const", "extern"):
            self.write_diagnostics(self.define(source)[1])
            return
        stmt = self.parse(source, "stmt")
        if isinstance(stmt, ast.ExprStmt):
            expr = stmt.expr
            if isinstance(expr, ast.Name) and expr.id in self.items and self.items[expr.id].kind == "def":
                self.write(self.describe_name(expr.id))
                return
            try:
                values, tuple_result = self.evaluate(expr, source)
            except StaticValue as static:           # `x.dtype`: known without running anything
                self.write(static.shown)
                return
            self.write(show(values, tuple_result, self.width))
        elif isinstance(stmt, ast.Assign) and all(isinstance(t, ast.NameTarget) for t in stmt.targets):
            self.assign(stmt, source)
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.NameTarget):
            name = stmt.target.name                 # `x += e` rebinds `x` to `x + (e)`
            self.check_bindable(name, stmt.target.span)
            values, _ = self.evaluate(ast.Binary(stmt.span, stmt.op, ast.Name(stmt.target.span, name),
                                                 stmt.value), source)
            self.bind({name: values[0]})
        elif isinstance(stmt, ast.Return):
            raise self.error(Diagnostic("E0106", "`return` outside a function", stmt.span, "not in a function",
                                        help="`return` belongs in a `def`; at the prompt, type the expression "
                                             "to see its value"))
        else:
            self.block(stmt, source)

    # ---- bindings ------------------------------------------------------------------------------
    def check_bindable(self, name: str, span: Span) -> None:
        if name in RESERVED or name.startswith("__"):
            what = ("a dtype" if name in DTYPES else "a builtin" if name in BUILTIN_NAMES
                    else "reserved" if name.startswith("__") else "a keyword or named constant")
            raise self.error(Diagnostic("E0105", f"cannot bind `{name}`: it is {what}", span, "cannot be rebound",
                                        help="choose another name"))

    def assign(self, stmt: ast.Assign, source: Source) -> None:
        for t in stmt.targets:
            self.check_bindable(t.name, t.span)
        values, tuple_result = self.evaluate(stmt.value, source)
        names = [t.name for t in stmt.targets]
        if len(names) > 1 and not tuple_result and values[0].ndim and len(values[0]) == len(names):
            values, tuple_result = [host_value(row) for row in values[0]], True     # by rows, as in a function
        between = Span(source.name, stmt.targets[-1].span.end_line, stmt.targets[-1].span.end_col,
                       stmt.value.span.line, stmt.value.span.col)
        if len(names) == 1 and tuple_result and "," not in span_text(source, between):   # (`t, = e` unpacks)
            count = len(values)
            unpack = ", ".join(f"{names[0]}{i}" for i in range(count)) + ("," if count == 1 else "")
            raise self.error(Diagnostic(
                "E0209", f"`{names[0]}` cannot hold a tuple: a binding is one array", stmt.targets[0].span,
                "one array", [Label(stmt.value.span, f"this is a tuple of {count} value(s)")],
                help=f"unpack it into names: `{unpack} = {span_text(source, stmt.value.span)}`"))
        if len(names) > 1 or tuple_result:
            # (an array unpacks by rows: `a, c = arange(3)` gives 3 values, as Python counts them)
            count = len(values) if tuple_result else len(values[0]) if values[0].ndim else 1
            if not tuple_result or count != len(names):
                span = stmt.targets[0].span.to(stmt.targets[-1].span)
                raise self.error(Diagnostic("E0209", f"cannot unpack {plural(count, 'value')} into "
                                            f"{plural(len(names), 'name')}", span, plural(len(names), "name"),
                                            [Label(stmt.value.span, f"this gives {plural(count, 'value')}")]))
        self.bind(dict(zip(names, values)))

    def bind(self, values: dict[str, np.ndarray]) -> None:
        bindings = {**self.bindings, **{name: Binding(name, host_value(value), self.next_serial())
                                        for name, value in values.items()}}
        replaced = [self.items[name] for name in values if name in self.items]
        warning = self.commit({n: it for n, it in self.items.items() if n not in values}, bindings, set(values))
        for it in replaced:
            self.write_err(f"note: `{it.name}` was a {'function' if it.kind == 'def' else 'constant'}; "
                           f"it is now a value\n")
        self.write_diagnostics(warning)

    # ---- definitions -----------------------------------------------------------------------------
    def parse_items(self, source: Source, origin: str | None) -> list[Item]:
        """The `def`s and `const`s of a source text."""
        module = self.parse(source, "module")
        known = set(self.items) | set(self.bindings) | {it.name for it in module.items}
        out = []
        for it in module.items:
            kind = "def" if isinstance(it, ast.FunctionDef) else "const"
            shape_vars = frozenset()
            if isinstance(it, ast.FunctionDef):    # a dimension name that is no value is a shape variable
                shape_vars = frozenset(set().union(*[names_used(p.type) for p in it.params]) - known)
            out.append(Item(it.name, kind, it, source, item_deps(it) - shape_vars, self.next_serial(), origin,
                            shape_vars))
        return out

    def define(self, source: Source, origin: str | None = None, drop=()) -> tuple[list, str]:
        """Check new definitions together with what they use; on success they replace the old ones, and the
        names of `drop` they do not define again are removed (what a reloaded file no longer defines). The
        new items, and the warning of what the change breaks (`commit`), for the caller to show."""
        self.sources[source.name] = source
        new = self.parse_items(source, origin)
        new_names = {it.name for it in new}
        items = [it for it in self.items.values() if it.name not in new_names] + new
        bindings = {n: b for n, b in self.bindings.items() if n not in new_names}
        mod = self.module(new_names, items, bindings, cache=False)
        self.warn(mod.warnings, source)
        gone = {n for n in drop if n not in new_names}
        was_value = [it for it in new if it.name in self.bindings]
        warning = self.commit({it.name: it for it in items if it.name not in gone}, bindings, new_names | gone)
        for it in was_value:
            self.write_err(f"note: `{it.name}` was a value; it is now a "
                           f"{'function' if it.kind == 'def' else 'constant'}\n")
        return new, warning

    def commit(self, items: dict[str, Item], bindings: dict[str, Binding], changed: set[str]) -> str:
        """Make `items` and `bindings` the session's: the names of `changed` were made or removed. Returns
        the warning of which other definitions the change breaks (they report the error when used). That
        check compiles them, so it comes first: a Ctrl-C during it leaves the session as it was, as the
        cell's `interrupted` says (after, it was changed, the check unsaid)."""
        warning = self.dependents_warning(changed, items, bindings)
        raise_lost_interrupt()          # (a Ctrl-C Python dropped meanwhile: the same)
        self.items, self.bindings = items, bindings
        return warning

    def dependents_warning(self, changed: set[str], items: dict[str, Item], bindings: dict[str, Binding]) -> str:
        broken_by = [n for n in items if n not in changed and self.closure({n}, items) & changed]
        if not broken_by:
            return ""
        try:
            self.module(set(broken_by), list(items.values()), bindings)
        except CellError as err:
            if not err.diagnostic:
                return err.text.replace("error: ", "warning: ", 1)
            names = ", ".join(f"`{n}`" for n in broken_by)
            return (f"warning: after this change, {names} do{'es' if len(broken_by) == 1 else ''} not compile:\n"
                    + err.text)
        return ""

    # ---- compiling -------------------------------------------------------------------------------
    @staticmethod
    def closure(names: set[str], items: dict) -> set[str]:
        seen: set[str] = set()
        stack = list(names)
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            if n in items:
                stack.extend(items[n].deps)
        return seen

    def module(self, names: set[str], items: list | None = None, bindings: dict | None = None,
               cache: bool = True, exclude: set[str] = frozenset()):
        """The module of exactly the definitions and bindings that `names` depend on (compile errors as a
        CellError). Cached by those definitions' serial numbers and the bindings' versions."""
        items = list(self.items.values()) if items is None else items
        bindings = self.bindings if bindings is None else bindings
        needed = self.closure(names, {it.name: it for it in items})
        chosen = [it for it in items if it.name in needed]
        used = [(n, b) for n, b in bindings.items() if n in needed and n not in exclude]
        for it in chosen:
            clash = sorted(it.shape_vars & {n for n, _ in used})
            if clash:
                raise CellError(f"error: `{clash[0]}` is a shape variable of `{it.name}` ({it.where}) and "
                                f"also a value here; rename one of them", EXIT_COMPILE, diagnostic=False)
        key = (tuple(it.serial for it in chosen), tuple(b.version for _, b in used), self.guards, self.device)
        if cache and key in self._modules:
            self._modules.move_to_end(key)
            return self._modules[key]
        try:
            mod = api.from_items([it.node for it in chosen], {it.source.name: it.source for it in chosen},
                                 constants={n: b.value for n, b in used}, guards=self.guards or None,
                                 device=self.device)
        except CompileError as err:
            raise self.compile_error(err) from None
        mod._repl_key = key
        if cache:
            self._modules[key] = mod
            while len(self._modules) > MAX_MODULES:
                self._modules.popitem(last=False)
        return mod

    def expression(self, tree, source: Source, cache: bool = True):
        """The arr function of no arguments computing the expression `tree` (parsed from `source`), and its
        key in the cache of expressions (`evaluate` keeps it there once it has run). Its warnings are shown
        when it compiles; the key is None for one that warns: it is not kept, so that a later cell of the
        same text warns in its own cell."""
        mod = self.module(names_used(tree) & (set(self.items) | set(self.bindings)), cache=cache)
        key = (mod._repl_key, span_text(source, tree.span))
        fn = self._exprs.get(key) if cache else None
        if fn is None:
            try:
                fn = mod.expression(tree, source, label=CELL_LABEL)
            except CompileError as err:
                failure = self.compile_error(err)
                if [d.code for d in err.diagnostics] == ["E0210"]:
                    static_value(mod, tree, source, failure)
                raise failure from None
            if self.warn(expression_warnings(fn), source):
                key = None
        return fn, key

    def evaluate(self, tree, source: Source) -> tuple[list, bool]:
        """The value of an expression cell. Its compiled function is kept for the same expression text in
        later cells once it has run: over the same definitions and bindings it computes the same values,
        so a report can never name the cell it was first compiled for."""
        fn, key = self.expression(tree, source)
        result = self.call(fn)
        if key is None:
            return result
        self._exprs[key] = fn
        self._exprs.move_to_end(key)
        while len(self._exprs) > MAX_EXPRESSIONS:
            self._exprs.popitem(last=False)
        return result

    # ---- running ---------------------------------------------------------------------------------
    def call(self, fn, args=(), quiet: bool = False) -> tuple[list, bool]:
        """Run `fn` on the current device; results as NumPy values and whether it returns a tuple.
        `print` inside goes to this session's output."""
        from arrc.runtime.call import interruptible
        sink = io.StringIO() if quiet else self.out

        def run():          # on a helper thread, so that Ctrl-C stops the wait (runtime/call.py)
            result = fn(*args)
            return result, [host_value(r) for r in (result if isinstance(result, tuple) else (result,))]
        try:
            with contextlib.redirect_stdout(sink):
                result, values = interruptible(run)
        except GuardError as err:
            raise self.runtime_error(err) from None
        except CompileError as err:                       # errors only specialization finds
            raise self.compile_error(err) from None
        return values, isinstance(result, tuple)

    def block(self, stmt, source: Source) -> None:
        """Any other statement runs as the body of a function (`cell_function`); the bindings it assigns
        are passed in and returned, so they are updated; names it creates stay local to the block."""
        assigned, loop_vars = assigned_names(stmt)
        carried = [n for n in assigned if n in self.bindings]
        for n in carried:
            self.check_bindable(n, stmt.span)
        new_locals = [n for n in assigned if n not in self.bindings and n not in loop_vars]
        fn = cell_function(stmt, [(n, self.bindings[n].value) for n in carried], source)
        known = set(self.items) | set(self.bindings)
        deps = frozenset((names_used(stmt) & known) - set(carried))
        uses = self.closure(set(deps), self.items)
        clash = [n for n in carried if n in uses]
        if clash:
            users = sorted(i for i in self.items if i in uses and clash[0] in self.items[i].deps)
            raise self.error(Diagnostic(
                "E0105", f"this block assigns `{clash[0]}`, which `{users[0] if users else '?'}` reads as a "
                         f"module value", stmt.span, "assigns it",
                help=f"assign `{clash[0]}` in its own cell (`{clash[0]} = ...`), or give the function a "
                     f"parameter for it"))
        item = Item(CELL_FN, "cell", fn, source, deps, self.next_serial())
        mod = self.module({CELL_FN}, list(self.items.values()) + [item], cache=False, exclude=set(carried))
        self.warn(mod.warnings, source)
        values, _ = self.call(mod[CELL_FN], [self.bindings[n].value for n in carried])
        if carried:
            self.bind(dict(zip(carried, values)))
        if new_locals:
            names = ", ".join(f"`{n}`" for n in new_locals)
            self.write_err(f"note: {names} stayed local to this block; bind a name before the block "
                       f"(`{new_locals[0]} = ...`) to keep its value\n")

    def describe_name(self, name: str) -> str:
        """`f: (x: f32[n]) -> f32[n]`, `x: f32[3]`: a name and its type or signature."""
        if name in self.bindings:
            return f"{name}: {self.bindings[name].type}\n"
        mod = self.module({name})
        if self.items[name].kind == "def":
            return f"{name}: {mod[name].signature}\n"
        try:
            sig = mod.expression(name).signature
        except CompileError as err:
            raise self.compile_error(err) from None
        return f"{name}: {sig.split('-> ', 1)[1]}\n"
