"""vLLM's grouping of caches into KV-cache groups (REFERENCE.md section 5).

A group is a set of layers that share one block table. Groups never hold the same block id at
the same time, which is what lets the overlay planner lay them over the same bytes.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from functools import cached_property

from .config import read_json
from .errors import KvvizError, require
from .inputs import MAX_LAYERS, MAX_PAGE_BYTES, MAX_SLIDING_WINDOW, MAX_TOKENS_PER_BLOCK, short_repr, bounded_int
from .specs import CacheKind, CacheSpec, custom_cache


@dataclasses.dataclass(frozen=True, kw_only=True)
class KVGroup:
    """A named group of caches, listed in the order vLLM lists them."""

    name: str
    layers: tuple[CacheSpec, ...]

    def __post_init__(self) -> None:
        require(len(self.layers) > 0, f"group {self.name!r}: has no layers")

    @cached_property
    def total_bytes(self) -> int:
        """Sum of the group's pages: its extent under the overlay planner."""
        return sum(c.page_bytes for c in self.layers)

    @property
    def is_full(self) -> bool:
        return all(c.is_full_attention for c in self.layers)


def page_sizes_first_seen(caches) -> list[int]:
    return list(dict.fromkeys(c.page_bytes for c in caches))


def tuple_count(caches) -> int:
    """How many layers share the most common page size (one layer's D and E form one tuple)."""
    return max(Counter(c.page_bytes for c in caches).values())


