"""A hand-written parser for arr, used first because it is fast: on the 2000-statement generated program
(bench/programs.py) Lark's LALR parse with propagated positions and the `_ToAst` transformer take ~0.65 s,
this lexer and recursive-descent parser ~65 ms.

grammar/arr.lark stays the reference and the Lark path in parse.py produces every diagnostic: this parser
follows the grammar rule by rule, builds the same AST with the same spans (Lark's propagate_positions: a
node spans its first to its last token, punctuation and the parentheses around a child included), and
raises `GiveUp` on anything it does not accept, after which parse.py parses the text again with Lark. It
also gives up where Lark's contextual lexer would read a keyword as a name (`x.in`), and on nesting that
could take Lark's recursive transformer near Python's recursion limit, so that such programs still get
Lark's result or its E0004. tests/test_fastparse.py checks that both parsers build identical ASTs.
"""
from __future__ import annotations

import re

from . import ast
from .span import Span


class GiveUp(Exception):
    """This parser does not accept the input; parse.py falls back to Lark."""


class BadLiteral(Exception):
    """A string literal whose escapes do not decode (both parsers raise it; parse.py makes it E0001)."""

    def __init__(self, message: str, span: Span):
        super().__init__(message)
        self.span = span


KEYWORDS = frozenset("def const return pass print assert if elif else for in range while and or not "
                     "true false".split())
COMPARISONS = frozenset(("==", "!=", "<=", ">=", "<", ">"))
AUG_OPS = frozenset(("+=", "-=", "*=", "/="))
UNARY = frozenset(("-", "+", "~"))
NOT_LEVEL = 3
COMPARISON_LEVEL = 4
FACTOR_LEVEL = 10
BINARY = {"or": 1, "and": 2, **dict.fromkeys(COMPARISONS, COMPARISON_LEVEL), "|": 5, "^": 6, "&": 7,
          "+": 8, "-": 8, "*": 9, "/": 9, "//": 9, "%": 9, "@": 9}
OPEN, CLOSE = frozenset("(["), frozenset(")]")
OPERATORS = ("** == != <= >= += -= *= /= // -> ... - + * / % @ < > = ( ) [ ] , : . ~ & | ^").split()
# A token's kind by its text: a keyword or an operator is its own kind; a character that starts a longer token
# (a newline, a line continuation, a string) is an error alone. Else by its first character (CLASS).
FIXED = {**{word: word for word in (*KEYWORDS, *OPERATORS)}, **dict.fromkeys(("\r", "\\", '"', "'"), "ERROR")}
CLASS = {**dict.fromkeys("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_", "NAME"),
         **dict.fromkeys("0123456789.", "NUMBER"), '"': "STRING", "'": "STRING", "\n": "NL", "\r": "NL",
         "#": "COMMENT", "\\": "CONTINUATION"}
SPECIAL = frozenset(("NUMBER", "STRING", "NL", "COMMENT", "CONTINUATION", "ERROR", *OPEN, *CLOSE))

# Whitespace, then one token: Lark's terminals, where two can match ordered as Lark's lexer tries them (FLOAT
# before INT and `.`, `**` before `*`, `==` before `=`, ...), then any other character (an error).
# (`findall` is three times as fast as `finditer`.)
_TOKEN = re.compile(r"""
    ([ \t\f]*)
    ( [A-Za-z_][A-Za-z0-9_]*                                              # NAME and keywords
    | (?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+   # FLOAT
    | [0-9]+                                                              # INT
    | \*\*|[=!<>]=|[-+*/]=|//|->|\.\.\.|[-+*/%@<>=()\[\],:.~&|^]              # operators
    | (?:\r?\n[ \t]*(?:\#[^\n]*)?)+                                         # _NL
    | "[^"\\\n]*(?:\\.[^"\\\n]*)*"|'[^'\\\n]*(?:\\.[^'\\\n]*)*'                  # STRING
    | \#[^\n]*                                                             # COMMENT
    | \\\r?\n                                                              # LINE_CONT
    | .
    )""", re.VERBOSE)

