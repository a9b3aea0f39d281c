"""`make bench`: arrc against jax.jit on the same work, in the same process, interleaved.

    .venv/bin/python bench/run.py            # full suite (about 10 minutes on 2 cores)
    .venv/bin/python bench/run.py --quick    # fewer rounds, no 8000-statement JAX lowering
    .venv/bin/python bench/run.py --only softmax,add --skip cli

Prints one table per section and writes everything (all samples) to bench/results/<time>.json and
bench/results/latest.json. Ratios are arrc / JAX of medians; a target is met when the ratio is at most
the target. Each comparison also times one contender against itself in the same rounds (the run rows'
`aa` column, JAX's median over its own again; the "again (A/A)" rows): how far that is from 1.000 is the
noise of this run, the band within which a ratio says nothing. See docs/performance.md for what each figure means and the results of a run.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import types as pytypes
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402

import programs as P  # noqa: E402
from timing import fmt_time, interleaved, repeated  # noqa: E402

TARGET_RUN = 1.05           # compiled run time, arrc / jax.jit
TARGET_GRAD = 1.2           # compiled run time of a gradient, arrc's grad / jax.jit(jax.grad(f)) (issue 16)
TARGET_TAPE = 1.3           # the same for a loop taped by its `bound=` against JAX's scan (of static length, or of the
                            # bound's length masked to the run-time count: the same function) (issue 16)
TARGET_CALL = 1.1           # call overhead, arrc / jax.jit (issue 18)
TARGET_VMAP = 1.2           # compiled run time of arr's vmap / jax.jit(jax.vmap(f)) (issue 21)
TARGET_LOOP_GUARDS = 1.2    # guards="all" / unguarded on loop-heavy programs (issue 18)
TARGET_FRONTEND = 1 / 3     # arrc front end / jax.jit(f).lower on the generated program
TARGET_FRONTEND_LOOP = 0.30  # the same against JAX written as a loop (issue 18)
TARGET_FE_COMPILE = 0.10    # arrc front end / XLA compile, every program
TARGET_WARM_RUN = 1.3       # warm `arrc run` / `python -c "import jax"`

DEVICE = "cpu"              # --device: where both sides run (JAX's default device is set to it)


def load(source: str, **options):
    """`arrc.loads` on the benchmark's device."""
    import arrc
    return arrc.loads(source, device=DEVICE, **options)


class Report:
    def __init__(self):
        self.sections: dict[str, list[dict]] = {}
        self.targets: list[dict] = []

    def row(self, section: str, **fields) -> None:
        self.sections.setdefault(section, []).append(fields)

    def target(self, what: str, ratio: float, limit: float) -> None:
        self.targets.append({"what": what, "ratio": ratio, "target": limit, "met": bool(ratio <= limit)})

    def print_section(self, section: str) -> None:
        rows = self.sections.get(section, [])
        if not rows:
            return
        cols = [c for c in rows[0] if not c.startswith("_")]
        cells = [[_cell(r.get(c)) for c in cols] for r in rows]
        widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
        print(f"\n== {section}")
        print("  ".join(c.ljust(w) for c, w in zip(cols, widths)))
        for row in cells:
            print("  ".join(v.ljust(w) for v, w in zip(row, widths)))
        sys.stdout.flush()

    def print_targets(self) -> None:
        print("\n== targets (ratio <= target)")
        width = max(len(t["what"]) for t in self.targets) if self.targets else 10
        for t in self.targets:
            mark = "ok  " if t["met"] else "MISS"
            print(f"{mark} {t['what'].ljust(width)}  {t['ratio']:.3f}  (target {t['target']:.3g})")
        met = sum(t["met"] for t in self.targets)
        print(f"{met}/{len(self.targets)} targets met")


def _cell(v) -> str:
    if isinstance(v, float):
        return f"{v:.3f}"
    return "" if v is None else str(v)


# ---- helpers --------------------------------------------------------------------------------------------

def spec_text(a: np.ndarray) -> str:
    from arrc.compiler.types import dtype_of_numpy
    name = dtype_of_numpy(a.dtype).name
    return name if a.ndim == 0 else f"{name}[{', '.join(map(str, a.shape))}]"


