"""The pass interface (xDSL's `ModulePass` is the model): a pass is an object with a `name`, its options as
dataclass fields, and `apply(module) -> diagnostics`. The table of passes is `registry.py`; passes do not
import it, so the table can import every pass without a cycle."""
from __future__ import annotations

from typing import ClassVar


class ModulePass:
    name: ClassVar[str] = ""

    def apply(self, module) -> list:
        raise NotImplementedError
