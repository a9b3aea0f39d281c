"""Modules JAX exports, run and guarded by `arrc run` (issue 19, docs/stablehlo.md): `jax.export`
serializations (a flatbuffer around a portable artifact, saved under any name); arguments by the names
JAX records (a pytree's paths: `params['w']`), one by one or a whole pytree from one .npz archive;
reports in StableHLO's terms; complex results, bf16 files, modules without locations. JAX is the oracle
(x64 on)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from arrc.cli import main, path_parts
from arrc.runtime.foreign import ForeignFunction

jax = pytest.importorskip("jax")
jnp = jax.numpy
export = pytest.importorskip("jax.export")


@pytest.fixture(autouse=True)
def _x64():
    with jax.enable_x64(True):
        yield


def exported(tmp_path, f, *args, name="f.bin"):
    path = tmp_path / name
    path.write_bytes(export.export(jax.jit(f))(*args).serialize())
    return path


def layer(params, x):
    return jnp.tanh(params["w"] @ x + params["b"])


PARAMS = {"b": np.array([0.5, -1.0]), "w": np.arange(6.0).reshape(2, 3) / 7}
X = np.array([1.0, -2.0, 0.25])


def test_serialized_export_runs_as_jax_does(tmp_path):
    a = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])
    fn = ForeignFunction(str(exported(tmp_path, jnp.linalg.inv, a)))       # LAPACK inside
    assert fn.param_names == ["a"]
    np.testing.assert_allclose(np.asarray(fn([a])[0]), jnp.linalg.inv(a), rtol=1e-12)


def test_recorded_names_and_a_pytree_from_one_npz(tmp_path, capsys):
    path = str(exported(tmp_path, layer, PARAMS, X))
    assert ForeignFunction(path).param_names == ["params['b']", "params['w']", "x"]
    want = np.asarray(layer(PARAMS, X))
    np.savez(tmp_path / "p.npz", **PARAMS)
    np.save(tmp_path / "x.npy", X)
    out = tmp_path / "r.npz"
    assert main(["run", path, "--arg", f"params=@{tmp_path / 'p.npz'}", "--arg", f"x=@{tmp_path / 'x.npy'}",
                 "--out", str(out)]) == 0
    np.testing.assert_array_equal(np.load(out)["result_0"], want)
    # one by one, by JAX's names or by position
    np.save(tmp_path / "w.npy", PARAMS["w"])
    assert main(["run", path, "--arg", "params['b']=[0.5, -1.0]", "--arg", f"params['w']=@{tmp_path / 'w.npy'}",
                 "--arg", "x=[1.0, -2.0, 0.25]", "--out", str(out)]) == 0
    np.testing.assert_array_equal(np.load(out)["result_0"], want)
    assert main(["run", path, "--arg", "arg0=[0.5, -1.0]", "--arg", f"arg1=@{tmp_path / 'w.npy'}",
                 "--arg", "x=[1.0, -2.0, 0.25]", "--out", str(out)]) == 0
    np.testing.assert_array_equal(np.load(out)["result_0"], want)
    capsys.readouterr()
    assert main(["run", path, "--arg", "arg2=[0.5, -1.0]", "--arg", "x=[1.0, -2.0, 0.25]"]) == 2
    assert capsys.readouterr().err == "arrc: error: --arg x is given twice (once as arg2)\n"
    assert main(["run", path, "--arg", "y=[0.5, -1.0]"]) == 2
    assert capsys.readouterr().err == (f"arrc: error: {path} takes arguments params['b'], params['w'], x; "
                                       "unknown: y\n")


@pytest.mark.parametrize("order", [0, 1])
def test_a_leaf_given_alone_and_in_its_roots_archive_is_given_twice(tmp_path, capsys, order):
    """Which of the two values a run took was the order of the `--arg`s'; `--arg x` twice is an error."""
    path = str(exported(tmp_path, layer, PARAMS, X))
    np.savez(tmp_path / "p.npz", **PARAMS)
    both = [f"params=@{tmp_path / 'p.npz'}", "params['b']=[9.0, 9.0]"]
    args = [a for arg in (both if order else both[::-1]) for a in ("--arg", arg)]
    assert main(["run", path, *args, "--arg", "x=[1.0, -2.0, 0.25]"]) == 2
    assert capsys.readouterr().err == (f"arrc: error: --arg params['b'] is given twice "
                                       f"(once in --arg params=@{tmp_path / 'p.npz'})\n")


