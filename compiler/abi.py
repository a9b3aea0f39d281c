"""Every `arrc.*` attribute arrc writes into a StableHLO module, named once. A module is self-describing:
the runtime reads its calling convention, its host-callback sites and its loop facts from these alone,
so a module written by `arrc compile` runs under `arrc run` (or another process) as it would have here.

Markers are BoolAttr (VHLO, the portable artifact's dialect, has no UnitAttr)."""
from __future__ import annotations

GUARD_KINDS = ("nan", "inf", "bounds", "div0")   # what `arrc.guards` and a guard site's `arrc.kind` may say
GUARD_SCOPES = ("results", "all-ops")           # where nan/inf are checked (passes/guards.py)

# ---- on the module ----
PLATFORMS = "arrc.platforms"          # a multi-platform jax.export's platforms, in the order its `main`'s
                                      # PLATFORM_INDEX argument counts them (runtime/foreign.py)
PLATFORM_INDEX = "_platform_index"    # JAX's `jax.global_constant` of that argument (not arrc's: JAX names it)

# ---- on the entry function (`main`) ----
ENTRY = "arrc.entry"                  # the arr function a module was lowered from
PACKED_KEYS_MAIN = "arrc.packed_keys_main"  # arr's own main under the entry taking keys' words (passes/key_words.py)
RUN_ARG = "arrc.run_arg"              # index of the i32 run-id argument (host callbacks find their call)
IO_ARG = "arrc.io_arg"                # index of the i32 argument that orders print/assert effects
EXTRA_RESULTS = "arrc.extra_results"  # number of trailing results that are not the function's own
BOUND_RESULT = "arrc.bound_result"    # index of the extra i64[2] result [loop site, iterations]: a run past a bound
GUARDED = "arrc.guards"               # the guard kinds a module is already instrumented for
CHECK_RESULTS = "arrc.check_results"  # results checked for nan/inf by the second executable (passes/guards.py)

# ---- on a host-callback custom_call: its site (print, assert, a guard report) ----
KIND = "arrc.kind"                    # "print", "assert", "bound" or a guard kind ("nan", "inf", "bounds", "div0")
EFFECT_KINDS = ("print", "assert", "bound")   # the kinds of a host callback that is an effect of the program
PIECES = "arrc.pieces"                # print: the text pieces and value slots
MESSAGE = "arrc.message"              # assert: its message
FUNCTION = "arrc.function"            # assert: the arr function it is in
SHAPE = "arrc.shape"                  # the checked value's shape
ORDER = "arrc.order"                  # guard: loop positions and the op's position (first fault wins)
LABELS = "arrc.labels"                # guard: names of the reported values
OP = "arrc.op"                        # guard: the operation's name
DIMS = "arrc.dims"                    # bounds guard: the indexed dimensions
SIZES = "arrc.sizes"                  # bounds guard: their sizes
AXIS = "arrc.axis"                    # bounds guard of one axis
ARG = "arrc.arg"                      # a guard on an argument: its index
REACHES = "arrc.reaches"              # results a guarded value flows into (reports only those that matter)

# ---- on operations: facts the passes read ----
SAFE_DIVISOR = "arrc.safe_divisor"    # a divide/remainder whose divisor is never 0 (no div0 guard)
DIV0 = "arrc.div0"                    # the select that replaces a zero divisor: the div0 guard's site
WRAPPED_INDEX = "arrc.wrapped_index"  # a negative index wrapped by the size: bounds checks the original
#                                       (on a bounds report: its module counts a negative index from the end)
SATURATED_INDEX = "arrc.saturated_index"  # a u64 index converted to i64 through a minimum: bounds reports the u64 one
CLAMPED_INDEX = "arrc.clamped_index"  # an index clamped into range: bounds checks it before the clamp
IN_BOUNDS = "arrc.in_bounds"          # a dynamic slice/update whose starts are in range by construction
TAPE_WRITE = "arrc.tape_write"        # on the dynamic_update_slice that records a value on a derivative's tape
COUNTED = "arrc.counted"              # on a stablehlo.while: its last carried value counts its iterations
COUNTS_DOWN = "arrc.counts_down"      # and with this, counts them down (a backward loop: the forward iteration it sweeps)
LANES = "arrc.lanes"                  # on the stablehlo.while that runs vmap's lanes one by one: "vmap(f)"
BATCH_OF = "arrc.batch_of"            # on an op vmap's rules made: ["vmap(f)", ...], whose lanes are its results' dimensions 0, ... (nested vmaps, outermost first)
MASKED = "arrc.masked"                # on an op of a branch vmap computes for every lane: a select drops the other lanes
LANE_GATE = "arrc.lane_gate"          # on a select(keep, v, stop_gradient(v)) of such a branch: v, whose derivative only kept lanes reach
FORWARD_ID = "arrc.forward_id"        # on a differentiated op: the id its adjoints' `vjp(<op>)#<id>` locations name
FORWARD_LABEL = "forward:"             # a guard report's label prefix for an operand of that forward op
LOOP_BOUND = "arrc.loop_bound"        # on a loop's stablehlo.while: its `bound=N` (docs/autodiff.md), the size of a tape
BOUND_SITE = "arrc.bound_site"        # on a loop's stablehlo.while whose derivative checks its bound: its site number
INTEGER_EXPONENT = "arrc.integer_exponent"  # on a float stablehlo.power whose exponent was an integer (its derivative at y = 0 is 0, as JAX's)
RELU = "arrc.relu"                    # on the stablehlo.select of arr's relu: its derivative is jax.nn.relu's, 0 where x > 0 is false (NaN too)
ROUNDED = "arrc.rounded"              # on the bitcast that ends a rounding done on a float's bits (emit.py): its value is that float's, rounded
UNROLLED = "arrc.unrolled"            # on an op of an unrolled loop's copy (autodiff): [loop id, iteration] pairs, outermost first
UNROLLED_LANES = "arrc.unrolled_lanes"  # with it, where one of those loops ran vmap's lanes: its LANES label, "" for the others
TRIP_COUNT = "arrc.trip_count"        # on a `for` loop's stablehlo.while: its trip count, -1 if unknown
LINALG_TARGET = "arrc.linalg"         # the custom_call target of a linear-algebra operation until passes/linalg.py
LINALG = "arrc.linalg_op"             # on it: the operation (`cholesky`), as compiler/ops_linalg.py names it
LINALG_PARAMS = "arrc.linalg_params"  # its keyword parameters, as JSON
LINALG_DERIVATIVE = "arrc.linalg_vjp"  # how many times it was differentiated (reverse mode): 0 for the op itself
EXTERN_CALL = "arrc.extern_call"      # on the func.call of an `extern def`: its ops, inlined, keep this call site
LINALG_BATCH = "arrc.linalg_batch"    # on a guard of its result: how many leading dimensions index its matrices
PACKED = "arrc.packed"                # arrc's other attributes of an operation, as one (passes/rewrite.py)
