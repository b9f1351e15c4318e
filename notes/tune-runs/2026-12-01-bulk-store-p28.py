"""Session 13 probe 28: probe 26 (SR_BULK_STORE, the output through shared memory by one bulk copy) over more row
lengths where the buffer fits: rows off 128-byte lines (line-shifted plans) and on them.  Runs on d5cca36 (or
with `git show d5cca36 -- kernels softmax_lab | git apply`): later commits took SR_BULK_STORE out.
4096 rows unless said; times ÷ copy, back to back, median of 9 (2nd-8th), each output checked against
float64 first.  PYTHONPATH=. python3 notes/tune-runs/2026-12-01-bulk-store-p28.py"""
import sys
from dataclasses import replace
import torch, cupy as cp
import softmax_lab
V = sys.modules["softmax_lab.variants"]
C = V.ClusterConfig
dev = softmax_lab.device_info()
S = cp.cuda.Stream.null
TD = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
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


def run(r, c, d, op, alts):
    torch.manual_seed(0)
    it = V.DTYPES[d]
    nsets = max(1, min(8, -(-4 * L2 // (2 * r * c * it))))
    xs = [(torch.randn(r, c, device="cuda") * 3).to(TD[d]) for _ in range(nsets)]
    ys = [torch.empty_like(xs[0]) for _ in range(nsets)]
    floor = tm(lambda i: ys[i].copy_(xs[i]), nsets)[0]
    want = (torch.softmax if op == "softmax" else torch.log_softmax)(xs[0][:256].double(), -1)
    sh = V.Shape(r, c, c, c, 0, 0, it, d, op, 0, 0)
    plan = V.single_read_plan(c, dev, r, d, op)
    res = {}
    for rep in range(2):
        for cfg in [plan] + alts:
            try:
                launch = V.get_variant("single_read").prepare(sh, dev, config=cfg)
            except Exception as e:
                res[cfg.label()] = [f"cannot: {e}"[:90]]
                continue
            call = lambda i: launch(xs[i].data_ptr(), ys[i].data_ptr(), S)
            ys[0].fill_(float("nan")); call(0); torch.cuda.synchronize()
            err = ((ys[0][:256].double() - want).abs().max() / want.abs().max()).nan_to_num(1e9).item()
            t = tm(call, nsets)
            bad = " BAD" if err > (1e-5 if it == 4 else 2e-2) else ""
            res.setdefault(cfg.label(), []).append(f"{t[0] / floor:.3f} ({t[1] / floor:.3f}-{t[2] / floor:.3f}){bad}")
    print(f"{r}x{c} {d} {op}: " + " | ".join(f"{k}{' (plan)' if k == plan.label() else ''} " + " / ".join(v)
                                               for k, v in res.items()), flush=True)
    del xs, ys


def fits(c):
    return c.smem_bytes + c.threads * c.vpt // 2 + 1536 <= dev.smem_optin_bytes // c.blocks_per_sm


def with_bulk(r, c, d, op, extra=()):
    plan = V.single_read_plan(c, dev, r, d, op)
    alts = [replace(plan, bulk_store=True)] if fits(replace(plan, bulk_store=True)) else []
    return (r, c, d, op, alts + [replace(e, bulk_store=True) for e in extra if fits(replace(e, bulk_store=True))])


CASES = [with_bulk(4096, c, "float32", "softmax") for c in (50257, 50000, 100003, 100000, 200003, 100004)] + [
    with_bulk(4096, c, "bfloat16", "softmax") for c in (50257, 32771, 40009)] + [
    with_bulk(4096, 100003, "float32", "log_softmax"), with_bulk(16384, 32000, "float16", "softmax")]
for r, c, d, op, alts in CASES:
    run(r, c, d, op, alts)
