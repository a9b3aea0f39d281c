"""No import cycles among arrc's modules (issue 14): the table of ops, the pass table, the checker and the
lowering each import downwards only. Imports inside functions count too: a lazy import is a cycle deferred."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"arrc": "arrc", "compiler": "arrc.compiler", "passes": "arrc.passes", "runtime": "arrc.runtime"}


LAYERS = ("arrc.compiler", "arrc.passes", "arrc.runtime", "arrc")    # each imports from those before it only


def _modules() -> dict:
    found = {}
    for folder, package in PACKAGES.items():
        for path in (ROOT / folder).rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            parts = [package, *path.relative_to(ROOT / folder).with_suffix("").parts]
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _layer(name: str) -> int:
    return next(k for k, layer in enumerate(LAYERS) if name == layer or name.startswith(layer + "."))


def _imported(name: str, path: Path, modules: dict) -> set:
    package = name if path.stem == "__init__" else name.rsplit(".", 1)[0]
    targets = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):         # `if TYPE_CHECKING:` imports are never run: not edges
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            node.body = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            candidates = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            candidates = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for target in candidates:
            while target and target not in modules and "." in target:
                target = target.rsplit(".", 1)[0]
            if target in modules and target != name:
                targets.add(target)
    return targets


def _cycles(graph: dict) -> list:
    """The strongly connected components of more than one module (iterative Tarjan)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycles():
    modules = _modules()
    graph = {name: _imported(name, path, modules) for name, path in modules.items()}
    assert _cycles(graph) == []


def test_layers_import_downwards_only():
    modules = _modules()
    upward = sorted((name, target) for name, path in modules.items() for target in _imported(name, path, modules)
                    if _layer(target) > _layer(name))
    assert upward == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_relative_and_lazy_imports():
    modules = _modules()
    graph = {name: _imported(name, path, modules) for name, path in modules.items()}
    assert "arrc.compiler.optable" in graph["arrc.compiler.ops_index"]          # `from .optable import ...`
    assert "arrc.compiler.cache" in graph["arrc.compiler.parse"]                 # inside a function
    assert "arrc.repl.commands" in graph["arrc.repl.session"]                    # a subpackage
    assert "arrc.passes.guards" in graph["arrc.passes.registry"]


def test_module_attribute_names_are_spelled_once():
    """Every `arrc.*` attribute name is a constant of compiler/abi.py; nothing else spells one."""
    import re
    spelled = {}
    for path in _modules().values():
        if path.name != "abi.py":
            for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                for found in re.findall(r"[\"']arrc\.[a-z_0-9]+[\"']", line):
                    spelled[f"{path.relative_to(ROOT)}:{line_no}"] = found
    assert spelled == {}
