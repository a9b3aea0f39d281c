"""JAX exports through `arrc run`, unguarded and guarded, against `jax.jit` (issue 19's conformance suite).

Each case is a function written as JAX code is written (jnp, lax, jax.nn, jax.random, jnp.linalg, a
training step under jax.grad), lowered by JAX with its locations (`as_text(debug_info=True)`), read by
`runtime/foreign.py` as `arrc run` reads a file, called with the same arguments, and compared with
`jax.jit(f)` (x64 on): `ok` when every result matches (bit for bit, or to 4 ulps where XLA may fuse
arrc's and JAX's builds differently), and the guarded build (`guards="all"`) gives the unguarded build's
results bit for bit, with no report. Nothing is written outside a temporary folder; no network.

    .venv/bin/python tests/conformance/jax_modules.py            # every case, the pass rates
    .venv/bin/python tests/conformance/jax_modules.py -k linalg  # the cases whose name has `linalg`

`tests/test_jax_conformance.py` runs every case in `make test`.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def cases() -> dict:
    """name -> (function, arguments); built with x64 on."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    rng = np.random.default_rng(0)
    v32 = rng.standard_normal(16).astype(np.float32)
    m32 = rng.standard_normal((4, 6)).astype(np.float32)
    sq = rng.standard_normal((4, 4))
    spd = sq @ sq.T + 4 * np.eye(4)
    img = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    ker = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    ints = rng.integers(-5, 10, 12).astype(np.int32)
    params = {"w1": rng.standard_normal((6, 8)) * 0.3, "b1": np.zeros(8), "w2": rng.standard_normal((8, 1)) * 0.3}
    batch = rng.standard_normal((5, 6)), rng.standard_normal((5, 1))

    def mlp_loss(p, x, y):
        h = jnp.tanh(x @ p["w1"] + p["b1"])
        return jnp.mean((h @ p["w2"] - y) ** 2)

    def train_step(p, x, y):
        grads = jax.grad(mlp_loss)(p, x, y)
        return jax.tree_util.tree_map(lambda a, g: a - 0.1 * g, p, grads)

    def rnn(xs, h0):
        def step(h, x):
            h = jnp.tanh(0.5 * h + x)
            return h, h.sum()
        return lax.scan(step, h0, xs)

    def layer_norm(x):
        mean = x.mean(-1, keepdims=True)
        return (x - mean) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5)

    return {
        "sum_mean_var": (lambda x: (x.sum(), x.mean(), x.var(), x.std()), (v32,)),
        "cumsum_cumprod": (lambda x: (jnp.cumsum(x), jnp.cumprod(x[:6])), (v32,)),
        "sort_argsort": (lambda x: (jnp.sort(x), jnp.argsort(x)), (v32,)),
        "argmax_argmin": (lambda m: (m.argmax(0), m.argmin(1)), (m32,)),
        "softmax_logsumexp": (lambda m: (jax.nn.softmax(m, -1), jax.nn.logsumexp(m, -1)), (m32,)),
        "matmul_einsum": (lambda m: (m @ m.T, jnp.einsum("ij,kj->ik", m, m)), (m32,)),
        "elementwise": (lambda x: jnp.tanh(x) + jnp.exp(-x * x) + jnp.log1p(jnp.abs(x)) + jnp.sin(x), (v32,)),
        "where_clip": (lambda x: (jnp.where(x > 0, x, 0.1 * x), jnp.clip(x, -0.5, 0.5)), (v32,)),
        "take_gather": (lambda x, i: (jnp.take(x, i % 16), x[i % 16]), (v32, ints)),
        "shape_ops": (lambda m: (m.reshape(6, 4).T, jnp.concatenate([m, m], 0), jnp.pad(m, 1), jnp.roll(m, 2, 1)),
                      (m32,)),
        "searchsorted_histogram": (lambda x: (jnp.searchsorted(jnp.sort(x), x[:4]),
                                              jnp.histogram(x, bins=5, range=(-2.0, 2.0))[0]), (v32,)),
        "integer_ops": (lambda a: (a // 3, a % 4, a * a - 2 * a, jnp.maximum(a, 0)), (ints,)),
        "one_hot_top_k": (lambda x: (jax.nn.one_hot(jnp.argmax(x), 16), lax.top_k(x, 3)[0]), (v32,)),
        "conv2d": (lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME"), (img, ker)),
        "avg_pool": (lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 1, 2, 2), (1, 1, 2, 2), "VALID") / 4,
                     (img,)),
        "layer_norm": (layer_norm, (m32,)),
        "rnn_scan": (rnn, (rng.standard_normal((7, 3)), np.zeros(3))),
        "fori_loop_while": (lambda x: (lax.fori_loop(0, 5, lambda i, c: c * 1.1 + i, x),
                                       lax.while_loop(lambda c: c.sum() < 100.0, lambda c: c * 2.0 + 1.0, x)),
                            (np.abs(v32[:4]),)),
        "cond": (lambda x: lax.cond(x.sum() > 0, lambda y: y * 2, lambda y: -y, x), (v32,)),
        "random_normal": (lambda k: jax.random.normal(jax.random.wrap_key_data(k), (8,)),
                          (np.array([0, 42], np.uint32),)),
        "linalg_inv_det": (lambda a: (jnp.linalg.inv(a), jnp.linalg.det(a), jnp.linalg.slogdet(a)[1]), (spd,)),
        "linalg_decompositions": (lambda a: (jnp.linalg.eigh(a)[0], jnp.linalg.svd(a, compute_uv=False),
                                             jnp.linalg.cholesky(a), jnp.abs(jnp.linalg.qr(a)[1])), (spd,)),
        "linalg_solve": (lambda a, b: (jnp.linalg.solve(a, b), jnp.linalg.lstsq(a, b)[0], jnp.linalg.norm(a)),
                         (spd, sq[:, :2])),
        "mlp_value_and_grad": (jax.value_and_grad(mlp_loss), (params, *batch)),
        "train_step": (train_step, (params, *batch)),
        "fft_magnitude": (lambda x: jnp.abs(jnp.fft.rfft(x)), (v32,)),
    }


def run_case(name: str, f, args, folder: Path) -> tuple[str, str]:
    """(verdict, detail): ok | mismatch | guarded-mismatch | error."""
    import jax
    from arrc.passes.guards import KINDS
    from arrc.runtime.foreign import ForeignFunction
    jitted = jax.jit(f, keep_unused=True)
    path = folder / f"{name}.mlir"
    path.write_text(jitted.lower(*args).as_text(debug_info=True))
    flat = [np.asarray(a) for a in jax.tree_util.tree_leaves(args)]
    want = [np.asarray(w) for w in jax.tree_util.tree_leaves(jitted(*args))]
    try:
        got = [np.asarray(g) for g in ForeignFunction(str(path))(flat)]
        guarded = [np.asarray(g) for g in ForeignFunction(str(path), KINDS)(flat)]
    except Exception as err:            # noqa: BLE001  (a verdict, not a crash of the suite)
        return "error", f"{type(err).__name__}: {str(err)[:300]}"
    problem = _differ(got, want)
    if problem:
        return "mismatch", problem
    problem = _bits_differ(guarded, got)
    return ("guarded-mismatch", problem) if problem else ("ok", "")


def _bits_differ(guarded: list, got: list) -> str:
    """The guarded build's results against the unguarded's: bit for bit (the nan/inf checks at the results
    run in an executable of their own, docs/guards.md, so the function compiles as it does unguarded)."""
    for i, (g, u) in enumerate(zip(guarded, got)):
        if g.dtype != u.dtype or g.shape != u.shape or g.tobytes() != u.tobytes():
            return f"result {i}: the guarded build's bits differ ({_differ([g], [u]) or 'within 4 ulps'})"
    return "" if len(guarded) == len(got) else f"{len(guarded)} guarded results, {len(got)} unguarded"


def _differ(got: list, want: list, scale_rtol: float | None = None) -> str:
    """Where `got` is not `want`: shapes, dtypes and integers exactly, floats to 4 ulps of each element, or with
    `scale_rtol` to that fraction of the result's largest magnitude (results from another machine)."""
    if len(got) != len(want):
        return f"{len(got)} results, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape or g.dtype != w.dtype:
            return f"result {i}: {g.dtype}{list(g.shape)}, expected {w.dtype}{list(w.shape)}"
        if np.array_equal(g, w, equal_nan=True):
            continue
        if not np.issubdtype(w.dtype, np.inexact):
            return f"result {i}: {g.ravel()[:4]} != {w.ravel()[:4]}"
        if scale_rtol is not None:
            scale = float(np.nanmax(np.abs(w), initial=0.0))
            if not np.allclose(g, w, rtol=scale_rtol, atol=scale_rtol * scale, equal_nan=True):
                return f"result {i}: differs by {float(np.nanmax(np.abs(g - w))):.3g} at scale {scale:.3g}"
            continue
        ulp = np.spacing(np.maximum(np.abs(w), np.finfo(w.dtype).tiny).astype(w.dtype))
        worst = float(np.max(np.abs(g - w) / ulp))
        if worst > 4:
            return f"result {i}: {worst:.0f} ulps apart"
    return ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-k", default="", help="only the cases whose name contains this")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    import jax
    jax.config.update("jax_enable_x64", True)
    found = {n: c for n, c in cases().items() if args.k in n}
    verdicts: dict[str, list] = {}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="arrc-conformance-") as tmp:
        for name, (f, fargs) in found.items():
            try:
                verdict, detail = run_case(name, f, fargs, Path(tmp))
            except Exception:           # noqa: BLE001  (JAX itself failed: the case is wrong)
                verdict, detail = "error", traceback.format_exc(limit=2)
            verdicts.setdefault(verdict, []).append(name)
            print(f"{verdict:17} {name}{': ' + detail if detail else ''}", flush=True)
    ok = len(verdicts.get("ok", []))
    print(f"{ok}/{len(found)} ok in {time.perf_counter() - start:.0f} s"
          + "".join(f"; {k}: {len(v)}" for k, v in verdicts.items() if k != "ok"))
    return 0 if ok == len(found) else 1


if __name__ == "__main__":
    sys.exit(main())
