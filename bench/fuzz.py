"""Differential fuzzing campaign: random well-typed arr programs, compiled by arrc and checked against an
independent NumPy reference (tests/fuzz/). See docs/robustness.md.

    .venv/bin/python bench/fuzz.py                      # 300 s, coverage of compiler/ and passes/ if available
    .venv/bin/python bench/fuzz.py --seconds 60 --seed 7
    .venv/bin/python bench/fuzz.py --replay 1234        # print one generated case and its outcome
    .venv/bin/python bench/fuzz.py --include-known-bugs # also generate what KNOWN_BUGS avoids
    .venv/bin/python bench/fuzz.py --engine hypothesis  # let hypothesis drive (and shrink) the generator

Prints the number of cases generated and their outcomes, every new failure with its shrunk program and
arguments, and at the end (with the `coverage` package) the line coverage of compiler/ and passes/.
Exit status: 0 when no compiler failure was found, 1 otherwise.
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))


def _start_coverage(enabled: bool):
    if not enabled:
        return None
    try:
        import coverage
    except ImportError:
        print("(coverage is not installed: `.venv/bin/pip install coverage` for line coverage)")
        return None
    cov = coverage.Coverage(data_file=None, include=[os.path.join(ROOT, "compiler", "*"),
                                                     os.path.join(ROOT, "passes", "*")])
    cov.start()
    return cov


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=300.0, help="time budget (default 300)")
    ap.add_argument("--seed", type=int, default=None, help="first seed (default: from the clock)")
    ap.add_argument("--replay", type=int, default=None, help="run one seed and print its case")
    ap.add_argument("--engine", choices=["random", "hypothesis"], default="random")
    ap.add_argument("--include-known-bugs", action="store_true", help="do not avoid KNOWN_BUGS")
    ap.add_argument("--big-dims", action="store_true", help="shape variables up to 300 (default with "
                                                            "--include-known-bugs)")
    ap.add_argument("--guards-every", type=int, default=4, metavar="N",
                    help="also check every N-th case compiled with guards='all' (0: never; default 4)")
    ap.add_argument("--no-shrink", action="store_true")
    ap.add_argument("--shrink-seconds", type=float, default=60.0)
    ap.add_argument("--max-reports", type=int, default=12, help="distinct failures shrunk and printed")
    ap.add_argument("--no-coverage", action="store_true")
    ap.add_argument("--out", default=None, help="directory for the shrunk failing programs")
    args = ap.parse_args(argv)

    cov = _start_coverage(not args.no_coverage and args.replay is None)
    warnings.simplefilter("ignore")
    from fuzz.gen_programs import KNOWN_BUGS, Config, case_from_seed
    from fuzz.harness import check_case, same_failure, shrink, signature
    from fuzz.gen_programs import case_from_choices

    cfg = Config()
    if args.include_known_bugs:
        cfg.avoid = frozenset()
        cfg.big_dims = True
    if args.big_dims:
        cfg.big_dims = True

    if args.replay is not None:
        case, _ = case_from_seed(args.replay, cfg)
        out = check_case(case)
        print(out.report())
        return 1 if out.failed else 0

    seed = args.seed if args.seed is not None else int(time.time()) % 1_000_000 * 1000
    print(f"arr differential fuzzing: {args.seconds:.0f} s, engine {args.engine}, first seed {seed}"
          f"{', known bugs included' if args.include_known_bugs else ''}")
    if not args.include_known_bugs:
        print(f"avoiding known bugs: {', '.join(sorted(KNOWN_BUGS))}")
    t_start = time.monotonic()
    t_end = t_start + args.seconds
    stats: collections.Counter = collections.Counter()
    seen: dict = {}
    compared = total = 0
    ref_errors = []
    reports = []

    def record_failure(out, choices, guards=False):
        sig = signature(out)
        seen.setdefault(sig, 0)
        seen[sig] += 1
        if seen[sig] > 1 or len(reports) >= args.max_reports:
            return
        shrunk_out = out
        if not args.no_shrink and choices is not None:
            budget = max(5.0, min(args.shrink_seconds, t_end - time.monotonic()))
            small = shrink(choices, cfg, same_failure(out, guards), budget_s=budget)
            case2, _ = case_from_choices(small, cfg)
            o2 = check_case(case2, guards=guards)
            if signature(o2) == sig:
                shrunk_out = o2
                shrunk_out.case.label = f"{out.case.label} (shrunk)"
        reports.append(shrunk_out)
        print(f"\n=== failure {len(reports)}: {sig}\n{shrunk_out.report()}", flush=True)
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            path = os.path.join(args.out, f"failure{len(reports)}.arr")
            with open(path, "w") as f:
                f.write(f"# {sig}\n# {shrunk_out.case.label}\n")
                f.write("".join(f"# {ln}\n" for ln in shrunk_out.case.describe_args().splitlines()))
                f.write(shrunk_out.case.source)

    def account(out, choices, guards=False):
        nonlocal compared, total
        stats[out.status] += 1
        compared += out.compared
        total += out.total
        if out.status == "reference_error":
            if len(ref_errors) < 3:
                ref_errors.append(out)
                print(f"\n--- reference/generator error (not a compiler failure) ---\n{out.report()}", flush=True)
        elif out.failed:
            record_failure(out, choices, guards)

    last_print = time.monotonic()
    if args.engine == "random":
        while time.monotonic() < t_end:
            case, choices = case_from_seed(seed, cfg)
            guards = bool(args.guards_every) and seed % args.guards_every == 0
            seed += 1
            account(check_case(case, guards=guards), choices, guards)
            if time.monotonic() - last_print > 30:
                last_print = time.monotonic()
                print(f"  {sum(stats.values())} cases, {dict(stats)}", flush=True)
    else:
        from hypothesis import HealthCheck, given, settings
        from hypothesis import seed as hseed
        from fuzz.gen_programs import cases

        round_ = 0
        while time.monotonic() < t_end:
            failing = []
            round_ += 1

            @hseed(seed + round_)
            @settings(max_examples=25, deadline=None, database=None, derandomize=False,
                      suppress_health_check=list(HealthCheck))
            @given(cases(cfg))
            def prop(case):
                out = check_case(case)
                if not failing:
                    account(out, None)
                if out.failed:
                    failing.append(out)
                    raise AssertionError(out.report())
            try:
                prop()
            except AssertionError:
                last = failing[-1]           # hypothesis replays the minimal example last
                last.case.label = f"hypothesis seed {seed + round_} (shrunk)"
                record_failure(last, None)
            if time.monotonic() - last_print > 30:
                last_print = time.monotonic()
                print(f"  {sum(stats.values())} cases, {dict(stats)}", flush=True)

    elapsed = time.monotonic() - t_start
    n = sum(stats.values())
    print(f"\n{n} cases generated and checked in {elapsed:.0f} s: " +
          ", ".join(f"{k} {v}" for k, v in sorted(stats.items())))
    print(f"result elements compared: {compared} of {total} ({100 * compared / max(total, 1):.0f}%; "
          f"the rest were within their error bound of a discontinuity)")
    failures = sum(v for k, v in stats.items() if k in ("mismatch", "compile_error", "crash", "run_error",
                                                         "guard_mismatch"))
    print(f"compiler failures: {failures} in {len(seen)} distinct signature(s)")
    for sig, count in sorted(seen.items(), key=lambda kv: -kv[1]):
        print(f"  {count:5d}  {sig}")
    if cov is not None:
        cov.stop()
        print("\nline coverage of compiler/ and passes/:")
        try:
            cov.report(show_missing=False, skip_empty=True)
        except Exception as e:          # no data (e.g. nothing ran)
            print(f"  (no coverage report: {e})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
