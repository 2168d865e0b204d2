"""Planners (docs/planners.md#overlay) against the published numbers
(docs/published-numbers.md#the-published-table) and vLLM 0.33's own output."""

import json
from pathlib import Path

import pytest

from kvviz.core import capacity
from kvviz.families import load_preset
from kvviz.options import Options
from kvviz.vllm.plan import plan_model as _plan_model

PRO = load_preset("deepseek-v4-pro")


def plan_model(model, options, planner):
    """The one pool of `model` laid out by `planner` with `options`."""
    return _plan_model(model, planner, options).layout


def compare_layouts(model, backend):
    """vLLM #48993's before/after for one backend: bucketed + FP8 indexer vs overlay + MXFP4."""
    return (
        plan_model(model, Options(backend=backend, indexer_format="fp8"), "bucketed"),
        plan_model(model, Options(backend=backend, indexer_format="mxfp4"), "overlay"),
    )


VLLM = json.loads((Path(__file__).parent / "data" / "vllm-0.33-deepseek-v4-pro.json").read_text())
CASES = {(c["backend"], c["indexer"]): c for c in VLLM["cases"]}


@pytest.mark.parametrize(
    "backend,before,after",
    [
        ("flashmla", 1_473_408, 1_315_008),
        ("flashinfer", 1_308_672, 1_228_800),
    ],
)
def test_published_strides(backend, before, after):
    b, a = compare_layouts(PRO, backend)
    assert (b.block_stride, a.block_stride) == (before, after)


def test_stride_derivations_by_hand():
    """docs/published-numbers.md#the-published-table's sums, written out from the page table."""
    b, a = compare_layouts(PRO, "flashmla")
    assert b.block_stride == 31 * 37_440 + 30 * 8_640 + 31 * 1_728
    assert a.block_stride == 30 * 37_440 + 30 * 4_608 + 31 * 1_728
    assert a.groups[a.binding_group].name == "full"
    b, a = compare_layouts(PRO, "flashinfer")
    assert b.block_stride == 31 * 32_768 + 30 * 8_704 + 31 * 1_024
    assert a.block_stride == 30 * (32_768 + 8_192)
    assert a.groups[a.binding_group].name == "c4-state"
    full = next(i for i, g in enumerate(a.groups) if g.name == "full")
    assert a.group_total(full) == 1_153_024


@pytest.mark.parametrize("key", sorted(CASES))
def test_overlay_by_spec_matches_vllm_033_layer_by_layer(key):
    case = CASES[key]
    backend, indexer = key
    layout = plan_model(PRO, Options(backend=backend, indexer_format=indexer), "vllm")
    assert layout.block_stride == case["bytes_per_block"]
    assert [(len(g.layers), layout.group_total(i)) for i, g in enumerate(layout.groups)] == [
        (g["num_layers"], g["bytes"]) for g in case["groups"]
    ]
    # Every tensor: same offset, same layer stride, same layers in the same order.
    ours = [(t.offset, t.layer_stride, list(t.layers)) for t in layout.tensors]
    theirs = [(t["offset"], t["layer_stride"], t["layers"]) for t in case["tensors"]]
    assert ours == theirs
    # And so every layer's offset: tensor offset + position x layer stride.
    expected = {
        name: t["offset"] + k * t["layer_stride"] for t in case["tensors"] for k, name in enumerate(t["layers"])
    }
    assert {p.name: p.offset for p in layout.placements} == expected
    for budget in case["budgets"].values():
        assert capacity.num_blocks(layout, budget["available_bytes"]) == budget["num_blocks"]


@pytest.mark.parametrize("key", sorted(CASES))
def test_overlay_matches_vllm_033_strides(key):
    backend, indexer = key
    layout = plan_model(PRO, Options(backend=backend, indexer_format=indexer), "overlay")
    assert layout.block_stride == CASES[key]["bytes_per_block"]


def test_budget_in_gib_matches_vllm_truncation():
    for case in VLLM["cases"]:
        for label, budget in case["budgets"].items():
            assert capacity.budget_bytes(gib=float(label.removesuffix("GiB"))) == budget["available_bytes"]


def test_overlay_tensors_one_per_distinct_offset():
    layout = plan_model(PRO, Options(), "overlay")
    offsets = [t.offset for t in layout.tensors]
    assert offsets == sorted(set(offsets))
    at_zero = layout.tensors[0].layers
    # Layers at offset 0: the first layer of every group, in group order.
    assert at_zero == tuple(g.layers[0].name for g in layout.groups)


def test_bucketed_slots_shared_across_groups():
    b, _ = compare_layouts(PRO, "flashmla")
    # The first 37,440-B slot holds the first c4 main KV, the first SWA page of each SWA group
    # and the first padded c128 state: one shared tensor.
    first_big = next(t for t in b.tensors if b.placement(t.layers[0]).page_bytes == 37_440)
    groups = {b.groups[b.placement(n).group].name for n in first_big.layers}
    assert {"full", "swa-a", "swa-b", "c128-state", "c4-state"} == groups


def test_text_map_and_dataframe():
    layout = plan_model(PRO, Options(), "overlay")
    lines = layout.text_map(width=40).splitlines()
    # One lane per group: name, 40 cells, the group's total. Totals from the page table by hand
    # (docs/published-numbers.md#the-published-table); a lane's pages are dense from byte 0, so its
    # last ceil(total x 40 / stride) cells are glyphs and the rest '.'.
    stride = 30 * 37_440 + 30 * 4_608 + 31 * 1_728
    totals = {
        "full": stride,
        "swa-a": 31 * 37_440,
        "swa-b": 31 * 37_440,
        "c128-state": 31 * 32_832,
        "c4-state": 30 * (32_832 + 8_640),
    }
    assert len(lines) == len(totals) + 2
    # layers per group (docs/grouping.md#vllm-grouping, MTP counted)
    layers = {"full": 91, "swa-a": 31, "swa-b": 31, "c128-state": 31, "c4-state": 60}
    for line, (name, total) in zip(lines, totals.items()):
        label, cells, printed = line.split("|")
        assert label.strip() == name
        assert printed == f" {layers[name]:>4} layers {total:>14,} B"
        used = -(-total * 40 // stride)
        assert cells == cells[:used] + "." * (40 - used) and "." not in cells[:used]
    assert [line.split("|")[1].count(".") for line in lines[:5]] == [0, 4, 4, 9, 2]
    # the stride line names the tokens per block: DeepSeek V4's block of 256 tokens (defaults.BLOCK_SIZE)
    assert lines[-2].strip() == "block stride 1,315,008 B, 256 tokens (overlay)"
    legend = lines[-1].split("  ")
    assert legend[-1] == ".=unused"
    assert set(legend[:-1]) - {""} == {
        "a=main KV c128",
        "B=indexer K",
        "A=main KV c4",
        "C=sliding-window KV",
        "d=compressor state c128",
        "E=indexer state",
        "D=compressor state c4",
    }
    df = layout.to_dataframe()
    assert len(df) == layout.num_layers == 91 + 62 + 31 + 60
    assert (df["end"] - df["offset"] == df["page_bytes"]).all()


def test_unused_ranges_cover_exactly_the_unused_bytes():
    for layout in compare_layouts(PRO, "flashmla"):
        for gi in range(len(layout.groups)):
            ranges = layout.unused_ranges(gi)
            assert sum(hi - lo for lo, hi in ranges) == layout.group_unused(gi)
            pages = [(p.offset, p.end) for p in layout.group_placements(gi)]
            assert not any(lo < pe and ps < hi for lo, hi in ranges for ps, pe in pages)
