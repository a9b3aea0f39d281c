"""MLIR-level passes over StableHLO modules, by name (see `registry.py`)."""
from .registry import PASSES, run_passes  # noqa: F401
