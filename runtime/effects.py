"""Host side of `print`, `assert` and a loop's `bound=` (see compiler/effects.py): their sites read back from the module,
their callbacks, and per-call run state."""
from __future__ import annotations

import itertools
import sys
import threading

import numpy as np

from ..compiler import abi
from ..compiler.effects import AssertSite, BoundSite, PrintSite
from ..compiler.locations import call_frames, name_of, span_of
from .reports import AssertionFailed, LoopBoundExceeded

_runs: dict = {}
_ids = itertools.count(1)
_lock = threading.Lock()


class RunState:
    """What the effects of one call did: the first failure stops later prints (as Python would stop).
    `quiet` silences prints when a guard re-runs a call to find the origin of a fault."""

    def __init__(self, quiet: bool = False):
        self.failure: AssertionFailed | None = None
        self.events: list = []          # guard reports (runtime/guards.py)
        self.fault = False              # a guarded result was not finite
        self.bad_results: set = set()   # then: the indices of the results that were not
        self.quiet = quiet


def begin(quiet: bool = False) -> tuple[int, RunState]:
    state = RunState(quiet)
    with _lock:
        run_id = next(_ids) % (2 ** 31 - 1)
        _runs[run_id] = state
    return run_id, state


def end(run_id: int) -> RunState:
    with _lock:
        return _runs.pop(run_id)


def format_value(value: np.ndarray) -> str:
    if value.ndim == 0:
        item = value.item()
        if isinstance(item, bool):
            return "true" if item else "false"
        return str(value[()])
    return np.array2string(value, separator=" ")


def _print_callback(site: PrintSite, sources: dict):
    def callback(run_id, io, *values):
        state = _runs.get(int(run_id))
        if state is not None and state.failure is None and not state.quiet:
            values = iter(values)
            parts = [p if isinstance(p, str) else format_value(np.asarray(next(values))) for p in site.pieces]
            sys.stdout.write(" ".join(parts) + "\n")     # one write: concurrent calls never mix a line
            sys.stdout.flush()
        return (np.int32(io + 1),)
    return callback


def _assert_callback(site: AssertSite, sources: dict):
    def callback(run_id, io, first, *counters):
        state = _runs.get(int(run_id))
        if state is not None and state.failure is None:
            index = tuple(int(i) for i in np.unravel_index(int(first), site.shape)) if site.shape else ()
            iteration = tuple(int(c) for c in counters) or None
            where = f" at index {list(index)}" if index else ""
            notes = []
            if iteration is not None:
                notes.append("in loop iteration " + ", ".join(str(i) for i in iteration))
            notes.append(f"in {site.in_function}")
            message = f"assertion failed: {site.message}" if site.message else "assertion failed"
            state.failure = AssertionFailed(message, site.span, f"this condition is false{where}", index=index,
                                            iteration=iteration, notes=notes, sources=sources)
        return (np.int32(io + 1),)
    return callback


def _bound_callback(site: BoundSite, sources: dict):
    def callback(run_id, io, count):
        state = _runs.get(int(run_id))
        if state is not None and state.failure is None:
            ran, word = int(count), site.loop
            frames = [f"in the backward pass of {name} at {span}" if "(" in name else f"in {name}, called at {span}"
                      for name, span in site.chain]
            if not any("(" in name for name, _ in site.chain):       # differentiated from Python
                frames.insert(0, "in the backward pass")
            notes = [", ".join(frames)]
            state.failure = LoopBoundExceeded(
                f"this `{word}` loop ran {ran} iterations, more than its bound of {site.bound}", site.span,
                f"ran {ran} times; its derivative keeps a tape of {site.bound}", notes=notes, sources=sources,
                help=f"raise the bound to at least {ran} (`bound=` is the most iterations the loop runs), or "
                     f"remove it: the derivative is then computed by recomputation (exact, slower)")
        return (np.int32(io + 1),)
    return callback


def site_of(op, span) -> PrintSite | AssertSite | BoundSite:
    """The site a print/assert/bound custom_call describes with its attributes (compiler/effects.py
    `site_attributes`); `span` is its location's."""
    from jaxlib.mlir import ir

    from ..passes.rewrite import attr_text, i64s
    attrs = op.attributes
    if attr_text(attrs[abi.KIND]) == "bound":
        frames = call_frames(op.location)
        return BoundSite(span, ir.IntegerAttr(attrs[abi.LOOP_BOUND]).value, name_of(frames[0]) or "for",
                         [(name_of(f), span_of(f)) for f in frames[1:]])
    if attr_text(attrs[abi.KIND]) == "print":
        pieces = [p.value if isinstance(p, ir.StringAttr) else None     # None: a value slot
                  for p in ir.ArrayAttr(attrs[abi.PIECES])]
        return PrintSite(span, pieces)
    return AssertSite(span, attr_text(attrs[abi.MESSAGE]),
                      tuple(i64s(attrs[abi.SHAPE])),
                      attr_text(attrs[abi.FUNCTION]), 0)


def host_callback(site: PrintSite | AssertSite | BoundSite, sources: dict):
    make = {PrintSite: _print_callback, AssertSite: _assert_callback, BoundSite: _bound_callback}[type(site)]
    return make(site, sources)


def runs() -> dict:
    return _runs
