"""Adversarial campaign (issue 12): hostile inputs at every door arrc opens, never a crash, a hang, a
traceback or a wrong number.

Classes (each case is fixed by the class, the campaign seed and the case number):
  args      random NumPy arrays, jax arrays and Python values (every arr dtype, unsupported ones: object,
            complex, str, bytes, datetime, structured, void, float128, float8; random byte order, strided,
            reversed, transposed, Fortran, broadcast, read-only, 0-d, empty, wrong ranks and sizes,
            ragged lists, out-of-range ints) in random orders of good and bad calls, repeated, on a fresh
            module of one small function (elementwise, transposing, scalar or two-parameter; plain,
            guarded and/or printing), with jax_enable_x64 off and on. Oracle: ArgumentError (the same
            message every time for the same value), a GuardError only where a float is non-finite, or
            NumPy's numbers, dtype and shape; a NumPy array is refused exactly when its dtype or shape is
            wrong; `print` runs once per call that got past the argument check.
  cli       `.npy` / `.npz` argument files (`--arg x=@FILE` to `arrc run`, in-process through
            `arrc.cli.main`): good ones in every layout, header edits (descr, shape, fortran order,
            length, version), byte flips, truncation, trailing bytes, zip damage, extra or missing
            members, a zip bomb, and special files (FIFO, directory, /dev/zero, links). Oracle: exit 0
            with the numbers NumPy computes from `numpy.load` of the same file (an untouched good file
            must give exit 0), or exit 2 with one `arrc: error:` line; never a traceback, a Python
            warning (counted as a traceback: Python's internals reaching the user) or exit 4.
  cache     an ARRC_CACHE_DIR holding two programs' compile-cache entries (same signature, different
            numbers) and the parser tables of two grammars, damaged at random: the named damages of
            tests/test_adversarial_cache.py, byte flips, truncation, appended bytes, swapped, renamed and
            spliced entries, FIFOs, links to /dev/zero, dangling links, directories, a world-writable
            directory. Oracle: each program computes its own numbers, each parser parses its own grammar.
  stablehlo tests/fuzz/stablehlo_campaign.py (mutated bytecode and text through `arrc guard`/`arrc run`),
            run as a subprocess for its share of the time; its counts are read from its summary line.

Cases of the first three classes run in a worker process (its address space bounded, arrays limited to
64 MiB): a worker killed by a signal is a `crash`, no answer within the time limit is a `hang`, a
"Traceback" in the output or an unexpected exception is a `traceback`, a disagreement is `wrong`.

    .venv/bin/python tests/fuzz/adversarial_campaign.py --seconds 300
    .venv/bin/python tests/fuzz/adversarial_campaign.py --cases 50 --seed 0 --classes args,cache
    .venv/bin/python tests/fuzz/adversarial_campaign.py --replay args:SEED:CASE   # one case, in this process

Every failing case is printed with its seed, number and replay command; the exit status is 1 if any count
of crashes, hangs, tracebacks or wrong results is nonzero.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for _p in (str(ROOT), str(ROOT / "tests")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from fuzz.frontend_campaign import _recv, _send  # length-prefixed pickles over a pipe

CLASSES = ("args", "cli", "cache", "stablehlo")
SHARES = {"args": 0.3, "cli": 0.2, "cache": 0.2, "stablehlo": 0.3}     # of --seconds
FAILURES = ("crash", "hang", "traceback", "wrong")
MAX_ARRAY_BYTES = 64 << 20
DTYPE_NAMES = ("bool", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32", "f64")


class Wrong(Exception):
    """A disagreement with the oracle (a wrong result, a wrong refusal, a wrong exit code)."""


# ---------------------------------------------------------------------------------------------------
# shared: functions, their NumPy reference, random arrays
# ---------------------------------------------------------------------------------------------------

def dtype_of(name: str):
    from arrc.compiler.types import DTYPES
    return DTYPES[name]


def op_text(name: str, x: str) -> str:
    dt = dtype_of(name)
    return f"not {x}" if dt.is_bool else (f"{x} * 2.0 + 1.0" if dt.is_float else f"{x} * 3 + 1")


def op2_text(name: str) -> str:
    dt = dtype_of(name)
    return "x != y" if dt.is_bool else ("x * 2.0 + y" if dt.is_float else "x * 3 + y")


# kind -> (parameters, result, body expression); D is the dtype, every product above is exact
KINDS = {
    "vec": ("x: D[n]", "D[n]", lambda d: op_text(d, "x")),
    "mat": ("x: D[r, c]", "D[c, r]", lambda d: op_text(d, "x.T")),
    "scalar": ("x: D", "D", lambda d: op_text(d, "x")),
    "two": ("x: D[n], y: D[n]", "D[n]", op2_text),
}
RANK = {"vec": 1, "mat": 2, "scalar": 0, "two": 1}
PRINT_MARK = "@@printed"


def source(name: str, kind: str, entry: str = "f", printing: bool = False) -> str:
    params, result, body = KINDS[kind]
    lines = [f"def {entry}({params.replace('D', name)}) -> {result.replace('D', name)}:"]
    if printing:
        lines.append(f'    print("{PRINT_MARK}", x)')
    lines.append(f"    return {body(name)}")
    return "\n".join(lines) + "\n"


def reference(name: str, kind: str, *args, fused: bool = False):
    """NumPy's result of `kind` on native arrays of dtype `name` (integers wrap, as arr's do). `fused`: a
    float `x * 2 + y` as one rounding (XLA:CPU may contract it into an FMA: `-max * 2 + max` is then
    `-max`, not `-inf`; times 2 is exact, so only an overflow tells the two apart)."""
    import numpy as np
    dt = dtype_of(name)
    x = np.asarray(args[0])
    if fused and dt.is_float and kind != "mat":
        x = x.astype(np.longdouble)
    if kind == "mat":
        x = x.T
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if kind == "two":
            y = np.asarray(args[1]).astype(x.dtype) if x.dtype == np.longdouble else np.asarray(args[1])
            if dt.is_bool:
                out = x != y
            else:
                out = x * dt.np.type(2 if dt.is_float else 3) + y
        elif dt.is_bool:
            out = np.logical_not(x)
        elif dt.is_float:
            out = x * dt.np.type(2) + dt.np.type(1)
        else:
            out = x * dt.np.type(3) + dt.np.type(1)
        return np.asarray(out, dt.np)       # (inside: a fused result's cast may overflow, as it should)


def same_as_reference(got, name: str, kind: str, *args) -> str | None:
    """`same_numbers` against NumPy's result, or against the fused one where that is what XLA computed."""
    problem = same_numbers(got, reference(name, kind, *args))
    if problem and dtype_of(name).is_float and same_numbers(got, reference(name, kind, *args, fused=True)) is None:
        return None
    return problem


