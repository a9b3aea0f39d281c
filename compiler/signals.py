"""Ctrl-C held back while an import runs that it must not cut short, and a Ctrl-C that Python dropped raised
where a command or a REPL cell ends (the standard library only: `arrc`'s command imports it before
anything else)."""
from __future__ import annotations

import contextlib
import signal
import sys
import threading


@contextlib.contextmanager
def sigint_deferred():
    """The body runs with Ctrl-C (SIGINT) held back, then a Ctrl-C that came meanwhile raises
    KeyboardInterrupt. For the imports of jax, jaxlib and arrc's compiler: a KeyboardInterrupt that cuts one
    short leaves the module half-initialized for the rest of the process (each later call an ImportError),
    and jaxlib's C++ may crash there. Only where Python's own handler is installed, on the main thread (where
    Python handles signals): a handler of the program's own is left to it."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    caught: list = []
    signal.signal(signal.SIGINT, lambda number, frame: caught.append(number))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if caught:
        raise KeyboardInterrupt


def keep_lost_interrupts() -> None:
    """Keep a Ctrl-C that Python raised where it cannot propagate, for `raise_lost_interrupt`. Python raises
    KeyboardInterrupt at the first bytecode after the signal; where a long garbage collection was running,
    that is a collector callback's (jax registers one), whose exception Python can only print ("Exception
    ignored in: <function _xla_gc_callback ...>") and drop: the Ctrl-C was lost. Such a KeyboardInterrupt is
    not printed but kept (signalling SIGINT again from here would raise it here too). Process-wide
    (`sys.unraisablehook`), installed once by the command line and the REPL."""
    if getattr(sys.unraisablehook, "keeps_lost_interrupts", False):
        return
    previous = sys.unraisablehook

    def hook(unraisable):
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            _lost.append(True)
            return
        previous(unraisable)
    hook.keeps_lost_interrupts = True
    sys.unraisablehook = hook


_lost: list = []        # the Ctrl-Cs `keep_lost_interrupts` kept


def raise_lost_interrupt() -> None:
    """KeyboardInterrupt if a Ctrl-C was lost since the last call: where a command or a REPL cell ends, so
    that it ends as interrupted, as it would have with the Ctrl-C raised where it came."""
    if _lost:
        _lost.clear()
        raise KeyboardInterrupt
