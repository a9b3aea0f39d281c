"""Crafted and mutated StableHLO given to `arrc run` / `arrc guard` (issue 12, item 10): each must end
in a diagnostic naming the operation and its place, before anything runs; no input may crash, hang or
print a traceback. Inputs that used to crash the process are run through the CLI in a subprocess.

What a module may call (passes/verify_foreign.py, docs/errors/E0503.md): host callbacks arrc registered
(an `arrc.kind` site with a unique index), jaxlib's LAPACK kernels exactly as JAX calls them, XLA's
sharding annotations. The reader runs in a child process (runtime/mlir_reader.py).
"""
from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import arrc
from arrc.cli import main
from arrc.compiler.diagnostics import CompileError
from arrc.passes.guards import KINDS, GuardOptions, guard_module
from arrc.passes.lapack_calls import TARGETS
from arrc.passes.verify_foreign import verify_foreign_calls
from arrc.runtime import foreign
from arrc.runtime.foreign import ForeignFunction, guard_text, read_in_child

ROOT = Path(__file__).resolve().parent.parent
ENV = dict(os.environ, ARRC_NO_CACHE="1")

CB = "has_side_effect = true, api_version = 4 : i32"


def module(body: str, params: str = "%arg0: tensor<4xf32>", results: str = "tensor<4xf32>",
           attrs: str = "", before: str = "") -> str:
    return (before + f"func.func public @main({params}) -> {results}{attrs} {{\n"
            + textwrap.indent(textwrap.dedent(body).strip(), "  ") + "\n}\n")


def guard_site(index, kind: str = "bounds", extra: str = "") -> str:
    """A guard report site as passes/guards.py writes one (a bounds report outside loops)."""
    return (f'stablehlo.custom_call @xla_ffi_python_cpu_callback(%run, %c) {{backend_config = {{index = {index} : ui64}}, '
            f'{CB}, arrc.kind = "{kind}", arrc.order = array<i64: 0>, arrc.shape = array<i64: 4>, arrc.labels = [], '
            f'arrc.op = "stablehlo.gather"{extra}}} : (tensor<i32>, tensor<i64>) -> ()')


def with_run_arg(*sites: str) -> str:
    body = "%c = stablehlo.constant dense<0> : tensor<i64>\n" + "\n".join(sites) + "\nreturn %arg0 : tensor<4xf32>"
    return module(body, "%arg0: tensor<4xf32>, %run: tensor<i32>", attrs=" attributes {arrc.run_arg = 1 : i64}")


def diagnostics(tmp_path, text: str | bytes, name: str = "in.mlir") -> list:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    with pytest.raises(CompileError) as info:
        ForeignFunction(str(path))
    return info.value.diagnostics


def one(tmp_path, text: str, code: str = "E0503"):
    diags = diagnostics(tmp_path, text)
    assert [d.code for d in diags] == [code], [d.message for d in diags]
    return diags[0]


def run_cli(tmp_path, text: str | bytes, *args: str, name: str = "in.mlir", timeout: float = 180):
    """`arrc run FILE` in a fresh process: (returncode, stderr)."""
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    done = subprocess.run([sys.executable, "-m", "arrc", "run", str(path), *args], capture_output=True,
                          text=True, env=ENV, timeout=timeout, cwd=str(ROOT))
    assert done.returncode >= 0, f"killed by signal {-done.returncode}: {done.stderr[-2000:]}"
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stderr


# ---- host callbacks -------------------------------------------------------------------------------

UNREGISTERED = module(f"""
    stablehlo.custom_call @xla_ffi_python_cpu_callback(%arg0) {{backend_config = {{index = 0 : ui64}}, {CB}}} : (tensor<4xf32>) -> ()
    return %arg0 : tensor<4xf32>""")


def test_unregistered_callback_is_refused_before_it_runs(tmp_path):
    code, err = run_cli(tmp_path, UNREGISTERED, "--arg", "arg0=[1,2,3,4]")
    assert code == 1
    assert "error[E0503]: `stablehlo.custom_call @xla_ffi_python_cpu_callback` in @main: a host callback arrc " \
           "did not register" in err
    assert "in.mlir:2:3" in err


def test_jax_callback_has_no_handler_here(tmp_path):
    """jax.debug.print's callback (index in `mhlo.backend_config`, no site description) is JAX's, not ours."""
    d = one(tmp_path, module("""
        stablehlo.custom_call @xla_ffi_python_cpu_callback(%arg0) {backend_config = "", has_side_effect = true, mhlo.backend_config = {index = 0 : ui64}, mhlo.sharding = "{maximal device=0}", operand_layouts = [dense<0> : tensor<1xindex>], result_layouts = []} : (tensor<4xf32>) -> ()
        return %arg0 : tensor<4xf32>"""))
    assert d.message.endswith("a host callback arrc did not register (no `arrc.kind` describes its site): one "
                              "JAX made (`jax.debug.print`, `io_callback`, `pure_callback`) calls a Python function "
                              "that exists only in the process that exported the module; export the function "
                              "without it"), d.message


def test_huge_callback_index_is_refused_without_allocating(tmp_path):
    code, err = run_cli(tmp_path, with_run_arg(guard_site(2 ** 32)), "--arg", "arg0=[1,2,3,4]")
    assert code == 1 and "callback index 4294967296 is out of range (at most 65535)" in err


