"""The catalogue: every candidate the benchmark can time, its family, its traffic
model, and how to call it once (`prepare`).

The catalogue depends on the dtype (float32, float16, bfloat16) and the op
(softmax, log_softmax, softmax_backward, log_softmax_backward, and the loss ops
cross_entropy and cross_entropy_grad, which lab/loss.py runs and checks):
candidates(dtype, op).

Families (the `kind` of a candidate, the colour family of the plots):
  variant  softmax_lab's registered variants that hold the dtype and op, and "auto";
  copy     the floor: for a forward op, device-to-device copies of the same bytes
           (one read, one write); for a backward op, a two-read, one-write
           elementwise add of the same size (y and dy in, dx out);
  library  other implementations (torch, torch.compile, cupyx, quack);
  host     host microseconds per call on a tiny input (float32 softmax only).

A traffic model counts passes over a tensor of the input's size in device
memory; a backward op reads two such tensors (y and dy), so a two-read
backward makes 2 + 2 reads and a single-read one 1 + 1.  Libraries whose passes are not ours to know are modelled from their
documented algorithm; `softmax-lab profile` measures what they really move.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass

import numpy as np

from ..device import DeviceInfo
from ..problem import ALL_OPS, BACKWARD_OPS, DTYPES, ITEMSIZE, LOSS_OPS, Shape
from ..variants import choose, get_variant
from ..variants import cross_entropy as cross_entropy_variant
from ..variants import variants as registered_variants

HOST_SHAPE = (8, 1024)  # the tiny input of the host candidates
DEFAULT = ("float32", "softmax")  # the headline's dtype and op


def is_backward(op: str) -> bool:
    return op in BACKWARD_OPS


def floor_passes(op: str) -> int:
    """Passes over a tensor the least any implementation of `op` moves: 1 read + 1
    write forward, 2 reads (y, dy) + 1 write backward; a loss 1 read, with its
    gradient 1 read + 1 write."""
    if op in LOSS_OPS:
        floor = loss_floors(op)[0]
        return floor.reads + floor.writes
    return 3 if is_backward(op) else 2


def check_dtype_op(dtype: str, op: str) -> None:
    if dtype not in DTYPES or op not in ALL_OPS + LOSS_OPS:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)} and op one of {', '.join(ALL_OPS + LOSS_OPS)}; "
                         f"got {dtype!r}, {op!r}")


@dataclass(frozen=True)
class Candidate:
    name: str
    kind: str  # "variant", "copy", "library" or "host"
    reads: int  # passes over a tensor of x's size in device memory
    writes: int
    model: str  # where the passes come from

    def traffic_bytes(self, rows: int, cols: int, itemsize: int = ITEMSIZE) -> int:
        return rows * cols * (self.reads + self.writes) * itemsize


AUTO = Candidate("auto", "variant", 1, 1, "softmax_lab's variant='auto': the traffic of the variant it picks")
COPIES = (
    Candidate("copy.memcpy", "copy", 1, 1,
              "cupy.copyto(y, x) (torch: y.copy_(x)): cudaMemcpyAsync device to device"),
    Candidate("copy.elementwise", "copy", 1, 1, "a CuPy ElementwiseKernel y = x (halves: on 16-bit integer views)"),
    Candidate("copy.float4", "copy", 1, 1, "kernels/copy.cu: 16-byte loads and stores, a scalar tail"),
)
FLOORS = (  # a backward op's floor: read y and dy, write dx
    Candidate("floor.torch_add", "copy", 2, 1, "torch.add(y, dy, out=dx): two reads and one write"),
    Candidate("floor.cupy_add", "copy", 2, 1, "cupy.add(y, dy, out=dx): two reads and one write"),
)
LIBRARIES = (
    Candidate("torch.softmax", "library", 3, 1,
              "PyTorch's CUDA softmax on long rows: a max pass, a sum-of-exp pass, the write pass"),
    Candidate("torch.log_softmax", "library", 3, 1,
              "PyTorch's CUDA log_softmax on long rows: a max pass, a sum-of-exp pass, the write pass"),
    Candidate("torch.compile", "library", 2, 1,
              "torch.compile of the op (dynamic=False), Inductor: an online (max, sum) read, then the write pass"),
    Candidate("quack.softmax", "library", 1, 1,
              "quack.softmax.softmax_fwd (quack-kernels): the row held in (distributed) shared memory, one read"),
    Candidate("cupyx.softmax", "library", 5, 3,
              "cupyx.scipy.special.softmax, five array ops: amax (r), x - max (r, w), exp (r, w), sum (r), "
              "divide (r, w)"),
    Candidate("torch.softmax_backward", "library", 4, 1,
              "torch._softmax_backward_data(dy, y, -1, dtype): a dot(dy, y) pass over both, then the write pass"),
    Candidate("torch.log_softmax_backward", "library", 3, 1,
              "torch._log_softmax_backward_data(dy, y, -1, dtype): a sum(dy) pass, then the write pass (y, dy)"),
    Candidate("quack.softmax_backward", "library", 2, 1,
              "quack.softmax.softmax_bwd (quack-kernels): rows of y and dy held on chip, one read of each"),
)
HOST = (
    Candidate("host.auto", "host", 0, 0, f"host time of softmax_lab.softmax(x, out=y) on {HOST_SHAPE}"),
    Candidate("host.copy", "host", 0, 0, f"host time of cupy.copyto(y, x) on {HOST_SHAPE}"),
    Candidate("host.torch.softmax", "host", 0, 0, f"host time of torch.softmax(x, -1) on {HOST_SHAPE}"),
    Candidate("host.torch.softmax_lab", "host", 0, 0,
              f"host time of softmax_lab.softmax(x) on a torch tensor of {HOST_SHAPE}, its result allocated as "
              "torch.softmax's"),
)
# The loss ops (lab/loss.py runs and checks them): each row's loss, against one read of
# the logits; the loss with the gradient of the logits, against a copy.
READ = Candidate("read.words", "copy", 1, 0,
                 "kernels/read.cu: the tensor's 32-bit words summed (16-byte loads), one sum a block")
LOSS_AUTO = {
    "cross_entropy": Candidate("auto", "variant", 1, 0,
                               "softmax_lab.cross_entropy on rows split into chunks: kernels/cross_entropy.cu's "
                               "partials read the logits once (a row's online max and sum, and its plain sum), a "
                               "tiny pass merges them per row"),
    "cross_entropy_grad": Candidate("auto", "variant", 2, 1,
                                    "softmax_lab.cross_entropy(grad_out=) on rows split into chunks: the loss's "
                                    "read, then a second pass reads the logits again and writes the gradient"),
}
LOSS_PEERS = {
    "cross_entropy": (
        Candidate("torch.cross_entropy", "library", 3, 1,
                  "torch.nn.functional.cross_entropy: log_softmax (a max pass, a sum-of-exp pass, the write), "
                  "then nll_loss gathers one element a row"),
        Candidate("torch.compile", "library", 1, 0,
                  "torch.compile of F.cross_entropy (dynamic=False), Inductor: one online (max, sum) read, the "
                  "target's logit gathered"),
        Candidate("quack.cross_entropy", "library", 1, 0,
                  "quack.cross_entropy.cross_entropy_fwd (quack-kernels): the row held on chip, one read"),
        Candidate("liger.cross_entropy", "library", 1, 0,
                  "Liger-Kernel's cross_entropy_forward without a gradient: one online (max, sum) loop a row"),
    ),
    "cross_entropy_grad": (
        Candidate("torch.cross_entropy", "library", 6, 3,
                  "F.cross_entropy then its backward: log_softmax (3 reads, 1 write), nll_loss's backward "
                  "(a zero-filled write), log_softmax's backward (a sum pass, then y and dy read, dx written)"),
        Candidate("torch.compile", "library", 2, 1,
                  "torch.compile of F.cross_entropy and AOTAutograd's backward: the forward's online read, then "
                  "the logits read again and the gradient written"),
        Candidate("quack.cross_entropy", "library", 1, 1,
                  "quack cross_entropy_fwd(return_dx=True): the row held on chip, the gradient written from it"),
        Candidate("liger.cross_entropy", "library", 2, 1,
                  "Liger-Kernel's cross_entropy_forward with a gradient: an online (max, sum) loop, then a loop "
                  "that reads the row again and writes the gradient over the logits (in place)"),
    ),
}
COPY_NAMES = tuple(c.name for c in COPIES)
FLOOR_NAMES = tuple(c.name for c in FLOORS)
# The peers of each op (the columns of the dtype/op table), and their short names.
PEERS_BY_OP = {
    "softmax": ("torch.softmax", "torch.compile", "quack.softmax"),
    "log_softmax": ("torch.log_softmax", "torch.compile"),
    "softmax_backward": ("torch.softmax_backward", "quack.softmax_backward"),
    "log_softmax_backward": ("torch.log_softmax_backward",),
    "cross_entropy": ("torch.cross_entropy", "torch.compile", "quack.cross_entropy", "liger.cross_entropy"),
    "cross_entropy_grad": ("torch.cross_entropy", "torch.compile", "quack.cross_entropy", "liger.cross_entropy"),
}
PEERS = tuple(dict.fromkeys(n for names in PEERS_BY_OP.values() for n in names))
PEER_ROLE = {"torch.softmax": "torch", "torch.log_softmax": "torch", "torch.softmax_backward": "torch",
             "torch.log_softmax_backward": "torch", "torch.compile": "compile", "quack.softmax": "quack",
             "quack.softmax_backward": "quack", "torch.cross_entropy": "torch", "quack.cross_entropy": "quack",
             "liger.cross_entropy": "liger"}
ROLES = ("torch", "compile", "quack", "liger")
# The sweep's default candidates: auto against the floor and the peers of the op.
GRID_NAMES = ("auto", "copy.memcpy", "copy.float4", "torch.softmax", "torch.compile", "quack.softmax")


def grid_names(op: str = "softmax") -> tuple[str, ...]:
    return ("auto", *PEERS_BY_OP[op])


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


def _variant_passes(v, op: str) -> tuple[int, int]:
    """(reads, writes) of a registered variant for `op`, from its traffic model."""
    total = v.traffic_bytes(1, 1, 1, op=op)
    return total - v.writes, v.writes


def _holds(v, dtype: str, op: str) -> bool:
    return dtype in v.dtypes and op in v.ops


def candidates(dtype: str = "float32", op: str = "softmax") -> tuple[Candidate, ...]:
    """Every candidate for `dtype` and `op`: the registered variants that hold them
    (their own names and traffic), auto, the floor (copies forward, two-read adds
    backward), the peers, and for float32 softmax cupyx and the host candidates."""
    check_dtype_op(dtype, op)
    if op in LOSS_OPS:
        return (LOSS_AUTO[op], *loss_floors(op), *LOSS_PEERS[op])
    own = tuple(Candidate(v.name, "variant", *_variant_passes(v, op), v.summary)
                for v in registered_variants().values() if _holds(v, dtype, op))
    floor = FLOORS if is_backward(op) else COPIES
    peers = tuple(c for c in LIBRARIES if c.name in PEERS_BY_OP[op])
    if (dtype, op) == DEFAULT:
        peers += tuple(c for c in LIBRARIES if c.name == "cupyx.softmax")
    auto = Candidate("auto", "variant", *((2, 1) if is_backward(op) else (1, 1)), AUTO.model)
    return own + (auto,) + floor + peers + (HOST if (dtype, op) == DEFAULT else ())


def loss_floors(op: str) -> tuple[Candidate, ...]:
    """The floor of a loss op: one read of the logits for the loss alone, a copy with its gradient."""
    return (READ,) if op == "cross_entropy" else COPIES


def all_names() -> tuple[str, ...]:
    """The names of every candidate of every dtype and op."""
    return tuple(dict.fromkeys(c.name for d in DTYPES for o in ALL_OPS + LOSS_OPS for c in candidates(d, o)))


def select(names=None, default=None, dtype: str = "float32", op: str = "softmax") -> tuple[Candidate, ...]:
    """The candidates of (dtype, op) named (`default` names, or all, when None), in
    the order of candidates(); the floor is always included: the ceiling is
    computed from it.  A name no dtype or op knows is a ValueError; a name of
    another op (torch.softmax for log_softmax) is left out."""
    every = candidates(dtype, op)
    if names is None:
        names = default
    if names is None:
        return every
    known = set(all_names())
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown candidate(s) {', '.join(map(repr, unknown))}; known: {', '.join(sorted(known))}")
    return tuple(c for c in every if c.name in names or c.kind == "copy")


def pick(rows: int, cols: int, dev: DeviceInfo, dtype: str = "float32", op: str = "softmax"):
    """The variant that variant="auto" runs for this shape: the one place that calls
    softmax_lab's chooser, so a change of its arguments is made here alone."""
    if (dtype, op) == DEFAULT:
        return choose(rows, cols, dev)
    return choose(rows, cols, dev, dtype, op)


