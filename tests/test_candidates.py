"""softmax_lab.lab.candidates: the catalogue, its families and traffic models, auto's pick."""

import pytest

import softmax_lab
from softmax_lab.lab import candidates as cat
from softmax_lab.problem import ALL_OPS


def test_the_variants_come_first_under_their_registry_names():
    names = [c.name for c in cat.candidates()]
    assert names[: len(softmax_lab.variants())] == list(softmax_lab.variants())
    assert len(set(names)) == len(names)
    assert set(cat.COPY_NAMES) == {"copy.memcpy", "copy.elementwise", "copy.float4"}
    assert {c.kind for c in cat.candidates()} == {"variant", "copy", "library", "host"}
    assert set(cat.GRID_NAMES) <= set(names) and set(cat.PEERS_BY_OP["softmax"]) <= set(names)
    assert set(cat.PEERS) <= set(cat.all_names())


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("op", ALL_OPS)
def test_each_dtype_and_op_has_its_floor_its_peers_and_the_variants_that_hold_it(dtype, op):
    cs = cat.candidates(dtype, op)
    names = [c.name for c in cs]
    held = [v.name for v in softmax_lab.variants().values() if dtype in v.dtypes and op in v.ops]
    assert names[: len(held)] == held and names[len(held)] == "auto"
    floor = [c for c in cs if c.kind == "copy"]
    if cat.is_backward(op):
        assert [c.name for c in floor] == list(cat.FLOOR_NAMES)
        assert all((c.reads, c.writes) == (2, 1) for c in floor)
        assert "torch.softmax" not in names and "copy.memcpy" not in names
    else:
        assert [c.name for c in floor] == list(cat.COPY_NAMES)
        assert all((c.reads, c.writes) == (1, 1) for c in floor)
    assert [c.name for c in cs if c.kind == "library" and c.name != "cupyx.softmax"] == list(cat.PEERS_BY_OP[op])
    assert ("quack.softmax" in names) == (op == "softmax") and "quack.log_softmax" not in names
    assert any(c.kind == "host" for c in cs) == ((dtype, op) == cat.DEFAULT)


def test_traffic_scales_with_the_dtype_and_a_backward_reads_two_arrays():
    bf16 = {c.name: c for c in cat.candidates("bfloat16", "softmax")}
    assert round(bf16["copy.memcpy"].traffic_bytes(4096, 393216, 2) / 1e9, 1) == 6.4
    back = {c.name: c for c in cat.candidates("float32", "softmax_backward")}
    assert back["floor.torch_add"].traffic_bytes(4096, 393216) == 3 * 4096 * 393216 * 4
    assert (back["auto"].reads, back["auto"].writes) == (2, 1)
    assert (back["torch.softmax_backward"].reads, back["quack.softmax_backward"].reads) == (4, 2)
    assert cat.floor_passes("softmax") == 2 and cat.floor_passes("log_softmax_backward") == 3
    with pytest.raises(ValueError, match="dtype must be one of"):
        cat.candidates("float64", "softmax")


def test_variant_passes_come_from_the_registry_traffic_model():
    """A backward variant reads y and dy: two_pass twice each, single_read once each."""
    from softmax_lab.variants import get_variant

    assert cat._variant_passes(get_variant("two_pass"), "softmax") == (2, 1)
    assert cat._variant_passes(get_variant("two_pass"), "softmax_backward") == (4, 1)
    assert cat._variant_passes(get_variant("multi_block"), "log_softmax_backward") == (4, 1)
    assert cat._variant_passes(get_variant("three_pass"), "log_softmax") == (3, 1)


def test_select_takes_the_names_of_the_op_and_refuses_unknown_ones():
    chosen = [c.name for c in cat.select(["auto", "torch.softmax", "torch.log_softmax"], op="log_softmax")]
    assert chosen == ["auto", *cat.COPY_NAMES, "torch.log_softmax"]
    back = [c.name for c in cat.select(["auto"], dtype="bfloat16", op="softmax_backward")]
    assert back == ["auto", *cat.FLOOR_NAMES]


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
    assert (c.name, c.kind, c.reads, c.writes) == ("auto", "variant", 1, 1) and "cluster_row" in c.model
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


