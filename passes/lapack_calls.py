"""Calls to jaxlib's LAPACK kernels (`lapack_sgetrf_ffi`, ...) as JAX's CPU lowering emits them.

A kernel takes its sizes from its operands' shapes and writes its results without looking at theirs:
`lapack_sgetrf_ffi` on a 512x512 matrix with a tensor<1xi32> pivot result writes 511 integers past it
(measured: a segfault). So each call's operand and result types must be exactly those JAX's lowering
gives (jax/_src/lax/linalg.py at jaxlib 0.10.2, checked against `jax.jit(...).lower()` for batched,
wide and tall matrices), and its attributes must be ones JAX sets. The targets are the CPU kernels
JAX's export guarantees stable (`_CPU_FFI_KERNELS`) plus `gesvd` (svd with algorithm=QR) and `geqp3`
(qr with pivoting); `tridiagonal_solve_perturbed` and `ormqr` are left out.

    >>> is_lapack_target("lapack_dgetrf_ffi"), is_lapack_target("lapack_dungqr_ffi")
    (True, False)
"""
from __future__ import annotations

import functools

from jaxlib.mlir import ir

from ..compiler.ops_linalg import LAPACK_INT

ELEMENTS = {"s": ("f32", "f32"), "d": ("f64", "f64"), "c": ("complex<f32>", "f32"), "z": ("complex<f64>", "f64")}
COMPLEX_OF = {"f32": "complex<f32>", "f64": "complex<f64>"}
CHARS = {c: ord(c) for c in "LUNVASRTC"}

REAL_ONLY = ("orgqr", "syevd", "sytrd")
COMPLEX_ONLY = ("ungqr", "heevd", "hetrd")
BOTH = ("getrf", "geqrf", "geqp3", "potrf", "geev", "gesdd", "gesvd", "gehrd", "gees", "trsm", "gtsv")
TARGETS = {f"lapack_{p}{f}_ffi": (p, f) for f in REAL_ONLY + COMPLEX_ONLY + BOTH for p in "sdcz"
           if not (f in REAL_ONLY and p in "cz") and not (f in COMPLEX_ONLY and p in "sd")}


class _Bad(Exception):
    pass


def is_lapack_target(target: str) -> bool:
    return target in TARGETS


def check_lapack_call(op, target: str) -> str | None:
    """None when `op` calls the kernel as JAX does, else what is wrong."""
    prefix, family = TARGETS[target]
    t, r = ELEMENTS[prefix]
    try:
        attrs = _attributes(op)
        operands = [_tensor(o.type) for o in op.operands]
        if not operands:
            raise _Bad("a LAPACK kernel takes operands")
        want_operands, want_results = RULES[family](operands, t, r, attrs)
    except _Bad as err:
        return str(err)
    got_results = [_tensor(res.type) for res in op.results]
    if operands != want_operands:
        return f"operands {_show(operands)}; the kernel takes {_show(want_operands)}"
    if got_results != want_results:
        return f"results {_show(got_results)}; for these operands the kernel writes {_show(want_results)}"
    return None


def _tensor(t: ir.Type) -> tuple:
    if not isinstance(t, ir.RankedTensorType) or not t.has_static_shape:
        raise _Bad(f"a LAPACK kernel takes and returns static tensors, not {t}")
    return tuple(t.shape), str(t.element_type)


def _show(types: list) -> str:
    return "(" + ", ".join(f"tensor<{''.join(f'{d}x' for d in s)}{e}>" for s, e in types) + ")"


def _attributes(op) -> dict:
    """The kernel's attributes, as JAX writes them (`mhlo.backend_config`) or as a typed-FFI
    `backend_config` dictionary: {name: integer}."""
    attrs = op.attributes
    dicts = [attrs[k] for k in ("backend_config", "mhlo.backend_config")
             if k in attrs and isinstance(attrs[k], ir.DictAttr)]
    if len(dicts) > 1:
        raise _Bad("two attribute dictionaries (`backend_config` and `mhlo.backend_config`)")
    if _has(op, "called_computations"):
        raise _Bad("a LAPACK kernel calls no functions")
    out = {}
    for named in (dicts[0] if dicts else []):
        value = named.attr
        if not isinstance(value, ir.IntegerAttr):
            raise _Bad(f"attribute `{named.name}` is not an integer")
        out[named.name] = value.value
    return out


