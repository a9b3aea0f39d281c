"""Many devices (LANGUAGE.md section 17, docs/sharding.md): arr functions as one SPMD program over a mesh of 8
virtual CPU devices, in a subprocess (the device count is fixed before JAX's CPU backend starts): results equal
the single-device results, the collectives XLA inserted are in the compiled program, the results' shardings
are the ones XLA chose, and bad meshes and specs are errors with a message."""
from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import arrc

ROOT = Path(__file__).resolve().parent.parent

CHILD = textwrap.dedent('''
    import jax
    jax.config.update("jax_num_cpu_devices", 8)
    jax.config.update("jax_enable_x64", True)
    import numpy as np
    from jax.sharding import NamedSharding, PartitionSpec as P
    import arrc

    mod = arrc.loads("""
    def loss(x: f32[b, 16], w: f32[16, 8]) -> f32:
        return mean(tanh(x @ w) ** 2)

    def step(x: f32[b, 16], w: f32[16, 8]) -> f32[16, 8]:
        return w - 0.1 * grad(loss, argnums=1)(x, w)

    def normalize(x: f32[b, 16]) -> f32[b, 16]:
        return x / sqrt(sum(x * x, axis=1, keepdims=true))

    def power_iteration(a: f64[n, n], v: f64[n], steps: i32) -> f64:
        for i in range(steps):
            v = a @ v
            v = v / sqrt(sum(v * v))
        return sum(v * (a @ v))
    """, filename="s.arr")
    r = np.random.default_rng(0)
    x = r.standard_normal((32, 16)).astype(np.float32)
    w = r.standard_normal((16, 8)).astype(np.float32)
    mesh = arrc.mesh(data=4, model=2)
    assert mesh.devices.shape == (4, 2) and mesh.axis_names == ("data", "model"), mesh

    # data parallel x model parallel: the loss and a training step, against one device
    loss = mod.loss.sharded(mesh, in_specs=(("data", None), (None, "model")))
    np.testing.assert_allclose(loss(x, w), mod.loss(x, w), rtol=1e-6)
    hlo = loss.lower(x, w).compile().as_text()
    assert "all-reduce" in hlo, hlo
    step = mod.step.sharded(mesh, in_specs=("data,_", None), out_specs=(None, "model"))
    new = step(x, w)
    np.testing.assert_allclose(new, mod.step(x, w), rtol=1e-5, atol=1e-7)
    assert new.sharding.spec == P(None, "model"), new.sharding

    # sharded jax.Arrays in a plain call: one SPMD program, the result sharded as XLA chose
    xs = jax.device_put(x, NamedSharding(mesh, P("data", None)))
    out = mod.normalize(xs)
    assert len(out.sharding.device_set) == 8 and out.sharding.spec == P("data"), out.sharding
    np.testing.assert_array_equal(np.asarray(out), np.asarray(mod.normalize(x)))
    again = mod.normalize(xs)                                   # (the dispatcher's second call)
    np.testing.assert_array_equal(np.asarray(again), np.asarray(out))

    # the f64 power iteration with a run-time loop, the matrix split by rows
    a = r.standard_normal((64, 64)); a = (a + a.T) / 2
    v = np.ones(64)
    rows = mod.power_iteration.sharded(mesh, in_specs=("data", None, None))
    np.testing.assert_allclose(rows(a, v, 30), mod.power_iteration(a, v, 30), rtol=1e-12)

    # an update at a run-time index out of range lands where one device clamps it (XLA's partitioner dropped
    # it: passes/spmd.py), in a program and in the gradient of a read
    writes = arrc.loads("""
    def put(x: f32[32, 16], k: i32) -> f32[32, 16]:
        x[k, 0] = 5.0
        return x

    def read(x: f32[32, 16], k: i32) -> f32:
        return sum(x * x) + x[k, 0]

    def slope(x: f32[32, 16], k: i32) -> f32[32, 16]:
        return grad(read)(x, k)
    """)
    for f in (writes.put, writes.slope):
        np.testing.assert_allclose(f.sharded(mesh, in_specs=(("data", None), None))(x, 40), f(x, 40), rtol=1e-6)

    # many calls queued without waiting (about a hundred hang XLA:CPU's collectives, then abort the process):
    # arrc keeps at most MAX_IN_FLIGHT in flight
    queued = [loss(x, w) for _ in range(300)]
    jax.block_until_ready(queued)
    np.testing.assert_allclose(queued[-1], mod.loss(x, w), rtol=1e-6)

    # a fault in a plain call on a sharded array with a Python scalar beside it: the scalar is passed on as is
    scaled = arrc.loads("def f(x: f32[b, 16], k: i32) -> f32[b, 16]:\\n    return log(x - 1.0) * k\\n",
                        guards="nan,inf")
    bad = np.abs(x) + 2.0
    bad[1, 1] = 0.5
    try:
        scaled.f(jax.device_put(bad, NamedSharding(mesh, P("data", None))), 3)
        raise AssertionError("no report")
    except arrc.NaNError:
        pass

    # a training loop from a random initialisation: a key argument (replicated), grad in a run-time loop
    trainer = arrc.loads("""
    def loss(x: f32[b, 16], w: f32[16, 8]) -> f32:
        return mean(tanh(x @ w) ** 2)

    def train(k: key, x: f32[b, 16], steps: i32) -> f32[16, 8]:
        w = normal(k, (16, 8)) * 0.1
        for i in range(steps):
            w = w - 0.1 * grad(loss, argnums=1)(x, w)
        return w
    """, filename="t.arr", warnings="error")
    train = trainer.train.sharded(mesh, in_specs=(None, ("data", None), None))
    np.testing.assert_allclose(train(jax.random.key(0), x, 5), trainer.train(jax.random.key(0), x, 5),
                               rtol=1e-5, atol=1e-7)

    # guards="all" runs SPMD: bounds and div0 check inside the program (their callbacks on the first device),
    # nan/inf at the results; a fault is reported as a call on one device reports it, with a note of the devices
    normalize_src = "def normalize(x: f32[b, 16]) -> f32[b, 16]:\\n    return x / sqrt(sum(x * x, axis=1, keepdims=true))\\n"
    guarded = arrc.loads(normalize_src + """
    def pick(x: f32[b, 16], i: i32) -> f32[16]:
        return x[i]

    def share(n: i32[b], d: i32) -> i32[b]:
        return n // d
    """, filename="h.arr", guards="all")
    from arrc.runtime import effects          # (nothing to check inside normalize: no run is made, none waited on)
    begun, begin = [], effects.begin
    effects.begin = lambda *a, **k: begun.append(a) or begin(*a, **k)
    same_all = guarded.normalize(xs)
    np.testing.assert_allclose(np.asarray(guarded.normalize.sharded(mesh, in_specs=(("data", None),))(x)),
                               np.asarray(same_all), rtol=1e-6)
    effects.begin = begin
    assert begun == [], begun
    assert len(same_all.sharding.device_set) == 8, same_all.sharding
    np.testing.assert_array_equal(np.asarray(same_all), np.asarray(out))
    counts = np.arange(32, dtype=np.int32)
    import arrc.sharding as spmd                    # (a fault's report is made SPMD too: nothing is gathered)
    gathered, host_value = [], spmd.host_value
    spmd.host_value = lambda a: gathered.append(a) or host_value(a)
    np.testing.assert_array_equal(guarded.share.sharded(mesh, in_specs=("data", None))(counts, 3), counts // 3)
    for call, alone in ((lambda: guarded.pick.sharded(mesh, in_specs=(("data", "model"), None))(x, 40),
                         lambda: guarded.pick(x, 40)),
                        (lambda: guarded.share.sharded(mesh, in_specs=("data", None))(counts, 0),
                         lambda: guarded.share(counts, 0))):
        try:
            call()
            raise AssertionError("no report")
        except arrc.GuardError as err:
            sharded_report = str(err)
        try:
            alone()
            raise AssertionError("no report")
        except arrc.GuardError as err:
            assert sharded_report.startswith(str(err).rstrip("\\n")), (sharded_report, str(err))
        print(sharded_report.splitlines()[0], sharded_report.splitlines()[-1], sep="\\n")
    # an extern's index checked sharded too (its JAX ops are arr's before the guard pass, as on one device)
    picking = arrc.loads("extern def pick(x: f32[32, 16], i: i32) -> f32[16]\\n"
                         "def g(x: f32[32, 16], i: i32) -> f32[16]:\\n    return pick(x, i) * 2.0\\n",
                         filename="x.arr", guards="bounds", externs={"pick": lambda x, i: x[i]})
    try:
        picking.g.sharded(mesh, in_specs=(("data", None), None))(x, 40)
        raise AssertionError("no report")
    except arrc.BoundsError as err:
        assert "index 40 is out of range for dimension 0 of size 32" in str(err), str(err)
    origins = arrc.loads("def logs(x: f32[b, 16]) -> f32[b, 16]:\\n    return log(x - 1.0)\\n", filename="o.arr",
                         guards="nan,inf", guard_scope="all-ops")
    try:
        origins.logs.sharded(mesh, in_specs=(("data", None),))(x)
        raise AssertionError("no report")
    except arrc.NaNError as err:
        print(str(err).splitlines()[4])

    # nan/inf guards run SPMD: no fault, the SPMD results; a fault, the origin's report with its global index
    # and the device that holds the bad result element
    checked = arrc.loads(normalize_src + "\\ndef logs(x: f32[b, 16]) -> f32[b, 16]:\\n    y = x - 1.0\\n"
                         "    return log(y)\\n", filename="g.arr", guards="nan,inf")
    same = checked.normalize(xs)
    assert len(same.sharding.device_set) == 8, same.sharding
    np.testing.assert_array_equal(np.asarray(same), np.asarray(out))
    logs = checked.logs.sharded(mesh, in_specs=(("data", "model"),))
    fine = np.abs(x) + 2.0
    np.testing.assert_allclose(np.asarray(logs(fine)), checked.logs(fine), rtol=1e-6)
    bad = fine.copy()
    bad[13, 5] = 0.5
    for call in (lambda: logs(bad), lambda: checked.logs(jax.device_put(bad, NamedSharding(mesh, P("data", None))))):
        try:
            call()
            raise AssertionError("no report")
        except arrc.NaNError as err:
            print(str(err).splitlines()[4], str(err).splitlines()[-1], sep="\\n")
    spmd.host_value = host_value
    assert gathered == [], len(gathered)

    # errors with a message, before anything runs
    def message(call):
        try:
            call()
        except (arrc.ArgumentError, arrc.CompileError, ValueError) as err:
            return f"{type(err).__name__}: {err}"
        raise AssertionError("no error")

    # print and assert run sharded: the callbacks on the first device (each line once), a failed assert's
    # report as on one device
    talk = arrc.loads("""
    def f(x: f32[b, 16]) -> f32[b, 16]:
        print("total", sum(x > 0.0), "corner", x[0, 0])
        assert all(isfinite(x)), "x must be finite"
        return x * 2.0
    """, filename="a.arr")
    said = talk.f.sharded(mesh, in_specs=(("data", "model"),))
    np.testing.assert_array_equal(np.asarray(said(x)), x * 2)
    np.testing.assert_array_equal(np.asarray(talk.f(xs)), x * 2)
    broken = x.copy()
    broken[9, 3] = np.inf
    reports = []
    for call in (lambda: said(broken), lambda: talk.f(broken)):
        try:
            call()
            raise AssertionError("no report")
        except arrc.AssertionFailed as err:
            reports.append(str(err))
    assert reports[0] == reports[1], reports
    print(reports[0])

    # a derivative that checks a loop's `bound=` runs sharded too: a run past the bound is reported by a host
    # callback (passes/spmd.py `ReportPast`), the report of one device
    taped = arrc.loads("""
    def f(x: f32[b, 16], n: i32) -> f32:
        for i in range(n, bound=4):
            x = x * 1.5
        return sum(x)

    def df(x: f32[b, 16], n: i32) -> f32[b, 16]:
        return grad(f)(x, n)
    """, filename="t.arr")
    tape = taped.df.sharded(mesh, in_specs=(("data", None), None))
    np.testing.assert_allclose(tape(x, 3), taped.df(x, 3), rtol=1e-6)
    spread = taped.df(xs, 3)            # (a plain call on sharded arguments: the SPMD program, its results)
    assert len(spread.sharding.device_set) == 8
    np.testing.assert_allclose(np.asarray(spread), taped.df(x, 3), rtol=1e-6)
    reports = []
    for call in (lambda: tape(x, 6), lambda: taped.df(xs, 6), lambda: taped.df(x, 6)):
        try:
            call()
            raise AssertionError("no report")
        except arrc.LoopBoundExceeded as err:
            reports.append(str(err))
    assert reports[0] == reports[1] == reports[2], reports
    print(reports[0].splitlines()[0])

    # `shard` in the language: Shardy's constraints, which XLA partitions by (one device: nothing)
    placed = arrc.loads("""
    def f(x: f32[b, 16], w: f32[16, 8]) -> f32[b, 8]:
        h = shard(tanh(x), "data", None)
        return shard(h @ w, None, "model")

    def loss(x: f32[b, 16], w: f32[16, 8]) -> f32:
        return mean(shard(x @ w, ("data", "model"), None) ** 2)

    def step(x: f32[b, 16], w: f32[16, 8]) -> f32[16, 8]:
        return w - 0.1 * grad(loss, argnums=1)(x, w)

    def bad(x: f32[b, 16]) -> f32[b, 16]:
        return shard(x, "rows", None)
    """, filename="p.arr")
    # max and min across a split axis, NaN kept (their reduce is one XLA's partitioner splits: it refused
    # arr's compare-and-select body, "UNIMPLEMENTED: Unsupported reduction computation")
    ends = arrc.loads("""
    def ends(x: f32[b, 16]) -> (f32, f32[16], f32[b]):
        return max(x), min(x, axis=0), max(x, axis=1)
    """)
    holed = x.copy()
    holed[5, 3] = np.nan
    for data in (x, holed):
        split = ends.ends.sharded(mesh, in_specs=(("data", "model"),))(data)
        for got, want in zip(split, ends.ends(data)):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert np.isnan(np.asarray(split[0])) and np.isnan(np.asarray(split[1])[3])

    # out_specs: one entry per result, as in_specs (for one result its spec alone does too), names checked
    for specs in (((None, "model"),), (None, "model")):
        assert mod.normalize.sharded(mesh, out_specs=specs)(x).sharding.spec == P(None, "model"), specs
    for fn, specs, why in ((mod.normalize, ((None, "zz"),), "out_specs of result 0 names `zz`"),
                           (ends.ends, (None, None), "out_specs has 2 entries for 3 result(s)")):
        try:
            fn.sharded(mesh, out_specs=specs)
            raise AssertionError(specs)
        except arrc.ArgumentError as err:
            assert why in str(err), err
    f = placed.f.sharded(mesh)
    got = f(x, w)
    np.testing.assert_allclose(got, placed.f(x, w), rtol=1e-6)
    assert got.sharding.spec == P(None, "model"), got.sharding
    assert f.lower(x, w).as_text().count("sdy.sharding_constraint") == 2
    assert "all-gather" in f.lower(x, w).compile().as_text()
    np.testing.assert_allclose(placed.step.sharded(mesh)(x, w), placed.step(x, w), rtol=1e-5, atol=1e-7)
    with jax.set_mesh(mesh):                # (as_jax: the mesh JAX traces under, as with_sharding_constraint)
        dw = jax.jit(jax.grad(placed.loss.as_jax(), argnums=1))(x, w)
        np.testing.assert_allclose(dw, jax.grad(lambda x, w: jax.numpy.mean((x @ w) ** 2), argnums=1)(x, w),
                                   rtol=1e-5, atol=1e-7)
        lanes = jax.jit(jax.vmap(placed.f.as_jax(), in_axes=(0, None)))(np.stack([x, x]), w)
        assert lanes.sharding.spec == P(None, None, "model"), lanes.sharding
    print(message(lambda: placed.bad.sharded(mesh)(x)))
    print(message(lambda: loss(x[:30], w)))
    print(message(lambda: arrc.mesh(data=16)))
    print(message(lambda: mod.loss.sharded(mesh, in_specs=(("batch", None), None))))
    print(message(lambda: mod.loss.sharded(mesh, in_specs=(None,))))
    print(message(lambda: arrc.mesh(data=0)))
    print(message(lambda: loss(x.astype(np.float64), w)))      # jax.jit alone would narrow it to f32
    print(message(lambda: loss(x)))
    print("ok")
''')


