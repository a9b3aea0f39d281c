"""Language hygiene (issue 13 item 3): reserved keywords, `nan`/`inf` not rebindable, cast literals in range,
no max/min/argmax/argmin of an empty axis, const cycles, bidirectional text controls. Each test pins the
whole rendered diagnostic."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import arrc
from arrc.compiler import fastparse
from arrc.compiler.diagnostics import CompileError, render_all
from arrc.compiler.span import Source


def error_text(src: str, filename: str = "t.arr") -> str:
    with pytest.raises(CompileError) as info:
        arrc.loads(src, filename=filename)
    return str(info.value)


# ---- (a) keywords are reserved ---------------------------------------------------------------------
def test_keyword_as_variable_is_an_error():
    assert error_text("def f(x: f32) -> f32:\n    def = 1.0\n    return def\n") == (
        "error[E0001]: `def` is a keyword and cannot be a name\n"
        " --> t.arr:2:5\n"
        "  |\n"
        "2 |     def = 1.0\n"
        "  |     ^^^ a keyword\n"
        "  |\n"
        "  = help: choose another name, such as `def_`\n")


@pytest.mark.parametrize("src, word", [
    ("def if(x: f32) -> f32:\n    return x\n", "if"),
    ("def f(in: f32) -> f32:\n    return 1.0\n", "in"),
    ("const true: f32 = 1.0\n", "true"),
    ("def f(x: f32) -> f32:\n    return x.in\n", "in"),
    ("def f(x: f32) -> f32:\n    return g(print=x)\n", "print"),
    ("def f(x: f32) -> f32:\n    for while in range(3):\n        x += 1.0\n    return x\n", "while"),
    ("def f(x: f32) -> f32:\n    y = range\n    return x\n", "range"),
    ("def f(x: f32[else]) -> f32:\n    return 1.0\n", "else"),
])
def test_every_keyword_position_is_an_error(src, word):
    assert f"error[E0001]: `{word}` is a keyword and cannot be a name" in error_text(src)


def test_names_that_start_with_a_keyword_are_names():
    mod = arrc.loads("def f(iffy: f32) -> f32:\n    in_ = iffy\n    define = in_\n    return define\n")
    assert "f" in mod.functions


def test_the_grammar_reserves_the_fast_parsers_keywords():
    grammar = (Path(__file__).resolve().parent.parent / "grammar" / "arr.lark").read_text(encoding="utf-8")
    name = re.search(r"^NAME: /\(\?!\(\?:([a-z|]+)\)", grammar, re.M)
    assert name and set(name.group(1).split("|")) == fastparse.KEYWORDS
    quoted = set(re.findall(r'"([a-z]+)"', grammar.split("// ---- tokens")[0]))
    assert quoted == fastparse.KEYWORDS


# ---- (b) nan, inf (and pi) cannot be rebound --------------------------------------------------------
def test_assigning_nan_is_an_error():
    assert error_text("def f(x: f32) -> f32:\n    nan = 1.0\n    return x + nan\n") == (
        "error[E0105]: cannot assign to `nan`: it is a built-in constant\n"
        " --> t.arr:2:5\n"
        "  |\n"
        "2 |     nan = 1.0\n"
        "  |     ^^^ `nan` is a built-in constant\n"
        "  |\n"
        "  = help: choose another name\n")


@pytest.mark.parametrize("src, message", [
    ("def inf(x: f32) -> f32:\n    return x\n", "cannot define `inf`"),
    ("const nan: f32 = 1.0\n", "cannot define `nan`"),
    ("def f(inf: f32) -> f32:\n    return inf\n", "cannot use `inf` as a parameter"),
    ("def f(x: f32[2, nan]) -> f32:\n    return 1.0\n", "cannot use `nan` as a shape variable"),
    ("def f(x: f32) -> f32:\n    for inf in range(3):\n        x += 1.0\n    return x\n",
     "cannot use `inf` as a loop variable"),
    ("def f(x: f32) -> f32:\n    a, inf = 1.0, 2.0\n    return x\n", "cannot assign to `inf`"),
    ("def f(x: f32) -> f32:\n    pi = 3.0\n    return x\n", "cannot assign to `pi`"),
])
def test_every_binding_of_a_named_constant_is_an_error(src, message):
    assert f"error[E0105]: {message}: it is a built-in constant" in error_text(src)


# ---- (c) an integer literal cast to a dtype it does not fit ------------------------------------------
def test_casting_an_out_of_range_literal_is_an_error():
    assert error_text("def main() -> u64:\n    return u64(2**64)\n") == (
        "error[E0211]: literal 18446744073709551616 is out of range for u64 (0..18446744073709551615)\n"
        " --> t.arr:2:16\n"
        "  |\n"
        "2 |     return u64(2**64)\n"
        "  |                ^^^^^ does not fit in u64\n"
        "  |\n"
        "  = help: `u64(...)` does not wrap a literal: write `u64(0)` or `(18446744073709551616).astype(u64)` if the "
        "wrapped value is meant\n")


@pytest.mark.parametrize("call", ["u32(-1)", "i8(128)", "u8(256)", "i64(2**63)", "u8(2**8)"])
def test_every_out_of_range_cast_of_a_literal_is_an_error(call):
    assert "error[E0211]: literal" in error_text(f"def main() -> i64:\n    return i64({call})\n")


@pytest.mark.parametrize("expr, expected", [
    ("i8(-128)", -128), ("bool(2**64)", True), ("(18446744073709551615).astype(i64)", -1), ("(300).astype(u8)", 44), ("u64(2**63)", 2 ** 63),
    ("f64(2**64)", 2.0 ** 64), ("f32(2**70)", np.float32(2.0 ** 70)), ("bool(1)", True), ("2**10", 1024)])
def test_literals_in_range_cast_exactly(expr, expected):
    mod = arrc.loads(f"def main() -> f64:\n    return f64({expr})\n")
    assert float(np.asarray(mod.main())) == float(expected)


# ---- (d) max/min/argmax/argmin of an empty axis ------------------------------------------------------
def test_max_of_an_empty_axis_is_an_error():
    assert error_text("def main(x: f32[0, 3]) -> f32[3]:\n    return max(x, axis=0)\n") == (
        "error[E0204]: `max` of an empty array: axis 0 has size 0\n"
        " --> t.arr:2:16\n"
        "  |\n"
        "2 |     return max(x, axis=0)\n"
        "  |                ^ this is f32[0, 3]\n"
        "  |\n"
        "  = help: `max` of no elements is undefined (NumPy and JAX raise); use a non-empty array or "
        "`sum`/`prod`/`any`/`all`, which have an identity\n")


@pytest.mark.parametrize("call", ["min(x)", "argmax(x)", "argmin(x, axis=1)", "max(x, axis=(0, 1))"])
def test_every_extreme_of_an_empty_axis_is_an_error(call):
    name = call.split("(")[0]
    assert f"error[E0204]: `{name}` of an empty array" in error_text(
        f"def main(x: i32[2, 0]) -> i32:\n    y = {call}\n    return 0\n")


def test_an_empty_axis_found_at_specialization_is_an_error():
    mod = arrc.loads("def f(x: f32[n]) -> i32:\n    return argmin(x)\n")
    with pytest.raises(CompileError) as info:
        mod.f(np.zeros(0, np.float32))
    assert "`argmin` of an empty array: axis 0 has size 0" in str(info.value)
    assert int(mod.f(np.array([3.0, 1.0], np.float32))) == 1


def test_other_axes_may_be_empty():
    mod = arrc.loads("def main(x: f32[0, 3]) -> (f32[0], i32[0], f32[3]):\n"
                     "    return max(x, axis=1), argmin(x, axis=1), sum(x, axis=0)\n")
    a, b, c = mod.main(np.zeros((0, 3), np.float32))
    assert a.shape == (0,) and b.shape == (0,) and list(np.asarray(c)) == [0, 0, 0]


# ---- (e) const cycles ---------------------------------------------------------------------------------
def test_a_const_cycle_is_an_error():
    assert error_text("const a: i32 = b\nconst b: i32 = a\n\ndef main() -> i32:\n    return a\n") == (
        "error[E0104]: constants defined in a cycle: a -> b -> a\n"
        " --> t.arr:1:16\n"
        "  |\n"
        "1 | const a: i32 = b\n"
        "  |                ^ `a` uses `b`\n"
        "2 | const b: i32 = a\n"
        "  |                - `b` uses `a`\n"
        "  |\n"
        "  = help: a constant cannot depend on itself; give one of them a value that does not use the others\n")


def test_a_const_using_itself_is_an_error():
    assert "error[E0104]: constants defined in a cycle: a -> a" in error_text("const a: i32 = a + 1\n")


def test_a_const_may_use_one_defined_after_it():
    mod = arrc.loads("const a: f32[K] = [1.0, 2.0] * c\nconst c: f32 = 2.0 * K\nconst K: i32 = 2\n\n"
                     "def main() -> f32[K]:\n    return a\n")
    assert list(np.asarray(mod.main())) == [4.0, 8.0]


# ---- (f) invisible text-direction controls ----------------------------------------------------------
def warning_text(src: str) -> str:
    mod = arrc.loads(src, filename="t.arr")
    return render_all(mod.warnings, {"t.arr": Source("t.arr", src)})


def test_a_text_direction_control_in_a_comment_is_a_warning():
    assert warning_text("def f(x: f32) -> f32:\n    # x \u202e reversed\n    return x\n") == (
        "warning[W0002]: invisible text-direction control U+202E (RIGHT-TO-LEFT OVERRIDE) in a comment\n"
        " --> t.arr:2:9\n"
        "  |\n"
        "2 |     # x \ufffd reversed\n"
        "  |         ^ U+202E, shown here as \ufffd\n"
        "  |\n"
        "  = note: it can make the code display differently from how it is compiled\n"
        "  = help: remove it\n")


@pytest.mark.parametrize("ch", ["\u061c", "\u200e", "\u200f", *map(chr, range(0x202A, 0x202F)),
                                *map(chr, range(0x2066, 0x206A))])
def test_every_text_direction_control_in_a_string_is_a_warning(ch):
    text = warning_text(f"def f(x: f32) -> f32:\n    print('it\\'s {ch}', \"#\", x)  # fine\n    return x\n")
    assert text.startswith(f"warning[W0002]: invisible text-direction control U+{ord(ch):04X} (")
    assert " in a string literal\n --> t.arr:2:18\n" in text
    assert text.count("warning[W0002]") == 1
    assert f"write it as the escape `\\u{ord(ch):04x}`" in text


def test_a_text_direction_control_in_code_is_a_syntax_error():
    assert error_text("def f(x: f32) -> f32:\n    return \u202ex\n").startswith(
        "error[E0001]: unexpected character '\\u202e'\n --> t.arr:2:12\n")


def test_an_escape_or_plain_text_gets_no_warning():
    assert not arrc.loads('def f(x: f32) -> f32:\n    print("\\u202e", x)  # plain\n    return x\n').warnings


def test_the_warning_is_an_error_under_werror():
    with pytest.raises(CompileError) as info:
        arrc.loads("def f(x: f32) -> f32:\n    return x  # \u2067\n", warnings="error")
    assert [d.code for d in info.value.diagnostics] == ["W0002"]
