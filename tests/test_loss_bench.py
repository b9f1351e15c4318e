"""The lab's loss ops (lab/loss.py): their catalogue, the checks of a loss and its
gradient (NumPy, no GPU), an in-place candidate checked from restored inputs, and on
a GPU a tiny bench of both ops with the peers that are installed."""

import numpy as np
import pytest
import synthetic

from softmax_lab.lab import bench, cli, loss, records
from softmax_lab.lab import candidates as cat
from softmax_lab.problem import LOSS_OPS
from softmax_lab.reference import cross_entropy_reference


def test_the_catalogue_of_the_loss_ops():
    alone, grad = (cat.candidates("float32", op) for op in LOSS_OPS)
    assert [c.name for c in alone if c.kind == "copy"] == ["read.words"]
    assert [c.name for c in grad if c.kind == "copy"] == list(cat.COPY_NAMES)
    for op, cs in zip(LOSS_OPS, (alone, grad)):
        names = {c.name for c in cs}
        assert set(cat.PEERS_BY_OP[op]) <= names and "auto" in names
        assert all(cat.PEER_ROLE[n] in cat.ROLES for n in cat.PEERS_BY_OP[op])
    assert (cat.floor_passes("cross_entropy"), cat.floor_passes("cross_entropy_grad")) == (1, 2)
    auto = {op: next(c for c in cat.candidates("bfloat16", op) if c.name == "auto") for op in LOSS_OPS}
    assert (auto["cross_entropy"].reads, auto["cross_entropy"].writes) == (1, 0)
    assert (auto["cross_entropy_grad"].reads, auto["cross_entropy_grad"].writes) == (2, 1)


def test_the_command_line_takes_the_loss_ops():
    parser = cli._parser()
    assert parser.parse_args(["sweep", "--op", "loss"]).op == LOSS_OPS
    assert parser.parse_args(["bench", "--op", "cross_entropy_grad"]).op == ("cross_entropy_grad",)


@pytest.mark.parametrize("dtype, cols, reason", [("bfloat16", 50257, "16 bytes"), ("float32", 50257, "16 bytes"),
                                                 ("float32", 50256, None), ("bfloat16", 32000, None)])
def test_quack_is_skipped_where_its_rows_are_not_whole_16_byte_vectors(dtype, cols, reason):
    c = next(c for c in cat.candidates(dtype, "cross_entropy") if c.name == "quack.cross_entropy")
    got = cat.skip_reason(c, cols, cat.reference_device(), None, None, dtype, "cross_entropy")
    assert (got is None) if reason is None else reason in got


def _inputs(rows=40, cols=53, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((rows, cols)) * 2).astype(np.float32), rng.integers(0, cols, rows)


@pytest.mark.parametrize("op", LOSS_OPS)
def test_a_right_answer_passes_and_a_wrong_row_anywhere_fails(op):
    x, t = _inputs()
    idx = bench.check_rows(len(x), k=6)
    grad = op == "cross_entropy_grad"
    refs = loss.references(x, t, idx, grad)
    want = cross_entropy_reference(x.astype(np.float64), t, reduction="none")
    right = (want["loss"].astype(np.float32), want["grad"].astype(np.float32)) if grad else want["loss"].astype(
        np.float32)
    auto = cat.LOSS_AUTO[op]

    def check(out):
        return loss.check(out, x=x, refs=refs, idx=idx, dtype="float32", op=op, c=auto)

    assert check(right)["passed"]
    unsampled = next(r for r in range(len(x)) if r not in idx)
    wrong_loss = want["loss"].astype(np.float32)
    wrong_loss[unsampled] *= 1.01
    assert not check((wrong_loss, right[1]) if grad else wrong_loss)["passed"]
    if grad:
        g = right[1].copy()
        g[unsampled, 3] += 0.05  # its row no longer sums to 0
        assert not check((right[0], g))["passed"]
        g[unsampled, 3] = np.nan
        assert check((right[0], g))["row_sum_error"] is None


def test_an_in_place_candidate_is_checked_on_one_call_from_restored_inputs():
    """A candidate that overwrites its input (as Liger's gradient does) would fail a check of
    the last timed call; measure checks prep.again()'s call instead."""
    x, t = _inputs()
    idx = bench.check_rows(len(x), k=6)
    refs = loss.references(x, t, idx, False)
    work = x.copy()

    def call():
        out = cross_entropy_reference(work.astype(np.float64), t, reduction="none")["loss"].astype(np.float32)
        work[...] = 0.5  # the input overwritten
        return out

    def again():
        work[...] = x
        return call()

    c = cat.LOSS_AUTO["cross_entropy"]
    checker = lambda out: loss.check(out, x=x, refs=refs, idx=idx, dtype="float32", op="cross_entropy", c=c)
    timer = lambda f, n, w, before: ([1.0] * n, [f() for _ in range(w + n)][-1])
    kept = bench.measure(c, cat.Prepared(call, lambda: None, "nothing"), x, idx, None, timer, 3, 1,
                         op="cross_entropy", checker=checker)
    assert kept["status"] == "failed"
    work[...] = x
    fixed = bench.measure(c, cat.Prepared(call, lambda: None, "nothing", again), x, idx, None, timer, 3, 1,
                          op="cross_entropy", checker=checker)
    assert fixed["status"] == "ok", fixed["reason"]
    assert "restored" in fixed["check"]["calls"][-1]["after"]


@pytest.mark.gpu
def test_tiny_bench_of_the_loss_ops_on_the_gpu():
    pytest.importorskip("torch")
    doc = bench.run_bench(64, 4104, repeats=3, warmup=1, host_calls=0, progress=False,
                          dtypes=("float32", "bfloat16"), ops=LOSS_OPS)
    synthetic.validate(doc)
    assert len(doc["runs"]) == 4
    for run in doc["runs"]:
        by_name = {r["name"]: r for r in run["candidates"]}
        assert run["copy"] is not None
        for name in ("auto", "torch.cross_entropy", "torch.compile"):
            assert by_name[name]["status"] == "ok", (run["dtype"], run["op"], name, by_name[name]["reason"])
        for name in ("quack.cross_entropy", "liger.cross_entropy"):
            assert by_name[name]["status"] in ("ok", "skipped"), (run["op"], name, by_name[name]["reason"])
    assert records.failures(doc) == []
