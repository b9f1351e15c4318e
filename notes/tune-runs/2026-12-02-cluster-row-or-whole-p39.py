"""Session 16 probe 39 (p38's harness): float32 softmax at the lengths where auto takes cluster_row with clusters
of 8 (65536-100003 columns) or 4, against single_read's plan, whose float32 slices take the whole path since
58d0c83 (p38: 4096 x 100003 single_read 1.091-1.094, cluster_row 1.112-1.113).  1056 and 4096 rows.
PYTHONPATH=. python3 notes/tune-runs/2026-12-02-cluster-row-or-whole-p39.py
"""
import runpy
import torch

p38 = runpy.run_path("notes/tune-runs/2026-12-02-two-blocks-whole-p38.py", run_name="p38")
print(torch.cuda.get_device_name(), flush=True)
for cols in (40000, 50257, 65536, 70001, 80000, 90000, 95003, 100003, 106000):
    for rows in (1056, 4096):
        p38["run"](rows, cols, "float32", (None, "cr"))
