"""arr functions inside JAX (LANGUAGE.md section 18, docs/interop.md): `Function.as_jax()` eagerly, under
jax.jit (its StableHLO merged into JAX's module), jax.grad and jax.vjp (arr's own backward pass), jax.vmap
(arr's vmap), with linear algebra, and its errors at trace time; against the same computation in JAX."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import arrc

SRC = """
def layer(x: f32[b, 4], w: f32[4, 3]) -> f32[b, 3]:
    return tanh(x @ w)

def stats(x: f64[n], k: i32) -> (f64, f64[n]):
    return sum(x * x) * k, x / (1.0 + abs(x))

def whiten(s: f64[n, n], y: f64[n]) -> f64[n]:
    return triangular_solve(cholesky(s), y, lower=true)
"""
R = np.random.default_rng(0)


@pytest.fixture(scope="module")
def mod():
    return arrc.loads(SRC, filename="interop.arr")


def _layer(x, w):
    return jnp.tanh(x @ w)


def test_eagerly_and_under_jit_inside_jax_code(mod):
    f = mod.layer.as_jax()
    x, w = R.normal(size=(5, 4)).astype(np.float32), R.normal(size=(4, 3)).astype(np.float32)
    np.testing.assert_allclose(f(x, w), _layer(x, w), rtol=1e-6)
    loss = jax.jit(lambda x, w: jnp.mean(f(x, w) ** 2) + jnp.sum(w))
    np.testing.assert_allclose(loss(x, w), jnp.mean(_layer(x, w) ** 2) + jnp.sum(w), rtol=1e-6)
    text = jax.jit(lambda x, w: f(x, w) * 2.0).lower(x, w).as_text()
    assert "call @arr_layer" in text and "func.func private @arr_layer" in text      # merged, not a callback


def test_jax_grad_and_vjp_use_arrs_backward_pass(mod):
    f = mod.layer.as_jax()
    x, w = R.normal(size=(5, 4)).astype(np.float32), R.normal(size=(4, 3)).astype(np.float32)
    for argnums in (0, 1, (0, 1)):
        got = jax.grad(lambda x, w: jnp.sum(f(x, w) ** 2), argnums=argnums)(x, w)
        want = jax.grad(lambda x, w: jnp.sum(_layer(x, w) ** 2), argnums=argnums)(x, w)
        for g, e in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
    s = mod.stats.as_jax()
    x = R.normal(size=6)
    value, pull = jax.vjp(lambda x: s(x, 3), x)
    ct = (1.0, np.ones(6))
    twin = lambda x: (jnp.sum(x * x) * 3, x / (1.0 + jnp.abs(x)))       # noqa: E731
    want_value, want_pull = jax.vjp(twin, x)
    np.testing.assert_allclose(value[0], want_value[0], rtol=1e-12)
    np.testing.assert_allclose(pull(ct)[0], want_pull(ct)[0], rtol=1e-12)
    np.testing.assert_allclose(jax.jit(jax.grad(lambda x: s(x, 2)[0]))(x), 4 * x, rtol=1e-12)


def test_jax_vmap_is_arrs_vmap(mod):
    f = mod.layer.as_jax()
    xs, w = R.normal(size=(7, 5, 4)).astype(np.float32), R.normal(size=(4, 3)).astype(np.float32)
    np.testing.assert_allclose(jax.vmap(f, in_axes=(0, None))(xs, w), jax.vmap(_layer, in_axes=(0, None))(xs, w),
                               rtol=1e-6)
    ws = R.normal(size=(7, 4, 3)).astype(np.float32)
    np.testing.assert_allclose(jax.jit(jax.vmap(f, in_axes=(None, 0)))(xs[0], ws),
                               jax.vmap(_layer, in_axes=(None, 0))(xs[0], ws), rtol=1e-6)


def test_linear_algebra_inside_jax(mod):
    g = mod.whiten.as_jax()
    a = R.normal(size=(4, 4))
    s, y = a @ a.T + 4 * np.eye(4), R.normal(size=4)
    want = jax.scipy.linalg.solve_triangular(jnp.linalg.cholesky(s), y, lower=True)
    np.testing.assert_allclose(jax.jit(g)(s, y), want, rtol=1e-12)
    np.testing.assert_allclose(jax.grad(lambda y: jnp.sum(g(s, y)))(y),
                               jax.grad(lambda y: jnp.sum(jax.scipy.linalg.solve_triangular(
                                   jnp.linalg.cholesky(s), y, lower=True)))(y), rtol=1e-12)


def test_wrong_arguments_are_arrs_error_at_trace_time(mod):
    f = mod.layer.as_jax()
    with pytest.raises(arrc.ArgumentError, match="argument `w` of `layer` has type f32\\[5, 3\\], expected f32\\[4, 3\\]"):
        jax.jit(f)(np.ones((5, 4), np.float32), np.ones((5, 3), np.float32))
    with pytest.raises(arrc.ArgumentError, match="has type f64"):
        f(np.ones((5, 4)), np.ones((4, 3), np.float32))


def test_what_it_does_not_take_yet():
    printing = arrc.loads("def f(x: f32[3]) -> f32[3]:\n    print(\"x\", x)\n    return x\n")
    guarded = arrc.loads("def f(x: f32[3]) -> f32[3]:\n    return log(x)\n", guards="nan")
    for fn in (printing.f, guarded.f):
        with pytest.raises(TypeError, match="as_jax does not take yet a function that prints or asserts"):
            fn.as_jax()


def test_the_documented_training_loop_equals_the_jax_one():
    loss = arrc.loads("""
