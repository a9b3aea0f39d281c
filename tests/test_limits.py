"""Limits (docs/limits.md): arrays too large for the machine, nesting depth, program size.

- An array type too large for the machine is E0215 before anything is emitted, compiled or allocated.
- Nesting deeper than the compiler accepts is E0004 (never a RecursionError or a crash), also right at
  the boundary where Python's recursion limit is reached.
- Nothing is super-linear in the program's size: long straight-line functions, many functions, deep
  call chains, nested loops, long lines.
"""
from __future__ import annotations

import contextlib
import io
import os
import resource
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from conftest import call_chain

import arrc
import arrc.cli
from arrc.compiler.check import FunctionWalk
from arrc.compiler.parse import MAX_ELIF_CHAIN, MAX_NESTING
from arrc.compiler.types import MAX_ARRAY_BYTES

TERA = 1_000_000_000_000


def codes(src: str, **kw) -> list[str]:
    try:
        arrc.loads(src, **kw)
    except arrc.CompileError as err:
        return [d.code for d in err.diagnostics]
    return []


def compile_error(fn, *args) -> arrc.CompileError:
    with pytest.raises(arrc.CompileError) as info:
        fn(*args)
    return info.value


@pytest.fixture
def no_xla(monkeypatch):
    """Fail if anything reaches XLA compilation (the E0215 checks must come first)."""
    def boom(*a, **k):
        raise AssertionError("reached XLA compilation/allocation")
    monkeypatch.setattr("arrc.runtime.call.Executable", boom)


def max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ---- E0215: arrays too large for the machine ------------------------------------------------------

def test_limit_is_at_least_a_gigabyte_and_far_below_a_terabyte():
    assert 2 ** 30 <= MAX_ARRAY_BYTES < 4 * TERA


@pytest.mark.parametrize("value", ["abc", "0", "-1", "1e9"])
def test_a_limit_that_is_no_positive_integer_is_a_warning_not_a_traceback(value):
    """`ARRC_MAX_ARRAY_BYTES=abc arrc --version` was a ValueError traceback (the limit is read at import)."""
    done = subprocess.run([sys.executable, "-m", "arrc", "--version"], capture_output=True, text=True,
                          env={**os.environ, "ARRC_MAX_ARRAY_BYTES": value}, timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"arrc: warning: ARRC_MAX_ARRAY_BYTES={value!r} is not a positive number of bytes")


@pytest.mark.parametrize("expr", [
    "sum(zeros(1000000000000))",
    "sum(zeros((100000, 100000, 100000)))",
    "sum(ones(18446744073709551615))",
    "sum(full((1000000, 1000000), 1.0))",
    "sum(eye(10000000))",
    "f32(sum(arange(10000000000)))",
])
def test_construction_too_large_is_E0215_at_check(expr, no_xla):
    rss = max_rss_mb()
    err = compile_error(arrc.loads, f"def f() -> f32:\n    return {expr}\n")
    assert [d.code for d in err.diagnostics] == ["E0215"]
    d = err.diagnostics[0]
    assert d.span.line == 2 and "too large" in d.message and "bytes" in d.message
    assert max_rss_mb() - rss < 200         # nothing of that size was allocated


def test_parameter_type_too_large_is_E0215():
    err = compile_error(arrc.loads, "def f(x: f32[1000000000000]) -> f32:\n    return sum(x)\n")
    [d] = err.diagnostics
    assert d.code == "E0215" and (d.span.line, d.span.col) == (1, 10)


def test_specializing_a_parameter_too_large_is_E0215_before_lowering(no_xla):
    mod = arrc.loads("def f(x: f32[n]) -> f32:\n    return sum(x)\n")
    err = compile_error(mod.f.lower, *mod.f.arg_types_for({"n": TERA}))
    [d] = err.diagnostics
    assert d.code == "E0215" and "4,000,000,000,000 bytes" in d.message
    assert d.span.line == 1


def test_a_result_type_negative_for_the_arguments_is_E0205_before_lowering():
    """`f32[n - 3]` for n = 2 (and a convolution's `n - k + 1` for a kernel larger than its input): an
    MLIRError ("invalid tensor dimension size") from building the type, before."""
    mod = arrc.loads("def f(x: f32[n]) -> f32[n - 3]:\n    return x[3:]\n", filename="neg.arr")
    with pytest.raises(arrc.CompileError) as err:
        mod.f(np.ones(2, np.float32))
    assert str(err.value) == """\
error[E0205]: negative dimension in the result type f32[n - 3]
 --> neg.arr:1:21
  |
1 | def f(x: f32[n]) -> f32[n - 3]:
  |                     ^^^^^^^^^^ f32[n - 3] is [-1] here
  |
  = note: for n = 2
  = help: a size is never negative: call it with larger arguments, or write the result's size so that it cannot be
"""
    assert np.asarray(mod.f(np.ones(3, np.float32))).shape == (0,)


