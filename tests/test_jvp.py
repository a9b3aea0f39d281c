"""Forward mode and pullbacks (LANGUAGE.md section 15): `jvp(f, primals, tangents)` and
`vjp(f, primals, cotangent)` in arr code, `arrc.jvp` / `arrc.vjp` from Python, against `jax.jvp` /
`jax.vjp` (x64 on) at random f64 points; f32; branches and loops; tuple results; nesting (a
Hessian-vector product: the jvp of a function that calls grad); every diagnostic, whole text."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import arrc

jax.config.update("jax_enable_x64", True)

# name: (arr function of x: f64[4], y: f64[4], its JAX twin)
CASES = {
    "elementwise": ("def f(x: f64[4], y: f64[4]) -> f64[4]:\n"
                    "    return sin(x) * exp(y) + x / (y * y + 1.0) + tanh(x * y) + sqrt(x * x + 1.0) + abs(y)"
                    " + maximum(x, y) + log1p(x * x) ** 1.5\n",
                    lambda x, y: jnp.sin(x) * jnp.exp(y) + x / (y * y + 1.0) + jnp.tanh(x * y)
                    + jnp.sqrt(x * x + 1.0) + jnp.abs(y) + jnp.maximum(x, y) + jnp.log1p(x * x) ** 1.5),
    "matmul": ("def f(x: f64[4], y: f64[4]) -> f64[2, 2]:\n"
               "    return reshape(x, (2, 2)) @ reshape(y, (2, 2)).T + outer(x[:2], y[2:])\n",
               lambda x, y: x.reshape(2, 2) @ y.reshape(2, 2).T + jnp.outer(x[:2], y[2:])),
    "reductions": ("def f(x: f64[4], y: f64[4]) -> f64[3]:\n"
                   "    return [sum(x * y), max(x) * mean(y) - min(y), logsumexp(x)] + softmax(y)[:3]\n",
                   lambda x, y: jnp.stack([jnp.sum(x * y), jnp.max(x) * jnp.mean(y) - jnp.min(y),
                                           jax.nn.logsumexp(x)]) + jax.nn.softmax(y)[:3]),
    "branch": ("def f(x: f64[4], y: f64[4]) -> f64[4]:\n"
               "    if sum(x) > 0.0:\n"
               "        z = sin(x) * y\n"
               "    else:\n"
               "        z = x * x - y\n"
               "    return z * 2.0\n",
               lambda x, y: jnp.where(jnp.sum(x) > 0.0, jnp.sin(x) * y, x * x - y) * 2.0),
    "loop": ("def f(x: f64[4], y: f64[4]) -> f64[4]:\n"
             "    z = x\n"
             "    for i in range(3):\n"
             "        z = tanh(z * y) + x\n"
             "    return z\n",
             lambda x, y: _loop(x, y, 3)),
}


def _loop(x, y, n):
    z = x
    for _ in range(n):
        z = jnp.tanh(z * y) + x
    return z


def _points(seed: int):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(4) for _ in range(4)]     # x, y and their tangents (or a cotangent)


@pytest.fixture(scope="module")
def cases():
    return {name: arrc.loads(src, filename=f"{name}.arr").f for name, (src, _) in CASES.items()}


@pytest.mark.parametrize("name", list(CASES))
def test_jvp_matches_jax(cases, name):
    twin = CASES[name][1]
    for seed in (1, 2):
        x, y, tx, ty = _points(seed)
        if name == "branch" and seed == 2:
            x = -np.abs(x)                  # the other branch
        value, tangent = arrc.jvp(cases[name])(x, y, tx, ty)
        want_value, want_tangent = jax.jvp(twin, (x, y), (tx, ty))
        np.testing.assert_allclose(value, want_value, rtol=1e-13)
        np.testing.assert_allclose(tangent, want_tangent, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", list(CASES))
def test_vjp_matches_jax(cases, name):
    twin = CASES[name][1]
    x, y, _, _ = _points(3)
    ct = np.random.default_rng(4).standard_normal(np.shape(twin(x, y)))
    value, (gx, gy) = arrc.vjp(cases[name])(x, y, ct)
    want_value, pullback = jax.vjp(twin, x, y)
    want_x, want_y = pullback(ct)
    np.testing.assert_allclose(value, want_value, rtol=1e-13)
    np.testing.assert_allclose(gx, want_x, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(gy, want_y, rtol=1e-12, atol=1e-14)


PAIR = "def pair(x: f64[3], s: f64) -> (f64, f64[3]):\n    return max(x) * sum(x) * s, exp(x) / (1.0 + x * x * s)\n"


def jpair(x, s):
    return jnp.max(x) * jnp.sum(x) * s, jnp.exp(x) / (1.0 + x * x * s)


def test_tuple_results_from_python():
    mod = arrc.loads(PAIR)
    rng = np.random.default_rng(5)
    x, tx, c1 = rng.standard_normal(3), rng.standard_normal(3), rng.standard_normal(3)
    j = arrc.jvp(mod.pair)
    assert j.signature == "(x: f64[3], s: f64, x_dot: f64[3], s_dot: f64) -> (f64, f64[3], f64, f64[3])"
    (y0, y1), (t0, t1) = j(x, 0.7, tx, -0.4)
    (w0, w1), (u0, u1) = jax.jvp(jpair, (x, 0.7), (tx, -0.4))
    np.testing.assert_allclose([y0, t0], [w0, u0], rtol=1e-13)
    np.testing.assert_allclose(y1, w1, rtol=1e-13)
    np.testing.assert_allclose(t1, u1, rtol=1e-12)
    v = arrc.vjp(mod.pair)
    assert v.signature == "(x: f64[3], s: f64, cotangent0: f64, cotangent1: f64[3]) -> (f64, f64[3], f64[3], f64)"
    (y0, y1), (gx, gs) = v(x, 0.7, 1.3, c1)
    (w0, w1), pullback = jax.vjp(jpair, x, 0.7)
    want_x, want_s = pullback((1.3, c1))
    np.testing.assert_allclose(gx, want_x, rtol=1e-12)
    np.testing.assert_allclose(gs, want_s, rtol=1e-12)
    with pytest.raises(arrc.ArgumentError, match="cotangent1"):
        v(x, 0.7, 1.3, np.ones(4))


def test_float32():
    mod = arrc.loads("def f(x: f32[3], w: f32[3, 2]) -> f32[2]:\n    return tanh(x @ w) * sum(exp(x))\n")
    rng = np.random.default_rng(6)
    x, w, tx, tw = (rng.standard_normal(s).astype(np.float32) for s in (3, (3, 2), 3, (3, 2)))
    twin = lambda x, w: jnp.tanh(x @ w) * jnp.sum(jnp.exp(x))      # noqa: E731
    value, tangent = arrc.jvp(mod.f)(x, w, tx, tw)
    assert value.dtype == tangent.dtype == np.float32
    want_value, want_tangent = jax.jvp(twin, (x, w), (tx, tw))
    np.testing.assert_allclose(value, want_value, rtol=1e-5)
    np.testing.assert_allclose(tangent, want_tangent, rtol=1e-5, atol=1e-6)
    ct = rng.standard_normal(2).astype(np.float32)
    _, (gx, gw) = arrc.vjp(mod.f)(x, w, ct)
    want_x, want_w = jax.vjp(twin, x, w)[1](ct)
    assert gx.dtype == gw.dtype == np.float32
    np.testing.assert_allclose(gx, want_x, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gw, want_w, rtol=1e-5, atol=1e-6)


def test_lower_gives_the_flat_module():
    mod = arrc.loads("def f(x: f64[n]) -> f64[n]:\n    return sin(x) * x\n")
    j = arrc.jvp(mod.f)
    assert j.signature == "(x: f64[n], x_dot: f64[n]) -> (f64[n], f64[n])"
    lowered = j.lower(arrc.spec("f64[5]"), arrc.spec("f64[5]"))
    text = lowered.as_text(debug_info=False)
    assert "(%arg0: tensor<5xf64>, %arg1: tensor<5xf64>) -> (tensor<5xf64>, tensor<5xf64>)" in text
    x, t = np.linspace(-1, 1, 5), np.linspace(2, 3, 5)
    np.testing.assert_allclose(j(x, t)[1], jax.jvp(lambda x: jnp.sin(x) * x, (x,), (t,))[1], rtol=1e-13)
    with pytest.raises(arrc.ArgumentError, match="x_dot"):
        j(x, np.ones(4))


def test_run_time_loops_in_both_sweeps():
    """The jvp of a loop with a run-time trip count transposes the backward loop that recomputation made."""
    mod = arrc.loads("def f(x: f64[3], m: f64) -> f64[3]:\n    z = x\n    for i in range(m.astype(i32)):\n"
                     "        z = sin(z) * x + 0.5\n    return z\n")
    rng = np.random.default_rng(7)
    x, t = rng.standard_normal(3), rng.standard_normal(3)
    j = arrc.jvp(mod.f)
    for n in (0, 1, 5):
        run = lambda x: _sin_loop(x, n)        # noqa: E731
        np.testing.assert_allclose(j(x, float(n), t, 0.0)[1], jax.jvp(run, (x,), (t,))[1], rtol=1e-12)
        np.testing.assert_allclose(arrc.vjp(mod.f)(x, float(n), t)[1][0], jax.vjp(run, x)[1](t)[0], rtol=1e-12)


def _sin_loop(x, n):
    z = x
    for _ in range(n):
        z = jnp.sin(z) * x + 0.5
    return z


LANGUAGE = """
def f(x: f64[3], w: f64[3, 2]) -> f64[2]:
    return tanh(x @ w) * 2.0

