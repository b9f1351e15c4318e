"""The registry: every softmax variant, in the lab's order.  Nothing else in softmax_lab
lists variant names; auto's order between them is auto.py's."""

from __future__ import annotations

import types

from .base import Variant
from .block_per_row import THREE_PASS, TWO_PASS
from .cluster_row import CLUSTER_ROW
from .multi_block import MULTI_BLOCK, MULTI_BLOCK_L2
from .multi_block_smem import MULTI_BLOCK_SMEM
from .single_read import SINGLE_READ

REGISTRY = types.MappingProxyType({v.name: v for v in (
    THREE_PASS,
    TWO_PASS,
    MULTI_BLOCK,
    MULTI_BLOCK_L2,
    MULTI_BLOCK_SMEM,
    SINGLE_READ,
    CLUSTER_ROW,
)})


def variants() -> types.MappingProxyType:
    """Ordered mapping name -> Variant."""
    return REGISTRY


def get_variant(name: str) -> Variant:
    """The registered variant called `name`; ValueError, listing the known names, for any other."""
    try:
        return REGISTRY[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown variant {name!r}; known: 'auto', {', '.join(map(repr, REGISTRY))}") from None