def test_spec_too_large_is_E0215():
    err = compile_error(arrc.spec, f"f32[{TERA}]")
    assert [d.code for d in err.diagnostics] == ["E0215"]


@pytest.mark.parametrize("body", [
    "return sum(reshape(x, (n, 1)) * x)",            # broadcasting
    "return sum(outer(x, x))",
    "return sum(reshape(x, (n, 1)) @ reshape(x, (1, n)))",
    "return sum(einsum(\"i,j->ij\", x, x))",
    "return sum(one_hot(i32(x), 1000000000000))",
    "return sum(tile(x, 1000000000000))",
    "return sum(broadcast_to(x, (1000000, n)))",
    "return sum(zeros((n, n)))",
    "y = where(reshape(x, (n, 1)) > x, 1.0, 0.0)\n    return sum(y)",
])
def test_intermediate_too_large_is_E0215_when_specialized(body, no_xla):
    """Each value is small enough alone; an intermediate of the body is not (n = 10^6: 4 TB)."""
    mod = arrc.loads(f"def f(x: f32[n]) -> f32:\n    {body}\n")
    err = compile_error(mod.f.lower, arrc.spec("f32[1000000]"))
    assert "E0215" in [d.code for d in err.diagnostics]


def test_call_with_small_argument_and_huge_intermediate_raises_compile_error(no_xla):
    mod = arrc.loads("def f(x: f32[n]) -> f32:\n    return sum(reshape(x, (n, 1)) * x)\n")
    with pytest.raises(arrc.CompileError) as info:
        mod.f(np.zeros(10_000_000, np.float32))      # 40 MB argument, 400 TB intermediate
    assert info.value.diagnostics[0].code == "E0215"


def test_cli_compile_with_huge_shape_is_E0215(tmp_path, capsys):
    path = tmp_path / "big.arr"
    path.write_text("def f(x: f32[n]) -> f32[n]:\n    return x * 2.0\n")
    rc = arrc.cli.main(["compile", str(path), "--entry", "f", "--shape", f"n={TERA}"])
    err = capsys.readouterr().err
    assert rc == 1 and "E0215" in err and "Traceback" not in err


def test_zero_size_arrays_are_fine():
    mod = arrc.loads("def f(x: f32[n]) -> (f32, f32[n], f32[0, 3]):\n"
                     "    return sum(x), x * 2.0, zeros((0, 3))\n")
    s, y, z = mod.f(np.zeros(0, np.float32))
    assert float(s) == 0.0 and y.shape == (0,) and z.shape == (0, 3)


def test_rank_8_arrays():
    mod = arrc.loads("def f(x: f32[a, b, c, d, e, g, h, i]) -> f32[i, h, g, e, d, c, b, a]:\n    return x.T\n")
    x = np.arange(2 * 1 * 3 * 1 * 2 * 1 * 1 * 2, dtype=np.float32).reshape(2, 1, 3, 1, 2, 1, 1, 2)
    np.testing.assert_array_equal(np.asarray(mod.f(x)), x.T)


@pytest.mark.parametrize("element", ["1", "1.0", "true"])
def test_an_array_literal_of_rank_65_is_E0215(element):
    """NumPy holds at most 64 dimensions: a float or bool literal of 65 was NumPy's ValueError out of
    `loads` (E0601 in the CLI). 64 works."""
    literal = lambda rank: "[" * rank + element + "]" * rank          # noqa: E731
    with pytest.raises(arrc.CompileError, match=r"E0215.*array literal of rank 65: a literal holds at most 64"):
        arrc.loads(f"def f() -> i32:\n    x = {literal(65)}\n    return 1\n")
    assert arrc.loads(f"def f() -> i32:\n    return sum({literal(64)}).astype(i32)\n").f() == 1


# ---- nesting: E0004, never a crash --------------------------------------------------------------

FN = "def f(x: f32) -> f32:\n    return "
N = 10_000


def test_brackets_nest_up_to_the_documented_depth():
    ok = FN + "(" * MAX_NESTING + "x" + ")" * MAX_NESTING + "\n"
    assert codes(ok) == []
    deep = FN + "(" * (MAX_NESTING + 1) + "x" + ")" * (MAX_NESTING + 1) + "\n"
    err = compile_error(arrc.loads, deep)
    [d] = err.diagnostics
    assert d.code == "E0004" and (d.span.line, d.span.col) == (2, 12 + MAX_NESTING)