def same_numbers(got, want) -> str | None:
    """None if `got` has `want`'s dtype, shape and values (NaNs in the same places), else the difference."""
    import numpy as np
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"got {got.dtype}{list(got.shape)}, expected {want.dtype}{list(want.shape)}"
    if is_float(want):
        a, b = got.astype(np.float64), want.astype(np.float64)
        numbers = ~np.isnan(b)
        same = np.array_equal(a, b, equal_nan=True) and np.array_equal(np.signbit(a[numbers]), np.signbit(b[numbers]))
    else:
        same = np.array_equal(got, want)
    return None if same else f"got {got.tolist()!r}, expected {want.tolist()!r}"


def is_float(a) -> bool:
    """A float array (bfloat16's NumPy kind is "V")."""
    import numpy as np
    return np.asarray(a).dtype.kind == "f" or np.asarray(a).dtype.name == "bfloat16"


def nonfinite(a) -> bool:
    import numpy as np
    return is_float(a) and not np.isfinite(np.asarray(a).astype(np.float64)).all()


def values(name: str, size: int, rng):
    """`size` values of dtype `name` from its edge cases and small random ones (no subnormals: XLA:CPU
    flushes them)."""
    import ml_dtypes
    import numpy as np
    dt = dtype_of(name)
    if dt.is_bool:
        return np.array([rng.random() < 0.5 for _ in range(size)], bool)
    if dt.is_int:
        info = np.iinfo(dt.np)
        pool = [0, 1, info.max, info.min, info.max - 1, (info.min + 1) if info.min else 2]
        out = [rng.choice(pool) if rng.random() < 0.3 else rng.randint(max(info.min, -100), min(info.max, 100))
               for _ in range(size)]
        return np.array(out, dt.np)
    info = ml_dtypes.finfo(dt.np)          # (NumPy's finfo knows bfloat16 only from ml_dtypes 0.7)
    big = float(info.max)
    pool = [0.0, -0.0, 1.5, -2.25, 1e3, big, -big, float("nan"), float("inf"), float("-inf"), float(info.tiny) * 4]
    out = [rng.choice(pool) if rng.random() < 0.3 else round(rng.uniform(-100, 100), 2) for _ in range(size)]
    with np.errstate(all="ignore"):
        return np.array(out, np.float64).astype(dt.np)


def layout(a, rng) -> tuple[object, str]:
    """`a`'s numbers in a random memory layout / byte order: (array, how)."""
    import numpy as np
    how = rng.choice(["plain", "swapped", "strided", "reversed", "transposed", "fortran", "broadcast",
                      "readonly", "swapped-strided"])
    if "swapped" in how and a.dtype.itemsize > 1 and a.dtype.name != "bfloat16":
        a = a.astype(a.dtype.newbyteorder(">" if a.dtype.byteorder in "=<" else "<"))
    if how in ("strided", "swapped-strided") and a.ndim:
        a = np.repeat(a, 2, axis=0)[::2]
    elif how == "reversed" and a.ndim:
        a = a[::-1].copy()[::-1]                     # a negative-stride view of the same numbers
    elif how == "transposed" and a.ndim == 2:
        a = np.ascontiguousarray(a.T).T
    elif how == "fortran" and a.ndim:         # (asfortranarray makes a 0-d array 1-d)
        a = np.asfortranarray(a)
    elif how == "broadcast" and a.size and a.ndim:
        a = np.broadcast_to(a.reshape(-1)[:1], a.shape)      # zero strides: one number everywhere
    elif how == "readonly":
        a = a.copy()
        a.flags.writeable = False
    return a, how


def shape_for(kind: str, rng) -> tuple:
    rank = RANK[kind]
    return tuple(rng.randint(0, 5) for _ in range(rank))


# ---------------------------------------------------------------------------------------------------
# class args: bad arrays on first and later calls
# ---------------------------------------------------------------------------------------------------

def _unsupported(shape: tuple, rng):
    import ml_dtypes
    import numpy as np
    size = int(np.prod(shape))
    kind = rng.choice(["object", "complex64", "complex128", "str", "bytes", "datetime", "timedelta",
                       "structured", "void", "longdouble", "float8", "object-of-arrays"])
    if kind == "object":
        return np.array([1.5] * size, dtype=object).reshape(shape)
    if kind == "object-of-arrays":
        out = np.empty(shape, dtype=object)
        for i in np.ndindex(shape):
            out[i] = np.zeros(2, np.float32)
        return out
    if kind.startswith("complex"):
        return np.ones(shape, kind)
    if kind == "str":
        return np.full(shape, "1.5")
    if kind == "bytes":
        return np.full(shape, b"12")
    if kind == "datetime":
        return np.full(shape, np.datetime64("2026-12-01"))
    if kind == "timedelta":
        return np.full(shape, np.timedelta64(3, "s"))
    if kind == "structured":
        return np.zeros(shape, [("a", "<f4"), ("b", "<i4")])
    if kind == "void":
        return np.zeros(shape, "V4")
    if kind == "longdouble":
        return np.ones(shape, np.longdouble)
    return np.ones(shape, ml_dtypes.float8_e4m3fn)


def _python_junk(name: str, kind: str, rng):
    rank = RANK[kind]
    dt = dtype_of(name)
    choices = [None, "1.5", b"12", {"x": 1}, object(), [1, [2, 3]], [[1.5]] * 2, 2 ** 70, -(2 ** 70), 1.5,
               True, [True, False], [1, 2, 3], [1.5, 2.5], [2 ** 40 + 5], [-1], [float("nan")],
               [[[0.5]]], (), []]
    value = rng.choice(choices)
    if rank == 0 and isinstance(value, list) and value and rng.random() < 0.5:
        value = value[0]
    if dt.is_bool and rng.random() < 0.3:
        value = [1, 0] if rank else 1
    return value


