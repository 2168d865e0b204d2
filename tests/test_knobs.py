"""kvviz.explorer.knobs without widgets: defaults, validation, planning and the sweep tables.

Expected numbers come from kvviz.vllm.plan.plan_model and kvviz.core.capacity called here with the
same knobs, by hand from vLLM 0.33's rules, or from docs/published-numbers.md#the-published-table.
"""

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvviz.base.defaults import GIB
from kvviz.base.errors import KvvizError
from kvviz.core.capacity import group_blocks_for_request, max_concurrency
from kvviz.core.spec import Scheduling
from kvviz.explorer.knobs import KNOBS, default_knobs, knobs_for
from kvviz.explorer.sweeps import (
    baseline_planner,
    budget_bytes,
    capacities,
    compare_knobs,
    describe_knobs,
    layout_key,
    options_for,
    plan_knobs,
    sweep,
)
from kvviz.families import load_preset, preset_raw
from kvviz.families.decoder import full_layer_positions
from kvviz.options import Options
from kvviz.vllm.plan import plan_model

PRO = load_preset("deepseek-v4-pro")
DEEPSEEK_KNOBS = (
    "model",
    "head_dim",
    "rope_dim",
    "index_head_dim",
    "main_format",
    "indexer_format",
    "backend",
    "mtp",
    "c4",
    "c128",
    "swa",
    "block_size",
    "tensor_parallel_size",
    "decode_context_parallel_size",
    "pipeline_parallel_size",
    "kv_offloading_size",
    "data_parallel_size",
    "planner",
    "context",
    "budget_gib",
    "gpu",
    "gpu_memory_utilization",
)
# vLLM serve's defaults: max_num_batched_tokens 8192, async scheduling on (two batches in flight).
IN_FLIGHT = 2 * 8192


def expected(model=PRO, *, planner="vllm", **options):
    """DeepSeek V4's layout for the knobs (the explorer's defaults unless given); 'vllm' is the
    default planner (old 'overlay-by-spec', the same stride as #48993's overlay)."""
    opts = dict(backend="flashmla", main_format="fp8_ds_mla", indexer_format="mxfp4", block_size=256, mtp=True)
    opts.update(options)
    return plan_model(model, planner, Options(**opts)).layout