def resolve(c: Candidate, rows: int, cols: int, dev: DeviceInfo, dtype: str = "float32",
            op: str = "softmax") -> Candidate:
    """auto with the traffic of the variant it picks for the shape; others unchanged."""
    if c.name != AUTO.name:
        return c
    if op in LOSS_OPS:
        return _loss_auto(c, rows, cols, dev, dtype, op)
    v = pick(rows, cols, dev, dtype, op)
    return Candidate("auto", "variant", *_variant_passes(v, op), f"variant='auto' picks {v.name}: {v.summary}")


def _loss_auto(c: Candidate, rows: int, cols: int, dev: DeviceInfo, dtype: str, op: str) -> Candidate:
    """The loss's auto with the passes of the layout it runs for the shape."""
    grad = op == "cross_entropy_grad"
    shape = Shape(rows, cols, cols, cols, itemsize=DTYPES[dtype], dtype=dtype)
    held = cross_entropy_variant.held_plan(shape, dev) is not None
    how = ("the row held on chip across a cluster (kernels/cross_entropy_held.cu): "
           + ("the loss from one read, the gradient written from the registers" if grad else "the loss from one read")
           if held else c.model)
    return Candidate(c.name, c.kind, *cross_entropy_variant.passes(shape, dev, grad), how)


