"""Session 22 probe 58: multi_block_smem's block shape and lag at 4M float32 columns on main, timed as the
sweep times (CUDA events around each call, 5 warm-up calls, median of 30) ÷ cupy.copyto of the same bytes.
PYTHONPATH=. python3 notes/tune-runs/2026-12-02-held-chunks-p58-knobs.py
"""
import sys, numpy as np, cupy as cp
import softmax_lab
V = sys.modules["softmax_lab.variants"]
dev = softmax_lab.device_info()
S = cp.cuda.get_current_stream()
def med(fn, n=30):
    for _ in range(5): fn()
    ts = []
    for _ in range(n):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record(); fn(); b.record(); b.synchronize()
        ts.append(cp.cuda.get_elapsed_time(a, b))
    return float(np.median(ts))
def shape(r, c):
    return V.Shape(r, c, c, c, 0, 0, 4, "float32", "softmax")
for r, c, cands in ((32, 1 << 22, ["mbs", "448.8.4.1.2", "448.8.4.1.-1", "416.8.4.1.-1", "480.7.4.1.-1", "448.8.4.1.3", "512.7.4.1.-1"]),
                    (128, 1 << 22, ["mbs", "448.8.4.1.2", "416.8.4.1.-1", "480.7.4.1.-1", "512.7.4.1.-1"])):
    x = cp.random.default_rng(0).standard_normal((r, c), dtype=cp.float32); y = cp.empty_like(x)
    copy = med(lambda: cp.copyto(y, x))
    out = []
    for name in cands:
        if name == "mbs":
            launch = V.get_variant("multi_block_smem").prepare(shape(r, c), dev)
        else:
            t, v, s, b, lag = map(int, name.split("."))
            try:
                launch = V.get_variant("multi_block_smem").prepare(shape(r, c), dev, threads=t, vpt=v, slots=s,
                                                                   blocks_per_sm=b, lag=None if lag < 0 else lag)
            except Exception as e:  # noqa: BLE001
                out.append(f"{name} cannot ({str(e)[:60]})"); continue
        y.fill(cp.nan); launch(x.data.ptr, y.data.ptr, S)
        ok = bool(cp.isfinite(y).all()) and float(cp.abs(y.sum(1) - 1).max()) < 1e-3
        out.append(f"{name} {med(lambda: launch(x.data.ptr, y.data.ptr, S)) / copy:.3f}{'' if ok else ' BAD'}")
    print(f"{r}x{c}: " + " | ".join(out), flush=True)
    del x, y; cp.get_default_memory_pool().free_all_blocks()
