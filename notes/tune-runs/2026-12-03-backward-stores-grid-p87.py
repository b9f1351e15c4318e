"""Probe 87: cluster_row's float32 backward stores over a grid of backward shapes (p86 had evict-first
or plain stores 0.3-0.8 % ahead of the build's evict-last at 4096 x 151936 alone).  auto's cluster_row
plan at each shape, CR_STORE forced to evict-last (1), evict-first (0), plain (2), ÷ torch.add.
Decision, fixed before the run: evict-first becomes the backward's default if it is ahead of
evict-last at 8 or more of the 10 (shape, op) and never behind by more than 0.5 %.
PYTHONPATH=. python3 notes/tune-runs/2026-12-03-backward-stores-grid-p87.py"""
import io
import re
import sys
import time
from contextlib import redirect_stdout

import softmax_lab

sys.argv = sys.argv[:1]
sys.path.insert(0, "notes/tune-runs")
p83 = __import__("2026-12-03-register-slot-p83")
p73 = __import__("2026-12-02-policies-sr-mbs-p73")
V = sys.modules["softmax_lab.variants"]
STORES = {"last": 1, "first": 0, "plain": 2}
SHAPES = [(4096, 151936, "softmax_backward"), (4096, 151936, "log_softmax_backward"), (4096, 128256, "softmax_backward"),
          (4096, 65536, "softmax_backward"), (1056, 151936, "softmax_backward"), (4096, 196608, "log_softmax_backward"),
          (4096, 393216, "softmax_backward"), (2048, 262144, "softmax_backward"), (132, 151936, "softmax_backward"),
          (8192, 32000, "log_softmax_backward")]


def main():
    dev = softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    summary = []
    for r, c, op in SHAPES:
        plan = V.cluster_row_plan(c, dev, r, 4, 2)
        p83.BACKWARD_PLANS[:] = [(plan.cluster, plan.threads, plan.vpt, plan.blocks_per_sm)]
        best = {}
        for name, store in STORES.items():
            p73.EXTRA.clear()
            p73.EXTRA.update({"CR_STORE": store})
            buf = io.StringIO()
            with redirect_stdout(buf):
                p83.backward(dev, r, c, op)
            line = buf.getvalue().strip()
            print(f"stores {name}: {line}", flush=True)
            best[name] = min(float(v) for v in re.findall(r"x\d+ (\d\.\d+) \(", line))
        p73.EXTRA.clear()
        summary.append((r, c, op, best))
    ahead = sum(b["first"] < b["last"] for *_, b in summary)
    worst = max(b["first"] / b["last"] - 1 for *_, b in summary)
    for r, c, op, b in summary:
        print(f"{r}x{c} {op}: last {b['last']:.3f} first {b['first']:.3f} plain {b['plain']:.3f}")
    print(f"evict-first ahead at {ahead} of {len(summary)}, worst {worst * 100:+.2f} %: "
          f"{'switch' if ahead >= 8 and worst <= 0.005 else 'keep evict-last'}")


if __name__ == "__main__":
    main()
