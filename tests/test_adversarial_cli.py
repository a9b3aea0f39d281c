"""Adversarial inputs to the `arrc` command line: every one ends in a message or a diagnostic with its exit
code, never a Python traceback, a hang or a blown memory.

- argument files (`--arg x=@FILE`): zero-byte, garbage, truncated, corrupt headers, object arrays, headers
  declaring 10^12 elements, bad-CRC and zip-bomb `.npz`, directories, FIFOs, `/dev/zero`;
- `arrc explain` with something that is not a code (a path);
- internal errors: an MLIR verifier error, an XLA compile error and any other unexpected exception while
  lowering or compiling are diagnostic E0601 (exit 4);
- the error pages ship in a normal (non-editable) install of the wheel.
"""
from __future__ import annotations

import io
import json
import os
import shutil
import struct
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest

import arrc.cli as cli_module
from arrc.cli import EXIT_INTERNAL, EXIT_RUNTIME, EXIT_USAGE, main
from arrc.compiler import builtins, emit
from arrc.compiler.types import I32

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "1"}

PROGRAM = """\
def scaled(x: f32[n], k: f32) -> f32[n]:
    return x * k

def fixed(x: f32[4]) -> f32[4]:
    return x + 1

def table(x: f64[r, c]) -> f64[c]:
    return sum(x, axis=0)

def either(x: bool[n]) -> bool:
    return any(x)

def main() -> f32[3]:
    x = [1.0, 2.0, 3.0]
    return exp(x)
"""


@pytest.fixture
def prog(tmp_path: Path) -> str:
    path = tmp_path / "prog.arr"
    path.write_text(PROGRAM)
    return str(path)


def run_file(capsys, prog: str, entry: str, path: Path | str, *more: str) -> tuple[int, str, str]:
    """`arrc run prog --entry ENTRY --arg x=@PATH ...`: (exit code, stdout, stderr)."""
    code = main(["run", prog, "--entry", entry, "--arg", f"x=@{path}", *more])
    out, err = capsys.readouterr()
    assert "Traceback" not in err + out
    return code, out, err


def usage_error(capsys, prog: str, entry: str, path: Path, *more: str) -> str:
    """The one-line message of a usage error (exit 2), without the `arrc: error: ` prefix."""
    code, out, err = run_file(capsys, prog, entry, path, *more)
    assert code == EXIT_USAGE and out == "" and err.startswith("arrc: error: ") and err.count("\n") == 1, err
    return err[len("arrc: error: "):-1]


def npy_bytes(array: np.ndarray, **kwargs) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array, **kwargs)
    return buf.getvalue()


def npy_header(shape: tuple, descr: str = "<f4") -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False, "shape": shape})
    return buf.getvalue()


# ---- argument files: what is read --------------------------------------------------------------------

def test_good_files_still_run(prog, tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.array([1, 2, 3], np.float32))
    assert run_file(capsys, prog, "scaled", tmp_path / "x.npy", "--arg", "k=2")[:2] == (0, "[2. 4. 6.]\n")
    np.savez(tmp_path / "x.npz", x=np.array([1, 2, 3], np.float32))
    assert run_file(capsys, prog, "scaled", tmp_path / "x.npz", "--arg", "k=2")[:2] == (0, "[2. 4. 6.]\n")
    np.savez_compressed(tmp_path / "c.npz", x=np.arange(4, dtype=np.float32))
    assert run_file(capsys, prog, "fixed", tmp_path / "c.npz")[:2] == (0, "[1. 2. 3. 4.]\n")


def test_a_python_2_header_is_read_without_a_warning(prog, tmp_path, capsys, recwarn):
    """NumPy reads `'shape': (3L,)` (a file written by Python 2) but warns; the warning must not reach the
    user's terminal (found by the adversarial campaign, `--replay cli:2126806017:1203`)."""
    good = npy_bytes(np.array([1, 2, 3], np.float32))
    bad = good.replace(b"(3,), }", b"(3L,),}")
    assert bad != good and len(bad) == len(good)
    (tmp_path / "x.npy").write_bytes(bad)
    assert run_file(capsys, prog, "scaled", tmp_path / "x.npy", "--arg", "k=2") == (0, "[2. 4. 6.]\n", "")
    assert not [w for w in recwarn if "Python 2" in str(w.message)]


def test_byte_order_and_layout_of_a_file_are_storage_details(prog, tmp_path, capsys):
    np.save(tmp_path / "big.npy", np.array([1, 2, 3], ">f4"))
    assert run_file(capsys, prog, "scaled", tmp_path / "big.npy", "--arg", "k=2")[:2] == (0, "[2. 4. 6.]\n")
    np.save(tmp_path / "f.npy", np.asfortranarray(np.arange(6, dtype=">f8").reshape(2, 3)))
    assert run_file(capsys, prog, "table", tmp_path / "f.npy")[:2] == (0, "[3. 5. 7.]\n")


