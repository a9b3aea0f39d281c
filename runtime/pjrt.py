"""PJRT execution: one backend per platform; executables compiled once, kept on disk (compiler/cache.py),
and called through a short path (argument transfer with `batched_device_put`, results through C++
result handlers), so a call costs about what `jax.jit`'s C++ dispatch costs."""
from __future__ import annotations

import functools
import io
import math
import os
import struct
import sys
import threading
import time

import numpy as np

from ..compiler import cache as _cache
from ..compiler.signals import sigint_deferred

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")   # silence PJRT start-up INFO lines
_lock = threading.Lock()
_backends: dict = {}
_jax_lock = threading.RLock()       # importing jax and binding to it (`_bind_jax`) happen in one thread at a time


def backend(platform: str = "cpu"):
    if platform not in _backends:
        _import_jax()           # (before `_lock`: `_bind_jax` holds `_jax_lock` when it takes `_lock`)
    with _lock:
        if platform not in _backends:
            try:        # what jax.extend.backend.get_backend calls; `import jax.extend` itself costs ~25 ms
                from jax._src.xla_bridge import get_backend
            except ImportError:                 # pragma: no cover (another jax layout)
                import jax.extend
                get_backend = jax.extend.backend.get_backend
            try:
                _backends[platform] = get_backend(platform)
            except RuntimeError as err:
                raise DeviceUnavailable(platform, str(err)) from None
        return _backends[platform]


class DeviceUnavailable(RuntimeError):
    def __init__(self, platform: str, detail: str):
        super().__init__(f"no {platform} device is available ({detail.splitlines()[0] if detail else ''})")
        self.platform = platform


def module_bytes(module) -> bytes:
    """The bytes that identify a module: MLIR bytecode (locations kept) for an `ir.Module`, else its text/bytes."""
    if isinstance(module, bytes):
        return module
    if isinstance(module, str):
        return module.encode()
    buf = io.BytesIO()
    with module.context:
        module.operation.write_bytecode(buf)
    return buf.getvalue()


def _for_xla(module, data: bytes | None = None):
    """What XLA compiles: a copy of an `ir.Module` (parsed from `data`, its `module_bytes` when the caller
    has them) with file positions for locations (compiler/locations.py `file_positions_only`) and without
    arrc's attributes (passes/rewrite.py `drop_own_attributes`); text and bytes as given."""
    if isinstance(module, (bytes, str)):
        return module
    from jaxlib.mlir import ir

    from ..compiler.locations import file_positions_only
    from ..passes.rewrite import drop_own_attributes
    with module.context:
        copy = ir.Module.parse(data if data is not None else module_bytes(module))
        file_positions_only(copy.operation)
        drop_own_attributes(copy)
        return copy


