"""Run generated cases through arrc and the reference, compare, and shrink failures.

    check_case(case) -> Outcome           # compile + run with arrc, evaluate the reference, compare
    shrink(choices, cfg, still_fails)     # minimize the decision list of a failing case
"""
from __future__ import annotations

import contextlib
import io
import re
import time
import traceback
import warnings
from dataclasses import dataclass

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

import arrc  # noqa: E402
from arrc.compiler import cache as _disk_cache  # noqa: E402
from arrc.runtime.guards import GuardSite  # noqa: E402

from .gen_programs import Case, Config, case_from_choices, expr_text  # noqa: E402
from . import reference as _reference  # noqa: E402
from .reference import AssertRaised, RefError, compare_result, run_reference  # noqa: E402



@contextlib.contextmanager
def no_disk_cache():
    """Thousands of throw-away programs: keep them out of the persistent compile cache (restored after)."""
    was = getattr(_disk_cache, "_enabled", True)
    _disk_cache.disable()
    try:
        yield
    finally:
        if was:
            _disk_cache.enable()


FAILURES = ("mismatch", "compile_error", "crash", "run_error", "guard_mismatch")


@dataclass
class Outcome:
    status: str          # ok | mismatch | compile_error | crash | run_error | reference_error
    detail: str
    case: Case
    compile_s: float = 0.0
    compared: int = 0          # result elements compared (known in the reference)
    total: int = 0             # result elements

    @property
    def failed(self) -> bool:
        return self.status in FAILURES

    def report(self) -> str:
        return (f"[{self.status}] {self.case.label}\n--- program ---\n{self.case.source}--- arguments ---\n"
                f"{self.case.describe_args()}\n--- problem ---\n{self.detail}\n")


def _within_ulps(a: np.ndarray, b: np.ndarray, ulps: int = 2) -> bool:
    """Floats equal up to `ulps` units in the last place, NaNs and infinities in the same places. A bounds
    or div0 check inside the computation can keep XLA from a rewrite it makes otherwise (`x / c` with a
    constant `c` becomes `x * (1 / c)`, 1 ulp apart), as any extra consumer would under jax.jit; integers
    and bools must be identical."""
    if a.dtype.kind not in "fV" or a.dtype.itemsize < 2:
        return False
    x, y = a.astype(np.float64), b.astype(np.float64)
    finite = np.isfinite(x)
    if not np.array_equal(finite, np.isfinite(y)) or not np.array_equal(x[~finite], y[~finite], equal_nan=True):
        return False
    spacing = np.abs(np.spacing(np.maximum(np.abs(a[finite]), np.abs(b[finite])))).astype(np.float64)
    return bool(np.all(np.abs(x[finite] - y[finite]) <= ulps * spacing))


def check_case(case: Case, guards: bool = False) -> Outcome:
    """Compile and run `case` with arrc and compare with the reference. With `guards`, also compile it with
    guards="all" and check the guard contract (docs/guards.md): guarded results are the unguarded ones (bit
    for bit, but for XLA rewrites a guard can prevent: `_within_ulps`); NaNError/InfError exactly when a float result is non-finite; DivisionByZero and
    BoundsError only when the reference met an integer division by zero / an out-of-range run-time index."""
    with no_disk_cache(), np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out, results = _check_case(case)
        if guards and out.status == "ok" and results is not None and not case.program.skip_guards:
            problem = _check_guards(case, results, set(_reference.EVENTS), _LAST_EXPECTED[0])
            if problem:
                return Outcome("guard_mismatch", problem, case, out.compile_s, out.compared, out.total)
        return out


_LAST_EXPECTED: list = [None]


def _may_be_nonfinite(expected) -> bool:
    """Whether the reference allows a NaN/Inf in some float result (a known one, or an unknown element: e.g.
    where XLA's select rewrite of bool arithmetic makes 0 * inf or 0 / 0 build-dependent)."""
    for e in expected or []:
        if e.dtype in ("f16", "bf16", "f32", "f64"):
            v = np.asarray(e.value, np.float64)
            if np.any(~np.isfinite(np.broadcast_to(e.err, v.shape))) or np.any(~np.isfinite(v)):
                return True
    return False


