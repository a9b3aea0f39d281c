"""A compiled StableHLO module and its calling convention (hidden run id / io arguments, extra results),
read from attributes of its `main` (see passes/rewrite.py), so arrc's modules and guarded modules from
elsewhere are called the same way."""
from __future__ import annotations

import atexit
import threading

import numpy as np
from jaxlib.mlir import ir

from ..compiler import abi
from ..compiler.effects import BoundSite, PrintSite
from ..passes.guards import results_check, results_filter
from ..passes.rewrite import attr_text, entry, int_attr, ops_named, retarget_callbacks
from . import effects
from .guards import GuardSite, make_callback, sites
from .pjrt import Executable, finite_on_host


class Compiled:
    def __init__(self, module: ir.Module, context: ir.Context, sources: dict, platform: str = "cpu"):
        with context:
            fop = entry(module)
            self.run_arg = int_attr(fop, abi.RUN_ARG)
            self.io_arg = int_attr(fop, abi.IO_ARG)
            self.extra = int_attr(fop, abi.EXTRA_RESULTS, 0)
            self.bound_result = int_attr(fop, abi.BOUND_RESULT)
            check, self.checked = results_check(fop)
            self._filter_module = results_filter(fop, platform)
            self.entry_name = attr_text(fop.attributes[abi.ENTRY]) if abi.ENTRY in fop.attributes \
                else attr_text(fop.attributes["sym_name"])
            self.sites = found = sites(module)
            self.may_not_end = may_not_end(module)
            self.prints = any(isinstance(site, PrintSite) for site in found.values())
            retarget_callbacks(module, platform)
        # Callbacks by index, each made from the site its custom_call describes: only what arrc registered
        # for this module can be called. An index whose callback was removed as dead code (a derivative's
        # unused branch) is never called: `_no_site` fills its place.
        self.loops = {index: site for index, site in found.items() if isinstance(site, BoundSite)}
        called = {index: site for index, site in found.items() if not isinstance(site, BoundSite)}
        callbacks = [_no_site] * (max(called) + 1 if called else 0)
        for index, site in called.items():
            callbacks[index] = callback_of(site, sources, self.loops)
        self.sources = sources
        # Compiled through `interruptible` (on a helper thread where this is the main thread): jaxlib's
        # `compile_and_load` raises KeyboardInterrupt at Ctrl-C while XLA goes on compiling on its own
        # threads, and the MLIR module it reads is then freed by the unwinding (a segfault a moment later).
        # On a helper thread jaxlib never sees the signal: the compile ends normally, its result abandoned.
        self.executable = interruptible(Executable, module, platform, callbacks, kind="compile")
        # The results check (passes/guards.py `results_check`): a second executable on the result buffers.
        self.check = interruptible(Executable, check, platform, kind="compile") if check is not None else None
        self._filter, self.platform = None, platform

    @property
    def results_filter(self) -> Executable | None:
        """The cheaper results check the API's fast path runs (passes/guards.py `results_filter`): false
        where every float result is finite. Compiled at its first use."""
        if self._filter is None and self._filter_module is not None:
            self._filter = interruptible(Executable, self._filter_module, self.platform, kind="compile")
        return self._filter

    def __call__(self, values: list, quiet: bool = False):
        """Run; returns (results, RunState or None when the module has no effects and no guards and its
        derivatives' loops kept their bounds)."""
        if self.run_arg is None and self.check is None:
            out = interruptible(self.executable, values) if self.may_not_end else self.executable(values)
            state = None
            if self.bound_result is not None:
                state = effects.RunState(quiet)
                state.failure = self.past_bound(out)
            return out[: len(out) - self.extra], state
        run_id, state = effects.begin(quiet, owner=threading.get_ident())
        try:
            args = list(values)
            hidden = [(self.run_arg, run_id)] if self.run_arg is not None else []
            hidden += [(self.io_arg, 0)] if self.io_arg is not None else []
            for position, value in sorted(hidden):
                args.insert(position, np.int32(value))
            # Host callbacks make the execution wait for them, and a `while` may not end: only then on a
            # helper thread (Ctrl-C); a results check alone runs as an unguarded call does.
            if self.run_arg is None and not self.may_not_end:
                out = self._run(args, state)
            else:
                out = interruptible(self._run, args, state, kind="prints" if self.prints else "run")
        except BaseException as err:
            effects.end(run_id, abandoned=isinstance(err, KeyboardInterrupt))
            raise
        effects.end(run_id)
        if state.failure is None:
            state.failure = self.past_bound(out)
        return out[: len(out) - self.extra], state

    def past_bound(self, out: list):
        """The R0006 report of a call that returned `out` where a loop in a derivative ran past its bound
        (its PAST result, abi.BOUND_RESULT), or None."""
        if self.bound_result is None:
            return None
        return effects.past_bound_error(self.loops, out[self.bound_result], self.sources)

    def _run(self, args: list, state) -> list:
        out = self.executable(args)
        for r in out:           # (waits without the GIL, which the executable's host callbacks need)
            r.block_until_ready()
        if self.check is not None:      # (small results on the CPU are tested on the host first: no dispatch)
            own = out[: len(out) - self.extra]
            clean = finite_on_host([own[i] for i in self.checked], poll=False) if self.platform == "cpu" else None
            state.fault = clean is not True and bool(np.asarray(self.check(own)[0]))
            if state.fault:
                state.bad_results = _not_finite(out, self.checked)
        return out


