"""vmap over StableHLO (LANGUAGE.md section 16, docs/vmap.md): `vmap_function` turns a function lowered for
one lane's types into the function over `size` lanes, each batched parameter and every result with the
lanes as a new leading dimension.

Two ways, chosen per function:
- **rules**: each operation batched by its rule, as JAX's batching rules do (elementwise operations
  broadcast what is not batched; `dot_general` gains a batch dimension, so a batch of matrix-vector
  products is one matrix-matrix product; reductions, slices, broadcasts and transposes shift their
  dimensions; a `while` carries the batched values, a linear-algebra placeholder takes the lanes as a
  batch). What a function computes is unchanged lane by lane.
- **lanes**: where an operation has no rule, or the semantics need one lane at a time (a `print`, an
  `assert`, a guard-relevant branch: an `if` or `while` whose condition differs between lanes), the body
  runs once per lane in a loop, lane after lane: exactly "f called once per lane", with prints and
  asserts in lane order and only for the lanes that reach them.
"""
from __future__ import annotations

import contextlib

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func
from jaxlib.mlir.dialects import stablehlo as hlo

from . import abi, emit
from .autodiff import captured as captured_by
from .autodiff import dtype_of
from .ops_linalg import EXTERN, SHARD, STOP_GRADIENT, is_linalg, linalg_call, linalg_op
from .types import BOOL, I64
from .walk import walk_ops

# Operations whose result element i depends on their operands' elements i only (same shapes; select and
# clamp may take scalars).
ELEMENTWISE = {f"stablehlo.{n}" for n in (
    "abs add and atan2 cbrt ceil clamp compare convert cosine count_leading_zeros divide exponential "
    "exponential_minus_one floor imag is_finite log log_plus_one logistic maximum minimum multiply negate not "
    "or popcnt power real remainder round_nearest_afz round_nearest_even rsqrt select shift_left "
    "shift_right_arithmetic shift_right_logical sign sine sqrt subtract tan tanh xor bitcast_convert "
    "reduce_precision").split()} | {f"chlo.{n}" for n in (
    "erf erfc erf_inv lgamma digamma next_after polygamma zeta acos acosh asin asinh atan atanh cosh sinh tan "
    "bessel_i1e is_inf is_neg_inf is_pos_inf").split()}
REGIONS = {"stablehlo.while", "stablehlo.if", "stablehlo.reduce", "stablehlo.sort", "stablehlo.reduce_window",
           "stablehlo.case"}


class NoRule(Exception):
    """An operation without a batching rule (or one whose lanes must run one by one): lanes mode."""


def vmap_function(fn, batched: list, size: int, threaded: dict, label: str):
    """A new function next to `fn` (which is erased) over `size` lanes: parameter i has a leading dimension
    of `size` where `batched[i]`, every result too, except the results in `threaded` (result -> parameter:
    an io token, passed from lane to lane, unbatched). Returns (the new function, "rules" or "lanes")."""
    ftype = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
    inputs = [_with_batch(t, size) if b else t for t, b in zip(ftype.inputs, batched)]
    results = [t if i in threaded else _with_batch(t, size) for i, t in enumerate(ftype.results)]
    name = ir.StringAttr(fn.attributes["sym_name"]).value
    for how in ("rules", "lanes"):
        with ir.InsertionPoint(fn), fn.location:
            new = func.FuncOp(name, ir.FunctionType.get(inputs, results))
        block = new.add_entry_block()
        try:
            with ir.InsertionPoint(block), fn.location:
                body = fn.regions[0].blocks[0]
                if how == "rules":
                    if threaded:
                        raise NoRule("effects")
                    outs = _Batcher(size, label).block(body, list(zip(block.arguments, batched)))
                    values = [_full(v, b, size) for v, b in outs]
                else:
                    values = _lanes(body, list(block.arguments), batched, size, threaded, label)
                func.ReturnOp(values)
        except NoRule:
            new.operation.erase()
            continue
        for attr in fn.attributes:
            if attr.startswith("arrc.") and attr not in new.attributes:
                new.attributes[attr] = fn.attributes[attr]
        fn.operation.erase()
        return new, how
    raise AssertionError("lanes mode always applies")


def _with_batch(t: ir.Type, size: int) -> ir.Type:
    r = ir.RankedTensorType(t)
    return ir.RankedTensorType.get([size] + list(r.shape), r.element_type)


