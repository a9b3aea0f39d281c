"""Scaling over virtual CPU devices (docs/sharding.md): each program on one device, then `.sharded(...)` over
`data=1, 2, 4, 8`, beside the JAX twin jitted with the same shardings, interleaved in the same rounds; and the
collectives XLA put in each partitioned program.

    .venv/bin/python bench/sharding.py [--budget SECONDS]

It starts 8 virtual CPU devices (`jax_num_cpu_devices`), so it runs in a process of its own. On a machine with
fewer cores than devices the devices share them: the table then shows what partitioning costs, not a speedup.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

import arrc  # noqa: E402
from timing import fmt_time, interleaved  # noqa: E402

SOURCE = """
def mlp_loss(x: f32[b, 512], w1: f32[512, 1024], w2: f32[1024, 16]) -> f32:
    return mean(tanh(tanh(x @ w1) @ w2) ** 2)

def train_step(x: f32[b, 512], w1: f32[512, 1024], w2: f32[1024, 16]) -> f32[512, 1024]:
    return w1 - 0.01 * grad(mlp_loss, argnums=1)(x, w1, w2)

def chain(x: f32[n]) -> f32[n]:
    x = x * 1.0001 + 0.5
    x = x * 1.0001 + 0.5
    x = x * 1.0001 + 0.5
    x = x * 1.0001 + 0.5
    x = x * 1.0001 + 0.5
    x = x * 1.0001 + 0.5
    x = x * 1.0001 + 0.5
    x = x * 1.0001 + 0.5
    return x
"""
# (the chain is written out, as JAX's Python loop unrolls: arr's `for` is a loop in the program, which XLA:CPU does
# not fuse across iterations, 4x slower here on f32[4M]: that is JAX's `lax.fori_loop`)


def jax_mlp_loss(x, w1, w2):
    return jnp.mean(jnp.tanh(jnp.tanh(x @ w1) @ w2) ** 2)


def jax_train_step(x, w1, w2):
    return w1 - 0.01 * jax.grad(jax_mlp_loss, argnums=1)(x, w1, w2)


def jax_chain(x):
    for _ in range(8):
        x = x * 1.0001 + 0.5
    return x


def jax_checked_chain(x):
    """The chain with what a JAX user adds to catch a NaN or Inf in its result: a flag read before returning."""
    y = jax_chain(x)
    return y, ~jnp.isfinite(jnp.sum(y))


def collectives(hlo: str) -> str:
    found = {name: len(re.findall(rf"\b{name}(-start)?\(", hlo)) for name in
             ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")}
    return ", ".join(f"{n} {name}" for name, n in found.items() if n) or "none"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=1.5, help="seconds of samples per contender")
    budget = parser.parse_args().budget
    mod = arrc.loads(SOURCE, filename="scaling.arr")
    r = np.random.default_rng(0)
    x = r.standard_normal((2048, 512)).astype(np.float32)
    w1 = (r.standard_normal((512, 1024)) / 20).astype(np.float32)
    w2 = (r.standard_normal((1024, 16)) / 30).astype(np.float32)
    long = r.standard_normal(1 << 22).astype(np.float32)
    programs = [("MLP loss f32[2048,512]", mod.mlp_loss, jax_mlp_loss, (x, w1, w2), (("data", None), None, None)),
                ("training step (grad)", mod.train_step, jax_train_step, (x, w1, w2), (("data", None), None, None)),
                ("8 elementwise ops f32[4M]", mod.chain, jax_chain, (long,), (("data",),))]
    print(f"{len(jax.devices())} virtual CPU devices on {os.cpu_count()} cores; jax {jax.__version__}; "
          f"medians of interleaved samples, {budget} s each\n")
    print("| program | devices | arrc | jax.jit | arrc / jax | arrc / arrc on 1 device | collectives |")
    print("|---|---|---|---|---|---|---|")
    for title, fn, twin, args, specs in programs:
        single = [jax.device_put(a, jax.devices()[0]) for a in args]
        contenders = {"one": lambda fn=fn, single=single: fn(*single)}
        shapes = {}
        for n in (1, 2, 4, 8):
            mesh = arrc.mesh(data=n)
            shardings = tuple(NamedSharding(mesh, P(*s) if s else P()) for s in specs)
            placed = [jax.device_put(a, s) for a, s in zip(args, shardings)]
            sharded = fn.sharded(mesh, in_specs=specs)
            jitted = jax.jit(twin, in_shardings=shardings)
            with jax.enable_x64(False):
                jitted(*placed)
            contenders[f"arrc {n}"] = lambda sharded=sharded, placed=placed: sharded(*placed)
            contenders[f"jax {n}"] = lambda jitted=jitted, placed=placed: jitted(*placed)
            if n == 8:                      # the same JAX program again: the noise of the run (A/A)
                contenders["jax again"] = contenders["jax 8"]
            shapes[n] = collectives(sharded.lower(*args).compile().as_text())
        got = interleaved(contenders, budget)
        one = got["one"]["median"]
        print(f"| {title} | 1 (plain call) | {fmt_time(one)} | | | 1 | none |")
        for n in (1, 2, 4, 8):
            a, j = got[f"arrc {n}"]["median"], got[f"jax {n}"]["median"]
            print(f"| | {n} | {fmt_time(a)} | {fmt_time(j)} | {a / j:.3f} | {a / one:.2f} | {shapes[n]} |")
        again = got["jax again"]["median"] / got["jax 8"]["median"]
        print(f"| | 8, jax.jit against itself (A/A) | | | {again:.3f} | | |")
    guards(budget)


def guards(budget: float) -> None:
    """The no-fault cost of guards on 8 devices, beside JAX's chain with a replicated `isfinite` flag of its
    result's sum read before it returns (the least a check of a sharded result costs there: one all-reduce
    and one wait)."""
    mods = {g: arrc.loads(SOURCE, filename="scaling.arr", guards=g) for g in ("nan,inf", "all")}
    mesh = arrc.mesh(data=8)
    sharding = NamedSharding(mesh, P("data"))
    plain = arrc.loads(SOURCE, filename="scaling.arr").chain.sharded(mesh, in_specs=(("data",),))
    checked = jax.jit(jax_checked_chain, in_shardings=(sharding,))
    print("\nThe chain on 8 devices, no fault: each guarded call over the unguarded one\n")
    print("| elements | unguarded | A/A | `nan,inf` | `all` | JAX with a flag read | `nan,inf` / JAX with a flag |")
    print("|---|---|---|---|---|---|---|")
    for n in (1 << 16, 1 << 20, 1 << 22):
        x = jax.device_put(np.ones(n, np.float32), sharding)
        contenders = {"plain": lambda: plain(x), "again": lambda: plain(x),
                      "jax flag": lambda: np.asarray(checked(x)[1])}
        for g, m in mods.items():
            contenders[g] = lambda f=m.chain.sharded(mesh, in_specs=(("data",),)): f(x)
        got = {k: v["median"] for k, v in interleaved(contenders, budget).items()}
        base = got["plain"]
        print(f"| {n:,} | {fmt_time(base)} | {got['again'] / base:.3f} | {got['nan,inf'] / base:.2f} | "
              f"{got['all'] / base:.2f} | {got['jax flag'] / base:.2f} | {got['nan,inf'] / got['jax flag']:.2f} |")


if __name__ == "__main__":
    main()
