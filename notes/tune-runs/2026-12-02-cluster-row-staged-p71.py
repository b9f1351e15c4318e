"""Probe 71: cluster_row's forward loads staged through shared memory (CR_STAGED 1: cp.async per
vector, quack's way; 2: one bulk copy of the block's slice) against loads into registers (0), at the
grid's shapes where quack leads at cluster_row's (or quack's) own decomposition; quack beside.
p64's harness (p67's job).  with -staged-p71.patch applied: PYTHONPATH=. python3 notes/tune-runs/2026-12-02-cluster-row-staged-p71.py [seconds]"""
import sys
import time

import softmax_lab

sys.path.insert(0, "notes/tune-runs")
p67 = __import__("2026-12-02-halves-group-or-cluster-p67")
V = sys.modules["softmax_lab.variants"]
T0 = time.time()
LIMIT = float(sys.argv[1]) if len(sys.argv) > 1 else 400
# (rows, cols, dtype, op, cluster_row block shapes (cluster, threads, vpt, blocks per SM) to stage)
SHAPES = [(4096, 151936, "float32", "softmax", [(8, 256, 19, 2), (16, 256, 10, 4)]),
          (132, 151936, "float32", "softmax", [(16, 256, 10, 4), (8, 256, 19, 2)]),
          (4096, 128256, "bfloat16", "softmax", [(8, 256, 8, 4)]),
          (132, 393216, "bfloat16", "softmax", [(16, 256, 12, 3)]),
          (2048, 262144, "bfloat16", "softmax", [(16, 256, 8, 4)]),
          (132, 262144, "bfloat16", "softmax", [(16, 256, 8, 4)]),
          (8192, 65536, "float32", "softmax", [(4, 256, 16, 2), (8, 256, 8, 4)]),
          (4096, 128256, "float16", "log_softmax", [(8, 256, 8, 4)]),
          (4096, 151936, "bfloat16", "softmax", [(8, 256, 10, 3), (16, 256, 5, 4)]),
          (16384, 32000, "float32", "softmax", [(2, 256, 16, 2)])]


def quack_plan():
    try:
        from quack.softmax import softmax_fwd
    except Exception as e:  # noqa: BLE001
        print("no quack:", str(e)[:100], flush=True)
        return None
    return softmax_fwd


def quack_launch(qf, sh):
    """quack's softmax_fwd on the torch tensor at x (its own output: the harness's check fails it)."""
    import cupy
    import torch
    tensors = {}

    def launch(x, y, stream):
        t = tensors.get(x)
        if t is None:
            mem = cupy.cuda.UnownedMemory(x, sh.rows * sh.cols * sh.itemsize, None)
            a = cupy.ndarray((sh.rows, sh.cols), cupy.uint16 if sh.itemsize == 2 else cupy.float32,
                             cupy.cuda.MemoryPointer(mem, 0))
            t = tensors[x] = torch.as_tensor(a, device="cuda").view(getattr(torch, sh.dtype))
        qf(t)
    return launch


def main():
    dev = softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    cr = V.get_variant("cluster_row")
    qf = quack_plan()
    for rows, cols, dtype, op, blocks in SHAPES:
        if time.time() - T0 > LIMIT:
            print("time limit", flush=True)
            return
        sh = V.Shape(rows, cols, cols, cols, 0, 0, V.DTYPES[dtype], dtype, op)
        auto = V.preferences(sh, dev)[0]
        plans = [(f"auto:{auto.name}", lambda sh=sh, a=auto: a.prepare(sh, dev))]
        for c, t, v, b in blocks:
            for st in (0, 1, 2):
                stream = V.cluster_row_plan(cols, dev, rows, V.DTYPES[dtype]).stream_loads
                plan = V.RowClusterPlan(c, t, v, b, stream, t * v * 16 if st else 0, st)
                plans.append((plan.label(), lambda sh=sh, plan=plan: cr.prepare(sh, dev, plan=plan)))
        if qf is not None and op == "softmax":
            plans.append(("quack (output unchecked)", lambda sh=sh: quack_launch(qf, sh)))
        p67.job(rows, cols, dtype, op, plans, dev)


if __name__ == "__main__":
    main()
