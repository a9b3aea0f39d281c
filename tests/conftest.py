"""Shared helpers for the arrc test suites.

- `compile_src(src)`: compile arr source text (one `arrc.loads` per test group: call it from a
  module- or class-scoped fixture and reuse the module; each function specialization is compiled once).
- `arg_type("f32[2, 3]")`: a concrete argument type for `Function.lower`, built without `arrc.spec`.
- `assert_close(actual, expected, dtype)`: value comparison with per-dtype tolerances (NaNs must match).
- `--update-goldens`: rewrite the golden `.txt` files instead of comparing against them.

jax.numpy is the oracle, with x64 on (the language promises JAX's promotion with x64 enabled).
"""
from __future__ import annotations

import functools
import os
import re

# The array size limit (E0215) defaults to this machine's memory; fix it so goldens are the same everywhere.
os.environ.setdefault("ARRC_MAX_ARRAY_BYTES", str(16 * 2 ** 30))
# The persistent compile cache of a test run is its own (removed at exit), not the user's: thousands of
# test programs would otherwise stay in ~/.cache/arrc, and a run would depend on what earlier runs left.
if "ARRC_CACHE_DIR" not in os.environ:
    import atexit
    import shutil
    import tempfile
    os.environ["ARRC_CACHE_DIR"] = tempfile.mkdtemp(prefix="arrc-test-cache-")
    atexit.register(shutil.rmtree, os.environ["ARRC_CACHE_DIR"], True)

import jax
import ml_dtypes
import numpy as np
import pytest

jax.config.update("jax_enable_x64", True)

import arrc  # noqa: E402
from arrc.compiler.types import DTYPES, ArrayType, Dim  # noqa: E402

FLOATS = ["f16", "bf16", "f32", "f64"]
SIGNED = ["i8", "i16", "i32", "i64"]
UNSIGNED = ["u8", "u16", "u32", "u64"]
INTS = SIGNED + UNSIGNED
ALL_DTYPES = ["bool"] + INTS + FLOATS

# Relative/absolute tolerance per result dtype (a few ulps of each format).
TOLERANCE = {
    "f16": (4e-3, 1e-3),
    "bf16": (2e-2, 1e-2),
    "f32": (2e-6, 1e-6),
    "f64": (1e-13, 1e-14),
}


def pytest_addoption(parser):
    parser.addoption("--update-goldens", action="store_true", default=False,
                     help="rewrite the golden files (tests/golden/**.txt) from the current output")


@pytest.fixture(scope="session")
def update_goldens(request) -> bool:
    return bool(request.config.getoption("--update-goldens"))


def compile_src(src: str, filename: str = "test.arr", warnings: str = "warn"):
    """Compile arr source (dedent-free: write the source flush left)."""
    return arrc.loads(src, filename=filename, warnings=warnings)


def np_dtype(name: str) -> np.dtype:
    return DTYPES[name].np


def arg_type(text: str) -> ArrayType:
    """`"f32[2, 3]"` -> a concrete ArrayType (a local stand-in for `arrc.spec`)."""
    m = re.fullmatch(r"\s*(\w+)\s*(?:\[([^\]]*)\])?\s*", text)
    assert m, text
    dims = () if not m.group(2) else tuple(Dim.const(int(d)) for d in m.group(2).split(","))
    return ArrayType(DTYPES[m.group(1)], dims)


def lower_text(mod, name: str, *types: str, debug_info: bool = True) -> str:
    return mod[name].lower(*(arg_type(t) for t in types)).as_text(debug_info=debug_info)


def to_numpy(x) -> np.ndarray:
    return np.asarray(x)


