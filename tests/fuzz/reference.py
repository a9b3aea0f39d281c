"""The independent reference: evaluates the generator's IR op by op with NumPy (never the arr text).

Every value is an `RV`: the value (NumPy array of the arr dtype) and a per-element error bound `err`
(float64). Integers and bools are exact (`err == 0`) or unknown (`err == inf`). For floats, `err` bounds how
far a correct implementation may be from the reference value: each rounding operation adds a few ulps of its
result, errors of the operands propagate through the operation's derivative, and XLA's freedom (fusion with
excess precision for f16/bf16, reassociated reductions, flushed denormals, a few-ulp transcendental
functions) is covered by those terms. Elements whose value a correct implementation could legitimately
change -- a comparison, floor, cast to int, argmax or branch decided by values within their error of the
decision point, an overflow boundary, a domain boundary -- become unknown (`err == inf`) and are not compared.
Exact inputs give exact (compared bit-for-bit modulo the sign of zero) results for exact operations:
integer arithmetic, comparisons, selects, casts, indexing.

Float math is computed in float64 and rounded once to the result dtype (round-to-odd into f32 first for
f16/bf16, so the rounding is correct). arr semantics that differ from NumPy are implemented explicitly:
casts (float -> int truncates and saturates, NaN -> 0; int -> int wraps), integer `//` and `%` by zero give 0,
promotion (done by the generator's types), the 32-bit accumulators of small-integer sums, run-time indices
(negative ones count from the end, then clamp), dynamic slices (start clamped).
"""
from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes  # noqa: F401  (bfloat16 casts)
import numpy as np

from .gen_programs import (BITS, FLOATS, NP, UNSIGNED, ArrLit, Assign, AugAssign, Call, Dim, DimVal, Effect, For,
                           Function, If,
                           IndexSet, Lit, Op, Program, TupleAssign, Ty, Var, While, int_range, is_float, is_int,
                           promote)

INF = np.inf
EPS = {"f16": 2.0 ** -10, "bf16": 2.0 ** -7, "f32": 2.0 ** -23, "f64": 2.0 ** -52}
TINY = {"f16": 2.0 ** -14, "bf16": 2.0 ** -126, "f32": 2.0 ** -126, "f64": 2.0 ** -1022}
FMAX = {"f16": 65504.0, "bf16": float(ml_dtypes.finfo(ml_dtypes.bfloat16).max), "f32": float(np.finfo(np.float32).max),
        "f64": float(np.finfo(np.float64).max)}
K_BASIC = 2.0        # ulps for + - * / sqrt (correctly rounded, but fusion/FMA may differ by an ulp)
K_MATH = 8.0         # ulps for transcendental functions


# Run-time events of the last `run_reference` (for the guard check): "div0" (an integer `//`/`%` with a zero
# divisor) and "bounds" (a run-time index or window out of range, under either reading of negative starts).
EVENTS: set = set()
# KNOWN_BUGS (gen_programs) whose trigger depends on values: the reference leaves those elements unknown.
AVOID: set = set()


class AssertRaised(Exception):
    """A generated `assert` whose condition is known to be false: arrc must raise AssertionFailed."""


# How many `print`s ran in the last `run_reference`, and whether an assertion could not be decided.
EFFECTS = {"prints": 0, "assert_unsure": False, "prints_unsure": False}


class RefError(Exception):
    """The reference cannot evaluate this program (a generator bug, not a compiler one)."""


class RV:
    __slots__ = ("dtype", "value", "err", "weak", "from_bool")

    def __init__(self, dtype: str, value, err=None, weak=None, from_bool=False):
        self.from_bool = from_bool      # a float 0/1 converted from bool (see XLA_SELECT_REWRITE)
        self.dtype = dtype
        self.value = np.asarray(value, NP[dtype]) if weak is None else np.asarray(value)
        self.err = np.zeros(self.value.shape) if err is None else np.asarray(err, np.float64)
        if self.err.shape != self.value.shape:
            self.err = np.broadcast_to(self.err, self.value.shape).copy()
        self.weak = weak          # the Python value of a weak literal / compile-time int

    @property
    def shape(self):
        return self.value.shape

    def f64(self) -> np.ndarray:
        return np.asarray(self.value, np.float64) if self.dtype != "bool" else self.value.astype(np.float64)

    def unknown(self) -> np.ndarray:
        return ~np.isfinite(self.err)

    def __repr__(self):
        return f"RV({self.dtype}, {self.value!r}, err={self.err!r})"


def round_to(dt: str, x) -> np.ndarray:
    """Correctly rounded (nearest even) float64 -> float dtype `dt`."""
    x = np.asarray(x, np.float64)
    if dt == "f64":
        return x.copy()
    if dt == "f32":
        with np.errstate(over="ignore"):
            return x.astype(np.float32)
    shape = x.shape
    x = np.ascontiguousarray(x).reshape(-1)
    bits = x.view(np.uint64)
    dropped = np.uint64((1 << 29) - 1)
    low = bits & dropped
    kept = bits & ~dropped
    sticky = np.where(low != 0, np.uint64(1 << 29), np.uint64(0))
    odd = np.ascontiguousarray(kept | sticky).view(np.float64)
    with np.errstate(over="ignore"):
        return odd.astype(np.float32).astype(NP[dt]).reshape(shape)


def unknown_like(shape) -> np.ndarray:
    return np.full(shape, INF)


# ---------------------------------------------------------------------------------------------------------
# conversions (explicit casts and implicit promotions)
def wrap_ints(dt: str, obj) -> np.ndarray:
    lo, hi = int_range(dt)
    m = 2 ** BITS[dt]
    arr = np.asarray(obj, dtype=object)
    flat = [((int(v) - lo) % m) + lo for v in arr.reshape(-1)]
    return np.array(flat, dtype=object).astype(NP[dt]).reshape(arr.shape) if flat else np.zeros(arr.shape, NP[dt])


def as_ints(a: np.ndarray) -> np.ndarray:
    """An object array of Python ints."""
    a = np.asarray(a)
    out = np.empty(a.shape, dtype=object)
    flat = out.reshape(-1)
    for i, v in enumerate(a.reshape(-1)):
        flat[i] = int(v)
    return out


def weak_rv(value) -> RV:
    if isinstance(value, bool):
        return RV("bool", value)
    if isinstance(value, int):
        return RV("i32", np.asarray(value, dtype=object), weak=value)
    return RV("f32", np.asarray(value, np.float64), weak=float(value))


def conv(rv: RV, dt: str) -> RV:
    """Implicit conversion to the promoted dtype `dt` (value preserving except int -> float rounding)."""
    if isinstance(rv.weak, list):               # an array literal of numbers
        vals = np.array(rv.weak, dtype=object)
        if is_float(dt):
            return RV(dt, round_to(dt, np.array(rv.weak, np.float64)))
        if dt == "bool":
            return RV("bool", np.array(rv.weak) != 0)
        lo, hi = int_range(dt)
        if not all(lo <= int(v) <= hi for v in vals.reshape(-1)):
            raise RefError(f"array literal {rv.weak!r} does not fit {dt}")
        return RV(dt, wrap_ints(dt, vals))
    if rv.weak is not None:
        v = rv.weak
        if isinstance(v, bool) or rv.dtype == "bool":
            return cast(RV("bool", bool(v)), dt)
        if is_float(dt):
            return RV(dt, round_to(dt, float(v)))
        if dt == "bool":
            return RV("bool", bool(v))
        lo, hi = int_range(dt)
        if not (isinstance(v, int) and lo <= v <= hi):
            raise RefError(f"literal {v!r} does not fit {dt}")
        return RV(dt, np.asarray(v, NP[dt]))
    return cast(rv, dt)


def cast(rv: RV, dst: str) -> RV:
    """arr's explicit cast semantics (LANGUAGE.md section 4, Casts)."""
    if isinstance(rv.weak, list):
        is_f = any(isinstance(v, float) for v in np.array(rv.weak, dtype=object).reshape(-1))
        src = RV("f64", np.array(rv.weak, np.float64)) if is_f else RV("i64", np.array(rv.weak, np.int64))
        return cast(src, dst)
    if rv.weak is not None:
        if isinstance(rv.weak, float) and is_float(dst) is False and dst != "bool":
            return cast(RV("f64", rv.weak), dst)
        if isinstance(rv.weak, int) and not isinstance(rv.weak, bool) and is_int(dst):
            return RV(dst, wrap_ints(dst, rv.weak))
        return cast(RV("f64", float(rv.weak)) if not isinstance(rv.weak, bool) else RV("bool", rv.weak), dst)
    src = rv.dtype
    v, e = rv.value, rv.err
    if src == dst:
        return RV(dst, v.copy(), e.copy(), from_bool=rv.from_bool)
    if dst == "bool":
        if is_float(src):
            x = rv.f64()
            val = (x != 0) | np.isnan(x)
            unsure = (e > 0) & (np.abs(x) <= e)
            return RV("bool", val, np.where(unsure | ~np.isfinite(e), INF, 0.0))
        return RV("bool", v != 0, np.where(np.isfinite(e), 0.0, INF))
    if src == "bool":
        return RV(dst, v.astype(NP[dst]), e, from_bool=is_float(dst))
    if is_float(src) and is_float(dst):
        x = rv.f64()
        r = round_to(dst, x)
        rf = r.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            err = np.where(e == 0, 0.0, e + EPS[dst] * np.abs(rf) + TINY[dst])
            err = np.where((rf != 0) & (np.abs(rf) < TINY[dst]), np.maximum(err, TINY[dst]), err)  # may flush
            err = np.where((e > 0) & (np.abs(x) + e >= FMAX[dst]), INF, err)
            err = np.where((e > 0) & ~np.isfinite(rf), INF, err)
        return RV(dst, r, err)
    if is_int(src) and is_float(dst):
        ints = as_ints(v)
        out = np.empty(v.shape, np.float64)
        exact = np.empty(v.shape, bool)
        of, ef = out.reshape(-1), exact.reshape(-1)
        for i, n in enumerate(ints.reshape(-1)):
            f = float(n)
            r = float(round_to(dst, f))
            of[i] = r
            ef[i] = math.isfinite(r) and int(r) == n
        r = round_to(dst, out)
        err = np.where(exact, 0.0, EPS[dst] * np.abs(out))
        err = np.where(np.isfinite(e), err, INF)
        err = np.where(np.isfinite(out), err, INF)
        return RV(dst, r, err)
    if is_float(src) and is_int(dst):
        x = rv.f64()
        val = _float_to_int(x, dst)
        unsure = (e > 0) & ((_float_to_int(x - e, dst) != val) | (_float_to_int(x + e, dst) != val))
        unsure |= ~np.isfinite(e)
        return RV(dst, val, np.where(unsure, INF, 0.0))
    # int -> int: wrap
    return RV(dst, wrap_ints(dst, as_ints(v)), np.where(np.isfinite(e), 0.0, INF))