def _has(op, name: str) -> bool:
    try:
        return len(ir.ArrayAttr(op.attributes[name])) > 0
    except KeyError:
        return False


def _expect_attrs(attrs: dict, allowed: dict) -> None:
    if set(attrs) != set(allowed):
        raise _Bad(f"attributes {sorted(attrs)}; the kernel takes {sorted(allowed)}")
    for name, values in allowed.items():
        if attrs[name] not in values:
            raise _Bad(f"attribute `{name}` = {attrs[name]} is not one of {sorted(values)}")


def _chars(text: str) -> set:
    return {CHARS[c] for c in text}


def _matrix(shape: tuple, square: bool = False) -> tuple:
    """(batch dims, rows, columns) of a (batch of) matrices."""
    if len(shape) < 2:
        raise _Bad(f"a LAPACK kernel takes a matrix, not shape {list(shape)}")
    *batch, m, n = shape
    if square and m != n:
        raise _Bad(f"the kernel takes square matrices, not {m}x{n}")
    if m * n > LAPACK_INT:
        raise _Bad(f"a {m}x{n} matrix is too large for LAPACK's 32-bit sizes")
    return tuple(batch), m, n


# Each rule: (operand types, element type, real element type, attributes) -> (operand types it takes,
# result types it writes); types as (shape, element) pairs.

def _getrf(ops, t, r, attrs):
    _expect_attrs(attrs, {})
    b, m, n = _matrix(ops[0][0])
    x = (ops[0][0], t)
    return [x], [x, (b + (min(m, n),), "i32"), (b, "i32")]


def _geqrf(ops, t, r, attrs):
    _expect_attrs(attrs, {})
    b, m, n = _matrix(ops[0][0])
    x = (ops[0][0], t)
    return [x], [x, (b + (min(m, n),), t)]


def _geqp3(ops, t, r, attrs):
    _expect_attrs(attrs, {})
    b, m, n = _matrix(ops[0][0])
    x, jpvt = (ops[0][0], t), (b + (n,), "i32")
    return [x, jpvt], [x, jpvt, (b + (min(m, n),), t)]


def _orgqr(ops, t, r, attrs):
    _expect_attrs(attrs, {})
    b, m, n = _matrix(ops[0][0])
    k = ops[1][0][-1] if len(ops) > 1 and ops[1][0] else 0
    if not m >= n >= k:
        raise _Bad(f"the kernel needs rows >= columns >= reflectors, not {m}, {n}, {k}")
    a = (ops[0][0], t)
    return [a, (b + (k,), t)], [a]


def _potrf(ops, t, r, attrs):
    _expect_attrs(attrs, {"uplo": _chars("LU")})
    b, _, _ = _matrix(ops[0][0], square=True)
    x = (ops[0][0], t)
    return [x], [x, (b, "i32")]


def _syevd(ops, t, r, attrs):
    _expect_attrs(attrs, {"mode": _chars("VN"), "uplo": _chars("LU")})
    b, n, _ = _matrix(ops[0][0], square=True)
    x = (ops[0][0], t)
    return [x], [x, (b + (n,), r), (b, "i32")]


def _geev(ops, t, r, attrs):
    _expect_attrs(attrs, {"compute_left": _chars("VN"), "compute_right": _chars("VN")})
    b, n, _ = _matrix(ops[0][0], square=True)
    x, info = ops[0][0], (b, "i32")
    if t == r:                         # real: eigenvalues as real and imaginary parts
        c = COMPLEX_OF[t]
        return [(x, t)], [(b + (n,), t), (b + (n,), t), (x, c), (x, c), info]
    return [(x, t)], [(b + (n,), t), (x, t), (x, t), info]


def _gesdd(ops, t, r, attrs):
    _expect_attrs(attrs, {"mode": _chars("ASN")})
    b, m, n = _matrix(ops[0][0])
    k = min(m, n)
    u, vt = ((m, k), (k, n)) if attrs["mode"] == CHARS["S"] else ((m, m), (n, n))
    x = (ops[0][0], t)
    return [x], [x, (b + (k,), r), (b + u, t), (b + vt, t), (b, "i32")]


