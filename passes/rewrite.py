"""Structural rewrites shared by the passes: find the entry, inline calls, add the hidden run-id argument,
count loop iterations."""
from __future__ import annotations

from jaxlib.mlir import ir, passmanager
from jaxlib.mlir.dialects import stablehlo as hlo

from ..compiler import abi, emit
from ..compiler.emit import attr_text, int_attr, run_argument, set_int_attr  # noqa: F401  (the passes' names for them)
from ..compiler.locations import span_of
from ..compiler.types import I64
from ..compiler.walk import walk_ops


def entry(module: ir.Module):
    """The public `main` (or the only public function) of a module."""
    publics = [op for op in module.body.operations
               if op.operation.name == "func.func" and _visibility(op) != "private"]
    for op in publics:
        if attr_text(op.attributes["sym_name"]) == "main":
            return op
    if len(publics) == 1:
        return publics[0]
    raise ValueError("the module has no public `main` function")


def _visibility(op) -> str:
    try:
        return attr_text(op.attributes["sym_visibility"])
    except KeyError:
        return "public"


def ops_named(root, name: str) -> list:
    """Every operation called `name` (e.g. "stablehlo.custom_call") inside `root` (a module or an op)."""
    found = []

    def visit(op):
        if op.operation.name == name:
            found.append(op.operation)
        return ir.WalkResult.ADVANCE
    walk_ops(root.operation, visit)
    return found


def inline_calls(module: ir.Module) -> int:
    """Inline every `func.call` (also inside loops and branches, which MLIR's inliner leaves alone here),
    then drop the functions nobody calls; returns the number of calls left (0 unless recursive)."""
    functions = {attr_text(op.attributes["sym_name"]): op for op in module.body.operations
                 if op.operation.name == "func.func"}
    for _ in range(10_000):
        calls = ops_named(module, "func.call")
        if not calls:
            break
        _inline(calls[0], functions)
    else:
        return len(calls)
    pm = passmanager.PassManager.parse("builtin.module(symbol-dce)")
    pm.run(module.operation)
    return 0


def _inline(call, functions: dict) -> None:
    callee = functions[attr_text(ir.FlatSymbolRefAttr(call.attributes["callee"]))]
    with ir.InsertionPoint(call):
        copy = callee.operation.clone()
        moved, returned = emit.inline_block(copy.regions[0].blocks[0], list(call.operands))
    # an operation without a file position of its own (JAX strips its library's frames: `floor_divide`'s
    # `rem`) is where the call is; one of an `extern def`'s JAX function keeps its own, called from the
    # arr call (a JAX module's private functions have their callers in their locations already)
    extern = abi.EXTERN_CALL in call.attributes

    def place(op):
        if span_of(op.location) is None:
            op.location = call.location
        elif extern:
            op.location = ir.Location.callsite(op.location, [call.location])
        return ir.WalkResult.ADVANCE
    for op in moved:
        walk_ops(op.operation, place)
    for result, value in zip(call.results, returned):
        result.replace_all_uses_with(value)
    call.erase()
    copy.erase()


def i64s(attr) -> list[int]:
    """The integers of an i64 array attribute: `array<i64: ...>`, or the `dense<...> : tensor<Nxi64>` that a
    portable artifact (VHLO) turns it into; ValueError for anything else."""
    if isinstance(attr, ir.DenseI64ArrayAttr):
        return [int(v) for v in attr]
    if isinstance(attr, ir.DenseIntElementsAttr) and ir.ShapedType(attr.type).rank == 1:
        return [int(v) for v in attr]
    raise ValueError(f"not an array of i64: {attr}")