def _float_to_int(x: np.ndarray, dst: str) -> np.ndarray:
    lo, hi = int_range(dst)
    out = np.empty(x.shape, dtype=object)
    of = out.reshape(-1)
    for i, f in enumerate(np.asarray(x, np.float64).reshape(-1)):
        if math.isnan(f):
            of[i] = 0
        elif f >= hi + 1:
            of[i] = hi
        elif f <= lo - 1:
            of[i] = lo
        else:
            of[i] = min(max(int(f), lo), hi)        # int() truncates toward zero
    return np.array(list(of), dtype=object).astype(NP[dst]).reshape(x.shape) if of.size else np.zeros(x.shape, NP[dst])


def bitcast(rv: RV, dst: str) -> RV:
    v = np.ascontiguousarray(rv.value).reshape(-1)
    out = v.view(NP[dst]).reshape(rv.value.shape)
    unsure = rv.err > 0
    if is_float(rv.dtype):
        unsure = unsure | np.isnan(rv.f64())         # NaN payloads/signs are not specified
        unsure = unsure | ((rv.f64() != 0) & (np.abs(rv.f64()) < TINY[rv.dtype]))   # subnormals may be flushed
    err = np.where(unsure, INF, 0.0)
    if is_float(dst):
        f = out.astype(np.float64)
        err = np.where((f != 0) & (np.abs(f) < TINY[dst]), np.maximum(err, TINY[dst]), err)
    return RV(dst, out.copy(), err)


# ---------------------------------------------------------------------------------------------------------
# float elementwise machinery
def _fin(dt: str, r: np.ndarray, prop: np.ndarray, exact: np.ndarray, nan_in: np.ndarray, k: float,
         extra=0.0, rounds=True) -> RV:
    """Finish a float result: round `r` to `dt`; `prop` is the propagated operand error; `exact` marks
    elements whose operands are all exact; `nan_in` marks elements with a known NaN operand."""
    r = np.asarray(r, np.float64)
    val = round_to(dt, r)
    vf = val.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        rnd = (k * EPS[dt] * np.abs(r) + TINY[dt]) if rounds else 0.0
        err = np.where(exact, rnd, prop + rnd + extra)
        err = np.where(np.isnan(err), INF, err)
        nonfinite = ~np.isfinite(r) | ~np.isfinite(vf)
        # an overflow of the dtype's range: f16/bf16 arithmetic may run with excess precision inside an
        # XLA fusion (as under jax.jit), so a consumer can see the finite value: known only for f32/f64
        overflow_known = (np.abs(r) > FMAX[dt] * (1 + 8 * EPS[dt])) if dt in ("f32", "f64") else False
        known_nonfinite = (exact & (~np.isfinite(r) | overflow_known)) | (nan_in & np.isnan(r))
        err = np.where(nonfinite, np.where(known_nonfinite, 0.0, INF), err)
        err = np.where(~nonfinite & (np.abs(vf) + err >= FMAX[dt]), INF, err)
    return RV(dt, val, err)


def _operands(args: list, dt: str):
    rvs = [conv(a, dt) for a in args]
    vals = [r.f64() for r in rvs]
    errs = [r.err for r in rvs]
    shape = np.broadcast_shapes(*[v.shape for v in vals])
    vals = [np.broadcast_to(v, shape) for v in vals]
    errs = [np.broadcast_to(e, shape) for e in errs]
    exact = np.ones(shape, bool)
    known = np.ones(shape, bool)
    nan_in = np.zeros(shape, bool)
    for v, e in zip(vals, errs):
        exact &= e == 0
        known &= np.isfinite(e)
        nan_in |= np.isnan(v) & np.isfinite(e)
    return rvs, vals, errs, exact, known, nan_in


def _dterm(d, e):
    """|d| * e, with exact operands (e == 0) contributing nothing even where d is infinite."""
    with np.errstate(invalid="ignore", over="ignore"):
        return np.where(e == 0, 0.0, np.abs(d) * e)


# XLA (as jax.jit) rewrites arithmetic on a float converted from bool into a select: `convert(p) * x` becomes
# `select(p, x, 0)` and `convert(p) / x` becomes `select(p, 1 / x, 0)`, so 0 * inf, 0 * nan and 0 / 0 give 0
# instead of NaN. The emitted StableHLO is right; the reference leaves those elements unknown (an upstream
# discrepancy, recorded in docs/robustness.md).
XLA_SELECT_REWRITE = True


def _select_rewrite_unknown(op: str, rvs: list, a, b) -> np.ndarray | None:
    if not XLA_SELECT_REWRITE:
        return None
    with np.errstate(invalid="ignore"):
        if op == "mul":
            out = np.zeros(np.broadcast_shapes(np.shape(a), np.shape(b)), bool)
            if rvs[0].from_bool:
                out |= ~np.isfinite(b)
            if rvs[1].from_bool:
                out |= ~np.isfinite(a)
            return out
        if op == "truediv" and rvs[0].from_bool:
            return (b == 0) | ~np.isfinite(b)
    return None


def float_binary(op: str, args: list, dt: str) -> RV:
    rvs, (a, b), (ea, eb), exact, known, nan_in = _operands(args, dt)
    rewrite = _select_rewrite_unknown(op, rvs, a, b)
    if rewrite is not None and rewrite.any():
        res = _float_binary(op, rvs, a, b, ea, eb, exact, nan_in, dt)
        res.err = np.where(rewrite, INF, res.err)
        return res
    return _float_binary(op, rvs, a, b, ea, eb, exact, nan_in, dt)


def _float_binary(op, rvs, a, b, ea, eb, exact, nan_in, dt) -> RV:
    with np.errstate(all="ignore"):
        if op == "add":
            r = a + b
            prop = ea + eb
        elif op == "sub":
            r = a - b
            prop = ea + eb
        elif op == "mul":
            r = a * b
            prop = _dterm(a, eb) + _dterm(b, ea) + ea * eb
        elif op == "truediv":
            r = a / b
            denom = np.abs(b) - eb
            prop = np.where(denom > 0, (ea + _dterm(r, eb)) / np.where(denom > 0, denom, 1), INF)
        elif op in ("maximum", "minimum"):
            r = np.maximum(a, b) if op == "maximum" else np.minimum(a, b)
            prop = np.maximum(ea, eb)
            return _fin(dt, r, prop, exact, nan_in, 0.0, rounds=False)
        elif op == "atan2":
            r = np.arctan2(a, b)
            h = a * a + b * b
            prop = np.where(h > (ea + eb) ** 2 * 4, (_dterm(b, ea) + _dterm(a, eb)) / np.where(h > 0, h, 1), INF)
            # the branch cut: y ~ 0 with x < 0 jumps between -pi and pi
            prop = np.where((ea > 0) & (np.abs(a) <= ea) & (b - eb < 0), INF, prop)
            return _fin(dt, r, prop, exact, nan_in, K_MATH)
        elif op in ("pow", "powfn"):
            r = np.power(a, b)
            la = np.log(np.abs(a))
            prop = _dterm(r * b / np.where(a == 0, 1, a), ea) + _dterm(r * la, eb)
            risky = (((ea > 0) | (eb > 0)) & (a - ea <= 0)) | ((ea > 0) & (np.abs(a) <= ea))
            prop = np.where(risky, INF, prop)
            extra = K_MATH * EPS[dt] * np.abs(r) * np.minimum(np.abs(b * la), 1e6)
            return _fin(dt, r, prop, exact, nan_in, K_MATH, extra=np.where(np.isfinite(extra), extra, 0))
        elif op in ("floordiv", "mod"):
            return _float_divmod(op, a, b, ea, eb, exact, nan_in, dt)
        else:
            raise RefError(op)
    return _fin(dt, r, prop, exact, nan_in, K_BASIC)


