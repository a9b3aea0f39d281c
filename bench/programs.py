"""The benchmark programs: arr source, the equivalent JAX function, and inputs.

Each JAX function is written the way a JAX user would write it, with the same operations in the same
order as the arr function, so both reach XLA with the same work.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np


@dataclass
class Program:
    name: str
    source: str                 # arr module text
    entry: str
    jax_fn: Callable            # the same computation for jax.jit
    inputs: Callable[[], list]  # NumPy arguments (fresh each call of this factory)
    x64: bool = False           # the JAX side needs jax_enable_x64 (f64 arguments)
    specs: list | None = None   # arr's parameter types, where an input's dtype does not say (keys)
    notes: str = ""
    tags: set = field(default_factory=set)


def _rng(seed: int = 0):
    return np.random.default_rng(seed)


# ---- softmax, MLP, layer norm -----------------------------------------------------------------------

SOFTMAX = """
def softmax(x: f32[b, k]) -> f32[b, k]:
    m = max(x, axis=1, keepdims=true)
    e = exp(x - m)
    return e / sum(e, axis=1, keepdims=true)
"""


def jax_softmax(x):
    import jax.numpy as jnp
    m = jnp.max(x, axis=1, keepdims=True)
    e = jnp.exp(x - m)
    return e / jnp.sum(e, axis=1, keepdims=True)


MLP = """
def mlp(x: f32[b, 784], w1: f32[784, 512], b1: f32[512], w2: f32[512, 10], b2: f32[10]) -> f32[b, 10]:
    h = relu(x @ w1 + b1)
    return h @ w2 + b2
"""


def jax_mlp(x, w1, b1, w2, b2):
    import jax.numpy as jnp
    h = jnp.maximum(x @ w1 + b1, 0.0)
    return h @ w2 + b2


LAYER_NORM = """
def layer_norm(x: f32[b, k], g: f32[k], beta: f32[k]) -> f32[b, k]:
    mu = mean(x, axis=1, keepdims=true)
    d = x - mu
    var = mean(d * d, axis=1, keepdims=true)
    return d * rsqrt(var + 1e-5) * g + beta
"""


def jax_layer_norm(x, g, beta):
    import jax.numpy as jnp
    from jax import lax
    mu = jnp.mean(x, axis=1, keepdims=True)
    d = x - mu
    var = jnp.mean(d * d, axis=1, keepdims=True)
    return d * lax.rsqrt(var + 1e-5) * g + beta


# ---- nansum and 20 chained elementwise operations on f32[4M] -----------------------------------------

N4M = 4 * 1024 * 1024

NANSUM = """
def nansum(x: f32[n]) -> f32:
    return sum(where(~isnan(x), x, 0))
"""


def jax_nansum(x):
    import jax.numpy as jnp
    return jnp.sum(jnp.where(~jnp.isnan(x), x, 0.0))


def _nansum_input():
    x = _rng(1).random(N4M, dtype=np.float32)
    x[::97] = np.nan
    return [x]


MLP_GRAD = """
def mlp_loss(w1: f32[784, 512], b1: f32[512], w2: f32[512, 10], b2: f32[10], x: f32[b, 784],
             y: f32[b, 10]) -> f32:
    h = relu(x @ w1 + b1)
    logits = h @ w2 + b2
    return -mean(sum(y * log_softmax(logits, axis=1), axis=1))

def mlp_grad(w1: f32[784, 512], b1: f32[512], w2: f32[512, 10], b2: f32[10], x: f32[b, 784],
             y: f32[b, 10]) -> (f32[784, 512], f32[512], f32[512, 10], f32[10]):
    g = grad(mlp_loss, argnums=(0, 1, 2, 3))(w1, b1, w2, b2, x, y)
    return g[0], g[1], g[2], g[3]
"""


def jax_mlp_grad(w1, b1, w2, b2, x, y):
    import jax
    import jax.numpy as jnp

    def loss(w1, b1, w2, b2):
        h = jnp.maximum(x @ w1 + b1, 0.0)
        logits = h @ w2 + b2
        return -jnp.mean(jnp.sum(y * jax.nn.log_softmax(logits, axis=1), axis=1))
    return jax.grad(loss, argnums=(0, 1, 2, 3))(w1, b1, w2, b2)


def _mlp_grad_input():
    r = _rng(5)
    labels = np.eye(10, dtype=np.float32)[r.integers(0, 10, 256)]
    return [r.standard_normal((784, 512), dtype=np.float32) * 0.05, r.standard_normal(512, dtype=np.float32) * 0.1,
            r.standard_normal((512, 10), dtype=np.float32) * 0.05, r.standard_normal(10, dtype=np.float32) * 0.1,
            r.standard_normal((256, 784), dtype=np.float32), labels]


SOFTMAX_CE_GRAD = """
def ce_loss(w: f32[784, 10], b: f32[10], x: f32[n, 784], y: f32[n, 10]) -> f32:
    logits = x @ w + b
    return -mean(sum(y * log_softmax(logits, axis=1), axis=1))

