"""On a GPU (skipped where PJRT has none): the examples, guard reports (in loops, in a gradient's backward
pass, past a loop's bound), random bits, convolution and gradients, each against the same program on the
CPU or against JAX on the same GPU. tests/test_devices.py has the smaller checks that need no GPU."""
from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import arrc
from arrc import demo
from arrc.runtime.pjrt import DeviceUnavailable, backend

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _has_gpu() -> bool:
    try:
        backend("gpu")
        return True
    except DeviceUnavailable:
        return False


pytestmark = pytest.mark.skipif(not _has_gpu(), reason="no GPU here")


def _results(value) -> list[np.ndarray]:
    return [np.asarray(v) for v in (value if isinstance(value, tuple) else (value,))]


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.arr")))
def test_every_example_gives_the_cpu_results_on_the_gpu(name):
    path = EXAMPLES / name
    guards = ",".join(demo.guards_for(path)) or "off"
    cpu = _results(arrc.load(str(path), guards=guards).main())
    gpu = arrc.load(str(path), device="gpu", guards=guards).main()
    assert {d.platform for v in (gpu if isinstance(gpu, tuple) else (gpu,)) for d in v.devices()} == {"gpu"}
    for c, g in zip(cpu, _results(gpu), strict=True):
        assert (c.dtype, c.shape) == (g.dtype, g.shape)
        if np.issubdtype(c.dtype, np.floating):
            np.testing.assert_allclose(g, c, rtol=1e-3, atol=1e-5)      # GPU libm and TF32 products differ
        else:
            np.testing.assert_array_equal(g, c)


LOOP_NAN = """\
def f(x: f32[4], n: i32) -> f32[4]:
    y = x
    for i in range(n):
        y = log(y - 0.5)
    return y
"""

BACKWARD = "def f(x: f64[2]) -> f64:\n    y = sqrt(x)\n    return sum(y)\n"

PAST = """\
def steps(x: f64, n: i32) -> f64:
    y = x
    for i in range(n, bound=3):
        y = sin(y) * 1.1
    return y
"""


def test_guard_reports_on_the_gpu_are_the_cpu_reports():
    """The same text, origin and index: in a loop, in a gradient's backward pass, and past a bound."""
    def report(device, source, call, error):
        mod = arrc.loads(source, filename="g.arr", device=device, guards="all")
        with pytest.raises(error) as info:
            call(mod)
        return str(info.value)

    x = np.array([3.0, 2.0, 1.6, 4.0], np.float32)
    cases = [(LOOP_NAN, lambda m: m.f(x, 3), arrc.NaNError),
             (BACKWARD, lambda m: arrc.grad(m.f)(np.array([1.0, 0.0])), arrc.InfError),
             (PAST, lambda m: arrc.grad(m.steps)(0.5, 4), arrc.LoopBoundExceeded)]
    for source, call, error in cases:
        on_gpu = report("gpu", source, call, error)
        assert on_gpu == report("cpu", source, call, error)
        assert "g.arr:" in on_gpu


def test_random_numbers_on_the_gpu_are_the_bits_of_jax_random_on_the_gpu():
    mod = arrc.loads("def u(s: i64) -> (f32[1000], f64[7, 3], f32[257], i32[64]):\n"
                     "    k = key(s)\n    a, b = split(k)\n"
                     "    return uniform(a, (1000,)), uniform(b, (7, 3), f64, -2.0, 3.0), normal(a, (257,)), "
                     "randint(k, (64,), -5, 9)\n", device="gpu")
    gpu = jax.devices("gpu")[0]
    for seed in (0, 42, 2 ** 40 + 3):
        k = jax.device_put(jax.random.key(seed), gpu)
        ka, kb = jax.random.split(k)
        want = (jax.random.uniform(ka, (1000,), jnp.float32), jax.random.uniform(kb, (7, 3), jnp.float64, -2.0, 3.0),
                jax.random.normal(ka, (257,), jnp.float32), jax.random.randint(k, (64,), -5, 9, jnp.int32))
        for got, w in zip(mod.u(seed), want, strict=True):
            got, w = np.asarray(got), np.asarray(w)
            assert (got.dtype, got.shape) == (w.dtype, w.shape) and got.tobytes() == w.tobytes(), seed


