"""Probe 90, on the working tree after p88 and p89:
(mbs) multi_block_smem's new rule (the split of 512 x 7 x 4 where its ring holds two rows; p88)
against the rule before (512 x 8 x 3 split where its ring holds three rows, else one group of
448 x 8 x 4; the halves then multi_block_l2), float32 and the halves, ÷ torch copy_ (p67's job);
(lines) cluster_row's slices on 128-byte lines (CR_LINE_SLICES 1, the working tree's default)
against the even split (0), forward ÷ copy_ and backward ÷ torch.add (p83's harness), where auto
takes cluster_row; (quack, needs quack on PYTHONPATH) the float32 backward at 151936 columns, lines
on / off / quack's softmax_bwd in turn, four rounds, each ÷ torch.add in its round (p89).
PYTHONPATH=. python3 notes/tune-runs/2026-12-03-lines-and-split-p90.py mbs,lines|quack [seconds]"""
import io
import sys
import time
from contextlib import redirect_stdout

import softmax_lab

PARTS = sys.argv[1].split(",") if len(sys.argv) > 1 else ["mbs", "lines"]
LIMIT = float(sys.argv[2]) if len(sys.argv) > 2 else 240
sys.argv = sys.argv[:1]
sys.path.insert(0, "notes/tune-runs")
p67 = __import__("2026-12-02-halves-group-or-cluster-p67")
p73 = __import__("2026-12-02-policies-sr-mbs-p73")
p74 = __import__("2026-12-02-policies-landed-p74")
p83 = __import__("2026-12-03-register-slot-p83")
V = sys.modules["softmax_lab.variants"]
T0 = time.time()
MBS = [(132, 1 << 20, "float32", "softmax"), (1024, 1 << 20, "float32", "softmax"), (132, 1572864, "float32", "softmax"),
       (64, 1 << 21, "float32", "softmax"), (40, 3 << 20, "float32", "softmax"), (132, 3 << 20, "float32", "softmax"),
       (32, 3600000, "float32", "softmax"), (132, 3 << 20, "float32", "log_softmax"),
       (132, 1 << 20, "bfloat16", "softmax"), (64, 1 << 22, "bfloat16", "softmax"), (132, 6 << 20, "bfloat16", "softmax"),
       (32, 6 << 20, "bfloat16", "softmax"), (64, 6 << 20, "float16", "log_softmax"), (64, 1 << 22, "float16", "log_softmax"),
       (132, 7_400_000, "bfloat16", "softmax")]
FORWARD = [(4096, 151936, "float32", "softmax"), (4096, 128256, "float32", "softmax"), (132, 393216, "float32", "softmax"),
           (4096, 100003, "float32", "softmax"), (1024, 393216, "float32", "softmax"), (4096, 151936, "bfloat16", "softmax"),
           (4096, 151936, "float16", "log_softmax"), (132, 151936, "float32", "log_softmax")]
BACKWARD = [(4096, 151936, "softmax_backward"), (2048, 151936, "softmax_backward"), (1056, 151936, "softmax_backward"),
            (132, 151936, "softmax_backward"), (4096, 128256, "softmax_backward"), (4096, 196608, "log_softmax_backward"),
            (4096, 151936, "log_softmax_backward"), (4096, 100003, "softmax_backward")]


