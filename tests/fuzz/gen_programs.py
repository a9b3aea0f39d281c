"""Random well-typed arr programs, built from an intermediate representation (IR).

A generator draws every decision from a *chooser*: `RandomChooser(seed)` (fast, reproducible; used by the
fixed-seed slice and the campaign), `ReplayChooser(choices)` (replays a recorded decision list, which is how
`harness.shrink` minimizes a failing program), or hypothesis (`cases()` is a hypothesis strategy). The same
decisions produce

- the IR (`Program`: functions of typed statements and expressions),
- its arr text (`Program.source()`, printed from the IR, with Python precedence and minimal parentheses),
- NumPy arguments for the entry function,

and `fuzz.reference` evaluates the IR op by op with NumPy (never the arr text) to get the expected results.

Types follow LANGUAGE.md and docs/language.md: JAX's promotion lattice (`jax.numpy.promote_types` with x64)
with arr's 32-bit defaults for weak literals and integer `/`, shape variables compared as polynomials,
broadcasting only of equal dimensions or 1. Shape variables are bound to concrete values >= 2 (so `x[1]`,
`x[1:]`, `x[-2]` are always valid) and are compared symbolically: two variables never unify.

Known compiler bugs (`KNOWN_BUGS`) are avoided by default so the fixed-seed slice passes; the campaign's
`--include-known-bugs` turns them back on. Each has an xfail regression test in tests/test_differential.py.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from functools import lru_cache

import ml_dtypes
import numpy as np

# ---------------------------------------------------------------------------------------------------------
# dtypes
DTYPES = ["bool", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32", "f64"]
FLOATS = ["f16", "bf16", "f32", "f64"]
SIGNED = ["i8", "i16", "i32", "i64"]
UNSIGNED = ["u8", "u16", "u32", "u64"]
INTS = SIGNED + UNSIGNED
NP = {"bool": np.dtype(np.bool_), "i8": np.dtype(np.int8), "i16": np.dtype(np.int16), "i32": np.dtype(np.int32),
      "i64": np.dtype(np.int64), "u8": np.dtype(np.uint8), "u16": np.dtype(np.uint16),
      "u32": np.dtype(np.uint32), "u64": np.dtype(np.uint64), "f16": np.dtype(np.float16),
      "bf16": np.dtype(ml_dtypes.bfloat16), "f32": np.dtype(np.float32), "f64": np.dtype(np.float64)}
BITS = {"bool": 8, "i8": 8, "i16": 16, "i32": 32, "i64": 64, "u8": 8, "u16": 16, "u32": 32, "u64": 64,
        "f16": 16, "bf16": 16, "f32": 32, "f64": 64}
_BY_NP = {v: k for k, v in NP.items()}


def dtype_name(np_dtype) -> str:
    return _BY_NP[np.dtype(np_dtype)]


def is_float(d: str) -> bool:
    return d in FLOATS


def is_int(d: str) -> bool:
    return d in INTS


def is_bool(d: str) -> bool:
    return d == "bool"


def int_range(d: str) -> tuple[int, int]:
    if d == "bool":
        return 0, 1
    if d in UNSIGNED:
        return 0, 2 ** BITS[d] - 1
    return -(2 ** (BITS[d] - 1)), 2 ** (BITS[d] - 1) - 1


@lru_cache(maxsize=None)
def promote_strong(a: str, b: str) -> str:
    """JAX's lattice for two strongly typed dtypes (jax.numpy.promote_types, x64 on)."""
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    return dtype_name(jnp.promote_types(NP[a], NP[b]))


def promote(types: list["Ty"]) -> tuple[str, bool]:
    """The dtype and weakness of an n-ary elementwise operation (arr's rules, docs/language.md "Promotion").

    Strong dtypes join in JAX's lattice; a weak int literal takes the strong dtype (bool -> i32); a weak float
    literal takes a strong float dtype, else f32 -- or f64 when a strong 64-bit value takes part.
    """
    strong = [t.dtype for t in types if not t.weak]
    weak = [t.dtype for t in types if t.weak]
    if not strong:
        return ("f32" if any(is_float(w) for w in weak) else "i32"), True
    res = strong[0]
    for d in strong[1:]:
        res = promote_strong(res, d)
    if any(is_float(w) for w in weak) and not is_float(res):
        res = "f64" if any(BITS[d] == 64 and d != "bool" for d in strong) else "f32"
    elif weak and res == "bool":
        res = "i32"
    return res, False


def true_divide_dtype(d: str) -> str:
    return d if is_float(d) else ("f64" if BITS[d] == 64 and d != "bool" else "f32")


def float_dtype_for(d: str) -> str:
    return true_divide_dtype(d)


def accumulator_dtype(d: str) -> str:
    """sum/prod/cumsum/cumprod of bool and narrow integers accumulate in 32 bits (docs: Promotion)."""
    if d == "bool":
        return "i32"
    if d in ("i8", "i16"):
        return "i32"
    if d in ("u8", "u16"):
        return "u32"
    return d


# ---------------------------------------------------------------------------------------------------------
# dimensions: integer polynomials over shape variables
class Dim:
    __slots__ = ("terms",)

    def __init__(self, terms: dict):
        self.terms = {m: c for m, c in terms.items() if c != 0}

    @staticmethod
    def of(v) -> "Dim":
        if isinstance(v, Dim):
            return v
        if isinstance(v, str):
            return Dim({(v,): 1})
        return Dim({(): int(v)})

    @property
    def is_const(self) -> bool:
        return all(m == () for m in self.terms)

    @property
    def value(self) -> int:
        return self.terms.get((), 0)

    @property
    def variables(self) -> set:
        return {v for m in self.terms for v in m}

    def __add__(self, o):
        o = Dim.of(o)
        t = dict(self.terms)
        for m, c in o.terms.items():
            t[m] = t.get(m, 0) + c
        return Dim(t)

    __radd__ = __add__

    def __neg__(self):
        return Dim({m: -c for m, c in self.terms.items()})

    def __sub__(self, o):
        return self + (-Dim.of(o))

    def __mul__(self, o):
        o = Dim.of(o)
        t: dict = {}
        for m1, c1 in self.terms.items():
            for m2, c2 in o.terms.items():
                m = tuple(sorted(m1 + m2))
                t[m] = t.get(m, 0) + c1 * c2
        return Dim(t)

    __rmul__ = __mul__

    def __eq__(self, o):
        if isinstance(o, int):
            return self.is_const and self.value == o
        return isinstance(o, Dim) and self.terms == o.terms

    def __hash__(self):
        return hash(frozenset(self.terms.items()))

    def subs(self, env: dict) -> "Dim":
        out = Dim({})
        for m, c in self.terms.items():
            term = Dim.of(c)
            for v in m:
                term = term * Dim.of(env[v]) if v in env else term * Dim.of(v)
            out = out + term
        return out

    def eval(self, env: dict) -> int:
        total = 0
        for m, c in self.terms.items():
            p = c
            for v in m:
                p *= env[v]
            total += p
        return total

    def min_value(self) -> int:
        """The smallest value over shape variables >= 2 (all our dims are increasing in each variable)."""
        return self.eval({v: 2 for v in self.variables})

    def __str__(self):
        if not self.terms:
            return "0"
        parts = []
        for m, c in sorted(self.terms.items(), key=lambda mc: (-len(mc[0]), mc[0])):
            body = " * ".join(m)
            if not m:
                text = str(abs(c))
            elif abs(c) == 1:
                text = body
            else:
                text = f"{abs(c)} * {body}"
            if not parts:
                parts.append(("-" if c < 0 else "") + text)
            else:
                parts.append(("- " if c < 0 else "+ ") + text)
        return " ".join(parts)

    __repr__ = __str__


ONE = Dim.of(1)


@dataclass(frozen=True)
class Ty:
    dtype: str
    shape: tuple = ()           # of Dim
    weak: bool = False

    @property
    def rank(self) -> int:
        return len(self.shape)

    def text(self) -> str:
        if not self.shape:
            return self.dtype
        return f"{self.dtype}[{', '.join(str(d) for d in self.shape)}]"

    def strong(self) -> "Ty":
        return Ty(self.dtype, self.shape, False)

    def with_dtype(self, d: str) -> "Ty":
        return Ty(d, self.shape, False)

    def with_shape(self, s) -> "Ty":
        return Ty(self.dtype, tuple(s), False)

    def subs(self, env: dict) -> "Ty":
        return Ty(self.dtype, tuple(d.subs(env) for d in self.shape), self.weak)

    def min_size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d.min_value()
        return n


def broadcast(a: tuple, b: tuple):
    """NumPy broadcasting of symbolic shapes (equal dims or 1), None if they do not broadcast."""
    ra, rb = a[::-1], b[::-1]
    out = []
    for i in range(max(len(ra), len(rb))):
        da = ra[i] if i < len(ra) else ONE
        db = rb[i] if i < len(rb) else ONE
        if da == db or db == 1:
            out.append(da)
        elif da == 1:
            out.append(db)
        else:
            return None
    return tuple(out[::-1])


def broadcasts_into(small: tuple, big: tuple) -> bool:
    return broadcast(small, big) == tuple(big)


def shape_tuple_text(shape) -> str:
    if len(shape) == 1:
        return f"({shape[0]},)"
    return "(" + ", ".join(str(d) for d in shape) + ")"


# ---------------------------------------------------------------------------------------------------------
# IR
class E:
    ty: Ty


@dataclass(eq=False)
class Var(E):
    name: str
    ty: Ty


@dataclass(eq=False)
class Lit(E):
    value: object          # python int / float / bool
    text: str
    ty: Ty


@dataclass(eq=False)
class DimVal(E):
    """A compile-time integer from shapes: `n`, `x.shape[1]`, `x.size`, `x.ndim` (weak i32)."""
    dim: Dim
    text: str
    ty: Ty


@dataclass(eq=False)
class ArrLit(E):
    """An array literal of numbers, `[1.0, 2.5]` (weakly typed, full precision until it takes a dtype)."""
    values: list
    text: str
    ty: Ty


@dataclass(eq=False)
class Op(E):
    op: str
    args: list
    ty: Ty
    attrs: dict = field(default_factory=dict)


@dataclass(eq=False)
class Call(E):
    fn: str
    args: list            # E
    kwnames: list         # None for positional, or the parameter name
    ty: object            # Ty, or a tuple of Ty for several results
    bind: dict = field(default_factory=dict)    # callee shape variable -> caller Dim


@dataclass(eq=False)
class Assign:
    name: str
    expr: E


@dataclass(eq=False)
class AugAssign:
    name: str
    op: str               # "+", "-", "*", "/"
    expr: E
    ty: Ty                # type of the variable


@dataclass(eq=False)
class TupleAssign:
    names: list
    call: E               # a Call or Op of several results, or an Op("tuple", [e1, e2]) (`a, b = b, a + b`)


@dataclass(eq=False)
class IndexSet:
    name: str
    subs: list
    expr: E
    aug: str | None
    ty: Ty                # type of the variable (unchanged)
    region: tuple         # shape of the indexed region


@dataclass(eq=False)
class For:
    var: str
    var_ty: Ty
    bounds: list          # 1..3 E
    body: list


@dataclass(eq=False)
class While:
    counter: str
    limit: E
    body: list            # the counter increment is printed last


@dataclass(eq=False)
class Effect:
    """`print("@P", e, ...)` (counted in the output) or `assert cond, "message"`."""
    kind: str             # "print" | "assert"
    args: list


@dataclass(eq=False)
class If:
    cond: E
    then: list
    orelse: list          # a single nested If is printed as `elif`


@dataclass
class Function:
    name: str
    params: list          # [(name, Ty)]
    body: list
    results: list         # [E]
    result_types: list    # [Ty]
    shape_vars: list

    def signature(self) -> str:
        ps = ", ".join(f"{n}: {t.text()}" for n, t in self.params)
        rs = self.result_types[0].text() if len(self.result_types) == 1 else \
            "(" + ", ".join(t.text() for t in self.result_types) + ")"
        return f"def {self.name}({ps}) -> {rs}:"


@dataclass
class Program:
    functions: list       # Function, callees first
    entry: str
    consts: list = field(default_factory=list)      # [(name, Ty, text, value)]
    skip_guards: bool = False                       # the guard check would hit a known bug
    avoid: frozenset = frozenset()                  # known bugs the reference must not count (values it can't
                                                    # steer away from in the generator)

    def function(self, name: str) -> Function:
        return next(f for f in self.functions if f.name == name)

    def source(self) -> str:
        head = "".join(f"const {n}: {t.text()} = {text}\n" for n, t, text, _ in self.consts)
        return head + ("\n" if head else "") + "\n".join(print_function(f) for f in self.functions)


