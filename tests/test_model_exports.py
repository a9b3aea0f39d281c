"""Flax, Equinox and Optax models exported by JAX (tests/conformance/model_exports.py wrote them into
tests/conformance/models/ with the results of `jax.jit`), read as `arrc run` reads a file, unguarded and
with every guard; a model that divides 0 by 0 inside Flax's LayerNorm is reported with the user's line."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("jax")

_spec = importlib.util.spec_from_file_location(
    "arrc_model_exports", Path(__file__).resolve().parent / "conformance" / "model_exports.py")
suite = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(suite)

EXPORTS = sorted(suite.OUT.glob("*.mlir"))


@pytest.mark.parametrize("mlir", EXPORTS, ids=[p.stem for p in EXPORTS])
def test_model_export_runs_and_guards_as_jax_jit(mlir):
    assert suite.run_export(mlir) == ("ok", "")


def test_the_models_cover_flax_equinox_and_optax():
    names = {p.stem for p in EXPORTS}
    assert len(names) >= 10
    for family in ("flax_resnet_block_train", "flax_transformer_block", "flax_lstm_scan", "flax_dropout",
                   "optax_adam_train_step", "equinox_gru_scan", "equinox_sgd_train_step", "fault_"):
        assert any(family in n for n in names), family


def test_a_fault_inside_flax_names_the_users_line():
    import numpy as np

    import arrc
    from arrc.passes.guards import KINDS
    from arrc.runtime.foreign import ForeignFunction
    mlir = suite.OUT / "fault_flax_layer_norm_eps0.mlir"
    data = np.load(mlir.with_suffix(".npz"))
    with pytest.raises(arrc.GuardError) as info:
        ForeignFunction(str(mlir), KINDS)([data["arg0"], data["arg1"], data["arg2"]])
    text = str(info.value)
    assert "this `rsqrt` produced inf at index [0, 0]" in text
    assert "flax/linen/normalization.py:206:9" in text                       # where the op is
    assert "called from cases.<locals>.Normalized.__call__ at " in text      # and the user's frames
    assert "model_exports.py:" in text.split("called from cases.<locals>.Normalized.__call__ at ")[1]
