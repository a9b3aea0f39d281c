"""MLIR locations -> arrc spans (works for arrc's own modules and for StableHLO exported by JAX)."""
from __future__ import annotations

import re

from jaxlib.mlir import ir

from .span import Span
from .walk import walk_ops

_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')
_ESCAPE = re.compile(rb"\\(\\|[0-9A-Fa-f]{2})")


def printed_string(printed: str) -> str:
    """The first quoted string in MLIR's printed form of an attribute or location (the name of
    `loc("name"(...))`, the file of `loc("file":1:2)`, the symbol of `@"name"`), its escapes decoded, or
    all of `printed` where nothing is quoted. Reading text this way never fails: the bindings' `.value`
    raises, and `.filename` and `.name_str` abort the process (std::terminate), on bytes that are not
    UTF-8, which a damaged module can hold; those read as U+FFFD here."""
    quoted = _QUOTED.search(printed)
    raw = (quoted.group(1) if quoted else printed).encode()
    return _ESCAPE.sub(lambda m: b"\\" if m.group(1) == b"\\" else bytes.fromhex(m.group(1).decode()),
                       raw).decode("utf-8", "replace")


def span_of(loc) -> Span | None:
    """The first file position inside `loc` (looking through name, call-site and fused locations)."""
    if isinstance(loc, ir.FileLineColLoc):
        filename = printed_string(str(loc))
        # JAX writes Python's 0-based columns; arrc and MLIR's own files use 1-based ones.
        shift = 1 if filename.endswith(".py") else 0
        start, end = loc.start_col + shift, loc.end_col + shift
        return Span(filename, loc.start_line, start, loc.end_line, max(end, start + 1))
    if isinstance(loc, ir.NameLoc):
        return span_of(loc.child_loc)
    if isinstance(loc, ir.CallSiteLoc):
        return span_of(loc.callee) or span_of(loc.caller)
    if isinstance(loc, ir.FusedLoc):
        for inner in loc.locations:
            found = span_of(inner)
            if found is not None:
                return found
    return None


def call_frames(loc) -> list:
    """The frames of `loc`, innermost first: the operation's own location, then each call site."""
    if isinstance(loc, ir.CallSiteLoc):
        return call_frames(loc.callee) + call_frames(loc.caller)
    return [loc]


def jax_frames(loc) -> tuple[list, str] | None:
    """JAX's locations, `"jit(f)/op"(callsite("g"(line in g) at callsite("f"(line in f) at ...)))`, name
    each frame by the function that holds its line (arrc's name a call site by the function it calls):
    ([(function, the span it was called from)] innermost first, as arrc's reports take them, up to the
    jitted function `f`; `f`), or None for other locations."""
    name = name_of(loc)
    if not (isinstance(loc, ir.NameLoc) and name.startswith("jit(")):
        return None
    jitted = name[len("jit("):].partition(")")[0]
    named = [(name_of(f), span_of(f)) for f in call_frames(loc.child_loc)]
    if any(n is None for n, _ in named):
        return None
    cut = next((i for i, (n, _) in enumerate(named) if n == jitted or n.endswith("." + jitted)), None)
    if cut is None:
        return None
    named = named[:cut + 1]
    return [(named[i][0], named[i + 1][1]) for i in range(len(named) - 1)], named[-1][0]


def jax_backward(name: str | None) -> bool:
    """Whether a location's name is JAX's for an operation of a backward pass (`jit(f)/transpose(jvp())/mul`):
    JAX gives it the location of the forward operation it differentiates, whose text does not name its
    operands."""
    return bool(name) and re.search(r"(^|/)transpose\(", name) is not None


def name_of(loc) -> str | None:
    if isinstance(loc, ir.NameLoc):
        return printed_string(str(loc))
    if isinstance(loc, ir.CallSiteLoc):
        return name_of(loc.callee)
    return None


def file_positions_only(module_op) -> None:
    """Unwrap every operation's name location (`loc("add"(file:line:col))` -> `file:line:col`), in place.

    For XLA only: it turns a name location into a stack frame and copies the module's stack-frame table
    each time it clones a loop body, so nested loops with known trip counts made compile time double with
    every level (20 levels 1.9 s, 24 over a minute; 0.14 s without the names). The names are arrc's own
    (guards read them before this); XLA's metadata keeps the file positions.
    """
    def visit(op):
        loc = op.location
        if isinstance(loc, ir.NameLoc):
            while isinstance(loc, ir.NameLoc):
                loc = loc.child_loc
            op.location = loc
        return ir.WalkResult.ADVANCE
    walk_ops(module_op, visit)