@dataclass
class Case:
    program: Program
    args: list            # NumPy arrays (0-d for scalars), in the entry's parameter order
    shape_env: dict       # the entry's shape variables -> ints
    label: str = ""

    @property
    def source(self) -> str:
        return self.program.source()

    @property
    def entry(self) -> str:
        return self.program.entry

    def describe_args(self) -> str:
        lines = []
        for (name, t), a in zip(self.program.function(self.entry).params, self.args):
            lines.append(f"  {name}: {t.text()} = {np.array2string(np.asarray(a), threshold=60, max_line_width=200)}")
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------
# printing (Python precedence, minimal parentheses, no chained comparisons)
BINOPS = {"add": ("+", 10), "sub": ("-", 10), "mul": ("*", 11), "truediv": ("/", 11), "floordiv": ("//", 11),
          "mod": ("%", 11), "pow": ("**", 13), "matmul": ("@", 11), "and_b": ("&", 8), "xor_b": ("^", 7),
          "or_b": ("|", 6), "land": ("and", 3), "lor": ("or", 2),
          "eq": ("==", 5), "ne": ("!=", 5), "lt": ("<", 5), "le": ("<=", 5), "gt": (">", 5), "ge": (">=", 5)}
COMPARE_OPS = ["eq", "ne", "lt", "le", "gt", "ge"]
PRIMARY = 14


def _paren(text_prec, need: int) -> str:
    text, prec = text_prec
    return text if prec >= need else f"({text})"


def print_expr(e: E) -> tuple[str, int]:
    if isinstance(e, Var):
        return e.name, PRIMARY
    if isinstance(e, Lit):          # (a literal is never a bare receiver: `(2).astype(f16)`)
        return e.text, (12 if e.text.startswith("-") else PRIMARY - 1)
    if isinstance(e, DimVal):
        return e.text, PRIMARY
    if isinstance(e, ArrLit):
        return e.text, PRIMARY - 1
    if isinstance(e, Call):
        parts = []
        for a, kw in zip(e.args, e.kwnames):
            parts.append(f"{kw}={expr_text(a)}" if kw else expr_text(a))
        return f"{e.fn}({', '.join(parts)})", PRIMARY
    assert isinstance(e, Op), e
    op, args, at = e.op, e.args, e.attrs
    if op in BINOPS:
        sym, p = BINOPS[op]
        if op in COMPARE_OPS:
            return f"{_paren(print_expr(args[0]), p + 1)} {sym} {_paren(print_expr(args[1]), p + 1)}", p
        if op == "pow":
            return f"{_paren(print_expr(args[0]), PRIMARY)} ** {_paren(print_expr(args[1]), 12)}", p
        return f"{_paren(print_expr(args[0]), p)} {sym} {_paren(print_expr(args[1]), p + 1)}", p
    if op == "neg":
        return f"-{_paren(print_expr(args[0]), 12)}", 12
    if op == "invert":
        return f"~{_paren(print_expr(args[0]), 12)}", 12
    if op == "lnot":
        return f"not {_paren(print_expr(args[0]), 4)}", 4
    if op == "ifexp":
        c, a, b = args
        return f"{_paren(print_expr(a), 2)} if {_paren(print_expr(c), 2)} else {_paren(print_expr(b), 1)}", 1
    if op == "astype":
        if at.get("form") == "call":
            return f"{e.ty.dtype}({expr_text(args[0])})", PRIMARY
        return f"{_paren(print_expr(args[0]), PRIMARY)}.astype({e.ty.dtype})", PRIMARY
    if op == "T":
        return f"{_paren(print_expr(args[0]), PRIMARY)}.T", PRIMARY
    if op == "index":
        return f"{_paren(print_expr(args[0]), PRIMARY)}[{subs_text(at['subs'])}]", PRIMARY
    if op == "arrstack":
        return "[" + ", ".join(expr_text(a) for a in args) + "]", PRIMARY
    if op == "tuple":
        return ", ".join(expr_text(a) for a in args), 0
    if op == "einsum":
        return f"einsum(\"{at['spec']}\", {', '.join(expr_text(a) for a in args)})", PRIMARY
    # builtin calls
    name = at.get("fn", op)
    parts = []
    if op in ("concat", "stack"):
        parts.append("(" + ", ".join(expr_text(a) for a in args) + ("," if len(args) == 1 else "") + ")")
    elif op in ("dynamic_slice", "dynamic_update_slice"):
        parts.extend(expr_text(a) for a in args[:at["nfixed"]])
        starts = args[at["nfixed"]:]
        parts.append("(" + ", ".join(expr_text(a) for a in starts) + ("," if len(starts) == 1 else "") + ")")
    else:
        parts.extend(expr_text(a) for a in args)
    for v in at.get("pos", []):
        parts.append(attr_text(v))
    for k, v in at.get("kw", {}).items():
        parts.append(f"{k}={attr_text(v)}")
    return f"{name}({', '.join(parts)})", PRIMARY


def attr_text(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, RawText):
        return v.text
    if isinstance(v, tuple):
        if len(v) == 1:
            return f"({attr_text(v[0])},)"
        return "(" + ", ".join(attr_text(x) for x in v) + ")"
    if isinstance(v, Dim):
        return str(v)
    if isinstance(v, E):
        return expr_text(v)
    return str(v)


@dataclass(frozen=True)
class RawText:
    text: str


def expr_text(e: E) -> str:
    return print_expr(e)[0]


def subs_text(subs: list) -> str:
    out = []
    for s in subs:
        kind = s[0]
        if kind == "i":                         # static int or run-time scalar
            out.append(s[1] if isinstance(s[1], str) else expr_text(s[1]))
        elif kind == "s":
            _, start, stop, step = s
            t = ("" if start is None else str(start)) + ":" + ("" if stop is None else str(stop))
            if step is not None:
                t += f":{step}"
            out.append(t)
        elif kind == "d":
            _, e, length = s
            base = expr_text(e)
            out.append(f"{base}:{base} + {length}")
        elif kind == "g":
            out.append(expr_text(s[1]))
        elif kind == "full":
            out.append(":")
        elif kind == "...":
            out.append("...")
    return ", ".join(out)


def print_block(stmts: list, indent: int) -> list[str]:
    pad = "    " * indent
    lines = []
    for s in stmts:
        if isinstance(s, Assign):
            lines.append(f"{pad}{s.name} = {expr_text(s.expr)}")
        elif isinstance(s, AugAssign):
            lines.append(f"{pad}{s.name} {s.op}= {expr_text(s.expr)}")
        elif isinstance(s, TupleAssign):
            lines.append(f"{pad}{', '.join(s.names)} = {expr_text(s.call)}")
        elif isinstance(s, IndexSet):
            op = f"{s.aug}=" if s.aug else "="
            lines.append(f"{pad}{s.name}[{subs_text(s.subs)}] {op} {expr_text(s.expr)}")
        elif isinstance(s, For):
            lines.append(f"{pad}for {s.var} in range({', '.join(expr_text(b) for b in s.bounds)}):")
            lines.extend(print_block(s.body, indent + 1) or [pad + "    pass"])
        elif isinstance(s, While):
            lines.append(f"{pad}while {s.counter} < {expr_text(s.limit)}:")
            lines.extend(print_block(s.body, indent + 1))
            lines.append(f"{pad}    {s.counter} = {s.counter} + 1")
        elif isinstance(s, If):
            lines.append(f"{pad}if {expr_text(s.cond)}:")
            lines.extend(print_block(s.then, indent + 1) or [pad + "    pass"])
            orelse = s.orelse
            while len(orelse) == 1 and isinstance(orelse[0], If):
                lines.append(f"{pad}elif {expr_text(orelse[0].cond)}:")
                lines.extend(print_block(orelse[0].then, indent + 1) or [pad + "    pass"])
                orelse = orelse[0].orelse
            if orelse:
                lines.append(f"{pad}else:")
                lines.extend(print_block(orelse, indent + 1))
        elif isinstance(s, Effect):
            if s.kind == "print":
                lines.append(f"{pad}print(\"@P\"{''.join(', ' + expr_text(a) for a in s.args)})")
            else:
                lines.append(f"{pad}assert {expr_text(s.args[0])}, \"generated assertion\"")
        else:
            raise TypeError(s)
    return lines


def print_function(f: Function) -> str:
    lines = [f.signature()]
    lines.extend(print_block(f.body, 1))
    lines.append("    return " + ", ".join(expr_text(r) for r in f.results))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------------
# choosers: where every decision comes from
class Chooser:
    """`int(lo, hi)` is the one primitive; everything else derives from it, and smaller values are simpler
    (shrinking moves decisions towards `lo`: fewer statements, the first option of a list, False)."""

    def int(self, lo: int, hi: int) -> int:
        raise NotImplementedError

    def flip(self, p: float) -> bool:
        return self.int(0, 999) >= 1000 - int(round(p * 1000))

    def pick(self, seq):
        seq = list(seq)
        return seq[self.int(0, len(seq) - 1)]

    def weighted(self, items):
        """items: [(weight, value)]; the first item is the simplest."""
        items = [(w, v) for w, v in items if w > 0]
        total = sum(w for w, _ in items)
        r = self.int(0, total - 1)
        for w, v in items:
            if r < w:
                return v
            r -= w
        return items[-1][1]


class RandomChooser(Chooser):
    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.record: list = []

    def int(self, lo, hi):
        v = self.rng.randint(lo, hi) if hi > lo else lo
        self.record.append(v - lo)
        return v


class ReplayChooser(Chooser):
    """Replays recorded decisions (offsets from `lo`), clamped into each range; 0 once exhausted."""

    def __init__(self, choices: list):
        self.choices = list(choices)
        self.pos = 0
        self.record: list = []

    def int(self, lo, hi):
        off = self.choices[self.pos] if self.pos < len(self.choices) else 0
        self.pos += 1
        v = lo + min(max(off, 0), hi - lo)
        self.record.append(v - lo)
        return v


class DataChooser(Chooser):
    """Decisions drawn from hypothesis (`data.draw` or a composite's `draw`)."""

    def __init__(self, draw):
        from hypothesis import strategies as st
        self._draw = draw
        self._st = st
        self.record: list = []

    def int(self, lo, hi):
        v = self._draw(self._st.integers(lo, hi)) if hi > lo else lo
        self.record.append(v - lo)
        return v


# ---------------------------------------------------------------------------------------------------------
# configuration
KNOWN_BUGS: dict[str, str] = {
    # name -> description of an open compiler bug the generator avoids (fixed ones: see tests/test_differential.py
    # `test_found_*`).
}


@dataclass
class Config:
    max_functions: int = 3          # callees + entry
    max_stmts: int = 7              # per block at top level
    max_depth: int = 2              # expression nesting
    max_block_depth: int = 2        # loops/ifs nesting
    max_results: int = 8
    big_dims: bool = False          # shape variables up to 300 (else 2..5)
    avoid: frozenset = frozenset(KNOWN_BUGS)
    features: frozenset = frozenset({"loops", "if", "calls", "index", "reduce", "shape", "linalg", "scan",
                                     "construct", "while", "cast", "bitcast", "consts", "literals", "nn",
                                     "topk", "swap", "effects"})


# ---------------------------------------------------------------------------------------------------------
# the generator
UNARY_FLOAT = ["exp", "expm1", "log", "log1p", "sqrt", "rsqrt", "cbrt", "sin", "cos", "tan", "asin", "acos",
               "atan", "sinh", "cosh", "tanh", "erf", "sigmoid"]
UNARY_SAME = ["abs", "sign", "floor", "ceil", "round", "trunc", "relu"]
PREDICATES = ["isnan", "isinf", "isfinite"]
REDUCTIONS = ["sum", "prod", "max", "min", "mean", "var", "std", "any", "all", "argmax", "argmin", "logsumexp"]
SCANS = ["cumsum", "cumprod", "cummax", "cummin", "sort", "argsort"]
FLOAT_LITERALS = ["0.5", "2.0", "1.5", "0.25", "3.0", "0.1", "1e-3", "10.0", "2.5e2", "0.0", "1.0", "0.75"]
SPECIAL_FLOAT_LITERALS = ["nan", "inf", "1e30", "6e4"]


class Scope:
    """What is visible at a point of a function: typed locals and parameters, run-time int scalars."""

    def __init__(self, fn: "FnGen", pool: list, depth: int = 0):
        self.fn = fn
        self.pool = list(pool)
        self.depth = depth            # nesting of loops/ifs
        self.loop_vars: list = []

    def child(self) -> "Scope":
        s = Scope(self.fn, self.pool, self.depth + 1)
        s.loop_vars = list(self.loop_vars)
        return s


class FnGen:
    def __init__(self, gen: "Gen", name: str, callees: list, is_entry: bool):
        self.gen = gen
        self.name = name
        self.callees = callees
        self.is_entry = is_entry
        self.counter = 0
        self.params: list = []
        self.shape_vars: list = []
        self.scalar_roles: dict = {}     # param name -> "count" | "index" | "value" | "cond"
        self.used: set = set()            # names read after their definition

    def fresh(self, prefix="t") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"