def old_mbs_rule(sh, dev):
    """The rule before this probe: 512 x 8 x 3 split where 132 x 3 slots hold 3 rows, else one group 448 x 8 x 4."""
    vecs = V._row_vecs(sh.cols, sh.itemsize)
    if dev.sm_count * V.multi_block_smem_slots(dev, 512, 8, 1) >= 3 * -(-vecs // (512 * 8)):
        return {"threads": 512, "vpt": 8, "split": True}
    return {"threads": 448, "vpt": 8, "split": False}


def mbs(dev):
    for rows, cols, dtype, op in MBS:
        if time.time() - T0 > LIMIT:
            return print("time limit", flush=True)
        sh = V.Shape(rows, cols, cols, cols, 0, 0, V.DTYPES[dtype], dtype, op)
        auto = V.preferences(sh, dev)[0]
        plans = [(f"auto:{auto.name}:{V.multi_block_smem_block(cols, sh.itemsize, dev)}", lambda sh=sh, a=auto: a.prepare(sh, dev))]
        old = old_mbs_rule(sh, dev)
        plans.append((f"old mbs {old}", lambda sh=sh, kw=old: V._prepare_multi_block_smem(sh, dev, blocks_per_sm=1, **kw)))
        if dtype != "float32":
            plans.append(("multi_block_l2", lambda sh=sh: V.get_variant("multi_block_l2").prepare(sh, dev)))
        p67.job(rows, cols, dtype, op, plans, dev)


def lines(dev):
    for rows, cols, dtype, op in FORWARD:
        if time.time() - T0 > LIMIT:
            return print("time limit", flush=True)
        sh = V.Shape(rows, cols, cols, cols, 0, 0, V.DTYPES[dtype], dtype, op)
        auto = V.preferences(sh, dev)[0]
        if auto.name != "cluster_row":
            print(f"{rows}x{cols} {dtype} {op}: auto {auto.name}, skipped", flush=True)
            continue
        make = lambda sh=sh, a=auto: a.prepare(sh, dev)
        p67.job(rows, cols, dtype, op, [("lines 1", p74.with_defines(make, {"CR_LINE_SLICES": 1})),
                                        ("lines 0", p74.with_defines(make, {"CR_LINE_SLICES": 0}))], dev)
    for r, c, op in BACKWARD:
        if time.time() - T0 > LIMIT:
            return print("time limit", flush=True)
        plan = V.cluster_row_plan(c, dev, r, 4, 2)
        p83.BACKWARD_PLANS[:] = [(plan.cluster, plan.threads, plan.vpt, plan.blocks_per_sm)]
        for on in (1, 0):
            p73.EXTRA.clear()
            p73.EXTRA.update({"CR_LINE_SLICES": on})
            buf = io.StringIO()
            with redirect_stdout(buf):
                p83.backward(dev, r, c, op)
            print(f"lines {on}: {buf.getvalue().strip()}", flush=True)
        p73.EXTRA.clear()


def quack(dev):
    import cupy as cp
    import torch
    from quack.softmax import softmax_bwd
    for r, c in ((4096, 151936), (2048, 151936), (4096, 128256), (1056, 151936)):
        if time.time() - T0 > LIMIT:
            return print("time limit", flush=True)
        torch.manual_seed(r + c)
        y = torch.softmax(torch.randn(r, c, device="cuda") * 3, -1)
        dy = torch.randn(r, c, device="cuda")
        dx = torch.empty_like(y)
        y64, g64 = y[:32].double(), dy[:32].double()
        want = y64 * (g64 - (g64 * y64).sum(-1, keepdim=True))
        sh = V.Shape(r, c, c, c, 0, 0, 4, "float32", "softmax_backward", c, 0)
        auto = V.preferences(sh, dev)[0]
        calls = {"quack": lambda i, y=y, dy=dy: softmax_bwd(dy, y)}
        for on in (1, 0):
            p73.EXTRA.clear()
            p73.EXTRA.update({"CR_LINE_SLICES": on})
            launch = auto.prepare(sh, dev)
            p73.EXTRA.clear()
            calls[f"lines {on}"] = lambda i, launch=launch, y=y, dy=dy, dx=dx: launch(
                y.data_ptr(), dx.data_ptr(), cp.cuda.Stream.null, dy.data_ptr())
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
                floor = p67.tm(lambda i, y=y, dy=dy, dx=dx: torch.add(y, dy, out=dx), 1)[0]
                rounds[name].append(p67.tm(call, 1)[0] / floor)
        print(f"{r}x{c} float32 softmax_backward ({auto.name}) ÷ add: " + " | ".join(
            f"{n} " + " ".join(f"{v:.3f}" for v in vals) + f" (median {sorted(vals)[len(vals) // 2]:.3f})"
            for n, vals in rounds.items()), flush=True)
        del y, dy, dx, calls
        torch.cuda.empty_cache()


def main():
    dev = softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    for part in PARTS:
        {"mbs": mbs, "lines": lines, "quack": quack}[part](dev)


if __name__ == "__main__":
    main()
