"""Ctrl-C works everywhere (issue 13): SIGINT while checking, lowering, XLA compilation and execution, in
the CLI, the API and a piped REPL, 20 times each. The CLI exits 130 with exactly `arrc: interrupted`, the
API raises KeyboardInterrupt, the REPL prints `interrupted` and answers the next cell from the same
session; never a traceback, a hang, an abort or a lost session.

Each child process installs test-only hooks (`HOOKS`, monkeypatched class methods) that write marker
lines to a pipe of their own (not stdout or stderr, which stay exactly as the user sees them):
`enter STAGE TAG DETAIL` when a stage begins and `interrupted STAGE TAG` once for a KeyboardInterrupt,
naming the stage that was running when it came. The stages:

- check: `FunctionWalk.run` of a check walk (`lowering is None`; a lowering walk is a FunctionWalk too),
- lower: `ModuleLowering.lower`,
- compile: `Executable._compile_or_load`,
- exec: `Compiled.__call__`.

The stage that was running is the innermost stage of the thread the main thread waited for: programs
compile and run on a helper thread (runtime/call.py `interruptible`, wrapped by the hooks), where no
signal is handled; the main thread raises KeyboardInterrupt and the helper is abandoned. (jaxlib's
`compile_and_load` on the main thread raised KeyboardInterrupt while XLA went on compiling the module
that the unwinding freed: the API segfaulted after a dozen interrupted compiles; `Compiled` now
compiles through `interruptible`.)
TAG names the attempt (a helper abandoned by an earlier attempt keeps its own). The parent waits for
the target stage's `enter` marker, sends SIGINT at once, then waits for the outcome; every wait is
bounded by a hang guard, nothing asserts on time. Each attempt's program differs by a constant, and the
children run with ARRC_NO_CACHE=1, so no cache skips a stage.

The programs: `cbig` / `lbig`, a function of many `c = (c * 3 + K) % 1000003` statements (checked for
long, lowered for long when a concrete `main` inlines it, and folded at compile time, so XLA compiles
almost nothing: an abandoned lowering costs no long compile), a chain of `cumsum`s (a short lowering, a
long XLA compile), and a `while` loop (endless in the CLI, whose process ends; about a second of work in
the API and the REPL, where an abandoned run keeps a CPU busy until it ends: PJRT cannot cancel)."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

import pytest

from test_interrupts import _AS_ARRC, _DEFAULT_SIGINT, HANG, PYTHON, ROOT, Reader, _env, _stop

STAGES = ("check", "lower", "compile", "exec")
ATTEMPTS = 20
N_CHECK = 16000          # statements of `cbig`: its check walk takes ~0.5 s on the 2-core test machine
N_LOWER = 12000          # statements of `lbig`: lowering a `main` that inlines it takes ~0.5 s
N_CUMSUM = 16            # `cumsum` statements: XLA compiles them in ~0.6 s (lowering: a few ms)
SPIN = 150_000_000       # `while` iterations of a bounded run: ~0.7 s of one CPU
MARK_FD_ENV = "ARRC_TEST_MARK_FD"
# After the marker, before SIGINT: into the stage's own code. Sent at once, the signal often comes while
# the child returns from writing the marker (the woken parent preempts it), still in the hook.
SETTLE = 0.05

# The hooks, run in every child before anything is checked. TAG[0] names the current attempt.
HOOKS = r"""
import os as _os, threading as _threading
import arrc.compiler.check as _check, arrc.compiler.lower as _lower
import arrc.runtime.call as _call, arrc.runtime.pjrt as _pjrt
_FD = int(_os.environ["ARRC_TEST_MARK_FD"])
TAG = ["-"]
_local = _threading.local()
_stacks = {}                    # thread id -> the stages it is in, innermost last


def _mark(line):
    _os.write(_FD, (line + "\n").encode())


def _tag():
    return getattr(_local, "tag", None) or TAG[0]


def _record(err, stacks):
    # Once per KeyboardInterrupt: the innermost stage of the first of `stacks` that is in one.
    if getattr(err, "_arrc_test_recorded", False):
        return
    err._arrc_test_recorded = True
    stage = next((s[-1] for s in stacks if s), "none")
    _mark(f"interrupted {stage} {_tag()}")