class Executable:
    """A compiled StableHLO module bound to one device.

    `cache`: a `compiler.cache.DiskCache`, None for the process default (`ARRC_CACHE_DIR`, off with
    `ARRC_NO_CACHE=1`), or False to always compile. `key_extra`: strings that must also match for a cached
    executable to be used. Host callbacks (print, assert, guard reports) are not part of a serialized
    executable: they are attached again, by index, when it is loaded.
    After construction `cache_hit` says whether it was loaded from disk and `compile_s` how long compiling
    (or loading) took.
    """

    def __init__(self, module, platform: str = "cpu", host_callbacks: list | None = None, *,
                 cache=None, key_extra: tuple = ()):
        if _batched_device_put is None:
            _bind_jax()
        from jax._src.lib import xla_client as xc
        from jax.sharding import SingleDeviceSharding
        be = backend(platform)
        self.platform = platform
        self.device = be.local_devices()[0]
        self.sharding = SingleDeviceSharding(self.device)
        self.host_callbacks = host_callbacks or []         # kept alive as long as the executable
        self._devices = [self.device]
        self._handlers = None               # result handlers, made by the first call
        self._out_avals = None
        start = time.perf_counter()
        self.loaded, self.cache_hit = self._compile_or_load(be, xc, module, cache, key_extra)
        self.compile_s = time.perf_counter() - start
        self._cpp = dispatcher("main", self._miss)

    @functools.cached_property
    def runs_inline(self) -> bool:
        """Whether XLA:CPU runs it on the calling thread (its cost analysis counts fewer than INLINE_FLOPS; a
        `while` counts one iteration), as it does when its arguments are ready: its results are then ready
        when a call returns (one on the result of a longer program still running is queued instead)."""
        if self.platform != "cpu":
            return False
        try:
            flops = self.loaded.cost_analysis().get("flops")
        except Exception:                   # (no cost analysis: taken as run on XLA's threads)
            return False
        return flops is not None and flops < INLINE_FLOPS

    def _compile_or_load(self, be, xc, module, cache, key_extra):
        devices = xc.DeviceList((self.device,))
        options = xc.CompileOptions()
        kwargs = {"host_callbacks": self.host_callbacks} if self.host_callbacks else {}
        store = _cache.default_cache() if cache is None else (cache or None)
        if store is None:
            return be.compile_and_load(_for_xla(module), devices, options, **kwargs), False
        data = module_bytes(module)
        key = store.key(data, options.SerializeAsString(),
                        f"{be.platform}|{be.platform_version}|{self.device.device_kind}",
                        f"callbacks={len(self.host_callbacks)}", *key_extra)
        blob = store.get(key)
        if blob is not None:
            try:
                loaded = be.deserialize_executable(blob, devices, options, **kwargs)
                _cache._count("hits")
                return loaded, True
            except Exception:                   # an entry PJRT cannot load: recompile and replace it
                _cache._count("corrupt")
                store.discard(key)
        _cache._count("misses")
        loaded = be.compile_and_load(_for_xla(module, data), devices, options, **kwargs)
        try:
            if store.put(key, loaded.serialize()):
                _cache._count("writes")
        except Exception:                       # an executable that cannot be serialized is still usable
            _cache._count("errors")
        return loaded, False

    # ---- calling -------------------------------------------------------------------------------------

    def _put_numpy(self, v):
        """One host array -> device, copied (`_transfer`); 64-bit dtypes stay 64-bit, and an array in
        the other byte order (e.g. `'>f4'` read from a file) is transferred as the same numbers in this
        machine's order, not as its raw bytes."""
        if not v.dtype.isnative:
            v = v.astype(v.dtype.newbyteorder("="))
        return _transfer(v, self.sharding, self._devices)

    def put(self, values: list) -> list:
        """Transfer arguments to this executable's device: NumPy arrays (and scalars) or jax arrays."""
        import jax
        out = []
        for v in values:
            if isinstance(v, jax.Array):        # (one sharded over several devices is gathered onto this one)
                out.append(v if v.devices() == {self.device} else jax.device_put(v, self.device))
            else:
                out.append(self._put_numpy(np.asarray(v)))
        return out

    def __call__(self, values: list) -> list:
        """Run on `values` (NumPy or jax arrays of the module's parameter types); returns jax arrays.

        Calls go through jaxlib's C++ dispatcher (as `jax.jit` calls do) once a first call has shown
        the argument types; the Python path below is the fallback and the dispatcher's cache miss."""
        cpp = self._cpp
        if cpp is not None:
            return cpp(*values)
        return self.call_python(values)

    def call_python(self, values: list) -> list:
        """The Python path: transfer NumPy arguments, execute, wrap the results."""
        handlers = self._handlers
        if handlers is None:
            return self._first_call(values)
        args = []
        for v in values:
            t = type(v)
            if t is np.ndarray:
                args.append(self._put_numpy(v))
            elif t is _ArrayImpl and v.sharding is self.sharding:   # e.g. a result of an earlier call
                args.append(v)
            else:
                args.extend(self.put([v]))
        return self.loaded.execute_sharded(args).consume_with_handlers(handlers)

    def _first_call(self, values: list) -> list:
        """The general path, which also builds the result handlers the fast path uses from then on."""
        from jax._src.lib import xla_client as xc
        args = self.put(values)
        results = [r[0] for r in self.loaded.execute_sharded(args).disassemble_into_single_device_arrays()]
        self._out_avals = [r.aval for r in results]
        self._handlers = [xc.array_result_handler(a, self.sharding, committed=True, _skip_checks=True)
                          for a in self._out_avals]
        return results

    def _miss(self, *values):
        results = self.call_python(list(values))
        return results, self.fastpath(values, "list"), False

    def fastpath(self, values, results: str = "list"):
        """What jaxlib's C++ dispatcher needs to run this executable itself on arguments like `values`,
        returning the results as a `"list"`, a `"tuple"` or the `"single"` result; None where only the
        Python path is right: before a first call, for an executable with host callbacks (print, assert,
        guards: their callers pass a run id and read its state), for an argument that is not a plain
        NumPy array or scalar or a jax array on this device (the caller converts a Python scalar with
        `transferred_scalar`), for a 64-bit NumPy array or scalar (the C++ transfer would narrow it to 32
        bits unless jax_enable_x64 is on) or for an array in the other byte order (it would copy the
        bytes as they are). The dispatcher's key tells such arrays apart from the ones an entry
        was made for (see `_numpy_node`), so they never reach that entry."""
        if self._handlers is None or _fastpath_type is None or self.host_callbacks:
            return None
        for v in values:
            t = type(v)
            if t is np.ndarray or t in NUMPY_SCALAR_TYPES:  # (a Python scalar is passed as
                dt = v.dtype                                 # `transferred_scalar` makes it)
                if not dt.isnative or (dt.itemsize == 8 and dt.kind in "iuf" and
                                       (_cpu_put is None or self.sharding != _cpu_sharding)):
                    return None     # (on the CPU device, `_numpy_node` transfers it with its 64 bits)
            elif t is not _ArrayImpl and t is not _KeyArray or v.sharding != self.sharding:
                return None     # (a typed key: jaxlib passes its u32 words, passes/key_words.py)
        n_in, n_out = len(values), len(self._out_avals)
        if results == "single" and n_out != 1:
            return None
        shardings_in, shardings_out = [self.sharding] * n_in, [self.sharding] * n_out
        return _fastpath_type(self.loaded, _result_tree(results, n_out), shardings_in, shardings_out,
                              self._out_avals, [True] * n_out, [True] * n_in, [None] * n_in, [])