def pair(x: f64[3], s: f64) -> (f64, f64[3]):
    return max(x) * sum(x) * s, exp(x) / (1.0 + x * x * s)

def forward(x: f64[3], w: f64[3, 2], tx: f64[3], tw: f64[3, 2]) -> (f64[2], f64[2]):
    y, ty = jvp(f, (x, w), (tx, tw))
    return y, ty

def pullback(x: f64[3], w: f64[3, 2], ct: f64[2]) -> (f64[2], f64[3], f64[3, 2]):
    y, gs = vjp(f, (x, w), ct)
    gx, gw = gs
    return y, gx, gw

def pair_forward(x: f64[3], tx: f64[3]) -> (f64, f64[3], f64, f64[3]):
    y, ty = jvp(pair, (x, 0.7), (tx, 1.0))
    return y[0], y[1], ty[0], ty[1]

def pair_pullback(x: f64[3], c1: f64[3]) -> (f64[3], f64):
    y, gs = vjp(pair, (x, 0.7), (2.0, c1))
    return gs[0], gs[1]

def loss(x: f64[3]) -> f64:
    return sum(sin(x) * x ** 3) + max(x) * sum(x * x)

def gradient(x: f64[3]) -> f64[3]:
    return grad(loss)(x)

def hvp(x: f64[3], v: f64[3]) -> f64[3]:
    g, hv = jvp(gradient, (x,), (v,))
    return hv

