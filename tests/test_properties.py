"""Invariants of the planners over random group mixes (hypothesis)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from kvviz.grouping import KVGroup
from kvviz.planners import plan_bucketed, plan_overlay, plan_overlay_by_spec
from kvviz.specs import custom_cache

PAGE = st.sampled_from([512, 1_024, 1_728, 4_608, 8_192, 8_640, 32_768, 37_440]) | st.integers(1, 50_000)


@st.composite
def group_mixes(draw):
    n_groups = draw(st.integers(1, 6))
    groups, k = [], 0
    for g in range(n_groups):
        pages = draw(st.lists(PAGE, min_size=1, max_size=12))
        layers = []
        for p in pages:
            layers.append(custom_cache(f"g{g}.l{k}", p))
            k += 1
        groups.append(KVGroup(name=f"g{g}", layers=tuple(layers)))
    return tuple(groups)


ALL = (plan_bucketed, plan_overlay, plan_overlay_by_spec)


@settings(max_examples=150, deadline=None)
@given(group_mixes())
def test_layouts_are_sound(groups):
    for planner in ALL:
        layout = planner(groups)
        for gi in range(len(groups)):
            ranges = sorted((p.offset, p.end) for p in layout.group_placements(gi))
            # Layers of one group never overlap ...
            assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(ranges, ranges[1:]))
            # ... and every layer fits inside the stride.
            assert ranges[0][0] >= 0 and ranges[-1][1] <= layout.block_stride
        # Every layer appears in exactly one shared tensor.
        names = [n for t in layout.tensors for n in t.layers]
        assert sorted(names) == sorted(c.name for g in groups for c in g.layers)
        assert len(layout.placements) == len(names)


@settings(max_examples=150, deadline=None)
@given(group_mixes())
def test_overlay_stride_is_largest_group_and_never_above_bucketed(groups):
    largest = max(sum(c.page_bytes for c in g.layers) for g in groups)
    bucketed = plan_bucketed(groups).block_stride
    for planner in (plan_overlay, plan_overlay_by_spec):
        layout = planner(groups)
        assert layout.block_stride == largest
        assert layout.block_stride <= bucketed
        # Overlay groups are dense from byte 0: no holes inside a group.
        for gi in range(len(groups)):
            ranges = sorted((p.offset, p.end) for p in layout.group_placements(gi))
            assert ranges[0][0] == 0
            assert all(a_end == b_start for (_, a_end), (b_start, _) in zip(ranges, ranges[1:]))


@settings(max_examples=100, deadline=None)
@given(group_mixes())
def test_bucketed_slot_is_shared_only_by_same_size_pages(groups):
    layout = plan_bucketed(groups)
    for t in layout.tensors:
        assert len({layout.placement(n).page_bytes for n in t.layers}) == 1
        assert len({layout.placement(n).group for n in t.layers}) == len(t.layers)
