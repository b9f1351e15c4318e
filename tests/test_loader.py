"""Every kernel compiles through NVRTC exactly as the loader builds it, with no
GPU or driver, and the compiler reports no register spills."""

import dataclasses
import re

import pytest
from devices import A100, H200, SINGLE_READ_CONFIGS, SMALL_HOPPER

from softmax_lab import loader, variants
from softmax_lab.problem import (
    ALL_OPS,
    BACKWARD_OPS,
    DTYPES,
    OPS,
    Shape,
    kernel_defines,
)
from softmax_lab.variants import cluster_row as CR
from softmax_lab.variants import cross_entropy as XENT
from softmax_lab.variants import multi_block as MB
from softmax_lab.variants import multi_block_smem as MBS
from softmax_lab.variants import single_read as SR
from softmax_lab.variants import warp_rows as WR
from softmax_lab.variants.resources import VECTOR_BYTES


def _derived_configs():
    """single_read's plans over a grid of row lengths and row counts, on the H200
    and on a smaller device, plus every candidate the tuning script times."""
    found = set(SINGLE_READ_CONFIGS)
    for dev in (H200, SMALL_HOPPER):
        for cols in (1025, 3001, 8191, 20000, 32000, 50257, 100003, 128256, 151936, 262147, 393216, 600001, 786432):
            if cols <= SR.single_read_limit(dev):
                found |= set(SR.single_read_candidates(cols, dev))
    off_line = Shape(2, 8, 8, 8, x_offset=64)  # rows that start 64 bytes into a 128-byte line
    found |= {SR.line_shifted(c, off_line, H200) for c in SINGLE_READ_CONFIGS}  # the plans' builds for such rows
    return sorted(found, key=lambda c: (c.cluster, c.threads, c.vpt, c.stages, c.blocks_per_sm, c.line_shift))


def _cluster_row_plans():
    """cluster_row's plans, each (cluster, block shape, vectors, blocks per SM) that its rule
    gives, for the dtype and op builds that auto launches them for: the longest row of every
    cluster size and vector count of every block shape in BLOCK_SHAPES, at 1, 64 and 4096
    rows."""
    found = {}  # each cluster size apart: float32 log_softmax_backward 256 x 12 x 2 spills in clusters of 2 and 4 only
    for dev in (H200, SMALL_HOPPER):
        for dtype, op in (("float32", "softmax"), ("bfloat16", "softmax"), ("float16", "log_softmax"),
                          ("bfloat16", "log_softmax"), ("float32", "softmax_backward"),
                          ("float32", "log_softmax_backward"), ("bfloat16", "log_softmax_backward")):
            arrays, itemsize = (2 if op in BACKWARD_OPS else 1), DTYPES[dtype]
            for threads, most_vpt in CR.BLOCK_SHAPES[arrays, itemsize]:
                for vpt in range(1, most_vpt + 1):
                    for cluster in (1, 2, 4, 8, 16):
                        for rows in (1, 64, 4096):
                            cols = cluster * threads * vpt * VECTOR_BYTES // itemsize
                            plan = CR.cluster_row_plan(cols, dev, rows, itemsize, arrays)
                            if plan is not None:
                                key = (plan.cluster, plan.threads, plan.vpt, plan.blocks_per_sm, dtype, op)
                                found.setdefault(key, plan)
    return sorted(((plan, dtype, op) for (*_, dtype, op), plan in found.items()),
                  key=lambda p: (p[0].label(), p[1], p[2]))


# Builds of cluster_row's rule that spill (ptxas, NVRTC 12.9 and 13.0, 2026-12-07): the register
# model's blocks per SM leave them a few registers short (notes/TUNING.md#register-model).  Not yet
# timed against a block per SM fewer; each at most this many bytes, and no other build spills.
CLUSTER_ROW_KNOWN_SPILLS = {  # (cluster, threads, vpt, blocks per SM, dtype, op): bytes
    (1, 256, 12, 3, "float32", "softmax"): 24,
    (16, 256, 14, 3, "float32", "softmax"): 24,
    (2, 256, 12, 2, "float32", "log_softmax_backward"): 128,
    (4, 256, 12, 2, "float32", "log_softmax_backward"): 128,
    (16, 256, 20, 2, "bfloat16", "softmax"): 8,
    (16, 256, 21, 2, "bfloat16", "softmax"): 16,
    (16, 256, 23, 2, "bfloat16", "softmax"): 16,
    (16, 256, 24, 2, "bfloat16", "softmax"): 8,
}


# cross_entropy_held's gradient takes the loss's blocks per SM (variants/cross_entropy.py), where
# some of its builds spill a few words: at most this many bytes.
HELD_GRADIENT_SPILL = 128


