"""Many devices (LANGUAGE.md section 17, docs/sharding.md): a function of an arr module run as one SPMD
program over a mesh of devices, partitioned by XLA (Shardy), never by collectives or transfers written here.

The function goes through `Function.as_jax()` (arrc/interop.py: its StableHLO merged into JAX's module) and
`jax.jit` with the mesh's shardings, so XLA's partitioner sees arr's operations as JAX's and the results come
back as sharded `jax.Array`s with the shardings XLA chose. With the `nan`/`inf` guards (checked at the
results, the default scope), the same program also returns whether the sum of each float result is finite
(partitioned as any reduction, a replicated flag); where one is not, the module's origin build runs as an
SPMD program too, which finds the origin and raises its report (global element indices), with a note naming
the device that holds the first bad result element. `print`, `assert` and the guards that check inside the
program (`bounds`, `div0`, the all-ops scope) run their host callbacks on the program's first device
(arrc/interop.py registers them with JAX's module). Under jax.distributed the process that saw a fault sends
its report to the others; nothing is gathered.
"""
from __future__ import annotations

import collections
import contextlib
import math
import numbers
import threading

from arrc.interop import has_effects

_lock = threading.RLock()          # (`_once` makes under it, and a make may call `_once`)

# Virtual CPU devices one process makes (`arrc run/compile --devices N`, `arrc.distributed.initialize(...,
# local_devices=N)`; docs/limits.md). JAX makes them all as its CPU backend starts, at any count: 1,024 took
# 2 s and 310 MB (a call over all of them 4.4 s), 16,384 17 s and 2 GB, 3,000,000,000 failed inside jaxlib.
MAX_VIRTUAL_DEVICES = 1024


def mesh(device: str = "cpu", devices=None, **axes):
    """A `jax.sharding.Mesh` of the named axes, e.g. `mesh(data=4, model=2)`, over the first devices of the
    PJRT platform `device` (every process's, under `jax.distributed`), or over `devices` in that order."""
    import jax
    import numpy as np
    if not axes:
        raise ValueError("a mesh needs at least one named axis, e.g. arrc.mesh(data=8)")
    for name, size in axes.items():
        if not isinstance(size, numbers.Integral) or isinstance(size, (bool, np.bool_)) or size < 1:
            raise ValueError(f"mesh axis `{name}` must have a positive integer size, not {size!r}")
    axes = {name: int(size) for name, size in axes.items()}     # (a NumPy integer, e.g. from a shape, too)
    needed = math.prod(axes.values())
    pool = _device_pool(device, devices)
    shape = " x ".join(f"{n}={s}" for n, s in axes.items())
    if len(pool) < needed:
        hint = " (for virtual CPU devices: jax.config.update(\"jax_num_cpu_devices\", N) before JAX starts, or " \
               "XLA_FLAGS=--xla_force_host_platform_device_count=N)" if device == "cpu" and devices is None else ""
        raise ValueError(f"the mesh {shape} needs {needed} devices; {len(pool)} are available{hint}")
    if len(set(pool[:needed])) < needed:
        raise ValueError(f"the mesh {shape} names a device twice: each of its {needed} devices must be another")
    return jax.sharding.Mesh(np.array(pool[:needed]).reshape(tuple(axes.values())), tuple(axes))


def _device_pool(device: str, devices) -> list:
    """The devices a mesh takes its first ones from: `devices` in their order (a list, or an array such as
    another mesh's `.devices`, flattened), else the PJRT platform `device`'s; a platform this machine lacks is
    arrc's DeviceUnavailable (a RuntimeError, as a call on a missing device raises), not JAX's "Unknown
    backend"."""
    import jax
    import numpy as np
    if devices is None:
        try:
            return jax.devices(device)
        except RuntimeError as err:
            from arrc.runtime.pjrt import DeviceUnavailable
            raise DeviceUnavailable(device, str(err)) from None
    try:
        pool = list(np.asarray(devices if isinstance(devices, np.ndarray) else list(devices), dtype=object).ravel())
    except TypeError:
        pool = [devices]
    for d in pool:
        if not isinstance(d, jax.Device):
            raise TypeError(f"devices holds {d!r}, which is not a JAX device (e.g. devices=jax.devices()[:4])")
    return pool


