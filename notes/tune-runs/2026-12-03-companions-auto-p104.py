"""Probe 104 (2026-12-03): auto on the companions' launch rule (variants.py, multi_block_smem_block) against
multi_block_l2 and, where the rule takes companions, the one group that auto took before, at the shapes of
probes 99-103.  p67's `job` (÷ torch copy_, each plan twice, every output checked against float64 first).
  PYTHONPATH=. python3 notes/tune-runs/2026-12-03-companions-auto-p104.py"""
import sys
import time

sys.path.insert(0, "notes/tune-runs")
p96 = __import__("2026-12-03-early-fill-warp-loads-p96")
V, p67, softmax_lab = p96.V, p96.p67, p96.softmax_lab
SHAPES = [(32, 4194304, "float32", "softmax"), (132, 4194304, "float32", "softmax"),
          (128, 4194304, "float32", "log_softmax"), (16, 8388608, "float32", "softmax"),
          (64, 8388608, "bfloat16", "softmax"), (4, 6000000, "float32", "softmax"), (8, 12000000, "float32", "softmax")]


def main():
    dev = softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    mbs, l2 = V.get_variant("multi_block_smem"), V.get_variant("multi_block_l2")
    for rows, cols, dtype, op in SHAPES:
        sh = V.Shape(rows, cols, cols, cols, 0, 0, V.DTYPES[dtype], dtype, op)
        auto = V.preferences(sh, dev)[0]
        block = V.multi_block_smem_block(cols, V.DTYPES[dtype], dev, op, rows)
        plans = [(f"auto ({auto.name} {tuple(block) if auto is mbs else ''})", lambda sh=sh, a=auto: a.prepare(sh, dev)),
                 ("multi_block_l2", lambda sh=sh: l2.prepare(sh, dev))]
        if block.held_chunks is not None and dtype == "float32" and \
                V.multi_block_smem_rows_held(cols, 4, dev, V.MBS_THREADS, V.MBS_VPT, 1) >= 1:
            plans.append(("one group", lambda sh=sh: mbs.prepare(sh, dev, threads=V.MBS_THREADS, vpt=V.MBS_VPT,
                                                                 split=False)))
        p67.job(rows, cols, dtype, op, plans, dev)


if __name__ == "__main__":
    main()
