"""What the launch rules need to know about a CUDA device, read once per device."""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass

import cupy


class NoDeviceError(RuntimeError):
    """No usable CUDA device (no GPU, or no driver)."""


@dataclass(frozen=True)
class DeviceInfo:
    id: int
    name: str
    compute_capability: int  # e.g. 90 for sm_90
    sm_count: int
    l2_bytes: int
    smem_optin_bytes: int  # shared memory a block may opt in to
    smem_per_sm_bytes: int


def require_device() -> int:
    """The current device id; NoDeviceError (a RuntimeError) when there is none."""
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError as e:
        raise NoDeviceError(f"softmax_lab needs a CUDA device, and none is usable here ({e})") from None
    if count == 0:
        raise NoDeviceError("softmax_lab needs a CUDA device, and none is present")
    return cupy.cuda.runtime.getDevice()


@functools.cache
def device_info(device_id: int | None = None) -> DeviceInfo:
    """The launch rules' view of a device (the current one by default), read once.

    Raises NoDeviceError (a RuntimeError) when no CUDA device is usable, and
    CuPy's CUDARuntimeError for a device id that does not exist."""
    if device_id is None:
        device_id = require_device()
    rt = cupy.cuda.runtime
    props = rt.getDeviceProperties(device_id)
    attr = functools.partial(rt.deviceGetAttribute, device=device_id)
    return DeviceInfo(
        id=device_id,
        name=props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"]),
        compute_capability=10 * props["major"] + props["minor"],
        sm_count=attr(rt.cudaDevAttrMultiProcessorCount),
        l2_bytes=attr(rt.cudaDevAttrL2CacheSize),
        smem_optin_bytes=attr(rt.cudaDevAttrMaxSharedMemoryPerBlockOptin),
        smem_per_sm_bytes=attr(rt.cudaDevAttrMaxSharedMemoryPerMultiprocessor),
    )


class _LaunchConfig(ctypes.Structure):  # CUlaunchConfig of the driver API
    _fields_ = [
        ("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
        ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
        ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
        ("attrs", ctypes.c_void_p), ("numAttrs", ctypes.c_uint),
    ]


@functools.cache
def _libcuda():
    return ctypes.CDLL("libcuda.so.1")


def max_active_clusters(kernel: cupy.RawKernel, cluster: int, threads: int, smem_bytes: int) -> int:
    """How many clusters of `kernel` can be resident at once (cuOccupancyMaxActiveClusters).

    CuPy has no binding for it; the driver call takes the kernel's own
    __cluster_dims__.  Shared memory and the non-portable-size attribute must
    be set on the kernel first.
    """
    config = _LaunchConfig(cluster, 1, 1, threads, 1, 1, smem_bytes, None, None, 0)
    count = ctypes.c_int(0)
    err = _libcuda().cuOccupancyMaxActiveClusters(
        ctypes.byref(count), ctypes.c_void_p(kernel.kernel.ptr), ctypes.byref(config)
    )
    if err != 0:
        raise RuntimeError(f"cuOccupancyMaxActiveClusters failed with CUresult {err}")
    return count.value