def test_bool_bytes_other_than_0_and_1_read_as_true(prog, tmp_path, capsys):
    data = bytearray(npy_bytes(np.array([False, False, False])))
    data[-2] = 2                                    # as numpy reads it: True
    (tmp_path / "b.npy").write_bytes(bytes(data))
    assert run_file(capsys, prog, "either", tmp_path / "b.npy")[:2] == (0, "true\n")


# ---- argument files: what is refused ----------------------------------------------------------------

def test_zero_byte_and_garbage_files(prog, tmp_path, capsys):
    (tmp_path / "empty.npy").write_bytes(b"")
    assert usage_error(capsys, prog, "scaled", tmp_path / "empty.npy", "--arg", "k=1") == \
        f"{tmp_path / 'empty.npy'} is not a NumPy .npy or .npz file (it is empty)"
    (tmp_path / "text.npy").write_text("1, 2, 3\n")
    assert usage_error(capsys, prog, "scaled", tmp_path / "text.npy", "--arg", "k=1") == \
        f"{tmp_path / 'text.npy'} is not a NumPy .npy or .npz file (it does not start like one)"


def test_truncated_data(prog, tmp_path, capsys):
    data = npy_bytes(np.zeros(1000, np.float32))
    path = tmp_path / "cut.npy"
    path.write_bytes(data[:-2000])
    assert usage_error(capsys, prog, "scaled", path, "--arg", "k=1") == \
        f"{path} is truncated: its header declares f32[1000] (4,000 bytes of data), 2,000 bytes follow it"
    path.write_bytes(data + b"extra")
    assert usage_error(capsys, prog, "scaled", path, "--arg", "k=1") == \
        f"{path} has bytes after its data: its header declares f32[1000] (4,000 bytes of data), " \
        f"4,005 bytes follow it"


@pytest.mark.parametrize("cut", [6, 9, 20, 127])
def test_truncated_header(prog, tmp_path, capsys, cut):
    path = tmp_path / "cut.npy"
    path.write_bytes(npy_bytes(np.zeros(4, np.float32))[:cut])
    message = usage_error(capsys, prog, "scaled", path, "--arg", "k=1")
    assert message.startswith(f"{path} is not a valid .npy file (")


@pytest.mark.parametrize("header, reason", [
    (b"{'descr': '<f4', 'fortran_order': False}", "Header does not contain the correct keys"),
    (b"{'descr': '<f4', 'fortran_order': False, 'shape': (-4,)}", "negative dimension in shape (-4,)"),
    (b"{'descr': 'nonsense', 'fortran_order': False, 'shape': (4,)}", "descr is not a valid dtype descriptor"),
    (b"__import__('os').system('false')", "malformed node or string"),
    (b"(" * 2000 + b")" * 2000, "Cannot parse header"),
    (b"{" * 10001, "Header info length (10002) is large"),
])
def test_corrupt_header(prog, tmp_path, capsys, header, reason):
    path = tmp_path / "bad.npy"
    path.write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header) + 1) + header + b"\n" + bytes(16))
    message = usage_error(capsys, prog, "scaled", path, "--arg", "k=1")
    assert message.startswith(f"{path} is not a valid .npy file ({reason}"), message


def test_header_length_of_4_gb_is_not_read(prog, tmp_path, capsys):
    path = tmp_path / "long.npy"
    path.write_bytes(b"\x93NUMPY\x02\x00" + struct.pack("<I", 2 ** 32 - 1) + b"{" * 100)
    assert usage_error(capsys, prog, "scaled", path, "--arg", "k=1") == \
        f"{path} is not a valid .npy file (EOF: reading array header, expected 4294967295 bytes got 100)"


def test_unsupported_format_version(prog, tmp_path, capsys):
    path = tmp_path / "v3.npy"
    with open(path, "wb") as f:
        np.lib.format.write_array(f, np.zeros(4, np.float32), version=(3, 0))
    assert usage_error(capsys, prog, "scaled", path, "--arg", "k=1") == \
        f"{path} is not a valid .npy file (format version 3.0; arrc reads 1.0 and 2.0)"


def test_a_header_of_10_to_the_12_elements_is_refused_before_reading(prog, tmp_path, capsys):
    path = tmp_path / "huge.npy"
    path.write_bytes(npy_header((10 ** 12,)) + bytes(64))
    assert usage_error(capsys, prog, "fixed", path) == \
        f"{path} declares f32[1000000000000] (1,000,000,000,000 elements), more than parameter `x: f32[4]` " \
        f"holds (4)"
    message = usage_error(capsys, prog, "scaled", path, "--arg", "k=1")          # any n: the machine's limit
    assert message.startswith(f"{path} declares f32[1000000000000] (4,000,000,000,000 bytes), more than one "
                              f"array may have on this machine (") or message.startswith(f"{path} is truncated")


