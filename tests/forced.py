"""The plans the tests force on a variant: a whole plan, or the variant's own with fields replaced."""

import dataclasses

from softmax_lab.variants import get_variant
from softmax_lab.variants import multi_block_smem as MBS

GEOMETRY = {"threads", "vpt", "slots", "blocks_per_sm", "split"}


def forced_plan(name: str, shape, dev, config=None, groups=None, **fields):
    """`config` (with `groups` where given), else the variant's plan for the shape with `fields`
    replaced.  multi_block_smem: a forced block shape or schedule takes no companions unless
    `held_chunks` says, and its slots and early refill follow the forced shape unless given."""
    if config is not None:
        return config if groups is None else dataclasses.replace(config, groups=groups)
    plan = get_variant(name).plan(shape, dev)
    if name == "multi_block_smem" and fields.keys() & GEOMETRY:
        geometry = {k: v for k, v in fields.items() if k not in ("slots", "early_fill")}
        plan = dataclasses.replace(plan, **({"held_chunks": None} | geometry))
        slots = fields.get("slots") or MBS.slots_held(dev, plan.threads, plan.vpt, plan.blocks_per_sm)
        early = fields.get("early_fill", MBS.early_fill(shape.cols, shape.itemsize, dev, plan.threads, plan.vpt,
                                                        plan.blocks_per_sm, plan.split))
        return dataclasses.replace(plan, slots=slots, early_fill=early)
    return dataclasses.replace(plan, **fields) if fields else plan
