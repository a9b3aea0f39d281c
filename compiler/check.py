"""The checker: one walk over a function body that computes types (and, while lowering, MLIR values).

The same walk runs in two modes:
- at definition, with symbolic shapes (`Dim` polynomials over the shape variables) and no MLIR:
  every error that the types alone decide is reported here, once per function;
- at specialization, with concrete shapes and a `Lowering` attached: the conditions that could not be
  decided symbolically are decided now (same spans, concrete values), and each rule emits StableHLO.
A function whose parameter types are all concrete has nothing to specialize: its definition walk is the
lowering walk (`lower.lower_at_definition`), so it is walked once.
"""
from __future__ import annotations

import difflib
from contextlib import nullcontext
from dataclasses import dataclass, field

import numpy as np

from . import ast, emit, threefry
from .ast import DERIVATIVES, HIGHER_ORDER, PUSH_PULL
from .builtins import BUILTINS, OPERATORS, Builtin, CallCx, bind_arguments, refuse_keys, weak_literal_fits
from .optable import literal_out_of_range, require_literal_fits, text_at
from .diagnostics import CompileError, Diagnostic, Label, Reporter, plural
from .span import Span
from .parse import grouped
from .suggest import METHOD_NAMES, MODULES, closest, function_help, qualified_value_help, value_help
from .types import DTYPES, I32, TYPE_NAMES, ArrayType, Dim, KeysAreNotNumbers, numpy_dtype_name, too_large
from .control import ControlFlow, static_bool
from .values import (POISON, ArrError, DeferredBool, DTypeVal, Poisoned, StrVal, TupleVal, Unbound, Val, describe,
                     tuple_text)

NAMED_CONSTANTS = {"nan": float("nan"), "inf": float("inf"), "pi": float(np.pi)}
NEWAXIS_NAMES = ("None", "newaxis")      # as an index, a new axis of size 1 (NumPy's `None`, `np.newaxis`)


def named_constant_binding(name: str, span, what: str = "assign to {}") -> Diagnostic | None:
    """E0105 where a function, const, parameter, shape variable, local or loop variable would rebind one of
    NAMED_CONSTANTS (`nan = 1.0` would silently change what `nan` means below it)."""
    if name not in NAMED_CONSTANTS:
        return None
    return Diagnostic("E0105", f"cannot {what.format(f'`{name}`')}: it is a built-in constant", span,
                      f"`{name}` is a built-in constant", help="choose another name")
_WEAK_INT, _WEAK_FLOAT, _BOOL = ArrayType(I32, (), True), ArrayType(DTYPES["f32"], (), True), ArrayType(DTYPES["bool"])


# ---- signatures -------------------------------------------------------------------
@dataclass
class Signature:
    name: str
    params: list            # [(name, ArrayType, span)]
    results: list           # [ArrayType]
    result_spans: list
    tuple_result: bool
    shape_vars: list        # in order of first appearance
    defaults: dict = field(default_factory=dict)    # parameter name -> (its default's AST, NumPy value, text)

    def __str__(self) -> str:
        params = ", ".join(f"{n}: {t}" + (f" = {self.defaults[n][2]}" if n in self.defaults else "")
                           for n, t, _ in self.params)
        res = ", ".join(str(t) for t in self.results)
        return f"({params}) -> " + (f"({res})" if self.tuple_result else res)

    @property
    def float_results(self) -> list[int]:
        """The indices of its float results."""
        return [i for i, t in enumerate(self.results) if t.dtype.is_float]


def dim_of(expr, consts: dict, shape_vars: list | None, file_errors: list) -> Dim | None:
    """Evaluate a dimension expression; unknown names become shape variables when `shape_vars` allows."""
    if isinstance(expr, ast.DimInt):
        return Dim.const(expr.value)
    if isinstance(expr, ast.DimName):
        if expr.name in consts:
            return consts[expr.name]
        if shape_vars is None:
            file_errors.append(ArrError("E0206", f"shape variable `{expr.name}` is not bound by the parameters",
                                        expr.span, "not a parameter's dimension",
                                        help="use only shape variables that appear in the parameter types").diag)
            return None
        if expr.name not in shape_vars:
            shape_vars.append(expr.name)
        return Dim.var(expr.name)
    lhs = dim_of(expr.lhs, consts, shape_vars, file_errors)
    rhs = dim_of(expr.rhs, consts, shape_vars, file_errors)
    if lhs is None or rhs is None:
        return None
    if expr.op == "+":
        return lhs + rhs
    if expr.op == "-":
        return lhs - rhs
    if expr.op == "*":
        return lhs * rhs
    if rhs == 0:
        file_errors.append(ArrError("E0205", f"`{lhs} // {rhs}` divides a dimension by zero", expr.span,
                                    "division by zero", help="divide by a positive literal, `const` or shape "
                                                             "variable").diag)
        return None
    # Floor division, as `//` on integers: a polynomial where it is exact (`2 * n // 2` is n), else an opaque
    # dimension decided when the shape variables are known (`dm // h` with dm = 64, h = 8 is 8).
    return Dim.quotient(lhs, rhs)


# Python's and NumPy's names of the dtypes, in a parameter's or result's type (`steps: int`, `lr: float`).
_PYTHON_DTYPES = {
    "int": "Python's `int` has no width in arr: write `i32` (or `i64`)",
    "float": "Python's `float` has no width in arr: write `f64` (NumPy's float) or `f32` (JAX's default)",
    "double": "arr calls it `f64`", "half": "arr calls it `f16`", "bool_": "arr calls it `bool`",
    **{f"{kind}{bits}": f"arr calls it `{kind[0]}{bits}`" for kind, widths in
       [("float", (16, 32, 64)), ("int", (8, 16, 32, 64)), ("uint", (8, 16, 32, 64))] for bits in widths},
    "bfloat16": "arr calls it `bf16`",
}


def type_of(texpr: ast.TypeExpr, consts: dict, shape_vars: list | None, errors: list) -> ArrayType | None:
    dt = TYPE_NAMES.get(texpr.dtype)
    if dt is None:
        close = difflib.get_close_matches(texpr.dtype, TYPE_NAMES, 1)
        errors.append(ArrError("E0205", f"unknown dtype `{texpr.dtype}`", texpr.span, "not a dtype",
                               help=_PYTHON_DTYPES.get(texpr.dtype) or (f"did you mean `{close[0]}`?" if close else
                               "dtypes are " + " ".join(TYPE_NAMES))).diag)
        for d in texpr.dims or ():           # its shape variables are still bound (no E0206 at the result)
            dim_of(d, consts, shape_vars, [])
        return None
    dims = []
    for d in texpr.dims or ():
        dim = dim_of(d, consts, shape_vars, errors)
        if dim is None:
            return None
        if dim.is_const and dim.value < 0:
            errors.append(ArrError("E0205", f"negative dimension {dim.value}", d.span, "negative").diag)
            return None
        dims.append(dim)
    t = ArrayType(dt, tuple(dims))
    problem = too_large(t)
    if problem:
        errors.append(ArrError("E0215", f"array too large: {problem}", texpr.span, "too large").diag)
        return None
    return t


def unify(sig: Signature, args: list, arg_spans: list, call_span) -> dict:
    """Bind the callee's shape variables from argument types; raises ArrError E0212 on a mismatch."""
    env: dict = {}
    pending = []
    for (pname, ptype, pspan), arg, aspan in zip(sig.params, args, arg_spans):
        if not isinstance(arg, Val):
            raise ArrError("E0212", f"argument `{pname}` of `{sig.name}` must be an array, found {describe(arg)}",
                           aspan, f"expected {ptype}")
        at = arg.type
        dtype_ok = at.dtype == ptype.dtype or (at.weak and at.rank == 0 and weak_literal_fits(at, ptype.dtype))
        if dtype_ok:
            require_literal_fits(arg, ptype.dtype, aspan)
        if not dtype_ok or at.rank != ptype.rank:
            raise ArrError("E0212", f"argument `{pname}` of `{sig.name}` has type {at}, expected {ptype}", aspan,
                           f"this is {at}", labels=[Label(pspan, f"parameter declared as {ptype}")],
                           help=f"convert it with `.astype({ptype.dtype})`" if dtype_ok is False and
                           at.rank == ptype.rank else None)
        for pd, ad in zip(ptype.shape, at.shape):
            if len(pd.terms) == 1 and pd.linear_in(next(iter(pd.variables), "")) == 1 and \
                    not pd.variables & env.keys():
                env[next(iter(pd.variables))] = ad
            else:
                pending.append((pname, ptype, pspan, pd, ad, at, aspan))
    for pname, ptype, pspan, pd, ad, at, aspan in pending:
        expected = pd.subs(env)
        free = [v for v in expected.variables if v in sig.shape_vars and v not in env]
        if len(free) == 1 and expected.linear_in(free[0]):
            coeff = expected.linear_in(free[0])
            rest = expected - Dim.var(free[0]) * Dim.const(coeff)
            solved = (ad - rest).floordiv(Dim.const(coeff))
            if solved is not None and (solved * Dim.const(coeff) + rest) == ad:
                env[free[0]] = solved
                expected = pd.subs(env)
        negative = [f"`{v}` = {d}" for v, d in env.items() if d.is_const and d.value < 0]
        if negative or expected.is_const and expected.value < 0:
            bound = ", ".join(f"{k} = {v}" for k, v in env.items())
            message = f"argument `{pname}` of `{sig.name}` has type {at}, which as {ptype} makes {negative[0]}" \
                if negative else f"argument `{pname}` of `{sig.name}` is declared {ptype}, which with {bound} is " \
                                 f"the size {expected}"
            raise ArrError("E0212", message + ": a size is never negative", aspan, f"this is {at}",
                           labels=[Label(pspan, f"parameter declared as {ptype}")])
        if expected != ad:
            bound = ", ".join(f"{k} = {v}" for k, v in env.items())
            raise ArrError("E0212", f"argument `{pname}` of `{sig.name}` has type {at}, expected {ptype.subs(env)}",
                           aspan, f"this is {at}", labels=[Label(pspan, f"parameter declared as {ptype}")],
                           notes=[f"from the other arguments: {bound}"] if bound else [])
    return env