@pytest.mark.parametrize("index", [65536, 2 ** 63])
def test_out_of_range_callback_index(tmp_path, index):
    assert "out of range" in one(tmp_path, with_run_arg(guard_site(index))).message


def test_duplicate_callback_index(tmp_path):
    d = one(tmp_path, with_run_arg(guard_site(3), guard_site(3)))
    assert "callback index 3 is used by another callback" in d.message
    assert d.span.line == 4


@pytest.mark.parametrize("site, problem", [
    ('stablehlo.custom_call @xla_ffi_python_cpu_callback(%run, %c) {backend_config = {index = 0 : ui64}, '
     f'{CB}, arrc.kind = "bounds"}} : (tensor<i32>, tensor<i64>) -> ()', "needs a `arrc.order` attribute"),
    (guard_site(0, kind="trojan"), 'unknown callback site kind "trojan"'),
    (guard_site(0, extra=', arrc.dims = "x"'), "`arrc.dims` must be an array<i64"),
    (guard_site(0).replace("index = 0 : ui64", "index = 0 : ui64, other = 1"), "needs `backend_config = {index = N : ui64}`"),
    (guard_site(0).replace("arrc.labels = []", 'arrc.labels = ["a", "b"]'), "do not match the site's"),
    (guard_site(0).replace("(%run, %c)", "(%c, %c)").replace("(tensor<i32>, tensor<i64>)", "(tensor<i64>, tensor<i64>)"),
     "first operand is the run id"),
])
def test_malformed_registered_site(tmp_path, site, problem):
    assert problem in one(tmp_path, with_run_arg(site)).message


BOUNDED = ("def steps(x: f64, n: i32) -> f64:\n    for i in range(n, bound=4):\n        x = sin(x) * 1.1\n"
           "    return x\n\ndef main(n: i32) -> f64:\n    return grad(steps)(0.5, n)\n")


def test_a_derivatives_run_past_a_bound_is_read_only_as_the_module_describes_it(tmp_path):
    """The PAST result (compiler/effects.py) and its loop's attributes are checked before anything runs;
    a site number that names no loop is still a report, not a crash."""
    text = arrc.loads(BOUNDED).main.lower(arrc.spec("i32")).as_text()
    assert "arrc.bound_result = 1" in text and "arrc.bound_site = 0 : i64, arrc.loop_bound = 4 : i64" in text
    assert "must be the index of a tensor<2xi64> result" in one(
        tmp_path, text.replace("arrc.bound_result = 1", "arrc.bound_result = 0")).message
    assert "it needs `arrc.loop_bound` too" in one(tmp_path, text.replace("arrc.loop_bound = 4 : i64, ", "")).message
    code, err = run_cli(tmp_path, text.replace("arrc.bound_site = 0", "arrc.bound_site = 7"), "--arg", "arg0=6")
    assert code == 3 and err.startswith("error[R0006]: a loop ran 6 iterations, more than its bound"), err


def test_print_site_with_a_missing_value(tmp_path):
    """Its handler would run out of values (an exception inside XLA's callback)."""
    text = module("""
        %0 = stablehlo.custom_call @xla_ffi_python_cpu_callback(%run, %io) {backend_config = {index = 0 : ui64}, has_side_effect = true, api_version = 4 : i32, arrc.kind = "print", arrc.pieces = ["x =", []]} : (tensor<i32>, tensor<i32>) -> tensor<i32>
        return %arg0 : tensor<4xf32>""", "%arg0: tensor<4xf32>, %run: tensor<i32>, %io: tensor<i32>",
                  attrs=" attributes {arrc.run_arg = 1 : i64, arrc.io_arg = 2 : i64}")
    assert "0 values for 1 value slots" in one(tmp_path, text).message


def test_registered_looking_site_with_a_string_config(tmp_path):
    site = guard_site(0).replace("backend_config = {index = 0 : ui64}, has_side_effect = true, api_version = 4 : i32",
                                 'backend_config = "", has_side_effect = true, api_version = 1 : i32')
    assert "needs `backend_config = {index = N : ui64}`" in one(tmp_path, with_run_arg(site)).message


# ---- custom_call targets, calls and host transfers --------------------------------------------------

def test_unknown_target(tmp_path):
    code, err = run_cli(tmp_path, module("""
        %0 = stablehlo.custom_call @no_such_target(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
        return %0 : tensor<4xf32>"""), "--arg", "arg0=[1,2,3,4]")
    assert code == 1 and "`stablehlo.custom_call @no_such_target` in @main: unknown custom_call target" in err


def test_call_to_bodiless_function(tmp_path):
    code, err = run_cli(tmp_path, module("""
        %0 = func.call @ext(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
        return %0 : tensor<4xf32>""", before="func.func private @ext(tensor<4xf32>) -> tensor<4xf32>\n"),
        "--arg", "arg0=[1,2,3,4]")
    assert code == 1 and "`func.call @ext` in @main: calls a function declared without a body" in err
    assert "in.mlir:3:8" in err


