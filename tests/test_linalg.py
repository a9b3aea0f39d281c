"""Linear algebra (LANGUAGE.md section 14, docs/linalg.md): every operation against jax.numpy.linalg /
jax.scipy.linalg (x64 on) with batches, f32 and f64; symbolic shapes; diagnostics; derivatives against
jax.grad, jax.jvp and second derivatives; the guard report of a failed factorization; and the lowering for
`cuda` and `rocm` (cuSOLVER, hipSOLVER), golden-tested on this CPU machine."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
from conftest import compile_src

import arrc

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden" / "linalg"


def _spd(r, shape, dtype):
    """Symmetric positive-definite matrices of `shape` (..., n, n)."""
    x = r.normal(size=shape)
    return (x @ np.swapaxes(x, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(dtype)


def _t(dtype, shape) -> str:
    return f"{dtype}[{', '.join(map(str, shape))}]" if shape else dtype


# (arr call, JAX twin, operand shapes); operand "s" is symmetric positive definite, "m" a general matrix
CASES = [
    ("solve(a, b)", lambda a, b: jnp.linalg.solve(a, b), [(3, 3), (3,)]),
    ("solve(a, b)", lambda a, b: jnp.linalg.solve(a, b), [(2, 4, 4), (4,)]),
    ("solve(a, b)", lambda a, b: jnp.linalg.solve(a, b), [(2, 4, 4), (2, 4, 3)]),
    ("solve(a, b)", lambda a, b: jnp.linalg.solve(a, b), [(4, 4), (5, 4, 2)]),
    ("triangular_solve(a, b, lower=true)", lambda a, b: jsl.solve_triangular(a, b, lower=True), [(2, 3, 3), (2, 3, 2)]),
    ("triangular_solve(a, b, trans=1, unit_diagonal=true)",
     lambda a, b: jsl.solve_triangular(a, b, trans=1, unit_diagonal=True), [(4, 4), (4,)]),
    ("triangular_solve(a, b, trans=\"T\")", lambda a, b: jsl.solve_triangular(a, b, trans="T"), [(3, 3), (3, 2)]),
    ("inv(a)", jnp.linalg.inv, [(3, 5, 5)]),
    ("det(a)", jnp.linalg.det, [(4, 4)]),
    ("det(a)", jnp.linalg.det, [(2, 3, 3, 3)]),
    ("slogdet(a)", lambda a: tuple(jnp.linalg.slogdet(a)), [(2, 4, 4)]),
    ("cholesky(s)", jnp.linalg.cholesky, [(3, 4, 4)]),
    ("cholesky(s, upper=true)", lambda s: jnp.linalg.cholesky(s, upper=True), [(4, 4)]),
    ("qr(a)", lambda a: tuple(jnp.linalg.qr(a)), [(5, 3)]),
    ("qr(a, mode=\"complete\")", lambda a: tuple(jnp.linalg.qr(a, mode="complete")), [(2, 3, 5)]),
    ("qr(a, mode=\"r\")", lambda a: jnp.linalg.qr(a, mode="r"), [(4, 4)]),
    ("eigh(s)", lambda s: tuple(jnp.linalg.eigh(s)), [(2, 4, 4)]),
    ("eigh(s, UPLO=\"U\")", lambda s: tuple(jnp.linalg.eigh(s, UPLO="U")), [(3, 3)]),
    ("svd(a)", lambda a: tuple(jnp.linalg.svd(a)), [(5, 3)]),
    ("svd(a, full_matrices=false)", lambda a: tuple(jnp.linalg.svd(a, full_matrices=False)), [(2, 3, 6)]),
    ("svd(a, compute_uv=false)", lambda a: jnp.linalg.svd(a, compute_uv=False), [(4, 4)]),
    ("lu(a)", lambda a: tuple(jsl.lu(a)), [(4, 4)]),
    ("lu(a)", lambda a: tuple(jnp.vectorize(jsl.lu, signature="(m,n)->(m,m),(m,k),(k,n)")(a)), [(2, 5, 3)]),
    ("lstsq(a, b)", lambda a, b: tuple(jnp.linalg.lstsq(a, b)), [(6, 3), (6,)]),
    ("lstsq(a, b, rcond=0.01)", lambda a, b: tuple(jnp.linalg.lstsq(a, b, rcond=0.01)), [(3, 5), (3, 2)]),
    ("pinv(a)", jnp.linalg.pinv, [(2, 5, 3)]),
    ("pinv(s, hermitian=true)", lambda s: jnp.linalg.pinv(s, hermitian=True), [(4, 4)]),
    ("norm(a)", jnp.linalg.norm, [(5, 3)]),
    ("norm(a)", jnp.linalg.norm, [(2, 3, 4)]),
    ("norm(a, ord=2)", lambda a: jnp.linalg.norm(a, ord=2), [(5, 3)]),
    ("norm(a, \"nuc\")", lambda a: jnp.linalg.norm(a, "nuc"), [(3, 3)]),
    ("norm(a, ord=-inf)", lambda a: jnp.linalg.norm(a, ord=-jnp.inf), [(4, 3)]),
    ("norm(a, ord=1, axis=1)", lambda a: jnp.linalg.norm(a, ord=1, axis=1), [(4, 3)]),
    ("norm(a, ord=3, axis=0, keepdims=true)", lambda a: jnp.linalg.norm(a, ord=3, axis=0, keepdims=True), [(4, 3)]),
    ("norm(a, axis=(0, 2))", lambda a: jnp.linalg.norm(a, axis=(0, 2)), [(3, 2, 3)]),
]


def _operands(call: str, shapes: list, dtype, seed: int):
    r = np.random.default_rng(seed)
    names = ["s" if "(s" in call else "a", "b"][:len(shapes)]
    return names, [_spd(r, sh, dtype) if name == "s" else r.normal(size=sh).astype(dtype)
                   for name, sh in zip(names, shapes)]


@pytest.fixture(scope="module")
def grid():
    """One module: each case in f32 and f64, its result types read from its JAX twin."""
    lines, twins = [], {}
    for i, (call, twin, shapes) in enumerate(CASES):
        for dtype in ("f32", "f64"):
            names, args = _operands(call, shapes, np.dtype(dtype.replace("f", "float")), i)
            with jax.enable_x64(True):
                out = jax.eval_shape(twin, *args)
            outs = out if isinstance(out, tuple) else (out,)
            types = [_t({"float32": "f32", "float64": "f64", "int64": "i64"}[str(o.dtype)], o.shape) for o in outs]
            result = types[0] if len(types) == 1 else f"({', '.join(types)})"
            params = ", ".join(f"{n}: {_t(dtype, sh)}" for n, sh in zip(names, shapes))
            lines += [f"def case_{i}_{dtype}({params}) -> {result}:", f"    return {call}", ""]
            twins[(i, dtype)] = (twin, args)
    return compile_src("\n".join(lines), "grid.arr"), twins


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("i", range(len(CASES)), ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_each_operation_gives_jax_results(grid, i, dtype):
    mod, twins = grid
    twin, args = twins[(i, dtype)]
    got = getattr(mod, f"case_{i}_{dtype}")(*args)
    with jax.enable_x64(True):
        want = twin(*args)
    got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
    for g, w in zip(got, want, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert (g.dtype, g.shape) == (w.dtype, w.shape)
        rtol = 1e-4 if dtype == "f32" else 1e-11
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * max(1.0, float(np.max(np.abs(w), initial=0))))


def test_symbolic_shapes_and_values_from_other_operations():
    mod = compile_src("""