def test_nested_pytree_keys(tmp_path, capsys):
    params = {"dense": {"kernel": np.eye(3), "bias": np.ones(3)}, "scale": [np.float64(2.0)]}

    def f(params, x):
        return params["scale"][0] * (params["dense"]["kernel"] @ x + params["dense"]["bias"])
    path = str(exported(tmp_path, f, params, X))
    names = ForeignFunction(path).param_names
    assert names == ["params['dense']['bias']", "params['dense']['kernel']", "params['scale'][0]", "x"]
    assert [path_parts(n) for n in names[1:3]] == [("params", "dense", "kernel"), ("params", "scale", "0")]
    np.savez(tmp_path / "p.npz", **{"dense/kernel": np.eye(3), "dense/bias": np.ones(3), "scale.0": 2.0})
    out = tmp_path / "r.npz"
    assert main(["run", path, "--arg", f"params=@{tmp_path / 'p.npz'}", "--arg", "x=[1.0, -2.0, 0.25]",
                 "--out", str(out)]) == 0
    np.testing.assert_array_equal(np.load(out)["result_0"], np.asarray(f(params, X)))


def test_keys_with_an_equals_sign_quotes_or_a_backslash(tmp_path, capsys):
    """JAX writes each key as Python's repr does: `p['a=b']`, `p["it's"]`, `p['b\\\\c']`. The first was
    cut at its `=` (`expected NAME=VALUE`), the second was no name at all, and an archive's keys for
    either or the third led to no parameter."""
    params = {"a=b": X, "it's": 2 * X, "b\\c": 3 * X}

    def f(p):
        return p["a=b"] + 10 * p["it's"] - p["b\\c"]
    path = str(exported(tmp_path, f, params))
    names = ForeignFunction(path).param_names
    assert names == ["p['a=b']", "p['b\\\\c']", "p[\"it's\"]"]
    assert [path_parts(n) for n in names] == [("p", "a=b"), ("p", "b\\c"), ("p", "it's")]
    want = np.asarray(f(params))
    out = tmp_path / "r.npz"
    assert main(["run", path, *[f"--arg={n}={params[path_parts(n)[1]].tolist()}" for n in names],
                 "--out", str(out)]) == 0
    np.testing.assert_array_equal(np.load(out)["result_0"], want)
    np.savez(tmp_path / "p.npz", **params)
    assert main(["run", path, "--arg", f"p=@{tmp_path / 'p.npz'}", "--out", str(out)]) == 0
    np.testing.assert_array_equal(np.load(out)["result_0"], want)
    np.savez(tmp_path / "q.npz", **{"['\\x']": X})           # no repr writes it: a key like any other
    assert main(["run", path, "--arg", f"p=@{tmp_path / 'q.npz'}"]) == 2
    assert "no parameter p[...] for its array" in capsys.readouterr().err


def test_an_integer_argument_out_of_its_dtypes_range_is_refused(tmp_path, capsys):
    """As for arr's own functions (and `np.int8(300)`): `--arg a=300` for an i8 parameter wrapped to 44,
    `-1` for a u64 to 2**64 - 1, and 2**64 was an internal compiler error (OverflowError)."""
    path = str(exported(tmp_path, lambda a, b: (a * 2, b + 1), np.int8(3), np.uint64(5)))
    for args, problem in ((["a=300", "b=1"], "a: value out of range for i8"),
                          (["a=3", "b=-1"], "b: value out of range for u64"),
                          (["a=3", f"b={2 ** 64}"], "b: value out of range for u64")):
        assert main(["run", path, *[f"--arg={a}" for a in args]]) == 2, args
        assert capsys.readouterr().err == f"arrc: error: argument {problem}\n"
    assert main(["run", path, "--arg", "a=-128", "--arg", f"b={2 ** 64 - 1}"]) == 0
    assert capsys.readouterr().out == "0\n0\n"


def test_tree_file_mistakes_say_what_is_expected(tmp_path, capsys):
    path = str(exported(tmp_path, layer, PARAMS, X))
    np.savez(tmp_path / "bad.npz", b=PARAMS["b"], kernel=PARAMS["w"])
    assert main(["run", path, "--arg", f"params=@{tmp_path / 'bad.npz'}", "--arg", "x=[1.0, -2.0, 0.25]"]) == 2
    assert capsys.readouterr().err == (f"arrc: error: {tmp_path / 'bad.npz'}: no parameter params[...] for its "
                                       "array 'kernel'; the parameters under params are params['b'], params['w']\n")
    assert main(["run", path, "--arg", "x=[1.0, -2.0, 0.25]"]) == 2
    assert capsys.readouterr().err == (
        f"arrc: error: {path} takes arguments params['b'], params['w'], x; missing: --arg params['b']=... "
        "(or all 2 under params from one .npz archive: --arg params=@FILE.npz)\n")


