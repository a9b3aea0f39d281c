"""The operation table's machinery: `register`, the tables (`BUILTINS`, `OPERATORS`), argument binding,
the rule context `CallCx`, and the shape and dtype helpers rules share.

A rule is a function `rule(cx, **args) -> value`. It checks its arguments and computes the
result type; while lowering (`cx.lowering`), it also emits StableHLO through `cx.value(type, build)`.
Families (unary float math, binary arithmetic, reductions, ...) share one generic rule. The rules live
in the `ops_*` modules, which register into these tables; `builtins.py` assembles them.
"""
from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .diagnostics import Label
from .types import (DTYPES, ArrayType, Dim, DType, int_range, lossy_promotion, promote, too_large, true_divide_dtype,
                    wide_int_dtype)
from .values import ArrError, DTypeVal, TupleVal, Val, describe


@dataclass
class Builtin:
    name: str
    fn: Callable
    params: tuple            # parameter names, in order
    defaults: dict           # name -> default (Python value) for optional parameters
    method: bool = False     # called as x.name(...)
    display: str = ""        # the name diagnostics and MLIR locations use ("add" for `+`)
    doc: str = ""            # one line: what it computes, NumPy-style ("elementwise e**x")
    family: str = ""         # the group of docs/language.md's builtin list (named builtins)
    words: str | None = None  # how a guard report names the operation ("addition"); None: `display`
    keys: bool = False       # takes PRNG keys (random builtins, shape queries, selection); others refuse them
    nullable: frozenset = frozenset()   # parameters a keyword `None` may be given (NumPy's `axis=None`)


# The groups of docs/language.md "## Builtins", in order (a named builtin's `family` is one of these).
FAMILIES = ("Elementwise", "Reductions", "Construction", "Shape", "Linear algebra", "Scans and sorting",
            "Selection", "Indexing", "Casts", "Neural-net helpers", "Random numbers")


BUILTINS: dict[str, Builtin] = {}
OPERATORS: dict[str, Builtin] = {}
_MISSING = object()

# Keywords of NumPy's or JAX's function of the same name that arr's spells otherwise or has not: (builtin,
# keyword) -> the help of E0103.
JAX_KEYWORDS = {
    ("pad", "mode"): "arr's `pad` pads with a constant (`constant_values=`, NumPy's default mode); for another "
                     "mode build the border with slices and `concat` (edge: `concat((x[:1], x, x[-1:]))`)",
    ("conv", "dimension_numbers"): "arr's `conv` names the dimensions with `layout=`, e.g. "
                                   "`layout=(\"NHWC\", \"HWIO\", \"NHWC\")` (docs/convolution.md)",
    ("bincount", "minlength"): "write `length=`: the number of bins, known at compile time (jnp.bincount's); "
                               "values at or past it are dropped, where NumPy's `minlength` would add bins",
    **{(name, "kind"): "leave it out: arr's sort is stable (NumPy's `kind=\"stable\"`)"
       for name in ("sort", "argsort")},
}
# (rule, parameter) -> the help where a call leaves that parameter out: NumPy's forms with fewer arguments.
MISSING_HELP = {
    ("where", "x"): "NumPy's one-argument `where(mask)` gives the indices of the true elements: in arr that is "
                    "`nonzero(mask, size=n, fill=-1)`, padded to a size known at compile time",
}


