"""Python and NumPy habits get targeted diagnostics (issue 17, "Diagnostics"): what the goldens in
tests/golden/diagnostics/ do not show: hints that must not fire where the text means something else, both
parsers agreeing, the suggestion table read against the builtin registry at run time, cascades."""
from __future__ import annotations

import numpy as np
import pytest

import arrc
from arrc.compiler import fastparse
from arrc.compiler.builtins import BUILTINS
from arrc.compiler.diagnostics import CompileError
from arrc.compiler.parse import parse, parse_lark
from arrc.compiler.span import Source
from arrc.compiler.suggest import closest, function_help

H = "def f(x: f32[n]) -> f32[n]:\n"


def diags(src: str) -> list:
    with pytest.raises(CompileError) as info:
        arrc.loads(src, filename="t.arr")
    return info.value.diagnostics


def one(src: str):
    [d] = diags(src)
    return d


# ---- syntax: both parsers ------------------------------------------------------------------------
HABITS = {
    "def f(x):\n    return x\n": "`def f(x: f32[n]) -> f32[n]:`",
    "def f(x: f32[n]):\n    return x\n": "`def f(x: f32[n]) -> TYPE:`, e.g. `-> f32` for a scalar or `-> f32[n]`",
    "import numpy as np\n": "not `np.sum(x)`",
    "class A:\n    pass\n": "`def`",
    H + "    g = lambda v: v\n    return x\n": "`def`",
    H + "    y = [v for v in x]\n    return x\n": "whole-array",
    H + "    return sum(v for v in x)\n": "whole-array",
    H + '    print(f"{x}")\n    return x\n': 'print("x =", x)',
    "def f(k: i32) -> i32:\n    while k = 0:\n        k = 1\n    return k\n": "`while k == 0:`",
    "def f(k: i32) -> i32:\n    if k == 0:\n        k = 1\n    else if k == 1:\n        k = 2\n    return k\n": "`elif k == 1:`",
    H + "    y: f32[n] = x\n    return y\n": "`y = x`",
    H + "    y = sum(x\n    return y\n": "close the '(' with ')'",
    H + "    return sum(x]\n": "close the '(' with ')'",
    "def f(i: i32, n: i32) -> bool:\n    return 0 <= i < n\n": "`(... <= i) and (i < ...)`",
    "def f(i: i32, n: i32) -> bool:\n    return where(i > 0, 0 <= i < n, i == n)\n": "`(... <= i) and (i < ...)`",
}


@pytest.mark.parametrize("src", HABITS)
def test_habits_are_syntax_errors_for_both_parsers(src):
    """The fast parser gives up on each (so Lark's error, with its hint, is the one reported)."""
    with pytest.raises(fastparse.GiveUp):
        fastparse.parse(src, "t.arr")
    d = one(src)
    assert d.code == "E0001" and HABITS[src] in d.help


def test_python_spellings_of_values_parse_alike_in_both_parsers():
    src = H + "    a = True\n    b = jnp.sum(x)\n    c = len(x)\n    return x.astype(float)\n"
    assert parse(Source("t.arr", src)) == parse_lark(Source("t.arr", src))


def test_an_error_inside_a_multi_line_call_is_not_an_unclosed_bracket():
    d = one(H + "    y = maximum(x,\n                x x)\n    return y\n")
    assert d.message == "unexpected 'x'" and not d.labels and d.label.startswith("expected ")


def test_a_bracket_closed_later_is_named_as_open_at_a_statement():
    d = one(H + "    y = maximum(x,\n    return y)\n")
    assert [l.message for l in d.labels] == ["this '(' is not closed before line 3"]
    assert (d.labels[0].span.line, d.labels[0].span.col) == (2, 16)


def test_nested_unclosed_brackets_name_the_innermost():
    d = one(H + "    y = maximum(x, abs(x\n    return y\n")
    assert d.labels[0].span.col == 23 and "never closed" in d.labels[0].message


def test_brackets_in_strings_and_comments_are_not_counted():
    d = one(H + '    print("(")  # [\n    return x +\n')
    assert not d.labels and d.message == "unexpected end of line"


def test_an_unmatched_closer():
    d = one(H + "    return x)\n")
    assert d.label == "unmatched ')'"


