"""Probe 96 (2026-12-03): two changes, each behind a define whose default is main's (the patch
-early-fill-warp-loads-p96.patch), against main's build in the same run.
1. multi_block_smem refills a slot as soon as its chunk is in registers, before the chunk's
   stores (MBS_EARLY_FILL 1), not after them: at 4M float32 columns the one group's ring holds
   1.84 rows, so a row completes only after slots freed by the row before are refilled; the
   stores' issue (8 x 16 bytes a thread under DRAM write pressure) sat on that path.
2. single_read's warp-per-row loads (SR_WARP_LOADS): 0 main's branch per load, 1 predicated in
   the asm (probe 95: bf16 200000 x 3001 1.044 -> 0.992, fp16 log_softmax 65536 x 8192 1.002 ->
   1.011), 2 unpredicated where the row fills every slot of the warp(s), else predicated.
p67's `job` (CUDA events around max(6, sets) calls back to back, median of 9, each plan twice,
every output checked against float64 on 64 rows first; ÷ the faster of two torch copy_ timings).
Decision, fixed before the run: (1) lands where no shape's median is behind main's by more than
0.5 % and the 4M shapes gain; (2) the mode with no shape behind main's by more than 0.5 % and the
most gain, else neither.
  PYTHONPATH=. python3 notes/tune-runs/2026-12-03-early-fill-warp-loads-p96.py [seconds]
Ran 2026-12-03 14:41 UTC (-early-fill-warp-loads-p96.txt): (1) the one group at 4M behind by 0.5-1 %,
the split ahead by 4-5 % at 2.4 rows held and behind by 3-4 % at 3.6-6.2 (probe 97 then measured by
rows held); (2) each load form 2-5 % ahead somewhere and 4-13 % behind elsewhere: main's kept."""
import sys
import time

import softmax_lab
from softmax_lab import loader

LIMIT = float(sys.argv[1]) if len(sys.argv) > 1 else 300
sys.argv = sys.argv[:1]
sys.path.insert(0, "notes/tune-runs")
p67 = __import__("2026-12-02-halves-group-or-cluster-p67")
V = sys.modules["softmax_lab.variants"]
T0 = time.time()
EXTRA = {}  # filename -> defines added to its builds
_get_kernel = loader.get_kernel


def get_kernel(filename, entry, defines=None, device_id=0):
    return _get_kernel(filename, entry, (defines or {}) | EXTRA.get(filename, {}), device_id)


loader.get_kernel = get_kernel
MBS = [(32, 4194304, "float32", "softmax"), (132, 4194304, "float32", "softmax"), (128, 4194304, "float32", "softmax"),
       (32, 4194304, "float32", "log_softmax"), (132, 1048576, "float32", "softmax"),
       (64, 2097152, "float32", "softmax"), (132, 3145728, "float32", "softmax"),
       (132, 6291456, "bfloat16", "softmax"), (512, 1048576, "float32", "softmax")]
WARP = [(200000, 3001, "bfloat16", "softmax"), (65536, 8192, "float16", "log_softmax"),
        (200000, 3001, "float32", "softmax"), (524288, 1024, "float32", "softmax"),
        (262144, 2048, "float32", "log_softmax"), (524288, 1024, "bfloat16", "softmax"),
        (131072, 4096, "bfloat16", "softmax"), (100000, 5003, "float16", "log_softmax"),
        (262144, 1000, "bfloat16", "softmax"), (200000, 2047, "float32", "softmax"),
        (300000, 2047, "bfloat16", "softmax"), (2112, 8191, "bfloat16", "softmax")]


def with_defines(filename, defines, prepare):
    def make():
        EXTRA[filename] = defines
        try:
            return prepare()
        finally:
            EXTRA.pop(filename, None)
    return make


def main():
    dev = softmax_lab.device_info()
    print(dev.name, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    jobs = [("mbs", s) for s in MBS[:4]] + [("warp", s) for s in WARP[:6]] + [("mbs", s) for s in MBS[4:]] + \
        [("warp", s) for s in WARP[6:]]
    for kind, (rows, cols, dtype, op) in jobs:
        if time.time() - T0 > LIMIT:
            return print("time limit", flush=True)
        sh = V.Shape(rows, cols, cols, cols, 0, 0, V.DTYPES[dtype], dtype, op)
        auto = V.preferences(sh, dev)[0].name
        if kind == "mbs":
            variant = V.get_variant("multi_block_smem")
            plans = [(f"{m} (auto: {auto})", with_defines("multi_block_smem.cu", {"MBS_EARLY_FILL": e},
                                                           lambda sh=sh: variant.prepare(sh, dev)))
                     for m, e in (("main", 0), ("early", 1))]
        else:
            variant = V.get_variant(auto)
            plans = [(f"{m} ({auto} {V.warp_row_plan(cols, V.DTYPES[dtype], op)})",
                      with_defines("single_read.cu", {"SR_WARP_LOADS": e}, lambda sh=sh: variant.prepare(sh, dev)))
                     for m, e in (("main", 0), ("pred", 1), ("hybrid", 2))]
        p67.job(rows, cols, dtype, op, plans, dev)


if __name__ == "__main__":
    main()