def _hook(cls, name, stage, detail, only=lambda self: True):
    original = getattr(cls, name)

    def hooked(self, *args, **kwargs):
        if not only(self):
            return original(self, *args, **kwargs)
        stack = _stacks.setdefault(_threading.get_ident(), [])
        stack.append(stage)
        try:
            _mark(f"enter {stage} {_tag()} {detail(self, args)}")
            return original(self, *args, **kwargs)
        except KeyboardInterrupt as err:
            _record(err, [stack])
            raise
        finally:
            stack.pop()
    setattr(cls, name, hooked)


_hook(_check.FunctionWalk, "run", "check", lambda self, args: getattr(self.fn, "name", "-"),
      only=lambda self: self.lowering is None)
_hook(_lower.ModuleLowering, "lower", "lower", lambda self, args: args[0])
_hook(_pjrt.Executable, "_compile_or_load", "compile", lambda self, args: "-")
_hook(_call.Compiled, "__call__", "exec", lambda self, args: "-")

_interruptible = _call.interruptible


def _interruptible_hooked(fn, *args, **kw):
    # The callers look `interruptible` up when they call it (call.py by its global name, cli.py and
    # repl/ by importing it in the function), so this wrapper is what they call.
    if _threading.current_thread() is not _threading.main_thread():
        return _interruptible(fn, *args, **kw)
    tag, ran = _tag(), []

    def tracked(*a):
        ran.append(_threading.get_ident())
        _local.tag = tag                # an abandoned helper keeps marking its own attempt
        _mark(f"started {tag}")
        try:
            return fn(*a)
        finally:
            _mark(f"finished {tag}")
            _local.tag = None
    try:
        return _interruptible(tracked, *args, **kw)
    except KeyboardInterrupt as err:
        _record(err, [_stacks.get(ran[0], []) if ran else [], _stacks.get(_threading.get_ident(), [])])
        raise


_call.interruptible = _interruptible_hooked
"""

# The REPL names an attempt by its cell number (the cell `Session.run_cell` is about to count).
REPL_TAGS = r"""
import arrc.repl as _repl
_run_cell = _repl.Session.run_cell


def _run_cell_tagged(self, text):
    if text.strip():
        TAG[0] = f"c{self.cells + 1}"
    return _run_cell(self, text)


_repl.Session.run_cell = _run_cell_tagged
"""


# ---- the programs ----------------------------------------------------------------------------------

def folds(name: str, statements: int, seed: int) -> str:
    body = "".join(f"    c = (c * 3 + {i}) % 1000003\n" for i in range(statements))
    return f"def {name}(x: f32[n]) -> f32[n]:\n    c = {seed}\n{body}    return x + f32(c)\n"


def cumsums(signature: str, seed: int, tail: str = "") -> str:
    body = "".join(f"    x = cumsum(x) * 0.001 + {i + seed}.0\n" for i in range(N_CUMSUM))
    return f"def {signature} -> f32:\n    x = ones(1000)\n{body}    return sum(x){tail}\n"


def spin(signature: str, bound: str) -> str:
    return (f"def {signature} -> i64:\n    i = 0\n    j = 0\n    while j < {bound}:\n"
            f"        i = (i + 1) % 7\n        j = j + 1\n    return i\n")


def stage_program(stage: str, seed: int, endless: bool) -> str:
    """The program of one CLI or API attempt; its entry is `main()`."""
    if stage == "check":
        return folds("cbig", N_CHECK, seed) + "\ndef main() -> f32:\n    return 1.0\n"
    if stage == "lower":
        return folds("lbig", N_LOWER, seed) + "\ndef main() -> f32:\n    return sum(lbig([1.0, 2.0]))\n"
    if stage == "compile":
        return cumsums("main()", seed)
    if endless:
        return f"def main() -> i32:\n    i = {seed % 7}\n    while i >= 0:\n        i = (i + 1) % 7\n    return i\n"
    return spin("main()", str(SPIN + seed))


# The `enter` marker after which an attempt at a stage sends SIGINT (DETAIL: the function walked or lowered).
def target(stage: str, tag: str) -> str:
    return f"enter {stage} {tag} " + {"check": "cbig", "lower": "main"}.get(stage, "-") + "\n"


class Marks(Reader):
    """The marker pipe's lines, collected on a thread."""

    def wait_match(self, pattern: str, timeout: float = HANG) -> bool:
        return self.wait_until(lambda text: re.search(pattern, text, re.M), timeout)

    def wait_until(self, done, timeout: float = HANG) -> bool:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not done(self.text):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True