@pytest.mark.parametrize("name, src", [
    ("parentheses", FN + "(" * N + "x" + ")" * N + "\n"),
    ("brackets", FN + "sum(" + "[" * N + "x" + "]" * N + ")\n"),
    ("calls", FN + "abs(" * N + "x" + ")" * N + "\n"),
    ("chained +", FN + "+".join(["x"] * N) + "\n"),
    ("chained **", FN + "**".join(["x"] * N) + "\n"),
    ("unary -", FN + "-" * N + "x\n"),
    ("not", "def f(x: bool) -> bool:\n    return " + "not " * N + "x\n"),
    ("and", "def f(x: bool) -> bool:\n    return " + " and ".join(["x"] * N) + "\n"),
    ("conditional", FN + "x if true else " * N + "x\n"),
    ("attributes", FN + "x" + ".T" * N + "\n"),
    ("subscripts", FN + "x" + "[...]" * N + "\n"),
    ("nested blocks", "def f(x: f32) -> f32:\n" + "".join(" " * (i + 4) + "if x > 0.0:\n" for i in range(N))
     + " " * (N + 4) + "x = x + 1.0\n    return x\n"),
])
def test_10_000_deep_is_E0004_in_bounded_time(name, src):
    err = compile_error(arrc.loads, src)
    assert [d.code for d in err.diagnostics] == ["E0004"], name
    assert str(err).startswith("error[E0004]")


def _elif_chain(branches: int, loops: int = 0) -> str:
    head = "".join(" " * (4 + 4 * i) + f"for i{i} in range(2):\n" for i in range(loops))
    ind = " " * (4 + 4 * loops)
    return (f"def f(x: f32) -> f32:\n    y = x\n{head}{ind}if x > 0.0:\n{ind}    y = 1.0\n"
            + "".join(f"{ind}elif x > {i}.0:\n{ind}    y = {i}.0\n" for i in range(branches - 1))
            + "    return y\n")


def test_elif_chain_up_to_the_limit_lowers_even_inside_loops():
    _lower_all(_elif_chain(MAX_ELIF_CHAIN, loops=3))


@pytest.mark.parametrize("branches", [MAX_ELIF_CHAIN + 1, 400, 1600])
def test_long_elif_chain_is_one_E0004_at_its_if(branches):
    """An if/elif chain nests one If per branch: past the limit, one E0004 at the `if` that starts it
    (was E0004 "expression nested too deeply" at an arbitrary `elif`, or a RecursionError, E0601)."""
    err = compile_error(arrc.loads, _elif_chain(branches))
    [d] = err.diagnostics
    assert d.code == "E0004" and (d.span.line, d.span.col) == (3, 5)
    assert f"if/elif chain of {branches} branches" in d.message and "lookup" in d.help


def test_has_effect_statement_walks_a_deep_chain_without_recursion():
    from arrc.compiler import ast
    from arrc.compiler.program import _has_effect_statement
    stmt = ast.Print()
    for _ in range(5000):
        stmt = ast.If(orelse=(stmt,))
    assert _has_effect_statement([stmt])
    assert not _has_effect_statement([ast.If(orelse=(ast.Pass(),))])


def _deepest(make, lo: int = 1, hi: int = 4000) -> int:
    """The largest n for which `arrc.loads(make(n))` succeeds (E0004 above it)."""
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if codes(make(mid)) == []:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _lower_all(src: str):
    mod = arrc.loads(src)
    for name in mod.functions:
        fn = mod[name]
        fn.lower(*fn.arg_types_for({}))


BOUNDARY = {
    "chained +": lambda n: FN + "+".join(["x"] * n) + "\n",
    "conditional": lambda n: "def f(x: f32, c: bool) -> f32:\n    return " + "x if c else " * n + "x\n",
    "nested if": lambda n: "def f(x: f32) -> f32:\n" + "".join(" " * (i + 4) + "if x > 0.0:\n" for i in range(n))
    + " " * (n + 4) + "x = x + 1.0\n    return x\n",
    "nested for": lambda n: "def f(x: f32) -> f32:\n" + "".join(" " * (i + 4) + f"for i{i} in range(1):\n"
                                                                for i in range(n))
    + " " * (n + 4) + "x = x + 1.0\n    return x\n",
    "nested while": lambda n: "def f(x: f32) -> f32:\n" + "".join(" " * (i + 4) + "while x < 0.0:\n" for i in range(n))
    + " " * (n + 4) + "x = x + 1.0\n    return x\n",
}


