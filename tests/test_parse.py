"""The parser: AST structure (spans take no part in equality), precedence, spans, fragments, syntax errors."""
from __future__ import annotations

import ast as pyast

import pytest

from arrc.compiler import ast
from arrc.compiler.diagnostics import CompileError
from arrc.compiler.parse import parse
from arrc.compiler.span import Source, Span


def parse_module(src: str, name: str = "t.arr") -> ast.Module:
    return parse(Source(name, src))


def parse_expr(text: str) -> ast.Node:
    """An expression, parsed in a function body (independent of parse(start="expr"))."""
    module = parse_module(f"def f() -> f32:\n    return {text}\n")
    return module.items[0].body[0].values[0]


def syntax_error(src: str, start: str = "module"):
    with pytest.raises(CompileError) as info:
        parse(Source("t.arr", src), start=start)
    return info.value.diagnostics


# ---- constructors that read like the source ---------------------------------------------------
def N(id):  # noqa: N802
    return ast.Name(id=id)


def I(v):  # noqa: N802, E743
    return ast.IntLit(value=v)


def B(op, lhs, rhs):  # noqa: N802
    return ast.Binary(op=op, lhs=lhs, rhs=rhs)


def U(op, x):  # noqa: N802
    return ast.Unary(op=op, operand=x)


def T(dtype, *dims):  # noqa: N802
    return ast.TypeExpr(dtype=dtype, dims=tuple(dims) if dims else None)


# ---- whole modules ----------------------------------------------------------------------------
def test_function_and_const_structure():
    src = (
        "const K: i32 = 3\n"
        "\n"
        "# a comment\n"
        "def f(x: f32[n, 2 * m + 1], y: i64) -> (f32[n], f32):   # trailing comment\n"
        "    a, b = g(x, axis=1)\n"
        "    a += 1\n"
        "    return a, b.T\n"
    )
    expected = ast.Module(items=(
        ast.ConstDef(name="K", type=T("i32"), value=I(3)),
        ast.FunctionDef(
            name="f",
            params=(
                ast.Param(name="x", type=T("f32", ast.DimName(name="n"),
                                           ast.DimBin(op="+", lhs=ast.DimBin(op="*", lhs=ast.DimInt(value=2),
                                                                             rhs=ast.DimName(name="m")),
                                                      rhs=ast.DimInt(value=1)))),
                ast.Param(name="y", type=T("i64")),
            ),
            results=(T("f32", ast.DimName(name="n")), T("f32")),
            tuple_result=True,
            body=(
                ast.Assign(targets=(ast.NameTarget(name="a"), ast.NameTarget(name="b")),
                           value=ast.Call(func=N("g"), args=(N("x"),),
                                          kwargs=(ast.Keyword(name="axis", value=I(1)),))),
                ast.AugAssign(target=ast.NameTarget(name="a"), op="+", value=I(1)),
                ast.Return(values=(N("a"), ast.Attribute(base=N("b"), name="T"))),
            ),
        ),
    ))
    assert parse_module(src) == expected


