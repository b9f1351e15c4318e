"""Probe 74: the L2 policies as landed (multi_block_smem: evict-last copies, evict-normal stores;
single_read's aligned stores evict-first for float32 and log_softmax) against the builds before
(MBS_COPY_LAST=0 MBS_STORE=0 (STORE_FIRST); SR_STORE=1 (STORE_LAST)), auto's plans.  p64's harness
(p67's job), p73's define override.  Ran on main's store policies with STORE_NORMAL as an asm
st.global.v4 (landed: a plain C++ store) and -p74-single-read.patch (SR_STORE; not landed):
PYTHONPATH=. python3 notes/tune-runs/2026-12-02-policies-landed-p74.py [s]"""
import sys
import time

import softmax_lab

sys.path.insert(0, "notes/tune-runs")
p67 = __import__("2026-12-02-halves-group-or-cluster-p67")
p73 = __import__("2026-12-02-policies-sr-mbs-p73")
V = sys.modules["softmax_lab.variants"]
T0 = time.time()
LIMIT = float(sys.argv[1]) if len(sys.argv) > 1 else 200
BEFORE = {"multi_block_smem": {"MBS_COPY_LAST": 0, "MBS_STORE": 0}, "single_read": {"SR_STORE": 1}}
SHAPES = [(32, 1 << 22, "float32", "softmax"), (132, 1 << 22, "float32", "softmax"),
          (128, 1 << 22, "float32", "softmax"), (64, 1 << 21, "float32", "softmax"),
          (132, 1 << 20, "float32", "softmax"), (512, 1 << 20, "float32", "softmax"),
          (1024, 1 << 20, "float32", "softmax"), (32, 1 << 20, "bfloat16", "softmax"),
          (132, 1 << 20, "bfloat16", "softmax"), (1024, 1 << 20, "bfloat16", "softmax"),
          (132, 1 << 22, "bfloat16", "softmax"), (132, 1 << 20, "float16", "log_softmax"),
          (600, 1500001, "bfloat16", "softmax"), (132, 1 << 20, "float32", "log_softmax"),
          (4096, 151936, "float32", "softmax"), (4096, 393216, "float32", "softmax"),
          (4096, 128256, "float32", "softmax"), (1024, 393216, "float32", "softmax"),
          (4096, 393216, "bfloat16", "log_softmax"), (4096, 393216, "float16", "log_softmax"),
          (4096, 151936, "float16", "log_softmax"), (2048, 262144, "bfloat16", "log_softmax"),
          (4096, 100003, "float32", "softmax"), (4096, 200000, "float32", "log_softmax"),
          (1056, 151936, "float32", "softmax")]


def with_defines(make, defines):
    def build():
        p73.EXTRA.clear()
        p73.EXTRA.update(defines)
        try:
            return make()
        finally:
            p73.EXTRA.clear()
    return build


def main():
    dev = softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    for rows, cols, dtype, op in SHAPES:
        if time.time() - T0 > LIMIT:
            print("time limit", flush=True)
            return
        sh = V.Shape(rows, cols, cols, cols, 0, 0, V.DTYPES[dtype], dtype, op)
        auto = V.preferences(sh, dev)[0]
        make = lambda sh=sh, a=auto: a.prepare(sh, dev)  # noqa: E731
        plans = [(f"{auto.name}:now", make)]
        if auto.name in BEFORE:
            plans.append((f"{auto.name}:before", with_defines(make, BEFORE[auto.name])))
        p67.job(rows, cols, dtype, op, plans, dev)


if __name__ == "__main__":
    main()
