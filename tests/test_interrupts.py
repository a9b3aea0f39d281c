"""Ctrl-C (SIGINT) while a compiled program runs (issue 13 item 1): the CLI leaves with exit 130 and one
line, the API raises KeyboardInterrupt, the piped REPL answers the next cell.

XLA:CPU runs a program its cost analysis counts as cheap (an endless scalar `while`) inline on the
calling thread, inside `execute_sharded`, where Python's signal handler cannot run: before the fix
SIGINT was ignored until the program ended (runtime/call.py `interruptible`). Each process prints a
marker before its loop; SIGINT is sent once the marker is seen, so it lands while XLA runs the loop.
Every wait is bounded (a hang guard, no timing assertion)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
HANG = 90.0                     # seconds: a hang guard for one process, never a timing assertion

# A scalar loop: XLA's cost analysis counts its body once, so XLA runs it inline on the calling thread.
ENDLESS = """def main() -> i32:
    print("start")
    i = 0
    while i >= 0:
        i = (i + 1) % 7
    return i
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("interrupts") / "endless.arr"
    path.write_text(ENDLESS)
    return path


def _env() -> dict:
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "1"}


class Reader:
    """Collects a pipe's output on a thread; `wait_for` a marker with a deadline."""

    def __init__(self, stream):
        self.text = ""
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream):
        for chunk in iter(lambda: stream.readline(), ""):
            with self._cond:
                self.text += chunk
                self._cond.notify_all()

    def wait_for(self, marker: str, count: int = 1, timeout: float = HANG) -> bool:
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.text.count(marker) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def finish(self, timeout: float = 10.0) -> str:
        self._thread.join(timeout)
        return self.text


# Python leaves SIGINT ignored in a process started with it ignored (e.g. under `make test &`): the
# children set Python's own handler first, as an interactive shell's would be.
_DEFAULT_SIGINT = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"
_AS_ARRC = _DEFAULT_SIGINT + "import runpy; runpy.run_module('arrc', run_name='__main__', alter_sys=True)\n"


def _start(args: list[str], stdin=None) -> tuple[subprocess.Popen, Reader, Reader]:
    proc = subprocess.Popen(args, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env(), cwd=ROOT)
    return proc, Reader(proc.stdout), Reader(proc.stderr)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)


# The CLI runs: one driver process imports arrc and jax once, then forks each run before any backend
# exists (importing jax costs seconds of CPU on a loaded machine; a forked run only compiles and runs).
# A run's stdout is a pipe the driver reads until the marker; then SIGINT, and its exit status.
_CLI_DRIVER = r"""
import json, os, select, signal, sys, tempfile, time
import jax, numpy
import arrc.cli
signal.signal(signal.SIGINT, signal.default_int_handler)    # even under a parent that ignores SIGINT
program, runs, hang = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
outcomes = []
for attempt in range(runs):
    r, w = os.pipe()
    err = tempfile.TemporaryFile()
    sys.stdout.flush(); sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.dup2(w, 1); os.dup2(err.fileno(), 2)
        sys.argv = ["arrc", "run", program]
        arrc.cli.entry()
    os.close(w)
    out, code, deadline = b"", None, time.monotonic() + hang
    while b"start" not in out and time.monotonic() < deadline:
        if select.select([r], [], [], 0.5)[0]:
            chunk = os.read(r, 4096)
            if not chunk:
                break
            out += chunk
    if b"start" in out:
        time.sleep(0.05)                    # into the loop (the marker is its first effect)
        os.kill(pid, signal.SIGINT)
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            break
        time.sleep(0.02)
    if code is None:
        os.kill(pid, signal.SIGKILL); os.waitpid(pid, 0)
    while select.select([r], [], [], 0)[0]:
        chunk = os.read(r, 4096)
        if not chunk:
            break
        out += chunk
    os.close(r)
    err.seek(0)
    outcomes.append([code, out.decode(), err.read().decode()])
print(json.dumps(outcomes))
"""


