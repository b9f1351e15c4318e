"""Times launch plans of the read-once variants on the device: the numbers
behind single_read's plan rule in softmax_lab/variants/single_read.py (see
notes/TUNING.md#the-plan-rule).

For each shape: the copy ceiling (cupy.copyto of the same bytes), auto
(softmax_lab.softmax with out=), the derived plan and its alternatives
(every other cluster size and blocks per SM, vectors per thread nearer 8 or
24), and for rows beyond a cluster the plans of the variants that run them.
Every candidate is checked first on fresh random data with a NaN-poisoned
output: no element left unwritten, every row sums to 1, sampled rows match a
float64 reference, and a second call gives bitwise the same output.

    PYTHONPATH=. python benchmarks/tune.py [--out DIR] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import cupy as cp
import numpy as np

import softmax_lab
from softmax_lab.problem import Shape
from softmax_lab.reference import relative_error, softmax_reference
from softmax_lab.variants import base as BASE
from softmax_lab.variants import get_variant
from softmax_lab.variants import single_read as SR

# (rows, cols, x offset, y offset) in elements: the offsets make x and y views
# that start past a 16-byte boundary, each its own way.
SHAPES = [
    (4096, 393216, 0, 0), (16384, 32000, 0, 0), (4096, 128256, 0, 0), (4096, 151936, 0, 0),
    (132, 393216, 0, 0), (32, 393216, 0, 0), (512, 100003, 0, 0), (8192, 50257, 0, 0),
    (4096, 128257, 0, 0), (4096, 128256, 0, 1), (4096, 128256, 1, 1), (4096, 128256, 1, 2),
    (1300, 500000, 0, 0), (1024, 1048576, 0, 0), (256, 4194304, 0, 0),
]
QUICK = [(512, 100003, 1, 3), (32, 393216, 0, 0), (64, 1048576, 0, 0)]
REPEATS, WARMUP, CALLS_PER_SAMPLE = 15, 2, 6


def time_ms(fns):
    """Median, min and max ms per call: each sample calls the fns (one per buffer
    set, so that small shapes are read from device memory, not L2) back to back,
    at least CALLS_PER_SAMPLE calls."""
    fns = fns * max(1, -(-CALLS_PER_SAMPLE // len(fns)))  # back to back, so host time overlaps device time
    for _ in range(WARMUP):
        for fn in fns:
            fn()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for _ in range(REPEATS):
        start.record()
        for fn in fns:
            fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) / len(fns))
    return float(np.median(times)), float(min(times)), float(max(times))


def check(run, x, y) -> str | None:
    """None if `run` computes softmax(x) into y correctly and repeatably; else why not."""
    y.fill(cp.nan)
    run()
    if bool(cp.isnan(y).any()):
        return "unwritten or NaN outputs"
    sums = y.sum(axis=1, dtype=cp.float64)
    if float(cp.abs(sums - 1).max()) > 1e-4:
        return f"row sums off by {float(cp.abs(sums - 1).max()):.2e}"
    rows = np.unique(np.linspace(0, x.shape[0] - 1, 5).astype(int))
    err = relative_error(cp.asnumpy(y[rows]), softmax_reference(cp.asnumpy(x[rows])))
    if not err < 1e-5:
        return f"relative error {err:.2e}"
    first = y.copy()
    y.fill(cp.nan)
    run()
    if not bool(cp.array_equal(first, y)):
        return "not bitwise repeatable"
    return None


def candidates(rows: int, cols: int, dev, plan_only: bool = False):
    """(label, variant name, plan) to time, the derived plan first (plan None: the variant's
    own plan for the shape).  Rows a cluster holds: single_read's plan, then every other
    cluster size and blocks per SM, and the plan's cluster with vectors per thread nearer 8
    and 24.  Longer rows: single_read's memory-merged group where it runs them, then
    multi_block_smem and multi_block."""
    if cols > SR.single_read_limit(dev):
        names = [n for n in ("single_read", "multi_block_smem", "multi_block")
                 if n != "single_read" or cols <= SR.single_read_max_cols(dev)]
        return [(f"{n} (its plan)", n, None) for n in names[:1 if plan_only else None]]
    plan = SR.single_read_config(cols, dev, rows)
    out = [(f"sr {plan.label()} (plan)", "single_read", plan)]
    seen = {plan}
    for target in (SR.VPT_TARGET, 8, 24):
        for c in SR.single_read_candidates(cols, dev, vpt_target=target):
            same = (c.cluster, c.blocks_per_sm) == (plan.cluster, plan.blocks_per_sm)
            if c not in seen and not plan_only and (target == SR.VPT_TARGET or same):
                seen.add(c)
                out.append((f"sr {c.label()}", "single_read", c))
    return out


def precompile(shapes, dev, plans=False):
    """Builds every candidate cluster's kernel up front, several at a time."""
    from concurrent.futures import ThreadPoolExecutor

    jobs = {(cols, plan) for rows, cols, xo, yo in shapes
            for _, _, plan in candidates(rows, cols, dev, plan_only=plans or xo != 0 or yo != 0) if plan is not None}
    t0 = time.time()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda job: BASE.cluster_kernel("single_read.cu", job[1], dev, Shape(1, job[0], job[0], job[0])),
                      jobs))
    print(f"built {len(jobs)} kernels in {time.time() - t0:.0f} s", flush=True)


