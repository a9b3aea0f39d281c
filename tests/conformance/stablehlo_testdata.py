"""The openxla/stablehlo repository's `stablehlo/testdata/` through arrc's runner, unguarded and guarded.

Each file is a `main()` that computes an operation on constant inputs and checks it against stored
expected values with interpreter-only `check.expect_eq` / `expect_close` / `expect_almost_eq` / `eq`
custom_calls. Here each check becomes two results of `main` (what it computed, what was expected), the
module runs as `arrc run` runs a file (runtime/foreign.py), and the pairs are compared on the host as the
reference interpreter compares these custom calls (`stablehlo-translate --interpret`'s fallback,
stablehlo/tools/StablehloTranslateMain.cpp, and stablehlo/tests/CheckOps.cpp): `expect_eq` element by
element, where NaN matches NaN (the interpreter's IEEE `==` does not, and the repository disables
interpreting the files that expect a NaN, e.g. `sort_float32_5`, RUN-DISABLED #2497); `eq` exactly for
integers and within an absolute 1e-4 for floats; `expect_almost_eq` within an absolute 1e-3; both per
part of a complex number, NaN matching only NaN; `expect_close` within 0-3 units in the last place counted between bit patterns
(`--ulps`; NaN against NaN is 0, other non-finite pairs fail unless equal). XLA's transcendental functions
are not correctly rounded: the tolerances are the interpreter's own. The guarded build (`guards="all"`)
must give bit for bit what the unguarded one gives (issue 19 item 9).

    .venv/bin/python tests/conformance/stablehlo_testdata.py                   # the slice kept here
    .venv/bin/python tests/conformance/stablehlo_testdata.py REPO/stablehlo/testdata

The slice in `stablehlo_testdata/` (Apache License 2.0, see its LICENSE) is run by
`tests/test_stablehlo_testdata.py` in `make test`; the whole folder needs a checkout of the repository.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
SLICE = Path(__file__).resolve().parent / "stablehlo_testdata"
CHECKS = ("check.expect_eq", "check.eq", "check.expect_close", "check.expect_almost_eq")
TOLERANCE = {"check.eq": 1e-4, "check.expect_almost_eq": 1e-3}    # absolute, as the interpreter's fallback
CLOSE_ULPS = 3          # expect_close: the interpreter's fallback allows 0-3 ulps


def rewrite(text: str) -> tuple[str, list[str]]:
    """(the module with each check's operands as results of `main` instead, the checks' kinds)."""
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import func
    from arrc.runtime.mlir_reader import make_context
    from arrc.passes.rewrite import attr_text, entry, ops_named
    with make_context() as context:
        context.allow_unregistered_dialects = True
        module = ir.Module.parse(text)
        main = entry(module)
        kinds, values = [], []
        for op in ops_named(module, "stablehlo.custom_call"):
            target = attr_text(op.attributes["call_target_name"])
            if target.startswith("check."):
                if target not in CHECKS:
                    raise ValueError(f"unknown check {target}")
                kinds.append(target)
                values += list(op.operands)[:2]
                if len(op.results) and len(list(op.results[0].uses)):
                    raise ValueError(f"the result of {target} is used")
                op.erase()
        block = main.regions[0].blocks[0]
        ret = block.operations[len(block.operations) - 1]
        with ir.InsertionPoint(ret), ret.location:
            func.ReturnOp(values)
        ret.erase()
        inputs = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value).inputs
        main.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, [v.type for v in values]))
        if "res_attrs" in main.attributes:
            del main.attributes["res_attrs"]
        return module.operation.get_asm(enable_debug_info=True), kinds


def run_file(path: Path, folder: Path, ulps: int) -> tuple[str, str]:
    """(verdict, detail): ok | mismatch | guarded-differs | false-alarm (a NaN/Inf report on finite
    results) | guard-reported (an index out of range or a division by zero the file tests on purpose) |
    skipped (no checks, or arguments) | error. A guard report where a result is not finite is right: the
    guarded results are compared only where there is none."""
    from arrc.passes.guards import KINDS
    from arrc.runtime.foreign import ForeignFunction
    from arrc.runtime.reports import BoundsError, DivisionByZero, GuardError
    try:
        text, kinds = rewrite(path.read_text())
    except Exception as err:            # noqa: BLE001  (a verdict for this file)
        return "skipped", f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"
    if not kinds:
        return "skipped", "no checks"
    rewritten = folder / path.name
    rewritten.write_text(text)
    try:
        plain = ForeignFunction(str(rewritten))
        if plain.params:
            return "skipped", "main takes arguments"
        got = [np.asarray(r) for r in plain([])]
    except Exception as err:            # noqa: BLE001
        return "error", f"{type(err).__name__}: {str(err).splitlines()[0][:300] if str(err) else ''}"
    try:
        guarded = [np.asarray(r) for r in ForeignFunction(str(rewritten), KINDS)([])]
    except (BoundsError, DivisionByZero) as err:
        # the file means it: StableHLO defines what an index out of range or a division by zero gives, and
        # these files test exactly that; the guard's report is what it is for
        return "guard-reported", str(err).splitlines()[0][:300]
    except GuardError as err:
        # right where a result is NaN or infinite (acos outside [-1, 1]: the expected values are NaN)
        if any(not _finite(r) for r in got):
            guarded = None
        else:
            return "false-alarm", str(err).splitlines()[0][:300]
    except Exception as err:            # noqa: BLE001
        return "error", f"guarded: {type(err).__name__}: {str(err).splitlines()[0][:300] if str(err) else ''}"
    for i, kind in enumerate(kinds):
        problem = _check(kind, got[2 * i], got[2 * i + 1], ulps)
        if problem:
            return "mismatch", f"{kind} #{i}: {problem}"
    for g, u in zip(guarded or (), got):
        if g.tobytes() != u.tobytes():
            return "guarded-differs", f"{_ulps(g, u):.0f} ulps"
    return "ok", ""


def _finite(r: np.ndarray) -> bool:
    """Whether every element is finite (bf16 and the other ml_dtypes floats, which NumPy does not count as
    inexact, too)."""
    return r.dtype.kind in "biu" or bool(np.isfinite(r if r.dtype.kind == "c" else r.astype(np.float64)).all())


def _check(kind: str, actual: np.ndarray, expected: np.ndarray, ulps: int) -> str:
    if actual.shape != expected.shape:
        return f"shape {actual.shape} != {expected.shape}"
    if kind == "check.expect_eq" or expected.dtype.kind in "biu":
        same = actual.tobytes() == expected.tobytes() or np.array_equal(actual, expected, equal_nan=True)
        return "" if same else f"{int(np.sum(actual != expected))} elements differ"
    if kind in TOLERANCE:                       # |a - b| <= tolerance, of each part of a complex number
        tolerance = TOLERANCE[kind]
        wide = np.complex128 if expected.dtype.kind == "c" else np.float64
        a, b = actual.astype(wide), expected.astype(wide)
        close = np.isclose(a.real, b.real, rtol=0, atol=tolerance, equal_nan=True) \
            & np.isclose(a.imag, b.imag, rtol=0, atol=tolerance, equal_nan=True)
        return "" if close.all() else f"{int(np.sum(~close))} elements differ by more than {tolerance}"
    worst = _ulps(actual, expected)
    return "" if worst <= ulps else f"{worst:.0f} ulps apart"


def _ulps(a: np.ndarray, b: np.ndarray) -> float:
    """The largest distance in units in the last place between `a` and `b`, as the interpreter counts it
    (CheckOps.cpp `ULPDifference`): between the bit patterns of the magnitudes, their sum where the signs
    differ; 0 for NaN against NaN, infinite for any other pair with a NaN or an infinity unless equal;
    the larger part's for complex numbers."""
    if b.dtype.kind in "biu":
        return 0.0 if np.array_equal(a, b) else float("inf")
    if np.iscomplexobj(b):
        return max(_ulps(a.real, b.real), _ulps(a.imag, b.imag))
    a, b = a.astype(b.dtype), b
    width = 8 * b.dtype.itemsize
    ia, ib = (x.view(np.dtype(f"u{b.dtype.itemsize}")).astype(np.uint64) for x in (a, b))
    magnitude = np.uint64((1 << (width - 1)) - 1)
    ma, mb = ia & magnitude, ib & magnitude
    same_sign = (ia >> np.uint64(width - 1)) == (ib >> np.uint64(width - 1))
    dist = np.where(same_sign, np.maximum(ma, mb) - np.minimum(ma, mb), ma + mb).astype(np.float64)
    wa, wb = a.astype(np.float64), b.astype(np.float64)
    nan_both = np.isnan(wa) & np.isnan(wb)
    odd = ~(np.isfinite(wa) & np.isfinite(wb)) & ~nan_both & (ia != ib)
    dist = np.where(nan_both, 0.0, np.where(odd, np.inf, dist))
    return float(dist.max(initial=0.0))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="?", default=str(SLICE), help="a testdata folder (default: the slice here)")
    ap.add_argument("-k", default="", help="only the files whose name contains this")
    ap.add_argument("--ulps", type=int, default=CLOSE_ULPS,
                    help=f"expect_close tolerance (default {CLOSE_ULPS}, the interpreter's)")
    ap.add_argument("--limit", type=int, default=None, help="at most this many files")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    files = sorted(p for p in Path(args.folder).glob("*.mlir") if args.k in p.name)[: args.limit]
    verdicts: dict[str, list] = {}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="arrc-testdata-") as tmp:
        for path in files:
            verdict, detail = run_file(path, Path(tmp), args.ulps)
            verdicts.setdefault(verdict, []).append(path.name)
            if verdict != "ok":
                print(f"{verdict:16} {path.name}: {detail}", flush=True)
    ran = len(files) - len(verdicts.get("skipped", []))
    ok = len(verdicts.get("ok", [])) + len(verdicts.get("guard-reported", []))
    print(f"{ok}/{ran} ok ({len(files)} files, {len(verdicts.get('skipped', []))} skipped) in "
          f"{time.perf_counter() - start:.0f} s" + "".join(f"; {k}: {len(v)}" for k, v in verdicts.items()
                                                        if k not in ("ok", "skipped")))
    # (ok counts the files whose unguarded results match and whose guarded build agrees or reports what
    # the file does on purpose)
    return 0 if ok == ran else 1


if __name__ == "__main__":
    sys.exit(main())
