"""Probe 65: memory-merged groups for the halves' log_softmax (p64: bf16 4096 x 393216 8x256x24x1x2m 0.970
against the plan's clusters 8x256x24x1x2 0.993): the plan, its blocks as a memory-merged group (every block
slot filled: 33 groups of 8 at two per SM against 30 resident clusters), and the smallest group filling 95 %
of the slots at one and two blocks per SM; bf16 and fp16 log_softmax over row lengths, and bf16 softmax past
393216.  p64's harness; the copy timed before and after, the faster taken.
PYTHONPATH=. python3 notes/tune-runs/2026-12-02-memory-merge-halves-log-p65.py [list | spills]"""
import sys

import softmax_lab  # noqa: F401
from softmax_lab import loader

V = sys.modules["softmax_lab.variants"]
L2 = 60 * 2**20
JOBS = [(r, c, d, "log_softmax") for d in ("bfloat16", "float16")
        for r, c in ((4096, 393216), (1024, 393216), (4096, 300000), (4096, 262144), (4096, 200003),
                     (4096, 151936), (4096, 500000), (2048, 786432))] + \
    [(4096, 500000, "bfloat16", "softmax"), (2048, 786432, "bfloat16", "softmax")]


def candidates(rows, cols, dtype, op, dev):
    """The plan, the plan's blocks as a memory-merged group, and the smallest group of
    each block count per SM that fills 95 % of the SMs' block slots."""
    it = V.DTYPES[dtype]
    vecs = V._row_vecs(cols, it)
    plan = V.single_read_plan(cols, dev, rows, dtype, op)
    out = [plan] if plan is not None else []
    if plan is not None and plan.cluster > 1:
        out.append(V.ClusterConfig(plan.cluster, plan.threads, plan.vpt, 1, plan.blocks_per_sm, memory_merge=True))
    for bps in (1, 2):
        slots = dev.sm_count * bps
        for g in range(2, 33):
            if slots // g * g < 0.95 * slots:
                continue
            target = V.MAX_VPT if bps == 2 else V.VPT_TARGET
            shape = V.block_shape(-(-vecs // g), bps, target, 2, V._smem_budget(dev, bps), it, 1, False)
            if shape is None or g > shape[0]:
                continue
            try:
                out.append(V.ClusterConfig(g, *shape, 1, bps, memory_merge=True))
                break
            except ValueError:
                pass
    return list(dict.fromkeys(out))


def defines_of(q, dtype, op, dev):
    return q.defines(dev) | V.kernel_defines(dtype, op)


if __name__ == "__main__" and len(sys.argv) > 1:
    dev = V._H200
    for job in JOBS:
        qs = candidates(*job, dev)
        if sys.argv[1] == "list":
            print(job, [q.label() for q in qs])
        else:
            for q in qs:
                cubin, log = loader.nvrtc_cubin("single_read.cu", "sm_90", defines_of(q, job[2], job[3], dev),
                                                ("-Xptxas=-v",))
                spill = [ln for ln in log.splitlines() if "spill" in ln and not " 0 bytes spill stores" in ln]
                regs = [ln.split("Used")[1].split(",")[0] for ln in log.splitlines() if "Used" in ln]
                print(job, q.label(), regs, spill[:1], flush=True)
    sys.exit()


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


def run(rows, cols, dtype, op, dev, stream):
    import torch
    TD = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    torch.manual_seed(rows + cols)
    it = V.DTYPES[dtype]
    sh = V.Shape(rows, cols, cols, cols, 0, 0, it, dtype, op)
    auto = V.preferences(sh, dev)[0]
    nsets = max(1, min(8, -(-4 * L2 // (2 * rows * cols * it))))
    xs = [(torch.randn(rows, cols, device="cuda") * 3).to(TD[dtype]) for _ in range(nsets)]
    ys = [torch.empty_like(xs[0]) for _ in range(nsets)]
    floor = tm(lambda i: ys[i].copy_(xs[i]), nsets)[0]
    first_floor = floor
    want = (torch.softmax if op == "softmax" else torch.log_softmax)(xs[0].double(), -1)
    res = []
    for rep in range(2):
        plans = [(f"auto:{auto.name}", None)] + [("sr" + q.label(), q) for q in candidates(rows, cols, dtype, op, dev)]
        for label, q in plans:
            try:
                launch = auto.prepare(sh, dev) if q is None else V.get_variant("single_read").prepare(sh, dev, config=q)
                call = lambda i: launch(xs[i].data_ptr(), ys[i].data_ptr(), stream)  # noqa: E731
                ys[0].fill_(float("nan"))
                call(0)
                torch.cuda.synchronize()
                err = ((ys[0].double() - want).abs().max() / want.abs().max()).nan_to_num(1e9).item()
                t = tm(call, nsets)
                bad = '' if err < (1e-5 if it == 4 else 2e-2) else f' BAD {err:.2g}'
                res.append((t[0] / floor, f"{label} {t[0] / floor:.3f} ({t[1] / floor:.3f}-{t[2] / floor:.3f}){bad}"))
            except Exception as e:  # noqa: BLE001
                res.append((9, f"{label} ERR {str(e)[:100]}"))
            torch.cuda.synchronize()
    floor = min(first_floor, tm(lambda i: ys[i].copy_(xs[i]), nsets)[0])
    res = [(t * first_floor / floor, txt + f' [x{first_floor / floor:.3f}]') for t, txt in res]
    res.sort()
    print(f"{rows}x{cols} {dtype} {op} (copy {floor * 1e3:.0f} us): " + " | ".join(s for _, s in res), flush=True)
    xs = ys = want = None  # noqa: F841  (frees the buffers before the next job)
    torch.cuda.empty_cache()


def main():
    from concurrent.futures import ThreadPoolExecutor
    import cupy as cp
    dev = softmax_lab.device_info()
    print(dev.name, flush=True)
    todo = {(tuple(sorted(defines_of(q, d, op, dev).items()))) for r, c, d, op in JOBS for q in candidates(r, c, d, op, dev)}

    def build(t):
        try:
            loader.get_kernel("single_read.cu", "single_read", dict(t), device_id=dev.id)
        except Exception as e:  # noqa: BLE001
            print("build failed", t, str(e)[:200])
    with ThreadPoolExecutor(14) as pool:
        list(pool.map(build, todo))
    print("built", len(todo), flush=True)
    for job in JOBS:
        run(*job, dev, cp.cuda.Stream.null)


if __name__ == "__main__":
    main()
