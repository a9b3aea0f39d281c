"""Control flow end to end: `if/elif/else` (stablehlo.if), `for ... in range(...)` and `while`
(stablehlo.while, carried variables found automatically), compared with plain Python/NumPy; and the
diagnostics E0301 (a variable with different types on two paths) and E0302 (a loop-carried variable
that changes type), whole rendered text for one case each plus code/span checks for variants.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from conftest import assert_close, cached_module, np_dtype

import arrc

SRC = """\
const K: i32 = 3

def absval(x: f32) -> f32:
    if x < 0:
        y = -x
    elif x == 0:
        y = 100.0
    else:
        y = x
    return y

def sign_ret(x: f64) -> f64:
    if x < 0.0:
        return -1.0
    elif x > 0.0:
        return 1.0
    else:
        return 0.0

def pick(x: f32[n], y: f32[n], c: bool) -> f32[n]:
    return x if c else y

def clamp_update(x: f32[n], lo: f32, hi: f32) -> f32[n]:
    z = x
    if lo > hi:
        z = zeros(n)
    return z

def power_iteration(a: f64[n, n], v: f64[n], steps: i32) -> (f64[n], f64):
    for i in range(steps):
        v = a @ v
        v = v / sqrt(sum(v * v))
    return v, sum(v * (a @ v))

def tri(k: i32) -> i32:
    s = 0
    for i in range(k):
        for j in range(i):
            s += j
    return s

def ranged(a: i32, b: i32, c: i32) -> (i32, i32):
    s = 0
    count = 0
    for i in range(a, b, c):
        s = s * 10 + i
        count += 1
    return s, count

def ranged2(x: f32[n], a: i32, b: i32) -> f32:
    s = 0.0
    for i in range(a, b):
        s += x[i]
    return s

def ranged64(k: i64) -> i64:
    s = i64(0)
    for i in range(k):
        s += i * i
    return s

def mixed_bounds(a: i32, b: i64) -> i64:
    s = i64(0)
    for i in range(a, b):
        s += i
    return s

def static_trip(x: f32[n]) -> f32[n]:
    y = zeros(n)
    for i in range(n - 1, -1, -1):
        y[n - 1 - i] = x[i]
    return y

def acc_weak(x: f32[n]) -> f32:
    s = 0
    for i in range(n):
        s += x[i]
    return s

def acc_f64(x: f64[n]) -> f64:
    s = 0.0
    for i in range(n):
        s += x[i] * x[i]
    return s

def collatz(start: i32) -> i32:
    steps = 0
    k = start
    while k != 1:
        if k % 2 == 0:
            k = k // 2
        else:
            k = 3 * k + 1
        steps += 1
    return steps

def halve_until(x: f64, eps: f64) -> (f64, i32):
    it = 0
    while x > eps:
        x = x / 2.0
        it += 1
    return x, it

def branch_in_loop(x: f32[n], k: i32) -> f32[n]:
    y = x
    for i in range(k):
        if i % 2 == 0:
            y = y * 2.0
        else:
            y = y + 1.0
    return y

def loop_in_branch(x: f32[n], c: bool, k: i32) -> f32[n]:
    y = x
    if c:
        for i in range(k):
            y = y + 1.0
    else:
        j = 0
        while j < k:
            y = y - 1.0
            j += 1
    return y

def grid(a: f32[n, m]) -> f32[n, m]:
    b = a
    for i in range(n):
        for j in range(m):
            b[i, j] = a[i, j] * (i + 1) + j
    return b

def newton_sqrt(a: f64[n], iters: i32) -> f64[n]:
    x = a
    for _ in range(iters):
        x = 0.5 * (x + a / x)
    return x

def count_positive_runs(x: f32[n]) -> i32:
    runs = 0
    inside = false
    for i in range(n):
        if x[i] > 0.0:
            if not inside:
                runs += 1
            inside = true
        else:
            inside = false
    return runs

def unchanged_in_loop(x: f32[n], k: i32) -> (f32[n], f32):
    total = 0.0
    for i in range(k):
        total += sum(x)
    return x, total

def const_cond(x: f32[n]) -> f32:
    if K > 2:
        y = x[0] + 1.0
    else:
        y = x[0]
    return y

def shape_cond(x: f32[n]) -> f32:
    if n > 2:
        y = x[2]
    else:
        y = x[0]
    return y

def literal_cond(x: f32) -> f32:
    if true:
        y = x + 1.0
    else:
        y = i32(x)
    return y