def dispatcher(name: str, miss):
    """A C++ dispatcher (jaxlib's `pjit` function object, as `jax.jit` builds): called with the
    arguments, it looks their types up in its own cache and runs the executable found there without
    entering Python; otherwise it calls `miss(*args, **kwargs)`, which returns `(results,
    Executable.fastpath(...) or None, False)`. Its key for a NumPy array is the array's exact dtype
    (`_numpy_node`). None when this jaxlib has no such dispatcher (callers then stay in Python) or when
    `ARRC_DISPATCH=python`."""
    if _batched_device_put is None:
        _bind_jax()
    if _fastpath_type is None or os.environ.get("ARRC_DISPATCH") == "python":
        return None
    from jax._src.interpreters import pxla
    from jax._src.lib import _jax

    def python_call(*args, **kwargs):   # what jaxlib calls instead when jit is disabled (jax.disable_jit)
        return miss(*args, **kwargs)[0]
    return _jax.pjit(name, python_call, miss, [], [], pxla.JitGlobalCppCacheKeys(), _registry, pxla.cc_shard_arg)


class _NumpyArgument(np.ndarray):
    """A NumPy argument as the dispatcher transfers it: a view of the caller's array (same data and
    strides), of a type the pytree registry leaves alone and jaxlib transfers as the ndarray it is."""
    __slots__ = ()


