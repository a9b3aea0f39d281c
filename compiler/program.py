"""Module-level checking: definitions, constants, signatures, recursion; every function body checked once."""
from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np

from . import ast
from .check import DERIVATIVES, NAMED_CONSTANTS, PUSH_PULL, FunctionWalk, Signature, named_constant_binding, \
    reachable, type_of
from .diagnostics import CompileError, Diagnostic, Label, Reporter
from .parse import parse, text_direction_warnings
from .span import Source
from .types import ArrayType, Dim
from .values import POISON, ArrError, Poisoned, Val, describe
from .walk import depth_first
from .optable import check_literal, weak_literal_fits


@dataclass
class Program:
    sources: dict                                      # file name -> Source, for every span in `module`
    module: ast.Module
    functions: dict = field(default_factory=dict)      # name -> FunctionDef
    consts: dict = field(default_factory=dict)         # name -> ConstDef
    const_types: dict = field(default_factory=dict)    # name -> ArrayType
    const_dims: dict = field(default_factory=dict)     # integer scalar consts usable in shapes: name -> Dim
    signatures: dict = field(default_factory=dict)     # name -> Signature
    warnings: list = field(default_factory=list)
    effectful: set = field(default_factory=set)         # functions that print/assert, directly or by a call
    checks_bounds: set = field(default_factory=set)     # functions that check a loop's bound (`checks_a_bound`), or call one
    externals: dict = field(default_factory=dict)       # name -> NumPy value given by the host (REPL bindings)
    lowered: dict = field(default_factory=dict)         # name -> Lowered made at definition, until taken
    runtime_loops: dict = field(default_factory=dict)   # name -> {span: "for"/"while"}: no bound, no static count
    bounded_loops: dict = field(default_factory=dict)   # name -> {span: "for"/"while"}: a `bound=`, no static count
    derivative_sites: set = field(default_factory=set)  # (kind, function differentiated, span of its name)
    extern_functions: dict = field(default_factory=dict)  # `extern def` name -> its JAX function (arrc.load(externs=))
    printing: set | None = None         # `calls_print_or_assert`'s functions, found once from the source

    def calls_print_or_assert(self, expr) -> bool:
        """Whether `expr` calls a function that prints or asserts, directly or by its calls: found from the
        source, while `effectful` is known only once every function is checked."""
        if self.printing is None:
            self.printing = {name for name, fn in self.functions.items() if _has_effect_statement(fn.body)}
            if self.printing:
                _closure(self.printing, {name: [(c, None) for c in ast.called_names(fn, self.functions)]
                                         for name, fn in self.functions.items()})
        return bool(self.printing) and not self.printing.isdisjoint(ast.called_names(expr, self.functions))

    def has_effect_call(self, expr) -> bool:
        """Whether `expr` calls a function that prints or asserts, or differentiates through a bounded loop."""
        return any(name in self.effectful or name in self.checks_bounds
                   for name in ast.called_names(expr, self.functions)) \
            or self.checks_a_bound(expr)

    def checks_a_bound(self, node) -> bool:
        """Whether `node` takes a derivative through a loop with a `bound=` and a run-time trip count: the
        derivative returns a run past the bound (R0006; compiler/autodiff.py `_while_vjp`), which `node`'s
        function returns in turn, or in a function with effects reports at once (compiler/effects.py)."""
        if not any(self.bounded_loops.values()):
            return False                # (the common case, without walking `node`)
        targets = {n.args[0].id for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                   and n.func.id in DERIVATIVES + PUSH_PULL and n.args and isinstance(n.args[0], ast.Name)}
        return any(self.bounded_loops.get(f) for t in targets for f in reachable(self, t))

    def take_lowered(self, name: str, arg_types: list):
        """The Lowered made for `name` while checking, once (a Lowered's module is then changed by passes)."""
        lowered = self.lowered.pop(name, None)
        return lowered if lowered is not None and lowered.arg_types == list(arg_types) else None

    def const_value(self, name: str, walk: FunctionWalk):
        """The value of a module constant inside `walk` (emitted inline while lowering)."""
        declared = self.const_types.get(name)
        if declared is None:
            return POISON
        if name in self.const_dims:
            return Val(declared, None, self.const_dims[name])
        if name in self.externals:
            return Val(declared, None, self.externals[name])
        value = walk.eval(self.consts[name].value)
        if isinstance(value, Poisoned):
            return value
        if walk.is_lowering:
            return Val(declared, walk.materialize(value, declared.dtype))
        return Val(declared, None, value.static if isinstance(value.static, np.ndarray) else None)