def test_a_file_of_another_dtype_and_the_right_size_is_refused_for_its_dtype(prog, tmp_path, capsys):
    """f64[4] for `x: f32[4]` was "declares f64[4] (32 bytes), more than parameter `x: f32[4]` can take (16
    bytes)": the size was blamed for the dtype. Its dtype is, as in a call, with the same advice."""
    path = tmp_path / "x64.npy"
    np.save(path, np.ones(4))
    assert usage_error(capsys, prog, "fixed", path).startswith(
        "argument `x` of `fixed` has type f64[4], expected f32[4]. NumPy's default float dtype is float64. "
        "Convert it with `x.astype(np.float32)`")


def test_object_and_non_arr_dtypes(prog, tmp_path, capsys):
    path = tmp_path / "obj.npy"
    np.save(path, np.array([1, "two", None], dtype=object), allow_pickle=True)
    assert usage_error(capsys, prog, "scaled", path, "--arg", "k=1") == \
        f"{path} holds Python objects (dtype object); an argument file holds a bool or numeric array"
    np.save(path, np.zeros(4, np.complex64))
    assert usage_error(capsys, prog, "scaled", path, "--arg", "k=1") == \
        f"{path} holds dtype complex64, which is not an arr dtype (bool, i8 ... i64, u8 ... u64, f16, bf16, " \
        f"f32, f64)"
    np.save(path, np.zeros(4, [("a", "<f4"), ("b", "<i4")]))
    assert "which is not an arr dtype" in usage_error(capsys, prog, "scaled", path, "--arg", "k=1")


def test_npz_with_other_than_one_array(prog, tmp_path, capsys):
    path = tmp_path / "two.npz"
    np.savez(path, a=np.zeros(2, np.float32), b=np.zeros(2, np.float32))
    assert usage_error(capsys, prog, "scaled", path, "--arg", "k=1") == \
        f"{path} holds 2 arrays ('a.npy', 'b.npy'); an argument file holds one (save it with numpy.save as a " \
        f".npy file)"
    np.savez(path)
    assert usage_error(capsys, prog, "scaled", path, "--arg", "k=1") == \
        f"{path} holds 0 arrays; an argument file holds one (save it with numpy.save as a .npy file)"


def test_npz_member_that_is_not_npy(prog, tmp_path, capsys):
    path = tmp_path / "junk.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("x.npy", b"not an array")
    assert usage_error(capsys, prog, "scaled", path, "--arg", "k=1").startswith(
        f"{path} member 'x.npy' is not a valid .npy file (the magic string is not correct")


def test_npz_with_a_bad_crc(prog, tmp_path, capsys):
    path = tmp_path / "crc.npz"
    np.savez(path, x=np.arange(4, dtype=np.float32))
    data = bytearray(path.read_bytes())
    at = data.index(np.arange(4, dtype=np.float32).tobytes())
    data[at + 5] ^= 0xFF                          # a stored member's data, its CRC unchanged
    path.write_bytes(bytes(data))
    assert usage_error(capsys, prog, "fixed", path) == \
        f"{path} is not a valid .npz file (Bad CRC-32 for file 'x.npy')"


@pytest.mark.parametrize("cut", [4, 30, 100, -30])
def test_corrupt_and_truncated_npz(prog, tmp_path, capsys, cut):
    path = tmp_path / "cut.npz"
    np.savez_compressed(path, x=np.arange(100, dtype=np.float32))
    path.write_bytes(path.read_bytes()[:cut])
    assert usage_error(capsys, prog, "scaled", path, "--arg", "k=1").startswith(f"{path} is not a valid .npz file (")


def test_a_directory_is_not_an_argument_file(prog, tmp_path, capsys):
    assert usage_error(capsys, prog, "scaled", tmp_path, "--arg", "k=1") == \
        f"{tmp_path} is a directory; --arg NAME=@FILE reads a .npy or .npz file"


