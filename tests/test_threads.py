"""Thread safety: several threads compile (`arrc.loads` + first call) and call functions concurrently.

Shared modules, shared functions, specializations for different argument shapes created concurrently,
functions with `print`/`assert` and guards. Every thread checks its own results against NumPy (so
results mixed up between threads are caught), no call may raise an unexpected exception, and every
thread must finish within a deadline (no deadlock).

Threads here are daemon threads started behind a barrier, so a deadlock fails the test instead of
hanging the run.
"""
from __future__ import annotations

import re
import sys
import threading
import time

import numpy as np
import pytest

import arrc

N_THREADS = 8
DEADLINE_S = 240.0

# BUG (see test_parsing_is_thread_safe): concurrent parses share one lark post-lexer (the ArrIndenter
# instance in compiler/parse.py `_parser()`), whose indentation state is per parse; concurrent
# `arrc.loads` then reports spurious E0001 errors. The other tests serialize `arrc.loads` with this lock
# so that they test what comes after parsing; set it to False once parsing is thread-safe.
SERIALIZE_PARSING = False
_parse_lock = threading.Lock()


def loads(src: str, **kw) -> arrc.Module:
    if SERIALIZE_PARSING:
        with _parse_lock:
            return arrc.loads(src, **kw)
    return arrc.loads(src, **kw)


def run_threads(target, n: int = N_THREADS, deadline: float = DEADLINE_S) -> list:
    """Run `target(i)` in `n` daemon threads started together; returns their results in order.
    Fails if any raised (first traceback shown) or if any is still running after `deadline` seconds."""
    barrier = threading.Barrier(n)
    results: list = [None] * n
    errors: list = []

    def body(i):
        try:
            barrier.wait(timeout=60)
            results[i] = target(i)
        except BaseException as exc:       # noqa: BLE001 - reported below with its traceback
            import traceback
            errors.append((i, exc, traceback.format_exc()))
    threads = [threading.Thread(target=body, args=(i,), daemon=True, name=f"arrc-stress-{i}") for i in range(n)]
    for t in threads:
        t.start()
    end = time.monotonic() + deadline
    for t in threads:
        t.join(max(0.0, end - time.monotonic()))
    alive = [t.name for t in threads if t.is_alive()]
    assert not alive, f"threads still running after {deadline:.0f} s (deadlock or hang): {alive}"
    if errors:
        i, exc, tb = errors[0]
        pytest.fail(f"{len(errors)} thread(s) raised; thread {i}: {type(exc).__name__}: {exc}\n{tb}")
    return results


@pytest.fixture(autouse=True)
def fast_switching():
    """Switch threads often, so that races show up in a short test."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(old)


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ARRC_CACHE_DIR", str(tmp_path / "cache"))


# ---- parsing ---------------------------------------------------------------------------------------

def _indented_program(k: int) -> str:
    body = "".join("    " * (d + 1) + f"if x > {d}.0:\n" for d in range(k)) + "    " * (k + 1) + "x = x + 1.0\n"
    return f"def f{k}(x: f32) -> f32:\n" + body + "    y = (x +\n  1.0) * [\n 1.0][0]\n    return y\n"


def test_parsing_is_thread_safe():
    programs = [_indented_program(k) for k in range(6)]
    expected = [arrc.loads(p).functions for p in programs]

    def work(i):
        for r in range(120):
            k = (i + r) % len(programs)
            assert arrc.loads(programs[k]).functions == expected[k]
    run_threads(work)


def test_concurrent_check_errors_stay_with_their_source():
    """Each thread compiles programs with errors at a line of its own: diagnostics never mix."""
    def work(i):
        for r in range(10):
            line = 2 + (i + r) % 5
            src = "def f(x: f32) -> f32:\n" + "    x = x + 1.0\n" * (line - 2) + f"    return undefined_{i}_{r}\n"
            with pytest.raises(arrc.CompileError) as info:
                loads(src, filename=f"t{i}_{r}.arr")
            [d] = info.value.diagnostics
            assert d.code == "E0101" and f"undefined_{i}_{r}" in d.message
            assert d.span.file == f"t{i}_{r}.arr" and d.span.line == line
    run_threads(work)


# ---- compiling and calling -------------------------------------------------------------------------

SHARED_SRC = """\
const K: i32 = 3