MAX_BLOCKS = 30          # nested def/if/for/while bodies
SHORT = 40               # a statement of at most this many tokens is never too deep
MAX_LARK_LEVELS = 240    # Lark's transformer takes ~2 frames per tree level; Python's limit is 1000 frames


def tokenize(text: str) -> list[tuple]:
    """Tokens `(kind, text, line, col, end_line, end_col)` with NL/INDENT/DEDENT as Lark's Indenter makes
    them (newlines inside brackets dropped; INDENT and DEDENT at the position of their newline), then EOF.
    The kind of an operator or keyword is its text."""
    toks = []
    append = toks.append
    pos = line_start = brackets = 0
    line = 1
    indents = [0]
    last = None
    for space, value in _TOKEN.findall(text):
        col = pos + len(space) - line_start + 1
        pos += len(space) + len(value)
        kind = FIXED.get(value) or CLASS.get(value[0], "ERROR")
        if kind in SPECIAL:
            if kind == "NL":
                last = ("NL", value, line, col, line + value.count("\n"), len(value) - value.rfind("\n"))
                line, line_start = last[4], pos - last[5] + 1
                if not brackets:
                    append(last)
                    _indent(value[value.rfind("\n") + 1:], indents, last, append)
                continue
            if kind == "COMMENT":
                continue
            if kind == "CONTINUATION":
                line += 1
                line_start = pos
                continue
            if kind == "NUMBER":
                kind = "INT" if value.isdigit() else "FLOAT"
            elif kind in OPEN:
                brackets += 1
            elif kind in CLOSE:
                brackets = max(0, brackets - 1)
            elif kind == "ERROR":
                raise GiveUp(f"unexpected character {value!r}")
        last = (kind, value, line, col, line, col + len(value))
        append(last)
    for _ in indents[1:]:
        append(("DEDENT",) + last[1:])
    toks += [("EOF", "", line, 1, line, 1)] * 2          # the parser may look one token past the end
    return toks


def _indent(indent_str: str, indents: list[int], nl: tuple, append) -> None:
    """INDENT or DEDENTs after a newline, as Lark's Indenter (a tab counts 8)."""
    indent = indent_str.count(" ") + 8 * indent_str.count("\t")
    if indent > indents[-1]:
        indents.append(indent)
        append(("INDENT",) + nl[1:])
        return
    while indent < indents[-1]:
        indents.pop()
        append(("DEDENT",) + nl[1:])
    if indent != indents[-1]:
        raise GiveUp("unindent does not match any outer indentation level")


def parse(text: str, file: str, start: str = "module"):
    """The AST of `text` (already prepared as parse.py gives it to Lark); raises GiveUp or RecursionError."""
    return _Parser(tokenize(text), file).parse(start)


