"""Several processes as one cluster (LANGUAGE.md section 17, docs/sharding.md): `initialize` joins this
process to the others through `jax.distributed` (CPU collectives through gloo), after which `arrc.mesh`
spans every process's devices and `f.sharded(...)` runs one SPMD program over all of them. Nothing here
moves data: XLA's partitioner and JAX's runtime do."""
from __future__ import annotations


def initialize(coordinator: str, num_processes: int, process_id: int, local_devices: int | None = None,
               timeout_s: int = 60) -> None:
    """Join the cluster whose process 0 serves `coordinator` ("HOST:PORT"), as process `process_id` of
    `num_processes`, with `local_devices` virtual CPU devices of its own (None: the platform's devices).
    Call it first, before anything starts JAX's backends (as `jax.distributed.initialize`); every process
    must call it. A coordinator that does not answer within `timeout_s` seconds is an error, not a hang."""
    host, _, port = str(coordinator).rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"coordinator {coordinator!r}: write it as HOST:PORT, e.g. 127.0.0.1:9876")
    if not 1 <= int(port) <= 65535:
        raise ValueError(f"coordinator {coordinator!r}: the port is a number in 1..65535, not {port}")
    given = {"timeout_s": timeout_s, "num_processes": num_processes, "process_id": process_id,
             "local_devices": local_devices}
    timeout_s, num_processes, process_id, local_devices = map(_whole, given.values())
    if timeout_s is None or timeout_s < 1:
        raise ValueError(f"timeout_s must be a positive whole number of seconds, not {given['timeout_s']!r}")
    if num_processes is None or num_processes < 1:
        raise ValueError(f"num_processes must be a positive integer, not {given['num_processes']!r}")
    if process_id is None or not 0 <= process_id < num_processes:
        raise ValueError(f"process_id must be in 0..{num_processes - 1}, not {given['process_id']!r}")
    from arrc.sharding import MAX_VIRTUAL_DEVICES
    if given["local_devices"] is not None and (local_devices is None or
                                               not 1 <= local_devices <= MAX_VIRTUAL_DEVICES):
        raise ValueError(f"local_devices must be an integer in 1..{MAX_VIRTUAL_DEVICES} (virtual CPU devices of "
                         f"this process), not {given['local_devices']!r}")
    if process_id != 0:
        _wait_for_coordinator(host, int(port), timeout_s)
    import jax
    if local_devices is not None:
        jax.config.update("jax_num_cpu_devices", local_devices)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=coordinator, num_processes=num_processes, process_id=process_id,
                               initialization_timeout=timeout_s)


def _whole(value) -> int | None:
    """`value` as an int where it is a whole number (a NumPy integer too, as `arrc.mesh` takes one), not a bool
    (`num_processes=True` read as 1); else None."""
    import numbers
    return int(value) if isinstance(value, numbers.Integral) and not isinstance(value, bool) else None


def _wait_for_coordinator(host: str, port: int, timeout_s: float) -> None:
    """Return once something listens at the coordinator's address, else raise a TimeoutError after `timeout_s`
    seconds: JAX's client, whose registration timed out, ended the process (a fatal log and SIGABRT, exit 134)."""
    import socket
    import time
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection((host.strip("[]"), port), timeout=1):
                return
        except OSError:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"no coordinator answered at {host}:{port} within {timeout_s} s: process 0 "
                                   f"serves it, started with the same coordinator address") from None
            time.sleep(0.2)


def shutdown() -> None:
    """Leave the cluster (every process calls it, at the end)."""
    import jax
    jax.distributed.shutdown()