def affine(x: f32[n], w: f32[n], b: f32) -> f32[n]:
    return x * w + b

def rowsum(x: f32[r, c]) -> f32[r]:
    return sum(x, axis=1) * K

def cum(x: i32[n]) -> i32[n]:
    return cumsum(x)

def loop(x: f64[n], steps: i32) -> f64:
    s = 0.0
    for i in range(steps):
        s += x[i % n]
    return s
"""


def test_shared_function_specialized_concurrently():
    """One Function, called by all threads at once with argument shapes that overlap between threads:
    the first calls for a shape race to specialize and compile it; every result must be the thread's own."""
    mod = loads(SHARED_SRC)
    fn = mod.affine

    def work(i):
        rng = np.random.default_rng(i)
        for r in range(12):
            n = 1 + (i + r) % 6                     # 6 shapes, each first reached by several threads
            x, w = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
            b = np.float32(i * 100 + r)
            np.testing.assert_allclose(np.asarray(fn(x, w, b)), x * w + b, rtol=1e-6)
        return True
    assert all(run_threads(work))


def test_shared_module_different_functions_concurrently():
    mod = loads(SHARED_SRC)

    def work(i):
        rng = np.random.default_rng(100 + i)
        for r in range(6):
            kind = (i + r) % 4
            if kind == 0:
                x = rng.standard_normal((2 + r % 3, 1 + i % 4)).astype(np.float32)
                np.testing.assert_allclose(np.asarray(mod.rowsum(x)), x.sum(axis=1) * 3, rtol=1e-5)
            elif kind == 1:
                x = rng.integers(-5, 5, size=3 + i % 3).astype(np.int32)
                np.testing.assert_array_equal(np.asarray(mod.cum(x)), np.cumsum(x))
            elif kind == 2:
                x = rng.standard_normal(4).astype(np.float64)
                steps = i + r
                want = sum(x[k % 4] for k in range(steps))
                got = np.asarray(mod.loop(x, steps))
                assert got.dtype == np.float64
                np.testing.assert_allclose(got, want, rtol=1e-12)
            else:
                x = rng.standard_normal(5).astype(np.float32)
                np.testing.assert_allclose(np.asarray(mod.affine(x, x, np.float32(i))), x * x + i, rtol=1e-6)
        return True
    assert all(run_threads(work))


def test_concurrent_loads_and_first_calls_identical_and_different_programs():
    """Each thread compiles its own module: half the threads the same source text (same cache keys),
    the others a source of their own (a different constant); then calls it, first call included."""
    template = "const C: f32 = {c}\n\ndef f(x: f32[n]) -> f32[n]:\n    return exp(x) * C + {c}\n"

    def work(i):
        c = 2.0 if i % 2 == 0 else float(10 + i)
        mod = loads(template.format(c=c))
        rng = np.random.default_rng(i)
        for r in range(4):
            x = rng.standard_normal(3 + (r % 2)).astype(np.float32)
            np.testing.assert_allclose(np.asarray(mod.f(x)), np.exp(x) * np.float32(c) + np.float32(c), rtol=1e-5)
        return True
    assert all(run_threads(work))


def test_lower_concurrently():
    """`Function.lower` from many threads (each builds its own MLIR context)."""
    mod = loads(SHARED_SRC)

    def work(i):
        n = 1 + i
        text = mod.affine.lower(arrc.spec(f"f32[{n}]"), arrc.spec(f"f32[{n}]"), arrc.spec("f32")).as_text()
        assert f"tensor<{n}xf32>" in text
        return True
    assert all(run_threads(work))