def partition_spec(value):
    """A `jax.sharding.PartitionSpec` from one, from a tuple or list of mesh axis names (None, or "_", for a
    dimension that is not split; a tuple of names for one split over several axes), from a string
    `"data,_"`, or None (replicated)."""
    from jax.sharding import PartitionSpec
    if value is None:
        return PartitionSpec()
    if isinstance(value, PartitionSpec):
        return value
    if isinstance(value, str):
        value = [p.strip() for p in value.split(",")] if value.strip() else []
    if not isinstance(value, (tuple, list)):
        raise TypeError(f"a partition spec is a tuple of mesh axis names (or None), not {value!r}")
    for part in value:          # (before PartitionSpec, which reads a 0 or False as None: not split)
        if not _is_entry(part):
            raise TypeError(f"{part!r} is not a mesh axis name, None (not split) or a tuple of names (in {value!r})")
    return PartitionSpec(*(None if p in (None, "_", "") else p for p in value))


def _is_entry(part) -> bool:
    """Whether `part` is what a partition spec holds for one dimension: None, a mesh axis name, or names."""
    return part is None or isinstance(part, str) or \
        isinstance(part, (tuple, list)) and all(isinstance(a, str) for a in part)


def flags_results(fn) -> bool:
    """Whether the SPMD program of `fn` also returns whether a result may not be finite: the module's nan/inf
    guards at the results (`spmd_function`). Its other guards check inside the program (arrc/interop.py)."""
    return fn.module.guard_scope == "results" and bool(fn.module.guard_kinds & {"nan", "inf"})


def _spec(value, what: str, t, mesh, error: type):
    """`value` as the PartitionSpec (`partition_spec`) of `what`, of arr type `t`, checked against `mesh`: axes
    of the mesh, each named once, at most one entry per dimension."""
    try:
        spec = partition_spec(value)
    except TypeError as err:
        raise error(f"{what}: {err}") from None
    for part in spec:
        if not _is_entry(part):
            raise error(f"{what}, {spec}: {part!r} is not a mesh axis name, None (not split) or a tuple of names")
    axes = _axes_of(spec)
    for axis in axes:
        if axis not in mesh.shape:
            raise error(f"{what} names `{axis}`, which is not an axis of the mesh ({', '.join(mesh.axis_names)})")
        if axes.count(axis) > 1:
            raise error(f"{what}, {spec}, names mesh axis `{axis}` twice: an axis splits one dimension, once")
    if len(spec) > t.rank:
        raise error(f"{what}, {spec}, has {len(spec)} entries for {t}: one per dimension at most")
    return spec


