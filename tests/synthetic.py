"""Synthetic results documents, built with softmax_lab's own record functions and
made-up timings (a 4.8 TB/s device), for the tests that need no GPU."""

from __future__ import annotations

import numpy as np
import pytest

from softmax_lab.lab import bench, records
from softmax_lab.lab import candidates as cat
from softmax_lab.problem import ALL_OPS, DTYPES, LOSS_OPS

DEVICE = {"name": "Synthetic H200", "compute_capability": 90, "sm_count": 132, "l2_bytes": 60 * 2**20}
VERSIONS = {"driver": "12.8", "runtime": "12.9", "python": "3.11", "cupy": "14.2.0", "numpy": "2.4.6",
            "torch": None, "quack": None, "softmax_lab": None}
# Made-up effective bandwidths (GB/s) by candidate; a variant not listed runs at OTHER_VARIANT_GBPS.
GBPS = {"auto": 4000, "copy.memcpy": 4300, "copy.elementwise": 4100, "copy.float4": 4400, "single_read": 4000,
        "two_pass": 3900, "multi_block": 3800, "multi_block_l2": 3950, "multi_block_smem": 3950, "cluster_row": 3850,
        "three_pass": 3700, "cupyx.softmax": 2500, "torch.softmax": 3700,
        "torch.compile": 3800, "quack.softmax": 3900, "floor.torch_add": 4200, "floor.cupy_add": 4100,
        "torch.log_softmax": 3700, "torch.softmax_backward": 3600, "torch.log_softmax_backward": 3700,
        "quack.softmax_backward": 3900, "read.words": 4300, "torch.cross_entropy": 3500, "quack.cross_entropy": 3900,
        "liger.cross_entropy": 3800}
OTHER_VARIANT_GBPS = 3800


def run(rows: int, cols: int, names=None, group=None, repeats: int = 20, seed: int = 0, torch: bool = False,
        dtype: str = "float32", op: str = "softmax") -> dict:
    rng = np.random.default_rng(seed)
    recs = []
    kw = {"dtype": dtype, "op": op}
    for c in cat.select(names, dtype=dtype, op=op):
        if c.name == "auto" and op in LOSS_OPS:
            pass
        elif c.name == "auto":  # as bench does for a device that picks single_read
            c = cat.Candidate("auto", "variant", c.reads, 1, "variant='auto' picks single_read")
        if c.kind == "host":
            if c.name.startswith("host.torch.") and not torch:
                recs.append(records.record(c, *cat.HOST_SHAPE, status="skipped", reason="torch is not importable"))
            else:
                recs.append(records.record(c, *cat.HOST_SHAPE, host_us=list(10 + rng.random(100))))
        elif (c.name.startswith(("torch.", "quack.", "liger.", "floor.torch")) or dtype != "float32") and not torch:
            recs.append(records.record(c, rows, cols, status="skipped", reason="torch is not importable", **kw))
        elif c.name.startswith("quack.") and cols > 400_000:
            recs.append(records.record(c, rows, cols, status="failed",
                                       reason="raised RuntimeError: out of shared memory", **kw))
        elif c.name == "single_read" and cols > 458_000:
            recs.append(records.record(c, rows, cols, status="skipped", reason="row too long for single_read", **kw))
        else:
            ms = c.traffic_bytes(rows, cols, DTYPES[dtype]) / (GBPS.get(c.name, OTHER_VARIANT_GBPS) * 1e9) * 1e3
            times = ms * (1 + 0.02 * rng.random(repeats))
            err = 0.0 if c.kind == "copy" else 2e-7
            check = {"rows": bench.check_rows(rows), "poisoned": "the out buffer", "relative_error": err,
                     "calls": [{"after": "the first call", "relative_error": err, "row_sum_error": 1e-7},
                               {"after": "the last timed call", "relative_error": err, "row_sum_error": 1e-7}]}
            if dtype != "float32" and op not in LOSS_OPS:
                check["ulp_error"] = 0.0 if c.kind == "copy" else 0.6
                for call in check["calls"]:
                    call["ulp_error"] = check["ulp_error"]
            recs.append(records.record(c, rows, cols, times_ms=list(times), check=check, **kw))
    return records.make_run(rows, cols, recs, DEVICE["l2_bytes"], group, dtype, op)


def document(kind: str, torch: bool = False, pairs=None) -> dict:
    """A bench (the headline shape) or sweep (the grid) document; `pairs` of
    (dtype, op) give one run per pair and shape instead of float32 softmax."""
    if pairs is not None:
        shapes = [(*bench.HEADLINE, None)] if kind == "bench" else bench.grid_shapes()[:4]
        runs = [run(r, c, names=None if kind == "bench" else ("auto", *cat.PEERS), group=g, torch=torch,
                    dtype=d, op=o) for r, c, g in shapes for d, o in pairs]
    elif kind == "bench":
        runs = [run(*bench.HEADLINE, torch=torch)]
    else:
        runs = [run(r, c, names=cat.GRID_NAMES, group=g, torch=torch) for r, c, g in bench.grid_shapes()]
    return records.make_document(kind, runs, dict(DEVICE), dict(VERSIONS), bench.method(20, 5, 0),
                                 command=f"softmax-lab {kind} (synthetic)")


def validate(doc: dict, name: str = "results_schema.json") -> None:
    """Validates a document against its schema with jsonschema (a test dependency)."""
    pytest.importorskip("jsonschema")
    records.validate(doc, name)


FORWARD_BF16 = [("bfloat16", "softmax"), ("bfloat16", "log_softmax")]
LOSSES = [(d, o) for d in ("bfloat16", "float32") for o in LOSS_OPS]
BACKWARD = [(d, o) for d in ("bfloat16", "float32") for o in ("softmax_backward", "log_softmax_backward")]


def write(directory, torch: bool = False, dtypes_ops: bool = False) -> tuple:
    """results/-like files bench.json and sweep.json in `directory` (with dtypes_ops,
    also bench_bf16.json, bench_backward.json, sweep_bf16.json, dtype_op.json and the
    loss ops' loss.json, as record.sh's stages name them); their paths."""
    paths = tuple(records.save(document(kind, torch), directory / f"{kind}.json") for kind in ("bench", "sweep"))
    if dtypes_ops:
        every = [(d, o) for d in ("float32", "float16", "bfloat16") for o in ALL_OPS]
        for name, kind, pairs in (("bench_bf16", "bench", FORWARD_BF16), ("bench_backward", "bench", BACKWARD),
                                  ("sweep_bf16", "sweep", FORWARD_BF16[:1]), ("dtype_op", "bench", every),
                                  ("loss", "bench", LOSSES)):
            paths += (records.save(document(kind, torch, pairs), directory / f"{name}.json"),)
    return paths
