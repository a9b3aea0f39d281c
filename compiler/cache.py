"""Persistent compile cache: serialized PJRT executables on disk, loaded instead of compiling again.

An entry is one file, `<dir>/<key>.xc`, named by the SHA-256 of everything that can change the machine
code: the module bytes (MLIR bytecode, locations included, so guards and source edits are covered), the
compile options, the platform and device kind, the host CPU's features, `XLA_FLAGS`, the jaxlib version,
the number of host callbacks and whatever the caller adds (`Executable(key_extra=...)`). Guards need no
extra part: the guard passes rewrite the module, so its bytes differ. The file is

    MAGIC (8) | payload length (8, LE) | SHA-256 of the key (32) | SHA-256 of the payload (32) | payload

so a truncated or corrupt entry, or another key's entry copied or renamed onto this path (which would
otherwise run another program), is detected before it reaches PJRT: it is counted in `stats["corrupt"]`,
removed, and recompiled. An entry is read only if it is a regular file owned by this user, not a
symbolic link (opened with O_NOFOLLOW | O_NONBLOCK, then checked with fstat, so a FIFO, a device or a link
to one never blocks or floods memory), whose size is exactly its header's and at most `MAX_ENTRY_BYTES`.
The digests detect damage and mix-ups, not a forger: whoever can write the private directory can run code
as this user anyway.
Writes go to a private temporary file in the same directory and are renamed into place (`os.replace`),
so concurrent writers of one entry never leave a torn file: readers see the old entry, the new one, or none.

Where: `$ARRC_CACHE_DIR`, else the user's cache directory (`$XDG_CACHE_HOME/arrc` or `~/.cache/arrc` on
Linux, `~/Library/Caches/arrc` on macOS, `%LOCALAPPDATA%\\arrc\\Cache` on Windows). A deserialized
executable is code: the directory is created private (0700) and a directory that other users can write is
refused. `ARRC_NO_CACHE=1` (the CLI's `--no-cache`) or `disable()` turns the cache off. Its entries take
at most `max_cache_bytes()` in all: past it, a write removes those used longest ago (`DiskCache._evict`).

Host callbacks (print, assert, guard reports) are Python functions and are not in an entry: PJRT takes
them again when the executable is loaded, by index, so a loaded executable reports like a compiled one.
The same directory also keeps JAX's lowerings of linear-algebra calls (`<key>.linalg`, UTF-8 text, see
`cached_text`) and the parser's LALR tables (`<key>.lark`, see `cached_lark`), in the same format and under
the same checks; a table's payload is a pickle of plain data only (lists, dicts, strings, numbers), read
by an unpickler that resolves no class or function, so an entry cannot run code.

This module does not import the PJRT runtime (only `jaxlib.version`): see runtime/pjrt.py for that side.

>>> import tempfile
>>> c = DiskCache(tempfile.mkdtemp())
>>> k = c.key(b"module", b"options", "cpu")
>>> c.get(k) is None
True
>>> c.put(k, b"executable")
True
>>> c.get(k)
b'executable'
"""
from __future__ import annotations

import errno
import hashlib
import os
import pickle
import platform
import re
import stat
import struct
import sys
import tempfile
import threading
from pathlib import Path

MAGIC = b"ARRCXC02"                 # bump the last digits when the entry format or key recipe changes
_HEADER = struct.Struct("<8sQ32s32s")   # magic, payload length, SHA-256 of the key, SHA-256 of the payload
SUFFIX = ".xc"
MAX_ENTRY_BYTES = 1 << 30           # larger files are not read (and larger payloads not written)
MAX_CACHE_BYTES = 2 << 30           # the directory's entries in all, unless ARRC_CACHE_MAX_BYTES says otherwise
_ENTRY_NAME = re.compile(r"[0-9a-f]{64}\.[a-z]+")     # `<key><suffix>`: what eviction may remove

# Reading an entry must not follow a link, wait for a FIFO's writer or become a terminal's reader.
_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
               | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))

_enabled = True
_rooms: dict = {}                   # (directory, limit) -> bytes its entries may still grow by, as last counted (`_evict`)
_stats_lock = threading.Lock()
stats = {"hits": 0, "misses": 0, "writes": 0, "corrupt": 0, "errors": 0, "evicted": 0}


def disable() -> None:
    """Turn the persistent cache off for this process (the CLI's `--no-cache`)."""
    global _enabled
    _enabled = False


