"""Probe 62: the landed split schedule (MBS_SPLIT, 512 x 8 x 3, one block per SM) against the launch
rule it replaced (two blocks per SM of 256 x 8 x 3, one group) and against the one-group 448 x 8 x 4
build, float32 softmax, as probe 61 (CUDA events, 5 warm-up, median of 30 with the 10-90 % spread,
÷ cupy.copyto), alternated twice; the rule's pick first.
PYTHONPATH=. timeout 120 python3 notes/tune-runs/2026-12-02-split-p62.py
"""
import sys

import cupy as cp
import numpy as np

import softmax_lab

V = sys.modules["softmax_lab.variants"]
dev = softmax_lab.device_info()
STREAM = cp.cuda.get_current_stream()
SHAPES = ((32, 1 << 20), (132, 1 << 20), (1024, 1 << 20), (64, 1 << 21), (132, 600001), (40, 3 << 20),
          (32, 1 << 22), (132, 1 << 22))
BUILDS = {"rule": {}, "pairs 256.8.3.2": dict(threads=256, vpt=8, slots=3, blocks_per_sm=2, split=False),
          "one group 448.8.4.1": dict(threads=448, vpt=8, slots=4, blocks_per_sm=1, split=False),
          "split 512.8.3.1": dict(threads=512, vpt=8, slots=3, blocks_per_sm=1, split=True)}


def times_ms(fn, n=30):
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
    return np.percentile(times, [10, 50, 90])


print(dev.name, flush=True)
for rows, cols in SHAPES:
    x = cp.random.default_rng(rows + cols).standard_normal((rows, cols), dtype=cp.float32)
    y = cp.full_like(x, cp.nan)
    copy = times_ms(lambda: cp.copyto(y, x))[1]
    shape = V.Shape(rows, cols, cols, cols)
    launches = {}
    for name, knobs in BUILDS.items():
        try:
            launches[name] = V.get_variant("multi_block_smem").prepare(shape, dev, **knobs)
        except V.CannotRun as e:
            print(f"  {rows}x{cols} {name}: cannot ({str(e)[:80]})")
    out = []
    for rep in range(2):
        for name, launch in launches.items():
            y.fill(cp.nan)
            launch(x.data.ptr, y.data.ptr, STREAM)
            ok = bool(cp.isfinite(y).all()) and float(cp.abs(y.sum(1) - 1).max()) < 1e-3
            lo, med, hi = times_ms(lambda: launch(x.data.ptr, y.data.ptr, STREAM)) / copy
            out.append(f"{name} {med:.3f} ({lo:.3f}-{hi:.3f}){'' if ok else ' WRONG'}")
    print(f"{rows}x{cols} rule {V.multi_block_smem_block(cols, 4, dev)}: " + " | ".join(out), flush=True)
    del x, y
    cp.get_default_memory_pool().free_all_blocks()