def whiten(x: f64[b, n, n], y: f64[b, n, k]) -> f64[b, n, k]:
    s = x @ transpose(x, (0, 2, 1)) + eye(n)
    return triangular_solve(cholesky(s), y, lower=true)

def logdet(x: f64[n, n]) -> f64:
    sign, ld = slogdet(x @ x.T + eye(n))
    return ld
""")
    r = np.random.default_rng(3)
    for b, n, k in ((1, 2, 1), (3, 5, 2)):
        x, y = r.normal(size=(b, n, n)), r.normal(size=(b, n, k))
        s = x @ np.swapaxes(x, 1, 2) + np.eye(n)
        want = jsl.solve_triangular(jnp.linalg.cholesky(s), y, lower=True)
        np.testing.assert_allclose(mod.whiten(x, y), want, rtol=1e-11)
        np.testing.assert_allclose(mod.logdet(x[0]), jnp.linalg.slogdet(s[0])[1], rtol=1e-12)


@pytest.mark.parametrize("call, code, message", [
    ("inv(m)", "E0202", "`inv` needs square matrices, found f64[3, 4] (3 x 4)"),
    ("solve(q, v)", "E0202", "`solve`: a has 3 rows but b has 4"),
    ("solve(q, v[:, None])", "E0202", "`solve`: a has 3 rows but b has 4"),
    ("det(v)", "E0202", "`det` needs a matrix (rank 2, or more for a batch of them), found f64[4]"),
    ("cholesky(i)", "E0201", "`cholesky` is defined on f32 and f64 matrices, found i32"),
    ("inv(h)", "E0201", "`inv` is defined on f32 and f64 matrices, found f16"),
    ("qr(m, mode=\"full\")", "E0204", "`mode` must be one of 'reduced', 'complete', 'r', found 'full'"),
    ("qr(g)", "E0204", "`qr` of the n x k matrix needs its sizes known (the result has min(n, k) rows)"),
    ("norm(m, ord=\"fro\", axis=0)", "E0204", "`norm`: ord='fro' is not a vector norm"),
    ("norm(m, ord=3)", "E0204", "`norm`: ord=3.0 is not a matrix norm"),
    ("solve(p, w)", "E0202", "`solve`: the batch dimensions of f64[2, 3, 3] and f64[4, 3, 1] do not broadcast"),
    ("triangular_solve(q, q, trans=5)", "E0204", "`trans` must be 0, 1, 2 (or \"N\", \"T\", \"C\"), found 5"),
    ("lstsq(p, q)", "E0202", "`lstsq` takes one matrix (as NumPy and JAX), found f64[2, 3, 3]"),
    ("pinv(m, rtol=v)", "E0204", "`rtol` must be a number known at compile time, found f64[4]"),
    ("pinv(g, rtol=n)", "E0204", "`rtol` must be a literal number or a const here, found `n`"),     # (a crash)
    ("norm(g, ord=k)", "E0204", "`ord` must be a literal number or a const here, found `k`"),
    ("pinv(m, hermitian=true)", "E0202", "`pinv` with hermitian=true needs square matrices, found f64[3, 4] (3 x 4)"),
    ("norm(p, axis=(0, 1, 2))", "E0204", "`norm` takes one axis (a vector norm) or two (a matrix norm), found 3"),
])
def test_diagnostics(call, code, message):
    src = ("def f(m: f64[3, 4], q: f64[3, 3], v: f64[4], i: i32[3, 3], h: f16[3, 3], g: f64[n, k], "
           f"p: f64[2, 3, 3], w: f64[4, 3, 1]) -> f64:\n    y = {call}\n    return 0.0\n")
    with pytest.raises(arrc.CompileError) as info:
        arrc.loads(src)
    diag = info.value.diagnostics[0]
    assert (diag.code, diag.message) == (code, message)



def test_an_unknown_vector_norm_lists_the_vector_norms():
    """`norm(v, "fro")` of a vector listed the matrix norms ("fro" among them) as the ones to use."""
    with pytest.raises(arrc.CompileError) as info:
        arrc.loads('def f(v: f64[4]) -> f64:\n    return norm(v, "fro")\n')
    diag = info.value.diagnostics[0]
    assert diag.message == "`norm`: ord='fro' is not a vector norm" and diag.help.startswith("vector norms:")

def test_a_system_of_the_wrong_size_is_a_diagnostic_with_both_operands():
    with pytest.raises(arrc.CompileError) as info:
        arrc.loads("def f(a: f64[2, 3, 3], b: f64[2, 3]) -> f64[2, 3]:\n    return solve(a, b)\n", filename="s.arr")
    assert str(info.value) == """\
