"""The command line as a new user meets it (issue 17, "CLI"): `arrc repl` with options, inputs that are
not source files, `--arg` values of the wrong kind, help and did-you-mean, `check`'s summary, `explain`
without the pages' comments, the `--entry` and `--arg` hints, bools as arr spells them, and the README's
commands."""
from __future__ import annotations

import json

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from arrc.cli import main

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "1", "NO_COLOR": "1"}

PROGRAM = """\
def f(b: bool, s: i32, x: f32[n]) -> f32:
    return sum(x) + s

def g(x: f32[3]) -> bool[3]:
    return x > 1.0
"""

BROKEN = """\
def add(x: f32[n], y: f32[m]) -> f32[n]:
    return x + y

def combine(x: i64[n], y: f32[n]) -> f32[n]:
    return x + y

def g(x: f32) -> f32:
    return x * scale
"""


@pytest.fixture
def prog(tmp_path: Path) -> str:
    path = tmp_path / "p.arr"
    path.write_text(PROGRAM)
    return str(path)


def usage(capsys, *argv: str) -> str:
    """The one-line message of a usage error (exit 2), without `arrc: error: `."""
    assert main(list(argv)) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("arrc: error: ") and err.count("\n") == 1, err
    return err[len("arrc: error: "):-1]


def arrc(*argv: str, stdin: str = "", timeout: int = 120) -> subprocess.CompletedProcess:
    """`python -m arrc ARGV` in a subprocess, stdin piped (and closed after `stdin`), bounded in time."""
    return subprocess.run([sys.executable, "-m", "arrc", *argv], input=stdin, capture_output=True, text=True,
                          env=ENV, cwd=ROOT, timeout=timeout)


# ---- arrc repl OPTIONS ---------------------------------------------------------------------------

def test_repl_help_is_the_repls():
    done = arrc("repl", "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: arrc repl")
    for flag in ("--guards", "--device", "--no-history", "--no-color"):
        assert flag in done.stdout


def test_repl_options_reach_the_repl():
    done = arrc("repl", "--guards", "all", "--no-history", "--no-color", stdin="x = [1.0, 2.0]\nsum(x) * 2\n")
    assert done.returncode == 0, done.stderr
    assert "f32 = 6.0" in done.stdout and "unrecognized" not in done.stderr


def test_repl_with_stdin_closed_ends():
    done = arrc("repl", "--guards", "nan")
    assert done.returncode == 0, done.stderr


def test_repl_bad_option_is_the_repls_usage_error():
    done = arrc("repl", "--device", "abacus")
    assert done.returncode == 2 and "usage: arrc repl" in done.stderr


# ---- FILE that is not a source file ----------------------------------------------------------------

def test_a_directory_is_said_to_be_one(tmp_path, capsys):
    assert usage(capsys, "check", str(tmp_path)) == f"{tmp_path} is a directory, not an arr source file"
    assert usage(capsys, "guard", str(tmp_path)) == \
        f"{tmp_path} is a directory, not a StableHLO file (.mlir or .mlirbc)"
    assert usage(capsys, "check", str(tmp_path / "nope.arr")) == f"no such file: {tmp_path / 'nope.arr'}"


@pytest.mark.parametrize("data", [bytes(range(256)) * 4, b"def f() -> i32:\n    return 1\x00\n",
                                  bytes(range(128, 256)) * 50])
def test_a_binary_file_is_not_text(tmp_path, capsys, data):
    """E0003 at its first character that is not text, as a stray byte's (it was a usage error with no code: no
    JSON for --diagnostics json)."""
    path = tmp_path / "b.arr"
    path.write_bytes(data)
    assert main(["check", str(path), "--diagnostics", "json"]) == 1
    (diag,) = json.loads(capsys.readouterr().out)["diagnostics"]
    assert (diag["code"], diag["message"]) == ("E0003", "file is not text (it looks binary)")
    assert (diag["span"]["line"], diag["span"]["col"]) == ((2, 13) if b"\x00\n" in data else (1, 1))
    assert main(["check", str(path)]) == 1
    assert capsys.readouterr().err.startswith("error[E0003]: file is not text (it looks binary)\n")