def test_a_variable_named_lambda_is_not_a_lambda():
    arrc.loads("def f(lambda: f32) -> f32:\n    return lambda * 2.0\n")
    d = one("def f(lambda: f32) -> f32:\n    return lambda * 2.0 +\n")
    assert d.message == "unexpected end of line"


def test_equal_inside_brackets_of_a_condition_is_not_a_comparison_hint():
    d = one("def f(k: i32) -> i32:\n    if sum([k] = 1):\n        k = 1\n    return k\n")
    assert "`==`" not in (d.help or "")


# ---- names ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, wrong", [("expm", "exp"), ("eig", "eigh"), ("correlate", "concat"),
                                         ("scan", "isnan")])
def test_numpy_names_do_not_suggest_a_spelling_neighbour(name, wrong):
    d = one(H + f"    return {name}(x)\n")
    assert d.code == "E0101" and f"did you mean `{wrong}`" not in d.help


@pytest.mark.parametrize("typo, meant", [("exq", "exp"), ("sqrtt", "sqrt"), ("Sum", "sum"), ("argmx", "argmax"),
                                         ("mena", "mean")])
def test_close_misspellings_are_still_suggested(typo, meant):
    assert one(H + f"    return {typo}(x)\n").help == f"did you mean `{meant}`?"


def test_far_or_one_letter_names_get_no_suggestion():
    assert closest("y", ["n", "x"]) is None
    assert closest("inv", ["sin"]) is None
    assert closest("conv", ["concat"]) is None


@pytest.fixture
def builtins_restored():
    """The registry as it was, in its order, after the test (monkeypatch re-inserts a deleted name last, and
    docs/language.md's generated list follows that order: test_op_table then failed after this file)."""
    saved = dict(BUILTINS)
    yield
    BUILTINS.clear()
    BUILTINS.update(saved)


def test_the_table_reads_the_builtin_registry_when_asked(builtins_restored, monkeypatch):   # (restored last)
    monkeypatch.delitem(BUILTINS, "square", raising=False)
    assert function_help("square", []) == "`square` is not in arr yet; write `x * x`"
    assert function_help("square", [], qualified=True) == "`square` is not in arr yet; write `x * x`"
    monkeypatch.setitem(BUILTINS, "square", BUILTINS["abs"])
    assert function_help("square", [], qualified=True) == "builtins are called unqualified: write `square(...)`"
    monkeypatch.delitem(BUILTINS, "max")
    assert "`max`" not in (function_help("amax", []) or "")


def test_a_module_name_that_is_a_local_is_a_local():
    """`np` here is an array: `np.sum(1)` is its method form, `sum(np, 1)` (axis 1 of a vector), not the module."""
    d = one("def f(np: f32[n]) -> f32:\n    return np.sum(1)\n")
    assert d.code == "E0204" and "axis 1 is out of range" in d.message


def test_len_names_the_argument():
    assert "`values.shape[0]`" in one("def f(values: f32[n]) -> i32:\n    return len(values)\n").help


# ---- max/min of two arrays -------------------------------------------------------------------------
@pytest.mark.parametrize("second", ["floor", "0.0"])
def test_max_of_two_values_suggests_maximum(second):
    d = one(f"def f(x: f32[n], floor: f32[n]) -> f32[n]:\n    return max(x, {second})\n")
    assert d.code == "E0204" and "`maximum(a, b)`" in d.help


def test_min_with_an_integer_axis_is_a_reduction():
    arrc.loads("def f(x: f32[n, m]) -> f32[m]:\n    return min(x, 0)\n")
    assert "`minimum(a, b)`" in one("def f(x: f32[n]) -> f32[n]:\n    return min(x, x)\n").help


# ---- cascades ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("body, code", [
    ("    if x > 0.0:\n        return x\n    else:\n        return -x\n", "E0213"),
    ("    if yy > 0.0:\n        return x\n    else:\n        return -x\n", "E0101"),
    ("    for i in range(3):\n        return x\n", "E0106"),
    ("    for i in range(3):\n        if i > 1:\n            return x\n    return x\n", "E0106"),
    ("    i = 0\n    while i < 3:\n        return x\n    return x\n", "E0106"),
])
def test_each_fault_is_reported_once(body, code):
    assert [d.code for d in diags(H + body)] == [code]


