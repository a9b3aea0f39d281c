"""dtypes, symbolic dimensions (polynomials over shape variables), array types and promotion."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import lru_cache

import ml_dtypes
import numpy as np


@dataclass(frozen=True, eq=False, slots=True)    # one instance per dtype (DTYPES): equality is identity
class DType:
    name: str
    kind: str          # "bool" | "int" | "uint" | "float" | "key"
    bits: int
    np: object         # numpy dtype
    # What rules ask of every operand, as fields rather than properties (read several times per operation)
    is_float: bool = field(init=False, repr=False)
    is_int: bool = field(init=False, repr=False)
    is_bool: bool = field(init=False, repr=False)
    is_key: bool = field(init=False, repr=False)
    is_64bit: bool = field(init=False, repr=False)

    def __post_init__(self):
        for name, value in [("is_float", self.kind == "float"), ("is_int", self.kind in ("int", "uint")),
                            ("is_bool", self.kind == "bool"), ("is_key", self.kind == "key"),
                            ("is_64bit", self.bits == 64)]:
            object.__setattr__(self, name, value)

    def __str__(self) -> str:
        return self.name

    def __reduce__(self):       # copies and unpickled dtypes are the one instance (equality is identity)
        return dtype_named, (self.name,)


DTYPES: dict[str, DType] = {d.name: d for d in [
    DType("bool", "bool", 1, np.dtype(np.bool_)),
    DType("i8", "int", 8, np.dtype(np.int8)), DType("i16", "int", 16, np.dtype(np.int16)),
    DType("i32", "int", 32, np.dtype(np.int32)), DType("i64", "int", 64, np.dtype(np.int64)),
    DType("u8", "uint", 8, np.dtype(np.uint8)), DType("u16", "uint", 16, np.dtype(np.uint16)),
    DType("u32", "uint", 32, np.dtype(np.uint32)), DType("u64", "uint", 64, np.dtype(np.uint64)),
    DType("f16", "float", 16, np.dtype(np.float16)), DType("bf16", "float", 16, np.dtype(ml_dtypes.bfloat16)),
    DType("f32", "float", 32, np.dtype(np.float32)), DType("f64", "float", 64, np.dtype(np.float64)),
]}
BOOL, I32, I64, U32, U64, F32, F64 = (DTYPES[n] for n in ("bool", "i32", "i64", "u32", "u64", "f32", "f64"))
_BY_NUMPY = {d.np: d for d in DTYPES.values()}
# A PRNG key (LANGUAGE.md section 12) is one 64-bit element holding Threefry's two 32-bit key words, the
# first in the high half: every shape operation (indexing, loops, branches, tuples) carries keys as it
# carries numbers, and `key_data` unpacks them to JAX's u32[..., 2]. Not in DTYPES: keys are not numbers
# (no arithmetic, no casts, no NumPy dtype of their own).
KEY = DType("key", "key", 64, np.dtype(np.uint64))
TYPE_NAMES: dict[str, DType] = {**DTYPES, KEY.name: KEY}     # the element types a type may name
# Complex numbers are no arr type: they exist for StableHLO from elsewhere (`arrc run` of a JAX export
# taking or returning complex64/complex128), which arrc runs, guards and prints.
COMPLEX_DTYPES: dict[str, DType] = {d.name: d for d in [
    DType("complex64", "complex", 64, np.dtype(np.complex64)),
    DType("complex128", "complex", 128, np.dtype(np.complex128))]}


def pack_key_words(data: np.ndarray) -> np.ndarray:
    """Host keys (uint64, as KEY holds them) from their u32 words, a `[..., 2]` array (`jax.random.key_data`)."""
    data = np.asarray(data, np.uint32)
    return (data[..., 0].astype(np.uint64) << np.uint64(32)) | data[..., 1].astype(np.uint64)


def typed_key_data(value):
    """The uint32 words `[..., 2]` of a JAX typed key array of Threefry-2x32 keys (`jax.random.key_data`,
    traced or not); None for any other value; TypeError for another PRNG's keys. (A typed key exists only
    once jax is imported: it is not imported here.)"""
    import sys
    jax = sys.modules.get("jax")
    dtype = getattr(value, "dtype", None)
    if jax is None or dtype is None or not jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        return None
    impl = str(jax.random.key_impl(value))
    if "threefry2x32" not in impl:
        raise TypeError(f"a key of the {impl} PRNG; arr's keys are Threefry-2x32")
    return jax.random.key_data(value)


def host_keys(value) -> np.ndarray | None:
    """The words (uint64, as KEY holds them) of a JAX typed key array of Threefry-2x32 keys; None for any
    other value (`typed_key_data`)."""
    data = typed_key_data(value)
    return None if data is None else pack_key_words(np.asarray(data))


def key_words(keys: np.ndarray) -> np.ndarray:
    """The u32 words (`[..., 2]`) of host keys held as uint64."""
    keys = np.asarray(keys, np.uint64)
    return np.stack([(keys >> np.uint64(32)).astype(np.uint32), keys.astype(np.uint32)], axis=-1)


def dtype_named(name: str) -> DType:
    return TYPE_NAMES[name]


def dtype_of_numpy(np_dtype) -> DType | None:
    return _BY_NUMPY.get(np.dtype(np_dtype))


def numpy_dtype_name(dt: DType) -> str:
    """How NumPy prints `dt` (`x.dtype` shown by `print` and the REPL): `float32`, `bfloat16`; a key
    `key<fry>`, as JAX prints a typed key's dtype."""
    return "key<fry>" if dt.is_key else dt.np.name


