"""Session 15 probe 33: single_read with each stage's bulk copy in `parts` pieces (ClusterConfig.parts,
SR_STAGE_PARTS): piece p of the next row is issued as soon as piece p of this one is in registers (parts=1:
main's code and SASS).  Auto's single_read plan with parts = 1, 2, 3, 4 (where ptxas keeps it without spills),
cluster_row's plan ("cr") where auto takes cluster_row; times ÷ copy (torch copy_), back to back, median of 9
(2nd-8th), every output first checked against torch's float32 op of the same input, all rows.
(Probe 32, the first version, split the stage in parts without room for the line shift: parts raced where
slices are line-shifted, and a loop per part left its vectors in local memory.)
git apply notes/tune-runs/2026-12-02-stage-parts-p33.patch && PYTHONPATH=. python3 notes/tune-runs/2026-12-02-stage-parts-p33.py"""
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


def run(r, c, d, op, parts, plan=None, cr=False):
    torch.manual_seed(0)
    it = V.DTYPES[d]
    nsets = max(1, min(8, -(-4 * L2 // (2 * r * c * it))))
    xs = [(torch.randn(r, c, device="cuda") * 3).to(TD[d]) for _ in range(nsets)]
    ys = [torch.empty_like(xs[0]) for _ in range(nsets)]
    floor = tm(lambda i: ys[i].copy_(xs[i]), nsets)[0]
    f = torch.softmax if op == "softmax" else torch.log_softmax
    sh = V.Shape(r, c, c, c, 0, 0, it, d, op, 0, 0)
    plan = plan or V.single_read_plan(c, dev, r, d, op)
    res = []
    for label in (["cr"] if cr else []) + [f"p{p}" for p in parts] * 2:
        if label == "cr":
            launch = V.get_variant("cluster_row").prepare(sh, dev)
        else:
            launch = V.get_variant("single_read").prepare(sh, dev, config=replace(plan, parts=int(label[1:])))
        call = lambda i: launch(xs[i].data_ptr(), ys[i].data_ptr(), S)
        ys[0].fill_(float("nan")); call(0); torch.cuda.synchronize()
        bad = 0
        for lo in range(0, r, 512):
            want = f(xs[0][lo:lo + 512].float(), -1)
            got = ys[0][lo:lo + 512].float()
            tol = (1e-5 if it == 4 else 1e-2) * want.abs() + (1e-5 if op == "log_softmax" else TINY[d])
            bad += int((~((got - want).abs() <= tol)).sum().item())
        t = tm(call, nsets)
        res.append(f"{label} {t[0] / floor:.3f} ({t[1] / floor:.3f}-{t[2] / floor:.3f}){f' BAD {bad}' if bad else ''}")
    print(f"{r}x{c} {d} {op} {plan.label()}: " + " | ".join(res), flush=True)
    del xs, ys
    torch.cuda.empty_cache()


F = "float32"
run(4096, 151936, F, "softmax", (1, 2, 3, 4))
run(8192, 65536, F, "softmax", (1, 2, 4), cr=True)
run(4096, 100003, F, "softmax", (1, 2, 4), cr=True)
run(4096, 128256, F, "softmax", (1, 2, 4))
run(16384, 32000, F, "softmax", (1, 2, 4))
run(4096, 393216, F, "softmax", (1, 3))
run(4096, 262144, F, "softmax", (1, 2, 4))
run(1024, 1048576, F, "softmax", (1, 2, 4))
run(128, 4194304, F, "softmax", (1, 2, 4), V.ClusterConfig(132, 512, 16, 1, 1, memory_merge=True))
run(132, 151936, F, "softmax", (1, 2, 4), cr=True)
run(4096, 151936, "bfloat16", "softmax", (1, 2, 4))
run(4096, 151936, "float16", "log_softmax", (1, 2, 4))
run(4096, 393216, "bfloat16", "softmax", (1, 2, 4))
run(4096, 200003, "bfloat16", "softmax", (1, 2, 4))
run(4096, 128256, "float16", "softmax", (1, 2, 4))
