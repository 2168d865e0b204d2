"""kvviz.views.blockmap_data: the data both block maps draw, checked against the layout by a second method
(a byte mask per group), hand-worked page anatomies (docs/row-formats.md#page-anatomy) and exact
byte formatting."""

import json
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvviz.base import regions
from kvviz.base.errors import KvvizError
from kvviz.core.kinds import CacheKind
from kvviz.families import load_preset
from kvviz.options import Options
from kvviz.views import BlockMapData, block_map_data, byte_ticks, format_bytes
from kvviz.vllm.plan import plan_model as _plan_model

PRO = load_preset("deepseek-v4-pro")
# DeepSeek V4's shared-pool planners ('vllm' = the old overlay-by-spec); 'separate' has no single block.
PLANNERS = ("bucketed", "overlay", "vllm")
MXFP4 = Options(backend="flashmla", indexer_format="mxfp4")


def plan_model(model, options, planner):
    return _plan_model(model, planner, options).layout


@pytest.fixture(scope="module", params=sorted(PLANNERS))
def layout(request):
    return plan_model(PRO, MXFP4, request.param)


def unused_by_mask(layout, group):
    free = np.ones(layout.block_stride, dtype=bool)
    for p in layout.group_placements(group):
        free[p.offset : p.end] = False
    edges = np.flatnonzero(np.diff(np.concatenate([[False], free, [False]])))
    return [(int(a), int(b)) for a, b in zip(edges[0::2], edges[1::2])]


