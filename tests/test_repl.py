"""`arrc repl` (LANGUAGE.md section 11): scripted sessions through piped stdin, through prompt_toolkit's
pipe input, and one through a real terminal (tmux).

Covered: value display, rebinding and redefinition invalidation, errors then recovery (never a
traceback), statement cells, every meta-command, cell splitting, completion, history, the lexer.
"""
from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from arrc import repl
from arrc.repl import Session, is_complete, split_cells

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "1"}


def session_output(script: str, argv: list[str] | None = None) -> tuple[str, int]:
    """Run a script through `repl.main` as piped stdin; the printed text (stdout and stderr in one, in
    order) and the exit status."""
    out = io.StringIO()
    code = repl.main(argv or [], stdin=io.StringIO(textwrap.dedent(script)), stdout=out, stderr=out)
    text = out.getvalue()
    assert "Traceback" not in text and "internal error" not in text, text
    return text, code


def run_cells(session: Session, *cells: str) -> str:
    """Run cells in a session; the text they printed."""
    start = session.out.tell()
    for cell in cells:
        session.run(textwrap.dedent(cell))
    session.out.seek(start)
    text = session.out.read()
    assert "Traceback" not in text and "internal error" not in text, text
    return text


@pytest.fixture
def session():
    return Session(io.StringIO())


# ---- values -----------------------------------------------------------------------------------------

def test_values_are_shown_with_their_type():
    out, code = session_output("""\
        [1.0, 2.0, 3.0]
        2 + 3
        1.5 * 2
        true
        [true, false]
        f64(1) / 4
        eye(2)
        (1, [1.0, 2.0])
        arange(2000)
        zeros((0,))
        """)
    assert code == 0
    assert out.splitlines()[:6] == [
        "f32[3] = [1. 2. 3.]", "i32 = 5", "f32 = 3.0", "bool = true", "bool[2] = [true false]", "f64 = 0.25"]
    assert "f32[2, 2] = [[1. 0.]\n             [0. 1.]]\n" in out      # rows aligned
    assert "(i32, f32[2]) = (1, [1. 2.])" in out
    assert "i32[2000] = [   0    1    2 ... 1997 1998 1999]" in out   # summarized
    assert "f32[0] = []" in out


def test_show_long_tuples_one_value_a_line():
    text = repl.show([np.eye(2, dtype=np.float32), np.float32(1.5)], True)
    assert text == "(f32[2, 2], f32) =\n  [[1. 0.]\n   [0. 1.]]\n  1.5\n"


# ---- bindings and invalidation ------------------------------------------------------------------------

def test_rebinding_a_value_is_seen_by_functions(session):
    out = run_cells(session, "y = 0", """\
        def f(x: f32) -> f32:
            return x + y

        """, "f(1.0)", "y = 5", "f(1.0)", "y = 2", "f(1.0)")
    assert out.splitlines() == ["f32 = 1.0", "f32 = 6.0", "f32 = 3.0"]


def test_redefinition_is_seen_through_other_functions(session):
    out = run_cells(session, """\
        def g(x: f32) -> f32:
            return x + 1.0

        def h(x: f32) -> f32:
            return g(x) * 2.0
        """, "h(1.0)", """\
        def g(x: f32) -> f32:
            return x + 100.0
        """, "h(1.0)")
    assert out.splitlines() == ["f32 = 4.0", "f32 = 202.0"]


def test_binding_used_as_a_dimension_and_rebound(session):
    out = run_cells(session, "n = 3", """\
        def make() -> f32[n]:
            return ones(n)
        """, "make()", "n = 5", "make()")
    assert out.splitlines() == ["f32[3] = [1. 1. 1.]", "f32[5] = [1. 1. 1. 1. 1.]"]


def test_a_const_redefined_as_a_function_is_no_dimension(session):
    """A `def N` replaces `const N` (as any redefinition does), and `f32[N]` was then silently a shape variable:
    f took any length, and a later `def f(x: f32[N])` too. Now both are E0102 (N is a function), until N is a
    const again. Within one cell, `const N` and `def N` are defined twice (E0102 at both)."""
    out = run_cells(session, "const N: i32 = 4\ndef f(x: f32[N]) -> f32[N]:\n    return x\n", "f(ones(4))",
                    "def N(x: f32[2]) -> f32[2]:\n    return x\n", "f(ones(3))",
                    "def g(x: f32[N]) -> f32[N]:\n    return x\n")
    assert out.startswith("f32[4] = [1. 1. 1. 1.]\nwarning: after this change, `f` does not compile")
    assert out.count("error[E0102]: `N` is both a function and a shape variable") == 3
    assert "--> <cell 5>:1:14" in out and " ::: <cell 3>:1:5" in out     # g's `N`, and the function
    assert "g" not in session.items
    assert run_cells(session, "const N: i32 = 3", "f(ones(3))").splitlines() == ["f32[3] = [1. 1. 1.]"]
    out = run_cells(session, "const M: i32 = 4\ndef M(x: f32[2]) -> f32[2]:\n    return x\n")
    assert "error[E0102]: `M` is defined twice" in out and "--> <cell 8>:2:5" in out
    assert "M" not in session.items


def test_unrelated_computations_keep_their_compiled_code(session):
    run_cells(session, "a = 1", "b = 2", "def fa() -> i32:\n    return a\n", "def fb() -> i32:\n    return b\n",
              "fa()", "fb()")
    fa_key = [k for k in session._exprs if k[1] == "fa()"][0]
    fn = session._exprs[fa_key]
    assert run_cells(session, "b = 20", "fa()", "fb()").splitlines() == ["i32 = 1", "i32 = 20"]
    assert session._exprs[fa_key] is fn                # `fa` does not use `b`: same compiled function
    assert run_cells(session, "a = 10", "fa()").splitlines() == ["i32 = 10"]


def test_tuple_and_augmented_assignment(session):
    out = run_cells(session, "a, b = (1, [1.0, 2.0])", "a", "b", "b += 1", "b", "b *= (2 +  # comment\n 1)", "b",
                    "a, b = 1", "a, b = arange(3)")
    lines = out.splitlines()
    assert lines[:5] == ["i32 = 1", "f32[2] = [1. 2.]", "f32[2] = [2. 3.]", "f32[2] = [6. 9.]",
                         "error[E0209]: cannot unpack 1 value into 2 names"]
    assert "error[E0209]: cannot unpack 3 values into 2 names" in lines       # (by rows: said 1 value)


def test_changing_a_binding_type_warns_about_broken_functions(session):
    out = run_cells(session, "y = 1.0", "def f() -> f32:\n    return y * 2.0\n", "y = [1.0, 2.0]")
    assert "warning: after this change, `f` does not compile" in out
    assert "--> <cell 2>:2:12" in out                   # the error is shown in f's own cell
    assert run_cells(session, "y = 3.0", "f()").splitlines() == ["f32 = 6.0"]