def _float_divmod(op, a, b, ea, eb, exact, nan_in, dt):
    """Float `//` and `%` (NumPy's divmod: floor of the real quotient, remainder with the divisor's sign).

    Finite operands with a non-zero divisor: computed exactly (Fractions), then rounded once. Otherwise the
    divmod formula (fmod, adjust; by zero `a / b` and NaN). Inexact operands whose quotient is within its
    error of an integer are unknown (the result jumps there)."""
    shape = a.shape
    fl = np.empty(shape)
    md = np.empty(shape)
    with np.errstate(all="ignore"):
        for i in np.ndindex(shape):
            x, y = float(a[i]), float(b[i])
            if math.isfinite(x) and math.isfinite(y) and y != 0:
                f = math.floor(Fraction(x) / Fraction(y))
                fl[i] = float(f)
                md[i] = float(Fraction(x) - f * Fraction(y))
            elif y == 0:
                fl[i] = np.float64(x) / np.float64(y)
                md[i] = np.nan
            else:
                m = math.fmod(x, y) if math.isfinite(x) else math.nan
                div = (x - m) / y if not math.isnan(m) else math.nan
                adjust = (m != 0) and not math.isnan(m) and ((m < 0) != (y < 0))
                fl[i] = math.floor(div - 1 if adjust else div) if math.isfinite(div) else div
                md[i] = m + y if adjust else m
        q = a / b
        denom = np.abs(b) - eb
        qerr = np.where(denom > 0, (ea + _dterm(q, eb)) / np.where(denom > 0, denom, 1), INF)
        qerr = qerr + 4 * EPS[dt] * np.abs(q) + 4 * TINY[dt]
        jumps = (~exact) & (np.floor(q - qerr) != np.floor(q + qerr))
        # quotients too large for the dtype to hold every integer: the formula's rounding decides
        huge = np.abs(q) >= 2.0 ** {"f16": 9, "bf16": 6, "f32": 22, "f64": 51}[dt]
        if op == "floordiv":
            prop = np.where(jumps, INF, 0.0)
            res = _fin(dt, fl, prop, exact, nan_in, K_BASIC)
        else:
            prop = np.where(jumps, INF, ea + _dterm(fl, eb))
            res = _fin(dt, md, prop, exact, nan_in, K_BASIC)
        res.err = np.where(huge & np.isfinite(q), INF, res.err)
    return res


UNARY_DERIV = {
    "exp": lambda x, r: r, "expm1": lambda x, r: r + 1, "log": lambda x, r: 1 / x, "log1p": lambda x, r: 1 / (1 + x),
    "sqrt": lambda x, r: 0.5 / r, "rsqrt": lambda x, r: 0.5 * r / x, "cbrt": lambda x, r: 1 / (3 * r * r),
    "sin": lambda x, r: np.ones_like(x), "cos": lambda x, r: np.ones_like(x), "tan": lambda x, r: 1 + r * r,
    "asin": lambda x, r: 1 / np.sqrt(1 - x * x), "acos": lambda x, r: 1 / np.sqrt(1 - x * x),
    "atan": lambda x, r: 1 / (1 + x * x), "sinh": lambda x, r: np.cosh(x), "cosh": lambda x, r: np.cosh(x),
    "tanh": lambda x, r: 1 - r * r, "erf": lambda x, r: 2 / np.sqrt(np.pi) * np.exp(-x * x),
    "sigmoid": lambda x, r: r * (1 - r),
}


def _erf(x):
    out = np.empty(x.shape)
    for i in np.ndindex(x.shape):
        out[i] = math.erf(x[i]) if not math.isnan(x[i]) else math.nan
    return out


UNARY_FN = {
    "exp": np.exp, "expm1": np.expm1, "log": np.log, "log1p": np.log1p, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x), "cbrt": np.cbrt, "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "erf": _erf, "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
}
# (lower, upper) of the domain where the function is real and smooth; crossing a bound is unknown
DOMAIN = {"log": (0, None), "log1p": (-1, None), "sqrt": (0, None), "rsqrt": (0, None), "asin": (-1, 1),
          "acos": (-1, 1), "cbrt": (0, 0)}


def float_unary(name: str, arg: RV, dt: str) -> RV:
    rvs, (x,), (e,), exact, known, nan_in = _operands([arg], dt)
    with np.errstate(all="ignore"):
        r = UNARY_FN[name](x)
        lo_x, hi_x = x - e, x + e
        d = np.maximum(np.abs(UNARY_DERIV[name](x, r)),
                       np.maximum(np.abs(UNARY_DERIV[name](lo_x, UNARY_FN[name](lo_x))),
                                  np.abs(UNARY_DERIV[name](hi_x, UNARY_FN[name](hi_x)))))
        prop = _dterm(d, e) + _dterm(d, K_MATH * EPS[dt] * np.abs(x) * (e > 0))
        extra = 0.0
        if name in ("sin", "cos", "tan"):
            extra = K_MATH * EPS[dt] * np.abs(x) * (d if name == "tan" else 1)
            if name == "tan":
                near_pole = np.abs(np.cos(x)) <= 2 * (e + K_MATH * EPS[dt] * np.abs(x))
                prop = np.where(near_pole & (e > 0), INF, prop)
        if name in DOMAIN:
            lo, hi = DOMAIN[name]
            if name == "cbrt":
                prop = np.where((e > 0) & (np.abs(x) <= e), 2 * np.cbrt(np.abs(x) + e), prop)
            else:
                bad = np.zeros(x.shape, bool)
                if lo is not None:
                    bad |= (e > 0) & (lo_x <= lo) & (hi_x >= lo)
                if hi is not None:
                    bad |= (e > 0) & (lo_x <= hi) & (hi_x >= hi)
                prop = np.where(bad, INF, prop)
        extra = np.where(np.isfinite(extra), extra, INF) if np.ndim(extra) else extra
        res = _fin(dt, r, prop, exact, nan_in, K_MATH, extra=extra)
        if name in ("sin", "cos", "tan"):
            # argument reduction error grows with |x| even for exact inputs
            res.err = np.where(exact & np.isfinite(res.err), res.err + K_MATH * EPS[dt] * np.abs(x) *
                               (np.abs(d) if name == "tan" else 1), res.err)
            res.err = np.where(np.isnan(res.err), INF, res.err)
    return res


# ---------------------------------------------------------------------------------------------------------
# integer elementwise
def int_binary(op: str, args: list, dt: str) -> RV:
    rvs = [conv(a, dt) for a in args]
    a, b = (np.asarray(r.value) for r in rvs)
    shape = np.broadcast_shapes(a.shape, b.shape)
    A = as_ints(np.broadcast_to(a, shape))
    B = as_ints(np.broadcast_to(b, shape))
    err = np.where(np.isfinite(np.broadcast_to(rvs[0].err, shape)) & np.isfinite(np.broadcast_to(rvs[1].err, shape)),
                   0.0, INF)
    if dt == "bool":
        f = {"maximum": lambda x, y: x or y, "minimum": lambda x, y: x and y, "and_b": lambda x, y: x and y,
             "or_b": lambda x, y: x or y, "xor_b": lambda x, y: bool(x) != bool(y), "land": lambda x, y: x and y,
             "lor": lambda x, y: x or y}[op]
        out = np.array([bool(f(x, y)) for x, y in zip(A.reshape(-1), B.reshape(-1))], bool).reshape(shape)
        return RV("bool", out, err)

    def floordiv(x, y):
        return 0 if y == 0 else x // y

    def mod(x, y):
        return 0 if y == 0 else x % y

    f = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
         "floordiv": floordiv, "mod": mod, "pow": lambda x, y: x ** y, "powfn": lambda x, y: x ** y,
         "maximum": max, "minimum": min, "and_b": lambda x, y: x & y, "or_b": lambda x, y: x | y,
         "xor_b": lambda x, y: x ^ y}[op]
    if op in ("pow", "powfn") and any(y < 0 for y in B.reshape(-1)):
        raise RefError("negative integer exponent")
    if op in ("floordiv", "mod") and (any(y == 0 for y in B.reshape(-1)) or not np.all(err == 0)):
        EVENTS.add("div0")
    out = np.empty(shape, dtype=object)
    for i in np.ndindex(shape):
        out[i] = f(A[i], B[i])
    return RV(dt, wrap_ints(dt, out), err)


def binary(op: str, args: list, ty: Ty) -> RV:
    dt = ty.dtype
    if op == "truediv":
        return float_binary("truediv", args, dt)
    if is_float(dt):
        return float_binary(op, args, dt)
    return int_binary(op, args, dt)


