"""Source text -> AST with spans. Syntax errors become E0001..E0004 diagnostics."""
from __future__ import annotations

import dataclasses
import functools
import re
import threading
from pathlib import Path

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError
from lark.indenter import DedentError, Indenter

from . import ast, fastparse
from .diagnostics import CompileError, Diagnostic, Label
from .span import Source, Span

GRAMMAR = Path(__file__).resolve().parent.parent / "grammar" / "arr.lark"
MAX_NESTING = 200
MAX_ELIF_CHAIN = 250        # branches of one if/elif chain: each `elif` nests one level deeper (docs/limits.md)

# Terminal names as a user reads them.
TOKEN_WORDS = {
    "NAME": "a name", "INT": "an integer", "FLOAT": "a number", "STRING": "a string",
    "_NL": "a new line", "_INDENT": "an indented block", "_DEDENT": "the end of the block",
    "LPAR": "'('", "RPAR": "')'", "LSQB": "'['", "RSQB": "']'", "COLON": "':'", "COMMA": "','",
    "EQUAL": "'='", "DOT": "'.'", "MINUS": "'-'", "PLUS": "'+'", "TILDE": "'~'", "RARROW": "'->'",
    "COMP_OP": "a comparison", "ADD_OP": "an operator", "MUL_OP": "an operator", "POW": "'**'",
    "AUG_OP": "'+='", "SHIFT_OP": "an operator", "SEMICOLON": "';'", "$END": "the end of the file",
}
EXPRESSION_START = {"NAME", "INT", "FLOAT", "STRING", "LPAR", "LSQB", "MINUS", "PLUS", "TILDE", "TRUE", "FALSE",
                    "NOT"}


class ArrIndenter(Indenter):
    NL_type = "_NL"
    OPEN_PAREN_types = ["LPAR", "LSQB"]
    CLOSE_PAREN_types = ["RPAR", "RSQB"]
    INDENT_type = "_INDENT"
    DEDENT_type = "_DEDENT"
    tab_len = 8

    def _process(self, stream):
        # Lark's Indenter asserts on an unmatched ')'; let the parser report it instead.
        for token in _refuse_glued_keywords(stream):
            if token.type == self.NL_type:
                yield from self.handle_NL(token)
            else:
                yield token
            if token.type in self.OPEN_PAREN_types:
                self.paren_level += 1
            elif token.type in self.CLOSE_PAREN_types:
                self.paren_level = max(0, self.paren_level - 1)
        while len(self.indent_level) > 1:
            self.indent_level.pop()
            yield Token.new_borrow_pos(self.DEDENT_type, "", token) if token else Token(self.DEDENT_type, "")


class Glued(Exception):
    """A keyword or a number with the next word glued to it (`defmain`, `inrange`, `0x1for`): Lark's lexer
    matches a keyword as the start of a longer word where no name may stand, and a number up to its last
    digit (`0x1f` `or`)."""

    def __init__(self, first: Token, rest: Token):
        super().__init__(f"{first}{rest}")
        self.first, self.rest = first, rest


_WORD_START = re.compile(r"[A-Za-z0-9_]")


def _refuse_glued_keywords(stream):
    """The tokens of `stream`; Glued at a keyword or number token that the next token touches and continues
    as a word (`def`+`main`, `else`+`y`, `or`+`not`, `0x1f`+`or`, `1`+`_`), which Python reads as one word."""
    before = None
    for token in stream:
        if before is not None and token.start_pos == before.end_pos and _WORD_START.match(token.value) and \
                (before.type in ("INT", "FLOAT") or before.type != "NAME" and before.value in fastparse.KEYWORDS):
            raise Glued(before, token)
        yield token
        before = token


_local = threading.local()
_building = threading.Lock()


def _parser() -> Lark:
    """The parser of this thread: Lark's Indenter keeps per-parse state, so threads must not share one.
    Building one is serialized (CPython 3.11's eval, which Lark's grammar loader uses, is not safe to run
    from several threads at once)."""
    parser = getattr(_local, "parser", None)
    if parser is None:
        with _building:
            parser = _local.parser = _make_parser()
    return parser


@functools.lru_cache(maxsize=1)
def _grammar_text() -> str:
    return GRAMMAR.read_text(encoding="utf-8")


def _make_parser() -> Lark:
    """Building the LALR tables takes ~150 ms, so they are kept in arrc's private cache directory
    (compiler/cache.py; not Lark's `cache=True`, which unpickles from a shared temporary directory)."""
    from .cache import cached_lark
    options = dict(parser="lalr", postlex=ArrIndenter(), propagate_positions=True, maybe_placeholders=True,
                   start=["module", "expr", "type", "stmt"])
    return cached_lark(_grammar_text(), options, lambda: Lark(_grammar_text(), **options))


_TARGET_HELP = "assign to a name (`y = ...`), an element (`x[i] = ...`) or a tuple of them (`y, (a, b) = ...`)"


class BadTarget(Exception):
    """A construct the grammar accepts but the language does not (E0001): an assignment to something that is
    not a name, an indexed name or a tuple of them; a parameter without a default after one with a default."""

    def __init__(self, message: str, span: Span, label: str, help: str = _TARGET_HELP):
        super().__init__(message)
        self.span, self.label, self.help = span, label, help


_NOT_TARGETS = {ast.Call: "a function call", ast.Attribute: "an attribute", ast.IntLit: "a literal",
                ast.FloatLit: "a literal", ast.StrLit: "a literal", ast.BoolLit: "a literal",
                ast.ArrayLit: "an array literal"}


def _as_target(expr) -> ast.Node:
    """The target an assignment's left side names: `x`, `x[i]`, or a parenthesized tuple of targets."""
    if isinstance(expr, ast.Name):
        return ast.NameTarget(expr.span, expr.id)
    if isinstance(expr, ast.Index):
        return ast.IndexTarget(expr.span, expr.base, expr.subscripts)
    if isinstance(expr, ast.TupleLit):
        return ast.TupleTarget(expr.span, tuple(_as_target(e) for e in expr.elems))
    what = _NOT_TARGETS.get(type(expr), "an expression")
    raise BadTarget(f"cannot assign to {what}", expr.span, "not a name, an indexed name or a tuple of them")


