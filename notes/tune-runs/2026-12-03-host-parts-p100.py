"""Probe 100 (2026-12-03): where the host time of softmax(x, out=y) on torch tensors goes (8 x 1024 float32 and
bf16): each part of the repeated-call path in a loop of its own (median of 5 loops of 20000 calls after 500,
host clock; the launches synchronised once per loop), against torch.softmax and torch.empty_like.
  PYTHONPATH=. python3 notes/tune-runs/2026-12-03-host-parts-p100.py"""
import time

import cupy
import numpy as np
import torch

import softmax_lab
from softmax_lab import api


def loop(f, n=20000):
    for _ in range(500):
        f()
    torch.cuda.synchronize()
    out = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            f()
        torch.cuda.synchronize()
        out.append((time.perf_counter() - t) / n * 1e6)
    return np.median(out), min(out), max(out)


print(torch.cuda.get_device_name(), time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
for dtype in (torch.float32, torch.bfloat16):
    x = torch.randn(8, 1024, device="cuda").to(dtype)
    y = torch.empty_like(x)
    softmax_lab.softmax(x, out=y)
    kx, ko = api._key(x), api._key(y)
    hit = api._calls[api._call_key(kx, ko, 1, "auto", "softmax", None)]
    call = hit[0]
    stream = api._current_stream(True, 0)
    parts = [
        ("softmax_lab.softmax(x, out=y)", lambda: softmax_lab.softmax(x, out=y)),
        ("api._repeat_call(x, -1, 'auto', y)", lambda: api._repeat_call(x, -1, "auto", y)),
        ("the cached call(x_ptr, y, y_ptr, None)", lambda: call(kx[0], y, ko[0], None)),
        ("the cached call on a given stream", lambda: call(kx[0], y, ko[0], None, stream)),
        ("api._key(x)", lambda: api._key(x)),
        ("x.data_ptr()", lambda: x.data_ptr()),
        ("x.is_cuda", lambda: x.is_cuda),
        ("x.device.index", lambda: x.device.index),
        ("x.get_device()", lambda: x.get_device()),
        ("x.shape, x.stride()", lambda: (x.shape, x.stride())),
        ("api._call_key(...)", lambda: api._call_key(kx, ko, 1, "auto", "softmax", None)),
        ("cupy.cuda.runtime.getDevice()", lambda: cupy.cuda.runtime.getDevice()),
        ("api._torch_raw_stream(0)", lambda: api._torch_raw_stream(0)),
        ("api._current_stream(True, 0)", lambda: api._current_stream(True, 0)),
        ("torch.softmax(x, -1)", lambda: torch.softmax(x, -1)),
        ("torch.softmax(x, -1, out=...)", lambda: torch._softmax(x, -1, False)),
        ("torch.empty_like(x)", lambda: torch.empty_like(x)),
    ]
    for name, f in parts:
        med, lo, hi = loop(f)
        print(f"{str(dtype):16s} {name:42s} {med:6.2f} us (loops {lo:.2f}-{hi:.2f})", flush=True)
