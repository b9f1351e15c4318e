"""Session 20 probe 55 (p54's harness): SRB_Y_DIRECT over more row lengths, rows and dtypes.  p54 found the
halves' log_softmax backward at 4096 x 151936 1.18 -> 1.11 (bf16 and fp16) and bf16 128256 1.07 -> 1.02 with
y loaded plainly (policy 0) and two stages of dy, level or behind at 393216 (clusters of 8) and float32
151936 (1.05 -> 1.07).  Here: one stage with plain loads (d1.0), the two-stage builds at other block shapes
(e...: the 608-thread plans spill 8 bytes with two stages, ptxas, NVRTC 12.9), other lengths and few rows.
Configurations that do not hold the row are skipped (p54's e4.256.8.2.2 did not and faulted).
PYTHONPATH=. python3 notes/tune-runs/2026-12-02-log-backward-direct-y-p55.py
"""
import runpy
import torch

p54 = runpy.run_path("notes/tune-runs/2026-12-02-log-backward-direct-y-p54.py", run_name="p54")
run, prebuild, V = p54["run"], p54["prebuild"], p54["V"]

if __name__ == "__main__":
    print(torch.cuda.get_device_name(), flush=True)
    base = ("auto", "d1.0", "d2.0", "d2.2")
    jobs = [(4096, 151936, d, ("auto", "d1.0", "d2.0", "e4.512.10.2.1.0", "e4.512.10.1.1.0", "e4.640.8.2.1.0", "auto",
                               "d2.0")) for d in ("bfloat16", "float16")]
    jobs += [(4096, 128256, "float16", base), (4096, 100003, "bfloat16", base), (4096, 65536, "bfloat16", base),
             (4096, 50257, "bfloat16", base), (4096, 32000, "bfloat16", base), (4096, 200003, "bfloat16", base),
             (2048, 262144, "bfloat16", base), (4096, 393216, "bfloat16", ("auto", "d1.0")),
             (1056, 151936, "bfloat16", base), (528, 128256, "bfloat16", base), (132, 151936, "bfloat16", base),
             (32, 151936, "bfloat16", base), (4096, 65536, "float32", base), (4096, 100003, "float32", base),
             (4096, 32000, "float32", base), (4096, 128256, "float32", base)]
    prebuild(jobs)
    for job in jobs:
        run(*job)
