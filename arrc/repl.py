"""`arrc repl`: the interactive arr prompt (LANGUAGE.md section 11).

The session keeps the top-level items in order: definitions (`def`, `const`: their source text) and
value bindings (`name = expr`: a NumPy value, given to the compiler as a host constant). Every
evaluation compiles the module made of exactly the items it depends on (found by following names
through the definitions) with the *current* bindings, and compiled code is cached under a key made of
those items' texts and the bindings' versions. Rebinding a value or redefining a function changes the
key of everything that depends on it, so nothing can run a stale compiled version of anything it uses.

Cells: a meta-command (`:help`), a `def`/`const` (one or several), an assignment (`x = e`, `a, b = e`,
`x += e`), an expression (its value is shown with its type), or any other statement (`print`, `assert`,
`for`, `if`, `x[i] = e`...), which runs as the body of a function whose parameters and results are the
bindings it assigns. Errors are the rendered diagnostics of the CLI with spans in the cell (`<cell 3>`)
and never a traceback; the session continues.

Without a terminal (`arrc repl < script.txt`) the cells are read from stdin and the same results are
printed, without prompts; the exit status is then that of the first failing cell (1 for compile errors,
2 for a bad command, 3 for run-time failures), 0 if none failed.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import os
import re
import statistics
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import arrc
from arrc.api import DEVICES
from arrc.compiler import ast
from arrc.compiler.abi import GUARD_KINDS as KINDS
from arrc.compiler.check import NAMED_CONSTANTS
from arrc.compiler.diagnostics import CompileError, Diagnostic, Label, internal_error, render_all
from arrc.compiler.fastparse import KEYWORDS as RESERVED_WORDS
from arrc.compiler.parse import decode, parse
from arrc.compiler.span import Source, Span
from arrc.compiler.types import DTYPES, dtype_of_numpy
from arrc.exits import EXIT_COMPILE, EXIT_INTERNAL, EXIT_OK, EXIT_RUNTIME, EXIT_USAGE
from arrc.lexer import ATTRIBUTES, BUILTIN_NAMES

MODULE_FILE = "<session>"          # the file name of the module text the session compiles
EXPR_FILE = "<expr>"               # the file name the API gives expressions
CELL_FN = "__cell__"               # the function a statement cell runs as
PROMPT, CONTINUATION = "arr> ", "...> "
GUARD_KINDS = (*KINDS, "all")
KEYWORDS = tuple(sorted(RESERVED_WORDS))
RESERVED = set(KEYWORDS) | set(DTYPES) | set(NAMED_CONSTANTS) | set(BUILTIN_NAMES)

COMMANDS = {            # name -> (argument, one-line help)
    ":help": ("", "this help"),
    ":type": ("EXPR", "the type of an expression or the signature of a function (nothing runs)"),
    ":mlir": ("EXPR|FN", "StableHLO of an expression or function, with source locations"),
    ":hlo": ("EXPR", "XLA's optimized HLO for an expression, on the current device"),
    ":time": ("EXPR", "compile time and run time (median of several runs)"),
    ":guards": ("LIST|off", "run-time guards: nan,inf,bounds,div0 or all; `off` disables them"),
    ":device": ("NAME", "device to compile for and run on: cpu, gpu or tpu"),
    ":load": ("FILE", "load the definitions of an .arr file"),
    ":reload": ("", "load again every file loaded with :load"),
    ":quit": ("", "leave (also Ctrl-D)"),
}
ALIASES = {":q": ":quit", ":exit": ":quit", ":h": ":help", ":?": ":help", ":t": ":type"}


class CellError(Exception):
    """A cell failed; `text` is what to show (rendered diagnostics or a one-line message)."""

    def __init__(self, text: str, code: int = EXIT_COMPILE, diagnostic: bool = True):
        super().__init__(text)
        self.text = text if text.endswith("\n") else text + "\n"
        self.code = code
        self.diagnostic = diagnostic


# ---- values and their display -------------------------------------------------------------------

def type_str(value: np.ndarray) -> str:
    """The arr type of a NumPy value: `f32[2, 3]`, `i32`."""
    dt = dtype_of_numpy(value.dtype)
    name = dt.name if dt is not None else str(value.dtype)
    return f"{name}[{', '.join(str(d) for d in value.shape)}]" if value.ndim else name


def value_str(value: np.ndarray, width: int = 75, indent: int = 0) -> str:
    """NumPy-style text of a value (large arrays summarized); bools as `true`/`false`."""
    if value.ndim == 0:
        item = value[()]
        if value.dtype == np.bool_:
            return "true" if item else "false"
        return str(item)
    return np.array2string(value, max_line_width=width, threshold=1000, edgeitems=3, separator=" ",
                           prefix=" " * indent, formatter={"bool": lambda b: "true" if b else "false"})


def show(values: list[np.ndarray], tuple_result: bool, width: int = 75) -> str:
    """`f32[3] = [1. 2. 3.]`; a tuple `(i32, f32[2]) = (1, [1. 2.])`, or one value a line if long."""
    if not tuple_result:
        head = f"{type_str(values[0])} = "
        return head + value_str(values[0], width, len(head)) + "\n"
    types = "(" + ", ".join(type_str(v) for v in values) + ")"
    texts = [value_str(v, width) for v in values]
    line = f"{types} = (" + ", ".join(texts) + ")"
    if all("\n" not in t for t in texts) and len(line) <= width:
        return line + "\n"
    return f"{types} =\n" + "".join("  " + value_str(v, width, 2) + "\n" for v in values)


def format_seconds(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:.1f} us"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.3f} s"


# ---- names in the AST ----------------------------------------------------------------------------

def names_used(node) -> set[str]:
    """Every name the node reads (values, called functions, dimensions)."""
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.DimName):
            out.add(n.name)
    return out


def assigned_names(node) -> tuple[list[str], set[str]]:
    """Names a statement rebinds (assignments, augmented and indexed updates), in order; and loop variables."""
    names: list[str] = []
    loop_vars: set[str] = set()
    for n in ast.walk(node):
        target = None
        if isinstance(n, ast.NameTarget):
            target = n.name
        elif isinstance(n, ast.IndexTarget) and isinstance(n.base, ast.Name):
            target = n.base.id
        elif isinstance(n, ast.For):
            loop_vars.add(n.var)
        if target is not None and target not in names:
            names.append(target)
    return names, loop_vars


def item_deps(node) -> frozenset[str]:
    """The global names a definition depends on: names it reads that are not its own locals."""
    used = names_used(node)
    if isinstance(node, ast.FunctionDef):
        local, loops = assigned_names(node)
        used -= set(local) | loops | {p.name for p in node.params}
    return frozenset(used)


# ---- the session state -------------------------------------------------------------------------

@dataclass
class Item:
    """A definition in the session: a `def`, a `const`, or the function a statement cell runs as."""
    name: str
    kind: str                    # "def", "const" or "cell"
    text: str                    # its source text (ends with a newline)
    file: str                    # where it was written: "<cell 3>" or a file path
    line: int                    # its first line in `file`
    deps: frozenset
    origin: str | None = None    # the file it was loaded from (for :reload)
    wrapper: bool = False        # a statement cell: line 1 is a synthetic header, body indented by 4
    shape_vars: frozenset = frozenset()   # dimension names that were not values when it was defined

    def locate(self, rel: int, col: int) -> tuple[str, int, int]:
        """Where line `rel` (1-based, within this item's text), column `col` was written."""
        if not self.wrapper:
            return self.file, self.line + rel - 1, col
        body = self.text.count("\n") - 2
        if rel <= 1:
            return self.file, 1, 1
        if rel - 1 > body:
            return self.file, body, 1
        return self.file, rel - 1, max(1, col - 4)


@dataclass
class Binding:
    name: str
    value: np.ndarray
    version: int

    @property
    def type(self) -> str:
        return type_str(self.value)


_INTERNAL_NAMES = re.compile(r"\b(__cell__|__expr_\d+__)")


@dataclass
class Where:
    """How spans of one compilation map back to what the user wrote."""
    items: list = field(default_factory=list)     # [(first module line, number of lines, Item)]
    expr: tuple | None = None                     # (cell name, line offset) for <expr> spans

    def span(self, span: Span | None) -> Span | None:
        if span is None:
            return None
        if span.file == EXPR_FILE and self.expr is not None:
            cell, offset = self.expr
            return Span(cell, span.line + offset, span.col, span.end_line + offset, span.end_col)
        if span.file == MODULE_FILE:
            for start, count, item in self.items:
                if start <= span.line < start + count:
                    file, line, col = item.locate(span.line - start + 1, span.col)
                    end_rel = min(span.end_line, start + count - 1) - start + 1
                    _, end_line, end_col = item.locate(end_rel, span.end_col)
                    if (end_line, end_col) < (line, col):
                        end_line, end_col = line, col + 1
                    return Span(file, line, col, end_line, end_col)
        return span

    def text(self, text: str) -> str:
        """Locations written in text (`<session>:3:5` in notes; `"<session>":3:5` in MLIR) mapped back."""
        def sub(m):
            file = m.group(1) or m.group(4)
            line, col = int(m.group(2) or m.group(5)), int(m.group(3) or m.group(6))
            s = self.span(Span(file, line, col, line, col + 1))
            return f'"{s.file}":{s.line}:{s.col}' if m.group(1) else f"{s.file}:{s.line}:{s.col}"
        pattern = r'"(<session>|<expr>)":(\d+):(\d+)|(<session>|<expr>):(\d+):(\d+)'
        text = re.sub(r'("(?:<session>|<expr>)":\d+:\d+) to (?:\d+)?:\d+', r"\1", text)
        return re.sub(pattern, sub, text)

    def diagnostic(self, d: Diagnostic) -> Diagnostic:
        return dataclasses.replace(d, span=self.span(d.span),
                                   labels=[Label(self.span(l.span), l.message) for l in d.labels],
                                   notes=[_INTERNAL_NAMES.sub("the cell", self.text(n)) for n in d.notes])


class Session:
    """One REPL session: its items, bindings and settings; `run(text)` runs one cell and prints."""

    def __init__(self, out=None, width: int = 75, color: bool = False, guards: str | None = None,
                 device: str = "cpu"):
        self.out = out if out is not None else sys.stdout
        self.width = width
        self.color = color
        self.guards = guards
        self.device = device
        self.items: dict[str, Item] = {}
        self.bindings: dict[str, Binding] = {}
        self.sources: dict[str, Source] = {}
        self.loaded: dict[str, list[str]] = {}      # file -> the names it defined
        self.cells = 0
        self.versions = 0
        self.exit_code = EXIT_OK                    # the first failing cell's code
        self.quit = False
        self._modules: OrderedDict = OrderedDict()  # compile key -> Module
        self._exprs: OrderedDict = OrderedDict()    # (compile key, text) -> Function

    # ---- output ------------------------------------------------------------------------------
    def write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    def write_diagnostics(self, text: str) -> None:
        if self.color:
            from arrc.lexer import colorize_diagnostics
            text = colorize_diagnostics(text)
        self.write(text)

    def render(self, diags: list[Diagnostic], where: Where) -> str:
        return render_all([where.diagnostic(d) for d in diags], self.sources)

    def compile_error(self, err: CompileError, where: Where) -> CellError:
        for name, src in err.sources.items():
            if name not in (MODULE_FILE, EXPR_FILE):
                self.sources.setdefault(name, src)
        return CellError(self.render(err.diagnostics, where))

    def runtime_error(self, err: Exception, where: Where) -> CellError:
        diag = getattr(err, "diagnostic", None)
        if isinstance(diag, Diagnostic):
            return CellError(self.render([diag], where), EXIT_RUNTIME)
        return CellError(str(err), EXIT_RUNTIME)

    # ---- running cells -------------------------------------------------------------------------
    def run(self, text: str) -> bool:
        """Run the cells in `text` (split like a script: each top-level statement or block is a cell);
        stops at the first failing one. Returns whether all succeeded."""
        for chunk in split_cells(text):
            if not self.run_cell(chunk):
                return False
            if self.quit:
                break
        return True

    def run_cell(self, text: str) -> bool:
        """Run one cell; print its result or its error. Never raises (except KeyboardInterrupt in scripts)."""
        text = text.rstrip()
        if not text.strip():
            return True
        self.cells += 1
        cell = f"<cell {self.cells}>"
        self.sources[cell] = Source(cell, text)
        try:
            if text.lstrip().startswith(":"):
                self.meta(text.strip(), cell)
            else:
                self.statement(text, cell)
            return True
        except CellError as err:
            if err.diagnostic:
                self.write_diagnostics(err.text)
            else:
                self.write(err.text)
            self.exit_code = self.exit_code or err.code
            return False
        except CompileError as err:            # not mapped: render as it is
            self.write_diagnostics(str(err))
            self.exit_code = self.exit_code or EXIT_COMPILE
            return False
        except KeyboardInterrupt:
            # A program interrupted while it runs keeps running on its helper thread (runtime/call.py
            # `interruptible`), and its function's dispatcher waits for it before another call of the
            # same types: the session's compiled code is dropped, so later cells compile their own.
            self._modules.clear()
            self._exprs.clear()
            self.write("interrupted\n")
            self.exit_code = self.exit_code or EXIT_RUNTIME
            return False
        except RecursionError:
            self.write("error: this cell is nested too deeply\n")
            self.exit_code = self.exit_code or EXIT_COMPILE
            return False
        except Exception as err:               # a bug or an unexpected failure: no traceback
            detail = str(err).strip().splitlines()
            first = detail[0] if detail else ""
            if type(err).__name__ == "DeviceUnavailable" or isinstance(err, MemoryError) \
                    or first.startswith("RESOURCE_EXHAUSTED"):
                self.write(f"error: {first}\n")           # e.g. out of device memory
                self.exit_code = self.exit_code or EXIT_RUNTIME
            else:                                      # MLIR, XLA or arrc failed: E0601, as `arrc` reports it
                self.write_diagnostics(render_all([internal_error(err)], {}))
                self.exit_code = self.exit_code or EXIT_INTERNAL
            return False

    def statement(self, text: str, cell: str) -> None:
        first = text.lstrip().split(None, 1)[0] if text.strip() else ""
        if first in ("def", "const"):
            self.define(text, cell)
            return
        try:
            stmt = parse(Source(cell, text), start="stmt")
        except CompileError as err:
            raise self.compile_error(err, Where()) from None
        if isinstance(stmt, ast.ExprStmt):
            expr = stmt.expr
            if isinstance(expr, ast.Name) and expr.id in self.items and self.items[expr.id].kind == "def":
                self.write(self.describe_name(expr.id))
                return
            values, tuple_result = self.evaluate(text, 0, cell)
            self.write(show(values, tuple_result, self.width))
        elif isinstance(stmt, ast.Assign) and all(isinstance(t, ast.NameTarget) for t in stmt.targets):
            self.assign(stmt, text, cell)
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.NameTarget):
            self.aug_assign(stmt, text, cell)
        elif isinstance(stmt, ast.Return):
            raise CellError(render_all([Diagnostic("E0106", "`return` outside a function", stmt.span,
                                                   "not in a function",
                                                   help="`return` belongs in a `def`; at the prompt, "
                                                        "type the expression to see its value")],
                                       self.sources))
        else:
            self.block(stmt, text, cell)

    # ---- bindings ------------------------------------------------------------------------------
    def check_bindable(self, name: str, span: Span) -> None:
        if name in RESERVED or name.startswith("__"):
            what = ("a dtype" if name in DTYPES else "a builtin" if name in BUILTIN_NAMES
                    else "reserved" if name.startswith("__") else "a keyword or named constant")
            raise CellError(render_all([Diagnostic("E0105", f"cannot bind `{name}`: it is {what}", span,
                                                   "cannot be rebound", help="choose another name")],
                                       self.sources))

    def assign(self, stmt: ast.Assign, text: str, cell: str) -> None:
        for t in stmt.targets:
            self.check_bindable(t.name, t.span)
        values, tuple_result = self.evaluate(*_after_equals(text, stmt.targets[-1].span), cell)
        names = [t.name for t in stmt.targets]
        if len(names) > 1 or tuple_result:
            count = len(values) if tuple_result else 1
            if not tuple_result or count != len(names):
                span = stmt.targets[0].span.to(stmt.targets[-1].span)
                raise CellError(render_all([Diagnostic(
                    "E0209", f"cannot unpack {count} value(s) into {len(names)} name(s)", span,
                    f"{len(names)} name(s)", [Label(stmt.value.span, f"this gives {count} value(s)")])],
                    self.sources))
        self.bind(dict(zip(names, values)))

    def aug_assign(self, stmt: ast.AugAssign, text: str, cell: str) -> None:
        """`x += e` is `x = x + (e)`; the expression is written so that every column stays where it was."""
        name = stmt.target.name
        self.check_bindable(name, stmt.target.span)
        lines = text.split("\n")
        row = stmt.target.span.end_line - 1
        head = lines[row]
        eq = head.index("=", stmt.target.span.end_col - 1)
        tcol = stmt.target.span.col - 1
        first = " " * tcol + head[tcol:eq] + "(" + head[eq + 1:]
        expr = "\n".join([first] + lines[row + 1:]) + "\n)"       # on its own line: after any comment
        values, _ = self.evaluate(expr, row, cell)
        self.bind({name: values[0]})

    def bind(self, values: dict[str, np.ndarray]) -> None:
        for name, value in values.items():
            replaced = self.items.pop(name, None)
            if replaced is not None:
                self.write(f"note: `{name}` was a {'function' if replaced.kind == 'def' else 'constant'}; "
                           f"it is now a value\n")
            self.versions += 1
            self.bindings[name] = Binding(name, np.asarray(value), self.versions)
        self.check_dependents(set(values))

    # ---- definitions -----------------------------------------------------------------------------
    def parse_items(self, source: Source, origin: str | None) -> list[Item]:
        """The `def`s and `const`s of a source text, each with its own text and first line."""
        module = parse(source)
        lines = source.text.split("\n")
        starts = [it.span.line for it in module.items]
        known = set(self.items) | set(self.bindings) | {it.name for it in module.items}
        out = []
        for k, it in enumerate(module.items):
            end = starts[k + 1] - 1 if k + 1 < len(starts) else len(lines)
            body = lines[it.span.line - 1:end]
            while body and not body[-1].strip():
                body.pop()
            kind = "def" if isinstance(it, ast.FunctionDef) else "const"
            shape_vars = frozenset()
            if isinstance(it, ast.FunctionDef):    # a dimension name that is no value is a shape variable
                shape_vars = frozenset(set().union(*[names_used(p.type) for p in it.params]) - known)
            out.append(Item(it.name, kind, "\n".join(body) + "\n", source.name, it.span.line,
                            item_deps(it) - shape_vars, origin, shape_vars=shape_vars))
        return out

    def define(self, text: str, cell: str, origin: str | None = None, file_source: Source | None = None) -> list:
        """Check new definitions together with what they use; on success they replace the old ones."""
        source = file_source or Source(cell, text)
        self.sources[source.name] = source
        try:
            new = self.parse_items(source, origin)
        except CompileError as err:
            raise self.compile_error(err, Where()) from None
        new_names = {it.name for it in new}
        items = [it for it in self.items.values() if it.name not in new_names] + new
        bindings = {n: b for n, b in self.bindings.items() if n not in new_names}
        try:
            mod, where = self.module(new_names, items, bindings, cache=False)
        except CompileError as err:
            raise self.compile_error(err, self._where_for(items, new_names, bindings)) from None
        warnings = [d for d in mod.warnings if d.span is not None and where.span(d.span).file == source.name]
        if warnings:
            self.write_diagnostics(self.render(warnings, where))
        for name in new_names:
            if name in self.bindings:
                del self.bindings[name]
                self.write(f"note: `{name}` was a value; it is now a "
                           f"{'function' if any(i.name == name and i.kind == 'def' for i in new) else 'constant'}\n")
            self.items.pop(name, None)
        for it in new:
            self.items[it.name] = it
        self.check_dependents(new_names)
        return new

    def check_dependents(self, changed: set[str]) -> None:
        """After a change, say which other definitions it breaks (they report the error when used)."""
        broken_by = {}
        for it in self.items.values():
            if it.name in changed:
                continue
            if self.closure({it.name}, self.items) & changed:
                broken_by[it.name] = it
        if not broken_by:
            return
        try:
            self.module(set(broken_by))
        except CellError as err:
            self.write(err.text.replace("error: ", "warning: ", 1))
        except CompileError as err:
            where = self._where_for(list(self.items.values()), set(broken_by), self.bindings)
            names = ", ".join(f"`{n}`" for n in broken_by)
            self.write_diagnostics(f"warning: after this change, {names} do{'es' if len(broken_by) == 1 else ''} "
                                   f"not compile:\n"
                                   + self.render(err.diagnostics, where))

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

    def _where_for(self, items: list, names: set[str], bindings: dict) -> Where:
        by_name = {}
        for it in items:
            by_name.setdefault(it.name, []).append(it)
        needed = self.closure(names, {n: v[-1] for n, v in by_name.items()})
        where, line = Where(), 1
        for it in items:
            if it.name in needed:
                count = it.text.count("\n")
                where.items.append((line, count, it))
                line += count
        return where

    def module(self, names: set[str], items: list | None = None, bindings: dict | None = None,
               cache: bool = True, exclude: set[str] = frozenset()):
        """The module of exactly the definitions and bindings that `names` depend on, with where its
        lines were written. Cached by the texts of those definitions and the versions of the bindings."""
        items = list(self.items.values()) if items is None else items
        bindings = self.bindings if bindings is None else bindings
        where = self._where_for(items, names, bindings)
        needed = self.closure(names, {it.name: it for it in items})
        used = [(n, b) for n, b in bindings.items() if n in needed and n not in exclude]
        for _, _, it in where.items:
            clash = sorted(it.shape_vars & {n for n, _ in used})
            if clash:
                raise CellError(f"error: `{clash[0]}` is a shape variable of `{it.name}` ({it.file}:{it.line}) and "
                                f"also a value here; rename one of them", EXIT_COMPILE, diagnostic=False)
        key = (tuple((it.name, it.text) for _, _, it in where.items), tuple((n, b.version) for n, b in used),
               self.guards, self.device)
        if cache and key in self._modules:
            self._modules.move_to_end(key)
            return self._modules[key], where
        text = "".join(it.text for _, _, it in where.items)
        constants = {n: b.value for n, b in used}
        mod = arrc.loads(text, filename=MODULE_FILE, constants=constants, guards=self.guards or None,
                         device=self.device)
        mod._repl_key = key
        if cache:
            self._modules[key] = mod
            while len(self._modules) > 64:
                self._modules.popitem(last=False)
        return mod, where

    def expression(self, expr_text: str, offset: int, cell: str, cache: bool = True):
        """The arr function computing an expression (no arguments) and where its spans were written."""
        src = Source(EXPR_FILE, expr_text)
        where = Where(expr=(cell, offset))
        try:
            tree = parse(src, start="expr")
        except CompileError as err:
            raise self.compile_error(err, where) from None
        known = set(self.items) | set(self.bindings)
        names = names_used(tree) & known
        try:
            mod, mwhere = self.module(names, cache=cache)
            where.items = mwhere.items
            key = (mod._repl_key, expr_text)
            fn = self._exprs.get(key) if cache else None
            if fn is None:
                fn = mod.expression(expr_text)
                if cache:
                    self._exprs[key] = fn
                    while len(self._exprs) > 256:
                        self._exprs.popitem(last=False)
        except CompileError as err:
            if not where.items:
                where.items = self._where_for(list(self.items.values()), names, self.bindings).items
            raise self.compile_error(err, where) from None
        return fn, where

    # ---- running ---------------------------------------------------------------------------------
    def call(self, fn, args=(), where: Where | None = None, quiet: bool = False) -> tuple[list, bool]:
        """Run `fn` on the current device; results as NumPy values and whether it returns a tuple.
        `print` inside goes to this session's output."""
        from arrc.runtime.call import interruptible
        sink = io.StringIO() if quiet else self.out

        def run():          # on a helper thread, so that Ctrl-C stops the wait (runtime/call.py)
            result = fn(*args)
            return result, [np.asarray(r) for r in (result if isinstance(result, tuple) else (result,))]
        try:
            with contextlib.redirect_stdout(sink):
                result, values = interruptible(run)
        except arrc.GuardError as err:
            raise self.runtime_error(err, where or Where()) from None
        except CompileError as err:                       # errors only specialization finds
            raise self.compile_error(err, where or Where()) from None
        return values, isinstance(result, tuple)

    @staticmethod
    def prepare(fn, types):
        """`fn` lowered for `types` and through its passes (arrc/pipeline.py), guards as the API's."""
        from arrc.passes.guards import GuardOptions
        from arrc.pipeline import apply_passes, passes_for
        lowered = fn.lower(*types)
        options = GuardOptions(getattr(fn.module, "guard_kinds", None) or frozenset(), fn.module.guard_scope)
        apply_passes(lowered.module, lowered.context, passes_for(options), fn.module.sources)
        return lowered

    def compiled(self, fn, lowered):
        """The prepared module compiled for the session's device, with its host callbacks."""
        from arrc.pipeline import compile_module
        from arrc.runtime.pjrt import DeviceUnavailable
        try:
            return compile_module(lowered.module, lowered.context, fn.module.sources, [], self.device)
        except DeviceUnavailable as err:
            raise CellError(f"error: {err}", EXIT_USAGE, diagnostic=False) from None

    def evaluate(self, expr_text: str, offset: int, cell: str) -> tuple[list, bool]:
        fn, where = self.expression(expr_text, offset, cell)
        return self.call(fn, where=where)

    def block(self, stmt, text: str, cell: str) -> None:
        """Any other statement runs as the body of a function; the bindings it assigns are passed in
        and returned, so they are updated; names it creates stay local to the block."""
        assigned, loop_vars = assigned_names(stmt)
        carried = [n for n in assigned if n in self.bindings]
        for n in carried:
            self.check_bindable(n, stmt.span)
        new_locals = [n for n in assigned if n not in self.bindings and n not in loop_vars]
        types = [self.bindings[n].type for n in carried]
        params = ", ".join(f"{n}: {t}" for n, t in zip(carried, types))
        if carried:
            result = types[0] if len(types) == 1 else "(" + ", ".join(types) + ")"
            ret = "return " + ", ".join(carried)
        else:
            result, ret = "i32", "return 0"
        body = ["    " + line if line.strip() else "" for line in text.split("\n")]
        wrapper = "\n".join([f"def {CELL_FN}({params}) -> {result}:", *body, f"    {ret}"]) + "\n"
        known = set(self.items) | set(self.bindings)
        deps = frozenset((names_used(stmt) & known) - set(carried))
        item = Item(CELL_FN, "cell", wrapper, cell, 1, deps, wrapper=True)
        items = list(self.items.values()) + [item]
        uses = self.closure(set(deps), self.items)
        clash = [n for n in carried if n in uses]
        if clash:
            users = sorted(i for i in self.items if i in uses and clash[0] in self.items[i].deps)
            raise CellError(render_all([Diagnostic(
                "E0105", f"this block assigns `{clash[0]}`, which `{users[0] if users else '?'}` reads as a "
                         f"module value", stmt.span, "assigns it",
                help=f"assign `{clash[0]}` in its own cell (`{clash[0]} = ...`), or give the function a "
                     f"parameter for it")], self.sources))
        try:
            mod, where = self.module({CELL_FN}, items, self.bindings, exclude=set(carried))
        except CompileError as err:
            raise self.compile_error(err, self._where_for(items, {CELL_FN}, self.bindings)) from None
        values, _ = self.call(mod[CELL_FN], [self.bindings[n].value for n in carried], where)
        if carried:
            self.bind(dict(zip(carried, values)))
        if new_locals:
            names = ", ".join(f"`{n}`" for n in new_locals)
            self.write(f"note: {names} stayed local to this block; bind a name before the block "
                       f"(`{new_locals[0]} = ...`) to keep its value\n")

    # ---- meta-commands ----------------------------------------------------------------------------
    def meta(self, text: str, cell: str) -> None:
        name, _, arg = text.partition(" ")
        name = ALIASES.get(name, name)
        arg = arg.strip()
        offset = len(text) - len(text.split(" ", 1)[1].lstrip()) if arg else 0
        expr = " " * offset + arg          # the argument, at the columns where it was written
        handler = {":help": self.cmd_help, ":type": self.cmd_type, ":mlir": self.cmd_mlir, ":hlo": self.cmd_hlo,
                   ":time": self.cmd_time, ":guards": self.cmd_guards, ":device": self.cmd_device,
                   ":load": self.cmd_load, ":reload": self.cmd_reload, ":quit": self.cmd_quit}.get(name)
        if handler is None:
            near = [c for c in COMMANDS if c.startswith(name[:2])]
            hint = f" (did you mean {', '.join(near)}?)" if near else ""
            raise CellError(f"error: unknown command `{name}`{hint}; `:help` lists the commands", EXIT_USAGE,
                            diagnostic=False)
        needs = COMMANDS[name][0]
        if needs and not arg and name not in (":guards", ":device"):
            raise CellError(f"error: `{name}` needs an argument: {name} {needs}", EXIT_USAGE, diagnostic=False)
        handler(arg, expr, cell)

    def cmd_help(self, arg, expr, cell) -> None:
        lines = ["Enter arr statements, expressions and definitions; an expression's value is shown with its type.",
                 "A block (`def`, `for`, `if`, ...) ends with a blank line. `x = e` binds a value that functions",
                 "may use like a `const`; redefining anything takes effect everywhere at once.", "",
                 "Commands:"]
        for c, (a, h) in COMMANDS.items():
            lines.append(f"  {(c + ' ' + a).ljust(18)} {h}")
        lines += ["", f"guards: {self.guards or 'off'}; device: {self.device}"]
        if self.bindings:
            lines.append("values: " + ", ".join(f"{n}: {b.type}" for n, b in self.bindings.items()))
        defs = [n for n, it in self.items.items() if it.kind != "cell"]
        if defs:
            lines.append("definitions: " + ", ".join(defs))
        self.write("\n".join(lines) + "\n")

    def describe_name(self, name: str) -> str:
        """`f: (x: f32[n]) -> f32[n]`, `x: f32[3]`: a name and its type or signature."""
        if name in self.bindings:
            return f"{name}: {self.bindings[name].type}\n"
        try:
            mod, where = self.module({name})
            if self.items[name].kind == "def":
                return f"{name}: {mod[name].signature}\n"
            sig = mod.expression(name).signature
        except CompileError as err:
            raise self.compile_error(err, self._where_for(list(self.items.values()), {name},
                                                          self.bindings)) from None
        return f"{name}: {sig.split('-> ', 1)[1]}\n"

    def cmd_type(self, arg, expr, cell) -> None:
        if arg.isidentifier() and (arg in self.items or arg in self.bindings):
            self.write(self.describe_name(arg))
            return
        fn, _ = self.expression(expr, 0, cell)
        self.write(fn.signature.split("-> ", 1)[1] + "\n")

    def _lowered(self, arg, expr, cell, command=":mlir"):
        if arg.isidentifier() and arg in self.items and self.items[arg].kind == "def":
            try:
                mod, where = self.module({arg})
            except CompileError as err:
                raise self.compile_error(err, self._where_for(list(self.items.values()), {arg},
                                                              self.bindings)) from None
            fn = mod[arg]
            if fn.shape_vars:
                raise CellError(f"`{arg}{fn.signature}` is generic over {', '.join(fn.shape_vars)}: it needs "
                                f"concrete shapes; give a call instead, e.g. `{command} {arg}(...)` with "
                                f"arguments of the sizes you want", EXIT_USAGE, diagnostic=False)
            return fn, where, fn.arg_types_for({})
        fn, where = self.expression(expr, 0, cell)
        return fn, where, []

    def _lower(self, fn, where, types):
        try:
            return self.prepare(fn, types)
        except CompileError as err:
            raise self.compile_error(err, where) from None

    def cmd_mlir(self, arg, expr, cell) -> None:
        fn, where, types = self._lowered(arg, expr, cell)
        lowered = self._lower(fn, where, types)
        self.write(where.text(lowered.as_text()))

    def cmd_hlo(self, arg, expr, cell) -> None:
        fn, where, types = self._lowered(arg, expr, cell, ":hlo")
        lowered = self._lower(fn, where, types)
        loaded = self.compiled(fn, lowered).executable.loaded
        try:
            text = loaded.hlo_modules()[0].to_string()
        except (AttributeError, IndexError):
            text = loaded.get_hlo_text()
        self.write(text if text.endswith("\n") else text + "\n")

    def cmd_time(self, arg, expr, cell) -> None:
        t0 = time.perf_counter()
        fn, where = self.expression(expr, 0, cell, cache=False)     # fresh: measures the whole compile
        t1 = time.perf_counter()
        self.call(fn, where=where)                                  # compile + the first run
        t2 = time.perf_counter()
        runs: list[float] = []

        def measure():      # one helper thread for all the runs (the calls inside do not hand off again)
            while len(runs) < 5 or (sum(runs) < 0.3 and len(runs) < 1000):
                start = time.perf_counter()
                self.call(fn, where=where, quiet=True)
                runs.append(time.perf_counter() - start)
        from arrc.runtime.call import interruptible
        interruptible(measure)
        run = statistics.median(runs)
        compile_s = max(0.0, t2 - t1 - run)
        self.write(f"compile {format_seconds(t1 - t0 + compile_s)} (check {format_seconds(t1 - t0)}, "
                   f"lower + XLA {format_seconds(compile_s)}), run {format_seconds(run)} "
                   f"(median of {len(runs)} runs, {self.device})\n")

    def cmd_guards(self, arg, expr, cell) -> None:
        if not arg:
            self.write(f"guards: {self.guards or 'off'}\n")
            return
        if arg in ("off", "none"):
            self.guards = None
        else:
            kinds = [k.strip() for k in arg.split(",") if k.strip()]
            bad = [k for k in kinds if k not in GUARD_KINDS]
            if bad or not kinds:
                raise CellError(f"error: unknown guard `{bad[0] if bad else arg}` "
                                f"(choose from {', '.join(GUARD_KINDS)}, or off)", EXIT_USAGE, diagnostic=False)
            self.guards = "all" if "all" in kinds else ",".join(kinds)
        self.write(f"guards: {self.guards or 'off'}\n")

    def cmd_device(self, arg, expr, cell) -> None:
        from arrc.runtime.pjrt import DeviceUnavailable, backend
        if arg:
            if arg not in DEVICES:
                raise CellError(f"error: unknown device `{arg}` (choose from {', '.join(DEVICES)})", EXIT_USAGE,
                                diagnostic=False)
            try:
                backend(arg)
            except DeviceUnavailable as err:
                raise CellError(f"error: {err}; still on {self.device}", EXIT_USAGE, diagnostic=False) from None
            self.device = arg
        try:
            dev = backend(self.device).local_devices()[0]
            kind = getattr(dev, "device_kind", "") or ""
        except Exception:          # a description only
            kind = ""
        self.write(f"device: {self.device}" + (f" ({kind})" if kind and kind != self.device else "") + "\n")

    def cmd_load(self, arg, expr, cell) -> None:
        path = os.path.expanduser(arg.strip("\"'"))
        self.load_file(path)

    def load_file(self, path: str, reload: bool = False) -> None:
        file = Path(path)
        if not file.is_file():
            raise CellError(f"error: no such file: {path}", EXIT_USAGE, diagnostic=False)
        try:
            source = decode(file.read_bytes(), path)
        except CompileError as err:
            raise self.compile_error(err, Where()) from None
        old = [n for n in self.loaded.get(path, []) if n in self.items and self.items[n].origin == path]
        new = self.define(source.text, path, origin=path, file_source=source)
        names = [it.name for it in new]
        for n in old:
            if n not in names:
                del self.items[n]
        self.loaded[path] = names
        fns = [it.name for it in new if it.kind == "def"]
        consts = [it.name for it in new if it.kind == "const"]
        parts = []
        if fns:
            parts.append(f"{len(fns)} function{'s' if len(fns) != 1 else ''} ({', '.join(fns)})")
        if consts:
            parts.append(f"{len(consts)} constant{'s' if len(consts) != 1 else ''} ({', '.join(consts)})")
        self.write(f"{'reloaded' if reload else 'loaded'} {path}: {', '.join(parts) or 'nothing'}\n")

    def cmd_reload(self, arg, expr, cell) -> None:
        if not self.loaded:
            raise CellError("error: nothing to reload: no file was loaded with :load", EXIT_USAGE, diagnostic=False)
        for path in list(self.loaded):
            self.load_file(path, reload=True)

    def cmd_quit(self, arg, expr, cell) -> None:
        self.quit = True


