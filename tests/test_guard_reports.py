"""What a guard report names (issue 17): each operand by its own source text (a broadcast scalar, a loop's
variable, an inlined call), the operation whose values actually reach the bad result (per-element flow in
the origin build: a NaN that a `where` masks is not blamed), integer divisions by zero under the same
"reaches a result" rule, and infinities a program returns on purpose (the element index, the help)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import arrc
from arrc.runtime import guards as runtime_guards

F32, I32 = np.float32, np.int32
NAN = np.nan


def fault(src: str, fn: str, *args, cls=arrc.GuardError, guards="all"):
    mod = arrc.loads(src, filename="r.arr", guards=guards)
    with pytest.raises(cls) as info:
        getattr(mod, fn)(*args)
    return info.value


def run(src: str, fn: str, *args, guards="all"):
    return getattr(arrc.loads(src, filename="r.arr", guards=guards), fn)(*args)


def a32(*v):
    return np.array(v, F32)


def i32s(*v):
    return np.array(v, I32)


# ---- operand labels ---------------------------------------------------------------------------------------------
def test_broadcast_scalar_divisor_is_named_by_its_own_text():
    err = fault("def f(x: f32[n], s: f32) -> f32[n]:\n    return x / s\n", "f", a32(1, 2), F32(0), cls=arrc.InfError)
    assert err.operands == {"x": 1.0, "s": 0.0}
    assert "operands at [0]: x = 1.0, s = 0.0" in str(err)


def test_a_constant_operand_is_named_by_its_text():
    # `zeros(3)` is a constant in the program: the report called it "literal"
    err = fault("def f(x: f32[3]) -> f32[3]:\n    return zeros(3) / x\n", "f", a32(0, 0, 0), cls=arrc.NaNError)
    assert "operands at [0]: zeros(3) = 0.0, x = 0.0" in str(err)


@pytest.mark.parametrize("dtype, tiny, note", [("f32", 1e-40, True), ("f64", 1e-310, True), ("f16", 1e-7, False)])
def test_a_subnormal_operand_is_shown_as_it_is_and_said_to_be_flushed(dtype, tiny, note):
    """The operands were converted to f64 inside the program, where XLA flushes subnormals to zero: the divisor
    1e-40 was reported as `y = 0.0`. Now its value, and that XLA computed with it flushed (an f16 subnormal is
    a normal f32, where XLA computes f16: no note)."""
    err = fault(f"def f(x: {dtype}, y: {dtype}) -> {dtype}:\n    return x / y\n", "f",
                np.dtype(np.float16 if dtype == "f16" else dtype.replace("f", "float")).type(1e4),
                np.dtype(np.float16 if dtype == "f16" else dtype.replace("f", "float")).type(tiny), cls=arrc.InfError)
    shown = {"f32": "1e-40", "f64": "1e-310", "f16": "1.1920929e-07"}[dtype]
    assert f"operands: x = 10000.0, y = {shown}" in str(err)
    assert (f"y = {shown} is subnormal, and XLA computes with subnormal numbers flushed to zero" in str(err)) == note


def test_scalar_promoted_and_broadcast_operand_keeps_its_name():
    src = "def f(x: f32[n], k: i32) -> f32[n]:\n    return (x * 0.0) / k\n"
    err = fault(src, "f", a32(1, 2), I32(0), cls=arrc.NaNError)
    assert err.operands == {"x * 0.0": 0.0, "k": 0.0}


def test_an_argument_passed_to_a_call_is_named_as_the_callee_writes_it():
    # `a / b` in g, called as g(x, x): both operands were named `x` (the entry's argument), so the note
    # listed one operand; in a vmap, `log(x)` of f's lane named it `xs`, the caller's batched argument
    src = "def g(a: f32[n], b: f32[n]) -> f32[n]:\n    return a / b\n\ndef f(x: f32[n]) -> f32[n]:\n    return g(x, x)\n"
    err = fault(src, "f", a32(1, 0), cls=arrc.NaNError)
    assert err.operands == {"a": 0.0, "b": 0.0} and "operands at [1]: a = 0.0, b = 0.0" in str(err)
    src = ("def f(x: f32[3]) -> f32:\n    return sum(log(x))\n\n"
           "def main(xs: f32[2, 3]) -> f32[2]:\n    return vmap(f)(xs)\n")
    err = fault(src, "main", np.array([[1, 1, 1], [1, -1, 1]], F32), cls=arrc.NaNError)
    assert err.operands == {"x": -1.0} and err.lanes == (1,)


def test_loop_carried_value_inside_the_loop_is_its_variable():
    src = ("def f(x: f32[n]) -> f32:\n    acc = 0.0\n    for i in range(n):\n"
           "        acc = acc + x[i] / acc\n    return acc\n")
    err = fault(src, "f", a32(0, 2, 3), cls=arrc.NaNError)
    assert err.operands == {"x[i]": 0.0, "acc": 0.0} and err.iteration == (0,)


@pytest.mark.parametrize("loop", ["for i in range(n):\n        s = s + x[i]\n",
                                  "i = 0\n    while i < n:\n        s = s + x[i]\n        i += 1\n"])
def test_value_out_of_a_loop_is_its_variable_not_for(loop):
    src = f"def f(x: f32[n]) -> f32:\n    s = 0.0\n    {loop}    return 0.0 / s\n"
    err = fault(src, "f", a32(0, 0), cls=arrc.NaNError)
    assert err.operands == {"0.0": 0.0, "s": 0.0}
    assert "for" not in err.operands


def test_operand_from_an_inlined_call_is_the_call_and_a_variable_its_name():
    err = fault(NANMEAN, "nanmean", a32(NAN, NAN), cls=arrc.NaNError)
    assert err.operands == {"nansum(x)": 0.0, "count": 0.0}


def test_runtime_reads_call_chains_with_the_compilers_helper():
    assert not hasattr(runtime_guards, "_flatten_callsites")     # compiler/locations.py `call_frames` does it


# ---- blame follows the values that reach the bad result ---------------------------------------------------------
NANMEAN = """\
def nansum(x: f32[n]) -> f32:
    mask = ~isnan(x)
    return sum(where(mask, x, 0))

