"""Guards end to end (LANGUAGE.md sections 7, 9, 10): every guard kind through `arrc.loads(..., guards=...)`,
the exception classes and their attributes, the rendered report, what is blamed (origin, not propagation),
masked NaNs, arguments, loops, calls, branches, dtypes, no false positives (bit-identical results), effects
not repeated by the origin re-run, the CLI, and StableHLO exported from JAX (`arrc run/guard in.mlir`)."""
from __future__ import annotations

import inspect
import re
import os
import subprocess
import sys
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import arrc
from arrc.compiler.types import dtype_of_numpy
from arrc.cli import main as cli
from arrc.runtime import pjrt

F32, F64, F16, I32 = np.float32, np.float64, np.float16, np.int32

# Line numbers matter: the whole-text reports below name them.
SRC = """\
def ratio(x: f32[n], y: f32[n]) -> f32[n]:
    b = (x + y) / (x - y)
    c = b * 2
    return c

def main(x: f32[n], y: f32[n]) -> f32[n]:
    return ratio(x, y)

def grow(x: f32[n]) -> f32[n]:
    y = exp(x)
    return y - 1

def pick(x: f32[n], i: i32) -> f32:
    return x[i]

def window(x: f32[n], i: i32) -> f32[4]:
    return x[i:i + 4]

def take(x: f32[n], idx: i32[k]) -> f32[k]:
    return x[idx]

def put(x: f32[n], i: i32, v: f32) -> f32[n]:
    x[i] = v
    return x

def window2(x: f32[n], i: i32) -> f32[2]:
    return dynamic_slice(x, (i,), (2,))

def paste(x: f32[n], v: f32[2], i: i32) -> f32[n]:
    return dynamic_update_slice(x, v, (i,))

def cell(x: f32[r, c], i: i32, j: i32) -> f32:
    return x[i, j]

def bump_row(x: f32[r, c], i: i32) -> f32[r, c]:
    x[i, :] += 1.0
    return x

def fdiv(a: i32[n], b: i32[n]) -> i32[n]:
    return a // b

def fmod(a: i32[n], b: i32[n]) -> i32[n]:
    return a % b

def shift(x: f32[n]) -> f32[n]:
    return x + 1

def masked(y: f32[n]) -> f32:
    z = log(y)
    return sum(where(isnan(z), 0, z))

def nansum(x: f32[n]) -> f32:
    return sum(where(isnan(x), 0, x))

def steps(x: f32[n], k: i32) -> f32[n]:
    for i in range(k):
        x = x - 1
        x = sqrt(x)
    return x

def nested(x: f32[n]) -> f32[n]:
    for i in range(3):
        for j in range(4):
            x = x - 1.0
            x = log(x)
    return x

def walk(x: f32[n], k: i32) -> f32:
    s = 0.0
    for i in range(k):
        s = s + x[i]
    return s

def inner(v: f32[n]) -> f32[n]:
    return log(v)

def middle(v: f32[n]) -> f32[n]:
    return inner(v) + 1

def outer(x: f32[n]) -> f32[n]:
    y = x * 2
    return middle(y)

def branch(x: f32[n], c: bool) -> f32[n]:
    if c:
        y = sqrt(x)
    else:
        y = log(x)
    return y

def half(x: f64[n]) -> f64[n]:
    return x / x

def square16(x: f16[n]) -> f16[n]:
    return x * x

def first_in_order(c: f32, d: f32) -> (f32, f32):
    a = 0.0
    b = 0.0
    for i in range(4):
        a = a + sqrt(c - i)
        b = b + log(d - i)
    return a, b

def mixed(x: f32[n], y: f32[n]) -> (f32, f32[n]):
    z = log(x)
    safe = sum(where(isnan(z), 0, z))
    return safe, sqrt(y)

def plus_nan(x: f32[n]) -> f32[n]:
    return x + nan

def over_zero(x: f32) -> f32:
    return x / 0.0

def scatter(x: f32[n], idx: i32[k], v: f32[k]) -> f32[n]:
    x[idx] = v
    return x

def slice1(x: f32[n], i: i32) -> f32[1]:
    return dynamic_slice(x, (i,), (1,))

def noisy(x: f32[n]) -> f32[n]:
    print("before", x)
    y = log(x)
    for i in range(2):
        print("iter", i)
    return y

def checked(x: f32[n]) -> f32[n]:
    assert all(x > 0), "x must be positive"
    return sqrt(x)

def busy(x: f32[n], i: i32, a: i32[n], b: i32[n]) -> (f32[n], f32, i32[n], i32[n]):
    s = x
    for j in range(3):
        s = s * 1.5 + x[j] / 3.0
    return sqrt(abs(s)) / (x + 1.0), x[i], a // b, a % b

def softmax(x: f32[b, k]) -> f32[b, k]:
    m = max(x, axis=1, keepdims=true)
    e = exp(x - m)
    return e / sum(e, axis=1, keepdims=true)

def power(a: f64[n, n], v: f64[n], steps: i32) -> (f64[n], f64):
    for i in range(steps):
        v = a @ v
        v = v / sqrt(sum(v * v))
    return v, sum(v * (a @ v))
"""

SRC_LINES = SRC.splitlines()


def line_of(text: str, after: str | None = None) -> int:
    """1-based line of the first source line containing `text` (after the line containing `after`)."""
    start = line_of(after) if after else 0
    return next(i for i, ln in enumerate(SRC_LINES, 1) if i > start and text in ln)


_MODULES: dict = {}


def mod(guards=None, scope: str = "results") -> arrc.Module:
    """One module per (guards, scope) for the whole file: each specialization compiles once."""
    key = (guards, scope)
    if key not in _MODULES:
        _MODULES[key] = arrc.loads(SRC, filename="g.arr", guards=guards, guard_scope=scope)
    return _MODULES[key]


def fault(fn, *args, cls=arrc.GuardError):
    with pytest.raises(cls) as info:
        fn(*args)
    return info.value


def a32(*v):
    return np.array(v, F32)


def i32s(*v):
    return np.array(v, I32)


X8 = np.arange(8, dtype=F32)
X34 = np.arange(12, dtype=F32).reshape(3, 4)


# ---- exception classes ---------------------------------------------------------------------------------------
def test_exception_classes_and_bases():
    assert issubclass(arrc.NaNError, arrc.GuardError) and issubclass(arrc.NaNError, FloatingPointError)
    assert issubclass(arrc.InfError, arrc.GuardError)
    assert issubclass(arrc.BoundsError, arrc.GuardError) and issubclass(arrc.BoundsError, IndexError)
    assert issubclass(arrc.DivisionByZero, arrc.GuardError) and issubclass(arrc.DivisionByZero, ZeroDivisionError)
    assert issubclass(arrc.AssertionFailed, arrc.GuardError) and issubclass(arrc.AssertionFailed, AssertionError)
    codes = {cls.code for cls in (arrc.NaNError, arrc.InfError, arrc.BoundsError, arrc.DivisionByZero)}
    assert codes == {"R0001", "R0002", "R0003", "R0004"}


