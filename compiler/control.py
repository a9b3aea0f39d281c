"""Control flow for the function walk: `if/elif/else`, `for ... in range(...)`, `while`.

A run-time `if` lowers to `stablehlo.if`, loops to `stablehlo.while`; the variables that flow out of a
branch or around a loop are found from the assignments in the body. Conditions known at compile time
(literals, consts, shape variables) choose a branch statically.
"""
from __future__ import annotations

from contextlib import nullcontext

import numpy as np
from jaxlib.mlir import ir

from . import abi, ast, emit
from .diagnostics import Label
from .effects import PAST
from .emit import hlo
from .optable import require_literal_fits, weak_literal_fits
from .span import Span
from .types import BOOL, I32, I64, U64, ArrayType, Dim, DType, int_range, promote, wrap_int
from .values import POISON, ArrError, DeferredBool, DTypeVal, Poisoned, StrVal, TupleVal, Unbound, Val, describe

IO = "$io"        # the hidden variable that orders run-time effects (print/assert); see effects.py


def assigned_names(stmts, loop_vars: bool = False) -> list[str]:
    """Names a block may rebind, in order of first assignment (nested blocks included); with `loop_vars`,
    its `for` loops' variables too (which a loop leaves unbound after it)."""
    out: list[str] = []

    def add(name):
        if name not in out:
            out.append(name)

    def visit(block):
        for s in block:
            if isinstance(s, ast.Assign):
                for t in ast.walk_targets(s.targets):
                    add(t.name if isinstance(t, ast.NameTarget) else _base_name(t))
            elif isinstance(s, ast.AugAssign):
                add(s.target.name if isinstance(s.target, ast.NameTarget) else _base_name(s.target))
            elif isinstance(s, ast.If):
                visit(s.body)
                visit(s.orelse)
            elif isinstance(s, (ast.For, ast.While)):
                if loop_vars and isinstance(s, ast.For):
                    add(s.var)
                visit(s.body)
    visit(stmts)
    return [n for n in out if n is not None] + [IO, PAST]


def _base_name(target) -> str | None:
    base = target.base
    while isinstance(base, ast.Index):
        base = base.base
    return base.id if isinstance(base, ast.Name) else None


def static_bool(v) -> bool | None:
    if isinstance(v, Val) and isinstance(v.static, (bool, np.bool_)):
        return bool(v.static)
    return None


def merge_type(a: ArrayType, b: ArrayType) -> ArrayType | None:
    """The type a variable has after two paths, or None when they disagree (weak literals adapt)."""
    if a.shape != b.shape:
        return None
    if a.dtype == b.dtype:
        return ArrayType(a.dtype, a.shape, a.weak and b.weak)
    if a.weak and weak_literal_fits(a, b.dtype) and not b.weak:
        return b.strong()
    if b.weak and weak_literal_fits(b, a.dtype) and not a.weak:
        return a.strong()
    if a.weak and b.weak:
        dtype, _ = promote([a, b])
        return ArrayType(dtype, a.shape, True)
    return None


