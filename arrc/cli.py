"""The `arrc` command line (LANGUAGE.md section 9): compile, run, check, explain, guard, grad, repl.

Exit codes: 0 ok, 1 compile error, 2 usage error, 3 run-time guard or assert failure (or out of
memory), 4 internal error (a bug in arrc, MLIR or XLA: diagnostic E0601, with a request to report it).
Every user mistake ends in a one-line message or rendered diagnostics, never a traceback; so does a bug.
`check` and `compile` need only jaxlib's MLIR bindings: the runtime (and so `jax`) is imported
only by `run`.

>>> main(["check", "examples/nansum.arr"])
0
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import errno
import io
import json
import math
import os
import re
import shutil
import stat
import sys
import time
import warnings
import zipfile
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

import arrc
from arrc.api import DEVICES
from arrc.compiler.abi import GUARD_KINDS as KINDS
from arrc.compiler.abi import GUARD_SCOPES as SCOPES
from arrc.compiler.diagnostics import (CODES, CompileError, Diagnostic, first_line, internal_error, plural,
                                       render_all, render_json)
from arrc.compiler.parse import decode
from arrc.compiler.span import Source, Span
from arrc.compiler.types import MAX_ARRAY_BYTES, ArrayType, Dim, dtype_of_numpy, host_keys, key_words
from arrc.sharding import host_value
from arrc.exits import EXIT_COMPILE, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, drop_stdout
from arrc.compiler.signals import keep_lost_interrupts, raise_lost_interrupt
from arrc.compiler.walk import walk_ops

GUARD_KINDS = (*KINDS, "all")
EMITS = ("stablehlo", "mlirbc", "artifact", "ast", "guarded", "hlo")
CODE = re.compile(r"[EWR][0-9]{4}")
SHORT_CODE = re.compile(r"(?P<letter>[EWR])?(?P<digits>[0-9]{1,4})")     # `arrc explain 203`: E0203


def error_pages() -> Path:
    """The long explanations: docs/errors, installed as the package data `arrc/errors` (pyproject.toml
    maps it), or read in place in a source checkout (editable install)."""
    here = Path(__file__).resolve().parent
    installed = here / "errors"
    return installed if installed.is_dir() else here.parent / "docs" / "errors"


class UsageError(Exception):
    """A mistake on the command line (bad flag value, missing file, unknown entry): exit code 2."""


# ---- loading ---------------------------------------------------------------------------------------

STDIN = "-"     # FILE `-`: the arr source read from standard input (`cat f.arr | arrc check -`), as `python -`


def shown_file(path: str) -> str:
    """The name diagnostics and summaries give the input FILE: `<stdin>` for `-`, as Python names it."""
    return "<stdin>" if path == STDIN else path


def load_module(path: str, werror: bool = False, guards=None, scope: str = "results",
                device: str = "cpu") -> tuple[arrc.Module, dict[str, Source]]:
    """Compile the arr file at `path` (`-`: standard input); returns the module and the sources for
    rendering diagnostics."""
    data = sys.stdin.buffer.read() if path == STDIN else require_file(path, "an arr source file").read_bytes()
    path = shown_file(path)
    if looks_binary(data):
        raise not_text(data, path)
    source = decode(data, path)
    module = arrc.loads(source.text, filename=path, warnings="error" if werror else "ignore",
                        guards=",".join(guards) if guards else None, guard_scope=scope, device=device)
    return module, {path: source}


def require_file(path: str, what: str) -> Path:
    """`path` as a Path if it is a regular file, else a usage error naming the problem (missing, a
    directory, something else). `what` says what the command reads there ("an arr source file")."""
    file = Path(path)
    if file.is_dir():
        raise UsageError(f"{path} is a directory, not {what}")
    if not file.exists():
        raise UsageError(f"no such file: {path}")
    if not file.is_file():
        raise UsageError(f"{path} is not a regular file; give {what}")
    return file


def require_writable(path: str, flag: str) -> None:
    """A usage error, before any work, unless the file `path` (given by `flag`) can be written: its directory
    exists and can be written in, and it is no directory (`--out /nonexistent/r.npz` failed after the run)."""
    target = Path(path)
    folder = target.parent
    if target.is_dir():
        raise UsageError(f"{flag} {path} is a directory: give the name of a file in it")
    if not folder.is_dir():
        raise UsageError(f"{flag} {path}: " + (f"{folder} is not a directory" if folder.exists() else
                                                 f"there is no directory {folder}"))
    if not os.access(target if target.exists() else folder, os.W_OK):
        raise UsageError(f"{flag} {path}: cannot write " + ("it" if target.exists() else f"in {folder}") +
                         " (permission denied)")


def not_text(data: bytes, path: str) -> CompileError:
    """E0003 at the first character of `data` that is not text (a NUL byte, a byte that is not UTF-8, a control
    character), for a file that `looks_binary`: a diagnostic, as a stray byte's (also in --diagnostics json);
    its line is shown with those characters replaced."""
    text = data.decode("utf-8", "replace")
    at = next((i for i, c in enumerate(text) if c == "\ufffd" or (ord(c) < 32 and c not in "\t\n\r\f")), 0)
    line, col = text.count("\n", 0, at) + 1, at - (text.rfind("\n", 0, at) + 1) + 1
    return CompileError([Diagnostic("E0003", "file is not text (it looks binary)", Span(path, line, col, line, col + 1),
                                    "not text", help="an arr source file is UTF-8 text")], {path: Source(path, text)})


def looks_binary(data: bytes) -> bool:
    """Whether `data` is no text at all (a NUL byte, or a tenth of its first 8 KiB undecodable or control
    characters), rather than text with a stray non-UTF-8 byte (which is E0003 at that byte)."""
    sample = data[:8192]
    if b"\0" in sample:
        return True
    text = sample.decode("utf-8", errors="replace")
    odd = sum(1 for c in text if c == "\ufffd" or (ord(c) < 32 and c not in "\t\n\r\f"))
    return odd * 10 > len(text)


def require_stablehlo(path: str, command: str, arr_help: str) -> bytes:
    """The bytes of the StableHLO file `path` that `arrc COMMAND` reads; an arr source file (`.arr`) is a
    usage error that says what does the command's work on arr (`arr_help`)."""
    data = require_file(path, "a StableHLO file (.mlir or .mlirbc)").read_bytes()
    if Path(path).suffix == ".arr":
        raise UsageError(f"arrc {command} reads StableHLO (.mlir, .mlirbc, a portable artifact), and {path} "
                         f"is arr source: {arr_help}")
    return data


def is_stablehlo(path: str) -> bool:
    """StableHLO from elsewhere (text, bytecode, a portable artifact) rather than arr source: by the name's
    suffix, or for another suffix than .arr (a `jax.export` serialization saved as `f.bin`) by MLIR
    bytecode in its first MiB."""
    file = Path(path)
    if file.suffix in (".mlir", ".mlirbc"):
        return True
    if file.suffix == ".arr" or not file.is_file():
        return False
    from arrc.runtime.mlir_reader import BYTECODE_MAGIC
    try:
        with file.open("rb") as f:
            return BYTECODE_MAGIC in f.read(2 ** 20)
    except OSError:
        return False


def entry_function(module: arrc.Module, name: str, path: str, command: str = "run") -> arrc.Function:
    """The function `name` of `module`, or a usage error listing the functions there are (for the default
    `main`, with the `arrc COMMAND` line that picks another)."""
    if name in module:
        return module[name]
    names = list(module.functions)
    if not names:
        raise UsageError(f"{shown_file(path)} has no function `{name}` (it defines none)")
    listing = f"(functions: {', '.join(names)})"
    if name != "main":
        raise UsageError(f"{shown_file(path)} has no function `{name}`{did_you_mean(name, names)} {listing}")
    first = module[names[0]]
    if command == "compile":
        example = "".join(f" --shape {v}={EXAMPLE_SIZE}" for v in first.shape_vars)
    else:
        example = "".join(f" {example_arg(n, t)}" for n, t, _ in first._sig.params)
    raise UsageError(f"{shown_file(path)} has no function `main`: choose one with --entry NAME {listing}, e.g. "
                     f"arrc {command} {path} --entry {first.name}{example}")


def print_diagnostics(diags: list[Diagnostic], sources: dict[str, Source]) -> None:
    """Render diagnostics (usually warnings) rustc-style to stderr."""
    if diags:
        sys.stderr.write(render_all(diags, sources))


# ---- compile ---------------------------------------------------------------------------------------

def parse_shapes(items: list[str]) -> dict[str, int]:
    """`["n=8", "k=3"]` -> `{"n": 8, "k": 3}`."""
    shapes: dict[str, int] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        try:
            size = int(value)
        except ValueError:
            size = -1
        if not sep or not name.isidentifier() or size < 0:
            raise UsageError(f"--shape {item!r}: expected NAME=INT with INT >= 0, e.g. --shape n=8")
        if name in shapes:
            raise UsageError(f"--shape {name} is given twice")
        shapes[name] = size
    return shapes


def portable_artifact(lowered) -> bytes:
    """The version-stable StableHLO artifact (VHLO bytecode) of a lowered function.

    XLA's serializer (the one `jax.export` uses) is given the module's bytecode: it legalizes CHLO ops
    (`erf`, `erf_inv` under `normal`, `asin`, ...) to StableHLO first, which VHLO requires. The target
    version is the one JAX's export uses: supported by consumers at least 4 weeks old.
    """
    from jaxlib import _jax
    from jaxlib.mlir.dialects import stablehlo as hlo
    with lowered.context:
        version = hlo.get_version_from_compatibility_requirement(hlo.StablehloCompatibilityRequirement.WEEK_4)
    return _jax.mlir.serialize_portable_artifact(lowered.as_bytecode(), version)


def emit(lowered, kind: str) -> str | bytes:
    """The lowered function as StableHLO text (with locations), MLIR bytecode or a portable artifact."""
    if kind in ("stablehlo", "guarded"):
        return lowered.as_text(debug_info=True)
    if kind == "mlirbc":
        return lowered.as_bytecode()
    return portable_artifact(lowered)