def fresh_function(f):
    """A new function object with the same code: JAX caches traces per function object."""
    g = pytypes.FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__, f.__closure__)
    g.__dict__.update(f.__dict__)
    return g


class x64:
    """jax_enable_x64 on for the JAX side of a 64-bit program (arrc needs no flag)."""

    def __init__(self, on: bool):
        self.on = on

    def __enter__(self):
        import jax
        if self.on:
            self.was = jax.config.read("jax_enable_x64")
            jax.config.update("jax_enable_x64", True)

    def __exit__(self, *exc):
        import jax
        if self.on:
            jax.config.update("jax_enable_x64", self.was)


def arrc_frontend(source: str, entry: str, arg_specs: list) -> tuple[float, object]:
    """Seconds for parse + check + lower (linear algebra merged from JAX) + StableHLO text of a fresh source
    text, and the Lowered."""
    from arrc.passes.linalg import LowerLinalg
    start = time.perf_counter()
    mod = load(source)
    lowered = mod[entry].lower(*arg_specs)
    with lowered.context:           # linear algebra as JAX lowers it (jax.jit(f).lower does the same)
        LowerLinalg({"gpu": "cuda"}.get(DEVICE, DEVICE)).apply(lowered.module)
    lowered.as_text()
    return time.perf_counter() - start, lowered


def jax_lower(fn, avals, on64: bool):
    """Seconds for `jax.jit(f).lower(...).as_text()` of a fresh function object, and the Lowered: source to
    StableHLO text, as `arrc_frontend` (the text is the same MLIR printer's, ~16 us a statement on both)."""
    import jax
    with x64(on64):
        start = time.perf_counter()
        lowered = jax.jit(fresh_function(fn)).lower(*avals)
        lowered.as_text()
        return time.perf_counter() - start, lowered


# ---- per program ---------------------------------------------------------------------------------------