class Sharded:
    """`fn.sharded(mesh, in_specs, out_specs)`: calls of arr Function `fn` as one SPMD program over `mesh`,
    argument i split as `in_specs[i]` (None: replicated), the results as `out_specs` (None: as XLA chooses,
    read back from the compiled program)."""

    def __init__(self, fn, mesh, in_specs=None, out_specs=None, error: type = TypeError):
        import jax
        from jax.sharding import NamedSharding
        self.fn, self.mesh, self.error = fn, mesh, error        # error: arrc.ArgumentError (arrc/api.py)
        ArgumentError = error
        if not isinstance(mesh, jax.sharding.Mesh):
            raise ArgumentError(f"{fn.name}.sharded: the mesh is a jax.sharding.Mesh (e.g. arrc.mesh(data=4)), "
                                f"not {mesh!r}")
        params = fn._sig.params
        if in_specs is not None and not isinstance(in_specs, (list, tuple)):
            raise ArgumentError(f"{fn.name}{fn._sig}: in_specs is a tuple or list of one spec per parameter, not "
                                f"{in_specs!r}" + (f" (one parameter's: in_specs=({in_specs!r},))"
                                                   if isinstance(in_specs, (str, jax.sharding.PartitionSpec)) else ""))
        specs = [None] * len(params) if in_specs is None else list(in_specs)
        if len(specs) != len(params):
            raise ArgumentError(f"{fn.name}{fn._sig}: in_specs has {len(specs)} entries for {len(params)} "
                                f"parameter(s)")
        self.in_specs = [_spec(s, f"in_specs of `{name}`", t, mesh, ArgumentError)
                         for s, (name, t, _) in zip(specs, params)]
        self.out_specs = outs = None
        if out_specs is not None:
            k = len(fn._sig.results)
            # one entry per result; for one result, its spec alone also does (`(None, "model")`)
            per_result = fn._sig.tuple_result or isinstance(out_specs, (list, tuple)) and len(out_specs) == 1
            listed = list(out_specs) if per_result and isinstance(out_specs, (list, tuple)) else [out_specs]
            if len(listed) != k:
                raise ArgumentError(f"{fn.name}{fn._sig}: out_specs has {len(listed)} entries for {k} result(s)")
            self.out_specs = [_spec(s, f"out_specs of result {i}", t, mesh, ArgumentError)
                              for i, (s, t) in enumerate(zip(listed, fn._sig.results))]
            outs = [NamedSharding(mesh, spec) for spec in self.out_specs]
            outs = tuple(outs) if fn._sig.tuple_result else outs[0]
            if flags_results(fn):                       # (and the results' flag, replicated)
                outs = (outs, NamedSharding(mesh, partition_spec(None)))
        self.in_shardings = tuple(NamedSharding(mesh, s) for s in self.in_specs)
        self._checked: set = set()
        run = (NamedSharding(mesh, partition_spec(None)),) if has_effects(fn, spmd=True) else ()
        self.jitted = jax.jit(spmd_function(fn), in_shardings=run + self.in_shardings, out_shardings=outs)

    def __repr__(self) -> str:
        return f"{self.fn.name}.sharded({', '.join(f'{n}={s}' for n, s in self.mesh.shape.items())})"

    def __call__(self, /, *args, **kwargs):
        self.fn._refuse_tracers(args, kwargs)       # (JAX's AttributeError from `_placed` otherwise)
        with _tracing(self.mesh):
            return checked_call(self.fn, self.jitted, self._placed(args, kwargs), self.mesh)

    def _placed(self, args, kwargs) -> list:
        """The arguments bound to the parameters as a call binds them (keywords placed, defaults filled), as
        jax.jit takes them for these shardings: a (nested) list as a NumPy array of its parameter's dtype, as a
        call of the function takes it (jax.jit would see a pytree of scalars); a jax.Array laid out otherwise
        (e.g. committed to one device) moved to its parameter's sharding. Each split dimension is checked
        against its axes first (`_check_divisible`)."""
        import jax
        import numpy as np
        args = [self.fn._python_argument(a, i) if type(a) in (list, tuple, bool, int, float) else a
                for i, a in enumerate(self.fn._positional(args, kwargs))]
        self._check_arguments(args)
        placed = []
        for a, s in zip(args, self.in_shardings):
            if not s.is_fully_addressable and getattr(a, "is_fully_addressable", True):
                host = np.asarray(host_value(a))     # several processes: a value of this process (a key: its words)
                a = jax.make_array_from_callback(     # is the whole array, the same on each process, of which
                    host.shape, s, lambda index, host=host: host[index])    # each places its devices' parts
            elif isinstance(a, jax.Array) and a.sharding != s or jax.process_count() > 1:   # (under
                a = jax.device_put(a, s)            # jax.distributed, jax.jit refuses a NumPy argument to split)
            placed.append(a)
        return placed

    def _check_arguments(self, args) -> None:
        """The arguments against the signature, as a call on one device checks them (their count, each dtype
        exactly: jax.jit alone would narrow an f64 array to f32, or drop an argument too many), and their
        split dimensions against the mesh (`_check_divisible`), once per kind of arguments."""
        kinds = _kinds(args)
        if kinds not in self._checked:
            sizes = self.fn._check_types(self.fn._types_of(tuple(args), {}), list(args))
            self._check_divisible(args, sizes)
            self._checked.add(kinds)

    def lower(self, /, *args, **kwargs):
        """JAX's Lowered of the SPMD program (`.as_text()`: the StableHLO with its shardings;
        `.compile().as_text()`: XLA's partitioned HLO, collectives included; with guards, its results are
        the function's and the flag)."""
        import numpy as np
        run = (np.int32(0),) if has_effects(self.fn, spmd=True) else ()
        with _tracing(self.mesh):
            return self.jitted.lower(*run, *self._placed(args, kwargs))

    def module_text(self, lowered) -> str:
        """The StableHLO of `lowered` (this program's, `lower`) with its locations, its `main` marked as a
        module of arrc's on one device is (compiler/abi.py), so that `arrc run` calls it as it calls those: by
        the arr function's name (abi.ENTRY, the `in f` of a report), the run id of its host callbacks hidden and
        filled in by each call (abi.RUN_ARG: print and assert report to the call that runs them), its parameters
        named as in the source (JAX names them after `as_jax`'s `*args`: `args[0]`, ...), each with the arr
        function's own location of it."""
        from jaxlib.mlir import ir
        from arrc.compiler import abi, emit
        from arrc.passes.rewrite import entry
        from arrc.runtime.mlir_reader import make_context
        with make_context():
            module = ir.Module.parse(lowered.as_text(debug_info=True))
            main = entry(module)
            main.attributes[abi.ENTRY] = ir.StringAttr.get(self.fn.name)
            params = list(main.regions[0].blocks[0].arguments)
            if has_effects(self.fn, spmd=True):         # (`lower`: the run id first)
                emit.set_int_attr(main, abi.RUN_ARG, 0)
                params = params[1:]
            for arg, loc in zip(params, _parameter_locations(module, self.fn)):
                arg.set_location(loc)
            return module.operation.get_asm(enable_debug_info=True)

    def _check_divisible(self, args, sizes: dict) -> None:
        """Each split dimension of the arguments, and of the results (their types with the shape variables'
        `sizes`), against the devices of its axes."""
        import numpy as np
        shapes = [(f"argument `{name}`", np.shape(arg)) for (name, _, _), arg in zip(self.fn._sig.params, args)]
        specs = self.in_specs
        if self.out_specs is not None:
            shapes += [(f"out_specs of result {i}, {spec}", t.subs(sizes).concrete_shape)
                       for i, (t, spec) in enumerate(zip(self.fn._sig.results, self.out_specs))]
            specs = specs + self.out_specs
        for (what, shape), spec in zip(shapes, specs):
            for dim, part in enumerate(spec):
                axes = _names(part)
                ways = math.prod(self.mesh.shape[a] for a in axes)
                if axes and dim < len(shape) and shape[dim] % ways:
                    raise self.error(f"{what}: dimension {dim} has size {shape[dim]}, which {' x '.join(axes)} "
                                     f"({ways} devices) does not divide")


