"""arrc on a TPU, probed (bench/tpu_check.sh runs it on a lent TPU machine): each check prints one
`probe:` line, ok or what failed (the exception's type, message and the last traceback frame in arrc), and
never stops the others.

    python3 bench/tpu_probes.py smoke
    python3 bench/tpu_probes.py [info] [examples] [guards] [random] [grad] [conv] [linalg]   # default: all
    python3 bench/tpu_probes.py bench ARGS...   # bench/run.py ARGS, each program in try/except

ARRC_PROBE_DEVICE=cpu runs the same checks with the CPU in the TPU's place (to test this script anywhere).
"""
from __future__ import annotations

import os
import sys
import time
import traceback
from pathlib import Path

import numpy as np

DEV = os.environ.get("ARRC_PROBE_DEVICE", "tpu")
ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def show(what: str, value) -> None:
    print(f"probe: {what}: {value}", flush=True)


def _ours(filename: str) -> bool:
    return ("/arrc/" in filename or filename.startswith(str(ROOT))) and not filename.endswith("tpu_probes.py") \
        and "/jax/" not in filename and "/jaxlib/" not in filename


def describe(e: BaseException) -> str:
    """Type, the first two lines of the message, and the last frame in arrc (and the last frame of all)."""
    tb = traceback.extract_tb(e.__traceback__)
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()][:2]
    text = " | ".join(lines)[:400]
    ours = [f for f in tb if _ours(f.filename)]
    where = ""
    if ours:
        f = ours[-1]
        where += f" [arrc: {'/'.join(Path(f.filename).parts[-2:])}:{f.lineno} {f.name}]"
    if tb and (not ours or tb[-1] is not ours[-1]):
        f = tb[-1]
        where += f" [raised: {'/'.join(Path(f.filename).parts[-2:])}:{f.lineno} {f.name}]"
    return f"FAIL {type(e).__name__}: {text}{where}"


def attempt(what: str, fn) -> None:
    start = time.perf_counter()
    try:
        result = fn()
        show(what, f"{result if result is not None else 'ok'} ({time.perf_counter() - start:.1f} s)")
    except Exception as e:                      # noqa: BLE001 - a probe reports whatever happens
        show(what, f"{describe(e)} ({time.perf_counter() - start:.1f} s)")


def _results(value) -> list:
    return list(value) if isinstance(value, tuple) else [value]


def _platforms(value) -> set:
    return {d.platform for v in _results(value) for d in v.devices()}


def compare(got, want, rtol=1e-3, atol=1e-5) -> str:
    """'ok, max rel err ...' or 'MISMATCH ...' over paired results."""
    with np.errstate(invalid="ignore", over="ignore"):
        return _compare(got, want, rtol, atol)


def _compare(got, want, rtol, atol) -> str:
    worst, bad = 0.0, []
    got, want = _results(got), _results(want)
    if len(got) != len(want):
        return f"MISMATCH {len(got)} results, want {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        if (g.dtype, g.shape) != (w.dtype, w.shape):
            bad.append(f"#{i} {g.dtype}{list(g.shape)} vs {w.dtype}{list(w.shape)}")
            continue
        if np.issubdtype(w.dtype, np.floating) or np.issubdtype(w.dtype, np.complexfloating):
            g64, w64 = g.astype(np.complex128 if np.iscomplexobj(w) else np.float64), \
                w.astype(np.complex128 if np.iscomplexobj(w) else np.float64)
            same_nan = np.isnan(g64) == np.isnan(w64)
            fin = np.isfinite(g64) & np.isfinite(w64)
            diff = np.abs(g64 - w64)
            rel = float(np.max(diff[fin] / (np.abs(w64[fin]) + atol), initial=0.0))   # relative, atol-floored
            worst = max(worst, rel)
            if not same_nan.all() or not np.array_equal(np.isinf(g64) & ~fin, np.isinf(w64) & ~fin) \
                    or not np.allclose(g64[fin], w64[fin], rtol=rtol, atol=atol):
                bad.append(f"#{i} {w.dtype}{list(w.shape)} max abs err {float(np.max(diff[fin], initial=0)):.2e}, "
                           f"max rel err {rel:.2e}")
        elif not np.array_equal(g, w):
            bad.append(f"#{i} {w.dtype}{list(w.shape)} {int(np.sum(g != w))} elements differ")
    return ("MISMATCH " + "; ".join(bad)) if bad else f"ok, max rel err {worst:.1e}"


