"""Probe 89: the tables' one cell behind quack, float32 softmax backward at 4096 x 151936 (1.006
against quack's 0.997 in one run; 0.998-1.011 back to back on three machines): auto and quack's
softmax_bwd timed in turn, four rounds, each ÷ the floor torch.add(y, dy, out=dx) timed in the same
round, and both outputs checked against float64 on 32 rows first.  Also auto's cluster_row plan with
dy's loads under y's policy (GRAD_LOAD: evict-last and L1 no-allocate, 2) or evict-first (.cs, 1)
rather than plain __ldg (quack's cp.async.cg bypasses L1 for both arrays).  Needs quack on PYTHONPATH
(record.sh quack-a / quack-b).
PYTHONPATH=. python3 notes/tune-runs/2026-12-03-backward-against-quack-p89.py [seconds]"""
import sys
import time

import softmax_lab

LIMIT = float(sys.argv[1]) if len(sys.argv) > 1 else 200
sys.argv = sys.argv[:1]
sys.path.insert(0, "notes/tune-runs")
p67 = __import__("2026-12-02-halves-group-or-cluster-p67")
p73 = __import__("2026-12-02-policies-sr-mbs-p73")
V = sys.modules["softmax_lab.variants"]
T0 = time.time()
SHAPES = [(4096, 151936, "float32"), (4096, 128256, "float32"), (2048, 151936, "float32"), (4096, 151936, "bfloat16"),
          (4096, 393216, "float32")]


def one(r, c, dtype):
    import torch
    from quack.softmax import softmax_bwd
    torch.manual_seed(r + c)
    t = getattr(torch, dtype)
    y = torch.softmax(torch.randn(r, c, device="cuda") * 3, -1).to(t)
    dy = torch.randn(r, c, device="cuda").to(t)
    dx = torch.empty_like(y)
    y64, g64 = y[:32].double(), dy[:32].double()
    want = y64 * (g64 - (g64 * y64).sum(-1, keepdim=True))
    calls = {"ours": lambda i: softmax_lab.softmax_backward(dy, y, out=dx),
             "quack": lambda i: softmax_bwd(dy, y)}
    dev = softmax_lab.device_info()
    sh = V.Shape(r, c, c, c, 0, 0, y.element_size(), dtype, "softmax_backward", c, 0)
    auto = V.preferences(sh, dev)[0]
    print(f"  auto: {auto.name}", flush=True)
    import cupy as cp
    stream = cp.cuda.Stream.null
    for label, policy in (("dy keep", 2), ("dy stream", 1)):
        p73.EXTRA.clear()
        p73.EXTRA.update({"GRAD_LOAD": policy})
        try:
            launch = auto.prepare(sh, dev)
        finally:
            p73.EXTRA.clear()
        calls[label] = lambda i, launch=launch: launch(y.data_ptr(), dx.data_ptr(), stream, dy.data_ptr())
    for name, call in calls.items():
        dx.fill_(float("nan"))
        out = call(0)
        out = dx if out is None or name != "quack" else out
        torch.cuda.synchronize()
        err = ((out[:32].double() - want).abs().max() / want.abs().max()).nan_to_num(1e9).item()
        print(f"  {name} max error / max {err:.2g}", flush=True)
    rounds = {name: [] for name in calls}
    for _ in range(4):
        for name, call in calls.items():
            floor = p67.tm(lambda i: torch.add(y, dy, out=dx), 1)[0]
            rounds[name].append(p67.tm(call, 1)[0] / floor)
    print(f"{r}x{c} {dtype} softmax_backward ÷ add: " + " | ".join(
        f"{n} " + " ".join(f"{v:.3f}" for v in vals) + f" (median {sorted(vals)[len(vals) // 2]:.3f})"
        for n, vals in rounds.items()), flush=True)


def main():
    import torch
    dev = softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    for r, c, dtype in SHAPES:
        if time.time() - T0 > LIMIT:
            print("time limit", flush=True)
            return
        one(r, c, dtype)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
