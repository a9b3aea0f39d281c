"""Diagnostics: whole rendered text against goldens (one case at least per error code), JSON, recovery.

Golden cases live in tests/golden/diagnostics/NAME.arr with the expected rendering in NAME.txt
(`pytest --update-goldens` rewrites the .txt files). A case file may start with directives:

    # arrc: warnings=error          compile with warnings="error"
    # arrc: lower F T1 T2 ...       after loading, specialize F to the concrete types T1 T2 ...

A case that compiles with warnings only renders those warnings.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import arg_type

import arrc
from arrc.compiler.diagnostics import CODES, CompileError, render_all, render_json
from arrc.compiler.parse import decode
from arrc.compiler.span import Source

GOLDEN_DIR = Path(__file__).parent / "golden" / "diagnostics"
CASES = sorted(p.stem for p in GOLDEN_DIR.glob("*.arr"))

# Codes no arr source can produce: features arrc does not implement yet, E0502/E0503 (StableHLO from
# elsewhere, tested in tests/test_adversarial_stablehlo.py and test_guards.py), and E0601, the internal
# error, which no correct compilation produces (tested in tests/test_adversarial_cli.py), and E0504, which
# needs a backend this machine lacks (its whole text is tested with a fake table entry, tests/test_conv.py).
NOT_YET = {"E0501", "E0502", "E0503", "E0504", "E0601"}


def _directives(data: bytes) -> tuple[str, list]:
    warnings, lowers = "warn", []
    for line in data.decode("utf-8", "replace").splitlines():
        m = re.match(r"#\s*arrc:\s*(.*)", line)
        if not m:
            continue
        words = m.group(1).split()
        if words[0] == "warnings=error":
            warnings = "error"
        elif words[0] == "lower":
            lowers.append((words[1], " ".join(words[2:])))
    return warnings, lowers


def render_case(path: Path) -> str:
    """The diagnostics that compiling the case file produces, rendered as arrc prints them."""
    data = path.read_bytes()
    name = path.name
    warnings, lowers = _directives(data)
    try:
        source = decode(data, name)
        mod = arrc.loads(source.text, filename=name, warnings=warnings)
        for fn, types in lowers:
            mod[fn].lower(*(arg_type(t) for t in re.findall(r"\w+(?:\[[^\]]*\])?", types)))
    except CompileError as err:
        return str(err)
    if mod.warnings:
        return render_all(mod.warnings, {name: Source(name, source.text)})
    return "(no diagnostics)\n"


@pytest.mark.parametrize("case", CASES)
def test_golden(case, update_goldens):
    arr = GOLDEN_DIR / f"{case}.arr"
    txt = GOLDEN_DIR / f"{case}.txt"
    actual = render_case(arr)
    if update_goldens:
        txt.write_text(actual, encoding="utf-8")
        return
    assert txt.exists(), f"no golden for {case}; run pytest --update-goldens"
    expected = txt.read_text(encoding="utf-8")
    assert actual == expected


@pytest.mark.parametrize("case", [c for c in CASES if re.match(r"[EW]\d{4}_", c)])
def test_golden_case_produces_its_code(case):
    """A case named after a code produces that code first (guards against goldens that drifted)."""
    text = render_case(GOLDEN_DIR / f"{case}.arr")
    first = re.match(r"(error|warning)\[(\w+)\]", text)
    assert first, text
    assert first.group(2) == case[:5]


def test_every_implemented_code_has_a_golden():
    # R codes are run-time guard reports, not compile diagnostics (tested with the guards).
    covered = {c[:5] for c in CASES}
    missing = sorted({c for c in CODES if not c.startswith("R")} - NOT_YET - covered)
    assert not missing, f"codes without a golden case: {missing}"


def test_codes_table_is_well_formed():
    for code, title in CODES.items():
        assert re.fullmatch(r"[EWR]\d{4}", code), code
        assert title and title == title.strip() and not title.endswith(".")


# ---- rendering details that every golden relies on -------------------------------------------
def _error(src: str, filename: str = "t.arr") -> CompileError:
    with pytest.raises(CompileError) as info:
        arrc.loads(src, filename=filename)
    return info.value


def test_header_location_and_carets():
    err = _error("def f(x: f32[n]) -> f32[n]:\n    return x + yy\n")
    text = str(err)
    lines = text.splitlines()
    assert lines[0] == "error[E0101]: undefined name `yy`"
    assert lines[1] == " --> t.arr:2:16"
    assert lines[3] == "2 |     return x + yy"
    assert lines[4] == "  |                ^^ not defined"
    d = err.diagnostics[0]
    assert (d.code, d.severity) == ("E0101", "error")
    assert (d.span.file, d.span.line, d.span.col, d.span.end_line, d.span.end_col) == ("t.arr", 2, 16, 2, 18)
    assert d.label == "not defined"


def test_gutter_widens_for_two_digit_lines():
    src = "\n" * 11 + "def f(x: f32) -> f32:\n    return x + q\n"
    text = str(_error(src))
    assert " --> t.arr:13:16" in text
    assert "13 |     return x + q" in text
    assert "   |                ^ not defined" in text


def test_str_of_error_is_render_all():
    err = _error("def f(x: f32) -> f32:\n    y = a\n    return b\n")
    assert str(err) == render_all(err.diagnostics, err.sources)
    assert len(err.diagnostics) == 2
    assert str(err).split("\n\n")[1].startswith("error[E0101]: undefined name `b`")


def test_errors_in_both_operands_of_one_expression_are_reported():
    err = _error("def f(x: f32) -> f32:\n    return a + b\n")
    assert [d.message for d in err.diagnostics] == ["undefined name `a`", "undefined name `b`"]


# ---- several errors in one run -----------------------------------------------------------------
def test_all_errors_of_a_file_are_reported_in_one_run():
    src = (
        "def f(x: f32[n]) -> f32[n]:\n"         # 1
        "    a = x + y\n"                        # 2  E0101
        "    b = -(x > 0)\n"                     # 3  E0201
        "    return a + b\n"                     # 4  (a, b poisoned: no cascade)
        "\n"
        "def g(x: f31) -> f32:\n"                # 6  E0205
        "    return x\n"
        "\n"
        "def h(x: f32[n]) -> f32:\n"             # 9
        "    return x\n"                         # 10 E0203
        "\n"
        "def k(x: u8) -> u8:\n"                  # 12
        "    return x + 256\n"                   # 13 E0211
    )
    err = _error(src)
    found = sorted((d.span.line, d.code) for d in err.diagnostics)
    assert found == [(2, "E0101"), (3, "E0201"), (6, "E0205"), (10, "E0203"), (13, "E0211")]
    assert all(d.severity == "error" for d in err.diagnostics)
    text = str(err)
    assert text.count("error[") == 5


def test_an_error_does_not_cascade_from_a_poisoned_name():
    err = _error("def f(x: f32[n]) -> f32[n]:\n    a = x + y\n    b = a * 2\n    c = b - a\n    return c\n")
    assert [d.code for d in err.diagnostics] == ["E0101"]


def test_errors_and_warnings_reported_together():
    src = "def f(x: i64[n], y: f32[n]) -> f32[n]:\n    z = x + y\n    return w\n"
    err = _error(src)
    assert sorted(d.code for d in err.diagnostics) == ["E0101", "W0001"]
    assert {d.code: d.severity for d in err.diagnostics} == {"E0101": "error", "W0001": "warning"}


# ---- JSON --------------------------------------------------------------------------------------
def test_json_form():
    src = "def f(x: f32[n], y: f32[m]) -> f32[n]:\n    return x + y\n"
    err = _error(src, "j.arr")
    data = json.loads(render_json(err.diagnostics))
    assert list(data) == ["diagnostics"]
    [d] = data["diagnostics"]
    assert set(d) == {"code", "severity", "message", "span", "label", "labels", "notes", "help"}
    assert d["code"] == "E0202" and d["severity"] == "error"
    assert d["message"] == "cannot broadcast f32[n] with f32[m] in `+`"
    # 1-based lines and columns; end_col is one past the last column (`x + y` is columns 12..16).
    assert d["span"] == {"file": "j.arr", "line": 2, "col": 12, "end_line": 2, "end_col": 17}
    assert [l["span"] for l in d["labels"]] == [
        {"file": "j.arr", "line": 2, "col": 12, "end_line": 2, "end_col": 13},
        {"file": "j.arr", "line": 2, "col": 16, "end_line": 2, "end_col": 17},
    ]
    assert [l["message"] for l in d["labels"]] == ["this is f32[n]", "this is f32[m]"]
    assert isinstance(d["notes"], list) and d["notes"]
    assert d["help"] is None


def test_json_for_a_spanless_and_a_helpful_diagnostic():
    err = _error("def f(x: f32[n]) -> f32[n]:\n    return exq(x)\n", "h.arr")
    [d] = json.loads(render_json(err.diagnostics))["diagnostics"]
    assert d["help"] == "did you mean `exp`?"
    assert d["span"]["col"] == 12 and d["span"]["end_col"] == 15     # `exq`
    assert json.loads(render_json([]))["diagnostics"] == []


# ---- syntax-level robustness -------------------------------------------------------------------
@pytest.mark.parametrize("depth", [10_000])
def test_ten_thousand_parentheses_give_a_diagnostic(depth):
    src = "def f(x: f32) -> f32:\n    return " + "(" * depth + "x" + ")" * depth + "\n"
    err = _error(src)
    assert [d.code for d in err.diagnostics] == ["E0004"]
    assert "nested" in err.diagnostics[0].message


@pytest.mark.parametrize("expr", [
    "-" * 10_000 + "x",                              # unary chain
    " + ".join(["x"] * 10_000),                      # long left-nested binary chain
    "[" * 10_000 + "x" + "]" * 10_000,               # brackets
    "x" + ".T" * 10_000,                             # postfix chain
])
def test_deep_programs_give_a_diagnostic_not_a_crash(expr):
    err = _error("def f(x: f32) -> f32:\n    return " + expr + "\n")
    assert [d.code for d in err.diagnostics] == ["E0004"]


def test_a_long_const_initializer_is_E0004_not_a_recursion_error():
    """Between what the parser refuses and what the walk handles, a `const`'s chain raised RecursionError
    (E0601 in the CLI); it is E0004 at the initializer, as a statement's is."""
    outcomes = set()
    for n in range(250, 701, 10):
        try:
            arrc.loads("const C: i32 = " + " + ".join(["1"] * n) + "\n")
            outcomes.add("ok")
        except CompileError as err:
            assert [d.code for d in err.diagnostics] == ["E0004"], n
            outcomes.add(err.diagnostics[0].message)
    assert "expression nested too deeply" in outcomes      # (the walk's, at the initializer: line 1, col 16)


