"""The fast parser (compiler/fastparse.py) against Lark's, the reference (parse.parse_lark).

The rule, on every input: where the fast parser accepts, Lark accepts and the two ASTs are identical (node
types, every field, every span, FunctionDef.name_span); where Lark rejects, the fast parser has given up, so
`parse` falls back to Lark and its diagnostics. Inputs: the examples, the code blocks of the docs, programs of
the differential-testing generator, the front-end fuzzing campaign's random bytes, token soup and mutations,
and hand-written cases for every construct of grammar/arr.lark.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import re
from pathlib import Path

import pytest
from fuzz.gen_programs import case_from_seed

from arrc.compiler import ast, fastparse
from arrc.compiler.diagnostics import CompileError
from arrc.compiler.parse import _prepare, parse, parse_lark
from arrc.compiler.span import Source, Span

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("arrc_frontend_campaign_fp",
                                               ROOT / "tests" / "fuzz" / "frontend_campaign.py")
campaign = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(campaign)

# `"\\q"` below: both parsers decode it as Python does, with this warning
pytestmark = pytest.mark.filterwarnings("ignore:invalid escape sequence:DeprecationWarning")


# ---- the comparison ---------------------------------------------------------------------------------------
def assert_same(fast, ref) -> None:
    """Identical trees: same types, every dataclass field (spans included, which equality skips)."""
    difference = campaign.ast_difference(fast, ref)
    assert difference is None, difference


def outcome(fn, source: Source, start: str):
    try:
        return fn(source, start)
    except CompileError as err:
        return err
    except (ValueError, RecursionError) as err:    # Lark's path lets a few of these through (huge ints, escapes)
        return err


def check(text: str, start: str = "module", accept: bool = False) -> bool:
    """The rule on one input; `accept`: the fast parser must accept it. Returns whether it did."""
    source = Source("t.arr", text)
    ref = outcome(parse_lark, source, start)
    try:
        fast = fastparse.parse(_prepare(source, start), source.name, start)
    except (fastparse.GiveUp, fastparse.BadLiteral, RecursionError, CompileError):
        fast = None
    if fast is None:
        assert not accept, f"the fast parser gave up on {text!r}"
        assert_same_outcome(outcome(parse, source, start), ref)
        return False
    assert not isinstance(ref, BaseException), f"fast parser accepted what Lark rejects: {text!r}: {ref}"
    assert_same(fast, ref)
    return True


def assert_same_outcome(got, ref) -> None:
    assert type(got) is type(ref)
    if isinstance(ref, CompileError):
        assert got.diagnostics == ref.diagnostics
    elif isinstance(ref, BaseException):
        assert str(got) == str(ref)
    else:
        assert_same(got, ref)


def lark_accepts(text: str, start: str = "module") -> bool:
    return not isinstance(outcome(parse_lark, Source("t.arr", text), start), BaseException)


def body(*lines: str) -> str:
    return "def f(x: f32[n]) -> f32:\n" + "".join(f"    {line}\n" for line in lines)


# ---- corpora ----------------------------------------------------------------------------------------------
EXAMPLES = sorted(ROOT.glob("examples/**/*.arr"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples(path):
    check(path.read_text(encoding="utf-8"), accept=True)


def _doc_blocks():
    for page in sorted(ROOT.glob("docs/**/*.md")):
        for i, m in enumerate(re.finditer(r"^```(\w*)\n(.*?)^```", page.read_text(encoding="utf-8"), re.S | re.M)):
            yield f"{page.stem}-{i}", m.group(2)


def test_doc_blocks():
    accepted = 0
    for _, text in _doc_blocks():
        accepted += check(text, accept=lark_accepts(text))
    assert accepted >= 60


@pytest.mark.parametrize("first", range(0, 300, 100))
def test_generated_programs(first):
    for seed in range(first, first + 100):
        check(case_from_seed(seed)[0].source, accept=True)


def test_fuzz_campaign_inputs():
    """Random bytes, token soup, mutated programs and odd programs of the front-end campaign."""
    corpus = campaign.load_corpus(full=False)
    accepted = rejected = 0
    for index in range(800):
        data = campaign.make_case(1, index, corpus)["data"]
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if check(text):
            accepted += 1
        else:
            rejected += 1
    assert accepted >= 100 and rejected >= 100, (accepted, rejected)


SLOW_IN_LARK = {"plus_chain_1e4", "unary_minus_1e4", "not_1e4", "pow_chain_1e4", "cond_chain_1e4", "attr_chain_1e4",
                "index_chain_1e4"}       # deep nesting, as test_deep_nesting_stays_lark_s_decision


def test_campaign_special_inputs():
    """Huge and deeply nested inputs: the same AST or the same diagnostics (E0004 among them) as Lark."""
    for name, data in campaign.special_cases():
        if len(data) > 200_000 or name in SLOW_IN_LARK:
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        check(text)


# ---- hand-written cases -----------------------------------------------------------------------------------
EXPRESSIONS = [
    "a", "_x1", "0", "007", "42", "1" + "0" * 40, "1" + "0" * 41, "9" * 300, "1.5", ".5", "1.", "1e5", "1E+5",
    "2.5e-3", "1.e3", "1e999", '"s"', "'s'", '""', '"a\\nb"', '"\\x41\\t"', "'\\''", '"\\"q"', '"\\u00e9"',
    '"é ü"', '"\\q"', "true", "false", "nan",
    "not a", "not not a", "a and b", "a or b", "a and b or c", "a or b and c", "not a and b", "a and not b",
    "not a == b", "a or not b", "a == b", "a != b", "a < b", "a <= b", "a > b", "a >= b", "a <= b | c",
    "a | b", "a ^ b", "a & b", "a | b ^ c & d", "a & b | c", "a & b + c", "a + b & c", "a + b", "a - b - c",
    "a + b * c", "a * b + c", "a / b // c % d @ e", "a @ b", "-a", "+a", "~a", "--a", "- + ~a", "-a ** b",
    "a ** -b", "a ** b ** c", "(-a) ** b", "a ** b * c", "-a.b", "a.b.c", "a.T", "x.astype(f32)",
    "a[0]", "a[0][1]", "a[0, 1]", "a[0,]", "a[:]", "a[::]", "a[1:]", "a[:2]", "a[::2]", "a[1:2:3]",
    "a[::-1]", "a[1::]", "a[:2:]", "a[..., 0]", "a[..., :]", "a[...]", "a[(1):(2)]", "a[i, :, 0:n - 1]",
    "f()", "f(a)", "f(a,)", "f(a, b)", "f(x=1)", "f(a, x=1, y=(2))", "f(x=1,)", "f(a)(b)",
    "f(a)[0].T", "f(a)[0](b)", "(a)", "((a))", "(a)(b)", "(a)[0]", "(a).T", "((a)).T", "(a + b) * c",
    "a * (b + c)", "(a) + (b)", "-(a)", "not (a)", "()", "(a,)", "(a, b)", "(a, b,)", "((a, b), c)",
    "((a),)", "[]", "[a]", "[a,]", "[a, b]", "[(a), (b)]", "[[1, 2], [3, 4]]", "[[1.0, 2.0], [3.0, 4.0],]",
    "a if b else c", "a if b else c if d else e", "(a if b else c) if d else e", "a if (b) else (c)",
    "not a if b else c", "a or b if c or d else e", "(a) if b else c", "f(\n a,\n b\n)", "[1,\n 2]",
    "f(a  # comment\n , b)", "a \\\n + b", "(\n\n a\n\n)", "x[\n0]", "((((((((((a))))))))))",
    "-" * 50 + "a", "not " * 50 + "a", " ** ".join("a" * 30), "+".join(["a"] * 100),
    "f(" * 40 + "a" + ")" * 40, "a" + "[0]" * 60, " if c else ".join("a" * 50),
    # issue 17: based integer literals, `_` separators, shifts
    "0xff", "0XFF", "0x_dead_BEEF", "0o17", "0O7_7", "0b1010", "0B_1_0", "0x" + "f" * 40, "0b" + "0" * 60 + "1",
    "1_000_000", "0_0", "1_0.5_0", "1_0e1_0", "1_0.e-1_0", ".1_5", "0xe5", "0b1 + 1", "0x1.real",
    "a << b", "a >> b", "a << b << c", "a << b + c", "a + b << c", "a * b >> c", "a & b << c", "a << b & c",
    "a | b >> c ^ d", "a << b < c", "a < b >> c", "-a << ~b", "a ** b << c", "(a << b) >> c", "a<<-1",
    "f(a << 1, x=b >> 2)", "x[a >> 1:b << 1]",
]

BAD_EXPRESSIONS = [
    "a < b < c", "a == b != c", "a +", "(a", "a)", "[a", "f(,)", "(,)", "[,]", "a b", "a = b", "*a",
    "a ** ", "a if b", "a if b else", "not", "a[]", "a[1:2:3:4]", "f(a=)", "f((a)=1)", "f(a.b=1)",
    "a..b", "1.T", "a.1", "a + not b", "a == not b", '"unterminated', "a $ b", "a ! b", "a\n", "\n a",
    '"\\x4"', '"\\x4" +', 'f("\\u12", a b)', "a if b else c else d", "(a b)", "a ->b",
    "0x", "0xg", "0b2", "0o8", "1__0", "1_", "_1", "0x_", "1_.5", "1._5", "1e_5", "0b1e5", "0x1.5", "1e1_",
    "a <<", "a < < b", "a <<< b", "a >>> b", "<< a", "a <<= b", "a; b",
]


@pytest.mark.parametrize("text", EXPRESSIONS)
def test_expressions(text):
    check(body(f"return {text}"), accept=True)
    check(body(f"y = {text}", "y = y"), accept=True)
    check(text, start="expr", accept=True)


@pytest.mark.parametrize("text", EXPRESSIONS[:40] + BAD_EXPRESSIONS)
def test_expression_statements(text):
    """An expression as a statement (Lark accepts some of these only so), and expressions Lark rejects."""
    check(body(text), accept=lark_accepts(body(text)))
    check(text, start="expr", accept=text in EXPRESSIONS)
    check(text + "\n", start="stmt", accept=lark_accepts(text + "\n", "stmt"))


STATEMENTS = [
    "x = 1", "x, y = 1, 2", "x, y = (1, 2)", "x, = f()", "x = 1,", "x = 1, 2,", "a, b = b, a + b",
    "a, b, = b, a", "x = (a)", "x = (a), b", "x = a, (b)", "x[0] = 1", "x[0, 1:2] = y", "x[0][1] = 2",
    "(x)[0] = 1", "((x))[0] = 1", "f(x)[0] = 1", "x.T[0] = 1", "x[...] = 0", "x, y[0] = 1, 2", "x += 1",
    "x -= 1", "x *= 2", "x /= 2", "x[0] += 1", "x[i, :] -= (y)", "return", "return x", "return x, y",
    "return (x, y)", "return (x)", "pass", "print()", "print(x)", 'print("a", x, sep=1)', "print(x,)",
    "print((x))", "assert x", 'assert x, "m"', "assert (x), (y)", "f(x)", "(f(x))", "x", "-x", "not x",
    "[1, 2]", "(a, b)", "x.T", "x  # trailing comment", "x = \\\n  1", "x = (1 +\n  2)",
    "x <<= 1", "x >>= y + 1", "x[0] <<= 2", "x = 1; y = 2", "x = 1;", "pass; pass;", "return;", "x = 1, 2;",
    "x = 1,; y = 2", "x += 1; return x", "print(x); assert x", "x;y", "x = 0x10 >> 2",
    "x //= 2", "x %= n", "x **= 2", "x @= w", "x &= m", "x |= m", "x ^= m", "x[1:3] //= -2", "x[i] **=-1",
    "x[0] %= y ** 2", "m[::2] |= x == y",
]

BAD_STATEMENTS = [
    "x = y = 1", "x, y += 1", "(x) = 1", "(x[0]) = 1", "x + 1 = 2", "x.T = 1", "f(x) = 1", "-x = 1",
    "return x,", "assert x,", "print(x) + 1", "x = ", "= 1", "x = 1 2", "x +=", "pass 1", "x[0] = y = 1",
    "if = 3", "const a: i32 = 1", "def g() -> f32:",
    "x = 1;; y = 2", "; x = 1", ";", "x = 1; if x: pass", "x <<= y = 1", "x, y <<= 1", "(x) >>= 1",
    "x //= y //= 1", "x, y %= 1", "(x) **= 2", "x ** = 2", "x / /= 2", "x % = 2",
]


@pytest.mark.parametrize("text", STATEMENTS)
def test_statements(text):
    check(body(text, "return x"), accept=True)
    check(text + "\n", start="stmt", accept=True)


@pytest.mark.parametrize("text", BAD_STATEMENTS)
def test_bad_statements(text):
    assert not lark_accepts(body(text, "return x"))
    check(body(text, "return x"))
    check(text + "\n", start="stmt")


COMPOUND = [
    body("if x:", "    pass"),
    body("if x:", "    a = 1", "else:", "    a = 2", "return a"),
    body("if x:", "    a = 1", "elif y:", "    a = 2", "return a"),
    body("if x:", "    a = 1", "elif y:", "    a = 2", "elif z:", "    a = 3", "    b = 4", "else:",
         "    a = 5", "    b = (6)", "return a"),
    body("if x:", "    a = 1", "elif y:", "    a = 2", "elif z:", "    if w:", "        a = 3"),
    body("if x:", "    if y:", "        if z:", "            a = 1", "        else:", "            a = 2",
         "    elif w:", "        pass", "return 1"),
    body("for i in range(n):", "    x[i] = i"),
    body("for i in range(0, n, 2):", "    x[i] = i", "return x"),
    body("for i in range(n,):", "    pass", "for j in range(1, step=2):", "    pass"),
    body("while x < 3:", "    x = x + 1", "    while y:", "        pass", "return x"),
    body("while x < 3, bound=100:", "    x = x + 1", "for i in range(n, bound=64):", "    pass"),
    body("y, (a, b) = f(x)", "(c, d), e = 1, (2, 3)", "(p,) = q", "a, ((b), c[0]) = z", "return y"),
    body("a, (b, f(c)) = z"), body("(a, b) += 1"), body("f(x) = 1"), body("(a) = 1"), body("a, (3,) = z"),
    body("while (x), bound = n * 2:", "    pass", "while x, bound:", "    pass", "while x, 3:", "    pass"),
    body("if (x):", "    pass", "while (x):", "    pass"),
    body("if x:", "    pass", "", "    # a comment", "", "else:", "  # odd indent", "    pass", "  ", "return 1"),
    body("if x:", "        a = 1", "        b = 2", "else:", "  a = 3", "return a"),
    body("if x: pass"),
    body("for i in range():", "    pass"),
    body("for i in foo(3):", "    pass"),
    body("if x:", "pass"),
    body("if x:", "    pass", "  else:", "    pass"),
    body("if x:", "    pass", "else:", "    pass", "else:", "    pass"),
    body("elif x:", "    pass"),
    body("while x:", "    pass", "        y = 1"),
    # one-line suites (issue 17)
    body("for i in range(4): x += i", "return x"), body("if x > 0: return x", "return -x"),
    body("while x < 3: x = x + 1; y = x;", "return x"), body("if x: a = 1", "elif y: a = 2", "else: a = 3"),
    body("if x: pass", "else:", "    pass"), body("if x:", "    pass", "else: pass"),
    body("while x, bound=3: x <<= 1"), body("for i in range(n): x[i] = i; y = 1"),
    body("if x: if y: pass"), body("if x: for i in range(3): pass"), body("if x: pass", "    y = 1"),
    body("if x: ;"), body("if x:pass"), body("if x: return"), body("if x: return;"),
    body("for i in range(2):  # c", "    pass"), body("if x: pass  # c", "return 1"),
]


@pytest.mark.parametrize("text", COMPOUND, ids=range(len(COMPOUND)))
def test_compound_statements(text):
    check(text, accept=lark_accepts(text))
    stmt = text.split("\n", 1)[1].replace("\n    ", "\n").lstrip()
    check(stmt, start="stmt", accept=lark_accepts(stmt, "stmt"))


MODULES = [
    "", "\n", "\n\n\n", "# only a comment", "# a\n# b\n\n   # indented\n", "   ", "\\\n", "\\", "  \\\n\\\n",
    "const K: i32 = 3", "const K: i32 = 3\n", "const K: i32 = 3\n\n\n# c\n", "\n\n# lead\nconst K: i32 = 3\n",
    "  const K: i32 = 3\nconst L: f32 = 1.5\n", "const K: f32[2] = [1.0, 2.0]  # c\n",
    "def f() -> i32:\n    return 1", "def f() -> i32:\n    return 1\n", "def f() -> i32:\n    return 1\n\n\n",
    "def f() -> i32:\n    return 1\n# c\n\n# d", "def f() -> i32:\n    return 1\n    ",
    "def f() -> i32:\r\n    return 1\r\n", "def f() -> i32:\r\n    x = 1 \\\r\n + 2\r\n    return x\r\n",
    "def f() -> i32:\n\x0c    return 1\n", "def f() -> i32:\n    x = 1 \x0c+ 2\n    return x\n",
    "def f(a: f32, b: f32[n, m],) -> (f32[n], f32):\n    return a, b\n",
    "def f(a: f32) -> (f32, f32,):\n    return a, a\n", "def f() -> (f32):\n    return 1\n",
    "def f() -> (f32,):\n    return 1\n", "def f(a: f32[]) -> f32[2 * n + 1, n // 2, (n + 1) * 2, n - 1 - 2]:\n"
    "    pass\n", "def f(a: f32[n,]) -> f32:\n    pass\n", "def f(a: f32[-1]) -> f32:\n    pass\n",
    "def f(a: f32[((n))]) -> f32[(n + 1) * (m - 1)]:\n    pass\n",
    "def f(a: f32[1" + "0" * 400 + "]) -> f32:\n    pass\n",
    "def f() -> i32:\n    return 1\ndef g() -> i32:\n    return 2\n\nconst C: i32 = 1\ndef h() -> i32:\n"
    "    if x:\n        return 1\n    return 2\n",
    "def f() -> i32:\n        x = 1\n      return x\n", "def f() -> i32:\n  return 1\n def g() -> i32:\n",
    "def f() -> i32:\n\treturn 1\n", "def f() -> i32:\n    return 1\x00\n", "def fé() -> i32:\n    return 1\n",
    "\ufeffdef f() -> i32:\n    return 1\n", "def f() -> i32:\r    return 1\r", "def f(:\n",
    "def f() -> i32:\n    return (1 +", "def f() -> i32:\n    return 1 \\", "def f() -> i32:\n    return 1\n\\\n",
    "return 1\n", "x = 1\n", "  \ndef f() -> i32:\n    return 1\n", "\n  def f() -> i32:\n    return 1\n",
    "def f() -> i32:\n    print(\"abc)\n    return 1\n", "def f() -> i32:\n    return 1\n  # c\n",
    "def f() -> i32:\n    x = [1,\n2,\n        3]\n    return x\n", "def f() -> i32:\n    return (\n1)\n",
    "def f() -> i32:\n    return 1)\n", "def f() -> i32:\n    return 1]\n",
    # defaults and one-line definitions (issue 17)
    "def f(x: f32[n], eps: f32 = 1e-6) -> f32[n]:\n    return x\n",
    "def f(x: f32 = -1.0, k: i32 = (K), b: bool = true,) -> f32:\n    return x\n",
    "def f(x: f32 = 1.0, y: f32) -> f32:\n    return x\n", "def f(x: f32, y: f32 = 1, z: i32) -> f32:\n    pass\n",
    "def f(x: f32 =) -> f32:\n    pass\n", "def f(x = 1.0) -> f32:\n    pass\n",
    "def f(x: f32 = 0x1 << 2) -> f32:\n    pass\n", "def f() -> i32: return 1\n",
    "def f() -> i32: x = 1; return x\ndef g() -> i32: return 2\n", "const K: i32 = 0b11; \n",
]


@pytest.mark.parametrize("text", MODULES, ids=range(len(MODULES)))
def test_modules(text):
    check(text, accept=lark_accepts(text))


@pytest.mark.parametrize("text", ["f32", "f32[]", "f32[n]", "  f32[n, 2 * m + 1]  ", "f32[n // 2 - (m)]",
                                  "f32[n,]", "f32[", "f32 f32", "f32[1 + -1]", "(f32, f32)"])
def test_types(text):
    check(text, start="type", accept=lark_accepts(text, "type"))


# Keywords are reserved (issue 13): where a name belongs, both parsers reject a keyword (the fast parser gives
# up, Lark's contextual lexer finds no NAME there), and the diagnostic names the keyword.
KEYWORDS_AS_NAMES = [
    ("expr", "x.in"), ("expr", "range(3)"), ("expr", "f(if=1)"), ("expr", "print"), ("stmt", "in = 3\n"),
    ("stmt", "x = range\n"), ("stmt", "x = print\n"), ("module", body("for in in range(3):", "    pass")),
    ("module", "def if() -> f32:\n    pass\n"), ("module", "def f(in: f32) -> f32:\n    pass\n"),
    ("module", "def f(x: in) -> f32:\n    pass\n"), ("type", "in"), ("type", "f32[in]"),
]


@pytest.mark.parametrize("start, text", KEYWORDS_AS_NAMES)
def test_keywords_as_names_are_rejected_by_both(start, text):
    assert not lark_accepts(text, start)
    assert not check(text, start)
    assert "is a keyword and cannot be a name" in str(outcome(parse_lark, Source("t.arr", text), start))


@pytest.mark.parametrize("depth", [50, 120, 200, 250])
def test_deep_nesting_stays_lark_s_decision(depth):
    """Nesting: the fast parser gives up before Lark's transformer could run out of stack; the outcome
    (an AST, or E0004) is Lark's."""
    fn = "def f(x: bool) -> bool:\n    return "
    for text in [fn + "not " * depth + "x\n", fn + "-" * depth + "x\n", fn + "+".join(["x"] * depth) + "\n",
                 fn + "(" * depth + "x" + ")" * depth + "\n", fn + "f(" * depth + "x" + ")" * depth + "\n",
                 fn + " ** ".join(["x"] * depth) + "\n", fn + " if x else ".join(["x"] * depth) + "\n",
                 "def f(x: f32) -> f32:\n" + "".join("    " * (i + 1) + "if x > 0:\n" for i in range(depth))
                 + "    " * (depth + 1) + "pass\n",
                 "def f(x: f32[" + " + ".join(["n"] * depth) + "]) -> f32:\n    pass\n",
                 "const C: i32 = " + " * ".join(["2"] * depth) + "\n"]:
        check(text)
    check("f32[" + " - ".join(["n"] * depth) + "]", start="type")
    check("x" + " + x" * depth, start="expr")