class _Parser:
    def __init__(self, toks: list[tuple], file: str):
        self.toks = toks
        self.file = file
        self.pos = 0
        self.tok = toks[0]
        self.kind = self.tok[0]
        self.blocks = 0

    def parse(self, start: str):
        if start == "module":
            node = self.module()
        elif start == "stmt":
            node = self.stmt()
        elif start == "expr":
            node = self.expr()[0]
            self.check_depth(node, 0)
        elif start == "type":
            node = self.type()
            self.check_depth(node, 0)
        else:
            raise GiveUp(f"start {start!r}")
        self.expect("EOF")
        return node

    # ---- tokens and spans -------------------------------------------------------------------------------
    def take(self) -> tuple:
        tok = self.tok
        self.pos += 1
        self.tok = self.toks[self.pos]
        self.kind = self.tok[0]
        return tok

    def expect(self, kind: str) -> tuple:
        if self.kind != kind:
            raise GiveUp(f"expected {kind}, found {self.kind}")
        return self.take()

    def tspan(self, tok: tuple) -> Span:
        return _span(self.file, tok[2], tok[3], tok[4], tok[5])

    def span(self, first, last) -> Span:
        """From the start of `first` (a Span or a token) to the end of `last` (a Span or a token)."""
        if type(first) is tuple:
            line, col = first[2], first[3]
        else:
            line, col = first.line, first.col
        if type(last) is tuple:
            return _span(self.file, line, col, last[4], last[5])
        return _span(self.file, line, col, last.end_line, last.end_col)

    def check_depth(self, node: ast.Node, first: int):
        """Gives up where Lark's tree could be too deep for its recursive transformer: an AST node is at most
        two levels of that tree, a block four. Only a statement of many tokens (from token `first` on) can be
        that deep: an AST is no higher than its tokens are many."""
        if self.pos - first > SHORT and 2 * _height(node) + 4 * self.blocks + 8 > MAX_LARK_LEVELS:
            raise GiveUp("nested too deeply")

    # ---- module -----------------------------------------------------------------------------------------
    def module(self) -> ast.Module:
        items = []
        first = last = None
        while self.kind != "EOF":
            if self.kind == "NL":
                end = self.take()
            elif self.kind == "def":
                item = self.definition()
                items.append(item)
                end = item.span
            elif self.kind == "const":
                item = self.const_def()
                items.append(item)
                end = item.span
            else:
                raise GiveUp(f"unexpected {self.kind} at module level")
            if first is None:
                first = end
            last = end
        if first is None:
            return ast.Module(_span(self.file, 1, 1, 1, 1), ())
        return ast.Module(self.span(first, last), tuple(items))

    def definition(self) -> ast.FunctionDef:
        tok = self.take()
        name = self.expect("NAME")
        self.expect("(")
        first = self.pos
        params = []
        while self.kind != ")":
            pname = self.expect("NAME")
            self.expect(":")
            ptype = self.type()
            params.append(ast.Param(self.span(pname, ptype.span), pname[1], ptype))
            if self.kind != ",":
                break
            self.take()
        self.expect(")")
        self.expect("->")
        if self.kind == "(":
            self.take()
            results = [self.type()]
            while self.kind == ",":
                self.take()
                if self.kind == ")":
                    break
                results.append(self.type())
            if len(results) < 2:
                raise GiveUp("a result tuple of one type")
            self.expect(")")
        else:
            results = [self.type()]
        for node in params + results:
            self.check_depth(node, first)
        self.expect(":")
        body, end = self.suite()
        return ast.FunctionDef(self.span(tok, end), name[1], tuple(params), tuple(results), len(results) > 1,
                               body, name_span=self.tspan(name))

    def const_def(self) -> ast.ConstDef:
        tok = self.take()
        first = self.pos
        name = self.expect("NAME")
        self.expect(":")
        ctype = self.type()
        self.expect("=")
        value = self.expr()[0]
        self.check_depth(ctype, first)
        self.check_depth(value, first)
        return ast.ConstDef(self.span(tok, self.expect("NL")), name[1], ctype, value)

    # ---- types ------------------------------------------------------------------------------------------
    def type(self) -> ast.TypeExpr:
        name = self.expect("NAME")
        if self.kind != "[":
            return ast.TypeExpr(self.tspan(name), name[1], None)
        self.take()
        dims = []
        if self.kind != "]":
            dims.append(self.dim_sum()[0])
            while self.kind == ",":
                self.take()
                dims.append(self.dim_sum()[0])
        return ast.TypeExpr(self.span(name, self.expect("]")), name[1], tuple(dims))

    def dim_sum(self):
        lhs, outer = self.dim_term()
        while self.kind == "+" or self.kind == "-":
            op = self.take()[1]
            rhs, rhs_outer = self.dim_term()
            lhs = ast.DimBin(self.span(outer, rhs_outer), op, lhs, rhs)
            outer = lhs.span
        return lhs, outer

    def dim_term(self):
        lhs, outer = self.dim_atom()
        while self.kind == "*" or self.kind == "//":
            op = self.take()[1]
            rhs, rhs_outer = self.dim_atom()
            lhs = ast.DimBin(self.span(outer, rhs_outer), op, lhs, rhs)
            outer = lhs.span
        return lhs, outer

    def dim_atom(self):
        tok = self.take()
        if tok[0] == "INT":
            node = ast.DimInt(self.tspan(tok), int_value(tok[1]))
        elif tok[0] == "NAME":
            node = ast.DimName(self.tspan(tok), tok[1])
        elif tok[0] == "(":
            node = self.dim_sum()[0]
            return node, self.span(tok, self.expect(")"))
        else:
            raise GiveUp(f"unexpected {tok[0]} in a dimension")
        return node, node.span

    # ---- statements -------------------------------------------------------------------------------------
    def suite(self) -> tuple[tuple, tuple]:
        """The statements of a block, and the DEDENT that ends it (where the block's span ends)."""
        self.expect("NL")
        self.expect("INDENT")
        self.blocks += 1
        if self.blocks > MAX_BLOCKS:
            raise GiveUp("blocks nested too deeply")
        body = [self.stmt()]
        while self.kind != "DEDENT":
            body.append(self.stmt())
        self.blocks -= 1
        return tuple(body), self.take()

    def stmt(self) -> ast.Node:
        kind = self.kind
        if kind == "if":
            return self.if_stmt()
        if kind == "for":
            return self.for_stmt()
        if kind == "while":
            return self.while_stmt()
        first = self.pos
        node = self.simple_stmt()
        self.expect("NL")
        self.check_depth(node, first)
        return node

    def simple_stmt(self) -> ast.Node:
        kind = self.kind
        if kind == "return":
            return self.return_stmt()
        if kind == "pass":
            return ast.Pass(self.tspan(self.take()))
        if kind == "print":
            tok = self.take()
            self.expect("(")
            args, kwargs = self.args()
            return ast.Print(self.span(tok, self.expect(")")), args + kwargs)
        if kind == "assert":
            tok = self.take()
            cond, end = self.expr()
            message = None
            if self.kind == ",":
                self.take()
                message, end = self.expr()
            return ast.Assert(self.span(tok, end), cond, message)
        expr, outer = self.expr()
        kind = self.kind
        if kind == "=" or kind == ",":
            targets = [_target(expr, outer)]
            while self.kind == ",":
                self.take()
                if self.kind == "=":
                    break
                targets.append(_target(*self.expr()))
            self.expect("=")
            value, end = self.exprlist()
            return ast.Assign(self.span(targets[0].span, end), tuple(targets), value)
        if kind in AUG_OPS:
            target = _target(expr, outer)
            op = self.take()[1][:-1]
            value, end = self.expr()
            return ast.AugAssign(self.span(target.span, end), target, op, value)
        return ast.ExprStmt(outer, expr)

    def return_stmt(self) -> ast.Return:
        end = tok = self.take()
        values = []
        if self.kind != "NL":
            value, end = self.expr()
            values.append(value)
            while self.kind == ",":
                self.take()
                value, end = self.expr()
                values.append(value)
        return ast.Return(self.span(tok, end), tuple(values))

    def exprlist(self):
        """`a` or `a, b,` after `=`: the value and where the list ends (a trailing comma included)."""
        first, end = self.expr()
        start = end
        items = [first]
        while self.kind == ",":
            end = self.take()
            if self.kind == "NL":
                break
            item, end = self.expr()
            items.append(item)
        if len(items) == 1:
            return first, end
        return ast.TupleLit(self.span(start, end), tuple(items)), end

    def if_stmt(self) -> ast.If:
        tok = self.take()
        cond, body, end = self.header_and_suite()
        elifs = []
        while self.kind == "elif":
            elif_tok = self.take()
            elif_cond, elif_body, end = self.header_and_suite()
            elifs.append((elif_cond, elif_body, self.span(elif_tok, end)))
        orelse = ()
        if self.kind == "else":
            self.take()
            self.expect(":")
            orelse, end = self.suite()
        for elif_cond, elif_body, elif_span in reversed(elifs):
            orelse = (ast.If(elif_span.to(orelse[-1].span) if orelse else elif_span, elif_cond, elif_body, orelse),)
        return ast.If(self.span(tok, end), cond, body, orelse)

    def header_and_suite(self):
        first = self.pos
        cond = self.expr()[0]
        self.check_depth(cond, first)
        self.expect(":")
        return (cond, *self.suite())

    def while_stmt(self) -> ast.While:
        tok = self.take()
        cond, body, end = self.header_and_suite()
        return ast.While(self.span(tok, end), cond, body)

    def for_stmt(self) -> ast.For:
        tok = self.take()
        var = self.expect("NAME")
        self.expect("in")
        self.expect("range")
        self.expect("(")
        if self.kind == ")":
            raise GiveUp("range() without arguments")
        first = self.pos
        args, kwargs = self.args()
        for node in args + kwargs:
            self.check_depth(node, first)
        self.expect(")")
        self.expect(":")
        body, end = self.suite()
        return ast.For(self.span(tok, end), var[1], args + kwargs, body)

    # ---- expressions: each returns (node, outer span: the node's span with its parentheses) -------------
    def expr(self):
        then, outer = self.binary(1)
        if self.kind != "if":
            return then, outer
        self.take()
        cond = self.binary(1)[0]
        self.expect("else")
        orelse, end = self.expr()
        node = ast.CondExpr(self.span(outer, end), cond, then, orelse)
        return node, node.span

    def binary(self, level: int):
        """Operators from `level` up (precedence climbing over or_test ... term of the grammar)."""
        if self.kind == "not":
            if level > NOT_LEVEL:
                raise GiveUp("'not' read as a name")
            tok = self.take()
            operand, end = self.binary(NOT_LEVEL)
            lhs = ast.Unary(self.span(tok, end), "not", operand)
            outer = lhs.span
        else:
            lhs, outer = self.factor()
        binary = BINARY
        while True:
            op = self.kind
            prec = binary.get(op)
            if prec is None or prec < level:
                return lhs, outer
            self.take()
            rhs, end = self.factor() if prec == FACTOR_LEVEL - 1 else self.binary(prec + 1)
            lhs = ast.Binary(self.span(outer, end), op, lhs, rhs)
            outer = lhs.span
            if prec == COMPARISON_LEVEL and self.kind in COMPARISONS:
                raise GiveUp("chained comparison")

    def factor(self):
        kind = self.kind
        if kind in UNARY:
            tok = self.take()
            operand, end = self.factor()
            node = ast.Unary(self.span(tok, end), kind, operand)
            return node, node.span
        base, outer = self.postfix()
        if self.kind != "**":
            return base, outer
        self.take()
        exponent, end = self.factor()
        node = ast.Binary(self.span(outer, end), "**", base, exponent)
        return node, node.span

    def postfix(self):
        node, outer = self.atom()
        while True:
            kind = self.kind
            if kind == "(":
                self.take()
                args, kwargs = self.args()
                node = ast.Call(self.span(outer, self.expect(")")), node, args, kwargs)
            elif kind == "[":
                self.take()
                subscripts = self.subscripts()
                node = ast.Index(self.span(outer, self.expect("]")), node, subscripts)
            elif kind == ".":
                self.take()
                name = self.expect("NAME")
                node = ast.Attribute(self.span(outer, name), node, name[1])
            else:
                return node, outer
            outer = node.span

    def atom(self):
        tok = self.take()
        kind = tok[0]
        if kind == "NAME":
            node = ast.Name(self.tspan(tok), tok[1])
        elif kind == "INT":
            digits = tok[1]
            node = ast.IntLit(self.tspan(tok), int_value(digits))
        elif kind == "FLOAT":
            node = ast.FloatLit(self.tspan(tok), float(tok[1]))
        elif kind == "(":
            return self.parenthesized(tok)
        elif kind == "[":
            elems = []
            while self.kind != "]":
                elems.append(self.expr()[0])
                if self.kind != ",":
                    break
                self.take()
            node = ast.ArrayLit(self.span(tok, self.expect("]")), tuple(elems))
        elif kind == "STRING":
            node = ast.StrLit(self.tspan(tok), string_value(tok[1], self.tspan(tok)))
        elif kind == "true" or kind == "false":
            node = ast.BoolLit(self.tspan(tok), kind == "true")
        else:
            raise GiveUp(f"unexpected {kind} in an expression")
        return node, node.span

    def parenthesized(self, open_tok: tuple):
        """`(e)`: `e` with the parentheses as its outer span; `()`, `(a,)`, `(a, b)`: a tuple literal."""
        elems = []
        if self.kind != ")":
            first = self.expr()[0]
            if self.kind == ")":
                return first, self.span(open_tok, self.take())
            self.expect(",")
            elems.append(first)
            while self.kind != ")":
                elems.append(self.expr()[0])
                if self.kind != ",":
                    break
                self.take()
        node = ast.TupleLit(self.span(open_tok, self.expect(")")), tuple(elems))
        return node, node.span

    def args(self) -> tuple[tuple, tuple]:
        """Call arguments up to the closing `)`: (positional, keywords)."""
        args, kwargs = [], []
        while self.kind != ")":
            arg, outer = self.expr()
            if self.kind == "=" and type(arg) is ast.Name and outer is arg.span:
                self.take()
                value, end = self.expr()
                kwargs.append(ast.Keyword(self.span(outer, end), arg.id, value))
            else:
                args.append(arg)
            if self.kind != ",":
                break
            self.take()
        return tuple(args), tuple(kwargs)

    def subscripts(self) -> tuple:
        subscripts = [self.subscript()]
        while self.kind == ",":
            self.take()
            if self.kind == "]":
                break
            subscripts.append(self.subscript())
        return tuple(subscripts)

    def subscript(self) -> ast.Node:
        if self.kind == "...":
            return ast.EllipsisIndex(self.tspan(self.take()))
        start = None
        if self.kind != ":":
            start, first = self.expr()
            if self.kind != ":":
                return start
        end = self.take()
        if start is None:
            first = end
        stop = step = None
        if self.kind not in (",", "]", ":"):
            stop, end = self.expr()
        if self.kind == ":":
            end = self.take()
            if self.kind != "," and self.kind != "]":
                step, end = self.expr()
        return ast.Slice(self.span(first, end), start, stop, step)


