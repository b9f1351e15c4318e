"""Session 10 probe 10: cluster_row at clusters of 16, 256 / 384 / 512 threads, timed back to back and per call
(a pair of events around each call, as the sweep).  PYTHONPATH=. python3 .probe/p9.py"""
import sys
from concurrent.futures import ThreadPoolExecutor
import torch, cupy as cp
import softmax_lab
from softmax_lab import loader
V = sys.modules["softmax_lab.variants"]
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
    return out[reps // 2]


def per_call(call, nsets, reps=30):
    for i in range(5): call(i % nsets)
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for i, (a, b) in enumerate(ev):
        a.record(); call(i % nsets); b.record()
    torch.cuda.synchronize()
    t = sorted(a.elapsed_time(b) for a, b in ev)
    return t[reps // 2]


def configs(r, c, d):
    it = V.DTYPES[d]
    sh = V.Shape(r, c, c, c, 0, 0, it, d, "softmax", 0, 0)
    auto = V.preferences(sh, dev)[0]
    out = [(f"auto:{auto.name}", lambda sh, a=auto: a.prepare(sh, dev), None)]
    cr = V.get_variant("cluster_row")
    p = V.cluster_row_plan(c, dev, r, it, 1)
    vecs = -(-c * it // 16)
    alts = [p]
    for t, most in ((256, 24), (384, 16), (512, 13)):
        v = -(-(-(-vecs // 16)) // t)
        if v <= most:
            b = V.cluster_row_blocks_per_sm(t, v, 1, it, 16)
            for stream in (False, True):
                alts.append(V.RowClusterPlan(16, t, v, b, stream))
    for q in dict.fromkeys(alts):
        out.append(("cr" + q.label() + ("*" if q == p else ""), lambda sh, q=q: cr.prepare(sh, dev, plan=q), q))
    return out


def run(r, c, d):
    torch.manual_seed(0)
    it = V.DTYPES[d]
    nsets = max(1, min(8, -(-4 * L2 // (r * c * it))))
    xs = [(torch.randn(r, c, device="cuda") * 3).to(TD[d]) for _ in range(nsets)]
    ys = [torch.empty_like(xs[0]) for _ in range(nsets)]
    copy = lambda i: ys[i].copy_(xs[i])
    f1, f2 = tm(copy, nsets), per_call(copy, nsets)
    sh = V.Shape(r, c, c, c, 0, 0, it, d, "softmax", 0, 0)
    want = torch.softmax(xs[0].double(), -1)
    res = []
    for label, prep, _ in configs(r, c, d):
        try:
            launch = prep(sh)
            call = lambda i: launch(xs[i].data_ptr(), ys[i].data_ptr(), S)
            ys[0].fill_(float("nan")); call(0); torch.cuda.synchronize()
            err = ((ys[0].double() - want).abs().max() / want.abs().max()).nan_to_num(1e9).item()
            a, b = tm(call, nsets) / f1, per_call(call, nsets) / f2
            res.append((a, f"{label} {a:.3f} / per call {b:.3f}{'' if err < 2e-2 else f' BAD {err:.2g}'}"))
        except Exception as e:
            res.append((9, f"{label} ERR {str(e)[:100]}"))
    res.sort()
    print(f"{r}x{c} {d} (copy {f1 * 1e3:.0f} / {f2 * 1e3:.0f} us): " + " | ".join(s for _, s in res), flush=True)


jobs = [(r, c, "float32") for r, c in ((132, 212993), (132, 229376), (132, 262144), (132, 300001), (132, 393216), (264, 262144),
                                        (528, 262144), (32, 262144), (32, 393216), (264, 393216))]
todo = set()
for r, c, d in jobs:
    for _, _, q in configs(r, c, d):
        if q is not None:
            todo.add(tuple(sorted((q.defines(dev) | V.kernel_defines(d, "softmax")).items())))
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
