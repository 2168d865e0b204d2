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


def test_a_wide_state_row_is_sampled_as_the_first_values_of_each_part():
    """Nemotron-H's Mamba2 state row (1,347,584 values: conv state in bf16, SSM state in fp32) is
    sampled as the first values of each part, a bounded sample. vLLM 0.33's MambaSpec stores
    the parts as plain elements (the conv part first, the SSM part after it), so the pool's bytes
    read as bf16 and fp32 at the start of each part must be the seeded source, cast by torch; a
    byte changed inside the sampled SSM values shows as a corruption and as a decode error."""
    import torch

    from kvviz.verify.samples import SAMPLE_KIND_VALUES
    from kvviz.verify.source import sample_source

    layout = _layouts("nemotron-nano-9b-v2", "vllm")[0]
    p = next(p for p in layout.placements if p.cache.row_format.name == "mamba2_state")
    report = verify(layout, len(layout.groups), device="cpu", keep_pool=True)
    assert report.clean and report.within_bounds, report.text()
    state = next(f for f in report.formats if f.format == "mamba2_state")
    assert 0 < state.values <= SAMPLE_KIND_VALUES < p.cache.row_format.dims
    (e1, c1), (e2, c2) = ((f.element.label, f.count) for f in p.cache.row_format.payload + p.cache.row_format.footer)
    assert (e1, e2) == ("bf16", "fp32") and c1 + c2 == p.cache.row_format.dims
    block = int((report.owner_ids == p.group).nonzero()[0])  # the group's first block holds the sample
    pool = report.pool
    conv = pool.payload_view(p.name)[block, 0].view(torch.bfloat16)
    ssm = pool.footer_view(p.name)[block, 0].view(torch.float32)
    # one generator gives the sampled row's values whatever the split; the conv values sampled
    # are followed by the pattern, so the split is where the bytes stop being the source's
    v = state.values
    x = sample_source("mamba2_state", layout.placements.index(p), block, 1, v, 0, torch.device("cpu"))[0]
    n = min(v, c1)
    same = conv[:n] == x[:n].to(torch.bfloat16)
    k = int(same.logical_not().nonzero()[0]) if not bool(same.all()) else n
    assert 0 < k < v and torch.equal(ssm[: v - k], x[k:])

    bad = verify(
        layout,
        len(layout.groups),
        device="cpu",
        corrupt=lambda pool: pool.footer_view(p.name)[block, 0, 4 * 10 + 3].bitwise_xor_(0x40),
    )
    assert [c.layer for c in bad.corrupted] == [p.name]
    assert next(f for f in bad.formats if f.format == "mamba2_state").max_error_over_bound > 1