def enable() -> None:
    global _enabled
    _enabled = True


def enabled() -> bool:
    return _enabled and os.environ.get("ARRC_NO_CACHE", "") in ("", "0")


def max_cache_bytes() -> int:
    """How many bytes the directory's entries may take in all (`ARRC_CACHE_MAX_BYTES`; 0: no limit)."""
    return bytes_from_env("ARRC_CACHE_MAX_BYTES", MAX_CACHE_BYTES, least=0)


def bytes_from_env(name: str, default: int, least: int) -> int:
    """A number of bytes from the environment variable `name`: `default` where it is unset, and where it is not
    a whole number of at least `least` (with a warning: read at import, a traceback broke every command)."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        limit = int(text)
    except ValueError:
        limit = least - 1
    if limit < least:
        _warn(f"{name}={text!r} is not a {'positive ' if least else ''}number of bytes; using {default:,}")
        return default
    return limit


def default_dir() -> Path:
    """Where entries live unless `ARRC_CACHE_DIR` says otherwise."""
    override = os.environ.get("ARRC_CACHE_DIR")
    if override:
        return Path(override).expanduser()
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "arrc"
    if os.name == "nt":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / "arrc" / "Cache"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "arrc"


_host = None


def host_fingerprint() -> str:
    """Machine, Python-independent: the CPU architecture and its feature flags (XLA:CPU targets the host)."""
    global _host
    if _host is None:
        features = ""
        try:
            with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
                for line in f:
                    if line.startswith(("flags", "Features")):
                        features = line.split(":", 1)[1].strip()
                        break
        except OSError:
            features = platform.processor()
        _host = f"{platform.machine()}|{hashlib.sha256(features.encode()).hexdigest()[:16]}"
    return _host


class DiskCache:
    """Entries in one directory; every failure to read or write is a miss, never an error."""

    def __init__(self, directory: str | os.PathLike, suffix: str = SUFFIX):
        self.dir = Path(directory)
        self.suffix = suffix
        self._usable: bool | None = None

    def key(self, module: bytes, options: bytes, device: str, *extra: str) -> str:
        """The entry name for these inputs (hex SHA-256)."""
        h = hashlib.sha256(MAGIC)
        for part in (module, options, device.encode(), host_fingerprint().encode(),
                     os.environ.get("XLA_FLAGS", "").encode(), _jaxlib_version().encode(),
                     *(str(e).encode() for e in extra)):
            h.update(struct.pack("<Q", len(part)))
            h.update(part)
        return h.hexdigest()

    def path(self, key: str) -> Path:
        return self.dir / f"{key}{self.suffix}"

    def usable(self) -> bool:
        """Create the directory (private) if needed; refuse one that other users can write."""
        if self._usable is None:
            self._usable = self._prepare()
        return self._usable

    def _prepare(self) -> bool:
        try:
            self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            st = self.dir.stat()
        except OSError:
            return False
        if os.name != "nt":
            if hasattr(os, "getuid") and st.st_uid != os.getuid():
                _warn(f"not using compile cache {self.dir}: owned by another user")
                return False
            if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                _warn(f"not using compile cache {self.dir}: writable by other users (chmod 700 it)")
                return False
        return True

    def get(self, key: str) -> bytes | None:
        """The payload stored under `key`, or None: absent, unreadable, or not a valid entry for this key
        (then counted as corrupt and removed, so the caller recompiles and replaces it)."""
        if not self.usable():
            return None
        try:
            data = _read_entry(self.path(key))
        except FileNotFoundError:
            return None
        except _NotAnEntry:
            data = None
        except OSError as err:
            if err.errno != getattr(errno, "ELOOP", None):      # a symbolic link (O_NOFOLLOW): not an entry
                _count("errors")
                return None
            data = None
        payload = None if data is None else _unpack(data, key)
        if payload is None:
            _count("corrupt")
            self.discard(key)
            return None
        try:
            os.utime(self.path(key))        # used now: evicted last (`_evict`)
        except OSError:
            pass
        return payload

    def put(self, key: str, payload: bytes) -> bool:
        """Store atomically (temporary file + rename); False if the directory cannot be written."""
        if not self.usable() or _HEADER.size + len(payload) > MAX_ENTRY_BYTES:
            return False
        tmp = None
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=self.dir)
            with os.fdopen(fd, "wb") as f:
                f.write(_pack(key, payload))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path(key))
            tmp = None
        except OSError:
            _count("errors")
            return False
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
        self._evict(key, _HEADER.size + len(payload))
        return True

    def _evict(self, kept: str, written: int) -> None:
        """Past `max_cache_bytes()`, remove the entries used longest ago (by modification time, which `get`
        renews) until they take at most 3/4 of it, never the entry `kept`. The directory is counted again
        only once this process's own writes may have used up the room found at the last count (other
        processes' writes are seen then: the limit holds up to what they write meanwhile). The room is the
        directory's (`_rooms`), whichever instance writes (`cached_text`, `cached_lark` make one a call)."""
        limit = max_cache_bytes()
        if not limit:
            return
        room = _rooms.get((self.dir, limit))
        if room is not None and room >= written:
            _rooms[self.dir, limit] = room - written
            return
        entries, total = [], 0
        try:
            with os.scandir(self.dir) as found:
                for item in found:
                    if _ENTRY_NAME.fullmatch(item.name) and item.is_file(follow_symlinks=False):
                        st = item.stat(follow_symlinks=False)
                        entries.append((st.st_mtime, item.name, st.st_size))
                        total += st.st_size
        except OSError:
            return
        if total > limit:
            keep_name = self.path(kept).name
            for _, name, size in sorted(entries):
                if total <= limit * 3 // 4:
                    break
                if name == keep_name:
                    continue
                try:
                    os.unlink(self.dir / name)
                    total -= size
                    _count("evicted")
                except FileNotFoundError:       # (another process evicted it)
                    total -= size
                except OSError:
                    pass
        _rooms[self.dir, limit] = max(0, limit - total)

    def discard(self, key: str) -> None:
        """Remove an entry (e.g. one PJRT could not load): the link itself for a symbolic link, an empty
        directory too; a non-empty directory is left (the next `put` then fails and counts an error)."""
        path = self.path(key)
        try:
            if stat.S_ISDIR(path.lstat().st_mode):
                path.rmdir()
            else:
                path.unlink()
        except OSError:
            pass

    def clear(self) -> int:
        """Remove every entry; returns how many."""
        n = 0
        if self.dir.is_dir():
            for p in self.dir.glob(f"*{self.suffix}"):
                try:
                    p.unlink()
                    n += 1
                except OSError:
                    pass
        return n


