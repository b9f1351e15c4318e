"""Probe 103 (2026-12-03, after probe 102): where the companions stop paying, at more shapes: 12M float32
at 8-32 rows (1.26 rows held), 10M-11M at 4-8 rows, two to three rings of rows (3-5 rows of 4M-7M float32),
and bf16 8M-16M at 6-16 rows.  auto against the split with companions (held_rows 2, the bulk copies
evict-first, early refills).  On -companions-p99.patch; p67's `job` (÷ torch copy_, each plan twice, every
output checked against float64 first).
  PYTHONPATH=. python3 notes/tune-runs/2026-12-03-companions-p103.py [seconds]"""
import sys
import time

LIMIT = float(sys.argv[1]) if len(sys.argv) > 1 else 240
sys.argv = sys.argv[:1]
sys.path.insert(0, "notes/tune-runs")
p96 = __import__("2026-12-03-early-fill-warp-loads-p96")  # its loader hook adds defines (EXTRA)
V, p67, softmax_lab = p96.V, p96.p67, p96.softmax_lab
T0 = time.time()
SHAPES = [(16, 12000000, "float32", "softmax"), (32, 12000000, "float32", "softmax"), (12, 12000000, "float32", "softmax"),
          (8, 11000000, "float32", "softmax"), (8, 10000000, "float32", "softmax"), (4, 10000000, "float32", "softmax"),
          (3, 4194304, "float32", "softmax"), (5, 6000000, "float32", "softmax"), (3, 7000001, "float32", "softmax"),
          (5, 4194304, "float32", "log_softmax"), (6, 8388608, "bfloat16", "softmax"), (8, 8388608, "bfloat16", "softmax"),
          (16, 12582912, "bfloat16", "softmax"), (8, 16777216, "bfloat16", "softmax")]
SPLIT = dict(split=True, threads=512, vpt=7, slots=4)


def main():
    dev = softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    mbs = V.get_variant("multi_block_smem")
    for rows, cols, dtype, op in SHAPES:
        if time.time() - T0 > LIMIT:
            return print("time limit", flush=True)
        sh = V.Shape(rows, cols, cols, cols, 0, 0, V.DTYPES[dtype], dtype, op)
        prefs = V.preferences(sh, dev)
        plans = [(f"auto ({prefs[0].name})", lambda sh=sh, a=prefs[0]: a.prepare(sh, dev))]
        if prefs[0].name == "multi_block_smem" and len(prefs) > 1:  # what would run without it
            plans.append((f"{prefs[1].name}", lambda sh=sh, a=prefs[1]: a.prepare(sh, dev)))
        plans.append(("companions 2.0 copies-first", p96.with_defines(
            "multi_block_smem.cu", {"MBS_COPY_LAST": 0},
            lambda sh=sh: mbs.prepare_launch(sh, dev, held_rows=2.0, early_fill=True, **SPLIT))))
        p67.job(rows, cols, dtype, op, plans, dev)


if __name__ == "__main__":
    main()
