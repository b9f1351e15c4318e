"""Session 15 probe 34: why the recorded grid puts auto at 1.19 x copy at 132 x 151936 while back-to-back
probes put cluster_row near copy (p33: 1.03 ÷ torch copy_).  For each shape, on one input and one output
(as the bench has them) and on a non-blocking stream: auto through the API and copy.float4 / copy.memcpy
timed (a) as the bench times them (a pair of events around each call, calls queued back to back, median of 30
after 5 warm-up calls: timing.gpu_times) and (b) one pair of events around 30 calls, /30; auto also (c) as its
launcher alone (no API), both ways.  Times in µs, then auto ÷ copy.float4 for each way.
PYTHONPATH=. python3 notes/tune-runs/2026-12-02-timing-methods-p34.py"""
import sys
import numpy as np
import cupy as cp
import softmax_lab
from softmax_lab import bench, candidates as cat, timing
V = sys.modules["softmax_lab.variants"]
dev = softmax_lab.device_info()


def batch(call, stream, n=30, warm=5):
    for _ in range(warm): call()
    a, b = cp.cuda.Event(), cp.cuda.Event()
    out = []
    for _ in range(5):
        a.record(stream)
        for _ in range(n): call()
        b.record(stream)
        stream.synchronize()
        out.append(cp.cuda.get_elapsed_time(a, b) / n * 1e3)
    return float(np.median(out))


def per_call(call, stream):
    return float(np.median(timing.gpu_times(call, stream, 30, 5)[0])) * 1e3


for r, c in ((132, 151936), (132, 262144), (32, 151936), (132, 32000), (4096, 151936), (8192, 65536), (1024, 393216)):
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        arrays = bench.make_arrays(r, c, "float32", "softmax", 0, None)
        res = {}
        for name in ("auto", "copy.float4", "copy.memcpy"):
            cand = cat.resolve(next(k for k in cat.candidates() if k.name == name), r, c, dev)
            call = cat.prepare(cand, arrays, dev).call
            res[name] = (per_call(call, stream), batch(call, stream))
        v = cat.pick(r, c, dev)
        launch = v.prepare(V.Shape(r, c, c, c, 0, 0, 4, "float32", "softmax", 0, 0), dev)
        x, y = arrays.x.data.ptr, arrays.out.data.ptr
        res["launcher"] = (per_call(lambda: launch(x, y, stream), stream), batch(lambda: launch(x, y, stream), stream))
        f4 = res["copy.float4"]
        print(f"{r}x{c} auto={v.name}: " + " | ".join(f"{k} {a:.1f}/{b:.1f}" for k, (a, b) in res.items()) +
              f" || auto÷float4 per-call {res['auto'][0] / f4[0]:.3f} batch {res['auto'][1] / f4[1]:.3f}"
              f"; launcher per-call {res['launcher'][0] / f4[0]:.3f} batch {res['launcher'][1] / f4[1]:.3f}", flush=True)
        del arrays