def bench_program(p: P.Program, report: Report, args) -> None:
    import arrc
    import jax
    from arrc.runtime.pjrt import Executable

    inputs = p.inputs()
    specs = [arrc.spec(text) for text in (p.specs or [spec_text(a) for a in inputs])]
    with x64(p.x64):
        avals = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in inputs]
    big = "generated" in p.tags
    # a front end takes 3-60 ms: 9 rounds at least, so that its median is not the first round's, which also
    # lowers what a process lowers once (JAX's linear algebra for a new shape: 30 ms for an eigh)
    rounds_fe = 3 if big else max(args.rounds_compile, 9)
    rounds_compile = (1 if args.quick else 3) if big else args.rounds_compile   # big: ~5 s per XLA compile
    print(f"\n-- {p.name}", flush=True)

    # front end: arrc (fresh source text each round) vs jax.jit(fresh function).lower
    fe = repeated({
        "arrc": lambda r: arrc_frontend(p.source + f"\n# round {r}\n", p.entry, specs)[0],
        "jax": lambda r: jax_lower(p.jax_fn, avals, p.x64)[0],
    }, rounds_fe)

    # XLA compile of each side's module (no caches), and arrc's load from its persistent cache
    _, lowered = arrc_frontend(p.source, p.entry, specs)
    jax_compiled = {}

    def jax_compile(r):
        with x64(p.x64):
            low = jax.jit(fresh_function(p.jax_fn)).lower(*avals)
            start = time.perf_counter()
            jax_compiled["last"] = low.compile()
            return time.perf_counter() - start

    fe_a, fe_j = fe["arrc"]["median"], fe["jax"]["median"]
    comp = repeated({
        "arrc": lambda r: Executable(lowered.module, DEVICE, cache=False).compile_s,
        "jax": jax_compile,
    }, rounds_compile)
    fn = load(p.source)[p.entry]
    fn.compile(*specs)                              # compiles into the suite's cache directory
    loads = []
    for _ in range(1 if big else 3):                # a fresh module: front end, then the cache
        exe = _executable(load(p.source)[p.entry], specs)
        assert exe.cache_hit
        loads.append(exe.compile_s)
    cache_load = statistics.median(loads)

    comp_a, comp_j = comp["arrc"]["median"], comp["jax"]["median"]
    report.row("compile", program=p.name, arrc_frontend=fmt_time(fe_a), jax_lower=fmt_time(fe_j),
               fe_ratio=fe_a / fe_j, arrc_xla_compile=fmt_time(comp_a), jax_xla_compile=fmt_time(comp_j),
               fe_over_compile=fe_a / comp_a, cache_load=fmt_time(cache_load),
               _raw={"frontend": fe, "compile": comp, "cache_load_s": cache_load})
    report.target(f"front end / XLA compile: {p.name}", fe_a / comp_a, TARGET_FE_COMPILE)
    if big:
        report.target(f"front end / jax lower: {p.name}", fe_a / fe_j, TARGET_FRONTEND)

    # compiled run time on device-resident inputs (the same arrays for both)
    with x64(p.x64):
        jf = jax_compiled["last"] if big else jax.jit(p.jax_fn)   # big: reuse the compile above
        dev = [jax.device_put(a) for a in inputs]
        contenders = {"arrc": lambda: fn(*dev), "jax": lambda: jf(*dev), "jax again": lambda: jf(*dev)}
        _check_same(p, contenders)
        run = interleaved(contenders, args.budget_s)
    ra, rj = run["arrc"]["median"], run["jax"]["median"]
    report.row("run", program=p.name, arrc=fmt_time(ra), jax=fmt_time(rj), ratio=ra / rj,
               aa=run["jax again"]["median"] / rj, arrc_min=fmt_time(run["arrc"]["min"]),
               jax_min=fmt_time(run["jax"]["min"]), _raw=run)
    target = TARGET_GRAD if "grad" in p.tags else TARGET_TAPE if "tape" in p.tags else \
        TARGET_VMAP if "vmap" in p.tags else TARGET_RUN
    if "info" not in p.tags:            # (a row shown for what it explains, beside the one with the target)
        report.target(f"run time: {p.name}", ra / rj, target)

    if "overhead" in p.tags:
        bench_overhead(p, fn, jf, inputs, dev, report, args)
    if "guards" in p.tags and not args.no_guards:
        bench_guards(p, inputs, report, args)


def _executable(fn, specs):
    """Compile `fn` for `specs` and return its runtime.pjrt.Executable (to read cache_hit, compile_s)."""
    fn.compile(*specs)
    compiled, _ = next(iter(fn._compiled.values()))
    return compiled.executable


def _check_same(p: P.Program, contenders: dict) -> None:
    a = contenders["arrc"]()
    j = contenders["jax"]()
    a, j = (a if isinstance(a, tuple) else (a,)), (j if isinstance(j, tuple) else (j,))
    for x, y in zip(a, j):
        x, y = np.asarray(x), np.asarray(y)
        if x.dtype != y.dtype or x.shape != y.shape:
            raise SystemExit(f"{p.name}: arrc gives {x.dtype}{list(x.shape)}, JAX {y.dtype}{list(y.shape)}")
        finite = np.isfinite(x) & np.isfinite(y)
        if not np.allclose(x[finite], y[finite], rtol=1e-3, atol=1e-4):
            raise SystemExit(f"{p.name}: arrc and JAX results differ")


