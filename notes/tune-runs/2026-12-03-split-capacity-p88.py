"""Probe 88: multi_block_smem's split schedule with the one group's ring capacity.  At 4M float32
columns the one group (448 x 8 x 4: 528 chunks of 56 KB, 1.84 rows) runs 1.35 x copy, its
phases one after another (p58's profile); the split (two groups of 256, reducing while the other
writes) ran 2M at 1.13 against 1.31 (p75) but at 4M its 512 x 8 x 3 ring holds 1.58 rows (1.49).
512 x 7 x 4 split: chunks of 3584 vectors as the one group's, four slots, so the same 1.84 rows,
with groups of 8 warps (p61's 448 x 8 x 4 split, groups of 7, ran 1.33-1.51 even where capacity
did not bind).  Float32 ÷ torch copy_, p67's job (each plan twice, checked against float64 first).
PYTHONPATH=. python3 notes/tune-runs/2026-12-03-split-capacity-p88.py [seconds]"""
import sys
import time

import softmax_lab

LIMIT = float(sys.argv[1]) if len(sys.argv) > 1 else 200
sys.argv = sys.argv[:1]
sys.path.insert(0, "notes/tune-runs")
p67 = __import__("2026-12-02-halves-group-or-cluster-p67")
V = sys.modules["softmax_lab.variants"]
T0 = time.time()
SHAPES = [(32, 1 << 22, "softmax"), (132, 1 << 22, "softmax"), (128, 1 << 22, "softmax"), (32, 1 << 22, "log_softmax"),
          (40, 3 << 20, "softmax"), (132, 3 << 20, "softmax"), (64, 1 << 21, "softmax"), (132, 1 << 20, "softmax"),
          (1024, 1 << 20, "softmax"), (132, 600001, "softmax"), (16, 7000001, "softmax"), (32, 4000037, "softmax")]
PLANS = {"split 512x7x4": {"threads": 512, "vpt": 7, "slots": 4, "split": True},
         "split 512x8x3": {"threads": 512, "vpt": 8, "slots": 3, "split": True},
         "one 448x8x4": {"threads": 448, "vpt": 8, "slots": 4, "split": False},
         "one 512x7x4": {"threads": 512, "vpt": 7, "slots": 4, "split": False}}


def main():
    dev = softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    for rows, cols, op in SHAPES:
        if time.time() - T0 > LIMIT:
            print("time limit", flush=True)
            return
        sh = V.Shape(rows, cols, cols, cols, 0, 0, 4, "float32", op)
        auto = V.preferences(sh, dev)[0]
        plans = [(f"auto:{auto.name}", lambda sh=sh, a=auto: a.prepare(sh, dev))]
        plans += [(label, lambda sh=sh, kw=kw: V._prepare_multi_block_smem(sh, dev, blocks_per_sm=1, **kw))
                  for label, kw in PLANS.items()]
        p67.job(rows, cols, "float32", op, plans, dev)


if __name__ == "__main__":
    main()