def check_default_order(params) -> None:
    """Only trailing parameters may have a default (Python's "non-default argument follows default argument")."""
    first = next((p for p in params if p.default is not None), None)
    late = first and next((p for p in params[params.index(first):] if p.default is None), None)
    if late:
        raise BadTarget(f"parameter `{late.name}` without a default follows parameter `{first.name}` with one",
                        late.span, "needs a default",
                        help=f"give `{late.name}` a default too, or move it before `{first.name}`")


def check_argument_order(args) -> None:
    """Keyword arguments after the positional ones, each keyword once (Python's "positional argument follows
    keyword argument" and "keyword argument repeated"; one would drop or override the other silently)."""
    seen = {}
    for arg in args:
        if not isinstance(arg, ast.Keyword):
            if seen:
                first = next(iter(seen.values()))
                raise BadTarget("positional argument follows keyword argument", arg.span, "after a keyword argument",
                                help=f"move it before `{first.name}=`, or pass it by name too")
            continue
        if arg.name in seen:
            raise BadTarget(f"keyword argument `{arg.name}` repeated", arg.span, "given a second time",
                            help=f"give `{arg.name}=` once (the first is at line {seen[arg.name].span.line}, "
                                 f"column {seen[arg.name].span.col})")
        seen[arg.name] = arg


def _span(file: str, meta) -> Span:
    return Span(file, meta.line, meta.column, meta.end_line, meta.end_column)


def _tok_span(file: str, tok: Token) -> Span:
    return Span(file, tok.line, tok.column, tok.end_line or tok.line, tok.end_column or tok.column + 1)


@v_args(meta=True)
class _ToAst(Transformer):
    def __init__(self, file: str):
        super().__init__()
        self.file = file

    def __default__(self, data, children, meta):
        raise NotImplementedError(f"no AST rule for grammar rule {data!r}")

    def _s(self, meta):
        if getattr(meta, "empty", False):             # a rule that matched no token (an empty file)
            return Span(self.file, 1, 1, 1, 1)
        return _span(self.file, meta)

    # module
    def module(self, meta, items):
        return ast.Module(self._s(meta), tuple(i for i in items if i is not None))

    def definition(self, meta, ch):
        name, params, (results, is_tuple), body = ch
        return ast.FunctionDef(self._s(meta), str(name), tuple(params or ()), results, is_tuple, body,
                               name_span=_tok_span(self.file, name))

    def extern_def(self, meta, ch):
        name, params, (results, is_tuple) = ch
        return ast.FunctionDef(self._s(meta), str(name), tuple(params or ()), results, is_tuple, (),
                               name_span=_tok_span(self.file, name), extern=True)

    def params(self, meta, ch):
        params = tuple(p for p in ch if p is not None)
        check_default_order(params)
        return params

    def param(self, meta, ch):
        return ast.Param(self._s(meta), str(ch[0]), ch[1], ch[2])

    def result_types(self, meta, ch):
        types = tuple(c for c in ch if c is not None)
        return types, len(types) > 1

    def const_def(self, meta, ch):
        return ast.ConstDef(self._s(meta), str(ch[0]), ch[1], ch[2])

    # types
    def type(self, meta, ch):
        name, *dims = ch
        if not dims:
            return ast.TypeExpr(self._s(meta), str(name), None)
        return ast.TypeExpr(self._s(meta), str(name), tuple(d for d in dims if d is not None))

    def dim_int(self, meta, ch):
        return ast.DimInt(self._s(meta), fastparse.int_value(str(ch[0])))

    def dim_name(self, meta, ch):
        return ast.DimName(self._s(meta), str(ch[0]))

    def _dim_bin(op):
        def rule(self, meta, ch):
            return ast.DimBin(self._s(meta), op, ch[0], ch[1])
        return rule

    dim_add, dim_sub, dim_mul, dim_floordiv = _dim_bin("+"), _dim_bin("-"), _dim_bin("*"), _dim_bin("//")

    # statements
    def suite(self, meta, ch):
        return tuple(s for c in ch for s in (c if type(c) is tuple else (c,)))     # (`a; b` is a tuple)

    def simple_stmts(self, meta, ch):
        stmts = tuple(c for c in ch if c is not None)
        return stmts[0] if len(stmts) == 1 else stmts

    def assign(self, meta, ch):
        return ast.Assign(self._s(meta), ch[0], ch[1])

    def exprlist(self, meta, ch):
        items = tuple(c for c in ch if c is not None)
        return items[0] if len(items) == 1 else ast.TupleLit(self._s(meta), items)

    def targets(self, meta, ch):
        return tuple(t for t in ch if t is not None)

    def target(self, meta, ch):
        if self._s(meta) != ch[0].span:              # `(x) = 1`: parentheses only around a tuple
            raise BadTarget("cannot assign to a parenthesized target", self._s(meta), "in parentheses")
        return _as_target(ch[0])

    def aug_assign(self, meta, ch):
        if isinstance(ch[0], ast.TupleTarget):
            raise BadTarget("an augmented assignment cannot update a tuple", ch[0].span, "a tuple")
        return ast.AugAssign(self._s(meta), ch[0], str(ch[1])[:-1], ch[2])

    def return_stmt(self, meta, ch):
        return ast.Return(self._s(meta), tuple(c for c in ch if c is not None))

    def pass_stmt(self, meta, ch):
        return ast.Pass(self._s(meta))

    def print_stmt(self, meta, ch):
        args = ch[0] or ((), ())
        return ast.Print(self._s(meta), args[0] + args[1])

    def assert_stmt(self, meta, ch):
        return ast.Assert(self._s(meta), ch[0], ch[1])

    def expr_stmt(self, meta, ch):
        return ast.ExprStmt(self._s(meta), ch[0])

    def if_stmt(self, meta, ch):
        cond, body, elifs, orelse = ch
        orelse = orelse or ()
        for elif_cond, elif_body, elif_span in reversed(elifs):
            orelse = (ast.If(elif_span.to(orelse[-1].span) if orelse else elif_span, elif_cond, elif_body, orelse),)
        return ast.If(self._s(meta), cond, body, orelse)

    def elifs(self, meta, ch):
        return list(ch)

    def elif_(self, meta, ch):
        return (ch[0], ch[1], self._s(meta))

    def for_stmt(self, meta, ch):
        name, args, body = ch
        return ast.For(self._s(meta), str(name), args[0] + args[1], body)

    def while_stmt(self, meta, ch):
        return ast.While(self._s(meta), ch[0], ch[2], () if ch[1] is None else (ch[1],))

    # expressions
    def cond_expr(self, meta, ch):
        return ast.CondExpr(self._s(meta), ch[1], ch[0], ch[2])

    def _binary(op=None):
        def rule(self, meta, ch):
            if op is None:
                return ast.Binary(self._s(meta), str(ch[1]), ch[0], ch[2])
            return ast.Binary(self._s(meta), op, ch[0], ch[1])
        return rule

    binary = compare = _binary()
    or_, and_, bit_or, bit_xor, bit_and = _binary("or"), _binary("and"), _binary("|"), _binary("^"), _binary("&")

    def pow(self, meta, ch):
        return ast.Binary(self._s(meta), "**", ch[0], ch[2])

    def _unary(op):
        def rule(self, meta, ch):
            return ast.Unary(self._s(meta), op, ch[0])
        return rule

    neg, pos, invert, not_ = _unary("-"), _unary("+"), _unary("~"), _unary("not")

    def call(self, meta, ch):
        args = ch[1] or ((), ())
        return ast.Call(self._s(meta), ch[0], args[0], args[1])

    def args(self, meta, ch):
        ch = [c for c in ch if c is not None]
        check_argument_order(ch)
        return tuple(c for c in ch if not isinstance(c, ast.Keyword)), \
            tuple(c for c in ch if isinstance(c, ast.Keyword))

    def kwarg(self, meta, ch):
        return ast.Keyword(self._s(meta), str(ch[0]), ch[1])

    def index(self, meta, ch):
        return ast.Index(self._s(meta), ch[0], ch[1])

    def subscripts(self, meta, ch):
        return tuple(c for c in ch if c is not None)

    def slice(self, meta, ch):
        return ast.Slice(self._s(meta), *ch)

    def ellipsis(self, meta, ch):
        return ast.EllipsisIndex(self._s(meta))

    def attribute(self, meta, ch):
        return ast.Attribute(self._s(meta), ch[0], str(ch[1]))

    def name(self, meta, ch):
        return ast.Name(self._s(meta), str(ch[0]))

    def int_lit(self, meta, ch):
        return ast.IntLit(self._s(meta), fastparse.int_value(str(ch[0])))

    def float_lit(self, meta, ch):
        return ast.FloatLit(self._s(meta), float(ch[0]))

    def string_lit(self, meta, ch):
        span = self._s(meta)
        return ast.StrLit(span, fastparse.string_value(str(ch[0]), span))

    def true_lit(self, meta, ch):
        return ast.BoolLit(self._s(meta), True)

    def false_lit(self, meta, ch):
        return ast.BoolLit(self._s(meta), False)

    def array_lit(self, meta, ch):
        return ast.ArrayLit(self._s(meta), tuple(c for c in ch if c is not None))

    def tuple_lit(self, meta, ch):
        return ast.TupleLit(self._s(meta), tuple(c for c in ch if c is not None))


