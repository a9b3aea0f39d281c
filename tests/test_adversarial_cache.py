"""Adversarial compile-cache entries (issue 12, item 9): whatever sits at an entry's path — another
program's entry, a damaged file, a FIFO, a link to /dev/zero, a directory, another user's file, a pickle
that runs code — the program computes its own result and the entry counts as corrupt, never a crash, a
hang, a flood of memory or another program's numbers. The same for the parser's tables (`<key>.lark`).

Special files that made the old code hang or read forever run in a child process with a timeout and a
bounded address space, so a regression fails the test instead of hanging or starving the suite.
"""
from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import arrc
from arrc.compiler import cache as C

ROOT = Path(__file__).resolve().parent.parent
posix = pytest.mark.skipif(os.name == "nt" or not hasattr(os, "mkfifo"), reason="POSIX special files")

# Two programs with the same signature: an entry of one at the other's path would run the wrong one.
PROGRAM_A = "def main(x: f32[n]) -> f32[n]:\n    return x * 2.0 + 1.0\n"
PROGRAM_B = "def main(x: f32[n]) -> f32[n]:\n    return x * 3.0 - 1.0\n"
X = np.array([1.0, 2.0, -3.5, 4.25], np.float32)
EXPECTED = {PROGRAM_A: X * np.float32(2.0) + np.float32(1.0),
            PROGRAM_B: X * np.float32(3.0) - np.float32(1.0)}

# A child: warm the backend, bound the address space to what it uses plus 2 GiB (reading /dev/zero must
# fail fast, not take the machine's memory), then build the Lark parser (its tables come from the cache;
# programs are usually parsed by fastparse, which does not need them), compile and run; report result and
# counters.
CHILD = r"""
import json, resource, sys
import numpy as np
import arrc
from arrc.compiler import cache
from arrc.runtime import pjrt
pjrt.backend("cpu")
with open("/proc/self/status") as f:
    vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
resource.setrlimit(resource.RLIMIT_AS, (vm + (2 << 30), resource.RLIM_INFINITY))
source, x = sys.argv[1], np.asarray(json.loads(sys.argv[2]), np.float32)
from arrc.compiler.parse import _parser
assert _parser().parse(source, start="module").data == "module"
out = arrc.loads(source).main(x)
print("@@" + json.dumps({"result": np.asarray(out).tolist(), "stats": cache.stats}))
"""
HANG_GUARD_S = 120          # generous: only there so that a hang fails the test instead of the suite


