"""Timing helpers: contenders measured in the same process, interleaved round by round, medians.

The machine this runs on is shared (other processes come and go), so a single long run of one
contender then the other would compare two different machines. Each round runs every contender once,
in alternating order, and the median over rounds is reported.
"""
from __future__ import annotations

import gc
import statistics
import time
from typing import Callable

BLOCK = "block_until_ready"


def block(x):
    """Wait for a result (a jax array, or a tuple/list of them)."""
    if isinstance(x, (tuple, list)):
        for y in x:
            block(y)
    elif hasattr(x, BLOCK):
        x.block_until_ready()
    return x


def calls_per_sample(fn: Callable[[], object], target_s: float) -> int:
    """How many back-to-back calls make one sample of about `target_s` seconds."""
    block(fn())
    start = time.perf_counter()
    n = 0
    while True:
        block(fn())
        n += 1
        elapsed = time.perf_counter() - start
        if elapsed > target_s / 4 or n >= 1_000_000:
            break
    return max(1, round(n * target_s / max(elapsed, 1e-9)))


def sample(fn: Callable[[], object], n: int, block_each: bool) -> float:
    """Seconds per call over `n` calls (blocking on every result, or only on the last)."""
    out = None
    start = time.perf_counter()
    if block_each:
        for _ in range(n):
            block(fn())
    else:
        for _ in range(n):
            out = fn()
        block(out)
    return (time.perf_counter() - start) / n


def interleaved(contenders: dict[str, Callable[[], object]], budget_s: float, target_s: float = 0.005,
                block_each: bool = True, min_rounds: int = 11) -> dict[str, dict]:
    """Per contender: median, min and all samples (seconds per call), measured round-robin.

    A sample is a few milliseconds of calls (one call if a call takes longer); rounds alternate the
    order of the contenders and continue until each has had about `budget_s` seconds (at least
    `min_rounds` rounds). Many short interleaved samples keep a burst of load from other processes
    from landing on one contender only."""
    names = list(contenders)
    sizes = {}
    for name in names:                      # warm up (compile, caches) and size the samples
        sizes[name] = calls_per_sample(contenders[name], target_s)
    n = min(sizes.values()) if not block_each else None
    per_round = sum(sample(contenders[name], n or sizes[name], block_each) * (n or sizes[name])
                    for name in names) / len(names)
    rounds = max(min_rounds, int(budget_s / max(per_round, 1e-9)))
    samples = {name: [] for name in names}
    gc_was = gc.isenabled()
    gc.disable()
    try:
        for r in range(rounds):
            order = names if r % 2 == 0 else names[::-1]
            for name in order:
                samples[name].append(sample(contenders[name], n or sizes[name], block_each))
    finally:
        if gc_was:
            gc.enable()
    return {name: summary(s) for name, s in samples.items()}


def repeated(fns: dict[str, Callable[[int], float]], rounds: int) -> dict[str, dict]:
    """Contenders that time themselves (`fn(round) -> seconds`, e.g. a compile), round-robin.

    Each sample starts from a collected heap (untimed): otherwise the cyclic garbage one contender leaves
    (arrc's front end pauses the collector while it runs) is scanned in the next one's sample, and a
    front end's median depends on which contender ran before it (JAX's lowering at 600 statements:
    118 ms after itself, 182 ms after arrc's front end)."""
    samples = {name: [] for name in fns}
    for r in range(rounds):
        order = list(fns) if r % 2 == 0 else list(fns)[::-1]
        for name in order:
            gc.collect()
            samples[name].append(fns[name](r))
    return {name: summary(s) for name, s in samples.items()}


def summary(samples: list[float]) -> dict:
    return {"median": statistics.median(samples), "min": min(samples), "samples": samples}


def fmt_time(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} us"