def bench_overhead(p, fn, jf, inputs, dev, report: Report, args) -> None:
    """Call overhead on the tiny program: NumPy inputs (transfer included) and device inputs."""
    exe = next(iter(fn._compiled.values()))[0].executable
    for kind, xs in (("numpy", inputs), ("device", dev)):
        contenders = {
            "jax.jit": lambda xs=xs: jf(*xs),
            "jax.jit again (A/A)": lambda xs=xs: jf(*xs),
            "arrc f(x, y)": lambda xs=xs: fn(*xs),
            "arrc Executable": lambda xs=xs: exe(xs),
        }
        res = interleaved(contenders, args.budget_s, target_s=0.002, block_each=False)
        base = res["jax.jit"]["median"]
        for name, r in res.items():
            report.row("call overhead", inputs=kind, caller=name, per_call=fmt_time(r["median"]),
                       ratio=r["median"] / base, _raw=r)
        report.target(f"call overhead, {kind} inputs", res["arrc f(x, y)"]["median"] / base, TARGET_CALL)
    # Python scalars and keywords, on device arrays: what a JAX user passes as a step size or a flag
    import jax
    scaled = load("def scaled(x: f32[n], a: f32) -> f32[n]:\n    return x * a\n").scaled
    jax_scaled = jax.jit(lambda x, a: x * a)
    x, y = dev
    _overhead_against_jax(report, args, "python scalar", lambda: scaled(x, 2.5), lambda: jax_scaled(x, 2.5))
    _overhead_against_jax(report, args, "keyword", lambda: fn(x, y=y), lambda: jf(x, y=y))
    # a random key, as a training step with dropout takes one
    step = load("def step(k: key, x: f32[n]) -> f32[n]:\n    return x + uniform(k, (n,))\n").step
    jax_step = jax.jit(lambda k, x: x + jax.random.uniform(k, x.shape, x.dtype))
    k = jax.random.key(0)
    _overhead_against_jax(report, args, "typed key", lambda: step(k, x), lambda: jax_step(k, x))
    # the arr function inside jax.jit (`as_jax`, issue 23): its StableHLO merged into JAX's, against the JAX twin
    inside = jax.jit(lambda x, y: fn.as_jax()(x, y) * 2.0)
    twin = jax.jit(lambda x, y: jf(x, y) * 2.0)
    _overhead_against_jax(report, args, "as_jax inside jax.jit", lambda: inside(x, y), lambda: twin(x, y))
    # NumPy's default 64-bit arrays (JAX with x64 on), and the f64 power iteration with a Python int step count
    add64 = load("def add64(x: f64[n], y: f64[n]) -> f64[n]:\n    return x + y\n").add64
    addi64 = load("def addi64(x: i64[n], y: i64[n]) -> i64[n]:\n    return x + y\n").addi64
    power = load(P.POWER).power_iteration
    a, v, _ = P._power_input()
    x64s = [np.arange(4, dtype=np.float64), np.ones(4, np.float64)]
    i64s = [np.arange(4, dtype=np.int64), np.ones(4, np.int64)]
    with x64(True):
        jax_add64, jax_power = jax.jit(lambda x, y: x + y), jax.jit(P.jax_power)
        jax_addi64 = jax.jit(lambda x, y: x + y)
        _overhead_against_jax(report, args, "f64 numpy", lambda: add64(*x64s), lambda: jax_add64(*x64s))
        _overhead_against_jax(report, args, "i64 numpy", lambda: addi64(*i64s), lambda: jax_addi64(*i64s))
        _overhead_against_jax(report, args, "f64 power iteration, steps a Python int", lambda: power(a, v, 10),
                              lambda: jax_power(a, v, 10))


def _overhead_against_jax(report: Report, args, kind: str, arrc_call, jax_call) -> None:
    """One call-overhead row: back-to-back calls of arrc and of jax.jit (and JAX again, the A/A row)."""
    res = interleaved({"jax.jit": jax_call, "jax.jit again (A/A)": jax_call, "arrc": arrc_call},
                      args.budget_s, target_s=0.002, block_each=False)
    base = res["jax.jit"]["median"]
    for name, r in res.items():
        report.row("call overhead", inputs=kind, caller=name, per_call=fmt_time(r["median"]),
                   ratio=r["median"] / base, _raw=r)
    report.target(f"call overhead, {kind}", res["arrc"]["median"] / base, TARGET_CALL)


# ---- guards (the guards issue's benchmark) -------------------------------------------------------------

