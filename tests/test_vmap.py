"""vmap (LANGUAGE.md section 16, docs/vmap.md) against jax.vmap (x64 on): every op family, axes, nesting,
grad both ways, random keys bit for bit, control flow with batched predicates, the per-lane semantics of
print, assert and guards (where JAX's vmap is wrong), diagnostics, and which functions take the batching
rules (one matrix-matrix product for a batch of matrix-vector products) rather than the lane loop."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import compile_src

import arrc

R = np.random.default_rng(0)

FAMILIES = """
def ew(x: f64[3], y: f64[3], a: f64) -> f64[3]:
    return exp(x) * y + a / (1.0 + x * x) - maximum(x, y) + where(x > y, x, 2.0 * y) + clip(x, -0.5, 0.5)

def ew_b(x: f64[5, 3], y: f64[3], a: f64[5]) -> f64[5, 3]:
    return vmap(ew, in_axes=(0, None, 0))(x, y, a)

def red(x: f64[4, 3]) -> (f64, f64[3], f64[4], i32[4], f64):
    return sum(x), max(x, axis=0), mean(x, axis=1), argmax(x, axis=1), var(x)

def red_b(x: f64[6, 4, 3]) -> (f64[6], f64[6, 3], f64[6, 4], i32[6, 4], f64[6]):
    return vmap(red)(x)

def mm(a: f64[3, 4], v: f64[4], b: f64[4, 2]) -> (f64[3], f64[3, 2], f64[4], f64):
    return a @ v, a @ b, v @ b @ b.T, dot(v, v)

def mm_b(a: f64[5, 3, 4], v: f64[4, 5], b: f64[4, 2]) -> (f64[5, 3], f64[5, 3, 2], f64[5, 4], f64[5]):
    return vmap(mm, in_axes=(0, 1, None))(a, v, b)

def shp(x: f64[2, 3]) -> (f64[3, 2], f64[6], f64[4, 3], f64[2, 2], f64[2, 5], f64[3, 2]):
    return transpose(x), reshape(x, (6,)), concat((x, x), axis=0), x[:, 1:], pad(x, ((0, 0), (1, 1))), flip(x.T, 0)

def shp_b(x: f64[4, 2, 3]) -> (f64[4, 3, 2], f64[4, 6], f64[4, 4, 3], f64[4, 2, 2], f64[4, 2, 5], f64[4, 3, 2]):
    return vmap(shp)(x)

def idx(x: f64[5], i: i32, j: i32) -> (f64, f64[2], f64[5]):
    y = x
    y[i] = 0.0
    return x[i], x[j:j + 2], y

def idx_shared(x: f64[3, 5], i: i32, j: i32) -> (f64[3], f64[3, 2], f64[3, 5]):
    return vmap(idx, in_axes=(0, None, None))(x, i, j)

def idx_lanes(x: f64[3, 5], i: i32[3], j: i32) -> (f64[3], f64[3, 2], f64[3, 5]):
    return vmap(idx, in_axes=(0, 0, None))(x, i, j)

def scan(x: f64[5]) -> (f64[5], f64[5]):
    return cumsum(x), sort(x)

def scan_b(x: f64[3, 5]) -> (f64[3, 5], f64[3, 5]):
    return vmap(scan)(x)

def lin(a: f64[3, 3], b: f64[3]) -> (f64[3], f64[3, 3], f64):
    s = a @ a.T + 3.0 * eye(3)
    return solve(s, b), cholesky(s), det(a)

def lin_b(a: f64[4, 3, 3], b: f64[4, 3]) -> (f64[4, 3], f64[4, 3, 3], f64[4]):
    return vmap(lin)(a, b)

def lin_shared(a: f64[3, 3], b: f64[4, 3]) -> (f64[4, 3], f64[4, 3, 3], f64[4]):
    return vmap(lin, in_axes=(None, 0))(a, b)
"""


def _ew(x, y, a):
    return (jnp.exp(x) * y + a / (1.0 + x * x) - jnp.maximum(x, y) + jnp.where(x > y, x, 2.0 * y)
            + jnp.clip(x, -0.5, 0.5))


def _red(x):
    return jnp.sum(x), jnp.max(x, axis=0), jnp.mean(x, axis=1), jnp.argmax(x, axis=1).astype(jnp.int32), jnp.var(x)


def _mm(a, v, b):
    return a @ v, a @ b, v @ b @ b.T, jnp.dot(v, v)


def _shp(x):
    return x.T, x.reshape(6), jnp.concatenate((x, x), 0), x[:, 1:], jnp.pad(x, ((0, 0), (1, 1))), jnp.flip(x.T, 0)


def _idx(x, i, j):
    return x[i], jax.lax.dynamic_slice(x, (j,), (2,)), x.at[i].set(0.0)


def _scan(x):
    return jnp.cumsum(x), jnp.sort(x)


def _lin(a, b):
    s = a @ a.T + 3.0 * jnp.eye(3)
    return jnp.linalg.solve(s, b), jnp.linalg.cholesky(s), jnp.linalg.det(a)


@pytest.fixture(scope="module")
def families():
    return compile_src(FAMILIES, "families.arr")


CASES = {
    "ew_b": (_ew, (0, None, 0), [(5, 3), (3,), (5,)]),
    "red_b": (_red, 0, [(6, 4, 3)]),
    "mm_b": (_mm, (0, 1, None), [(5, 3, 4), (4, 5), (4, 2)]),
    "shp_b": (_shp, 0, [(4, 2, 3)]),
    "scan_b": (_scan, 0, [(3, 5)]),
    "lin_b": (_lin, 0, [(4, 3, 3), (4, 3)]),
    "lin_shared": (_lin, (None, 0), [(3, 3), (4, 3)]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_each_family_equals_jax_vmap(families, name):
    twin, in_axes, shapes = CASES[name]
    args = [R.normal(size=s) for s in shapes]
    got = getattr(families, name)(*args)
    want = jax.vmap(twin, in_axes=in_axes)(*args)
    got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
    for g, w in zip(got, want, strict=True):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def test_indices_shared_or_per_lane(families):
    x = R.normal(size=(3, 5))
    for name, i, in_axes in (("idx_shared", 2, (0, None, None)), ("idx_lanes", np.array([0, 4, 2], np.int32),
                                                                    (0, 0, None))):
        got = getattr(families, name)(x, i, 1)
        want = jax.vmap(_idx, in_axes=in_axes)(x, i, 1)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=0, atol=0)


def _lowered(mod, name: str, *types: str) -> str:
    return mod[name].lower(*(arrc.spec(t) for t in types)).as_text()


def test_a_batch_of_matrix_vector_products_is_one_matrix_product(families):
    text = _lowered(families, "mm_b", "f64[5, 3, 4]", "f64[4, 5]", "f64[4, 2]")
    assert "arrc.lanes" not in text                     # the rules, not the lane loop
    mod = compile_src("def mv(m: f32[3, 4], v: f32[4]) -> f32[3]:\n    return m @ v\n"
                      "def b(m: f32[3, 4], vs: f32[8, 4]) -> f32[8, 3]:\n    return vmap(mv, in_axes=(None, 0))(m, vs)\n")
    text = _lowered(mod, "b", "f32[3, 4]", "f32[8, 4]")
    assert text.count("stablehlo.dot_general") == 1 and "tensor<3x8xf32>" in text and "stablehlo.while" not in text


def test_functions_with_rules_and_without(families):
    assert "arrc.lanes" not in _lowered(families, "ew_b", "f64[5, 3]", "f64[3]", "f64[5]")
    assert "arrc.lanes" not in _lowered(families, "lin_b", "f64[4, 3, 3]", "f64[4, 3]")
    assert "arrc.lanes" in _lowered(families, "scan_b", "f64[3, 5]")          # sort and cumsum: lane by lane
    assert "arrc.lanes" in _lowered(families, "idx_lanes", "f64[3, 5]", "i32[3]", "i32")


CONTROL = """
def power(a: f64[n, n], steps: i32) -> f64[n]:
    v = ones((n,), dtype=f64)
    for i in range(steps):
        w = a @ v
        v = w / sqrt(sum(w * w))
    return v