def _after_equals(text: str, target: Span) -> tuple[str, int]:
    """The expression after the `=` (or `+=`) that follows `target`, with everything before it on its
    line blanked so that its columns are those of the cell; and the number of lines before it."""
    lines = text.split("\n")
    row = target.end_line - 1
    eq = lines[row].index("=", target.end_col - 1)
    head = " " * (eq + 1) + lines[row][eq + 1:]
    return "\n".join([head] + lines[row + 1:]), row


# ---- reading cells: blocks, brackets, blank lines --------------------------------------------------

def _scan(text: str, depth: int = 0) -> tuple[int, list[str]]:
    """The bracket depth at the end of `text` (starting at `depth`) and its lines with comments removed
    (strings respected; a string ends at the end of its line)."""
    out, line, quote = [], [], None
    i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            line.append(ch)
            if ch == "\\" and i + 1 < len(text):
                line.append(text[i + 1])
                i += 1
            elif ch == quote or ch == "\n":
                quote = None
                if ch == "\n":
                    out.append("".join(line[:-1]))
                    line = []
        elif ch in "\"'":
            quote = ch
            line.append(ch)
        elif ch == "#":
            while i < len(text) and text[i] != "\n":
                i += 1
            continue
        elif ch == "\n":
            out.append("".join(line))
            line = []
        else:
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth = max(0, depth - 1)
            line.append(ch)
        i += 1
    out.append("".join(line))
    return depth, out


