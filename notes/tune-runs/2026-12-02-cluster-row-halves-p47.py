"""Session 18 probe 47 (p46's harness): with the shifted exponentials, cluster_row's half softmax beat
single_read's plans at four blocks per SM (p46: bf16 4096 x 128256 1.06 against 1.13, 2048 x 262144 1.10
against 1.16, 4096 x 100003 1.16 against 1.18) and lost at three (151936 1.15 against 1.11, 393216 1.12
against 1.10).  Here: the cluster doubled so that vectors a thread fall to four blocks per SM, other row
lengths and row counts, float16, and log_softmax (whose cluster_row path is unchanged) for the rule.
PYTHONPATH=. python3 notes/tune-runs/2026-12-02-cluster-row-halves-p47.py
"""
import runpy

p46 = runpy.run_path("notes/tune-runs/2026-12-02-cluster-row-halves-p46.py", run_name="p46")
run = p46["run"]

if __name__ == "__main__":
    import torch
    print(torch.cuda.get_device_name(), flush=True)
    sm = "softmax"
    for d in ("bfloat16", "float16"):
        run(4096, 151936, d, sm, ("auto", "8.256.10.3", "16.256.5.4", "16.128.10.4", "8.512.5.2"))
        run(4096, 393216, d, sm, ("auto", "16.256.12.3", "16.512.6.2"))
        run(4096, 128256, d, sm, ("auto", "8.256.8.4", "16.256.4.4"))
    d = "bfloat16"
    run(4096, 200003, d, sm, ("auto", "8.256.13.2", "16.256.7.4", "8.512.7.2"))
    run(4096, 180000, d, sm, ("auto", "8.256.11.3", "16.256.6.4"))
    run(4096, 50257, d, sm, ("auto", "2.256.13.2", "4.256.7.4", "8.256.4.4"))
    run(4096, 80000, d, sm, ("auto", "4.256.10.3", "8.256.5.4", "8.128.10.4"))
    run(16384, 128256, d, sm, ("auto", "8.256.8.4"))
    run(1056, 151936, d, sm, ("auto", "8.256.10.3", "16.256.5.4"))
    run(528, 262144, d, sm, ("auto", "16.256.8.4"))
    run(1056, 100003, d, sm, ("auto", "8.256.7.4", "16.256.4.4"))
    run(4096, 300000, d, sm, ("auto", "16.256.10.3", "16.512.5.2"))
    for c in (65536, 128256, 151936):
        run(4096, c, d, "log_softmax", ("auto", "sr_plan"))
