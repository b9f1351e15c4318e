"""Auto's decisions and launch plans, identical to the golden dump (tests/plan_capture.py).

The dump was written from the code before the variants were split into one module per
family; every change since must leave every record the same, or regenerate the dump on
purpose (`python tests/plan_capture.py`) and say why in its commit."""

import gzip
import json

import plan_capture
import pytest


def _golden(device: str, dtype: str) -> list[dict]:
    with gzip.open(plan_capture.GOLDEN, "rt") as f:
        return [r for r in map(json.loads, f) if r["device"] == device and r["dtype"] == dtype]


@pytest.mark.parametrize("dtype", plan_capture.DTYPES)
@pytest.mark.parametrize("device", plan_capture.DEVICES)
def test_decisions_and_plans_match_the_golden_dump(device, dtype):
    golden = _golden(device, dtype)
    assert len(golden) == len(plan_capture.ROWS) * len(plan_capture.COLS) * len(plan_capture.OPS) * \
        len(plan_capture.LAYOUTS)
    layouts = {layout[0]: layout for layout in plan_capture.LAYOUTS}
    differ = []
    for want in golden:
        got = plan_capture.record(device, want["rows"], want["cols"], dtype, want["op"], layouts[want["layout"]])
        if got != want:
            differ.append((want, got))
    assert not differ, f"{len(differ)} of {len(golden)} records differ; the first:\n{differ[0][0]}\n{differ[0][1]}"


def test_the_dump_covers_every_registered_variant_that_auto_takes_on_the_h200():
    with gzip.open(plan_capture.GOLDEN, "rt") as f:
        taken = {r["variant"] for r in map(json.loads, f) if r["device"] == "H200"}
    assert {"single_read", "cluster_row", "multi_block_smem", "multi_block_l2", "two_pass", "multi_block"} <= taken
