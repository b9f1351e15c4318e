"""Session 11 probe 16 (p15's harness): cluster_row's float32 backward, step 1b (8 x 512) against the old plan
(16 x 256 at two per SM) over more shapes.  Session 11 probe 15 was: cluster_row's L2 policies and block shapes for float32 at 151936-393216 columns, forward and
backward (quack: 1.00 of the floor for the backward at 4096 x 151936, 1.03 of a copy forward), times ÷ copy (forward)
or ÷ torch.add (backward), back to back, median (2nd-8th of 9).  PYTHONPATH=. python3 notes/tune-runs/2026-12-01-cluster-row-p15.py"""
import sys
from dataclasses import dataclass
from concurrent.futures import ThreadPoolExecutor
import torch, cupy as cp
import softmax_lab
from softmax_lab import loader
V = sys.modules["softmax_lab.variants"]
dev = softmax_lab.device_info()
S = cp.cuda.Stream.null
L2 = 60 * 2**20


@dataclass(frozen=True)
class Plan(V.RowClusterPlan):
    store: int = -1  # CR_STORE: -1 the kernel's default, 0 evict-first, 1 evict-last

    def defines(self, dev=None):
        return super().defines(dev) | ({"CR_STORE": self.store} if self.store >= 0 else {})

    def label(self):
        return super().label() + ({0: "-st.cs", 1: "-st.last"}.get(self.store, ""))


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


def candidates(r, c, op):
    new = V.cluster_row_plan(c, dev, r, 4, 2)
    vecs = -(-c // 4)
    cl = 16
    while cl > 1 and -(-vecs // (cl // 2)) <= 256 * 12 and r * cl >= dev.sm_count:
        cl //= 2
    v = -(-(-(-vecs // cl)) // 256)
    old = V.RowClusterPlan(cl, 256, v, V.cluster_row_blocks_per_sm(256, v, 2, 4, cl))
    return [Plan(*[getattr(q, f) for f in ("cluster", "threads", "vpt", "blocks_per_sm", "stream_loads")]) for q in (new, old)]


def run(r, c, op):
    torch.manual_seed(0)
    bw = op.endswith("backward")
    sh = V.Shape(r, c, c, c, 0, 0, 4, "float32", op, c if bw else 0, 0)
    auto = V.preferences(sh, dev)[0]
    nsets = max(1, min(8, -(-4 * L2 // ((3 if bw else 2) * r * c * 4))))
    if bw:
        fwd = torch.softmax if op == "softmax_backward" else torch.log_softmax
        xs = [fwd(torch.randn(r, c, device="cuda") * 3, -1) for _ in range(nsets)]
        gs = [torch.randn(r, c, device="cuda") for _ in range(nsets)]
        ys = [torch.empty_like(xs[0]) for _ in range(nsets)]
        floor = tm(lambda i: torch.add(xs[i], gs[i], out=ys[i]), nsets)[0]
        y64, g64 = xs[0].double(), gs[0].double()
        want = y64 * (g64 - (g64 * y64).sum(-1, keepdim=True)) if op == "softmax_backward" else g64 - y64.exp() * g64.sum(-1, keepdim=True)
    else:
        xs = [torch.randn(r, c, device="cuda") * 3 for _ in range(nsets)]
        ys = [torch.empty_like(xs[0]) for _ in range(nsets)]
        floor = tm(lambda i: ys[i].copy_(xs[i]), nsets)[0]
        want = (torch.softmax if op == "softmax" else torch.log_softmax)(xs[0].double(), -1)
    res = []
    p0 = V.cluster_row_plan(c, dev, r, 4, 2 if bw else 1)
    for label, q in [(f"auto:{auto.name}", None)] + [("cr" + q.label() + ("*" if V.RowClusterPlan(*[getattr(q, f) for f in ("cluster", "threads", "vpt", "blocks_per_sm", "stream_loads")]) == p0 else ""), q) for q in candidates(r, c, op)]:
        try:
            launch = auto.prepare(sh, dev) if q is None else V.get_variant("cluster_row").prepare(sh, dev, plan=q)
            call = (lambda i: launch(xs[i].data_ptr(), ys[i].data_ptr(), S, gs[i].data_ptr())) if bw else \
                (lambda i: launch(xs[i].data_ptr(), ys[i].data_ptr(), S))
            ys[0].fill_(float("nan")); call(0); torch.cuda.synchronize()
            err = ((ys[0].double() - want).abs().max() / want.abs().max()).nan_to_num(1e9).item()
            t = tm(call, nsets)
            bad = '' if err < 1e-5 else f' BAD {err:.2g}'
            res.append((t[0] / floor, f"{label} {t[0] / floor:.3f} ({t[1] / floor:.3f}-{t[2] / floor:.3f}){bad}"))
        except Exception as e:
            res.append((9, f"{label} ERR {str(e)[:120]}"))
        torch.cuda.synchronize()
    res.sort()
    print(f"{r}x{c} float32 {op} (floor {floor * 1e3:.0f} us): " + " | ".join(s for _, s in res), flush=True)


jobs = [(r, c, op) for op in ("softmax_backward", "log_softmax_backward")
        for r, c in ((4096, 151936), (132, 151936), (32, 151936), (1056, 100003), (528, 128256), (4096, 180000), (4096, 196608))]
if len(sys.argv) > 1:
    for j in jobs:
        print(j, [q.label() for q in candidates(*j)])
    sys.exit()
todo = set()
for r, c, op in jobs:
    for q in candidates(r, c, op):
        todo.add(tuple(sorted((q.defines(dev) | V.kernel_defines("float32", op)).items())))
def build(t):
    try:
        loader.get_kernel("cluster_row.cu", "cluster_row", dict(t), device_id=dev.id)
    except Exception as e:
        print("build failed", t, str(e)[:200])
with ThreadPoolExecutor(15) as pool:
    list(pool.map(build, todo))
print("built", len(todo), flush=True)
for j in jobs:
    run(*j)