"""


@pytest.fixture(scope="module")
def mod():
    return cached_module(SRC, "control.arr")


def text_of(fn, *types: str) -> str:
    return fn.lower(*(arrc.spec(t) for t in types)).as_text()


# ---- if / elif / else -------------------------------------------------------------------------
@pytest.mark.parametrize("x", [-2.5, 0.0, 3.0, -0.0])
def test_if_elif_else(mod, x):
    expected = 100.0 if x == 0 else abs(x)
    assert float(mod.absval(np.float32(x))) == expected


@pytest.mark.parametrize("x", [-2.0, 0.0, 5.5])
def test_return_in_every_branch(mod, x):
    out = mod.sign_ret(np.float64(x))
    assert np.asarray(out).dtype == np.float64
    assert float(out) == float(np.sign(x))


@pytest.mark.parametrize("c", [True, False])
def test_conditional_expression(mod, c):
    x = np.arange(3, dtype=np.float32)
    y = -x - 1
    assert_close(mod.pick(x, y, c), x if c else y)


@pytest.mark.parametrize("lo,hi", [(0.0, 1.0), (2.0, 1.0)])
def test_if_without_else_keeps_value(mod, lo, hi):
    x = np.array([1.0, -2.0, 3.0], np.float32)
    assert_close(mod.clamp_update(x, np.float32(lo), np.float32(hi)), np.zeros(3) if lo > hi else x)


def test_if_lowers_to_stablehlo_if(mod):
    text = text_of(mod.absval, "f32")
    assert "stablehlo.if" in text
    # elif nests a second conditional inside the false branch
    assert text.count("stablehlo.if") >= 2


# ---- for loops -----------------------------------------------------------------------------
@pytest.mark.parametrize("steps", [0, 1, 50, 300])
def test_power_iteration_f64(mod, steps):
    rng = np.random.default_rng(7)
    a = rng.standard_normal((5, 5))
    a = a + a.T
    v0 = np.ones(5)
    v = v0.copy()
    for _ in range(steps):
        v = a @ v
        v = v / np.sqrt(np.sum(v * v))
    lam = np.sum(v * (a @ v))
    got_v, got_lam = mod.power_iteration(a, v0, steps)
    assert np.asarray(got_v).dtype == np.float64
    assert_close(got_v, v, "f64", rtol=1e-11, atol=1e-12)
    assert_close(got_lam, lam, "f64", rtol=1e-11, atol=1e-12)


def test_power_iteration_converges_to_dominant_eigenvalue(mod):
    a = np.diag([1.0, -2.0, 5.0, 0.5]) + 1e-3
    _, lam = mod.power_iteration(a, np.ones(4), 200)
    ev = np.linalg.eigvalsh(a)
    assert abs(float(np.asarray(lam)) - ev[np.argmax(np.abs(ev))]) < 1e-12


def test_for_lowers_to_while_with_runtime_trip_count(mod):
    text = text_of(mod.power_iteration, "f64[4, 4]", "f64[4]", "i32")
    assert "stablehlo.while" in text
    assert "tensor<4xf64>" in text and "f32" not in text


@pytest.mark.parametrize("k", [0, 1, 2, 7])
def test_nested_loops_dependent_bounds(mod, k):
    assert int(mod.tri(k)) == sum(j for i in range(k) for j in range(i))


def test_nested_loops_lower_to_nested_whiles(mod):
    assert text_of(mod.tri, "i32").count("stablehlo.while") == 2


@pytest.mark.parametrize("a,b,c", [(1, 7, 2), (7, 1, -2), (0, 5, 1), (5, 0, 1), (0, 5, -1), (3, 4, 5),
                                   (-3, 3, 2), (10, -10, -7)])
def test_range_three_arguments(mod, a, b, c):
    s, count = mod.ranged(a, b, c)
    expected = 0
    for i in range(a, b, c):
        expected = expected * 10 + i
    assert (int(s), int(count)) == (expected, len(range(a, b, c)))


@pytest.mark.parametrize("a,b", [(1, 3), (0, 6), (4, 2), (5, 5)])
def test_range_two_arguments_runtime(mod, a, b):
    x = np.arange(6, dtype=np.float32) * 1.5
    assert float(mod.ranged2(x, a, b)) == float(np.sum(x[a:b]))


def test_range_i64_counter(mod):
    out = mod.ranged64(np.int64(3000))
    assert np.asarray(out).dtype == np.int64
    assert int(out) == sum(i * i for i in range(3000))


def test_range_mixed_counter_dtypes_promote(mod):
    out = mod.mixed_bounds(np.int32(2), np.int64(5))
    assert np.asarray(out).dtype == np.int64 and int(out) == 2 + 3 + 4


def test_static_trip_count_reverse_range(mod):
    x = np.arange(5, dtype=np.float32) + 1
    assert_close(mod.static_trip(x), x[::-1])


def test_weak_literal_accumulator_adopts_body_dtype(mod):
    x = np.array([0.5, 1.25, 2.0], np.float32)
    out = mod.acc_weak(x)
    assert np.asarray(out).dtype == np.float32 and float(out) == 3.75


def test_f64_accumulator_is_not_truncated(mod):
    x = np.array([1e8, 0.25, 0.25, 1e-3])
    out = np.asarray(mod.acc_f64(x))
    assert out.dtype == np.float64
    assert_close(out, np.sum(x * x), "f64")


@pytest.mark.parametrize("iters", [0, 1, 6, 40])
def test_newton_sqrt_f64(mod, iters):
    a = np.array([2.0, 9.0, 1e6, 0.01])
    x = a.copy()
    for _ in range(iters):
        x = 0.5 * (x + a / x)
    assert_close(mod.newton_sqrt(a, iters), x, "f64")


# ---- while --------------------------------------------------------------------------------
@pytest.mark.parametrize("start", [1, 2, 6, 27, 97])
def test_while_collatz(mod, start):
    k, steps = start, 0
    while k != 1:
        k = k // 2 if k % 2 == 0 else 3 * k + 1
        steps += 1
    assert int(mod.collatz(start)) == steps


@pytest.mark.parametrize("x,eps", [(100.0, 1.0), (0.5, 1.0), (1e10, 1e-10)])
def test_while_f64_state(mod, x, eps):
    it = 0
    v = x
    while v > eps:
        v = v / 2.0
        it += 1
    got, got_it = mod.halve_until(np.float64(x), np.float64(eps))
    assert float(np.asarray(got)) == v and int(got_it) == it


def test_while_lowering(mod):
    text = text_of(mod.collatz, "i32")
    assert "stablehlo.while" in text and "stablehlo.if" in text


# ---- combinations -------------------------------------------------------------------------
@pytest.mark.parametrize("k", [0, 1, 4])
def test_branch_inside_loop(mod, k):
    x = np.array([1.0, -1.0, 0.5], np.float32)
    y = x.copy()
    for i in range(k):
        y = y * 2 if i % 2 == 0 else y + 1
    assert_close(mod.branch_in_loop(x, k), y)


@pytest.mark.parametrize("c", [True, False])
@pytest.mark.parametrize("k", [0, 3])
def test_loop_inside_branch(mod, c, k):
    x = np.array([1.0, 2.0], np.float32)
    assert_close(mod.loop_in_branch(x, c, k), x + k if c else x - k)


def test_loop_inside_branch_lowering(mod):
    text = text_of(mod.loop_in_branch, "f32[2]", "bool", "i32")
    assert text.index("stablehlo.if") < text.index("stablehlo.while")
    assert text.count("stablehlo.while") == 2


def test_nested_loops_with_indexed_updates(mod):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    i, j = np.meshgrid(np.arange(3), np.arange(4), indexing="ij")
    assert_close(mod.grid(a), a * (i + 1) + j)


@pytest.mark.parametrize("x", [[1, 2, -1, 3, 3, 0, 0, 4], [-1, -1, -1, -1, -1, -1, -1, -1],
                               [1, 1, 1, 1, 1, 1, 1, 1], [0, 1, 0, 1, 0, 1, 0, 1]])
def test_bool_state_and_nested_branches_in_loop(mod, x):
    x = np.array(x, np.float32)
    runs, inside = 0, False
    for v in x:
        if v > 0:
            runs += not inside
            inside = True
        else:
            inside = False
    assert int(mod.count_positive_runs(x)) == runs


def test_read_only_variable_in_loop(mod):
    x = np.array([1.0, 2.0], np.float32)
    y, total = mod.unchanged_in_loop(x, 4)
    assert_close(y, x)
    assert float(total) == 12.0


# ---- compile-time conditions ----------------------------------------------------------------
def test_literal_condition_is_static(mod):
    # the untaken branch would make `y` i32: accepted because `true` is known at compile time
    assert float(mod.literal_cond(np.float32(1.5))) == 2.5
    assert "stablehlo.if" not in text_of(mod.literal_cond, "f32")


def test_const_condition_value(mod):
    assert float(mod.const_cond(np.ones(3, np.float32))) == 2.0


def test_const_condition_is_static(mod):
    assert "stablehlo.if" not in text_of(mod.const_cond, "f32[3]")


def test_shape_variable_condition_is_static(mod):
    assert float(mod.shape_cond(np.arange(4, dtype=np.float32))) == 2.0
    assert float(mod.shape_cond(np.arange(2, dtype=np.float32))) == 0.0
    assert "stablehlo.if" not in text_of(mod.shape_cond, "f32[4]")


def test_shape_variable_condition_values(mod):
    assert float(mod.shape_cond(np.arange(4, dtype=np.float32) + 1)) == 3.0
    assert float(mod.shape_cond(np.arange(3, dtype=np.float32) + 1)) == 3.0


def test_conditional_expression_on_a_compile_time_condition_evaluates_only_its_side():
    """As Python: `x[3] if n > 3 else 0.0` with n = 2 never reads x[3] (it was E0208, and a call on the
    dropped side E0212); the dropped side still gives the result its type where it has one (broadcast)."""
    mod = arrc.loads("""\
