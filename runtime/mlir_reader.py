"""Reading StableHLO from a file arrc did not write, in a child process (runtime/foreign.py starts it).

MLIR's readers trust their input: a mutated bytecode file can make them abort or corrupt memory
(`malloc(): invalid size`), so the file's bytes are parsed here, in a process of their own that imports
nothing but jaxlib's MLIR bindings (~0.3 s of CPU, not arrc's ~1.5 s), and verified. The parent gets back
MLIR's own bytecode of the verified module, or MLIR's first error, and only ever parses bytecode that MLIR
wrote. The protocol, on stdout: one JSON line (`{"ok": true, "platforms": [...] or null}` or `{"error",
"line", "col", "file"}`), then, when ok, the bytecode. `platforms` are a multi-platform `jax.export`'s
(`Exported.platforms`, in the order its `_platform_index` argument counts them), which the serialization
holds outside the module. Run as `python -I mlir_reader.py [PARENT_PID CPU_SECONDS] < FILE`: with them it
dies with its parent (Linux) and after CPU_SECONDS of CPU time (`bound_process`).

    >>> make_context() is not None
    True
"""
from __future__ import annotations

import io
import json
import os
import signal
import sys

from jaxlib.mlir import ir
from jaxlib.mlir._mlir_libs import _jax_mlir_ext
from jaxlib.mlir.dialects import chlo, sdy
from jaxlib.mlir.dialects import stablehlo as hlo

BYTECODE_MAGIC = b"ML\xefR"
MEMORY_LIMIT = 16 * 2 ** 30          # address space of the child: a reader that asks for more fails there
PR_SET_PDEATHSIG = 1                 # <linux/prctl.h>


class ReadError(Exception):
    """MLIR's message and where it points: `file` None for the input itself, else the file a location
    inside the module names (e.g. the arr source a module was compiled from)."""

    def __init__(self, message: str, line: int = 1, col: int = 1, file: str | None = None):
        super().__init__(message)
        self.message, self.line, self.col, self.file = message, line, col, file


def make_context() -> ir.Context:
    """A context like compiler/emit.py's, with Shardy loaded too (JAX's exports carry its attributes)."""
    registry = ir.DialectRegistry()
    _jax_mlir_ext.register_dialects(registry)
    ctx = ir.Context()
    ctx.append_dialect_registry(registry)
    hlo.register_dialect(ctx)
    chlo.register_dialect(ctx)
    sdy.register_dialect(ctx)
    ctx.dialects["func"]
    return ctx


def parse(context: ir.Context, data: bytes) -> tuple[ir.Module, list[str] | None]:
    """StableHLO text, MLIR bytecode, a portable artifact (VHLO, upgraded to StableHLO) or a `jax.export`
    serialization of one, verified; with the platforms of a `jax.export` for more than one (else None)."""
    with context:
        try:
            data, platforms = _unwrap_jax_export(data)
            if data[:4] == BYTECODE_MAGIC:
                module = ir.Module.parse(data)
                if _is_vhlo(module):
                    module = hlo.deserialize_portable_artifact(context, data)
            else:
                module = ir.Module.parse(data.decode("utf-8"))
            module.operation.verify()
        except UnicodeDecodeError as err:
            raise ReadError(f"not MLIR bytecode, and not UTF-8 text (byte {err.start})") from None
        except ir.MLIRError as err:
            raise _read_error(err) from None
        except ValueError as err:          # e.g. a portable artifact that does not deserialize
            raise ReadError(str(err).splitlines()[0] if str(err) else "not a StableHLO module") from None
    return module, platforms


def _unwrap_jax_export(data: bytes) -> tuple[bytes, list[str] | None]:
    """The module inside a `jax.export` serialization (`Exported.serialize()`: a flatbuffer around a
    portable artifact, the artifact's bytecode not at the start) and, when it was exported for several
    platforms, their names (its `main` then takes the index of the one it runs on); anything else as it is."""
    if data[:4] == BYTECODE_MAGIC or BYTECODE_MAGIC not in data:
        return data, None
    try:
        from jax import export
        exported = export.deserialize(bytearray(data))
    except ImportError as err:
        raise ReadError(f"this looks like a jax.export serialization, which needs {err.name or 'flatbuffers'} "
                        "(pip install flatbuffers)") from None
    except Exception as err:           # noqa: BLE001  (a flatbuffer that does not decode: any error)
        raise ReadError(f"not MLIR bytecode or text, and not a jax.export serialization "
                        f"({type(err).__name__}: {str(err)[:200]})") from None
    platforms = [str(p) for p in exported.platforms]
    return bytes(exported.mlir_module_serialized), platforms if len(platforms) > 1 else None


def _is_vhlo(module: ir.Module) -> bool:
    return any(op.operation.name.startswith("vhlo.") for op in module.body.operations)


def _read_error(err: ir.MLIRError) -> ReadError:
    """MLIR's first diagnostic and its position (MLIR's own header line says nothing)."""
    for diag in err.error_diagnostics:
        loc = ir.Location.from_attr(diag.location.attr)     # typed (diagnostics hand back a plain Location)
        if isinstance(loc, ir.NameLoc):
            loc = loc.child_loc
        if isinstance(loc, ir.FileLineColLoc):
            file = None if loc.filename == "-" else loc.filename
            return ReadError(diag.message, loc.start_line, loc.start_col, file)
        return ReadError(diag.message)
    text = str(err).splitlines()
    return ReadError(text[0] if text else "not a StableHLO module")


def bytecode(module: ir.Module) -> bytes:
    buffer = io.BytesIO()
    module.operation.write_bytecode(buffer)
    return buffer.getvalue()


def bound_process(parent: int | None = None, cpu_seconds: int | None = None) -> bool:
    """Limits on this process, set before it reads its input: MEMORY_LIMIT of address space, `cpu_seconds`
    of CPU time (SIGXCPU, then SIGKILL a second later) and, on Linux, SIGKILL when `parent` (the pid that
    started it) dies. MLIR's reader can loop forever on a mutated file: the parent stops waiting after its
    timeout, but a parent killed before that left the reader spinning, an orphan. False when `parent` is
    already gone (it died before this process asked to die with it)."""
    limits = [("RLIMIT_AS", MEMORY_LIMIT, MEMORY_LIMIT)]
    if cpu_seconds:
        limits.append(("RLIMIT_CPU", cpu_seconds, cpu_seconds + 1))
    try:
        import resource
    except ImportError:             # (not on Windows)
        limits = []
    for which, soft, hard in limits:
        try:
            resource.setrlimit(getattr(resource, which), (soft, hard))
        except (ValueError, OSError):                   # (a lower limit is set already)
            pass
    if parent is None:
        return True
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    return os.getppid() == parent


def main(argv: list[str]) -> int:
    parent, cpu_seconds = (int(argv[0]), int(argv[1])) if argv else (None, None)
    if not bound_process(parent, cpu_seconds):
        return 1                    # an orphan already: no one reads the answer
    data = sys.stdin.buffer.read()
    out = sys.stdout.buffer
    try:
        module, platforms = parse(make_context(), data)
        written = bytecode(module)
    except ReadError as err:
        out.write(json.dumps({"error": err.message, "line": err.line, "col": err.col, "file": err.file}).encode()
                  + b"\n")
        return 0
    out.write(json.dumps({"ok": True, "platforms": platforms}).encode() + b"\n" + written)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
