"""Session 9 probe 4 (cluster_row plain stores): odd lengths, many-row vocab shapes (cluster_row load/store policy, single_read configs), halves forward.
PYTHONPATH=. python3 .probe/p1.py [align|many|halves|all]"""
import sys, dataclasses, itertools
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


@dataclasses.dataclass(frozen=True)
class Policy(V.RowClusterPlan):
    load: int = 1
    store: int = 0
    def defines(self, *a):
        return super().defines(*a) | {"CR_LOAD": self.load, "CR_STORE": self.store}
    def label(self):
        return super().label() + f"L{self.load}S{self.store}"


def cr_plans(r, c, it, arrays, policies):
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
    if policies:
        out += [Policy(q.cluster, q.threads, q.vpt, q.blocks_per_sm, 0, l, s) for q in out[:3] for l, s in
                ((0, 0), (0, 1), (2, 0), (2, 1), (1, 1)) ]
    return out


def sr_configs(c, it, wide=False):
    vecs = -(-c * it // 16)
    out = []
    for cluster, blocks, threads in itertools.product((1, 2, 4, 8, 16), (1, 2), (256, 512, 640, 1024)):
        if threads * blocks > 1024: continue
        per = -(-vecs // cluster)
        vpt = -(-per // threads)
        if vpt < 4 or vpt > V._max_vpt(threads, blocks, cluster, it, 1, wide): continue
        if per / (threads * vpt) < 0.9: continue
        for stages in (1, 2):
            if V._block_smem(threads, vpt, stages) > V._smem_budget(dev, blocks): continue
            try:
                out.append(V.ClusterConfig(cluster, threads, vpt, stages, blocks, 1, wide))
            except ValueError:
                pass
    return out



@dataclasses.dataclass(frozen=True)
class SR(V.ClusterConfig):
    extra: tuple = ()
    def defines(self, dev=None):
        return super().defines(dev) | dict(self.extra)
    @property
    def smem_bytes(self):
        return super().smem_bytes + (128 * self.stages if dict(self.extra).get("SR_STAGE_SHIFT") else 0)
    def label(self):
        return super().label() + "".join(f"{k[:5]}{v}" for k, v in self.extra)


def run(r, c, d, op, kinds):
    torch.manual_seed(0)
    it = V.DTYPES[d]
    nsets = max(1, min(8, -(-4 * L2 // (r * c * it))))
    xs = [(torch.randn(r, c, device="cuda") * 3).to(TD[d]) for _ in range(nsets)]
    ys = [torch.empty_like(xs[0]) for _ in range(nsets)]
    floor = tm(lambda i: ys[i].copy_(xs[i]), nsets)[0]
    shape = V.Shape(r, c, c, c, 0, 0, it, d, op, 0, 0)
    want = (torch.softmax if op == "softmax" else torch.log_softmax)(xs[0].double(), -1)
    res = []
    def one(label, launch):
        call = lambda i: launch(xs[i].data_ptr(), ys[i].data_ptr(), S)
        ys[0].fill_(float("nan")); call(0); torch.cuda.synchronize()
        err = ((ys[0].double() - want).abs().max() / want.abs().max()).item()
        t = tm(call, nsets)
        res.append((t[0] / floor, f"{label} {t[0] / floor:.3f} ({t[1] / floor:.3f}-{t[2] / floor:.3f}){'' if err < 2e-2 else f' BAD {err:.2g}'}"))
    for label, launch, _ in configs(r, c, d, op, kinds):
        try:
            one(label, launch(shape))
        except Exception as e:
            res.append((9, f"{label} ERR {str(e)[:80]}"))
    res.sort()
    auto = V.preferences(shape, dev)[0].name
    print(f"{r}x{c} {d} {op} auto={auto} (copy {floor * 1e3:.0f} us): " + " | ".join(s for _, s in res), flush=True)
    del xs, ys, want


@dataclasses.dataclass(frozen=True)
class Plain(V.RowClusterPlan):
    def defines(self, *a):
        return super().defines(*a) | {"PROBE_PLAIN_STORES": 1}
    def label(self):
        return super().label() + "plain"


def configs(r, c, d, op, kinds):
    it = V.DTYPES[d]
    out = []
    plan = V.single_read_plan(c, dev, r, d, op)
    sr = V.get_variant("single_read")
    out.append(("sr" + plan.label(), lambda sh, p=plan: sr.prepare(sh, dev, config=p), ("single_read.cu", plan.defines(dev))))
    cr = V.get_variant("cluster_row")
    p = V.cluster_row_plan(c, dev, r, it, 1)
    vecs = -(-c * it // 16)
    alts = [p]
    if p.cluster > 1:
        cl = p.cluster // 2
        for t, most in V.CR_BLOCK_SHAPES[1, it]:
            v = -(-(-(-vecs // cl)) // t)
            if v <= most:
                alts.append(V.RowClusterPlan(cl, t, v, V.cluster_row_blocks_per_sm(t, v, 1, it, cl), p.stream_loads)); break
    for q in alts:
        out.append(("cr" + q.label(), lambda sh, p=q: cr.prepare(sh, dev, plan=p), ("cluster_row.cu", q.defines())))
        q2 = Plain(q.cluster, q.threads, q.vpt, q.blocks_per_sm, q.stream_loads)
        out.append(("cr" + q2.label(), lambda sh, p=q2: cr.prepare(sh, dev, plan=p), ("cluster_row.cu", q2.defines())))
    return out


jobs = [((r, c, "float32", "softmax"), ()) for r, c in ((4096, 151936), (16384, 32000), (8192, 65536), (4096, 100003), (4096, 128256), (132, 151936))]
jobs += [((4096, c, "bfloat16", "softmax"), ()) for c in (65536, 151936)]

todo = set()
for (r, c, d, op), kinds in jobs:
    for label, _, build in configs(r, c, d, op, kinds):
        if build:
            todo.add((build[0], tuple(sorted((build[1] | V.kernel_defines(d, op)).items()))))
def build(t):
    try:
        loader.get_kernel(t[0], t[0][:-3], dict(t[1]), device_id=dev.id)
    except Exception as e:
        print("build failed", t, str(e)[:300])
with ThreadPoolExecutor(15) as pool:
    list(pool.map(build, todo))
print("built", len(todo), flush=True)
for s, kinds in jobs:
    run(*s, kinds)
