"""Probe 109 (2026-12-03, thirty-fifth session): cluster_row's float32 backward stores and dy loads,
by CUPTI kernel durations over a grid of shapes.  Probe 108 (CUPTI, ± 0.2 %): at 4096 x 151936
evict-first stores ran 1694.8 µs against main's evict-last 1706.5 (quack 1694.5), dy loaded
evict-last 1699.0; log_softmax backward 1700.3 / 1698.9 against 1707.1; 196608 2213.2 against
2218.8.  Main's evict-last stores were chosen in probe 87 by p67's rounds (÷ torch.add, ± 0.5 %),
where evict-first lost only at 132 x 151936 and 4096 x 393216.
Builds (CR_STORE: 0 evict-first, 1 evict-last (main), 2 plain; GRAD_LOAD: 0 plain (main), 2
evict-last), auto's cluster_row plan for each shape; inputs in as many sets as make four times the
L2 (so no call finds its inputs left in L2 by the call before), 5 warm-up calls, 20 under
torch.profiler; the median duration per call (all kernels of a call: torch.add is two kernels past
2^31 bytes).  Every build's output checked against float64 on 32 rows first.
Decision, fixed before the run: a build replaces main's where its total over the shapes is lower,
it is ahead at 4096 x 151936 (softmax backward) by 0.3 % or more and behind main at no shape by
more than 0.5 %.
  PYTHONPATH=.:<quack> python3 notes/tune-runs/2026-12-03-backward-stores-cupti-p109.py [seconds]
Ran 2026-12-03 17:37 UTC (-backward-stores-cupti-p109.txt): totals ÷ main's: evict-first stores
0.9975, plain 1.0016, evict-first with dy evict-last 0.9956, dy evict-last 0.9976.  Evict-first
stores with dy evict-last: 4096 x 151936 1689.3 µs against main's 1705.9 (quack 1695.3), ahead at
every shape of two blocks per SM but 32 x 151936 (17.1 against 16.7 µs), 0.4 % behind at one block
per SM (4096 x 393216, 4096 x 262144).  Evict-first stores alone pass the decision; the pair, ahead of
them at 14 of 16 shapes of two blocks per SM (level at one, behind at 32 x 151936), became a rule by
blocks per SM, checked on other shapes in probe 110.
"""
import sys
import time
from multiprocessing import Pool

import cupy
import numpy as np

import softmax_lab
from softmax_lab import loader

LIMIT = float(sys.argv[1]) if len(sys.argv) > 1 else 480
V = sys.modules["softmax_lab.variants"]
T0 = time.time()
EXTRA = {}
_kernel_defines = V.kernel_defines
V.kernel_defines = lambda dtype="float32", op="softmax": _kernel_defines(dtype, op) | EXTRA
BUILDS = {"last (main)": {}, "first": {"CR_STORE": 0}, "plain": {"CR_STORE": 2},
          "first, dy last": {"CR_STORE": 0, "GRAD_LOAD": 2}, "dy last": {"GRAD_LOAD": 2}}
SM, LOG = "softmax_backward", "log_softmax_backward"
SHAPES = [(4096, 151936, SM), (4096, 151936, LOG), (1056, 151936, SM), (2048, 151936, SM), (8192, 151936, SM),
          (132, 151936, SM), (132, 151936, LOG), (32, 151936, SM), (4096, 128256, SM), (4096, 128256, LOG),
          (4096, 196608, SM), (528, 196608, LOG), (8192, 65536, SM), (8192, 65536, LOG), (16384, 32000, SM),
          (132, 32000, SM), (4096, 393216, SM), (4096, 393216, LOG), (4096, 262144, SM)]
L2 = 60 << 20
MAIN = "last (main)"  # the build the others are divided by


def shape_of(r, c, op):
    return V.Shape(r, c, c, c, 0, 0, 4, "float32", op, c, 0)


