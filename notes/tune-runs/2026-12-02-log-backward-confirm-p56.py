"""Session 20 probe 56 (p54's harness), on 3fd15f1: auto's log_softmax backward as committed (y loaded directly
for the halves in clusters) against the same plan staged ("staged": y and dy through the stages, the code
before 3fd15f1), alternating.  The dtype table of 07:52 had float16 4096 x 393216 at 1.15 (1.13 before),
where p55 measured only bfloat16 (1.13 -> 1.11).
PYTHONPATH=. python3 notes/tune-runs/2026-12-02-log-backward-confirm-p56.py
"""
import dataclasses
import runpy
import torch

p54 = runpy.run_path("notes/tune-runs/2026-12-02-log-backward-direct-y-p54.py", run_name="p54")
V, dev, tm, S, TD, L2 = (p54[k] for k in ("V", "dev", "tm", "S", "TD", "L2"))


def run(r, c, d, cands, op="log_softmax_backward"):
    torch.manual_seed(0)
    it = V.DTYPES[d]
    nsets = max(1, min(8, -(-4 * L2 // (3 * r * c * it))))
    ys = [torch.log_softmax(torch.randn(r, c, device="cuda") * 3, -1).to(TD[d]) for _ in range(nsets)]
    gs = [torch.randn(r, c, device="cuda").to(TD[d]) for _ in range(nsets)]
    dxs = [torch.empty_like(ys[0]) for _ in range(nsets)]
    floor = tm(lambda i: torch.add(ys[i], gs[i], out=dxs[i]), nsets)[0]
    sh = V.Shape(r, c, c, c, 0, 0, it, d, op, c, 0)
    plan = V.single_read_backward_plan(c, dev, r, d, op)
    res, outs = [], {}
    for name in cands:
        q = plan if name == "auto" else dataclasses.replace(plan, y_direct=False)
        launch = V.get_variant("single_read").prepare(sh, dev, config=q)
        call = lambda i: launch(ys[i].data_ptr(), dxs[i].data_ptr(), S, gs[i].data_ptr())
        dxs[0].fill_(float("nan")); call(0); torch.cuda.synchronize()
        outs[name] = dxs[0].clone()
        t = tm(call, nsets)
        res.append(f"{name}:{q.label()} {t[0] / floor:.3f} ({t[1] / floor:.3f}-{t[2] / floor:.3f})")
    same = torch.equal(outs["auto"], outs["staged"])
    print(f"{r}x{c} {d} {op} (add {floor * 1e3:.0f} us){'' if same else ' OUTPUTS DIFFER'}: " + " | ".join(res),
          flush=True)
    del ys, gs, dxs, outs
    torch.cuda.empty_cache()


if __name__ == "__main__":
    print(torch.cuda.get_device_name(), flush=True)
    ab = ("auto", "staged", "auto", "staged")
    for d in ("float16", "bfloat16"):
        for r, c in ((4096, 393216), (4096, 151936), (2048, 262144), (4096, 128256), (4096, 100003), (4096, 200003)):
            run(r, c, d, ab)