def _cross_entropy_held_plans():
    """cross_entropy_held's plans (the loss alone, and with its gradient; with the count and
    the total in the launch where the rows are few) over the same grid."""
    found = {}
    for dev in (H200, SMALL_HOPPER):
        for cols in (4097, 8191, 13000, 20000, 32000, 50257, 65536, 100003, 128256, 151936, 196609, 262147,
                     300003, 393216, 600000, 786432):
            for rows in (1, 32, 4096):
                for dtype in ("float32", "bfloat16", "float16"):
                    for grad in (False, True):
                        plan = XENT.held_plan(Shape(rows, cols, cols, cols, itemsize=DTYPES[dtype], dtype=dtype), dev,
                                              grad)
                        if plan is None:
                            continue
                        for reduce in {False, rows <= plan.threads}:
                            found.setdefault((plan.label(), dtype, grad, reduce), plan)  # the label names the cluster
    return sorted(((plan, dtype, grad, reduce) for (*_, dtype, grad, reduce), plan in found.items()),
                  key=lambda p: (p[0].label(), *p[1:]))


def _memory_merged_plans():
    """single_read's memory-merged plans (one build per block shape and dtype/op), with the
    line shift, and the small groups the GPU tests force."""
    found = {}
    for cols in (393217, 500001, 600001, 786432, 786433, 1 << 20, 2_000_003, 1 << 22):
        for rows in (32, 4096):
            for dtype, op in (("float32", "softmax"), ("bfloat16", "softmax"), ("float16", "log_softmax")):
                plan = SR.single_read_plan(cols, H200, rows, dtype, op)
                if plan is not None and plan.memory_merge:
                    found.setdefault((plan.threads, plan.vpt, plan.blocks_per_sm, dtype, op),
                                     dataclasses.replace(plan, line_shift=True))
    small = [(SR.ClusterConfig(3, 64, 3, 1, 1, memory_merge=True), "float32", "softmax"),
             (SR.ClusterConfig(7, 96, 2, 1, 2, memory_merge=True), "bfloat16", "log_softmax")]
    return sorted(((plan, dtype, op) for (*_, dtype, op), plan in found.items()), key=lambda p: (p[0].label(), p[1:])) \
        + small


PLAIN_SOURCES = sorted({v.source for v in variants().values() if v.min_compute_capability < 90} | {"copy.cu", "read.cu"})


def _builds():
    for source in PLAIN_SOURCES:
        for arch in ("sm_80", "sm_90"):
            yield _build(source, arch, None, id=f"{source}-{arch}")
    for v in variants().values():  # every (dtype, op) but float32 softmax (the default build above)
        for dtype in v.dtypes:
            for op in v.ops:
                if (dtype, op) != ("float32", "softmax"):
                    source = v.backward_source if op in BACKWARD_OPS and v.backward_source else v.source
                    for arch in ("sm_90",) if v.min_compute_capability >= 90 else ("sm_80", "sm_90"):
                        yield _build(source, arch, kernel_defines(dtype, op), id=f"{v.name}-{dtype}-{op}-{arch}")
    for vpt in (1, 4, WR.WIDE_VPT, WR.MAX_VPT):  # warp_row_plan's range: registers grow with vpt
        yield _build("single_read.cu", "sm_90", {"SR_WARP_VPT": vpt}, id=f"single_read_warp-{vpt}")
    for warps, vpt in ((2, 9), (2, 12)):  # float32 rows past 8 KB: blocks of two warps
        yield _build("single_read.cu", "sm_90", {"SR_WARP_VPT": vpt, "SR_ROW_WARPS": warps},
                     id=f"single_read_warp-{warps}x{vpt}")
    for c in _derived_configs():
        yield _build("single_read.cu", "sm_90", c.defines(), id=f"single_read-{c.label()}")
    for c, dtype, op in _memory_merged_plans():
        yield _build("single_read.cu", "sm_90", c.defines() | kernel_defines(dtype, op),
                     id=f"single_read-{c.label()}-{dtype}-{op}")
    for arch, dev in (("sm_80", A100), ("sm_90", H200)):  # the builds multi_block_l2 launches
        for dtype in DTYPES:
            for op in ALL_OPS:
                plan = MB.multi_block_l2_plan(Shape(4, 1 << 20, 1 << 20, 1 << 20, itemsize=DTYPES[dtype], dtype=dtype,
                                                    op=op), dev)
                defines = kernel_defines(dtype, op) | plan.defines()
                yield _build("multi_block_l2.cu", arch, defines, id=f"multi_block_l2-launched-{dtype}-{op}-{arch}")
    # multi_block_smem's builds on the H200: two splits (one refilling early), the split with
    # companions, one group
    for cols, rows in ((1 << 20, 4096), (1 << 21, 4096), (3 << 20, 4096), (1 << 22, 4096), (1 << 22, 4)):
        plan = MBS.plan(Shape(rows, cols, cols, cols), H200)
        threads, vpt, per_sm, split, held = plan.threads, plan.vpt, plan.blocks_per_sm, plan.split, plan.held_chunks
        early, slots = plan.early_fill, plan.slots
        for dtype in DTYPES:
            for op in OPS:
                defines = kernel_defines(dtype, op) | plan.defines(companions=held is not None)
                yield _build("multi_block_smem.cu", "sm_90", defines,
                             id=f"multi_block_smem-{threads}x{vpt}x{slots}x{per_sm}{'-split' * split}"
                                f"{'-early' * early}{'-companions' * (held is not None)}-{dtype}-{op}")
    for dtype in DTYPES:  # softmax_lab.cross_entropy's kernels, for both widths of target
        for target_bytes in (4, 8):
            for arch in ("sm_80", "sm_90"):
                yield _build("cross_entropy.cu", arch, kernel_defines(dtype) | {"XENT_TARGET_BYTES": target_bytes},
                             id=f"cross_entropy-{dtype}-int{8 * target_bytes}-{arch}")
    for plan, dtype, grad, reduce in _cross_entropy_held_plans():
        defines = plan.defines() | kernel_defines(dtype, "log_softmax") | {"XENT_GRAD": int(grad),
                                                                          "XENT_REDUCE": int(reduce)}
        yield _build("cross_entropy_held.cu", "sm_90", defines, spill=HELD_GRADIENT_SPILL if grad else 0,
                     id=f"cross_entropy_held-{plan.label()}-{dtype}{'-grad' * grad}{'-reduce' * reduce}")
    for plan, dtype, op in _cluster_row_plans():
        spill = CLUSTER_ROW_KNOWN_SPILLS.get((plan.cluster, plan.threads, plan.vpt, plan.blocks_per_sm, dtype, op), 0)
        yield _build("cluster_row.cu", "sm_90", plan.defines() | kernel_defines(dtype, op), spill=spill,
                     id=f"cluster_row-{plan.label()}-{dtype}-{op}")