def register(*names: str, params: str = "x", method: bool = False, table: dict | None = None,
             display: str | None = None, doc: str = "", family: str = "", words: str | None = None,
             keys: bool = False, nullable: tuple = ()):
    """Register `fn` under each of `names`; `params` reads like a Python signature: "x, axis=None".

    `display` is the name of the op in diagnostics and locations (default: the registered name; operators
    must give one), `doc` one line saying what it computes, `family` its group in the docs (both required
    for a named builtin, one whose name starts with a letter), `words` what a guard report calls it, `keys`
    whether its arguments may be PRNG keys (`refuse_keys` stops the others), `nullable` the parameters
    that take `None` besides those whose default is None (sort's `axis=None` flattens, its default is -1)."""
    operator = table is OPERATORS
    if operator and not display:
        raise TypeError(f"operator {names[0]!r} registered without a display name")
    if "\n" in doc:
        raise TypeError(f"the doc of {names[0]!r} must be one line")
    for name in names:
        if not operator and name[:1].isalpha():
            if not doc.strip():
                raise TypeError(f"builtin {name!r} registered without a doc line")
            if family not in FAMILIES:
                raise TypeError(f"builtin {name!r} registered with family {family!r}, not one of {FAMILIES}")
    order, defaults = [], {}
    for p in [p.strip() for p in params.split(",") if p.strip()]:
        name, _, default = (part.strip() for part in p.partition("="))
        order.append(name)
        if default:
            defaults[name] = ast.literal_eval(default)     # None, True, False, numbers
    def wrap(fn):
        code = fn.__code__      # rules are called positionally, in the order of `params`
        if code.co_varnames[1:1 + len(order)] != tuple(order):
            raise TypeError(f"rule {fn.__name__} takes {code.co_varnames[1:code.co_argcount]}, "
                            f"registered as {params!r}")
        for name in names:
            (OPERATORS if operator else BUILTINS)[name] = Builtin(
                name, fn, tuple(order), defaults, method, display or name, doc, family, words, keys,
                frozenset(nullable) | {p for p, d in defaults.items() if d is None})
        return fn
    return wrap


def bind_arguments(rule: Builtin, args: list, kwargs: dict, cx: "CallCx") -> list:
    """The arguments of a call of `rule`, in the order of its parameters (defaults filled in)."""
    cx.params = rule.params
    if not kwargs and len(args) == len(rule.params):        # the common case: all positional
        cx.args = args
        return args
    bound = {}
    if len(args) > len(rule.params):
        raise ArrError("E0103", f"`{rule.name.lstrip('.')}` takes at most {len(rule.params)} argument(s), "
                                f"{len(args)} given", cx.span, "too many arguments",
                       notes=[f"parameters: {', '.join(rule.params)}"])
    for name, value in zip(rule.params, args):
        bound[name] = value
    for name, value in kwargs.items():
        if name not in rule.params:
            raise ArrError("E0103", f"`{rule.name.lstrip('.')}` has no parameter `{name}`", cx.kw_spans.get(name, cx.span),
                           "unknown keyword", notes=[f"parameters: {', '.join(rule.params)}"],
                           help=JAX_KEYWORDS.get((rule.name, name)))
        if name in bound:
            raise ArrError("E0103", f"`{name}` given twice", cx.kw_spans.get(name, cx.span), "given again here")
        bound[name] = value
        cx.spans_by_name[name] = cx.kw_spans.get(name, cx.span)
    for name in rule.params:
        if name not in bound:
            if name not in rule.defaults:
                raise ArrError("E0103", f"missing argument `{name}` in call to `{rule.name.lstrip('.')}`", cx.span,
                               "missing argument", notes=[f"parameters: {', '.join(rule.params)}"],
                               help=MISSING_HELP.get((rule.name, name)))
            bound[name] = rule.defaults[name]
    cx.args = [bound[name] for name in rule.params]
    return cx.args


def refuse_keys(rule: Builtin, args: list, kwargs: dict, cx: "CallCx") -> None:
    """E0201 where a rule that does not take keys is given one: keys are not numbers."""
    if not kwargs:
        for v in args:
            if type(v) is Val and v.type.dtype.is_key:
                break
        else:
            return              # (the common case, once per operation: no list of spans to build)
    spans = [cx.at(i) for i, v in enumerate(args) if isinstance(v, Val) and v.type.dtype.is_key]
    spans += [cx.kw_spans.get(k, cx.span) for k, v in kwargs.items() if isinstance(v, Val) and v.type.dtype.is_key]
    if spans:
        name = rule.name.lstrip(".").removeprefix("unary")          # `+`, `sum`, `astype`, `-`
        raise ArrError("E0201", f"`{name}` cannot take a key: keys are not numbers", spans[0],
                       "a key", help="draw numbers from it (`uniform(k, shape)`, `normal(k, shape)`, ...), or "
                                     "read its two u32 words with `key_data(k)`")