def _full(v: ir.Value, batched: bool, size: int, shape: tuple | None = None) -> ir.Value:
    """`v` with the lanes first and the lane shape `shape` (its own by default): broadcast where it is the
    same for every lane (or a batched scalar of select/clamp)."""
    t = ir.RankedTensorType(v.type)
    lane = tuple(t.shape[1:]) if batched else tuple(t.shape)
    shape = lane if shape is None else tuple(shape)
    if batched and lane == shape:
        return v
    out = ir.RankedTensorType.get([size] + list(shape), t.element_type)
    if batched:                              # a batched scalar: one value per lane
        dims = [0] + list(range(1 + len(shape) - len(lane), 1 + len(shape)))
    else:
        dims = list(range(1 + len(shape) - len(lane), 1 + len(shape)))
    return hlo.broadcast_in_dim(out, v, dims)


# ---- rules ----------------------------------------------------------------------------------------------

class _Batcher:
    def __init__(self, size: int, label: str):
        self.size, self.label = size, label
        self.map: dict = {}                  # old value -> (new value, batched)
        self.keep = None                     # inside a branch computed for every lane (`_masked_if`): the
                                             # lanes that keep its values (a bool per lane); such branches
                                             # do not nest (UNMASKED)

    def block(self, block, args: list) -> list:
        """Emit `block` batched at the insertion point, its arguments `args` ((value, batched) pairs);
        returns its terminator's operands, batched."""
        for old, new in zip(block.arguments, args):
            self.map[old] = new
        ops = list(block.operations)
        for op in ops[:-1]:
            self.op(op.operation)
        return [self._get(v) for v in ops[-1].operands]

    def _get(self, v):
        got = self.map.get(v)
        if got is None:
            raise NoRule("a value from outside the function")
        return got

    def op(self, op) -> None:
        name = op.name
        ins = [self._get(v) for v in op.operands]
        captured = [self._get(v) for v in captured_by(op)] if op.regions else []
        if name == "stablehlo.custom_call" and not is_linalg(op):
            raise NoRule("a host callback")
        if name == "func.call":
            raise NoRule("a call")
        if not any(b for _, b in ins + captured):
            self._same(op, [v for v, _ in ins])
            self._mark_masked(op, ins + captured)
            return
        rule = RULES.get(name)
        if rule is None and name in ELEMENTWISE:
            rule = _elementwise
        if rule is None:
            raise NoRule(name)
        with op.location:                    # reports blame the lane's operation
            if self.keep is not None:
                ins = self._gated(op, ins, rule is _elementwise)
            outs = rule(self, op, ins)
        for old, (new, batched) in zip(op.results, outs):
            self.map[old] = (new, batched)
            if batched:                      # a guard report names the lane (runtime/guards.py): this vmap's,
                owner = new.owner            # then those of the vmaps inside it that made `op` (dimensions 1...)
                inner = list(ir.ArrayAttr(op.attributes[abi.BATCH_OF])) if abi.BATCH_OF in op.attributes else []
                getattr(owner, "operation", owner).attributes[abi.BATCH_OF] = ir.ArrayAttr.get(
                    [ir.StringAttr.get(self.label)] + inner)
        self._mark_masked(op, ins + captured)

    @contextlib.contextmanager
    def masked_by(self, keep):
        """Inside a branch computed for every lane, whose values the lanes of `keep` keep."""
        self.keep = keep
        try:
            yield
        finally:
            self.keep = None

    def _gated(self, op, ins: list, elementwise: bool) -> list:
        """The float operands of `op`, in a branch computed for every lane, each as `where(keep, v,
        stop_gradient(v))`: the same values, but a derivative reaches v only from the lanes that keep the
        branch. A lane that did not take it gets a zero cotangent there, and the op's rule would make
        0 * inf = NaN of it (log(x) at x = 0 in the branch not taken: "f called once per lane" has no such
        NaN, nor has JAX, whose batched `cond` transposes each branch with the whole cotangent and selects
        after). The operands of an elementwise or linear-algebra op are given their lanes first (its rule
        does so anyway). A `dot_general` keeps a shared operand (a matrix every lane uses) as it is; its
        derivative sums the cotangent times the batched operand over the lanes, so there the batched operand
        is 0 in the lanes that drop the branch (where inf * 0 would be NaN), a select that XLA keeps."""
        keep = self.keep
        shared = op.name == "stablehlo.dot_general" and not all(b for _, b in ins)
        gated = []
        for v, batched in ins:
            if elementwise:
                v, batched = _full(v, batched, self.size, self.lane_shape(op.results[0])), True
            elif is_linalg(op):
                v, batched = _full(v, batched, self.size), True
            if batched and dtype_of(v).is_float:
                dropped = emit.const(0, dtype_of(v), emit.shape_of(v)) if shared else \
                    linalg_op(STOP_GRADIENT, [v], [v.type], {}).result
                v = _lane_select(keep, v, dropped)
                emit.mark(v, abi.LANE_GATE)     # (reports name v: passes/guards.py)
            gated.append((v, batched))
        return gated

    def _mark_masked(self, op, ins: list) -> None:
        """Inside `_masked_if`: the guard pass reports the non-finite values of the ops emitted for `op`
        only where they reach a result (passes/guards.py), in either scope: the other lanes' are dropped by
        the branch's select. All of them, not only the last: a batched `solve` of vectors is the
        factorization, whose failed lanes the guards report, then a reshape. `ins`: its operands as
        emitted, where the ops emitted for it begin."""
        if self.keep is None:
            return
        emitted = {v for v, _ in ins}
        todo = [self.map[old][0] for old in op.results]
        while todo:
            v = todo.pop()
            owner = v.owner
            owner = getattr(owner, "operation", owner)
            if v in emitted or not isinstance(owner, ir.Operation):
                continue
            emitted.add(v)
            owner.attributes[abi.MASKED] = ir.BoolAttr.get(True)
            todo.extend(owner.operands)

    def _same(self, op, operands: list) -> None:
        """`op` as it is (nothing batched reaches it), its operands and captured values mapped."""
        new = op.clone()
        for i, v in enumerate(operands):
            new.operands[i] = v
        if op.regions:                       # what its regions capture
            _remap(new, {old: nv for old, (nv, _) in self.map.items()})
        for old, r in zip(op.results, new.results):
            self.map[old] = (r, False)

    def lane_shape(self, v: ir.Value) -> tuple:
        return tuple(ir.RankedTensorType(v.type).shape)

    def batched_type(self, v: ir.Value) -> ir.Type:
        return _with_batch(v.type, self.size)

    def region_block(self, old_block, new_region, arg_types: list, args_batched: list) -> list:
        """A new block in `new_region` batched from `old_block` (arguments typed `arg_types`); its results."""
        block = new_region.blocks.append(*arg_types)
        with ir.InsertionPoint(block):
            return block, self.block(old_block, list(zip(block.arguments, args_batched)))


