"""Probe 98 (2026-12-03): host time per call of softmax(x, out=y) on torch tensors (bf16 and float32, 8 x 1024) against
torch.softmax: 5 loops of 3000 calls after 200, synchronised once per loop, median per call.
  PYTHONPATH=. python3 notes/tune-runs/2026-12-03-host-torch-p98.py"""
import time, torch, softmax_lab, numpy as np
x = torch.randn(8, 1024, device="cuda").to(torch.bfloat16); y = torch.empty_like(x)
xf = torch.randn(8, 1024, device="cuda"); yf = torch.empty_like(xf)
def loop(f, n=3000):
    for _ in range(200): f()
    torch.cuda.synchronize(); out = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n): f()
        torch.cuda.synchronize(); out.append((time.perf_counter() - t) / n * 1e6)
    return np.median(out), min(out), max(out)
for name, f in [("softmax_lab.softmax(bf16 torch, out=y)", lambda: softmax_lab.softmax(x, out=y)),
                ("torch.softmax(bf16)", lambda: torch.softmax(x, -1)),
                ("softmax_lab.softmax(fp32 torch, out=y)", lambda: softmax_lab.softmax(xf, out=yf)),
                ("torch.softmax(fp32)", lambda: torch.softmax(xf, -1))]:
    med, lo, hi = loop(f)
    print(f"{name}: {med:.1f} us per call (loops {lo:.1f}-{hi:.1f})", flush=True)
