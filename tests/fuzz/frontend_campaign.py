"""Front-end fuzzing for arrc: random bytes, token soup, mutated programs and odd well-formed programs.

Every case is a file's bytes (or, for `run` cases, a program plus arguments). It goes through
  - `arrc.loads(text)` (str), then lowering of every function whose parameter types are concrete;
  - `arrc.compiler.parse.decode(data)` + `arrc.loads` (bytes);
  - `arrc.cli.main(["check", FILE])`;
  - `run` cases only: calls of the functions with NumPy arguments (specialization, XLA, guards).
The only acceptable outcomes are a module / results, or `arrc.CompileError` (every diagnostic with a code
in `CODES` and, when it has a span, 1-based line/col inside the text), `arrc.ArgumentError`,
`arrc.GuardError`; the CLI exits 0/1/2 with no traceback. Anything else (another exception, a hang,
a crash of the process) is a failure.

Cases run in a separate worker process (a crash or a hang in C code cannot take the campaign down);
each case has a time limit (SIGALRM in the worker, a hard kill from the parent).

    .venv/bin/python tests/fuzz/frontend_campaign.py --seconds 180            # a campaign
    .venv/bin/python tests/fuzz/frontend_campaign.py --cases 300 --seed 0     # a fixed slice
    .venv/bin/python tests/fuzz/frontend_campaign.py --replay DIR/case.arr    # one saved input

Failures are printed with the path of the saved input (under a temporary directory, or `--out DIR`).
"""
from __future__ import annotations

import argparse
import ast as pyast
import io
import os
import pickle
import random
import re
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FILENAME = "fuzz.arr"

# ---------------------------------------------------------------------------------------------------
# corpus
# ---------------------------------------------------------------------------------------------------

SEED_PROGRAMS = [
    "def add(x: f32[n], y: f32[n]) -> f32[n]:\n    return x + y\n",
    "const K: i32 = 4\n\ndef f(x: f32[K, m]) -> f32[m]:\n    return sum(x, axis=0)\n",
    "def f(x: f32[n], steps: i32) -> f32:\n    total = 0\n    for i in range(steps):\n        total += x[i % n]\n"
    "    return total\n",
    "def f(x: f32[n]) -> f32[n]:\n    y = x\n    if n > 2:\n        y[0] = 1.0\n    elif n == 1:\n        y = -y\n"
    "    else:\n        pass\n    return y\n",
    "def g(a: i32, b: i32) -> (i32, i32):\n    while a > 0:\n        a, b = a - 1, b * 2\n    return a, b\n",
    "def main() -> f32:\n    x = [1.0, 2.0, nan, 3.0]\n    print(\"x =\", x)\n    assert all(x == x) or true, \"msg\"\n"
    "    return sum(where(isnan(x), 0, x))\n",
    "def h(x: f64[b, k]) -> f64[b, k]:\n    m = max(x, axis=1, keepdims=true)\n    e = exp(x - m)\n"
    "    return e / sum(e, axis=1, keepdims=true)\n",
    "def s(x: u8[n]) -> (u8[n], i32[n]):\n    return sort(x), argsort(x)\n",
    "def c(x: f32[4]) -> u8[4]:\n    return x.astype(u8) + u8(1) * 2 // 1 % 7\n",
    "def t(x: f32[a, b]) -> f32[b, a]:\n    return transpose(x) if a > 0 else x.T\n",
    "def k(x: f32[2 * n]) -> f32[n, 2]:\n    return reshape(x, (n, -1))\n",
    "def m(a: f32[i, j], b: f32[j, k]) -> f32[i, k]:\n    return einsum(\"ij,jk->ik\", a, b) + a @ b * 0\n",
    "def z() -> f32[3, 3]:\n    return eye(3) + zeros((3, 3), dtype=f32) + full((3, 3), 2.5)\n",
    "def q(x: f32[n], i: i32) -> f32[4]:\n    return dynamic_slice(x, (i,), (4,)) + x[i:i + 4] * 0\n",
    "def b(x: i32[n]) -> i32[n]:\n    return (x & 3) | (x ^ 1) | ~x\n",
    "def w(x: bool[n]) -> i32[3]:\n    return nonzero(x, size=3, fill=-1)\n",
    "def long_line(x: f32) -> f32:\n    return x + \\\n        1.0 + (2.0 +\n               3.0)\n",
]


def _strings_in_python(path: Path) -> list[str]:
    try:
        tree = pyast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, OSError):
        return []
    out = []
    for node in pyast.walk(tree):
        if isinstance(node, pyast.Constant) and isinstance(node.value, str):
            s = node.value
            if "def " in s and "->" in s and "\n" in s and len(s) < 20000:
                out.append(s)
    return out


def load_corpus(full: bool = True) -> list[str]:
    """Valid-ish arr programs to mutate. `full=False`: only files that change rarely (fixed slices)."""
    programs = list(SEED_PROGRAMS)
    files = sorted((ROOT / "examples").rglob("*.arr"))
    if full:
        files += sorted((ROOT / "tests" / "golden").rglob("*.arr"))
    for f in files:
        try:
            programs.append(f.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            pass
    if full:
        for f in sorted((ROOT / "tests").glob("test_*.py")):
            programs.extend(_strings_in_python(f))
        for f in sorted((ROOT / "docs").rglob("*.md")):
            try:
                text = f.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S):
                if "def " in block:
                    programs.append(block)
    seen, unique = set(), []
    for p in programs:
        if p not in seen:
            seen.add(p)
            unique.append(p)
    return unique


# ---------------------------------------------------------------------------------------------------
# generators
# ---------------------------------------------------------------------------------------------------

KEYWORDS = ["def", "return", "if", "elif", "else", "for", "in", "range", "while", "const", "pass", "print",
            "assert", "and", "or", "not", "true", "false", "nan", "inf", "pi"]