def skip_reason(c: Candidate, cols: int, dev: DeviceInfo, torch_reason: str | None,
                quack_reason: str | None, dtype: str = "float32", op: str = "softmax") -> str | None:
    """Why `c` cannot run rows of `cols` `dtype` elements of `op` here, known before any call; None if it may."""
    if op in LOSS_OPS:
        return _loss_skip_reason(c, cols, dtype, torch_reason, quack_reason)
    if dtype != "float32" and torch_reason:
        return f"{dtype} inputs are made with torch: {torch_reason}"
    if c.kind == "variant" and is_backward(op) and not has_op(op):
        return f"softmax_lab has no {op} in this build"
    if c.kind == "variant" and c.name != AUTO.name:
        v = get_variant(c.name)
        if (dtype, op) == DEFAULT:
            return v.unsupported_reason(cols, dev)
        return v.unsupported_reason(cols, dev, dtype, op)
    if c.name.startswith(("torch.", "host.torch.", "quack.", "floor.torch")) and torch_reason:
        return torch_reason
    if c.name == "floor.cupy_add" and dtype == "bfloat16":
        return "CuPy has no bfloat16 add"
    if c.name == "copy.float4" and cols * DTYPES[dtype] % 4:
        return f"kernels/copy.cu moves 4-byte words; a row of {cols} {dtype} is not a whole number of them"
    if c.name.startswith("quack."):
        if quack_reason:
            return quack_reason
        if cols % 4:
            return f"quack asserts N % 4 == 0; N = {cols}"
    return None


