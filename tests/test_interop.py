"""arr functions inside JAX (LANGUAGE.md section 18, docs/interop.md): `Function.as_jax()` eagerly, under
jax.jit (its StableHLO merged into JAX's module), jax.grad and jax.vjp (arr's own backward pass), jax.vmap
(arr's vmap), with linear algebra, and its errors at trace time; against the same computation in JAX."""
from __future__ import annotations

import os
import re

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


def test_a_direct_call_inside_jax_code_says_to_use_as_jax(mod):
    """Called on JAX's tracers (inside jax.jit, grad or vmap) an arr function raises an ArgumentError naming
    the argument and `as_jax` (it was JAX's ConcretizationTypeError from arrc's own code), keys too."""
    x, w = R.normal(size=(5, 4)).astype(np.float32), R.normal(size=(4, 3)).astype(np.float32)
    keyed = arrc.loads("def d(k: key) -> f32[2]:\n    return uniform(k, (2,))\n")
    for transform, call, args in ((jax.jit, lambda x, w: mod.layer(x, w), (x, w)),
                                  (jax.grad, lambda x, w: jnp.sum(mod.layer(x, w=w)), (x, w)),
                                  (lambda f: jax.vmap(f, in_axes=(0, None)), lambda x, w: mod.layer(x[None], w), (x, w)),
                                  (jax.jit, lambda k: keyed.d(k), (jax.random.key(0),))):
        with pytest.raises(arrc.ArgumentError) as err:
            transform(call)(*args)
        assert str(err.value).startswith("argument `") and " is a JAX tracer: `" in str(err.value) \
            and "call its `as_jax()` there (e.g. `mod.f.as_jax()(...)`), which JAX traces" in str(err.value)
    with pytest.raises(arrc.ArgumentError, match=r"^argument `x` is a JAX tracer: `vmap\(layer\)` is called"):
        jax.jit(arrc.vmap(mod.layer, in_axes=(0, None)))(x[None], w)
    with pytest.raises(arrc.ArgumentError, match=r"^argument `x` is a JAX tracer: `layer` is called"):
        jax.jit(lambda x, w: mod.layer([[x[0, i] for i in range(4)]], w))(x, w)      # (a list of them)


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
    t = R.normal(size=6)
    for got, expected in zip(jax.tree.leaves(jax.jvp(lambda x: s(x, 3), (x,), (t,))),    # (k: an integer)
                             jax.tree.leaves(jax.jvp(twin, (x,), (t,)))):
        np.testing.assert_allclose(got, expected, rtol=1e-12)
    np.testing.assert_allclose(jax.hessian(lambda x: s(x, 3)[0])(x), 6 * np.eye(6), rtol=1e-12)


def test_jax_vmap_is_arrs_vmap(mod):
    f = mod.layer.as_jax()
    xs, w = R.normal(size=(7, 5, 4)).astype(np.float32), R.normal(size=(4, 3)).astype(np.float32)
    np.testing.assert_allclose(jax.vmap(f, in_axes=(0, None))(xs, w), jax.vmap(_layer, in_axes=(0, None))(xs, w),
                               rtol=1e-6)
    ws = R.normal(size=(7, 4, 3)).astype(np.float32)
    np.testing.assert_allclose(jax.jit(jax.vmap(f, in_axes=(None, 0)))(xs[0], ws),
                               jax.vmap(_layer, in_axes=(None, 0))(xs[0], ws), rtol=1e-6)


SHARED_SRC = """
def f(x: f32[3], y: f32[3]) -> f32:
    return sum(y * y)

def two(x: f32[3], y: f32[3]) -> (f32, f32[3], f32):
    s = 0.0
    t = 0.0
    for i in range(3):
        s = s + x[i]
        t = t + y[i] * y[i]
    return s, y * 2.0, t
"""


def test_jax_vmap_leaves_a_result_no_mapped_argument_reaches_unbatched():
    """As JAX batches its own code: a result that does not depend on a mapped argument is not batched, so
    `out_axes=None` takes it (it raised JAX's "got axis spec None but output was batched on axis 0"); also
    among batched results (a loop whose carried values differ), without lanes, in nested vmaps, and where
    the primitive runs lane by lane (`lax.map`: a derivative from Python)."""
    m = arrc.loads(SHARED_SRC, filename="shared.arr")
    f, two = m.f.as_jax(), m.two.as_jax()
    f_jax = lambda x, y: jnp.sum(y * y)                                         # noqa: E731
    two_jax = lambda x, y: (jnp.sum(x), y * 2.0, jnp.sum(y * y))                # noqa: E731
    xs, y = R.normal(size=(5, 3)).astype(np.float32), R.normal(size=3).astype(np.float32)
    np.testing.assert_allclose(jax.vmap(f, in_axes=(0, None), out_axes=None)(xs, y),
                               jax.vmap(f_jax, in_axes=(0, None), out_axes=None)(xs, y), rtol=1e-6)
    axes = dict(in_axes=(0, None), out_axes=(0, None, None))
    for lanes in (xs, xs[:0]):
        got, want = jax.vmap(two, **axes)(lanes, y), jax.vmap(two_jax, **axes)(lanes, y)
        for g, w in zip(got, want):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-6)
    nested = lambda g: jax.jit(jax.vmap(jax.vmap(g, **axes), **axes))           # noqa: E731
    for g, w in zip(nested(two)(xs[None], y), nested(two_jax)(xs[None], y)):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-6)
    dy = lambda g: jax.grad(g, argnums=1)                                       # noqa: E731
    np.testing.assert_allclose(jax.vmap(dy(f), in_axes=(0, None), out_axes=None)(xs, y),
                               jax.vmap(dy(f_jax), in_axes=(0, None), out_axes=None)(xs, y), rtol=1e-6)


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
    with pytest.raises(arrc.ArgumentError) as info:     # (was NumPy's conversion of a tracer, JAX's text inside)
        jax.jit(lambda x, w: f([x[0], x[1]], w))(np.ones((2, 4), np.float32), np.ones((4, 3), np.float32))
    assert str(info.value) == ("argument `x` is a list or tuple holding values that JAX traces: give it as one array "
                               "(e.g. `jnp.stack(...)`), expected f32[b, 4]")


EFFECTS_SRC = """
def f(x: f32[4]) -> f32[4]:
    print("sum", sum(x))
    assert all(x > 0.0), "x must be positive"
    y = x - 2.0
    return log(y) * 3.0

def pick(x: f32[4], i: i32) -> f32:
    return x[i]
"""


def _report(call) -> str:
    try:
        call()
    except arrc.GuardError as err:
        return f"{type(err).__name__}: {err}"
    raise AssertionError("no report")


