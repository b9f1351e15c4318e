"""The catalogue: every candidate the benchmark can time, its family, its traffic
model, and how to call it once (`prepare`).

Families (the `kind` of a candidate, the colour family of the plots):
  variant  softmax_lab's registered variants, and "auto";
  copy     device-to-device copies of the same bytes: the ceiling;
  library  other softmax implementations (torch, torch.compile, cupyx, quack);
  host     host microseconds per call on a tiny input (not a bandwidth measure).

A traffic model counts passes over a tensor of the input's size in device
memory.  Libraries whose passes are not ours to know are modelled from their
documented algorithm; `softmax-lab profile` measures what they really move.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from .device import DeviceInfo
from .variants import choose, get_variant
from .variants import variants as registered_variants

ITEMSIZE = 4  # float32
HOST_SHAPE = (8, 1024)  # the tiny input of the host candidates


@dataclass(frozen=True)
class Candidate:
    name: str
    kind: str  # "variant", "copy", "library" or "host"
    reads: int  # passes over a tensor of x's size in device memory
    writes: int
    model: str  # where the passes come from

    def traffic_bytes(self, rows: int, cols: int) -> int:
        return rows * cols * (self.reads + self.writes) * ITEMSIZE


AUTO = Candidate("auto", "variant", 1, 1, "softmax_lab.softmax(variant='auto'): the traffic of the variant it picks")
COPIES = (
    Candidate("copy.memcpy", "copy", 1, 1,
              "cupy.copyto(y, x): cudaMemcpyAsync device to device (y[...] = x takes the same path)"),
    Candidate("copy.elementwise", "copy", 1, 1, "a CuPy ElementwiseKernel y = x"),
    Candidate("copy.float4", "copy", 1, 1, "kernels/copy.cu: 16-byte loads and stores, a scalar tail"),
)
LIBRARIES = (
    Candidate("torch.softmax", "library", 3, 1,
              "PyTorch's CUDA softmax on long rows: a max pass, a sum-of-exp pass, the write pass"),
    Candidate("torch.compile", "library", 2, 1,
              "torch.compile(torch.softmax, dynamic=False), Inductor: an online (max, sum) read, then the write pass"),
    Candidate("quack.softmax", "library", 1, 1,
              "quack.softmax.softmax_fwd (quack-kernels): the row held in (distributed) shared memory, one read"),
    Candidate("cupyx.softmax", "library", 5, 3,
              "cupyx.scipy.special.softmax, five array ops: amax (r), x - max (r, w), exp (r, w), sum (r), "
              "divide (r, w)"),
)
HOST = (
    Candidate("host.auto", "host", 0, 0, f"host time of softmax_lab.softmax(x, out=y) on {HOST_SHAPE}"),
    Candidate("host.copy", "host", 0, 0, f"host time of cupy.copyto(y, x) on {HOST_SHAPE}"),
    Candidate("host.torch.softmax", "host", 0, 0, f"host time of torch.softmax(x, -1) on {HOST_SHAPE}"),
)
COPY_NAMES = tuple(c.name for c in COPIES)
# The sweep's default candidates: auto against the copies and the peers.
GRID_NAMES = ("auto", "copy.memcpy", "copy.float4", "torch.softmax", "torch.compile", "quack.softmax")
PEERS = ("torch.softmax", "torch.compile", "quack.softmax")

# The device the recorded results come from, for the traffic tables of a
# machine without a GPU (auto's pick depends on the device).
REFERENCE_DEVICE = {
    "id": 0, "name": "NVIDIA H200", "compute_capability": 90, "sm_count": 132, "l2_bytes": 60 * 2**20,
    "smem_optin_bytes": 232448, "smem_per_sm_bytes": 233472, "max_cluster_size": 16, "regs_per_sm": 65536,
    "regs_per_block": 65536, "max_threads_per_sm": 2048, "max_threads_per_block": 1024, "warp_size": 32,
}


def reference_device() -> DeviceInfo:
    """A DeviceInfo of the H200 the results were recorded on (no GPU needed)."""
    known = {f.name: REFERENCE_DEVICE[f.name] for f in dataclasses.fields(DeviceInfo) if f.name in REFERENCE_DEVICE}
    return DeviceInfo(**known)


def candidates() -> tuple[Candidate, ...]:
    """Every candidate: the registered variants (their own names and traffic), auto,
    the copies, the libraries, the host-overhead candidates."""
    own = tuple(Candidate(v.name, "variant", v.reads, v.writes, v.summary) for v in registered_variants().values())
    return own + (AUTO,) + COPIES + LIBRARIES + HOST


def select(names=None, default=None) -> tuple[Candidate, ...]:
    """The candidates named (`default` names, or all, when None), in the order of
    candidates(); the copies are always included: the ceiling is computed from them."""
    every = candidates()
    if names is None:
        names = default
    if names is None:
        return every
    known = {c.name for c in every}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown candidate(s) {', '.join(map(repr, unknown))}; known: {', '.join(sorted(known))}")
    return tuple(c for c in every if c.name in names or c.kind == "copy")


def pick(rows: int, cols: int, dev: DeviceInfo):
    """The variant that variant="auto" runs for this shape: the one place that calls
    softmax_lab's chooser, so a change of its arguments is made here alone."""
    return choose(rows, cols, dev)


def resolve(c: Candidate, rows: int, cols: int, dev: DeviceInfo) -> Candidate:
    """auto with the traffic of the variant it picks for the shape; others unchanged."""
    if c.name != AUTO.name:
        return c
    v = pick(rows, cols, dev)
    return Candidate("auto", "variant", v.reads, v.writes, f"variant='auto' picks {v.name}: {v.summary}")


