"""Run-time effects: `print` prints at run time on every call, in program order (inside loops, branches and
called functions), never at compile time; `assert` is checked on every call and fails with
`arrc.AssertionFailed` (message, span, failing index, loop iteration); prints after a failing assert are
suppressed; `arrc run` exits 3 with the rendered report.
"""
from __future__ import annotations

import numpy as np
import pytest
from conftest import cached_module

import arrc
from arrc.cli import main as cli_main

SRC = """\
def helper(x: f32) -> f32:
    print("helper", x)
    return x * 2.0

def trace(x: f32[n], k: i32) -> f32:
    print("start", x, k)
    s = 0.0
    for i in range(k):
        if i % 2 == 0:
            print("even", i)
        else:
            print("odd", i, x[i])
        s += x[i]
    y = helper(s)
    print("end", y)
    return y

def nested(k: i32) -> i32:
    c = 0
    for i in range(k):
        for j in range(i):
            print(i, j)
            c += 1
    return c

def countdown(k: i32) -> i32:
    while k > 0:
        print("k =", k)
        k -= 1
    print("liftoff")
    return k

def ticks(k: i32) -> i32:
    for i in range(k):
        print("tick", i)
    return k

def branch(c: bool) -> i32:
    if c:
        print("yes")
        r = 1
    else:
        print("no")
        r = 0
    print("after")
    return r

def values(a: f64, b: i64, c: bool, d: i32[3], e: bool[2]) -> i32:
    print("f64", a, "i64", b, "bool", c)
    print(d)
    print(e)
    return 0

def unused_result(x: f32) -> f32:
    ignored = helper(x)
    print("still here")
    return x

def quiet(x: f32[n]) -> f32[n]:
    return x + 1.0

def guarded(x: f32[n]) -> f32:
    print("before")
    assert all(x >= 0.0), "x must be non-negative"
    print("after")
    return sum(sqrt(x))

def elementwise(x: f32[n, m]) -> f32:
    assert x < 10.0, "too big"
    return sum(x)

def in_loop(x: f32[n, m], k: i32) -> i32:
    count = 0
    for i in range(k):
        for j in range(m):
            print("visit", i, j)
            assert x[i, j] >= 0.0, "negative entry"
            count += 1
    print("done")
    return count

def checked(v: f32) -> f32:
    assert v < 3.0, "value too large"
    return v

def calls_in_loop(x: f32[n]) -> f32:
    s = 0.0
    for i in range(n):
        print("step", i)
        s += checked(x[i])
    return s

def two_asserts(x: f64[n]) -> f64:
    assert x > 0.0, "first"
    assert x < 10.0, "second"
    return sum(x)

def untaken(x: f32, c: bool) -> f32:
    if c:
        assert x > 0.0, "only when c"
    return x

def no_message(x: i32) -> i32:
    assert x != 0
    return x
"""


@pytest.fixture(scope="module")
def mod():
    return cached_module(SRC, "effects.arr")


def out_lines(capsys) -> list[str]:
    return capsys.readouterr().out.splitlines()


# ---- print --------------------------------------------------------------------------------------
def test_print_order_in_loops_branches_and_calls(mod, capsys):
    x = np.array([1.0, 2.0, 3.0], np.float32)
    capsys.readouterr()
    y = mod.trace(x, 3)
    assert float(y) == 12.0
    assert out_lines(capsys) == ["start [1. 2. 3.] 3", "even 0", "odd 1 2.0", "even 2", "helper 6.0", "end 12.0"]


def test_print_runs_on_every_call(mod, capsys):
    x = np.array([1.0, 2.0, 3.0], np.float32)
    capsys.readouterr()
    mod.trace(x, 1)
    mod.trace(x, 0)
    mod.trace(x, 1)
    assert out_lines(capsys) == ["start [1. 2. 3.] 1", "even 0", "helper 1.0", "end 2.0",
                                 "start [1. 2. 3.] 0", "helper 0.0", "end 0.0",
                                 "start [1. 2. 3.] 1", "even 0", "helper 1.0", "end 2.0"]


