"""Probe 61: multi_block_smem with its warps split in two groups (MBS_SPLIT, the patch
-split-p61.patch): the first half reduces each slot as its bulk copy lands, the second writes the
oldest reduced slot once its row is complete and refills it, each group syncing by a named
barrier.  Probe 58's profile had one block running its phases one after another (reduce 3000
cycles a chunk, write 2000, poll 1300, the rest 2000, against 7350 for a copy); p59 and p60 did not
move 4M float32 columns.  "rule": main's kernel and launch rule; "split:T.V.S.B": the split kernel
at T threads (two groups of T/2, each thread 2V vectors a chunk), S slots, B blocks per SM.
Output checked against the rule's (max relative difference), finite, two runs bitwise equal;
timing as the sweep's (CUDA events, 5 warm-up, median of 30 with the 10-90 % spread) ÷
cupy.copyto, alternated twice.  A first call of a new persistent kernel: a short timeout.
PYTHONPATH=. timeout 150 python3 notes/tune-runs/2026-12-02-split-p61.py
"""
import sys

import cupy as cp
import numpy as np

import softmax_lab
from softmax_lab import loader

V = sys.modules["softmax_lab.variants"]
dev = softmax_lab.device_info()
STREAM = cp.cuda.get_current_stream()
SHAPES = ((32, 1 << 22), (132, 1 << 22), (64, 1 << 21), (132, 1 << 20), (1024, 1 << 20), (132, 600001),
          (16, 7000001), (7, 1000003))
SPLITS = ("448.8.4.1", "256.8.3.2", "512.8.3.1")


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


def split_launcher(rows, cols, name, dtype="float32", op="softmax"):
    threads, vpt, slots, per_sm = map(int, name.split("."))
    itemsize = V.DTYPES[dtype]
    shape = V.Shape(rows, cols, cols, cols, 0, 0, itemsize, dtype, op)
    defines = V.multi_block_smem_defines(dtype, op, threads, vpt, per_sm, slots) | {"MBS_SPLIT": 1}
    smem = slots * V._multi_block_smem_slot_bytes(threads, vpt)
    kernel = loader.get_kernel("multi_block_smem.cu", "multi_block_smem_split", defines)
    kernel.max_dynamic_shared_size_bytes = smem
    resident = cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.kernel.ptr, threads, smem)
    chunks = -(-V._row_vecs(cols, itemsize) // (threads * vpt))
    items = rows * chunks
    grid = min(resident * dev.sm_count, items)
    if min(grid, chunks) * slots < chunks:
        return None, f"cannot: {resident}/SM x {slots} slots < {chunks} chunks"

    def launch(x, y):
        words, tickets = V._slots_and_tickets(items, STREAM)
        kernel.kernel((grid,), (threads,), (V._ptr(x.data.ptr), V._ptr(y.data.ptr), *shape.scalars(),
                                            np.int64(chunks), np.int32(0), words, tickets),
                      stream=STREAM, shared_mem=smem, enable_cooperative_groups=True)
    return launch, f"{resident}/SM grid {grid}"


print(dev.name, flush=True)
# correctness first, every dtype and op, an odd row (a hang here ends the run by its timeout)
import types

import torch

for dtype in ("float32", "bfloat16", "float16"):
    for op in ("softmax", "log_softmax"):
        rows, cols = 9, 1000003
        xt = (torch.randn(rows, cols, device="cuda") * 3).to(getattr(torch, dtype))
        xt[2, 5] = float("-inf")
        yt = torch.full_like(xt, float("nan"))
        launch, info = split_launcher(rows, cols, "448.8.4.1", dtype, op)
        launch(types.SimpleNamespace(data=types.SimpleNamespace(ptr=xt.data_ptr())),
               types.SimpleNamespace(data=types.SimpleNamespace(ptr=yt.data_ptr())))
        torch.cuda.synchronize()
        ref = (torch.log_softmax if op == "log_softmax" else torch.softmax)(xt.double(), 1)
        got = yt.double()
        fin = torch.isfinite(ref)
        rel = ((got - ref).abs() / ref.abs().clamp_min(1e-30))[fin].max().item()
        off = (got[fin] != ref.to(xt.dtype).double()[fin]).float().mean().item()
        print(f"check {dtype} {op} {rows}x{cols} {info}: nan {torch.isnan(got).sum().item()}, "
              f"-inf kept {bool(got[2, 5] == (float('-inf') if op == 'log_softmax' else 0))}, "
              f"max rel err {rel:.2e}, not the rounded float64 {off:.1e}", flush=True)
        del xt, yt, ref, got
for rows, cols in SHAPES:
    x = cp.random.default_rng(rows + cols).standard_normal((rows, cols), dtype=cp.float32)
    y_rule, y_split, y_again = cp.full_like(x, cp.nan), cp.full_like(x, cp.nan), cp.full_like(x, cp.nan)
    copy = times_ms(lambda: cp.copyto(y_rule, x))[1]
    rule = V.get_variant("multi_block_smem").prepare(V.Shape(rows, cols, cols, cols), dev)
    rule(x.data.ptr, y_rule.data.ptr, STREAM)
    runs = [("rule", lambda: rule(x.data.ptr, y_rule.data.ptr, STREAM))]
    notes = []
    for name in SPLITS:
        launch, info = split_launcher(rows, cols, name)
        if launch is None:
            notes.append(f"split:{name} {info}")
            continue
        y_split.fill(cp.nan)
        launch(x, y_split)
        launch(x, y_again)
        same = bool((y_split.view(cp.uint32) == y_again.view(cp.uint32)).all())
        diff = float(cp.abs(y_rule - y_split).max() / cp.abs(y_rule).max())
        notes.append(f"split:{name} {info} twice bitwise {same} diff {diff:.1e}")
        runs.append((f"split:{name}", lambda launch=launch: launch(x, y_split)))
    out = []
    for rep in range(2):
        for name, fn in runs:
            lo, med, hi = times_ms(fn) / copy
            out.append(f"{name} {med:.3f} ({lo:.3f}-{hi:.3f})")
    print(f"{rows}x{cols} copy {copy * 1e3:.0f} us; " + "; ".join(notes) + "\n   " + " | ".join(out), flush=True)
    del x, y_rule, y_split, y_again
    cp.get_default_memory_pool().free_all_blocks()