def _parameter_locations(module, fn) -> list:
    """The locations of the parameters of arr Function `fn` in `module`, JAX's module of its SPMD program: those of
    the arguments of arr's function merged into it (the function other than `main` that abi.ENTRY names `fn`), its
    run id and io token left out; a name alone where there is none (a module JAX lowered without it)."""
    from jaxlib.mlir import ir
    from arrc.compiler import abi
    from arrc.passes.rewrite import attr_text, int_attr
    for op in module.body.operations:
        if op.operation.name == "func.func" and attr_text(op.attributes["sym_name"]) != "main" and \
                abi.ENTRY in op.attributes and attr_text(op.attributes[abi.ENTRY]) == fn.name:
            hidden = {int_attr(op, abi.RUN_ARG), int_attr(op, abi.IO_ARG)}
            return [a.location for i, a in enumerate(op.regions[0].blocks[0].arguments) if i not in hidden]
    return [ir.Location.name(name) for name, _, _ in fn._sig.params]


@contextlib.contextmanager
def _tracing(mesh):
    """How an SPMD call traces: in JAX's 64-bit mode (arr's types are exact, and with it off jax.jit would
    narrow an f64 argument to f32 before arr's function sees it), `mesh` JAX's abstract mesh (where a
    `shard(...)` of the function constrains its value, arrc/interop.py)."""
    import jax
    with jax.enable_x64(True), (jax.sharding.use_abstract_mesh(mesh.abstract_mesh) if mesh is not None
                                else contextlib.nullcontext()):
        yield


