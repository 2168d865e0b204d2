"""vLLM's grouping of caches into KV-cache groups (docs/grouping.md#vllm-grouping), for every
model: `kv_cache_groups` mirrors vLLM 0.33's `get_kv_cache_groups`
(v1/core/kv_cache_planning.py) and is the one rule the `vllm` planner asks, DeepSeek V4 included
(its block-outermost layout takes the packed path); `group_caches` is vLLM #48993's grouping of
DeepSeek V4's caches (full group first), which the `overlay` and `bucketed` planners plan.

Group names are kvviz's own: vLLM names no group (a KVCacheGroupSpec is its layer names and
spec; tests/data/vllm-0.33-deepseek-v4-pro.json lists groups by index). A group is named after
its bucket's kind (`group_base_name`; a bucket of several full-attention kinds is `full`), and
the sub-groups of one bucket are lettered a, b, ... on the packed path (the names DeepSeek V4's
groups have had since #48993) and numbered 0, 1, ... on the uniform-page path.

A group is a set of layers that share one block table. Groups never hold the same block id at
the same time, which is what lets the overlay planner lay them over the same bytes.
"""

from __future__ import annotations

import bisect
from collections import Counter

from kvviz.base.defaults import BLOCK_SIZE
from kvviz.base.errors import KvvizError, require
from kvviz.base.files import read_json
from kvviz.base.inputs import (
    MAX_LAYERS,
    MAX_PAGE_BYTES,
    MAX_SLIDING_WINDOW,
    MAX_TOKENS_PER_BLOCK,
    bounded_int,
    short_repr,
)
from kvviz.core.group import KVGroup, tuple_count
from kvviz.core.kinds import CacheKind
from kvviz.core.spec import CacheSpec, custom_cache
from kvviz.vllm.group_names import bucket_name, group_base_name, named_groups, spec_buckets


def page_sizes_first_seen(caches) -> list[int]:
    """The caches' distinct page sizes, in the order they are first met."""
    return list(dict.fromkeys(c.page_bytes for c in caches))


def approximate_gcd(counts: list[int], lower_bound: int) -> int:
    """The group size d in [lower_bound, max(counts)] with the least padding sum(ceil(x/d)*d - x).

    Ties go to the larger d (vLLM's choice: fewer, larger groups). Mirrors vLLM 0.33's
    `_approximate_gcd` (vllm/v1/core/kv_cache_planning.py), which tries every d in that range.

    pad(d) = d * sum_x ceil(x/d) - sum_x x, and ceil(x/d) counts the k >= 0 with k*d < x, so
    sum_x ceil(x/d) = sum over k of #(counts > k*d): one strided slice of the "how many counts
    exceed t" table per d. Every d is still tried, in O(max/d) each: O(max log max) in all
    instead of O(max x len(counts)).
    """
    require(lower_bound > 0, f"lower_bound={lower_bound}: must be positive")
    require(len(counts) > 0, "counts: needs at least one count")
    require(all(isinstance(x, int) and x >= 0 for x in counts), f"counts={counts!r}: must be non-negative integers")
    top = max(counts)
    if top <= lower_bound:
        return lower_bound  # the range holds only lower_bound
    exceeding = [0] * (top + 1)  # exceeding[t] = how many counts are > t, for t in [0, top]
    for x, n in Counter(counts).items():
        exceeding[x - 1] += n if x > 0 else 0
    for t in range(top - 1, -1, -1):
        exceeding[t] += exceeding[t + 1]
    total = sum(counts)
    best, best_pad = lower_bound, None
    for d in range(lower_bound, top + 1):
        pad = d * sum(exceeding[::d]) - total
        if best_pad is None or pad <= best_pad:
            best, best_pad = d, pad
    return best


