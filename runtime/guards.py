"""Host side of the guards: the report sites of a guarded module, their callbacks, and the report.

Sites are read back from the module itself (attributes on each callback, see passes/guards.py), so this
works the same for arrc's modules and for StableHLO from elsewhere.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from jaxlib.mlir import ir

from ..compiler import abi
from ..compiler.builtins import BUILTINS, OPERATORS
from ..compiler.parse import grouped
from ..compiler.span import Span
from ..compiler.locations import call_frames, jax_backward, jax_frames, name_of, span_of
from ..passes.guards import SITE_SHIFT, UNTRACED
from ..passes.rewrite import attr_text, entry, i64s
from .reports import AssertionFailed, BoundsError, DivisionByZero, GuardError, InfError, NaNError
from ..compiler.walk import walk_ops

# What a report calls the operation a location names: the op table's `words` of the op with that display
# name ("add" -> "addition"), and the names that come from indexing code rather than from a registered op.
_OP_WORDS = {op.display: op.words for table in (OPERATORS, BUILTINS) for op in table.values() if op.words}
_OP_WORDS.update({"index": "indexing", "update": "indexed update"})


# Where the derivative of an operation is infinite or NaN at finite operands (arr's names; the operands of
# the forward operation at the element): a backward fault there is what a `where` that drops the element
# still computes. At other operands the `where` help would mislead.
_SINGULAR = {
    "log": lambda x: x <= 0, "log2": lambda x: x <= 0, "log10": lambda x: x <= 0, "log1p": lambda x: x <= -1,
    "sqrt": lambda x: x <= 0, "rsqrt": lambda x: x <= 0, "asin": lambda x: abs(x) >= 1,
    "acos": lambda x: abs(x) >= 1, "divide": lambda x, y: y == 0, "power": lambda x, y: x <= 0,
    "pow": lambda x, y: x <= 0,
}


def _may_be_singular(op: str, operands: list) -> bool:
    """Whether a backward fault at the derivative of `op` may come from a singular point: yes where the
    forward operands are unknown or `op` is not one of `_SINGULAR`'s."""
    test = _SINGULAR.get(op)
    if test is None or not operands or len(operands) != test.__code__.co_argcount:
        return True
    try:
        return bool(test(*operands))
    except TypeError:               # (complex operands)
        return True


@dataclass
class GuardSite:
    index: int
    kind: str                   # origin | argument | bounds | div0
    order: list                 # positions of the enclosing loops, then of the operation
    shape: tuple
    labels: list
    op: str
    span: Span | None
    name: str | None            # the location's name (arrc: the operation, e.g. "divide")
    chain: list                 # [(function name, call span)], innermost first
    attrs: dict = field(default_factory=dict)
    derivative_of: str | None = None    # in a backward pass: the forward operation (compiler/autodiff.py)
    function: str | None = None         # the function the module was made from, where its locations say (JAX's)
    own: bool = True            # in a module arrc lowered (arr's semantics), not StableHLO from elsewhere


EFFECTS = abi.EFFECT_KINDS
# An infinity that reaches a result is reported even when the program means it, as under `jax_debug_infs`;
# one made from a zero or an infinite literal (not an overflow) may well be meant, so its report says how.
INF_HELP = ("if this infinity is intended (`log(0.0)` is `-inf`), leave `inf` out of the guards: "
            "`--guards nan,bounds,div0` (`guards=\"nan,bounds,div0\"`; in the REPL `:guards nan,bounds,div0`)")
FORWARD = abi.FORWARD_LABEL


def _derivative_of(loc) -> str | None:
    """The forward operation's name where `loc` is an adjoint's: `vjp(<op>)` around the forward location
    (around an adjoint's location in a derivative of a derivative: the operation it differentiates)."""
    name = name_of(loc)
    if not (name or "").startswith("vjp(") or not isinstance(loc, ir.NameLoc):
        return None
    return _derivative_of(loc.child_loc) or name_of(loc.child_loc) or name[4:name.index(")")]