# ---- sections ------------------------------------------------------------------------------------------

def smoke() -> None:
    import arrc
    m = arrc.loads("def f(x: f32[4]) -> f32[4]:\n    return exp(x)\n", device=DEV, guards="all")
    out = m.f(np.arange(4, dtype=np.float32))
    print(out, out.devices(), flush=True)
    assert _platforms(out) == {DEV}, _platforms(out)


def info() -> None:
    import jax
    import jaxlib
    import platform
    d = jax.devices(DEV)[0]
    show("versions", f"python {sys.version.split()[0]}, jax {jax.__version__}, jaxlib {jaxlib.__version__}, "
                     f"glibc {platform.libc_ver()}")
    show("jax.devices()", jax.devices())
    show("device kind / platform", f"{d.device_kind} / {d.client.platform} {d.client.platform_version}")
    from arrc.runtime.pjrt import backend
    show(f"arrc backend({DEV!r}).platform", backend(DEV).platform)
    import arrc
    show("arrc imported from", arrc.__file__)

    def precision():
        import arrc
        import jax.numpy as jnp
        r = np.random.default_rng(0)
        a, b = r.normal(size=(1024, 1024)), r.normal(size=(1024, 1024))
        exact = a @ b
        a32, b32 = (jax.device_put(v.astype(np.float32), d) for v in (a, b))
        mod = arrc.loads("def mm(a: f32[n, k], b: f32[k, m]) -> f32[n, m]:\n    return a @ b\n", device=DEV)

        def error(c):
            return f"{float(np.max(np.abs(np.asarray(c, np.float64) - exact)) / np.max(np.abs(exact))):.1e}"
        return (f"max err / max |exact|: arrc {error(mod.mm(a32, b32))}, jnp default {error(jnp.matmul(a32, b32))}, "
                f"jnp HIGHEST {error(jnp.matmul(a32, b32, precision=jax.lax.Precision.HIGHEST))}")
    attempt("f32 1024^3 product precision", precision)


def examples() -> None:
    import arrc
    from arrc import demo
    for path in sorted(EXAMPLES.glob("*.arr")):
        def one(path=path):
            guards = ",".join(demo.guards_for(path)) or "off"
            cpu = arrc.load(str(path), guards=guards, warnings="ignore").main()
            got = arrc.load(str(path), device=DEV, guards=guards, warnings="ignore").main()
            where = _platforms(got)
            verdict = compare(got, cpu)
            dtypes = ",".join(sorted({str(np.asarray(v).dtype) for v in _results(cpu)}))
            return f"{verdict} (guards {guards}; results {dtypes}; on {','.join(sorted(where))})"
        attempt(f"example {path.name} on {DEV} vs cpu", one)


LOOP_NAN = """\
def f(x: f32[4], n: i32) -> f32[4]:
    y = x
    for i in range(n):
        y = log(y - 0.5)
    return y
"""

BACKWARD = "def f(x: f64[2]) -> f64:\n    y = sqrt(x)\n    return sum(y)\n"
BACKWARD32 = "def f(x: f32[2]) -> f32:\n    y = sqrt(x)\n    return sum(y)\n"

PAST = """\
def steps(x: f64, n: i32) -> f64:
    y = x
    for i in range(n, bound=3):
        y = sin(y) * 1.1
    return y
"""


def guards() -> None:
    import arrc

    def report(device, source, call, error):
        mod = arrc.loads(source, filename="g.arr", device=device, guards="all")
        try:
            call(mod)
        except error as info:
            return str(info)
        raise AssertionError(f"no {error.__name__} on {device}")

    x = np.array([3.0, 2.0, 1.6, 4.0], np.float32)
    cases = [("nan in a loop", LOOP_NAN, lambda m: m.f(x, 3), arrc.NaNError),
             ("inf in a backward pass f64", BACKWARD, lambda m: arrc.grad(m.f)(np.array([1.0, 0.0])), arrc.InfError),
             ("inf in a backward pass f32", BACKWARD32,
              lambda m: arrc.grad(m.f)(np.array([1.0, 0.0], np.float32)), arrc.InfError),
             ("past a loop bound (grad)", PAST, lambda m: arrc.grad(m.steps)(0.5, 4), arrc.LoopBoundExceeded)]
    for name, source, call, error in cases:
        def one(source=source, call=call, error=error):
            got, want = report(DEV, source, call, error), report("cpu", source, call, error)
            if got == want:
                return f"same text ({len(got.splitlines())} lines; first: {got.splitlines()[0][:120]})"
            return f"DIFFERENT TEXT\n--- {DEV}:\n{got}\n--- cpu:\n{want}\n---"
        attempt(f"guard report on {DEV} vs cpu: {name}", one)
    for path in sorted((EXAMPLES / "faults").glob("*.arr")):
        def fault(path=path):
            texts = {}
            for device in (DEV, "cpu"):
                try:
                    arrc.load(str(path), device=device, guards="all", warnings="ignore").main()
                    texts[device] = "(no report)"
                except arrc.GuardError as e:
                    texts[device] = f"{type(e).__name__}: {e}"
            if texts[DEV] == texts["cpu"]:
                return f"same text ({texts['cpu'].splitlines()[0][:120]})"
            return f"DIFFERENT TEXT\n--- {DEV}:\n{texts[DEV]}\n--- cpu:\n{texts['cpu']}\n---"
        attempt(f"guard report on {DEV} vs cpu: examples/faults/{path.name}", fault)