def test_reserved_names_cannot_be_bound(session):
    out = run_cells(session, "sum = 3", "f32 = 1", "sum(arange(3))")
    assert "error[E0105]: cannot bind `sum`: it is a builtin" in out
    assert "cannot bind `f32`: it is a dtype" in out
    assert out.splitlines()[-1] == "i32 = 3"


# ---- statement cells ---------------------------------------------------------------------------------

def test_blocks_update_bindings(session):
    out = run_cells(session, "s = 0", """\
        for i in range(5):
            s += i
            t = i
        """, "s", "x = [1.0, 2.0, 3.0]", "x[0] = 10", "x[1:] = x[:2] * 2.0", "x")
    assert "`t` stayed local to this block" in out
    assert "i32 = 10" in out
    assert out.splitlines()[-1] == "f32[3] = [10. 20.  4.]"


def test_print_and_assert_at_the_prompt(session):
    out = run_cells(session, "x = [1.0, 2.0]", 'print("x is", x, sum(x))', """\
        if sum(x) > 2.0:
            print("big")
        else:
            print("small")
        """, 'assert sum(x) > 100.0, "too small"', "x")
    assert "x is [1. 2.] 3.0\nbig\n" in out
    assert "error[R0005]: assertion failed: too small\n --> <cell 4>:1:1" in out
    assert "in the cell" not in out and "__cell__" not in out       # the header names the cell, once
    assert out.splitlines()[-1] == "f32[2] = [1. 2.]"
    assert session.exit_code == 3


def test_print_inside_a_function_goes_to_the_session_output(session):
    out = run_cells(session, 'def loud(x: f32) -> f32:\n    print("got", x)\n    return x\n', "loud(2.0)")
    assert out == "got 2.0\nf32 = 2.0\n"


# ---- errors ------------------------------------------------------------------------------------------

def test_errors_then_recovery_with_spans_in_the_cell():
    out, code = session_output("""\
        x = 1
        y = x + zz
        1 +
        def f(a: f32) -> i32:
            return a

        f(1.0)
        return 1
        x + 1
        """)
    assert code == 1
    assert "error[E0101]: undefined name `zz`\n --> <cell 2>:1:9\n" in out       # column within the cell
    assert "1 | y = x + zz\n  |         ^^ not defined" in out
    assert "error[E0001]" in out and "--> <cell 3>:1:4" in out
    assert "error[E0203]" in out and "--> <cell 4>:2:12" in out                  # line 2 of the def's cell
    assert "error[E0101]: unknown function `f`" in out                           # the bad def was rejected
    assert "`return` outside a function" in out
    assert out.splitlines()[-1] == "i32 = 2"                                     # the session went on


def test_a_cell_of_comments_only_does_nothing(session):
    """As Python's REPL: `# a note` typed at the prompt is no E0001 and takes no cell number."""
    for cell in ("# a note", "  # indented\n# two lines", "x = 1  # kept"):
        assert session.run_cell(cell)
    assert session.cells == 1 and session.out.getvalue() == ""


def test_statement_cell_errors_point_into_the_cell(session):
    out = run_cells(session, "s = 0", "for i in range(3):\n    s = s + 0.5\n")
    assert "error[E0302]" in out and "--> <cell 2>:2:5" in out and "2 |     s = s + 0.5" in out


def test_a_bad_definition_keeps_the_old_one(session):
    out = run_cells(session, "def f() -> i32:\n    return 1\n", "def f() -> i32:\n    return 1.5\n", "f()")
    assert "error[E0203]" in out and out.splitlines()[-1] == "i32 = 1"


def test_unexpected_failures_are_an_internal_error_diagnostic(session, monkeypatch):
    def boom(*args, **kwargs):
        raise ValueError("something odd\nsecond line")
    monkeypatch.setattr(repl.Session, "expression", boom)
    session.run("1 + 1")
    assert session.out.getvalue() == (
        "error[E0601]: internal compiler error: ValueError: something odd\n"
        "  |\n"
        "  = note: second line\n"
        "  = help: this is a bug in arrc, not in your program: please report it with the program, "
        "the command line and the output of `arrc --version`\n")
    assert session.exit_code == repl.EXIT_INTERNAL
    monkeypatch.undo()
    assert run_cells(session, "1 + 1") == "i32 = 2\n"


# ---- meta-commands -----------------------------------------------------------------------------------

def test_help_type_and_quit():
    out, code = session_output("""\
        x = [1.0, 2.0]
        def f(v: f32[n]) -> f32[n]:
            return v * 2.0

        :help
        :type f
        :type x
        :type f(x) > 1.0
        :type (x, 1)
        :t sum(x)
        f
        :quit
        1 + 1
        """)
    assert code == 0
    assert ":mlir EXPR|FN" in out and ":reload" in out and "guards: off; device: cpu" in out
    assert "values: x: f32[2]" in out and "definitions: f" in out
    assert "f: (v: f32[n]) -> f32[n]\nx: f32[2]\nbool[2]\n(f32[2], i32)\nf32\nf: (v: f32[n]) -> f32[n]\n" in out
    assert "i32 = 2" not in out                       # nothing runs after :quit


def test_a_command_that_takes_no_argument_refuses_one_and_a_space_after_the_colon_is_allowed():
    """Before: `:quit now` quit, `:reload foo` reloaded, `: help` was the unknown command `:`."""
    out, code = session_output("""\
        :quit now
        :reload foo
        : type  zz
        : t 1 + 1
        :q
        2 + 2
        """)
    assert code == 2
    assert "error: `:quit` takes no argument (`now` is left over)\n" in out
    assert "error: `:reload` takes no argument (`foo` is left over)\n" in out
    assert "undefined name `zz`\n --> <cell 3>:1:9\n" in out and "i32\n" in out and "i32 = 4" not in out


def test_a_statement_given_to_type_or_time_is_named_as_one(session):
    """`:type print` said "`print` is a keyword and cannot be a name ... choose another name"."""
    out = run_cells(session, ":type print", ":time print(1)", ":type assert")
    assert out.splitlines() == ["error: `print` is a statement, not an expression: `:help print` tells about it"] * 2 \
        + ["error: `assert` is a statement, not an expression: `:help assert` tells about it"]


def test_mlir_of_expressions_and_functions(session):
    out = run_cells(session, "def f(v: f32[n]) -> f32[n]:\n    return v * 2.0\n",
                    "def g() -> f32:\n    return 1.0\n", ":mlir f([1.0, 2.0])")
    assert "stablehlo.multiply" in out and "tensor<2xf32>" in out
    assert '"<cell 1>":2:12' in out and '"<cell 3>":1:7' in out     # locations: the cells, not the module
    assert "<session>" not in out and "<expr>" not in out
    out = run_cells(session, ":mlir g", ":mlir f")
    assert "func.func public @main() -> tensor<f32>" in out
    assert "\nerror: `f(v: f32[n]) -> f32[n]` is generic over n" in out and "`:mlir f(...)`" in out   # (had no `error: `)