def test_bad_utf8_points_at_the_first_bad_byte():
    with pytest.raises(CompileError) as info:
        decode("αβ = 1\n".encode() + b"x = \xc3(\n", "u.arr")
    [d] = info.value.diagnostics
    assert d.code == "E0003"
    assert (d.span.line, d.span.col) == (2, 5)
    assert "0xc3" in d.message


def test_a_byte_order_mark_is_skipped_as_python_skips_it():
    """A file saved as "UTF-8 with BOM" (Windows editors): E0001 at its first character before."""
    source = decode(b"\xef\xbb\xbfdef f(x: f32) -> f32:\n    return x\n", "bom.arr")
    assert source.text.startswith("def f")
    assert arrc.loads(source.text).f(2.0) == 2.0
    with pytest.raises(CompileError) as info:                 # columns count from after the mark
        decode(b"\xef\xbb\xbfx = \xc3(\n", "u.arr")
    assert (info.value.diagnostics[0].span.line, info.value.diagnostics[0].span.col) == (1, 5)


def test_tab_reported_on_every_line():
    err = _error("def f(x: f32) -> f32:\n\ty = x\n\treturn y\n")
    assert [(d.code, d.span.line, d.span.col) for d in err.diagnostics] == [("E0002", 2, 1), ("E0002", 3, 1)]