def test_bad_guard_options():
    with pytest.raises(ValueError, match="nans"):
        arrc.loads(SRC, filename="g.arr", guards="nans")
    with pytest.raises(ValueError, match="guard_scope"):
        arrc.loads(SRC, filename="g.arr", guards="nan", guard_scope="everything")


# ---- nan: the origin, not the propagation --------------------------------------------------------------------
def test_nan_report_blames_the_division_not_the_multiplication():
    err = fault(mod("nan").main, a32(1, 0, 3), a32(2, 0, 1), cls=arrc.NaNError)
    assert isinstance(err, FloatingPointError) and isinstance(err, arrc.GuardError)
    assert err.code == "R0001"
    assert str(err) == """\
error[R0001]: NaN produced at run time
 --> g.arr:2:9
  |
2 |     b = (x + y) / (x - y)
  |         ^^^^^^^^^^^^^^^^^ this division produced NaN at index [1]
  |
  = note: operands at [1]: (x + y) = 0.0, (x - y) = 0.0
  = note: in ratio, called from main at g.arr:7:12
"""
    span = err.span
    assert (span.file, span.line, span.col, span.end_line, span.end_col) == ("g.arr", 2, 9, 2, 26)
    assert err.index == (1,)
    assert err.iteration is None
    assert err.operands == {"x + y": 0.0, "x - y": 0.0}


def test_nan_in_the_entry_itself_notes_the_function():
    err = fault(mod("nan").ratio, a32(0, 5), a32(0, 1), cls=arrc.NaNError)
    assert err.span.line == 2 and err.index == (0,)
    assert str(err).endswith("  = note: in ratio\n")


def test_nan_guard_ignores_inf_and_inf_guard_ignores_nan():
    out = np.asarray(mod("nan").grow(a32(1, 100)))
    assert np.isinf(out[1])
    out = np.asarray(mod("inf").main(a32(1, 0), a32(2, 0)))
    assert np.isnan(out[1])


def test_clean_call_after_a_fault():
    fn = mod("nan").main
    fault(fn, a32(1, 0), a32(2, 0), cls=arrc.NaNError)
    np.testing.assert_array_equal(np.asarray(fn(a32(3, 1), a32(1, 0))), a32(4.0, 2.0))
    fault(fn, a32(0, 1), a32(0, 2), cls=arrc.NaNError)


# ---- inf -----------------------------------------------------------------------------------------------------
def test_inf_report():
    err = fault(mod("inf").grow, a32(1, 100, 2), cls=arrc.InfError)
    assert isinstance(err, arrc.GuardError) and not isinstance(err, arrc.NaNError)
    assert err.code == "R0002"
    assert str(err) == """\
error[R0002]: infinity produced at run time
  --> g.arr:10:9
   |
10 |     y = exp(x)
   |         ^^^^^^ this `exp` produced inf at index [1]
   |
   = note: operands at [1]: x = 100.0
   = note: in grow
"""
    assert (err.span.line, err.span.col, err.span.end_col) == (10, 9, 15)
    assert err.index == (1,) and err.iteration is None and err.operands == {"x": 100.0}


def test_negative_infinity():
    err = fault(mod("inf").inner, a32(1, 0), cls=arrc.InfError)
    assert err.span.line == line_of("return log(v)") and err.index == (1,)
    assert "this `log` produced -inf at index [1]" in str(err)


# ---- bounds --------------------------------------------------------------------------------------------------
def test_bounds_dynamic_index_report():
    err = fault(mod("bounds").pick, X8, I32(9), cls=arrc.BoundsError)
    assert isinstance(err, IndexError) and isinstance(err, arrc.GuardError)
    assert err.code == "R0003"
    assert str(err) == """\
error[R0003]: index out of range at run time
  --> g.arr:14:12
   |
14 |     return x[i]
   |            ^^^^ index 9 is out of range for dimension 0 of size 8
   |
   = note: valid indices are -8..7; the index was clamped into range
   = note: in pick
"""
    assert (err.span.line, err.span.col, err.span.end_col) == (14, 12, 16)
    assert err.index == () and err.iteration is None
    assert err.operands == {"index": 9, "size": 8}


def test_bounds_negative_indices():
    fn = mod("bounds").pick
    assert float(fn(X8, I32(-1))) == 7.0           # in range: wraps as in NumPy
    assert float(fn(X8, I32(-8))) == 0.0
    err = fault(fn, X8, I32(-9), cls=arrc.BoundsError)
    assert err.operands == {"index": -9, "size": 8}
    assert "index -9 is out of range for dimension 0 of size 8" in str(err)


@pytest.mark.parametrize("i, ok", [(4, True), (0, True), (5, False), (-1, False)])
def test_bounds_slice(i, ok):
    fn = mod("bounds").window
    if ok:
        np.testing.assert_array_equal(np.asarray(fn(X8, I32(i))), X8[i:i + 4])
        return
    err = fault(fn, X8, I32(i), cls=arrc.BoundsError)
    assert (err.span.line, err.span.col, err.span.end_col) == (line_of("x[i:i + 4]"), 12, 22)
    assert err.operands == {"index": i, "size": 8}
    assert "valid indices are 0..4 for a slice of 4" in str(err)


def test_bounds_gather_names_the_element():
    fn = mod("bounds").take
    np.testing.assert_array_equal(np.asarray(fn(X8, i32s(0, -1, 7))), a32(0, 7, 7))
    err = fault(fn, X8, i32s(0, 3, 8, 1), cls=arrc.BoundsError)
    assert err.span.line == line_of("return x[idx]")
    assert err.index == (2,)
    assert err.operands == {"index": 8, "size": 8}
    assert "index 8 is out of range for dimension 0 of size 8 at index [2]" in str(err)


def test_bounds_a_read_that_a_where_drops_is_not_reported():
    """As a NaN or a quotient a `where` drops: `where(i < 8, x[i], 0.0)` reads x[i] clamped, then drops it
    (a gather's, a scalar index's and a slice's alike); a slice is reported where any element it read is kept."""
    m = arrc.loads("def one(x: f32[8], i: i32) -> f32:\n    return where(i < 8, x[i], 0.0)\n\n"
                   "def two(x: f32[8], i: i32, keep: bool[2]) -> f32[2]:\n"
                   "    return where(keep, x[i:i + 2], 0.0)\n\n"
                   "def kept(x: f32[8], i: i32) -> f32:\n    return where(i < 10, x[i], 0.0)\n", guards="bounds")
    assert float(m.one(X8, I32(9))) == 0.0
    assert float(m.one(X8, I32(3))) == 3.0
    np.testing.assert_array_equal(np.asarray(m.two(X8, I32(7), np.array([False, False]))), a32(0, 0))
    err = fault(m.two, X8, I32(7), np.array([True, False]), cls=arrc.BoundsError)
    assert err.operands == {"index": 7, "size": 8}
    err = fault(m.kept, X8, I32(9), cls=arrc.BoundsError)
    assert err.operands == {"index": 9, "size": 8}