def test_under_jax_jit_prints_print_and_faults_raise_arrs_error_from_the_call(capfd):
    """print, assert and guards inside `as_jax`: each line printed once per call, and a fault is arr's own
    error (the report a call of the module gives) raised from the call of the jitted function, never JAX's
    JaxRuntimeError; the next call runs as if nothing happened."""
    plain = arrc.loads(EFFECTS_SRC, filename="fx.arr")
    guarded = arrc.loads(EFFECTS_SRC, filename="fx.arr", guards="all", guard_scope="all-ops")
    step = jax.jit(lambda x: plain.f.as_jax()(x) + 1.0)
    good = np.array([3.0, 4.0, 5.0, 6.0], np.float32)
    np.testing.assert_allclose(step(good), np.log(good - 2) * 3 + 1, rtol=1e-6)
    assert capfd.readouterr().out == "sum 18.0\n"
    negative = np.array([3.0, -1.0, 5.0, 6.0], np.float32)
    assert _report(lambda: step(negative)) == _report(lambda: plain.f(negative))
    assert capfd.readouterr().out == "sum 13.0\n" * 2
    np.testing.assert_allclose(step(good), np.log(good - 2) * 3 + 1, rtol=1e-6)
    capfd.readouterr()
    low = np.array([3.0, 1.0, 5.0, 6.0], np.float32)
    assert _report(lambda: jax.jit(guarded.f.as_jax())(low)).startswith("NaNError: error[R0001]: NaN produced")
    assert _report(lambda: jax.jit(guarded.f.as_jax())(low)) == _report(lambda: guarded.f(low))
    assert _report(lambda: jax.jit(guarded.pick.as_jax())(good, 7)) == _report(lambda: guarded.pick(good, 7))
    assert float(jax.jit(guarded.pick.as_jax())(good, 1)) == 4.0
    with pytest.raises(TypeError, match="under as_jax the nan and inf guards check every operation"):
        arrc.loads(EFFECTS_SRC, guards="nan").f.as_jax()


GRADS_SRC = """
def g(x: f32[4]) -> f32:
    print("g at", x[0])
    assert all(x > 0.0), "x must be positive"
    return sum(sqrt(x - 1.0))

def f(x: f32, n: i32) -> f32:
    for i in range(n, bound=4):
        x = x * 1.5
    return x

def df(x: f32, n: i32) -> f32:
    return grad(f)(x, n)
"""


def test_jax_derivatives_of_a_function_that_prints_asserts_or_is_guarded(capfd):
    """jax.grad, jax.hessian and jax.vmap of them: the values of JAX's, each line printed once per call (the
    function's own call prints; its derivatives' calls are quiet), a failed assert or a fault in the backward
    pass raised as arr's own error, the report of arr's vjp."""
    plain = arrc.loads(GRADS_SRC, filename="d.arr")
    guarded = arrc.loads(GRADS_SRC, filename="d.arr", guards="all", guard_scope="all-ops")
    x = np.array([2.0, 3.0, 5.0, 9.0], np.float32)
    want = jax.grad(lambda x: jnp.sum(jnp.sqrt(x - 1.0)))
    for mod in (plain, guarded):
        g = mod.g.as_jax()
        np.testing.assert_allclose(jax.jit(jax.grad(g))(x), want(x), rtol=1e-6)
        np.testing.assert_allclose(jax.hessian(g)(x), jax.hessian(lambda x: jnp.sum(jnp.sqrt(x - 1.0)))(x),
                                   rtol=1e-6)
        np.testing.assert_allclose(jax.grad(lambda xs: jnp.sum(jax.vmap(g)(xs)))(np.stack([x, x + 1])),
                                   jax.vmap(want)(np.stack([x, x + 1])), rtol=1e-6)
        assert capfd.readouterr().out == "g at 2.0\n" * 2 + "g at 2.0\ng at 3.0\n"
    negative = np.array([2.0, -3.0, 5.0, 9.0], np.float32)
    assert _report(lambda: jax.jit(jax.grad(plain.g.as_jax()))(negative)) == _report(lambda: plain.g(negative))
    one = np.array([1.0, 3.0, 5.0, 9.0], np.float32)
    fault = _report(lambda: jax.jit(jax.grad(guarded.g.as_jax()))(one))
    assert fault.startswith("InfError: error[R0002]: infinity produced in the backward pass"), fault
    assert fault == _report(lambda: arrc.vjp(guarded.g)(one, np.float32(1.0)))
    capfd.readouterr()


def test_eager_calls_compile_once(capfd):
    """Called eagerly (no trace), a function with callbacks, its JAX gradient and its jax.vmap report to one
    run per function, so JAX compiles them once (a new run per call was a compile per call); each call still
    prints and raises its own fault."""
    from arrc.runtime import effects
    compiles = []

    def count(name, *_, **__):
        if name == "/jax/core/compile/backend_compile_duration":
            compiles.append(name)
    g = arrc.loads(GRADS_SRC, filename="d.arr").g.as_jax()
    x = np.array([2.0, 3.0, 5.0, 9.0], np.float32)
    lanes = np.stack([x, x])
    g(x), jax.grad(g)(x), jax.vmap(g)(lanes)
    runs = len(effects.runs())
    jax.monitoring.register_event_duration_secs_listener(count)
    try:
        for _ in range(3):
            np.testing.assert_allclose(g(x), np.sum(np.sqrt(x - 1.0)), rtol=1e-6)
            np.testing.assert_allclose(jax.grad(g)(x), 0.5 / np.sqrt(x - 1.0), rtol=1e-6)
            np.testing.assert_allclose(jax.vmap(g)(lanes), np.sum(np.sqrt(lanes - 1.0), axis=1), rtol=1e-6)
    finally:
        jax.monitoring.unregister_event_duration_listener(count)
    assert compiles == [] and len(effects.runs()) == runs      # (and no record made per call, never freed)
    assert capfd.readouterr().out == "g at 2.0\n" * 16
    assert _report(lambda: g(-x)).startswith("AssertionFailed: error[R0005]: assertion failed: x must be positive")
    np.testing.assert_allclose(g(x), np.sum(np.sqrt(x - 1.0)), rtol=1e-6)


def test_jax_derivatives_check_a_loops_bound():
    """A loop's `bound=` is checked by JAX's derivative of the function (arr's reverse mode keeps its tape)
    and by a function that takes a derivative through it: a run past it raises R0006, as a call from Python."""
    mod = arrc.loads(GRADS_SRC, filename="d.arr")
    assert float(jax.jit(jax.grad(mod.f.as_jax()))(np.float32(1.0), 4)) == 1.5 ** 4
    assert float(jax.jit(mod.df.as_jax())(np.float32(1.0), 3)) == 1.5 ** 3
    past = _report(lambda: arrc.grad(mod.f)(np.float32(1.0), 6))
    assert past.startswith("LoopBoundExceeded: error[R0006]: this `for` loop ran 6 iterations"), past
    assert _report(lambda: jax.jit(jax.grad(mod.f.as_jax()))(np.float32(1.0), 6)) == past
    assert _report(lambda: jax.grad(mod.f.as_jax())(np.float32(1.0), 6)) == past
    assert _report(lambda: jax.jit(mod.df.as_jax())(np.float32(1.0), 6)) == _report(lambda: mod.df(np.float32(1.0), 6))
    forward = lambda: jax.jvp(lambda x: mod.f.as_jax()(x, 6), (np.float32(1.0),), (np.float32(1.0),))  # noqa: E731
    assert _report(forward) == past                             # (arr's forward mode: reverse sweeps, a tape)
    lanes = jax.vmap(mod.df.as_jax(), in_axes=(0, None))       # (one lane at a time: arr's vmap does not take it)
    np.testing.assert_array_equal(lanes(np.ones(3, np.float32), 3), np.full(3, 1.5 ** 3, np.float32))
    assert _report(lambda: lanes(np.ones(3, np.float32), 6)) == _report(lambda: mod.df(np.float32(1.0), 6))


