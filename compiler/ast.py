"""The arr AST: frozen dataclasses whose `span` takes no part in equality."""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Optional, Union

from .span import Span, span_field


@dataclass(frozen=True)
class Node:
    span: Span = span_field()


# ---- types -------------------------------------------------------------------
@dataclass(frozen=True)
class DimInt(Node):
    value: int = 0


@dataclass(frozen=True)
class DimName(Node):
    name: str = ""


@dataclass(frozen=True)
class DimBin(Node):
    op: str = "+"                      # + - * //
    lhs: "DimExpr" = None
    rhs: "DimExpr" = None


DimExpr = Union[DimInt, DimName, DimBin]


@dataclass(frozen=True)
class TypeExpr(Node):
    dtype: str = ""
    dims: Optional[tuple] = None       # None: a scalar


# ---- expressions -------------------------------------------------------------
@dataclass(frozen=True)
class Name(Node):
    id: str = ""


@dataclass(frozen=True)
class IntLit(Node):
    value: int = 0


@dataclass(frozen=True)
class FloatLit(Node):
    value: float = 0.0


@dataclass(frozen=True)
class BoolLit(Node):
    value: bool = False


@dataclass(frozen=True)
class StrLit(Node):
    value: str = ""


@dataclass(frozen=True)
class ArrayLit(Node):
    elems: tuple = ()


@dataclass(frozen=True)
class TupleLit(Node):
    elems: tuple = ()


@dataclass(frozen=True)
class Binary(Node):
    """Arithmetic, bitwise, comparison and boolean binary operators; `op` is the source token."""
    op: str = "+"
    lhs: "Expr" = None
    rhs: "Expr" = None


@dataclass(frozen=True)
class Unary(Node):
    op: str = "-"                      # - + ~ not
    operand: "Expr" = None


@dataclass(frozen=True)
class CondExpr(Node):
    cond: "Expr" = None
    then: "Expr" = None
    orelse: "Expr" = None


@dataclass(frozen=True)
class Keyword(Node):
    name: str = ""
    value: "Expr" = None


@dataclass(frozen=True)
class Call(Node):
    func: "Expr" = None
    args: tuple = ()
    kwargs: tuple = ()                 # tuple[Keyword]


@dataclass(frozen=True)
class Slice(Node):
    start: Optional["Expr"] = None
    stop: Optional["Expr"] = None
    step: Optional["Expr"] = None


@dataclass(frozen=True)
class EllipsisIndex(Node):
    pass


@dataclass(frozen=True)
class Index(Node):
    base: "Expr" = None
    subscripts: tuple = ()


@dataclass(frozen=True)
class Attribute(Node):
    base: "Expr" = None
    name: str = ""


Expr = Union[Name, IntLit, FloatLit, BoolLit, StrLit, ArrayLit, TupleLit, Binary, Unary,
             CondExpr, Call, Index, Attribute]


# ---- statements --------------------------------------------------------------
@dataclass(frozen=True)
class NameTarget(Node):
    name: str = ""


@dataclass(frozen=True)
class IndexTarget(Node):
    base: Expr = None
    subscripts: tuple = ()


@dataclass(frozen=True)
class TupleTarget(Node):
    elems: tuple = ()                  # targets: `a, (b, c) = ...` unpacks a nested tuple


def walk_targets(targets):
    """The name and index targets among `targets`, nested tuples of them flattened, in order."""
    for t in targets:
        if isinstance(t, TupleTarget):
            yield from walk_targets(t.elems)
        else:
            yield t


@dataclass(frozen=True)
class Assign(Node):
    targets: tuple = ()
    value: Expr = None


@dataclass(frozen=True)
class AugAssign(Node):
    target: Union[NameTarget, IndexTarget] = None
    op: str = "+"
    value: Expr = None


@dataclass(frozen=True)
class Return(Node):
    values: tuple = ()


@dataclass(frozen=True)
class Pass(Node):
    pass


@dataclass(frozen=True)
class Print(Node):
    args: tuple = ()


@dataclass(frozen=True)
class Assert(Node):
    cond: Expr = None
    message: Optional[Expr] = None


@dataclass(frozen=True)
class ExprStmt(Node):
    expr: Expr = None


@dataclass(frozen=True)
class If(Node):
    cond: Expr = None
    body: tuple = ()
    orelse: tuple = ()                 # elif chains become a nested If here


@dataclass(frozen=True)
class For(Node):
    var: str = ""
    args: tuple = ()                   # range's arguments, then its keywords (`bound=`)
    body: tuple = ()


@dataclass(frozen=True)
class While(Node):
    cond: Expr = None
    body: tuple = ()
    options: tuple = ()                # tuple[Keyword]: `while cond, bound=N:`


# ---- module ------------------------------------------------------------------
@dataclass(frozen=True)
class Param(Node):
    name: str = ""
    type: TypeExpr = None
    default: Optional["Expr"] = None    # `eps: f32 = 1e-6`: a compile-time constant (check.py)