def test_hlo_and_time(session):
    out = run_cells(session, "w = ones((4, 4))", ":hlo w @ w + 1.0")
    assert out.startswith("HloModule ") and "ENTRY" in out
    out = run_cells(session, ":time sum(arange(1000))")
    assert out.startswith("compile ") and "run " in out and "median of" in out and "runs, cpu)" in out


def test_guards_setting(session):
    out = run_cells(session, ":guards", ":guards nan,inf", ":guards", ":help", ":guards all", ":guards bogus",
                    ":guards off", "1.0 / 0.0")
    assert out.splitlines()[:3] == ["guards: off", "guards: nan,inf", "guards: nan,inf"]
    assert "guards: nan,inf; device: cpu" in out
    assert "guards: all" in out and "error: unknown guard `bogus`" in out and "guards: off" in out
    assert out.splitlines()[-1] == "f32 = inf"


def test_off_in_a_list_of_guards_is_said_to_go_alone_and_a_kind_given_twice_is_one(session):
    """`:guards all,off` was "unknown guard `off` (choose from ..., or off)"; `:guards nan,nan` kept both."""
    out = run_cells(session, ":guards all,off", ":guards nan,nan")
    assert out == "error: `off` turns every guard off: give it alone, not in a list\nguards: nan\n"


def test_guard_reports_point_into_the_cells(session):
    out = run_cells(session, "def ratio(x: f32[n], y: f32[n]) -> f32[n]:\n    b = (x + y) / (x - y)\n    return b\n",
                    ":guards nan,inf", "x = [0.0, 0.0]", "r = ratio(x, x)", "ratio([1.0, 2.0], [3.0, 1.0])")
    assert "error[R0001]: NaN produced at run time\n --> <cell 1>:2:9\n" in out
    assert "2 |     b = (x + y) / (x - y)" in out and "at index [0]" in out
    assert "<session>" not in out and "__expr" not in out and "__cell__" not in out
    assert "r" not in session.bindings and out.splitlines()[-1] == "f32[2] = [-2.  3.]"
    assert session.exit_code == 3
    guarded = run_cells(session, ":mlir ratio(x, x)")
    unguarded = run_cells(session, ":guards off", ":mlir ratio(x, x)")
    assert guarded != unguarded.split("\n", 1)[1]          # the guarded program is what is shown


def test_guards_are_passed_to_the_compiler(session, monkeypatch):
    seen = []
    real = repl.session.api.from_items

    def from_items(*args, **kwargs):
        seen.append(kwargs.get("guards"))
        return real(*args, **kwargs)
    monkeypatch.setattr(repl.session.api, "from_items", from_items)
    run_cells(session, "1 + 1", ":guards nan", "1 + 1")
    assert seen == [None, "nan"]                      # a new setting compiles afresh, with the guards


def test_device(session):
    from arrc.runtime.pjrt import DeviceUnavailable, backend
    out = run_cells(session, ":device", ":device cpu", ":device quantum", "1 + 1")
    assert out.splitlines()[:2] == ["device: cpu", "device: cpu"]
    assert "error: unknown device `quantum`" in out and out.splitlines()[-1] == "i32 = 2"
    try:
        backend("gpu")
    except DeviceUnavailable:
        out = run_cells(session, ":device gpu", ":device")
        assert "error: no gpu device is available" in out and "still on cpu" in out
        assert out.splitlines()[-1] == "device: cpu"
    else:                                              # a machine with a GPU: run there
        out = run_cells(session, ":device gpu", "sum(arange(4.0))")
        assert out.splitlines()[-1] == "f32 = 6.0"


def test_load_and_reload(tmp_path, session):
    path = tmp_path / "lib.arr"
    path.write_text("const K: f32 = 2.0\n\ndef scale(x: f32[n]) -> f32[n]:\n    y = x * K\n\n    return y\n\n"
                    "def gone() -> i32:\n    return 1\n")
    out = run_cells(session, f":load {path}", "scale([1.0, 2.0])", "gone()")
    assert out.splitlines() == [f"loaded {path}: 2 functions (scale, gone), 1 constant (K)",
                                "f32[2] = [2. 4.]", "i32 = 1"]
    path.write_text("const K: f32 = 10.0\n\ndef scale(x: f32[n]) -> f32[n]:\n    return x * K + zz\n")
    out = run_cells(session, ":reload", "scale([1.0, 2.0])")
    assert f"--> {path}:4:20" in out and "4 |     return x * K + zz" in out      # the file's own lines
    assert out.splitlines()[-1] == "f32[2] = [2. 4.]"                         # a failed reload changes nothing
    run_cells(session, "def uses() -> i32:\n    return gone() + 1\n")
    path.write_text("const K: f32 = 10.0\n\ndef scale(x: f32[n]) -> f32[n]:\n    return x * K\n")
    out = run_cells(session, ":reload", "scale([1.0, 2.0])", "gone()")
    assert out.splitlines()[:2] == [f"reloaded {path}: 1 function (scale), 1 constant (K); removed gone",
                                    "warning: after this change, `uses` does not compile:"]     # (was not said)
    assert "f32[2] = [10. 20.]" in out.splitlines()
    assert "undefined name `gone`" in out or "unknown function `gone`" in out
    out = run_cells(session, ":load /no/such/file.arr", ":frob", ":type", f":load {path.parent}")
    assert "error: no such file: /no/such/file.arr" in out and f"error: {path.parent} is a directory" in out
    assert "error: unknown command `:frob`" in out and "`:type` needs an argument" in out
    out = run_cells(session, ':load ""', ":load '")                # (was: ` is a directory`, the current one)
    assert out == "error: `:load` needs a file name: :load FILE\n" * 2


def test_reload_goes_on_past_a_file_that_fails(tmp_path, session):
    """`:reload` stopped at the first file that failed (gone or broken): the files after it were not read
    again, and their edits were silently not in effect."""
    one, two, three = (tmp_path / f"{n}.arr" for n in ("one", "two", "three"))
    for i, path in enumerate((one, two, three), 1):
        path.write_text(f"def {path.stem}() -> i32:\n    return {i}\n")
    run_cells(session, *(f":load {p}" for p in (one, two, three)))
    one.unlink()
    two.write_text("def two() -> i32:\n    return zz\n")
    three.write_text("def three() -> i32:\n    return 30\n")
    code = session.exit_code
    out = run_cells(session, ":reload")
    assert f"error: no such file: {one}\n" in out and "undefined name `zz`" in out
    assert f"reloaded {three}: 1 function (three)\n" in out
    assert out.endswith(f"error: not reloaded: {one}, {two} (the other files were)\n")
    assert session.exit_code == (code or 2)
    assert run_cells(session, "one() + two() + three()") == "i32 = 33\n"