def is_block(text: str) -> bool:
    """Does the cell open an indented block (`def ...:`, `for ...:`)?"""
    if text.lstrip().startswith(":"):
        return False
    return _opens_block(_scan(text)[1])


def _opens_block(lines: list[str]) -> bool:
    return any(line.rstrip().endswith(":") for line in lines if line.strip())


def open_brackets(text: str) -> bool:
    return _scan(text)[0] > 0


def is_complete(text: str) -> bool:
    """For the prompt: does Enter run the buffer? A block needs a blank last line, brackets must be closed."""
    if not text.strip() or text.lstrip().startswith(":"):
        return True
    if open_brackets(text):
        return False
    if is_block(text):
        return text.split("\n")[-1].strip() == "" and len(text.split("\n")) > 1
    return True


_CONTINUES = re.compile(r"(elif|else)\b")


class CellReader:
    """Splits lines into cells the way a script reads: a line is a cell unless it opens brackets or a
    block; a block goes on until a line at column 0 that does not continue it (`elif`, `else`) or the
    end of input; blank lines inside a block are kept."""

    def __init__(self):
        self.pending: list[str] = []
        self.depth = 0              # the bracket depth at the end of the pending lines
        self.block = False          # whether a pending line opens a block
        # (kept line by line: rescanning the whole pending block for each line made a piped 8,000-line
        # `def` take 93 s)

    def _add(self, line: str) -> None:
        self.depth, lines = _scan(line, self.depth if self.pending else 0)
        self.block = bool(self.pending) and self.block or _opens_block(lines)
        self.pending.append(line)

    def feed(self, line: str) -> list[str]:
        line = line.rstrip("\r\n")
        out: list[str] = []
        if self.pending:
            if self.depth > 0:
                self._add(line)
                if self.depth == 0 and not self.block:
                    out.append(self._flush())
                return out
            if line.strip() and not line[0].isspace() and not line.startswith("#") \
                    and not _CONTINUES.match(line):
                out.append(self._flush())
            else:
                self._add(line)
                return out
        if not line.strip() or line.lstrip().startswith("#"):
            return out
        self._add(line)
        if line.lstrip().startswith(":") or (self.depth == 0 and not self.block):
            out.append(self._flush())
        return out

    def close(self) -> list[str]:
        return [self._flush()] if self.pending else []

    def _flush(self) -> str:
        text = "\n".join(self.pending).rstrip()
        self.pending = []
        return text