def child(cache_dir: Path, source: str = PROGRAM_B) -> dict:
    env = {**os.environ, "ARRC_CACHE_DIR": str(cache_dir), "TF_CPP_MIN_LOG_LEVEL": "2"}
    env.pop("ARRC_NO_CACHE", None)
    try:
        done = subprocess.run([sys.executable, "-c", CHILD, source, json.dumps(X.tolist())], env=env,
                              cwd=ROOT, capture_output=True, text=True, timeout=HANG_GUARD_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the run hung (no result after {HANG_GUARD_S} s)")
    assert done.returncode == 0, done.stderr
    return json.loads([ln for ln in done.stdout.splitlines() if ln.startswith("@@")][-1][2:])


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("ARRC_CACHE_DIR", str(d))
    monkeypatch.delenv("ARRC_NO_CACHE", raising=False)
    return d


def xc_entries(cache_dir: Path) -> set[Path]:
    return set(cache_dir.glob(f"*{C.SUFFIX}"))


def run(source: str) -> np.ndarray:
    """A fresh module (no in-memory executable), so every run goes through the disk cache."""
    return np.asarray(arrc.loads(source).main(X))


def delta(before: dict) -> dict:
    return {k: C.stats[k] - before[k] for k in C.stats}


def entry_of(cache_dir: Path, source: str) -> Path:
    """Run `source` once (cold) and return the one entry it wrote."""
    before = xc_entries(cache_dir)
    assert run(source).tolist() == EXPECTED[source].tolist()
    (path,) = xc_entries(cache_dir) - before
    return path


def valid(path: Path, key: str | None = None) -> bool:
    """A regular file holding a good entry for `key` (by default the one its name says)."""
    return (path.is_file() and not path.is_symlink()
            and C._unpack(path.read_bytes(), key or path.stem) is not None)


def assert_recompiled(path: Path, source: str, *, rewritten: bool = True) -> None:
    """A run with `path` damaged: its own result, one corrupt entry, a compile; then (rewritten) a hit."""
    before = dict(C.stats)
    assert run(source).tolist() == EXPECTED[source].tolist()
    d = delta(before)
    assert d["corrupt"] == 1 and d["hits"] == 0 and d["misses"] == 1, d
    if not rewritten:
        return
    assert d["writes"] == 1 and d["errors"] == 0, d
    assert valid(path)
    before = dict(C.stats)
    for _ in range(3):
        assert run(source).tolist() == EXPECTED[source].tolist()
    assert delta(before)["hits"] == 3 and delta(before)["corrupt"] == 0


# ---- another program's entry -----------------------------------------------------------------------

@pytest.mark.parametrize("how", ["copied", "renamed"])
def test_swapped_entry_runs_its_own_program(cache_dir, how):
    a, b = entry_of(cache_dir, PROGRAM_A), entry_of(cache_dir, PROGRAM_B)
    assert not np.array_equal(EXPECTED[PROGRAM_A], EXPECTED[PROGRAM_B])
    if how == "copied":
        shutil.copyfile(a, b)
    else:
        os.replace(a, b)
    assert_recompiled(b, PROGRAM_B)
    if how == "copied":            # A's own entry is untouched and still A's
        before = dict(C.stats)
        assert run(PROGRAM_A).tolist() == EXPECTED[PROGRAM_A].tolist() and delta(before)["hits"] == 1


def test_key_digest_is_checked_by_the_store(tmp_path):
    store = C.DiskCache(tmp_path)
    ka, kb = store.key(b"a", b"o", "cpu"), store.key(b"b", b"o", "cpu")
    assert store.put(ka, b"payload of a") and store.put(kb, b"payload of b")
    shutil.copyfile(store.path(ka), store.path(kb))
    before = dict(C.stats)
    assert store.get(kb) is None and delta(before)["corrupt"] == 1
    assert not store.path(kb).exists() and store.get(ka) == b"payload of a"


# ---- damaged entries ---------------------------------------------------------------------------------

def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x5A]) + data[at + 1:]