DTYPE_NAMES = ["bool", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32", "f64"]
BUILTIN_NAMES = ["abs", "exp", "log", "sqrt", "sum", "mean", "max", "min", "argmax", "where", "zeros", "ones",
                 "full", "arange", "eye", "linspace", "reshape", "transpose", "broadcast_to", "concat", "stack",
                 "expand_dims", "squeeze", "flip", "pad", "tile", "dot", "einsum", "outer", "cumsum", "sort",
                 "argsort", "top_k", "nonzero", "dynamic_slice", "dynamic_update_slice", "softmax", "one_hot",
                 "clip", "bitcast", "isnan", "var", "std", "logsumexp", "matmul", "layer_norm"]
OPERATORS = ["+", "-", "*", "/", "//", "%", "**", "@", "==", "!=", "<", "<=", ">", ">=", "&", "|", "^", "~",
             "=", "+=", "-=", "*=", "/=", "->", ":", ",", ".", "(", ")", "[", "]", "...", ";", "!", "$", "?",
             "`", "{", "}", "\\", "'", '"', "**=", "<<", ">>", "//="]
ATOMS = ["x", "y", "n", "m", "k", "foo", "_", "__x__", "0", "1", "42", "-1", "2.5", "1e-6", ".5", "1.", "1e999",
         "1" + "0" * 400, "18446744073709551616", "18446744073709551615", "9223372036854775808", "2147483648",
         "0x10", "1_000", "1e", "1e+", "00", "0.0e0", '"s"', "'s'", '"unterminated', "'x", '"a\\"b"', '"\\n"',
         "# comment", "é", "λ", "x\u200b", "\u00e9t\u00e9", "Ω1", "ｆ", "x\x00", "\x00", "\x0c", "\r", "\ufeff",
         "\u2028", "\u0085", "\\\n", "\t", "\udcff", "😀"]
VOCAB = KEYWORDS + DTYPE_NAMES + BUILTIN_NAMES + OPERATORS + ATOMS

_TOKEN_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+|\"[^\"\n]*\"|"
                       r"'[^'\n]*'|#[^\n]*|\*\*|//|->|[=!<>]=|[+\-*/]=|\.\.\.|\n|[ ]+|\S")


def token_soup(rng: random.Random) -> str:
    parts = []
    depth = 0
    for _ in range(rng.randint(0, 80)):
        r = rng.random()
        if r < 0.12:
            if rng.random() < 0.7:
                depth = max(0, depth + rng.choice([-1, 0, 1]))
                parts.append("\n" + "    " * depth)
            else:
                parts.append("\n" + " " * rng.randint(0, 13))
        else:
            parts.append(rng.choice(VOCAB))
            parts.append(rng.choice([" ", " ", " ", ""]))
    if rng.random() < 0.5:
        parts.append("\n")
    return "".join(parts)


def random_bytes(rng: random.Random) -> bytes:
    n = rng.choice([0, 1, 2, 5, 20, 100, 400])
    mode = rng.random()
    if mode < 0.3:
        return bytes(rng.randrange(256) for _ in range(n))
    if mode < 0.7:   # mostly printable ASCII with newlines and spaces
        alphabet = b"abcdefxyzn0123456789 ()[]:,.+-*/=<>#\"'\n\n    \t_@%&|^~"
        return bytes(rng.choice(alphabet) for _ in range(n))
    # ASCII plus some invalid UTF-8 sequences
    out = bytearray()
    for _ in range(n):
        r = rng.random()
        if r < 0.1:
            out += rng.choice([b"\xff", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80",
                               b"\xc0\xaf", b"\x00", b"\xef\xbb\xbf"])
        else:
            out.append(rng.choice(b"def x():\n return 1+[]f32 "))
    return bytes(out)


def _lines_keep(text: str) -> list[str]:
    return text.split("\n")