def approximate_gcd(counts: list[int], lower_bound: int) -> int:
    """The group size d in [lower_bound, max(counts)] with the least padding sum(ceil(x/d)*d - x).

    Ties go to the larger d (vLLM's choice: fewer, larger groups).
    """
    require(lower_bound > 0, f"lower_bound={lower_bound}: must be positive")
    best, best_pad = None, None
    for d in range(lower_bound, max(max(counts), lower_bound) + 1):
        pad = sum(-(-x // d) * d - x for x in counts)
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
    tuples_n = max(len(v) for v in by_size.values())
    tuples = [[v[k] for v in by_size.values() if k < len(v)] for k in range(tuples_n)]
    n = -(-tuples_n // d)
    return [[c for t in tuples[i::n] for c in t] for i in range(n)]


def pad_small_pages(caches: tuple[CacheSpec, ...]) -> tuple[CacheSpec, ...]:
    """Before vLLM #48993: grow each non-full page to the smallest full-group page size >= it."""
    full_sizes = sorted({c.page_bytes for c in caches if c.is_full_attention})
    out = []
    for c in caches:
        if not c.is_full_attention:
            bigger = [p for p in full_sizes if p >= c.page_bytes]
            if bigger and bigger[0] != c.page_bytes:
                c = dataclasses.replace(c, padded_page_bytes=bigger[0])
        out.append(c)
    return tuple(out)


_BUCKET_NAMES = {
    CacheKind.SWA_KV: "swa",
    CacheKind.STATE_C4: "c4-state",
    CacheKind.INDEXER_STATE: "c4-state",
    CacheKind.STATE_C128: "c128-state",
}


def group_caches(caches: tuple[CacheSpec, ...], *, order: str = "full-first") -> tuple[KVGroup, ...]:
    """vLLM's groups for a model's caches (registration order in, groups out).

    order="full-first": the full group, then the buckets in first-seen order (vLLM #48993 era).
    order="first-seen": buckets in the order their first cache was registered, the sub-groups
    of one bucket together (vLLM 0.33).
    """
    require(order in ("full-first", "first-seen"), f"order={order!r}: choose full-first or first-seen")
    require(len(caches) > 0, "caches: the model registers no KV caches")
    full = [c for c in caches if c.is_full_attention]
    buckets: dict[tuple, list[CacheSpec]] = {}
    for c in caches:
        if not c.is_full_attention:
            buckets.setdefault(c.group_key, []).append(c)
    counts = [tuple_count(b) for b in buckets.values()]
    lower = tuple_count(full) if full else 1
    d = approximate_gcd(([lower] if full else []) + counts, lower)

    named: list[tuple[int, KVGroup]] = []  # (first registration index of its bucket, group)
    position = {c.name: i for i, c in enumerate(caches)}
    if full:
        named.append((position[full[0].name], KVGroup(name="full", layers=tuple(full))))
    for bucket in buckets.values():
        base = _BUCKET_NAMES.get(bucket[0].kind, f"window{bucket[0].sliding_window}")
        parts = split_bucket(bucket, d)
        for i, part in enumerate(parts):
            name = base if len(parts) == 1 else f"{base}-{chr(ord('a') + i)}"
            named.append((position[bucket[0].name], KVGroup(name=name, layers=tuple(part))))
    if order == "first-seen":
        named.sort(key=lambda item: item[0])
    return tuple(g for _, g in named)


def groups_from_json(raw: object, *, source: str = "--groups") -> tuple[KVGroup, ...]:
    """Arbitrary groups: {"groups": [{"name": ..., "layers": [{"name": ..., "page_bytes": ...}]}]}.

    Optional per layer: "tokens_per_block" (default 256) and "sliding_window" (default null = full).
    Names are strings, unique among groups and among layers; numbers are integers within the
    bounds of kvviz.inputs.
    """
    if isinstance(raw, dict) and "groups" not in raw and "num_hidden_layers" in raw:
        raise KvvizError(f"{source}: this is a model config, not a groups file; give it with --config")
    require(isinstance(raw, dict) and isinstance(raw.get("groups"), list),
            f'{source}: expected an object {{"groups": [...]}}')
    require(len(raw["groups"]) > 0, f"{source}: groups is empty")
    groups, seen, group_names = [], set(), set()
    for gi, g in enumerate(raw["groups"]):
        require(isinstance(g, dict), f"{source}: groups[{gi}] must be an object")
        name = g.get("name", f"group{gi}")
        require(isinstance(name, str) and name != "", f"{source}: groups[{gi}].name={short_repr(name)}: must be a non-empty string")
        require(name not in group_names, f"{source}: groups[{gi}].name={name!r}: appears twice")
        group_names.add(name)
        layers = g.get("layers")
        require(isinstance(layers, list) and layers, f"{source}: groups[{gi}] ({name!r}) has no layers")
        require(len(seen) + len(layers) <= MAX_LAYERS, f"{source}: more than {MAX_LAYERS:,} layers")
        specs = []
        for li, layer in enumerate(layers):
            where = f"{source}: groups[{gi}].layers[{li}]"
            require(isinstance(layer, dict), f"{where} must be an object")
            require("page_bytes" in layer, f"{where} is missing page_bytes")
            pb = bounded_int(layer["page_bytes"], field=f"{where}.page_bytes", low=1, high=MAX_PAGE_BYTES)
            lname = layer.get("name", f"{name}.{li}")
            require(isinstance(lname, str) and lname != "", f"{where}.name={short_repr(lname)}: must be a non-empty string")
            require(lname not in seen, f"{where}.name={lname!r}: appears twice")
            seen.add(lname)
            tokens = bounded_int(layer.get("tokens_per_block", 256), field=f"{where}.tokens_per_block", low=1,
                                 high=MAX_TOKENS_PER_BLOCK)
            window = layer.get("sliding_window")
            if window is not None:
                window = bounded_int(window, field=f"{where}.sliding_window", low=1, high=MAX_SLIDING_WINDOW)
            kind = CacheKind.CUSTOM
            if "kind" in layer:
                given = layer["kind"]
                if not isinstance(given, str) or given.upper() not in CacheKind.__members__:
                    raise KvvizError(f"{where}.kind={short_repr(given)}: unknown; choose one of "
                                     f"{', '.join(k.name.lower() for k in CacheKind)}")
                kind = CacheKind[given.upper()]
            specs.append(custom_cache(lname, pb, kind=kind, tokens_per_block=tokens, sliding_window=window))
        groups.append(KVGroup(name=name, layers=tuple(specs)))
    return tuple(groups)


def load_groups(path) -> tuple[KVGroup, ...]:
    return groups_from_json(read_json(path, what="--groups"))
