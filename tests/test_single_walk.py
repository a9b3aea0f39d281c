"""A function whose parameter types are all concrete is lowered while it is checked (one walk, not two:
compiler/program.py `_lower_entries`). That walk must change nothing a user sees: the same diagnostics
(every error, each warning once), the same StableHLO text, and a Lowered handed out once only."""
from __future__ import annotations

import gc
import re
from pathlib import Path

import numpy as np
import pytest
from fuzz.gen_programs import case_from_seed

import arrc
from arrc.compiler.diagnostics import CompileError
from arrc.compiler.lower import ModuleLowering
from arrc.compiler.program import check_program
from arrc.compiler.span import Source

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"^```arr\n(.*?)^```", re.S | re.M)


def _corpus() -> list[tuple[str, str]]:
    """(name, source): the examples, the golden diagnostics, every arr block of the docs, generated programs."""
    found = [(p.name, p.read_text(encoding="utf-8")) for p in sorted((ROOT / "examples").rglob("*.arr"))]
    found += [(p.name, p.read_bytes().decode("utf-8", "replace"))
              for p in sorted((ROOT / "tests" / "golden" / "diagnostics").glob("*.arr"))]
    for page in sorted((ROOT / "docs").rglob("*.md")):
        for i, m in enumerate(BLOCK.finditer(page.read_text(encoding="utf-8"))):
            found.append((f"{page.name}#{i}", m.group(1)))
    found += [(f"seed={s}", case_from_seed(s)[0].source) for s in range(40)]
    return found


CORPUS = _corpus()


def _outcome(text: str, name: str, lower_entries: bool):
    """The rendered diagnostics (errors raised, or warnings kept), and the program when it checks."""
    try:
        program = check_program(Source(name, text), lower_entries=lower_entries)
    except CompileError as err:
        return str(err), None
    except Exception as err:    # noqa: BLE001  (a crash must at least be the same crash)
        return f"{type(err).__name__}: {err}", None
    return [(d.code, d.message, d.span) for d in program.warnings], program


def test_the_corpus_is_large_and_varied():
    assert len(CORPUS) > 150
    programs = [_outcome(t, n, True)[1] for n, t in CORPUS]
    assert sum(bool(p and p.lowered) for p in programs) > 15


@pytest.mark.parametrize("name, text", CORPUS, ids=[n for n, _ in CORPUS])
def test_one_walk_reports_and_lowers_as_two(name, text):
    one, program = _outcome(text, name, True)
    two, _ = _outcome(text, name, False)
    assert one == two
    for fn, lowered in list(program.lowered.items()) if program else []:
        fresh = ModuleLowering(program).lower(fn, lowered.arg_types)
        assert lowered.as_text() == fresh.as_text(), fn
        assert lowered.warnings == fresh.warnings and lowered.effect_sites == fresh.effect_sites == []


ENTRY_AND_HELPERS = """\
def scale(x: f32[4]) -> f32[4]:
    return x * 2.0

def shifted(x: f32[n]) -> f32[n]:
    return x + 1.0

def shout(x: f32[4]) -> f32[4]:
    print("x is", x)
    return x

def main(x: f32[4]) -> f32[4]:
    return scale(shifted(x))

def other(y: f32[2, 2]) -> f32[2, 2]:
    return y.T
"""


def test_entries_are_lowered_while_checked_and_their_helpers_are_not():
    program = check_program(Source("m.arr", ENTRY_AND_HELPERS))
    # `scale` is called by `main` (inlined there), `shifted` has a shape variable, `shout` prints (its
    # calling convention depends on which functions print, known only after every walk)
    assert sorted(program.lowered) == ["main", "other"]
    assert program.effectful == {"shout"}


def test_a_lowered_function_is_handed_out_once():
    mod = arrc.loads(ENTRY_AND_HELPERS, guards="nan")
    spec = arrc.spec("f32[4]")
    made = mod._program.lowered["main"]
    first = mod.main.lower(spec)
    assert first is made and "main" not in mod._program.lowered
    second = mod.main.lower(spec)
    assert second is not first and second.as_text() == first.as_text()
    # the first call guards and compiles a module of its own: the one taken above stays as it was
    text = first.as_text()
    assert mod.main([1.0, 2.0, 3.0, 4.0]).tolist() == [4.0, 6.0, 8.0, 10.0]
    assert first.as_text() == text and "custom_call" not in text


def test_recursion_through_a_concrete_entry_is_still_e0104():
    src = ("def f(x: f32[2]) -> f32[2]:\n    return g(x)\n\n"
           "def g(x: f32[2]) -> f32[2]:\n    return f(x)\n")
    with pytest.raises(CompileError) as info:
        check_program(Source("r.arr", src))
    assert [d.code for d in info.value.diagnostics] == ["E0104"]


def test_a_warning_is_reported_once_and_nothing_is_kept():
    src = "def f(x: i64[2], y: f32[2]) -> f32[2]:\n    return x * y\n"
    program = check_program(Source("w.arr", src))
    assert [d.code for d in program.warnings] == ["W0001"] and not program.lowered
    with pytest.raises(CompileError):
        check_program(Source("w.arr", src), werror=True)


