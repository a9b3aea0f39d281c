"""What an unknown name most likely means: the arr name of a NumPy/JAX function, or a close spelling.

Spelling alone picks wrong neighbours (`inv` -> `sin`, `det` -> `dot`, `svd` -> `std`), so a table of
NumPy/JAX names comes first: the arr builtins that do the same (the first one registered is suggested: the
table is read against the builtin registry when the help is written, so a builtin added later is found),
else how to write it in arr, else that arr does not have it yet. Spelling is the fallback, and only for
close names: an edit distance of at most a third of the name's length (rustc's rule for its suggestions).

>>> function_help("amax", [])
"did you mean `max`? (NumPy's `amax`)"
>>> function_help("exq", ["exp", "sum"])
'did you mean `exp`?'
"""
from __future__ import annotations

from typing import Iterable

from .builtins import BUILTINS
from .ops_random import ARRAY_SPLIT_HELP

# Modules a NumPy/JAX program calls functions from (`np.sum`, `jnp.linalg.inv`, `lax.scan`): arr has none.
MODULES = frozenset({"np", "numpy", "jnp", "jax", "lax", "nn", "math", "scipy", "sp", "torch", "random",
                     "linalg", "jrandom", "onp"})

_LINALG = "is not in arr yet (its linear algebra: docs/linalg.md)"