def _build(source: str, arch: str, defines: dict | None, *, id: str, spill: int = 0):
    """One build of test_compiles_without_spills, with the bytes it may spill (0 but where said)."""
    return pytest.param(source, arch, defines, spill, id=id)


@pytest.mark.parametrize("source, arch, defines, spill", list(_builds()))
def test_compiles_without_spills(source, arch, defines, spill):
    if not (loader.kernel_dir() / source).is_file():
        pytest.skip(f"{source} not present")
    usage = loader.ptxas_usage(source, arch, defines)
    assert all(u.spilled_bytes <= spill for u in usage.values()), usage


def test_the_known_cluster_row_spills_are_plans_of_its_rule():
    plans = {(p.cluster, p.threads, p.vpt, p.blocks_per_sm, dtype, op) for p, dtype, op in _cluster_row_plans()}
    assert set(CLUSTER_ROW_KNOWN_SPILLS) <= plans


def test_ptxas_usage_reports_every_entry_of_a_fresh_build(monkeypatch):
    asked = []
    build = loader.nvrtc_cubin
    monkeypatch.setattr(loader, "nvrtc_cubin", lambda *a: asked.append(a[3]) or build(*a))
    usage = loader.ptxas_usage("multi_block.cu", "sm_90", kernel_defines("float32"))
    assert sorted(usage) == ["multi_block_combine", "multi_block_partials", "multi_block_row_stats",
                             "multi_block_write"]
    assert all(16 <= u.registers <= 255 and u.spilled_bytes == 0 for u in usage.values()), usage
    assert loader.PtxasUsage(80, 24, 20, 36).spilled_bytes == 36  # stack, stores or loads: the most of them
    # NVRTC 12.9+ may serve a build from its cache, and then without ptxas's report
    from cupy.cuda import nvrtc

    assert asked == [("--ptxas-options=-v",) + (("--no-cache",) if nvrtc.getVersion() >= (12, 9) else ())]


@pytest.mark.parametrize("log", ["", "ptxas info    : 0 bytes gmem\nptxas info    : Compiling entry function 'k' "
                                     "for 'sm_90'\nptxas info    : Used 20 registers"])
def test_ptxas_usage_without_a_whole_report_says_so(monkeypatch, log):
    monkeypatch.setattr(loader, "nvrtc_cubin", lambda *a: (b"\0" * 2000, log))
    with pytest.raises(RuntimeError, match="gave no full ptxas report for copy.cu"):
        loader.ptxas_usage("copy.cu", "sm_90")