def g(x: f32[3]) -> f32:
    return sum(x)

def fourth(x: f32[n]) -> f32:
    return x[3] if n > 3 else 0.0

def head_sum(x: f32[n]) -> f32:
    return g(x[:3]) + 1.0 if n >= 3 else -1.0

def filled(x: f32[n]) -> f32[n]:
    return x if n > 2 else 0.0
""", filename="dropped.arr")
    assert float(mod.fourth(np.arange(2, dtype=np.float32))) == 0.0
    assert float(mod.fourth(np.arange(5, dtype=np.float32))) == 3.0
    assert float(mod.head_sum(np.ones(2, np.float32))) == -1.0
    assert float(mod.head_sum(np.ones(4, np.float32))) == 4.0
    assert_close(mod.filled(np.ones(2, np.float32)), [0.0, 0.0])
    assert_close(mod.filled(np.ones(3, np.float32)), [1.0, 1.0, 1.0])

def test_conditional_expression_of_dtypes_or_tuples_on_a_compile_time_condition():
    """Only a select needs array sides: with a compile-time condition the value is the side taken (it was
    E0210 "operand of `if ... else` must be an array or scalar, found dtype f64")."""
    mod = arrc.loads("""\
def total(x: f32[n]) -> f64:
    return sum(x.astype(f64 if n > 2 else f16)).astype(f64)

def ordered(a: f32[n], b: f32) -> (f32, f32):
    lo, hi = (a[0], b) if n > 1 else (b, a[0])
    return lo, hi
""", filename="kinds.arr")
    x2, x3 = np.full(2, 0.1, np.float32), np.full(3, 0.1, np.float32)
    assert float(mod.total(x2)) == float(np.sum(x2.astype(np.float16)))
    assert float(mod.total(x3)) == float(np.sum(x3.astype(np.float64)))
    assert [float(v) for v in mod.ordered(x2, 5.0)] == [np.float32(0.1), 5.0]
    assert [float(v) for v in mod.ordered(x2[:1], 5.0)] == [5.0, np.float32(0.1)]

def test_and_or_whose_compile_time_left_side_decides_do_not_evaluate_the_right():
    """`if n > 2 and x[2] > 0.0:` with n = 2 was E0208 on x[2], which Python never reads."""
    mod = arrc.loads("""\
def guarded(x: f32[n]) -> f32:
    r = 0.0
    if n > 2 and x[2] > 0.0:
        r = x[2]
    return r

def either(x: f32[n]) -> bool:
    return n <= 2 or x[2] > 0.0
