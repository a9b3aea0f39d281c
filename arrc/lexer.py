"""A Pygments lexer for arr, for the REPL's highlighting, the docs and highlighted diagnostics.

>>> from pygments import lex
>>> [(str(t), v) for t, v in lex("def f(x: f32) -> f32:", ArrLexer())][:3]
[('Token.Keyword', 'def'), ('Token.Text.Whitespace', ' '), ('Token.Name.Function', 'f')]

Builtin names come from the compiler's operation table (`arrc.compiler.builtins.BUILTINS`), so the
lexer never disagrees with the compiler about what is a builtin.
"""
from __future__ import annotations

import re

from pygments.lexer import RegexLexer, bygroups, words
from pygments.token import Comment, Keyword, Name, Number, Operator, Punctuation, String, Text, Token, Whitespace

from arrc.compiler.builtins import BUILTINS
from arrc.compiler.check import NAMED_CONSTANTS
from arrc.compiler.fastparse import KEYWORDS as RESERVED
from arrc.compiler.types import DTYPES

WORD_OPERATORS = ("and", "or", "not")
CONSTANTS = ("true", "false", *NAMED_CONSTANTS)
KEYWORDS = tuple(sorted(RESERVED - set(WORD_OPERATORS) - set(CONSTANTS)))     # the statement words
DTYPE_NAMES = tuple(DTYPES)
BUILTIN_NAMES = tuple(sorted(n for n in BUILTINS if n[:1].isalpha()))
ATTRIBUTES = tuple(sorted(n[1:] for n in BUILTINS if n.startswith(".")))

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_DIGITS = r"[0-9](_?[0-9])*"                  # `1_000_000`, as grammar/arr.lark's DIGITS
_FLOAT = rf"({_DIGITS}\.({_DIGITS})?|\.{_DIGITS})([eE][+-]?{_DIGITS})?|{_DIGITS}[eE][+-]?{_DIGITS}"


class ArrLexer(RegexLexer):
    """Lexer for arr source (`.arr` files)."""
    name = "arr"
    aliases = ["arr"]
    filenames = ["*.arr"]
    mimetypes = ["text/x-arr"]
    url = "https://github.com/"   # the project page; Pygments asks every lexer for one

    tokens = {
        "root": [
            (r"\n", Whitespace),
            (r"[^\S\n]+", Whitespace),
            (r"#.*?$", Comment.Single),
            (r'"[^"\\\n]*(\\.[^"\\\n]*)*"', String.Double),
            (r"'[^'\\\n]*(\\.[^'\\\n]*)*'", String.Single),
            (r"(def)(\s+)(" + _IDENT + ")", bygroups(Keyword, Whitespace, Name.Function)),
            (r"(const)(\s+)(" + _IDENT + ")", bygroups(Keyword.Declaration, Whitespace, Name.Constant)),
            (words(KEYWORDS, suffix=r"\b"), Keyword),
            (words(WORD_OPERATORS, suffix=r"\b"), Operator.Word),
            (words(CONSTANTS, suffix=r"\b"), Keyword.Constant),
            (words(DTYPE_NAMES, suffix=r"\b"), Keyword.Type),
            (r"(\.)(" + _IDENT + ")", bygroups(Punctuation, Name.Attribute)),
            (words(BUILTIN_NAMES, prefix=r"(?<![\w.])", suffix=r"\b"), Name.Builtin),
            (r"0[xX](_?[0-9a-fA-F])+", Number.Hex),
            (r"0[oO](_?[0-7])+", Number.Oct),
            (r"0[bB](_?[01])+", Number.Bin),
            (_FLOAT, Number.Float),
            (_DIGITS, Number.Integer),
            (r"->", Punctuation),
            (r"\*\*=?|//=?|<<=?|>>=?|[-+*/%@&|^~]=?|==|!=|<=|>=|[<>=]", Operator),
            (r"\.\.\.|[()\[\]{},:;.]", Punctuation),
            (_IDENT, Name),
            (r".", Text),
        ],
    }