def _loss_skip_reason(c: Candidate, cols: int, dtype: str, torch_reason, quack_reason) -> str | None:
    if (dtype != "float32" or c.kind == "library") and torch_reason:
        return torch_reason
    if c.name == "copy.float4" and cols * DTYPES[dtype] % 4:
        return f"kernels/copy.cu moves 4-byte words; a row of {cols} {dtype} is not a whole number of them"
    if c.name.startswith("quack."):
        if quack_reason:
            return quack_reason
        if cols * DTYPES[dtype] % 16:
            return f"quack's cross_entropy loads 16 bytes at a time: N * {DTYPES[dtype]} % 16 == 0; N = {cols}"
    if c.name.startswith("liger."):
        return liger_status()
    return None


def has_op(op: str) -> bool:
    """Whether softmax_lab has the function `op` (the backward ops arrive in their own branch)."""
    import importlib

    return callable(getattr(importlib.import_module("..", __package__), op, None))  # softmax_lab's public functions


# ------------------------------------------------------------ calling them
@dataclass
class Prepared:
    """One candidate, ready to run: call() runs it once on the current stream and
    returns its output (a CuPy array or a torch tensor); poison() fills what the
    next call's output will occupy with NaN; `poisoned` says what that covers."""

    call: object
    poison: object
    poisoned: str
    again: object = None  # an in-place candidate: its inputs restored, one more call (for the last check)


