"""Programs ported from NumPy/JAX as their authors first write them: each diagnostic's help must lead to code that
arr accepts and that computes what the NumPy original computed (the help is followed here, then run)."""
from __future__ import annotations

import numpy as np
import pytest

import arrc
from arrc.compiler.diagnostics import CompileError


def one(src: str):
    with pytest.raises(CompileError) as info:
        arrc.loads(src, filename="t.arr")
    [d] = info.value.diagnostics
    return d


def written(help: str) -> str:
    """The code a help line tells the user to write (its first `...` after `write`)."""
    return help.split("write `", 1)[1].split("`", 1)[0]


MASKED = {   # statement -> what NumPy does to (y, x, labels)
    "y[y > 1.5] = 0": lambda y, x, lab: y.__setitem__(y > 1.5, 0),
    "y[isnan(y)] += 2.0": lambda y, x, lab: y.__setitem__(np.isnan(y), y[np.isnan(y)] + 2.0),
    "y[labels == 1] = x": lambda y, x, lab: y.__setitem__(lab == 1, x),
    "y[labels == 1] *= 3.0": lambda y, x, lab: y.__setitem__(lab == 1, y[lab == 1] * 3.0),
}


@pytest.mark.parametrize("stmt", MASKED)
def test_an_assignment_through_a_mask_is_helped_to_the_where_that_does_it(stmt):
    """NumPy's `y[mask] = v` keeps y's shape; the E0303 help of a read (`where(mask, x, 0)`) does not say how to
    write it, so the help of an assignment writes the `where`, a leading-axes mask extended with `None`s."""
    head = "def f(y: f64[4, 5], x: f64[5], labels: i32[4]) -> f64[4, 5]:\n"
    d = one(head + f"    {stmt}\n    return y\n")
    assert d.code == "E0303" and "where(" in d.help
    mod = arrc.loads(head + f"    {written(d.help)}\n    return y\n")
    rng = np.random.default_rng(0)
    y, x, lab = rng.normal(size=(4, 5)) * 2, rng.normal(size=5), np.array([1, 0, 1, 2], np.int32)
    y[1, 1] = np.nan
    expected = y.copy()
    MASKED[stmt](expected, x, lab)
    np.testing.assert_array_equal(np.asarray(mod.f(y, x, lab)), expected)


@pytest.mark.parametrize("expr", ["p[arange(b), y]", "p[r, y - 1]", "p[r - 4, y][::-1]"])
def test_paired_integer_array_indices_are_helped_to_take_along_axis(expr):
    """NumPy's `p[arange(b), y]` picks one element per row; the help was `y = x[idx]` then `y[:, 0]`, which
    gives the block p[rows][:, cols] instead. The help's code matches NumPy, negative indices too."""
    head = "def f(p: f32[b, c], y: i32[b], r: i32[b]) -> f32[b]:\n"
    d = one(head + f"    return {expr}\n")
    assert d.code == "E0204"
    fixes = [written(d.help)]
    rng = np.random.default_rng(0)
    p, y, r = rng.random((4, 3)).astype(np.float32), np.array([2, 0, 1, 2], np.int32), np.array([3, 3, 0, 1], np.int32)
    b = 4
    expected = eval(expr.replace("arange", "np.arange"))
    for fix in fixes:
        mod = arrc.loads(head + f"    return {fix}{expr.split(']', 1)[1]}\n")
        np.testing.assert_array_equal(np.asarray(mod.f(p, y, r)), expected)


@pytest.mark.parametrize("values", ["(-1, 0, 1)", "(0.5, 2.0, 4.0)", "[3, 1]"])
def test_a_loop_over_a_tuple_of_values_is_helped_to_an_array_literal(values):
    """`for i in (-1, 0, 1):` (Game of Life's neighbours): the help wrote `i = (-1, 0, 1)[j]` in a
    `range(n)` loop, which is E0204 (a tuple takes compile-time indices only); now an array literal, and its
    length."""
    d = one(f"def f(x: f64) -> f64:\n    s = 0.0\n    for i in {values}:\n        s += i * x\n    return s\n")
    loop, first = d.help.split("`")[1], d.help.split("then `", 1)[1].split("`", 1)[0]
    mod = arrc.loads(f"def f(x: f64) -> f64:\n    s = 0.0\n    {loop}\n        {first}\n        s += i * x\n"
                     "    return s\n")
    assert float(mod.f(2.0)) == sum(v * 2.0 for v in eval(values))


@pytest.mark.parametrize("name,arr", [("int", "i32"), ("float", "f64"), ("float32", "f32"), ("uint8", "u8"),
                                      ("double", "f64")])
