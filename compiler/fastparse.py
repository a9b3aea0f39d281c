"""A hand-written parser for arr, used first because it is fast: on the 2000-statement generated program
(bench/programs.py) Lark's LALR parse with propagated positions and the `_ToAst` transformer take ~0.65 s,
this lexer and precedence-climbing parser ~48 ms.

grammar/arr.lark stays the reference and the Lark path in parse.py produces every diagnostic: this parser
follows the grammar rule by rule, builds the same AST with the same spans (Lark's propagate_positions: a
node spans its first to its last token, punctuation and the parentheses around a child included), and
raises `GiveUp` on anything it does not accept, after which parse.py parses the text again with Lark. A
keyword where a name belongs (`x.in`, `def = 1`) is one of those: KEYWORDS are reserved, the grammar's NAME
never matches one, and Lark's error becomes "`in` is a keyword and cannot be a name". It gives up on nesting that
could take Lark's recursive transformer near Python's recursion limit, so that such programs still get
Lark's result or its E0004. tests/test_fastparse.py checks that both parsers build identical ASTs.

Where the time goes, and so the shape of the code: one regular expression finds every token, and the
lexer's Python loop does as little per token as it can. Most of the parser's time is building nodes and
spans, with `make` and `_span` (generated constructors, more than twice as fast as the dataclasses' own);
the rest is mostly calls, so an operand (unary operators, atom, postfix chain, `**`) is one call of
`factor`, the operator precedence levels are climbed only where an operator of a higher level follows, and
the hottest paths advance over a token inline.
"""
from __future__ import annotations

import dataclasses
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
                     "true false extern".split())