def test_print_shows_a_shape_as_python_prints_a_tuple_and_a_dtype_by_name(capsys):
    """`print(x.shape)` was E0210 "cannot print (i32, i32)", `print(x.dtype)` "cannot print dtype f32": a
    NumPy user's first debugging lines (a dtype as NumPy prints it, and the REPL shows it)."""
    mod = arrc.loads("def f(x: f32[n, 2]) -> f32:\n    print(x.shape, x[0].shape, x[0, 0].shape, (n, 3), x.dtype)\n"
                     "    return x[0, 0]\n")
    capsys.readouterr()
    mod.f(np.ones((3, 2), np.float32))
    assert out_lines(capsys) == ["(3, 2) (2,) () (3, 3) float32"]


def test_nothing_prints_at_compile_time(capfd):
    mod = arrc.loads(SRC, filename="fresh.arr")        # a fresh module: nothing specialized yet
    mod.trace.lower(arrc.spec("f32[3]"), arrc.spec("i32"))
    mod.guarded.lower(arrc.spec("f32[2]"))
    text = mod.in_loop.lower(arrc.spec("f32[2, 2]"), arrc.spec("i32")).as_text()
    assert "custom_call" in text
    assert capfd.readouterr().out == ""


def test_compile_time_repeated_calls_compile_once_but_print_each_time(mod, capsys):
    capsys.readouterr()
    for k in (3, 0, 2):
        mod.countdown(k)
    assert out_lines(capsys) == ["k = 3", "k = 2", "k = 1", "liftoff", "liftoff", "k = 2", "k = 1", "liftoff"]


@pytest.mark.parametrize("k", [0, 1, 4])
def test_print_in_nested_loops(mod, capsys, k):
    capsys.readouterr()
    c = mod.nested(k)
    expected = [f"{i} {j}" for i in range(k) for j in range(i)]
    assert out_lines(capsys) == expected and int(c) == len(expected)


def test_loop_whose_only_state_is_printing(mod, capsys):
    capsys.readouterr()
    mod.ticks(3)
    assert out_lines(capsys) == ["tick 0", "tick 1", "tick 2"]


@pytest.mark.parametrize("c", [True, False])
def test_print_in_branches(mod, capsys, c):
    capsys.readouterr()
    mod.branch(c)
    assert out_lines(capsys) == ["yes" if c else "no", "after"]


def test_print_formats(mod, capsys):
    capsys.readouterr()
    mod.values(np.float64(0.1), np.int64(2**40), True, np.array([1, -2, 3], np.int32), np.array([True, False]))
    lines = out_lines(capsys)
    assert lines[0] == f"f64 0.1 i64 {2**40} bool true"
    assert lines[1] == "[ 1 -2  3]"
    assert len(lines) == 3 and lines[2] == "[true false]"      # (as the REPL shows them; NumPy's was `[ True False]`)


def test_print_shows_keys_by_their_words(capsys):
    """As the REPL shows them and `jax.random.key_data` gives them, not arr's packed u64 (which looked like
    an integer: `print(key(0))` was `0`)."""
    m = arrc.loads('def f(k: key) -> f32:\n    print("k", k, split(k, 2), key(0))\n    return 1.0\n')
    capsys.readouterr()
    m.f(arrc.key(7))
    import jax
    words = np.asarray(jax.random.key_data(jax.random.split(jax.random.key(7), 2)))
    rows = np.array2string(words, separator=" ", prefix=" " * len("<keys "))
    assert capsys.readouterr().out == f"k <key [0 7]> <keys {rows}> <key [0 0]>\n"


def test_print_in_callee_whose_result_is_unused(mod, capsys):
    capsys.readouterr()
    mod.unused_result(np.float32(1.5))
    assert out_lines(capsys) == ["helper 1.5", "still here"]


def test_function_without_effects_has_no_callbacks(mod, capsys):
    capsys.readouterr()
    mod.quiet(np.ones(2, np.float32))
    assert capsys.readouterr().out == ""
    assert "custom_call" not in mod.quiet.lower(arrc.spec("f32[2]")).as_text()


