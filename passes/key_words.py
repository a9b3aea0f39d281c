"""`keys-as-words`: the entry takes its key parameters as JAX's key data, u32 words `[..., 2]` (a typed key's
own array, `jax.random.key_data`), and packs them as arr's keys (compiler/types.py KEY) inside the program.
An arr function called from Python then takes a key as it comes: jaxlib's C++ dispatcher passes a typed key's
words or raw key data to the executable as they are (a 4-element step with a key, 79 us a call through
Python, host packing included, 5.4 us; jax.jit 6.6 us), and no key is read to the host to be packed (on a
TPU, two round trips a call). Applied last, by the API's compiles only: `arrc compile` and `arrc run` keep
arr's own form."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func

from ..compiler import abi
from ..compiler.ops_random import keys_of_words
from .base import ModulePass
from .rewrite import entry, int_attr

KEPT_BY_THE_INNER = {"sym_name", "sym_visibility", "function_type"}


@dataclass(frozen=True)
class KeysAsWords(ModulePass):
    """`keys`: the positions of the key parameters among the function's own (hidden arguments not counted)."""
    name: ClassVar[str] = "keys-as-words"
    keys: tuple = ()

    def apply(self, module: ir.Module) -> list:
        inner = entry(module)
        ftype = ir.FunctionType(ir.TypeAttr(inner.attributes["function_type"]).value)
        hidden = {int_attr(inner, name) for name in (abi.RUN_ARG, abi.IO_ARG)} - {None}
        own = [i for i in range(len(ftype.inputs)) if i not in hidden]
        dims = {own[k]: tuple(ir.RankedTensorType(ftype.inputs[own[k]]).shape) for k in self.keys}
        name = inner.attributes["sym_name"]
        inner.attributes["sym_name"] = ir.StringAttr.get(abi.PACKED_KEYS_MAIN)    # (no arr name has a dot)
        inner.attributes["sym_visibility"] = ir.StringAttr.get("private")
        with ir.InsertionPoint(module.body), ir.Location.unknown():
            u32 = ir.IntegerType.get_unsigned(32)
            inputs = [ir.RankedTensorType.get([*dims[i], 2], u32) if i in dims else t
                      for i, t in enumerate(ftype.inputs)]
            outer = func.FuncOp(ir.StringAttr(name).value,
                                ir.FunctionType.get(inputs, list(ftype.results)))
            for attribute in inner.attributes:
                if attribute not in KEPT_BY_THE_INNER:
                    outer.attributes[attribute] = inner.attributes[attribute]
            with ir.InsertionPoint(outer.add_entry_block()):
                args = [keys_of_words(a, dims[i]) if i in dims else a for i, a in enumerate(outer.arguments)]
                func.ReturnOp(func.CallOp(inner, args).results)
        return []
