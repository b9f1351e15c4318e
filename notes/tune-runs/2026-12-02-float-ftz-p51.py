"""Session 19 probe 51 (p46's harness, p50's dispatch).  p50 found cluster_row's float32 softmax 1-4.5 % faster
with e by FADD, FFMA and ex2.approx.ftz (shift 2^24, two multiplies for the output) than by exp_approx (six
instructions: ex2.approx.f32 with its subnormal fixup).  Here the same for every float32 build through
elements.cuh (FLOAT_EXP_FTZ: exp_elem and exp_elems for float32; InPlaceScale's two multiplies), on auto's own
plans (single_read, its memory-merged groups and warps, cluster_row), softmax and log_softmax: "a0" today's
build, "a1" with FLOAT_EXP_FTZ 1.
PYTHONPATH=. python3 notes/tune-runs/2026-12-02-float-ftz-p51.py
"""
import runpy
import sys

p50 = runpy.run_path("notes/tune-runs/2026-12-02-log-rule-mbl2-p50.py", run_name="p50")
run = p50["run"]
V = sys.modules["softmax_lab.variants"]
_kernel_defines = V.kernel_defines


class Auto:
    def __init__(self, ftz):
        self.ftz = ftz

    def prepare(self, sh, dev):
        V.kernel_defines = lambda *a, **k: _kernel_defines(*a, **k) | {"FLOAT_EXP_FTZ": self.ftz}
        try:
            return V.preferences(sh, dev)[0].prepare(sh, dev)
        finally:
            V.kernel_defines = _kernel_defines


_prepare = V._prepare_cluster_row  # p46's run prepares every other candidate through it
V._prepare_cluster_row = lambda sh, dev, plan: plan.prepare(sh, dev) if isinstance(plan, Auto) else _prepare(sh, dev, plan)
run.__globals__["cand"] = lambda code: Auto(int(code[1]))

if __name__ == "__main__":
    import torch
    print(torch.cuda.get_device_name(), flush=True)
    ab = ("a0", "a1", "a0", "a1")
    for r, c in ((4096, 151936), (4096, 393216), (4096, 128256), (4096, 100003), (8192, 65536), (16384, 32000),
                 (132, 151936), (1024, 1048576), (2048, 262144), (524288, 1024), (131072, 4096), (32, 393216),
                 (4096, 50257), (132, 128256)):
        run(r, c, "float32", "softmax", ab)
    for r, c in ((4096, 151936), (4096, 393216), (8192, 65536), (4096, 100003)):
        run(r, c, "float32", "log_softmax", ab)
