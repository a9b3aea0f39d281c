"""Reverse-mode autodiff (LANGUAGE.md section 15), first step: `arrc.grad` / `arrc.value_and_grad` of
straight-line functions against `jax.grad` / `jax.value_and_grad` (x64 on, see conftest), at random f64
points and at special ones (ties, zeros); second derivatives; guards in the backward pass; refusals."""
from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import arrc

# (arr body over x: f64[4], y: f64[4], jax twin): each a float scalar of x and y
CASES = {
    "arith": ("sum(x * y - x / (y * y + 1.0) + 3.0 * x)", lambda x, y: jnp.sum(x * y - x / (y * y + 1.0) + 3.0 * x)),
    "exp_log": ("sum(exp(x) * log(y * y + 1.0)) - mean(log1p(x * x)) + sum(expm1(y))",
                lambda x, y: jnp.sum(jnp.exp(x) * jnp.log(y * y + 1.0)) - jnp.mean(jnp.log1p(x * x))
                + jnp.sum(jnp.expm1(y))),
    "trig": ("sum(sin(x) * cos(y) + tanh(x * y))", lambda x, y: jnp.sum(jnp.sin(x) * jnp.cos(y) + jnp.tanh(x * y))),
    "sigmoid": ("sum(sigmoid(x) * y)", lambda x, y: jnp.sum(jax.nn.sigmoid(x) * y)),
    "sqrt_abs": ("sum(sqrt(x * x + 1.0)) + sum(abs(y)) + sum(rsqrt(y * y + 2.0))",
                 lambda x, y: jnp.sum(jnp.sqrt(x * x + 1.0)) + jnp.sum(jnp.abs(y)) + jnp.sum(jax.lax.rsqrt(y * y + 2.0))),
    "power": ("sum((x * x + 1.0) ** y) + sum(x ** 3)", lambda x, y: jnp.sum((x * x + 1.0) ** y) + jnp.sum(x ** 3)),
    "max_min": ("sum(maximum(x, y) - minimum(x, 0.5)) + max(x) - min(y)",
                lambda x, y: jnp.sum(jnp.maximum(x, y) - jnp.minimum(x, 0.5)) + jnp.max(x) - jnp.min(y)),
    "where": ("sum(where(x > 0.0, x * y, 0.1 * x))", lambda x, y: jnp.sum(jnp.where(x > 0.0, x * y, 0.1 * x))),
    "clip": ("sum(clip(x, -0.5, 0.5) * y)", lambda x, y: jnp.sum(jnp.clip(x, -0.5, 0.5) * y)),
    "shapes": ("sum(reshape(x, (2, 2)).T @ reshape(y, (2, 2))) + sum(x[1:3] * y[::2]) + sum(concat((x, y)) ** 2)",
               lambda x, y: jnp.sum(x.reshape(2, 2).T @ y.reshape(2, 2)) + jnp.sum(x[1:3] * y[::2])
               + jnp.sum(jnp.concatenate([x, y]) ** 2)),
    "broadcast": ("sum(reshape(x, (4, 1)) * y + x)", lambda x, y: jnp.sum(x.reshape(4, 1) * y + x)),
    "products": ("dot(x, y) + sum(outer(x, y) @ y) + sum(einsum('i,j->ij', x, y))",
                 lambda x, y: jnp.dot(x, y) + jnp.sum(jnp.outer(x, y) @ y) + jnp.sum(jnp.einsum("i,j->ij", x, y))),
    "logsumexp": ("logsumexp(x * y) + sum(softmax(x) * y)",
                  lambda x, y: jax.nn.logsumexp(x * y) + jnp.sum(jax.nn.softmax(x) * y)),
    "casts": ("sum(x.astype(f32).astype(f64) * y)", lambda x, y: jnp.sum(x.astype(jnp.float32).astype(jnp.float64) * y)),
    "half_casts": ("sum((x * y).astype(f16).astype(f64) + sin(x).astype(bf16).astype(f64) ** 2)",   # (rounded on
                   lambda x, y: jnp.sum((x * y).astype(jnp.float16).astype(jnp.float64)              # the f64's bits)
                                        + jnp.sin(x).astype(jnp.bfloat16).astype(jnp.float64) ** 2)),
}

POINTS = [np.array([0.3, -1.2, 2.0, 0.7]), np.array([1.5, 0.25, -0.4, -2.0])]


@pytest.fixture(scope="module")
def cases():
    src = "".join(f"def case_{name}(x: f64[4], y: f64[4]) -> f64:\n    return {body}\n\n"
                  for name, (body, _) in CASES.items())
    return arrc.loads(src)


@pytest.mark.parametrize("name", list(CASES))
def test_value_and_grad_matches_jax(cases, name):
    twin = CASES[name][1]
    rng = np.random.default_rng(len(name))
    for x, y in [POINTS, (rng.standard_normal(4), rng.standard_normal(4))]:
        value, (gx, gy) = arrc.value_and_grad(cases["case_" + name], argnums=(0, 1))(x, y)
        want_value, (wx, wy) = jax.value_and_grad(twin, argnums=(0, 1))(x, y)
        np.testing.assert_allclose(value, want_value, rtol=1e-13)
        np.testing.assert_allclose(gx, wx, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(gy, wy, rtol=1e-12, atol=1e-14)


def test_ties_and_singular_points_follow_jax(cases):
    x = np.array([1.0, 2.0, 2.0, 0.0])        # a max tie (split evenly) and a zero for abs and sqrt
    y = np.array([2.0, 2.0, -1.0, 0.0])       # maximum(x, y) ties
    for name in ("max_min", "sqrt_abs", "where"):
        got = arrc.grad(cases["case_" + name], argnums=(0, 1))(x, y)
        want = jax.grad(CASES[name][1], argnums=(0, 1))(x, y)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)
    mod = arrc.loads("def f(x: f64[2]) -> f64:\n    return sum(sqrt(x))\n")
    assert np.asarray(arrc.grad(mod.f)(np.array([0.0, 4.0]))).tolist() == [np.inf, 0.25]    # sqrt'(0) = inf


def test_power_at_zero_follows_jax_for_integer_and_float_exponents():
    """d(x ** y)/dx at x = y = 0: 0 for an integer exponent (jax's integer_pow, and pow of an integer array),
    NaN for a float one (jax's pow: y * x ** (y - 1) = 0 * inf)."""
    mod = arrc.loads("def f(x: f64[2], y: f64[2]) -> f64:\n    return sum(x ** y) + sum(x ** 0.0)\n\n"
                     "def h(x: f64[2], n: i32[2]) -> f64:\n    return sum(x ** n) + sum(x ** 0)\n")
    x, y, n = np.array([0.0, 2.0]), np.array([0.0, 0.0]), np.array([0, 2], np.int32)
    got = arrc.grad(mod.f, argnums=(0, 1))(x, y)
    want = jax.grad(lambda x, y: jnp.sum(x ** y) + jnp.sum(x ** 0.0), argnums=(0, 1))(x, y)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)          # [nan, 0.] and [0., log 2]
    np.testing.assert_array_equal(arrc.grad(mod.h)(x, n), jax.grad(lambda x: jnp.sum(x ** n) + jnp.sum(x ** 0))(x))


def test_higher_derivatives_of_an_integer_power_keep_jaxs_rule_at_zero():
    """`x ** 2` differentiated three times at 0 was NaN (JAX: 0): the derivative's own power, x ** 1 then
    x ** 0, was a float power, whose derivative 0 * x ** -1 is NaN at 0. A constant integer exponent is
    differentiated as jax's integer_pow at every order, an integer array as jax's pow of one."""
    mod = arrc.loads("def f(x: f64) -> f64:\n    return x ** 2 + 0.5 * x ** 3\n\n"
                     "def h(x: f64[3], n: i32[3]) -> f64:\n    return sum(x ** n)\n\n"
                     "def dh(x: f64[3], n: i32[3], v: f64[3]) -> f64:\n    return sum(grad(h)(x, n) * v)\n")
    d_arr, d_jax = mod.f, lambda x: x ** 2 + 0.5 * x ** 3
    for order in range(1, 5):
        d_arr, d_jax = arrc.grad(d_arr), jax.grad(d_jax)
        for x in (0.0, 1.5, -2.0):
            assert float(d_arr(x)) == float(d_jax(x)), (order, x)
    assert float(arrc.jvp(arrc.grad(arrc.grad(mod.f)))(0.0, 1.0)[1]) == 3.0
    x, n = np.array([0.0, 0.0, 2.0]), np.array([0, 1, 3], np.int32)
    for v in np.eye(3):         # (jax's pow of an integer array: NaN at 0 in reverse over reverse, as here)
        want = jax.grad(lambda x: jnp.sum(jax.grad(lambda x: jnp.sum(x ** n))(x) * v))(x)
        np.testing.assert_array_equal(arrc.grad(mod.dh)(x, n, v), want)


def test_jvp_of_a_gradient_through_a_taped_loop_of_an_integer_power_is_jaxs():
    """Forward over reverse through gradient steps (MAML-style), taped (9 iterations, or `bound=`): NaN
    where JAX gives a number, from the integer power's third derivative at 0."""
    mod = arrc.loads("""
def loss(w: f64) -> f64:
    return (w - 3.0) ** 2

def f(w: f64) -> f64:
    for i in range(9):
        w = w - 0.1 * grad(loss)(w)
    return loss(w)

def g(w: f64) -> f64:
    return grad(f)(w)
""", warnings="ignore")

    def jf(w):
        for _ in range(9):
            w = w - 0.1 * jax.grad(lambda w: (w - 3.0) ** 2)(w)
        return (w - 3.0) ** 2
    for w in (0.5, 3.0):
        np.testing.assert_allclose(arrc.jvp(mod.g)(w, 1.0)[1], jax.jvp(jax.grad(jf), (w,), (1.0,))[1], rtol=1e-12)


def test_the_mse_loss_of_the_spec():
    mod = arrc.loads("def loss(w: f64[d], x: f64[b, d], y: f64[b]) -> f64:\n    return mean((x @ w - y) ** 2)\n")
    rng = np.random.default_rng(1)
    w, x, y = rng.standard_normal(3), rng.standard_normal((5, 3)), rng.standard_normal(5)
    g = arrc.grad(mod.loss)
    assert g.signature == "(w: f64[d], x: f64[b, d], y: f64[b]) -> f64[d]"
    np.testing.assert_allclose(g(w, x, y), jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w), rtol=1e-12)
    lowered = g.lower(arrc.spec("f64[3]"), arrc.spec("f64[5, 3]"), arrc.spec("f64[5]"))
    assert "vjp(dot_general)" in lowered.as_text(debug_info=True)          # adjoint ops are named after their forward op


def test_second_derivatives():
    mod = arrc.loads("def f(x: f64) -> f64:\n    return sin(x) * x ** 3\n")
    d2 = arrc.grad(arrc.grad(mod.f))
    for x in (0.5, -1.3, 2.0):
        np.testing.assert_allclose(d2(x), jax.grad(jax.grad(lambda x: jnp.sin(x) * x ** 3))(x), rtol=1e-12)


def test_float32_gradients():
    mod = arrc.loads("def f(x: f32[3]) -> f32:\n    return sum(exp(x) * x)\n")
    x = np.array([0.1, -0.5, 1.0], np.float32)
    got = arrc.grad(mod.f)(x)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, jax.grad(lambda x: jnp.sum(jnp.exp(x) * x))(x), rtol=1e-6)


