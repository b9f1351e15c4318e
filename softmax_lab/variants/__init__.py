"""Every softmax variant, one module per kernel family.

A variant lives in its family's module (block_per_row, multi_block, multi_block_smem,
single_read with warp_rows, cluster_row), which holds its plan, its launch and its
Variant record; base.py has what they share, resources.py the device model they are
sized by, registry.py the list of variants, auto.py the order auto tries them in.
Adding a variant: its kernel in kernels/, its family module, a line in registry.py.
"""

from __future__ import annotations

from ..problem import ALL_OPS, BACKWARD_OPS, DTYPES, OPS, Shape, kernel_defines
from .auto import FALLBACKS, choose, decide, preferences
from .base import CannotRun, Launcher, Variant
from .registry import REGISTRY, get_variant, variants

__all__ = ["ALL_OPS", "BACKWARD_OPS", "DTYPES", "FALLBACKS", "OPS", "REGISTRY", "CannotRun", "Launcher", "Shape",
           "Variant", "choose", "decide", "get_variant", "kernel_defines", "preferences", "variants"]
