"""Named module passes. A pass is a callable `(module, context) -> list[Diagnostic]`; the pipeline is a list
of names, so it can be printed and chosen from the command line."""
from __future__ import annotations

from typing import Callable

PASSES: dict[str, Callable] = {}


def register_pass(name: str):
    def wrap(fn):
        PASSES[name] = fn
        fn.pass_name = name
        return fn
    return wrap


def run_passes(module, names: list[str]) -> list:
    """Run the named passes in order, verifying the module after each; returns their diagnostics."""
    diags = []
    for name in names:
        diags.extend(PASSES[name](module))
        module.operation.verify()
    return diags


from . import guards, verify_foreign, verify_static_shapes  # noqa: E402,F401  (they register themselves)