def power_b(a: f64[6, 4, 4], steps: i32) -> f64[6, 4]:
    return vmap(power, in_axes=(0, None))(a, steps)

def halve(x: f64) -> (f64, i32):
    n = 0
    while x > 1.0:
        x = x / 2.0
        n = n + 1
    return x, n

def halve_b(x: f64[5]) -> (f64[5], i32[5]):
    return vmap(halve)(x)

def branch(x: f64[3]) -> f64[3]:
    y = x * 2.0
    if sum(x) > 0.0:
        y = exp(x)
    return y

def branch_b(x: f64[4, 3]) -> f64[4, 3]:
    return vmap(branch)(x)

def nested(x: f64[2, 3]) -> f64[2, 3]:
    return vmap(branch)(x)

def nested_b(x: f64[5, 2, 3]) -> f64[5, 2, 3]:
    return vmap(nested)(x)
"""


def _power(a, steps):
    def body(i, v):
        w = a @ v
        return w / jnp.sqrt(jnp.sum(w * w))
    return jax.lax.fori_loop(0, steps, body, jnp.ones(a.shape[0]))


def _halve(x):
    def body(c):
        return c[0] / 2.0, c[1] + 1
    return jax.lax.while_loop(lambda c: c[0] > 1.0, body, (x, jnp.int32(0)))


def _branch(x):
    return jax.lax.cond(jnp.sum(x) > 0.0, jnp.exp, lambda x: x * 2.0, x)


def test_loops_and_branches_with_per_lane_conditions():
    mod = compile_src(CONTROL, "control.arr")
    a = R.normal(size=(6, 4, 4))
    np.testing.assert_allclose(mod.power_b(a, 9), jax.vmap(_power, in_axes=(0, None))(a, 9), rtol=1e-12)
    assert "arrc.lanes" not in _lowered(mod, "power_b", "f64[6, 4, 4]", "i32")   # the loop's count is shared
    x = np.array([0.5, 3.0, 17.0, 1.0, 1000.0])
    for g, w in zip(mod.halve_b(x), jax.vmap(_halve)(x)):
        np.testing.assert_array_equal(g, w)
    xs = R.normal(size=(4, 3))
    np.testing.assert_allclose(mod.branch_b(xs), jax.vmap(_branch)(xs), rtol=1e-13)
    xs = R.normal(size=(5, 2, 3))
    np.testing.assert_allclose(mod.nested_b(xs), jax.vmap(jax.vmap(_branch))(xs), rtol=1e-13)


def test_axes_negative_shared_and_several_results():
    mod = compile_src("""
def f(x: f32[3], y: f32[2]) -> (f32[3, 2], f32):
    return outer(x, y), sum(x)

def g(x: f32[3, 4], y: f32[2]) -> (f32[3, 4, 2], f32[4]):
    return vmap(f, in_axes=(-1, None), out_axes=(1, 0))(x, y)

def h(x: f32[3, 4], y: f32[2, 4]) -> (f32[3, 2, 4], f32[4]):
    return vmap(f, in_axes=1, out_axes=(-1, 0))(x, y)
""")
    x, y, ys = (R.normal(size=s).astype(np.float32) for s in ((3, 4), (2,), (2, 4)))
    twin = lambda x, y: (jnp.outer(x, y), jnp.sum(x))           # noqa: E731
    for got, want in ((mod.g(x, y), jax.vmap(twin, in_axes=(-1, None), out_axes=(1, 0))(x, y)),
                      (mod.h(x, ys), jax.vmap(twin, in_axes=1, out_axes=(-1, 0))(x, ys))):
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-6)


def test_random_keys_per_lane_are_jax_vmap_bit_for_bit():
    mod = compile_src("""
def sample(k: key) -> (f32[3], i32[2], f64):
    a, b = split(k)
    return normal(a, (3,)), randint(b, (2,), 0, 10), uniform(fold_in(k, 7), (), f64)

def many(k: key) -> (f32[8, 3], i32[8, 2], f64[8]):
    return vmap(sample)(split(k, 8))
""")

    def sample(k):
        a, b = jax.random.split(k)
        return (jax.random.normal(a, (3,), jnp.float32), jax.random.randint(b, (2,), 0, 10, jnp.int32),
                jax.random.uniform(jax.random.fold_in(k, 7), (), jnp.float64))
    for seed in (0, 123):
        got = mod.many(arrc.key(seed))
        want = jax.vmap(sample)(jax.random.split(jax.random.key(seed), 8))
        for g, w in zip(got, want, strict=True):
            g, w = np.asarray(g), np.asarray(w)
            assert g.dtype == w.dtype and g.tobytes() == w.tobytes()


DERIVATIVES = """
def loss(w: f64[3], x: f64[3], y: f64) -> f64:
    return (tanh(dot(w, x)) - y) ** 2

def batch_loss(w: f64[3], xs: f64[8, 3], ys: f64[8]) -> f64:
    return mean(vmap(loss, in_axes=(None, 0, 0))(w, xs, ys))

def per_example(w: f64[3], x: f64[3], y: f64) -> f64[3]:
    return grad(loss)(w, x, y)

def per_example_b(w: f64[3], xs: f64[8, 3], ys: f64[8]) -> f64[8, 3]:
    return vmap(per_example, in_axes=(None, 0, 0))(w, xs, ys)
"""


def _loss(w, x, y):
    return (jnp.tanh(jnp.dot(w, x)) - y) ** 2


def test_vmap_and_grad_compose_both_ways():
    mod = compile_src(DERIVATIVES, "d.arr")
    w, xs, ys = R.normal(size=3), R.normal(size=(8, 3)), R.normal(size=8)
    batch = lambda w: jnp.mean(jax.vmap(_loss, in_axes=(None, 0, 0))(w, xs, ys))      # noqa: E731
    np.testing.assert_allclose(arrc.grad(mod.batch_loss)(w, xs, ys), jax.grad(batch)(w), rtol=1e-12)
    np.testing.assert_allclose(mod.per_example_b(w, xs, ys),
                               jax.vmap(jax.grad(_loss), in_axes=(None, 0, 0))(w, xs, ys), rtol=1e-12)


BOUNDED_LANES = """
def h(x: f32, n: i32) -> f32:
    y = x
    for i in range(n, bound=10):
        y = y * 0.5 + x
    return y

def loss(xs: f32[4], n: i32) -> f32:
    return sum(vmap(h, in_axes=(0, None))(xs, n))

def main(xs: f32[4], n: i32) -> f32[4]:
    return grad(loss)(xs, n)