def mutate_text(text: str, rng: random.Random, corpus: list[str]) -> str:
    """One random mutation of `text` (token or line level)."""
    op = rng.randrange(28)
    lines = _lines_keep(text)
    toks = _TOKEN_RE.findall(text) or [text]
    if op >= 24:                                            # syntax-preserving: names, operators, numbers
        kinds = [(lambda t: t[:1].isalpha() or t[:1] == "_", None),
                 (lambda t: t in _BINOPS, _BINOPS),
                 (lambda t: t[:1].isdigit(), ["0", "1", "2", "3", "-1", "7", "100", "0.5", "2.0"]),
                 (lambda t: t in DTYPE_NAMES, DTYPE_NAMES)]
        pred, pool = kinds[op - 24]
        where = [k for k, t in enumerate(toks) if pred(t)]
        if where:
            if pool is None:
                pool = sorted({t for t in toks if pred(t)})
            toks[rng.choice(where)] = rng.choice(pool)
            return "".join(toks)
    if op == 0 and toks:                                    # delete a token
        del toks[rng.randrange(len(toks))]
        return "".join(toks)
    if op == 1 and toks:                                    # duplicate a token
        i = rng.randrange(len(toks))
        toks.insert(i, toks[i])
        return "".join(toks)
    if op == 2 and len(toks) > 1:                           # swap two tokens
        i, j = rng.randrange(len(toks)), rng.randrange(len(toks))
        toks[i], toks[j] = toks[j], toks[i]
        return "".join(toks)
    if op == 3 and toks:                                    # replace a token by a vocabulary word
        toks[rng.randrange(len(toks))] = rng.choice(VOCAB)
        return "".join(toks)
    if op == 4 and toks:                                    # insert a vocabulary word
        toks.insert(rng.randrange(len(toks) + 1), rng.choice(VOCAB) + rng.choice(["", " "]))
        return "".join(toks)
    if op == 5 and len(lines) > 1:                          # delete a line
        del lines[rng.randrange(len(lines))]
        return "\n".join(lines)
    if op == 6:                                             # duplicate a line
        i = rng.randrange(len(lines))
        lines.insert(i, lines[i])
        return "\n".join(lines)
    if op == 7 and len(lines) > 1:                          # swap two lines
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
        return "\n".join(lines)
    if op == 8:                                             # change a line's indentation
        i = rng.randrange(len(lines))
        stripped = lines[i].lstrip(" ")
        lines[i] = " " * max(0, len(lines[i]) - len(stripped) + rng.choice([-4, -1, 1, 2, 4, 8])) + stripped
        return "\n".join(lines)
    if op == 9:                                             # a tab in the indentation or in the line
        i = rng.randrange(len(lines))
        j = rng.randrange(len(lines[i]) + 1)
        lines[i] = lines[i][:j] + "\t" + lines[i][j:]
        return "\n".join(lines)
    if op == 10:                                            # NUL or another control character
        j = rng.randrange(len(text) + 1)
        return text[:j] + rng.choice(["\x00", "\x0b", "\x0c", "\r", "\x1c", "\x85", "\u2028", "\x7f"]) + text[j:]
    if op == 11:                                            # truncate
        return text[: rng.randrange(len(text) + 1)]
    if op == 12:                                            # unbalanced brackets
        j = rng.randrange(len(text) + 1)
        return text[:j] + rng.choice("()[]") * rng.choice([1, 2, 5, 50, 250]) + text[j:]
    if op == 13 and corpus:                                 # splice lines of another program
        other = _lines_keep(rng.choice(corpus))
        a = rng.randrange(len(other))
        b = min(len(other), a + rng.randint(1, 6))
        i = rng.randrange(len(lines) + 1)
        return "\n".join(lines[:i] + other[a:b] + lines[i:])
    if op == 14:                                            # a number becomes a huge or odd literal
        nums = [k for k, t in enumerate(toks) if t[:1].isdigit()]
        if nums:
            toks[rng.choice(nums)] = rng.choice(["1" + "0" * 400, "1e999", "1e-999", "4294967296", "0",
                                                 "18446744073709551616", "-2147483649", "1" * 60, "0.0",
                                                 "1000000000000", "99999999999999999999.5"])
            return "".join(toks)
    if op == 15:                                            # a dtype name becomes another one
        ids = [k for k, t in enumerate(toks) if t in DTYPE_NAMES]
        if ids:
            toks[rng.choice(ids)] = rng.choice(DTYPE_NAMES + ["f128", "i1", "x"])
            return "".join(toks)
    if op == 16:                                            # a name becomes a unicode name
        ids = [k for k, t in enumerate(toks) if t[:1].isalpha()]
        if ids:
            toks[rng.choice(ids)] = rng.choice(["é", "λx", "ｘ", "x\u0301", "Ж", "😀", "\u200bx"])
            return "".join(toks)
    if op == 17:                                            # line endings
        return text.replace("\n", rng.choice(["\r\n", "\r", "\n\n", "\x0c\n", "\u2028"]))
    if op == 18:                                            # a comment in the middle of a line
        i = rng.randrange(len(lines))
        j = rng.randrange(len(lines[i]) + 1)
        lines[i] = lines[i][:j] + "# " + lines[i][j:]
        return "\n".join(lines)
    if op == 19:                                            # a backslash continuation
        i = rng.randrange(len(lines))
        lines[i] = lines[i] + rng.choice(["\\", " \\", "\\ "])
        return "\n".join(lines)
    if op == 20:                                            # a deeply nested expression
        j = rng.randrange(len(text) + 1)
        d = rng.choice([10, 100, 199, 200, 201, 400])
        return text[:j] + "(" * d + "1" + ")" * d + text[j:]
    if op == 21:                                            # a long chain of operators
        j = rng.randrange(len(text) + 1)
        return text[:j] + rng.choice(["+", "*", " and ", "-", "**", " if true else "]).join(
            ["1"] * rng.choice([10, 100, 500])) + text[j:]
    if op == 22:                                            # a huge shape
        return re.sub(r"\[(n|m|k|b)\b", "[" + rng.choice(["1000000000000", "0", "n * n * n * n"]), text, count=1)
    # op 23 and fall-through: replace a random character by a random one
    if text:
        j = rng.randrange(len(text))
        return text[:j] + rng.choice(VOCAB) + text[j + 1:]
    return rng.choice(VOCAB)


_BINOPS = ["+", "-", "*", "/", "//", "%", "**", "@", "==", "!=", "<", "<=", ">", ">=", "&", "|", "^"]


def mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    j = rng.randrange(len(data) + 1)
    return data[:j] + rng.choice([b"\xff", b"\xc3", b"\x80", b"\xed\xa0\x80", b"\x00", b"\xfe\xff", b"\xe2\x82",
                                  b"\xf0\x9f\x98", bytes([rng.randrange(256)])]) + data[j:]


# well-formed but odd programs for lowering and calls --------------------------------------------

PARAM_TYPES = [  # (arr type, dtype, shape) with shape variables bound when arguments are made
    ("f32[n]", "f32", ("n",)), ("f32[0]", "f32", (0,)), ("f32[2, 0]", "f32", (2, 0)), ("i32[3]", "i32", (3,)),
    ("bool[4]", "bool", (4,)), ("u8[5]", "u8", (5,)), ("f64[2, 3]", "f64", (2, 3)), ("f16[3]", "f16", (3,)),
    ("i64[2]", "i64", (2,)), ("f32", "f32", ()), ("i32", "i32", ()), ("bool", "bool", ()),
    ("f32[1, 1, 1, 1, 1, 1, 1, 2]", "f32", (1, 1, 1, 1, 1, 1, 1, 2)), ("f32[a, b]", "f32", ("a", "b")),
    ("i32[n]", "i32", ("n",)), ("bf16[2]", "bf16", (2,)), ("u64[n]", "u64", ("n",)),
]
ODD_ARGS = ["0", "-1", "1", "2", "3", "2.5", "-0.0", "1e999", "1" + "0" * 30, "-2147483649", "nan", "inf", "true",
            "false", '"ij->ji"', '"i,i->"', '"a"', '""', "f32", "u8", "bool", "i64", "(0,)", "(1, -1)", "()",
            "(2, 2)", "(-1,)", "(1000000000000,)", "(0, 0)", "[1, 2]", "[]", "[[1], [2, 3]]", "(1, 2.5)",
            "((1, 2), (3, 4))"]
KWARGS = ["axis", "keepdims", "dtype", "size", "fill", "k", "ddof", "shape", "num", "endpoint", "epsilon",
          "num_classes", "reps", "axes", "fill_value", "constant_values", "start", "stop", "step", "bogus"]
