"""Session 15 probe 35: the halves' softmax in wide plans (each vector widened to 8 floats, e kept, one
exponential an element) at two blocks per SM in clusters of 8 or 16, against auto's plan ("plan"); forced
configurations through prepare(shape, dev, config=); times ÷ copy (torch copy_), back to back, median of 9
(2nd-8th), every output first checked against torch's float32 op of the same input, all rows.
PYTHONPATH=. python3 notes/tune-runs/2026-12-02-wide-two-blocks-p35.py
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


def run(r, c, d, op, configs):
    torch.manual_seed(0)
    it = V.DTYPES[d]
    nsets = max(1, min(8, -(-4 * L2 // (2 * r * c * it))))
    xs = [(torch.randn(r, c, device="cuda") * 3).to(TD[d]) for _ in range(nsets)]
    ys = [torch.empty_like(xs[0]) for _ in range(nsets)]
    floor = tm(lambda i: ys[i].copy_(xs[i]), nsets)[0]
    f = torch.softmax if op == "softmax" else torch.log_softmax
    sh = V.Shape(r, c, c, c, 0, 0, it, d, op, 0, 0)
    plan = V.single_read_plan(c, dev, r, d, op)
    res = []
    for config in ([None] + list(configs)) * 2:
        label = "plan" if config is None else config.label()
        try:
            launch = V.get_variant("single_read").prepare(sh, dev, **({"config": config} if config else {}))
        except Exception as e:  # noqa: BLE001
            res.append(f"{label} cannot: {str(e)[:80]}")
            continue
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
    print(f"{r}x{c} {d} {op} plan {plan.label()}: " + " | ".join(res), flush=True)
    del xs, ys
    torch.cuda.empty_cache()


C = V.ClusterConfig
for d in ("bfloat16", "float16"):
    run(4096, 151936, d, "softmax", (C(8, 256, 10, 1, 2, wide=True), C(8, 320, 8, 1, 2, wide=True),
                                     C(4, 512, 10, 1, 1, wide=True)))
run(4096, 128256, "bfloat16", "softmax", (C(8, 256, 8, 1, 2, wide=True), C(8, 320, 7, 1, 2, wide=True)))
run(4096, 200003, "bfloat16", "softmax", (C(16, 256, 7, 1, 2, wide=True),))
run(4096, 100003, "bfloat16", "softmax", (C(8, 224, 7, 1, 2, wide=True), C(8, 256, 7, 1, 2, wide=True)))
run(16384, 65536, "bfloat16", "softmax", (C(4, 256, 8, 1, 2, wide=True),))
run(1056, 151936, "bfloat16", "softmax", (C(8, 256, 10, 1, 2, wide=True),))