def test_bfloat16_integer_powers_differentiate_as_jax():
    # the constant exponent of `x ** 2` is read back to keep jax's integer_pow rule; NumPy cannot read a
    # bf16 constant's buffer (it was a TypeError traceback from grad, jvp and grad in the language)
    mod = arrc.loads("def f(x: bf16[3]) -> bf16:\n    return sum(x ** 2 + x ** 3)\n"
                     "def g(x: bf16[3]) -> bf16[3]:\n    return grad(f)(x)\n")
    x = jnp.asarray([1.0, -2.0, 3.0], jnp.bfloat16)
    want = jax.grad(lambda x: jnp.sum(x ** 2 + x ** 3))(x)
    for got in (arrc.grad(mod.f)(x), mod.g(x), arrc.jvp(mod.f)(x, jnp.ones(3, jnp.bfloat16))[1]):
        assert got.dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(arrc.grad(mod.f)(x), np.float64), np.asarray(want, np.float64))
    np.testing.assert_array_equal(np.asarray(mod.g(x), np.float64), np.asarray(want, np.float64))


def test_a_bitcast_has_a_zero_derivative_as_jaxs():
    # jax: ad.defjvp_zero(bitcast_convert_type_p); arrc refused it (E0216) though a float read as bits
    # carries no derivative
    mod = arrc.loads("def f(x: f64[3]) -> f64:\n    return sum(bitcast(bitcast(x, i64) + 1, f64) * x * x)\n"
                     "def g(x: f64[3]) -> f64:\n    return sum(grad(f)(x))\n")
    x = np.array([0.5, -1.0, 2.0])

    def f(x):
        return jnp.sum(jax.lax.bitcast_convert_type(jax.lax.bitcast_convert_type(x, jnp.int64) + 1, jnp.float64) * x * x)
    np.testing.assert_allclose(arrc.grad(mod.f)(x), jax.grad(f)(x), rtol=1e-12)
    np.testing.assert_allclose(mod.g(x), jnp.sum(jax.grad(f)(x)), rtol=1e-12)
    np.testing.assert_allclose(arrc.jvp(mod.f)(x, np.ones(3))[1], jax.jvp(f, (x,), (np.ones(3),))[1], rtol=1e-12)


def test_guards_cover_the_backward_pass_and_blame_the_forward_operation():
    mod = arrc.loads("def f(x: f64[2]) -> f64:\n    y = sqrt(x)\n    return sum(y)\n", guards="nan,inf")
    g = arrc.grad(mod.f)
    np.testing.assert_allclose(g(np.array([1.0, 4.0])), [0.5, 0.25])
    with pytest.raises(arrc.InfError) as err:
        g(np.array([1.0, 0.0]))
    assert err.value.diagnostic.span.line == 2                # `y = sqrt(x)`: the forward operation


def test_an_all_ops_guard_checks_only_the_derivatives_the_result_uses():
    """The cotangent of an exponent that is a constant or an argument the derivative is not taken with respect
    to (`log(base) * ans`, NaN for a negative base) is never used: it is not built, so `guard_scope="all-ops"`
    has nothing false to report (it did: "derivative of `power`")."""
    src = ("def loss(w: f64[4, 3], x: f64[5, 4], p: f64) -> f64:\n"
           "    return mean(tanh(x @ w) ** 2.0) + sum(w ** 3) + sum(tanh(x @ w) ** p)\n")
    mod = arrc.loads(src, guards="nan", guard_scope="all-ops")
    w, x = np.random.default_rng(0).normal(size=(4, 3)), np.random.default_rng(1).normal(size=(5, 4))
    twin = lambda w: jnp.mean(jnp.tanh(x @ w) ** 2.0) + jnp.sum(w ** 3) + jnp.sum(jnp.tanh(x @ w) ** 2.0)  # noqa
    np.testing.assert_allclose(arrc.grad(mod.loss)(w, x, 2.0), jax.grad(twin)(w), rtol=1e-12)
    assert "stablehlo.log" not in arrc.grad(mod.loss).lower(w, x, 2.0).as_text()


def test_inside_loops_and_branches_too():
    """The sweep of a taped loop's body or a branch builds cotangents only for the values the enclosing sweep
    varies: not for a constant or an argument outside `argnums` (as `q` here), which it reported as NaN."""
    src = ("def f(x: f64[3], n: i32, q: f64) -> f64:\n    y = x\n    p = 2.0\n"
           "    for i in range(n, bound=8):\n        y = tanh(y) ** p - 0.5 + y ** q\n"
           "    if n > 2:\n        y = y ** 3.0\n    return sum(y)\n")
    mod = arrc.loads(src, guards="nan", guard_scope="all-ops")
    x = np.array([-0.7, 0.3, 1.2])

    def twin(x):
        for _ in range(3):
            x = jnp.tanh(x) ** 2.0 - 0.5 + x ** 2.0
        return jnp.sum(x ** 3.0)
    np.testing.assert_allclose(arrc.grad(mod.f)(x, 3, 2.0), jax.grad(twin)(x), rtol=1e-12)
    assert "stablehlo.log" not in arrc.grad(mod.f).lower(x, 3, 2.0).as_text()


def test_a_carried_value_only_constants_feed_gets_no_cotangent():
    """A loop's carried exponent that only constants make (`e`) needs no cotangent; one the varied values
    feed (`z`) does: which carried values vary is found to a fixpoint over the body."""
    src = ("def f(x: f64[3], n: i32) -> f64:\n    y = x\n    e = 2.0\n    z = 0.0\n"
           "    for i in range(n, bound=8):\n        y = y ** e + z\n        z = z + sum(y) * 0.1\n"
           "        e = e * 1.0\n    return sum(y) + z\n")
    mod = arrc.loads(src, guards="nan", guard_scope="all-ops")
    x = np.array([-0.7, 0.3, 1.2])

    def twin(x):
        z = 0.0
        for _ in range(3):
            x = x ** 2.0 + z
            z = z + jnp.sum(x) * 0.1
        return jnp.sum(x) + z
    np.testing.assert_allclose(arrc.grad(mod.f)(x, 3), jax.grad(twin)(x), rtol=1e-12)


def test_what_cannot_be_differentiated_is_a_diagnostic():
    mod = arrc.loads("def vec(x: f64[2]) -> f64[2]:\n    return x\n"
                     "def count(n: i32, x: f64) -> f64:\n    return x * n\n")
    with pytest.raises(TypeError, match="one float scalar result; vec"):
        arrc.grad(mod.vec)
    with pytest.raises(TypeError, match="with respect to `n`: it is i32"):
        arrc.grad(mod.count)
    with pytest.raises(ValueError, match="argnums 2 is out of range"):
        arrc.grad(mod.count, argnums=2)
    for bad in ("x", True, 1.0, (1, False)):         # (JAX's rule: integers, NumPy's too, not bools)
        with pytest.raises(TypeError, match="argnums must be an int or a tuple"):
            arrc.grad(mod.count, argnums=bad)


def test_argnums_takes_numpy_integers_as_jax_grad_does():
    mod = arrc.loads("def f(x: f64[2], y: f64[2]) -> f64:\n    return sum(x * y * y)\n")
    x, y = np.array([0.5, -1.5]), np.array([2.0, 3.0])
    twin = lambda x, y: jnp.sum(x * y * y)      # noqa: E731
    np.testing.assert_allclose(arrc.grad(mod.f, argnums=np.int64(1))(x, y), jax.grad(twin, argnums=1)(x, y))
    for got, want in zip(arrc.grad(mod.f, argnums=(np.int32(0), -1))(x, y), jax.grad(twin, argnums=(0, 1))(x, y)):
        np.testing.assert_allclose(got, want)


def test_argnums_none_is_refused_for_grad_and_value_and_grad():
    """`arrc.grad(f, argnums=None)` differentiated with respect to every argument without a word (JAX refuses
    None); vjp and jvp, which take no argnums, still cover every argument."""
    mod = arrc.loads("def f(x: f64[2], y: f64) -> f64:\n    return sum(x) * y\n")
    for transform in (arrc.grad, arrc.value_and_grad):
        with pytest.raises(TypeError, match="argnums must be an int or a tuple of ints, not None"):
            transform(mod.f, argnums=None)
    assert len(arrc.vjp(mod.f)([1.0, 2.0], 3.0, 1.0)[1]) == 2


def test_run_time_indexing():
    mod = arrc.loads("def f(x: f64[5], i: i32) -> f64:\n    return x[i] * x[1] + sum(x[i:i + 2] ** 2)\n")
    x = np.arange(5.0) + 0.5
    for i in (0, 3, 4):          # i + 2 > 5 at 4: the slice is clamped into range, as lax.dynamic_slice does
        twin = lambda x: x[i] * x[1] + jnp.sum(jax.lax.dynamic_slice(x, (i,), (2,)) ** 2)   # noqa: B023
        np.testing.assert_allclose(arrc.grad(mod.f)(x, i), jax.grad(twin)(x), rtol=1e-13)



WHILE = arrc.loads("""
def grow(x: f64, limit: f64) -> f64:
    y = x
    while y < limit:
        y = y * 1.5 + sin(x)
    return y * x

def slope(x: f64, limit: f64) -> f64:
    return grad(grow)(x, limit)
""")


def test_while_loops_by_recomputation():
    def twin(x, limit):              # jax.grad follows Python control flow on concrete values
        y = x
        while y < limit:
            y = y * 1.5 + jnp.sin(x)
        return y * x
    for x, limit in ((1.3, 0.5), (1.3, 2.0), (1.3, 3.0), (0.7, 40.0)):       # 0, 1, 2 and 8 iterations
        want = jax.grad(twin)(x, limit)
        np.testing.assert_allclose(arrc.grad(WHILE.grow)(x, limit), want, rtol=1e-13)
        np.testing.assert_allclose(WHILE.slope(x, limit), want, rtol=1e-13)


GATHERS = arrc.loads("""
def gathers(x: f64[6], idx: i32[4], m: f64[2, 6]) -> f64:
    return sum(x[idx] ** 2) + sum(m[:, idx] * x[idx])

def stores(x: f64[6], idx: i32[4], v: f64[4]) -> f64:
    y = x
    y[idx] = v * x[idx]
    y[2] = x[0] * 3.0
    y[4:6] += v[0:2]
    return sum(y * y * x)

def sorts(x: f64[6]) -> f64:
    v, i = top_k(x, 3)
    return sum(sort(x) * arange(6.0)) + sum(v * v)

def products(x: f64[3, 4]) -> f64:
    return sum(prod(x, axis=1)) + prod(x) + sum(prod(x, axis=0) ** 2)

def scans(x: f64[3, 4]) -> f64:
    return sum(cumsum(x, axis=1) ** 2) + sum(cumsum(x) * reshape(x, (12,))) + sum(cumprod(x, axis=1) * cos(x)) \
        + sum(cumprod(x)) + sum(cummax(x, axis=1) * cos(x)) + sum(cummin(x, axis=0) ** 2)

def shapes(x: f64[3, 4]) -> f64:
    return sum(flip(x, axis=1) * x) + sum(pad(x, ((1, 2), (0, 1)), constant_values=0.5) ** 2)

def more_math(x: f64[5], y: f64[5]) -> f64:
    return sum(tan(x) + cbrt(y) + sinh(x) * cosh(y) + asin(x / 2.0) + acos(x / 3.0) + atan(y) + erf(x * y)
               + atan2(x, y) + x % y)
""")


