"""The fast slice of the adversarial campaign (tests/fuzz/adversarial_campaign.py, issue 12): each class for
a fixed seed and a few cases, every count of crashes, hangs, tracebacks and wrong results zero.

The whole campaign is part of `make fuzz` (`--seconds $(FUZZ_SECONDS)`); one failing case replays with
`.venv/bin/python tests/fuzz/adversarial_campaign.py --replay CLASS:SEED:CASE`. The StableHLO class runs
tests/fuzz/stablehlo_campaign.py as a subprocess; its own 50-case slice is in
tests/test_adversarial_stablehlo.py, so here it runs only a few cases to check that the campaign reads its
counts.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("arrc_adversarial_campaign", HERE / "fuzz" / "adversarial_campaign.py")
campaign = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(campaign)

SEED = 0
CASES = {"args": 24, "cli": 24, "cache": 12}
HANG_GUARD_S = 300          # per case: only there so that a hang fails the test instead of the suite


@pytest.fixture(scope="module")
def worker():
    w = campaign.Worker()
    yield w
    w.stop()


def run(cls: str, worker) -> dict:
    result = campaign.run_worker_class(cls, SEED, CASES[cls], None, HANG_GUARD_S, worker, quiet=True)
    details = "\n\n".join(f"case {f['case']} [{f['verdict']}]\n{f['detail']}" for f in result["failures"])
    assert result["cases"] == CASES[cls]
    assert {k: result[k] for k in campaign.FAILURES} == dict.fromkeys(campaign.FAILURES, 0), details
    return result["tags"]


def test_arguments(worker):
    tags = run("args", worker)
    assert tags["accepted"] > 0 and tags["refused"] > 0 and tags["guard_errors"] > 0, tags


def test_argument_files(worker):
    tags = run("cli", worker)
    assert tags["exit 0"] > 0 and tags["exit 2"] > 0, tags


def test_cache_entries(worker):
    tags = run("cache", worker)
    assert tags["corrupt"] > 0 and tags["hits"] > 0, tags


def test_stablehlo():
    if not campaign.STABLEHLO.exists():
        pytest.skip(f"{campaign.STABLEHLO} is not there: the campaign reports this class as an error")
    result = campaign.run_stablehlo(SEED, 3, None, quiet=True)
    assert not result.get("error"), result.get("error")
    assert result["cases"] == 3 and (result["crash"], result["hang"], result["traceback"]) == (0, 0, 0), result


def test_each_kind_of_failure_is_counted(worker):
    """The self-test cases fail in turn: a "Traceback" on stderr, a disagreement, a worker killed by
    SIGSEGV, one that never answers (a 3 s limit, for these cases only). A zero in the campaign's table
    means that none of these happened."""
    result = campaign.run_worker_class("selftest", SEED, 4, None, 3.0, worker, quiet=True)
    assert {k: result[k] for k in campaign.FAILURES} == dict.fromkeys(campaign.FAILURES, 1)
    assert [f["verdict"] for f in result["failures"]] == list(campaign.SELFTEST)
    assert "killed by signal 11" in result["failures"][2]["detail"]
    assert campaign.failed([{**result, "wrong": 1}]) and "selftest" in campaign.table([result])



@pytest.mark.parametrize("name", ["f16", "bf16", "f32", "f64"])
def test_the_oracle_reads_huge_python_ints_for_floats_as_arr_does(name):
    """A Python int past 64 bits is a float for a float parameter (docs/api.md; inf past the dtype's range):
    the oracle took it for a value arr must refuse, so each such call was counted wrong (args:1:100)."""
    import numpy as np

    import arrc
    f = arrc.loads(f"def f(x: {name}) -> {name}:\n    return x\n").f
    for value in (2 ** 70, -(2 ** 70), 10 ** 400):
        must, native = campaign._acceptable(value, name, "scalar")
        got = np.asarray(f(value))
        assert must is None and native is not None and got.dtype == native.dtype and got == native, value
    assert campaign._acceptable([2 ** 70, 1], name, "vec")[1] is not None
    assert campaign._native(2 ** 70, "i64") is None and campaign._native(2 ** 70, "u64") is None


@pytest.mark.parametrize("size", [0, 1, 17, 80])
def test_a_cache_entry_cut_short_can_be_damaged_again(tmp_path, size):
    """A second damage to an entry the first one left empty (cache:15:32, `named:zero-byte` then `truncate`)
    or shorter than a header (then `named:bad-key-digest`) was a traceback of the campaign itself (an empty
    `randrange`, an index past the bytes), arrc never reached."""
    import random
    for i in range(400):
        case = tmp_path / str(i)
        case.mkdir()
        target, other = case / "target.xc", case / "other.xc"
        target.write_bytes(bytes(range(size)))
        other.write_bytes(bytes(range(200)))
        campaign._damage_entry(target, other, random.Random(i), case)