# NumPy/JAX name -> (the arr builtins that do the same, in order of preference; the help when none exists).
# In the help, `{x}` is the source text of the call's first argument (or `x`).
EQUIVALENTS: dict[str, tuple[tuple[str, ...], str]] = {
    # same operation, another name
    "amax": (("max",), ""), "amin": (("min",), ""), "absolute": (("abs",), ""), "fabs": (("abs",), ""),
    "fmax": (("maximum",), ""), "fmin": (("minimum",), ""), "power": (("pow",), "write `a ** b`"),
    "arcsin": (("asin",), ""), "arccos": (("acos",), ""), "arctan": (("atan",), ""),
    "arctan2": (("atan2",), ""), "concatenate": (("concat", "concatenate"), ""), "hstack": (("concat",), ""),
    "vstack": (("stack", "concat"), ""), "cumulative_sum": (("cumsum",), ""), "round_": (("round",), ""),
    "around": (("round",), ""), "fix": (("trunc",), ""), "permute_dims": (("transpose",), ""),
    "take": (("take",), "index with an integer array: `{x}[idx]`"),
    "take_along_axis": (("take_along_axis",), "index with integer arrays: `{x}[i, idx]`"),
    "square": (("square",), "write `{x} * {x}`"), "reciprocal": (("reciprocal",), "write `1.0 / {x}`"),
    "exp2": (("exp2",), "write `2.0 ** {x}`"), "negative": (("negative",), "write `-{x}`"),
    "logistic": (("sigmoid",), ""), "expit": (("sigmoid",), ""),
    # operators
    "add": ((), "write `a + b`"), "subtract": ((), "write `a - b`"), "multiply": ((), "write `a * b`"),
    "divide": ((), "write `a / b`"), "true_divide": ((), "write `a / b`"), "floor_divide": ((), "write `a // b`"),
    "mod": ((), "write `a % b`"), "remainder": ((), "write `a % b`"), "equal": ((), "write `a == b`"),
    "not_equal": ((), "write `a != b`"), "less": ((), "write `a < b`"), "less_equal": ((), "write `a <= b`"),
    "greater": ((), "write `a > b`"), "greater_equal": ((), "write `a >= b`"),
    "logical_and": ((), "write `a & b` (bool arrays)"), "logical_or": ((), "write `a | b` (bool arrays)"),
    "logical_xor": ((), "write `a ^ b` (bool arrays)"), "logical_not": ((), "write `~{x}` (a bool array)"),
    "left_shift": ((), "write `a << b`"), "right_shift": ((), "write `a >> b`"),
    "bitwise_left_shift": ((), "write `a << b`"), "bitwise_right_shift": ((), "write `a >> b`"),
    # Python builtins and NumPy idioms
    "len": ((), "arr has no `len`: the length of the first axis is `{x}.shape[0]`"),
    "range": ((), "`range` is only the bound of a `for` loop; an array of 0..n-1 is `arange(n)`"),
    "size": ((), "write `{x}.size`"), "shape": ((), "write `{x}.shape`"), "ndim": ((), "write `{x}.ndim`"),
    "float": ((), "arr's dtypes have a width: `{x}.astype(f32)` or `f64({x})`"),
    "int": ((), "arr's dtypes have a width: `{x}.astype(i32)` or `i64({x})`"),
    "array": ((), "write an array literal (`[1.0, 2.0]`) and convert it with `.astype(f32)` where needed"),
    "asarray": ((), "arrays need no conversion; change the dtype with `{x}.astype(f32)`"),
    "nansum": ((), "write `sum(where(isnan({x}), 0.0, {x}))`"),
    "nanmean": ((), "write `sum(where(isnan({x}), 0.0, {x})) / sum(where(isnan({x}), 0.0, 1.0))`"),
    "count_nonzero": ((), "write `sum(where({x} != 0, 1, 0))`"),
    "unique": ((), "its result's shape depends on the values, which arr's static shapes do not allow"),
    "argwhere": ((), "its result's shape depends on the values; use a mask with `where(...)` instead"),
    "ravel": ((), "write `{x}.ravel()` or `reshape({x}, (-1,))`"),
    "flatten": ((), "write `{x}.flatten()` or `reshape({x}, (-1,))`"),
    "copy": ((), "arrays are values in arr: `y = {x}` is a copy, which an update of `y` leaves alone"),
    "diff": ((), "write `{x}[1:] - {x}[:-1]`"),
    "fill_diagonal": ((), "arrays are values in arr: write `{x} = where(eye({x}.shape[0], {x}.shape[1], dtype=bool), "
                          "v, {x})`"),
    "nan_to_num": ((), "write `where(isnan({x}), 0.0, {x})`"),
    **{name: ((), f"`{name}` is not in arr yet (how many elements it skips depends on the values); "
                  f"`{name[3:]}` is the same where `{{x}}` holds no NaN")
       for name in ("nanmedian", "nanquantile", "nanpercentile")},
    **{name: ((), "pooling is a reduction over a reshape: 2 x 2 windows of `{x}: f32[b, c, h, w]` are "
                  "`max(reshape({x}, (b, c, h // 2, 2, w // 2, 2)), axis=(3, 5))` (`mean` to average)")
       for name in ("max_pool", "avg_pool", "reduce_window", "max_pool2d", "avg_pool2d")},
    "jit": ((), "arr functions are compiled already: call the function directly"),
    "vmap": ((), "`vmap` maps a module function over a batch and is called twice, as in JAX: "
                 "`vmap(f, in_axes=0)(xs)`"),
    # Jacobians: columns of `jvp` over the basis (LANGUAGE.md section 15 has grad, value_and_grad, jvp, vjp)
    **{name: ((), f"`{name}` is not in arr yet: its columns are `jvp`s over the basis, "
                  "`def col(x: f32[n], e: f32[n]) -> f32[m]: return jvp(f, (x,), (e,))[1]`, and the Jacobian is "
                  "`vmap(col, in_axes=(None, 0))(x, eye(n)).T`") for name in ("jacfwd", "jacrev", "jacobian")},
    "hessian": ((), "`hessian` is not in arr yet: it is the Jacobian of the gradient, `def g(x: f32[n]) -> f32[n]: "
                    "return grad(f)(x)`, `def col(x: f32[n], e: f32[n]) -> f32[n]: return jvp(g, (x,), (e,))[1]`, "
                    "then `vmap(col, in_axes=(None, 0))(x, eye(n))`"),
    # jax.random names (docs/random.md): arr's spelling, or the recipe that draws the same bits (x64 on)
    "PRNGKey": ((), "arr's keys are typed, as `jax.random.key`'s: write `key(seed)` (PRNGKey's u32[2] is "
                    "`key_data(key(seed))`)"),
    "wrap_key_data": ((), "write `wrap_key({x})`"),
    "exponential": ((), "write `-log1p(-uniform({x}, shape))`, as jax.random.exponential draws it (the same bits)"),
    "choice": ((), "with replacement, write `a[randint({x}, shape, 0, n, dtype=i64)]`, without, "
                   "`permutation({x}, a)[:m]`, as jax.random.choice draws them (the same bits); with `p`, "
                   "not in arr yet"),
    # loops
    "scan": ((), "write a `for` loop (`for i in range(n):`); its carried variables are the scan's carry "
                 "(and `cumsum`/`cumprod`/`cummax`/`cummin` are the common scans)"),
    "fori_loop": ((), "write a `for` loop: `for i in range(lo, hi):`"),
    "while_loop": ((), "write a `while` loop: `while cond:`"),
    "cond": ((), "write `a if c else b`, an `if` statement, or `where(c, a, b)` elementwise"),
    "select": ((), "write `where(c, a, b)`"),
    # linear algebra and signal processing not in arr yet (found once added)
    **{name: ((name,), f"`{name}` ({what}) {_LINALG}") for name, what in [
        ("matrix_rank", "matrix rank"), ("expm", "matrix exponential"), ("matrix_power", "matrix power")]},
    **{name: ((), f"`{name}` (of a general matrix) is not in arr yet; for a symmetric one, `eigh({{x}})`")
       for name in ("eig", "eigvals")},
    "eigvalsh": ((), "write `eigh({x})[0]` (its eigenvalues, ascending)"),
    "solve_triangular": (("triangular_solve",), ""),
    **{np_name: ((), f"write `{arr}({{x}})` or `{{x}}.astype({arr})`") for np_name, arr in [
        ("float16", "f16"), ("bfloat16", "bf16"), ("float32", "f32"), ("float64", "f64"), ("int8", "i8"),
        ("int16", "i16"), ("int32", "i32"), ("int64", "i64"), ("uint8", "u8"), ("uint16", "u16"),
        ("uint32", "u32"), ("uint64", "u64"), ("bool_", "bool")]},
    "norm": (("norm",), "write `sqrt(sum({x} * {x}))` for the 2-norm"),
    **{name: (("conv",), "") for name in ("convolve", "conv_general_dilated", "correlate", "fftconvolve")},
    **{name: ((), f"`{name}` (Fourier transform) is not in arr yet") for name in
       ("fft", "ifft", "rfft", "irfft", "fft2", "fftn")},
    # everyday NumPy names arr is adding: found once registered, else "not in arr yet" (not a misspelling:
    # `log2` is not `log`)
    **{name: ((name,), "") for name in (
        "log2 log10 softplus gelu silu logaddexp hypot deg2rad rad2deg zeros_like ones_like full_like isclose "
        "allclose tensordot roll diag tril triu trace searchsorted repeat bincount histogram interp").split()},
}