# NumPy's array methods arr has: `x.sum()` is `sum(x)` (FunctionWalk._method_form)
METHOD_FORMS = ("sum", "mean", "max", "min", "prod", "std", "var", "argmax", "argmin", "any", "all", "cumsum",
                "cumprod", "reshape", "transpose", "squeeze", "clip", "round", "dot", "sort", "argsort", "trace",
                "flatten", "ravel", "swapaxes", "repeat")


def _results_of(sig: Signature) -> str:
    return "(" + ", ".join(map(str, sig.results)) + ")" if sig.tuple_result else str(sig.results[0])


def _item_spans(node, n: int) -> list:
    """The spans of the `n` items of a tuple written at `node`: each item's for a literal, else `node`'s."""
    if isinstance(node, ast.TupleLit) and len(node.elems) == n:
        return [x.span for x in node.elems]
    return [node.span] * n


def reachable(program, name: str) -> list:
    """Function `name` and the module functions it calls, directly or not (read from the AST)."""
    seen, stack, out = set(), [name], []
    while stack:
        n = stack.pop()
        if n in seen or n not in program.functions:
            continue
        seen.add(n)
        out.append(n)
        stack.extend(ast.called_names(program.functions[n], program.functions))
    return out


# ---- the walker ---------------------------------------------------------------------
class Return_(Exception):
    pass


# JAX's `x.at[i].set(v)` in arr
AT_HELP = ("arr updates an array by index where JAX writes `.at[]`: `x[i] = v` for `x = x.at[i].set(v)`, `x[1:] += v` "
           "for `.add` (x becomes a new value: callers never see the change), and `add_at(x, idx, v)` to add at "
           "repeated indices")


# Python's loop exits, which arr's loops (a `stablehlo.while` each) do not have -> the help
LOOP_EXITS = {
    "break": "end the loop with its condition: a `while` whose condition reads a flag the body sets "
             "(`while i < n and not done:`)",
    "continue": "put the rest of the body under an `if` (`if not skip:`)",
}


def _always_returns(stmt) -> bool:
    """Whether `stmt` returns on every path whatever its conditions' values (a `return`, or an `if` whose
    every branch does)."""
    if isinstance(stmt, ast.Return):
        return True
    return isinstance(stmt, ast.If) and any(map(_always_returns, stmt.body)) and any(map(_always_returns, stmt.orelse))


