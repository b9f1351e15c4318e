"""Probe 83: (1) multi_block_smem's register slot (MBS_REG_SLOT): the one-group schedule holds one chunk
more a block, in its threads' registers, so that the float32 4M-column ring holds 2.26 rows in place of
1.84 (one group at 3M columns, 2.4 rows, ran 1.21-1.24 against 4M's 1.33-1.37, p75); ÷ copy, back to
back, the rule's build against the register slot at lags 2-4.  (2) cluster_row's float32 backward
block shapes (and single_read's backward where given, probe 84) at 151936 columns (the tables' one cell behind quack: 1.01-1.06 against 1.00), ÷
torch.add(y, dy, out=dx).
p64's harness (p67's job) for (1), p82's for (2).
PYTHONPATH=. python3 notes/tune-runs/2026-12-03-register-slot-p83.py [seconds]"""
import runpy
import sys
import time

import torch

import softmax_lab

LIMIT = float(sys.argv[1]) if len(sys.argv) > 1 else 240
sys.argv = sys.argv[:1]
sys.path.insert(0, "notes/tune-runs")
p67 = __import__("2026-12-02-halves-group-or-cluster-p67")
p40 = runpy.run_path("notes/tune-runs/2026-12-02-short-halves-p40.py", run_name="p40")
tm, S, L2 = (p40[k] for k in ("tm", "S", "L2"))
V = sys.modules["softmax_lab.variants"]
T0 = time.time()
LONG = [(32, 1 << 22, "softmax"), (132, 1 << 22, "softmax"), (128, 1 << 22, "softmax"), (32, 4194301, "softmax"),
        (32, 1 << 22, "log_softmax"), (40, 3145728, "softmax"), (132, 3145728, "softmax"), (16, 6_000_001, "softmax")]
BACKWARD_PLANS = [(8, 512, 10, 1), (8, 384, 13, 1), (8, 448, 11, 1), (16, 256, 10, 2), (16, 512, 5, 1), (8, 640, 8, 1),
                  (4, 1024, 10, 1)]


def long_rows(dev):
    mbs = V.get_variant("multi_block_smem")
    for rows, cols, op in LONG:
        if time.time() - T0 > LIMIT:
            print("time limit", flush=True)
            return
        sh = V.Shape(rows, cols, cols, cols, 0, 0, 4, "float32", op)
        auto = V.preferences(sh, dev)[0]
        plans = [(f"auto:{auto.name}", lambda sh=sh, a=auto: a.prepare(sh, dev)),
                 ("regs lag 4", lambda sh=sh: mbs.prepare(sh, dev, split=False, reg_slot=True, lag=4)),
                 ("regs lag 3", lambda sh=sh: mbs.prepare(sh, dev, split=False, reg_slot=True, lag=3)),
                 ("regs lag 2", lambda sh=sh: mbs.prepare(sh, dev, split=False, reg_slot=True, lag=2))]
        p67.job(rows, cols, "float32", op, plans, dev)


def backward(dev, r, c, op="softmax_backward", single_read=None):
    torch.manual_seed(r + c)
    nsets = max(1, min(8, -(-4 * L2 // (3 * r * c * 4))))
    x = [torch.randn(r, c, device="cuda") * 3 for _ in range(nsets)]
    ys = [torch.softmax(v, -1) if op == "softmax_backward" else torch.log_softmax(v, -1) for v in x]
    del x
    gs = [torch.randn(r, c, device="cuda") for _ in range(nsets)]
    dxs = [torch.empty_like(ys[0]) for _ in range(nsets)]
    floor = tm(lambda i: torch.add(ys[i], gs[i], out=dxs[i]), nsets)[0]
    y64, g64 = ys[0][:32].double(), gs[0][:32].double()
    want = y64 * (g64 - (g64 * y64).sum(-1, keepdim=True)) if op == "softmax_backward" else \
        g64 - y64.exp() * g64.sum(-1, keepdim=True)
    sh = V.Shape(r, c, c, c, 0, 0, 4, "float32", op, c, 0)
    auto = V.preferences(sh, dev)[0].name
    res = []
    for rep in range(2):
        for cl, th, vpt, bps, *stream in BACKWARD_PLANS + ([(0, 0, 0, 0)] if single_read else []):
            plan = V.RowClusterPlan(cl, th, vpt, bps, *stream) if cl else single_read
            try:
                launch = V.get_variant("cluster_row").prepare(sh, dev, plan=plan) if cl else \
                    V.get_variant("single_read").prepare(sh, dev, config=plan)
            except Exception as e:  # noqa: BLE001
                res.append(f"{plan.label()} ERR {str(e)[:60]}")
                continue
            call = lambda i: launch(ys[i].data_ptr(), dxs[i].data_ptr(), S, gs[i].data_ptr())  # noqa: E731
            dxs[0].fill_(float("nan"))
            call(0)
            torch.cuda.synchronize()
            err = ((dxs[0][:32].double() - want).abs().max() / want.abs().max()).nan_to_num(1e9).item()
            t = tm(call, nsets)
            res.append(f"{'' if cl else 'single_read:'}{plan.label()} {t[0] / floor:.3f} ({t[1] / floor:.3f}-{t[2] / floor:.3f})"
                       + ("" if err < 1e-4 else f" BAD {err:.2g}"))
    print(f"{r}x{c} float32 {op} (add {floor * 1e3:.0f} us, auto {auto}): " + " | ".join(res), flush=True)
    del ys, gs, dxs
    torch.cuda.empty_cache()


def main():
    dev = softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    long_rows(dev)
    for r, c, op in ((4096, 151936, "softmax_backward"), (1056, 151936, "softmax_backward"),
                     (4096, 151936, "log_softmax_backward")):
        if time.time() - T0 > LIMIT:
            print("time limit", flush=True)
            return
        backward(dev, r, c, op)


if __name__ == "__main__":
    main()