def test_expected_tokens_are_spelled_as_source_text():
    err = _error("def f(x: f32) -> f32:\n    return (x + 1\n")
    text = str(err)
    assert "ampersand" not in text and "circumflex" not in text


def test_no_cascade_after_branch_type_mismatch():
    src = ("def f(x: f32[n], c: bool) -> f32[n]:\n    if c:\n        y = x\n    else:\n        y = sum(x)\n"
           "    return y\n")
    err = _error(src)
    assert [d.code for d in err.diagnostics] == ["E0301"]


@pytest.mark.parametrize("const", ["const m: f32 = 2.9", "const m: bool = true", "const m: i32[2] = [1, 2]"])
def test_a_const_that_is_not_an_integer_scalar_is_no_dimension(const):
    """It was taken as a new shape variable that shadowed the const: `f32[m]` took any size."""
    with pytest.raises(arrc.CompileError) as info:
        arrc.loads(f"{const}\n\ndef main(x: f32[m]) -> f32[m]:\n    return x\n")
    [d] = info.value.diagnostics
    assert d.code == "E0205" and d.message.startswith("`m` is a const of type ") and (d.span.line, d.span.col) == (3, 17)
    assert arrc.loads("const m: i32 = 3\n\ndef main(x: f32[m]) -> f32[m]:\n    return x\n").main.signature == \
        "(x: f32[3]) -> f32[3]"