def test_gathers_and_indexed_updates():
    rng = np.random.default_rng(5)
    x, m, v = rng.standard_normal(6), rng.standard_normal((2, 6)), rng.standard_normal(4)
    for idx in ([1, 3, 1, 5], [-1, 0, 0, 0], [5, 4, 3, 2]):      # repeated indices: gathers accumulate
        i = np.array(idx, np.int32)

        def gathers(x, m):
            return jnp.sum(x[i] ** 2) + jnp.sum(m[:, i] * x[i])

        def stores(x, v):            # of repeated stores the last one wins, and only it has a derivative
            y = x.at[i].set(v * x[i]).at[2].set(x[0] * 3.0)
            y = y.at[4:6].add(v[0:2])
            return jnp.sum(y * y * x)
        for got, want in zip(arrc.grad(GATHERS.gathers, argnums=(0, 2))(x, i, m), jax.grad(gathers, (0, 1))(x, m)):
            np.testing.assert_allclose(got, want, rtol=1e-13)
        for got, want in zip(arrc.grad(GATHERS.stores, argnums=(0, 2))(x, i, v), jax.grad(stores, (0, 1))(x, v)):
            np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)


def test_sorts_products_and_scans():
    rng = np.random.default_rng(6)
    x = rng.standard_normal(6)
    np.testing.assert_allclose(arrc.grad(GATHERS.sorts)(x), jax.grad(
        lambda x: jnp.sum(jnp.sort(x) * jnp.arange(6.0)) + jnp.sum(jax.lax.top_k(x, 3)[0] ** 2))(x), rtol=1e-13)
    m = rng.standard_normal((3, 4))
    m[1, 2] = m[2, 0] = m[2, 3] = 0.0               # prod's derivative at zeros: the product of the others
    np.testing.assert_allclose(arrc.grad(GATHERS.products)(m), jax.grad(
        lambda x: jnp.sum(jnp.prod(x, axis=1)) + jnp.prod(x) + jnp.sum(jnp.prod(x, axis=0) ** 2))(m),
        rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(arrc.grad(GATHERS.scans)(m), jax.grad(       # cumprod: exact at the zeros
        lambda x: jnp.sum(jnp.cumsum(x, axis=1) ** 2) + jnp.sum(jnp.cumsum(x) * x.reshape(12))
        + jnp.sum(jnp.cumprod(x, axis=1) * jnp.cos(x)) + jnp.sum(jnp.cumprod(x))
        + jnp.sum(jax.lax.cummax(x, axis=1) * jnp.cos(x)) + jnp.sum(jax.lax.cummin(x, axis=0) ** 2))(m),
        rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(arrc.grad(GATHERS.shapes)(m), jax.grad(
        lambda x: jnp.sum(jnp.flip(x, axis=1) * x) + jnp.sum(jnp.pad(x, ((1, 2), (0, 1)), constant_values=0.5) ** 2))(m),
        rtol=1e-13)
    x, y = rng.uniform(-1, 1, 5), rng.uniform(0.5, 2, 5) * rng.choice([-1, 1], 5)
    twin = lambda x, y: jnp.sum(jnp.tan(x) + jnp.cbrt(y) + jnp.sinh(x) * jnp.cosh(y) + jnp.arcsin(x / 2)  # noqa: E731
                                + jnp.arccos(x / 3) + jnp.arctan(y) + jax.scipy.special.erf(x * y)
                                + jnp.arctan2(x, y) + x % y)
    for got, want in zip(arrc.grad(GATHERS.more_math, argnums=(0, 1))(x, y), jax.grad(twin, (0, 1))(x, y)):
        np.testing.assert_allclose(got, want, rtol=1e-13)



COMPOSITES = arrc.loads("""
def net(w: f64[4, 5], x: f64[3, 4], y: i32[3]) -> f64:
    h = tanh(x @ w)
    h = (h - mean(h, axis=1, keepdims=true)) / std(h, axis=1, keepdims=true)
    p = log_softmax(layer_norm(h * var(h)) + prod(w[0]))
    rows = p[:, y]
    return -mean(rows * one_hot(y, 5)[:, 0:3]) + sum(p[1][y])

def solve(a: f64[3, 3], b: f64[3]) -> f64:
    x = b
    r = b - a @ x
    while sum(r * r) > 1e-20:
        x = x + 0.5 * r
        r = b - a @ x
    top, where = top_k(x, 2)
    return sum(cumsum(sort(x)) * top[0])
""")


def central_difference(f, args: list, i: int, h: float = 1e-6):
    """d f / d args[i] by central differences, element by element."""
    x = np.asarray(args[i], np.float64)
    out = np.zeros_like(x)
    for j in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[j] += h
        down[j] -= h
        out[j] = (float(f(*args[:i], up, *args[i + 1:])) - float(f(*args[:i], down, *args[i + 1:]))) / (2 * h)
    return out


def test_composite_programs_agree_with_finite_differences():
    """Gathers, normalisation, reductions, a while loop that runs to convergence (its trip count depends on
    the values: the derivative is the fixed point's, which finite differences see too), sort and scans."""
    rng = np.random.default_rng(8)
    w, x, y = rng.standard_normal((4, 5)), rng.standard_normal((3, 4)), np.array([0, 4, 2], np.int32)
    for i in (0, 1):
        np.testing.assert_allclose(arrc.grad(COMPOSITES.net, argnums=i)(w, x, y),
                                   central_difference(COMPOSITES.net, [w, x, y], i), rtol=1e-6, atol=1e-8)
    a = np.eye(3) + 0.1 * rng.standard_normal((3, 3))
    b = rng.standard_normal(3)
    for i in (0, 1):
        np.testing.assert_allclose(arrc.grad(COMPOSITES.solve, argnums=i)(a, b),
                                   central_difference(COMPOSITES.solve, [a, b], i), rtol=1e-5, atol=1e-7)


LANGUAGE = """
def loss(w: f64[d], x: f64[b, d], y: f64[b]) -> f64:
    return mean((x @ w - y) ** 2)

def step(w: f64[d], x: f64[b, d], y: f64[b]) -> f64[d]:
    return w - 0.1 * grad(loss)(w, x, y)

def both(w: f64[d], x: f64[b, d], y: f64[b]) -> (f64, f64[d], f64[b, d]):
    l, gs = value_and_grad(loss, argnums=(0, 1))(w, x, y)
    return l, gs[0], gs[1]

def train(w: f64[d], x: f64[b, d], y: f64[b], steps: i32) -> f64[d]:
    for i in range(steps):
        w = w - 0.1 * grad(loss)(w, x, y)
    return w

def cube(x: f64) -> f64:
    return sin(x) * x ** 3

def slope(x: f64) -> f64:
    return grad(cube)(x)

def curvature(x: f64) -> f64:
    return grad(slope)(x)
"""


def test_grad_in_the_language():
    mod = arrc.loads(LANGUAGE)
    rng = np.random.default_rng(5)
    w, x, y = rng.standard_normal(3), rng.standard_normal((6, 3)), rng.standard_normal(6)
    jloss = lambda w, x, y: jnp.mean((x @ w - y) ** 2)      # noqa: E731
    np.testing.assert_allclose(mod.step(w, x, y), w - 0.1 * jax.grad(jloss)(w, x, y), rtol=1e-13)
    value, gw, gx = mod.both(w, x, y)
    want_value, (want_w, want_x) = jax.value_and_grad(jloss, argnums=(0, 1))(w, x, y)
    np.testing.assert_allclose(value, want_value, rtol=1e-13)
    np.testing.assert_allclose(gw, want_w, rtol=1e-12)
    np.testing.assert_allclose(gx, want_x, rtol=1e-12, atol=1e-15)
    trained = w
    for _ in range(7):                     # grad inside a loop with a run-time trip count, in the caller
        trained = trained - 0.1 * jax.grad(jloss)(trained, x, y)
    np.testing.assert_allclose(mod.train(w, x, y, 7), trained, rtol=1e-12)
    second = jax.grad(jax.grad(lambda x: jnp.sin(x) * x ** 3))
    for point in (0.7, -2.0):              # grad of a function that calls grad
        np.testing.assert_allclose(mod.curvature(point), second(point), rtol=1e-12)


def test_grad_diagnostics_in_the_language():
    cases = {
        "def f(x: f64[2]) -> f64[2]:\n    return x\ndef g(x: f64[2]) -> f64[2]:\n    return grad(f)(x)\n":
            "E0216]: `grad` needs a function with one float scalar result; `f` returns f64[2]",
        "def g(x: f64) -> f64:\n    return grad(sin)(x)\n": "E0210]: `grad` takes a module function by name",
        "def f(x: f64) -> f64:\n    return x\ndef g(x: f64) -> f64:\n    return grad(f, argnums=1)(x)\n":
            "E0204]: argnums 1 is out of range",
        "def f(x: f64) -> f64:\n    return x\ndef g(x: f64) -> f64:\n    return grad(f, argnums=x)(x)\n":
            "E0204]: `argnums` must be an integer literal",
        "def f(x: f64) -> f64:\n    return x\ndef g(x: f64) -> f64:\n    return grad(f, wrt=0)(x)\n":
            "E0103]: `grad` has no parameter `wrt`",
        "def f(x: f64) -> f64:\n    return grad(f)(x)\n": "E0104]: recursive call",
    }
    for src, message in cases.items():
        with pytest.raises(arrc.CompileError) as err:
            arrc.loads(src)
        assert message in str(err.value), (src, str(err.value))


def test_the_training_example_matches_jax():
    w, before, after = arrc.load("examples/train.arr").main()
    k_x, k_noise = jax.random.split(jax.random.key(7))
    x = jax.random.normal(k_x, (256, 3), jnp.float64)
    y = x @ jnp.array([1.5, -2.0, 0.5]) + 0.01 * jax.random.normal(k_noise, (256,), jnp.float64)
    loss = lambda w: jnp.mean((x @ w - y) ** 2)      # noqa: E731
    want = jnp.zeros(3)
    for _ in range(200):
        want = want - 0.1 * jax.grad(loss)(want)
    np.testing.assert_allclose(w, want, rtol=1e-10)
    np.testing.assert_allclose([before, after], [loss(jnp.zeros(3)), loss(want)], rtol=1e-9)
    assert after < 1e-3 < before


def test_the_pass_on_the_command_line(tmp_path, capsys):
    from arrc.cli import main as cli
    program = tmp_path / "loss.arr"
    program.write_text("def loss(x: f32[3]) -> f32:\n    return sum(sin(x))\n")
    assert cli(["compile", str(program), "--entry", "loss", "--passes", "value-and-grad", "--emit", "stablehlo"]) == 0
    text = capsys.readouterr().out
    assert "-> (tensor<f32>, tensor<3xf32>)" in text and '"vjp(sine)#' in text and "stablehlo.cosine" in text


BRANCHES = """
def pick(x: f64[3], c: bool) -> f64:
    s = sum(x)
    if c:
        y = sin(x) * s
    else:
        y = x * 2.0
    return sum(y)

def nested(x: f64[3], t: f64) -> f64:
    y = x * t
    if t > 0.5:
        y = y * y
        if t > 1.0:
            y = exp(y)
    elif t < -1.0:
        y = sin(y) + x
    return sum(y) * t
"""


def test_branches_with_run_time_conditions():
    mod = arrc.loads(BRANCHES)
    x = np.array([0.3, -1.2, 2.0])
    for c in (True, False):
        twin = lambda x: jnp.sum(jnp.sin(x) * jnp.sum(x)) if c else jnp.sum(x * 2.0)    # noqa: E731, B023
        np.testing.assert_allclose(arrc.grad(mod.pick)(x, c), jax.grad(twin)(x), rtol=1e-13)

    def nested(x, t):
        y = x * t
        if t > 0.5:
            y = y * y
            if t > 1.0:
                y = jnp.exp(y)
        elif t < -1.0:
            y = jnp.sin(y) + x
        return jnp.sum(y) * t
    for t in (0.7, 1.2, -2.0, 0.0):          # every path: each branch is recomputed in the backward `if`
        got = arrc.grad(mod.nested, argnums=(0, 1))(x, t)
        want = jax.grad(nested, argnums=(0, 1))(x, t)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-12)


LOOPS = """
def running(x: f64[2], w: f64) -> f64:
    s = 0.0
    for i in range(3):
        x = sin(x) * w
        s = s + sum(x)
    return s

def nest(x: f64[2], w: f64) -> f64:
    for i in range(2):
        for j in range(3):
            x = x * w + sin(x) * i
    return sum(x)

def never(x: f64[2]) -> f64:
    for i in range(0):
        x = x * 2.0
    return sum(x)
"""


def test_loops_with_compile_time_trip_counts():
    mod = arrc.loads(LOOPS)
    x, w = np.array([0.3, -1.1]), 1.3

    def running(x, w):
        s = 0.0
        for _ in range(3):
            x = jnp.sin(x) * w
            s = s + jnp.sum(x)
        return s

    def nest(x, w):
        for i in range(2):
            for _ in range(3):
                x = x * w + jnp.sin(x) * i
        return jnp.sum(x)
    for name, twin in (("running", running), ("nest", nest)):
        got = arrc.grad(mod[name], argnums=(0, 1))(x, w)
        want = jax.grad(twin, argnums=(0, 1))(x, w)
        for g, v in zip(got, want):
            np.testing.assert_allclose(g, v, rtol=1e-12)
    assert np.asarray(arrc.grad(mod.never)(x)).tolist() == [1.0, 1.0]



def _nest(depth: int) -> str:
    src = "def h(x: f64[3]) -> f64:\n    y = x\n"
    for d in range(depth):
        src += "    " * (d + 1) + f"for i{d} in range(8):\n"
    return src + "    " * (depth + 1) + "y = y + sin(y) * 0.001\n    return sum(y)\n"


def test_nested_short_loops_are_unrolled_within_a_budget():
    """A nest of `for i in range(8)` was unrolled at every level (depth 4: 138,668 operations and 10 s; depth
    5 ran for minutes): a loop is unrolled only where its copies, their own unrolled loops included, hold at
    most MAX_UNROLLED_OPS operations, and none that holds a loop left rolled (its copies would fuse nothing
    and each have a tape); the others are taped, as long loops. The derivatives stay jax.grad's."""
    x = np.array([0.3, -1.1, 2.0])
    for depth in (1, 2, 3, 4):
        f = arrc.grad(arrc.loads(_nest(depth)).h)
        text = f.lower(arrc.spec("f64[3]")).as_text(debug_info=False)
        assert ("stablehlo.while" in text) == (depth == 4)      # 8 ** 3 copies fit the budget, 8 ** 4 do not
        assert text.count(" = ") < 20_000
        want = jax.grad(lambda x: jnp.sum(jax.lax.fori_loop(0, 8 ** depth, lambda i, y: y + jnp.sin(y) * 0.001, x)))
        np.testing.assert_allclose(f(x), want(x), rtol=1e-12)
    f = arrc.grad(arrc.loads("def h(x: f64[3]) -> f64:\n    y = x\n    for i in range(2):\n        for j in range(20):\n"
                             "            y = y + sin(y) * 0.001\n    return sum(y)\n").h)
    assert "arrc.unrolled" not in f.lower(arrc.spec("f64[3]")).as_text(debug_info=False)
    want = jax.grad(lambda x: jnp.sum(jax.lax.fori_loop(0, 40, lambda i, y: y + jnp.sin(y) * 0.001, x)))
    np.testing.assert_allclose(f(x), want(x), rtol=1e-12)


TAPED = arrc.loads("""
def long(x: f64[3], w: f64[3, 3]) -> f64:
    s = x
    k = 0
    for i in range(400):
        s = tanh(w @ s + x * 0.01 * i)
        k = k + 1
        if k % 7 == 0:
            s = s * 0.5
    return sum(s * s)

def nested(x: f64[3], w: f64[3, 3]) -> f64:
    s = x
    for i in range(300):
        for j in range(2):
            s = sin(w @ s) + x
    return sum(s)
""")


def test_long_counted_loops_are_taped():
    """Past MAX_UNROLLED iterations a counted loop records its state (ints too: `k` picks the branch) in a
    tape and the backward loop reads it, against jax.grad of lax.fori_loop."""
    rng = np.random.default_rng(9)
    x, w = rng.standard_normal(3), 0.5 * rng.standard_normal((3, 3))

    def long(x, w):
        def body(i, c):
            s, k = c
            s, k = jnp.tanh(w @ s + x * 0.01 * i), k + 1
            return jnp.where(k % 7 == 0, s * 0.5, s), k
        s, _ = jax.lax.fori_loop(0, 400, body, (x, 0))
        return jnp.sum(s * s)

    def nested(x, w):
        s = jax.lax.fori_loop(0, 300, lambda i, s: jax.lax.fori_loop(0, 2, lambda j, s: jnp.sin(w @ s) + x, s), x)
        return jnp.sum(s)
    for name, twin in (("long", long), ("nested", nested)):
        for got, want in zip(arrc.grad(TAPED[name], argnums=(0, 1))(x, w), jax.grad(twin, argnums=(0, 1))(x, w)):
            np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-14)
    text = arrc.grad(TAPED.long).lower(arrc.spec("f64[3]"), arrc.spec("f64[3, 3]")).as_text(debug_info=False)
    assert "tensor<400x3xf64>" in text and "tensor<400xi32>" in text          # the tapes of s and of k




