"""kvviz.views: the figures are read back and compared with the layouts they draw.

Expected byte ranges are recomputed here independently of kvviz.views (a coverage mask per
group), and the strides and percentages are the published ones (docs/published-numbers.md#the-published-table).
"""

from __future__ import annotations

import re
import subprocess
import sys
from fractions import Fraction
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure

from kvviz import views as plot
from kvviz.base.defaults import BLOCK_SIZE
from kvviz.base.errors import KvvizError
from kvviz.core.group import KVGroup
from kvviz.core.kinds import CacheKind
from kvviz.core.spec import custom_cache as _custom_cache
from kvviz.families import load_preset as load_model
from kvviz.options import Options
from kvviz.vllm.plan import plan_model
from kvviz.vllm.planners import LAYOUT_PLANNERS as PLANNERS
from kvviz.vllm.planners import plan


def flat_texts(fig) -> list[str]:
    """The figure's texts with the line breaks a title is wrapped at (canvas.wrapped) read as spaces."""
    return [t.replace("\n", " ") for t in plot.figure_texts(fig)]


def custom_cache(name, page_bytes, **kw):
    """A groups-file cache (the groups files' default block: DeepSeek V4's 256 tokens)."""
    return _custom_cache(name, page_bytes, tokens_per_block=BLOCK_SIZE, **kw)


def compare_layouts(model, backend="flashmla"):
    """vLLM #48993's before/after for one backend: bucketed + FP8 indexer vs overlay + MXFP4."""
    return (
        plan_model(model, "bucketed", Options(backend=backend, indexer_format="fp8")).layout,
        plan_model(model, "overlay", Options(backend=backend, indexer_format="mxfp4")).layout,
    )


MODELS = ("deepseek-v4-pro", "deepseek-v4-flash")


@pytest.fixture(scope="module")
def layouts():
    """(model, backend) -> (before, after): vLLM #48993's bucketed+FP8 and overlay+MXFP4 layouts."""
    return {(m, b): compare_layouts(load_model(m), b) for m in MODELS for b in ("flashmla", "flashinfer")}


@pytest.fixture(scope="module")
def pro():
    return plan_model(
        load_model("deepseek-v4-pro"), "overlay", Options(backend="flashmla", indexer_format="mxfp4")
    ).layout


# ---- independent expectations -------------------------------------------------------------
def expected_unused(layout, group: int) -> list[tuple[int, int]]:
    """Runs of bytes no page of the group covers, from a boolean mask of the whole block."""
    free = np.ones(layout.block_stride, dtype=bool)
    for p in layout.group_placements(group):
        free[p.offset : p.end] = False
    change = np.flatnonzero(np.diff(np.concatenate([[False], free, [False]])))
    return [(int(a), int(b)) for a, b in zip(change[0::2], change[1::2])]


def check_block_map(layout, fig, *, show_padding=True, panel=None):
    """Every page, padding band and unused range is drawn exactly once, at its bytes and lane."""
    pages = plot.find_patches(fig, kind="page", panel=panel)
    assert sorted((p.info.layer, p.get_x(), p.get_x() + p.get_width()) for p in pages) == sorted(
        (p.name, p.offset, p.end) for p in layout.placements
    )
    lane = {g.name: i for i, g in enumerate(layout.groups)}
    for p in pages:
        assert p.get_y() < lane[p.info.group] < p.get_y() + p.get_height()
        assert p.get_facecolor() == to_rgba(plot.KIND_COLORS[p.info.cache_kind])

    pads = sorted((r.layer, r.start, r.end) for r in plot.patch_ranges(fig, kind="pad", panel=panel))
    want = (
        sorted((p.name, p.end - p.cache.padding_bytes, p.end) for p in layout.placements if p.cache.padding_bytes > 0)
        if show_padding
        else []
    )
    assert pads == want

    unused = plot.find_patches(fig, kind="unused", panel=panel)
    got = sorted((p.info.group, int(p.get_x()), int(p.get_x() + p.get_width())) for p in unused)
    assert got == sorted((g.name, a, b) for i, g in enumerate(layout.groups) for a, b in expected_unused(layout, i))
    for i, g in enumerate(layout.groups):  # conservation, overlay planners: pages + unused = stride
        if layout.planner != "bucketed":
            used = sum(p.page_bytes for p in layout.group_placements(i))
            assert (
                used + sum(r.size for r in plot.patch_ranges(fig, kind="unused", group=g.name, panel=panel))
                == layout.block_stride
            )


