"""Probe 82: the float32 backward after the relaxed cluster-barrier arrival (fc28a1e).  auto takes
cluster_row's backward for clusters of at most 2 and for up to a row per SM, single_read's backward
past that (twelfth session: from 528 rows single_read won or tied, before fc28a1e).  The tables'
float32 softmax backward at 4096 x 151936 ran 1.05 against quack's 0.99.  Here, back to back,
cluster_row's backward plan against single_read's, ÷ torch.add(y, dy, out=dx), both ops.
p40's harness (tm), as p56.
PYTHONPATH=. python3 notes/tune-runs/2026-12-03-cluster-row-backward-p82.py [seconds]"""
import runpy
import sys
import time

import torch

LIMIT = float(sys.argv[1]) if len(sys.argv) > 1 else 150
p40 = runpy.run_path("notes/tune-runs/2026-12-02-short-halves-p40.py", run_name="p40")
tm, V, dev, S, L2 = (p40[k] for k in ("tm", "V", "dev", "S", "L2"))
T0 = time.time()


def run(r, c, op):
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
    crp = V.cluster_row_plan(c, dev, r, 4, 2)
    cands = [("single_read", V.single_read_backward_plan(c, dev, r, "float32", op))]
    if crp is not None:
        cands.append(("cluster_row", crp))
    res = []
    for rep in range(2):
        for name, plan in cands:
            knob = {"config": plan} if name == "single_read" else {"plan": plan}
            try:
                launch = V.get_variant(name).prepare(sh, dev, **knob)
            except Exception as e:  # noqa: BLE001
                res.append(f"{name}:{plan.label()} ERR {str(e)[:60]}")
                continue
            call = lambda i: launch(ys[i].data_ptr(), dxs[i].data_ptr(), S, gs[i].data_ptr())  # noqa: E731
            dxs[0].fill_(float("nan"))
            call(0)
            torch.cuda.synchronize()
            err = ((dxs[0][:32].double() - want).abs().max() / want.abs().max()).nan_to_num(1e9).item()
            t = tm(call, nsets)
            res.append(f"{name}:{plan.label()} {t[0] / floor:.3f} ({t[1] / floor:.3f}-{t[2] / floor:.3f})"
                       + ("" if err < 1e-4 else f" BAD {err:.2g}"))
    print(f"{r}x{c} float32 {op} (add {floor * 1e3:.0f} us, auto {auto}): " + " | ".join(res), flush=True)
    del ys, gs, dxs
    torch.cuda.empty_cache()


if __name__ == "__main__":
    print(torch.cuda.get_device_name(), time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    for r, c in ((4096, 151936), (4096, 128256), (1056, 151936), (4096, 65536), (528, 100003), (4096, 196608),
                 (2048, 262144), (1056, 393216)):
        for op in ("softmax_backward", "log_softmax_backward"):
            if time.time() - T0 > LIMIT:
                print("time limit", flush=True)
                sys.exit()
            run(r, c, op)
