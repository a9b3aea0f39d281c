"""The persistent compile cache (compiler/cache.py): hits in a new process, invalidation, corrupt entries,
concurrent writers, `ARRC_NO_CACHE`, and callbacks (print, assert, guards) re-attached on a hit.

Timing belongs in bench/, not here: these tests check behaviour only.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import arrc
from arrc.compiler import cache as C
from arrc.runtime.pjrt import Executable

ROOT = Path(__file__).resolve().parent.parent

PROGRAM = """\
def scale(x: f32[n], k: f32) -> f32[n]:
    return x * k

def main() -> f32[3]:
    return scale([1.0, 2.0, 3.0], 2.0)
"""

# A child process: compile and run PROGRAM-like source, report the result and the cache's counters.
CHILD = """
import json, sys
import numpy as np
import arrc
from arrc.compiler import cache
source, guards, arg = sys.argv[1], (sys.argv[2] or None), json.loads(sys.argv[3])
mod = arrc.loads(source, guards=guards)
try:
    out = mod.main(*[np.asarray(a, np.float32) for a in arg])
    result = np.asarray(out).tolist()
except arrc.GuardError as err:
    result = type(err).__name__
sys.stdout.flush()
print("@@" + json.dumps({"result": result, "stats": cache.stats}))
"""


def child(cache_dir: Path, source: str = PROGRAM, guards: str = "", args=(), extra_env=None) -> dict:
    env = {**os.environ, "ARRC_CACHE_DIR": str(cache_dir), "TF_CPP_MIN_LOG_LEVEL": "2"}
    env.pop("ARRC_NO_CACHE", None)
    env.update(extra_env or {})
    done = subprocess.run([sys.executable, "-c", CHILD, source, guards, json.dumps(list(args))],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    line = [ln for ln in done.stdout.splitlines() if ln.startswith("@@")][-1]
    report = json.loads(line[2:])
    report["stdout"] = done.stdout
    return report


def entries(cache_dir: Path) -> list[Path]:
    return sorted(cache_dir.glob(f"*{C.SUFFIX}"))


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("ARRC_CACHE_DIR", str(d))
    monkeypatch.delenv("ARRC_NO_CACHE", raising=False)
    return d


def lowered(source: str = PROGRAM, entry: str = "main", *types: str):
    mod = arrc.loads(source)
    return mod[entry].lower(*[arrc.spec(t) for t in types])


# ---- across processes -------------------------------------------------------------------------------

def test_hit_in_a_new_process(cache_dir):
    first = child(cache_dir)
    assert first["result"] == [2.0, 4.0, 6.0]
    assert first["stats"]["misses"] >= 1 and first["stats"]["writes"] == first["stats"]["misses"]
    stored = {p.name: p.stat().st_ino for p in entries(cache_dir)}
    assert stored

    second = child(cache_dir)
    assert second["result"] == [2.0, 4.0, 6.0]
    assert second["stats"]["hits"] == first["stats"]["misses"]
    assert second["stats"]["misses"] == 0 and second["stats"]["writes"] == 0
    assert {p.name: p.stat().st_ino for p in entries(cache_dir)} == stored     # nothing rewritten


def test_source_change_invalidates(cache_dir):
    child(cache_dir)
    changed = child(cache_dir, PROGRAM.replace("x * k", "x * k + 1.0"))
    assert changed["result"] == [3.0, 5.0, 7.0]
    assert changed["stats"]["hits"] == 0 and changed["stats"]["misses"] >= 1
    again = child(cache_dir)                          # the first program's entry is still there
    assert again["stats"]["misses"] == 0 and again["result"] == [2.0, 4.0, 6.0]


def test_guards_change_invalidates_and_callbacks_reattach(cache_dir):
    source = "def main(x: f32[2]) -> f32[2]:\n    return log(x)\n"
    plain = child(cache_dir, source, "", [[1.0, -1.0]])
    assert plain["result"][0] == 0.0                  # unguarded: NaN comes back
    guarded = child(cache_dir, source, "nan", [[1.0, -1.0]])
    assert guarded["result"] == "NaNError" and guarded["stats"]["hits"] == 0
    warm = child(cache_dir, source, "nan", [[1.0, -1.0]])    # guard report from a loaded executable
    assert warm["result"] == "NaNError" and warm["stats"]["hits"] >= 1


def test_print_and_assert_callbacks_survive_a_hit(cache_dir):
    source = ('def main(x: f32[3]) -> f32[3]:\n    print("sum is", sum(x))\n'
              '    assert sum(x) < 100.0, "too big"\n    return x * 2.0\n')
    cold = child(cache_dir, source, "", [[1.0, 2.0, 3.0]])
    warm = child(cache_dir, source, "", [[1.0, 2.0, 3.0]])
    assert warm["stats"]["hits"] >= 1 and warm["stats"]["misses"] == 0
    for run in (cold, warm):
        assert "sum is 6.0" in run["stdout"] and run["result"] == [2.0, 4.0, 6.0]
    failing = child(cache_dir, source, "", [[100.0, 2.0, 3.0]])
    assert failing["result"] == "AssertionFailed" and failing["stats"]["hits"] >= 1


def test_no_cache_env_writes_nothing(cache_dir):
    out = child(cache_dir, extra_env={"ARRC_NO_CACHE": "1"})
    assert out["result"] == [2.0, 4.0, 6.0]
    assert out["stats"] == {"hits": 0, "misses": 0, "writes": 0, "corrupt": 0, "errors": 0, "evicted": 0}
    assert not cache_dir.exists() or not entries(cache_dir)


def test_cli_run_uses_the_cache(cache_dir):
    env = {**os.environ, "ARRC_CACHE_DIR": str(cache_dir)}
    env.pop("ARRC_NO_CACHE", None)
    cmd = [sys.executable, "-m", "arrc", "run", "examples/nansum.arr", "--format", "json"]
    first = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    stored = {p.name: p.stat().st_ino for p in entries(cache_dir)}       # (a write renames a new file over it)
    assert stored
    second = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0 and second.stdout == first.stdout
    assert {p.name: p.stat().st_ino for p in entries(cache_dir)} == stored


def test_cli_run_no_cache_writes_nothing(cache_dir):
    env = {**os.environ, "ARRC_CACHE_DIR": str(cache_dir)}
    env.pop("ARRC_NO_CACHE", None)
    cmd = [sys.executable, "-m", "arrc", "run", "--no-cache", "examples/nansum.arr", "--format", "json"]
    done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)
    assert not cache_dir.exists() or not entries(cache_dir)


def test_concurrent_writers_of_one_entry(cache_dir):
    """Processes compiling the same program at once: all succeed, one valid entry, no temporary files."""
    env = {**os.environ, "ARRC_CACHE_DIR": str(cache_dir), "TF_CPP_MIN_LOG_LEVEL": "2"}
    env.pop("ARRC_NO_CACHE", None)
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, PROGRAM, "", "[]"], env=env, cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    for out, _ in outs:
        assert json.loads(out.split("@@")[-1])["result"] == [2.0, 4.0, 6.0]
    assert len(entries(cache_dir)) == 1
    assert not [p for p in cache_dir.iterdir() if p.name.endswith(".tmp")]
    (entry,) = entries(cache_dir)
    assert C._unpack(entry.read_bytes(), entry.stem) is not None
    assert child(cache_dir)["stats"]["misses"] == 0


# ---- in this process ----------------------------------------------------------------------------------

def test_corrupt_entries_are_recompiled_and_replaced(cache_dir):
    low = lowered()
    first = Executable(low.module)
    assert not first.cache_hit
    (path,) = entries(cache_dir)
    good = path.read_bytes()
    header = C._HEADER.size
    payload = good[header:]
    bad_payload = payload[:100] + bytes(b ^ 0xFF for b in payload[100:200]) + payload[200:]
    valid_digest_junk = C._pack(path.stem, b"junk")
    for damaged in (good[: len(good) // 2],            # truncated
                    good[:header - 5],                   # truncated inside the header
                    good[:header] + bad_payload,         # flipped bytes
                    b"",                                 # empty
                    b"garbage" * 20,                     # not an entry
                    valid_digest_junk):                  # a well-formed entry that PJRT cannot load
        path.write_bytes(damaged)
        before = dict(C.stats)
        exe = Executable(low.module)
        assert not exe.cache_hit
        assert np.asarray(exe([])[0]).tolist() == [2.0, 4.0, 6.0]
        assert C.stats["corrupt"] == before["corrupt"] + 1
        assert C._unpack(path.read_bytes(), path.stem) is not None      # replaced by a good entry
        assert Executable(low.module).cache_hit


def test_unreadable_directory_is_a_miss_not_an_error(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("ARRC_CACHE_DIR", str(blocker / "cache"))
    exe = Executable(lowered().module)
    assert not exe.cache_hit and np.asarray(exe([])[0]).tolist() == [2.0, 4.0, 6.0]


@pytest.mark.skipif(os.name == "nt" or not hasattr(os, "getuid"), reason="POSIX permissions")
def test_directory_writable_by_others_is_refused(tmp_path, capsys):
    d = tmp_path / "shared"
    d.mkdir()
    d.chmod(0o777)
    store = C.DiskCache(d)
    assert not store.usable()
    assert not store.put(store.key(b"m", b"o", "cpu"), b"x")
    assert "writable by other users" in capsys.readouterr().err
    fresh = C.DiskCache(tmp_path / "new" / "cache")
    assert fresh.usable() and (fresh.dir.stat().st_mode & 0o777) == 0o700


def test_disabled_cache_compiles(cache_dir, monkeypatch):
    monkeypatch.setenv("ARRC_NO_CACHE", "1")
    assert C.default_cache() is None
    exe = Executable(lowered().module)
    assert not exe.cache_hit and not cache_dir.exists()
    monkeypatch.delenv("ARRC_NO_CACHE")
    C.disable()
    try:
        assert C.default_cache() is None
    finally:
        C.enable()
    assert C.default_cache() is not None


def test_key_covers_every_input(monkeypatch):
    store = C.DiskCache("/nonexistent")
    base = store.key(b"module", b"options", "cpu|cpu", "callbacks=0")
    assert base == store.key(b"module", b"options", "cpu|cpu", "callbacks=0")
    variants = [store.key(b"module2", b"options", "cpu|cpu", "callbacks=0"),
                store.key(b"module", b"options2", "cpu|cpu", "callbacks=0"),
                store.key(b"module", b"options", "gpu|H100", "callbacks=0"),
                store.key(b"module", b"options", "cpu|cpu", "callbacks=1"),
                store.key(b"module", b"options", "cpu|cpu", "callbacks=0", "guards=nan"),
                store.key(b"moduleoptions", b"", "cpu|cpu", "callbacks=0")]       # no ambiguity in joins
    monkeypatch.setattr(C, "_jaxlib", "0.0.0")
    variants.append(store.key(b"module", b"options", "cpu|cpu", "callbacks=0"))
    monkeypatch.setattr(C, "_jaxlib", None)
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=true")
    variants.append(store.key(b"module", b"options", "cpu|cpu", "callbacks=0"))
    assert len({base, *variants}) == len(variants) + 1


def test_key_extra_separates_entries(cache_dir):
    low = lowered()
    assert not Executable(low.module, key_extra=("guards=nan",)).cache_hit
    assert not Executable(low.module, key_extra=("guards=inf",)).cache_hit
    assert Executable(low.module, key_extra=("guards=nan",)).cache_hit
    assert len(entries(cache_dir)) == 2


def test_threads_writing_and_reading_one_key(tmp_path):
    store = C.DiskCache(tmp_path)
    key = store.key(b"m", b"o", "cpu")
    payloads = [bytes([i]) * (50_000 + i) for i in range(8)]
    seen, errors = [], []

    def writer(p):
        for _ in range(20):
            store.put(key, p)

    def reader():
        for _ in range(200):
            got = store.get(key)
            if got is not None and got not in payloads:
                errors.append(len(got))
            seen.append(got is not None)

    threads = [threading.Thread(target=writer, args=(p,)) for p in payloads] + \
              [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert store.get(key) in payloads
    assert [p.name for p in tmp_path.iterdir()] == [store.path(key).name]      # no temporary files left


def test_results_and_64_bit_arguments(cache_dir):
    src = "def f(a: f64[3], b: i64[3]) -> (f64[3], i64):\n    return a * 2.0, sum(b)\n"
    mod = arrc.loads(src)
    a, b = np.array([1e-300, 1.0 + 2 ** -40, 3.0]), np.array([2 ** 40, 1, 2], np.int64)
    for _ in range(3):                     # first call, then the fast path
        x, s = mod.f(a, b)
        assert x.dtype == np.float64 and np.asarray(x).tolist() == (a * 2.0).tolist()
        assert s.dtype == np.int64 and int(s) == 2 ** 40 + 3
    import jax
    with jax.enable_x64(True):
        da, db = jax.device_put(a), jax.device_put(b)
    for _ in range(3):
        x, s = mod.f(da, db)
        assert np.asarray(x).tolist() == (a * 2.0).tolist() and int(s) == 2 ** 40 + 3


def test_check_compile_and_version_import_no_runtime(cache_dir):
    """The cache is used by the front end too (parser tables): it must not pull in jax or PJRT."""
    script = ("import sys, arrc.cli\n"
              "for argv in (['--version'], ['check', 'examples/nansum.arr'],\n"
              "             ['compile', 'examples/nansum.arr', '--entry', 'nansum', '--shape', 'n=4']):\n"
              "    assert arrc.cli.main(argv) == 0, argv\n"
              "bad = [m for m in sys.modules if m == 'jax' or m.startswith('jax.') or m in ('jaxlib._jax', "
              "'jaxlib.xla_client', 'jaxlib.xla_extension')]\n"
              "print('@@' + ','.join(sorted(bad)))\n")
    env = {**os.environ, "ARRC_CACHE_DIR": str(cache_dir)}
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.rsplit("@@", 1)[-1].strip() == ""


def test_parser_tables_are_cached(cache_dir):
    from lark import Lark
    grammar = 'start: NUMBER ("+" NUMBER)*\n%import common.NUMBER\n%ignore " "\n'
    options = dict(parser="lalr", propagate_positions=True)
    built = []

    def build():
        built.append(1)
        return Lark(grammar, **options)

    first = C.cached_lark(grammar, options, build)
    (entry,) = cache_dir.glob("*.lark")
    second = C.cached_lark(grammar, options, build)
    assert len(built) == 1
    assert second.parse("1 + 2") == first.parse("1 + 2")
    entry.write_bytes(entry.read_bytes()[:50])                 # truncated: built again and replaced
    assert C.cached_lark(grammar, options, build).parse("3").children[0] == "3"
    assert len(built) == 2 and C._unpack(entry.read_bytes(), entry.stem) is not None
    C.cached_lark(grammar + "\n", options, build)               # another grammar: another entry
    assert len(built) == 3 and len(list(cache_dir.glob("*.lark"))) == 2


# ---- JAX's lowerings of linear-algebra calls ----------------------------------------------------------

LINALG = "def f(a: f64[3, 3], b: f64[3]) -> f64[3]:\n    return solve(a, b) + diag(cholesky(a @ transpose(a)))\n"
A = np.array([[4.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 2.0]])
B = np.array([1.0, 2.0, 3.0])


def _linalg_call(monkeypatch) -> np.ndarray:
    """A call as a fresh process makes it, as far as lowering goes: the per-process table of lowerings emptied."""
    from arrc.passes import linalg
    monkeypatch.setattr(linalg, "_lowered", {})
    return np.asarray(arrc.loads(LINALG).f(A, B))


def test_linalg_lowerings_are_kept_for_the_next_process(cache_dir, monkeypatch):
    """JAX's lowering of each linear-algebra call (~36 ms) is made once and read back from the cache's
    directory by a later process, where JAX is not asked again."""
    from arrc.passes import linalg
    first = _linalg_call(monkeypatch)
    np.testing.assert_allclose(first, np.linalg.solve(A, B) + np.diag(np.linalg.cholesky(A @ A.T)))
    made = sorted(cache_dir.glob("*.linalg"))
    assert len(made) == 2                       # solve, cholesky

    def refuse(*key):
        raise AssertionError(f"lowered again: {key[0]}")
    monkeypatch.setattr(linalg, "_lower_with_jax", refuse)
    np.testing.assert_array_equal(_linalg_call(monkeypatch), first)
    assert sorted(cache_dir.glob("*.linalg")) == made


def test_a_damaged_linalg_entry_is_made_again(cache_dir, monkeypatch):
    first = _linalg_call(monkeypatch)
    for entry in cache_dir.glob("*.linalg"):
        data = bytearray(entry.read_bytes())
        data[-1] ^= 0xFF                        # the payload's digest no longer matches
        entry.write_bytes(bytes(data))
    np.testing.assert_array_equal(_linalg_call(monkeypatch), first)
    assert len(list(cache_dir.glob("*.linalg"))) == 2


# ---- the size limit ----------------------------------------------------------------------------------

def test_entries_used_longest_ago_are_evicted_past_the_limit(tmp_path, monkeypatch):
    monkeypatch.setenv("ARRC_CACHE_MAX_BYTES", "4000")
    store, size = C.DiskCache(tmp_path), 1000 - C._HEADER.size       # an entry of 1000 bytes on disk
    foreign = tmp_path / "notes.txt"
    foreign.write_bytes(b"n" * 10_000)                                  # not an entry: never removed
    keys = [store.key(str(i).encode(), b"", "cpu") for i in range(6)]
    for t, key in enumerate(keys[:4]):
        assert store.put(key, bytes([t]) * size)
        os.utime(store.path(key), (1000 + t, 1000 + t))                 # written in this order
    assert store.get(keys[0]) is not None                               # used now: the newest
    before = dict(C.stats)
    assert store.put(keys[4], b"e" * size)       # 5000 bytes past 4000: down to 3000, oldest first
    assert C.stats["evicted"] - before["evicted"] == 2
    assert [store.get(k) is not None for k in keys[:5]] == [True, False, False, True, True]
    assert foreign.read_bytes() == b"n" * 10_000
    monkeypatch.setenv("ARRC_CACHE_MAX_BYTES", "500")                   # one entry larger than the limit:
    fresh = C.DiskCache(tmp_path)                                       # it is kept, the others go
    assert fresh.put(keys[5], b"f" * size)
    assert [fresh.get(k) is not None for k in keys] == [False] * 5 + [True]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["notes.txt", fresh.path(keys[5]).name])


def test_the_limit_is_counted_again_only_when_this_process_may_have_reached_it(tmp_path, monkeypatch):
    monkeypatch.setenv("ARRC_CACHE_MAX_BYTES", "10000")
    store, counted = C.DiskCache(tmp_path), []
    scandir = os.scandir
    monkeypatch.setattr(C.os, "scandir", lambda path: counted.append(path) or scandir(path))
    for i in range(12):                          # 1000 bytes each: room for 10, then counted again
        assert store.put(store.key(str(i).encode(), b"", "cpu"), b"x" * (1000 - C._HEADER.size))
    assert len(counted) == 2
    assert sum(p.stat().st_size for p in tmp_path.iterdir()) <= 10000


@pytest.mark.parametrize("value, limit", [("0", 0), ("123", 123), ("", C.MAX_CACHE_BYTES),
                                          ("lots", C.MAX_CACHE_BYTES), ("-5", C.MAX_CACHE_BYTES)])
def test_cache_size_setting(monkeypatch, capsys, value, limit):
    monkeypatch.setenv("ARRC_CACHE_MAX_BYTES", value)
    assert C.max_cache_bytes() == limit
    warned = capsys.readouterr().err
    assert warned == ("" if value in ("0", "123", "") else
                      f"arrc: warning: ARRC_CACHE_MAX_BYTES={value!r} is not a number of bytes; using "
                      f"{C.MAX_CACHE_BYTES:,}\n")


def test_no_limit_removes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("ARRC_CACHE_MAX_BYTES", "0")
    store = C.DiskCache(tmp_path)
    for i in range(5):
        assert store.put(store.key(str(i).encode(), b"", "cpu"), b"x" * 1000)
    assert len(list(tmp_path.iterdir())) == 5