def random() -> None:
    import arrc
    import jax
    import jax.numpy as jnp
    dev = jax.devices(DEV)[0]
    src = ("def u(s: i64) -> (f32[1000], f64[7, 3], f32[257], i32[64]):\n"
           "    k = key(s)\n    a, b = split(k)\n"
           "    return uniform(a, (1000,)), uniform(b, (7, 3), f64, -2.0, 3.0), normal(a, (257,)), "
           "randint(k, (64,), -5, 9)\n")
    src32 = ("def u(s: i64) -> (f32[1000], f32[257], i32[64]):\n"
             "    k = key(s)\n    a, b = split(k)\n"
             "    return uniform(a, (1000,)), normal(a, (257,)), randint(k, (64,), -5, 9)\n")
    for label, source, with64 in (("f32,f64,i32", src, True), ("f32,i32 only", src32, False)):
        def one(source=source, with64=with64):
            mod = arrc.loads(source, device=DEV, warnings="ignore")
            out = []
            for seed in (0, 42, 2 ** 40 + 3):
                k = jax.device_put(jax.random.key(seed), dev)
                ka, kb = jax.random.split(k)
                want = [jax.random.uniform(ka, (1000,), jnp.float32)]
                if with64:
                    want.append(jax.random.uniform(kb, (7, 3), jnp.float64, -2.0, 3.0))
                want += [jax.random.normal(ka, (257,), jnp.float32), jax.random.randint(k, (64,), -5, 9, jnp.int32)]
                got = mod.u(seed)
                diff = [i for i, (g, w) in enumerate(zip(got, want, strict=True))
                        if (np.asarray(g).dtype, np.asarray(g).shape) != (np.asarray(w).dtype, np.asarray(w).shape)
                        or np.asarray(g).tobytes() != np.asarray(w).tobytes()]
                out.append(f"seed {seed}: " + ("bit-equal" if not diff else f"results {diff} DIFFER"))
            return "; ".join(out) + f" (arrc on {','.join(sorted(_platforms(got)))})"
        attempt(f"random bits, arrc on {DEV} vs jax.random on {DEV} ({label})", one)


MLP = """\
def loss(w1: f64[16, 32], w2: f64[32, 4], x: f64[64, 16], y: i32[64]) -> f64:
    h = tanh(x @ w1)
    return -mean(take_along_axis(log_softmax(h @ w2, axis=1), y[:, None], axis=1))
"""


def grad() -> None:
    import arrc
    import jax
    import jax.numpy as jnp
    dev = jax.devices(DEV)[0]
    r = np.random.default_rng(1)
    base = (r.normal(size=(16, 32)) * 0.3, r.normal(size=(32, 4)) * 0.3, r.normal(size=(64, 16)),
            r.integers(0, 4, 64).astype(np.int32))

    def loss(w1, w2, x, y):
        logits = jax.nn.log_softmax(jnp.tanh(x @ w1) @ w2, axis=1)
        return -jnp.mean(jnp.take_along_axis(logits, y[:, None], axis=1))
    for dt, rtol, atol in (("f64", 1e-10, 1e-13), ("f32", 1e-4, 1e-6)):
        def one(dt=dt, rtol=rtol, atol=atol):
            np_dt = np.float64 if dt == "f64" else np.float32
            args = tuple(a.astype(np_dt) if a.dtype.kind == "f" else a for a in base)
            mod = arrc.loads(MLP.replace("f64", dt), device=DEV)
            want = jax.grad(loss, argnums=(0, 1))(*(jax.device_put(a, dev) for a in args))
            got = arrc.grad(mod.loss, argnums=(0, 1))(*args)
            cpu = arrc.grad(arrc.loads(MLP.replace("f64", dt)).loss, argnums=(0, 1))(*args)
            return (f"vs jax.grad on {DEV}: {compare(got, tuple(want), rtol, atol)}; vs arrc on cpu: "
                    f"{compare(got, cpu, 1e-3, 1e-5)} (on {','.join(sorted(_platforms(got)))})")
        attempt(f"grad of an mlp loss {dt}, arrc on {DEV}", one)