GRAD_SRC = """\
def looped(x: f64[n], k: i32, q: f64) -> f64:
    y = x
    e = 2.0
    for i in range(k, bound=6):
        y = tanh(y) ** e + y ** q
        e = e * 1.0
    if k > 2:
        y = y * 3.0
    return sum(y)
"""


def test_derivatives_built_concurrently():
    """Derivatives of loops with bounds built in many threads at once, each of its own module: what a
    sweep keeps while it runs (its loops' bound checks, the values it varies) is per thread."""
    def expected(x, k):
        y = x.copy()
        dy = np.ones_like(x)
        for _ in range(k):
            t = np.tanh(y)
            dy = dy * (2 * t * (1 - t * t) + 2 * y)
            y = t ** 2 + y ** 2
        return dy * (3.0 if k > 2 else 1.0)

    def work(i):
        x = np.linspace(-0.4, 0.3, 2 + i)
        got = arrc.grad(loads(GRAD_SRC, guards="nan", guard_scope="all-ops").looped)(x, 3, 2.0)
        np.testing.assert_allclose(got, expected(x, 3), rtol=1e-12)
        return True
    assert all(run_threads(work))


# ---- effects and guards ----------------------------------------------------------------------------

EFFECT_SRC = """\
def tagged(tag: i32, x: f32[n]) -> f32:
    s = sum(x)
    print("tag", tag, "sum", s)
    assert x >= 0, "negative input"
    return s * 2.0
"""


def test_print_and_assert_from_many_threads(capfd):
    """Prints of concurrent calls carry their own values; an assert fails only in the call whose input
    is bad, with that input's index, and does not leak into other threads' calls."""
    mod = loads(EFFECT_SRC)
    capfd.readouterr()
    rounds = 6

    def work(i):
        failures = 0
        for r in range(rounds):
            tag = i * 1000 + r
            x = np.arange(4, dtype=np.float32) + tag
            bad = (i + r) % 3 == 0
            if bad:
                x[(i + r) % 4] = -1.0
            try:
                got = mod.tagged(np.int32(tag), x)
            except arrc.AssertionFailed as err:
                assert bad, f"thread {i} round {r}: unexpected assertion failure: {err}"
                assert err.index == ((i + r) % 4,), (err.index, (i + r) % 4)
                assert "negative input" in str(err)
                failures += 1
                continue
            assert not bad, f"thread {i} round {r}: the assert did not fail"
            np.testing.assert_allclose(np.asarray(got), x.sum() * 2, rtol=1e-6)
        return failures
    failures = run_threads(work)
    out = capfd.readouterr().out
    # Every print ran exactly once with its own values. The text of concurrent prints can interleave
    # anywhere, even inside a word (see test_concurrent_prints_are_whole_lines), so what is compared
    # here is the characters printed, as a multiset.
    expected = []
    for i in range(N_THREADS):
        for r in range(rounds):
            tag = i * 1000 + r
            x = np.arange(4, dtype=np.float32) + tag
            if (i + r) % 3 == 0:
                x[(i + r) % 4] = -1.0
            expected.append(f"tag {tag} sum {x.sum()}")
    import collections
    got_chars = collections.Counter(out.replace(" ", "").replace("\n", ""))
    want_chars = collections.Counter("".join(expected).replace(" ", ""))
    assert got_chars == want_chars, (f"missing {want_chars - got_chars}, unexpected {got_chars - want_chars}\n"
                                     f"{out[:3000]}")
    assert sum(failures) == sum(1 for i in range(N_THREADS) for r in range(rounds) if (i + r) % 3 == 0)


def test_concurrent_prints_are_whole_lines(capfd):
    mod = loads("def spam(tag: i32) -> i32:\n    for i in range(100):\n        print(\"tag\", tag, \"line\", i)\n"
                "    return tag\n")
    mod.spam(np.int32(-1))
    capfd.readouterr()
    run_threads(lambda i: [int(mod.spam(np.int32(i))) for _ in range(4)])
    lines = capfd.readouterr().out.splitlines()
    assert len(lines) == 4 * 100 * N_THREADS
    bad = [line for line in lines if not re.fullmatch(r"tag \d+ line \d+", line)]
    assert not bad, bad[:5]


