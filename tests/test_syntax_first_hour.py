"""The syntax items of issue 17 ("the first hour of a NumPy/JAX user"), end to end:

- integer literals in hex, octal and binary, and `_` digit separators (Python's);
- the shifts `<<` and `>>` (and `<<=`, `>>=`) against jax.numpy (x64 on, see conftest) for i8..u64, counts
  past the bit width and negative ones included;
- default parameter values, from arr calls, the Python API and `arrc run`;
- one-line suites (`for i in range(4): s += i`) and `;`-separated statements;
- `grad(loss)(w)` and the diagnostics of other calls of calls;
- several syntax errors reported, one per definition, without cascades.
"""
from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import np_dtype

import arrc
from arrc.cli import main
from arrc.compiler import ast
from arrc.compiler.diagnostics import CompileError
from arrc.compiler.parse import parse
from arrc.compiler.span import Source

INTS = ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"]


def errors(src: str) -> list:
    with pytest.raises(CompileError) as info:
        arrc.loads(src)
    return info.value.diagnostics


def expr_value(text: str):
    node = parse(Source("t.arr", text), start="expr")
    return node.value


# ---- literals -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["0xff", "0XfF", "0x_ff", "0o17", "0O1_7", "0b1010", "0B_1010", "1_000_000",
                                  "0_0", "007", "0x" + "f" * 16, "0b" + "0" * 50 + "1"])
def test_integer_literals_read_as_python(text):
    assert expr_value(text) == (7 if text == "007" else eval(text))     # (arr keeps `007`; Python refuses it)


@pytest.mark.parametrize("text", ["1_000.5", "1_0e1_0", ".2_5", "1_0.e-1"])
def test_float_literals_with_separators(text):
    assert expr_value(text) == float(text)


@pytest.mark.parametrize("text", ["0x", "0xg1", "0b12", "0o8", "1__0", "1_", "1_.5", "1e_5"])
def test_malformed_literals_are_syntax_errors(text):
    diags = errors(f"def f() -> i32:\n    return {text}\n")
    assert [d.code for d in diags] == ["E0001"]


def test_literals_end_to_end():
    m = arrc.loads("const MASK: u32 = 0xFFFF_0000\n"
                   "def f() -> (u32, i64, i32, f64):\n"
                   "    return MASK, i64(1_000_000_000_000), 0o777 + 0b11, f64(2_5.0_5)\n")
    assert [int(v) if i < 3 else float(v) for i, v in enumerate(m.f())] == [0xFFFF0000, 10 ** 12, 0o777 + 3, 25.05]
    assert [d.code for d in errors("def f() -> u8:\n    return u8(0) + 0x1_00\n")] == ["E0211"]   # 256: past u8


def test_highlighting_knows_the_new_tokens():
    from pygments import lex

    from arrc.lexer import ArrLexer
    tokens = [(str(t), v) for t, v in lex("y <<= 0x_ff >> 1_000; z = 0b1 + 1_0.5", ArrLexer()) if v.strip()]
    assert ("Token.Operator", "<<=") in tokens and ("Token.Operator", ">>") in tokens
    assert ("Token.Literal.Number.Hex", "0x_ff") in tokens and ("Token.Literal.Number.Integer", "1_000") in tokens
    assert ("Token.Literal.Number.Bin", "0b1") in tokens and ("Token.Literal.Number.Float", "1_0.5") in tokens
    augmented = [v for t, v in lex("x //= 2; y **= 3", ArrLexer()) if str(t) == "Token.Operator"]
    assert augmented == ["//=", "**="]


# ---- shifts ---------------------------------------------------------------------------------------------
def _shift_cases(dt: str):
    info = np.iinfo(np_dtype(dt))
    npd = info.dtype
    bits = npd.itemsize * 8
    xs = np.array([info.min, info.max, 0, 1, 5, 100, -1 if info.min else 3, -77 if info.min else 200], npd)
    counts = [0, 1, 3, bits - 1, bits, bits + 1, 2 * bits]
    if info.min:
        counts += [-1, -bits]
    x, c = np.meshgrid(xs, np.array(counts, npd))
    return x.ravel(), c.ravel()