def bench_guards(p: P.Program, inputs, report: Report, args) -> None:
    """arrc guards="nan,inf" vs unguarded vs jax checkify vs jax_debug_nans on the 20-op program."""
    import jax
    try:
        guarded = load(p.source, guards="nan,inf")[p.entry]
        guarded(*inputs)
    except Exception as err:       # guards not available in this arrc
        print(f"   guards benchmark skipped: arrc.loads(src, guards='nan,inf') failed "
              f"({type(err).__name__}: {err})")
        report.row("guards", program=p.name, contender="skipped", per_call=str(err)[:60])
        return
    from jax.experimental import checkify
    plain = load(p.source)[p.entry]
    dev = [jax.device_put(a) for a in inputs]
    jf = jax.jit(p.jax_fn)
    checked = jax.jit(checkify.checkify(p.jax_fn, errors=checkify.float_checks))

    def debug_nans():
        jax.config.update("jax_debug_nans", True)
        try:
            return jf(*dev)
        finally:
            jax.config.update("jax_debug_nans", False)

    contenders = {
        "arrc unguarded": lambda: plain(*dev),
        "arrc unguarded again (A/A)": lambda: plain(*dev),
        'arrc guards="nan,inf"': lambda: guarded(*dev),
        "jax.jit": lambda: jf(*dev),
        "jax checkify float_checks": lambda: checked(*dev)[1],
        "jax_debug_nans": debug_nans,
    }
    res = interleaved(contenders, args.budget_s)
    base = res["arrc unguarded"]["median"]
    for name, r in res.items():
        report.row("guards", program=p.name, contender=name, per_call=fmt_time(r["median"]),
                   vs_arrc_unguarded=r["median"] / base, _raw=r)


TARGET_GUARDS = 1.1         # guarded no-fault call / unguarded, at every size (issue 18)
GUARD_SIZES = [10 ** k for k in range(3, 8)]


def bench_guards_by_size(report: Report, args) -> None:
    """guards="nan,inf" against unguarded at 1e3-1e7 elements, on a compute-bound chain (the 20 ops of
    `chain20`) and a memory-bound one (`x * y + x`), device inputs, each call blocked on."""
    import jax
    mem = "def mem(x: f32[n], y: f32[n]) -> f32[n]:\n    return x * y + x\n"
    for label, source, entry, arity in (("compute-bound chain20", P.CHAIN, "chain", 1),
                                        ("memory-bound x * y + x", mem, "mem", 2)):
        plain, guarded = load(source)[entry], load(source, guards="nan,inf")[entry]
        for n in GUARD_SIZES:
            r = P._rng(6)
            dev = [jax.device_put((r.random(n, dtype=np.float32) * 0.9)) for _ in range(arity)]
            res = interleaved({"unguarded": lambda: plain(*dev), "unguarded again (A/A)": lambda: plain(*dev),
                               'guards="nan,inf"': lambda: guarded(*dev)}, args.budget_s)
            base = res["unguarded"]["median"]
            report.row("guards by size", program=label, elements=n, unguarded=fmt_time(base),
                       aa=res["unguarded again (A/A)"]["median"] / base,
                       guarded=res['guards="nan,inf"']["median"] / base, _raw=res)
            report.target(f"guards: {label}, {n} elements", res['guards="nan,inf"']["median"] / base,
                          TARGET_GUARDS)


def bench_guards_in_loops(report: Report, args) -> None:
    """guards="all" against unguarded on loop-heavy programs (an index and a division per iteration)."""
    import jax
    plain, guarded = load(P.LOOPS), load(P.LOOPS, guards="all")
    for name, entry, inputs in P.loop_programs():
        dev = [jax.device_put(a) for a in inputs]
        contenders = {"unguarded": lambda: plain[entry](*dev), "unguarded again (A/A)": lambda: plain[entry](*dev),
                      'guards="all"': lambda: guarded[entry](*dev)}
        res = interleaved(contenders, args.budget_s)
        base = res["unguarded"]["median"]
        for contender, r in res.items():
            report.row("guards in loops", program=name, contender=contender, per_call=fmt_time(r["median"]),
                       vs_unguarded=r["median"] / base, _raw=r)
        report.target(f"guards in loops: {name}", res['guards="all"']["median"] / base, TARGET_LOOP_GUARDS)


# ---- front-end scaling and breakdown -------------------------------------------------------------------