@dataclass
class FunctionWalk(ControlFlow):
    """Walks one function body (see the module docstring for the two modes)."""
    program: "object"                    # compiler.program.Program
    fn: ast.FunctionDef
    reporter: Reporter
    lowering: "object | None" = None     # compiler.lower.FunctionLowering while lowering
    bindings: dict = field(default_factory=dict)
    env: dict = field(default_factory=dict)
    returned: list | None = None
    calls: list = field(default_factory=list)   # (callee name, span) for the recursion check
    spans: dict = field(default_factory=dict)   # name -> span of its latest assignment
    loop_depth: int = 0
    loop_counters: list = field(default_factory=list)   # run-time `for` counters, outermost first
    key_uses: dict = field(default_factory=dict)   # id of a key -> (the key's Val, where it was first used)
    outer_keys: list = field(default_factory=list)  # per enclosing loop: (ids of keys from before it, `for`)

    @property
    def is_lowering(self) -> bool:
        return self.lowering is not None

    # -- entry ------------------------------------------------------------------------
    def run(self, param_values: list) -> list | None:
        sig = self.program.signatures[self.fn.name]
        if not self.is_lowering:
            self._refuse_unbindable_quotients(sig)
        for var in sig.shape_vars:
            value = Dim.const(self.bindings[var]) if var in self.bindings else Dim.var(var)
            self.env[var] = Val(ArrayType(I32, (), weak=True), None, value)
        for (name, _, _), param, value in zip(sig.params, self.fn.params, param_values):
            self.env[name] = value
            self.spans[name] = param.span
        self.block(self.fn.body)
        if self.returned is None and not self._error_near_a_return():
            end = self.fn.body[-1].span if self.fn.body else self.fn.span
            self.report(ArrError("E0214", f"function `{self.fn.name}` does not return a value", end,
                                 "the body ends here without `return`",
                                 labels=[Label(self.fn.name_span, f"declared to return {self._declared()}")],
                                 help="end the function with `return <value>`").diag)
        return self.returned

    def _refuse_unbindable_quotients(self, sig: Signature) -> None:
        """E0206 for shape variables that the parameter types use only inside a `//` (`x: f32[n // 2]`):
        an argument's length cannot tell n (6 and 7 both halve to 3), so no call could bind them."""
        bound = {v for _, t, _ in sig.params for d in t.shape for v in d.atoms}
        for (name, t, span) in sig.params:
            unbound = sorted(set().union(*(d.variables for d in t.shape)) - bound)
            if not unbound:
                continue
            names = " and ".join(f"`{v}`" for v in unbound)
            them = "them" if len(unbound) > 1 else "it"
            dims = " and ".join(f"`{d}`" for d in t.shape if d.variables & set(unbound))
            self.report(ArrError("E0206", f"shape variable{'s' if len(unbound) > 1 else ''} {names} of `{name}` "
                                          f"{'are' if len(unbound) > 1 else 'is'} used only inside `//`, which "
                                          f"cannot bind {them}", span, f"no parameter binds {names}",
                                 notes=[f"an argument's length is {dims} rounded down, which does not tell "
                                        + " or ".join(f"`{v}`" for v in unbound)],
                                 help=f"give {names} as {'dimensions' if len(unbound) > 1 else 'a dimension'} of "
                                      f"{'their' if len(unbound) > 1 else 'its'} own in a parameter type, or name "
                                      f"this dimension (e.g. `{name}: {t.dtype}[m]`)"
                                 ).diag)
            bound |= set(unbound)

    def _error_near_a_return(self) -> bool:
        """Whether an error was reported inside a statement of the body that holds a `return` (a run-time `if`
        with an array condition, a `return` in a loop): the function may be meant to end there, and a
        missing-return error (E0214) would only repeat that one."""
        holders = [s.span for s in self.fn.body if any(isinstance(n, ast.Return) for n in ast.walk(s))]
        return any(d.severity == "error" and d.span is not None and _within(d.span, h)
                   for d in self.reporter.diagnostics for h in holders)

    def _declared(self) -> str:
        sig = self.program.signatures[self.fn.name]
        res = ", ".join(str(t) for t in sig.results)
        return f"({res})" if sig.tuple_result else res

    def report(self, diag: Diagnostic) -> None:
        if diag.severity == "error" and self.bindings:      # (a loop's types-only walk too: the same diagnostic)
            diag.notes.append("in " + self.fn.shown_name + " with " +
                              ", ".join(f"{k} = {v}" for k, v in self.bindings.items()))
        self.reporter.add(diag)

    # -- statements ---------------------------------------------------------------------
    def block(self, stmts) -> None:
        for i, stmt in enumerate(stmts):
            if self.returned is not None:
                # (after an `if` on a compile-time condition that chose a returning branch, the rest is the
                # other branch's code: another const value or specialization runs it)
                if _always_returns(stmts[i - 1]):
                    self.report(ArrError("E0106", "statement after `return` is never executed", stmt.span,
                                         "unreachable", help="remove it or move the `return` to the end").diag)
                return
            try:
                if type(stmt) in _EMIT_IN_OWN_LOCATIONS:
                    self.stmt(stmt)
                else:
                    with self.location(stmt, _STATEMENT_NAMES.get(type(stmt), "statement")):
                        self.stmt(stmt)
            except ArrError as err:
                self.report(err.diag)
                if self.is_lowering:
                    raise CompileError(self.reporter.diagnostics, self.program.sources)
                self._poison_targets(stmt)
            except RecursionError:
                self.report(Diagnostic("E0004", "expression nested too deeply", stmt.span, "here",
                                       help="split it into several assignments"))
                if self.is_lowering:        # no poisoned values while lowering: nothing could emit them
                    raise CompileError(self.reporter.diagnostics, self.program.sources)
                self._poison_targets(stmt)

    def _poison_targets(self, stmt) -> None:
        if isinstance(stmt, ast.Assign):
            for t in ast.walk_targets(stmt.targets):
                if isinstance(t, ast.NameTarget):
                    self.env[t.name] = POISON
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.NameTarget):
            self.env[stmt.target.name] = POISON
        elif isinstance(stmt, ast.Return) and self.loop_depth:
            pass            # (E0106 inside a loop: not a return of the branch around it, which would be another E0106)
        elif isinstance(stmt, ast.Return):
            self.returned = []
        elif isinstance(stmt, (ast.If, ast.For, ast.While)):
            from .control import assigned_names
            for name in assigned_names(stmt.body + getattr(stmt, "orelse", ())):
                self.env[name] = POISON

    def stmt(self, stmt) -> None:
        if isinstance(stmt, ast.For) and stmt.var in NAMED_CONSTANTS:
            line = self.program.sources[stmt.span.file].line_text(stmt.span.line)
            col = line.find(stmt.var, stmt.span.col + 2) + 1
            span = Span(stmt.span.file, stmt.span.line, col, stmt.span.line, col + len(stmt.var))
            diag = named_constant_binding(stmt.var, span, "use {} as a loop variable")
            raise ArrError(diag.code, diag.message, diag.span, diag.label, help=diag.help)
        handler = _STMT_HANDLERS.get(type(stmt))
        if handler is None:
            raise ArrError("E0106", f"`{type(stmt).__name__.lower()}` statements are not supported yet", stmt.span,
                           "not supported in this version of arrc",
                           help="see docs/language.md for what is implemented")
        handler(self, stmt)

    def stmt_Pass(self, stmt) -> None:
        pass

    def stmt_Print(self, stmt) -> None:
        """`print(...)` runs at run time, on every call, in program order (a host callback, see effects.py)."""
        keyword = next((a for a in stmt.args if isinstance(a, ast.Keyword)), None)
        if keyword is not None:              # (the parsers keep `print(x, sep="")`'s keywords among its arguments)
            raise ArrError("E0103", f"`print` takes no keyword arguments, found `{keyword.name}=`", keyword.span,
                           "a keyword", help="print writes its values separated by one space and ends the line, "
                                             "as Python's print does by default; build other text with several prints")
        values = [_as_printed(v) for v in map(self.eval, stmt.args)]
        for a, v in zip(stmt.args, values):
            if not isinstance(v, (Val, StrVal, Poisoned)):
                raise ArrError("E0210", f"cannot print {describe(v)}", a.span, f"this is {describe(v)}",
                               help="print arrays, scalars, strings, shapes (`x.shape`) and dtypes; print the "
                                    "items of a tuple one by one")
        if self.is_lowering:
            self.lowering.print(self, stmt, values)

    def stmt_Assert(self, stmt) -> None:
        cond = self.eval(stmt.cond)
        message = self.eval(stmt.message) if stmt.message is not None else StrVal("")
        if isinstance(cond, Poisoned):
            return
        if not isinstance(cond, Val) or not cond.type.dtype.is_bool:
            raise ArrError("E0213", f"an assertion needs a bool condition, found {describe(cond)}", stmt.cond.span,
                           f"this is {describe(cond)}", help="compare, e.g. `assert x > 0, \"x must be positive\"`")
        if not isinstance(message, StrVal):
            raise ArrError("E0210", "the message of `assert` must be a string literal", stmt.message.span,
                           f"this is {describe(message)}")
        if self.is_lowering:
            self.lowering.assert_(self, stmt, cond, message.text)

    def stmt_ExprStmt(self, stmt) -> None:
        word = stmt.expr.id if isinstance(stmt.expr, ast.Name) and stmt.expr.id not in self.env else None
        if word in LOOP_EXITS:
            raise ArrError("E0106", f"arr has no `{word}`", stmt.span, "not arr syntax", help=LOOP_EXITS[word])
        self.eval(stmt.expr)

    def stmt_Assign(self, stmt) -> None:
        value = self.eval(stmt.value)
        if len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.IndexTarget):
            self.assign_index(stmt.targets[0], value, stmt.value.span)
        elif len(stmt.targets) == 1:
            self.assign(stmt.targets[0], value)
        else:
            self._unpack(stmt.targets, value, stmt.value)

    def _unpack(self, targets: tuple, value, node) -> None:
        """`a, b = value` (and each nested `(c, d)` target): a tuple, or an array by rows, one per target."""
        if isinstance(value, Poisoned):
            for t in targets:
                self.assign(t, POISON)
            return
        if isinstance(value, Val) and value.type.rank and value.type.shape[0] == len(targets):
            value = self._rows(value, node)        # `k1, k2 = split(k)`: an array unpacks by rows
        if not isinstance(value, TupleVal) or len(value.items) != len(targets):
            names = plural(len(targets), "name")
            if isinstance(value, TupleVal):
                message = f"cannot unpack {plural(len(value.items), 'value')} into {names}"
            elif isinstance(value, Val) and value.type.rank:
                message = f"cannot unpack the {plural(value.type.shape[0], 'row')} of {value.type} into {names}"
            else:
                message = f"cannot unpack {describe(value)} into {names}: it is neither a tuple nor an array of rows"
            label = f"receives {describe(value)}" if isinstance(node, ast.TupleTarget) else f"this is {describe(value)}"
            raise ArrError("E0209", message, node.span, label)
        for t, v in zip(targets, value.items):
            self.assign(t, v)

    def _rows(self, value: Val, node) -> TupleVal:
        """`value[0], value[1], ...`: the rows an array unpacks into (as NumPy's and JAX's arrays do)."""
        rule = BUILTINS["__index__"]
        return TupleVal([self.call_builtin(rule, [value, [("index", Val(_WEAK_INT, None, Dim.const(i)), node)]],
                                           {}, node, [node.span]) for i in range(value.type.shape[0].value)])

    def assign(self, target, value) -> None:
        if isinstance(target, ast.IndexTarget):
            self.assign_index(target, value)
            return
        if isinstance(target, ast.TupleTarget):
            self._unpack(target.elems, value, target)
            return
        name = target.name
        if (diag := named_constant_binding(name, target.span)) is not None:
            raise ArrError(diag.code, diag.message, diag.span, diag.label, help=diag.help)
        if name in self.program.consts or name in self.program.signatures:
            what = "constant" if name in self.program.consts else "function"
            raise ArrError("E0105", f"cannot assign to `{name}`: it is a module {what}", target.span,
                           f"`{name}` is a {what}", help="choose another name for the local")
        if name in self.bindings or (name in self.env and self._is_shape_var(name)):
            raise ArrError("E0105", f"cannot assign to shape variable `{name}`", target.span, "a shape variable",
                           help="shape variables are fixed by the argument shapes; choose another name")
        self.env[name] = value
        self.spans[name] = target.span

    def _is_shape_var(self, name: str) -> bool:
        return name in self.program.signatures[self.fn.name].shape_vars

    def assign_index(self, target: ast.IndexTarget, value, value_span=None) -> None:
        """`x[...] = value` rebinds the local `x` to an updated copy (callers never see the change);
        `value_span`: where the value is written, for diagnostics about it."""
        if not isinstance(target.base, ast.Name):
            raise ArrError("E0105", "only a local variable can be updated by index", target.base.span,
                           "not a plain name", help="assign the inner value to a local first")
        current = self.eval(target.base)
        subs = self._subscripts(target.subscripts)
        if isinstance(current, Poisoned) or isinstance(value, Poisoned) or subs is None:
            self.env[target.base.id] = POISON
            return
        from .ops_index import update
        with self.location(target, "update"):
            cx = CallCx(self, target, [target.base.span], {})
            new = update(cx, current, subs, value, value_span)
        self.assign(ast.NameTarget(target.base.span, target.base.id), new)

    def stmt_AugAssign(self, stmt) -> None:
        if isinstance(stmt.target, ast.IndexTarget):
            self._refuse_mask_update(stmt)
            current = self.eval(ast.Index(stmt.target.span, stmt.target.base, stmt.target.subscripts))
            rhs = self.eval(stmt.value)
            with self.location(stmt, stmt.op):
                value = self.apply_operator(stmt.op, [current, rhs], stmt, [stmt.target.span, stmt.value.span])
            self.assign_index(stmt.target, value, stmt.value.span)
            return
        current = self.eval(ast.Name(stmt.target.span, stmt.target.name))
        rhs = self.eval(stmt.value)
        with self.location(stmt, stmt.op):
            value = self.apply_operator(stmt.op, [current, rhs], stmt, [stmt.target.span, stmt.value.span])
        if isinstance(value, Val) and isinstance(current, Val) and value.type.dtype != current.type.dtype \
                and not current.type.weak:
            name, dt = stmt.target.name, current.type.dtype
            # NumPy's in-place `W -= lr * g` (an f64 `lr`, an f32 `W`) casts the result back within one kind
            keep = ""
            if isinstance(rhs, Val) and not rhs.type.weak and rhs.type.dtype != dt and \
                    dt.is_float == rhs.type.dtype.is_float and not (stmt.op == "/" and not dt.is_float):
                text = text_at(self.program.sources, stmt.value.span) or "..."
                keep = f"keep its dtype with `{name} {stmt.op}= {grouped(text)}" \
                       f".astype({dt})`, or "
            raise ArrError("E0201", f"`{stmt.op}=` would change `{name}` from {current.type} "
                                    f"to {value.type}", stmt.span, "changes the dtype",
                           help=f"{keep}write `{name} = {name} {stmt.op} ...` to rebind with the new type" +
                                (" (which a loop refuses: its variables keep their type)" if self.loop_depth else ""))
        self.assign(stmt.target, value)

    def _refuse_mask_update(self, stmt) -> None:
        """`x[mask] += v`: E0303 with the `where` that does it (the read `x[mask]` alone would get the help of a
        read)."""
        target = stmt.target
        if self.is_lowering or len(target.subscripts) != 1 or not isinstance(target.base, ast.Name):
            return                  # (checked before lowering, which must not evaluate the subscript twice)
        [(kind, mask, _)] = self._subscripts(target.subscripts) or [(None, None, None)]
        current = self.eval(target.base)
        if kind == "index" and isinstance(mask, Val) and mask.type.dtype.is_bool and mask.type.rank > 0 \
                and isinstance(current, Val):
            from .ops_index import mask_assignment_help, mask_error
            cx = CallCx(self, target, [target.base.span], {})
            mask_text, value_text = (text_at(self.program.sources, n.span) for n in (target.subscripts[0], stmt.value))
            mask_error(cx, mask_assignment_help(target.base.id, mask_text, mask.type.rank, current.type.rank,
                                                value_text, stmt.op), assignment=True)

    def stmt_Return(self, stmt) -> None:
        sig = self.program.signatures[self.fn.name]
        if self.loop_depth:
            raise ArrError("E0106", "`return` inside a loop is not supported", stmt.span, "inside a loop",
                           help="keep the result in a variable and return it after the loop")
        values = [self.eval(v) for v in stmt.values]
        if len(values) == 1 and isinstance(values[0], TupleVal) and len(sig.results) > 1:
            values = list(values[0].items)
        if len(values) != len(sig.results):
            raise ArrError("E0203", f"`{self.fn.name}` returns {len(values)} value(s), declared "
                                    f"{len(sig.results)}", stmt.span, f"returns {len(values)}",
                           labels=[Label(self.fn.name_span, f"declared to return {self._declared()}")])
        out = []
        nodes = stmt.values if len(stmt.values) == len(values) else [stmt] * len(values)
        for value, node, declared, dspan in zip(values, nodes, sig.results, sig.result_spans):
            declared = declared.subs(self.bindings)
            if isinstance(value, Poisoned):
                out.append(value)
                continue
            ok = isinstance(value, Val) and value.type.shape == declared.shape and (
                value.type.dtype == declared.dtype or (value.type.weak and weak_literal_fits(value.type, declared.dtype)))
            if not ok:
                found = describe(value)
                raise ArrError("E0203", f"returned value has type {found}, declared {declared}", node.span,
                               f"this is {found}", labels=[Label(dspan, "declared here")],
                               help=_result_help(value, declared))
            from .builtins import check_literal
            check_literal(CallCx(self, node, [node.span], {}), value, declared.dtype, 0,    # `return 256` as u8
                          literals_only=True)
            out.append(Val(declared, self.materialize(value, declared.dtype) if self.is_lowering else None))
        self.returned = out

    # -- expressions ----------------------------------------------------------------------
    def location(self, node, what: str):
        """The location of the ops emitted for `node` (a context manager; nothing while checking)."""
        if self.lowering is None:
            return _NO_LOCATION
        return self.lowering.location(node.span, what)

    def eval(self, expr):
        kind = type(expr)
        handler = _EXPR_HANDLERS.get(kind) or getattr(FunctionWalk, "expr_" + kind.__name__)
        if self.lowering is None or kind in _EMITS_NOTHING:
            return handler(self, expr)
        with self.lowering.location(expr.span, _location_name(expr)):
            return handler(self, expr)

    def expr_IntLit(self, e):
        if e.value >= 2 ** 64:
            raise ArrError("E0211", "integer literal too large", e.span, "does not fit in 64 bits")
        return Val(_WEAK_INT, None, Dim.const(e.value))

    def expr_FloatLit(self, e):
        return Val(_WEAK_FLOAT, None, e.value)

    def expr_BoolLit(self, e):
        return Val(_BOOL, None, e.value)

    def expr_StrLit(self, e):
        return StrVal(e.value)

    def expr_Name(self, e):
        if e.id in self.env:
            value = self.env[e.id]
            if isinstance(value, Unbound) and value.code == "E0301":
                raise ArrError("E0301", value.reason, e.span, "used here", labels=value.labels,
                               help="give the variable one type on every path, e.g. with `.astype(...)`")
            if isinstance(value, Unbound):
                raise ArrError("E0101", f"`{e.id}` may be undefined here", e.span, "possibly undefined",
                               labels=[Label(value.span, "assigned here")] if value.span else [],
                               notes=[value.reason],
                               help=f"assign `{e.id}` before the `if`/loop so it has a value on every path")
            return value
        if e.id in self.program.const_types or e.id in self.program.consts:
            with self.location(e, "name"):
                return self.program.const_value(e.id, self)
        if e.id in NAMED_CONSTANTS:
            return Val(_WEAK_FLOAT, None, NAMED_CONSTANTS[e.id])
        if e.id in DTYPES:
            return DTypeVal(DTYPES[e.id])
        if e.id in self.program.signatures or e.id in BUILTINS:
            raise ArrError("E0210", f"`{e.id}` is a function; call it", e.span, "a function, not a value")
        known = list(self.env) + list(self.program.consts) + list(NAMED_CONSTANTS)
        raise ArrError("E0101", f"undefined name `{e.id}`", e.span, "not defined", help=value_help(e.id, known))

    def expr_TupleLit(self, e):
        return TupleVal([self.eval(x) for x in e.elems])

    def expr_ArrayLit(self, e):
        elems = [self.eval(x) for x in e.elems]
        if any(isinstance(x, Poisoned) for x in elems):
            return POISON
        return self.call_builtin(BUILTINS["__array__"], [elems], {}, e, [x.span for x in e.elems])

    def eval_or_poison(self, expr):
        """Evaluate `expr`, reporting an error and continuing with a poisoned value (more errors per run); while
        lowering, the error ends the walk (`block`), as nothing can emit a poisoned value."""
        try:
            return self.eval(expr)
        except ArrError as err:
            if self.is_lowering:
                raise
            self.report(err.diag)
            return POISON

    def expr_Binary(self, e):
        lhs = self.eval_or_poison(e.lhs)
        if e.op in ("and", "or") and static_bool(lhs) is (e.op == "or"):
            # a compile-time left side that decides: Python does not evaluate the right (`n > 2 and x[2] > 0`)
            rhs = self._dropped_side(e.rhs)
            if rhs is None or isinstance(rhs, Val) and rhs.type.rank == 0 and rhs.type.dtype.is_bool:
                return lhs
        rhs = self.eval_or_poison(e.rhs)
        return self.apply_operator(e.op, [lhs, rhs], e, [e.lhs.span, e.rhs.span])

    def expr_Unary(self, e):
        operand = self.eval(e.operand)
        return self.apply_operator("unary" + e.op, [operand], e, [e.operand.span])

    def apply_operator(self, op: str, operands: list, node, spans: list):
        if POISON in operands:
            return POISON
        return self.call_builtin(OPERATORS[op], operands, {}, node, spans)

    def expr_CondExpr(self, e):
        cond = self.eval(e.cond)
        if isinstance(cond, Val) and cond.type.rank == 0 and cond.type.dtype.is_bool and \
                (self.program.calls_print_or_assert(e.then) or self.program.calls_print_or_assert(e.orelse)):
            return self._cond_as_if(e, cond)
        chosen = static_bool(cond)
        uses_before, uses_after = self.key_uses, {}     # one side is chosen: a key may be used on each (as `if`)
        sides = []
        for side, taken in ((e.then, chosen is not False), (e.orelse, chosen is not True)):
            self.key_uses = dict(uses_before)
            sides.append(self.eval(side) if taken else self._dropped_side(side))
            uses_after.update(self.key_uses)
        self.key_uses = uses_after
        then, orelse = sides
        if then is None or orelse is None:      # `x[3] if n > 3 else 0.0` with n = 2: Python's value, the taken side
            return then if orelse is None else orelse
        if not (isinstance(then, Val) and isinstance(orelse, Val)):     # a dtype, tuple or string: no select
            if chosen is not None:                                      # (`f64 if n > 2 else f32`)
                return then if chosen else orelse
            if isinstance(cond, Val) and isinstance(cond.static, DeferredBool):
                return then if then == orelse else POISON      # chosen at specialization (as `if`: _merge_deferred)
        if any(isinstance(o, Poisoned) for o in (cond, then, orelse)):
            return POISON
        return self.call_builtin(BUILTINS["__cond__"], [cond, then, orelse], {}, e,
                                 [e.cond.span, e.then.span, e.orelse.span])

    def _dropped_side(self, side):
        """The side of `a if c else b` that a compile-time `c` drops (or the right side of an `and`/`or` whose
        left side decides), for its type only: None where it has none for these shapes (`x[3] if n > 3 else 0.0`
        with n = 2), as Python does not evaluate it; its diagnostics are dropped with it."""
        reported = len(self.reporter.diagnostics)
        try:
            with self._types_only():
                value = self.eval(side)
        except ArrError:
            value = None
        dropped = self.reporter.diagnostics[reported:]
        del self.reporter.diagnostics[reported:]        # (Python does not evaluate it: nor warn about it)
        if isinstance(value, Poisoned) or any(not d.code.startswith("W") for d in dropped):
            return None     # (a warning, W0001 of `k >= t1` in bf16, leaves it its type: it broadcasts the result)
        return value

    def _cond_as_if(self, e, cond):
        """`a if c else b` where a side prints or asserts: as `if c: v = a else: v = b`, so that only the side
        taken has effects, as in Python (both sides are otherwise evaluated, and a select picks one). Its type
        is the select's: the sides' types found first (evaluated for their types only), each side made it."""
        uses = dict(self.key_uses)
        with self._types_only():
            typed = self.call_builtin(BUILTINS["__cond__"], [cond, self.eval(e.then), self.eval(e.orelse)], {}, e,
                                      [e.cond.span, e.then.span, e.orelse.span])
        self.key_uses = uses
        cond_name, type_name, value_name = (f"<{what} {id(e)}>" for what in ("condition", "type", "value"))
        sides = [(ast.Assign(side.span, (ast.NameTarget(side.span, value_name),),
                             ast.Call(side.span, ast.Name(side.span, "<as>"), (side, ast.Name(side.span, type_name)),
                                      ())),) for side in (e.then, e.orelse)]
        returned = self.returned
        self.env[cond_name], self.env[type_name] = cond, Val(typed.type)      # (names no source can write)
        try:
            self.stmt_If(ast.If(e.span, ast.Name(e.cond.span, cond_name), *sides))
            return self.env.pop(value_name, POISON)
        finally:
            for name in (cond_name, type_name):
                self.env.pop(name, None)
            self.spans.pop(value_name, None)
            self.returned = returned

    def expr_Attribute(self, e):
        path = self._module_path(e)
        if path is not None:
            raise ArrError("E0101", f"undefined name `{'.'.join(path)}`", e.span, "not defined",
                           help=qualified_value_help(path))
        base = self.eval(e.base)
        if isinstance(base, Poisoned):
            return POISON
        rule = BUILTINS.get("." + e.name)
        if rule is None or rule.method:
            raise ArrError("E0210", f"{describe(base)} has no attribute `{e.name}`", e.span,
                           "unknown attribute" if rule is None else "a method: call it",
                           help=AT_HELP if e.name == "at" else
                           "attributes are .shape .ndim .size .dtype .T and the method .astype(dtype)")
        return self.call_builtin(rule, [base], {}, e, [e.base.span])

    def expr_Index(self, e):
        base = self.eval(e.base)
        subs = self._subscripts(e.subscripts)
        if isinstance(base, Poisoned) or subs is None:
            return POISON
        return self.call_builtin(BUILTINS["__index__"], [base, subs], {}, e, [e.base.span])

    def _module_path(self, e: ast.Attribute) -> list[str] | None:
        """`["jnp", "linalg", "inv"]` for `jnp.linalg.inv`: an attribute of a NumPy/JAX module name (one that
        is not a name of this program)."""
        path, node = [e.name], e.base
        while isinstance(node, ast.Attribute):
            path.insert(0, node.name)
            node = node.base
        if not isinstance(node, ast.Name) or node.id not in MODULES or node.id in self.env or \
                node.id in self.program.consts or node.id in self.program.signatures:
            return None
        return [node.id] + path

    def _function_names(self) -> list[str]:
        """The names a call may mean, the module's own first (a tie in `closest` goes to them: a misspelt
        `los` is the module's `loss` rather than `log`)."""
        return list(self.program.signatures) + [n for n in BUILTINS if n[0].isalpha()]

    def _subscripts(self, subscripts):
        """Evaluated subscripts as (kind, value, node); None if one of them is poisoned."""
        subs = []
        for s in subscripts:
            if isinstance(s, ast.Slice):
                parts = [None if p is None else self.eval(p) for p in (s.start, s.stop, s.step)]
                subs.append(("slice", parts, s))
            elif isinstance(s, ast.EllipsisIndex):
                subs.append(("...", None, s))
            elif isinstance(s, ast.Name) and s.id in NEWAXIS_NAMES and s.id not in self.env and \
                    s.id not in self.program.consts:
                subs.append(("newaxis", None, s))       # `x[None, :]`, `x[:, newaxis]`: a new axis of size 1
            else:
                subs.append(("index", self.eval(s), s))
        if any(isinstance(v, Poisoned) for _, v, _ in subs) or \
                any(isinstance(p, Poisoned) for k, v, _ in subs if k == "slice" for p in v):
            return None
        return subs

    def expr_Call(self, e):
        if isinstance(e.func, ast.Call) and isinstance(e.func.func, ast.Name) and e.func.func.id in DERIVATIVES \
                and e.func.func.id not in self.env:
            return self.call_derivative(e)
        if isinstance(e.func, ast.Call) and isinstance(e.func.func, ast.Name) and (e.func.func.id == "vmap" \
                and "vmap" not in self.env and "vmap" not in self.program.signatures or e.func.func.id == ast.VMAP_OF_API):
            return self.call_vmap(e)
        if isinstance(e.func, ast.Name) and e.func.id in PUSH_PULL and e.func.id not in self.env \
                and e.func.id not in self.program.signatures:
            return self.call_jvp_vjp(e)
        if isinstance(e.func, ast.Name) and e.func.id in _MAKE_FUNCTIONS and e.func.id not in self.env \
                and e.func.id not in self.program.signatures:      # `grad(f)` not called: not a value in arr
            name = e.func.id
            raise ArrError("E0210", f"`{name}(...)` makes a function: call it", e.span, "a function, not a value",
                           help=f"call it with the arguments, e.g. `{name}(f)(x)`: functions are not values in arr")
        if isinstance(e.func, ast.Name) and e.func.id == "shard" and "shard" not in self.program.signatures:
            return self.call_shard(e)
        args = [self.eval_or_poison(a) for a in e.args]
        kwargs = {k.name: _NONE if isinstance(k.value, ast.Name) and k.value.id == "None" and "None" not in self.env
                  else self.eval_or_poison(k.value) for k in e.kwargs} if e.kwargs else {}
        spans = [a.span for a in e.args]
        kw_spans = {k.name: k.span for k in e.kwargs} if e.kwargs else {}
        if isinstance(e.func, ast.Attribute) and (path := self._module_path(e.func)) is not None:
            if self._unknown_again(".".join(path), e.func.span):
                return POISON
            raise ArrError("E0101", f"unknown function `{'.'.join(path)}`", e.func.span, "not an arr function",
                           help=function_help(path[-1], self._function_names(), _first_arg(e), qualified=True,
                                             module=".".join(path[:-1])))
        if isinstance(e.func, ast.Attribute):
            base = self.eval(e.func.base)
            if isinstance(base, Poisoned):
                return POISON           # (its error is reported: `x.at[0].add(1.0)` after `x.at[i]` failed)
            rule = BUILTINS.get("." + e.func.name)
            if rule is None or not rule.method:
                rule, args, spans = self._method_form(e, base, args, spans)
            args = [base] + args
            spans = [e.func.base.span] + spans
        elif isinstance(e.func, ast.Name):
            name = e.func.id
            if name in self.env:
                raise ArrError("E0210", f"`{name}` is a value, not a function", e.func.span, "not callable")
            if name in self.program.signatures:
                kwargs = self._none_keywords(e, kwargs, None)
                if POISON in args or POISON in kwargs.values():
                    return POISON
                return self.call_user(name, args, kwargs, e, spans, kw_spans)
            if name in DTYPES:
                rule, args, spans = BUILTINS[".astype"], args + [DTypeVal(DTYPES[name])], spans + [e.func.span]
            else:
                rule = BUILTINS.get(name)
            if rule is None and name in self.program.functions:
                return POISON       # a `def` whose signature has an error (reported there): its calls stay silent
            if rule is None or (rule.name.startswith(("__", ".")) and name not in DTYPES):
                if self._unknown_again(name, e.func.span):
                    return POISON
                raise ArrError("E0101", f"unknown function `{name}`", e.func.span, "not defined",
                               help=function_help(name, self._function_names(), _first_arg(e)))
            if name in ("max", "min") and len(args) > 1:
                _refuse_second_array(name, args[1], e.args[1].span)
        else:
            message, label, help = self._not_callable(e.func)
            raise ArrError("E0210", message, e.func.span, label, help=help)
        kwargs = self._none_keywords(e, kwargs, rule)
        if POISON in args or POISON in kwargs.values():
            return POISON
        return self.call_builtin(rule, args, kwargs, e, spans, kw_spans)

    def _none_keywords(self, e, kwargs: dict, rule) -> dict:
        """NumPy's `axis=None`, `ord=None`: a keyword given `None` where the builtin takes None (its default, or
        declared `nullable`) is None; anywhere else `None` is evaluated, an undefined name (arr has no None)."""
        for k in e.kwargs:
            if kwargs.get(k.name) is _NONE:
                kwargs[k.name] = None if rule is not None and k.name in rule.nullable else self.eval_or_poison(k.value)
        return kwargs

    def call_shard(self, e):
        """`shard(x, "data", None)`: the array, then its axes by position, as literals (`None` among them)."""
        if "shard" in self.env:
            raise ArrError("E0210", "`shard` is a value, not a function", e.func.span, "not callable")
        if e.kwargs:
            raise ArrError("E0103", "`shard` takes the array and one mesh axis per dimension by position",
                           e.kwargs[0].span, "a keyword", help="write `shard(x, \"data\", None)`")
        args = [self.eval_or_poison(e.args[0]), tuple(self._mesh_axis(a) for a in e.args[1:])] if e.args else []
        return self.call_builtin(BUILTINS["shard"], args, {}, e, [a.span for a in e.args[:1]] + [e.span])

    def _mesh_axis(self, node):
        """An axis of `shard(x, "data", None)`: a mesh axis name, `None` (not split), or a tuple of names (split
        over several axes, the first outermost), written as literals."""
        if isinstance(node, ast.Name) and node.id == "None":
            return None
        if isinstance(node, ast.StrLit) and node.value:
            return node.value
        if isinstance(node, ast.TupleLit) and node.elems and all(isinstance(x, ast.StrLit) and x.value
                                                                  for x in node.elems):
            return [x.value for x in node.elems]
        raise ArrError("E0204", "`shard` takes a mesh axis name (a string), `None`, or a tuple of names for each "
                                "dimension", node.span, "not a mesh axis",
                       help="e.g. `shard(x, \"data\", None)`: rows split over the mesh axis `data`, columns whole")

    def _not_callable(self, func) -> tuple:
        """The message, label and help of E0210 for a call of `func`, not a name: what a JAX user meant by a
        call of a call (`grad(loss)(w)` is arr's only one: LANGUAGE.md section 15)."""
        inner = func.func if isinstance(func, ast.Call) else None
        name = inner.id if isinstance(inner, ast.Name) else None
        path = self._module_path(inner) if isinstance(inner, ast.Attribute) else None
        if path and (path[-1] in DERIVATIVES or path[-1] == "vmap"):       # `jax.grad(loss)(w, x)`
            written = text_at(self.program.sources, func.span) or f"{'.'.join(path)}(f)"
            return ("only named functions can be called", "not callable",
                    f"builtins are called unqualified: write `{written.replace('.'.join(path), path[-1], 1)}(...)`")
        example = f"`{name}(f, (x,), " + ("(t,))`" if name == "jvp" else "ct)`")
        if name in PUSH_PULL:
            return (f"`{name}` does not return a function", f"`{name}` needs its arguments here",
                    f"give `{name}` the function and its arguments in one call, as in JAX: {example}")
        if name in self.program.signatures:
            return (f"`{name}(...)` returns {_results_of(self.program.signatures[name])}, not a function",
                    "not callable", "functions are not values in arr; only `grad(f)(...)`, "
                                    "`value_and_grad(f)(...)` and `vmap(f)(...)` call the result of a call")
        from .suggest import EQUIVALENTS
        if name in EQUIVALENTS and EQUIVALENTS[name][1] and name not in BUILTINS:       # `vmap(f)(x)`, `jit(f)(x)`
            return "only named functions can be called", f"`{name}` is not in arr", EQUIVALENTS[name][1]
        close = difflib.get_close_matches(name or "", DERIVATIVES, 1, 0.6)
        if close:
            return ("only named functions can be called", "not callable",
                    f"did you mean `{close[0]}`? `{close[0]}(f)(x)` differentiates the module function `f`")
        return ("only named functions can be called", "not callable",
                "call a builtin or a module function by its name; only `grad(f)(...)`, `value_and_grad(f)(...)` "
                "and `vmap(f)(...)` call the result of a call")

    def _unknown_again(self, name: str, span) -> bool:
        """Whether the unknown function `name` was reported already in this compilation: then this use is
        counted in a note of that first report instead of being reported again (`roll` called ten times is
        one error, as one missing name is one fix)."""
        first = next((d for d in self.reporter.diagnostics if d.code == "E0101" and
                      d.message == f"unknown function `{name}`"), None)
        if first is None:
            return False
        lines = self.reporter.repeated.setdefault(("E0101", name), [])
        lines.append(span.line)
        on = sorted(set(lines))
        shown = ", ".join(map(str, on[:8])) + (", ..." if len(on) > 8 else "")
        note = f"`{name}` is called {len(lines)} more time{'s' if len(lines) > 1 else ''} " \
               f"(line{'s' if len(on) > 1 else ''} {shown}), not reported again"
        first.notes[:] = [n for n in first.notes if not n.startswith(f"`{name}` is called ")] + [note]
        return True

    def _method_form(self, e, base, args: list, spans: list):
        """`x.sum(axis=1)`, `x.reshape(2, 3)`, `x.flatten()`: NumPy's array methods, as the builtin of that name
        with `x` first (a shape or axes given as several integers make one tuple, as NumPy's do)."""
        name = e.func.name
        target = "reshape" if name in ("flatten", "ravel") else name
        rule = BUILTINS.get(target) if name in METHOD_FORMS else None
        if rule is None:
            methods = ", ".join(f".{m}" for m in ("astype",) + METHOD_FORMS
                                if m in ("astype", "flatten", "ravel") or m in BUILTINS)
            hint = METHOD_NAMES.get(name, "").replace("{x}", text_at(self.program.sources, e.func.base.span) or "x")
            raise ArrError("E0210", f"{describe(base)} has no method `{name}`", e.func.span, "unknown method",
                           help=hint or f"the methods are {methods} (NumPy's, as the builtins of those names)")
        if name in ("flatten", "ravel"):
            if args:
                raise ArrError("E0103", f"`.{name}()` takes no arguments", e.args[0].span, "an argument")
            return rule, [TupleVal([Val(_WEAK_INT, None, Dim.const(-1))])], [e.func.span]
        if name in ("reshape", "transpose") and len(args) > 1:
            return rule, [TupleVal(list(args))], [e.args[0].span.to(e.args[-1].span)]
        return rule, args, spans

    # -- calls ------------------------------------------------------------------------------
    def call_builtin(self, rule: Builtin, args, kwargs, node, spans, kw_spans=None):
        cx = CallCx(self, node, spans, kw_spans or {})
        if not rule.keys:
            refuse_keys(rule, args, kwargs, cx)
        try:
            return rule.fn(cx, *bind_arguments(rule, args, kwargs, cx))
        except KeysAreNotNumbers:
            raise ArrError("E0201", f"`{rule.display}` cannot mix keys and numbers: keys are not numbers", node.span,
                           "keys and numbers", help="keep keys apart from numbers; `key_data(k)` gives a key's "
                                                    "two u32 words") from None

    def call_derivative(self, e):
        """`grad(f, argnums=...)(args)`, `value_and_grad(...)(args)` (LANGUAGE.md section 15): f's derivatives
        with respect to its arguments `argnums` (an int: one array; a tuple: a tuple), after f's value for
        value_and_grad. Lowered by reverse mode over f's StableHLO (compiler/autodiff.py)."""
        inner, kind = e.func, e.func.func.id
        if len(inner.args) > 1:
            raise ArrError("E0103", f"`{kind}` takes the function alone by position", inner.args[1].span,
                           "give `argnums` by keyword", help=f"write `{kind}(f, argnums=...)`, as in JAX")
        fname, sig = self._differentiated(kind, inner.args[0] if len(inner.args) == 1 else None,
                                          inner.args[0].span if inner.args else inner.span, f"`{kind}(loss)`")
        argnums, single, at = (0,), True, inner.span
        for kw in inner.kwargs:
            if kw.name != "argnums":
                raise ArrError("E0103", f"`{kind}` has no parameter `{kw.name}`", kw.span, "unknown keyword",
                               notes=["parameters: f, argnums=0"])
            value, at = self.eval(kw.value), kw.span
            items = value.items if isinstance(value, TupleVal) else [value]
            nums = [v.static_int if isinstance(v, Val) and v.type.rank == 0 else None for v in items]
            if not items or None in nums:
                raise ArrError("E0204", "`argnums` must be an integer literal or a tuple of them", kw.span,
                               "not literal integers")
            argnums, single = tuple(nums), not isinstance(value, TupleVal)
        n = len(sig.params)
        for i in argnums:
            if not -n <= i < n:
                raise ArrError("E0204", f"argnums {i} is out of range: `{fname}` has {n} parameter(s)", at,
                               "out of range", notes=[f"signature: {fname}{sig}"],
                               help=f"argnums count from 0, as in JAX: 0..{n - 1}, or -{n}..-1 from the end")
        wrt = tuple(i % n for i in argnums)
        result = sig.results[0]
        if sig.tuple_result or result.rank or not result.dtype.is_float:
            raise ArrError("E0216", f"`{kind}` needs a function with one float scalar result; `{fname}` returns "
                                    f"{_results_of(sig)}",
                           inner.args[0].span, "not a float scalar function",
                           notes=[f"signature: {fname}{sig}"], help="differentiate a scalar loss, e.g. its `sum`")
        self._refuse_non_floats(fname, sig, wrt, [at] * n)
        if e.kwargs:
            raise ArrError("E0103", f"`{kind}(...)` takes its arguments by position", e.kwargs[0].span, "a keyword")
        args = [self.eval(a) for a in e.args]
        if POISON in args:
            return POISON
        spans = [a.span for a in e.args]
        defaults, default_spans = self._left_out(sig, len(args))
        args, spans = args + defaults, spans + default_spans
        if len(args) != n:
            raise ArrError("E0103", f"`{fname}` takes {n} argument(s), {len(args)} given", e.span,
                           "wrong number of arguments", notes=[f"signature: {fname}{sig}"])
        env = unify(sig, args, spans, e.span)
        param_types = [p[1].subs(env) for p in sig.params]
        types = ([result.subs(env)] if kind == "value_and_grad" else []) + [param_types[i] for i in wrt]
        out = self._lower_derivative(kind, fname, e.span, args, param_types, wrt, types)
        value, grads = (out[0], out[1:]) if kind == "value_and_grad" else (None, out)
        grads = grads[0] if single else TupleVal(grads)
        return TupleVal([value, grads]) if value is not None else grads

    def call_vmap(self, e):
        """`vmap(f, in_axes=0, out_axes=0)(args)` (LANGUAGE.md section 16): f once per lane of the batched
        arguments, the lanes of each result along its `out_axes`. Lowered by compiler/batching.py."""
        inner = e.func
        if len(inner.args) != 1:
            raise ArrError("E0103", "`vmap` takes the function alone by position",
                           inner.args[1].span if len(inner.args) > 1 else inner.span, "give the axes by keyword",
                           help="write `vmap(f, in_axes=..., out_axes=...)(x, ...)`, as in JAX")
        node = inner.args[0]
        if not isinstance(node, ast.Name) or node.id not in self.program.signatures:
            close = closest(node.id, self.program.signatures) if isinstance(node, ast.Name) else None
            raise ArrError("E0210", "`vmap` takes a module function by name, e.g. `vmap(f)(xs)`", node.span,
                           "not a module function", help=f"did you mean `{close}`?" if close is not None else
                           self._not_a_function_help(node))
        fname, sig = node.id, self.program.signatures[node.id]
        n, k = len(sig.params), len(sig.results)
        axes = {"in_axes": [0] * n, "out_axes": [0] * k}
        spans = {"in_axes": inner.span, "out_axes": inner.span}
        for kw in inner.kwargs:
            if kw.name not in axes:
                raise ArrError("E0103", f"`vmap` has no parameter `{kw.name}`", kw.span, "unknown keyword",
                               notes=["parameters: f, in_axes=0, out_axes=0"])
            count = n if kw.name == "in_axes" else k
            axes[kw.name], spans[kw.name] = self._axes_literal(kw, count, fname, sig), kw.span
        if e.kwargs:
            raise ArrError("E0103", "`vmap(...)` takes its arguments by position", e.kwargs[0].span, "a keyword")
        args = [self.eval(a) for a in e.args]
        if POISON in args:
            return POISON
        arg_spans = [a.span for a in e.args]
        defaults, default_spans = self._left_out(sig, len(args))
        args, arg_spans = args + defaults, arg_spans + default_spans
        if defaults:                    # every lane shares a default, as Python fills it inside jax.vmap
            axes["in_axes"][-len(defaults):] = [None] * len(defaults)
        if len(args) != n:
            raise ArrError("E0103", f"`{fname}` takes {n} argument(s), {len(args)} given", e.span,
                           "wrong number of arguments", notes=[f"signature: {fname}{sig}"])
        size, first, lanes, in_axes = None, None, [], []
        for i, (arg, axis, span) in enumerate(zip(args, axes["in_axes"], arg_spans)):
            if axis is None:
                lanes.append(arg)
                in_axes.append(None)
                continue
            if not isinstance(arg, Val) or arg.type.rank == 0:
                raise ArrError("E0204", f"`vmap`: in_axes gives argument {i} the axis {axis}, but it is "
                                        f"{describe(arg)}, with no axis to map over", span, "no axis here",
                               help="give it `None` in `in_axes` to pass it whole to every lane")
            rank = arg.type.rank
            if not -rank <= axis < rank:
                raise ArrError("E0204", f"`vmap`: axis {axis} is out of range for argument {i}, {arg.type}",
                               spans["in_axes"], f"axis {axis}", labels=[Label(span, f"this is {arg.type}")])
            axis %= rank
            here = arg.type.shape[axis]
            if size is None:
                size, first = here, (i, span, arg.type)
            elif here != size:
                raise ArrError("E0202", f"`vmap`: the arguments have {size} and {_lanes(here)}", span,
                               f"{_lanes(here)} (axis {axis} of {arg.type})",
                               labels=[Label(first[1], f"{_lanes(size)} (argument {first[0]}, {first[2]})")],
                               help="every mapped axis must have the same size; give `None` in `in_axes` "
                                    "for an argument every lane shares")
            shape = arg.type.shape[:axis] + arg.type.shape[axis + 1:]
            lanes.append(Val(ArrayType(arg.type.dtype, shape, arg.type.weak)))
            in_axes.append(axis)
        if size is None:
            raise ArrError("E0204", "`vmap` needs at least one argument with an axis to map over", spans["in_axes"],
                           "no mapped argument", help="give an axis in `in_axes` (0 maps the first)")
        env = unify(sig, lanes, arg_spans, e.span)
        param_types = [p[1].subs(env) for p in sig.params]
        results = []
        out_axes = []
        for j, (t, axis) in enumerate(zip(sig.results, axes["out_axes"])):
            t = t.subs(env)
            if axis is None:
                raise ArrError("E0204", "`vmap`: every result has its lanes: `out_axes` needs an axis for each",
                               spans["out_axes"], "None", help="give the axis of the lanes, e.g. out_axes=0")
            if not -(t.rank + 1) <= axis <= t.rank:
                raise ArrError("E0204", f"`vmap`: out_axes {axis} is out of range for result {j}, {t} with its "
                                        f"lanes", spans["out_axes"], "out of range")
            axis %= t.rank + 1
            out_axes.append(axis)
            results.append(ArrayType(t.dtype, t.shape[:axis] + (size,) + t.shape[axis:]))
        self.calls.append((fname, e.span))
        if self.is_lowering:
            irs = self.lowering.vmap(self, fname, e.span, [self.materialize(v, t.dtype) for v, t in zip(args, param_types)],
                                     param_types, in_axes, out_axes, size.value)
            out = [Val(t, r) for t, r in zip(results, irs)]
        else:
            out = [Val(t) for t in results]
        return TupleVal(out) if sig.tuple_result else out[0]

    def _axes_literal(self, kw, count: int, fname: str, sig) -> list:
        """`in_axes`/`out_axes`: an int, `None`, or a tuple of those with one entry per argument (result)."""
        def one(node):
            if isinstance(node, ast.Name) and node.id == "None":
                return None
            if isinstance(node, ast.Unary) and node.op == "-" and isinstance(node.operand, ast.IntLit):
                return -node.operand.value
            if isinstance(node, ast.IntLit):
                return node.value
            raise ArrError("E0204", f"`{kw.name}` must be an integer, `None`, or a tuple of those", node.span,
                           "not an axis", help="e.g. in_axes=(0, None): map the first argument, share the second")
        if isinstance(kw.value, ast.TupleLit):
            items = [one(x) for x in kw.value.elems]
            if len(items) != count:
                what = "argument" if kw.name == "in_axes" else "result"
                raise ArrError("E0204", f"`{kw.name}` has {len(items)} entries, but `{fname}` has {count} "
                                        f"{what}(s)", kw.span, f"{len(items)} entries",
                               notes=[f"signature: {fname}{sig}"])
            return items
        return [one(kw.value)] * count

    def call_jvp_vjp(self, e):
        """`jvp(f, primals, tangents)`: (f(*primals), J(primals) tangents), each a tuple where f returns one
        (`jax.jvp`); `vjp(f, primals, cotangent)`: (f(*primals), (the cotangent of each primal,)), the
        cotangent one array per result of f, a tuple where f returns one (`jax.vjp` with its pullback
        applied). primals and tangents are tuples, one value per parameter of f (all floats); a tangent
        has its primal's type, a cotangent its result's (LANGUAGE.md section 15)."""
        kind = e.func.id
        third = "tangents" if kind == "jvp" else "cotangent"
        usage = f"`{kind}(f, primals, {third})`"
        if e.kwargs:
            raise ArrError("E0103", f"{usage} takes its arguments by position", e.kwargs[0].span, "a keyword")
        if len(e.args) != 3:
            raise ArrError("E0103", f"`{kind}` takes 3 arguments, {len(e.args)} given", e.span,
                           "wrong number of arguments", notes=[f"usage: {usage}, e.g. `{kind}(f, (x,), "
                                                               f"{'(t,)' if kind == 'jvp' else 'ct'})`"])
        fname, sig = self._differentiated(kind, e.args[0], e.span, f"`{kind}(f, (x,), ...)`")
        if not all(t.dtype.is_float for t in sig.results):
            raise ArrError("E0216", f"`{kind}` needs a function with float results; `{fname}` returns "
                                    f"{_results_of(sig)}", e.args[0].span, "not a float function",
                           notes=[f"signature: {fname}{sig}"],
                           help="integer and bool results have no derivative: return them from another function")
        primals, given = self.eval(e.args[1]), self.eval(e.args[2])
        if not isinstance(primals, TupleVal) and not isinstance(primals, Poisoned):
            raise ArrError("E0210", f"the primals of `{kind}` must be a tuple, one value per parameter of "
                                    f"`{fname}`", e.args[1].span, f"this is {describe(primals)}",
                           help="write `(x,)` for a function of one parameter, as jax." + kind + " takes")
        n = len(sig.params)
        if isinstance(primals, TupleVal) and len(primals.items) != n:
            raise ArrError("E0103", f"`{fname}` takes {n} argument(s), {len(primals.items)} primal(s) given",
                           e.args[1].span, "wrong number of primals", notes=[f"signature: {fname}{sig}"])
        spans = _item_spans(e.args[1], n)
        self._refuse_non_floats(fname, sig, tuple(range(n)), spans,
                                f"`{kind}` differentiates with respect to every primal: take `{{}}` as a float and "
                                f"convert it inside (e.g. `{{}}.astype(i32)`), or leave it out of `{fname}`")
        if isinstance(primals, Poisoned) or isinstance(given, Poisoned) or POISON in primals.items or \
                isinstance(given, TupleVal) and POISON in given.items:
            return POISON
        env = unify(sig, primals.items, spans, e.span)
        param_types = [p[1].subs(env) for p in sig.params]
        results = [t.subs(env) for t in sig.results]
        if kind == "jvp":
            expected, what = param_types, [f"the tangent of `{p[0]}`" for p in sig.params]
            structured = True
        else:
            expected = results
            what = [f"the cotangent of result {i} of `{fname}`" if sig.tuple_result else
                    f"the cotangent of `{fname}`'s result" for i in range(len(results))]
            structured = sig.tuple_result
        items = self._derivative_seeds(kind, given, e.args[2], expected, what, structured, fname, sig)
        types = results + (results if kind == "jvp" else param_types)
        out = self._lower_derivative(kind, fname, e.span, primals.items + items, param_types + expected,
                                     tuple(range(n)), types)
        value = TupleVal(out[:len(results)]) if sig.tuple_result else out[0]
        derivs = out[len(results):]
        deriv = TupleVal(derivs) if kind == "vjp" or sig.tuple_result else derivs[0]
        return TupleVal([value, deriv])

    def _derivative_seeds(self, kind, given, node, expected: list, what: list, structured: bool, fname, sig):
        """The tangents (cotangents) `given` at `node`, checked against their types `expected`: a tuple of
        them where `structured`, else one array. E0210 for the wrong structure, E0212 for a wrong type."""
        name = "tangents" if kind == "jvp" else "cotangent"
        shown = "(" + ", ".join(map(str, expected)) + ("," if len(expected) == 1 else "") + ")" if structured \
            else str(expected[0])
        if structured and (not isinstance(given, TupleVal) or len(given.items) != len(expected)) or \
                not structured and not isinstance(given, Val):
            raise ArrError("E0210", f"the {name} of `{kind}` must be {'a tuple ' if structured else ''}{shown}",
                           node.span, f"this is {describe(given)}", notes=[f"signature: {fname}{sig}"],
                           help="one tangent per primal, each of its primal's type" if kind == "jvp" else
                           f"one cotangent per result of `{fname}`, each of that result's type")
        items = given.items if structured else [given]
        spans = _item_spans(node, len(items)) if structured else [node.span]
        for value, want, span, label in zip(items, expected, spans, what):
            found = value.type if isinstance(value, Val) else None
            if found is not None and found.shape == want.shape and (found.dtype == want.dtype or (
                    found.weak and found.rank == 0 and weak_literal_fits(found, want.dtype))):
                continue
            whose = "its primal's" if kind == "jvp" else "the result's"
            raise ArrError("E0212", f"{label} has type {describe(value)}, expected {want}", span,
                           f"this is {describe(value)}", notes=[f"signature: {fname}{sig}"],
                           help=f"a {name.rstrip('s')} has {whose} type, {want}" + (
                               f": convert it with `.astype({want.dtype})`" if found is not None and
                               found.shape == want.shape else ""))
        return items

    def _differentiated(self, kind: str, node, at, example: str):
        """The module function named by `node` (its name and signature): E0210 for anything else."""
        if not isinstance(node, ast.Name) or node.id not in self.program.signatures:
            close = closest(node.id, self.program.signatures) if isinstance(node, ast.Name) else None
            raise ArrError("E0210", f"`{kind}` takes a module function by name, e.g. {example}",
                           at if node is None else node.span, "not a module function",
                           help=f"did you mean `{close}`?" if close is not None else
                           self._not_a_function_help(node))
        self.program.derivative_sites.add((kind, node.id, node.span))
        return node.id, self.program.signatures[node.id]

    def _not_a_function_help(self, node) -> str:
        """The help where a transform is given something other than a function's name. A transformed function
        (`vmap(grad(loss))`, JAX's per-example gradients) gets the `def` that names it, with f's parameters."""
        inner = node.func.id if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) else None
        f = node.args[0].id if inner in HIGHER_ORDER and node.args and isinstance(node.args[0], ast.Name) else None
        if isinstance(node, ast.Name) and node.id in BUILTINS:
            return (f"`{node.id}` is a builtin: call it in a `def` and pass that name, e.g. "
                    f"`def my_{node.id}(...) -> ...: return {node.id}(...)`")
        if f not in self.program.signatures:
            return "functions are not values in arr: give the name of one defined with `def`"
        sig = self.program.signatures[f]
        params = ", ".join(f"{n}: {t}" for n, t, _ in sig.params)
        result = str(sig.params[0][1]) if inner == "grad" and not node.kwargs else "..."   # grad's default argnums=0
        text = text_at(self.program.sources, node.span) or f"{inner}({f})"
        return (f"functions are not values in arr: name `{text}` with a `def` and pass that name, e.g. "
                f"`def {f}_{inner}({params}) -> {result}: return {text}({', '.join(n for n, _, _ in sig.params)})`")

    def _left_out(self, sig, given: int) -> tuple[list, list]:
        """The values and spans of the parameters after the first `given`, where all have defaults (filled as
        in a call); none otherwise."""
        left_out = [sig.defaults.get(p) for p, _, _ in sig.params[given:]]
        if not left_out or None in left_out:
            return [], []
        return [self.eval(d[0]) for d in left_out], [d[0].span for d in left_out]

    def _refuse_non_floats(self, fname: str, sig, wrt: tuple, spans: list,
                           help: str = "derivatives are taken with respect to float arguments only") -> None:
        """E0216 for an argument in `wrt` that is not a float (at its span; `help` formatted with its name)."""
        for i in wrt:
            pname, ptype, _ = sig.params[i]
            if not ptype.dtype.is_float:
                raise ArrError("E0216", f"cannot differentiate with respect to `{pname}`: it is {ptype}, not a "
                                        f"float", spans[i], f"argument {i} of `{fname}`",
                               notes=[f"signature: {fname}{sig}"], help=help.format(pname, pname))

    def _lower_derivative(self, kind: str, fname: str, span, args: list, arg_types: list, wrt: tuple,
                          types: list) -> list:
        """The values of derivative `kind` of `fname` at `args` (flat, typed `types`; none while checking)."""
        self.calls.append((fname, span))
        if not self.is_lowering:
            return [Val(t) for t in types]
        irs = self.lowering.derivative(self, kind, fname, span,
                                       [self.materialize(v, t.dtype) for v, t in zip(args, arg_types)], arg_types, wrt)
        return [Val(t, r) for t, r in zip(types, irs)]

    def call_user(self, name, args, kwargs, node, spans, kw_spans):
        sig = self.program.signatures[name]
        self.calls.append((name, node.span))
        params = [p[0] for p in sig.params]
        ordered = list(args)
        arg_spans = list(spans)
        if len(ordered) > len(params):
            raise ArrError("E0103", f"`{name}` takes {len(params)} argument(s), {len(ordered)} given", node.span,
                           "too many arguments", notes=[f"signature: {name}{sig}"])
        for kw, value in kwargs.items():
            if kw not in params:
                raise ArrError("E0103", f"`{name}` has no parameter `{kw}`", kw_spans[kw], "unknown keyword",
                               notes=[f"signature: {name}{sig}"])
            i = params.index(kw)
            if i < len(ordered):
                raise ArrError("E0103", f"`{kw}` given twice", kw_spans[kw], "given again here")
        by_name = dict(zip(params, zip(ordered, arg_spans)))
        for kw, value in kwargs.items():
            by_name[kw] = (value, kw_spans[kw])
        for p in params:
            if p not in by_name and p in sig.defaults:     # (literals and consts: the caller's walk evaluates them)
                by_name[p] = (self.eval(sig.defaults[p][0]), sig.defaults[p][0].span)
        missing = [p for p in params if p not in by_name]
        if missing:
            raise ArrError("E0103", f"missing argument `{missing[0]}` in call to `{name}`", node.span,
                           "missing argument", notes=[f"signature: {name}{sig}"])
        values = [by_name[p][0] for p in params]
        value_spans = [by_name[p][1] for p in params]
        env = unify(sig, values, value_spans, node.span)
        results = [ArrayType(t.dtype, tuple(d.subs(env) for d in t.shape)) for t in sig.results]
        # (The callee's result types use only its own shape variables: checked with its signature. After
        # substitution they are in the caller's variables, e.g. `g(x)` with x: f32[m] returns f32[m].)
        if self.is_lowering:
            param_types = [p[1].subs(env) for p in sig.params]
            irs = self.lowering.call(self, name, [self.materialize(v, pt.dtype) for v, pt in zip(values, param_types)],
                                     param_types, node.span)
            out = [Val(t, r) for t, r in zip(results, irs)]
        else:
            out = [Val(t) for t in results]
        return TupleVal(out) if sig.tuple_result else out[0]

    # -- MLIR values ---------------------------------------------------------------------------
    def materialize(self, v: Val, dtype=None, shape=None):
        """The MLIR value of `v`, converted to `dtype` and broadcast to `shape` (concrete)."""
        dtype = dtype or v.type.dtype
        if v.ir is None:
            static = v.static
            if isinstance(static, Dim):
                static = static.value
            if shape is not None and not v.type.shape:     # a scalar literal: one splat constant
                return emit.const(static, dtype, shape)
            value = emit.const(static, dtype, v.type.concrete_shape)
            if dtype.is_key:        # (a key from Python's `constants=`: drawn from at run time, as key(3) is)
                value = threefry.run_time(value)[0]
        elif dtype is v.type.dtype:
            value = v.ir
        else:
            value = emit.convert(v.ir, v.type.dtype, dtype)
        if shape is not None:
            value = emit.broadcast(value, shape)
        return value