CONV = """\
def block(x: f32[8, 16, 16, 4], w: f32[3, 3, 4, 8]) -> f32[8, 8, 8, 8]:
    return conv(x, w, strides=2, padding="SAME", layout=("NHWC", "HWIO", "NHWC"))

def block64(x: f64[8, 16, 16, 4], w: f64[3, 3, 4, 8]) -> f64:
    return sum(tanh(conv(x, w, padding=[(1, 1), (0, 2)], layout=("NHWC", "HWIO", "NHWC"))))

def block32(x: f32[8, 16, 16, 4], w: f32[3, 3, 4, 8]) -> f32:
    return sum(tanh(conv(x, w, padding=[(1, 1), (0, 2)], layout=("NHWC", "HWIO", "NHWC"))))
"""


def conv() -> None:
    import arrc
    import jax
    import jax.numpy as jnp
    dev = jax.devices(DEV)[0]
    r = np.random.default_rng(0)
    x, w = r.normal(size=(8, 16, 16, 4)), r.normal(size=(3, 3, 4, 8))
    dn = ("NHWC", "HWIO", "NHWC")
    mod = arrc.loads(CONV, device=DEV)

    def fwd():
        x32, w32 = (jax.device_put(a.astype(np.float32), dev) for a in (x, w))
        want = jax.lax.conv_general_dilated(x32, w32, (2, 2), "SAME", dimension_numbers=dn)
        got = mod.block(x32, w32)
        return f"vs lax on {DEV}: {compare(got, want, 1e-5, 1e-5)}; vs cpu f64 reference: " \
               f"{compare(np.asarray(got, np.float64), np.asarray(arrc.loads(CONV.replace('f32', 'f64')).block(x, w)), 1e-3, 1e-3)}"
    attempt(f"conv f32 forward on {DEV}", fwd)

    def loss(x, w):
        return jnp.sum(jnp.tanh(jax.lax.conv_general_dilated(x, w, (1, 1), [(1, 1), (0, 2)], dimension_numbers=dn)))
    for name, dt, rtol, atol in (("block64", np.float64, 1e-10, 1e-12), ("block32", np.float32, 1e-4, 1e-4)):
        def g(name=name, dt=dt, rtol=rtol, atol=atol):
            xs, ws = x.astype(dt), w.astype(dt)
            got = arrc.grad(mod[name], argnums=(0, 1))(xs, ws)
            want = jax.grad(loss, argnums=(0, 1))(jax.device_put(xs, dev), jax.device_put(ws, dev))
            return f"vs jax.grad on {DEV}: {compare(got, tuple(want), rtol, atol)}"
        attempt(f"conv grad {np.dtype(dt).name} on {DEV}", g)

    def jax64():                                   # what the verify-backend table says TPUs refuse
        out = jax.lax.conv_general_dilated(jax.device_put(x, dev), jax.device_put(w, dev), (1, 1), "SAME",
                                           dimension_numbers=dn)
        return f"jax f64 conv runs on {DEV}: dtype {out.dtype}, sum {float(jnp.sum(out)):.6g}"
    attempt(f"jax f64 conv on {DEV} (for comparison)", jax64)


LINALG = """\
def f(a: f64[4, 6, 6], b: f64[6, 2]) -> (f64[4, 6, 2], f64[4], f64[4, 6]):
    s = a @ transpose(a, (0, 2, 1)) + 6.0 * eye(6)
    w, v = eigh(s)
    return solve(s, b), slogdet(s)[1], w

def g(a: f64[6, 6]) -> f64:
    return sum(cholesky(a @ a.T + 6.0 * eye(6)))
"""


