"""Reads the CUDA sources and builds them into `cupy.RawModule`s.

The local headers a kernel includes (`#include "common.cuh"`) are inlined
into the text handed to NVRTC.  CuPy's kernel cache is keyed on that text, so
an edit to a header changes the key and forces a recompile, which a plain
include path would not.  The same text and options serve the compile checks
that run without a GPU (`nvrtc_cubin`).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import cupy

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$', re.MULTILINE)

# Explicit NVRTC options for every kernel; the architecture is the device's
# (CuPy adds it) or, for the GPU-less checks, the one asked for.
BASE_OPTIONS = ("--std=c++17",)


def kernel_dir() -> Path:
    """Installed packages carry the sources in softmax_lab/kernels; a source
    checkout has them in the top-level kernels/ folder."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "kernels", here.parent / "kernels"):
        if (candidate / "common.cuh").is_file():
            return candidate
    raise FileNotFoundError(f"softmax_lab's CUDA sources are missing (looked in {here / 'kernels'})")


@functools.cache
def kernel_source(filename: str) -> str:
    """The source of kernels/<filename> with its local includes inlined (once each)."""
    seen: set[str] = set()

    def expand(name: str) -> str:
        if name in seen:
            return f"// {name}: already included\n"
        seen.add(name)
        text = (kernel_dir() / name).read_text()
        return _INCLUDE.sub(lambda m: expand(m.group(1)), text)

    return expand(filename)


def options(defines: dict[str, int] | None = None) -> tuple[str, ...]:
    return BASE_OPTIONS + tuple(f"-D{k}={v}" for k, v in sorted((defines or {}).items()))


@functools.cache
def _module(filename: str, defines: tuple[tuple[str, int], ...], device_id: int) -> cupy.RawModule:
    with cupy.cuda.Device(device_id):
        module = cupy.RawModule(code=kernel_source(filename), options=options(dict(defines)), backend="nvrtc")
        module.compile()
    return module


def get_kernel(filename: str, entry: str, defines: dict[str, int] | None = None, device_id: int = 0) -> cupy.RawKernel:
    """The compiled kernel `entry` of kernels/<filename> for one device (cached)."""
    return _module(filename, tuple(sorted((defines or {}).items())), device_id).get_function(entry)


def nvrtc_cubin(filename: str, arch: str, defines: dict[str, int] | None = None, extra: tuple[str, ...] = ()):
    """Compiles kernels/<filename> as get_kernel would, for `arch` (e.g. "sm_90"),
    with no GPU or driver: returns (cubin bytes, NVRTC log)."""
    from cupy.cuda import nvrtc

    prog = nvrtc.createProgram(kernel_source(filename), filename, [], [])
    try:
        opts = options(defines) + (f"-arch={arch}",) + tuple(extra)
        try:
            nvrtc.compileProgram(prog, opts)
        finally:
            log = nvrtc.getProgramLog(prog)
        return nvrtc.getCUBIN(prog), log
    finally:
        nvrtc.destroyProgram(prog)