@dataclass
class Arrays:
    """The arrays of one benchmark shape: x, the input of a forward op or y (the
    forward output) of a backward op; dy, a backward op's incoming gradient; out,
    the output buffer.  CuPy arrays for float32, torch tensors for the halves."""

    x: object
    out: object
    dy: object = None
    dtype: str = "float32"
    op: str = "softmax"

    @property
    def is_torch(self) -> bool:
        return hasattr(self.x, "data_ptr")


def _fill_nan(a) -> None:
    """NaN into a, on CuPy's current stream (the timed one), torch tensors too."""
    if hasattr(a, "fill_"):
        raw_view(a).fill(0x7FC0 if str(a.dtype) == "torch.bfloat16" else np.float16("nan"))  # quiet NaN bits
    else:
        a.fill(np.float32("nan"))


def raw_view(a):
    """A CuPy view of the same memory, of a dtype CuPy has (bfloat16 as int16); zero-copy."""
    import cupy

    if not hasattr(a, "data_ptr"):
        return a
    if str(a.dtype) == "torch.bfloat16":
        import torch

        a = a.view(torch.int16)
    return cupy.asarray(a)


@contextlib.contextmanager
def timed_stream(torch=None):
    """A new non-blocking CuPy stream, current for CuPy and, given torch, for torch too, while
    the block lasts: every candidate's call is then written as a user writes it, with no
    stream argument or stream context of its own (a context around each call would cost a
    small call several microseconds), and runs on this one stream."""
    import cupy

    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        if torch is None:
            yield stream
        else:
            with torch.cuda.stream(torch.cuda.ExternalStream(stream.ptr)):
                yield stream


def prepare(c: Candidate, arrays: Arrays, dev: DeviceInfo, torch=None) -> Prepared:
    """How to run candidate `c` on `arrays` (for its dtype and op) into arrays.out, inside
    timed_stream(torch)."""
    import cupy

    x, dy, y, op = arrays.x, arrays.dy, arrays.out, arrays.op

    def poison_y():
        _fill_nan(y)

    if c.kind == "variant":
        import importlib

        fn = getattr(importlib.import_module("..", __package__), op)  # softmax_lab.softmax, ... as a user calls them
        if is_backward(op):
            return Prepared(lambda: fn(dy, x, variant=c.name, out=y), poison_y, "the out buffer")
        return Prepared(lambda: fn(x, variant=c.name, out=y), poison_y, "the out buffer")
    if c.name == "copy.memcpy":
        xv, yv = raw_view(x), raw_view(y)

        def memcpy():
            cupy.copyto(yv, xv)
            return y

        return Prepared(memcpy, poison_y, "the out buffer")
    if c.name == "copy.elementwise":
        kernel = cupy.ElementwiseKernel("T x", "T y", "y = x", "softmax_lab_copy")
        xv, yv = raw_view(x), raw_view(y)

        def elementwise():
            kernel(xv, yv)
            return y

        return Prepared(elementwise, poison_y, "the out buffer")
    if c.name == "copy.float4":
        return Prepared(_float4_copy(raw_view(x), raw_view(y), dev, y), poison_y, "the out buffer")
    if c.name == "floor.cupy_add":
        xv, dyv, yv = raw_view(x), raw_view(dy), raw_view(y)

        def cupy_add():
            cupy.add(xv, dyv, out=yv)
            return y

        return Prepared(cupy_add, poison_y, "the out buffer")
    if c.name == "cupyx.softmax":
        from cupyx.scipy.special import softmax as cupyx_softmax

        return Prepared(lambda: cupyx_softmax(x, axis=-1), lambda: None, "nothing: each call allocates its output")
    if c.kind in ("library", "copy"):  # torch peers and torch.add: torch tensors on torch's current stream
        tensors = [_as_torch(a, dev, torch) for a in ((x, dy) if is_backward(op) else (x,))]
        if c.name == "floor.torch_add":
            yt = _as_torch(y, dev, torch)

            def add():
                torch.add(tensors[0], tensors[1], out=yt)
                return y

            return Prepared(add, poison_y, "the out buffer")
        fn = _torch_function(c.name, torch, op)

        def call():
            return fn(*tensors)

        def poison():  # a NaN block of the output's size, freed to torch's cache, where the next output finds it
            torch.full_like(tensors[0], float("nan"))

        return Prepared(call, poison, "a NaN block left in torch's allocator cache")
    raise ValueError(f"no way to run candidate {c.name!r}")