""", filename="shortcircuit.arr")
    assert float(mod.guarded(np.ones(2, np.float32))) == 0.0
    assert float(mod.guarded(np.full(3, 2.0, np.float32))) == 2.0
    assert float(mod.guarded(np.full(3, -2.0, np.float32))) == 0.0
    assert bool(mod.either(np.ones(2, np.float32)))
    assert not bool(mod.either(-np.ones(3, np.float32)))

def test_const_condition_branch_types_may_differ():
    src = """\
const K: i32 = 3

def const_cond_shapes(x: f32[n]) -> f32[2]:
    if K > 2:
        y = x[:2]
    else:
        y = x[:1]
    return y
"""
    try:
        mod = arrc.loads(src, filename="const.arr")
    except arrc.CompileError as err:
        pytest.fail(str(err))
    assert_close(mod.const_cond_shapes(np.arange(3, dtype=np.float32)), [0.0, 1.0])


# ---- Python semantics corner cases -------------------------------------------------------------
@pytest.fixture(scope="module")
def corner():
    return cached_module("""\
def shadow(k: i32) -> i32:
    i = 100
    for i in range(k):
        pass
    return i

def fib(k: i32) -> i64:
    a = i64(0)
    b = i64(1)
    for i in range(k):
        a, b = (b, a + b)
    return a
""", "corner.arr")


def test_tuple_assignment_in_loop(corner):
    a, b = 0, 1
    for _ in range(80):
        a, b = b, a + b
    assert int(corner.fib(80)) == a


def test_shadowed_loop_variable_zero_trips(corner):
    assert int(corner.shadow(0)) == 100


def test_shadowed_loop_variable_after_loop(corner):
    assert int(corner.shadow(3)) == 2


def test_unparenthesized_tuple_swap():
    try:
        mod = arrc.loads("def f(a: i32, b: i32) -> (i32, i32):\n    a, b = b, a\n    return a, b\n",
                         filename="swap.arr")
    except arrc.CompileError as err:
        pytest.fail(str(err))
    assert [int(v) for v in mod.f(1, 2)] == [2, 1]


# ---- E0301: a variable with different types on two paths --------------------------------------
def compile_error(src: str, filename: str = "t.arr") -> arrc.CompileError:
    with pytest.raises(arrc.CompileError) as info:
        arrc.loads(src, filename=filename)
    return info.value


def test_e0301_rendered():
    err = compile_error("""\
def f(x: f32, c: bool) -> f32:
    if c:
        y = x
    else:
        y = i32(x)
    return y
""")
    assert str(err) == """\
error[E0301]: `y` has type f32 in one branch and i32 in the other
 --> t.arr:6:12
  |
3 |         y = x
  |         - f32 here
5 |         y = i32(x)
  |         - i32 here
6 |     return y
  |            ^ used here
  |
  = help: give the variable one type on every path, e.g. with `.astype(...)`
"""


def _only(err: arrc.CompileError, code: str):
    codes = [d.code for d in err.diagnostics]
    assert codes[0] == code, str(err)
    return err.diagnostics[0]


def _span(d):
    return (d.span.line, d.span.col, d.span.end_line, d.span.end_col)


def test_e0301_shape_mismatch_spans():
    d = _only(compile_error("""\
def f(x: f32[n], c: bool) -> f32:
    if c:
        y = x
    else:
        y = x[0]
    return sum(y)
"""), "E0301")
    assert "`y`" in d.message and "f32[n]" in d.message and "f32" in d.message
    assert _span(d) == (6, 16, 6, 17)                                  # the use after the `if`
    assert [(lb.span.line, lb.span.col) for lb in d.labels] == [(3, 9), (5, 9)]


def test_e0301_in_elif_chain():
    d = _only(compile_error("""\
def f(x: f32[n], c: bool, e: bool) -> f32:
    if c:
        y = 1.0
    elif e:
        y = x[0]
    else:
        y = sum(x).astype(f64)
    return y
"""), "E0301")
    assert "f64" in d.message and "`y`" in d.message
    assert _span(d)[:2] == (8, 12)
    assert [lb.span.line for lb in d.labels] == [5, 7]


def test_e0301_assignment_before_if():
    d = _only(compile_error("""\
def f(x: f32[n], c: bool) -> f32:
    y = x
    if c:
        y = x.astype(f64)
    return f32(sum(y))
"""), "E0301")
    assert _span(d)[:2] == (5, 20)                                     # the use after the `if`
    assert [(lb.span.line, lb.span.col) for lb in d.labels] == [(4, 9), (2, 5)]   # f64 here, f32[n] here


def test_e0301_only_for_variables_used_after_the_if():
    src = """\
def f(x: f32[n], c: bool) -> f32:
    if c:
        y = x
    else:
        y = x[0]
    return 1.0
"""
    try:
        mod = arrc.loads(src, filename="t.arr")
    except arrc.CompileError as err:
        pytest.fail(str(err))
    assert float(mod.f(np.ones(2, np.float32), True)) == 1.0


def test_assigned_in_one_branch_then_used_is_e0101():
    d = _only(compile_error("""\
def f(x: f32[n], c: bool) -> f32:
    if c:
        y = x
    return sum(y)
"""), "E0101")
    assert _span(d)[:2] == (4, 16)


def test_return_in_one_branch_only_is_an_error():
    d = _only(compile_error("""\
def f(x: f32, c: bool) -> f32:
    if c:
        return x
    return -x
