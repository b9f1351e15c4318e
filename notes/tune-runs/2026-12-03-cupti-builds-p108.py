"""Probe 108 (2026-12-03, thirty-fifth session): cluster_row's float32 backward against quack by
CUPTI kernel durations.  Probe 107: at 4096 x 151936 quack's softmax_bwd kernel runs 1697.6 µs
against cluster_row's 1708.4 (0.6 %; each within ± 2 µs over 20 calls), at 196608 2210.4 against
2218.6; the gaps between calls are alike.  The bench's event pairs see that; p67's rounds (÷ a
torch.add of two kernels, 6 calls an event pair) had hidden it in their noise.
1. Rows: 1056-8192 rows of 151936, main's build and quack: duration = a + b rows, so that a fixed
   cost (start, tail) and a cost per row can be told apart.
2. Builds at 4096 x 151936 (and 196608): the defines probes 84-106 measured with p67's rounds,
   now by duration, main's build first and last (drift).
Each: 5 warm-up calls, then 20 back to back under torch.profiler (CUDA activity only); the median
kernel duration.  Every build's output is checked against float64 on 32 rows first.
  patch -p1 < notes/tune-runs/2026-12-03-prefetch-and-order-p106.patch  # HELD_PREFETCH
  PYTHONPATH=.:<quack> python3 notes/tune-runs/2026-12-03-cupti-builds-p108.py
  (clusters of 14 and 15 need -cluster-sizes-p105.patch too)
Ran 2026-12-03 17:34 UTC (-cupti-builds-p108.txt): at 4096 x 151936 main 1706.5 µs (first and last),
evict-first stores 1694.8, dy evict-last 1699.0, plain stores 1703.3, prefetch 64 / 128 1705.8 /
1705.5, even slices 1708.6, clusters of 15 / 14 1706.9 / 1705.9, dy evict-first 1734.2, y
evict-first 1749.2, quack 1694.5.  Rows: main 29.4 µs + 412.6 ns a row, quack 2.6 µs + 413.6 ns
(1056 rows: 487.8 against 439.4, a point p109 did not repeat: 442.2 against 439.7).
"""
import sys
import time

import cupy
import numpy as np

import softmax_lab

V = sys.modules["softmax_lab.variants"]
EXTRA = {}
_kernel_defines = V.kernel_defines
V.kernel_defines = lambda dtype="float32", op="softmax": _kernel_defines(dtype, op) | EXTRA
V._check_cluster_and_threads = lambda cluster, threads: None  # clusters of 14 and 15 (p105's patch)
BUILDS = [("main", {}, None), ("stores first", {"CR_STORE": 0}, None), ("stores normal", {"CR_STORE": 2}, None),
          ("dy evict-last", {"GRAD_LOAD": 2}, None), ("dy evict-first", {"GRAD_LOAD": 1}, None),
          ("y evict-first", {"CR_STREAM_LOADS": 1}, None), ("prefetch 64", {"HELD_PREFETCH": 64}, None),
          ("prefetch 128", {"HELD_PREFETCH": 128}, None), ("even slices", {"CR_LINE_SLICES": 0}, None),
          ("cluster 15", {}, 15), ("cluster 14", {}, 14), ("main again", {}, None)]


def durations(call, n=20):
    import torch
    from torch.profiler import ProfilerActivity, profile
    for _ in range(5):
        call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            call()
        torch.cuda.synchronize()
    d = np.array([e.time_range.end - e.time_range.start for e in prof.events()
                  if e.device_type == torch.autograd.DeviceType.CUDA])
    return np.median(d), d.min(), d.max(), len(d)