"""


def test_grad_of_a_vmap_checks_the_mapped_loops_bound():
    """`grad(loss)` where `loss` vmaps a function with a bounded loop: the derivative checks that bound
    (it raised an internal NotAtDefinition before: `h` counted as called by nobody)."""
    mod = arrc.loads(BOUNDED_LANES)
    xs = np.arange(4, dtype=np.float32)
    for n in (0, 3, 10):            # y_n = x (0.5^n + 2 (1 - 0.5^n)), dy_n/dx = 2 - 0.5^n
        np.testing.assert_allclose(mod.main(xs, np.int32(n)), np.full(4, 2 - 0.5 ** n), rtol=1e-6)
    with pytest.raises(arrc.LoopBoundExceeded, match="R0006"):
        mod.main(xs, np.int32(12))


def test_arrc_vmap_of_a_function_whose_derivative_checks_a_bound_says_so_from_python():
    """`arrc.vmap(mod.main)`: a TypeError naming the route that works, where it was E0216 at a line of the wrapper
    that the user's file does not have."""
    mod = arrc.loads(BOUNDED_LANES.replace("sum(vmap(h, in_axes=(0, None))(xs, n))", "h(xs[0], n)"), filename="b.arr")
    with pytest.raises(TypeError, match=r"^vmap of `main`, whose derivative checks a loop's bound, is not supported "
                                        r"yet \(E0216\): `jax.vmap\(mod.main.as_jax\(\)\)` runs it lane by lane$"):
        arrc.vmap(mod.main)
    xs = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_allclose(jax.vmap(mod.main.as_jax(), in_axes=(0, None))(xs, np.int32(3)),
                               np.array([[1, 0, 0, 0]] * 2) * (2 - 0.5 ** 3), rtol=1e-6)


def test_a_module_function_named_vmap_is_no_higher_order_call():
    """A module function named `vmap` is called as any function: `vmap(h)` with `h` a parameter calls the
    module's `vmap`, not the function `h`, whose loop no derivative reaches (no W0004)."""
    src = ("def vmap(x: f32) -> f32:\n    return x\n\n"
           "def h(x: f32, n: i32) -> f32:\n    y = x\n    for i in range(n):\n        y = y * x\n    return y\n\n"
           "def loss(h: f32, n: i32) -> f32:\n    return vmap(h)\n\n"
           "def main(x: f32, n: i32) -> f32:\n    return grad(loss)(x, n)\n")
    mod = arrc.loads(src)
    assert [d.code for d in mod.warnings] == []
    assert mod.main(np.float32(2.0), np.int32(3)) == 1.0


EFFECTS = """
def step(x: f32[2]) -> f32[2]:
    y = -x
    if x[0] > 0.0:
        print("positive lane", x[0])
        y = log(x)
    assert x[1] < 10.0, "too large"
    return y

def steps(x: f32[4, 2]) -> f32[4, 2]:
    return vmap(step)(x)
"""


def test_print_assert_and_discarded_branches_are_per_lane(capfd):
    """JAX's vmap of a cond runs both branches: its debug.print prints for lanes that took the other one,
    and a NaN check reports a NaN computed in the branch a lane discarded. arr's lanes do neither."""
    x = np.array([[1.0, 0.0], [-2.0, 1.0], [3.0, 2.0], [-1.0, 0.0]], np.float32)
    for scope in ("results", "all-ops"):
        mod = arrc.loads(EFFECTS, filename="effects.arr", guards="nan", guard_scope=scope)
        capfd.readouterr()
        got = mod.steps(x)                  # log of the negative lanes is never computed: no fault
        assert capfd.readouterr().out == "positive lane 1.0\npositive lane 3.0\n"
        np.testing.assert_allclose(got, np.where(x[:, :1] > 0, np.log(np.abs(x)), -x), rtol=1e-6)
    bad = x.copy()
    bad[2, 1] = 20.0
    with pytest.raises(arrc.AssertionFailed, match="too large") as info:
        mod.steps(bad)
    assert str(info.value).splitlines()[-2:] == ["  = note: in lane 2 of vmap(step)",
                                                 "  = note: in vmap(step), called from steps at effects.arr:11:12"]
    assert info.value.lanes == (2,) and info.value.iteration is None
    assert capfd.readouterr().out == "positive lane 1.0\npositive lane 3.0\n"   # lane 2 prints, then fails


def test_vmap_fills_default_parameters_as_a_call_does():
    """`vmap(g)(x)` with g's trailing parameters left out takes their defaults, shared by every lane, as
    `grad(g)(x)` and a call do, and as Python fills them inside jax.vmap. Before: E0103."""
    mod = arrc.loads("def g(x: f64[3], s: f64 = 2.0, p: i32 = 3) -> f64:\n    return sum(x ** p) * s\n"
                     "def b(x: f64[4, 3]) -> f64[4]:\n    return vmap(g)(x)\n"
                     "def c(x: f64[4, 3], s: f64[4]) -> f64[4]:\n    return vmap(g)(x, s)\n")
    def g(x, s=2.0, p=3):
        return jnp.sum(x ** p) * s
    x, s = R.normal(size=(4, 3)), R.normal(size=4)
    np.testing.assert_allclose(mod.b(x), jax.vmap(g)(x), rtol=1e-13)
    np.testing.assert_allclose(mod.c(x, s), jax.vmap(g)(x, s), rtol=1e-13)
    v = arrc.vmap(mod.g)                    # from Python: an int in_axes leaves the defaults shared, as jax.vmap
    assert v.signature == "(x: f64[lanes, 3], s: f64 = 2.0, p: i32 = 3) -> f64[lanes]"
    np.testing.assert_allclose(v(x), jax.vmap(g)(x), rtol=1e-13)
    np.testing.assert_allclose(arrc.vmap(mod.g, in_axes=(0, 0, None))(x, s), jax.vmap(g)(x, s), rtol=1e-13)


def test_zero_lanes_on_the_lane_loop(capfd):
    """A batch of none through the lane loop (sort, a per-lane index, print and assert) runs no lane: the
    results are empty, as jax.vmap's, and nothing prints (a row of size 1 cannot be sliced from none)."""
    mod = arrc.loads("def f(x: f64[3], i: i32) -> (f64[3], f64):\n    print(\"lane\")\n"
                     "    assert x[0] < 10.0\n    return sort(x), x[i]\n"
                     "def b(x: f64[n, 3], i: i32[n]) -> (f64[n, 3], f64[n]):\n    return vmap(f)(x, i)\n",
                     guards="all")
    assert "arrc.lanes" in mod.b.lower(arrc.spec("f64[2, 3]"), arrc.spec("i32[2]")).as_text()
    for n in (0, 2):
        x, i = R.normal(size=(n, 3)), np.arange(n, dtype=np.int32)
        want = jax.vmap(lambda x, i: (jnp.sort(x), x[i]))(x, i)
        for g, w in zip(mod.b(x, i), want, strict=True):
            assert g.shape == w.shape
            np.testing.assert_array_equal(g, w)
        assert capfd.readouterr().out == "lane\n" * n


def test_a_guard_report_names_the_lane_in_either_way_of_batching():
    rules = arrc.loads("def f(x: f32[3]) -> f32[3]:\n    return log(x - 1.0)\n"
                       "def b(x: f32[4, 3]) -> f32[4, 3]:\n    return vmap(f)(x)\n", filename="v.arr", guards="nan")
    lanes = arrc.loads("def f(x: f32[3]) -> f32[3]:\n    print(\"lane\")\n    return log(x - 1.0)\n"
                       "def b(x: f32[4, 3]) -> f32[4, 3]:\n    return vmap(f)(x)\n", filename="w.arr", guards="nan")
    x = np.full((4, 3), 3.0, np.float32)
    x[2, 1] = 0.5
    with pytest.raises(arrc.NaNError) as info:
        rules.b(x)
    assert str(info.value) == """\
error[R0001]: NaN produced at run time
 --> v.arr:2:12
  |
2 |     return log(x - 1.0)
  |            ^^^^^^^^^^^^ this `log` produced NaN at index [1]
  |
  = note: operands at [1]: (x - 1.0) = -0.5
  = note: in lane 2 of vmap(f)
  = note: in vmap(f), called from b at v.arr:4:12
"""
    with pytest.raises(arrc.NaNError) as info:
        lanes.b(x)
    text = str(info.value)
    assert "this `log` produced NaN at index [1]" in text and "in lane 2 of vmap(f)" in text