def test_print_lowers_to_ordered_host_callbacks(mod):
    text = mod.trace.lower(arrc.spec("f32[3]"), arrc.spec("i32")).as_text()
    assert text.count("stablehlo.custom_call") == 5     # start, even, odd, helper, end
    assert "has_side_effect = true" in text


# ---- assert ---------------------------------------------------------------------------------
def test_assert_passes(mod, capsys):
    capsys.readouterr()
    assert float(mod.guarded(np.array([0.0, 4.0], np.float32))) == 2.0
    assert out_lines(capsys) == ["before", "after"]


def test_assert_fails_and_suppresses_later_prints(mod, capsys):
    capsys.readouterr()
    with pytest.raises(arrc.AssertionFailed) as info:
        mod.guarded(np.array([1.0, -4.0], np.float32))
    assert out_lines(capsys) == ["before"]
    err = info.value
    assert isinstance(err, AssertionError) and isinstance(err, arrc.GuardError)
    assert err.code == "R0005"
    assert (err.span.line, err.span.col) == (64, 5)
    assert "x must be non-negative" in str(err)


def test_assert_checked_on_every_call(mod, capsys):
    for x, ok in [([1.0], True), ([-1.0], False), ([2.0], True), ([-2.0], False)]:
        if ok:
            mod.guarded(np.array(x, np.float32))
        else:
            with pytest.raises(arrc.AssertionFailed):
                mod.guarded(np.array(x, np.float32))
    assert out_lines(capsys) == ["before", "after", "before", "before", "after", "before"]


def test_assert_rendered_with_failing_index(mod):
    x = np.zeros((3, 4), np.float32)
    x[2, 1] = 50.0
    x[2, 3] = 60.0
    with pytest.raises(arrc.AssertionFailed) as info:
        mod.elementwise(x)
    err = info.value
    assert err.index == (2, 1)                          # the first failing element in row-major order
    assert err.iteration is None
    assert str(err) == """\
error[R0005]: assertion failed: too big
  --> effects.arr:69:5
   |
69 |     assert x < 10.0, "too big"
   |     ^^^^^^^^^^^^^^^^^^^^^^^^^^ this condition is false at index [2, 1]
   |
   = note: in elementwise
"""


def test_assert_in_nested_loops_reports_iteration(mod, capsys):
    x = np.ones((3, 2), np.float32)
    x[1, 0] = -1.0
    x[2, 1] = -1.0
    capsys.readouterr()
    with pytest.raises(arrc.AssertionFailed) as info:
        mod.in_loop(x, 3)
    err = info.value
    assert err.iteration == (1, 0)                      # the first failure wins
    assert err.index == ()
    assert "negative entry" in str(err) and "in loop iteration 1, 0" in str(err)
    assert out_lines(capsys) == ["visit 0 0", "visit 0 1", "visit 1 0"]
    assert int(mod.in_loop(x, 1)) == 2                  # the failing rows are never visited


def test_assert_in_callee_inside_loop(mod, capsys):
    capsys.readouterr()
    with pytest.raises(arrc.AssertionFailed) as info:
        mod.calls_in_loop(np.array([1.0, 2.0, 5.0, 4.0], np.float32))
    assert out_lines(capsys) == ["step 0", "step 1", "step 2"]
    err = info.value
    assert err.iteration == (2,)
    assert err.span.line == 83 and "value too large" in str(err)


@pytest.fixture(scope="module")
def loops():
    return cached_module("""\
def rows(x: f32[n, m]) -> f32:
    for i in range(n):
        assert x[i, :] >= 0.0, "row has a negative entry"
    return sum(x)

def scan(x: f32[n]) -> i32:
    k = 0
    while k < n:
        assert x[k] < 5.0, "big"
        k += 1
    return k
""", "loops.arr")


def test_array_assert_in_loop_has_index_and_iteration(loops):
    x = np.ones((3, 4), np.float32)
    x[2, 3] = -1.0
    x[2, 1] = -1.0
    with pytest.raises(arrc.AssertionFailed) as info:
        loops.rows(x)
    assert info.value.index == (1,) and info.value.iteration == (2,)
    assert "this condition is false at index [1]" in str(info.value)
    assert "in loop iteration 2" in str(info.value)


