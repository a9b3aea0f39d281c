"""The pass `value-and-grad`: the entry `main(args) -> y` becomes `main(args) -> (y, dy/d args[i] for i in
wrt)` by reverse mode (compiler/autodiff.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..compiler.autodiff import value_and_grad
from .base import ModulePass
from .rewrite import entry


@dataclass
class ValueAndGrad(ModulePass):
    """`keep_value=False`: only the derivatives. `y` must be a float scalar and the arguments in `wrt`
    floats: the callers check that with the source's spans."""
    name: ClassVar[str] = "value-and-grad"
    wrt: tuple = (0,)
    keep_value: bool = True
    seeded: bool = False            # `jax.vjp`: the cotangent of the result is a new last argument

    def apply(self, module) -> list:
        return value_and_grad(entry(module), self.wrt, self.keep_value, self.seeded)
