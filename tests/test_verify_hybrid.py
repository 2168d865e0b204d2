"""`verify` on every hybrid preset and every planner: real tensors, zero-copy views, no layer
overwrites another (docs/hybrid.md#hybrid-planners). Groups of a `vllm` layout overlay each other
at byte 0, so the check that a block id has one owner is what keeps them apart, as for DeepSeek V4."""

from __future__ import annotations

import pytest

from kvviz.families import load_preset as load_model
from kvviz.families import preset_names
from kvviz.options import Options
from kvviz.pool import Pool
from kvviz.verify import verify
from kvviz.vllm.plan import plan_model


def hybrid_model_names() -> list[str]:
    """Every preset but DeepSeek V4 (tests/test_verify.py covers it)."""
    return [n for n in preset_names() if load_model(n).family != "deepseek_v4"]


# Each model with every planner its family has (attention, MLA and state families: vllm, packed, separate).
CASES = [(m, p) for m in hybrid_model_names() for p in load_model(m).reader.planners]


def _layouts(model: str, planner: str, **knobs):
    """The plan's pools: one for a shared pool, one per cache kind for 'separate'."""
    return plan_model(load_model(model), planner, Options(**knobs)).pools


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