def bench_scaling(report: Report, args) -> None:
    import arrc
    sizes = [500, 2000, 8000]
    spec = arrc.spec("f32[64]")
    avals = None
    for n in sizes:
        print(f"\n-- front end, {n} statements", flush=True)
        with_jax = not (args.quick and n > 2000)
        fns = {"arrc": lambda r, n=n: arrc_frontend(P.generated(n, salt=r + 1)[0], "main", [spec, spec])[0]}
        if with_jax:
            import jax
            avals = avals or [jax.ShapeDtypeStruct((64,), np.float32)] * 2
            fns["jax"] = lambda r, n=n: jax_lower(P.jax_from_source(P.generated(n, salt=r + 1)[1]),
                                                  avals, False)[0]
        res = repeated(fns, 2 if n > 2000 else 3)
        a = res["arrc"]["median"]
        j = res["jax"]["median"] if with_jax else None
        report.row("front-end scaling", statements=n, arrc=fmt_time(a), arrc_us_per_statement=a / n * 1e6,
                   jax_lower=fmt_time(j) if j else "-", jax_us_per_statement=(j / n * 1e6) if j else None,
                   ratio=(a / j) if j else None, _raw=res)
    rows = report.sections["front-end scaling"]
    per = [r["arrc_us_per_statement"] for r in rows]
    report.row("front-end scaling", statements="8000/500 per-statement", arrc=f"x{per[-1] / per[0]:.2f}",
               arrc_us_per_statement=None, jax_lower="", jax_us_per_statement=None, ratio=None)
    bench_breakdown(report, 2000)
    bench_frontend_against_loops(report, args)


def bench_frontend_against_loops(report: Report, args) -> None:
    """arrc's front end against `jax.jit(f).lower` of the generated program written as a JAX user writes
    a long computation, a loop (`P.jax_generated_loop`): JAX's cost per traced op is then linear."""
    import arrc
    import jax
    spec = arrc.spec("f32[64]")
    avals = [jax.ShapeDtypeStruct((64,), np.float32)] * 2
    for n, rounds in [(600, 9), (2000, 9), (5000, 5)]:    # rounds: A/A within +-5% (about 3-16 s each; single
        # samples spread +-15% on an idle machine, and 5 / 3 rounds left the A/A at 1.072 / 0.949)
        print(f"\n-- front end against JAX as a loop, {n} statements", flush=True)
        fns = {"arrc": lambda r, n=n: arrc_frontend(P.generated(n, salt=r + 1)[0], "main", [spec, spec])[0],
               "jax (loop)": lambda r, n=n: jax_lower(P.jax_generated_loop(n, salt=r + 1), avals, False)[0],
               "jax (loop) again": lambda r, n=n: jax_lower(P.jax_generated_loop(n, salt=r + 101), avals, False)[0]}
        res = repeated(fns, rounds)
        a, j = res["arrc"]["median"], res["jax (loop)"]["median"]
        report.row("front end against JAX as a loop", statements=n, arrc=fmt_time(a), jax_lower=fmt_time(j),
                   ratio=a / j, aa=res["jax (loop) again"]["median"] / j, _raw=res)
        report.target(f"front end / jax lower (loop), {n} statements", a / j, TARGET_FRONTEND_LOOP)