def ce_grad(w: f32[784, 10], b: f32[10], x: f32[n, 784], y: f32[n, 10]) -> (f32[784, 10], f32[10]):
    g = grad(ce_loss, argnums=(0, 1))(w, b, x, y)
    return g[0], g[1]
"""


def jax_ce_grad(w, b, x, y):
    import jax
    import jax.numpy as jnp

    def loss(w, b):
        logits = x @ w + b
        return -jnp.mean(jnp.sum(y * jax.nn.log_softmax(logits, axis=1), axis=1))
    return jax.grad(loss, argnums=(0, 1))(w, b)


def _ce_grad_input():
    r = _rng(6)
    labels = np.eye(10, dtype=np.float32)[r.integers(0, 10, 256)]
    return [r.standard_normal((784, 10), dtype=np.float32) * 0.05, r.standard_normal(10, dtype=np.float32) * 0.1,
            r.standard_normal((256, 784), dtype=np.float32), labels]


# two dense layers with a layer norm (scale g, shift beta) and a relu between them, cross-entropy loss
LN_GRAD = """
def ln_loss(w1: f32[784, 512], b1: f32[512], g: f32[512], beta: f32[512], w2: f32[512, 10], b2: f32[10],
            x: f32[n, 784], y: f32[n, 10]) -> f32:
    h = x @ w1 + b1
    mu = mean(h, axis=1, keepdims=true)
    d = h - mu
    var = mean(d * d, axis=1, keepdims=true)
    h = relu(d * rsqrt(var + 1e-5) * g + beta)
    logits = h @ w2 + b2
    return -mean(sum(y * log_softmax(logits, axis=1), axis=1))

def ln_grad(w1: f32[784, 512], b1: f32[512], g: f32[512], beta: f32[512], w2: f32[512, 10], b2: f32[10],
            x: f32[n, 784], y: f32[n, 10]) -> (f32[784, 512], f32[512], f32[512], f32[512], f32[512, 10], f32[10]):
    gs = grad(ln_loss, argnums=(0, 1, 2, 3, 4, 5))(w1, b1, g, beta, w2, b2, x, y)
    return gs[0], gs[1], gs[2], gs[3], gs[4], gs[5]
"""


def jax_ln_grad(w1, b1, g, beta, w2, b2, x, y):
    import jax
    import jax.numpy as jnp
    from jax import lax

    def loss(w1, b1, g, beta, w2, b2):
        h = x @ w1 + b1
        mu = jnp.mean(h, axis=1, keepdims=True)
        d = h - mu
        var = jnp.mean(d * d, axis=1, keepdims=True)
        h = jnp.maximum(d * lax.rsqrt(var + 1e-5) * g + beta, 0.0)
        logits = h @ w2 + b2
        return -jnp.mean(jnp.sum(y * jax.nn.log_softmax(logits, axis=1), axis=1))
    return jax.grad(loss, argnums=(0, 1, 2, 3, 4, 5))(w1, b1, g, beta, w2, b2)


def _ln_grad_input():
    r = _rng(7)
    labels = np.eye(10, dtype=np.float32)[r.integers(0, 10, 256)]
    return [r.standard_normal((784, 512), dtype=np.float32) * 0.05, r.standard_normal(512, dtype=np.float32) * 0.1,
            1 + r.standard_normal(512, dtype=np.float32) * 0.1, r.standard_normal(512, dtype=np.float32) * 0.1,
            r.standard_normal((512, 10), dtype=np.float32) * 0.05, r.standard_normal(10, dtype=np.float32) * 0.1,
            r.standard_normal((256, 784), dtype=np.float32), labels]


# the Rayleigh quotient after 20 power-iteration steps, differentiated with respect to the matrix
POWER_GRAD = """
def rayleigh(a: f64[n, n], v: f64[n]) -> f64:
    for i in range(20):
        v = a @ v
        v = v / sqrt(sum(v * v))
    return v @ a @ v

def rayleigh_grad(a: f64[n, n], v: f64[n]) -> f64[n, n]:
    return grad(rayleigh)(a, v)
"""


def jax_rayleigh_grad(a, v):
    import jax
    import jax.numpy as jnp
    from jax import lax

    def rayleigh(a):
        def body(i, v):
            v = a @ v
            return v / jnp.sqrt(jnp.sum(v * v))
        w = lax.fori_loop(0, 20, body, v)          # static bounds: a scan, which jax.grad differentiates
        return w @ a @ w
    return jax.grad(rayleigh)(a)


POWER_GRAD_BOUNDED = """
def rayleigh(a: f64[n, n], v: f64[n], steps: i64) -> f64:
    for i in range(steps, bound=20):
        v = a @ v
        v = v / sqrt(sum(v * v))
    return v @ a @ v

