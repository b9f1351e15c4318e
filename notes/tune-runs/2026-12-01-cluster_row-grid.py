"""cluster_row (pushed exchange) against what auto takes today, over a grid of shapes; ÷ torch copy_ (bwd ÷ torch.add).
PYTHONPATH=. python3 notes/tune-runs/2026-12-01-cluster_row-grid.py [fwd|bwd|all|short] (the Published plans need the CR_PUSH define that cluster_row.cu had for this run)"""
import sys
from concurrent.futures import ThreadPoolExecutor
import torch, cupy as cp
import softmax_lab, softmax_lab.variants
from softmax_lab import loader
V = sys.modules["softmax_lab.variants"]
dev = softmax_lab.device_info()
S = cp.cuda.Stream.null
TD = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
L2 = 60 * 2**20
which = sys.argv[1] if len(sys.argv) > 1 else "all"

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

import dataclasses
@dataclasses.dataclass(frozen=True)
class Published(V.RowClusterPlan):
    def defines(self, *a):
        return super().defines(*a) | {"CR_PUSH": 0}
    def label(self):
        return super().label() + "pub"

def plans(r, c, it, arrays):
    p = V.cluster_row_plan(c, dev, r, it, arrays)
    if p is None: return []
    out = [p]
    vecs = -(-c * it // 16)
    for cl in (p.cluster // 2, p.cluster, p.cluster * 2):
        if 1 <= cl <= 16:
            for t, most in V.CR_BLOCK_SHAPES[arrays, it]:
                v = -(-(-(-vecs // cl)) // t)
                if 1 <= v <= most:
                    q = V.RowClusterPlan(cl, t, v, V.cluster_row_blocks_per_sm(t, v, arrays, it, cl))
                    if q not in out: out.append(q)
                    break
    return out + [Published(p.cluster, p.threads, p.vpt, p.blocks_per_sm)]

F = [(r, c, "float32", "softmax") for c in (20000, 32000, 50257, 65536, 100003, 128256, 151936, 200003, 262144, 393216) for r in (16, 132, 528, 4096)]
F += [(16384, 32000, "float32", "softmax"), (1024, 393216, "float32", "softmax"), (4096, 393216, "float32", "softmax")]
F += [(r, c, d, op) for d, op in (("bfloat16", "softmax"), ("float16", "log_softmax")) for c in (32000, 128256, 151936, 393216) for r in (132, 4096)]
F += [(132, 151936, "float32", "log_softmax"), (4096, 151936, "float32", "log_softmax")]
B = [(r, c, d, op) for r in (132, 1056, 4096) for c, d, op in ((65536, "float32", "softmax_backward"), (151936, "float32", "log_softmax_backward"),
                                                               (262144, "float32", "softmax_backward"), (151936, "bfloat16", "softmax_backward"))]
B += [(4096, 393216, "float32", "softmax_backward"), (4096, 393216, "bfloat16", "log_softmax_backward")]
SHORT = [(4096, 4097, "float32", "softmax"), (4096, 5000, "float32", "softmax"), (4096, 8192, "float32", "softmax"),
         (16384, 8192, "float32", "softmax"), (2048, 12000, "float32", "softmax"), (4096, 16384, "float32", "softmax"),
         (1024, 16384, "float32", "softmax"), (132, 8192, "float32", "softmax"), (4096, 10000, "bfloat16", "softmax"),
         (8192, 16000, "bfloat16", "softmax"), (2048, 30000, "float32", "softmax"), (8192, 12000, "float32", "softmax_backward")]
if which == "short":
    F, B = [s for s in SHORT if not s[3].endswith("backward")], [s for s in SHORT if s[3].endswith("backward")]
todo = set()
for r, c, d, op in (F if which != "bwd" else []) + (B if which != "fwd" else []):
    arrays = 2 if op.endswith("backward") else 1
    for p in plans(r, c, V.DTYPES[d], arrays): todo.add(tuple(sorted((p.defines() | V.kernel_defines(d, op)).items())))
with ThreadPoolExecutor(15) as pool:
    list(pool.map(lambda it: loader.get_kernel("cluster_row.cu", "cluster_row", dict(it), device_id=dev.id), todo))
print("built", len(todo), flush=True)

def fmt(t, floor): return f"{t[0] / floor:.3f} ({t[1] / floor:.3f}-{t[2] / floor:.3f})"

def auto_name(shape):
    for v in V.preferences(shape, dev):
        try:
            v.prepare(shape, dev); return v.name
        except V.CannotRun: pass

def run(r, c, d, op):
    torch.manual_seed(0)
    it = V.DTYPES[d]
    bwd = op.endswith("backward")
    arrays = 2 if bwd else 1
    nsets = max(1, min(8, -(-(4 + 2 * bwd) * L2 // (r * c * it))))
    x = torch.randn(r, c, device="cuda") * 3
    if bwd:
        xs = [(torch.softmax(x, -1) if op == "softmax_backward" else torch.log_softmax(x, -1)).to(TD[d]) for _ in range(nsets)]
        gs = [torch.randn(r, c, device="cuda").to(TD[d]) for _ in range(nsets)]
    else:
        xs = [x.to(TD[d])] + [(torch.randn(r, c, device="cuda") * 3).to(TD[d]) for _ in range(nsets - 1)]
        gs = None
    del x
    ys = [torch.empty_like(xs[0]) for _ in range(nsets)]
    floor = tm((lambda i: torch.add(xs[i], gs[i], out=ys[i])) if bwd else (lambda i: ys[i].copy_(xs[i])), nsets)[0]
    shape = V.Shape(r, c, c, c, 0, 0, it, d, op, c if bwd else 0, 0)
    if bwd:
        xd = xs[0].double(); gd = gs[0].double()
        want = xd * (gd - (gd * xd).sum(-1, keepdim=True)) if op == "softmax_backward" else gd - xd.exp() * gd.sum(-1, keepdim=True)
    else:
        want = (torch.softmax if op == "softmax" else torch.log_softmax)(xs[0].double(), -1)
    line = [f"auto={auto_name(shape)}"]
    def one(label, launch):
        call = (lambda i: launch(xs[i].data_ptr(), ys[i].data_ptr(), S, gs[i].data_ptr())) if bwd else (lambda i: launch(xs[i].data_ptr(), ys[i].data_ptr(), S))
        ys[0].fill_(float("nan")); call(0); torch.cuda.synchronize()
        err = ((ys[0].double() - want).abs().max() / want.abs().max()).item()
        line.append(f"{label} {fmt(tm(call, nsets), floor)}{'' if err < 2e-2 else f' BAD {err:.2g}'}")
    for name in ("single_read", "multi_block_l2", "three_pass", "two_pass"):
        try:
            f = V.get_variant(name).prepare(shape, dev)
        except Exception:
            continue
        one(name, f)
    for p in plans(r, c, it, arrays):
        one(p.label(), V.get_variant("cluster_row").prepare(shape, dev, plan=p))
    print(f"{r}x{c} {d} {op}: " + " | ".join(line), flush=True)
    del xs, ys, gs, want

for s in (F if which != "bwd" else []) + (B if which != "fwd" else []):
    run(*s)