def test_cli_interrupt_while_running(program):
    """20 runs of `arrc run` interrupted while XLA runs the endless loop: each exits 130 with exactly
    `arrc: interrupted` on stderr (no traceback) and what it printed before on stdout."""
    import json
    done = subprocess.run([PYTHON, "-c", _CLI_DRIVER, str(program), "20", str(HANG)], check=False, capture_output=True,
                          text=True, env=_env(), cwd=ROOT, timeout=20 * HANG)
    assert done.returncode == 0, done.stderr[-3000:]
    outcomes = json.loads(done.stdout.splitlines()[-1])
    assert len(outcomes) == 20
    for attempt, (code, out, err) in enumerate(outcomes):
        assert code == 130, (attempt, code, out, err[-2000:])
        assert err == "arrc: interrupted\n", (attempt, err[-2000:])
        assert out == "start\n", (attempt, out)


def test_cli_interrupt_while_checking(tmp_path):
    """Ctrl-C before anything runs (while the process checks, lowers or compiles) is the same exit."""
    source = tmp_path / "big.arr"
    body = "".join(f"    x = x * 1.0001 + {i}.0\n" for i in range(3000))
    source.write_text("def main() -> f32:\n    x = 1.0\n" + body + "    return x\n")
    child = _DEFAULT_SIGINT + "import sys, arrc.cli; print('ready', flush=True); sys.argv[1:1] = ['run']; arrc.cli.entry()"
    proc, out, err = _start([PYTHON, "-c", child, str(source)])
    try:
        assert out.wait_for("ready"), err.text
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        code = proc.wait(HANG)
    finally:
        _stop(proc)
    if code == 0:
        pytest.skip("the program finished before the signal")
    assert code == 130, (code, err.finish()[-2000:])
    assert err.finish() == "arrc: interrupted\n"


def test_cli_interrupt_while_starting(tmp_path):
    """Ctrl-C while `arrc` loads the compiler, NumPy and jaxlib (arrc/launch.py `entry`, before `arrc.cli` runs):
    "arrc: interrupted", status 130, never a traceback (it was one for most delays, and now and then a crash
    inside jaxlib's import). The child says `ready` just before `entry` (what runs before it is the interpreter's
    start, which no program handles); whichever moment after it each signal lands in, the command ends one of
    two ways."""
    source = tmp_path / "ok.arr"
    source.write_text("def f(x: f32[3]) -> f32[3]:\n    return x * 2.0\n")
    child = _DEFAULT_SIGINT + ("import sys, arrc.launch; sys.argv[1:1] = ['check']; print('ready', flush=True); "
                               "arrc.launch.entry()")
    interrupted = 0
    for delay in (0.05, 0.15, 0.3, 0.6):
        proc, out, err = _start([PYTHON, "-c", child, str(source)])
        try:
            assert out.wait_for("ready"), err.text
            time.sleep(delay)
            proc.send_signal(signal.SIGINT)
            code = proc.wait(HANG)
        finally:
            _stop(proc)
        assert code in (0, 130), (delay, code, err.finish()[-2000:])
        assert err.finish() == ("arrc: interrupted\n" if code else f"{source}: no errors\n"), (delay, err.text[-2000:])
        interrupted += code == 130
    assert interrupted      # (loading the compiler takes longer than 0.05 s: at least that one is interrupted)


FIRST_CALL_CHILD = _DEFAULT_SIGINT + """
import signal, sys, numpy as np, arrc
mod = arrc.loads("def f(x: f32[n]) -> f32[n]:\\n    return x * 2.0\\n")
assert "jax" not in sys.modules     # (the first call imports it)
signal.signal(signal.SIGALRM, lambda s, f: signal.raise_signal(signal.SIGINT))
signal.setitimer(signal.ITIMER_REAL, float(sys.argv[1]))
try:
    mod.f(np.ones(3, np.float32))
except KeyboardInterrupt:
    pass
signal.setitimer(signal.ITIMER_REAL, 0)
print([mod.f(np.ones(3, np.float32)).tolist() for _ in range(2)], flush=True)
"""


def test_api_interrupted_while_its_first_call_imports_jax():
    """The first call imports jax; Ctrl-C meanwhile left jax half-initialized, and every later call of the
    process failed with an ImportError. jax is now imported whole first (compiler/signals.py)."""
    for delay in (0.01, 0.1, 0.3):
        done = subprocess.run([PYTHON, "-c", FIRST_CALL_CHILD, str(delay)], capture_output=True, text=True,
                              env=_env(), cwd=ROOT, timeout=HANG)
        assert done.returncode == 0, (delay, done.stderr[-2000:])
        assert done.stdout == "[[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]]\n", (delay, done.stderr[-2000:])


