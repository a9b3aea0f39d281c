"""PJRT execution: one backend per platform, executables cached in memory per module text and options."""
from __future__ import annotations

import os
import threading

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")   # silence PJRT start-up INFO lines
_lock = threading.Lock()
_backends: dict = {}


def backend(platform: str = "cpu"):
    with _lock:
        if platform not in _backends:
            import jax.extend  # noqa: F401  (explicit: jax.extend is not imported by `import jax`)
            import jax
            try:
                _backends[platform] = jax.extend.backend.get_backend(platform)
            except RuntimeError as err:
                raise DeviceUnavailable(platform, str(err)) from None
        return _backends[platform]


class DeviceUnavailable(RuntimeError):
    def __init__(self, platform: str, detail: str):
        super().__init__(f"no {platform} device is available ({detail.splitlines()[0] if detail else ''})")
        self.platform = platform


class Executable:
    """A compiled StableHLO module bound to one device."""

    def __init__(self, module, platform: str = "cpu", host_callbacks: list | None = None):
        from jax._src.lib import xla_client as xc
        from jax.sharding import SingleDeviceSharding
        be = backend(platform)
        self.device = be.local_devices()[0]
        self.sharding = SingleDeviceSharding(self.device)
        self.host_callbacks = host_callbacks or []         # kept alive as long as the executable
        if self.host_callbacks:
            self.loaded = be.compile_and_load(module, xc.DeviceList((self.device,)), xc.CompileOptions(),
                                              host_callbacks=self.host_callbacks)
        else:
            self.loaded = be.compile_and_load(module, xc.DeviceList((self.device,)), xc.CompileOptions())

    def put(self, values: list) -> list:
        """Transfer NumPy arrays to the device, keeping 64-bit dtypes 64-bit."""
        import jax
        from jax._src.lib import xla_client as xc
        out = []
        for v in values:
            if isinstance(v, jax.Array):
                out.append(v if self.device in v.devices() else jax.device_put(v, self.device))
                continue
            aval = jax.core.ShapedArray(v.shape, v.dtype)
            out.append(xc.batched_device_put(aval, self.sharding, [v], [self.device], True, False, enable_x64=True))
        return out

    def __call__(self, values: list) -> list:
        args = self.put(values)
        results = self.loaded.execute_sharded(args).disassemble_into_single_device_arrays()
        return [r[0] for r in results]


def as_numpy(x) -> np.ndarray:
    return np.asarray(x)