def test_a_missing_return_is_still_reported_next_to_an_unrelated_error():
    found = [d.code for d in diags(H + "    y = zz\n    if x[0] > 0.0:\n        y = x\n")]
    assert found == ["E0101", "E0214"]


def test_a_keyword_given_none_takes_a_none_default_as_in_numpy():
    """`sum(x, axis=None)`, `x.max(axis=None)`, `norm(x, ord=None)`: the default they name (was E0101 undefined
    name `None`); a keyword whose default is not None, or a user function's, still says arr has no None."""
    import numpy as np
    mod = arrc.loads("def f(x: f32[2, 3]) -> f32:\n    return sum(x, axis=None) + x.max(axis=None) + norm(x, ord=None)\n")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(mod.f(x), x.sum() + x.max() + np.linalg.norm(x), rtol=1e-6)
    for src in ("def f(x: f32[3]) -> f32:\n    return sum(x, keepdims=None)\n",
                "def g(x: f32[3], k: i32 = 1) -> f32:\n    return sum(x)\n\ndef f(x: f32[3]) -> f32:\n    return g(x, k=None)\n"):
        with pytest.raises(arrc.CompileError) as info:
            arrc.loads(src)
        assert [(d.code, d.message) for d in info.value.diagnostics] == [("E0101", "undefined name `None`")]


# ---- `split`: arr's is jax.random.split, NumPy's cuts an array ------------------------------------------
@pytest.mark.parametrize("call", ["split(x, 2)", "jnp.split(x, 2)", "np.split(x, 2)"])
def test_split_of_an_array_shows_the_slices(call):
    """`np.split(x, 2)` is not `split(x, 2)`: that is the key split, which then refused `x` as a key."""
    d = one(f"def f(x: f32[4]) -> f32[2]:\n    a, b = {call}\n    return a + b\n")
    assert "`x[:k]` and `x[k:]`" in d.help and "write `split(...)`" not in d.help


def test_split_of_a_random_module_is_still_the_key_split():
    d = one("def f(k: key) -> key[2]:\n    return jax.random.split(k)\n")
    assert d.help == "builtins are called unqualified: write `split(...)`"


# ---- a transformed function where a function's name belongs ------------------------------------------------
XENT = "def xent(w: f32[d, k], x: f32[d], y: i32) -> f32:\n    return -sum(one_hot(y, k) * log_softmax(x @ w))\n"


def test_vmap_of_grad_shows_the_def_that_names_it():
    """JAX's per-example gradients, `vmap(grad(loss))`: the help writes the wrapper, and it compiles."""
    d = one(XENT + "def pe(w: f32[d, k], x: f32[b, d], y: i32[b]) -> f32[b, d, k]:\n"
                   "    return vmap(grad(xent), in_axes=(None, 0, 0))(w, x, y)\n")
    wrapper = "def xent_grad(w: f32[d, k], x: f32[d], y: i32) -> f32[d, k]: return grad(xent)(w, x, y)"
    assert d.code == "E0210" and f"`{wrapper}`" in d.help
    arrc.loads(XENT + wrapper + "\n")


def test_grad_of_grad_shows_the_def_that_names_it():
    d = one("def f(x: f32) -> f32:\n    return x ** 3\ndef g(x: f32) -> f32:\n    return grad(grad(f))(x)\n")
    assert "`def f_grad(x: f32) -> f32: return grad(f)(x)`" in d.help


# ---- everyday NumPy/JAX names with an arr idiom ------------------------------------------------------------
@pytest.mark.parametrize("call, idiom", [
    ("ravel(x)", "`x.ravel()`"), ("jnp.diff(x)", "`x[1:] - x[:-1]`"),
    ("np.nan_to_num(x)", "`where(isnan(x), 0.0, x)`"), ("nanmedian(x)", "`median` is the same where `x` holds no NaN"),
    ("nn.max_pool(x, (2, 2))", "`max(reshape(x, (b, c, h // 2, 2, w // 2, 2)), axis=(3, 5))`"),
    ("x.copy()", "`y = x` is a copy"), ("sum(x).item()", "use `sum(x)` itself")])
def test_numpy_names_get_the_arr_idiom(call, idiom):
    """`median` suggested `mean`, `ravel(x)` and `max_pool` nothing, though arr writes each in a line."""
    d = one(H + f"    y = {call}\n    return x\n")
    assert d.code in ("E0101", "E0210") and idiom in d.help and "did you mean" not in d.help