def test_bounds_the_right_side_of_and_or_is_read_only_where_the_left_does_not_decide():
    """Python's `i < n and x[i] > 0` never reads x[i] when i >= n: the idiomatic `while i < 8 and x[i] < t:`
    was reported out of range (index 8) at its last test; the left side is read always, as in Python."""
    m = arrc.loads("def both(x: f32[8], i: i32) -> bool:\n    return i < 8 and x[i] > 0.0\n\n"
                   "def either(x: f32[8], i: i32) -> bool:\n    return i >= 8 or x[i] > 0.0\n\n"
                   "def scan(x: f32[8], t: f32) -> i32:\n    i = 0\n    while i < 8 and x[i] < t:\n"
                   "        i += 1\n    return i\n\n"
                   "def left(x: f32[8], i: i32) -> bool:\n    return x[i] > 0.0 and i < 8\n", guards="bounds")
    assert not bool(m.both(X8, I32(9))) and bool(m.either(X8, I32(9)))
    assert int(m.scan(X8, F32(100))) == 8 and int(m.scan(X8, F32(3))) == 3
    err = fault(m.both, X8, I32(-9), cls=arrc.BoundsError)      # i < 8 holds: x[-9] is read
    assert err.operands == {"index": -9, "size": 8}
    err = fault(m.left, X8, I32(9), cls=arrc.BoundsError)
    assert err.operands == {"index": 9, "size": 8}

def test_bounds_indexed_update():
    fn = mod("bounds").put
    np.testing.assert_array_equal(np.asarray(fn(X8, I32(-1), F32(9))), np.r_[X8[:7], 9].astype(F32))
    err = fault(fn, X8, I32(8), F32(1), cls=arrc.BoundsError)
    assert (err.span.line, err.span.col, err.span.end_col) == (line_of("x[i] = v"), 5, 9)
    assert err.operands == {"index": 8, "size": 8}


def test_bounds_dynamic_slice_and_update():
    err = fault(mod("bounds").window2, X8, I32(7), cls=arrc.BoundsError)
    assert err.span.line == line_of("dynamic_slice(x, (i,), (2,))")
    assert err.operands == {"index": 7, "size": 8}
    assert "valid indices are 0..6 for a slice of 2" in str(err)
    np.testing.assert_array_equal(np.asarray(mod("bounds").window2(X8, I32(6))), a32(6, 7))
    err = fault(mod("bounds").paste, X8, a32(1, 1), I32(7), cls=arrc.BoundsError)
    assert err.span.line == line_of("dynamic_update_slice")
    assert err.operands == {"index": 7, "size": 8}


def test_bounds_a_negative_slice_start_names_its_dimension():
    """-1 counts from the end (4): 4..6 runs past 5 in dimension 1; the report blamed dimension 0, whose
    index 1 is fine (a negative start passed the in-range test as a scalar index's would)."""
    m = arrc.loads("def f(x: f32[4, 5], i: i32) -> f32[3]:\n    return x[1, i:i + 3]\n", guards="bounds")
    err = fault(m.f, np.arange(20, dtype=F32).reshape(4, 5), I32(-1),
                cls=arrc.BoundsError)
    assert "index -1 is out of range for dimension 1 of size 5" in str(err)
    assert "valid indices are 0..2 for a slice of 3 (or -5..-3 from the end)" in str(err)
    np.testing.assert_array_equal(np.asarray(m.f(np.arange(20, dtype=F32).reshape(4, 5), I32(-3))), [7, 8, 9])


def test_bounds_two_dimensions_names_the_axis():
    err = fault(mod("bounds").cell, X34, I32(1), I32(4), cls=arrc.BoundsError)
    assert "index 4 is out of range for dimension 1 of size 4" in str(err)
    err = fault(mod("bounds").bump_row, X34, I32(3), cls=arrc.BoundsError)
    assert err.span.line == line_of("x[i, :] += 1.0")
    assert "index 3 is out of range for dimension 0 of size 3" in str(err)
    assert float(mod("bounds").cell(X34, I32(-1), I32(-4))) == 8.0


def test_bounds_report_of_negative_dynamic_slice_start_is_consistent():
    try:
        out = mod("bounds").slice1(X8, I32(-1))
    except arrc.BoundsError as err:
        assert "valid indices are -8..7" not in str(err)
    else:
        np.testing.assert_array_equal(np.asarray(out), a32(7))


def test_scatter_out_of_range_is_clamped_as_reported():
    x, idx, v = np.zeros(4, F32), i32s(1, 4), a32(1, 2)
    err = fault(mod("bounds").scatter, x, idx, v, cls=arrc.BoundsError)
    assert err.index == (1,) and "clamped" in str(err)
    np.testing.assert_array_equal(np.asarray(mod().scatter(x, idx, v)), a32(0, 1, 0, 2))


# ---- div0 ----------------------------------------------------------------------------------------------------
def test_div0_floor_division_report():
    err = fault(mod("div0").fdiv, i32s(1, 2, 3), i32s(1, 0, 1), cls=arrc.DivisionByZero)
    assert isinstance(err, ZeroDivisionError) and isinstance(err, arrc.GuardError)
    assert err.code == "R0004"
    assert str(err) == """\
error[R0004]: integer division by zero at run time
  --> g.arr:40:12
   |
40 |     return a // b
   |            ^^^^^^ this division has a zero divisor at index [1]
   |
   = note: arr gives 0 here (as NumPy); the div0 guard reports it instead
   = note: in fdiv
"""
    assert (err.span.line, err.span.col, err.span.end_col) == (40, 12, 18)
    assert err.index == (1,) and err.iteration is None


def test_div0_modulo():
    err = fault(mod("div0").fmod, i32s(1, 2, 3), i32s(1, 1, 0), cls=arrc.DivisionByZero)
    assert err.span.line == line_of("a % b") and err.index == (2,)


def test_div0_unguarded_gives_zero_and_ignores_float_division():
    np.testing.assert_array_equal(np.asarray(mod().fdiv(i32s(7, 2), i32s(2, 0))), i32s(3, 0))
    np.testing.assert_array_equal(np.asarray(mod().fmod(i32s(7, 2), i32s(2, 0))), i32s(1, 0))
    np.testing.assert_array_equal(np.asarray(mod("div0").fdiv(i32s(-7, 7), i32s(2, -2))), i32s(-4, -4))
    out = np.asarray(mod("div0").half(np.array([1.0, 0.0])))
    assert out[0] == 1.0 and np.isnan(out[1])


def test_div0_operands():
    err = fault(mod("div0").fdiv, i32s(1, 2, 3), i32s(1, 0, 1), cls=arrc.DivisionByZero)
    assert 2 in err.operands.values() and 0 in err.operands.values()