@pytest.mark.parametrize("call, code, message", [
    ("vmap(f, in_axes=(0, 0, 0))(x, y)", "E0204", "`in_axes` has 3 entries, but `f` has 2 argument(s)"),
    ("vmap(f, in_axes=(2, 0))(x, y)", "E0204", "`vmap`: axis 2 is out of range for argument 0, f32[4, 3]"),
    ("vmap(f)(x, z)", "E0202", "`vmap`: the arguments have 4 and 5 lanes"),
    ("vmap(g)(x, y)", "E0210", "`vmap` takes a module function by name, e.g. `vmap(f)(xs)`"),
    ("vmap(f, in_axes=None)(x, y)", "E0204", "`vmap` needs at least one argument with an axis to map over"),
    ("vmap(f, axes=0)(x, y)", "E0103", "`vmap` has no parameter `axes`"),
    ("vmap(f, in_axes=(0, s))(x, y)", "E0204", "`in_axes` must be an integer, `None`, or a tuple of those"),
    ("vmap(f, 0)(x, y)", "E0103", "`vmap` takes the function alone by position"),
    ("vmap(f, out_axes=None)(x, y)", "E0204", "`vmap`: every result has its lanes: `out_axes` needs an axis for each"),
    ("vmap(f, out_axes=2)(x, y)", "E0204", "`vmap`: out_axes 2 is out of range for result 0, f32 with its lanes"),
    ("vmap(f, in_axes=(0, 0))(x, s)", "E0204",
     "`vmap`: in_axes gives argument 1 the axis 0, but it is f32, with no axis to map over"),
])
def test_diagnostics(call, code, message):
    src = ("def f(a: f32[3], b: f32[3]) -> f32:\n    return sum(a * b)\n"
           f"def h(x: f32[4, 3], y: f32[4, 3], z: f32[5, 3], s: f32) -> f32[4]:\n    return {call}\n")
    with pytest.raises(arrc.CompileError) as info:
        arrc.loads(src)
    diag = info.value.diagnostics[0]
    assert (diag.code, diag.message) == (code, message)


def test_lanes_that_disagree_name_both_arguments():
    with pytest.raises(arrc.CompileError) as info:
        arrc.loads("def f(a: f32[3], b: f32[3]) -> f32:\n    return sum(a * b)\n"
                   "def h(x: f32[4, 3], z: f32[5, 3]) -> f32[4]:\n    return vmap(f)(x, z)\n", filename="l.arr")
    assert str(info.value) == """\
error[E0202]: `vmap`: the arguments have 4 and 5 lanes
 --> l.arr:4:23
  |
4 |     return vmap(f)(x, z)
  |                       ^ 5 lanes (axis 0 of f32[5, 3])
  |                    - 4 lanes (argument 0, f32[4, 3])
  |
  = help: every mapped axis must have the same size; give `None` in `in_axes` for an argument every lane shares
"""

    with pytest.raises(arrc.CompileError) as info:          # one lane is not "1 lanes"
        arrc.loads("def f(a: f32[3], b: f32[3]) -> f32:\n    return sum(a * b)\n"
                   "def h(x: f32[1, 3], z: f32[5, 3]) -> f32[1]:\n    return vmap(f)(x, z)\n", filename="l.arr")
    assert str(info.value).splitlines()[0] == "error[E0202]: `vmap`: the arguments have 1 and 5 lanes"
    assert info.value.diagnostics[0].labels[0].message == "1 lane (argument 0, f32[1, 3])"


def test_the_python_api():
    mod = arrc.loads("def f(x: f32[3], a: f32) -> (f32, f32[3]):\n    return sum(x) * a, x * a\n")
    v = arrc.vmap(mod.f, in_axes=(0, None))
    assert v.signature == "(x: f32[lanes, 3], a: f32) -> (f32[lanes], f32[lanes, 3])"
    xs = R.normal(size=(6, 3)).astype(np.float32)
    got = v(xs, 2.0)
    want = jax.vmap(lambda x, a: (jnp.sum(x) * a, x * a), in_axes=(0, None))(xs, 2.0)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    t = arrc.vmap(mod.f, in_axes=(1, None), out_axes=(0, 1))
    assert t.signature == "(x: f32[3, lanes], a: f32) -> (f32[lanes], f32[3, lanes])"
    np.testing.assert_allclose(t(xs.T, 2.0)[1], (xs * 2.0).T, rtol=1e-6)
    with pytest.raises(ValueError, match="in_axes must be an int, None or a tuple of 2"):
        arrc.vmap(mod.f, in_axes=(0,))
    with pytest.raises(ValueError, match=r"^out_axes: every result has its lanes.*not \(0, None\)$"):
        arrc.vmap(mod.f, in_axes=(0, None), out_axes=(0, None))      # was E0204 at a line of the wrapper
    with pytest.raises(TypeError, match="vmap takes a function of an arr module"):
        arrc.vmap(len)
    loss = arrc.loads("def l(w: f64[2], x: f64[2]) -> f64:\n    return dot(w, x) ** 2\n")
    with pytest.raises(TypeError, match=r"in arr, or transform in JAX: `jax.vmap\(jax.grad\(mod.f.as_jax\(\)\)\)`$"):
        arrc.vmap(arrc.grad(loss.l))                    # (the route that works, named)
    xs = R.normal(size=(4, 2))
    np.testing.assert_allclose(jax.vmap(jax.grad(loss.l.as_jax()), in_axes=(None, 0))(np.ones(2), xs),
                               jax.vmap(jax.grad(lambda w, x: jnp.dot(w, x) ** 2), in_axes=(None, 0))(np.ones(2), xs))
    per_lane = arrc.vmap(loss.l, in_axes=(None, 0))
    total = arrc.grad(arrc.loads(per_lane.module.sources[next(iter(per_lane.module.sources))].text +
                                 "\ndef total(w: f64[2], xs: f64[4, 2]) -> f64:\n    return sum(__arrc_vmap_of_l(w, xs))\n").total)
    xs = R.normal(size=(4, 2))
    np.testing.assert_allclose(total(np.array([0.5, -1.0]), xs),
                               jax.grad(lambda w: jnp.sum((xs @ w) ** 2))(np.array([0.5, -1.0])), rtol=1e-12)


@pytest.mark.parametrize("src", [
    "def vmap(x: f32) -> f32:\n    return x\n\ndef f(x: f32[3]) -> f32:\n    return sum(x)\n",   # shadows the builtin
    "def f(vmap: f32[3]) -> f32:\n    return sum(vmap)\n",
    "def f(lanes: f32[3]) -> f32:\n    return sum(lanes)\n",
    "def f(x: f32[3]) -> f32:\n    return sum(x)\n\ndef vmap_of_f(x: f32) -> f32:\n    return x\n",
])
def test_the_python_api_wraps_any_module(src):
    """arrc.vmap adds a wrapper that calls `vmap`: names in the module never collide with it (they were
    E0210, E0102 or E0206 from the wrapper's text)."""
    v = arrc.vmap(arrc.loads(src).f)
    assert v.signature.endswith("-> f32[lanes]") or v.signature.endswith("-> f32[lanes1]")
    np.testing.assert_array_equal(v(np.ones((2, 3), np.float32)), [3.0, 3.0])