def precompile(dev):
    jobs = set()
    for r, c, op in SHAPES:
        plan = V.cluster_row_plan(c, dev, r, 4, 2)
        for extra in BUILDS.values():
            jobs.add(tuple(sorted((plan.defines(dev) | _kernel_defines("float32", op) | extra).items())))
    arch = loader.arch_for(dev.compute_capability)
    with Pool(15) as pool:
        pool.starmap(loader._cached_cubin, [("cluster_row.cu", arch, j) for j in sorted(jobs)])
    print(f"{len(jobs)} builds compiled in {time.time() - T0:.0f} s", flush=True)


def per_call(call, nsets, calls=20):
    import torch
    from torch.profiler import ProfilerActivity, profile
    for i in range(5):
        call(i % nsets)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(calls):
            call(i % nsets)
        torch.cuda.synchronize()
    ks = sorted((e.time_range.start, e.time_range.end) for e in prof.events()
                if e.device_type == torch.autograd.DeviceType.CUDA)
    per = len(ks) // calls
    return float(np.median([sum(e - s for s, e in ks[i * per:(i + 1) * per]) for i in range(calls)]))


def error(out, want):
    return ((out.double() - want).abs().max() / want.abs().max()).nan_to_num(1e9).item()


def shape(dev, r, c, op):
    import torch
    nsets = max(1, min(8, -(-4 * L2 // (2 * r * c * 4))))
    torch.manual_seed(r + c)
    ys, dys = [], []
    for _ in range(nsets):
        x = torch.randn(r, c, device="cuda") * 3
        ys.append(torch.softmax(x, -1) if op == SM else torch.log_softmax(x, -1))
        del x
        dys.append(torch.randn(r, c, device="cuda"))
    dxs = [torch.empty_like(ys[0]) for _ in range(nsets)]
    y64, g64 = ys[0][:32].double(), dys[0][:32].double()
    want = y64 * (g64 - (g64 * y64).sum(-1, keepdim=True)) if op == SM else g64 - y64.exp() * g64.sum(-1, keepdim=True)
    sh = shape_of(r, c, op)
    stream = cupy.cuda.Stream.null
    calls = {}
    for label, extra in BUILDS.items():
        EXTRA.clear()
        EXTRA.update(extra)
        f = V._prepare_cluster_row(sh, dev)
        EXTRA.clear()
        calls[label] = lambda i, f=f: f(ys[i].data_ptr(), dxs[i].data_ptr(), stream, dys[i].data_ptr())
    try:
        from quack.softmax import softmax_bwd
        if op == SM:
            calls["quack"] = lambda i: softmax_bwd(dys[i], ys[i])
    except ImportError:
        pass
    for label, call in calls.items():
        dxs[0].fill_(float("nan"))
        got = call(0)
        torch.cuda.synchronize()
        err = error((got if got is not None else dxs[0])[:32], want)
        if not err < 1e-5:
            print(f"  {label}: error {err:.2g}: FAILED", flush=True)
    res = {label: per_call(call, nsets) for label, call in calls.items()}
    res["torch.add"] = per_call(lambda i: torch.add(ys[i], dys[i], out=dxs[i]), nsets)
    main = res[MAIN]
    print(f"{r} x {c} {op} ({V.cluster_row_plan(c, dev, r, 4, 2).label()}, {nsets} sets): "
          + ", ".join(f"{k} {v:.1f} µs ({v / main:.4f})" for k, v in res.items()), flush=True)
    return res


def main():
    dev = softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    precompile(dev)
    totals = {}
    for r, c, op in SHAPES:
        if time.time() - T0 > LIMIT:
            print("time limit", flush=True)
            break
        res = shape(dev, r, c, op)
        for k in BUILDS:
            totals.setdefault(k, []).append(res[k])
        import torch
        torch.cuda.empty_cache()
    print(f"over {len(totals[MAIN])} shapes, total ÷ {MAIN}'s: " + ", ".join(
        f"{k} {sum(v) / sum(totals[MAIN]):.4f}" for k, v in totals.items()), flush=True)


if __name__ == "__main__":
    main()