RULES: dict = {}


def _rule(*names):
    def wrap(fn):
        for n in names:
            RULES[n] = fn
        return fn
    return wrap


def _elementwise(bt: _Batcher, op, ins):
    shape = bt.lane_shape(op.results[0])
    operands = [_full(v, b, bt.size, shape) for v, b in ins]
    new = op.clone()
    for i, v in enumerate(operands):
        new.operands[i] = v
    for r in new.results:
        r.set_type(bt.batched_type(r))
    return [(r, True) for r in new.results]


def _attr_ints(op, name: str) -> list:
    return list(ir.DenseI64ArrayAttr(op.attributes[name]))


@_rule("stablehlo.broadcast_in_dim")
def _broadcast(bt, op, ins):
    (x, _), = ins
    dims = [0] + [d + 1 for d in _attr_ints(op, "broadcast_dimensions")]
    return [(hlo.broadcast_in_dim(bt.batched_type(op.results[0]), x, dims), True)]


@_rule("stablehlo.reshape")
def _reshape(bt, op, ins):
    return [(hlo.reshape(bt.batched_type(op.results[0]), ins[0][0]), True)]


@_rule("stablehlo.transpose")
def _transpose(bt, op, ins):
    return [(hlo.transpose(ins[0][0], [0] + [p + 1 for p in _attr_ints(op, "permutation")]), True)]


@_rule("stablehlo.reverse")
def _reverse(bt, op, ins):
    return [(hlo.reverse(ins[0][0], [d + 1 for d in _attr_ints(op, "dimensions")]), True)]


