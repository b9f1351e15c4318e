"""Builds the CUDA sources with NVRTC and loads them as CuPy kernels.

One function, `nvrtc_cubin`, compiles for the device and for the checks
that run without a GPU, with the same text and the same options, so CI
checks the very binary that runs.  (CuPy's own RawModule compile adds
options of its own at run time, `-ftz=true` among them; we compile
ourselves and hand CuPy the cubin.)

* The local headers a kernel includes (`#include "common.cuh"`) are inlined
  into the text handed to NVRTC; the cache key is a hash of that text, the
  options and the NVRTC version, so an edit to a header forces a rebuild.
* Subnormal numbers are kept (`-ftz=false`, NVRTC's default, named
  explicitly): softmax([0, -90]) gives 8.2e-40 for the second element, as
  torch does.
* Cubins are cached in memory and on disk (`$SOFTMAX_LAB_CACHE_DIR`, else
  `$CUPY_CACHE_DIR/softmax_lab`, else ~/.cache/softmax_lab); the first build
  of a module happens once, under a lock, however many threads ask for it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import tempfile
import threading
from pathlib import Path
from typing import NamedTuple

import cupy

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$', re.MULTILINE)

# Every NVRTC option of every build, besides -arch and the -D defines.
BASE_OPTIONS = ("--std=c++17", "-ftz=false", "-prec-div=true", "-prec-sqrt=true", "-fmad=true")


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


def options(defines: dict[str, int] | None = None, arch: str | None = None) -> tuple[str, ...]:
    """The NVRTC options of a build: BASE_OPTIONS, -arch (when given), then the sorted defines."""
    arch_option = (f"-arch={arch}",) if arch else ()
    return BASE_OPTIONS + arch_option + tuple(f"-D{k}={v}" for k, v in sorted((defines or {}).items()))


def arch_for(compute_capability: int) -> str:
    """The NVRTC target for a device: its own sm_XY, or the newest this NVRTC knows."""
    from cupy.cuda import nvrtc

    supported = [int(a) for a in nvrtc.getSupportedArchs()]
    return f"sm_{max((a for a in supported if a <= compute_capability), default=min(supported))}"


def nvrtc_cubin(filename: str, arch: str, defines: dict[str, int] | None = None, extra: tuple[str, ...] = ()):
    """Compiles kernels/<filename> for `arch` (e.g. "sm_90") with NVRTC, no GPU
    or driver needed: returns (cubin bytes, NVRTC log).  The build get_kernel
    loads is this one, with extra=()."""
    from cupy.cuda import nvrtc

    prog = nvrtc.createProgram(kernel_source(filename), filename, [], [])
    try:
        try:
            nvrtc.compileProgram(prog, options(defines, arch) + tuple(extra))
        except nvrtc.NVRTCError as e:
            raise RuntimeError(f"NVRTC could not compile {filename} with {defines or {}}: {e}\n"
                               f"{nvrtc.getProgramLog(prog)}") from None
        # CuPy's getCUBIN has been seen to return one byte less than the
        # cubin's size; a trailing zero byte is ignored by every ELF reader.
        return nvrtc.getCUBIN(prog) + b"\0", nvrtc.getProgramLog(prog)
    finally:
        nvrtc.destroyProgram(prog)


class PtxasUsage(NamedTuple):
    """What ptxas reports for one entry function of a build."""

    registers: int
    stack_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int

    @property
    def spilled_bytes(self) -> int:
        """The most of the stack frame, spill stores and spill loads: 0 for a build that spills nothing."""
        return max(self.stack_bytes, self.spill_store_bytes, self.spill_load_bytes)


_PTXAS_ENTRY = re.compile(r"Compiling entry function '(\w+)'")
_PTXAS_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_REGISTERS = re.compile(r"Used (\d+) registers")


def ptxas_usage(filename: str, arch: str, defines: dict[str, int] | None = None) -> dict[str, PtxasUsage]:
    """{entry function: PtxasUsage} of a build of kernels/<filename>, from ptxas's report
    (no GPU needed).  NVRTC 12.9 and newer may serve a build from their cache, and a
    cached build comes without the report: --no-cache asks for a fresh one."""
    from cupy.cuda import nvrtc

    extra = ("--ptxas-options=-v",) + (("--no-cache",) if nvrtc.getVersion() >= (12, 9) else ())
    _, log = nvrtc_cubin(filename, arch, defines, extra)
    parts = _PTXAS_ENTRY.split(log)  # the text before, then each entry's name and its report in turn
    entries, usage = parts[1::2], {}
    for entry, report in zip(entries, parts[2::2]):
        frame, registers = _PTXAS_FRAME.search(report), _PTXAS_REGISTERS.search(report)
        if frame is not None and registers is not None:
            usage[entry] = PtxasUsage(int(registers.group(1)), *map(int, frame.groups()))
    if not entries or len(usage) != len(entries):
        raise RuntimeError(f"NVRTC {nvrtc.getVersion()} gave no full ptxas report for {filename} with "
                           f"{defines or {}} ({arch}); its log:\n{log}")
    return usage


def cache_dir() -> Path:
    explicit = os.environ.get("SOFTMAX_LAB_CACHE_DIR")
    if explicit:
        return Path(explicit)
    cupy_dir = os.environ.get("CUPY_CACHE_DIR")
    return Path(cupy_dir) / "softmax_lab" if cupy_dir else Path.home() / ".cache" / "softmax_lab"


def _cache_key(filename: str, arch: str, defines: tuple) -> str:
    from cupy.cuda import nvrtc

    text = "\0".join((kernel_source(filename), *options(dict(defines), arch), str(nvrtc.getVersion())))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


_build_lock = threading.Lock()


def cubin_path(filename: str, arch: str, defines: tuple[tuple[str, int], ...] = ()) -> Path:
    """The cached cubin of this build, compiled first (once, under a lock) if missing."""
    with _build_lock:
        return _cached_cubin(filename, arch, defines)


def _cached_cubin(filename: str, arch: str, defines: tuple) -> Path:
    folder = cache_dir()
    path = folder / f"{Path(filename).stem}-{arch}-{_cache_key(filename, arch, defines)}.cubin"
    if path.is_file() and path.stat().st_size > 0:
        return path
    cubin, _ = nvrtc_cubin(filename, arch, dict(defines))
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        f.write(cubin)
    os.replace(tmp, path)  # atomic: another process never reads half a file
    return path


_modules: dict[tuple, cupy.RawModule] = {}
_modules_lock = threading.Lock()


def _module(filename: str, defines: tuple[tuple[str, int], ...], device_id: int) -> cupy.RawModule:
    key = (filename, defines, device_id)
    module = _modules.get(key)
    if module is not None:
        return module
    with _modules_lock:  # one build per module, however many threads ask at once
        module = _modules.get(key)
        if module is None:
            with cupy.cuda.Device(device_id):
                cc = int(cupy.cuda.Device(device_id).compute_capability)
                module = cupy.RawModule(path=str(cubin_path(filename, arch_for(cc), defines)))
            _modules[key] = module
    return module


def get_kernel(filename: str, entry: str, defines: dict[str, int] | None = None, device_id: int = 0) -> cupy.RawKernel:
    """The compiled kernel `entry` of kernels/<filename> for one device (cached)."""
    module = _module(filename, tuple(sorted((defines or {}).items())), device_id)
    with cupy.cuda.Device(device_id):
        return module.get_function(entry)
