"""vLLM's grouping of caches into KV-cache groups (docs/grouping.md#vllm-grouping).

A group is a set of layers that share one block table. Groups never hold the same block id at
the same time, which is what lets the overlay planner lay them over the same bytes.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections import Counter

from .inputs import read_json
from .defaults import BLOCK_SIZE
from .errors import KvvizError, require
from .inputs import MAX_LAYERS, MAX_PAGE_BYTES, MAX_SLIDING_WINDOW, MAX_TOKENS_PER_BLOCK, short_repr, bounded_int
from .specs import CacheKind, CacheSpec, custom_cache


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class KVGroup:
    """A named group of caches, listed in the order vLLM lists them."""

    name: str
    layers: tuple[CacheSpec, ...]
    # Sum of the group's pages: its extent under the overlay planner (computed once).
    total_bytes: int = dataclasses.field(init=False, repr=False, compare=False)
    is_full: bool = dataclasses.field(init=False, repr=False, compare=False)  # all full attention

    def __post_init__(self) -> None:
        require(len(self.layers) > 0, f"group {self.name!r}: has no layers")
        object.__setattr__(self, "total_bytes", sum(c.page_bytes for c in self.layers))
        object.__setattr__(self, "is_full", all(c.is_full_attention for c in self.layers))


def page_sizes_first_seen(caches) -> list[int]:
    return list(dict.fromkeys(c.page_bytes for c in caches))


def tuple_count(caches) -> int:
    """How many layers share the most common page size (one layer's D and E form one tuple)."""
    return max(Counter(c.page_bytes for c in caches).values())


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
    return [[same_size[k] for k in range(i, tuples_n, n) for same_size in sizes if k < len(same_size)]
            for i in range(n)]


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
    full: list[CacheSpec] = []
    buckets: dict[tuple, list[CacheSpec]] = {}
    first_index: dict[tuple | None, int] = {}  # bucket key (None: full) -> its first registration index
    for i, c in enumerate(caches):
        key = None if c.is_full_attention else c.group_key
        first_index.setdefault(key, i)
        (full if key is None else buckets.setdefault(key, [])).append(c)
    counts = [tuple_count(b) for b in buckets.values()]
    lower = tuple_count(full) if full else 1
    d = approximate_gcd(([lower] if full else []) + counts, lower)

    named: list[tuple[int, KVGroup]] = []  # (first registration index of its bucket, group)
    if full:
        named.append((first_index[None], KVGroup(name="full", layers=tuple(full))))
    for key, bucket in buckets.items():
        base = _BUCKET_NAMES.get(bucket[0].kind, f"window{bucket[0].sliding_window}")
        parts = split_bucket(bucket, d)
        for i, part in enumerate(parts):
            name = base if len(parts) == 1 else f"{base}-{chr(ord('a') + i)}"
            named.append((first_index[key], KVGroup(name=name, layers=tuple(part))))
    if order == "first-seen":
        named.sort(key=lambda item: item[0])
    return tuple(g for _, g in named)


def groups_from_json(raw: object, *, source: str = "--groups") -> tuple[KVGroup, ...]:
    """Arbitrary groups: {"groups": [{"name": ..., "layers": [{"name": ..., "page_bytes": ...}]}]}.

    Optional per layer: "tokens_per_block" (default defaults.BLOCK_SIZE, 256) and "sliding_window" (default null = full).
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
            if not (type(pb) is int and 1 <= pb <= MAX_PAGE_BYTES and type(lname) is str and lname
                    and lname not in seen and type(tokens) is int and 1 <= tokens <= MAX_TOKENS_PER_BLOCK
                    and (window is None or (type(window) is int and 1 <= window <= MAX_SLIDING_WINDOW))
                    and "kind" not in layer):
                lname, pb, tokens, window, kind = _checked_layer(layer, f"{source}: groups[{gi}].layers[{li}]",
                                                                 f"{name}.{li}", seen)
            else:
                kind = CacheKind.CUSTOM
            seen.add(lname)
            specs.append(custom_cache(lname, pb, kind=kind, tokens_per_block=tokens, sliding_window=window))
        groups.append(KVGroup(name=name, layers=tuple(specs)))
    return tuple(groups)


def _checked_layer(layer: object, where: str, default_name: str, seen: set) -> tuple:
    """(name, page_bytes, tokens_per_block, sliding_window, kind) of one layer entry of a groups
    file, every field checked and named in the error."""
    require(isinstance(layer, dict), f"{where} must be an object")
    require("page_bytes" in layer, f"{where} is missing page_bytes")
    pb = bounded_int(layer["page_bytes"], field=f"{where}.page_bytes", low=1, high=MAX_PAGE_BYTES)
    lname = layer.get("name", default_name)
    require(isinstance(lname, str) and lname != "", f"{where}.name={short_repr(lname)}: must be a non-empty string")
    require(lname not in seen, f"{where}.name={lname!r}: appears twice")
    tokens = bounded_int(layer.get("tokens_per_block", BLOCK_SIZE), field=f"{where}.tokens_per_block", low=1,
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
    return lname, pb, tokens, window, kind


def load_groups(path) -> tuple[KVGroup, ...]:
    return groups_from_json(read_json(path, what="--groups"))
