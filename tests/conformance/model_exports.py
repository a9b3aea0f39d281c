"""Export small Flax, Equinox and Optax models as JAX users write them, for `arrc run` (issue 19's suite).

Flax, Equinox and Optax are not arrc's dependencies, so this script is not run by `make test`: it writes
what the tests need into `tests/conformance/models/` (committed): for each case its StableHLO as
`jax.jit(f).lower(...).as_text(debug_info=True)` gives it (JAX's locations: the library's files and this
one's lines), and an `.npz` with the flattened arguments (`arg0`, `arg1`, ...) and `jax.jit(f)`'s
results (`out0`, ...), x64 on. `tests/test_model_exports.py` runs each file as `arrc run` reads it,
unguarded and with every guard, against those results. A `fault_*` case is a model that makes a NaN or an infinity
(its `.npz` also holds `fault`: the text the guard report must contain).

Regenerate in a separate environment (any Python 3.11 with these packages; generating imports no arrc),
then run the committed files through arrc and print the pass rate:

    python3 -m venv /tmp/fvenv && /tmp/fvenv/bin/pip install jax==0.10.2 jaxlib==0.10.2 flax equinox optax
    /tmp/fvenv/bin/python tests/conformance/model_exports.py
    .venv/bin/python tests/conformance/model_exports.py --run
"""
from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent / "models"


