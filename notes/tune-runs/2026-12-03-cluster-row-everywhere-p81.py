"""Probe 81: probe 80 found cluster_row (since the relaxed arrival, fc28a1e) ahead of single_read's
clusters at 1056-4096 rows of 100003-393216 columns in float32 and the halves, by 2-12 %; level or
up to 2 % behind only at bf16 300000 and fp16 log_softmax 2112-1056 x 200000.  Two questions before
auto takes cluster_row wherever single_read's plan is a cluster of two or more blocks:
  A. the same at shapes p80 did not run (8192-16384 rows, 528 rows, bf16 80000), single_read's plan
     against cluster_row's (cluster_row's clusters of 16 at two blocks per SM evict-last, as p80 found);
  B. float32 clusters of 16 at two blocks per SM, 132-1056 rows of 262144-393216 columns: 256- or
     384-thread blocks (step 3b), loads evict-last or evict-first (cluster_row_plan's step 4).
p67's job (time ÷ torch copy_, two rounds, every plan checked against float64 on 64 rows).
PYTHONPATH=. python3 notes/tune-runs/2026-12-03-cluster-row-everywhere-p81.py [A|B|all] [seconds]"""
import sys
import time

import softmax_lab

PART = sys.argv[1] if len(sys.argv) > 1 else "all"
LIMIT = float(sys.argv[2]) if len(sys.argv) > 2 else 280
sys.argv = sys.argv[:1]
sys.path.insert(0, "notes/tune-runs")
p67 = __import__("2026-12-02-halves-group-or-cluster-p67")
V = sys.modules["softmax_lab.variants"]
T0 = time.time()
A = [(16384, 151936, "float32", "softmax"), (8192, 200000, "float32", "softmax"), (528, 200000, "float32", "softmax"),
     (528, 393216, "float32", "softmax"), (8192, 393216, "float32", "log_softmax"),
     (16384, 151936, "bfloat16", "softmax"), (8192, 100003, "bfloat16", "softmax"), (4096, 80000, "bfloat16", "softmax"),
     (16384, 80000, "bfloat16", "softmax"), (528, 100003, "bfloat16", "softmax"), (528, 300000, "bfloat16", "softmax"),
     (8192, 300000, "bfloat16", "softmax"), (528, 262144, "float16", "log_softmax"),
     (8192, 200000, "float16", "log_softmax"), (4096, 80001, "float16", "log_softmax"),
     (528, 151936, "bfloat16", "log_softmax"), (4096, 786432, "float16", "log_softmax"),
     (1056, 786432, "bfloat16", "log_softmax")]
B = [(rows, cols) for cols in (262144, 300000, 393216) for rows in (132, 264, 528, 1056)]


def el(plan):
    """The plan with its loads evict-last."""
    return V.RowClusterPlan(plan.cluster, plan.threads, plan.vpt, plan.blocks_per_sm, False)


def main():
    dev = softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    sr, cr = V.get_variant("single_read"), V.get_variant("cluster_row")
    jobs = []
    if PART in ("all", "A"):
        for rows, cols, dtype, op in A:
            sh = V.Shape(rows, cols, cols, cols, 0, 0, V.DTYPES[dtype], dtype, op)
            own = V.cluster_row_plan(cols, dev, rows, V.DTYPES[dtype], 1)
            srp = V.single_read_plan(cols, dev, rows, dtype, op)
            jobs.append((rows, cols, dtype, op, [(f"single_read:{srp.label()}", lambda sh=sh: sr.prepare(sh, dev))] + [
                (f"cluster_row:{p.label()}", lambda sh=sh, p=p: cr.prepare(sh, dev, plan=p))
                for p in {el(own): 0, own: 0}]))
    if PART in ("all", "B"):
        for rows, cols in B:
            sh = V.Shape(rows, cols, cols, cols, 0, 0, 4, "float32", "softmax")
            vecs = -(-cols // 4)
            plans = []
            for threads in (256, 384):
                vpt = -(-(-(-vecs // 16)) // threads)
                for stream in (False, True):
                    plans.append(V.RowClusterPlan(16, threads, vpt, 2, stream))
            jobs.append((rows, cols, "float32", "softmax",
                         [("single_read", lambda sh=sh: sr.prepare(sh, dev))] +
                         [(f"cluster_row:{p.label()}", lambda sh=sh, p=p: cr.prepare(sh, dev, plan=p)) for p in plans]))
    for rows, cols, dtype, op, plans in jobs:
        if time.time() - T0 > LIMIT:
            print("time limit", flush=True)
            return
        p67.job(rows, cols, dtype, op, plans, dev)


if __name__ == "__main__":
    main()
