"""Probe 76: what quack's softmax does differently where it leads, by ncu.  One launch of each plan
(after three unprofiled ones) inside an NVTX range "prof", so that ncu profiles only those:
float32 4096 x 151936 (quack; cluster_row at quack's own 8 x 256 x 19 x 2; auto, single_read),
float32 132 x 151936 (quack; auto, cluster_row) and bf16 132 x 393216 (quack; auto, cluster_row).
`time` runs p67's back-to-back timing of the same plans instead.
  ncu --nvtx --nvtx-include "prof/" --set full -o $OUT/p76 python3 notes/tune-runs/2026-12-03-ncu-quack-p76.py prof
  PYTHONPATH=. python3 notes/tune-runs/2026-12-03-ncu-quack-p76.py time"""
import sys
import time

import softmax_lab

MODE = sys.argv[1] if len(sys.argv) > 1 else "time"
sys.argv = sys.argv[:1]  # p67 and p71 read their own arguments at import
sys.path.insert(0, "notes/tune-runs")
p67 = __import__("2026-12-02-halves-group-or-cluster-p67")
p71 = __import__("2026-12-02-cluster-row-staged-p71")
V = sys.modules["softmax_lab.variants"]
SHAPES = [(4096, 151936, "float32", V.RowClusterPlan(8, 256, 19, 2)), (132, 151936, "float32", None),
          (132, 393216, "bfloat16", None)]


def plans(rows, cols, dtype, forced, dev, qf):
    sh = V.Shape(rows, cols, cols, cols, 0, 0, V.DTYPES[dtype], dtype, "softmax")
    auto = V.preferences(sh, dev)[0]
    out = [(f"auto:{auto.name}", lambda: auto.prepare(sh, dev))]
    if forced is not None:
        out.append((f"cluster_row:{forced.label()}", lambda: V.get_variant("cluster_row").prepare(sh, dev, plan=forced)))
    if qf is not None:
        out.append(("quack", lambda: p71.quack_launch(qf, sh)))
    return out


def profile(rows, cols, dtype, named, dev):
    import cupy as cp
    import torch
    stream = cp.cuda.Stream.null
    x = (torch.randn(rows, cols, device="cuda") * 3).to(getattr(torch, dtype))
    y = torch.empty_like(x)
    for label, make in named:
        launch = make()
        for _ in range(3):
            launch(x.data_ptr(), y.data_ptr(), stream)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("prof")
        launch(x.data_ptr(), y.data_ptr(), stream)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        print(f"profiled {rows}x{cols} {dtype} {label}", flush=True)
    del x, y
    torch.cuda.empty_cache()


def main():
    dev = softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    qf = p71.quack_plan()
    for rows, cols, dtype, forced in SHAPES:
        named = plans(rows, cols, dtype, forced, dev, qf)
        if MODE == "prof":
            profile(rows, cols, dtype, named, dev)
        else:
            p67.job(rows, cols, dtype, "softmax", named, dev)


if __name__ == "__main__":
    main()
