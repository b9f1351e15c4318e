"""Session 16 probe 41 (p40's harness): the rows between single_read_warp's 4 KB and cluster_row's 16 KB.
p40 had float32 131072 x 4096 (16 KB rows) at 0.99 in cluster_row against three_pass's 1.09 (auto), and bf16
65536 x 8192 (16 KB) at 1.14-1.19 in cluster_row or single_read's plan against three_pass's 1.32-1.36.
Here: float32 and bf16 rows of 2-16 KB at ~1 GiB, 1056 and 132 rows; warp16p (16 packed vectors a lane) for
bf16 4096; and auto (the warp kernel at derived vectors a lane since this session) against the old 8.
PYTHONPATH=. python3 notes/tune-runs/2026-12-02-short-rows-p41.py
"""
import runpy
import torch

p40 = runpy.run_path("notes/tune-runs/2026-12-02-short-halves-p40.py", run_name="p40")
run = p40["run"]
print(torch.cuda.get_device_name(), flush=True)
run(524288, 512, "float32", "softmax", ("auto", "warp8p"))
run(349525, 1536, "bfloat16", "softmax", ("auto", "warp8w"))
for cols in (2048, 3000, 4096):
    run((1 << 30) // (4 * cols), cols, "float32", "softmax", ("three_pass", "cluster_row", "two_pass"))
run(1056, 4096, "float32", "softmax", ("three_pass", "cluster_row"))
run(132, 4096, "float32", "softmax", ("three_pass", "cluster_row"))
run(131072, 4096, "float32", "log_softmax", ("three_pass", "cluster_row"))
for op in ("softmax", "log_softmax"):
    run(131072, 4096, "bfloat16", op, ("three_pass", "warp16p", "cluster_row"))
    for cols in (6000, 8192, 12000):
        run((1 << 30) // (2 * cols), cols, "bfloat16", op, ("three_pass", "cluster_row", "sr_plan"))
    run(1056, 8192, "bfloat16", op, ("three_pass", "cluster_row", "sr_plan"))
    run(132, 8192, "bfloat16", op, ("three_pass", "cluster_row", "sr_plan"))
