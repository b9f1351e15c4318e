"""Probe 84: (1) step 1b of cluster_row_plan (float32 backward rows that 256-thread blocks split over
16 take 512-thread blocks in clusters of 8) was measured before the relaxed cluster-barrier arrival
(fc28a1e); probe 83 ran 4096 x 151936 softmax backward at 16 x 256 x 10 x 2 0.999-1.000 against the
rule's 8 x 512 x 10 x 1 1.005-1.008 (÷ torch.add).  Here both shapes at the lengths step 1b covers
(98305-196608 columns), 32-4096 rows, odd rows too (single_read's backward as auto takes it there),
both ops.  (2) multi_block_smem's poll interval (MBS_POLL_NS, 256 ns) at 4M float32 columns, ÷ copy.
PYTHONPATH=. python3 notes/tune-runs/2026-12-03-backward-clusters-p84.py [seconds]"""
import sys
import time

import softmax_lab

LIMIT = float(sys.argv[1]) if len(sys.argv) > 1 else 200
sys.argv = sys.argv[:1]
sys.path.insert(0, "notes/tune-runs")
p67 = __import__("2026-12-02-halves-group-or-cluster-p67")
p74 = __import__("2026-12-02-policies-landed-p74")
p83 = __import__("2026-12-03-register-slot-p83")
V = sys.modules["softmax_lab.variants"]
T0 = time.time()
BACKWARD = [(4096, 128256, "softmax_backward"), (4096, 196608, "softmax_backward"), (4096, 100000, "softmax_backward"),
            (1056, 128256, "softmax_backward"), (528, 196608, "log_softmax_backward"), (132, 151936, "softmax_backward"),
            (32, 151936, "softmax_backward"), (132, 100003, "softmax_backward"), (4096, 128256, "log_softmax_backward"),
            (264, 100003, "log_softmax_backward")]


def main():
    dev = softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    for r, c, op in BACKWARD:
        if time.time() - T0 > LIMIT:
            print("time limit", flush=True)
            return
        now = V.cluster_row_plan(c, dev, r, 4, 2)
        block_vecs = -(-V._row_vecs(c, 4) // 16)
        wide = -(-block_vecs // 256)
        p83.BACKWARD_PLANS[:] = [(now.cluster, now.threads, now.vpt, now.blocks_per_sm), (16, 256, wide, 2)]
        sr = V.single_read_backward_plan(c, dev, r, "float32", op)
        p83.backward(dev, r, c, op, single_read=sr)
    mbs = V.get_variant("multi_block_smem")
    for rows in (32, 132):
        sh = V.Shape(rows, 1 << 22, 1 << 22, 1 << 22, 0, 0, 4, "float32", "softmax")
        make = lambda sh=sh: mbs.prepare(sh, dev)  # noqa: E731
        p67.job(rows, 1 << 22, "float32", "softmax", [(f"poll {ns}", p74.with_defines(make, {"MBS_POLL_NS": ns}))
                                                      for ns in (256, 0, 64, 1024)], dev)


if __name__ == "__main__":
    main()