def _good(name: str, kind: str, shape: tuple, rng, x64: bool):
    import numpy as np
    base = values(name, int(np.prod(shape)), rng).reshape(shape)
    form = rng.random()
    if form < 0.08 and name != "bf16":
        return base.tolist() if shape else base.item(), "python"
    if form < 0.16:
        import jax.numpy as jnp
        return jnp.asarray(base), "jax"
    if form < 0.22 and not shape:
        return base[()], "numpy-scalar"        # a NumPy scalar (np.float32(...), np.bool_(...))
    return layout(base, rng)


def _bad(name: str, kind: str, shape: tuple, rng, x64: bool):
    import numpy as np
    what = rng.choice(["dtype", "dtype", "dtype", "unsupported", "rank", "python", "python"])
    if what == "dtype":
        other = rng.choice([d for d in DTYPE_NAMES if d != name])
        value, how = _good(other, kind, shape, rng, x64)
        return value, f"{other} ({how})"
    if what == "unsupported":
        return _unsupported(shape, rng), "unsupported"
    if what == "rank":
        rank = RANK[kind]
        other = rng.choice([r for r in range(4) if r != rank])
        bad_shape = tuple(rng.randint(1, 3) for _ in range(other))
        value, how = layout(values(name, int(np.prod(bad_shape)), rng).reshape(bad_shape), rng)
        return value, f"rank {other} ({how})"
    return _python_junk(name, kind, rng), "python"


def _is_array(value) -> bool:
    import jax
    import numpy as np
    return isinstance(value, (np.ndarray, np.generic, jax.Array))


def _native(value, name: str):
    """The argument as arr should read it (native byte order, dtype `name`), or None when a Python value
    cannot be held by that dtype (then arr must refuse it). A Python int past 64 bits is a float for a float
    parameter, rounded to its dtype (docs/api.md): `2 ** 70` is 2.0 ** 70 for an f32, inf for an f16, and
    an int past f64's range is inf, as `1e400` is."""
    import numpy as np
    dt = dtype_of(name)
    if _is_array(value):
        a = np.asarray(value)
        return a if a.dtype.isnative else a.astype(a.dtype.newbyteorder("="))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            a = np.asarray(value)
    except Exception:                         # noqa: BLE001 - ragged lists, ...
        return None
    if a.dtype == object and dt.is_float and a.size and all(type(v) in (int, float) for v in a.ravel()):
        a = np.array([_float(v) for v in a.ravel()]).reshape(a.shape)      # NumPy holds these ints as objects
    if a.size == 0 and a.dtype == np.float64:      # `[]`: NumPy's default dtype says nothing
        return a.astype(dt.np)
    if a.dtype.kind not in "biuf" or (dt.is_bool and a.dtype.kind != "b"):
        return None
    if dt.is_int:
        if a.dtype.kind == "f":
            return None
        info = np.iinfo(dt.np)
        if a.size and (a.astype(object).min() < info.min or a.astype(object).max() > info.max):
            return None
    with np.errstate(all="ignore"):
        return a.astype(dt.np)


def _float(v: int | float) -> float:
    try:
        return float(v)
    except OverflowError:                     # an int past f64's range
        return float("inf") if v > 0 else float("-inf")


def _acceptable(value, name: str, kind: str) -> tuple[bool | None, object]:
    """(True: must be accepted, False: must be refused, None: either) and the native value."""
    dt = dtype_of(name)
    rank = RANK[kind]
    native = _native(value, name)
    if _is_array(value):
        import numpy as np
        a = np.asarray(value)
        native_dtype = a.dtype if a.dtype.isnative else a.dtype.newbyteorder("=")
        ok = native_dtype == dt.np and a.ndim == rank
        return ok, native
    if native is None or native.ndim != rank:
        return None, None                # a Python value arr may refuse; if accepted, it is wrong
    return None, native


def case_args(seed: int, index: int) -> dict:
    rng = random.Random(f"args:{seed}:{index}")
    name = rng.choice(DTYPE_NAMES)
    kind = rng.choice(list(KINDS))
    return {"rng": rng, "dtype": name, "kind": kind, "x64": rng.random() < 0.5,
            "guards": rng.random() < 0.35, "printing": rng.random() < 0.3, "calls": rng.randint(3, 7)}


def run_args(seed: int, index: int, log) -> dict:
    import jax
    import numpy as np

    import arrc
    c = case_args(seed, index)
    rng, name, kind = c["rng"], c["dtype"], c["kind"]
    src = source(name, kind, printing=c["printing"])
    log(f"x64={c['x64']} guards={c['guards']}\n{src}")
    tags = {"calls": 0, "accepted": 0, "refused": 0, "guard_errors": 0}
    previous: list = []
    messages: dict[int, str] = {}
    out = io.StringIO()
    accepted_good, guard_failed = 0, 0
    with jax.enable_x64(c["x64"]), contextlib.redirect_stdout(out):
        fn = arrc.loads(src, guards="all" if c["guards"] else None).f
        for step in range(c["calls"]):
            args, kinds_of = [], []
            if previous and rng.random() < 0.3:
                args, kinds_of = previous[rng.randrange(len(previous))]
            else:
                shape = shape_for(kind, rng)
                for _ in range(2 if kind == "two" else 1):
                    good = rng.random() < 0.7
                    value, how = (_good if good else _bad)(name, kind, shape, rng, c["x64"])
                    if kind == "two" and good and rng.random() < 0.15 and RANK[kind]:
                        value, how = _good(name, kind, (shape[0] + 1,), rng, c["x64"])
                        how += " (other length)"
                    args.append(value)
                    kinds_of.append(("good " if good else "bad ") + how)
                previous.append((args, kinds_of))
            verdicts = [_acceptable(a, name, kind) for a in args]
            must = [v for v, _ in verdicts]
            natives = [n for _, n in verdicts]
            shapes = {np.shape(n) for n in natives if n is not None}
            expect = (False if False in must else True if all(m is True for m in must) else None)
            if expect and kind == "two" and len(shapes) > 1:
                expect = False
            log(f"call {step}: {kinds_of} {[_describe(a) for a in args]} expect "
                f"{ {True: 'accept', False: 'refuse', None: 'either'}[expect] }")
            tags["calls"] += 1
            try:
                got = fn(*args)
                got = np.asarray(got)
            except arrc.ArgumentError as err:
                tags["refused"] += 1
                key = tuple(map(id, args))           # the same objects (all kept alive in `previous`)
                if expect is True:
                    raise Wrong(f"call {step}: refused a valid argument: {err}")
                if not str(err) or messages.setdefault(key, str(err)) != str(err):
                    raise Wrong(f"call {step}: ArgumentError changed: {messages[key]!r} then {str(err)!r}")
                continue
            except arrc.GuardError as err:
                tags["guard_errors"] += 1
                blame = any(n is not None and nonfinite(n) for n in natives)
                with contextlib.suppress(Exception):
                    blame = blame or nonfinite(reference(name, kind, *natives))
                if not c["guards"] or not blame:
                    raise Wrong(f"call {step}: unexpected {type(err).__name__}: {str(err)[:300]}")
                guard_failed += 1
                continue
            tags["accepted"] += 1
            if expect is False:
                raise Wrong(f"call {step}: accepted a bad argument: gave {got!r}")
            if any(n is None for n in natives) or (kind == "two" and len(shapes) > 1) or any(np.ndim(n) != RANK[kind]
                                                                             for n in natives):
                raise Wrong(f"call {step}: accepted a value {name} cannot hold: gave {got!r}")
            problem = same_as_reference(got, name, kind, *natives)
            if problem:
                raise Wrong(f"call {step}: wrong result: {problem}")
            accepted_good += 1
    printed = out.getvalue().count(PRINT_MARK)
    if c["printing"] and not accepted_good <= printed <= accepted_good + guard_failed:
        raise Wrong(f"print ran {printed} times for {accepted_good} calls (+{guard_failed} guard errors)")
    if not c["printing"] and printed:
        raise Wrong("printed without a print")
    if "Traceback" in out.getvalue():
        raise Wrong(f"a traceback was printed:\n{out.getvalue()[-2000:]}")
    return tags


