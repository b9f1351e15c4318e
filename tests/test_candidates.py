"""softmax_lab.candidates: the catalogue, its families and traffic models, auto's pick."""

import pytest

import softmax_lab
from softmax_lab import candidates as cat


def test_the_variants_come_first_under_their_registry_names():
    names = [c.name for c in cat.candidates()]
    assert names[: len(softmax_lab.variants())] == list(softmax_lab.variants())
    assert len(set(names)) == len(names)
    assert set(cat.COPY_NAMES) == {"copy.memcpy", "copy.elementwise", "copy.float4"}
    assert {c.kind for c in cat.candidates()} == {"variant", "copy", "library", "host"}
    assert set(cat.GRID_NAMES) <= set(names) and set(cat.PEERS) <= set(names)


def test_headline_traffic_spans_12_9_to_25_8_gb():
    by_name = {c.name: c.traffic_bytes(4096, 393216) / 1e9 for c in cat.candidates()}
    assert round(by_name["single_read"], 1) == 12.9
    assert round(by_name["two_pass"], 1) == round(by_name["multi_block"], 1) == 19.3
    assert round(by_name["three_pass"], 1) == 25.8
    assert by_name["copy.float4"] == by_name["single_read"]
    for c, v in zip(cat.candidates(), softmax_lab.variants().values()):
        assert c.traffic_bytes(7, 9) == v.traffic_bytes(7, 9)


def test_select_keeps_the_copies_and_rejects_unknown_names():
    assert [c.name for c in cat.select(["two_pass"])] == ["two_pass", *cat.COPY_NAMES]
    assert [c.name for c in cat.select(None, default=cat.GRID_NAMES)] == [
        "auto", "copy.memcpy", "copy.elementwise", "copy.float4", "torch.softmax", "torch.compile", "quack.softmax"]
    with pytest.raises(ValueError, match="unknown candidate"):
        cat.select(["two_pass", "nope"])


def test_auto_takes_the_traffic_of_the_variant_it_picks_never_zero():
    h200 = cat.reference_device()
    assert h200.sm_count == 132 and h200.compute_capability == 90
    c = cat.resolve(cat.AUTO, 4096, 393216, h200)
    assert (c.name, c.kind, c.reads, c.writes) == ("auto", "variant", 1, 1) and "single_read" in c.model
    long_rows = cat.resolve(cat.AUTO, 256, 1 << 22, h200)
    assert long_rows.reads >= 1 and long_rows.writes == 1
    assert long_rows.model.startswith(f"variant='auto' picks {cat.pick(256, 1 << 22, h200).name}")
    assert cat.resolve(cat.COPIES[0], 1, 1, h200) is cat.COPIES[0]


def test_skip_reasons_known_before_any_call():
    h200 = cat.reference_device()
    by_name = {c.name: c for c in cat.candidates()}
    assert cat.skip_reason(by_name["torch.softmax"], 1024, h200, "no torch", None) == "no torch"
    assert cat.skip_reason(by_name["host.torch.softmax"], 1024, h200, "no torch", None) == "no torch"
    assert cat.skip_reason(by_name["quack.softmax"], 1024, h200, None, "no quack") == "no quack"
    assert "N % 4 == 0" in cat.skip_reason(by_name["quack.softmax"], 100003, h200, None, None)
    assert cat.skip_reason(by_name["quack.softmax"], 100004, h200, None, None) is None
    assert cat.skip_reason(by_name["auto"], 10**8, h200, None, None) is None
    assert "holds rows of at most" in cat.skip_reason(by_name["single_read"], 10**8, h200, None, None)
    assert cat.skip_reason(by_name["copy.memcpy"], 5, h200, "no torch", "no quack") is None


def test_quack_absent_is_a_reason_not_an_error():
    reason = cat.quack_status()
    assert reason is None or reason.startswith("quack is not importable")