def _terminal_text(name: str) -> str:
    """A terminal as the user types it: `AMPERSAND` -> `'&'`, `DEF` -> `'def'`."""
    try:
        pattern = _parser().get_terminal(name).pattern
    except KeyError:
        return name.lower()
    return f"'{pattern.value}'" if pattern.type == "str" else name.lower()


def _describe_expected(expected: set[str]) -> str:
    expected = {e for e in expected if not e.startswith("__") or e.startswith("__ANON")}   # (`->`, `//`, `...`)
    words = []
    if len(expected & EXPRESSION_START) >= 4:
        words.append("an expression")
        expected -= EXPRESSION_START
    for e in sorted(expected):
        word = TOKEN_WORDS.get(e) or _terminal_text(e)
        if word not in words:
            words.append(word)
    if not words:
        return ""
    if len(words) > 6:
        words = words[:6] + ["..."]
    return "expected " + (words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1])


def _token_text(tok: Token) -> str:
    if tok.type == "$END":
        return "end of file"
    if tok.type == "_NL":
        return "end of line"
    if tok.type == "_INDENT":
        return "indentation"
    if tok.type == "_DEDENT":
        return "end of block"
    return repr(str(tok))


def _syntax_error(err: UnexpectedInput, source: Source) -> Diagnostic:
    file = source.name
    if isinstance(err, UnexpectedCharacters):
        ch = source.text[err.pos_in_stream] if err.pos_in_stream < len(source.text) else ""
        span = Span(file, err.line, err.column, err.line, err.column + 1)
        what = f"unexpected character {ch!r}"
        if ch in "\"'":
            what = "unterminated string literal"
        if ch == "\r":                  # (classic Mac OS's line end: Python takes it, arr's grammar does not)
            return Diagnostic("E0001", "a carriage return alone does not end a line", span, "\\r",
                              help="save the file with \\n (Unix) or \\r\\n (Windows) line endings")
        if ch.isidentifier() and not ch.isascii():     # Python takes `é = 3`; LANGUAGE.md section 2 does not
            return Diagnostic("E0001", what, span, "not an ASCII letter",
                              help="names in arr are ASCII letters, digits and `_`")
        return Diagnostic("E0001", what, span, "not valid here", help=_describe_expected(set(err.allowed or ())) or None)
    if isinstance(err, UnexpectedToken):
        tok = err.token
        if tok.type in ("$END",) or tok.line is None:
            lines = source.text.split("\n") or [""]
            span = Span(file, len(lines), len(lines[-1]) + 1, len(lines), len(lines[-1]) + 2)
        elif tok.type in ("_NL", "_DEDENT", "_INDENT"):
            prev = err.token_history[-1] if err.token_history else None
            line = prev.end_line if prev is not None else tok.line
            col = prev.end_column if prev is not None else tok.column
            span = Span(file, line, col, line, col + 1)
        else:
            span = _tok_span(file, tok)
        msg = f"unexpected {_token_text(tok)}"
        if tok.type == "_INDENT":
            msg = "unexpected indentation"
        diag = Diagnostic("E0001", msg, span, _describe_expected(set(err.expected)))
        prev = err.token_history[-1] if err.token_history else None
        if prev is not None and prev.type in ("INT", "FLOAT") and tok.type in ("NAME", "INT", "FLOAT") and \
                prev.end_pos == tok.start_pos:           # `0x`, `1_`, `0b12`, `1__0`: one word to the user
            return _invalid_number(file, prev, tok)
        at = _ErrorSite(source, tok, set(err.expected))
        hint = _bracket_hint(diag, at)
        if hint is None and tok.type in ("IF", "FOR", "WHILE", "DEF") and not at.open and \
                at.before.rstrip().endswith(":"):        # `if x: for i in range(3): ...`, as Python refuses it
            return Diagnostic("E0001", f"`{tok}` cannot follow `:` on the same line", span, "a compound statement",
                              help=f"a one-line suite holds simple statements only; start the `{tok}` on a new "
                                   f"line, indented")
        if hint is None and str(tok) in fastparse.KEYWORDS and "NAME" in err.expected:
            return Diagnostic("E0001", f"`{tok}` is a keyword and cannot be a name", span, "a keyword",
                              help=f"choose another name, such as `{tok}_`")
        return hint or _python_habit(diag, at) or diag
    if isinstance(err, UnexpectedEOF):
        lines = source.text.split("\n") or [""]
        span = Span(file, len(lines), len(lines[-1]) + 1, len(lines), len(lines[-1]) + 2)
        return Diagnostic("E0001", "unexpected end of file", span, _describe_expected(set(err.expected)))
    return Diagnostic("E0001", "syntax error", None)