def directional(x: f64[3], v: f64[3], n: i32) -> f64:
    total = 0.0
    for i in range(n):
        y, t = jvp(loss, (x * i,), (v,))
        total = total + t
    return total
"""


def jloss(x):
    return jnp.sum(jnp.sin(x) * x ** 3) + jnp.max(x) * jnp.sum(x * x)


def test_jvp_and_vjp_in_the_language():
    mod = arrc.loads(LANGUAGE)
    rng = np.random.default_rng(9)
    x, w, tx, tw, ct, c1 = (rng.standard_normal(s) for s in (3, (3, 2), 3, (3, 2), 2, 3))
    twin = lambda x, w: jnp.tanh(x @ w) * 2.0      # noqa: E731
    for got, want in zip(mod.forward(x, w, tx, tw), jax.jvp(twin, (x, w), (tx, tw))):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    y, pull = jax.vjp(twin, x, w)
    for got, want in zip(mod.pullback(x, w, ct), (y, *pull(ct))):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    (w0, w1), (u0, u1) = jax.jvp(jpair, (x, 0.7), (tx, 1.0))
    for got, want in zip(mod.pair_forward(x, tx), (w0, w1, u0, u1)):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    for got, want in zip(mod.pair_pullback(x, c1), jax.vjp(jpair, x, 0.7)[1]((2.0, c1))):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_hessian_vector_product_by_nesting():
    mod = arrc.loads(LANGUAGE)
    rng = np.random.default_rng(10)
    for _ in range(2):
        x, v = rng.standard_normal(3), rng.standard_normal(3)
        want = jax.jvp(jax.grad(jloss), (x,), (v,))[1]
        np.testing.assert_allclose(mod.hvp(x, v), want, rtol=1e-12)
        np.testing.assert_allclose(arrc.jvp(mod.gradient)(x, v)[1], want, rtol=1e-12)     # from Python too
    want = sum(jax.jvp(jloss, (x * i,), (v,))[1] for i in range(4))
    np.testing.assert_allclose(mod.directional(x, v, 4), want, rtol=1e-12)      # in a run-time loop


HEAD = ("def f(x: f64[3], w: f64[3, 2]) -> f64[2]:\n    return x @ w\n"
        "def c(n: i32, x: f64) -> f64:\n    return x * n\n"
        "def k(x: f64) -> i32:\n    return x.astype(i32)\n"
        "def p(x: f64) -> (f64, f64[2]):\n    return x, [x, x]\n"
        "def loud(x: f64) -> f64:\n    print(x)\n    return x\n")
DIAGNOSTICS = {
    "y, t = jvp(f, (x, w), (x, w.astype(f32)))": """\