def _numpy_node(value: np.ndarray):
    """A NumPy argument as a one-leaf pytree node whose auxiliary data is its exact dtype.

    jaxlib keys a NumPy array by its dtype without byte order and, with jax_enable_x64 off, with 64 bits
    folded into 32: f32, f64, '>f4' and '>f8' arrays of one shape get one key, so an entry made for
    f32 would run on the others and its C++ transfer would narrow them or copy their bytes as they are.
    The key of an argument includes its tree structure, and so, through this node, its exact dtype
    (a jax array's key has its exact dtype already). Cost: this Python call for each NumPy argument of
    a call (~1-2 us on a 2-core machine); jax-array arguments still cost nothing."""
    dt = value.dtype
    if dt in _WIDE and _cpu_put is not None and not _x64.value:
        return (_cpu_put(value),), dt        # 64 bits kept: see `_put_on_cpu`
    # a copy: jaxlib's transfer shares the memory of an array on the CPU device (`_transfer`)
    return (value.copy().view(_NumpyArgument),), dt    # (with jax_enable_x64 on, jaxlib's transfer keeps them)


_WIDE = {np.dtype(c) for c in "dqQlL"}      # native f64, i64, u64 (a set: the cheapest test, ~0.1 us)


def _put_on_cpu(value: np.ndarray):
    """A 64-bit NumPy argument as a jax array on the CPU device, transferred with its 64 bits (jaxlib's
    C++ transfer would narrow it to 32 unless jax_enable_x64 is on): the dispatcher then runs an
    executable on that device with it, as with any jax array argument (~3-5 us, as `_put_numpy`)."""
    return _transfer(value, _cpu_sharding, _cpu_devices)


def _transfer(value: np.ndarray, sharding, devices: list):
    """A native-order NumPy array to a device, copied, 64-bit dtypes kept 64-bit. Copied during the call even on
    the CPU device, where jaxlib would share the array's memory (its ZERO_COPY, jax-ml/jax#37830): the program
    runs after the call returns, and the caller may change the array meanwhile (`x[:] = 0` after `f(x)` changed
    the result of `f(x)`)."""
    key = (value.shape, value.dtype)
    aval = _avals.get(key)
    if aval is None:
        from jax._src.core import ShapedArray
        aval = _avals[key] = ShapedArray(value.shape, value.dtype)
    return _batched_device_put(aval, sharding, [value], devices, True, False, _COPY_DURING_CALL, enable_x64=True)


def _numpy_array(dtype, children):      # the node's inverse; jaxlib does not call it for arguments
    return np.asarray(children[0])


_SCALAR_DTYPES = {bool: np.dtype(np.bool_), int: np.dtype(np.int32), float: np.dtype(np.float32)}


def scalar_argument(value) -> np.ndarray | None:
    """A Python bool, int or float as a call takes it where its parameter has the scalar's default dtype: a
    0-d bool, int32 or float32 array; None for an int outside int32's range."""
    dtype = _SCALAR_DTYPES[type(value)]
    if dtype.kind == "i" and not -2 ** 31 <= value < 2 ** 31:
        return None
    if dtype.kind == "f" and abs(value) > _F32_MAX:     # it may round to inf, as jnp.asarray makes it: without
        with np.errstate(over="ignore"):                # NumPy's warning (not entered for every scalar: ~1 us)
            return np.asarray(value, dtype)
    return np.asarray(value, dtype)


def transferred_scalar(value) -> np.ndarray | None:
    """A Python scalar as the dispatcher transfers it: an int as `_scalar_node` makes it; a bool and a float
    as jaxlib does itself, a bool as bool, a float as float32, or float64 with jax_enable_x64 on (its key
    says which: the flag is part of it)."""
    if type(value) is float and _x64.value:
        return np.asarray(value, np.float64)
    return scalar_argument(value)


_F32_MAX = float(np.finfo(np.float32).max)


def _scalar_node(value):
    """A Python int argument as a node whose leaf is `scalar_argument(value)`: jaxlib would transfer it as
    32 or 64 bits by jax_enable_x64, and raise its own OverflowError for one out of range. Its key is the
    type (an int out of int32's range has no leaf: a key no entry has, so its call takes the Python path,
    which says why it does not fit). Cost: ~1 us an int, as `_numpy_node`; bools and floats, which jaxlib
    transfers exactly, are left to it (`transferred_scalar`)."""
    leaf = scalar_argument(value)
    if leaf is None:
        return (), "int out of int32's range"
    return (leaf.view(_NumpyArgument),), int


