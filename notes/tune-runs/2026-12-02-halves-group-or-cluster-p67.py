"""Probe 67: (1) halves past 393216 columns at a few rows per SM: auto (single_read's groups at two
blocks per SM, or its cluster) against cluster_row, bf16 softmax and fp16 log_softmax, 264-2112 rows;
(2) the memory-merged launch cooperative (now) against the plain launch it replaced, same plan.
p64's harness: CUDA events around max(6, sets) calls back to back, median (2nd-8th) of 9, each plan
twice, every output checked first; ÷ the faster of two torch copy_ timings.
PYTHONPATH=. python3 notes/tune-runs/2026-12-02-halves-group-or-cluster-p67.py [all|coop|cr16|rows] [seconds]"""
import sys
import time

import numpy as np

import softmax_lab

V = sys.modules["softmax_lab.variants"]
L2 = 60 * 2**20
T0 = time.time()
LIMIT = float(sys.argv[2]) if len(sys.argv) > 2 else 260


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


def plain_merge_launch(shape, dev):
    """auto's memory-merged single_read plan launched as before this session (not cooperative)."""
    import cupy
    config = V.line_shifted(V.single_read_plan(shape.cols, dev, shape.rows, shape.dtype, shape.op), shape, dev)
    assert config.memory_merge
    kernel = V.single_read_kernel(config, dev, shape.dtype, shape.op)
    resident = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
        kernel.kernel.ptr, config.threads, config.smem_bytes) * dev.sm_count
    groups = min(shape.rows, resident // config.cluster)
    words, scalars = shape.rows * config.cluster + 1, shape.scalars()
    extra = (np.int64(config.cluster), np.int64(V.memory_merge_slice(config, shape)))

    def launch(x, y, stream):
        with stream:
            slots = cupy.empty(words, dtype=cupy.uint64)
        cupy.cuda.runtime.memsetAsync(slots.data.ptr, 0xBF, slots.nbytes, stream.ptr)
        kernel((groups * config.cluster,), (config.threads,), (V._ptr(x), V._ptr(y), *scalars, *extra, slots),
               stream=stream, shared_mem=config.smem_bytes)
    return launch


def job(rows, cols, dtype, op, plans, dev):
    import cupy as cp
    import torch
    stream = cp.cuda.Stream.null
    torch.manual_seed(rows + cols)
    nsets = max(1, min(8, -(-4 * L2 // (2 * rows * cols * V.DTYPES[dtype]))))
    xs = [(torch.randn(rows, cols, device="cuda") * 3).to(getattr(torch, dtype)) for _ in range(nsets)]
    ys = [torch.empty_like(xs[0]) for _ in range(nsets)]
    first = tm(lambda i: ys[i].copy_(xs[i]), nsets)[0]
    want = (torch.softmax if op == "softmax" else torch.log_softmax)(xs[0][:64].double(), -1)
    res = []
    for rep in range(2):
        for label, make in plans:
            try:
                launch = make()
                call = lambda i: launch(xs[i].data_ptr(), ys[i].data_ptr(), stream)  # noqa: E731
                ys[0].fill_(float("nan"))
                call(0)
                torch.cuda.synchronize()
                err = ((ys[0][:64].double() - want).abs().max() / want.abs().max()).nan_to_num(1e9).item()
                t = tm(call, nsets)
                res.append((t[0], t[1], t[2], label, '' if err < 2e-2 else f' BAD {err:.2g}'))
            except Exception as e:  # noqa: BLE001
                res.append((9e9, 0, 0, label, f" ERR {str(e)[:80]}"))
            torch.cuda.synchronize()
    floor = min(first, tm(lambda i: ys[i].copy_(xs[i]), nsets)[0])
    res.sort()
    print(f"{rows}x{cols} {dtype} {op} (copy {floor * 1e3:.0f} us, first {first / floor:.3f}): " + " | ".join(
        f"{lab} {a / floor:.3f} ({b / floor:.3f}-{c / floor:.3f}){bad}" for a, b, c, lab, bad in res), flush=True)
    torch.cuda.empty_cache()


def main():
    part = sys.argv[1] if len(sys.argv) > 1 else "all"
    dev = softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    if part in ("all", "coop"):
        for rows, cols, dtype, op in ((4096, 400000, "bfloat16", "softmax"), (1300, 500000, "float32", "softmax"),
                                      (1024, 1 << 20, "float32", "softmax"), (16384, 400000, "float16", "log_softmax")):
            sh = V.Shape(rows, cols, cols, cols, 0, 0, V.DTYPES[dtype], dtype, op)
            label = V.single_read_plan(cols, dev, rows, dtype, op).label()
            job(rows, cols, dtype, op, [(f"coop {label}", lambda sh=sh: V.get_variant("single_read").prepare(sh, dev)),
                                        (f"plain {label}", lambda sh=sh: plain_merge_launch(sh, dev))], dev)
    if part in ("all", "cr16"):  # the rule that followed: cluster_row ahead of a group of its own blocks
        for cols, rows_list in ((700001, (528,)), (737281, (528, 1056, 4096, 8192)), (750001, (528, 1056, 4096, 8192)),
                                (786432, (1056, 4096, 8192))):
            for rows in rows_list:
                for dtype in ("float16", "bfloat16"):
                    sh = V.Shape(rows, cols, cols, cols, 0, 0, 2, dtype, "softmax")
                    auto = V.preferences(sh, dev)
                    sr = V.single_read_plan(cols, dev, rows, dtype, "softmax")
                    cr = V.cluster_row_plan(cols, dev, rows, 2, 1)
                    plans = [(f"auto:{auto[0].name}", lambda sh=sh, a=auto: a[0].prepare(sh, dev)),
                             (f"single_read:{sr.label()}", lambda sh=sh: V.get_variant("single_read").prepare(sh, dev)),
                             (f"cluster_row:{cr.label()}", lambda sh=sh: V.get_variant("cluster_row").prepare(sh, dev))]
                    job(rows, cols, dtype, "softmax", plans, dev)
    if part in ("all", "rows"):
        for cols in (400000, 500000, 600001, 786432):
            for rows in (396, 528, 792, 1056, 1584, 2112):
                for dtype, op in (("bfloat16", "softmax"), ("float16", "log_softmax")):
                    if time.time() - T0 > LIMIT:
                        print("time limit", flush=True)
                        return
                    sh = V.Shape(rows, cols, cols, cols, 0, 0, 2, dtype, op)
                    auto = V.preferences(sh, dev)[0]
                    sr = V.single_read_plan(cols, dev, rows, dtype, op)
                    cr = V.cluster_row_plan(cols, dev, rows, 2, 1)
                    plans = [(f"auto:{auto.name}:{sr.label()}", lambda sh=sh, a=auto: a.prepare(sh, dev)),
                             (f"cluster_row:{cr.label() if cr else None}",
                              lambda sh=sh: V.get_variant("cluster_row").prepare(sh, dev))]
                    job(rows, cols, dtype, op, plans, dev)


if __name__ == "__main__":
    main()
