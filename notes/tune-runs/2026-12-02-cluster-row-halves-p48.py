"""Session 18 probe 48 (p46's harness): the bf16 grid shapes still behind quack after 7bb7842 (sweep_bf16,
04:38 UTC: 132 x 262144 1.19 against 1.12, 2048 x 262144 1.10 against 1.06, 132 x 393216 1.24 against 1.18,
4096 x 128256 1.06 against 1.03), all cluster_row's plans (16 x 256 x 8 x 4, 16 x 256 x 12 x 3, 8 x 256 x 8 x 4):
other block shapes of the same cluster (128, 384, 512 threads; more or fewer blocks per SM) and evict-first
loads (suffix s).  Codes c.t.v.b as p46.
PYTHONPATH=. python3 notes/tune-runs/2026-12-02-cluster-row-halves-p48.py
"""
import runpy

p46 = runpy.run_path("notes/tune-runs/2026-12-02-cluster-row-halves-p46.py", run_name="p46")
run, Plan = p46["run"], p46["Plan"]


def cand(code):
    stream = code.endswith("s")
    c, t, v, b = map(int, code.rstrip("s").split("."))
    return Plan(c, t, v, b, stream, 0, ())


run.__globals__["cand"] = cand

if __name__ == "__main__":
    import torch
    print(torch.cuda.get_device_name(), flush=True)
    sm, d = "softmax", "bfloat16"
    for rows in (132, 2048):
        run(rows, 262144, d, sm, ("auto", "16.256.8.4", "16.256.8.4s", "16.128.16.5", "16.512.4.3", "16.384.6.3"))
    run(132, 393216, d, sm, ("auto", "16.256.12.3", "16.256.12.3s", "16.128.24.4", "16.512.6.2", "16.384.8.2"))
    run(4096, 128256, d, sm, ("auto", "sr_plan", "8.256.8.4", "8.256.8.4s", "8.128.16.4", "8.512.4.3"))
    run(1024, 393216, d, sm, ("auto", "16.256.12.3", "16.128.24.4"))
