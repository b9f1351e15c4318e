"""Probe 106 (2026-12-03, thirty-fifth session): two questions about the float32 softmax backward
at 4096 x 151936, where auto (cluster_row 16 x 256 x 10 x 2) and quack's softmax_bwd are level in
interleaved rounds (p95, p105: 0.997-1.002 against 0.999-1.000 ÷ torch.add) but quack leads by
0.3-0.5 % in every bench table (auto 1.000-1.005, quack 0.995-1.002).
1. Order: the bench times its candidates one after the other in candidates()'s order (auto, the
   floors, torch, quack), each 5 warm-up calls and 20 timed.  The same measure (timing.gpu_times on
   the bench's own prepared calls and arrays), in the bench's order and reversed, three times each:
   does the place in the order move a candidate by as much as the gap?
2. The held loads with an L2 prefetch size (HELD_PREFETCH 64 / 128 / 256: ld ... .L2::256B, SASS
   LDG.E.NA.LTC256B.128; -prefetch-and-order-p106.patch): the L2 fetches the whole 256 bytes of a
   miss at once.  cluster_row's plans by the rule, four rounds in turn ÷ torch.add (backward) or a
   torch copy_ (forward) timed in each round, outputs checked against float64 on 32 rows first.
Decision, fixed before the run: a prefetch size becomes the held loads' default where it is ahead
at 4096 x 151936 by 0.3 % or more and behind at no shape by more than 0.3 %.
  patch -p1 < notes/tune-runs/2026-12-03-prefetch-and-order-p106.patch
  PYTHONPATH=.:<quack> python3 notes/tune-runs/2026-12-03-prefetch-and-order-p106.py [seconds]
Ran 2026-12-03 17:27 UTC (-prefetch-and-order-p106.txt): the order does not matter (auto 1.0007-1.0014,
quack 0.9942-0.9954 in both orders, three times each): under the bench's own measure quack leads by
0.6 %.  Prefetch sizes within the rounds' noise at 4096 x 151936 (0.997-1.001 against 0.999), 256
bytes 0.5-1.5 % slower at 196608 and 128256, every size 2.5-4.6 % slower at 132 x 151936: not taken.
"""
import sys
import time

import cupy
import numpy as np

import softmax_lab
from softmax_lab import bench, timing
from softmax_lab import candidates as cat

LIMIT = float(sys.argv[1]) if len(sys.argv) > 1 else 400
sys.argv = sys.argv[:1]
sys.path.insert(0, "notes/tune-runs")
p67 = __import__("2026-12-02-halves-group-or-cluster-p67")
V = sys.modules["softmax_lab.variants"]
T0 = time.time()
PREFETCH = [0]
_kernel_defines = V.kernel_defines
V.kernel_defines = lambda dtype="float32", op="softmax": _kernel_defines(dtype, op) | {"HELD_PREFETCH": PREFETCH[0]}
BACKWARD = [(4096, 151936, "softmax_backward"), (4096, 151936, "log_softmax_backward"),
            (4096, 196608, "softmax_backward"), (4096, 128256, "softmax_backward"),
            (8192, 65536, "softmax_backward"), (132, 151936, "softmax_backward")]
FORWARD = [(4096, 151936, "softmax"), (16384, 32000, "softmax"), (132, 393216, "softmax")]
SIZES = (0, 64, 128, 256)


def order(dev):
    import torch
    rows, cols, dtype, op = 4096, 151936, "float32", "softmax_backward"
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        arrays = bench.make_arrays(rows, cols, dtype, op, 0, torch)
        by_name = {c.name: c for c in cat.select(["auto", "quack.softmax_backward"], dtype=dtype, op=op)}
        preps = {n: cat.prepare(cat.resolve(c, rows, cols, dev, dtype, op), arrays, dev, torch)
                 for n, c in by_name.items() if n != "floor.cupy_add"}
        first = ["auto", "floor.torch_add", "quack.softmax_backward"]
        for rep in range(3):
            for names in (first, first[::-1]):
                medians = {}
                for n in names:
                    times, _ = timing.gpu_times(preps[n].call, stream, 20, 5, preps[n].poison)
                    medians[n] = float(np.median(times))
                floor = medians["floor.torch_add"]
                print(f"  order {' > '.join(names)}: " + ", ".join(
                    f"{n} {medians[n]:.4f} ms ({medians[n] / floor:.4f})" for n in names), flush=True)
        stream.synchronize()
        del preps, arrays


