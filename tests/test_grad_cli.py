"""`arrc grad IN.mlir --wrt I,J -o OUT.mlir` (issue 16): StableHLO that arrc did not write (JAX's
lowerings and exports, x64 on) differentiated by reverse mode, run with `arrc run` / the foreign-module
runtime, and compared with `jax.grad`; a `while` loop with a run-time trip count (which `jax.grad`
refuses) against the same loop with a static trip count under `jax.grad`, and the analytic derivative.
Refusals are golden tests of the whole rendered diagnostic."""
from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from arrc.cli import main
from arrc.runtime.foreign import ForeignFunction

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "1"}
RNG = np.random.default_rng(16)


# ---- the functions, exported from JAX ----------------------------------------------------------------

def mlp_loss(w1, b1, w2, x, y):
    h = jnp.tanh(x @ w1 + b1)
    return jnp.mean((h @ w2 - y) ** 2) + 0.01 * jnp.sum(w1 ** 2)


@jax.jit
def _helper(x):
    return jnp.sin(x) * jnp.exp(-x)


@jax.jit
def _outer(x, y):
    return _helper(x) * y + _helper(y)


def with_calls(x, y):
    return jnp.sum(_outer(x, y) ** 2) + jnp.sum(_helper(x))


def fori(x, w):
    return lax.fori_loop(0, 7, lambda i, c: jnp.sin(c * w) + 0.1 * i, x)


def growth(x, limit):
    """`while x < limit: x = x * 1.5`: the trip count depends on the arguments' values."""
    return lax.while_loop(lambda c: c < limit, lambda c: c * 1.5, x)


def steps(x, w, n):
    """A while loop counting to `n` (an argument), carrying a float state."""
    def body(carry):
        i, c = carry
        return i + 1, jnp.sin(c * w) + 0.5 * c
    return lax.while_loop(lambda carry: carry[0] < n, body, (jnp.int64(0), x))[1]


def steps_static(x, w, n: int):
    return lax.fori_loop(0, n, lambda i, c: jnp.sin(c * w) + 0.5 * c, x)


def sharded(w, x):
    mesh = jax.make_mesh((1,), ("d",), axis_types=(jax.sharding.AxisType.Auto,))
    h = lax.with_sharding_constraint(jnp.tanh(x * w), jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("d")))
    return jnp.sum(h ** 2)


MLP_ARGS = (RNG.normal(size=(3, 4)), RNG.normal(size=4), RNG.normal(size=4), RNG.normal(size=(5, 3)),
            RNG.normal(size=5))
CALLS_ARGS = (RNG.normal(size=3), RNG.normal(size=3))
FORI_ARGS = (np.float64(0.3), np.float64(1.7))
SHARDED_ARGS = (RNG.normal(size=4), RNG.normal(size=4))


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("jax")
    files = {}
    for name, fn, args in [("mlp", mlp_loss, MLP_ARGS), ("calls", with_calls, CALLS_ARGS), ("fori", fori, FORI_ARGS),
                           ("growth", growth, (np.float64(1.0), np.float64(10.0))),
                           ("steps", steps, (np.float64(0.3), np.float64(1.1), np.int64(3))),
                           ("sharded", sharded, SHARDED_ARGS)]:
        path = d / f"{name}.mlir"
        path.write_text(jax.jit(fn).lower(*args).as_text(debug_info=True))
        files[name] = str(path)
    return files


def grad_of(path: str, wrt: str, tmp_path: Path, *extra: str) -> ForeignFunction:
    out = tmp_path / f"{Path(path).stem}.grad.mlir"
    assert main(["grad", path, "--wrt", wrt, "-o", str(out), *extra]) == 0
    return ForeignFunction(str(out))


def assert_value_and_grad(fn: ForeignFunction, f, args, argnums):
    value, grads = jax.value_and_grad(f, argnums=argnums)(*args)
    got = fn(list(args))
    assert len(got) == 1 + len(grads)
    np.testing.assert_allclose(got[0], value, rtol=1e-12, atol=1e-14)
    for g, expected in zip(got[1:], grads):
        assert g.shape == np.shape(expected) and g.dtype == np.float64
        np.testing.assert_allclose(g, expected, rtol=1e-11, atol=1e-13)