PLAUSIBLE = {
    "axis": ["0", "1", "-1", "2", "(0, 1)", "(0,)", "()", "-9"], "keepdims": ["true", "false"],
    "dtype": ["f32", "u8", "bool", "i64", "f16", "bf16", "f64", "u64"],
    "shape": ["(2, 2)", "(-1,)", "(0,)", "3", "(1, 0)", "()", "(2, -1)", "(-1, -1)", "0"],
    "size": ["0", "1", "3", "-2"], "fill": ["0", "-1", "2.5", "nan"], "k": ["0", "1", "2", "5", "-1"],
    "ddof": ["0", "1", "5"], "num": ["0", "1", "5", "-5"], "N": ["0", "2", "-1"], "M": ["0", "3"],
    "start": ["0", "1", "-1", "2.5", "(0,)", "(1, 0)"], "stop": ["0", "3", "-3"], "step": ["1", "2", "-1", "0"],
    "sizes": ["(0,)", "(1,)", "(4,)", "(1, 1)", "(2, 3)"], "subscripts": ['"i->i"', '"ij->ji"', '"i,i->"', '"ii->"',
                                                                    '"...->"', '"ij,jk->ik"'],
    "reps": ["2", "(2, 1)", "0", "(0,)"], "pad_width": ["1", "(1, 2)", "((1, 0),)", "0", "((1, 1), (0, 2))"],
    "num_classes": ["0", "3"], "epsilon": ["1e-5", "0"], "endpoint": ["true", "false"],
    "axes": ["(1, 0)", "(0,)", "()", "(0, 0)"], "constant_values": ["0", "1.5"], "fill_value": ["0", "nan", "true"],
    "lo": ["0", "-1.5"], "hi": ["1", "0"], "elems": ["1"],
}
SUBSCRIPTS = ["0", "-1", "5", "1:3", "::-1", "...", ":, 0", "..., 0", "0, 0, 0, 0, 0, 0, 0, 0, 0", "::0",
              "1:0", "-100", "2147483648", "True", "0.5", "[0, 1]", "x > 0"]


def _builtins() -> dict:
    try:
        from arrc.compiler.builtins import BUILTINS
        return {k: list(v.params) for k, v in BUILTINS.items() if k[0].isalpha()}
    except Exception:   # noqa: BLE001 - the generator must work without the compiler's internals
        return {b: ["x"] for b in BUILTIN_NAMES}


def odd_program(rng: random.Random) -> tuple[str, list]:
    """A syntactically valid program of random builtin calls on odd types; returns (source, arg specs)."""
    builtins = _builtins()
    params = rng.sample(PARAM_TYPES, rng.randint(1, 3))
    names = [f"p{i}" for i in range(len(params))]
    values = list(names)
    lines = []
    for k in range(rng.choice([1, 1, 2, 3])):
        r = rng.random()

        def arg():
            return rng.choice(values) if rng.random() < 0.7 else rng.choice(ODD_ARGS)
        if r < 0.45:                       # a plausible call: each parameter from its usual kind of value
            name = rng.choice(sorted(builtins))
            pnames = builtins[name][: rng.randint(1, max(1, len(builtins[name])))]
            args = []
            for i, pn in enumerate(pnames):
                if pn == "arrays":
                    v = "(" + ", ".join(rng.choice(values) for _ in range(rng.randint(1, 3))) + ",)"
                else:
                    v = rng.choice(PLAUSIBLE[pn]) if pn in PLAUSIBLE else rng.choice(values)
                args.append(f"{pn}={v}" if i and rng.random() < 0.5 else v)
            for i in range(1, len(args)):    # no positional argument after a keyword
                if "=" in args[i - 1] and "=" not in args[i]:
                    args[i] = f"{pnames[i]}={args[i]}"
            expr = f"{name}({', '.join(args)})"
        elif r < 0.6:
            name = rng.choice(sorted(builtins))
            pnames = builtins[name]
            args = [arg() for _ in range(rng.randint(0, max(1, len(pnames)) + (rng.random() < 0.2)))]
            for _ in range(rng.choice([0, 0, 1, 2])):
                args.append(f"{rng.choice(KWARGS + pnames)}={arg()}")
            expr = f"{name}({', '.join(args)})"
        elif r < 0.8:
            expr = f"{arg()} {rng.choice(['+', '-', '*', '/', '//', '%', '**', '@', '<', '==', '&', '|', '^'])} {arg()}"
        elif r < 0.9:
            expr = f"{rng.choice(values)}[{rng.choice(SUBSCRIPTS)}]"
        else:
            expr = f"{rng.choice(values)}{rng.choice(['.T', '.astype(u8)', '.shape', '.size', '.ndim', '.dtype'])}"
        lines.append(f"    v{k} = {expr}")
        values.append(f"v{k}")
    last = values[-1]
    ret = rng.choice(["f32", "f32", "f32", "f32", "i32", "f64[n]", "f32[0]", "bool"])
    if ret == "f32" and rng.random() < 0.85:
        lines.append(f"    return f32(sum({last}))")
    else:
        lines.append(f"    return {last}")
    if "n" not in " ".join(t for t, _, _ in params) and "[n]" in ret:
        ret = "f32"
    sig = ", ".join(f"{n}: {t}" for n, (t, _, _) in zip(names, params))
    src = f"def f({sig}) -> {ret}:\n" + "\n".join(lines) + "\n"
    sizes = {"n": rng.choice([0, 1, 3]), "a": rng.choice([0, 2]), "b": rng.choice([1, 3])}
    specs = [(dt, tuple(sizes[d] if isinstance(d, str) else d for d in shape)) for _, dt, shape in params]
    return src, specs