class ArrReplLexer(ArrLexer):
    """arr plus the REPL's meta-commands (`:help`, `:type EXPR`, ...) at the start of a cell."""
    name = "arr-repl"
    aliases = ["arr-repl", "arrrepl"]
    filenames = []
    mimetypes = []

    tokens = {
        "root": [
            (r"\A(\s*)(:[A-Za-z]+)", bygroups(Whitespace, Keyword.Pseudo)),
            *ArrLexer.tokens["root"],
        ],
    }


# ---- ANSI highlighting (terminal output: source snippets and rendered diagnostics) ----------------

_RESET = "\x1b[0m"
_COLORS = [                          # most specific token type first
    (Comment, "\x1b[90m"),
    (String, "\x1b[32m"),
    (Keyword.Type, "\x1b[36m"),
    (Keyword.Constant, "\x1b[35m"),
    (Keyword.Pseudo, "\x1b[1;34m"),
    (Keyword, "\x1b[1;34m"),
    (Operator.Word, "\x1b[1;34m"),
    (Name.Function, "\x1b[33m"),
    (Name.Builtin, "\x1b[36m"),
    (Number, "\x1b[35m"),
]


def _color(ttype) -> str:
    for base, code in _COLORS:
        if ttype in base:
            return code
    return ""


def highlight(source: str) -> str:
    """`source` with ANSI colours for a terminal (one line or many; line breaks are kept as they are)."""
    out = []
    for _, ttype, value in ArrLexer().get_tokens_unprocessed(source):
        code = _color(ttype)
        out.append(f"{code}{value}{_RESET}" if code and value.strip() else value)
    return "".join(out)


_HEADER = re.compile(r"^(error|warning)(\[[A-Z][0-9]{4}\])?(:.*)$")
_SNIPPET = re.compile(r"^(\s*\d+ \| )(.*)$")
_MARKS = re.compile(r"^(\s* \| )(\s*)([\^\-]+)(.*)$")
_ARROW = re.compile(r"^(\s*(?:-->|:::) )(.*)$")
_NOTE = re.compile(r"^(\s*= )(note|help)(:.*)$")


def colorize_diagnostics(text: str) -> str:
    """Rendered diagnostics (rustc-style text) with ANSI colours: header, location, highlighted source
    lines, carets, notes. The text is otherwise unchanged, so it reads the same without colours."""
    out = []
    for line in text.split("\n"):
        m = _HEADER.match(line)
        if m:
            color = "\x1b[1;31m" if m.group(1) == "error" else "\x1b[1;33m"
            out.append(f"{color}{m.group(1)}{m.group(2) or ''}{_RESET}\x1b[1m{m.group(3)}{_RESET}")
            continue
        m = _ARROW.match(line)
        if m:
            out.append(f"\x1b[34m{m.group(1)}{_RESET}{m.group(2)}")
            continue
        m = _SNIPPET.match(line)
        if m:
            out.append(f"\x1b[34m{m.group(1)}{_RESET}{highlight(m.group(2))}")
            continue
        m = _MARKS.match(line)
        if m:
            color = "\x1b[1;31m" if m.group(3).startswith("^") else "\x1b[1;34m"
            out.append(f"\x1b[34m{m.group(1)}{_RESET}{m.group(2)}{color}{m.group(3)}{m.group(4)}{_RESET}")
            continue
        m = _NOTE.match(line)
        if m:
            out.append(f"\x1b[34m{m.group(1)}{_RESET}\x1b[1m{m.group(2)}{_RESET}{m.group(3)}")
            continue
        out.append(line)
    return "\n".join(out)


__all__ = ["ArrLexer", "ArrReplLexer", "highlight", "colorize_diagnostics", "KEYWORDS", "DTYPE_NAMES",
           "BUILTIN_NAMES", "CONSTANTS", "ATTRIBUTES", "Token"]
