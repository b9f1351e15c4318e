"""Session 18 probe 49 (p46's harness): cluster_row's half log_softmax sums by exp_elem (ex2.approx.ftz,
shift 0) in held_max_sum (CR_LOG_BY_EXP_ELEM 1) against exp_approx (suffix o: CR_LOG_BY_EXP_ELEM 0).  (p46's
first try, the softmax path's order with the scalar loaded before the sum, spilled 56-180 bytes for log; this
one keeps held_max_sum's order and does not.)  And against single_read where auto takes it.
PYTHONPATH=. python3 notes/tune-runs/2026-12-02-cluster-row-log-p49.py
"""
import runpy

p46 = runpy.run_path("notes/tune-runs/2026-12-02-cluster-row-halves-p46.py", run_name="p46")
run, Plan = p46["run"], p46["Plan"]


def cand(code):
    old = code.endswith("o")
    c, t, v, b = map(int, code.rstrip("o").split("."))
    return Plan(c, t, v, b, False, 0, (("CR_LOG_BY_EXP_ELEM", 0),) if old else ())


run.__globals__["cand"] = cand

if __name__ == "__main__":
    import torch
    print(torch.cuda.get_device_name(), flush=True)
    lg = "log_softmax"
    for d in ("bfloat16", "float16"):
        run(4096, 65536, d, lg, ("auto", "4.256.8.4o", "4.256.8.4"))
        run(4096, 128256, d, lg, ("auto", "8.256.8.4o", "8.256.8.4"))
        run(4096, 151936, d, lg, ("auto", "8.256.10.3o", "8.256.10.3"))
    d = "bfloat16"
    run(16384, 32000, d, lg, ("auto", "2.256.8.4o", "2.256.8.4"))
    run(2048, 262144, d, lg, ("auto", "16.256.8.4o", "16.256.8.4"))
    run(4096, 393216, d, lg, ("auto", "16.256.12.3o", "16.256.12.3"))
    run(132, 262144, d, lg, ("auto", "16.256.8.4o", "16.256.8.4"))
    run(4096, 100003, d, lg, ("auto", "8.256.7.4o", "8.256.7.4"))
    run(4096, 50257, d, lg, ("auto", "2.256.13.2o", "2.256.13.2"))
