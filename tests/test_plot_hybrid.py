"""Figures of hybrid models, read back and compared with numbers derived here from the rules.

Page sizes are built by hand from the preset fields (docs/hybrid.md#hybrid-caches): an attention
page is block x KV heads x head_dim x 2 (K and V) x 2 B (bf16); a gated delta net state is the
conv state (kernel - 1) x conv_dim plus the SSM state, padded up to the attention page. The
layer-outermost offsets are recomputed from the group's layer order: plane k of a group starts
at k x num_blocks x page, block b's page of it at that + b x page (docs/hybrid.md#hybrid-planners).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from matplotlib.colors import to_rgba

from kvviz import views as plot
from kvviz.base.errors import KvvizError
from kvviz.core.kinds import CacheKind
from kvviz.families import load_preset as load_model
from kvviz.options import Options
from kvviz.views import KIND_COLORS, PAD_COLOR, UNUSED_COLOR
from kvviz.vllm.plan import plan_model


def flat_texts(fig) -> list[str]:
    """The figure's texts with the line breaks a title is wrapped at (canvas.wrapped) read as spaces."""
    return [t.replace("\n", " ") for t in plot.figure_texts(fig)]


def plan_hybrid(model, options=Options(), planner="vllm"):
    """The one pool a shared-pool planner lays the model out in."""
    return plan_model(model, planner, options).layout


BF16 = 2


def raw(name: str) -> dict:
    """The preset's own JSON (text config of a multimodal model)."""
    from importlib.resources import files

    data = json.loads((files("kvviz") / "presets" / f"{name}.json").read_text())
    return data.get("text_config", data)


def qwen_state_bytes() -> int:
    c = raw("qwen3-next-80b-a3b")
    conv_dim = (
        2 * c["linear_num_key_heads"] * c["linear_key_head_dim"]
        + c["linear_num_value_heads"] * c["linear_value_head_dim"]
    )
    conv = (c["linear_conv_kernel_dim"] - 1) * conv_dim * BF16
    ssm = c["linear_num_value_heads"] * c["linear_value_head_dim"] * c["linear_key_head_dim"] * BF16
    return conv + ssm


def qwen_attention_page(tokens: int) -> int:
    c = raw("qwen3-next-80b-a3b")
    return tokens * c["num_key_value_heads"] * c["head_dim"] * 2 * BF16


def rgba(p) -> tuple:
    return tuple(round(x, 4) for x in p.get_facecolor())


# ---- pool_planes: the layer-outermost map --------------------------------------------------
@pytest.mark.parametrize("num_blocks", [1, 3, 8])
def test_pool_planes_offsets_by_hand(gemma, num_blocks):
    """Every plane and every block's page sits where the layer-outermost rule puts it."""
    layout = plan_hybrid(gemma)
    c = raw("gemma-3-27b")
    page = 16 * c["num_key_value_heads"] * c["head_dim"] * 2 * BF16
    widest = max(len(g.layers) for g in layout.groups)
    fig = plot.pool_planes(layout, num_blocks)
    assert fig.axes[0].get_xlim() == (0, widest * page * num_blocks)
    for g in layout.groups:
        planes = plot.find_patches(fig, kind="plane", group=g.name)
        assert [p.info.layer for p in planes] == [c.name for c in g.layers]
        for k, p in enumerate(planes):
            assert (p.get_x(), p.get_width()) == (k * num_blocks * page, num_blocks * page)
            assert rgba(p) == tuple(round(x, 4) for x in to_rgba(KIND_COLORS[p.info.cache_kind]))
            pages = plot.find_patches(fig, kind="page", layer=p.info.layer)
            assert [(q.info.block, q.get_x(), q.get_width()) for q in pages] == [
                (b, k * num_blocks * page + b * page, page) for b in range(num_blocks)
            ]
        unused = plot.find_patches(fig, kind="unused", group=g.name)
        if len(g.layers) < widest:  # the short group's last plane, hatched like unused bytes
            assert [(u.get_x(), u.get_width()) for u in unused] == [
                (len(g.layers) * num_blocks * page, (widest - len(g.layers)) * num_blocks * page)
            ]
            assert unused[0].get_hatch() == "////"
            assert to_rgba(UNUSED_COLOR) == tuple(unused[0].get_edgecolor())
        else:
            assert unused == []


