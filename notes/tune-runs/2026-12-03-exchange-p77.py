"""Probe 77: cluster_row's exchange with the (max, sum) pairs combined in two butterflies (the max,
then each sum rescaled once: EXCHANGE_RESCALED 1) against the merges before it (0: two exponentials
per slot and per butterfly step, about 24 a thread; probe 76's ncu), at the forward shapes that
cluster_row runs or might run; auto beside.  p64's harness (p67's job), p74's define override.
the rescaled form: -exchange-p77.patch (the build probed had both forms behind EXCHANGE_RESCALED): PYTHONPATH=. python3 notes/tune-runs/2026-12-03-exchange-p77.py [seconds]"""
import sys
import time

import softmax_lab

LIMIT = float(sys.argv[1]) if len(sys.argv) > 1 else 300
sys.argv = sys.argv[:1]
sys.path.insert(0, "notes/tune-runs")
p67 = __import__("2026-12-02-halves-group-or-cluster-p67")
p74 = __import__("2026-12-02-policies-landed-p74")
V = sys.modules["softmax_lab.variants"]
T0 = time.time()
# (rows, cols, dtype, op, extra cluster_row plans)
SHAPES = [(4096, 151936, "float32", "softmax", [V.RowClusterPlan(8, 256, 19, 2)]),
          (132, 151936, "float32", "softmax", [V.RowClusterPlan(8, 256, 19, 2)]),
          (132, 393216, "bfloat16", "softmax", []),
          (132, 262144, "bfloat16", "softmax", []),
          (2048, 262144, "bfloat16", "softmax", []),
          (4096, 128256, "bfloat16", "softmax", []),
          (1056, 151936, "bfloat16", "softmax", []),
          (8192, 65536, "float32", "softmax", []),
          (16384, 32000, "float32", "softmax", []),
          (132, 100003, "float32", "softmax", []),
          (132, 262144, "float32", "softmax", []),
          (132, 393216, "float32", "softmax", []),
          (4096, 128256, "float16", "log_softmax", []),
          (132, 393216, "float16", "log_softmax", []),
          (132, 100003, "bfloat16", "softmax", []),
          (1056, 151936, "float32", "softmax", [V.RowClusterPlan(8, 256, 19, 2)]),
          (4096, 128256, "float32", "softmax", [V.RowClusterPlan(8, 256, 16, 2)])]


def main():
    dev = softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    cr = V.get_variant("cluster_row")
    for rows, cols, dtype, op, extra in SHAPES:
        if time.time() - T0 > LIMIT:
            print("time limit", flush=True)
            return
        sh = V.Shape(rows, cols, cols, cols, 0, 0, V.DTYPES[dtype], dtype, op)
        auto = V.preferences(sh, dev)[0]
        plans = [(f"auto:{auto.name}", lambda sh=sh, a=auto: a.prepare(sh, dev))]
        for plan in [V.cluster_row_plan(cols, dev, rows, V.DTYPES[dtype], 1)] + extra:
            if plan is None:
                continue
            def make(sh=sh, plan=plan):
                return cr.prepare(sh, dev, plan=plan)
            plans += [(f"cr:{plan.label()}:rescaled", p74.with_defines(make, {"EXCHANGE_RESCALED": 1})),
                      (f"cr:{plan.label()}:merges", p74.with_defines(make, {"EXCHANGE_RESCALED": 0}))]
        p67.job(rows, cols, dtype, op, plans, dev)


if __name__ == "__main__":
    main()