# ---- all -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, args, cls, line", [
    ("main", (a32(1, 0), a32(2, 0)), arrc.NaNError, 2),
    ("grow", (a32(1, 100),), arrc.InfError, 10),
    ("pick", (X8, I32(8)), arrc.BoundsError, 14),
    ("fdiv", (i32s(1), i32s(0)), arrc.DivisionByZero, 40),
])
def test_all_is_every_kind(name, args, cls, line):
    err = fault(mod("all")[name], *args, cls=cls)
    assert err.span.line == line


def test_kinds_as_a_list():
    m = arrc.loads(SRC, filename="g.arr", guards=["nan", "div0"])
    fault(m.fdiv, i32s(1), i32s(0), cls=arrc.DivisionByZero)
    assert float(m.pick(X8, I32(8))) == 7.0          # bounds not guarded: clamped silently


# ---- masked NaNs, arguments ----------------------------------------------------------------------------------
def test_masked_nan_is_not_reported_with_results_scope():
    assert float(mod("nan").masked(a32(1, -2))) == 0.0
    assert float(mod("all").masked(a32(np.e, -2))) == pytest.approx(1.0)
    assert float(mod("nan").nansum(a32(1, np.nan, 2))) == 3.0


def test_masked_nan_is_reported_with_all_ops_scope():
    err = fault(mod("nan", "all-ops").masked, a32(1, -2), cls=arrc.NaNError)
    assert str(err) == """\
error[R0001]: NaN produced at run time
  --> g.arr:49:9
   |
49 |     z = log(y)
   |         ^^^^^^ this `log` produced NaN at index [1]
   |
   = note: operands at [1]: y = -2.0
   = note: in masked
"""
    err = fault(mod("nan", "all-ops").nansum, a32(1, np.nan), cls=arrc.NaNError)
    assert err.span.line == line_of("def nansum") and err.index == (1,)


def test_nan_in_an_argument_is_reported_as_that_argument():
    err = fault(mod("nan").shift, a32(1, 2, np.nan), cls=arrc.NaNError)
    assert str(err) == """\
error[R0001]: NaN in argument `x`
  --> g.arr:45:14
   |
45 | def shift(x: f32[n]) -> f32[n]:
   |              ^^^^^^ argument `x` is NaN at index [2]
   |
   = note: in shift
"""
    assert (err.span.line, err.span.col, err.span.end_col) == (45, 14, 20)
    assert err.index == (2,) and err.iteration is None
    # the entry's own argument, even when the NaN goes on into a call
    err = fault(mod("nan").main, a32(1, np.nan), a32(2, 3), cls=arrc.NaNError)
    assert err.span.line == line_of("def main") and err.index == (1,)
    assert "NaN in argument `x`" in str(err) and "argument `x` is NaN at index [1]" in str(err)


def test_inf_in_an_argument():
    err = fault(mod("inf").shift, a32(np.inf, 1), cls=arrc.InfError)
    assert "infinity in argument `x`" in str(err) and err.index == (0,)


def test_masked_nan_is_not_blamed_for_another_nan():
    """The log(x) NaN comes first but is masked on its way to the first result; sqrt(y)'s reaches the second."""
    err = fault(mod("nan").mixed, a32(1, -1), a32(4, -4), cls=arrc.NaNError)
    assert err.span.line == line_of("return safe, sqrt(y)") and err.index == (1,)


def test_masked_nan_is_not_blamed_for_a_nan_made_in_a_loop():
    src = ("def g(x: f32[n], y: f32[n], k: i32) -> (f32[n], f32[n]):\n"
           "    a = log(x)\n"
           "    b = y\n"
           "    for i in range(k):\n"
           "        b = sqrt(b - 2.0)\n"
           "    return where(isnan(a), 0.0, a), b\n")
    g = arrc.loads(src, filename="masked.arr", guards="nan").g
    err = fault(g, a32(-1, 1), a32(1, 9), I32(3), cls=arrc.NaNError)
    assert (err.span.line, err.iteration, err.index) == (5, (0,), (0,))


def test_the_initial_value_of_max_is_not_an_origin():
    """Found while making all-ops runs match: max's -inf initial value was reported as a fresh infinity."""
    src = "def f(x: f32[n]) -> f32:\n    m = max(x)\n    return log(m - 10.0)\n"
    for scope in ("results", "all-ops"):
        err = fault(arrc.loads(src, filename="m.arr", guards="nan,inf", guard_scope=scope).f, a32(1, 2),
                    cls=arrc.NaNError)
        assert err.span.line == 3, scope


def test_nan_literal_is_the_origin():
    err = fault(mod("nan").plus_nan, a32(1, 2), cls=arrc.NaNError)
    assert err.span is not None and err.span.line == line_of("return x + nan")


def test_literal_operand_label():
    err = fault(mod("inf").over_zero, F32(-2), cls=arrc.InfError)
    assert "this division produced -inf" in str(err)
    assert "x / 0.0" not in err.operands


def test_first_in_execution_order_across_iterations():
    # sqrt(c - i) is earlier in the body but fails at i = 3; log(d - i) fails at i = 2
    err = fault(mod("nan").first_in_order, F32(2.5), F32(1.5), cls=arrc.NaNError)
    assert err.span.line == line_of("log(d - i)")
    assert err.iteration == (2,) and err.index == ()
    assert err.operands == {"d - i": -0.5}


# ---- loops, calls, branches, dtypes --------------------------------------------------------------------------
def test_loop_iteration_is_named():
    err = fault(mod("nan").steps, a32(3, 9, 1.5), I32(5), cls=arrc.NaNError)
    assert err.iteration == (1,)
    assert err.span.line == line_of("x = sqrt(x)") and err.index == (2,)
    assert "  = note: in loop iteration 1\n" in str(err)
    strict = fault(mod("nan", "all-ops").steps, a32(3, 9, 1.5), I32(5), cls=arrc.NaNError)
    assert (strict.span, strict.index, strict.iteration) == (err.span, err.index, err.iteration)


LOOP_INDICES = """\
def stencil(x: f32[n]) -> f32[n]:
    y = x
    for i in range(1, n - 1):
        y[i] = (x[i - 1] + x[i] + x[i + 1]) / 3.0
    return y

def shifted(x: f32[n], k: i32) -> f32:
    s = 0.0
    for i in range(n):
        s += x[i + 1] + x[k]
    return s
"""


def test_indices_in_range_by_construction_have_no_bounds_check():
    """A loop counter of `range(a, b)` with known bounds, shifted by a constant, that stays in range indexes
    without a check (issue 18: each was a conditional on every iteration); one that can leave the range,
    or any other run-time index, keeps its check and its report."""
    m = arrc.loads(LOOP_INDICES, filename="l.arr", guards="bounds")
    x = a32(1, 2, 3, 4)
    text = m.stencil.lower(x, guarded=True).as_text()
    assert 'arrc.kind = "bounds"' not in text and "dynamic_update_slice" in text
    np.testing.assert_allclose(m.stencil(x), [1, 2, 3, 4])
    shifted = m.shifted.lower(x, I32(0), guarded=True).as_text()
    assert shifted.count('arrc.kind = "bounds"') == 2            # x[i + 1] (i = n - 1 is past it) and x[k]
    err = fault(m.shifted, x, I32(0), cls=arrc.BoundsError)
    assert err.span.line == 10 and err.iteration == (3,) and "index 4 is out of range" in str(err)