# ---- what works --------------------------------------------------------------------------------------

def test_mlp_loss_against_jax_grad(exported, tmp_path):
    assert_value_and_grad(grad_of(exported["mlp"], "0,1,2", tmp_path), mlp_loss, MLP_ARGS, (0, 1, 2))


JAX_OPS = {     # what JAX's lowerings emit that arr's own code does not: chlo.square, case, clamp
    "var_std": lambda x: jnp.var(x) + jnp.std(x),
    "cond": lambda x: jax.lax.cond(jnp.sum(x) > 0, lambda y: jnp.sum(jnp.sin(y)), lambda y: jnp.sum(y ** 2), x),
    "switch": lambda x: jax.lax.switch(jnp.int32(jnp.sum(x) > 0) + 1, [jnp.sum, lambda y: jnp.sum(y * y),
                                                                           lambda y: jnp.sum(jnp.cos(y))], x),
    "clamp": lambda x: jnp.sum(jax.lax.clamp(-0.5, x, 0.7) * x),
    "clamp_arrays": lambda x: jnp.sum(jax.lax.clamp(jnp.sin(x), x * 2.0, jnp.cos(x) + 0.2)),
}


@pytest.mark.parametrize("name", list(JAX_OPS))
def test_jax_lowerings_of_var_cond_switch_and_clamp_against_jax_grad(name, tmp_path):
    f, x = JAX_OPS[name], np.array([0.3, -1.2, 0.9, 0.1])
    path = tmp_path / f"{name}.mlir"
    path.write_text(jax.jit(f).lower(x).as_text())
    assert_value_and_grad(grad_of(str(path), "0", tmp_path), f, (x,), (0,))
    assert_value_and_grad(grad_of(str(path), "0", tmp_path), f, (-x,), (0,))      # (the other branch)


def test_wrt_order_is_kept(exported, tmp_path):
    assert_value_and_grad(grad_of(exported["mlp"], "2,0", tmp_path), mlp_loss, MLP_ARGS, (2, 0))


def test_no_value_returns_only_the_derivatives(exported, tmp_path):
    fn = grad_of(exported["mlp"], "3", tmp_path, "--no-value")
    (got,) = fn(list(MLP_ARGS))
    np.testing.assert_allclose(got, jax.grad(mlp_loss, argnums=3)(*MLP_ARGS), rtol=1e-11, atol=1e-13)


def test_private_calls_are_inlined(exported, tmp_path):
    text = Path(exported["calls"]).read_text()
    assert "call @_outer" in text and "func.func private @_helper" in text
    fn = grad_of(exported["calls"], "0,1", tmp_path)
    assert "func.call" not in Path(fn.path).read_text() and "private" not in Path(fn.path).read_text()
    assert_value_and_grad(fn, with_calls, CALLS_ARGS, (0, 1))


def test_fori_loop_with_static_bounds(exported, tmp_path):
    assert "stablehlo.while" in Path(exported["fori"]).read_text()
    assert_value_and_grad(grad_of(exported["fori"], "0,1", tmp_path), fori, FORI_ARGS, (0, 1))


def scan_loss(x, ws):
    return jnp.sum(lax.scan(lambda c, w: (jnp.tanh(c * w) + 0.1 * w, c * w), x, ws)[1] ** 2)


@pytest.mark.parametrize("length", [10, 300])
def test_scan(tmp_path, length):
    args = (np.full(3, 0.5), np.linspace(0.5, 1.5, length))
    path = tmp_path / "scan.mlir"
    path.write_text(jax.jit(scan_loss).lower(*args).as_text())
    assert_value_and_grad(grad_of(str(path), "0,1", tmp_path), scan_loss, args, (0, 1))


