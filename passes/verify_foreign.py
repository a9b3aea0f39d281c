"""`verify-foreign-calls`: reject what a StableHLO module from elsewhere could use to crash, hang or take
over the process that runs it, before anything is compiled (E0503).

XLA trusts its input: a `custom_call` runs whatever its target names (a Python callback by index, a
kernel that writes as many bytes as its operand's shape says, a function pointer not yet set), and a
shape of 2**62 elements aborts it. So a module may use only:

- host callbacks that arrc registered: `xla_ffi_python_{cpu,gpu}_callback` custom_calls that describe
  their site with an `arrc.kind` attribute (print, assert, guard reports) and carry a unique index below
  MAX_CALLBACKS; the runtime makes each handler from that description (runtime/call.py);
- jaxlib's LAPACK kernels, exactly as JAX's CPU lowering calls them: each result's type must be the one
  the kernel writes for its operands, else it writes past it (passes/lapack_calls.py);
- the custom_calls XLA itself handles that JAX emits (`Sharding`, `SPMDFullToShardShape`,
  `SPMDShardToFullShape`, `annotate_device_placement`), with one operand and one result of its type;
- ops of the stablehlo, chlo, func and sdy dialects, except host transfers (infeed, outfeed, send, recv:
  they wait forever for a host that never answers) and collectives (arrc runs a module on one device;
  XLA fails on groups naming other devices, after an out-of-bounds check; those of a module for one
  device whose groups name device 0 only are the identity, and run), and calls only to functions
  with a body, none of them recursive (XLA's conversion to HLO follows each call as deep as it goes: a
  cycle of calls overflows its stack);
- tensors of at most `compiler.types.MAX_ARRAY_BYTES` (this machine's memory) each.

    >>> from jaxlib.mlir import ir
    >>> from arrc.compiler.emit import make_context
    >>> with make_context():
    ...     m = ir.Module.parse('func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\\n'
    ...         '  %0 = stablehlo.custom_call @evil(%a) : (tensor<2xf32>) -> tensor<2xf32>\\n'
    ...         '  return %0 : tensor<2xf32>\\n}')
    ...     [(d.code, d.message.split(": ")[0]) for d in verify_foreign_calls(m)]
    [('E0503', '`stablehlo.custom_call @evil` in @main')]
"""
from __future__ import annotations

from jaxlib.mlir import ir

from ..compiler import abi
from ..compiler.diagnostics import Diagnostic
from ..compiler.types import MAX_ARRAY_BYTES
from .base import ModulePass
from ..compiler.locations import span_of
from .rewrite import attr_text, i64s
from ..compiler.walk import depth_first, walk_ops