def _as_torch(a, dev: DeviceInfo, torch):
    if hasattr(a, "data_ptr"):
        return a
    t = torch.as_tensor(a, device=f"cuda:{dev.id}")  # zero-copy, through __cuda_array_interface__
    if t.data_ptr() != a.data.ptr:
        raise RuntimeError("torch.as_tensor copied the input instead of sharing it")
    return t


def prepare_host(c: Candidate, dev: DeviceInfo, torch=None):
    """call() of a host candidate on a fresh HOST_SHAPE input (returns nothing to check)."""
    import cupy

    from ..api import softmax

    x = cupy.random.default_rng(0).standard_normal(HOST_SHAPE, dtype=cupy.float32)
    y = cupy.empty_like(x)
    if c.name == "host.auto":
        return lambda: softmax(x, out=y)
    if c.name == "host.copy":
        return lambda: cupy.copyto(y, x)
    if c.name == "host.torch.softmax":
        xt = torch.as_tensor(x, device=f"cuda:{dev.id}")
        return lambda: torch.softmax(xt, -1)
    if c.name == "host.torch.softmax_lab":
        xt = torch.as_tensor(x, device=f"cuda:{dev.id}")
        return lambda: softmax(xt)
    raise ValueError(f"no host candidate {c.name!r}")


def _torch_function(name: str, torch, op: str = "softmax"):
    """A function of the op's tensors: (x,) forward, (y, dy) backward."""
    if name == "torch.softmax":
        return lambda t: torch.softmax(t, -1)
    if name == "torch.log_softmax":
        return lambda t: torch.log_softmax(t, -1)
    if name == "torch.compile":
        # Specialized to each shape (dynamic=False), as a user's fixed-shape model
        # gets it; dynamo's cache is reset so a sweep's shapes never hit its
        # recompile limit.  Each shape pays one compile (about 1-3 s), outside
        # the timed calls: the check call compiles.
        torch._dynamo.reset()
        return torch.compile(_log_softmax_last if op == "log_softmax" else _softmax_last, dynamic=False)
    if name == "quack.softmax":
        from quack.softmax import softmax_fwd  # compiles once per row length (cached)

        return softmax_fwd
    if name == "torch.softmax_backward":
        return lambda y, dy: torch._softmax_backward_data(dy, y, -1, y.dtype)
    if name == "torch.log_softmax_backward":
        return lambda y, dy: torch._log_softmax_backward_data(dy, y, -1, y.dtype)
    if name == "quack.softmax_backward":
        from quack.softmax import softmax_bwd

        return lambda y, dy: softmax_bwd(dy, y)
    raise ValueError(f"no torch function for {name!r}")


def _softmax_last(t):
    import torch

    return torch.softmax(t, -1)


def _log_softmax_last(t):
    import torch

    return torch.log_softmax(t, -1)


def _float4_copy(x, y, dev: DeviceInfo, result=None):
    """kernels/copy.cu over the bytes of x (CuPy arrays), as 4-byte words; returns `result` (y by default)."""
    from .. import loader

    if x.nbytes % 4:
        raise ValueError("copy.float4 moves 4-byte words; the tensor is not a whole number of them")
    n = x.nbytes // 4
    if x.data.ptr % 16 or y.data.ptr % 16:
        raise ValueError("copy.float4 needs 16-byte aligned arrays")
    result = y if result is None else result
    kernel = loader.get_kernel("copy.cu", "copy_f32", device_id=dev.id)
    threads = 256
    grid = min(max(1, -(-(n // 4) // threads)), 2**31 - 1)

    xp, yp = np.uint64(x.data.ptr), np.uint64(y.data.ptr)

    def call():
        kernel((grid,), (threads,), (xp, yp, np.int64(n)))
        return result

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
        from quack.softmax import softmax_bwd, softmax_fwd  # noqa: F401
    except Exception as e:
        return f"quack is not importable ({one_line(e)}); pip install quack-kernels to compare against it"
    return None


def liger_status() -> str | None:
    """None if Liger-Kernel's cross-entropy is importable, else why not (an optional peer)."""
    try:
        from liger_kernel.ops.cross_entropy import cross_entropy_forward  # noqa: F401
    except Exception as e:
        return f"Liger-Kernel is not importable ({one_line(e)}); pip install liger-kernel to compare against it"
    return None


def one_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {' '.join(str(e).split())}"[:500]