class ControlFlow:
    """Mixed into FunctionWalk."""

    # -- helpers -------------------------------------------------------------------------
    def _scalar_bool(self, v, node, what: str) -> None:
        if not isinstance(v, Val) or v.type.rank != 0 or not v.type.dtype.is_bool:
            found = describe(v)
            raise ArrError("E0213", f"the condition of `{what}` must be a scalar bool, found {found}", node.span,
                           f"this is {found}",
                           help="reduce it with any(...) or all(...)" if isinstance(v, Val) and v.type.rank else
                           "compare it, e.g. `x > 0`")

    def _scratch(self):
        """A block to walk a branch into before the real op (whose result types are not known yet) exists."""
        holder = hlo.IfOp([], emit.const(True, BOOL))
        return holder, holder.true_branch.blocks.append()

    def _types_only(self):
        """Walk without emitting (used to find the types flowing around a loop before lowering it)."""
        walk = self

        class _Scope:
            def __enter__(self):
                self.saved = walk.lowering
                walk.lowering = None

            def __exit__(self, *exc):
                walk.lowering = self.saved
        return _Scope()

    def _yield_values(self, values: list, types: list[ArrayType]) -> list:
        return [self.materialize(v, t.dtype) for v, t in zip(values, types)]

    # -- if ---------------------------------------------------------------------------------
    def stmt_If(self, stmt) -> None:
        cond = self.eval(stmt.cond)
        if isinstance(cond, Poisoned):
            for name in assigned_names(stmt.body) + assigned_names(stmt.orelse):
                self.env[name] = POISON
            return
        self._scalar_bool(cond, stmt.cond, "if")
        chosen = static_bool(cond)
        if chosen is not None:
            self.block(stmt.body if chosen else stmt.orelse)
            branch = f"`else` branch of the `if` on line {stmt.span.line}, whose condition is true" if chosen \
                else f"`if` on line {stmt.span.line}, whose condition is false"
            for name in assigned_names(stmt.orelse if chosen else stmt.body):
                if name not in self.env and name not in (IO, PAST):     # as Python's UnboundLocalError
                    self.env[name] = Unbound(f"`{name}` is assigned only in the {branch} here")
            return
        before, before_spans = dict(self.env), dict(self.spans)
        branches = []
        holder = None
        uses_before, uses_after = self.key_uses, {}     # one branch runs: a key may be used in each
        for body in (stmt.body, stmt.orelse):
            self.env, self.spans, self.returned = dict(before), dict(before_spans), None
            self.key_uses = dict(uses_before)
            block = None
            if self.is_lowering:
                holder, block = self._scratch()
            with ir.InsertionPoint(block) if block is not None else nullcontext():
                self.block(body)
            branches.append((self.env, self.spans, self.returned, block, holder, body))
            uses_after.update(self.key_uses)
        self.env, self.spans, self.returned = dict(before), dict(before_spans), None
        self.key_uses = uses_after
        (env_t, spans_t, ret_t, *_), (env_f, spans_f, ret_f, *_) = branches
        if isinstance(cond.static, DeferredBool):
            self._merge_deferred(before, branches)
            return

        outputs, out_types = [], []          # (name or None for a returned value)
        if (ret_t is None) != (ret_f is None):
            span = (stmt.body if ret_t is not None else stmt.orelse or stmt.body)[-1].span
            raise ArrError("E0106", "`return` in only one branch of a run-time `if` is not supported", span,
                           "returns here", labels=[Label(stmt.cond.span, "the condition is a run-time value")],
                           help="assign the value to a variable in each branch and return it after the `if`")
        if ret_t is not None:
            if any(isinstance(v, Poisoned) for v in ret_t + ret_f):
                self.returned = [POISON] * len(ret_t)
                return
            for i, (a, b) in enumerate(zip(ret_t, ret_f)):
                outputs.append(("return", i))
                out_types.append(a.type)
        # the names a branch may rebind (the others are as before: N live names and N `if`s were quadratic)
        names = set(assigned_names(stmt.body, loop_vars=True)) | set(assigned_names(stmt.orelse, loop_vars=True))
        for name in sorted(names, key=lambda n: (n not in before, n)):
            vt, vf = env_t.get(name), env_f.get(name)
            if vt is before.get(name) and vf is before.get(name):
                continue
            if vt is None or vf is None:
                where = spans_t.get(name) if vt is not None else spans_f.get(name)
                self.env[name] = Unbound(f"`{name}` is assigned in only one branch of the `if`", where)
                continue
            if isinstance(vt, Poisoned) or isinstance(vf, Poisoned):
                self.env[name] = POISON
                continue
            if isinstance(vt, Unbound) or isinstance(vf, Unbound):
                self.env[name] = vt if isinstance(vt, Unbound) else vf
                continue
            if not isinstance(vt, Val) or not isinstance(vf, Val):
                if vt is vf or isinstance(vt, (StrVal, DTypeVal)) and vt == vf:
                    self.env[name] = vt
                    continue
                if isinstance(vt, (StrVal, DTypeVal)) and type(vt) is type(vf):
                    raise ArrError("E0301", f"`{name}` is a {describe(vt).split()[0]} with another value in each "
                                            "branch of a run-time `if`", spans_t.get(name, stmt.span),
                                   f"{_shown(vt)} here", labels=[Label(spans_f.get(name, stmt.span),
                                                                       f"{_shown(vf)} here")],
                                   notes=["a string or dtype is known at compile time; which branch runs is "
                                          "known only at run time"])
                raise ArrError("E0301", f"`{name}` must be an array after the `if`, found {describe(vt)} and "
                                        f"{describe(vf)}", spans_t.get(name, stmt.span), "assigned here")
            merged = merge_type(vt.type, vf.type)
            if merged is None:           # an error only where the variable is used after the `if`
                paths = [(vt.type, spans_t.get(name, stmt.span)), (vf.type, spans_f.get(name, stmt.span))]
                self.env[name] = Unbound(
                    f"`{name}` has type {vt.type} in one branch and {vf.type} in the other", None, "E0301",
                    [Label(span, f"{t} here") for t, span in paths], paths)
                continue
            if merged.weak and vt.static is not None and vf.static is not None and vt.static == vf.static:
                self.env[name] = vt
                continue
            for v, spans in ((vt, spans_t), (vf, spans_f)):
                require_literal_fits(v, merged.dtype, spans.get(name, stmt.span))
            outputs.append(("name", name))
            out_types.append(merged)
            # the assignment the type comes from (a weak literal of the other branch adopts it)
            spans, other = (spans_t, spans_f) if vt.type.dtype == merged.dtype else (spans_f, spans_t)
            self.spans[name] = spans.get(name, other.get(name))

        def value_in(env, returned, key):
            return returned[key[1]] if key[0] == "return" else env[key[1]]

        if not self.is_lowering:
            results = [Val(t) for t in out_types]
        else:
            result_types = [emit.tensor_type(t.concrete_shape, t.dtype) for t in out_types]
            real = hlo.IfOp(result_types, self.materialize(cond))
            for (env, _, returned, block, holder, body), region in zip(branches, (real.true_branch, real.false_branch)):
                with ir.InsertionPoint(block), self.location(body[-1] if body else stmt, "yield"):
                    hlo.return_(self._yield_values([value_in(env, returned, k) for k in outputs], out_types))
                block.append_to(region)
                holder.operation.erase()
            results = [Val(t, r) for t, r in zip(out_types, real.results)]
        returned = []
        for key, value in zip(outputs, results):
            if key[0] == "return":
                returned.append(value)
            else:
                self.env[key[1]] = value
        if ret_t is not None:
            self.returned = returned

    def _merge_deferred(self, before, branches) -> None:
        """After an `if` on shape variables (checked at definition): only one branch will exist once the
        function is specialized, so the branches may disagree; what differs is unknown here (poisoned, so
        later checks of it wait for specialization, when the branch is chosen)."""
        (env_t, spans_t, ret_t, *_), (env_f, spans_f, ret_f, *_) = branches
        if ret_t is not None and ret_f is not None:
            self.returned = [POISON] * len(ret_t)
            return
        env, spans = (env_f, spans_f) if ret_t is not None else (env_t, spans_t)
        other = env_t if ret_t is not None else env_f
        for name in set(env_t) | set(env_f):
            a, b = env.get(name), other.get(name)
            same = a is b or (isinstance(a, Val) and isinstance(b, Val) and a.type == b.type)
            if ret_t is None and ret_f is None and not same:
                self.env[name] = POISON
            elif name in env:
                self.env[name] = env[name]
        self.spans.update(spans)

    # -- loops ---------------------------------------------------------------------------------
    def stmt_While(self, stmt) -> None:
        self._loop(stmt, counter=None, bound=self._loop_bound(stmt.options))

    def _loop_bound(self, options) -> int | None:
        """`bound=N` (`for i in range(n, bound=N):`, `while cond, bound=N:`): the most iterations the loop
        runs, a positive compile-time int; a derivative of the loop keeps a tape of that size
        (docs/autodiff.md)."""
        bound = None
        for kw in options:
            if kw.name != "bound":
                raise ArrError("E0103", f"unknown loop option `{kw.name}`", kw.span, "not an option",
                               help="the one option is `bound=N`: the most iterations the loop runs, which sizes "
                                    "the tape of its derivative (docs/autodiff.md)")
            value = self.eval(kw.value)
            bound = value.static_int if isinstance(value, Val) and value.type.rank == 0 else None
            if bound is None or bound < 1:
                found = describe(value) if bound is None else str(bound)
                raise ArrError("E0204", f"a loop's bound must be a positive integer known at compile time, found "
                                        f"{found}", kw.value.span, f"this is {found}",
                               help="write a literal or a `const`, e.g. `bound=1000`")
        return bound

    def stmt_For(self, stmt) -> None:
        bound = self._loop_bound([a for a in stmt.args if isinstance(a, ast.Keyword)])
        positional = [a for a in stmt.args if not isinstance(a, ast.Keyword)]
        args = [self.eval(a) for a in positional]
        if any(isinstance(a, Poisoned) for a in args):
            for name in assigned_names(stmt.body):
                self.env[name] = POISON
            return
        if not 1 <= len(args) <= 3:
            raise ArrError("E0103", f"range takes 1 to 3 arguments, {len(args)} given", stmt.span, "in this loop")
        for a, node in zip(args, positional):
            if not isinstance(a, Val) or a.type.rank != 0 or not a.type.dtype.is_int:
                raise ArrError("E0201", f"range arguments must be integer scalars, found {describe(a)}", node.span,
                               f"this is {describe(a)}", help="convert with `i32(...)`")
        start, stop, step = (args if len(args) == 3 else
                             args + [Val(ArrayType(I32, (), True), None, Dim.const(1))] if len(args) == 2 else
                             [Val(ArrayType(I32, (), True), None, Dim.const(0)), args[0],
                              Val(ArrayType(I32, (), True), None, Dim.const(1))])
        if isinstance(step.static, Dim) and step.static == 0:
            raise ArrError("E0204", "range step cannot be zero", positional[2].span, "zero")
        dtype, weak = promote([start.type, stop.type, step.type])
        if weak:
            dtype = _literal_range_dtype([a for a, node in zip(args, positional) if not _mentions_name(node)])
        if not dtype.is_int:        # a signed integer with u64: NumPy and JAX promote to f64
            kinds = ", ".join(sorted({str(a.type.dtype) for a in (start, stop, step) if not a.type.weak}))
            raise ArrError("E0201", f"range arguments of dtypes {kinds} have no common integer dtype", stmt.span,
                           "in this loop", help="convert them to one dtype, e.g. `u64(...)` or `i64(...)`")
        lo, hi = int_range(dtype)
        for a, node in zip(args, positional):
            value = a.static_int
            if a.type.weak and value is not None and not lo <= value <= hi:
                raise ArrError("E0211", f"literal {value} is out of range for {dtype} ({lo}..{hi})", node.span,
                               f"does not fit in {dtype}", help="convert the other range arguments, e.g. `i64(...)`")
        self._loop(stmt, counter=(start, stop, step, ArrayType(dtype, ())), bound=bound)

    def _loop(self, stmt, counter, bound: int | None = None) -> None:
        """`for`/`while`: find the carried variables and their types, then check or lower the loop.

        Carried: the variables the body assigns that exist before the loop (and the `for` variable when it
        exists before: after the loop it holds its last value, as in Python). A weak literal initializer
        adopts the type the body gives it; any other change of type is E0302.
        """
        if self._never_runs(stmt, counter):     # as an `if` on a compile-time condition: the body is not there
            self._unbind_loop_locals(stmt, dict(self.env), {})
            return
        runtime = counter is None or any(v.static is None for v in counter[:3])
        word, s = "while" if counter is None else "for", stmt.span
        header = Span(s.file, s.line, s.col, s.line, s.col + len(word))
        if runtime and bound is not None:
            self.program.bounded_loops.setdefault(self.fn.name, {})[header] = word
        before = dict(self.env)
        assigned = assigned_names(stmt.body)
        if counter is not None and stmt.var in before and isinstance(before[stmt.var], Val):
            assigned = [stmt.var] + [n for n in assigned if n != stmt.var]
        for n in assigned:
            if n in before and isinstance(before[n], TupleVal):
                raise ArrError("E0302", f"`{n}` is a tuple and cannot be changed inside a loop",
                               self.spans.get(n, stmt.span), "a tuple",
                               help="unpack it into separate variables before the loop")
        names = [n for n in assigned if n in before and isinstance(before[n], Val)]
        types = {n: before[n].type for n in names}
        first_spans = {n: self.spans.get(n, stmt.span) for n in names}
        after, spans_after = {}, {}
        for _ in range(len(names) + 2):          # each round can only turn a weak type strong
            with self._types_only():
                after, spans_after = self._walk_body(stmt, counter, {n: Val(t) for n, t in types.items()}, before)
            changed = False
            for n in names:
                new = after.get(n)
                if isinstance(new, Unbound) and new.paths:
                    _carried_paths(n, types[n], new, first_spans[n], header)
                if isinstance(new, (Poisoned, Unbound)) or new is None:
                    continue
                if not isinstance(new, Val):
                    raise ArrError("E0302", f"loop changes `{n}` from {types[n]} to {describe(new)}",
                                   spans_after.get(n, stmt.span), f"now {describe(new)}",
                                   labels=[Label(first_spans[n], f"{types[n]} before the loop")])
                merged = _carried_type(n, types[n], new.type, spans_after.get(n, stmt.span), first_spans[n])
                if merged != types[n]:
                    types[n], changed = merged, True
            if not changed:
                break
        else:
            raise AssertionError("loop-carried types did not settle")
        for n in names:
            require_literal_fits(before[n], types[n].dtype, first_spans[n])
            if isinstance(after.get(n), Val):
                require_literal_fits(after[n], types[n].dtype, spans_after.get(n, stmt.span))
        self._compile_time_unchanged(stmt, assigned, before, after, spans_after)
        if runtime and bound is None and any(t.dtype.is_float for t in types.values()):
            # (W0004 names it to a derivative: one that carries no float has none, as a loop that counts)
            self.program.runtime_loops.setdefault(self.fn.name, {})[header] = word
        if not self.is_lowering:
            for n in names:
                self.env[n] = POISON if isinstance(after.get(n), Poisoned) else Val(types[n])
            self._unbind_loop_locals(stmt, before, spans_after)
            return
        self._lower_loop(stmt, counter, names, types, before, bound)

    def _never_runs(self, stmt, counter) -> bool:
        """Whether the loop runs no iteration, known at compile time: a `for` over an empty range of constants
        (`range(n, 0)`), a `while` whose condition is false before the loop (`while n > 100:` with n = 4)."""
        if counter is not None:
            return _static_trip_count(*counter) == 0
        if self._has_effects(stmt.cond):
            return False
        try:
            with self._types_only():
                return static_bool(self.eval(stmt.cond)) is False
        except ArrError:
            return False        # (reported where the loop is walked)

    def _compile_time_unchanged(self, stmt, assigned, before: dict, after: dict, spans_after: dict) -> None:
        """E0302 where the body gives a string or dtype variable of before the loop another value: such a
        value is known at compile time, and whether (or how often) the loop runs is not."""
        for n in assigned:
            old, new = before.get(n), after.get(n)
            if not isinstance(old, (StrVal, DTypeVal)) or new is None or isinstance(new, (Poisoned, Unbound)) \
                    or new == old:
                continue
            what = "a string" if isinstance(old, StrVal) else "a dtype"
            raise ArrError("E0302", f"loop changes `{n}`, {what}, which is known at compile time",
                           spans_after.get(n, stmt.span), f"now {_shown(new)}",
                           labels=[Label(self.spans.get(n, stmt.span), f"{_shown(old)} before the loop")],
                           notes=[f"{what} has one value for the whole function: how often the loop runs is "
                                  "known only at run time"],
                           help=f"use another name for the value inside the loop, or give `{n}` its final value "
                                "before the loop")

    def _walk_body(self, stmt, counter, carried: dict, before: dict):
        self.env, saved_spans = dict(before), dict(self.spans)
        self.env.update(carried)
        if counter is not None:
            self.env[stmt.var] = Val(counter[3])
        else:
            cond = self.eval(stmt.cond)
            if not isinstance(cond, Poisoned):
                self._scalar_bool(cond, stmt.cond, "while")
        self._block_in_loop(stmt, _outer_keys(before, carried))
        after, spans_after = self.env, self.spans
        self.env, self.spans = dict(before), saved_spans
        return after, spans_after

    def _block_in_loop(self, loop, outer_keys: set) -> None:
        saved = self.returned
        self.returned = None
        self.loop_depth += 1
        s = loop.span
        self.outer_keys.append((outer_keys, Span(s.file, s.line, s.col, s.line, s.col + len(type(loop).__name__))))
        try:
            self.block(loop.body)
        finally:
            self.loop_depth -= 1
            self.outer_keys.pop()
        if self.returned is not None:
            self.returned = saved

    def _unbind_loop_locals(self, stmt, before, spans_after) -> None:
        for n in assigned_names(stmt.body):
            if n not in before:
                self.env[n] = Unbound(f"`{n}` is assigned only inside the loop", spans_after.get(n))
        var = getattr(stmt, "var", None)
        if var is not None and var not in before:
            self.env[var] = Unbound(f"`{var}` exists only inside the loop", stmt.span)

    def _lower_loop(self, stmt, counter, names, types, before, bound: int | None) -> None:
        """stablehlo.while over (hidden state..., carried variables...).

        Hidden state: a `for` loop carries its iteration number k (u64) from 0 to a trip count computed
        once before the loop (`_trip_count`), and the loop variable is start + k * step: nothing can wrap
        or overflow, for any integer dtype of the bounds; a `while` loop in a function with effects carries an
        iteration count (for assert reports) and, when its condition has effects, the condition itself:
        evaluated before the loop and again at the end of the body, so its prints/asserts run in order.
        """
        i64 = ArrayType(I64, ())
        hidden_types, hidden_inits = [], []
        if counter is not None:
            with self.location(stmt, "for"):
                trip, first, step, known = self._trip_count(*counter)
            hidden_types = [ArrayType(U64, ())]
            hidden_inits = [emit.const(0, U64)]
        effectful = IO in before
        # (a derivative that checks a loop's bound updates PAST: its condition is evaluated in the body too)
        cond_in_body = counter is None and (effectful or isinstance(before.get(PAST), Val)) \
            and self._has_effects(stmt.cond)
        if counter is None and effectful:
            hidden_types.append(i64)
            hidden_inits.append(emit.const(0, I64))
        if cond_in_body:
            first = self.eval(stmt.cond)
            hidden_types.append(ArrayType(BOOL, ()))
            hidden_inits.append(self.materialize(first))
            before = dict(self.env)            # evaluating the condition advanced the effects
        k = len(hidden_types)
        state_types = hidden_types + [types[n] for n in names]
        inits = hidden_inits + [self.materialize(before[n], types[n].dtype) for n in names]
        ir_types = [emit.tensor_type(t.concrete_shape, t.dtype) for t in state_types]
        op = hlo.WhileOp(ir_types, inits)
        if counter is not None:
            count = known if known is not None and known < 2 ** 63 else -1
            op.attributes[abi.TRIP_COUNT] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), count)
        if bound is not None:
            op.attributes[abi.LOOP_BOUND] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), bound)
        here = ir.Location.current              # the loop's; a carried variable's block argument is named
        arg_locs = [here] * k + [ir.Location.name(n, childLoc=here) for n in names]
        cond_block = op.cond.blocks.append(*ir_types, arg_locs=arg_locs)
        body_block = op.body.blocks.append(*ir_types, arg_locs=arg_locs)

        def bind(block):
            self.env = dict(before)
            for n, t, arg in zip(names, state_types[k:], list(block.arguments)[k:]):
                self.env[n] = Val(t, arg)

        with ir.InsertionPoint(cond_block):
            bind(cond_block)
            args = cond_block.arguments
            if counter is not None:
                with self.location(stmt, "for"):
                    hlo.return_([emit.compare(args[0], trip, "LT", U64)])
            elif cond_in_body:
                hlo.return_([args[k - 1]])
            else:
                cond = self.eval(stmt.cond)
                with self.location(stmt.cond, "while"):
                    hlo.return_([self.materialize(cond)])
        with ir.InsertionPoint(body_block):
            bind(body_block)
            args = body_block.arguments
            if counter is not None:
                with self.location(stmt, "for"):
                    self.env[stmt.var] = Val(counter[3], _loop_value(args[0], first, step, counter[3].dtype),
                                             range=_counter_range(*counter[:3]))
                self.loop_counters.append(Val(ArrayType(U64, ()), args[0]))
            elif effectful:
                self.loop_counters.append(Val(i64, args[0]))
            self._block_in_loop(stmt, _outer_keys(before, names))
            if counter is not None or effectful:
                self.loop_counters.pop()
            values = self._yield_values([self.env[n] for n in names], [types[n] for n in names])
            with self.location(stmt.body[-1], "yield"):
                hidden = []
                if counter is not None:
                    hidden = [hlo.add(args[0], emit.const(1, U64))]
                elif effectful:
                    hidden = [hlo.add(args[0], emit.const(1, I64))]
                if cond_in_body:
                    again = self.eval(stmt.cond)
                    hidden.append(self.materialize(again))
                    values = self._yield_values([self.env[n] for n in names], [types[n] for n in names])
                hlo.return_(hidden + values)
        after_spans = dict(self.spans)
        self.env = dict(before)
        for n, r in zip(names, list(op.results)[k:]):
            self.env[n] = Val(types[n], r)
        self._unbind_loop_locals(stmt, before, after_spans)

    def _trip_count(self, start: Val, stop: Val, step: Val, ctype: ArrayType):
        """(trip count, start, step) as u64 values, and the trip count when it is known at compile time:
        len(range(start, stop, step)) exactly, for any integer dtype of the bounds (0 when the range is
        empty, and for a run-time step of 0).

        The difference of two bounds fits in u64 for any pair of i64 or u64 values, and so does the trip
        count; bounds known at compile time give a constant.
        """
        dt = ctype.dtype
        known = _static_trip_count(start, stop, step, ctype)
        if known is not None:
            s, t = (_known_bound(v, ctype) for v in (start, step))
            return emit.const(known, U64), emit.const(s % 2 ** 64, U64), emit.const(t % 2 ** 64, U64), known
        wide = I64 if dt.kind == "int" else U64
        s, e, t = (emit.convert(self.materialize(v, dt), dt, wide) for v in (start, stop, step))
        zero = emit.const(0, wide)
        s_u, e_u, t_u = (_as_u64(x, wide) for x in (s, e, t))
        one = emit.const(1, U64)
        known_step = _known_bound(step, ctype)
        if known_step is not None:      # the usual case: its sign and size are known
            nonempty = emit.compare(e, s, "GT" if known_step > 0 else "LT", wide)
            diff = hlo.subtract(e_u, s_u) if known_step > 0 else hlo.subtract(s_u, e_u)
            count = diff if abs(known_step) == 1 else \
                hlo.add(hlo.divide(hlo.subtract(diff, one), emit.const(abs(known_step), U64)), one)
            return emit.select(nonempty, count, emit.const(0, U64)), s_u, t_u, None
        if wide is U64:
            nonempty = hlo.and_(emit.compare(t, zero, "NE", U64), emit.compare(e, s, "GT", U64))
            diff, size = hlo.subtract(e_u, s_u), t_u
        else:
            up = emit.compare(t, zero, "GT", I64)
            nonempty = hlo.or_(hlo.and_(up, emit.compare(e, s, "GT", I64)),
                               hlo.and_(emit.compare(t, zero, "LT", I64), emit.compare(s, e, "GT", I64)))
            # |stop - start| and |step| as u64: exact even for i64 min and max (modulo 2^64 arithmetic).
            diff = emit.select(up, hlo.subtract(e_u, s_u), hlo.subtract(s_u, e_u))
            size = emit.select(up, t_u, hlo.subtract(emit.const(0, U64), t_u))
        divisor = emit.select(nonempty, size, one)
        count = hlo.add(emit.mark(hlo.divide(hlo.subtract(diff, one), divisor), abi.SAFE_DIVISOR), one)
        return emit.select(nonempty, count, emit.const(0, U64)), s_u, t_u, None

    def _has_effects(self, expr) -> bool:
        return self.program.has_effect_call(expr)