def test_nested_loops_give_a_tuple_outermost_first():
    err = fault(mod("nan").nested, a32(100, 10), cls=arrc.NaNError)
    assert err.iteration == (0, 2)
    assert err.span.line == line_of("x = log(x)") and err.index == (1,)
    assert "  = note: in loop iteration 0, 2 (outermost first)\n" in str(err)


def test_bounds_in_a_loop_names_the_iteration():
    err = fault(mod("bounds").walk, np.arange(4, dtype=F32), I32(6), cls=arrc.BoundsError)
    assert err.iteration == (4,)
    assert err.operands == {"index": 4, "size": 4}
    assert float(mod("bounds").walk(np.arange(4, dtype=F32), I32(4))) == 6.0


def test_call_chain():
    err = fault(mod("nan").outer, a32(1, -1), cls=arrc.NaNError)
    assert err.span.line == line_of("return log(v)") and err.index == (1,)
    assert str(err).endswith("  = note: in inner, called from middle at g.arr:78:12, "
                             "called from outer at g.arr:82:12\n")


@pytest.mark.parametrize("taken, line", [(True, 86), (False, 88)])
def test_both_branches_of_if(taken, line):
    err = fault(mod("nan").branch, a32(1, -1), taken, cls=arrc.NaNError)
    assert err.span.line == line and err.index == (1,)
    assert err.operands == {"x": -1.0}


def test_untaken_branch_is_not_reported():
    out = np.asarray(mod("nan").branch(a32(4, 0), True))
    np.testing.assert_array_equal(out, a32(2, 0))


def test_f64_values():
    err = fault(mod("nan").half, np.array([1.0, 0.0], F64), cls=arrc.NaNError)
    assert err.span.line == line_of("return x / x") and err.index == (1,)
    assert err.operands == {"x": 0.0}
    assert "this division produced NaN at index [1]" in str(err)


def test_f16_values():
    err = fault(mod("inf").square16, np.array([1, 300], F16), cls=arrc.InfError)
    assert err.span.line == line_of("return x * x") and err.index == (1,)
    assert err.operands == {"x": 300.0}
    assert "this multiplication produced inf at index [1]" in str(err)


def test_bf16_values():
    m = arrc.loads("def lg(x: bf16[n]) -> bf16[n]:\n    return log(x)\n", filename="b.arr", guards="nan")
    err = fault(m.lg, np.array([1, -1], ml_dtypes.bfloat16), cls=arrc.NaNError)
    assert err.span.line == 2 and err.operands == {"x": -1.0}


# ---- no false positives: bit-identical results ---------------------------------------------------------------
_RNG = np.random.default_rng(7)
CLEAN = [
    ("main", (a32(3, 1, 5), a32(1, 0, 2))),
    ("steps", (a32(30, 90, 15), I32(2))),
    ("walk", (np.arange(6, dtype=F32), I32(6))),
    ("take", (X8, i32s(7, 0, -3))),
    ("put", (X8, I32(-2), F32(3))),
    ("bump_row", (X34, I32(2))),
    ("fdiv", (i32s(7, -7, 9), i32s(2, 2, -4))),
    ("fmod", (i32s(7, -7, 9), i32s(2, 2, -4))),
    ("masked", (a32(1, 2, 3),)),
    ("busy", (_RNG.uniform(0.1, 3, 16).astype(F32), I32(3), np.arange(-8, 8, dtype=I32), np.tile(i32s(3, -2, 5, 7), 4))),
    ("softmax", (_RNG.normal(size=(3, 5)).astype(F32),)),
    ("power", (_RNG.normal(size=(4, 4)), np.ones(4), I32(5))),
    ("half", (np.array([1.5, -2.0]),)),
]


ALL_OPS = {"main", "steps", "walk", "busy", "softmax", "power"}      # the strict scope on a subset (compile time)


@pytest.mark.parametrize("name, args, scope", [
    pytest.param(name, args, scope, id=f"{name}-{scope}")
    for name, args in CLEAN for scope in ("results", "all-ops") if scope == "results" or name in ALL_OPS])
def test_guarded_clean_runs_match_unguarded_ones(name, args, scope):
    """Bit-identical in the results scope. In the all-ops scope every float op gets a consumer (its check),
    which changes how XLA fuses and vectorizes them: the power iteration (f64) then differs in the last
    bit, as with JAX's checkify (docs/guards.md)."""
    plain = mod()[name](*args)
    guarded = mod("all", scope)[name](*args)
    plain = plain if isinstance(plain, tuple) else (plain,)
    guarded = guarded if isinstance(guarded, tuple) else (guarded,)
    assert len(plain) == len(guarded)
    for p, g in zip(plain, guarded):
        p, g = np.asarray(p), np.asarray(g)
        assert p.dtype == g.dtype, name
        if scope == "results" or p.dtype.kind != "f":
            assert np.array_equal(p, g), name
        else:
            # in ulps of the largest magnitude (a dot product's rounding scales with its terms, not its result)
            ulps = np.abs(p - g) / np.spacing(np.max(np.abs(p)).astype(p.dtype))
            assert np.all(ulps <= 4), (name, float(np.max(ulps)))


def optimized_hlo(fn, args) -> str:
    """The HLO that XLA compiled for `fn` on `args` (after a call), without its source metadata."""
    fn(*args)
    types = tuple(arrc.spec(f"{dtype_of_numpy(np.asarray(a).dtype).name}{list(np.shape(a))}") for a in args)
    compiled, _ = fn._compiled[(types, False)]
    text = compiled.executable.loaded.hlo_modules()[0].to_string()
    return re.sub(r", metadata=\{[^}]*\}", "", text)


# Programs with no index or integer division to check: under guards="all" nothing is instrumented inside them.
NO_OP_SITES = {"main", "steps", "masked", "softmax", "power", "half"}


@pytest.mark.parametrize("name, args", [pytest.param(n, a, id=n) for n, a in CLEAN])
def test_results_scope_compiles_the_unguarded_computation(name, args):
    """Bit-identical by construction (issue 12): checking nan/inf on the results is a second executable, so
    XLA compiles the function exactly as without guards, on any CPU (AVX2 or AVX-512 vectorize differently,
    but the same HLO compiles to the same code). With bounds/div0 too, programs without such sites are
    untouched as well."""
    plain = optimized_hlo(mod()[name], args)
    assert optimized_hlo(mod("nan,inf")[name], args) == plain
    if name in NO_OP_SITES:
        assert optimized_hlo(mod("all")[name], args) == plain


# ---- the guarded call path: the dispatcher, then the results check (arrc/api.py `_checking`) -------------------
CHECKED = """
def ratio(x: f32[n], y: f32[n]) -> f32[n]:
    return log(x) / y

def pair(x: f32[n]) -> (f32[n], i32):
    return sqrt(x), 3
"""