def assert_close(actual, expected, dtype: str | None = None, rtol=None, atol=None):
    """Compare values: exact for ints/bools, per-dtype tolerance for floats; NaN positions must agree."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    dtype = dtype or _short_name(actual.dtype)
    if dtype not in TOLERANCE:
        np.testing.assert_array_equal(actual, expected.astype(actual.dtype) if expected.dtype != actual.dtype
                                      else expected)
        return
    r, a = TOLERANCE[dtype]
    np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64),
                               rtol=r if rtol is None else rtol, atol=a if atol is None else atol,
                               equal_nan=True)


def assert_value_and_grad_match_jax(fn, twin, size: int = 6, seeds=(1, 2)) -> None:
    """arrc.value_and_grad of an arr function of two f64[size] arguments against jax.value_and_grad of
    its JAX twin, at random points."""
    for seed in seeds:
        rng = np.random.default_rng(seed)
        x, y = rng.standard_normal(size), rng.standard_normal(size)
        value, (gx, gy) = arrc.value_and_grad(fn, argnums=(0, 1))(x, y)
        want_value, (wx, wy) = jax.value_and_grad(twin, argnums=(0, 1))(x, y)
        np.testing.assert_allclose(value, want_value, rtol=1e-12)
        np.testing.assert_allclose(gx, wx, rtol=1e-11, atol=1e-13)
        np.testing.assert_allclose(gy, wy, rtol=1e-11, atol=1e-13)


def _short_name(np_dt) -> str:
    for name, dt in DTYPES.items():
        if dt.np == np.dtype(np_dt):
            return name
    return str(np_dt)


def short_name(np_dt) -> str:
    return _short_name(np_dt)


def sample(dtype: str, shape=(7,), lo=-3.0, hi=3.0, seed=0) -> np.ndarray:
    """Deterministic sample data of an arr dtype (ints within the dtype's range)."""
    rng = np.random.default_rng(seed)
    dt = DTYPES[dtype]
    if dt.is_bool:
        return rng.random(shape) < 0.5
    if dt.is_int:
        lo_i = max(int(lo * 10), np.iinfo(dt.np).min)
        hi_i = min(int(hi * 10), np.iinfo(dt.np).max)
        if dt.kind == "uint":
            lo_i = 0
        return rng.integers(lo_i, hi_i + 1, size=shape).astype(dt.np)
    data = rng.uniform(lo, hi, size=shape)
    if dt.name == "bf16":
        return data.astype(ml_dtypes.bfloat16)
    return data.astype(dt.np)


# ---- FileCheck-style matching (a small subset of LLVM FileCheck) ----------------------------------
# Directives, one per line: `CHECK: pat` (match at or after the previous match), `CHECK-NEXT: pat` (on the
# line after the previous match), `CHECK-SAME: pat` (on the same line, after the previous match),
# `CHECK-NOT: pat` (must not occur between the surrounding matches). In a pattern, `[[NAME:regex]]`
# captures, `[[NAME]]` uses a capture, `{{regex}}` is a raw regex; all other text is literal.
_FC_TOKEN = re.compile(r"\[\[(\w+):(.*?)\]\]|\[\[(\w+)\]\]|\{\{(.*?)\}\}")


class FileCheckFailure(AssertionError):
    pass


def _fc_compile(pattern: str, variables: dict) -> tuple[re.Pattern, list]:
    out, names, pos = [], [], 0
    for m in _FC_TOKEN.finditer(pattern):
        out.append(re.escape(pattern[pos:m.start()]))
        if m.group(1):
            out.append(f"(?P<{m.group(1)}>{m.group(2)})")
            names.append(m.group(1))
        elif m.group(3):
            if m.group(3) in names:
                out.append(f"(?P={m.group(3)})")
            elif m.group(3) in variables:
                out.append(re.escape(variables[m.group(3)]))
            else:
                raise FileCheckFailure(f"[[{m.group(3)}]] used before it is defined")
        else:
            out.append(f"(?:{m.group(4)})")
        pos = m.end()
    out.append(re.escape(pattern[pos:]))
    return re.compile("".join(out)), names


def filecheck(text: str, checks: str) -> dict:
    """Match `checks` against `text`; raises FileCheckFailure with context. Returns the captures."""
    starts = [0]
    for ln in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(ln))
    lines = text.splitlines()
    variables: dict = {}
    pos, last = 0, -1            # absolute offset after the previous match; line of the previous match
    nots: list = []

    def fail(msg):
        raise FileCheckFailure(f"{msg}\n--- input ---\n{text}")

    def line_of(offset: int) -> int:
        return max(i for i, s in enumerate(starts) if s <= offset) if offset < len(text) else len(lines) - 1

    def check_nots(end: int):
        for pat in nots:
            rx, _ = _fc_compile(pat, variables)
            if rx.search(text[pos:end]):
                fail(f"CHECK-NOT: {pat} matched")

    for raw in checks.strip().splitlines():
        raw = raw.strip()
        if not raw:
            continue
        m = re.match(r"(CHECK(?:-NEXT|-NOT|-SAME)?):\s?(.*)$", raw)
        if not m:
            raise FileCheckFailure(f"not a directive: {raw!r}")
        kind, pat = m.groups()
        if kind == "CHECK-NOT":
            nots.append(pat)
            continue
        rx, names = _fc_compile(pat, variables)
        if kind == "CHECK":
            lo, hi = pos, len(text)
        elif kind == "CHECK-NEXT":
            if last + 1 >= len(lines):
                fail(f"{kind}: {pat}: no next line")
            lo, hi = starts[last + 1], starts[last + 1] + len(lines[last + 1])
        else:  # CHECK-SAME
            lo, hi = pos, starts[last] + len(lines[last])
        mt = None
        for cand in rx.finditer(text, lo, hi):
            if "\n" not in cand.group(0):         # a match stays on one line
                mt = cand
                break
        if mt is None:
            context = lines[last + 1] if kind == "CHECK-NEXT" else text[lo:lo + 200]
            fail(f"{kind}: {pat} not found; next: {context!r}")
        check_nots(mt.start())
        nots = []
        variables.update({n: mt.group(n) for n in names})
        pos, last = mt.end(), line_of(mt.start())
    if nots:
        check_nots(len(text))
    return variables


def call_chain(depth: int) -> str:
    """Functions f0 .. f{depth}, each calling the one before: a call chain `depth` deep (f0 is `x + 1`)."""
    src = "def f0(x: f32[n]) -> f32[n]:\n    return x + 1.0\n"
    for k in range(1, depth + 1):
        src += f"def f{k}(x: f32[n]) -> f32[n]:\n    return f{k - 1}(x) * 2.0\n"
    return src


@functools.lru_cache(maxsize=None)
def cached_module(src: str, filename: str = "test.arr"):
    """`compile_src`, once per distinct source in the session (specializations are cached by the module)."""
    return compile_src(src, filename=filename)


def arr_batch(cases: list) -> list:
    """Run several elementwise cases in ONE compiled arr function (compiling is what costs time).

    `cases`: [(template, [(dtype, array), ...], out_dtype)], template like "{0} + {1}" over the arguments.
    Returns the results in order.
    """
    params, exprs, outs, args = [], [], [], []
    for i, (template, operands, out) in enumerate(cases):
        names = []
        for j, (dt, value) in enumerate(operands):
            names.append(f"a{i}_{j}")
            params.append(f"a{i}_{j}: {dt}[n{i}]")
            args.append(value)
        exprs.append(template.format(*names))
        outs.append(f"{out}[n{i}]")
    result = f"({', '.join(outs)})" if len(outs) > 1 else outs[0]
    mod = cached_module(f"def f({', '.join(params)}) -> {result}:\n    return {', '.join(exprs)}\n")
    got = mod.f(*args)
    return list(got) if len(outs) > 1 else [got]
