"""Session 19 probe 53: the grid's few-row shapes timed as the sweep times them (softmax_lab.timing.gpu_times:
5 warm-up calls, 30 calls back to back on one buffer set, each between its own pair of events; median), where
p50-p52's back-to-back passes over alternating buffer sets read 132 x 151936 float32 at 0.99-1.02 x copy and the
grid 1.16 (quack 1.10).  Candidates: auto and cluster_row plans (cluster.threads.vpt.blocks per SM, p46's codes),
quack's block shapes among them (8 x 256 x 19 x 2 for float32 151936).  Times ÷ torch copy_ timed the same way.
PYTHONPATH=. python3 notes/tune-runs/2026-12-02-few-rows-sweep-timing-p53.py
"""
import statistics
import sys

import cupy as cp
import torch

import softmax_lab
from softmax_lab.timing import gpu_times

V = sys.modules["softmax_lab.variants"]
dev = softmax_lab.device_info()
TD = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def plan(code):
    c, t, v, b = map(int, code.split("."))
    return V.RowClusterPlan(c, t, v, b, False, 0)


def run(r, c, d, codes):
    torch.manual_seed(0)
    x = torch.randn(r, c, device="cuda").to(TD[d])
    y = torch.empty_like(x)
    stream = cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
    sh = V.Shape(r, c, c, c, 0, 0, x.element_size(), d, "softmax", 0, 0)
    copy = statistics.median(gpu_times(lambda: y.copy_(x), stream, 30, 5)[0])
    ref = torch.softmax(x.float(), -1)
    res = []
    for code in codes:
        launch = V.preferences(sh, dev)[0].prepare(sh, dev) if code == "auto" else V._prepare_cluster_row(sh, dev, plan(code))
        y.fill_(float("nan"))
        ts = gpu_times(lambda: launch(x.data_ptr(), y.data_ptr(), stream), stream, 30, 5)[0]
        err = float(((y.float() - ref).abs() / ref.abs().clamp_min(1e-30)).nan_to_num(1.0).max())
        ts.sort()
        res.append(f"{code} {statistics.median(ts) / copy:.3f} ({ts[3] / copy:.3f}-{ts[-4] / copy:.3f})"
                   f"{'' if err < 2e-2 else f' BAD {err:.2g}'}")
    print(f"{r}x{c} {d} (copy {copy * 1000:.1f} us, auto {V.preferences(sh, dev)[0].name}): " + " | ".join(res), flush=True)


if __name__ == "__main__":
    print(torch.cuda.get_device_name(), flush=True)
    for _ in range(2):
        run(132, 151936, "float32", ("auto", "16.256.10.4", "8.256.19.2", "8.384.13.2", "16.512.5.2"))
        run(132, 262144, "float32", ("auto", "16.256.16.2", "16.384.11.2"))
        run(132, 262144, "bfloat16", ("auto", "16.256.8.4", "8.256.16.2", "16.128.16.4"))
        run(132, 393216, "bfloat16", ("auto", "16.256.12.3", "8.256.24.2"))
        run(4096, 128256, "bfloat16", ("auto", "8.256.8.4", "4.256.16.2"))