error[E0212]: the tangent of `w` has type f32[3, 2], expected f64[3, 2]
  --> t.arr:13:31
   |
13 |     y, t = jvp(f, (x, w), (x, w.astype(f32)))
   |                               ^^^^^^^^^^^^^ this is f32[3, 2]
   |
   = note: signature: f(x: f64[3], w: f64[3, 2]) -> f64[2]
   = help: a tangent has its primal's type, f64[3, 2]: convert it with `.astype(f64)`
""",
    "y, t = jvp(f, (x, w), (x, x))": """\
error[E0212]: the tangent of `w` has type f64[3], expected f64[3, 2]
  --> t.arr:13:31
   |
13 |     y, t = jvp(f, (x, w), (x, x))
   |                               ^ this is f64[3]
   |
   = note: signature: f(x: f64[3], w: f64[3, 2]) -> f64[2]
   = help: a tangent has its primal's type, f64[3, 2]
""",
    "y, t = jvp(f, (x, w), (x,))": """\
error[E0210]: the tangents of `jvp` must be a tuple (f64[3], f64[3, 2])
  --> t.arr:13:27
   |
13 |     y, t = jvp(f, (x, w), (x,))
   |                           ^^^^ this is (f64[3],)
   |
   = note: signature: f(x: f64[3], w: f64[3, 2]) -> f64[2]
   = help: one tangent per primal, each of its primal's type
""",
    "y, t = vjp(f, (x, w), x)": """\
error[E0212]: the cotangent of `f`'s result has type f64[3], expected f64[2]
  --> t.arr:13:27
   |
13 |     y, t = vjp(f, (x, w), x)
   |                           ^ this is f64[3]
   |
   = note: signature: f(x: f64[3], w: f64[3, 2]) -> f64[2]
   = help: a cotangent has the result's type, f64[2]
""",
    "y, t = vjp(p, (x[0],), x[0])": """\
error[E0210]: the cotangent of `vjp` must be a tuple (f64, f64[2])
  --> t.arr:13:28
   |
13 |     y, t = vjp(p, (x[0],), x[0])
   |                            ^^^^ this is f64
   |
   = note: signature: p(x: f64) -> (f64, f64[2])
   = help: one cotangent per result of `p`, each of that result's type
""",
    "y, t = vjp(p, (x[0],), (x[0], x))": """\
error[E0212]: the cotangent of result 1 of `p` has type f64[3], expected f64[2]
  --> t.arr:13:35
   |
13 |     y, t = vjp(p, (x[0],), (x[0], x))
   |                                   ^ this is f64[3]
   |
   = note: signature: p(x: f64) -> (f64, f64[2])
   = help: a cotangent has the result's type, f64[2]
""",
    "y, t = jvp(sin, (x,), (x,))": """\
error[E0210]: `jvp` takes a module function by name, e.g. `jvp(f, (x,), ...)`
  --> t.arr:13:16
   |
13 |     y, t = jvp(sin, (x,), (x,))
   |                ^^^ not a module function
   |
   = help: `sin` is a builtin: call it in a `def` and pass that name, e.g. `def my_sin(...) -> ...: return sin(...)`
""",
    "y, t = jvp(c, (1, x[0]), (x[0], x[0]))": """\
error[E0216]: cannot differentiate with respect to `n`: it is i32, not a float
  --> t.arr:13:20
   |