def _invalid_number(file: str, number: Token, rest: Token) -> Diagnostic:
    """E0001 at a number and the word glued to it (`0x`, `1_`, `0b12`, `0x1for`), as Python refuses them."""
    whole = Span(file, number.line, number.column, rest.end_line, rest.end_column)
    return Diagnostic("E0001", f"invalid number `{number}{rest}`", whole, "not a number",
                      help="digits are grouped by single `_`s between digits (`1_000`); other bases are "
                           "`0xff`, `0o17`, `0b1010`; exponents `1e-6`")


# ---- what a syntax error most likely means: brackets, then Python habits ----------------------------
# Each hint keeps the code (E0001); it names the cause in the label and the fix in the help line. They read
# the source text around the token Lark stopped at (a LALR parser knows no more than that token).
_BRACKETS = re.compile(r"""\#[^\n]*|"[^"\\\n]*(?:\\.[^"\\\n]*)*"|'[^'\\\n]*(?:\\.[^'\\\n]*)*'|[()\[\]]""")
_CLOSER = {"(": ")", "[": "]"}
_OPENER = {")": "(", "]": "["}
_END_TOKENS = ("$END", "_NL", "_DEDENT", "_INDENT")
_STATEMENT_WORDS = {"DEF", "CONST", "RETURN", "PASS", "PRINT", "ASSERT", "IF", "ELIF", "ELSE", "FOR", "WHILE"}


class _ErrorSite:
    """Where Lark stopped: the token, its offset in the text, the text before it on its line, the brackets
    open there (offsets, innermost last), and the expected terminals."""

    def __init__(self, source: Source, tok: Token, expected: set[str]):
        self.source, self.tok, self.expected = source, tok, expected
        text = source.text
        start = getattr(tok, "start_pos", None)
        self.offset = len(text) if tok.type == "$END" or start is None else min(start, len(text))
        self.line_start = text.rfind("\n", 0, self.offset) + 1
        self.before = text[self.line_start:self.offset]
        line_end = text.find("\n", self.offset)
        self.line = text[self.line_start:len(text) if line_end < 0 else line_end].rstrip("\r")
        self.open = _open_brackets(text, self.offset)

    def span(self, offset: int, length: int = 1) -> Span:
        text = self.source.text
        line = text.count("\n", 0, offset) + 1
        col = offset - (text.rfind("\n", 0, offset) + 1) + 1
        return Span(self.source.name, line, col, line, col + length)

    def word_span(self, word: str) -> Span:
        """The span of the last `word` on the line before the token (the token itself when it is not there)."""
        found = [m.start() for m in re.finditer(rf"\b{re.escape(word)}\b", self.before)]
        if not found:
            return self.span(self.offset, max(1, len(str(self.tok))))
        return self.span(self.line_start + found[-1], len(word))


def _open_brackets(text: str, end: int) -> list[int]:
    """The offsets of the brackets still open at offset `end` (strings and comments skipped), innermost last."""
    stack = []
    for m in _BRACKETS.finditer(text, 0, end):
        ch = m.group()
        if ch in _CLOSER:
            stack.append(m.start())
        elif ch in _OPENER and stack:
            stack.pop()
    return stack


def _bracket_hint(diag: Diagnostic, at: _ErrorSite) -> Diagnostic | None:
    """A closing bracket of the wrong kind or with nothing to close, or a statement read as the inside of a
    bracket never closed: the label names the opener (as Python 3.11's "'(' was never closed" and rustc's
    "unclosed delimiter" do)."""
    text, tok = at.source.text, at.tok
    if tok.type in ("RPAR", "RSQB"):
        closing = str(tok)
        if not at.open:
            return dataclasses.replace(diag, label=f"unmatched '{closing}'",
                                       help=f"remove it, or open it with '{_OPENER[closing]}' before")
        opener = text[at.open[-1]]
        if _CLOSER[opener] == closing:
            return None
        return dataclasses.replace(diag, label=f"closing '{closing}' does not match '{opener}'",
                                   labels=[Label(at.span(at.open[-1]), f"'{opener}' opened here")],
                                   help=f"close the '{opener}' with '{_CLOSER[opener]}'")
    if not at.open:
        return None
    opened = at.span(at.open[-1])
    never_closed = at.open[-1] in _open_brackets(text, len(text))
    if tok.type not in _END_TOKENS:
        if tok.line <= opened.line or at.before.strip():
            return None                          # (an error inside the brackets, not after them)
        if not never_closed and tok.type not in _STATEMENT_WORDS:
            return None
    opener = text[at.open[-1]]
    closer_fits = {"(": "RPAR", "[": "RSQB"}[opener] in at.expected       # (else the inside is unfinished too)
    return dataclasses.replace(
        diag, label=f"still inside the '{opener}' of line {opened.line}" if closer_fits else diag.label,
        labels=[Label(opened, f"this '{opener}' was never closed" if never_closed else f"this '{opener}' is not closed "
                                                                                   f"before line {at.tok.line}")],
        help=f"close the '{opener}' with '{_CLOSER[opener]}'")


