"""The planners (docs/planners.md#bucketed, #overlay, #overlay-by-spec): groups in, one `Layout` out.

* `plan_bucketed`: vLLM before #48993. The k-th layer of page size p in every group goes to
  slot (p, k); stride = sum over p of p x (most layers of size p in one group).
* `plan_overlay`: vLLM #48993. Every group starts at byte 0 and lays its layers densely in group
  order; stride = the largest group total.
* `plan_overlay_by_spec`: vLLM 0.33 (after #51718). Same stride, but inside a group the layers of
  one spec stand together (specs in first-seen order), one tensor per (group, spec).
"""

from __future__ import annotations

import operator
from collections import Counter

from kvviz.base.errors import KvvizError, require
from kvviz.core.group import KVGroup
from kvviz.core.layout import Layout, Placement, SharedTensor


def _check_groups(groups: tuple[KVGroup, ...]) -> None:
    require(len(groups) > 0, "groups: there are no groups to plan")
    names = [c.name for g in groups for c in g.layers]
    if len(set(names)) != len(names):
        dup = next(n for n, k in Counter(names).items() if k > 1)
        raise KvvizError(f"layers: {dup!r} appears more than once")


def _tensors_by_offset(placements: list[Placement]) -> tuple[SharedTensor, ...]:
    """One tensor per distinct offset, its layers in group order. The planners emit placements
    group by group and never put two layers of one group at one offset, so a stable sort by
    offset lists each offset's layers in group order. The names are read off the sorted run by
    slicing: no list per offset, only the tuple each tensor keeps."""
    ordered = sorted(placements, key=_offset_of)  # stable: group order within an offset
    names = [p.cache.name for p in ordered]
    tensors = []
    start, n = 0, len(ordered)
    while start < n:
        offset = ordered[start].offset
        end = start + 1
        while end < n and ordered[end].offset == offset:
            end += 1
        tensors.append(SharedTensor(offset=offset, layers=tuple(names[start:end])))
        start = end
    return tuple(tensors)


_offset_of = operator.attrgetter("offset")


def plan_bucketed(groups: tuple[KVGroup, ...]) -> Layout:
    """Page-size buckets: slot (p, k) is shared by the k-th layer of size p of every group."""
    _check_groups(groups)
    sizes = list(dict.fromkeys(c.page_bytes for g in groups for c in g.layers))
    slots = dict.fromkeys(sizes, 0)  # most layers of each size in one group: one Counter per group
    for g in groups:
        for p, n in Counter(c.page_bytes for c in g.layers).items():
            if n > slots[p]:
                slots[p] = n
    region, start = {}, 0
    for p in sizes:
        region[p] = start
        start += p * slots[p]
    placements = []
    for gi, g in enumerate(groups):
        free: dict[int, int] = {}  # page size -> the group's next free slot in that size's region
        for c in g.layers:
            p = c.page_bytes
            offset = free.get(p, region[p])
            placements.append(Placement(c, gi, offset))
            free[p] = offset + p
    derivation = [f"{slots[p]} x {p:,} B (page size {p:,}: most layers of that size in one group)" for p in sizes]
    derivation.append(f"= {start:,} B block stride (sum over page sizes)")
    return Layout(
        "bucketed", tuple(groups), tuple(placements), start, _tensors_by_offset(placements), tuple(derivation)
    )


def _group_terms(g: KVGroup) -> str:
    counts: dict[int, int] = {}  # page size -> layers of that size, first-seen order
    for c in g.layers:
        counts[c.page_bytes] = counts.get(c.page_bytes, 0) + 1
    return " + ".join(f"{n} x {p:,}" for p, n in counts.items())


def _overlay_derivation(groups, stride) -> tuple[str, ...]:
    lines = [f"{g.name}: {_group_terms(g)} = {g.total_bytes:,} B" for g in groups]
    largest = max(groups, key=lambda g: g.total_bytes)
    lines.append(f"= {stride:,} B block stride: the largest group ({largest.name}) binds")
    return tuple(lines)


def plan_overlay(groups: tuple[KVGroup, ...]) -> Layout:
    """Dense per-group layout from byte 0; the groups overlay each other."""
    _check_groups(groups)
    placements = []
    for gi, g in enumerate(groups):
        offset = 0
        for c in g.layers:
            placements.append(Placement(c, gi, offset))
            offset += c.page_bytes
    stride = max(g.total_bytes for g in groups)
    return Layout(
        "overlay",
        tuple(groups),
        tuple(placements),
        stride,
        _tensors_by_offset(placements),
        _overlay_derivation(groups, stride),
    )


def plan_overlay_by_spec(groups: tuple[KVGroup, ...]) -> Layout:
    """vLLM 0.33: per group, the layers of one spec stand together, one tensor per spec.

    The stride is the largest group total (vLLM's `_get_kv_cache_bytes_per_block`, whose
    rounding to the layers' block-stride alignments is a no-op here: every one is 1).
    """
    _check_groups(groups)
    placements, tensors = [], []
    for gi, g in enumerate(groups):
        by_spec: dict[tuple, list] = {}
        # Equal spec_keys = one spec. Hashing a spec_key hashes its RowFormat and CacheKind in
        # Python, so each cache is first looked up by a key of plain ints (the ids of its kind and
        # row format, alive while the group is): only the first cache of each such key hashes
        # its spec_key, and equal-but-distinct row formats still meet in by_spec.
        members_of: dict[tuple, list] = {}
        for c in g.layers:
            ident = (
                id(c.kind),
                id(c.row_format),
                c.rows,
                c.tokens_per_block,
                c.sliding_window,
                c.attention_chunk_size,
                c.alignment,
                c.page_bytes,
            )
            members = members_of.get(ident)
            if members is None:
                members = members_of[ident] = by_spec.setdefault(c.spec_key, [])
            members.append(c)
        offset = 0
        for members in by_spec.values():
            page = members[0].page_bytes
            tensors.append(SharedTensor(offset=offset, layers=tuple(c.name for c in members), layer_stride=page))
            for c in members:
                placements.append(Placement(c, gi, offset))
                offset += page
    stride = max(g.total_bytes for g in groups)
    return Layout(
        "overlay-by-spec", tuple(groups), tuple(placements), stride, tuple(tensors), _overlay_derivation(groups, stride)
    )


LAYOUT_PLANNERS = {"overlay": plan_overlay, "overlay-by-spec": plan_overlay_by_spec, "bucketed": plan_bucketed}


def plan(groups: tuple[KVGroup, ...], planner: str = "overlay") -> Layout:
    """Groups (e.g. a groups file) laid out by one of the layout planners."""
    if planner not in LAYOUT_PLANNERS:
        raise KvvizError(f"planner={planner!r}: unknown; choose one of {', '.join(LAYOUT_PLANNERS)}")
    return LAYOUT_PLANNERS[planner](groups)
