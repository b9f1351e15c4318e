"""Probe 75 (written, not yet run): the checks the twenty-seventh session left.
(1) cluster_row's plain stores for the halves (244dcf3) at few rows in L2, back to back: CR_STORE
    STORE_NORMAL (2, the rule's now) against STORE_FIRST (0, before), where the bf16 grid read 132 x
    100003 1.35 against 1.19;
(2) multi_block_smem's split schedule against one group for float32 rows past what its ring holds
    in 3 rows, now that its copies are evict-last (the split took float32 only where the ring holds
    3 rows: 40 x 3145728 had run 1.31 in one group against the split's 1.36, before the policies).
p64's harness (p67's job), p74's define override (p73's).
PYTHONPATH=. python3 notes/tune-runs/2026-12-02-next-checks-p75.py [seconds]"""
import sys
import time

import softmax_lab

sys.path.insert(0, "notes/tune-runs")
p67 = __import__("2026-12-02-halves-group-or-cluster-p67")
p74 = __import__("2026-12-02-policies-landed-p74")
V = sys.modules["softmax_lab.variants"]
T0 = time.time()
LIMIT = float(sys.argv[1]) if len(sys.argv) > 1 else 300
FEW_HALVES = [(rows, cols, dtype, op) for cols in (32000, 65536, 100003, 128256) for rows in (132, 264, 528)
              for dtype, op in (("bfloat16", "softmax"), ("float16", "log_softmax"))]
LONG_FLOATS = [(32, 1 << 22), (132, 1 << 22), (128, 1 << 22), (64, 1 << 21), (40, 3145728), (132, 3145728)]


def main():
    dev = softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    cr, mbs = V.get_variant("cluster_row"), V.get_variant("multi_block_smem")
    for rows, cols, dtype, op in FEW_HALVES:
        if time.time() - T0 > LIMIT:
            print("time limit", flush=True)
            return
        sh = V.Shape(rows, cols, cols, cols, 0, 0, V.DTYPES[dtype], dtype, op)
        auto = V.preferences(sh, dev)[0]
        def make(sh=sh):
            return cr.prepare(sh, dev)
        plans = [(f"auto:{auto.name}", lambda sh=sh, a=auto: a.prepare(sh, dev)),
                 ("cluster_row:plain", p74.with_defines(make, {"CR_STORE": 2})),
                 ("cluster_row:evict-first", p74.with_defines(make, {"CR_STORE": 0}))]
        p67.job(rows, cols, dtype, op, plans, dev)
    for rows, cols in LONG_FLOATS:
        if time.time() - T0 > LIMIT:
            print("time limit", flush=True)
            return
        sh = V.Shape(rows, cols, cols, cols, 0, 0, 4, "float32", "softmax")
        plans = [(f"one group {V.multi_block_smem_block(cols, 4, dev)}", lambda sh=sh: mbs.prepare(sh, dev, split=False)),
                 ("split 512 x 8", lambda sh=sh: mbs.prepare(sh, dev, threads=512, vpt=8, split=True))]
        p67.job(rows, cols, "float32", "softmax", plans, dev)


if __name__ == "__main__":
    main()
