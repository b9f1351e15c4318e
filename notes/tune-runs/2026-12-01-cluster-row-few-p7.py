"""Session 10 probe 7: cluster_row block shapes at 132 rows (and 4096 x 151936), float32 softmax.
PYTHONPATH=. python3 .probe/p5.py [long|few|many|halves|all]"""
import sys, itertools
from concurrent.futures import ThreadPoolExecutor
import torch, cupy as cp
import softmax_lab
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


def configs(r, c, d, op):
    it = V.DTYPES[d]
    shape = V.Shape(r, c, c, c, 0, 0, it, d, op, 0, 0)
    out = []
    auto = V.preferences(shape, dev)[0]
    out.append((f"auto:{auto.name}", lambda sh, a=auto: a.prepare(sh, dev), None))
    cr = V.get_variant("cluster_row")
    plan = V.cluster_row_plan(c, dev, r, it, 1)
    vecs = -(-c * it // 16)
    seen = set()
    for cl in (4, 8, 16):
        for t in (128, 256, 384, 512):
            v = -(-(-(-vecs // cl)) // t)
            if v < 2 or v > 24 or (t >= 512 and v > 13): continue
            b = V.cluster_row_blocks_per_sm(t, v, 1, it, cl)
            for stream in (False, True):
                q = V.RowClusterPlan(cl, t, v, b, stream)
                if q in seen: continue
                seen.add(q)
                out.append(("cr" + q.label() + ("*" if q == plan else ""), lambda sh, p=q: cr.prepare(sh, dev, plan=p), q))
    return out


def run(r, c, d, op):
    torch.manual_seed(0)
    it = V.DTYPES[d]
    nsets = max(1, min(8, -(-4 * L2 // (r * c * it))))
    xs = [(torch.randn(r, c, device="cuda") * 3).to(TD[d]) for _ in range(nsets)]
    ys = [torch.empty_like(xs[0]) for _ in range(nsets)]
    floor = tm(lambda i: ys[i].copy_(xs[i]), nsets)[0]
    shape = V.Shape(r, c, c, c, 0, 0, it, d, op, 0, 0)
    want = (torch.softmax if op == "softmax" else torch.log_softmax)(xs[0].double(), -1)
    tol = 1e-5 if d == "float32" else 1e-2
    res = []
    def one(label, launch):
        call = lambda i: launch(xs[i].data_ptr(), ys[i].data_ptr(), S)
        ys[0].fill_(float("nan")); call(0); torch.cuda.synchronize()
        err = ((ys[0].double() - want).abs() / want.abs().clamp_min(1e-30)).nan_to_num(1e9).max().item() if op == "log_softmax" else \
            ((ys[0].double() - want).abs().max() / want.abs().max()).nan_to_num(1e9).item()
        t = tm(call, nsets)
        res.append((t[0] / floor, f"{label} {t[0] / floor:.3f} ({t[1] / floor:.3f}-{t[2] / floor:.3f}){'' if err < tol else f' BAD {err:.2g}'}"))
    for label, launch, _ in configs(r, c, d, op):
        try:
            one(label, launch(shape))
        except Exception as e:
            res.append((9, f"{label} ERR {str(e)[:120]}"))
    res.sort()
    print(f"{r}x{c} {d} {op} (copy {floor * 1e3:.0f} us): " + " | ".join(s for _, s in res), flush=True)
    del xs, ys, want
    torch.cuda.empty_cache(); cp.get_default_memory_pool().free_all_blocks()


groups = {
    "few": [(r, c, "float32", "softmax") for r, c in ((132, 151936), (132, 262144), (132, 128256), (132, 100003), (264, 151936), (4096, 151936))],
}
jobs = [j for k, v in groups.items() if which in (k, "all") for j in v]
todo = set()
for r, c, d, op in jobs:
    for label, _, cfg in configs(r, c, d, op):
        if cfg is not None:
            todo.add(("cluster_row.cu", tuple(sorted((cfg.defines(dev) | V.kernel_defines(d, op)).items()))))
def build(t):
    try:
        loader.get_kernel(t[0], t[0][:-3], dict(t[1]), device_id=dev.id)
    except Exception as e:
        print("build failed", t, str(e)[:300])
with ThreadPoolExecutor(15) as pool:
    list(pool.map(build, todo))
print("built", len(todo), flush=True)
for j in jobs:
    run(*j)