def special_cases() -> list[tuple[str, bytes]]:
    """Named inputs of the limits kind: deep nesting, long lines, huge literals, odd bytes."""
    N = 10_000
    fn = "def f(x: f32) -> f32:\n    return "
    cases = [
        ("parens_1e4", fn + "(" * N + "x" + ")" * N + "\n"),
        ("brackets_1e4", fn + "sum(" + "[" * N + "x" + "]" * N + ")\n"),
        ("plus_chain_1e4", fn + "+".join(["x"] * N) + "\n"),
        ("calls_1e4", fn + "abs(" * N + "x" + ")" * N + "\n"),
        ("unary_minus_1e4", fn + "-" * N + "x\n"),
        ("not_1e4", "def f(x: bool) -> bool:\n    return " + "not " * N + "x\n"),
        ("pow_chain_1e4", fn + "**".join(["x"] * N) + "\n"),
        ("cond_chain_1e4", fn + "x if true else " * N + "x\n"),
        ("attr_chain_1e4", fn + "x" + ".T" * N + "\n"),
        ("index_chain_1e4", fn + "x" + "[...]" * N + "\n"),
        ("nested_if_200", "def f(x: f32) -> f32:\n" + "".join("    " * (i + 1) + "if x > 0:\n" for i in range(200))
         + "    " * 201 + "x = x + 1\n    return x\n"),
        ("indent_1e4", "def f(x: f32) -> f32:\n" + "".join(" " * (i + 1) + "if x > 0:\n" for i in range(N))
         + " " * (N + 1) + "pass\n    return x\n"),
        ("long_line_1MB", fn + "x" + " " * 1_000_000 + "\n"),
        ("long_comment_1MB", "#" + "c" * 1_000_000 + "\ndef f() -> i32:\n    return 1\n"),
        ("long_name_1MB", "def f(" + "a" * 1_000_000 + ": f32) -> f32:\n    return 1.0\n"),
        ("long_string_1MB", "def f() -> i32:\n    print(\"" + "s" * 1_000_000 + "\")\n    return 1\n"),
        ("int_10e400", "def f() -> i64:\n    return 1" + "0" * 400 + "\n"),
        ("float_1e999", "def f() -> f32:\n    return 1e999\n"),
        ("float_digits_400", "def f() -> f64:\n    return 1" + "0" * 400 + ".5\n"),
        ("int_digits_1e5", "def f() -> i64:\n    return " + "9" * 100_000 + "\n"),
        ("shape_10e400", "def f(x: f32[1" + "0" * 400 + "]) -> f32:\n    return sum(x)\n"),
        ("empty", ""),
        ("only_newlines", "\n" * 1000),
        ("only_comments", "# a comment\n#another\n   # indented comment\n"),
        ("only_spaces", "    "),
        ("nul_bytes", "\x00" * 10),
        ("nul_in_program", "def f() -> i32:\n    return 1\x00\n"),
        ("tab_indent", "def f() -> i32:\n\treturn 1\n"),
        ("tab_after_spaces", "def f() -> i32:\n    \treturn 1\n"),
        ("unicode_identifier", "def fé(x: f32) -> f32:\n    λ = x\n    return λ\n"),
        ("bom", "\ufeffdef f() -> i32:\n    return 1\n"),
        ("crlf", "def f() -> i32:\r\n    return 1\r\n"),
        ("cr_only", "def f() -> i32:\r    return 1\r"),
        ("form_feed", "def f() -> i32:\n\x0c    return 1\n"),
        ("line_separator", "def f() -> i32:\u2028    return x\n"),
        ("unterminated_string", "def f() -> i32:\n    print(\"abc)\n    return 1\n"),
        ("many_functions_2000", "".join(f"def f{i}(x: f32) -> f32:\n    return x + {i}\n" for i in range(2000))),
        ("many_statements_2000", "def f(x: f32) -> f32:\n" + "".join(f"    x = x * 1.5 + {i}\n" for i in range(2000))
         + "    return x\n"),
        ("dedent_mismatch", "def f(x: f32) -> f32:\n        y = x\n      return y\n"),
        ("backslash_eof", "def f() -> i32:\n    return 1 \\"),
        ("unclosed_paren_eof", "def f() -> i32:\n    return (1 +"),
    ]
    out = [(name, text.encode("utf-8", "surrogatepass")) for name, text in cases]
    out += [("invalid_utf8", b"def f() -> i32:\n    return 1 # \xff\xfe\n"),
            ("invalid_utf8_first", b"\xff"),
            ("lone_surrogate_utf8", b"def f() -> i32:\n    return \xed\xa0\x80\n"),
            ("truncated_utf8", b"def f\xc3() -> i32:\n    return 1\n"),
            ("latin1_file", "def f() -> i32:\n    # café\n    return 1\n".encode("latin-1"))]
    return out


def make_case(seed: int, index: int, corpus: list[str]) -> dict:
    """Case `index` of the campaign with `seed`: the same inputs every time."""
    rng = random.Random(f"{seed}:{index}")
    r = rng.random()
    if r < 0.10:
        return {"kind": "frontend", "gen": "bytes", "data": random_bytes(rng)}
    if r < 0.28:
        return {"kind": "frontend", "gen": "soup", "data": token_soup(rng).encode("utf-8", "surrogatepass")}
    if r < 0.88:
        text = rng.choice(corpus)
        for _ in range(rng.choice([1, 1, 1, 2, 3, 5])):
            text = mutate_text(text, rng, corpus)
        data = text.encode("utf-8", "surrogatepass")
        if rng.random() < 0.15:
            data = mutate_bytes(data, rng)
        return {"kind": "frontend", "gen": "mutation", "data": data}
    src, specs = odd_program(rng)
    return {"kind": "run", "gen": "odd", "data": src.encode("utf-8"), "specs": specs,
            "guards": rng.choice([None, None, "all"])}


# ---------------------------------------------------------------------------------------------------
# the oracle (runs in the worker)
# ---------------------------------------------------------------------------------------------------

class CaseTimeout(BaseException):
    """Raised by SIGALRM inside the worker: the case ran past its time limit."""


class Bad(Exception):
    """The oracle's verdict on an unacceptable outcome: `Bad(category, message)`."""

    def __init__(self, category: str, message: str):
        super().__init__(f"{category}: {message}")
        self.category = category