def _check_guards(case: Case, results: list, events: set, expected=None) -> str | None:
    try:
        mod = arrc.loads(case.source, filename="gen.arr", guards="all")
        with contextlib.redirect_stdout(io.StringIO()):
            got = mod[case.entry](*case.args)
            guarded = [np.asarray(r) for r in (got if isinstance(got, tuple) else (got,))]
    except (arrc.NaNError, arrc.InfError) as e:
        if not _nonfinite(results) and not _may_be_nonfinite(expected):
            return f"guards='all' raised {type(e).__name__} but no result is NaN/Inf:\n{e}"
        return None
    except arrc.DivisionByZero as e:
        return None if "div0" in events else \
            f"guards='all' raised DivisionByZero, but no integer division by zero ran:\n{e}"
    except arrc.BoundsError as e:
        return None if "bounds" in events else \
            f"guards='all' raised BoundsError, but every run-time index was in range:\n{e}"
    except arrc.AssertionFailed as e:
        return f"guards='all' raised AssertionFailed, but the unguarded run passed its assertions:\n{e}"
    except arrc.CompileError as e:
        return f"guards='all' compile error:\n{e}"
    except Exception:
        return "guards='all' raised:\n" + traceback.format_exc(limit=8)
    # Only a module with bounds/div0 checks inside its computation may differ (docs/guards.md); nan/inf checks
    # of the results run as a second executable and cannot change a bit.
    instrumented = any(isinstance(site, GuardSite) for compiled, _ in mod[case.entry]._compiled.values()
                       for site in compiled.sites.values())
    for i, (a, b) in enumerate(zip(results, guarded)):
        if a.dtype != b.dtype or a.shape != b.shape or (
                a.tobytes() != b.tobytes() and not (instrumented and _within_ulps(a, b))):
            return f"result {i} with guards='all' is not bit-identical to the unguarded one: {b!r} vs {a!r}"
    nonfinite = _nonfinite(results)
    if nonfinite:
        return f"result(s) {nonfinite} are NaN/Inf but guards='all' raised nothing"
    return None


def _nonfinite(results: list) -> list:
    """Indices of the float results holding a NaN or an infinity."""
    return [i for i, r in enumerate(results) if (r.dtype.kind == "f" or r.dtype.name == "bfloat16")
            and not np.all(np.isfinite(r.astype(np.float64)))]


def _check_case(case: Case):
    expect_assert = False
    _LAST_EXPECTED[0] = None
    try:
        expected = run_reference(case)
        _LAST_EXPECTED[0] = expected
    except AssertRaised:
        expected, expect_assert = None, True
    except RefError as e:
        return Outcome("reference_error", f"reference: {e}", case), None
    except Exception:           # a bug of the reference/generator, counted apart from compiler failures
        return Outcome("reference_error", traceback.format_exc(), case), None
    src = case.source
    t0 = time.perf_counter()
    try:
        mod = arrc.loads(src, filename="gen.arr")
    except arrc.CompileError as e:
        return Outcome("compile_error", str(e), case), None
    except Exception:
        return Outcome("crash", "arrc.loads raised:\n" + traceback.format_exc(limit=8), case), None
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            got = mod[case.entry](*case.args)
            results = got if isinstance(got, tuple) else (got,)
            results = [np.asarray(r) for r in results]
    except arrc.AssertionFailed as e:
        if expect_assert or _reference.EFFECTS["assert_unsure"]:
            return Outcome("ok", "", case), None
        return Outcome("mismatch", f"AssertionFailed raised, but every assertion holds:\n{e}", case), None
    except arrc.CompileError as e:
        return Outcome("compile_error", "at specialization:\n" + str(e), case), None
    except Exception:
        return Outcome("crash", "calling the entry raised:\n" + traceback.format_exc(limit=8), case), None
    elapsed = time.perf_counter() - t0
    if expect_assert:
        return Outcome("mismatch", "an assertion is false but no AssertionFailed was raised", case, elapsed), None
    n_printed = printed.getvalue().count("@P")
    if n_printed != _reference.EFFECTS["prints"] and not _reference.EFFECTS["prints_unsure"]:
        return Outcome("mismatch", f"{n_printed} print(s) ran, expected {_reference.EFFECTS['prints']}:\n"
                                   f"{printed.getvalue()[:2000]}", case, elapsed), None
    fn = case.program.function(case.entry)
    if len(results) != len(expected):
        return Outcome("mismatch", f"{len(results)} results, expected {len(expected)}", case, elapsed), None
    problems = []
    compared = total = 0
    for i, (a, e, t, r) in enumerate(zip(results, expected, fn.result_types, fn.results)):
        shape = tuple(d.eval(case.shape_env) for d in t.shape)
        total += int(np.prod(shape))
        compared += int(np.isfinite(np.broadcast_to(e.err, e.value.shape)).sum())
        msg = compare_result(a, e, t.dtype, shape)
        if msg:
            problems.append(f"result {i} `{expr_text(r)}` ({t.text()}): {msg}")
    if problems:
        return Outcome("mismatch", "\n".join(problems), case, elapsed, compared, total), results
    return Outcome("ok", "", case, elapsed, compared, total), results


