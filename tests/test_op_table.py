"""The op table is the one place for an op (issue 14): each entry carries its rule, its display name (the
name of its MLIR locations and diagnostics), the words guard reports use, and, for a named builtin, its
family and one-line doc, from which the builtin list of docs/language.md is generated.

`pytest tests/test_op_table.py --update-goldens` rewrites the generated block of docs/language.md."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from arrc.compiler.builtins import BUILTINS, OPERATORS
from arrc.compiler.optable import FAMILIES, register
from arrc.runtime import guards

LANGUAGE_MD = Path(__file__).resolve().parent.parent / "docs" / "language.md"
BEGIN = "<!-- builtins: generated from the op table by tests/test_op_table.py, do not edit -->"
END = "<!-- end builtins -->"


def named_builtins() -> dict:
    return {name: op for name, op in BUILTINS.items() if name[:1].isalpha()}


def _default(value) -> str:
    return {True: "true", False: "false"}.get(value, repr(value)) if isinstance(value, bool) else repr(value)


def signature(op) -> str:
    params = [p if p not in op.defaults else f"{p}={_default(op.defaults[p])}" for p in op.params]
    return f"{op.name}({', '.join(params)})"


def generated_block() -> str:
    """The builtin list: one line per family, then a table of signatures and doc lines."""
    named = named_builtins()
    lines = [BEGIN]
    for family in FAMILIES:
        names = [name for name, op in named.items() if op.family == family]
        if names:
            lines.append(f"- {family}: " + " ".join(f"`{n}`" for n in names))
    lines += ["", "| builtin | computes |", "| --- | --- |"]
    for family in FAMILIES:
        for name, op in named.items():
            if op.family == family:
                lines.append(f"| `{signature(op)}` | {op.doc.replace('|', chr(92) + '|')} |")
    lines.append(END)
    return "\n".join(lines)


def _current_block(text: str) -> str:
    match = re.search(re.escape(BEGIN) + r".*?" + re.escape(END), text, re.S)
    assert match, f"docs/language.md has no block between {BEGIN!r} and {END!r}"
    return match.group(0)


def test_every_named_builtin_has_doc_family_and_display():
    named = named_builtins()
    assert len(named) > 80
    for name, op in named.items():
        assert op.doc and "\n" not in op.doc and op.doc == op.doc.strip(), name
        assert op.family in FAMILIES, name
        assert op.display, name


def test_every_family_has_builtins():
    used = {op.family for op in named_builtins().values()}
    assert used == set(FAMILIES)


def test_every_operator_has_a_display_name():
    for name, op in OPERATORS.items():
        assert op.display and op.display.isidentifier(), name
    assert OPERATORS["+"].display == "add" and OPERATORS["unary-"].display == "negate"
    assert {OPERATORS[o].display for o in ("==", "!=", "<", "<=", ">", ">=")} == {"compare"}


def test_words_agree_between_entries_of_one_display_name():
    """Guard reports look words up by location name: ops sharing a display name must not disagree."""
    seen = {}
    for table in (OPERATORS, BUILTINS):
        for op in table.values():
            if op.words:
                assert seen.setdefault(op.display, op.words) == op.words, op.name
    for display, words in seen.items():
        assert guards._OP_WORDS[display] == words


def test_guard_words_unchanged():
    assert guards._OP_WORDS == {
        "add": "addition", "subtract": "subtraction", "multiply": "multiplication", "divide": "division",
        "power": "power", "matmul": "matrix product", "floor_divide": "floor division", "remainder": "remainder",
        "negate": "negation", "index": "indexing", "update": "indexed update", "dynamic_slice": "dynamic_slice",
        "conv": "convolution", "conv_transpose": "convolution"}


def test_docs_builtin_list_is_generated(update_goldens):
    text = LANGUAGE_MD.read_text(encoding="utf-8")
    current, expected = _current_block(text), generated_block()
    if update_goldens and current != expected:
        LANGUAGE_MD.write_text(text.replace(current, expected), encoding="utf-8")
        return
    assert current == expected, "docs/language.md's builtin list is stale: run pytest tests/test_op_table.py " \
                                "--update-goldens"


def _rule(cx, x):
    return x


def test_builtin_without_doc_is_refused():
    with pytest.raises(TypeError, match="without a doc"):
        register("frobnicate", family="Elementwise")(_rule)
    with pytest.raises(TypeError, match="family"):
        register("frobnicate", doc="elementwise frobnication")(_rule)
    with pytest.raises(TypeError, match="one line"):
        register("frobnicate", family="Elementwise", doc="two\nlines")(_rule)
    assert "frobnicate" not in BUILTINS


def test_operator_without_display_is_refused():
    with pytest.raises(TypeError, match="display"):
        register("<=>", params="x, y", table=OPERATORS)(lambda cx, x, y: x)
    assert "<=>" not in OPERATORS
