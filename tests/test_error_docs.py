"""Every page in docs/errors is tested: its Wrong example fails with exactly that code and its Right
example compiles (and specializes) cleanly. Pages marked `<!-- no-test -->` show examples that are not
arr source files (StableHLO modules, targets, invalid bytes) and are only checked for their shape."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import arrc
from arrc.compiler.diagnostics import CODES

DOCS = Path(__file__).resolve().parent.parent / "docs" / "errors"
PAGES = sorted(DOCS.glob("*.md"))
BLOCK = re.compile(r"^## (Wrong|Right)\s*\n+```(\w+)\n(.*?)^```", re.S | re.M)


def examples(page: Path) -> dict[str, tuple[str, str]]:
    """{"Wrong": (lang, code), "Right": (lang, code)} from one page."""
    return {m.group(1): (m.group(2), m.group(3)) for m in BLOCK.finditer(page.read_text(encoding="utf-8"))}


def is_tested(page: Path) -> bool:
    return "<!-- no-test -->" not in page.read_text(encoding="utf-8")


def test_every_code_has_a_page():
    assert sorted(CODES) == sorted(p.stem for p in PAGES if p.stem in CODES)
    missing = [c for c in CODES if not (DOCS / f"{c}.md").is_file()]
    assert not missing


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_page_layout(page: Path):
    text = page.read_text(encoding="utf-8")
    code = page.stem
    title = CODES.get(code)
    assert text.splitlines()[0] == f"# {code}: {title}"
    found = examples(page)
    assert set(found) == {"Wrong", "Right"}, f"{page.name} needs a Wrong and a Right example"
    if is_tested(page):
        assert found["Wrong"][0] == found["Right"][0] == "arr"


@pytest.mark.parametrize("page", [p for p in PAGES if is_tested(p)], ids=lambda p: p.stem)
def test_wrong_example_fails_with_its_code(page: Path):
    code = page.stem
    _, wrong = examples(page)["Wrong"]
    with pytest.raises(arrc.CompileError) as info:
        arrc.loads(wrong, filename=f"{code}-wrong.arr", warnings="error")
    codes = [d.code for d in info.value.diagnostics]
    assert code in codes, f"{page.name}: the Wrong example gave {codes}"
    assert f"[{code}]" in str(info.value)


@pytest.mark.parametrize("page", [p for p in PAGES if is_tested(p)], ids=lambda p: p.stem)
def test_right_example_compiles(page: Path):
    _, right = examples(page)["Right"]
    mod = arrc.loads(right, filename=f"{page.stem}-right.arr", warnings="error")
    assert not mod.warnings
    for name in mod.functions:
        fn = mod[name]
        text = fn.lower(*fn.arg_types_for({v: 4 for v in fn.shape_vars})).as_text()
        assert "func.func public @main" in text