def split_cells(text: str) -> list[str]:
    reader = CellReader()
    out: list[str] = []
    for line in text.split("\n"):
        out.extend(reader.feed(line))
    return out + reader.close()


# ---- the terminal ---------------------------------------------------------------------------------

def history_path() -> Path:
    """Where the prompt's history is kept: $ARRC_REPL_HISTORY, else `arrc/repl_history` in the user's
    data directory ($XDG_DATA_HOME or ~/.local/share; ~/Library/Application Support; %APPDATA%)."""
    env = os.environ.get("ARRC_REPL_HISTORY")
    if env:
        return Path(env).expanduser()
    if os.name == "nt":
        base = Path(os.environ.get("APPDATA") or Path.home() / "AppData" / "Roaming")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "arrc" / "repl_history"


def make_completer(session: Session):
    from prompt_toolkit.completion import Completer, Completion, PathCompleter
    from prompt_toolkit.document import Document

    paths = PathCompleter(expanduser=True)

    class ArrCompleter(Completer):
        """Meta-commands, then names: the session's values and functions, builtins, keywords, dtypes."""

        def get_completions(self, document, complete_event):
            text = document.text_before_cursor
            stripped = text.lstrip()
            if stripped.startswith(":"):
                command, space, rest = stripped.partition(" ")
                if not space:
                    for c in list(COMMANDS) + list(ALIASES):
                        if c.startswith(command) and c in COMMANDS:
                            yield Completion(c, -len(command), display_meta=COMMANDS[c][1])
                    return
                command = ALIASES.get(command, command)
                if command == ":load":
                    yield from paths.get_completions(Document(rest, len(rest)), complete_event)
                    return
                if command in (":guards", ":device"):
                    word = rest.split(",")[-1].strip()
                    for c in (GUARD_KINDS + ("off",) if command == ":guards" else DEVICES):
                        if c.startswith(word):
                            yield Completion(c, -len(word))
                    return
            m = re.search(r"(\.)?([A-Za-z_][A-Za-z0-9_]*)?$", text)
            word = m.group(2) or ""
            if m.group(1):
                for a in ATTRIBUTES:
                    if a.startswith(word):
                        yield Completion(a, -len(word), display_meta="attribute")
                return
            if not word and not complete_event.completion_requested:
                return
            candidates = []
            for n, b in session.bindings.items():
                candidates.append((n, f"value {b.type}"))
            for n, it in session.items.items():
                if it.kind != "cell":
                    candidates.append((n, "function" if it.kind == "def" else "constant"))
            candidates += [(n, "builtin") for n in BUILTIN_NAMES]
            candidates += [(n, "keyword") for n in KEYWORDS]
            candidates += [(n, "dtype") for n in DTYPES]
            candidates += [(n, "constant") for n in NAMED_CONSTANTS]
            seen = set()
            for n, meta in candidates:
                if n.startswith(word) and n not in seen:
                    seen.add(n)
                    yield Completion(n, -len(word), display_meta=meta)

    return ArrCompleter()