def test_pool_planes_gemma_short_groups_and_kinds(gemma):
    """Gemma 3: sliding groups of 9, 9, 9, 9, 8, 8 (cdiv(52, 10) = 6 groups of sliding[i::6]) and
    one full group of 10: four groups leave one plane unused, two leave two; the sliding planes
    are green, the full ones blue."""
    layout = plan_hybrid(gemma)
    fig = plot.pool_planes(layout, 8)
    c = raw("gemma-3-27b")  # layer i is full when (i + 1) % sliding_window_pattern == 0
    sliding = [i for i in range(c["num_hidden_layers"]) if (i + 1) % c["sliding_window_pattern"] != 0]
    counts = [len(sliding[i::6]) for i in range(6)]
    assert counts == [9, 9, 9, 9, 8, 8]
    planes_per_group = [len(plot.find_patches(fig, kind="plane", group=g.name)) for g in layout.groups]
    assert planes_per_group == counts + [c["num_hidden_layers"] - len(sliding)]
    unused_planes = [
        sum(u.get_width() for u in plot.find_patches(fig, kind="unused", group=g.name)) for g in layout.groups
    ]
    page_x8 = layout.block_stride * 8 // 10
    assert unused_planes == [(10 - n) * page_x8 for n in counts] + [0]
    kinds = {p.info.cache_kind for p in plot.find_patches(fig, kind="plane")}
    assert kinds == {CacheKind.SLIDING_ATTENTION, CacheKind.FULL_ATTENTION}
    assert KIND_COLORS[CacheKind.SLIDING_ATTENTION] != KIND_COLORS[CacheKind.FULL_ATTENTION]
    texts = flat_texts(fig)
    assert any(f"layer stride = 8 blocks x page = {page_x8:,} B" in t for t in texts)
    assert any(f"block stride = page = {page_x8 // 8:,} B" in t for t in texts)
    assert "unused plane(s) of a short group" in plot.legend_labels(fig)


def test_pool_planes_padded_states(qwen):
    """Qwen3-Next, prefix caching on: each state page of every shown block ends in its padding,
    drawn in the padding colour; attention pages have none."""
    layout = plan_hybrid(qwen)
    page = qwen_attention_page(576)  # 'align' mode: a multiple of 64 tokens whose page holds a state
    assert max(p.page_bytes for p in layout.placements) == page
    pad = page - qwen_state_bytes()
    assert pad == 81_920
    fig = plot.pool_planes(layout, 4, blocks_shown=[1, 3])
    pads = plot.find_patches(fig, kind="pad")
    states = [p for p in layout.placements if p.cache.kind is CacheKind.GDN_STATE]
    assert len(pads) == len(states) * 2
    for p in pads:
        k = [c.name for c in layout.groups[[g.name for g in layout.groups].index(p.info.group)].layers].index(
            p.info.layer
        )
        end = k * 4 * page + (p.info.block + 1) * page
        assert (p.get_x(), p.get_width()) == (end - pad, pad)
        assert rgba(p) == tuple(round(x, 4) for x in to_rgba(PAD_COLOR))
    assert {p.info.block for p in plot.find_patches(fig, kind="page")} == {1, 3}
    assert not plot.find_patches(fig, kind="pad", cache_kind=CacheKind.FULL_ATTENTION)
    assert "padding (state page grown to the attention page)" in plot.legend_labels(fig)


def test_pool_planes_many_blocks_draw_no_pages(gpt_oss):
    """A real pool (tens of thousands of blocks) draws planes only; gpt-oss: 2 rows of 18 planes."""
    layout = plan_hybrid(gpt_oss)
    fig = plot.pool_planes(layout, 72_817)
    assert plot.find_patches(fig, kind="page") == []
    assert [len(plot.find_patches(fig, kind="plane", group=g.name)) for g in layout.groups] == [18, 18]
    gids = [p.get_gid() for p in plot.find_patches(fig, kind="plane")]
    assert sorted(gids) == sorted(f"plane:{p.name}" for p in layout.placements)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"num_blocks": 0}, "num_blocks"),
        ({"num_blocks": 4, "blocks_shown": [4]}, "blocks_shown"),
        ({"num_blocks": 4, "blocks_shown": [-1]}, "blocks_shown"),
    ],
)
def test_pool_planes_bad_input_names_the_field(gpt_oss, kwargs, field):
    with pytest.raises(KvvizError, match=field):
        plot.pool_planes(plan_hybrid(gpt_oss), **kwargs)