def test_tapes_past_the_memory_limit_fall_back_to_recomputation(monkeypatch):
    from arrc.compiler import types
    monkeypatch.setattr(types, "MAX_ARRAY_BYTES", 4096)          # the 300 x 3 f64 tape needs 7200 bytes
    rng = np.random.default_rng(11)
    x, w = rng.standard_normal(3), 0.5 * rng.standard_normal((3, 3))
    lowered = arrc.grad(TAPED.nested).lower(arrc.spec("f64[3]"), arrc.spec("f64[3, 3]")).as_text()
    assert "tensor<300x3xf64>" not in lowered and "tensor<2x3xf64>" in lowered      # the inner loop's tape fits

    def nested(x, w):
        s = jax.lax.fori_loop(0, 300, lambda i, s: jax.lax.fori_loop(0, 2, lambda j, s: jnp.sin(w @ s) + x, s), x)
        return jnp.sum(s)
    for got, want in zip(arrc.grad(TAPED.nested, argnums=(0, 1))(x, w), jax.grad(nested, argnums=(0, 1))(x, w)):
        np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-14)


BOUNDED = arrc.loads("""
def steps(x: f64[3], w: f64[3, 3], n: i32) -> f64:
    s = x
    for i in range(n, bound=50):
        s = tanh(w @ s + x * 0.01 * i)
    return sum(s * s)

def grow(x: f64, limit: f64) -> f64:
    y = x
    while y < limit, bound=10:
        y = y * 1.5 + sin(x)
    return y * x
""")


def test_loops_with_a_bound_are_taped_and_a_run_past_it_is_reported():
    """`bound=N` sizes a tape for a run-time trip count: exact up to N iterations; past N the call raises
    R0006 at the loop, with the iterations it ran."""
    rng = np.random.default_rng(10)
    x, w = rng.standard_normal(3), 0.5 * rng.standard_normal((3, 3))

    def steps(x, w, n):
        s = x
        for i in range(n):
            s = jnp.tanh(w @ s + x * 0.01 * i)
        return jnp.sum(s * s)
    for n in (0, 1, 49, 50):
        for got, want in zip(arrc.grad(BOUNDED.steps, argnums=(0, 1))(x, w, n), jax.grad(steps, (0, 1))(x, w, n)):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    for n in (51, 80):
        with pytest.raises(arrc.LoopBoundExceeded) as info:
            arrc.grad(BOUNDED.steps, argnums=(0, 1))(x, w, n)
        assert info.value.code == "R0006" and isinstance(info.value, arrc.GuardError)
        assert str(info.value).startswith(f"error[R0006]: this `for` loop ran {n} iterations, more than its "
                                          f"bound of 50\n --> <string>:4:5")
    np.testing.assert_allclose(BOUNDED.steps(x, w, 80), steps(x, w, 80), rtol=1e-12)   # not checked forward

    def grow(x, limit):
        y, k = x, 0
        while y < limit:
            y, k = y * 1.5 + jnp.sin(x), k + 1
        return y * x, k
    for limit in (0.5, 3.0, 40.0):              # 0, 1 and 7 iterations
        np.testing.assert_allclose(arrc.grad(BOUNDED.grow)(1.3, limit), jax.grad(lambda x: grow(x, limit)[0])(1.3),
                                   rtol=1e-12)
    with pytest.raises(arrc.LoopBoundExceeded, match=rf"`while` loop ran {grow(1.3, 1e6)[1]} iterations, more "
                                                     r"than its bound of 10"):
        arrc.grad(BOUNDED.grow)(1.3, 1e6)
    text = arrc.grad(BOUNDED.steps).lower(arrc.spec("f64[3]"), arrc.spec("f64[3, 3]"), arrc.spec("i32")).as_text()
    assert "tensor<50x3xf64>" in text                               # the tape of `s`
    assert BOUNDED.warnings == []                                   # W0004 is for loops without a bound


PAST_BOUND = arrc.loads("""
def inner(x: f64, n: i32) -> f64:
    y = x
    for i in range(n, bound=3):
        y = sin(y) * 1.1
    return y

def outer(x: f64, n: i32) -> f64:
    return inner(x, n) * 2.0

def pushed(x: f64, nf: f64) -> f64:
    return inner(x, i32(nf))

def main(x: f64, n: i32) -> f64:
    print("start", n)
    g = grad(outer)(x, n)
    print("gradient", g)
    return g

def second(x: f64, n: i32) -> f64:
    return grad(slope)(x, n)

def slope(x: f64, n: i32) -> f64:
    return grad(outer)(x, n)

def forward(x: f64, n: i32) -> f64:
    y, t = jvp(pushed, (x, f64(n)), (1.0, 0.0))
    return t
""", filename="past.arr")


def _inner(x, n):
    for _ in range(n):
        x = jnp.sin(x) * 1.1
    return x


