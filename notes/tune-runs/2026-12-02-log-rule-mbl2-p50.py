"""Session 19 probe 50 (p46's harness).  (a) Half log_softmax: cluster_row's plans of four blocks per SM against
auto's single_read, on rows that start on 16 bytes (128256, 128000, 120000, 262144) and rows that do not (128255,
128257), to decide a rule by alignment (p49: aligned 4096 x 128256 won 3-5 %, odd 100003 lost 10 %).
(b) float32 softmax in cluster_row with e by FADD, FFMA and ex2.approx.ftz of (x - m) log2 e + 24 (suffix "f":
CR_FLOAT_EXP_SHIFT 24; the output by two multiplies, e^(m_t - M) then 1 / S, so that no factor goes subnormal)
against exp_approx's six instructions (ex2.approx.f32 with its subnormal fixup).
(c) multi_block_l2's halves with their sums and softmax outputs by exp_elem (MBL2_EXP_ELEM 1, code "m1") against
exp_approx ("m0"), at rows past what a memory-merged group takes (4M columns).
PYTHONPATH=. python3 notes/tune-runs/2026-12-02-log-rule-mbl2-p50.py
"""
import runpy
import sys

p46 = runpy.run_path("notes/tune-runs/2026-12-02-cluster-row-halves-p46.py", run_name="p46")
run, plan_of = p46["run"], p46["cand"]
V = sys.modules["softmax_lab.variants"]
_defines, _prepare_cluster_row = V.multi_block_l2_defines, V._prepare_cluster_row


class MultiBlockL2:
    def __init__(self, exp_elem):
        self.exp_elem = exp_elem

    def prepare(self, sh, dev):
        V.multi_block_l2_defines = lambda *a, **k: _defines(*a, **k) | {"MBL2_EXP_ELEM": self.exp_elem}
        try:
            return V._prepare_multi_block_l2(sh, dev)
        finally:
            V.multi_block_l2_defines = _defines


def cand(code):
    if code.startswith("m"):
        return MultiBlockL2(int(code[1]))
    if code.endswith("f"):
        c, t, v, b = map(int, code[:-1].split("."))
        return p46["Plan"](c, t, v, b, False, 0, (("CR_FLOAT_EXP_SHIFT", 24),))
    return plan_of(code)


def prepare(sh, dev, plan):
    return plan.prepare(sh, dev) if isinstance(plan, MultiBlockL2) else _prepare_cluster_row(sh, dev, plan)


run.__globals__["cand"] = cand
V._prepare_cluster_row = prepare

if __name__ == "__main__":
    import torch
    print(torch.cuda.get_device_name(), flush=True)
    lg, sm = "log_softmax", "softmax"
    for d in ("bfloat16", "float16"):
        for r, c in ((4096, 128256), (4096, 128255), (2048, 262144)):
            run(r, c, d, lg, ("auto", ("16" if c > 200000 else "8") + ".256.8.4"))
    for r, c in ((16384, 128256), (1056, 128256), (4096, 128000), (4096, 128257), (8192, 120000), (528, 262144),
                 (2048, 262143)):
        run(r, c, "bfloat16", lg, ("auto", ("16" if c > 200000 else "8") + ".256.8.4"))
    for r, c, code in ((8192, 65536, "8.256.8.4"), (132, 151936, "16.256.10.4"), (16384, 32000, "4.256.8.4"),
                       (132, 65536, "8.256.8.4"), (4096, 151936, "8.256.19.2"), (4096, 128256, "16.256.8.4")):
        run(r, c, "float32", sm, ("auto", code, code + "f", code, code + "f"))
    for d, op, r in (("bfloat16", sm, 256), ("bfloat16", lg, 256), ("float16", sm, 256), ("bfloat16", sm, 64)):
        run(r, 4194304, d, op, ("m0", "m1", "auto", "m0", "m1"))
    run(128, 4194303, "bfloat16", sm, ("m0", "m1"))