@_rule("stablehlo.slice")
def _slice(bt, op, ins):
    start, limit, strides = (_attr_ints(op, k) for k in ("start_indices", "limit_indices", "strides"))
    return [(hlo.slice(ins[0][0], [0] + start, [bt.size] + limit, [1] + strides), True)]


@_rule("stablehlo.concatenate")
def _concatenate(bt, op, ins):
    dim = ir.IntegerAttr(op.attributes["dimension"]).value
    return [(hlo.concatenate([_full(v, b, bt.size) for v, b in ins], dim + 1), True)]


@_rule("stablehlo.pad")
def _pad(bt, op, ins):
    (x, xb), (value, vb) = ins
    if vb:
        raise NoRule("a padding value that differs between lanes")
    low, high, interior = (_attr_ints(op, k) for k in ("edge_padding_low", "edge_padding_high", "interior_padding"))
    return [(hlo.pad(x, value, [0] + low, [0] + high, [0] + interior), True)]


@_rule("stablehlo.optimization_barrier")
def _barrier(bt, op, ins):
    new = hlo.OptimizationBarrierOp([v for v, _ in ins])
    return [(r, b) for r, (_, b) in zip(new.results, ins)]


@_rule("stablehlo.dynamic_slice")
def _dynamic_slice(bt, op, ins):
    (x, _), *starts = ins
    if any(b for _, b in starts):
        raise NoRule("an index that differs between lanes")
    zero = emit.const(0, dtype_of(starts[0][0]), ())
    sizes = [bt.size] + _attr_ints(op, "slice_sizes")
    return [(hlo.dynamic_slice(x, [zero] + [v for v, _ in starts], sizes), True)]


@_rule("stablehlo.dynamic_update_slice")
def _dynamic_update_slice(bt, op, ins):
    (x, xb), (u, ub), *starts = ins
    if any(b for _, b in starts):
        raise NoRule("an index that differs between lanes")
    zero = emit.const(0, dtype_of(starts[0][0]), ())
    return [(hlo.dynamic_update_slice(_full(x, xb, bt.size), _full(u, ub, bt.size), [zero] + [v for v, _ in starts]),
             True)]


@_rule("stablehlo.dot_general")
def _dot_general(bt, op, ins):
    (lhs, lb), (rhs, rb) = ins
    dn = hlo.DotDimensionNumbers(op.attributes["dot_dimension_numbers"])
    lbatch, rbatch = list(dn.lhs_batching_dimensions), list(dn.rhs_batching_dimensions)
    lcon, rcon = list(dn.lhs_contracting_dimensions), list(dn.rhs_contracting_dimensions)
    shift = lambda dims, on: [d + 1 for d in dims] if on else dims          # noqa: E731
    lbatch2, lcon2, rbatch2, rcon2 = shift(lbatch, lb), shift(lcon, lb), shift(rbatch, rb), shift(rcon, rb)
    out = bt.lane_shape(op.results[0])
    k = len(lbatch)
    if lb and rb:                            # one more batch dimension, the first: the lanes
        lbatch2, rbatch2, at = [0] + lbatch2, [0] + rbatch2, 0
    elif lb:                                 # the lanes are lhs's first free dimension
        at = k
    else:                                    # rhs's first free dimension, after lhs's free ones
        at = k + (len(bt.lane_shape(op.operands[0])) - len(lbatch) - len(lcon))
    shape = list(out[:at]) + [bt.size] + list(out[at:])
    element = ir.RankedTensorType(op.results[0].type).element_type
    attrs = {name: op.attributes[name] for name in op.attributes}
    attrs["dot_dimension_numbers"] = hlo.DotDimensionNumbers.get(
        lhs_batching_dimensions=lbatch2, rhs_batching_dimensions=rbatch2,
        lhs_contracting_dimensions=lcon2, rhs_contracting_dimensions=rcon2)
    value = ir.Operation.create("stablehlo.dot_general", results=[ir.RankedTensorType.get(shape, element)],
                                operands=[lhs, rhs], attributes=attrs).result
    if at:
        perm = [at] + [i for i in range(len(shape)) if i != at]
        value = hlo.transpose(value, perm)
    return [(value, True)]