def test_bytes_that_only_look_like_an_export_are_a_diagnostic(tmp_path, capsys):
    path = tmp_path / "junk.bin"
    path.write_bytes(bytes(range(256)) * 3 + b"ML\xefR" + b"\x07" * 40)
    assert main(["run", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error[E0502]: cannot read {path} as StableHLO: not MLIR bytecode or text, and not "
                          "a jax.export serialization ("), err


def test_nan_in_a_scan_is_blamed_where_a_where_keeps_it(tmp_path, capsys):
    """`where(i == 2, log(c - 10), c + 1)` in a `lax.scan`: the `log` is NaN at every step, and only step
    2's reaches the result (the report used to name step 0, a NaN the `where` dropped)."""
    def body(c, i):
        c = jnp.where(i == 2, jnp.log(c - 10.0), c + 1.0)
        return c, c

    def f(x):
        return jax.lax.scan(body, x, jnp.arange(5))[1]
    path = tmp_path / "scan.mlir"
    path.write_text(jax.jit(f).lower(np.float32(1.0)).as_text(debug_info=True))
    assert main(["run", str(path), "--guards", "nan", "--arg", "x=1"]) == 3
    err = capsys.readouterr().err
    notes = [line.strip() for line in err.splitlines() if "= note" in line]
    assert "this `log` produced NaN" in err and notes[:2] == ["= note: operands: (c - 10.0) = -7.0",
                                                             "= note: in loop iteration 2"], err


def run_guarded(tmp_path, capsys, f, *args, guards="all"):
    """`arrc run` of `f`'s module (text with JAX's locations) with `guards`: (exit code, stdout, the notes)."""
    path = tmp_path / "m.mlir"
    path.write_text(jax.jit(f).lower(*args).as_text(debug_info=True))
    argv = ["run", str(path), "--guards", guards]
    for i, a in enumerate(args):
        argv += ["--arg", f"arg{i}={np.asarray(a).tolist()}"]
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, [line.strip()[len("= note: "):] for line in err.splitlines() if "= note: " in line]


def test_foreign_reports_say_what_stablehlo_does(tmp_path, capsys):
    """arr wraps a negative index, clamps the rest and gives 0 for `x // 0`; a module from JAX has
    StableHLO's semantics, and its reports say those."""
    x = np.arange(4.0, dtype=np.float32)
    code, _, notes = run_guarded(tmp_path, capsys, lambda x, i: x.at[i].set(7.0), x, np.array([1, 9]))
    assert code == 3 and "valid indices are 0..3; StableHLO's scatter drops this update" in notes, notes
    code, _, notes = run_guarded(tmp_path, capsys, lambda a, b: a // b, np.array([4, 5], np.int32),
                                 np.array([2, 0], np.int32))
    assert code == 3 and ("StableHLO leaves the result of an integer division by zero to the backend; "
                          "the div0 guard reports it instead") in notes, notes


def test_a_backward_operation_is_not_named_by_the_forward_text(tmp_path, capsys):
    """JAX's backward `mul` of `x * x` (x times the cotangent) has the forward operation's location: its operands
    were named `x` and `x` from that text, and the note said `x = inf` where x was 0.0."""
    def f(x):
        return jax.grad(lambda x: jnp.sum(jnp.sqrt(x * x)))(x)
    code, _, notes = run_guarded(tmp_path, capsys, f, np.array([1.0, 0.0], np.float32), guards="nan")
    assert code == 3 and notes[0] == "operands at [1]: x = 0.0, `multiply` in the derivative = inf", notes


def test_take_in_fill_mode_is_no_bounds_fault(tmp_path, capsys):
    """`jnp.take`'s default mode gathers and then puts its fill where the index was out of range."""
    x = np.arange(4.0, dtype=np.float32)
    code, out, notes = run_guarded(tmp_path, capsys, lambda x, i: jnp.take(x, i), x, np.array([0, 5]),
                                   guards="bounds")
    assert (code, out, notes) == (0, "[ 0. nan]\n", [])
    # `mode="clip"` is a plain gather that StableHLO clamps, as `x[i]`'s is: the module cannot tell
    # which clamp was meant, and the guard is there for the other (docs/stablehlo.md)
    code, out, notes = run_guarded(tmp_path, capsys, lambda x, i: jnp.take(x, i, mode="clip"), x,
                                   np.array([0, 5]), guards="bounds")
    assert code == 3 and "valid indices are 0..3; StableHLO's gather clamps it into range" in notes, notes


def test_complex_results_as_json_and_bf16_from_npy(tmp_path, capsys):
    path = tmp_path / "fft.mlir"
    path.write_text(jax.jit(jnp.fft.fft).lower(np.ones(4, np.float32)).as_text())
    assert main(["run", str(path), "--arg", "arg0=[1, 2, 3, 4]", "--format", "json"]) == 0
    assert capsys.readouterr().out == ('{"results": [{"dtype": "complex64", "shape": [4], "value": '
                                       '[[10.0, 0.0], [-2.0, 2.0], [-2.0, 0.0], [-2.0, -2.0]]}]}\n')
    import ml_dtypes
    np.save(tmp_path / "b.npy", np.array([1.5, -2.0, 3.0], ml_dtypes.bfloat16))     # stored as "|V2"
    path = tmp_path / "twice.mlir"
    path.write_text(jax.jit(lambda b: b * 2).lower(np.ones(3, ml_dtypes.bfloat16)).as_text())
    out = tmp_path / "r.npz"
    assert main(["run", str(path), "--arg", f"arg0=@{tmp_path / 'b.npy'}", "--out", str(out)]) == 0
    got = np.load(out)["result_0"]
    assert got.tobytes() == np.array([3.0, -4.0, 6.0], ml_dtypes.bfloat16).tobytes()


def test_a_module_without_locations_is_reported_at_its_own_lines(tmp_path, capsys):
    path = tmp_path / "noloc.mlir"
    path.write_text("func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {\n"
                    "  %0 = stablehlo.log %arg0 : tensor<2xf32>\n"
                    "  return %0 : tensor<2xf32>\n}\n")
    assert main(["run", str(path), "--guards", "all", "--arg", "arg0=[1, 0]"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("error[R0002]: infinity produced at run time\n"
                          f" --> {path}:2:8\n"
                          "  |\n"
                          "2 |   %0 = stablehlo.log %arg0 : tensor<2xf32>\n"
                          "  |        ^ this operation produced -inf at index [1]\n"
                          "  |\n"
                          f"  = note: operands at [1]: value at {path}:1:24 = 0.0\n"), err


def normalize(x, eps):              # a library helper: a fault inside it is shown with the user's call
    return (x - jnp.mean(x)) / jnp.sqrt(jnp.var(x) + eps)


def model(x, y):
    h = normalize(x, 0.0)
    return h * 2.0, y // (y - 2)


def test_a_fault_in_a_helper_names_the_users_call_and_jax_internals_their_call(tmp_path, capsys):
    """JAX names each frame by the function holding its line; the report says `in normalize, called from
    model at <the line in model>`. An integer `//` is JAX's `floor_divide`, whose operations JAX leaves
    without a file: inlined, they are where the call is (they had no position at all)."""
    import inspect
    first = inspect.getsourcelines(model)[1]
    x, y = np.ones(4, np.float32), np.array([1, 3, 4], np.int32)
    code, _, notes = run_guarded(tmp_path, capsys, model, x, y)
    assert code == 3 and notes[-1] == f"in normalize, called from model at {__file__}:{first + 1}:9", notes
    path = tmp_path / "model.mlir"
    path.write_text(jax.jit(model).lower(x, y).as_text(debug_info=True))
    assert main(["run", str(path), "--guards", "div0", "--arg", "x=[1, 2, 3, 4]", "--arg", "y=[0, 2, 3]"]) == 3
    err = capsys.readouterr().err
    assert f" --> {__file__}:{first + 2}:21\n" in err and err.endswith("  = note: in model\n"), err


def test_complex_parameters_from_literals_and_files_and_their_results_guarded(tmp_path, capsys):
    path = tmp_path / "clog.mlir"
    path.write_text(jax.jit(lambda z: jnp.log(z) * 2).lower(np.ones(3, np.complex64)).as_text(debug_info=True))
    z = np.array([1 + 1j, 1, 2], np.complex64)
    np.save(tmp_path / "z.npy", z)
    out = tmp_path / "r.npz"
    for arg in ("z=[1+1j, 1, 2]", f"z=@{tmp_path / 'z.npy'}"):
        assert main(["run", str(path), "--guards", "all", "--arg", arg, "--out", str(out)]) == 0
        np.testing.assert_array_equal(np.load(out)["result_0"], np.asarray(jnp.log(z) * 2))
    capsys.readouterr()
    assert main(["run", str(path), "--guards", "all", "--arg", "z=[1+1j, 0, 2]"]) == 3     # log(0) = -inf
    line = test_complex_parameters_from_literals_and_files_and_their_results_guarded.__code__.co_firstlineno + 2
    assert capsys.readouterr().err == f"""\
error[R0002]: infinity produced at run time
   --> {__file__}:{line}:39
    |
{line} |     path.write_text(jax.jit(lambda z: jnp.log(z) * 2).lower(np.ones(3, np.complex64)).as_text(debug_info=True))
    |                                       ^^^^^^^^^^ this `log` produced -inf+0.0j at index [1]
    |
    = note: operands at [1]: z = 0.0+0.0j
    = note: in test_complex_parameters_from_literals_and_files_and_their_results_guarded.<locals>.<lambda>
    = help: if this infinity is intended (`log(0.0)` is `-inf`), leave `inf` out of the guards: `--guards nan,bounds,div0` (`guards="nan,bounds,div0"`; in the REPL `:guards nan,bounds,div0`)
"""
    assert main(["run", str(path), "--arg", "z=[true, 0, 2]"]) == 2
    assert "`z: complex64[3]` takes complex numbers (1+2j), not true" in capsys.readouterr().err


def test_a_complex_division_by_a_literal_is_guarded():
    """The div0 guard read every op's second operand as a possible divisor: a complex constant crashed it."""
    from arrc.passes.guards import KINDS
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cdiv.mlir"
        path.write_text(jax.jit(lambda z: z / 2 + 1).lower(np.ones(3, np.complex128)).as_text())
        got = ForeignFunction(str(path), KINDS)([np.array([2j, 4, 6 + 2j])])[0]
    np.testing.assert_array_equal(np.asarray(got), [1 + 1j, 3, 4 + 1j])


def by_platform(x):
    return jax.lax.platform_dependent(x, cpu=lambda x: x + 1.0, cuda=lambda x: x + 100.0)


def multi_platform(tmp_path, platforms, name="mp.bin"):
    """A `jax.export` for several platforms: its `main` takes the platform's index first (JAX's
    `_platform_index`), which the serialization's list of platforms gives a meaning."""
    path = tmp_path / name
    f = by_platform if "cpu" in platforms else jnp.sin
    path.write_bytes(export.export(jax.jit(f), platforms=platforms)(
        jax.ShapeDtypeStruct((4,), jnp.float32)).serialize())
    return path


def test_a_multi_platform_export_runs_its_platforms_code(tmp_path, capsys):
    """The platform index is filled in from `Exported.platforms` for the device, as `Exported.call` does,
    and hidden: it used to be an argument `arg0` that ran the CUDA branch on the CPU when given 0."""
    path = multi_platform(tmp_path, ("cuda", "cpu"))
    fn = ForeignFunction(str(path))
    assert fn.param_names == ["x"]
    want = np.asarray(export.deserialize(path.read_bytes()).call(jnp.ones(4, jnp.float32)))
    np.testing.assert_array_equal(want, [2.0] * 4)
    np.testing.assert_array_equal(np.asarray(fn([np.ones(4, np.float32)])[0]), want)
    assert main(["run", str(path), "--arg", "x=[1, 1, 1, 1]", "--guards", "all"]) == 0
    assert capsys.readouterr().out == "[2. 2. 2. 2.]\n"
    # `arrc guard` keeps the platforms (abi.PLATFORMS): its module runs the CPU's code as well
    guarded = tmp_path / "g.mlir"
    assert main(["guard", str(path), "-o", str(guarded)]) == 0
    assert main(["run", str(guarded), "--arg", "x=[1, 1, 1, 1]"]) == 0
    assert capsys.readouterr().out == "[2. 2. 2. 2.]\n"


def test_a_multi_platform_export_for_other_platforms_is_refused(tmp_path, capsys):
    path = multi_platform(tmp_path, ("cuda", "tpu"))
    assert main(["run", str(path), "--arg", "x=[1, 1, 1, 1]"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error[E0503]: {path} was exported for cuda, tpu, not for cpu (the device `cpu`)\n"
                          f" --> {path}:1:1\n"), err


def test_a_platform_index_without_its_platforms_is_refused(tmp_path, capsys):
    """The module's text alone (`Exported.mlir_module()`) does not say which index is which platform."""
    path = tmp_path / "mp.mlir"
    path.write_text(export.export(jax.jit(by_platform), platforms=("cuda", "cpu"))(
        jax.ShapeDtypeStruct((4,), jnp.float32)).mlir_module())
    assert main(["run", str(path), "--arg", "x=[1, 1, 1, 1]"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error[E0503]: @main takes the index of the platform it runs on (argument 0, a "
                          "multi-platform `jax.export`), and the module does not say which platform each index "
                          f"means\n --> {path}:1:1\n"), err