def weak_literal_fits(t: ArrayType, dtype: DType) -> bool:
    """Whether a weakly typed value of type `t` may take `dtype` implicitly (int literal -> any number)."""
    if t.dtype.is_float:
        return dtype.is_float
    return dtype.is_float or dtype.is_int or t.dtype == dtype


class CallCx:
    """What a rule sees of its call site."""
    __slots__ = ("walk", "node", "arg_spans", "kw_spans", "spans_by_name", "params", "args")

    def __init__(self, walk, node, arg_spans: list, kw_spans: dict, spans_by_name: dict | None = None):
        self.walk = walk
        self.node = node
        self.arg_spans = arg_spans
        self.kw_spans = kw_spans
        self.spans_by_name = {} if spans_by_name is None else spans_by_name     # keyword arguments
        self.params: tuple = ()         # the rule's parameter names, once its arguments are bound
        self.args: list = []            # and its arguments, in that order

    @property
    def lowering(self) -> bool:
        return self.walk.lowering is not None

    @property
    def span(self):
        return self.node.span

    def at(self, name_or_index) -> object:
        if isinstance(name_or_index, int):
            return self.arg_spans[name_or_index] if name_or_index < len(self.arg_spans) else self.span
        span = self.spans_by_name.get(name_or_index)
        if span is None and name_or_index in self.params:      # a positional argument
            i = self.params.index(name_or_index)
            span = self.arg_spans[i] if i < len(self.arg_spans) else None
        return span or self.span

    def error(self, code: str, message: str, label: str = "", at=None, **kw):
        raise ArrError(code, message, self.at(at) if at is not None else self.span, label, **kw)

    def warn(self, code: str, message: str, label: str = "", at=None, **kw):
        err = ArrError(code, message, self.at(at) if at is not None else self.span, label, **kw)
        self.walk.report(err.diag)

    def value(self, t: ArrayType, build: Callable | None = None, static=None) -> Val:
        problem = too_large(t)
        if problem:        # before anything is emitted or allocated
            self.error("E0215", f"array too large: {problem}", "too large",
                       help="use smaller sizes (ARRC_MAX_ARRAY_BYTES sets the limit)")
        return Val(t, build() if (self.lowering and build is not None) else None, static)

    def ir(self, v: Val, dtype: DType | None = None, shape=None):
        value, t = v.ir, v.type
        if value is not None and (dtype is None or dtype is t.dtype) and (shape is None or shape is t.shape):
            return value            # (most operands: already of the op's dtype and shape)
        if value is None and t.weak and t.dtype.is_int:     # an integer literal takes its dtype here
            at = next((i for i, a in enumerate(self.args) if a is v), None)
            check_literal(self, v, dtype or v.type.dtype, at, literals_only=True)
        if shape is None or shape == v.type.shape:       # (often the same tuple: no broadcast to check)
            return self.walk.materialize(v, dtype)
        return self.walk.materialize(v, dtype, concrete(shape))

    # -- argument readers ----------------------------------------------------------------
    def array(self, v, name) -> Val:
        if not isinstance(v, Val):
            self.error("E0210", f"`{name}` must be an array, found {describe(v)}", f"this is {describe(v)}", at=name)
        return v

    def dtype(self, v, name) -> DType:
        if isinstance(v, DTypeVal) and v.dtype.is_key:
            self.error("E0201", "`key` is not a dtype of numbers", "a key dtype", at=name,
                       help="make keys with `key(seed)`, `split(k)` or `wrap_key(u32 words)`")
        if isinstance(v, DTypeVal):
            return v.dtype
        self.error("E0210", f"`{name}` must be a dtype such as f32, found {describe(v)}", "not a dtype", at=name)

    def static_int(self, v, name) -> Dim:
        """A compile-time integer (literal, const, shape variable or arithmetic of those)."""
        if isinstance(v, int) and not isinstance(v, bool):       # a rule's Python default
            return Dim.const(v)
        if isinstance(v, Val) and v.type.rank == 0 and isinstance(v.static, Dim):
            return v.static
        if isinstance(v, Val) and v.type.rank == 0 and v.type.dtype.is_int:
            self.error("E0207", f"`{name}` must be known at compile time, but it is a run-time value", 
                       "depends on run-time values", at=name,
                       help="use a shape variable (a dimension of a parameter), a `const`, or a literal")
        self.error("E0204", f"`{name}` must be an integer, found {describe(v)}", "not an integer", at=name)

    def count(self, v, name) -> Dim:
        """A compile-time integer that must not be negative (a size, a number of things)."""
        d = self.static_int(v, name)
        if d.is_const and d.value < 0:
            self.error("E0204", f"`{name}` must not be negative, found {d.value}", "negative", at=name)
        return d

    def static_ints(self, v, name) -> list[Dim]:
        """An int or a tuple of ints, known at compile time (shapes, axes, repetitions)."""
        if isinstance(v, TupleVal):
            return [self.static_int(i, name) for i in v.items]
        listed = listed_ints(v)
        if listed is not None and listed.ndim == 1:
            return [Dim.const(int(i)) for i in listed]          # `zeros([2, 3])`: a list, as NumPy takes one
        if isinstance(v, Val) and v.type.rank == 1 and v.type.dtype.is_int:    # (`[n, 3]`: a run-time array)
            text = source_text(self, self.at(name)) or ""
            self.error("E0204", f"`{name}` must be compile-time integers, found {describe(v)}",
                       "an array, not a tuple", at=name, help="write it as a tuple: " + (
                           f"`({text[1:-1]})`" if text.startswith("[") and text.endswith("]") else "`(n, 3)`"))
        return [self.static_int(v, name)]

    def const_int(self, v, name) -> int:
        d = self.static_int(v, name)
        if not d.is_const:
            self.error("E0204", f"`{name}` must be an integer literal or const here, found `{d}`", "symbolic", at=name)
        return d.value

    def axes(self, v, rank: int, name: str = "axis") -> list[int] | None:
        """Normalized axes (None for all); negative axes count from the end."""
        if v is None:
            return None
        out = []
        for a in (self.static_ints(v, name)):
            if not a.is_const:
                self.error("E0204", f"`{name}` must be a literal integer", at=name)
            ax = a.value
            if not -rank <= ax < rank:
                self.error("E0204", f"axis {ax} is out of range for an array of rank {rank}",
                           f"rank is {rank}", at=name)
            ax %= rank if rank else 1
            if ax in out:
                self.error("E0204", f"axis {ax} appears twice", at=name)
            out.append(ax)
        return out

    def bool_flag(self, v, name) -> bool:
        if isinstance(v, bool):
            return v
        if isinstance(v, Val) and v.type.dtype.is_bool and isinstance(v.static, (bool, np.bool_)):
            return bool(v.static)
        self.error("E0204", f"`{name}` must be `true` or `false`", "not a literal bool", at=name)

    def shape(self, v, name) -> tuple:
        dims = tuple(self.static_ints(v, name))
        for d in dims:
            if d.is_const and d.value < 0:
                self.error("E0204", f"negative dimension {d.value} in `{name}`", at=name)
        return dims


