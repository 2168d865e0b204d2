"""The names kvviz gives vLLM's KV cache groups and their spec buckets (letters and base names in
maps and derivations)."""

from __future__ import annotations

from kvviz.core.group import KVGroup
from kvviz.core.kinds import CacheKind
from kvviz.core.spec import CacheSpec


# ---- vLLM 0.33's get_kv_cache_groups, for any model ----------------------------------------------
def group_base_name(c: CacheSpec) -> str:
    """A group's name before its index: 'full', 'sliding4096', 'chunked8192', 'mla', 'state', ..."""
    if c.kind is CacheKind.SLIDING_ATTENTION:
        return f"sliding{c.sliding_window}"
    if c.kind is CacheKind.CHUNKED_ATTENTION:
        return f"chunked{c.attention_chunk_size}"
    return c.kind.style.group_base


def bucket_name(bucket: list[CacheSpec]) -> str:
    """A bucket's group name: its kind's (`group_base_name`), or 'full' for a bucket of several
    full-attention kinds (DeepSeek V4's main c4 / c128 and indexer K pages, one vLLM type)."""
    if all(c.is_full_attention for c in bucket) and len({c.kind for c in bucket}) > 1:
        return "full"
    return group_base_name(bucket[0])


def named_groups(parts: list[tuple[str, list[list[CacheSpec]]]], *, lettered: bool = False) -> tuple[KVGroup, ...]:
    """KVGroups named `base` (one group in the bucket) or `base-0`, `base-1`, ... (`base-a`, `base-b`,
    ... when lettered); a base name met twice gets a prime, so every name is unique."""
    out, used = [], set()
    for base, groups in parts:
        while base in used:  # two buckets of one base name (two state page sizes): keep names unique
            base += "'"
        used.add(base)
        for i, layers in enumerate(groups):
            suffix = _letters(i) if lettered else str(i)
            out.append(KVGroup(name=base if len(groups) == 1 else f"{base}-{suffix}", layers=tuple(layers)))
    return tuple(out)


def _letters(i: int) -> str:
    """a, b, ..., z, aa, ab, ...: the i-th (from 0) lettered sub-group."""
    out = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        out = chr(ord("a") + r) + out
    return out


def spec_buckets(caches) -> list[list[CacheSpec]]:
    """Layers with the same spec, buckets in first-seen (registration) order (the
    `same_type_layers` of `_get_kv_cache_groups_uniform_page_size`)."""
    buckets: dict[tuple, list[CacheSpec]] = {}
    for c in caches:
        buckets.setdefault(c.spec_key, []).append(c)  # equal keys = one vLLM KVCacheSpec
    return list(buckets.values())