def test_under_jax_jit_a_call_kept_for_its_check_alone_runs():
    """A call whose results are unused still runs: JAX's effect keeps it."""
    plain = arrc.loads(EFFECTS_SRC, filename="fx.arr")
    negative = np.array([3.0, -1.0, 5.0, 6.0], np.float32)

    def checked(x):
        plain.f.as_jax()(x)
        return x * 2.0
    with pytest.raises(arrc.AssertionFailed):
        jax.jit(checked)(negative)


def test_jax_does_not_raise_an_arr_fault_again_at_exit():
    """The callbacks record, they never raise: JAX has no failed execution to raise when the process ends."""
    import subprocess
    import sys
    child = ("import jax, numpy as np, arrc\n"
             f"m = arrc.loads({EFFECTS_SRC!r}, guards='nan', guard_scope='all-ops')\n"
             "try:\n    jax.jit(m.f.as_jax())(np.array([3.0, 1.0, 5.0, 6.0], np.float32))\n"
             "except arrc.NaNError:\n    print('raised')\n")
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=300)
    assert (done.returncode, done.stdout, done.stderr) == (0, "sum 15.0\nraised\n", "")


KEYS_SRC = """
def noise(k: key, x: f32[n]) -> f32[n]:
    return x + 0.1 * normal(k, (n,))

def halves(k: key) -> (key, key):
    a, b = split(k)
    return a, b

def init(k: key) -> f32[4, 3]:
    k1, k2 = split(k)
    return uniform(k1, (4, 3)) + normal(k2, (4, 3))

def one(k: key) -> f32:
    return normal(k, ())
"""


def test_keys_cross_as_jax_typed_keys_or_their_words():
    mod = arrc.loads(KEYS_SRC)
    k, x = jax.random.key(3), np.arange(5, dtype=np.float32)
    f32 = jnp.float32                       # (x64 is on here: JAX's default dtype would be f64)
    want = x + 0.1 * jax.random.normal(k, (5,), f32)
    noise = mod.noise.as_jax()
    for got in (noise(k, x), jax.jit(noise)(k, x), jax.jit(noise)(jax.random.PRNGKey(3), x)):
        np.testing.assert_allclose(got, want, rtol=1e-6)       # (normals: XLA's erf_inv, 1 ulp apart at most)
    a, b = jax.jit(mod.halves.as_jax())(k)                     # key results are typed keys, bit for bit
    assert jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key)
    for got, expected in zip((a, b), jax.random.split(k)):
        np.testing.assert_array_equal(jax.random.key_data(got), jax.random.key_data(expected))
    k1, k2 = jax.random.split(k)
    np.testing.assert_allclose(jax.jit(mod.init.as_jax())(k), jax.random.uniform(k1, (4, 3), f32)
                               + jax.random.normal(k2, (4, 3), f32), rtol=1e-6, atol=1e-6)
    keys = jax.random.split(k, 8)
    np.testing.assert_allclose(jax.jit(jax.vmap(mod.one.as_jax()))(keys),
                               jax.vmap(lambda kk: jax.random.normal(kk, (), f32))(keys), rtol=1e-6)
    np.testing.assert_allclose(jax.grad(lambda x: jnp.sum(noise(k, x) ** 2))(x), 2 * want, rtol=1e-6)
    with pytest.raises(arrc.ArgumentError, match="argument `k` must be a JAX key"):
        noise(np.zeros(3, np.uint32), x)


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



def test_reverse_mode_of_a_function_with_a_float_and_an_integer_result():
    """jax.grad, jax.vjp and jax.jacrev of such a function were `TypeError: vjp needs a function with float
    results`: its vjp (custom_vjp) takes the integer result's float0 cotangent and ignores it."""
    mod = arrc.loads("def im2(x: f32[n], k: i32) -> (f32[n], i32):\n    return sin(x) * k, argmax(x)\n")
    f = mod.im2.as_jax()
    twin = lambda x, k: (jnp.sin(x) * k, jnp.argmax(x).astype(jnp.int32))      # noqa: E731
    x = R.normal(size=8).astype(np.float32)
    for transform in (jax.grad, lambda g: jax.jit(jax.grad(g))):
        np.testing.assert_allclose(transform(lambda x: jnp.sum(f(x, 3)[0] ** 2))(x),
                                   jax.grad(lambda x: jnp.sum(twin(x, 3)[0] ** 2))(x), rtol=1e-5)
    (value, index), pull = jax.vjp(f, x, np.int32(3))
    (want_value, want_index), want_pull = jax.vjp(twin, x, np.int32(3))
    np.testing.assert_allclose(value, want_value, rtol=1e-6)
    assert int(index) == int(want_index)
    ct = (np.arange(8, dtype=np.float32), np.zeros((), jax.dtypes.float0))
    got, want = pull(ct), want_pull(ct)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    assert got[1].dtype == want[1].dtype == jax.dtypes.float0
    np.testing.assert_allclose(jax.jacrev(lambda x: f(x, 2)[0])(x), jax.jacrev(lambda x: twin(x, 2)[0])(x), rtol=1e-6)

def _in_8_devices(child: str, script) -> str:
    """`child`'s output, run as the file `script` with 8 virtual CPU devices (fixed before JAX's CPU backend
    starts)."""
    import subprocess
    import sys
    import textwrap
    script.write_text("import jax\njax.config.update('jax_num_cpu_devices', 8)\n" + textwrap.dedent(child))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_jax_derivatives_inside_shard_map(tmp_path):
    """jax.grad inside jax.shard_map was `Expected cotangent type float32[8]{V:data} but got float32[8]`:
    the results did not vary over the manual axes their operands vary over."""
    assert _in_8_devices("""
        import numpy as np, jax.numpy as jnp, arrc
        from jax.sharding import PartitionSpec as P
        mod = arrc.loads("def f(x: f32[n], w: f32[n]) -> f32:\\n    return sum(sin(x) * w)\\n"
                         "def im(x: f32[n], w: f32[n]) -> (f32, i32):\\n    return sum(sin(x) * w), argmax(x)\\n")
        f, im = mod.f.as_jax(), mod.im.as_jax()
        twin = lambda x, w: jnp.sum(jnp.sin(x) * w)
        x, w = np.linspace(-1, 1, 64, dtype=np.float32), np.linspace(0, 1, 8, dtype=np.float32)
        def per_device(f):          # (w is the same on every device: its gradient is summed over them)
            return jax.jit(jax.shard_map(f, mesh=arrc.mesh(data=8), in_specs=(P("data"), P()),
                                         out_specs=(P("data"), P())))(x, w)
        want = per_device(lambda x, w: jax.grad(twin, argnums=(0, 1))(x, w))
        for got in (per_device(lambda x, w: jax.grad(f, argnums=(0, 1))(x, w)),
                    per_device(lambda x, w: jax.grad(lambda x, w: im(x, w)[0], argnums=(0, 1))(x, w))):
            for g, e in zip(got, want):
                np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
        got = per_device(lambda x, w: (jax.vmap(jax.grad(f), in_axes=(0, None))(x.reshape(2, 4), w[:4]).ravel(), w))
        want = per_device(lambda x, w: (jax.vmap(jax.grad(twin), in_axes=(0, None))(x.reshape(2, 4), w[:4]).ravel(), w))
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
        print("ok")
        """, tmp_path / "child.py") == "ok\n"


