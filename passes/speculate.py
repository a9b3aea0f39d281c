"""`speculate-small-ifs`: a run-time `if` whose branches are pure and small becomes both branches and a
`select` of their results, as a JAX user writes `where`. XLA:CPU runs a `conditional` as a step of its own:
what a branch reads is materialized first and nothing fuses across it. examples/kmeans.arr (three such ifs
an iteration, each keeping a centroid whose cluster is empty) ran 1.056-1.066 of `jax.jit` with `where`
(JAX's own `lax.cond` of it 1.04-1.06); speculated, 1.010-1.016 (A/A 0.98; 2026-12-07, 2 cores).

A speculated branch costs its work also when it is not taken, so only branches of little work are: at most
MAX_ELEMENTS, summed over their operations (each counted by its largest operand or result) and the selects;
never one with effects (a guard's or a print's host callback), a loop, a call, or a matmul or convolution,
whose work its operands' sizes do not bound. A never-taken `x * 0.999 + a` on f32[4096] in a loop that does
nothing else ran 0.99-1.00 of the conditional. StableHLO's operations are total (a division by zero or an
index out of range has a defined result), so computing a branch not taken changes no result."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from jaxlib.mlir import ir

from ..compiler import abi, emit
from ..compiler.walk import walk_ops
from .base import ModulePass
from .rewrite import entry, ops_named

MAX_ELEMENTS = 1 << 15
NOT_SPECULATED = {"stablehlo.while", "stablehlo.if", "stablehlo.case", "stablehlo.custom_call", "func.call",
                  "stablehlo.dot_general", "stablehlo.dot", "stablehlo.convolution", "stablehlo.infeed",
                  "stablehlo.outfeed", "stablehlo.send", "stablehlo.recv", "stablehlo.all_reduce",
                  "stablehlo.all_gather", "stablehlo.all_to_all", "stablehlo.reduce_scatter",
                  "stablehlo.collective_permute", "stablehlo.collective_broadcast"}


@dataclass
class SpeculateSmallIfs(ModulePass):
    """arr's own modules only. Runs after the guard pass: a branch that checks something calls the host, and
    stays a branch."""
    name: ClassVar[str] = "speculate-small-ifs"

    def apply(self, module: ir.Module) -> list:
        if abi.ENTRY not in entry(module).attributes:
            return []                       # (a module from elsewhere keeps the branches it was compiled with)
        for branch in ops_named(module, "stablehlo.if"):   # inner ones first: their selects leave outer ones small
            if _small_and_pure(branch):
                _speculate(branch)
        return []


def _small_and_pure(branch) -> bool:
    if not all(isinstance(r.type, ir.RankedTensorType) for r in branch.results):
        return False                        # (a token, which a select cannot pick)
    work = sum(_elements(r.type) for r in branch.results)     # the selects

    def visit(op):
        nonlocal work
        if op.operation.name in NOT_SPECULATED:
            work = MAX_ELEMENTS + 1
        else:
            work += max((_elements(v.type) for v in [*op.operation.operands, *op.operation.results]), default=0)
        return ir.WalkResult.ADVANCE if work <= MAX_ELEMENTS else ir.WalkResult.INTERRUPT
    for region in branch.regions:
        for op in region.blocks[0].operations:
            walk_ops(op, visit)
            if work > MAX_ELEMENTS:
                return False
    return True


def _elements(t: ir.Type) -> int:
    return math.prod(t.shape) if isinstance(t, ir.RankedTensorType) else 0


def _speculate(branch) -> None:
    """Both branches' operations before `branch`, and a select of their results for its."""
    with ir.InsertionPoint(branch), branch.location:
        _, taken = emit.inline_block(branch.regions[0].blocks[0], [])
        _, not_taken = emit.inline_block(branch.regions[1].blocks[0], [])
        for result, a, b in zip(branch.results, taken, not_taken):
            result.replace_all_uses_with(emit.select(branch.operands[0], a, b))
    branch.erase()