def interrupted_pattern(tag: str) -> str:
    return rf"^interrupted (\S+) {re.escape(tag)}$"


def interrupt_at(proc, marks, stage: str, tag: str, out, err) -> tuple:
    """SIGINT to `proc` once attempt `tag` has entered `stage` (after SETTLE: into the stage's own code)."""
    what = (stage, tag)
    assert marks.wait_for(target(stage, tag)), ("no target marker", what, marks.text[-2000:],
                                                 out.text[-1000:], err.text[-2000:])
    time.sleep(SETTLE)
    proc.send_signal(signal.SIGINT)
    return what


def check_marks(marks: str, stage: str, tag: str, what) -> None:
    """Exactly one `interrupted` marker for attempt `tag`, naming `stage`."""
    found = re.findall(interrupted_pattern(tag), marks, re.M)
    assert found == [stage], (what, found, marks[-3000:])


def all_ended(marks: str) -> bool:
    """Every job started on a helper thread has ended (abandoned ones too): a normal exit is safe."""
    return len(re.findall(r"^started ", marks, re.M)) == len(re.findall(r"^finished ", marks, re.M))


def child_env(mark_fd: int) -> dict:
    return {**_env(), "ARRC_NO_CACHE": "1", MARK_FD_ENV: str(mark_fd)}


def plan() -> list[tuple[str, int, str]]:
    """(stage, attempt, tag) for every attempt, stage by stage."""
    return [(stage, k, f"{stage}{k}") for stage in STAGES for k in range(ATTEMPTS)]


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    """The program files of the CLI and API attempts: (stage, attempt, endless) -> path."""
    folder = tmp_path_factory.mktemp("interrupt_matrix")
    paths = {}
    for stage, k, _ in plan():
        for endless in ((False, True) if stage == "exec" else (False,)):
            path = folder / f"{stage}{k}{'_endless' if endless else ''}.arr"
            path.write_text(stage_program(stage, 1000 + k, endless))
            paths[stage, k, endless] = str(path)
    return paths


# ---- the CLI ---------------------------------------------------------------------------------------

# One driver imports arrc and jax once, then forks each `arrc run` (a fork starts before any backend
# exists), with its stdout and stderr in files and the marker pipe on fd MARK_FD; it sends SIGINT once
# the target marker is read and reports each run's exit status, output and markers.
CLI_DRIVER = r"""
import json, os, select, signal, sys, tempfile, time
import jax, numpy
import arrc.cli
""" + HOOKS + r"""
signal.signal(signal.SIGINT, signal.default_int_handler)    # even under a parent that ignores SIGINT
runs, hang, settle = json.loads(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
outcomes = []
for tag, path, target in runs:
    r, w = os.pipe()
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    TAG[0] = tag
    sys.stdout.flush(); sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.dup2(w, _FD); os.dup2(out.fileno(), 1); os.dup2(err.fileno(), 2)
        sys.argv = ["arrc", "run", path]
        arrc.cli.entry()
        os._exit(99)                        # not reached: `entry` leaves with os._exit
    os.close(w)
    marks, code, deadline = b"", None, time.monotonic() + hang
    while target.encode() not in marks and time.monotonic() < deadline:
        if select.select([r], [], [], 0.5)[0]:
            chunk = os.read(r, 65536)
            if not chunk:
                break
            marks += chunk
    sent = target.encode() in marks
    if sent:
        time.sleep(settle)
        os.kill(pid, signal.SIGINT)
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            break
        time.sleep(0.01)
    if code is None:                        # a hang: reported as such
        os.kill(pid, signal.SIGKILL); os.waitpid(pid, 0)
    while select.select([r], [], [], 0)[0]:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        marks += chunk
    os.close(r)
    out.seek(0); err.seek(0)
    outcomes.append([tag, sent, code, out.read().decode(), err.read().decode(), marks.decode()])
print(json.dumps(outcomes))
"""


def run_cli(programs) -> None:
    runs = [[tag, programs[stage, k, stage == "exec"], target(stage, tag)] for stage, k, tag in plan()]
    done = subprocess.run([PYTHON, "-c", CLI_DRIVER, json.dumps(runs), str(HANG), str(SETTLE)], check=False,
                          capture_output=True, text=True, env=child_env(63), cwd=ROOT,
                          timeout=len(runs) * HANG)
    assert done.returncode == 0, done.stderr[-3000:]
    outcomes = json.loads(done.stdout.splitlines()[-1])
    assert len(outcomes) == len(runs)
    for (stage, _, tag), (got_tag, sent, code, out, err, marks) in zip(plan(), outcomes):
        what = (stage, tag, code, out[-1000:], err[-2000:])
        assert got_tag == tag and sent, ("no target marker", what, marks[-2000:])
        assert code == 130, what            # not None (a hang), not negative (an abort), not 0 (missed)
        assert err == "arrc: interrupted\n", what
        assert out == "", what
        check_marks(marks, stage, tag, what)