# ---- JAX inside arr: `extern def` (arrc.load(externs=...)) ---------------------------------------------------

EXTERN_SRC = """\
extern def encoder(x: f32[b, 4]) -> f32[b, 2]

def loss(x: f32[b, 4], t: f32[b, 2]) -> f32:
    return mean((encoder(x) - t) ** 2)

def slope(x: f32[b, 4], t: f32[b, 2]) -> f32[b, 4]:
    return grad(loss)(x, t)

def per_example(x: f32[c, b, 4], t: f32[c, b, 2]) -> f32[c]:
    return vmap(loss)(x, t)
"""
W_ENC = R.normal(size=(4, 2)).astype(np.float32)


def _encoder(x):
    return jnp.tanh(x @ W_ENC) * 2.0


def _jax_loss(x, t):
    return jnp.mean((_encoder(x) - t) ** 2)


def test_an_extern_is_the_jax_function_under_grad_and_vmap():
    mod = arrc.loads(EXTERN_SRC, filename="enc.arr", externs={"encoder": _encoder})
    assert "encoder" not in mod.functions                  # JAX's to call, not arr's
    x, t = R.normal(size=(3, 4)).astype(np.float32), R.normal(size=(3, 2)).astype(np.float32)
    np.testing.assert_allclose(mod.loss(x, t), _jax_loss(x, t), rtol=1e-6)
    np.testing.assert_allclose(mod.slope(x, t), jax.grad(_jax_loss)(x, t), rtol=1e-5, atol=1e-7)
    xs, ts = R.normal(size=(5, 3, 4)).astype(np.float32), R.normal(size=(5, 3, 2)).astype(np.float32)
    np.testing.assert_allclose(mod.per_example(xs, ts), jax.vmap(_jax_loss)(xs, ts), rtol=1e-6)


def test_an_extern_itself_under_vmap_grad_and_jvp():
    """`vmap(encoder)`, `grad(e)`, `jvp(e, ...)` of an `extern def` itself (not of an arr function calling
    it): JAX's function on each lane, and its derivatives (E0214 "does not return a value" before)."""
    def energy(x):
        return jnp.sum(jnp.sin(x) * x)
    src = ("extern def encoder(x: f32[4]) -> f32[2]\n\nextern def energy(x: f32[4]) -> f32\n\n"
           "def rows(xs: f32[5, 4]) -> f32[5, 2]:\n    return vmap(encoder)(xs)\n\n"
           "def slope(x: f32[4]) -> f32[4]:\n    return grad(energy)(x)\n\n"
           "def push(x: f32[4], t: f32[4]) -> (f32, f32):\n    return jvp(energy, (x,), (t,))\n")
    mod = arrc.loads(src, filename="ext.arr", externs={"encoder": _encoder, "energy": energy})
    xs, t = R.normal(size=(5, 4)).astype(np.float32), R.normal(size=4).astype(np.float32)
    np.testing.assert_allclose(mod.rows(xs), jax.vmap(_encoder)(xs), rtol=1e-6)
    np.testing.assert_allclose(mod.slope(xs[0]), jax.grad(energy)(xs[0]), rtol=1e-5, atol=1e-7)
    for got, want in zip(mod.push(xs[0], t), jax.jvp(energy, (xs[0],), (t,))):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_python_side_vmap_keeps_the_modules_externs_and_constants():
    """`arrc.vmap(mod.f)` and `jax.vmap(mod.f.as_jax())` compile f in a copy of its module: with its externs
    and the constants given from Python (keys among them). Before: E0101 "extern has no function"."""
    mod = arrc.loads("def loss(x: f32[3, 4], t: f32[3, 2]) -> f32:\n"
                     "    return mean((encoder(x) - t) ** 2) * W + sum(uniform(K, (2,)))\n"
                     "extern def encoder(x: f32[b, 4]) -> f32[b, 2]\n",
                     externs={"encoder": _encoder}, constants={"W": np.float32(2.0), "K": jax.random.key(3)})
    xs, ts = R.normal(size=(5, 3, 4)).astype(np.float32), R.normal(size=(5, 3, 2)).astype(np.float32)
    want = jax.vmap(lambda x, t: _jax_loss(x, t) * 2.0 + jnp.sum(jax.random.uniform(jax.random.key(3), (2,), jnp.float32)))(
        xs, ts)
    np.testing.assert_allclose(arrc.vmap(mod.loss)(xs, ts), want, rtol=1e-6)
    np.testing.assert_allclose(jax.vmap(mod.loss.as_jax())(xs, ts), want, rtol=1e-6)


def test_an_extern_can_be_a_jax_export():
    exported = jax.export.export(jax.jit(_encoder))(jax.ShapeDtypeStruct((3, 4), np.float32))
    mod = arrc.loads(EXTERN_SRC, filename="enc.arr", externs={"encoder": exported})
    x, t = R.normal(size=(3, 4)).astype(np.float32), R.normal(size=(3, 2)).astype(np.float32)
    np.testing.assert_allclose(mod.loss(x, t), _jax_loss(x, t), rtol=1e-6)
    with pytest.raises(arrc.CompileError, match="fails on"):          # exported for 3 rows only
        mod.loss(np.zeros((4, 4), np.float32), np.zeros((4, 2), np.float32))
    xs, ts = R.normal(size=(5, 3, 4)).astype(np.float32), R.normal(size=(5, 3, 2)).astype(np.float32)
    want = jax.vmap(_jax_loss)(xs, ts)          # (JAX's call of an Exported has no batching rule: lane by lane)
    np.testing.assert_allclose(mod.per_example(xs, ts), want, rtol=1e-6)
    np.testing.assert_allclose(jax.vmap(mod.loss.as_jax())(xs, ts), want, rtol=1e-6)


def test_an_extern_can_be_a_jax_export_with_symbolic_dimensions():
    """Exported for `b` rows, called for 3 and 5: JAX's lowering of its call kept `?` dimensions, E0501 at a
    line of arrc's own source; they are made static as jax.jit's compile makes them."""
    b, = jax.export.symbolic_shape("b")
    exported = jax.export.export(jax.jit(_encoder))(jax.ShapeDtypeStruct((b, 4), np.float32))
    mod = arrc.loads(EXTERN_SRC, filename="enc.arr", externs={"encoder": exported}, guards="all")
    for rows in (3, 5):
        x, t = R.normal(size=(rows, 4)).astype(np.float32), R.normal(size=(rows, 2)).astype(np.float32)
        np.testing.assert_allclose(mod.loss(x, t), _jax_loss(x, t), rtol=1e-6)