@_rule("stablehlo.reduce")
def _reduce(bt, op, ins):
    n = len(op.results)
    inputs, inits = ins[:n], ins[n:]
    if any(b for _, b in inits):
        raise NoRule("an initial value that differs between lanes")
    dims = [d + 1 for d in _attr_ints(op, "dimensions")]
    operands = [_full(v, b, bt.size) for v, b in inputs]
    new = ir.Operation.create("stablehlo.reduce", results=[bt.batched_type(r) for r in op.results],
                              operands=operands + [v for v, _ in inits],
                              attributes={"dimensions": ir.DenseI64ArrayAttr.get(dims)}, regions=1)
    old = op.regions[0].blocks[0]
    _, results = bt.region_block(old, new.regions[0], [a.type for a in old.arguments], [False] * len(old.arguments))
    if any(b for _, b in results):
        raise NoRule("a reduction body that uses batched values")
    with ir.InsertionPoint(new.regions[0].blocks[0]):
        hlo.return_([v for v, _ in results])
    return [(r, True) for r in new.results]


@_rule("stablehlo.while")
def _while(bt, op, ins):
    cond, body = op.regions[0].blocks[0], op.regions[1].blocks[0]
    flags = [b for _, b in ins]
    for _ in range(len(flags) + 1):                 # the carried values that become batched
        outs = _analyze(bt, body, flags)
        grown = [a or b for a, b in zip(flags, outs)]
        if grown == flags:
            break
        flags = grown
    if any(_analyze(bt, cond, flags)):
        return _masked_while(bt, op, ins)
    inits = [_full(v, b, bt.size) if f else v for (v, b), f in zip(ins, flags)]
    loop = hlo.WhileOp([v.type for v in inits], inits)
    for attr in op.attributes:
        loop.attributes[attr] = op.attributes[attr]
    types = [v.type for v in inits]
    block, results = bt.region_block(cond, loop.cond, types, flags)
    with ir.InsertionPoint(block):
        hlo.return_([results[0][0]])
    block, results = bt.region_block(body, loop.body, types, flags)
    with ir.InsertionPoint(block):
        hlo.return_([_full(v, b, bt.size) if f else v for (v, b), f in zip(results, flags)])
    return list(zip(loop.results, flags))


@_rule("stablehlo.if")
def _if(bt, op, ins):
    (pred, pb), = ins
    if pb:
        return _masked_if(bt, op, pred)
    flags = [a or b for a, b in zip(_analyze(bt, op.regions[0].blocks[0], []), _analyze(bt, op.regions[1].blocks[0], []))]
    types = [_with_batch(r.type, bt.size) if f else r.type for r, f in zip(op.results, flags)]
    new = hlo.IfOp(types, pred)
    for region, old in zip(new.regions, op.regions):
        block, results = bt.region_block(old.blocks[0], region, [], [])
        with ir.InsertionPoint(block):
            hlo.return_([_full(v, b, bt.size) if f else v for (v, b), f in zip(results, flags)])
    return list(zip(new.results, flags))


# What a branch that a lane did not take may not compute for it: an index that may be out of range, an integer
# division that may be by zero (guards would report them), a loop that may not end, a nested branch.
UNMASKED = {"stablehlo.gather", "stablehlo.scatter", "stablehlo.dynamic_slice", "stablehlo.dynamic_update_slice",
            "stablehlo.divide", "stablehlo.remainder", "stablehlo.while", "stablehlo.if", "stablehlo.case"}


def _masked_if(bt, op, pred):
    """An `if` whose condition differs between lanes, as JAX batches a `cond`: both branches for every lane,
    each lane's results selected by its condition. Only for branches of elementwise operations, reductions,
    products and shapes (UNMASKED: else lane by lane): what the other branch computes for a lane is never a
    result of it, and a NaN or infinity there is dropped by the select before any result (guards in either
    scope see through a select)."""
    blocks = [region.blocks[0] for region in op.regions]
    _maskable(blocks, "a branch that differs between lanes")
    branches = []
    for block, keep in zip(blocks, (pred, hlo.not_(pred))):
        with bt.masked_by(keep):
            branches.append([_full(v, b, bt.size) for v, b in bt.block(block, [])])
    return [(_lane_select(pred, then, other), True) for then, other in zip(*branches)]


