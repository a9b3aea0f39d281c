"""arrc: the compiler for arr, a small statically typed array language (StableHLO + PJRT)."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")   # before jaxlib loads: silence PJRT's start-up INFO lines
from arrc.api import (ArgumentError, ArrWarning, Function, Module, grad, jvp, key, load, loads, spec, value_and_grad,  # noqa: E501
                      vjp, vmap)
from arrc.compiler.diagnostics import CompileError, Diagnostic
from arrc.compiler.span import Span
from arrc import distributed
from arrc.sharding import mesh
from arrc.runtime.reports import (AssertionFailed, BoundsError, DivisionByZero, GuardError, InfError, LoopBoundExceeded,
                                  NaNError)

__version__ = "0.1.0"
__all__ = ["AssertionFailed", "BoundsError", "DivisionByZero", "GuardError", "InfError", "LoopBoundExceeded", "NaNError",
           "ArgumentError", "ArrWarning", "CompileError", "Diagnostic", "Function", "distributed", "Module", "Span", "grad", "jvp", "key", "load", "loads", "mesh", "spec", "value_and_grad", "vjp", "vmap",
           "__version__"]
