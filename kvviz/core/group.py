"""A KV-cache group: layers that share one block table (vLLM's KVCacheGroupSpec)."""

from __future__ import annotations

import dataclasses
from collections import Counter

from kvviz.base.errors import require
from kvviz.core.spec import CacheSpec


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class KVGroup:
    """A named group of caches, listed in the order vLLM lists them.

    Groups never hold the same block id at the same time, which is what lets a planner lay them
    over the same bytes (docs/overlay.md#the-overlay-in-one-paragraph)."""

    name: str
    layers: tuple[CacheSpec, ...]
    # Sum of the group's pages: its extent under the overlay planners (computed once).
    total_bytes: int = dataclasses.field(init=False, repr=False, compare=False)
    is_full: bool = dataclasses.field(init=False, repr=False, compare=False)  # all full attention

    @property
    def tokens_per_block(self) -> int | None:
        """The group's block size in tokens (KVCacheGroupSpec's kv_cache_spec.block_size): its layers' one block
        size, which page unification may have raised above the configured one (Gemma 4's sliding layers: 32);
        None for a group of a --groups file whose layers differ."""
        sizes = {c.tokens_per_block for c in self.layers}
        return sizes.pop() if len(sizes) == 1 else None

    def __post_init__(self) -> None:
        require(len(self.layers) > 0, f"group {self.name!r}: has no layers")
        object.__setattr__(self, "total_bytes", sum(c.page_bytes for c in self.layers))
        object.__setattr__(self, "is_full", all(c.is_full_attention for c in self.layers))


def tuple_count(caches) -> int:
    """How many layers share the most common page size (one layer's D and E form one tuple)."""
    return max(Counter(c.page_bytes for c in caches).values())
