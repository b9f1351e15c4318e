"""Probe 66 (run with the rule's first version, before HALVES_MERGE_MIN_HELD and the order after
cluster_row): auto with the halves' memory-merged groups at two blocks per SM (HALVES_MERGE_BLOCKS_PER_SM)
against the plans it replaces (the packed or wide cluster at one block per SM, and cluster_row where auto
took it at few rows), float16 and bfloat16 softmax and log_softmax past 393216 columns, from 132 rows up;
p64's harness (÷ the faster of two torch copy_ timings, each plan twice).
PYTHONPATH=. python3 notes/tune-runs/2026-12-02-halves-groups-auto-p66.py"""
import sys

import softmax_lab

V = sys.modules["softmax_lab.variants"]


def tm(call, nsets, reps=9):
    """p64's timing: CUDA events around max(6, nsets) calls back to back, (median, 2nd, 8th) of 9."""
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

L2 = 60 * 2**20
JOBS = [(r, c, d, op) for r, c in ((4096, 400000), (4096, 600001), (1024, 500000), (528, 786432), (264, 500000),
                                   (264, 700000), (132, 700000), (16384, 400000))
        for d, op in (("bfloat16", "softmax"), ("float16", "log_softmax"))]


def old_plan(cols, dev, rows, dtype, op):
    """single_read_plan before the rule: the wide or packed cluster."""
    it = V.DTYPES[dtype]
    packed = V.single_read_config(cols, dev, rows, it, one_block_cost=V.HALVES_ONE_BLOCK_COST)
    wide = V.single_read_config(cols, dev, rows, it, wide=True, one_block_cost=V.HALVES_ONE_BLOCK_COST) \
        if V.holds_wide(dtype, op) else None
    return wide if wide is not None and V._wide_beats(wide, packed) else packed


def main():
    import torch
    dev = softmax_lab.device_info()
    import cupy as cp
    stream = cp.cuda.Stream.null
    print(dev.name, flush=True)
    for rows, cols, dtype, op in JOBS:
        if rows * cols * 2 * 2 > 60e9:
            continue
        torch.manual_seed(rows + cols)
        sh = V.Shape(rows, cols, cols, cols, 0, 0, 2, dtype, op)
        nsets = max(1, min(8, -(-4 * L2 // (2 * rows * cols * 2))))
        xs = [(torch.randn(rows, cols, device="cuda") * 3).to(getattr(torch, dtype)) for _ in range(nsets)]
        ys = [torch.empty_like(xs[0]) for _ in range(nsets)]
        first = tm(lambda i: ys[i].copy_(xs[i]), nsets)[0]
        want = (torch.softmax if op == "softmax" else torch.log_softmax)(xs[0][:64].double(), -1)
        auto = V.preferences(sh, dev)
        plans = [(f"auto:{auto[0].name}:{V.single_read_plan(cols, dev, rows, dtype, op).label()}", lambda: auto[0].prepare(sh, dev)),
                 ("old sr" + old_plan(cols, dev, rows, dtype, op).label(),
                  lambda: V.get_variant("single_read").prepare(sh, dev, config=old_plan(cols, dev, rows, dtype, op))),
                 ("cluster_row", lambda: V.get_variant("cluster_row").prepare(sh, dev)),
                 ("multi_block_l2", lambda: V.get_variant("multi_block_l2").prepare(sh, dev))]
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
                    bad = '' if err < 2e-2 else f' BAD {err:.2g}'
                    res.append((t[0], t[1], t[2], label, bad))
                except Exception as e:  # noqa: BLE001
                    res.append((9e9, 0, 0, label, f" ERR {str(e)[:80]}"))
                torch.cuda.synchronize()
        floor = min(first, tm(lambda i: ys[i].copy_(xs[i]), nsets)[0])
        res.sort()
        print(f"{rows}x{cols} {dtype} {op} (copy {floor * 1e3:.0f} us, first {first / floor:.3f}): " + " | ".join(
            f"{lab} {a / floor:.3f} ({b / floor:.3f}-{c / floor:.3f}){bad}" for a, b, c, lab, bad in res), flush=True)
        xs = ys = want = None
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