def _python_habit(diag: Diagnostic, at: _ErrorSite) -> Diagnostic | None:
    """A targeted label and help line for Python (and NumPy) syntax that arr does not have."""
    tok, kind, before, line = at.tok, at.tok.type, at.before, at.line
    words = line.split()
    first = words[0] if words else ""
    if first in ("import", "from") and (first == "import" or "import" in words):
        alias = words[words.index("as") + 1] if "as" in words[:-1] else "np"
        return dataclasses.replace(
            diag, message="arr has no `import`", span=at.span(at.line_start + len(line) - len(line.lstrip()),
                                                             len(first)), label="not needed",
            help=f"builtins (`sum`, `exp`, `where`, ...) need no import and are called unqualified: write `sum(x)`, "
                 f"not `{alias}.sum(x)`")
    if first == "class" and not before.strip():
        return dataclasses.replace(diag, message="arr has no classes", label="not arr syntax",
                                   help="a module holds `def` functions and `const` values; return several "
                                        "arrays as a tuple (`-> (f32[n], i32)`)")
    if first.startswith("@") and not before.strip():          # `@jax.jit`, `@partial(jax.jit, ...)`
        start = at.line_start + len(line) - len(line.lstrip())
        return dataclasses.replace(diag, message="arr has no decorators",
                                   span=at.span(start, len(line.strip())), label="not arr syntax",
                                   help="remove it: arr functions are compiled already (no `jit`), and "
                                        "`grad(f)(x)`, `vmap(f)(xs)` transform a function where it is called")
    if re.search(r"\blambda\s*$", before):        # (`lambda x: ...`: Lark stops at the name after it)
        return dataclasses.replace(diag, message="arr has no `lambda`", span=at.word_span("lambda"),
                                   label="not arr syntax",
                                   help="define the function with `def` at module level and call it by name "
                                        "(functions are not values in arr)")
    if kind == "STRING" and (m := re.search(r"(?<![A-Za-z0-9_])[rR]?[fF][rR]?$", before)):
        start = at.line_start + m.start()
        return dataclasses.replace(diag, message="arr has no f-strings",
                                   span=at.span(start, at.offset + len(str(tok)) - start), label="an f-string",
                                   help='give `print` the text and the values as separate arguments: '
                                        '`print("x =", x)`')
    if kind == "FOR" and at.open:
        opener = at.source.text[at.open[-1]]
        what = "list comprehensions" if opener == "[" else "generator expressions"
        return dataclasses.replace(diag, message=f"arr has no {what}", label="a comprehension",
                                   help="use whole-array operations (`x * 2`, `where(x > 0, x, 0.0)`, `sum(x * x)`) "
                                        "or a `for` loop that fills an array (`y[i] = ...`)")
    if kind == "COMP_OP" and (m := re.search(r".*(==|!=|<=|>=|<|>)\s*(.*?)\s*$", before)):   # (the last one)
        first_op, middle = m.group(1), m.group(2) or "b"
        return dataclasses.replace(diag, label="comparisons do not chain in arr",
                                   help=f"compare twice and combine the results: `(... {first_op} {middle}) and "
                                        f"({middle} {tok} ...)`")
    if kind == "EQUAL" and first in ("if", "elif", "while", "assert") and not at.open:
        fixed = line[:at.offset - at.line_start] + "==" + line[at.offset - at.line_start + 1:]
        return dataclasses.replace(diag, label="`=` assigns; `==` compares",
                                   help=f"did you mean `==`? `{fixed.strip()}`")
    if first == "for" and re.search(r"\bin\s*$", before) and kind != "RANGE":
        var = re.match(r"\s*for\s+(\w+)", line)
        name = var.group(1) if var else "row"
        index = "j" if name == "i" else "i"
        array = line[at.offset - at.line_start:].strip().rstrip(":").strip()
        count = f"{array}.shape[0]" if re.fullmatch(r"[A-Za-z_]\w*", array) else "n"
        if (items := re.fullmatch(r"[(\[]([^()\[\]]*)[)\]]", array)) and items.group(1).strip():
            # a tuple of values: an array literal holds them (a tuple takes only compile-time indices)
            elems = [e.strip() for e in items.group(1).split(",") if e.strip()]
            count, array = str(len(elems)), f"[{', '.join(elems)}]"
        return dataclasses.replace(diag, label="arr's `for` counts over `range(...)`",
                                   help=f"loop over the indices and index the array: `for {index} in range({count}):` "
                                        f"then `{name} = {array}[{index}]` (or write it with whole-array operations)")
    if first == "for" and kind == "COMMA" and (m := re.match(
            r"\s*for\s+(\w+)\s*,\s*(\w+)\s+in\s+(enumerate|zip)\(\s*(\w+)\s*(?:,\s*(\w+)\s*)?\)\s*:", line)):
        a, b, how, first_array, second_array = m.groups()           # `for i, xi in enumerate(x):`
        if how == "enumerate" and second_array is None:
            unpack = f"`for {a} in range({first_array}.shape[0]):` then `{b} = {first_array}[{a}]`"
        elif how == "zip" and second_array is not None:
            k = next(v for v in ("i", "j", "k") if v not in (a, b))
            unpack = (f"`for {k} in range({first_array}.shape[0]):` then `{a} = {first_array}[{k}]` and "
                      f"`{b} = {second_array}[{k}]`")
        else:
            return None
        return dataclasses.replace(diag, label="arr's `for` has one variable and counts over `range(...)`",
                                   help=f"loop over the indices and index the arrays: {unpack}")
    if kind == "IF" and re.search(r"\belse\s*$", before):
        fixed = re.sub(r"\belse\s+if\b", "elif", line, count=1)
        return dataclasses.replace(diag, span=at.word_span("else").to(diag.span), label="`else if` is spelled `elif`",
                                   help=f"write `{fixed.strip()}`")
    if first == "def" and (kind in ("RPAR", "COMMA", "EQUAL") and "COLON" in at.expected or
                           kind == "COLON" and "->" not in line and before.rstrip().endswith(")")):
        example = _typed_def(line)
        if kind == "COLON":         # (what the body returns is not known here: a placeholder, and two examples)
            first = _typed_def(line).rsplit("-> ", 1)[1][:-1]          # the first parameter's type
            return dataclasses.replace(diag, label="expected '->' and the result type",
                                       help=f"declare the type it returns: `{_typed_def(line, 'TYPE')}`, e.g. "
                                            f"`-> f32` for a scalar or `-> {first if '[' in first else 'f32[n]'}` "
                                            f"for an array")
        name = re.search(r"(\w+)\s*$", before)
        return dataclasses.replace(diag, label=f"expected ':' and the type of `{name.group(1) if name else ''}`",
                                   help=f"arr needs the type of every parameter and of the result: `{example}`")
    if first == "def" and kind == "LPAR" and len(at.open) == 1 and (m := re.search(r"(\w+)\s*:\s*$", before)):
        rest = line[at.offset - at.line_start + 1:]
        items = [t.strip() for t in _top_level_items(rest[:rest.find(")")] if ")" in rest else rest) if t.strip()]
        example = ", ".join(f"{m.group(1)}_{i}: {t}" for i, t in enumerate(items[:3])) or "w: f32[4, 8], b: f32[8]"
        return dataclasses.replace(diag, label="a parameter's type is one array type",
                                   help=f"arr has no tuple (pytree) parameters: give each array its own parameter "
                                        f"(`{example}`); a result may be a tuple (`-> (f32[n], i32)`)")
    if kind == "NAME" and not before and re.match(r"[A-Za-z_]\w*\s*:[^=]*=", line):
        return dataclasses.replace(diag, label="a module-level value is a `const`", help=f"write `const {line.strip()}`")
    if kind == "COLON" and re.fullmatch(r"\s*[A-Za-z_]\w*\s*", before) and not at.open:
        name = before.strip()
        value = re.search(r"(?<![=!<>])=(?!=)(.*)$", line)
        fix = f"`{name} = {value.group(1).strip()}`" if value and value.group(1).strip() else f"`{name} = ...`"
        return dataclasses.replace(diag, label="arr has no annotated assignments",
                                   help=f"a local's type comes from its value: write {fix} (and convert with "
                                        f"`.astype(f32)` where needed)")
    return None


