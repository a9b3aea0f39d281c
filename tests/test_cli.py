"""The `arrc` command line: every subcommand, its flags, output formats and exit codes (0/1/2)."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from arrc.cli import main, parse_literal

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "1"}

PROGRAM = """\
def nansum(x: f32[n]) -> f32:
    return sum(where(isnan(x), 0, x))

def scaled(x: f32[n], k: f32) -> f32[n]:
    return x * k

def stats(x: f64[r, c]) -> (f64[c], f64):
    return mean(x, axis=0), sum(x)

def specials() -> f32[4]:
    return [nan, inf, -inf, 1.5]

def flags(x: i64[n]) -> (bool[n], i64):
    return x > 1, sum(x)

def main() -> f32:
    x = [1.0, 2.0, nan, 3.0, 4.0]
    return nansum(x)
"""

WARNING = """\
def combine(x: i64[n], y: f32[n]) -> f32[n]:
    return x + y
"""

BROKEN = """\
def add(x: f32[n], y: f32[m]) -> f32[n]:
    return x + y

def g(x: f32) -> f32:
    return x * scale
"""


@pytest.fixture
def prog(tmp_path: Path) -> str:
    path = tmp_path / "prog.arr"
    path.write_text(PROGRAM)
    return str(path)


@pytest.fixture
def warn_file(tmp_path: Path) -> str:
    path = tmp_path / "warn.arr"
    path.write_text(WARNING)
    return str(path)


@pytest.fixture
def broken(tmp_path: Path) -> str:
    path = tmp_path / "broken.arr"
    path.write_text(BROKEN)
    return str(path)


def run_json(capsys, *argv: str) -> list[dict]:
    assert main(["run", *argv, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)["results"]


# ---- top level ------------------------------------------------------------------------------------

def test_json_results_stay_one_document_when_the_program_prints(tmp_path, capsys):
    """The program's prints went to stdout before the JSON document, which was then no JSON."""
    path = tmp_path / "p.arr"
    path.write_text('def main(x: f32) -> f32:\n    print("x is", x)\n    return x * 2.0\n')
    assert main(["run", str(path), "--arg", "x=1.5", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == {"results": [{"dtype": "f32", "shape": [], "value": 3.0}]} and err == "x is 1.5\n"
    assert main(["run", str(path), "--arg", "x=1.5"]) == 0
    assert capsys.readouterr().out == "x is 1.5\n3.0\n"


def test_version(capsys):
    assert main(["--version"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("arrc 0.") and "StableHLO" in out


def test_no_command_is_a_usage_error(capsys):
    assert main([]) == 2
    assert "usage" in capsys.readouterr().err


def test_bad_flag_is_a_usage_error(prog, capsys):
    assert main(["compile", prog, "--emit", "llvm"]) == 2
    assert "invalid choice" in capsys.readouterr().err
    assert main(["check", prog, "--no-such-flag"]) == 2


def test_help_exits_zero(capsys):
    assert main(["run", "--help"]) == 0
    assert "--arg" in capsys.readouterr().out


def test_help_lists_every_exit_status(capsys):
    """LANGUAGE.md section 9 lists 0 to 3; arrc/exits.py has 4 (internal error) and 130 (Ctrl-C) too, said nowhere."""
    assert main(["--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "exit status: 0 ok, 1 compile error, 2 usage error, 3 run-time guard or assert failure, 4 internal " \
           "error (a bug in arrc), 130 interrupted (Ctrl-C)" in out


def test_repl_subcommand_reads_piped_cells(prog):
    done = subprocess.run([sys.executable, "-m", "arrc", "repl"], input="x = [1.0, 2.0]\nsum(x) * 2\n",
                          capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "f32 = 6.0" in done.stdout


def test_guard_missing_file_is_a_usage_error(capsys):
    assert main(["guard", "no-such-file.mlir"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_guard_and_grad_of_arr_source_say_what_does_it_for_arr(prog, tmp_path, capsys):
    """They read StableHLO: an .arr file was "E0502 cannot read ... as StableHLO: custom op 'def' is unknown";
    a module without `main` was "cannot run", though `arrc guard` runs nothing."""
    assert main(["guard", prog]) == 2
    assert capsys.readouterr().err == f"arrc: error: arrc guard reads StableHLO (.mlir, .mlirbc, a portable " \
        f"artifact), and {prog} is arr source: `arrc compile --emit guarded FILE` writes an arr function's " \
        f"guarded StableHLO\n"
    assert main(["grad", prog, "--wrt", "0"]) == 2
    assert "arrc grad reads StableHLO" in capsys.readouterr().err
    empty = tmp_path / "empty.mlir"
    empty.write_text("module {}\n")
    assert main(["guard", str(empty)]) == 1
    assert capsys.readouterr().err.startswith(f"error[E0502]: {empty} has no entry point: ")


def test_python_dash_m(prog):
    done = subprocess.run([sys.executable, "-m", "arrc", "check", prog], capture_output=True, text=True,
                          env=ENV, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([sys.executable, "-m", "arrc", "--version"], capture_output=True, text=True,
                          env=ENV, cwd=ROOT, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("arrc ")


# ---- check ----------------------------------------------------------------------------------------

def test_check_ok_prints_only_a_summary(prog, capsys):
    assert main(["check", prog]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == f"{prog}: no errors\n"


def test_check_reports_every_error(broken, capsys):
    assert main(["check", broken]) == 1
    err = capsys.readouterr().err
    assert "error[E0202]" in err and "error[E0101]" in err
    assert "broken.arr:2:12" in err and "^" in err
    assert "Traceback" not in err


def test_check_json(broken, capsys):
    assert main(["check", broken, "--diagnostics", "json"]) == 1
    diags = json.loads(capsys.readouterr().out)["diagnostics"]
    assert [d["code"] for d in diags] == ["E0202", "E0101"]
    first = diags[0]
    assert first["severity"] == "error" and first["span"]["line"] == 2 and first["span"]["col"] == 12
    assert first["span"]["file"].endswith("broken.arr")


def test_check_json_clean(prog, capsys):
    assert main(["check", prog, "--diagnostics", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"diagnostics": []}


def test_check_warnings(warn_file, capsys):
    assert main(["check", warn_file]) == 0
    assert "warning[W0001]" in capsys.readouterr().err
    assert main(["check", warn_file, "--diagnostics", "json"]) == 0
    (diag,) = json.loads(capsys.readouterr().out)["diagnostics"]
    assert diag["code"] == "W0001" and diag["severity"] == "warning"


def test_check_werror(warn_file, capsys):
    assert main(["check", warn_file, "--werror"]) == 1
    assert "[W0001]" in capsys.readouterr().err


def test_check_missing_file(tmp_path, capsys):
    assert main(["check", str(tmp_path / "nope.arr")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["check", str(tmp_path)]) == 2          # a directory is not a source file


def test_check_invalid_utf8(tmp_path, capsys):
    path = tmp_path / "bad.arr"
    path.write_bytes(b"# caf\xe9\ndef f(x: f32) -> f32:\n    return x\n")
    assert main(["check", str(path)]) == 1
    assert "E0003" in capsys.readouterr().err


def test_check_does_not_import_jax(prog, tmp_path):
    code = ("import sys; from arrc.cli import main; "
            f"a = main(['check', {prog!r}]); "
            f"b = main(['compile', {prog!r}, '-o', {str(tmp_path / 'out.mlir')!r}]); "
            "print(a, b, sorted(m for m in sys.modules if m == 'jax' or m.startswith('jax.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0 0 []"


# ---- compile --------------------------------------------------------------------------------------

def test_compile_stablehlo_to_stdout(prog, capsys):
    assert main(["compile", prog]) == 0
    out = capsys.readouterr().out
    assert "func.func public @main" in out
    assert "prog.arr" in out and "loc(" in out            # source locations are kept


def test_compile_to_file(prog, tmp_path, capsys):
    out = tmp_path / "main.mlir"
    assert main(["compile", prog, "-o", str(out)]) == 0
    assert capsys.readouterr().out == ""
    assert "stablehlo.reduce" in out.read_text()


def test_compile_to_a_file_that_cannot_be_written_names_it(prog, tmp_path, capsys):
    out = tmp_path / "no" / "f.mlir"
    assert main(["compile", prog, "-o", str(out)]) == 2
    assert capsys.readouterr().err == f"arrc: error: -o {out}: cannot write it (No such file or directory)\n"


def test_compile_entry_with_shapes(prog, capsys):
    assert main(["compile", prog, "--entry", "stats", "--shape", "r=3", "--shape", "c=2"]) == 0
    out = capsys.readouterr().out
    assert "tensor<3x2xf64>" in out and "?" not in out.split("loc(")[0]


@pytest.mark.parametrize("shapes, message", [
    ([], "needs a size for shape variable `r`"),
    (["--shape", "r=3", "--shape", "c=2", "--shape", "z=4"], "no shape variable `z`"),
    (["--shape", "r=three"], "expected NAME=INT"),
    (["--shape", "r=3", "--shape", "r=4"], "given twice"),
])
def test_compile_shape_errors(prog, capsys, shapes, message):
    assert main(["compile", prog, "--entry", "stats", *shapes]) == 2
    assert message in capsys.readouterr().err


def test_compile_unknown_entry(prog, capsys):
    assert main(["compile", prog, "--entry", "nope"]) == 2
    err = capsys.readouterr().err
    assert "no function `nope`" in err and "nansum" in err


def test_compile_error_exit_1(broken, capsys):
    assert main(["compile", broken]) == 1
    assert "error[E0202]" in capsys.readouterr().err


def test_compile_werror(warn_file, capsys):
    assert main(["compile", warn_file, "--entry", "combine", "--shape", "n=2"]) == 0
    assert "warning[W0001]" in capsys.readouterr().err
    assert main(["compile", warn_file, "--entry", "combine", "--shape", "n=2", "--werror"]) == 1


def test_compile_guards_and_target(prog, capsys):
    assert main(["compile", prog, "--guards", "nan,inf", "--target", "gpu"]) == 0
    guarded = capsys.readouterr().out
    assert 'arrc.check_results = "inf,nan"' in guarded
    assert main(["compile", prog]) == 0
    assert "arrc.check_results" not in capsys.readouterr().out
    assert main(["compile", prog, "--guards", "all"]) == 0
    assert main(["compile", prog, "--guards", "nan,bogus"]) == 2
    assert "unknown guard" in capsys.readouterr().err


def test_compile_takes_run_s_device_flag_for_its_target(prog, capsys):
    """`--device` (as `arrc run` spells it) is `--target`: it was argparse's abbreviation of `--devices`,
    "argument --devices: invalid int value: 'gpu'"."""
    assert main(["compile", prog, "--target", "gpu"]) == 0
    by_target = capsys.readouterr().out
    assert main(["compile", prog, "--device", "gpu"]) == 0
    assert capsys.readouterr().out == by_target
    assert main(["compile", prog, "--device", "npu"]) == 2
    assert "invalid choice: 'npu'" in capsys.readouterr().err


def test_compile_mlir_bytecode(prog, tmp_path):
    from jaxlib.mlir import ir
    from arrc.compiler.emit import make_context
    out = tmp_path / "main.mlirbc"
    assert main(["compile", prog, "--emit", "mlirbc", "-o", str(out)]) == 0
    data = out.read_bytes()
    assert data.startswith(b"ML\xefR")
    with make_context():
        module = ir.Module.parse(data)
        assert "func.func public @main" in str(module)


def test_compile_binary_to_stdout_pipe(prog):
    done = subprocess.run([sys.executable, "-m", "arrc", "compile", prog, "--emit", "mlirbc"],
                          capture_output=True, env=ENV, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(b"ML\xefR")


def test_compile_portable_artifact_runs(prog, tmp_path):
    """The artifact deserializes in a fresh context and runs through PJRT like runtime/pjrt.py does."""
    import jax.extend  # noqa: F401
    import jax
    from jax._src.lib import xla_client as xc
    from jaxlib.mlir.dialects import stablehlo as hlo
    from arrc.compiler.emit import make_context
    out = tmp_path / "nansum.vhlo"
    assert main(["compile", prog, "--entry", "nansum", "--shape", "n=4", "--emit", "artifact", "-o", str(out)]) == 0
    module = hlo.deserialize_portable_artifact(make_context(), out.read_bytes())
    backend = jax.extend.backend.get_backend("cpu")
    device = backend.local_devices()[0]
    exe = backend.compile_and_load(module, xc.DeviceList((device,)), xc.CompileOptions())
    x = jax.device_put(np.array([1.0, np.nan, 2.0, 4.0], np.float32), device)
    (result,), = exe.execute_sharded([x]).disassemble_into_single_device_arrays()
    assert float(np.asarray(result)) == 7.0


# ---- run ------------------------------------------------------------------------------------------

def test_run_main_text(prog, capsys):
    assert main(["run", prog]) == 0
    assert capsys.readouterr().out == "10.0\n"


def test_run_json(prog, capsys):
    assert run_json(capsys, prog) == [{"dtype": "f32", "shape": [], "value": 10.0}]


def test_run_json_non_finite(prog, capsys):
    (result,) = run_json(capsys, prog, "--entry", "specials")
    assert result == {"dtype": "f32", "shape": [4], "value": ["nan", "inf", "-inf", 1.5]}


def test_run_several_results(prog, capsys):
    assert main(["run", prog, "--entry", "flags", "--arg", "x=[1, 2, 3]"]) == 0
    assert capsys.readouterr().out == "[false  true  true]\n6\n"
    flags, total = run_json(capsys, prog, "--entry", "flags", "--arg", "x=[1, 2, 3]")
    assert flags == {"dtype": "bool", "shape": [3], "value": [False, True, True]}
    assert total == {"dtype": "i64", "shape": [], "value": 6}


def test_run_literal_and_scalar_args(prog, capsys):
    (result,) = run_json(capsys, prog, "--entry", "scaled", "--arg", "x=[1, 2.5, nan]", "--arg", "k=2")
    assert result == {"dtype": "f32", "shape": [3], "value": [2.0, 5.0, "nan"]}
    (result,) = run_json(capsys, prog, "--entry", "scaled", "--arg", "x=[-inf, 0.1]", "--arg", "k=-1")
    assert result["value"] == ["inf", -0.1]


def test_run_npy_arg_and_npz_out(prog, tmp_path, capsys):
    data = np.arange(6, dtype=np.float64).reshape(3, 2)
    np.save(tmp_path / "data.npy", data)
    out = tmp_path / "res.npz"
    assert main(["run", prog, "--entry", "stats", "--arg", f"x=@{tmp_path / 'data.npy'}", "--out", str(out)]) == 0
    capsys.readouterr()
    with np.load(out) as saved:
        assert sorted(saved.files) == ["result_0", "result_1"]
        np.testing.assert_array_equal(saved["result_0"], data.mean(axis=0))
        assert saved["result_0"].dtype == np.float64 and saved["result_1"] == 15.0


def test_an_out_file_that_cannot_be_written_is_refused_before_the_run(tmp_path, capsys):
    """`--out /nonexistent/r.npz` ran the program, printed its results, then said "No such file or directory"
    without naming --out: the results were lost."""
    src = tmp_path / "p.arr"
    src.write_text('def main() -> f32:\n    print("ran")\n    return 1.0\n')
    (tmp_path / "d.npz").mkdir()
    (tmp_path / "f").write_text("")
    for out, message in ((tmp_path / "no" / "r.npz", f"there is no directory {tmp_path / 'no'}"),
                         (tmp_path / "f" / "r.npz", f"{tmp_path / 'f'} is not a directory")):
        assert main(["run", str(src), "--out", str(out)]) == 2
        assert capsys.readouterr() == ("", f"arrc: error: --out {out}: {message}\n")
    assert main(["run", str(src), "--out", str(tmp_path / "d.npz")]) == 2
    assert capsys.readouterr() == ("", f"arrc: error: --out {tmp_path / 'd.npz'} is a directory: give the name of "
                                       f"a file in it\n")


def test_an_out_file_that_fails_after_the_run_is_named(prog, tmp_path, capsys, monkeypatch):
    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(np, "savez", full)
    out = tmp_path / "r.npz"
    assert main(["run", prog, "--out", str(out)]) == 2
    assert capsys.readouterr() == ("10.0\n", f"arrc: error: --out {out}: cannot write it (No space left on "
                                             f"device)\n")


def test_a_shard_of_more_dimensions_than_its_parameter_says_so_in_the_flags_terms(prog, capsys):
    """It was JAX's terms, and "1 entries": "--shard: in_specs of `x`, P('data', None), has 2 entries for f32[n]"."""
    for verb in (["run", prog, "--arg", "x=[1.0]", "--arg", "k=2"], ["compile", prog, "--shape", "n=4"]):
        assert main([*verb, "--entry", "scaled", "--mesh", "data=1", "--shard", "x=data,_"]) == 2
        assert capsys.readouterr().err == ("arrc: error: --shard x=data,_ names 2 dimensions, and `x: f32[n]` has 1: "
                                           "a mesh axis or _ per dimension, at most\n"), verb
    assert main(["run", prog, "--entry", "scaled", "--arg", "x=[1.0]", "--arg", "k=2", "--mesh", "data=1",
                 "--shard", "k=data"]) == 2
    assert capsys.readouterr().err == ("arrc: error: --shard k=data names 1 dimension, and `k: f32` has none: a mesh "
                                       "axis or _ per dimension, at most\n")


def test_devices_past_the_limit_are_a_usage_error(prog, capsys):
    """--devices had no upper bound: 3,000,000,000 was an internal compiler error (E0601, jaxlib's RuntimeError
    making the CPU client), 100,000 ran for minutes, 16,384 took 17 s and 2 GB. The limit is checked before
    JAX starts (arrc/sharding.py MAX_VIRTUAL_DEVICES), as arrc.distributed.initialize checks local_devices."""
    import arrc.distributed
    for n in (3_000_000_000, 1025):
        for verb in (["run", prog, "--arg", "x=[1.0, 2.0]", "--arg", "k=2"], ["compile", prog, "--shape", "n=2"]):
            assert main([*verb, "--entry", "scaled", "--devices", str(n), "--mesh", "data=2"]) == 2
            assert capsys.readouterr() == ("", f"arrc: error: --devices {n}: a process makes at most 1024 virtual CPU "
                                               f"devices; for a larger mesh, run several processes (--coordinator, "
                                               f"docs/sharding.md)\n"), (n, verb)
        with pytest.raises(ValueError, match=rf"^local_devices must be an integer in 1..1024 \(virtual CPU devices "
                                             rf"of this process\), not {n}$"):
            arrc.distributed.initialize("127.0.0.1:9", 1, 0, local_devices=n)


def test_run_time(prog, capsys):
    assert main(["run", prog, "--time"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "10.0\n"
    assert "compile" in captured.err and "run" in captured.err and "ms" in captured.err


def test_run_guards_clean_result(prog, capsys):
    assert main(["run", prog, "--guards", "all"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "10.0\n" and captured.err == ""


def test_run_guards_report_exits_3(tmp_path, capsys):
    src = tmp_path / "ratio.arr"
    src.write_text("def main() -> f32:\n    x = [1.0, 0.0]\n    return sum(x / x)\n")
    assert main(["run", str(src), "--guards", "nan"]) == 3
    err = capsys.readouterr().err
    assert "error[R0001]: NaN produced at run time" in err and "this division produced NaN at index [1]" in err
    assert main(["run", str(src)]) == 0


@pytest.mark.parametrize("args, message", [
    (["--entry", "scaled", "--arg", "x=[1.0]"], "needs --arg k: e.g. --arg k=1.0"),
    (["--entry", "scaled", "--arg", "x=[1.0]", "--arg", "k=1", "--arg", "q=1"], "no parameter `q`"),
    (["--entry", "scaled", "--arg", "x=[1.0]", "--arg", "x=[2.0]"], "given twice"),
    (["--entry", "scaled", "--arg", "x"], "expected NAME=VALUE"),
    (["--entry", "scaled", "--arg", "x=[1, 2", "--arg", "k=1"], "cannot read"),
    (["--entry", "scaled", "--arg", "x=__import__('os')", "--arg", "k=1"], "cannot read"),
    (["--entry", "scaled", "--arg", "x=@missing.npy", "--arg", "k=1"], "no such file"),
    (["--entry", "scaled", "--arg", "x=@", "--arg", "k=1"],
     "arrc: error: --arg x=@: the file name is missing after @ (e.g. --arg x=@x.npy)\n"),
    (["--entry", "stats", "--arg", "x=[[1, 2], [3]]"], "--arg x: the nested list is ragged"),
    (["--entry", "nope"], "no function `nope`"),
])
def test_run_usage_errors(prog, capsys, args, message):
    assert main(["run", prog, *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_run_wrong_dtype_file(prog, tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.ones(3, np.float64))
    assert main(["run", prog, "--entry", "scaled", "--arg", f"x=@{tmp_path / 'x.npy'}", "--arg", "k=1"]) == 2
    err = capsys.readouterr().err
    assert "f32" in err and "f64" in err


def test_run_compile_error(broken, capsys):
    assert main(["run", broken]) == 1
    assert "error[E0202]" in capsys.readouterr().err


def test_run_device(prog, capsys):
    """Without a GPU `--device gpu` is a one-line usage error."""
    assert main(["run", prog, "--device", "gpu"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--device gpu" in err


EFFECTS = """\
def checked_sum(x: f32[n]) -> f32:
    print("checking", x)
    assert all(x > 0), "x must be positive"
    return sum(x)
"""


def test_run_print_and_assert(tmp_path, capsys):
    path = tmp_path / "effects.arr"
    path.write_text(EFFECTS)
    assert main(["run", str(path), "--entry", "checked_sum", "--arg", "x=[1, 2]"]) == 0
    assert capsys.readouterr().out == "checking [1. 2.]\n3.0\n"
    assert main(["run", str(path), "--entry", "checked_sum", "--arg", "x=[1, -2]"]) == 3
    captured = capsys.readouterr()
    assert captured.out == "checking [ 1. -2.]\n"
    assert "x must be positive" in captured.err and "effects.arr:3:5" in captured.err


def test_parse_literal():
    assert parse_literal("3") == 3
    assert parse_literal(" -2.5 ") == -2.5
    assert parse_literal("true") is True
    assert parse_literal("[[1, 2], [3, -inf]]") == [[1, 2], [3, float("-inf")]]
    assert np.isnan(parse_literal("nan"))
    assert parse_literal("[1j, 1-2j, -0.5+3j]") == [1j, 1 - 2j, -0.5 + 3j]     # for a module from elsewhere
    for bad in ["'text'", "1 + 2", "x", "[1, None]", "1j + 2", "1j + 2j"]:
        with pytest.raises(ValueError):
            parse_literal(bad)


# ---- explain --------------------------------------------------------------------------------------

def test_explain(capsys):
    assert main(["explain", "E0202"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# E0202: shapes do not match") and "## Wrong" in out and "## Right" in out
    assert main(["explain", "w0001"]) == 0
    assert capsys.readouterr().out.startswith("# W0001")


def test_explain_takes_a_code_without_its_letter_or_zeros(capsys):
    """`arrc explain 203` (as rustc's `--explain 308`), `e203`, `0203`: "is not a diagnostic code"."""
    for text in ("203", "e203", "E203", "0203", " e0203"):
        assert main(["explain", text]) == 0, text
        assert capsys.readouterr().out.startswith("# E0203: "), text
    assert main(["explain", "1"]) == 2
    assert capsys.readouterr().err == ("arrc: error: '1' is not a diagnostic code: a code is E, W or R and four "
                                       "digits (did you mean `E0001`, `W0001` or `R0001`?)\n")
    assert main(["explain", "9999"]) == 2
    assert capsys.readouterr().err == ("arrc: error: '9999' is not a diagnostic code: a code is E, W or R and four "
                                       "digits, e.g. E0202\n")


def test_explain_unknown(capsys):
    assert main(["explain", "E9999"]) == 2
    err = capsys.readouterr().err
    assert "unknown code" in err and "E0202" in err


def test_output_naming_the_input_file_is_refused_before_anything_is_written(tmp_path, capsys):
    """`arrc compile f.arr -o f.arr` replaced the source with StableHLO (exit 0); so did a link to it, and
    `arrc grad`/`guard` on a module: a usage error (2), the file as it was, as gcc refuses."""
    src = tmp_path / "g.arr"
    src.write_text("def main(x: f32[3]) -> f32[3]:\n    return x\n")
    link = tmp_path / "link.arr"
    link.symlink_to(src)
    for out in (src, link, tmp_path / "." / "g.arr"):
        assert main(["compile", str(src), "-o", str(out)]) == 2
        assert capsys.readouterr().err == f"arrc: error: -o {out} is the input file: write the output elsewhere\n"
    assert src.read_text() == "def main(x: f32[3]) -> f32[3]:\n    return x\n"
    assert main(["compile", str(src), "-o", str(tmp_path / "g.mlir")]) == 0
    mlir = tmp_path / "g.mlir"
    assert main(["guard", str(mlir), "-o", str(mlir)]) == 2


def test_entry_of_a_stablehlo_file_must_name_its_function(tmp_path, capsys):
    """`arrc run f.mlir --entry foo` ran `main` as if --entry were not given."""
    src = tmp_path / "v.arr"
    src.write_text("def vec(x: f32[3]) -> f32[3]:\n    return x * 2.0\n")
    mlir = tmp_path / "v.mlir"
    assert main(["compile", str(src), "--entry", "vec", "-o", str(mlir)]) == 0
    for entry in ("vec", "main"):
        assert main(["run", str(mlir), "--arg", "x=[1,2,3]", "--entry", entry]) == 0
        assert capsys.readouterr().out == "[2. 4. 6.]\n"
    assert main(["run", str(mlir), "--arg", "x=[1,2,3]", "--entry", "foo"]) == 2
    assert capsys.readouterr().err == (f"arrc: error: {mlir} has one function to run, `vec`: --entry foo names none "
                                       "(it chooses among an .arr file's functions)\n")


def test_an_argument_file_under_the_home_folder_is_found_by_its_tilde(tmp_path, monkeypatch, capsys):
    """`--arg x=@~/x.npy`: no shell expands a ~ after `x=@`, and arrc said "no such file: ~/x.npy"."""
    monkeypatch.setenv("HOME", str(tmp_path))
    np.save(tmp_path / "x.npy", np.array([1.0, 2.0], np.float32))
    src = tmp_path / "d.arr"
    src.write_text("def main(x: f32[n]) -> f32[n]:\n    return x * 2.0\n")
    assert main(["run", str(src), "--arg", "x=@~/x.npy"]) == 0
    assert capsys.readouterr().out.split() == ["[2.", "4.]"]


def test_a_dash_reads_the_source_from_standard_input(monkeypatch, capsys):
    """`cat f.arr | arrc check -` was "no such file: -"; `-` is standard input, named `<stdin>` in
    diagnostics, as Python's `python -`."""
    def stdin(text):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    stdin("def main(x: f32[n]) -> f32:\n    return sum(x)\n")
    assert main(["run", "-", "--arg", "x=[1, 2]"]) == 0
    assert capsys.readouterr().out == "3.0\n"
    stdin("def main() -> f32:\n    return 1.0 +\n")
    assert main(["check", "-"]) == 1
    err = capsys.readouterr().err
    assert " --> <stdin>:2:17" in err and err.endswith("<stdin>: 1 error; `arrc explain E0001` explains the first\n")