@pytest.mark.parametrize("construct", [
    "chained +", "conditional", "nested if", "nested for", "nested while",
])
def test_recursion_boundary_is_a_diagnostic(construct):
    """Right at the depth where Python's recursion limit is reached, checking and lowering end in a
    module or E0004, never in another exception."""
    make = BOUNDARY[construct]
    deepest = _deepest(make, hi=1000)
    assert deepest >= 100, f"{construct}: only {deepest} levels accepted"
    # from the deepest program the check accepts down to the deepest one that also lowers
    for n in range(deepest + 1, deepest - 10, -1):
        try:
            _lower_all(make(n))
            if n <= deepest:
                break
        except arrc.CompileError as err:
            assert {d.code for d in err.diagnostics} == {"E0004"}, (n, str(err)[:300])


# ---- size of programs: no super-linear behaviour ---------------------------------------------------

def _straight_line(n: int) -> str:
    return ("def f(x: f32[n]) -> f32[n]:\n    y = x\n" + "".join(f"    y = y * 1.0001 + {i}.0\n" for i in range(n))
            + "    return y\n")


def test_2000_statement_function_runs():
    mod = arrc.loads(_straight_line(2000))
    x = np.zeros(3, np.float32)
    y = x.copy()
    for i in range(2000):
        y = y * np.float32(1.0001) + np.float32(i)
    np.testing.assert_allclose(np.asarray(mod.f(x)), y, rtol=1e-4)


def _squarings(lines: int, result: str = "t") -> str:
    return "def f(x: f32[n]) -> f32:\n    t = n + 1\n" + "    t = t * t\n" * lines + f"    return {result}\n"


def test_repeated_squaring_of_a_shape_is_checked_without_expanding_it():
    """`t = n + 1` then 30 lines of `t = t * t` is (n + 1)**(2**30): its polynomial doubled its degree each
    line (10 lines: 2.8 s; 12: more than a minute). Past MAX_DIM_* it stays whole, still a compile-time
    integer (`ones(t)` is an array), computed when n is known: 1 for n = 0, E0211 where it outgrows every
    dtype, as a product of literals does (5**512 at line 11 for n = 4). (Runs it: a regression hangs.)"""
    mod = arrc.loads(_squarings(30, "sum(ones(t)) + f32(t)"))
    assert float(mod.f(np.zeros(0, np.float32))) == 2.0
    with pytest.raises(arrc.CompileError) as info:
        mod.f(np.zeros(4, np.float32))
    [d] = info.value.diagnostics
    assert (d.code, d.message, d.span.line) == ("E0211", "integer literal too large", 11)
    assert float(arrc.loads(_squarings(3)).f(np.zeros(2, np.float32))) == 3.0 ** 8


def test_nested_quotients_of_a_shape_have_names_of_bounded_length():
    """`t = t // 3 + t // 5` repeated: each opaque `a // b` was named by its whole text, twice the previous
    one's (23 lines: 0.6 GB; 30 would need 70 GB). A long name ends in a digest of its text."""
    src = "def f(x: f32[n]) -> i32:\n    t = n\n" + "    t = t // 3 + t // 5\n" * 30
    mod = arrc.loads(src + "    return t\n")
    t = 10 ** 6
    for _ in range(30):
        t = t // 3 + t // 5
    assert int(mod.f(np.zeros(10 ** 6, np.float32))) == t
    with pytest.raises(arrc.CompileError) as info:
        arrc.loads(src + "    return zeros(t)\n")
    [d] = info.value.diagnostics
    assert d.code == "E0203" and len(d.message) < 400 and " ... " in d.message


def test_call_chain_of_60():
    mod = arrc.loads(call_chain(60))
    np.testing.assert_allclose(np.asarray(mod.f60(np.zeros(2, np.float32))), np.full(2, 2.0 ** 60), rtol=1e-6)


def test_call_chain_of_200_is_checked_in_linear_time():
    arrc.loads(call_chain(200))


def test_call_chain_of_200_lowers():
    mod = arrc.loads(call_chain(200))
    text = mod.f200.lower(arrc.spec("f32[2]")).as_text()
    assert "stablehlo" in text


def _concrete_chain(depth: int, entry_first: bool = False) -> str:
    """f{depth} -> ... -> f0 with concrete types (so the entry is lowered while it is checked)."""
    links = ["def f0(x: f32[2]) -> f32[2]:\n    return x + 1.0\n"]
    links += [f"def f{k}(x: f32[2]) -> f32[2]:\n    return f{k - 1}(x) + 1.0\n" for k in range(1, depth + 1)]
    return "".join(links[::-1] if entry_first else links)