def _top_level_items(text: str) -> list[str]:
    """`text` split at the commas outside brackets: `x: f32[n, 3], k` -> [`x: f32[n, 3]`, ` k`]."""
    items, depth, part = [], 0, ""
    for ch in text:
        depth += (ch in "([") - (ch in ")]")
        if ch == "," and depth == 0:
            items.append(part)
            part = ""
        else:
            part += ch
    return items + [part]


def _typed_def(line: str, result: str | None = None) -> str:
    """`line`, a `def` header, with a type for each parameter and the result: `def f(x):` ->
    `def f(x: f32[n]) -> f32[n]:` (the types written keep theirs; the result's example is `result`, else the
    first one's)."""
    m = re.match(r"\s*def\s+(\w+)\s*\((.*)\)\s*(?:->\s*(.*?))?\s*:?\s*$", line)
    if not m:
        return "def f(x: f32[n]) -> f32[n]:"
    params = [p.strip() if ":" in p else "{}: f32 = {}".format(*map(str.strip, p.split("=", 1))) if "=" in p
              else f"{p.strip()}: f32[n]" for p in _top_level_items(m.group(2)) if p.strip()]
    result = result or m.group(3) or (params[0].split(":", 1)[1].strip() if params else "f32")
    return f"def {m.group(1)}({', '.join(params)}) -> {result}:"


# A bracket, or a definition at column 0: a bracket still open there is unclosed (the parser says so), not
# nested under the brackets of the definitions after it.
_BRACKET = re.compile(r"[\[\]()]|^(?:def|const|extern)\b", re.MULTILINE)


def _prescan(source: Source) -> list[Diagnostic]:
    """Errors found before parsing: tabs in indentation, nesting deeper than the compiler accepts (by line and
    column, as the text's lines are split at \n only)."""
    diags = []
    text = source.text
    if "\t" in text:
        for lineno, line in enumerate(text.split("\n"), 1):
            indent = line[: len(line) - len(line.lstrip(" \t"))]
            if "\t" in indent and line.strip():
                col = indent.index("\t") + 1
                diags.append(Diagnostic("E0002", "tab in indentation", Span(source.name, lineno, col, lineno, col + 1),
                                        "a tab", help="indent with spaces only (4 per level is usual)"))
    depth = 0
    for match in _BRACKET.finditer(text):           # (the brackets only, not every character)
        if len(match.group()) > 1:
            depth = 0
        elif match.group() in "([":
            depth += 1
            if depth == MAX_NESTING + 1:
                at = match.start()
                lineno, col = text.count("\n", 0, at) + 1, at - text.rfind("\n", 0, at)
                diags.append(Diagnostic("E0004", f"brackets nested more than {MAX_NESTING} deep",
                                        Span(source.name, lineno, col, lineno, col + 1), "too deep here",
                                        help="split the expression into several assignments"))
        elif depth:
            depth -= 1
    return sorted(diags, key=lambda d: (d.span.line, d.span.col))


