"""Probe 103 (2026-12-03, after probe 102): where the companions stop paying, at more shapes: 12M float32
at 8-32 rows (1.26 rows held), 10M-11M at 4-8 rows, two to three rings of rows (3-5 rows of 4M-7M float32),
and bf16 8M-16M at 6-16 rows.  auto against the split with companions (held_rows 2, the bulk copies
evict-first, early refills).  On -companions-p99.patch; p67's `job` (÷ torch copy_, each plan twice, every
output checked against float64 first).
  PYTHONPATH=. python3 notes/tune-runs/2026-12-03-companions-p103.py [seconds]"""
import sys

sys.path.insert(0, "notes/tune-runs")
p102 = __import__("2026-12-03-companions-p102")  # its plans and loop (the time limit: its argv)
p102.SHAPES = [(16, 12000000, "float32", "softmax"), (32, 12000000, "float32", "softmax"), (12, 12000000, "float32", "softmax"),
               (8, 11000000, "float32", "softmax"), (8, 10000000, "float32", "softmax"), (4, 10000000, "float32", "softmax"),
               (3, 4194304, "float32", "softmax"), (5, 6000000, "float32", "softmax"), (3, 7000001, "float32", "softmax"),
               (5, 4194304, "float32", "log_softmax"), (6, 8388608, "bfloat16", "softmax"), (8, 8388608, "bfloat16", "softmax"),
               (16, 12582912, "bfloat16", "softmax"), (8, 16777216, "bfloat16", "softmax")]


if __name__ == "__main__":
    p102.main()
