"""Probe 72: cluster_row's L2 policies: its loads (evict-last, the rule's; evict-normal without L1,
quack's cp.async.cg; __ldg; evict-first) by its stores (evict-first, the rule's; plain evict-normal,
quack's), at the grid's shapes where quack leads at the same decomposition, and at shapes cluster_row
wins today; quack beside.  p64's harness (p67's job); p71's quack launcher.
With -policies-p72.patch applied: PYTHONPATH=. python3 notes/tune-runs/2026-12-02-cluster-row-policies-p72.py [seconds]"""
import dataclasses
import sys
import time

import softmax_lab

sys.path.insert(0, "notes/tune-runs")
p67 = __import__("2026-12-02-halves-group-or-cluster-p67")
p71 = __import__("2026-12-02-cluster-row-staged-p71")
V = sys.modules["softmax_lab.variants"]
T0 = time.time()
LIMIT = float(sys.argv[1]) if len(sys.argv) > 1 else 400
LOADS = {"keep": 2, "normal": 3, "ldg": 0, "stream": 1}
POLICIES = [("keep", 0), ("normal", 0), ("keep", 1), ("normal", 1), ("ldg", 1), ("stream", 1)]
SHAPES = [(4096, 151936, "float32", "softmax", [(8, 256, 19, 2), (16, 256, 10, 4)]),
          (132, 151936, "float32", "softmax", [None]),
          (4096, 128256, "bfloat16", "softmax", [None]),
          (132, 393216, "bfloat16", "softmax", [None]),
          (2048, 262144, "bfloat16", "softmax", [None]),
          (132, 262144, "bfloat16", "softmax", [None]),
          (8192, 65536, "float32", "softmax", [None]),
          (16384, 32000, "float32", "softmax", [None]),
          (4096, 128256, "float16", "log_softmax", [None]),
          (2048, 262144, "bfloat16", "log_softmax", [None]),
          (132, 32000, "float32", "softmax", [None]),
          (528, 100003, "float32", "softmax", [None]),
          (16384, 32000, "bfloat16", "softmax", [None]),
          (8192, 65536, "bfloat16", "softmax", [None]),
          (32, 262144, "float32", "softmax", [None]),
          (1056, 151936, "bfloat16", "softmax", [None]),
          (4096, 100003, "bfloat16", "softmax", [None])]


@dataclasses.dataclass(frozen=True)
class PolicyPlan(V.RowClusterPlan):
    load: str = "keep"
    plain_stores: int = 0

    def defines(self, dev=None):
        return super().defines(dev) | {"CR_LOAD": LOADS[self.load], "SOFTMAX_PLAIN_STORES": self.plain_stores}

    def label(self):
        return f"{super().label()}:{self.load}/{'plain' if self.plain_stores else 'cs'}"


def main():
    dev = softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    cr = V.get_variant("cluster_row")
    qf = p71.quack_plan()
    for rows, cols, dtype, op, blocks in SHAPES:
        if time.time() - T0 > LIMIT:
            print("time limit", flush=True)
            return
        sh = V.Shape(rows, cols, cols, cols, 0, 0, V.DTYPES[dtype], dtype, op)
        auto = V.preferences(sh, dev)[0]
        plans = [(f"auto:{auto.name}", lambda sh=sh, a=auto: a.prepare(sh, dev))]
        rule = V.cluster_row_plan(cols, dev, rows, V.DTYPES[dtype])
        for block in blocks:
            base = rule if block is None else V.RowClusterPlan(*block, rule.stream_loads)
            for load, plain in POLICIES + ([("stream", 0)] if base.stream_loads else []):
                plan = PolicyPlan(base.cluster, base.threads, base.vpt, base.blocks_per_sm, load=load,
                                  plain_stores=plain)
                plans.append((plan.label(), lambda sh=sh, plan=plan: cr.prepare(sh, dev, plan=plan)))
        if qf is not None and op == "softmax" and cols % 8 == 0:
            plans.append(("quack (output unchecked)", lambda sh=sh: p71.quack_launch(qf, sh)))
        p67.job(rows, cols, dtype, op, plans, dev)


if __name__ == "__main__":
    main()
