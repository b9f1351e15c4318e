"""Prepared in session 11, run in session 12 with five backward jobs added: single_read launched non-persistent (groups = rows: one
row per cluster, the hardware scheduling clusters as blocks leave, quack's structure) against the persistent grid,
at the plan and at quack's decomposition.  Session 11 probe 12 was: single_read at the plan's cluster and twice it, one and two blocks per SM, block shapes of
256-640 threads (quack's fp32 151936 forward: clusters of 8, 256 threads, 76 KB a block, two per SM), times ÷ copy
(forward) or ÷ torch.add (backward), back to back, median (2nd-8th of 9).  PYTHONPATH=. python3 notes/tune-runs/2026-12-01-non-persistent-p17.py"""
import sys
from concurrent.futures import ThreadPoolExecutor
import torch, cupy as cp
import softmax_lab
from softmax_lab import loader
from softmax_lab.device import max_active_clusters
V = sys.modules["softmax_lab.variants"]
dev = V._H200 if "list" in sys.argv else softmax_lab.device_info()
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


def candidates(r, c, d, op):
    it, bw = V.DTYPES[d], op.endswith("backward")
    arrays = 2 if bw else 1
    plan = V.single_read_config(c, dev, r, it, arrays=2) if bw else V.single_read_plan(c, dev, r, d, op)
    out = [plan]
    vecs = -(-c * it // 16)
    for cl, t, bps in ((8, 256, 2), (8, 320, 2), (16, 256, 2), (4, 512, 1), (8, 512, 1)):
        per = -(-vecs // cl)
        v = -(-per // t)
        try:
            q = V.ClusterConfig(cl, t, v, 1, bps, arrays, plan.wide)
        except ValueError:
            continue
        if V._block_smem(t, v, 1, arrays) <= V._smem_budget(dev, bps) and per / (t * v) >= 0.85:
            out.append(q)
    return list(dict.fromkeys(out))


def run(r, c, d, op):
    torch.manual_seed(0)
    it, bw = V.DTYPES[d], op.endswith("backward")
    sh = V.Shape(r, c, c, c, 0, 0, it, d, op, c if bw else 0, 0)
    auto = V.preferences(sh, dev)[0]
    nsets = max(1, min(8, -(-4 * L2 // ((3 if bw else 2) * r * c * it))))
    if bw:
        fwd = torch.softmax if op == "softmax_backward" else torch.log_softmax
        xs = [fwd(torch.randn(r, c, device="cuda") * 3, -1).to(TD[d]) for _ in range(nsets)]
        gs = [torch.randn(r, c, device="cuda").to(TD[d]) for _ in range(nsets)]
        ys = [torch.empty_like(xs[0]) for _ in range(nsets)]
        floor = tm(lambda i: torch.add(xs[i], gs[i], out=ys[i]), nsets)[0]
        y64, g64 = xs[0].double(), gs[0].double()
        want = y64 * (g64 - (g64 * y64).sum(-1, keepdim=True)) if op == "softmax_backward" else g64 - y64.exp() * g64.sum(-1, keepdim=True)
    else:
        xs = [(torch.randn(r, c, device="cuda") * 3).to(TD[d]) for _ in range(nsets)]
        ys = [torch.empty_like(xs[0]) for _ in range(nsets)]
        floor = tm(lambda i: ys[i].copy_(xs[i]), nsets)[0]
        want = (torch.softmax if op == "softmax" else torch.log_softmax)(xs[0].double(), -1)
    res = []
    plans = [(f"auto:{auto.name}", None)] + [(f"sr{q.label()}{'-rows' if g else ''}", (q, g))
                                             for q in candidates(r, c, d, op) for g in (None, r)]
    for label, q in plans:
        try:
            launch = auto.prepare(sh, dev) if q is None else \
                V.get_variant("single_read").prepare(sh, dev, config=q[0], groups=q[1])
            call = (lambda i: launch(xs[i].data_ptr(), ys[i].data_ptr(), S, gs[i].data_ptr())) if bw else \
                (lambda i: launch(xs[i].data_ptr(), ys[i].data_ptr(), S))
            ys[0].fill_(float("nan")); call(0); torch.cuda.synchronize()
            err = ((ys[0].double() - want).abs().max() / want.abs().max()).nan_to_num(1e9).item()
            t = tm(call, nsets)
            bad = '' if err < (1e-5 if it == 4 else 2e-2) else f' BAD {err:.2g}'
            res.append((t[0] / floor, f"{label} {t[0] / floor:.3f} ({t[1] / floor:.3f}-{t[2] / floor:.3f}){bad}"))
        except Exception as e:
            res.append((9, f"{label} ERR {str(e)[:120]}"))
        torch.cuda.synchronize()
    res.sort()
    print(f"{r}x{c} {d} {op} (floor {floor * 1e3:.0f} us): " + " | ".join(s for _, s in res), flush=True)


jobs = [(4096, 151936, "bfloat16", "softmax_backward"), (4096, 151936, "bfloat16", "log_softmax_backward"), (4096, 393216, "bfloat16", "log_softmax_backward"), (4096, 151936, "float32", "log_softmax_backward"), (4096, 128256, "float32", "softmax_backward"), (4096, 151936, "float32", "softmax"), (132, 151936, "float32", "softmax"), (4096, 128256, "float32", "softmax"),
        (8192, 65536, "float32", "softmax"), (132, 262144, "float32", "softmax"), (4096, 151936, "float32", "softmax_backward"),
        (4096, 151936, "bfloat16", "softmax"), (4096, 393216, "bfloat16", "softmax")]
if len(sys.argv) > 1 and sys.argv[1] == "list":
    for j in jobs:
        print(j, [q.label() for q in candidates(*j)])
    sys.exit()
todo = set()
for r, c, d, op in jobs:
    for q in candidates(r, c, d, op):
        src = "single_read_backward.cu" if q.arrays == 2 else "single_read.cu"
        todo.add((src, tuple(sorted((q.defines(dev) | V.kernel_defines(d, op)).items()))))
def build(t):
    try:
        loader.get_kernel(t[0], t[0][:-3], dict(t[1]), device_id=dev.id)
    except Exception as e:
        print("build failed", t, str(e)[:200])
with ThreadPoolExecutor(15) as pool:
    list(pool.map(build, todo))
print("built", len(todo), flush=True)
for j in jobs:
    run(*j)