def listed_ints(v) -> np.ndarray | None:
    """The values of a list literal of integers (`[2, 3]`, `[[0, 2], [1, 0]]`), where NumPy takes a list
    of axes or sizes; else None."""
    if isinstance(v, Val) and v.type.weak and v.type.dtype.is_int and isinstance(v.static, np.ndarray) \
            and v.static.ndim:
        return v.static
    return None


def concrete(shape) -> tuple[int, ...]:
    return tuple(d.value if isinstance(d, Dim) else int(d) for d in shape)


# ---- shapes and dtypes of elementwise operations ----------------------------------------
def broadcast_shapes(cx: CallCx, a: ArrayType, b: ArrayType, what: str) -> tuple:
    ra, rb = a.shape[::-1], b.shape[::-1]
    out = []
    for i in range(max(len(ra), len(rb))):
        da = ra[i] if i < len(ra) else Dim.const(1)
        db = rb[i] if i < len(rb) else Dim.const(1)
        if da == db or db == 1:
            out.append(da)
        elif da == 1:
            out.append(db)
        else:
            cx.error("E0202", f"cannot broadcast {a} with {b} in {what}",
                     f"dimension {da} does not match {db}",
                     labels=[Label(cx.at(0), f"this is {a}"), Label(cx.at(1), f"this is {b}")],
                     notes=["shapes broadcast when, aligned from the right, each pair of dimensions is equal "
                            "or one of them is 1"] + (["two different shape variables never match"]
                                                      if da.variables and db.variables else []))
    return tuple(out[::-1])