def sites(module: ir.Module) -> dict:
    """Every host-callback site of the module by callback index, read from the attributes of its
    custom_calls: a GuardSite for a guard report, a PrintSite, AssertSite or BoundReport for an effect
    (runtime/effects.py `site_of`); and the BoundSite of each loop whose bound a derivative checks, by its
    site number (not a callback: its PAST value is a result, compiler/effects.py)."""
    from .effects import loop_site, site_of
    out = {}
    own = abi.ENTRY in entry(module).attributes

    def visit(op):
        op = op.operation
        if op.name == "stablehlo.while" and abi.BOUND_SITE in op.attributes:
            out[ir.IntegerAttr(op.attributes[abi.BOUND_SITE]).value] = loop_site(op)
            return ir.WalkResult.ADVANCE
        if op.name == "stablehlo.custom_call" and abi.KIND in op.attributes:
            index = ir.IntegerAttr(ir.DictAttr(op.attributes["backend_config"])["index"]).value
            kind = attr_text(op.attributes[abi.KIND])
            frames = call_frames(op.location)
            jax = jax_frames(op.location)
            chain = jax[0] if jax else [(name_of(f), span_of(f)) for f in frames[1:]]
            if kind in EFFECTS:
                out[index] = site_of(op, span_of(frames[0]), chain)
                return ir.WalkResult.ADVANCE
            extra = {k: i64s(op.attributes[k])
                     for k in (abi.DIMS, abi.SIZES, abi.AXIS, abi.ARG, abi.REACHES, abi.LINALG_BATCH)
                     if k in op.attributes}
            if abi.LINALG in op.attributes:
                extra[abi.LINALG] = attr_text(op.attributes[abi.LINALG])
            if abi.WRAPPED_INDEX in op.attributes:
                extra[abi.WRAPPED_INDEX] = True
            for name in (abi.LANES, abi.BATCH_OF):
                if name in op.attributes:
                    extra[name] = [attr_text(a) for a in ir.ArrayAttr(op.attributes[name])]
            out[index] = GuardSite(
                index=index, kind=kind,
                order=i64s(op.attributes[abi.ORDER]), shape=tuple(i64s(op.attributes[abi.SHAPE])),
                labels=[attr_text(a) for a in ir.ArrayAttr(op.attributes[abi.LABELS])],
                op=attr_text(op.attributes[abi.OP]), span=span_of(frames[0]), name=name_of(frames[0]),
                chain=chain, attrs=extra,
                derivative_of=_derivative_of(frames[0]), own=own, function=jax[1] if jax else None)
        return ir.WalkResult.ADVANCE
    walk_ops(module.operation, visit)
    return out


@dataclass
class Event:
    site: GuardSite
    first: int
    counters: tuple
    values: tuple
    subnormal: frozenset = frozenset()      # the positions in `values` of subnormal floats

    @property
    def key(self) -> list:
        return execution_key(self.site.order, self.counters)


def execution_key(order, counters) -> list:
    """Where a check ran, in execution order: (loop position, iteration) for each enclosing loop, then the op
    position (`order`, passes/guards.py); a loop whose position is negative counts down (a backward loop runs
    j = T-1 first)."""
    key = []
    for position, count in zip(order[:-1], counters):
        key += [abs(position), -count if position < 0 else count]
    return key + [order[-1]]


def _is_subnormal(value: np.ndarray) -> bool:
    """Whether a float operand is subnormal where XLA computes it: in f64, or in f32 for f32, f16 and bf16
    (an f16 subnormal is a normal f32)."""
    if value.dtype.name not in ("float16", "bfloat16", "float32", "float64"):
        return False
    computed = np.float64 if value.dtype == np.float64 else np.float32
    return 0 < abs(float(value)) < float(np.finfo(computed).smallest_normal)


def make_callback(site: GuardSite, state_of):
    """The host callback of a guard's report site; `state_of` finds a run id's RunState (runtime/effects.py)."""
    def callback(run_id, first, *rest):
        state = state_of(run_id)
        if state is not None:
            loops = len(site.order) - 1
            values = [np.asarray(v) for v in rest[loops:]]
            state.events.append(Event(site, int(first), tuple(int(c) for c in rest[:loops]),
                                      tuple(v.item() for v in values),
                                      frozenset(i for i, v in enumerate(values) if _is_subnormal(v))))
        return ()
    return callback


