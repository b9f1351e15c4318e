"""Session 12 probe 19.  (a) the persisting-L2 limit (default 11.25 MiB on the image, max 37.5 MiB): absolute
times of the copy floor and of auto at long and ordinary rows, limit default then max, then max with the
persisting lines reset (cuCtxResetPersistingL2Cache) before each copy; output checked after the timed calls.
(b) single_read at two stages with a cluster for halves at 100003 (forward and backward).
PYTHONPATH=. python3 notes/tune-runs/2026-12-01-persisting-l2-p19.py"""
import ctypes, sys
import torch, cupy as cp
import softmax_lab
from softmax_lab import loader
V = sys.modules["softmax_lab.variants"]
dev = softmax_lab.device_info()
S = cp.cuda.Stream.null
TD = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
L2 = 60 * 2**20
rt = cp.cuda.runtime
cuda = ctypes.CDLL("libcuda.so.1")


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


def fwd(label, r, c, d="float32", reset=False):
    torch.manual_seed(0)
    it = V.DTYPES[d]
    nsets = max(1, min(8, -(-4 * L2 // (2 * r * c * it))))
    xs = [(torch.randn(r, c, device="cuda") * 3).to(TD[d]) for _ in range(nsets)]
    ys = [torch.empty_like(xs[0]) for _ in range(nsets)]
    sh = V.Shape(r, c, c, c, 0, 0, it, d, "softmax", 0, 0)
    auto = V.preferences(sh, dev)[0]
    launch = auto.prepare(sh, dev)
    call = lambda i: launch(xs[i].data_ptr(), ys[i].data_ptr(), S)
    t = tm(call, nsets)
    for y in ys: y.fill_(float("nan"))
    for i in range(nsets): call(i)
    torch.cuda.synchronize()
    errs = [((ys[i][:4].double() - torch.softmax(xs[i][:4].double(), -1)).abs().max() / torch.softmax(xs[i][:4].double(), -1).max()).item() for i in range(nsets)]
    errs.append(((ys[-1][-4:].double() - torch.softmax(xs[-1][-4:].double(), -1)).abs().max()).item())
    if reset:
        torch.cuda.synchronize(); cuda.cuCtxResetPersistingL2Cache(); torch.cuda.synchronize()
    f = tm(lambda i: ys[i].copy_(xs[i]), nsets)
    print(f"  {label} {r}x{c} {d} {auto.name}: copy {f[0]*1e3:.0f} us ({f[1]*1e3:.0f}-{f[2]*1e3:.0f}), auto {t[0]*1e3:.0f} us "
          f"({t[1]*1e3:.0f}-{t[2]*1e3:.0f}) = {t[0]/f[0]:.3f} x copy; max err {max(errs):.2g}", flush=True)
    del xs, ys


SHAPES = ((32, 4194304), (132, 4194304), (32, 1048576), (132, 1048576), (512, 1048576), (1024, 2097152),
          (4096, 393216), (4096, 151936), (16384, 32000))
lim_default = rt.deviceGetLimit(6)
print("persisting L2 limit", lim_default, "max", rt.deviceGetAttribute(108, 0), flush=True)
for r, c in SHAPES:
    fwd("default", r, c)
rt.deviceSetLimit(6, rt.deviceGetAttribute(108, 0))
print("limit", rt.deviceGetLimit(6), flush=True)
for r, c in SHAPES:
    fwd("max", r, c)
for r, c in SHAPES[:6]:
    fwd("max+reset", r, c, reset=True)
rt.deviceSetLimit(6, 0)
print("limit", rt.deviceGetLimit(6), flush=True)
for r, c in SHAPES[:6] + ((4096, 393216),):
    fwd("zero", r, c)
rt.deviceSetLimit(6, lim_default)


def stages(r, c, d, op):
    torch.manual_seed(0)
    it, bw = V.DTYPES[d], op.endswith("backward")
    arrays = 2 if bw else 1
    sh = V.Shape(r, c, c, c, 0, 0, it, d, op, c if bw else 0, 0)
    plan = V.single_read_config(c, dev, r, it, arrays=2) if bw else V.single_read_plan(c, dev, r, d, op)
    vecs = -(-c * it // 16)
    qs = [plan]
    for cl, t, st, bps in ((4, 544, 2, 1), (4, 640, 2, 1), (8, 320, 2, 1), (8, 272, 2, 2), (8, 544, 2, 1), (4, 544, 1, 1)):
        per = -(-vecs // cl); v = -(-per // t)
        try:
            q = V.ClusterConfig(cl, t, v, st, bps, arrays, plan.wide)
        except ValueError:
            continue
        if V._block_smem(t, v, st, arrays) <= V._smem_budget(dev, bps):
            qs.append(q)
    nsets = max(1, min(8, -(-4 * L2 // ((3 if bw else 2) * r * c * it))))
    if bw:
        xs = [torch.softmax(torch.randn(r, c, device="cuda") * 3, -1).to(TD[d]) for _ in range(nsets)]
        gs = [torch.randn(r, c, device="cuda").to(TD[d]) for _ in range(nsets)]
        ys = [torch.empty_like(xs[0]) for _ in range(nsets)]
        floor = tm(lambda i: torch.add(xs[i], gs[i], out=ys[i]), nsets)[0]
        y64, g64 = xs[0].double(), gs[0].double()
        want = y64 * (g64 - (g64 * y64).sum(-1, keepdim=True))
    else:
        xs = [(torch.randn(r, c, device="cuda") * 3).to(TD[d]) for _ in range(nsets)]
        ys = [torch.empty_like(xs[0]) for _ in range(nsets)]
        floor = tm(lambda i: ys[i].copy_(xs[i]), nsets)[0]
        want = torch.softmax(xs[0].double(), -1)
    res = []
    for q in dict.fromkeys(qs):
        try:
            launch = V.get_variant("single_read").prepare(sh, dev, config=q)
            call = (lambda i: launch(xs[i].data_ptr(), ys[i].data_ptr(), S, gs[i].data_ptr())) if bw else \
                (lambda i: launch(xs[i].data_ptr(), ys[i].data_ptr(), S))
            ys[0].fill_(float("nan")); call(0); torch.cuda.synchronize()
            err = ((ys[0].double() - want).abs().max() / want.abs().max()).nan_to_num(1e9).item()
            t = tm(call, nsets)
            res.append((t[0] / floor, f"{q.label()} {t[0] / floor:.3f} ({t[1] / floor:.3f}-{t[2] / floor:.3f}){' BAD' if err > 2e-2 else ''}"))
        except Exception as e:
            res.append((9, f"{q.label()} ERR {str(e)[:100]}"))
    res.sort()
    print(f"{r}x{c} {d} {op}: " + " | ".join(s for _, s in res), flush=True)


for j in ((4096, 100003, "bfloat16", "softmax_backward"), (4096, 100003, "bfloat16", "softmax"),
          (4096, 128256, "bfloat16", "softmax_backward"), (4096, 100003, "float32", "softmax")):
    stages(*j)
