"""Session 13 probe 25: log_softmax's error near 0 (the GPU suite once saw multi_block float16 at 1.59 ulp
over reference.LOG_FLOOR, 98 x 5100).  For every row variant, auto and torch.log_softmax: the worst
reference.op_error over random inputs drawn as tests/test_dtypes_gpu.py draws them (scale up to 20), and
over rows built to put outputs near 0 (one maximum, the rest at a gap that makes the sum 1 + 2^-k).
PYTHONPATH=. python3 notes/tune-runs/2026-12-01-log-near-zero-p25.py"""
import numpy as np
import torch
import softmax_lab
from softmax_lab.reference import log_softmax_reference, op_error

VARIANTS = ["three_pass", "two_pass", "multi_block", "multi_block_l2", "cluster_row", "single_read", "auto"]


def err(out, x, dtype):
    ref = log_softmax_reference(x.detach().double().cpu().numpy())
    return op_error(out.detach().double().cpu().numpy(), ref, dtype, "log_softmax")


def random_inputs(rng, dtype, n):
    for _ in range(n):
        cols = int(np.exp(rng.uniform(np.log(1000), np.log(70000))))
        rows = int(rng.integers(1, max(2, min(200, 2_000_000 // cols))))
        scale = float(rng.uniform(5, 20))
        yield (torch.randn(rows, cols, device="cuda") * scale).to(getattr(torch, dtype))


def near_zero_inputs(dtype):
    for cols in (5100, 30001, 65536):
        for k in (8, 10, 12, 14, 16):
            # one element at 0, the others at g with (cols - 1) e^g = 2^-k, jittered
            g = np.log(2.0**-k / (cols - 1))
            x = torch.full((16, cols), g, device="cuda") + torch.rand(16, cols, device="cuda") * 0.05
            x[torch.arange(16), torch.randint(cols, (16,))] = 0.0
            yield x.to(getattr(torch, dtype))


torch.manual_seed(1)
rng = np.random.default_rng(1)
for dtype in ("float16", "bfloat16", "float32"):
    for kind in ("random", "near0"):
        inputs = list(random_inputs(rng, dtype, 40) if kind == "random" else near_zero_inputs(dtype))
        worst = {}
        for x in inputs:
            for name in VARIANTS + ["torch"]:
                try:
                    out = torch.log_softmax(x, -1) if name == "torch" else \
                        softmax_lab.log_softmax(x, variant=name)
                except Exception as e:  # a variant that cannot run the shape
                    continue
                torch.cuda.synchronize()
                e = err(out, x, dtype)
                w = worst.setdefault(name, [0.0, 0, 0])
                w[0] = max(w[0], e); w[1] += e > (1e-6 if dtype == "float32" else 1.0); w[2] += 1
        print(dtype, kind, "  ".join(f"{n} {w[0]:.3g} ({w[1]}/{w[2]} over)" for n, w in worst.items()), flush=True)