def zip_bomb(path: Path, elements: int, crc: bool = False) -> None:
    """A .npz whose one member inflates to a .npy of `elements` f32 zeros (2 GB from ~2 MB), built without
    compressing them: deflate blocks after a full flush do not depend on what came before, so one
    compressed MiB of zeros is repeated. Without `crc` its CRC is 0: reading it all would find that out,
    but only after inflating it."""
    header = npy_header((elements,))
    mib = 1 << 20
    assert elements * 4 % mib == 0
    first = zlib.compressobj(9, zlib.DEFLATED, -15)
    start = first.compress(header) + first.flush(zlib.Z_FULL_FLUSH)
    block = zlib.compressobj(9, zlib.DEFLATED, -15)
    zeros = block.compress(bytes(mib)) + block.flush(zlib.Z_FULL_FLUSH)
    end = zlib.compressobj(9, zlib.DEFLATED, -15).flush()
    body = start + zeros * (elements * 4 // mib) + end
    size = len(header) + elements * 4
    name = b"x.npy"
    check = zlib.crc32(bytes(elements * 4), zlib.crc32(header)) if crc else 0
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0x21, check, len(body), size, len(name), 0) + name
    central = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0x21, check, len(body), size,
                          len(name), 0, 0, 0, 0, 0, 0) + name
    end_record = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(central), len(local) + len(body), 0)
    path.write_bytes(local + body + central + end_record)


def test_the_zip_bomb_builder_makes_a_real_archive(tmp_path):
    zip_bomb(tmp_path / "small.npz", 1 << 20, crc=True)
    with zipfile.ZipFile(tmp_path / "small.npz") as archive, archive.open("x.npy") as member:
        data = member.read(1 << 23)                     # all of it: 4 MiB and the header
    array = np.load(io.BytesIO(data))
    assert array.shape == (1 << 20,) and not array.any()


