"""Blocks, budget rounding (docs/published-numbers.md#budget-rounding), vLLM's admission estimate
(docs/published-numbers.md#admission-estimate) and request counts."""

import pytest

from kvviz.base.errors import KvvizError
from kvviz.core import capacity
from kvviz.core.spec import Scheduling
from kvviz.families import load_preset
from kvviz.options import Options
from kvviz.vllm.plan import plan_model

PRO = load_preset("deepseek-v4-pro")


def compare_layouts(model, backend):
    """vLLM #48993's before/after for one backend: bucketed + FP8 indexer vs overlay + MXFP4."""
    return (
        plan_model(model, "bucketed", Options(backend=backend, indexer_format="fp8")).layout,
        plan_model(model, "overlay", Options(backend=backend, indexer_format="mxfp4")).layout,
    )


# docs/published-numbers.md#the-published-table: (backend, budget GiB, blocks before, blocks after).
PUBLISHED = [("flashinfer", 26.46, 21_709, 23_120), ("flashmla", 26.09, 19_015, 21_306)]


@pytest.mark.parametrize("backend,gib,before,after", PUBLISHED)
def test_published_block_counts_within_budget_rounding(backend, gib, before, after):
    b, a = compare_layouts(PRO, backend)
    budget = capacity.budget_bytes(gib=gib)
    # floor(budget / stride) is off by a few blocks because the published budget was rounded
    # to 0.01 GiB ...
    assert abs(capacity.num_blocks(b, budget) - before) <= 4
    assert abs(capacity.num_blocks(a, budget) - after) <= 4
    # ... and there is a budget, within that rounding, that gives both published counts.
    common = capacity.common_budget_range([(b.block_stride, before), (a.block_stride, after)])
    assert common is not None
    lo, hi = common
    assert abs(lo / 2**30 - gib) < 0.005 + 1e-9
    for budget in (lo, hi):
        assert capacity.num_blocks(b, budget) == before and capacity.num_blocks(a, budget) == after


def test_common_budget_is_about_the_reference_value():
    b, a = compare_layouts(PRO, "flashmla")
    lo, hi = capacity.common_budget_range([(b.block_stride, 19_015), (a.block_stride, 21_306)])
    assert lo <= 28_018_000_000 <= hi
    b, a = compare_layouts(PRO, "flashinfer")
    lo, hi = capacity.common_budget_range([(b.block_stride, 21_709), (a.block_stride, 23_120)])
    assert lo <= 28_410_000_000 <= hi


def test_budget_range_is_exactly_the_floor_preimage():
    lo, hi = capacity.budget_range(1000, 7)
    assert (lo // 1000, hi // 1000, (lo - 1) // 1000, (hi + 1) // 1000) == (7, 7, 6, 8)


@pytest.mark.parametrize(
    "backend,estimate,real", [("flashinfer", 1_190_400, 1_228_800), ("flashmla", 1_357_056, 1_315_008)]
)
def test_admission_estimate_vs_real_stride(backend, estimate, real):
    _, after = compare_layouts(PRO, backend)
    assert capacity.admission_estimate_per_block(after) == estimate
    assert after.block_stride == real


# docs/published-numbers.md#the-published-table: stride and block-count changes, in percent.
PUBLISHED_PCT = {"flashinfer": (-6.10, 6.50), "flashmla": (-10.75, 12.05)}


@pytest.mark.parametrize("backend,gib,before,after", PUBLISHED)
def test_comparison_reproduces_the_published_percentages(backend, gib, before, after):
    b, a = compare_layouts(PRO, backend)
    # At a budget that gives both published block counts, kvviz's Comparison counts the blocks
    # itself (floor(budget / stride)) and must land on the published percentages.
    lo, hi = capacity.common_budget_range([(b.block_stride, before), (a.block_stride, after)])
    for budget in (lo, hi):
        comparison = capacity.Comparison(b, a, budget)
        assert (comparison.blocks_before, comparison.blocks_after) == (before, after)
        stride_pct, blocks_pct = PUBLISHED_PCT[backend]
        assert round(comparison.stride_change_pct, 2) == stride_pct
        assert round(comparison.blocks_change_pct, 2) == blocks_pct
        assert comparison.to_json()["blocks_change_pct"] == blocks_pct


def test_layout_and_capacity_count_blocks_alike():
    """Layout.num_blocks is the floor; capacity.num_blocks asks it (one rule, one home)."""
    _, a = compare_layouts(PRO, "flashmla")
    stride = a.block_stride
    for budget in (1, stride - 1, stride, 2 * stride + 5, capacity.budget_bytes(gib=26.09)):
        assert (
            a.num_blocks(budget)
            == capacity.num_blocks(a, budget)
            == sum(1 for k in range(1, budget // stride + 2) if k * stride <= budget)
        )
    for bad in (0, -stride, 1.5, "1"):
        with pytest.raises(KvvizError, match="budget_bytes"):
            a.num_blocks(bad)


def test_request_blocks_and_concurrency():
    _, a = compare_layouts(PRO, "flashmla")
    tokens = 100_000
    # vLLM 0.33: in-flight tokens = max_concurrent_batches (2 with async scheduling) x
    # max_num_batched_tokens (8192).
    in_flight = 2 * 8192
    s = Scheduling(max_model_len=tokens, max_in_flight_tokens=in_flight)
    per_group = dict(zip((g.name for g in a.groups), capacity.group_blocks_for_request(a, s)))
    assert per_group["full"] == -(-tokens // 256)
    # SWA: window 128 with 64-token blocks keeps cdiv(127 + in-flight, 64) + 1 blocks.
    assert per_group["swa-a"] == -(-(127 + in_flight) // 64) + 1
    # c4 states: 4-token blocks, window 8.
    assert per_group["c4-state"] == -(-(7 + in_flight) // 4) + 1
    budget = capacity.budget_bytes(gib=26.09)
    conc = capacity.max_concurrency(a, budget, s)
    assert conc == pytest.approx(capacity.num_blocks(a, budget) / sum(per_group.values()))
    # A short request keeps fewer blocks than the window allows.
    assert capacity.group_blocks_for_request(a, Scheduling(max_model_len=10, max_in_flight_tokens=in_flight))[0] == 1


@pytest.mark.parametrize(
    "kwargs,field",
    [
        (dict(gib=0), "budget_gib"),
        (dict(gib=-1.0), "budget_gib"),
        (dict(num_bytes=0), "budget_bytes"),
        (dict(num_bytes=-5), "budget_bytes"),
        (dict(gib=float("nan")), "budget_gib"),
    ],
)
def test_bad_budgets(kwargs, field):
    with pytest.raises(KvvizError, match=field):
        capacity.budget_bytes(**kwargs)


def test_the_published_table_here_is_the_one_kvviz_prints():
    # kvviz.base.published is what `kvviz compare` prints under its table; it must say what was published
    from kvviz.base.published import PUBLISHED_TABLE

    assert sorted((r.backend, r.budget_gib, r.blocks_before, r.blocks_after) for r in PUBLISHED_TABLE) == sorted(
        PUBLISHED
    )