def _names(part) -> tuple:
    """The mesh axes one dimension's entry of a PartitionSpec splits it over (none for None)."""
    return (part,) if isinstance(part, str) else tuple(part or ())


def _axes_of(spec) -> list:
    return [a for part in spec for a in _names(part)]


_spmd: dict = {}


def _once(kind: str, fn, make):
    """`make()`, made once per arr Function `fn` and `kind` (kept with `fn`, so an id is never mistaken)."""
    with _lock:
        made = _spmd.get((kind, id(fn)))
        if made is None or made[0] is not fn:
            made = _spmd[(kind, id(fn))] = (fn, make())
        return made[1]


def spmd_function(fn):
    """What runs as the SPMD program: `fn` as JAX traces it (made once per Function; where it prints or
    asserts, the run id of its callbacks first), and with the module's nan/inf guards the flag `checked_call`
    reads, whether the sum of a float result is not finite (a sum is finite only where every element is, or
    overflows: then the origin build decides, `_fault_at_results`)."""
    def make():
        import jax.numpy as jnp
        traced = fn._as_jax_spmd()
        if not flags_results(fn):
            return traced
        floats = fn._sig.float_results

        def checked(*args):
            out = traced(*args)
            leaves = out if fn._sig.tuple_result else (out,)
            sums = [jnp.sum(leaves[i], dtype=jnp.promote_types(leaves[i].dtype, jnp.float32)) for i in floats]
            return out, ~jnp.all(jnp.stack([jnp.isfinite(s) for s in sums])) if sums else jnp.bool_(False)
        return checked
    return _once("as_jax", fn, make)


# XLA:CPU's collectives hang, then abort the process, when about a hundred programs with collectives are
# queued on the same devices without waiting (measured: 300 unwaited calls of a jitted all-reduce on 8 virtual
# CPU devices, jax 0.10.2; jax.jit itself too). An SPMD call waits for the oldest call's results once this many
# are in flight.
MAX_IN_FLIGHT = 8
_in_flight: collections.deque = collections.deque()


def checked_call(fn, jitted, args, mesh=None):
    """Run the SPMD program `jitted` of `fn`; with guards, where its flag says a result may not be finite, run
    its origin build (`_fault_at_results`): it raises the origin's report, with a note of the device that holds
    the first non-finite result element, or returns (a sum that overflowed). Where `fn` prints or asserts, its
    callbacks run on the program's first device (prints once) and the call waits for them; a fault they report
    is raised in every process (`_with_effects`); where its program has no callback for these arguments, no run
    is made (its run id `_no_run(mesh)`, `mesh` the arguments'). At most MAX_IN_FLIGHT calls run at once."""
    run = ()
    if _once("effects", fn, lambda: has_effects(fn, spmd=True)):
        if _calls_back(fn, jitted, args, mesh):
            return _with_effects(fn, jitted, args)
        run = (_no_run(mesh),)
    if not flags_results(fn):
        out = jitted(*run, *args)
        import jax
        leaves = jax.tree_util.tree_leaves(out)
        with _lock:
            if leaves:                  # (one result is ready when the call's program is done)
                _in_flight.append(leaves[0])
            oldest = _in_flight.popleft() if len(_in_flight) > MAX_IN_FLIGHT else None
        if oldest is not None and not oldest.is_deleted():     # (deleted or donated by the caller meanwhile)
            try:
                oldest.block_until_ready()
            except RuntimeError:
                pass
        return out
    out, suspect = jitted(*run, *args)
    if _read(suspect):      # (replicated: under jax.distributed every process comes here)
        _fault_at_results(fn, args, out)
    return out


