"""Probe 59 (written in session 22, NOT YET RUN): multi_block_smem at two blocks per SM with the chunk of the
one-block shape.  The profile of probe 58 (-held-chunks-p58.txt §3) shows a block running its phases (reduce,
write, row poll) one after another, so at 4M float32 columns one block per SM of 448 x 8 x 4 slots runs
1.37-1.40 x copy.  Two blocks per SM of 256 x 14 (or 224 x 16) vectors with 2 slots each keep the same 528
chunks of 56 KB on the H200 (the same rows held), and one block's phases can overlap the other's.  Both
build without spills (116-128 registers).  Each candidate's output is checked (finite, row sums 1 within
1e-3; the GPU tests check more) and timed as the sweep times (CUDA events around each call, 5 warm-up calls,
median of 30) ÷ cupy.copyto of the same bytes.  Candidates: "rule" (main's launch rule) or
threads.vpt.slots.blocks_per_sm.lag (lag -1: the launcher's).
PYTHONPATH=. timeout 200 python3 notes/tune-runs/2026-12-02-pairs-p59.py
"""
import sys

import cupy as cp
import numpy as np

import softmax_lab

V = sys.modules["softmax_lab.variants"]
dev = softmax_lab.device_info()
STREAM = cp.cuda.get_current_stream()
SHAPES = ((32, 1 << 22), (132, 1 << 22), (64, 1 << 21), (132, 1 << 20), (1024, 1 << 20))
CANDIDATES = ("rule", "448.8.4.1.-1", "256.14.2.2.-1", "224.16.2.2.-1", "256.8.3.2.-1")


def median_ms(fn, n=30):
    for _ in range(5):
        fn()
    times = []
    for _ in range(n):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end))
    return float(np.median(times))


def prepare(rows, cols, name):
    shape = V.Shape(rows, cols, cols, cols, 0, 0, 4, "float32", "softmax")
    if name == "rule":
        return V.get_variant("multi_block_smem").prepare(shape, dev)
    t, v, s, b, lag = map(int, name.split("."))
    return V.get_variant("multi_block_smem").prepare(shape, dev, threads=t, vpt=v, slots=s, blocks_per_sm=b,
                                                     lag=None if lag < 0 else lag)


print(dev.name, flush=True)
for rows, cols in SHAPES:
    x = cp.random.default_rng(0).standard_normal((rows, cols), dtype=cp.float32)
    y = cp.empty_like(x)
    copy = median_ms(lambda: cp.copyto(y, x))
    out = []
    for name in CANDIDATES:
        try:
            launch = prepare(rows, cols, name)
        except V.CannotRun as e:
            out.append(f"{name} cannot ({str(e)[:60]})")
            continue
        y.fill(cp.nan)
        launch(x.data.ptr, y.data.ptr, STREAM)
        ok = bool(cp.isfinite(y).all()) and float(cp.abs(y.sum(1) - 1).max()) < 1e-3
        out.append(f"{name} {median_ms(lambda: launch(x.data.ptr, y.data.ptr, STREAM)) / copy:.3f}"
                   f"{'' if ok else ' WRONG'}")
    print(f"{rows}x{cols}: " + " | ".join(out), flush=True)
    del x, y
    cp.get_default_memory_pool().free_all_blocks()