COMPARISONS = frozenset(("==", "!=", "<=", ">=", "<", ">"))
AUG_OPS = frozenset(("+=", "-=", "*=", "/=", "//=", "%=", "**=", "@=", "&=", "|=", "^=", "<<=", ">>="))
UNARY = frozenset(("-", "+", "~"))
TRAILERS = frozenset(("(", "[", ".", "**"))     # what may follow an atom in a factor
NOT_LEVEL = 3
COMPARISON_LEVEL = 4
BINARY = {"or": 1, "and": 2, **dict.fromkeys(COMPARISONS, COMPARISON_LEVEL), "|": 5, "^": 6, "&": 7,
          "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "//": 10, "%": 10, "@": 10}
OPEN, CLOSE = frozenset("(["), frozenset(")]")
OPERATORS = ("** <<= >>= << >> == != <= >= += -= *= /= //= %= **= @= &= |= ^= // -> ... - + * / % @ < > = ( ) [ ] , : ; . ~ & | ^").split()
# A token's kind by its text: a keyword or an operator is its own kind; a character that starts a longer token
# (a newline, a line continuation, a string) is an error alone. Else by its first character (CLASS).
FIXED = {**{word: word for word in (*KEYWORDS, *OPERATORS)}, **dict.fromkeys(("\r", "\\", '"', "'"), "ERROR")}
CLASS = {**dict.fromkeys("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_", "NAME"),
         **dict.fromkeys("0123456789.", "NUMBER"), '"': "STRING", "'": "STRING", "\n": "NL", "\r": "NL",
         "#": "COMMENT", "\\": "CONTINUATION"}
SPECIAL = frozenset(("NUMBER", "STRING", "NL", "COMMENT", "CONTINUATION", "ERROR", *OPEN, *CLOSE))

# Whitespace, then one token: Lark's terminals, where two can match ordered as Lark's lexer tries them (FLOAT
# before INT and `.`, `**` before `*`, `==` before `=`, ...), then any other character (an error). FLOAT
# and INT are one expression here, which matches what FLOAT, or else INT, would (the lexer tells them apart;
# FLOAT cannot match where a prefixed INT does: `0x`, `0o`, `0b`).
# (`findall` is three times as fast as `finditer`.)
_TOKEN = re.compile(r"""
    ([ \t\f]*)
    ( [A-Za-z_][A-Za-z0-9_]*                                              # NAME and keywords
    | 0[xX](?:_?[0-9a-fA-F])+|0[oO](?:_?[0-7])+|0[bB](?:_?[01])+               # INT with a base prefix
    | {D}(?:\.(?:{D})?)?(?:[eE][+-]?{D})?|\.{D}(?:[eE][+-]?{D})?                  # FLOAT and INT
    | \*\*=?|<<=?|>>=?|[=!<>]=|[-+*/%@&|^]=|//=?|->|\.\.\.|[-+*/%@<>=()\[\],:;.~&|^]  # operators
    | (?:\r?\n[ \t]*(?:\#[^\n]*)?)+                                         # _NL
    | "[^"\\\n]*(?:\\.[^"\\\n]*)*"|'[^'\\\n]*(?:\\.[^'\\\n]*)*'                  # STRING
    | \#[^\n]*                                                             # COMMENT
    | \\\r?\n                                                              # LINE_CONT
    | .
    )""".replace("{D}", "[0-9](?:_?[0-9])*"), re.VERBOSE)

MAX_BLOCKS = 30          # nested def/if/for/while bodies
MAX_LARK_LEVELS = 240    # Lark's transformer takes ~2 frames per tree level; Python's limit is 1000 frames


def tokenize(text: str) -> list[tuple]:
    """Tokens `(kind, text, line, col, end_line, end_col)` with NL/INDENT/DEDENT as Lark's Indenter makes
    them (newlines inside brackets dropped; INDENT and DEDENT at the position of their newline), then EOF.
    The kind of an operator or keyword is its text."""
    toks = []
    append = toks.append
    fixed_kind, class_kind = FIXED.get, CLASS.get
    line = col = 1           # where the whitespace before the next token starts
    brackets = 0
    indents = [0]
    margin = "\n"           # how the last NL token outside brackets ends: a newline, the indentation
    last = None
    for space, value in _TOKEN.findall(text):
        if space:
            col += len(space)
        elif last is not None and last[0] in ("INT", "FLOAT") and (value[0].isalnum() or value[0] == "_"):
            # a number a word character follows: `0x1for` would be `0x1f or`, `1if` `1 if`; Python refuses
            # them ("invalid hexadecimal literal"), and so does Lark's parser (parse.py's "invalid number")
            raise GiveUp("a number glued to a word")
        kind = fixed_kind(value) or class_kind(value[0], "ERROR")
        if kind in SPECIAL:                              # (the most common kinds first)
            if kind == "NUMBER":
                kind = "INT" if value.isdigit() or value[1:2] in _BASES or value.replace("_", "").isdigit() \
                    else "FLOAT"
            elif kind == "(" or kind == "[":
                brackets += 1
            elif kind == ")" or kind == "]":
                if brackets:
                    brackets -= 1
            elif kind == "NL":
                end_line = line + value.count("\n")
                end_col = len(value) - value.rfind("\n")
                last = ("NL", value, line, col, end_line, end_col)
                line, col = end_line, end_col
                if not brackets:
                    append(last)
                    if not value.endswith(margin):       # (a NL that ends so changes no indentation level)
                        margin = value[value.rfind("\n"):]
                        _indent(margin[1:], indents, last, append)
                continue
            elif kind == "COMMENT":
                col += len(value)
                continue
            elif kind == "CONTINUATION":
                line += 1
                col = 1
                continue
            elif kind == "ERROR":
                raise GiveUp(f"unexpected character {value!r}")
        end_col = col + len(value)
        last = (kind, value, line, col, line, end_col)
        append(last)
        col = end_col
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


# ---- node and span constructors -------------------------------------------------------------------------
def _constructors(classes: list[type]) -> dict:
    """For each frozen dataclass of `classes`, by its name, a function that builds an instance from all the
    fields, positional, in less than half the time of `cls(...)`: the dataclass's __init__ must set each
    field through object.__setattr__ (the class's own __setattr__ refuses), these store them straight into
    the instance's __dict__, in the same order. The instance is the same: same type, same fields, no
    __post_init__ skipped (ast.py's classes and Span have none). Generated, as dataclasses generates
    __init__, so that each field is a local variable; in one piece, which compiles in half the time."""
    namespace = {"_new": object.__new__}
    source = []
    for cls in classes:
        fields = dataclasses.fields(cls)
        names = [field.name for field in fields]
        assert all(field.init and not field.name.startswith("_") for field in fields)
        assert "__post_init__" not in vars(cls)
        namespace["_" + cls.__name__] = cls
        source += [f"def {cls.__name__}({', '.join(names)}):",
                   f"    _obj = _new(_{cls.__name__})",
                   "    _dict = _obj.__dict__",
                   *(f"    _dict[{name!r}] = {name}" for name in names),
                   "    return _obj"]
    exec("\n".join(source), namespace)          # noqa: S102 (our own text, made of the classes' field names)
    return {cls.__name__: namespace[cls.__name__] for cls in classes}


# `make.Binary(span, op, lhs, rhs)` is `ast.Binary(span, op, lhs, rhs)`, and so for every node class and
# Span. A class, not a SimpleNamespace, because the interpreter looks up a class's functions faster.
make = type("make", (), _constructors([Span, *(cls for cls in vars(ast).values()
                                               if isinstance(cls, type) and issubclass(cls, ast.Node))]))
_span = make.Span          # _span(file, line, col, end_line, end_col)


def parse(text: str, file: str, start: str = "module"):
    """The AST of `text` (already prepared as parse.py gives it to Lark); raises GiveUp or RecursionError."""
    return _Parser(tokenize(text), file).parse(start)


class _Parser:
    """Recursive descent over the token list. `tok` is the next token, `kind` its kind, `pos` its index.
    Expressions return (node, outer span): the node's span with the parentheses around it, which is where
    an enclosing node's span starts or ends. Spans are built from token tuples (..., line, col, end_line,
    end_col) and from the outer spans."""
    __slots__ = ("toks", "file", "pos", "tok", "kind", "blocks")

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
    # The hottest paths repeat take()'s three lines in place of calling it (the call costs as much again).
    def take(self) -> tuple:
        tok = self.tok
        self.pos = pos = self.pos + 1
        self.tok = following = self.toks[pos]
        self.kind = following[0]
        return tok

    def expect(self, kind: str) -> tuple:
        tok = self.tok
        if tok[0] != kind:
            raise GiveUp(f"expected {kind}, found {tok[0]}")
        self.pos = pos = self.pos + 1                    # self.take(), inline
        self.tok = following = self.toks[pos]
        self.kind = following[0]
        return tok

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
        two levels of that tree, a block four. An AST is no higher than its tokens (from token `first` on) are
        many, so only a statement of many tokens needs its height measured."""
        levels = 4 * self.blocks + 8
        if 2 * (self.pos - first) + levels > MAX_LARK_LEVELS and 2 * _height(node) + levels > MAX_LARK_LEVELS:
            raise GiveUp("nested too deeply")

    # ---- module -----------------------------------------------------------------------------------------
    def module(self) -> ast.Module:
        items = []
        first = last = None
        while self.kind != "EOF":
            if self.kind == "NL":
                end = self.take()
            elif self.kind in ("def", "extern"):
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
            return make.Module(_span(self.file, 1, 1, 1, 1), ())
        return make.Module(self.span(first, last), tuple(items))

    def definition(self) -> ast.FunctionDef:
        """A `def`, or an `extern def` (a signature ending its line)."""
        tok = self.take()
        extern = tok[0] == "extern"
        if extern:
            self.expect("def")
        name = self.expect("NAME")
        self.expect("(")
        first = self.pos
        params = []
        while self.kind != ")":
            pname = self.expect("NAME")
            self.expect(":")
            ptype = self.type()
            default, end = None, ptype.span
            if self.kind == "=":
                self.take()
                default, end = self.expr()
            params.append(make.Param(self.span(pname, end), pname[1], ptype, default))
            if self.kind != ",":
                break
            self.take()
        defaults = [p.default is not None for p in params]
        if True in defaults and False in defaults[defaults.index(True):]:
            raise GiveUp("a parameter without a default after one with a default")
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
        if extern:
            body, end = (), self.expect("NL")
        else:
            self.expect(":")
            body, end = self.suite()
        return make.FunctionDef(self.span(tok, end), name[1], tuple(params), tuple(results), len(results) > 1,
                                body, self.tspan(name), "", extern)

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
        return make.ConstDef(self.span(tok, self.expect("NL")), name[1], ctype, value)

    # ---- types ------------------------------------------------------------------------------------------
    def type(self) -> ast.TypeExpr:
        name = self.expect("NAME")
        if self.kind != "[":
            return make.TypeExpr(self.tspan(name), name[1], None)
        self.take()
        dims = []
        if self.kind != "]":
            dims.append(self.dim_sum()[0])
            while self.kind == ",":
                self.take()
                dims.append(self.dim_sum()[0])
        return make.TypeExpr(self.span(name, self.expect("]")), name[1], tuple(dims))

    def dim_sum(self):
        return self.dim_chain(("+", "-"), self.dim_term)

    def dim_term(self):
        return self.dim_chain(("*", "//"), self.dim_atom)

    def dim_chain(self, ops: tuple, operand):
        """`operand (op operand)*` for `op` in `ops`, grouped from the left."""
        lhs, outer = operand()
        while self.kind in ops:
            op = self.take()[1]
            rhs, rhs_outer = operand()
            lhs = make.DimBin(self.span(outer, rhs_outer), op, lhs, rhs)
            outer = lhs.span
        return lhs, outer

    def dim_atom(self):
        tok = self.take()
        if tok[0] == "INT":
            node = make.DimInt(self.tspan(tok), int_value(tok[1]))
        elif tok[0] == "NAME":
            node = make.DimName(self.tspan(tok), tok[1])
        elif tok[0] == "(":
            node = self.dim_sum()[0]
            return node, self.span(tok, self.expect(")"))
        else:
            raise GiveUp(f"unexpected {tok[0]} in a dimension")
        return node, node.span

    # ---- statements -------------------------------------------------------------------------------------
    def suite(self) -> tuple[tuple, tuple]:
        """The statements of a block, and the DEDENT that ends it (where the block's span ends); or of a
        one-line suite (`if x: return x`), and the NL that ends it."""
        if self.kind != "NL":
            body = self.simple_stmts()
            return (body if type(body) is tuple else (body,)), self.toks[self.pos - 1]
        self.take()
        self.expect("INDENT")
        self.blocks += 1
        if self.blocks > MAX_BLOCKS:
            raise GiveUp("blocks nested too deeply")
        body = []
        while True:
            stmt = self.stmt()
            if type(stmt) is tuple:
                body += stmt
            else:
                body.append(stmt)
            if self.kind == "DEDENT":
                break
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
        return self.simple_stmts()

    def simple_stmts(self):
        """A line of simple statements: one (a node), or several separated by `;` (a tuple)."""
        first = self.pos
        node = self.simple_stmt()
        self.check_depth(node, first)
        if self.kind != ";":
            self.expect("NL")
            return node
        nodes = [node]
        while self.kind == ";":
            self.take()
            if self.kind == "NL":
                break
            first = self.pos
            nodes.append(self.simple_stmt())
            self.check_depth(nodes[-1], first)
        self.expect("NL")
        return nodes[0] if len(nodes) == 1 else tuple(nodes)

    def simple_stmt(self) -> ast.Node:
        kind = self.kind
        if kind == "NAME" and self.toks[self.pos + 1][0] == "=":
            # The most common statement, `name = value`, without the Name node that `target = value` would
            # parse first (and the calls that would build it).
            name = self.tok
            self.pos = pos = self.pos + 2                # self.take() twice, inline: the name and `=`
            self.tok = following = self.toks[pos]
            self.kind = following[0]
            target = make.NameTarget(_span(self.file, name[2], name[3], name[4], name[5]), name[1])
            value, end = self.exprlist()
            return make.Assign(self.span(name, end), (target,), value)
        if kind == "return":
            return self.return_stmt()
        if kind == "pass":
            return make.Pass(self.tspan(self.take()))
        if kind == "print":
            tok = self.take()
            self.expect("(")
            args, kwargs = self.args()
            return make.Print(self.span(tok, self.expect(")")), args + kwargs)
        if kind == "assert":
            tok = self.take()
            cond, end = self.expr()
            message = None
            if self.kind == ",":
                self.take()
                message, end = self.expr()
            return make.Assert(self.span(tok, end), cond, message)
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
            return make.Assign(self.span(targets[0].span, end), tuple(targets), value)
        if kind in AUG_OPS:
            target = _target(expr, outer)
            if type(target) is ast.TupleTarget:
                raise GiveUp("an augmented assignment to a tuple")
            op = self.take()[1][:-1]
            value, end = self.expr()
            return make.AugAssign(self.span(target.span, end), target, op, value)
        return make.ExprStmt(outer, expr)

    def return_stmt(self) -> ast.Return:
        end = tok = self.take()
        values = []
        if self.kind != "NL" and self.kind != ";":
            value, end = self.expr()
            values.append(value)
            while self.kind == ",":
                self.take()
                value, end = self.expr()
                values.append(value)
        return make.Return(self.span(tok, end), tuple(values))

    def exprlist(self):
        """`a` or `a, b,` after `=`: the value and where the list ends (a trailing comma included)."""
        first, end = self.expr()
        if self.kind != ",":
            return first, end
        start = end
        items = [first]
        while self.kind == ",":
            end = self.take()
            if self.kind == "NL" or self.kind == ";":
                break
            item, end = self.expr()
            items.append(item)
        if len(items) == 1:
            return first, end
        return make.TupleLit(self.span(start, end), tuple(items)), end

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
            orelse = (make.If(elif_span.to(orelse[-1].span) if orelse else elif_span, elif_cond, elif_body,
                              orelse),)
        return make.If(self.span(tok, end), cond, body, orelse)

    def header_and_suite(self):
        first = self.pos
        cond = self.expr()[0]
        self.check_depth(cond, first)
        self.expect(":")
        return (cond, *self.suite())

    def while_stmt(self) -> ast.While:
        tok = self.take()
        first = self.pos
        cond = self.expr()[0]
        self.check_depth(cond, first)
        options = ()
        if self.kind == ",":                       # `while cond, bound=N:`
            self.take()
            name = self.expect("NAME")
            self.expect("=")
            value, end = self.expr()
            self.check_depth(value, first)
            options = (make.Keyword(self.span(name, end), name[1], value),)
        self.expect(":")
        body, end = self.suite()
        return make.While(self.span(tok, end), cond, body, options)

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
        return make.For(self.span(tok, end), var[1], args + kwargs, body)

    # ---- expressions: each returns (node, outer span: the node's span with its parentheses) -------------
    def expr(self):
        """test: an or_test, or `or_test if or_test else test`."""
        if self.kind == "not":
            then, outer = self.not_test(1)
        else:
            then, outer = self.factor()
        if self.kind in BINARY:
            then, outer = self.climb(then, outer, 1)
        if self.kind != "if":
            return then, outer
        self.take()
        cond = self.binary(1)[0]
        self.expect("else")
        orelse, end = self.expr()
        node = make.CondExpr(self.span(outer, end), cond, then, orelse)
        return node, node.span

    def binary(self, level: int):
        """An expression of the operators from `level` up (or_test ... term of the grammar)."""
        if self.kind == "not":
            lhs, outer = self.not_test(level)
        else:
            lhs, outer = self.factor()
        return self.climb(lhs, outer, level)

    def not_test(self, level: int):
        """`not` and its operand, at the operator level `level`: only or_test and and_test have not_test."""
        if level > NOT_LEVEL:
            raise GiveUp("'not' read as a name")
        tok = self.take()
        operand, end = self.binary(NOT_LEVEL)
        node = make.Unary(self.span(tok, end), "not", operand)
        return node, node.span

    def climb(self, lhs, outer, level: int):
        """The binary operators from `level` up that follow the operand `lhs` (precedence climbing): each
        operator takes an operand, and the operators of higher levels after it, as its right-hand side."""
        binary = BINARY
        line, col = outer.line, outer.col                # where each node of the chain starts (left-assoc.)
        while True:
            op = self.kind
            prec = binary.get(op)
            if prec is None or prec < level:
                return lhs, outer
            self.pos = pos = self.pos + 1                # self.take(), inline
            self.tok = following = self.toks[pos]
            self.kind = following[0]
            if self.kind == "not":
                rhs, end = self.not_test(prec + 1)
            else:
                rhs, end = self.factor()
            if binary.get(self.kind, 0) > prec:         # the call is saved where no such operator follows
                rhs, end = self.climb(rhs, end, prec + 1)
            outer = _span(self.file, line, col, end.end_line, end.end_col)
            lhs = make.Binary(outer, op, lhs, rhs)
            if prec == COMPARISON_LEVEL and self.kind in COMPARISONS:
                raise GiveUp("chained comparison")

    def factor(self):
        """factor, power and postfix of the grammar: `-`/`+`/`~` factor, or an atom and then the calls,
        indexing, attributes and `** factor` after it."""
        tok = self.tok
        kind = tok[0]
        if kind == "NAME" or kind == "FLOAT":            # the most common atoms, inline
            self.pos = pos = self.pos + 1                # self.take(), inline
            self.tok = following = self.toks[pos]
            self.kind = following[0]
            outer = _span(self.file, tok[2], tok[3], tok[4], tok[5])
            node = make.Name(outer, tok[1]) if kind == "NAME" else make.FloatLit(outer, float(tok[1]))
        elif kind in UNARY:
            self.take()
            operand, end = self.factor()
            outer = _span(self.file, tok[2], tok[3], end.end_line, end.end_col)
            return make.Unary(outer, kind, operand), outer
        else:
            node, outer = self.atom()
        if self.kind in TRAILERS:
            return self.trailers(node, outer)
        return node, outer

    def trailers(self, node, outer):
        """The calls, indexing and attributes after an atom `node`, then maybe `** factor`."""
        file = self.file
        line, col = outer.line, outer.col                # where each of the nodes starts
        while True:
            kind = self.kind
            if kind == "(":
                self.pos = pos = self.pos + 1            # self.take(), inline
                self.tok = following = self.toks[pos]
                self.kind = following[0]
                args, kwargs = self.args()
                close = self.expect(")")
                outer = _span(file, line, col, close[4], close[5])
                node = make.Call(outer, node, args, kwargs)
            elif kind == "[":
                self.take()
                subscripts = self.subscripts()
                close = self.expect("]")
                outer = _span(file, line, col, close[4], close[5])
                node = make.Index(outer, node, subscripts)
            elif kind == ".":
                self.take()
                name = self.expect("NAME")
                outer = _span(file, line, col, name[4], name[5])
                node = make.Attribute(outer, node, name[1])
            elif kind == "**":
                self.take()
                exponent, end = self.factor()
                outer = _span(file, line, col, end.end_line, end.end_col)
                return make.Binary(outer, "**", node, exponent), outer
            else:
                return node, outer

    def atom(self):
        """The atoms but names and floats (factor builds those)."""
        tok = self.take()
        kind = tok[0]
        if kind == "INT":
            node = make.IntLit(self.tspan(tok), int_value(tok[1]))
        elif kind == "(":
            return self.parenthesized(tok)
        elif kind == "[":
            elems = []
            while self.kind != "]":
                elems.append(self.expr()[0])
                if self.kind != ",":
                    break
                self.take()
            node = make.ArrayLit(self.span(tok, self.expect("]")), tuple(elems))
        elif kind == "STRING":
            node = make.StrLit(self.tspan(tok), string_value(tok[1], self.tspan(tok)))
        elif kind == "true" or kind == "false":
            node = make.BoolLit(self.tspan(tok), kind == "true")
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
        node = make.TupleLit(self.span(open_tok, self.expect(")")), tuple(elems))
        return node, node.span

    def args(self) -> tuple[tuple, tuple]:
        """Call arguments up to the closing `)`: (positional, keywords)."""
        args, kwargs = [], []
        while self.kind != ")":
            arg, outer = self.expr()
            if self.kind == "=" and type(arg) is ast.Name and outer is arg.span:
                self.take()
                value, end = self.expr()
                if any(k.name == arg.id for k in kwargs):
                    raise GiveUp("a keyword argument repeated")          # (parse.py's E0001)
                kwargs.append(make.Keyword(self.span(outer, end), arg.id, value))
            elif kwargs:
                raise GiveUp("a positional argument after a keyword argument")
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
            return make.EllipsisIndex(self.tspan(self.take()))
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
        return make.Slice(self.span(first, end), start, stop, step)


def _target(expr: ast.Node, outer: Span) -> ast.Node:
    """An assignment target: a name, an indexed postfix or a tuple of targets, not in (other) parentheses."""
    if outer is expr.span:
        if type(expr) is ast.Name:
            return make.NameTarget(expr.span, expr.id)
        if type(expr) is ast.Index:
            return make.IndexTarget(expr.span, expr.base, expr.subscripts)
        if type(expr) is ast.TupleLit:
            return make.TupleTarget(expr.span, tuple(_target(e, e.span) for e in expr.elems))
    raise GiveUp("not an assignment target")


def int_value(literal: str) -> int:
    """An integer literal's value (`42`, `1_000`, `0xff`, `0o17`, `0b1010`). Past 64 bits the exact value does
    not matter (E0211, E0215), and Python refuses int() of more than 4300 digits: 41 digits or more (leading
    zeros and `_` aside) read as 2**128."""
    base = _BASES.get(literal[1:2], 10)
    digits = (literal[2:] if base != 10 else literal).replace("_", "").lstrip("0") or "0"
    return int(digits, base) if len(digits) <= 40 else 2 ** 128


_BASES = dict.fromkeys("xX", 16) | dict.fromkeys("oO", 8) | dict.fromkeys("bB", 2)


# One escape: a backslash and what Python's decoder reads with it (`\x` takes up to 2 hex digits, ...).
_ESCAPE = re.compile(r"\\(?:x[0-9a-fA-F]{0,2}|u[0-9a-fA-F]{0,4}|U[0-9a-fA-F]{0,8}|N\{[^}]*\}?|[0-7]{1,3}|.)",
                     re.DOTALL)


def _unescape(match: re.Match) -> str:
    escape = match.group()
    if not escape[1].isascii():         # (unknown: kept as written, where the codec would see its \u escape)
        return escape
    return escape.encode("ascii", "backslashreplace").decode("unicode_escape")


def string_value(token: str, span: Span) -> str:
    """A string literal's text with its escapes (Python's) decoded: each escape on its own, so that the
    text around it stays as written (`"\\λ"` is `\λ`, as in Python: an unknown escape keeps its backslash)."""
    try:
        text = _ESCAPE.sub(_unescape, token[1:-1])
    except UnicodeDecodeError as err:
        raise BadLiteral(f"invalid escape in a string: {err.reason}", span) from None
    try:
        text.encode("utf-8")            # a lone surrogate (`\ud800`) is no character: no module can hold it
    except UnicodeEncodeError as err:
        raise BadLiteral(f"invalid escape in a string: \\u{ord(text[err.start]):04x} is a lone surrogate, "
                         f"not a character", span) from None
    return text


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