def test_uncalled_declaration(tmp_path):
    text = module("return %arg0 : tensor<4xf32>", before="func.func private @ext(tensor<4xf32>) -> tensor<4xf32>\n")
    assert "function @ext: declared without a body" in one(tmp_path, text).message


RECURSIVE = module("""
    %0 = func.call @main(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>""")

MUTUAL = module("""
    %0 = func.call @f(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>""") + """func.func private @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = func.call @g(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func private @g(%a: tensor<4xf32>) -> tensor<4xf32> {
  %c = stablehlo.constant dense<true> : tensor<i1>
  %0 = "stablehlo.if"(%c) ({
    %1 = func.call @f(%a) : (tensor<4xf32>) -> tensor<4xf32>
    stablehlo.return %1 : tensor<4xf32>
  }, {
    stablehlo.return %a : tensor<4xf32>
  }) : (tensor<i1>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func private @h(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.composite "my.op" %a {decomposition = @h} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""


def test_recursion_is_refused_at_the_call(tmp_path, capsys):
    """XLA follows calls when it converts a module to HLO: a cycle overflowed its stack (SIGSEGV), with or
    without guards, and `arrc guard` wrote the module out."""
    code, err = run_cli(tmp_path, RECURSIVE, "--arg", "arg0=[1,2,3,4]", "--guards", "all")
    assert code == 1 and err.startswith("error[E0503]: `func.call @main` in @main: a recursive call (@main -> "
                                        "@main): XLA follows every call when it compiles a module, and a cycle "
                                        f"of calls overflows its stack\n --> {tmp_path / 'in.mlir'}:2:8\n"), err
    path = tmp_path / "in.mlir"
    assert main(["guard", str(path), "--guard-scope", "all-ops"]) == 1
    assert "error[E0503]: `func.call @main` in @main: a recursive call" in capsys.readouterr().err


def test_mutual_recursion_and_a_recursive_decomposition_are_refused(tmp_path):
    diags = diagnostics(tmp_path, MUTUAL)
    assert [(d.message.split(": XLA")[0], d.span.line) for d in diags] == [
        ("`func.call @f` in @g: a recursive call (@f -> @g -> @f)", 12),
        ("`stablehlo.composite @h` in @h: a recursive call (@h -> @h)", 20)]


def test_a_function_called_twice_is_no_recursion(tmp_path, capsys):
    text = module("""
        %0 = func.call @f(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
        %1 = func.call @f(%0) : (tensor<4xf32>) -> tensor<4xf32>
        return %1 : tensor<4xf32>""") + """func.func private @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""
    (tmp_path / "twice.mlir").write_text(text)
    np.testing.assert_array_equal(ForeignFunction(str(tmp_path / "twice.mlir"))([np.ones(4, np.float32)])[0], [4.0] * 4)


INFEED = module("""
    %t = stablehlo.create_token : !stablehlo.token
    %0:2 = "stablehlo.infeed"(%t) {infeed_config = ""} : (!stablehlo.token) -> (tensor<4xf32>, !stablehlo.token)
    return %0#0 : tensor<4xf32>""")


def test_infeed_would_wait_forever(tmp_path):
    code, err = run_cli(tmp_path, INFEED, "--arg", "arg0=[1,2,3,4]", timeout=120)
    assert code == 1 and "`stablehlo.infeed` in @main: transfers data to or from the host" in err


@pytest.mark.parametrize("op", [
    '%1 = "stablehlo.outfeed"(%arg0, %t) {outfeed_config = ""} : (tensor<4xf32>, !stablehlo.token) -> !stablehlo.token',
    '%1 = "stablehlo.send"(%arg0, %t) {channel_handle = #stablehlo.channel_handle<handle = 1, type = 2>, '
    'is_host_transfer = true} : (tensor<4xf32>, !stablehlo.token) -> !stablehlo.token',
    '%1:2 = "stablehlo.recv"(%t) {channel_handle = #stablehlo.channel_handle<handle = 1, type = 3>, '
    'is_host_transfer = true} : (!stablehlo.token) -> (tensor<4xf32>, !stablehlo.token)',
])
def test_host_transfers(tmp_path, op):
    text = module(f"%t = stablehlo.create_token : !stablehlo.token\n{op}\nreturn %arg0 : tensor<4xf32>")
    assert "transfers data to or from the host" in one(tmp_path, text).message


@pytest.mark.parametrize("op", [
    '%0 = "stablehlo.collective_permute"(%arg0) {source_target_pairs = dense<[[0, 5], [5, 0]]> : tensor<2x2xi64>, '
    'channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>} : (tensor<4xf32>) -> tensor<4xf32>',
    '%0 = "stablehlo.all_to_all"(%arg0) {split_dimension = 0 : i64, concat_dimension = 0 : i64, split_count = 2 : i64, '
    'replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>',
])
def test_collectives(tmp_path, op):
    """On one device XLA fails on them at best (the permute to device 5 tripped a bounds check)."""
    d = one(tmp_path, module(f"{op}\nreturn %0 : tensor<4xf32>"))
    assert "communicates with other devices" in d.message


ALL_REDUCE = ('%0 = "stablehlo.all_reduce"(%arg0) <{{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, '
              'replica_groups = dense<{groups}> : tensor<{shape}xi64>, use_global_device_ids}}> ({{\n'
              '^bb0(%a: tensor<f32>, %b: tensor<f32>):\n  %s = stablehlo.add %a, %b : tensor<f32>\n'
              '  stablehlo.return %s : tensor<f32>\n}}) : (tensor<4xf32>) -> tensor<4xf32>\nreturn %0 : tensor<4xf32>')


def test_collectives_over_one_device_run(tmp_path):
    """A `shard_map` over a mesh of one device (`psum` inside) is an `all_reduce` over the group [[0]], which
    JAX runs on one device as the identity; so does arrc, and a permute from device 0 to itself."""
    reduce = module(ALL_REDUCE.format(groups="0", shape="1x1"))
    permute = module('%0 = "stablehlo.collective_permute"(%arg0) {source_target_pairs = dense<0> : tensor<1x2xi64>, '
                     'channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>} : (tensor<4xf32>) -> '
                     'tensor<4xf32>\nreturn %0 : tensor<4xf32>')
    x = np.array([1.0, -2.0, 3.5, 0.0], np.float32)
    for i, text in enumerate((reduce, permute)):
        path = tmp_path / f"one{i}.mlir"
        path.write_text('module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\n'
                        + text + "}\n")
        np.testing.assert_array_equal(np.asarray(ForeignFunction(str(path))([x])[0]), x)


@pytest.mark.parametrize("attrs, groups, shape", [
    ("", "[[0, 1]]", "1x2"),                                        # another device in the group
    ("attributes {mhlo.num_partitions = 2 : i32} ", "0", "1x1"),    # a module for two devices
])
def test_collectives_naming_other_devices_stay_refused(tmp_path, attrs, groups, shape):
    text = f"module {attrs}{{\n" + module(ALL_REDUCE.format(groups=groups, shape=shape)) + "}\n"
    assert "communicates with other devices" in one(tmp_path, text).message


def test_other_dialects(tmp_path):
    d = one(tmp_path, module("%0 = arith.addf %arg0, %arg0 : tensor<4xf32>\nreturn %0 : tensor<4xf32>"))
    assert "`arith.addf` in @main: not a StableHLO, CHLO, func or Shardy operation" in d.message


def test_xla_annotations_run_and_malformed_ones_do_not(tmp_path):
    ok = module("""
        %0 = stablehlo.custom_call @Sharding(%arg0) {mhlo.sharding = "{replicated}"} : (tensor<4xf32>) -> tensor<4xf32>
        %1 = stablehlo.custom_call @annotate_device_placement(%0) {has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "device"}} : (tensor<4xf32>) -> tensor<4xf32>
        return %1 : tensor<4xf32>""")
    (tmp_path / "ok.mlir").write_text(ok)
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(ForeignFunction(str(tmp_path / "ok.mlir"))([x])[0], x)
    code, err = run_cli(tmp_path, module("""
        %0 = stablehlo.custom_call @Sharding(%arg0, %arg0) : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
        %1 = stablehlo.slice %0 [0:4] : (tensor<8xf32>) -> tensor<4xf32>
        return %1 : tensor<4xf32>"""), "--arg", "arg0=[1,2,3,4]")        # used to abort in XLA
    assert code == 1 and "an annotation takes one operand" in err


# ---- sizes -------------------------------------------------------------------------------------------

def test_shape_of_2_62_elements(tmp_path):
    code, err = run_cli(tmp_path, module("""
        %0 = stablehlo.iota dim = 0 : tensor<4611686018427387904xf32>
        %1 = stablehlo.slice %0 [0:4] : (tensor<4611686018427387904xf32>) -> tensor<4xf32>
        return %1 : tensor<4xf32>"""), "--arg", "arg0=[1,2,3,4]")         # used to abort in XLA
    assert code == 1
    assert "`stablehlo.iota` in @main: a value of type tensor<4611686018427387904xf32> needs " \
           "18,446,744,073,709,551,616 bytes" in err


@pytest.mark.parametrize("t", ["tensor<4611686018427387904x4xf32>", "tuple<tensor<4xf32>, tensor<8589934592x4xf64>>"])
def test_sizes_past_int64_and_inside_tuples(tmp_path, t):
    text = module("return %arg0 : tensor<4xf32>", params=f"%arg0: tensor<4xf32>, %big: {t}")
    assert f"a value of type {t} needs" in one(tmp_path, text).message


@pytest.mark.parametrize("t", ["!stablehlo.token", "tuple<tensor<4xf32>>", "tensor<4xf8E4M3FN>", "tensor<4xi4>"])
def test_a_parameter_arrc_cannot_pass_is_refused_by_guard_as_by_run(tmp_path, capsys, t):
    """`arrc guard` wrote such a module, which `arrc run` then refused ("unsupported parameter type", no file)."""
    path = tmp_path / "in.mlir"
    path.write_text(module("return %arg0 : tensor<4xf32>", params=f"%arg0: tensor<4xf32>, %odd: {t}"))
    expected = (f"error[E0502]: parameter `arg1` of {path} has type {t}, which arrc cannot pass\n"
                f" --> {path}:1:46\n  |\n1 | func.func public @main(%arg0: tensor<4xf32>, %odd: {t}) -> "
                f"tensor<4xf32> {{\n  |                                              ^ this parameter\n  |\n"
                "  = help: arrc passes tensors of bool, integers, f16, bf16, f32, f64 and complex numbers (not tokens, "
                "tuples or 8- and 4-bit floats)\n")
    for command in (["guard", str(path), "-o", str(tmp_path / "g.mlir")], ["run", str(path)]):
        assert main(command) == 1
        assert capsys.readouterr().err == expected
    assert not (tmp_path / "g.mlir").exists()


# ---- LAPACK --------------------------------------------------------------------------------------------

def _linalg():
    import jax
    import jax.numpy as jnp
    from jax import lax
    L = lax.linalg
    sq = {
        "lu": lambda a: L.lu(a)[0], "qr": lambda a: L.qr(a, full_matrices=True), "qr_reduced": jnp.linalg.qr,
        "qr_pivoting": lambda a: jax.scipy.linalg.qr(a, pivoting=True), "eigh": jnp.linalg.eigh,
        "svd": jnp.linalg.svd, "svd_reduced": lambda a: jnp.linalg.svd(a, full_matrices=False),
        "svd_values": lambda a: jnp.linalg.svd(a, compute_uv=False),
        "svd_qr": lambda a: L.svd(a, algorithm=L.SvdAlgorithm.QR), "eig": L.eig,
        "eigvals": lambda a: L.eig(a, compute_left_eigenvectors=False, compute_right_eigenvectors=False),
        "schur": L.schur, "cholesky": jnp.linalg.cholesky, "hessenberg": L.hessenberg,
        "tridiagonal": L.tridiagonal, "inv": jnp.linalg.inv,
        "solve_triangular": lambda a: jax.scipy.linalg.solve_triangular(a, a[..., :2], lower=True, trans=1),
        "solve_right": lambda a: L.triangular_solve(a, a[..., :2, :], left_side=False),
        "tridiagonal_solve": lambda a: L.tridiagonal_solve(a[..., 0], a[..., 1], a[..., 2], a[..., :2]),
    }
    wide = {name: sq[name] for name in ("lu", "qr", "qr_reduced", "qr_pivoting", "svd", "svd_reduced", "svd_qr")}
    return jax, sq, wide


def _jax_module(jax, f, a):
    return jax.jit(f).lower(a).compiler_ir("stablehlo")


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
def test_every_lapack_call_jax_emits_is_allowed(dtype):
    jax, sq, wide = _linalg()
    cases = [(n, f, (2, 4, 4)) for n, f in sq.items()] + [(n, f, s) for n, f in wide.items() for s in [(3, 5), (5, 3)]]
    seen = set()
    for name, f, shape in cases:
        if name in ("tridiagonal_solve",) and dtype.startswith("complex"):
            continue
        a = np.ones(shape, dtype) + np.eye(shape[-2], shape[-1], dtype=dtype)
        m = _jax_module(jax, f, a)
        text = str(m)
        seen.update(t for t in TARGETS if f"@{t}(" in text)
        with m.context:
            assert [d.message for d in verify_foreign_calls(m)] == [], (name, shape)
    assert len(seen) >= 13


def test_lapack_results_match_jax(tmp_path):
    jax, sq, _ = _linalg()
    a = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])
    for name in ("inv", "eigh", "svd_values"):
        path = tmp_path / f"{name}.mlir"
        path.write_text(jax.jit(sq[name]).lower(a).as_text())
        got = ForeignFunction(str(path))([a])
        want = jax.tree_util.tree_leaves(jax.jit(sq[name])(a))
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-12, atol=1e-12)