# Python spellings of arr's own values.
VALUE_NAMES = {
    "True": "did you mean `true`?", "False": "did you mean `false`?",
    "None": "arr has no `None`: every value is an array (a missing value is usually `nan`, a flag a `bool`)",
    "float": "arr's dtypes have a width: `f32` or `f64` (`x.astype(f32)`)",
    "int": "arr's dtypes have a width: `i32` or `i64` (`x.astype(i32)`)",
    "float32": "arr calls it `f32`", "float64": "arr calls it `f64`", "int32": "arr calls it `i32`",
    "int64": "arr calls it `i64`", "bool_": "arr calls it `bool`", "newaxis": "write `expand_dims(x, axis)`",
}

# NumPy array methods arr has no builtin for -> the help (`{x}`: the array's source text).
METHOD_NAMES = {
    "copy": EQUIVALENTS["copy"][1],
    "item": "a scalar is a value already: use `{x}` itself",
}


def function_help(name: str, known: Iterable[str], first_arg: str = "x", qualified: bool = False,
                  module: str = "") -> str | None:
    """The help line for a call of the unknown function `name` (`qualified`: written `np.name(...)`, `module`
    then `np`); `known` are the other names that could be meant (builtins, module functions), `first_arg` the
    source text of the call's first argument."""
    if qualified and name == "split" and module.rsplit(".", 1)[-1] not in ("random", "jrandom"):
        return ARRAY_SPLIT_HELP.replace("{x}", first_arg)       # `np.split` of an array, not arr's key split
    if qualified and name in BUILTINS and name[:1].isalpha():
        return f"builtins are called unqualified: write `{name}(...)`"
    entry = EQUIVALENTS.get(name)
    if entry is not None:
        names, otherwise = entry
        for arr_name in names:
            if arr_name in BUILTINS and arr_name != name:
                if qualified:
                    return f"builtins are called unqualified; arr calls it `{arr_name}`: write `{arr_name}(...)`"
                return f"did you mean `{arr_name}`? (NumPy's `{name}`)"
        otherwise = otherwise.replace("{x}", first_arg)
        if name in names and "not in arr yet" not in otherwise:
            return f"`{name}` is not in arr yet" + (f"; {otherwise}" if otherwise else "")
        if otherwise:
            return otherwise
    close = closest(name, known)
    if close is not None:
        return f"did you mean `{close}`?"
    if qualified:
        return f"arr has no modules and no `{name}` builtin (docs/language.md lists the builtins)"
    return None