def check_program(source: Source, werror: bool = False, constants: dict | None = None,
                  lower_entries: bool = True) -> Program:
    """Parse and check `source`; raises CompileError listing every error found.

    `constants` binds names to host values (NumPy arrays or scalars) that functions may use like `const`s.
    `lower_entries`: check the entry points whose parameter types are concrete by lowering them (one walk
    instead of a check now and a lowering later; see `_lower_entries`): their first `lower` costs nothing.
    """
    return check_module(parse(source), {source.name: source}, werror, constants, lower_entries)


def check_module(module: ast.Module, sources: dict, werror: bool = False, constants: dict | None = None,
                 lower_entries: bool = True) -> Program:
    """Check a parsed module whose items (`def`s and `const`s) have spans in the sources among `sources`
    (several, when it is made of the REPL's cells): what `check_program` does after parsing."""
    reporter = Reporter(werror)
    for source in sources.values():
        for diag in text_direction_warnings(source):
            reporter.add(diag)
    program = Program(dict(sources), module)
    _collect(program, reporter)
    for name, value in (constants or {}).items():
        _external(program, name, value, reporter)
    for const in _const_order(program, reporter):
        _check_const(program, const, reporter)
    for fn in program.functions.values():
        _signature(program, fn, reporter)
    lowered = _lower_entries(program) if lower_entries else {}
    calls = {}
    for fn in program.functions.values():
        if fn.name not in program.signatures:
            continue
        if fn.name in lowered:
            calls[fn.name] = lowered[fn.name][1]
            continue
        if fn.extern:                   # (a signature only: checked above)
            calls[fn.name] = []
            continue
        walk = FunctionWalk(program, fn, reporter)
        sig = program.signatures[fn.name]
        params = [Val(t) for _, t, _ in sig.params]
        try:
            walk.run(params)
        except RecursionError:
            reporter.add(Diagnostic("E0004", "function nested too deeply", fn.name_span, "in this function",
                                    help="split long expressions into several assignments"))
        calls[fn.name] = walk.calls
    _check_recursion(calls, reporter)
    program.effectful = _closure({name for name, fn in program.functions.items() if _has_effect_statement(fn.body)},
                                 calls)
    program.checks_bounds = _closure({name for name, fn in program.functions.items() if program.checks_a_bound(fn)},
                                     calls)
    _warn_unbounded_loops(program, reporter)
    if reporter.errors:
        raise CompileError(reporter.diagnostics, program.sources)
    program.warnings = reporter.diagnostics
    for name, (low, _) in lowered.items():
        low.warnings = list(program.warnings)
        program.lowered[name] = low
    return program


def _lower_entries(program: Program) -> dict:
    """Lower each function with concrete parameter types that no other function calls, in place of its
    check walk (`lower.lower_at_definition`): name -> (Lowered, its calls). The functions that another
    function calls (by name, anywhere in its body) are left to the check walk: they are inlined where they
    are called, and lowering each link of a call chain would lower the chain's rest again (quadratic).
    All of them share one MLIR context: a context per kept Lowered made each new one slower (MLIR's
    thread-local uniquer caches are swept on a context's first use, over every live context's entries)."""
    from .emit import make_context
    from .lower import MAX_CALL_DEPTH, lower_at_definition
    callees = {name: ast.called_names(fn, program.functions) & program.functions.keys()
               for name, fn in program.functions.items()}
    called = set().union(*callees.values())
    depth = _call_depths(callees)
    # (a call of an extern is lowered by JAX, with the function given after the check: `arrc check` never
    # imports JAX)
    externs = _closure({name for name, fn in program.functions.items() if fn.extern},
                       {name: [(c, None) for c in cs] for name, cs in callees.items()})
    done: dict = {}
    context = None
    for fn in program.functions.values():
        sig = program.signatures.get(fn.name)
        if sig is None or sig.shape_vars or fn.name in called or _has_effect_statement(fn.body) \
                or fn.name in externs:
            continue
        if depth[fn.name] is None or depth[fn.name] > MAX_CALL_DEPTH:
            continue                # recursion (E0104 from the check), or E0004 at its `lower`
        context = context or make_context()
        result = lower_at_definition(program, fn.name, context)
        if result is not None:
            done[fn.name] = result
    return done


