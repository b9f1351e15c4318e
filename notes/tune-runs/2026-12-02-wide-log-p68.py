"""Probe 68: half log_softmax held wide (SR_WIDE: x widened once into 8 floats per vector, kept for the
output) against the packed plan auto takes (x re-widened for the sum and for the output), bf16 and fp16,
4096 rows of LLM-vocabulary and longer lengths; half softmax's auto beside it.  Every output checked in
ulps against float64 (tests' op_error) on 8 rows, x and y at offsets too.  p64's harness (÷ the faster of two
torch copy_ timings, each plan twice).  git apply notes/tune-runs/2026-12-02-wide-log-p68.patch; PYTHONPATH=. python3 notes/tune-runs/2026-12-02-wide-log-p68.py"""
import sys
import time

sys.path.insert(0, "tests")
import softmax_lab  # noqa: E402
from softmax_lab.reference import log_softmax_reference, op_error, softmax_reference  # noqa: E402

V = sys.modules["softmax_lab.variants"]
V.holds_wide = lambda dtype, op: V.DTYPES[dtype] == 2 and op in ("softmax", "log_softmax")  # the probe's wide log
L2 = 60 * 2**20
T0 = time.time()


def tm(call, nsets, reps=9):
    import torch
    k = max(6, nsets)
    for i in range(k):
        call(i % nsets)
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for i in range(k):
            call(i % nsets)
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) / k)
    out.sort()
    return out[reps // 2], out[1], out[-2]


def ulps(y, x, dtype, op):
    import numpy as np
    x64 = x.double().cpu().numpy()
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        ref = (softmax_reference if op == "softmax" else log_softmax_reference)(x64)
        return op_error(y.double().cpu().numpy(), ref, dtype, op)


def check_offsets(rows, cols, dtype, op, config, dev):
    """x and y at element offsets 3 and 5 (not 16-byte aligned), NaN-poisoned output, -inf / NaN rows."""
    import torch
    xb = (torch.randn(8, cols + 3, device="cuda") * 4).to(getattr(torch, dtype))
    x = xb[:, 3:]
    x[1, : cols // 2] = float("-inf")
    x[2] = float("-inf")
    x[3, cols // 3] = float("nan")
    yb = torch.full((8, cols + 5), float("nan"), device="cuda", dtype=x.dtype)
    y = yb[:, 5:]
    sh = V.Shape(8, cols, cols + 3, cols + 5, x.data_ptr() % 128, y.data_ptr() % 16, 2, dtype, op)
    V.get_variant("single_read").prepare(sh, dev, config=config)(x.data_ptr(), y.data_ptr(),
                                                                  __import__("cupy").cuda.Stream.null)
    torch.cuda.synchronize()
    return ulps(y, x, dtype, op)


def job(rows, cols, dtype, op, plans, dev):
    import cupy as cp
    import torch
    stream = cp.cuda.Stream.null
    torch.manual_seed(rows + cols)
    nsets = max(1, min(8, -(-4 * L2 // (2 * rows * cols * 2))))
    xs = [(torch.randn(rows, cols, device="cuda") * 3).to(getattr(torch, dtype)) for _ in range(nsets)]
    ys = [torch.empty_like(xs[0]) for _ in range(nsets)]
    first = tm(lambda i: ys[i].copy_(xs[i]), nsets)[0]
    res = []
    for rep in range(2):
        for label, make, config in plans:
            try:
                launch = make()
                call = lambda i: launch(xs[i].data_ptr(), ys[i].data_ptr(), stream)  # noqa: E731
                ys[0].fill_(float("nan"))
                call(0)
                torch.cuda.synchronize()
                bad = ""
                if rep == 0:
                    err = ulps(ys[0][:8], xs[0][:8], dtype, op)
                    err2 = check_offsets(rows, cols, dtype, op, config, dev) if config is not None else 0.0
                    bad = f" ulp {err:.2f}/{err2:.2f}" + (" BAD" if not (err <= 1.0 and err2 <= 1.0) else "")
                t = tm(call, nsets)
                res.append((t[0], t[1], t[2], label, bad))
            except Exception as e:  # noqa: BLE001
                res.append((9e9, 0, 0, label, f" ERR {str(e)[:120]}"))
            torch.cuda.synchronize()
    floor = min(first, tm(lambda i: ys[i].copy_(xs[i]), nsets)[0])
    res.sort()
    print(f"{rows}x{cols} {dtype} {op} (copy {floor * 1e3:.0f} us): " + " | ".join(
        f"{lab} {a / floor:.3f} ({b / floor:.3f}-{c / floor:.3f}){bad}" for a, b, c, lab, bad in res), flush=True)
    torch.cuda.empty_cache()


def main():
    dev = softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    for rows, cols in ((4096, 393216), (4096, 151936), (4096, 128256), (4096, 100003), (4096, 262144),
                       (4096, 300000), (16384, 32000), (16384, 50257), (4096, 65536), (2048, 200003), (1024, 393216)):
        for dtype in ("bfloat16", "float16"):
            if time.time() - T0 > 200:
                print("time limit", flush=True)
                return
            op = "log_softmax"
            sh = V.Shape(rows, cols, cols, cols, 0, 0, 2, dtype, op)
            auto = V.preferences(sh, dev)[0]
            packed = V.single_read_plan(cols, dev, rows, dtype, op)
            wides = []
            w = V.single_read_config(cols, dev, rows, 2, wide=True, one_block_cost=V.HALVES_ONE_BLOCK_COST)
            if w is not None:
                wides.append(w)
            soft = V.single_read_plan(cols, dev, rows, dtype, "softmax")
            if soft is not None and soft.wide and soft not in wides:
                wides.append(soft)
            plans = [(f"auto:{auto.name}:{packed.label() if packed else None}", lambda sh=sh, a=auto: a.prepare(sh, dev),
                      None)]
            plans += [(f"wide {c.label()}", lambda sh=sh, c=c: V.get_variant("single_read").prepare(sh, dev, config=c), c)
                      for c in wides]
            job(rows, cols, dtype, op, plans, dev)
        ssh = V.Shape(rows, cols, cols, cols, 0, 0, 2, "bfloat16", "softmax")
        sauto = V.preferences(ssh, dev)[0]
        job(rows, cols, "bfloat16", "softmax", [(f"softmax auto:{sauto.name}", lambda: sauto.prepare(ssh, dev), None)], dev)


if __name__ == "__main__":
    main()
