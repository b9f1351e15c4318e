"""Session 18 probe 46 (p40's timing): cluster_row's half softmax took two exponentials an element by
exp_approx (ex2.approx.f32 with its subnormal fixup: ~6 instructions), one for the sum and one for the output;
its log_softmax runs 1.05 x copy at bf16 4096 x 65536 where softmax runs 1.12, and quack (one exponential, the
row held as floats) 1.02 at bf16 8192 x 65536.  Candidates, forced cluster_row plans (cluster x threads x vpt x
blocks per SM): "old" (CR_SHIFTED_EXP 0: exp_approx twice), "new" (exp_elem: one FFMA and ex2.approx.ftz with
bfloat16's shift, twice), "w" (CR_WIDE: e held as 8 floats a vector, one exponential), and auto / single_read's
plan where auto takes single_read.  Times ÷ copy (torch copy_), median of 9; every output checked first.
PYTHONPATH=. python3 notes/tune-runs/2026-12-02-cluster-row-halves-p46.py
"""
import dataclasses
import runpy
import sys
import torch

p40 = runpy.run_path("notes/tune-runs/2026-12-02-short-halves-p40.py", run_name="p40")
tm, TD, TOL, L2 = p40["tm"], p40["TD"], p40["TOL"], p40["L2"]
V = sys.modules["softmax_lab.variants"]
dev = p40["dev"]
S = p40["S"]


@dataclasses.dataclass(frozen=True)
class Plan(V.RowClusterPlan):
    extra: tuple = ()

    def defines(self, dev=None):
        return super().defines(dev) | dict(self.extra)


def cand(code):
    """'c.t.v.b[w|o]': cluster_row c x t x v at b blocks per SM; w wide, o old exponentials."""
    wide, old = code.endswith("w"), code.endswith("o")
    c, t, v, b = map(int, code.rstrip("wo").split("."))
    extra = (("CR_WIDE", 1),) if wide else (("CR_SHIFTED_EXP", 0),) if old else ()
    return Plan(c, t, v, b, False, 0, extra)


def run(r, c, d, op, cands):
    torch.manual_seed(0)
    it = torch.empty((), dtype=TD[d]).element_size()
    nsets = max(1, min(8, -(-4 * L2 // (2 * r * c * it))))
    xs = [(torch.randn(r, c, device="cuda") * 3).to(TD[d]) for _ in range(nsets)]
    ys = [torch.empty_like(xs[0]) for _ in range(nsets)]
    floor = tm(lambda i: ys[i].copy_(xs[i]), nsets)[0]
    sh = V.Shape(r, c, c, c, 0, 0, it, d, op, 0, 0)
    ref_op = torch.softmax if op == "softmax" else torch.log_softmax
    res = []
    for name in cands:
        try:
            if name == "auto":
                launch = V.preferences(sh, dev)[0].prepare(sh, dev)
            elif name == "sr_plan":
                plan = V.single_read_plan(c, dev, r, d, op)
                launch = V.get_variant("single_read").prepare(sh, dev, config=plan)
                name = "sr:" + plan.label()
            else:
                launch = V._prepare_cluster_row(sh, dev, cand(name))
        except Exception as e:  # noqa: BLE001 - a probe: report and go on
            res.append(f"{name} cannot ({type(e).__name__}: {str(e)[:80]})")
            continue
        call = lambda i: launch(xs[i].data_ptr(), ys[i].data_ptr(), S)
        ys[0].fill_(float("nan")); call(0); torch.cuda.synchronize()
        bad = 0
        rt, at = TOL[d]
        step = max(1, (1 << 22) // c)
        for lo in range(0, r, step):
            want = ref_op(xs[0][lo:lo + step].float(), -1)
            got = ys[0][lo:lo + step].float()
            bad += int((~((got - want).abs() <= rt * want.abs() + at)).sum().item())
        t = tm(call, nsets)
        res.append(f"{name} {t[0] / floor:.3f} ({t[1] / floor:.3f}-{t[2] / floor:.3f}){f' BAD {bad}' if bad else ''}")
    auto = V.preferences(sh, dev)[0].name
    print(f"{r}x{c} {d} {op} (auto {auto}): " + " | ".join(res), flush=True)
    del xs, ys
    torch.cuda.empty_cache()


if __name__ == "__main__":
    print(torch.cuda.get_device_name(), flush=True)
    sm = "softmax"
    for d in ("bfloat16", "float16"):
        run(16384, 32000, d, sm, ("auto", "2.256.8.4o", "2.256.8.4", "2.256.8.2w", "4.256.4.4w", "4.128.8.5w"))
        run(8192, 65536, d, sm, ("auto", "4.256.8.4o", "4.256.8.4", "4.256.8.2w", "8.256.4.4w", "8.128.8.5w"))
        run(4096, 151936, d, sm, ("auto", "8.256.10.3o", "8.256.10.3", "8.256.10.2w", "16.256.5.4w", "16.128.10.4w"))
    d = "bfloat16"
    run(4096, 128256, d, sm, ("auto", "8.256.8.4o", "8.256.8.4", "8.256.8.2w", "16.256.4.4w", "16.128.8.5w"))
    run(2048, 262144, d, sm, ("auto", "16.256.8.4", "16.256.8.2w", "16.128.16.2", "16.512.4.2w"))
    run(4096, 100003, d, sm, ("auto", "8.256.7.4o", "8.256.7.4", "8.256.7.2w", "16.256.4.4w"))
    run(132, 262144, d, sm, ("auto", "16.256.8.4o", "16.256.8.4", "16.256.8.2w", "16.512.4.2w"))
    run(132, 393216, d, sm, ("auto", "16.256.12.3o", "16.256.12.3", "16.256.12.2w", "16.512.6.2w"))
    run(4096, 393216, d, sm, ("auto", "16.256.12.3", "16.256.12.2w", "16.512.6.2w"))
    run(1024, 32000, d, sm, ("auto", "2.256.8.4o", "2.256.8.4", "4.256.4.4w"))
    run(32, 100003, d, sm, ("auto", "16.256.4.4o", "16.256.4.4", "16.256.4.4w"))