def _describe(value) -> str:
    import numpy as np
    if _is_array(value):
        a = np.asarray(value)
        return (f"{type(value).__name__}({a.dtype.str}{list(a.shape)} strides={a.strides} "
                f"{np.array2string(a.reshape(-1)[:6], threshold=6)[:80]})")
    return repr(value)[:80]


# ---------------------------------------------------------------------------------------------------
# class cli: argument files
# ---------------------------------------------------------------------------------------------------

CLI_ENTRIES = [("vf32", "f32", "vec"), ("vf64", "f64", "vec"), ("vi32", "i32", "vec"), ("vu8", "u8", "vec"),
               ("vbool", "bool", "vec"), ("vf16", "f16", "vec"), ("vbf16", "bf16", "vec"),
               ("mf64", "f64", "mat"), ("mi16", "i16", "mat"), ("si64", "i64", "scalar")]
CLI_FIXED = "def fixed(x: f32[4]) -> f32[4]:\n    return x * 2.0 + 1.0\n"


PYTHON_WARNING = re.compile(r"\.py:\d+: \w*Warning: ")      # what `warnings` prints: internals, not a message


def cli_program() -> str:
    return "\n".join(source(d, k, entry=e) for e, d, k in CLI_ENTRIES) + "\n" + CLI_FIXED


def _npy(array, rng) -> bytes:
    import numpy as np
    buf = io.BytesIO()
    version = rng.choice([None, (1, 0), (2, 0)])
    np.lib.format.write_array(buf, array, version=version, allow_pickle=array.dtype.hasobject)
    return buf.getvalue()


def _npz(array, rng) -> bytes:
    import numpy as np
    buf = io.BytesIO()
    (np.savez_compressed if rng.random() < 0.5 else np.savez)(buf, x=array)
    return buf.getvalue()


SHAPES = [b"()", b"(0,)", b"(4,)", b"(1000000000000,)", b"(-1,)", b"(2, 2)", b"(3, 0)", b"(4611686018427387904,)",
          b"(2, 3, 4)", b"(4,", b"[4]", b"(1e3,)", b"(65536, 65536)"]
DESCRS = [b"'<f4'", b"'>f8'", b"'|b1'", b"'<i8'", b"'|O'", b"'<c8'", b"'<U3'", b"'V4'", b"'bogus'", b"'<f2'",
          b"'<M8[D]'", b"[('a', '<f4')]", b"'<f16'"]


def _mutate_file(data: bytes, rng, is_npz: bool) -> tuple[bytes, str]:
    buf = bytearray(data)
    how = rng.choice(["flip", "flip-header", "truncate", "append", "shape", "descr", "fortran", "length",
                      "version", "overwrite"] if not is_npz else ["flip", "truncate", "append", "overwrite",
                                                                  "flip-header"])
    if how == "flip" and buf:
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(buf))
            buf[at] ^= 1 << rng.randrange(8)
    elif how == "flip-header" and buf:
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(min(len(buf), 128))
            buf[at] = rng.randrange(256)
    elif how == "truncate":
        del buf[rng.randrange(len(buf) + 1):]
    elif how == "append":
        buf += bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
    elif how == "overwrite" and buf:
        at = rng.randrange(len(buf))
        buf[at:at + 8] = bytes(rng.randrange(256) for _ in range(8))
    elif how == "shape":
        buf = bytearray(re.sub(rb"'shape': \([^)]*\)", b"'shape': " + rng.choice(SHAPES), bytes(buf), count=1))
    elif how == "descr":
        buf = bytearray(re.sub(rb"'descr': ('[^']*'|\[[^\]]*\])", b"'descr': " + rng.choice(DESCRS), bytes(buf),
                               count=1))
    elif how == "fortran":
        buf = bytearray(bytes(buf).replace(b"False", b"True ", 1) if b"False" in buf
                        else bytes(buf).replace(b"True", b"0", 1))
    elif how == "length" and len(buf) > 10:
        at = 8
        buf[at] = rng.randrange(256)
    elif how == "version" and len(buf) > 7:
        buf[6] = rng.choice([0, 1, 2, 3, 255])
    return bytes(buf), how


def case_cli(seed: int, index: int) -> dict:
    rng = random.Random(f"cli:{seed}:{index}")
    entry, name, kind = rng.choice(CLI_ENTRIES + [("fixed", "f32", "vec")])
    return {"rng": rng, "entry": entry, "dtype": name, "kind": kind}


def _bomb(path: Path) -> None:
    from test_adversarial_cli import zip_bomb
    zip_bomb(path, 1 << 25)                # 128 MiB of f32 zeros from ~128 KB, more than any parameter takes