def rayleigh_grad(a: f64[n, n], v: f64[n], steps: i64) -> f64[n, n]:
    return grad(rayleigh)(a, v, steps)
"""


def jax_rayleigh_grad_static(a, v, steps):
    return jax_rayleigh_grad(a, v)      # `steps` (20) unused: jax.grad needs the loop's length static


def _power_grad_bounded_input():
    return _power_grad_input() + [np.int64(20)]


SMALL_LOOP_GRAD = """
def steps(x: f64[k], n: i64) -> f64:
    y = x
    for i in range(n, bound=20):
        y = sin(y) * 0.9 + 0.1 * x
    return sum(y)

def steps_grad(x: f64[k], n: i64) -> f64[k]:
    return grad(steps)(x, n)
"""


def jax_small_loop_grad(x, n):
    import jax
    import jax.numpy as jnp

    def steps(x):
        def body(y, _):
            return jnp.sin(y) * 0.9 + 0.1 * x, None
        return jnp.sum(jax.lax.scan(body, x, None, length=20)[0])     # `n` (20) unused, as above
    return jax.grad(steps)(x)


def jax_small_loop_grad_masked(x, n):
    """The same loop as JAX users write a run-time trip count under `jax.grad` (which refuses a `while`):
    a scan of the bound's length whose steps past `n` keep the carry."""
    import jax
    import jax.numpy as jnp

    def steps(x):
        def body(y, i):
            return jnp.where(i < n, jnp.sin(y) * 0.9 + 0.1 * x, y), None
        return jnp.sum(jax.lax.scan(body, x, jnp.arange(20))[0])
    return jax.grad(steps)(x)


def _power_grad_input():
    r = _rng(8)
    a = r.standard_normal((64, 64))
    a = (a + a.T) / 2
    v = r.standard_normal(64)
    return [a, v / np.linalg.norm(v)]


UNIFORM = f"""
def draw(k: key) -> f32[{N4M}]:
    return uniform(k, ({N4M},))
"""


def jax_uniform(k):
    import jax
    import jax.numpy as jnp
    return jax.random.uniform(k, (N4M,), jnp.float32)


# 20 statements, one operation each; finite for x in [0, 1) (so guards take the no-fault path)
CHAIN_OPS = [
    ("y = x * 1.5", lambda j, x, y: x * 1.5),
    ("y = y + 0.25", lambda j, x, y: y + 0.25),
    ("y = sin(y)", lambda j, x, y: j.sin(y)),
    ("y = y * y", lambda j, x, y: y * y),
    ("y = y + 1.0", lambda j, x, y: y + 1.0),
    ("y = sqrt(y)", lambda j, x, y: j.sqrt(y)),
    ("y = exp(y)", lambda j, x, y: j.exp(y)),
    ("y = y - 1.0", lambda j, x, y: y - 1.0),
    ("y = tanh(y)", lambda j, x, y: j.tanh(y)),
    ("y = y * 0.5", lambda j, x, y: y * 0.5),
    ("y = cos(y)", lambda j, x, y: j.cos(y)),
    ("y = y + x", lambda j, x, y: y + x),
    ("y = log(y)", lambda j, x, y: j.log(y)),
    ("y = y * y", lambda j, x, y: y * y),
    ("y = y + 0.5", lambda j, x, y: y + 0.5),
    ("y = rsqrt(y)", lambda j, x, y: j.rsqrt(y)),
    ("y = y * 2.0", lambda j, x, y: y * 2.0),
    ("y = y - x", lambda j, x, y: y - x),
    ("y = abs(y)", lambda j, x, y: j.abs(y)),
    ("y = y + 1.0", lambda j, x, y: y + 1.0),
]

CHAIN = "\ndef chain(x: f32[n]) -> f32[n]:\n" + "".join(f"    {s}\n" for s, _ in CHAIN_OPS) + "    return y\n"


def jax_chain(x):
    import jax.numpy as jnp
    from jax import lax

    class J:                               # the op names used above, from jnp / lax
        sin, sqrt, exp, tanh, cos, log, abs = jnp.sin, jnp.sqrt, jnp.exp, jnp.tanh, jnp.cos, jnp.log, jnp.abs
        rsqrt = lax.rsqrt
    y = None
    for _, op in CHAIN_OPS:
        y = op(J, x, y)
    return y


def _chain_input():
    return [_rng(2).random(N4M, dtype=np.float32)]


# ---- power iteration in f64 with a run-time step count --------------------------------------------

