"""The pass `value-and-grad`: the entry `main(args) -> y` becomes `main(args) -> (y, dy/d args[i] for i in
wrt)` by reverse mode (compiler/autodiff.py); `seeded` makes it `jax.vjp`'s pullback, `forward` makes it
`jax.jvp` (compiler/autodiff.py `jvp`: forward mode made of two reverse sweeps)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..compiler.autodiff import jvp, value_and_grad
from .base import ModulePass
from .rewrite import entry


@dataclass
class ValueAndGrad(ModulePass):
    """`keep_value=False`: only the derivatives. `y` must be a float scalar and the arguments in `wrt`
    floats: the callers check that with the source's spans."""
    name: ClassVar[str] = "value-and-grad"
    wrt: tuple = (0,)
    keep_value: bool = True
    seeded: bool = False            # `jax.vjp`: one cotangent per result, new last arguments
    forward: bool = False           # `jax.jvp`: one tangent per argument in `wrt`, new last arguments

    @classmethod
    def of(cls, kind: str, wrt: tuple) -> "ValueAndGrad":
        """The pass for derivative `kind`: grad, value_and_grad, vjp or jvp (as arr code and arrc name them)."""
        return cls(wrt, keep_value=kind != "grad", seeded=kind == "vjp", forward=kind == "jvp")

    def apply(self, module) -> list:
        if self.forward:
            return jvp(entry(module), self.wrt)
        return value_and_grad(entry(module), self.wrt, self.keep_value, self.seeded)