# ---- block map, before/after and page anatomy of hybrid layouts --------------------------
def test_block_map_padded_state_pages(qwen):
    """Prefix caching on: every state page is 1,097,728 B of state then 81,920 B of padding,
    drawn as padding (its own colour); attention pages carry no padding band."""
    layout = plan_hybrid(qwen)
    fig = plot.block_map(layout)
    page, pad = qwen_attention_page(576), qwen_attention_page(576) - qwen_state_bytes()
    pads = plot.find_patches(fig, kind="pad")
    states = [p for p in layout.placements if p.cache.kind is CacheKind.GDN_STATE]
    assert sorted((p.info.layer, p.get_x(), p.get_width()) for p in pads) == sorted(
        (s.name, s.offset + page - pad, pad) for s in states
    )
    assert {rgba(p) for p in pads} == {tuple(round(x, 4) for x in to_rgba(PAD_COLOR))}
    state_color = {rgba(p) for p in plot.find_patches(fig, kind="page", cache_kind=CacheKind.GDN_STATE)}
    assert state_color.isdisjoint({rgba(p) for p in pads})
    assert "padding (state page grown to the attention page)" in plot.legend_labels(fig)


def test_block_map_empty_slots_of_short_groups(gemma):
    """Gemma 3: a group of 8 sliding layers leaves two 131,072 B page slots unused, one of 9 one."""
    layout = plan_hybrid(gemma)
    c = raw("gemma-3-27b")
    page = 16 * c["num_key_value_heads"] * c["head_dim"] * 2 * BF16
    stride = 10 * page
    assert layout.block_stride == stride
    fig = plot.block_map(layout)
    for g in layout.groups:
        unused = plot.find_patches(fig, kind="unused", group=g.name)
        n = len(g.layers)
        assert [(u.get_x(), u.get_x() + u.get_width()) for u in unused] == ([(n * page, stride)] if n < 10 else [])
        for u in unused:
            assert u.get_hatch() == "////" and u.get_facecolor() == to_rgba("white")


def test_block_map_sliding_lanes_have_their_own_colour(gpt_oss):
    """gpt-oss: the sliding group's pages are all the sliding colour, the full group's the full one."""
    layout = plan_hybrid(gpt_oss)
    fig = plot.block_map(layout)
    colors = {g.name: {rgba(p) for p in plot.find_patches(fig, kind="page", group=g.name)} for g in layout.groups}
    sliding = tuple(round(x, 4) for x in to_rgba(KIND_COLORS[CacheKind.SLIDING_ATTENTION]))
    full = tuple(round(x, 4) for x in to_rgba(KIND_COLORS[CacheKind.FULL_ATTENTION]))
    assert sorted(colors.values(), key=str) == sorted([{sliding}, {full}], key=str)
    assert sliding != full
    labels = plot.legend_labels(fig)
    assert CacheKind.SLIDING_ATTENTION.label in labels and CacheKind.FULL_ATTENTION.label in labels


def test_invisible_state_padding_is_named_in_the_note(qwen):
    """Prefix caching off: 16,384 B of padding in a 13,369,344 B block is under 3 px at 12 in, so
    the note under the key names it, as state padding, not alignment padding."""
    fig = plot.block_map(plan_hybrid(qwen, Options(prefix_caching=False)))
    pad = qwen_attention_page(544) - qwen_state_bytes()
    assert pad == 16_384
    notes = [t.get_text() for t in fig.texts if t.get_gid() == "sliver-note"]
    assert notes == [
        f"too thin to see at this scale: padding (state page grown to the attention page): "
        f"at most {plot.format_bytes(pad)} a page"
    ]
    assert len(plot.find_patches(fig, kind="pad")) == 36  # drawn all the same, one per state page