def make_key_bindings():
    from prompt_toolkit.key_binding import KeyBindings
    from prompt_toolkit.key_binding.bindings.named_commands import get_by_name

    kb = KeyBindings()

    @kb.add("enter")
    def _enter(event):
        buf = event.current_buffer
        if buf.complete_state and buf.complete_state.current_completion:
            buf.apply_completion(buf.complete_state.current_completion)
            return
        if ("\n" not in buf.text or buf.document.is_cursor_at_the_end) and is_complete(buf.text):
            buf.validate_and_handle()
            return
        line = buf.document.current_line_before_cursor
        indent = line[:len(line) - len(line.lstrip())]
        if _scan(line)[1][0].rstrip().endswith(":"):
            indent += "    "
        buf.insert_text("\n" + indent)

    @kb.add("tab")
    def _tab(event):
        buf = event.current_buffer
        before = buf.document.current_line_before_cursor
        if not before.strip():
            buf.insert_text("    ")
        else:
            get_by_name("menu-complete").handler(event)

    @kb.add("backspace", filter=True)
    def _backspace(event):
        buf = event.current_buffer
        before = buf.document.current_line_before_cursor
        if before and not before.strip() and len(before) % 4 == 0:
            buf.delete_before_cursor(4)
        else:
            buf.delete_before_cursor(1)

    return kb