class Gen:
    def __init__(self, ch: Chooser, cfg: Config | None = None):
        self.ch = ch
        self.cfg = cfg or Config()
        self.arg_hints: dict = {}         # (fn, param) -> hints for argument generation

    # -- small helpers ---------------------------------------------------------------------------------
    def feature(self, name: str) -> bool:
        return name in self.cfg.features

    def avoid(self, bug: str) -> bool:
        return bug in self.cfg.avoid

    def pick_dtype(self, allow_bool=True) -> str:
        ch = self.ch
        return ch.weighted([(6, "f32"), (3, "i32"), (2, "f64"), (2, "i64"), (2, "bool" if allow_bool else "f32"),
                            (2, "f16"), (2, "bf16"), (2, "u8"), (2, "i8"), (1, "i16"), (1, "u16"), (1, "u32"),
                            (1, "u64")])

    # -- programs -------------------------------------------------------------------------------------------
    def program(self) -> Program:
        ch = self.ch
        self.consts = []
        self.made_empty = False
        if self.feature("consts") and ch.flip(0.3):
            v = ch.int(2, 4)
            self.consts.append(("K", Ty("i32"), str(v), v))
        if self.feature("consts") and ch.flip(0.25):
            dt = ch.pick(["f32", "f64", "f16"])
            text = ch.pick(FLOAT_LITERALS)
            self.consts.append(("C", Ty(dt), text, float(text)))
        if self.feature("consts") and ch.flip(0.15):
            vals = [ch.pick(["0.5", "1.5", "-2.0", "3.0", "0.25"]) for _ in range(3)]
            self.consts.append(("W", Ty("f32", (Dim.of(3),)), "[" + ", ".join(vals) + "]", [float(v) for v in vals]))
        nfun = ch.int(1, self.cfg.max_functions) if self.feature("calls") else 1
        functions: list[Function] = []
        for i in range(nfun):
            is_entry = i == nfun - 1
            name = "main" if is_entry else f"f{i}"
            functions.append(self.function(name, functions, is_entry))
        for f in functions:
            for node in _walk_exprs(f):
                _fit_literals(node)
        prog = Program(functions, "main", list(self.consts))
        prog.avoid = frozenset(self.cfg.avoid)
        return prog

    def function(self, name: str, callees: list, is_entry: bool) -> Function:
        ch = self.ch
        fg = FnGen(self, name, callees, is_entry)
        self._params(fg)
        scope = Scope(fg, [Var(n, t) for n, t in fg.params] + [Var(n, t) for n, t, _, _ in self.consts])
        for n, _, _, _ in self.consts:
            fg.scalar_roles[n] = "const"       # read-only
        body: list = []
        nstmts = ch.int(1 if is_entry else 1, self.cfg.max_stmts if is_entry else max(2, self.cfg.max_stmts // 2))
        self.block(scope, body, nstmts)
        results = self._results(fg, scope, body, is_entry)
        return Function(name, fg.params, body, results, [r.ty for r in results], fg.shape_vars)

    def _params(self, fg: FnGen) -> None:
        ch = self.ch
        names = iter(["n", "m", "p", "q"])
        nvars = ch.int(1, 3)
        fg.shape_vars = [next(names) for _ in range(nvars)]
        narr = ch.int(1, 4)
        letters = iter("abdeghuw")
        for _ in range(narr):
            rank = ch.weighted([(2, 1), (3, 2), (1, 0), (1, 3)])
            dims = []
            for _ in range(rank):
                dims.append(self._param_dim(fg))
            dt = self.pick_dtype()
            fg.params.append((next(letters), Ty(dt, tuple(dims))))
        # every shape variable must be bound: give unbound ones to a fresh vector parameter
        bound = {v for _, t in fg.params for d in t.shape for v in d.variables}
        for v in fg.shape_vars:
            if v not in bound:
                fg.params.append((next(letters), Ty(self.pick_dtype(), (Dim.of(v),))))
        # run-time scalars: a count (loops, indices), a condition, a value
        if ch.flip(0.6):
            dt = ch.weighted([(6, "i32"), (1, "i64"), (1, "i8"), (1, "u8"), (1, "u32")])
            fg.params.append(("k", Ty(dt)))
            fg.scalar_roles["k"] = "count"
        if ch.flip(0.35) and self.feature("index"):
            dt = ch.weighted([(3, "i32"), (2, "i8"), (1, "i64"), (1, "u8"), (1, "i16"), (1, "u32")])
            fg.params.append(("i", Ty(dt)))
            fg.scalar_roles["i"] = "index"
        if ch.flip(0.3):
            fg.params.append(("c", Ty("bool")))
            fg.scalar_roles["c"] = "cond"
        if ch.flip(0.25):
            dt = ch.pick(["f32", "f64", "i32", "f16"])
            fg.params.append(("s", Ty(dt)))
            fg.scalar_roles["s"] = "value"
        if ch.flip(0.2) and self.feature("index"):
            dt = ch.pick(["i32", "i64", "u8", "i8", "i16"])
            size = ch.int(1, 2)
            fg.params.append(("idx", Ty(dt, (Dim.of(size),))))
            fg.scalar_roles["idx"] = "gather"
        if len(fg.params) > 1 and ch.flip(0.3):     # parameters in any order
            i = ch.int(0, len(fg.params) - 1)
            fg.params.append(fg.params.pop(i))

    def _param_dim(self, fg: FnGen) -> Dim:
        ch = self.ch
        kind = ch.weighted([(8, "var"), (2, "one"), (2, "lit"), (1 if fg.is_entry else 0, "compound")])
        if kind == "var":
            return Dim.of(ch.pick(fg.shape_vars))
        if kind == "one":
            return ONE
        if kind == "lit":
            return Dim.of(ch.int(2, 4))
        v = Dim.of(ch.pick(fg.shape_vars))
        return ch.pick([v + 1, v * 2, v + 2])

    def _results(self, fg: FnGen, scope: Scope, body: list, is_entry: bool) -> list:
        ch = self.ch
        locals_ = [v for v in scope.pool if v.name not in dict(fg.params) and not v.ty.weak
                   and fg.scalar_roles.get(v.name) != "const"]
        sinks = [v for v in locals_ if v.name not in fg.used]
        if is_entry:
            chosen = sinks[-self.cfg.max_results:]
            if not chosen:
                chosen = locals_[-2:]
        else:
            want = ch.int(1, 2)
            chosen = (sinks or locals_)[-want:]
        if not chosen:
            e = self.expr(scope, 1)
            chosen = [self._strongify(scope, e)]
        for v in chosen:
            if isinstance(v, Var):
                fg.used.add(v.name)
        return chosen

    def _strongify(self, scope: Scope, e: E) -> E:
        if e.ty.weak:
            base = self.pick_operand(scope, lambda t: not t.weak and t.rank == 0) or Var(*scope.fn.params[0])
            return self.binary(scope, "add", base, e)
        return e

    # -- statements -------------------------------------------------------------------------------------
    def block(self, scope: Scope, out: list, nstmts: int) -> None:
        ch = self.ch
        for _ in range(nstmts):
            can_nest = scope.depth < self.cfg.max_block_depth
            kind = ch.weighted([
                (12, "assign"),
                (2, "aug"),
                (2 if self.feature("index") else 0, "setitem"),
                (3 if can_nest and self.feature("loops") else 0, "for"),
                (1 if can_nest and self.feature("while") else 0, "while"),
                (3 if can_nest and self.feature("if") else 0, "if"),
                (3 if scope.fn.callees else 0, "call"),
                (1 if self.feature("topk") else 0, "topk"),
                (1 if self.feature("swap") else 0, "swap"),
                (1 if self.feature("index") else 0, "dus"),
                (1 if self.feature("effects") else 0, "print"),
                (1 if self.feature("effects") else 0, "assert"),
            ])
            getattr(self, "stmt_" + kind)(scope, out)

    def define(self, scope: Scope, out: list, e: E, prefix="t") -> Var:
        name = scope.fn.fresh(prefix)
        e = self._strongify(scope, e)
        out.append(Assign(name, e))
        v = Var(name, e.ty)
        scope.pool.append(v)
        return v

    def stmt_assign(self, scope: Scope, out: list) -> None:
        self.define(scope, out, self.expr(scope, self.cfg.max_depth))

    def stmt_aug(self, scope: Scope, out: list) -> None:
        ch = self.ch
        targets = [v for v in scope.pool if not v.ty.weak and v.ty.dtype != "bool"
                   and v.name not in scope.fn.scalar_roles and v not in scope.loop_vars]
        if not targets:
            return self.stmt_assign(scope, out)
        x = ch.pick(targets)
        op = ch.pick(["+", "-", "*", "/"] if is_float(x.ty.dtype) else ["+", "-", "*"])
        e = self.operand_fitting(scope, x.ty, 1)
        self.mark_used(scope, x)
        out.append(AugAssign(x.name, op, e, x.ty))
        self._rebind(scope, x.name, x.ty)

    def _rebind(self, scope: Scope, name: str, ty: Ty) -> None:
        scope.pool = [v for v in scope.pool if v.name != name] + [Var(name, ty)]
        scope.fn.used.discard(name)

    def operand_fitting(self, scope: Scope, target: Ty, depth: int) -> E:
        """An expression that can be combined into `target` without changing its type: its shape broadcasts
        into target.shape and promote(target, e) == target.dtype (a weak literal, or a narrower value)."""
        ch = self.ch
        cands = [v for v in scope.pool if broadcasts_into(v.ty.shape, target.shape) and not v.ty.weak
                 and promote([target, v.ty])[0] == target.dtype and v.ty.dtype != "bool"]
        if cands and ch.flip(0.6):
            v = ch.pick(cands)
            self.mark_used(scope, v)
            if depth > 0 and ch.flip(0.4):
                e = self.unary_like(scope, v)
                if broadcasts_into(e.ty.shape, target.shape) and promote([target, e.ty])[0] == target.dtype \
                        and e.ty.dtype != "bool":
                    return e
            return v
        return self.literal_for(target.dtype, allow_float=is_float(target.dtype))

    def unary_like(self, scope: Scope, v: E) -> E:
        ch = self.ch
        d = v.ty.dtype
        choices = ["neg"] if d not in UNSIGNED and d != "bool" else []
        choices += ["abs"] if d != "bool" else []
        if is_float(d):
            choices += ["sin", "exp", "tanh", "sqrt"]
        if not choices:
            return v
        op = ch.pick(choices)
        if op == "neg":
            return Op("neg", [v], v.ty.strong())
        if op == "abs":
            return Op("abs", [v], v.ty.strong(), {"fn": "abs"})
        return Op(op, [v], v.ty.strong(), {"fn": op})

    def stmt_setitem(self, scope: Scope, out: list) -> None:
        ch = self.ch
        targets = [v for v in scope.pool if v.ty.rank >= 1 and not v.ty.weak
                   and v.name not in scope.fn.scalar_roles]
        if not targets:
            return self.stmt_assign(scope, out)
        x = ch.pick(targets)
        subs, region = self.subscripts(scope, x, for_update=True)
        if subs is None or any(s[0] == "full" for s in subs) and x.ty.min_size() == 0:
            return self.stmt_assign(scope, out)
        aug = None
        if x.ty.dtype != "bool" and ch.flip(0.3):
            aug = ch.pick(["+", "-", "*"])
        target = Ty(x.ty.dtype, region)
        if aug is None and ch.flip(0.5):
            # any value whose promotion with x keeps x's dtype, shape broadcasting into the region
            cands = [v for v in scope.pool if broadcasts_into(v.ty.shape, region) and not v.ty.weak
                     and (v.ty.dtype == x.ty.dtype or promote([x.ty, v.ty])[0] == x.ty.dtype)]
            e = ch.pick(cands) if cands else self.literal_for(x.ty.dtype, allow_float=is_float(x.ty.dtype))
            if x.ty.dtype == "bool" and not cands:
                e = Lit(False, "false", Ty("bool"))
            if isinstance(e, Var):
                self.mark_used(scope, e)
        elif x.ty.dtype == "bool":
            cands = [v for v in scope.pool if broadcasts_into(v.ty.shape, region) and v.ty.dtype == "bool"]
            e = ch.pick(cands) if cands else Lit(True, "true", Ty("bool"))
            if isinstance(e, Var):
                self.mark_used(scope, e)
        else:
            e = self.operand_fitting(scope, target, 1)
        self.mark_used(scope, x)
        out.append(IndexSet(x.name, subs, e, aug, x.ty, region))
        self._rebind(scope, x.name, x.ty)

    def stmt_print(self, scope: Scope, out: list) -> None:
        args = [self.operand(scope, 1) for _ in range(self.ch.int(0, 2))]
        out.append(Effect("print", args))

    def stmt_assert(self, scope: Scope, out: list) -> None:
        ch = self.ch
        c = self.as_bool(scope, self.operand(scope, 1))
        if ch.flip(0.8):            # mostly assertions that hold, so the program goes on
            c = Op("lor", [c, Lit(True, "true", Ty("bool"))], Ty("bool", c.ty.shape))
        out.append(Effect("assert", [c]))

    def stmt_topk(self, scope: Scope, out: list) -> None:
        ch = self.ch
        x = self.pick_operand(scope, lambda t: t.rank >= 1 and t.dtype != "bool" and t.shape[-1].min_value() >= 1)
        if x is None:
            return self.stmt_assign(scope, out)
        last = x.ty.shape[-1]
        m = last.min_value()
        k = ch.int(1, min(m, 3))
        kt = DimVal(Dim.of(k), str(k), Ty("i32", (), True))
        if ch.flip(0.3) and not last.is_const:
            kt = DimVal(last, str(last), Ty("i32", (), True)) if len(last.terms) == 1 else kt
        shape = tuple(x.ty.shape[:-1]) + (kt.dim,)
        op = Op("top_k", [x, kt], (Ty(x.ty.dtype, shape), Ty("i32", shape)), {"fn": "top_k"})
        names = [scope.fn.fresh("r"), scope.fn.fresh("r")]
        out.append(TupleAssign(names, op))
        for n, t in zip(names, op.ty):
            scope.pool.append(Var(n, t))

    def stmt_swap(self, scope: Scope, out: list) -> None:
        """`a, b = b, a op b` (both right-hand sides are evaluated first)."""
        ch = self.ch
        cands = [v for v in scope.pool if not v.ty.weak and v.name not in scope.fn.scalar_roles
                 and v not in scope.loop_vars]
        pairs = [(a, b) for a in cands for b in cands if a.name != b.name and a.ty == b.ty]
        if not pairs:
            return self.stmt_assign(scope, out)
        a, b = ch.pick(pairs)
        self.mark_used(scope, a)
        self.mark_used(scope, b)
        if a.ty.dtype == "bool":
            second = Op(ch.pick(["land", "lor", "xor_b"]), [a, b], a.ty)
        else:
            second = self.coerce(scope, self.binary(scope, ch.pick(["add", "sub", "mul", "maximum"]), a, b), a.ty)
        out.append(TupleAssign([a.name, b.name], Op("tuple", [b, second], (a.ty, a.ty))))
        self._rebind(scope, a.name, a.ty)
        self._rebind(scope, b.name, b.ty)

    def stmt_dus(self, scope: Scope, out: list) -> None:
        """`x = dynamic_update_slice(x, v, (starts))`."""
        ch = self.ch
        x = self.pick_operand(scope, lambda t: t.rank >= 1 and t.min_size() > 0)
        if x is None or scope.fn.scalar_roles.get(x.name) is not None or x in scope.loop_vars:
            return self.stmt_assign(scope, out)
        starts, lengths = self.dyn_starts(scope, x)
        v = self.coerce(scope, self.expr(scope, 1), Ty(x.ty.dtype, tuple(Dim.of(n) for n in lengths)))
        e = Op("dynamic_update_slice", [x, v] + starts, x.ty.strong(), {"fn": "dynamic_update_slice", "nfixed": 2,
                                                                         "lengths": lengths})
        out.append(Assign(x.name, e))
        self._rebind(scope, x.name, x.ty)

    def dyn_starts(self, scope: Scope, x: E):
        """Start indices (run-time scalars or static ints, possibly negative) and static lengths."""
        ch = self.ch
        rt = self.runtime_ints(scope)
        starts, lengths = [], []
        for d in x.ty.shape:
            m = d.min_value()
            lengths.append(ch.int(1, min(m, 3)))
            if rt and ch.flip(0.6):
                v = ch.pick(rt)
                self.mark_used(scope, v)
                starts.append(v)
            else:
                i = ch.int(-m, m - 1)
                starts.append(Lit(i, str(i), Ty("i32", (), True)))
        return starts, lengths

    def stmt_call(self, scope: Scope, out: list) -> None:
        ch = self.ch
        callee = ch.pick(scope.fn.callees)
        call = self.make_call(scope, callee)
        if call is None:
            return self.stmt_assign(scope, out)
        if isinstance(call.ty, tuple):
            names = [scope.fn.fresh("r") for _ in call.ty]
            out.append(TupleAssign(names, call))
            for n, t in zip(names, call.ty):
                scope.pool.append(Var(n, t))
        else:
            self.define(scope, out, call, "r")

    def make_call(self, scope: Scope, callee: Function):
        ch = self.ch
        bind: dict = {}
        args = []
        for pname, pty in callee.params:
            cands = []
            role = _CALLEE_ROLES.get(pname)
            for v in scope.pool:
                if v.ty.weak or v.ty.dtype != pty.dtype or v.ty.rank != pty.rank:
                    continue
                if role in ("count", "gather") and scope.fn.scalar_roles.get(v.name) != role \
                        and v not in scope.loop_vars:
                    continue        # loop counts and scatter indices keep their (small, distinct) values
                trial = dict(bind)
                if _unify(pty.shape, v.ty.shape, trial):
                    cands.append((v, trial))
            if cands:
                v, trial = ch.pick(cands)
                bind = trial
                self.mark_used(scope, v)
                args.append(v)
                continue
            if pty.rank == 0 and pty.dtype == "bool":
                args.append(Lit(True, "true", Ty("bool")) if ch.flip(0.5) else Lit(False, "false", Ty("bool")))
                continue
            if role == "gather":
                n = pty.shape[0].value
                args.append(Op("arange", [], Ty(pty.dtype, (Dim.of(n),)),
                               {"fn": "arange", "pos": [RawText(str(n))], "kw": {"dtype": RawText(pty.dtype)},
                                "range": (0, Dim.of(n), 1)}))
                continue
            if pty.rank == 0 and is_int(pty.dtype) and (ch.flip(0.9) or role == "count"):
                lo, hi = int_range(pty.dtype)
                val = ch.int(max(lo, 0), min(hi, 3))
                args.append(Lit(val, str(val), Ty("i32", (), True)))
                continue
            # build an argument of exactly the parameter's type from a value that broadcasts into it
            shape = tuple(d.subs(bind) for d in pty.shape)
            for d in pty.shape:         # an unbound callee variable: bind it to one of our variables
                for var in sorted(d.variables):
                    if var not in bind:
                        bind[var] = Dim.of(ch.pick(scope.fn.shape_vars))
            shape = tuple(d.subs(bind) for d in pty.shape)
            args.append(self.coerce(scope, self.expr(scope, 1), Ty(pty.dtype, shape)))
        rtypes = tuple(t.subs(bind) for t in callee.result_types)
        kwnames = [None] * len(args)
        if ch.flip(0.25):
            start = ch.int(0, len(args) - 1)
            names = [n for n, _ in callee.params]
            kwnames = [None] * start + names[start:]
            if ch.flip(0.5):            # keyword arguments in another order
                tail = list(zip(args[start:], kwnames[start:]))[::-1]
                args = args[:start] + [a for a, _ in tail]
                kwnames = kwnames[:start] + [k for _, k in tail]
        return Call(callee.name, args, kwnames, rtypes if len(rtypes) > 1 else rtypes[0], bind)

    def coerce(self, scope: Scope, e: E, ty: Ty) -> E:
        """An expression of exactly type `ty` built from `e` (cast, then broadcast)."""
        if e.ty.dtype != ty.dtype or e.ty.weak:
            e = Op("astype", [e], Ty(ty.dtype, e.ty.shape))
        if tuple(e.ty.shape) != tuple(ty.shape):
            if not broadcasts_into(e.ty.shape, ty.shape):
                e = self.reduce_to_scalar(scope, e)
                if e.ty.dtype != ty.dtype:
                    e = Op("astype", [e], Ty(ty.dtype, e.ty.shape))
            e = Op("broadcast_to", [e], Ty(ty.dtype, ty.shape), {"pos": [RawText(shape_tuple_text(ty.shape))]})
        return e

    def reduce_to_scalar(self, scope: Scope, e: E) -> E:
        op = self.ch.pick(["sum", "max", "min"])
        if any(d == 0 for d in e.ty.shape):
            op = "sum"          # max/min of no elements is E0204
        dt = accumulator_dtype(e.ty.dtype) if op == "sum" else e.ty.dtype
        return Op(op, [e], Ty(dt), {"kw": {}})

    def stmt_for(self, scope: Scope, out: list) -> None:
        ch = self.ch
        fg = scope.fn
        var = fg.fresh("it")
        counts = [v for v in scope.pool if v.name in fg.scalar_roles and fg.scalar_roles[v.name] == "count"]
        consts = [v for v in scope.pool if v.name == "K"]
        kind = ch.weighted([(3, "lit"), (3 if counts else 0, "runtime"), (2, "shape"), (1, "start_stop"),
                            (1, "step"), (1 if counts else 0, "runtime_start"), (1 if consts else 0, "const")])
        lit = lambda v: Lit(v, str(v), Ty("i32", (), True))  # noqa: E731
        if kind == "lit":
            bounds = [lit(ch.int(0, 4))]
        elif kind == "const":
            bounds = [consts[0]]
        elif kind == "runtime":
            bounds = [ch.pick(counts)]
        elif kind == "shape":
            bounds = [self.dimval(scope)]
        elif kind == "start_stop":
            bounds = [lit(ch.int(0, 2)), lit(ch.int(1, 5))]
        elif kind == "step":
            bounds = ch.pick([[lit(4), lit(0), Lit(-1, "-1", Ty("i32", (), True))],
                              [lit(0), lit(5), lit(2)], [lit(1), lit(6), lit(3)]])
        else:
            k = ch.pick(counts)
            signed = k.ty.dtype not in UNSIGNED
            bounds = [lit(1), k] if ch.flip(0.5) or not signed else [k, lit(0), Lit(-1, "-1", Ty("i32", (), True))]
        for b in bounds:
            if isinstance(b, Var):
                self.mark_used(scope, b)
        var_dt, _ = promote([b.ty for b in bounds])
        loop = For(var, Ty(var_dt), bounds, [])
        self._loop_body(scope, loop.body, extra=[Var(var, Ty(var_dt))])
        out.append(loop)

    def stmt_while(self, scope: Scope, out: list) -> None:
        ch = self.ch
        fg = scope.fn
        counter = fg.fresh("j")
        counts = [v for v in scope.pool if fg.scalar_roles.get(v.name) == "count"]
        limit = ch.pick(counts) if counts and ch.flip(0.6) else Lit(ch.int(0, 4), "", Ty("i32", (), True))
        if isinstance(limit, Lit):
            limit.text = str(limit.value)
        else:
            self.mark_used(scope, limit)
        out.append(Assign(counter, Lit(0, "0", Ty("i32", (), True))))
        loop = While(counter, limit, [])
        # the counter starts as a weak literal: inside the loop it is a weak i32 (it takes other dtypes)
        self._loop_body(scope, loop.body, extra=[Var(counter, Ty("i32", (), True))], counter=counter)
        out.append(loop)

    def _loop_body(self, scope: Scope, body: list, extra: list, counter: str | None = None) -> None:
        ch = self.ch
        inner = scope.child()
        inner.pool += extra
        inner.loop_vars += extra
        carried = [v for v in scope.pool if not v.ty.weak and v.name not in scope.fn.scalar_roles]
        self.block(inner, body, ch.int(1, 3))
        # update one or two carried variables (they keep their types)
        for _ in range(ch.int(1, 2)):
            if not carried:
                break
            x = ch.pick(carried)
            self._update_carried(inner, body, x)
        # names first defined in the loop are not visible after it; carried ones keep their types
        outer_names = {v.name for v in scope.pool}
        for v in inner.pool:
            if v.name in outer_names:
                scope.fn.used.discard(v.name)

    def _update_carried(self, scope: Scope, body: list, x: Var) -> None:
        ch = self.ch
        if x.ty.dtype != "bool" and ch.flip(0.4):
            op = ch.pick(["+", "-", "*", "/"] if is_float(x.ty.dtype) else ["+", "-", "*"])
            e = self.operand_fitting(scope, x.ty, 1)
            body.append(AugAssign(x.name, op, e, x.ty))
        else:
            e = self.expr(scope, 1, seed=x)
            body.append(Assign(x.name, self.coerce(scope, e, x.ty)))
        self.mark_used(scope, x)
        self._rebind(scope, x.name, x.ty)

    def stmt_if(self, scope: Scope, out: list) -> None:
        ch = self.ch
        cond = self.condition(scope)
        # targets: existing variables reassigned with their type, and new ones assigned in every branch
        targets = []
        existing = [v for v in scope.pool if not v.ty.weak and v.name not in scope.fn.scalar_roles]
        for _ in range(ch.int(0, 2)):
            if existing:
                targets.append(ch.pick(existing))
        for _ in range(ch.int(1 if not targets else 0, 2)):
            e = self.expr(scope, 1)
            targets.append(Var(scope.fn.fresh("v"), e.ty.strong()))
        seen, uniq = set(), []
        for t in targets:
            if t.name not in seen:
                seen.add(t.name)
                uniq.append(t)
        targets = uniq
        node = If(cond, [], [])
        self._branch(scope, node.then, targets)
        if ch.flip(0.25) and scope.depth + 1 < self.cfg.max_block_depth:
            inner = If(self.condition(scope), [], [])
            self._branch(scope, inner.then, targets)
            self._branch(scope, inner.orelse, targets)
            node.orelse = [inner]
        elif ch.flip(0.8) or any(t.name not in {v.name for v in scope.pool} for t in targets):
            self._branch(scope, node.orelse, targets)
        out.append(node)
        for t in targets:
            self._rebind(scope, t.name, t.ty)

    def _branch(self, scope: Scope, body: list, targets: list) -> None:
        ch = self.ch
        inner = scope.child()
        self.block(inner, body, ch.int(0, 2))
        for t in targets:
            e = self.expr(inner, 1)
            body.append(Assign(t.name, self.coerce(inner, e, t.ty)))
            if any(v.name == t.name for v in scope.pool):
                self.mark_used(scope, t)

    def condition(self, scope: Scope) -> E:
        """A scalar bool: run-time (parameters, reductions) or compile-time (shape variables)."""
        ch = self.ch
        fg = scope.fn
        kind = ch.weighted([(3, "reduce"), (2 if "c" in fg.scalar_roles else 0, "param"),
                            (2 if "k" in fg.scalar_roles else 0, "count"), (2, "static"), (1, "scalar")])
        if kind == "param":
            v = next(v for v in scope.pool if v.name == "c")
            self.mark_used(scope, v)
            return v if ch.flip(0.7) else Op("lnot", [v], Ty("bool"))
        if kind == "count":
            v = next(v for v in scope.pool if v.name == "k")
            self.mark_used(scope, v)
            lit = self.literal_for(v.ty.dtype, small=True, allow_float=False)
            return Op(ch.pick(COMPARE_OPS), [v, lit], Ty("bool"), {"cdt": promote([v.ty, lit.ty])[0]})
        if kind == "static":
            d = self.dimval(scope)
            lit = Lit(ch.int(1, 5), "", Ty("i32", (), True))
            lit.text = str(lit.value)
            return Op(ch.pick(COMPARE_OPS), [d, lit], Ty("bool"), {"cdt": "i32"})
        if kind == "scalar":
            cands = [v for v in scope.pool if v.ty.rank == 0 and not v.ty.weak]
            if cands:
                v = ch.pick(cands)
                self.mark_used(scope, v)
                if v.ty.dtype == "bool":
                    return v
                lit = self.literal_for(v.ty.dtype, small=True, allow_float=is_float(v.ty.dtype))
                return Op(ch.pick(COMPARE_OPS), [v, lit], Ty("bool"), {"cdt": promote([v.ty, lit.ty])[0]})
        x = self.operand(scope, 0)
        if x.ty.dtype == "bool":
            return Op(ch.pick(["any", "all"]), [x], Ty("bool"), {"kw": {}})
        r = Op("sum" if ch.flip(0.5) or any(d == 0 for d in x.ty.shape) else "max", [x],
               Ty(accumulator_dtype(x.ty.dtype)), {"kw": {}})
        if r.op == "max":
            r.ty = Ty(x.ty.dtype)
        lit = self.literal_for(r.ty.dtype, small=True, allow_float=is_float(r.ty.dtype))
        return Op(ch.pick(COMPARE_OPS), [r, lit], Ty("bool"), {"cdt": promote([r.ty, lit.ty])[0]})

    # -- expressions ------------------------------------------------------------------------------------
    def mark_used(self, scope: Scope, v: E) -> None:
        if isinstance(v, Var):
            scope.fn.used.add(v.name)

    def pick_operand(self, scope: Scope, pred=None) -> Var | None:
        ch = self.ch
        cands = [v for v in scope.pool if not v.ty.weak and (pred is None or pred(v.ty))]
        if not cands:
            return None
        # prefer recent values (so computations chain)
        if ch.flip(0.5):
            cands = cands[-4:]
        v = ch.pick(cands)
        self.mark_used(scope, v)
        return v

    def operand(self, scope: Scope, depth: int, pred=None) -> E:
        if depth > 0 and self.ch.flip(0.35):
            e = self.expr(scope, depth - 1)
            if pred is None or pred(e.ty):
                return e
        v = self.pick_operand(scope, pred)
        if v is None:
            v = self.pick_operand(scope)
        return v

    def dimval(self, scope: Scope) -> DimVal:
        ch = self.ch
        fg = scope.fn
        kind = ch.weighted([(3, "var"), (2, "shape"), (1, "size"), (1, "ndim")])
        ty = Ty("i32", (), True)
        if kind == "var":
            v = ch.pick(fg.shape_vars)
            return DimVal(Dim.of(v), v, ty)
        arrays = [v for v in scope.pool if v.ty.rank >= 1 and not v.ty.weak]
        if not arrays:
            v = ch.pick(fg.shape_vars)
            return DimVal(Dim.of(v), v, ty)
        x = ch.pick(arrays)
        self.mark_used(scope, x)
        if kind == "shape":
            ax = ch.int(0, x.ty.rank - 1)
            return DimVal(x.ty.shape[ax], f"{x.name}.shape[{ax}]", ty)
        if kind == "size":
            size = ONE
            for d in x.ty.shape:
                size = size * d
            return DimVal(size, f"{x.name}.size", ty)
        return DimVal(Dim.of(x.ty.rank), f"{x.name}.ndim", ty)

    def literal_for(self, strong: str, small: bool = False, allow_float: bool = True, nonneg: bool = False) -> Lit:
        """A weak literal that may meet a value of dtype `strong` (int literals fit that dtype)."""
        ch = self.ch
        use_float = allow_float and (is_float(strong) and ch.flip(0.6) or ch.flip(0.15))
        if use_float:
            if not small and ch.flip(0.08):
                text = ch.pick(SPECIAL_FLOAT_LITERALS)
            else:
                text = ch.pick(FLOAT_LITERALS)
            value = float(text)
            if not nonneg and ch.flip(0.3) and value != 0:
                return Lit(-value, "-" + text, Ty("f32", (), True))
            return Lit(value, text, Ty("f32", (), True))
        lo, hi = int_range(strong if is_int(strong) else "i32")
        if is_float(strong):
            lo, hi = -1000, 1000
        if nonneg:
            lo = max(lo, 0)
        if not small and ch.flip(0.1):
            value = ch.pick([lo, hi, lo + 1, hi - 1])
        else:
            value = ch.int(max(lo, -3), min(hi, 5))
        text = str(value)
        return Lit(value, text, Ty("i32", (), True))

    def expr(self, scope: Scope, depth: int, seed: E | None = None) -> E:
        """A random well-typed expression. `seed`, if given, is used as the first operand where possible."""
        ch = self.ch
        f = self.feature
        kind = ch.weighted([
            (6, "var"),
            (24, "arith"),
            (8, "compare"),
            (3, "bitwise"),
            (2, "logical"),
            (10, "unary_math"),
            (5, "unary_same"),
            (2, "predicate"),
            (3, "unary_op"),
            (5, "where"),
            (2, "clip"),
            (2, "ifexp"),
            (7 if f("cast") else 0, "cast"),
            (1 if f("bitcast") else 0, "bitcast"),
            (9 if f("reduce") else 0, "reduce"),
            (8 if f("index") else 0, "index"),
            (5 if f("shape") else 0, "shape"),
            (3 if f("linalg") else 0, "linalg"),
            (3 if f("scan") else 0, "scan"),
            (2 if f("construct") else 0, "construct"),
            (2, "dimval"),
            (2 if f("nn") else 0, "nn"),
            (1 if f("literals") else 0, "arrstack"),
        ])
        e = getattr(self, "e_" + kind)(scope, depth, seed)
        return e

    def first(self, scope: Scope, depth: int, seed: E | None, pred=None) -> E:
        if seed is not None and (pred is None or pred(seed.ty)):
            return seed
        return self.operand(scope, depth, pred)

    def e_var(self, scope, depth, seed):
        return self.first(scope, 0, seed)

    def e_dimval(self, scope, depth, seed):
        x = self.first(scope, depth, seed, lambda t: t.dtype not in ("i8", "u8", "bool"))
        if x.ty.dtype in ("i8", "u8", "bool"):
            return x
        d = self.dimval(scope)
        return self.binary(scope, self.ch.pick(["add", "mul", "sub", "truediv"]), x, d)

    def array_literal(self, a: E, allow_float=True):
        """`[1.0, 2.5]`-style literal whose shape broadcasts with `a` (its last dim must be a constant)."""
        ch = self.ch
        if a.ty.rank and not a.ty.shape[-1].is_const:
            return None
        n = a.ty.shape[-1].value if a.ty.rank else ch.int(1, 3)
        if n > 6 or n == 0:           # `[]` has no dtype in arr (E0204, by design)
            return None
        vals = [self.literal_for(a.ty.dtype, small=True, allow_float=allow_float, nonneg=True) for _ in range(n)]
        is_f = any(isinstance(v.value, float) for v in vals)
        values = [float(v.value) if is_f else v.value for v in vals]
        texts = [v.text if not is_f or "." in v.text or "e" in v.text or v.text in ("nan", "inf") else v.text + ".0"
                 for v in vals]
        if ch.flip(0.2) and n >= 1 and a.ty.rank >= 2:          # a 2-D literal [[...]]
            return ArrLit([values], "[[" + ", ".join(texts) + "]]", Ty("f32" if is_f else "i32", (ONE, Dim.of(n)), True))
        return ArrLit(values, "[" + ", ".join(texts) + "]", Ty("f32" if is_f else "i32", (Dim.of(n),), True))

    def weak_stack(self, a: E, allow_float=True):
        """`stack((1, 2))` of weak literals that fit `a`'s dtype, broadcasting with `a`: weak, like its items
        (arrc and jax.numpy: `where(c, x_u32, stack((1, 2)))` is u32)."""
        ch = self.ch
        if a.ty.rank == 0:
            n = ch.int(1, 3)
        elif a.ty.shape[-1].is_const:
            n = a.ty.shape[-1].value
        else:
            n = 1
        if n > 6 or n == 0:
            return None
        items = [self.literal_for(a.ty.dtype, small=True, allow_float=allow_float) for _ in range(n)]
        dt, weak = promote([i.ty for i in items])
        return Op("stack", items, Ty(dt, (Dim.of(n),), weak), {"fn": "stack", "kw": {}, "ax": 0})

    def partner(self, scope: Scope, depth: int, a: E, literal_p=0.3, pred=None) -> E:
        """A second operand that broadcasts with `a`."""
        ch = self.ch
        if self.feature("literals") and ch.flip(0.06) and not a.ty.weak:
            lit = self.array_literal(a, allow_float=not (pred and not pred(Ty("f32"))))
            if lit is not None:
                return lit
        if self.feature("literals") and ch.flip(0.025) and not a.ty.weak:
            st = self.weak_stack(a, allow_float=not (pred and not pred(Ty("f32"))))
            if st is not None and (pred is None or pred(st.ty)):
                return st
        if ch.flip(literal_p):
            return self.literal_for(a.ty.dtype, allow_float=not (pred and not pred(Ty("f32"))))
        if depth > 0 and ch.flip(0.3):
            e = self.expr(scope, depth - 1)
            if broadcast(a.ty.shape, e.ty.shape) is not None and not e.ty.weak and (pred is None or pred(e.ty)):
                return e
        cands = [v for v in scope.pool if not v.ty.weak and broadcast(a.ty.shape, v.ty.shape) is not None
                 and (pred is None or pred(v.ty))]
        if cands:
            if ch.flip(0.4):
                cands = cands[-4:]
            v = ch.pick(cands)
            self.mark_used(scope, v)
            return v
        return self.literal_for(a.ty.dtype, allow_float=not (pred and not pred(Ty("f32"))))

    def binary(self, scope: Scope, op: str, a: E, b: E) -> E:
        """Type `a op b` (arithmetic); fixes operands that the rules reject (bool arithmetic, int powers)."""
        ch = self.ch
        if a.ty.weak and b.ty.weak:
            b = self.pick_operand(scope) or b
        if a.ty.dtype == "bool" and b.ty.dtype == "bool" and op != "truediv":
            a = Op("astype", [a], Ty(ch.pick(["i32", "f32", "u8"]), a.ty.shape))
        dt, weak = promote([a.ty, b.ty])
        shape = broadcast(a.ty.shape, b.ty.shape)
        if shape is None:
            b = self.literal_for(a.ty.dtype)
            dt, weak = promote([a.ty, b.ty])
            shape = a.ty.shape
        if op in ("floordiv", "mod", "pow") and dt == "bool":
            a = Op("astype", [a], Ty("i32", a.ty.shape))
            dt, weak = promote([a.ty, b.ty])
        if op in ("pow", "powfn") and not is_float(dt):
            # integer powers: a small non-negative literal exponent (negative ones are left unspecified)
            b = Lit(ch.int(0, 3), "", Ty("i32", (), True))
            b.text = str(b.value)
            dt, weak = promote([a.ty, b.ty])
            shape = a.ty.shape
        if op == "atan2" and not is_float(dt):
            # math on integers computes in f32 (f64 for 64-bit): docs/language.md, Promotion
            dt, weak = float_dtype_for(dt), False
        if op == "truediv":
            dt = true_divide_dtype(dt)
            weak = weak and is_float(dt)
        attrs = {"fn": op} if op in ("maximum", "minimum", "atan2", "powfn") else {}
        if op == "powfn":
            attrs["fn"] = "pow"
        return Op(op, [a, b], Ty(dt, shape, weak), attrs)

    def e_arith(self, scope, depth, seed):
        ch = self.ch
        op = ch.weighted([(5, "add"), (4, "sub"), (5, "mul"), (3, "truediv"), (2, "floordiv"), (2, "mod"),
                          (2, "pow"), (2, "maximum"), (2, "minimum"), (1, "atan2"), (1, "powfn")])
        a = self.first(scope, depth, seed)
        b = self.partner(scope, depth, a)
        if ch.flip(0.3):
            a, b = b, a
        return self.binary(scope, op, a, b)

    def e_compare(self, scope, depth, seed):
        ch = self.ch
        a = self.first(scope, depth, seed)
        b = self.partner(scope, depth, a)
        if ch.flip(0.3):
            a, b = b, a
        if a.ty.weak and b.ty.weak:
            b = self.pick_operand(scope) or b
        shape = broadcast(a.ty.shape, b.ty.shape)
        cdt, _ = promote([a.ty, b.ty])
        return Op(ch.pick(COMPARE_OPS), [a, b], Ty("bool", shape), {"cdt": cdt})

    def e_bitwise(self, scope, depth, seed):
        ch = self.ch
        ok = lambda t: not is_float(t.dtype)  # noqa: E731
        a = self.first(scope, depth, seed, ok)
        if not ok(a.ty):
            a = Op("astype", [a], Ty(ch.pick(INTS + ["bool"]), a.ty.shape))
        b = self.partner(scope, depth, a, pred=ok)
        if not ok(b.ty):
            b = self.literal_for(a.ty.dtype, allow_float=False)
        if ch.flip(0.3):
            a, b = b, a
        if a.ty.weak and b.ty.weak:
            b = Op("astype", [b], Ty("i32", b.ty.shape))
        dt, weak = promote([a.ty, b.ty])
        if is_float(dt):         # e.g. i64 & u64 promote to f64: cast one side
            b = Op("astype", [b], Ty(a.ty.dtype if not a.ty.weak else "i32", b.ty.shape))
            dt, weak = promote([a.ty, b.ty])
        shape = broadcast(a.ty.shape, b.ty.shape)
        return Op(ch.pick(["and_b", "or_b", "xor_b"]), [a, b], Ty(dt, shape, weak))

    def as_bool(self, scope: Scope, e: E) -> E:
        if e.ty.dtype == "bool" and not e.ty.weak:
            return e
        lit = self.literal_for(e.ty.dtype, small=True, allow_float=is_float(e.ty.dtype))
        return Op(self.ch.pick(COMPARE_OPS), [e, lit], Ty("bool", e.ty.shape), {"cdt": promote([e.ty, lit.ty])[0]})

    def e_logical(self, scope, depth, seed):
        ch = self.ch
        isb = lambda t: t.dtype == "bool"  # noqa: E731
        a = self.as_bool(scope, self.first(scope, depth, seed, isb))
        b = self.partner(scope, depth, a, literal_p=0, pred=isb)
        b = self.as_bool(scope, b)
        shape = broadcast(a.ty.shape, b.ty.shape)
        if shape is None:
            b, shape = Lit(True, "true", Ty("bool")), a.ty.shape
        return Op(ch.pick(["land", "lor"]), [a, b], Ty("bool", shape))

    def e_unary_math(self, scope, depth, seed):
        ch = self.ch
        name = ch.pick(UNARY_FLOAT)
        x = self.first(scope, depth, seed)
        return Op(name, [x], Ty(float_dtype_for(x.ty.dtype), x.ty.shape), {"fn": name})

    def e_unary_same(self, scope, depth, seed):
        ch = self.ch
        name = ch.pick(UNARY_SAME)
        x = self.first(scope, depth, seed, lambda t: t.dtype != "bool")
        if x.ty.dtype == "bool":
            x = Op("astype", [x], Ty(ch.pick(["f32", "i8"]), x.ty.shape))
        return Op(name, [x], x.ty.strong(), {"fn": name})

    def e_predicate(self, scope, depth, seed):
        name = self.ch.pick(PREDICATES)
        x = self.first(scope, depth, seed)
        return Op(name, [x], Ty("bool", x.ty.shape), {"fn": name})

    def e_unary_op(self, scope, depth, seed):
        ch = self.ch
        x = self.first(scope, depth, seed)
        d = x.ty.dtype
        ops = (["neg"] if d != "bool" else []) + (["invert"] if not is_float(d) else []) + \
              (["lnot"] if d == "bool" else [])
        op = ch.pick(ops)
        return Op(op, [x], x.ty.strong())

    def e_where(self, scope, depth, seed):
        ch = self.ch
        c = self.as_bool(scope, self.first(scope, depth, seed))
        a = self.partner(scope, depth, c, literal_p=0)
        if a.ty.weak:
            a = Op("astype", [a], Ty("f32", a.ty.shape))
        b = self.partner(scope, depth, a, literal_p=0.35)
        if ch.flip(0.5):
            a, b = b, a
        dt, weak = promote([a.ty, b.ty])
        s1 = broadcast(a.ty.shape, b.ty.shape)
        shape = broadcast(c.ty.shape, s1) if s1 is not None else None
        if shape is None:
            return self.binary(scope, "add", a, self.literal_for(a.ty.dtype) if not a.ty.weak else c)
        return Op("where", [c, a, b], Ty(dt, shape, weak), {"fn": "where"})

    def e_clip(self, scope, depth, seed):
        ch = self.ch
        x = self.first(scope, depth, seed, lambda t: t.dtype != "bool")
        lo = self.literal_for(x.ty.dtype, small=True)
        hi = self.literal_for(x.ty.dtype, small=True)
        if ch.flip(0.3):
            lo = self.partner(scope, 0, x, literal_p=0.2)
        if x.ty.weak and lo.ty.weak and hi.ty.weak:
            return x
        dt, weak = promote([x.ty, lo.ty, hi.ty])
        shape = broadcast(broadcast(x.ty.shape, lo.ty.shape) or x.ty.shape, hi.ty.shape)
        if broadcast(x.ty.shape, lo.ty.shape) is None:
            return x
        return Op("clip", [x, lo, hi], Ty(dt, shape, weak), {"fn": "clip"})

    def e_ifexp(self, scope, depth, seed):
        ch = self.ch
        c = self.condition(scope)
        a = self.first(scope, depth, seed)
        b = self.partner(scope, depth, a, literal_p=0.3)
        if a.ty.weak and b.ty.weak:
            return a
        dt, weak = promote([a.ty, b.ty])
        shape = broadcast(a.ty.shape, b.ty.shape)
        if ch.flip(0.5):
            a, b = b, a
        return Op("ifexp", [c, a, b], Ty(dt, shape, weak))

    def e_cast(self, scope, depth, seed):
        ch = self.ch
        x = self.first(scope, depth, seed)
        dt = self.pick_dtype()
        form = "call" if dt != "bool" and ch.flip(0.3) else "method"
        return Op("astype", [x], Ty(dt, x.ty.shape), {"form": form})

    def e_bitcast(self, scope, depth, seed):
        ch = self.ch
        x = self.first(scope, depth, seed, lambda t: t.dtype != "bool")
        if x.ty.dtype == "bool":
            return self.e_cast(scope, depth, x)
        same = [d for d in DTYPES if d != "bool" and d != x.ty.dtype and BITS[d] == BITS[x.ty.dtype]]
        dt = ch.pick(same)
        return Op("bitcast", [x], Ty(dt, x.ty.shape), {"fn": "bitcast", "pos": [RawText(dt)]})

    def e_reduce(self, scope, depth, seed):
        ch = self.ch
        x = self.first(scope, depth, seed)
        name = ch.weighted([(5, "sum"), (2, "prod"), (3, "max"), (3, "min"), (3, "mean"), (1, "var"), (1, "std"),
                            (2, "any"), (2, "all"), (2, "argmax"), (2, "argmin"), (1, "logsumexp")])
        r = x.ty.rank
        kw: dict = {}
        axes = list(range(r))
        if r >= 1 and ch.flip(0.6):
            if name in ("argmax", "argmin") or r == 1 or ch.flip(0.6):
                ax = ch.int(0, r - 1)
                axes = [ax]
                kw["axis"] = ax - r if ch.flip(0.3) else ax
            else:
                k = ch.int(1, r)
                axes = sorted(set(ch.int(0, r - 1) for _ in range(k)))
                order = axes[::-1] if ch.flip(0.3) else axes
                kw["axis"] = tuple(order)
        keep = False
        if ch.flip(0.35):
            keep = True
            kw["keepdims"] = True
        elif ch.flip(0.1):
            kw["keepdims"] = False
        if name in ("var", "std") and ch.flip(0.3):
            kw["ddof"] = 1
        if name in ("max", "min", "argmax", "argmin") and any(x.ty.shape[a] == 0 for a in axes):
            name = "sum"        # of no elements they are E0204 (NumPy and JAX raise); `sum` has an identity
        d = x.ty.dtype
        out = {"sum": accumulator_dtype(d), "prod": accumulator_dtype(d), "max": d, "min": d,
               "mean": float_dtype_for(d), "var": float_dtype_for(d), "std": float_dtype_for(d), "any": "bool",
               "all": "bool", "argmax": "i32", "argmin": "i32", "logsumexp": float_dtype_for(d)}[name]
        if keep:
            shape = tuple(ONE if i in axes else s for i, s in enumerate(x.ty.shape))
        else:
            shape = tuple(s for i, s in enumerate(x.ty.shape) if i not in axes)
        return Op(name, [x], Ty(out, shape), {"fn": name, "kw": kw, "axes": axes})

    # -- indexing ---------------------------------------------------------------------------------------------
    def runtime_ints(self, scope: Scope) -> list:
        fg = scope.fn
        out = list(scope.loop_vars)
        out += [v for v in scope.pool if v.ty.rank == 0 and is_int(v.ty.dtype) and not v.ty.weak
                and (fg.scalar_roles.get(v.name) in ("count", "index") or v in scope.loop_vars)]
        return out

    def subscripts(self, scope: Scope, x: E, for_update: bool = False):
        """Random subscripts for `x`; returns (subs, result shape) or (None, None)."""
        ch = self.ch
        r = x.ty.rank
        nsub = ch.int(1, r)
        subs, shape = [], []
        gathered = False
        rt = self.runtime_ints(scope)
        gathers = [v for v in scope.pool if v.ty.rank == 1 and is_int(v.ty.dtype) and not v.ty.weak
                   and (scope.fn.scalar_roles.get(v.name) == "gather" or (not for_update and ch.flip(0.3)))]
        for axis in range(nsub):
            d = x.ty.shape[axis]
            m = d.min_value()
            if m == 0:                      # a zero-length dimension: nothing to pick
                subs.append(("full",))
                shape.append(d)
                continue
            kind = ch.weighted([(3, "full"), (4, "int"), (3, "slice"), (3 if rt else 0, "rt_int"),
                                (2 if rt and m >= 2 else 0, "rt_slice"),
                                (2 if gathers and not gathered and axis == 0 else 0, "gather")])
            if kind == "full":
                subs.append(("full",))
                shape.append(d)
            elif kind == "int":
                i = ch.int(-min(m, 2), min(m, 2) - 1)
                subs.append(("i", str(i), i))
            elif kind == "slice":
                sl = self._static_slice(d, for_update)
                if sl is None:
                    subs.append(("full",))
                    shape.append(d)
                else:
                    (start, stop, step), length = sl
                    subs.append(("s", start, stop, step))
                    shape.append(length)
            elif kind == "rt_int":
                v = ch.pick(rt)
                self.mark_used(scope, v)
                e: E = v
                if ch.flip(0.3) and not v.ty.weak:
                    e = self.binary(scope, ch.pick(["add", "sub"]), v, Lit(1, "1", Ty("i32", (), True)))
                subs.append(("i", e))
            elif kind == "rt_slice":
                v = ch.pick(rt)
                self.mark_used(scope, v)
                length = ch.int(1, min(m, 3))
                subs.append(("d", v, length))
                shape.append(Dim.of(length))
            else:
                g = ch.pick(gathers)
                self.mark_used(scope, g)
                subs.append(("g", g))
                shape.extend(g.ty.shape)
                gathered = True
        if gathered:      # one integer-array index per subscript, the others full slices (docs: Indexing)
            subs = [s if s[0] == "g" else ("full",) for s in subs]
            shape = []
            for s, d in zip(subs, x.ty.shape):
                shape.extend(s[1].ty.shape if s[0] == "g" else [d])
        shape.extend(x.ty.shape[nsub:])
        if r >= 2 and not gathered and not for_update and ch.flip(0.12) and x.ty.shape[-1].min_value() > 0:
            # `x[..., s]`: one subscript for the last axis
            d = x.ty.shape[-1]
            m = d.min_value()
            if ch.flip(0.5):
                i = ch.int(-min(m, 2), min(m, 2) - 1)
                return [("...",), ("i", str(i), i)], tuple(x.ty.shape[:-1])
            sl = self._static_slice(d, for_update)
            if sl is not None:
                (start, stop, step), length = sl
                return [("...",), ("s", start, stop, step)], tuple(x.ty.shape[:-1]) + (length,)
        return subs, tuple(shape)

    def _static_slice(self, d: Dim, for_update: bool):
        ch = self.ch
        if d.is_const:
            n = d.value
            for _ in range(4):
                start = ch.pick([None, 0, 1, -1, -2, 2])
                stop = ch.pick([None, -1, 1, 2, 3, n])
                step = None if for_update else ch.pick([None, None, 1, 2, -1, -2])
                length = len(range(*slice(start, stop, step).indices(n)))
                if length >= 1:
                    return (start, stop, step), Dim.of(length)
            return None
        forms = [(None, None, None), (1, None, None), (None, -1, None), (None, 1, None), (-1, None, None),
                 (0, 2, None)]
        if not for_update:
            forms.append((None, None, -1))
        start, stop, step = ch.pick(forms)
        length = _slice_len(d, start, stop, step)
        if length is None:
            return None
        return (start, stop, step), length

    def e_index(self, scope, depth, seed):
        x = self.first(scope, 0, seed, lambda t: t.rank >= 1)
        if x.ty.rank == 0:
            return x
        if self.ch.flip(0.15) and x.ty.min_size() > 0:
            starts, lengths = self.dyn_starts(scope, x)
            return Op("dynamic_slice", [x] + starts, Ty(x.ty.dtype, tuple(Dim.of(n) for n in lengths)),
                      {"fn": "dynamic_slice", "nfixed": 1, "lengths": lengths,
                       "pos": [RawText(attr_text(tuple(lengths)))]})
        subs, shape = self.subscripts(scope, x)
        if subs is None:
            return x
        return Op("index", [x], Ty(x.ty.dtype, shape), {"subs": subs})

    # -- shape operations ----------------------------------------------------------------------------------
    def e_shape(self, scope, depth, seed):
        ch = self.ch
        x = self.first(scope, depth, seed)
        r = x.ty.rank
        s = x.ty.shape
        kind = ch.weighted([(3 if r >= 2 else 0, "T"), (2 if r >= 2 else 0, "transpose"), (3, "reshape"),
                            (2, "expand_dims"), (2 if any(d == 1 for d in s) else 0, "squeeze"),
                            (2 if r >= 1 else 0, "flip"), (2, "broadcast_to"), (2 if r >= 1 else 0, "concat"),
                            (2, "stack"), (1 if r >= 1 else 0, "tile"), (1 if r >= 1 else 0, "pad")])
        dt = x.ty.dtype
        # shape operations keep their operand's weakness (arrc and jax.numpy: `reshape(2 ** 3, (1,))` is weak)
        def ty(d, shape):
            return Ty(d, tuple(shape), x.ty.weak)
        if kind == "T":
            return Op("T", [x], ty(dt, s[::-1]))
        if kind == "transpose":
            perm = list(range(r))
            for i in range(r - 1, 0, -1):
                j = ch.int(0, i)
                perm[i], perm[j] = perm[j], perm[i]
            kw = {"axes": tuple(perm)} if ch.flip(0.5) else {}
            pos = [] if kw else [tuple(perm)]
            return Op("transpose", [x], ty(dt, tuple(s[p] for p in perm)), {"fn": "transpose", "kw": kw,
                                                                           "pos": pos, "perm": perm})
        if kind == "reshape":
            size = ONE
            for d in s:
                size = size * d
            form = ch.pick(["flat", "hole", "swap", "ones"] if r >= 2 else ["flat", "ones"])
            if form == "flat":
                new = (size,)
                text = ch.pick(["-1", "(-1,)", shape_tuple_text(new)]) if r > 0 else shape_tuple_text(new)
            elif form == "hole":
                new = (s[0], _prod(s[1:]))
                text = f"({s[0]}, -1)"
            elif form == "swap":
                new = (s[-1],) + tuple(s[:-1])
                text = shape_tuple_text(new)
            else:
                new = (ONE,) + tuple(s) + (ONE,)
                text = shape_tuple_text(new)
            return Op("reshape", [x], ty(dt, new), {"fn": "reshape", "pos": [RawText(text)], "new": new})
        if kind == "expand_dims":
            ax = ch.int(0, r)
            new = s[:ax] + (ONE,) + s[ax:]
            axtext = ax if ch.flip(0.7) else ax - (r + 1)
            return Op("expand_dims", [x], ty(dt, new), {"fn": "expand_dims", "pos": [axtext], "ax": ax})
        if kind == "squeeze":
            ones = [i for i, d in enumerate(s) if d == 1]
            ax = ch.pick(ones)
            new = s[:ax] + s[ax + 1:]
            # (without `axis`, every dim must be known to be or not to be 1: constants only)
            kw = {"axis": ax} if ch.flip(0.7) or len(ones) > 1 or not all(d.is_const for d in s) else {}
            if not kw:
                new = tuple(d for d in s if not d == 1)
            return Op("squeeze", [x], ty(dt, new), {"fn": "squeeze", "kw": kw})
        if kind == "flip":
            kw = {}
            if ch.flip(0.6):
                kw["axis"] = ch.int(0, r - 1)
            return Op("flip", [x], ty(dt, s), {"fn": "flip", "kw": kw})
        if kind == "broadcast_to":
            extra = Dim.of(ch.pick(scope.fn.shape_vars)) if ch.flip(0.6) else Dim.of(ch.int(1, 3))
            new = list(s)
            ones = [i for i, d in enumerate(s) if d == 1]
            if ones and ch.flip(0.5):
                new[ch.pick(ones)] = Dim.of(ch.pick(scope.fn.shape_vars))
            new = (extra,) + tuple(new)
            return Op("broadcast_to", [x], ty(dt, new), {"fn": "broadcast_to",
                                                         "pos": [RawText(shape_tuple_text(new))]})
        if kind in ("concat", "stack"):
            same = [v for v in scope.pool if not v.ty.weak and v.ty.rank == r and
                    (v.ty.shape == s or kind == "concat")]
            ax = ch.int(0, r if kind == "stack" else r - 1)
            partners = [v for v in same if all(a == b for i, (a, b) in enumerate(zip(v.ty.shape, s))
                                               if kind == "stack" or i != ax)]
            others = [ch.pick(partners) if partners else x for _ in range(ch.int(1, 2))]
            for o in others:
                self.mark_used(scope, o)
            items = [x] + others
            if ch.flip(0.3):
                items = items[::-1]
            # weak only if every item is (`stack((w, w))` of weak values is weak, as in arrc and jax.numpy:
            # `where(c, x_u32, stack((w, w)))` is u32)
            dt2, weak2 = promote([i.ty for i in items])
            kw = {"axis": ax} if ax != 0 or ch.flip(0.3) else {}
            if kind == "stack":
                new = s[:ax] + (Dim.of(len(items)),) + s[ax:]
            else:
                total = Dim.of(0)
                for it in items:
                    total = total + it.ty.shape[ax]
                new = s[:ax] + (total,) + s[ax + 1:]
            return Op(kind, items, Ty(dt2, new, weak2), {"fn": kind if kind == "stack" or ch.flip(0.7) else "concatenate",
                                                  "kw": kw, "ax": ax})
        if kind == "tile":
            reps = tuple(ch.int(1, 2) for _ in range(ch.int(1, r)))
            full = (1,) * (r - len(reps)) + reps
            new = tuple(d * k for d, k in zip(s, full))
            text = str(reps[0]) if len(reps) == 1 and ch.flip(0.5) else attr_text(reps)
            return Op("tile", [x], ty(dt, new), {"fn": "tile", "pos": [RawText(text)], "reps": full})
        # pad
        widths = [(ch.int(0, 2), ch.int(0, 1)) for _ in range(r)]
        new = tuple(d + a + b for d, (a, b) in zip(s, widths))
        kw = {}
        cv = 0
        if ch.flip(0.4):
            lit = self.literal_for(dt, small=True, allow_float=is_float(dt))
            if dt == "bool":
                lit = Lit(1, "1", Ty("i32", (), True))
            kw["constant_values"] = lit
            cv = lit.value
        # np.pad widths: ((before, after), ...), or (before, after) for a vector
        text = attr_text(tuple(widths)) if r > 1 or ch.flip(0.5) else f"({widths[0][0]}, {widths[0][1]})"
        return Op("pad", [x], ty(dt, new), {"fn": "pad", "pos": [RawText(text)], "kw": kw, "widths": widths,
                                            "cv": cv})

    def e_nn(self, scope, depth, seed):
        ch = self.ch
        x = self.first(scope, depth, seed)
        name = ch.pick(["softmax", "log_softmax", "layer_norm", "one_hot"])
        if name == "one_hot":
            if not is_int(x.ty.dtype):
                x = Op("astype", [x], Ty(ch.pick(["i32", "u8", "i8", "i64"]), x.ty.shape))
            k = ch.int(1, 4)
            dt = self.pick_dtype()
            kw = {"dtype": RawText(dt)} if ch.flip(0.7) else {}
            if not kw:
                dt = "f32"
            return Op("one_hot", [x], Ty(dt, x.ty.shape + (Dim.of(k),)),
                      {"fn": "one_hot", "pos": [k], "kw": kw, "classes": k})
        if x.ty.rank == 0:
            x = Op("expand_dims", [x], Ty(x.ty.dtype, (ONE,)), {"fn": "expand_dims", "pos": [0], "ax": 0})
        r = x.ty.rank
        kw: dict = {}
        ax = r - 1
        if ch.flip(0.4):
            ax = ch.int(0, r - 1)
            kw["axis"] = ax if ch.flip(0.5) else ax - r
        if name == "layer_norm" and ch.flip(0.3):
            kw["epsilon"] = RawText(ch.pick(["1e-3", "0.1", "1e-6"]))
        return Op(name, [x], Ty(float_dtype_for(x.ty.dtype), x.ty.shape), {"fn": name, "kw": kw, "ax": ax})

    def e_arrstack(self, scope, depth, seed):
        """`[a, b]`: an array literal of values (stacked, promoted)."""
        ch = self.ch
        a = self.first(scope, 0, seed)
        same = [v for v in scope.pool if not v.ty.weak and v.ty.shape == a.ty.shape]
        items = [a] + [ch.pick(same) if same else a for _ in range(ch.int(0, 2))]
        if a.ty.rank == 0 and ch.flip(0.4):
            items.append(self.literal_for(a.ty.dtype, small=True))
        for it in items:
            self.mark_used(scope, it)
        dt, weak = promote([i.ty for i in items])      # `[w, w]` of weak values is weak
        return Op("arrstack", items, Ty(dt, (Dim.of(len(items)),) + tuple(a.ty.shape), weak))

    def e_linalg(self, scope, depth, seed):
        ch = self.ch
        ok = lambda t: 1 <= t.rank <= 2 and t.dtype != "bool"  # noqa: E731
        x = self.first(scope, 0, seed, ok)
        if not ok(x.ty):
            return self.e_arith(scope, depth, seed)
        s = x.ty.shape
        kind = ch.pick(["matmul", "dot", "outer", "self", "einsum"])
        if kind == "einsum":
            return self.einsum(scope, x)
        if kind == "outer":
            y = self.pick_operand(scope, lambda t: t.dtype != "bool" and t.rank >= 1) or x
            dt, _ = promote([x.ty, y.ty])
            return Op("outer", [x, y], Ty(dt, (_prod(s), _prod(y.ty.shape))), {"fn": "outer"})
        # partners with a matching contraction dimension
        k = s[-1]
        cands = []
        for v in scope.pool:
            if v.ty.weak or v.ty.dtype == "bool" or not 1 <= v.ty.rank <= 2:
                continue
            if v.ty.rank == 1 and v.ty.shape[0] == k:
                cands.append((v, ()))
            elif v.ty.rank == 2 and v.ty.shape[0] == k:
                cands.append((v, (v.ty.shape[1],)))
        if kind == "self" or not cands:
            y: E = Op("T", [x], Ty(x.ty.dtype, s[::-1])) if x.ty.rank == 2 else x
            tail = (s[0],) if x.ty.rank == 2 else ()
        else:
            y, tail = ch.pick(cands)
            self.mark_used(scope, y)
        dt, _ = promote([x.ty, y.ty])
        shape = tuple(s[:-1]) + tuple(tail)
        if kind == "dot":
            return Op("dot", [x, y], Ty(dt, shape), {"fn": "dot"})
        return Op("matmul", [x, y], Ty(dt, shape))

    def einsum(self, scope: Scope, x: E) -> E:
        ch = self.ch
        s = x.ty.shape
        if x.ty.rank == 1:
            same = [v for v in scope.pool if not v.ty.weak and v.ty.dtype != "bool" and v.ty.shape == s]
            y = ch.pick(same) if same else x
            forms = [("i->", [x], ()), ("i,i->", [x, y], ()), ("i,i->i", [x, y], s), ("i->i", [x], s)]
            others = [v for v in scope.pool if not v.ty.weak and v.ty.dtype != "bool" and v.ty.rank == 1]
            if others:
                z = ch.pick(others)
                forms.append(("i,j->ij", [x, z], (s[0], z.ty.shape[0])))
        else:
            a, b = s
            forms = [("ij->ji", [x], (b, a)), ("ij->i", [x], (a,)), ("ij->j", [x], (b,)), ("ij->", [x], ()),
                     ("ij,ij->ij", [x, x], s)]
            vec = [v for v in scope.pool if not v.ty.weak and v.ty.dtype != "bool" and v.ty.shape == (b,)]
            if vec:
                forms.append(("ij,j->i", [x, ch.pick(vec)], (a,)))
            mats = [v for v in scope.pool if not v.ty.weak and v.ty.dtype != "bool" and v.ty.rank == 2
                    and v.ty.shape[0] == b]
            if mats:
                y = ch.pick(mats)
                forms.append(("ij,jk->ik", [x, y], (a, y.ty.shape[1])))
        spec, args, shape = ch.pick(forms)
        for a_ in args:
            self.mark_used(scope, a_)
        dt, _ = promote([t.ty for t in args])
        return Op("einsum", args, Ty(dt, tuple(shape)), {"spec": spec})

    def e_scan(self, scope, depth, seed):
        ch = self.ch
        x = self.first(scope, depth, seed, lambda t: t.rank >= 1)
        if x.ty.rank == 0:
            return self.e_reduce(scope, depth, x)
        name = ch.pick(SCANS)
        r = x.ty.rank
        kw: dict = {}
        d = x.ty.dtype
        if name in ("sort", "argsort"):
            ax = r - 1
            if ch.flip(0.4):
                ax = ch.int(0, r - 1)
                kw["axis"] = ax if ch.flip(0.6) else ax - r
            out = "i32" if name == "argsort" else d
            return Op(name, [x], Ty(out, x.ty.shape), {"fn": name, "kw": kw, "ax": ax})
        if d == "bool" and name in ("cummax", "cummin"):
            x = Op("astype", [x], Ty("i8", x.ty.shape))
            d = "i8"
        out = accumulator_dtype(d) if name in ("cumsum", "cumprod") else d
        if ch.flip(0.6) or r == 1 and ch.flip(0.5):
            ax = ch.int(0, r - 1)
            kw["axis"] = ax
            return Op(name, [x], Ty(out, x.ty.shape), {"fn": name, "kw": kw, "ax": ax})
        return Op(name, [x], Ty(out, (_prod(x.ty.shape),)), {"fn": name, "kw": kw, "ax": None})

    def e_construct(self, scope, depth, seed):
        ch = self.ch
        fg = scope.fn
        kind = ch.pick(["zeros", "ones", "full", "arange", "eye", "linspace"])
        kconst = next((c for c in self.consts if c[0] == "K"), None)
        dims, texts = [], []
        for _ in range(ch.int(1, 2)):
            if kconst and ch.flip(0.25):            # an integer const in a shape: `zeros((K, n))`
                dims.append(Dim.of(kconst[3]))
                texts.append("K")
            elif ch.flip(0.6):
                v = ch.pick(fg.shape_vars)
                dims.append(Dim.of(v))
                texts.append(v)
            else:
                dims.append(Dim.of(ch.int(1, 3)))
                texts.append(str(dims[-1]))
        dims = tuple(dims)
        dt = self.pick_dtype()
        if kind in ("zeros", "ones"):
            shape_text = texts[0] if len(dims) == 1 and ch.flip(0.5) else \
                ("(" + ", ".join(texts) + ("," if len(texts) == 1 else "") + ")")
            return Op(kind, [], Ty(dt, dims), {"fn": kind, "pos": [RawText(shape_text)], "kw": {"dtype": RawText(dt)}})
        if kind == "full":
            lit = self.literal_for(dt, small=True, allow_float=is_float(dt))
            if dt == "bool":
                lit = Lit(True, "true", Ty("bool"))
            return Op("full", [], Ty(dt, dims), {"fn": "full", "pos": [RawText(shape_tuple_text(dims)), lit],
                                                 "kw": {"dtype": RawText(dt)}, "value": lit.value})
        if kind == "arange":
            if dt == "bool":
                dt = "i32"
            n = dims[0]
            form = ch.pick(["stop", "start_stop"])
            if form == "stop":
                return Op("arange", [], Ty(dt, (n,)), {"fn": "arange", "pos": [RawText(str(n))],
                                                       "kw": {"dtype": RawText(dt)}, "range": (0, n, 1)})
            self.made_empty = self.made_empty or (n - 1).min_value() == 0
            return Op("arange", [], Ty(dt, (n - 1,)), {"fn": "arange", "pos": [RawText("1"), RawText(str(n))],
                                                       "kw": {"dtype": RawText(dt)}, "range": (1, n, 1)})
        if kind == "eye":
            n = dims[0]
            kdiag = ch.pick([0, 0, 1, -1])
            kw = {"dtype": RawText(dt)}
            if kdiag:
                kw["k"] = kdiag
            return Op("eye", [], Ty(dt, (n, n)), {"fn": "eye", "pos": [RawText(str(n))], "kw": kw, "k": kdiag})
        # linspace: float dtypes only (integer linspace floors, left out)
        dt = ch.pick(FLOATS)
        num = ch.int(2, 5)
        a, b = ch.pick([(0, 1), (-1, 1), (0, 10), (2, -3)])
        return Op("linspace", [], Ty(dt, (Dim.of(num),)),
                  {"fn": "linspace", "pos": [RawText(f"{a}.0"), RawText(f"{b}.0"), num], "kw": {"dtype": RawText(dt)},
                   "lin": (float(a), float(b), num)})


_CALLEE_ROLES = {"k": "count", "idx": "gather"}
_PROMOTING = {"add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "powfn", "maximum", "minimum", "atan2",
              "and_b", "or_b", "xor_b", "where", "clip", "ifexp", "eq", "ne", "lt", "le", "gt", "ge"}


def _walk_exprs(f: "Function"):
    def exprs_of_stmt(st):
        if isinstance(st, (Assign, AugAssign)):
            yield st.expr
        elif isinstance(st, TupleAssign):
            yield st.call
        elif isinstance(st, IndexSet):
            yield st.expr
            for sub in st.subs:
                if len(sub) > 1 and isinstance(sub[1], E):
                    yield sub[1]
        elif isinstance(st, (For, While)):
            yield from (st.bounds if isinstance(st, For) else [st.limit])
            for b in st.body:
                yield from exprs_of_stmt(b)
        elif isinstance(st, If):
            yield st.cond
            for b in st.then + st.orelse:
                yield from exprs_of_stmt(b)
        elif isinstance(st, Effect):
            yield from st.args

    def walk(e):
        yield e
        if isinstance(e, (Op, Call)):
            for a in e.args:
                yield from walk(a)
            if isinstance(e, Op):
                for sub in e.attrs.get("subs", []):
                    if len(sub) > 1 and isinstance(sub[1], E):
                        yield from walk(sub[1])
                for v in list(e.attrs.get("kw", {}).values()) + list(e.attrs.get("pos", [])):
                    if isinstance(v, E):
                        yield from walk(v)
    for st in f.body:
        for e in exprs_of_stmt(st):
            yield from walk(e)
    for r in f.results:
        yield from walk(r)


def _fit_literals(node) -> None:
    """Integer literals must fit the dtype their operation computes in (E0211 otherwise)."""
    if not isinstance(node, Op) or node.op not in _PROMOTING:
        return
    args = node.args[1:] if node.op in ("where", "ifexp") else node.args
    dt = node.attrs.get("cdt") or promote([a.ty for a in args])[0]
    if not is_int(dt):
        return
    lo, hi = int_range(dt)
    for a in args:
        if isinstance(a, Lit) and isinstance(a.value, int) and not isinstance(a.value, bool) \
                and not lo <= a.value <= hi:
            a.value = min(max(a.value, lo), hi) if lo >= 0 else min(max(a.value, -3), 3)
            a.text = str(a.value)


def _prod(dims) -> Dim:
    out = ONE
    for d in dims:
        out = out * d
    return out


def _slice_len(d: Dim, start, stop, step):
    """Length of a static slice of a symbolic dimension (step +-1, small bounds), None if not provable >= 1."""
    if step not in (None, 1, -1):
        return None
    if step == -1:
        if start is None and stop is None:
            return d
        return None
    s = Dim.of(0) if start is None else (Dim.of(start) if start >= 0 else d + start)
    e = d if stop is None else (Dim.of(stop) if stop >= 0 else d + stop)
    length = e - s
    if length.min_value() < 1:
        return None
    if (start is not None and start >= 0 and stop is not None and stop >= 0) and d.min_value() < stop:
        return None
    return length


def _unify(pattern: tuple, shape: tuple, bind: dict) -> bool:
    """Bind the callee's shape variables (simple dims only) to the caller's dims."""
    for p, s in zip(pattern, shape):
        if p.is_const:
            if not s == p:
                return False
            continue
        if len(p.terms) != 1 or list(p.terms.values())[0] != 1 or len(list(p.terms)[0]) != 1:
            return False
        var = list(p.terms)[0][0]
        if var in bind:
            if not bind[var] == s:
                return False
        else:
            if s.min_value() < 2:
                return False
            bind[var] = s
    return True


# ---------------------------------------------------------------------------------------------------------
# arguments
def gen_args(ch: Chooser, fn: Function, cfg: Config) -> tuple[list, dict]:
    env = {}
    for v in fn.shape_vars:
        if cfg.big_dims and ch.flip(0.08):
            env[v] = ch.pick([127, 128, 130, 200, 256, 300])
        else:
            env[v] = ch.int(2, 5)
    seed = ch.int(0, 2 ** 31 - 1)
    rng = np.random.default_rng(seed)
    args = []
    for name, t in fn.params:
        shape = tuple(d.eval(env) for d in t.shape)
        role = None
        if t.rank == 0 and name == "k":
            role = "count"
        elif t.rank == 0 and name == "i":
            role = "index"
        elif name == "idx":
            role = "gather"
        args.append(sample_array(rng, t.dtype, shape, role, env))
    return args, env


def sample_array(rng, dt: str, shape: tuple, role=None, env=None) -> np.ndarray:
    if role == "count":
        lo, hi = int_range(dt)
        return np.asarray(rng.integers(max(lo, -1), min(hi, 4) + 1), NP[dt])
    if role == "index":
        lo, hi = int_range(dt)
        return np.asarray(rng.integers(max(lo, -9), min(hi, 9) + 1), NP[dt])
    if role == "gather":
        # distinct, in range for the smallest dimension (>= 2), some counted from the end
        vals = rng.permutation(2)[: shape[0]]
        return np.asarray(vals, NP[dt]).reshape(shape)
    if dt == "bool":
        return np.asarray(rng.random(shape) < 0.5)
    if is_int(dt):
        lo, hi = int_range(dt)
        mode = rng.random()
        if mode < 0.65:
            vals = rng.integers(max(lo, -6), min(hi, 9) + 1, size=shape)
        elif mode < 0.85:
            vals = rng.integers(max(lo, -300), min(hi, 300) + 1, size=shape)
        else:
            edges = np.array([lo, hi, 0, 1, lo + 1, hi - 1, -1 if lo < 0 else 2], dtype=object)
            vals = rng.choice(edges, size=shape)
            vals = np.where(rng.random(shape) < 0.5, vals, rng.integers(max(lo, -6), min(hi, 9) + 1, size=shape))
        return np.asarray(np.array(vals, dtype=object).astype(NP[dt]) if np.ndim(vals) else vals, NP[dt]).reshape(shape) \
            if shape else np.asarray(int(vals), NP[dt])
    # floats
    mode = rng.random()
    if mode < 0.4:
        vals = rng.integers(-16, 17, size=shape) / 4.0           # exact in every float dtype
    elif mode < 0.8:
        vals = rng.normal(0.0, 2.0, size=shape)
    else:
        vals = rng.uniform(-50, 50, size=shape)
    vals = np.asarray(vals, np.float64)
    if rng.random() < 0.3 and vals.size:
        special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5,
                            {"f16": 6e4, "bf16": 1e30, "f32": 1e30, "f64": 1e200}[dt]])
        mask = rng.random(shape) < 0.25
        vals = np.where(mask, rng.choice(special, size=shape), vals)
    from .reference import round_to
    return np.asarray(round_to(dt, np.asarray(vals, np.float64)))


# ---------------------------------------------------------------------------------------------------------
# entry points
def generate(ch: Chooser, cfg: Config | None = None, label: str = "") -> Case:
    cfg = cfg or Config()
    gen = Gen(ch, cfg)
    program = gen.program()
    args, env = gen_args(ch, program.function(program.entry), cfg)
    return Case(program, args, env, label)


def case_from_seed(seed: int, cfg: Config | None = None) -> tuple[Case, list]:
    ch = RandomChooser(seed)
    case = generate(ch, cfg, label=f"seed={seed}")
    return case, ch.record


def case_from_choices(choices: list, cfg: Config | None = None) -> tuple[Case, list]:
    ch = ReplayChooser(choices)
    case = generate(ch, cfg, label="replay")
    return case, ch.record


def cases(cfg: Config | None = None):
    """A hypothesis strategy of `Case`s (shrinks towards fewer statements and simpler operations)."""
    from hypothesis import strategies as st

    @st.composite
    def _cases(draw):
        return generate(DataChooser(draw), cfg, label="hypothesis")
    return _cases()