CHILD = """\
import contextlib, io, json, resource, sys
from arrc.cli import main
found = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(argv)
    found.append([code, err.getvalue()])
print(json.dumps({"runs": found, "max_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


NOT_REGULAR = "is not a regular file; --arg NAME=@FILE reads a .npy or .npz file\n"


def test_bombs_and_special_files_neither_hang_nor_exhaust_memory(prog, tmp_path):
    """In a child (a regression would hang or swell this process): a 2 GB zip bomb for a parameter that
    holds 16 bytes and for one of any size (this machine's limit set to 64 MiB), a FIFO nobody writes,
    /dev/zero and a link to it. The child's peak memory stays far below the bomb's 2 GB."""
    zip_bomb(tmp_path / "bomb.npz", 1 << 29)
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "zero.npy").symlink_to("/dev/zero")
    scaled = ["run", prog, "--entry", "scaled", "--arg", "k=1", "--arg"]
    argvs = [["run", prog, "--entry", "fixed", "--arg", f"x=@{tmp_path / 'bomb.npz'}"],
             [*scaled, f"x=@{tmp_path / 'bomb.npz'}"], [*scaled, f"x=@{tmp_path / 'fifo'}"],
             [*scaled, f"x=@{tmp_path / 'zero.npy'}"], [*scaled, "x=@/dev/zero"]]
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(argvs)], capture_output=True, text=True,
                          env={**ENV, "ARRC_MAX_ARRAY_BYTES": str(64 << 20)}, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    bomb = tmp_path / "bomb.npz"
    assert report["runs"] == [
        [2, f"arrc: error: {bomb} member 'x.npy' declares f32[536870912] (536,870,912 elements), more than "
            f"parameter `x: f32[4]` holds (4)\n"],
        [2, f"arrc: error: {bomb} member 'x.npy' declares f32[536870912] (2,147,483,648 bytes), more than "
            f"one array may have on this machine (67,108,864 bytes)\n"],
        [2, f"arrc: error: {tmp_path / 'fifo'} {NOT_REGULAR}"],
        [2, f"arrc: error: {tmp_path / 'zero.npy'} {NOT_REGULAR}"],
        [2, f"arrc: error: /dev/zero {NOT_REGULAR}"],
    ]
    assert report["max_rss_kb"] < 1_000_000, report


# ---- explain ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["../../README", "E0202/../../README", "E0202.md", "/etc/passwd", "", "E02020"])
def test_explain_takes_only_a_code(capsys, text):
    assert main(["explain", text]) == EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == "" and err == (f"arrc: error: {text!r} is not a diagnostic code: a code is E, W or R and "
                                 f"four digits, e.g. E0202\n")


def test_explain_internal_error_code(capsys):
    assert main(["explain", "e0601"]) == 0
    assert capsys.readouterr().out.startswith("# E0601: internal compiler error\n")


def test_error_pages_ship_in_a_normal_install(tmp_path):
    """Build the wheel from a copy of the project, install it (not editable) into a fresh virtual
    environment that borrows this one's dependencies through a .pth file, and run its `arrc explain`."""
    src = tmp_path / "src"
    for part in ["arrc", "compiler", "passes", "runtime", "grammar", "docs/errors"]:
        shutil.copytree(ROOT / part, src / part, ignore=shutil.ignore_patterns("__pycache__"))
    for part in ["pyproject.toml", "README.md"]:
        shutil.copy(ROOT / part, src / part)
    build = "import setuptools.build_meta as backend, sys; backend.build_wheel(sys.argv[1])"    # PEP 517, as pip
    built = subprocess.run([sys.executable, "-c", build, str(tmp_path / "dist")], capture_output=True, text=True,
                           env=ENV, cwd=src, timeout=300)
    assert built.returncode == 0, f"building the wheel needs setuptools>=70.1 (the dev extra):\n{built.stderr}"
    wheel, = (tmp_path / "dist").glob("arrc-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    (Path(site) / "borrowed.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")   # numpy, jax, lark, pip
    installed = subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", "--no-input", "--quiet",
                                "install", "--no-deps", "--no-index", "--ignore-installed", str(wheel)],
                               capture_output=True, text=True, env=ENV, timeout=300)
    assert installed.returncode == 0, installed.stderr
    env = {k: v for k, v in ENV.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    where = subprocess.run([str(python), "-c", "import arrc.cli; print(arrc.cli.__file__)"], capture_output=True,
                           text=True, env=env, cwd=tmp_path, timeout=120)
    assert where.stdout.strip() == str(Path(site) / "arrc" / "cli.py"), where
    done = subprocess.run([str(venv / "bin" / "arrc"), "explain", "E0202"], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (ROOT / "docs" / "errors" / "E0202.md").read_text(encoding="utf-8")


# ---- internal errors: MLIR, XLA, anything unexpected ----------------------------------------------

HELP = ("  = help: this is a bug in arrc, not in your program: please report it with the program, the command "
        "line and the output of `arrc --version`\n")


@pytest.fixture
def broken_exp(monkeypatch):
    """A lowering rule with a bug: `exp` emits `stablehlo.exponential` on integers, which MLIR's verifier
    rejects after lowering (a real `ir.MLIRError`)."""
    rule = builtins.BUILTINS["exp"]

    def exp_on_ints(cx, x):
        x = cx.array(x, "x")
        return cx.value(x.type, lambda: emit.same_type("stablehlo.exponential", cx.ir(x, I32)))
    monkeypatch.setitem(builtins.BUILTINS, "exp", builtins.Builtin("exp", exp_on_ints, rule.params, rule.defaults))


def mlir_report(prog: str) -> str:
    loc = f'"exp"("{prog}":15:12 to :18)'
    return (
        "error[E0601]: internal compiler error: MLIRError: Verification failed:\n"
        "  |\n"
        f"  = note: error: {loc}: 'stablehlo.exponential' op operand #0 must be ranked tensor of "
        "4/6/8/16/32/64-bit float or complex type with 32/64-bit float elements or per-tensor integer "
        "quantized values, but got 'tensor<3xi32>'\n"
        f"  = note: note: {loc}: see current operation: %1 = \"stablehlo.exponential\"(%0) : "
        "(tensor<3xi32>) -> tensor<3xi32>\n" + HELP)


@pytest.mark.parametrize("command", ["run", "compile", "check"])
def test_an_mlir_verifier_error_is_an_internal_error_diagnostic(prog, capsys, broken_exp, command):
    assert main([command, prog]) == EXIT_INTERNAL
    out, err = capsys.readouterr()
    assert out == "" and err == mlir_report(prog)


def test_internal_error_as_json(prog, capsys, broken_exp):
    assert main(["check", prog, "--diagnostics", "json"]) == EXIT_INTERNAL
    out, err = capsys.readouterr()
    diag, = json.loads(out)["diagnostics"]
    assert err == "" and diag["code"] == "E0601" and diag["span"] is None
    assert diag["message"] == "internal compiler error: MLIRError: Verification failed:"
    assert len(diag["notes"]) == 2 and diag["help"].startswith("this is a bug in arrc")


def test_an_xla_compile_error_is_an_internal_error_diagnostic(prog, capsys, monkeypatch):
    from jax.errors import JaxRuntimeError

    from arrc.runtime import pjrt

    def refuse(*args, **kwargs):
        more = "".join(f"line {i}\n" for i in range(3, 12))
        raise JaxRuntimeError(f"INTERNAL: Failed to compile: an XLA bug\nline two\n{more}")
    monkeypatch.setattr(pjrt.Executable, "_compile_or_load", refuse)
    assert main(["run", prog, "--entry", "fixed", "--arg", "x=[1, 2, 3, 4]"]) == EXIT_INTERNAL
    out, err = capsys.readouterr()
    assert out == "" and err == (
        "error[E0601]: internal compiler error: JaxRuntimeError: INTERNAL: Failed to compile: an XLA bug\n"
        "  |\n"
        "  = note: line two\n  = note: line 3\n  = note: line 4\n  = note: line 5\n  = note: line 6\n"
        "  = note: ... (5 more lines)\n" + HELP)


def test_any_unexpected_exception_is_an_internal_error_diagnostic(prog, capsys, monkeypatch):
    import arrc.cli

    def bug(*args, **kwargs):
        raise AttributeError("'NoneType' object has no attribute 'shape'")
    monkeypatch.setattr(arrc.cli, "emit", bug)
    assert main(["compile", prog, "--entry", "fixed"]) == EXIT_INTERNAL
    assert capsys.readouterr().err == (
        "error[E0601]: internal compiler error: AttributeError: 'NoneType' object has no attribute 'shape'\n"
        "  |\n" + HELP)


def test_out_of_memory_is_not_an_internal_error(prog, capsys, monkeypatch):
    from jax.errors import JaxRuntimeError

    import arrc.cli

    def exhausted(*args, **kwargs):
        raise JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory allocating 17179869184 bytes.\ndetails")
    monkeypatch.setattr(arrc.cli, "execute", exhausted)
    assert main(["run", prog, "--entry", "fixed", "--arg", "x=[1, 2, 3, 4]"]) == EXIT_RUNTIME
    assert capsys.readouterr().err == \
        "arrc: error: out of memory: RESOURCE_EXHAUSTED: Out of memory allocating 17179869184 bytes.\n"


def test_internal_errors_leave_the_process_without_a_traceback(prog, tmp_path):
    """Through the console entry (`python -m arrc`), with the bug put in by a sitecustomize module."""
    (tmp_path / "sitecustomize.py").write_text(textwrap.dedent("""\
        from arrc.compiler import builtins, emit
        from arrc.compiler.types import I32
        rule = builtins.BUILTINS["exp"]
        def exp_on_ints(cx, x):
            x = cx.array(x, "x")
            return cx.value(x.type, lambda: emit.same_type("stablehlo.exponential", cx.ir(x, I32)))
        builtins.BUILTINS["exp"] = builtins.Builtin("exp", exp_on_ints, rule.params, rule.defaults)
        """))
    done = subprocess.run([sys.executable, "-m", "arrc", "compile", prog], capture_output=True, text=True,
                          env={**ENV, "PYTHONPATH": str(tmp_path)}, cwd=ROOT, timeout=120)
    assert done.returncode == EXIT_INTERNAL and done.stdout == "" and done.stderr == mlir_report(prog)


def test_stablehlo_run_reads_files_bounded_by_its_parameters(prog, tmp_path, capsys):
    mlir = tmp_path / "fixed.mlir"
    assert main(["compile", prog, "--entry", "fixed", "-o", str(mlir)]) == 0
    np.save(tmp_path / "x.npy", np.arange(4, dtype=np.float32))
    assert main(["run", str(mlir), "--arg", f"arg0=@{tmp_path / 'x.npy'}"]) == 0
    assert capsys.readouterr().out == "[1. 2. 3. 4.]\n"
    np.save(tmp_path / "x.npy", np.zeros(5, np.float32))
    assert main(["run", str(mlir), "--arg", f"arg0=@{tmp_path / 'x.npy'}"]) == EXIT_USAGE
    assert capsys.readouterr().err == (f"arrc: error: {tmp_path / 'x.npy'} declares f32[5] (5 elements), more than "
                                       f"parameter `x: f32[4]` holds (4)\n")


def test_empty_and_scalar_files(prog, tmp_path, capsys):
    np.save(tmp_path / "e.npy", np.zeros(0, np.float32))
    assert run_file(capsys, prog, "scaled", tmp_path / "e.npy", "--arg", "k=2")[:2] == (0, "[]\n")
    np.save(tmp_path / "k.npy", np.float32(3))
    code = main(["run", prog, "--entry", "scaled", "--arg", "x=[1, 2]", "--arg", f"k=@{tmp_path / 'k.npy'}"])
    assert code == 0 and capsys.readouterr().out == "[3. 6.]\n"


# ---- output that goes away: a closed pipe, a full disk, a closed stdout --------------------------------------

PRINTS = "def main(n: i32) -> i32:\n    s = 0\n    for i in range(n):\n        print(\"step\", i, arange(50))\n" \
         "        s += i\n    return s\n"


def _arrc(args: list, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "arrc", *args], stderr=subprocess.PIPE, text=True, **kw)


def test_a_reader_that_leaves_ends_a_printing_run_quietly(tmp_path):
    """`arrc run f.arr | head -1` and `arrc repl < s | head -1`: status 0, nothing on stderr, as `arrc compile |
    head`. The print callback's BrokenPipeError was XLA's "CpuCallback error": E0601, status 4 (and in the
    REPL one E0601 per later cell)."""
    prog = tmp_path / "p.arr"
    prog.write_text(PRINTS)
    script = tmp_path / "cells.txt"
    script.write_text("".join(f"print({i}, arange(50))\n" for i in range(3000)))
    for args, stdin in ((["run", str(prog), "--arg", "n=20000"], None), (["repl", "--no-history"], script)):
        with open(stdin or os.devnull) as given:
            proc = _arrc(args, stdin=given, stdout=subprocess.PIPE)
            first = proc.stdout.readline()
            proc.stdout.close()
            _, err = proc.communicate(timeout=300)
        assert first.startswith(("step 0 [ 0  1", "0 [ 0  1")), first
        assert (proc.returncode, err) == (0, ""), (args, err[-2000:])


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_a_full_disk_under_the_output_is_a_usage_error(tmp_path):
    """`> /dev/full`: "No space left on device", status 2 (was E0601, status 4)."""
    prog = tmp_path / "p.arr"
    prog.write_text(PRINTS)
    with open("/dev/full", "w") as full:
        run = _arrc(["run", str(prog), "--arg", "n=2"], stdout=full)
        _, run_err = run.communicate(timeout=300)
        repl = _arrc(["repl", "--no-history"], stdout=full, stdin=subprocess.PIPE)
        _, repl_err = repl.communicate("1 + 1\nprint(3)\n", timeout=300)
    assert (run.returncode, run_err) == (EXIT_USAGE, "arrc: error: cannot write the output: No space left on device\n")
    assert (repl.returncode, repl_err) == (EXIT_USAGE, "arrc repl: error: No space left on device\n")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
@pytest.mark.parametrize("unbuffered", ["1", ""])
def test_every_command_says_when_its_output_cannot_be_written(tmp_path, unbuffered):
    """`arrc --version > /dev/full` was a traceback (status 1, or 120 with a buffered stdout), `arrc --help`
    and `arrc run --help` said nothing (status 0), `arrc explain` "[Errno 28] ..." or a traceback at exit."""
    env = {**os.environ, "PYTHONUNBUFFERED": unbuffered}
    with open("/dev/full", "w") as full:
        for args in (["--version"], ["--help"], ["run", "--help"], ["explain", "E0202"]):
            proc = _arrc(args, stdout=full, env=env)
            _, err = proc.communicate(timeout=300)
            assert (proc.returncode, err) == (EXIT_USAGE, "arrc: error: cannot write the output: No space left on "
                                                          "device\n"), args


def test_a_reader_that_left_before_the_version_or_help_is_no_error():
    """`arrc --version | head -0`: status 0, nothing on stderr (was a BrokenPipeError traceback)."""
    for args in (["--version"], ["--help"]):
        proc = _arrc(args, stdout=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        proc.stdout.close()
        _, err = proc.communicate(timeout=300)
        assert (proc.returncode, err) == (0, ""), args


def test_a_closed_stdout_is_no_traceback(tmp_path):
    """`arrc check f.arr >&-`: Python's sys.stdout is None there; it was an AttributeError's traceback."""
    prog = tmp_path / "ok.arr"
    prog.write_text("def f(x: f32[3]) -> f32[3]:\n    return x * 2.0\n")
    proc = _arrc(["check", str(prog)], preexec_fn=lambda: os.close(1))
    _, err = proc.communicate(timeout=300)
    assert (proc.returncode, err) == (0, f"{prog}: no errors\n")


def test_print_to_a_closed_stream_raises_from_the_call():
    """The API: the print's error, raised by the call that printed (was a JaxRuntimeError with a thread's
    traceback in its message)."""
    import contextlib

    import arrc
    mod = arrc.loads(PRINTS)
    closed = io.StringIO()
    closed.close()
    with contextlib.redirect_stdout(closed), pytest.raises(ValueError, match="closed file"):
        mod.main(3)
    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert mod.main(2) == 1
    assert out.getvalue().startswith("step 0 [ 0  1")


@pytest.mark.parametrize("command", [["compile", "--entry", "main", "-o"], ["run", "--out"]])
def test_a_write_that_fails_leaves_the_old_output_and_no_partial_file(tmp_path, command):
    """`-o`/`--out` past a file-size limit (or a full disk, or Ctrl-C while writing): the old file stays whole
    (it was truncated and left half-written) and nothing else is left in its folder."""
    import resource
    prog = tmp_path / "big.arr"
    prog.write_text("def main() -> f32[100000]:\n" + "    x = zeros((100000,))\n" * 40 + "    return x\n")
    out = tmp_path / ("out.npz" if "--out" in command else "out.mlir")
    out.write_text("old")

    def limit_file_size():
        resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))
    proc = _arrc([command[0], str(prog), *command[1:], str(out)], stdout=subprocess.DEVNULL,
                 preexec_fn=limit_file_size)
    _, err = proc.communicate(timeout=300)
    assert (proc.returncode, err) == (EXIT_USAGE, f"arrc: error: {command[-1]} {out}: cannot write it (File too "
                                                  "large)\n")
    assert out.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.arr", out.name]
    proc = _arrc([command[0], str(prog), *command[1:], "/dev/null" if "-o" in command else str(out)],
                 stdout=subprocess.DEVNULL)
    assert proc.communicate(timeout=300) == (None, "") and proc.returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.arr", out.name]


