"""softmax and log_softmax as torch custom ops, so that models train with them and
torch.compile, torch.export and CUDA graphs take them whole.

    import softmax_lab.torch as slt
    p = slt.softmax(logits, dim=-1)          # forward: softmax_lab.softmax
    loss = -slt.log_softmax(logits)[..., k].mean()
    loss.backward()                          # backward: softmax_lab.log_softmax_backward

The ops are registered with torch.library as softmax_lab::softmax, ::log_softmax,
::softmax_backward and ::log_softmax_backward (each also as an `_out` op that writes a
given tensor), with:
- fake implementations: the result's shape, dtype and strides without running anything,
  so that torch.compile(fullgraph=True) and torch.export trace through them;
- autograd: the forward keeps its output for the backward, as torch's own softmax
  does.  Double backward is not supported (the backward ops have no gradient of their
  own), nor is autograd through `out=`, as for torch's functions;
- autocast: under torch.autocast on CUDA the forward ops run in float32, as torch's
  softmax and log_softmax do (they are on autocast's float32 list): a float16 input
  gives a float32 result.  With out= the result has out's dtype, which must be x's.

Both directions run on torch's current stream (the autograd engine sets it to the
forward's stream for the backward), in the input's dtype (float32, float16 or
bfloat16) with float32 math inside.  An eager call that needs neither autograd nor
autocast calls softmax_lab.softmax directly, without the dispatcher's cost.
`import softmax_lab` does not import torch; importing this module does.
"""

from __future__ import annotations

import torch

from . import api
from .cross_entropy import cross_entropy as cross_entropy_of
from .cross_entropy import loss_options

_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _check(x: torch.Tensor, dim: int, what: str = "x") -> int:
    """dim normalised; the errors softmax_lab.softmax raises for a 0-d x, a dim out of
    range or a dtype it does not take, raised while tracing too."""
    if isinstance(dim, torch.SymInt):  # traced with dynamic ints: the row axis is fixed by the graph
        dim = int(dim)
    if x.dim() == 0:
        raise ValueError("softmax needs an array of at least one dimension; got a 0-d array")
    if x.dtype not in _DTYPES:
        raise TypeError(f"{what} has dtype {str(x.dtype).removeprefix('torch.')}; "
                        "softmax_lab takes float32, float16 and bfloat16")
    return api.check_axis(dim, x.dim())


def _result_like(x: torch.Tensor, dim: int) -> torch.Tensor:
    """An uninitialised result laid out as softmax_lab lays out a new one: the rows
    contiguous, seen with the row axis moved back to dim."""
    dim = _check(x, dim)
    moved = x.movedim(dim, -1).shape
    return torch.empty(moved, dtype=x.dtype, device=x.device).movedim(-1, dim)


def _define(op: str, backward: bool):
    """softmax_lab::<op> and softmax_lab::<op>_out, with their fake implementations."""
    run = getattr(api, op)
    if backward:
        @torch.library.custom_op(f"softmax_lab::{op}", mutates_args=())
        def functional(dy: torch.Tensor, y: torch.Tensor, dim: int) -> torch.Tensor:
            if y.numel() == 0:
                return _result_like(y, dim)
            return run(dy, y, dim)

        @functional.register_fake
        def _(dy, y, dim):
            _check(dy, dim, "dy")
            return _result_like(y, dim)

        @torch.library.custom_op(f"softmax_lab::{op}_out", mutates_args={"out"})
        def into(dy: torch.Tensor, y: torch.Tensor, dim: int, out: torch.Tensor) -> None:
            if y.numel():
                run(dy, y, dim, out=out)

        @into.register_fake
        def _(dy, y, dim, out):
            _check(y, dim, "y")

        return functional, into

    @torch.library.custom_op(f"softmax_lab::{op}", mutates_args=())
    def functional(x: torch.Tensor, dim: int) -> torch.Tensor:
        if x.numel() == 0:
            return _result_like(x, dim)
        return run(x, dim)

    @functional.register_fake
    def _(x, dim):
        return _result_like(x, dim)

    @torch.library.custom_op(f"softmax_lab::{op}_out", mutates_args={"out"})
    def into(x: torch.Tensor, dim: int, out: torch.Tensor) -> None:
        if x.numel():
            run(x, dim, out=out)

    @into.register_fake
    def _(x, dim, out):
        _check(x, dim)

    # (not the _out op: autocast would cast out too, and write the copy)
    torch.library.register_autocast(f"softmax_lab::{op}", "cuda", torch.float32)
    return functional, into


_FORWARD = {op: _define(op, backward=False) for op in ("softmax", "log_softmax")}
_BACKWARD = {op: _define(op + "_backward", backward=True) for op in ("softmax", "log_softmax")}


def _keep_output(ctx, inputs, output) -> None:
    ctx.dim = inputs[1]
    ctx.save_for_backward(output)


def _gradient(op: str):
    backward = _BACKWARD[op][0]

    def gradient(ctx, dy):
        (y,) = ctx.saved_tensors
        return backward(dy, y, ctx.dim), None

    return gradient


for _op in _FORWARD:
    torch.library.register_autograd(f"softmax_lab::{_op}", _gradient(_op), setup_context=_keep_output)


def _direct(x: torch.Tensor) -> bool:
    """Whether an eager call may skip the dispatcher: nothing to trace, record or cast."""
    return not (torch.compiler.is_compiling() or (x.requires_grad and torch.is_grad_enabled())
                or torch.is_autocast_enabled("cuda"))


