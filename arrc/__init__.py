"""arrc: the compiler for arr, a small statically typed array language (StableHLO + PJRT).

The names below are imported on first use (PEP 562), with Ctrl-C held back meanwhile (compiler/signals.py):
importing `arrc` itself is cheap, so the `arrc` command (arrc/launch.py) can hold Ctrl-C back before it
loads the compiler and jaxlib."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")   # before jaxlib loads: silence PJRT's start-up INFO lines

__version__ = "0.1.0"

_EXPORTS = {        # name: the module that defines it, under arrc
    **dict.fromkeys(("ArgumentError", "ArrWarning", "Compiled", "Function", "Module", "grad", "jvp", "key", "load",
                     "loads", "spec", "value_and_grad", "vjp", "vmap"), "api"),
    "CompileError": "compiler.diagnostics", "Diagnostic": "compiler.diagnostics",
    "Span": "compiler.span", "mesh": "sharding",
    **dict.fromkeys(("AssertionFailed", "BoundsError", "DivisionByZero", "GuardError", "InfError",
                     "LoopBoundExceeded", "NaNError"), "runtime.reports"),
}
_SUBMODULES = frozenset(("api", "cli", "compiler", "demo", "distributed", "exits", "interop", "launch", "lexer",
                         "passes", "repl", "runtime", "sharding", "grammar", "errors"))
__all__ = sorted(_EXPORTS) + ["distributed", "__version__"]


def __getattr__(name: str):
    if name not in _EXPORTS and name not in _SUBMODULES:
        raise AttributeError(f"module 'arrc' has no attribute {name!r}")
    import importlib

    from arrc.compiler.signals import sigint_deferred
    with sigint_deferred():
        module = importlib.import_module("." + _EXPORTS.get(name, name), __name__)
    value = getattr(module, name) if name in _EXPORTS else module
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(_EXPORTS) | _SUBMODULES)
