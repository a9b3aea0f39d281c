"""bench/tables.py: a run's JSON as the Markdown tables docs/performance.md shows."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_run_renders_as_markdown_tables(tmp_path):
    run = {"started": 0, "seconds": 780, "quick": False,
           "machine": {"cpu": "x86_64", "cores": 2, "device": "cpu", "load_average": None},
           "versions": {"arrc": "0", "jax": "0.10.2", "jaxlib": "0.10.2"},
           "sections": {"call overhead": [
               {"inputs": "numpy", "caller": "jax.jit", "per_call": "6.7 us", "ratio": 1.0, "_raw": {"median": 1}},
               {"inputs": "numpy", "caller": "arrc", "per_call": "7.9 us", "ratio": 1.1791, "_raw": {}}]},
           "targets": [{"what": "call overhead, numpy inputs", "ratio": 1.1791, "target": 1.1, "met": False},
                       {"what": "call overhead, device inputs", "ratio": 1.0131, "target": 1.1, "met": True}]}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run))
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "tables.py"), str(path)], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    assert out.split("\n", 1)[1] == """
### Targets (ratio <= limit)

| target | ratio | limit | met |
|---|---|---|---|
| call overhead, numpy inputs | 1.179 | 1.1 | **no** |
| call overhead, device inputs | 1.013 | 1.1 | yes |

### call overhead

| inputs | caller | per_call | ratio |
|---|---|---|---|
| numpy | jax.jit | 6.7 us | 1.000 |
| numpy | arrc | 7.9 us | 1.179 |
"""
    assert out.startswith("Run of ") and out.splitlines()[0].endswith(
        ", x86_64, 2 cores, on cpu; jax/jaxlib 0.10.2/0.10.2; 13 minutes: **1 of 2 targets met**.")
