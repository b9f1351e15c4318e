"""Session 11 probe 14 (p12's harness): the new halves rule (HALVES_ONE_BLOCK_COST, cluster_row for halves) against
the old plans and auto's old choice.  Session 11 probe 13 (p12's harness): halves, single_read at two blocks per SM (the plan's cluster and twice it) against
the plan, cluster_row's plan and auto.  Session 11 probe 12 was: single_read at the plan's cluster and twice it, one and two blocks per SM, block shapes of
256-640 threads (quack's fp32 151936 forward: clusters of 8, 256 threads, 76 KB a block, two per SM), times ÷ copy
(forward) or ÷ torch.add (backward), back to back, median (2nd-8th of 9).  PYTHONPATH=. python3 .probe/p12.py"""
import re
import sys
from concurrent.futures import ThreadPoolExecutor
import torch, cupy as cp
import softmax_lab
from softmax_lab import loader
from softmax_lab.device import max_active_clusters
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
    return out[reps // 2], out[1], out[-2]


def candidates(r, c, d, op):
    plan = V.single_read_plan(c, dev, r, d, op)
    oa, ol = OLD[(d, op, r, c)]
    f = re.match(r"(\d+)x(\d+)x(\d+)x(\d+)x(\d+)(w?)$", ol)
    oldq = V.ClusterConfig(*map(int, f.groups()[:5]), wide=bool(f.group(6)))
    return list(dict.fromkeys([plan, oldq]))


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
    plans = [(f"auto:{auto.name}(old {OLD[(d, op, r, c)][0]})", None)] + [("sr" + q.label(), q) for q in candidates(r, c, d, op)]
    crp = V.cluster_row_plan(c, dev, r, it, 1)
    if crp is not None and auto.name != "cluster_row":
        plans.append(("cr" + crp.label(), crp))
    for label, q in plans:
        try:
            launch = auto.prepare(sh, dev) if q is None else \
                V.get_variant("cluster_row").prepare(sh, dev, plan=q) if isinstance(q, V.RowClusterPlan) else \
                V.get_variant("single_read").prepare(sh, dev, config=q)
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


OLD = {('bfloat16', 'softmax', 4096, 40000): ('cluster_row', '1x512x10x1x1w'), ('bfloat16', 'softmax', 4096, 50257): ('cluster_row', '1x512x13x1x1'), ('bfloat16', 'softmax', 4096, 65536): ('cluster_row', '2x512x8x1x1w'), ('bfloat16', 'softmax', 4096, 80000): ('single_read', '2x640x8x1x1w'), ('bfloat16', 'softmax', 4096, 100003): ('single_read', '2x512x13x1x1'), ('bfloat16', 'softmax', 4096, 128256): ('cluster_row', '2x512x16x1x1'), ('bfloat16', 'softmax', 4096, 151936): ('single_read', '2x640x15x1x1'), ('bfloat16', 'softmax', 4096, 180000): ('single_read', '2x512x22x1x1'), ('bfloat16', 'softmax', 4096, 200003): ('single_read', '8x640x5x1x1w'), ('bfloat16', 'softmax', 4096, 262144): ('single_read', '8x512x8x1x1w'), ('bfloat16', 'softmax', 4096, 300000): ('single_read', '8x608x8x1x1w'), ('bfloat16', 'softmax', 4096, 393216): ('single_read', '8x512x12x1x1w'), ('bfloat16', 'log_softmax', 4096, 40000): ('cluster_row', '1x512x10x1x1'), ('bfloat16', 'log_softmax', 4096, 50257): ('cluster_row', '1x512x13x1x1'), ('bfloat16', 'log_softmax', 4096, 65536): ('cluster_row', '2x512x8x1x1'), ('bfloat16', 'log_softmax', 4096, 80000): ('single_read', '2x512x10x1x1'), ('bfloat16', 'log_softmax', 4096, 100003): ('single_read', '2x512x13x1x1'), ('bfloat16', 'log_softmax', 4096, 128256): ('cluster_row', '2x512x16x1x1'), ('bfloat16', 'log_softmax', 4096, 151936): ('single_read', '2x640x15x1x1'), ('bfloat16', 'log_softmax', 4096, 180000): ('single_read', '2x512x22x1x1'), ('bfloat16', 'log_softmax', 4096, 200003): ('single_read', '4x512x13x1x1'), ('bfloat16', 'log_softmax', 4096, 262144): ('single_read', '4x512x16x1x1'), ('bfloat16', 'log_softmax', 4096, 300000): ('single_read', '4x640x15x1x1'), ('bfloat16', 'log_softmax', 4096, 393216): ('single_read', '4x512x24x1x1'), ('bfloat16', 'softmax', 16384, 128256): ('cluster_row', '2x512x16x1x1'), ('bfloat16', 'softmax', 1056, 100003): ('cluster_row', '2x512x13x1x1'), ('bfloat16', 'softmax', 1056, 151936): ('cluster_row', '2x640x15x1x1'), ('bfloat16', 'softmax', 528, 100003): ('cluster_row', '2x512x13x1x1'), ('bfloat16', 'softmax', 528, 262144): ('cluster_row', '8x512x8x1x1w'), ('bfloat16', 'softmax', 528, 393216): ('cluster_row', '8x512x12x1x1w'), ('bfloat16', 'softmax', 264, 50257): ('cluster_row', '2x640x5x1x1w'), ('bfloat16', 'softmax', 264, 200003): ('cluster_row', '8x640x5x1x1w'), ('bfloat16', 'softmax', 264, 450000): ('cluster_row', '16x512x7x1x1w'), ('bfloat16', 'softmax', 132, 50257): ('cluster_row', '2x640x5x1x1w'), ('bfloat16', 'softmax', 132, 100003): ('cluster_row', '2x512x13x1x1'), ('bfloat16', 'softmax', 32, 50257): ('cluster_row', '2x640x5x1x1'), ('bfloat16', 'softmax', 32, 100003): ('cluster_row', '8x544x3x1x1w'), ('bfloat16', 'softmax', 32, 200003): ('cluster_row', '16x544x3x1x1w'), ('bfloat16', 'log_softmax', 16384, 128256): ('cluster_row', '2x512x16x1x1'), ('bfloat16', 'log_softmax', 1056, 100003): ('cluster_row', '2x512x13x1x1'), ('bfloat16', 'log_softmax', 1056, 151936): ('cluster_row', '2x640x15x1x1'), ('bfloat16', 'log_softmax', 528, 100003): ('cluster_row', '2x512x13x1x1'), ('bfloat16', 'log_softmax', 528, 262144): ('cluster_row', '4x512x16x1x1'), ('bfloat16', 'log_softmax', 528, 393216): ('cluster_row', '4x512x24x1x1'), ('bfloat16', 'log_softmax', 264, 50257): ('cluster_row', '2x640x5x1x1'), ('bfloat16', 'log_softmax', 264, 200003): ('cluster_row', '4x512x13x1x1'), ('bfloat16', 'log_softmax', 264, 450000): ('cluster_row', '8x512x14x1x1'), ('bfloat16', 'log_softmax', 132, 50257): ('cluster_row', '2x640x5x1x1'), ('bfloat16', 'log_softmax', 132, 100003): ('cluster_row', '2x512x13x1x1'), ('bfloat16', 'log_softmax', 32, 50257): ('cluster_row', '2x640x5x1x1'), ('bfloat16', 'log_softmax', 32, 100003): ('cluster_row', '4x640x5x1x1'), ('bfloat16', 'log_softmax', 32, 200003): ('cluster_row', '8x640x5x1x1'), ('float16', 'softmax', 4096, 128256): ('cluster_row', '2x512x16x1x1'), ('float16', 'softmax', 4096, 151936): ('single_read', '2x640x15x1x1'), ('float16', 'softmax', 4096, 300000): ('single_read', '8x608x8x1x1w'), ('float16', 'log_softmax', 4096, 128256): ('cluster_row', '2x512x16x1x1'), ('float16', 'log_softmax', 4096, 151936): ('single_read', '2x640x15x1x1'), ('float16', 'log_softmax', 4096, 300000): ('single_read', '4x640x15x1x1')}
jobs = [(4096, 40000, 'bfloat16', 'softmax'), (4096, 50257, 'bfloat16', 'softmax'), (4096, 65536, 'bfloat16', 'softmax'), (4096, 80000, 'bfloat16', 'softmax'), (4096, 100003, 'bfloat16', 'softmax'), (4096, 128256, 'bfloat16', 'softmax'), (4096, 151936, 'bfloat16', 'softmax'), (4096, 180000, 'bfloat16', 'softmax'), (4096, 200003, 'bfloat16', 'softmax'), (4096, 262144, 'bfloat16', 'softmax'), (4096, 300000, 'bfloat16', 'softmax'), (4096, 393216, 'bfloat16', 'softmax'), (4096, 40000, 'bfloat16', 'log_softmax'), (4096, 50257, 'bfloat16', 'log_softmax'), (4096, 65536, 'bfloat16', 'log_softmax'), (4096, 80000, 'bfloat16', 'log_softmax'), (4096, 100003, 'bfloat16', 'log_softmax'), (4096, 128256, 'bfloat16', 'log_softmax'), (4096, 151936, 'bfloat16', 'log_softmax'), (4096, 180000, 'bfloat16', 'log_softmax'), (4096, 200003, 'bfloat16', 'log_softmax'), (4096, 262144, 'bfloat16', 'log_softmax'), (4096, 300000, 'bfloat16', 'log_softmax'), (4096, 393216, 'bfloat16', 'log_softmax'), (16384, 128256, 'bfloat16', 'softmax'), (1056, 100003, 'bfloat16', 'softmax'), (1056, 151936, 'bfloat16', 'softmax'), (528, 100003, 'bfloat16', 'softmax'), (528, 262144, 'bfloat16', 'softmax'), (528, 393216, 'bfloat16', 'softmax'), (264, 50257, 'bfloat16', 'softmax'), (264, 200003, 'bfloat16', 'softmax'), (264, 450000, 'bfloat16', 'softmax'), (132, 50257, 'bfloat16', 'softmax'), (132, 100003, 'bfloat16', 'softmax'), (32, 50257, 'bfloat16', 'softmax'), (32, 100003, 'bfloat16', 'softmax'), (32, 200003, 'bfloat16', 'softmax'), (16384, 128256, 'bfloat16', 'log_softmax'), (1056, 100003, 'bfloat16', 'log_softmax'), (1056, 151936, 'bfloat16', 'log_softmax'), (528, 100003, 'bfloat16', 'log_softmax'), (528, 262144, 'bfloat16', 'log_softmax'), (528, 393216, 'bfloat16', 'log_softmax'), (264, 50257, 'bfloat16', 'log_softmax'), (264, 200003, 'bfloat16', 'log_softmax'), (264, 450000, 'bfloat16', 'log_softmax'), (132, 50257, 'bfloat16', 'log_softmax'), (132, 100003, 'bfloat16', 'log_softmax'), (32, 50257, 'bfloat16', 'log_softmax'), (32, 100003, 'bfloat16', 'log_softmax'), (32, 200003, 'bfloat16', 'log_softmax'), (4096, 128256, 'float16', 'softmax'), (4096, 151936, 'float16', 'softmax'), (4096, 300000, 'float16', 'softmax'), (4096, 128256, 'float16', 'log_softmax'), (4096, 151936, 'float16', 'log_softmax'), (4096, 300000, 'float16', 'log_softmax')]
if len(sys.argv) > 1 and sys.argv[1] == "list":
    for j in jobs:
        print(j, [q.label() for q in candidates(*j)])
    sys.exit()
todo = set()
for r, c, d, op in jobs:
    for q in candidates(r, c, d, op):
        src = "single_read.cu"
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