GETRF = ('%0:3 = stablehlo.custom_call @lapack_sgetrf_ffi(%arg0) {backend_config = "", mhlo.backend_config = {}, '
         'operand_layouts = [dense<[0, 1]> : tensor<2xindex>], result_layouts = [dense<[0, 1]> : tensor<2xindex>, '
         'dense<0> : tensor<1xindex>, dense<> : tensor<0xindex>]} : (tensor<512x512xf32>) -> '
         '(tensor<512x512xf32>, tensor<1xi32>, tensor<i32>)\nreturn %0#1 : tensor<1xi32>')


def test_lapack_call_with_a_short_result_is_refused(tmp_path):
    """The kernel would write 512 pivots into room for 1 (a segfault, measured)."""
    # The module is refused while it is read, before the argument is looked at.
    code, err = run_cli(tmp_path, module(GETRF, "%arg0: tensor<512x512xf32>", "tensor<1xi32>"), "--arg", "arg0=0")
    assert code == 1
    assert ("`stablehlo.custom_call @lapack_sgetrf_ffi` in @main: results (tensor<512x512xf32>, tensor<1xi32>, "
            "tensor<i32>); for these operands the kernel writes (tensor<512x512xf32>, tensor<512xi32>, "
            "tensor<i32>)") in err


@pytest.mark.parametrize("call, problem", [
    ('%0:3 = stablehlo.custom_call @lapack_ssyevd_ffi(%arg0) {mhlo.backend_config = {mode = 86 : ui8, uplo = 88 : ui8}} '
     ': (tensor<3x3xf32>) -> (tensor<3x3xf32>, tensor<3xf32>, tensor<i32>)', "attribute `uplo` = 88"),
    ('%0:3 = stablehlo.custom_call @lapack_ssyevd_ffi(%arg0) {mhlo.backend_config = {mode = 86 : ui8}} '
     ': (tensor<3x3xf32>) -> (tensor<3x3xf32>, tensor<3xf32>, tensor<i32>)', "the kernel takes ['mode', 'uplo']"),
    ('%0:3 = stablehlo.custom_call @lapack_dgetrf_ffi(%arg0) {mhlo.backend_config = {}} '
     ': (tensor<3x3xf32>) -> (tensor<3x3xf32>, tensor<3xi32>, tensor<i32>)', "the kernel takes (tensor<3x3xf64>)"),
    ('%0:2 = stablehlo.custom_call @lapack_spotrf_ffi(%arg0) {mhlo.backend_config = {uplo = 76 : ui8}} '
     ': (tensor<3x3xf32>) -> (tensor<3x3xf32>, tensor<3xi32>)', "the kernel writes (tensor<3x3xf32>, tensor<i32>)"),
    ('%0 = stablehlo.custom_call @lapack_ssyevd_ffi(%arg0) {mhlo.backend_config = {mode = 86 : ui8, uplo = 76 : ui8}} '
     ': (tensor<3x3xf32>) -> tensor<3x3xf32>', "for these operands the kernel writes"),
    ('%0 = stablehlo.custom_call @lapack_sgetrf_ffi(%arg0) : (tensor<3x3xf32>) -> tensor<3x3xf32>',
     "for these operands the kernel writes"),
    ('%0 = stablehlo.custom_call @lapack_strsm_ffi(%arg0, %arg0) {mhlo.backend_config = {diag = 78 : ui8, '
     'side = 76 : ui8, trans_x = 78 : ui8, uplo = 76 : ui8}} : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>',
     None),
    ('%0 = stablehlo.custom_call @lapack_sormqr_ffi(%arg0) : (tensor<3x3xf32>) -> tensor<3x3xf32>',
     "unknown custom_call target"),
])
def test_lapack_calls_must_be_as_jax_makes_them(tmp_path, call, problem):
    result = "%0#0" if call.startswith("%0:") else "%0"
    text = module(f"{call}\nreturn {result} : tensor<3x3xf32>", "%arg0: tensor<3x3xf32>", "tensor<3x3xf32>")
    if problem is None:
        (tmp_path / "ok.mlir").write_text(text)
        ForeignFunction(str(tmp_path / "ok.mlir"))          # reads; the call is one JAX could make
        return
    assert problem in one(tmp_path, text).message


