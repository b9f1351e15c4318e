"""Probe 92 (2026-12-03): probe 91's staged float32 backward ran 1.09-1.31 x torch.add, against
0.99-1.07 loaded straight into registers and quack's 1.00-1.15 with the same staging (cp.async into
2 x 80 KB of shared memory per SM).  Suspect: the driver's default L1 / shared-memory carveout,
sized for one block's 80 KB, so that one block of the planned two is resident per SM.  Here the
staged plan twice, with the driver's default carveout (-1, whatever the launcher sets) and with CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_
MEMORY_CARVEOUT = 100 (all shared), against "now" and quack, four rounds in turn, each ÷
torch.add(y, dy, out=dx) timed in its round; every output checked against float64 on 32 rows.
Decision, fixed before the run: the staged build with the carveout becomes the float32 backward's
where it is ahead of now at 4096 x 151936 and 4096 x 196608 by more than the rounds' spread, and
behind nowhere by more than 0.3 %.
On the tree with RowClusterPlan.staged (CR_STAGE_BACKWARD, -staged-backward-p91.patch); quack on
PYTHONPATH for its column.
Ran 2026-12-03 13:26 UTC (-staged-carveout-p92.txt): the carveout changed nothing (staged 1.12-1.32
either way, now 1.00-1.07, quack 1.00-1.24): not taken, and not the carveout.
PYTHONPATH=. python3 notes/tune-runs/2026-12-03-staged-carveout-p92.py [seconds]"""
import dataclasses
import sys
import time

import cupy

import softmax_lab
from softmax_lab import loader

LIMIT = float(sys.argv[1]) if len(sys.argv) > 1 else 200
sys.argv = sys.argv[:1]
sys.path.insert(0, "notes/tune-runs")
p67 = __import__("2026-12-02-halves-group-or-cluster-p67")
V = sys.modules["softmax_lab.variants"]
T0 = time.time()
CARVEOUT = 9  # CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT
SHAPES = [(4096, 151936, "softmax_backward"), (4096, 196608, "softmax_backward"), (2048, 151936, "softmax_backward"),
          (4096, 151936, "log_softmax_backward"), (1056, 151936, "softmax_backward"), (132, 151936, "softmax_backward"),
          (4096, 128256, "softmax_backward"), (8192, 65536, "softmax_backward"), (4096, 100000, "softmax_backward"),
          (528, 196608, "log_softmax_backward")]
_get_kernel = loader.get_kernel
BUILT = []


def get_kernel(filename, entry, defines=None, device_id=0):  # a define of its own: a CUfunction of its own
    kernel = _get_kernel(filename, entry, (defines or {}) | EXTRA, device_id)
    BUILT.append(kernel)
    return kernel


EXTRA = {}
loader.get_kernel = get_kernel


def one(dev, r, c, op):
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
    for label, staged, carveout in (("now", False, None), ("staged", True, -1), ("staged+carveout", True, 100)):
        EXTRA.clear()
        if carveout is not None:
            EXTRA["PROBE_CARVEOUT"] = carveout
        BUILT.clear()
        try:
            launch = V.get_variant("cluster_row").prepare(sh, dev, plan=dataclasses.replace(plan, staged=staged))
        finally:
            EXTRA.clear()
        if carveout is not None:
            for k in BUILT:
                cupy.cuda.driver.funcSetAttribute(k.kernel.ptr, CARVEOUT, carveout)
        calls[label] = lambda i, launch=launch: launch(y.data_ptr(), dx.data_ptr(), cupy.cuda.Stream.null, dy.data_ptr())
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
