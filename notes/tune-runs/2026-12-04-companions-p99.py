"""Probe 99 (written 2026-12-03, run 16:05 UTC: -p99.txt): multi_block_smem's companions (-companions-p99.patch, on
56f40a5).  Where the one group's ring holds fewer than two rows (float32 4M columns: 1.84, 1.33-1.38 x
copy, target 1.35), the split schedule takes tickets for a row's first `held` chunks only; chunk
c + held rides with chunk c: its reducers reduce it straight from x (evict-last) after chunk c, its
writers read it again (from L2) and write it after chunk c.  So the ring needs `held` chunks a row
and the split runs as where its ring holds held_rows rows (probe 97: the split with early refills
ran 2.1-2.5 rows held at 1.07-1.18).  The companions' second read should come from L2; whether it
does with the bulk copies also evict-last (MBS_COPY_LAST 1, main) is one of the plans.
Plans (through prepare_launch, which also takes rows past the ring's one row, where `prepare`
refuses): auto (main's rule), and the split of 512 x 7 x 4 with companions at held_rows 2.2 / 2.4 /
2.8, with early refills (and 2.4 without; 2.4 with the copies evict-first).  p67's `job` (÷ torch copy_,
each plan twice, every output checked against float64 on 64 rows first).
Decision, fixed before the run: companions land for the rows where the one group (or multi_block_l2)
runs now if one held_rows value beats auto by 2 % or more at all three 4M float32 shapes and is
behind nowhere it would be used; then the launch rule, the tests (tight rings with companions, the
sanitizer script, rows past 7.5M float32 columns) and the GPU suite.
  cd <tree with the patch> && PYTHONPATH=. python3 notes/tune-runs/2026-12-04-companions-p99.py [seconds]"""
import sys
import time

LIMIT = float(sys.argv[1]) if len(sys.argv) > 1 else 240
sys.argv = sys.argv[:1]
sys.path.insert(0, "notes/tune-runs")
p96 = __import__("2026-12-03-early-fill-warp-loads-p96")  # its loader hook adds defines (EXTRA)
V, p67, softmax_lab = p96.V, p96.p67, p96.softmax_lab
T0 = time.time()
SHAPES = [(32, 4194304, "float32", "softmax"), (132, 4194304, "float32", "softmax"), (128, 4194304, "float32", "softmax"),
          (32, 4194304, "float32", "log_softmax"), (16, 6000000, "float32", "softmax"), (16, 7000001, "float32", "softmax"),
          (64, 8388608, "bfloat16", "softmax"), (8, 12000000, "float32", "softmax")]
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
        for held_rows, early, copy_last in ((2.2, True, 1), (2.4, True, 1), (2.8, True, 1), (2.4, False, 1),
                                            (2.4, True, 0)):
            label = f"companions {held_rows}{' early' if early else ''}{'' if copy_last else ' copies-first'}"
            plans.append((label, p96.with_defines(
                "multi_block_smem.cu", {} if copy_last else {"MBS_COPY_LAST": 0},
                lambda sh=sh, h=held_rows, e=early: mbs.prepare_launch(sh, dev, held_rows=h, early_fill=e, **SPLIT))))
        p67.job(rows, cols, dtype, op, plans, dev)


if __name__ == "__main__":
    main()