def run_cli(seed: int, index: int, log, workdir: Path) -> dict:
    import numpy as np

    from arrc.cli import main
    c = case_cli(seed, index)
    rng, entry, name, kind = c["rng"], c["entry"], c["dtype"], c["kind"]
    prog = workdir / "prog.arr"
    if not prog.exists():
        prog.write_text(cli_program())
    casedir = workdir / f"cli-{index}"
    casedir.mkdir()
    path = casedir / "x.npy"
    special = None
    must_accept = False
    try:
        r = rng.random()
        if r < 0.08:
            special = rng.choice(["fifo", "directory", "dev-zero", "link-dev-zero", "dangling", "missing",
                                  "dev-null", "bomb", "two-members", "no-members", "link-good", "empty"])
            good = np.arange(4, dtype=np.float32)
            if special == "fifo":
                os.mkfifo(path)
            elif special == "directory":
                path.mkdir()
            elif special == "dev-zero":
                path = Path("/dev/zero")
            elif special == "dev-null":
                path = Path("/dev/null")
            elif special == "link-dev-zero":
                path.symlink_to("/dev/zero")
            elif special == "dangling":
                path.symlink_to(casedir / "nowhere.npy")
            elif special == "missing":
                path = casedir / "missing.npy"
            elif special == "bomb":
                path = casedir / "bomb.npz"
                _bomb(path)
            elif special in ("two-members", "no-members"):
                path = casedir / "x.npz"
                np.savez(path, *([good, good] if special == "two-members" else []))
            elif special == "link-good":
                np.save(casedir / "good.npy", values(name, 4 if RANK[kind] else 1, rng).reshape(
                    (4,) * min(RANK[kind], 1) + (1,) * max(RANK[kind] - 1, 0)))
                path.symlink_to(casedir / "good.npy")
            else:
                path.write_bytes(b"")
            how = special
        else:
            good = rng.random() < 0.75
            dname = name if good else rng.choice([d for d in DTYPE_NAMES if d != name])
            shape = shape_for(kind, rng) if entry != "fixed" else (4,)
            if rng.random() < 0.1:
                shape = tuple(rng.randint(0, 3) for _ in range(rng.randint(0, 3)))
            base = values(dname, int(np.prod(shape)), rng).reshape(shape)
            if rng.random() < 0.08:
                base = _unsupported(shape, rng)
            array, how = layout(base, rng)
            as_npz = rng.random() < 0.3
            data = (_npz if as_npz else _npy)(np.asarray(array) if how != "broadcast" else array, rng)
            path = casedir / ("x.npz" if as_npz else "x.npy")
            if rng.random() < 0.6:
                data, mutation = _mutate_file(data, rng, as_npz)
                how += f", {mutation}"
            else:
                # (NumPy writes bf16 as the void type |V2, which arrc reads as bf16 for a bf16 parameter)
                must_accept = (base.dtype == dtype_of(name).np and array.ndim == RANK[kind]
                               and (entry != "fixed" or array.shape == (4,)))
            path.write_bytes(data)
        log(f"{entry} ({name} {kind}) file {path.name}: {how}")
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["run", str(prog), "--entry", entry, "--arg", f"x=@{path}", "--format", "json"])
        out, err = out.getvalue(), err.getvalue()
        log(f"exit {code}; stdout {out[:300]!r}; stderr {err[:300]!r}")
        if "Traceback" in out + err or code == 4:
            raise AssertionError(f"exit {code}:\n{err[-3000:]}")
        if PYTHON_WARNING.search(out + err):
            raise AssertionError(f"exit {code}, a Python warning reached the output:\n{err[-3000:]}")
        if code == 2:
            if must_accept:
                raise Wrong(f"a good file was refused: {err.strip()}")
            if out or not err.startswith("arrc: error: ") or err.count("\n") != 1 or len(err) < 20:
                raise Wrong(f"exit 2 without a one-line message: stdout {out!r}, stderr {err!r}")
            return {"exit 2": 1}
        if code != 0:
            raise Wrong(f"exit {code}: {err.strip()[:500]}")
        if special in ("fifo", "directory", "dev-zero", "link-dev-zero", "dev-null", "bomb", "missing"):
            raise Wrong(f"{special} was accepted: {out[:200]}")
        a = _numpy_load(path)
        a = np.asarray(a, a.dtype.newbyteorder("="))
        if name == "bf16" and a.dtype == np.dtype("V2"):
            a = a.view(dtype_of("bf16").np)
        if a.dtype == bool:
            a = a.view(np.uint8) != 0
        if a.dtype != dtype_of(name).np or a.ndim != RANK[kind] or (entry == "fixed" and a.shape != (4,)):
            raise Wrong(f"accepted {a.dtype}{list(a.shape)} for {entry}: {out[:200]}")
        result = json.loads(out)["results"][0]
        problem = same_as_reference(_from_json(result, name), name, kind, a)
        if problem:
            raise Wrong(f"wrong result: {problem}")
        return {"exit 0": 1}
    finally:
        shutil.rmtree(casedir, ignore_errors=True)


def _numpy_load(path: Path):
    """What NumPy reads from an argument file arrc accepted (so its declared size is bounded)."""
    import numpy as np
    loaded = np.load(path, allow_pickle=False)
    if hasattr(loaded, "files"):
        with loaded:
            return loaded[loaded.files[0]]
    return loaded


def _from_json(result: dict, name: str):
    """A `--format json` result back as an array of dtype `name` (floats are the shortest decimals of
    their own format, so they read back exactly through it)."""
    import numpy as np
    dt = dtype_of(name)
    if result["dtype"] != name:
        raise Wrong(f"result dtype {result['dtype']}, expected {name}")
    value = result["value"]
    if dt.is_float:
        wide = np.float64 if dt.bits == 64 else np.float32
        flat = np.array(np.array(value, dtype=object).reshape(-1).tolist() if result["shape"] else [value],
                        dtype=object)
        nums = np.array([float(v) for v in flat], np.float64).astype(wide)
        return nums.reshape(result["shape"]).astype(dt.np)
    return np.array(value, dt.np).reshape(result["shape"])


# ---------------------------------------------------------------------------------------------------
# class cache: damaged, swapped and special-file entries
# ---------------------------------------------------------------------------------------------------

CACHE_PROGRAMS = {"A": "def main(x: f32[n]) -> f32[n]:\n    return x * 2.0 + 1.0\n",
                  "B": "def main(x: f32[n]) -> f32[n]:\n    return x * 3.0 - 1.0\n"}