def cases() -> dict:
    """name -> (function, arguments as a pytree)."""
    import equinox as eqx
    import flax.linen as nn
    import jax
    import jax.numpy as jnp
    import optax

    rng = np.random.default_rng(19)
    key = jax.random.key(0)

    class Mlp(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(10)(nn.relu(nn.Dense(32)(x)))

    class ResBlock(nn.Module):
        @nn.compact
        def __call__(self, x, train: bool):
            y = nn.Conv(4, (3, 3))(x)
            y = nn.BatchNorm(use_running_average=not train)(y)
            return nn.relu(x + y)

    class Block(nn.Module):             # a pre-norm transformer block
        @nn.compact
        def __call__(self, x):
            x = x + nn.MultiHeadDotProductAttention(num_heads=2)(nn.LayerNorm()(x))
            h = nn.Dense(32)(nn.LayerNorm()(x))
            return x + nn.Dense(16)(nn.gelu(h))

    class Lstm(nn.Module):
        @nn.compact
        def __call__(self, xs):
            return nn.RNN(nn.LSTMCell(8))(xs)

    class Dropped(nn.Module):
        @nn.compact
        def __call__(self, x, rngs_key):
            return nn.Dropout(0.5, deterministic=False)(nn.Dense(8)(x), rng=rngs_key)

    class Normalized(nn.Module):        # LayerNorm with epsilon 0 on a constant row: 0 / 0
        @nn.compact
        def __call__(self, x):
            return nn.LayerNorm(epsilon=0.0)(x)

    x16 = rng.standard_normal((8, 16)).astype(np.float32)
    img = rng.standard_normal((2, 8, 8, 4)).astype(np.float32)
    seq = rng.standard_normal((2, 6, 16)).astype(np.float32)
    xs = rng.standard_normal((2, 5, 4)).astype(np.float32)
    labels = rng.integers(0, 10, 8).astype(np.int32)

    mlp = Mlp()
    mlp_params = mlp.init(key, x16)
    res = ResBlock()
    res_vars = res.init(key, img, train=False)
    block = Block()
    block_params = block.init(key, seq)
    lstm = Lstm()
    lstm_params = lstm.init(key, xs)
    dropped = Dropped()
    dropped_params = dropped.init(key, x16, jax.random.key_data(jax.random.key(1)))
    normalized = Normalized()
    const_rows = np.ones((2, 16), np.float32)
    norm_params = normalized.init(key, const_rows)

    def res_train(variables, x):
        y, updates = res.apply(variables, x, train=True, mutable=["batch_stats"])
        return y, updates["batch_stats"]

    def loss(params, x, y):
        logits = mlp.apply(params, x)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    adam = optax.adam(1e-2)

    def train_step(params, opt_state, x, y):
        value, grads = jax.value_and_grad(loss)(params, x, y)
        updates, opt_state = adam.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    def dropout(params, x, key_data):
        return dropped.apply(params, x, jax.random.wrap_key_data(key_data))

    emlp = eqx.nn.MLP(16, 10, 32, 2, key=jax.random.key(2))
    eparams, estatic = eqx.partition(emlp, eqx.is_array)
    gru = eqx.nn.GRUCell(4, 8, key=jax.random.key(3))
    gparams, gstatic = eqx.partition(gru, eqx.is_array)
    sgd = optax.sgd(0.1)

    def eqx_mlp(params, x):
        return jax.vmap(eqx.combine(params, estatic))(x)

    def eqx_gru(params, xs):
        cell = eqx.combine(params, gstatic)

        def step(h, x):
            h = cell(x, h)
            return h, h
        return jax.lax.scan(step, jnp.zeros(8, xs.dtype), xs)      # (f64: Equinox's parameters under x64)

    def eqx_train_step(params, x, y):
        def eloss(p):
            logits = jax.vmap(eqx.combine(p, estatic))(x)
            return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
        value, grads = jax.value_and_grad(eloss)(params)
        updates, _ = sgd.update(grads, sgd.init(params), params)
        return optax.apply_updates(params, updates), value

    return {
        "flax_mlp": (lambda p, x: mlp.apply(p, x), (mlp_params, x16)),
        "flax_resnet_block_eval": (lambda v, x: res.apply(v, x, train=False), (res_vars, img)),
        "flax_resnet_block_train": (res_train, (res_vars, img)),
        "flax_transformer_block": (lambda p, x: block.apply(p, x), (block_params, seq)),
        "flax_lstm_scan": (lambda p, x: lstm.apply(p, x), (lstm_params, xs)),
        "flax_dropout": (dropout, (dropped_params, x16, np.asarray(jax.random.key_data(jax.random.key(7))))),
        "optax_adam_train_step": (train_step, (mlp_params, adam.init(mlp_params), x16, labels)),
        "equinox_mlp": (eqx_mlp, (eparams, x16.astype(np.float64))),
        "equinox_gru_scan": (eqx_gru, (gparams, xs[0].astype(np.float64))),
        "equinox_sgd_train_step": (eqx_train_step, (eparams, x16.astype(np.float64), labels)),
        "fault_flax_layer_norm_eps0": (lambda p, x: normalized.apply(p, x), (norm_params, const_rows)),
    }


FAULTS = {"fault_flax_layer_norm_eps0": "model_exports.py"}    # the user's file, named in the report's chain


# The committed results are jax.jit's on the machine that wrote them; XLA:CPU vectorizes differently on another
# CPU (AVX2, AVX-512: sums reassociated), so they are compared to the rounding of the result's scale
# (SCALE_RTOL of its largest magnitude; on an AMD EPYC up to 2048 ulps of an element near zero, ~1e-6 of the
# scale). The guarded build is compared to the unguarded one on this machine, bit for bit.
SCALE_RTOL = 2e-5


def run_export(mlir: Path) -> tuple[str, str]:
    """(verdict, detail) of one committed export read as `arrc run` reads it: ok | mismatch |
    guarded-mismatch | error, as tests/conformance/jax_modules.py's cases. A fault case is ok when its
    unguarded run gives JAX's results and the guarded one raises a GuardError whose report names the
    user's file (the fault is inside the library)."""
    import arrc
    from arrc.passes.guards import KINDS
    from arrc.runtime.foreign import ForeignFunction
    suite = _jax_modules()
    data = np.load(mlir.with_suffix(".npz"))
    args = [data[f"arg{i}"] for i in range(sum(k.startswith("arg") for k in data.files))]
    want = [data[f"out{i}"] for i in range(sum(k.startswith("out") for k in data.files))]
    try:
        got = [np.asarray(g) for g in ForeignFunction(str(mlir))(args)]
        problem = suite._differ(got, want, scale_rtol=SCALE_RTOL)
        if problem:
            return "mismatch", problem
        guarded = [np.asarray(g) for g in ForeignFunction(str(mlir), KINDS)(args)]
    except arrc.GuardError as err:
        if "fault" in data.files and str(data["fault"]) in str(err):
            return "ok", ""
        return "error", f"{type(err).__name__}: {str(err)[:600]}"
    except Exception as err:            # noqa: BLE001  (a verdict, not a crash of the suite)
        return "error", f"{type(err).__name__}: {str(err)[:300]}"
    if "fault" in data.files:
        return "error", "no guard report"
    problem = suite._bits_differ(guarded, got)
    return ("guarded-mismatch", problem) if problem else ("ok", "")


def _jax_modules():
    spec = importlib.util.spec_from_file_location("arrc_jax_modules", Path(__file__).with_name("jax_modules.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_all() -> int:
    start = time.perf_counter()
    files = sorted(OUT.glob("*.mlir"))
    ok = 0
    for mlir in files:
        verdict, detail = run_export(mlir)
        ok += verdict == "ok"
        print(f"{verdict:17} {mlir.stem}{': ' + detail if detail else ''}", flush=True)
    print(f"{ok}/{len(files)} ok in {time.perf_counter() - start:.0f} s")
    return 0 if ok == len(files) else 1


def main() -> int:
    if sys.argv[1:] == ["--run"]:
        sys.path.insert(0, str(OUT.parents[2]))
        return run_all()
    import jax
    jax.config.update("jax_enable_x64", True)
    OUT.mkdir(exist_ok=True)
    for name, (f, args) in cases().items():
        jitted = jax.jit(f, keep_unused=True)
        text = jitted.lower(*args).as_text(debug_info=True)
        leaves = [np.asarray(a) for a in jax.tree_util.tree_leaves(args)]
        results = [np.asarray(r) for r in jax.tree_util.tree_leaves(jitted(*args))]
        arrays = {f"arg{i}": a for i, a in enumerate(leaves)} | {f"out{i}": r for i, r in enumerate(results)}
        if name in FAULTS:
            arrays["fault"] = np.array(FAULTS[name])
        (OUT / f"{name}.mlir").write_text(text)
        np.savez_compressed(OUT / f"{name}.npz", **arrays)
        print(f"{name}: {len(text) // 1024} KiB, {len(leaves)} arguments, {len(results)} results", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