GUARD_SRC = """\
def logs(x: f32[n]) -> f32[n]:
    return log(x) * 2.0

def ratio(a: i32[n], b: i32[n]) -> i32[n]:
    return a // b
"""


def test_guards_from_many_threads():
    """Guarded calls from many threads: each fault report names the calling thread's own bad index."""
    mod = loads(GUARD_SRC, guards="all")

    def work(i):
        for r in range(5):
            n = 4 + i % 3
            x = np.arange(1, n + 1, dtype=np.float32)
            bad = (i + r) % 2 == 0
            k = (i + r) % n
            if bad:
                x[k] = -1.0
            try:
                got = mod.logs(x)
            except arrc.NaNError as err:
                assert bad, f"thread {i} round {r}: unexpected NaNError {err}"
                assert err.index == (k,), (err.index, k)
                continue
            assert not bad, f"thread {i} round {r}: NaN not reported"
            np.testing.assert_allclose(np.asarray(got), np.log(x) * 2, rtol=1e-6)
            a = np.arange(n, dtype=np.int32) + i
            b = np.ones(n, dtype=np.int32)
            if r % 2:
                b[k] = 0
                with pytest.raises(arrc.DivisionByZero) as info:
                    mod.ratio(a, b)
                assert info.value.index == (k,)
            else:
                np.testing.assert_array_equal(np.asarray(mod.ratio(a, b)), a // b)
        return True
    assert all(run_threads(work))


def test_calls_on_device_arrays_and_results_from_other_threads():
    """Results (device arrays) made by one thread are arguments in another."""
    mod = loads(SHARED_SRC)
    x = np.linspace(-1, 1, 7).astype(np.float32)
    first = run_threads(lambda i: mod.affine(x, x, np.float32(i)), n=4)

    def work(i):
        other = first[(i + 1) % 4]
        got = mod.affine(other, x, np.float32(0))
        np.testing.assert_allclose(np.asarray(got), (x * x + (i + 1) % 4) * x, rtol=1e-5)
        return True
    assert all(run_threads(work, n=4))


def test_deep_inputs_in_threads():
    """The recursion-limit diagnostics (E0004) work in threads too (their C stacks can be smaller)."""
    fn = "def f(x: f32) -> f32:\n    return "
    deep = [fn + "+".join(["x"] * 10_000) + "\n", fn + "x if true else " * 2_000 + "x\n",
            "def f(x: f32) -> f32:\n" + "".join(" " * (i + 4) + "if x > 0.0:\n" for i in range(1_000))
            + " " * 1_004 + "x = x + 1.0\n    return x\n"]

    def work(i):
        with pytest.raises(arrc.CompileError) as info:
            loads(deep[i % len(deep)])
        assert {d.code for d in info.value.diagnostics} == {"E0004"}
        return True
    assert all(run_threads(work, n=6))


FIRST_CALLS = """\
import sys, threading, numpy as np, arrc
assert "jax" not in sys.modules
mod = arrc.loads("def f(x: f32[n]) -> f32[n]:\\n    return x * 2.0\\n")
errors = []
def call():
    try:
        assert np.asarray(mod.f(np.ones(4, np.float32))).tolist() == [2.0] * 4
    except BaseException as err:
        errors.append(repr(err))
threads = [threading.Thread(target=call) for _ in range(4)]
[t.start() for t in threads]
[t.join() for t in threads]
print(errors or "ok")
"""


def test_first_calls_from_threads_before_jax_is_imported():
    """Four threads making the process's first calls at once: one imports jax and binds the runtime to it, the
    others wait for that (each raised ImportError "from partially initialized module 'jax._src.core'")."""
    import subprocess
    for _ in range(3):          # (the old code failed every time; the race depends on scheduling)
        out = subprocess.run([sys.executable, "-c", FIRST_CALLS], capture_output=True, text=True, timeout=300)
        assert out.returncode == 0 and out.stdout == "ok\n", out.stdout + out.stderr