def nanmean(x: f32[n]) -> f32:
    valid = ~isnan(x)
    count = sum(where(valid, 1.0, 0.0))
    return nansum(x) / count
"""


def test_readme_nanmean_of_all_nan_blames_the_division_not_the_masked_argument():
    err = fault(NANMEAN, "nanmean", a32(NAN, NAN, NAN), cls=arrc.NaNError)
    assert str(err) == """\
error[R0001]: NaN produced at run time
 --> r.arr:8:12
  |
8 |     return nansum(x) / count
  |            ^^^^^^^^^^^^^^^^^ this division produced NaN
  |
  = note: operands: nansum(x) = 0.0, count = 0.0
  = note: in nanmean
"""
    assert err.index == () and err.iteration is None


def test_readme_nanmean_values_match_numpy():
    x = a32(1, NAN, 3)
    assert run(NANMEAN, "nanmean", x) == pytest.approx(np.nanmean(x))
    with np.errstate(invalid="ignore"):
        assert np.isnan(run(NANMEAN, "nanmean", a32(NAN, NAN), guards=None))


def test_argument_nan_that_reaches_the_result_is_still_the_argument():
    src = "def f(x: f32[n]) -> f32:\n    return sum(x) + sum(where(isnan(x), 0.0, x))\n"
    err = fault(src, "f", a32(1, NAN), cls=arrc.NaNError)
    assert err.message == "NaN in argument `x`" and err.index == (1,)


def test_masked_nan_before_an_unmasked_one_in_the_same_result():
    # Static flow would blame the argument (first in execution order, and it flows into the result).
    src = ("def f(x: f32[n]) -> f32:\n    y = where(isnan(x), 0.0, x)\n"
           "    return sum(y) / sum(y * 0.0)\n")
    err = fault(src, "f", a32(NAN, 0), cls=arrc.NaNError)
    assert err.span.line == 3 and err.operands == {"sum(y)": 0.0, "sum(y * 0.0)": 0.0}


@pytest.mark.parametrize("moved", ["reshape(y, (2, 2))[0]", "concat((y, y))[3:5]", "transpose(reshape(y, (2, 2)))[0]",
                                   "broadcast_to(sum(y), (2,))"])
def test_flow_follows_elements_through_data_movement(moved):
    # x's NaNs are masked; the division's NaN (0 / 0) moves through `moved` into the result.
    src = (f"def f(x: f32[4]) -> f32[2]:\n    y = where(isnan(x), 0.0, x) / where(isnan(x), 0.0, x)\n"
           f"    return {moved}\n")
    err = fault(src, "f", a32(NAN, 1, NAN, 1), cls=arrc.NaNError)
    assert err.span.line == 2 and err.span.col == 9, str(err)
    assert err.operands == {"where(isnan(x), 0.0, x)": 0.0} and err.index == (0,)


def test_blamed_at_the_element_that_reached_the_result():
    # a / b is NaN at [0] and [2]; the `where` drops [0]: the report names [2] and the operands there.
    src = "def f(a: f32[n], b: f32[n]) -> f32[n]:\n    q = a / b\n    return where(arange(n) != 0, q * 2.0, 1.0)\n"
    err = fault(src, "f", a32(0, 1, 0, 2), a32(0, 1, 0, 1), cls=arrc.NaNError)
    assert err.span.line == 2 and err.index == (2,) and err.operands == {"a": 0.0, "b": 0.0}


def test_where_choosing_an_infinite_literal_is_blamed_at_the_element_it_chose():
    # The literal `-inf` is a whole-array constant; its first element is not the one returned.
    src = "def f(x: f32[n]) -> f32[n]:\n    return where(x > 0.0, x, -inf)\n"
    err = fault(src, "f", a32(1, 0, 2), cls=arrc.InfError)
    assert err.index == (1,)
    assert str(err) == """\
