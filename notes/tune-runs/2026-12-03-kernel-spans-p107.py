"""Probe 107 (2026-12-03, thirty-fifth session): why the two timing methods disagree on the float32
softmax backward at 4096 x 151936.  Probe 106: the bench's measure (an event pair around each call,
timing.gpu_times) puts quack's softmax_bwd at 0.994-0.995 x torch.add and auto at 1.001, in either
order; p67's measure (6 calls between one event pair, median of 9) puts auto at 0.997-0.999 and quack
at 1.000-1.001 (p95, p105, p106).  So quack's calls are shorter inside their own event pairs than
back to back, by about 10 µs.  CUPTI (torch.profiler) gives each kernel's start and end on the GPU:
each candidate's 20 calls back to back, then 20 with the bench's event pairs; per candidate the
median kernel duration, the median gap between consecutive kernels and the events' median.
  PYTHONPATH=.:<quack> python3 notes/tune-runs/2026-12-03-kernel-spans-p107.py
Ran 2026-12-03 17:31 UTC (-kernel-spans-p107.txt): cluster_row's kernel 1708.4 µs against quack's
1697.6 at 151936 (2218.6 / 2210.4 at 196608), gaps between calls 1.3-1.6 µs back to back and
4.4-4.7 µs with the event pairs for both, so the kernels differ, not the calls; p67's rounds had
hidden the 0.6 % (their floor, torch.add past 2^31 bytes, is two kernels of 849 µs).
"""
import time

import cupy
import numpy as np

import softmax_lab
from softmax_lab import bench, timing
from softmax_lab import candidates as cat


def kernels(prof):
    import torch
    out = [(e.time_range.start, e.time_range.end, e.name) for e in prof.events()
           if e.device_type == torch.autograd.DeviceType.CUDA]
    return sorted(out)


def spans(name, call, stream, with_events):
    import torch
    from torch.profiler import ProfilerActivity, profile
    for _ in range(5):
        call()
    stream.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        if with_events:
            times, _ = timing.gpu_times(call, stream, 20, 0)
        else:
            for _ in range(20):
                call()
            times = []
        stream.synchronize()
    ks = kernels(prof)
    names = sorted({k[2] for k in ks})
    dur = np.array([e - s for s, e, _ in ks])
    gaps = np.array([ks[i + 1][0] - ks[i][1] for i in range(len(ks) - 1)])
    starts = np.diff([s for s, _, _ in ks])
    ev = f", events median {np.median(times) * 1e3:.1f} µs" if times else ""
    print(f"  {name:>24} {'events' if with_events else 'back to back'}: {len(ks)} kernels "
          f"({', '.join(n[:60] for n in names)}); duration median {np.median(dur):.1f} µs "
          f"(min {dur.min():.1f}, max {dur.max():.1f}); gap median {np.median(gaps):.2f} µs (max {gaps.max():.2f}); "
          f"start to start median {np.median(starts):.1f} µs{ev}", flush=True)


def main():
    import torch
    dev = softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    for rows, cols, op in [(4096, 151936, "softmax_backward"), (4096, 196608, "softmax_backward"),
                           (4096, 151936, "softmax")]:
        print(f"{rows} x {cols} float32 {op}", flush=True)
        stream = cupy.cuda.Stream(non_blocking=True)
        with stream:
            arrays = bench.make_arrays(rows, cols, "float32", op, 0, torch)
            quack = "quack.softmax_backward" if op == "softmax_backward" else "quack.softmax"
            chosen = [c for c in cat.select(["auto", quack], dtype="float32", op=op) if c.name != "floor.cupy_add"]
            for c in chosen:
                prep = cat.prepare(cat.resolve(c, rows, cols, dev, "float32", op), arrays, dev, torch)
                for with_events in (False, True):
                    spans(c.name, prep.call, stream, with_events)
                del prep
            stream.synchronize()
            del arrays
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
