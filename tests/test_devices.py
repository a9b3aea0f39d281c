"""Devices: the platform chosen in the API/CLI reaches the compiled module (host callbacks of print, assert
and guards target that platform's handler) and PJRT. GPU runs are skipped where there is no GPU."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import arrc
from arrc.passes.guards import GuardOptions, guard_module, parse_kinds
from arrc.passes.rewrite import retarget_callbacks
from arrc.runtime.pjrt import DeviceUnavailable, backend

ROOT = Path(__file__).resolve().parent.parent
EFFECTS = """\
def f(x: f32[4], i: i32) -> f32[4]:
    print("total", sum(x))
    assert all(x > -10.0), "too small"
    return log(x) + x[i]
"""


def _has(platform: str) -> bool:
    try:
        backend(platform)
        return True
    except DeviceUnavailable:
        return False


def _targets(text: str) -> list[str]:
    return sorted(t for t in ("xla_ffi_python_cpu_callback", "xla_ffi_python_gpu_callback")
                  for _ in range(text.count(t)))


def _guarded_lowering():
    lowered = arrc.loads(EFFECTS).f.lower(arrc.spec("f32[4]"), arrc.spec("i32"))
    with lowered.context:
        guard_module(lowered.module, GuardOptions(parse_kinds("all"), "results"))
    return lowered


def test_retarget_points_every_callback_at_the_gpu_handler():
    lowered = _guarded_lowering()
    before = _targets(lowered.as_text())
    assert before and set(before) == {"xla_ffi_python_cpu_callback"}      # print, assert, bounds guard
    with lowered.context:
        assert retarget_callbacks(lowered.module, "gpu") == len(before)
        lowered.module.operation.verify()
    assert _targets(lowered.as_text()) == ["xla_ffi_python_gpu_callback"] * len(before)


def test_retarget_for_the_cpu_changes_nothing():
    lowered = _guarded_lowering()
    text = lowered.as_text()
    with lowered.context:
        assert retarget_callbacks(lowered.module, "cpu") == 0
    assert lowered.as_text() == text


def test_tpu_refuses_callbacks_but_not_pure_programs():
    lowered = _guarded_lowering()
    with lowered.context, pytest.raises(ValueError, match="not supported on tpu"):
        retarget_callbacks(lowered.module, "tpu")
    pure = arrc.loads("def g(x: f32[2]) -> f32[2]:\n    return x * 2.0\n").g.lower(arrc.spec("f32[2]"))
    with pure.context:
        assert retarget_callbacks(pure.module, "tpu") == 0


def test_unknown_device_is_a_value_error():
    with pytest.raises(ValueError, match="device must be one of cpu, gpu, tpu"):
        arrc.loads(EFFECTS, device="xpu")


@pytest.mark.skipif(_has("gpu"), reason="this machine has a GPU")
def test_missing_gpu_is_reported_at_the_first_call():
    mod = arrc.loads(EFFECTS, device="gpu")
    assert mod.device == "gpu"
    with pytest.raises(DeviceUnavailable, match="no gpu device is available"):
        mod.f(np.ones(4, np.float32), 0)


def test_cli_compile_target_gpu_and_tpu(tmp_path):
    path = tmp_path / "effects.arr"
    path.write_text(EFFECTS)
    cmd = [sys.executable, "-m", "arrc", "compile", str(path), "--entry", "f", "--guards", "all"]
    gpu = subprocess.run(cmd + ["--target", "gpu"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert gpu.returncode == 0, gpu.stderr
    assert set(_targets(gpu.stdout)) == {"xla_ffi_python_gpu_callback"}
    tpu = subprocess.run(cmd + ["--target", "tpu"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert tpu.returncode == 2 and tpu.stdout == ""
    assert tpu.stderr == ("arrc: error: --target tpu: print, assert and guards are not supported on tpu "
                          "(they need host callbacks, which arrc emits for cpu and gpu)\n")


@pytest.mark.skipif(not _has("gpu"), reason="no GPU here")
def test_gpu_runs_prints_asserts_and_guards(capfd):
    mod = arrc.loads(EFFECTS, filename="effects.arr", device="gpu", guards="all")
    x = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    out = mod.f(x, 1)
    assert {d.platform for d in out.devices()} == {"gpu"}
    np.testing.assert_allclose(np.asarray(out), np.log(x) + 2.0, rtol=1e-6)
    assert "total 10.0" in capfd.readouterr().out
    with pytest.raises(arrc.NaNError):
        mod.f(np.array([-1.0, 2.0, 3.0, 4.0], np.float32), 0)
    with pytest.raises(arrc.AssertionFailed, match="too small"):
        mod.f(np.array([-20.0, 2.0, 3.0, 4.0], np.float32), 0)
    with pytest.raises(arrc.BoundsError):
        mod.f(x, 7)


@pytest.mark.skipif(_has("gpu"), reason="this machine has a GPU")
def test_a_mesh_over_a_missing_platform_says_so(tmp_path):
    """`arrc.mesh(device="gpu")` raised JAX's RuntimeError ("Unknown backend: 'gpu' requested ..."), and
    `arrc compile --target gpu --mesh ...` reported it as an internal compiler error (E0601, exit 4)."""
    with pytest.raises(DeviceUnavailable, match="no gpu device is available"):
        arrc.mesh(device="gpu", data=1)
    (tmp_path / "m.arr").write_text("def f(x: f32[8]) -> f32[8]:\n    return x * 2.0\n")
    done = subprocess.run([sys.executable, "-m", "arrc", "compile", "m.arr", "--entry", "f", "--target", "gpu",
                           "--mesh", "data=1", "--shard", "x=data"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr.startswith("arrc: error: --mesh data=1: no gpu device is available ("), done.stderr
    assert done.stderr.endswith("; a sharded program is lowered over the devices it runs on\n"), done.stderr
