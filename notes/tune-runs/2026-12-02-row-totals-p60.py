"""Probe 60: multi_block_smem with a published row total.  Probe 58's profile
(-held-chunks-p58.txt §3) spent 14 % of a block's time at 4M float32 columns, and 25 % at 1M,
in polls: each block whose oldest chunk is due merges all of the row's slots (one load a thread,
two barriers, two warp merges).  Here the first block to find a row complete publishes its total
in one more word a row, and later blocks read that word (thread 0 reads it, the slots' loads
issued beside it; one barrier).  Its first form, every thread reading the word, ran slower (a
row's blocks all polling one line: 1.12 -> 1.33 at 64 x 2M); this is the second.  "new" is the working tree's kernel, "old" the one before (HEAD at 4c651af, carried as
.probe/multi_block_smem_old.cu); both at the launch rule's block shape and lag.  Every thread
now takes thread 0's total, so the outputs differ from the old kernel's in the last bit at most, and
two runs of the new one must be bitwise equal; timing as the sweep's (CUDA events around each
call, 5 warm-up, median of 30, with the 10-90 % spread) ÷ cupy.copyto of the same bytes, the two
kernels alternated three times.
PYTHONPATH=. timeout 200 python3 notes/tune-runs/2026-12-02-row-totals-p60.py
"""
import shutil
import sys

import cupy as cp
import numpy as np

import softmax_lab
from softmax_lab import loader

V = sys.modules["softmax_lab.variants"]
dev = softmax_lab.device_info()
STREAM = cp.cuda.get_current_stream()
SHAPES = ((32, 1 << 22), (132, 1 << 22), (64, 1 << 21), (132, 1 << 20), (1024, 1 << 20), (132, 600001),
          (16, 7000001))
shutil.copy(".probe/multi_block_smem_old.cu", loader.kernel_dir() / "multi_block_smem_old.cu")


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


def launcher(rows, cols, filename, extra_words):
    shape = V.Shape(rows, cols, cols, cols, 0, 0, 4, "float32", "softmax")
    threads, vpt, per_sm = V.multi_block_smem_block(cols, 4, dev)
    slots = V.multi_block_smem_slots(dev, threads, vpt, per_sm)
    defines = V.multi_block_smem_defines("float32", "softmax", threads, vpt, per_sm, slots)
    smem = slots * V._multi_block_smem_slot_bytes(threads, vpt)
    kernel = loader.get_kernel(filename, "multi_block_smem", defines)
    kernel.max_dynamic_shared_size_bytes = smem
    chunks = -(-V._row_vecs(cols, 4) // (threads * vpt))
    items = rows * chunks
    grid = min(per_sm * dev.sm_count, items)
    lag = np.int32(min(slots - 1, -(-chunks // grid) + 1))

    def launch(x, y):
        words, tickets = V._slots_and_tickets(items + extra_words * rows, STREAM)
        kernel.kernel((grid,), (threads,), (V._ptr(x.data.ptr), V._ptr(y.data.ptr), *shape.scalars(),
                                            np.int64(chunks), lag, words, tickets),
                      stream=STREAM, shared_mem=smem, enable_cooperative_groups=True)
    return launch, f"{threads}x{vpt}x{slots}/{per_sm} lag {int(lag)} grid {grid}"


print(dev.name, flush=True)
for rows, cols in SHAPES:
    x = cp.random.default_rng(rows + cols).standard_normal((rows, cols), dtype=cp.float32)
    y_old, y_new = cp.full_like(x, cp.nan), cp.full_like(x, cp.nan)
    copy = times_ms(lambda: cp.copyto(y_old, x))[1]
    old, plan = launcher(rows, cols, "multi_block_smem_old.cu", 0)
    new, _ = launcher(rows, cols, "multi_block_smem.cu", 1)
    y_old.fill(cp.nan)
    old(x, y_old)
    new(x, y_new)
    y_again = cp.full_like(x, cp.nan)
    new(x, y_again)
    same = bool((y_again.view(cp.uint32) == y_new.view(cp.uint32)).all())
    diff = float(cp.abs(y_old - y_new).max() / cp.abs(y_old).max())
    del y_again
    ok = bool(cp.isfinite(y_new).all()) and float(cp.abs(y_new.sum(1) - 1).max()) < 1e-3
    out = []
    for rep in range(3):
        for name, fn, y in (("old", old, y_old), ("new", new, y_new)):
            lo, med, hi = times_ms(lambda: fn(x, y)) / copy
            out.append(f"{name} {med:.3f} ({lo:.3f}-{hi:.3f})")
    print(f"{rows}x{cols} {plan} copy {copy * 1e3:.0f} us new twice bitwise {same}, old-new max diff {diff:.1e} ok {ok}: " + " | ".join(out), flush=True)
    del x, y_old, y_new
    cp.get_default_memory_pool().free_all_blocks()