def _as_printed(v):
    """What `print` shows of `v` where it is not a run-time value: a dtype (`x.dtype`) as NumPy prints it,
    `float32` (as the REPL shows it); a tuple of compile-time integers (`x.shape`) as Python prints a tuple,
    `(2, 3)`, `(5,)`; an integer literal past its dtype (`print(2**40)`, `print(2**40 * 3)`) as Python prints it
    (it is exact until it takes a dtype, and in its i32 it would print wrapped: 0). Anything else as it is."""
    if isinstance(v, DTypeVal):
        return StrVal(numpy_dtype_name(v.dtype))
    if tuple_text(v) is not None:
        return StrVal(tuple_text(v))
    value = v.static_int if isinstance(v, Val) and v.type.weak and not v.type.rank else None
    if value is not None and literal_out_of_range(value, v.type.dtype) is not None:
        return StrVal(str(value))
    return v


def _first_arg(call: ast.Call) -> str:
    """How a help line names the first argument of `call`: its name, else `x`."""
    return call.args[0].id if call.args and isinstance(call.args[0], ast.Name) else "x"


def _within(inner: Span, outer: Span) -> bool:
    return inner.file == outer.file and (outer.line, outer.col) <= (inner.line, inner.col) and \
        (inner.end_line, inner.end_col) <= (outer.end_line, outer.end_col)


