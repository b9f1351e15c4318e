"""Session 15 probe 36: float32 single_read with the halves' one-loop predicate (SR_WHOLE_PATH=1: a slice
that holds all but each thread's last vector loads and stores those without comparing indices; "w1")
against main's float32 code (SR_WHOLE_PATH=0, "w0"), auto's single_read plan (line-shifted where the
launcher shifts it); cluster_row's plan ("cr") where auto takes cluster_row.  Times ÷ copy (torch copy_),
back to back, median of 9 (2nd-8th), every output first checked against torch's float32 op, all rows.
PYTHONPATH=. python3 notes/tune-runs/2026-12-02-float-whole-path-p36.py
(The harness of probe 33.)
"""
import sys
from dataclasses import replace
import torch, cupy as cp
import softmax_lab
V = sys.modules["softmax_lab.variants"]
dev = softmax_lab.device_info()
S = cp.cuda.Stream.null
TD = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
TINY = {"float32": 1e-37, "bfloat16": 1e-37, "float16": 1e-7}
L2 = 60 * 2**20
EXTRA = {}
_defines = V.ClusterConfig.defines
V.ClusterConfig.defines = lambda self, dev=None: _defines(self, dev) | EXTRA


def tm(call, nsets, reps=9):
    k = max(6, nsets)
    for i in range(k): call(i % nsets)
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for i in range(k): call(i % nsets)
        b.record(); b.synchronize()
        out.append(a.elapsed_time(b) / k)
    out.sort()
    return out[reps // 2], out[1], out[-2]


def run(r, c, cr=False):
    global EXTRA
    torch.manual_seed(0)
    d, op, it = "float32", "softmax", 4
    nsets = max(1, min(8, -(-4 * L2 // (2 * r * c * it))))
    xs = [(torch.randn(r, c, device="cuda") * 3).to(TD[d]) for _ in range(nsets)]
    ys = [torch.empty_like(xs[0]) for _ in range(nsets)]
    floor = tm(lambda i: ys[i].copy_(xs[i]), nsets)[0]
    sh = V.Shape(r, c, c, c, 0, 0, it, d, op, 0, 0)
    plan = V.line_shifted(V.single_read_plan(c, dev, r, d, op), sh, dev)
    res = []
    for label in (["cr"] if cr else []) + ["w0", "w1"] * 2:
        EXTRA = {"SR_WHOLE_PATH": int(label[1])} if label[0] == "w" else {}
        launch = V.get_variant("cluster_row" if label == "cr" else "single_read").prepare(sh, dev)
        call = lambda i: launch(xs[i].data_ptr(), ys[i].data_ptr(), S)
        ys[0].fill_(float("nan")); call(0); torch.cuda.synchronize()
        bad = 0
        for lo in range(0, r, 512):
            want = torch.softmax(xs[0][lo:lo + 512], -1)
            got = ys[0][lo:lo + 512]
            bad += int((~((got - want).abs() <= 1e-5 * want.abs() + TINY[d])).sum().item())
        t = tm(call, nsets)
        res.append(f"{label} {t[0] / floor:.3f} ({t[1] / floor:.3f}-{t[2] / floor:.3f}){f' BAD {bad}' if bad else ''}")
    EXTRA = {}
    print(f"{r}x{c} float32 softmax {plan.label()}: " + " | ".join(res), flush=True)
    del xs, ys
    torch.cuda.empty_cache()


for r, c, cr in ((4096, 100003, True), (4096, 200003, False), (4096, 50257, True), (4096, 128259, False),
                 (4096, 262147, False), (4096, 300001, False), (4096, 151936, False), (4096, 128256, False),
                 (8192, 65536, True), (16384, 32000, True), (4096, 393216, False), (1024, 1048576, False),
                 (1300, 500000, False), (1056, 100003, True)):
    run(r, c, cr)
