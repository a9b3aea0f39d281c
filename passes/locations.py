"""MLIR locations -> arrc spans (works for arrc's own modules and for StableHLO exported by JAX)."""
from __future__ import annotations

from jaxlib.mlir import ir

from ..compiler.span import Span


def span_of(loc) -> Span | None:
    """The first file position inside `loc` (looking through name, call-site and fused locations)."""
    if isinstance(loc, ir.FileLineColLoc):
        return Span(loc.filename, loc.start_line, loc.start_col, loc.end_line, max(loc.end_col, loc.start_col + 1))
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
