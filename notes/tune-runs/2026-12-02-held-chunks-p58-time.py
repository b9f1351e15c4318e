"""Session 22 probe 58: multi_block_smem candidates timed with probe 57's harness (torch copy_ as the floor,
back to back, median of 9): PYTHONPATH=. python3 notes/tune-runs/2026-12-02-held-chunks-p58-time.py R:C:DTYPE[:OP] ... -- CAND ...
It ran with probe 57's v2 patch applied and this session's kernel (main's) copied over it; against main,
probe 57's mbs() must drop its keep= argument (main's launcher has no evict-last knob).
"""
import runpy, sys
p57 = runpy.run_path("notes/tune-runs/2026-12-02-held-chunks-p57.py", run_name="p57")
args = sys.argv[1:]
cut = args.index("--")
for spec in args[:cut]:
    r, c, d, *op = spec.split(":")
    p57["run"](int(r), int(c), d, op[0] if op else "softmax", tuple(args[cut + 1:]))
