"""Probe 94 (2026-12-03): held loads predicated inside their asm, against main's branch per load.
ncu (probe 93) showed cluster_row's float32 backward executing 2.7 x quack's instructions at the
same decomposition (1002 a warp against 371): each held load (`j < count ? load : pad` around an
asm load) became a branch region (BSSY / BRA / BSYNC) with a fresh createpolicy, and dy's loads
chose between vector and scalar per vector.  The change (-predicated-loads-p94.patch, applied to
the tree this runs on): load_vec_if, the predicate inside the asm, the policy made once; dy's
aligned case chosen once per thread.  Same plans, old build (main's kernels/, reverse-patched into
/tmp/kernels-old) against new, auto's variant for each shape (and multi_block_l2 forced once),
quack's softmax_bwd where it runs, four rounds in turn, each ÷ its floor timed in its round (a
torch copy_ forward, torch.add(y, dy, out=dx) backward); every output checked against float64 on 32
rows first.
Decision, fixed before the run: new becomes main's where no shape's median is behind old's by more
than 0.5 %; it is simpler code, so level is enough.
  cp -r kernels /tmp/kernels-old && (cd /tmp/kernels-old && patch -R -p2 < $PWD/notes/tune-runs/2026-12-03-predicated-loads-p94.patch)
  PYTHONPATH=.:<quack> python3 notes/tune-runs/2026-12-03-predicated-loads-p94.py [seconds]
Ran 2026-12-03 13:41 UTC (-predicated-loads-p94.txt, without quack): new ahead or level at all 15
shapes (float32 backward 4096 x 196608 1.015 -> 1.007, 132 x 151936 1.118 -> 1.070; forward float32
132 x 393216 1.095 -> 1.054, bf16 4096 x 151936 1.057 -> 1.035, 132 x 393216 1.107 -> 1.079; the
rest within 0.002): taken (the commit after)."""
import pathlib
import sys
import time

import cupy

import softmax_lab
from softmax_lab import loader

LIMIT = float(sys.argv[1]) if len(sys.argv) > 1 else 240
sys.argv = sys.argv[:1]
sys.path.insert(0, "notes/tune-runs")
p67 = __import__("2026-12-02-halves-group-or-cluster-p67")
V = sys.modules["softmax_lab.variants"]
T0 = time.time()
OLD_DIR = pathlib.Path("/tmp/kernels-old")
BACKWARD = [(4096, 151936, "float32", "softmax_backward"), (4096, 196608, "float32", "softmax_backward"),
            (4096, 151936, "float32", "log_softmax_backward"), (132, 151936, "float32", "softmax_backward"),
            (8192, 65536, "float32", "softmax_backward"), (4096, 65536, "bfloat16", "softmax_backward")]
FORWARD = [(4096, 151936, "float32", "softmax", None), (132, 151936, "float32", "softmax", None),
           (16384, 32000, "float32", "softmax", None), (132, 393216, "float32", "softmax", None),
           (4096, 151936, "bfloat16", "softmax", None), (132, 393216, "bfloat16", "softmax", None),
           (8192, 65536, "bfloat16", "softmax", None), (4096, 128256, "float16", "log_softmax", None),
           (128, 1 << 20, "float32", "softmax", "multi_block_l2")]
_get_kernel = loader.get_kernel
_kernel_dir = loader.kernel_dir
OLD = [False]


def get_kernel(filename, entry, defines=None, device_id=0):
    if not OLD[0]:
        return _get_kernel(filename, entry, defines, device_id)
    loader.kernel_dir = lambda: OLD_DIR
    loader.kernel_source.cache_clear()
    try:
        return _get_kernel(filename, entry, (defines or {}) | {"PROBE_OLD_KERNELS": 1}, device_id)
    finally:
        loader.kernel_dir = _kernel_dir
        loader.kernel_source.cache_clear()


loader.get_kernel = get_kernel


def both(prepare):
    launches = {}
    for label, old in (("old", True), ("new", False)):
        OLD[0] = old
        try:
            launches[label] = prepare()
        finally:
            OLD[0] = False
    return launches