def test_registered_entries_exist_in_sources():
    for v in variants().values():
        text = loader.kernel_source(v.source)
        for entry in v.entries:
            assert 'extern "C"' in text and re.search(rf"\b{entry}\(const", text), (v.name, entry)
        if v.backward_source:  # its backward kernel: the file's name, as _cluster_kernel loads it
            entry = v.backward_source.removesuffix(".cu")
            assert re.search(rf"\b{entry}\(const", loader.kernel_source(v.backward_source)), (v.name, entry)


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


@pytest.mark.parametrize("source, defines, message", [
    ("single_read.cu", {"SR_CLUSTER": 12}, "power-of-two cluster"),
    ("single_read.cu", {"SR_CLUSTER": 32}, "power-of-two cluster"),
    ("single_read.cu", {"SR_THREADS": 100}, "whole warps"),
    ("single_read.cu", {"SR_THREADS": 512, "SR_VPT": 24, "SR_STAGES": 2}, "shared memory"),
    ("single_read.cu", {"SR_THREADS": 1024, "SR_VPT": 16, "SR_STAGES": 1}, "register budget"),
    ("single_read.cu", {"SR_THREADS": 512, "SR_VPT": 24, "SR_STAGES": 1}, "register budget"),  # 1 block: 40 others
    ("single_read.cu", {"SR_THREADS": 256, "SR_VPT": 8, "SR_STAGES": 1, "SR_SMEM_LIMIT": 16384}, "shared memory"),
    ("single_read.cu", {"SR_PUSHED_MERGE": 1}, "pushed merge needs a cluster"),
    ("single_read.cu", {"SR_PUSHED_MERGE": 1, "SR_MEMORY_MERGE": 1, "SR_CLUSTER": 1}, "pushed merge needs a cluster"),
])
def test_impossible_configurations_fail_to_compile(source, defines, message):
    from cupy.cuda import nvrtc

    prog = nvrtc.createProgram(loader.kernel_source(source), source, [], [])
    try:
        with pytest.raises(nvrtc.NVRTCError):
            nvrtc.compileProgram(prog, loader.options(defines, "sm_90"))
        log = nvrtc.getProgramLog(prog)
    finally:
        nvrtc.destroyProgram(prog)
    assert "static assertion failed" in log and message in log, log


def test_every_dtype_and_op_of_the_row_kernels_is_built():
    built = {(p.values[0], tuple(sorted((p.values[2] or {}).items()))) for p in _builds()}
    for name in ("three_pass", "two_pass", "multi_block"):
        v = variants()[name]
        ops = OPS if name == "three_pass" else ALL_OPS  # three_pass has no backward (its no_backward says why)
        assert set(v.dtypes) == set(DTYPES) and set(v.ops) == set(ops)
        for dtype in DTYPES:
            for op in ops:
                assert (v.source, tuple(sorted(kernel_defines(dtype, op).items()))) in built, (name, dtype, op)


def test_float32_softmax_is_the_default_build():
    """The float32 softmax build passes no defines, so it is the build (and the
    cache entry) of the float-only kernels; the other builds pass theirs."""
    assert kernel_defines() == {} and kernel_defines("float32", "softmax") == {}
    assert kernel_defines("float16", "softmax") == {"SOFTMAX_DTYPE": 1}
    assert kernel_defines("bfloat16", "log_softmax") == {"SOFTMAX_DTYPE": 2, "SOFTMAX_LOG": 1}
    assert kernel_defines("float32", "log_softmax") == {"SOFTMAX_LOG": 1}


@pytest.mark.parametrize("defines, message", [({"SOFTMAX_DTYPE": 3}, "SOFTMAX_DTYPE"), ({"SOFTMAX_LOG": 2}, "SOFTMAX_LOG")])
def test_unknown_dtype_or_op_defines_fail_to_compile(defines, message):
    with pytest.raises(RuntimeError, match="static assertion failed"):
        loader.nvrtc_cubin("two_pass.cu", "sm_90", defines)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_builds_round_once_with_cvt_rn(dtype):
    """The half builds convert with cvt.rn (round to nearest even) in the PTX."""
    from cupy.cuda import nvrtc

    source = loader.kernel_source("two_pass.cu")
    prog = nvrtc.createProgram(source, "two_pass.cu", [], [])
    try:
        nvrtc.compileProgram(prog, loader.options(kernel_defines(dtype, "softmax"), "sm_90"))
        ptx = nvrtc.getPTX(prog)
    finally:
        nvrtc.destroyProgram(prog)
    ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
    kind = "f16" if dtype == "float16" else "bf16"
    assert f"cvt.rn.{kind}.f32" in ptx
    assert "ld.global.nc.v4.u32" in ptx  # 8 halves per 16-byte load
