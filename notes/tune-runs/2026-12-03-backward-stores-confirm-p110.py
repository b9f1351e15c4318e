"""Probe 110 (2026-12-03, thirty-fifth session): the rule probe 109 suggested, checked on other shapes.
p109 (CUPTI kernel durations over 19 float32 backward shapes): evict-first stores with dy loaded
evict-last ran 0.5-9 % faster than main's evict-last stores and plain dy loads wherever cluster_row
runs two blocks per SM (4096 x 151936 1705.9 -> 1689.3 µs, quack 1695.3), but 0.4 % slower at one
block per SM (512-thread blocks: 4096 x 393216, 4096 x 262144), and 0.4 µs slower at 32 x 151936
(16.7 µs a call).  The rule, in kernels/cluster_row.cu as this runs (CR_STORE, CR_GRAD_LOAD): at two
or more blocks per SM evict-first stores and dy evict-last, else main's.  Here "old" is main's
(CR_STORE 1, CR_GRAD_LOAD 0 at every plan), "new" the rule, "stores first" evict-first stores with
plain dy loads at two blocks per SM (the build p109's decision would have taken alone); p109's
harness (`shape`, `per_call`: inputs in sets of four times the L2, 20 calls under torch.profiler,
outputs checked against float64 first) on shapes p109 did not time, and its 4096 x 151936 and
32 x 151936 again.
Decision, fixed before the run: the rule stays where over these shapes its total is below old's, it
is behind old at no shape of 50 µs or more by more than 0.5 % and at none below by more than 1 µs.
  PYTHONPATH=.:<quack> python3 notes/tune-runs/2026-12-03-backward-stores-confirm-p110.py [seconds]
Ran 2026-12-03 17:42 UTC without quack (-backward-stores-confirm-p110.txt): totals ÷ old's: new 0.9904,
stores first 0.9930; new behind old only at 64 x 151936 (30.2 µs, +0.16 %) and 4096 x 300000 (one
block per SM, the same code, +0.04 %): the rule stays (4e0556b).  The build measured first ran 4-8 %
slow at four shapes where the next builds agreed with each other and with torch.add (1024 x 131072,
64 x 32000, 32 x 151936, and 1056 x 262144, where old and new are the same code at one block per SM):
the gains there are not counted.
"""
import sys

sys.path.insert(0, "notes/tune-runs")
p109 = __import__("2026-12-03-backward-stores-cupti-p109")
S, L = p109.SM, p109.LOG
p109.BUILDS = {"old": {"CR_STORE": 1, "CR_GRAD_LOAD": 0}, "new": {}, "stores first": {"CR_GRAD_LOAD": 0}}
p109.MAIN = "old"
p109.SHAPES = [(4096, 151936, S), (32, 151936, S), (16, 151936, S), (64, 151936, S), (3000, 151936, L),
               (4096, 160000, S), (2048, 180000, L), (6144, 100000, S), (12000, 50000, S), (1024, 131072, L),
               (24576, 16384, S), (64, 32000, S), (8192, 24000, L), (32768, 8192, S), (2000, 200000, S),
               (4096, 300000, L), (1056, 262144, S), (264, 393216, S)]

if __name__ == "__main__":
    p109.main()