PASSES_CHILD = _DEFAULT_SIGINT + """
import collections, signal, numpy as np, arrc
body = "\\n".join(f"    z = z * 1.0001 + sin(z) * {i % 7}.0" for i in range(300))
mod = arrc.loads(f"def g(x: f32[n]) -> f32[n]:\\n    z = x\\n{body}\\n    return z\\n")
mod.g(np.ones(2, np.float32))                   # jax imported, the lowering warm
signal.signal(signal.SIGALRM, lambda s, f: signal.raise_signal(signal.SIGINT))
seen = collections.Counter()
for trial in range(40):                          # each a new specialization: lowering, passes, XLA
    signal.setitimer(signal.ITIMER_REAL, 0.001 + 0.004 * trial)
    try:
        mod.g(np.ones(3 + trial, np.float32))
        seen["finished"] += 1
    except KeyboardInterrupt:
        seen["KeyboardInterrupt"] += 1
    except Exception as err:
        seen[type(err).__name__ + ": " + str(err)[:200]] += 1
    signal.setitimer(signal.ITIMER_REAL, 0)
print(dict(seen), mod.g(np.ones(3, np.float32)).tolist()[:1], flush=True)
"""


def test_api_interrupted_in_a_compile_s_passes_raises_keyboard_interrupt():
    """Ctrl-C in a visitor of an MLIR walk (the passes) was the bindings' RuntimeError ("Exception raised in
    callback"): a third of 120 interrupts. compiler/walk.py holds it back for the walk and raises it after.
    The process then exits normally: a compile that Ctrl-C abandoned on its helper thread is waited for at
    exit (it aborted the process, "FATAL: exception not rethrown", when it returned during finalization)."""
    done = subprocess.run([PYTHON, "-c", PASSES_CHILD], capture_output=True, text=True, env=_env(), cwd=ROOT,
                          timeout=20 * HANG)
    assert done.returncode == 0, done.stderr[-2000:]
    seen, _, first = done.stdout.rpartition(" ")
    assert first == "[8.971586227416992]\n" and set(eval(seen)) <= {"KeyboardInterrupt", "finished"}, done.stdout
    assert "FATAL" not in done.stderr, done.stderr[-2000:]


API_CHILD = _DEFAULT_SIGINT + """
import sys, arrc
m = arrc.load(sys.argv[1])
fn = getattr(m, sys.argv[2])
try:
    fn()
except KeyboardInterrupt:
    print("KeyboardInterrupt", flush=True)
print("after", flush=True)
"""


def test_api_raises_keyboard_interrupt(program):
    """The API: a call (with a print, so through `Compiled.__call__`) interrupted while XLA runs the
    endless loop raises KeyboardInterrupt; the process then ends normally. Twice (a process each)."""
    for attempt in range(2):
        proc, out, err = _start([PYTHON, "-c", API_CHILD, str(program), "main"])
        try:
            assert out.wait_for("start"), (attempt, err.text[-2000:])
            time.sleep(0.05)
            proc.send_signal(signal.SIGINT)
            code = proc.wait(HANG)
        finally:
            _stop(proc)
        assert out.finish() == "start\nKeyboardInterrupt\nafter\n", (attempt, out.text, err.text[-2000:])
        assert code == 0, (attempt, code, err.text[-2000:])


PRINTING = """def main(n: i32) -> i32:
    i = 0
    while i < n:
        if i % 100000 == 0:
            print("at", i)
        i += 1
    return i
"""


def test_api_interrupted_printing_program_stops_and_the_process_exits_cleanly(tmp_path):
    """A call of a program that keeps printing, interrupted, then another call and the script's end: the
    abandoned run went on printing (its prints silenced) and called into Python while the interpreter
    exited, which aborted the process ("FATAL: exception not rethrown", exit 134). Its next print now stops
    it (runtime/effects.py `state_of`), and the exit waits for that (runtime/call.py). Twice."""
    path = tmp_path / "printing.arr"
    path.write_text(PRINTING)
    child = _DEFAULT_SIGINT + (
        "import sys, arrc\nm = arrc.load(sys.argv[1])\ntry:\n    m.main(2 ** 31 - 1)\n"
        "except KeyboardInterrupt:\n    print('KeyboardInterrupt', flush=True)\n"
        "print('after', int(m.main(3)), flush=True)\n")
    for attempt in range(2):
        proc, out, err = _start([PYTHON, "-c", child, str(path)])
        try:
            assert out.wait_for("at 100000"), (attempt, err.text[-2000:])
            proc.send_signal(signal.SIGINT)
            code = proc.wait(HANG)
        finally:
            _stop(proc)
        text = out.finish()
        assert text.endswith("KeyboardInterrupt\nat 0\nafter 3\n"), (attempt, text[-500:], err.text[-2000:])
        assert code == 0 and "FATAL" not in err.text, (attempt, code, err.text[-2000:])