def test_a_report_from_the_python_api_names_vmap_f_and_no_wrapper():
    mod = arrc.loads("def f(x: f32[3]) -> f32:\n    return sum(log(x))\n", filename="q.arr", guards="nan")
    x = np.ones((2, 3), np.float32)
    x[1, 1] = -1.0
    with pytest.raises(arrc.NaNError) as info:
        arrc.vmap(mod.f)(x)
    # the lane note names vmap(f) (the call note `in vmap(f)` after it said it again)
    assert str(info.value).splitlines()[-2:] == ["  = note: operands at [1]: x = -1.0",
                                                 "  = note: in lane 1 of vmap(f)"]
    with pytest.raises(ValueError, match="needs an argument with an axis to map over"):
        arrc.vmap(mod.f, in_axes=None)
    with pytest.raises(arrc.ArgumentError) as info:           # a wrong argument names vmap(f) too
        arrc.vmap(mod.f)(np.ones((2, 4), np.float32))
    assert str(info.value) == "argument `x` of `vmap(f)` has type f32[2, 4], expected f32[2, 3]; from the other arguments: lanes = 2"
    with pytest.raises(arrc.ArgumentError) as info:           # the parameter to declare is f's, not the wrapper's
        arrc.vmap(arrc.vmap(mod.f))(np.ones((4, 2, 3)))
    assert "or declare the parameter `x` of `f` with dtype f64 (arr does not convert it" in str(info.value)
    with pytest.raises(arrc.ArgumentError, match=r"^vmap\(f\)\(x: f32\[lanes, 3\]\) -> f32\[lanes\] takes 1"):
        arrc.vmap(mod.f)(x, x)
    with pytest.raises(arrc.ArgumentError, match=r"^vmap\(f\)\(\) has no parameter `y`"):
        arrc.vmap(mod.f)(x=x, y=x)
    checked = arrc.loads("def f(x: f32[3]) -> f32:\n    assert sum(x) < 5.0, \"small\"\n    return sum(x)\n")
    with pytest.raises(arrc.AssertionFailed) as info:     # an assert's report too (it said `in f`)
        arrc.vmap(checked.f)(np.array([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]], np.float32))
    assert str(info.value).splitlines()[-2:] == ["  |", "  = note: in lane 1 of vmap(f)"]
    with pytest.raises(arrc.AssertionFailed) as info:     # and under arrc.grad, as its guard reports say
        arrc.grad(checked.f)(np.full(3, 2.0, np.float32))
    assert str(info.value).splitlines()[-1] == "  = note: in grad(f)"
    vv = arrc.vmap(arrc.vmap(mod.f))                 # a vmap of a vmap: no wrapper's name either
    assert repr(vv) == "<arr function vmap(vmap(f))(x: f32[lanes1, lanes, 3]) -> f32[lanes1, lanes]>"
    with pytest.raises(arrc.NaNError) as info:
        vv(np.stack([x, x, x]))
    assert str(info.value).splitlines()[-2:] == ["  = note: in lane 0 of vmap(vmap(f))", "  = note: in lane 1 of vmap(f)"]
    assert info.value.lanes == (0, 1) and info.value.iteration is None and info.value.index == (1,)


def test_the_example_equals_jax():
    from pathlib import Path
    mod = arrc.load(str(Path(__file__).resolve().parent.parent / "examples" / "vmap.arr"), guards="all")
    losses, mean_grad, clipped = mod.main()
    kx, kn = jax.random.split(jax.random.key(5))
    x = jax.random.normal(kx, (8, 3), jnp.float64)
    y = x @ jnp.array([0.5, -1.0, 2.0]) + 0.1 * jax.random.normal(kn, (8,), jnp.float64)
    w = jnp.zeros(3)

    def loss(w, x, y):
        return (jnp.dot(w, x) - y) ** 2
    grads = jax.vmap(jax.grad(loss), in_axes=(None, 0, 0))(w, x, y)
    norms = jnp.sqrt(jnp.sum(grads * grads, axis=1, keepdims=True))
    np.testing.assert_allclose(losses, jax.vmap(loss, in_axes=(None, 0, 0))(w, x, y), rtol=1e-12)
    np.testing.assert_allclose(mean_grad, jnp.mean(grads, axis=0), rtol=1e-12)
    np.testing.assert_allclose(clipped, jnp.mean(jnp.where(norms > 1.0, grads / norms, grads), axis=0), rtol=1e-12)


def test_the_bounds_guard_of_a_gather_with_per_lane_indices():
    """The check of `x[i]`, `i` an index array that differs between lanes, runs in the lane loop: its report site
    had ten attributes, and XLA (jaxlib 0.10) failed to compile an op with ten ("Failed to sanitize discardable
    attributes"), from arr and under jax.vmap."""
    mod = arrc.loads("def g(x: f64[4], i: i64[2]) -> f64[2]:\n    return x[i]\n\n"
                     "def vg(x: f64[b, 4], i: i64[b, 2]) -> f64[b, 2]:\n    return vmap(g)(x, i)\n",
                     filename="g.arr", guards="bounds")
    x = np.arange(8.0).reshape(2, 4)
    np.testing.assert_array_equal(mod.vg(x, np.array([[0, 3], [1, 2]])), [[0.0, 3.0], [5.0, 6.0]])
    with jax.enable_x64(True):
        np.testing.assert_array_equal(jax.jit(jax.vmap(mod.g.as_jax()))(x, np.array([[0, 3], [-1, 2]])),
                                      [[0.0, 3.0], [7.0, 6.0]])
    with pytest.raises(arrc.BoundsError, match=r"(?s)index 9 is out of range.*in lane 1 of vmap\(g\)"):
        mod.vg(x, np.array([[0, 3], [1, 9]]))


def test_bounds_and_division_guards_in_the_rules():
    mod = arrc.loads("def f(x: f32[3], i: i32) -> f32:\n    return x[i] * 2.0\n"
                     "def g(x: f32[4, 3], i: i32) -> f32[4]:\n    return vmap(f, in_axes=(0, None))(x, i)\n"
                     "def d(x: i32[3], y: i32) -> i32[3]:\n    return x // y\n"
                     "def e(x: i32[4, 3], y: i32[4]) -> i32[4, 3]:\n    return vmap(d)(x, y)\n",
                     filename="b.arr", guards="all")
    assert "arrc.lanes" not in _lowered(mod, "g", "f32[4, 3]", "i32")
    with pytest.raises(arrc.BoundsError) as info:
        mod.g(np.ones((4, 3), np.float32), 7)
    assert str(info.value) == """\
error[R0003]: index out of range at run time
 --> b.arr:2:12
  |
2 |     return x[i] * 2.0
  |            ^^^^ index 7 is out of range for dimension 0 of size 3
  |
  = note: in every lane of vmap(f) (the index is the same in each)
  = note: valid indices are -3..2; the index was clamped into range
  = note: in vmap(f), called from g at b.arr:4:12
"""
    with pytest.raises(arrc.DivisionByZero) as info:
        mod.e(np.ones((4, 3), np.int32), np.array([1, 1, 0, 1], np.int32))
    assert "this division has a zero divisor at index [0]" in str(info.value)
    assert "in lane 2 of vmap(d)" in str(info.value)


def test_grad_through_the_lane_loop():
    mod = compile_src("def f(x: f64[4]) -> f64:\n    return sum(sort(x) * [1.0, 2.0, 3.0, 4.0])\n"
                      "def total(x: f64[12, 4]) -> f64:\n    return sum(vmap(f)(x))\n")
    assert "arrc.lanes" in _lowered(mod, "total", "f64[12, 4]")
    x = R.normal(size=(12, 4))
    f = lambda x: jnp.sum(jnp.sort(x) * jnp.array([1.0, 2.0, 3.0, 4.0]))     # noqa: E731
    np.testing.assert_allclose(arrc.grad(mod.total)(x), jax.grad(lambda x: jnp.sum(jax.vmap(f)(x)))(x), rtol=1e-12)


