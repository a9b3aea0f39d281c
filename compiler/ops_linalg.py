"""Linear algebra (LANGUAGE.md section 14): solve inv det slogdet cholesky qr eigh svd lu triangular_solve lstsq
pinv norm, as `jax.numpy.linalg` (and `jax.scipy.linalg` for `lu` and `triangular_solve`, its
`solve_triangular`), with leading batch dimensions.

The checker computes each result's shape (symbolically where the sizes are shape variables) and reports a
non-square matrix where one is needed, systems whose sizes do not match, and parameters it does not know.
Lowering emits one `stablehlo.custom_call @arrc.linalg` per operation, naming it and its parameters
(abi.LINALG, abi.LINALG_PARAMS): a placeholder that the guard pass and autodiff see as one operation, and
that passes/linalg.py replaces, for the platform the module is compiled for, by JAX's own lowering of the
same call (LAPACK on CPU, cuSOLVER or hipSOLVER on GPU), so results and speed are JAX's.
"""
from __future__ import annotations

import functools
import json
import math
import re
import threading

from jaxlib.mlir import ir

from . import abi, emit
from .diagnostics import Label
from .emit import hlo
from .ops_shape import _promoted
from .optable import CallCx, concrete, register
from .types import I64, ArrayType, Dim
from .values import StrVal, TupleVal, Val, describe

FAMILY = "Linear algebra"
LAPACK_INT = 2 ** 31 - 1        # the kernels' sizes are 32-bit: past them jaxlib throws, which aborts the process


# ---- the placeholder ----------------------------------------------------------------------------------

LIVE = "live"      # params: per derivative level, the float results with a cotangent (None: all of them)


def linalg_op(name: str, operands: list, result_types: list, params: dict, derivative: int = 0):
    """The `arrc.linalg` custom_call of operation `name` (its `derivative`-th reverse-mode derivative)."""
    op = hlo.CustomCallOp(result_types, operands, call_target_name=abi.LINALG_TARGET,
                          has_side_effect=ir.BoolAttr.get(False))
    op.attributes[abi.LINALG] = ir.StringAttr.get(name)
    op.attributes[abi.LINALG_PARAMS] = ir.StringAttr.get(json.dumps(params, sort_keys=True))
    emit.set_int_attr(op, abi.LINALG_DERIVATIVE, derivative)
    return op


def is_linalg(op) -> bool:
    op = op.operation
    return op.name == "stablehlo.custom_call" and emit.attr_text(op.attributes["call_target_name"]) == abi.LINALG_TARGET


def linalg_call(op) -> tuple[str, dict, int]:
    """(operation, parameters, derivative count) of an `arrc.linalg` custom_call."""
    op = op.operation
    return (emit.attr_text(op.attributes[abi.LINALG]), json.loads(emit.attr_text(op.attributes[abi.LINALG_PARAMS])),
            emit.int_attr(op, abi.LINALG_DERIVATIVE, 0))


_KERNEL = re.compile(r"lapack_[sd](trsm|getrf|potrf|syevd)_ffi")


def lapack_kernel(op) -> tuple[str, dict] | None:
    """(placeholder name, params) of a call of one of jaxlib's LAPACK kernels (as JAX's CPU lowering makes them,
    passes/lapack_calls.py) whose derivative is JAX's rule of the `jax.lax.linalg` primitive it computes
    (passes/linalg.py `jax_function`), else None. The kernel's flags are characters (`uplo = 76`, 'L')."""
    match = _KERNEL.fullmatch(emit.attr_text(op.attributes["call_target_name"]))
    if match is None:
        return None
    flags = {}
    for key in ("backend_config", "mhlo.backend_config"):
        if key in op.attributes and isinstance(op.attributes[key], ir.DictAttr):
            flags.update({a.name: chr(ir.IntegerAttr(a.attr).value) for a in ir.DictAttr(op.attributes[key])})
    kind = match[1]
    if kind == "trsm":
        return "lapack_trsm", {"left_side": flags["side"] == "L", "lower": flags["uplo"] == "L",
                               "transpose_a": flags["trans_x"] != "N", "conjugate_a": flags["trans_x"] == "C",
                               "unit_diagonal": flags["diag"] == "U"}
    if kind == "syevd" and flags["mode"] != "V":     # (eigenvalues only: no rule written for it)
        return None
    return f"lapack_{kind}", {} if kind == "getrf" else {"lower": flags["uplo"] == "L"}