def _check_span(span, text: str, filename: str, what: str) -> None:
    if span is None:
        return
    lines = text.split("\n")
    for attr in ("line", "col", "end_line", "end_col"):
        if not isinstance(getattr(span, attr), int):
            raise Bad("span-type", f"{what}: span.{attr} is not an int: {span!r}")
    if span.file != filename:
        raise Bad("span-file", f"{what}: span file {span.file!r}, expected {filename!r}")
    if not 1 <= span.line <= len(lines):
        raise Bad("span-line", f"{what}: line {span.line} outside the text (1..{len(lines)} lines)")
    if not 1 <= span.col <= len(lines[span.line - 1]) + 1:
        raise Bad("span-col", f"{what}: col {span.col} outside line {span.line} (length {len(lines[span.line - 1])})")
    if span.end_line < span.line or (span.end_line == span.line and span.end_col < span.col):
        raise Bad("span-order", f"{what}: span ends before it starts: {span!r}")


def check_compile_error(err, text: str, filename: str) -> None:
    from arrc.compiler.diagnostics import CODES, render_json
    if not err.diagnostics:
        raise Bad("no-diagnostics", "CompileError without diagnostics")
    for d in err.diagnostics:
        if d.code not in CODES:
            raise Bad("unknown-code", f"diagnostic code {d.code!r} is not in CODES ({d.message})")
        if d.severity not in ("error", "warning"):
            raise Bad("severity", f"diagnostic {d.code} has severity {d.severity!r}")
        _check_span(d.span, text, filename, f"{d.code} {d.message[:80]!r}")
        for lab in d.labels:
            _check_span(lab.span, text, filename, f"{d.code} secondary label {lab.message[:60]!r}")
    if not any(d.severity == "error" for d in err.diagnostics):
        raise Bad("only-warnings", "CompileError holding only warnings")
    rendered = str(err)
    if not rendered.strip():
        raise Bad("empty-rendering", "CompileError renders as empty text")
    if err.sources.get(filename) is not None and err.sources[filename].text == text:
        lines = text.split("\n")
        for d in err.diagnostics:
            if d.span is not None and d.span.file == filename:
                want = lines[d.span.line - 1]
                want = want[:-1] if want.endswith("\r") else want      # "\r\n" is one line end
                shown = err.sources[filename].line_text(d.span.line)
                if shown != want:
                    raise Bad("shown-line", f"{d.code}: the source line shown for line {d.span.line} is {shown[:60]!r}, "
                              f"the text's line {d.span.line} is {want[:60]!r}")
    render_json(err.diagnostics)


def _lower_concrete(module, text: str, filename: str) -> None:
    import arrc
    for name in module.functions:
        fn = module[name]
        if fn.shape_vars:
            continue
        try:
            fn.lower(*fn.arg_types_for({})).as_text()
        except arrc.CompileError as err:
            check_compile_error(err, text, filename)


def oracle_str(text: str, filename: str = FILENAME) -> str:
    import arrc
    try:
        module = arrc.loads(text, filename=filename)
    except arrc.CompileError as err:
        check_compile_error(err, text, filename)
        return "error"
    for w in module.warnings:
        _check_span(w.span, text, filename, f"warning {w.code}")
    _lower_concrete(module, text, filename)
    return "module"


def ast_difference(fast, ref, path: str = "") -> str | None:
    """Where two ASTs differ (types, any dataclass field, spans included, which equality skips), or None."""
    import dataclasses

    from arrc.compiler import ast
    from arrc.compiler.span import Span
    if type(fast) is not type(ref):
        return f"{path}: {type(fast).__name__} != {type(ref).__name__}"
    if isinstance(fast, tuple):
        if len(fast) != len(ref):
            return f"{path}: {len(fast)} items != {len(ref)}"
        pairs = [(a, b, f"{path}[{i}]") for i, (a, b) in enumerate(zip(fast, ref))]
    elif isinstance(fast, ast.Node):
        pairs = [(getattr(fast, f.name), getattr(ref, f.name), f"{path}.{type(fast).__name__}.{f.name}")
                 for f in dataclasses.fields(fast)]
    elif isinstance(fast, Span):
        same = dataclasses.astuple(fast) == dataclasses.astuple(ref)
        return None if same else f"{path}: {fast!r} != {ref!r}"
    else:
        return None if fast == ref else f"{path}: {fast!r} != {ref!r}"
    for a, b, where in pairs:
        found = ast_difference(a, b, where)
        if found:
            return found
    return None


def oracle_parsers(text: str, filename: str = FILENAME) -> str:
    """compiler/fastparse.py against Lark's parser (the reference): where the fast one accepts, Lark accepts
    and builds the identical AST."""
    from arrc.compiler import fastparse
    from arrc.compiler.diagnostics import CompileError
    from arrc.compiler.parse import _prepare, parse_lark
    from arrc.compiler.span import Source
    source = Source(filename, text)
    try:
        fast = fastparse.parse(_prepare(source, "module"), filename, "module")
    except (fastparse.GiveUp, fastparse.BadLiteral, RecursionError, CompileError):
        return "fast-gave-up"
    try:
        ref = parse_lark(source)
    except CompileError as err:
        raise Bad("parser-accepts", f"the fast parser accepts what Lark rejects ({err.diagnostics[0].code})")
    found = ast_difference(fast, ref)
    if found:
        raise Bad("parser-ast", f"the fast parser's AST differs from Lark's at {found}")
    return "same-ast"


def oracle_bytes(data: bytes, filename: str = FILENAME) -> str:
    import arrc
    from arrc.compiler.parse import decode
    try:
        source = decode(data, filename)
    except arrc.CompileError as err:
        check_compile_error(err, data.decode("utf-8", "replace"), filename)
        return "decode-error"
    try:
        arrc.loads(source.text, filename=filename)
    except arrc.CompileError as err:
        check_compile_error(err, source.text, filename)
        return "error"
    return "module"