def test_assert_in_while_loop_reports_iteration(loops):
    with pytest.raises(arrc.AssertionFailed) as info:
        loops.scan(np.array([1.0, 2.0, 7.0, 9.0], np.float32))
    assert info.value.iteration == (2,)


def test_first_failing_assert_is_reported(mod):
    with pytest.raises(arrc.AssertionFailed) as info:
        mod.two_asserts(np.array([1.0, 20.0, -1.0]))
    assert "first" in str(info.value) and info.value.index == (2,)
    with pytest.raises(arrc.AssertionFailed) as info:
        mod.two_asserts(np.array([1.0, 20.0, 30.0]))
    assert "second" in str(info.value) and info.value.index == (1,)


@pytest.mark.parametrize("x,c,fails", [(-1.0, False, False), (-1.0, True, True), (1.0, True, False)])
def test_assert_in_untaken_branch_is_not_checked(mod, x, c, fails):
    if fails:
        with pytest.raises(arrc.AssertionFailed, match="only when c"):
            mod.untaken(np.float32(x), c)
    else:
        assert float(mod.untaken(np.float32(x), c)) == x


def test_assert_without_message(mod):
    assert int(mod.no_message(3)) == 3
    with pytest.raises(AssertionError) as info:
        mod.no_message(0)
    assert str(info.value).startswith("error[R0005]: assertion failed\n")


def test_assert_message_must_be_a_string():
    with pytest.raises(arrc.CompileError):
        arrc.loads("def f(x: f32) -> f32:\n    assert x > 0.0, x\n    return x\n", filename="t.arr")


# ---- effects in a while condition -------------------------------------------------------------
@pytest.fixture(scope="module")
def cond_mod():
    return cached_module("""\
def check(k: i32) -> bool:
    print("check", k)
    assert k < 2, "k too big"
    return k < 3

def loop(k: i32) -> i32:
    while check(k):
        k += 1
    return k
""", "cond.arr")


def test_effects_in_while_condition(cond_mod, capsys):
    capsys.readouterr()
    with pytest.raises(arrc.AssertionFailed):
        cond_mod.loop(0)
    assert out_lines(capsys) == ["check 0", "check 1", "check 2"]      # check(2) prints, then its assert fails


# ---- guards re-running a call do not repeat prints ----------------------------------------------
def test_guard_rerun_does_not_repeat_prints(capsys):
    mod = arrc.loads("""\
def f(x: f32[n]) -> f32[n]:
    print("hello")
    for i in range(2):
        print("iter", i)
    return log(x)
""", filename="g.arr", guards="nan")
    capsys.readouterr()
    with pytest.raises(arrc.NaNError):
        mod.f(np.array([1.0, -1.0], np.float32))
    assert out_lines(capsys) == ["hello", "iter 0", "iter 1"]


# ---- CLI ---------------------------------------------------------------------------------------
def test_cli_run_prints_and_exits_3_on_assert(tmp_path, capsys):
    path = tmp_path / "p.arr"
    path.write_text("""\
def inner(v: f32) -> f32:
    assert v < 3.0, "too large"
    return v

def main() -> f32:
    x = [1.0, 2.0, 5.0, 4.0]
    s = 0.0
    for i in range(4):
        print("step", i, s)
        s += inner(x[i])
    return s
""")
    capsys.readouterr()
    assert cli_main(["run", str(path)]) == 3
    captured = capsys.readouterr()
    assert captured.out.splitlines()[:3] == ["step 0 0.0", "step 1 1.0", "step 2 3.0"]
    assert "step 3" not in captured.out
    assert f"error[R0005]: assertion failed: too large\n --> {path}:2:5" in captured.err
    assert "in loop iteration 2" in captured.err