POWER = """
def power_iteration(a: f64[n, n], v: f64[n], steps: i32) -> (f64[n], f64):
    for i in range(steps):
        v = a @ v
        v = v / sqrt(sum(v * v))
    return v, sum(v * (a @ v))
"""


def jax_power(a, v, steps):
    import jax.numpy as jnp
    from jax import lax

    def body(i, v):
        v = a @ v
        return v / jnp.sqrt(jnp.sum(v * v))
    v = lax.fori_loop(0, steps, body, v)
    return v, jnp.sum(v * (a @ v))


def _power_input():
    r = _rng(3)
    a = r.standard_normal((256, 256))
    a = (a + a.T) / 2
    v = r.standard_normal(256)
    return [a, v / np.linalg.norm(v), np.array(100, np.int32)]


# ---- k-means (examples/kmeans.arr) ----------------------------------------------------------------------

KMEANS = (Path(__file__).resolve().parent.parent / "examples" / "kmeans.arr").read_text()


def jax_kmeans(x, init, iters):
    """examples/kmeans.arr as a JAX user writes it: a fori_loop over the iterations, a Python loop over
    the (static) clusters, `where` for the run-time `if`."""
    import jax
    import jax.numpy as jnp

    def sq_distances(c):
        diff = jnp.expand_dims(x, 1) - jnp.expand_dims(c, 0)
        return jnp.sum(diff * diff, axis=2)

    def update(c):
        labels = jnp.argmin(sq_distances(c), axis=1)
        new = c
        for j in range(c.shape[0]):
            member = jnp.expand_dims(labels == j, 1)
            count = jnp.sum(jnp.where(member, 1.0, 0.0))
            row = jnp.sum(jnp.where(member, x, 0.0), axis=0) / count
            new = new.at[j, :].set(jnp.where(count > 0.0, row, new[j, :]))
        return new
    c = jax.lax.fori_loop(0, iters, lambda it, c: update(c), x[init])
    distances = sq_distances(c)
    return c, jnp.argmin(distances, axis=1).astype(jnp.int32), jnp.sum(jnp.min(distances, axis=1))


def _kmeans_input():
    r = _rng(8)
    centers = r.standard_normal((3, 2)).astype(np.float32) * 5
    x = (centers[r.integers(0, 3, 2000)] + r.standard_normal((2000, 2)).astype(np.float32)).astype(np.float32)
    return [x, r.choice(2000, 3, replace=False).astype(np.int32), np.array(10, np.int32)]


# ---- convolution (issue 20) -----------------------------------------------------------------------------

CONV = """
def block(x: f32[b, h, w, 32], k1: f32[3, 3, 32, 64], k2: f32[3, 3, 64, 64]) -> f32[b, (h + 1) // 2, (w + 1) // 2, 64]:
    y = relu(conv(x, k1, padding="SAME", layout=("NHWC", "HWIO", "NHWC")))
    return relu(conv(y, k2, strides=2, padding="SAME", layout=("NHWC", "HWIO", "NHWC")))
"""


def jax_conv_block(x, k1, k2):
    import jax
    from jax import lax
    dn = ("NHWC", "HWIO", "NHWC")
    y = jax.nn.relu(lax.conv_general_dilated(x, k1, (1, 1), "SAME", dimension_numbers=dn))
    return jax.nn.relu(lax.conv_general_dilated(y, k2, (2, 2), "SAME", dimension_numbers=dn))


def _conv_input():
    r = _rng(12)
    return [r.standard_normal((16, 32, 32, 32), dtype=np.float32),
            r.standard_normal((3, 3, 32, 64), dtype=np.float32) * 0.1,
            r.standard_normal((3, 3, 64, 64), dtype=np.float32) * 0.1]


# ---- linear algebra (issue 20): JAX's own lowering on both sides, arrc merges it into its module -------------

LINALG = """
def solve_system(a: f64[n, n], b: f64[n, k]) -> f64[n, k]:
    return solve(a, b)

def whiten(s: f32[n, n], y: f32[n, k]) -> f32[n, k]:
    return triangular_solve(cholesky(s), y, lower=true)

def spectrum(s: f64[n, n]) -> (f64[n], f64[n, n]):
    return eigh(s)
"""


def jax_solve(a, b):
    import jax.numpy as jnp
    return jnp.linalg.solve(a, b)


def jax_whiten(s, y):
    import jax.numpy as jnp
    import jax.scipy.linalg as jsl
    return jsl.solve_triangular(jnp.linalg.cholesky(s), y, lower=True)


def jax_spectrum(s):
    import jax.numpy as jnp
    return tuple(jnp.linalg.eigh(s))


def _linalg_input(n: int, dtype, spd: bool, rhs: bool):
    def make():
        r = _rng(n)
        a = r.standard_normal((n, n))
        a = a @ a.T + n * np.eye(n) if spd else a + n * np.eye(n)
        return [a.astype(dtype)] + ([r.standard_normal((n, 8)).astype(dtype)] if rhs else [])
    return make