error[E0202]: `solve`: a has 3 rows but b has 2
 --> s.arr:2:12
  |
2 |     return solve(a, b)
  |            ^^^^^^^^^^^ 3 vs 2
  |                  - a is f64[2, 3, 3]
  |                     - b is f64[2, 3]
  |
  = note: b of rank 2 or more is a batch of [n, k] matrices, as in NumPy 2 and JAX: for a batch of vectors, \
solve with b[..., None] and take [..., 0]
"""


DERIVATIVES = """
def loss(a: f64[3, 3], b: f64[3]) -> f64:
    s = a @ a.T + 3.0 * eye(3)
    x = solve(s, b)
    w, v = eigh(s)
    sign, ld = slogdet(s)
    q, r = qr(a)
    return sum(x * x) + sum(cholesky(s)) + ld + sum(w * w) + norm(inv(s)) + sum(svd(a, compute_uv=false)) \\
        + sum(triangular_solve(s, b, lower=true)) + det(a) + sum(r * r)

def fit(a: f64[5, 3], b: f64[5]) -> f64:
    x, residuals, rank, s = lstsq(a, b)
    return sum(x * x) + sum(pinv(a)) + norm(a, ord=2)

def det_of(x: f64) -> f64:
    return det(x * eye(2) + [[1.0, 2.0], [3.0, 4.0]])

def slope(x: f64) -> f64:
    return grad(det_of)(x)
