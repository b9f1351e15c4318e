"""The lab's cross-entropy ops: `--op cross_entropy` (each row's loss, forward only)
and `--op cross_entropy_grad` (each row's loss and d loss / d logits for an incoming
1 a row: what a training step needs of its logits).

Their inputs are logits (standard normal, as the softmax ops' x) and one target a
row (uniform over the vocabulary, int64).  Their floors, measured as the copies are:
  cross_entropy       one read of the logits: kernels/read.cu, a sum of
                      the tensor's 32-bit words (one 16-byte load each), one per block;
  cross_entropy_grad  one read and one write: the copies of the softmax ops.
Every candidate computes reduction="none": each row's loss is checked, and the
gradient is that of the sum of the rows' losses.

Checks: the sampled rows' losses (and gradients) against float64 by relative error,
every row's loss against float64, and every row of a gradient against its invariant
(the sum of a row of softmax - onehot is 0).  An in-place candidate (Liger's
gradient overwrites its logits) is checked after the timed calls on one more call
from the logits restored.
"""

from __future__ import annotations

import math

import numpy as np

from ..problem import LOSS_OPS
from ..reference import array_module, cross_entropy_reference, relative_error, to_float64
from . import records
from .candidates import Arrays, Candidate, Prepared, _as_torch, _fill_nan, prepare, raw_view

LOSS_TOLERANCE = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 8e-3}  # a loss in the dtype: 2 ulp
GRAD_TOLERANCE = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 8e-3}
GRAD_ROW_TOLERANCE = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 4e-2}
CHUNK_ELEMENTS = 2**26


def is_loss(op: str) -> bool:
    return op in LOSS_OPS


# ------------------------------------------------------------ inputs and calls
def make_arrays(rows: int, cols: int, dtype: str, op: str, seed: int, torch=None) -> Arrays:
    """Arrays(logits, the gradient's buffer (cross_entropy_grad) or None, targets as dy):
    float32 logits as CuPy, halves as torch (rounded from the same draw); targets int64,
    uniform over the vocabulary."""
    import cupy

    rng = cupy.random.default_rng(seed)
    x = rng.standard_normal((rows, cols), dtype=cupy.float32)
    t = rng.integers(0, cols, rows, dtype=cupy.int64)
    if dtype != "float32":
        cupy.cuda.get_current_stream().synchronize()
        device = f"cuda:{x.device.id}"
        x = torch.as_tensor(x, device=device).to(getattr(torch, dtype))
        t = torch.as_tensor(t, device=device)
        torch.cuda.synchronize(device)
    out = None
    if op == "cross_entropy_grad":
        out = x.new_empty(x.shape) if hasattr(x, "data_ptr") else cupy.empty_like(x)
    return Arrays(x, out, t, dtype, op)


def prepare_loss(c: Candidate, x, t, out, op: str, dev, torch=None) -> Prepared:
    """How to run candidate `c` of a loss op once: call() returns the loss per row, or
    (loss, gradient) for cross_entropy_grad, or the floor's output; inside
    candidates.timed_stream(torch)."""
    grad = op == "cross_entropy_grad"

    def poison_out():
        if out is not None:
            _fill_nan(out)

    if c.kind == "copy":
        if c.name == "read.words":
            return _read_words(raw_view(x), dev)
        return prepare(c, Arrays(x, out), dev, torch)
    if c.name == "auto":
        from ..cross_entropy import cross_entropy

        if grad:
            return Prepared(lambda: (cross_entropy(x, t, reduction="none", grad_out=out), out),
                            poison_out, "the gradient buffer")
        return Prepared(lambda: cross_entropy(x, t, reduction="none"), lambda: None,
                        "nothing: each call allocates its loss")
    xt, tt = _as_torch(x, dev, torch), _as_torch(t, dev, torch)
    fn = _torch_loss(c.name, torch, grad)
    in_place = grad and c.name == "liger.cross_entropy"  # Liger writes the gradient over its logits
    own = xt.clone() if in_place else xt  # so the other candidates' logits stay whole
    leaf = xt.detach().requires_grad_() if grad and c.name.startswith("torch.") else None
    ones = torch.ones(xt.shape[0], device=xt.device, dtype=xt.dtype) if leaf is not None else None

    def call():
        if leaf is None:
            return fn(own, tt)
        leaf.grad = None
        loss = fn(leaf, tt)
        loss.backward(ones)  # an incoming 1 a row: the gradient of the rows' sum
        return loss.detach(), leaf.grad

    def poison():  # torch's outputs are allocated: a NaN block of the output's size left in its cache
        torch.full_like(xt, float("nan"))

    def again():
        with torch.no_grad():  # own requires grad once Liger has run on it
            own.copy_(xt)
        return call()

    return Prepared(call, poison, "a NaN block left in torch's allocator cache", again if in_place else None)


def _torch_loss(name: str, torch, grad: bool):
    F = torch.nn.functional
    if name == "torch.cross_entropy":
        return lambda x, t: F.cross_entropy(x, t, reduction="none")
    if name == "torch.compile":
        torch._dynamo.reset()  # as candidates._torch_function: one compile per shape, outside the timed calls
        return torch.compile(_cross_entropy_none, dynamic=False)
    if name == "quack.cross_entropy":
        from quack.cross_entropy import cross_entropy_fwd

        if grad:
            return lambda x, t: cross_entropy_fwd(x, t, return_dx=True)
        return lambda x, t: cross_entropy_fwd(x, t)
    if name == "liger.cross_entropy":
        from liger_kernel.ops.cross_entropy import cross_entropy_forward

        def liger(x, t):
            # Liger writes the gradient over x where x requires grad (x: the candidate's own copy)
            loss, *_, out = cross_entropy_forward(x.requires_grad_() if grad else x, t, None, -100, 0.0, 0.0,
                                                  "none", None, False)
            return (loss.detach(), out.detach()) if grad else loss.detach()  # the check reads them as arrays

        return liger
    raise ValueError(f"no way to run candidate {name!r}")