def bench_breakdown(report: Report, n: int) -> None:
    """Where the front end spends its time on the generated program (median of 3), the cyclic GC paused
    as `arrc.loads` pauses it. `main`'s parameter types are concrete, so checking it also lowers it (one
    walk) and `lower` takes that result."""
    import arrc
    import arrc.compiler.program as program_mod
    from arrc.api import _gc_paused
    from arrc.compiler.span import Source
    spec = arrc.spec("f32[64]")
    stages = {"parse": [], "check and lower (one walk)": [], "lower (taken from the check)": [], "text": []}
    parse = program_mod.parse
    spent = []

    def timed_parse(*a, **k):                       # check_program's own call of the parser
        start = time.perf_counter()
        try:
            return parse(*a, **k)
        finally:
            spent.append(time.perf_counter() - start)

    program_mod.parse = timed_parse
    try:
        for r in range(3):
            src = Source("<bench>", P.generated(n, salt=100 + r)[0])
            spent.clear()
            with _gc_paused():
                t0 = time.perf_counter()
                program = program_mod.check_program(src)
                t1 = time.perf_counter()
                lowered = arrc.Module(program)["main"].lower(spec, spec)
                t2 = time.perf_counter()
                lowered.as_text()
                t3 = time.perf_counter()
            for stage, seconds in zip(stages, (sum(spent), (t1 - t0) - sum(spent), t2 - t1, t3 - t2)):
                stages[stage].append(seconds)
    finally:
        program_mod.parse = parse
    total = sum(statistics.median(v) for v in stages.values())
    for stage, v in stages.items():
        m = statistics.median(v)
        report.row(f"front-end breakdown ({n} statements)", stage=stage, time=fmt_time(m), share=m / total,
                   us_per_statement=m / n * 1e6)


# ---- command line start-up and the persistent cache across processes -----------------------------------

def _cli(module: bool = False) -> list[str]:
    """The `arrc` console script of this environment (or `python -m arrc`)."""
    script = Path(sys.executable).parent / "arrc"
    return [str(script)] if script.exists() and not module else [sys.executable, "-m", "arrc"]


def _run(cmd: list[str], env: dict) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {done.stderr.decode()[-500:]}")
    return elapsed