def test_an_error_only_specialization_finds_is_raised_by_lower_as_before():
    """`third` checks on its own (n is unknown); `main` inlines it with n = 2, where x[3] is out of range."""
    src = ("def third(x: f32[n]) -> f32:\n    return x[3]\n\n"
           "def main(x: f32[2]) -> f32:\n    return third(x)\n")
    mod = arrc.loads(src, filename="s.arr")
    assert not mod._program.lowered and not mod.warnings
    with pytest.raises(CompileError) as info:
        mod.main.lower(arrc.spec("f32[2]"))
    [d] = info.value.diagnostics
    assert (d.code, d.span.line, d.span.col) == ("E0208", 2, 14)


def test_the_helpers_of_an_entry_that_prints_are_not_lowered_either():
    src = ("def helper(x: f32[2]) -> f32[2]:\n    return x * 2.0\n\n"
           "def main(x: f32[2]) -> f32[2]:\n    print(x)\n    return helper(x)\n")
    program = check_program(Source("p.arr", src))
    assert not program.lowered and program.effectful == {"main"}


def _concrete_functions(n: int) -> str:
    return "".join(f"def f{k}(x: f32[4]) -> f32[4]:\n    return x * 2.0 + {k}.0\n\n" for k in range(n))


def test_the_lowerings_made_at_definition_share_one_context():
    """Each kept Lowered had an MLIR context of its own: every new context then cost more than the one
    before (checking 1,000 / 2,000 / 8,000 such functions took 1.8 / 7.6 / 111 s). Counted, not timed."""
    from jaxlib.mlir import ir
    gc.collect()
    before = ir.Context._get_live_count()
    program = check_program(Source("many.arr", _concrete_functions(300)))
    assert len(program.lowered) == 300
    assert len({id(low.context) for low in program.lowered.values()}) == 1
    assert ir.Context._get_live_count() - before <= 1
    first = program.lowered["f7"]
    assert "stablehlo.add" in first.as_text() and "7.000000e+00" in first.as_text()


def _walk_counter(monkeypatch) -> list:
    from arrc.compiler.check import FunctionWalk
    walked: list = []
    real_run = FunctionWalk.run

    def counting_run(self, *args, **kwargs):
        walked.append(self.fn.name)
        return real_run(self, *args, **kwargs)
    monkeypatch.setattr(FunctionWalk, "run", counting_run)
    return walked


@pytest.mark.parametrize("order", ["helpers first", "entry first"])
def test_a_call_chain_is_lowered_once_from_its_entry(order, monkeypatch):
    """In a chain f60 -> f59 -> ... -> f0 with concrete types only f60 is lowered while checked; the
    others are checked once each. (Each link was an entry once the link above had been lowered, so every
    other link lowered the rest of the chain again: a chain of 400 took 40 s.)"""
    links = [f"def f0(x: f32[2]) -> f32[2]:\n    return x + 1.0\n"]
    links += [f"def f{k}(x: f32[2]) -> f32[2]:\n    return f{k - 1}(x) * 2.0\n" for k in range(1, 61)]
    src = "\n".join(links if order == "helpers first" else links[::-1])
    walked = _walk_counter(monkeypatch)
    program = check_program(Source("chain.arr", src))
    assert list(program.lowered) == ["f60"]
    assert sorted(walked) == sorted([f"f{k}" for k in range(61)] + [f"f{k}" for k in range(60)])
    assert program.lowered["f60"].as_text() == ModuleLowering(program).lower("f60", [arrc.spec("f32[2]")]).as_text()


def test_a_function_called_from_anywhere_is_not_an_entry():
    """A helper defined after the function that calls it, or called only by a function with a shape
    variable, is inlined where it is called: not lowered on its own."""
    src = ("def main(x: f32[4]) -> f32[4]:\n    return later(x)\n\n"
           "def generic(x: f32[4], y: f32[n]) -> f32[4]:\n    return helper(x)\n\n"
           "def later(x: f32[4]) -> f32[4]:\n    return x - 1.0\n\n"
           "def helper(x: f32[4]) -> f32[4]:\n    return x + 1.0\n")
    assert list(check_program(Source("h.arr", src)).lowered) == ["main"]


def test_a_function_given_to_vmap_or_grad_is_not_an_entry():
    """`vmap(f)(xs)` and `grad(f)(x)` call `f` (lowered inside its caller's specialization): `f` is only
    checked, not lowered on its own in a context of its own as well."""
    src = ("def row(x: f32[4]) -> f32[4]:\n    return tanh(x)\n\n"
           "def rows(xs: f32[b, 4]) -> f32[b, 4]:\n    return vmap(row)(xs)\n\n"
           "def loss(x: f32[4]) -> f32:\n    return sum(x * x)\n\n"
           "def slope(x: f32[4]) -> f32[4]:\n    return grad(loss)(x)\n")
    program = check_program(Source("v.arr", src))
    assert list(program.lowered) == ["slope"]
    mod = arrc.loads(src)
    xs = np.arange(8, dtype=np.float32).reshape(2, 4) / 8
    np.testing.assert_allclose(mod.rows(xs), np.tanh(xs), rtol=1e-6)
    np.testing.assert_allclose(mod.slope(xs[1]), 2 * xs[1], rtol=1e-6)
    np.testing.assert_allclose(mod.row(xs[0]), np.tanh(xs[0]), rtol=1e-6)