_template: dict = {}


def _cache_template(workdir: Path) -> dict:
    """A cache directory with the entries of programs A and B and the parser tables of two grammars."""
    if _template:
        return _template
    import numpy as np
    from arrc.compiler import cache as C
    from test_adversarial_cache import LARK_OPTIONS, PRODUCTS, SUMS, Builder, X

    import arrc
    where = workdir / "cache-template"
    where.mkdir(mode=0o700)
    entries = {}
    with _cache_dir(where):
        for name, src in CACHE_PROGRAMS.items():
            before = set(where.glob(f"*{C.SUFFIX}"))
            np.asarray(arrc.loads(src).main(X))
            (entries[name],) = set(where.glob(f"*{C.SUFFIX}")) - before
        for name, grammar in (("sums", SUMS), ("products", PRODUCTS)):
            before = set(where.glob("*.lark"))
            C.cached_lark(grammar, LARK_OPTIONS, Builder(grammar))
            (entries[name],) = set(where.glob("*.lark")) - before
    _template.update(dir=where, names={k: v.name for k, v in entries.items()})
    return _template


@contextlib.contextmanager
def _cache_dir(where: Path):
    old = os.environ.get("ARRC_CACHE_DIR")
    os.environ["ARRC_CACHE_DIR"] = str(where)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("ARRC_CACHE_DIR", None)
        else:
            os.environ["ARRC_CACHE_DIR"] = old


def _damage_entry(target: Path, other: Path, rng, casedir: Path) -> str:
    """One damage to the entry at `target` (`other`: the other program's / grammar's entry)."""
    from arrc.compiler import cache as C
    from test_adversarial_cache import DAMAGE
    data = target.read_bytes() if target.is_file() else b""
    hows = ["named", "named", "flip", "truncate", "append", "overwrite", "copy-other", "rename-other",
            "exchange", "other-header", "other-payload", "fifo", "dev-zero", "dangling", "directory",
            "nonempty-directory", "link-other", "link-self-outside", "hardlink-other", "unreadable"]
    if not data:            # an earlier damage left no bytes (named:zero-byte): none to flip, cut or overwrite
        hows = [h for h in hows if h not in ("flip", "truncate", "overwrite")]
    how = rng.choice(hows)
    if how == "named":
        named = sorted(DAMAGE)
        if len(data) <= C._HEADER.size:       # (cut short before) these flip a byte of the header or past it
            named = [d for d in named if d not in ("bad-digest", "bad-key-digest")]
        damage = rng.choice(named)
        target.write_bytes(DAMAGE[damage](data, target.stem))
        return f"named:{damage}"
    if how == "flip":
        buf = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            at = rng.randrange(len(buf)) if rng.random() < 0.5 else rng.randrange(min(len(buf), 80))
            buf[at] ^= 1 << rng.randrange(8)
        target.write_bytes(bytes(buf))
    elif how == "truncate":
        target.write_bytes(data[:rng.randrange(len(data))])
    elif how == "append":
        target.write_bytes(data + bytes(rng.randrange(256) for _ in range(rng.randint(1, 100))))
    elif how == "overwrite":
        at = rng.randrange(len(data))
        target.write_bytes(data[:at] + os.urandom(rng.randint(1, 64)) + data[at + 64:])
    elif how == "copy-other":
        shutil.copyfile(other, target)
    elif how == "rename-other":
        os.replace(other, target)
    elif how == "exchange":
        tmp = casedir / "swap.tmp"
        os.replace(other, tmp)
        os.replace(target, other)
        os.replace(tmp, target)
    elif how == "other-header":
        target.write_bytes(other.read_bytes()[:80] + data[80:])
    elif how == "other-payload":
        target.write_bytes(data[:80] + other.read_bytes()[80:])
    elif how == "fifo":
        target.unlink()
        os.mkfifo(target)
    elif how == "dev-zero":
        target.unlink()
        target.symlink_to("/dev/zero")
    elif how == "dangling":
        target.unlink()
        target.symlink_to(casedir / "nowhere")
    elif how in ("directory", "nonempty-directory"):
        target.unlink()
        target.mkdir()
        if how == "nonempty-directory":
            (target / "keep").write_text("not an entry")
    elif how == "link-other":
        target.unlink()
        target.symlink_to(other)
    elif how == "link-self-outside":
        outside = casedir / ("outside" + target.suffix)
        os.replace(target, outside)
        target.symlink_to(outside)
    elif how == "hardlink-other":
        target.unlink()
        os.link(other, target)
    elif how == "unreadable":
        target.chmod(0)
    return how


def case_cache(seed: int, index: int) -> dict:
    rng = random.Random(f"cache:{seed}:{index}")
    return {"rng": rng, "target": rng.choice(["B", "B", "B", "A", "sums", "products"])}


def run_cache(seed: int, index: int, log, workdir: Path) -> dict:
    import numpy as np
    from arrc.compiler import cache as C
    from test_adversarial_cache import LARK_OPTIONS, PRODUCTS, SUMS, Builder, X

    import arrc
    template = _cache_template(workdir)
    c = case_cache(seed, index)
    rng = c["rng"]
    casedir = workdir / f"cache-{index}"
    where = casedir / "cache"
    casedir.mkdir()
    shutil.copytree(template["dir"], where)
    where.chmod(0o700)
    names = template["names"]
    pair = {"A": "B", "B": "A", "sums": "products", "products": "sums"}
    damages = []
    try:
        for _ in range(rng.randint(1, 2)):
            target = c["target"] if not damages or rng.random() < 0.5 else pair[c["target"]]
            t, o = where / names[target], where / names[pair[target]]
            if not t.is_file() or t.is_symlink() or not o.is_file() or os.path.samefile(t, o):
                continue                  # (the first damage left no regular file here, or a hard link)
            damages.append(f"{target}:{_damage_entry(t, o, rng, casedir)}")
        if rng.random() < 0.1:
            where.chmod(0o777)
            damages.append("directory:world-writable")
        log(f"damage {damages}")
        before = dict(C.stats)
        with _cache_dir(where):
            for step in range(rng.randint(2, 4)):
                which = rng.choice(["A", "B", "sums", "products"])
                if which in CACHE_PROGRAMS:
                    got = np.asarray(arrc.loads(CACHE_PROGRAMS[which]).main(X))
                    want = reference("f32", "vec", X) if which == "A" else (X * np.float32(3) - np.float32(1))
                    problem = same_numbers(got, want)
                else:
                    from lark.exceptions import UnexpectedInput
                    grammar = SUMS if which == "sums" else PRODUCTS
                    parser = C.cached_lark(grammar, LARK_OPTIONS, Builder(grammar))
                    mine, theirs = ("2 + 3", "2 * 3") if which == "sums" else ("2 * 3", "2 + 3")
                    problem = None
                    if [str(t) for t in parser.parse(mine).children] != ["2", "3"]:
                        problem = f"{which} parser does not parse {mine!r}"
                    try:
                        parser.parse(theirs)
                        problem = f"{which} parser parses the other grammar's {theirs!r}"
                    except UnexpectedInput:
                        pass
                log(f"run {step}: {which} -> {'ok' if problem is None else problem}")
                if problem:
                    raise Wrong(f"run {step} of {which} after {damages}: {problem}")
        return {"corrupt": C.stats["corrupt"] - before["corrupt"], "hits": C.stats["hits"] - before["hits"]}
    finally:
        for p in [where, *where.rglob("*")] if where.exists() else []:
            with contextlib.suppress(OSError):
                if not p.is_symlink():
                    p.chmod(0o700)
        shutil.rmtree(casedir, ignore_errors=True)