def _call(cx: CallCx, name: str, operands: list[Val], dtype, types: list[ArrayType], params: dict):
    """The results of operation `name` on `operands` (converted to `dtype`): one Val, or a TupleVal."""
    for t in types:
        cx.value(t)                          # E0215 before anything is emitted
    if cx.lowering:
        op = linalg_op(name, [cx.ir(v, dtype) for v in operands],
                       [emit.tensor_type(concrete(t.shape), t.dtype) for t in types], params)
        vals = [Val(t, r) for t, r in zip(types, op.results)]
    else:
        vals = [Val(t) for t in types]
    return vals[0] if len(vals) == 1 else TupleVal(vals)


# ---- operands -----------------------------------------------------------------------------------------

def _float_dtype(cx: CallCx, vals: list[Val], what: str):
    dtype, _ = _promoted(cx, vals, what)
    if dtype.name not in ("f32", "f64"):
        cx.error("E0201", f"{what} is defined on f32 and f64 matrices, found {dtype}", f"{dtype}",
                 help="convert first: `f64(a)` or `a.astype(f32)`"
                      + (" (LAPACK has no 16-bit kernels)" if dtype.is_float else ""))
    return dtype


def _matrix(cx: CallCx, a, name: str, what: str, square: bool = False) -> Val:
    a = cx.array(a, name)
    if a.type.rank < 2:
        cx.error("E0202", f"{what} needs a matrix (rank 2, or more for a batch of them), found {a.type}",
                 f"this is {a.type}", at=name)
    m, n = a.type.shape[-2:]
    if m.is_const and n.is_const and m.value * n.value > LAPACK_INT:
        cx.error("E0215", f"{what} of the {m} x {n} matrix: LAPACK and cuSOLVER count a matrix's elements in 32 bits "
                          f"(at most {LAPACK_INT:,})", "too large for LAPACK", at=name,
                 help="split the problem into smaller matrices")
    if square and m != n:
        cx.error("E0202", f"{what} needs square matrices, found {a.type} ({m} x {n})", f"{m} x {n}", at=name,
                 help="for a non-square system use `lstsq`, for its pseudo-inverse `pinv`" if what in
                      ("`solve`", "`inv`") else None)
    return a


def _smaller(cx: CallCx, m: Dim, n: Dim, what: str) -> Dim:
    """min(m, n), which a shape can only hold when it is known."""
    if m == n:
        return m
    if m.is_const and n.is_const:
        return Dim.const(min(m.value, n.value))
    cx.error("E0204", f"{what} of the {m} x {n} matrix needs its sizes known (the result has min({m}, {n}) rows)",
             "symbolic sizes", at=0, help="give the sizes in the parameter's type, or use a square matrix")


def _batch(cx: CallCx, a: ArrayType, b: ArrayType, what: str) -> tuple:
    """The leading (batch) dimensions of two operands broadcast together."""
    x, y = a.shape[:-2][::-1], b.shape[:-2][::-1]
    out = []
    for i in range(max(len(x), len(y))):
        p = x[i] if i < len(x) else Dim.const(1)
        q = y[i] if i < len(y) else Dim.const(1)
        if p != q and not (p.is_const and p.value == 1) and not (q.is_const and q.value == 1):
            cx.error("E0202", f"{what}: the batch dimensions of {a} and {b} do not broadcast", f"{p} vs {q}",
                     labels=[Label(cx.at(0), f"this is {a}"), Label(cx.at(1), f"this is {b}")])
        out.append(q if p.is_const and p.value == 1 else p)
    return tuple(out[::-1])