class _NotAnEntry(Exception):
    """The path holds something that is not a readable entry file (a FIFO, device, directory, another
    user's file, or a size that no entry of this format has)."""


def _key_digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


def _pack(key: str, payload: bytes) -> bytes:
    return _HEADER.pack(MAGIC, len(payload), _key_digest(key), hashlib.sha256(payload).digest()) + payload


def _read_entry(path: Path) -> bytes:
    """The bytes of the entry file at `path`, read without following a link or blocking, and only if it
    is a regular file owned by this user whose size is its header's and at most `MAX_ENTRY_BYTES`."""
    st = os.lstat(path)                 # nothing but a regular file is even opened (a device could react)
    if not stat.S_ISREG(st.st_mode):
        raise _NotAnEntry(path)
    fd = os.open(path, _OPEN_FLAGS)
    try:
        st = os.fstat(fd)               # the file actually opened (it may have been replaced meanwhile)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_ENTRY_BYTES or st.st_size < _HEADER.size:
            raise _NotAnEntry(path)
        if hasattr(os, "getuid") and os.name != "nt" and st.st_uid != os.getuid():
            raise _NotAnEntry(path)
        header = _read_exactly(fd, _HEADER.size)
        magic, length, _, _ = _HEADER.unpack(header)
        if magic != MAGIC or length != st.st_size - _HEADER.size:
            raise _NotAnEntry(path)
        payload = _read_exactly(fd, length)
        if os.read(fd, 1):              # grew while being read
            raise _NotAnEntry(path)
        return header + payload
    finally:
        os.close(fd)


def _read_exactly(fd: int, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 24))
        if not chunk:                   # shrank while being read
            raise _NotAnEntry(fd)
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _unpack(data: bytes, key: str) -> bytes | None:
    """The payload of entry bytes `data` if they are a whole, intact entry written for `key`, else None."""
    if len(data) < _HEADER.size:
        return None
    magic, length, key_digest, digest = _HEADER.unpack_from(data)
    payload = data[_HEADER.size:]
    if (magic != MAGIC or length != len(payload) or key_digest != _key_digest(key)
            or hashlib.sha256(payload).digest() != digest):
        return None
    return payload