def _masked_while(bt, op, ins):
    """A `while` whose condition differs between lanes, as JAX batches one: it runs while any lane's
    condition holds, each iteration computes the body for every lane and keeps the new values of the lanes
    whose condition held (a finished lane's stay as they were, so it ends where a loop of calls ends it).
    As `_masked_if`: only for bodies that cannot fault or run on for a finished lane (UNMASKED), and not for
    a loop whose derivative checks its `bound=` (it counts one lane's iterations)."""
    if abi.LOOP_BOUND in op.attributes or abi.BOUND_SITE in op.attributes:
        raise NoRule("a bounded loop whose end differs between lanes")
    cond, body = op.regions[0].blocks[0], op.regions[1].blocks[0]
    _maskable([cond, body], "a loop whose end differs between lanes")
    inits = [_full(v, b, bt.size) for v, b in ins]

    def lanes_running(values):          # the condition of each lane, at `values`
        (pred, b), = bt.block(cond, [(v, True) for v in values])
        return _full(pred, b, bt.size)
    inits.append(lanes_running(inits))  # carried, as JAX does: the condition is computed once an iteration
    types = [v.type for v in inits]
    loop = hlo.WhileOp(types, inits)
    for attr in op.attributes:
        loop.attributes[attr] = op.attributes[attr]
    if abi.TRIP_COUNT in loop.attributes:       # (the lanes' counts differ: none is known)
        emit.set_int_attr(loop.operation, abi.TRIP_COUNT, -1)
    block = loop.cond.blocks.append(*types)
    with ir.InsertionPoint(block):
        hlo.return_([emit.reduce(block.arguments[-1], emit.const(False, BOOL), [0], hlo.or_, BOOL)])
    block = loop.body.blocks.append(*types)
    with ir.InsertionPoint(block):
        *old, active = block.arguments
        with bt.masked_by(active):
            outs = bt.block(body, [(a, True) for a in old])
        new = [_lane_select(active, _full(v, vb, bt.size), was) for (v, vb), was in zip(outs, old)]
        hlo.return_(new + [lanes_running(new)])
    return [(r, True) for r in list(loop.results)[:-1]]


def _maskable(blocks: list, why: str) -> None:
    """NoRule unless every operation of `blocks` may be computed for a lane that does not need it."""
    for block in blocks:
        for inner in block.operations:
            name = inner.operation.name
            if name in UNMASKED and not (name in ("stablehlo.divide", "stablehlo.remainder")
                                         and dtype_of(inner.operation.results[0]).is_float):
                raise NoRule(why)


