"""Mutated StableHLO through `arrc guard` and `arrc run`: no input may crash, hang or raise a traceback.

Seeds are real modules arrc writes (bytecode and text of examples/*.arr, one of them guarded, one with
`print`/`assert` callbacks) and a JAX export with LAPACK calls. Each case mutates one seed's bytes (bit
flips, special bytes, overwrites, insertions, deletions, duplicated runs, truncation; fixed by the seed
and the case number) and goes through
  - `runtime.foreign.guard_text(data, ...)` with every guard kind, as `arrc guard` does;
  - `ForeignFunction(path)` called with zeros, as `arrc run` does (when the module reads at all).
Acceptable: a module / results, `CompileError` whose every code is in `CODES`, `GuardError` (zeros can
make a NaN), `AssertionFailed`. Anything else is a failure: `traceback` (another exception), `crash`
(the worker died), `hang` (no answer in time while reading or guarding: each phase has LIMIT seconds, more
than arrc's own limit on one read, whose E0502 must arrive in time). A time-out while the module's own code
runs (a mutated loop bound) is counted as `slow-run`, not a failure: it is what the module says.

Cases run in a worker process (a crash cannot take the campaign down), with arrays limited to 256 MB
(`ARRC_MAX_ARRAY_BYTES`) so that a mutated shape cannot swap the machine.

    .venv/bin/python tests/fuzz/stablehlo_campaign.py --seconds 300
    .venv/bin/python tests/fuzz/stablehlo_campaign.py --cases 2000 --seed 0
    .venv/bin/python tests/fuzz/stablehlo_campaign.py --replay DIR/case.mlirbc
"""
from __future__ import annotations

import argparse
import json
import os
import random
import select
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from arrc.runtime.foreign import READ_TIMEOUT_S  # noqa: E402

MAX_ARRAY_BYTES = str(2 ** 28)
LIMIT = READ_TIMEOUT_S + 30      # per phase, seconds: a read arrc gives up on (E0502) and the time to say so
FAILURES = ("traceback", "crash", "hang")

# (example, entry, shape bindings, guard kinds to write into the seed, text too)
SEEDS = [
    ("examples/kmeans.arr", "kmeans", {"n": 12, "d": 2, "k": 3}, (), False),
    ("examples/nan_pipeline.arr", "clean", {"b": 4, "t": 6}, ("nan", "inf", "bounds", "div0"), True),
    ("examples/simulation.arr", "main", {}, (), False),
]
INTERESTING = b"\x00\x01\x7f\x80\xff\x0f\xf0"


def seed_modules() -> list[tuple[str, bytes]]:
    """(name, bytes) of every seed: bytecode (and text) arrc writes, and a JAX export calling LAPACK."""
    import arrc
    from arrc.passes.guards import GuardOptions, guard_module
    out = []
    for path, name, shapes, kinds, text in SEEDS:
        # the relative name keeps the seeds' bytes, and so every case, the same in every checkout
        fn = arrc.loads((ROOT / path).read_text(), filename=path)[name]
        lowered = fn.lower(*fn.arg_types_for(shapes))
        if kinds:
            guard_module(lowered.module, GuardOptions(frozenset(kinds)))
        stem = f"{Path(path).stem}-{name}"
        out.append((f"{stem}.mlirbc", lowered.as_bytecode()))
        if text:
            out.append((f"{stem}.mlir", lowered.as_text().encode()))
    out.append(("jax-linalg.mlir", JAX_LINALG.encode()))
    return out


# jax.jit(lambda a: (jnp.linalg.inv(a), jnp.linalg.eigh(a)[0])) at jaxlib 0.10.2, trimmed by hand.
JAX_LINALG = """\
func.func public @main(%arg0: tensor<3x3xf32>) -> (tensor<3x3xf32>, tensor<3xf32>) {
  %0:3 = stablehlo.custom_call @lapack_sgetrf_ffi(%arg0) {backend_config = "", mhlo.backend_config = {}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, operand_tuple_indices = []>], result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<0> : tensor<1xindex>, dense<> : tensor<0xindex>]} : (tensor<3x3xf32>) -> (tensor<3x3xf32>, tensor<3xi32>, tensor<i32>)
  %1:3 = stablehlo.custom_call @lapack_ssyevd_ffi(%arg0) {backend_config = "", mhlo.backend_config = {mode = 86 : ui8, uplo = 76 : ui8}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, operand_tuple_indices = []>], result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<0> : tensor<1xindex>, dense<> : tensor<0xindex>]} : (tensor<3x3xf32>) -> (tensor<3x3xf32>, tensor<3xf32>, tensor<i32>)
  %2 = stablehlo.custom_call @lapack_strsm_ffi(%0#0, %arg0) {backend_config = "", mhlo.backend_config = {diag = 85 : ui8, side = 76 : ui8, trans_x = 78 : ui8, uplo = 76 : ui8}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<[0, 1]> : tensor<2xindex>], output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 1, operand_tuple_indices = []>], result_layouts = [dense<[0, 1]> : tensor<2xindex>]} : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
  return %2, %1#1 : tensor<3x3xf32>, tensor<3xf32>
}
"""


