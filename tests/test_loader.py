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


def test_options_are_explicit_and_keep_subnormals():
    opts = loader.options({"B": 2, "A": 1}, "sm_90")
    assert opts == loader.BASE_OPTIONS + ("-arch=sm_90", "-DA=1", "-DB=2")
    assert "-ftz=false" in opts and not any(o.startswith("-ftz=true") for o in opts)


def test_the_device_build_is_the_checked_build(tmp_path, monkeypatch):
    """get_kernel loads the cubin that cubin_path writes, and that is byte for byte
    what nvrtc_cubin (the CPU checks' build) gives for the same source and defines."""
    monkeypatch.setenv("SOFTMAX_LAB_CACHE_DIR", str(tmp_path))
    defines = (("SR_WARP_VPT", 8),)
    seen = []
    real = loader.nvrtc_cubin
    monkeypatch.setattr(loader, "nvrtc_cubin", lambda *a, **k: seen.append((a, k)) or real(*a, **k))
    path = loader.cubin_path("single_read.cu", "sm_90", defines)
    assert seen == [(("single_read.cu", "sm_90", dict(defines)), {})]  # no extra options
    assert path.read_bytes() == real("single_read.cu", "sm_90", dict(defines))[0]
    assert loader.cubin_path("single_read.cu", "sm_90", defines) == path and len(seen) == 1  # cached


def test_threads_build_a_module_once(tmp_path, monkeypatch):
    import threading

    monkeypatch.setenv("SOFTMAX_LAB_CACHE_DIR", str(tmp_path))
    calls = []
    real = loader.nvrtc_cubin
    monkeypatch.setattr(loader, "nvrtc_cubin", lambda *a, **k: calls.append(a) or real(*a, **k))
    start = threading.Barrier(6)
    paths = []

    def build():
        start.wait()
        paths.append(loader.cubin_path("two_pass.cu", "sm_90"))

    threads = [threading.Thread(target=build) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len(set(paths)) == 1 and len(paths) == 6


def test_cache_key_changes_with_options_and_source(monkeypatch):
    a = loader._cache_key("two_pass.cu", "sm_90", ())
    assert a == loader._cache_key("two_pass.cu", "sm_90", ())
    assert a != loader._cache_key("two_pass.cu", "sm_80", ())
    assert a != loader._cache_key("two_pass.cu", "sm_90", (("X", 1),))
    monkeypatch.setattr(loader, "BASE_OPTIONS", loader.BASE_OPTIONS + ("-G",))
    assert a != loader._cache_key("two_pass.cu", "sm_90", ())
