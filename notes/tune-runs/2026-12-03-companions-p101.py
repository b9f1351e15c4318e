"""Probe 101 (2026-12-03, after probe 99): the companions' held_rows (2.0 / 2.2) and the bulk copies' L2 policy
(evict-last, main; evict-first: MBS_COPY_LAST 0), early refills throughout, on the shapes where the ring holds
fewer than two rows (4M-8M float32, 8M bf16, few rows) and at the edge where held chunks and one companion
each no longer reach two rows (float32 8388608 and 12M).  On -companions-p99.patch; p67's `job` (÷ torch
copy_, each plan twice, every output checked against float64 first).
  PYTHONPATH=. python3 notes/tune-runs/2026-12-03-companions-p101.py [seconds]"""
import sys
import time

LIMIT = float(sys.argv[1]) if len(sys.argv) > 1 else 240
sys.argv = sys.argv[:1]
sys.path.insert(0, "notes/tune-runs")
p96 = __import__("2026-12-03-early-fill-warp-loads-p96")  # its loader hook adds defines (EXTRA)
V, p67, softmax_lab = p96.V, p96.p67, p96.softmax_lab
T0 = time.time()
SHAPES = [(32, 4194304, "float32", "softmax"), (132, 4194304, "float32", "softmax"),
          (128, 4194304, "float32", "log_softmax"), (8, 4194304, "float32", "softmax"),
          (4, 6000000, "float32", "softmax"), (16, 7000001, "float32", "softmax"),
          (64, 8388608, "bfloat16", "softmax"), (32, 5000000, "float16", "log_softmax"),
          (16, 8388608, "float32", "softmax"), (8, 12000000, "float32", "softmax")]
SPLIT = dict(split=True, threads=512, vpt=7, slots=4)


def main():
    dev = softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    mbs = V.get_variant("multi_block_smem")
    for rows, cols, dtype, op in SHAPES:
        if time.time() - T0 > LIMIT:
            return print("time limit", flush=True)
        sh = V.Shape(rows, cols, cols, cols, 0, 0, V.DTYPES[dtype], dtype, op)
        auto = V.preferences(sh, dev)[0]
        plans = [(f"auto ({auto.name})", lambda sh=sh, a=auto: a.prepare(sh, dev))]
        for held_rows, copy_last in ((2.0, 1), (2.2, 1), (2.0, 0), (2.2, 0), (2.4, 0)):
            label = f"companions {held_rows}{'' if copy_last else ' copies-first'}"
            plans.append((label, p96.with_defines(
                "multi_block_smem.cu", {} if copy_last else {"MBS_COPY_LAST": 0},
                lambda sh=sh, h=held_rows: mbs.prepare_launch(sh, dev, held_rows=h, early_fill=True, **SPLIT))))
        p67.job(rows, cols, dtype, op, plans, dev)


if __name__ == "__main__":
    main()