def _scalar(kind, children):            # the node's inverse; jaxlib does not call it for arguments
    return children[0].item() if children else None


def _numpy_scalar_node(value: np.generic):
    """A NumPy scalar argument as a node keyed by its exact dtype, as `_numpy_node` does for arrays."""
    return _numpy_node(np.asarray(value))


NUMPY_SCALAR_TYPES = tuple(dict.fromkeys(np.dtype(c).type for c in "?bhilqBHILQefd"))   # (NumPy 2: int64 is `l`, not `q`)


_trees: dict = {}


def _result_tree(kind: str, n: int):
    tree = _trees.get((kind, n))
    if tree is None:
        from jax._src import tree_util
        shape = {"list": [0] * n, "tuple": (0,) * n, "single": 0}[kind]
        tree = _trees[(kind, n)] = tree_util.tree_structure(shape)
    return tree


def _import_jax() -> None:
    """jax imported whole before the runtime uses it: a Ctrl-C meanwhile is raised once it is (signals.py).
    Under `_jax_lock`: a thread that finds jax in `sys.modules` while another still imports it waits for that
    (threads making their first calls at once raised "cannot import name ... from partially initialized
    module" from jax's own modules)."""
    with _jax_lock:
        if "jax" not in sys.modules:
            with sigint_deferred():
                import jax  # noqa: F401


def _bind_jax() -> None:
    """Module globals for the call path, set once jax is imported (so importing this module stays cheap);
    `_batched_device_put` last, which callers test to know whether it is done."""
    with _jax_lock:
        if _batched_device_put is None:
            _bind_jax_once()


def _bind_jax_once() -> None:
    global _ArrayImpl, _KeyArray, _batched_device_put, _fastpath_type, _registry, _x64
    _import_jax()
    from jax._src.array import ArrayImpl
    from jax._src.config import enable_x64 as _x64
    from jax._src.lib import xla_client as xc
    _ArrayImpl = ArrayImpl
    try:
        from jax._src.interpreters import pxla
        from jax._src.lib import _jax
        from jax._src.random import prng
        _KeyArray = prng.PRNGKeyArray
        _jax.pjit, pxla.JitGlobalCppCacheKeys, pxla.cc_shard_arg  # noqa: B018 (what dispatcher() uses)
        registry = _jax.pytree.PyTreeRegistry(enable_none=True, enable_tuple=True, enable_namedtuple=True,
                                              enable_list=True, enable_dict=True)
        registry.register_node(np.ndarray, _numpy_node, _numpy_array)
        # a typed key as jax.jit's dispatch flattens it: its u32 words, keyed by its PRNG
        registry.register_node(_KeyArray, prng.prngkeyarray_flatten, prng.prngkeyarray_unflatten)
        registry.register_node(int, _scalar_node, _scalar)
        for scalar in NUMPY_SCALAR_TYPES:
            registry.register_node(scalar, _numpy_scalar_node, _scalar)
        _fastpath_type, _registry = pxla.MeshExecutableFastpathData, registry
    except (ImportError, AttributeError, TypeError):
        _fastpath_type = None
    try:
        global _cpu_put, _cpu_sharding, _cpu_devices
        from jax.sharding import SingleDeviceSharding
        _cpu_devices = [backend("cpu").local_devices()[0]]
        _cpu_sharding = SingleDeviceSharding(_cpu_devices[0])
        _cpu_put = _put_on_cpu
    except Exception:                       # no CPU backend: 64-bit NumPy arguments take the Python path
        _cpu_put = None
    global _COPY_DURING_CALL
    _COPY_DURING_CALL = xc.HostBufferSemantics.IMMUTABLE_ONLY_DURING_CALL
    _batched_device_put = xc.batched_device_put


