"""Differential testing: random well-typed arr programs, compiled by arrc, against an independent reference.

The generator (tests/fuzz/gen_programs.py) draws programs over the grammar and the type rules; the reference
(tests/fuzz/reference.py) evaluates the same generator decisions op by op with NumPy, with arr's documented
semantics and a per-element error bound. See docs/robustness.md; the long campaign is `bench/fuzz.py`.

- a fixed-seed slice of generated programs must agree (seeds 0..SLICE-1, in chunks);
- the oracle itself is checked on the spec's examples;
- every compiler bug the fuzzer found is kept as a shrunk regression test, xfail(strict) until fixed:
  when one starts passing, remove its marker and the matching entry of `KNOWN_BUGS` (the generator avoids
  those constructs so that the slice stays green); the fixed ones stay as `test_found_*`.
"""
from __future__ import annotations

import numpy as np
import pytest
from fuzz.gen_programs import Config, Ty, case_from_seed, cases, promote
from fuzz.harness import check_case
from fuzz.reference import RV, cast, int_binary, reduce_op, round_to

import arrc

SLICE = 300
CHUNK = 25


# ---- the fixed-seed slice ------------------------------------------------------------------------------
@pytest.mark.parametrize("first", range(0, SLICE, CHUNK))
def test_generated_programs_agree(first):
    failures, reference_errors = [], []
    compared = total = 0
    for seed in range(first, first + CHUNK):
        case, _ = case_from_seed(seed)
        out = check_case(case)
        compared += out.compared
        total += out.total
        if out.status == "reference_error":
            reference_errors.append(out.report())
        elif out.failed:
            failures.append(out.report())
    assert not reference_errors, "generator/reference errors (not compiler bugs):\n" + "\n".join(reference_errors)
    assert not failures, f"{len(failures)} generated program(s) disagree with the reference " \
                         f"(replay: .venv/bin/python bench/fuzz.py --replay SEED):\n\n" + "\n\n".join(failures)
    # the error bounds must leave a large part of the elements checked (else the oracle would be vacuous)
    assert compared >= 0.25 * total, (compared, total)


GUARD_SEEDS = range(1000, 1012)


def test_guards_keep_results_and_report_faults():
    """guards="all": results bit-identical to the unguarded build, NaN/Inf reported exactly when a result has
    one, div0/bounds only when the reference met such an event (docs/guards.md)."""
    failures = []
    for seed in GUARD_SEEDS:
        case, _ = case_from_seed(seed)
        out = check_case(case, guards=True)
        if out.failed or out.status == "reference_error":
            failures.append(out.report())
    assert not failures, "\n\n".join(failures)