TEXT_BYTES = b"0123456789abcdefxiu%@#<>()[]{}:,.=-+ \n\"!?"
NUMBERS = [b"0", b"-1", b"65536", b"4294967296", b"9223372036854775807", b"4611686018427387904", b"3"]


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One to four random edits of `data`. In text: half the cases only swap numbers for edge values
    (shapes, indices, attribute values: a module that still parses), the others edit mostly with
    characters MLIR's syntax uses."""
    text = data[:4] != b"ML\xefR"
    buf = bytearray(data)

    def byte() -> int:
        return rng.choice(TEXT_BYTES) if text and rng.random() < 0.9 else rng.randrange(256)
    numbers_only = text and rng.random() < 0.5         # a module that still parses, with odd values
    for _ in range(rng.randint(1, 4)):
        if not buf:
            buf = bytearray(b"ML\xefR")
        at = rng.randrange(len(buf))
        edit = 6 if numbers_only else rng.randrange(8)
        if edit == 0:
            buf[at] ^= 1 << rng.randrange(8)
        elif edit == 1:
            buf[at] = rng.choice(INTERESTING) if not text else byte()
        elif edit == 2:
            for i in range(at, min(len(buf), at + rng.randint(1, 8))):
                buf[i] = byte()
        elif edit == 3:
            buf[at:at] = bytes(byte() for _ in range(rng.randint(1, 8)))
        elif edit == 4:
            del buf[at:at + rng.randint(1, 16)]
        elif edit == 5:
            buf[at:at] = buf[at:at + rng.randint(1, 32)]
        elif edit == 6 and text:
            digits = [i for i in range(at, min(len(buf), at + 400)) if chr(buf[i]).isdigit()]
            if digits:
                start = end = digits[0]
                while end < len(buf) and chr(buf[end]).isdigit():
                    end += 1
                buf[start:end] = rng.choice(NUMBERS)
        else:
            del buf[at:]
    return bytes(buf)


def make_case(seeds: list, seed: int, index: int) -> tuple[str, bytes]:
    rng = random.Random(seed * 1_000_003 + index)
    name, data = seeds[index % len(seeds)]
    return name, mutate(data, rng)


# ---- the worker: one process that runs many cases --------------------------------------------------

def run_case(path: str, phase) -> tuple[str, str]:
    """(verdict, detail) for one file: ok | diagnostic | traceback. `phase(name)` marks progress."""
    import numpy as np

    import arrc
    from arrc.compiler.diagnostics import CODES, CompileError
    from arrc.passes.guards import KINDS, GuardOptions
    from arrc.runtime.foreign import ForeignFunction, guard_text

    def codes(err) -> str:
        found = [d.code for d in err.diagnostics]
        if not found or any(c not in CODES for c in found):
            raise AssertionError(f"diagnostics without a known code: {found}")
        return ",".join(sorted(set(found)))

    data = Path(path).read_bytes()
    try:
        phase("guard")
        guard_text(data, path, GuardOptions(frozenset(KINDS)))
        phase("read")
        fn = ForeignFunction(path)
        phase("run")
        fn([np.zeros(shape, dt.np) for dt, shape in fn.params])
        return "ok", ""
    except CompileError as err:
        return "diagnostic", codes(err) + " " + err.diagnostics[0].message[:200]
    except (arrc.GuardError, arrc.AssertionFailed) as err:
        return "ok", type(err).__name__
    except Exception:                                        # noqa: BLE001 - what the campaign looks for
        return "traceback", traceback.format_exc()


def worker_main() -> None:
    """Paths on stdin, one per line; JSON lines on the original stdout (fd 1 is /dev/null for the cases)."""
    proto = os.fdopen(os.dup(1), "w")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    import arrc.runtime.foreign  # noqa: F401 - before the first case's clock starts

    def send(**msg) -> None:
        proto.write(json.dumps(msg) + "\n")
        proto.flush()
    send(ready=True)
    for line in sys.stdin:
        verdict, detail = run_case(line.rstrip("\n"), lambda name: send(phase=name))
        send(verdict=verdict, detail=detail)


