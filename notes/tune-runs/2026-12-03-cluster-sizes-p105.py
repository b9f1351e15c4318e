"""Probe 105 (2026-12-03, thirty-fifth session): cluster_row in clusters of any size up to 16.
The float32 softmax backward at 4096 x 151936 sits level with quack (1.00 against 0.99-1.00 ÷ its
floor).  Both run clusters of 16 blocks of 256 threads at two blocks per SM, and p93 saw 14 such
clusters resident on the H200: 224 of 264 block slots, 20 SMs idle.  A cluster is placed within one
GPC, so clusters of 13-15 blocks may leave fewer SMs idle (max active clusters says), and 15 blocks
of 10 vectors hold the row at 99 % against 16's 93 %.  cluster_row's exchange (cluster.cuh
PushedExchange) pushes to every block of the cluster and needs no power of two; the probe's patch
drops the kernel's power-of-two assert (-cluster-sizes-p105.patch) and the plan check.
Also: quack's softmax_bwd allocates each output (two buffers in turn, torch's cache), the bench's
auto writes one out buffer; "16 two outs" writes two in turn.
1. max active clusters of each plan (float32 backward and forward, 128256-196608 columns);
2. four rounds in turn, each plan ÷ torch.add(y, dy, out=dx) (backward) or a torch copy_ (forward)
   timed in its round, every output checked against float64 on 32 rows first.
Decision, fixed before the run: a rule that picks the cluster size by resident blocks (or by fill)
goes in only if it is ahead at 151936 by 0.5 % or more and behind nowhere by more than 0.5 %.
  patch -p1 < notes/tune-runs/2026-12-03-cluster-sizes-p105.patch
  PYTHONPATH=.:<quack> python3 notes/tune-runs/2026-12-03-cluster-sizes-p105.py [seconds]
Ran 2026-12-03 17:22 UTC (-cluster-sizes-p105.txt, with quack): clusters of 13-16 blocks at two per SM
all have 14 clusters resident (clusters of 16 at one block per SM: 7; of 8: 15), so no size fills
more SMs; 4096 x 151936 softmax backward 1.002 / 1.004 / 1.003 / 1.003 (16 / 15 / 14 / 13) against
quack's 1.000, two output buffers in turn 1.004: no rule taken, the kernel keeps its power-of-two
assert.  These rounds were too coarse for the question (probes 107-108).
"""
import sys
import time

import cupy

import softmax_lab

LIMIT = float(sys.argv[1]) if len(sys.argv) > 1 else 400
sys.argv = sys.argv[:1]
sys.path.insert(0, "notes/tune-runs")
p67 = __import__("2026-12-02-halves-group-or-cluster-p67")
V = sys.modules["softmax_lab.variants"]
T0 = time.time()
V._check_cluster_and_threads = lambda cluster, threads: None  # any cluster size (the probe's patch)
BACKWARD = [  # (rows, cols, op, cluster sizes, quack)
    (4096, 151936, "softmax_backward", (16, 15, 14, 13), True),
    (4096, 151936, "log_softmax_backward", (16, 15, 14, 13), False),
    (2048, 151936, "softmax_backward", (16, 15, 14, 13), True),
    (4096, 128256, "softmax_backward", (16, 14, 13, 12, 11), True),
    (1056, 151936, "softmax_backward", (16, 15, 14, 13), False),
]
FORWARD = [
    (4096, 151936, "softmax", (16, 15, 14, 13, 12)),
    (4096, 128256, "softmax", (16, 14, 12, 11, 10)),
]