_new = object.__new__


def _span(file: str, line: int, col: int, end_line: int, end_col: int) -> Span:
    """`Span(...)` in half the time: the frozen dataclass's __init__ sets each field by object.__setattr__."""
    span = _new(Span)
    fields = span.__dict__
    fields["file"] = file
    fields["line"] = line
    fields["col"] = col
    fields["end_line"] = end_line
    fields["end_col"] = end_col
    return span


def _target(expr: ast.Node, outer: Span) -> ast.Node:
    """An assignment target: a name or an indexed postfix, not in parentheses."""
    if outer is expr.span:
        if type(expr) is ast.Name:
            return ast.NameTarget(expr.span, expr.id)
        if type(expr) is ast.Index:
            return ast.IndexTarget(expr.span, expr.base, expr.subscripts)
    raise GiveUp("not an assignment target")


def int_value(digits: str) -> int:
    """An integer literal's value. Past 64 bits the exact value does not matter (E0211, E0215), and
    Python refuses int() of more than 4300 digits: 41 digits or more read as 2**128."""
    return int(digits) if len(digits) <= 40 else 2 ** 128


def string_value(token: str, span: Span) -> str:
    """A string literal's text with its escapes (Python's) decoded."""
    try:
        return token[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
    except UnicodeDecodeError as err:
        raise BadLiteral(f"invalid escape in a string: {err.reason}", span) from None


def _height(node: ast.Node) -> int:
    """The height of an AST (iterative: the tree may be deep)."""
    height = 0
    stack = [(node, 1)]
    while stack:
        node, depth = stack.pop()
        height = max(height, depth)
        for value in vars(node).values():
            if isinstance(value, ast.Node):
                stack.append((value, depth + 1))
            elif type(value) is tuple:
                stack.extend((item, depth + 1) for item in value if isinstance(item, ast.Node))
    return height