def test_a_run_past_a_bound_is_reported_in_every_kind_of_derivative(capfd):
    """The report names the loop and the derivative it was in; what ran before it printed, what comes
    after does not (as after a failed assert). Every route: grad in arr, from Python, jvp (two reverse
    sweeps: the report must survive the second), vjp, a second derivative."""
    for n in (0, 3):
        assert PAST_BOUND.main(0.5, n) == pytest.approx(2 * float(jax.grad(_inner)(0.5, n)), rel=1e-12)
        assert PAST_BOUND.forward(0.5, n) == pytest.approx(
            float(jax.jvp(lambda x: _inner(x, n), (0.5,), (1.0,))[1]), rel=1e-12)
        assert PAST_BOUND.second(0.5, n) == pytest.approx(2 * float(jax.grad(jax.grad(_inner))(0.5, n)), rel=1e-12)
    capfd.readouterr()
    with pytest.raises(arrc.LoopBoundExceeded) as info:
        PAST_BOUND.main(0.5, 4)
    assert capfd.readouterr().out == "start 4\n"
    assert str(info.value) == """\
error[R0006]: this `for` loop ran 4 iterations, more than its bound of 3
 --> past.arr:4:5
  |
4 |     for i in range(n, bound=3):
  |     ^^^^^^^^^^^^^^^^^^^^^^^^^^^ ran 4 times; its derivative keeps a tape of 3
  |
  = note: in inner, called at past.arr:9:12, in the backward pass of grad(outer) at past.arr:16:9
  = help: raise the bound to at least 4 (`bound=` is the most iterations the loop runs), or remove it: the \
derivative is then computed by recomputation (exact, slower)
"""
    calls = {"arr jvp": lambda: PAST_BOUND.forward(0.5, 5),
             "arr second derivative": lambda: PAST_BOUND.second(0.5, 5),
             "arrc.grad": lambda: arrc.grad(PAST_BOUND.outer)(0.5, 5),
             "arrc.value_and_grad": lambda: arrc.value_and_grad(PAST_BOUND.outer)(0.5, 5),
             "arrc.jvp": lambda: arrc.jvp(PAST_BOUND.pushed)(0.5, 5.0, 1.0, 0.0),
             "arrc.vjp": lambda: arrc.vjp(PAST_BOUND.pushed)(0.5, 5.0, 1.0),
             "arrc.grad of arr's grad": lambda: arrc.grad(PAST_BOUND.slope)(0.5, 5)}
    for route, call in calls.items():
        with pytest.raises(arrc.LoopBoundExceeded, match="ran 5 iterations, more than its bound of 3"):
            call()
    PAST_BOUND.outer(0.5, 5)                                        # the function itself: nothing to check


NESTED_BOUND = arrc.loads("""
def inner(y: f64, n: i32) -> f64:
    for i in range(n, bound=3):
        y = sin(y) * 1.1
    return y

def looped(x: f64, n: i32) -> f64:
    y = x
    for k in range(12):
        y = inner(y, n) + 0.01
    return y

def branched(x: f64, n: i32) -> f64:
    y = x
    if x > 0.0:
        y = inner(x, n) * 2.0
    else:
        y = x * 3.0
    return y

def g_looped(x: f64, n: i32) -> f64:
    return grad(looped)(x, n)

def g_branched(x: f64, n: i32) -> f64:
    return grad(branched)(x, n)

def pair(x: f64, n: i32) -> (f64, f64):
    return grad(inner)(x, n), x

def counted(x: f64, n: i32) -> i32:
    k = 0
    while grad(inner)(x, n) > -5.0 and k < 4:
        k = k + 1
    return k
""", filename="nested.arr")


def test_a_bound_is_checked_inside_loops_branches_and_conditions_without_a_host_callback():
    """Without effects, the check is a result of the call (compiler/effects.py PAST), not a host callback:
    the call keeps the C++ fast path. A loop with a bound inside a taped loop, inside a branch, in a tuple
    result and in a `while` condition: exact within the bound, R0006 past it, on every call (the fast
    path's too), and nothing for a branch that did not run."""
    def looped(x, n):
        for _ in range(12):
            x = _inner(x, n) + 0.01
        return x
    m = NESTED_BOUND
    for name in ("g_looped", "g_branched", "pair", "counted"):
        text = getattr(m, name).lower(arrc.spec("f64"), arrc.spec("i32")).as_text()
        assert "custom_call" not in text and "arrc.bound_result" in text
    for n in (0, 2, 3):
        for _ in range(3):                  # the full call, then the fast path
            np.testing.assert_allclose(m.g_looped(0.5, n), jax.grad(looped)(0.5, n), rtol=1e-12)
            np.testing.assert_allclose(m.g_branched(0.5, n), 2 * jax.grad(_inner)(0.5, n), rtol=1e-12)
            np.testing.assert_allclose(m.pair(0.5, n)[0], jax.grad(_inner)(0.5, n), rtol=1e-12)
            assert m.counted(0.5, n) == 4
    assert m.g_branched(-0.5, 4) == 3.0
    notes = {"g_looped": "in inner, called at nested.arr:10:13, in the backward pass of grad(looped) at nested.arr:22:12",
             "g_branched": "in inner, called at nested.arr:16:13, in the backward pass of grad(branched) at "
                           "nested.arr:25:12",
             "pair": "in the backward pass of grad(inner) at nested.arr:28:12",
             "counted": "in the backward pass of grad(inner) at nested.arr:32:11"}
    for name, note in notes.items():
        for _ in range(3):
            with pytest.raises(arrc.LoopBoundExceeded) as info:
                getattr(m, name)(0.5, 4)
            lines = str(info.value).splitlines()
            assert lines[:2] == ["error[R0006]: this `for` loop ran 4 iterations, more than its bound of 3",
                                 " --> nested.arr:3:5"] and f"  = note: {note}" in lines
    np.testing.assert_allclose(arrc.grad(m.g_looped)(0.5, 2), jax.grad(jax.grad(looped))(0.5, 2), rtol=1e-12)
    with pytest.raises(arrc.LoopBoundExceeded):
        arrc.grad(m.g_looped)(0.5, 4)
    for guards in ("nan,inf", "all"):       # with the results check; the tape's own indexing is not guarded
        guarded = arrc.loads(m.sources["nested.arr"].text, guards=guards)
        np.testing.assert_allclose(guarded.pair(0.5, 2)[0], jax.grad(_inner)(0.5, 2), rtol=1e-12)
        with pytest.raises(arrc.LoopBoundExceeded):
            guarded.pair(0.5, 4)
        with pytest.raises(arrc.LoopBoundExceeded):
            arrc.grad(guarded.inner)(0.5, 4)


def test_a_guard_inside_a_bounded_loop_reports_in_a_derivative():
    """A guard's callback and a bounded loop's site are numbered apart (they once shared number 0, and the
    guard's report failed inside XLA's callback). A run that both passes the bound and faults reports
    R0006 (docs/autodiff.md)."""
    m = arrc.loads("def steps(x: f64, n: i32, v: f64[3], j: i32) -> f64:\n    y = x\n"
                   "    for i in range(n, bound=3):\n        y = sin(y) * 1.1 + v[j]\n    return y\n",
                   filename="guarded.arr", guards="bounds")
    g = arrc.grad(m.steps)
    np.testing.assert_allclose(g(0.5, 2, np.ones(3), 1), jax.grad(
        lambda x: jnp.sin(jnp.sin(x) * 1.1 + 1.0) * 1.1 + 1.0)(0.5), rtol=1e-12)
    with pytest.raises(arrc.BoundsError) as info:
        g(0.5, 2, np.ones(3), 5)
    assert info.value.diagnostic.span.line == 4
    with pytest.raises(arrc.LoopBoundExceeded):
        g(0.5, 4, np.ones(3), 5)


