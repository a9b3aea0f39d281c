"""Every case of tests/conformance/jax_modules.py (JAX code as JAX users write it: jnp, lax loops, random
numbers, linalg through LAPACK, a training step under jax.grad), exported by JAX and run by `arrc run`'s
reader, unguarded and guarded, against `jax.jit` (x64 on)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

jax = pytest.importorskip("jax")

_spec = importlib.util.spec_from_file_location(
    "arrc_jax_modules", Path(__file__).resolve().parent / "conformance" / "jax_modules.py")
suite = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(suite)

with jax.enable_x64(True):
    CASES = suite.cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_jax_module_runs_and_guards_as_jax_jit(name, tmp_path):
    f, args = CASES[name]
    with jax.enable_x64(True):
        assert suite.run_case(name, f, args, tmp_path) == ("ok", "")


def test_the_suite_covers_what_jax_users_reach_for():
    assert len(CASES) >= 25
    for family in ("linalg", "scan", "random", "train_step", "conv", "fft", "cond"):
        assert any(family in name for name in CASES), family