def test_statements_structure():
    src = (
        "def f(x: f32[n]) -> f32:\n"
        "    x[1:3, ::-1, ...] = 0\n"
        "    x[0] -= 1.5\n"
        "    if x > 0:\n"
        "        pass\n"
        "    elif x < 0:\n"
        "        print(\"neg\", x)\n"
        "    else:\n"
        "        assert x == 0, \"zero\"\n"
        "    for i in range(0, n, 2):\n"
        "        y = i\n"
        "    while y < 3:\n"
        "        y = y + 1\n"
        "    f(x)\n"
        "    return\n"
    )
    body = parse_module(src).items[0].body
    assert body[0] == ast.Assign(targets=(ast.IndexTarget(base=N("x"), subscripts=(
        ast.Slice(start=I(1), stop=I(3), step=None),
        ast.Slice(start=None, stop=None, step=U("-", I(1))),
        ast.EllipsisIndex(),
    )),), value=I(0))
    assert body[1] == ast.AugAssign(target=ast.IndexTarget(base=N("x"), subscripts=(I(0),)), op="-",
                                    value=ast.FloatLit(value=1.5))
    # elif chains become an If nested in orelse
    assert body[2] == ast.If(
        cond=B(">", N("x"), I(0)), body=(ast.Pass(),),
        orelse=(ast.If(cond=B("<", N("x"), I(0)),
                       body=(ast.Print(args=(ast.StrLit(value="neg"), N("x"))),),
                       orelse=(ast.Assert(cond=B("==", N("x"), I(0)), message=ast.StrLit(value="zero")),)),))
    assert body[3] == ast.For(var="i", args=(I(0), N("n"), I(2)),
                              body=(ast.Assign(targets=(ast.NameTarget(name="y"),), value=N("i")),))
    assert body[4] == ast.While(cond=B("<", N("y"), I(3)),
                                body=(ast.Assign(targets=(ast.NameTarget(name="y"),),
                                                 value=B("+", N("y"), I(1))),))
    assert body[5] == ast.ExprStmt(expr=ast.Call(func=N("f"), args=(N("x"),), kwargs=()))
    assert body[6] == ast.Return(values=())


@pytest.mark.parametrize("op", ["+", "-", "*", "/"])
def test_augmented_assignment_ops(op):
    stmt = parse_module(f"def f(x: f32) -> f32:\n    x {op}= 2\n    return x\n").items[0].body[0]
    assert stmt == ast.AugAssign(target=ast.NameTarget(name="x"), op=op, value=I(2))


def test_literals():
    assert parse_expr("42") == I(42)
    assert parse_expr("1.5") == ast.FloatLit(value=1.5)
    assert parse_expr("1e-6") == ast.FloatLit(value=1e-6)
    assert parse_expr("2.5e3") == ast.FloatLit(value=2500.0)
    assert parse_expr(".5") == ast.FloatLit(value=0.5)
    assert parse_expr("true") == ast.BoolLit(value=True)
    assert parse_expr("false") == ast.BoolLit(value=False)
    assert parse_expr("nan") == N("nan")             # named constants are names, resolved by the checker
    assert parse_expr("[1, 2, 3]") == ast.ArrayLit(elems=(I(1), I(2), I(3)))
    assert parse_expr("[[1.0, 2.0], [3.0, 4.0],]") == ast.ArrayLit(elems=(
        ast.ArrayLit(elems=(ast.FloatLit(value=1.0), ast.FloatLit(value=2.0))),
        ast.ArrayLit(elems=(ast.FloatLit(value=3.0), ast.FloatLit(value=4.0)))))
    assert parse_expr("(a, b)") == ast.TupleLit(elems=(N("a"), N("b")))
    assert parse_expr("(a,)") == ast.TupleLit(elems=(N("a"),))
    assert parse_expr("(a)") == N("a")


def test_string_escapes():
    stmt = parse_module('def f() -> f32:\n    print("a\\tb\\n", \'it\\\'s\')\n    return 1.0\n').items[0].body[0]
    assert stmt == ast.Print(args=(ast.StrLit(value="a\tb\n"), ast.StrLit(value="it's")))


@pytest.mark.parametrize("literal, shown, code", [('"\\ud800"', '"\\ud800"', "d800"),
                                                  ('"a\\udfffb"', '"a\\udfffb"', "dfff"),
                                                  ('"\ud800"', '"\ufffd"', "d800")])
def test_a_lone_surrogate_in_a_string_is_a_diagnostic(literal, shown, code):
    """An escape or a character that is half of a UTF-16 pair is no text: a module cannot hold it (it used to
    reach MLIR as a raw TypeError); the rendered line shows a raw one as U+FFFD, so the message can be printed."""
    import arrc
    with pytest.raises(CompileError) as info:
        arrc.loads(f"def main() -> i32:\n    print({literal})\n    return 1\n")
    (diag,) = info.value.diagnostics
    assert (diag.code, diag.message) == ("E0001", f"invalid escape in a string: \\u{code} is a lone surrogate, "
                                                  "not a character")
    assert f"    print({shown})" in str(info.value).encode("utf-8").decode()