def test_an_extern_whose_jax_function_returns_other_shapes_is_an_error_at_the_declaration():
    mod = arrc.loads(EXTERN_SRC, filename="enc.arr", externs={"encoder": lambda x: x @ np.ones((4, 3), np.float32)})
    with pytest.raises(arrc.CompileError) as info:
        mod.loss(np.zeros((3, 4), np.float32), np.zeros((3, 2), np.float32))
    assert str(info.value) == """\
error[E0203]: extern `encoder` is declared to return f32[3, 2] here; its JAX function returns f32[3, 3]
 --> enc.arr:1:37
  |
1 | extern def encoder(x: f32[b, 4]) -> f32[b, 2]
  |                                     ^^^^^^^^^ declared f32[3, 2] for (f32[3, 4])
4 |     return mean((encoder(x) - t) ** 2)
  |                  ---------- called with (f32[3, 4])
  |
  = help: change the declaration to what the JAX function returns, or the JAX function
"""


KEYED_EXTERNS = {"noise": lambda k, x: x + jax.random.normal(k, (3,), jnp.float32),
                 "fork": lambda k: jax.random.split(k),
                 "draw": jax.vmap(lambda k: jax.random.uniform(k, (3,), jnp.float32))}


def test_a_batch_of_keys_crosses_as_jax():
    """A `key[n]` or `key[2, 2]` parameter through `as_jax`, eagerly and under jax.jit, typed keys or their
    words: its words' last dimension is dropped once (the API's types of keys, `_type_of_value`; 3d6cfc5
    dropped it twice: "has type key, expected key[n]")."""
    mod = arrc.loads("def one(k: key) -> f32:\n    return uniform(k, ())\n\n"
                     "def g(ks: key[n]) -> f32[n]:\n    return vmap(one)(ks)\n\n"
                     "def h(ks: key[2, 2]) -> f32:\n    return uniform(ks[1, 0], ())\n")
    ks = jax.random.split(jax.random.key(3), 8)
    want = jax.vmap(lambda k: jax.random.uniform(k, (), jnp.float32))(ks)
    for keys in (ks, jax.random.key_data(ks)):
        assert np.array_equal(mod.g.as_jax()(keys), want) and np.array_equal(jax.jit(mod.g.as_jax())(keys), want)
    square = ks[:4].reshape(2, 2)
    assert np.array_equal(mod.h.as_jax()(square), jax.random.uniform(square[1, 0], (), jnp.float32))


def test_keys_cross_an_extern_as_jax_typed_keys():
    """An arr key reaches the JAX function as a typed key and a typed key it returns is an arr key, bit for
    bit with the JAX function called on JAX's keys (also under vmap, lane by lane). Before: a u64 scalar in,
    and a TypeError out of the declaration check for a key result."""
    mod = arrc.loads("extern def noise(k: key, x: f32[3]) -> f32[3]\nextern def fork(k: key) -> key[2]\n"
                     "extern def draw(k: key[2]) -> f32[2, 3]\n"
                     "def f(k: key, x: f32[3]) -> (f32[3], key[2], f32[2, 3], f32[2, 3]):\n    ks = fork(k)\n"
                     "    return noise(k, x), ks, draw(ks), vmap(noise)(ks, [x, 2.0 * x])\n",
                     externs=KEYED_EXTERNS)
    k, x = jax.random.key(7), np.arange(3, dtype=np.float32)
    noise, ks, drawn, lanes = mod.f(k, x)
    np.testing.assert_array_equal(noise, KEYED_EXTERNS["noise"](k, x))
    np.testing.assert_array_equal(jax.random.key_data(ks), jax.random.key_data(jax.random.split(k)))
    np.testing.assert_array_equal(drawn, KEYED_EXTERNS["draw"](jax.random.split(k)))
    np.testing.assert_allclose(lanes, jax.vmap(KEYED_EXTERNS["noise"])(jax.random.split(k), np.stack([x, 2 * x])),
                               rtol=1e-6)


def test_an_extern_returning_other_keys_is_an_error_at_the_declaration():
    source = "extern def fork(k: key) -> key[2]\ndef f(k: key) -> key[2]:\n    return fork(k)\n"
    for fork, gives in ((lambda k: jax.random.key_data(jax.random.split(k)), "u32[2, 2]"),
                        (lambda k: jax.random.split(jax.random.key(1, impl="rbg")), "key<rbg>[2]")):
        with pytest.raises(arrc.CompileError, match=rf"E0203(.|\n)*extern `fork` is declared to return key\[2\] "
                                                     rf"here; its JAX function returns {re.escape(gives)}"):
            arrc.loads(source, externs={"fork": fork}).f(jax.random.key(0))


def test_an_extern_without_a_function_is_an_error_at_the_declaration():
    mod = arrc.loads(EXTERN_SRC, filename="enc.arr")
    with pytest.raises(arrc.CompileError) as info:
        mod.loss(np.zeros((3, 4), np.float32), np.zeros((3, 2), np.float32))
    assert str(info.value) == """\
error[E0101]: extern `encoder` has no function
 --> enc.arr:1:12
  |
1 | extern def encoder(x: f32[b, 4]) -> f32[b, 2]
  |            ^^^^^^^ declared here, supplied by nobody
4 |     return mean((encoder(x) - t) ** 2)
  |                  ---------- called here
  |
  = help: give it from Python: `arrc.load(path, externs={"encoder": jax_function})` (a JAX function or a jax.export.Exported); the command line cannot supply one
"""
    with pytest.raises(ValueError, match="`decoder` is not declared by `extern def` in enc.arr"):
        arrc.loads(EXTERN_SRC, filename="enc.arr", externs={"decoder": _encoder})
    with pytest.raises(TypeError, match="must be a JAX function"):
        arrc.loads(EXTERN_SRC, filename="enc.arr", externs={"encoder": 3})


def test_an_extern_beside_linear_algebra_in_one_function():
    """Externs are merged by one pass, other linear algebra by a later one, into the same module (their
    functions were both named linalg_0_*: E0601)."""
    mod = arrc.loads("extern def enc(x: f32[4, 4]) -> f32[4, 4]\n"
                     "def f(x: f32[4, 4]) -> f32[4, 4]:\n    return enc(inv(x)) + 1.0\n",
                     externs={"enc": lambda x: x @ jnp.full((4, 4), 2.0, jnp.float32)}, guards="all")
    x = np.eye(4, dtype=np.float32) * 2
    np.testing.assert_allclose(mod.f(x), np.linalg.inv(x) @ np.full((4, 4), 2.0) + 1.0, rtol=1e-6)