_ArrayImpl: type = type(None)           # set by _bind_jax when the first Executable is made
_KeyArray: type = type(None)            # jax's typed key arrays, set with it
_batched_device_put = None
_COPY_DURING_CALL = None                # jaxlib's HostBufferSemantics that copies an array during the transfer
_fastpath_type = None
_registry = None                        # the dispatchers' pytree registry (`_numpy_node`)
_x64 = None                             # jax's jax_enable_x64 flag
_cpu_put = None                         # `_put_on_cpu` once jax is bound and has a CPU device
_cpu_sharding = None
_cpu_devices: list = []
_avals: dict = {}                       # (shape, dtype) -> ShapedArray, for `_transfer`


def as_numpy(x) -> np.ndarray:
    """A result as a NumPy array, waited for first: where XLA could not allocate it, the wait raises
    RESOURCE_EXHAUSTED, and NumPy's read of its buffer would abort the process (jaxlib's check)."""
    if type(x) is _ArrayImpl:
        x.block_until_ready()
    return np.asarray(x)


POLL_S = 200e-6     # how long `read_when_ready` polls before it sleeps
INLINE_FLOPS = 1000     # XLA:CPU runs an executable that counts fewer flops on the calling thread


def read_when_ready(x, index: int = 0, poll: bool = True):
    """Element `index` (flat) of a small device result that a call reads before it returns (a PAST value, a
    guard's flag, a scalar result). With `poll` it polls for up to POLL_S, then sleeps in
    `block_until_ready`: on XLA:CPU a sleeping caller wakes ~35 us after a result is ready, which a call of
    ~100 us would pay each time (measured: the taped power iteration's call 99 us blocking, 62 us polling).
    Polling holds the GIL, so this is not for an executable with host callbacks (they need the GIL to run);
    nor needed for one that runs inline (`Executable.runs_inline`), whose results are ready (where one is
    not, the read waits asleep: only slower). On the CPU the element is read through the array's buffer
    protocol (which waits for it too): a NumPy array of a fresh result costs ~8-13 us more (a 20-step
    loop's gradient, reading its PAST value: 68 us a call, now 57 us)."""
    if type(x) is _ArrayImpl:
        if poll:
            _poll_until_ready(x)
        unpack = _UNPACK.get(x.dtype)
        if unpack is not None:
            try:
                return unpack.unpack_from(x, index * unpack.size)[0]
            except (BufferError, TypeError, ValueError):      # (no buffer protocol: off the CPU)
                pass
    return np.asarray(x).flat[index]        # (a miss returns NumPy's)


def _poll_until_ready(x) -> None:
    """Wait for `x` polling for up to POLL_S, then asleep (`read_when_ready`)."""
    if not x.is_ready():
        deadline = time.perf_counter() + POLL_S
        while not x.is_ready():
            os.sched_yield()            # (XLA's threads take this core when they need it)
            if time.perf_counter() > deadline:
                x.block_until_ready()
                break


HOST_CHECK_ELEMENTS = 131072    # float results a guarded call tests on the CPU host, in all, at most


def finite_on_host(arrays: list, poll: bool = True) -> bool | None:
    """Whether every element of `arrays` (a call's float results on the CPU) is finite, tested on the host,
    each read in place through its buffer protocol. Cheaper than the results filter's dispatch up to
    HOST_CHECK_ELEMENTS elements in all (~3 us for 4,096 f32 against ~9 us); None past that, or for an
    array the host cannot read in place: the caller runs the filter."""
    left = HOST_CHECK_ELEMENTS
    for a in arrays:
        if type(a) is not _ArrayImpl:
            return None
        if poll:
            _poll_until_ready(a)
        try:        # (the order of the elements in the buffer does not matter: any layout will do)
            elements = np.frombuffer(a, a.dtype)
        except BufferError:         # (bf16, which jaxlib does not export, or an array off the CPU)
            return None
        left -= elements.size
        if left < 0:
            return None
        if not np.isfinite(elements).all():
            return False
    return True


_UNPACK = {np.dtype(t): struct.Struct("=" + c) for t, c in
           ((np.bool_, "?"), (np.int32, "i"), (np.int64, "q"), (np.float16, "e"), (np.float32, "f"), (np.float64, "d"))}