@pytest.mark.parametrize("dt", INTS)
def test_shifts_match_jax_numpy(dt):
    m = arrc.loads(f"def f(x: {dt}[n], c: {dt}[n]) -> ({dt}[n], {dt}[n]):\n    return x << c, x >> c\n")
    x, c = _shift_cases(dt)
    left, right = m.f(x, c)
    for got, want in ((left, jnp.left_shift(x, c)), (right, jnp.right_shift(x, c))):
        got, want = np.asarray(got), np.asarray(want)
        assert got.dtype == want.dtype == x.dtype
        np.testing.assert_array_equal(got, want)


def test_shift_promotion_precedence_and_augmented_assignment():
    m = arrc.loads("def f(x: i8[n], c: i32[n]) -> (i32[n], i8[n], i8[n], i8[n]):\n"
                   "    y = x\n"
                   "    y <<= 2\n"
                   "    y >>= 1\n"
                   "    return x << c, x << 1 + 1, (x & 12) >> 2, x | 1 << 4\n")
    x = np.array([-3, 1, 7, 100], np.int8)
    c = np.array([1, 2, 3, 40], np.int32)
    a, b, d, e = (np.asarray(v) for v in m.f(x, c))
    np.testing.assert_array_equal(a, jnp.left_shift(x, c))           # i8 with i32: i32, as jnp
    assert a.dtype == np.int32
    np.testing.assert_array_equal(b, jnp.left_shift(x, 2))          # `+` binds tighter than `<<` (Python)
    np.testing.assert_array_equal(d, jnp.right_shift(x & 12, 2))    # `<<` tighter than `&`, `|`
    np.testing.assert_array_equal(e, x | (1 << 4))
    m2 = arrc.loads("def g(x: i8[n]) -> i8[n]:\n    y = x\n    y <<= 2\n    y >>= 1\n    return y\n")
    np.testing.assert_array_equal(np.asarray(m2.g(x)), jnp.right_shift(jnp.left_shift(x, 2), 1))



AUGMENTED = ("x //= 3\n    x[2:5] %= -2\n    x[::3] **= 2\n    x[-1] ^= 6\n    x &= 13\n    x[1] |= 64\n"
             "    m[::2] |= x[::2] > 0\n    m ^= m[::-1]\n    m[-3:] &= false\n    w @= w")


def test_every_python_augmented_operator_updates_names_and_indexed_targets_as_numpy():
    """`//= %= **= &= |= ^= @=` (Python's, which NumPy code uses: `x[1:3] //= 2`, `mask |= c`) were a syntax
    error "unexpected '='" in both parsers, while `+= -= *= /= <<= >>=` worked; each is `x = x op v`."""
    m = arrc.loads("def f(x: i32[10], m: bool[10], w: i32[2, 2]) -> (i32[10], bool[10], i32[2, 2]):\n"
                   f"    {AUGMENTED}\n    return x, m, w\n")
    x, w = np.arange(-5, 5, dtype=np.int32), np.array([[1, 2], [3, 4]], np.int32)
    env = {"x": x.copy(), "m": x < 0, "w": w.copy(), "false": False}
    exec(AUGMENTED.replace("\n    ", "\n"), {}, env)
    for got, want in zip(m.f(x, x < 0, w), (env["x"], env["m"], env["w"])):
        np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.parametrize("operands", ["x << 1", "1 << x", "x >> y", "b >> b"])
def test_shift_of_a_float_or_bool_is_E0201(operands):
    # (a bool with an integer is that integer, as in jnp: `b << 1` is i32)
    diags = errors(f"def f(x: f32[n], y: i32[n], b: bool[n]) -> f32[n]:\n    z = {operands}\n    return x\n")
    assert [d.code for d in diags] == ["E0201"]
    assert "integer operands" in diags[0].message and "i32(x)" in diags[0].help


# ---- default parameter values ---------------------------------------------------------------------------
DEFAULTS = """\
const K: i32 = 3
def f(x: f32[n], eps: f32 = 1e-3, k: i32 = K, neg: f64 = -inf, b: bool = true) -> f32[n]:
    return where(b, x * f32(k) + eps, x)
def g(x: f32[n]) -> (f32[n], f32[n], f32[n]):
    return f(x), f(x, 0.5), f(x, k=1, b=false)
"""


