"""A module written by `arrc compile` (text, bytecode or portable artifact, guarded or not) runs under
`arrc run` exactly as its source does: the same results and the same effects. Print, assert and guard
sites describe themselves with attributes on their custom_calls, so nothing is lost on the way (issue 12:
a compiled program with `print` or `assert` used to crash the process)."""
from __future__ import annotations

from pathlib import Path

import pytest

from arrc.cli import main as cli

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
ALL = sorted(p.name for p in EXAMPLES.glob("*.arr"))
SUFFIX = {"stablehlo": ".mlir", "mlirbc": ".mlirbc", "artifact": ".mlirbc"}

EFFECTS = """\
def helper(x: f32[n]) -> f32[n]:
    print("helper sees", x, "and", sum(x))
    return x * 2.0

def main(limit: f32) -> f32[3]:
    x = [1.0, 2.0, 3.0]
    for i in range(2):
        print("iteration", i)
    y = helper(x)
    assert sum(y) < limit, "too large"
    return y
"""


def run(capsys, argv: list) -> tuple[int, str, str]:
    code = cli([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def compiled(tmp_path, source, emit: str, *options) -> Path:
    path = tmp_path / f"compiled{SUFFIX[emit]}"
    assert cli(["compile", str(source), "--emit", emit, "-o", str(path), *options]) == 0
    return path


@pytest.mark.parametrize("emit", list(SUFFIX))
@pytest.mark.parametrize("name", ALL)
def test_every_compiled_example_runs_like_its_source(name, emit, tmp_path, capsys):
    expected = run(capsys, ["run", EXAMPLES / name, "--format", "json"])
    assert expected[0] == 0
    assert run(capsys, ["run", compiled(tmp_path, EXAMPLES / name, emit), "--format", "json"]) == expected


@pytest.mark.parametrize("name", ALL)
def test_every_example_compiled_with_guards_runs_like_its_source(name, tmp_path, capsys):
    expected = run(capsys, ["run", EXAMPLES / name, "--format", "json", "--guards", "all"])
    path = compiled(tmp_path, EXAMPLES / name, "stablehlo", "--guards", "all")
    assert run(capsys, ["run", path, "--format", "json"]) == expected


@pytest.mark.parametrize("emit", list(SUFFIX))
def test_print_and_assert_survive_compile_then_run(emit, tmp_path, capsys):
    source = tmp_path / "effects.arr"
    source.write_text(EFFECTS)
    path = compiled(tmp_path, source, emit)
    code, out, err = run(capsys, ["run", path, "--arg", "arg0=100"])
    assert code == 0 and err == ""
    assert out == "iteration 0\niteration 1\nhelper sees [1. 2. 3.] and 6.0\n[2. 4. 6.]\n"
    failing = run(capsys, ["run", path, "--arg", "arg0=5"])
    assert failing == run(capsys, ["run", source, "--arg", "limit=5"])
    assert failing[0] == 3 and failing[1] == "iteration 0\niteration 1\nhelper sees [1. 2. 3.] and 6.0\n"
    assert failing[2] == f"""\
error[R0005]: assertion failed: too large
  --> {source}:10:5
   |
10 |     assert sum(y) < limit, "too large"
   |     ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^ this condition is false
   |
   = note: in main
"""


def test_a_report_names_the_function_a_module_was_compiled_from(tmp_path, capsys):
    """`arrc compile m.arr --entry f` names its entry `main` and keeps `arrc.entry = "f"` on it: a guard report of
    `arrc run f.mlir --guards nan` says `in f`, as a run of the source does (it said `in main`), and so does the
    chain of calls under it (`called from f`)."""
    source = tmp_path / "m.arr"
    source.write_text("def inner(x: f32[4]) -> f32[4]:\n    return log(x - 1.0)\n\n"
                      "def f(x: f32[4]) -> f32[4]:\n    return log(x - 1.0) + 1.0\n\n"
                      "def g(x: f32[4]) -> f32[4]:\n    return inner(x) * 2.0\n")
    for entry, note in (("f", "= note: in f\n"), ("g", "= note: in inner, called from g at")):
        path = compiled(tmp_path, source, "stablehlo", "--entry", entry)
        expected = run(capsys, ["run", source, "--entry", entry, "--guards", "nan", "--arg", "x=[0.5, 2, 3, 4]"])
        assert expected[0] == 3 and note in expected[2], expected
        assert run(capsys, ["run", path, "--guards", "nan", "--arg", "x=[0.5, 2, 3, 4]"]) == expected