def test_a_run_past_a_bound_exits_3_from_the_cli_and_from_a_compiled_module(tmp_path):
    import subprocess
    import sys
    src = tmp_path / "past.arr"
    src.write_text("def steps(x: f64, n: i32) -> f64:\n    for i in range(n, bound=4):\n        x = sin(x) * 1.1\n"
                   "    return x\n\ndef main(n: i32) -> f64:\n    return grad(steps)(0.5, n)\n")
    arrc_cli = [sys.executable, "-m", "arrc"]
    ok = subprocess.run(arrc_cli + ["run", str(src), "--arg", "n=4"], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and float(ok.stdout) == pytest.approx(float(jax.grad(_inner)(0.5, 4)), rel=1e-12)
    past = subprocess.run(arrc_cli + ["run", str(src), "--arg", "n=6"], capture_output=True, text=True, timeout=120)
    assert past.returncode == 3 and past.stdout == ""
    assert past.stderr.startswith(f"error[R0006]: this `for` loop ran 6 iterations, more than its bound of 4\n"
                                  f" --> {src}:2:5")
    mlir = tmp_path / "past.mlir"
    subprocess.run(arrc_cli + ["compile", str(src), "-o", str(mlir)], check=True, timeout=120)
    again = subprocess.run(arrc_cli + ["run", str(mlir), "--arg", "arg0=6"], capture_output=True, text=True,
                           timeout=120)
    assert again.returncode == 3 and again.stderr == past.stderr


def test_a_python_derivative_through_an_unbounded_loop_warns():
    src = "def grow(x: f64, limit: f64) -> f64:\n    while x < limit:\n        x = x * 1.5\n    return x\n"
    mod = arrc.loads(src, filename="grow.arr")
    with pytest.warns(arrc.ArrWarning, match=r"W0004(.|\n)*grow.arr:2:5(.|\n)*arrc.grad\(grow\) from Python"):
        g = arrc.grad(mod.grow)
    np.testing.assert_allclose(g(1.0, 3.0), 1.5 ** 3)
    quiet = arrc.loads(src, warnings="ignore")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        arrc.grad(quiet.grow)
    assert arrc.grad(BOUNDED.grow) is not None                     # a bound: nothing to say


def test_a_loop_that_carries_no_float_has_no_derivative_and_no_w0004():
    """A loop that counts (an integer `while`) is not differentiated: no warning that it would be by
    recomputation (the float loop next to it still gets one)."""
    src = ("def loss(x: f64[2], n: i32) -> f64:\n    k = 0\n    while k * k < n:\n        k += 1\n"
           "    s = x\n    for i in range(n):\n        s = s * 0.5\n    return sum(s * f64(k))\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        g = arrc.grad(arrc.loads(src, filename="count.arr").loss)
    assert [(w.message.diagnostic.code, w.message.diagnostic.span.line) for w in caught] == [("W0004", 6)]
    np.testing.assert_allclose(g(np.array([1.0, 2.0]), 5), [3 * 0.5 ** 5] * 2)


def test_a_derivative_not_called_and_a_grad_of_a_grad_say_what_they_are():
    with pytest.raises(arrc.CompileError) as info:      # (was E0210 at `s`, then E0101 "unknown function `grad`")
        arrc.loads("def s(x: f64[3]) -> f64:\n    return sum(x)\n\ndef t(x: f64[3]) -> f64[3]:\n    return grad(s)\n")
    assert [(d.code, d.message) for d in info.value.diagnostics] == [("E0210", "`grad(...)` makes a function: call it")]
    s = arrc.loads("def s(x: f64[3]) -> f64:\n    return sum(sin(x) * x)\n").s
    with pytest.raises(TypeError, match=r"grad\(s\)\(x: f64\[3\]\) -> f64\[3\] returns f64\[3\]"):
        arrc.grad(arrc.grad(s))


def test_loop_bounds_are_checked():
    for loop, message in (("for i in range(3, bount=4):", "E0103.*unknown loop option `bount`"),
                          ("while x < 3.0, bound=n:", "E0204.*a loop's bound must be a positive integer.*found i32"),
                          ("while x < 3.0, bound=0:", "E0204.*found 0")):
        with pytest.raises(arrc.CompileError, match=message):
            arrc.loads(f"def f(x: f64, n: i32) -> f64:\n    {loop}\n        x = x + 1.0\n    return x\n")



EFFECTS = arrc.loads("""
def loud(x: f64[2], n: i32) -> f64:
    print("forward", x)
    s = 0.0
    for i in range(n):
        print("step", i)
        s = s + sum(sin(x) * i)
    if s > 0.0:
        print("positive")
    assert s < 100.0, "too big"
    return s

def descend(x: f64[2]) -> f64[2]:
    for k in range(2):
        print("caller", k)
        x = x - 0.1 * grad(loud)(x, 3)
    return x

def doubling(x: f64[2]) -> f64[2]:
    print("once")
    y = x
    while sum(y) < 10.0:
        print("while")
        y = y * 2.0
    return y * x
""")


def test_print_and_assert_run_once_in_the_forward_pass(capsys):
    """Computing forward values again for a derivative (branches, loops, recounting) repeats no effect."""
    x = np.array([0.5, 1.0])
    forward = ["forward [0.5 1. ]", "step 0", "step 1", "step 2", "positive"]
    twin = lambda x: sum(jnp.sum(jnp.sin(x) * i) for i in range(3))                  # noqa: E731
    np.testing.assert_allclose(arrc.grad(EFFECTS.loud)(x, 3), jax.grad(twin)(x), rtol=1e-13)
    assert capsys.readouterr().out.splitlines() == forward
    arrc.value_and_grad(EFFECTS.loud)(x, 3)
    assert capsys.readouterr().out.splitlines() == forward
    EFFECTS.descend(x)
    lines = capsys.readouterr().out.splitlines()
    assert [line for line in lines if not line.startswith("forward")] == \
        ["caller 0", "step 0", "step 1", "step 2", "positive", "caller 1", "step 0", "step 1", "step 2", "positive"]
    for derivative in (arrc.jvp(EFFECTS.doubling), arrc.vjp(EFFECTS.doubling)):
        value, _ = derivative(x, np.ones(2))
        np.testing.assert_allclose(value, [2.0, 8.0])
        assert capsys.readouterr().out.splitlines() == ["once", "while", "while", "while"]
    with pytest.raises(arrc.AssertionFailed, match="too big"):
        arrc.grad(EFFECTS.loud)(np.array([1.5, 1.5]), 40)


BACKWARD_REPORT = """\
error[R0002]: infinity produced in the backward pass
 --> masked.arr:2:24
  |
2 |     y = where(x > 0.0, sqrt(x), 0.0)
  |                        ^^^^^^^ the derivative of `sqrt` produced inf at index [1] (x = 0.0)
  |
  = note: operands at [1]: literal = 0.5, sqrt(x) = 0.0
  = note: in the backward pass, in grad(masked)
  = help: if this `sqrt` is under a `where` that drops these elements, its derivative is still computed for \
them (and 0 * inf is NaN, as in jax.grad): give `sqrt` safe inputs with a second `where`, e.g. \
`where(x > 0.0, sqrt(where(x > 0.0, x, 1.0)), 0.0)`
"""


def test_a_value_a_derivative_rule_computes_is_not_named_as_the_forward_operation():
    """The operands of the adjoint that failed include values its rule computed (`y - 1` of a power's, `1 - x * x`
    of asin's), located at the forward operation: they were named by its text (`x ** 0.5 = -0.5`,
    `asin(x) = 0.0`), a value that operation did not compute."""
    mod = arrc.loads("def p(x: f64) -> f64:\n    return x ** 0.5\ndef a(x: f64) -> f64:\n    return asin(x)\n",
                     filename="rule.arr", guards="nan,inf")
    with pytest.raises(arrc.InfError) as err:
        arrc.grad(mod.p)(0.0)
    assert "= note: operands: x = 0.0, `subtract` in the derivative = -0.5\n" in str(err.value)
    with pytest.raises(arrc.InfError) as err:
        arrc.grad(mod.a)(1.0)
    assert "= note: operands: `subtract` in the derivative = 0.0\n" in str(err.value)


def test_an_adjoints_operands_are_not_named_by_the_forward_operations_text():
    """`x / y`'s adjoint is `g / y`: its operands were named by position from the text `x / y`, so the
    cotangent 1.0 was reported as `x = 1.0` where x is 2.0."""
    mod = arrc.loads("def f(x: f64, y: f64) -> f64:\n    return x / y\n", filename="div.arr", guards="nan,inf")
    with pytest.raises(arrc.InfError) as err:
        arrc.grad(mod.f)(2.0, 0.0)
    assert "= note: operands: literal = 1.0, y = 0.0\n" in str(err.value)


def test_the_backward_pass_report_names_the_derivative_and_teaches_the_fix():
    mod = arrc.loads("def masked(x: f64[3]) -> f64:\n    y = where(x > 0.0, sqrt(x), 0.0)\n    return sum(y)\n"
                     "def fixed(x: f64[3]) -> f64:\n    y = where(x > 0.0, sqrt(where(x > 0.0, x, 1.0)), 0.0)\n"
                     "    return sum(y)\n", filename="masked.arr", guards="nan,inf")
    x = np.array([1.0, 0.0, 4.0])
    with pytest.raises(arrc.InfError) as err:
        arrc.grad(mod.masked)(x)
    assert str(err.value) == BACKWARD_REPORT
    want = jax.grad(lambda x: jnp.sum(jnp.where(x > 0.0, jnp.sqrt(jnp.where(x > 0.0, x, 1.0)), 0.0)))(x)
    np.testing.assert_allclose(arrc.grad(mod.fixed)(x), want, rtol=1e-13)




def test_a_report_in_a_derivative_of_a_derivative_names_the_forward_operation():
    """The adjoint of an adjoint is located `vjp(<op>)#<id>` around the adjoint's own `vjp(<op>)#<id>`: the
    report named that (`the derivative of `vjp(power)#2``, and `vjp(power)#2` in the help) for the operation
    of the source whose second derivative is infinite (|x| ** 1.5 at 0: 0.75 / sqrt(0), as jax's)."""
    mod = arrc.loads("def f(x: f64[2]) -> f64:\n    return sum(abs(x) ** 1.5)\n"
                     "def df(x: f64[2]) -> f64:\n    return sum(grad(f)(x))\n", filename="second.arr", guards="inf")
    x = np.array([1.0, 0.0])
    for second in (lambda: arrc.jvp(arrc.grad(mod.f))(x, np.ones(2)), lambda: arrc.grad(mod.df)(x)):
        with pytest.raises(arrc.InfError) as err:
            second()
        assert "^^^^^^^^^^^^^ the derivative of `power` produced inf at index [1]" in str(err.value)
        assert "vjp(" not in str(err.value)
    assert np.isinf(jax.jvp(jax.grad(lambda x: jnp.sum(jnp.abs(x) ** 1.5)), (x,), (np.ones(2),))[1][1])


def test_a_report_in_a_recomputed_loop_names_the_variable_it_carries():
    """A loop with a run-time trip count and no bound is differentiated by running its body again from the
    start (`_run_body`); that loop's arguments carry the forward loop's variables and are located as them:
    the report named `s` by the recomputing loop's own location (`(vjp(while)#1 = 0.0)`)."""
    mod = arrc.loads("def f(x: f64, n: i32) -> f64:\n    s = x\n    for i in range(n):\n"
                     "        s = s * 0.5 + sqrt(s)\n    return s\n", filename="again.arr", guards="inf",
                     warnings="ignore")
    with pytest.raises(arrc.InfError) as err:
        arrc.grad(mod.f)(0.0, 3)
    assert "^^^^^^^ the derivative of `sqrt` produced inf (s = 0.0)\n" in str(err.value)


@pytest.mark.parametrize("header", ["for i in range(20):", "for i in range(n, bound=30):", "for i in range(n):"])
def test_a_forward_fault_in_a_derivative_names_the_variable_the_loop_carries(header):
    """The loops a derivative runs in place of the forward one (the recording loop of a tape, `_record`; the
    loop counting the iterations of one recomputed, `_count_iterations`) carry the forward loop's variables
    and are located as them: the report named `y` `for` and `vjp(while)#2`, the locations of the loops."""
    mod = arrc.loads(f"def f(x: f64[2], n: i32) -> f64:\n    y = x\n    {header}\n        y = log(y) + 1.0\n"
                     "    return sum(y)\n", filename="carried.arr", guards="nan,inf", warnings="ignore")
    with pytest.raises(arrc.InfError) as err:
        mod.f(np.array([1.0, 0.0]), 20)
    assert "= note: operands at [1]: y = 0.0\n" in str(err.value)
    with pytest.raises(arrc.InfError) as err:
        arrc.grad(mod.f)(np.array([1.0, 0.0]), 20)
    assert "= note: operands at [1]: y = 0.0\n" in str(err.value)


def test_the_where_help_is_given_only_where_the_derivative_may_be_singular():
    """An overflow in the backward pass at a regular point (sqrt at 1e-300, times 1e308) is not the masked
    `where` case: the report says what happened, without that help."""
    mod = arrc.loads("def h(x: f64[3]) -> f64:\n    return sum(sqrt(x) * 1e308)\n", filename="big.arr",
                     guards="nan,inf")
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # (a value past f32's range is shown without a NumPy warning)
        with pytest.raises(arrc.InfError) as err:
            arrc.grad(mod.h)(np.array([1.0, 1e-300, 4.0]))
    assert str(err.value) == """\
error[R0002]: infinity produced in the backward pass
 --> big.arr:2:16
  |
2 |     return sum(sqrt(x) * 1e308)
  |                ^^^^^^^ the derivative of `sqrt` produced inf at index [1] (x = 1e-300)
  |
  = note: operands at [1]: `multiply` in the derivative = 1e+308, `divide` in the derivative = 5e+149
  = note: in the backward pass, in grad(h)
"""


CHAINED_REPORT = """\
error[R0002]: infinity produced in the backward pass
 --> chain.arr:2:24
  |
2 |     y = where(x > 0.0, sqrt(x), 0.0)
  |                        ^^^^^^^ the derivative of `sqrt` produced inf at index [1] (x = 0.0)
  |
  = note: operands at [1]: literal = 0.5, sqrt(x) = 0.0
  = note: in loop iteration 0
  = note: in the backward pass, in grad(masked), called from step at chain.arr:6:22, called from descend at \
chain.arr:10:13
  = help: if this `sqrt` is under a `where` that drops these elements, its derivative is still computed for \
them (and 0 * inf is NaN, as in jax.grad): give `sqrt` safe inputs with a second `where`, e.g. \
`where(x > 0.0, sqrt(where(x > 0.0, x, 1.0)), 0.0)`
"""


def test_a_backward_pass_report_names_the_derivative_and_its_callers():
    mod = arrc.loads("def masked(x: f64[2]) -> f64:\n    y = where(x > 0.0, sqrt(x), 0.0)\n    return sum(y)\n\n"
                     "def step(x: f64[2]) -> f64[2]:\n    return x - 0.1 * grad(masked)(x)\n\n"
                     "def descend(x: f64[2], n: i32) -> f64[2]:\n    for i in range(n):\n        x = step(x)\n"
                     "    return x\n", filename="chain.arr", guards="nan,inf")
    with pytest.raises(arrc.InfError) as err:
        mod.descend(np.array([1.0, 0.0]), 3)
    assert str(err.value) == CHAINED_REPORT


LOOP_REPORT = """\
error[R0002]: infinity produced in the backward pass
 --> loop.arr:4:21
  |
4 |         s = s + sum(sqrt(abs(x - f64(i))))
  |                     ^^^^^^^^^^^^^^^^^^^^^ the derivative of `sqrt` produced inf at index [1]{forward}
  |
  = note: operands at [1]: literal = 0.5, sqrt(abs(x - f64(i))) = 0.0
  = note: in loop iteration 10
  = note: in the backward pass, in grad(loss)
  = help: if this `sqrt` is under a `where` that drops these elements, its derivative is still computed for \
them (and 0 * inf is NaN, as in jax.grad): give `sqrt` safe inputs with a second `where`, e.g. \
`where(x > 0.0, sqrt(where(x > 0.0, x, 1.0)), 0.0)`
"""


@pytest.mark.parametrize("header, forward", [
    ("for i in range(20):", ""),                                # taped (a static trip count)
    ("for i in range(n, bound=30):", ""),                       # taped (a bound)
    ("for i in range(n):", " (abs(x - f64(i)) = 0.0)"),          # recomputed: the forward operand is at hand
])
def test_a_backward_pass_report_names_the_forward_iteration_and_the_taped_value(header, forward):
    """The backward loop runs the forward iterations last first; its report names the forward iteration
    (10: x[1] - 10 = 0), not its own step (9 of 20), and a value read from the tape by the forward
    operation that made it."""
    mod = arrc.loads(f"def loss(x: f64[3], n: i32) -> f64:\n    s = 0.0\n    {header}\n"
                     "        s = s + sum(sqrt(abs(x - f64(i))))\n    return s\n",
                     filename="loop.arr", guards="nan,inf", warnings="ignore")
    with pytest.raises(arrc.InfError) as err:
        arrc.grad(mod.loss)(np.array([12.5, 10.0, 13.5]), 20)
    assert str(err.value) == LOOP_REPORT.format(forward=forward)


@pytest.mark.parametrize("header", ["for i in range(20):", "for i in range(n):", "for i in range(n, bound=30):",
                                    "for i in range(7):"])
def test_of_two_faults_in_a_backward_loop_the_first_to_run_is_reported(header):
    """The backward loop runs the forward iterations last first: of faults at forward iterations 2 and 5,
    5's runs first and is the one reported (as the guards report the first fault in execution order),
    for a taped, a recomputed, a bounded and an unrolled loop alike."""
    mod = arrc.loads(f"def loss(x: f64[3], n: i32) -> f64:\n    s = 0.0\n    {header}\n"
                     "        s = s + sum(sqrt(abs(x - f64(i))))\n    return s\n", guards="nan,inf", warnings="ignore")
    with pytest.raises(arrc.InfError) as err:
        arrc.grad(mod.loss)(np.array([2.0, 5.0, 13.5]), 20 if "7" not in header else 7)
    assert "the derivative of `sqrt` produced inf at index [1]" in str(err.value)
    assert "  = note: in loop iteration 5\n" in str(err.value)


def test_a_report_in_a_short_loop_the_derivative_unrolls_names_its_iteration():
    """A `for` loop of at most 8 iterations is unrolled before the sweep: its copies' reports, forward and
    backward, name the iteration as a loop's do (the nested loop's too, outermost first)."""
    mod = arrc.loads("def loss(x: f64[3]) -> f64:\n    s = 0.0\n    for i in range(5):\n"
                     "        s = s + sum(sqrt(abs(x - f64(i))))\n    return s\n\n"
                     "def nested(x: f64[3], n: i32) -> f64:\n    s = 0.0\n    for i in range(4):\n"
                     "        for j in range(n):\n            s = s + sum(log(abs(x - f64(i + j))))\n    return s\n",
                     filename="short.arr", guards="nan,inf", warnings="ignore")
    with pytest.raises(arrc.InfError) as err:
        arrc.grad(mod.loss)(np.array([12.5, 2.0, 13.5]))
    assert "the derivative of `sqrt` produced inf at index [1] (abs(x - f64(i)) = 0.0)" in str(err.value)
    assert "  = note: in loop iteration 2\n  = note: in the backward pass, in grad(loss)\n" in str(err.value)
    for fn in (mod.nested, arrc.grad(mod.nested)):
        with pytest.raises(arrc.InfError) as err:
            fn(np.array([2.0, 5.0, 3.5]), 3)
        assert "  = note: in loop iteration 0, 2 (outermost first)\n" in str(err.value)


RUN_TIME_LOOPS = """
def running(x: f64[2], w: f64, n: i32) -> f64:
    s = 0.0
    for i in range(n):
        x = sin(x) * w
        s = s + sum(x)
    return s

def inner(x: f64[2], w: f64, n: i32) -> f64:
    for i in range(2):
        for j in range(n):
            x = x * w + sin(x) * i
    return sum(x)

def long(x: f64, w: f64) -> f64:
    for i in range(300):
        x = x + sin(x * w) * 0.01
    return x
"""


def test_loops_with_run_time_trip_counts_by_recomputation():
    mod = arrc.loads(RUN_TIME_LOOPS)
    x, w = np.array([0.3, -1.1]), 1.3

    def running(x, w, n):
        s = 0.0
        for _ in range(n):
            x = jnp.sin(x) * w
            s = s + jnp.sum(x)
        return s

    def inner(x, w, n):
        for i in range(2):
            for _ in range(n):
                x = x * w + jnp.sin(x) * i
        return jnp.sum(x)
    for n in (0, 1, 3, 7):               # jax.grad needs n static here; arr takes it at run time
        for name, twin in (("running", running), ("inner", inner)):
            got = arrc.grad(mod[name], argnums=(0, 1))(x, w, n)
            want = jax.grad(twin, argnums=(0, 1))(x, w, n)
            for g, v in zip(got, want):
                np.testing.assert_allclose(g, v, rtol=1e-12, atol=1e-15)

    def long(x, w):
        for _ in range(300):
            x = x + jnp.sin(x * w) * 0.01
        return x
    got = arrc.grad(mod.long, argnums=(0, 1))(0.4, 1.7)       # past the unrolling limit: recomputed
    for g, v in zip(got, jax.grad(long, argnums=(0, 1))(0.4, 1.7)):
        np.testing.assert_allclose(g, v, rtol=1e-11)


def test_vjp_of_an_array_valued_function():
    mod = arrc.loads("def f(x: f64[3], w: f64[3, 2]) -> f64[2]:\n    return tanh(x @ w) * 2.0\n"
                     "def pair(x: f64) -> (f64, f64):\n    return x, x\n")
    v = arrc.vjp(mod.f)
    assert v.signature == "(x: f64[3], w: f64[3, 2], cotangent: f64[2]) -> (f64[2], f64[3], f64[3, 2])"
    rng = np.random.default_rng(8)
    x, w, ct = rng.standard_normal(3), rng.standard_normal((3, 2)), rng.standard_normal(2)
    value, (gx, gw) = v(x, w, ct)
    want_value, pullback = jax.vjp(lambda x, w: jnp.tanh(x @ w) * 2.0, x, w)
    want_x, want_w = pullback(ct)
    np.testing.assert_allclose(value, want_value, rtol=1e-13)
    np.testing.assert_allclose(gx, want_x, rtol=1e-12)
    np.testing.assert_allclose(gw, want_w, rtol=1e-12)
    with pytest.raises(arrc.ArgumentError, match="cotangent"):
        v(x, w, np.ones(3))
    with pytest.raises(TypeError, match="vjp needs a function with float results"):
        arrc.vjp(arrc.loads("def k(x: f64) -> i32:\n    return x.astype(i32)\n").k)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_relu_values_and_derivative_are_jax_nn_relus_at_zero_and_infinities(dtype):
    """relu's derivative at 0 is 0, as jax.nn.relu's custom_jvp defines (`maximum(x, 0)` would split the
    tie: 0.5); its values are max(x, 0) (NaN stays NaN, -0.0 gives 0.0); at +-inf as JAX's."""
    np_dt = np.float32 if dtype == "f32" else np.float64
    mod = arrc.loads(f"def f(x: {dtype}[n]) -> {dtype}:\n    return sum(relu(x) * 3.0)\n"
                     f"def r(x: {dtype}[n]) -> {dtype}[n]:\n    return relu(x)\n")
    x = np.array([0.0, -0.0, 1.5, -2.0, np.inf, -np.inf], np_dt)
    assert np.array_equal(arrc.grad(mod.f)(x), jax.grad(lambda x: jnp.sum(jax.nn.relu(x) * 3.0))(x))
    with_nan = np.append(x, np.nan).astype(np_dt)
    got, want = np.asarray(mod.r(with_nan)), np.asarray(jax.nn.relu(with_nan))
    assert np.array_equal(got, want, equal_nan=True) and not np.signbit(got[:-1]).any()


def test_relu_derivative_at_nan_is_jax_nn_relus_zero():
    """jax.nn.relu's custom_jvp is `g where x > 0 else 0`: 0 at NaN too, where the select arr lowers relu to
    gave its x branch's 1 (compiler/abi.py RELU); under vmap and in a second derivative too."""
    mod = arrc.loads("def f(x: f64[4]) -> f64:\n    return sum(relu(x) * x)\n\n"
                     "def r(x: f64[4]) -> f64:\n    return sum(relu(x))\n\n"
                     "def rows(x: f64[2, 4]) -> f64:\n    return sum(vmap(r)(x))\n")
    x = np.array([np.nan, 1.5, 0.0, -2.0])
    jf = jax.jit(jax.grad(lambda x: jnp.sum(jax.nn.relu(x) * x)))
    np.testing.assert_array_equal(arrc.grad(mod.f)(x), jf(x))       # [nan, 3, 0, 0]: the NaN is x's own
    np.testing.assert_array_equal(arrc.grad(mod.r)(x), [0.0, 1.0, 0.0, 0.0])
    np.testing.assert_array_equal(arrc.grad(mod.rows)(np.stack([x, -x])), [[0, 1, 0, 0], [0, 0, 0, 1]])


def test_max_and_min_of_an_array_holding_nan_differentiate_as_under_jax_jit():
    """The answer is NaN and no element equals it: the tangent is NaN, as jax.jit(jax.jvp) of jnp.max gives
    (sum(t * where) / counts = 0 / 0; it was 0), and the gradient, g / counts * where, XLA makes
    select(where, g / counts, 0): 0, as jax.jit(jax.grad) gives."""
    mod = arrc.loads("def f(x: f64[3]) -> f64:\n    return max(x) + min(x)\n")
    x, t = np.array([np.nan, 1.0, 3.0]), np.ones(3)
    jf = lambda x: jnp.max(x) + jnp.min(x)              # noqa: E731
    want = jax.jit(lambda x, t: jax.jvp(jf, (x,), (t,)))(x, t)
    got = arrc.jvp(mod.f)(x, t)
    assert np.isnan(float(got[1])) and np.isnan(float(want[1])) and np.isnan(float(got[0]))
    np.testing.assert_array_equal(arrc.grad(mod.f)(x), jax.jit(jax.grad(jf))(x))
    clean = np.array([2.0, 1.0, 3.0])
    np.testing.assert_array_equal(arrc.jvp(mod.f)(clean, t)[1], jax.jvp(jf, (clean,), (t,))[1])


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_floor_division_has_a_zero_derivative_at_infinities_and_nan_as_jnp(dtype):
    """`x // y` is piecewise constant: jnp.floor_divide ends in a round whose derivative is a symbolic zero,
    so jax.grad is 0 everywhere. arr's `//` selected a / b (for b = 0) after the round, and that select gave
    a / b a zero cotangent: 0 * (-a / b**2) was NaN in y's derivative at x = inf or nan."""
    mod = arrc.loads(f"def f(x: {dtype}[8], y: {dtype}[8]) -> {dtype}:\n    return sum((x // y) * y)\n\n"
                     f"def quotient(x: {dtype}[8], y: {dtype}[8]) -> {dtype}[8]:\n    return x // y\n")
    np_dtype = np.dtype({"f32": "float32", "f64": "float64"}[dtype])
    x = np.array([np.inf, -np.inf, np.nan, 7.0, -7.0, 0.0, 5.0, np.inf], np_dtype)
    y = np.array([0.7, 2.0, 3.0, 2.0, 0.0, 0.0, -0.0, 0.0], np_dtype)
    value, grads = arrc.value_and_grad(mod.f, argnums=(0, 1))(x, y)
    want_value, want = jax.value_and_grad(lambda x, y: jnp.sum((x // y) * y), argnums=(0, 1))(x, y)
    np.testing.assert_array_equal(value, want_value)
    for got, expected in zip(grads, want):
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(mod.quotient(x, y), jnp.floor_divide(x, y))


def test_random_numbers_in_a_loss_need_no_derivative_of_their_own():
    """Dropout-style noise drawn from a key: its float ops (erf_inv of the key's bits) depend on no
    differentiated argument, so no cotangent reaches them (JAX skips them too)."""
    mod = arrc.loads("""
def loss(k: key, w: f64[3], x: f64[5, 3]) -> f64:
    k1, k2 = split(k)
    keep = uniform(k1, (5, 3)) > 0.5
    h = where(keep, x * 2.0, 0.0) + 0.1 * normal(k2, (5, 3))
    return sum(tanh(h @ w) ** 2)

def dloss(k: key, w: f64[3], x: f64[5, 3]) -> f64[3]:
    return grad(loss, argnums=1)(k, w, x)
""")
    k = jax.random.key(7)
    w, x = np.array([0.3, -0.2, 0.5]), np.linspace(-1, 1, 15).reshape(5, 3)

    def jax_loss(w):
        k1, k2 = jax.random.split(k)
        keep = jax.random.uniform(k1, (5, 3), jnp.float32) > 0.5
        h = jnp.where(keep, x * 2.0, 0.0) + 0.1 * jax.random.normal(k2, (5, 3), jnp.float32)
        return jnp.sum(jnp.tanh(h @ w) ** 2)
    with jax.enable_x64(True):
        want = jax.grad(jax_loss)(w)
    np.testing.assert_allclose(mod.dloss(k, w, x), want, rtol=1e-6)      # (f32 normals: 1 ulp apart)


@pytest.mark.parametrize("loop", ["for i in range(12):", "for i in range(n, bound=12):"])
def test_a_taped_loop_prints_once_per_iteration(loop, capfd):
    """The loop that records the tape replaces the forward loop; the old one, left dead, kept its prints
    (and XLA kept it for them): every line came twice."""
    mod = arrc.loads(f"""
def f(x: f64[3], n: i64) -> f64:
    y = x
    {loop}
        print("y", y[0])
        y = y * 1.5
    return sum(y)

def g(x: f64[3], n: i64) -> f64[3]:
    return grad(f)(x, n)
""", warnings="ignore")
    capfd.readouterr()
    np.testing.assert_allclose(mod.g(np.ones(3), 12), np.full(3, 1.5 ** 12))
    assert capfd.readouterr().out.count("y ") == 12


SCANS = {"cumsum": jnp.cumsum, "cumprod": jnp.cumprod, "cummax": jax.lax.cummax, "cummin": jax.lax.cummin}


@pytest.mark.parametrize("name", SCANS)
@pytest.mark.parametrize("dtype, shape, axis", [("f64", (1,), "0"), ("f32", (4, 1, 4), "1"), ("f64", (1, 1), "None")])
def test_scans_over_a_length_1_axis_differentiate_as_jax(name, dtype, shape, axis):
    """A scan of one element was a reduce_window whose window of 1 named no axis: E0216 (not for cumsum)."""
    dims = ", ".join(map(str, shape))
    mod = arrc.loads(f"def f(x: {dtype}[{dims}]) -> {dtype}:\n    return sum({name}(x, axis={axis}) * cos(x))\n")
    x = np.random.default_rng(7).standard_normal(shape).astype(dtype.replace("f", "float"))
    scan = (lambda v: SCANS[name](v.ravel(), 0).reshape(shape)) if axis == "None" else \
        (lambda v: SCANS[name](v, int(axis)))
    want = jax.grad(lambda v: jnp.sum(scan(v) * jnp.cos(v)))(x)
    np.testing.assert_allclose(arrc.grad(mod.f)(x), want, rtol=1e-6 if dtype == "f32" else 1e-13)


STOP_GRADIENT = """\
def ste(x: f32[n]) -> f32:
    y = x + stop_gradient(round(x) - x)
    return sum(y * y)

def dste(x: f32[n]) -> f32[n]:
    return grad(ste)(x)

def lanes(xs: f32[4, 3]) -> f32[4, 3]:
    return vmap(dste)(xs)

def two(x: f64) -> f64:
    return x * stop_gradient(x) ** 2 + sin(x)

def d1(x: f64) -> f64:
    return grad(two)(x)

def d2(x: f64) -> f64:
    return grad(d1)(x)

def baseline(w: f32[3], r: f32[3]) -> f32:
    return sum((r - stop_gradient(mean(r))) * w * w)
"""


def test_stop_gradient_is_jax_s(tmp_path, capsys):
    """`stop_gradient(x)` is x with a derivative of 0, as jax.lax.stop_gradient: a straight-through estimator,
    a second derivative, vmap of a gradient, a detached baseline, jvp; XLA never sees it."""
    mod = arrc.loads(STOP_GRADIENT, filename="sg.arr", guards="all")
    sg = jax.lax.stop_gradient

    def ste(x):
        return jnp.sum((x + sg(jnp.round(x) - x)) ** 2)

    def two(x):
        return x * sg(x) ** 2 + jnp.sin(x)

    x = np.array([0.3, 1.7, -2.2], np.float32)
    np.testing.assert_array_equal(mod.ste(x), ste(x))
    np.testing.assert_array_equal(mod.dste(x), jax.grad(ste)(x))
    xs = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
    np.testing.assert_array_equal(mod.lanes(xs), jax.vmap(jax.grad(ste))(xs))
    assert float(mod.d1(0.7)) == pytest.approx(float(jax.grad(two)(0.7)), rel=1e-14)
    assert float(mod.d2(0.7)) == pytest.approx(float(jax.grad(jax.grad(two))(0.7)), rel=1e-14)
    np.testing.assert_allclose(arrc.jvp(mod.two)(0.7, 1.0), jax.jvp(two, (0.7,), (1.0,)), rtol=1e-14)
    w, r = np.ones(3, np.float32), np.array([1.0, 2.0, 4.0], np.float32)
    got = arrc.grad(mod.baseline, argnums=(0, 1))(w, r)
    want = jax.grad(lambda w, r: jnp.sum((r - sg(jnp.mean(r))) * w * w), argnums=(0, 1))(w, r)
    for g, j in zip(got, want):
        np.testing.assert_allclose(g, j, rtol=1e-6)
    from arrc.cli import main
    (tmp_path / "sg.arr").write_text(STOP_GRADIENT)
    capsys.readouterr()
    assert main(["compile", str(tmp_path / "sg.arr"), "--entry", "dste", "--shape", "n=3"]) == 0
    text = capsys.readouterr().out
    assert "stablehlo.round_nearest_even" in text and "custom_call" not in text      # (the placeholder is gone)


def test_stop_gradient_after_a_linear_algebra_call_compiles():
    """passes/linalg.py erased each `stop_gradient` placeholder, then removed it from its list of calls, which
    compared it with the calls before it: after a `solve` that comparison raised "the operation has been
    invalidated" (any function with a `stop_gradient` after a linear-algebra call)."""
    mod = arrc.loads("def f(a: f64[2, 2], b: f64[2]) -> f64:\n    y = solve(a, b)\n"
                     "    return sum(stop_gradient(y) * y)\n")
    a, b = np.array([[2.0, 1.0], [1.0, 3.0]]), np.array([1.0, -1.0])
    loss = lambda a, b: jnp.sum(jax.lax.stop_gradient(jnp.linalg.solve(a, b)) * jnp.linalg.solve(a, b))  # noqa: E731
    np.testing.assert_allclose(mod.f(a, b), loss(a, b), rtol=1e-12)
    for got, want in zip(arrc.grad(mod.f, argnums=(0, 1))(a, b), jax.grad(loss, argnums=(0, 1))(a, b)):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_a_short_loop_holding_no_loop_is_unrolled_whatever_its_body(monkeypatch):
    """The unrolling budget (MAX_UNROLLED_OPS) stops nests of short loops multiplying the program; a loop
    that holds no loop grows only with its own source, and taped it ran ~2x slower: it stays unrolled."""
    from arrc.compiler import autodiff
    monkeypatch.setattr(autodiff, "MAX_UNROLLED_OPS", 60)
    body = "".join(f"        y = y + sin(y) * {k + 1}.0e-3\n" for k in range(6))     # > 60 operations in 8 copies
    src = f"def h(x: f64[3]) -> f64:\n    y = x\n    for i in range(8):\n{body}    return sum(y)\n"
    f = arrc.grad(arrc.loads(src).h)
    assert "stablehlo.while" not in f.lower(arrc.spec("f64[3]")).as_text(debug_info=False)

    def step(i, y):
        for k in range(6):
            y = y + jnp.sin(y) * ((k + 1) * 1e-3)
        return y
    x = np.array([0.3, -1.1, 2.0])
    want = jax.grad(lambda x: jnp.sum(jax.lax.fori_loop(0, 8, step, x)))(x)
    np.testing.assert_allclose(f(x), want, rtol=1e-12)
    nested = "def h(x: f64[3]) -> f64:\n    y = x\n    for i in range(4):\n        for j in range(4):\n" + \
        body.replace("        y", "            y") + "    return sum(y)\n"
    assert "stablehlo.while" in arrc.grad(arrc.loads(nested).h).lower(arrc.spec("f64[3]")).as_text(debug_info=False)