def oracle_cli(data: bytes, tmpdir: str) -> str:
    import contextlib
    from arrc.cli import main
    path = os.path.join(tmpdir, FILENAME)
    with open(path, "wb") as f:
        f.write(data)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["check", path])
    text = err.getvalue() + out.getvalue()
    if rc not in (0, 1, 2):
        raise Bad("cli-exit", f"arrc check exited {rc!r}")
    if "Traceback (most recent call last)" in text:
        raise Bad("cli-traceback", "arrc check printed a traceback:\n" + text[-2000:])
    if rc == 1 and "error[" not in text:
        raise Bad("cli-no-error", "arrc check exited 1 without an error diagnostic:\n" + text[-500:])
    return f"rc={rc}"


def _make_arg(dtype: str, shape: tuple, rng):
    import ml_dtypes
    import numpy as np
    np_dtype = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "f32": np.float32, "f64": np.float64,
                "bool": np.bool_}.get(dtype)
    if np_dtype is None:
        np_dtype = np.dtype(("int" if dtype[0] == "i" else "uint") + dtype[1:])
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype[0] in "iu":
        return rng.integers(0, 4, size=shape).astype(np_dtype)
    return rng.standard_normal(shape).astype(np_dtype)


def oracle_run(text: str, specs: list, guards, filename: str = FILENAME) -> str:
    import numpy as np

    import arrc
    try:
        module = arrc.loads(text, filename=filename, guards=guards)
    except arrc.CompileError as err:
        check_compile_error(err, text, filename)
        return "error"
    rng = np.random.default_rng(0)
    args = [_make_arg(dt, shape, rng) for dt, shape in specs]
    outcome = "result"
    for name in module.functions:
        try:
            out = module[name](*args)
            for r in (out if isinstance(out, tuple) else (out,)):
                np.asarray(r)
        except arrc.CompileError as err:
            check_compile_error(err, text, filename)
            outcome = "call-error"
        except (arrc.ArgumentError, arrc.GuardError) as err:
            str(err)
            outcome = type(err).__name__
    return outcome


def run_case(case: dict, tmpdir: str) -> tuple[str, str]:
    """(verdict, detail): verdict "ok" or a failure kind; detail the outcome or the traceback tail."""
    data = case["data"]
    mode = "?"
    try:
        if case["kind"] == "run":
            mode = "run"
            return "ok", oracle_run(data.decode("utf-8"), case["specs"], case.get("guards"))
        outcomes = []
        mode = "str"
        text = data.decode("utf-8", "surrogateescape")
        outcomes.append(oracle_str(text))
        mode = "parsers"
        outcomes.append(oracle_parsers(text))
        mode = "bytes"
        outcomes.append(oracle_bytes(data))
        mode = "cli"
        outcomes.append(oracle_cli(data, tmpdir))
        return "ok", "/".join(outcomes)
    except CaseTimeout:
        return "hang", f"[{mode}] ran past the time limit:\n" + _tb_tail()
    except Bad as bad:
        return "bad-diagnostic", f"[{mode}] {bad}\n" + _tb_tail()
    except RecursionError:
        return "exception", f"[{mode}] RecursionError\n" + _tb_tail()
    except BaseException as exc:       # noqa: BLE001 - anything else is the bug we are looking for
        return "exception", f"[{mode}] {type(exc).__module__}.{type(exc).__name__}: {str(exc)[:500]}\n" + _tb_tail()


def _tb_tail(n: int = 14) -> str:
    lines = traceback.format_exc().rstrip().splitlines()
    if len(lines) > n:
        lines = ["  ..."] + lines[-n:]
    return "\n".join(lines)


def failure_signature(detail: str) -> str:
    """Exception type plus the innermost arrc frame (or the oracle's category): groups failures of one bug."""
    head = detail.splitlines()[0] if detail else ""
    m = re.match(r"(\[\w+\]) ([a-z-]+): ", head)
    if m:                                   # a Bad verdict: "[mode] category: ..."
        return f"{m.group(1)} {m.group(2)}"
    head = re.sub(r"'[^']*'|\"[^\"]*\"|\d+", "_", head)[:120]
    frames = re.findall(r'File "([^"]+)", line (\d+)', detail)
    ours = [f"{Path(f).name}:{ln}" for f, ln in frames if "/site-packages/" not in f and "frontend_campaign" not in f]
    return head + (" @ " + ours[-1] if ours else "")


# ---------------------------------------------------------------------------------------------------
# worker process and driver
# ---------------------------------------------------------------------------------------------------

def _send(stream, obj) -> None:
    blob = pickle.dumps(obj)
    stream.write(struct.pack("<Q", len(blob)) + blob)
    stream.flush()


def _recv_exact(fd: int, n: int, deadline: float | None) -> bytes:
    buf = b""
    while len(buf) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                raise TimeoutError
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


def _recv(fd: int, deadline: float | None = None):
    (n,) = struct.unpack("<Q", _recv_exact(fd, 8, deadline))
    return pickle.loads(_recv_exact(fd, n, deadline))


def worker_main() -> None:
    """Read cases from stdin, answer on the original stdout; fd 1 goes to /dev/null for the cases."""
    proto_out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    import arrc  # noqa: F401 - import once, before the first case's clock starts
    import arrc.cli  # noqa: F401

    def on_alarm(signum, frame):
        raise CaseTimeout()
    signal.signal(signal.SIGALRM, on_alarm)
    _send(proto_out, "ready")
    fd = sys.stdin.fileno()
    with tempfile.TemporaryDirectory(prefix="arrc-fuzz-worker-") as tmpdir:
        while True:
            try:
                msg = _recv(fd)
            except EOFError:
                return
            case, limit = msg
            signal.setitimer(signal.ITIMER_REAL, limit)
            try:
                verdict = run_case(case, tmpdir)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            _send(proto_out, verdict)


