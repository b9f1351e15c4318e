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
    """op: "softmax" or "log_softmax"; the backward is api's op + "_backward"."""

    @staticmethod
    def forward(ctx, x, dim, op):
        y = getattr(api, op)(x, dim)
        ctx.save_for_backward(y)
        ctx.dim, ctx.op = dim, op
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        return getattr(api, ctx.op + "_backward")(dy, y, ctx.dim), None, None


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """torch.softmax(x, dim) by softmax_lab, differentiable."""
    return _Softmax.apply(x, dim, "softmax")


def log_softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """torch.log_softmax(x, dim) by softmax_lab, differentiable."""
    return _Softmax.apply(x, dim, "log_softmax")