def test_files_on_the_command_line_and_reload(tmp_path):
    path = tmp_path / "one.arr"
    path.write_text("def one() -> i32:\n    return 1\n")
    out, code = session_output(":reload\none() + 1\n", [str(path)])
    assert out.splitlines() == [f"loaded {path}: 1 function (one)", f"reloaded {path}: 1 function (one)", "i32 = 2"]
    assert code == 0
    out, code = session_output(":reload\n1\n")
    assert out == "error: nothing to reload: no file was loaded with :load\ni32 = 1\n" and code == 2


def test_command_line_options():
    out, code = session_output(":guards\n:device\n", ["--guards", "nan,div0"])
    assert out == "guards: nan,div0\ndevice: cpu\n" and code == 0
    err = io.StringIO()
    sys_stderr, sys.stderr = sys.stderr, err
    try:
        assert repl.main(["--guards", "nope"], stdin=io.StringIO(""), stdout=io.StringIO()) == 2
    finally:
        sys.stderr = sys_stderr
    assert "unknown guard" in err.getvalue()


# ---- reading cells -----------------------------------------------------------------------------------

def test_cells_are_split_like_a_script():
    script = ("x = 1\n\ndef f() -> i32:\n    a = 1\n\n    return a\n# a comment\nif x > 0:\n    x = 2\n"
              "else:\n    x = 3\ny = (1 +\n2)\n:help\n")
    assert split_cells(script) == ["x = 1", "def f() -> i32:\n    a = 1\n\n    return a\n# a comment",
                                   "if x > 0:\n    x = 2\nelse:\n    x = 3", "y = (1 +\n2)", ":help"]
    # an unterminated string ends its line and the cell (a syntax error there, as in Python): the bracket
    # before it took every later line of a piped script into the cell, silently
    assert split_cells('print("unterminated)\nx = 1\nx\n') == ['print("unterminated)', "x = 1", "x"]
    assert is_complete('print("unterminated)')


def test_definitions_that_follow_each_other_are_one_cell():
    """A file piped in gives its results (`arrc repl < f.arr`) even where `main` calls a `g` defined after it:
    consecutive definitions are checked together, as a file's are (before: E0101 unknown function `g`)."""
    assert split_cells("def f() -> f32:\n    return g()\n\n# g\ndef g() -> f32:\n    return K\n"
                       "const K: f32 = 2.0\nf()\n") == \
        ["def f() -> f32:\n    return g()\n\n# g\ndef g() -> f32:\n    return K\nconst K: f32 = 2.0", "f()"]
    assert split_cells("define = 1\ndef f() -> i32:\n    return 1\nx = 2") == \
        ["define = 1", "def f() -> i32:\n    return 1", "x = 2"]
    out, code = session_output("""\
        def main(x: f32) -> f32:
            return g(x) * 2.0

        def g(x: f32) -> f32:
            return x + 1.0
        main(1.0)
        """)
    assert (out, code) == ("f32 = 4.0\n", 0)


def test_an_unknown_function_says_how_to_define_it():
    out, code = session_output("""\
        def main(x: f32) -> f32:
            return g(x) * 2.0
        x = 1.0
        summ(x)
        """)
    assert code == 1
    assert "error[E0101]: unknown function `g`\n --> <cell 1>:2:12\n" in out
    assert "= help: `g` is not defined yet: define it before the cell that calls it or in the same cell " \
           "(definitions that follow each other are one cell), or `:load` its file\n" in out
    assert "= help: did you mean `sum`?" in out and "`summ` is not defined yet" not in out     # a typo stays one


def test_a_long_block_is_read_in_linear_time():
    """A piped 8,000-line `def` took 93 s (each line rescanned the whole pending block); 40,000 lines now
    split as fast as they are read. Brackets that open and close across lines inside the block, a string
    holding a `(` and a comment holding a `:` are kept track of line by line."""
    body = "".join(f"    x = x * (1.0 +\n        {i}.0)\n    s = \"(\"  # not a block:\n" for i in range(20_000))
    script = "def f(x: f32) -> f32:\n" + body + "    return x\nf(1.0)\n"
    cells = split_cells(script)
    assert len(cells) == 2 and cells[1] == "f(1.0)"
    assert cells[0].count("\n") == 60_001


def test_when_enter_runs_the_buffer():
    assert is_complete("x = 1") and is_complete(":type x:") and is_complete("")
    assert not is_complete("x = (1 +") and not is_complete("def f() -> i32:")
    assert not is_complete("def f() -> i32:\n    return 1")
    assert is_complete("def f() -> i32:\n    return 1\n    ")
    assert is_complete('print("a:", 1) # (')           # a comment does not open brackets
    assert is_complete('print("(:", 1)  # x:')


# ---- the prompt (prompt_toolkit pipe input) -------------------------------------------------------------

def _interactive(session: Session, keys: str, history: bool = True) -> None:
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput
    with create_pipe_input() as inp:
        inp.send_text(keys)
        repl.run_interactive(session, input=inp, output=DummyOutput(), history=history)


def test_prompt_session_with_blocks_rebinding_and_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("ARRC_REPL_HISTORY", str(tmp_path / "history"))
    s = Session(io.StringIO())
    _interactive(s, "y = 0\r"
                    "def f(x: f32) -> f32:\rreturn x + y\r\r"       # Enter auto-indents; a blank line ends it
                    "f(1.0)\r"
                    "y = 5\r"
                    "f(1.0)\r"
                    "(1 +\r2)\r"                                     # open brackets continue the cell
                    "zz\r"
                    ":type f\r"
                    ":quit\r"
                    "1 + 1\r")
    out = s.out.getvalue()
    assert out.startswith("arr 0.1.0 REPL")
    assert "f32 = 1.0\nf32 = 6.0\ni32 = 3\n" in out
    assert "undefined name `zz`" in out and "f: (x: f32) -> f32\n" in out and "i32 = 2" not in out
    history = (tmp_path / "history").read_text()
    assert "+def f(x: f32) -> f32:\n+    return x + y\n" in history
    # a second session reads the history: Up goes back through `:quit`, `:type f` to `zz`
    s2 = Session(io.StringIO())
    _interactive(s2, "\x1b[A\x1b[A\x1b[A\r\x04")
    assert "undefined name `zz`" in s2.out.getvalue()


def test_ctrl_d_leaves_and_ctrl_c_clears(tmp_path, monkeypatch):
    monkeypatch.setenv("ARRC_REPL_HISTORY", str(tmp_path / "history"))
    s = Session(io.StringIO())
    _interactive(s, "1 + \x03" "2 + 2\r" "\x04", history=False)
    assert s.out.getvalue().splitlines()[1:] == ["i32 = 4"]