def rounds(calls, floor_call, title):
    res = {name: [] for name in calls}
    for _ in range(4):
        for name, call in calls.items():
            floor = p67.tm(floor_call, 1)[0]
            res[name].append(p67.tm(call, 1)[0] / floor)
    print(title, flush=True)
    for n, vals in res.items():
        print(f"  {n:>10}: " + " ".join(f"{v:.3f}" for v in vals) + f"  median {sorted(vals)[len(vals) // 2]:.3f}",
              flush=True)


def error(out, want):
    return ((out.double() - want).abs().max() / want.abs().max()).nan_to_num(1e9).item()


def prepared(sh, dev, size):
    PREFETCH[0] = size
    try:
        return V._prepare_cluster_row(sh, dev)
    finally:
        PREFETCH[0] = 0


def backward(dev, r, c, op):
    import torch
    torch.manual_seed(r + c)
    x = torch.randn(r, c, device="cuda") * 3
    y = torch.softmax(x, -1) if op == "softmax_backward" else torch.log_softmax(x, -1)
    del x
    dy = torch.randn(r, c, device="cuda")
    dx = torch.empty_like(y)
    y64, g64 = y[:32].double(), dy[:32].double()
    want = y64 * (g64 - (g64 * y64).sum(-1, keepdim=True)) if op == "softmax_backward" else \
        g64 - y64.exp() * g64.sum(-1, keepdim=True)
    sh = V.Shape(r, c, c, c, 0, 0, 4, "float32", op, c, 0)
    stream = cupy.cuda.Stream.null
    calls = {}
    for k in SIZES:
        f = prepared(sh, dev, k)
        calls[f"pf {k}"] = lambda i, f=f: f(y.data_ptr(), dx.data_ptr(), stream, dy.data_ptr())
    if op == "softmax_backward":
        from quack.softmax import softmax_bwd
        calls["quack"] = lambda i: softmax_bwd(dy, y)
    for name, call in calls.items():
        dx.fill_(float("nan"))
        out = call(0)
        torch.cuda.synchronize()
        print(f"  {name} max error / max {error((out if name == 'quack' else dx)[:32], want):.2g}", flush=True)
    plan = V.cluster_row_plan(c, dev, r, 4, 2).label()
    rounds(calls, lambda i: torch.add(y, dy, out=dx), f"{r}x{c} float32 {op} (cluster_row {plan}) ÷ add")


def forward(dev, r, c, op):
    import torch
    torch.manual_seed(r + c)
    x = torch.randn(r, c, device="cuda") * 3
    y = torch.empty_like(x)
    want = torch.softmax(x[:32].double(), -1)
    sh = V.Shape(r, c, c, c, 0, 0, 4, "float32", op)
    stream = cupy.cuda.Stream.null
    calls = {}
    for k in SIZES:
        f = prepared(sh, dev, k)
        calls[f"pf {k}"] = lambda i, f=f: f(x.data_ptr(), y.data_ptr(), stream)
    for name, call in calls.items():
        y.fill_(float("nan"))
        call(0)
        torch.cuda.synchronize()
        print(f"  {name} max error / max {error(y[:32], want):.2g}", flush=True)
    plan = V.cluster_row_plan(c, dev, r, 4, 1).label()
    rounds(calls, lambda i: y.copy_(x), f"{r}x{c} float32 {op} (cluster_row {plan}) ÷ copy")


def main():
    import torch
    dev = softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    order(dev)
    torch.cuda.empty_cache()
    for job, args in [(backward, s) for s in BACKWARD] + [(forward, s) for s in FORWARD]:
        if time.time() - T0 > LIMIT:
            return print("time limit", flush=True)
        job(dev, *args)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