def test_a_stray_latin1_byte_is_still_E0003(tmp_path, capsys):
    path = tmp_path / "latin.arr"
    path.write_bytes(b"# caf\xe9\ndef f(x: f32) -> f32:\n    return x\n")
    assert main(["check", str(path)]) == 1
    assert "error[E0003]" in capsys.readouterr().err


# ---- --arg values of the wrong kind ----------------------------------------------------------------

@pytest.mark.parametrize("args, message", [
    (["b=1", "s=2", "x=[1.0]"], "--arg b: `b: bool` takes true or false, not 1 (e.g. --arg b=true)"),
    (["b=true", "s=abc", "x=[1.0]"], "--arg s: cannot read 'abc'; `s: i32` takes an integer (e.g. --arg s=1)"),
    (["b=true", "s=2.5", "x=[1.0]"], "--arg s: `s: i32` takes an integer, not 2.5 (e.g. --arg s=1)"),
    (["b=true", "s=2", "x=[1.0, true]"], "--arg x: `x: f32[n]` takes numbers, not true (e.g. --arg x='[1.0, 2.0]')"),
    (["b=true", "s=2", "x=[[1.0], [1, 2]]"],
     "--arg x: the nested list is ragged (its rows differ in length); `x: f32[n]` takes a rectangular one "
     "(e.g. --arg x='[1.0, 2.0]')"),
    (["b=true", "s=2", "x=[[1.0], 3]"],
     "--arg x: the nested list is ragged (its rows differ in length); `x: f32[n]` takes a rectangular one "
     "(e.g. --arg x='[1.0, 2.0]')"),
])
def test_wrong_kind_of_literal_names_parameter_and_type(prog, capsys, args, message):
    argv = ["run", prog, "--entry", "f"]
    for a in args:
        argv += ["--arg", a]
    assert usage(capsys, *argv) == message


def test_source_file_as_array_file(prog, capsys):
    assert usage(capsys, "run", prog, "--entry", "f", "--arg", "b=true", "--arg", "s=1", "--arg", f"x=@{prog}") == (
        f"{prog} is not a NumPy .npy or .npz file (it does not start like one); --arg x=@FILE reads an array "
        f"saved with numpy.save(FILE, array), or write its values: --arg x='[1.0, 2.0]'")


def test_out_must_be_npz(prog, tmp_path, capsys):
    out = tmp_path / "r.txt"
    assert usage(capsys, "run", prog, "--entry", "g", "--arg", "x=[1, 2, 3]", "--out", str(out)) == (
        f"--out {out}: the results are saved as a NumPy .npz archive; give a name ending in .npz "
        f"(e.g. --out {tmp_path / 'r.npz'})")
    assert not list(tmp_path.glob("r.txt*"))
    assert main(["run", prog, "--entry", "g", "--arg", "x=[1, 2, 3]", "--out", str(tmp_path / "r.npz")]) == 0
    assert (tmp_path / "r.npz").is_file()


@pytest.mark.parametrize("out, example", [("", "results.npz"), (".", "results.npz"), ("/", "/results.npz"),
                                          ("..", "../results.npz")])
def test_an_out_without_a_file_name_is_a_usage_error(prog, capsys, out, example):
    """`--out ''` and `--out .` were E0601 (a ValueError making the example name: `Path('.').with_suffix`)."""
    assert usage(capsys, "run", prog, "--entry", "g", "--arg", "x=[1, 2, 3]", "--out", out).endswith(
        f"give a name ending in .npz (e.g. --out {example})")


# ---- help and did-you-mean -------------------------------------------------------------------------

def test_no_command_prints_the_help(capsys):
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: arrc")
    for command in ("compile", "run", "check", "guard", "grad", "explain", "repl"):
        assert re.search(rf"^    {command} +\S", err, re.MULTILINE), command


def test_misspelt_command(capsys):
    assert main(["chek", "p.arr"]) == 2
    assert "invalid choice: 'chek'" in (err := capsys.readouterr().err) and "(did you mean `check`?)" in err