def _forward(op: str, x: torch.Tensor, dim: int, out: torch.Tensor | None) -> torch.Tensor:
    functional, into = _FORWARD[op]
    if out is not None:
        if torch.is_grad_enabled() and x.requires_grad:
            raise RuntimeError(f"{op}(): functions with out=... arguments don't support automatic "
                               "differentiation, but one of the arguments requires grad")
        into(x, dim, out)
        return out
    if _direct(x) and x.numel():
        return getattr(api, op)(x, dim)
    return functional(x, dim)


def _backward(op: str, dy: torch.Tensor, y: torch.Tensor, dim: int, out: torch.Tensor | None) -> torch.Tensor:
    functional, into = _BACKWARD[op]
    if out is None:
        return functional(dy, y, dim)
    into(dy, y, dim, out)
    return out


def softmax(x: torch.Tensor, dim: int = -1, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """torch.softmax(x, dim) by softmax_lab, differentiable; out= writes a given tensor
    (of x's shape and dtype, on x's device) and returns it."""
    return _forward("softmax", x, dim, out)


def log_softmax(x: torch.Tensor, dim: int = -1, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """torch.log_softmax(x, dim) by softmax_lab, differentiable; out= as softmax()."""
    return _forward("log_softmax", x, dim, out)


def softmax_backward(dy: torch.Tensor, y: torch.Tensor, dim: int = -1, *,
                     out: torch.Tensor | None = None) -> torch.Tensor:
    """dx = y * (dy - sum(dy * y)) along dim, y = softmax(x) (torch._softmax_backward_data)."""
    return _backward("softmax", dy, y, dim, out)


def log_softmax_backward(dy: torch.Tensor, y: torch.Tensor, dim: int = -1, *,
                         out: torch.Tensor | None = None) -> torch.Tensor:
    """dx = dy - exp(y) * sum(dy) along dim, y = log_softmax(x) (torch._log_softmax_backward_data)."""
    return _backward("log_softmax", dy, y, dim, out)


# ------------------------------------------------------------------ cross-entropy
@torch.library.custom_op("softmax_lab::cross_entropy", mutates_args=())
def _cross_entropy(logits: torch.Tensor, target: torch.Tensor, ignore_index: int, reduction: str,
                   label_smoothing: float, z_loss: float, with_grad: bool
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(loss, lse, the gradient of the loss for an incoming 1, or an empty tensor)."""
    grad = torch.empty_like(logits, memory_format=torch.contiguous_format) if with_grad else logits.new_empty(0)
    loss, lse = cross_entropy_of(logits, target, ignore_index=ignore_index, reduction=reduction,
                                 label_smoothing=label_smoothing, z_loss=z_loss, return_lse=True,
                                 grad_out=grad if with_grad else None)
    return loss, lse, grad


@_cross_entropy.register_fake
def _(logits, target, ignore_index, reduction, label_smoothing, z_loss, with_grad):
    loss_options(ignore_index, reduction, label_smoothing, z_loss)  # its errors while tracing too
    if logits.dim() != 2:
        raise ValueError(f"logits must be 2-D (rows, vocab); got shape {tuple(logits.shape)}")
    rows = logits.shape[0]
    loss = logits.new_empty((rows,) if reduction == "none" else (), dtype=torch.float32)
    grad = torch.empty_like(logits, memory_format=torch.contiguous_format) if with_grad else logits.new_empty(0)
    return loss, logits.new_empty((rows,), dtype=torch.float32), grad


def _keep_gradient(ctx, inputs, output) -> None:
    ctx.reduction, ctx.with_grad = inputs[3], inputs[6]
    ctx.save_for_backward(output[2])
    ctx.mark_non_differentiable(output[1], output[2])


def _scale_gradient(ctx, dloss, dlse, dgrad):
    (grad,) = ctx.saved_tensors
    if not ctx.with_grad:
        raise RuntimeError("softmax_lab.torch.cross_entropy: the forward ran without the gradient "
                           "(logits did not require grad), so there is none to give")
    # A 0-d float32 scale keeps the product in the logits' dtype (float32 math inside); a
    # loss per row scales each row.
    scale = dloss[:, None].to(grad.dtype) if ctx.reduction == "none" else dloss
    return grad * scale, None, None, None, None, None, None


torch.library.register_autograd("softmax_lab::cross_entropy", _scale_gradient, setup_context=_keep_gradient)


def cross_entropy(logits: torch.Tensor, target: torch.Tensor, *, ignore_index: int = -100,
                  reduction: str = "mean", label_smoothing: float = 0.0, z_loss: float = 0.0,
                  return_lse: bool = False):
    """torch.nn.functional.cross_entropy(logits, target, ...) by softmax_lab, differentiable
    in the logits: the forward computes the loss and, where the logits require grad, its
    gradient in the same call (softmax_lab.cross_entropy); the backward only scales that
    gradient by the incoming one (one pass over it, in the logits' dtype).

    logits: (rows, vocab) float32, float16 or bfloat16; target: (rows,) int64 or int32.
    The loss is float32 whatever the logits' dtype (torch's is the logits' dtype), and
    z_loss adds z_loss * lse^2 to each row not ignored (Liger's z-loss).  With return_lse,
    (loss, lse), lse float32 and not differentiable.  A target outside [0, vocab) that is
    not ignore_index gives a NaN loss for its row: softmax_lab.cross_entropy says why.
    Runs on torch's current stream; torch.compile and CUDA graphs take it whole (a
    torch.library custom op)."""
    with_grad = logits.requires_grad and torch.is_grad_enabled()
    loss, lse, _ = _cross_entropy(logits, target, int(ignore_index), reduction, float(label_smoothing),
                                  float(z_loss), with_grad)
    return (loss, lse) if return_lse else loss