def int_range(dt: DType) -> tuple[int, int]:
    if dt.kind == "bool":
        return 0, 1
    if dt.kind == "uint":
        return 0, 2 ** dt.bits - 1
    return -(2 ** (dt.bits - 1)), 2 ** (dt.bits - 1) - 1


def wide_int_dtype(lo: int, hi: int) -> DType | None:
    """The first of i64 and u64 that holds every integer from `lo` to `hi`; None where neither does."""
    return next((dt for dt in (DTYPES["i64"], DTYPES["u64"]) if int_range(dt)[0] <= lo and hi <= int_range(dt)[1]),
                None)


def wrap_int(value: int, dt: DType) -> int:
    """`value` as the integer dtype `dt` holds it: modulo 2^bits, as the hardware wraps."""
    lo, hi = int_range(dt)
    return (value - lo) % (hi - lo + 1) + lo


# ---- dimensions ----------------------------------------------------------------
MAX_DIM_WORK = 16384    # monomial factors one product of Dims may compute (`(n + 1)**16` squared is 17 * 17 * 33)
MAX_DIM_DEGREE = 64     # factors of one monomial at most (`n * n * ...`)
MAX_DIM_BITS = 1100     # a coefficient's bits at most, as MAX_POWER_BITS for integer literals (ops_elementwise)
MAX_NAME_CHARS = 80     # an opaque dimension's name at most, its text beyond that replaced by a digest


class OpaqueName(str):
    """The name of an opaque dimension: a variable of the polynomial that remembers how it was made, so that
    substituting its shape variables recomputes it (`recompute`). Equality is that of the name, a function
    of the structure: a long one ends in a digest of its text, as names nested in names (`t = t // 3 + t // 5`
    repeated) would double in length at each step."""

    def __new__(cls, text: str, variables: frozenset):
        if len(text) > MAX_NAME_CHARS:
            digest = hashlib.blake2b(text.encode(), digest_size=8).hexdigest()
            text = f"{text[:30]} ... {text[-20:-1]} #{digest})"
        self = super().__new__(cls, text)
        self.shape_variables = variables     # once, here: a walk into the parts would repeat shared ones
        return self


class QuotientName(OpaqueName):
    """An opaque dimension `a // b` that is no polynomial (`dm // h`, `(n + 1) // 2`): with dm = 64, h = 8
    it is 8; with the caller's dm = e, h = k it is `(e // k)`. Equal to the plain variable of the same
    name, which the checker's folding of `a // b` in expressions made before (values and types name the
    same dimension the same way)."""

    num: "Dim"
    den: "Dim"

    def __new__(cls, num: "Dim", den: "Dim") -> "QuotientName":
        self = super().__new__(cls, f"({_operand(num)} // {_operand(den)})", num.variables | den.variables)
        self.num, self.den = num, den
        return self

    def recompute(self, env: dict, memo: dict) -> "Dim":
        return Dim.quotient(self.num.subs(env, memo), self.den.subs(env, memo))

    def __reduce__(self):
        return QuotientName, (self.num, self.den)


