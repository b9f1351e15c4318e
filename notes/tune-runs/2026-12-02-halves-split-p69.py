"""Probe 69: multi_block_smem's split schedule for halves (each reducer's 16 vectors summed as two
runs of 8, split_max_sum) against auto (single_read's memory-merged groups, multi_block_l2), the
one-group build and multi_block_l2, past the 786432 halves a cluster holds.  p64's harness: CUDA
events around max(6, sets) calls back to back, median (2nd-8th) of 9, each plan twice, outputs
checked first; ÷ the faster of two torch copy_ timings.
Part "few": 1-16 rows past 786432 (single_read's clusters of 16 before).  Part "near": the same split against auto at 400000-786432 halves (single_read's groups and clusters,
cluster_row) and at few rows past 786432 (single_read's cluster of 16 before this rule).
PYTHONPATH=. python3 notes/tune-runs/2026-12-02-halves-split-p69.py [long|near|few] [seconds]"""
import sys
import time

import softmax_lab

sys.path.insert(0, __import__("os").path.dirname(__file__))
p67 = __import__("2026-12-02-halves-group-or-cluster-p67")
V = sys.modules["softmax_lab.variants"]
T0 = time.time()
PART = sys.argv[1] if len(sys.argv) > 1 else "long"
LIMIT = float(sys.argv[2]) if len(sys.argv) > 2 else 400

SHAPES = [(132, 1 << 20), (1024, 1 << 20), (32, 1 << 20), (512, 1 << 20), (132, 1 << 21), (32, 1 << 21),
          (132, 1 << 22), (32, 1 << 22), (264, 900001), (1056, 900001), (600, 1500001), (256, 3000017),
          (512, 1 << 21), (128, 1 << 22)]
NEAR = [(4096, 400000), (1024, 500000), (4096, 600001), (528, 786432), (2048, 786432), (8, 1 << 20), (1, 1 << 20),
        (32, 786433), (4096, 786433)]
FEW = [(r, c) for c in (1 << 20, 900001, 1500001) for r in (1, 2, 3, 4, 6, 8, 12, 16)]
KINDS = [("bfloat16", "softmax"), ("float16", "log_softmax"), ("float16", "softmax"), ("bfloat16", "log_softmax")]


def main():
    dev = softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    mbs, l2 = V.get_variant("multi_block_smem"), V.get_variant("multi_block_l2")
    if PART in ("near", "few"):
        sr = V.get_variant("single_read")
        for rows, cols in NEAR if PART == "near" else FEW:
            for dtype, op in KINDS[:2]:
                if time.time() - T0 > LIMIT:
                    print("time limit", flush=True)
                    return
                sh = V.Shape(rows, cols, cols, cols, 0, 0, 2, dtype, op)
                auto = V.preferences(sh, dev)[0]
                plan = V.single_read_plan(cols, dev, rows, dtype, op)
                plans = [(f"auto:{auto.name}", lambda sh=sh, a=auto: a.prepare(sh, dev)),
                         ("mbs:split512", lambda sh=sh: mbs.prepare(sh, dev, threads=512, split=True)),
                         (f"single_read:{plan.label() if plan else None}", lambda sh=sh: sr.prepare(sh, dev))]
                p67.job(rows, cols, dtype, op, plans, dev)
        return
    for i, (rows, cols) in enumerate(SHAPES):
        for dtype, op in KINDS[:2] if i >= 4 else KINDS:
            if time.time() - T0 > LIMIT:
                print("time limit", flush=True)
                return
            sh = V.Shape(rows, cols, cols, cols, 0, 0, 2, dtype, op)
            auto = V.preferences(sh, dev)[0]
            rule = V.multi_block_smem_block(cols, 2, dev)
            plans = [(f"auto:{auto.name}", lambda sh=sh, a=auto: a.prepare(sh, dev)),
                     ("mbs:split512", lambda sh=sh: mbs.prepare(sh, dev, threads=512, split=True)),
                     ("mbs:group448", lambda sh=sh: mbs.prepare(sh, dev, threads=448, split=False)),
                     ("multi_block_l2", lambda sh=sh: l2.prepare(sh, dev))]
            print(f"# {rows}x{cols} {dtype} {op}: rule {rule}", flush=True)
            p67.job(rows, cols, dtype, op, plans, dev)


if __name__ == "__main__":
    main()