def _cross_entropy_none(x, t):
    import torch

    return torch.nn.functional.cross_entropy(x, t, reduction="none")


def _read_words(xv, dev) -> Prepared:
    """kernels/read.cu over the bytes of xv (a CuPy view): returns (block sums, the words)."""
    import cupy

    from .. import loader

    if xv.nbytes % 4 or xv.data.ptr % 16:
        raise ValueError("read.words reads 16-byte aligned 4-byte words")
    words = xv.reshape(-1).view(cupy.uint32)  # the whole tensor's words (rows of odd halves too)
    kernel = loader.get_kernel("read.cu", "read_words", device_id=dev.id)
    threads = 256
    grid = max(1, min(-(-(words.size // 4) // threads), dev.sm_count * 8))
    sums = cupy.empty(grid, cupy.uint32)

    def call():
        kernel((grid,), (threads,), (words, np.int64(words.size), sums))
        return sums, words

    return Prepared(call, lambda: sums.fill(0xDEADBEEF), "the block sums")


# ------------------------------------------------------------ checks
def references(x, t, idx: list[int], grad: bool) -> dict:
    """float64 references: the sampled rows' losses (and gradients), every row's loss."""
    t = _host_or_cupy(t)
    ref = cross_entropy_reference(to_float64(x[idx]), t[idx], reduction="none", gradient=grad)
    step = max(1, CHUNK_ELEMENTS // x.shape[1])
    every = [cross_entropy_reference(to_float64(x[r:r + step]), t[r:r + step], reduction="none",
                                     gradient=False)["loss"] for r in range(0, x.shape[0], step)]
    return {"loss": ref["loss"], "grad": ref["grad"], "every_loss": array_module(ref["loss"]).concatenate(every)}


def check(out, *, x, refs: dict, idx: list[int], dtype: str, op: str, c: Candidate) -> dict:
    """One call's output checked: relative error of the sampled rows (loss, and gradient),
    the largest error of every row's loss, and every gradient row's invariant."""
    if c.name == "read.words":
        sums, words = out
        import cupy

        total = int(cupy.sum(sums, dtype=cupy.uint64)) % 2**32
        want = int(cupy.sum(words, dtype=cupy.uint64)) % 2**32
        ok = total == want
        return {"relative_error": 0.0 if ok else None, "row_sum_error": 0.0 if ok else None, "passed": ok}
    if c.kind == "copy":  # a copy of the logits
        import cupy

        sync_torch(out)
        ok = bool(cupy.array_equal(raw_view(out), raw_view(x)))
        return {"relative_error": 0.0 if ok else None, "row_sum_error": 0.0 if ok else None, "passed": ok}
    loss, grad = (out if op == "cross_entropy_grad" else (out, None))
    sync_torch(loss)
    loss_all = to_float64(loss)
    loss_err = relative_error(loss_all[idx], refs["loss"])
    every = refs["every_loss"]
    xp = array_module(every)
    loss_all = xp.asarray(loss_all)
    diff = xp.abs(loss_all - every) / xp.maximum(xp.abs(every), 1.0)
    every_err = float(xp.max(xp.where(xp.isfinite(diff), diff, xp.inf)))
    errors = [loss_err]
    row_err = every_err
    if grad is not None:
        g = to_float64(grad[idx])
        errors.append(relative_error(g, refs["grad"]))
        row_err = max(row_err, _grad_rows_error(grad))
    err = max(errors)
    tol = max(LOSS_TOLERANCE[dtype], GRAD_TOLERANCE[dtype])
    passed = err <= tol and every_err <= LOSS_TOLERANCE[dtype] and row_err <= max(GRAD_ROW_TOLERANCE[dtype],
                                                                                   LOSS_TOLERANCE[dtype])
    return {"relative_error": records.finite_or_none(err), "row_sum_error": records.finite_or_none(row_err), "passed": bool(passed)}


def _grad_rows_error(grad) -> float:
    """Over every row, |sum(dx)| / sum|dx|: a row of softmax - onehot sums to 0."""
    worst = 0.0
    step = max(1, CHUNK_ELEMENTS // grad.shape[1])
    for r in range(0, grad.shape[0], step):
        g = to_float64(grad[r:r + step])
        xp = array_module(g)
        e = xp.abs(g.sum(axis=-1)) / xp.maximum(xp.abs(g).sum(axis=-1), 1e-300)
        m = float(xp.max(xp.where(xp.isfinite(e), e, xp.inf)))
        worst = m if not m <= worst else worst
    return math.inf if math.isnan(worst) else worst


def sync_torch(a) -> None:
    if hasattr(a, "data_ptr"):
        import cupy

        cupy.cuda.get_current_stream().synchronize()


def _host_or_cupy(t):
    if hasattr(t, "data_ptr"):
        import cupy

        return cupy.asarray(t)
    return t
