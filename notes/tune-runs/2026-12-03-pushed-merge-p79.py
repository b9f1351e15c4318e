"""Probe 79: single_read's per-row merge pushed (SR_PUSHED_MERGE 1, cluster.cuh row_exchange) against
the pair published between two cluster barriers (0), now also with try_wait's suspend-time hint in the
pushed merge's wait (ROW_EXCHANGE_SUSPEND_NS: 10 ms, quack's; the wait then sleeps until the phase
completes rather than spinning): p78 had the pushed merge 1-6 % behind at clusters of 4 (bf16 4096 x
151936 at two blocks per SM 1.12 -> 1.19) and 1-5 % ahead at clusters of 8 (bf16 4096 x 393216
1.10 -> 1.05).  cluster_row (relaxed arrival, landed) with the hint in every mbarrier wait
(MBAR_SUSPEND_NS) beside.  p64's harness (p67's job), p74's define override.
with -pushed-merge-p79.patch applied: PYTHONPATH=. python3 notes/tune-runs/2026-12-03-pushed-merge-p79.py [seconds]"""
import sys
import time

import softmax_lab

LIMIT = float(sys.argv[1]) if len(sys.argv) > 1 else 200
sys.argv = sys.argv[:1]
sys.path.insert(0, "notes/tune-runs")
p67 = __import__("2026-12-02-halves-group-or-cluster-p67")
p74 = __import__("2026-12-02-policies-landed-p74")
V = sys.modules["softmax_lab.variants"]
T0 = time.time()
HINT = 10_000_000
SR = [("published", {"SR_PUSHED_MERGE": 0}), ("pushed", {"SR_PUSHED_MERGE": 1}),
      ("pushed+hint", {"SR_PUSHED_MERGE": 1, "ROW_EXCHANGE_SUSPEND_NS": HINT})]
CR = [("relaxed", {}), ("relaxed+hint", {"MBAR_SUSPEND_NS": HINT})]
SHAPES = [(4096, 151936, "bfloat16", "softmax"), (4096, 151936, "float32", "softmax"),
          (4096, 393216, "bfloat16", "softmax"), (4096, 128256, "float32", "softmax"),
          (4096, 151936, "bfloat16", "log_softmax"), (4096, 393216, "float16", "log_softmax"),
          (1056, 151936, "float32", "softmax"), (4096, 393216, "float32", "softmax"),
          (4096, 100003, "float32", "softmax"), (4096, 300000, "bfloat16", "softmax"),
          (132, 151936, "float32", "softmax"), (132, 393216, "bfloat16", "softmax"),
          (4096, 128256, "bfloat16", "softmax"), (8192, 65536, "float32", "softmax")]


def main():
    dev = softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    for rows, cols, dtype, op in SHAPES:
        if time.time() - T0 > LIMIT:
            print("time limit", flush=True)
            return
        sh = V.Shape(rows, cols, cols, cols, 0, 0, V.DTYPES[dtype], dtype, op)
        auto = V.preferences(sh, dev)[0]

        def make(sh=sh, auto=auto):
            return auto.prepare(sh, dev)
        label = auto.name + (":" + V.single_read_plan(cols, dev, rows, dtype, op).label() if auto.name == "single_read" else "")
        plans = [(f"{label}:{name}", p74.with_defines(make, d)) for name, d in (SR if auto.name == "single_read" else CR)]
        p67.job(rows, cols, dtype, op, plans, dev)


if __name__ == "__main__":
    main()
