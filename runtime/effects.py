"""Host side of `print` and `assert` (see compiler/effects.py): their sites read back from the module,
their callbacks, and per-call run state."""
from __future__ import annotations

import itertools
import sys
import threading

import numpy as np

from ..compiler import abi
from ..compiler.effects import AssertSite, PrintSite
from .reports import AssertionFailed

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


def site_of(op, span) -> PrintSite | AssertSite:
    """The site a print/assert custom_call describes with its attributes (compiler/effects.py
    `site_attributes`); `span` is its location's."""
    from jaxlib.mlir import ir

    from ..passes.rewrite import i64s
    attrs = op.attributes
    if ir.StringAttr(attrs[abi.KIND]).value == "print":
        pieces = [p.value if isinstance(p, ir.StringAttr) else None     # None: a value slot
                  for p in ir.ArrayAttr(attrs[abi.PIECES])]
        return PrintSite(span, pieces)
    return AssertSite(span, ir.StringAttr(attrs[abi.MESSAGE]).value,
                      tuple(i64s(attrs[abi.SHAPE])),
                      ir.StringAttr(attrs[abi.FUNCTION]).value, 0)


def host_callback(site: PrintSite | AssertSite, sources: dict):
    make = _print_callback if isinstance(site, PrintSite) else _assert_callback
    return make(site, sources)


def runs() -> dict:
    return _runs