def _call_depths(callees: dict) -> dict:
    """name -> how deep the calls below it nest, by the names each body calls (0: it calls no function;
    an upper bound on what inlining meets), or None where a recursive call is below it. No recursion
    here: a chain may be as long as Python's recursion limit."""
    depth: dict = {}
    for event, node, _ in depth_first({name: [(c, None) for c in called] for name, called in callees.items()}):
        if event == "cycle":
            depth[node[0]] = None               # marks the cycle; its callers get None below
            continue
        below = [depth[c] for c in callees[node]]
        if node in depth and depth[node] is None or None in below:
            depth[node] = None
        else:
            depth[node] = 1 + max(below) if below else 0
    return depth


def _collect(program: Program, reporter: Reporter) -> None:
    seen: dict = {}
    for item in program.module.items:
        span = item.name_span if isinstance(item, ast.FunctionDef) else item.span
        if item.name in seen:
            reporter.add(Diagnostic("E0102", f"`{item.name}` is defined twice", span, "defined again here",
                                    [Label(seen[item.name], "first defined here")],
                                    help="rename one of them"))
            continue
        seen[item.name] = span
        if (diag := named_constant_binding(item.name, span, "define {}")) is not None:
            reporter.add(diag)
            continue
        if isinstance(item, ast.FunctionDef):
            program.functions[item.name] = item
        else:
            program.consts[item.name] = item


def _external(program: Program, name: str, value, reporter: Reporter) -> None:
    from .types import KEY, dtype_of_numpy, host_keys
    keys = host_keys(value)
    arr = np.asarray(value) if keys is None else keys
    dtype = dtype_of_numpy(arr.dtype) if keys is None else KEY
    if name in program.functions or name in program.consts:
        item = program.functions.get(name) or program.consts[name]
        reporter.add(Diagnostic("E0102", f"`{name}` is defined twice", getattr(item, "name_span", None) or item.span,
                                "also bound as a value"))
        return
    if dtype is None:
        raise TypeError(f"constant `{name}` has unsupported dtype {arr.dtype}")
    program.externals[name] = arr
    program.const_types[name] = ArrayType(dtype, tuple(Dim.const(d) for d in arr.shape))
    program.consts[name] = None
    if arr.ndim == 0 and dtype.is_int:
        program.const_dims[name] = Dim.const(int(arr))


def _check_const(program: Program, const: ast.ConstDef, reporter: Reporter) -> None:
    errors: list = []
    declared = type_of(const.type, program.const_dims, None, errors)
    for d in errors:
        reporter.add(d)
    if declared is None:
        return
    walk = FunctionWalk(program, None, reporter)
    try:
        value = walk.eval(const.value)
    except ArrError as err:
        reporter.add(err.diag)
        return
    except RecursionError:          # (as for a statement: FunctionWalk.block)
        reporter.add(Diagnostic("E0004", "expression nested too deeply", const.value.span, "here",
                                help="split it into several `const`s"))
        return
    if isinstance(value, Poisoned):
        return
    if not _fits(value, declared):
        reporter.add(Diagnostic("E0203", f"constant `{const.name}` has a value of type {describe(value)}, "
                                         f"declared {declared}", const.value.span, f"this is {describe(value)}",
                                [Label(const.type.span, "declared here")]))
        return
    try:
        from .optable import CallCx
        check_literal(CallCx(walk, const, [const.value.span], {}), value, declared.dtype, 0, literals_only=True)
    except ArrError as err:
        reporter.add(err.diag)
        return
    program.const_types[const.name] = declared
    if declared.rank == 0 and declared.dtype.is_int and isinstance(value.static, Dim) and value.static.is_const:
        program.const_dims[const.name] = value.static


def _const_order(program: Program, reporter: Reporter) -> list:
    """The module's consts, each after the consts it uses (`const A: i32 = B` may come before B); a cycle
    (`const a = b`, `const b = a`) is E0104 naming it, and its consts are left unchecked (undefined).
    Depth-first with its own stack, so a chain of any length is fine."""
    consts = {name: c for name, c in program.consts.items() if c is not None}
    uses = {name: [n for n in dict.fromkeys(_names_in(c.value) + _names_in(c.type)) if n in consts]
            for name, c in consts.items()}
    order, cyclic = [], set()
    for event, found, _ in depth_first({name: [(n, None) for n in used] for name, used in uses.items()}):
        if event == "done":
            order.append(found)
            continue
        cycle = found
        cyclic.update(cycle)
        first = consts[cycle[0]]
        labels = [Label(consts[a].value.span, f"`{a}` uses `{b}`") for a, b in zip(cycle[1:-1], cycle[2:])]
        reporter.add(Diagnostic("E0104", f"constants defined in a cycle: {' -> '.join(cycle)}",
                                first.value.span, f"`{cycle[0]}` uses `{cycle[1]}`", labels,
                                help="a constant cannot depend on itself; give one of them a value "
                                     "that does not use the others"))
    return [consts[name] for name in order if name not in cyclic]