def test_types():
    params = parse_module("def f(a: bool, b: f32[], c: u8[2, n], d: f64[n // 2 - 1]) -> f32:\n    return 1.0\n"
                          ).items[0].params
    assert [p.type for p in params] == [
        T("bool"),
        ast.TypeExpr(dtype="f32", dims=()),
        T("u8", ast.DimInt(value=2), ast.DimName(name="n")),
        T("f64", ast.DimBin(op="-", lhs=ast.DimBin(op="//", lhs=ast.DimName(name="n"), rhs=ast.DimInt(value=2)),
                            rhs=ast.DimInt(value=1))),
    ]


def test_spans_do_not_take_part_in_equality():
    a = parse_module("def f(x: f32) -> f32:\n    return x+1\n")
    b = parse_module("\n\ndef   f( x :f32 )->f32 :\n        return (x   +   1)\n", name="other.arr")
    assert a == b
    assert a.items[0].body[0].values[0].span != b.items[0].body[0].values[0].span


def test_comments_blank_lines_and_line_continuation():
    src = ("def f(x: f32) -> f32:   # c1\n"
           "\n"
           "    # c2\n"
           "    y = (x +\n"
           "         1)\n"
           "    z = y \\\n"
           "        * 2\n"
           "    return z\n")
    body = parse_module(src).items[0].body
    assert body[0].value == B("+", N("x"), I(1))
    assert body[1].value == B("*", N("y"), I(2))


# ---- precedence: compared with Python's own parser --------------------------------------------
_PY_BIN = {pyast.Add: "+", pyast.Sub: "-", pyast.Mult: "*", pyast.Div: "/", pyast.FloorDiv: "//",
           pyast.Mod: "%", pyast.Pow: "**", pyast.MatMult: "@", pyast.BitOr: "|", pyast.BitXor: "^",
           pyast.BitAnd: "&"}
_PY_CMP = {pyast.Eq: "==", pyast.NotEq: "!=", pyast.Lt: "<", pyast.LtE: "<=", pyast.Gt: ">", pyast.GtE: ">="}
_PY_UN = {pyast.USub: "-", pyast.UAdd: "+", pyast.Invert: "~", pyast.Not: "not"}


def from_python(node):
    """Python AST -> the canonical tuple form of `canon`."""
    if isinstance(node, pyast.Expression):
        return from_python(node.body)
    if isinstance(node, pyast.BinOp):
        return (_PY_BIN[type(node.op)], from_python(node.left), from_python(node.right))
    if isinstance(node, pyast.Compare):
        assert len(node.ops) == 1
        return (_PY_CMP[type(node.ops[0])], from_python(node.left), from_python(node.comparators[0]))
    if isinstance(node, pyast.BoolOp):
        op = "and" if isinstance(node.op, pyast.And) else "or"
        out = from_python(node.values[0])
        for v in node.values[1:]:
            out = (op, out, from_python(v))
        return out
    if isinstance(node, pyast.UnaryOp):
        return ("unary" + _PY_UN[type(node.op)], from_python(node.operand))
    if isinstance(node, pyast.IfExp):
        return ("if", from_python(node.test), from_python(node.body), from_python(node.orelse))
    if isinstance(node, pyast.Name):
        return node.id
    if isinstance(node, pyast.Constant):
        return node.value
    if isinstance(node, pyast.Attribute):
        return ("attr", from_python(node.value), node.attr)
    if isinstance(node, pyast.Call):
        return ("call", from_python(node.func), tuple(from_python(a) for a in node.args),
                tuple((k.arg, from_python(k.value)) for k in node.keywords))
    if isinstance(node, pyast.Subscript):
        return ("index", from_python(node.value), (from_python(node.slice),))
    raise AssertionError(pyast.dump(node))