def _count(what: str) -> None:
    with _stats_lock:
        stats[what] += 1


def _warn(message: str) -> None:
    sys.stderr.write(f"arrc: warning: {message}\n")


_jaxlib = None


def _jaxlib_version() -> str:
    global _jaxlib
    if _jaxlib is None:
        try:
            from jaxlib.version import __version__ as v
        except ImportError:          # pragma: no cover
            v = "unknown"
        _jaxlib = v
    return _jaxlib


class _PlainUnpickler(pickle.Unpickler):
    """Unpickles plain data only: it resolves no global, so a pickle cannot construct an object of any
    class or call any function (the only ways a pickle runs code)."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"global {module}.{name} in a plain-data pickle")


def _lark_runtime_options() -> frozenset:
    """Options that Lark takes again when tables are loaded (postlex, callbacks, ...): not stored."""
    import lark.lark
    return frozenset(getattr(lark.lark, "_LOAD_ALLOWED_OPTIONS", ())) | {
        "postlex", "transformer", "lexer_callbacks", "tree_class", "_plugins"}


def cached_lark(grammar_text: str, options: dict, build):
    """The Lark parser for `grammar_text` and `options`: its tables loaded from the cache (a few ms) or
    built by `build()` (about 150 ms) and stored. Keyed on the grammar, the options and Lark's version.
    Not `Lark.save`/`Lark.load`: those pickle the postlex object and unpickle anything; the entry here is
    plain data (the runtime options are passed again on load) and is read by `_PlainUnpickler`."""
    import io

    import lark
    from lark.grammar import Rule
    from lark.lexer import TerminalDef
    store = default_cache()
    if store is None:
        return build()
    store = DiskCache(store.dir, ".lark")
    described = sorted((k, type(v).__qualname__ if k == "postlex" else repr(v)) for k, v in options.items())
    key = store.key(grammar_text.encode(), repr(described).encode(), "lark", lark.__version__)
    runtime = _lark_runtime_options()
    blob = store.get(key)
    if blob is not None:
        try:
            tables = _PlainUnpickler(io.BytesIO(blob)).load()
            if not (isinstance(tables, dict) and isinstance(tables.get("data"), dict)
                    and isinstance(tables.get("memo"), dict)):
                raise TypeError("not Lark tables")
            return lark.Lark._load_from_dict(tables["data"], tables["memo"],
                                             **{k: v for k, v in options.items() if k in runtime})
        except Exception:                   # unloadable tables: build them again
            _count("corrupt")
    parser = build()
    try:
        data, memo = parser.memo_serialize([TerminalDef, Rule])
        data["options"] = {k: v for k, v in data["options"].items() if k not in runtime}
        blob = pickle.dumps({"data": data, "memo": memo}, protocol=pickle.HIGHEST_PROTOCOL)
        _PlainUnpickler(io.BytesIO(blob)).load()        # tables holding an object are not stored
        store.put(key, blob)
    except Exception:
        _count("errors")
    return parser


def cached_text(suffix: str, parts: tuple, build) -> str:
    """Text that `build()` makes from `parts` alone (JAX's lowering of one linear-algebra call: ~36 ms each,
    passes/linalg.py), kept as `<key><suffix>` entries of the cache's directory: keyed on `repr(parts)`, the
    jaxlib version and the host, as an executable is. An entry that is not UTF-8 is made again."""
    store = default_cache()
    if store is None:
        return build()
    store = DiskCache(store.dir, suffix)
    key = store.key(repr(parts).encode(), b"", suffix)
    blob = store.get(key)
    if blob is not None:
        try:
            return blob.decode("utf-8")
        except UnicodeDecodeError:
            _count("corrupt")
    text = build()
    store.put(key, text.encode("utf-8"))
    return text


_default: DiskCache | None = None
_default_for: str | None = None


def default_cache() -> DiskCache | None:
    """The process's cache (following `ARRC_CACHE_DIR` if it changes), or None when disabled."""
    global _default, _default_for
    if not enabled():
        return None
    where = str(default_dir())
    if _default is None or _default_for != where:
        _default, _default_for = DiskCache(where), where
    return _default