def value_help(name: str, known: Iterable[str]) -> str | None:
    """The help line for the undefined name `name`; `known` are the names in scope."""
    if name in VALUE_NAMES:
        return VALUE_NAMES[name]
    if name in MODULES:
        return "arr has no modules: builtins are called unqualified (`sum(x)`, not `np.sum(x)`)"
    close = closest(name, known)
    return f"did you mean `{close}`?" if close is not None else None


def qualified_value_help(path: list[str]) -> str:
    """The help line for `np.pi`, `jnp.float32`, ... (an attribute of a module name)."""
    name = path[-1]
    if name in ("pi", "inf", "nan"):
        return f"arr's constants are unqualified: write `{name}`"
    if name in VALUE_NAMES:
        return VALUE_NAMES[name]
    return "arr has no modules: builtins and constants are unqualified (`sum(x)`, `pi`)"


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name nearest to `name` by edit distance, if within a third of its length and less than all
    of it (`y` is not a misspelling of `n`); ties: the first; a name equal but for case is nearest of all."""
    limit = min(max(len(name), 3) // 3, len(name) - 1)
    best, best_distance = None, limit + 1
    for candidate in known:
        if candidate == name:
            continue
        d = 0 if candidate.lower() == name.lower() else edit_distance(name, candidate, best_distance)
        if d < best_distance:
            best, best_distance = candidate, d
    return best


def edit_distance(a: str, b: str, limit: int) -> int:
    """Levenshtein distance with adjacent transpositions (`tarnspose`), or `limit` if it is at least that.

    >>> edit_distance("svd", "std", 5), edit_distance("exq", "exp", 5), edit_distance("inv", "sin", 5)
    (1, 1, 2)
    """
    if abs(len(a) - len(b)) >= limit:
        return limit
    prev2, prev = None, list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        row = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            row[j] = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (ca != cb))
            if prev2 is not None and i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                row[j] = min(row[j], prev2[j - 2] + 1)
        prev2, prev = prev, row
    return min(prev[-1], limit)