def test_piped_repl_session_survives(program):
    """A piped REPL: a cell running an endless loop is interrupted, `interrupted` is printed and the
    next cell answers, with the session's bindings kept; three times in one session."""
    proc, out, err = _start([PYTHON, "-c", _AS_ARRC, "repl", str(program)], stdin=subprocess.PIPE)
    try:
        proc.stdin.write("k = 40\n")
        proc.stdin.flush()
        for attempt in range(1, 4):
            proc.stdin.write("main()\n")
            proc.stdin.flush()
            assert out.wait_for("start", attempt), (attempt, out.text, err.text[-2000:])
            time.sleep(0.05)
            proc.send_signal(signal.SIGINT)
            assert err.wait_for("interrupted", attempt), (attempt, out.text, err.text[-2000:])
            proc.stdin.write("k + 2\n")
            proc.stdin.flush()
            assert out.wait_for("i32 = 42", attempt), (attempt, out.text, err.text[-2000:])
        proc.stdin.close()
        code = proc.wait(HANG)
    finally:
        _stop(proc)
    assert "Traceback" not in err.text and "Traceback" not in out.text, err.text[-2000:]
    assert code == 3, (code, out.text)      # the interrupted cells failed (a run-time failure)


def test_an_interrupted_repl_cell_stops_printing(tmp_path):
    """A cell whose program keeps printing, interrupted: its run went on printing into the session after
    `interrupted` (its run was the REPL's helper's; runtime/effects.py `abandon` stops it at its next print)."""
    path = tmp_path / "printing.arr"
    path.write_text(PRINTING)
    proc, out, err = _start([PYTHON, "-c", _AS_ARRC, "repl", str(path)], stdin=subprocess.PIPE)
    try:
        proc.stdin.write("main(2147483647)\n")
        proc.stdin.flush()
        assert out.wait_for("at 100000"), (out.text[-500:], err.text[-2000:])
        proc.send_signal(signal.SIGINT)
        assert err.wait_for("interrupted"), (out.text[-500:], err.text[-2000:])
        proc.stdin.write("1 + 1\n")
        proc.stdin.flush()
        assert out.wait_for("i32 = 2"), (out.text[-500:], err.text[-2000:])
        time.sleep(1.0)                     # (where the run went on, it printed a line every few ms)
        proc.stdin.write("2 + 2\n")
        proc.stdin.flush()
        assert out.wait_for("i32 = 4"), (out.text[-500:], err.text[-2000:])
        proc.stdin.close()
        proc.wait(HANG)
    finally:
        _stop(proc)
    after = out.text.split("i32 = 2\n", 1)[1]
    assert after == "i32 = 4\n", after[:300]


QUIET_CHILD = _DEFAULT_SIGINT + """
import numpy as np, arrc
m = arrc.loads('''def spin(n: i64) -> i64:
    i = 0
    k = 0
    while k < n:
        i = (i + 1) % 7
        k = k + 1
    return i
''')
assert m.spin(np.int64(3)) == 3          # compiled; the calls below are plain positional calls
for attempt in range(3):
    print("start", flush=True)
    try:
        m.spin(np.int64(2 ** 62))
    except KeyboardInterrupt:
        print("KeyboardInterrupt", flush=True)
print("after", flush=True)
"""


def test_api_interrupts_a_program_without_effects():
    """A plain positional call of a program with a `while` loop and no effects (the calls the C++ fast
    path would run inline, where no signal handler runs) raises KeyboardInterrupt; three times."""
    proc, out, err = _start([PYTHON, "-c", QUIET_CHILD])
    try:
        for attempt in range(1, 4):
            assert out.wait_for("start", attempt), (attempt, out.text, err.text[-2000:])
            time.sleep(0.2)
            proc.send_signal(signal.SIGINT)
            assert out.wait_for("KeyboardInterrupt", attempt), (attempt, out.text, err.text[-2000:])
        code = proc.wait(HANG)
    finally:
        _stop(proc)
    assert out.finish() == "start\nKeyboardInterrupt\n" * 3 + "after\n", err.text[-2000:]
    assert code == 0, err.text[-2000:]


