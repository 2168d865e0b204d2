"""Invariants of the planners, the text map and synthetic layer mixes (hypothesis)."""

import itertools
import math
from fractions import Fraction

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kvviz.base.defaults import BLOCK_SIZE
from kvviz.core.group import KVGroup
from kvviz.core.layout import GLYPHS
from kvviz.core.spec import custom_cache as _custom_cache
from kvviz.families import load_preset
from kvviz.families.deepseek_v4_config import with_layer_mix
from kvviz.vllm.planners import plan_bucketed, plan_overlay, plan_overlay_by_spec


def load_model(name):
    """A DeepSeek V4 preset's ModelConfig."""
    return load_preset(name).config


def custom_cache(name, page_bytes, **kw):
    """A cache known by its page size, at the groups file's default block (defaults.BLOCK_SIZE)."""
    return _custom_cache(name, page_bytes, tokens_per_block=BLOCK_SIZE, **kw)


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


KINDS = st.sampled_from(sorted(GLYPHS, key=lambda k: k.name))


@st.composite
def kinded_group_mixes(draw):
    """Like group_mixes, with each layer's kind drawn too (so lanes hold several glyphs)."""
    groups, k = [], 0
    for g in range(draw(st.integers(1, 5))):
        layers = []
        for p in draw(st.lists(PAGE, min_size=1, max_size=10)):
            layers.append(custom_cache(f"g{g}.l{k}", p, kind=draw(KINDS)))
            k += 1
        groups.append(KVGroup(name=f"group{g}", layers=tuple(layers)))
    return tuple(groups)


@settings(max_examples=150, deadline=None)
@given(kinded_group_mixes(), st.sampled_from(ALL), st.integers(1, 120))
def test_text_map_glyphs_land_on_the_bytes_they_stand_for(groups, planner, width):
    """Each placement [offset, end) paints cells floor(offset*w/stride) .. ceil(end*w/stride) - 1
    (at least one, clipped to the lane); a cell two pages share shows the later page of the group;
    '.' where no page of the group lies; the printed total is the group's."""
    layout = planner(groups)
    lines = layout.text_map(width=width).splitlines()
    assert len(lines) == len(groups) + 2
    stride = layout.block_stride
    for gi, line in enumerate(lines[:-2]):
        label, cells, total = line.split("|")
        assert label.strip() == groups[gi].name and len(cells) == width
        count, word, printed = total.split(maxsplit=2)  # " {layers} layer(s) {total} B"
        n = len(groups[gi].layers)
        assert (int(count), word) == (n, "layer" if n == 1 else "layers")
        assert (
            int(printed.strip().removesuffix(" B").replace(",", ""))
            == layout.group_total(gi)
            == sum(c.page_bytes for c in groups[gi].layers)
        )
        expected = ["."] * width
        for p in layout.group_placements(gi):
            first = math.floor(Fraction(p.offset * width, stride))
            last = max(first + 1, math.ceil(Fraction(p.end * width, stride)))
            for x in range(first, min(last, width)):
                expected[x] = GLYPHS[p.cache.kind]
        assert cells == "".join(expected)
    assert lines[-2].split() == ["block", "stride", f"{stride:,}", "B", f"({layout.planner})"]


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["deepseek-v4-pro", "deepseek-v4-flash"]),
    st.integers(0, 80),
    st.integers(0, 80),
    st.integers(0, 10),
)
def test_with_layer_mix_keeps_counts_mtp_and_spreads_c4_evenly(model, c4, c128, swa):
    assume(c4 + c128 + swa > 0)
    base = load_model(model)
    cfg = with_layer_mix(base, c4=c4, c128=c128, swa=swa)
    assert cfg.layer_mix == {"c4": c4, "c128": c128, "swa": swa}
    assert cfg.num_hidden_layers == c4 + c128 + swa
    # The MTP slot(s) stay as they were.
    assert cfg.num_nextn_predict_layers == base.num_nextn_predict_layers
    assert cfg.compress_ratios[cfg.num_hidden_layers :] == base.compress_ratios[base.num_hidden_layers :]
    ratios = [cfg.ratio(i) for i in range(cfg.num_hidden_layers)]
    if cfg is base:
        return  # the preset's own order (checked below)
    # SWA-only layers first, then the compressed ones.
    assert all(r in (0, 1) for r in ratios[:swa]) and all(r in (4, 128) for r in ratios[swa:])
    compressed, total = ratios[swa:], c4 + c128
    # Evenly: after every prefix of k compressed layers, the c4 count is within half a layer of
    # k x c4 / total ...
    placed = 0
    for k, r in enumerate(compressed, 1):
        placed += r == 4
        assert abs(2 * (placed * total - k * c4)) <= total
    # ... so no run of one ratio is longer than total / (count of the other ratio).
    for ratio, other in ((4, c128), (128, c4)):
        longest = max((len(list(run)) for r, run in itertools.groupby(compressed) if r == ratio), default=0)
        if other:
            assert longest <= total // other


@pytest.mark.parametrize("model", ["deepseek-v4-pro", "deepseek-v4-flash"])
def test_with_layer_mix_keeps_the_preset_when_the_mix_is_unchanged(model):
    base = load_model(model)
    assert with_layer_mix(base, **base.layer_mix) == base
    assert with_layer_mix(base, **base.layer_mix).compress_ratios == base.compress_ratios
    mix = dict(base.layer_mix, c4=base.layer_mix["c4"] + 1)
    assert with_layer_mix(base, **mix).compress_ratios != base.compress_ratios