def data(r, c, op):
    import torch
    torch.manual_seed(r + c)
    x = torch.randn(r, c, device="cuda") * 3
    y = torch.softmax(x, -1) if op == "softmax_backward" else torch.log_softmax(x, -1)
    del x
    dy = torch.randn(r, c, device="cuda")
    y64, g64 = y[:32].double(), dy[:32].double()
    want = y64 * (g64 - (g64 * y64).sum(-1, keepdim=True)) if op == "softmax_backward" else \
        g64 - y64.exp() * g64.sum(-1, keepdim=True)
    return y, dy, torch.empty_like(y), want


def error(out, want):
    return ((out.double() - want).abs().max() / want.abs().max()).nan_to_num(1e9).item()


def launcher(sh, dev, defines, cluster):
    EXTRA.clear()
    EXTRA.update(defines)
    try:
        plan = None
        if cluster:
            vecs = sh.cols * 4 // 16
            vpt = -(-(-(-vecs // cluster)) // 256)
            plan = V.RowClusterPlan(cluster, 256, vpt, V.cluster_row_blocks_per_sm(256, vpt, 2, 4, cluster))
        return V._prepare_cluster_row(sh, dev, plan)
    finally:
        EXTRA.clear()


def run(label, call, out, want):
    out.fill_(float("nan"))
    got = call()
    import torch
    torch.cuda.synchronize()
    err = error((got if got is not None else out)[:32], want)
    med, lo, hi, n = durations(call)
    print(f"  {label:>16}: {med:8.1f} µs (min {lo:.1f}, max {hi:.1f}, {n} kernels), error {err:.2g}", flush=True)
    return med


def rows_scan(dev):
    import torch
    from quack.softmax import softmax_bwd
    c, op = 151936, "softmax_backward"
    fits = {"main": [], "quack": []}
    rows = (1056, 2048, 4096, 8192)
    for r in rows:
        y, dy, dx, want = data(r, c, op)
        sh = V.Shape(r, c, c, c, 0, 0, 4, "float32", op, c, 0)
        f = launcher(sh, dev, {}, None)
        stream = cupy.cuda.Stream.null
        print(f"{r} x {c} float32 {op}", flush=True)
        fits["main"].append(run("main", lambda: f(y.data_ptr(), dx.data_ptr(), stream, dy.data_ptr()), dx, want))
        fits["quack"].append(run("quack", lambda: softmax_bwd(dy, y), dx, want))
        del y, dy, dx
        torch.cuda.empty_cache()
    for name, t in fits.items():
        b, a = np.polyfit(rows, t, 1)
        print(f"  {name}: {a:.1f} µs + {b * 1e3:.2f} ns a row ({b:.4f} µs)", flush=True)


def builds(dev, r, c, op, which):
    import torch
    y, dy, dx, want = data(r, c, op)
    sh = V.Shape(r, c, c, c, 0, 0, 4, "float32", op, c, 0)
    stream = cupy.cuda.Stream.null
    print(f"{r} x {c} float32 {op}", flush=True)
    for label, defines, cluster in BUILDS:
        if label not in which:
            continue
        f = launcher(sh, dev, defines, cluster)
        run(label, lambda: f(y.data_ptr(), dx.data_ptr(), stream, dy.data_ptr()), dx, want)
    if op == "softmax_backward":
        from quack.softmax import softmax_bwd
        run("quack", lambda: softmax_bwd(dy, y), dx, want)
    run("torch.add (2)", lambda: torch.add(y, dy, out=dx), dx, y[:32].double() + dy[:32].double())
    del y, dy, dx
    torch.cuda.empty_cache()


def main():
    dev = softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    every = [b[0] for b in BUILDS]
    builds(dev, 4096, 151936, "softmax_backward", every)
    rows_scan(dev)
    builds(dev, 4096, 196608, "softmax_backward", ["main", "stores first", "stores normal", "dy evict-last",
                                                    "prefetch 64", "prefetch 128", "even slices", "main again"])
    builds(dev, 4096, 151936, "log_softmax_backward", ["main", "stores first", "stores normal", "dy evict-last",
                                                        "prefetch 64", "prefetch 128", "main again"])


if __name__ == "__main__":
    main()
