"""The headline records in results/ (the bench and profile documents at 4096 x 393216,
float32 and bfloat16, which notebooks 03, 04 and 05 draw) hold every variant the
registry has for their dtype and op, no name the registry lacks, and every peer that
ran: when a variant is added, renamed or removed, this fails until they are recorded
again (results/README.md says how)."""

import json
from pathlib import Path

import pytest

import softmax_lab
from softmax_lab.variants import BACKWARD_OPS

RESULTS = Path(__file__).resolve().parent.parent / "results"
HEADLINE = ["bench.json", "bench_bf16.json", "profile.json", "profile_bf16.json"]
PEERS = {"softmax": ("torch.softmax", "torch.compile", "quack.softmax"),
         "log_softmax": ("torch.log_softmax", "torch.compile")}


def _runs(name):
    return json.loads((RESULTS / name).read_text())["runs"]


def _expected(dtype, op):
    return {name for name, v in softmax_lab.variants().items()
            if dtype in v.dtypes and op in v.ops and not (op in BACKWARD_OPS and v.no_backward)}


@pytest.mark.parametrize("name", HEADLINE)
def test_every_registered_variant_is_recorded(name):
    registry = set(softmax_lab.variants())
    for run in _runs(name):
        recorded = {c["name"] for c in run["candidates"]}
        missing = _expected(run["dtype"], run["op"]) - recorded
        assert not missing, f"{name} {run['dtype']} {run['op']}: record it again, it lacks {sorted(missing)}"
        gone = {n for n in recorded if "." not in n and n != "auto"} - registry
        assert not gone, f"{name}: {sorted(gone)} are no longer variants; record it again"


@pytest.mark.parametrize("name", HEADLINE)
def test_the_peers_ran(name):
    for run in _runs(name):
        status = {c["name"]: c["status"] for c in run["candidates"]}
        peers = PEERS[run["op"]]
        if name.startswith("profile"):  # profiles take the forward op's peers of softmax only
            peers = tuple(p for p in peers if p in status)
        for peer in peers:
            assert status.get(peer) == "ok", f"{name} {run['dtype']} {run['op']}: {peer} {status.get(peer)}"