def test_ctrl_c_between_the_cells_of_a_paste_keeps_the_session(tmp_path, monkeypatch):
    """A Ctrl-C outside a cell (while a long paste is split into cells: 0.4 s for 200,000 lines, or between
    two of its cells) ended `arrc repl` with status 130, every definition lost; it is `interrupted` too."""
    monkeypatch.setenv("ARRC_REPL_HISTORY", str(tmp_path / "history"))
    from arrc.repl import session as session_module
    split = session_module.split_cells

    def ctrl_c_while_splitting(text):
        if text.startswith("2 + 2"):
            raise KeyboardInterrupt
        return split(text)
    monkeypatch.setattr(session_module, "split_cells", ctrl_c_while_splitting)
    s = Session(io.StringIO())
    try:
        _interactive(s, "x = 1\r" "2 + 2\r" "x\r" "\x04")
    except KeyboardInterrupt:           # (not let out to pytest, which would stop the whole run)
        pytest.fail("the Ctrl-C ended the prompt's loop")
    assert s.out.getvalue().splitlines()[1:] == ["interrupted", "i32 = 1"]


def test_a_history_file_that_cannot_be_used_is_one_warning(tmp_path, monkeypatch):
    """A directory or a device as the history file, or one whose writes fail: one warning, and the session
    keeps its history in memory (before: a traceback from the event loop, one per Enter, or for /dev/full
    a prompt that never came, reading endless zeros)."""
    from prompt_toolkit.history import FileHistory
    paths = [tmp_path] + [Path(p) for p in ("/dev/full", "/dev/zero") if Path(p).exists()]
    for path in paths:
        monkeypatch.setenv("ARRC_REPL_HISTORY", str(path))
        s = Session(io.StringIO())
        _interactive(s, "1 + 1\r" "2 + 2\r" "\x04")
        out = s.out.getvalue()
        assert "i32 = 2\ni32 = 4\n" in out, out
        assert out.count("warning: cannot use the history file") == 1, out
        assert f"history file {path} (not a regular file); the history of this session is not kept\n" in out

    def full(self, string):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(FileHistory, "store_string", full)
    monkeypatch.setenv("ARRC_REPL_HISTORY", str(tmp_path / "history"))
    s = Session(io.StringIO())
    _interactive(s, "1 + 1\r" "2 + 2\r" "3 + 3\r" "\x04")
    out = s.out.getvalue()
    assert "i32 = 2\n" in out and "i32 = 4\n" in out and "i32 = 6\n" in out, out
    assert out.count("(No space left on device); the history of this session is not kept") == 1, out


def test_only_the_end_of_a_long_history_file_is_read(tmp_path, monkeypatch):
    from arrc.repl import terminal
    monkeypatch.setattr(terminal, "MAX_HISTORY_BYTES", 100)
    path = tmp_path / "history"
    path.write_text("".join(f"\n# date\n+def f{i}() -> i32:\n+    return {i}\n" for i in range(20)))
    entries = terminal.session_history(path).load_history_strings()
    assert entries[0] == "def f19() -> i32:\n    return 19" and len(entries) < 5
    assert all(e.startswith("def f") for e in entries), entries      # no entry cut short


def test_a_paste_stops_at_its_first_failing_cell_and_says_so(tmp_path, monkeypatch):
    """As IPython's and Python's prompts do; the cells not run are counted (before: silently dropped)."""
    monkeypatch.setenv("ARRC_REPL_HISTORY", str(tmp_path / "history"))
    s = Session(io.StringIO())
    _interactive(s, "\x1b[200~x = 1\nbogus\nz = 3\nprint(z)\n\x1b[201~\r" "x\r" "\x04")
    out = s.out.getvalue()
    assert "error[E0101]: undefined name `bogus`" in out and "\n3\n" not in out, out       # print(z) did not run
    assert out.endswith("note: 2 more cells not run: a paste stops at its first failing cell\ni32 = 1\n"), out


def test_completion(session):
    from prompt_toolkit.completion import CompleteEvent
    from prompt_toolkit.document import Document
    run_cells(session, "weights = ones(3)", "def wrap(x: f32) -> f32:\n    return x\n")
    completer = repl.make_completer(session)

    def complete(text):
        return [c.text for c in completer.get_completions(Document(text), CompleteEvent(completion_requested=True))]
    assert complete("w") == ["weights", "wrap", "where", "wrap_key", "while"]
    assert "sum" in complete("1 + su") and "f32" in complete("f3")
    assert complete(":gu") == [":guards"] and ":load" in complete(":")
    assert complete(":guards nan,i") == ["inf"] and complete(":device g") == ["gpu"]
    assert complete("weights.sh") == ["shape"]


