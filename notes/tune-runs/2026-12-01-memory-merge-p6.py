"""Session 10 probe 6 (the rule's picks, after p5): single_read's memory-merged groups (SR_MEMORY_MERGE) against auto, long rows, few rows, many rows.
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


def mm_alternatives(c, r, it, wide):
    """Per blocks per SM, the three group sizes that use the most SMs (then vpt nearest 16), at least 6 vectors per thread."""
    vecs = -(-c * it // 16)
    vpt_target = max(1, V.VPT_TARGET // (8 // 4 if wide else 1))
    found = []
    for bps in (1, 2):
        resident = dev.sm_count * bps
        cands = []
        for g in range(2, resident + 1):
            per = -(-vecs // g)
            shape = V.block_shape(per, bps, vpt_target, 2, V._smem_budget(dev, bps), it, 1, wide)
            if shape is None or g > shape[0] or shape[1] < (3 if wide else 6): continue
            G = min(r, resident // g)
            rounds = -(-r // G)
            cands.append(((-(G * g * rounds / (rounds + 1)) // 4, abs(shape[1] - vpt_target)), V.ClusterConfig(g, *shape, 1, bps, wide=wide, memory_merge=True)))
        cands.sort(key=lambda t: t[0])
        seen = set()
        for _, cfg in cands:
            G = resident // cfg.cluster
            if G not in seen and len(seen) < 3:
                seen.add(G); found.append(cfg)
    return found


def configs(r, c, d, op):
    it = V.DTYPES[d]
    shape = V.Shape(r, c, c, c, 0, 0, it, d, op, 0, 0)
    out = []
    auto = V.preferences(shape, dev)[0]
    sr = V.get_variant("single_read")
    plan = V.single_read_plan(c, dev, r, d, op)
    out.append((f"auto:{auto.name}" + (plan.label() if auto.name == "single_read" else ""), lambda sh, a=auto: a.prepare(sh, dev), plan if auto.name == "single_read" else None))
    for name in ("multi_block_l2", "multi_block"):
        if name != auto.name and (name == "multi_block_l2" or it == 2):
            out.append((name, lambda sh, n=name: V.get_variant(n).prepare(sh, dev), None))
    cands = []
    packed = V.single_read_config(c, dev, r, it)
    if packed is not None: cands.append(packed)
    vecs = -(-c * it // 16)
    cmin = -(-vecs // 12288)
    for g in range(max(2, cmin), cmin + 3):
        v = -(-(-(-vecs // g)) // 512)
        if it == 4 and v in (22, 23): v = 24
        if v <= 24 and g <= 132: cands.append(V.ClusterConfig(g, 512, v, 1, 1, memory_merge=True))
    for q in dict.fromkeys(cands):
        if q == plan and auto.name == "single_read": continue
        out.append(("sr" + q.label(), lambda sh, p=q: sr.prepare(sh, dev, config=p), q))
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
    "f32": [(r, c, "float32", "softmax") for r, c in ((132, 1048576), (256, 1048576), (600, 1048576), (1300, 500000), (4096, 393217),
                                                      (4096, 500000), (4096, 786433), (512, 786432), (256, 2000003), (64, 600000), (128, 4194304))],
    "halves": [(512, 1048576, "bfloat16", "softmax"), (132, 1048576, "bfloat16", "softmax"), (128, 4194304, "bfloat16", "softmax"),
               (4096, 786433, "bfloat16", "softmax"), (1024, 2097152, "float16", "log_softmax"), (32, 4194304, "bfloat16", "softmax")],
}
jobs = [j for k, v in groups.items() if which in (k, "all") for j in v]
todo = set()
for r, c, d, op in jobs:
    for label, _, cfg in configs(r, c, d, op):
        if cfg is not None:
            shifted = V.line_shifted(cfg, V.Shape(r, c, c, c, 0, 0, V.DTYPES[d], d, op, 0, 0), dev)
            todo.add(("single_read.cu", tuple(sorted((shifted.defines(dev) | V.kernel_defines(d, op)).items()))))
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