def rounds(calls, floor_call, nsets, title):
    res = {name: [] for name in calls}
    for _ in range(4):
        for name, call in calls.items():
            floor = p67.tm(floor_call, nsets)[0]
            res[name].append(p67.tm(call, nsets)[0] / floor)
    print(title + ": " + " | ".join(f"{n} " + " ".join(f"{v:.3f}" for v in vals)
                                    + f" (median {sorted(vals)[len(vals) // 2]:.3f})" for n, vals in res.items()),
          flush=True)


def error(out, want):
    return ((out.double() - want).abs().max() / want.abs().max()).nan_to_num(1e9).item()


def backward(dev, r, c, dtype, op):
    import torch
    torch.manual_seed(r + c)
    x = torch.randn(r, c, device="cuda") * 3
    y = (torch.softmax(x, -1) if op == "softmax_backward" else torch.log_softmax(x, -1)).to(getattr(torch, dtype))
    del x
    dy = torch.randn(r, c, device="cuda").to(getattr(torch, dtype))
    dx = torch.empty_like(y)
    y64, g64 = y[:32].double(), dy[:32].double()
    want = y64 * (g64 - (g64 * y64).sum(-1, keepdim=True)) if op == "softmax_backward" else \
        g64 - y64.exp() * g64.sum(-1, keepdim=True)
    sh = V.Shape(r, c, c, c, 0, 0, V.DTYPES[dtype], dtype, op, c, 0)
    variant = V.preferences(sh, dev)[0]
    stream = cupy.cuda.Stream.null
    calls = {k: (lambda i, f=f: f(y.data_ptr(), dx.data_ptr(), stream, dy.data_ptr()))
             for k, f in both(lambda: variant.prepare(sh, dev)).items()}
    try:
        from quack.softmax import softmax_bwd
        if op == "softmax_backward" and dtype == "float32":
            calls["quack"] = lambda i: softmax_bwd(dy, y)
    except ImportError:
        pass
    for name, call in calls.items():
        dx.fill_(float("nan"))
        out = call(0)
        out = out if name == "quack" else dx
        torch.cuda.synchronize()
        print(f"  {name} max error / max {error(out[:32], want):.2g}", flush=True)
    rounds(calls, lambda i: torch.add(y, dy, out=dx), 1, f"{r}x{c} {dtype} {op} ({variant.name}) ÷ add")


def forward(dev, r, c, dtype, op, name):
    import torch
    torch.manual_seed(r + c)
    nsets = max(1, min(8, -(-4 * (60 << 20) // (2 * r * c * V.DTYPES[dtype]))))
    xs = [(torch.randn(r, c, device="cuda") * 3).to(getattr(torch, dtype)) for _ in range(nsets)]
    ys = [torch.empty_like(xs[0]) for _ in range(nsets)]
    want = (torch.softmax if op == "softmax" else torch.log_softmax)(xs[0][:32].double(), -1)
    sh = V.Shape(r, c, c, c, 0, 0, V.DTYPES[dtype], dtype, op)
    variant = V.get_variant(name) if name else V.preferences(sh, dev)[0]
    stream = cupy.cuda.Stream.null
    calls = {k: (lambda i, f=f: f(xs[i].data_ptr(), ys[i].data_ptr(), stream))
             for k, f in both(lambda: variant.prepare(sh, dev)).items()}
    for label, call in calls.items():
        ys[0].fill_(float("nan"))
        call(0)
        torch.cuda.synchronize()
        print(f"  {label} max error / max {error(ys[0][:32], want):.2g}", flush=True)
    rounds(calls, lambda i: ys[i].copy_(xs[i]), nsets, f"{r}x{c} {dtype} {op} ({variant.name}) ÷ copy")


def main():
    import torch
    dev = softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    for job, args in [(backward, s) for s in BACKWARD] + [(forward, s) for s in FORWARD]:
        if time.time() - T0 > LIMIT:
            return print("time limit", flush=True)
        job(dev, *args)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