def _lane_select(pred: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
    """Per lane, `a` where the lane's `pred` (one bool a lane) holds, else `b` (both with the lanes first)."""
    t = ir.RankedTensorType(a.type)
    mask = hlo.broadcast_in_dim(ir.RankedTensorType.get(list(t.shape), ir.IntegerType.get_signless(1)), pred, [0])
    return hlo.select(mask, a, b)


def _analyze(bt: _Batcher, block, arg_flags: list) -> list:
    """Which results of `block` would be batched, its arguments batched as `arg_flags` (what it captures as
    mapped so far): an op's results are batched where an operand or a captured value is."""
    known = {old: b for old, (_, b) in bt.map.items()}
    known.update(zip(block.arguments, arg_flags))

    def flow(b) -> list:
        ops = list(b.operations)
        for op in ops[:-1]:
            op = op.operation
            used = list(op.operands) + (captured_by(op) if op.regions else [])
            batched = any(known.get(v, False) for v in used)
            for r in op.results:
                known[r] = batched
        return [known.get(v, False) for v in ops[-1].operands]
    return flow(block)


def batched_results(block, arg_flags: list, known: dict | None = None) -> list:
    """Which results of `block` depend on its arguments flagged in `arg_flags` (those vmap maps over), as
    jax.vmap batches them, for arrc/interop.py: an op's results where an operand or captured value does, a
    `while`'s carried values as they become so (`_while`), an `if`'s results branch by branch where its
    condition does not (`_if`). `known`: the flags of the values around the block. (`_analyze`, which the
    rules' types follow, batches every result of a loop or branch inside the block that uses a batched value.)"""
    known = {} if known is None else known
    known.update(zip(block.arguments, arg_flags))
    ops = list(block.operations)
    for op in ops[:-1]:
        op = op.operation
        if op.name == "stablehlo.while":
            cond, body = op.regions[0].blocks[0], op.regions[1].blocks[0]
            flags = [known.get(v, False) for v in op.operands]
            while True:         # (the flags only grow)
                grown = [a or b for a, b in zip(flags, batched_results(body, flags, known))]
                if grown == flags:
                    break
                flags = grown
            if any(batched_results(cond, flags, known)):
                flags = [True] * len(flags)
        elif op.name == "stablehlo.if" and not known.get(op.operands[0], False):
            flags = [any(b) for b in zip(*(batched_results(r.blocks[0], [], known) for r in op.regions))]
        else:
            used = list(op.operands) + (captured_by(op) if op.regions else [])
            flags = [any(known.get(v, False) for v in used)] * len(op.results)
        known.update(zip(op.results, flags))
    return [known.get(v, False) for v in ops[-1].operands]


# Linear-algebra placeholders take leading batch dimensions: the lanes are one more.
UNARY_LINALG = {"inv", "det", "slogdet", "cholesky", "qr", "eigh", "svd", "lu", "pinv"}


@_rule("stablehlo.custom_call")
def _linalg(bt, op, ins):
    name, params, derivative = linalg_call(op)
    operands = [_full(v, b, bt.size) for v, b in ins]
    if name == EXTERN:          # JAX's function under jax.vmap, once per level, outermost first (passes/linalg.py)
        params = {**params, "lanes": [bt.label] + params.get("lanes", [])}
        new = linalg_op(name, operands, [bt.batched_type(r) for r in op.results], params, derivative)
        return [(r, True) for r in new.results]
    if name == STOP_GRADIENT:
        return [(linalg_op(name, operands, [bt.batched_type(op.results[0])], params).result, True)]
    if name == SHARD:                       # the lanes are not split (and are no dimension of the `shard`'s own)
        new = linalg_op(name, operands, [bt.batched_type(op.results[0])],
                        {**params, "axes": [None] + params["axes"], "lanes": [bt.label] + params.get("lanes", [])})
        return [(new.result, True)]
    if derivative or name not in UNARY_LINALG | {"solve", "triangular_solve"}:
        raise NoRule(f"`{name}` in a batch")
    vector = name in ("solve", "triangular_solve") and len(bt.lane_shape(op.operands[1])) == 1
    if vector:                               # b stays a vector per lane: a matrix of one column
        b = operands[1]
        operands[1] = hlo.reshape(ir.RankedTensorType.get(list(ir.RankedTensorType(b.type).shape) + [1],
                                                          ir.RankedTensorType(b.type).element_type), b)
    types = [bt.batched_type(r) for r in op.results]
    if vector:
        t = ir.RankedTensorType(types[0])
        types = [ir.RankedTensorType.get(list(t.shape) + [1], t.element_type)]
    new = linalg_op(name, operands, types, params)
    results = list(new.results)
    if vector:
        results = [hlo.reshape(bt.batched_type(op.results[0]), results[0])]
    return [(r, True) for r in results]


# ---- lanes ----------------------------------------------------------------------------------------------

def _lanes(body, args: list, batched: list, size: int, threaded: dict, label: str) -> list:
    """The body once per lane, in a `while` over the lanes: lane i reads row i of each batched argument
    and writes row i of each result; a threaded result (an io token) is the next lane's argument."""
    results = list(list(body.operations)[-1].operands)
    outs = [emit.const(0, dtype_of(r), (size,) + tuple(ir.RankedTensorType(r.type).shape))
            for i, r in enumerate(results) if i not in threaded]
    carried_args = {p: args[p] for p in threaded.values()}
    if size == 0:       # no lane runs (and no row of size 1 can be sliced from none)
        outs, carried_out = iter(outs), iter(carried_args.values())
        return [next(carried_out) if i in threaded else next(outs) for i in range(len(results))]
    lane0 = emit.const(0, I64, ())
    start = outs + list(carried_args.values()) + [lane0]
    loop = hlo.WhileOp([v.type for v in start], start)
    emit.set_int_attr(loop, abi.TRIP_COUNT, size)
    loop.attributes[abi.COUNTED] = ir.BoolAttr.get(True)
    loop.attributes[abi.LANES] = ir.StringAttr.get(label)
    n_out, n_carried = len(outs), len(carried_args)
    cond = loop.cond.blocks.append(*[v.type for v in start])
    with ir.InsertionPoint(cond):
        hlo.return_([emit.compare(cond.arguments[len(start) - 1], emit.const(size, I64, ()), "LT", I64)])
    block = loop.body.blocks.append(*[v.type for v in start])
    with ir.InsertionPoint(block):
        lane = block.arguments[len(start) - 1]
        carried = dict(zip(carried_args, block.arguments[n_out:n_out + n_carried]))
        lane_args = []
        for i, (a, b) in enumerate(zip(args, batched)):
            if i in carried:
                lane_args.append(carried[i])
            elif b:
                shape = list(ir.RankedTensorType(a.type).shape)
                row = emit.mark(hlo.dynamic_slice(a, [lane] + [emit.const(0, I64, ())] * (len(shape) - 1),
                                                  [1] + shape[1:]), abi.IN_BOUNDS)
                lane_args.append(hlo.reshape(ir.RankedTensorType.get(shape[1:], ir.RankedTensorType(a.type).element_type),
                                             row))
            else:
                lane_args.append(a)
        values = _clone_block(body, lane_args)
        _lane_in_asserts(block, lane, label)
        written = []
        kept = [v for i, v in enumerate(values) if i not in threaded]
        for buf, v in zip(block.arguments[:n_out], kept):
            t = ir.RankedTensorType(v.type)
            row = hlo.reshape(ir.RankedTensorType.get([1] + list(t.shape), t.element_type), v)
            written.append(emit.mark(hlo.dynamic_update_slice(buf, row, [lane] + [emit.const(0, I64, ())] * t.rank),
                                     abi.IN_BOUNDS))
        next_carried = [values[r] for r in threaded]
        hlo.return_(written + next_carried + [hlo.add(lane, emit.const(1, I64, ()))])
    out = list(loop.results[:n_out])
    carried_out = list(loop.results[n_out:n_out + n_carried])
    final, k, c = [], 0, 0
    for i in range(len(results)):
        if i in threaded:
            final.append(carried_out[c])
            c += 1
        else:
            final.append(out[k])
            k += 1
    return final


def _lane_in_asserts(block, lane: ir.Value, label: str) -> None:
    """Each assert in `block` also reports `lane` (the outermost of its loop counters, labelled `label`)."""
    asserts = []

    def visit(op):
        op = op.operation
        if op.name == "stablehlo.custom_call" and abi.KIND in op.attributes \
                and emit.attr_text(op.attributes[abi.KIND]) == "assert":
            asserts.append(op)
        return ir.WalkResult.ADVANCE
    for op in block.operations:
        walk_ops(op.operation, visit)
    for op in asserts:                       # (run id, io token, first element, loop counters...)
        operands = list(op.operands)
        counters = len(operands) - 3
        attrs = {name: op.attributes[name] for name in op.attributes}
        labels = [emit.attr_text(a) for a in ir.ArrayAttr(attrs[abi.LANES])] if abi.LANES in attrs else [""] * counters
        attrs[abi.LANES] = ir.ArrayAttr.get([ir.StringAttr.get(x) for x in [label] + labels])
        with ir.InsertionPoint(op), op.location:
            new = ir.Operation.create(op.name, results=[r.type for r in op.results],
                                      operands=operands[:3] + [lane] + operands[3:], attributes=attrs)
        for old, r in zip(op.results, new.results):
            old.replace_all_uses_with(r)
        op.erase()


def _clone_block(block, args: list) -> list:
    """The operations of `block` cloned at the insertion point, its arguments replaced by `args` (inside the
    clones' regions too); the values its terminator returns."""
    mapping = dict(zip(block.arguments, args))
    ops = list(block.operations)
    for op in ops[:-1]:
        new = op.operation.clone()
        _remap(new, mapping)
        for old, r in zip(op.results, new.results):
            mapping[old] = r
    return [mapping.get(v, v) for v in ops[-1].operands]


def _remap(op, mapping: dict) -> None:
    """Replace, in `op` and the operations inside it, each operand that `mapping` maps."""
    def visit(inner):
        for i, o in enumerate(inner.operands):
            if o in mapping:
                inner.operands[i] = mapping[o]
        return ir.WalkResult.ADVANCE
    walk_ops(op, visit)