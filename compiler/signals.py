"""Ctrl-C held back while an import runs that it must not cut short (the standard library only: `arrc`'s
command imports it before anything else)."""
from __future__ import annotations

import contextlib
import signal
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