def test_jax_counted_loops_get_their_trip_count(exported):
    """`fori_loop` with static bounds and `scan` get the trip count arr's `for` loops carry (the sweep
    unrolls or tapes them); a `while` loop does not."""
    from arrc.cli import mark_counted_loops
    from arrc.compiler import abi
    from arrc.passes.rewrite import ops_named
    from arrc.runtime.foreign import read_module

    def counts(fn, *args):
        context, module = read_module(jax.jit(fn).lower(*args).as_text().encode(), "f.mlir")
        with context:
            mark_counted_loops(module)
            return [ir_int(op.attributes[abi.TRIP_COUNT]) if abi.TRIP_COUNT in op.attributes else None
                    for op in ops_named(module, "stablehlo.while")]
    assert counts(fori, *FORI_ARGS) == [7]
    assert counts(lambda x: lax.fori_loop(3, 200, lambda i, c: c * 0.5 + i, x), 1.0) == [197]
    assert counts(scan_loss, np.full(3, 0.5), np.ones(12)) == [12]
    assert counts(growth, 1.0, 10.0) == [None]
    assert counts(steps, 0.3, 1.1, np.int64(3)) == [None]           # the bound is an argument


def ir_int(attr) -> int:
    from jaxlib.mlir import ir
    return ir.IntegerAttr(attr).value


def test_while_loop_with_run_time_trip_count(exported, tmp_path):
    """`x * 1.5 ** T` where T (the trip count) is the smallest with x * 1.5 ** T >= limit: d/dx = 1.5 ** T,
    d/dlimit = 0. jax.grad refuses this loop."""
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work for lax.while_loop"):
        jax.grad(growth)(1.0, 10.0)
    fn = grad_of(exported["growth"], "0,1", tmp_path)
    for x, limit, trips in [(1.0, 10.0, 6), (1.0, 1.2, 1), (2.0, 1.0, 0), (0.5, 100.0, 14)]:
        value, dx, dlimit = fn([np.float64(x), np.float64(limit)])
        np.testing.assert_allclose(value, x * 1.5 ** trips, rtol=1e-15)
        np.testing.assert_allclose(dx, 1.5 ** trips, rtol=1e-15)
        assert dlimit == 0.0


@pytest.mark.parametrize("n", [0, 1, 2, 5])
def test_while_loop_counting_to_an_argument(exported, tmp_path, n):
    """The loop's bound is the argument `n`: compared with `jax.grad` of the same loop with `n` static
    (JAX's scan), and with central finite differences."""
    fn = grad_of(exported["steps"], "0,1", tmp_path)
    x, w = np.float64(0.3), np.float64(1.1)
    value, dx, dw = fn([x, w, np.int64(n)])
    expected = jax.value_and_grad(steps_static, argnums=(0, 1))(x, w, n)
    np.testing.assert_allclose(value, expected[0], rtol=1e-13)
    np.testing.assert_allclose([dx, dw], expected[1], rtol=1e-11, atol=1e-14)
    h = 1e-6
    fd = [(steps_static(x + h, w, n) - steps_static(x - h, w, n)) / (2 * h),
          (steps_static(x, w + h, n) - steps_static(x, w - h, n)) / (2 * h)]
    np.testing.assert_allclose([dx, dw], fd, rtol=1e-7, atol=1e-9)


def test_sharding_constraints_are_passed_through(exported, tmp_path):
    text = Path(exported["sharded"]).read_text()
    assert "sdy.mesh" in text and "sdy.sharding_constraint" in text
    fn = grad_of(exported["sharded"], "0", tmp_path)
    assert "sdy.sharding_constraint" not in Path(fn.path).read_text()
    assert_value_and_grad(fn, sharded, SHARDED_ARGS, (0,))


def test_jax_export_text_and_serialized_artifact(tmp_path):
    from jax import export
    exp = export.export(jax.jit(with_calls))(*CALLS_ARGS)
    text, artifact = tmp_path / "exp.mlir", tmp_path / "exp.mlirbc"
    text.write_text(exp.mlir_module())
    artifact.write_bytes(exp.mlir_module_serialized)          # a portable artifact (VHLO bytecode)
    for path in (text, artifact):
        assert_value_and_grad(grad_of(str(path), "1", tmp_path), with_calls, CALLS_ARGS, (1,))


def test_bytecode_output(exported, tmp_path):
    out = tmp_path / "g.mlirbc"
    assert main(["grad", exported["calls"], "-o", str(out)]) == 0
    assert out.read_bytes()[:4] == b"ML\xefR"
    assert_value_and_grad(ForeignFunction(str(out)), with_calls, CALLS_ARGS, (0,))


