"""cluster_row's derived plan against half and twice its cluster (256 and 512 threads), single_read and
multi_block_l2, at few and many rows, time ÷ torch copy_ (backward ÷ torch.add): run on the lent H200 as
`PYTHONPATH=. python3 notes/tune-runs/2026-12-01-cluster_row-probe.py` (2026-12-01; outputs beside it)."""
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

def tm(call, nsets, reps=11):
    k = max(8, nsets)
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

def plans(r, c, it, arrays):
    p = V.cluster_row_plan(c, dev, r, it, arrays)
    out = [p]
    vecs = -(-c * it // 16)
    bps = lambda t, v, cl: V.cluster_row_blocks_per_sm(t, v, arrays, it, cl)
    for cl in (p.cluster // 2, p.cluster * 2):
        if 1 <= cl <= 16:
            for t in (256, 512):
                v = -(-(-(-vecs // cl)) // t)
                if 1 <= v <= (24 if arrays == 1 else 12) and (t == 256 or v >= 8):
                    q = V.RowClusterPlan(cl, t, v, bps(t, v, cl))
                    if q not in out: out.append(q)
    return out

FWD = [(132, 32000, "float32"), (132, 151936, "float16"), (4096, 151936, "bfloat16"), (4096, 393216, "bfloat16"), (132, 65536, "float32"), (132, 100003, "float32"), (132, 128256, "float32"),
       (132, 151936, "float32"), (132, 262144, "float32"), (132, 393216, "float32"),
       (32, 65536, "float32"), (32, 128256, "float32"), (32, 151936, "float32"), (32, 262144, "float32"),
       (32, 393216, "float32"), (264, 151936, "float32"), (528, 65536, "float32"), (1056, 32000, "float32"),
       (132, 151936, "bfloat16"), (32, 393216, "bfloat16"), (4096, 100003, "float32"),
       (16384, 32000, "float32"), (8192, 65536, "float32"), (4096, 151936, "float32"), (1024, 393216, "float32")]
BWD = [(132, 151936, "float32", "softmax_backward"), (4096, 151936, "bfloat16", "log_softmax_backward"), (4096, 65536, "bfloat16", "softmax_backward"), (1056, 151936, "float32", "softmax_backward"),
       (132, 65536, "float32", "log_softmax_backward"), (4096, 393216, "float32", "softmax_backward"),
       (4096, 300003, "float32", "log_softmax_backward")]
todo = set()
for r, c, d in FWD:
    for p in plans(r, c, V.DTYPES[d], 1): todo.add(tuple(sorted((p.defines() | V.kernel_defines(d, "softmax")).items())))
for r, c, d, op in BWD:
    for p in plans(r, c, V.DTYPES[d], 2): todo.add(tuple(sorted((p.defines() | V.kernel_defines(d, op)).items())))
with ThreadPoolExecutor(15) as pool:
    list(pool.map(lambda it: loader.get_kernel("cluster_row.cu", "cluster_row", dict(it), device_id=dev.id), todo))
print("built", len(todo), flush=True)

def fmt(t, floor): return f"{t[0] / floor:.3f} ({t[1] / floor:.3f}-{t[2] / floor:.3f})"

for r, c, d in FWD:
    torch.manual_seed(0)
    it = V.DTYPES[d]
    nsets = max(1, min(8, -(-4 * L2 // (r * c * it))))
    xs = [(torch.randn(r, c, device="cuda") * 3).to(TD[d]) for _ in range(nsets)]
    ys = [torch.empty_like(xs[0]) for _ in range(nsets)]
    floor = tm(lambda i: ys[i].copy_(xs[i]), nsets)[0]
    want = torch.softmax(xs[0].double(), -1)
    shape = V.Shape(r, c, c, c, 0, 0, it, d, "softmax")
    line = []
    try:
        sr = V.get_variant("single_read").prepare(shape, dev)
        line.append(f"single_read {fmt(tm(lambda i: sr(xs[i].data_ptr(), ys[i].data_ptr(), S), nsets), floor)}")
    except Exception as e:
        line.append(f"single_read n/a")
    for p in plans(r, c, it, 1):
        launch = V.get_variant("cluster_row").prepare(shape, dev, plan=p)
        call = lambda i: launch(xs[i].data_ptr(), ys[i].data_ptr(), S)
        ys[0].fill_(float("nan")); call(0); torch.cuda.synchronize()
        ok = ((ys[0].double() - want).abs().max() <= 1e-2 * want.abs().max()).item()
        line.append(f"{p.label()} {fmt(tm(call, nsets), floor)}{'' if ok else ' BAD'}")
    print(f"{r}x{c} {d}: " + " | ".join(line), flush=True)
    del xs, ys, want

for r, c, d, op in BWD:
    torch.manual_seed(0)
    it = V.DTYPES[d]
    nsets = max(1, min(8, -(-6 * L2 // (r * c * it))))
    x = torch.randn(r, c, device="cuda") * 3
    ys = [(torch.softmax(x, -1) if op == "softmax_backward" else torch.log_softmax(x, -1)).to(TD[d]) for _ in range(nsets)]
    gs = [torch.randn(r, c, device="cuda").to(TD[d]) for _ in range(nsets)]
    ds = [torch.empty_like(ys[0]) for _ in range(nsets)]
    floor = tm(lambda i: torch.add(ys[i], gs[i], out=ds[i]), nsets)[0]
    shape = V.Shape(r, c, c, c, 0, 0, it, d, op, c, 0)
    line = []
    for name in ("single_read", "multi_block_l2"):
        try:
            f = V.get_variant(name).prepare(shape, dev)
            line.append(f"{name} {fmt(tm(lambda i: f(ys[i].data_ptr(), ds[i].data_ptr(), S, gs[i].data_ptr()), nsets), floor)}")
        except Exception as e:
            line.append(f"{name} n/a")
    for p in plans(r, c, it, 2):
        launch = V.get_variant("cluster_row").prepare(shape, dev, plan=p)
        line.append(f"{p.label()} {fmt(tm(lambda i: launch(ys[i].data_ptr(), ds[i].data_ptr(), S, gs[i].data_ptr()), nsets), floor)}")
    print(f"{r}x{c} {d} {op}: " + " | ".join(line), flush=True)
    del ys, gs, ds

for r, c, d in [(1024, 1048576, "float32"), (128, 4194304, "float32"), (32, 4194304, "float32"), (512, 1048576, "bfloat16"), (128, 4194304, "bfloat16")]:
    torch.manual_seed(0)
    it = V.DTYPES[d]
    x = (torch.randn(r, c, device="cuda") * 3).to(TD[d]); y = torch.empty_like(x)
    floor = tm(lambda i: y.copy_(x), 1)[0]
    shape = V.Shape(r, c, c, c, 0, 0, it, d, "softmax")
    f = V.get_variant("multi_block_l2").prepare(shape, dev)
    y.fill_(float("nan")); f(x.data_ptr(), y.data_ptr(), S); torch.cuda.synchronize()
    ok = not torch.isnan(y).any().item()
    print(f"{r}x{c} {d} multi_block_l2 {fmt(tm(lambda i: f(x.data_ptr(), y.data_ptr(), S), 1), floor)}{'' if ok else ' BAD'}", flush=True)
    del x, y