def test_python_and_numpy_dtype_names_in_a_type_name_the_arr_dtype(name, arr):
    """`def train(..., steps: int)`: the help listed all of arr's dtypes, not the one meant."""
    d = one(f"def f(x: {name}) -> i32:\n    return 1\n")
    assert d.code == "E0205" and f"`{arr}`" in d.help and "dtypes are" not in d.help


@pytest.mark.parametrize("call,fixed", [("jax.grad(loss)(w)", "grad(loss)(...)"),
                                        ("jax.value_and_grad(loss, argnums=0)(w)[1]",
                                         "value_and_grad(loss, argnums=0)(...)"),
                                        ("jax.vmap(g)(w)", "vmap(g)(...)")])
def test_a_transformation_called_from_its_jax_module_is_helped_to_the_unqualified_call(call, fixed):
    """`jax.grad(loss)(w)`: the help said only `grad(f)(...)` may call a call's result, which is what was written
    but for `jax.`; it now says to drop the module."""
    d = one("def loss(w: f32[3]) -> f32:\n    return sum(w * w)\ndef g(w: f32) -> f32:\n    return 2.0 * w\n"
            f"def f(w: f32[3]) -> f32[3]:\n    return {call}\n")
    assert d.code == "E0210" and f"write `{fixed}`" in d.help


def test_fill_diagonal_and_prngkey_are_helped_to_arr():
    """`np.fill_diagonal(a, 0.0)` (in place, in the n-body step) and `jax.random.PRNGKey(s)` had the help 'arr has
    no modules and no `...` builtin'; the help's `where` matches NumPy on a non-square matrix."""
    d = one("def f(a: f64[3, 4]) -> f64[3, 4]:\n    np.fill_diagonal(a, 0.0)\n    return a\n")
    mod = arrc.loads("def f(a: f64[3, 4]) -> f64[3, 4]:\n"
                     f"    {written(d.help).replace(', v, ', ', 0.0, ')}\n    return a\n")
    a = np.arange(12.0).reshape(3, 4) + 1
    expected = a.copy()
    np.fill_diagonal(expected, 0.0)
    np.testing.assert_array_equal(np.asarray(mod.f(a)), expected)
    d = one("def f(s: i32) -> u32[2]:\n    return key_data(jax.random.PRNGKey(s))\n")
    assert "write `key(seed)`" in d.help


def test_a_list_of_arrays_of_different_shapes_is_helped_to_a_tuple_for_concatenate():
    """`concatenate([ones((n, 1)), X], axis=1)` (the bias column of least squares): the list is an array
    literal, refused as not rectangular with no help; a list of equal shapes already had the tuple help."""
    head = "def f(X: f64[n, d]) -> f64[n, d + 1]:\n"
    d = one(head + "    return concatenate([ones((n, 1)), X], axis=1)\n")
    assert d.code == "E0202"
    mod = arrc.loads(head + f"    return {written(d.help).replace('axis=...', 'axis=1')}\n")
    X = np.arange(6.0).reshape(3, 2)
    np.testing.assert_array_equal(np.asarray(mod.f(X)), np.concatenate([np.ones((3, 1)), X], axis=1))


def test_a_method_of_a_value_whose_error_is_reported_is_not_reported_again():
    """After `u = u0.copy()` (E0210) `u` is poisoned; `v = u.copy()` was a second E0210 '? has no method
    `copy`', naming no type, and the JAX `.at[...]` chain the same ('? has no method `add`')."""
    with pytest.raises(CompileError) as info:
        arrc.loads("def f(u0: f32[4], i: i32) -> f32[4]:\n    u = u0.copy()\n    v = u.copy()\n"
                   "    w = u0.at[i].set(0.0)\n    w = w.at[0].add(1.0)\n    return v\n", filename="t.arr")
    assert [d.span.line for d in info.value.diagnostics] == [2, 4]
    assert not any("?" in d.message for d in info.value.diagnostics)


@pytest.mark.parametrize("decorator", ["@jax.jit", "@partial(jax.jit, static_argnums=(1,))", "@jit"])
def test_a_decorator_is_a_python_habit_with_its_help(decorator):
    """`@jax.jit` above the first `def` was 'unexpected '@'' with no help."""
    from arrc.compiler import fastparse
    src = f"{decorator}\ndef f(x: f32[3]) -> f32[3]:\n    return x\n"
    with pytest.raises(fastparse.GiveUp):
        fastparse.parse(src, "t.arr")
    d = one(src)
    assert d.message == "arr has no decorators" and "remove it" in d.help
    assert (d.span.line, d.span.col, d.span.end_col) == (1, 1, len(decorator) + 1)