@pytest.mark.parametrize("const", ["const m: f32 = 2.5", "const m: bool = true"])
def test_a_const_that_is_not_an_integer_scalar_in_a_result_type_is_e0205_as_in_a_parameter(const):
    # it was E0206 "result type uses `m`, which no parameter binds", whose help said to use a `const`
    with pytest.raises(arrc.CompileError) as info:
        arrc.loads(f"{const}\n\ndef main() -> f32[m]:\n    return zeros(3)\n")
    [d] = info.value.diagnostics
    assert d.code == "E0205" and d.message.startswith("`m` is a const of type ") and (d.span.line, d.span.col) == (3, 15)


@pytest.mark.parametrize("before", [True, False])
def test_a_function_named_as_a_dimension_is_no_shape_variable(before):
    """`def N(...)` and `f32[N]`: N was silently a new shape variable (f took any length); it is E0102 at the
    dimension, with the function's name. (`const N` and `def N` in one file are E0102 at both definitions.)"""
    fn, f = "def N(x: f32[2]) -> f32[2]:\n    return x\n", "def f(x: f32[N]) -> f32[N]:\n    return x\n"
    with pytest.raises(arrc.CompileError) as info:
        arrc.loads(fn + f if before else f + fn)
    [d] = info.value.diagnostics
    assert (d.code, d.message) == ("E0102", "`N` is both a function and a shape variable")
    assert ((d.span.line, d.span.col), [(l.span.line, l.span.col) for l in d.labels]) == \
        ((3, 14), [(1, 5)]) if before else ((1, 14), [(3, 5)])
    for src, first, again in [("const N: i32 = 4\n" + fn + f, (1, 1), (2, 5)),
                              (fn + "const N: i32 = 4\n" + f, (1, 5), (3, 1))]:
        with pytest.raises(arrc.CompileError) as info:
            arrc.loads(src)
        d = info.value.diagnostics[0]         # (then, where the def is kept, `f32[N]` names it: E0102 again)
        assert (d.code, d.message, (d.span.line, d.span.col), [(l.span.line, l.span.col) for l in d.labels]) == \
            ("E0102", "`N` is defined twice", again, [first])
        assert {e.code for e in info.value.diagnostics} == {"E0102"}


def test_a_long_source_line_is_shown_around_its_first_mark():
    """A generated line of 200,000 terms was printed whole, with a caret line as long: now the part from 40
    characters before the first mark, 160 characters in all, cut with "...", the carets where they were."""
    terms = " + ".join(["x"] * 100)
    src = f"def f(x: f32) -> f32:\n    return {terms} + y + {terms}\n"
    with pytest.raises(arrc.CompileError) as info:
        arrc.loads(src, filename="long.arr")
    col = src.splitlines()[1].index(" y ") + 2
    shown = "..." + src.splitlines()[1][col - 41:col - 41 + 160] + "..."
    assert str(info.value) == (
        "error[E0101]: undefined name `y`\n"
        f" --> long.arr:2:{col}\n"
        "  |\n"
        f"2 | {shown}\n"
        f"  | {' ' * 43}^ not defined\n")
    short = "def f(x: f32) -> f32:\n    return x + y\n"          # (a line that fits is shown as it is)
    with pytest.raises(arrc.CompileError) as info:
        arrc.loads(short, filename="short.arr")
    assert "2 |     return x + y\n  |                ^ not defined\n" in str(info.value)