def _system(cx: CallCx, a: Val, b, what: str) -> tuple:
    """The shape of x in `a x = b`: b is a vector [n] (rank 1) or a batch of matrices [..., n, k], as in
    NumPy 2 and JAX."""
    b = cx.array(b, "b")
    n = a.type.shape[-1]
    labels = [Label(cx.at("a"), f"a is {a.type}"), Label(cx.at("b"), f"b is {b.type}")]
    if b.type.rank == 0:
        cx.error("E0202", f"{what}: b must be a vector or a matrix, found {b.type}", f"this is {b.type}", at="b")
    rows = b.type.shape[0] if b.type.rank == 1 else b.type.shape[-2]
    if rows != a.type.shape[-2]:
        cx.error("E0202", f"{what}: a has {a.type.shape[-2]} rows but b has {rows}", f"{a.type.shape[-2]} vs {rows}",
                 labels=labels, notes=["b of rank 2 or more is a batch of [n, k] matrices, as in NumPy 2 and JAX: "
                                       "for a batch of vectors, solve with b[..., None] and take [..., 0]"]
                 if b.type.rank >= 2 else [])
    if b.type.rank == 1:
        return b, a.type.shape[:-2] + (n,)
    return b, _batch(cx, a.type, b.type, what) + (n, b.type.shape[-1])


def _literal_float(cx: CallCx, v, name: str) -> float | None:
    """None, or a number known at compile time."""
    if v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)):
        return None if v is None else float(v)
    if isinstance(v, Val) and v.type.rank == 0 and v.static is not None and not v.type.dtype.is_bool:
        static = v.static
        if isinstance(static, Dim) and not static.is_const:     # (as `var`'s ddof and `diag`'s k)
            cx.error("E0204", f"`{name}` must be a literal number or a const here, found `{static}`", "symbolic",
                     at=name)
        return float(static.value if isinstance(static, Dim) else static)
    cx.error("E0204", f"`{name}` must be a number known at compile time, found {describe(v)}", "not a literal",
             at=name)


def _choice(cx: CallCx, v, name: str, allowed: tuple) -> str:
    text = v if isinstance(v, str) else v.text if isinstance(v, StrVal) else None
    if text not in allowed:
        cx.error("E0204", f"`{name}` must be one of {', '.join(repr(a) for a in allowed)}, found "
                          f"{describe(v) if text is None else repr(text)}", "unknown", at=name)
    return text


# ---- the operations -----------------------------------------------------------------------------------

@register("solve", params="a, b", family=FAMILY, doc="x with a @ x = b, a square (jnp.linalg.solve)")
def _solve(cx: CallCx, a, b):
    a = _matrix(cx, a, "a", "`solve`", square=True)
    b, shape = _system(cx, a, b, "`solve`")
    dtype = _float_dtype(cx, [a, b], "`solve`")
    return _call(cx, "solve", [a, b], dtype, [ArrayType(dtype, shape)], {})


@register("triangular_solve", params="a, b, lower=False, trans=0, unit_diagonal=False", family=FAMILY,
          doc="x with a @ x = b, a triangular (jax.scipy.linalg.solve_triangular)")
def _triangular_solve(cx: CallCx, a, b, lower, trans, unit_diagonal):
    a = _matrix(cx, a, "a", "`triangular_solve`", square=True)
    b, shape = _system(cx, a, b, "`triangular_solve`")
    dtype = _float_dtype(cx, [a, b], "`triangular_solve`")
    if isinstance(trans, (StrVal, str)):
        trans = {"N": 0, "T": 1, "C": 2}.get(_choice(cx, trans, "trans", ("N", "T", "C")))
    else:
        trans = cx.const_int(trans, "trans") if not isinstance(trans, int) else trans
        if trans not in (0, 1, 2):
            cx.error("E0204", f"`trans` must be 0, 1, 2 (or \"N\", \"T\", \"C\"), found {trans}", "unknown", at="trans")
    params = {"lower": cx.bool_flag(lower, "lower"), "trans": trans,
              "unit_diagonal": cx.bool_flag(unit_diagonal, "unit_diagonal")}
    return _call(cx, "triangular_solve", [a, b], dtype, [ArrayType(dtype, shape)], params)