class Worker:
    def __init__(self, limit: float):
        self.limit = limit
        self.proc = None
        self.buffer = b""

    def start(self) -> None:
        self.errlog = tempfile.TemporaryFile()
        env = dict(os.environ, ARRC_MAX_ARRAY_BYTES=MAX_ARRAY_BYTES, ARRC_NO_CACHE="1", TF_CPP_MIN_LOG_LEVEL="3")
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errlog,
                                     cwd=str(ROOT), env=env)
        self.buffer = b""
        self._message(time.monotonic() + 300)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def _message(self, deadline: float) -> dict:
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
            chunk = os.read(fd, 65536)
            if not chunk:
                raise EOFError
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def run(self, path: str) -> tuple[str, str]:
        if self.proc is None:
            self.start()
        phase = "start"
        try:
            self.proc.stdin.write(path.encode() + b"\n")
            self.proc.stdin.flush()
            deadline = time.monotonic() + self.limit
            while True:
                msg = self._message(deadline)
                if "phase" in msg:           # guard and read each read the file in a child of their own
                    phase = msg["phase"]
                    deadline = time.monotonic() + self.limit
                    continue
                return msg["verdict"], msg["detail"]
        except TimeoutError:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
            if phase == "run":
                return "slow-run", f"the module ran longer than {self.limit:.0f} s"
            return "hang", f"no answer within {self.limit:.0f} s while in phase {phase!r}"
        except (EOFError, BrokenPipeError, OSError):
            code = self.proc.wait()
            self.errlog.seek(0)
            tail = self.errlog.read().decode("utf-8", "replace")[-2000:]
            self.proc = None
            return "crash", f"worker died with exit code {code} in phase {phase!r}\n{tail}"


def campaign(seed: int, cases: int | None, seconds: float | None, limit: float = LIMIT,
             outdir: Path | None = None, quiet: bool = False) -> dict:
    """Run `cases` cases (or for `seconds`); returns the counts by verdict and the failures."""
    seeds = seed_modules()
    workdir = Path(tempfile.mkdtemp(prefix="arrc-stablehlo-fuzz-"))
    worker = Worker(limit)
    start = time.monotonic()
    counts: dict[str, int] = {}
    failures: list[dict] = []
    reader_crashes = 0
    index = 0
    try:
        while (cases is None or index < cases) and (seconds is None or time.monotonic() - start < seconds):
            name, data = make_case(seeds, seed, index)
            path = workdir / f"case{index}-{name}"
            path.write_bytes(data)
            verdict, detail = worker.run(str(path))
            counts[verdict] = counts.get(verdict, 0) + 1
            reader_crashes += "the MLIR reader crashed" in detail
            if verdict in FAILURES:
                saved = path
                if outdir is not None:
                    outdir.mkdir(parents=True, exist_ok=True)
                    saved = outdir / path.name
                    saved.write_bytes(data)
                failures.append({"case": index, "verdict": verdict, "detail": detail, "path": str(saved)})
                if not quiet:
                    print(f"FAIL case {index} [{verdict}] {saved}\n    {detail.strip()[-400:]}", flush=True)
            else:
                path.unlink()
            index += 1
            if not quiet and index % 200 == 0:
                print(f"... {index} cases, {len(failures)} failures, {time.monotonic() - start:.0f} s", flush=True)
    finally:
        worker.stop()
    return {"cases": index, "counts": counts, "failures": failures, "reader_crashes": reader_crashes,
            "seconds": time.monotonic() - start}


def summary(result: dict) -> str:
    c = result["counts"]
    return (f"{result['cases']} cases in {result['seconds']:.0f} s: "
            + ", ".join(f"{k} {c.get(k, 0)}" for k in ("ok", "diagnostic", "slow-run") + FAILURES)
            + f"; reader crashes caught in the child: {result['reader_crashes']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, help="run for this long (default: 60 unless --cases)")
    parser.add_argument("--cases", type=int, help="run this many cases")
    parser.add_argument("--seed", type=int, help="campaign seed (default: random, printed)")
    parser.add_argument("--limit", type=float, default=LIMIT, help="time limit per phase of a case, seconds")
    parser.add_argument("--out", help="directory for failing inputs (default: left in the work directory)")
    parser.add_argument("--replay", metavar="FILE", help="run one saved input and print the verdict")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker_main()
        return 0
    if args.replay:
        worker = Worker(args.limit)
        try:
            verdict, detail = worker.run(str(Path(args.replay).resolve()))
        finally:
            worker.stop()
        print(f"{verdict}: {detail}")
        return 1 if verdict in FAILURES else 0
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2 ** 31)
    seconds = args.seconds if args.seconds is not None or args.cases is not None else 60.0
    print(f"arrc StableHLO fuzz campaign: seed {seed}", flush=True)
    result = campaign(seed, args.cases, seconds, args.limit, Path(args.out) if args.out else None)
    print(summary(result))
    return 1 if result["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