def callback_of(site, sources: dict, loops: dict):
    """The host callback of a print, assert or guard report site (`loops`: the module's bounded loops), run
    with subnormal floats kept (`_keeping_subnormals`)."""
    made = make_callback(site, effects.state_of) if isinstance(site, GuardSite) else \
        effects.host_callback(site, sources, loops)
    return _keeping_subnormals(made)


def _keeping_subnormals(callback):
    """`callback` run in the C library's default floating-point environment. XLA runs a program, and the host
    callbacks it calls, with the CPU flushing subnormal floats to zero (x86's DAZ/FTZ): there NumPy reads
    3e-39 (f32) as 0, so `print` wrote `[0. 0.]` and a report said `y = 0.0` for the divisor 1e-40. Saved and
    restored around each call (`fegetenv`/`fesetenv`, glibc and musl: FE_DFL_ENV is (fenv_t *) -1)."""
    if _FENV is None:
        return callback
    import ctypes

    def run(*args):
        saved = ctypes.create_string_buffer(64)     # (a fenv_t: 32 bytes on x86-64, 8 on aarch64)
        _FENV.fegetenv(saved)
        _FENV.fesetenv(ctypes.c_void_p(-1))
        try:
            return callback(*args)
        finally:
            _FENV.fesetenv(saved)
    return run


def _libm():
    import sys
    if not sys.platform.startswith("linux"):
        return None
    import ctypes
    import ctypes.util
    try:
        return ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
    except OSError:
        return None


_FENV = _libm()


def _no_site(*args):
    raise AssertionError("a host callback with no site was called")


def may_not_end(module) -> bool:
    """Whether a program has a loop whose end depends on what it computes: a `while` (a stablehlo.while
    without the `arrc.trip_count` every `for` loop has). Its calls go through `interruptible` (Ctrl-C
    works, ~15-60 us more per call), never through the C++ fast path. A `for` loop runs the number of
    times its arguments say, as a matrix product's time follows its sizes: such programs keep the fast
    path (~60 us would cost a 100-step power iteration on 256x256 f64 12% of its run time)."""
    return any(abi.TRIP_COUNT not in op.attributes for op in ops_named(module.operation, "stablehlo.while"))