E0004_AT_DEPTH_1001 = """\
error[E0004]: calls nested more than 1000 deep
    --> chain.arr:2002:12
     |
2002 |     return f0(x) + 1.0
     |            ^^^^^ this call
     |
     = help: call fewer functions inside one another
"""


@pytest.fixture
def walks_made(monkeypatch) -> list:
    """Like `walks`, but counts the walks made, not run: a wrapper of `run` would add a Python frame per
    inlined call, which the recursion limit of a 1000-deep chain has no room for."""
    made: list = []
    real_init = FunctionWalk.__init__

    def counting_init(self, program, fn, *args, **kwargs):
        made.append(fn.name)
        real_init(self, program, fn, *args, **kwargs)
    monkeypatch.setattr(FunctionWalk, "__init__", counting_init)
    return made


def test_call_chain_1001_deep_is_E0004_and_walked_once(walks_made):
    """The 1001st nested call is E0004 (it took minutes and gigabytes: every other link of the chain was
    lowered at definition, each inlining the rest). Now the check walks each function once, nothing is
    lowered at definition (the static call depth is past the limit), and `lower` walks the entry and 1000
    inlined calls once. The chain is written entry first: the check's recursion search must not recurse
    once per link either (a RecursionError before)."""
    src = _concrete_chain(1001, entry_first=True)
    mod = arrc.loads(src, filename="chain.arr")
    assert sorted(walks_made) == sorted(f"f{k}" for k in range(1002)) and not mod._program.lowered
    walks_made.clear()
    err = compile_error(mod.f1001.lower, arrc.spec("f32[2]"))
    assert len(walks_made) == 1001
    assert str(err).rstrip() == E0004_AT_DEPTH_1001.rstrip()


def test_call_chain_1000_deep_is_lowered_once_at_definition(walks_made):
    mod = arrc.loads(_concrete_chain(1000))
    assert list(mod._program.lowered) == ["f1000"]
    assert len(walks_made) == 1001 + 1000     # the lowering of f1000 (1000 inlined), the check of the others
    text = mod.f1000.lower(arrc.spec("f32[2]")).as_text(debug_info=False)
    assert len(walks_made) == 2001 and text.count("stablehlo.add") == 1001


def _doubling_chain(depth: int) -> str:
    src = "def f0(x: f32[n]) -> f32[n]:\n    return x + 1.0\n"
    for k in range(1, depth + 1):
        src += f"def f{k}(x: f32[n]) -> f32[n]:\n    return f{k - 1}(x) + f{k - 1}(x)\n"
    return src


@pytest.fixture
def walks(monkeypatch) -> list:
    """The names of the function bodies walked (checked or lowered, inlined calls included), in order."""
    walked: list = []
    real_run = FunctionWalk.run

    def counting_run(self, *args, **kwargs):
        walked.append(self.fn.name)
        if len(walked) > 10_000:        # far past any bound below: stop an exponential walk at once
            pytest.fail(f"{len(walked)} function bodies walked and counting")
        return real_run(self, *args, **kwargs)
    monkeypatch.setattr(FunctionWalk, "run", counting_run)
    return walked


def test_exponential_inlining_is_bounded(walks, monkeypatch):
    """f16 calls f15 twice, f15 calls f14 twice, ...: 2**17 - 1 bodies if every call were inlined.

    The work is counted, not timed: the check walks each of the 17 functions once, and lowering walks the
    entry plus at most `MAX_INLINED_CALLS` inlined bodies, then stops with E0004 (a smaller limit here, so
    that the test is quick; the rule is the same)."""
    mod = arrc.loads(_doubling_chain(16))
    assert sorted(walks) == sorted(f"f{k}" for k in range(17))
    limit = 300
    monkeypatch.setattr("arrc.compiler.lower.MAX_INLINED_CALLS", limit)
    walks.clear()
    err = compile_error(mod.f16.lower, arrc.spec("f32[2]"))
    assert [d.code for d in err.diagnostics] == ["E0004"]
    assert f"more than {limit} calls to inline" in err.diagnostics[0].message
    assert len(walks) == limit + 1, len(walks)          # the entry and `limit` inlined bodies


def test_inlining_below_the_limit_walks_each_call_once(walks):
    mod = arrc.loads(_doubling_chain(6))
    walks.clear()
    assert "stablehlo" in mod.f6.lower(arrc.spec("f32[2]")).as_text()
    assert len(walks) == 2 ** 7 - 1                     # f6 once, f5 twice, ..., f0 64 times