"""), "E0106")
    assert d.span.line == 3



def test_return_in_a_branch_chosen_at_compile_time_ends_the_function():
    """An early `return` under a condition on a shape variable or a const: the statements after the `if`
    are the other specializations' (they were reported unreachable where the branch that returns was chosen)."""
    mod = arrc.loads("""\
const K: i32 = 3

def head(x: f32[n]) -> f32:
    if n > 2:
        return x[2]
    return x[0]

def by_const(x: i32) -> i32:
    if K > 2:
        return x
    return 0

def in_else(x: f32[n]) -> f32:
    if n < 2:
        y = 1.0
    else:
        return x[1]
    return y
""", filename="early.arr")
    assert float(mod.head(np.arange(4, dtype=np.float32))) == 2.0
    assert float(mod.head(np.arange(2, dtype=np.float32))) == 0.0
    assert int(mod.by_const(5)) == 5
    assert float(mod.in_else(np.arange(3, dtype=np.float32))) == 1.0
    assert float(mod.in_else(np.arange(1, dtype=np.float32))) == 1.0


@pytest.mark.parametrize("cond", ["c", "n > 2"])
def test_statement_after_an_if_that_returns_on_every_path_is_unreachable(cond):
    d = _only(compile_error(f"""\
def f(x: f32[n], c: bool) -> f32:
    if {cond}:
        return 1.0
    else:
        return 2.0
    return 3.0
"""), "E0106")
    assert _span(d)[:2] == (6, 5)

@pytest.mark.parametrize("cond,found", [("x", "f32[n]"), ("x > 0.0", "bool[n]"), ("1.5", "f32")])
def test_if_condition_must_be_scalar_bool(cond, found):
    d = _only(compile_error(f"""\
def f(x: f32[n]) -> f32:
    if {cond}:
        y = 1.0
    else:
        y = 2.0
    return y
"""), "E0213")
    assert found in d.message
    assert _span(d) == (2, 8, 2, 8 + len(cond))


# ---- E0302: a loop-carried variable that changes type -----------------------------------------
def test_e0302_rendered():
    err = compile_error("""\
def f(x: f32[n]) -> f32:
    v = x
    for i in range(3):
        v = concat((v, v))
    return sum(v)
""")
    assert str(err) == """\
error[E0302]: loop changes the type of `v` from f32[n] to f32[2 * n]
 --> t.arr:4:9
  |
2 |     v = x
  |     - f32[n] before the loop
4 |         v = concat((v, v))
  |         ^ f32[2 * n] here
  |
  = note: a variable carried around a loop keeps one type (JAX's fori_loop fails at trace time here)
  = help: convert the new value to f32[n], or give `v` its final type before the loop
"""


@pytest.mark.parametrize("body,new", [
    ("s = s / 2", "f32"),                     # i32 / i32 is f32
    ("s = i64(s) + 1", "i64"),
    ("s = zeros(2, dtype=i32)", "i32[2]"),
    ("s = s > 0", "bool"),
])
def test_e0302_dtype_or_shape_change_in_while(body, new):
    d = _only(compile_error(f"""\
def f(k: i32) -> i32:
    s = i32(5)
    while k > 0:
        k -= 1
        {body}
    return i32(sum(s))
"""), "E0302")
    assert "`s`" in d.message and "i32" in d.message and new in d.message
    assert _span(d)[:2] == (5, 9)
    assert (d.labels[0].span.line, d.labels[0].span.col) == (2, 5)


def test_e0302_in_nested_loop():
    d = _only(compile_error("""\
def f(x: f32[n, m]) -> f32:
    acc = x[0, 0]
    for i in range(n):
        for j in range(m):
            acc = acc + x[i, j].astype(f64)
    return f32(acc)
"""), "E0302")
    assert "`acc`" in d.message and "f64" in d.message
    assert _span(d)[:2] == (5, 13)


def test_e0302_parameter_span_is_its_declaration():
    d = _only(compile_error("""\
def f(x: f32[n]) -> f32[n]:
    for i in range(3):
        x = x.astype(f64)
    return x
"""), "E0302")
    assert (d.labels[0].span.line, d.labels[0].span.col) == (1, 7)


# A run-time `if` in the body that gives a carried variable another type on one path left it with no one
# type at the end of the body; lowering the loop then crashed (E0601). It is E0302 at that assignment.
@pytest.mark.parametrize("body,line,col,new", [
    ("for i in range(3):\n        if c:\n            k = 1.5", 4, 13, "f32"),
    ("while k < 3:\n        if c:\n            k = 1.5", 4, 13, "f32"),
    ("for i in range(3):\n        if c:\n            k = k < 2", 4, 13, "bool"),
    ("for i in range(3):\n        if c:\n            k = k + 1\n        else:\n            k = f64(k)", 6, 13, "f64"),
    ("for i in range(3):\n        if c:\n            k = 1\n        elif d:\n            k = 1.5", 6, 13, "f32"),
    ("for i in range(3):\n        if c:\n            if d:\n                k = 1.5", 5, 17, "f32"),
    ("for j in range(2):\n        for i in range(3):\n            if c:\n                k = 1.5", 5, 17, "f32"),
    ("for i in range(3):\n        if c:\n            k, m = 1.5, 2", 4, 13, "f32"),
])
def test_e0302_type_change_on_one_path_of_an_if(body, line, col, new):
    d = _only(compile_error(f"""\
def f(k: i32, c: bool, d: bool) -> i32:
    {body}
    return k
"""), "E0302")
    assert d.message == f"loop changes the type of `k` from i32 to {new}"
    assert _span(d)[:2] == (line, col)
    assert (d.labels[0].span.line, d.labels[0].span.col) == (1, 7)


def test_type_after_an_if_points_at_the_assignment_it_comes_from():
    # `1` adopts the type of `1.5`: the label "f32 here" is on `k = 1.5`, not on `k = 1`
    d = _only(compile_error("""\
def f(k: i32, c: bool) -> i32:
    for i in range(3):
        if c:
            k = 1
        else:
            k = 1.5
    return k
"""), "E0302")
    assert _span(d)[:2] == (6, 13) and d.labels[0].span.line == 1
    d = _only(compile_error("""\
def f(x: f32, c: bool, e: bool) -> f32:
    if c:
        y = 1
    else:
        y = x
    if e:
        y = i32(x)
    return y
"""), "E0301")
    assert [(lb.span.line, lb.message) for lb in d.labels] == [(7, "i32 here"), (5, "f32 here")]