def test_an_augmented_assignment_that_would_widen_is_helped_to_keep_the_dtype():
    """`W -= lr * g` with an f64 `lr` and f32 `W` in a training loop: the help was to rebind, `W = W - ...`,
    which the loop then refuses (E0302). The help now keeps the dtype first, as NumPy's in-place `-=` does."""
    src = "def train(W: f32[3], g: f32[3], lr: f64) -> f32[3]:\n    for i in range(3):\n        {}\n    return W\n"
    d = one(src.format("W -= lr * g"))
    assert d.code == "E0201" and "a loop refuses" in d.help
    fixed = d.help.split("`")[1]
    mod = arrc.loads(src.format(fixed))
    W, g, lr = np.array([1.0, 2.0, 3.0], np.float32), np.array([0.1, 0.2, 0.3], np.float32), np.float64(0.1)
    expected = W.copy()
    for _ in range(3):
        expected -= lr * g
    np.testing.assert_array_equal(np.asarray(mod.train(W, g, lr)), expected)
    # an integer W and a float step: NumPy's in-place `-=` refuses that cast (same_kind), so no `.astype(i32)`
    d = one("def f(W: i32[3], g: f32[3]) -> i32[3]:\n    W -= 0.5 * g\n    return W\n")
    assert d.code == "E0201" and ".astype" not in d.help


@pytest.mark.parametrize("call,fix", [("bincount(x, minlength=4)", "bincount(x, length=4)"),
                                      ("argsort(y, kind=\"stable\")", "argsort(y)")])
def test_numpy_keywords_arr_spells_otherwise_have_a_help(call, fix):
    """`np.bincount(idx, minlength=10)` (a histogram) had only the note listing `x, weights, length`."""
    head = "def f(x: i32[6], y: f32[6]) -> i32[{}]:\n"
    size = 4 if "bincount" in call else 6
    d = one(head.format(size) + f"    return {call}\n")
    assert d.code == "E0103" and d.help
    mod = arrc.loads(head.format(size) + f"    return {fix}\n")
    x, y = np.array([0, 1, 1, 3, 2, 1], np.int32), np.array([2.0, 1.0, 2.0, 0.5, 1.0, 3.0], np.float32)
    expected = np.bincount(x, minlength=4) if "bincount" in call else np.argsort(y, kind="stable")
    np.testing.assert_array_equal(np.asarray(mod.f(x, y)), expected)


@pytest.mark.parametrize("loop", ["for xi in x:", "for i, xi in enumerate(x):", "for xi, yi in zip(x, y):"])
def test_a_python_loop_over_an_array_is_helped_to_a_range_loop_that_runs(loop):
    """`for i, xi in enumerate(x):` and `zip` were 'unexpected ','' with no help; `for xi in x:` had
    `range(n)` with an `n` the function may not have. Each help, followed, sums what Python's loop sums."""
    body = "        s += {}\n    return s\n"
    head = "def f(x: f64[4], y: f64[4]) -> f64:\n    s = 0.0\n"
    term = {"for xi in x:": "xi", "for i, xi in enumerate(x):": "i * xi", "for xi, yi in zip(x, y):": "xi * yi"}[loop]
    d = one(head + f"    {loop}\n" + body.format(term))
    code = d.help.split("`")
    fixed = f"    {code[1]}\n" + "".join(f"        {c}\n" for c in code[3::2] if "=" in c)
    mod = arrc.loads(head + fixed + body.format(term))
    x, y = np.array([1.0, 2.0, 3.0, 4.0]), np.array([0.5, -1.0, 2.0, 0.25])
    expected = sum(eval(term, {"i": i, "xi": x[i], "yi": y[i]}) for i in range(4))
    assert float(mod.f(x, y)) == expected


def test_a_result_computed_in_f32_for_an_f64_result_is_helped_to_compute_in_f64():
    """Monte Carlo pi: `return 4.0 * inside.sum() / N` declared f64 is f32 in arr (an i32 sum with a weak
    float), and the help `.astype(f64)` kept f32's rounding: 3.14732 came back as 3.1473200321197510, where
    NumPy gives 3.14732. The help now converts the operands, which matches NumPy exactly."""
    head = "def mc(inside: bool[100000]) -> f64:\n    N = 100000\n"
    d = one(head + "    return 4.0 * inside.sum() / N\n")
    assert d.code == "E0203" and "convert its operands first" in d.help
    inside = np.zeros(100000, bool)
    inside[:78683] = True
    mod = arrc.loads(head + "    return 4.0 * f64(inside.sum()) / N\n")
    assert float(mod.mc(inside)) == 4.0 * inside.sum() / 100000
    kept = arrc.loads(head + "    return (4.0 * inside.sum() / N).astype(f64)\n")
    assert float(kept.mc(inside)) != 4.0 * inside.sum() / 100000        # what the old help led to