def _calls_back(fn, jitted, args, mesh) -> bool:
    """Whether the SPMD program `jitted` of `fn` (which takes a run id first) over `mesh` has host callbacks for
    arguments like `args`: JAX's effect on its trace says so (arrc/interop.py sets it only there, from the
    program lowered for the CPU: on another platform, or without a mesh, taken as yes). The guards a module
    checks inside the program may find nothing to check in it (`all` on a chain of multiplications): a call
    then neither makes a run nor waits for one. Traced once per kind of arguments."""
    if mesh is None or mesh.devices.flat[0].platform != "cpu":
        return True
    known = _once("callbacks", fn, dict)
    kinds = _kinds(args)
    found = known.get(kinds)
    if found is None:
        import numpy as np
        found = known[kinds] = bool(jitted.trace(np.int32(0), *args).jaxpr.effects)
    return found


def _kinds(args) -> tuple:
    """What a call's handling of its arguments depends on: each one's type, dtype and shape."""
    return tuple((type(a), getattr(a, "dtype", None), getattr(a, "shape", None)) for a in args)


_no_runs: dict = {}


def _no_run(mesh):
    """The run id of a call whose program has no host callback to report to it, placed on every device of
    `mesh` once (a Python 0 would be sent to each of them at every call)."""
    with _lock:
        made = _no_runs.get(mesh)
        if made is None:
            import jax
            import numpy as np
            from jax.sharding import NamedSharding
            made = _no_runs[mesh] = jax.make_array_from_callback(
                (), NamedSharding(mesh, partition_spec(None)), lambda index: np.int32(0))
        return made


def _read(flag) -> bool:
    """The value of the flag an SPMD program returns, waited for asleep: not polled, as `pjrt.read_when_ready`
    does for a call on one device, which holds a core that the devices' threads need (with 8 virtual CPU
    devices on 2 cores, `nan,inf` on 64K elements: 1.71x unguarded polling, 1.48x asleep)."""
    import numpy as np
    return bool(np.asarray(flag))


def _with_effects(fn, jitted, args):
    """`checked_call` of a function with host callbacks (print, assert, guards inside the program): the run id
    they report to first. A fault they saw is raised as they reported it (the report of a call on one device,
    with a note of where the call ran), in every process (`_raise_everywhere`)."""
    import jax
    import numpy as np
    from arrc.runtime import effects
    run_id, state = effects.begin()
    try:
        out = jitted(np.int32(run_id), *args)
        jax.block_until_ready(out)
    finally:
        effects.end(run_id)
    out, suspect = out if flags_results(fn) else (out, None)
    reported = state.failure is not None or bool(state.events)
    err, failed = _everywhere((_reported(fn, state, out) if reported else None, state.failure is not None),
                              reported, out)
    if suspect is not None and not failed and _read(suspect):
        _fault_at_results(fn, args, out)    # (as on one device, `raise_faults`: where a result is not finite,
    if err is not None:                     # the origin build's first fault, a bounds one in an earlier lane too)
        raise err
    return out


def _reported(fn, state, out):
    """The first fault the callbacks of an SPMD call reported (a failed assert; a guard's report, as a call on
    one device makes it, with a note of where the call ran), or None."""
    from arrc.runtime.guards import raise_faults
    from arrc.runtime.reports import AssertionFailed, GuardError, LoopBoundExceeded
    try:
        raise_faults(state, fn.module.guard_scope, None, fn.shown_name, fn.sources)
    except GuardError as err:
        return err if isinstance(err, (AssertionFailed, LoopBoundExceeded)) else \
            err.noted(_ran_on(_devices(out if fn._sig.tuple_result else (out,))))
    return None


def _ran_on(devices: int) -> str:
    return f"the call ran as one program on {devices} devices"


def _devices(leaves) -> int:
    return len(set().union(*(r.sharding.device_set for r in leaves)))


def _raise_everywhere(err, here: bool, out) -> None:
    """Raise `err` (an arrc.GuardError, or None: nothing) in every process that ran the call of results `out`,
    the same one (`_everywhere`)."""
    err = _everywhere(err, here, out)
    if err is not None:
        raise err