def _names_in(node) -> list:
    """The names (and shape-dimension names) that an expression or type mentions."""
    names, stack = [], [node]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Name):
            names.append(n.id)
        elif isinstance(n, ast.DimName):
            names.append(n.name)
        if isinstance(n, ast.Node):
            stack.extend(getattr(n, f.name) for f in fields(n))
        elif isinstance(n, (tuple, list)):
            stack.extend(n)
    return names


def _const_as_dimension(program: Program, name: str, span) -> Diagnostic:
    """E0205: a const that is no integer scalar (`const N: f32 = 2.5`) used as a dimension."""
    kind = f" of type {program.const_types[name]}" if name in program.const_types else ""
    return Diagnostic("E0205", f"`{name}` is a const{kind}: a dimension is an integer scalar const or a shape "
                               "variable", span, "not an integer scalar const",
                      help=f"give `{name}` an integer type (`const {name}: i32 = ...`), or name the shape variable "
                           "otherwise")


def _signature(program: Program, fn: ast.FunctionDef, reporter: Reporter) -> None:
    errors: list = []
    shape_vars: list = []
    params = []
    names = set()
    for p in fn.params:
        if p.name in names:
            errors.append(Diagnostic("E0102", f"parameter `{p.name}` appears twice", p.span, "again here"))
        names.add(p.name)
        if (diag := named_constant_binding(p.name, p.span, "use {} as a parameter")) is not None:
            errors.append(diag)
        t = type_of(p.type, program.const_dims, shape_vars, errors)
        if t is not None:
            params.append((p.name, t, p.type.span))
    for var in shape_vars:
        if (diag := named_constant_binding(var, _dim_name_span(fn, var), "use {} as a shape variable")) is not None:
            errors.append(diag)
        if var in program.consts:        # (an integer scalar const is a dimension: `const_dims`, not a variable)
            errors.append(_const_as_dimension(program, var, _dim_name_span(fn, var)))
        if var in program.functions:     # (it was a shape variable, silently: a `const N` redefined at the REPL)
            errors.append(Diagnostic("E0102", f"`{var}` is both a function and a shape variable",
                                     _dim_name_span(fn, var), "a shape variable here",
                                     [Label(program.functions[var].name_span, "a function here")],
                                     help="rename the function or the dimension"))
        if var in names:
            span = next(p.span for p in fn.params if p.name == var)
            errors.append(Diagnostic("E0102", f"`{var}` is both a parameter and a shape variable", span,
                                     "parameter", help="rename the parameter or the dimension"))
    results = [type_of(r, program.const_dims, list(shape_vars), errors) for r in fn.results]
    for r, texpr in zip(results, fn.results):
        if r is None:
            continue
        unbound = set().union(set(), *[d.variables for d in r.shape]) - set(shape_vars)
        if unbound & set(program.consts):
            errors.append(_const_as_dimension(program, sorted(unbound & set(program.consts))[0], texpr.span))
        elif unbound:
            errors.append(Diagnostic("E0206", f"result type uses `{sorted(unbound)[0]}`, which no parameter binds",
                                     texpr.span, "unbound shape variable",
                                     help="a result's dimensions may use only shape variables of the parameters; "
                                          "use a `const` or a literal for a fixed size"))
    defaults = {p.name: _default(program, p, t, errors) for p, (_, t, _) in zip(fn.params, params)
                if p.default is not None and len(params) == len(fn.params)}
    for d in errors:
        reporter.add(d)
    if errors or None in results or len(params) != len(fn.params):
        return
    program.signatures[fn.name] = Signature(fn.shown_name, params, results, [r.span for r in fn.results],
                                            fn.tuple_result, shape_vars, defaults)