def test_module_stays_light():
    code = (
        "import sys, kvviz.views.blockmap_data\n"
        "bad = [m for m in ('matplotlib', 'torch', 'ipywidgets', 'pandas') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_ranges_and_lanes_are_the_layout(layout):
    data = block_map_data(layout)
    assert isinstance(data, BlockMapData) and data.stride == layout.block_stride and data.planner == layout.planner
    names = [g.name for g in layout.groups]
    assert [(r.layer, r.group, r.offset, r.end, r.page_bytes) for r in data.ranges] == [
        (p.name, names[p.group], p.offset, p.offset + p.cache.page_bytes, p.cache.page_bytes) for p in layout.placements
    ]
    for i, lane in enumerate(data.lanes):
        assert lane.name == names[i]
        assert lane.total == sum(p.cache.page_bytes for p in layout.group_placements(i))
        assert list(lane.unused) == unused_by_mask(layout, i)
        assert lane.binds == (lane.total == layout.block_stride)
    binding = [lane.name for lane in data.lanes if lane.binds]
    assert data.binding_group == (binding[0] if binding else None)


def test_overlay_binding_group_and_caption():
    layout = plan_model(PRO, MXFP4, "overlay")
    data = block_map_data(layout)
    assert data.binding_group == "full" and data.stride == 1_315_008  # docs/published-numbers.md
    assert data.caption == "block map of the overlay layout, block stride 1,315,008 B"
    assert data.overlay_note == "every lane = bytes [0, 1,315,008) of the same block"


def test_page_anatomy_of_the_mxfp4_indexer_page():
    """64 rows of 64 B E2M1 payload + 4 B UE8M0 footer = 4,352 B, padded to 4,608 B (8 x 576)."""
    layout = plan_model(PRO, MXFP4, "overlay")
    r = block_map_data(layout).range("model.layers.2.attn.indexer.k_cache")
    assert r.kind is CacheKind.INDEXER_K
    assert (r.rows, r.payload_bytes, r.footer_bytes, r.content_bytes, r.page_bytes, r.padding_bytes) == (
        64,
        64,
        4,
        4_352,
        4_608,
        256,
    )
    assert [(g.name, g.start, g.end) for g in r.regions] == [
        ("payload", 0, 4_096),
        ("footer", 4_096, 4_352),
        ("padding", 4_352, 4_608),
    ]
    assert r.tooltip().splitlines() == [
        "model.layers.2.attn.indexer.k_cache",
        "group full · indexer K",
        f"offset {r.offset:,} B · page 4,608 B (4.5 KiB) · end {r.offset + 4_608:,} B",
    ]


def test_to_dict_is_json_and_shares_anatomies(layout):
    data = block_map_data(layout)
    d = json.loads(json.dumps(data.to_dict()))
    assert d["stride"] == layout.block_stride
    assert [(r["layer"], r["offset"], r["end"]) for r in d["ranges"]] == [
        (r.layer, r.offset, r.end) for r in data.ranges
    ]
    for r, rd in zip(data.ranges, d["ranges"]):
        a = d["anatomies"][rd["anatomy"]]
        assert [(g["name"], g["start"], g["size"]) for g in a["regions"]] == [
            (g.name, g.start, g.size) for g in r.regions
        ]
        assert (a["rows"], a["row_bytes"], a["padding_bytes"]) == (r.rows, r.row_bytes, r.padding_bytes)
    assert len(d["anatomies"]) < len(d["ranges"])
    assert [lane["binds"] for lane in d["lanes"]] == [lane.binds for lane in data.lanes]
    assert {k["label"] for k in d["kinds"]} == {p.cache.kind.label for p in layout.placements}


@pytest.mark.parametrize(
    "n,text",
    [
        (0, "0 B"),
        (1_023, "1,023 B"),
        (1_024, "1 KiB"),
        (2_560, "2.5 KiB"),
        (1_728, "1,728 B"),
        (1_536, "1.5 KiB"),
        (4_608, "4.5 KiB"),
        (8_640, "8,640 B"),
        (1_310_720, "1.25 MiB"),
        (1_315_008, "1,315,008 B"),
        (786_432, "768 KiB"),
        (3 * 2**30, "3 GiB"),
    ],
)
def test_format_bytes_is_exact(n, text):
    assert format_bytes(n) == text


@given(st.integers(0, 2**40))
def test_format_bytes_reads_back_to_the_same_count(n):
    value, unit = re.fullmatch(r"([\d,.]+) (B|KiB|MiB|GiB)", format_bytes(n)).groups()
    scale = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[unit]
    whole, _, frac = value.replace(",", "").partition(".")
    assert (int(whole) * 10 ** len(frac) + int(frac or 0)) * scale == n * 10 ** len(frac)


@given(st.integers(1, 2**32))
def test_byte_ticks_are_few_exact_and_inside_the_stride(stride):
    ticks = byte_ticks(stride)
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1
    assert ticks[0] == 0 and ticks[-1] <= stride < ticks[-1] + step
    assert step & (step - 1) == 0 and len(ticks) - 1 <= 8
    assert all(not format_bytes(t).endswith(" B") or t < 1024 for t in ticks)


def test_bad_input_names_the_field():
    with pytest.raises(KvvizError, match="layout"):
        block_map_data("deepseek-v4-pro")
    with pytest.raises(KvvizError, match="n=-1"):
        format_bytes(-1)


# ---- the data objects of kvviz.views -------------------------------------------------------
DATA_MODULES = (
    "kvviz.views",
    "kvviz.views.style",
    "kvviz.views.blockmap_data",
    "kvviz.views.compare_data",
    "kvviz.views.planes_data",
    "kvviz.views.live_data",
    "kvviz.views.anatomy_data",
)


def test_the_data_modules_stay_light():
    """Every figure's data object is built without matplotlib (and torch, ipywidgets, pandas)."""
    code = (
        f"import sys\nfor m in {DATA_MODULES!r}: __import__(m)\n"
        "bad = [m for m in ('matplotlib', 'torch', 'ipywidgets', 'pandas') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_one_region_class():
    """A map range's regions are the page anatomy's own `kvviz.base.regions.Region`s (no second class)."""

    layout = plan_model(PRO, MXFP4, "overlay")
    assert all(type(g) is regions.Region for r in block_map_data(layout).ranges for g in r.regions)


def test_the_data_objects_are_frozen():
    import dataclasses

    data = block_map_data(plan_model(PRO, MXFP4, "overlay"))
    for obj in (data, data.lanes[0], data.ranges[0]):
        with pytest.raises(dataclasses.FrozenInstanceError):
            obj.caption = "x" if obj is data else None


def test_separate_pools_data_is_one_lane_per_pool(qwen):
    """Qwen3-Next in separate pools (as SGLang keeps them): one lane per pool, each its pool's own
    block; the width is the largest pool's block; no lane binds; each lane ends at its pool's block.
    Each lane's total is the sum of its pool's pages, read off the pool's layout."""
    from kvviz.views import separate_pools_data

    plan = _plan_model(qwen, "separate", Options())
    assert len(plan.pools) > 1
    data = separate_pools_data(plan, caption="c")
    assert data.separate and data.binding_group is None and not any(lane.binds for lane in data.lanes)
    assert data.stride == max(p.block_stride for p in plan.pools)
    for i, (lane, pool) in enumerate(zip(data.lanes, plan.pools)):
        assert (lane.index, lane.name, lane.block_end) == (i, pool.groups[0].name, pool.block_stride)
        assert lane.total == sum(p.cache.page_bytes for p in pool.placements)
        assert [(r.layer, r.offset, r.end) for r in data.lane_ranges(i)] == [
            (p.name, p.offset, p.offset + p.cache.page_bytes) for p in pool.placements
        ]
    d = data.to_dict()
    assert [lane["block_end"] for lane in d["lanes"]] == [p.block_stride for p in plan.pools]
    assert d["stride_text"] == f"{data.stride:,} B (largest pool's block)"
    assert "block_end" not in block_map_data(plan.pools[0]).to_dict()["lanes"][0]  # a shared pool's lane