# ---- block map ----------------------------------------------------------------------------
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("backend", ["flashmla", "flashinfer"])
def test_block_map_draws_every_range_of_both_planners(layouts, model, backend):
    for layout in layouts[model, backend]:
        fig = plot.block_map(layout)
        assert isinstance(fig, Figure)
        check_block_map(layout, fig)
        ax = fig.axes[0]
        assert ax.get_xlim() == (0, layout.block_stride)


def test_block_map_texts_carry_stride_and_binding_group(layouts):
    before, after = layouts["deepseek-v4-pro", "flashmla"]
    texts = "\n".join(flat_texts(plot.block_map(after)))
    assert "block stride 1,315,008 B" in texts  # docs/published-numbers.md#the-published-table
    assert "binding group: full" in texts
    texts = "\n".join(flat_texts(plot.block_map(before)))
    assert "block stride 1,473,408 B" in texts
    assert "none (sum of page-size buckets)" in texts


# ---- figures that explain themselves -------------------------------------------------------
def text_boxes(fig):
    """(text artist, its window extent) of every visible non-empty text, after an Agg draw.
    An annotation's box is its text's, without the leader line."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    # A tick outside its axis's view (2^11 left of a log axis starting at 2^12) keeps a label matplotlib never draws.
    unseen = {
        label
        for ax in fig.axes
        for axis in (ax.xaxis, ax.yaxis)
        for tick in axis.majorTicks + axis.minorTicks
        if tick.get_loc() is not None
        and not min(axis.get_view_interval()) <= tick.get_loc() <= max(axis.get_view_interval())
        for label in (tick.label1, tick.label2)
    }
    return [
        (t, Text.get_window_extent(t, renderer))
        for t in fig.findobj(Text)
        if t.get_text() and t.get_visible() and t not in unseen
    ]


def check_readable(fig):
    """Nothing clipped at the edges (every text inside the canvas), no two texts overlapping."""
    boxes = text_boxes(fig)
    canvas = fig.bbox
    for t, b in boxes:
        assert b.x0 >= -0.5 and b.y0 >= -0.5 and b.x1 <= canvas.width + 0.5 and b.y1 <= canvas.height + 0.5, (
            f"{t.get_text()!r} is cut at the edge: {b.bounds} in {canvas.bounds}"
        )
    for i, (t, a) in enumerate(boxes):
        for u, b in boxes[i + 1 :]:
            assert not (a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1), (
                f"{t.get_text()!r} overlaps {u.get_text()!r}"
            )
    return boxes


def texts_with_gid(fig, gid):
    from matplotlib.text import Text

    return [t for t in fig.findobj(Text) if t.get_gid() == gid and t.get_text()]


def exact_bytes(label: str) -> int:
    """'2.5 KiB' -> 2560; fails unless the label is an exact byte count."""
    value, unit = re.fullmatch(r"([\d,.]+) (B|KiB|MiB|GiB)", label).groups()
    count = Fraction(value.replace(",", "")) * {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[unit]
    assert count.denominator == 1, label
    return int(count)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("backend", ["flashmla", "flashinfer"])
def test_figures_are_readable(layouts, model, backend):
    before, after = layouts[model, backend]
    for fig in (
        plot.block_map(after),
        plot.block_map(before),
        plot.before_after(before, after),
        plot.page_anatomy(after.placements[0]),
        plot.page_anatomy(after.placement("model.layers.2.attn")),
    ):
        check_readable(fig)


def test_block_map_ticks_are_exact(pro):
    fig = plot.block_map(pro)
    boxes = check_readable(fig)  # the last tick label is inside the canvas
    ax = fig.axes[0]
    ticks = [t for t in ax.get_xticks() if 0 <= t <= pro.block_stride]
    step = ticks[1] - ticks[0]
    assert step == 2**18 and ticks == [k * step for k in range(len(ticks))]  # 1,315,008 // 2**18 = 5
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == ["0", "256 KiB", "512 KiB", "768 KiB", "1 MiB", "1.25 MiB"]
    assert [exact_bytes(x) for x in labels[1:]] == ticks[1:]
    assert {t.get_text() for t, _ in boxes} >= set(labels)


def test_a_tick_at_the_stride_is_labelled_exactly_and_not_cut():
    """A 2,560 B stride: 2,560 B is '2.5 KiB' (not '2'), at the right edge, inside the canvas."""
    layout = plan((KVGroup(name="g", layers=(custom_cache("a", 1024), custom_cache("b", 1536))),), "overlay")
    fig = plot.block_map(layout)
    check_readable(fig)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "512 B", "1 KiB", "1.5 KiB", "2 KiB", "2.5 KiB"]
    assert list(ax.get_xticks()) == [0, 512, 1024, 1536, 2048, 2560]


def test_block_map_says_every_lane_is_the_same_bytes_and_marks_stride_and_binding(pro):
    fig = plot.block_map(pro)
    boxes = dict(check_readable(fig))
    ax = fig.axes[0]
    (note,) = texts_with_gid(fig, "overlay-note")
    assert note.get_text() == "every lane = bytes [0, 1,315,008) of the same block"
    (bracket,) = [line for line in ax.lines if line.get_gid() == "bracket"]
    assert list(bracket.get_xdata()) == [0, 0, pro.block_stride, pro.block_stride]
    (mark,) = texts_with_gid(fig, "stride-mark")
    assert mark.get_text() == "stride 1,315,008 B"
    stride_px = ax.transData.transform((pro.block_stride, 0))[0]
    assert abs(boxes[mark].x1 - stride_px) < 1.5  # it ends at the stride
    (outline,) = [p for p in ax.patches if p.get_gid() == "binding"]
    full = [g.name for g in pro.groups].index("full")
    assert (outline.get_x(), outline.get_width()) == (0, pro.block_stride)
    assert outline.get_y() < full < outline.get_y() + outline.get_height()
    assert ax.get_yticklabels()[full].get_text().startswith("full  ◀ binds")


def test_bucketed_block_map_outlines_no_group(layouts):
    before, _ = layouts["deepseek-v4-pro", "flashmla"]
    fig = plot.block_map(before)
    assert not [p for p in fig.axes[0].patches if p.get_gid() == "binding"]
    assert not any("◀ binds" in t.get_text() for t in fig.axes[0].get_yticklabels())


@pytest.mark.parametrize("planner", sorted(PLANNERS))
def test_size_labels_sit_in_their_range_and_say_its_size(planner):
    groups = (
        KVGroup(name="big", layers=(custom_cache("x", 40_960), custom_cache("y", 2_560))),
        KVGroup(name="small", layers=(custom_cache("z", 10_240),)),
    )
    layout = plan(groups, planner)
    fig = plot.block_map(layout)
    boxes = dict(check_readable(fig))
    ax = fig.axes[0]
    names = [g.name for g in layout.groups]
    ranges = [(r.start, r.end, names.index(r.group)) for r in plot.patch_ranges(fig, kind="page")] + [
        (r.start, r.end, names.index(r.group)) for r in plot.patch_ranges(fig, kind="unused")
    ]
    labels = texts_with_gid(fig, "size")
    assert labels
    for t in labels:
        b = boxes[t]
        x0, x1 = (ax.transData.inverted().transform((px, 0))[0] for px in (b.x0, b.x1))
        lane = round(t.get_position()[1])
        (start, end) = next((s, e) for s, e, g in ranges if s <= x0 and x1 <= e and g == lane)
        assert exact_bytes(t.get_text().splitlines()[-1].removeprefix("unused ")) == end - start
    assert "40 KiB" in {t.get_text().splitlines()[-1] for t in labels}


def _widest_run_px(fig, kind):
    """Widest run of adjacent drawn pages of one kind in one lane, in pixels (read off the figure)."""
    ax = fig.axes[0]
    px = ax.transData.transform([(0, 0), (1, 0)])
    per_byte = px[1, 0] - px[0, 0]
    by_lane: dict = {}
    for r in sorted(plot.patch_ranges(fig, kind="page"), key=lambda r: (r.group, r.start)):
        runs = by_lane.setdefault(r.group, [])
        if runs and runs[-1][0] == r.cache_kind and runs[-1][2] == r.start:
            runs[-1][2] = r.end
        else:
            runs.append([r.cache_kind, r.start, r.end])
    return max((e - s) * per_byte for runs in by_lane.values() for k, s, e in runs if k == kind)


def test_legend_lists_visible_kinds_and_a_note_names_the_slivers(layouts):
    """Pro's main KV c128 pages (1,728 B, alone between 37 KiB pages) are ~1 px wide in a
    1.3 MB block: not in the legend, named in the note with their size."""
    for before, after in layouts.values():
        for layout in (before, after):
            fig = plot.block_map(layout)
            labels = set(plot.legend_labels(fig))
            notes = [t.get_text() for t in texts_with_gid(fig, "sliver-note")]
            for kind in {p.cache.kind for p in layout.placements}:
                visible = _widest_run_px(fig, kind) >= plot.MIN_VISIBLE_PX
                assert (kind.label in labels) == visible, kind
                if not visible:
                    size = plot.format_bytes(min(p.page_bytes for p in layout.placements if p.cache.kind is kind))
                    assert any(f"{kind.label}: " in n and size in n for n in notes)
            absent = {k.label for k in CacheKind} - {p.cache.kind.label for p in layout.placements}
            assert not absent & labels
    _, after = layouts["deepseek-v4-pro", "flashmla"]
    (note,) = texts_with_gid(plot.block_map(after), "sliver-note")
    assert "main KV c128: 31 pages of 1,728 B in full" in note.get_text()


def test_colours_are_stable_and_distinct_per_kind(layouts):
    assert set(plot.KIND_COLORS) == set(CacheKind)
    assert len({to_rgba(c) for c in plot.KIND_COLORS.values()}) == len(CacheKind)
    seen: dict[CacheKind, tuple] = {}
    for before, after in layouts.values():
        for layout in (before, after):
            for p in plot.find_patches(plot.block_map(layout), kind="page"):
                assert seen.setdefault(p.info.cache_kind, p.get_facecolor()) == p.get_facecolor()


def test_show_padding_false_and_drawing_into_an_axes(pro):
    fig = Figure(figsize=(10, 4))
    ax = fig.add_axes((0.2, 0.3, 0.75, 0.6))
    assert plot.block_map(pro, ax=ax, show_padding=False) is fig
    check_block_map(pro, fig, show_padding=False)
    assert all(p.axes is ax for p in plot.find_patches(fig))


def test_find_patches_filters_and_gids(pro):
    fig = plot.block_map(pro)
    layer = "model.layers.2.attn.indexer.k_cache"
    (page,) = plot.find_patches(fig, kind="page", layer=layer)
    p = pro.placement(layer)
    assert page.get_gid() == f"page:{layer}"
    # MXFP4 page, docs/caches.md#the-caches-a-layer-registers
    assert (page.get_x(), page.get_width()) == (p.offset, 4608)
    assert plot.find_patches(fig, kind="pad", layer=layer)[0].get_gid() == f"pad:{layer}"
    tails = plot.find_patches(fig, kind="unused", group="swa-a")
    assert [t.get_gid() for t in tails] == [f"unused:swa-a:{31 * 37440}"]
    assert len(plot.find_patches(fig, cache_kind=CacheKind.INDEXER_K)) == 2 * 30  # page + pad each
    assert {r.role for r in plot.patch_ranges(fig)} == {"page", "pad", "unused"}


@st.composite
def random_groups(draw):
    sizes = draw(st.lists(st.lists(st.integers(1, 40_000), min_size=1, max_size=10), min_size=1, max_size=5))
    return tuple(
        KVGroup(name=f"g{i}", layers=tuple(custom_cache(f"g{i}.l{j}", pb) for j, pb in enumerate(layer)))
        for i, layer in enumerate(sizes)
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(groups=random_groups(), planner=st.sampled_from(sorted(PLANNERS)))
def test_block_map_of_random_layouts(groups, planner):
    layout = plan(groups, planner)
    fig = plot.block_map(layout)
    check_block_map(layout, fig)
    assert f"{layout.block_stride:,} B" in "\n".join(flat_texts(fig))
    check_readable(fig)


def test_block_map_refuses_non_layouts():
    with pytest.raises(KvvizError, match="layout"):
        plot.block_map("deepseek-v4-pro")


# ---- before / after -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "backend,before_s,after_s,pct",
    [
        ("flashmla", "1,473,408", "1,315,008", "-10.75%"),  # docs/published-numbers.md#the-published-table
        ("flashinfer", "1,308,672", "1,228,800", "-6.10%"),
    ],
)
def test_before_after_shows_both_strides_and_the_saving(layouts, backend, before_s, after_s, pct):
    before, after = layouts["deepseek-v4-pro", backend]
    fig = plot.before_after(before, after)
    texts = "\n".join(flat_texts(fig))
    for s in (before_s, after_s, pct):
        assert s in texts
    assert f"{before.block_stride - after.block_stride:,} B" in texts
    ax_b, ax_a = fig.axes[:2]
    assert ax_b.get_xlim() == ax_a.get_xlim() == (0, before.block_stride)  # one shared scale
    check_block_map(before, fig, panel="before")
    check_block_map(after, fig, panel="after")
    (saved,) = plot.find_patches(fig, kind="saved")
    assert (saved.get_x(), saved.get_x() + saved.get_width()) == (after.block_stride, before.block_stride)
    holes = plot.find_patches(fig, kind="unused", panel="before")
    assert holes and all(h.get_edgecolor() == to_rgba(plot.HOLE_COLOR) and h.get_hatch() for h in holes)
    assert all(p.get_gid().startswith("before/") for p in plot.find_patches(fig, panel="before"))
    assert "hole (bucketed)" in plot.legend_labels(fig)


# ---- page anatomy -------------------------------------------------------------------------
def _ranges(fig, kind):
    return [(r.layer, r.start, r.end) for r in plot.patch_ranges(fig, kind=kind)]


def test_page_anatomy_fp8_ds_mla(pro):
    cache = pro.placement("model.layers.2.attn").cache  # c4 main KV, docs/row-formats.md#fp8_ds_mla
    fig = plot.page_anatomy(cache)
    texts = "\n".join(flat_texts(fig))
    assert "row 584 B = payload 576 B + footer 8 B" in texts
    assert "448 E4M3 NoPE" in texts and "64 bf16 RoPE" in texts and "7 UE8M0 scale" in texts
    assert _ranges(fig, "region") == [
        ("payload", 0, 64 * 576),
        ("footer", 64 * 576, 64 * 584),
        ("padding", 64 * 584, 37_440),
    ]
    assert _ranges(fig, "field") == [("NoPE", 0, 448), ("RoPE", 448, 576), ("scale", 0, 7), ("pad", 7, 8)]


def test_page_anatomy_mxfp4_shows_nibble_order(pro):
    fig = plot.page_anatomy(pro.placement("model.layers.2.attn.indexer.k_cache"))  # a Placement works too
    texts = "\n".join(flat_texts(fig))
    assert "row 68 B = payload 64 B + footer 4 B" in texts
    assert "4 UE8M0 scale" in texts
    assert "elem 2i low nibble, 2i+1 high" in texts
    assert _ranges(fig, "region") == [("payload", 0, 64 * 64), ("footer", 64 * 64, 64 * 68), ("padding", 64 * 68, 4608)]
    assert _ranges(fig, "field") == [("K", 0, 64), ("scale", 0, 4)]


def test_page_anatomy_refuses_other_objects():
    with pytest.raises(KvvizError, match="cache"):
        plot.page_anatomy(42)


# ---- live bytes ---------------------------------------------------------------------------
def _pool(layout, owners, seed=0):
    rng = np.random.default_rng(seed)
    data = np.zeros((len(owners), layout.block_stride), np.uint8)
    for b, g in enumerate(owners):
        if g is not None and g >= 0:
            for p in layout.group_placements(g):
                data[b, p.offset : p.offset + p.cache.content_bytes] = rng.integers(1, 256, p.cache.content_bytes)
    return data


def test_live_bytes_marks_victims_and_spans(pro):
    owners = [0, None, 4, -1]
    data = _pool(pro, owners)
    idx = pro.placement("model.layers.2.attn.indexer.k_cache")
    victims = [
        {"block": 0, "start": idx.offset, "end": idx.end, "layer": idx.name},
        SimpleNamespace(block=2, start=1000, end=1000 + pro.block_stride, layer="zeroer spill"),
    ]
    torch = pytest.importorskip("torch")  # a pool's backing is a torch tensor; imported here, it is slow
    fig = plot.live_bytes(pro, torch.from_numpy(data), owners, victims=victims)
    marks = sorted((r.block, r.start, r.end) for r in plot.patch_ranges(fig, kind="victim"))
    # The second victim runs past the stride: it continues into block 3 (docs/hazards.md#zeroer).
    assert marks == [(0, idx.offset, idx.end), (2, 1000, pro.block_stride), (3, 0, 1000)]
    assert all(p.get_edgecolor() == to_rgba(plot.VICTIM_COLOR) for p in plot.find_patches(fig, kind="victim"))
    check_readable(fig)
    # Each victim piece has a number on the map and a line in the table under the key.
    numbers = sorted(int(t.get_text()) for t in texts_with_gid(fig, "victim-number"))
    assert numbers == [1, 2, 3]
    header, *rows = [t.get_text().split() for t in texts_with_gid(fig, "victim-table")]
    assert header[:2] == ["#", "block"]
    assert [(int(r[0]), int(r[1]), " ".join(r[2:4])) for r in rows] == [
        (1, 0, f"[{idx.offset:,}, {idx.end:,})"),
        (2, 2, f"[1,000, {pro.block_stride:,})"),
        (3, 3, "[0, 1,000)"),
    ]
    assert rows[0][-2:] == ["L2", "indexer.k_cache"] and rows[1][-2:] == ["zeroer", "spill"]
    assert "victim range" in plot.legend_labels(fig)
    spans = plot.patch_ranges(fig, kind="span")
    assert sorted((r.block, r.layer, r.start, r.end) for r in spans) == sorted(
        [(0, p.name, p.offset, p.end) for p in pro.group_placements(0)]
        + [(2, p.name, p.offset, p.end) for p in pro.group_placements(4)]
    )
    assert [t.get_text().splitlines()[0] for t in fig.axes[0].get_yticklabels()] == ["block 0", "block 2", "block 3"]


def test_adjacent_victims_get_labels_that_do_not_overlap(pro):
    """Twelve 100-byte victims side by side in one block (a zeroer hitting row after row):
    numbered in rows, spread apart, listed in the table."""
    data = np.zeros((2, pro.block_stride), np.uint8)
    victims = [{"block": 0, "start": 100 * k, "end": 100 * (k + 1), "layer": f"row {k}"} for k in range(12)]
    fig = plot.live_bytes(pro, data, [0, None], victims=victims)
    check_readable(fig)
    assert sorted(int(t.get_text()) for t in texts_with_gid(fig, "victim-number")) == list(range(1, 13))
    assert len(texts_with_gid(fig, "victim-table")) == 13


def test_live_bytes_image_is_the_nonzero_fraction():
    layout = plan((KVGroup(name="g", layers=(custom_cache("a", 4096), custom_cache("b", 4096))),), "overlay")
    data = np.zeros((2, 8192), np.uint8)
    data[0, :4096] = 7
    data[0, 4096 : 4096 + 1024] = 1  # a quarter of the second half
    fig = plot.live_bytes(layout, data, [0, None], blocks=[0, 1], bins=2)
    images = fig.axes[0].get_images()
    assert [im.get_array().tolist() for im in images] == [[[1.0, 0.25]], [[0.0, 0.0]]]
    assert plot.binned_bytes(data, 8192).tolist() == (data != 0).astype(float).tolist()
    mean = plot.binned_bytes(data, 2, stat="mean")
    assert mean.tolist() == [[7 / 255, 0.25 / 255], [0.0, 0.0]]


def test_live_bytes_of_a_real_pool_with_group_names():
    pool_mod = pytest.importorskip("kvviz.pool")
    layout = plan(
        (
            KVGroup(name="a", layers=(custom_cache("x", 4096), custom_cache("y", 8192))),
            KVGroup(name="b", layers=(custom_cache("z", 12288),)),
        ),
        "overlay",
    )
    pool = pool_mod.Pool(layout, 3, device="cpu")
    pool.blocks[1, 4096:12288] = 9  # y of block 1
    fig = plot.live_bytes(
        layout,
        pool.blocks,
        ["b", "a", None],
        victims=[SimpleNamespace(block=1, start=4096, end=12288, layer="y")],
        bins=3,
    )
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["block 0\nb", "block 1\na"]
    assert [im.get_array().tolist() for im in fig.axes[0].get_images()] == [[[0.0, 0.0, 0.0]], [[0.0, 1.0, 1.0]]]
    with pytest.raises(KvvizError, match=r"block_groups\[0\]='c'"):
        plot.live_bytes(layout, pool.blocks, ["c", None, None])


@pytest.mark.parametrize(
    "kwargs,field",
    [
        (dict(block_bytes=np.zeros((2, 10), np.uint8)), "block_bytes"),
        (dict(block_bytes=np.zeros((2, 8192), np.int16)), "block_bytes"),
        (dict(block_groups=[0]), "block_groups"),
        (dict(block_groups=[3, 0]), r"block_groups\[0\]"),
        (dict(victims=[{"block": 5, "start": 0, "end": 1}]), r"victims\[0\].block"),
        (dict(victims=[{"block": 0, "start": 9, "end": 3}]), r"victims\[0\]"),
        (dict(blocks=[7]), "blocks"),
        (dict(bins=0), "bins"),
    ],
)
def test_live_bytes_bad_input_names_the_field(kwargs, field):
    layout = plan((KVGroup(name="g", layers=(custom_cache("a", 8192),)),), "overlay")
    args = dict(block_bytes=np.zeros((2, 8192), np.uint8), block_groups=[0, None]) | kwargs
    with pytest.raises(KvvizError, match=field):
        plot.live_bytes(layout, args.pop("block_bytes"), args.pop("block_groups"), **args)


# ---- the figures draw their data objects (kvviz.views) --------------------------------------
def test_block_map_draws_its_data_object(pro):
    """The PNG map and the live map draw one BlockMapData: every drawn page and padding band is a
    range of it, and both are the layout's. The MXFP4 indexer page by hand: 64 rows x (64 + 4) B =
    4,352 B of rows, page 4,608 B (docs/caches.md#the-caches-a-layer-registers), 256 B padding."""
    data = plot.block_map_data(pro)
    fig = plot.block_map(data)
    assert isinstance(fig, plot.KvvizFigure)
    drawn = [(p.info.layer, p.get_x(), p.get_x() + p.get_width()) for p in plot.find_patches(fig, kind="page")]
    assert (
        drawn
        == [(r.layer, r.offset, r.end) for r in data.ranges]
        == [(p.name, p.offset, p.offset + p.cache.page_bytes) for p in pro.placements]
    )
    pads = [(p.info.layer, p.get_x(), p.get_x() + p.get_width()) for p in plot.find_patches(fig, kind="pad")]
    assert pads == [(r.layer, r.pad_start, r.end) for r in data.ranges if r.padding_bytes]
    idx = data.range("model.layers.2.attn.indexer.k_cache")
    offset = pro.placement(idx.layer).offset
    assert (idx.pad_start, idx.end) == (offset + 64 * (64 + 4), offset + 4608)
    (stride_mark,) = texts_with_gid(fig, "stride-mark")
    assert stride_mark.get_text() == f"stride {data.stride_text}" == f"stride {pro.block_stride:,} B"
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == [lane.label for lane in data.lanes]
    assert plot.block_map_data(pro).to_dict() == data.to_dict()  # what the live map is sent


def test_before_after_draws_its_data_object(layouts):
    """vLLM #48993 on Pro with FlashMLA: 1,473,408 B -> 1,315,008 B a block
    (docs/published-numbers.md#the-published-table): 158,400 B saved, -10.75%."""
    before, after = layouts["deepseek-v4-pro", "flashmla"]
    data = plot.before_after_data(before, after)
    assert (data.scale, data.saved, round(data.pct, 2)) == (1_473_408, 1_473_408 - 1_315_008, -10.75)
    assert data.saved_range == (1_315_008, 1_473_408) and data.has_holes
    fig = plot.before_after(data)
    assert isinstance(fig, plot.KvvizFigure)
    (saved,) = plot.find_patches(fig, kind="saved")
    assert (saved.get_x(), saved.get_x() + saved.get_width()) == data.saved_range
    for panel, _, d in data.panels:
        assert [(r.layer, r.start, r.end) for r in plot.patch_ranges(fig, kind="page", panel=panel)] == [
            (r.layer, r.offset, r.end) for r in d.ranges
        ]
    assert fig._suptitle.get_text().replace("\n", " ") == data.title
    assert "(158,400 B per block saved)" in data.title


def test_page_anatomy_draws_its_data_object(pro):
    """fp8_ds_mla by hand (docs/row-formats.md#fp8_ds_mla): a row is 448 E4M3 NoPE + 64 bf16 RoPE
    = 576 B of payload and 7 UE8M0 scales + 1 pad = 8 B of footer; 64 rows of 584 B in a 37,440 B
    page leave 64 B of padding."""
    cache = pro.placement("model.layers.2.attn").cache
    data = plot.page_anatomy_data(cache)
    assert [(r.name, r.start, r.end) for r in data.regions] == [
        ("payload", 0, 64 * 576),
        ("footer", 64 * 576, 64 * 584),
        ("padding", 64 * 584, 37_440),
    ]
    assert [(f.name, f.start, f.end) for f in data.payload] == [("NoPE", 0, 448), ("RoPE", 448, 448 + 64 * 2)]
    assert [(f.name, f.start, f.end) for f in data.footer] == [("scale", 0, 7), ("pad", 7, 8)]
    assert (data.row_bytes, data.padding_bytes) == (576 + 8, 37_440 - 64 * 584)
    fig = plot.page_anatomy(data)
    assert isinstance(fig, plot.KvvizFigure)
    assert _ranges(fig, "region") == [(p.name, p.start, p.end) for p in data.page]
    assert _ranges(fig, "field") == [(p.name, p.start, p.end) for p in data.payload + data.footer]
    assert {data.title, data.page_line, data.payload_line, data.footer_line} <= set(flat_texts(fig))


def test_live_bytes_draws_its_data_object():
    """Two 4,096 B pages in an 8,192 B block; block 0 holds 4,096 non-zero bytes then 1,024: the two
    bins are 4,096/4,096 and 1,024/4,096 non-zero. A victim from byte 1,000 of block 1 for one
    stride spills into block 2: pieces [1,000, 8,192) and [0, 1,000) (docs/hazards.md#zeroer)."""
    layout = plan((KVGroup(name="g", layers=(custom_cache("a", 4096), custom_cache("b", 4096))),), "overlay")
    pool = np.zeros((3, 8192), np.uint8)
    pool[0, :4096] = 7
    pool[0, 4096 : 4096 + 1024] = 1
    victims = [{"block": 1, "start": 1000, "end": 1000 + 8192, "layer": "spill"}]
    data = plot.live_bytes_data(layout, pool, [0, None, "g"], victims=victims, bins=2)
    assert data.blocks == (0, 1, 2) and data.owners == ("g", None, "g")
    assert data.image.tolist() == [[4096 / 4096, 1024 / 4096], [0.0, 0.0], [0.0, 0.0]]
    assert [(s.block, s.layer, s.start, s.end) for s in data.spans] == [
        (0, "a", 0, 4096),
        (0, "b", 4096, 8192),
        (2, "a", 0, 4096),
        (2, "b", 4096, 8192),
    ]
    assert [(v.number, v.block, v.start, v.end) for v in data.victims] == [(1, 1, 1000, 8192), (2, 2, 0, 1000)]
    fig = plot.live_bytes(data)
    assert isinstance(fig, plot.KvvizFigure)
    assert [im.get_array().tolist() for im in fig.axes[0].get_images()] == [[row] for row in data.image.tolist()]
    assert [(r.block, r.layer, r.start, r.end) for r in plot.patch_ranges(fig, kind="span")] == [
        (s.block, s.layer, s.start, s.end) for s in data.spans
    ]
    assert [(r.block, r.start, r.end) for r in plot.patch_ranges(fig, kind="victim")] == [
        (v.block, v.start, v.end) for v in data.victims
    ]
    assert len(texts_with_gid(fig, "victim-table")) == len(data.table) == 1 + 2
    assert data.title in flat_texts(fig)


# ---- no pyplot, headless ------------------------------------------------------------------
def test_builders_never_import_pyplot():
    code = (
        "import sys; from kvviz import views as plot; from kvviz.families import load_preset\n"
        "from kvviz.options import Options\n"
        "from kvviz.vllm.plan import plan_model\n"
        "m = load_preset('deepseek-v4-flash')\n"
        "b = plan_model(m, 'bucketed', Options(backend='flashmla', indexer_format='fp8')).layout\n"
        "a = plan_model(m, 'overlay', Options(backend='flashmla', indexer_format='mxfp4')).layout\n"
        "plot.to_png_bytes(plot.block_map(a)); plot.to_png_bytes(plot.before_after(b, a))\n"
        "plot.to_png_bytes(plot.page_anatomy(a.placements[0]))\n"
        "assert 'matplotlib.pyplot' not in sys.modules, 'pyplot was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
