"""Probe 86: cluster_row's float32 backward stores (CR_STORE: evict-last, the build's default for the
backward, against evict-first and plain) at 16 x 256 x 10 x 2 and 16 x 320 x 8 x 2, 4096 x 151936, where
the tables ran 1.006 against quack's 0.997 (÷ torch.add).  p83's harness, p74's define override.
PYTHONPATH=. python3 notes/tune-runs/2026-12-03-backward-stores-p86.py"""
import sys
import time

import softmax_lab

sys.argv = sys.argv[:1]
sys.path.insert(0, "notes/tune-runs")
p83 = __import__("2026-12-03-register-slot-p83")
p73 = sys.modules.get("2026-12-02-policies-sr-mbs-p73") or __import__("2026-12-02-policies-sr-mbs-p73")
V = sys.modules["softmax_lab.variants"]
STORES = {"last": 1, "first": 0, "plain": 2}


def main():
    dev = softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    p83.BACKWARD_PLANS[:] = [(16, 256, 10, 2), (16, 320, 8, 2)]
    for op in ("softmax_backward", "log_softmax_backward"):
        for name, store in STORES.items():
            p73.EXTRA.clear()
            p73.EXTRA.update({"CR_STORE": store})
            print(f"stores {name}: ", end="", flush=True)
            p83.backward(dev, 4096, 151936, op)
    p73.EXTRA.clear()


if __name__ == "__main__":
    main()
