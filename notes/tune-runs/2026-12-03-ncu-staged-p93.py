"""Probe 93 (2026-12-03): ncu of what probes 91-92 left unexplained, and of the 4M-column forward.
One launch of each (after three unprofiled ones) inside an NVTX range "prof", so that ncu profiles
only those:
  float32 4096 x 196608 softmax backward: cluster_row's plan loaded into registers (main), the same
  plan staged through shared memory (-staged-backward-p91.patch: 10-25 % slower in p91-p92), and
  quack's softmax_bwd, which stages the same way at the same decomposition and is not slower;
  float32 32 x 4194304 softmax: auto (multi_block_smem's one group, 1.35 x copy; target 1.35).
Needs -staged-backward-p91.patch applied, quack on PYTHONPATH:
  ncu --nvtx --nvtx-include "prof/" --set full -o $OUT/p93 python3 notes/tune-runs/2026-12-03-ncu-staged-p93.py"""
import dataclasses
import sys
import time

import cupy

import softmax_lab

V = sys.modules["softmax_lab.variants"]


def profiled(label, call):
    import torch
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("prof")
    call()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    print("profiled", label, flush=True)


def backward(dev, r, c):
    import torch
    torch.manual_seed(0)
    y = torch.softmax(torch.randn(r, c, device="cuda") * 3, -1)
    dy = torch.randn(r, c, device="cuda")
    dx = torch.empty_like(y)
    sh = V.Shape(r, c, c, c, 0, 0, 4, "float32", "softmax_backward", c, 0)
    plan = V.cluster_row_plan(c, dev, r, 4, 2)
    for staged in (False, True):
        p = dataclasses.replace(plan, staged=staged)
        launch = V.get_variant("cluster_row").prepare(sh, dev, plan=p)
        profiled(f"{r}x{c} backward cluster_row {p.label()}",
                 lambda launch=launch: launch(y.data_ptr(), dx.data_ptr(), cupy.cuda.Stream.null, dy.data_ptr()))
    from quack.softmax import softmax_bwd
    profiled(f"{r}x{c} backward quack", lambda: softmax_bwd(dy, y))


def main():
    import torch
    dev = softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    backward(dev, 4096, 196608)
    torch.cuda.empty_cache()
    x = torch.randn(32, 1 << 22, device="cuda") * 3
    out = torch.empty_like(x)
    profiled("32x4194304 softmax auto", lambda: softmax_lab.softmax(x, out=out))


if __name__ == "__main__":
    main()