# ---- the reader runs in a child ----------------------------------------------------------------------

@pytest.mark.parametrize("script, message", [
    ("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n", "the MLIR reader crashed (signal 11, SIGSEGV)"),
    ("import os, signal\nos.kill(os.getpid(), signal.SIGABRT)\n", "the MLIR reader crashed (signal 6, SIGABRT)"),
    ("raise MemoryError\n", "the MLIR reader failed (MemoryError)"),
    ("print('not json')\n", "the MLIR reader failed"),
    ("import os, signal\nos.kill(os.getpid(), signal.SIGXCPU)\n", "reading it took more than 65 s of CPU time"),
])
def test_reader_that_dies_is_a_diagnostic(tmp_path, monkeypatch, script, message):
    reader = tmp_path / "reader.py"
    reader.write_text(script)
    monkeypatch.setattr(foreign, "READER", str(reader))
    with pytest.raises(CompileError) as info:
        read_in_child(b"ML\xefR...", "bad.mlirbc")
    [d] = info.value.diagnostics
    assert d.code == "E0502"
    assert d.message.startswith(f"cannot read bad.mlirbc as StableHLO: {message}")


def test_reader_that_hangs_is_stopped(tmp_path, monkeypatch):
    reader = tmp_path / "reader.py"
    reader.write_text("import time\ntime.sleep(60)\n")
    monkeypatch.setattr(foreign, "READER", str(reader))
    with pytest.raises(CompileError) as info:
        read_in_child(b"", "slow.mlir", timeout=1)
    assert "reading it took longer than 1 s" in info.value.diagnostics[0].message