LANE_BODIES = [
    "return exp(x) + sin(x) * cos(x)", "return cumsum(x)", "return cummax(x)", "return sort(x)", "return roll(x, 2)",
    "return x[::-1]", "return where(x > 0.0, x, 0.0)", "return softmax(x)", "return x ** 2.0", "return outer(x, x)[0]",
    "return tile(x, 2)[:6]", "return pad(x, ((1, 1),))[:6]", "return round(x * 3.0)", "return diag(outer(x, x))",
    "return layer_norm(x)", "return einsum('i,i->', x, x) * x", "return x - logsumexp(x)",
    "return concat((take(x, [0, 2, 4]), x[[1, 3, 5]]), axis=0)", "return x[argmax(x)] * x",
    "return add_at(x, [0, 0, 1], [1.0, 2.0, 3.0])", "return inv(outer(x, x) + eye(6))[0]",
    "return nonzero(x > 0.0, size=6, fill=0).astype(f32)",
    "y = x\n    for i in range(3):\n        y = y * 0.5 + 1.0\n    return y",
    "y = x\n    i = 0\n    while sum(y) < 10.0 and i < 20:\n        y = y + 1.0\n        i = i + 1\n    return y",
    "y = x\n    if x[0] > 0.0:\n        y = -x\n    return y",
    "i = argmin(x)\n    y = x\n    y[i] = 0.0\n    return y",
]


@pytest.mark.parametrize("body", LANE_BODIES, ids=[b.splitlines()[0][:40] for b in LANE_BODIES])
def test_each_lane_is_the_function_called_on_it(body):
    """Rules or lanes, vmap's lane i is f of lane i (arr against itself, for builtins JAX twins do not cover)."""
    mod = compile_src(f"def f(x: f32[6]) -> f32[6]:\n    {body}\n\ndef g(x: f32[5, 6]) -> f32[5, 6]:\n    return vmap(f)(x)\n")
    xs = R.normal(size=(5, 6)).astype(np.float32)
    np.testing.assert_allclose(mod.g(xs), np.stack([np.asarray(mod.f(x)) for x in xs]), rtol=1e-6, atol=1e-6)


MASKED = """
def lg(x: f32[2]) -> f32[2]:
    if x[0] > 0.0:
        y = log(x)
    else:
        y = -x
    return y

def lg_b(x: f32[4, 2]) -> f32[4, 2]:
    return vmap(lg)(x)

def pick(x: f32[3], i: i32) -> f32:
    y = 0.0
    if x[0] > 0.0:
        y = x[i]
    return y

def pick_b(x: f32[4, 3], i: i32) -> f32[4]:
    return vmap(pick, in_axes=(0, None))(x, i)
"""


def test_a_branch_per_lane_is_both_branches_and_a_select_as_jax_batches_a_cond():
    """An `if` whose condition differs between lanes runs both branches for every lane (no lane loop) and
    selects each lane's results; a NaN the other branch makes for a lane is never a fault, in either guard
    scope, and one in the branch a lane took is reported with its lane."""
    mod = compile_src(CONTROL, "control.arr")
    assert "arrc.lanes" not in _lowered(mod, "branch_b", "f64[4, 3]")
    x = np.array([[1.0, 0.5], [-2.0, 1.0], [3.0, 2.0], [-1.0, 0.0]], np.float32)
    expected = jax.vmap(lambda v: jax.lax.cond(v[0] > 0, jnp.log, jnp.negative, v))(x)
    reports = []
    for scope in ("results", "all-ops"):
        masked = arrc.loads(MASKED, filename="masked.arr", guards="all", guard_scope=scope)
        np.testing.assert_allclose(masked.lg_b(x), expected, rtol=1e-6)     # log of lanes 1, 3: dropped
        bad = x.copy()
        bad[2, 1] = -0.5
        with pytest.raises(arrc.NaNError) as info:
            masked.lg_b(bad)
        reports.append(str(info.value))
    assert reports[0] == reports[1] == """\
error[R0001]: NaN produced at run time
 --> masked.arr:4:13
  |
4 |         y = log(x)
  |             ^^^^^^ this `log` produced NaN at index [1]
  |
  = note: operands at [1]: x = -0.5
  = note: in lane 2 of vmap(lg)
  = note: in vmap(lg), called from lg_b at masked.arr:10:12
"""
    assert "arrc.lanes" not in _lowered(masked, "lg_b", "f32[4, 2]")
    # an index in a branch may be out of range for a lane that does not take it: lane by lane
    assert "arrc.lanes" in _lowered(masked, "pick_b", "f32[4, 3]", "i32")


PER_LANE_DERIVATIVES = """
def branch(x: f64, w: f64) -> f64:
    if x > 0.0:
        return log(x) * w
    else:
        return x * 2.0

def branch_loss(xs: f64[4], w: f64) -> f64:
    return sum(vmap(branch, in_axes=(0, None))(xs, w))

def project(x: f64[2], w: f64[2, 2]) -> f64:
    if x[0] > 0.0:
        return sum(log(x) @ w)
    else:
        return sum(x)

def project_loss(xs: f64[3, 2], w: f64[2, 2]) -> f64:
    return sum(vmap(project, in_axes=(0, None))(xs, w))

def solved(a: f64[2, 2], b: f64[2]) -> f64:
    if a[0, 0] > 0.0:
        return sum(solve(a, b))
    else:
        return sum(b)

def solved_loss(a: f64[3, 2, 2], b: f64[2]) -> f64:
    return sum(vmap(solved, in_axes=(0, None))(a, b))

def climb(x: f64) -> f64:
    y = x
    while y < 1.0:
        y = y + 0.5 + sqrt(2.0 - y)
    return y

def climb_loss(xs: f64[3]) -> f64:
    return sum(vmap(climb)(xs))
"""