def first_event(events: list) -> Event | None:
    return min(events, key=lambda e: e.key) if events else None


def _reaching(events: list, bad_results: set) -> list:
    """The origin reports whose non-finite values reached a result that was not finite: the sites the
    origin build traced element by element into those results (its `flow` report), or, where it lost the
    trace (a value out of a loop or branch), those whose operation flows into such a result by the static
    def-use chains. A NaN the program masked on its way is not the one to blame. A division by zero or an index
    out of range is kept: its check reported it only where it reaches a result, so it competes on
    execution order (`a // b` before the `log(x)` that makes the NaN is the first fault)."""
    flows = [e for e in events if e.site.kind == "flow"]
    events = [e for e in events if e.site.kind != "flow"]
    keys = {v for e in flows for result, v in zip(e.site.labels, e.values) if int(result) in bad_results}
    if keys and UNTRACED not in keys:
        traced = {key >> SITE_SHIFT for key in keys}
        found = [e for e in events if e.site.index in traced]
        if found:
            return found + [e for e in events if e.site.kind in ("div0", "bounds")]
    flowing = [e for e in events if abi.REACHES not in e.site.attrs
               or bad_results & set(e.site.attrs[abi.REACHES])]
    return flowing or events


def _fmt(value) -> str:
    if isinstance(value, complex):
        return f"{_fmt(value.real)}{'-' if value.imag < 0 else '+'}{_fmt(abs(value.imag))}j"
    if isinstance(value, float):
        if np.isnan(value):
            return "nan"
        if np.isinf(value):
            return "inf" if value > 0 else "-inf"
        with np.errstate(over="ignore"):        # (a value past f32's range is shown as it is)
            short = np.float32(value)
        return str(short) if float(short) == value else repr(value)
    return str(value)


def _operand_text(label: str, sources: dict, at: Span | None = None, written: str | None = None) -> str:
    """How the report names an operand from its label (passes/guards.py `_label`): a name, a literal, or a
    value made in the operation's file outside its span `at`, by its text `written` there if it is a name or
    a literal (`_names_written`); otherwise a name as it is, and other values by their own source text (so
    an operand of an op in an `extern def`'s Python, or in a library, made by the caller is named by the
    caller's expression)."""
    if not label.startswith("@"):
        # a literal, or a name that the use may spell otherwise (`log(a)` in `g(a)`, called as `g(x)`)
        return label if written is None else written
    file, line, col, end_line, end_col = label[1:].rsplit(":", 4)
    if written is not None and at is not None and file == at.file and not (
            (at.line, at.col) <= (int(line), int(col)) <= (at.end_line, at.end_col)):
        return written
    src = sources.get(file)
    if src is None or int(line) != int(end_line):
        return f"value at {file}:{line}:{col}"
    text = src.line_text(int(line))[int(col) - 1:int(end_col) - 1]
    return text if text else f"value at {file}:{line}:{col}"


def _names_written(span: Span | None, labels: list, sources: dict) -> list:
    """For an operation written `a / count` (or `-v`, `log(x)`, `where(c, x, -inf)`) whose operands have
    `labels`: the text of each operand that is written as a name or a literal (None for the others); all
    None where the operation's text is not that."""
    count = len(labels)
    src = sources.get(span.file) if span is not None else None
    if src is None or span.line != span.end_line:
        return [None] * count
    from ..compiler import ast
    from ..compiler.diagnostics import CompileError
    from ..compiler.parse import parse
    from ..compiler.span import Source
    text = src.line_text(span.line)[span.col - 1:span.end_col - 1]
    try:
        node = parse(Source("<operands>", text), start="expr")
    except (CompileError, ValueError):
        return [None] * count
    if isinstance(node, ast.Binary):
        parts = [node.lhs, node.rhs]
    elif isinstance(node, ast.Unary):
        parts = [node.operand]
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "where":
        parts = list(node.args[1:])             # its condition is no float operand
    elif isinstance(node, ast.Call) and len(set(labels)) == 1 and len(node.args) == 1 and not node.kwargs:
        parts = list(node.args) * count         # `log(x)`, `square(x)` (x * x)
    else:
        parts = []
    if len(parts) != count:
        return [None] * count
    # a constant's text is what it is (`zeros(3)`), whatever its form; another operand's only if plain
    return [text[p.span.col - 1:p.span.end_col - 1] if _plain(p) or label == "literal" else None
            for p, label in zip(parts, labels)]


