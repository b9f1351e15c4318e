"""Synthetic results documents, built with softmax_lab.bench's own record functions
and made-up timings (a 4.8 TB/s device), for the tests that need no GPU."""

from __future__ import annotations

import numpy as np
import pytest

from softmax_lab import bench

DEVICE = {"name": "Synthetic H200", "compute_capability": 90, "sm_count": 132, "l2_bytes": 60 * 2**20}
VERSIONS = {"driver": 12080, "runtime": 12090, "python": "3.11", "cupy": "14.2.0", "numpy": "2.4.6",
            "torch": None, "softmax_lab": None}
GBPS = {"auto": 4000, "copy.memcpy": 4300, "copy.elementwise": 4100, "copy.float4": 4400, "single_read": 4000,
        "two_pass": 3900, "multi_block": 3800, "three_pass": 3700, "long_row": 3600, "cupyx.softmax": 2500}


def run(rows: int, cols: int, repeats: int = 20, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    records = []
    for c in bench.candidates():
        if c is bench.AUTO:  # as bench does for a device that picks single_read
            c = bench.Candidate("auto", "variant", 1, 1, "variant='auto' picks single_read")
        if c.name.startswith("torch."):
            records.append(bench.record(c, rows, cols, status="skipped", reason="torch is not importable"))
        elif c.name == "single_read" and cols > 458_000:
            records.append(bench.record(c, rows, cols, status="skipped", reason="row too long for single_read"))
        else:
            ms = c.traffic_bytes(rows, cols) / (GBPS[c.name] * 1e9) * 1e3
            times = ms * (1 + 0.02 * rng.random(repeats))
            check = {"rows": bench.check_rows(rows), "relative_error": 0.0 if c.kind == "copy" else 2e-7,
                     "poisoned": "out buffer"}
            records.append(bench.record(c, rows, cols, times_ms=list(times), check=check))
    return bench.make_run(rows, cols, records, DEVICE["l2_bytes"])


def document(kind: str) -> dict:
    shapes = [bench.HEADLINE] if kind == "bench" else [(bench.SWEEP_ELEMENTS // c, c) for c in bench.SWEEP_COLS]
    return bench.make_document(kind, [run(r, c) for r, c in shapes], dict(DEVICE), dict(VERSIONS),
                               bench.method(20, 5, 0), command=f"softmax-lab {kind} (synthetic)")


def validate(doc: dict) -> None:
    """Validates a document against results_schema.json with jsonschema (a test
    dependency); skips the calling test where jsonschema is missing."""
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(doc, bench.schema())


def write(directory) -> tuple:
    """results/-like files bench.json and sweep.json in `directory`; their paths."""
    return tuple(bench.save(document(kind), directory / f"{kind}.json") for kind in ("bench", "sweep"))
