"""The tables of a bench run as Markdown, for docs/performance.md ("Results" is pasted from this output).

    .venv/bin/python bench/tables.py [bench/results/latest.json]

Each section of the run is one table with the columns `bench/run.py` printed; the targets come first.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from run import _cell

HERE = Path(__file__).resolve().parent


def markdown(run: dict) -> str:
    targets = run["targets"]
    met = sum(t["met"] for t in targets)
    machine = run["machine"]
    lines = [f"Run of {time.strftime('%Y-%m-%d %H:%M', time.localtime(run['started']))}"
             f"{' (--quick)' if run['quick'] else ''}, {machine['cpu']}, {machine['cores']} cores, "
             f"on {machine['device']}; jax/jaxlib {run['versions']['jax']}/{run['versions']['jaxlib']}; "
             f"{run['seconds'] / 60:.0f} minutes: **{met} of {len(targets)} targets met**.", "",
             "### Targets (ratio <= limit)", "", "| target | ratio | limit | met |", "|---|---|---|---|"]
    lines += [f"| {t['what']} | {t['ratio']:.3f} | {t['target']:.3g} | {'yes' if t['met'] else '**no**'} |"
              for t in targets]
    for section, rows in run["sections"].items():
        cols = [c for c in rows[0] if not c.startswith("_")]
        lines += ["", f"### {section}", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        lines += ["| " + " | ".join(_cell(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else HERE / "results" / "latest.json"
    print(markdown(json.loads(path.read_text())), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