def check_literal(cx: CallCx, v: Val, dtype: DType, at, literals_only: bool = False,
                  stored_into: str | None = None) -> None:
    """A weak literal must be representable in the dtype it takes (JAX raises OverflowError too).
    `literals_only`: no operand gave that dtype (`return 2 ** 40` as i32), so none can be cast.
    `stored_into`: the literal is stored into that array (`x[0] = 300`), which the help widens."""
    if not (v.type.weak and v.static is not None):
        return
    if dtype.is_int or dtype.is_bool:
        value = v.static_int
        if isinstance(v.static, float):
            cx.error("E0201", f"float literal {v.static} cannot take dtype {dtype}", "a float", at=at)
        values = (value, value)
        if isinstance(v.static, np.ndarray) and v.static.size and v.static.dtype.kind in "iuO":
            values = (int(v.static.min()), int(v.static.max()))
            value = values[1] if values[1] > int_range(dtype)[1] else values[0]
        problem = None if value is None else literal_out_of_range(value, dtype)
        if problem is not None:
            help = _wide_literal_help(cx, values, at) if literals_only else \
                f"store it into a wider array: `{stored_into} = {stored_into}.astype(i64)` first" if stored_into \
                else "cast the other operand, e.g. `.astype(i64)`"
            cx.error("E0211", *problem, at=at, help=help)
    elif dtype.is_float and isinstance(v.static, (float, int)) and _rounds_to_inf(float(v.static), dtype.np):
        import ml_dtypes
        biggest = float(ml_dtypes.finfo(dtype.np).max)
        wider = f"write `f64({v.static!r})` where f64 is declared," if literals_only else \
            f"store it into a wider array (`{stored_into} = {stored_into}.astype(f64)` first)" if stored_into else \
            "compute in a wider dtype (`.astype(f64)` on the other operand)"
        cx.warn("W0005", f"literal {v.static!r} is too large for {dtype} and becomes {'-' if v.static < 0 else ''}inf",
                f"inf in {dtype}", at=at, help=f"the largest {dtype} is {biggest:.6g}; {wider} or write `inf` if meant")


def require_literal_fits(v: Val, dtype: DType, span) -> None:
    """E0211 where an integer literal becomes a run-time value of `dtype` that cannot hold it outside an
    operation (a loop's or a run-time `if`'s variable, a function's argument): in its i32 it would wrap,
    where JAX raises OverflowError (`s = 3000000000` before `for ...: s = s + 1`, `g(3000000000)`)."""
    value = v.static_int if v.type.weak and dtype.is_int else None
    problem = None if value is None else literal_out_of_range(value, dtype)
    if problem is not None:
        message, label = problem
        raise ArrError("E0211", message, span, label, help=f"give it a dtype that holds it, e.g. `i64({value})`")


def literal_out_of_range(value: int, dtype: DType) -> tuple[str, str] | None:
    """E0211's message and label where the integer literal `value` does not fit in `dtype`, else None."""
    lo, hi = int_range(dtype)
    if lo <= value <= hi:
        return None
    return f"literal {value} is out of range for {dtype} ({lo}..{hi})", f"does not fit in {dtype}"


@functools.lru_cache(maxsize=4096)
def _rounds_to_inf(value: float, dtype: np.dtype) -> bool:
    """Whether a finite `value` becomes an infinity in `dtype` (cached: a program repeats its literals, and
    the NumPy conversion costs ~7 us)."""
    if not np.isfinite(value):
        return False
    with np.errstate(over="ignore"):
        return bool(np.isinf(np.asarray(value).astype(dtype)))