# Invisible characters that change the direction text is shown in (the "Trojan Source" attack, CVE-2021-42574):
# in a comment or a string they can make code display differently from how it runs. Elsewhere they are not
# valid tokens (E0001). The same list as rustc's `text_direction_codepoint_in_{comment,literal}` lints.
TEXT_DIRECTION = {
    "\u061c": "ARABIC LETTER MARK", "\u200e": "LEFT-TO-RIGHT MARK", "\u200f": "RIGHT-TO-LEFT MARK",
    "\u202a": "LEFT-TO-RIGHT EMBEDDING", "\u202b": "RIGHT-TO-LEFT EMBEDDING", "\u202c": "POP DIRECTIONAL FORMATTING",
    "\u202d": "LEFT-TO-RIGHT OVERRIDE", "\u202e": "RIGHT-TO-LEFT OVERRIDE", "\u2066": "LEFT-TO-RIGHT ISOLATE",
    "\u2067": "RIGHT-TO-LEFT ISOLATE", "\u2068": "FIRST STRONG ISOLATE", "\u2069": "POP DIRECTIONAL ISOLATE",
}
_TEXT_DIRECTION = re.compile("[" + "".join(TEXT_DIRECTION) + "]")


def text_direction_warnings(source: Source) -> list[Diagnostic]:
    """W0002 for each text-direction control in a comment or a string literal (one scan of the text with
    a regular expression when there is none, as in almost every file)."""
    if not _TEXT_DIRECTION.search(source.text):
        return []
    diags = []
    for lineno, line in enumerate(source.text.split("\n"), 1):
        if not _TEXT_DIRECTION.search(line):
            continue
        quote, where = None, None           # the open string's quote; "a comment" after a `#` outside one
        i = 0
        while i < len(line):
            ch = line[i]
            if where is None and quote is None and ch == "#":
                where = "a comment"
            elif where is None and quote is not None and ch == "\\":
                i += 1                      # (an escaped character, perhaps the quote)
            elif where is None and ch in "\"'" and quote in (None, ch):
                quote = None if quote else ch
            elif ch in TEXT_DIRECTION and (where or quote):
                code = f"U+{ord(ch):04X}"
                diags.append(Diagnostic(
                    "W0002", f"invisible text-direction control {code} ({TEXT_DIRECTION[ch]}) in "
                             f"{where or 'a string literal'}", Span(source.name, lineno, i + 1, lineno, i + 2),
                    f"{code}, shown here as \ufffd", notes=["it can make the code display differently from "
                                                           "how it is compiled"],
                    help="remove it" + ("" if where else f"; if it is meant, write it as the escape `\\u{ord(ch):04x}`")))
            i += 1
    return diags


def parse(source: Source, start: str = "module"):
    """Parse `source` into an AST node; raises CompileError with E0001-E0004 diagnostics. The fast parser
    (fastparse.py) first; where it gives up, Lark's, the reference grammar that gives the diagnostics."""
    text = _prepare(source, start)
    try:
        node = fastparse.parse(text, source.name, start)
    except (fastparse.GiveUp, RecursionError, fastparse.BadLiteral):
        node = _parse_lark(source, text, start)    # (a bad escape: Lark's gives it where no syntax error does)
    chains = _long_elif_chains(node, source.name)
    if chains:
        raise CompileError(chains, {source.name: source})
    if type(node) is tuple:             # `a = 1; b = 2` as one statement (start="stmt": a REPL cell)
        span = node[1].span
        raise CompileError([Diagnostic("E0001", "one statement at a time here", span, "a second statement",
                                       help="enter the statements one by one (`;` separates statements in a "
                                            "file)")], {source.name: source})
    return node


def _long_elif_chains(node, name: str) -> list[Diagnostic]:
    """E0004 at the `if` of each if/elif chain of more than MAX_ELIF_CHAIN branches. The AST nests each
    `elif` as an If in the `orelse` of the one before, and the checker and the lowering walk blocks
    recursively: a longer chain would overflow the stack at whichever branch the stack ran out. Iterative."""
    diags, pending = [], [node]
    while pending:
        n = pending.pop()
        if isinstance(n, (tuple, list)):
            pending.extend(n)
        elif isinstance(n, ast.Module):
            pending.extend(n.items)
        elif isinstance(n, (ast.FunctionDef, ast.For, ast.While)):
            pending.extend(n.body)
        elif isinstance(n, ast.If):
            branches, link = 1, n
            while len(link.orelse) == 1 and isinstance(link.orelse[0], ast.If):
                pending.extend(link.body)
                branches, link = branches + 1, link.orelse[0]
            pending.extend(link.body)
            pending.extend(link.orelse)
            if branches > MAX_ELIF_CHAIN:
                diags.append(Diagnostic(
                    "E0004", f"an if/elif chain of {branches} branches: more than {MAX_ELIF_CHAIN}",
                    n.span, "the chain starts here",
                    notes=[f"each `elif` is an `if` inside the `else` of the branch before: the chain nests "
                           f"{branches} blocks deep"],
                    help="choose the value with a lookup instead (an array indexed by the case, or "
                         "`where(...)`), or split the chain into several functions"))
    return sorted(diags, key=lambda d: (d.span.line, d.span.col))


def _bad_literal(err: fastparse.BadLiteral, source: Source) -> CompileError:
    return CompileError([Diagnostic("E0001", str(err), err.span, "in this string",
                                    help="escapes are Python's: \\n, \\t, \\\\, \\\", \\xHH, \\uHHHH")],
                        {source.name: source})


def parse_lark(source: Source, start: str = "module"):
    """`parse` through Lark only: the reference that the fast parser is tested against."""
    return _parse_lark(source, _prepare(source, start), start)


def _prepare(source: Source, start: str) -> str:
    diags = _prescan(source)
    if diags:
        raise CompileError(diags, {source.name: source})
    if start in ("expr", "type"):
        return source.text.rstrip()        # a fragment: a trailing newline would be a statement end
    return source.text if source.text.endswith("\n") else source.text + "\n"


MAX_SYNTAX_ERRORS = 10
_TOP_LEVEL = re.compile(r"^(?:def|const)\b", re.MULTILINE)