"""


def _loss(a, b):
    s = a @ a.T + 3.0 * jnp.eye(3)
    w, _ = jnp.linalg.eigh(s)
    r = jnp.linalg.qr(a)[1]
    return (jnp.sum(jnp.linalg.solve(s, b) ** 2) + jnp.sum(jnp.linalg.cholesky(s)) + jnp.linalg.slogdet(s)[1]
            + jnp.sum(w * w) + jnp.linalg.norm(jnp.linalg.inv(s)) + jnp.sum(jnp.linalg.svd(a, compute_uv=False))
            + jnp.sum(jsl.solve_triangular(s, b, lower=True)) + jnp.linalg.det(a) + jnp.sum(r * r))


def _fit(a, b):
    return jnp.sum(jnp.linalg.lstsq(a, b)[0] ** 2) + jnp.sum(jnp.linalg.pinv(a)) + jnp.linalg.norm(a, ord=2)


def _det_of(x):
    return jnp.linalg.det(x * jnp.eye(2) + jnp.array([[1.0, 2.0], [3.0, 4.0]]))


def test_derivatives_equal_jax():
    mod = compile_src(DERIVATIVES, "d.arr")
    r = np.random.default_rng(5)
    for a, b, twin, fn in ((r.normal(size=(3, 3)), r.normal(size=3), _loss, mod.loss),
                           (r.normal(size=(5, 3)), r.normal(size=5), _fit, mod.fit)):
        value, grads = arrc.value_and_grad(fn, argnums=(0, 1))(a, b)
        want_value, want = jax.value_and_grad(twin, argnums=(0, 1))(a, b)
        np.testing.assert_allclose(value, want_value, rtol=1e-12)
        for g, w in zip(grads, want):
            np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12)
    for x in (0.3, -1.2):
        np.testing.assert_allclose(mod.slope(x), jax.grad(_det_of)(x), rtol=1e-12)
        np.testing.assert_allclose(arrc.grad(mod.slope)(x), jax.grad(jax.grad(_det_of))(x), rtol=1e-12)
        primal, tangent = arrc.jvp(mod.det_of)(x, 1.0)
        want_primal, want_tangent = jax.jvp(_det_of, (x,), (1.0,))
        np.testing.assert_allclose((primal, tangent), (want_primal, want_tangent), rtol=1e-12)


@pytest.mark.parametrize("call, twin, a", [
    ("sum(eigh(a)[0] ** 2)", lambda a: jnp.sum(jnp.linalg.eigh(a)[0] ** 2), np.diag([2.0, 2.0, 5.0])),
    ("sum(svd(a)[1] ** 2)", lambda a: jnp.sum(jnp.linalg.svd(a)[1] ** 2), np.eye(3)),
    ("slogdet(a)[0]", lambda a: jnp.linalg.slogdet(a)[0], np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])),
])
def test_a_result_that_is_not_used_adds_nothing_to_the_derivative(call, twin, a):
    """JAX's cotangent of an unused result is a symbolic zero, whose path it skips: the eigenvalues' derivative
    is finite at repeated eigenvalues, where the eigenvectors' has 1 / (w_i - w_j) (it was NaN: 0 * inf), and the
    sign's of slogdet is 0 at a singular matrix (its log's is inf)."""
    mod = arrc.loads(f"def f(a: f64[3, 3]) -> f64:\n    return {call}\n")
    want = jax.grad(twin)(a)
    assert np.isfinite(want).all()
    np.testing.assert_allclose(arrc.grad(mod.f)(a), want, rtol=1e-12, atol=1e-12)


def test_a_failed_factorization_is_reported_at_the_call_with_its_batch_index():
    mod = compile_src("def f(a: f32[3, 4, 4]) -> f32:\n    l = cholesky(a)\n    return sum(l)\n", "fit.arr")
    s = _spd(np.random.default_rng(0), (3, 4, 4), np.float32)
    s[2, 1, 1] = -100.0
    assert np.isnan(mod.f(s))                                  # without guards: NaN, as jnp.linalg.cholesky
    guarded = arrc.loads(mod.sources["fit.arr"].text, filename="fit.arr", guards="nan")
    with pytest.raises(arrc.NaNError) as info:
        guarded.f(s)
    assert str(info.value) == """\
error[R0001]: `cholesky`: the matrix at batch index [2] is not positive definite
 --> fit.arr:2:9
  |
2 |     l = cholesky(a)
  |         ^^^^^^^^^^^ this `cholesky` produced NaN at index [2, 0, 0]
  |
  = note: `jnp.linalg.cholesky` gives NaN there too
  = note: in f