def _default(program: Program, param: ast.Param, declared: ArrayType, errors: list):
    """A parameter's default (`eps: f32 = 1e-6`): (its AST, its value as NumPy, its text), or None after adding
    the error to `errors`. It must be a compile-time scalar of the parameter's type: a literal, a named
    constant (`inf`), a `const` or a host constant, maybe negated."""
    value = _static_scalar(program, param.default, set())
    if declared.rank:
        errors.append(Diagnostic("E0207", f"array parameter `{param.name}` cannot have a default",
                                 param.default.span, f"`{param.name}` is {declared}",
                                 help="only scalar parameters have defaults; the caller passes the array"))
        return None
    if value is None:
        errors.append(Diagnostic("E0207", "a default must be a compile-time constant", param.default.span,
                                 "not a literal, named constant or `const`",
                                 help="give a literal (`eps: f32 = 1e-6`), a named constant (`inf`) or a scalar "
                                      "`const`; other values are passed by the caller"))
        return None
    walk = FunctionWalk(program, None, Reporter())
    try:
        checked = walk.eval(param.default)
        if not _fits(checked, declared):
            raise ArrError("E0203", f"the default of `{param.name}` has type {describe(checked)}, declared {declared}",
                           param.default.span, f"this is {describe(checked)}",
                           labels=[Label(param.type.span, "declared here")],
                           help=f"write a default of type {declared.dtype}, or convert it: `{declared.dtype}(...)`")
        from .optable import CallCx
        check_literal(CallCx(walk, param, [param.default.span], {}), checked, declared.dtype, 0, literals_only=True)
    except ArrError as err:
        errors.append(err.diag)
        return None
    value = np.asarray(value, declared.dtype.np)
    text = str(value).lower() if declared.dtype.is_bool else str(value)
    return param.default, value, text


def _static_scalar(program: Program, expr, seen: set):
    """The Python value of a scalar literal, named constant, host constant or `const` (through consts of such
    values), maybe negated; None for anything else."""
    if isinstance(expr, (ast.IntLit, ast.FloatLit, ast.BoolLit)):
        return expr.value
    if isinstance(expr, ast.Unary) and expr.op in ("-", "+"):
        value = _static_scalar(program, expr.operand, seen)
        return None if value is None or isinstance(value, bool) else -value if expr.op == "-" else value
    if not isinstance(expr, ast.Name) or expr.id in seen:
        return None
    if expr.id in program.externals:
        host = program.externals[expr.id]
        return host.item() if host.ndim == 0 else None
    const = program.consts.get(expr.id)
    if const is not None:
        return _static_scalar(program, const.value, seen | {expr.id}) if expr.id in program.const_types else None
    return NAMED_CONSTANTS.get(expr.id)


def _fits(value, declared: ArrayType) -> bool:
    """Whether a constant's `value` has the `declared` type (a weak literal: one whose dtype can hold it)."""
    return isinstance(value, Val) and value.type.shape == declared.shape and (
        value.type.dtype == declared.dtype or (value.type.weak and weak_literal_fits(value.type, declared.dtype)))


def _dim_name_span(fn: ast.FunctionDef, var: str):
    """Where the first parameter type names the shape variable `var`."""
    def find(dim):
        if isinstance(dim, ast.DimName) and dim.name == var:
            return dim.span
        if isinstance(dim, ast.DimBin):
            return find(dim.lhs) or find(dim.rhs)
        return None
    for p in fn.params:
        for dim in p.type.dims or ():
            if (span := find(dim)) is not None:
                return span
    return fn.name_span


def _has_effect_statement(stmts) -> bool:
    """Whether a `print` or `assert` is among `stmts` or the blocks nested in them. Iterative: an if/elif
    chain nests one `If` per branch, so a thousand branches are a thousand levels."""
    pending = list(stmts)
    while pending:
        s = pending.pop()
        if isinstance(s, (ast.Print, ast.Assert)):
            return True
        if isinstance(s, ast.If):
            pending.extend(s.body)
            pending.extend(s.orelse)
        elif isinstance(s, (ast.For, ast.While)):
            pending.extend(s.body)
    return False


def _warn_unbounded_loops(program: Program, reporter: Reporter) -> None:
    """W0004 at each loop with a run-time trip count and no `bound=` that a derivative in the source goes
    through (in the function differentiated or one it calls)."""
    warned = set()
    for kind, name, at in sorted(program.derivative_sites, key=lambda site: (site[2].file, site[2].line, site[2].col)):
        for diag in unbounded_loop_warnings(program, kind, name, at, warned):
            reporter.add(diag)