def linalg_programs() -> list:
    out = []
    for n in (64, 512):
        out += [Program(f"solve f64[{n},{n}] x8", LINALG, "solve_system", jax_solve,
                        _linalg_input(n, np.float64, False, True), x64=True, notes="LU (getrf) and two trsm"),
                Program(f"cholesky + triangular_solve f32[{n},{n}] x8", LINALG, "whiten", jax_whiten,
                        _linalg_input(n, np.float32, True, True), notes="potrf, then trsm"),
                Program(f"eigh f64[{n},{n}]", LINALG, "spectrum", jax_spectrum, _linalg_input(n, np.float64, True, False),
                        x64=True, notes="syevd")]
    return out


# ---- vmap (issue 21): arr's batching rules against jax.jit(jax.vmap(f)) -----------------------------------

VMAP = """
def matvec(m: f32[n, n], v: f32[n]) -> f32[n]:
    return tanh(m @ v)

def matvecs(m: f32[n, n], vs: f32[b, n]) -> f32[b, n]:
    return vmap(matvec, in_axes=(None, 0))(m, vs)

def softmax_row(x: f32[k]) -> f32[k]:
    e = exp(x - max(x))
    return e / sum(e)

def softmax_rows(x: f32[b, k]) -> f32[b, k]:
    return vmap(softmax_row)(x)

def mlp(x: f32[784], w1: f32[784, 512], b1: f32[512], w2: f32[512, 10], b2: f32[10]) -> f32[10]:
    return relu(x @ w1 + b1) @ w2 + b2

def mlp_rows(x: f32[b, 784], w1: f32[784, 512], b1: f32[512], w2: f32[512, 10], b2: f32[10]) -> f32[b, 10]:
    return vmap(mlp, in_axes=(0, None, None, None, None))(x, w1, b1, w2, b2)

def power(a: f64[n, n], v: f64[n], steps: i32) -> (f64[n], f64):
    for i in range(steps):
        v = a @ v
        v = v / sqrt(sum(v * v))
    return v, sum(v * (a @ v))

def powers(a: f64[b, n, n], v: f64[b, n], steps: i32) -> (f64[b, n], f64[b]):
    return vmap(power, in_axes=(0, 0, None))(a, v, steps)

def clip(g: f32[k]) -> f32[k]:
    norm = sqrt(sum(g * g))
    if norm > 1.0:
        g = g / norm
    return g

def clips(g: f32[b, k]) -> f32[b, k]:
    return vmap(clip)(g)

def newton(a: f32[k]) -> f32[k]:
    x = a
    while sum(abs(x * x - a)) > 1e-4 * sum(a):
        x = 0.5 * (x + a / x)
    return x

def newtons(a: f32[b, k]) -> f32[b, k]:
    return vmap(newton)(a)
"""


def jax_clips(g):
    import jax
    import jax.numpy as jnp

    def clip(g):
        norm = jnp.sqrt(jnp.sum(g * g))
        return jax.lax.cond(norm > 1.0, lambda g: g / norm, lambda g: g, g)
    return jax.vmap(clip)(g)


def jax_newtons(a):
    import jax
    import jax.numpy as jnp

    def newton(a):
        return jax.lax.while_loop(lambda x: jnp.sum(jnp.abs(x * x - a)) > 1e-4 * jnp.sum(a),
                                  lambda x: 0.5 * (x + a / x), a)
    return jax.vmap(newton)(a)


def jax_matvecs(m, vs):
    import jax
    import jax.numpy as jnp
    return jax.vmap(lambda v: jnp.tanh(m @ v))(vs)


def jax_softmax_rows(x):
    import jax
    import jax.numpy as jnp

    def row(x):
        e = jnp.exp(x - jnp.max(x))
        return e / jnp.sum(e)
    return jax.vmap(row)(x)


