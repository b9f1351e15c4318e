"""Timing: GPU time per call from CUDA events, host time per call from perf_counter,
and the statistics every record carries (median, min, max, spread).

Not cupyx.profiler.benchmark: it synchronizes the host after every call, so the
GPU idles between calls and a call of several launches (multi_block, cupyx,
torch.compile) pays host launch latency inside its GPU time on small shapes;
here the calls are queued back to back, each between its own pair of events.
"""

from __future__ import annotations

import time

import numpy as np


def gpu_times(call, stream, repeats: int, warmup: int, before_timed=None) -> tuple[list[float], object]:
    """(milliseconds of each of `repeats` calls, the last call's output): `warmup`
    calls, then before_timed() (e.g. poisoning the output), then the timed calls,
    each between a pair of CUDA events on `stream`, with one synchronization at the end."""
    import cupy

    for _ in range(warmup):
        call()
    if before_timed is not None:
        before_timed()
    pairs = [(cupy.cuda.Event(), cupy.cuda.Event()) for _ in range(repeats)]
    out = None
    for start, end in pairs:
        start.record(stream)
        out = call()
        end.record(stream)
    stream.synchronize()
    return [cupy.cuda.get_elapsed_time(start, end) for start, end in pairs], out


def host_times(call, calls: int, warmup: int, synchronize) -> list[float]:
    """Microseconds between consecutive calls of `call` in a loop (its host cost
    while the GPU keeps up), after `warmup` calls; synchronize() once at the end,
    whose wait closes the last interval."""
    for _ in range(warmup):
        call()
    synchronize()
    stamps = np.empty(calls + 1)
    for i in range(calls):
        stamps[i] = time.perf_counter()
        call()
    synchronize()
    stamps[calls] = time.perf_counter()
    return list(np.diff(stamps) * 1e6)


def stats(times, unit: str = "ms") -> dict:
    """median, min, max and spread ((max - min) / median) of a list of times."""
    t = np.asarray(times, dtype=np.float64)
    if t.size == 0:
        raise ValueError("no times to summarize")
    median = float(np.median(t))
    return {"repeats": int(t.size), f"median_{unit}": median, f"min_{unit}": float(t.min()),
            f"max_{unit}": float(t.max()), "spread": float((t.max() - t.min()) / median) if median > 0 else 0.0}