@pytest.mark.parametrize("guards", [None, "all"])
def test_the_derivative_of_a_branch_or_loop_computed_for_every_lane_is_each_lanes_own(guards):
    """A lane that did not take a branch (or whose loop had ended) has its values computed there all the same
    and dropped by a select; their derivative must be dropped too. The select gave them a zero cotangent and
    the op's rule made 0 * inf = NaN of it (log at 0 in lane 2, which took the other branch; sqrt(2 - y) at 0
    for the lane that never looped), in x's derivative and in the shared w's. jax.grad of jax.vmap, and of each
    lane's call, has none (JAX transposes each branch with the whole cotangent, then selects)."""
    mod = arrc.loads(PER_LANE_DERIVATIVES, warnings="ignore", guards=guards)
    xs = np.array([1.0, -1.0, 0.0, 2.0])
    branch = lambda x, w: jax.lax.cond(x > 0, lambda x: jnp.log(x) * w, lambda x: x * 2.0, x)   # noqa: E731
    loss = lambda xs, w: jnp.sum(jax.vmap(branch, in_axes=(0, None))(xs, w))                    # noqa: E731
    value, grads = arrc.value_and_grad(mod.branch_loss, argnums=(0, 1))(xs, 3.0)
    want_value, want = jax.value_and_grad(loss, argnums=(0, 1))(xs, 3.0)
    np.testing.assert_allclose(value, want_value, rtol=1e-12)
    for got, expected in zip(grads, want):
        np.testing.assert_allclose(got, expected, rtol=1e-12)
    np.testing.assert_allclose(arrc.jvp(mod.branch_loss)(xs, 3.0, np.ones(4), 1.0),
                               jax.jvp(loss, (xs, 3.0), (np.ones(4), 1.0)), rtol=1e-12)
    project = lambda x, w: jax.lax.cond(x[0] > 0, lambda x: jnp.sum(jnp.log(x) @ w), jnp.sum, x)   # noqa: E731
    loss = lambda xs, w: jnp.sum(jax.vmap(project, in_axes=(0, None))(xs, w))                     # noqa: E731
    xs, w = np.array([[1.0, 2.0], [-1.0, 0.0], [0.5, 3.0]]), np.array([[1.0, 2.0], [3.0, 4.0]])
    for got, expected in zip(arrc.grad(mod.project_loss, argnums=(0, 1))(xs, w), jax.grad(loss, argnums=(0, 1))(xs, w)):
        np.testing.assert_allclose(got, expected, rtol=1e-12)      # (w's: inf * 0 summed over the lanes)
    solved = lambda a, b: jax.lax.cond(a[0, 0] > 0, lambda: jnp.sum(jnp.linalg.solve(a, b)), lambda: jnp.sum(b))  # noqa
    loss = lambda a, b: jnp.sum(jax.vmap(solved, in_axes=(0, None))(a, b))      # noqa: E731
    a = np.array([[[2.0, 1.0], [1.0, 3.0]], [[-1.0, 0.0], [0.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]]])   # lane 1: singular
    for got, expected in zip(arrc.grad(mod.solved_loss, argnums=(0, 1))(a, w[0]),
                             jax.grad(loss, argnums=(0, 1))(a, w[0])):
        np.testing.assert_allclose(got, expected, rtol=1e-12)
    climb = lambda x: jax.lax.while_loop(lambda y: y < 1.0, lambda y: y + 0.5 + jnp.sqrt(2.0 - y), x)  # noqa: E731
    xs = np.array([0.5, 2.0, -1.0])
    np.testing.assert_allclose(arrc.grad(mod.climb_loss)(xs), [jax.jvp(climb, (x,), (1.0,))[1] for x in xs],
                               rtol=1e-12)


def test_the_all_ops_scope_does_not_report_the_derivative_of_a_branch_a_lane_dropped():
    """The adjoints of an op computed for every lane are masked as it is (abi.MASKED): the zero cotangent of a
    lane that did not take the branch made 0 * inf = NaN there (sqrt's derivative at 0 in lane 1, log's in
    lane 2 of branch_loss), which the strict scope reported although the gate's select drops it: in grad,
    jvp, a second derivative and a taped loop. A lane that took the branch is still reported."""
    src = """
def root(x: f64, at: f64) -> f64:
    if x > at:
        y = sqrt(x)
    else:
        y = -x
    return y

def roots(xs: f64[n], at: f64) -> f64:
    return sum(vmap(root, in_axes=(0, None))(xs, at))

def taped(xs: f64[n], at: f64) -> f64:
    s = 0.0
    for i in range(20):
        s = s + roots(xs * f64(i - 10), at)
    return s
"""
    mod = arrc.loads(src, filename="r.arr", guards="all", guard_scope="all-ops")
    np.testing.assert_allclose(arrc.grad(mod.roots)(np.array([-1.0, 0.0, 4.0]), 0.0), [-1.0, -1.0, 0.25])
    # in a loop with a tape: neither the dropped lanes' NaN recorded on it (sqrt of a negative) nor their
    # derivative's in the backward loop is a fault
    root = lambda x: jax.lax.cond(x > 0, jnp.sqrt, jnp.negative, x)        # noqa: E731
    xs = np.array([-1.0, 0.0, 4.0])
    want = jax.grad(lambda xs: sum(jnp.sum(jax.vmap(root)(xs * (i - 10))) for i in range(20)))(xs)
    np.testing.assert_allclose(arrc.grad(mod.taped)(xs, 0.0), want, rtol=1e-12)
    with pytest.raises(arrc.InfError, match="(?s)the derivative of `sqrt` produced inf.*in lane 1 of vmap"):
        arrc.grad(mod.roots)(np.array([-1.0, 0.0, 4.0]), -0.5)
    mod = arrc.loads(PER_LANE_DERIVATIVES, warnings="ignore", guards="all", guard_scope="all-ops")
    xs = np.array([1.0, -1.0, 0.0, 2.0])
    branch = lambda x, w: jax.lax.cond(x > 0, lambda x: jnp.log(x) * w, lambda x: x * 2.0, x)   # noqa: E731
    loss = lambda xs, w: jnp.sum(jax.vmap(branch, in_axes=(0, None))(xs, w))                    # noqa: E731
    for got, expected in zip(arrc.grad(mod.branch_loss, argnums=(0, 1))(xs, 3.0),
                             jax.grad(loss, argnums=(0, 1))(xs, 3.0)):
        np.testing.assert_allclose(got, expected, rtol=1e-12)
    np.testing.assert_allclose(arrc.jvp(mod.branch_loss)(xs, 3.0, np.ones(4), 1.0),
                               jax.jvp(loss, (xs, 3.0), (np.ones(4), 1.0)), rtol=1e-12)
    np.testing.assert_allclose(arrc.jvp(arrc.grad(mod.branch_loss))(xs, 3.0, np.ones(4), 1.0),
                               jax.jvp(jax.grad(loss), (xs, 3.0), (np.ones(4), 1.0)), rtol=1e-12)


def test_the_all_ops_scope_does_not_report_a_failed_factorization_or_nan_of_a_lane_that_dropped_the_branch():
    """A lane that took the other branch is no fault of the branch's `solve` or `cholesky` (a singular or not
    positive definite matrix there), nor of a NaN a reduction or product follows before the select: only the
    batched linear-algebra op's last step (a reshape) was marked abi.MASKED, and the guard saw the NaN reach
    a result through the `sum`. A lane that took the branch is still reported."""
    src = PER_LANE_DERIVATIVES + """
def chol(a: f64[2, 2]) -> f64:
    if a[0, 0] > 0.0:
        return sum(cholesky(a))
    else:
        return a[0, 0]

def chols(a: f64[3, 2, 2]) -> f64[3]:
    return vmap(chol)(a)

def lsum(x: f32[2]) -> f32:
    if x[0] > 0.0:
        y = sum(log(x))
    else:
        y = x[0]
    return y

def lsums(x: f32[4, 2]) -> f32[4]:
    return vmap(lsum)(x)
"""
    mod = arrc.loads(src, filename="l.arr", warnings="ignore", guards="all", guard_scope="all-ops")
    solved = lambda a, b: jax.lax.cond(a[0, 0] > 0, lambda: jnp.sum(jnp.linalg.solve(a, b)), lambda: jnp.sum(b))  # noqa
    loss = lambda a, b: jnp.sum(jax.vmap(solved, in_axes=(0, None))(a, b))      # noqa: E731
    a = np.array([[[2.0, 1.0], [1.0, 3.0]], [[-1.0, 0.0], [0.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]]])   # lane 1: singular
    b = np.array([1.0, 2.0])
    np.testing.assert_allclose(mod.solved_loss(a, b), loss(a, b), rtol=1e-12)
    for got, expected in zip(arrc.grad(mod.solved_loss, argnums=(0, 1))(a, b), jax.grad(loss, argnums=(0, 1))(a, b)):
        np.testing.assert_allclose(got, expected, rtol=1e-12)
    a[0] = [[1.0, 2.0], [2.0, 4.0]]
    with pytest.raises(arrc.NaNError, match=r"`solve`: the matrix at batch index \[0\] is singular"):
        mod.solved_loss(a, b)
    chol = lambda a: jax.lax.cond(a[0, 0] > 0, lambda: jnp.sum(jnp.linalg.cholesky(a)), lambda: a[0, 0])  # noqa
    a = np.array([[[4.0, 2.0], [2.0, 3.0]], [[-1.0, 0.0], [0.0, -1.0]], [[1.0, 0.0], [0.0, 1.0]]])  # lane 1: not PD
    np.testing.assert_allclose(mod.chols(a), jax.vmap(chol)(a), rtol=1e-12)
    a[2] = [[1.0, 2.0], [2.0, 1.0]]
    with pytest.raises(arrc.NaNError, match="(?s)`cholesky`: the matrix is not positive definite.*in lane 2 of"):
        mod.chols(a)
    lsum = lambda x: jax.lax.cond(x[0] > 0, lambda: jnp.sum(jnp.log(x)), lambda: x[0])     # noqa: E731
    x = np.array([[1.0, 0.5], [-2.0, 1.0], [3.0, 2.0], [-1.0, 0.0]], np.float32)
    np.testing.assert_allclose(mod.lsums(x), jax.vmap(lsum)(x), rtol=1e-6)
    x[2, 1] = -1.0
    with pytest.raises(arrc.NaNError, match="(?s)this `log` produced NaN at index \\[1\\].*in lane 2 of vmap"):
        mod.lsums(x)