def skip_reason(c: Candidate, cols: int, dev: DeviceInfo, torch_reason: str | None,
                quack_reason: str | None) -> str | None:
    """Why `c` cannot run rows of `cols` here, known before any call; None if it may."""
    if c.kind == "variant" and c.name != AUTO.name:
        return get_variant(c.name).unsupported_reason(cols, dev)
    if c.name.startswith(("torch.", "host.torch.", "quack.")) and torch_reason:
        return torch_reason
    if c.name.startswith("quack."):
        if quack_reason:
            return quack_reason
        if cols % 4:
            return f"quack asserts N % 4 == 0; N = {cols}"
    return None


# ------------------------------------------------------------ calling them
@dataclass
class Prepared:
    """One candidate, ready to run: call() runs it once on the current stream and
    returns its output (a CuPy array or a torch tensor); poison() fills what the
    next call's output will occupy with NaN; `poisoned` says what that covers."""

    call: object
    poison: object
    poisoned: str


def prepare(c: Candidate, x, y, dev: DeviceInfo, torch=None) -> Prepared:
    """How to run candidate `c` on x (rows x cols float32 CuPy array) into y."""
    import cupy

    def poison_y():
        y.fill(np.float32("nan"))

    if c.kind == "variant":
        from .api import softmax

        return Prepared(lambda: softmax(x, variant=c.name, out=y), poison_y, "the out buffer")
    if c.name == "copy.memcpy":
        def memcpy():
            cupy.copyto(y, x)
            return y

        return Prepared(memcpy, poison_y, "the out buffer")
    if c.name == "copy.elementwise":
        kernel = cupy.ElementwiseKernel("T x", "T y", "y = x", "softmax_lab_copy")
        return Prepared(lambda: kernel(x, y), poison_y, "the out buffer")
    if c.name == "copy.float4":
        return Prepared(_float4_copy(x, y, dev), poison_y, "the out buffer")
    if c.name == "cupyx.softmax":
        from cupyx.scipy.special import softmax as cupyx_softmax

        return Prepared(lambda: cupyx_softmax(x, axis=-1), lambda: None, "nothing: each call allocates its output")
    if c.kind == "library":  # torch.softmax, torch.compile, quack.softmax: torch tensors on our stream
        xt = torch.as_tensor(x, device=f"cuda:{dev.id}")  # zero-copy, through __cuda_array_interface__
        if xt.data_ptr() != x.data.ptr:
            raise RuntimeError("torch.as_tensor copied the input instead of sharing it")
        fn = _torch_function(c.name, torch)
        ts = torch.cuda.ExternalStream(cupy.cuda.get_current_stream().ptr)

        def call():
            with torch.cuda.stream(ts):
                return fn(xt)

        def poison():  # a NaN block of the output's size, freed to torch's cache, where the next output finds it
            with torch.cuda.stream(ts):
                torch.full_like(xt, float("nan"))

        return Prepared(call, poison, "a NaN block left in torch's allocator cache")
    raise ValueError(f"no way to run candidate {c.name!r}")


def prepare_host(c: Candidate, dev: DeviceInfo, torch=None):
    """call() of a host candidate on a fresh HOST_SHAPE input (returns nothing to check)."""
    import cupy

    x = cupy.random.default_rng(0).standard_normal(HOST_SHAPE, dtype=cupy.float32)
    y = cupy.empty_like(x)
    if c.name == "host.auto":
        from .api import softmax

        return lambda: softmax(x, out=y)
    if c.name == "host.copy":
        return lambda: cupy.copyto(y, x)
    if c.name == "host.torch.softmax":
        xt = torch.as_tensor(x, device=f"cuda:{dev.id}")
        ts = torch.cuda.ExternalStream(cupy.cuda.get_current_stream().ptr)

        def call():
            with torch.cuda.stream(ts):
                return torch.softmax(xt, -1)

        return call
    raise ValueError(f"no host candidate {c.name!r}")


def _torch_function(name: str, torch):
    if name == "torch.softmax":
        return lambda t: torch.softmax(t, -1)
    if name == "torch.compile":
        # Specialized to each shape (dynamic=False), as a user's fixed-shape model
        # gets it; dynamo's cache is reset so a sweep's shapes never hit its
        # recompile limit.  Each shape pays one compile (about 1-3 s), outside
        # the timed calls: the check call compiles.
        torch._dynamo.reset()
        return torch.compile(_softmax_last, dynamic=False)
    if name == "quack.softmax":
        from quack.softmax import softmax_fwd  # compiles once per row length (cached)

        return softmax_fwd
    raise ValueError(f"no torch function for {name!r}")


def _softmax_last(t):
    import torch

    return torch.softmax(t, -1)


def _float4_copy(x, y, dev: DeviceInfo):
    from . import loader

    n = x.size
    if x.data.ptr % 16 or y.data.ptr % 16:
        raise ValueError("copy.float4 needs 16-byte aligned arrays")
    kernel = loader.get_kernel("copy.cu", "copy_f32", device_id=dev.id)
    threads = 256
    grid = min(max(1, -(-(n // 4) // threads)), 2**31 - 1)

    def call():
        kernel((grid,), (threads,), (x, y, np.int64(n)))
        return y

    return call


def torch_status():
    """(torch, None) if torch can run on the GPU here, else (None, why not)."""
    try:
        import torch
    except Exception as e:
        return None, f"torch is not importable ({one_line(e)})"
    if not torch.cuda.is_available():
        return None, "torch sees no CUDA device"
    return torch, None


def quack_status() -> str | None:
    """None if quack's softmax is importable, else why not (it is an optional peer)."""
    try:
        from quack.softmax import softmax_fwd  # noqa: F401
    except Exception as e:
        return f"quack is not importable ({one_line(e)}); pip install quack-kernels to compare against it"
    return None


def one_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {' '.join(str(e).split())}"[:500]
