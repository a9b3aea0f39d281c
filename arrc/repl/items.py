"""What the session compiles: its items (definitions, bindings) and the names they use, the function a
statement cell runs as, built from the statement's AST (nothing is rewritten as text), and how a cell fails."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from arrc.compiler import ast
from arrc.compiler.span import Source, Span
from arrc.exits import EXIT_COMPILE, EXIT_USAGE

from .display import dtype_name, type_str

CELL_FN = "__cell__"               # the function a statement cell runs as
CELL_LABEL = "the cell"            # what reports call it, and an expression cell


class CellError(Exception):
    """A cell failed; `text` is what to show (rendered diagnostics or a one-line message)."""

    def __init__(self, text: str, code: int = EXIT_COMPILE, diagnostic: bool = True):
        super().__init__(text)
        self.text = text if text.endswith("\n") else text + "\n"
        self.code = code
        self.diagnostic = diagnostic


class StaticValue(CellError):
    """An expression whose value is known without running anything and is no array (`x.dtype`): `shown` is
    how a cell shows it; elsewhere (`d = x.dtype`) it fails as `failure` (E0210) does."""

    def __init__(self, type: str, shown: str, failure: CellError):
        super().__init__(failure.text, failure.code, failure.diagnostic)
        self.type = type                      # what `:type` says: `dtype`, `()`
        self.shown = f"{type} = {shown}\n"


def usage_error(text: str) -> CellError:
    return CellError(f"error: {text}", EXIT_USAGE, diagnostic=False)


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


def span_text(source: Source, span: Span) -> str:
    """The text `span` covers in `source`."""
    lines = [source.line_text(n) for n in range(span.line, span.end_line + 1)]
    lines[-1] = lines[-1][:span.end_col - 1]
    lines[0] = lines[0][span.col - 1:]
    return "\n".join(lines)


def cell_function(stmt, carried: list[tuple[str, np.ndarray]], source: Source) -> ast.FunctionDef:
    """The function a statement cell (`stmt`, parsed from `source`) runs as: the bindings it assigns
    (`carried`, with their values) are its parameters and its results; with none, it returns 0. Its
    parameters are said to be declared where the cell begins, its results returned on its last line."""
    s = stmt.span
    last = min(s.end_line, source.text.count("\n") + 1)
    head = Span(s.file, s.line, s.col, s.line, s.col + 1)
    tail = Span(s.file, last, 1, last, 2)

    def type_expr(value: np.ndarray) -> ast.TypeExpr:
        dims = tuple(ast.DimInt(head, d) for d in value.shape) if value.ndim else None
        return ast.TypeExpr(head, dtype_name(value), dims)
    params = tuple(ast.Param(head, name, type_expr(value)) for name, value in carried)
    if carried:
        results = tuple(p.type for p in params)
        values = tuple(ast.Name(tail, name) for name, _ in carried)
    else:
        results, values = (ast.TypeExpr(head, "i32", None),), (ast.IntLit(tail, 0),)
    return ast.FunctionDef(s, CELL_FN, params, results, len(carried) > 1, (stmt, ast.Return(tail, values)),
                           name_span=head, label=CELL_LABEL)


@dataclass
class Item:
    """A definition in the session: a `def`, a `const`, or the function a statement cell runs as."""
    name: str
    kind: str                    # "def", "const" or "cell"
    node: ast.Node               # its AST, with spans in `source`
    source: Source               # the cell or file it was written in
    deps: frozenset
    serial: int                  # one per definition made: its part of the compile cache's key
    origin: str | None = None    # the file it was loaded from (for :reload)
    shape_vars: frozenset = frozenset()   # dimension names that were not values when it was defined

    @property
    def where(self) -> str:
        return f"{self.source.name}:{self.node.span.line}"


@dataclass
class Binding:
    name: str
    value: np.ndarray
    version: int

    @property
    def type(self) -> str:
        return type_str(self.value)