def test_history_file_location(monkeypatch, tmp_path):
    monkeypatch.delenv("ARRC_REPL_HISTORY", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    if sys.platform.startswith("linux"):
        assert repl.history_path() == tmp_path / "arrc" / "repl_history"
    monkeypatch.setenv("ARRC_REPL_HISTORY", str(tmp_path / "h"))
    assert repl.history_path() == tmp_path / "h"


# ---- the lexer ---------------------------------------------------------------------------------------

def test_lexer_tokens():
    from pygments.token import Comment, Keyword, Name, Number, Operator, String
    from arrc.lexer import ArrLexer, BUILTIN_NAMES
    from arrc.compiler.builtins import BUILTINS
    src = 'const K: f32 = 1e-6  # eps\ndef f(x: f32[n]) -> f32:\n    print("s", x.shape)\n    return sum(x) ** 2 // 3\n'
    tokens = [(t, v) for t, v in ArrLexer().get_tokens(src) if v.strip()]
    kinds = dict((v, t) for t, v in tokens)
    assert kinds["const"] in Keyword and kinds["K"] in Name.Constant and kinds["f32"] in Keyword.Type
    assert kinds["1e-6"] in Number.Float and kinds["3"] in Number.Integer and kinds["# eps"] in Comment
    assert kinds["def"] in Keyword and kinds["f"] in Name.Function and kinds['"s"'] in String
    assert kinds["sum"] in Name.Builtin and kinds["shape"] in Name.Attribute
    assert kinds["**"] in Operator and kinds["//"] in Operator and kinds["return"] in Keyword
    assert set(BUILTIN_NAMES) == {n for n in BUILTINS if n[:1].isalpha()}
    assert "".join(v for _, v in ArrLexer().get_tokens(src)) == src        # lossless


def test_highlighted_diagnostics_keep_their_text():
    import re
    from arrc.lexer import colorize_diagnostics, highlight
    text = "error[E0101]: undefined name `zz`\n --> <cell 1>:1:1\n  |\n1 | zz + 1\n  | ^^ not defined\n"
    colored = colorize_diagnostics(text)
    assert "\x1b[" in colored and re.sub(r"\x1b\[[0-9;]*m", "", colored) == text
    assert re.sub(r"\x1b\[[0-9;]*m", "", highlight("def f() -> i32:")) == "def f() -> i32:"


# ---- without a terminal, and with one -------------------------------------------------------------------

def test_piped_stdin_in_a_subprocess(tmp_path):
    script = "y = 0\ndef f(x: f32) -> f32:\n    return x + y\n\nf(1.0)\ny = 5\nf(1.0)\nzz\n"
    proc = subprocess.run([sys.executable, "-m", "arrc.repl"], input=script, capture_output=True, text=True,
                          cwd=ROOT, env={**ENV, "ARRC_REPL_HISTORY": str(tmp_path / "h")}, timeout=120)
    assert proc.stdout == "f32 = 1.0\nf32 = 6.0\n", proc.stdout          # values on stdout,
    assert proc.stderr.startswith("error[E0101]: undefined name `zz`"), proc.stderr    # diagnostics on stderr
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert not (tmp_path / "h").exists()               # no terminal: no prompt, no history


def _tmux_available() -> str | None:
    if shutil.which("tmux") is None:
        return "tmux is not installed (apt-get install -y tmux)"
    return None


@pytest.mark.skipif(_tmux_available() is not None, reason=str(_tmux_available()))
def test_real_terminal_highlighting_and_completion(tmp_path):
    """Drive `python -m arrc.repl` in a tmux pane: completion, highlighting and a block keep the screen clean."""
    sock = str(tmp_path / "tmux.sock")
    tmux = ["tmux", "-S", sock]
    env = f"ARRC_REPL_HISTORY={tmp_path / 'history'} TF_CPP_MIN_LOG_LEVEL=1"
    subprocess.run(tmux + ["new-session", "-d", "-s", "repl", "-x", "100", "-y", "40",
                           f"cd {ROOT} && env {env} {sys.executable} -m arrc.repl"], check=True)

    def screen(color=False):
        args = tmux + ["capture-pane", "-p", "-t", "repl"] + (["-e"] if color else [])
        return subprocess.run(args, capture_output=True, text=True, check=True).stdout

    def wait_for(text, timeout=60.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in screen():
                return screen()
            time.sleep(0.1)
        raise AssertionError(f"{text!r} never appeared:\n{screen()}")

    def keys(*k):
        subprocess.run(tmux + ["send-keys", "-t", "repl", *k], check=True)

    try:
        wait_for("arr>")
        keys("x = [1.0, 2.0]", "Enter")
        wait_for("arr> x = [1.0, 2.0]\narr>")
        keys("su", "Tab")
        wait_for("arr> sum")
        keys("(x)", "Enter")
        wait_for("f32 = 3.0")
        keys("def f(a: f32) -> f32:", "Enter", "return a * 2.0", "Enter", "Enter")
        wait_for("...>     return a * 2.0")
        keys("f(3.0)", "Enter")
        wait_for("f32 = 6.0")
        keys("zz + 1", "Enter")
        text = wait_for("^^ not defined")
        keys(":gu", "Tab")
        wait_for("arr> :guards")
        keys(" nan", "Enter")
        text = wait_for("guards: nan")
        lines = [l.rstrip() for l in text.splitlines() if l.strip()]
        assert lines[:8] == ["arr 0.1.0 REPL: :help for help, :quit or Ctrl-D to leave",
                             "arr> x = [1.0, 2.0]", "arr> sum(x)", "f32 = 3.0",
                             "arr> def f(a: f32) -> f32:", "...>     return a * 2.0", "...>", "arr> f(3.0)"]
        assert "\x1b" not in text and "Traceback" not in text       # no stray escape codes in the text
        colored = screen(color=True)
        assert "\x1b[" in colored                                     # but the pane does have colours
        def_line = next(l for l in colored.splitlines() if "def" in l and "f32" in l)
        assert def_line.count("\x1b[") >= 3                           # keyword, name, dtypes highlighted
        keys(":quit", "Enter")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            alive = subprocess.run(tmux + ["has-session", "-t", "repl"], capture_output=True).returncode == 0
            if not alive:
                break
            time.sleep(0.1)
        assert not alive, "the REPL did not exit on :quit"
        assert ":guards nan" in (tmp_path / "history").read_text()
    finally:
        subprocess.run(tmux + ["kill-server"], capture_output=True)


# ---- issue 17: the first hour at the prompt -------------------------------------------------------------

def test_tuples_of_one_shapes_and_dtypes(session):
    """`x.shape` of a vector, `(1,)`, `(x,)` are tuples of one, shown as Python writes them; a binding holds
    one array, so `t = (x,)` says how to unpack; `x.dtype` is shown as NumPy prints it."""
    out = run_cells(session, "x = [1.0, 2.0, 3.0]", "x.shape", "(1,)", "(x + 1.0,)", "zeros((2, 3)).shape",
                    "()", "x.dtype", "i64(x).dtype", "bf16", "t, = (x,)", "t", "n, = x.shape", "n")
    assert out.splitlines() == [
        "(i32,) = (3,)", "(i32,) = (1,)", "(f32[3],) = ([2. 3. 4.],)", "(i32, i32) = (2, 3)", "() = ()",
        "dtype = float32", "dtype = int64", "dtype = bfloat16", "f32[3] = [1. 2. 3.]", "i32 = 3"]
    out = run_cells(session, ":type x.shape", ":type (x, 1)", ":type x.dtype")
    assert out.splitlines() == ["(i32,)", "(f32[3], i32)", "dtype"]
    # nested tuples of compile-time integers were E0210 "cannot show a value of kind ((i32, i32), i32)"
    assert run_cells(session, "((1, 2), 3)", "(x.shape, (n,))").splitlines() == [
        "((i32, i32), i32) = ((1, 2), 3)", "((i32,), (i32,)) = ((3,), (3,))"]
    out = run_cells(session, "t = (x,)", "s = zeros((2, 3)).shape", "d = x.dtype")
    assert "error[E0209]: `t` cannot hold a tuple: a binding is one array" in out
    assert "help: unpack it into names: `t0, = (x,)`" in out
    assert "help: unpack it into names: `s0, s1 = zeros((2, 3)).shape`" in out
    assert "error[E0210]" in out and "E0203" not in out
    assert session.bindings["t"].value.shape == (3,)          # still the `t` of `t, = (x,)`


def test_api_expression_of_a_tuple_of_one():
    import arrc
    mod = arrc.loads("def f(x: f32[n]) -> f32:\n    return sum(x)\n")
    assert mod.expression("(1,)")() == (1,)
    value, = mod.expression("(f(ones(3)),)")()
    assert float(value) == 3.0


def test_type_and_help_of_builtins_and_names(session):
    """`:type sum` shows the builtin's call forms and `:help sum` its doc line, both read from the op table;
    `:help NAME` also knows the session's names, commands, dtypes, keywords and diagnostic codes."""
    from arrc.compiler.builtins import BUILTINS
    out = run_cells(session, ":type sum", ":t shape")
    lines = out.splitlines()
    assert lines[0].startswith("sum(x, axis=None, keepdims=false") and lines[1].startswith("x.sum(axis=None")
    assert lines[2] == "x.shape"
    out = run_cells(session, ":help sum")
    assert out.startswith("sum(x, axis=None") and BUILTINS["sum"].doc in out and "x.sum(" in out
    run_cells(session, "x = [1.0]", "def f(v: f32[n]) -> f32[n]:\n    return v\n")
    out = run_cells(session, ":help f", ":help x", ":help :type", ":help load", ":help f32", ":help while",
                    ":help grad", ":help E0203")
    assert "f: (v: f32[n]) -> f32[n]\n  a function defined at <cell 5>:1\n" in out
    assert "x: f32[1]\n  a value of this session\n" in out
    assert ":type EXPR\n  the type of an expression" in out and "(also :t)" in out and ":load FILE\n" in out
    assert "f32: a dtype, 32-bit floats (NumPy float32)" in out and "while: a keyword" in out
    assert "grad(f, argnums=0)(args...)" in out and "E0203: result does not match the declared type; " \
        "`arrc explain E0203` shows its page" in out
    out = run_cells(session, ":help summ", ":help")
    assert "error: nothing is called `summ` (did you mean `sum`?)" in out and "`:help NAME`" in out
    assert session.exit_code == 2


def test_every_builtin_has_type_and_help():
    from arrc.compiler.builtins import BUILTINS
    from arrc.compiler.check import DERIVATIVES, PUSH_PULL
    from arrc.repl import help
    assert set(help.TRANSFORMS) == set(DERIVATIVES + PUSH_PULL)
    for name in [n.lstrip(".") for n in BUILTINS if n[:1].isalpha() or n[:1] == "."] + list(help.TRANSFORMS):
        assert help.type_text(name) and help.help_text(name), name


def test_piped_values_on_stdout_diagnostics_on_stderr():
    out, err = io.StringIO(), io.StringIO()
    script = "x = [1.0, 2.0]\nx * 2.0\nzz\nprint(\"p\", x)\nfor i in range(2):\n    j = i\n:guards\nx = 1\n"
    code = repl.main([], stdin=io.StringIO(script), stdout=out, stderr=err)
    assert out.getvalue() == "f32[2] = [2. 4.]\np [1. 2.]\nguards: off\n"
    assert err.getvalue().startswith("error[E0101]: undefined name `zz`\n --> <cell 3>:1:1\n")
    assert "note: `j` stayed local to this block" in err.getvalue() and code == 1


def test_a_byte_order_mark_before_piped_cells_is_skipped():
    """As a file's (`decode`): an editor on Windows saves a script with one."""
    out, err = io.StringIO(), io.StringIO()
    assert repl.main([], stdin=io.StringIO("\ufeff1 + 2\n\ufeff3\n"), stdout=out, stderr=err) == 1
    assert out.getvalue() == "i32 = 3\n"        # (only the first line's is a mark; another is a character)
    assert err.getvalue().startswith("error[E0001]: unexpected character '\\ufeff'\n --> <cell 2>:1:1\n")


def test_piped_bytes_that_are_not_utf8_are_e0003_as_in_a_file():
    """Before: `unexpected character '\\udcff'` (E0001) and `\\udcff is a lone surrogate`, or with a strict
    stdin a traceback."""
    script = b'x + \xff\nprint("\xc3")\n1 + 1\n'
    for encoding in ("utf-8:surrogateescape", "utf-8:strict", "latin-1"):
        proc = subprocess.run([sys.executable, "-m", "arrc.repl"], input=script, capture_output=True, cwd=ROOT,
                              env={**ENV, "PYTHONIOENCODING": encoding}, timeout=120)
        err = proc.stderr.decode()
        assert proc.stdout == b"i32 = 2\n" and proc.returncode == 1, (encoding, proc.stdout, err)
        assert err.count("error[E0003]") == 2 and "Traceback" not in err, (encoding, err)
        assert "error[E0003]: file is not valid UTF-8 (byte 0xff)\n --> <cell 1>:1:5\n" in err, err
        assert "error[E0003]: file is not valid UTF-8 (byte 0xc3)\n --> <cell 2>:1:8\n" in err, err


def test_ctrl_c_in_a_piped_script_fails_the_cell_and_the_script_goes_on(monkeypatch):
    """As at the prompt (docs/repl.md, docs/limits.md; tests/test_interrupts.py sends real SIGINTs): a
    program driving the REPL through a pipe can stop one cell; the exit status is a run-time failure's."""
    call = Session.call

    def interrupted(self, fn, args=(), quiet=False):
        if self.cells == 2:
            raise KeyboardInterrupt
        return call(self, fn, args, quiet)
    monkeypatch.setattr(Session, "call", interrupted)
    out, code = session_output("k = 40\nk * 1000\nk + 2\n")
    assert (out, code) == ("interrupted\ni32 = 42\n", 3)


@pytest.mark.parametrize("how", ["raised", "lost"])
def test_a_change_interrupted_while_what_uses_it_is_checked_is_not_made(session, monkeypatch, how):
    """Redefining `g` or rebinding `y` checks what uses them (compiling it: seconds for a big function), and a
    Ctrl-C then said `interrupted`, yet the change had been made, only its check left unsaid (before: `g`
    returned x + 10 after the interrupted cell). Also for a Ctrl-C Python dropped in a garbage collector's
    callback (compiler/signals.py), raised where the cell ends. `interrupted` means nothing changed."""
    from arrc.compiler import signals
    run_cells(session, "y = 1.0", "def g(x: f32) -> f32:\n    return x + y\n",
              "def f(x: f32) -> f32:\n    return g(x) * 2.0\n")
    module = Session.module

    def ctrl_c_while_checking_f(self, names, *args, **kwargs):
        if "f" in names:            # (what uses `g` and `y`)
            if how == "raised":
                raise KeyboardInterrupt
            signals._lost.append(True)
        return module(self, names, *args, **kwargs)
    monkeypatch.setattr(Session, "module", ctrl_c_while_checking_f)
    assert run_cells(session, "def g(x: f32) -> f32:\n    return x + 10.0\n") == "interrupted\n"
    assert run_cells(session, "y = 5.0") == "interrupted\n"
    monkeypatch.setattr(Session, "module", module)
    assert run_cells(session, "g(1.0)", "f(1.0)", "y") == "f32 = 2.0\nf32 = 4.0\nf32 = 1.0\n"


def test_hlo_and_mlir_locations_name_the_file_and_the_cells(tmp_path):
    """`arrc repl FILE`: `:hlo` and `:mlir` name the file with its own lines, and a cell defined at the
    prompt by its cell: a file on the command line takes no cell number, so the first cell is `<cell 1>`."""
    path = tmp_path / "lib.arr"
    path.write_text("# two lines before\n\ndef g(v: f32[4]) -> f32[4]:\n    return sin(v) * 2.0\n")
    out, code = session_output("""\
        def h(v: f32[4]) -> f32[4]:
            return cos(v) + g(v)

        :hlo g
        :hlo h
        :mlir h
        """, [str(path)])
    assert code == 0, out
    assert f'source_file="{path}" source_line=4 ' in out and 'source_file="<cell 1>" source_line=2 ' in out
    assert f'FileNames\n1 "<cell 1>"\n2 "{path}"\n' in out          # g inlined into h: its frames name the file
    assert f'"{path}":4:12' in out and '"<cell 1>":2:12' in out
    assert "<session>" not in out and "<cell 2>" not in out


def test_history_keeps_no_trailing_indentation(tmp_path, monkeypatch):
    monkeypatch.setenv("ARRC_REPL_HISTORY", str(tmp_path / "history"))
    s = Session(io.StringIO())
    _interactive(s, "def f(x: f32) -> f32:\rreturn x  \r\r" "if true:\rprint(1)\r\r" "1 + 1   \r" "\x04")
    assert "i32 = 2" in s.out.getvalue()
    lines = (tmp_path / "history").read_text().splitlines()
    entries = [line for line in lines if line.startswith("+")]
    assert entries == ["+def f(x: f32) -> f32:", "+    return x", "+if true:", "+    print(1)", "+1 + 1"]


def test_guard_reports_name_the_cell_once(session):
    """A run-time report names its cell in its header only: no `in the cell` note, `called from <cell 4>:1:5`
    in a call chain, and an operand whose text spans lines is shown as its text, not `value at <cell 3>:...`."""
    out = run_cells(session, ":guards all", "x = [1.0, 0.0]", "sum(x) / (x[1]\n  - 0.0)",
                    "def f(a: f32[n]) -> f32[n]:\n    return log(a)\n", "q = f(x - x)")
    assert "operands: sum(x) = 1.0, (x[1] - 0.0) = 0.0" in out, out
    assert "note: in f, called from <cell 5>:1:5" in out
    assert "in the cell" not in out and "value at" not in out and "the cell at" not in out


W0005_HELP = "  = help: the largest f32 is 3.40282e+38; write `f64(1e+40)` where f64 is declared, or write `inf` if meant\n"


def test_expression_and_binding_cells_show_their_warnings():
    """Every kind of cell shows its own warnings, on stderr when piped, as a `def` cell does; the same text
    in a later cell warns there again."""
    out, err = io.StringIO(), io.StringIO()
    script = "1e40\nz = 1e40\ny = 1e40\ni64(3) + f32(1.0)\n"
    code = repl.main([], stdin=io.StringIO(script), stdout=out, stderr=err)
    assert out.getvalue() == "f32 = inf\nf32 = 4.0\n" and code == 0
    assert err.getvalue() == (
        "warning[W0005]: literal 1e+40 is too large for f32 and becomes inf\n"
        " --> <cell 1>:1:1\n  |\n1 | 1e40\n  | ^^^^ inf in f32\n  |\n" + W0005_HELP +
        "warning[W0005]: literal 1e+40 is too large for f32 and becomes inf\n"
        " --> <cell 2>:1:5\n  |\n1 | z = 1e40\n  |     ^^^^ inf in f32\n  |\n" + W0005_HELP +
        "warning[W0005]: literal 1e+40 is too large for f32 and becomes inf\n"
        " --> <cell 3>:1:5\n  |\n1 | y = 1e40\n  |     ^^^^ inf in f32\n  |\n" + W0005_HELP +
        "warning[W0001]: implicit promotion of i64 and f32 to f32 may lose precision\n"
        " --> <cell 4>:1:1\n  |\n1 | i64(3) + f32(1.0)\n  | ^^^^^^^^^^^^^^^^^ computed in f32\n  |\n"
        "  = help: convert explicitly, e.g. `.astype(f32)`, to show it is intended\n")


def test_warnings_are_shown_once_with_their_cell(session):
    """A block cell and an augmented assignment warn; a cell that uses a function defined earlier does not
    repeat that function's warning, shown when it was defined."""
    out = run_cells(session, "def g() -> f32:\n    return 1e40\n", "g() + 1.0", "x = g()", "if true:\n    print(g())\n",
                    "x += 1e40", "for i in range(2):\n    x = x + 1e40\n")
    assert out.count("warning[W0005]") == 3, out
    assert [line for line in out.splitlines() if line.startswith(" --> ")] == \
        [" --> <cell 1>:2:12", " --> <cell 5>:1:6", " --> <cell 6>:2:13"]
    assert "f32 = inf\ninf\n" in out


def test_an_extern_def_cell_is_a_definition_whose_call_says_where_its_function_comes_from(session):
    """`extern def` is a definition at the prompt too; the REPL cannot supply a JAX function, so a call of
    one is E0101 at the declaration (arrc.load(externs=...) can), not a complaint about a keyword."""
    text = run_cells(session, "extern def enc(x: f32[3]) -> f32[3]\n",
                     "def g(x: f32[3]) -> f32:\n    return sum(enc(x))\n", "g([1.0, 2.0, 3.0])\n")
    assert "error[E0101]: extern `enc` has no function" in text and "keyword" not in text, text


def test_a_bad_device_or_guards_flag_is_an_error_of_the_flag(capsys):
    """`arrc repl --device gpu` without a GPU said "...; still on cpu" and then exited 2; `--guards bogus`
    printed a cell's `error:`. Both are the flag's error, as `arrc run`'s are, and the REPL does not start."""
    import io
    from arrc.repl.terminal import main
    cases = [(["--guards", "bogus"], "arrc repl: error: --guards bogus: unknown guard `bogus` (choose from nan, inf, "
                                     "bounds, div0, all, or off)\n")]
    if not jax_has("tpu"):
        cases.append((["--device", "tpu"], "arrc repl: error: --device tpu: no tpu device is available"))
    for argv, want in cases:
        err = io.StringIO()
        assert main(argv, stdin=io.StringIO("1 + 1\n"), stdout=io.StringIO(), stderr=err) == 2
        assert err.getvalue().startswith(want) and "still on" not in err.getvalue(), err.getvalue()


def jax_has(platform: str) -> bool:
    import jax
    try:
        return bool(jax.devices(platform))
    except RuntimeError:
        return False