def test_sharded_programs_equal_one_device_on_8_virtual_devices():
    done = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == (
        "error[R0003]: index out of range at run time\n"
        "  = note: the call ran as one program on 8 devices\n"
        "error[R0004]: integer division by zero at run time\n"
        "  = note: the call ran as one program on 8 devices\n"
        "  |            ^^^^^^^^^^^^ this `log` produced NaN at index [0, 0]\n"
        "  |            ^^^^^^ this `log` produced NaN at index [13, 5]\n"
        "  = note: the call ran as one program on 8 devices; the first non-finite element of result 0, at index "
        "[13, 5], is held by device 2\n"
        "  |            ^^^^^^ this `log` produced NaN at index [13, 5]\n"
        "  = note: the call ran as one program on 8 devices; the first non-finite element of result 0, at index "
        "[13, 5], is held by devices 2, 3\n"
        "total 245 corner 0.12573022\n"
        "total 245 corner 0.12573022\n"
        "total 246 corner 0.12573022\n"
        "total 246 corner 0.12573022\n"
        "error[R0005]: assertion failed: x must be finite\n"
        " --> a.arr:4:5\n"
        "  |\n"
        "4 |     assert all(isfinite(x)), \"x must be finite\"\n"
        "  |     ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^ this condition is false\n"
        "  |\n"
        "  = note: in f\n"
        "\n"
        "error[R0006]: this `for` loop ran 6 iterations, more than its bound of 4\n"
        "CompileError: error[E0204]: `shard`: mesh axis `rows` is not an axis of the mesh (data=4, model=2)\n"
        "  --> p.arr:13:12\n"
        "   |\n"
        "13 |     return shard(x, \"rows\", None)\n"
        "   |            ^^^^^^^^^^^^^^^^^^^^^^ `rows` here\n\n"
        "ArgumentError: argument `x`: dimension 0 has size 30, which data (4 devices) does not divide\n"
        "ValueError: the mesh data=16 needs 16 devices; 8 are available (for virtual CPU devices: "
        "jax.config.update(\"jax_num_cpu_devices\", N) before JAX starts, or "
        "XLA_FLAGS=--xla_force_host_platform_device_count=N)\n"
        "ArgumentError: in_specs of `x` names `batch`, which is not an axis of the mesh (data, model)\n"
        "ArgumentError: loss(x: f32[b, 16], w: f32[16, 8]) -> f32: in_specs has 1 entries for 2 parameter(s)\n"
        "ValueError: mesh axis `data` must have a positive integer size, not 0\n"
        "ArgumentError: argument `x` of `loss` has type f64[32, 16], expected f32[b, 16]. NumPy's default float "
        "dtype is float64. Convert it with `x.astype(np.float32)`, or declare the parameter `f64[b, 16]` (arr does "
        "not convert it for you: f64 -> f32 loses precision, and arr never loses it silently, where JAX with its "
        "64-bit mode off truncates float64 to float32 without a word; see docs/api.md)\n"
        "ArgumentError: loss(x: f32[b, 16], w: f32[16, 8]) -> f32 takes 2 argument(s), 1 given: missing argument "
        "`w`\n"
        "ok\n")