def run_interactive(session: Session, input=None, output=None, history: bool = True) -> int:
    """The prompt_toolkit loop: highlighting, history across sessions, completion, multi-line blocks."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory, InMemoryHistory
    from prompt_toolkit.lexers import PygmentsLexer

    from arrc.lexer import ArrReplLexer

    hist = InMemoryHistory()
    if history:
        path = history_path()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch(exist_ok=True)
            hist = FileHistory(str(path))
        except OSError:
            pass
    prompt = PromptSession(
        PROMPT, multiline=True, prompt_continuation=lambda width, line_number, soft_wrap: CONTINUATION,
        lexer=PygmentsLexer(ArrReplLexer), completer=make_completer(session), complete_while_typing=False,
        history=hist, key_bindings=make_key_bindings(), input=input, output=output,
        enable_history_search=False, reserve_space_for_menu=4)
    session.write(f"arr {arrc.__version__} REPL: :help for help, :quit or Ctrl-D to leave\n")
    while not session.quit:
        try:
            text = prompt.prompt()
        except KeyboardInterrupt:
            continue
        except EOFError:
            break
        session.run(text)
    return EXIT_OK


def run_piped(session: Session, stdin) -> int:
    """Cells from a pipe or file: the same results, no prompts, no terminal needed."""
    reader = CellReader()
    for line in stdin:
        for cell in reader.feed(line):
            session.run_cell(cell)
            if session.quit:
                return session.exit_code
    for cell in reader.close():
        session.run_cell(cell)
        if session.quit:
            break
    return session.exit_code


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="arrc repl", description="The interactive arr prompt.")
    p.add_argument("files", nargs="*", metavar="FILE", help="files to :load first")
    p.add_argument("--guards", metavar="KINDS", help="nan,inf,bounds,div0 or all")
    p.add_argument("--device", choices=DEVICES, default="cpu", help="device (default: cpu)")
    p.add_argument("--no-history", action="store_true", help="do not read or write the history file")
    p.add_argument("--no-color", action="store_true", help="no colours in diagnostics")
    return p


def main(argv: list[str] | None = None, stdin=None, stdout=None) -> int:
    """`arrc repl [FILE...] [--guards KINDS] [--device NAME]`: a prompt on a terminal, else a script
    from stdin. Returns the exit status."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else EXIT_USAGE
    out = stdout if stdout is not None else sys.stdout
    interactive = stdin is None and stdout is None and sys.stdin.isatty() and sys.stdout.isatty()
    width = 75
    if interactive:
        import shutil
        width = max(40, shutil.get_terminal_size().columns - 1)
    color = interactive and not args.no_color and not os.environ.get("NO_COLOR")
    session = Session(out, width=width, color=color)
    quiet = Session(io.StringIO())              # checks the settings, prints nothing when they are fine
    for text in ([f":guards {args.guards}"] if args.guards else []) + \
                ([f":device {args.device}"] if args.device != "cpu" else []):
        if not quiet.run_cell(text):
            sys.stderr.write(quiet.out.getvalue())
            return EXIT_USAGE
    session.guards, session.device = quiet.guards, quiet.device
    for path in args.files:
        session.run_cell(f":load {path}")
    try:
        if interactive:
            return run_interactive(session, history=not args.no_history)
        return run_piped(session, stdin if stdin is not None else sys.stdin)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
