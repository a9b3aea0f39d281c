"""`make fuzz` runs all three campaigns even when one fails, reports each exit status, and fails if any did.

The recipe is run by make itself with `PY` pointing at a stub that records which campaign it was asked to run
and exits with a status chosen per campaign (no real campaign runs); `STAMP` points at a fresh file so that
the venv set-up rule has nothing to do.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CAMPAIGNS = ["tests/fuzz/frontend_campaign.py", "bench/fuzz.py", "tests/fuzz/adversarial_campaign.py"]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def _make_fuzz(tmp_path: Path, statuses: dict[str, int]) -> tuple[subprocess.CompletedProcess, list[str]]:
    log = tmp_path / "calls.log"
    stub = tmp_path / "stub-python"
    cases = "".join(f"  {script}) exit {code};;\n" for script, code in statuses.items())
    stub.write_text(f'#!/bin/sh\necho "$@" >> "{log}"\ncase "$1" in\n{cases}esac\nexit 0\n')
    stub.chmod(0o755)
    stamp = tmp_path / "stamp"
    stamp.touch()
    os.utime(stamp, (2 ** 33, 2 ** 33))          # newer than pyproject.toml: the install rule does nothing
    proc = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "fuzz", f"PY={stub}",
                           f"STAMP={stamp}", "FUZZ_SECONDS=1"], capture_output=True, text=True, timeout=60)
    calls = log.read_text().splitlines() if log.exists() else []
    return proc, calls


def test_all_campaigns_run_when_the_first_fails(tmp_path):
    proc, calls = _make_fuzz(tmp_path, {CAMPAIGNS[0]: 3, CAMPAIGNS[1]: 0, CAMPAIGNS[2]: 5})
    assert calls == [f"{c} --seconds 1" for c in CAMPAIGNS], (calls, proc.stdout, proc.stderr)
    assert proc.returncode != 0
    assert ("front-end campaign exit 3, differential campaign exit 0, adversarial campaign exit 5"
            in proc.stdout), proc.stdout


def test_the_differential_campaign_failing_alone_fails_the_target(tmp_path):
    proc, calls = _make_fuzz(tmp_path, {CAMPAIGNS[1]: 1})
    assert len(calls) == 3, calls
    assert proc.returncode != 0
    assert "front-end campaign exit 0, differential campaign exit 1, adversarial campaign exit 0" in proc.stdout


def test_all_campaigns_passing_pass_the_target(tmp_path):
    proc, calls = _make_fuzz(tmp_path, {})
    assert len(calls) == 3, calls
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert "front-end campaign exit 0, differential campaign exit 0, adversarial campaign exit 0" in proc.stdout