def test_the_command_line_runs_a_function_over_a_mesh(tmp_path):
    """`arrc run --devices 8 --mesh data=4,model=2 --shard x=data,_ ...` prints what one device prints; its
    mistakes are usage errors (exit 2) that say what to write."""
    import numpy as np
    (tmp_path / "m.arr").write_text("def loss(x: f32[b, 4], w: f32[4, 2]) -> f32:\n    return sum(tanh(x @ w))\n")
    np.save(tmp_path / "x.npy", np.arange(32, dtype=np.float32).reshape(8, 4) / 10)
    np.save(tmp_path / "w.npy", np.ones((4, 2), np.float32) / 3)
    base = [sys.executable, "-m", "arrc", "run", "m.arr", "--entry", "loss", "--arg", "x=@x.npy", "--arg", "w=@w.npy"]

    def run(*flags):
        done = subprocess.run(base + list(flags), cwd=tmp_path, capture_output=True, text=True, timeout=300)
        return done.returncode, done.stdout, done.stderr
    one = run()
    assert one[0] == 0 and one[2] == "", one
    assert run("--devices", "8", "--mesh", "data=4,model=2", "--shard", "x=data,_", "--shard", "w=_,model") == one
    assert run("--devices", "8", "--mesh", "data=16") == (2, "", "arrc: error: --mesh data=16: the mesh data=16 needs "
                                                              "16 devices; 8 are available; --devices N makes N "
                                                              "virtual CPU devices\n")
    assert run("--devices", "8", "--mesh", "data=3", "--shard", "x=data,_") == (
        2, "", "arrc: error: argument `x`: dimension 0 has size 8, which data (3 devices) does not divide\n")
    assert run("--shard", "x=data") == (2, "", "arrc: error: --shard needs --mesh (e.g. --mesh data=8 --shard "
                                               "x=data,_)\n")
    # (each was accepted, the last one used)
    assert run("--devices", "8", "--mesh", "data=4,data=2") == (
        2, "", "arrc: error: --mesh data=4,data=2: the axis `data` is given twice\n")
    assert run("--devices", "8", "--mesh", "data=4", "--shard", "x=data,_", "--shard", "x=_,data") == (
        2, "", "arrc: error: --shard x is given twice\n")
    assert run("--devices", "8", "--mesh", "data=8", "--shard", "y=data") == (
        2, "", "arrc: error: --shard y=...: `loss` has no parameter `y` (its parameters: x, w)\n")
    # print runs sharded: once, as on one device
    (tmp_path / "p.arr").write_text("def f(x: f32[8]) -> f32:\n    print(\"x\", x)\n    return sum(x)\n")
    printing = [sys.executable, "-m", "arrc", "run", "p.arr", "--entry", "f", "--arg", "x=[1, 2, 3, 4, 5, 6, 7, 8]"]
    alone = subprocess.run(printing, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    done = subprocess.run(printing + ["--devices", "8", "--mesh", "data=8", "--shard", "x=data"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert (done.returncode, done.stdout) == (0, alone.stdout) == (0, "x [1. 2. 3. 4. 5. 6. 7. 8.]\n36.0\n"), done.stderr
    # nan/inf guards run sharded from the command line too: a fault is the report, exit 3
    bad = np.full((8, 4), 3.0, np.float32)
    bad[5, 2] = 0.5
    np.save(tmp_path / "bad.npy", bad)
    (tmp_path / "g.arr").write_text("def logs(x: f32[b, 4]) -> f32[b, 4]:\n    return log(x - 1.0)\n")
    guarded = subprocess.run([sys.executable, "-m", "arrc", "run", "g.arr", "--entry", "logs", "--arg", "x=@bad.npy",
                              "--devices", "8", "--mesh", "data=4,model=2", "--shard", "x=data,model", "--guards",
                              "nan,inf"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert guarded.returncode == 3 and guarded.stderr.splitlines()[-1] == (
        "  = note: the call ran as one program on 8 devices; the first non-finite element of result 0, at index "
        "[5, 2], is held by device 5"), guarded.stderr
    assert run("--devices", "8", "--mesh", "data=8", "--guards", "all", "--guard-scope", "all-ops") == one
    # arrc compile --mesh: the SPMD program's StableHLO with its shardings, or XLA's partitioned HLO
    compiled = subprocess.run([sys.executable, "-m", "arrc", "compile", "m.arr", "--entry", "loss", "--shape", "b=8",
                               "--devices", "8", "--mesh", "data=4,model=2", "--shard", "x=data,_", "--shard",
                               "w=_,model"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert compiled.returncode == 0, compiled.stderr
    assert 'sdy.mesh @mesh = <["data"=4, "model"=2]>' in compiled.stdout
    assert '%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}' in compiled.stdout
    partitioned = subprocess.run([sys.executable, "-m", "arrc", "compile", "m.arr", "--entry", "loss", "--shape", "b=8",
                                  "--devices", "8", "--mesh", "data=8", "--shard", "x=data,_", "--emit", "hlo"],
                                 cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert partitioned.returncode == 0 and "all-reduce" in partitioned.stdout, partitioned.stderr
    # a literal list argument is the parameter's array, as in a call on one device
    listed = subprocess.run(base[:4] + ["m.arr", "--entry", "loss", "--arg", "w=@w.npy", "--arg",
                                        "x=" + str(np.full((8, 4), 0.5).tolist()), "--devices", "8", "--mesh", "data=8",
                                        "--shard", "x=data,_"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert (listed.returncode, listed.stderr) == (0, ""), listed.stderr


def test_a_module_compiled_over_a_mesh_runs_as_one_compiled_for_one_device(tmp_path):
    """`arrc run` of an `arrc compile --mesh` module prints and asserts as the module compiled for one device does,
    without --guards, its parameters named as in the source. It printed nothing and lost a failed assert (its
    callbacks' run id was an argument `run_id` the user filled in, reported to no call), and took `args[0]`, ..."""
    import numpy as np
    (tmp_path / "c.arr").write_text('def loss(x: f32[b, 4], w: f32[4, 2]) -> f32:\n    print("loss", sum(x))\n'
                                    '    assert sum(x) < 0.0, "must be negative"\n    return sum((x @ w) * (x @ w))\n')
    np.save(tmp_path / "pos.npy", np.linspace(0.1, 3, 32, dtype=np.float32).reshape(8, 4))
    np.save(tmp_path / "neg.npy", -np.linspace(0.1, 3, 32, dtype=np.float32).reshape(8, 4))
    np.save(tmp_path / "w.npy", np.ones((4, 2), np.float32))

    def arrc_(*argv):
        done = subprocess.run([sys.executable, "-m", "arrc", *argv], cwd=tmp_path, capture_output=True, text=True,
                              timeout=300)
        return done.returncode, done.stdout, done.stderr
    compile_ = ["compile", "c.arr", "--entry", "loss", "--shape", "b=8"]
    assert arrc_(*compile_, "-o", "one.mlir")[0] == 0
    made = arrc_(*compile_, "--devices", "8", "--mesh", "data=4,model=2", "--shard", "x=data,_", "-o", "spmd.mlir")
    assert made[0] == 0, made
    for x in ("neg", "pos"):
        one = arrc_("run", "one.mlir", "--arg", f"x=@{x}.npy", "--arg", "w=@w.npy")
        assert arrc_("run", "spmd.mlir", "--arg", f"x=@{x}.npy", "--arg", "w=@w.npy") == one
    assert one[:2] == (3, "loss 49.6\n") and "error[R0005]: assertion failed: must be negative" in one[2], one
    assert "= note: in loss" in one[2], one
    assert arrc_("run", "spmd.mlir") == (2, "", "arrc: error: spmd.mlir takes arguments x, w; missing: --arg x=...\n")


def test_shard_on_one_device_changes_nothing():
    """`shard(...)` constrains a layout over a mesh; a call on one device, arr's vmap and arr's grad of it
    compute what the same function without it does."""
    import jax
    import numpy as np
    import arrc
    mod = arrc.loads(textwrap.dedent('''
        def norm(x: f32[16]) -> f32[16]:
            return shard(x, "model") / sqrt(sum(x * x))

        def rows(x: f32[b, 16]) -> f32[b, 16]:
            return vmap(norm)(shard(x, ("data", "model"), None))

        def loss(x: f32[b, 16]) -> f32:
            return sum(rows(x) ** 3)
    '''))
    x = np.random.default_rng(1).standard_normal((6, 16)).astype(np.float32)
    np.testing.assert_allclose(mod.rows(x), x / np.linalg.norm(x, axis=1, keepdims=True), rtol=1e-6)
    with jax.enable_x64(True):
        expected = jax.grad(lambda x: jax.numpy.sum((x / jax.numpy.linalg.norm(x, axis=1, keepdims=True)) ** 3))(x)
    np.testing.assert_allclose(arrc.grad(mod.loss)(x), expected, rtol=1e-5, atol=1e-6)
    assert '"shard"' in mod.rows.lower(x).as_text()
    origins = arrc.loads(mod_src := "def f(x: f32[8, 8]) -> f32[8, 8]:\n    return shard(x, \"data\", None) * 2.0\n",
                         guards="nan", guard_scope="all-ops")
    plain = arrc.loads(mod_src.replace('shard(x, "data", None)', "x"), guards="nan", guard_scope="all-ops")
    y = np.ones((8, 8), np.float32)         # (the guard pass checks what computes: `shard` lays out)
    callbacks = [m.f.lower(y, guarded=True).as_text().count("xla_ffi_python_cpu_callback") for m in (origins, plain)]
    assert callbacks[0] == callbacks[1], callbacks


def test_a_mesh_that_names_a_device_twice_is_refused():
    """It was accepted, and a call over it failed inside JAX (`safe_zip() argument 1 has length 2 ...`)."""
    import jax
    device = jax.devices()[0]
    with pytest.raises(ValueError, match="the mesh data=2 names a device twice"):
        arrc.mesh(devices=[device, device], data=2)



def test_a_mesh_takes_numpy_integer_sizes():
    """`arrc.mesh(data=np.int64(4))` (a size read from a shape or an array, as jax.make_mesh takes it) was
    refused: "mesh axis `data` must have a positive integer size, not np.int64(4)"."""
    import jax
    import numpy as np
    mesh = arrc.mesh(devices=jax.devices()[:1], data=np.int64(1))
    assert dict(mesh.shape) == {"data": 1} and type(mesh.shape["data"]) is int, mesh
    for size in (np.int32(0), np.bool_(True), np.float64(1.0)):
        with pytest.raises(ValueError, match="must have a positive integer size"):
            arrc.mesh(data=size)


def test_a_mesh_takes_its_devices_as_an_array_and_refuses_other_things():
    """`devices=other_mesh.devices` (a 2-D array) was taken by its rows (2 x 4 devices for data=2, model=4: "needs 8
    devices; 2 are available"; 1 x 1: "unhashable type: 'numpy.ndarray'"); `devices=3` was "'int' object is not iterable"; a list of strings
    made a mesh whose call failed inside JAX ("'numpy.str_' object has no attribute 'platform'")."""
    import jax
    import numpy as np
    grid = np.array(jax.devices()[:1]).reshape(1, 1)
    assert arrc.mesh(devices=grid, data=1).devices.tolist() == [jax.devices()[0]]
    for devices, shown in ((3, "3"), (["cpu:0"], "'cpu:0'")):
        with pytest.raises(TypeError, match=f"devices holds {shown}, which is not a JAX device"):
            arrc.mesh(devices=devices, data=1)


def test_a_spec_entry_that_is_not_an_axis_name_is_an_argument_error():
    """An int, a float or P.UNCONSTRAINED in a spec was Python's "'int' object is not iterable"; bytes were read
    as axes named by their codes ("names `100`"), a None in a tuple as an axis named `None`. A 0 or False (the
    dimension's number, as vmap's in_axes=0) left that dimension replicated without a word: PartitionSpec reads
    them as None."""
    import jax
    import numpy as np
    from jax.sharding import PartitionSpec as P
    mod = arrc.loads("def f(x: f32[n, m]) -> f32[n, m]:\n    return x * 2.0\n")
    mesh = arrc.mesh(devices=jax.devices()[:1], data=1)
    for spec, shown in (((1, None), "1"), (("data", 2.5), "2.5"), (P(P.UNCONSTRAINED, None), "UNCONSTRAINED"),
                        ((b"data",), "b'data'"), ((("data", None),), "('data', None)"), ((0, None), "0"),
                        ((None, False), "False")):
        for specs in ({"in_specs": (spec,)}, {"out_specs": (spec,)}):
            with pytest.raises(arrc.ArgumentError, match=f": {re.escape(shown)} is not a mesh axis name, None "
                                                         "\\(not split\\) or a tuple of names"):
                mod.f.sharded(mesh, **specs)
    split = mod.f.sharded(mesh, in_specs=((["data"], None),), out_specs=(None, ("data",)))
    np.testing.assert_array_equal(np.asarray(split(np.ones((2, 2), np.float32))), np.full((2, 2), 2.0))


def test_a_transform_of_a_sharded_function_says_to_transform_first():
    """`arrc.grad(mod.loss.sharded(mesh))` was "grad takes an arr function (e.g. `mod.loss`), not
    <arrc.sharding.Sharded object at 0x...>", and vmap's pointed at JAX; the transform of the function, sharded
    afterwards, runs."""
    import jax
    import numpy as np
    mod = arrc.loads("def loss(x: f32[n]) -> f32:\n    return sum(x * x)\n")
    mesh = arrc.mesh(devices=jax.devices()[:1], data=1)
    for transform in (arrc.grad, arrc.value_and_grad, arrc.vjp, arrc.jvp, arrc.vmap):
        name = transform.__name__
        with pytest.raises(TypeError, match=re.escape(
                f"{name} takes an arr function, not a sharded one (loss.sharded(data=1)): transform the function "
                f"first, then shard the result: `arrc.{name}(mod.loss).sharded(mesh, ...)`")):
            transform(mod.loss.sharded(mesh, in_specs=("data",)))
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(arrc.grad(mod.loss).sharded(mesh, in_specs=("data",))(x)), 2 * x)

PRELUDE = textwrap.dedent('''
    import jax
    jax.config.update("jax_num_cpu_devices", 8)
    import numpy as np
    import arrc
    mesh = arrc.mesh(data=4, model=2)

    def message(call):
        try:
            call()
        except (arrc.ArgumentError, arrc.CompileError) as err:
            return f"{type(err).__name__}: {err}"
        raise AssertionError("no error")
''')


def in_child(code: str) -> str:
    """What `code` prints, run after PRELUDE (8 virtual CPU devices, `mesh` data=4 x model=2, `message`) in a
    child process: the device count is fixed before JAX's CPU backend starts."""
    done = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_a_spec_that_names_an_axis_twice_is_an_argument_error(tmp_path):
    """It was JAX's DuplicateSpecError, from the command line an internal error (E0601, exit 4)."""
    out = in_child('''
        mod = arrc.loads("def f(x: f32[8, 8]) -> f32[8, 8]:\\n    return x\\n")
        print(message(lambda: mod.f.sharded(mesh, in_specs=(("data", "data"),))))
        print(message(lambda: mod.f.sharded(mesh, out_specs=((("model", "model"), None),))))
    ''')
    assert out == ("ArgumentError: in_specs of `x`, P('data', 'data'), names mesh axis `data` twice: an axis splits "
                   "one dimension, once\n"
                   "ArgumentError: out_specs of result 0, P(('model', 'model'), None), names mesh axis `model` twice: "
                   "an axis splits one dimension, once\n")
    (tmp_path / "m.arr").write_text("def f(x: f32[8, 8]) -> f32[8, 8]:\n    return x\n")
    for verb in (["run", "m.arr", "--arg", "x=" + str([[1.0] * 8] * 8)], ["compile", "m.arr"]):
        done = subprocess.run([sys.executable, "-m", "arrc", *verb, "--entry", "f", "--devices", "8", "--mesh",
                               "data=4", "--shard", "x=data,data"], cwd=tmp_path, capture_output=True, text=True,
                              timeout=300)
        assert (done.returncode, done.stdout, done.stderr) == (
            2, "", "arrc: error: --shard: in_specs of `x`, P('data', 'data'), names mesh axis `data` twice: an axis "
                   "splits one dimension, once\n"), verb


def test_a_sharded_call_binds_its_arguments_as_a_call_does():
    """Keywords and defaults: `.sharded(...)` took positional arguments only, all given (a default left out was
    JAX's `pjit in_shardings specification must be a tree prefix`); a plain call on a sharded argument with a
    keyword ran on one device."""
    out = in_child('''
        from jax.sharding import NamedSharding, PartitionSpec as P
        mod = arrc.loads("def dflt(x: f32[n], a: f32 = 2.0) -> f32[n]:\\n    return x * a\\n")
        x = np.arange(8, dtype=np.float32)
        f = mod.dflt.sharded(mesh, in_specs=("data", None))
        twin = jax.jit(lambda x, a: x * a, in_shardings=(NamedSharding(mesh, P("data")), NamedSharding(mesh, P())))
        xs = jax.device_put(x, NamedSharding(mesh, P("data")))
        for got, a in ((f(x), 2.0), (f(x, a=3.0), 3.0), (f(a=0.5, x=x), 0.5), (f(x, 4.0), 4.0),
                       (mod.dflt(xs, a=3.0), 3.0), (mod.dflt(xs), 2.0)):
            want = twin(x, np.float32(a))
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
            assert got.sharding.spec == want.sharding.spec == P("data"), got.sharding
        assert "tensor<8xf32>" in f.lower(x, a=3.0).as_text()
        print(message(lambda: f(x, 1.0, a=2.0)))
        print(message(lambda: f(x, b=2.0)))
        print(message(lambda: f()))
        print(message(lambda: jax.jit(lambda x: f(x))(x)))     # was JAX's AttributeError (a tracer's .sharding)
    ''')
    assert out == ("ArgumentError: dflt() got `a` twice\n"
                   "ArgumentError: dflt() has no parameter `b`\n"
                   "ArgumentError: dflt(x: f32[n], a: f32 = 2.0) -> f32[n] takes 2 argument(s), 0 given: missing "
                   "argument `x`\n"
                   "ArgumentError: argument `x` is a JAX tracer: `dflt` is called inside a JAX transformation "
                   "(jax.jit, jax.grad, jax.vmap); call its `as_jax()` there (e.g. `mod.f.as_jax()(...)`), which JAX "
                   "traces\n")


def test_bad_specs_and_meshes_are_argument_errors():
    """Each was JAX's own error (IndivisibleError, pjit's ValueError), an AttributeError, or a message about
    something else (a bare string read as one spec per character, a dict's keys as axes)."""
    out = in_child('''
        from jax.sharding import NamedSharding, PartitionSpec as P
        mod = arrc.loads("""
        def m(x: f32[b, 6]) -> f32[b, 6]:
            return x + 1.0

        def s(x: f32[8]) -> f32:
            return sum(x)
        """)
        x = np.arange(48, dtype=np.float32).reshape(8, 6)
        f = mod.m.sharded(mesh, out_specs=(("model", None),))
        want = jax.jit(lambda x: x + 1.0, out_shardings=NamedSharding(mesh, P("model", None)))(x)
        got = f(x)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
        assert got.sharding.spec == want.sharding.spec, got.sharding
        print(message(lambda: f(x[:5])))
        print(message(lambda: mod.m.sharded(mesh, out_specs=(("model", "data"),))(x)))
        print(message(lambda: mod.s.sharded(mesh, out_specs=("data",))))
        print(message(lambda: mod.m.sharded(mesh, in_specs=(("data", None, None),))))
        print(message(lambda: mod.m.sharded(mesh, in_specs="data,_")))
        print(message(lambda: mod.m.sharded(mesh, in_specs={"x": ("data", None)})))
        print(message(lambda: mod.m.sharded(mesh, out_specs={"x": ("data", None)})))
        print(message(lambda: mod.m.sharded("mesh")))
    ''')
    assert out == (
        "ArgumentError: out_specs of result 0, P('model', None): dimension 0 has size 5, which model (2 devices) "
        "does not divide\n"
        "ArgumentError: out_specs of result 0, P('model', 'data'): dimension 1 has size 6, which data (4 devices) "
        "does not divide\n"
        "ArgumentError: out_specs of result 0, P('data',), has 1 entries for f32: one per dimension at most\n"
        "ArgumentError: in_specs of `x`, P('data', None, None), has 3 entries for f32[b, 6]: one per dimension at "
        "most\n"
        "ArgumentError: m(x: f32[b, 6]) -> f32[b, 6]: in_specs is a tuple or list of one spec per parameter, not "
        "'data,_' (one parameter's: in_specs=('data,_',))\n"
        "ArgumentError: m(x: f32[b, 6]) -> f32[b, 6]: in_specs is a tuple or list of one spec per parameter, not "
        "{'x': ('data', None)}\n"
        "ArgumentError: out_specs of result 0: a partition spec is a tuple of mesh axis names (or None), not "
        "{'x': ('data', None)}\n"
        "ArgumentError: m.sharded: the mesh is a jax.sharding.Mesh (e.g. arrc.mesh(data=4)), not 'mesh'\n")


def test_shards_that_end_the_branches_of_an_if_differently_are_e0204(tmp_path):
    """XLA's verifier refuses such a conditional (JAX's too): it was a raw JaxRuntimeError (`Inconsistent
    conditional sharding`), from the command line an internal error (E0601). A `shard` in one branch runs."""
    out = in_child('''
        from jax.sharding import NamedSharding, PartitionSpec as P
        mod = arrc.loads("""
        def br(x: f32[8, 4], c: bool) -> f32[8, 4]:
            if c:
                y = shard(x, "data", None)
            else:
                y = shard(x * 2.0, None, "data")
            return y + 1.0

        def one(x: f32[8, 4], c: bool) -> f32[8, 4]:
            if c:
                y = shard(x, "data", None)
            else:
                y = x * 2.0
            return y + 1.0
        """, filename="b.arr")
        x = np.arange(32, dtype=np.float32).reshape(8, 4)
        print(message(lambda: mod.br.sharded(mesh)(x, True)))
        with jax.set_mesh(mesh):
            twin = jax.jit(lambda x, c: jax.lax.cond(c, lambda x: jax.lax.with_sharding_constraint(x, P("data", None)),
                                                     lambda x: x * 2.0, x) + 1.0,
                           in_shardings=NamedSharding(mesh, P()))
            wants = [twin(x, c) for c in (True, False)]
        for c, want in zip((True, False), wants):
            got = mod.one.sharded(mesh)(x, c)
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    ''')
    assert out == (
        "CompileError: error[E0204]: `shard`: the branches of an `if` end in different layouts of the same value\n"
        " --> b.arr:6:13\n"
        "  |\n"
        "4 |         y = shard(x, \"data\", None)\n"
        "  |             ---------------------- split as (\"data\", None) here\n"
        "6 |         y = shard(x * 2.0, None, \"data\")\n"
        "  |             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^ split as (None, \"data\") here\n"
        "  |\n"
        "  = note: XLA cannot partition a conditional whose branches end in different layouts\n"
        "  = help: `shard` the value after the `if`, or in one branch only\n\n")
    (tmp_path / "b.arr").write_text("def br(x: f32[4], c: bool) -> f32[4]:\n    if c:\n        y = shard(x, \"data\")\n"
                                    "    else:\n        y = shard(x, \"model\")\n    return y\n")
    done = subprocess.run([sys.executable, "-m", "arrc", "run", "b.arr", "--entry", "br", "--arg", "x=[1, 2, 3, 4]",
                           "--arg", "c=true", "--devices", "8", "--mesh", "data=4,model=2"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert (done.returncode, done.stdout) == (1, "") and done.stderr.startswith(
        "error[E0204]: `shard`: the branches of an `if` end in different layouts of the same value\n"), done.stderr


def test_a_shard_under_vmap_names_the_dimension_of_its_own_value():
    """vmap's lane is the placeholder's first dimension, not one of the value `shard` was written on: a row of
    6 over data=4 was "dimension 1 has size 6" for a rank-1 row."""
    out = in_child('''
        src = "def row(r: f32[6]) -> f32[6]:\\n    return shard(r, \\"data\\")\\n\\n" \\
              "def rows(x: f32[4, 6]) -> f32[4, 6]:\\n    return vmap(row)(x)\\n"
        mod = arrc.loads(src, filename="v.arr")
        print(message(lambda: mod.rows.sharded(mesh)(np.ones((4, 6), np.float32))))
    ''')
    assert out.startswith("CompileError: error[E0204]: `shard`: dimension 0 has size 6, which data (4 devices) "
                          "does not divide\n"), out


def test_arguments_on_other_devices_are_an_argument_error():
    """A plain call on arguments placed over the same devices in another order crashed the process (SIGSEGV:
    jax.jit under arrc's abstract mesh compares devices by number only, and XLA got a buffer on the wrong
    device); over other devices (a 4-device mesh, one device) it was JAX's ValueError naming
    `as_jax.<locals>.jax_fn` and "jit's context mesh". Meshes over the same devices in the same order, with
    other names or shapes, still run."""
    out = in_child('''
        from jax.sharding import Mesh, NamedSharding, SingleDeviceSharding, PartitionSpec as P
        mod = arrc.loads("def f(x: f32[n], c: f32, y: f32[n]) -> f32[n]:\\n    return x * y + c\\n")
        devices = jax.devices()
        x = jax.device_put(np.arange(8, dtype=np.float32), NamedSharding(jax.make_mesh((8,), ("data",)), P("data")))
        backwards = Mesh(np.array(devices[::-1]), ("data",))
        for other in (NamedSharding(backwards, P()), NamedSharding(backwards, P("data")),
                      NamedSharding(Mesh(np.array(devices[:4]), ("data",)), P("data")),
                      SingleDeviceSharding(devices[0])):
            y = jax.device_put(np.ones(8, np.float32), other)
            print(message(lambda: mod.f(x, 1.0, y)))
        print(message(lambda: mod.f(y=jax.device_put(np.ones(8, np.float32), NamedSharding(backwards, P())),
                                    c=1.0, x=x)))
        for same in (Mesh(np.array(devices), ("batch",)), mesh):    # (the same devices in the same order)
            y = jax.device_put(np.ones(8, np.float32), NamedSharding(same, P(same.axis_names[0])))
            np.testing.assert_array_equal(np.asarray(mod.f(x, 1.0, y)), np.arange(8) + 1.0)
        np.testing.assert_array_equal(np.asarray(mod.f(x, 1.0, jax.device_put(np.ones(8, np.float32)))),
                                      np.arange(8) + 1.0)          # (not committed: placed as x is)
    ''')
    head = "ArgumentError: f(x: f32[n], c: f32, y: f32[n]) -> f32[n]: argument `x` is on devices [0, 1, 2, 3, 4, " \
           "5, 6, 7] and `y` on devices "
    tail = "; a call runs as one program over one mesh, so its arguments must be placed over the same devices in " \
           "the same order (e.g. jax.device_put(y, x.sharding))\n"
    backwards = "[7, 6, 5, 4, 3, 2, 1, 0] (the same devices in another order)"
    assert out == "".join(head + ids + tail for ids in (backwards, backwards, "[0, 1, 2, 3]", "[0]", backwards)), out


def test_a_call_with_two_faults_reports_the_one_a_call_on_one_device_reports():
    """With guards="all", a -inf in lane 0 and an index out of range in lane 4 were an InfError on one device
    (the origin build's first fault, lane by lane) and a BoundsError sharded: the bounds check's callback
    inside the program was raised before the results' flag was read."""
    out = in_child('''
        mod = arrc.loads("""
        def lrow(r: f32[4], i: i32) -> f32:
            return log(r[i])

        def lrows(x: f32[8, 4], i: i32[8]) -> f32[8]:
            return vmap(lrow)(x, i)
        """, filename="v.arr", guards="all")
        x = np.arange(32, dtype=np.float32).reshape(8, 4)
        for i in ([0, 1, 2, 3, 4, 0, 1, 2], [4, 1, 2, 3, 0, 1, 1, 2]):
            i = np.array(i, np.int32)
            reports = []
            for call in (lambda: mod.lrows(x, i), lambda: mod.lrows.sharded(mesh, in_specs=(("data", None), "data"))(x, i)):
                try:
                    call()
                    raise AssertionError("no report")
                except arrc.GuardError as err:
                    reports.append([line for line in str(err).splitlines() if "the call ran" not in line])
            assert reports[0] == reports[1], reports
            print(reports[0][0])
    ''')
    assert out == "error[R0002]: infinity produced at run time\nerror[R0003]: index out of range at run time\n", out