def signature(outcome: Outcome) -> str:
    """A coarse identity of a failure (the same bug found twice has the same signature)."""
    detail = outcome.detail
    if outcome.status == "compile_error":
        m = re.search(r"error\[(E\d+)\]: ([^\n]*)", detail)
        text = f"{m.group(1)} {m.group(2)}" if m else detail.splitlines()[0]
    elif outcome.status == "crash":
        lines = [ln for ln in detail.strip().splitlines() if ln.strip() and not ln.strip().startswith("^")]
        text = lines[-1] if lines else detail
        text = re.sub(r"tensor<[^>]*>", "tensor<>", text)
    else:
        text = detail.splitlines()[0] if detail else ""
        text = re.sub(r"`[^`]*`", "`_`", text)
        text = re.sub(r"at \[[^\]]*\]: got .*", "", text)
    text = re.sub(r"\b(?:bool|[iuf]\d+|bf16)\b", "DT", text)
    text = re.sub(r"\b[tvrj]\d+\b|\bit\d+\b", "_", text)
    text = re.sub(r"-?\d+(\.\d*)?(e[-+]?\d+)?", "#", text)
    text = re.sub(r"\[[^\]]*\]", "[]", text)
    return f"{outcome.status}: {text[:160]}"


def shrink(choices: list, cfg: Config, still_fails, budget_s: float = 60.0, max_tries: int = 400) -> list:
    """Greedy minimization of a decision list (ReplayChooser semantics: missing decisions are 0).

    `still_fails(case) -> bool`. Passes: cut the tail, delete blocks, zero single decisions, halve values.
    """
    t_end = time.monotonic() + budget_s
    tries = 0
    best = list(choices)

    memo: dict = {}

    def ok(cand: list) -> bool:
        nonlocal tries
        try:
            case, record = case_from_choices(cand, cfg)
        except Exception:
            return False
        key = (case.source, tuple(np.asarray(a).tobytes() + str(np.asarray(a).shape).encode() for a in case.args))
        if key not in memo:             # many decisions do not change the program: run each one once
            tries += 1
            memo[key] = still_fails(case)
        return memo[key]

    def out_of_budget() -> bool:
        return tries >= max_tries or time.monotonic() > t_end

    improved = True
    while improved and not out_of_budget():
        improved = False
        # 1. shortest prefix
        lo, hi = 0, len(best)
        while lo < hi and not out_of_budget():
            mid = (lo + hi) // 2
            if ok(best[:mid]):
                hi = mid
            else:
                lo = mid + 1
        if hi < len(best):
            best = best[:hi]
            improved = True
        # 2. delete blocks
        for size in (16, 8, 4, 2, 1):
            i = 0
            while i < len(best) and not out_of_budget():
                cand = best[:i] + best[i + size:]
                if ok(cand):
                    best = cand
                    improved = True
                else:
                    i += size
        # 3. zero, then halve single decisions
        for i in range(len(best)):
            if out_of_budget():
                break
            if best[i] != 0:
                cand = best[:i] + [0] + best[i + 1:]
                if ok(cand):
                    best = cand
                    improved = True
                    continue
                cand = best[:i] + [best[i] // 2] + best[i + 1:]
                if best[i] // 2 != best[i] and ok(cand):
                    best = cand
                    improved = True
    return best


def same_failure(outcome: Outcome, guards: bool = False):
    sig = signature(outcome)

    def pred(case: Case) -> bool:
        return signature(check_case(case, guards=guards)) == sig
    return pred