def _refuse_second_array(name: str, second, span) -> None:
    """`max(x, y)` with an array `y`: Python's `max` of two values is arr's (and NumPy's) `maximum`; arr's
    `max` reduces one array, and its second argument is the axis."""
    if not isinstance(second, Val) or (second.type.rank == 0 and second.type.dtype.is_int):
        return
    elementwise = {"max": "maximum", "min": "minimum"}[name]
    raise ArrError("E0204", f"`{name}` reduces one array: its second argument is the axis, found {second.type}",
                   span, f"this is {second.type}",
                   help=f"for the elementwise {elementwise} of two arrays, write `{elementwise}(a, b)` "
                        f"(NumPy's `np.{elementwise}`)")


def _result_help(value, declared: ArrayType) -> str | None:
    if isinstance(value, Val) and value.type.shape == declared.shape and value.type.dtype != declared.dtype:
        got, want = value.type.dtype, declared.dtype
        if got.is_float and want.is_float and want.bits > got.bits:      # `4.0 * hits / n` of an i32 `hits`
            return (f"it was computed in {got}; `.astype({want})` would keep {got}'s rounding. To compute it in "
                    f"{want}, convert its operands first (`{want}(...)` of the integer or {got} values "
                    f"it is computed from), or change the declared type")
        return f"convert it with `.astype({declared.dtype})` or change the declared type"
    if isinstance(value, Val) and value.type.dtype == declared.dtype and value.type.rank != declared.rank:
        return "reshape it, or reduce it (sum/mean/...) to the declared rank"
    return None