def test_an_extern_that_calls_back_into_python_is_an_error_at_its_call_not_a_crash():
    """Its callback's index names JAX's lowering of it, which no executable of arr's has (a segfault before)."""
    def chatty(x):
        jax.debug.print("inside {}", x[0, 0])
        return _encoder(x)
    mod = arrc.loads(EXTERN_SRC, filename="enc.arr", externs={"encoder": chatty})
    with pytest.raises(arrc.CompileError) as info:
        mod.loss(np.zeros((3, 4), np.float32), np.zeros((3, 2), np.float32))
    assert str(info.value).splitlines()[0] == (
        "error[E0203]: JAX could not lower the extern `encoder` here: it calls back into Python (jax.debug.print, "
        "jax.pure_callback, io_callback, or an arr function's print, assert or guards under as_jax), which an arr "
        "program cannot run inside an extern; remove the callback from the function given as the extern")


def test_a_nan_made_inside_an_extern_is_blamed_on_the_jax_line():
    def encoder(x):
        return jnp.log(x @ W_ENC)
    line = encoder.__code__.co_firstlineno + 1
    mod = arrc.loads(EXTERN_SRC, filename="enc.arr", externs={"encoder": encoder}, guards="nan")
    x = np.ones((3, 4), np.float32) * np.sign(W_ENC.sum(axis=1))[None, :] * -1.0
    x[0] = np.abs(x[0]) * np.sign(W_ENC[:, 0])          # row 0, column 0 of x @ w: positive
    with pytest.raises(arrc.NaNError) as info:
        mod.loss(x, np.zeros((3, 2), np.float32))
    text = str(info.value)
    assert f"{__file__}:{line}:" in text and "this `log` produced NaN" in text, text


def _shifted_log(x):
    return jnp.log(x) * 2.0


def test_a_fault_inside_an_extern_names_the_arr_call_and_the_arr_expression_that_fed_it():
    mod = arrc.loads("extern def enc(x: f32[n]) -> f32[n]\n\ndef f(x: f32[n]) -> f32:\n    y = x - 1.0\n"
                     "    return sum(enc(y))\n", filename="model.arr", externs={"enc": _shifted_log},
                     guards="nan")
    with pytest.raises(arrc.NaNError) as info:
        mod.f(np.array([2.0, 0.5, 3.0], np.float32))
    line = _shifted_log.__code__.co_firstlineno + 1
    pad = " " * len(str(line))          # the gutter is as wide as the line number
    assert str(info.value) == f"""\
error[R0001]: NaN produced at run time
{pad}--> {__file__}:{line}:12
{pad} |
{line} |     return jnp.log(x) * 2.0
{pad} |            ^^^^^^^^^^ this `log` produced NaN at index [1]
{pad} |
{pad} = note: operands at [1]: (x - 1.0) = -0.5
{pad} = note: in enc, called from f at model.arr:5:16
"""


def test_an_externs_fault_is_blamed_on_its_jax_line_whichever_call_lowered_it_first(tmp_path):
    """A sharded call lowered first (inside JAX's lowering of the call) gave the extern's ops that call's
    traceback: its report, and every later one in the process, named arrc's own line in arrc/interop.py."""
    child = """
        import numpy as np, jax.numpy as jnp, arrc
        def enc(x):
            return jnp.log(x) * 2.0
        src = "extern def enc(x: f32[b, 4]) -> f32[b, 4]\\n\\ndef f(x: f32[b, 4]) -> f32[b, 4]:\\n    return enc(x - 1.0) * 2.0\\n"
        m = arrc.loads(src, externs={"enc": enc}, guards="nan,inf")
        x = np.ones((8, 4), np.float32) * 3
        x[6, 2] = 0.5
        calls = [m.f.sharded(arrc.mesh(data=4), in_specs=(("data", None),)), m.f,
                 jax.jit(arrc.loads(src, externs={"enc": enc}, guards="nan,inf", guard_scope="all-ops").f.as_jax())]
        for call in calls[::ORDER]:
            try:
                call(x)
            except arrc.NaNError as err:
                print(next(line for line in str(err).splitlines() if "-->" in line).strip())
        """
    for order in (1, -1):
        script = tmp_path / "child.py"
        assert _in_8_devices(child.replace("ORDER", str(order)), script) == f"--> {script}:6:12\n" * 3

EXTERN_VMAP_SRC = EXTERN_SRC + """
def per_shared(x: f32[c, b, 4], t: f32[b, 2]) -> f32[c]:
    return vmap(loss, in_axes=(0, None))(x, t)

def per_slope(x: f32[c, b, 4], t: f32[c, b, 2]) -> f32[c, b, 4]:
    return vmap(slope)(x, t)

def total(x: f32[c, b, 4], t: f32[c, b, 2]) -> f32:
    return sum(vmap(loss)(x, t))

def total_slope(x: f32[c, b, 4], t: f32[c, b, 2]) -> f32[c, b, 4]:
    return grad(total)(x, t)

def nested(x: f32[d, c, b, 4], t: f32[d, c, b, 2]) -> f32[d, c]:
    return vmap(per_example)(x, t)
"""