def _everywhere(value, here: bool, out):
    """`value` (picklable: a fault's report, ...) of the process where `here` (whose device ran the program's
    host callbacks, which saw the fault), in every process that ran the call of results `out`: where it ran
    over other processes' devices too (jax.distributed), sent to the others through JAX's collectives
    (pickled; `multihost_utils`), so that each does the same and none is left waiting in a collective. Where
    no process saw one, each has its own `value` (made from replicated values, the same everywhere)."""
    import jax
    leaves = jax.tree_util.tree_leaves(out)
    if any(not getattr(r, "is_fully_addressable", True) for r in leaves):
        import pickle
        import numpy as np
        from jax.experimental import multihost_utils
        seen = np.asarray(multihost_utils.process_allgather(np.int32(here)))
        if seen.any():
            source = jax.process_index() == int(np.argmax(seen))
            data = np.frombuffer(pickle.dumps(value), np.uint8) if source else np.zeros(0, np.uint8)
            size = int(multihost_utils.broadcast_one_to_all(np.int32(data.size), is_source=source))
            data = data if source else np.zeros(size, np.uint8)
            value = pickle.loads(np.asarray(multihost_utils.broadcast_one_to_all(data, is_source=source)).tobytes())
    return value


def _fault_at_results(fn, args, out) -> None:
    """Where the flag of an SPMD call says a float result's sum is not finite: the fault's report, from the
    module's origin build run as an SPMD program on the arguments as they are laid out (nothing gathered;
    `origin_function`), with a note of the device holding the first non-finite result element, raised in every
    process; nothing where no element is one its guards check for (a sum that overflowed)."""
    import jax
    import numpy as np
    from arrc.runtime import effects
    from arrc.runtime.guards import raise_faults
    from arrc.runtime.reports import GuardError
    run_id, origins = effects.begin(quiet=True)
    try:
        bad, first = jax.block_until_ready(origin_function(fn)(np.int32(run_id), *args))
    finally:
        effects.end(run_id)
    leaves = out if fn._sig.tuple_result else (out,)
    floats = fn._sig.float_results
    state = effects.RunState(quiet=True)
    state.bad_results = {i for i, b in zip(floats, bad) if bool(np.asarray(b))}
    state.fault = bool(state.bad_results)
    err = None
    try:
        raise_faults(state, fn.module.guard_scope, lambda: origins, fn.shown_name, fn.sources)
    except GuardError as made:
        k = min(state.bad_results)
        index = tuple(int(i) for i in np.unravel_index(int(np.asarray(first[floats.index(k)])), leaves[k].shape))
        err = made.noted(_held_by(leaves, (k, index)))
    _raise_everywhere(err, bool(origins.events), out)


def origin_function(fn):
    """The origin build of `fn` as an SPMD program (made once per Function): the run id of its callbacks first;
    its results, for each float result, whether an element is one the module's guards check for (NaN,
    infinity) and the flat index of the first."""
    def make():
        import jax
        import jax.numpy as jnp
        traced = fn._as_jax_spmd(origins=True)
        floats = fn._sig.float_results
        kinds = fn.module.guard_kinds & {"nan", "inf"}

        def checked(x):
            return jnp.isnan(x) if kinds == {"nan"} else jnp.isinf(x) if kinds == {"inf"} else ~jnp.isfinite(x)

        def run(run_id, *args):
            out = traced(run_id, *args)
            leaves = out if fn._sig.tuple_result else (out,)
            found = [checked(leaves[i]).ravel() for i in floats]
            return [jnp.any(f) for f in found], [jnp.argmax(f) for f in found]
        return jax.jit(run)
    return _once("origins", fn, make)


