"""MLIR locations -> arrc spans (works for arrc's own modules and for StableHLO exported by JAX)."""
from __future__ import annotations

from jaxlib.mlir import ir

from ..compiler.span import Span


def span_of(loc) -> Span | None:
    """The first file position inside `loc` (looking through name, call-site and fused locations)."""
    if isinstance(loc, ir.FileLineColLoc):
        # JAX writes Python's 0-based columns; arrc and MLIR's own files use 1-based ones.
        shift = 1 if loc.filename.endswith(".py") else 0
        start, end = loc.start_col + shift, loc.end_col + shift
        return Span(loc.filename, loc.start_line, start, loc.end_line, max(end, start + 1))
    if isinstance(loc, ir.NameLoc):
        return span_of(loc.child_loc)
    if isinstance(loc, ir.CallSiteLoc):
        return span_of(loc.callee)
    if isinstance(loc, ir.FusedLoc):
        for inner in loc.locations:
            found = span_of(inner)
            if found is not None:
                return found
    return None


def name_of(loc) -> str | None:
    if isinstance(loc, ir.NameLoc):
        return loc.name_str
    if isinstance(loc, ir.CallSiteLoc):
        return name_of(loc.callee)
    return None
