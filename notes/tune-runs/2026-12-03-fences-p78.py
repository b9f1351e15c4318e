"""Probe 78: the cluster barriers' fences (probe 76's ncu: ERRBAR after MEMBAR.ALL.GPU held 9-16 % of
cluster_row's stall samples, at every block's start, and 19 % of single_read's, at every row's cluster
barrier; quack's kernel has neither).  New (1): cluster_row's exchange_open arrives relaxed
(EXCHANGE_ARRIVE_RELAXED 1) and single_read's per-row merge is pushed (SR_PUSHED_MERGE 1, cluster.cuh
row_exchange); old (0): the release arrival, and the pair published between two cluster barriers.
auto's plan either way, forward shapes of both variants.  p64's harness (p67's job), p74's define override.
with -pushed-merge-p79.patch applied (its switches): PYTHONPATH=. python3 notes/tune-runs/2026-12-03-fences-p78.py [seconds]"""
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
NEW = {"EXCHANGE_ARRIVE_RELAXED": 1, "SR_PUSHED_MERGE": 1}
OLD = {"EXCHANGE_ARRIVE_RELAXED": 0, "SR_PUSHED_MERGE": 0}
SHAPES = [(4096, 151936, "float32", "softmax"), (132, 151936, "float32", "softmax"),
          (4096, 393216, "float32", "softmax"), (4096, 128256, "float32", "softmax"),
          (1056, 151936, "float32", "softmax"), (8192, 65536, "float32", "softmax"),
          (16384, 32000, "float32", "softmax"), (132, 393216, "float32", "softmax"),
          (512, 100003, "float32", "softmax"), (4096, 100003, "float32", "softmax"),
          (132, 393216, "bfloat16", "softmax"), (132, 262144, "bfloat16", "softmax"),
          (2048, 262144, "bfloat16", "softmax"), (4096, 128256, "bfloat16", "softmax"),
          (4096, 393216, "bfloat16", "softmax"), (4096, 151936, "bfloat16", "softmax"),
          (4096, 393216, "float16", "log_softmax"), (4096, 151936, "bfloat16", "log_softmax"),
          (4096, 128256, "float16", "log_softmax"), (4096, 393216, "float32", "log_softmax"),
          (132, 100003, "bfloat16", "softmax"), (1024, 1 << 20, "float32", "softmax")]


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
        p67.job(rows, cols, dtype, op, [(f"{auto.name}:new", p74.with_defines(make, NEW)),
                                        (f"{auto.name}:old", p74.with_defines(make, OLD))], dev)


if __name__ == "__main__":
    main()
