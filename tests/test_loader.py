"""Every kernel compiles through NVRTC exactly as the loader builds it, with no
GPU or driver, and the compiler reports no register spills."""

import re

import pytest

from softmax_lab import loader, variants
from softmax_lab.variants import SINGLE_READ_CONFIGS, WARP_ROW_VPT

PLAIN_SOURCES = sorted({v.source for v in variants().values() if v.min_compute_capability < 90} | {"copy.cu"})


def _builds():
    for source in PLAIN_SOURCES:
        for arch in ("sm_80", "sm_90"):
            yield pytest.param(source, arch, None, id=f"{source}-{arch}")
    yield pytest.param("single_read.cu", "sm_90", {"SR_WARP_VPT": WARP_ROW_VPT}, id="single_read_warp")
    for c in SINGLE_READ_CONFIGS:
        yield pytest.param("single_read.cu", "sm_90", c.defines(), id=f"single_read-{c.cluster}x{c.threads}x{c.vpt}x{c.stages}")


@pytest.mark.parametrize("source, arch, defines", list(_builds()))
def test_compiles_without_spills(source, arch, defines):
    if not (loader.kernel_dir() / source).is_file():
        pytest.skip(f"{source} not present")
    cubin, log = loader.nvrtc_cubin(source, arch, defines, ("--ptxas-options=-v",))
    assert len(cubin) > 1000
    entries = re.findall(r"Compiling entry function '(\w+)'", log)
    assert entries, log
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    assert len(spills) == len(entries), log
    assert all(s == ("0", "0") for s in spills), log
    stacks = re.findall(r"(\d+) bytes stack frame", log)
    assert all(s == "0" for s in stacks), log


def test_registered_entries_exist_in_sources():
    for v in variants().values():
        text = loader.kernel_source(v.source)
        for entry in v.entries:
            assert 'extern "C"' in text and re.search(rf"\b{entry}\(const", text), (v.name, entry)


def test_headers_are_inlined_so_the_cache_key_sees_them():
    text = loader.kernel_source("two_pass.cu")
    assert '#include "common.cuh"' not in text
    assert "struct MaxSum" in text  # the header's text is part of what CuPy hashes


def test_header_edit_changes_the_compiled_text(tmp_path, monkeypatch):
    for f in loader.kernel_dir().iterdir():
        (tmp_path / f.name).write_text(f.read_text())
    monkeypatch.setattr(loader, "kernel_dir", lambda: tmp_path)
    loader.kernel_source.cache_clear()
    try:
        before = loader.kernel_source("two_pass.cu")
        (tmp_path / "common.cuh").write_text((tmp_path / "common.cuh").read_text() + "\n// edited\n")
        loader.kernel_source.cache_clear()
        after = loader.kernel_source("two_pass.cu")
    finally:
        loader.kernel_source.cache_clear()
    assert before != after
    assert "// edited" in after and "// edited" not in before


def test_options_are_explicit():
    assert loader.options({"B": 2, "A": 1}) == ("--std=c++17", "-DA=1", "-DB=2")