def test_o_dev_stdout_into_a_pipe_writes_the_pipe(tmp_path):
    """`arrc compile f.arr -o /dev/stdout | ...` was "cannot write it (No such file or directory)": the
    partial file was made beside /dev/stdout's real path, /proc/ID/fd/pipe:[N], which is no file."""
    prog = tmp_path / "p.arr"
    prog.write_text("def main() -> f32[3]:\n    return zeros((3,))\n")
    proc = _arrc(["compile", str(prog), "-o", "/dev/stdout"], stdout=subprocess.PIPE)
    out, err = proc.communicate(timeout=300)
    assert (proc.returncode, err) == (0, "") and out.startswith("module")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.arr"]


@pytest.mark.parametrize("command", [["compile", "--entry", "main", "-o"], ["run", "--out"]])
def test_an_output_name_as_long_as_the_file_system_allows_is_written(tmp_path, command, capsys):
    """A 255-byte name (NAME_MAX): the partial file written beside it was named after it, 255 bytes plus a
    suffix, and the write failed "File name too long" where a plain write of the name succeeds."""
    prog = tmp_path / "p.arr"
    prog.write_text("def main() -> f32[3]:\n    return zeros((3,))\n")
    out = tmp_path / ("a" * (255 - 4) + (".npz" if "--out" in command else ".mlr"))
    assert main([command[0], str(prog), *command[1:], str(out)]) == 0, capsys.readouterr().err
    assert out.stat().st_size > 0 and sorted(p.name for p in tmp_path.iterdir()) == sorted([prog.name, out.name])