def test_misspelt_flag(prog, capsys):
    assert main(["run", prog, "--gaurds", "all"]) == 2
    err = capsys.readouterr().err
    assert "arrc run: error: unrecognized arguments: --gaurds (did you mean `--guards`?) all" in err
    assert main(["run", prog, "--gaurds=all"]) == 2
    assert "--gaurds=all (did you mean `--guards`?)" in capsys.readouterr().err
    assert main(["compile", prog, "--emit", "stablhlo"]) == 2
    assert "(did you mean `stablehlo`?)" in capsys.readouterr().err


@pytest.mark.parametrize("argv, said", [
    (["-v"], "-v (did you mean `--version`?)"),
    (["run", "PROG", "-o", "r.npz"], "-o (did you mean `--out`?) r.npz"),
    (["run", "PROG", "-a", "x=1"], "-a (did you mean `--arg`?) x=1"),
    (["check", "PROG", "-w"], "-w (did you mean `--werror`?)"),
    (["run", "PROG", "-d", "cpu"], "-d cpu"),               # --device or --devices: no guess
    (["run", "PROG", "-x"], "-x"),
])
def test_a_one_letter_flag_is_taken_for_the_long_flag_of_its_letter(prog, capsys, argv, said):
    """Every unknown one-letter flag was "did you mean `-h`?" (one edit away from any of them)."""
    assert main([prog if a == "PROG" else a for a in argv]) == 2
    assert capsys.readouterr().err.endswith(f"error: unrecognized arguments: {said}\n")


@pytest.mark.parametrize("argv, said", [
    (["run", "PROG", "--shape", "n=2"], "--shape (a flag of `arrc compile`, not of `arrc run`) n=2"),
    (["compile", "PROG", "--arg=x=1"], "--arg=x=1 (a flag of `arrc run`, not of `arrc compile`)"),
    (["check", "PROG", "--guards", "nan"],
     "--guards (a flag of `arrc compile`, `arrc run` and `arrc guard`, not of `arrc check`) nan"),
])
def test_a_flag_of_another_command_is_said_to_be_one(prog, capsys, argv, said):
    """`arrc run f.arr --shape n=2` was "did you mean `--shard`?", a flag of another purpose."""
    assert main([prog if a == "PROG" else a for a in argv]) == 2
    assert capsys.readouterr().err.endswith(f"error: unrecognized arguments: {said}\n")


# ---- check's summary, explain ---------------------------------------------------------------------

def test_check_summary_when_clean(prog, capsys):
    assert main(["check", prog]) == 0
    assert capsys.readouterr() == ("", f"{prog}: no errors\n")