def compare(op: str, args: list, cdt: str) -> RV:
    rvs = [conv(a, cdt) for a in args]
    if is_float(cdt):
        a, b = rvs[0].f64(), rvs[1].f64()
    else:
        a, b = (as_ints(r.value) if cdt != "bool" else r.value.astype(np.int64) for r in rvs)
    shape = np.broadcast_shapes(np.shape(a), np.shape(b))
    a, b = np.broadcast_to(a, shape), np.broadcast_to(b, shape)
    ea, eb = np.broadcast_to(rvs[0].err, shape), np.broadcast_to(rvs[1].err, shape)
    f = {"eq": lambda x, y: x == y, "ne": lambda x, y: x != y, "lt": lambda x, y: x < y,
         "le": lambda x, y: x <= y, "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y}[op]
    out = np.empty(shape, bool)
    for i in np.ndindex(shape):
        out[i] = bool(f(a[i], b[i]))
    err = np.where(np.isfinite(ea) & np.isfinite(eb), 0.0, INF)
    if is_float(cdt):
        with np.errstate(invalid="ignore"):
            tol = ea + eb
            close = (tol > 0) & (np.abs(a - b) <= tol)
            close |= (tol > 0) & (np.isinf(a) & np.isinf(b))
        err = np.where(close, INF, err)
    return RV("bool", out, err)


# ---------------------------------------------------------------------------------------------------------
# reductions
def _axes_norm(axes, rank):
    return tuple(sorted(a % rank for a in axes)) if rank else ()


def reduce_op(name: str, x: RV, axes: list, keepdims: bool, out_dt: str, ddof: int = 0) -> RV:
    axes = tuple(axes)
    v = x.value
    e = x.err
    rank = v.ndim
    n = int(np.prod([v.shape[a] for a in axes])) if axes else 1
    unk = np.any(~np.isfinite(e), axis=axes, keepdims=keepdims) if axes else ~np.isfinite(e)
    if name in ("any", "all"):
        b = cast(x, "bool")
        vals = b.value
        known = np.isfinite(b.err)
        if name == "any":
            res = np.any(vals & known, axis=axes, keepdims=keepdims)
            undecided = ~res & np.any(~known, axis=axes, keepdims=keepdims)
        else:
            res = ~np.any(~vals & known, axis=axes, keepdims=keepdims)
            undecided = res & np.any(~known, axis=axes, keepdims=keepdims)
        return RV("bool", res, np.where(undecided, INF, 0.0))
    if n == 0 and name in ("max", "min", "argmax", "argmin", "logsumexp"):
        # of nothing: jax.numpy raises, NumPy too; arr's value (an identity) is not specified: unknown
        shape = tuple(1 if a in axes else d for a, d in enumerate(v.shape)) if keepdims else \
            tuple(d for a, d in enumerate(v.shape) if a not in axes)
        return RV(out_dt, np.zeros(shape, NP[out_dt]), np.full(shape, INF))
    if name in ("argmax", "argmin"):
        return _arg_reduce(name, x, axes, keepdims)
    if name in ("sum", "prod") and not is_float(out_dt):
        src = cast(x, out_dt) if x.dtype != out_dt else x
        ints = as_ints(src.value)
        f = (lambda arr: sum(arr)) if name == "sum" else (lambda arr: math.prod(arr))
        res = _apply_reduce(ints, axes, keepdims, f)
        return RV(out_dt, wrap_ints(out_dt, res), np.where(unk, INF, 0.0))
    if name in ("max", "min") and not is_float(out_dt):
        if x.dtype == "bool":
            vals = v.astype(np.int64)
            f = np.max if name == "max" else np.min
            res = f(vals, axis=axes, keepdims=keepdims).astype(bool) if vals.size else None
            return RV("bool", res, np.where(unk, INF, 0.0))
        ints = as_ints(v)
        res = _apply_reduce(ints, axes, keepdims, max if name == "max" else min)
        return RV(out_dt, wrap_ints(out_dt, res), np.where(unk, INF, 0.0))
    # float results
    xs = cast(x, out_dt) if x.dtype != out_dt else x
    xf = xs.f64()
    ef = xs.err
    exact = np.all(ef == 0, axis=axes, keepdims=keepdims)
    nan_in = np.any(np.isnan(xf) & np.isfinite(ef), axis=axes, keepdims=keepdims)
    acc_eps = EPS["f32"] if out_dt in ("f16", "bf16") else EPS[out_dt]
    with np.errstate(all="ignore"):
        absx = np.abs(xf)
        if name == "sum" or name == "mean":
            r = np.sum(xf, axis=axes, keepdims=keepdims)
            prop = np.sum(ef, axis=axes, keepdims=keepdims) + n * K_BASIC * acc_eps * np.sum(absx, axis=axes,
                                                                                              keepdims=keepdims)
            if name == "mean":
                r, prop = r / n, prop / n
            rounding_exact = n * K_BASIC * acc_eps * np.sum(absx, axis=axes, keepdims=keepdims) / (n if name == "mean" else 1)
            res = _fin(out_dt, r, prop, np.zeros_like(exact), nan_in, K_BASIC, extra=0.0)
            res.err = np.where(exact & np.isfinite(res.err), res.err + rounding_exact, res.err)
            res.err = np.where(exact & ~np.isfinite(np.asarray(r)), 0.0, res.err)
            res.err = np.where(np.isnan(res.err), INF, res.err)
            return res
        if name == "prod":
            r = np.prod(xf, axis=axes, keepdims=keepdims)
            hi = np.prod(absx + ef, axis=axes, keepdims=keepdims)
            prop = (hi - np.abs(r)) + n * K_BASIC * acc_eps * np.abs(r)
            res = _fin(out_dt, r, prop, np.zeros_like(exact), nan_in, K_BASIC)
            res.err = np.where(exact & ~np.isfinite(np.asarray(r)), 0.0, res.err)
            # a product with an exact zero and an infinity is nan; with errors around, unknown
            return res
        if name in ("max", "min"):
            f = np.max if name == "max" else np.min
            r = f(xf, axis=axes, keepdims=keepdims)
            prop = np.max(ef, axis=axes, keepdims=keepdims)
            return _fin(out_dt, r, prop, exact, nan_in, 0.0, rounds=False)
        if name in ("var", "std"):
            m = np.mean(xf, axis=axes, keepdims=True)
            c = xf - m
            denom = n - ddof
            var = np.sum(c * c, axis=axes, keepdims=keepdims) / denom
            big = np.sum(xf * xf, axis=axes, keepdims=keepdims) + n * np.squeeze(m * m, axis=axes) \
                if not keepdims else np.sum(xf * xf, axis=axes, keepdims=True) + n * m * m
            prop_var = (2 * np.sum(np.abs(c) * ef, axis=axes, keepdims=keepdims) + n * np.max(ef, axis=axes, keepdims=keepdims) ** 2) / denom \
                + 4 * n * K_BASIC * acc_eps * big / denom
            if name == "var":
                res = _fin(out_dt, var, prop_var, np.zeros_like(exact), nan_in, K_BASIC)
            else:
                r = np.sqrt(var)
                prop = np.minimum(prop_var / np.where(r > 0, 2 * r, 1) + np.where(r > 0, 0, np.sqrt(prop_var)),
                                  np.sqrt(prop_var))
                res = _fin(out_dt, r, prop, np.zeros_like(exact), nan_in, K_BASIC)
            res.err = np.where(exact & ~np.isfinite(np.asarray(var)) & (denom != 0), 0.0, res.err)
            # squares or their sum beyond the dtype's range: inf in the dtype (as jax.numpy), or not
            # (excess precision): unknown
            sq_sum = np.sum(c * c, axis=axes, keepdims=keepdims)
            res.err = np.where(sq_sum >= FMAX[out_dt] / 4, INF, res.err)
            return res
        if name == "logsumexp":
            m = np.max(xf, axis=axes, keepdims=True)
            safe = np.where(np.isfinite(m), m, 0.0)
            s = np.sum(np.exp(xf - safe), axis=axes, keepdims=True)
            r = np.log(s) + safe
            if not keepdims:
                r = np.squeeze(r, axis=axes)
                mm = np.squeeze(safe, axis=axes)
            else:
                mm = safe
            prop = np.max(ef, axis=axes, keepdims=keepdims) + K_MATH * acc_eps * (np.abs(r) + np.abs(mm) + n)
            res = _fin(out_dt, r, prop, np.zeros_like(exact), nan_in, K_MATH)
            res.err = np.where(exact & ~np.isfinite(np.asarray(r)), 0.0, res.err)
            return res
    raise RefError(name)


def nn_op(name: str, x: RV, ax: int, dt: str, epsilon) -> RV:
    """softmax / log_softmax / layer_norm along `ax` (computed in `dt`; error bounds from the dtype)."""
    xs = cast(x, dt) if x.dtype != dt else x
    v = xs.f64()
    e = xs.err
    n = v.shape[ax]
    eps = EPS[dt]
    emax = np.max(e, axis=ax, keepdims=True)
    exact = np.all(e == 0, axis=ax, keepdims=True)
    nan_in = np.zeros(v.shape, bool)
    with np.errstate(all="ignore"):
        m = np.max(v, axis=ax, keepdims=True)
        if name in ("softmax", "log_softmax"):
            sh = v - m
            ex = np.exp(sh)
            tot = np.sum(ex, axis=ax, keepdims=True)
            if name == "softmax":
                r = ex / tot
                prop = 2 * emax * np.abs(r) * 2 + K_MATH * eps * (n + 2) * np.abs(r)
            else:
                r = sh - np.log(tot)
                prop = 2 * emax * 2 + K_MATH * eps * (np.abs(sh) + np.abs(m) + n + np.abs(r))
        else:
            epsv = 1e-5 if epsilon is None else float(epsilon.text)
            mu = np.mean(v, axis=ax, keepdims=True)
            c = v - mu
            var = np.mean(c * c, axis=ax, keepdims=True)
            den = np.sqrt(var + epsv)
            r = c / den
            e_c = 2 * emax + K_BASIC * eps * n * (np.abs(v) + np.abs(mu))
            e_var = 2 * np.mean(np.abs(c) * e_c, axis=ax, keepdims=True) + \
                K_BASIC * eps * n * np.mean(c * c + v * v + mu * mu, axis=ax, keepdims=True)
            prop = e_c / den + np.abs(r) * e_var / (2 * (var + epsv)) + K_MATH * eps * np.abs(r)
            # epsilon itself is rounded to the dtype (and may be flushed when it is subnormal there)
            prop = prop + np.abs(r) * max(epsv, TINY[dt]) / (2 * (var + epsv))
            # a variance beyond the dtype's range (computed in it) may be inf: unknown
            prop = np.where(np.broadcast_to(var, v.shape) * n >= FMAX[dt] / 4, INF, prop)
        res = _fin(dt, r, prop, np.zeros(v.shape, bool), nan_in, K_MATH)
        # rows with a NaN or an infinity: NaN rows (as jax.nn), known only for exact inputs
        bad_row = ~np.all(np.isfinite(v), axis=ax, keepdims=True)
        res.err = np.where(bad_row & np.broadcast_to(exact, v.shape), np.where(np.isnan(r), 0.0, INF), res.err)
        res.err = np.where(bad_row & ~np.broadcast_to(exact, v.shape), INF, res.err)
        res.err = np.where(np.isnan(res.err), INF, res.err)
    return res


def _apply_reduce(obj: np.ndarray, axes, keepdims, f) -> np.ndarray:
    rank = obj.ndim
    keep = [a for a in range(rank) if a not in axes]
    moved = np.moveaxis(obj, list(axes), list(range(rank - len(axes), rank))) if axes else obj
    out_shape = tuple(obj.shape[a] for a in keep)
    flat = moved.reshape(out_shape + (-1,))
    out = np.empty(out_shape, dtype=object)
    for i in np.ndindex(out_shape):
        out[i] = f(list(flat[i]))
    if keepdims:
        out = out.reshape(tuple(1 if a in axes else obj.shape[a] for a in range(rank)))
    return out


def _arg_reduce(name: str, x: RV, axes, keepdims) -> RV:
    v = x.value
    rank = v.ndim
    flat_all = len(axes) == rank and rank != 1
    if flat_all:
        vals = v.reshape(-1)
        errs = x.err.reshape(-1)
        ax = 0
    else:
        vals, errs, ax = v, x.err, axes[0] if axes else 0
    if vals.ndim == 0:
        vals, errs, ax = vals.reshape(1), errs.reshape(1), 0
    fv = vals.astype(np.float64) if is_float(x.dtype) else as_ints(vals)
    moved = np.moveaxis(fv, ax, -1)
    emoved = np.moveaxis(errs, ax, -1)
    out_shape = moved.shape[:-1]
    out = np.zeros(out_shape, np.int32)
    err = np.zeros(out_shape)
    for i in np.ndindex(out_shape):
        row = list(moved[i])
        erow = list(emoved[i])
        if any(not math.isfinite(e) for e in erow):
            err[i] = INF
        isf = is_float(x.dtype)
        nans = [j for j, t in enumerate(row) if isf and math.isnan(t)]
        if nans:
            out[i] = nans[0]
            continue
        best = 0
        for j in range(1, len(row)):
            better = row[j] > row[best] if name == "argmax" else row[j] < row[best]
            if better:
                best = j
        out[i] = best
        if isf:
            for j, t in enumerate(row):
                if j != best and (erow[j] + erow[best] > 0) and abs(t - row[best]) <= erow[j] + erow[best]:
                    err[i] = INF
                if j != best and math.isinf(t) and t == row[best] and erow[j] + erow[best] > 0:
                    err[i] = INF
    if keepdims:
        if flat_all:
            out = out.reshape((1,) * rank)
            err = err.reshape((1,) * rank)
        else:
            out = np.expand_dims(out, ax)
            err = np.expand_dims(err, ax)
    return RV("i32", out, err)


# ---------------------------------------------------------------------------------------------------------
# scans and sorting
def scan_op(name: str, x: RV, ax, out_dt: str) -> RV:
    if ax is None:
        x = RV(x.dtype, x.value.reshape(-1), x.err.reshape(-1))
        ax = 0
    if name in ("sort", "argsort"):
        return _sort(name, x, ax)
    src = cast(x, out_dt) if x.dtype != out_dt else x
    if not is_float(out_dt):
        ints = np.moveaxis(as_ints(src.value), ax, -1)
        errs = np.moveaxis(src.err, ax, -1)
        out = np.empty(ints.shape, dtype=object)
        err = np.zeros(ints.shape)
        for i in np.ndindex(ints.shape[:-1]):
            acc = None
            bad = False
            for j, t in enumerate(ints[i]):
                if acc is None:
                    acc = t
                elif name == "cumsum":
                    acc = acc + t
                elif name == "cumprod":
                    acc = acc * t
                elif name == "cummax":
                    acc = max(acc, t)
                else:
                    acc = min(acc, t)
                bad = bad or not math.isfinite(errs[i][j])
                out[i + (j,)] = acc
                err[i + (j,)] = INF if bad else 0.0
        return RV(out_dt, wrap_ints(out_dt, np.moveaxis(out, -1, ax)), np.moveaxis(err, -1, ax))
    xf = src.f64()
    ef = src.err
    n = xf.shape[ax]
    exact = np.logical_and.accumulate(ef == 0, axis=ax)
    nan_in = np.logical_or.accumulate(np.isnan(xf) & np.isfinite(ef), axis=ax)
    with np.errstate(all="ignore"):
        if name == "cumsum":
            r = np.cumsum(xf, axis=ax)
            prop = np.cumsum(ef, axis=ax) + n * K_BASIC * EPS[out_dt] * np.cumsum(np.abs(xf), axis=ax)
            res = _fin(out_dt, r, prop, np.zeros_like(exact), nan_in, K_BASIC)
            res.err = np.where(exact & np.isfinite(res.err), res.err + n * K_BASIC * EPS[out_dt] *
                               np.cumsum(np.abs(xf), axis=ax), res.err)
        elif name == "cumprod":
            r = np.cumprod(xf, axis=ax)
            hi = np.cumprod(np.abs(xf) + ef, axis=ax)
            prop = (hi - np.abs(r)) + n * K_BASIC * EPS[out_dt] * np.abs(r)
            res = _fin(out_dt, r, prop, np.zeros_like(exact), nan_in, K_BASIC)
        else:
            f = np.maximum if name == "cummax" else np.minimum
            r = f.accumulate(xf, axis=ax)
            prop = np.maximum.accumulate(ef, axis=ax)
            return _fin(out_dt, r, prop, exact, nan_in, 0.0, rounds=False)
        res.err = np.where(exact & ~np.isfinite(np.asarray(r)), 0.0, res.err)
        res.err = np.where(np.isnan(res.err), INF, res.err)
        return res


def _sort(name: str, x: RV, ax: int) -> RV:
    v = np.moveaxis(x.value, ax, -1)
    e = np.moveaxis(x.err, ax, -1)
    isf = is_float(x.dtype)
    out_v = np.empty(v.shape, v.dtype)
    out_i = np.zeros(v.shape, np.int32)
    out_e = np.zeros(v.shape)
    for i in np.ndindex(v.shape[:-1]):
        row = list(v[i])
        erow = list(e[i])
        keyf = (lambda j: (1, 0.0) if isf and math.isnan(float(row[j])) else (0, float(row[j]) if isf else int(row[j])))
        order = sorted(range(len(row)), key=keyf)        # stable, NaN last
        out_v[i] = [row[j] for j in order]
        out_i[i] = order
        emax = max(erow) if erow else 0.0
        if name == "sort":
            out_e[i] = emax if math.isfinite(emax) else INF
            if isf and emax > 0 and any(math.isnan(float(t)) for t in row):
                out_e[i] = INF
        else:
            ambiguous = not math.isfinite(emax)
            if isf:
                fr = [float(t) for t in row]
                zeros = [t for t in fr if t == 0]
                if zeros and len({math.copysign(1, t) for t in zeros}) > 1:
                    ambiguous = True        # -0.0 and 0.0 are equal: their order is not specified
                for a in range(len(fr)):
                    for b in range(a + 1, len(fr)):
                        if (erow[a] + erow[b] > 0) and abs(fr[a] - fr[b]) <= erow[a] + erow[b]:
                            ambiguous = True
            out_e[i] = INF if ambiguous else 0.0
    if name == "sort":
        return RV(x.dtype, np.moveaxis(out_v, -1, ax), np.moveaxis(out_e, -1, ax))
    return RV("i32", np.moveaxis(out_i, -1, ax), np.moveaxis(out_e, -1, ax))


# ---------------------------------------------------------------------------------------------------------
# the interpreter
class Interp:
    def __init__(self, program: Program):
        self.program = program
        self.uncertain = 0          # > 0 while running code whose execution is not certain

    def call(self, fn: Function, args: list, shape_env: dict | None = None) -> list:
        env: dict = {}
        for name, t, _, value in self.program.consts:
            env[name] = RV(t.dtype, conv_list(np.asarray(value), t.dtype) if t.rank else
                           conv(weak_rv(value), t.dtype).value)
        senv = dict(shape_env or {})
        for (name, t), a in zip(fn.params, args):
            if tuple(t.shape) and shape_env is None:
                for d, size in zip(t.shape, a.shape):
                    if len(d.terms) == 1 and list(d.terms.values())[0] == 1 and len(list(d.terms)[0]) == 1:
                        senv[list(d.terms)[0][0]] = size
            if a.weak is not None:
                a = conv(a, t.dtype)
            elif a.dtype != t.dtype:
                raise RefError(f"argument {name}: {a.dtype} for {t.dtype}")
            env[name] = a
        self.exec_block(fn.body, env, senv)
        return [self.ev(r, env, senv) for r in fn.results]

    # -- statements -----------------------------------------------------------------------------------
    def exec_block(self, stmts: list, env: dict, senv: dict) -> None:
        for s in stmts:
            self.exec(s, env, senv)

    def exec(self, s, env: dict, senv: dict) -> None:
        if isinstance(s, Assign):
            v = self.ev(s.expr, env, senv)
            if v.weak is not None:
                v = _WeakBox(v)        # a weak literal local (loop accumulators): typed when it is combined
            env[s.name] = v
        elif isinstance(s, AugAssign):
            cur = env[s.name]
            if isinstance(cur, _WeakBox):
                cur = cur.rv
            rhs = self.ev(s.expr, env, senv)
            opname = {"+": "add", "-": "sub", "*": "mul", "/": "truediv"}[s.op]
            res = binary(opname, [cur, rhs], Ty(promote([Ty(s.ty.dtype), _ty_of(rhs)])[0]) if opname != "truediv"
                         else Ty(s.ty.dtype))
            if res.dtype != s.ty.dtype:
                raise RefError(f"augmented assignment changes {s.ty.dtype} to {res.dtype}")
            env[s.name] = RV(res.dtype, np.broadcast_to(res.value, cur.shape).copy(),
                             np.broadcast_to(res.err, cur.shape).copy())
        elif isinstance(s, TupleAssign):
            if isinstance(s.call, Call):
                outs = self.ev_call(s.call, env, senv)
            elif s.call.op == "tuple":
                outs = [self.ev(a, env, senv) for a in s.call.args]
            else:
                outs = self.ev_multi(s.call, env, senv)
            for n, v in zip(s.names, outs):
                env[n] = v
        elif isinstance(s, IndexSet):
            env[s.name] = self.index_set(s, env, senv)
        elif isinstance(s, For):
            bounds = [self.ev(b, env, senv) for b in s.bounds]
            ints = [int(b.weak) if b.weak is not None else int(b.value) for b in bounds]
            unknown = any(b.weak is None and not np.all(np.isfinite(b.err)) for b in bounds)
            if unknown:
                EFFECTS["prints_unsure"] = True
                EFFECTS["assert_unsure"] = True
            for it in range(*ints):
                env[s.var] = RV(s.var_ty.dtype, it)
                self.exec_block(s.body, env, senv)
            if unknown:
                self._taint(s.body, env)
        elif isinstance(s, While):
            limit = self.ev(s.limit, env, senv)
            lim = int(limit.weak) if limit.weak is not None else int(limit.value)
            if limit.weak is None and not np.all(np.isfinite(limit.err)):
                EFFECTS["prints_unsure"] = True
                EFFECTS["assert_unsure"] = True
            counter = env[s.counter]
            counter = counter.rv if isinstance(counter, _WeakBox) else counter
            j = int(counter.weak) if counter.weak is not None else int(counter.value)
            while j < lim:
                env[s.counter] = weak_rv(j)
                self.exec_block(s.body, env, senv)
                j += 1
            env[s.counter] = _WeakBox(weak_rv(j))
            if limit.weak is None and not np.all(np.isfinite(limit.err)):
                self._taint(s.body, env)
        elif isinstance(s, If):
            c = self.ev(s.cond, env, senv)
            known = c.weak is not None or bool(np.all(np.isfinite(c.err)))
            val = bool(c.weak) if c.weak is not None else bool(c.value)
            if known:
                self.exec_block(s.then if val else s.orelse, env, senv)
            else:
                other = dict(env)
                self.uncertain += 1
                try:
                    self.exec_block(s.then if val else s.orelse, env, senv)
                    self.exec_block(s.orelse if val else s.then, other, senv)
                finally:
                    self.uncertain -= 1
                self._taint([s], env)
        elif isinstance(s, Effect):
            if s.kind == "print":
                for a in s.args:
                    self.ev(a, env, senv)
                EFFECTS["prints"] += 1
                if self.uncertain:
                    EFFECTS["prints_unsure"] = True
            else:
                c = self.ev(s.args[0], env, senv)
                vals = np.asarray(c.value, bool)
                known = np.isfinite(c.err)
                if np.any(~vals & known) and not self.uncertain:
                    raise AssertRaised()
                if np.any(~known) or (self.uncertain and np.any(~vals)):
                    EFFECTS["assert_unsure"] = True
        else:
            raise RefError(f"statement {s!r}")

    def _taint(self, stmts: list, env: dict) -> None:
        for name in _assigned(stmts):
            if name in env and isinstance(env[name], RV):
                v = env[name]
                env[name] = RV(v.dtype, v.value, unknown_like(v.shape)) if v.weak is None else v

    def index_set(self, s: IndexSet, env, senv) -> RV:
        x = env[s.name]
        idx, unsure = self.index_plan(x, s.subs, env, senv)
        rhs = self.ev(s.expr, env, senv)
        region_v = x.value[idx]
        region_e = x.err[idx]
        if s.aug:
            cur = RV(x.dtype, region_v, region_e)
            opname = {"+": "add", "-": "sub", "*": "mul", "/": "truediv"}[s.aug]
            dt, _ = promote([Ty(x.dtype), _ty_of(rhs)])
            new = binary(opname, [cur, rhs], Ty(dt))
            new = cast(new, x.dtype) if new.dtype != x.dtype else new
        else:
            new = conv(rhs, x.dtype) if rhs.weak is not None or rhs.dtype != x.dtype else rhs
        value = x.value.copy()
        err = x.err.copy()
        value[idx] = np.broadcast_to(new.value, np.shape(region_v))
        err[idx] = np.broadcast_to(new.err, np.shape(region_v))
        if unsure:
            err[...] = INF
        return RV(x.dtype, value, err)

    def index_plan(self, x: RV, subs: list, env, senv):
        shape = x.shape
        rank = len(shape)
        subs = list(subs)
        if subs and subs[0][0] == "...":
            rest = subs[1:]
            subs = [("full",)] * (rank - len(rest)) + rest
        idx = []
        unsure = False
        for axis, s in enumerate(subs):
            n = shape[axis]
            kind = s[0]
            if kind == "full":
                idx.append(slice(None))
            elif kind == "i":
                if isinstance(s[1], str):
                    idx.append(s[2])
                    continue
                v = self.ev(s[1], env, senv)
                i = int(v.weak) if v.weak is not None else int(v.value)
                if v.weak is None and not np.all(np.isfinite(v.err)):
                    unsure = True
                    EVENTS.add("bounds")
                if i < 0:
                    i += n
                if not 0 <= i < n:
                    EVENTS.add("bounds")
                idx.append(min(max(i, 0), n - 1))
            elif kind == "s":
                idx.append(slice(s[1], s[2], s[3]))
            elif kind == "d":
                v = self.ev(s[1], env, senv)
                start = int(v.weak) if v.weak is not None else int(v.value)
                if v.weak is None and not np.all(np.isfinite(v.err)):
                    unsure = True
                if start < 0:            # "Negative run-time indices count from the end" (docs: Indexing)
                    EVENTS.add("bounds")
                    start += n
                if not 0 <= start <= n - s[2]:
                    EVENTS.add("bounds")
                start = min(max(start, 0), n - s[2])
                idx.append(slice(start, start + s[2]))
            elif kind == "g":
                v = self.ev(s[1], env, senv)
                ints = [int(t) for t in np.asarray(v.value).reshape(-1)]
                if any(not -n <= t < n for t in ints) or not np.all(np.isfinite(v.err)):
                    EVENTS.add("bounds")
                norm = [min(max(t + n if t < 0 else t, 0), n - 1) for t in ints]
                idx.append(np.array(norm, np.int64).reshape(np.shape(v.value)))
                if not np.all(np.isfinite(v.err)):
                    unsure = True
            else:
                raise RefError(f"subscript {s!r}")
        return tuple(idx), unsure

    # -- expressions ----------------------------------------------------------------------------------
    def ev(self, e, env: dict, senv: dict) -> RV:
        if isinstance(e, Var):
            v = env[e.name]
            if isinstance(v, _WeakBox):
                return v.rv
            return v
        if isinstance(e, Lit):
            return weak_rv(e.value)
        if isinstance(e, DimVal):
            return weak_rv(int(e.dim.eval(senv)))
        if isinstance(e, ArrLit):
            return RV("f32" if e.ty.dtype == "f32" else "i32", np.array(e.values, dtype=object), weak=e.values)
        if isinstance(e, Call):
            outs = self.ev_call(e, env, senv)
            return outs[0]
        assert isinstance(e, Op), e
        return self.ev_op(e, env, senv)

    def ev_call(self, c: Call, env, senv) -> list:
        fn = self.program.function(c.fn)
        args = [self.ev(a, env, senv) for a in c.args]
        names = [n for n, _ in fn.params]
        ordered = [None] * len(names)
        pos = 0
        for a, kw in zip(args, c.kwnames):
            if kw is None:
                ordered[pos] = a
                pos += 1
            else:
                ordered[names.index(kw)] = a
        callee_env = {v: d.eval(senv) for v, d in c.bind.items()}
        for (name, t), a in zip(fn.params, ordered):
            for d, size in zip(t.shape, a.shape):
                if len(d.terms) == 1 and list(d.terms.values())[0] == 1 and len(list(d.terms)[0]) == 1:
                    callee_env[list(d.terms)[0][0]] = size
        return self.call(fn, ordered, callee_env)

    def ev_op(self, e: Op, env, senv) -> RV:
        op = e.op
        at = e.attrs
        ty = e.ty
        if op == "index":
            x = self.ev(e.args[0], env, senv)
            idx, unsure = self.index_plan(x, at["subs"], env, senv)
            v, er = x.value[idx], x.err[idx]
            if unsure:
                er = np.full(np.shape(v), INF)
            return RV(x.dtype, np.asarray(v).copy(), np.asarray(er).copy(), from_bool=x.from_bool)
        if op == "ifexp":
            c = self.ev(e.args[0], env, senv)
            a = conv(self.ev(e.args[1], env, senv), ty.dtype)
            b = conv(self.ev(e.args[2], env, senv), ty.dtype)
            known = c.weak is not None or bool(np.all(np.isfinite(c.err)))
            val = bool(c.weak) if c.weak is not None else bool(c.value)
            shape = np.broadcast_shapes(a.shape, b.shape)
            pick = a if val else b
            err = np.broadcast_to(pick.err, shape) if known else np.full(shape, INF)
            return RV(ty.dtype, np.broadcast_to(pick.value, shape).copy(), err.copy())
        if op in ("dynamic_slice", "dynamic_update_slice"):
            return self.dynamic(e, env, senv)
        args = [self.ev(a, env, senv) for a in e.args]
        if op == "arrstack":
            items = [conv(a, ty.dtype) for a in args]
            return RV(ty.dtype, np.stack([i.value for i in items]), np.stack([i.err for i in items]))
        if op == "einsum":
            return self.einsum(at["spec"], args, ty.dtype)
        if op in ("softmax", "log_softmax", "layer_norm"):
            return nn_op(op, args[0], at["ax"], ty.dtype, at.get("kw", {}).get("epsilon"))
        if op == "one_hot":
            x = args[0]
            ints = as_ints(x.value)
            k = at["classes"]
            hit = np.zeros(x.shape + (k,), bool)
            for i in np.ndindex(x.shape):
                if 0 <= ints[i] < k:
                    hit[i + (int(ints[i]),)] = True
            err = np.broadcast_to(np.where(np.isfinite(x.err), 0.0, INF)[..., None], hit.shape)
            return RV(ty.dtype, hit.astype(NP[ty.dtype]), err)
        if op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "powfn", "maximum", "minimum", "atan2"):
            return binary(op, args, ty)
        if op in ("eq", "ne", "lt", "le", "gt", "ge"):
            return compare(op, args, at["cdt"])
        if op in ("and_b", "or_b", "xor_b", "land", "lor"):
            return int_binary(op, args, ty.dtype)
        if op in UNARY_FN:
            return float_unary(op, args[0], ty.dtype)
        if op == "neg":
            x = args[0]
            if is_float(x.dtype):
                return RV(x.dtype, -x.value, x.err)
            return RV(x.dtype, wrap_ints(x.dtype, -as_ints(x.value)), x.err)
        if op == "invert":
            x = args[0]
            if x.dtype == "bool":
                return RV("bool", ~x.value, x.err)
            return RV(x.dtype, wrap_ints(x.dtype, ~as_ints(x.value)), x.err)
        if op == "lnot":
            return RV("bool", ~args[0].value, args[0].err)
        if op in ("abs", "sign", "floor", "ceil", "round", "trunc", "relu"):
            return self.unary_same(op, args[0])
        if op in ("isnan", "isinf", "isfinite"):
            x = args[0]
            if not is_float(x.dtype):
                return RV("bool", np.full(x.shape, op == "isfinite"), np.where(np.isfinite(x.err), 0.0, INF))
            f = {"isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite}[op]
            return RV("bool", f(x.f64()), np.where(np.isfinite(x.err), 0.0, INF))
        if op == "where":
            c, a, b = args
            a, b = conv(a, ty.dtype), conv(b, ty.dtype)
            shape = np.broadcast_shapes(c.shape, a.shape, b.shape)
            cv = np.broadcast_to(c.value, shape)
            val = np.where(cv, np.broadcast_to(a.value, shape), np.broadcast_to(b.value, shape))
            err = np.where(cv, np.broadcast_to(a.err, shape), np.broadcast_to(b.err, shape))
            err = np.where(np.isfinite(np.broadcast_to(c.err, shape)), err, INF)
            return RV(ty.dtype, val.astype(NP[ty.dtype]), err)
        if op == "clip":
            x, lo, hi = args
            t = binary("maximum", [x, lo], Ty(ty.dtype))
            return binary("minimum", [t, hi], Ty(ty.dtype))
        if op == "astype":
            return cast(args[0], ty.dtype)
        if op == "bitcast":
            return bitcast(args[0], ty.dtype)
        if op in ("sum", "prod", "max", "min", "mean", "var", "std", "any", "all", "argmax", "argmin", "logsumexp"):
            x = args[0]
            kw = at.get("kw", {})
            axes = at.get("axes", list(range(x.value.ndim)))
            return reduce_op(op, x, axes, bool(kw.get("keepdims", False)), ty.dtype, kw.get("ddof", 0))
        if op in ("cumsum", "cumprod", "cummax", "cummin", "sort", "argsort"):
            return scan_op(op, args[0], at["ax"], ty.dtype)
        return self.shape_op(e, args, senv)

    def ev_multi(self, e: Op, env, senv) -> list:
        assert e.op == "top_k", e.op
        x = self.ev(e.args[0], env, senv)
        k = int(self.ev(e.args[1], env, senv).weak)
        v = x.value
        isf = is_float(x.dtype)
        keys = x.f64() if isf else as_ints(v)
        rows = np.moveaxis(keys, -1, 0).reshape(v.shape[-1], -1).T if v.ndim else keys.reshape(1, 1)
        errs = x.err.reshape(-1, v.shape[-1])
        out_i = np.zeros((rows.shape[0], k), np.int32)
        nan_rows: list = []
        out_e = np.zeros((rows.shape[0], k))
        for r in range(rows.shape[0]):
            row = list(rows[r])
            order = sorted(range(len(row)), key=lambda j: -row[j])       # stable: equal values by index
            out_i[r] = order[:k]
            er = errs[r]
            bad = not np.all(np.isfinite(er))
            if isf and any(math.isnan(t) for t in row):
                bad = True       # where NaN goes in top_k is not specified
                nan_rows.append(r)
            for a in range(len(row)):
                for b in range(a + 1, len(row)):
                    if isf and (er[a] + er[b] > 0) and abs(row[a] - row[b]) <= er[a] + er[b]:
                        bad = True
                    if isf and row[a] == row[b] == 0 and math.copysign(1, row[a]) != math.copysign(1, row[b]):
                        bad = True
            out_e[r] = INF if bad else 0.0
        shape = v.shape[:-1] + (k,)
        idx = out_i.reshape(shape)
        vals = np.take_along_axis(v, idx.astype(np.int64), axis=-1)
        verr = np.take_along_axis(x.err, idx.astype(np.int64), axis=-1)
        ierr = out_e.reshape(shape)
        vals_err = np.where(np.isfinite(ierr), verr, np.maximum(verr, 0) + np.max(x.err) if x.err.size else INF)
        if not isf:
            vals_err = np.where(np.isfinite(ierr), verr, INF)
        else:
            flat = vals_err.reshape(-1, k)
            flat[nan_rows] = INF
            vals_err = flat.reshape(shape)
        return [RV(x.dtype, vals, vals_err), RV("i32", idx, ierr)]

    def dynamic(self, e: Op, env, senv) -> RV:
        """dynamic_slice / dynamic_update_slice: negative starts count from the end, then clamp."""
        nf = e.attrs["nfixed"]
        x = self.ev(e.args[0], env, senv)
        lengths = e.attrs["lengths"]
        idx = []
        unsure = False
        for a, n, length in zip(e.args[nf:], x.shape, lengths):
            v = self.ev(a, env, senv)
            st = int(v.weak) if v.weak is not None else int(v.value)
            if v.weak is None and not np.all(np.isfinite(v.err)):
                unsure = True
                EVENTS.add("bounds")
            if st < 0:
                st += n
            if not 0 <= st <= n - length:
                EVENTS.add("bounds")
            st = min(max(st, 0), n - length)
            idx.append(slice(st, st + length))
        idx = tuple(idx)
        if e.op == "dynamic_slice":
            err = x.err[idx].copy()
            if unsure:
                err[...] = INF
            return RV(x.dtype, x.value[idx].copy(), err)
        new = conv(self.ev(e.args[1], env, senv), x.dtype)
        value, err = x.value.copy(), x.err.copy()
        value[idx] = np.broadcast_to(new.value, value[idx].shape)
        err[idx] = np.broadcast_to(new.err, err[idx].shape)
        if unsure:
            err[...] = INF
        return RV(x.dtype, value, err)

    def einsum(self, spec: str, args: list, dt: str) -> RV:
        items = [conv(a, dt) if a.dtype != dt or a.weak is not None else a for a in args]
        known = all(np.all(np.isfinite(i.err)) for i in items)
        if not is_float(dt):
            if dt == "bool":
                vals = [i.value.astype(np.int64) for i in items]
                r = np.einsum(spec, *vals) != 0
                return RV("bool", r, np.full(np.shape(r), 0.0 if known else INF))
            r = np.einsum(spec, *[as_ints(i.value) for i in items])
            return RV(dt, wrap_ints(dt, r), np.full(np.shape(r), 0.0 if known else INF))
        vals = [i.f64() for i in items]
        with np.errstate(all="ignore"):
            r = np.einsum(spec, *vals)
            absr = np.einsum(spec, *[np.abs(v) for v in vals])
            if len(vals) == 2:
                prop = np.einsum(spec, np.abs(vals[0]), items[1].err) + np.einsum(spec, items[0].err, np.abs(vals[1])) \
                    + np.einsum(spec, items[0].err, items[1].err)
            else:
                prop = np.einsum(spec, items[0].err)
            terms = max(1, int(np.prod(vals[0].shape)) // max(1, int(np.prod(np.shape(r)))) if np.shape(r) else
                        int(np.prod(vals[0].shape)))
            acc_eps = EPS["f32"] if dt in ("f16", "bf16") else EPS[dt]
            nan_in = np.zeros(np.shape(r), bool)
            res = _fin(dt, r, prop + (terms + 1) * K_BASIC * acc_eps * absr, np.zeros(np.shape(r), bool), nan_in,
                       K_BASIC)
            res.err = np.where(np.isnan(res.err), INF, res.err)
        return res

    def unary_same(self, op: str, x: RV) -> RV:
        if not is_float(x.dtype):
            ints = as_ints(x.value)
            if op == "abs":
                return RV(x.dtype, wrap_ints(x.dtype, np.vectorize(abs, otypes=[object])(ints) if ints.size else ints), x.err)
            if op == "sign":
                f = np.vectorize(lambda t: (t > 0) - (t < 0), otypes=[object])
                return RV(x.dtype, wrap_ints(x.dtype, f(ints) if ints.size else ints), x.err)
            if op == "relu":
                f = np.vectorize(lambda t: max(t, 0), otypes=[object])
                return RV(x.dtype, wrap_ints(x.dtype, f(ints) if ints.size else ints), x.err)
            return RV(x.dtype, x.value.copy(), x.err)
        v = x.f64()
        e = x.err
        with np.errstate(invalid="ignore"):
            if op == "abs":
                return RV(x.dtype, round_to(x.dtype, np.abs(v)), e)
            if op == "relu":
                return RV(x.dtype, round_to(x.dtype, np.maximum(v, 0.0)), e)
            if op == "sign":
                r = np.sign(v)
                unsure = (e > 0) & (np.abs(v) <= e)
                return RV(x.dtype, round_to(x.dtype, r), np.where(unsure | ~np.isfinite(e), INF, 0.0))
            f = {"floor": np.floor, "ceil": np.ceil, "round": np.round, "trunc": np.trunc}[op]
            r = f(v)
            lo, hi = f(v - e), f(v + e)
            unsure = (e > 0) & ((lo != r) | (hi != r))
            err = np.where(unsure | ~np.isfinite(e), INF, 0.0)
            return RV(x.dtype, round_to(x.dtype, r), err)

    def shape_op(self, e: Op, args: list, senv) -> RV:
        res = self._shape_op(e, args, senv)
        if e.op in ("T", "transpose", "reshape", "broadcast_to", "expand_dims", "squeeze", "flip", "tile") \
                and args and args[0].from_bool and res.dtype == args[0].dtype:
            res.from_bool = True
        return res

    def _shape_op(self, e: Op, args: list, senv) -> RV:
        op, at, ty = e.op, e.attrs, e.ty
        dt = ty.dtype
        shape = tuple(d.eval(senv) for d in ty.shape)
        if op == "T":
            x = args[0]
            return RV(x.dtype, x.value.T.copy(), x.err.T.copy())
        if op == "transpose":
            x = args[0]
            return RV(x.dtype, np.transpose(x.value, at["perm"]).copy(), np.transpose(x.err, at["perm"]).copy())
        if op in ("reshape", "broadcast_to"):
            x = conv(args[0], dt) if args[0].weak is not None else args[0]
            if op == "reshape":
                return RV(x.dtype, x.value.reshape(shape), x.err.reshape(shape))
            return RV(x.dtype, np.broadcast_to(x.value, shape).copy(), np.broadcast_to(x.err, shape).copy())
        if op == "expand_dims":
            x = args[0]
            return RV(x.dtype, np.expand_dims(x.value, at["ax"]), np.expand_dims(x.err, at["ax"]))
        if op == "squeeze":
            x = args[0]
            return RV(x.dtype, x.value.reshape(shape), x.err.reshape(shape))
        if op == "flip":
            x = args[0]
            ax = at.get("kw", {}).get("axis")
            return RV(x.dtype, np.flip(x.value, ax).copy(), np.flip(x.err, ax).copy())
        if op in ("concat", "stack"):
            items = [conv(a, dt) if a.dtype != dt else a for a in args]
            f = np.concatenate if op == "concat" else np.stack
            return RV(dt, f([i.value for i in items], axis=at["ax"]), f([i.err for i in items], axis=at["ax"]))
        if op == "tile":
            x = args[0]
            return RV(x.dtype, np.tile(x.value, at["reps"]), np.tile(x.err, at["reps"]))
        if op == "pad":
            x = args[0]
            cv = conv(weak_rv(at["cv"]), x.dtype)
            v = np.pad(x.value, at["widths"], constant_values=cv.value)
            er = np.pad(x.err, at["widths"], constant_values=0.0)
            return RV(x.dtype, v, er)
        if op in ("matmul", "dot"):
            return self.matmul(args, dt)
        if op == "outer":
            a, b = (conv(x, dt) if x.dtype != dt else x for x in args)
            a = RV(dt, a.value.reshape(-1, 1), a.err.reshape(-1, 1))
            b = RV(dt, b.value.reshape(1, -1), b.err.reshape(1, -1))
            return binary("mul", [a, b], Ty(dt)) if dt != "bool" else int_binary("land", [a, b], "bool")
        if op in ("zeros", "ones"):
            return RV(dt, np.full(shape, 0 if op == "zeros" else 1).astype(NP[dt]))
        if op == "full":
            return RV(dt, np.broadcast_to(conv(weak_rv(at["value"]), dt).value, shape).copy())
        if op == "arange":
            start, _, step = at["range"]
            vals = np.arange(start, start + shape[0] * step, step)
            return RV(dt, conv_list(vals, dt))
        if op == "eye":
            return RV(dt, np.eye(shape[0], shape[1], at["k"]).astype(NP[dt]))
        if op == "linspace":
            a, b, num = at["lin"]
            r = np.linspace(a, b, num)
            return _fin(dt, r, np.zeros(r.shape), np.zeros(r.shape, bool), np.zeros(r.shape, bool), 4 * K_BASIC,
                        extra=4 * K_BASIC * EPS[dt] * (abs(a) + abs(b)))
        raise RefError(f"op {op}")

    def matmul(self, args: list, dt: str) -> RV:
        a, b = (conv(x, dt) if x.dtype != dt else x for x in args)
        if not is_float(dt):
            A, B = as_ints(a.value), as_ints(b.value)
            r = np.matmul(A, B) if A.ndim and B.ndim else A * B
            err = np.matmul(np.where(np.isfinite(a.err), 0.0, 1.0), np.where(np.isfinite(b.err), 0.0, 1.0))
            err = np.where(np.asarray(err) > 0, INF, 0.0)
            if not np.all(np.isfinite(a.err)) or not np.all(np.isfinite(b.err)):
                err = np.full(np.shape(r), INF)
            return RV(dt, wrap_ints(dt, r), err)
        av, bv = a.f64(), b.f64()
        with np.errstate(all="ignore"):
            r = np.matmul(av, bv)
            k = av.shape[-1]
            absr = np.matmul(np.abs(av), np.abs(bv))
            prop = np.matmul(np.abs(av), b.err) + np.matmul(a.err, np.abs(bv)) + np.matmul(a.err, b.err)
            acc_eps = EPS["f32"] if dt in ("f16", "bf16") else EPS[dt]
            rnd = k * K_BASIC * acc_eps * absr
            exact = (np.matmul((a.err > 0).astype(float), np.ones(bv.shape)) == 0) & \
                    (np.matmul(np.ones(av.shape), (b.err > 0).astype(float)) == 0)
            nan_in = np.matmul(np.isnan(av).astype(float), np.ones(bv.shape)) + \
                np.matmul(np.ones(av.shape), np.isnan(bv).astype(float)) > 0
            res = _fin(dt, r, prop + rnd, np.zeros(np.shape(r), bool), nan_in & np.isfinite(prop), K_BASIC)
            res.err = np.where(exact & np.isfinite(res.err), res.err, res.err)
            res.err = np.where(exact & ~np.isfinite(np.asarray(r)) & ~np.isnan(np.asarray(absr * 0)), 0.0, res.err)
            res.err = np.where(np.isnan(res.err), INF, res.err)
        return res


def conv_list(vals, dt):
    if is_float(dt):
        return round_to(dt, np.asarray(vals, np.float64))
    return wrap_ints(dt, as_ints(np.asarray(vals)))


class _WeakBox:
    """A local bound to a weak literal (`acc = 0`); it is typed by what it is combined with."""

    def __init__(self, rv: RV):
        self.rv = rv


def _ty_of(rv: RV) -> Ty:
    return Ty(rv.dtype, (), rv.weak is not None)


def _assigned(stmts: list) -> set:
    out = set()
    for s in stmts:
        if isinstance(s, (Assign, AugAssign, IndexSet)):
            out.add(s.name)
        elif isinstance(s, TupleAssign):
            out.update(s.names)
        elif isinstance(s, (For, While)):
            out |= _assigned(s.body)
            if isinstance(s, For):
                out.add(s.var)
        elif isinstance(s, If):
            out |= _assigned(s.then) | _assigned(s.orelse)
    return out


def run_reference(case) -> list:
    """Expected results of `case` (a list of RV, one per result of the entry function); the run-time
    events it met are left in `EVENTS`."""
    EVENTS.clear()
    EFFECTS.update(prints=0, assert_unsure=False, prints_unsure=False)
    AVOID.clear()
    AVOID.update(getattr(case.program, "avoid", ()))
    prog = case.program
    fn = prog.function(prog.entry)
    args = []
    for (name, t), a in zip(fn.params, case.args):
        args.append(RV(t.dtype, np.asarray(a)))
    return Interp(prog).call(fn, args, dict(case.shape_env))


# ---------------------------------------------------------------------------------------------------------
# comparison
def compare_result(actual, expected: RV, ty_dtype: str, shape: tuple, slack: float = 2.0) -> str | None:
    """None if `actual` agrees with `expected` on every known element, else a description."""
    a = np.asarray(actual)
    if a.dtype != NP[ty_dtype]:
        return f"dtype {a.dtype} (expected {NP[ty_dtype]})"
    if a.shape != tuple(shape):
        return f"shape {a.shape} (expected {tuple(shape)})"
    if np.shape(expected.value) != a.shape:
        return f"reference has shape {np.shape(expected.value)}, arrc {a.shape}"
    exp_v = np.broadcast_to(expected.value, a.shape)
    err = np.broadcast_to(expected.err, a.shape)
    known = np.isfinite(err)
    if is_float(ty_dtype):
        av = a.astype(np.float64)
        ev = np.asarray(exp_v, np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            # XLA on CPU flushes subnormals to zero (as under jax.jit): they compare equal to 0
            tiny = TINY[ty_dtype]
            av = np.where(np.abs(av) < tiny, 0.0, av)
            ev = np.where(np.abs(ev) < tiny, 0.0, ev)
            both_nan = np.isnan(av) & np.isnan(ev)
            same_inf = np.isinf(av) & np.isinf(ev) & (np.sign(av) == np.sign(ev))
            close = np.abs(av - ev) <= slack * err
            close = np.where(err == 0, av == ev, close)
            ok = both_nan | same_inf | close
    else:
        ok = a == exp_v
    bad = known & ~ok
    if not bad.any():
        return None
    where = list(zip(*np.nonzero(bad)))[:4] if a.ndim else [()]
    parts = []
    for i in where:
        parts.append(f"at {list(map(int, i))}: got {a[i]!r}, expected {exp_v[i]!r} (tolerance {err[i]:.3g})")
    n_bad = int(bad.sum())
    return f"{n_bad} element(s) differ: " + "; ".join(parts)
