"""Two processes on this machine as one cluster (LANGUAGE.md section 17, docs/sharding.md): each joins through
`arrc.distributed.initialize` (jax.distributed, gloo on loopback) with 2 virtual CPU devices, and a mesh of
all 4 devices runs one SPMD program; results equal one device's, and a guard fault is raised by every
process with the same report. Every process is bounded in time; a test that cannot start them is an error."""
from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

WORKER = textwrap.dedent('''
    import os
    import sys
    # gloo's threads print their connection lines to standard output from native code, in pieces that
    # land inside Python's lines: they go to standard error, Python's output (arrc's prints too) stays
    sys.stdout = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    import arrc
    arrc.distributed.initialize(sys.argv[2], num_processes=2, process_id=int(sys.argv[1]), local_devices=2,
                                timeout_s=60)
    import jax
    import numpy as np
    from arrc.sharding import host_value
    assert (jax.process_count(), len(jax.devices()), len(jax.local_devices())) == (2, 4, 2)
    mod = arrc.loads("""
    def loss(x: f32[b, 4], w: f32[4, 2]) -> f32:
        return sum(tanh(x @ w))

    def normalize(x: f32[b, 4]) -> f32[b, 4]:
        return x / sqrt(sum(x * x, axis=1, keepdims=true))
    """)
    x = np.arange(32, dtype=np.float32).reshape(8, 4) / 10
    w = np.ones((4, 2), np.float32) / 3
    mesh = arrc.mesh(data=4)
    loss = mod.loss.sharded(mesh, in_specs=(("data", None), None))
    np.testing.assert_allclose(host_value(loss(x, w)), mod.loss(x, w), rtol=1e-6)
    rows = mod.normalize.sharded(mesh, in_specs=(("data", None),))(x)
    np.testing.assert_array_equal(host_value(rows), mod.normalize(x))
    # a jax.Array of this process (a typed key, an array on a local device): the whole value, as a NumPy one
    noisy = arrc.loads("def f(k: key, x: f32[8, 4]) -> f32[8, 4]:\\n    return x + normal(k, (8, 4))\\n")
    local = jax.device_put(x, jax.local_devices()[0])
    got = noisy.f.sharded(mesh, in_specs=(None, ("data", None)))(jax.random.key(3), local)
    np.testing.assert_array_equal(host_value(got), noisy.f(jax.random.key(3), x))
    # print and assert: the callbacks run on the first device (process 0 prints), every process raises
    talk = arrc.loads("def f(x: f32[8, 4]) -> f32[8, 4]:\\n    print(\\"sum\\", sum(x))\\n"
                      "    assert all(x < 100.0), \\"small\\"\\n    return x * 2.0\\n", filename="p.arr")
    said = talk.f.sharded(mesh, in_specs=(("data", None),))
    np.testing.assert_array_equal(host_value(said(x)), x * 2)
    import arrc.sharding as spmd            # (a fault's report is sent from the process that made it: no
    gathered, host_value_of = [], spmd.host_value                               # process gathers an argument)
    spmd.host_value = lambda a: (gathered.append(a) if isinstance(a, jax.Array) else None) or host_value_of(a)
    try:
        said(x * 1000)
        print("no report")
    except arrc.AssertionFailed as err:
        print(str(err).splitlines()[0])
    guarded = arrc.loads("def logs(x: f32[b, 4]) -> f32[b, 4]:\\n    return log(x - 1.0)\\n", filename="g.arr",
                         guards="nan,inf")
    bad = np.full((8, 4), 3.0, np.float32)
    bad[5, 2] = 0.5
    try:
        guarded.logs.sharded(mesh, in_specs=(("data", None),))(bad)
        print("no report")
    except arrc.NaNError as err:
        print(str(err).splitlines()[4])
        print(str(err).splitlines()[-1])
    spmd.host_value = host_value_of
    assert gathered == [], len(gathered)
    # a mesh of this process's devices only: its fault is its own (no collective with the other process)
    local = arrc.mesh(data=2, devices=jax.local_devices())
    own = bad if jax.process_index() == 0 else np.full((8, 4), 3.0, np.float32)
    try:
        np.testing.assert_array_equal(guarded.logs.sharded(local, in_specs=(("data", None),))(own), np.log(own - 1))
        print("clean")
    except arrc.NaNError as err:
        print(str(err).splitlines()[-1])
    arrc.distributed.shutdown()
    print("ok", flush=True)
''')


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cluster(commands: list[list[str]], cwd) -> list[subprocess.CompletedProcess]:
    """Start every process, then wait for each (at most 240 s), killing any left behind."""
    procs = [subprocess.Popen(c, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in commands]
    done = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=240)
            done.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    return done


def test_two_processes_run_one_program_and_raise_the_same_report():
    address = f"127.0.0.1:{_port()}"
    done = _cluster([[sys.executable, "-c", WORKER, str(i), address] for i in range(2)], ROOT)
    for p in done:
        assert p.returncode == 0, p.stderr[-3000:]
        lines = p.stdout.splitlines()
        printed = ["sum 49.6", "sum 49600.0"] if p is done[0] else []
        assert lines == printed + [
            "error[R0005]: assertion failed: small",
            "  |            ^^^^^^^^^^^^ this `log` produced NaN at index [5, 2]",
            "  = note: the call ran as one program on 4 devices; the first non-finite element of result 0, at "
            "index [5, 2], is held by device 2048 of process 1",
            "  = note: the call ran as one program on 2 devices; the first non-finite element of result 0, at "
            "index [5, 2], is held by device 1" if p is done[0] else "clean",
            "ok"], p.stdout