error[R0002]: infinity produced at run time
 --> r.arr:2:12
  |
2 |     return where(x > 0.0, x, -inf)
  |            ^^^^^^^^^^^^^^^^^^^^^^^ this `where` produced -inf at index [1]
  |
  = note: operands at [1]: x = 0.0, -inf = -inf
  = note: in f
  = help: if this infinity is intended (`log(0.0)` is `-inf`), leave `inf` out of the guards: \
`--guards nan,bounds,div0` (`guards="nan,bounds,div0"`; in the REPL `:guards nan,bounds,div0`)
"""


def test_where_masking_log_of_zero_blames_what_it_chose():
    src = "def f(x: f32[n]) -> f32[n]:\n    return where(x > 0.0, log(x), -inf)\n"
    err = fault(src, "f", a32(1, 0, 2), cls=arrc.InfError)
    assert err.index == (1,) and err.span.col == 12      # the `where`, which chose `-inf` over log(0.0)


def test_intended_infinity_returned_without_the_inf_guard():
    src = "def f(x: f32[n]) -> f32[n]:\n    return where(x > 0.0, log(x), -inf)\n"
    x = a32(1, 0, 2)
    with np.errstate(divide="ignore"):
        expect = np.where(x > 0, np.log(x), -np.inf)
    np.testing.assert_array_equal(run(src, "f", x, guards="nan,bounds,div0"), expect)


def test_overflow_gets_no_intended_infinity_help():
    err = fault("def f(x: f32[n]) -> f32[n]:\n    return exp(x)\n", "f", a32(1, 100), cls=arrc.InfError)
    assert err.index == (1,) and "help" not in str(err)


def test_log_of_zero_in_a_matrix_names_its_element():
    x = np.array([[1, 2, 3], [4, 0, 5]], F32)
    err = fault("def f(x: f32[2, 3]) -> f32[2, 3]:\n    return log(x)\n", "f", x, cls=arrc.InfError)
    assert err.index == (1, 1) and err.operands == {"x": 0.0} and "leave `inf` out" in str(err)


def test_nan_masked_inside_a_loop_is_not_blamed():
    # The loop's result is finite: the division after it made the NaN (0 / 0).
    src = ("def f(x: f32[n]) -> f32:\n    s = 0.0\n    for i in range(n):\n"
           "        s = s + where(isnan(x[i]), 0.0, x[i])\n    return s / s\n")
    err = fault(src, "f", a32(NAN, 0), cls=arrc.NaNError)
    assert err.span.line == 5 and err.operands == {"s": 0.0}


def test_nan_out_of_a_loop_falls_back_to_static_flow():
    # Out of a loop the origin of a non-finite element is not traced (docs/guards.md, Limits): the static
    # rule blames the first operation that flows into the result, here the argument the `where` masks,
    # although the NaN returned is the loop's 0 / 0.
    src = ("def f(x: f32[n]) -> f32:\n    y = where(isnan(x), 0.0, x)\n    s = 0.0\n    for i in range(n):\n"
           "        s = s + y[i] / y[i]\n    return s\n")
    err = fault(src, "f", a32(NAN, 0), cls=arrc.NaNError)
    assert err.message == "NaN in argument `x`"


# ---- integer division by zero: reported where it reaches a result ----------------------------------------------
X, Y = i32s(7, 8, 9), i32s(1, 0, 2)
HEAD = "def f(x: i32[n], y: i32[n]) -> i32[n]:\n    return "


def np_mod(x, y):
    return np.where(y == 0, 0, np.mod(x, np.where(y == 0, 1, y)))


def np_floordiv(x, y):
    return np.where(y == 0, 0, np.floor_divide(x, np.where(y == 0, 1, y)))


@pytest.mark.parametrize("expr, expect", [
    ("where(y != 0, x % y, 0)", np.where(Y != 0, np_mod(X, Y), 0)),
    ("where(y != 0, x // y, 0)", np.where(Y != 0, np_floordiv(X, Y), 0)),
    ("where(y == 0, 0, x % y)", np.where(Y == 0, 0, np_mod(X, Y))),
    ("where(y != 0, (x % y) * 2, 0)", np.where(Y != 0, np_mod(X, Y) * 2, 0)),
    ("where(y != 0, where(x > 7, x // y, 1), 0)", np.where(Y != 0, np.where(X > 7, np_floordiv(X, Y), 1), 0)),
    # (9 operations between: `_live` stopped at 8 and reported it)
    ("where(y != 0, x // y" + " + 1" * 12 + ", 0)", np.where(Y != 0, np_floordiv(X, Y) + 12, 0)),
    ("where(y != 0, (x % y) * (x % y + 1), 0)", np.where(Y != 0, np_mod(X, Y) * (np_mod(X, Y) + 1), 0)),
])
def test_division_by_zero_masked_by_where_is_not_reported(expr, expect):
    np.testing.assert_array_equal(run(HEAD + expr + "\n", "f", X, Y), expect)


@pytest.mark.parametrize("expr", ["x % y", "where(y != 1, x % y, 0)", "where(y != 0, x % y, x % y)",
                                  "where(y != 0, x, 0) + x % y"])
def test_division_by_zero_that_reaches_the_result_is_reported(expr):
    err = fault(HEAD + expr + "\n", "f", X, Y, cls=arrc.DivisionByZero)
    assert err.index == (1,) and err.operands == {"dividend": 8, "divisor": 0}


def test_a_division_whose_quotient_reaches_nothing_is_not_reported():
    """As a NaN that reaches no result: `z` is never used (it was reported: no use read as "may reach")."""
    assert run("def f(x: i32[n], y: i32[n]) -> i32[n]:\n    z = x // y\n    return x + 1\n", "f", X, Y).tolist() \
        == (X + 1).tolist()


def test_randint_over_a_dtype_s_whole_range_is_no_division_by_zero():
    """Its span wraps to 0 there, and its remainders are XLA's (x % 0 == x) by design: not the program's
    division (it was R0004 at the `randint` call). Bit for bit with jax.random."""
    src = ("def f(s: i32) -> (i32[3], u32[4]):\n    return randint(key(s), (3,), -2147483648, 2147483648), "
           "randint(key(s), (4,), 0, 4294967296, dtype=u32)\n")
    got = arrc.loads(src, guards="div0").f(0)
    k = jax.random.key(0)
    np.testing.assert_array_equal(got[0], jax.random.randint(k, (3,), -2 ** 31, 2 ** 31, dtype=np.int32))
    np.testing.assert_array_equal(got[1], jax.random.randint(k, (4,), 0, 2 ** 32, dtype=np.uint32))


def test_division_by_zero_masked_by_where_then_summed():
    src = "def f(x: i32[n], y: i32[n]) -> i32:\n    r = where(y != 0, x % y, 0)\n    return sum(r)\n"
    assert run(src, "f", X, Y) == int(np.where(Y != 0, np_mod(X, Y), 0).sum())


def test_masked_division_by_zero_in_a_loop():
    src = ("def f(x: i32[n], y: i32[n]) -> i32:\n    s = 0\n    for i in range(n):\n"
           "        s += where(y[i] != 0, x[i] % y[i], 0)\n    return s\n")
    assert run(src, "f", X, Y) == int(np.where(Y != 0, np_mod(X, Y), 0).sum())
    unmasked = src.replace("where(y[i] != 0, x[i] % y[i], 0)", "x[i] % y[i]")
    err = fault(unmasked, "f", X, Y, cls=arrc.DivisionByZero)
    assert err.iteration == (1,) and err.operands == {"dividend": 8, "divisor": 0}


def test_masked_division_by_a_zero_scalar():
    src = "def f(x: i32[n], y: i32) -> i32[n]:\n    return where(y != 0, x % y, 0)\n"
    np.testing.assert_array_equal(run(src, "f", X, I32(0)), [0, 0, 0])
    err = fault(src.replace("where(y != 0, x % y, 0)", "x % y"), "f", X, I32(0), cls=arrc.DivisionByZero)
    assert err.index == (0,)


def test_a_division_whose_remainder_picks_a_masked_branch_is_not_reported(tmp_path, capsys):
    """The check made for `a // b` read the inner select's condition `a % b > 0`; the remainder then counted
    that read as a use reaching a result and was reported, although the outer `where` drops it. JAX's own
    `jnp.where(b != 0, a // b, 0)` has that form (its floor_divide selects on `a % b != 0`)."""
    src = "def f(a: i32[n], b: i32[n]) -> i32[n]:\n    q = a // b\n    return where(b != 0, where(a % b > 0, q, 0), 0)\n"
    np.testing.assert_array_equal(run(src, "f", X, Y), [0, 0, 4])
    path = tmp_path / "w.mlir"
    path.write_text(jax.jit(lambda a, b: jnp.where(b != 0, a // b, 0)).lower(X, Y).as_text())
    from arrc.cli import main as cli
    assert cli(["run", str(path), "--guards", "div0", "--arg", "arg0=[7, 8, 9]", "--arg", "arg1=[1, 0, 2]"]) == 0
    assert capsys.readouterr().out == "[7 0 4]\n"


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.uint64])
def test_a_jax_remainder_by_zero_is_reported(tmp_path, capsys, dtype):
    """`jnp.remainder` divides by `where(b == 0, 1, b)` (so `a % 0` is 0, as NumPy): no StableHLO division
    had a zero divisor and nothing was reported, while JAX's `a // 0` was."""
    path = tmp_path / "r.mlir"
    path.write_text(jax.jit(lambda a, b: a % b).lower(X.astype(dtype), Y.astype(dtype)).as_text())
    from arrc.cli import main as cli
    argv = ["run", str(path), "--guards", "div0", "--arg", "arg0=[7, 8, 9]"]
    assert cli(argv + ["--arg", "arg1=[1, 2, 2]"]) == 0
    assert cli(argv + ["--arg", "arg1=[1, 0, 2]"]) == 3
    err = capsys.readouterr().err
    assert "this division has a zero divisor at index [1]" in err and "`jnp.remainder` gives 0 there" in err