def _running(pid: int) -> bool:
    """Whether `pid` runs (a zombie no one has reaped yet does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not _running(pid)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG and /proc are Linux's")
def test_reader_dies_with_its_parent():
    """A parent killed while its reader spins on a mutated file (MLIR's reader can loop) left the reader
    running for ever, an orphan. Here the reader waits on a stdin this test holds open, and its parent, a
    process that started it as `read_in_child` does, is killed: the reader must go too."""
    stdin, keep_open = os.pipe()
    parent = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys, time\nfrom arrc.runtime import foreign\n"
         f"child = subprocess.Popen(foreign.reader_command(), stdin={stdin})\n"
         "print(child.pid, flush=True)\ntime.sleep(600)\n"],
        cwd=ROOT, stdout=subprocess.PIPE, pass_fds=(stdin,))
    os.close(stdin)
    try:
        reader = int(parent.stdout.readline())
        time.sleep(1)                         # (it may be killed before or after it asks: either way it goes)
        parent.kill()
        parent.wait()
        assert _gone_within(reader, 20), "the reader outlived its parent"
    finally:
        parent.kill()
        parent.wait()
        os.close(keep_open)                   # (a reader still there reads its end of input and ends)


def test_reader_whose_parent_died_before_it_asked_exits():
    """The reader asks to die with its parent only once it runs: a parent gone by then is not its parent
    any more (os.getppid() differs from the pid it was given), and the reader ends without reading."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    stdin, keep_open = os.pipe()
    try:
        done = subprocess.run([sys.executable, "-P", foreign.READER, str(gone.pid), "60"], stdin=stdin,
                              capture_output=True, timeout=60)
        assert done.returncode == 1 and done.stdout == b""
    finally:
        os.close(stdin)
        os.close(keep_open)


def test_reader_cpu_time_is_bounded():
    """A reader spinning past its CPU time (a little more than the parent's timeout) is stopped by SIGXCPU."""
    spin = "from arrc.runtime import mlir_reader\nmlir_reader.bound_process(cpu_seconds=1)\nwhile True:\n    pass\n"
    done = subprocess.run([sys.executable, "-c", spin], cwd=ROOT, capture_output=True, timeout=60)
    assert done.returncode == -signal.SIGXCPU, done.stderr.decode()[-500:]


def test_parse_error_points_into_the_text(tmp_path):
    d = one(tmp_path, module("%0 = stablehlo.add %arg0, %arg0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>\n"
                             "return %0 : tensor<8xf32>", results="tensor<8xf32>"), code="E0502")
    path = str(tmp_path / "in.mlir")
    assert d.message == f"cannot read {path} as StableHLO: 'stablehlo.add' op requires the same shape for all " \
                        "operands and results"
    assert (d.span.file, d.span.line, d.span.col) == (path, 2, 8)


def test_location_naming_a_fifo_does_not_hang_the_report(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    text = module(f'%0 = stablehlo.custom_call @evil(%arg0) : (tensor<4xf32>) -> tensor<4xf32> loc("{fifo}":1:1)\n'
                  "return %0 : tensor<4xf32>")
    code, err = run_cli(tmp_path, text, "--arg", "arg0=[1,2,3,4]", timeout=120)
    assert code == 1 and f"--> {fifo}:1:1" in err


def test_strings_that_are_not_utf8_are_read_not_fatal(tmp_path):
    """A damaged module's strings (a guard site's `arrc.op`, a location's file name) may hold bytes that
    are not UTF-8: the bindings raise for an attribute's `.value` and abort the process (std::terminate)
    for a location's `.filename`. Found by the campaign below (case 31 from a checkout at /check)."""
    import arrc
    lowered = arrc.loads("def f(x: f32[4]) -> f32[4]:\n    return log(x) / x\n", filename="bad.arr")["f"].lower(arrc.spec(
        "f32[4]"))
    guard_module(lowered.module, GuardOptions(frozenset(KINDS), "all", origins=True))
    data = lowered.as_bytecode()
    assert data.count(b"stablehlo.log") == 1 and data.count(b"bad.arr") == 2
    data = data.replace(b"stablehlo.log", b"stablehlo.l\xf0g").replace(b"bad.arr", b"b\xf0d.arr")
    code, err = run_cli(tmp_path, data, "--arg", "arg0=[1,2,0,4]", name="bad.mlirbc")
    assert code == 3 and "produced -inf at index [2]" in err and "--> b\ufffdd.arr:2:12" in err, err
    # in text, as escapes: a symbol (`.value` raised), an op's name and file
    text = module('''
        %0 = func.call @"g\\F0"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
        %1 = stablehlo.log %0 : tensor<4xf32> loc("q\\F0"("z\\F1.py":5:6))
        return %1 : tensor<4xf32>''', before='func.func private @"g\\F0"(%a: tensor<4xf32>) -> tensor<4xf32> {\n'
                  "  return %a : tensor<4xf32>\n}\n")
    code, err = run_cli(tmp_path, text, "--arg", "arg0=[1,2,0,4]", "--guards", "all")
    assert code == 3 and "--> z\ufffd.py:5:7" in err and "this `q\ufffd` produced -inf at index [2]" in err, err


# ---- arrc's own modules still run -------------------------------------------------------------------

def test_own_modules_run(tmp_path, capsys):
    prog = str(ROOT / "examples" / "simulation.arr")           # print and assert callbacks, loops
    for emit, suffix in (("stablehlo", "mlir"), ("mlirbc", "mlirbc")):
        out = tmp_path / f"sim.{suffix}"
        assert main(["compile", prog, "--emit", emit, "-o", str(out)]) == 0
        capsys.readouterr()
        assert main(["run", str(out)]) == 0, emit
        assert "ball: height" in capsys.readouterr().out


def test_portable_artifact_runs(tmp_path, capsys):
    """A portable artifact is VHLO: it is upgraded to StableHLO when read (it used to have "no main")."""
    src = tmp_path / "f.arr"
    src.write_text("def f(x: f32[4]) -> f32[4]:\n    print(\"x =\", x)\n    return exp(x)\n")
    out = tmp_path / "f.mlirbc"
    assert main(["compile", str(src), "--entry", "f", "--emit", "artifact", "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["run", str(out), "--arg", "arg0=[0,0,0,0]"]) == 0
    assert capsys.readouterr().out.splitlines() == ["x = [0. 0. 0. 0.]", "[1. 1. 1. 1.]"]


def test_guarded_and_gpu_targeted_modules_run_here(tmp_path, capsys):
    src = tmp_path / "f.arr"
    src.write_text("def f(x: f32[4]) -> f32[4]:\n    print(\"x =\", x)\n    return log(x) / x\n")
    plain, guarded, gpu = tmp_path / "f.mlir", tmp_path / "g.mlir", tmp_path / "gpu.mlir"
    assert main(["compile", str(src), "--entry", "f", "-o", str(plain)]) == 0
    assert main(["guard", str(plain), "-o", str(guarded)]) == 0
    assert main(["compile", str(src), "--entry", "f", "--target", "gpu", "-o", str(gpu)]) == 0
    capsys.readouterr()
    assert main(["run", str(gpu), "--arg", "arg0=[1,2,3,4]"]) == 0
    assert "x = [1 2 3 4]" in capsys.readouterr().out.replace(".", "")
    assert main(["run", str(guarded), "--arg", "arg0=[1,2,0,4]"]) == 3
    assert "this `log` produced -inf at index [2]" in capsys.readouterr().err


def test_an_entry_not_named_main_runs_and_so_do_its_guarded_and_derivative_modules(tmp_path, capsys):
    """The entry is `main` or the only public function, but XLA compiles `main`: `arrc run` of such a
    module was E0502 ('must have a main function') or ran a private `main` instead, and what `arrc guard`
    and `arrc grad` wrote of it could not be run."""
    text = module("""
        %0 = func.call @main(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
        %1 = stablehlo.multiply %0, %0 : tensor<4xf32>
        return %1 : tensor<4xf32>""").replace("public @main", "public @foo") + """\
func.func private @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.negate %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""
    path, guarded = tmp_path / "foo.mlir", tmp_path / "g.mlir"
    path.write_text(text)
    np.testing.assert_array_equal(ForeignFunction(str(path))([np.array([1, -2, 3, 0], np.float32)])[0], [1, 4, 9, 0])
    assert main(["guard", str(path), "-o", str(guarded)]) == 0
    capsys.readouterr()
    assert main(["run", str(guarded), "--arg", "arg0=[1, -2, 3, 0]"]) == 0
    assert capsys.readouterr().out == "[1. 4. 9. 0.]\n"
    scalar = tmp_path / "s.mlir"
    scalar.write_text("func.func public @loss(%x: tensor<f64>) -> tensor<f64> {\n"
                      "  %0 = stablehlo.multiply %x, %x : tensor<f64>\n  return %0 : tensor<f64>\n}\n")
    assert main(["grad", str(scalar), "-o", str(tmp_path / "d.mlir")]) == 0
    assert [np.asarray(r).item() for r in ForeignFunction(str(tmp_path / "d.mlir"))([3.0])] == [9.0, 6.0]


# ---- mutated bytecode: a fixed-seed slice of tests/fuzz/stablehlo_campaign.py ---------------------------

_spec = importlib.util.spec_from_file_location("arrc_stablehlo_campaign",
                                               ROOT / "tests" / "fuzz" / "stablehlo_campaign.py")
campaign = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(campaign)


def test_mutated_modules_never_crash_hang_or_raise():
    result = campaign.campaign(seed=0, cases=50, seconds=None, limit=120, quiet=True)
    print(campaign.summary(result))
    assert result["cases"] == 50
    assert result["failures"] == [], campaign.summary(result)


def test_guard_of_an_unreadable_file_is_a_diagnostic(capsys, tmp_path):
    path = tmp_path / "bad.mlirbc"
    path.write_bytes(b"ML\xefR\x00garbage")
    assert main(["guard", str(path)]) == 1
    err = capsys.readouterr().err
    assert "error[E0502]: cannot read" in err and "Traceback" not in err
    with pytest.raises(CompileError):
        guard_text(path.read_bytes(), str(path), GuardOptions(frozenset(KINDS)))


def test_a_read_arrc_gives_up_on_is_not_a_hang():
    """The campaign's limit was 60 s a case, arrc's on one read too (READ_TIMEOUT_S): a correct E0502
    "reading it took longer than 60 s" arrived just too late and was counted a hang, and a case reads its
    file twice (guard, then read). Each phase now has the reader's limit and a margin: a fake worker whose
    two phases take 0.6 s each answers in time under a limit of 1 s."""
    assert campaign.LIMIT > foreign.READ_TIMEOUT_S
    fake = ("import json, sys, time\nsys.stdin.readline()\n"
            "for phase in ('guard', 'read'):\n"
            "    print(json.dumps({'phase': phase}), flush=True)\n    time.sleep(0.6)\n"
            "print(json.dumps({'verdict': 'diagnostic', 'detail': 'E0502 took longer'}), flush=True)\n")
    worker = campaign.Worker(1.0)
    worker.proc = subprocess.Popen([sys.executable, "-c", fake], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert worker.run("case.mlirbc") == ("diagnostic", "E0502 took longer")
    finally:
        worker.stop()