DAMAGE = {
    "zero-byte": lambda good, key: b"",
    "truncated-in-header": lambda good, key: good[: C._HEADER.size - 7],
    "header-only": lambda good, key: good[: C._HEADER.size],
    "truncated-payload": lambda good, key: good[: len(good) // 2],
    "one-byte-longer": lambda good, key: good + b"\0",
    "bad-digest": lambda good, key: _flip(good, C._HEADER.size + (len(good) - C._HEADER.size) // 2),
    "bad-key-digest": lambda good, key: _flip(good, 16),
    "old-format": lambda good, key: b"ARRCXC01" + good[8:],
    "huge-length": lambda good, key: good[:8] + (10 ** 12).to_bytes(8, "little") + good[16:],
    "negative-length": lambda good, key: good[:8] + b"\xff" * 8 + good[16:],
    "garbage": lambda good, key: os.urandom(4096),
    "loadable-envelope-bad-executable": lambda good, key: C._pack(key, b"not an executable" * 10),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_entry_is_recompiled(cache_dir, damage):
    path = entry_of(cache_dir, PROGRAM_B)
    path.write_bytes(DAMAGE[damage](path.read_bytes(), path.stem))
    assert_recompiled(path, PROGRAM_B)


def _sparse_entry(path: Path) -> None:
    """A file one byte over MAX_ENTRY_BYTES whose header agrees with its size (sparse: no disk used)."""
    size = C.MAX_ENTRY_BYTES + 1
    with open(path, "wb") as f:
        f.write(C.MAGIC + (size - C._HEADER.size).to_bytes(8, "little"))
        f.truncate(size)


def test_oversized_sparse_entry_is_not_read(cache_dir, monkeypatch):
    path = entry_of(cache_dir, PROGRAM_B)
    _sparse_entry(path)
    reads = []
    real = C._read_exactly
    with monkeypatch.context() as m:
        m.setattr(C, "_read_exactly", lambda fd, n: reads.append(n) or real(fd, n))
        before = dict(C.stats)
        assert C.DiskCache(path.parent).get(path.stem) is None
    assert delta(before)["corrupt"] == 1 and sum(reads) <= C._HEADER.size and not path.exists()
    _sparse_entry(path)
    assert_recompiled(path, PROGRAM_B)


def test_put_refuses_an_oversized_payload(tmp_path, monkeypatch):
    store = C.DiskCache(tmp_path)
    monkeypatch.setattr(C, "MAX_ENTRY_BYTES", 1000)
    key = store.key(b"m", b"o", "cpu")
    assert not store.put(key, b"x" * 1000) and not store.path(key).exists()
    assert store.put(key, b"x" * 100) and store.get(key) == b"x" * 100


# ---- things that are not files -----------------------------------------------------------------------

def test_empty_directory_at_the_entry_path(cache_dir):
    path = entry_of(cache_dir, PROGRAM_B)
    path.unlink()
    path.mkdir()
    assert_recompiled(path, PROGRAM_B)


def test_nonempty_directory_at_the_entry_path_is_left_alone(cache_dir):
    path = entry_of(cache_dir, PROGRAM_B)
    path.unlink()
    path.mkdir()
    (path / "keep").write_text("not ours to delete")
    for _ in range(2):                   # each run: its result, corrupt, and a write that cannot happen
        before = dict(C.stats)
        assert run(PROGRAM_B).tolist() == EXPECTED[PROGRAM_B].tolist()
        d = delta(before)
        assert d["corrupt"] == 1 and d["misses"] == 1 and d["writes"] == 0 and d["errors"] == 1, d
    assert (path / "keep").read_text() == "not ours to delete"


@posix
def test_symlink_to_a_valid_entry_is_not_followed(cache_dir, tmp_path):
    """Even a link to this key's own good entry: links are never followed, and only the link is removed."""
    path = entry_of(cache_dir, PROGRAM_B)
    outside = tmp_path / "elsewhere.xc"
    os.replace(path, outside)
    path.symlink_to(outside)
    assert_recompiled(path, PROGRAM_B)
    assert valid(outside, path.stem)             # the link's target is left as it was


@posix
@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_symlink_to_dev_zero_neither_floods_memory_nor_fails(cache_dir):
    path = entry_of(cache_dir, PROGRAM_B)
    path.unlink()
    path.symlink_to("/dev/zero")
    out = child(cache_dir)
    assert out["result"] == EXPECTED[PROGRAM_B].tolist()
    assert out["stats"]["corrupt"] == 1 and out["stats"]["writes"] == 1 and out["stats"]["hits"] == 0
    assert valid(path) and os.path.exists("/dev/zero")


@posix
def test_fifo_at_the_entry_path_does_not_hang(cache_dir):
    path = entry_of(cache_dir, PROGRAM_B)
    path.unlink()
    os.mkfifo(path)
    out = child(cache_dir)               # fails (instead of hanging) if opening the FIFO blocks
    assert out["result"] == EXPECTED[PROGRAM_B].tolist()
    assert out["stats"]["corrupt"] == 1 and out["stats"]["writes"] == 1 and out["stats"]["hits"] == 0
    assert valid(path)


@posix
def test_fifo_in_this_process_does_not_block(cache_dir):
    """The store alone, in this process, with a thread as the hang guard."""
    import threading
    store = C.DiskCache(cache_dir)
    key = store.key(b"m", b"o", "cpu")
    store.usable()
    os.mkfifo(store.path(key))
    got = []
    t = threading.Thread(target=lambda: got.append(store.get(key)), daemon=True)
    t.start()
    t.join(HANG_GUARD_S)
    assert not t.is_alive(), "DiskCache.get blocked on a FIFO"
    assert got == [None] and not store.path(key).exists()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="making a file owned by another user needs root")
def test_entry_owned_by_another_user_is_refused(cache_dir):
    path = entry_of(cache_dir, PROGRAM_B)
    os.chown(path, 65534, 65534)
    assert_recompiled(path, PROGRAM_B)
    assert path.stat().st_uid == os.getuid()


# ---- the parser's tables (`<key>.lark`) ----------------------------------------------------------------

SUMS = 'start: NUMBER ("+" NUMBER)*\n%import common.NUMBER\n%ignore " "\n'
PRODUCTS = 'start: NUMBER ("*" NUMBER)*\n%import common.NUMBER\n%ignore " "\n'
LARK_OPTIONS = dict(parser="lalr", propagate_positions=True)


class Builder:
    def __init__(self, grammar):
        self.grammar, self.count = grammar, 0

    def __call__(self):
        from lark import Lark
        self.count += 1
        return Lark(self.grammar, **LARK_OPTIONS)


def lark_entry(cache_dir: Path, grammar: str) -> tuple[Path, Builder]:
    before = set(cache_dir.glob("*.lark"))
    build = Builder(grammar)
    C.cached_lark(grammar, LARK_OPTIONS, build)
    (path,) = set(cache_dir.glob("*.lark")) - before
    assert valid(path) and build.count == 1
    return path, build


def assert_tables_rebuilt(path: Path, grammar: str, build: Builder, *, corrupt: int = 1) -> None:
    text, op = ("2 + 3", "+") if grammar == SUMS else ("2 * 3", "*")
    before, built = dict(C.stats), build.count
    parser = C.cached_lark(grammar, LARK_OPTIONS, build)
    assert [str(t) for t in parser.parse(text).children] == ["2", "3"]
    other = "2 * 3" if op == "+" else "2 + 3"
    from lark.exceptions import UnexpectedInput
    with pytest.raises(UnexpectedInput):
        parser.parse(other)                       # this grammar's parser, not the other one's
    assert build.count == built + 1 and delta(before)["corrupt"] == corrupt
    assert valid(path)
    C.cached_lark(grammar, LARK_OPTIONS, build)
    assert build.count == built + 1               # loaded from the rewritten entry


def test_swapped_lark_tables(cache_dir):
    sums, _ = lark_entry(cache_dir, SUMS)
    products, build = lark_entry(cache_dir, PRODUCTS)
    shutil.copyfile(sums, products)
    assert_tables_rebuilt(products, PRODUCTS, build)


@pytest.mark.parametrize("damage", ["zero-byte", "truncated-payload", "bad-digest", "huge-length", "garbage"])
def test_damaged_lark_tables(cache_dir, damage):
    path, build = lark_entry(cache_dir, SUMS)
    path.write_bytes(DAMAGE[damage](path.read_bytes(), path.stem))
    assert_tables_rebuilt(path, SUMS, build)


class _RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').write('ran')",))


def test_lark_tables_that_would_run_code_are_not_unpickled(cache_dir, tmp_path):
    """A well-formed entry (right key, right digest) whose pickle calls a function: refused, nothing runs."""
    path, build = lark_entry(cache_dir, SUMS)
    marker = tmp_path / "code-ran"
    path.write_bytes(C._pack(path.stem, pickle.dumps({"data": _RunsCode(str(marker)), "memo": {}})))
    assert_tables_rebuilt(path, SUMS, build)
    assert not marker.exists()


def test_lark_tables_are_plain_data(cache_dir):
    path, _ = lark_entry(cache_dir, SUMS)
    import io
    tables = C._PlainUnpickler(io.BytesIO(C._unpack(path.read_bytes(), path.stem))).load()
    assert set(tables) == {"data", "memo"}


def test_lark_tables_directory_and_symlink(cache_dir, tmp_path):
    path, build = lark_entry(cache_dir, SUMS)
    path.unlink()
    path.mkdir()
    assert_tables_rebuilt(path, SUMS, build)
    if hasattr(os, "symlink"):
        outside = tmp_path / "tables.lark"
        os.replace(path, outside)
        path.symlink_to(outside)
        assert_tables_rebuilt(path, SUMS, build)
        assert valid(outside, path.stem)


def _arr_tables(cache_dir: Path) -> Path:
    """The arr grammar's tables entry, written by a first child run."""
    out = child(cache_dir, PROGRAM_A)
    assert out["result"] == EXPECTED[PROGRAM_A].tolist()
    (path,) = cache_dir.glob("*.lark")
    assert valid(path)
    return path


@posix
@pytest.mark.parametrize("special", ["fifo", "dev-zero", "directory"])
def test_arr_parser_tables_special_files(cache_dir, special):
    if special == "dev-zero" and not os.path.exists("/dev/zero"):
        pytest.skip("needs /dev/zero")
    path = _arr_tables(cache_dir)
    path.unlink()
    make = {"fifo": os.mkfifo, "dev-zero": lambda p: p.symlink_to("/dev/zero"), "directory": Path.mkdir}
    make[special](path)
    out = child(cache_dir, PROGRAM_B)
    assert out["result"] == EXPECTED[PROGRAM_B].tolist()
    assert out["stats"]["corrupt"] == 1 and out["stats"]["errors"] == 0
    assert valid(path)
