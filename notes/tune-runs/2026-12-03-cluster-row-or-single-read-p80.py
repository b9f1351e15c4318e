"""Probe 80 (written, not yet run): since cluster_row's relaxed arrival (fc28a1e) ran it 5-12 %
faster (p78), where does it now beat single_read's clusters?  auto's rule (variants.py
_cluster_row_first: CLUSTER_ROW_BYTES_PER_SM, CLUSTER_ROW_FEWER_BLOCKS_BYTES_PER_SM, the halves'
constants) was measured against the release arrival.  The grid's last shape behind a peer, float32
4096 x 151936 (single_read 1.068, quack 1.026), is one of these: cluster_row at quack's own 8 x 256 x
19 x 2 ran 1.09-1.10 before the change (p77).  For each shape: auto, single_read's plan, cluster_row's
plan and, for float32, quack's decomposition in cluster_row; the halves' tables' 151936 (1.10-1.12,
single_read's clusters of 4) among them.  p64's harness (p67's job).
PYTHONPATH=. python3 notes/tune-runs/2026-12-03-cluster-row-or-single-read-p80.py [part] [seconds]
(part: f32, f32log, bf16, f16log, or all)"""
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
PARTS = {"f32": ("float32", "softmax"), "f32log": ("float32", "log_softmax"), "bf16": ("bfloat16", "softmax"),
         "f16log": ("float16", "log_softmax")}
COLS = (151936, 128256, 100003, 200000, 262144, 300000, 393216)
ROWS = (4096, 2112, 1056)


def quack_shaped(cols):
    """quack's float32 decomposition where cluster_row's registers hold it: clusters of 8 (of 16 past
    256K columns, or where a cluster of 8 needs more than 20 vectors a thread: quack stages through
    shared memory, cluster_row holds registers), 256 threads, two blocks per SM."""
    vecs = -(-cols // 4)
    cluster = 8 if cols <= 262144 and -(-vecs // 8) <= 256 * 20 else 16
    return V.RowClusterPlan(cluster, 256, -(-(-(-vecs // cluster)) // 256), 2)


def main():
    dev = softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    sr, cr = V.get_variant("single_read"), V.get_variant("cluster_row")
    for part, (dtype, op) in PARTS.items():
        if PART not in ("all", part):
            continue
        for cols in COLS:
            for rows in ROWS:
                if time.time() - T0 > LIMIT:
                    print("time limit", flush=True)
                    return
                sh = V.Shape(rows, cols, cols, cols, 0, 0, V.DTYPES[dtype], dtype, op)
                auto = V.preferences(sh, dev)[0]
                plans = [(f"auto:{auto.name}", lambda sh=sh, a=auto: a.prepare(sh, dev)),
                         ("single_read", lambda sh=sh: sr.prepare(sh, dev))]
                cr_plan = V.cluster_row_plan(cols, dev, rows, V.DTYPES[dtype], 1)
                if cr_plan is not None:
                    plans.append((f"cluster_row:{cr_plan.label()}", lambda sh=sh: cr.prepare(sh, dev)))
                if dtype == "float32" and cols <= 393216:
                    q = quack_shaped(cols)
                    if cr_plan is None or q != cr_plan:
                        plans.append((f"cluster_row:{q.label()}", lambda sh=sh, q=q: cr.prepare(sh, dev, plan=q)))
                p67.job(rows, cols, dtype, op, plans, dev)


if __name__ == "__main__":
    main()
