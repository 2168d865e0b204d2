"""What the explorer should show for a set of knobs, computed here with `kvviz.plan` and `Plan.capacity` (the public
door a notebook uses), never with the explorer's own helpers; and the numbers read back from its labels' text.

The knob -> argument table below is this test's own reading of the explorer's documented knobs (docs/explorer:
'auto' is the engine's choice, i.e. the option left out; 0 GiB of CPU offload and 1 pipeline stage are off; the
"context" knob is vLLM's max_model_len; the "gpu" knob "budget" means the budget_gib field, any other the KV budget
vLLM profiles on that GPU at the knobs' memory utilization and TP).
"""

from __future__ import annotations

import re

import kvviz

# explorer knob -> kvviz.plan keyword (the Options field)
PLAN_ARGS = {
    "head_dim": "head_dim",
    "rope_dim": "rope_dim",
    "index_head_dim": "index_head_dim",
    "main_format": "main_format",
    "indexer_format": "indexer_format",
    "backend": "backend",
    "mtp": "mtp",
    "kv_dtype": "kv_dtype",
    "block_size": "block_size",
    "sliding_window": "sliding_window",
    "mamba_ssm_dtype": "mamba_ssm_dtype",
    "prefix_caching": "prefix_caching",
    "tensor_parallel_size": "tensor_parallel_size",
    "decode_context_parallel_size": "decode_context_parallel_size",
    "pipeline_parallel_size": "pipeline_parallel_size",
    "kv_offloading_size": "kv_offloading_size",
    "context": "max_model_len",
}
OFF = {"kv_offloading_size": 0, "pipeline_parallel_size": 1}  # the value that means "not used"
NOT_PLANNED = ("model", "planner", "budget_gib", "gpu", "gpu_memory_utilization", "data_parallel_size")
LAYER_MIX = ("c4", "c128", "swa", "full_layers")  # model edits: the walks leave them at the model's own


def expected_numbers(knobs: dict) -> dict:
    """{stride, tokens, blocks, fits} of `kvviz.plan` of the knobs at their budget; raises KvvizError where kvviz
    refuses them."""
    args = {}
    for name, value in knobs.items():
        if name in NOT_PLANNED or name in LAYER_MIX or value == "auto" or OFF.get(name) == value:
            continue
        args[PLAN_ARGS[name]] = value
    plan = kvviz.plan(knobs["model"], knobs["planner"], **args)
    if knobs.get("gpu", "budget") == "budget":
        cap = plan.capacity(budget_gib=knobs["budget_gib"])
    else:
        cap = plan.capacity(gpu=knobs["gpu"], gpu_memory_utilization=knobs["gpu_memory_utilization"])
    return {
        "stride": plan.block_stride,
        "tokens": plan.tokens_per_block,
        "blocks": cap.num_blocks,
        "fits": cap.requests_fit,
    }


def shown_numbers(stride: str, blocks: str, fits: str) -> dict:
    """The same four numbers parsed from the stride, blocks and requests-fit labels' text."""
    m = re.match(r"block stride ([\d,]+) B(?:, (\d+) tokens per block)?", stride.strip())
    b = re.match(r"([\d,]+) blocks? at ", blocks.strip())
    f = re.match(r"([\d,]+) whole requests? of ", fits.strip())
    assert m and b and f, (stride, blocks, fits)
    return {
        "stride": int(m[1].replace(",", "")),
        "tokens": None if m[2] is None else int(m[2]),
        "blocks": int(b[1].replace(",", "")),
        "fits": int(f[1].replace(",", "")),
    }