@register("inv", params="a", family=FAMILY, doc="the inverse of square matrices (jnp.linalg.inv)")
def _inv(cx: CallCx, a):
    a = _matrix(cx, a, "a", "`inv`", square=True)
    dtype = _float_dtype(cx, [a], "`inv`")
    return _call(cx, "inv", [a], dtype, [ArrayType(dtype, a.type.shape)], {})


@register("det", params="a", family=FAMILY, doc="the determinant of square matrices (jnp.linalg.det)")
def _det(cx: CallCx, a):
    a = _matrix(cx, a, "a", "`det`", square=True)
    dtype = _float_dtype(cx, [a], "`det`")
    return _call(cx, "det", [a], dtype, [ArrayType(dtype, a.type.shape[:-2])], {})


@register("slogdet", params="a", family=FAMILY,
          doc="the sign and the log of the absolute determinant (jnp.linalg.slogdet)")
def _slogdet(cx: CallCx, a):
    a = _matrix(cx, a, "a", "`slogdet`", square=True)
    dtype = _float_dtype(cx, [a], "`slogdet`")
    t = ArrayType(dtype, a.type.shape[:-2])
    return _call(cx, "slogdet", [a], dtype, [t, t], {})


@register("cholesky", params="a, upper=False", family=FAMILY,
          doc="the Cholesky factor of symmetric positive-definite matrices (jnp.linalg.cholesky)")
def _cholesky(cx: CallCx, a, upper):
    a = _matrix(cx, a, "a", "`cholesky`", square=True)
    dtype = _float_dtype(cx, [a], "`cholesky`")
    return _call(cx, "cholesky", [a], dtype, [ArrayType(dtype, a.type.shape)], {"upper": cx.bool_flag(upper, "upper")})


@register("qr", params='a, mode="reduced"', family=FAMILY, doc="QR decomposition (jnp.linalg.qr)")
def _qr(cx: CallCx, a, mode):
    a = _matrix(cx, a, "a", "`qr`")
    mode = _choice(cx, mode, "mode", ("reduced", "complete", "r"))
    dtype = _float_dtype(cx, [a], "`qr`")
    *batch, m, n = a.type.shape
    batch = tuple(batch)
    k = m if mode == "complete" else _smaller(cx, m, n, "`qr`")
    r = ArrayType(dtype, batch + (k, n))
    types = [r] if mode == "r" else [ArrayType(dtype, batch + (m, k)), r]
    return _call(cx, "qr", [a], dtype, types, {"mode": mode})


@register("eigh", params='a, UPLO="L", symmetrize_input=True', family=FAMILY,
          doc="eigenvalues (ascending) and eigenvectors of symmetric matrices (jnp.linalg.eigh)")
def _eigh(cx: CallCx, a, UPLO, symmetrize_input):
    a = _matrix(cx, a, "a", "`eigh`", square=True)
    dtype = _float_dtype(cx, [a], "`eigh`")
    params = {"UPLO": _choice(cx, UPLO, "UPLO", ("L", "U")),
              "symmetrize_input": cx.bool_flag(symmetrize_input, "symmetrize_input")}
    return _call(cx, "eigh", [a], dtype, [ArrayType(dtype, a.type.shape[:-1]), ArrayType(dtype, a.type.shape)],
                 params)


@register("svd", params="a, full_matrices=True, compute_uv=True", family=FAMILY,
          doc="singular value decomposition u, s, vh (jnp.linalg.svd)")