def test_hypothesis_driven_programs_agree():
    hypothesis = pytest.importorskip("hypothesis")
    from hypothesis import HealthCheck, given, settings

    @settings(max_examples=8, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(cases(Config()))
    def prop(case):
        out = check_case(case)
        assert out.status != "reference_error", out.report()
        assert not out.failed, out.report()
    prop()
    assert hypothesis


def test_generator_is_deterministic():
    a, ca = case_from_seed(12345)
    b, cb = case_from_seed(12345)
    assert a.source == b.source and ca == cb
    assert all(np.array_equal(x, y, equal_nan=True) for x, y in zip(a.args, b.args))


# ---- the oracle on the spec's own examples ------------------------------------------------------------------
def test_reference_casts_follow_the_spec():
    x = RV("f32", np.array([254.0, 255.0, 256.0, 257.0, -1.0, np.nan], np.float32))
    assert cast(x, "u8").value.tolist() == [254, 255, 255, 255, 0, 0]
    assert cast(RV("i32", np.array([300, -1, 256], np.int32)), "u8").value.tolist() == [44, 255, 0]
    assert cast(RV("f64", np.array([np.nan, 0.0, -0.5])), "bool").value.tolist() == [True, False, True]
    assert cast(RV("f32", np.array([3e9, -3e9, 2.7, -2.7], np.float32)), "i32").value.tolist() == \
        [2 ** 31 - 1, -2 ** 31, 2, -2]
    # f64 -> f16 rounds once (1 + 2**-11 + 2**-40 is above the halfway point)
    assert float(round_to("f16", np.array(1 + 2 ** -11 + 2 ** -40))) == 1 + 2 ** -10


def test_reference_integer_division_by_zero_is_zero():
    a = RV("i32", np.array([7, -7, 7, -7, -2 ** 31], np.int32))
    b = RV("i32", np.array([0, 2, -2, 0, -1], np.int32))
    assert int_binary("floordiv", [a, b], "i32").value.tolist() == [0, -4, -4, 0, -2 ** 31]
    assert int_binary("mod", [a, b], "i32").value.tolist() == [0, 1, -1, 0, 0]


def test_reference_promotion_defaults():
    def p(*ts):
        return promote(list(ts))[0]
    assert p(Ty("i32", (), False), Ty("f32", (), True)) == "f32"          # i32_array * 2.5
    assert p(Ty("i64", (), False), Ty("f32", (), True)) == "f64"          # i64 * 2.5
    assert p(Ty("u8", (), False), Ty("i32", (), True)) == "u8"            # x_u8 + 1
    assert p(Ty("u64", (), False), Ty("i64", (), False)) == "f64"
    assert p(Ty("bool", (), False), Ty("i32", (), True)) == "i32"
    s = reduce_op("sum", RV("i8", np.array([100, 100, 100], np.int8)), [0], False, "i32")
    assert int(s.value) == 300                                           # small ints accumulate in i32


# ---- shrunk regressions of compiler bugs found by the fuzzer ---------------------------------------------
# `test_found_*`: fixed since; `test_bug_*`: open (xfail strict, listed in KNOWN_BUGS).
def _run(src: str, *args):
    mod = arrc.loads(src, filename="regression.arr")
    out = mod.f(*args)
    return [np.asarray(o) for o in out] if isinstance(out, tuple) else np.asarray(out)


def test_found_atan2_of_integers_is_float():
    """Found by the fuzzer: atan2 of integers was typed as the integer dtype and failed MLIR verification."""
    y = np.array([1, 2, -3], np.int32)
    x = np.array([3, -4, 0], np.int32)
    got = _run("def f(y: i32[n], x: i32[n]) -> f32[n]:\n    return atan2(y, x)\n", y, x)
    np.testing.assert_allclose(got, np.arctan2(y.astype(np.float32), x.astype(np.float32)), rtol=1e-6)


def test_found_call_binds_shape_variables_of_another_name():
    """Found by the fuzzer: a call with dims named differently from the callee's was E0206."""
    src = ("def g(a: f32[n]) -> f32[n]:\n    return a * 2.0\n"
           "def f(x: f32[m]) -> f32[m]:\n    return g(x)\n")
    np.testing.assert_array_equal(_run(src, np.array([1.0, 2.0], np.float32)), [2.0, 4.0])


def test_found_scans_of_an_empty_axis():
    """Found by the fuzzer: cumsum & co. over a zero-length axis crashed (reduce_window of size 0)."""
    src = ("def f(x: f32[n]) -> (f32[0], f32[0]):\n"
           "    e = arange(1, 1, dtype=f32)\n"
           "    return cumsum(e), cummax(e, axis=0)\n")
    a, b = _run(src, np.ones(2, np.float32))
    assert a.shape == (0,) and b.shape == (0,)


def test_found_negative_start_of_a_run_time_slice():
    """Found by the fuzzer: a negative run-time start of `x[i:i + L]` was clamped to 0 instead of counting from the end."""
    x = np.arange(6, dtype=np.float32)
    src = ("def f(x: f32[n], i: i32) -> (f32[2], f32[2], f32):\n"
           "    return x[i:i + 2], dynamic_slice(x, (i,), (2,)), x[i]\n")
    window, builtin, single = _run(src, x, np.int32(-1))
    assert float(single) == 5.0 and builtin.tolist() == [4.0, 5.0]
    assert window.tolist() == builtin.tolist()          # -1 counts from the end, then the window is clamped
    src = ("def f(x: f32[n], i: i32) -> f32[n]:\n"
           "    x[i:i + 2] = -1.0\n"
           "    return x\n")
    updated = _run(src, x, np.int32(-3))
    assert updated.tolist() == [0.0, 1.0, 2.0, -1.0, -1.0, 5.0]


def test_found_float_floor_division_off_by_one():
    """Found by the fuzzer: float `//` floored the divmod quotient (a - fmod(a, b)) / b instead of rounding it."""
    a = np.array([-1.3303894, 1.3303894, -7.0], np.float32)
    b = np.array([0.1, 0.1, 0.5], np.float32)
    q, r = _run("def f(a: f32[n], b: f32[n]) -> (f32[n], f32[n]):\n    return a // b, a % b\n", a, b)
    np.testing.assert_array_equal(q, np.floor_divide(a, b))        # [-14, 13, -14]; arrc: -15 first
    np.testing.assert_allclose(a - q * b, r, atol=1e-6)            # consistent with `%`
    d = np.array([-26.136225, 45.931877], np.float32)
    q1 = _run("def f(d: f32[n]) -> f32[n]:\n    return d // (d / d)\n", d)   # d / d is exactly 1.0
    np.testing.assert_array_equal(q1, np.floor(d))                     # arrc: [-28, 45]


def test_found_guard_origin_build_with_an_empty_array():
    """Found by the fuzzer: the guards' origin build failed MLIR op creation on a zero-size array."""
    src = ("def f(x: f32[n]) -> (f32[0], f32[n]):\n"
           "    e = arange(1, 1, dtype=f32)\n"
           "    return e + 1.0, log(x)\n")
    mod = arrc.loads(src, filename="regression.arr", guards="nan")
    with pytest.raises(arrc.NaNError):
        mod.f(np.array([-1.0, 2.0], np.float32))


def test_found_negative_i8_index_on_a_large_dimension():
    """Found by the fuzzer: an i8 index on a dimension > 127 wrapped the size constant in i8."""
    x = np.arange(200, dtype=np.float32)
    src = "def f(x: f32[200], i: i8, idx: i8[2]) -> (f32, f32[2]):\n    return x[i], x[idx]\n"
    got, gathered = _run(src, x, np.int8(-1), np.array([-1, -2], np.int8))
    assert float(got) == 199.0
    assert gathered.tolist() == [199.0, 198.0]



def test_found_static_int_overflow_is_wrapped_when_promoted():
    """Found by the differential campaign (seed 268 of the slice once the generator made weak stacks, issue 13):
    `-2147483648 - K` with `const K: i32 = 4` is the i32 2147483644 (ints wrap), as it is when K is a run-time
    i32, but promoted to i64 by a u32 operand it became -2147483652 (the compile-time value, unwrapped). Fixed:
    a typed integer folded at compile time is wrapped to its dtype (compiler/builtins.py `arithmetic`)."""
    b = np.array([2, 6, 1], np.uint32)
    runtime = _run("def f(b: u32[n], k: i32) -> i64[n]:\n    t = -2147483648 - k\n    return b * t\n", b, np.int32(4))
    assert runtime.tolist() == [4294967288, 12884901864, 2147483644]
    src = "const K: i32 = 4\ndef f(b: u32[n]) -> i64[n]:\n    t = -2147483648 - K\n    return b * t\n"
    assert _run(src, b).tolist() == runtime.tolist()


def test_found_generator_stack_of_weak_values_is_weak():
    """Generator bug (issue 13): a shape operation of weak values (`stack((w, w))`, `reshape(w, ...)`, `[w, w]`)
    was typed as a strong i32, so `where(c, x_u32, stack((w, w)))` was typed i64 and its declared result type
    failed to compile; arrc and jax.numpy (x64 on) keep the stack weak and give u32."""
    from fuzz.gen_programs import Case, Dim, FnGen, Function, Gen, Lit, Op, Program, RandomChooser, Scope, Var

    gen = Gen(RandomChooser(0))
    fg = FnGen(gen, "f", [], True)
    fg.shape_vars = ["n"]
    scope = Scope(fg, [])
    one, two = Lit(1, "1", Ty("i32", (), True)), Lit(2, "2", Ty("i32", (), True))
    w = Op("add", [one, two], Ty("i32", (), True))                     # `1 + 2`: a weak i32 value
    made = set()
    for seed in range(60):                                             # every shape operation keeps it weak
        gen.ch = RandomChooser(seed)
        e = gen.e_shape(scope, 0, w)
        made.add(e.op)
        assert e.ty.weak, (e.op, e.ty)
    assert {"stack", "reshape", "expand_dims", "broadcast_to"} <= made, sorted(made)
    gen.ch = RandomChooser(1)
    assert gen.e_arrstack(scope, 0, w).ty.weak                         # `[w]`
    gen.ch = RandomChooser(2)
    c, u = Var("c", Ty("bool", (Dim.of(2),))), Var("u", Ty("u32", (Dim.of(2),)))
    lits = gen.weak_stack(u, allow_float=False)                        # `stack((lit, lit))`, made as a partner
    assert lits.ty.weak and lits.ty.shape == (Dim.of(2),)
    # the program of the report: where(c, u32, stack((weak, weak))) is u32, and arrc agrees with the reference
    for stack in (Op("stack", [w, one], Ty("i32", (Dim.of(2),), True), {"fn": "stack", "kw": {}, "ax": 0}), lits):
        dt, weak = promote([u.ty, stack.ty])
        assert (dt, weak) == ("u32", False)
        where = Op("where", [c, u, stack], Ty(dt, (Dim.of(2),)), {"fn": "where"})
        fn = Function("f", [("c", c.ty), ("u", u.ty)], [], [where], [where.ty], [])
        case = Case(Program([fn], "f"), [np.array([True, False]), np.array([7, 8], np.uint32)], {}, "weak stack")
        assert "where(c, u, stack((" in case.source and "-> u32[2]" in case.source, case.source
        out = check_case(case)
        assert out.status == "ok" and not out.failed and out.compared == 2, out.report()