def test_a_report_in_nested_vmaps_names_each_lane_outermost_first():
    """An op the inner vmap's rules batched and the outer's batched again has two lane dimensions: the
    report names both lanes (it named the outer one only, and gave the inner lane as an element index)."""
    m = arrc.loads("def l(x: f32) -> f32:\n    return log(x)\n\ndef lg(x: f32[3]) -> f32[3]:\n"
                   "    return vmap(l)(x)\n\ndef lh(x: f32[2, 3]) -> f32[2, 3]:\n    return vmap(lg)(x)\n\n"
                   "def d(a: i32[2], b: i32) -> i32[2]:\n    return a // b\n\ndef dg(a: i32[3, 2], b: i32[3]) -> i32[3, 2]:\n"
                   "    return vmap(d)(a, b)\n\ndef dh(a: i32[2, 3, 2], b: i32[2, 3]) -> i32[2, 3, 2]:\n"
                   "    return vmap(dg)(a, b)\n", filename="n.arr", guards="all")
    with pytest.raises(arrc.NaNError) as info:
        m.lh(np.array([[1, 2, 3], [4, 5, -1]], np.float32))
    assert str(info.value) == """\
error[R0001]: NaN produced at run time
 --> n.arr:2:12
  |
2 |     return log(x)
  |            ^^^^^^ this `log` produced NaN
  |
  = note: operands: x = -1.0
  = note: in lane 1 of vmap(lg)
  = note: in lane 2 of vmap(l)
  = note: in vmap(l), called from vmap(lg) at n.arr:5:12, called from lh at n.arr:8:12
"""
    with pytest.raises(arrc.DivisionByZero) as info:
        m.dh(np.ones((2, 3, 2), np.int32), np.array([[1, 1, 1], [1, 0, 1]], np.int32))
    assert "at index [0]" in str(info.value)
    assert [line.strip() for line in str(info.value).splitlines()[-3:-1]] == [
        "= note: in lane 1 of vmap(dg)", "= note: in lane 1 of vmap(d)"]


LOOPS = """
def shrink(x: f32) -> f32:
    while x > 0.5:
        x = sqrt(x) - 0.3
    return x

def shrink_b(x: f32[4]) -> f32[4]:
    return vmap(shrink)(x)

def fall(x: f32) -> f32:
    while x > 0.5:
        x = log(x - 0.6)
    return x

def fall_b(x: f32[3]) -> f32[3]:
    return vmap(fall)(x)
"""


def test_a_loop_whose_end_differs_between_lanes_runs_until_every_lane_is_done():
    """A `while` whose condition differs between lanes runs while any lane's holds, keeping each finished
    lane's values (as JAX batches a while_loop); a NaN its body makes for a finished lane is no fault, in
    either scope, and one in a running lane is reported with its lane and iteration."""
    mod = compile_src(CONTROL, "control.arr")
    assert "arrc.lanes" not in _lowered(mod, "halve_b", "f64[5]")
    x = np.array([-1.0, 0.9, 5.0, 100.0], np.float32)
    expected = jax.vmap(lambda v: jax.lax.while_loop(lambda v: v > 0.5, lambda v: jnp.sqrt(v) - 0.3, v))(x)
    reports = []
    for scope in ("results", "all-ops"):
        loops = arrc.loads(LOOPS, filename="loops.arr", guards="all", guard_scope=scope)
        np.testing.assert_allclose(loops.shrink_b(x), expected, rtol=1e-6)     # sqrt(-1) of lane 0: dropped
        with pytest.raises(arrc.NaNError) as info:
            loops.fall_b(np.array([0.2, 2.0, 0.55], np.float32))              # lane 2: log(-0.05)
        reports.append(str(info.value))
        assert info.value.iteration == (0,) and info.value.lanes == (2,)       # (the lane was an iteration)
    assert "arrc.lanes" not in _lowered(loops, "shrink_b", "f32[4]")
    assert reports[0] == reports[1] == """\
error[R0001]: NaN produced at run time
  --> loops.arr:12:13
   |
12 |         x = log(x - 0.6)
   |             ^^^^^^^^^^^^ this `log` produced NaN
   |
   = note: operands: (x - 0.6) = -0.050000012
   = note: in loop iteration 0
   = note: in lane 2 of vmap(fall)
   = note: in vmap(fall), called from fall_b at loops.arr:16:12
"""


GRAD_OF_VMAP = """\
def f(v: f32[3]) -> f32:
    return sum(sqrt(v))

def l(xs: f32[2, 3]) -> f32:
    return sum(vmap(f)(xs))

def d(xs: f32[2, 3]) -> f32[2, 3]:
    return grad(l)(xs)

def f2(v: f32[3]) -> f32:
    s = 0.0
    for i in range(3):
        s = s + sqrt(v[i])
    return s

def d2(xs: f32[2, 3]) -> f32[2, 3]:
    return grad(l2)(xs)

def l2(xs: f32[2, 3]) -> f32:
    return sum(vmap(f2)(xs))

def f3(v: f32[3]) -> f32:
    print("lane")
    return sum(sqrt(v))

def l3(xs: f32[2, 3]) -> f32:
    return sum(vmap(f3)(xs))

def d3(xs: f32[2, 3]) -> f32[2, 3]:
    return grad(l3)(xs)
"""


@pytest.mark.parametrize("fn, index, iteration, lane_note", [
    ("d", (2,), None, "in lane 1 of vmap(f)"), ("d2", (), (2,), "in lane 1 of vmap(f2)"),
    ("d3", (2,), None, "in lane 1 of vmap(f3)")])
def test_the_backward_pass_of_a_vmap_names_the_lane(fn, index, iteration, lane_note, capfd):
    """grad of a loss that calls vmap: the lane was counted in the element's index ("index [1, 2]" of a
    rank-1 `v`), or shown as a loop iteration where the lanes ran one by one (a function that prints)."""
    mod = arrc.loads(GRAD_OF_VMAP, filename="gv.arr", guards="all")
    xs = np.ones((2, 3), np.float32)
    xs[1, 2] = 0.0
    with pytest.raises(arrc.InfError) as info:
        getattr(mod, fn)(xs)
    err = info.value
    assert (err.index, err.iteration, err.lanes) == (index, iteration, (1,))
    assert f"= note: {lane_note}" in [line.strip() for line in str(err).splitlines()] and "backward pass" in str(err)