def canon(node):
    """arr AST -> a canonical tuple form (the same as `from_python`)."""
    if isinstance(node, ast.Binary):
        return (node.op, canon(node.lhs), canon(node.rhs))
    if isinstance(node, ast.Unary):
        return ("unary" + node.op, canon(node.operand))
    if isinstance(node, ast.CondExpr):
        return ("if", canon(node.cond), canon(node.then), canon(node.orelse))
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, (ast.IntLit, ast.FloatLit, ast.BoolLit)):
        return node.value
    if isinstance(node, ast.Attribute):
        return ("attr", canon(node.base), node.name)
    if isinstance(node, ast.Call):
        return ("call", canon(node.func), tuple(canon(a) for a in node.args),
                tuple((k.name, canon(k.value)) for k in node.kwargs))
    if isinstance(node, ast.Index):
        return ("index", canon(node.base), tuple(canon(s) for s in node.subscripts))
    raise AssertionError(node)


PRECEDENCE_CASES = [
    "a + b * c", "a * b + c", "a - b - c", "a / b / c", "a // b % c", "a % b // c * d",
    "a @ b * c", "a * b @ c", "a + b @ c", "a @ b @ c", "a @ b ** c",
    "-2 ** 2", "2 ** -1", "2 ** 3 ** 2", "-a ** -b ** c", "~a ** 2", "+a * b", "-a * b", "- - a",
    "-a.T", "-x[0] ** 2", "(-a) ** 2", "a ** b.T", "f(a) ** 2",
    "a | b ^ c & d", "a & b | c", "a ^ b | c ^ d", "a & b + c", "a | b == c", "a == b & c",
    "a + b < c * d", "~a & b", "a < -b", "-a < b", "a != b + 1",
    "not a == b", "not a and b", "a and b or c", "a or b and c", "a or b or c", "a and b and c",
    "not not a", "not a or not b",
    "a if b else c if d else e", "a + 1 if b or c else d", "(a if b else c) + 1", "a if not b else -c",
    "f(a, b)[0].T ** 2", "x.astype(f32) * 2", "f(a + b, axis=1) - c", "f(a, keepdims=true)",
]


@pytest.mark.parametrize("text", PRECEDENCE_CASES)
def test_precedence_matches_python(text):
    python = pyast.parse(text.replace("true", "True"), mode="eval")
    assert canon(parse_expr(text)) == from_python(python)


def test_unary_minus_binds_looser_than_power():
    # -2**2 == -(2**2) == -4, as in Python
    assert parse_expr("-2**2") == U("-", B("**", I(2), I(2)))
    assert parse_expr("2**-2") == B("**", I(2), U("-", I(2)))
    assert parse_expr("2**3**2") == B("**", I(2), B("**", I(3), I(2)))


def test_matmul_at_the_level_of_multiplication():
    assert parse_expr("a @ b + c") == B("+", B("@", N("a"), N("b")), N("c"))
    assert parse_expr("a * b @ c") == B("@", B("*", N("a"), N("b")), N("c"))


def test_chained_comparison_is_rejected():
    # Python would chain `a < b < c`; arr does not: it is a syntax error, never a silent `(a < b) < c`.
    [d] = syntax_error("def f() -> bool:\n    return a < b < c\n")
    assert d.code == "E0001"
    assert (d.span.line, d.span.col) == (2, 18)


def test_subscripts():
    e = parse_expr("x[1:2, :, ::2, 3, ..., -1]")
    assert e == ast.Index(base=N("x"), subscripts=(
        ast.Slice(start=I(1), stop=I(2), step=None),
        ast.Slice(start=None, stop=None, step=None),
        ast.Slice(start=None, stop=None, step=I(2)),
        I(3),
        ast.EllipsisIndex(),
        U("-", I(1)),
    ))
    assert parse_expr("x[i:i + 4]") == ast.Index(base=N("x"), subscripts=(
        ast.Slice(start=N("i"), stop=B("+", N("i"), I(4)), step=None),))