13 |     y, t = jvp(c, (1, x[0]), (x[0], x[0]))
   |                    ^ argument 0 of `c`
   |
   = note: signature: c(n: i32, x: f64) -> f64
   = help: `jvp` differentiates with respect to every primal: take `n` as a float and convert it inside (e.g. \
`n.astype(i32)`), or leave it out of `c`
""",
    "y, t = vjp(k, (x[0],), 1)": """\
error[E0216]: `vjp` needs a function with float results; `k` returns i32
  --> t.arr:13:16
   |
13 |     y, t = vjp(k, (x[0],), 1)
   |                ^ not a float function
   |
   = note: signature: k(x: f64) -> i32
   = help: integer and bool results have no derivative: return them from another function
""",
    "y, t = jvp(f, x, x)": """\
error[E0210]: the primals of `jvp` must be a tuple, one value per parameter of `f`
  --> t.arr:13:19
   |
13 |     y, t = jvp(f, x, x)
   |                   ^ this is f64[3]
   |
   = help: write `(x,)` for a function of one parameter, as jax.jvp takes
""",
    "y, t = jvp(f, (x,), (x,))": """\
error[E0103]: `f` takes 2 argument(s), 1 primal(s) given
  --> t.arr:13:19
   |
13 |     y, t = jvp(f, (x,), (x,))
   |                   ^^^^ wrong number of primals
   |
   = note: signature: f(x: f64[3], w: f64[3, 2]) -> f64[2]
""",
    "y, t = jvp(f, (x, w))": """\
error[E0103]: `jvp` takes 3 arguments, 2 given
  --> t.arr:13:12
   |
13 |     y, t = jvp(f, (x, w))
   |            ^^^^^^^^^^^^^^ wrong number of arguments
   |
   = note: usage: `jvp(f, primals, tangents)`, e.g. `jvp(f, (x,), (t,))`
""",
}


@pytest.mark.parametrize("line", list(DIAGNOSTICS))
def test_diagnostics_whole_text(line):
    src = HEAD + f"def g(x: f64[3], w: f64[3, 2]) -> f64:\n    {line}\n    return 0.0\n"
    with pytest.raises(arrc.CompileError) as err:
        arrc.loads(src, filename="t.arr")
    assert str(err.value) == DIAGNOSTICS[line]


def test_a_module_function_named_jvp_is_called_as_written():
    mod = arrc.loads("def jvp(a: f64, b: f64, c: f64) -> f64:\n    return a + b * c\n"
                     "def g(x: f64) -> f64:\n    return jvp(x, x, 2.0)\n")
    assert mod.g(1.5) == 4.5


def test_python_refusals():
    mod = arrc.loads(HEAD)
    with pytest.raises(TypeError, match="with respect to `n`: it is i32"):
        arrc.jvp(mod.c)
    with pytest.raises(TypeError, match=r"vjp needs a function with float results; k\(x: f64\) -> i32 returns i32"):
        arrc.vjp(mod.k)
    with pytest.raises(TypeError, match="jvp takes an arr function"):
        arrc.jvp(lambda x: x)
    assert arrc.jvp(mod.loud)(1.0, 1.0)[1] == 1.0          # prints once, in the forward pass (test_autodiff)


def test_guards_blame_the_forward_operation():
    mod = arrc.loads("def f(x: f64[2]) -> f64[2]:\n    y = sqrt(x)\n    return y * 2.0\n", guards="nan,inf")
    j = arrc.jvp(mod.f)
    np.testing.assert_allclose(j(np.array([1.0, 4.0]), np.ones(2))[1], [1.0, 0.5])
    with pytest.raises(arrc.InfError) as err:
        j(np.array([1.0, 0.0]), np.ones(2))            # sqrt'(0) = inf, as jax.jvp gives
    assert err.value.diagnostic.span.line == 2          # `y = sqrt(x)`
    assert "in jvp(f)" in str(err.value)


# Each rule on its own, vector in and out (x: f64[6], the integer operands fixed): `jax.jvp` is the oracle
# for J v, and the dot-product test <J v, u> == <v, J^T u> ties the reverse rule to it.
RULES = {
    "unary": "sin(x) + cos(x) + tan(x * 0.3) + exp(x) + expm1(x) + log(x * x + 1.0) + log1p(x * x) + tanh(x)"
             " + sigmoid(x) + sqrt(x * x + 1.0) + rsqrt(x * x + 1.0) + cbrt(x) + abs(x) + sinh(x) + cosh(x)"
             " + asin(x * 0.2) + acos(x * 0.2) + atan(x) + erf(x)",
    "binary": "x * x[::-1] + x / (x[::-1] ** 2 + 1.0) + maximum(x, x[::-1]) + minimum(x, 0.1) + atan2(x, x[::-1] + 3.0)"
              " + (x * x + 1.0) ** x[::-1] + x % 0.7 + clip(x, -0.5, 0.5) + where(x > 0.0, x, 2.0 * x)",
    "reductions": "concat((reshape(sum(reshape(x, (2, 3)), axis=0), (3,)), reshape(prod(reshape(x, (2, 3)), axis=1), (2,)),"
                  " reshape(max(x), (1,)), reshape(logsumexp(x), (1,)), softmax(x), log_softmax(x)))",
    "products": "reshape(reshape(x, (2, 3)).T @ reshape(x, (2, 3)), (9,)) + 0.0",
    "indexing": "concat((x[idx], x[2:5], x[::2], reshape(outer(x, x)[1, :], (6,))))",
    "updates": "stored(x)",
    "scans": "concat((cumsum(x), cumprod(x), cummax(x), cummin(x), sort(x), flip(x, axis=0)))",
    "shapes": "reshape(pad(reshape(x, (2, 3)), ((1, 0), (0, 2)), constant_values=0.5), (15,))",
}
RULE_HELPERS = """
def stored(x: f64[6]) -> f64[6]:
    y = x * 2.0
    y[idx] = x[0:3] * x[3:6]
    y[4] = x[1] * 3.0
    y[0:2] += x[4:6]
    return y