def unbounded_loop_warnings(program: Program, kind: str, name: str, at=None, warned: set | None = None) -> list:
    """W0004 for each loop without a static trip count or a `bound=` in `name` and the functions it calls:
    compiler/autodiff.py differentiates those by recomputation. `at`: the span of the derivative's name in
    the source (None for `arrc.grad(...)` from Python); `warned`: loop spans already reported (updated)."""
    warned = set() if warned is None else warned
    out = []
    for n in reachable(program, name):
        for span, loop in program.runtime_loops.get(n, {}).items():
            if span in warned:
                continue
            warned.add(span)
            example = "for i in range(n, bound=1000):" if loop == "for" else "while x < limit, bound=1000:"
            out.append(Diagnostic(
                "W0004", f"this `{loop}` loop is differentiated by recomputation: its trip count is known "
                         "only at run time", span, "no bound on its iterations",
                labels=[Label(at, f"differentiated by `{kind}` here")] if at is not None else [],
                notes=["for T iterations the derivative runs the body T(T+3)/2 times; with a bound, T + T "
                       "(a tape of the state, as jax.grad of a scan)"] +
                      ([] if at is not None else [f"differentiated by arrc.{kind}({name}) from Python"]),
                help=f"give it a bound, e.g. `{example}` (the most iterations it runs; a run past the "
                     f"bound is reported, R0006)"))
    return out


def _closure(out: set, calls: dict) -> set:
    """`out` with every function that calls one of them, directly or not."""
    changed = True
    while changed:
        changed = False
        for name, callees in calls.items():
            if name not in out and any(c in out for c, _ in callees):
                out.add(name)
                changed = True
    return out


def _check_recursion(calls: dict, reporter: Reporter) -> None:
    """E0104 for each call that closes a cycle, found by one depth-first walk of the call graph (with its
    own stack: a call chain a thousand functions deep is as deep as Python's recursion limit). They are
    reported first: a recursive function's other errors (the early `return` of its base case) go away
    with the loop that replaces it."""
    cycles = [Diagnostic("E0104", f"recursive call: {' -> '.join(cycle)}", span,
                         "calls a function that is still running",
                         help="arr functions cannot be recursive; use a `for` or `while` loop")
              for event, cycle, span in depth_first(calls) if event == "cycle"]
    reporter.diagnostics[:0] = cycles


def expression_value(program: Program, expr: ast.Node, sources: dict):
    """What the checker knows of `expr` in `program`'s scope: a Val, a TupleVal, a DTypeVal, ... (the REPL
    shows a dtype, `x.dtype`, from it). Raises CompileError on errors in `expr`."""
    reporter = Reporter()
    walk = FunctionWalk(program, None, reporter)
    try:
        value = walk.eval(expr)
    except ArrError as err:
        reporter.add(err.diag)
        value = POISON
    if reporter.errors or isinstance(value, Poisoned):
        raise CompileError(reporter.diagnostics, sources)
    return value


def expression_function(program: Program, expr: ast.Node, source: Source, name: str = "__expr__",
                        label: str = "the expression") -> str:
    """Register a function with no parameters returning `expr` (parsed from `source`), called `label` in
    reports; its result type is inferred. Raises CompileError on errors in `expr`. A tuple of one value
    (`(x,)`, a vector's `x.shape`) returns its item as a tuple of one."""
    from .check import Signature
    sources = {**program.sources, source.name: source}
    value = expression_value(program, expr, sources)
    from .values import TupleVal
    items = value.items if isinstance(value, TupleVal) else [value]
    if not items or not all(isinstance(v, Val) for v in items):      # (a function returns something)
        raise CompileError([Diagnostic("E0210", f"cannot show a value of kind {describe(value)}", expr.span,
                                       f"this is {describe(value)}")], sources)
    results = [v.type.strong() for v in items]
    returned = expr
    if isinstance(value, TupleVal) and len(items) == 1:     # `return` unpacks a tuple only for 2 results or more
        returned = expr.elems[0] if isinstance(expr, ast.TupleLit) else \
            ast.Index(expr.span, expr, (ast.IntLit(expr.span, 0),))
    fn = ast.FunctionDef(expr.span, name, (), (), isinstance(value, TupleVal), (ast.Return(expr.span, (returned,)),),
                         name_span=expr.span, label=label)
    program.functions[name] = fn
    program.signatures[name] = Signature(name, [], results, [expr.span] * len(results), fn.tuple_result, [])
    called = ast.called_names(expr, program.functions)
    if any(f in program.effectful for f in called):
        program.effectful.add(name)
    if program.checks_a_bound(expr) or any(f in program.checks_bounds for f in called):
        program.checks_bounds.add(name)
    return name