CONV = """\
def block(x: f32[8, 16, 16, 4], w: f32[3, 3, 4, 8]) -> f32[8, 8, 8, 8]:
    return conv(x, w, strides=2, padding="SAME", layout=("NHWC", "HWIO", "NHWC"))

def block64(x: f64[8, 16, 16, 4], w: f64[3, 3, 4, 8]) -> f64:
    return sum(tanh(conv(x, w, padding=[(1, 1), (0, 2)], layout=("NHWC", "HWIO", "NHWC"))))
"""


def test_convolution_and_its_gradient_on_the_gpu_equal_lax_on_the_gpu():
    mod = arrc.loads(CONV, device="gpu")
    r = np.random.default_rng(0)
    x, w = r.normal(size=(8, 16, 16, 4)), r.normal(size=(3, 3, 4, 8))
    dn = ("NHWC", "HWIO", "NHWC")
    gpu = jax.devices("gpu")[0]
    x32, w32 = (jax.device_put(a.astype(np.float32), gpu) for a in (x, w))
    want = jax.lax.conv_general_dilated(x32, w32, (2, 2), "SAME", dimension_numbers=dn)
    np.testing.assert_allclose(mod.block(x32, w32), want, rtol=1e-5, atol=1e-5)

    def loss(x, w):
        return jnp.sum(jnp.tanh(jax.lax.conv_general_dilated(x, w, (1, 1), [(1, 1), (0, 2)],
                                                             dimension_numbers=dn)))
    got = arrc.grad(mod.block64, argnums=(0, 1))(x, w)
    for g, j in zip(got, jax.grad(loss, argnums=(0, 1))(jax.device_put(x, gpu), jax.device_put(w, gpu))):
        np.testing.assert_allclose(g, j, rtol=1e-10, atol=1e-12)


MLP = """\
def loss(w1: f64[16, 32], w2: f64[32, 4], x: f64[64, 16], y: i32[64]) -> f64:
    h = tanh(x @ w1)
    return -mean(take_along_axis(log_softmax(h @ w2, axis=1), y[:, None], axis=1))
"""


def test_a_gradient_on_the_gpu_equals_jax_grad_on_the_gpu():
    mod = arrc.loads(MLP, device="gpu")
    r = np.random.default_rng(1)
    args = (r.normal(size=(16, 32)) * 0.3, r.normal(size=(32, 4)) * 0.3, r.normal(size=(64, 16)),
            r.integers(0, 4, 64).astype(np.int32))

    def loss(w1, w2, x, y):
        logits = jax.nn.log_softmax(jnp.tanh(x @ w1) @ w2, axis=1)
        return -jnp.mean(jnp.take_along_axis(logits, y[:, None], axis=1))
    gpu = jax.devices("gpu")[0]
    want = jax.grad(loss, argnums=(0, 1))(*(jax.device_put(a, gpu) for a in args))
    got = arrc.grad(mod.loss, argnums=(0, 1))(*args)
    for g, j in zip(got, want):
        assert {d.platform for d in g.devices()} == {"gpu"}
        np.testing.assert_allclose(g, j, rtol=1e-10, atol=1e-13)


LINALG = """\
def f(a: f64[4, 6, 6], b: f64[6, 2]) -> (f64[4, 6, 2], f64[4], f64[4, 6]):
    s = a @ transpose(a, (0, 2, 1)) + 6.0 * eye(6)
    w, v = eigh(s)
    return solve(s, b), slogdet(s)[1], w

def g(a: f64[6, 6]) -> f64:
    return sum(cholesky(a @ a.T + 6.0 * eye(6)))
"""


def test_linear_algebra_on_the_gpu_is_cusolver_and_equals_jax_on_the_gpu():
    mod = arrc.loads(LINALG, device="gpu")
    r = np.random.default_rng(2)
    a, b = r.normal(size=(4, 6, 6)), r.normal(size=(6, 2))
    gpu = jax.devices("gpu")[0]

    def twin(a, b):
        s = a @ jnp.swapaxes(a, 1, 2) + 6.0 * jnp.eye(6)
        return jnp.linalg.solve(s, b), jnp.linalg.slogdet(s)[1], jnp.linalg.eigh(s)[0]
    for got, want in zip(mod.f(a, b), jax.jit(twin)(jax.device_put(a, gpu), jax.device_put(b, gpu)), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    loss = lambda a: jnp.sum(jnp.linalg.cholesky(a @ a.T + 6.0 * jnp.eye(6)))      # noqa: E731
    np.testing.assert_allclose(arrc.grad(mod.g)(a[0]), jax.grad(loss)(jax.device_put(a[0], gpu)), rtol=1e-10)