def test_defaults_from_arr_calls_and_the_api():
    m = arrc.loads(DEFAULTS)
    x = np.array([1.0, 2.0], np.float32)
    assert m.f.signature == "(x: f32[n], eps: f32 = 0.001, k: i32 = 3, neg: f64 = -inf, b: bool = true) -> f32[n]"
    a, b, c = (np.asarray(v) for v in m.g(x))
    np.testing.assert_allclose(a, x * 3 + np.float32(1e-3))
    np.testing.assert_allclose(b, x * 3 + 0.5)
    np.testing.assert_array_equal(c, x)
    for _ in range(2):                  # (the second call goes through the dispatcher's cache)
        np.testing.assert_allclose(np.asarray(m.f(x)), a)
        np.testing.assert_allclose(np.asarray(m.f(x, np.float32(0.5))), b)
        np.testing.assert_allclose(np.asarray(m.f(x, k=np.int32(1))), x + np.float32(1e-3))


def test_defaults_from_the_command_line(tmp_path, capsys):
    path = tmp_path / "d.arr"
    path.write_text(DEFAULTS)
    assert main(["run", str(path), "--entry", "f", "--arg", "x=[1.0, 2.0]", "--format", "json"]) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    np.testing.assert_allclose(np.asarray(results[0]["value"], np.float32), [3.001, 6.001], rtol=1e-6)
    assert main(["run", str(path), "--entry", "f", "--arg", "eps=1.0"]) == 2
    assert "needs --arg x" in capsys.readouterr().err


@pytest.mark.parametrize("params, code, words", [
    ("x: f32 = 1.0, y: f32", "E0001", "parameter `y` without a default follows parameter `x` with one"),
    ("x: i32 = 1.5", "E0203", "the default of `x` has type f32, declared i32"),
    ("x: u8 = -1", "E0211", "out of range for u8"),
    ("x: f32, y: f32 = x", "E0207", "a default must be a compile-time constant"),
    ("x: f32 = 2.0 * 3.0", "E0207", "a default must be a compile-time constant"),
    ("x: f32[n] = 1.0", "E0207", "array parameter `x` cannot have a default"),
])
def test_default_mistakes(params, code, words):
    diags = errors(f"def f({params}) -> f32:\n    return 1.0\n")
    assert [d.code for d in diags] == [code]
    assert words in diags[0].message and diags[0].span is not None


# ---- one-line suites --------------------------------------------------------------------------------------
def test_one_line_suites_run():
    m = arrc.loads("def f(x: i32) -> (i32, i32, i32):\n"
                   "    s = 0\n"
                   "    for i in range(4): s += i\n"
                   "    n = x; c = 0\n"
                   "    while n > 1: n = n // 2; c += 1\n"
                   "    if x > 10: r = 1\n"
                   "    elif x > 5: r = 2\n"
                   "    else: r = 3; pass;\n"
                   "    return s, c, r\n"
                   "def g(x: i32) -> i32: return x + 1\n")
    assert [int(v) for v in m.f(np.int32(20))] == [6, 4, 1]
    assert [int(v) for v in m.f(np.int32(8))] == [6, 3, 2]
    assert [int(v) for v in m.f(np.int32(1))] == [6, 0, 3]
    assert int(m.g(np.int32(1))) == 2


@pytest.mark.parametrize("line", ["if x > 0: for i in range(2): pass", "if x > 0: pass; if x: pass",
                                  "for i in range(2): pass\n        y = 1", "if x > 0: ;"])
def test_one_line_suites_take_simple_statements_only(line):
    diags = errors(f"def f(x: i32) -> i32:\n    {line}\n    return x\n")
    assert [d.code for d in diags] == ["E0001"]


def test_compound_statement_after_a_colon_says_so():
    diags = errors("def f(x: i32) -> i32:\n    if x > 0: for i in range(2): pass\n    return x\n")
    assert diags[0].message == "`for` cannot follow `:` on the same line"


def test_untyped_parameter_with_a_default_gets_the_typed_spelling():
    diags = errors("def f(x: f32[n], eps=1e-6) -> f32[n]:\n    return x + eps\n")
    assert "`def f(x: f32[n], eps: f32 = 1e-6) -> f32[n]:`" in diags[0].help