def _sytrd(ops, t, r, attrs):
    _expect_attrs(attrs, {"uplo": _chars("LU")})
    b, n, _ = _matrix(ops[0][0], square=True)
    x, e = (ops[0][0], t), b + (max(n - 1, 0),)
    return [x], [x, (b + (n,), r), (e, r), (e, t), (b, "i32")]


def _gehrd(ops, t, r, attrs):
    b, n, _ = _matrix(ops[0][0], square=True)
    _expect_attrs(attrs, {"low": {1}, "high": {n}})
    x = (ops[0][0], t)
    return [x], [x, (b + (max(n - 1, 0),), t), (b, "i32")]


def _gees(ops, t, r, attrs):
    _expect_attrs(attrs, {"mode": _chars("VN"), "sort": _chars("N")})
    b, n, _ = _matrix(ops[0][0], square=True)
    x, w, ints = (ops[0][0], t), (b + (n,), t), [(b, "i32"), (b, "i32")]
    return [x], [x, x] + ([w, w] if t == r else [w]) + ints


def _trsm(ops, t, r, attrs):
    _expect_attrs(attrs, {"side": _chars("LR"), "uplo": _chars("LU"), "trans_x": _chars("NTC"),
                          "diag": _chars("NU")})
    if len(ops) != 2:
        raise _Bad("the kernel takes a triangular matrix and a right-hand side")
    b, m, n = _matrix(ops[1][0])
    p = m if attrs["side"] == CHARS["L"] else n
    x = (ops[1][0], t)
    return [(b + (p, p), t), x], [x]


def _gtsv(ops, t, r, attrs):
    _expect_attrs(attrs, {})
    b, n, _ = _matrix(ops[-1][0])
    diag, rhs = (b + (n,), t), (ops[-1][0], t)
    return [diag, diag, diag, rhs], [diag, diag, diag, rhs, (b, "i32")]


RULES = {
    "getrf": _getrf, "geqrf": _geqrf, "geqp3": _geqp3, "orgqr": _orgqr, "ungqr": _orgqr,
    "potrf": _potrf, "syevd": _syevd, "heevd": _syevd, "geev": _geev, "gesdd": _gesdd, "gesvd": _gesdd,
    "sytrd": _sytrd, "hetrd": _sytrd, "gehrd": _gehrd, "gees": _gees, "trsm": _trsm, "gtsv": _gtsv,
}


@functools.cache
def initialize_lapack() -> None:
    """jaxlib registers its LAPACK kernels on import but sets their function pointers only here (from
    SciPy's LAPACK): a call before this segfaults. JAX does the same when it lowers a linalg op. Once a
    process (each compile of a LAPACK program and each JAX lowering asks)."""
    import sys

    from jax._src.lib import lapack
    loaded = _load_scipy_lapack()
    try:
        lapack._lapack.initialize()
    finally:            # (a later `import scipy.linalg.cython_lapack` then binds it to its package as usual)
        for name in loaded:
            sys.modules.pop(name, None)


SCIPY_LAPACK = ("scipy.linalg.cython_blas", "scipy.linalg.cython_lapack")


def _load_scipy_lapack() -> list:
    """Load the two extension modules jaxlib reads the LAPACK pointers from (`SCIPY_LAPACK`) by themselves,
    for jaxlib's import of them to find: importing them by name imports all of `scipy.linalg` first (~115 ms
    of a warm `arrc run` of a linear-algebra program), and they need none of it. Returns the names it
    loaded; where loading fails, jaxlib's import does it the usual way."""
    import importlib.machinery
    import importlib.util
    import sys
    loaded = []
    for name in SCIPY_LAPACK:
        if name in sys.modules:
            continue
        try:
            folder = importlib.util.find_spec("scipy").submodule_search_locations[0] + "/linalg"
            found = importlib.machinery.PathFinder.find_spec(name.rsplit(".", 1)[1], [folder])
            spec = importlib.util.spec_from_file_location(name, found.origin)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        except Exception:           # (no such file, another layout)
            break
        sys.modules[name] = module
        loaded.append(name)
    return loaded
