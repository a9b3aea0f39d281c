"""Host side of `print`, `assert` and a loop's `bound=` (see compiler/effects.py): their sites read back from the module,
their callbacks, and per-call run state."""
from __future__ import annotations

import itertools
import sys
import threading

import numpy as np

from ..compiler import abi
from ..compiler.effects import AssertSite, BoundReport, BoundSite, PrintSite
from ..compiler.locations import call_frames, name_of, span_of
from ..compiler.types import KEY, key_words
from .reports import AssertionFailed, LoopBoundExceeded

_runs: dict = {}
_ids = itertools.count(1)
_lock = threading.Lock()


class RunState:
    """What the effects of one call did: the first failure stops later prints (as Python would stop).
    `quiet` silences prints when a guard re-runs a call to find the origin of a fault."""

    def __init__(self, quiet: bool = False):
        self.quiet = quiet
        self.owner: int | None = None       # (`begin`)
        self.reset()

    def reset(self) -> None:
        """Forget what a call did (arrc/interop.py: a run serves one call of an executable after another)."""
        self.failure: Exception | None = None     # an AssertionFailed, or the OSError of a print
        self.events: list = []          # guard reports (runtime/guards.py)
        self.fault = False              # a guarded result was not finite
        self.bad_results: set = set()   # then: the indices of the results that were not


def begin(quiet: bool = False, owner: int | None = None) -> tuple[int, RunState]:
    """A new run; `owner`: the thread that runs it and ends it (`abandon`)."""
    state = RunState(quiet)
    state.owner = owner
    with _lock:
        run_id = next(_ids) % (2 ** 31 - 1)
        _runs[run_id] = state
    return run_id, state


def end(run_id: int, abandoned: bool = False) -> RunState:
    """Forget the run; `abandoned`: its call left it running (Ctrl-C), and its next callback stops it."""
    with _lock:
        if abandoned:
            _abandoned.add(run_id)
        return _runs.pop(run_id)


_abandoned: set = set()


def abandon(owner: int) -> None:
    """Ctrl-C left thread `owner` running a call (runtime/call.py `interruptible`, around a REPL cell or a
    command's call): its runs are abandoned, and their next callback stops them (they went on printing)."""
    with _lock:
        for run_id in [r for r, state in _runs.items() if state.owner == owner]:
            del _runs[run_id]
            _abandoned.add(run_id)


class RunAbandoned(Exception):
    """Raised by a host callback of a run its call abandoned at Ctrl-C: XLA then ends the execution with an
    error that nobody reads. PJRT cannot cancel an execution, and one left running would call back into
    Python while the interpreter exits, which aborts the process (runtime/call.py `interruptible`)."""


def state_of(run_id) -> RunState | None:
    """The RunState a host callback reports to (None: a run id of no call's, such as sharding's `_no_run`);
    raises RunAbandoned where the call abandoned the run."""
    state = _runs.get(int(run_id))
    if state is None and int(run_id) in _abandoned:
        raise RunAbandoned(f"run {int(run_id)} was abandoned at Ctrl-C")
    return state


def format_value(value: np.ndarray, keys: bool = False, width: int = 75, indent: int = 0) -> str:
    """`value` as `print` writes it and the REPL shows it: NumPy's text (lines of `width`, continued under
    a first line that starts `indent` columns in; large arrays summarized), bools as `true`/`false`, keys
    (`keys`: the words arr holds them in) by their two u32 words, `<key [0 42]>`."""
    if keys:
        head = "<key " if value.ndim == 0 else "<keys "
        return head + format_value(key_words(value), width=width, indent=indent + len(head)) + ">"
    if value.ndim == 0:
        item = value[()]
        if value.dtype == np.bool_:
            return "true" if item else "false"
        return str(item)
    return np.array2string(value, max_line_width=width, threshold=1000, edgeitems=3, separator=" ",
                           prefix=" " * indent, formatter={"bool": lambda b: "true" if b else "false"})


def _print_callback(site: PrintSite, sources: dict):
    def callback(run_id, io, *values):
        state = state_of(run_id)
        out = sys.stdout
        if state is not None and state.failure is None and not state.quiet and out is not None:   # (None: as
            values = iter(values)                                                                 # Python's print)
            parts = [p if isinstance(p, str) else format_value(np.asarray(next(values)), p is KEY) for p in site.pieces]
            try:
                out.write(" ".join(parts) + "\n")     # one write: concurrent calls never mix a line
                out.flush()
            except (OSError, ValueError) as err:      # a closed pipe, a full disk, a closed file: raised by the call
                state.failure = err                   # (an exception in a callback is XLA's internal error)
        return (np.int32(io + 1),)
    return callback


