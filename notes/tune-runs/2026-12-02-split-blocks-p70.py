"""Probe 70: multi_block_smem's split schedule at other block shapes (threads x vpt, slots from the
shared memory, blocks per SM), halves and float32, past a cluster.  p64's harness (p67's job).
PYTHONPATH=. python3 notes/tune-runs/2026-12-02-split-blocks-p70.py [seconds]"""
import sys
import time

import softmax_lab

sys.path.insert(0, __import__("os").path.dirname(__file__))
p67 = __import__("2026-12-02-halves-group-or-cluster-p67")
V = sys.modules["softmax_lab.variants"]
T0 = time.time()
LIMIT = float(sys.argv[1]) if len(sys.argv) > 1 else 250
SHAPES = [(132, 1 << 20, "bfloat16", "softmax"), (132, 1 << 20, "float16", "log_softmax"),
          (1024, 1 << 20, "bfloat16", "softmax"), (132, 1 << 22, "bfloat16", "softmax"),
          (132, 1 << 20, "float32", "softmax"), (1024, 1 << 20, "float32", "softmax"),
          (32, 1 << 20, "bfloat16", "softmax"), (1024, 1 << 20, "float16", "log_softmax"),
          (64, 1 << 21, "float32", "softmax"), (512, 1 << 21, "bfloat16", "softmax")]
BLOCKS = [(512, 8, 1), (384, 8, 1), (640, 4, 1), (384, 12, 1), (256, 16, 1), (256, 8, 2), (1024, 2, 1)]


def main():
    dev = softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    mbs = V.get_variant("multi_block_smem")
    for rows, cols, dtype, op in SHAPES:
        if time.time() - T0 > LIMIT:
            print("time limit", flush=True)
            return
        sh = V.Shape(rows, cols, cols, cols, 0, 0, V.DTYPES[dtype], dtype, op)
        plans = [(f"{t}x{v}x{b}", lambda sh=sh, t=t, v=v, b=b: mbs.prepare(sh, dev, threads=t, vpt=v, blocks_per_sm=b,
                                                                           split=True))
                 for t, v, b in BLOCKS if not (dtype == "float32" and (t, v) in ((384, 12), (1024, 2)))]
        p67.job(rows, cols, dtype, op, plans, dev)


if __name__ == "__main__":
    main()