def test_the_command_line_joins_a_cluster(tmp_path):
    (tmp_path / "l.arr").write_text("def loss(x: f32[b, 4], w: f32[4, 2]) -> f32:\n    return sum(tanh(x @ w))\n")
    np.save(tmp_path / "x.npy", np.arange(32, dtype=np.float32).reshape(8, 4) / 10)
    np.save(tmp_path / "w.npy", np.ones((4, 2), np.float32) / 3)
    base = [sys.executable, "-m", "arrc", "run", "l.arr", "--entry", "loss", "--arg", "x=@x.npy", "--arg", "w=@w.npy"]
    one = subprocess.run(base, cwd=tmp_path, capture_output=True, text=True, timeout=240)
    address = f"127.0.0.1:{_port()}"
    done = _cluster([base + ["--devices", "2", "--mesh", "data=4", "--shard", "x=data,_", "--coordinator", address,
                             "--num-processes", "2", "--process-id", str(i)] for i in range(2)], tmp_path)
    for p in done:
        assert (p.returncode, p.stdout) == (0, one.stdout), p.stderr[-3000:]      # gloo's lines go to stderr
    wrong = subprocess.run(base + ["--coordinator", address, "--mesh", "data=1"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=240)
    assert (wrong.returncode, wrong.stderr) == (2, "arrc: error: --coordinator HOST:PORT needs --num-processes N, "
                                                   "--process-id I and --mesh (every process runs the same command "
                                                   "with its own --process-id)\n")
    bad = subprocess.run(base + ["--coordinator", "nowhere", "--num-processes", "2", "--process-id", "0", "--mesh",
                                 "data=1"], cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert (bad.returncode, bad.stderr) == (2, "arrc: error: --coordinator: coordinator 'nowhere': write it as "
                                               "HOST:PORT, e.g. 127.0.0.1:9876\n")


def test_a_process_whose_peer_failed_says_so(tmp_path):
    """Process 1 refuses its argument and leaves; process 0 waited for it in the computation's collectives
    until gloo's deadline, then reported an internal error (E0601, "DEADLINE_EXCEEDED"). It says what happened."""
    (tmp_path / "l.arr").write_text("def loss(x: f32[b, 4], w: f32[4, 2]) -> f32:\n    return sum(tanh(x @ w))\n")
    np.save(tmp_path / "x.npy", np.arange(32, dtype=np.float32).reshape(8, 4) / 10)
    np.save(tmp_path / "x64.npy", np.arange(32, dtype=np.float64).reshape(8, 4) / 10)
    np.save(tmp_path / "w.npy", np.ones((4, 2), np.float32) / 3)
    address = f"127.0.0.1:{_port()}"
    done = _cluster([[sys.executable, "-m", "arrc", "run", "l.arr", "--entry", "loss", "--arg",
                      f"x=@{'x.npy' if i == 0 else 'x64.npy'}", "--arg", "w=@w.npy", "--devices", "2", "--mesh",
                      "data=4", "--shard", "x=data,_", "--coordinator", address, "--num-processes", "2",
                      "--process-id", str(i)] for i in range(2)], tmp_path)
    assert done[1].returncode == 2 and "has type f64[8, 4], expected f32[b, 4]" in done[1].stderr
    assert done[0].returncode == 3, done[0].stderr[-3000:]
    assert done[0].stderr.splitlines()[-1] == (
        "arrc: error: another process of this run did not take part in its computation in time: it failed or left "
        "before it (see its own output), or was started with other arguments (every process runs the same command "
        "with its own --process-id)")


def test_a_coordinator_that_never_answers_is_an_error(tmp_path):
    """A process other than 0 whose coordinator never came up was ended by JAX's client when its registration
    timed out: a fatal log with a C++ stack trace, SIGABRT (exit 134), from the command line too."""
    address = f"127.0.0.1:{_port()}"          # (nothing listens there)
    done = subprocess.run([sys.executable, "-c", "import arrc\ntry:\n    arrc.distributed.initialize("
                           f"{address!r}, num_processes=2, process_id=1, timeout_s=2)\nexcept TimeoutError as err:\n"
                           "    print(err)\n"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout) == (0, f"no coordinator answered at {address} within 2 s: process 0 "
                                                 "serves it, started with the same coordinator address\n"), done.stderr



def test_a_port_out_of_range_and_a_bad_timeout_are_value_errors():
    """Ports 0 (a cluster of one process hung past its 60 s) and 99999 (accepted), and a timeout that is not a
    whole number of seconds (JAX's "incompatible function arguments" from its C++ binding) were not checked."""
    import pytest
    import arrc
    for coordinator, timeout_s, why in (("127.0.0.1:0", 60, "the port is a number in 1..65535, not 0"),
                                        ("127.0.0.1:99999", 60, "the port is a number in 1..65535, not 99999"),
                                        ("127.0.0.1:9876", "x", "timeout_s must be a positive whole number"),
                                        ("127.0.0.1:9876", 0, "timeout_s must be a positive whole number")):
        with pytest.raises(ValueError, match=why):
            arrc.distributed.initialize(coordinator, num_processes=2, process_id=1, timeout_s=timeout_s)


def test_counts_are_whole_numbers_numpy_integers_included_and_bools_refused():
    """`num_processes=True` was read as one process; `np.int64(2)` was refused ("must be a positive integer,
    not np.int64(2)"), which `arrc.mesh` takes."""
    import numpy as np
    import pytest
    import arrc
    with pytest.raises(ValueError, match="num_processes must be a positive integer, not True"):
        arrc.distributed.initialize("127.0.0.1:9876", num_processes=True, process_id=0)
    with pytest.raises(ValueError, match=r"process_id must be in 0..1, not np.int64\(5\)"):
        arrc.distributed.initialize("127.0.0.1:9876", num_processes=np.int64(2), process_id=np.int64(5))