def test_span_is_a_plain_span():
    span = fastparse._span("a.arr", 1, 2, 3, 4)
    other = Span("a.arr", 1, 2, 3, 4)
    assert (span, hash(span), repr(span)) == (other, hash(other), repr(other))
    with pytest.raises(dataclasses.FrozenInstanceError):
        span.line = 5


@pytest.mark.parametrize("text", ["0x1for y", "0b1and y", "0o7or y", "1if y else 2", "1.5and y", "0x1f_or y"])
def test_a_number_glued_to_a_word_is_invalid_in_both(text):
    """Both parsers read `0x1for y` as `0x1f or y`; Python refuses it ("invalid hexadecimal literal")."""
    assert not lark_accepts(text, "expr")
    assert not check(text, "expr")
    assert "invalid number" in str(outcome(parse_lark, Source("t.arr", text), "expr"))


@pytest.mark.parametrize("text", ["0x1f or y", "1e5 + x1for", "1.5e-3 and y", "x[0xff:1_000]"])
def test_numbers_apart_from_words_still_parse_fast(text):
    assert check(text, "expr", accept=True)


@pytest.mark.parametrize("text", ["sum(x, axis=0, axis=1)", "g(b=5.0, 2.0, b=7.0)", "g(b=1, 2)"])
def test_keyword_argument_order_is_lark_s_diagnostic(text):
    assert not check(text, "expr")


@pytest.mark.parametrize("text", ["sum(x, axis=0)", "g(1, 2, a=1, b=2)", "g(a=1, b=2,)"])
def test_well_ordered_arguments_still_parse_fast(text):
    assert check(text, "expr", accept=True)