def write_whole(path: str, flag: str, write) -> None:
    """Call `write` on a binary file that becomes `path` only once it is complete: it is written beside it and
    renamed over it, so that a failed or interrupted write (a full disk, Ctrl-C) leaves no partial file and an
    existing one as it was. Written in place: a device or pipe (`-o /dev/null`), a file in a folder arrc
    cannot create files in, and a file arrc may not write (so refused, as before: a rename would replace a
    read-only file)."""
    target = os.path.realpath(path)
    partial = os.path.join(os.path.dirname(target), f".arrc-{os.getpid()}.partial")   # (any name may be NAME_MAX long)
    try:
        file = None
        # (`path`, not `target`: /dev/stdout into a pipe resolves to a name that is no file, /proc/ID/fd/pipe:[N])
        if not os.path.exists(path) or os.path.isfile(path) and os.access(path, os.W_OK):
            with contextlib.suppress(PermissionError):
                file = open(partial, "wb")
        if file is None:
            with open(path, "wb") as file:
                write(file)
            return
        try:
            with file:
                write(file)
            if os.path.exists(target):
                shutil.copymode(target, partial)
            os.replace(partial, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(partial)
            raise
    except OSError as err:
        raise UsageError(f"{flag} {path}: cannot write it ({err.strerror or err})") from None


def write_output(data: str | bytes, out: str | None) -> None:
    if out is not None:
        write_whole(out, "-o", lambda file: file.write(data.encode() if isinstance(data, str) else data))
        return
    if isinstance(data, str):
        sys.stdout.write(data)
        return
    if sys.stdout.isatty():
        raise UsageError("this output is binary; write it to a file with -o FILE")
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def cmd_compile(args: argparse.Namespace) -> int:
    """Stops (runtime/pipeline.py STOPS): `ast` after checking; `stablehlo`, `mlirbc`, `artifact` after the
    passes (`--guards` adds the guard pass; `--passes` replaces the list); `guarded` the same with every
    guard kind unless `--guards` says which; `hlo` what XLA makes of it (optimized HLO)."""
    from arrc.passes.guards import GuardOptions, parse_kinds
    from arrc.runtime.pipeline import apply_passes, compile_module, parse_pass_list, passes_for
    module, sources = load_module(args.file, args.werror)
    print_diagnostics(module.warnings, sources)
    if args.emit == "ast":
        from arrc.compiler.ast import dump
        write_output(dump(module._program.module) + "\n", args.output)
        return EXIT_OK
    fn = entry_function(module, args.entry, args.file, "compile")
    shapes = parse_shapes(args.shape)
    unknown = sorted(set(shapes) - set(fn.shape_vars))
    if unknown:
        have = ", ".join(fn.shape_vars) or "none"
        raise UsageError(f"`{fn.name}{fn.signature}` has no shape variable `{unknown[0]}` (shape variables: {have})")
    mesh_axes, shards = parse_mesh(args.mesh, args.shard, args.devices)
    if mesh_axes:
        return compile_sharded(args, fn, shapes, mesh_axes, shards)
    lowered = fn.lower(*fn.arg_types_for(shapes))
    print_diagnostics([d for d in lowered.warnings if d not in module.warnings], sources)
    kinds = parse_kinds(",".join(args.guards)) if args.guards else \
        frozenset(KINDS) if args.emit == "guarded" else frozenset()
    options = GuardOptions(kinds, args.guard_scope)
    try:
        passes = passes_for(options) if args.passes is None else parse_pass_list(args.passes, options)
    except ValueError as err:
        raise UsageError(f"--passes: {err}") from None
    from arrc.passes.linalg import LowerLinalg
    # linear algebra as JAX lowers it there: `gpu` is CUDA's (cuSOLVER); a module run by arrc is lowered again
    # for the device it runs on (runtime/pipeline.py)
    if args.target == "tpu":        # (a gpu may be CUDA or ROCm: checked when it runs, runtime/pipeline.py)
        from arrc.passes.verify_backend import VerifyBackend
        passes = list(passes) + [VerifyBackend("tpu")]
    passes = list(passes) + [LowerLinalg({"gpu": "cuda"}.get(args.target, args.target))]
    apply_passes(lowered.module, lowered.context, passes, sources)
    if args.emit == "hlo":
        if args.target != "cpu":
            raise UsageError("--emit hlo compiles for this machine: use it with --target cpu")
        loaded = compile_module(lowered.module, lowered.context, sources, [], "cpu").executable.loaded
        write_output(loaded.hlo_modules()[0].to_string(), args.output)
        return EXIT_OK
    from arrc.passes.rewrite import retarget_callbacks
    try:
        with lowered.context:
            retarget_callbacks(lowered.module, args.target)
    except ValueError as err:
        raise UsageError(f"--target {args.target}: {err}") from None
    write_output(emit(lowered, args.emit), args.output)
    return EXIT_OK


def compile_sharded(args, fn, shapes: dict, mesh_axes: dict, shards: dict) -> int:
    """`arrc compile --mesh ... --shard ...`: the SPMD program as JAX lowers it, its StableHLO with the
    shardings, its `main` marked for `arrc run` as a module on one device is (`--emit stablehlo`, arrc/sharding.py
    `Sharded.module_text`), or XLA's partitioned HLO, collectives included (`--emit hlo`)."""
    import jax
    if args.emit not in ("stablehlo", "hlo"):
        raise UsageError(f"--mesh with --emit {args.emit}: a sharded program is emitted as stablehlo (with its "
                         f"shardings) or hlo (partitioned by XLA)")
    if args.guards or args.passes is not None:
        raise UsageError("--mesh with --guards or --passes: the sharded program is emitted as JAX lowers it, "
                         "without arrc's passes (its guards are added when it runs, docs/sharding.md)")
    use_virtual_devices(args.devices)
    types = fn.arg_types_for(shapes)
    params = [name for name, _, _ in fn._sig.params]
    sharded = sharded_function(fn, params, args.mesh, mesh_axes, shards, args.target)
    structs = [jax.ShapeDtypeStruct(t.concrete_shape, jax.random.key(0).dtype if t.dtype.is_key else t.dtype.np)
               for t in types]
    lowered = sharded.lower(*structs)
    write_output(lowered.compile().as_text() if args.emit == "hlo" else sharded.module_text(lowered), args.output)
    return EXIT_OK


# ---- run -------------------------------------------------------------------------------------------

_WORDS = {"nan": float("nan"), "inf": float("inf"), "true": True, "false": False, "True": True, "False": False}


def parse_literal(text: str):
    """A number, `true`/`false`, `nan`/`inf`, or a nested list of them (Python literal syntax; a complex
    number, `1+2j`, for a module from elsewhere)."""
    def convert(node):
        if isinstance(node, ast.Constant) and type(node.value) in (int, float, bool, complex):
            return node.value
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            real, imag = convert(node.left), convert(node.right)
            if type(real) in (int, float) and type(imag) is complex:
                return real + imag if isinstance(node.op, ast.Add) else real - imag
        if isinstance(node, ast.Name) and node.id in _WORDS:
            return _WORDS[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            value = convert(node.operand)
            if type(value) in (int, float, complex):
                return -value if isinstance(node.op, ast.USub) else value
        if isinstance(node, (ast.List, ast.Tuple)):
            return [convert(e) for e in node.elts]
        raise ValueError
    try:
        return convert(ast.parse(text.strip(), mode="eval").body)
    except (SyntaxError, ValueError, RecursionError):
        raise ValueError(f"cannot read {text!r}: expected a number, true/false, nan/inf "
                         f"or a nested list such as [1, 2, 3]") from None


# ---- argument files (`--arg x=@file.npy`) -----------------------------------------------------------
# A file is untrusted input: only a regular file is opened, its header is read (and bounded) before its
# data, the data may not be larger than the parameter can hold, and nothing is unpickled.

NPY_MAGIC = b"\x93NUMPY"
NPY_HEADER_MAX = 1 << 16        # numpy itself refuses headers over 10,000 characters


@dataclass(frozen=True)
class ArgFile:
    """`--arg NAME=@PATH`, read once the parameter's type (how many bytes it can take) is known; `member`:
    the array of a .npz archive of several (`expand_tree_files`)."""
    path: str
    member: str | None = None


def capacity(t: ArrayType | None) -> int | None:
    """How many elements an argument of type `t` has, where its shape is concrete (else None: any, up to what
    one array may have on this machine; also for an argument that names no parameter). Counted in elements,
    not bytes: a file of another dtype is then refused for its dtype, with the advice a call gives. A key is
    its two u32 words."""
    if t is None or not all(d.is_const for d in t.shape):
        return None
    return math.prod(d.value for d in t.shape) * (2 if t.dtype.is_key else 1)


def read_npy_header(stream, path: str) -> tuple[tuple, bool, np.dtype, int]:
    """(shape, Fortran order, dtype, offset of the data) from at most NPY_HEADER_MAX bytes of `stream`."""
    head = io.BytesIO(stream.read(NPY_HEADER_MAX))
    fmt = np.lib.format
    try:
        version = fmt.read_magic(head)
        if version not in ((1, 0), (2, 0)):
            raise ValueError(f"format version {version[0]}.{version[1]}; arrc reads 1.0 and 2.0")
        with warnings.catch_warnings():     # a header NumPy can read but warns about (Python 2's `4L`)
            warnings.simplefilter("ignore")
            shape, fortran, dtype = (fmt.read_array_header_1_0 if version == (1, 0)
                                     else fmt.read_array_header_2_0)(head)
        if any(d < 0 for d in shape):
            raise ValueError(f"negative dimension in shape {shape}")
    except Exception as err:            # noqa: BLE001  numpy's header parser raises several kinds on bad input
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise UsageError(f"{path} is not a valid .npy file ({reason})") from None
    return shape, fortran, dtype, head.tell()


def read_array(stream, size: int, path: str, param: str, t: ArrayType | None) -> np.ndarray:
    """The .npy array that `stream` holds (`size` bytes, header included), for the parameter `param` of
    type `t`: the header is checked (dtype, and bytes against what `t` can hold) before any data are read."""
    shape, fortran, dtype, offset = read_npy_header(stream, path)
    if dtype.hasobject:
        raise UsageError(f"{path} holds Python objects (dtype {dtype}); an argument file holds a bool or "
                         f"numeric array")
    dt = dtype_of_numpy(dtype.newbyteorder("="))
    if dt is None and t is not None and t.dtype.name == "bf16" and dtype.kind == "V" and dtype.itemsize == 2:
        dt, dtype = t.dtype, t.dtype.np       # NumPy saves ml_dtypes' bfloat16 as 2-byte void ("|V2")
    if dt is None and t is not None and t.dtype.np == dtype.newbyteorder("="):
        dt = t.dtype                          # complex, for a module from elsewhere
    if dt is None:
        raise UsageError(f"{path} holds dtype {dtype}, which is not an arr dtype (bool, i8 ... i64, u8 ... u64, "
                         f"f16, bf16, f32, f64)")
    declared = f"{dt.name}[{', '.join(map(str, shape))}]" if shape else dt.name
    nbytes = math.prod(shape) * dtype.itemsize
    elements = capacity(t)
    if elements is not None and math.prod(shape) > elements:
        raise UsageError(f"{path} declares {declared} ({math.prod(shape):,} elements), more than parameter "
                         f"`{param}: {t}` holds ({elements:,})")
    if nbytes > MAX_ARRAY_BYTES:
        raise UsageError(f"{path} declares {declared} ({nbytes:,} bytes), more than one array may have on this "
                         f"machine ({MAX_ARRAY_BYTES:,} bytes)")
    if size - offset != nbytes:
        problem = "is truncated" if size - offset < nbytes else "has bytes after its data"
        raise UsageError(f"{path} {problem}: its header declares {declared} ({nbytes:,} bytes of data), "
                         f"{size - offset:,} bytes follow it")
    stream.seek(offset)
    data = bytearray(nbytes)
    if stream.readinto(data) != nbytes or stream.read(1):
        raise UsageError(f"{path} changed while it was read")
    array = np.frombuffer(data, dtype).reshape(shape, order="F" if fortran else "C")
    if not dtype.isnative:              # the file's byte order is a storage detail: arguments are native
        array = array.byteswap().view(dtype.newbyteorder("="))
    if dt.is_bool:                      # a byte other than 0 or 1 is true, as numpy reads it
        array = array.view(np.uint8) != 0
    return array if array.flags.c_contiguous else array.copy(order="C")      # (ascontiguousarray makes 0-d 1-d)


def read_npz(file, path: str, param: str, t: ArrayType | None, member: str | None = None) -> np.ndarray:
    """The one array of a `.npz` file (or its array `member`): its member's declared size and header are
    checked before any of its data are decompressed, and zipfile stops at the declared size (and checks
    the CRC there)."""
    try:
        with zipfile.ZipFile(file) as archive:
            members = [m for m in archive.infolist() if not m.is_dir()]
            if member is not None:
                members = [m for m in members if npz_key(m.filename) == member]
            elif len(members) != 1:
                names = ", ".join(repr(m.filename[:80]) for m in members[:5]) + (", ..." if len(members) > 5 else "")
                raise UsageError(f"{path} holds {len(members)} arrays{f' ({names})' if members else ''}; "
                                 f"an argument file holds one (save it with numpy.save as a .npy file)")
            member = members[0]
            with archive.open(member) as stream:
                where = f"{path} member {member.filename[:80]!r}"
                return read_array(stream, member.file_size, where, param, t)
    except UsageError:
        raise
    except Exception as err:            # noqa: BLE001  zipfile raises many kinds on a corrupt archive
        raise UsageError(f"{path} is not a valid .npz file ({first_line(err)})") from None


def npz_key(filename: str) -> str:
    """The key `numpy.savez` stored a member under (its file name without `.npy`)."""
    return filename[:-4] if filename.endswith(".npy") else filename


def npz_keys(path: str) -> list[str]:
    """The keys of the arrays in a .npz archive (a usage error if it is not one)."""
    try:
        with zipfile.ZipFile(path) as archive:
            return [npz_key(m.filename) for m in archive.infolist() if not m.is_dir()]
    except Exception as err:            # noqa: BLE001  zipfile raises many kinds on a corrupt archive
        reason = getattr(err, "strerror", None) or (str(err).splitlines() or [type(err).__name__])[0]
        raise UsageError(f"{path} is not a readable .npz file ({reason})") from None


def load_array(path: str, param: str = "x", t: ArrayType | None = None, member: str | None = None) -> np.ndarray:
    """An array from a `.npy` file, or from a `.npz` file holding exactly one array, for the parameter
    `param` of type `t` (None: any type). Anything else (not a regular file, corrupt, truncated, object
    arrays, more data than `t` can hold) is a usage error, raised before the data are read."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))     # a FIFO must not block the open
    except FileNotFoundError:
        raise UsageError(f"no such file: {path}") from None
    except OSError as err:
        raise UsageError(f"cannot open {path}: {err.strerror or err}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise UsageError(f"{path} is {kind}; --arg NAME=@FILE reads a .npy or .npz file")
    with os.fdopen(fd, "rb") as file:
        try:
            magic = file.read(len(NPY_MAGIC))
            file.seek(0)
            if magic == NPY_MAGIC:
                return read_array(file, info.st_size, path, param, t)
            if magic.startswith(b"PK"):
                return read_npz(file, path, param, t, member)
        except OSError as err:
            raise UsageError(f"cannot read {path}: {err.strerror or err}") from None
    what = "it is empty" if not magic else "it does not start like one"
    hint = ""
    if Path(path).suffix not in (".npy", ".npz"):      # e.g. `x=@p.arr`: say what the file should be
        values = f", or write its values: {example_arg(param, t)}" if t is not None else ""
        hint = f"; --arg {param}=@FILE reads an array saved with numpy.save(FILE, array){values}"
    raise UsageError(f"{path} is not a NumPy .npy or .npz file ({what}){hint}")


@dataclass(frozen=True)
class Unreadable:
    """`--arg NAME=TEXT` whose TEXT is no literal: reported once the parameter's type is known, so the
    message can say what to write instead."""
    text: str
    reason: str


# A parameter name as JAX records it in an export: the argument's path in the function's pytree, each
# key as Python's repr writes it (`['a=b']`, `["it's"]`, `['a\\b']`).
_QUOTED = r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\""
JAX_NAME = re.compile(rf"[^\W\d]\w*(?:\[(?:{_QUOTED}|\d+)\]|\.\w+)*")
_PATH_PART = re.compile(rf"^([^\W\d]\w*)|\[({_QUOTED})\]|\[(\d+)\]|\.(\w+)")
_ARG_NAME = re.compile(rf"\s*({JAX_NAME.pattern})\s*=")


def path_parts(name: str) -> tuple[str, ...]:
    """`params['dense'][0].w` -> ('params', 'dense', '0', 'w'); a quoted key as the string it spells."""
    return tuple(_unquoted(m[2]) if m[2] is not None else next(g for g in m.groups() if g is not None)
                 for m in _PATH_PART.finditer(name))


def _unquoted(key: str) -> str:
    """`'a\\\\b'` -> `a\\b`; a key no repr writes (`'\\x'`, from an archive's names) as it stands."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return ast.literal_eval(key)
        except (ValueError, SyntaxError):
            return key[1:-1]


def expand_tree_files(values: dict[str, object], names: list[str]) -> dict[str, object]:
    """`--arg params=@p.npz` where `params` is no parameter but the root of several (`params['b']`,
    `params['w']`, as JAX names a pytree's leaves): each array of the archive is the parameter its key
    leads to, the rest of the path written with `/` or `.` between keys (`dense/kernel`, as Flax's
    `flatten_dict(..., sep="/")` makes them) or as JAX writes it (`['dense']['kernel']`)."""
    out: dict[str, object] = {}
    paths = {n: path_parts(n) for n in names}
    for name, value in values.items():
        under = {parts[1:]: n for n, parts in paths.items() if parts[:1] == (name,) and n != name}
        if name in names or not isinstance(value, ArgFile) or not under:
            out[name] = value
            continue
        for key in npz_keys(value.path):
            parts = path_parts(name + key)[1:] if key.startswith(("[", ".")) else tuple(re.split(r"[/.]", key))
            if parts not in under:
                raise UsageError(f"{value.path}: no parameter {name}[...] for its array {key!r}; "
                                 f"the parameters under {name} are {', '.join(sorted(under.values()))}")
            if under[parts] in values or under[parts] in out:      # (which one wins would be the order's)
                raise UsageError(f"--arg {under[parts]} is given twice (once in --arg {name}=@{value.path})")
            out[under[parts]] = ArgFile(value.path, key)
    return out


def positional_aliases(values: dict[str, object], names: list[str]) -> dict[str, object]:
    """`arg0`, `arg1`, ... stand for the parameters by position whatever their recorded names (arrc's
    own modules name theirs as the source does; the positional names worked before the names did)."""
    out = {}
    for name, value in values.items():
        if name not in names and name.startswith("arg") and name[3:].isdigit() and int(name[3:]) < len(names):
            name = names[int(name[3:])]
            if name in values or name in out:
                raise UsageError(f"--arg {name} is given twice (once as arg{names.index(name)})")
        out[name] = value
    return out


def parse_mesh(mesh: str | None, shards: list[str], devices: int | None) -> tuple[dict, dict]:
    """`--mesh data=4,model=2` as {axis: size} and each `--shard x=data,_` as {parameter: spec text}."""
    if devices is not None and devices < 1:
        raise UsageError(f"--devices {devices}: give a positive number of devices")
    from arrc.sharding import MAX_VIRTUAL_DEVICES
    if devices is not None and devices > MAX_VIRTUAL_DEVICES:
        raise UsageError(f"--devices {devices}: a process makes at most {MAX_VIRTUAL_DEVICES} virtual CPU devices; "
                         f"for a larger mesh, run several processes (--coordinator, docs/sharding.md)")
    if mesh is None:
        if shards:
            raise UsageError("--shard needs --mesh (e.g. --mesh data=8 --shard x=data,_)")
        return {}, {}
    axes: dict = {}
    for part in (p.strip() for p in mesh.split(",") if p.strip()):
        name, eq, size = part.partition("=")
        if not eq or not name.strip().isidentifier() or not size.strip().isdigit() or int(size) < 1:
            raise UsageError(f"--mesh {mesh}: write each axis as NAME=SIZE, e.g. --mesh data=4,model=2")
        if name.strip() in axes:
            raise UsageError(f"--mesh {mesh}: the axis `{name.strip()}` is given twice")
        axes[name.strip()] = int(size)
    specs: dict = {}
    for item in shards:
        name, eq, spec = item.partition("=")
        if not eq or not name.strip():
            raise UsageError(f"--shard {item}: write it as PARAMETER=SPEC, a mesh axis or _ per dimension "
                             f"(e.g. --shard x=data,_)")
        for part in (p.strip() for p in spec.split(",")):
            if part not in ("_", "") and part not in axes:
                raise UsageError(f"--shard {item}: `{part}` is not an axis of the mesh ({', '.join(axes)})")
        if name.strip() in specs:
            raise UsageError(f"--shard {name.strip()} is given twice")
        specs[name.strip()] = spec
    return axes, specs


def parse_run_args(items: list[str]) -> dict[str, object]:
    """`["x=@data.npy", "y=[1, 2]", "n=3"]` -> arguments by parameter name (files as `ArgFile`s,
    read by `load_arg_files` once the parameters' types are known; text that is no literal as
    `Unreadable`, refused by `check_literals`)."""
    values: dict[str, object] = {}
    for item in items:
        named = _ARG_NAME.match(item)          # (a key's `=` is the name's: `--arg "p['a=b']=[1, 2]"`)
        if not named:
            raise UsageError(f"--arg {item!r}: expected NAME=VALUE, e.g. --arg x='[1, 2, 3]' or --arg x=@x.npy")
        name, value = named[1], item[named.end():]
        if name in values:
            raise UsageError(f"--arg {name} is given twice")
        if value.startswith("@"):
            if not value[1:].strip():
                raise UsageError(f"--arg {name}=@: the file name is missing after @ (e.g. --arg {name}=@{name}.npy)")
            values[name] = ArgFile(os.path.expanduser(value[1:]))      # (no shell expands the ~ of `x=@~/a.npy`)
            continue
        try:
            values[name] = parse_literal(value)
        except ValueError as err:
            values[name] = Unreadable(value, str(err))
    return values


def load_arg_files(values: dict[str, object], types: dict[str, ArrayType]) -> dict[str, object]:
    """`values` with each `ArgFile` read, bounded by the type of its parameter in `types`."""
    bad = next((n for n, v in values.items() if isinstance(v, Unreadable)), None)
    if bad is not None:
        raise UsageError(f"--arg {bad}: {values[bad].reason}")
    return {name: load_array(v.path, name, types.get(name), v.member) if isinstance(v, ArgFile) else v
            for name, v in values.items()}


# ---- `--arg` values checked against the signature ---------------------------------------------------
# The API's messages speak of Python values (`kind int64`); on the command line, the message names the
# parameter, its type, and what to write instead.

EXAMPLE_SIZE = 2                # each shape variable in an example `--arg`


def example_value(t: ArrayType) -> str | None:
    """A literal of type `t` for an example `--arg` (shape variables as EXAMPLE_SIZE), None where one
    would be too long (an array file is the example then)."""
    shape = [d.subs({v: EXAMPLE_SIZE for v in d.variables}) for d in t.shape]
    if not all(d.is_const and d.value > 0 for d in shape) or math.prod(d.value for d in shape) > 12:
        return None
    count = iter(range(1, 13))

    def leaf() -> str:
        i = next(count)
        if t.dtype.is_bool:
            return "true" if i % 2 else "false"
        return f"{i}.0" if t.dtype.is_float else str(i)

    def build(dims) -> str:
        if not dims:
            return leaf()
        return "[" + ", ".join(build(dims[1:]) for _ in range(dims[0].value)) + "]"
    return "0" if t.dtype.is_key and not shape else build(shape)


def example_arg(name: str, t: ArrayType) -> str:
    """`--arg x='[1.0, 2.0]'` for `x: f32[n]`, `--arg b=true`, `--arg x=@x.npy` for a large array."""
    value = example_value(t)
    if value is None:
        return f"--arg {name}=@{name}.npy"
    return f"--arg {name}={value}" if t.rank == 0 else f"--arg {name}='{value}'"


def takes(t: ArrayType) -> str:
    """What a value of `t` is made of, as the user writes it."""
    if t.dtype.is_key:
        return "a seed (an integer) or the keys' u32 words"
    if t.dtype.is_bool:
        return "true or false"
    if t.dtype.is_int:
        return "integers" if t.rank else "an integer"
    if t.dtype.kind == "complex":
        return "complex numbers (1+2j)" if t.rank else "a complex number (1+2j)"
    return "numbers" if t.rank else "a number"


def nested_shape(value) -> tuple[int, ...] | None:
    """The shape of a nested list (a scalar: ()), None for a ragged one."""
    if not isinstance(value, list):
        return ()
    inner = [nested_shape(v) for v in value]
    if any(s is None for s in inner) or len(set(inner)) > 1:
        return None
    return (len(value), *(inner[0] if inner else ()))


def leaves(value):
    if isinstance(value, list):
        for v in value:
            yield from leaves(v)
    else:
        yield value


def wrong_leaf(value, t: ArrayType):
    """The first element of the literal `value` that a `t` cannot hold (1 for a bool, 2.5 or true for an
    integer, true for a float), or None."""
    for x in leaves(value):
        if t.dtype.is_bool and not isinstance(x, bool):
            return x
        if t.dtype.is_int and not (isinstance(x, int) and not isinstance(x, bool)):
            return x
        if t.dtype.is_float and (isinstance(x, bool) or isinstance(x, complex)):
            return x
        if t.dtype.kind == "complex" and isinstance(x, bool):
            return x
    return None


def word(x) -> str:
    """A literal element as the user wrote it (`true`, `2.5`)."""
    return ("true" if x else "false") if isinstance(x, bool) else repr(x)


def check_literals(values: dict[str, object], types: dict[str, ArrayType]) -> None:
    """A usage error for the first `--arg` literal that cannot be its parameter's value: no literal at all,
    a ragged list, or elements of the wrong kind (`b=1` for a bool). Shapes are the API's to check."""
    for name, value in values.items():
        t = types.get(name)
        if t is None or isinstance(value, ArgFile):
            continue
        param = f"`{name}: {t}`"
        if isinstance(value, Unreadable):
            raise UsageError(f"--arg {name}: cannot read {value.text!r}; {param} takes {takes(t)} "
                             f"(e.g. {example_arg(name, t)})")
        if t.dtype.is_key:
            continue
        if nested_shape(value) is None:
            raise UsageError(f"--arg {name}: the nested list is ragged (its rows differ in length); {param} "
                             f"takes a rectangular one (e.g. {example_arg(name, t)})")
        bad = wrong_leaf(value, t)
        if bad is not None:
            raise UsageError(f"--arg {name}: {param} takes {takes(t)}, not {word(bad)} (e.g. {example_arg(name, t)})")


def check_parameters(fn: arrc.Function, values: dict[str, object]) -> None:
    """A usage error, with the signature and an example, for an `--arg` that names no parameter of `fn`
    or a parameter without one."""
    names = [name for name, _, _ in fn._sig.params]
    unknown = [n for n in values if n not in names]
    if unknown:
        have = ", ".join(names) or "none"
        raise UsageError(f"`{fn.name}{fn.signature}` has no parameter `{unknown[0]}`{did_you_mean(unknown[0], names)}"
                         f" (parameters: {have})")
    missing = [(n, t) for n, t, _ in fn._sig.params if n not in values and n not in fn._sig.defaults]
    if missing:
        example = " ".join(example_arg(n, t) for n, t in missing)
        raise UsageError(f"`{fn.name}{fn.signature}` needs --arg {', '.join(n for n, _ in missing)}: "
                         f"e.g. {example}")


def parameter_types(fn: arrc.Function) -> dict[str, ArrayType]:
    """The declared parameter types of `fn` (shape variables left symbolic)."""
    return {name: t for name, t, _ in fn._sig.params}


@dataclass
class RunResult:
    """What one call produced: NumPy results (keys as their u32 words, `[..., 2]`), the time of the first
    call in seconds, and which results are keys."""
    results: list[np.ndarray]
    times: dict[str, float] = field(default_factory=dict)
    keys: frozenset = frozenset()


def key_arguments(values: dict[str, object], types: dict[str, ArrayType]) -> dict[str, object]:
    """`--arg k=42` for a `key` parameter is `key(42)`; a list is the keys' u32 words (`--arg k='[0, 42]'`,
    as `jax.random.key_data` prints them); a file holds the words as a uint32 array."""
    out = dict(values)
    for name, value in values.items():
        t = types.get(name)
        if t is None or not t.dtype.is_key:
            continue
        if isinstance(value, int) and not isinstance(value, bool):
            try:
                out[name] = arrc.key(value)
            except OverflowError as err:
                raise UsageError(f"--arg {name}: {err}") from None
        elif isinstance(value, list):
            words = np.asarray(value)
            if words.shape[-1:] != (2,):
                raise UsageError(_key_argument_help(name, f"{list(words.shape)} words"))
            if words.dtype.kind not in "iu" or words.size and (words.min() < 0 or words.max() > 2 ** 32 - 1):
                raise UsageError(f"--arg {name}: key words are integers in 0..{2 ** 32 - 1}")
            out[name] = words.astype(np.uint32)
        elif not isinstance(value, np.ndarray):         # (a file's words are checked as any array argument)
            raise UsageError(_key_argument_help(name, str(value).lower() if isinstance(value, bool) else repr(value)))
    return out


def _key_argument_help(name: str, given: str) -> str:
    """The usage error of a `key` parameter given something else (the API's message names Python calls)."""
    return (f"--arg {name}: a key is a seed (--arg {name}=42), its two u32 words (--arg {name}='[0, 42]', "
            f"as jax.random.key_data prints them; shape [..., 2] for keys) or a .npy file of them "
            f"(--arg {name}=@words.npy), not {given}")


def check_device(device: str) -> None:
    """A usage error unless PJRT has a `device` backend here."""
    if device == "cpu":
        return
    from arrc.runtime.pjrt import DeviceUnavailable, backend
    try:
        backend(device)
    except DeviceUnavailable as err:
        raise UsageError(f"--device {device}: {err}") from None


def use_virtual_devices(n: int | None) -> None:
    """`--devices N`: N virtual CPU devices, set before JAX's CPU backend starts (docs/sharding.md)."""
    if n is not None:
        import jax
        jax.config.update("jax_num_cpu_devices", n)


def sharded_function(fn, params: list, mesh_text: str, mesh_axes: dict, shards: dict, device: str):
    """`fn` as one SPMD program over the mesh `--mesh` describes, split as `--shard` says (`run`, `compile`)."""
    unknown = sorted(set(shards) - set(params))
    if unknown:
        raise UsageError(f"--shard {unknown[0]}=...: `{fn.name}` has no parameter `{unknown[0]}` "
                         f"(its parameters: {', '.join(params)})")
    types = parameter_types(fn)
    for name, spec in shards.items():
        given = len(spec.split(",")) if spec.strip() else 0       # (as arrc/sharding.py partition_spec counts)
        if given > types[name].rank:
            raise UsageError(f"--shard {name}={spec} names {plural(given, 'dimension')}, and `{name}: {types[name]}` "
                             f"has {types[name].rank or 'none'}: a mesh axis or _ per dimension, at most")
    from arrc.runtime.pjrt import DeviceUnavailable
    try:
        mesh = arrc.mesh(device=device, **mesh_axes)
    except DeviceUnavailable as err:        # (`compile --target gpu` on a machine without one)
        raise UsageError(f"--mesh {mesh_text}: {err}; a sharded program is lowered over the devices it runs "
                         f"on") from None
    except ValueError as err:
        hint = "; --devices N makes N virtual CPU devices" if device == "cpu" else ""
        raise UsageError(f"--mesh {mesh_text}: {str(err).split(' (for virtual')[0]}{hint}") from None
    try:
        return fn.sharded(mesh, [shards.get(name) for name in params])
    except TypeError as err:
        raise UsageError(f"--shard: {err}") from None


@contextlib.contextmanager
def _native_stdout_to_stderr(on: bool):
    """Meanwhile, what native code writes to standard output goes to standard error (gloo prints its
    connections there at a cluster's first collective), so that standard output holds the results only."""
    if not on:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def execute(fn, kwargs: dict, positional: list | None = None) -> RunResult:
    """Call `fn` once through the Python API (specialize, compile, run, with print/assert effects) on
    its module's device. `times["first_call"]` is the wall time of that call, compilation included.
    `positional`: the parameter names in order, for a callable that takes its arguments by position (a
    sharded function)."""
    from arrc.runtime.call import interruptible

    def call():             # on a helper thread, so that Ctrl-C stops the wait (runtime/call.py)
        out = fn(*(kwargs[name] for name in positional)) if positional is not None else fn(**kwargs)
        return list(out) if isinstance(out, tuple) else [out]
    start = time.perf_counter()
    results = interruptible(call)
    elapsed = time.perf_counter() - start
    keys = [host_keys(r) for r in results]
    return RunResult([host_value(r) if k is None else key_words(k) for r, k in zip(results, keys)],
                     {"first_call": elapsed}, frozenset(i for i, k in enumerate(keys) if k is not None))


def dtype_name(a: np.ndarray) -> str:
    """The arr name of a NumPy dtype (`f32`, `i64`, `bool`, ...)."""
    dt = dtype_of_numpy(a.dtype)
    return dt.name if dt is not None else str(a.dtype)


def _json_float(x) -> float | str:
    if np.isnan(x):
        return "nan"
    if np.isinf(x):
        return "inf" if x > 0 else "-inf"
    return float(str(x))        # shortest decimal that reads back as the same value of x's dtype


def json_result(a: np.ndarray) -> dict:
    """`{"dtype": "f32", "shape": [2], "value": [1.0, "nan"]}` (non-finite floats as strings); a complex
    element (a module from elsewhere) as its `[real, imag]`."""
    dt = dtype_of_numpy(a.dtype)
    if np.iscomplexobj(a):
        parts = np.stack([a.real, a.imag], axis=-1)
        flat = np.array([_json_float(x) for x in parts.reshape(-1)] + [None], dtype=object)[:-1]
        value = flat.reshape(parts.shape).tolist()
    elif dt is not None and dt.is_float:
        wide = a.astype(np.float64 if dt.bits == 64 else np.float32)
        flat = np.array([_json_float(x) for x in wide.reshape(-1)] + [None], dtype=object)[:-1]
        value = flat.reshape(a.shape).tolist()
    else:
        value = a.tolist()
    return {"dtype": dtype_name(a), "shape": list(a.shape), "value": value}


def format_results(results: list[np.ndarray], fmt: str = "text", keys: frozenset = frozenset()) -> str:
    """Results NumPy-style, one per line, or as JSON (`{"results": [...]}`; keys (`keys`: their
    positions) with dtype "key", their shape, and their u32 words as the value)."""
    if fmt == "json":
        items = [json_result(r) for r in results]
        for i in keys:
            items[i] = {"dtype": "key", "shape": list(results[i].shape[:-1]), "value": results[i].tolist()}
        return json.dumps({"results": items}) + "\n"
    return "".join(text_result(r) + "\n" for r in results)


def text_result(a: np.ndarray) -> str:
    """NumPy's text of a result, with bools spelt as arr spells them: `true`, `[false  true]` (right-aligned
    in columns, as NumPy aligns `[False  True]`)."""
    if a.dtype != np.bool_:
        return str(a)
    if a.ndim == 0:
        return "true" if a else "false"
    width = 5 if not a.all() else 4
    return np.array2string(a, separator=" ",
                           formatter={"bool": lambda x: ("true" if x else "false").rjust(width)})


def format_times(times: dict[str, float], check: float) -> str:
    return (f"time: check {check * 1e3:.1f} ms, first call {times['first_call'] * 1e3:.1f} ms "
            f"(specialize, compile and run)\n")


def run_stablehlo(args: argparse.Namespace, kwargs: dict) -> RunResult:
    """`arrc run in.mlir`: StableHLO from elsewhere, arguments by JAX's recorded names or by position
    (`--arg arg0=...`)."""
    from arrc.runtime.foreign import ForeignFunction
    require_file(args.file, "a StableHLO file (.mlir or .mlirbc)")
    check_device(args.device)
    from arrc.passes.guards import parse_kinds
    fn = ForeignFunction(args.file, parse_kinds(",".join(args.guards or ())), args.guard_scope, args.device)
    if args.entry not in ("main", fn.name, fn.arr_name):          # (it was ignored: `main` ran)
        raise UsageError(f"{args.file} has one function to run, `{fn.arr_name or fn.name}`: --entry {args.entry} "
                         f"names none (it chooses among an .arr file's functions)")
    kwargs = expand_tree_files(positional_aliases(kwargs, fn.param_names), fn.param_names)
    unknown = sorted(set(kwargs) - set(fn.param_names))
    missing = [n for n in fn.param_names if n not in kwargs]
    if unknown or missing:
        root = (path_parts(missing[0]) or (missing[0],))[0] if missing else None
        tree = [n for n in fn.param_names if path_parts(n)[:1] == (root,)]
        hint = (f" (or all {len(tree)} under {root} from one .npz archive: --arg {root}=@FILE.npz)"
                if not unknown and len(tree) > 1 else "")
        raise UsageError(f"{args.file} takes arguments {', '.join(fn.param_names) or '(none)'}; "
                         + (f"unknown: {unknown[0]}" if unknown else f"missing: --arg {missing[0]}=...{hint}"))
    types = {name: ArrayType(dt, tuple(Dim.const(d) for d in shape)) for name, (dt, shape) in
             zip(fn.param_names, fn.params)}
    check_literals(kwargs, types)
    kwargs = load_arg_files(kwargs, types)
    from arrc.runtime.call import interruptible
    from arrc.runtime.pjrt import as_numpy

    def call():
        return [as_numpy(r) for r in fn([kwargs[n] for n in fn.param_names])]
    start = time.perf_counter()
    try:
        results = interruptible(call)
    except TypeError as err:
        raise UsageError(str(err)) from None
    return RunResult(results, {"first_call": time.perf_counter() - start})


def _run_file(args: argparse.Namespace, kwargs: dict, mesh_axes: dict, shards: dict):
    """(RunResult, seconds to check) of `arrc run` of an arr file, or of a StableHLO module."""
    t0 = time.perf_counter()
    if is_stablehlo(args.file):
        if mesh_axes:
            raise UsageError("--mesh runs an arr function: a StableHLO module is run on one device")
        return run_stablehlo(args, kwargs), 0.0
    check_device(args.device)
    module, sources = load_module(args.file, guards=args.guards, scope=args.guard_scope, device=args.device)
    check_s = time.perf_counter() - t0
    print_diagnostics(module.warnings, sources)
    fn = entry_function(module, args.entry, args.file, "run")
    types = parameter_types(fn)
    check_parameters(fn, kwargs)
    check_literals(kwargs, types)
    values = key_arguments(load_arg_files(kwargs, types), types)
    if mesh_axes:
        sharded = sharded_function(fn, list(types), args.mesh, mesh_axes, shards, args.device)
        with _native_stdout_to_stderr(args.coordinator is not None):
            return execute(sharded, values, list(types)), check_s
    return execute(fn, values), check_s


def cmd_run(args: argparse.Namespace) -> int:
    if args.no_cache:
        from arrc.compiler.cache import disable
        disable()
    kwargs = parse_run_args(args.arg)
    if args.out is not None and not args.out.endswith(".npz"):
        out = Path(args.out)            # (`--out ''`, `.` or `/` has no name to give a suffix: a file in it)
        example = out.with_suffix(".npz") if out.name not in ("", "..") else out / "results.npz"
        raise UsageError(f"--out {args.out}: the results are saved as a NumPy .npz archive; give a name ending "
                         f"in .npz (e.g. --out {example})")
    if args.out is not None:
        require_writable(args.out, "--out")
    mesh_axes, shards = parse_mesh(args.mesh, args.shard, args.devices)
    if args.coordinator is not None:    # one process of several (docs/sharding.md), before JAX's backends start
        if not mesh_axes or args.num_processes is None or args.process_id is None:
            raise UsageError("--coordinator HOST:PORT needs --num-processes N, --process-id I and --mesh (every "
                             "process runs the same command with its own --process-id)")
        try:
            arrc.distributed.initialize(args.coordinator, args.num_processes, args.process_id, args.devices)
        except ValueError as err:
            raise UsageError(f"--coordinator: {err}") from None
    elif args.num_processes is not None or args.process_id is not None:
        raise UsageError("--num-processes and --process-id go with --coordinator HOST:PORT")
    else:
        use_virtual_devices(args.devices)
    with contextlib.redirect_stdout(sys.stderr) if args.format == "json" else contextlib.nullcontext():
        run, check_s = _run_file(args, kwargs, mesh_axes, shards)     # (the program's prints: not in the JSON)
    sys.stdout.write(format_results(run.results, args.format, run.keys))
    if args.time:
        sys.stderr.write(format_times(run.times, check_s))
    if args.out:
        results = {f"result_{i}": r for i, r in enumerate(run.results)}
        write_whole(args.out, "--out", lambda file: np.savez(file, **results))
    return EXIT_OK


# ---- check, explain, version ------------------------------------------------------------------------

def specialize_concrete(module: arrc.Module) -> list[Diagnostic]:
    """Lower every function whose parameter types are all concrete: finds the errors only
    specialization can see (e.g. a condition on sizes) without needing any argument."""
    found: list[Diagnostic] = []
    for name in module.functions:
        fn = module[name]
        if fn.shape_vars:
            continue
        try:
            fn.lower(*fn.arg_types_for({}))
        except CompileError as err:
            found.extend(d for d in err.diagnostics if d not in found)
    return found


def check_summary(path: str, diags: list[Diagnostic]) -> str:
    """The last line of `arrc check` (text), as rustc ends: `p.arr: no errors`, `p.arr: no errors, 1 warning`,
    `p.arr: 2 errors, 1 warning; `arrc explain E0202` explains the first`."""
    errors = [d for d in diags if d.severity == "error"]
    warned = len(diags) - len(errors)
    counts = plural(len(errors), "error") if errors else "no errors"
    counts += f", {plural(warned, 'warning')}" if warned else ""
    first = next((d.code for d in errors if (error_pages() / f"{d.code}.md").is_file()), None)
    line = f"{path}: {counts}" + (f"; `arrc explain {first}` explains the first" if first else "")
    return ("\n" if diags else "") + line + "\n"


def cmd_check(args: argparse.Namespace) -> int:
    """Diagnostics, then a one-line summary on stderr (text); with `--diagnostics json`, only the JSON."""
    as_json = args.diagnostics == "json"
    try:
        module, sources = load_module(args.file, args.werror)
        errors = specialize_concrete(module)
    except CompileError as err:
        report_compile_error(err, as_json)
        if not as_json:
            sys.stderr.write(check_summary(shown_file(args.file), err.diagnostics))
        return EXIT_COMPILE
    diags = list(module.warnings) + errors
    if as_json:
        sys.stdout.write(render_json(diags) + "\n")
        return EXIT_COMPILE if errors else EXIT_OK
    print_diagnostics(diags, sources)
    sys.stderr.write(check_summary(shown_file(args.file), diags))
    return EXIT_COMPILE if errors else EXIT_OK


def explain(text: str) -> str:
    """The long explanation of a diagnostic code (docs/errors/CODE.md); a code is E, W or R and four
    digits, so no other file can be named. The zeros in front may be left out, and the letter where only one
    code has those digits (`e203`, `203`, `0203`: E0203), as rustc's `--explain 308` is E0308."""
    code = text.strip().upper()
    short = SHORT_CODE.fullmatch(code)
    if short:
        digits = short["digits"].zfill(4)
        meant = [c for c in (letter + digits for letter in short["letter"] or "EWR") if c in CODES]
        if len(meant) > 1:
            raise UsageError(f"{text!r} is not a diagnostic code: a code is E, W or R and four digits "
                             f"(did you mean {', '.join(f'`{c}`' for c in meant[:-1])} or `{meant[-1]}`?)")
        if meant:
            code = meant[0]
        elif short["letter"]:           # (an unknown code: said below)
            code = short["letter"] + digits
    if not CODE.fullmatch(code):
        raise UsageError(f"{text!r} is not a diagnostic code: a code is E, W or R and four digits, e.g. E0202")
    page = error_pages() / f"{code}.md"
    if page.is_file():
        return strip_comments(page.read_text(encoding="utf-8"))
    if code in CODES:
        return f"# {code}: {CODES[code]}\n\n(no long explanation has been written yet)\n"
    raise UsageError(f"unknown code `{code}`; known codes: {', '.join(sorted(CODES))}")


COMMENT_LINES = re.compile(r"^[ \t]*<!--.*?-->[ \t]*\n(?:[ \t]*\n)?", re.DOTALL | re.MULTILINE)
COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


def strip_comments(page: str) -> str:
    """A page without its HTML comments (`<!-- no-test -->` is for the page's tests, not its reader): a
    comment on lines of its own goes with them and the blank line after it."""
    return COMMENT.sub("", COMMENT_LINES.sub("", page))


def cmd_explain(args: argparse.Namespace) -> int:
    text = explain(args.code)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return EXIT_OK


def cmd_guard(args: argparse.Namespace) -> int:
    """`arrc guard IN.mlir -o OUT.mlir`: instrument StableHLO from anywhere with guards."""
    from arrc.passes.guards import GuardOptions, parse_kinds
    from arrc.runtime.foreign import guard_text
    data = require_stablehlo(args.file, "guard",
                             "`arrc compile --emit guarded FILE` writes an arr function's guarded StableHLO")
    kinds = parse_kinds(",".join(args.guards)) if args.guards else frozenset(KINDS)
    text = guard_text(data, args.file, GuardOptions(kinds, args.guard_scope))
    write_output(text, args.output)
    return EXIT_OK


# ---- grad: differentiate StableHLO from elsewhere ---------------------------------------------------
# A JAX export is differentiated as arrc's own modules are (passes/autodiff.py `ValueAndGrad`) once it is
# one function: its private calls are inlined, and what only annotates a value for XLA's partitioner or
# scheduler (an identity on one device) is taken out, so the sweep sees plain StableHLO.

IDENTITY_OPS = ("sdy.sharding_constraint", "sdy.reshard", "stablehlo.optimization_barrier")
IDENTITY_CALLS = ("Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "annotate_device_placement")


def parse_wrt(text: str) -> tuple[int, ...]:
    """`--wrt 0,2` -> (0, 2): distinct argument positions, in the order the derivatives are returned."""
    try:
        wrt = tuple(int(p) for p in text.split(","))
    except ValueError:
        wrt = ()
    if not wrt or any(i < 0 for i in wrt) or len(set(wrt)) != len(wrt):
        raise argparse.ArgumentTypeError(f"{text!r}: expected distinct argument positions, e.g. --wrt 0 or --wrt 0,2")
    return wrt


def strip_annotations(module) -> int:
    """Replace each sharding constraint, reshard, optimization barrier and XLA annotation custom_call (a
    value passed through unchanged on one device) by its operands; returns how many were removed."""
    from arrc.passes.rewrite import attr_text, ops_named
    found = [op for name in IDENTITY_OPS for op in ops_named(module, name)]
    found += [op for op in ops_named(module, "stablehlo.custom_call")
              if attr_text(op.attributes["call_target_name"]) in IDENTITY_CALLS]
    removed = 0
    for op in found:
        if [v.type for v in op.operands] != [r.type for r in op.results]:
            continue                    # e.g. a shard-shaped value of several devices: left to the sweep's E0216
        for result, operand in zip(op.results, op.operands):
            result.replace_all_uses_with(operand)
        op.erase()
        removed += 1
    return removed


def mark_counted_loops(module) -> int:
    """Give each JAX counted loop (`fori_loop` with static bounds, `scan`: a carried counter from a constant,
    stepped by 1, compared `LT` with a constant) the trip count that arr's `for` loops carry (abi.TRIP_COUNT),
    so the sweep unrolls a short one (exact, no recomputation); returns how many were marked."""

    from arrc.compiler import abi
    from arrc.passes.rewrite import ops_named, set_int_attr
    marked = 0
    for loop in ops_named(module, "stablehlo.while"):
        count = _jax_trip_count(loop)
        if count is not None and abi.TRIP_COUNT not in loop.attributes:
            set_int_attr(loop, abi.TRIP_COUNT, count)
            marked += 1
    return marked


def _jax_trip_count(loop) -> int | None:
    """`N - c0` (at least 0) for a loop whose condition is `counter < N` where the body returns `counter + 1`
    and the counter starts at the constant c0; None for any other loop."""
    cond, body = loop.regions[0].blocks[0], loop.regions[1].blocks[0]
    returned = list(cond.operations)[-1].operands[0].owner
    if getattr(returned, "name", "") != "stablehlo.compare":
        return None
    if "LT" not in str(returned.attributes["comparison_direction"]):
        return None
    counter, limit = returned.operands
    if counter not in list(cond.arguments) or _constant(limit) is None:
        return None
    k = list(cond.arguments).index(counter)
    step = list(body.operations)[-1].operands[k].owner
    if getattr(step, "name", "") != "stablehlo.add" or body.arguments[k] not in list(step.operands):
        return None
    other = [v for v in step.operands if v != body.arguments[k]]
    start = _constant(loop.operands[k])
    if len(other) != 1 or _constant(other[0]) != 1 or start is None:
        return None
    return max(0, _constant(limit) - start)


def _constant(value) -> int | None:
    """The integer a scalar `stablehlo.constant` holds, else None."""
    from jaxlib.mlir import ir
    op = value.owner
    if getattr(op, "name", "") != "stablehlo.constant":
        return None
    attr = op.attributes["value"]
    if not isinstance(attr, ir.DenseIntElementsAttr) or ir.ShapedType(attr.type).rank != 0:
        return None
    return int(ir.DenseIntElementsAttr(attr)[0])


def _in_input(diag: Diagnostic, name: str) -> Diagnostic:
    """Locations of text read from stdin name the file "-": that is the input file `name`."""
    if diag.span is None or diag.span.file != "-":
        return diag
    return replace(diag, span=replace(diag.span, file=name))


def _refusal(message: str, loc, name: str, label: str, notes: list[str], help_: str | None) -> Diagnostic:
    from arrc.compiler.locations import span_of
    return _in_input(Diagnostic("E0216", message, span_of(loc), label, notes=notes, help=help_), name)


def differentiable_entry(module, wrt: tuple[int, ...], name: str):
    """The entry of `module`, checked for `ValueAndGrad`: one float scalar result (E0216), `wrt` positions
    of float arguments (a usage error out of range, E0216 for an integer or bool one)."""
    from jaxlib.mlir import ir

    from arrc.compiler.autodiff import dtype_of
    from arrc.passes.rewrite import attr_text, entry
    fop = entry(module)
    fname = attr_text(fop.attributes["sym_name"])
    block = fop.regions[0].blocks[0]
    args = list(block.arguments)
    odd = _foreign_value(fop)
    if odd is not None:
        where, loc, t = odd
        return None, _refusal(
            f"cannot differentiate `{fname}`: {where} has a value of type {_type_words(t)}", loc,
            name, f"{_type_words(t)} here", ["`arrc grad` differentiates values of arr's dtypes: bool, integers, "
                                              "f16, bf16, f32 and f64 (not complex numbers, f8 types or tokens)"],
            None)
    bad = [i for i in wrt if i >= len(args)]
    if bad:
        raise UsageError(f"--wrt {bad[0]}: `{fname}` takes {len(args)} argument{'s' * (len(args) != 1)}"
                         + (f" (positions 0 to {len(args) - 1})" if args else ""))
    ret = list(block.operations)[-1]
    results = list(ret.operands)
    kinds = [_type_words(v.type) for v in results]
    if len(results) != 1 or not _float_scalar(results[0]):
        what = f"returns {', '.join(kinds)}" if results else "returns nothing"
        return None, _refusal(
            f"cannot differentiate `{fname}`: it {what}, not one float scalar", ret.location, name,
            "the result here", ["`arrc grad` differentiates a loss: a function with one float scalar result "
                                "(as jax.grad)"],
            "reduce the result to a scalar before exporting (e.g. jnp.sum of it), or export one function per "
            "component")
    for i in wrt:
        if not dtype_of(args[i]).is_float:
            return None, _refusal(
                f"cannot differentiate `{fname}` with respect to argument {i}: it is {_type_words(args[i].type)}",
                args[i].location if isinstance(args[i].location, ir.FileLineColLoc) else fop.location, name,
                f"argument {i}", ["integers and bools have no derivative (jax.grad raises a TypeError)"],
                "leave it out of --wrt" + (f" (e.g. --wrt {','.join(str(j) for j in wrt if j != i)})"
                                            if len(wrt) > 1 else ""))
    return fop, None


def _foreign_value(fop):
    """(what makes it: `argument I` or an operation's name; its location; its type) for the first value in
    `fop` that is not a tensor of an arr dtype (the sweep knows only those), or None."""
    from jaxlib.mlir import ir
    for i, arg in enumerate(fop.regions[0].blocks[0].arguments):
        if _dtype_name(arg.type) is None:
            return f"argument {i}", arg.location, arg.type
    found = []

    def visit(op):
        values = list(op.results) + [a for region in op.regions for block in region.blocks for a in block.arguments]
        odd = next((v for v in values if _dtype_name(v.type) is None), None)
        if odd is None:
            return ir.WalkResult.ADVANCE
        found.append((f"`{op.name}`", op.location, odd.type))
        return ir.WalkResult.INTERRUPT
    walk_ops(fop.operation, visit)
    return found[0] if found else None


def _dtype_name(t) -> str | None:
    """The arr dtype of the elements of the tensor type `t` (`f64`, `u8`, `bool`), None for any other type."""
    from jaxlib.mlir import ir

    from arrc.compiler.types import DTYPES
    if not isinstance(t, ir.RankedTensorType):
        return None
    dt = str(ir.RankedTensorType(t).element_type)
    dt = "bool" if dt == "i1" else "u" + dt[2:] if dt.startswith("ui") else dt
    return dt if dt in DTYPES else None


def _float_scalar(value) -> bool:
    from jaxlib.mlir import ir

    from arrc.compiler.types import DTYPES
    dt = _dtype_name(value.type)
    return dt is not None and DTYPES[dt].is_float and ir.RankedTensorType(value.type).rank == 0


def _type_words(t) -> str:
    """`tensor<3x4xf64>` as arr writes it: f64[3, 4] (another type as MLIR writes it)."""
    from jaxlib.mlir import ir
    if not isinstance(t, ir.RankedTensorType):
        return str(t)
    t = ir.RankedTensorType(t)
    dt = _dtype_name(t) or str(t.element_type)
    return f"{dt}[{', '.join(map(str, t.shape))}]" if t.rank else dt


DONATION = ("tf.aliasing_output", "jax.buffer_donor")


def forget_results(fop) -> None:
    """Drop the arguments' donations to results: the derivative's results are others (their attributes,
    e.g. JAX's `result_info`, the differentiation drops)."""
    from jaxlib.mlir import ir
    if "arg_attrs" in fop.attributes:
        kept = [ir.DictAttr.get({a.name: a.attr for a in ir.DictAttr(d) if a.name not in DONATION})
                for d in ir.ArrayAttr(fop.attributes["arg_attrs"])]
        fop.attributes["arg_attrs"] = ir.ArrayAttr.get(kept)


def grad_module(data: bytes, name: str, wrt: tuple[int, ...], keep_value: bool = True):
    """`arrc grad`: (context, module) of the StableHLO in `data` whose entry returns its value (if
    `keep_value`) and its derivatives with respect to the arguments `wrt`."""
    from arrc.passes.autodiff import ValueAndGrad
    from arrc.passes.registry import run_passes
    from arrc.passes.rewrite import inline_calls
    from arrc.runtime.foreign import SafeSources, read_module
    context, module = read_module(data, name)
    with context:
        left = inline_calls(module)
        if left:
            raise CompileError([Diagnostic("E0216", f"cannot differentiate {name}: its functions call each other "
                                                    f"recursively ({left} calls left after inlining)", None)],
                               SafeSources())
        strip_annotations(module)
        mark_counted_loops(module)
        fop, refused = differentiable_entry(module, wrt, name)
        if refused is not None:
            raise CompileError([refused], SafeSources())
        forget_results(fop)
        from arrc.passes.linalg import LowerLinalg
        diags = run_passes(module, [ValueAndGrad(wrt=wrt, keep_value=keep_value), LowerLinalg("cpu")])
    if diags:
        raise CompileError([_in_input(d, name) for d in diags], SafeSources())
    return context, module


def cmd_grad(args: argparse.Namespace) -> int:
    """`arrc grad IN.mlir --wrt 0 -o OUT.mlir`: the entry of StableHLO from anywhere (e.g. exported from
    JAX), differentiated by reverse mode; text with locations, or bytecode for an OUT ending in .mlirbc."""
    data = require_stablehlo(args.file, "grad", "an arr function takes its derivative with `grad(f)` in the "
                                                "source, or `arrc.grad(mod.f)` in Python")
    context, module = grad_module(data, args.file, args.wrt, not args.no_value)
    with context:
        text = name_the_input(module.operation.get_asm(enable_debug_info=True), args.file)
        if args.output is not None and args.output.endswith(".mlirbc"):
            from jaxlib.mlir import ir

            from arrc.runtime.mlir_reader import bytecode
            write_output(bytecode(ir.Module.parse(text)), args.output)
        else:
            write_output(text, args.output)
    return EXIT_OK


def name_the_input(text: str, name: str) -> str:
    """MLIR names text it read from stdin "-" in its locations: name the input file there instead, so a
    guard report on the derivative (`arrc run OUT.mlir --guards all`) shows the input's lines. A name that
    MLIR's strings would need escapes for is left alone."""
    if not name.isprintable() or '"' in name or "\\" in name:
        return text
    return text.replace('loc("-":', f'loc("{name}":')


def cmd_repl(args: argparse.Namespace) -> int:
    from arrc.repl import main as repl_main
    return repl_main(list(args.repl_args))


def version_text() -> str:
    from importlib.metadata import PackageNotFoundError, version

    from jaxlib.mlir.dialects import stablehlo as hlo
    try:
        jaxlib_version = version("jaxlib")
    except PackageNotFoundError:
        jaxlib_version = "unknown"
    return f"arrc {arrc.__version__} (jaxlib {jaxlib_version}, StableHLO {hlo.get_current_version()})"


# ---- argument parsing and the driver ---------------------------------------------------------------

def _guard_list(text: str) -> list[str]:
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    bad = [k for k in kinds if k not in GUARD_KINDS]
    if bad or not kinds:
        raise argparse.ArgumentTypeError(f"unknown guard {bad[0] if bad else text!r} "
                                         f"(choose from {', '.join(GUARD_KINDS)})")
    return kinds


def did_you_mean(word: str, choices) -> str:
    """` (did you mean `check`?)` for the choice closest to a misspelt `word` (compiler/suggest.py's
    measure, as the checker's), else ""."""
    from .compiler.suggest import closest
    close = closest(word, list(choices))
    return f" (did you mean `{close}`?)" if close else ""


class Parser(argparse.ArgumentParser):
    """argparse with a did-you-mean for a misspelt choice (`chek`, `--emit stablhlo`)."""

    def error(self, message: str):
        found = INVALID_CHOICE.search(message)
        if found:
            message += did_you_mean(found["word"], re.findall(r"'([^']*)'", found["choices"]))
        super().error(message)

    def print_help(self, file=None):
        """As argparse's, but a write that fails raises (argparse ignores it: `arrc --help > /dev/full` said
        nothing, status 0)."""
        (file or sys.stdout).write(self.format_help())


INVALID_CHOICE = re.compile(r"invalid choice: '(?P<word>[^']*)' \(choose from (?P<choices>.*)\)")


def flags_of(parser: argparse.ArgumentParser) -> list[str]:
    return [s for action in parser._actions for s in action.option_strings]


def unknown_flags(parser: argparse.ArgumentParser, extra: list[str], commands: dict) -> str:
    """The message for arguments no option of `parser` takes, with the closest flag for a misspelt one, or
    the other commands (of `commands`, name -> parser) that take it."""
    flags = flags_of(parser)
    words = []
    for arg in extra:
        flag = arg.partition("=")[0]
        elsewhere = [f"`arrc {name}`" for name, other in commands.items()
                     if other is not parser and flag.startswith("--") and flag in flags_of(other)]
        if elsewhere:                   # `run --shape n=3` was "did you mean `--shard`?"
            named = " and ".join(filter(None, [", ".join(elsewhere[:-1]), elsewhere[-1]]))
            words.append(f"{arg} (a flag of {named}, not of `{parser.prog}`)")
        elif re.fullmatch(r"-[A-Za-z]", flag):     # `-o` for run's `--out`: by spelling, every letter was `-h`
            longs = [f for f in flags if f.startswith(f"-{flag}")]
            words.append(arg + (f" (did you mean `{longs[0]}`?)" if len(longs) == 1 else ""))
        else:
            words.append(arg + (did_you_mean(flag, flags) if flag.startswith("-") else ""))
    return f"unrecognized arguments: {' '.join(words)}"


def add_mesh_arguments(p: argparse.ArgumentParser, verb: str) -> None:
    """--devices, --mesh and --shard, of `run` and `compile`."""
    p.add_argument("--devices", type=int, metavar="N", help="N virtual CPU devices (for --mesh on one machine)")
    p.add_argument("--mesh", metavar="AXIS=N,...", help=f"{verb} as one SPMD program over a mesh, e.g. data=4,model=2")
    p.add_argument("--shard", action="append", default=[], metavar="PARAM=SPEC",
                   help="how a parameter is split over the mesh, an axis or _ per dimension, e.g. x=data,_ "
                        "(repeatable; unnamed parameters are replicated)")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="arrc", description="The arr compiler: StableHLO from arr, run with PJRT.",
                    epilog="`arrc COMMAND --help` shows the options of a command.\n\nexit status: "
                           f"{EXIT_OK} ok, {EXIT_COMPILE} compile error, {EXIT_USAGE} usage error, {EXIT_RUNTIME} "
                           f"run-time guard or assert failure,\n{EXIT_INTERNAL} internal error (a bug in arrc), "
                           f"{EXIT_INTERRUPTED} interrupted (Ctrl-C)",
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)

    p = sub.add_parser("compile", help="compile a function to StableHLO")
    p.add_argument("file", metavar="FILE", help="the arr source file (- reads standard input)")
    p.add_argument("-o", "--output", metavar="OUT", help="output file (default: stdout)")
    p.add_argument("--emit", choices=EMITS, default="stablehlo",
                   help="StableHLO text with locations (default), MLIR bytecode, a portable artifact; or stop "
                        "at another stage: the checked AST, the guarded module, XLA's optimized HLO")
    p.add_argument("--passes", metavar="A,B,C", help="the passes to run, in order (default: verify-static-shapes, "
                                                     "then guard with --guards)")
    p.add_argument("--entry", default="main", metavar="NAME", help="function to compile (default: main)")
    p.add_argument("--shape", action="append", default=[], metavar="NAME=INT",
                   help="size of a shape variable of the entry (repeatable)")
    p.add_argument("--guards", type=_guard_list, metavar="KINDS", help="nan,inf,bounds,div0 or all")
    p.add_argument("--guard-scope", choices=SCOPES, default="results",
                   help="nan/inf: check the results (default) or every operation")
    p.add_argument("--target", "--device", dest="target", choices=DEVICES, default="cpu",     # (`run`'s name)
                   help="target backend (default: cpu)")
    p.add_argument("--werror", action="store_true", help="treat warnings as errors")
    add_mesh_arguments(p, "emit")
    p.set_defaults(handler=cmd_compile)

    p = sub.add_parser("run", help="compile and run a function")
    p.add_argument("file", metavar="FILE", help="the arr source file (- reads standard input)")
    p.add_argument("--entry", default="main", metavar="NAME", help="function to run (default: main)")
    p.add_argument("--arg", action="append", default=[], metavar="NAME=VALUE",
                   help="argument: NAME=@file.npy, NAME='[1, 2, 3]' or NAME=3 (repeatable)")
    p.add_argument("--out", metavar="FILE.npz", help="also save the results as result_0, result_1, ... in the "
                                                     "NumPy archive FILE.npz (a name not ending in .npz is "
                                                     "refused: numpy would add the suffix)")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="how results are printed (json: one JSON document on stdout, the program's prints on stderr)")
    p.add_argument("--guards", type=_guard_list, metavar="KINDS", help="nan,inf,bounds,div0 or all")
    p.add_argument("--guard-scope", choices=SCOPES, default="results",
                   help="nan/inf: check the results (default) or every operation")
    p.add_argument("--device", choices=DEVICES, default="cpu", help="device to run on (default: cpu)")
    add_mesh_arguments(p, "run")
    p.add_argument("--coordinator", metavar="HOST:PORT", help="join a cluster of processes (process 0 serves it)")
    p.add_argument("--num-processes", type=int, metavar="N", help="with --coordinator: how many processes")
    p.add_argument("--process-id", type=int, metavar="I", help="with --coordinator: this process's number, 0..N-1")
    p.add_argument("--time", action="store_true", help="print compile and run times to stderr")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the persistent compile cache")
    p.set_defaults(handler=cmd_run)

    p = sub.add_parser("check", help="type-check a file and print its diagnostics")
    p.add_argument("file", metavar="FILE", help="the arr source file (- reads standard input)")
    p.add_argument("--diagnostics", choices=("text", "json"), default="text", help="diagnostics format")
    p.add_argument("--werror", action="store_true", help="treat warnings as errors")
    p.set_defaults(handler=cmd_check)

    p = sub.add_parser("guard", help="instrument a StableHLO module (e.g. exported from JAX) with guards")
    p.add_argument("file", metavar="IN.mlir")
    p.add_argument("-o", "--output", metavar="OUT.mlir")
    p.add_argument("--guards", type=_guard_list, metavar="KINDS", help="nan,inf,bounds,div0 or all (default)")
    p.add_argument("--guard-scope", choices=SCOPES, default="results")
    p.set_defaults(handler=cmd_guard)

    p = sub.add_parser("grad", help="differentiate a StableHLO module (e.g. exported from JAX) by reverse mode")
    p.add_argument("file", metavar="IN.mlir")
    p.add_argument("-o", "--output", metavar="OUT.mlir", help="output file (default: stdout; bytecode for .mlirbc)")
    p.add_argument("--wrt", type=parse_wrt, default=(0,), metavar="I,J",
                   help="the argument positions to differentiate with respect to (default: 0)")
    p.add_argument("--no-value", action="store_true",
                   help="return only the derivatives (default: the value, then the derivatives)")
    p.set_defaults(handler=cmd_grad)

    p = sub.add_parser("explain", help="explain a diagnostic code, with a wrong and a right example")
    p.add_argument("code", metavar="CODE")
    p.set_defaults(handler=cmd_explain)

    # `main` hands `arrc repl ...` to the REPL's own parser (arrc/repl/terminal.py) before this one sees it:
    # listed here for the help only.
    p = sub.add_parser("repl", help="interactive prompt (arrc repl --help for its options)", add_help=False)
    p.add_argument("repl_args", nargs=argparse.REMAINDER)
    p.set_defaults(handler=cmd_repl)
    return parser


def _error(message: str) -> None:
    sys.stderr.write(f"arrc: error: {message}\n")


def _interrupted() -> None:
    """The one line for Ctrl-C; what was printed before it is flushed first."""
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError, OSError):
        pass
    sys.stderr.write("arrc: interrupted\n")
    sys.stderr.flush()


def _warn(message: str) -> None:
    sys.stderr.write(f"arrc: warning: {message}\n")


def report_compile_error(err: CompileError, as_json: bool = False) -> int:
    if as_json:
        sys.stdout.write(render_json(err.diagnostics) + "\n")
    else:
        sys.stderr.write(str(err))
    return EXIT_COMPILE


def out_of_memory(err: Exception) -> bool:
    """MemoryError, or XLA's RESOURCE_EXHAUSTED (e.g. a device allocation): not a bug."""
    return isinstance(err, MemoryError) or str(err).startswith("RESOURCE_EXHAUSTED")


def report_internal_error(err: Exception, as_json: bool = False) -> int:
    """A failure arrc did not expect (an MLIR verifier or XLA error, a bug): diagnostic E0601, no traceback."""
    diag = internal_error(err)
    if as_json:
        sys.stdout.write(render_json([diag]) + "\n")
    else:
        sys.stdout.flush()
        sys.stderr.write(render_all([diag], {}))
    return EXIT_INTERNAL


def main(argv: list[str] | None = None) -> int:
    """Run the command line `argv` (default: `sys.argv[1:]`); returns the exit code."""
    keep_lost_interrupts()
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["repl"]:            # its options are the REPL's (argparse.REMAINDER cannot take `--help`)
        from arrc.repl import main as repl_main
        return repl_main(argv[1:])
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:
            commands = parser._subparsers._group_actions[0].choices
            command = commands.get(args.command, parser) if args.command else parser
            command.error(unknown_flags(command, extra, commands))
    except SystemExit as exit_:          # --help (0) or a bad flag (2, message already printed)
        return exit_.code if isinstance(exit_.code, int) else EXIT_USAGE
    except OSError as err:              # writing the help
        return output_failed(err)
    if args.version:
        try:
            print(version_text())
        except OSError as err:
            return output_failed(err)
        return EXIT_OK
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        _refuse_writing_over_the_input(args)
        code = args.handler(args)
        raise_lost_interrupt()
        return code
    except CompileError as err:
        return report_compile_error(err)
    except (UsageError, arrc.ArgumentError) as err:
        _error(str(err))
        return EXIT_USAGE
    except OSError as err:
        if err.filename is None and (isinstance(err, BrokenPipeError) or err.errno in WRITE_FAILED):
            return output_failed(err)       # a write to stdout (-o and --out name their own files)
        _error(f"{err.strerror or err}: {err.filename}" if err.filename else str(err))
        return EXIT_USAGE
    except arrc.GuardError as err:      # a run-time guard or assert failure
        sys.stdout.flush()
        sys.stderr.write(str(err) if str(err).endswith("\n") else f"{err}\n")
        return EXIT_RUNTIME
    except KeyboardInterrupt:           # Ctrl-C: checking, lowering, compiling or running (`entry` leaves
        _interrupted()                  # at once: a running XLA program cannot be cancelled)
        return EXIT_INTERRUPTED
    except Exception as err:            # noqa: BLE001  a bug (ours, MLIR's or XLA's): reported, never a traceback
        if out_of_memory(err):
            _error(f"out of memory: {(str(err).strip().splitlines() or [type(err).__name__])[0]}")
            return EXIT_RUNTIME
        if getattr(args, "coordinator", None) is not None and "DEADLINE_EXCEEDED" in str(err):
            _error("another process of this run did not take part in its computation in time: it failed or left "
                   "before it (see its own output), or was started with other arguments (every process runs the "
                   "same command with its own --process-id)")
            return EXIT_RUNTIME
        return report_internal_error(err, getattr(args, "diagnostics", "text") == "json")


WRITE_FAILED = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EIO}    # a write that failed (not a refused connection)