@pytest.mark.parametrize("body, x, iteration", [
    ("x[i] ** 0.5", [0.25, 0.0, 0.25, 0.25], 1), ("asin(x[i])", [0.25, 0.5, 1.0, 0.25], 2),
    ("acos(x[i])", [1.0, 0.5, 0.25, 0.25], 0), ("pow(x[i], 0.5)", [0.25, 0.25, 0.25, 0.0], 3)])
def test_a_derivative_in_an_unrolled_loop_names_the_iteration_when_its_forward_op_is_gone(body, x, iteration):
    """The adjoint of `x ** 0.5` (`0.5 * x ** -0.5`) does not use the forward value, which is erased: the
    report found the iteration through the forward op and lost it (sqrt, whose adjoint uses it, kept it)."""
    src = (f"def loss(x: f32[n]) -> f32:\n    s = f32(0.0)\n    for i in range(n):\n        s = s + {body}\n"
           f"    return s\n\ndef d(x: f32[n]) -> f32[n]:\n    return grad(loss)(x)\n")
    err = fault(src, "d", a32(*x), cls=arrc.InfError)
    assert err.iteration == (iteration,) and f"in loop iteration {iteration}" in str(err)


def test_the_first_fault_in_execution_order_is_reported_before_a_failing_assert():
    """A failed assert was reported whatever the checks had found before it: a NaN of all-ops, an index out of
    range an iteration earlier. The assert has its place among the checks (passes/guards.py) and the first wins."""
    src = ("def f(x: f32[4], idx: i32[4], lim: f32) -> f32:\n    s = 0.0\n    for k in range(4):\n"
           "        s = s + x[idx[k]]\n        assert s < lim, \"s too big\"\n    return s\n")
    x = np.ones(4, np.float32)
    err = fault(src, "f", x, i32s(0, 9, 0, 0), F32(2.5))          # out of range at 1, the assert fails at 2
    assert type(err) is arrc.BoundsError and err.iteration == (1,)
    err = fault(src, "f", x, i32s(0, 1, 2, 9), F32(2.5))          # the assert at 2, out of range at 3
    assert type(err) is arrc.AssertionFailed and err.iteration == (2,)
    nan = "def f(x: f32) -> f32:\n    y = log(x)\n    z = y * 2.0\n    assert z > 0.0, \"z positive\"\n    return z\n"
    assert type(fault(nan, "f", F32(-1.0), guards="all")) is arrc.AssertionFailed     # (results scope: the NaN
    mod = arrc.loads(nan, filename="r.arr", guards="all", guard_scope="all-ops")    # reaches no result)
    with pytest.raises(arrc.NaNError, match="this `log` produced NaN"):
        mod.f(F32(-1.0))