def test_module_is_usable_without_widgets_or_plotting():
    code = (
        "import sys; import kvviz.explorer.knobs as k, kvviz.explorer.sweeps as s; s.plan_knobs(k.default_knobs())\n"
        "bad = [m for m in ('ipywidgets', 'matplotlib', 'torch', 'anywidget') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_default_knobs_and_changes():
    knobs = default_knobs()
    assert tuple(knobs) == DEEPSEEK_KNOBS
    assert (knobs["head_dim"], knobs["c4"], knobs["c128"], knobs["swa"]) == (512, 30, 31, 0)
    assert default_knobs(backend="flashinfer")["main_format"] == "fp8"  # the backend's own format
    assert default_knobs(backend="flashinfer", main_format="bf16")["main_format"] == "bf16"
    assert default_knobs("deepseek-v4-flash")["swa"] == 2
    with pytest.raises(KvvizError, match="head_size"):
        default_knobs(head_size=1)


def test_plan_is_the_chosen_planner_and_the_bucketed_baseline():
    knobs = default_knobs(head_dim=576)
    assert plan_knobs(knobs).block_stride == expected(head_dim=576).block_stride
    assert baseline_planner(knobs) == "bucketed"
    assert (
        plan_knobs(knobs, baseline_planner(knobs)).block_stride
        == expected(head_dim=576, planner="bucketed").block_stride
    )
    bucketed = default_knobs(planner="bucketed")
    assert plan_knobs(bucketed) is plan_knobs(bucketed, baseline_planner(bucketed))


def test_layout_key_ignores_only_the_budget():
    assert layout_key(default_knobs(budget_gib=1.0)) == layout_key(default_knobs(budget_gib=2.0))
    assert layout_key(default_knobs(head_dim=576)) != layout_key(default_knobs())


@pytest.mark.parametrize("gib", [0, 0.0, -0.5, float("nan")])
def test_a_budget_of_zero_or_less_is_an_error(gib):
    with pytest.raises(KvvizError, match=r"^budget_gib=.*: must be a positive number$"):
        budget_bytes(default_knobs(budget_gib=gib))


def test_budget_is_truncated_like_vllm():
    assert budget_bytes(default_knobs(budget_gib=26.09)) == int(26.09 * GIB)


def test_describe_knobs_names_every_layout_knob():
    text = describe_knobs(default_knobs(head_dim=576, block_size=512, mtp=False, planner="bucketed"))
    for part in (
        "deepseek-v4-pro",
        "head_dim 576",
        "rope dims 64",
        "index_head_dim 128",
        "main KV fp8_ds_mla",
        "indexer K mxfp4",
        "alignment flashmla",
        "block size 512",
        "MTP layer False",
        "c4 layers 30",
        "c128 layers 31",
        "SWA-only layers 0",
        "planner bucketed",
    ):
        assert part in text
    assert "\n" not in text


def test_each_model_family_has_its_own_knobs():
    """DeepSeek V4: its dims, formats, layer mix and planners; attention decoders: theirs, the
    window only with sliding layers; the Mamba state dtype and prefix caching only with
    linear-attention (gated delta net) layers; every model: planner, max_model_len, budget."""
    assert knobs_for("deepseek-v4-pro") == knobs_for("deepseek-v4-flash") == DEEPSEEK_KNOBS
    hybrid = (
        "model",
        "kv_dtype",
        "block_size",
        "full_layers",
        "tensor_parallel_size",
        "decode_context_parallel_size",
        "pipeline_parallel_size",
        "kv_offloading_size",
        "data_parallel_size",
        "planner",
        "context",
        "budget_gib",
        "gpu",
        "gpu_memory_utilization",
    )
    with_window = hybrid[:3] + ("sliding_window",) + hybrid[3:]
    assert knobs_for("gpt-oss-120b") == knobs_for("gemma-3-27b") == with_window
    assert knobs_for("llama-4-scout") == hybrid
    assert (
        knobs_for("qwen3-next-80b-a3b")
        == hybrid[:3] + ("full_layers", "mamba_ssm_dtype", "prefix_caching") + hybrid[4:]
    )
    assert set(KNOBS) == set(DEEPSEEK_KNOBS) | set(with_window) | {"mamba_ssm_dtype", "prefix_caching"}


def test_sweep_rows_are_the_library_numbers():
    table = sweep("indexer_format", ["fp8", "mxfp4"], context=8192)
    budget = int(26.09 * GIB)
    s = Scheduling(max_model_len=8192, max_in_flight_tokens=IN_FLIGHT)
    for row, fmt in zip(table.to_dict("records"), ["fp8", "mxfp4"]):
        layout = expected(indexer_format=fmt)
        assert row["indexer_format"] == fmt
        assert row["bytes per block"] == layout.block_stride
        assert row["binding group"] == layout.binding_label
        assert row["blocks"] == budget // layout.block_stride
        assert row["blocks per request"] == sum(group_blocks_for_request(layout, s))
        assert row["requests"] == round(max_concurrency(layout, budget, s), 2)
    first, second = (max_concurrency(expected(indexer_format=f), budget, s) for f in ("fp8", "mxfp4"))
    assert table["requests vs first %"].tolist() == [0.0, round(100 * (second - first) / first, 1)]


def test_sweep_keeps_impossible_rows_with_their_message():
    table = sweep("block_size", [64, 256])
    assert table["note"][0].startswith("block_size=64")
    assert table["bytes per block"].isna()[0]
    assert table["bytes per block"][1] == expected().block_stride and table["note"][1] == ""
    with pytest.raises(KvvizError, match="head_size"):
        sweep("head_size", [1])


def test_compare_knobs_shows_the_effective_value_of_every_changed_knob():
    table = compare_knobs([{}, {"c4": 61, "c128": 0}])
    assert table[["c4", "c128"]].values.tolist() == [[30, 31], [61, 0]]
    mixed = PRO.reader.with_layer_mix(PRO, c4=61, c128=0, swa=0)
    assert table["bytes per block"][1] == expected(mixed).block_stride


# ---- hybrid models ------------------------------------------------------------------------------
HYBRIDS = ("gpt-oss-120b", "gemma-3-27b", "llama-4-scout", "qwen3-next-80b-a3b")


def full_positions(name):
    """The preset's full-attention layers, from its config.json (Qwen3-Next: every
    full_attention_interval-th layer, qwen3_next.py)."""
    raw = preset_raw(name)
    if "full_attention_interval" in raw:
        k = raw["full_attention_interval"]
        return tuple(i for i in range(raw["num_hidden_layers"]) if (i + 1) % k == 0)
    return load_preset(name).config.layers_of("full_attention")


def test_hybrid_defaults_are_vllms_own_choices_and_the_presets_mix():
    for name in HYBRIDS:
        model = load_preset(name)
        knobs = default_knobs(name)
        assert knobs["full_layers"] == len(full_positions(name)), name
        assert (knobs["kv_dtype"], knobs["block_size"], knobs["planner"]) == ("auto", "auto", "vllm")
        # the request length is the model's own max_model_len, as vLLM derives it
        assert knobs["context"] == model.max_model_len and knobs["budget_gib"] == 26.09
        if "sliding_window" in knobs:
            assert knobs["sliding_window"] == model.config.sliding_window
    assert default_knobs("qwen3-next-80b-a3b")["prefix_caching"] is True  # vLLM 0.33 turns it on
    # 'auto' is None to Options (vLLM's own choice); the window is passed only with sliding layers
    oss = load_preset("gpt-oss-120b")
    assert options_for(default_knobs("gpt-oss-120b")) == Options(
        sliding_window=128, tensor_parallel_size=1, decode_context_parallel_size=1, max_model_len=oss.max_model_len
    )
    scout = load_preset("llama-4-scout")
    assert options_for(default_knobs("llama-4-scout", kv_dtype="fp8", block_size=64)) == Options(
        kv_dtype="fp8",
        block_size=64,
        tensor_parallel_size=1,
        decode_context_parallel_size=1,
        max_model_len=scout.max_model_len,
    )


@pytest.mark.parametrize(
    "model,knob",
    [
        ("gpt-oss-120b", "head_dim"),
        ("gemma-3-27b", "c4"),
        ("llama-4-scout", "sliding_window"),
        ("gpt-oss-120b", "prefix_caching"),
        ("deepseek-v4-pro", "kv_dtype"),
        ("deepseek-v4-flash", "full_layers"),
    ],
)
def test_a_knob_of_the_other_family_is_refused_not_ignored(model, knob):
    with pytest.raises(KvvizError, match=rf"^{knob}: does not apply to {model} \(.+\); its knobs are "):
        default_knobs(model, **{knob: 1})


def qwen_state_bytes(ssm_element_bytes=2):
    """A gated delta net state: conv (kernel - 1) x conv_dim x 2 B + SSM v_heads x v_dim x k_dim
    x the SSM element (config.json of the preset)."""
    q = preset_raw("qwen3-next-80b-a3b")
    conv_dim = (
        2 * q["linear_num_key_heads"] * q["linear_key_head_dim"]
        + q["linear_num_value_heads"] * q["linear_value_head_dim"]
    )
    return (q["linear_conv_kernel_dim"] - 1) * conv_dim * 2 + q["linear_num_value_heads"] * q[
        "linear_value_head_dim"
    ] * q["linear_key_head_dim"] * ssm_element_bytes


def test_hybrid_bytes_per_block_by_hand():
    """vLLM 0.33's rules by hand (docs/hybrid.md#hybrid-caches, #hybrid-grouping): an attention
    page is block x KV heads x head_dim x 2 (K, V) x 2 B (bf16); the groups hold as many layers as
    the smallest bucket (or the largest when under 1.5 x the smallest); bytes per block = the
    widest group's pages."""
    oss = load_preset("gpt-oss-120b").config  # 18 sliding + 18 full: groups of 18
    assert (
        plan_knobs(default_knobs("gpt-oss-120b")).block_stride
        == 18 * 16 * oss.num_key_value_heads * oss.head_dim * 2 * 2
        == 589_824
    )
    # fp8 KV: one byte per element
    assert plan_knobs(default_knobs("gpt-oss-120b", kv_dtype="fp8")).block_stride == 589_824 // 2
    # 12 full layers: 24 sliding + 12 full; 24 is not under 1.5 x 12, so groups of 12 layers
    assert (
        plan_knobs(default_knobs("gpt-oss-120b", full_layers=12)).block_stride
        == 12 * 16 * oss.num_key_value_heads * oss.head_dim * 2 * 2
    )
    # Qwen3-Next, prefix caching off: the block is the smallest multiple of 16 tokens whose page
    # (2 KV heads x 256 x 2 x 2 B = 2,048 B a token) holds a state; 12 layers a group.
    q = preset_raw("qwen3-next-80b-a3b")
    state = qwen_state_bytes()
    per_token = q["num_key_value_heads"] * q["head_dim"] * 2 * 2
    block = 16 * -(-state // (16 * per_token))
    plan = plan_knobs(default_knobs("qwen3-next-80b-a3b", prefix_caching=False))
    assert (block, plan.tokens_per_block) == (544, 544)
    assert plan.block_stride == 12 * block * per_token == 13_369_344
    # prefix caching on: 'align' mode, the block a multiple of lcm(16, 64) = 64 tokens
    assert plan_knobs(default_knobs("qwen3-next-80b-a3b")).tokens_per_block == 64 * -(-state // (64 * per_token))


def test_hybrid_refusals_are_one_line_naming_the_field():
    with pytest.raises(KvvizError, match=r"^block_size=8: must be a positive multiple of 16"):
        plan_knobs(default_knobs("gemma-3-27b", block_size=8))
    with pytest.raises(KvvizError, match=r"^sliding_window=0: must be [^\n]*$"):
        plan_knobs(default_knobs("gemma-3-27b", sliding_window=0))
    with pytest.raises(KvvizError, match=r"^full_layers=37: must be an integer from 0 to 36"):
        plan_knobs(default_knobs("gpt-oss-120b", full_layers=37))
    # the context knob is vLLM's max_model_len (its label in the explorer, --max-model-len in the CLI)
    with pytest.raises(KvvizError, match=r"^(context|max_model_len)=0: must be [^\n]*$"):
        capacities(default_knobs("gpt-oss-120b", context=0))


def test_hybrid_capacities_are_each_planners_capacity():
    knobs = default_knobs("llama-4-scout", budget_gib=10.0, context=100_000)
    model = load_preset("llama-4-scout")
    want = [
        plan_model(model, p, Options(max_model_len=100_000)).capacity(int(10 * GIB))
        for p in ("vllm", "packed", "separate")
    ]
    assert list(capacities(knobs)) == want


def test_describe_hybrid_knobs_names_what_auto_resolves_to():
    text = describe_knobs(default_knobs("qwen3-next-80b-a3b", prefix_caching=False))
    # the model, its layer mix, and what each 'auto' resolves to (bf16 KV, 544-token blocks,
    # a bfloat16 SSM state), prefix caching off and the planner
    for part in (
        "qwen3-next-80b-a3b",
        "12 full",
        "36 linear",
        "bf16 (auto)",
        "544",
        "bfloat16 (auto)",
        "prefix caching",
        "vllm",
    ):
        assert part in text, part
    assert "prefix caching True" not in text and "prefix caching on" not in text
    assert "sliding window 128" in describe_knobs(default_knobs("gpt-oss-120b"))
    assert "\n" not in text


def test_compare_knobs_for_a_hybrid_model():
    table = compare_knobs(
        [
            {"model": "gpt-oss-120b"},
            {"model": "gpt-oss-120b", "kv_dtype": "fp8"},
            {"model": "gpt-oss-120b", "block_size": 8},
            {"model": "deepseek-v4-pro"},
        ],
        context=8192,
    )
    assert table["bytes per block"].tolist()[:2] == [589_824, 589_824 // 2]
    assert table["note"][2].startswith("block_size=8")
    # one table for every model: a DeepSeek V4 row gets its own numbers
    assert table["note"][3] == "" and table["bytes per block"][3] == expected().block_stride
    want = plan_model(load_preset("gpt-oss-120b"), "vllm", Options(kv_dtype="fp8", max_model_len=8192)).capacity(
        int(26.09 * GIB)
    )
    assert (table["blocks"][1], table["requests"][1]) == (want.num_blocks, round(want.max_concurrency, 2))
    with pytest.raises(KvvizError, match=r"^head_dim: does not apply to gpt-oss-120b"):
        compare_knobs([{"model": "gpt-oss-120b", "head_dim": 576}])


# ---- the full-attention layer mix ---------------------------------------------------------------
def with_full_layers(model, full):
    return model.reader.with_full_layers(model, full)


@pytest.mark.parametrize("name", HYBRIDS)
def test_the_presets_own_count_keeps_the_preset(name):
    model = load_preset(name)
    assert with_full_layers(model, len(full_positions(name))) is model


@pytest.mark.parametrize("name", ["gpt-oss-120b", "llama-4-scout", "qwen3-next-80b-a3b"])
def test_even_spread_is_the_presets_pattern(name):
    """gpt-oss: every 2nd layer full; Llama 4 (NoPE every 4th) and Qwen3-Next (interval 4): every 4th."""
    model = load_preset(name)
    full = full_positions(name)
    assert full_layer_positions(model.config.num_hidden_layers, len(full)) == full
    assert model.reader.with_full_layers(model, len(full)) is model  # the explorer's slider can edit it


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(HYBRIDS), data=st.data())
def test_full_layer_mix_keeps_counts_and_spreads_evenly(name, data):
    model = load_preset(name)
    n = model.config.num_hidden_layers
    full = data.draw(st.integers(0, n))
    mixed = with_full_layers(model, full)
    kinds = mixed.config.layer_kinds
    assert len(kinds) == n == mixed.config.num_hidden_layers
    assert kinds.count("full_attention") == full
    other = {k for k in model.config.layer_kinds if k != "full_attention"}  # one other kind in every preset
    assert {k for k in kinds if k != "full_attention"} <= other
    positions = [i for i, k in enumerate(kinds) if k == "full_attention"]
    if full >= 2:  # evenly: the gaps differ by at most one layer
        gaps = [b - a for a, b in zip(positions, positions[1:])]
        assert max(gaps) - min(gaps) <= 1
    if full and mixed is not model:  # the last of `full` equal stretches ends at the last layer
        assert positions[-1] == n - 1
    plan_model(mixed)  # any mix plans


@pytest.mark.parametrize("full", [-1, 37, 2.0, True])
def test_full_layer_mix_refuses_out_of_range(full):
    with pytest.raises(KvvizError, match=r"^full_layers=.*: must be an integer from 0 to 36"):
        with_full_layers(load_preset("gpt-oss-120b"), full)


def test_the_dcp_knob_moves_blocks_per_request():
    """The explorer's decode-CP knob is Options.decode_context_parallel_size: Kimi-K2 at TP 8, DCP 8
    holds cdiv(cdiv(32768, 8), 16) = 256 MLA blocks a request (FullAttentionSpec.max_memory_usage_bytes)
    instead of cdiv(32768, 16) = 2,048."""
    from kvviz.explorer.sweeps import plan_knobs

    one = plan_knobs(default_knobs("kimi-k2", tensor_parallel_size=8, context=32_768))
    eight = plan_knobs(default_knobs("kimi-k2", tensor_parallel_size=8, decode_context_parallel_size=8, context=32_768))
    assert one.capacity(2**34).blocks_per_request == 2048
    assert eight.capacity(2**34).blocks_per_request == 256