def split_bucket(caches: list[CacheSpec], d: int) -> list[list[CacheSpec]]:
    """Split one bucket into ceil(tuples/d) strided sub-groups, tuple-major.

    Tuple k holds the k-th layer of each page size (page sizes in first-seen order); sub-group i
    takes tuples i, i+n, i+2n, ... and lists them tuple by tuple.
    """
    by_size: dict[int, list[CacheSpec]] = {p: [] for p in page_sizes_first_seen(caches)}
    for c in caches:
        by_size[c.page_bytes].append(c)
    sizes = list(by_size.values())  # first-seen order: tuple k lists its sizes in this order
    tuples_n = max(len(v) for v in sizes)
    n = -(-tuples_n // d)
    # Tuple k is [same_size[k] for each size that has a k-th layer]; read it off the per-size
    # lists directly rather than building a list per tuple (a bucket has thousands of tuples at
    # 100x the layers, and each list would be one more object for the collector to walk).
    return [
        [same_size[k] for k in range(i, tuples_n, n) for same_size in sizes if k < len(same_size)] for i in range(n)
    ]


def pad_small_pages(caches: tuple[CacheSpec, ...]) -> tuple[CacheSpec, ...]:
    """Before vLLM #48993: grow each non-full page to the smallest full-group page size >= it."""
    full_sizes = sorted({c.page_bytes for c in caches if c.is_full_attention})
    out = []
    for c in caches:
        if not c.is_full_attention:
            i = bisect.bisect_left(full_sizes, c.page_bytes)  # the smallest full size >= the page
            if i < len(full_sizes) and full_sizes[i] != c.page_bytes:
                c = c.with_page_bytes(full_sizes[i])
        out.append(c)
    return tuple(out)


_BUCKET_KINDS = (CacheKind.SWA_KV, CacheKind.STATE_C4, CacheKind.INDEXER_STATE, CacheKind.STATE_C128)


def group_caches(caches: tuple[CacheSpec, ...]) -> tuple[KVGroup, ...]:
    """vLLM #48993's groups for DeepSeek V4's caches (registration order in, groups out): the
    full group, then the buckets (tokens per block, sliding window) in first-seen order, each split
    into `approximate_gcd`-sized strided sub-groups. vLLM 0.33's own groups, in registration order,
    are `kv_cache_groups(caches, block_outermost=True)`: the same groups, layer for layer.
    """
    require(len(caches) > 0, "caches: the model registers no KV caches")
    full: list[CacheSpec] = []
    buckets: dict[tuple, list[CacheSpec]] = {}
    for c in caches:
        (full if c.is_full_attention else buckets.setdefault(c.group_key, [])).append(c)
    counts = [tuple_count(b) for b in buckets.values()]
    lower = tuple_count(full) if full else 1
    d = approximate_gcd(([lower] if full else []) + counts, lower)

    named: list[KVGroup] = []
    if full:
        named.append(KVGroup(name="full", layers=tuple(full)))
    for key, bucket in buckets.items():
        base = (
            bucket[0].kind.style.group_base if bucket[0].kind in _BUCKET_KINDS else f"window{bucket[0].sliding_window}"
        )
        parts = split_bucket(bucket, d)
        for i, part in enumerate(parts):
            name = base if len(parts) == 1 else f"{base}-{chr(ord('a') + i)}"
            named.append(KVGroup(name=name, layers=tuple(part)))
    return tuple(named)


def groups_from_json(raw: object, *, source: str = "--groups") -> tuple[KVGroup, ...]:
    """Arbitrary groups: {"groups": [{"name": ..., "layers": [{"name": ..., "page_bytes": ...}]}]}.

    Optional per layer: "tokens_per_block" (default defaults.BLOCK_SIZE, 256) and "sliding_window"
    (default null = full).
    Names are strings, unique among groups and among layers; numbers are integers within the
    bounds of kvviz.base.inputs.
    """
    if isinstance(raw, dict) and "groups" not in raw and "num_hidden_layers" in raw:
        raise KvvizError(f"{source}: this is a model config, not a groups file; give it with --config")
    if not (isinstance(raw, dict) and isinstance(raw.get("groups"), list)):
        raise KvvizError(f'{source}: expected an object {{"groups": [...]}}')
    require(len(raw["groups"]) > 0, f"{source}: groups is empty")
    groups: list[KVGroup] = []
    seen: set[str] = set()
    group_names: set[str] = set()
    for gi, g in enumerate(raw["groups"]):
        # messages are built only when a check fails (a file may hold 100,000 groups)
        if not isinstance(g, dict):
            raise KvvizError(f"{source}: groups[{gi}] must be an object")
        name = g["name"] if "name" in g else f"group{gi}"
        if not (isinstance(name, str) and name != ""):
            raise KvvizError(f"{source}: groups[{gi}].name={short_repr(name)}: must be a non-empty string")
        if name in group_names:
            raise KvvizError(f"{source}: groups[{gi}].name={name!r}: appears twice")
        group_names.add(name)
        layers = g.get("layers")
        if not (isinstance(layers, list) and layers):
            raise KvvizError(f"{source}: groups[{gi}] ({name!r}) has no layers")
        if len(seen) + len(layers) > MAX_LAYERS:
            raise KvvizError(f"{source}: more than {MAX_LAYERS:,} layers")
        specs = []
        for li, layer in enumerate(layers):
            # The common case is checked without building a message; a bad layer goes through
            # _checked_layer, which names the field (100,000 layers read in a fraction of a second).
            pb = layer.get("page_bytes") if type(layer) is dict else None
            lname = layer.get("name", f"{name}.{li}") if type(layer) is dict else None
            tokens = layer.get("tokens_per_block", BLOCK_SIZE) if type(layer) is dict else None
            window = layer.get("sliding_window") if type(layer) is dict else None
            if not (
                type(pb) is int
                and 1 <= pb <= MAX_PAGE_BYTES
                and type(lname) is str
                and lname
                and lname not in seen
                and type(tokens) is int
                and 1 <= tokens <= MAX_TOKENS_PER_BLOCK
                and (window is None or (type(window) is int and 1 <= window <= MAX_SLIDING_WINDOW))
                and "kind" not in layer
            ):
                lname, pb, tokens, window, kind = _checked_layer(
                    layer, f"{source}: groups[{gi}].layers[{li}]", f"{name}.{li}", seen
                )
            else:
                kind = CacheKind.CUSTOM
            seen.add(lname)
            specs.append(custom_cache(lname, pb, kind=kind, tokens_per_block=tokens, sliding_window=window))
        groups.append(KVGroup(name=name, layers=tuple(specs)))
    return tuple(groups)


def _checked_layer(
    layer: object, where: str, default_name: str, seen: set[str]
) -> tuple[str, int, int, int | None, CacheKind]:
    """(name, page_bytes, tokens_per_block, sliding_window, kind) of one layer entry of a groups
    file, every field checked and named in the error."""
    if not isinstance(layer, dict):
        raise KvvizError(f"{where} must be an object")
    require("page_bytes" in layer, f"{where} is missing page_bytes")
    pb = bounded_int(layer["page_bytes"], field=f"{where}.page_bytes", low=1, high=MAX_PAGE_BYTES)
    lname = layer.get("name", default_name)
    require(isinstance(lname, str) and lname != "", f"{where}.name={short_repr(lname)}: must be a non-empty string")
    require(lname not in seen, f"{where}.name={lname!r}: appears twice")
    tokens = bounded_int(
        layer.get("tokens_per_block", BLOCK_SIZE), field=f"{where}.tokens_per_block", low=1, high=MAX_TOKENS_PER_BLOCK
    )
    window = layer.get("sliding_window")
    if window is not None:
        window = bounded_int(window, field=f"{where}.sliding_window", low=1, high=MAX_SLIDING_WINDOW)
    kind = CacheKind.CUSTOM
    if "kind" in layer:
        given = layer["kind"]
        if not isinstance(given, str) or given.upper() not in CacheKind.__members__:
            raise KvvizError(
                f"{where}.kind={short_repr(given)}: unknown; choose one of "
                f"{', '.join(k.name.lower() for k in CacheKind)}"
            )
        kind = CacheKind[given.upper()]
    return lname, pb, tokens, window, kind


def load_groups(path) -> tuple[KVGroup, ...]:
    """The groups of a --groups JSON file (`groups_from_json`), refused in one line when the file is bad."""
    return groups_from_json(read_json(path, what="--groups"))


def group_size(counts: list[int]) -> int:
    """The smallest bucket's layer count, or the largest when it is under 1.5 x the smallest
    (`_get_kv_cache_groups_uniform_page_size`; compared as 2 x max < 3 x min, exactly)."""
    lo, hi = min(counts), max(counts)
    return hi if 2 * hi < 3 * lo else lo


def uniform_page_groups(caches: tuple[CacheSpec, ...]) -> tuple[KVGroup, ...]:
    """vLLM 0.33's groups for unified pages (`_get_kv_cache_groups_uniform_page_size`): a bucket
    of n layers becomes cdiv(n, group_size) groups, the i-th holding layers[i::num_groups], so
    groups of one bucket may be one layer short (docs/hybrid.md#hybrid-grouping)."""
    require(len(caches) > 0, "caches: the model registers no KV caches")
    require(
        len({c.page_bytes for c in caches}) == 1,
        "caches: vLLM's hybrid grouping needs unified page sizes (kvviz.vllm.pages.unify_page_sizes)",
    )
    buckets = spec_buckets(caches)
    size = group_size([len(b) for b in buckets])
    parts = []
    for bucket in buckets:
        n = -(-len(bucket) // size)
        parts.append((group_base_name(bucket[0]), [bucket[i::n] for i in range(n)]))
    return named_groups(parts)


def _type_key(c: CacheSpec) -> tuple:
    """UniformTypeKVCacheSpecs.is_uniform_type: one spec class, one block size, one window."""
    return (
        c.spec_class,
        c.sliding_window,
        c.attention_chunk_size,
        c.tokens_per_block,
        c.page_bytes if c.kind.is_state else None,
    )


def _type_keys(caches) -> list[tuple]:
    """`_type_key` of every cache, derived once per distinct (kind, window, chunk, block, page):
    a model of 100,000 layers has a handful of those."""
    memo: dict[tuple, tuple] = {}
    out = []
    for c in caches:
        raw = (c.kind, c.sliding_window, c.attention_chunk_size, c.tokens_per_block, c.page_bytes)
        key = memo.get(raw)
        if key is None:
            key = memo[raw] = _type_key(c)
        out.append(key)
    return out


def kv_cache_groups(caches: tuple[CacheSpec, ...], *, block_outermost: bool = False) -> tuple[KVGroup, ...]:
    """vLLM 0.33's `get_kv_cache_groups` (v1/core/kv_cache_planning.py), in its order of tries:
    one spec for every layer (`_get_kv_cache_groups_uniform_spec`) or one type
    (`UniformTypeKVCacheSpecs`): one group; a block-outermost layout with mixed pages:
    `_get_packed_kv_cache_groups`; else the pages are unified first
    (`kvviz.vllm.pages.unify_page_sizes`) and grouped by `_get_kv_cache_groups_uniform_page_size`."""
    require(len(caches) > 0, "caches: the model registers no KV caches")
    if len(set(_type_keys(caches))) == 1:
        return named_groups([(group_base_name(caches[0]), [list(caches)])])
    if block_outermost and len({c.page_bytes for c in caches}) > 1:
        return packed_groups(caches)
    from kvviz.vllm.pages import unify_page_sizes  # pages imports nothing of grouping: no cycle at import

    return uniform_page_groups(unify_page_sizes(caches))


def _is_state_bucket(first: CacheSpec, repeats: int | None) -> bool:
    """Buckets that can shrink to one state per group (`_get_packed_kv_cache_groups`'
    is_state_bucket): Mamba state, and sliding windows when no repeat pattern fixes the split."""
    return first.kind.is_state or (repeats is None and first.sliding_window is not None)


def packed_groups(caches: tuple[CacheSpec, ...]) -> tuple[KVGroup, ...]:
    """Mirrors vLLM 0.33's `_get_packed_kv_cache_groups` (block-outermost per-block packing).

    Buckets of one cache type; a balanced bucket (equal layer counts per page size) splits into
    cdiv(repeats, repeats_per_group) groups of whole pattern repeats; a state bucket splits into
    as many groups as it takes for each to fit the block the others already need."""
    require(len(caches) > 0, "caches: the model registers no KV caches")
    buckets: dict[tuple, list[CacheSpec]] = {}
    for c, key in zip(caches, _type_keys(caches)):  # UniformTypeKVCacheSpecs.is_uniform_type: one type, one block
        buckets.setdefault(key, []).append(c)
    bucketed = []
    for bucket in buckets.values():
        by_page: dict[int, list[CacheSpec]] = {}
        for c in bucket:
            by_page.setdefault(c.page_bytes, []).append(c)
        balanced = len({len(v) for v in by_page.values()}) == 1
        bucketed.append((bucket, by_page, balanced))

    def max_per_page(by_page):  # UniformTypeKVCacheSpecs.get_max_layers_per_page_size
        return max(len(v) for v in by_page.values())

    floor = max((max_per_page(p) for _, p, bal in bucketed if bal and len(p) > 1), default=0)
    repeats = approximate_gcd([max_per_page(p) for _, p, bal in bucketed if bal], floor) if floor else None

    def num_groups_for(by_page, balanced) -> int:
        return -(-max_per_page(by_page) // repeats) if (balanced and repeats is not None) else 1

    def widest(by_page, n) -> int:
        return sum(-(-len(v) // n) * page for page, v in by_page.items())

    anchor = max(
        widest(p, len(b) if _is_state_bucket(b[0], repeats) else num_groups_for(p, bal)) for b, p, bal in bucketed
    )
    parts = []
    for bucket, by_page, balanced in bucketed:
        n = num_groups_for(by_page, balanced)
        if anchor and _is_state_bucket(bucket[0], repeats):
            per_block = max(anchor // bucket[0].page_bytes, 1)
            n = max(n, -(-len(bucket) // per_block))
        if n == 1:
            parts.append((bucket_name(bucket), [bucket]))
            continue
        pattern = list(zip(*by_page.values()))
        parts.append((bucket_name(bucket), [[c for rep in pattern[i::n] for c in rep] for i in range(n)]))
    return named_groups(parts, lettered=True)


def grouping_derivation(groups: tuple[KVGroup, ...], caches) -> tuple[str, ...]:
    """How `uniform_page_groups` split the buckets, in two lines."""
    buckets = spec_buckets(caches)
    counts = [len(b) for b in buckets]
    size = group_size(counts)
    sizes = ", ".join(str(len(g.layers)) for g in groups)
    if len(buckets) == 1:
        return (f"every layer has one spec: one group of {len(groups[0].layers)} layers",)
    return (
        f"buckets of {' + '.join(f'{len(b)} {group_base_name(b[0])}' for b in buckets)} layers -> group size "
        f"{size} (smallest bucket"
        f"{', or the largest as it is under 1.5 x the smallest' if size != min(counts) else ''})",
        f"{len(groups)} groups of {sizes} layers; each one tensor from byte 0, layer stride = page",
    )
