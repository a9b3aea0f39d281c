"""`python -m arrc.demo` (`make demo`): compile and run `main` of every examples/*.arr with all guards on.

Goes through the same code as `arrc run FILE --guards all` (arrc.cli) and prints, for each file, the
signature of `main`, the time from source text to first result, and the results. Then it runs the
programs under examples/faults/, whose guard reports are the expected output.
Exits non-zero if any example fails (or a fault example does not fault).
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


GUARDS = ["all"]


def guards_for(path: Path) -> list[str]:
    """The guards an example asks for with a `# guards: nan,bounds` header line (default: all).
    Examples that demonstrate a defined non-finite or by-zero result on purpose opt out of those guards."""
    for line in path.read_text(encoding="utf-8").splitlines()[:10]:
        if line.startswith("# guards:"):
            kinds = [k.strip() for k in line.split(":", 1)[1].split(",") if k.strip()]
            return [] if kinds == ["off"] else kinds
    return GUARDS


def run_example(path: Path, expect_fault: bool = False) -> bool:
    """Compile and run `main` of one example with all guards, printing what happened; True on success."""
    import arrc
    name = _display(path)
    print(f"== {name}")
    start = time.perf_counter()
    try:
        guards = guards_for(path)
        module, sources = cli.load_module(name, guards=guards)
        checked = time.perf_counter() - start
        cli.print_diagnostics(module.warnings, sources)
        fn = cli.entry_function(module, "main", name)
        run = cli.execute(fn, {})
    except arrc.GuardError as err:
        print("   " + str(err).rstrip().replace("\n", "\n   "))
        return expect_fault
    except Exception as err:            # any failure is reported and makes the demo fail
        print(f"   FAILED ({type(err).__name__}): {str(err).rstrip()}")
        return False
    if expect_fault:
        print("   FAILED: the guards reported nothing")
        return False
    first = time.perf_counter() - start
    print(f"   main{fn.signature}    guards: {','.join(guards) or 'off'}")
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
    print("arrc demo: every example's `main`, compiled to StableHLO and run on the CPU through PJRT,")
    print("with the guards on (nan, inf, bounds, div0: the compiled program checks itself).\n")
    failed = [p.name for p in paths if not run_example(p)]
    if not args:
        print("\nPrograms with a fault: the guard report is the expected output.\n")
        faults = sorted((EXAMPLES / "faults").glob("*.arr"))
        failed += [p.name for p in faults if not run_example(p, expect_fault=True)]
        paths = paths + faults
    print()
    if failed:
        print(f"{len(failed)} of {len(paths)} examples FAILED: {', '.join(failed)}")
        return 1
    print(f"all {len(paths)} examples ran")
    return 0


if __name__ == "__main__":
    sys.exit(main())