def _held_by(leaves, found: tuple) -> str:
    """Which device holds the first non-finite element of the first result that has one, `found`: (result,
    index)."""
    devices = _devices(leaves)
    ran = _ran_on(devices)
    k, index = found
    r = leaves[k]
    holders = sorted((d for d, where in r.sharding.devices_indices_map(r.shape).items()
                      if all(s.start is None or s.start <= i < s.stop for s, i in zip(where, index))),
                     key=lambda d: d.id)
    if len(holders) == devices:
        return f"{ran}; result {k}, where the fault shows, is on every device"
    processes = {d.process_index for d in r.sharding.device_set}
    names = [f"{d.id} of process {d.process_index}" if len(processes) > 1 else str(d.id) for d in holders]
    who = f"device {names[0]}" if len(names) == 1 else f"devices {', '.join(names)}"
    return f"{ran}; the first non-finite element of result {k}, at index {list(index)}, is held by {who}"


def host_value(x):
    """A jax.Array `x` as a NumPy array on this host (anything else as it is): one laid over other processes'
    devices too is gathered from all of them (a collective: every process calls it,
    `jax.experimental.multihost_utils`)."""
    import numpy as np
    import jax
    from arrc.compiler.types import typed_key_data
    from arrc.runtime.pjrt import as_numpy
    if not isinstance(x, jax.Array):
        return x
    words = typed_key_data(x)               # (a key's words: what a call takes for a key too)
    x = x if words is None else words
    if getattr(x, "is_fully_addressable", True):
        return as_numpy(x)
    from jax.experimental import multihost_utils
    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


def spans_devices(args) -> bool:
    """Whether an argument is a jax.Array laid over more than one device (a call then runs SPMD)."""
    for a in args:
        sharding = getattr(a, "sharding", None)
        if sharding is not None and type(a).__module__.startswith("jax") and len(sharding.device_set) > 1:
            return True
    return False


def spmd_call(fn, args, error: type = TypeError):
    """A call of `fn` on arguments of which some are sharded jax.Arrays: one SPMD program, partitioned as
    they are (jax.jit takes their shardings), the results sharded as XLA chose. Arguments placed over other
    devices, or over the same ones in another order, are an `error` (arrc.ArgumentError; `_check_devices`)."""
    import jax
    _check_devices(fn, args, error)
    meshes = [a.sharding.mesh for a in args if isinstance(getattr(a, "sharding", None), jax.sharding.NamedSharding)]
    mesh = meshes[0] if meshes else None
    with _tracing(mesh):
        return checked_call(fn, _once("jit", fn, lambda: jax.jit(spmd_function(fn))), args, mesh)


def _check_devices(fn, args, error: type) -> None:
    """The jax.Arrays among `args` (in the order of `fn`'s parameters) that are committed to their devices
    (placed with `jax.device_put(x, sharding)`, or results of such) all over the same devices in the same
    order, as one SPMD program runs: else an `error` naming the first parameter and the first whose devices
    differ. (jax.jit compares them only by number under the abstract mesh a call traces in, `_tracing`: one
    on the same devices in another order reached XLA, which crashed the process, SIGSEGV.)"""
    first = None
    for (name, _, _), a in zip(fn._sig.params, args):
        sharding = getattr(a, "sharding", None)
        if sharding is None or not getattr(a, "committed", False):
            continue
        devices = tuple(sharding._device_assignment)     # (what jax.jit compares: a mesh's, flattened)
        if first is None:
            first = name, devices
            continue
        if devices != first[1]:
            order = " (the same devices in another order)" if set(devices) == set(first[1]) else ""
            raise error(f"{fn.name}{fn._sig}: argument `{first[0]}` is on devices {_ids(first[1])} and `{name}` "
                        f"on devices {_ids(devices)}{order}; a call runs as one program over one mesh, so its "
                        f"arguments must be placed over the same devices in the same order (e.g. "
                        f"jax.device_put({name}, {first[0]}.sharding))")


def _ids(devices, shown: int = 8) -> str:
    """The ids of `devices`, in their order; the first `shown` of more."""
    ids = [str(d.id) for d in devices]
    return "[" + ", ".join(ids) + "]" if len(ids) <= shown else \
        "[" + ", ".join(ids[:shown]) + f", ...] ({len(ids)} in all)"
