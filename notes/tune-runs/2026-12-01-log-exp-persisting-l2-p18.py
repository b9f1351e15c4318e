"""Session 12 probe 18.  (a) log_softmax backward of halves: e^y by expf (today) against ex2.approx
(SOFTMAX_LOG_GRAD_EXP=1), with softmax backward as the reference point, times ÷ torch.add, and the error in ulp.
(b) multi_block_l2 on long rows with the device's persisting-L2 limit at 0 (default) and at its maximum.
PYTHONPATH=. python3 notes/tune-runs/2026-12-01-log-exp-persisting-l2-p18.py"""
import sys
import torch, cupy as cp
import softmax_lab
from softmax_lab.reference import ulp_error, backward_scale
V = sys.modules["softmax_lab.variants"]
dev = softmax_lab.device_info()
S = cp.cuda.Stream.null
TD = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
L2 = 60 * 2**20
ORIG = V.kernel_defines


def tm(call, nsets, reps=9):
    k = max(6, nsets)
    for i in range(k): call(i % nsets)
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for i in range(k): call(i % nsets)
        b.record(); b.synchronize()
        out.append(a.elapsed_time(b) / k)
    out.sort()
    return out[reps // 2], out[1], out[-2]


def backward(r, c, d):
    torch.manual_seed(0)
    it = V.DTYPES[d]
    nsets = max(1, min(8, -(-4 * L2 // (3 * r * c * it))))
    line = []
    for op in ("softmax_backward", "log_softmax_backward"):
        fwd = torch.softmax if op == "softmax_backward" else torch.log_softmax
        xs = [fwd(torch.randn(r, c, device="cuda") * 3, -1).to(TD[d]) for _ in range(nsets)]
        gs = [torch.randn(r, c, device="cuda").to(TD[d]) for _ in range(nsets)]
        ys = [torch.empty_like(xs[0]) for _ in range(nsets)]
        floor = tm(lambda i: torch.add(xs[i], gs[i], out=ys[i]), nsets)[0]
        y64, g64 = xs[0][:64].double(), gs[0][:64].double()
        want = y64 * (g64 - (g64 * y64).sum(-1, keepdim=True)) if op == "softmax_backward" else g64 - y64.exp() * g64.sum(-1, keepdim=True)
        scale = backward_scale(g64.cpu().numpy(), y64.cpu().numpy(), op)
        for knob in ((0, 1) if op.startswith("log") else (0,)):
            V.kernel_defines = lambda dt, o, knob=knob: ORIG(dt, o) | {"SOFTMAX_LOG_GRAD_EXP": knob}
            sh = V.Shape(r, c, c, c, 0, 0, it, d, op, c, 0)
            auto = V.preferences(sh, dev)[0]
            launch = auto.prepare(sh, dev)
            call = lambda i: launch(xs[i].data_ptr(), ys[i].data_ptr(), S, gs[i].data_ptr())
            ys[0].fill_(float("nan")); call(0); torch.cuda.synchronize()
            err = ulp_error(ys[0][:64].double().cpu().numpy(), want.cpu().numpy(), d, 4 * 2.0**-24 * scale) if d != "float32" else \
                ((ys[0][:64].double() - want).abs().max() / want.abs().max()).item()
            t = tm(call, nsets)
            line.append(f"{op[:-9]} exp{knob} {auto.name} {t[0] / floor:.3f} ({t[1] / floor:.3f}-{t[2] / floor:.3f}) err {err:.3g}")
        V.kernel_defines = ORIG
        del xs, gs, ys
    print(f"{r}x{c} {d} (floor {floor * 1e3:.0f} us): " + " | ".join(line), flush=True)


def long_rows(limit_label):
    for r, c in ((32, 4194304), (132, 4194304), (32, 1048576), (132, 1048576), (512, 1048576)):
        torch.manual_seed(0)
        nsets = max(1, min(8, -(-4 * L2 // (2 * r * c * 4))))
        xs = [torch.randn(r, c, device="cuda") * 3 for _ in range(nsets)]
        ys = [torch.empty_like(xs[0]) for _ in range(nsets)]
        floor = tm(lambda i: ys[i].copy_(xs[i]), nsets)[0]
        sh = V.Shape(r, c, c, c, 0, 0, 4, "float32", "softmax", 0, 0)
        auto = V.preferences(sh, dev)[0]
        launch = auto.prepare(sh, dev)
        call = lambda i: launch(xs[i].data_ptr(), ys[i].data_ptr(), S)
        ys[0].fill_(float("nan")); call(0); torch.cuda.synchronize()
        err = ((ys[0][:8].double() - torch.softmax(xs[0][:8].double(), -1)).abs().max()).item()
        t = tm(call, nsets)
        print(f"  {limit_label} {r}x{c} {auto.name} {t[0] / floor:.3f} ({t[1] / floor:.3f}-{t[2] / floor:.3f}) err {err:.2g}", flush=True)
        del xs, ys


for r, c, d in ((4096, 151936, "bfloat16"), (4096, 151936, "float16"), (4096, 393216, "bfloat16"),
                (4096, 100003, "bfloat16"), (16384, 32000, "bfloat16"), (4096, 151936, "float32")):
    backward(r, c, d)
rt = cp.cuda.runtime
print("persisting L2 max", rt.deviceGetAttribute(108, 0), "window max", rt.deviceGetAttribute(109, 0),
      "limit now", rt.deviceGetLimit(6), flush=True)
long_rows("limit 0")
rt.deviceSetLimit(6, rt.deviceGetAttribute(108, 0))
print("limit set to", rt.deviceGetLimit(6), flush=True)
long_rows("limit max")