def output_failed(err: OSError) -> int:
    """A write to stdout failed: done, quietly, when its reader left (`arrc compile f.arr | head`); else (a full
    disk) one line and status 2. Later writes, and the flush at exit, go nowhere."""
    drop_stdout()
    if isinstance(err, BrokenPipeError):
        return EXIT_OK
    _error(f"cannot write the output: {err.strerror or err}")
    return EXIT_USAGE


def _refuse_writing_over_the_input(args) -> None:
    """`-o` naming the input file (or a link to it) would replace the source with what it compiles to, as
    gcc refuses to: a usage error before anything is written."""
    file, out = getattr(args, "file", None), getattr(args, "output", None)
    if isinstance(file, str) and isinstance(out, str) and Path(out).exists() and Path(file).exists() \
            and os.path.samefile(file, out):
        raise UsageError(f"-o {out} is the input file: write the output elsewhere")


def _run_abandoned() -> bool:
    """Whether a compile or run that Ctrl-C abandoned is still going on a helper thread (runtime/call.py
    `helpers_busy`): the normal exit would abort when it returns, so the REPL leaves with `os._exit` too."""
    call = sys.modules.get("arrc.runtime.call")
    return call is not None and call.helpers_busy()


def entry() -> None:
    """The `arrc` console script: `main`, then leave without tearing down the interpreter.
    Unloading jaxlib and its XLA client takes ~0.3 s at exit and only matters for long-lived processes;
    the REPL (which may have user state to flush, e.g. history) exits normally."""
    try:
        code = main()
    except KeyboardInterrupt:           # a Ctrl-C outside `main`'s handlers (e.g. while parsing flags)
        _interrupted()
        code = EXIT_INTERRUPTED
    try:
        sys.stdout.flush()              # what is left in its buffer
    except OSError as err:
        if code == EXIT_OK:
            code = output_failed(err)
        else:                           # (the command failed, and said so)
            drop_stdout()
    except ValueError:                  # (closed)
        pass
    if len(sys.argv) > 1 and sys.argv[1] == "repl" and not _run_abandoned():
        sys.exit(code)
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(code)


if __name__ == "__main__":
    entry()