def plan_for(cols, cluster, arrays):
    vecs = cols * 4 // 16
    vpt = -(-(-(-vecs // cluster)) // 256)
    return V.RowClusterPlan(cluster, 256, vpt, V.cluster_row_blocks_per_sm(256, vpt, arrays, 4, cluster))


def occupancy(dev):
    for op, cols in [("softmax_backward", 151936), ("softmax_backward", 128256), ("softmax_backward", 196608),
                     ("softmax", 151936), ("softmax", 128256)]:
        arrays = 2 if op in V.BACKWARD_OPS else 1
        for c in range(8, 17):
            plan = plan_for(cols, c, arrays)
            if plan.vpt > 24:
                continue
            kernel = V._cluster_kernel("cluster_row.cu", plan, dev, V.kernel_defines("float32", op))
            try:
                n = V.resident_groups(plan, kernel, dev)
            except Exception as e:  # noqa: BLE001
                n = f"refused ({e})"
            blocks = n * c if isinstance(n, int) else 0
            print(f"  {op} {cols} {plan.label()}: {n} clusters resident, {blocks} blocks "
                  f"({blocks / plan.blocks_per_sm:.0f} SMs' worth of {dev.sm_count})", flush=True)


def rounds(calls, floor_call, nsets, title):
    res = {name: [] for name in calls}
    for _ in range(4):
        for name, call in calls.items():
            floor = p67.tm(floor_call, nsets)[0]
            res[name].append(p67.tm(call, nsets)[0] / floor)
    print(title, flush=True)
    for n, vals in res.items():
        print(f"  {n:>14}: " + " ".join(f"{v:.3f}" for v in vals) + f"  median {sorted(vals)[len(vals) // 2]:.3f}",
              flush=True)


def error(out, want):
    return ((out.double() - want).abs().max() / want.abs().max()).nan_to_num(1e9).item()


def backward(dev, r, c, op, clusters, with_quack):
    import torch
    torch.manual_seed(r + c)
    x = torch.randn(r, c, device="cuda") * 3
    y = torch.softmax(x, -1) if op == "softmax_backward" else torch.log_softmax(x, -1)
    del x
    dy = torch.randn(r, c, device="cuda")
    dx, dx2 = torch.empty_like(y), torch.empty_like(y)
    y64, g64 = y[:32].double(), dy[:32].double()
    want = y64 * (g64 - (g64 * y64).sum(-1, keepdim=True)) if op == "softmax_backward" else \
        g64 - y64.exp() * g64.sum(-1, keepdim=True)
    sh = V.Shape(r, c, c, c, 0, 0, 4, "float32", op, c, 0)
    rule = V.preferences(sh, dev)[0].name, V.cluster_row_plan(c, dev, r, 4, 2).label()
    stream = cupy.cuda.Stream.null
    calls, outs = {}, {}
    for k in clusters:
        f = V._prepare_cluster_row(sh, dev, plan_for(c, k, 2))
        calls[plan_for(c, k, 2).label()] = lambda i, f=f: f(y.data_ptr(), dx.data_ptr(), stream, dy.data_ptr())
        outs[plan_for(c, k, 2).label()] = dx
        if k == 16:
            turn = [0]

            def two(i, f=f):
                turn[0] ^= 1
                f(y.data_ptr(), (dx if turn[0] else dx2).data_ptr(), stream, dy.data_ptr())
            calls["16 two outs"], outs["16 two outs"] = two, dx  # its first call writes dx
    if with_quack:
        try:
            from quack.softmax import softmax_bwd
            calls["quack"] = lambda i: softmax_bwd(dy, y)
        except ImportError:
            pass
    for name, call in calls.items():
        dx.fill_(float("nan"))
        dx2.fill_(float("nan"))
        out = call(0)
        out = out if name == "quack" else outs[name]
        torch.cuda.synchronize()
        print(f"  {name} max error / max {error(out[:32], want):.2g}", flush=True)
    rounds(calls, lambda i: torch.add(y, dy, out=dx), 1, f"{r}x{c} float32 {op} (rule: {rule}) ÷ add")


def forward(dev, r, c, op, clusters):
    import torch
    torch.manual_seed(r + c)
    x = torch.randn(r, c, device="cuda") * 3
    y = torch.empty_like(x)
    want = torch.softmax(x[:32].double(), -1)
    sh = V.Shape(r, c, c, c, 0, 0, 4, "float32", op)
    rule = V.preferences(sh, dev)[0].name, V.cluster_row_plan(c, dev, r, 4, 1).label()
    stream = cupy.cuda.Stream.null
    calls = {}
    for k in clusters:
        f = V._prepare_cluster_row(sh, dev, plan_for(c, k, 1))
        calls[plan_for(c, k, 1).label()] = lambda i, f=f: f(x.data_ptr(), y.data_ptr(), stream)
    try:
        from quack.softmax import softmax_fwd
        calls["quack"] = lambda i: softmax_fwd(x)
    except ImportError:
        pass
    for name, call in calls.items():
        y.fill_(float("nan"))
        out = call(0)
        torch.cuda.synchronize()
        print(f"  {name} max error / max {error((out if name == 'quack' else y)[:32], want):.2g}", flush=True)
    rounds(calls, lambda i: y.copy_(x), 1, f"{r}x{c} float32 {op} (rule: {rule}) ÷ copy")


def main():
    import torch
    dev = softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    occupancy(dev)
    for job, args in [(backward, s) for s in BACKWARD] + [(forward, s) for s in FORWARD]:
        if time.time() - T0 > LIMIT:
            return print("time limit", flush=True)
        job(dev, *args)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
