"""Times launch configurations of the variants on the device (the numbers
behind the tables in softmax_lab/variants.py; see notes/TUNING.md).

    PYTHONPATH=. python benchmarks/tune.py [--quick]
"""

import argparse
import json
import sys
import time

import cupy as cp
import numpy as np

import softmax_lab
import softmax_lab.variants  # noqa: F401
V = sys.modules["softmax_lab.variants"]
from softmax_lab.reference import relative_error, softmax_reference


def time_ms(fn, repeats=10, warmup=2):
    for _ in range(warmup):
        fn()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for _ in range(repeats):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop))
    return float(np.median(times)), float(min(times)), float(max(times))


def check(y, x):
    idx = np.unique(np.linspace(0, x.shape[0] - 1, 6).astype(int))
    return relative_error(y[idx], softmax_reference(x[idx]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tune.json")
    ap.add_argument("--cols", type=int, nargs="*", default=[393216, 1024, 4096, 16384, 65536, 262144, 1048576])
    args = ap.parse_args()
    dev = softmax_lab.device_info()
    print(dev, flush=True)
    results = []
    C = V.ClusterConfig
    candidates = {
        1024: [],
        4096: [C(1, 128, 8, 3), C(1, 256, 4, 2)],
        16384: [C(1, 512, 8, 2), C(1, 256, 16, 2)],
        65536: [C(2, 512, 16, 1), C(2, 1024, 8, 1), C(4, 256, 16, 1, 2)],
        262144: [C(8, 512, 16, 1), C(8, 1024, 8, 1), C(16, 256, 16, 1, 2)],
        393216: [C(8, 512, 24, 1), C(16, 256, 24, 1, 2), C(16, 384, 16, 2)],
        1048576: [],
    }
    for cols in args.cols:
        rows = max(1, 2**30 // cols)
        x = cp.random.standard_normal((rows, cols), dtype=cp.float32)
        y = cp.empty_like(x)
        copy = min(time_ms(lambda: cp.copyto(y, x))[0] for _ in range(3))
        row = {"rows": rows, "cols": cols, "copy_ms": copy, "runs": []}
        print(f"\n== {rows} x {cols}: copy {copy:.3f} ms", flush=True)

        def record(label, fn):
            y.fill(cp.nan)
            try:
                fn()
                err = check(y, x) if label != "torch.compile" else float("nan")
                med, lo, hi = time_ms(fn)
            except Exception as e:  # noqa: BLE001 - a config that cannot launch is a result too
                print(f"{label:40s} FAILED {type(e).__name__}: {e}", flush=True)
                row["runs"].append({"label": label, "error": str(e)})
                return
            print(f"{label:40s} {med:8.3f} ms  x{med / copy:5.3f}  [{lo:.3f}, {hi:.3f}]  err {err:.2e}", flush=True)
            row["runs"].append({"label": label, "ms": med, "min": lo, "max": hi, "ratio": med / copy, "err": err})

        p = V.Problem(x, y, rows, cols, cols, cols)
        for name, v in softmax_lab.variants().items():
            if name != "single_read":
                record(name, lambda v=v: v.run(p, dev))
        for chunk in ((4096, 16384) if cols >= 65536 else ()):
            record(f"multi_block chunk={chunk}", lambda c=chunk: V._run_multi_block(p, dev, chunk_vecs=c))
        for cfg in candidates.get(cols, []):
            if cfg.capacity_floats < cols:
                continue
            try:
                k = V.single_read_kernel(cfg, dev)
                g = V.resident_groups(cfg, k, dev)
            except Exception as e:  # noqa: BLE001
                print(f"{cfg} cannot build: {e}", flush=True)
                continue
            tag = f"sr {cfg.cluster}x{cfg.threads}x{cfg.vpt}x{cfg.stages}x{cfg.blocks_per_sm}"
            record(f"{tag} g={g}", lambda c=cfg: V._run_single_read(p, dev, c))
            if cfg.cluster == 1 and cols == 16384:
                record(f"{tag} g=112", lambda c=cfg: V._run_single_read(p, dev, c, groups=112))
            if cfg.cluster >= 8 and cols == 393216:
                for gg in sorted({g - 1, g + 1}):
                    if 0 < gg < g:
                        record(f"{tag} g={gg}", lambda c=cfg, gg=gg: V._run_single_read(p, dev, c, groups=gg))
        try:
            import torch

            tx = torch.as_tensor(x, device="cuda")
            ty = torch.as_tensor(y, device="cuda")
            record("torch.softmax", lambda: torch.ops.aten._softmax.out(tx, 1, False, out=ty))
            compiled = torch.compile(lambda t: torch.softmax(t, dim=1))
            record("torch.compile", lambda: ty.copy_(compiled(tx)) if False else compiled(tx))
        except Exception as e:  # noqa: BLE001
            print("torch:", e)
        results.append(row)
        del x, y
        cp.get_default_memory_pool().free_all_blocks()
    with open(args.out, "w") as f:
        json.dump({"device": dev.name, "date": time.strftime("%Y-%m-%d %H:%M"), "command": " ".join(sys.argv), "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