def test_the_idioms_given_compile():
    arrc.loads("def f(x: f32[b, c, h, w]) -> f32[b, c, h // 2, w // 2]:\n"
               "    return max(reshape(x, (b, c, h // 2, 2, w // 2, 2)), axis=(3, 5))\n"
               "def g(x: f32[n]) -> (f32[n - 1], f32[n], f32):\n"
               "    return x[1:] - x[:-1], where(isnan(x), 0.0, x), sort(x)[n // 2]\n")


def test_vmap_of_a_builtin_says_to_wrap_it():
    """`jax.vmap(jax.random.categorical)` is everyday JAX; arr's vmap takes a `def`'s name."""
    d = one("def f(k: key, logits: f32[c]) -> i32[8]:\n    return vmap(categorical, in_axes=(0, None))(split(k, 8), logits)\n")
    assert d.code == "E0210" and d.help.startswith("`categorical` is a builtin: call it in a `def`")


@pytest.mark.parametrize("name", ["jacfwd", "jacrev", "jacobian", "hessian"])
def test_jacobians_show_the_jvp_columns(name):
    """`jax.hessian(f)(x)` said only 'only named functions can be called' (and named grad and value_and_grad
    as the only calls of a call, though vmap(f)(x) is one too)."""
    d = one("def f(x: f32[n]) -> f32:\n    return sum(x ** 3)\n"
            f"def h(x: f32[n]) -> f32[n, n]:\n    return {name}(f)(x)\n")
    assert d.code == "E0210" and "`vmap(col, in_axes=(None, 0))(x, eye(n))" in d.help


def test_the_jacobian_idiom_compiles():
    arrc.loads("def f(x: f32[n]) -> f32:\n    return sum(x ** 3)\n"
               "def g(x: f32[n]) -> f32[n]: return grad(f)(x)\n"
               "def col(x: f32[n], e: f32[n]) -> f32[n]: return jvp(g, (x,), (e,))[1]\n"
               "def h(x: f32[n]) -> f32[n, n]:\n    return vmap(col, in_axes=(None, 0))(x, eye(n))\n").h([1.0, 2.0])


def test_one_argument_where_points_at_nonzero():
    """NumPy's `where(mask)` (the indices of the true elements) got E0103 "missing argument `x`" with no help."""
    d = one("def f(x: f32[4]) -> i32[4]:\n    return where(x > 0.0)\n")
    assert (d.code, d.message) == ("E0103", "missing argument `x` in call to `where`")
    assert d.help == ("NumPy's one-argument `where(mask)` gives the indices of the true elements: in arr that is "
                      "`nonzero(mask, size=n, fill=-1)`, padded to a size known at compile time")
    src = "def f(x: f32[4]) -> i32[4]:\n    return nonzero(x > 0.0, size=4, fill=-1)\n"
    np.testing.assert_array_equal(arrc.loads(src).f(np.array([1, -1, 2, 0], np.float32)), [0, 2, -1, -1])


def test_a_shape_written_as_a_list_of_literals_is_numpys_and_one_with_a_size_says_write_a_tuple():
    """`np.zeros([2, 3])`, `x.reshape([3, 2])`: NumPy and JAX take a list for a shape; arr said "`shape` must be
    an integer, found i32[2]". A list of literals is taken; `[n, 3]` (a run-time array in arr) is E0204 with
    the tuple to write."""
    mod = arrc.loads("def f(x: f32[6]) -> (f32[2, 3], f32[3, 2], f32):\n"
                     "    return zeros([2, 3]), reshape(x, [3, 2]), sum(ones([2, 2]), axis=[0, 1])\n")
    x = np.arange(6, dtype=np.float32)
    zeros, reshaped, total = mod.f(x)
    np.testing.assert_array_equal(zeros, np.zeros([2, 3], np.float32))
    np.testing.assert_array_equal(reshaped, x.reshape([3, 2]))
    assert float(total) == 4.0
    d = one(H + "    return zeros([n, 3])[:, 0]\n")
    assert (d.code, d.message, d.help) == ("E0204", "`shape` must be compile-time integers, found i32[2]",
                                           "write it as a tuple: `(n, 3)`")