# ---------------------------------------------------------------------------------------------------
# worker process: runs cases of args / cli / cache
# ---------------------------------------------------------------------------------------------------

SELFTEST = ("traceback", "wrong", "crash", "hang")      # the hang last: no worker restart after it


def run_selftest(seed: int, index: int, log, workdir: Path) -> dict:
    """Not a class of the campaign: its cases fail in turn as SELFTEST says (tests check the counting)."""
    what = SELFTEST[index % len(SELFTEST)]
    if what == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    if what == "hang":
        time.sleep(3600)
    if what == "traceback":
        print("Traceback (most recent call last):\n  (printed by a self-test case)", file=sys.stderr)
        return {}
    raise Wrong("a self-test case")


RUNNERS = {"args": lambda s, i, log, w: run_args(s, i, log), "cli": run_cli, "cache": run_cache,
           "selftest": run_selftest}


def run_case(cls: str, seed: int, index: int, workdir: Path, verbose: bool = False) -> tuple[str, str, dict]:
    """(verdict, detail, tags): ok | wrong | traceback. The detail holds the case's log."""
    lines: list[str] = []

    def log(text: str) -> None:
        lines.append(text)
        if verbose:
            print(text, flush=True)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), warnings.catch_warnings():
            warnings.simplefilter("always")          # every case sees its warnings, whatever ran before
            tags = RUNNERS[cls](seed, index, log, workdir)
        if "Traceback" in err.getvalue():
            return "traceback", "\n".join(lines) + "\n--- stderr ---\n" + err.getvalue()[-3000:], {}
        return "ok", "", tags
    except Wrong as w:
        return "wrong", "\n".join(lines) + f"\n--- problem ---\n{w}", {}
    except Exception:                             # noqa: BLE001 - anything else is what we look for
        return "traceback", "\n".join(lines) + "\n--- traceback ---\n" + traceback.format_exc()[-4000:], {}


def _bound_memory(extra: int = 4 << 30) -> None:
    """Limit the address space to what the warmed-up process has plus `extra`: reading /dev/zero or a
    huge declared size then fails fast instead of taking the machine's memory."""
    import resource
    with open("/proc/self/status") as f:
        vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (vm + extra, resource.RLIM_INFINITY))


def worker_main() -> None:
    proto = os.fdopen(os.dup(1), "wb")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    from arrc.runtime import pjrt

    import arrc
    import arrc.cli  # noqa: F401
    pjrt.backend("cpu")
    if os.path.exists("/proc/self/status"):
        _bound_memory()
    _send(proto, "ready")
    with tempfile.TemporaryDirectory(prefix="arrc-adversarial-") as tmp:
        workdir = Path(tmp)
        os.environ["ARRC_CACHE_DIR"] = str(workdir / "cache")
        while True:
            try:
                cls, seed, index = _recv(sys.stdin.fileno())
            except EOFError:
                return
            _send(proto, run_case(cls, seed, index, workdir))