class ProductName(OpaqueName):
    """An opaque dimension `a * b` too large to expand (MAX_DIM_WORK, MAX_DIM_BITS): thirty lines of
    `t = t * t` from `t = n + 1` make (n + 1)**(2**30), whose expansion has a billion terms of a billion
    factors. Kept whole, it stays a compile-time integer, computed once the shape variables are known
    (where a value past every dtype is E0211, as for literals)."""

    a: "Dim"
    b: "Dim"

    def __new__(cls, a: "Dim", b: "Dim") -> "ProductName":
        a, b = sorted((a, b), key=_operand)              # `a * b` and `b * a` are one dimension
        self = super().__new__(cls, f"({_operand(a)} * {_operand(b)})", a.variables | b.variables)
        self.a, self.b = a, b
        return self

    def recompute(self, env: dict, memo: dict) -> "Dim":
        return self.a.subs(env, memo) * self.b.subs(env, memo)

    def __reduce__(self):
        return ProductName, (self.a, self.b)


def _operand(d: "Dim") -> str:
    text = str(d)
    return text if d.is_const or (len(d.terms) == 1 and " " not in text) else f"({text})"


def _too_large_product(a: "Dim", b: "Dim") -> bool:
    """Whether expanding `a * b` costs more than MAX_DIM_WORK or gives a term past MAX_DIM_DEGREE or a
    coefficient past MAX_DIM_BITS (a product of constants is always computed: its size is E0211's check)."""
    if a.is_const and b.is_const:
        return False
    degree = max(map(len, a.terms), default=0) + max(map(len, b.terms), default=0)
    if degree > MAX_DIM_DEGREE or len(a.terms) * len(b.terms) * (degree + 1) > MAX_DIM_WORK:
        return True
    bits = max((abs(c).bit_length() for c in a.terms.values()), default=0) + \
        max((abs(c).bit_length() for c in b.terms.values()), default=0)
    return bits + min(len(a.terms), len(b.terms)).bit_length() > MAX_DIM_BITS