def test_skip_reasons_of_the_halves_and_the_backward_ops():
    h200 = cat.reference_device()
    by_name = {c.name: c for c in cat.candidates("bfloat16", "softmax_backward")}
    assert "made with torch" in cat.skip_reason(by_name["auto"], 1024, h200, "no torch", None, "bfloat16",
                                                "softmax_backward")
    assert cat.skip_reason(by_name["floor.cupy_add"], 1024, h200, None, None, "bfloat16",
                           "softmax_backward") == "CuPy has no bfloat16 add"
    if not cat.has_op("softmax_backward"):
        assert "no softmax_backward" in cat.skip_reason(by_name["auto"], 1024, h200, None, None, "bfloat16",
                                                         "softmax_backward")
    half = {c.name: c for c in cat.candidates("float16", "softmax")}
    assert "4-byte words" in cat.skip_reason(half["copy.float4"], 1023, h200, None, None, "float16", "softmax")
    assert cat.skip_reason(half["copy.float4"], 1024, h200, None, None, "float16", "softmax") is None
    if "float16" not in softmax_lab.get_variant("single_read").dtypes:
        assert "single_read" not in half
    assert cat.skip_reason(half["two_pass"], 1024, h200, None, None, "float16", "softmax") is None
    assert cat.has_op("softmax") and not cat.has_op("no_such_op")


def test_quack_absent_is_a_reason_not_an_error():
    reason = cat.quack_status()
    assert reason is None or reason.startswith("quack is not importable")


# ------------------------------------------------------------ the one stream of a run
class _Entered:
    """A context manager that logs its entry and exit into `log`."""

    def __init__(self, log, name, ptr=None):
        self.log, self.name, self.ptr = log, name, ptr

    def __enter__(self):
        self.log.append(("enter", self.name))
        return self

    def __exit__(self, *exc):
        self.log.append(("exit", self.name))
        return False


def test_timed_stream_makes_one_stream_current_for_cupy_and_torch(monkeypatch):
    import sys
    from types import SimpleNamespace

    log = []
    stream = _Entered(log, "cupy", ptr=0x5E)
    fake_cupy = SimpleNamespace(cuda=SimpleNamespace(Stream=lambda non_blocking: stream if non_blocking else None))
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    external = []
    fake_torch = SimpleNamespace(cuda=SimpleNamespace(
        ExternalStream=lambda ptr: external.append(ptr) or ("external", ptr),
        stream=lambda s: _Entered(log, s)))
    with cat.timed_stream(fake_torch) as s:
        assert s is stream and log == [("enter", "cupy"), ("enter", ("external", 0x5E))]
    assert external == [0x5E] and log[2:] == [("exit", ("external", 0x5E)), ("exit", "cupy")]
    log.clear()
    with cat.timed_stream(None) as s:  # without torch: CuPy's stream only
        assert s is stream and log == [("enter", "cupy")]
    assert log == [("enter", "cupy"), ("exit", "cupy")]


def test_a_variant_candidate_is_called_as_a_user_writes_it(monkeypatch):
    """No stream argument: the call runs on the current stream that timed_stream set."""
    import numpy as np

    seen = []
    monkeypatch.setattr(softmax_lab, "softmax", lambda x, **kw: seen.append(kw))
    monkeypatch.setattr(softmax_lab, "softmax_backward", lambda dy, y, **kw: seen.append(kw))
    x = np.ones((2, 8), np.float32)
    for op, dy in (("softmax", None), ("softmax_backward", x)):
        prep = cat.prepare(cat.Candidate("auto", "variant", 1, 1, "auto"), cat.Arrays(x, x.copy(), dy, "float32", op),
                           cat.reference_device())
        prep.call()
    assert [sorted(kw) for kw in seen] == [["out", "variant"]] * 2 and all(kw["variant"] == "auto" for kw in seen)
