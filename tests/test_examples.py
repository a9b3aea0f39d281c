"""Every examples/*.arr compiles and its `main` runs (through the API, `arrc run` and `python -m arrc.demo`);
the control-flow examples (simulation, kmeans, nan_pipeline) are compared with NumPy re-implementations.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_close

import arrc
from arrc import demo
from arrc.cli import main as cli_main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
ALL = sorted(p.name for p in EXAMPLES.glob("*.arr"))
NEW = ["simulation.arr", "kmeans.arr", "nan_pipeline.arr"]

_modules: dict = {}


def load(name: str):
    if name not in _modules:
        _modules[name] = arrc.load(str(EXAMPLES / name))
    return _modules[name]


def run_main(name: str) -> list[np.ndarray]:
    out = load(name).main()
    return [np.asarray(v) for v in (out if isinstance(out, tuple) else (out,))]


def test_the_new_examples_exist():
    assert set(NEW) <= set(ALL)
    for name in ALL:
        assert "def main()" in (EXAMPLES / name).read_text()


@pytest.mark.parametrize("name", ALL)
def test_every_example_main_runs(name, capsys):
    results = run_main(name)
    assert results
    if name not in ("logsumexp.arr", "casts.arr"):   # those two show inf on purpose (overflow, f16 range)
        for r in results:
            assert r.dtype.kind not in "fc" or np.all(np.isfinite(r)), (name, r)


@pytest.mark.parametrize("name", ALL)
def test_every_example_runs_from_the_cli(name, capsys):
    assert cli_main(["run", str(EXAMPLES / name)]) == 0
    assert capsys.readouterr().out.strip()


def test_demo_runs_every_example(capsys):
    assert demo.main([]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^all \d+ examples ran$", out, re.M), out[-300:]
    for name in ALL:
        assert name in out


# ---- simulation.arr -----------------------------------------------------------------------------
def numpy_bounce(h, v, steps, dt, restitution, g=9.81):
    bounces = 0
    for _ in range(steps):
        v = v - g * dt
        h = h + v * dt
        if h < 0.0:
            h = -h
            v = -restitution * v
            bounces += 1
    return h, v, bounces


def numpy_heat_step(u, alpha):
    lap = np.zeros_like(u)
    lap[1:-1] = u[:-2] - 2.0 * u[1:-1] + u[2:]
    return u + alpha * lap


def test_simulation_against_numpy(capsys):
    h, v, count, u, hottest, cool_steps = run_main("simulation.arr")
    eh, ev, ecount = numpy_bounce(10.0, 0.0, 500, 0.01, 0.8)
    assert h.dtype == np.float64 and v.dtype == np.float64 and u.dtype == np.float64
    assert_close(h, eh, "f64", rtol=1e-12, atol=1e-12)
    assert_close(v, ev, "f64", rtol=1e-12, atol=1e-12)
    assert int(count) == ecount >= 1
    rod = np.zeros(9)
    rod[4] = 100.0
    eu = rod
    for _ in range(40):
        eu = numpy_heat_step(eu, 0.25)
    assert_close(u, eu, "f64")
    assert int(hottest) == int(np.argmax(eu)) == 4
    steps, w = 0, rod
    while w.max() > 10.0:
        w = numpy_heat_step(w, 0.25)
        steps += 1
    assert int(cool_steps) == steps
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("ball: height ") and f"after {ecount} bounces" in out[0]
    assert out[1].startswith("rod: hottest point 4 at ")


@pytest.mark.parametrize("h0,v0,steps", [(1.0, 0.0, 300), (5.0, 3.0, 1000), (0.5, -1.0, 0)])
def test_simulation_bounce_other_inputs(h0, v0, steps):
    h, v, count = load("simulation.arr").bounce(h0, v0, steps, 0.005, 0.7)
    eh, ev, ecount = numpy_bounce(h0, v0, steps, 0.005, 0.7)
    assert_close(h, eh, "f64", rtol=1e-11, atol=1e-11)
    assert_close(v, ev, "f64", rtol=1e-11, atol=1e-11)
    assert int(count) == ecount


def test_simulation_uses_loops_and_branches():
    fn = load("simulation.arr").bounce
    text = fn.lower(*(arrc.spec(t) for t in ("f64", "f64", "i32", "f64", "f64"))).as_text()
    assert "stablehlo.while" in text and "stablehlo.if" in text


# ---- kmeans.arr ---------------------------------------------------------------------------------
POINTS = np.array([[0.0, 0.1], [0.2, -0.1], [-0.1, 0.0], [0.1, 0.2],
                   [5.0, 5.1], [5.2, 4.9], [4.8, 5.0], [5.1, 5.2],
                   [0.1, 5.0], [-0.2, 4.8], [0.0, 5.3], [0.2, 5.1]], np.float32)


def numpy_kmeans(x, init, iters):
    def dist(c):
        return ((x[:, None, :] - c[None, :, :]) ** 2).sum(axis=2)
    c = x[init].copy()
    for _ in range(iters):
        labels = dist(c).argmin(axis=1)
        for j in range(len(c)):
            member = labels == j
            if member.any():
                c[j] = x[member].sum(axis=0) / member.sum()
    d = dist(c)
    return c, d.argmin(axis=1), d.min(axis=1).sum()


def test_kmeans_against_numpy(capsys):
    centroids, labels, inertia = run_main("kmeans.arr")
    ec, el, ei = numpy_kmeans(POINTS, [0, 1, 4], 10)
    assert centroids.dtype == np.float32 and labels.dtype == np.int32
    np.testing.assert_array_equal(labels, el)
    np.testing.assert_array_equal(labels, [1, 1, 1, 1, 2, 2, 2, 2, 0, 0, 0, 0])   # the three blobs are found
    assert_close(centroids, ec, rtol=1e-5, atol=1e-6)
    assert_close(inertia, ei, rtol=1e-5, atol=1e-6)
    assert capsys.readouterr().out.startswith("k-means: inertia ")


@pytest.mark.parametrize("seed,iters", [(0, 0), (1, 1), (2, 5)])
def test_kmeans_random_data(seed, iters):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((30, 3)).astype(np.float32)
    init = np.array([0, 1, 2, 3], np.int32)
    c, labels, inertia = load("kmeans.arr").kmeans(x, init, iters)
    ec, el, ei = numpy_kmeans(x, init, iters)
    np.testing.assert_array_equal(np.asarray(labels), el)
    assert_close(c, ec, rtol=1e-5, atol=1e-5)
    assert_close(inertia, ei, rtol=1e-5, atol=1e-5)


def test_kmeans_keeps_an_empty_cluster():
    x = np.array([[0.0, 0.0], [0.1, 0.0], [0.0, 0.1]], np.float32)
    c, labels, _ = load("kmeans.arr").kmeans(x, np.array([0, 0], np.int32), 1)
    # both seeds coincide: every point goes to cluster 0 (argmin takes the first); cluster 1 gets no
    # point, so the `if` keeps its centroid where it was
    assert_close(np.asarray(c)[0], x.mean(axis=0), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(np.asarray(c)[1], [0.0, 0.0])
    ec, el, _ = numpy_kmeans(x, [0, 0], 1)
    np.testing.assert_array_equal(np.asarray(labels), el)


# ---- nan_pipeline.arr -----------------------------------------------------------------------------
DATA = np.array([[1.0, np.nan, 3.0, 4.0, np.nan, 6.0],
                 [np.nan, np.nan, 2.0, 2.5, 100.0, 3.0],
                 [7.0, 7.5, 8.0, 8.5, 9.0, 9.5],
                 [np.nan, 1.0, np.nan, np.nan, -1.0, np.nan]], np.float32)


def numpy_clean(x):
    medians = np.array([np.nanmedian(r) if (~np.isnan(r)).any() else np.nan for r in x], np.float32)
    first = np.array([np.flatnonzero(~np.isnan(r))[0] if (~np.isnan(r)).any() else -1 for r in x], np.int32)
    filled = x.copy()
    for r in range(x.shape[0]):
        for i in range(1, x.shape[1]):
            if np.isnan(filled[r, i]):
                filled[r, i] = filled[r, i - 1]
    filled = np.where(np.isnan(filled), medians[:, None], filled)
    return filled, medians, first


def test_nan_pipeline_against_numpy():
    filled, medians, first, means, counts, smooth = run_main("nan_pipeline.arr")
    ef, em, efirst = numpy_clean(DATA)
    assert_close(filled, ef)
    assert_close(medians, em)
    np.testing.assert_array_equal(first, efirst)
    with np.errstate(all="ignore"):
        assert_close(means, np.nanmean(DATA, axis=1))
    np.testing.assert_array_equal(counts, (~np.isnan(DATA)).sum(axis=1))
    assert_close(smooth, np.cumsum(ef, axis=1) / np.arange(1, 7), rtol=1e-6)
    assert not np.isnan(filled).any()


@pytest.mark.parametrize("row", [[np.nan, np.nan, np.nan, np.nan], [1.0, 2.0, 3.0, 4.0], [np.nan, 5.0, np.nan, -2.0],
                                 [3.0, np.nan, np.nan, np.nan]])
def test_nan_median_and_fill(row):
    mod = load("nan_pipeline.arr")
    row = np.array(row, np.float32)
    expected = np.nanmedian(row) if (~np.isnan(row)).any() else np.nan
    assert_close(mod.nan_median(row), np.float32(expected))
    filled = row.copy()
    for i in range(1, len(row)):
        if np.isnan(filled[i]):
            filled[i] = filled[i - 1]
    assert_close(mod.forward_fill(row), filled)


def test_nan_pipeline_all_nan_row_stays_nan():
    x = DATA.copy()
    x[0] = np.nan
    filled, medians, _ = load("nan_pipeline.arr").clean(x)
    assert np.isnan(np.asarray(filled)[0]).all() and np.isnan(np.asarray(medians)[0])


def test_mask_indexing_is_rejected_in_the_pipeline_style():
    with pytest.raises(arrc.CompileError) as info:
        arrc.loads("def f(x: f32[n]) -> f32:\n    return sum(x[~isnan(x)])\n", filename="t.arr")
    assert info.value.diagnostics[0].code == "E0303"