def test_e0302_shape_change_on_one_path_of_an_if():
    d = _only(compile_error("""\
def f(x: f32[n], c: bool) -> f32:
    v = x
    for i in range(3):
        if c:
            v = concat((v, v))
    return sum(v)
"""), "E0302")
    assert "f32[2 * n]" in d.message
    assert _span(d)[:2] == (5, 13)


def test_e0301_weak_carried_variable_with_a_type_per_path():
    # either type alone could follow the weak `k = 0`; both cannot: the loop carries one
    d = _only(compile_error("""\
def f(x: f32, c: bool) -> i32:
    k = 0
    for i in range(3):
        if c:
            k = x
        else:
            k = i64(2)
    return 0
"""), "E0301")
    assert d.message == "`k` has type f32 in one branch and i64 in the other"
    assert _span(d) == (3, 5, 3, 8)
    assert [(lb.span.line, lb.message) for lb in d.labels] == [(5, "f32 here"), (7, "i64 here")]


def test_local_of_the_loop_body_may_have_a_type_per_path():
    # not carried (first assigned in the body): an error only where it is used after the `if`
    mod = cached_module("""\
def f(c: bool) -> i32:
    for i in range(3):
        m = i32(1)
        if c:
            m = 1.5
    return 0
""", "local_per_path.arr")
    assert int(mod.f(True)) == 0
    d = _only(compile_error("""\
def f(c: bool) -> i32:
    s = 0
    for i in range(3):
        m = i32(1)
        if c:
            m = 1.5
        s = s + m
    return s
"""), "E0301")
    assert _span(d)[:2] == (7, 17)


def test_weak_literal_carried_variable_may_widen():
    mod = cached_module("""\
def f(k: i32) -> f32:
    s = 0
    while s < 10:
        s = s * 1.5 + 1
    return s
""", "weak.arr")
    s = 0
    while s < 10:
        s = s * 1.5 + 1
    assert float(mod.f(0)) == pytest.approx(s)


def test_weak_literal_chain_widens():
    mod = cached_module("""\
def f(x: f64, k: i32) -> f64:
    a = 0
    b = 0
    c = 0
    for i in range(k):
        a = b
        b = c
        c = x
    return a
""", "chain.arr")
    assert float(np.asarray(mod.f(np.float64(1.5), 5))) == 1.5
    assert float(np.asarray(mod.f(np.float64(1.5), 2))) == 0.0


def test_long_weak_literal_chain_is_not_truncated():
    mod = cached_module("""\
def f(x: f64, k: i32) -> f64:
    a = 0
    b = 0
    c = 0
    d = 0
    e = 0
    for i in range(k):
        a = b
        b = c
        c = d
        d = e
        e = x
    return a
""", "chain5.arr")
    assert float(np.asarray(mod.f(np.float64(1.5), 10))) == 1.5


def test_return_inside_loop_is_an_error():
    d = _only(compile_error("""\
def f(x: f32[n]) -> f32:
    for i in range(n):
        return x[i]
    return 0.0
"""), "E0106")
    assert d.span.line == 3


@pytest.mark.parametrize("word", ["break", "continue"])
def test_break_and_continue_are_e0106_with_the_loop_that_replaces_them(word):
    """They parse as names: the error was E0101 "undefined name `break`", as if a variable were missing."""
    d = _only(compile_error(f"""\
def f(n: i32) -> i32:
    s = 0
    for i in range(n):
        if i > 3:
            {word}
        s += i
    return s
"""), "E0106")
    assert (d.message, _span(d)) == (f"arr has no `{word}`", (5, 13, 5, 13 + len(word)))
    assert ("while i < n and not done:" if word == "break" else "if not skip:") in d.help

@pytest.mark.parametrize("loop", ["for i in range(k):", "while s < 3.0:"])
def test_error_of_a_specialization_in_a_loop_body_is_reported_once(loop):
    """`s = s + x[3]` with n = 2: an operand's error made a poisoned value, which the loop's lowering could not
    emit (AttributeError: 'Poisoned' object has no attribute 'ir'); and the loop's types-only walk reported it
    a second time, without the specialization's note."""
    mod = arrc.loads(f"""\
def f(x: f32[n], k: i32) -> f32:
    s = 0.0
    {loop}
        s = s + x[3]
    return s
""", filename="body.arr")
    with pytest.raises(arrc.CompileError) as info:
        mod.f(np.arange(2, dtype=np.float32), 1)
    d = _only(info.value, "E0208")
    assert _span(d)[:2] == (4, 19) and d.notes == ["in f with n = 2"]

def test_a_loop_that_runs_no_iteration_at_compile_time_has_no_body():
    """As an `if` on a compile-time condition: `while n > 100:` with n = 4 and `for i in range(n, 0):` never
    run their bodies, so x[200] there is not E0208 (it was); a loop-local stays undefined after it."""
    mod = arrc.loads("""\
def never(x: f32[n]) -> f32:
    s = 0.0
    while n > 100:
        s = x[200]
    for i in range(n, 0):
        s = x[n]
    return s

def counted(x: f32[n]) -> i32:
    k = 0
    while k > 0:
        k -= 1
    return k
""", filename="never.arr")
    assert float(mod.never(np.arange(4, dtype=np.float32))) == 0.0
    assert int(mod.counted(np.zeros(1, np.float32))) == 0
    d = _only(compile_error("def f(x: f32) -> f32:\n    for i in range(0):\n        y = x\n    return y\n"), "E0101")
    assert _span(d)[:2] == (4, 12)