def _svd(cx: CallCx, a, full_matrices, compute_uv):
    a = _matrix(cx, a, "a", "`svd`")
    dtype = _float_dtype(cx, [a], "`svd`")
    full, uv = cx.bool_flag(full_matrices, "full_matrices"), cx.bool_flag(compute_uv, "compute_uv")
    *batch, m, n = a.type.shape
    batch = tuple(batch)
    k = _smaller(cx, m, n, "`svd`")
    s = ArrayType(dtype, batch + (k,))
    if not uv:
        return _call(cx, "svd", [a], dtype, [s], {"full_matrices": full, "compute_uv": False})
    u = ArrayType(dtype, batch + (m, m if full else k))
    vh = ArrayType(dtype, batch + (n if full else k, n))
    return _call(cx, "svd", [a], dtype, [u, s, vh], {"full_matrices": full, "compute_uv": True})


@register("lu", params="a", family=FAMILY, doc="LU decomposition p, l, u with a = p @ l @ u (jax.scipy.linalg.lu)")
def _lu(cx: CallCx, a):
    a = _matrix(cx, a, "a", "`lu`")
    dtype = _float_dtype(cx, [a], "`lu`")
    *batch, m, n = a.type.shape
    batch = tuple(batch)
    k = _smaller(cx, m, n, "`lu`")
    return _call(cx, "lu", [a], dtype, [ArrayType(dtype, batch + (m, m)), ArrayType(dtype, batch + (m, k)),
                                        ArrayType(dtype, batch + (k, n))], {})


@register("lstsq", params="a, b, rcond=None", family=FAMILY,
          doc="least-squares solution, residuals, rank and singular values (jnp.linalg.lstsq)")
def _lstsq(cx: CallCx, a, b, rcond):
    a = _matrix(cx, a, "a", "`lstsq`")
    if a.type.rank != 2:
        cx.error("E0202", f"`lstsq` takes one matrix (as NumPy and JAX), found {a.type}", f"this is {a.type}", at="a")
    b = cx.array(b, "b")
    m, n = a.type.shape
    if b.type.rank not in (1, 2) or b.type.shape[0] != m:
        cx.error("E0202", f"`lstsq`: b must be [{m}] or [{m}, k] for a {a.type}, found {b.type}",
                 f"this is {b.type}", labels=[Label(cx.at("a"), f"a is {a.type}"), Label(cx.at("b"), f"b is {b.type}")])
    dtype = _float_dtype(cx, [a, b], "`lstsq`")
    cols = b.type.shape[1:]
    types = [ArrayType(dtype, (n,) + cols), ArrayType(dtype, cols or (Dim.const(1),)), ArrayType(I64, ()),
             ArrayType(dtype, (_smaller(cx, m, n, "`lstsq`"),))]
    return _call(cx, "lstsq", [a, b], dtype, types, {"rcond": _literal_float(cx, rcond, "rcond")})


@register("pinv", params="a, rtol=None, hermitian=False", family=FAMILY,
          doc="the Moore-Penrose pseudo-inverse (jnp.linalg.pinv)")
def _pinv(cx: CallCx, a, rtol, hermitian):
    hermitian = cx.bool_flag(hermitian, "hermitian")
    a = _matrix(cx, a, "a", "`pinv` with hermitian=true" if hermitian else "`pinv`", square=hermitian)
    dtype = _float_dtype(cx, [a], "`pinv`")
    *batch, m, n = a.type.shape
    params = {"rtol": _literal_float(cx, rtol, "rtol"), "hermitian": hermitian}
    return _call(cx, "pinv", [a], dtype, [ArrayType(dtype, tuple(batch) + (n, m))], params)


MATRIX_ORDS = (None, "fro", "nuc", 1.0, -1.0, 2.0, -2.0, float("inf"), float("-inf"))


@register("norm", params="x, ord=None, axis=None, keepdims=False", family=FAMILY,
          doc="vector and matrix norms (jnp.linalg.norm)")