def test_before_after_keys_only_what_is_drawn(qwen):
    """Prefix caching off vs on: no lane leaves bytes unused, so the key has no unused entry."""
    fig = plot.before_after(plan_hybrid(qwen, Options(prefix_caching=False)), plan_hybrid(qwen))
    assert plot.find_patches(fig, kind="unused") == []
    assert "unused by the group" not in plot.legend_labels(fig)


def test_before_after_vllm_vs_packed(qwen):
    """Prefix caching off: vLLM pads each state to 1,114,112 B; packed keeps 1,097,728 B pages,
    so the padding bands are gone and each state group's tail is unused instead."""
    options = Options(prefix_caching=False)
    before, after = plan_hybrid(qwen, options), plan_hybrid(qwen, options, "packed")
    page, state = qwen_attention_page(544), qwen_state_bytes()
    assert page == 1_114_112 and state == 1_097_728
    fig = plot.before_after(before, after)
    assert {p.get_width() for p in plot.find_patches(fig, kind="pad", panel="before")} == {page - state}
    assert plot.find_patches(fig, kind="pad", panel="after") == []
    for g in after.groups:
        if g.layers[0].kind is CacheKind.GDN_STATE:
            unused = plot.find_patches(fig, kind="unused", panel="after", group=g.name)
            assert [(u.get_x(), u.get_width()) for u in unused] == [
                (len(g.layers) * state, 12 * page - len(g.layers) * state)
            ]


def test_state_page_anatomy_names_conv_and_ssm(qwen):
    """The state page: conv state [0, conv), SSM state [conv, state), padding [state, page)."""
    layout = plan_hybrid(qwen)
    state = next(p for p in layout.placements if p.cache.kind is CacheKind.GDN_STATE)
    fig = plot.page_anatomy(state)
    c = raw("qwen3-next-80b-a3b")
    conv_dim = (
        2 * c["linear_num_key_heads"] * c["linear_key_head_dim"]
        + c["linear_num_value_heads"] * c["linear_value_head_dim"]
    )
    conv = (c["linear_conv_kernel_dim"] - 1) * conv_dim * BF16
    page = qwen_attention_page(576)
    regions = {p.info.layer: (p.get_x(), p.get_x() + p.get_width()) for p in plot.find_patches(fig, kind="region")}
    assert regions == {
        "payload": (0, conv),
        "footer": (conv, qwen_state_bytes()),
        "padding": (qwen_state_bytes(), page),
    }
    texts = "\n".join(flat_texts(fig))
    # the parts are named as the family names the state tensors (families/state.py: conv, ssm)
    assert f"conv: 1 rows x {conv:,} B" in texts
    assert f"ssm: 1 rows x {qwen_state_bytes() - conv:,} B" in texts
    assert f"padding: {page - qwen_state_bytes():,} B" in texts


def test_attention_page_anatomy_names_k_and_v(gpt_oss):
    layout = plan_hybrid(gpt_oss)
    c = raw("gpt-oss-120b")
    half = c["num_key_value_heads"] * c["head_dim"] * BF16
    texts = "\n".join(flat_texts(plot.page_anatomy(layout.placements[0])))
    assert f"K: 16 rows x {half:,} B" in texts and f"V: 16 rows x {half:,} B" in texts


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    model=st.sampled_from(["gpt-oss-120b", "gemma-3-27b", "qwen3-next-80b-a3b", "llama-4-scout"]),
    planner=st.sampled_from(["vllm", "packed"]),
    num_blocks=st.integers(1, 12),
    prefix_caching=st.booleans(),
)
def test_pool_planes_rows_tile_the_pool(model, planner, num_blocks, prefix_caching):
    """Each row's planes and unused range tile [0, bytes per block x num_blocks) with no gap or
    overlap, every plane is num_blocks pages, and every shown page lies inside its own plane."""
    m = load_model(model)  # prefix caching is a knob of models with states only (attention-only: refused)
    options = Options(prefix_caching=prefix_caching) if "prefix_caching" in m.reader.knobs_for(m) else Options()
    layout = plan_hybrid(m, options, planner)
    fig = plot.pool_planes(layout, num_blocks, blocks_shown=[0, num_blocks - 1])
    size = layout.block_stride * num_blocks
    for g in layout.groups:
        pieces = sorted(
            (p.get_x(), p.get_x() + p.get_width())
            for p in plot.find_patches(fig, kind="plane", group=g.name)
            + plot.find_patches(fig, kind="unused", group=g.name)
        )
        assert pieces[0][0] == 0 and pieces[-1][1] == size
        assert all(a[1] == b[0] for a, b in zip(pieces, pieces[1:]))
        for p in plot.find_patches(fig, kind="plane", group=g.name):
            page = next(q.page_bytes for q in layout.placements if q.name == p.info.layer)
            assert p.get_width() == num_blocks * page
            for q in plot.find_patches(fig, kind="page", layer=p.info.layer):
                assert p.get_x() + q.info.block * page == q.get_x() and q.get_width() == page