def test_vmap_of_an_extern_is_jax_vmap_of_its_function_not_a_loop_over_lanes():
    mod = arrc.loads(EXTERN_VMAP_SRC, filename="enc.arr", externs={"encoder": _encoder})
    xs, ts = R.normal(size=(5, 3, 4)).astype(np.float32), R.normal(size=(5, 3, 2)).astype(np.float32)
    assert "arrc.lanes" not in mod.per_example.lower(xs, ts).as_text()
    np.testing.assert_allclose(mod.per_shared(xs, ts[0]), jax.vmap(_jax_loss, in_axes=(0, None))(xs, ts[0]),
                               rtol=1e-6)
    np.testing.assert_allclose(mod.per_slope(xs, ts), jax.vmap(jax.grad(_jax_loss))(xs, ts), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(mod.total_slope(xs, ts),
                               jax.grad(lambda x, t: jnp.sum(jax.vmap(_jax_loss)(x, t)))(xs, ts), rtol=1e-5, atol=1e-7)
    x4, t4 = R.normal(size=(2, 5, 3, 4)).astype(np.float32), R.normal(size=(2, 5, 3, 2)).astype(np.float32)
    np.testing.assert_allclose(mod.nested(x4, t4), jax.vmap(jax.vmap(_jax_loss))(x4, t4), rtol=1e-6)


def test_a_fault_inside_an_extern_under_vmap_names_the_lane():
    """Guarded, the extern's lanes run one by one (`lax.map`), so the report gives the lane and the index
    inside it, as for arr's own operations (docs/vmap.md)."""
    mod = arrc.loads("extern def enc(x: f32[n]) -> f32[n]\n\ndef f(x: f32[n]) -> f32:\n    y = x - 1.0\n"
                     "    return sum(enc(y))\n\ndef g(xs: f32[b, n]) -> f32[b]:\n    return vmap(f)(xs)\n",
                     filename="model.arr", externs={"enc": _shifted_log}, guards="nan")
    with pytest.raises(arrc.NaNError) as info:
        mod.g(np.array([[2.0, 3.0], [2.0, 0.5]], np.float32))
    assert str(info.value).splitlines()[-4:] == [
        f"{' ' * len(str(_shifted_log.__code__.co_firstlineno + 1))} |",
        f"{' ' * len(str(_shifted_log.__code__.co_firstlineno + 1))} = note: operands at [1]: (x - 1.0) = -0.5",
        f"{' ' * len(str(_shifted_log.__code__.co_firstlineno + 1))} = note: in lane 1 of vmap(f)",
        f"{' ' * len(str(_shifted_log.__code__.co_firstlineno + 1))} = note: in enc, called from vmap(f) at "
        "model.arr:5:16, called from g at model.arr:8:12"]
    assert "this `log` produced NaN at index [1]" in str(info.value)
    np.testing.assert_allclose(mod.g(np.array([[2.0, 3.0], [3.0, 4.0]], np.float32)),
                               [2 * np.log(2.0), 2 * np.log(6.0)], rtol=1e-6)


def test_jax_arrays_cross_without_a_copy_and_numpy_arrays_are_copied():
    """A jax.Array on the function's device is passed as it is; a NumPy array is copied, aligned or not: jaxlib
    would make a 64-byte-aligned one's memory the device buffer on the CPU, which a write after the call
    changed under the program still running (docs/interop.md)."""
    mod = arrc.loads("def f(x: f32[n]) -> f32[n]:\n    return x * 2.0\n")
    mod.f(np.ones(4, np.float32))
    executable = next(iter(mod.f._compiled.values()))[0].executable
    on_device = jax.device_put(np.arange(256, dtype=np.float32))
    assert executable.put([on_device])[0] is on_device
    raw = np.arange(1024 + 64, dtype=np.uint8)
    start = (-raw.ctypes.data) % 64
    for offset in (0, 4):           # aligned, not aligned
        host = raw[start + offset:start + offset + 1020].view(np.float32)
        moved = executable._put_numpy(host)
        assert moved.unsafe_buffer_pointer() != host.ctypes.data
        np.testing.assert_array_equal(np.asarray(moved), host)


def test_as_jax_warns_of_a_derivative_only_when_jax_differentiates():
    """W0004 (a `while` differentiated by recomputation) comes with `jax.grad`, not with `as_jax()` or a call
    under jax.jit: the derivatives are made when JAX asks for them."""
    import warnings
    mod = arrc.loads("def f(x: f32) -> f32:\n    while x < 10.0:\n        x = x * 2.0\n    return x\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f = mod.f.as_jax()
        assert float(jax.jit(f)(1.5)) == 12.0 and not caught
        assert float(jax.grad(f)(1.5)) == 8.0
    assert caught and all(str(w.message).startswith("warning[W0004]") for w in caught)
    assert {w.filename for w in caught} == {__file__}       # the user's line, not arrc/interop.py's (JAX calls it)


def test_a_parameter_left_to_its_default_under_jax_and_the_python_api():
    """`as_jax()` and the Python API bind as a call does: defaults filled, keywords placed. Before:
    IndexError under jax.grad/jvp, and `lower`, `compile`, `arrc.grad` refused the call."""
    mod = arrc.loads("def f(x: f64[n], eps: f64 = 0.5) -> f64:\n    return sum(x * x) * eps\n")
    def twin(x, eps=0.5):
        return jnp.sum(x * x) * eps
    x = np.arange(3.0)
    with jax.enable_x64(True):
        np.testing.assert_allclose(jax.grad(mod.f.as_jax())(x), jax.grad(twin)(x))
        np.testing.assert_allclose(jax.jvp(mod.f.as_jax(), (x,), (x,))[1], jax.jvp(twin, (x,), (x,))[1])
        np.testing.assert_allclose(jax.jit(mod.f.as_jax())(x, eps=2.0), twin(x, 2.0))
        np.testing.assert_allclose(arrc.grad(mod.f)(x), jax.grad(twin)(x))
    assert arrc.grad(mod.f).signature == "(x: f64[n], eps: f64 = 0.5) -> f64[n]"
    assert [str(t) for t in mod.f.lower(arrc.spec("f64[4]")).arg_types] == ["f64[4]", "f64"]


def test_jax_names_the_arguments_by_their_arr_names_and_takes_static_argnames(mod):
    """`as_jax()` has f's Python signature: JAX's own messages said `argument args` and `argument kwargs`
    for the two arguments of a vmap whose sizes disagree, and `static_argnames` named nothing."""
    layer = mod.layer.as_jax()
    with pytest.raises(ValueError, match=r"(?s)size 3: axis 0 of argument x .*size 2: axis 0 of argument w "):
        jax.vmap(layer)(np.ones((3, 2, 4), np.float32), np.ones((2, 4, 3), np.float32))
    k = arrc.loads("def f(x: f32[m], n: i32 = 2) -> f32[m]:\n    return x * n\n").f.as_jax()
    np.testing.assert_array_equal(jax.jit(k, static_argnames="n")(np.ones(2, np.float32), n=3), [3.0, 3.0])
    np.testing.assert_array_equal(jax.jit(k)(np.ones(2, np.float32)), [2.0, 2.0])


def test_a_python_scalar_is_checked_as_a_call_checks_it():
    """`as_jax()(2.5)` for an i32 parameter gave 2.5 truncated, `(True)` 1, and `jax.jit(...)(300)` for an i8
    45; a call of the function refuses each. Under jax.jit a traced scalar's kind is checked (its value is
    not known yet)."""
    mod = arrc.loads("def twice(x: i32) -> i32:\n    return x * 2\ndef inc(x: i8) -> i8:\n    return x + 1\n"
                     "def half(x: f32) -> f32:\n    return x * 0.5\n")
    for call in (lambda: mod.twice.as_jax()(2.5), lambda: jax.jit(mod.twice.as_jax())(2.5),
                 lambda: mod.twice.as_jax()(True), lambda: mod.inc.as_jax()(300), lambda: mod.twice(2.5)):
        with pytest.raises(arrc.ArgumentError, match="argument `x`"):
            call()
    assert int(mod.twice.as_jax()(3)) == int(jax.jit(mod.twice.as_jax())(3)) == 6
    assert float(jax.jit(mod.half.as_jax())(3)) == 1.5 and float(jax.grad(mod.half.as_jax())(3.0)) == 0.5


def test_with_jaxs_64_bit_mode_off_arguments_are_checked_as_a_call_checks_them():
    """With JAX's 64-bit mode off, `as_jax()` narrowed NumPy's int64 for an i32 parameter (2**40 + 5 gave 6) and
    float64 for an f32 one, and refused float64 for an f64 parameter as "f32" (JAX had narrowed it). Called
    eagerly it now checks and keeps dtypes as a call does; under a JAX transformation, where JAX narrows 64-bit
    values before arr sees them, the error says so."""
    mod = arrc.loads("def ii(x: i32[n]) -> i32[n]:\n    return x + 1\ndef h(x: f32[n]) -> f32[n]:\n    return x * 2.0\n"
                     "def g(x: f64[n]) -> f64[n]:\n    return x * 2.0\ndef s(x: f64) -> f64:\n    return x * 3.0\n")
    x = np.array([1.0 + 2.0 ** -40, 3.0])          # (not an f32)
    want_g, want_s = jnp.asarray(x) * 2.0, jnp.float64(1.0 + 2.0 ** -40) * 3.0       # (x64 is on here)
    with jax.enable_x64(False):
        for f, arg in ((mod.ii, np.array([2 ** 40 + 5])), (mod.h, x)):
            with pytest.raises(arrc.ArgumentError) as plain:
                f(arg)
            with pytest.raises(arrc.ArgumentError) as under_jax:
                f.as_jax()(arg)
            assert str(under_jax.value) == str(plain.value)
        got_g, got_s = mod.g.as_jax()(x), mod.s.as_jax()(1.0 + 2.0 ** -40)
        for call in (lambda: jax.jit(mod.g.as_jax())(x), lambda: jax.jit(mod.s.as_jax())(1.5),
                     lambda: jax.grad(mod.s.as_jax())(1.5)):
            with pytest.raises(arrc.ArgumentError, match="JAX's 64-bit mode is off .* the value arrived as f32"):
                call()
    assert got_g.dtype == got_s.dtype == np.float64
    np.testing.assert_array_equal(got_g, want_g)
    assert float(got_s) == float(want_s)


def test_symbolic_dimensions_are_an_argument_error():
    """`jax.export` of `as_jax` for `jax.export.symbolic_shape("b")` rows, and `lower` of a ShapeDtypeStruct
    with them, were JAX's InconclusiveDimensionOperation ("Symbolic dimension 'b' used in a context that
    requires a constant") from arrc/api.py; under jax.vmap too. An export for fixed shapes runs."""
    mod = arrc.loads("def f(x: f32[n], y: f32[n]) -> f32[n]:\n    return x * y + 1.0\n")
    b, = jax.export.symbolic_shape("b")
    rows, pair = jax.ShapeDtypeStruct((b,), np.float32), jax.ShapeDtypeStruct((b, 4), np.float32)
    tail = (": an arr function is compiled for concrete sizes, and symbolic dimensions (jax.export.symbolic_shape) "
            "are not supported here: give fixed shapes (under jax.export, an export per set of sizes)")
    for call, message in (
            (lambda: jax.export.export(jax.jit(mod.f.as_jax()))(rows, rows), "argument `x` has symbolic dimensions "
                                                                            "(b), expected f32[n]"),
            (lambda: mod.f.lower(jax.ShapeDtypeStruct((3,), np.float32), rows), "argument `y` has symbolic "
                                                                                "dimensions (b), expected f32[n]"),
            (lambda: jax.export.export(jax.jit(jax.vmap(mod.f.as_jax())))(pair, pair),
             "argument `x` has symbolic dimensions (b), expected f32[lanes, n]")):
        with pytest.raises(arrc.ArgumentError) as err:
            call()
        assert str(err.value) == message + tail
    exported = jax.export.export(jax.jit(mod.f.as_jax()))(*[jax.ShapeDtypeStruct((3,), np.float32)] * 2)
    np.testing.assert_array_equal(exported.call(np.arange(3, dtype=np.float32), np.ones(3, np.float32)),
                                  [1.0, 2.0, 3.0])


def test_functions_given_to_jax_are_freed_with_their_modules(capfd):
    """Fresh modules through `as_jax` eagerly and under jax.jit, jax.grad, jax.jvp and jax.vmap (a function
    that prints too: its host callbacks), then dropped: each module and Function is freed, with nothing cleared:
    one JAX primitive calls every arr function, so JAX's registries of primitives' rules do not grow per
    function, and what is made for a function (its programs, vmaps, eager executables) dies with it. Only
    `jax.vmap` of a derivative called eagerly (a `lax.map` over the lanes: arr's vmap does not take it) waits
    for `jax.clear_caches()`: JAX's cache of the primitives it runs eagerly keeps their jaxprs (its `scan`'s)."""
    import gc
    import weakref
    from jax._src.interpreters import ad, batching, mlir

    def registries():
        return len(mlir._lowerings), len(batching.fancy_primitive_batchers), len(ad.primitive_transposes)

    def modules():
        gc.collect()
        return sum(isinstance(o, arrc.api.Module) for o in gc.get_objects())

    def use(i, lanes_of_a_derivative=False):
        m = arrc.loads(f"def f(x: f32[n]) -> f32:\n    return sum(tanh(x * {i}.5))\n\n"
                       f"def p(x: f32[n]) -> f32[n]:\n    print(\"p\", {i})\n    return x * 2.0\n")
        f, p = m.f.as_jax(), m.p.as_jax()
        x = np.linspace(0.0, 1.0, 4, dtype=np.float32)
        if lanes_of_a_derivative:
            jax.vmap(jax.grad(f))(np.stack([x, x]))
        else:
            f(x), jax.grad(f)(x), jax.jit(jax.grad(f))(x), jax.jvp(f, (x,), (x,))
            jax.vmap(f)(np.stack([x, x])), jax.jit(jax.vmap(jax.grad(f)))(np.stack([x, x]))
            p(x), jax.jit(p)(x), jax.grad(lambda x: jnp.sum(p(x)))(x)
        return weakref.ref(m), weakref.ref(m.f), weakref.ref(m.p)

    use(-1), use(-1, lanes_of_a_derivative=True)
    jax.clear_caches()
    before, count = registries(), modules()
    capfd.readouterr()
    refs = [use(i) for i in range(30)]
    assert registries() == before
    assert modules() == count               # (the modules of their vmaps too)
    assert [r for r in (r for three in refs for r in three) if r() is not None] == []
    assert capfd.readouterr().out.count("p ") == 30 * 3       # (eagerly, under jax.jit, jax.grad's forward pass)
    refs = [use(i, lanes_of_a_derivative=True) for i in range(3)]
    jax.clear_caches()
    assert modules() == count


def test_linear_algebra_under_jax_in_a_process_whose_lowering_came_from_the_compile_cache(tmp_path):
    """jaxlib's LAPACK kernels have no function pointers until someone initializes them: a `solve` whose lowering
    came from the compile cache (a second process) made JAX's executable segfault when nothing else had."""
    import subprocess
    import sys
    child = ("import jax, numpy as np, arrc\n"
             "m = arrc.loads('def f(a: f64[3, 3], b: f64[3]) -> f64[3]:\\n    return solve(a, b)\\n')\n"
             "a = np.eye(3) * 2.0\n"
             "print(jax.jit(m.f.as_jax())(a, np.ones(3)).tolist())\n")
    env = {**os.environ, "ARRC_CACHE_DIR": str(tmp_path), "JAX_ENABLE_X64": "1"}
    runs = [subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=300, env=env)
            for _ in range(2)]         # (the first fills the cache)
    assert [(r.returncode, r.stdout) for r in runs] == [(0, "[0.5, 0.5, 0.5]\n")] * 2, runs[1].stderr[-2000:]