# ---- spans --------------------------------------------------------------------------------------
def test_spans_are_one_based_with_exclusive_end():
    fn = parse_module("def add(x: f32, yy: f32) -> f32:\n    return x + yy\n").items[0]
    assert fn.name_span == Span("t.arr", 1, 5, 1, 8)
    assert fn.params[1].span == Span("t.arr", 1, 17, 1, 24)
    assert fn.params[1].type.span == Span("t.arr", 1, 21, 1, 24)
    ret = fn.body[0]
    assert ret.span == Span("t.arr", 2, 5, 2, 18)
    binary = ret.values[0]
    assert binary.span == Span("t.arr", 2, 12, 2, 18)
    assert binary.lhs.span == Span("t.arr", 2, 12, 2, 13)
    assert binary.rhs.span == Span("t.arr", 2, 16, 2, 18)


def test_span_of_a_multi_line_expression():
    e = parse_module("def f(x: f32) -> f32:\n    return (x +\n            1)\n").items[0].body[0].values[0]
    assert (e.span.line, e.span.col, e.span.end_line, e.span.end_col) == (2, 13, 3, 14)


def test_span_of_call_and_keyword():
    call = parse_expr("sum(x, axis=0)")
    assert (call.span.col, call.span.end_col) == (12, 26)
    assert (call.kwargs[0].span.col, call.kwargs[0].span.end_col) == (19, 25)


def test_elif_span_covers_its_branch():
    src = "def f(x: f32) -> f32:\n    if x > 0:\n        pass\n    elif x < 0:\n        pass\n    return x\n"
    top = parse_module(src).items[0].body[0]
    inner = top.orelse[0]
    assert inner.span.line == 4 and inner.span.col == 5


# ---- fragments ----------------------------------------------------------------------------------
def test_statement_fragment():
    assert parse(Source("<s>", "x = 1"), start="stmt") == ast.Assign(targets=(ast.NameTarget(name="x"),), value=I(1))


def test_expression_fragment():
    assert parse(Source("<e>", "a + b * c"), start="expr") == B("+", N("a"), B("*", N("b"), N("c")))
    assert parse(Source("<e>", "-2 ** 2"), start="expr") == U("-", B("**", I(2), I(2)))


def test_type_fragment():
    assert parse(Source("<t>", "f32[2, n]"), start="type") == T("f32", ast.DimInt(value=2), ast.DimName(name="n"))
    assert parse(Source("<t>", "bool"), start="type") == T("bool")


def test_fragment_with_trailing_newline():
    assert parse(Source("<e>", "a + b\n"), start="expr") == B("+", N("a"), N("b"))
    assert parse(Source("<t>", "f32[2]\n"), start="type") == T("f32", ast.DimInt(value=2))


def test_fragment_syntax_error():
    [d] = syntax_error("a +", start="expr")
    assert d.code == "E0001"
    [d] = syntax_error("f32[2", start="type")
    assert d.code == "E0001"


# ---- syntax errors ----------------------------------------------------------------------------------
@pytest.mark.parametrize("src, line, col, message", [
    ("def f(x: f32) -> f32\n    return x\n", 1, 21, "unexpected end of line"),
    ("def f(x: f32) -> f32:\n    return x $ 1\n", 2, 14, "unexpected character '$'"),
    ("def f(x: f32) -> f32:\n    return x ? 1\n", 2, 14, "unexpected character '?'"),
    ("def f(x: f32) -> f32:\n    print('abc)\n    return x\n", 2, 11, "unterminated string literal"),
    ("def f(x: f32) -> f32:\n        y = x\n    return y\n", 3, 1, "unindent does not match any outer indentation level"),
    ("def f(x: f32) -> f32:\nreturn x\n", 2, 1, "unexpected 'return'"),
    ("def f(x: f32) -> f32:", 1, 22, "unexpected end of file"),
    ("def f(x: f32) -> f32:\n    return x +\n", 2, 15, "unexpected end of line"),
    ("def f(x: f32) -> f32:\n    return x)\n", 2, 13, "unexpected ')'"),
    ("def f(x: f32) -> f32:\n    return [1, 2\n", 2, 17, "unexpected end of block"),
    ("x = 1\n", 1, 1, "unexpected 'x'"),
    ("def (x: f32) -> f32:\n    return x\n", 1, 5, "unexpected '('"),
    ("def f(x) -> f32:\n    return x\n", 1, 8, "unexpected ')'"),
    ("def f(x: f32):\n    return x\n", 1, 14, "unexpected ':'"),
    ("def f(x: f32) -> f32:\n    return x\n  y = 1\n", 3, 1, "unindent does not match any outer indentation level"),
])
def test_syntax_errors(src, line, col, message):
    diags = syntax_error(src)
    assert [d.code for d in diags] == ["E0001"]
    d = diags[0]
    assert d.message == message
    assert (d.span.line, d.span.col) == (line, col)
    assert d.span.end_col > d.span.col