def _assert_callback(site: AssertSite, sources: dict):
    def callback(run_id, io, first, *counters):
        state = state_of(run_id)
        if state is not None and state.failure is None:
            index = tuple(int(i) for i in np.unravel_index(int(first), site.shape)) if site.shape else ()
            where = f" at index {list(index)}" if index else ""
            notes = []
            lanes = site.lanes or [""] * len(counters)
            loops = [int(c) for c, lane in zip(counters, lanes) if not lane]
            if loops:
                notes.append("in loop iteration " + ", ".join(str(i) for i in loops))
            notes += [f"in lane {int(c)} of {lane}" for c, lane in zip(counters, lanes) if lane]
            message = f"assertion failed: {site.message}" if site.message else "assertion failed"
            failure = AssertionFailed(message, site.span, f"this condition is false{where}", index=index,
                                      iteration=tuple(loops) or None, notes=notes, sources=sources,
                                      lanes=tuple(int(c) for c, lane in zip(counters, lanes) if lane))
            failure.function, failure.chain = site.in_function, site.call_chain     # (runtime/guards.py
            failure.order, failure.counters = site.order, tuple(int(c) for c in counters)   # `raise_faults`)
            state.failure = failure
        return (np.int32(io + 1),)
    return callback


def past_bound_error(loops: dict, past, sources: dict) -> LoopBoundExceeded | None:
    """The R0006 report of a PAST value (compiler/effects.py: [loop site, iterations], 0 iterations for
    none) given the module's bounded loops by site number (`sites`), or None."""
    site, ran = (int(v) for v in np.asarray(past))
    if ran == 0:
        return None
    loop = loops.get(site)
    if loop is None:                # (a module from elsewhere whose number names no loop it describes)
        return LoopBoundExceeded(f"a loop ran {ran} iterations, more than its bound", None,
                                 notes=[f"loop site {site}, which the module does not describe"], sources=sources)
    frames = [f"in the backward pass of {name} at {span}" if "(" in name else f"in {name}, called at {span}"
              for name, span in loop.chain]
    if not any("(" in name for name, _ in loop.chain):       # differentiated from Python
        frames.insert(0, "in the backward pass")
    return LoopBoundExceeded(
        f"this `{loop.loop}` loop ran {ran} iterations, more than its bound of {loop.bound}", loop.span,
        f"ran {ran} times; its derivative keeps a tape of {loop.bound}", notes=[", ".join(frames)],
        sources=sources,
        help=f"raise the bound to at least {ran} (`bound=` is the most iterations the loop runs), or "
             f"remove it: the derivative is then computed by recomputation (exact, slower)")


def _report_callback(loops: dict, sources: dict):
    def callback(run_id, io, past):
        state = state_of(run_id)
        if state is not None and state.failure is None:
            state.failure = past_bound_error(loops, past, sources)
        return (np.int32(io + 1),)
    return callback


def loop_site(op) -> BoundSite:
    """The site of a loop whose bound a derivative checks (abi.BOUND_SITE), from its attributes and location."""
    from jaxlib.mlir import ir
    frames = call_frames(op.location)
    return BoundSite(span_of(frames[0]), ir.IntegerAttr(op.attributes[abi.LOOP_BOUND]).value,
                     name_of(frames[0]) or "for", [(name_of(f), span_of(f)) for f in frames[1:]])


def site_of(op, span, chain: list) -> PrintSite | AssertSite | BoundReport:
    """The site a print/assert/bound custom_call describes with its attributes (compiler/effects.py
    `site_attributes`); `span` is its location's, `chain` the calls that inlined it (innermost first)."""
    from jaxlib.mlir import ir

    from ..passes.rewrite import attr_text, i64s
    attrs = op.attributes
    if attr_text(attrs[abi.KIND]) == "bound":
        return BoundReport()
    if attr_text(attrs[abi.KIND]) == "print":
        pieces = [p.value if isinstance(p, ir.StringAttr) else KEY if len(ir.ArrayAttr(p)) else None
                  for p in ir.ArrayAttr(attrs[abi.PIECES])]          # None: a value slot; KEY: one of keys
        return PrintSite(span, pieces)
    lanes = [attr_text(a) for a in ir.ArrayAttr(attrs[abi.LANES])] if abi.LANES in attrs else []
    return AssertSite(span, attr_text(attrs[abi.MESSAGE]),
                      tuple(i64s(attrs[abi.SHAPE])),
                      attr_text(attrs[abi.FUNCTION]), 0, call_chain=chain, lanes=lanes,
                      order=tuple(i64s(attrs[abi.ORDER])) if abi.ORDER in attrs else ())


def host_callback(site: PrintSite | AssertSite | BoundReport, sources: dict, loops: dict):
    """The callback of an effect's site; `loops`: the module's bounded loops by site number."""
    if isinstance(site, BoundReport):
        return _report_callback(loops, sources)
    make = {PrintSite: _print_callback, AssertSite: _assert_callback}[type(site)]
    return make(site, sources)


def runs() -> dict:
    return _runs