def source_text(cx: CallCx, span) -> str | None:
    """The source text at `span` (on one line) in the program of `cx`, or None."""
    return text_at(cx.walk.program.sources, span)


def text_at(sources: dict, span) -> str | None:
    """The source text at `span` (on one line) among `sources` (file name -> Source), or None."""
    if span is None or span.line != span.end_line:
        return None
    source = sources.get(span.file)
    return source.line_text(span.line)[span.col - 1:span.end_col - 1] if source is not None else None


def _wide_literal_help(cx: CallCx, values: tuple[int, int], at) -> str:
    """E0211's help where literals alone make the values (their least and greatest): one of them written in
    a 64-bit dtype that holds both."""
    from .ast import Binary             # (the module's `ast` is Python's)
    wide = wide_int_dtype(*values)
    if wide is None:
        held = " and ".join(str(v) for v in dict.fromkeys(values))
        return f"no integer dtype holds {held}: write a float (`{values[-1]}.0`) if an approximation is meant"
    node = cx.node
    if isinstance(node, Binary) and source_text(cx, node.lhs.span) and source_text(cx, node.rhs.span):
        written = f"{wide}({source_text(cx, node.lhs.span)}) {node.op} {source_text(cx, node.rhs.span)}"
    else:
        written = f"{wide}({source_text(cx, cx.at(at)) or '...'})"
    return f"only literals make this value, so there is no operand to cast: write `{written}` to compute it " \
           f"in {wide} (and use it where {wide} is expected)"


def elementwise_type(cx: CallCx, args: list, what: str, exact: bool = False) -> tuple[DType, bool, tuple]:
    """Promoted dtype, weakness and broadcast shape of elementwise operands (with checks and warnings).
    `exact`: the op of these literals is computed exactly at compile time, so they are checked as its result,
    where that takes a dtype (`x_i64 + 2**40 * 3`, `u64(2**64 - 1)`), not each in i32."""
    types = [a.type for a in args]
    if len(types) == 2 and not types[0].weak and (types[0] is types[1] or types[0] == types[1]):
        return types[0].dtype, False, types[0].shape    # (one dtype, one shape: nothing to promote or check)
    shape = types[0].shape
    for i, t in enumerate(types[1:], 1):
        if not t.shape:
            continue                    # a scalar broadcasts to any shape
        if not shape:
            shape = t.shape
        elif t.shape != shape:
            shape = broadcast_shapes(_pair_cx(cx, 0, i), ArrayType(types[0].dtype, shape), t,
                                     what)
    dtype, weak = promote(types)
    for i, a in enumerate(args if not (exact and weak) else ()):
        check_literal(cx, a, dtype, i, literals_only=weak)
    lossy = lossy_promotion(types, dtype)
    if lossy is not None:
        others = " and ".join(str(t.dtype) for t in types)
        cx.warn("W0001", f"implicit promotion of {others} to {dtype} may lose precision", f"computed in {dtype}",
                help=f"convert explicitly, e.g. `.astype({dtype})`, to show it is intended")
    return dtype, weak, shape


def _pair_cx(cx: CallCx, i, j) -> CallCx:
    if i is None or (i == 0 and j == 1 and len(cx.arg_spans) >= 2):     # (cx.at(0), cx.at(1) already)
        return cx
    return CallCx(cx.walk, cx.node, [cx.at(i), cx.at(j)], cx.kw_spans, {name: cx.at(name) for name in cx.params})


def elementwise(cx: CallCx, args: list, dtype: DType, shape, build) -> list:
    """Materialize the operands of an elementwise op in `dtype`, broadcast to `shape`."""
    return [cx.ir(a, dtype, shape) for a in args]


def float_dtype_for(dt: DType) -> DType:
    """The float dtype that math on `dt` computes in (ints: f32, or f64 for 64-bit ints)."""
    return dt if dt.is_float else true_divide_dtype(dt)


def accumulation_dtype(dt: DType) -> DType:
    """16-bit floats accumulate in f32 (as jax.numpy's reductions), then round back once."""
    return DTYPES["f32"] if dt.is_float and dt.bits == 16 else dt
