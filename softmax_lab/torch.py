"""softmax and log_softmax as torch autograd Functions, so that a model trains with them.

    import softmax_lab.torch as slt
    p = slt.softmax(logits, dim=-1)          # forward: softmax_lab.softmax
    loss = -slt.log_softmax(logits)[..., k].mean()
    loss.backward()                          # backward: softmax_lab.log_softmax_backward

Both directions run on torch's current stream (the autograd engine sets it to
the forward's stream for the backward), in the input's dtype (float32,
float16 or bfloat16) with float32 math inside.  The forward keeps its output
for the backward, as torch's own softmax does.  Double backward is not
supported (once_differentiable).  `import softmax_lab` does not import torch;
importing this module does.
"""

from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

from . import api


class _Softmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim):
        y = api.softmax(x, dim)
        ctx.save_for_backward(y)
        ctx.dim = dim
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        return api.softmax_backward(dy, y, ctx.dim), None


class _LogSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim):
        y = api.log_softmax(x, dim)
        ctx.save_for_backward(y)
        ctx.dim = dim
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        return api.log_softmax_backward(dy, y, ctx.dim), None


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """torch.softmax(x, dim) by softmax_lab, differentiable."""
    return _Softmax.apply(x, dim)


def log_softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """torch.log_softmax(x, dim) by softmax_lab, differentiable."""
    return _LogSoftmax.apply(x, dim)