def _carried_type(name: str, old: ArrayType, new: ArrayType, span: Span, first_span: Span) -> ArrayType:
    """The type of a carried variable that the body gives type `new` (a weak type adopts it), or E0302."""
    merged = merge_type(old, new)
    if merged is None or merged.shape != old.shape or merged.dtype != old.dtype and not old.weak:
        raise ArrError("E0302", f"loop changes the type of `{name}` from {old} to {new}", span, f"{new} here",
                       labels=[Label(first_span, f"{old} before the loop")],
                       notes=["a variable carried around a loop keeps one type (JAX's fori_loop fails at trace "
                              "time here)"],
                       help=f"convert the new value to {old}, or give `{name}` its final type before the loop")
    return merged


def _carried_paths(name: str, old: ArrayType, value: Unbound, first_span: Span, header: Span) -> None:
    """A carried variable that a run-time `if` in the body gives a type per path: E0302 at the assignment
    that changes its type; E0301 where each path's type could follow a weak initializer but not both."""
    for t, span in value.paths:
        _carried_type(name, old, t, span, first_span)
    raise ArrError("E0301", value.reason, header, "carried around the loop here", labels=value.labels,
                   notes=["a variable carried around a loop keeps one type"],
                   help="give the variable one type on every path, e.g. with `.astype(...)`")


