"""Front-end fuzzing, a fixed-seed slice of tests/fuzz/frontend_campaign.py, plus the inputs the campaign
found as regression tests.

The rule (see the campaign's docstring): any input ends in a module, or `arrc.CompileError` whose every
diagnostic has a code in `CODES` and a 1-based line/col inside the text; calls end in results,
`CompileError`, `ArgumentError` or `GuardError`; `arrc check` exits 0/1/2 without a traceback. No other
exception, no hang, no crash.

A longer campaign: `.venv/bin/python tests/fuzz/frontend_campaign.py --seconds 600`.
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import arrc
import arrc.cli
from arrc.compiler.diagnostics import CODES
from arrc.compiler.parse import decode

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("arrc_frontend_campaign", HERE / "fuzz" / "frontend_campaign.py")
campaign = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(campaign)

SLICE_SEED = 0
SLICE_CASES = 600

# Characters that str.splitlines() treats as line breaks but the lexer does not (see
# test_line_numbers_with_other_line_breaks): inputs holding one hit a known bug.
OTHER_LINE_BREAKS = ("\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


def _known_bug(case: dict, verdict: str, detail: str) -> str | None:
    """The regression test below that covers this failure, if any (narrow predicates only)."""
    text = case["data"].decode("utf-8", "replace")
    if verdict == "exception" and "passes/guards.py" in detail and "greater than dimension size 0" in detail:
        return "test_guards_with_zero_size_operands"
    if verdict == "exception" and "verify()" in detail and "window to have positive value" in detail:
        return "test_scans_over_zero_size_axis"
    if verdict == "exception" and "nonzero" in text and "larger than limit index" in detail:
        return "test_nonzero_negative_size"
    if verdict == "exception" and "ops_index.py" in detail and "negative start index" in detail:
        return "test_reverse_slice_of_zero_size_axis"
    if verdict == "crash" and "nonzero" in text:
        return "test_nonzero_of_zero_size_mask_does_not_kill_the_process"
    if verdict == "exception" and "'Poisoned' object has no attribute" in detail:
        return "test_loop_over_zero_size_array"
    if verdict == "exception" and "arange" in detail and "ValueError" in detail:
        return "test_arange_with_non_finite_bounds"
    if verdict == "exception" and "'stablehlo.atan2' op operand" in detail:
        return "test_atan2_of_integers"
    if verdict == "exception" and "'Meta' object has no attribute 'line'" in detail:
        return "test_file_of_only_line_continuations"
    if verdict == "exception" and "for integer string conversion" in detail:
        return "test_integer_literal_of_100000_digits"
    return None


def test_fixed_seed_slice(tmp_path):
    """A few hundred generated cases (random bytes, token soup, mutations of examples, odd programs
    through calls), each in a worker process with a time limit."""
    outdir = tmp_path / "failures"
    result = campaign.campaign(SLICE_SEED, SLICE_CASES, None, 30.0, outdir, full_corpus=False, specials=False,
                               quiet=True)
    assert result["ran"] == SLICE_CASES
    new = [f for f in result["failures"] if _known_bug(_case_of(f), f["verdict"], f["detail"]) is None]
    assert not new, "\n\n".join(f"{f['label']} [{f['verdict']}] {f['case']}: input saved at {f['path']}\n"
                                f"{f['detail']}" for f in new[:5])
    # the generators reach all four kinds of input and both outcomes
    kinds = {k.split(":")[0] for k in result["counts"]}
    assert kinds == {"bytes", "soup", "mutation", "odd"}


def _case_of(failure: dict) -> dict:
    label = failure["label"]
    index = int(label.rsplit("case", 1)[1])
    return campaign.make_case(SLICE_SEED, index, campaign.load_corpus(full=False))


def test_generators_are_deterministic():
    corpus = campaign.load_corpus(full=False)
    a = [campaign.make_case(7, i, corpus) for i in range(50)]
    b = [campaign.make_case(7, i, corpus) for i in range(50)]
    assert a == b


# ---- the oracle on named inputs, in this process ------------------------------------------------

LIGHT_SPECIALS = [name for name, data in campaign.special_cases() if len(data) < 50_000 and "1e4" not in name
                  and name not in ("int_digits_1e5",)]


@pytest.mark.parametrize("name", LIGHT_SPECIALS)
def test_special_inputs(name, tmp_path):
    data = dict(campaign.special_cases())[name]
    text = data.decode("utf-8", "surrogateescape")
    campaign.oracle_str(text)
    campaign.oracle_bytes(data)
    campaign.oracle_cli(data, str(tmp_path))


def test_empty_and_comment_only_files(tmp_path):
    for text in ["", "\n", "# only a comment", "# a\n# b\n\n   # indented\n", "\n\n\n"]:
        mod = arrc.loads(text)
        assert mod.functions == []
        path = tmp_path / "e.arr"
        path.write_text(text)
        assert arrc.cli.main(["check", str(path)]) == 0


def test_invalid_utf8_is_E0003_at_the_first_bad_byte():
    with pytest.raises(arrc.CompileError) as info:
        decode(b"def f() -> i32:\n    return 1 # caf\xe9\n", "x.arr")
    [d] = info.value.diagnostics
    assert d.code == "E0003" and (d.span.line, d.span.col) == (2, 19)


def test_nul_byte_tab_and_unicode_identifier_are_diagnostics():
    cases = {"def f() -> i32:\n    return 1\x00\n": "E0001", "def f() -> i32:\n\treturn 1\n": "E0002",
             "def fé() -> i32:\n    return 1\n": "E0001", "def f() -> i32:\n    λ = 1\n    return λ\n": "E0001"}
    for src, code in cases.items():
        with pytest.raises(arrc.CompileError) as info:
            arrc.loads(src)
        assert info.value.diagnostics[0].code == code, src
        campaign.check_compile_error(info.value, src, "<string>")


def test_cli_check_never_prints_a_traceback(tmp_path):
    inputs = [b"\xff\xfe", b"def f(:\n", b"(" * 5000, b"def f() -> i32:\n    return " + b"+".join([b"1"] * 5000) + b"\n",
              b"\x00" * 100, "def f() -> f32:\n\x0c    return 1e999\n".encode()]
    for data in inputs:
        path = tmp_path / "c.arr"
        path.write_bytes(data)
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            rc = arrc.cli.main(["check", str(path)])
        assert rc in (0, 1, 2) and "Traceback" not in err.getvalue(), (data[:40], rc, err.getvalue()[-500:])


try:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
except ImportError:                             # pragma: no cover - hypothesis is a dev dependency
    given = None

if given is not None:
    _ALPHABET = st.sampled_from([t for t in campaign.VOCAB if not any(c in t for c in OTHER_LINE_BREAKS)]
                                + ["\n", "\n    ", "\n        ", " ", "\t"])

    @settings(max_examples=150, derandomize=True, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.lists(_ALPHABET, max_size=60))
    def test_token_soup_hypothesis(tokens):
        """Hypothesis-driven token soup through `arrc.loads` (+ lowering of concrete functions)."""
        campaign.oracle_str("".join(tokens))


WRONG_ARGS = ['"text"', "f32", "(1, 2)", "()", "b", "z", "r8", "1000000000000", "-3", "nan", "2.5", "true",
              "[[1, 2], [3]]", "i", "x.shape"]
SWEEP_PARAMS = "x: f32[3], b: bool[3], z: f32[0], r8: f32[1, 1, 1, 1, 1, 1, 1, 2], i: i32"
PLAIN_ARGS = {"x": "x", "y": "x", "axis": "0", "keepdims": "false", "dtype": "f32", "shape": "(3,)"}


def test_every_builtin_with_wrong_argument_kinds():
    """Each builtin, each of its first three parameters given a value of a wrong kind (string, dtype,
    tuple, bool array, zero-size array, rank-8 array, huge or negative int, NaN, ...): checking and
    lowering end in a module or a CompileError."""
    import traceback

    from arrc.compiler.builtins import BUILTINS
    failures = []
    for name in sorted(k for k in BUILTINS if k[0].isalpha()):
        params = list(BUILTINS[name].params)
        for p in range(min(3, max(1, len(params)))):
            for wrong in WRONG_ARGS:
                args = [PLAIN_ARGS.get(q, "x") for q in params[:p + 1]] or ["x"]
                args[p] = wrong
                src = f"def f({SWEEP_PARAMS}) -> f32:\n    v = {name}({', '.join(args)})\n    return 0.0\n"
                try:
                    campaign.oracle_str(src, "<string>")
                except campaign.Bad as bad:
                    failures.append((src, "bad-diagnostic", f"[str] {bad}"))
                except Exception as exc:     # noqa: BLE001
                    failures.append((src, "exception", f"[str] {type(exc).__name__}: {exc}\n"
                                                          + traceback.format_exc()))
    new = [(src, detail) for src, verdict, detail in failures
           if _known_bug({"data": src.encode()}, verdict, detail) is None]
    assert not new, "\n\n".join(f"{src}{detail[-1500:]}" for src, detail in new[:5])


ALL_DTYPES = ["bool", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32", "f64"]
SECOND_ARGS = {"axis": "0", "keepdims": "true", "dtype": "f32", "shape": "(2, 3)", "k": "1", "size": "2",
               "num_classes": "3", "reps": "2", "pad_width": "1", "sizes": "(1, 1)", "start": "(0, 0)",
               "axes": "(1, 0)", "lo": "x", "hi": "x", "ddof": "0", "epsilon": "1e-5", "num": "3", "stop": "3",
               "values": "x", "fill_value": "x", "fill": "0", "constant_values": "0", "endpoint": "true", "M": "2",
               "y": "x"}
CONSTRUCTORS = ("arange", "zeros", "ones", "full", "eye", "linspace", "einsum")


def _dtype_sweep_sources():
    from arrc.compiler.builtins import BUILTINS
    for name in sorted(k for k in BUILTINS if k[0].isalpha()):
        params = list(BUILTINS[name].params)
        for dt in ALL_DTYPES:
            first = {"arange": "2", "zeros": "2", "ones": "2", "full": "(2, 3)", "eye": "2", "linspace": "0",
                     "einsum": '"ij->ji"', "stack": "(x, x)", "concat": "(x, x)", "concatenate": "(x, x)",
                     "where": "x > x"}.get(name, "x")
            args = [first] + [SECOND_ARGS[q] for q in params[1:2] if q in SECOND_ARGS]
            if name == "einsum":
                args = [first, "x"]
            yield f"def f(x: {dt}[2, 3]) -> f32:\n    v = {name}({', '.join(args)})\n    return 0.0\n"
    for dt in ALL_DTYPES:
        for e in ["x + x", "x - x", "x * x", "x / x", "x // x", "x % x", "x ** x", "x @ x.T", "x < x", "x == x",
                  "x & x", "x | x", "x ^ x", "~x", "-x", "not x", "x and x", "x if true else x"]:
            yield f"def f(x: {dt}[2, 3]) -> f32:\n    v = {e}\n    return 0.0\n"


def test_every_builtin_and_operator_on_every_dtype():
    """Every builtin and operator applied to an array of each of the 13 dtypes: checking and lowering end
    in a module or a CompileError (a dtype an operation does not take is E0201, not an MLIR error)."""
    import traceback
    failures = []
    for src in _dtype_sweep_sources():
        try:
            campaign.oracle_str(src, "<string>")
        except campaign.Bad as bad:
            failures.append((src, "bad-diagnostic", f"[str] {bad}"))
        except Exception as exc:     # noqa: BLE001
            failures.append((src, "exception", f"[str] {type(exc).__name__}: {exc}\n" + traceback.format_exc()))
    new = [(src, detail) for src, verdict, detail in failures
           if _known_bug({"data": src.encode()}, verdict, detail) is None]
    assert not new, "\n\n".join(f"{src}{detail[-1500:]}" for src, detail in new[:5])


# ---- regression tests: inputs the campaign found -------------------------------------------------

def _frontend_ok(text: str, tmp_path=None) -> None:
    campaign.oracle_str(text)
    campaign.oracle_bytes(text.encode("utf-8", "surrogatepass"))
    if tmp_path is not None:
        campaign.oracle_cli(text.encode("utf-8", "surrogatepass"), str(tmp_path))


@pytest.mark.parametrize("text", ["\\", "\\\n", "  \\\n\\\n"])
def test_file_of_only_line_continuations(text, tmp_path):
    _frontend_ok(text, tmp_path)


def test_integer_literal_of_100000_digits():
    _frontend_ok("def f() -> i64:\n    return " + "9" * 100_000 + "\n")


@pytest.mark.parametrize("call", ["arange(1, nan, dtype=f32)", "arange(0, inf)", "arange(1e999)",
                                  "arange(0, 1, nan)"])
def test_arange_with_non_finite_bounds(call):
    _frontend_ok(f"def f() -> f32:\n    return f32(sum({call}))\n")


@pytest.mark.parametrize("src, code, line, shown", [
    ("# a\x0cb\ndef f() -> i32:\n\treturn 1\n", "E0002", 3, "\u2409return 1"),
    ("def f() -> i32:\r    return 1\r", "E0001", 1, "def f() -> i32:\u240d    return 1"),
    ("def f() -> i32:\r\n    return y\r\n", "E0101", 2, "    return y"),
    ("def f() -> i32:\n    return y\r\r\n", "E0001", 2, "    return y\u240d"),
    ("# a\u2028b\ndef f() -> i32:\n    return y\n", "E0101", 3, "    return y"),
    ("def f() -> i32:\n    x = 1 \x0c+ 2\n    return y\n", "E0101", 3, "    return y"),
    ("# \x85\ndef f() -> i32:\n    return (" + "(" * 200 + "1" + ")" * 201 + "\n", "E0004", 3, None),
    ("# \x0c\ndef f() -> i32:\n    return (1 +", "E0001", 3, "    return (1 +"),
])
def test_line_numbers_with_other_line_breaks(src, code, line, shown):
    """Line numbers count \n only; the line shown is that line, its control characters made visible."""
    with pytest.raises(arrc.CompileError) as info:
        arrc.loads(src, filename="t.arr")
    d = info.value.diagnostics[0]
    assert d.code == code
    assert d.span.line == line
    if shown is not None:
        assert f"{line} | {shown}\n" in str(info.value)


def _call_ok(src: str, *args, guards=None):
    """A call ends in results, CompileError, ArgumentError or GuardError."""
    try:
        mod = arrc.loads(src, guards=guards)
        out = mod[mod.functions[0]](*args)
        return [np.asarray(r) for r in (out if isinstance(out, tuple) else (out,))]
    except arrc.CompileError as err:
        campaign.check_compile_error(err, src, "<string>")
        return err
    except (arrc.ArgumentError, arrc.GuardError) as err:
        return err


F0 = np.zeros(0, np.float32)


@pytest.mark.parametrize("src, args", [
    ("def f(x: f32[n]) -> f32:\n    return sum(x) + nan\n", (F0,)),
    ("def f(a: f32, b: f32[0]) -> f32:\n    return a / 0.0 + sum(b)\n", (np.float32(0), F0)),
    ("def f(a: i32[0]) -> i32[0]:\n    return a // 0\n", (np.zeros(0, np.int32),)),
    ("def f(x: f32[3], i: i32[0]) -> f32[0]:\n    return x[i]\n", (np.zeros(3, np.float32), np.zeros(0, np.int32))),
    ("def f(x: f32[3], i: i32[0]) -> f32[3]:\n    x[i] = 1.0\n    return x\n",
     (np.zeros(3, np.float32), np.zeros(0, np.int32))),
])
def test_guards_with_zero_size_operands(src, args):
    _call_ok(src, *args, guards="all")


@pytest.mark.parametrize("op", ["cumsum", "cumprod", "cummax", "cummin"])
def test_scans_over_zero_size_axis(op):
    _call_ok(f"def f(x: f32[n]) -> f32[n]:\n    return {op}(x)\n", F0)


def test_nonzero_negative_size():
    _call_ok("def f(x: bool[n]) -> i32:\n    return sum(nonzero(x, size=-2))\n", np.zeros(3, bool))


@pytest.mark.parametrize("src, arg", [("def f(x: f32[n]) -> f32[n]:\n    return x[::-1]\n", F0),
                                      ("def f(x: f32[2, n]) -> f32[2, n]:\n    return x[:, ::-1]\n",
                                       np.zeros((2, 0), np.float32))])
def test_reverse_slice_of_zero_size_axis(src, arg):
    _call_ok(src, arg)


@pytest.mark.parametrize("guards", [None, "all"])
def test_loop_over_zero_size_array(guards):
    src = "def f(x: f32[n]) -> f32:\n    s = 0.0\n    for i in range(n):\n        s += x[i]\n    return s\n"
    _call_ok(src, F0, guards=guards)


_NONZERO_CRASH = textwrap.dedent("""
    import numpy as np, arrc
    mod = arrc.loads("def f(x: bool[n, m]) -> (i32[2], i32[2]):\\n    return nonzero(x, size=2, fill=-1)\\n"
                     "def g(x: bool[n]) -> i32[2]:\\n    return nonzero(x, size=2, fill=-1)\\n")
    print(mod.g(np.zeros(0, bool)), mod.f(np.zeros((0, 3), bool)))