# ---- the API ---------------------------------------------------------------------------------------

# Paced by the parent: one line `go` per attempt on stdin. Each attempt loads its program and calls
# `main()` (check and lower happen in `arrc.loads`, compile and exec in the call).
API_CHILD = _DEFAULT_SIGINT + HOOKS + r"""
import json, sys
import jax, arrc
for tag, path in json.loads(sys.stdin.readline()):
    sys.stdin.readline()
    TAG[0] = tag
    try:
        arrc.load(path).main()
        print(f"returned {tag}", flush=True)
    except KeyboardInterrupt:
        print(f"KeyboardInterrupt {tag}", flush=True)
print("done", flush=True)
sys.stdin.read()                # until the parent has seen every abandoned run end
"""


def run_api(programs) -> None:
    attempts = plan()
    read_end, write_end = os.pipe()
    proc = subprocess.Popen([PYTHON, "-c", API_CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=child_env(write_end), cwd=ROOT,
                            pass_fds=(write_end,))
    os.close(write_end)
    out, err, marks = Reader(proc.stdout), Reader(proc.stderr), Marks(os.fdopen(read_end))
    try:
        proc.stdin.write(json.dumps([[tag, programs[stage, k, False]] for stage, k, tag in attempts]) + "\n")
        for stage, _, tag in attempts:
            proc.stdin.write("go\n")
            proc.stdin.flush()
            what = interrupt_at(proc, marks, stage, tag, out, err)
            assert out.wait_for(f" {tag}\n"), ("no outcome", what, out.text[-1000:], err.text[-2000:])
            outcome = [line for line in out.text.splitlines() if line.endswith(f" {tag}")]
            assert outcome == [f"KeyboardInterrupt {tag}"], (what, outcome, err.text[-2000:])
            assert marks.wait_match(interrupted_pattern(tag)), ("no interrupted marker", what, marks.text[-2000:])
            check_marks(marks.text, stage, tag, what)
        assert out.wait_for("done\n"), err.text[-2000:]
        # A normal exit while an abandoned job is still in jaxlib aborts when the job returns (Python ends
        # the thread with a forced unwind that jaxlib's C++ does not let through): not the subject here.
        assert marks.wait_until(all_ended), ("an abandoned compile or run never ends", marks.text[-2000:])
        proc.stdin.close()
        code = proc.wait(HANG)
    finally:
        _stop(proc)
    assert code == 0, (code, err.finish()[-3000:])
    assert "Traceback" not in err.finish() and "Traceback" not in out.finish(), err.text[-3000:]


# ---- the piped REPL --------------------------------------------------------------------------------

# One session: the library is loaded at start (no cell: a file on the command line takes no number),
# `k = 40` (cell 1), `k + 2` (cell 2); then each attempt is a cell (3, 5, ...) sent together with `k + 2`,
# which must answer `i32 = 42` (stdout) after the interrupted cell printed `interrupted` (stderr). Check: a definition that uses `cbig` (checked with it); lower:
# a concrete `main` inlining `lbig` (lowered at its definition); compile and exec: calls of `cum` and
# `spin` (compiled and run on a helper thread).
def repl_cell(stage: str, seed: int) -> str:
    return {"check": f"def g(x: f32[n]) -> f32[n]:\n    return cbig(x) + {seed}.0\n",
            "lower": f"def main() -> f32:\n    return sum(lbig([1.0, {seed}.0]))\n",
            "compile": f"cum({seed}.0)\n",
            "exec": f"spin({SPIN + seed})\n"}[stage]


def run_repl(tmp_path) -> None:
    library = tmp_path / "library.arr"
    library.write_text(folds("cbig", N_CHECK, 1) + "\n" + folds("lbig", N_LOWER, 1) + "\n"
                       + cumsums("cum(c: f32)", 0, " + c") + "\n" + spin("spin(n: i64)", "n"))
    read_end, write_end = os.pipe()
    proc = subprocess.Popen([PYTHON, "-c", _DEFAULT_SIGINT + HOOKS + REPL_TAGS + _AS_ARRC, "repl", str(library)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=child_env(write_end), cwd=ROOT, pass_fds=(write_end,))
    os.close(write_end)
    out, err, marks = Reader(proc.stdout), Reader(proc.stderr), Marks(os.fdopen(read_end))
    answer = "i32 = 42\n"
    try:
        proc.stdin.write("k = 40\nk + 2\n")
        proc.stdin.flush()
        assert out.wait_for(answer), (out.text[-1000:], err.text[-2000:])
        assert out.text == f"loaded {library}: 4 functions (cbig, lbig, cum, spin)\n{answer}", out.text[-1000:]
        for n, (stage, k, _) in enumerate(plan()):
            tag = f"c{3 + 2 * n}"
            start, start_err = len(out.text), len(err.text)
            proc.stdin.write(repl_cell(stage, 1000 + k) + "k + 2\n")
            proc.stdin.flush()
            what = interrupt_at(proc, marks, stage, tag, out, err)
            assert out.wait_for(answer, n + 2), ("no answer", what, out.text[-1000:], err.text[-2000:])
            assert out.text[start:] == answer, (what, out.text[start:], err.text[-2000:])
            assert err.wait_for("interrupted\n", n + 1), ("not on stderr", what, err.text[-2000:])
            assert err.text[start_err:] == "interrupted\n", (what, err.text[start_err:])
            assert marks.wait_match(interrupted_pattern(tag)), ("no interrupted marker", what, marks.text[-2000:])
            check_marks(marks.text, stage, tag, what)
        assert marks.wait_until(all_ended), ("an abandoned compile or run never ends", marks.text[-2000:])
        proc.stdin.close()
        code = proc.wait(HANG)
    finally:
        _stop(proc)
    assert "Traceback" not in err.finish() and "Traceback" not in out.finish(), err.text[-3000:]
    assert code == 3, (code, err.text[-3000:])      # the interrupted cells failed (a run-time failure)


@pytest.mark.parametrize("surface", ["cli", "api", "repl"])
def test_interrupt_every_stage(surface, programs, tmp_path):
    """SIGINT 20 times in each stage (check, lower, XLA compile, exec) of one surface: the CLI exits 130
    with exactly `arrc: interrupted`, the API raises KeyboardInterrupt, the piped REPL prints
    `interrupted` and answers the next cell; each time the hooks saw the interrupt in the target stage."""
    if surface == "cli":
        run_cli(programs)
    elif surface == "api":
        run_api(programs)
    else:
        run_repl(tmp_path)


def test_repl_ends_while_an_abandoned_compile_runs(tmp_path):
    """A piped REPL whose input ends right after a compile was interrupted, while XLA still compiles on
    the abandoned helper thread: exit 3, never an abort (Python's normal exit ended that thread with a
    forced unwind when it returned from jaxlib: "FATAL: exception not rethrown", SIGABRT; `arrc repl`
    leaves with `os._exit` while a helper is busy). Three sessions, each ending at another moment."""
    library = tmp_path / "library.arr"
    library.write_text(cumsums("cum(c: f32)", 0, " + c"))
    for attempt, pause in enumerate((0.0, 0.2, 0.4)):
        read_end, write_end = os.pipe()
        proc = subprocess.Popen([PYTHON, "-c", _DEFAULT_SIGINT + HOOKS + REPL_TAGS + _AS_ARRC, "repl", str(library)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=child_env(write_end), cwd=ROOT, pass_fds=(write_end,))
        os.close(write_end)
        out, err, marks = Reader(proc.stdout), Reader(proc.stderr), Marks(os.fdopen(read_end))
        try:
            proc.stdin.write(f"cum({attempt}.5)\n")
            proc.stdin.flush()
            assert marks.wait_for(target("compile", "c1")), (attempt, marks.text, err.text[-2000:])
            time.sleep(SETTLE)
            proc.send_signal(signal.SIGINT)
            assert err.wait_for("interrupted\n"), (attempt, out.text, err.text[-2000:])
            time.sleep(pause)
            proc.stdin.close()
            code = proc.wait(HANG)
        finally:
            _stop(proc)
        assert code == 3, (attempt, code, err.finish()[-2000:])
        assert "Traceback" not in err.finish() and "FATAL" not in err.text, (attempt, err.text[-2000:])