class Worker:
    """A worker process; `run(case)` returns (verdict, detail) and restarts the worker after a crash/hang."""

    def __init__(self):
        self.proc = None
        self.errlog = None

    def start(self) -> None:
        self.errlog = tempfile.TemporaryFile()
        env = dict(os.environ, PYTHONFAULTHANDLER="1", TF_CPP_MIN_LOG_LEVEL="3")
        env.setdefault("ARRC_NO_CACHE", "1")      # thousands of throw-away executables: keep them off disk
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errlog,
                                     cwd=str(ROOT), env=env)
        _recv(self.proc.stdout.fileno(), time.monotonic() + 300)

    def stop(self) -> None:
        if self.proc is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def _stderr_tail(self) -> str:
        try:
            self.errlog.seek(0)
            return self.errlog.read().decode("utf-8", "replace")[-3000:]
        except (OSError, ValueError):
            return ""

    def run(self, case: dict, limit: float) -> tuple[str, str]:
        if self.proc is None:
            self.start()
        try:
            _send(self.proc.stdin, (case, limit))
            verdict = _recv(self.proc.stdout.fileno(), time.monotonic() + limit + 30)
            if verdict[0] == "hang":      # interrupted mid-compilation: start the next case in a fresh worker
                self.proc.kill()
                self.proc.wait()
                self.proc = None
            return verdict
        except TimeoutError:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
            return "hang", f"no answer within {limit + 30:.0f} s (stuck outside Python?); worker killed"
        except (EOFError, BrokenPipeError, OSError):
            code = self.proc.wait()
            tail = self._stderr_tail()
            self.proc = None
            return "crash", f"worker died with exit code {code}\n{tail}"


def describe_case(case: dict) -> str:
    extra = f" specs={case['specs']} guards={case.get('guards')}" if case["kind"] == "run" else ""
    return f"{case['kind']}/{case['gen']}{extra}"


def save_failure(outdir: Path, label: str, case: dict, verdict: str, detail: str) -> Path:
    outdir.mkdir(parents=True, exist_ok=True)
    path = outdir / f"{label}.arr"
    path.write_bytes(case["data"])
    (outdir / f"{label}.txt").write_text(f"{verdict}: {describe_case(case)}\n\n{detail}\n", encoding="utf-8")
    if case["kind"] == "run":
        (outdir / f"{label}.case.pickle").write_bytes(pickle.dumps(case))
    return path


def campaign(seed: int, cases: int | None, seconds: float | None, limit: float, outdir: Path,
             full_corpus: bool = True, specials: bool = True, quiet: bool = False) -> dict:
    """Run a campaign; returns counts and the failures (each with its saved input)."""
    corpus = load_corpus(full=full_corpus)
    worker = Worker()
    worker.start()
    start = time.monotonic()
    counts: dict[str, int] = {}
    failures: list[dict] = []
    signatures: dict[str, int] = {}
    ran = 0
    todo = []
    if specials:
        todo = [("special-" + name, {"kind": "frontend", "gen": "special:" + name, "data": data})
                for name, data in special_cases()]
    index = 0
    try:
        while True:
            if cases is not None and ran >= cases + (len(special_cases()) if specials else 0):
                break
            if seconds is not None and time.monotonic() - start >= seconds:
                break
            if todo:
                label, case = todo.pop(0)
                case_limit = max(limit, 60.0)
            else:
                label, case = f"seed{seed}-case{index}", make_case(seed, index, corpus)
                index += 1
                case_limit = limit
            verdict, detail = worker.run(case, case_limit)
            ran += 1
            key = f"{case['gen'].split(':')[0]}:{'ok' if verdict == 'ok' else verdict}"
            counts[key] = counts.get(key, 0) + 1
            if verdict != "ok":
                sig = verdict + " " + failure_signature(detail)
                signatures[sig] = signatures.get(sig, 0) + 1
                path = save_failure(outdir, label, case, verdict, detail)
                failures.append({"label": label, "verdict": verdict, "detail": detail, "path": str(path),
                                 "signature": sig, "case": describe_case(case)})
                if not quiet and signatures[sig] <= 3:
                    print(f"FAIL {label} [{verdict}] {describe_case(case)} -> {path}\n"
                          f"    {detail.strip().splitlines()[0][:300]}\n    signature: {sig}", flush=True)
            if not quiet and ran % 200 == 0:
                print(f"... {ran} cases, {len(failures)} failures, {time.monotonic() - start:.0f} s", flush=True)
    finally:
        worker.stop()
    return {"ran": ran, "counts": counts, "failures": failures, "signatures": signatures,
            "seconds": time.monotonic() - start}


def replay(path: str, limit: float) -> int:
    p = Path(path)
    pickled = p.with_suffix(".case.pickle")
    if pickled.exists():
        case = pickle.loads(pickled.read_bytes())
    else:
        case = {"kind": "frontend", "gen": "replay", "data": p.read_bytes()}
    worker = Worker()
    try:
        verdict, detail = worker.run(case, limit)
    finally:
        worker.stop()
    print(f"{verdict}: {detail}")
    return 0 if verdict == "ok" else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, help="run for this long (default: 60 unless --cases)")
    parser.add_argument("--cases", type=int, help="run this many generated cases")
    parser.add_argument("--seed", type=int, help="campaign seed (default: random, printed)")
    parser.add_argument("--limit", type=float, default=20.0, help="time limit per case, seconds")
    parser.add_argument("--out", help="directory for failing inputs (default: a new temporary directory)")
    parser.add_argument("--no-specials", action="store_true", help="skip the named deep/long/huge inputs")
    parser.add_argument("--replay", metavar="FILE", help="run one saved input and print the verdict")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker_main()
        return 0
    if args.replay:
        return replay(args.replay, args.limit)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2 ** 31)
    seconds = args.seconds if args.seconds is not None or args.cases is not None else 60.0
    outdir = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="arrc-fuzz-"))
    print(f"arrc front-end fuzz campaign: seed {seed}, failing inputs under {outdir}", flush=True)
    result = campaign(seed, args.cases, seconds, args.limit, outdir, specials=not args.no_specials)
    print(f"\n{result['ran']} cases in {result['seconds']:.0f} s; outcomes:")
    for key in sorted(result["counts"]):
        print(f"  {key:28s} {result['counts'][key]}")
    if result["failures"]:
        print(f"\n{len(result['failures'])} failures, {len(result['signatures'])} distinct:")
        for sig, n in sorted(result["signatures"].items(), key=lambda kv: -kv[1]):
            first = next(f for f in result["failures"] if f["signature"] == sig)
            print(f"  {n:5d} x {sig}\n          e.g. {first['path']}")
        return 1
    print("no failures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