def loss(w: f32[784, 10], x: f32[b, 784], y: i32[b]) -> f32:
    logits = x @ w
    return -mean(take_along_axis(log_softmax(logits, axis=1), y[:, None], axis=1))
""").loss.as_jax()

    def twin(w, x, y):
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(x @ w, axis=1), y[:, None], axis=1))

    def trainer(fn):
        @jax.jit
        def step(w, x, y):
            value, g = jax.value_and_grad(fn)(w, x, y)
            return w - 0.1 * g, value
        return step
    batches = [(R.normal(size=(32, 784)).astype(np.float32), R.integers(0, 10, 32).astype(np.int32)) for _ in range(4)]
    w_arr = w_jax = jnp.zeros((784, 10), jnp.float32)
    arr_step, jax_step = trainer(loss), trainer(twin)
    for x, y in batches:
        (w_arr, l_arr), (w_jax, l_jax) = arr_step(w_arr, x, y), jax_step(w_jax, x, y)
        np.testing.assert_allclose(l_arr, l_jax, rtol=1e-5)
    np.testing.assert_allclose(w_arr, w_jax, rtol=1e-4, atol=1e-6)


def test_forward_mode_and_second_derivatives_of_a_float_function(mod):
    f = mod.layer.as_jax()
    x, w = R.normal(size=(2, 4)).astype(np.float32), R.normal(size=(4, 3)).astype(np.float32)
    tx, tw = np.ones_like(x), np.zeros_like(w)
    got, want = jax.jvp(f, (x, w), (tx, tw)), jax.jvp(_layer, (x, w), (tx, tw))
    for g, e in zip(got, want):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(jax.jacfwd(f, argnums=1)(x, w), jax.jacfwd(_layer, argnums=1)(x, w), rtol=1e-5, atol=1e-6)
    g = mod.whiten.as_jax()
    a = R.normal(size=(3, 3))
    s, y = a @ a.T + 3 * np.eye(3), R.normal(size=3)
    twin = lambda y: jnp.sum(jax.scipy.linalg.solve_triangular(jnp.linalg.cholesky(s), y, lower=True) ** 3)  # noqa: E731
    np.testing.assert_allclose(jax.hessian(lambda y: jnp.sum(g(s, y) ** 3))(y), jax.hessian(twin)(y), rtol=1e-10)