def test_guarded_calls_run_in_the_dispatcher_and_never_lose_or_repeat_a_fault(monkeypatch):
    """No-fault guarded calls (nan/inf on the results, no host callbacks) take jaxlib's C++ dispatcher for
    the function and for its results check: after the first call of each argument type no full call runs.
    Faulting calls among them raise every time, once each, from the call that made the NaN; the clean
    calls between them return the unguarded values."""
    plain, guarded = arrc.loads(CHECKED), arrc.loads(CHECKED, guards="nan,inf")
    full_calls = []
    call = arrc.Function._call
    monkeypatch.setattr(arrc.Function, "_call", lambda self, *a: full_calls.append(a) or call(self, *a))
    good = {n: (jnp.asarray(np.linspace(1, 2, n, dtype=F32)), jnp.asarray(np.full(n, 3, F32))) for n in (4, 7)}
    bad = jnp.asarray(a32(1, -1, 2, 3))
    for n in (4, 7):
        for m in (plain, guarded):
            m.ratio(*good[n]), m.pair(good[n][0])
    warmed = len(full_calls)
    reported = []
    for i in range(12):
        n = (4, 7)[i % 2]
        assert np.array_equal(guarded.ratio(*good[n]), plain.ratio(*good[n]))
        y, k = guarded.pair(good[n][0])
        assert np.array_equal(y, plain.pair(good[n][0])[0]) and int(k) == 3
        if i % 3 == 0:
            with pytest.raises(arrc.NaNError) as info:
                guarded.ratio(bad, good[4][1])
            reported.append(str(info.value))
            with pytest.raises(arrc.NaNError):
                guarded.pair(bad)
    assert len(reported) == 4 and all(r == reported[0] for r in reported)
    assert reported[0].count("error[R0001]") == 1 and "this `log` produced NaN at index [1]" in reported[0]
    # the full calls after warming up are the faulting ones only (each runs the function again to report)
    assert len(full_calls) - warmed == 8


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32", "f64"])
def test_scalar_results_are_read_not_filtered_and_never_lose_a_fault(monkeypatch, dtype):
    """A function whose float results are scalars has them read and tested on the host after the dispatcher's
    call (arrc/api.py `_checking`): a clean call makes no full call; a NaN or an infinity among them
    raises from each call that made it, a non-finite value of an integer result is not a thing."""
    src = f"def f(x: {dtype}[n]) -> ({dtype}, i32, {dtype}):\n    return sum(log(x)), 3, max(x) * 2.0\n"
    guarded = arrc.loads(src, guards="nan,inf", filename="s.arr")
    t = _FLOATS[dtype]
    full_calls = []
    call = arrc.Function._call
    monkeypatch.setattr(arrc.Function, "_call", lambda self, *a: full_calls.append(a) or call(self, *a))
    good = jnp.asarray(np.array([1.0, 2.0, 3.0], t))
    guarded.f(good)
    warmed = len(full_calls)
    for _ in range(3):
        total, k, top = guarded.f(good)
        assert abs(float(total) - np.log(6.0)) < 0.02 and int(k) == 3 and float(top) == 6.0
        assert fault(guarded.f, jnp.asarray(np.array([1.0, -2.0, 3.0], t)), cls=arrc.NaNError).span.col == 16
        huge = float(ml_dtypes.finfo(t).max)
        assert fault(guarded.f, jnp.asarray(np.array([1.0, huge, 3.0], t)), cls=arrc.InfError).span.col == 28
    assert len(full_calls) - warmed == 6


def test_guarded_call_with_an_infinity_raises_from_the_call_as_inf_error():
    guarded = arrc.loads(CHECKED, guards="nan,inf")
    x = jnp.asarray(a32(1, 2))
    guarded.ratio(x, x)
    err = fault(guarded.ratio, x, jnp.asarray(a32(1, 0)), cls=arrc.InfError)
    assert err.index == (1,)
    assert np.array_equal(guarded.ratio(x, x), np.log(a32(1, 2)) / a32(1, 2))


_FLOATS = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64}