def time_shape(rows: int, cols: int, xo: int, yo: int, dev, stream, plans: bool):
    """The shape's copy, auto and candidates, checked then timed: (its record, its summary line)."""
    t0 = time.time()
    sets = min(8, -(-8 * dev.l2_bytes // (2 * rows * cols * 4)))
    xbs = [cp.random.standard_normal((rows, cols + xo), dtype=cp.float32) * 4 for _ in range(sets)]
    ybs = [cp.empty((rows, cols + yo), dtype=cp.float32) for _ in range(sets)]
    pairs = [(xb[:, xo:], yb[:, yo:]) for xb, yb in zip(xbs, ybs)]
    (x, y), xb, yb = pairs[0], xbs[0], ybs[0]
    copy_ms = min(time_ms([lambda a=a, b=b: cp.copyto(b, a) for a, b in pairs])[0] for _ in range(2))
    if xo or yo:  # the views' strided copy is slower than a copy of the same bytes: take the best
        flat = [(cp.empty(rows * cols, cp.float32), cp.empty(rows * cols, cp.float32)) for _ in range(sets)]
        copy_ms = min(copy_ms, time_ms([lambda a=a, b=b: cp.copyto(b, a) for a, b in flat])[0])
        del flat
    row = {"rows": rows, "cols": cols, "x_offset": xo, "y_offset": yo, "gib": x.nbytes / 2**30,
           "buffer_sets": sets, "copy_ms": copy_ms, "runs": []}
    print(f"\n== {rows} x {cols} (x+{xo}, y+{yo}), {x.nbytes / 2**30:.2f} GiB: copy {copy_ms:.4f} ms", flush=True)
    shape = Shape(rows, cols, xb.shape[1], yb.shape[1], x.data.ptr % 128, y.data.ptr % 16)

    def record(label, make_run, extra=None):
        try:
            problem = check(make_run(x, y), x, y)
            runs = [make_run(a, b) for a, b in pairs]
            med, lo, hi = time_ms(runs) if problem is None else (float("nan"),) * 3
        except Exception as e:  # noqa: BLE001 - a plan that cannot launch is a result too
            problem, med, lo, hi = f"{type(e).__name__}: {e}", *(float("nan"),) * 3
        entry = {"label": label, "ms": med, "min": lo, "max": hi, "ratio": med / copy_ms, "error": problem,
                 **(extra or {})}
        row["runs"].append(entry)
        status = f"FAILED {problem}" if problem else f"{med:8.4f} ms  x{med / copy_ms:6.3f}  [{lo:.4f}, {hi:.4f}]"
        print(f"  {label:34s} {status}", flush=True)
        return entry

    auto = record("auto", lambda a, b: lambda: softmax_lab.softmax(a, out=b))
    for label, name, plan in candidates(rows, cols, dev, plan_only=plans or xo != 0 or yo != 0):
        extra = {}
        if plan is not None:  # the views' rows start off a line: the slices shifted as the plan would
            plan = SR.line_shifted(plan, shape, dev)
        try:
            launch = get_variant(name).prepare(shape, dev, plan)
            if plan is not None:
                kernel = BASE.cluster_kernel("single_read.cu", plan, dev, shape)
                extra = {"groups": BASE.resident_groups(plan, kernel, dev), "config": plan.label()}
                label += f" g={extra['groups']}"
        except Exception as e:  # noqa: BLE001 - a plan that cannot launch is a result too
            print(f"  {label:34s} cannot prepare: {e}", flush=True)
            continue
        record(label, lambda a, b, launch=launch: lambda: launch(a.data.ptr, b.data.ptr, stream), extra)
    if len(row["runs"]) > 1:  # the plan once more: the spread between two timings of one version
        label, name, plan = candidates(rows, cols, dev, plan_only=True)[0]
        launch = get_variant(name).prepare(shape, dev, plan and SR.line_shifted(plan, shape, dev))
        record(label + " again", lambda a, b: lambda: launch(a.data.ptr, b.data.ptr, stream))
    ok = [r for r in row["runs"] if r["error"] is None and r["label"] != "auto"]
    best = min(ok, key=lambda r: r["ms"]) if ok else None
    print(f"  ({time.time() - t0:.0f} s)", flush=True)
    return row, (rows, cols, xo, yo, copy_ms, auto["ratio"], best["ratio"] if best else float("nan"),
                 best["label"] if best else "-", row["runs"][1]["ratio"] if len(row["runs"]) > 1 else float("nan"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--plans", action="store_true", help="time only auto and the derived plan of each shape")
    args = ap.parse_args()
    dev = softmax_lab.device_info()
    print(dev, flush=True)
    stream = cp.cuda.get_current_stream()
    precompile(QUICK if args.quick else SHAPES, dev, args.plans)
    doc = {"device": dev.name, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "command": " ".join(sys.argv), "repeats": REPEATS, "results": []}
    summary = []
    for rows, cols, xo, yo in QUICK if args.quick else SHAPES:
        row, line = time_shape(rows, cols, xo, yo, dev, stream, args.plans)
        doc["results"].append(row)
        summary.append(line)
        cp.get_default_memory_pool().free_all_blocks()
        with open(os.path.join(args.out, "tune.json"), "w") as f:
            json.dump(doc, f, indent=1)

    print("\nshape (x+off, y+off)              copy ms   auto  plan   best  best candidate")
    for rows, cols, xo, yo, copy_ms, auto, best, label, plan in summary:
        print(f"{rows:>6} x {cols:<8} (+{xo}, +{yo})   {copy_ms:8.4f}  {auto:5.3f} {plan:5.3f}  {best:5.3f}  {label}")


if __name__ == "__main__":
    main()