def _plain(node) -> bool:
    """A name or a literal, or one negated: an operand whose text says what it is."""
    from ..compiler import ast
    if isinstance(node, ast.Unary) and node.op == "-":
        node = node.operand
    return isinstance(node, (ast.Name, ast.FloatLit, ast.IntLit))


# What a non-finite result of a linear-algebra operation on finite matrices means (JAX returns NaN where a
# factorization fails, and LU's zero pivot makes infinities).
LINALG_FAILURES = {
    "cholesky": "is not positive definite",
    "solve": "is singular", "inv": "is singular", "det": "is singular", "slogdet": "is singular",
    "triangular_solve": "has a zero on its diagonal",
}


def _linalg_failure(site, index: tuple, what: str, cls) -> tuple[str, str, list]:
    """(message, label, notes) of a linear-algebra operation that made `what` from finite operands; `index`
    without vmap's lane dimensions, which its batch dimensions count."""
    name = site.attrs[abi.LINALG]
    batch = site.attrs.get(abi.LINALG_BATCH, [0])[0] - len(site.attrs.get(abi.BATCH_OF, []))
    matrix = f"the matrix at batch index {list(index[:batch])}" if batch else "the matrix"
    failure = LINALG_FAILURES.get(name, "did not give a finite result")
    at = f" at index {list(index)}" if index else ""
    jax_name = {"triangular_solve": "jax.scipy.linalg.solve_triangular", "lu": "jax.scipy.linalg.lu"}.get(
        name, f"jnp.linalg.{name}")
    notes = [f"`{jax_name}` gives {what} there too" if name in LINALG_FAILURES else
             f"{what} from finite operands: the factorization did not converge or overflowed"]
    return f"`{name}`: {matrix} {failure}", f"this `{name}` produced {what}{at}", notes