def jax_softmax_rows_nan_max(x):
    """The same rows with a max that keeps NaN, as NumPy's and arr's do: on this jaxlib `jnp.max` of a row
    holding a NaN returns the row's largest number (XLA:CPU's vectorized reduce; openxla/xla#21461)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    def nan_max(a, b):
        return lax.select((a > b) | (a != a), a, b)

    def row(x):
        e = jnp.exp(x - lax.reduce(x, -jnp.inf, nan_max, (0,)))
        return e / jnp.sum(e)
    return jax.vmap(row)(x)


def jax_mlp_rows(x, w1, b1, w2, b2):
    import jax
    import jax.numpy as jnp
    return jax.vmap(lambda x: jnp.maximum(x @ w1 + b1, 0.0) @ w2 + b2)(x)


def jax_powers(a, v, steps):
    import jax
    return jax.vmap(jax_power, in_axes=(0, 0, None))(a, v, steps)


def _vmap_inputs(which: str):
    def make():
        r = _rng(21)
        if which == "matvec":
            return [r.standard_normal((256, 256), dtype=np.float32) * 0.05, r.standard_normal((512, 256), dtype=np.float32)]
        if which == "softmax":
            return [r.standard_normal((512, 1024), dtype=np.float32)]
        if which == "mlp":
            return [r.standard_normal((256, 784), dtype=np.float32), r.standard_normal((784, 512), dtype=np.float32) * 0.05,
                    np.zeros(512, np.float32), r.standard_normal((512, 10), dtype=np.float32) * 0.05,
                    np.zeros(10, np.float32)]
        if which == "clip":
            return [r.standard_normal((1024, 256), dtype=np.float32) * r.uniform(0.0, 0.13, (1024, 1)).astype(np.float32)]
        if which == "newton":     # lanes of different scales: different iteration counts
            return [(r.uniform(0.5, 2.0, (512, 64)) * 10.0 ** r.integers(0, 6, (512, 1))).astype(np.float32)]
        return [r.standard_normal((32, 64, 64)), r.standard_normal((32, 64)), np.int32(20)]
    return make


def _defs(source: str, *names: str) -> str:
    """The functions `names` of `source`, alone: a row's front end then lowers only what its entry needs."""
    defs = [d.removeprefix("def ") for d in source.strip().split("\n\ndef ")]
    by_name = {d.split("(")[0]: d for d in defs}
    return "".join(f"\ndef {by_name[n]}\n" for n in names)


def vmap_programs() -> list:
    return [Program("vmap of tanh(m @ v) f32[256,256] x512", _defs(VMAP, "matvec", "matvecs"), "matvecs", jax_matvecs, _vmap_inputs("matvec"),
                    tags={"vmap"}, notes="one matrix-matrix product on both sides"),
            Program("vmap of a softmax row f32[512,1024]", _defs(VMAP, "softmax_row", "softmax_rows"), "softmax_rows", jax_softmax_rows,
                    _vmap_inputs("softmax"), tags={"vmap"}, notes="arr's max keeps NaN (the softmax row's note)"),
            Program("vmap of a softmax row f32[512,1024], JAX's max keeping NaN", _defs(VMAP, "softmax_row", "softmax_rows"), "softmax_rows",
                    jax_softmax_rows_nan_max, _vmap_inputs("softmax"), tags={"info"},
                    notes="the same function on both sides: JAX's max written to keep NaN as arr's does"),
            Program("vmap of an mlp 784-512-10 x256", _defs(VMAP, "mlp", "mlp_rows"), "mlp_rows", jax_mlp_rows, _vmap_inputs("mlp"), tags={"vmap"}),
            Program("vmap of power iteration f64[64,64] x32, 20 steps", _defs(VMAP, "power", "powers"), "powers", jax_powers,
                    _vmap_inputs("power"), x64=True, tags={"vmap"}, notes="a run-time count shared by the lanes"),
            Program("vmap of a per-lane if (clip by norm) f32[1024,256]", _defs(VMAP, "clip", "clips"), "clips", jax_clips,
                    _vmap_inputs("clip"), tags={"vmap"}, notes="the condition differs between lanes: both branches "
                                                               "and a select on both sides"),
            Program("vmap of a per-lane while (Newton's sqrt) f32[512,64]", _defs(VMAP, "newton", "newtons"), "newtons", jax_newtons,
                    _vmap_inputs("newton"), tags={"vmap"}, notes="lanes end after different counts: until every "
                                                                 "lane is done on both sides (sums, not maxes: "
                                                                 "the softmax row's note)")]


# ---- tiny x + y (call overhead) ----------------------------------------------------------------------

ADD = """
def add(x: f32[n], y: f32[n]) -> f32[n]:
    return x + y
"""


def jax_add(x, y):
    return x + y


# ---- generated programs (front-end time) --------------------------------------------------------------

def generated(statements: int, salt: int = 0, seed: int = 0) -> tuple[str, str]:
    """An arr function of `statements` assignments (4 operations each: a unary function, `*`, `+`, `-`)
    and the same function as Python source for jax.numpy. `salt` changes one constant, so each round
    gets a fresh source text (and JAX a fresh function object).

    Each statement uses only the previous one (and the parameters): when a value feeds several later
    ones, XLA's loop fusion recomputes it in every consumer, and with random earlier references at
    2000 statements that duplication is exponential (a compile of minutes and a run that never ends,
    for JAX's module as for arrc's)."""
    rnd = random.Random(seed)
    fns = ["sin", "cos", "tanh", "exp"]
    first = f"t0 = x * {1.0 + salt * 1e-6!r} + y"
    arr = ["def main(x: f32[64], y: f32[64]) -> f32[64]:", f"    {first}"]
    py = ["def main(x, y):", f"    {first}"]
    for i in range(1, statements):
        fn, c = fns[i % 4], round(rnd.uniform(0.1, 0.9), 3)
        arr.append(f"    t{i} = {fn}(t{i - 1}) * x + y - {c}")
        py.append(f"    t{i} = jnp.{fn}(t{i - 1}) * x + y - {c}")
    arr.append(f"    return t{statements - 1}")
    py.append(f"    return t{statements - 1}")
    return "\n".join(arr) + "\n", "\n".join(py) + "\n"


