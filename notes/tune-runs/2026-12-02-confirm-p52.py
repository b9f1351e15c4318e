"""Session 19 probe 52 (p51's harness), on fd513b6: auto as committed (cluster_row's float32 softmax built with
FLOAT_EXP_FTZ, half log_softmax's rule by alignment) against "a0" (every build with FLOAT_EXP_FTZ 0: the code
before e538a82 for float32).
PYTHONPATH=. python3 notes/tune-runs/2026-12-02-confirm-p52.py
"""
import runpy

run = runpy.run_path("notes/tune-runs/2026-12-02-float-ftz-p51.py", run_name="p51")["run"]

if __name__ == "__main__":
    import torch
    print(torch.cuda.get_device_name(), flush=True)
    for r, c in ((8192, 65536), (4096, 50257), (16384, 32000), (132, 151936), (132, 128256), (131072, 4096)):
        run(r, c, "float32", "softmax", ("a0", "auto", "a0", "auto"))
    for r, c, d in ((4096, 128256, "bfloat16"), (4096, 128256, "float16"), (4096, 128255, "bfloat16")):
        run(r, c, d, "log_softmax", ("sr_plan", "auto", "sr_plan", "auto"))
