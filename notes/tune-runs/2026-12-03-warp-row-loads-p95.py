"""Probe 95 (2026-12-03): two checks left by probe 94 (notes/TUNING.md,
thirty-second session).
1. The float32 backward on main's predicated loads against quack's softmax_bwd, back to back, at
   4096 x 151936 and 196608 (where quack led by 0.3-1 %), and at 4096 x 393216 (16 x 512 x 12 x 1,
   which p94 did not time; the tables read 1.080 -> 1.086 across two machines).  p94's `backward`
   times the build in kernels/ twice ("old" from /tmp/kernels-old, "new"), so with this probe's
   patch, which does not touch cluster_row, the two are the same kernel: their spread is the
   rounds' noise.
2. single_read's warp-per-row kernel with its loads predicated as the held loads were
   (-warp-row-loads-p95.patch; main's `j < r.vecs ? load_evict_last(...) : pad` is a branch per
   load): old (main's kernels, copied to /tmp/kernels-old before the patch) against new at the
   shapes auto gives it.
Decision, fixed before the run: the patch lands where no warp-row shape's median is behind old's by
more than 0.5 % (then rerecord tests/fp32_sass_fingerprints.json, saying why).
  cp -r kernels /tmp/kernels-old && patch -p1 < notes/tune-runs/2026-12-03-warp-row-loads-p95.patch
  PYTHONPATH=.:<quack> python3 notes/tune-runs/2026-12-03-warp-row-loads-p95.py [seconds]
Ran 2026-12-03 14:29 UTC (-warp-row-loads-p95.txt, with quack): the float32 backward 4096 x 151936
0.997 against quack's 1.000, 196608 0.999 against 0.999, 393216 1.081 against 1.421; warp-row loads
predicated: bf16 200000 x 3001 1.044 -> 0.992 but fp16 log_softmax 65536 x 8192 1.002 -> 1.011: kept
main's (probe 96 measured more shapes)."""
import sys
import time

LIMIT = float(sys.argv[1]) if len(sys.argv) > 1 else 240
sys.argv = sys.argv[:1]
sys.path.insert(0, "notes/tune-runs")
p94 = __import__("2026-12-03-predicated-loads-p94")  # its loader hook builds "old" from /tmp/kernels-old
T0 = time.time()
BACKWARD = [(4096, 151936, "float32", "softmax_backward"), (4096, 196608, "float32", "softmax_backward"),
            (4096, 393216, "float32", "softmax_backward"), (4096, 393216, "float32", "log_softmax_backward")]
FORWARD = [(524288, 1024, "float32", "softmax", None), (262144, 2048, "float32", "log_softmax", None),
           (132, 1024, "float32", "softmax", None), (524288, 1024, "bfloat16", "softmax", None),
           (131072, 4096, "bfloat16", "softmax", None), (65536, 8192, "float16", "log_softmax", None),
           (200000, 3001, "bfloat16", "softmax", None)]


def main():
    import torch
    dev = p94.softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    for job, args in [(p94.backward, s) for s in BACKWARD] + [(p94.forward, s) for s in FORWARD]:
        if time.time() - T0 > LIMIT:
            return print("time limit", flush=True)
        job(dev, *args)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