@pytest.mark.parametrize("body, may_not_end", [
    ("    return x + 1.0\n", False),
    ("    for i in range(5):\n        x = x + 1.0\n    return x\n", False),
    ("    for i in range(1000):\n        for j in range(1001):\n            x = x + 1.0\n    return x\n", False),
    ("    for i in range(k):\n        x = x + 1.0\n    return x\n", False),
    ("    while x[0] < 10.0:\n        x = x + 1.0\n    return x\n", True),
    ("    for i in range(3):\n        while x[0] < 10.0:\n            x = x + 1.0\n    return x\n", True),
])
def test_which_programs_may_not_end(body, may_not_end):
    """Programs with a `while` loop are called through `interruptible`; the others (a `for` loop runs as
    many times as its arguments say) keep the C++ fast path (runtime/call.py `may_not_end`)."""
    import arrc
    from arrc.runtime import call
    lowered = arrc.loads("def f(x: f32[3], k: i32) -> f32[3]:\n" + body).f.lower(arrc.spec("f32[3]"), arrc.spec("i32"))
    with lowered.context:
        assert call.may_not_end(lowered.module) is may_not_end


# ---- the REPL on a terminal, and while XLA compiles (issue 17) ------------------------------------------

def _pty_repl(tmp_path):
    """`arrc repl` on a pseudo-terminal (so it runs its prompt_toolkit loop): its pid, the terminal's fd and
    a reader whose `wait_for` sees the screen's text (escape codes kept; the markers have none)."""
    import pty
    pid, fd = pty.fork()
    if pid == 0:                                            # the child: the REPL on the terminal
        try:
            os.chdir(ROOT)
            env = {**_env(), "TERM": "xterm", "NO_COLOR": "1", "ARRC_REPL_HISTORY": str(tmp_path / "history")}
            os.execve(PYTHON, [PYTHON, "-c", _AS_ARRC, "repl"], env)
        finally:
            os._exit(127)
    return pid, fd, _TerminalReader(os.fdopen(fd, "r", encoding="utf-8", errors="replace", closefd=False))


class _TerminalReader(Reader):
    def _read(self, stream):
        try:
            super()._read(stream)
        except OSError:                 # EIO: the terminal's other side closed
            pass


def _pty_stop(pid: int, fd: int, timeout: float = 20.0) -> int | None:
    """Wait for the REPL to leave (after Ctrl-D); its exit status, or None once killed after `timeout`."""
    deadline = time.monotonic() + timeout
    code = None
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            break
        time.sleep(0.05)
    if code is None:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    os.close(fd)
    return code


def test_terminal_repl_ctrl_c_leaves_an_endless_while(tmp_path):
    """The issue's way in: `arrc repl` on a terminal, an endless `while` typed as a cell, Ctrl-C typed
    (the terminal sends SIGINT). `interrupted`, the prompt back with the session's bindings, twice; then
    Ctrl-D leaves (the abandoned loop does not keep the process alive)."""
    pid, fd, screen = _pty_repl(tmp_path)
    try:
        # Keys typed before the prompt starts would be echoed and read by the terminal's line discipline.
        assert screen.wait_for("REPL: :help"), screen.text[-2000:]
        time.sleep(1.0)
        os.write(fd, b"k = 40\r")
        for attempt in range(1, 3):
            # Enter indents each body (4 spaces more after a `:`); the blank line ends the cell.
            # (`i` is a binding the block updates: a loop whose results nothing uses is removed by XLA)
            os.write(fd, b'i = 0\rif k > 0:\rprint("start")\rwhile i >= 0:\ri = (i + 1) % 7\r\r')
            assert screen.wait_for("start\n", attempt), (attempt, screen.text[-2000:])
            time.sleep(0.3)                                  # into the loop
            os.write(fd, b"\x03")                             # Ctrl-C, as typed
            assert screen.wait_for("interrupted", attempt), (attempt, screen.text[-2000:])
            os.write(fd, b"k + 2\r")
            assert screen.wait_for("i32 = 42", attempt), (attempt, screen.text[-2000:])
        time.sleep(1.0)                                      # at the prompt again (else the line
        os.write(fd, b"\x04")                                 # discipline takes Ctrl-D): Ctrl-D
        code = _pty_stop(pid, fd)
    except BaseException:
        _pty_stop(pid, fd, 0)
        raise
    assert code is not None, ("the REPL did not leave on Ctrl-D", screen.text[-1500:])
    assert "Traceback" not in screen.text, screen.text[-3000:]