_INTERRUPTED = textwrap.dedent("""
    import signal, arrc
    src = "def f0(x: f32[n]) -> f32[n]:\\n    return x + 1.0\\n"
    for k in range(1, 15):
        src += f"def f{k}(x: f32[n]) -> f32[n]:\\n    return f{k - 1}(x) + f{k - 1}(x)\\n"
    slow = arrc.loads(src)
    other = arrc.loads("def g(x: f32[n]) -> f32[n]:\\n    return x * 2.0\\n")
    def interrupt(*a):
        raise KeyboardInterrupt
    signal.signal(signal.SIGALRM, interrupt)
    for i in range(150):
        signal.setitimer(signal.ITIMER_REAL, 0.01 + 0.0071 * (i % 23))     # Ctrl-C somewhere in a lowering
        try:
            slow.f14.lower(arrc.spec("f32[2]"))
        except KeyboardInterrupt:
            pass
        signal.setitimer(signal.ITIMER_REAL, 0)
        assert "stablehlo" in other.g.lower(arrc.spec(f"f32[{i + 1}]")).as_text()
    print("done")
""")


def test_interrupted_lowering_leaves_no_broken_state():
    proc = subprocess.run([sys.executable, "-c", _INTERRUPTED], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "done" in proc.stdout, (proc.returncode, proc.stderr[-2000:])
    assert "Unbalanced" not in proc.stderr, proc.stderr[-2000:]


# Ctrl-C in a process's FIRST lowering. jaxlib's C++ bindings import a dialect's Python module the first
# time they hand back a value, type or op of that dialect (`list(block.arguments)` imported
# jaxlib.mlir.dialects.builtin), from a nanobind type caster that cannot pass an exception on: a
# KeyboardInterrupt raised in that import's Python code was std::terminate, SIGABRT (issue 12 item 4).
_FIRST_LOWERING = textwrap.dedent("""
    import glob, os, signal, sys, traceback
    import arrc
    RUNS, STEP, ROOT = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
    src = "def f0(x: f32[n]) -> f32[n]:\\n    return x + 1.0\\n"
    for k in range(1, 3):
        src += f"def f{k}(x: f32[n]) -> f32[n]:\\n    return f{k - 1}(x) + f{k - 1}(x)\\n"
    mod = arrc.loads(src)               # checked, nothing lowered: the parameters have a shape variable

    def ctrl_c(*_):
        os.kill(os.getpid(), signal.SIGINT)     # a real SIGINT, handled by Python's own handler

    def interrupted_first_lowerings(run):
        signal.signal(signal.SIGALRM, ctrl_c)
        for attempt in range(400):      # Ctrl-C ever later into the first lowering, until one completes
            try:
                signal.setitimer(signal.ITIMER_REAL, (attempt + (run + 1) / RUNS) * STEP)
                mod.f2.lower(arrc.spec("f32[2]"))
                signal.setitimer(signal.ITIMER_REAL, 0)
                break
            except KeyboardInterrupt:
                signal.setitimer(signal.ITIMER_REAL, 0)
        assert "stablehlo" in mod.f2.lower(arrc.spec("f32[3]")).as_text()

    # 1. Each run is a fresh process (forked before anything was lowered) interrupted in its first lowering.
    codes = []
    for run in range(RUNS):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                interrupted_first_lowerings(run)
            except KeyboardInterrupt:   # a late Ctrl-C, past the lowering: a clean exit too
                code = 130
            except BaseException:
                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        codes.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
    print("EXIT CODES", *codes)

    # 2. Why: from the first lowering on, no lowering imports a module outside the standard library and arrc.
    def lowering():
        frame = sys._getframe(1)
        while frame is not None and not frame.f_code.co_filename.endswith(os.path.join("compiler", "lower.py")):
            frame = frame.f_back
        return frame is not None

    imported = []
    sys.addaudithook(lambda event, args: imported.append(args[0]) if event == "import" and lowering() else None)
    mod.f2.lower(arrc.spec("f32[2]"))
    shapes = {v: 3 for v in "abcdefghijklmnopqrstuvwxyz"}
    for path in sorted(glob.glob(os.path.join(ROOT, "examples", "*.arr"))):
        example = arrc.load(path)       # lowers the functions whose types are concrete
        for name in example.functions:
            example[name].lower(*example[name].arg_types_for(shapes))
    print("IMPORTED", sorted({m for m in imported
                              if m.split(".")[0] not in sys.stdlib_module_names and m.split(".")[0] != "arrc"}))
""")


def test_ctrl_c_in_a_first_lowering_never_aborts():
    """20 fresh processes, each interrupted with SIGINT at 0.5 ms steps into its first lowering until one
    completes (before the fix, 20 of 20 aborted). Exit codes 0 or 130 (a late KeyboardInterrupt) only."""
    root = str(Path(__file__).resolve().parents[1])
    proc = subprocess.Popen([sys.executable, "-c", _FIRST_LOWERING, "20", "0.0005", root], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                            env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    try:
        out, err = proc.communicate(timeout=300)        # a hang guard only: it takes seconds
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)             # the driver and its forked runs
        proc.communicate()
        pytest.fail("the interrupted lowerings hung")
    assert proc.returncode == 0, err[-3000:]
    assert "terminate called" not in err, err[-3000:]
    [codes] = [line.split()[2:] for line in out.splitlines() if line.startswith("EXIT CODES")]
    assert len(codes) == 20 and set(codes) <= {"0", "130"}, (codes, err[-3000:])
    [imported] = [line for line in out.splitlines() if line.startswith("IMPORTED")]
    assert imported == "IMPORTED []", (
        f"lowering imported {imported[9:]}: import it before lowering starts (compiler/emit.py), since the "
        "C++ bindings import it from frames where a KeyboardInterrupt aborts the process")


def test_100_nested_loops():
    src = "def f(x: f32[n]) -> f32[n]:\n"
    for i in range(100):
        src += "    " * (i + 1) + f"for i{i} in range(2 if {i} % 50 == 0 else 1):\n"
    src += "    " * 101 + "x = x + 1.0\n    return x\n"
    mod = arrc.loads(src)
    out = np.asarray(mod.f(np.zeros(3, np.float32)))
    np.testing.assert_array_equal(out, np.full(3, 4.0, np.float32))


def test_grad_of_many_short_loops_reads_the_function_once(monkeypatch):
    """The derivative unrolls short counted loops (compiler/autodiff.py `unroll_counted_loops`): it read the
    function's block again from the top after each loop (800 loops: 13 s, quadratic). Now it reads it
    once, then only the copies of each loop."""
    from arrc.compiler import autodiff
    read = [0]

    class Counted:                  # the function's block, counting the operations read from it
        def __init__(self, block):
            self.block = block

        @property
        def operations(self):
            for op in self.block.operations:
                read[0] += 1
                yield op
    real = autodiff.unroll_counted_loops
    monkeypatch.setattr(autodiff, "unroll_counted_loops", lambda block: real(Counted(block)))
    n = 100
    src = "def h(x: f32[4]) -> f32:\n    y = x\n" + "".join(
        f"    for i{k} in range(4):\n        y = sin(y) * 1.0001 + 1.0\n" for k in range(n)) + "    return sum(y)\n"
    text = arrc.grad(arrc.loads(src).h).lower(arrc.spec("f32[4]")).as_text(debug_info=False)
    assert "stablehlo.while" not in text and text.count("stablehlo.sine") == 4 * n
    assert 0 < read[0] <= 6 * n, read          # (once: 503 operations; read again after each loop: 242,903)


E0004_DERIVATIVE = """\
error[E0004]: more than 300 operations to differentiate
  --> orders.arr:10:5
   |
10 | def h3(x: f32) -> f32:
   |     ^^ this function, with what it calls and the derivatives it takes
   |
   = help: take fewer derivatives of derivatives, or differentiate a smaller function
"""


def test_differentiating_too_many_operations_is_E0004(monkeypatch):
    """Each order of a derivative of a derivative multiplies the program (6 to 9 times through a taped loop:
    order 7 of this one took 29 s and 1.5 GB): a function of more than MAX_DIFFERENTIATED_OPS operations is
    E0004, counted before its derivative is built (here with a limit of 300, which order 3 passes)."""
    from arrc.compiler import autodiff
    monkeypatch.setattr(autodiff, "MAX_DIFFERENTIATED_OPS", 300)

    def orders(k: int) -> str:
        return "def h0(x: f32) -> f32:\n    y = x\n    for i in range(20):\n        y = sin(y) * 1.0001\n    return y\n" + \
            "".join(f"def h{j}(x: f32) -> f32:\n    return grad(h{j - 1})(x)\n" for j in range(1, k + 1))
    assert "stablehlo.while" in arrc.loads(orders(3)).h3.lower(arrc.spec("f32")).as_text()
    err = compile_error(arrc.loads(orders(4), filename="orders.arr").h4.lower, arrc.spec("f32"))
    assert str(err).rstrip() == E0004_DERIVATIVE.rstrip()


def test_xla_gets_file_positions_without_names():
    """XLA copies a name location's stack frame for every clone of a loop body: 30 nested loops whose trip
    counts it can compute took minutes to compile with the names, and 0.2 s without."""
    from jaxlib.mlir import ir

    from arrc.runtime.pjrt import _for_xla
    lowered = arrc.loads("def f(x: f32[3]) -> f32[3]:\n    for i in range(2):\n        x = x + 1.0\n    return x\n"
                         ).f.lower(arrc.spec("f32[3]"))
    names, files = [], []

    def visit(op):
        (names if isinstance(op.location, ir.NameLoc) else files).append(op.location)
        return ir.WalkResult.ADVANCE
    with lowered.context:
        lowered.module.operation.walk(visit)
        assert names                        # arrc's own module names its operations ("for", "add", ...)
        names.clear(), files.clear()
        _for_xla(lowered.module).operation.walk(visit)
    assert names == []
    assert any(isinstance(loc, ir.FileLineColLoc) and loc.start_line == 3 for loc in files)


@pytest.mark.parametrize("src", [
    FN + "x" + " " * 1_000_000 + "\n",
    "#" + "c" * 1_000_000 + "\ndef f(x: f32) -> f32:\n    return x\n",
    "def f(x: f32) -> f32:\n    print(\"" + "s" * 1_000_000 + "\")\n    return x\n",
    "def f(" + "a" * 1_000_000 + ": f32) -> f32:\n    return 1.0\n",
])
def test_one_megabyte_lines(src):
    assert codes(src) == []


def test_huge_integer_literals_are_E0211():
    for src in ["def f() -> i64:\n    return 1" + "0" * 400 + "\n",
                "def f(x: u64) -> u64:\n    return x + 18446744073709551616\n",
                "const K: u64 = 18446744073709551616\n",
                "def f() -> f64:\n    return f64(18446744073709551616)\n"]:    # 2**64: past 64 bits too
        assert codes(src) == ["E0211"], src


def test_huge_dimension_literal_is_E0215():
    assert codes("def f(x: f32[1" + "0" * 400 + "]) -> f32:\n    return sum(x)\n") == ["E0215"]


def test_float_literals_overflow_to_inf_as_in_python():
    mod = arrc.loads("def f() -> (f64, f32, f64):\n    return 1e999, 1" + "0" * 400 + ".0, 1e-999\n")
    big, big32, tiny = (float(np.asarray(v)) for v in mod.f())
    assert big == float("inf") and big32 == float("inf") and tiny == 0.0


def test_cli_check_of_deep_input_exits_1_without_traceback(tmp_path):
    path = tmp_path / "deep.arr"
    path.write_text(FN + "(" * N + "x" + ")" * N + "\n")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = arrc.cli.main(["check", str(path)])
    assert rc == 1 and "E0004" in err.getvalue() and "Traceback" not in err.getvalue()


# A child: the backend warmed, its address space bounded to what it uses plus 2 GiB, then a program whose
# result alone (eye(30000) in f32: 3.6 GB) cannot be allocated, run by the command line and by the REPL.
OUT_OF_MEMORY_CHILD = r"""
import io, resource, sys
from arrc.runtime import pjrt
pjrt.backend("cpu")
with open("/proc/self/status") as f:
    vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
resource.setrlimit(resource.RLIMIT_AS, (vm + (2 << 30), resource.RLIM_INFINITY))
if sys.argv[1] == "run":
    from arrc.cli import main
    print("rc", main(["run", sys.argv[2]]))
else:
    from arrc.repl.terminal import main
    print("rc", main([], stdin=io.StringIO("x = eye(30000)\n1 + 1\n")))
"""


@pytest.mark.parametrize("how", ["run", "repl"])
def test_a_result_too_large_to_allocate_is_out_of_memory_not_an_abort(tmp_path, how):
    """XLA could not allocate the result: NumPy's read of its buffer aborted the process (jaxlib's check
    `buffer_.IsConcrete()`, exit 134, the REPL session lost); the result is waited for first
    (runtime/pjrt.py `as_numpy`), which raises RESOURCE_EXHAUSTED: exit 3, and the REPL goes on."""
    path = tmp_path / "eye.arr"
    path.write_text("def main() -> f32[30000, 30000]:\n    return eye(30000)\n")
    done = subprocess.run([sys.executable, "-c", OUT_OF_MEMORY_CHILD, how, str(path)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Check failed" not in done.stderr
    if how == "run":
        assert done.stdout.splitlines()[-1] == "rc 3"
        assert "arrc: error: out of memory: RESOURCE_EXHAUSTED" in done.stderr
    else:
        assert "error: RESOURCE_EXHAUSTED" in done.stdout + done.stderr and "i32 = 2" in done.stdout