CALLBACK_TARGETS = ("xla_ffi_python_cpu_callback", "xla_ffi_python_gpu_callback")
PAST_TEXT = "tensor<2xi64>"     # compiler/effects.py PAST: a derivative's run past a loop's bound
MAX_CALLBACKS = 1 << 16        # callback indices index a list of handlers: a bigger one would only waste memory
XLA_ANNOTATIONS = ("Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "annotate_device_placement")
HOST_TRANSFERS = ("stablehlo.infeed", "stablehlo.outfeed", "stablehlo.send", "stablehlo.recv")
COLLECTIVES = ("stablehlo.all_reduce", "stablehlo.all_gather", "stablehlo.all_to_all", "stablehlo.reduce_scatter",
               "stablehlo.collective_permute", "stablehlo.collective_broadcast")
DIALECTS = ("stablehlo", "chlo", "sdy")
FUNC_OPS = ("func.return", "func.call")

# What each kind of registered site must carry (runtime/guards.py `sites`, runtime/effects.py `site_of`):
# attribute name -> the attribute's class; results: the callback's result types.
GUARD_ATTRS = {abi.ORDER: "i64s", abi.SHAPE: "i64s", abi.LABELS: "strings", abi.OP: "string"}
SITES = {
    "print": ({abi.PIECES: "pieces"}, ["tensor<i32>"]),
    "assert": ({abi.MESSAGE: "string", abi.SHAPE: "i64s", abi.FUNCTION: "string"}, ["tensor<i32>"]),
    "bound": ({}, ["tensor<i32>"]),
    **{kind: (GUARD_ATTRS, []) for kind in ("origin", "argument", "bounds", "div0")},
}
OPTIONAL_I64S = (abi.DIMS, abi.SIZES, abi.AXIS, abi.ARG, abi.REACHES)
CALLBACK_ELEMENTS = {"i1", "i8", "i16", "i32", "i64", "ui8", "ui16", "ui32", "ui64",
                     "f16", "bf16", "f32", "f64", "complex<f32>", "complex<f64>"}

HELP = ("arrc runs StableHLO whose custom_calls are its own host callbacks, jaxlib's LAPACK kernels as JAX "
        "emits them, or XLA's sharding annotations (see `arrc explain E0503`)")

RECURSION_HELP = "write the recursion as a loop (`stablehlo.while`, what JAX's `lax.while_loop` makes)"


class VerifyForeignCalls(ModulePass):
    name = "verify-foreign-calls"

    def apply(self, module: ir.Module) -> list[Diagnostic]:
        return verify_foreign_calls(module)


def verify_foreign_calls(module: ir.Module) -> list[Diagnostic]:
    check = _Checker(module)
    check.run()
    return check.diags


class _Checker:
    def __init__(self, module: ir.Module):
        self.module = module
        self.diags: list[Diagnostic] = []
        self.indices: set[int] = set()
        self.bodies = {}            # function name -> has a body
        self.calls: dict[str, list] = {}    # function name -> its calls (func.call, a composite's decomposition)
        for op in module.body.operations:
            if op.operation.name == "func.func":
                self.bodies[attr_text(op.attributes["sym_name"])] = len(op.regions[0].blocks) > 0
        attrs = module.operation.attributes
        self.one_device = all(_int_or(attrs, key, 1) == 1 for key in ("mhlo.num_partitions", "mhlo.num_replicas"))

    def error(self, op, what: str, problem: str, fn: str | None, help: str = HELP) -> None:
        where = f" in @{fn}" if fn else ""
        self.diags.append(Diagnostic("E0503", f"{what}{where}: {problem}", span_of(op.location),
                                     "cannot run this", help=help))

    def run(self) -> None:
        for op in self.module.body.operations:
            op = op.operation
            if op.name == "sdy.mesh":
                continue
            if op.name != "func.func":
                self.error(op, f"`{op.name}`", "only functions and meshes may be at the top of a module", None)
                continue
            name = attr_text(op.attributes["sym_name"])
            if not self.bodies[name]:
                self.error(op, f"function @{name}", "declared without a body: arrc cannot run code from "
                                                    "outside the module", None)
                continue
            self._function(op, name)
        self._recursion()

    def _recursion(self) -> None:
        """E0503 at each call that closes a cycle of calls (compiler/walk.py `depth_first`, as arr's own
        recursion is found: with its own stack, so a long chain of functions does not exhaust Python's)."""
        for event, cycle, op in depth_first(self.calls):
            if event == "cycle":        # (cycle: the called function, ..., the caller, the called again)
                self.error(op, f"`{op.name} @{cycle[-1]}`", "a recursive call ("
                           + " -> ".join(f"@{f}" for f in cycle) + "): XLA follows every call when it "
                           "compiles a module, and a cycle of calls overflows its stack", cycle[-2],
                           help=RECURSION_HELP)

    def _function(self, fop, fn: str) -> None:
        if abi.BOUND_RESULT in fop.attributes:
            results = ir.FunctionType(ir.TypeAttr(fop.attributes["function_type"]).value).results
            at = fop.attributes[abi.BOUND_RESULT]
            if not _has_form(at, "int") or not 0 <= ir.IntegerAttr(at).value < len(results) \
                    or str(results[ir.IntegerAttr(at).value]) != PAST_TEXT:
                self.error(fop, f"`{abi.BOUND_RESULT}` of @{fn}", f"it must be the index of a {PAST_TEXT} result",
                           fn)

        def visit(op):
            op = op.operation
            if op.name == "stablehlo.while" and abi.BOUND_SITE in op.attributes and not all(
                    key in op.attributes and _has_form(op.attributes[key], "int")
                    for key in (abi.BOUND_SITE, abi.LOOP_BOUND)):
                self.error(op, f"`{abi.BOUND_SITE}` on a loop", f"it needs `{abi.LOOP_BOUND}` too, both integers",
                           fn)
            callee = _callee(op)
            if callee is not None:
                self.calls.setdefault(fn, []).append((callee, op))
            if op.name != "func.func":       # only `fop` itself: functions nest in nothing but modules
                problem = self._op(op)
                if problem:
                    self.error(op, problem[0], problem[1], fn)
            for region in op.regions:
                for block in region.blocks:
                    for arg in block.arguments:
                        self._size(op, arg.type, fn)
            for result in op.results:
                self._size(op, result.type, fn)
            return ir.WalkResult.ADVANCE
        self.calls.setdefault(fn, [])
        walk_ops(fop, visit)

    def _size(self, op, t: ir.Type, fn: str) -> None:
        size = _byte_size(t)
        if size > MAX_ARRAY_BYTES:
            self.error(op, f"`{op.name}`", f"a value of type {t} needs {size:,} bytes; this machine allows "
                                           f"arrays of at most {MAX_ARRAY_BYTES:,} bytes", fn)

    def _op(self, op) -> tuple[str, str] | None:
        """(what, problem) when `op` is not allowed."""
        name = op.name
        what = f"`{name}`"
        if name in HOST_TRANSFERS:
            return what, "transfers data to or from the host outside a call (it would wait forever)"
        if name in COLLECTIVES and not (self.one_device and _names_only_device_0(op)):
            return what, "communicates with other devices, and arrc runs a module on one device"
        if name == "func.call":
            callee = attr_text(ir.FlatSymbolRefAttr(op.attributes["callee"]))
            if not self.bodies.get(callee, False):
                return f"`func.call @{callee}`", "calls a function declared without a body"
            return None
        if name == "stablehlo.custom_call":
            target = attr_text(op.attributes["call_target_name"])
            problem = self._custom_call(op, target)
            return (f"`stablehlo.custom_call @{target}`", problem) if problem else None
        if name.split(".")[0] in DIALECTS or name in FUNC_OPS:
            return None
        return what, "not a StableHLO, CHLO, func or Shardy operation"

    def _custom_call(self, op, target: str) -> str | None:
        if target in CALLBACK_TARGETS:
            return self._callback(op)
        if _called_computations(op):
            return "a custom_call that calls functions"
        if target in XLA_ANNOTATIONS:
            if len(op.operands) != 1 or len(op.results) != 1 or op.operands[0].type != op.results[0].type:
                return "an annotation takes one operand and returns one result of the same type"
            return None
        from .lapack_calls import check_lapack_call, is_lapack_target
        if is_lapack_target(target):
            return check_lapack_call(op, target)
        return ("unknown custom_call target (arrc runs only its own callbacks, jaxlib's LAPACK kernels and "
                "XLA's sharding annotations)")

    def _callback(self, op) -> str | None:
        """A host callback arrc registered, described by its attributes: else the problem."""
        attrs = op.attributes
        if abi.KIND not in attrs:
            return ("a host callback arrc did not register (no `arrc.kind` describes its site): one JAX made "
                    "(`jax.debug.print`, `io_callback`, `pure_callback`) calls a Python function that exists "
                    "only in the process that exported the module; export the function without it")
        kind = _string(attrs[abi.KIND])
        if kind not in SITES:
            return f"unknown callback site kind {attrs[abi.KIND]}"
        index = _callback_index(op)
        if index is None:
            return "a host callback needs `backend_config = {index = N : ui64}` and api_version 4"
        if not 0 <= index < MAX_CALLBACKS:
            return f"callback index {index} is out of range (at most {MAX_CALLBACKS - 1})"
        if index in self.indices:
            return f"callback index {index} is used by another callback"
        self.indices.add(index)
        required, results = SITES[kind]
        for key, form in required.items():
            if key not in attrs or not _has_form(attrs[key], form):
                return f"a `{kind}` site needs a `{key}` attribute ({form})"
        for key in OPTIONAL_I64S:
            if key in attrs and not _has_form(attrs[key], "i64s"):
                return f"`{key}` must be an array<i64: ...>"
        if [str(r.type) for r in op.results] != results:
            return f"a `{kind}` callback returns ({', '.join(results)})"
        types = [o.type for o in op.operands]
        if not types or str(types[0]) != "tensor<i32>":
            return "a callback's first operand is the run id, a tensor<i32>"
        bad = next((t for t in types if not _callback_operand(t)), None)
        if bad is not None:
            return f"a callback cannot receive {bad}"
        return _operands_problem(kind, attrs, types)


def _operands_problem(kind: str, attrs, types: list) -> str | None:
    """What the site's handler would trip over (runtime/guards.py `make_callback`, runtime/effects.py)."""
    if kind in abi.EFFECT_KINDS and (len(types) < 2 or str(types[1]) != "tensor<i32>"):
        return f"a `{kind}` callback's second operand is the i/o token, a tensor<i32>"
    if kind == "print":
        slots = sum(1 for piece in ir.ArrayAttr(attrs[abi.PIECES]) if isinstance(piece, ir.ArrayAttr))
        return None if len(types) == 2 + slots else f"{len(types) - 2} values for {slots} value slots"
    scalars = types[2:] if kind in abi.EFFECT_KINDS else types[1:]
    if kind == "assert" and len(types) < 3:
        return "an `assert` callback takes the index of the first failing element"
    if kind == "bound":
        return None if len(types) == 3 and str(types[2]) == PAST_TEXT else \
            f"a `bound` callback takes the [loop, iterations] of a run past a bound, a {PAST_TEXT}"
    if any(t.rank != 0 for t in scalars):
        return f"a `{kind}` callback takes scalars after its run id"
    if kind not in abi.EFFECT_KINDS and not _guard_operands(attrs, len(types)):
        return "the operands do not match the site's `arrc.order` and `arrc.labels`"
    return None


def _callee(op) -> str | None:
    """The function `op` calls: a `func.call`'s callee, a `stablehlo.composite`'s decomposition (XLA
    inlines it)."""
    for kind, key in (("func.call", "callee"), ("stablehlo.composite", "decomposition")):
        if op.name == kind and key in op.attributes:
            return attr_text(ir.FlatSymbolRefAttr(op.attributes[key]))
    return None


def _called_computations(op) -> list:
    try:
        return list(ir.ArrayAttr(op.attributes["called_computations"]))
    except KeyError:
        return []


def _callback_index(op) -> int | None:
    attrs = op.attributes
    if "mhlo.backend_config" in attrs or _called_computations(op):
        return None
    try:
        if ir.IntegerAttr(attrs["api_version"]).value != 4:
            return None
        config = ir.DictAttr(attrs["backend_config"])
        if len(config) != 1:
            return None
        return ir.IntegerAttr(config["index"]).value
    except (KeyError, ValueError):
        return None


def _string(attr) -> str | None:
    return attr.value if isinstance(attr, ir.StringAttr) else None


def _has_form(attr, form: str) -> bool:
    if form == "string":
        return isinstance(attr, ir.StringAttr)
    if form == "int":
        return isinstance(attr, ir.IntegerAttr)
    if form == "i64s":
        try:
            i64s(attr)
            return True
        except ValueError:
            return False
    if not isinstance(attr, ir.ArrayAttr):
        return False
    if form == "strings":
        return all(isinstance(a, ir.StringAttr) for a in attr)
    # print pieces: text (a string) or a value slot (an empty array)
    return all(isinstance(a, ir.StringAttr) or (isinstance(a, ir.ArrayAttr) and len(a) == 0) for a in attr)


def _guard_operands(attrs, count: int) -> bool:
    """Run id, first index, one counter per enclosing loop, one value per label (runtime/guards.py)."""
    loops = len(i64s(attrs[abi.ORDER])) - 1
    return loops >= 0 and count == 2 + loops + len(ir.ArrayAttr(attrs[abi.LABELS]))


def _callback_operand(t: ir.Type) -> bool:
    return isinstance(t, ir.RankedTensorType) and str(t.element_type) in CALLBACK_ELEMENTS


def _element_bits(t: ir.Type) -> int:
    if isinstance(t, ir.ComplexType):
        return 2 * _element_bits(t.element_type)
    if isinstance(t, (ir.IntegerType, ir.FloatType)):
        return t.width
    return 64


def _int_or(attrs, key: str, default: int):
    """An integer attribute's value, `default` where it is absent, None where it is no integer."""
    if key not in attrs:
        return default
    return ir.IntegerAttr(attrs[key]).value if _has_form(attrs[key], "int") else None


def _names_only_device_0(op) -> bool:
    """Whether a collective's groups (or `collective_permute`'s pairs) name no device but 0: on one device,
    what JAX lowers a `shard_map` over a mesh of one device to (`psum` is an `all_reduce` over the group
    [[0]]), which XLA runs as the identity. -1 pads groups of unequal sizes; no groups mean all devices."""
    attrs = op.attributes
    found = [attrs[k] for k in ("replica_groups", "source_target_pairs") if k in attrs]
    return bool(found) and all(isinstance(a, ir.DenseIntElementsAttr) and all(int(v) in (0, -1) for v in a)
                               for a in found)


def _byte_size(t: ir.Type) -> int:
    """Bytes one value of type `t` takes (exact Python integers: no overflow); 0 for tokens."""
    if isinstance(t, ir.TupleType):
        return sum(_byte_size(t.get_type(i)) for i in range(t.num_types))
    if not isinstance(t, ir.RankedTensorType) or not t.has_static_shape:
        return 0                       # dynamic shapes are verify-static-shapes's to report
    count = 1
    for d in t.shape:
        count *= d
    return count * max(1, _element_bits(t.element_type) // 8)