def test_piped_repl_interrupted_while_xla_compiles(tmp_path):
    """Ctrl-C while XLA compiles a cell (a chain of 1,500 matrix products: over a minute of XLA here) gives
    the prompt back at once (the compile runs on the helper thread, runtime/call.py `Compiled`): the next
    cell answers with the session's bindings long before the compile could have ended."""
    source = tmp_path / "slow.arr"
    body = "".join(f"    x = sin(x * 1.0001 + {i}.0) @ x\n" for i in range(1500))
    source.write_text("def main() -> f32[8, 8]:\n    x = ones((8, 8))\n" + body + "    return x\n")
    proc, out, err = _start([PYTHON, "-c", _AS_ARRC, "repl", str(source)], stdin=subprocess.PIPE)
    try:
        assert out.wait_for("loaded"), err.text[-2000:]
        proc.stdin.write("k = 40\nmain()\n")
        proc.stdin.flush()
        time.sleep(4.0)                                      # checked again, lowered: XLA is compiling
        if "f32[8, 8]" in out.text:
            pytest.skip("the program compiled before the signal")
        proc.send_signal(signal.SIGINT)
        assert err.wait_for("interrupted", timeout=30), (out.text, err.text[-2000:])
        proc.stdin.write("k + 2\n")
        proc.stdin.flush()
        assert out.wait_for("i32 = 42", timeout=30), (out.text, err.text[-2000:])
        proc.stdin.close()
        code = proc.wait(HANG)
    finally:
        _stop(proc)
    assert "f32[8, 8]" not in out.text and "Traceback" not in err.text, err.text[-2000:]
    assert code == 3, (code, out.text, err.text[-2000:])


def test_a_ctrl_c_python_raised_in_a_garbage_collector_callback_is_not_lost():
    """A Ctrl-C during a long garbage collection is raised in a collector callback (jax's
    `_xla_gc_callback`), where Python prints "Exception ignored" and drops it: a REPL `:load` of a big file
    went on and said "loaded". compiler/signals.py `keep_lost_interrupts` (installed by `arrc` and the REPL)
    keeps it unprinted, and the cell ends as interrupted (`raise_lost_interrupt`, as a command does)."""
    import gc
    import io
    from arrc.compiler import signals
    from arrc.repl.session import Session
    previous = sys.unraisablehook
    signals.keep_lost_interrupts()
    armed = []

    def callback(phase, info):      # as if SIGINT had come during the collection
        if phase == "start" and armed:
            armed.clear()
            raise KeyboardInterrupt
    gc.callbacks.append(callback)
    try:
        session = Session(io.StringIO(), err=io.StringIO())
        assert session.run_cell("x = 1")
        armed.append(True)
        ok = session.guarded(gc.collect)        # a cell in which a collection comes
        assert not ok and session.err.getvalue().endswith("interrupted\n"), session.err.getvalue()
        assert session.guarded(gc.collect)          # one Ctrl-C, one interrupted cell
    finally:
        gc.callbacks.remove(callback)
        sys.unraisablehook = previous


def test_a_thread_abandoned_at_ctrl_c_ends_with_its_job():
    """`interruptible` leaves the job Ctrl-C interrupted to its helper thread, which then ends: each Ctrl-C left
    an idle thread waiting for jobs forever (a notebook that interrupts often piled them up)."""
    import threading
    import time
    from arrc.runtime import call
    before = threading.active_count()
    for _ in range(3):
        release = threading.Event()             # (the job runs until after the Ctrl-C, however late it comes)
        timer = threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            call.interruptible(release.wait, 60)
        timer.join()
        release.set()
    deadline = time.monotonic() + 10
    while call._abandoned and time.monotonic() < deadline:
        time.sleep(0.05)
    assert call._abandoned == []
    assert threading.active_count() <= before + 1      # (the helper of the next call, if one was made before)
