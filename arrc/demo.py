"""`python -m arrc.demo` (`make demo`): compile and run `main` of every examples/*.arr.

Goes through the same code as `arrc run FILE` (arrc.cli) and prints, for each file, the
signature of `main`, the time from source text to first result, and the results.
Exits non-zero if any example fails.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

from arrc import cli

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _display(path: Path) -> str:
    """The path relative to the working directory when it is below it (shorter spans in messages)."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def run_example(path: Path) -> bool:
    """Compile and run `main` of one example, printing what happened; True on success."""
    name = _display(path)
    print(f"== {name}")
    start = time.perf_counter()
    try:
        module, sources = cli.load_module(name)
        checked = time.perf_counter() - start
        cli.print_diagnostics(module.warnings, sources)
        fn = cli.entry_function(module, "main", name)
        run = cli.execute(fn, {}, "cpu")
    except Exception as err:            # any failure is reported and makes the demo fail
        print(f"   FAILED ({type(err).__name__}): {str(err).rstrip()}")
        return False
    first = time.perf_counter() - start
    print(f"   main{fn.signature}")
    print(f"   first result after {first * 1e3:.0f} ms (parse and check {checked * 1e3:.0f} ms, "
          f"first call {run.times['first_call'] * 1e3:.0f} ms)")
    for line in cli.format_results(run.results).splitlines():
        print(f"   {line}")
    return True


def main(argv: list[str] | None = None) -> int:
    """Run every example (or the files given); returns 0 if all succeeded."""
    args = sys.argv[1:] if argv is None else argv
    paths = [Path(a) for a in args] or sorted(EXAMPLES.glob("*.arr"))
    if not paths:
        print(f"no examples found in {EXAMPLES}", file=sys.stderr)
        return 1
    print("arrc demo: every example's `main`, compiled to StableHLO and run on the CPU through PJRT.")
    print("(Guards -- nan, inf, bounds, div0 -- are not implemented yet; examples run unguarded.)\n")
    failed = [p.name for p in paths if not run_example(p)]
    print()
    if failed:
        print(f"{len(failed)} of {len(paths)} examples FAILED: {', '.join(failed)}")
        return 1
    print(f"all {len(paths)} examples ran")
    return 0


if __name__ == "__main__":
    sys.exit(main())
