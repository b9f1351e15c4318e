"""Session 12 probe 21: float32 backward, single_read (now line-shifted where slices start off a line) against
cluster_row and multi_block_l2 over rows x lengths, for auto's backward rule.  Times ÷ torch.add, back to back,
median of 9 (2nd-8th), output checked against float64 first.  PYTHONPATH=. python3 notes/tune-runs/2026-12-01-backward-shift-p21.py"""
import sys
import torch, cupy as cp
import softmax_lab
V = sys.modules["softmax_lab.variants"]
dev = softmax_lab.device_info()
S = cp.cuda.Stream.null
L2 = 60 * 2**20


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


def run(r, c, op):
    torch.manual_seed(0)
    nsets = max(1, min(8, -(-4 * L2 // (3 * r * c * 4))))
    fwd = torch.softmax if op == "softmax_backward" else torch.log_softmax
    xs = [fwd(torch.randn(r, c, device="cuda") * 3, -1) for _ in range(nsets)]
    gs = [torch.randn(r, c, device="cuda") for _ in range(nsets)]
    ys = [torch.empty_like(xs[0]) for _ in range(nsets)]
    floor = tm(lambda i: torch.add(xs[i], gs[i], out=ys[i]), nsets)[0]
    y64, g64 = xs[0][:256].double(), gs[0][:256].double()
    want = y64 * (g64 - (g64 * y64).sum(-1, keepdim=True)) if op == "softmax_backward" else g64 - y64.exp() * g64.sum(-1, keepdim=True)
    sh = V.Shape(r, c, c, c, 0, 0, 4, "float32", op, c, 0)
    auto = V.preferences(sh, dev)[0].name
    res = []
    for name in ("single_read", "cluster_row", "multi_block_l2"):
        try:
            launch = V.get_variant(name).prepare(sh, dev)
            call = lambda i: launch(xs[i].data_ptr(), ys[i].data_ptr(), S, gs[i].data_ptr())
            ys[0].fill_(float("nan")); call(0); torch.cuda.synchronize()
            err = ((ys[0][:256].double() - want).abs().max() / want.abs().max()).nan_to_num(1e9).item()
            t = tm(call, nsets)
            res.append((t[0] / floor, f"{name} {t[0] / floor:.3f} ({t[1] / floor:.3f}-{t[2] / floor:.3f}){' BAD' if err > 1e-5 else ''}"))
        except Exception as e:
            res.append((9, f"{name} ERR {str(e)[:80]}"))
    res.sort()
    print(f"{r}x{c} {op[:-9]} auto={auto}: " + " | ".join(s for _, s in res), flush=True)
    del xs, gs, ys


for c in (32000, 50257, 65536, 100003, 128256, 151936, 180001, 196608):
    for r in (132, 528, 1056, 4096):
        run(r, c, "softmax_backward")
for r, c in ((4096, 100003), (1056, 151936), (4096, 151936), (4096, 196608), (132, 65536)):
    run(r, c, "log_softmax_backward")