def _parse_lark(source: Source, text: str, start: str):
    """Lark's parse; after a syntax error in a module, the parse goes on at the next top-level `def` or `const`
    after the error's line (the text before it blanked, so spans stay the same), as rustc goes on after an
    item: each error reported is in a different definition, none a consequence of the one before."""
    try:
        return _parse_one(source, text, start)
    except CompileError as err:
        if start != "module":
            raise
        diags = list(err.diagnostics)
    resumed = 0                         # where the last parse began
    while len(diags) < MAX_SYNTAX_ERRORS and diags[-1].code == "E0001" and diags[-1].span is not None:
        span = diags[-1].span
        lines = text.split("\n")
        line_start = sum(len(line) + 1 for line in lines[:span.line - 1])
        # An error at a top-level `def` itself (`unexpected 'def'`: the definition before it is unfinished,
        # e.g. a bracket left open) is not that definition's: the parse goes on there.
        at_definition = span.col == 1 and line_start > resumed and _TOP_LEVEL.match(text, line_start)
        offset = line_start if at_definition else sum(len(line) + 1 for line in lines[:span.end_line])
        found = _TOP_LEVEL.search(text, offset)
        if found is None:
            break
        resumed = found.start()
        blank = re.sub(r"[^\n]", " ", text[:found.start()])
        rest = Source(source.name, blank + source.text[found.start():])      # (`text` may end with a "\n" more)
        try:
            _parse_one(rest, blank + text[found.start():], start)
            break
        except CompileError as err:
            diags += err.diagnostics
    raise CompileError(diags, {source.name: source})


def _parse_one(source: Source, text: str, start: str):
    try:
        tree = _parser().parse(text, start=start)
    except UnexpectedInput as err:
        raise CompileError([_syntax_error(err, source)], {source.name: source}) from None
    except Glued as glued:
        kw, rest = glued.first, glued.rest
        if kw.type in ("INT", "FLOAT"):
            raise CompileError([_invalid_number(source.name, kw, rest)], {source.name: source}) from None
        span = Span(source.name, kw.line, kw.column, rest.end_line, rest.end_column)
        raise CompileError([Diagnostic("E0001", f"`{kw}{rest}`: a space is missing after the keyword `{kw}`",
                                       span, "read as one word",
                                       help=f"write `{kw} {rest}`; no name can stand here, and a keyword is "
                                            f"a word of its own")], {source.name: source}) from None
    except DedentError:
        line = _bad_dedent_line(source)
        span = Span(source.name, line, 1, line, 2)
        raise CompileError([Diagnostic("E0001", "unindent does not match any outer indentation level", span,
                                       "this line", help="indent this line like the block it belongs to")],
                           {source.name: source}) from None
    try:
        return _ToAst(source.name).transform(tree)
    except VisitError as err:
        if isinstance(err.orig_exc, RecursionError):
            raise _too_deep(source) from None
        if isinstance(err.orig_exc, fastparse.BadLiteral):
            raise _bad_literal(err.orig_exc, source) from None
        if isinstance(err.orig_exc, BadTarget):
            bad = err.orig_exc
            raise CompileError([Diagnostic("E0001", str(bad), bad.span, bad.label, help=bad.help)],
                               {source.name: source}) from None
        raise err.orig_exc from None
    except RecursionError:
        raise _too_deep(source) from None


def _too_deep(source: Source) -> CompileError:
    """E0004 where Lark's tree was too deep for its transformer: at the statement of the most tokens (how
    deep a statement nests is bounded by its tokens), or at the start where the tokens cannot be read."""
    try:
        tokens = fastparse.tokenize(source.text if source.text.endswith("\n") else source.text + "\n")
    except (fastparse.GiveUp, fastparse.BadLiteral):
        tokens = []
    statements, current = [], []
    for tok in tokens:
        if tok[0] in ("NL", "INDENT", "DEDENT", "EOF"):
            if current:
                statements.append(current)
            current = []
        else:
            current.append(tok)
    if not statements:
        return CompileError([Diagnostic("E0004", "program nested too deeply", Span(source.name, 1, 1, 1, 2),
                                        help="split long expressions into several assignments")],
                            {source.name: source})
    longest = max(statements, key=len)
    span = Span(source.name, longest[0][2], longest[0][3], longest[-1][4], longest[-1][5])
    return CompileError([Diagnostic("E0004", "expression nested too deeply", span, "here",
                                    help="split it into several assignments")], {source.name: source})


def _bad_dedent_line(source: Source) -> int:
    stack = [0]
    for lineno, line in enumerate(source.text.split("\n"), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        indent = len(line) - len(line.lstrip(" "))
        if indent > stack[-1]:
            stack.append(indent)
        else:
            while indent < stack[-1]:
                stack.pop()
            if indent != stack[-1]:
                return lineno
    return 1


def decode(data: bytes, name: str) -> Source:
    """Decode file bytes as UTF-8 (a byte order mark first is skipped, as Python does); invalid bytes are an
    E0003 diagnostic pointing at the first one."""
    data = data.removeprefix(b"\xef\xbb\xbf")
    try:
        return Source(name, data.decode("utf-8"))
    except UnicodeDecodeError as err:
        prefix = data[: err.start].decode("utf-8", "replace")
        line = prefix.count("\n") + 1
        col = len(prefix) - (prefix.rfind("\n") + 1) + 1
        text = data.decode("utf-8", "replace")
        raise CompileError([Diagnostic("E0003", f"file is not valid UTF-8 (byte 0x{data[err.start]:02x})",
                                       Span(name, line, col, line, col + 1), "invalid byte",
                                       help="save the file as UTF-8")], {name: Source(name, text)}) from None


def grouped(text: str, before_suffix: bool = True) -> str:
    """The expression `text` in parentheses where an operator in it binds looser than what follows it:
    before a suffix (`[:, None]`, `.astype(...)`) any operator (`(a + b)[0]`, `(-x)[0]`); before ` = value`
    in a report's list of operands (`before_suffix=False`) a binary one or a conditional (`(x + y) = 0.0`,
    but `-inf = -inf`). Text that is no arr expression is grouped before a suffix unless it is a name, and
    left as it is in a list (`value at f.py:3:5`)."""
    try:
        node = parse(Source("<expression>", text), start="expr")
    except CompileError:
        return text if text.isidentifier() or not before_suffix else f"({text})"
    loose = (ast.Binary, ast.CondExpr) + ((ast.Unary,) if before_suffix else ())
    return f"({text})" if isinstance(node, loose) else text