@pytest.mark.parametrize("dtype", list(_FLOATS))
def test_results_check_finds_every_nonfinite_element_and_no_overflowing_sum(dtype):
    """The fast path tests the results on the host up to HOST_CHECK_ELEMENTS (runtime/pjrt.py
    `finite_on_host`; bf16, which jaxlib does not export, as larger results, by the filter), else the
    results filter sums each result, and the elements are tested only where the sum is not finite
    (passes/guards.py `results_filter`, `results_check`): a NaN or infinity anywhere (first, middle, last
    element; sizes that XLA reduces with vector code) is found for each kind, and finite values whose sum
    overflows are no fault."""
    src = f"def f(x: {dtype}[n]) -> {dtype}[n]:\n    return x\n"
    mods = {kinds: arrc.loads(src, guards=kinds) for kinds in ("nan", "inf", "nan,inf")}
    big = float(ml_dtypes.finfo(_FLOATS[dtype]).max) / 2
    # on the host, or (bf16) one reduction; a loop of chunks, the last one clamped; one reduction
    for n in (7, 4097, 100_003, pjrt.HOST_CHECK_ELEMENTS + 1):
        clean = np.linspace(-3, 3, n).astype(_FLOATS[dtype])
        for m in mods.values():
            assert np.array_equal(np.asarray(m.f(clean)), clean)
            assert np.array_equal(np.asarray(m.f(np.full(n, big, _FLOATS[dtype]))), np.full(n, big, _FLOATS[dtype]))
        for at in (0, n // 2, n - 1):
            for value, cls in ((np.nan, arrc.NaNError), (np.inf, arrc.InfError), (-np.inf, arrc.InfError)):
                x = clean.copy()
                x[at] = value
                for kinds, m in mods.items():
                    if ("nan" if cls is arrc.NaNError else "inf") in kinds:
                        assert fault(m.f, x, cls=cls).index == (at,), (kinds, n, at, value)
                    else:
                        m.f(x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_the_host_test_finds_a_nonfinite_element_at_every_position(dtype):
    """`finite_on_host` at every position of arrays whose sizes end vector loops anywhere, and of a large
    one at its ends, without a NumPy warning (a user's `-W error` or `np.seterr(all="raise")` must not
    see arrc's own test: a dot product with zeros, 2.5x faster, warned "invalid value encountered in
    dot"); huge finite values, whose squares or sum would overflow, are finite."""
    import jax
    big = float(np.finfo(dtype).max)
    arrc.loads("def f(x: f32[2]) -> f32[2]:\n    return x\n", guards="nan").f(np.ones(2, F32))  # (binds jax)
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        for n in [*range(1, 70), 4095, pjrt.HOST_CHECK_ELEMENTS]:
            clean = np.full(n, big, dtype)
            clean[::2] = -big
            assert pjrt.finite_on_host([jax.device_put(clean)]) is True
            for at in (range(n) if n < 70 else (0, 1, n // 2, n - 2, n - 1)):
                for value in (np.nan, np.inf, -np.inf):
                    x = clean.copy()
                    x[at] = value
                    assert pjrt.finite_on_host([jax.device_put(x)]) is False, (n, at, value)


def test_float_results_are_tested_on_the_host_up_to_its_limit_then_by_the_results_filter(monkeypatch):
    """Arrays of up to HOST_CHECK_ELEMENTS float elements in all are tested on the host, in place (a second
    dispatch of the results filter cost ~9 us a call: an EWMA over 4,096 elements 1.33x unguarded, now
    1.2x); past that, the filter, compiled at its first use only. Neither loses a fault: each faulting
    call raises, the clean calls around it return the unguarded values."""
    src = ("def f(x: f32[n]) -> f32[n]:\n    return log(x)\n\n"
           "def two(x: f32[n]) -> (f32[n], f32[n]):\n    return x, log(x)\n")
    plain, guarded = arrc.loads(src), arrc.loads(src, guards="nan,inf")
    tested = []
    on_host = pjrt.finite_on_host
    monkeypatch.setattr(pjrt, "finite_on_host", lambda arrays, poll: tested.append(on_host(arrays, poll)) or tested[-1])
    limit = pjrt.HOST_CHECK_ELEMENTS
    for name, n, by_host in (("f", 5, True), ("f", limit, True), ("f", limit + 1, False), ("two", limit // 2, True),
                             ("two", limit // 2 + 1, False)):
        x = np.linspace(1, 2, n, dtype=F32)
        for _ in range(3):
            del tested[:]
            clean, expected = guarded[name](x), plain[name](x)
            for got, want in zip(clean if name == "two" else [clean], expected if name == "two" else [expected]):
                assert np.array_equal(np.asarray(got), np.asarray(want))
            assert tested == [True if by_host else None]
            bad = x.copy()
            bad[n // 2] = -1.0
            assert fault(guarded[name], bad, cls=arrc.NaNError).index == (n // 2,)
        compiled, = [c for (types, origins), (c, _) in guarded[name]._compiled.items()
                     if not origins and str(types[0]) == f"f32[{n}]"]
        assert (compiled._filter is None) == by_host, (name, n)


# ---- effects -------------------------------------------------------------------------------------------------
def test_print_is_not_repeated_by_the_origin_run(capfd):
    err = fault(mod("nan").noisy, a32(1, -1), cls=arrc.NaNError)
    assert err.span.line == line_of("y = log(x)", after="def noisy")
    out = capfd.readouterr().out
    assert out.count("before") == 1
    assert out.count("iter 0") == 1 and out.count("iter 1") == 1


def test_print_runs_on_every_clean_call(capfd):
    fn = mod("nan").noisy
    fn(a32(1, 2))
    fn(a32(1, 2))
    assert capfd.readouterr().out.count("before") == 2


def test_asserts_are_checked_with_and_without_guards():
    for m in (mod(), mod("nan")):
        err = fault(m.checked, a32(1, -1), cls=arrc.AssertionFailed)
        assert "x must be positive" in str(err)


# ---- the command line ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def arr_file(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("arr") / "g.arr"
    path.write_text(SRC)
    return str(path)


def test_cli_run_guard_nan_exits_3_with_report(arr_file, capsys):
    rc = cli(["run", arr_file, "--entry", "main", "--arg", "x=[1, 0, 3]", "--arg", "y=[2, 0, 1]", "--guards", "nan"])
    out, err = capsys.readouterr()
    assert rc == 3
    assert out == ""
    assert err == f"""\
error[R0001]: NaN produced at run time
 --> {arr_file}:2:9
  |
2 |     b = (x + y) / (x - y)
  |         ^^^^^^^^^^^^^^^^^ this division produced NaN at index [1]
  |
  = note: operands at [1]: (x + y) = 0.0, (x - y) = 0.0
  = note: in ratio, called from main at {arr_file}:7:12
"""


def test_cli_run_without_guards_prints_nan(arr_file, capsys):
    rc = cli(["run", arr_file, "--entry", "main", "--arg", "x=[1, 0, 3]", "--arg", "y=[2, 0, 1]"])
    out, _ = capsys.readouterr()
    assert rc == 0 and "nan" in out


def test_cli_guard_scope_all_ops(arr_file, capsys):
    args = ["run", arr_file, "--entry", "masked", "--arg", "y=[1, -2]", "--guards", "nan"]
    assert cli(args) == 0
    assert capsys.readouterr().out.strip() == "0.0"
    assert cli(args + ["--guard-scope", "all-ops"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("error[R0001]: NaN produced at run time\n")
    assert f"--> {arr_file}:49:9" in err


@pytest.mark.parametrize("entry, args, code", [
    ("pick", ["x=[1, 2, 3]", "i=3"], "R0003"),
    ("fdiv", ["a=[1, 2]", "b=[1, 0]"], "R0004"),
    ("grow", ["x=[1, 100]"], "R0002"),
])
def test_cli_guards_all(arr_file, capsys, entry, args, code):
    argv = ["run", arr_file, "--entry", entry, "--guards", "all"]
    for a in args:
        argv += ["--arg", a]
    assert cli(argv) == 3
    assert capsys.readouterr().err.startswith(f"error[{code}]")


def test_cli_unknown_guard_is_a_usage_error(arr_file, capsys):
    assert cli(["run", arr_file, "--entry", "shift", "--arg", "x=[1]", "--guards", "nans"]) == 2
    assert "nans" in capsys.readouterr().err


def test_cli_compile_with_guards(arr_file, capsys):
    assert cli(["compile", arr_file, "--entry", "pick", "--shape", "n=8", "--guards", "nan,bounds"]) == 0
    text = capsys.readouterr().out
    assert "arrc.check_results" in text and 'arrc.kind = "bounds"' in text


def test_cli_exit_code_in_a_subprocess(arr_file):
    proc = subprocess.run([sys.executable, "-m", "arrc", "run", arr_file, "--arg", "x=[1, 0, 3]",
                           "--arg", "y=[2, 0, 1]", "--guards", "nan"],
                          capture_output=True, text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "1"}, timeout=120)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == ""
    assert f"""\
error[R0001]: NaN produced at run time
 --> {arr_file}:2:9
  |
2 |     b = (x + y) / (x - y)
  |         ^^^^^^^^^^^^^^^^^ this division produced NaN at index [1]
""" in proc.stderr
    assert "Traceback" not in proc.stderr


# ---- StableHLO from elsewhere: exported from JAX -------------------------------------------------------------
def jax_ratio(x, y):
    b = (x + y) / (x - y)
    return b * 2


def jax_pick(x, i):
    return x[i] * 2.0


def jax_take(x, idx):
    return x[idx] + 1.0


def jax_relu_log(x):
    return jnp.log(jax.nn.relu(x) - 1.0)


def _line(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, ln in enumerate(lines) if text in ln)


THIS = str(Path(__file__).resolve())


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict:
    d = tmp_path_factory.mktemp("jax")
    z3, z8 = np.zeros(3, F32), np.zeros(8, F32)
    files = {}
    for name, fn, args in [("ratio", jax_ratio, (z3, z3)), ("pick", jax_pick, (z8, I32(0))),
                           ("take", jax_take, (z8, np.zeros(3, I32))), ("relu", jax_relu_log, (z3,))]:
        path = d / f"{name}.mlir"
        path.write_text(jax.jit(fn).lower(*args).as_text(debug_info=True))
        files[name] = str(path)
    return files


def test_jax_module_locations_point_at_this_file(exported):
    text = Path(exported["ratio"]).read_text()
    assert "test_guards.py" in text and "stablehlo.divide" in text


def test_run_foreign_module_with_nan_guard(exported, capsys):
    argv = ["run", exported["ratio"], "--arg", "arg0=[1, 0, 3]", "--arg", "arg1=[2, 0, 1]"]
    assert cli(argv) == 0
    assert "nan" in capsys.readouterr().out
    assert cli(argv + ["--guards", "nan"]) == 3
    out, err = capsys.readouterr()
    line = _line(jax_ratio, "b = (x + y) / (x - y)")
    assert out == ""
    assert err.startswith("error[R0001]: NaN produced at run time\n")
    assert f" --> {THIS}:{line}:9\n" in err
    assert f"{line} |     b = (x + y) / (x - y)\n" in err
    assert "^" * len("(x + y) / (x - y)") + " this" in err
    assert "NaN at index [1]" in err
    assert "operands at [1]: (x + y) = 0.0, (x - y) = 0.0" in err


def test_run_foreign_module_all_ops(exported, capsys):
    argv = ["run", exported["ratio"], "--arg", "arg0=[1, 0, 3]", "--arg", "arg1=[2, 0, 1]",
            "--guards", "nan", "--guard-scope", "all-ops"]
    assert cli(argv) == 3
    assert f"{THIS}:{_line(jax_ratio, 'b = (x + y)')}:9" in capsys.readouterr().err


def test_run_foreign_module_nan_argument(exported, capsys):
    argv = ["run", exported["ratio"], "--arg", "arg0=[1, nan, 3]", "--arg", "arg1=[2, 0, 1]", "--guards", "nan"]
    assert cli(argv) == 3
    err = capsys.readouterr().err
    assert err.startswith("error[R0001]: NaN in argument `x`\n")


def test_run_foreign_module_nan_argument_names_the_index(exported, capsys):
    argv = ["run", exported["ratio"], "--arg", "arg0=[1, nan, 3]", "--arg", "arg1=[2, 0, 1]", "--guards", "nan"]
    assert cli(argv) == 3
    assert "index [1]" in capsys.readouterr().err


def test_run_foreign_module_bounds(exported, capsys):
    base = ["run", exported["pick"], "--arg", f"arg0={list(range(8))}", "--guards", "bounds"]
    assert cli(base + ["--arg", "arg1=-1"]) == 0
    assert capsys.readouterr().out.strip() == "14.0"
    assert cli(base + ["--arg", "arg1=9"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("error[R0003]: index out of range at run time\n")
    assert f"{THIS}:{_line(jax_pick, 'return x[i]')}:12" in err
    assert "index 9 is out of range for dimension 0 of size 8" in err


def test_run_foreign_module_gather_bounds(exported, capsys):
    argv = ["run", exported["take"], "--arg", f"arg0={list(range(8))}", "--arg", "arg1=[0, 9, 1]",
            "--guards", "bounds"]
    assert cli(argv) == 3


@pytest.mark.parametrize("name, arg", [("pick", "arg1=-9"), ("take", "arg1=[0, -1, -9]")])
def test_run_foreign_module_negative_index_is_reported_as_written(exported, capsys, name, arg):
    """JAX counts a negative index from the end (`select(i < 0, i + n, i)`): `x[-9]` of 8 was reported as
    "index -1 ... valid indices are 0..7", the wrapped value, which JAX's `x[-1]` would accept."""
    assert cli(["run", exported[name], "--arg", f"arg0={list(range(8))}", "--arg", arg, "--guards", "bounds"]) == 3
    err = capsys.readouterr().err
    assert "index -9 is out of range for dimension 0 of size 8" in err and "valid indices are -8..7" in err, err


def test_run_foreign_module_with_calls(exported, capsys):
    argv = ["run", exported["relu"], "--arg", "arg0=[2, 0.5, 3]", "--guards", "nan"]
    assert cli(argv) == 3
    assert f"{THIS}:{_line(jax_relu_log, 'jnp.log')}" in capsys.readouterr().err


def test_guard_command_writes_an_instrumented_module(exported, tmp_path, capsys):
    out = tmp_path / "guarded.mlir"
    assert cli(["guard", exported["pick"], "-o", str(out)]) == 0
    text = out.read_text()
    assert "arrc.check_results" in text and "arrc.run_arg" in text
    assert 'arrc.kind = "bounds"' in text and "@xla_ffi_python_cpu_callback" in text
    assert "test_guards.py" in text                       # locations kept
    assert cli(["guard", exported["ratio"], "--guards", "nan"]) == 0
    assert "arrc.check_results" in capsys.readouterr().out


def test_run_an_already_guarded_module(exported, tmp_path, capsys):
    out = tmp_path / "guarded.mlir"
    assert cli(["guard", exported["ratio"], "-o", str(out)]) == 0
    argv = ["run", str(out), "--arg", "arg0=[1, 0, 3]", "--arg", "arg1=[2, 0, 1]"]
    rc = cli(argv)
    err = capsys.readouterr().err
    assert rc == 3, err
    assert f"{THIS}:{_line(jax_ratio, 'b = (x + y)')}:9" in err


@pytest.fixture(scope="module")
def dynamic_module(tmp_path_factory) -> str:
    from jax import export

    def sine(x):
        return jnp.sin(x) + 1

    exp = export.export(jax.jit(sine))(jax.ShapeDtypeStruct(export.symbolic_shape("n"), jnp.float32))
    path = tmp_path_factory.mktemp("dyn") / "dyn.mlir"
    path.write_text(exp.mlir_module())
    return str(path)


def test_dynamic_dimension_is_rejected(dynamic_module, capsys):
    assert "?x" in Path(dynamic_module).read_text()
    assert cli(["run", dynamic_module, "--arg", "arg0=[1, 2]"]) == 1
    err = capsys.readouterr().err
    assert "error[E0501]: dynamic shape in StableHLO" in err and "tensor<?xf32>" in err
    assert cli(["guard", dynamic_module]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "error[E0501]" in err


def test_dynamic_dimension_report_shows_the_source_line(dynamic_module, capsys):
    cli(["run", dynamic_module, "--arg", "arg0=[1, 2]"])
    err = capsys.readouterr().err
    assert "return jnp.sin(x) + 1" in err and "dynamic here" in err
