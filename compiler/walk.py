"""MLIR operations walked from Python (`Operation.walk`), where an exception raised by the visitor stays
itself: the bindings turn one into a RuntimeError ("Exception raised in callback: Traceback ..."), so a
Ctrl-C landing in a visitor reached the caller as a RuntimeError rather than a KeyboardInterrupt (a third of
the Ctrl-Cs during a compile's passes). Ctrl-C is held back during the walk (a visitor's first bytecode is
outside any `try` of its own) and raised as KeyboardInterrupt after it."""
from __future__ import annotations

from jaxlib.mlir import ir

from .signals import sigint_deferred


def walk_ops(op, visit) -> None:
    """`op.walk(visit)` (`op` an Operation or an OpView); an exception in `visit` ends the walk and is
    raised as itself."""
    raised: list = []

    def guarded(inner):
        try:
            return visit(inner)
        except BaseException as err:        # noqa: BLE001 (raised again below, as itself)
            raised.append(err)
            return ir.WalkResult.INTERRUPT
    with sigint_deferred():
        op.walk(guarded)
    if raised:
        raise raised[0]
