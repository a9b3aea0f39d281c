"""Run-time reports: guard and assert failures as exceptions whose `str()` is the rendered report."""
from __future__ import annotations

from ..compiler.diagnostics import Diagnostic, render
from ..compiler.span import Span


class GuardError(RuntimeError):
    """A fault found by the compiled program itself (guards) or a failed `assert`."""
    code = "R0000"

    def __init__(self, message: str, span: Span | None, label: str = "", index=None, iteration=None,
                 operands=None, notes=(), sources: dict | None = None, help: str | None = None, lanes=()):
        self.message = message
        self.span = span
        self.index = index
        self.iteration = iteration      # the enclosing loops' iterations, outermost first (None: in no loop)
        self.lanes = lanes              # under vmap: the lane of each vmap, outermost first
        self.operands = operands or {}
        notes = list(notes)
        if label and (span is None or (sources is not None and sources.get(span.file) is None)):
            notes.insert(0, label)          # no source line to put the label under
        self.diagnostic = Diagnostic(self.code, message, span, label, notes=notes, help=help)
        self.sources = sources if sources is not None else {}
        super().__init__(str(self))

    def __str__(self) -> str:
        return render(self.diagnostic, self.sources)

    def noted(self, note: str) -> GuardError:
        """This report with one more note (where it was seen: arrc/sharding.py)."""
        self.diagnostic.notes.append(note)
        self.args = (str(self),)
        return self

    def __reduce__(self):       # (pickled whole: arrc/sharding.py sends a report to the other processes)
        return _rebuilt, (type(self), self.__dict__)


def _rebuilt(cls, state: dict) -> GuardError:
    err = cls.__new__(cls)
    err.__dict__.update(state)
    err.args = (str(err),)
    return err


class NaNError(GuardError, FloatingPointError):
    code = "R0001"


class InfError(GuardError, FloatingPointError):
    code = "R0002"


class BoundsError(GuardError, IndexError):
    code = "R0003"


class DivisionByZero(GuardError, ZeroDivisionError):
    code = "R0004"


class AssertionFailed(GuardError, AssertionError):
    code = "R0005"
    function = ""           # the function of the `assert`, and the calls that inlined it there (innermost first,
    chain: tuple = ()       # (callee, call span)): their note is written where the call's name is known
    order: tuple = ()       # its place among the guards' checks, and the iterations of its loops then: a guard
    counters: tuple = ()    # fault before it is reported first


class LoopBoundExceeded(GuardError):
    """A loop with a `bound=` ran more iterations than its bound, in a call that differentiates it."""
    code = "R0006"
