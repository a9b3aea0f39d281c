"""A slice of the openxla/stablehlo repository's `testdata/` (tests/conformance/stablehlo_testdata/):
each file's interpreter-only checks become results, the module runs as `arrc run` runs a file, and what
it computed equals what the file expects (ulps as the checks allow), guarded too, bit for bit."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent / "conformance"
_spec = importlib.util.spec_from_file_location("arrc_stablehlo_testdata", HERE / "stablehlo_testdata.py")
suite = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(suite)
FILES = sorted(suite.SLICE.glob("*.mlir"))


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_testdata_file_matches_its_expected_values(path, tmp_path):
    assert suite.run_file(path, tmp_path, ulps=suite.CLOSE_ULPS) == ("ok", "")


def test_a_wrong_expected_value_is_a_mismatch(tmp_path):
    """The runner can fail: `abs` checked against its own input (negative where abs is not)."""
    text = (suite.SLICE / "abs_float32_20_20.mlir").read_text()
    assert "%1 = call @expected()" in text
    bad = tmp_path / "bad" / "abs_wrong.mlir"
    bad.parent.mkdir()
    bad.write_text(text.replace("%1 = call @expected()", "%1 = call @inputs()"))
    verdict, detail = suite.run_file(bad, tmp_path, ulps=suite.CLOSE_ULPS)
    assert verdict == "mismatch" and detail.startswith("check.expect_close #0: "), detail


def test_the_slice_is_varied():
    assert len(FILES) >= 25 and (suite.SLICE / "LICENSE").is_file()
    kinds = {k for p in FILES for k in suite.rewrite(p.read_text())[1]}
    assert {"check.expect_eq", "check.expect_close"} <= kinds