def test_loop_local_used_after_loop_is_e0101():
    d = _only(compile_error("""\
def f(k: i32) -> i32:
    for i in range(k):
        t = i * 2
    return t
"""), "E0101")
    assert d.span.line == 4


def test_range_arguments_must_be_integers():
    d = _only(compile_error("""\
def f(k: f32) -> i32:
    s = 0
    for i in range(k):
        s += 1
    return s
"""), "E0201")
    assert _span(d) == (3, 20, 3, 21)


def test_while_condition_must_be_scalar():
    d = _only(compile_error("""\
def f(x: f32[n]) -> f32:
    while x > 0.0:
        x = x - 1.0
    return 1.0
"""), "E0213")
    assert _span(d) == (2, 11, 2, 18)


# ---- range: exact trip counts for every integer dtype (issue 13) ---------------------------------
# A `for` loop counts its iterations k from 0 to len(range(start, stop, step)), computed once before the
# loop in u64, and the loop variable is start + k * step: nothing wraps near a dtype's limits (the old
# i64 counter ran past 2^63 - 1 forever, and u64 bounds above 2^63 ran 0 times). Python's range is the oracle.
RANGE_DTYPES = ["i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64"]

RANGE_SRC = "\n".join(f"""\
def span_{dt}(a: {dt}, b: {dt}, c: {dt}) -> (i64, {dt}, {dt}):
    count = i64(0)
    first = a
    last = a
    for i in range(a, b, c):
        if count == i64(0):
            first = i
        last = i
        count += i64(1)
    return count, first, last
""" for dt in RANGE_DTYPES) + """
def literal_i64_edge() -> (i64, i64, i64):
    count = i64(0)
    total = i64(0)
    last = i64(0)
    for i in range(9223372036854775800, 9223372036854775807, 5):
        count += i64(1)
        total += i - 9223372036854775000
        last = i
    return count, total, last

def literal_u64_edge() -> (i64, u64):
    count = i64(0)
    last = u64(0)
    for i in range(u64(9223372036854775806), u64(9223372036854775810)):
        count += i64(1)
        last = i
    return count, last

def literal_static(x: f32) -> (i64, i32):
    count = i64(0)
    total = 0
    for i in range(3, 100, 7):
        count += i64(1)
        total += i
    return count, total

def upto_u64(n: u64) -> (i64, u64):
    count = i64(0)
    total = u64(0)
    for i in range(n):
        count += i64(1)
        total += i
    return count, total

def mixed_i8_u8(a: i8, b: u8) -> (i64, i16):
    count = i64(0)
    total = i16(0)
    for i in range(a, b):
        count += i64(1)
        total += i
    return count, total

def printing_range(a: u64, b: u64, c: u64) -> i64:
    count = i64(0)
    for i in range(a, b, c):
        print("at", i)
        count += i64(1)
    return count

def asserting_range(a: i64, b: i64, c: i64, bad: i64) -> i64:
    count = i64(0)
    for i in range(a, b, c):
        assert i != bad, "hit the bad value"
        count += i64(1)
    return count
"""


@pytest.fixture(scope="module")
def ranges():
    return cached_module(RANGE_SRC, "ranges.arr")


def _range_cases(dt: str) -> list:
    info = np.iinfo(np_dtype(dt))
    lo, hi = int(info.min), int(info.max)
    quarter = (hi - lo) // 4 + 1
    cases = [(lo, hi, quarter), (hi - 3, hi, 1), (hi - 3, hi, 2), (lo, hi, hi), (0, hi, hi), (hi - 1, hi, hi),
             (5, 5, 1), (5, 0, 1), (0, 5, 0), (hi, hi, 0), (3, 10, 3)]
    if lo < 0:
        cases += [(hi, lo, -quarter), (lo + 3, lo, -1), (hi, lo, lo), (lo, hi, lo), (0, 5, -1), (-1, lo, lo),
                  (hi, lo, -hi), (lo, hi, 0), (10, -10, -7)]
    if dt in ("i8", "u8"):
        cases += [(lo, hi, 1), (hi, lo, -1) if lo < 0 else (lo, hi, 2)]
    return cases


@pytest.mark.parametrize("dt", RANGE_DTYPES)
def test_range_near_dtype_limits_matches_python(ranges, dt):
    npdt = np_dtype(dt)
    for a, b, c in _range_cases(dt):
        expected = range(a, b, c) if c != 0 else range(0)     # a run-time step of 0: no iterations
        count, first, last = ranges[f"span_{dt}"](npdt.type(a), npdt.type(b), npdt.type(c))
        assert np.asarray(first).dtype == npdt
        got = (int(count), int(first), int(last))
        assert got == (len(expected), expected[0] if expected else a, expected[-1] if expected else a), (a, b, c)


def test_range_of_literals_near_i64_max_ends(ranges):
    expected = range(9223372036854775800, 9223372036854775807, 5)
    count, total, last = ranges.literal_i64_edge()
    assert (int(count), int(total), int(last)) == (
        len(expected), sum(i - 9223372036854775000 for i in expected), expected[-1])


def test_u64_range_across_2_to_the_63(ranges):
    count, last = ranges.literal_u64_edge()
    assert (int(count), int(last)) == (4, 2 ** 63 + 1)
    count, first, last = ranges.span_u64(np.uint64(2 ** 63 - 2), np.uint64(2 ** 63 + 2), np.uint64(1))
    assert (int(count), int(first), int(last)) == (4, 2 ** 63 - 2, 2 ** 63 + 1)