class Worker:
    def __init__(self):
        self.proc = None
        self.errlog = None

    def start(self) -> None:
        self.errlog = tempfile.TemporaryFile()       # noqa: SIM115 - the worker's stderr, read after a crash
        env = dict(os.environ, PYTHONFAULTHANDLER="1", TF_CPP_MIN_LOG_LEVEL="3",
                   ARRC_MAX_ARRAY_BYTES=str(MAX_ARRAY_BYTES))
        env.pop("ARRC_NO_CACHE", None)
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errlog,
                                     cwd=str(ROOT), env=env)
        _recv(self.proc.stdout.fileno(), time.monotonic() + 300)

    def stop(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def run(self, cls: str, seed: int, index: int, limit: float) -> tuple[str, str, dict]:
        if self.proc is None:
            self.start()
        try:
            _send(self.proc.stdin, (cls, seed, index))
            return _recv(self.proc.stdout.fileno(), time.monotonic() + limit)
        except TimeoutError:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
            return "hang", f"no answer within {limit:.0f} s; worker killed", {}
        except (EOFError, BrokenPipeError, OSError):
            code = self.proc.wait()
            self.errlog.seek(0)
            tail = self.errlog.read().decode("utf-8", "replace")[-3000:]
            self.proc = None
            how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
            return "crash", f"worker died ({how})\n{tail}", {}


# ---------------------------------------------------------------------------------------------------
# driver
# ---------------------------------------------------------------------------------------------------

def run_worker_class(cls: str, seed: int, cases: int | None, seconds: float | None, limit: float,
                     worker: Worker, quiet: bool = False) -> dict:
    counts = {k: 0 for k in FAILURES}
    tags: dict[str, int] = {}
    failures = []
    start = time.monotonic()
    index = 0
    while (cases is None or index < cases) and (seconds is None or time.monotonic() - start < seconds):
        verdict, detail, case_tags = worker.run(cls, seed, index, limit)
        for k, v in case_tags.items():
            tags[k] = tags.get(k, 0) + v
        if verdict in FAILURES:
            counts[verdict] += 1
            failures.append({"case": index, "verdict": verdict, "detail": detail})
            if not quiet:
                print(f"FAIL {cls} seed {seed} case {index} [{verdict}]\n{_indent(detail[-3000:])}\n"
                      f"    replay: {sys.executable} tests/fuzz/adversarial_campaign.py --replay "
                      f"{cls}:{seed}:{index}", flush=True)
        index += 1
    return {"class": cls, "cases": index, **counts, "failures": failures, "tags": tags,
            "seconds": time.monotonic() - start}


STABLEHLO = ROOT / "tests" / "fuzz" / "stablehlo_campaign.py"
_SUMMARY = re.compile(r"(\d+) cases in \d+ s: ok (\d+), diagnostic (\d+), slow-run (\d+), traceback (\d+), "
                      r"crash (\d+), hang (\d+)")


def run_stablehlo(seed: int, cases: int | None, seconds: float | None, quiet: bool = False) -> dict:
    """Run tests/fuzz/stablehlo_campaign.py as a subprocess and read its counts from its summary line.
    It has no wrong-result oracle (a mutated module has no expected result): `wrong` is None."""
    result = {"class": "stablehlo", "cases": 0, "crash": 0, "hang": 0, "traceback": 0, "wrong": None,
              "failures": [], "tags": {}}
    if not STABLEHLO.exists():
        result.update(error=f"{STABLEHLO.relative_to(ROOT)} is missing: the StableHLO class did not run")
        return result
    argv = [sys.executable, str(STABLEHLO), "--seed", str(seed)]
    argv += ["--cases", str(cases)] if cases is not None else []
    argv += ["--seconds", str(seconds)] if seconds is not None else []
    start = time.monotonic()
    try:
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False,
                              timeout=(seconds or 0) + (cases or 0) * 120 + 600)
        output = done.stdout + done.stderr
    except subprocess.TimeoutExpired as err:
        output, done = f"{err.stdout or ''}{err.stderr or ''}", None
    result["seconds"] = time.monotonic() - start
    found = _SUMMARY.findall(output)
    if not found:
        result.update(error=f"no summary line from {STABLEHLO.name} (exit "
                            f"{done.returncode if done else 'timeout'}):\n{output[-3000:]}")
        return result
    n, ok, diag, slow, tb, crash, hang = map(int, found[-1])
    result.update(cases=n, traceback=tb, crash=crash, hang=hang,
                  tags={"ok": ok, "diagnostic": diag, "slow-run": slow})
    if tb or crash or hang:
        result["failures"] = [{"case": None, "verdict": "see output", "detail": output[-4000:]}]
        if not quiet:
            print(f"FAIL stablehlo seed {seed}:\n{_indent(output[-4000:])}", flush=True)
    return result


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


def campaign(seed: int, classes=CLASSES, cases: int | None = None, seconds: float | None = None,
             limit: float = 120.0, quiet: bool = False) -> list[dict]:
    """Run each class for `cases` cases or its share of `seconds`; one result dict per class."""
    results = []
    worker = Worker()
    share = sum(SHARES[c] for c in classes)
    try:
        for cls in classes:
            budget = None if seconds is None else seconds * SHARES[cls] / share
            if not quiet:
                print(f"--- {cls}: " + (f"{cases} cases" if cases is not None else f"{budget:.0f} s"), flush=True)
            if cls == "stablehlo":
                results.append(run_stablehlo(seed, cases, budget, quiet))
            else:
                results.append(run_worker_class(cls, seed, cases, budget, limit, worker, quiet))
    finally:
        worker.stop()
    return results


def failed(results: list[dict]) -> bool:
    return any(r.get("error") or any(r[k] for k in FAILURES if r.get(k)) for r in results)


def table(results: list[dict]) -> str:
    rows = [f"{'class':10s} {'cases':>7s} {'crashes':>8s} {'hangs':>6s} {'tracebacks':>11s} {'wrong':>6s}  outcomes"]
    for r in results:
        wrong = "n/a" if r["wrong"] is None else str(r["wrong"])
        tags = ", ".join(f"{k} {v}" for k, v in r["tags"].items())
        rows.append(f"{r['class']:10s} {r['cases']:7d} {r['crash']:8d} {r['hang']:6d} {r['traceback']:11d} "
                    f"{wrong:>6s}  {tags}" + (f"  ERROR: {r['error'].splitlines()[0]}" if r.get("error") else ""))
    return "\n".join(rows)


def replay(spec: str) -> int:
    cls, seed, index = spec.split(":")
    if cls == "stablehlo":
        print("replay a StableHLO case with tests/fuzz/stablehlo_campaign.py --replay FILE")
        return 2
    os.environ.setdefault("ARRC_MAX_ARRAY_BYTES", str(MAX_ARRAY_BYTES))
    with tempfile.TemporaryDirectory(prefix="arrc-adversarial-replay-") as tmp:
        os.environ["ARRC_CACHE_DIR"] = str(Path(tmp) / "cache")
        verdict, detail, tags = run_case(cls, int(seed), int(index), Path(tmp), verbose=True)
    print(f"{verdict} {tags}\n{detail}")
    return 1 if verdict in FAILURES else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, help="total time, shared by the classes (default: 60 unless "
                                                      "--cases)")
    parser.add_argument("--cases", type=int, help="cases per class")
    parser.add_argument("--seed", type=int, help="campaign seed (default: random, printed)")
    parser.add_argument("--classes", default=",".join(CLASSES), help=f"comma-separated, of {', '.join(CLASSES)}")
    parser.add_argument("--limit", type=float, default=120.0, help="time limit per case, seconds (then: hang)")
    parser.add_argument("--replay", metavar="CLASS:SEED:CASE", help="run one case in this process, verbosely")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker_main()
        return 0
    if args.replay:
        return replay(args.replay)
    classes = tuple(c.strip() for c in args.classes.split(",") if c.strip())
    unknown = set(classes) - set(CLASSES)
    if unknown:
        parser.error(f"unknown class {min(unknown)!r}")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2 ** 31)
    seconds = args.seconds if args.seconds is not None or args.cases is not None else 60.0
    print(f"arrc adversarial campaign: seed {seed}", flush=True)
    results = campaign(seed, classes, args.cases, seconds, args.limit)
    print("\n" + table(results))
    for r in results:
        if r.get("error"):
            print(f"\n{r['class']}: {r['error']}")
    bad = failed(results)
    print("\n" + ("FAILURES: see above (each with its replay command)" if bad else "no failures"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