def test_check_summary_counts_and_points_at_explain(tmp_path, capsys):
    path = tmp_path / "broken.arr"
    path.write_text(BROKEN)
    assert main(["check", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.endswith(f"\n\n{path}: 2 errors, 1 warning; `arrc explain E0202` explains the first\n"), err
    assert err.count("error[") == 2 and err.count("warning[W0001]") == 1


def test_check_summary_with_warnings_only(tmp_path, capsys):
    path = tmp_path / "warn.arr"
    path.write_text(BROKEN.split("def g")[0].split("\n\n", 1)[1])
    assert main(["check", str(path)]) == 0
    assert capsys.readouterr().err.endswith(f"\n\n{path}: no errors, 1 warning\n")
    assert main(["check", str(path), "--diagnostics", "json"]) == 0
    assert capsys.readouterr().err == ""            # JSON: nothing but the JSON


def test_explain_strips_html_comments(capsys):
    pages = sorted((ROOT / "docs" / "errors").glob("*.md"))
    commented = [p for p in pages if "<!--" in p.read_text(encoding="utf-8")]
    assert commented
    for page in commented:
        assert main(["explain", page.stem]) == 0
        out = capsys.readouterr().out
        assert "<!--" not in out and "-->" not in out and "\n\n\n" not in out, page.stem
        assert out.startswith(f"# {page.stem}")


# ---- --entry and --arg hints ----------------------------------------------------------------------

def test_no_main_suggests_entry(prog, capsys):
    assert usage(capsys, "compile", prog) == (
        f"{prog} has no function `main`: choose one with --entry NAME (functions: f, g), e.g. "
        f"arrc compile {prog} --entry f --shape n=2")
    assert usage(capsys, "run", prog) == (
        f"{prog} has no function `main`: choose one with --entry NAME (functions: f, g), e.g. "
        f"arrc run {prog} --entry f --arg b=true --arg s=1 --arg x='[1.0, 2.0]'")
    assert usage(capsys, "run", prog, "--entry", "gg") == f"{prog} has no function `gg` (did you mean `g`?) " \
                                                          f"(functions: f, g)"


def test_missing_args_show_signature_and_example(prog, capsys):
    assert usage(capsys, "run", prog, "--entry", "f") == (
        "`f(b: bool, s: i32, x: f32[n]) -> f32` needs --arg b, s, x: e.g. --arg b=true --arg s=1 "
        "--arg x='[1.0, 2.0]'")
    assert usage(capsys, "run", prog, "--entry", "g") == \
        "`g(x: f32[3]) -> bool[3]` needs --arg x: e.g. --arg x='[1.0, 2.0, 3.0]'"
    assert usage(capsys, "run", prog, "--entry", "g", "--arg", "x=[1, 2, 3]", "--arg", "xx=1") == \
        "`g(x: f32[3]) -> bool[3]` has no parameter `xx` (did you mean `x`?) (parameters: x)"


def test_the_example_arg_runs(prog, capsys):
    message = usage(capsys, "run", prog, "--entry", "f")
    example = shlex.split(message.split("e.g. ", 1)[1])
    assert main(["run", prog, "--entry", "f", *example]) == 0
    assert capsys.readouterr().out == "4.0\n"


# ---- bools as arr spells them ----------------------------------------------------------------------

def test_bools_print_true_false(tmp_path, capsys):
    path = tmp_path / "b.arr"
    path.write_text("def m() -> (bool, bool[2, 3], bool[2], f32[2]):\n"
                    "    return true, [[true, false, true], [false, false, true]], [true, true], [1.0, 2.0]\n")
    assert main(["run", str(path), "--entry", "m"]) == 0
    assert capsys.readouterr().out == "true\n[[ true false  true]\n [false false  true]]\n[true true]\n[1. 2.]\n"


# ---- the README's commands -------------------------------------------------------------------------

def readme_commands() -> list[str]:
    """The `arrc ...` lines of the README's "Use" block, without their comments."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("## Use\n", 1)[1].split("```", 2)[1]
    return [shlex.join(shlex.split(line, comments=True)) for line in block.splitlines() if line.startswith("arrc ")]


def test_readme_commands_run(tmp_path):
    commands = readme_commands()
    assert len(commands) >= 8 and "arrc repl" in commands
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    expected = {"examples/faults/ratio.arr": 3}     # the guard example reports its fault
    for command in commands:
        argv = shlex.split(command)[1:]
        done = subprocess.run([sys.executable, "-m", "arrc", *argv], input="", capture_output=True, text=True,
                              env=ENV, cwd=tmp_path, timeout=300)
        code = next((c for name, c in expected.items() if name in argv), 0)
        assert done.returncode == code, (command, done.stderr)
        assert "Traceback" not in done.stderr, command


def test_readme_snippet_matches_examples():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "examples/ratio.arr" not in text
    for path in re.findall(r"examples/[\w/]+\.arr", text):
        assert (ROOT / path).is_file(), path
    snippet = text.split("```\n", 1)[1].split("```", 1)[0]
    nansum = (ROOT / "examples" / "nansum.arr").read_text()
    part = snippet.split("# examples/nansum.arr (two of its functions)\n", 1)[1].split("\n# ", 1)[0]
    assert part.strip() and part.strip() in nansum
    assert ".venv/bin" in text and "source .venv/bin/activate" in text