def runtime_modules(cmd_args: list[str], env: dict) -> list[str]:
    """The PJRT-runtime modules (jax, jaxlib's XLA extension) that `arrc ARGS` imports."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "arrc", *cmd_args], env=env, cwd=ROOT,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    found = []
    for line in done.stderr.splitlines():
        name = line.rsplit("|", 1)[-1].strip()
        if name == "jax" or name.startswith("jax.") or name in ("jaxlib._jax", "jaxlib.xla_client"):
            found.append(name)
    return found


def bench_cli(report: Report, args) -> None:
    precompiled = _precompile()
    with tempfile.TemporaryDirectory(prefix="arrc-bench-cache-") as cache_dir:
        _bench_cli(report, args, precompiled, {**os.environ, "ARRC_CACHE_DIR": cache_dir})


def _bench_cli(report: Report, args, precompiled: bool, env: dict) -> None:
    cli = _cli(args.cli_module)
    reps = 3 if args.quick else 7
    bytecode = "precompiled" if precompiled else "no"
    print(f"\n-- command line ({bytecode} bytecode, {reps} interleaved runs)", flush=True)

    startup = {
        "python -c 'import jax'": [sys.executable, "-c", "import jax"],
        "arrc --version": [*cli, "--version"],
        "arrc check examples/nansum.arr": [*cli, "check", "examples/nansum.arr"],
        "arrc compile examples/nansum.arr": [*cli, "compile", "examples/nansum.arr", "--entry", "nansum",
                                             "--shape", "n=8"],
    }
    res = repeated({k: (lambda r, c=c: _run(c, env)) for k, c in startup.items()}, reps)
    base = res["python -c 'import jax'"]["median"]
    for name, cmd in startup.items():
        mods = runtime_modules(cmd[len(cli):], env) if name.startswith("arrc") else None
        report.row("start-up", command=name, time=fmt_time(res[name]["median"]),
                   vs_import_jax=res[name]["median"] / base,
                   imports_runtime=("-" if mods is None else ("yes: " + ", ".join(mods[:3]) if mods else "no")),
                   _raw=res[name])
        if mods is not None:                    # the ratio is the number of runtime modules imported
            report.target(f"{name}: PJRT runtime modules imported", float(len(mods)), 0)

    examples = sorted(p.name for p in (ROOT / "examples").glob("*.arr"))
    for ex in examples:
        warm_cmd = [*cli, "run", f"examples/{ex}"]
        _run(warm_cmd, env)                                   # fill the cache
        no_cache = dict(env, ARRC_NO_CACHE="1")
        r = repeated({
            "import jax": lambda i: _run([sys.executable, "-c", "import jax"], env),
            "warm": lambda i: _run(warm_cmd, env),
            "no cache": lambda i: _run(warm_cmd, no_cache),
        }, reps)
        ij, w, c = r["import jax"]["median"], r["warm"]["median"], r["no cache"]["median"]
        report.row("arrc run (new process)", example=ex, import_jax=fmt_time(ij), warm=fmt_time(w),
                   warm_vs_import_jax=w / ij, no_cache=fmt_time(c), no_cache_vs_import_jax=c / ij, _raw=r)
        report.target(f"warm arrc run examples/{ex} / import jax", w / ij, TARGET_WARM_RUN)


def _precompile() -> bool:
    """Write arrc's bytecode (__pycache__, git-ignored), as any normal install has; this machine's
    PYTHONDONTWRITEBYTECODE=1 would otherwise make every process compile arrc from source."""
    import compileall
    dirs = [ROOT / d for d in ("arrc", "compiler", "runtime", "passes")]
    return all(compileall.compile_dir(str(d), quiet=1) for d in dirs if d.is_dir())


# ---- main ---------------------------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer rounds; skip JAX at 8000 statements")
    ap.add_argument("--only", help="comma-separated substrings of program names")
    ap.add_argument("--skip", default="", help="comma-separated sections to skip: programs,loops,scaling,cli")
    ap.add_argument("--no-guards", action="store_true", help="skip the guards comparison")
    ap.add_argument("--cli-module", action="store_true", help="run the CLI as `python -m arrc`, not the script")
    ap.add_argument("--device", choices=("cpu", "gpu", "tpu"), default="cpu", help="where arrc and JAX run")
    ap.add_argument("--out", help="JSON file (default bench/results/<time>.json and latest.json)")
    args = ap.parse_args(argv)
    args.budget_s = 0.6 if args.quick else 2.0     # seconds of samples per contender per program
    args.rounds_compile = 3 if args.quick else 5

    own_cache = None
    if "ARRC_CACHE_DIR" not in os.environ:          # the suite's compiles stay out of the user's cache
        own_cache = tempfile.TemporaryDirectory(prefix="arrc-bench-cache-")
        os.environ["ARRC_CACHE_DIR"] = own_cache.name
    try:
        return _main(args)
    finally:
        if own_cache is not None:
            own_cache.cleanup()


def _main(args) -> int:
    skip = set(filter(None, args.skip.split(",")))
    started = time.time()
    import jax
    import jaxlib
    import arrc
    global DEVICE
    DEVICE = args.device
    jax.config.update("jax_default_device", jax.devices(DEVICE)[0])
    print(f"arrc {arrc.__version__}, jax {jax.__version__}, jaxlib {jaxlib.__version__}, "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"on {jax.devices(DEVICE)[0].device_kind}", flush=True)
    report = Report()
    if "programs" not in skip:
        only = [s.strip() for s in args.only.split(",")] if args.only else None
        for p in P.programs(2000):
            if only and not any(s in p.name for s in only):
                continue
            bench_program(p, report, args)
    if "loops" not in skip and not args.no_guards:
        bench_guards_in_loops(report, args)
        bench_guards_by_size(report, args)
    if "scaling" not in skip:
        bench_scaling(report, args)
    if "cli" not in skip:
        bench_cli(report, args)

    for section in report.sections:
        report.print_section(section)
    report.print_targets()
    out = {"started": started, "seconds": time.time() - started, "quick": args.quick,
           "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(), "device": DEVICE,
                       "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None},
           "versions": {"arrc": arrc.__version__, "jax": jax.__version__, "jaxlib": jaxlib.__version__},
           "sections": report.sections, "targets": report.targets}
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    paths = [Path(args.out)] if args.out else [results / time.strftime("%Y%m%d-%H%M%S.json"),
                                               results / "latest.json"]
    for path in paths:
        path.write_text(json.dumps(out, indent=1, default=_json_default))
    print(f"\nwrote {', '.join(str(p) for p in paths)}")
    return 0


def _json_default(o):
    if isinstance(o, (np.floating, np.integer)):
        return o.item()
    return str(o)


if __name__ == "__main__":
    sys.exit(main())