def interruptible(fn, *args, kind: str = "run"):
    """`fn(*args)`, made so that Ctrl-C (SIGINT) raises KeyboardInterrupt while it runs.

    XLA:CPU runs an executable whose cost analysis counts fewer than 1,000 flops (an endless scalar
    `while` counts its body once) inline on the calling thread, inside `execute_sharded`; with host
    callbacks (print, assert, guards) `execute_sharded` waits for the execution too. Either way the main
    thread is in C++ and Python's SIGINT handler cannot run until the program ends. So on the main
    thread `fn` runs on a helper thread and the main thread waits for it in `Lock.acquire`, where
    Python's handler runs (KeyboardInterrupt). On KeyboardInterrupt the helper is abandoned: PJRT cannot cancel an execution,
    so it keeps a CPU busy until the program ends (a daemon thread: it does not keep the process alive);
    the next call gets a new helper. `kind`: "compile", which the process's exit waits for; "prints", a run
    of a program that prints, whose next print stops it once abandoned (runtime/effects.py `state_of`, and
    `abandon` for the runs `fn` made on the helper), which the exit waits for up to PRINT_GRACE_S; or "run",
    not waited for (`_leave_after_abandoned_work`). Elsewhere (not the main thread, where no signal arrives)
    `fn` just runs. Cost: two thread switches, ~15-60 us (more on a loaded machine); the API's dispatcher fast
    path (plain positional calls of a program without a `while` loop: `may_not_end`) does not come here."""
    if threading.current_thread() is not threading.main_thread():
        return fn(*args)
    helper = _helper()
    done = threading.Lock()
    done.acquire()
    box: list = []
    helper.jobs.put((fn, args, box, done, kind))
    try:
        # With a timeout: the kernel may deliver SIGINT to any thread (the helper, XLA's), and then
        # nothing wakes a main thread blocked in `acquire`; it runs the Python handler when it wakes.
        while not done.acquire(timeout=0.05):
            pass
    except BaseException:
        with _helpers_lock:                 # abandoned: its thread stays with the running program, then ends
            if _helpers and _helpers[0] is helper:
                _helpers.clear()
            if not _abandoned:
                atexit.register(_leave_after_abandoned_work)
            _abandoned.append(helper)
        helper.jobs.put(None)               # its thread ends after the job it runs
        effects.abandon(helper.thread.ident)    # the runs of a call made on the helper (a REPL cell's)
        raise
    ok, value = box[0]
    if not ok:
        raise value
    return value


class _Helper:
    def __init__(self):
        import queue
        self.jobs = queue.SimpleQueue()
        self.busy: str | None = None            # the kind of the job it runs (`interruptible`)
        self.thread = threading.Thread(target=self._loop, name="arrc-run", daemon=True)
        self.thread.start()

    def _loop(self):
        while True:
            job = self.jobs.get()
            if job is None:                 # abandoned (`interruptible`): no job will come
                with _helpers_lock:
                    _abandoned.remove(self)
                return
            fn, args, box, done, kind = job
            self.busy = kind
            try:
                box.append((True, fn(*args)))
            except BaseException as err:    # noqa: BLE001  handed to the caller
                box.append((False, err))
            del fn, args
            self.busy = None
            done.release()


_helpers: list = []
_helpers_lock = threading.Lock()
_abandoned: list = []                       # helpers whose caller Ctrl-C took away


def helpers_busy() -> bool:
    """Whether a job is running on a helper thread; once the main thread waits for none, one that Ctrl-C
    abandoned. Python's normal exit must not run then: a daemon thread returning from jaxlib while the
    interpreter finalizes is ended by a forced unwind that jaxlib's C++ does not let through (an abort,
    "FATAL: exception not rethrown"), so `arrc repl` leaves with `os._exit` then (cli.py `entry`)."""
    return any(helper.busy for helper in _helpers + _abandoned)


def _leave_after_abandoned_work() -> None:
    """At exit (atexit), after a Ctrl-C abandoned a compile or a run on a helper thread: Python's finalization
    must not run while it can call into Python (a return, a print's callback): that was "FATAL: exception not
    rethrown", an abort, where a script interrupted a call and then ended. A compile ends: it is waited for.
    A program that prints stops at its next print: it is waited for up to PRINT_GRACE_S (its print may never
    come: `while True` after a print). (A program left running is not waited for, it may never end: one that
    calls back or ends during the few milliseconds of finalization still aborts the process; one that does
    so before or never does not, and a guard's or an assert's callback runs only at a fault.)"""
    import time
    deadline = time.monotonic() + PRINT_GRACE_S
    while any(helper.busy == "compile" or helper.busy == "prints" and time.monotonic() < deadline
              for helper in list(_abandoned)):
        time.sleep(0.01)


PRINT_GRACE_S = 1.0


def _helper() -> _Helper:
    with _helpers_lock:
        if not _helpers:
            _helpers.append(_Helper())
        return _helpers[0]


def _not_finite(results, checked: list) -> set:
    """The indices among `checked` (float results, bf16 and complex too) of the results holding a NaN or an
    infinity; one transfer each."""
    bad = set()
    for i in checked:
        host = np.asarray(results[i])
        if not np.isfinite(host if host.dtype.kind == "c" else host.astype(np.float64)).all():
            bad.add(i)
    return bad
