"""How the REPL shows a run-time report (a guard, a failed `assert`): the report of the API
(runtime/guards.py) with its cell named once, from the session's sources."""
from __future__ import annotations

import dataclasses
import re
import typing

from arrc.compiler import ast
from arrc.compiler.diagnostics import CompileError, Diagnostic
from arrc.compiler.parse import grouped, parse
from arrc.compiler.span import Source

from .items import CELL_LABEL, span_text


def reported(diag: Diagnostic, sources: dict) -> Diagnostic:
    """A run-time report as the REPL shows it, the cell named once: the header's `--> <cell 4>:1:5` says
    where, so the note `in the cell` goes, `called from the cell at <cell 4>:1:1` is `called from
    <cell 4>:1:1`, an operand the report could only place (`value at <cell 4>:1:5`: its text spans
    lines) is its text on one line, and a label kept as a note for lack of its source line (the session
    has every cell's) is not repeated."""
    def operand(match) -> str:
        file, line, col = match.group(1), int(match.group(2)), int(match.group(3))
        text = expression_text(sources.get(file), line, col)
        if text is not None:
            return grouped(text, before_suffix=False)
        return f"the value at {line}:{col}" if diag.span is not None and file == diag.span.file else match.group(0)

    def clean(text: str) -> str:
        text = text.replace(f"called from {CELL_LABEL} at ", "called from ")
        return OPERAND_AT.sub(operand, text)
    shown = diag.span is not None and diag.span.file in sources
    notes = [clean(n) for n in diag.notes
             if n != f"in {CELL_LABEL}" and not (shown and diag.label and n == diag.label)]
    notes = [n.replace(f"in the backward pass, in {CELL_LABEL}", "in the backward pass") for n in notes]
    return dataclasses.replace(diag, label=clean(diag.label), notes=notes)


OPERAND_AT = re.compile(r"value at (.+?):(\d+):(\d+)(?=\b|$)")


def expression_text(source: Source | None, line: int, col: int, limit: int = 40) -> str | None:
    """The text of the outermost expression of `source` (a cell or a file) that begins at `line`:`col`,
    on one line (shortened past `limit` characters); None if there is none."""
    tree = None
    for start in ("module", "stmt"):        # a file or a cell of definitions; any other cell
        try:
            tree = parse(source, start=start) if source is not None else None
            break
        except CompileError:
            continue
    best = None
    for node in ast.walk(tree) if tree is not None else ():
        s = node.span
        if isinstance(node, EXPRESSIONS) and s is not None and (s.line, s.col) == (line, col) \
                and (best is None or (s.end_line, s.end_col) > (best.end_line, best.end_col)):
            best = s
    if best is None:
        return None
    text = " ".join(span_text(source, best).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


EXPRESSIONS = typing.get_args(ast.Expr)