"""
    s[2, 1, 1] = 5.0
    np.testing.assert_allclose(guarded.f(s), jnp.sum(jnp.linalg.cholesky(s)), rtol=1e-5)


def test_a_failed_factorization_under_vmap_names_the_lane_and_the_matrix_inside_it():
    """vmap's lane dimension is not one of the matrix's batch dimensions (it was counted among them:
    "batch index [0]" for a function of one matrix)."""
    mod = arrc.loads("def f(a: f64[3, 3]) -> f64[3, 3]:\n    return cholesky(a)\n\ndef g(a: f64[4, 3, 3]) -> f64[4, 3, 3]:\n"
                     "    return vmap(f)(a)\n\ndef c2(a: f64[2, 3, 3]) -> f64[2, 3, 3]:\n    return cholesky(a)\n\n"
                     "def h(a: f64[4, 2, 3, 3]) -> f64[4, 2, 3, 3]:\n    return vmap(c2)(a)\n", guards="nan")
    a = np.stack([np.eye(3)] * 4)
    a[2, 1, 1] = -1.0
    with pytest.raises(arrc.NaNError) as info:
        mod.g(a)
    lines = str(info.value).splitlines()
    assert lines[0] == "error[R0001]: `cholesky`: the matrix is not positive definite"
    assert "  = note: in lane 2 of vmap(f)" in lines
    b = np.stack([np.stack([np.eye(3)] * 2)] * 4)
    b[3, 1, 1, 1] = -1.0
    with pytest.raises(arrc.NaNError) as info:
        mod.h(b)
    lines = str(info.value).splitlines()
    assert lines[0] == "error[R0001]: `cholesky`: the matrix at batch index [1] is not positive definite"
    assert "  = note: in lane 3 of vmap(c2)" in lines


def test_a_nan_in_the_derivative_of_a_factorization_is_the_derivative_s_not_a_failed_factorization():
    """eigh of the identity succeeds; its derivative is NaN (repeated eigenvalues; jax.grad's too)."""
    mod = arrc.loads("def f(a: f64[3, 3]) -> f64:\n    w, v = eigh(a)\n    return sum(v ** 4)\n", guards="nan",
                     filename="eig.arr")
    assert float(mod.f(np.eye(3))) == 3.0
    assert np.isnan(jax.grad(lambda a: jnp.sum(jnp.linalg.eigh(a)[1] ** 4))(jnp.eye(3))).any()
    with pytest.raises(arrc.NaNError) as info:
        arrc.grad(mod.f)(np.eye(3))
    lines = str(info.value).splitlines()
    assert lines[0] == "error[R0001]: NaN produced in the backward pass"
    assert "the derivative of `eigh` produced NaN at index [0, 0]" in lines[4]
    assert not any("factorization" in line or "e.g." in line for line in lines)


def test_a_nan_in_a_derivative_run_lane_by_lane_names_the_batched_operand():
    """vmap runs the derivative of a factorization lane by lane, slicing each lane's matrix from the function's
    argument at the lane counter; the report named that slice after the vmapped function ("(gh = 1.0)")."""
    mod = arrc.loads("def h(a: f64[3, 3]) -> f64:\n    w, v = eigh(a)\n    return sum(v ** 4)\n\n"
                     "def gh(a: f64[3, 3]) -> f64[3, 3]:\n    return grad(h)(a)\n\n"
                     "def vgh(b: f64[2, 3, 3]) -> f64[2, 3, 3]:\n    return vmap(gh)(b)\n", guards="nan", filename="lanes.arr")
    with pytest.raises(arrc.NaNError) as info:
        mod.vgh(np.stack([np.diag([1.0, 2.0, 3.0]), np.eye(3)]))
    lines = str(info.value).splitlines()
    assert lines[4].endswith("the derivative of `eigh` produced NaN at index [0, 0] (b = 1.0)"), lines[4]
    assert "  = note: in lane 1 of vmap(gh)" in lines


def test_a_singular_system_is_reported_by_the_inf_guard():
    mod = arrc.loads("def f(a: f64[2, 2], b: f64[2]) -> f64[2]:\n    return solve(a, b)\n", filename="sing.arr",
                     guards="nan,inf")
    with pytest.raises(arrc.GuardError) as info:
        mod.f(np.array([[1.0, 2.0], [2.0, 4.0]]), np.array([1.0, 1.0]))
    assert str(info.value).splitlines()[0].endswith("`solve`: the matrix is singular")


LOWERED = """\
def f(a: f32[2, 3, 3], b: f32[3]) -> f32[2, 3]:
    return solve(cholesky(a), b)
"""


@pytest.mark.parametrize("target, platform", [("gpu", "cuda"), ("rocm", "rocm")])
def test_gpu_lowering_is_golden(tmp_path, update_goldens, target, platform):
    """JAX's cuSOLVER and hipSOLVER lowering, merged as private functions, checked without a GPU."""
    from arrc.passes.linalg import LowerLinalg
    lowered = arrc.loads(LOWERED).f.lower(arrc.spec("f32[2, 3, 3]"), arrc.spec("f32[3]"))
    with lowered.context:
        LowerLinalg(platform).apply(lowered.module)
        lowered.module.operation.verify()
    text = lowered.module.operation.get_asm(enable_debug_info=False) + "\n"
    golden = GOLDEN / f"solve_cholesky_{platform}.mlir"
    if update_goldens:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert text == golden.read_text()
    assert f"{'cusolver' if platform == 'cuda' else 'hipsolver'}_potrf_ffi" in text and "lapack" not in text
    if target == "gpu":
        (tmp_path / "f.arr").write_text(LOWERED)
        cli = subprocess.run([sys.executable, "-m", "arrc", "compile", str(tmp_path / "f.arr"), "--entry", "f",
                              "--target", "gpu"],
                             cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert cli.returncode == 0, cli.stderr
        assert "cusolver_getrf_ffi" in cli.stdout and "arrc.linalg" not in cli.stdout


def test_arrc_check_does_not_import_jax(tmp_path):
    (tmp_path / "d.arr").write_text("def f(a: f64[3, 3]) -> f64:\n    return det(a)\n")
    probe = (f"import sys; from arrc.cli import main; code = main(['check', {str(tmp_path / 'd.arr')!r}]); "
             "print(code, 'jax' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.stdout.split()[-2:] == ["0", "False"], out.stdout + out.stderr


def test_the_least_squares_example_agrees_with_its_normal_equations():
    mod = arrc.load(str(ROOT / "examples" / "least_squares.arr"), guards="all")
    c, c_normal, error, rank = mod.main()
    np.testing.assert_allclose(c, c_normal, rtol=1e-9)
    assert float(error) < 0.05 and int(rank) == 4


def test_the_documented_ridge_fit():
    mod = compile_src("""
def fit(x: f64[n, d], y: f64[n]) -> f64[d]:
    g = x.T @ x + 1e-3 * eye(d)
    l = cholesky(g)
    z = triangular_solve(l, x.T @ y, lower=true)
    return triangular_solve(l, z, lower=true, trans=1)
""")
    r = np.random.default_rng(9)
    x, y = r.normal(size=(30, 4)), r.normal(size=30)
    np.testing.assert_allclose(mod.fit(x, y), np.linalg.solve(x.T @ x + 1e-3 * np.eye(4), x.T @ y), rtol=1e-10)
    mixed = compile_src("def f(a: f32[2, 2], b: f64[2]) -> f64[2]:\n    return solve(a, b)\n")
    np.testing.assert_allclose(mixed.f(np.eye(2, dtype=np.float32) * 2, np.array([1.0, 3.0])), [0.5, 1.5])


def test_what_jax_cannot_differentiate_is_a_diagnostic_at_the_call():
    mod = compile_src("def f(a: f64[4, 3]) -> f64:\n    u, s, vh = svd(a)\n    return sum(u)\n", "svd.arr")
    with pytest.raises(arrc.CompileError) as info:
        arrc.grad(mod.f)(np.ones((4, 3)))
    assert str(info.value) == """\
error[E0216]: cannot differentiate `svd` here: Singular value decomposition JVP not implemented for full matrices
 --> svd.arr:2:16
  |
2 |     u, s, vh = svd(a)
  |                ^^^^^^ the derivative of this `svd`
  |
  = note: JAX has no derivative for it either
  = help: use `svd(a, full_matrices=false)`: JAX differentiates that
"""


def test_arrc_grad_of_a_jax_export_with_lapack_names_the_kernel(tmp_path):
    from jax import export
    with jax.enable_x64(True):
        exported = export.export(jax.jit(lambda a: jnp.sum(jnp.linalg.svd(a, compute_uv=False))))(
            jax.ShapeDtypeStruct((3, 3), jnp.float64))
    (tmp_path / "svd.mlir").write_text(exported.mlir_module())
    out = subprocess.run([sys.executable, "-m", "arrc", "grad", str(tmp_path / "svd.mlir"), "--wrt", "0"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode != 0      # (getrf, trsm, potrf and syevd have JAX's rules: tests/test_grad_cli.py)
    assert out.stderr.startswith("error[E0216]: cannot differentiate the custom call `lapack_dgesdd_ffi` yet")


def test_a_matrix_past_lapacks_32_bit_sizes_is_refused_before_it_can_abort():
    with pytest.raises(arrc.CompileError) as info:
        arrc.loads("def f(a: f32[50000, 50000]) -> f32[50000, 50000]:\n    return inv(a)\n")
    diag = info.value.diagnostics[0]
    assert diag.code == "E0215" and "32 bits" in diag.message


def test_a_jax_export_whose_cholesky_fails_is_reported_as_arrs_is(tmp_path):
    """`arrc run --guards nan` of JAX's own lowering: the select of NaN after a failed potrf names the matrix."""
    from jax import export
    with jax.enable_x64(True):
        exported = export.export(jax.jit(lambda a: jnp.sum(jnp.linalg.cholesky(a))))(
            jax.ShapeDtypeStruct((2, 3, 3), jnp.float64))
    (tmp_path / "chol.mlir").write_text(exported.mlir_module())
    a = np.stack([np.eye(3), np.eye(3)])
    a[1, 1, 1] = -5.0
    np.save(tmp_path / "a.npy", a)
    out = subprocess.run([sys.executable, "-m", "arrc", "run", str(tmp_path / "chol.mlir"), "--guards", "nan",
                          "--arg", f"arg0=@{tmp_path / 'a.npy'}"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 3
    lines = out.stderr.splitlines()
    assert lines[0] == "error[R0001]: `cholesky`: the matrix at batch index [1] is not positive definite"
    assert any(line.endswith("this `cholesky` produced NaN at index [1, 0, 0]") for line in lines), out.stderr


def test_arrc_compile_lowers_linear_algebra_without_starting_a_pjrt_client(tmp_path):
    probe = ("import sys; from arrc.cli import main; "
             f"code = main(['compile', 'examples/least_squares.arr', '-o', {str(tmp_path / 'ls.mlir')!r}]); "
             "from jax._src import xla_bridge; print(code, bool(xla_bridge._backends))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.stdout.split()[-2:] == ["0", "False"], out.stdout + out.stderr
    assert "lapack_dgesdd_ffi" in (tmp_path / "ls.mlir").read_text()         # lstsq, through an SVD


def test_f64_lu_decompositions_are_refused_for_a_tpu_at_the_call():
    """On a TPU (measured on a v5e, JAX 0.10.2), JAX lowers solve/inv/det/slogdet/lu to an `LuDecomposition`
    that XLA refuses for f64 at compile time: E0504 at the arr call instead (cholesky runs there)."""
    from arrc.passes.verify_backend import VerifyBackend
    mod = arrc.loads("def f(a: f64[4, 4], b: f64[4]) -> f64[4]:\n    return solve(a, b) + diag(cholesky(a))\n\n"
                     "def g(a: f32[4, 4]) -> f32:\n    return det(a)\n", filename="lu.arr")
    a, b = np.eye(4), np.ones(4)
    diags = VerifyBackend("tpu").apply(mod.f.lower(a, b).module)
    from arrc.compiler.diagnostics import render
    assert render(diags[0], mod.sources) == """\
error[E0504]: the tpu backend cannot run an f64 `solve` (an LU decomposition there)
 --> lu.arr:2:12
  |
2 |     return solve(a, b) + diag(cholesky(a))
  |            ^^^^^^^^^^^ an f64 `solve` (an LU decomposition there)
  |
  = note: tpu has no `solve` (an LU decomposition there) kernels for f64
  = help: cast the operands (`.astype(f32)`) or run it on another device (`device="cpu"`)
"""
    assert len(diags) == 1
    assert VerifyBackend("tpu").apply(mod.g.lower(np.eye(4, dtype=np.float32)).module) == []
    assert VerifyBackend("cpu").apply(mod.f.lower(a, b).module) == []


def test_f32_svds_with_singular_vectors_are_refused_for_a_tpu_at_the_call():
    """On a TPU (v5e, JAX 0.10.2) XLA aborts the process compiling an f32 SVD with its singular vectors
    (jnp.linalg.svd and pinv too): E0504 at the arr call; the singular values alone, and f64, run there."""
    from arrc.compiler.diagnostics import render
    from arrc.passes.verify_backend import VerifyBackend
    mod = arrc.loads("def f(a: f32[4, 4], b: f32[4]) -> f32:\n    u, s, vh = svd(a)\n"
                     "    return sum(pinv(a)) + sum(lstsq(a, b)[0]) + sum(svd(a, compute_uv=false))\n\n"
                     "def g(a: f64[4, 4], b: f64[4]) -> f64:\n    return sum(pinv(a)) + sum(lstsq(a, b)[0])\n\n"
                     "def h(a: f32[4, 4]) -> f32:\n    return sum(svd(a, compute_uv=false))\n", filename="svd.arr")
    a, b = np.eye(4, dtype=np.float32), np.ones(4, np.float32)
    diags = VerifyBackend("tpu").apply(mod.f.lower(a, b).module)
    assert [d.span.col for d in diags] == [16, 16, 31]          # svd, pinv, lstsq: not the values alone
    assert render(diags[1], mod.sources).splitlines()[0] == \
        "error[E0504]: the tpu backend cannot run an f32 `pinv` (an SVD with singular vectors there)"
    assert "  = note: XLA aborts the process compiling it for tpu (JAX's pinv of f32 too)" in \
        render(diags[1], mod.sources).splitlines()
    assert VerifyBackend("tpu").apply(mod.g.lower(a.astype(np.float64), b.astype(np.float64)).module) == []
    assert VerifyBackend("tpu").apply(mod.h.lower(a).module) == []
    assert VerifyBackend("cpu").apply(mod.f.lower(a, b).module) == []


@pytest.mark.parametrize("ord_, shape", [("-inf", (0,)), ("-2", (0, 0)), ("-2", (3, 0)), ("-1", (2, 0)),
                                         ("-inf", (0, 2))])
def test_a_norm_that_takes_the_smallest_of_nothing_is_E0204(ord_, shape):
    """As `min` of no elements (JAX and NumPy raise): E0204 at the call, not an internal error from JAX's
    lowering; the same norms of a non-empty side are jnp's."""
    dims = ", ".join("nm"[:len(shape)])
    mod = arrc.loads(f"def f(a: f64[{dims}]) -> f64:\n    return norm(a, ord={ord_})\n")
    with pytest.raises(arrc.CompileError, match=r"E0204(.|\n)*no smallest value"):
        mod.f(np.zeros(shape))
    a = np.arange(1.0, 7.0).reshape((2, 3) if len(shape) == 2 else (6,))
    np.testing.assert_allclose(mod.f(a), jnp.linalg.norm(a, ord=float(ord_)), rtol=1e-12)


def test_lapack_pointers_come_without_importing_scipy_linalg():
    """jaxlib reads LAPACK from scipy.linalg's two Cython modules: they are loaded by themselves (all of
    scipy.linalg cost ~115 ms of a warm `arrc run`), and left for a later import to bind as usual."""
    probe = ("import sys, numpy as np, arrc\n"
             "mod = arrc.loads('def f(a: f64[2, 2], b: f64[2]) -> f64[2]:\\n    return solve(a, b)\\n')\n"
             "x = np.asarray(mod.f(np.array([[2.0, 1.0], [1.0, 3.0]]), np.array([3.0, 5.0])))\n"
             "print('scipy.linalg' in sys.modules, sorted(k for k in sys.modules if k.startswith('scipy.linalg')))\n"
             "import scipy.linalg.cython_lapack\n"
             "print(np.round(x, 12).tolist(), scipy.linalg.cython_lapack.__name__, scipy.linalg.solve(np.eye(2), x)[1].round(12))\n")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["False []", "[0.8, 1.4] scipy.linalg.cython_lapack 1.4"], out.stdout


@pytest.mark.parametrize("a_shape, b_shape", [((2, 2, 2), (2, 2)), ((2, 3, 3), (4, 1, 3, 2)), ((3, 3), (2, 3, 3))])
def test_triangular_solve_reads_b_as_matrices_whatever_its_rank(a_shape, b_shape):
    """A `b` of one dimension fewer than `a`, its last dimension equal to a's, is a matrix (broadcast over a's
    batch), as `solve` reads it and as the checker typed it: JAX 0.10's solve_triangular reads it as a batch of
    vectors (its lowering returned another shape: E0601 in lower-linalg)."""
    rng = np.random.default_rng(7)
    a = np.tril(rng.random(a_shape)) + 3 * np.eye(a_shape[-1])
    b = rng.random(b_shape)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    want = np.linalg.solve(np.broadcast_to(a, batch + a.shape[-2:]), np.broadcast_to(b, batch + b.shape[-2:]))
    shape = ", ".join(map(str, want.shape))
    mod = arrc.loads(f"def f(a: f64[{', '.join(map(str, a_shape))}], b: f64[{', '.join(map(str, b_shape))}]) "
                     f"-> f64[{shape}]:\n    return triangular_solve(a, b, lower=true)\n")
    np.testing.assert_allclose(np.asarray(mod.f(a, b)), want, rtol=1e-12)


SVD_OF_INF = """\
import numpy as np, arrc
mod = arrc.loads('''
def f(a: f64[2, 3, 3], b: f64[3]) -> (f64[2, 3], f64[2, 3, 3], f64[2], f64[2], f64[3], i64):
    u, s, vt = svd(a)
    x, residuals, rank, sv = lstsq(a[0], b)
    return s, pinv(a), norm(a, ord=2, axis=(1, 2)), norm(a, ord="nuc", axis=(1, 2)), x, rank
''')
a = np.stack([np.ones((3, 3)), np.diag([3.0, 2.0, 1.0])])
a[0, 0, 0] = np.inf                  # (gesdd never returns for this matrix: Reference-LAPACK lapack#1409)
s, p, two, nuc, x, rank = mod.f(a, np.ones(3))
good = np.linalg.svd(a[1], compute_uv=False)
assert np.isnan(s[0]).all() and np.isnan(p[0]).all() and np.isnan([two[0], nuc[0]]).all() and np.isnan(x).all()
np.testing.assert_allclose(s[1], good)
np.testing.assert_allclose(p[1], np.linalg.pinv(a[1]))
np.testing.assert_allclose([two[1], nuc[1]], [good[0], good.sum()])
print("ok", int(rank))
"""


def test_the_svd_of_a_matrix_holding_inf_is_nan_and_returns():
    """LAPACK's gesdd never returns for some matrices holding an infinity (jnp.linalg.svd hangs on them too):
    such a matrix's SVD-based results (svd, pinv, lstsq, the 2-norm and nuclear norm) are NaN, the other
    matrices of the batch as before. In a process of its own, bounded: the old code never ends."""
    out = subprocess.run([sys.executable, "-c", SVD_OF_INF], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "ok 0\n"