def jax_generated_loop(statements: int, salt: int = 0, seed: int = 0) -> Callable:
    """`generated`'s function as a JAX user writes a long computation: a Python loop over the statements'
    functions and constants (the same operations in the same order; every op traced from one line)."""
    import jax.numpy as jnp
    rnd = random.Random(seed)
    fns = [jnp.sin, jnp.cos, jnp.tanh, jnp.exp]
    consts = [0.0] + [round(rnd.uniform(0.1, 0.9), 3) for _ in range(1, statements)]
    scale = 1.0 + salt * 1e-6

    def main(x, y):
        t = x * scale + y
        for i in range(1, statements):
            t = fns[i % 4](t) * x + y - consts[i]
        return t
    return main


def jax_from_source(py_source: str) -> Callable:
    import jax.numpy as jnp
    namespace = {"jnp": jnp}
    exec(compile(py_source, "<generated>", "exec"), namespace)   # noqa: S102 (our own generated text)
    return namespace["main"]


def _generated_input():
    r = _rng(4)
    return [r.random(64, dtype=np.float32) * 0.1, r.random(64, dtype=np.float32) * 0.1]


def programs(generated_statements: int = 2000) -> list[Program]:
    r = _rng(0)
    arr_gen, py_gen = generated(generated_statements)
    return [
        Program("softmax f32[512,1024]", SOFTMAX, "softmax", jax_softmax,
                lambda: [r.standard_normal((512, 1024), dtype=np.float32)]),
        Program("mlp 256x784-512-10", MLP, "mlp", jax_mlp,
                lambda: [r.standard_normal((256, 784), dtype=np.float32),
                         (r.standard_normal((784, 512), dtype=np.float32) * 0.05),
                         r.standard_normal(512, dtype=np.float32) * 0.1,
                         (r.standard_normal((512, 10), dtype=np.float32) * 0.05),
                         r.standard_normal(10, dtype=np.float32) * 0.1]),
        Program("layer_norm f32[1024,1024]", LAYER_NORM, "layer_norm", jax_layer_norm,
                lambda: [r.standard_normal((1024, 1024), dtype=np.float32),
                         r.standard_normal(1024, dtype=np.float32),
                         r.standard_normal(1024, dtype=np.float32)]),
        Program("nansum f32[4M]", NANSUM, "nansum", jax_nansum, _nansum_input),
        Program("chain20 f32[4M]", CHAIN, "chain", jax_chain, _chain_input, tags={"guards"}),
        Program("power_iteration f64[256,256] x100", POWER, "power_iteration", jax_power, _power_input,
                x64=True, notes="run-time step count; JAX: lax.fori_loop under jax.enable_x64"),
        Program("grad of mlp cross-entropy 256x784-512-10", MLP_GRAD, "mlp_grad", jax_mlp_grad, _mlp_grad_input,
                notes="grad(mlp_loss) in arr against jax.jit(jax.grad(loss)): reverse mode on both sides",
                tags={"grad"}),
        Program("grad of softmax cross-entropy 256x784-10", SOFTMAX_CE_GRAD, "ce_grad", jax_ce_grad, _ce_grad_input,
                notes="with respect to w and b", tags={"grad"}),
        Program("grad of layer-norm network 256x784-512-10", LN_GRAD, "ln_grad", jax_ln_grad, _ln_grad_input,
                notes="dense, layer norm (scale and shift), relu, dense; cross-entropy; six parameters", tags={"grad"}),
        Program("grad of power iteration f64[64,64] x20", POWER_GRAD, "rayleigh_grad", jax_rayleigh_grad,
                _power_grad_input, x64=True, tags={"grad"},
                notes="Rayleigh quotient after 20 steps, w.r.t. the matrix; arr tapes the static `for`, "
                      "JAX: lax.fori_loop(0, 20, ...) (a scan)"),
        Program("grad of power iteration f64[64,64], run-time steps=20, bound=20", POWER_GRAD_BOUNDED,
                "rayleigh_grad", jax_rayleigh_grad_static, _power_grad_bounded_input, x64=True, tags={"tape"},
                notes="the tape of `bound=`, the trip count an argument; JAX: the same loop of static length"),
        Program("grad of a 20-step loop f64[16], run-time steps, bound=20", SMALL_LOOP_GRAD, "steps_grad",
                jax_small_loop_grad_masked, lambda: [_rng(9).standard_normal(16), np.int64(20)], x64=True,
                tags={"tape"}, notes="a small loop, where the call's overhead shows; JAX: lax.scan of length 20 "
                                     "masked to the run-time count (the same function)"),
        Program("grad of a 20-step loop f64[16], run-time steps, bound=20, JAX static", SMALL_LOOP_GRAD,
                "steps_grad", jax_small_loop_grad, lambda: [_rng(9).standard_normal(16), np.int64(20)], x64=True,
                tags={"info"}, notes="JAX: lax.scan of length 20 that ignores the count (less work than arr's "
                                     "function): the fixed cost of the bound's check shows (an extra result "
                                     "and its read, ~6 us)"),
        Program("uniform f32[4M]", UNIFORM, "draw", jax_uniform, lambda: [np.array([0, 42], np.uint32)],
                specs=["key"], notes="Threefry-2x32 bits; the key as its u32 words (jax.random.PRNGKey) on both sides"),
        Program("kmeans f32[2000,2] k=3 x10", KMEANS, "kmeans", jax_kmeans, _kmeans_input,
                notes="examples/kmeans.arr; JAX: fori_loop over iterations, Python loop over clusters"),
        Program("conv block f32[16,32,32,32] 3x3x64 x2", CONV, "block", jax_conv_block, _conv_input,
                notes="two 3x3 convolutions (the second strided) with relu, channels-last; JAX: lax.conv_general_dilated"),
        *linalg_programs(),
        *vmap_programs(),
        Program("add f32[4]", ADD, "add", jax_add,
                lambda: [np.arange(4, dtype=np.float32), np.ones(4, np.float32)], tags={"overhead"}),
        Program(f"generated {generated_statements} statements", arr_gen, "main", jax_from_source(py_gen),
                _generated_input, tags={"generated"}),
    ]