def test_stdout_and_arrc_run(exported, tmp_path, capsys):
    assert main(["grad", exported["fori"], "--wrt", "1"]) == 0
    text = capsys.readouterr().out
    assert "module @jit_fori" in text
    out = tmp_path / "fori.grad.mlir"
    out.write_text(text)
    assert main(["run", str(out), "--arg", "arg0=0.3", "--arg", "arg1=1.7", "--format", "json"]) == 0
    results = [r["value"] for r in json.loads(capsys.readouterr().out)["results"]]
    value, dw = jax.value_and_grad(fori, argnums=1)(*FORI_ARGS)
    np.testing.assert_allclose(results, [value, dw], rtol=1e-12)


def test_as_a_subprocess(exported, tmp_path):
    out = tmp_path / "growth.grad.mlir"
    done = subprocess.run([sys.executable, "-m", "arrc", "grad", exported["growth"], "--wrt", "0", "-o", str(out)],
                          capture_output=True, text=True, env=ENV, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and done.stderr == ""
    done = subprocess.run([sys.executable, "-m", "arrc", "run", str(out), "--arg", "arg0=1.0", "--arg", "arg1=10.0"],
                          capture_output=True, text=True, env=ENV, timeout=300)
    assert done.returncode == 0, done.stderr
    assert [float(v) for v in done.stdout.split()] == [1.5 ** 6, 1.5 ** 6]


# ---- what is refused: usage errors (exit 2) and diagnostics (exit 1), never a traceback ---------------

SCALAR_AND_INT = """\
func.func public @main(%arg0: tensor<3xf64>, %arg1: tensor<i32>) -> tensor<3xf64> {
  %0 = stablehlo.convert %arg1 : (tensor<i32>) -> tensor<f64>
  %1 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<f64>) -> tensor<3xf64>
  %2 = stablehlo.multiply %arg0, %1 : tensor<3xf64>
  return %2 : tensor<3xf64>
}
"""

LOSS_OF_INT = """\
func.func public @main(%arg0: tensor<3xf64>, %arg1: tensor<i32>) -> tensor<f64> {
  %0 = stablehlo.convert %arg1 : (tensor<i32>) -> tensor<f64>
  %cst = stablehlo.constant dense<0.000000e+00> : tensor<f64>
  %1 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.add across dimensions = [0] : (tensor<3xf64>, tensor<f64>) -> tensor<f64>
  %2 = stablehlo.multiply %1, %0 : tensor<f64>
  return %2 : tensor<f64>
}
"""

NON_SCALAR = """\
error[E0216]: cannot differentiate `main`: it returns f64[3], not one float scalar
 --> $DIR/vector.mlir:5:3
  |
5 |   return %2 : tensor<3xf64>
  |   ^ the result here
  |
  = note: `arrc grad` differentiates a loss: a function with one float scalar result (as jax.grad)
  = help: reduce the result to a scalar before exporting (e.g. jnp.sum of it), or export one function per component
"""

INTEGER_ARG = """\
error[E0216]: cannot differentiate `main` with respect to argument 1: it is i32
 --> $DIR/loss.mlir:1:46
  |
1 | func.func public @main(%arg0: tensor<3xf64>, %arg1: tensor<i32>) -> tensor<f64> {
  |                                              ^ argument 1
  |
  = note: integers and bools have no derivative (jax.grad raises a TypeError)
  = help: leave it out of --wrt (e.g. --wrt 0)
"""

UNREADABLE = """\
error[E0502]: cannot read $DIR/bad.mlir as StableHLO: custom op 'stablehlo.bogus' is unknown
 --> $DIR/bad.mlir:2:8
  |
2 |   %0 = stablehlo.bogus %arg0 : tensor<f64>
  |        ^
"""


def rendered(capsys, tmp_path: Path) -> tuple[str, str]:
    out, err = capsys.readouterr()
    return out, err.replace(str(tmp_path), "$DIR")


def test_non_scalar_result(tmp_path, capsys):
    path = tmp_path / "vector.mlir"
    path.write_text(SCALAR_AND_INT)
    assert main(["grad", str(path)]) == 1
    assert rendered(capsys, tmp_path) == ("", NON_SCALAR)


def test_integer_argument(tmp_path, capsys):
    path = tmp_path / "loss.mlir"
    path.write_text(LOSS_OF_INT)
    assert main(["grad", str(path), "--wrt", "0,1"]) == 1
    assert rendered(capsys, tmp_path) == ("", INTEGER_ARG)
    assert main(["grad", str(path), "--wrt", "0"]) == 0          # the integer argument left out
    capsys.readouterr()


def test_unreadable_file(tmp_path, capsys):
    path = tmp_path / "bad.mlir"
    path.write_text("func.func public @main(%arg0: tensor<f64>) -> tensor<f64> {\n"
                    "  %0 = stablehlo.bogus %arg0 : tensor<f64>\n  return %0 : tensor<f64>\n}\n")
    assert main(["grad", str(path)]) == 1
    assert rendered(capsys, tmp_path) == ("", UNREADABLE)
    junk = tmp_path / "junk.mlirbc"
    junk.write_bytes(b"ML\xefR\x00garbage")
    assert main(["grad", str(junk)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error[E0502]: cannot read") and "Traceback" not in err


def test_usage_errors(exported, tmp_path, capsys):
    assert main(["grad", str(tmp_path / "missing.mlir")]) == 2
    assert capsys.readouterr().err == f"arrc: error: no such file: {tmp_path / 'missing.mlir'}\n"
    assert main(["grad", exported["growth"], "--wrt", "2"]) == 2
    assert capsys.readouterr().err == "arrc: error: --wrt 2: `main` takes 2 arguments (positions 0 to 1)\n"
    for bad in ("x", "0,0", "-1", ""):
        assert main(["grad", exported["growth"], "--wrt", bad]) == 2
        assert "--wrt" in capsys.readouterr().err


SQRT = """\
func.func public @main(%arg0: tensor<3xf64>) -> tensor<f64> {
  %0 = stablehlo.sqrt %arg0 : tensor<3xf64>
  %cst = stablehlo.constant dense<0.000000e+00> : tensor<f64>
  %1 = stablehlo.reduce(%0 init: %cst) applies stablehlo.add across dimensions = [0] : (tensor<3xf64>, tensor<f64>) -> tensor<f64>
  return %1 : tensor<f64>
}
"""

BACKWARD_INF = """\
error[R0002]: infinity produced in the backward pass
 --> $DIR/sqrt.mlir:2:8
  |
2 |   %0 = stablehlo.sqrt %arg0 : tensor<3xf64>
  |        ^ the derivative of `sqrt` produced inf at index [1]
"""


def test_backward_pass_guard_report_shows_the_input_line(tmp_path, capsys):
    """The derivative's locations name the input file (MLIR read it as "-"): a guard on the derivative
    blames the forward operation's line there."""
    path, out = tmp_path / "sqrt.mlir", tmp_path / "sqrt.grad.mlir"
    path.write_text(SQRT)
    assert main(["grad", str(path), "-o", str(out)]) == 0
    assert 'loc("-"' not in out.read_text() and f'loc("{path}":2:8)' in out.read_text()
    assert main(["run", str(out), "--arg", "arg0=[1, 0, 4]", "--guards", "inf"]) == 3
    _, err = rendered(capsys, tmp_path)
    assert err.startswith(BACKWARD_INF), err
    assert "= note: in the backward pass, in main" in err


def test_complex_values_are_refused(tmp_path, capsys):
    path = tmp_path / "c.mlir"
    path.write_text(jax.jit(lambda x: jnp.sum(x * jnp.abs(x * 1j))).lower(np.ones(3)).as_text())
    assert main(["grad", str(path)]) == 1
    _, err = rendered(capsys, tmp_path)
    assert err.startswith("error[E0216]: cannot differentiate `main`: `stablehlo.convert` has a value of type "
                          "complex<f64>[3]\n --> $DIR/c.mlir:"), err


def test_an_operation_without_a_rule_is_refused_at_its_python_line(tmp_path, capsys):
    """(`reduce_window`, a max pooling, has no rule in compiler/autodiff.py yet: pick another if it gets one.)"""
    def f(x):
        return jnp.sum(lax.reduce_window(x, -jnp.inf, lax.max, (2,), (1,), "VALID"))
    path = tmp_path / "pool.mlir"
    path.write_text(jax.jit(f).lower(np.ones(4)).as_text(debug_info=True))
    assert main(["grad", str(path)]) == 1
    err = capsys.readouterr().err
    line = inspect.getsourcelines(f)[1] + 1
    assert err.startswith("error[E0216]: cannot differentiate "), err         # (the wording is autodiff's)
    assert f"--> {Path(__file__).resolve()}:{line}:" in err
    assert "return jnp.sum(lax.reduce_window(" in err and "Traceback" not in err


def test_a_lapack_kernel_call_is_refused_without_claiming_linear_algebra_is_covered(tmp_path, capsys):
    """`jnp.linalg.qr` lowered for CPU calls jaxlib's kernels `lapack_dgeqrf_ffi` and `lapack_dorgqr_ffi`, which
    have no rule: the refusal must not list "linear algebra" among what is covered."""
    path = tmp_path / "qr.mlir"
    path.write_text(jax.jit(lambda a: jnp.sum(jnp.linalg.qr(a)[1])).lower(np.eye(2)).as_text())
    assert main(["grad", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error[E0216]: cannot differentiate the custom call `lapack_d"), err
    assert "linear algebra," not in err and "one of jaxlib's LAPACK kernels" in err
    assert "= help: take the derivative in JAX (`jax.grad`) before exporting" in err


SPD = RNG.standard_normal((4, 4)) @ RNG.standard_normal((4, 4)).T + 4 * np.eye(4)
GENERAL, RHS = RNG.standard_normal((4, 4)), RNG.standard_normal(4)
LAPACK_LOSSES = {       # jnp.linalg and jax.scipy.linalg as JAX lowers them for CPU: getrf, trsm, potrf, syevd
    "solve": (lambda a, b: jnp.sum(jnp.linalg.solve(a, b) ** 2), (GENERAL, RHS)),
    "inv_det": (lambda a: jnp.sum(jnp.linalg.inv(a) ** 2) + jnp.linalg.det(a), (GENERAL,)),
    "solve_triangular": (lambda a, b: jnp.sum(jax.scipy.linalg.solve_triangular(
        a, b, lower=False, trans=1, unit_diagonal=True) ** 3), (GENERAL, RHS)),
    "cholesky": (lambda a: jnp.sum(jnp.sin(jnp.linalg.cholesky(a, upper=True))), (SPD,)),
    "cho_solve": (lambda a, b: jnp.sum(jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(a), b) ** 2),
                  (SPD, RHS)),
    "eigh": (lambda a: jnp.sum(jnp.linalg.eigh(a)[0] ** 2) + jnp.sum(jnp.linalg.eigh(a)[1][:, 0] ** 4), (SPD,)),
    "batched_solve": (lambda a, b: jnp.sum(jnp.linalg.solve(a, b) ** 2),
                      (np.stack([GENERAL, SPD]), np.stack([RHS, RHS])[..., None])),
}


@pytest.mark.parametrize("name", sorted(LAPACK_LOSSES))
def test_jax_lapack_kernel_calls_against_jax_grad(name, tmp_path):
    """A JAX export's LAPACK kernel calls are differentiated by JAX's rules of the primitives they compute."""
    f, args = LAPACK_LOSSES[name]
    path = tmp_path / "f.mlir"
    path.write_text(jax.jit(f).lower(*args).as_text())
    wrt = tuple(range(len(args)))
    assert_value_and_grad(grad_of(str(path), ",".join(map(str, wrt)), tmp_path), f, args, wrt)


def test_donated_arguments_are_not_donated_to_the_derivative(tmp_path):
    def double(x):
        return x * x * 2.0
    path = tmp_path / "donate.mlir"
    path.write_text(jax.jit(double, donate_argnums=0).lower(np.float64(1.0)).as_text())
    assert "tf.aliasing_output" in path.read_text()
    fn = grad_of(str(path), "0", tmp_path)
    assert "tf.aliasing_output" not in Path(fn.path).read_text()
    assert [float(r) for r in fn([np.float64(3.0)])] == [18.0, 12.0]
