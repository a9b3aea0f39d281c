"""Walks: a graph depth first (`depth_first`, the call graphs of arr's programs and of StableHLO modules),
and MLIR operations walked from Python (`Operation.walk`), where an exception raised by the visitor stays
itself: the bindings turn one into a RuntimeError ("Exception raised in callback: Traceback ..."), so a
Ctrl-C landing in a visitor reached the caller as a RuntimeError rather than a KeyboardInterrupt (a third of
the Ctrl-Cs during a compile's passes). Ctrl-C is held back during the walk (a visitor's first bytecode is
outside any `try` of its own) and raised as KeyboardInterrupt after it."""
from __future__ import annotations

from jaxlib.mlir import ir

from .signals import sigint_deferred


def walk_ops(op, visit) -> None:
    """`op.walk(visit)` (`op` an Operation or an OpView); an exception in `visit` ends the walk and is
    raised as itself."""
    raised: list = []

    def guarded(inner):
        try:
            return visit(inner)
        except BaseException as err:        # noqa: BLE001 (raised again below, as itself)
            raised.append(err)
            return ir.WalkResult.INTERRUPT
    with sigint_deferred():
        op.walk(guarded)
    if raised:
        raise raised[0]


def depth_first(edges: dict):
    """Walk the graph `edges` (node -> [(neighbour, info)]) depth first from each node in turn, entering
    each node once, with its own stack (a chain may be longer than Python's recursion limit). Yields
    ("cycle", path, info) for an edge back to a node on the current path (`path`: from that node to the
    edge's source, then that node again) and ("done", node, None) once all a node reaches is done."""
    done: set = set()
    for root in edges:
        if root in done:
            continue
        path, on_path, pending = [root], {root}, [iter(edges.get(root, ()))]
        while pending:
            for target, info in pending[-1]:
                if target in on_path:
                    yield "cycle", path[path.index(target):] + [target], info
                elif target not in done:
                    path.append(target)
                    on_path.add(target)
                    pending.append(iter(edges.get(target, ())))
                    break
            else:
                pending.pop()
                node = path.pop()
                on_path.discard(node)
                done.add(node)
                yield "done", node, None