# ---- loop-heavy programs (guards in loops, issue 18) ---------------------------------------------------------

LOOPS = """
def kahan(x: f32[n]) -> f32:
    s = 0.0
    c = 0.0
    for i in range(n):
        y = x[i] - c
        t = s + y
        c = (t - s) - y
        s = t
    return s

def ewma(x: f32[n], alpha: f32) -> f32[n]:
    y = x
    for i in range(1, n):
        y[i] = alpha * x[i] + (1.0 - alpha) * y[i - 1]
    return y

def welford(x: f32[n]) -> f32:
    mean = 0.0
    m2 = 0.0
    for i in range(n):
        delta = x[i] - mean
        mean += delta / (i + 1.0)
        m2 += delta * (x[i] - mean)
    return m2 / n

def fletcher16(data: u8[n]) -> i32:
    a = 0
    b = 0
    for i in range(n):
        a = (a + i32(data[i])) % 255
        b = (b + a) % 255
    return b * 256 + a

def rk4(t: f32[n], y0: f32, h: f32) -> f32[n]:
    y = y0
    out = t
    for i in range(n):
        k1 = sin(t[i]) - y
        k2 = sin(t[i] + 0.5 * h) - (y + 0.5 * h * k1)
        k3 = sin(t[i] + 0.5 * h) - (y + 0.5 * h * k2)
        k4 = sin(t[i] + h) - (y + h * k3)
        y = y + h / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        out[i] = y
    return out

def gauss_seidel(a: f32[n, n], b: f32[n], sweeps: i32) -> f32[n]:
    x = b * 0.0
    for s in range(sweeps):
        for i in range(n):
            x[i] = (b[i] - sum(a[i] * x) + a[i, i] * x[i]) / a[i, i]
    return x
"""


def loop_programs() -> list[tuple[str, str, list]]:
    """(name, entry, arguments) of the loop-heavy programs in LOOPS, on 4096 elements (Gauss-Seidel on a
    diagonally dominant 64 x 64 system)."""
    rng = _rng(5)
    x = rng.standard_normal(4096).astype(np.float32)
    a = (rng.standard_normal((64, 64)) * 0.1 + np.eye(64) * 16).astype(np.float32)
    return [("kahan f32[4096]", "kahan", [x]), ("ewma f32[4096]", "ewma", [x, np.float32(0.1)]),
            ("welford f32[4096]", "welford", [x]),
            ("fletcher16 u8[4096]", "fletcher16", [rng.integers(0, 256, 4096).astype(np.uint8)]),
            ("rk4 f32[4096]", "rk4", [np.linspace(0, 10, 4096, dtype=np.float32), np.float32(1), np.float32(10 / 4096)]),
            ("gauss-seidel f32[64, 64], 10 sweeps", "gauss_seidel", [a, a @ x[:64], np.int32(10)])]