def _norm(cx: CallCx, x, ord, axis, keepdims):
    x = cx.array(x, "x")
    dtype = _float_dtype(cx, [x], "`norm`")
    rank = x.type.rank
    axes = None if axis is None else cx.axes(axis, rank)
    if isinstance(ord, (StrVal, str)):
        ord = _choice(cx, ord, "ord", ("fro", "nuc"))
    else:
        ord = _literal_float(cx, ord, "ord")
    if axes is not None and len(axes) not in (1, 2):
        cx.error("E0204", f"`norm` takes one axis (a vector norm) or two (a matrix norm), found {len(axes)}",
                 f"{len(axes)} axes", at="axis", help="for the 2-norm of all the elements leave `axis` out, "
                                                      "or reshape to a vector first")
    over = axes if axes is not None else list(range(rank)) if ord is None else \
        list(range(rank)) if rank in (1, 2) else None
    if over is None or len(over) not in (1, 2) and ord is not None or rank == 0:
        cx.error("E0202", f"`norm` with ord={ord!r} takes a vector or a matrix, found {x.type}",
                 f"this is {x.type}", at="x", help="choose the dimensions with `axis=` (one for a vector norm, "
                                                    "two for a matrix norm)")
    if len(over) == 2 and ord not in MATRIX_ORDS or len(over) == 1 and isinstance(ord, str):
        cx.error("E0204", f"`norm`: ord={ord!r} is not a {'matrix' if len(over) == 2 else 'vector'} norm",
                 "unknown norm", at="ord",
                 help="matrix norms: None, \"fro\", \"nuc\", 1, -1, 2, -2, inf, -inf" if len(over) == 2 else
                 "vector norms: any number, inf or -inf (\"fro\" and \"nuc\" take two axes, a matrix)")
    # These ords take the smallest |element| (vector -inf), column sum (-1), row sum (-inf) or singular value
    # (-2), of none where an axis here is empty: like `min` of no elements, an error (NumPy and JAX raise).
    smallest_over = {(1, -math.inf): over, (2, -1.0): over[1:], (2, -math.inf): over[:1], (2, -2.0): over}
    for a in smallest_over.get((len(over), ord), []):
        if x.type.shape[a] == Dim.const(0):
            cx.error("E0204", f"`norm` with ord={ord!r} of an empty array: axis {a} has size 0, so there is no "
                              f"smallest value to take", f"this is {x.type}", at="x")
    keep = cx.bool_flag(keepdims, "keepdims")
    shape = tuple(Dim.const(1) if i in over else d for i, d in enumerate(x.type.shape)) if keep else \
        tuple(d for i, d in enumerate(x.type.shape) if i not in over)
    params = {"ord": ord, "axis": None if axis is None else over if len(over) > 1 else over[0], "keepdims": keep}
    return _call(cx, "norm", [x], dtype, [ArrayType(dtype, shape)], params)


# `extern def` (LANGUAGE.md section 18): its calls are placeholders of operation EXTERN whose parameters name
# the JAX function by a number of this process (`register_extern`), lowered here as JAX lowers that function
# (differentiated as JAX differentiates it), with JAX's locations: a guard report inside it names the JAX op's
# Python file and line.
EXTERN = "extern"
_externs: dict = {}                 # number -> the JAX function (kept alive: a number is never reused)
_extern_numbers: dict = {}          # id(function) -> its number
_lock = threading.Lock()


def register_extern(function) -> int:
    """The number that names the JAX callable `function` in a placeholder's parameters."""
    with _lock:
        number = _extern_numbers.get(id(function))
        if number is None or _externs[number] is not function:
            number = _extern_numbers[id(function)] = len(_externs)
            _externs[number] = function
        return number


def extern_function(number: int):
    return _externs[number]