def report(event: Event, entry: str, sources: dict) -> GuardError:
    """The exception for one event: class by kind, rendered with the span, index, operands, iteration, chain."""
    site = event.site
    entry = site.function or entry
    index = tuple(int(i) for i in np.unravel_index(event.first, site.shape)) if site.shape else ()
    batch_of = site.attrs.get(abi.BATCH_OF, [])    # vmap's lanes first (nested: outermost first), then the
    lanes_at, index = index[:len(batch_of)], index[len(batch_of):]       # element's index inside its lane
    at = f" at index {list(index)}" if index else ""
    notes = []
    operands = {}
    help = None
    if site.kind in ("origin", "argument"):
        value = event.values[-1] if site.kind == "origin" else event.values[0]
        cls, what = (NaNError, "NaN") if isinstance(value, float) and np.isnan(value) else (InfError, _fmt(value))
        if site.kind == "argument":
            name = site.labels[0]
            message = f"{'NaN' if cls is NaNError else 'infinity'} in argument `{name}`"
            label = f"argument `{name}` is {what}{at}"
        elif abi.LINALG in site.attrs and site.derivative_of is None:    # (a derivative's NaN is no failed
            message, label, notes = _linalg_failure(site, index, what, cls)  # factorization: reported below)
        else:
            message = "NaN produced at run time" if cls is NaNError else "infinity produced at run time"
            short = (site.name or "").rsplit("/", 1)[-1]      # JAX names ops like "jit(f)/log"
            word = _OP_WORDS.get(short) or (f"`{short}`" if short else "operation")
            label = f"this {word} produced {what}{at}"
            pairs = list(zip(site.labels[:-1], event.values[:-1]))
            forward = [(_operand_text(t[len(FORWARD):], sources), v) for t, v in pairs if t.startswith(FORWARD)]
            backward = site.derivative_of is not None or jax_backward(site.name)
            if backward:
                message = message.replace("at run time", "in the backward pass")
            if site.derivative_of is not None:
                label = f"the derivative of `{site.derivative_of}` produced {what}{at}"
                op = site.derivative_of
                if _may_be_singular(op, [v for _, v in forward]):
                    word = _OP_WORDS.get(op)            # `/` is "the division", not `divide`
                    this, named = (f"this {word}", f"the {word}") if word else (f"this `{op}`", f"`{op}`")
                    one_operand = op in _SINGULAR and _SINGULAR[op].__code__.co_argcount == 1
                    example = f", e.g. `where(x > 0.0, {op}(where(x > 0.0, x, 1.0)), 0.0)`" if one_operand else ""
                    help = (f"if {this} is under a `where` that drops these elements, its derivative is still computed "
                            f"for them (and 0 * {what} is NaN, as in jax.grad): give {named} safe inputs with a "
                            f"second `where`{example}")
            if forward and not any(k.startswith("%") for k, _ in forward):   # (not MLIR's `%arg0` fragments)
                # the operands of the forward operation, at the same index
                label += " (" + ", ".join(f"{k} = {_fmt(v)}" for k, v in forward) + ")"
            own = [(t, v) for t, v in pairs if not t.startswith(FORWARD)]
            # an adjoint's operands are not the forward operation's, whose text its span holds
            written = [None] * len(own) if backward else \
                _names_written(site.span, [t for t, _ in own], sources)
            for (label_text, v), written in zip(own, written):
                operands[_operand_text(label_text, sources, site.span, written)] = v
            if operands:
                notes.append(f"operands{at.replace(' index', '')}: " +
                             ", ".join(f"{grouped(k, before_suffix=False)} = {_fmt(v)}" for k, v in operands.items()))
            tiny = [f"{k} = {_fmt(v)}" for k, v in operands.items()
                    if v in {event.values[i] for i in event.subnormal}]
            if tiny:
                notes.append(f"{' and '.join(tiny)} {'is' if len(tiny) == 1 else 'are'} subnormal, and XLA computes "
                             "with subnormal numbers flushed to zero (as JAX does): the operation saw 0 there")
    elif site.kind == "bounds":
        cls = BoundsError
        dims, sizes = site.attrs.get(abi.DIMS, []), site.attrs.get(abi.SIZES, [])
        from_end = site.own or abi.WRAPPED_INDEX in site.attrs     # a negative index counts from the end
        if abi.AXIS in site.attrs:
            raw = event.values[0]
            dim, size = dims[0], sizes[0]
            axis = site.attrs[abi.AXIS][0]
        else:
            # arr counts a negative start from the end (`-n..-s` for a slice of s); StableHLO takes none
            axis = next((d for d, (v, n, s) in enumerate(zip(event.values, dims, sizes))
                         if not (0 <= v <= n - s or from_end and -n <= v <= -s)), 0)
            raw, dim, size = event.values[axis], dims[axis], sizes[axis]
            if batch_of:        # vmap's rules slice every lane at one index: the leading dimensions are theirs
                axis -= len(batch_of)
                notes.append(f"in every lane of {' and '.join(batch_of)} (the index is the same in each)")
        operands = {"index": raw, "size": dim}
        message = "index out of range at run time"
        valid = f"{-dim}..{dim - size}" if size == 1 and from_end else \
            f"0..{dim - size}" + (f" for a slice of {size}" if size != 1 else "") \
            + (f" (or {-dim}..{-size} from the end)" if size != 1 and from_end and dim >= size else "")
        label = f"index {raw} is out of range for dimension {axis} of size {dim}{at}"
        if site.own:
            fate = "the index was clamped into range"
        elif site.op == "stablehlo.scatter":
            fate = "StableHLO's scatter drops this update"
        else:
            fate = f"StableHLO's {site.op.rpartition('.')[2]} clamps it into range"
        notes.append(f"valid indices are {valid}; {fate}")
    else:
        cls = DivisionByZero
        operands = {_operand_text(k, sources): v for k, v in zip(site.labels, event.values)}
        message = "integer division by zero at run time"
        label = f"this division has a zero divisor{at}"
        notes.append("arr gives 0 here (as NumPy); the div0 guard reports it instead" if site.own else
                     "the module replaces a zero divisor (`jnp.remainder` gives 0 there, as NumPy); the div0 "
                     "guard reports it instead" if "divisor" in site.labels else
                     "StableHLO leaves the result of an integer division by zero to the backend; "
                     "the div0 guard reports it instead")
    if site.kind == "origin" and cls is InfError and help is None \
            and any(v == 0.0 or np.isinf(v) for v in operands.values()):    # `log(0.0)`, `1.0 / 0.0`, `-inf`
        help = INF_HELP
    lanes = site.attrs.get(abi.LANES, [""] * len(event.counters))
    loops = [c for c, lane in zip(event.counters, lanes) if not lane]
    iteration = tuple(loops) or None
    if loops:
        notes.append("in loop iteration " + ", ".join(str(c) for c in loops)
                     + (" (outermost first)" if len(loops) > 1 else ""))
    notes += [f"in lane {c} of {lane}" for c, lane in zip(event.counters, lanes) if lane]
    notes += [f"in lane {lane} of {mapped}" for lane, mapped in zip(lanes_at, batch_of)]
    calls = _calls_note(site.chain, entry, () if site.derivative_of else notes) if site.chain or entry else None
    if calls:
        notes.append(("in the backward pass, " if site.derivative_of else "") + calls)
    return cls(message, site.span, label, index=index, iteration=iteration, operands=operands, notes=notes,
               sources=sources, help=help,
               lanes=tuple(c for c, lane in zip(event.counters, lanes) if lane) + tuple(lanes_at))


