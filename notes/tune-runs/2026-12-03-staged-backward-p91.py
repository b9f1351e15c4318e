"""Probe 91 (2026-12-03): the float32 backward at 151936 columns, where quack's softmax_bwd stays
0.7-1.2 % ahead (p89, p90); quack stages y and dy through shared memory with 16-byte cp.async.cg.
On the tree that stages the float32 backward (RowClusterPlan.staged, CR_STAGE_BACKWARD), with quack
on PYTHONPATH for its column (record.sh quack-a / quack-b); without quack it times ours alone.
auto's cluster_row plan loaded straight into registers ("now", staged=False) against the same plan
staged (its dynamic shared memory 2 x threads x vpt x 16 bytes), quack's in turn, four rounds, each
÷ torch.add(y, dy, out=dx) timed in its round; every output checked against float64 on 32 rows.
Decision, fixed before the run: the staged build stays the float32 backward's where it is ahead of
now at 4096 x 151936 and 2048 x 151936 by more than the rounds' spread, and behind nowhere by more
than 0.3 %; else CR_STAGED is emptied.
The tree it ran on: -staged-backward-p91.patch (without its carveout lines, which p92 added).
Ran 2026-12-03 13:16 UTC (-staged-backward-p91.txt): staged 1.09-1.31 against now 0.99-1.07 and
quack's 1.00-1.15 (4096 x 151936 1.220 / 0.999 / 0.999): not taken.
PYTHONPATH=. python3 notes/tune-runs/2026-12-03-staged-backward-p91.py [seconds]"""
import dataclasses
import sys
import time

import softmax_lab

LIMIT = float(sys.argv[1]) if len(sys.argv) > 1 else 200
sys.argv = sys.argv[:1]
sys.path.insert(0, "notes/tune-runs")
p67 = __import__("2026-12-02-halves-group-or-cluster-p67")
V = sys.modules["softmax_lab.variants"]
T0 = time.time()
SHAPES = [(4096, 151936, "softmax_backward"), (2048, 151936, "softmax_backward"), (4096, 151936, "log_softmax_backward"),
          (1056, 151936, "softmax_backward"), (132, 151936, "softmax_backward"), (4096, 128256, "softmax_backward"),
          (4096, 196608, "softmax_backward"), (8192, 65536, "softmax_backward")]


def one(dev, r, c, op):
    import cupy as cp
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
    plan = V.cluster_row_plan(c, dev, r, 4, 2)
    calls = {}
    for label, p in (("now", dataclasses.replace(plan, staged=False)), ("staged", dataclasses.replace(plan, staged=True))):
        launch = V.get_variant("cluster_row").prepare(sh, dev, plan=p)
        calls[label] = lambda i, launch=launch: launch(y.data_ptr(), dx.data_ptr(), cp.cuda.Stream.null, dy.data_ptr())
    try:
        from quack.softmax import softmax_bwd
        if op == "softmax_backward":
            calls["quack"] = lambda i: softmax_bwd(dy, y)
    except ImportError:
        pass
    for name, call in calls.items():
        dx.fill_(float("nan"))
        out = call(0)
        out = out if name == "quack" else dx
        torch.cuda.synchronize()
        err = ((out[:32].double() - want).abs().max() / want.abs().max()).nan_to_num(1e9).item()
        print(f"  {name} max error / max {err:.2g}", flush=True)
    rounds = {name: [] for name in calls}
    for _ in range(4):
        for name, call in calls.items():
            floor = p67.tm(lambda i: torch.add(y, dy, out=dx), 1)[0]
            rounds[name].append(p67.tm(call, 1)[0] / floor)
    print(f"{r}x{c} float32 {op} ({plan.label()}) ÷ add: " + " | ".join(
        f"{n} " + " ".join(f"{v:.3f}" for v in vals) + f" (median {sorted(vals)[len(vals) // 2]:.3f})"
        for n, vals in rounds.items()), flush=True)


def main():
    import torch
    dev = softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    for r, c, op in SHAPES:
        if time.time() - T0 > LIMIT:
            return print("time limit", flush=True)
        one(dev, r, c, op)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