def test_cli_run_prints_then_results(tmp_path, capsys):
    path = tmp_path / "ok.arr"
    path.write_text("""\
def main() -> i32:
    s = 0
    for i in range(3):
        print("i", i)
        s += i
    return s
""")
    capsys.readouterr()
    assert cli_main(["run", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == ["i 0", "i 1", "i 2"]
    assert lines[3:] and lines[-1].strip().endswith("3")


def test_cli_compile_and_check_print_nothing_at_compile_time(tmp_path, capsys):
    path = tmp_path / "c.arr"
    path.write_text('def main() -> i32:\n    print("RUNTIME ONLY")\n    return 1\n')
    capsys.readouterr()
    assert cli_main(["check", str(path)]) == 0
    assert cli_main(["compile", str(path)]) == 0
    out = capsys.readouterr().out
    assert "RUNTIME ONLY" not in out.replace('"RUNTIME ONLY"', "")


def test_a_print_runs_once_when_a_result_is_infinite_under_the_nan_guard(capfd):
    """The results filter of a guarded call sees the -inf and would run the call again: a function with
    effects has had its full check already, and its print must not repeat."""
    mod = arrc.loads('def f(x: f32[2]) -> f32[2]:\n    print("once", x[0])\n    return log(x)\n', guards="nan")
    for _ in range(2):
        np.testing.assert_array_equal(mod.f(np.array([1.0, 0.0], np.float32)), [0.0, -np.inf])
        assert capfd.readouterr().out == "once 1.0\n"


def test_print_with_a_keyword_argument_is_E0103():
    """`print(x, sep="")` was an internal error (E0601: the checker evaluated the keyword as a value)."""
    for call, name in (('print(x, sep="")', "sep"), ('print("x", x, end="", flush=true)', "end")):
        with pytest.raises(arrc.CompileError) as info:
            arrc.loads(f"def main(x: f32) -> f32:\n    {call}\n    return x\n")
        [d] = info.value.diagnostics
        assert (d.code, d.message) == ("E0103", f"`print` takes no keyword arguments, found `{name}=`")


def test_a_string_variable_keeps_one_value_through_loops_and_branches(capfd):
    """A string is known at compile time: a loop or a run-time `if` may assign it only the value it has
    (E0302 / E0301 otherwise, tests/golden/diagnostics); the same text in both branches is one value."""
    mod = arrc.loads('def f(n: i32, c: bool) -> f32:\n    t = "x"\n    for i in range(n):\n        t = "x"\n'
                     '        print(t, i)\n    if c:\n        u = "y"\n    else:\n        u = "y"\n'
                     '    print(t, u)\n    return 1.0\n', filename="s.arr")
    mod.f(2, False)
    assert capfd.readouterr().out == "x 0\nx 1\nx y\n"


def test_print_shows_subnormal_numbers(capsys):
    """A host callback runs inside XLA's execution, where the CPU flushes subnormal floats to zero: NumPy's
    text there showed 3e-39 (f32) and 1e-310 (f64) as 0 (runtime/call.py `_keeping_subnormals`)."""
    m = arrc.loads('def f(x: f64[2], y: f32[2]) -> f32:\n    print(x, y, y[0])\n    return y[1]\n')
    capsys.readouterr()
    m.f(np.array([1e-310, 2.0]), np.array([3e-39, 1e-38], np.float32))
    x, y = np.array([1e-310, 2.0]), np.array([3e-39, 1e-38], np.float32)
    assert capsys.readouterr().out == f"{np.array2string(x)} {np.array2string(y)} {str(np.float32(3e-39))}\n"


IF_EXPRESSION = """\
def chk(x: f32) -> f32:
    assert x > 0.0, "chk failed"
    return sqrt(x)

def g(v: f32) -> f32:
    print("g", v)
    return v

def guarded(x: f32) -> f32:
    return chk(x) if x > 0.0 else 0.0

def one_side(c: bool) -> f32:
    return 1.0 + (g(6.0) if c else g(7.0))

def by_shape(x: f32[n]) -> f32:
    return g(1.0) if n > 2 else g(2.0)

def in_loop(k: i32) -> f32:
    s = 0.0
    for i in range(k):
        s += g(f32(i)) if i % 2 == 0 else 0.5
    return s

def lanes(xs: f32[4]) -> f32[4]:
    return vmap(guarded)(xs)
"""


def test_only_the_side_taken_of_an_if_expression_prints_or_asserts(capsys):
    """`a if c else b` evaluates both sides and selects; where a side prints or asserts, only the side taken
    runs, as Python's does: `chk(x) if x > 0.0 else 0.0` failed chk's assert for x = -1."""
    m = arrc.loads(IF_EXPRESSION, filename="ie.arr")
    capsys.readouterr()
    assert float(m.guarded(np.float32(-1.0))) == 0.0 and float(m.guarded(np.float32(4.0))) == 2.0
    assert float(m.one_side(True)) == 7.0 and float(m.one_side(False)) == 8.0
    assert float(m.by_shape(np.ones(3, np.float32))) == 1.0 and float(m.by_shape(np.ones(2, np.float32))) == 2.0
    assert float(m.in_loop(4)) == 3.0
    assert m.lanes(np.array([-1, 4, 9, -2], np.float32)).tolist() == [0.0, 2.0, 3.0, 0.0]
    assert capsys.readouterr().out == "g 6.0\ng 7.0\ng 1.0\ng 2.0\ng 0.0\ng 2.0\n"
    assert float(arrc.grad(m.guarded)(np.float32(4.0))) == 0.25


def test_an_if_expression_whose_side_prints_is_typed_as_the_select(capsys):
    """A debug print in a side left the sides' types unbroadcast (E0301 for `g(1.0) if c else x`); its type is
    the select's, and a mismatch the select's error."""
    src = 'def g(v: f32) -> f32:\n    print("g", v)\n    return v\n\ndef f(c: bool, x: f32[3]) -> f32[3]:\n' \
          '    return g(1.0) if c else x\n'
    m = arrc.loads(src, filename="t.arr")
    x = np.arange(3, dtype=np.float32)
    capsys.readouterr()
    assert m.f(True, x).tolist() == [1.0, 1.0, 1.0] and m.f(False, x).tolist() == [0.0, 1.0, 2.0]
    assert capsys.readouterr().out == "g 1.0\n"
    with pytest.raises(arrc.CompileError) as info:
        arrc.loads(src.replace("x: f32[3])", "x: f32[3], y: f32[2])").replace("else x", "else y").replace(
            "g(1.0)", "(g(1.0) + x)"), filename="t.arr")
    assert [(d.code, d.message) for d in info.value.diagnostics] == [
        ("E0202", "cannot broadcast f32[3] with f32[2] in `if ... else`")]


def test_an_assert_report_names_the_calls_that_reached_it():
    """As a guard report does: which of the calls failed (`inner` is called twice by `mid`)."""
    m = arrc.loads("def inner(x: f32) -> f32:\n    assert x > 0.0, \"positive\"\n    return x\n\n"
                   "def mid(x: f32) -> f32:\n    return inner(x - 1.0) + inner(x - 3.0)\n\n"
                   "def main(x: f32) -> f32:\n    return mid(x) * 2.0\n", filename="n.arr")
    for x, call in ((2.0, "n.arr:6:29"), (0.5, "n.arr:6:12")):
        with pytest.raises(arrc.AssertionFailed) as info:
            m.main(np.float32(x))
        assert str(info.value).splitlines()[-1] == f"  = note: in inner, called from mid at {call}, " \
                                                   "called from main at n.arr:9:12"


def test_an_integer_literal_past_i32_prints_as_python_prints_it(capfd):
    """`2**40 * 3` is exact until it takes a dtype (docs/language.md); `print` gave it none and showed its i32,
    wrapped: 0 for 2**40 and 2**40 * 3, -2147483648 for 2**31."""
    mod = arrc.loads("def f(x: i64) -> i64:\n    big = 2**40 * 3\n    print(2**40, big, 2**31, -(2**63), 7)\n"
                     "    return x + big\n")
    assert int(mod.f(np.int64(1))) == 2**40 * 3 + 1
    assert capfd.readouterr().out == f"{2**40} {2**40 * 3} {2**31} {-(2**63)} 7\n"