def count_iterations(while_op) -> tuple:
    """Rebuild a `stablehlo.while` with an extra i64 iteration counter; returns (new op, counter in body,
    counter in cond)."""
    old = while_op.operation
    i64 = emit.tensor_type((), I64)
    with ir.InsertionPoint(old), old.location:
        zero = emit.const(0, I64)
        new = hlo.WhileOp([r.type for r in old.results] + [i64], list(old.operands) + [zero])
    for name, value in old.attributes.items():                        # its trip count, its bound
        new.operation.attributes[name] = value
    new.operation.attributes[abi.COUNTED] = ir.BoolAttr.get(True)     # VHLO has no UnitAttr
    old.regions[0].blocks[0].append_to(new.cond)
    old.regions[1].blocks[0].append_to(new.body)
    cond_block, body_block = new.cond.blocks[0], new.body.blocks[0]
    cond_counter = cond_block.add_argument(i64, old.location)
    counter = body_block.add_argument(i64, old.location)
    ret = body_block.operations[len(body_block.operations) - 1]
    with ir.InsertionPoint(ret), ret.location:
        hlo.return_(list(ret.operands) + [hlo.add(counter, emit.const(1, I64))])
    ret.operation.erase()
    for old_result, new_result in zip(old.results, new.results):
        old_result.replace_all_uses_with(new_result)
    old.erase()
    return new, counter, cond_counter


# jaxlib 0.10's compile fails on an operation with ten or more discardable (dialect-named) attributes, "Failed
# to sanitize discardable attributes": a bounds check of a gather in a vmap lane loop has ten of arrc's.
MAX_DISCARDABLE = 9


def drop_own_attributes(root) -> None:
    """Remove arrc's own attributes (`arrc.*`, which the passes and the runtime have read) from every operation
    in `root`: the copy of a module XLA compiles."""
    def visit(op):
        for name in [name for name in op.attributes if name.startswith("arrc.")]:
            del op.attributes[name]
        return ir.WalkResult.ADVANCE
    walk_ops(root.operation, visit)


def pack_own_attributes(root) -> None:
    """On an operation of `root` with more than MAX_DISCARDABLE discardable attributes, arrc's own (but
    `arrc.kind`, which tells a host callback) go into one, `arrc.packed`: a module JAX compiles, which keeps
    what a reader of its text needs (`arrc compile --mesh` writes it; `unpack_own_attributes` reads it)."""
    def visit(op):
        names = list(op.attributes)
        own = [n for n in names if n.startswith("arrc.") and n != abi.KIND]
        if sum("." in n for n in names) > MAX_DISCARDABLE:
            op.attributes[abi.PACKED] = ir.DictAttr.get({n: op.attributes[n] for n in own})
            for n in own:
                del op.attributes[n]
        return ir.WalkResult.ADVANCE
    walk_ops(root.operation, visit)


def unpack_own_attributes(root) -> None:
    """`pack_own_attributes` undone, on every operation of `root`."""
    def visit(op):
        if abi.PACKED in op.attributes:
            for named in ir.DictAttr(op.attributes[abi.PACKED]):
                op.attributes[named.name] = named.attr
            del op.attributes[abi.PACKED]
        return ir.WalkResult.ADVANCE
    walk_ops(root.operation, visit)


def retarget_callbacks(module: ir.Module, platform: str) -> int:
    """Point every host callback (print, assert, guard reports; emitted for the CPU) at `platform`'s
    handler, as `jax.debug.print` does per platform; returns how many were retargeted. TPUs receive
    host callbacks differently (send/recv), which arrc does not emit: a ValueError if there are any."""
    from ..compiler.effects import CALLBACK_TARGET
    cpu = CALLBACK_TARGET["cpu"]
    calls = [op for op in ops_named(module, "stablehlo.custom_call")
             if attr_text(op.attributes["call_target_name"]) == cpu]
    if platform == "cpu" or not calls:
        return 0
    if platform not in CALLBACK_TARGET:
        raise ValueError(f"print, assert and guards are not supported on {platform} (they need host "
                         f"callbacks, which arrc emits for {' and '.join(CALLBACK_TARGET)})")
    for op in calls:
        op.attributes["call_target_name"] = ir.StringAttr.get(CALLBACK_TARGET[platform])
    return len(calls)