def test_static_range_has_a_constant_trip_count_and_canonical_loop(ranges):
    assert tuple(map(int, ranges.literal_static(np.float32(0)))) == (len(range(3, 100, 7)), sum(range(3, 100, 7)))
    text = text_of(ranges.literal_static, "f32")
    assert f"stablehlo.constant dense<{len(range(3, 100, 7))}> : tensor<ui64>" in text
    cond = text[text.index("cond {"):text.index("} do {")]
    assert cond.count("stablehlo.compare") == 1 and "LT, %iterArg" in cond and "UNSIGNED" in cond


def test_runtime_bounds_divide_once_before_the_loop(ranges):
    text = text_of(ranges.span_i64, "i64", "i64", "i64")
    assert text.count("stablehlo.divide") == 1                  # the trip count, before the loop
    assert text.index("stablehlo.divide") < text.index("stablehlo.while")


@pytest.mark.parametrize("n", [0, 1, 5])
def test_range_one_argument_u64(ranges, n):
    count, total = ranges.upto_u64(np.uint64(n))
    assert (int(count), int(total)) == (n, sum(range(n)))


@pytest.mark.parametrize("a,b", [(-128, 255), (5, 3), (127, 128), (-1, 0)])
def test_range_mixed_i8_u8_promotes_to_i16(ranges, a, b):
    count, total = ranges.mixed_i8_u8(np.int8(a), np.uint8(b))
    assert np.asarray(total).dtype == np.int16
    assert (int(count), int(total)) == (len(range(a, b)), sum(range(a, b)))


@pytest.mark.parametrize("a,b,c", [(2 ** 64 - 4, 2 ** 64 - 1, 1), (2 ** 63 - 2, 2 ** 63 + 2, 1),
                                   (0, 2 ** 64 - 1, 2 ** 62), (7, 7, 1), (0, 5, 0)])
def test_print_inside_extreme_range(ranges, capsys, a, b, c):
    expected = range(a, b, c) if c else range(0)
    capsys.readouterr()
    count = ranges.printing_range(np.uint64(a), np.uint64(b), np.uint64(c))
    assert capsys.readouterr().out.splitlines() == [f"at {i}" for i in expected]
    assert int(count) == len(expected)


def test_assert_in_extreme_range_reports_the_iteration(ranges):
    top = 2 ** 63 - 1
    start, step = -(2 ** 63), 2 ** 62
    with pytest.raises(arrc.AssertionFailed) as info:
        ranges.asserting_range(np.int64(start), np.int64(top), np.int64(step), np.int64(start + 2 * step))
    assert info.value.iteration == (2,)
    assert int(ranges.asserting_range(np.int64(top), np.int64(-top), np.int64(-(2 ** 62)), np.int64(0))) == \
        len(range(top, -top, -(2 ** 62)))


def test_range_literal_out_of_range_for_the_bounds_dtype_is_e0211():
    d = _only(compile_error("""\
def f(a: u8) -> i32:
    s = 0
    for i in range(a, 300):
        s += 1
    return s
"""), "E0211")
    assert _span(d) == (3, 23, 3, 26)


def test_range_of_signed_and_u64_bounds_is_e0201():
    _only(compile_error("""\
def f(a: i64, b: u64) -> i32:
    s = 0
    for i in range(a, b):
        s += 1
    return s
"""), "E0201")


@pytest.mark.parametrize("src, line", [
    ("def f(n: i32) -> i64:\n    s = 3000000000\n    for i in range(n):\n        s = s + 1\n    return s\n", 2),
    ("def f(n: i32, x: i32) -> i32:\n    s = 2**40 * 3\n    for i in range(n):\n        s = s + x\n    return s\n", 2),
    ("def f(x: i64) -> i64:\n    s = 2**31\n    while s < 0:\n        s = s + 1\n    return s + x\n", 2),
    ("def f(n: i32) -> i32:\n    s = 0\n    for i in range(n):\n        s = 3000000000\n    return s\n", 4),
    ("def f(c: bool) -> i64:\n    s = 3000000000\n    if c:\n        s = 1\n    return s\n", 2),
    ("def f(c: bool) -> i64:\n    if c:\n        s = 1\n    else:\n        s = 2**40 - 1\n    return s\n", 5),
])
def test_an_integer_literal_past_i32_carried_by_a_loop_or_an_if_is_e0211(src, line):
    """A literal that becomes a loop's or a run-time `if`'s variable takes its dtype there (i32 for a literal
    alone), as `return 3000000000` as i32 does (E0211): it wrapped silently (3000000000 after `s = s + 1` twice
    returned -1294967294 as i64; `while s < 0` ran 2**31 times)."""
    d = _only(compile_error(src), "E0211")
    assert d.span.line == line and "out of range for i32" in d.message


def test_an_integer_literal_carried_in_the_dtype_it_takes_is_exact():
    mod = arrc.loads("def f(n: i32, x: i64, c: bool) -> (i64, i64):\n    s = 3000000000\n    t = 2**40 * 3\n"
                     "    for i in range(n):\n        s = s + x\n    if c:\n        t = x\n    return s, t\n")
    assert [int(v) for v in mod.f(np.int32(2), np.int64(1), np.bool_(False))] == [3000000002, 2**40 * 3]


def test_a_dropped_side_that_only_warns_still_broadcasts_the_conditional_expression():
    """`(2 if n != 3 else k >= t)` with `t: bf16[1]`: the dropped side warns (W0001, i32 with bf16) and was then
    taken for one with no type, so the result was the scalar 2 where it is bf16[1] (found by the differential
    fuzz, seed 246: E0301 against the other branch's bf16[1])."""
    mod = arrc.loads("def f(x: f32[n], k: i32, t: bf16[1]) -> bf16[1]:\n"
                     "    return (2 if n != 3 else k >= t).astype(bf16)\n")
    got = mod.f(np.zeros(5, np.float32), np.int32(4), np.ones(1, ml_dtypes.bfloat16))
    assert got.shape == (1,) and float(got[0]) == 2.0