def _shown(v) -> str:
    """A compile-time value as a label shows it: a string's text, quoted."""
    return f'"{v.text}"' if isinstance(v, StrVal) else describe(v)


def _outer_keys(before: dict, carried) -> set:
    """The keys a loop body sees from before the loop and does not carry: the same key every iteration."""
    return {id(v) for n, v in before.items() if isinstance(v, Val) and v.type.dtype.is_key and n not in carried}


def _static_trip_count(start: Val, stop: Val, step: Val, ctype: ArrayType) -> int | None:
    """len(range(start, stop, step)) where all three are known at compile time (each wrapped into its dtype,
    a weak literal into the loop's), else None."""
    bounds = [_known_bound(v, ctype) for v in (start, stop, step)]
    return None if None in bounds else len(range(*bounds))


def _known_bound(bound: Val, ctype: ArrayType) -> int | None:
    """A range bound known at compile time, wrapped into its dtype (a weak literal into the loop's)."""
    value = bound.static_int
    return None if value is None else wrap_int(value, ctype.dtype if bound.type.weak else bound.type.dtype)


def _as_u64(x: ir.Value, dt) -> ir.Value:
    return x if dt is U64 else hlo.bitcast_convert(emit.tensor_type((), U64), x)


def _counter_range(start: Val, stop: Val, step: Val) -> tuple | None:
    """(least, greatest) value of a `for` loop's variable where the bounds say (greatest None where only
    the start and the step's sign are known: `range(n)`), for the index checks that it makes needless."""
    s, e, t = (v.static_int for v in (start, stop, step))
    if s is None or t is None or t == 0:
        return None
    if e is None:
        return (s, None) if t > 0 else None
    values = range(s, e, t)
    return (min(values[0], values[-1]), max(values[0], values[-1])) if values else None


def _loop_value(k: ir.Value, start: ir.Value, step: ir.Value, dt) -> ir.Value:
    """start + k * step in u64 (wrapping), read back as `dt`: exact, since the value lies in the range."""
    value = hlo.add(start, hlo.multiply(k, step))
    if dt.kind == "int":
        return emit.convert(hlo.bitcast_convert(emit.tensor_type((), I64), value), I64, dt)
    return emit.convert(value, U64, dt)


def _literal_range_dtype(literals: list) -> DType:
    """The loop dtype of a range of weak integers: i32, or i64 (then u64) when a literal needs it.

    Only arguments written without names count (their values are known when the function is checked),
    so the dtype is the same for every specialization.
    """
    values = [a.static_int for a in literals if a.static_int is not None]
    for dt in (I32, I64, U64):
        lo, hi = int_range(dt)
        if all(lo <= v <= hi for v in values):
            return dt
    return I32           # E0211 follows


def _mentions_name(node) -> bool:
    return any(isinstance(n, ast.Name) for n in ast.walk(node))