def test_several_statements_as_one_statement_cell():
    with pytest.raises(CompileError) as info:
        parse(Source("<cell>", "a = 1; b = 2"), start="stmt")
    assert info.value.diagnostics[0].code == "E0001"
    assert isinstance(parse(Source("<cell>", "for i in range(3): a = i"), start="stmt"), ast.For)


# ---- calls of calls ---------------------------------------------------------------------------------------
LOSS = "def loss(w: f32[d]) -> f32:\n    return sum(w * w * w)\n"


def test_grad_of_a_module_function_is_called_at_once():
    m = arrc.loads(LOSS + "def step(w: f32[d]) -> f32[d]:\n    return w - 0.1 * grad(loss)(w)\n")
    w = np.array([1.0, -2.0, 0.5], np.float32)
    want = w - 0.1 * jax.grad(lambda v: jnp.sum(v * v * v))(w)
    np.testing.assert_allclose(np.asarray(m.step(w)), want, rtol=1e-6)


def test_grad_fills_defaults_as_a_call_does():
    m = arrc.loads("def loss(w: f32[d], scale: f32 = 2.0) -> f32:\n    return scale * sum(w * w)\n"
                   "def g(w: f32[d]) -> (f32[d], f32[d]):\n    return grad(loss)(w), grad(loss)(w, 3.0)\n")
    w = np.array([1.0, -2.0], np.float32)
    a, b = m.g(w)
    np.testing.assert_allclose(np.asarray(a), jax.grad(lambda v: 2.0 * jnp.sum(v * v))(w))
    np.testing.assert_allclose(np.asarray(b), jax.grad(lambda v: 3.0 * jnp.sum(v * v))(w))


@pytest.mark.parametrize("call, code, words", [
    ("loss(w)(w)", "E0210", "`loss(...)` returns f32, not a function"),
    ("jvp(loss)(w)", "E0210", "jvp(f, (x,), (t,))"),
    ("vjp(loss)(w)", "E0210", "vjp(f, (x,), ct)"),
    ("vmap(w)(w)", "E0210", "`vmap` takes a module function by name"),
    ("gradient(loss)(w)", "E0210", "did you mean `grad`?"),
    ("grad(loss, 0)(w)", "E0103", "grad(f, argnums=...)"),
])
def test_calls_of_calls_get_targeted_help(call, code, words):
    diags = errors(LOSS + f"def f(w: f32[d]) -> f32[d]:\n    return {call}\n")
    assert [d.code for d in diags] == [code]
    assert words in diags[0].message + (diags[0].help or "")


# ---- several syntax errors -------------------------------------------------------------------------------
def test_errors_in_two_functions_are_both_reported():
    diags = errors("def f(x: f32[n]) -> f32[n]:\n    y = x +\n    return y\n\n"
                   "def ok(x: f32) -> f32:\n    return x\n\n"
                   "def g(x: f32[n]) -> f32:\n    return sum(x]\n")
    assert [(d.code, d.span.line) for d in diags] == [("E0001", 2), ("E0001", 9)]


def test_one_mistake_is_one_error():
    # An unclosed bracket swallows the next `def`: that definition is skipped, not reported as broken.
    diags = errors("def f(x: f32) -> f32:\n    return (x +\n\ndef g(x: f32) -> f32:\n    return x\n\n"
                   "def h(x: f32) -> f32:\n    return x\n")
    assert [d.code for d in diags] == ["E0001"]
    assert "never closed" in diags[0].labels[0].message
    diags = errors("def f(x: f32) -> f32:\n    if x > 0\n        return x\n    return -x\n"
                   "def g(x: f32) -> f32:\n  return x\n   y = 1\n")
    assert [(d.code, d.message, d.span.line) for d in diags] == [
        ("E0001", "unexpected end of line", 2), ("E0001", "unexpected indentation", 6)]


def test_a_const_and_a_def_after_errors():
    diags = errors("const A: i32 = \ndef f(x) -> f32:\n    return 1.0\nconst B: i32 = 0x\n")
    assert [d.span.line for d in diags] == [1, 2, 4]