def linalg() -> None:
    import arrc
    import jax
    import jax.numpy as jnp
    dev = jax.devices(DEV)[0]
    r = np.random.default_rng(2)
    a0, b0 = r.normal(size=(4, 6, 6)), r.normal(size=(6, 2))

    def twin(a, b):
        s = a @ jnp.swapaxes(a, 1, 2) + 6.0 * jnp.eye(6, dtype=a.dtype)
        return jnp.linalg.solve(s, b), jnp.linalg.slogdet(s)[1], jnp.linalg.eigh(s)[0]

    def loss(a):
        return jnp.sum(jnp.linalg.cholesky(a @ a.T + 6.0 * jnp.eye(6, dtype=a.dtype)))
    for dt, rtol, atol in (("f64", 1e-10, 1e-12), ("f32", 1e-4, 1e-5)):
        np_dt = np.float64 if dt == "f64" else np.float32
        a, b = a0.astype(np_dt), b0.astype(np_dt)
        src = LINALG.replace("f64", dt)
        holder = {}

        def load(src=src):
            holder["mod"] = arrc.loads(src, device=DEV)
        attempt(f"linalg {dt}: compile module on {DEV}", load)
        if "mod" not in holder:
            continue
        mod = holder["mod"]

        def f(a=a, b=b, rtol=rtol, atol=atol, src=src):
            got = mod.f(a, b)
            out = f"vs arrc on cpu: {compare(got, arrc.loads(src).f(a, b), 1e-3, 1e-5)}"
            try:
                want = jax.jit(twin)(jax.device_put(a, dev), jax.device_put(b, dev))
                out += f"; vs jax on {DEV}: {compare(got, tuple(want), rtol, atol)}"
            except Exception as e:          # noqa: BLE001
                out += f"; jax on {DEV}: {describe(e)}"
            return out
        attempt(f"linalg {dt}: solve, slogdet, eigh on {DEV}", f)

        def g(a=a, rtol=rtol):
            got = arrc.grad(mod.g)(a[0])
            out = f"vs arrc on cpu: {compare(got, arrc.grad(arrc.loads(src).g)(a[0]), 1e-3, 1e-5)}"
            try:
                out += f"; vs jax.grad on {DEV}: {compare(got, jax.grad(loss)(jax.device_put(a[0], dev)), rtol, 1e-12)}"
            except Exception as e:          # noqa: BLE001
                out += f"; jax on {DEV}: {describe(e)}"
            return out
        attempt(f"linalg {dt}: grad of sum(cholesky) on {DEV}", g)


# ---- the benchmark, each program in try/except ---------------------------------------------------------

def bench(argv: list) -> int:
    """bench/run.py's main with each program (and each loop section) in try/except: a failure (SystemExit
    of a mismatch included) is printed and the rest run on."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import run as R

    def guarded(fn):
        def wrapper(*a, **k):
            try:
                return fn(*a, **k)
            except BaseException as e:      # noqa: BLE001 - SystemExit from _check_same too
                if isinstance(e, KeyboardInterrupt):
                    raise
                name = getattr(a[0], "name", fn.__name__) if a else fn.__name__
                print(f"bench: {name}: {describe(e)}", flush=True)
        return wrapper
    R.bench_program = guarded(R.bench_program)
    row = R.Report.row

    def row_now(self, section, **fields):        # each row as it comes, in case the run is cut short
        print(f"row: {section}: " + ", ".join(f"{k}={R._cell(v)}" for k, v in fields.items() if not k.startswith("_")),
              flush=True)
        return row(self, section, **fields)
    R.Report.row = row_now
    R.bench_guards_in_loops = guarded(R.bench_guards_in_loops)
    R.bench_guards_by_size = guarded(R.bench_guards_by_size)
    return R.main(argv)


SECTIONS = {"info": info, "examples": examples, "guards": guards, "random": random, "grad": grad, "conv": conv,
            "linalg": linalg}


def main(argv: list) -> int:
    if argv[:1] == ["bench"]:
        return bench(argv[1:])
    import jax
    jax.config.update("jax_enable_x64", True)           # the JAX side of f64 comparisons (as tests/conftest.py)
    if argv[:1] == ["smoke"]:
        smoke()
        return 0
    for name in argv or list(SECTIONS):
        start = time.perf_counter()
        print(f"\n-- {name}", flush=True)
        try:
            SECTIONS[name]()
        except Exception as e:                  # noqa: BLE001
            show(f"section {name}", describe(e))
        print(f"-- {name}: {time.perf_counter() - start:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