# ---- pool_planes draws its data object (kvviz.views.planes_data) -----------------------------
def test_pool_planes_draws_its_data_object(qwen):
    """Qwen3-Next, 3 blocks, blocks 0 and 2 shown: plane k of a group at k x 3 x page, block b's
    page of it at that + b x page (the layer-outermost rule), a state page ending in its padding
    (attention page - state bytes, derived from the preset); the figure draws exactly the data."""
    layout = plan_hybrid(qwen)
    page = qwen_attention_page(576)
    pad = page - qwen_state_bytes()
    data = plot.pool_planes_data(layout, 3, blocks_shown=[2, 0])
    assert data.blocks_shown == (0, 2) and data.size == 3 * layout.block_stride
    for g in layout.groups:
        planes = [pl for pl in data.planes if pl.group == g.name]
        assert [(pl.layer, pl.start, pl.end) for pl in planes] == [
            (c.name, k * 3 * page, (k + 1) * 3 * page) for k, c in enumerate(g.layers)
        ]
        pages = [p for p in data.pages if p.group == g.name]
        assert [(p.layer, p.block, p.start, p.end) for p in pages] == [
            (c.name, b, k * 3 * page + b * page, k * 3 * page + (b + 1) * page)
            for k, c in enumerate(g.layers)
            for b in (0, 2)
        ]
        for p in pages:
            assert p.padding_bytes == (pad if p.kind is CacheKind.GDN_STATE else 0)
    fig = plot.pool_planes(data)
    assert isinstance(fig, plot.KvvizFigure)
    assert [(p.info.layer, p.get_x(), p.get_x() + p.get_width()) for p in plot.find_patches(fig, kind="plane")] == [
        (pl.layer, pl.start, pl.end) for pl in data.planes
    ]
    assert [(r.block, r.layer, r.start, r.end) for r in plot.patch_ranges(fig, kind="page")] == [
        (p.block, p.layer, p.start, p.end) for p in data.pages
    ]
    assert [(r.block, r.layer, r.start, r.end) for r in plot.patch_ranges(fig, kind="pad")] == [
        (p.block, p.layer, p.pad_start, p.end) for p in data.pages if p.padding_bytes
    ]
    assert [(r.group, r.start, r.end) for r in plot.patch_ranges(fig, kind="unused")] == [
        (pl.group, pl.start, pl.end) for pl in data.unused
    ]
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == [r.label for r in data.rows]
    assert data.title in flat_texts(fig)


def test_pool_planes_data_of_short_groups_by_hand(gemma):
    """Gemma 3 in 8 blocks: a group of n sliding layers leaves (10 - n) planes of 8 x page unused
    at the end of the pool (groups of 10 layers, docs/hybrid.md#hybrid-grouping)."""
    layout = plan_hybrid(gemma)
    c = raw("gemma-3-27b")
    page = 16 * c["num_key_value_heads"] * c["head_dim"] * 2 * BF16
    data = plot.pool_planes_data(layout, 8)
    assert data.blocks_shown == tuple(range(8))  # a pool this small: every block's pages
    for g in layout.groups:
        n = len(g.layers)
        unused = [(pl.start, pl.end) for pl in data.unused if pl.group == g.name]
        assert unused == ([(n * 8 * page, 10 * 8 * page)] if n < 10 else [])
