"""Probe 85: the tables' float32 softmax backward at 4096 x 151936 ran 1.006 against quack's 0.997
(÷ torch.add, 2026-12-03 09:57, on 0aadfa0: cluster_row's 16 x 256 x 10 x 2).  Other block shapes at two
blocks per SM in clusters of 16 (fuller blocks: 224 x 11 holds 96 % of its slots, 256 x 10 93 %),
evict-first loads, and the old 8 x 512 x 10 x 1; 128256 as a check.  p83's harness (p82's).
PYTHONPATH=. python3 notes/tune-runs/2026-12-03-backward-shapes-p85.py [seconds]"""
import sys
import time

import softmax_lab

LIMIT = float(sys.argv[1]) if len(sys.argv) > 1 else 150
sys.argv = sys.argv[:1]
sys.path.insert(0, "notes/tune-runs")
p83 = __import__("2026-12-03-register-slot-p83")
T0 = time.time()
PLANS = {151936: [(16, 256, 10, 2), (16, 256, 10, 2, True), (16, 224, 11, 2), (16, 192, 13, 2), (16, 320, 8, 2),
                  (8, 512, 10, 1)],
         128256: [(16, 256, 8, 2), (16, 256, 8, 2, True), (16, 224, 9, 2), (8, 512, 8, 1)]}


def main():
    dev = softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    for r, c, op in ((4096, 151936, "softmax_backward"), (4096, 151936, "log_softmax_backward"),
                     (4096, 128256, "softmax_backward"), (1056, 151936, "softmax_backward")):
        if time.time() - T0 > LIMIT:
            print("time limit", flush=True)
            return
        p83.BACKWARD_PLANS[:] = PLANS[c]
        p83.backward(dev, r, c, op)


if __name__ == "__main__":
    main()
