"""`verify` on every hybrid preset and every planner: real tensors, zero-copy views, no layer
overwrites another (docs/hybrid.md#hybrid-planners). Groups of a `vllm` layout overlay each other
at byte 0, so the check that a block id has one owner is what keeps them apart, as for DeepSeek V4."""

from __future__ import annotations

import pytest

from kvviz.config import hybrid_model_names, load_model
from kvviz.hybrid import HYBRID_PLANNERS, HybridOptions, SeparatePools, plan_hybrid
from kvviz.pool import Pool
from kvviz.verify import verify

CASES = [(m, p) for m in hybrid_model_names() for p in HYBRID_PLANNERS]


def _layouts(model: str, planner: str, **knobs):
    planned = plan_hybrid(load_model(model), HybridOptions(**knobs), planner)
    return planned.pools if isinstance(planned, SeparatePools) else (planned,)


@pytest.mark.parametrize("model,planner", CASES)
def test_every_preset_and_planner_verifies_clean(model, planner):
    for layout in _layouts(model, planner):
        n = len(layout.groups) + 1  # every group gets a block of its own, one group two
        report = verify(layout, n, device="cpu", seed=1)
        assert report.clean and report.within_bounds, report.text()
        assert report.layers == layout.num_layers
        # each block is written through the pages of the one group that owns it: the bytes written
        # are each owned block's group total (from the layout, block by block)
        owners = report.owner_ids.tolist()
        assert report.bytes_written == sum(layout.group_total(g) for g in owners)


@pytest.mark.parametrize("model", hybrid_model_names())
def test_hybrid_views_are_zero_copy(model):
    layout = _layouts(model, "vllm")[0]
    pool = Pool(layout, 2, device="cpu")
    base = pool.data_ptr
    for p in layout.placements:
        view = pool.page_view(p.name)
        for block in range(2):
            # the layer's page of block b sits at base + b * bytes per block + its offset
            assert view[block].data_ptr() == base + block * layout.block_stride + p.offset


def test_fp8_kv_rows_and_fp32_states_verify_clean():
    for model, knobs in (("gpt-oss-120b", {"kv_dtype": "fp8"}), ("qwen3-next-80b-a3b", {"mamba_ssm_dtype": "float32"})):
        for layout in _layouts(model, "vllm", **knobs):
            report = verify(layout, len(layout.groups), device="cpu")
            assert report.clean and report.within_bounds, report.text()


@pytest.mark.parametrize("hazard", ["shared-block", "zeroer", "misread"])
def test_hazards_show_on_a_hybrid_pool(hazard):
    layout = _layouts("gemma-3-27b", "vllm")[0]
    report = verify(layout, 8, device="cpu", hazard=hazard)
    assert report.ok, report.text()  # ok = the hazard's damage showed
    if hazard != "misread":
        assert report.corrupted
