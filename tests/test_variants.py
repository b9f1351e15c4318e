"""The registry, traffic model and launch rules: pure functions, no GPU."""

import math

import pytest

import softmax_lab
from softmax_lab.device import DeviceInfo
from softmax_lab.variants import AUTO_RULES, SINGLE_READ_CONFIGS, choose, get_variant, single_read_config

H200 = DeviceInfo(0, "NVIDIA H200", 90, 132, 60 * 2**20, 232448, 233472)
A100 = DeviceInfo(0, "NVIDIA A100", 80, 108, 40 * 2**20, 166912, 167936)
HEADLINE = (4096, 393216)


def test_registry_order_and_names():
    assert list(softmax_lab.variants()) == ["three_pass", "two_pass", "multi_block", "single_read"]
    for name, v in softmax_lab.variants().items():
        assert v.name == name and v.source.endswith(".cu") and v.entries and v.summary and v.launch_rule


def test_traffic_model_for_the_headline_shape():
    gb = {n: v.traffic_bytes(*HEADLINE) / 1e9 for n, v in softmax_lab.variants().items()}
    assert gb["single_read"] == pytest.approx(12.88, abs=0.01)
    assert gb["two_pass"] == pytest.approx(19.33, abs=0.01) and gb["multi_block"] == gb["two_pass"]
    assert gb["three_pass"] == pytest.approx(25.77, abs=0.01)
    assert get_variant("three_pass").bytes_per_element() == 16


def test_single_read_needs_hopper():
    assert "compute capability 9.0" in get_variant("single_read").unsupported_reason(1024, A100)
    assert get_variant("single_read").unsupported_reason(393216, H200) is None
    assert get_variant("two_pass").unsupported_reason(10**9, A100) is None


def test_single_read_configs_hold_their_rows_and_fit_the_device():
    limit = get_variant("single_read").max_cols(H200)
    assert limit >= 393216
    assert "at most" in get_variant("single_read").unsupported_reason(limit + 1, H200)
    for cols in [1, 5, 1024, 1025, 4096, 65537, 262144, 393216, limit]:
        c = single_read_config(cols, H200)
        vecs = math.ceil(cols / 4)
        assert c is not None and math.ceil(vecs / c.cluster) <= c.threads * c.vpt
        assert c.smem_bytes + 1024 <= H200.smem_optin_bytes
        assert c.cluster in (1, 2, 4, 8, 16)
    assert single_read_config(limit + 1, H200) is None
    caps = [c.capacity_floats for c in SINGLE_READ_CONFIGS]
    assert caps == sorted(caps)


@pytest.mark.parametrize("cols, on_h200, on_a100", [
    (1, "single_read", "three_pass"),
    (1024, "single_read", "three_pass"),
    (1025, "three_pass", "three_pass"),
    (4096, "three_pass", "three_pass"),
    (4097, "single_read", "two_pass"),
    (393216, "single_read", "multi_block"),
    (1 << 20, "multi_block", "multi_block"),
    (1 << 22, "multi_block", "multi_block"),
])
def test_auto_rules(cols, on_h200, on_a100):
    assert choose(4096, cols, H200).name == on_h200
    assert choose(4096, cols, A100).name == on_a100


def test_auto_rules_cover_every_length():
    assert AUTO_RULES[-1][0] == math.inf
    assert all(get_variant(n) for _, names in AUTO_RULES for n in names)


def test_unknown_variant():
    with pytest.raises(ValueError, match="known: 'auto'"):
        get_variant("nope")