_STATEMENT_NAMES = {ast.If: "if", ast.For: "for", ast.While: "while", ast.Print: "print", ast.Assert: "assert",
                    ast.Return: "return"}


def _lanes(size) -> str:
    return f"{size} lane" if str(size) == "1" else f"{size} lanes"


def _location_name(expr) -> str:
    kind = type(expr)
    if kind is ast.Binary or kind is ast.Unary:      # the operator's display name in the op table
        op = OPERATORS.get(expr.op if kind is ast.Binary else "unary" + expr.op)
        return op.display if op is not None else expr.op
    if kind is ast.Call:
        f = expr.func
        return f.id if isinstance(f, ast.Name) else f.name if isinstance(f, ast.Attribute) else "call"
    return kind.__name__.lower()


def _handlers(prefix: str) -> dict:
    """Node class -> FunctionWalk method `prefix + class name` (dispatch without a getattr per node)."""
    return {node: getattr(FunctionWalk, prefix + node.__name__) for node in vars(ast).values()
            if isinstance(node, type) and issubclass(node, ast.Node) and hasattr(FunctionWalk, prefix + node.__name__)}


_EXPR_HANDLERS = _handlers("expr_")
_STMT_HANDLERS = _handlers("stmt_")
# Expressions that never emit an op themselves (a name of a module constant enters its own location), and
# statements whose ops all come from expressions or updates with locations of their own.
_EMITS_NOTHING = frozenset({ast.Name, ast.IntLit, ast.FloatLit, ast.BoolLit, ast.StrLit, ast.TupleLit})
_EMIT_IN_OWN_LOCATIONS = frozenset({ast.Assign, ast.AugAssign, ast.ExprStmt, ast.Pass})
_NO_LOCATION = nullcontext()
_NONE = object()          # a keyword argument written `None` (`FunctionWalk._none_keywords`)
_MAKE_FUNCTIONS = DERIVATIVES + ("vmap",)      # `grad(f)`, `vmap(f)`: a function, not called