@dataclass(frozen=True)
class FunctionDef(Node):
    name: str = ""
    params: tuple = ()
    results: tuple = ()                # tuple[TypeExpr]
    tuple_result: bool = False         # declared as `-> (a, b)`
    body: tuple = ()
    name_span: Span = span_field()
    label: str = ""                    # what reports call it, if not its name (a REPL cell: "the cell")
    extern: bool = False               # `extern def`: a signature only, the function supplied from Python

    @property
    def shown_name(self) -> str:
        """Its label, `vmap(f)` for arrc.vmap's wrapper of f (`vmap(vmap(f))` for a wrapper's), else its name."""
        if self.label:
            return self.label
        name, depth = mapped_function(self.name)
        return "vmap(" * depth + name + ")" * depth


@dataclass(frozen=True)
class ConstDef(Node):
    name: str = ""
    type: TypeExpr = None
    value: Expr = None


@dataclass(frozen=True)
class Module(Node):
    items: tuple = ()


_SCALAR_FIELDS = {"Span", "str", "int", "float", "bool"}


@functools.lru_cache(maxsize=None)
def _child_fields(cls: type) -> tuple:
    """The fields of node class `cls` that may hold nodes (not its spans, names, operators or literal values)."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.type not in _SCALAR_FIELDS)


def _push_children(node: Node, push) -> None:
    """`push` each node directly under `node`, in field order."""
    for name in _child_fields(type(node)):
        value = getattr(node, name)
        if type(value) is tuple:
            for child in value:
                if isinstance(child, Node):
                    push(child)
        elif isinstance(value, Node):
            push(value)


def walk(node: Node):
    """`node` and every node under it, depth first in field order (a loop, not recursion: any depth)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        children: list = []
        _push_children(current, children.append)
        stack.extend(reversed(children))


# The builtins that take a module function by name, as their first argument, and call it (LANGUAGE.md
# sections 15 and 16): `grad(f)(x)` (check.py FunctionWalk.call_derivative), `jvp(f, primals, tangents)`
# (FunctionWalk.call_jvp_vjp), `vmap(f)(xs)` (FunctionWalk.call_vmap).
DERIVATIVES = ("grad", "value_and_grad")
PUSH_PULL = ("jvp", "vjp")
VMAP_OF_API = "__arrc_vmap__"      # `vmap` as arrc.vmap's wrapper writes it: no function or variable shadows it
WRAPPER_PREFIX = "__arrc_vmap_of_"  # the name of arrc.vmap's wrapper: its call of `vmap` has no call site of its own
HIGHER_ORDER = frozenset(DERIVATIVES + PUSH_PULL + ("vmap", VMAP_OF_API))


def mapped_function(name: str) -> tuple[str, int]:
    """The function that the function `name` maps, and how many arrc.vmap wrappers (WRAPPER_PREFIX) lie
    between them: (`f`, 2) for the wrapper of f's wrapper, (`f`, 0) for f itself."""
    depth = 0
    while name.startswith(WRAPPER_PREFIX):
        name, depth = name[len(WRAPPER_PREFIX):], depth + 1
    return name, depth


def called_names(node, functions=()) -> set:
    """The names of the functions called under `node`, by a call or through a higher-order builtin (`vmap(f)`
    calls `f`) that no module function of `functions` shadows. `walk` without a generator, in no order: 25
    against 39 ms on 2000 statements, and each program's functions are searched."""
    found, stack = set(), [node]
    while stack:
        current = stack.pop()
        if type(current) is Call and isinstance(current.func, Name):
            name = current.func.id
            found.add(name)
            if name in HIGHER_ORDER and name not in functions and current.args and \
                    isinstance(current.args[0], Name):
                found.add(current.args[0].id)
        _push_children(current, stack.append)
    return found


def dump(node, indent: int = 0) -> str:
    """`node` as indented text, one node per line with its span (`arrc compile --emit ast`)."""
    pad = "  " * indent
    if isinstance(node, Span):
        return f"{pad}@{node.line}:{node.col}-{node.end_line}:{node.end_col}"
    if isinstance(node, tuple):
        return "\n".join(dump(item, indent) for item in node) if node else f"{pad}()"
    if not isinstance(node, Node):
        return f"{pad}{node!r}"
    s = node.span
    head = f"{pad}{type(node).__name__}" + (f" @{s.line}:{s.col}-{s.end_line}:{s.end_col}" if s else "")
    lines = [head]
    for name, value in vars(node).items():
        if name == "span" or (name == "default" and value is None and isinstance(node, Param)):
            continue                    # (a parameter without a default shows as it did before defaults)
        if isinstance(value, Node) or (isinstance(value, tuple) and value and any(isinstance(v, Node) for v in value)):
            lines.append(f"{pad}  {name}:")
            lines.append(dump(value, indent + 2))
        elif isinstance(value, Span):
            lines.append(f"{pad}  {name}: {dump(value)}")
        else:
            lines.append(f"{pad}  {name}: {value!r}")
    return "\n".join(lines)