class Dim:
    """A dimension: an integer polynomial over shape variables, e.g. `2 * n + 1`.

    Equality is structural on the normalized polynomial, so `n + n == 2 * n`; two
    different variables never compare equal.
    """
    __slots__ = ("terms",)

    def __init__(self, terms: dict):
        self.terms = {m: c for m, c in terms.items() if c != 0}

    @staticmethod
    def const(v: int) -> "Dim":
        return Dim({(): int(v)})

    @staticmethod
    def var(name: str) -> "Dim":
        return Dim({(name,): 1})

    @property
    def is_const(self) -> bool:
        terms = self.terms
        return not terms or (len(terms) == 1 and () in terms)

    @property
    def value(self) -> int:
        terms = self.terms          # (`is_const`, inline: read for every dimension of every shape made concrete)
        assert not terms or (len(terms) == 1 and () in terms), self
        return terms.get((), 0)

    @property
    def variables(self) -> set[str]:
        """The shape variables `self` depends on (those of an opaque `a // b` included)."""
        out = set()
        for m in self.terms:
            for v in m:
                if isinstance(v, OpaqueName):
                    out |= v.shape_variables
                else:
                    out.add(v)
        return out

    @property
    def atoms(self) -> set[str]:
        """The names in the monomials of `self`: shape variables and opaque stand-ins such as `(dm // h)`."""
        return {v for m in self.terms for v in m}

    def __add__(self, other: "Dim") -> "Dim":
        t = dict(self.terms)
        for m, c in other.terms.items():
            t[m] = t.get(m, 0) + c
        return Dim(t)

    def __neg__(self) -> "Dim":
        return Dim({m: -c for m, c in self.terms.items()})

    def __sub__(self, other: "Dim") -> "Dim":
        return self + (-other)

    def __mul__(self, other: "Dim") -> "Dim":
        if _too_large_product(self, other):
            return Dim({(ProductName(self, other),): 1})
        t: dict = {}
        for m1, c1 in self.terms.items():
            for m2, c2 in other.terms.items():
                m = tuple(sorted(m1 + m2))
                t[m] = t.get(m, 0) + c1 * c2
        return Dim(t)

    def floordiv(self, other: "Dim") -> "Dim | None":
        """Exact or constant floor division; None where it is not a polynomial. A constant divisor of every
        coefficient but the constant term's divides the rest exactly: `(2 * n + 1) // 2` is `n`."""
        if other.is_const and other.value != 0:
            d = other.value
            if self.is_const:
                return Dim.const(self.value // d)
            if all(c % d == 0 for m, c in self.terms.items() if m != ()):
                return Dim({m: c // d for m, c in self.terms.items() if m != ()}) + \
                    Dim.const(self.terms.get((), 0) // d)
        if self == other and self.terms:
            return Dim.const(1)
        return None

    @staticmethod
    def quotient(num: "Dim", den: "Dim") -> "Dim":
        """`num // den`: a polynomial where it is one (exact or constant division), else an opaque
        dimension (QuotientName) decided once the shape variables are known. A constant divisor 0 gives 0,
        as integer `//` by zero does in arr."""
        out = num.floordiv(den)
        if out is not None:
            return out
        if den.is_const and den.value == 0:
            return Dim.const(0)
        return Dim({(QuotientName(num, den),): 1})

    def subs(self, env: dict, memo: dict | None = None) -> "Dim":
        """Substitute variables by ints or Dims (an opaque `a // b` or `a * b` is recomputed from its parts,
        once per call: `memo` holds those done, as the parts of `t * t` repeated are one another's)."""
        terms = self.terms
        if not terms or (len(terms) == 1 and () in terms):
            return self                 # a constant (Dims are never changed once made)
        memo = {} if memo is None else memo
        out = Dim({})
        for m, c in self.terms.items():
            term = Dim.const(c)
            for v in m:
                if isinstance(v, OpaqueName):
                    if v not in memo:
                        memo[v] = v.recompute(env, memo)
                    term = term * memo[v]
                    continue
                value = env.get(v, Dim.var(v))
                term = term * (value if isinstance(value, Dim) else Dim.const(value))
            out = out + term
        return out

    def linear_in(self, var: str) -> int | None:
        """The coefficient of `var` if `var` occurs only as a linear term, else None."""
        occurrences = [(m, c) for m, c in self.terms.items() if var in m]
        if len(occurrences) == 1 and occurrences[0][0] == (var,):
            return occurrences[0][1]
        return None

    def __eq__(self, other) -> bool:
        if isinstance(other, int):
            return self.is_const and self.value == other
        return isinstance(other, Dim) and self.terms == other.terms

    def __hash__(self) -> int:
        return hash(frozenset(self.terms.items()))

    def __str__(self) -> str:
        if not self.terms:
            return "0"
        if len(self.terms) == 1 and self.terms.get(m := next(iter(self.terms))) == 1 and len(m) == 1 and \
                isinstance(m[0], OpaqueName):
            return m[0][1:-1]           # `f32[n // 2]`, as written (the parentheses serve products and sums)
        parts = []
        for m, c in sorted(self.terms.items(),
                           key=lambda mc: (-len(mc[0]), any(isinstance(v, OpaqueName) for v in mc[0]), mc[0])):
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


# ---- types of values -------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ArrayType:
    """An array (or scalar, rank 0) of `dtype`; `weak` marks a type that came from a literal only."""
    dtype: DType
    shape: tuple = ()
    weak: bool = False

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_concrete(self) -> bool:
        return all(d.is_const for d in self.shape)

    @property
    def concrete_shape(self) -> tuple[int, ...]:
        return tuple([d.value for d in self.shape])

    def with_dtype(self, dtype: DType, weak: bool = False) -> "ArrayType":
        return ArrayType(dtype, self.shape, weak)

    def with_shape(self, shape) -> "ArrayType":
        return ArrayType(self.dtype, tuple(shape), self.weak)

    def strong(self) -> "ArrayType":
        return ArrayType(self.dtype, self.shape, False)

    def subs(self, env: dict[str, int]) -> "ArrayType":
        return ArrayType(self.dtype, tuple(d.subs(env) for d in self.shape), self.weak)

    def __str__(self) -> str:
        if not self.shape:
            return self.dtype.name
        return f"{self.dtype.name}[{', '.join(str(d) for d in self.shape)}]"


def shape_str(shape) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


# ---- promotion (JAX's lattice, with arr's 32-bit defaults) -----------------------
# Nodes are dtype names plus the weak kinds "i*" and "f*" (JAX's weakly typed int/float).
_LATTICE = {
    "bool": ["i*"], "i*": ["u8", "i8"], "u8": ["i16", "u16"], "u16": ["i32", "u32"], "u32": ["i64", "u64"],
    "u64": ["f*"], "i8": ["i16"], "i16": ["i32"], "i32": ["i64"], "i64": ["f*"],
    "f*": ["bf16", "f16"], "bf16": ["f32"], "f16": ["f32"], "f32": ["f64"], "f64": [],
}


@lru_cache(maxsize=None)
def _upper_bounds(node: str) -> frozenset:
    out = {node}
    for nxt in _LATTICE[node]:
        out |= _upper_bounds(nxt)
    return frozenset(out)


def _node(dtype: DType, weak: bool) -> str:
    if weak and dtype.is_int:
        return "i*"
    if weak and dtype.is_float:
        return "f*"
    return dtype.name


@lru_cache(maxsize=None)
def _join(a: str, b: str) -> str:
    common = _upper_bounds(a) & _upper_bounds(b)
    least = [n for n in common if all(m in _upper_bounds(n) for m in common)]
    return least[0]


def promote(types: list[ArrayType]) -> tuple[DType, bool]:
    """The dtype and weakness that `types` promote to; shapes are not looked at."""
    return _promote(tuple([(t.dtype, t.weak) for t in types]))


class KeysAreNotNumbers(Exception):
    """Keys promoted together with numbers (`stack((k, x))`, `ks[0] = 1.0`): a rule's call reports E0201."""


@lru_cache(maxsize=None)
def _promote(kinds: tuple) -> tuple[DType, bool]:
    keys = [dt.is_key for dt, _ in kinds]
    if any(keys):               # keys are not in the lattice: they stay keys, and never mix with numbers
        if not all(keys):
            raise KeysAreNotNumbers
        return KEY, False
    node = _node(*kinds[0])
    for kind in kinds[1:]:
        node = _join(node, _node(*kind))
    weak = all(w for _, w in kinds)
    if node == "i*":
        return I32, weak
    if node == "f*":
        # JAX with x64 would default to f64 here; arr stays at 32 bits unless a 64-bit value took part.
        wide = any(dt.is_64bit and not w for dt, w in kinds)
        return (F64 if wide else F32), weak
    return DTYPES[node], weak


def lossy_promotion(types: list[ArrayType], result: DType) -> ArrayType | None:
    """The operand whose value may not survive the implicit promotion to `result`, if any."""
    if not result.is_float:
        return None
    strong_ints = [t for t in types if t.dtype.is_int and not t.weak]
    for t in strong_ints:
        if t.dtype.bits > result.bits:
            return t
    if len(strong_ints) == len(types) and len(types) > 1:
        return strong_ints[0]       # e.g. u64 with i64 -> f64
    return None


def true_divide_dtype(dt: DType) -> DType:
    """The float dtype of `/` between integers (or bools) of dtype `dt`."""
    return F64 if dt.is_64bit else F32


def _default_max_bytes() -> int:
    """`ARRC_MAX_ARRAY_BYTES`, else the host's memory."""
    import os
    from .cache import bytes_from_env
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        memory = 2 ** 40
    return bytes_from_env("ARRC_MAX_ARRAY_BYTES", memory, least=1)


MAX_ARRAY_BYTES = _default_max_bytes()


def too_large(t: ArrayType) -> str | None:
    """A message when one array of type `t` (concrete dims) could not fit in memory, else None."""
    count = 1
    for d in t.shape:               # (Dim.is_const and Dim.value inline: this runs for every value made)
        terms = d.terms
        if len(terms) > 1 or (terms and () not in terms):
            return None
        count *= terms.get((), 0)
    size = count * max(1, t.dtype.bits // 8)
    if size <= MAX_ARRAY_BYTES:
        return None
    return f"{t} needs {size:,} bytes; this machine allows arrays of at most {MAX_ARRAY_BYTES:,} bytes"