def test_an_output_arrc_may_not_write_is_refused_not_replaced(tmp_path, monkeypatch, capsys):
    """`-o` over a file arrc may not write (read-only, or another user's): refused as a plain write refuses
    it, not replaced by renaming a new file over it. Faked through os.access: the tests may run as root."""
    prog = tmp_path / "p.arr"
    prog.write_text("def main() -> f32[3]:\n    return zeros((3,))\n")
    out = tmp_path / "out.mlir"
    out.write_text("old")
    out.chmod(0o444)
    access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if os.fspath(p) == str(out) else access(p, mode, **kw))
    monkeypatch.setattr(cli_module, "open", _refusing_open(out), raising=False)
    assert main(["compile", str(prog), "-o", str(out)]) == EXIT_USAGE
    assert capsys.readouterr().err == f"arrc: error: -o {out}: cannot write it (Permission denied)\n"
    assert out.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["out.mlir", "p.arr"]


def _refusing_open(path):
    """open() as a non-root user finds a 0444 file: PermissionError for writing it."""
    def fake_open(file, mode="r", *args, **kwargs):
        if os.fspath(file) == str(path) and "w" in mode:
            raise PermissionError(13, "Permission denied", str(file))
        return open(file, mode, *args, **kwargs)
    return fake_open


def test_a_file_name_that_is_not_utf8_compiles_and_is_reported(tmp_path, capsys):
    """`bad\\xff.arr` (any bytes are a Linux file name; Python keeps them as lone surrogates): it was an
    internal error (E0601, status 4) from MLIR's locations, a TypeError from `arrc.load`; so was
    `arrc.loads(text, filename="\\ud800")`. Now the name is spelled with escapes, as diagnostics print it."""
    import arrc
    try:
        prog = Path(os.fsdecode(bytes(tmp_path) + b"/bad\xff.arr"))
        prog.write_text("def f(x: f32[n]) -> f32[n]:\n    return log(x)\n")
    except (UnicodeError, OSError):
        pytest.skip("this file system takes only UTF-8 names")
    assert main(["run", str(prog), "--entry", "f", "--arg", "x=[1.0]"]) == 0
    assert capsys.readouterr().out == "[0.]\n"
    assert main(["run", str(prog), "--entry", "f", "--arg", "x=[0.0]", "--guards", "all"]) == EXIT_RUNTIME
    assert "bad\\udcff.arr:2:12\n" in capsys.readouterr().err
    assert arrc.load(prog).f([1.0]).tolist() == [0.0]
    with pytest.raises(arrc.InfError, match=r"\\ud800.arr:2:12"):
        arrc.loads("def f(x: f32) -> f32:\n    return log(x)\n", filename="\ud800.arr", guards="all").f(0.0)
