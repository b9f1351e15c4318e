"""Probe 97 (2026-12-03): multi_block_smem's early refill (MBS_EARLY_FILL, -early-fill-warp-loads-p96.patch)
in the split schedule, by the rows its ring holds.  Probe 96 (14:41 UTC): the split ran 132 x 3145728
float32 (2.4 rows held) 1.131-1.146 -> 1.083-1.084 and bf16 132 x 6291456 (2.4) 1.159-1.164 ->
1.102-1.105, but 64 x 2097152 (3.6 rows) 1.068-1.070 -> 1.099-1.126, 132 x 1048576 (6.2) 1.063-1.090
-> 1.102-1.146, 512 x 1048576 1.024-1.030 -> 1.069-1.071; the one group at 4M (1.84 rows) lost 0.5-1 %.
Here: rows held from 2.0 to 3.6, float32 and bf16 softmax, fp16 log_softmax; main / early, p67's `job`.
Decision, fixed before the run: early fill lands for the split where its ring holds fewer than R rows,
R the largest bound (among the rows-held values measured) below which no shape is behind main by more
than 0.5 % and most gain 1 % or more; none if no such R above 2.04.
  PYTHONPATH=. python3 notes/tune-runs/2026-12-03-early-fill-rows-held-p97.py [seconds]
Ran 2026-12-03 15:06 UTC (-early-fill-rows-held-p97.txt): early ahead by 2.8-5.6 % at 2.04-2.69 rows
held, level at 2.75-3.02 (within 0.5 %), behind by 2.5-2.7 % at 3.14 and 3.43: R between 3.02 and
3.14; taken as 3.1 (MBS_EARLY_FILL_ROWS, the commit after)."""
import sys
import time

LIMIT = float(sys.argv[1]) if len(sys.argv) > 1 else 200
sys.argv = sys.argv[:1]
sys.path.insert(0, "notes/tune-runs")
p96 = __import__("2026-12-03-early-fill-warp-loads-p96")  # its loader hook adds the probe's defines
V, p67, softmax_lab = p96.V, p96.p67, p96.softmax_lab
T0 = time.time()
SHAPES = [(32, 3600000, "float32", "softmax"), (132, 3300000, "float32", "softmax"), (64, 3000000, "float32", "softmax"),
          (40, 3145728, "float32", "softmax"), (132, 2800000, "float32", "softmax"),
          (64, 2600000, "float32", "softmax"), (132, 2400000, "float32", "softmax"),
          (64, 2200000, "float32", "softmax"), (64, 7400000, "bfloat16", "softmax"),
          (132, 5500000, "bfloat16", "softmax"), (64, 5000000, "bfloat16", "softmax"),
          (132, 4500000, "bfloat16", "softmax"), (64, 6291456, "float16", "log_softmax"),
          (132, 3145728, "float32", "softmax")]


def main():
    dev = softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    variant = V.get_variant("multi_block_smem")
    for rows, cols, dtype, op in SHAPES:
        if time.time() - T0 > LIMIT:
            return print("time limit", flush=True)
        sh = V.Shape(rows, cols, cols, cols, 0, 0, V.DTYPES[dtype], dtype, op)
        t, v, b, split = V.multi_block_smem_block(cols, V.DTYPES[dtype], dev, op)
        chunks = -(-V._row_vecs(cols, V.DTYPES[dtype]) // (t * v))
        held = dev.sm_count * V.multi_block_smem_slots(dev, t, v, b) / chunks
        tag = f"{t}x{v}{' split' if split else ''} {held:.2f} rows, auto {V.preferences(sh, dev)[0].name}"
        plans = [(f"{m} ({tag})", p96.with_defines("multi_block_smem.cu", {"MBS_EARLY_FILL": e},
                                                    lambda sh=sh: variant.prepare(sh, dev)))
                 for m, e in (("main", 0), ("early", 1))]
        p67.job(rows, cols, dtype, op, plans, dev)


if __name__ == "__main__":
    main()