def test_unexpected_token_span_covers_the_token():
    [d] = syntax_error("def f(x: f32) -> f32:\n    return x return\n")
    assert d.message == "unexpected 'return'"
    assert (d.span.line, d.span.col, d.span.end_col) == (2, 14, 20)


def test_expected_tokens_are_described():
    [d] = syntax_error("def f(x: f32) -> f32:\n    return x +\n")
    assert d.label.startswith("expected ") and "an expression" in d.label


@pytest.mark.parametrize("src, char, line, col", [("def f(é: f32) -> f32:\n    return é\n", "é", 1, 7),
                                                  ("def f(x: f32) -> f32:\n    ä = x\n    return ä\n", "ä", 2, 5)])
def test_a_name_that_is_not_ascii_says_names_are_ascii(src, char, line, col):
    # Python takes `é = 3`; the help listed what the grammar expected there ("an expression, 'assert', ...")
    [d] = syntax_error(src)
    assert (d.code, d.message, d.span.line, d.span.col) == ("E0001", f"unexpected character {char!r}", line, col)
    assert d.help == "names in arr are ASCII letters, digits and `_`"


def test_tabs_in_indentation():
    diags = syntax_error("def f(x: f32) -> f32:\n    y = x\n  \treturn y\n")
    assert [(d.code, d.span.line, d.span.col) for d in diags] == [("E0002", 3, 3)]
    # a tab after the indentation is only whitespace
    parse_module("def f(x: f32) -> f32:\n    return x\t+ 1\n")


def test_nesting_limit():
    parse_expr("(" * 200 + "a" + ")" * 200)            # at the limit: fine
    diags = syntax_error("def f() -> f32:\n    return " + "(" * 201 + "a" + ")" * 201 + "\n")
    assert [d.code for d in diags] == ["E0004"]
    assert (diags[0].span.line, diags[0].span.col) == (2, 12 + 200)


def test_empty_module_and_comments_only():
    assert parse_module("") == ast.Module(items=())
    assert parse_module("# nothing\n\n   \n# here\n") == ast.Module(items=())


@pytest.mark.parametrize("src, word, line, col", [
    ("defmain() -> i32:\n    return 1\n", "defmain", 1, 1),
    ("constK: i32 = 3\n", "constK", 1, 1),
    ("def f() -> i32:\n    x = 0\n    for i inrange(3):\n        x = x + i\n    return x\n", "inrange", 3, 11),
    ("def f(x: i32) -> i32:\n    return x if x > 0 elsey\n", "elsey", 2, 23),
    ("def f(a: bool, b: bool) -> bool:\n    return a andb\n", "andb", 2, 14),
    ("def f(a: bool, b: bool) -> bool:\n    return a ornot b\n", "ornot", 2, 14),
])
def test_a_keyword_glued_to_the_next_word_is_E0001(src, word, line, col):
    """Lark's lexer matched `def` as the start of `defmain` where no name may stand (and read `def main`)."""
    [d] = syntax_error(src)
    assert d.code == "E0001" and f"`{word}`" in d.message and "space" in d.message
    assert (d.span.line, d.span.col, d.span.end_col) == (line, col, col + len(word))


def test_keywords_with_brackets_or_operators_next_to_them_still_parse():
    parse_module("def f(x: i32) -> i32:\n    if(x > 0):\n        return-x\n    return x if(x > 1)else(0)\n")


