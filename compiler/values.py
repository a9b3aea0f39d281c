"""Values seen by the checker/lowering walk, and the error that rules raise."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .diagnostics import Diagnostic, Label
from .span import Span
from .types import ArrayType, Dim, DType


class ArrError(Exception):
    """A user error found by a rule; the walker turns it into a Diagnostic at the right span."""

    def __init__(self, code: str, message: str, span: Span | None = None, label: str = "",
                 notes=(), help: str | None = None, labels=()):
        super().__init__(message)
        self.diag = Diagnostic(code, message, span, label, list(labels), list(notes), help)


@dataclass(slots=True, eq=False)
class Val:
    """An array value. `ir` is its MLIR value while lowering; `static` its compile-time value if known
    (a `Dim` for integers, Python float/bool, or a NumPy array for literals). Equality is identity: two
    values are the same value, not two of equal fields (and `POISON in operands` calls no Python)."""
    type: ArrayType
    ir: Any = None
    static: Any = None
    affine: Any = None     # (base Val, scale, offset) for run-time integers like `i + 4`, `k * b`: Dims (`_affine`)
    range: Any = None      # (least, greatest or None) a run-time integer takes, where known: a loop counter

    @property
    def static_int(self) -> int | None:
        """The integer this value is at compile time, if known."""
        return self.static.value if isinstance(self.static, Dim) and self.static.is_const else None


def is_runtime_int(v) -> bool:
    """Whether `v` is an integer scalar known only at run time (a loop counter, a parameter)."""
    return isinstance(v, Val) and v.type.rank == 0 and v.type.dtype.is_int and not isinstance(v.static, Dim)


def affine_parts(v: Val) -> tuple:
    """(base, scale, offset) of a run-time integer, `v` = base * scale + offset with the last two compile-time
    Dims (`i + 4` is (i, 1, 4), `(k + 1) * b` is (k, b, b)); a value not tracked is its own base."""
    return v.affine if v.affine is not None else (v, Dim.const(1), Dim.const(0))


@dataclass
class TupleVal:
    items: list = field(default_factory=list)


@dataclass
class DTypeVal:
    dtype: DType


@dataclass
class StrVal:
    text: str


class Poisoned:
    """The value of an expression that already produced an error; uses of it stay silent."""
    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance


POISON = Poisoned()


def tuple_text(v) -> str | None:
    """A tuple of compile-time integers (`x.shape`, nested ones too) as Python prints it: `(2, 3)`, `(5,)`,
    `((1, 2), 3)`; None for a tuple holding anything else, and for any other value."""
    if not isinstance(v, TupleVal):
        return None
    items = [tuple_text(i) if isinstance(i, TupleVal) else
             str(i.static) if isinstance(i, Val) and isinstance(i.static, Dim) else None for i in v.items]
    return None if None in items else "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def describe(v) -> str:
    if isinstance(v, Val):
        return str(v.type)
    if isinstance(v, TupleVal):      # a tuple of one as Python writes it: `(i32,)`, not a parenthesized `i32`
        return "(" + ", ".join(describe(i) for i in v.items) + ("," if len(v.items) == 1 else "") + ")"
    if isinstance(v, DTypeVal):
        return f"dtype {v.dtype}"
    if isinstance(v, StrVal):
        return "string"
    return "?"


def note_label(span: Span, message: str) -> Label:
    return Label(span, message)


@dataclass
class Unbound:
    """A name without one value after an `if`/loop: assigned on some paths only (E0101), or with a
    different type on each path (E0301, reported where it is used)."""
    reason: str
    span: Span | None = None
    code: str = "E0101"
    labels: list = field(default_factory=list)
    paths: list = field(default_factory=list)       # E0301: (type, span of the assignment) of each path


class DeferredBool:
    """A condition on shape variables (`n > 2`): known only when the function is specialized."""