def _calls_note(chain: list, entry: str, notes=()) -> str | None:
    """`in g, called from f at q.arr:6:12, called from main at q.arr:9:5`: the function of a site and the
    calls that inlined it (`chain`, innermost first: (callee, call span)) up to the entry point. None where it
    would only name the entry that one of the report's `notes` names (`in lane 2 of vmap(f)`)."""
    if not chain and any(note.endswith(f" of {entry}") for note in notes):
        return None
    functions = [name for name, _ in chain] + [entry]
    return ", ".join([f"in {functions[0]}"] + [f"called from {caller} at {span}"
                                               for (_, span), caller in zip(chain, functions[1:])])


def raise_faults(state, scope: str, origin_run, entry: str, sources: dict) -> None:
    """Raise the first fault of a call: a failed assertion, or a guard report. After a non-finite result
    (scope "results"), `origin_run()` re-runs the call in the origin build and returns its RunState."""
    if isinstance(state.failure, AssertionFailed):
        failure = state.failure
        first = first_event(state.events) if failure.order and len(failure.counters) == len(failure.order) - 1 \
            else None
        if first is not None and first.key < execution_key(failure.order, failure.counters):
            raise report(first, entry, sources)         # a fault that the checks found before the assert failed
        calls = _calls_note(failure.chain, entry, failure.diagnostic.notes)   # (no chain: in the entry, named
        raise failure.noted(calls) if calls else failure                     # as a guard report names it)
    if state.failure is not None:
        raise state.failure
    if not state.fault and not state.events:
        return
    events = list(state.events)
    if state.fault and scope == "results":
        origins = origin_run()          # None: nothing in the origin build reports (complex operations)
        events = _reaching(origins.events, state.bad_results) if origins is not None else []
    event = first_event(events)
    if event is not None:
        raise report(event, entry, sources)
    which = sorted(getattr(state, "bad_results", None) or ())
    raise NaNError(f"a result of `{entry}` is not finite", None,
                   notes=(["not finite: " + ", ".join(f"results[{i}]" for i in which)] if which else [])
                   + ["the origin build found no operation that produced it (complex operations are checked "
                      "only in the results)"], sources=sources)


class FileSources(dict):
    """Sources by file name, read from disk on first use (for modules whose locations name files here)."""

    def get(self, name, default=None):
        if name not in self:
            from ..compiler.span import Source
            try:
                with open(name, encoding="utf-8") as f:
                    self[name] = Source(name, f.read())
            except (OSError, UnicodeDecodeError, TypeError):
                self[name] = None
        value = dict.get(self, name)
        return default if value is None else value