@pytest.mark.parametrize("text, word", [("0x1for y", "0x1for"), ("0b1and y", "0b1and"), ("0o7or y", "0o7or"),
                                        ("1if y else 2", "1if")])
def test_a_number_glued_to_a_keyword_is_an_invalid_number(text, word):
    [d] = syntax_error(f"def f(y: bool) -> bool:\n    return {text}\n")
    assert d.code == "E0001" and d.message == f"invalid number `{word}`"
    assert (d.span.line, d.span.col, d.span.end_col) == (2, 12, 12 + len(word))


@pytest.mark.parametrize("call, message, col, end_col", [
    ("sum(x, axis=0, axis=1)", "keyword argument `axis` repeated", 27, 33),
    ("g(b=5.0, 2.0, b=7.0)", "positional argument follows keyword argument", 21, 24),
    ("g(b=5.0, 2.0)", "positional argument follows keyword argument", 21, 24),
])
def test_repeated_keyword_and_positional_after_keyword_are_E0001(call, message, col, end_col):
    """Python refuses both when parsing; arrc let the last `axis=` win and dropped `b=5.0`."""
    [d] = syntax_error(f"def f(x: f32[2, 2]) -> f32:\n    return {call}\n")
    assert d.code == "E0001" and d.message == message
    assert (d.span.line, d.span.col, d.span.end_col) == (2, col, end_col)


def test_repeated_keyword_in_range_and_print_is_E0001():
    [d] = syntax_error("def f(x: f32) -> f32:\n    for i in range(3, bound=4, bound=5):\n        print(x)\n"
                       "    return x\n")
    assert d.message == "keyword argument `bound` repeated"


@pytest.mark.parametrize("literal", [r'"\λ|\é|\\"', r'"a\\λb"', r'"\é\x41"', r'"λ\u03bb\N{GREEK SMALL LETTER LAMDA}"',
                                     r'"\q\ \0\777"', r"'\λ\''"])
def test_string_escapes_decode_as_python_s_in_both_parsers(literal):
    """`"\λ"` is `\λ` (an unknown escape keeps its backslash); a latin-1 round trip made it `\u03bb`."""
    from arrc.compiler.parse import parse_lark
    expected = pyast.literal_eval(literal)
    assert parse_expr(literal).value == expected
    assert parse_lark(Source("t.arr", literal), start="expr").value == expected


def test_a_bracket_left_open_in_many_definitions_is_E0001_not_too_deep():
    """The bracket prescan counted depth across definitions: 201 functions each ending `return (x` were
    E0004 "brackets nested more than 200 deep" (twice, at lines 402-403), not the first unclosed '('."""
    diags = syntax_error("".join(f"def g{i}(x: f32) -> f32:\n    return (x\n" for i in range(201)))
    assert {d.code for d in diags} == {"E0001"}
    first = diags[0]
    assert first.span.line == 3 and any("was never closed" in label.message and label.span.line == 2
                                        for label in first.labels)


@pytest.mark.parametrize("text, before_suffix, want", [
    ("x", True, "x"), ("x+y", True, "(x+y)"), ("x + y", False, "(x + y)"), ("-x", True, "(-x)"),
    ("-inf", False, "-inf"), ("abs(y) + abs(z)", True, "(abs(y) + abs(z))"), ("sqrt(x)", True, "sqrt(x)"),
    ("a if c else b", False, "(a if c else b)"), ("value at f.py:3:5", False, "value at f.py:3:5"),
    ("x[1] - 0.0", False, "(x[1] - 0.0)")])
def test_an_expression_is_grouped_where_an_operator_binds_looser_than_what_follows(text, before_suffix, want):
    """One rule for the helps (`(a + b)[:, None]`, `(lr * g).astype(f32)`) and the operands note
    (`(x + y) = 0.0`): the regex it replaced missed `x+y` and grouped `abs(y) + abs(z)` as one call."""
    from arrc.compiler.parse import grouped
    assert grouped(text, before_suffix) == want