""")


def test_nonzero_of_zero_size_mask_does_not_kill_the_process():
    proc = subprocess.run([sys.executable, "-c", _NONZERO_CRASH], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-1000:])
    assert "[-1 -1]" in proc.stdout


@pytest.mark.parametrize("dtype", ["i32", "u8", "i64", "u64"])
def test_atan2_of_integers(dtype):
    x = np.array([1, 2], dtype=np.dtype(("int" if dtype[0] == "i" else "uint") + dtype[1:]))
    out = _call_ok(f"def f(x: {dtype}[2]) -> f32:\n    return f32(sum(atan2(x, x)))\n", x)
    if isinstance(out, list):
        np.testing.assert_allclose(out[0], 2 * np.arctan2(1.0, 1.0), rtol=1e-6)


@pytest.mark.parametrize("src", [
    "def f() -> u8:\n    return 256\n",
    "def f() -> u8:\n    return -1\n",
    "def f() -> i32:\n    return 2147483648\n",
    "def f() -> i64:\n    return 9223372036854775808\n",
    "def f() -> u64:\n    return 18446744073709551616\n",
    "def f() -> u64:\n    x = 18446744073709551616\n    return x\n",
    "def f() -> i8[2]:\n    return [300, 1]\n",
])
def test_out_of_range_literal_returned_as_declared_dtype(src):
    with pytest.raises(arrc.CompileError) as info:
        arrc.loads(src).f()
    assert info.value.diagnostics[0].code == "E0211"


def test_nonzero_fill_out_of_range():
    with pytest.raises(arrc.CompileError) as info:
        arrc.loads("def f(x: bool[3]) -> i32[2]:\n    return nonzero(x, size=2, fill=10000000000)\n").f(
            np.zeros(3, bool))
    assert info.value.diagnostics[0].code == "E0211"


def test_codes_in_known_bug_reasons_exist():
    """The diagnostics named by these tests exist (keeps the reasons honest)."""
    for code in ("E0001", "E0002", "E0003", "E0004", "E0208", "E0211", "E0215"):
        assert code in CODES


@pytest.mark.parametrize("body, reason", [
    ('print("a\\x4")', "truncated \\xXX escape"),
    ('print("\\N{no such name}")', "unknown Unicode character name"),
    ('print("\\u12")', "truncated \\uXXXX escape"),
])
def test_bad_string_escapes_are_E0001_in_both_parsers(body, reason):
    from arrc.compiler.parse import parse_lark
    from arrc.compiler.span import Source
    src = f"def f() -> f32:\n    {body}\n    return 1.0\n"
    for parse_with in (arrc.loads, lambda text: parse_lark(Source("<string>", text))):
        with pytest.raises(arrc.CompileError) as info:
            parse_with(src)
        [d] = info.value.diagnostics
        assert (d.code, d.message, d.span.line, d.span.col) == ("E0001", f"invalid escape in a string: {reason}", 2, 11)


def test_dimension_of_5000_digits_is_a_diagnostic():
    src = "def f(x: f32[" + "9" * 5000 + "]) -> f32:\n    return 1.0\n"
    with pytest.raises(arrc.CompileError) as info:
        arrc.loads(src)
    assert [d.code for d in info.value.diagnostics] == ["E0215"]