"""


@pytest.fixture(scope="module")
def rules():
    src = "const idx: i32[3] = [4, 1, 4]\n" + RULE_HELPERS
    src += "".join(f"\ndef r_{name}(x: f64[6]) -> f64[{_width(name)}]:\n    return {body}\n" for name, body in RULES.items())
    return arrc.loads(src)


def _width(name: str) -> int:
    return {"unary": 6, "binary": 6, "reductions": 19, "products": 9, "indexing": 15, "updates": 6,
            "scans": 36, "shapes": 15}[name]


@pytest.mark.parametrize("name", list(RULES))
def test_each_rule_passes_the_dot_product_test(rules, name):
    rng = np.random.default_rng(len(name))
    f = rules[f"r_{name}"]
    x = rng.uniform(-1.5, 1.5, 6)
    v, u = rng.standard_normal(6), rng.standard_normal(_width(name))
    value, jv = arrc.jvp(f)(x, v)
    value_again, (jtu,) = arrc.vjp(f)(x, u)
    np.testing.assert_allclose(value, value_again, rtol=1e-14)
    np.testing.assert_allclose(np.dot(jv, u), np.dot(v, jtu), rtol=1e-11)
    eps = 1e-6                                    # and J v is the derivative: central differences
    np.testing.assert_allclose(jv, (np.asarray(f(x + eps * v)) - np.asarray(f(x - eps * v))) / (2 * eps),
                               rtol=1e-5, atol=1e-7)


def test_the_spec_forms_with_nested_targets():
    """LANGUAGE.md section 15: `y, ty = jvp(f, (x,), (tx,))` and `y, (gx,) = vjp(f, (x,), ct)`."""
    mod = arrc.loads("""
def f(x: f64[3]) -> f64[3]:
    return sin(x) * x

def both(x: f64[3], tx: f64[3], ct: f64[3]) -> (f64[3], f64[3], f64[3]):
    y, ty = jvp(f, (x,), (tx,))
    y2, (gx,) = vjp(f, (x,), ct)
    return ty, gx, y - y2
""")
    rng = np.random.default_rng(12)
    x, tx, ct = rng.standard_normal(3), rng.standard_normal(3), rng.standard_normal(3)
    ty, gx, zero = mod.both(x, tx, ct)
    f = lambda x: jnp.sin(x) * x                               # noqa: E731
    np.testing.assert_allclose(ty, jax.jvp(f, (x,), (tx,))[1], rtol=1e-13)
    np.testing.assert_allclose(gx, jax.vjp(f, x)[1](ct)[0], rtol=1e-13)
    assert np.all(np.asarray(zero) == 0.0)
