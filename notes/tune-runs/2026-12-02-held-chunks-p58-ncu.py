"""Session 22 probe 58: one multi_block_smem (or multi_block_l2: SPEC mbl2) launch after a warm-up, to profile:
ncu --clock-control none -k regex:multi_block_smem --launch-skip 1 --launch-count 1 --section SpeedOfLight
--section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section SourceCounters
python3 notes/tune-runs/2026-12-02-held-chunks-p58-ncu.py 32 4194304 448.8.4.1.-1.0   (probe 57's v2 patch applied)
"""
import runpy, sys, torch
p57 = runpy.run_path("notes/tune-runs/2026-12-02-held-chunks-p57.py", run_name="p57")
V, dev, S = p57["V"], p57["dev"], p57["S"]
rows, cols, spec = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
x = torch.randn(rows, cols, device="cuda") * 3
y = torch.empty_like(x)
sh = V.Shape(rows, cols, cols, cols, 0, 0, 4, "float32", "softmax", 0, 0)
launch = p57["mbs"](sh, spec) if spec != "mbl2" else V.get_variant("multi_block_l2").prepare(sh, dev)
for _ in range(2):
    launch(x.data_ptr(), y.data_ptr(), S)
torch.cuda.synchronize()
print("ok", spec, float((y - torch.softmax(x, -1)).abs().max()), flush=True)