@pytest.mark.parametrize("dropped", ["sum(sqrt(y[0:1] - 5.0))", "sum(sqrt(x - 5.0)) + f32(sum(isnan(y)))",
                                     "sum(sqrt(x - 5.0) + f32(y > 0.0))"])
def test_a_nan_that_a_slice_or_comparison_drops_is_not_blamed(dropped):
    """y's NaN at [1] never reaches the result (a slice, a count, a comparison drops it); the def-use chains
    said it did and blamed it, because only a function with a `where` was traced element by element."""
    src = f"def f(x: f32[2]) -> f32:\n    y = log(x)\n    return {dropped}\n"
    err = fault(src, "f", a32(1, -1), cls=arrc.NaNError)
    assert err.span.line == 3 and "`sqrt`" in str(err) and err.index == (0,), str(err)


@pytest.mark.parametrize("first, kind", [("q = a // b", arrc.DivisionByZero), ("q = i32(x[k])", arrc.BoundsError)])
def test_a_check_before_the_nan_in_execution_order_is_reported_first(first, kind):
    """The division by zero (index out of range) comes before the NaN and reaches the result, but the origin
    build's element trace kept only the NaN's sites and dropped the checks' reports."""
    src = (f"def f(x: f32[n], a: i32[n], b: i32[n], k: i32) -> f32[n]:\n    {first}\n"
           "    y = where(x > 0.0, log(x), -1.0)\n    return sqrt(y) + f32(q)\n")
    err = fault(src, "f", a32(1, 0.5), i32s(1, 2), i32s(1, 0), I32(5), cls=kind)
    assert err.span.line == 2, str(err)
