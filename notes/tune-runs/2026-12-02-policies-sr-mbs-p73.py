"""Probe 73: the L2 policies of auto's plan (single_read, cluster_row or multi_block_smem as it
picks) at the dtype tables' shapes and past a cluster: every 16-byte store evict-last, evict-first
(.cs) or plain (SOFTMAX_STORE_OVERRIDE), every bulk copy evict-first, evict-last or evict-normal
(SOFTMAX_COPY_OVERRIDE), against each kernel's own (none).  p64's harness (p67's job).
With -policies-p73.patch applied: PYTHONPATH=. python3 notes/tune-runs/2026-12-02-policies-sr-mbs-p73.py [seconds]"""
import sys
import time

import softmax_lab
from softmax_lab import loader

sys.path.insert(0, "notes/tune-runs")
p67 = __import__("2026-12-02-halves-group-or-cluster-p67")
V = sys.modules["softmax_lab.variants"]
T0 = time.time()
LIMIT = float(sys.argv[1]) if len(sys.argv) > 1 else 400
EXTRA = {}
_get_kernel = loader.get_kernel


def get_kernel(filename, entry, defines=None, device_id=0):
    return _get_kernel(filename, entry, (defines or {}) | EXTRA, device_id)


loader.get_kernel = get_kernel
STORES = {"cs": 0, "last": 1, "plain": 2}
COPIES = {"first": 0, "last": 1, "normal": 2}
HELD = [(4096, 151936, "float32", "softmax"), (4096, 393216, "float32", "softmax"),
        (4096, 393216, "bfloat16", "softmax"), (4096, 393216, "float16", "softmax"),
        (4096, 393216, "bfloat16", "log_softmax"), (4096, 393216, "float16", "log_softmax"),
        (4096, 151936, "bfloat16", "softmax"), (4096, 151936, "float16", "softmax"),
        (4096, 151936, "float16", "log_softmax"), (4096, 128256, "float32", "softmax"),
        (4096, 100003, "bfloat16", "softmax"), (1024, 393216, "float32", "softmax")]
HELD_POLICIES = [(), (("store", "plain"),), (("store", "cs"),), (("copy", "normal"),),
                 (("store", "plain"), ("copy", "normal"))]
LONG = [(132, 1 << 22, "float32", "softmax"), (32, 1 << 22, "float32", "softmax"),
        (132, 1 << 20, "float32", "softmax"), (1024, 1 << 20, "float32", "softmax"),
        (132, 1 << 20, "bfloat16", "softmax"), (132, 1 << 22, "bfloat16", "softmax"),
        (512, 1 << 20, "float16", "log_softmax"), (600, 1500001, "float32", "softmax")]
LONG_POLICIES = [(), (("copy", "last"),), (("copy", "normal"),), (("store", "plain"),), (("store", "last"),),
                 (("copy", "last"), ("store", "plain")), (("copy", "normal"), ("store", "plain"))]


def overridden(make, policy):
    def build():
        EXTRA.clear()
        for kind, name in policy:
            EXTRA["SOFTMAX_STORE_OVERRIDE" if kind == "store" else "SOFTMAX_COPY_OVERRIDE"] = \
                (STORES if kind == "store" else COPIES)[name]
        try:
            return make()
        finally:
            EXTRA.clear()
    return build


def main():
    dev = softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    for shapes, policies in ((HELD, HELD_POLICIES), (LONG, LONG_POLICIES)):
        for rows, cols, dtype, op in shapes:
            if time.time() - T0 > LIMIT:
                print("time limit", flush=True)
                return
            sh = V.Shape(rows, cols, cols, cols, 0, 0, V.DTYPES[dtype], dtype, op)
            auto = V.preferences(sh, dev)[0]
            plans = [(f"{auto.name}:" + (",".join(f"{k}={n}" for k, n in pol) or "own"),
                      overridden(lambda sh=sh, a=auto: a.prepare(sh, dev), pol)) for pol in policies]
            p67.job(rows, cols, dtype, op, plans, dev)


if __name__ == "__main__":
    main()