def extern_results(function, param_types: list) -> list[tuple]:
    """The (shape, dtype name) of each result of the JAX callable `function` (an `extern def`'s) on arguments
    of arr's `param_types`, as the placeholder's lowering will trace it (`extern_callable`): arr's name of the
    dtype (`key` for a Threefry key), else JAX's."""
    import jax
    from .types import dtype_of_numpy
    key = _threefry_key_dtype()
    avals = [jax.ShapeDtypeStruct(t.concrete_shape, key if t.dtype.is_key else t.dtype.np) for t in param_types]
    with jax.enable_x64(True):
        found = jax.eval_shape(as_tuple(function), *avals)
    return [(tuple(r.shape), "key" if r.dtype == key else str(r.dtype) if jax.dtypes.issubdtype(
        r.dtype, jax.dtypes.extended) else str(dtype_of_numpy(r.dtype) or r.dtype)) for r in found]


def extern_callable(function, keys: list):
    """`function` (an `extern def`'s) as arr calls it: the flat tuple of its results, with arr's keys (one
    uint64 each, the words packed; the arguments `keys`) given as JAX's typed keys, and typed keys returned
    as arr's."""
    import jax
    import jax.numpy as jnp
    fn = as_tuple(function)
    key = _threefry_key_dtype()

    def words(k):
        return jnp.stack([(k >> 32).astype(jnp.uint32), k.astype(jnp.uint32)], axis=-1)

    def packed(k):
        data = jax.random.key_data(k).astype(jnp.uint64)
        return (data[..., 0] << 32) | data[..., 1]

    def call(*args):
        args = [jax.random.wrap_key_data(words(a)) if i in keys else a for i, a in enumerate(args)]
        return tuple(packed(r) if r.dtype == key else r for r in fn(*args))
    return call


@functools.cache
def _threefry_key_dtype():
    import jax
    return jax.eval_shape(lambda: jax.random.key(0, impl="threefry2x32")).dtype


def is_exported(function) -> bool:
    """Whether an extern's function is a jax.export.Exported (by name: jax.export is not imported for it)."""
    return type(function).__name__ == "Exported"


def as_tuple(function):
    """`function` (a JAX callable or a jax.export.Exported) returning the flat tuple of its results."""
    import jax
    call = getattr(function, "call", function) if is_exported(function) else function
    return lambda *args: tuple(jax.tree.leaves(call(*args)))


# `stop_gradient(x)` (jax.lax.stop_gradient): x, through which no derivative flows. A placeholder of operation
# STOP_GRADIENT that compiler/autodiff.py gives no cotangent, compiler/batching.py batches as it is, and
# passes/linalg.py replaces by x, so that XLA never sees it.
STOP_GRADIENT = "stop_gradient"


@register("stop_gradient", family="Neural-net helpers",
          doc="x, through which no derivative flows (its derivative is 0, as jax.lax.stop_gradient's)")
def _stop_gradient(cx: CallCx, x) -> Val:
    x = cx.array(x, "x")
    if not x.type.dtype.is_float or x.static is not None:
        return x                            # (an integer or a literal has no derivative anyway)
    return _call(cx, STOP_GRADIENT, [x], x.type.dtype, [x.type.strong()], {})


# `shard(x, "data", None)` (LANGUAGE.md section 17): a placeholder of operation SHARD whose parameters name one
# mesh axis (or several, or none) per dimension; passes/linalg.py makes it Shardy's sharding constraint when the
# function runs over a mesh (arrc/sharding.py, `as_jax` under a mesh) and drops it on one device.
SHARD = "shard"


@register("shard", params="x, axes", family="Shape",
          doc="x, its layout over a mesh of devices constrained, one mesh axis name (or None) per dimension: "
              "`shard(x, \"data\", None)`")
def _shard(cx: CallCx, x, axes) -> Val:
    x = cx.array(x, "x")
    if len(axes) != x.type.rank:
        cx.error("E0204", f"`shard` takes one mesh axis name (or None) per dimension of x: x is {x.type}, "
                          f"{len(axes)} given", f"{len(axes)} for {x.type.rank} dimension(s)",
                 help="e.g. `shard(x, \"data\", None)` splits the rows of a matrix over the mesh axis `data`")
    return _call(cx, SHARD, [x], x.type.dtype, [x.type], {"axes": list(axes)})
