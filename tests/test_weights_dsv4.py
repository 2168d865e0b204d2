"""DeepSeek V4's weights from its config.json (kvviz.deploy.params_dsv4), derived by hand from vLLM
0.33's model file (models/deepseek_v4/nvidia/model.py, attention.py, compressor.py): DeepSeek-V4-Flash
and DeepSeek-V4-Pro through their presets, which carry their published config.json's fields
(kvviz/presets/README.md)."""

from __future__ import annotations

import pytest

import kvviz
from kvviz.base.errors import KvvizError
from kvviz.cli.main import main
from kvviz.deploy.budget import kv_budget
from kvviz.deploy.weights import estimate_weight_bytes, raw_config_of


def v4_by_hand(h, n, vocab, heads, q_lora, groups, e, inter, c4, c128, swa, noaux=False):
    """(quantized linears, routed experts, bf16 rest, 4-byte tensors) of a DeepSeek V4, module by module."""
    hd, o_lora, topk, m, ihd, iheads = 512, 1024, 6, 4, 128, 64
    hash_layers = 3  # DeepseekV4Config's default_num_hash_layers (and the published configs' num_hash_layers)
    attn = h * (q_lora + hd) + q_lora * heads * hd + heads * hd // groups * groups * o_lora + groups * o_lora * h
    shared = 3 * h * inter
    linear = n * (attn + shared) + c4 * q_lora * ihd * iheads  # + the indexers' wq_b
    experts = n * e * 3 * h * inter
    comp4, comp128, icomp = h * 2 * 2 * hd + hd, h * 2 * hd + hd, h * 2 * 2 * ihd + ihd  # fused_wkv_wgate + norm
    rest = n * (q_lora + hd + 2 * h + h * e) + c4 * (comp4 + icomp + h * iheads) + c128 * comp128 + h
    rest += 2 * vocab * h  # embed_tokens, lm_head
    mix = (2 + m) * m
    four = n * (heads + 2 * (mix * m * h + mix + 3)) + hash_layers * vocab * topk + m * m * h + m + 1
    four += c4 * (4 * 2 * hd + 4 * 2 * ihd) + c128 * 128 * hd  # the compressors' ape
    if noaux:  # topk_method noaux_tc: GateLinear's e_score_correction_bias on every non-hash layer
        four += (n - hash_layers) * e
    assert c4 + c128 + swa == n
    return linear, experts, rest, four


def flash_by_hand():
    """DeepSeek-V4-Flash: the preset's compress_ratios over the 43 layers are 0, 0, then 4 / 128 alternating, 4."""
    return v4_by_hand(4096, 43, 129280, 64, 1024, 8, 256, 2048, c4=21, c128=20, swa=2)


def pro_by_hand():
    """DeepSeek-V4-Pro (its published config.json, kvviz/presets/README.md): 61 layers, compress_ratios
    128, 128, then 4 / 128 alternating: 30 ratio-4 layers, 31 ratio-128 layers; topk_method noaux_tc."""
    return v4_by_hand(7168, 61, 129280, 128, 1536, 16, 384, 3072, c4=30, c128=31, swa=0, noaux=True)


def flash_raw() -> dict:
    return raw_config_of(kvviz.load("deepseek-v4-flash"), None, None)[0]


def test_deepseek_v4_flash_by_hand():
    linear, experts, rest, four = flash_by_hand()
    assert 284e9 < linear + experts + rest + four < 285e9  # V4-Flash's published 284 B total
    w, how = estimate_weight_bytes(kvviz.load("deepseek-v4-flash"), flash_raw())
    # fp8 linears + an E8M0 byte per 128 x 128 block; MXFP4 experts (4 bits + an E8M0 per 32); bf16; 4 B
    assert w == round(linear * (1 + 1 / (128 * 128)) + experts * 4.25 / 8 + 2 * rest + 4 * four)
    assert f"{linear + experts + rest + four:,} parameters" in how and "fp4 experts" in how


def test_deepseek_v4_fp8_experts_and_no_quantization():
    linear, experts, rest, four = flash_by_hand()
    model, cfg = kvviz.load("deepseek-v4-flash"), flash_raw()
    cfg["quantization_config"] = {"quant_method": "fp8", "weight_block_size": [128, 128], "expert_dtype": "fp8"}
    scaled = 1 + 4 / (128 * 128)  # FP8 experts (Flash-Base): float32 block scales, is_scale_e8m0 False
    assert estimate_weight_bytes(model, cfg)[0] == round((linear + experts) * scaled + 2 * rest + 4 * four)
    del cfg["quantization_config"]
    assert estimate_weight_bytes(model, cfg)[0] == 2 * (linear + experts + rest) + 4 * four


def test_deepseek_v4_budget_on_8_h200():
    model = kvviz.load("deepseek-v4-flash")
    w = estimate_weight_bytes(model, flash_raw())[0]
    b = kv_budget(model, gpu="H200", tensor_parallel_size=8)
    assert b.weights_bytes == -(-w // 8) and b.available_bytes > 100 * 2**30


def test_deepseek_v4_cli_prints_a_full_budget(capsys):
    assert main(["plan", "--model", "deepseek-v4-flash", "--gpu", "H200", "-tp", "8"]) == 0
    out = capsys.readouterr().out
    assert "GPU KV cache size:" in out and "284,334,557,271 parameters" in out


@pytest.mark.parametrize(
    "change, field",
    [
        ({"quantization_config": {"quant_method": "awq"}}, "quantization_config"),
        ({"quantization_config": {"quant_method": "fp8", "expert_dtype": "int4"}}, "expert_dtype"),
        ({"hidden_size": None}, "hidden_size"),
        ({"compress_ratios": [1] * 44}, "compress_ratios"),
    ],
)
def test_deepseek_v4_bad_fields_are_one_line(change, field):
    cfg = flash_raw() | change
    with pytest.raises(KvvizError, match=field) as err:
        estimate_weight_bytes(kvviz.load("deepseek-v4-flash"), cfg)
    assert "\n" not in str(err.value)


def test_deepseek_v4_pro_by_hand_and_on_8_h200():
    linear, experts, rest, four = pro_by_hand()
    assert 1.57e12 < linear + experts + rest + four < 1.58e12  # 1.6 T published, less the MTP layer
    model = kvviz.load("deepseek-v4-pro")
    raw = raw_config_of(model, None, None)[0]
    w, how = estimate_weight_bytes(model, raw)
    assert w == round(linear * (1 + 1 / (128 * 128)) + experts * 4.25 / 8 + 2 * rest + 4 * four)
    assert f"{linear + experts + rest + four:,} parameters" in how
    b = kv_budget(model, gpu="H200", tensor_parallel_size=8)
    assert b.weights_bytes == -(-w // 8) and b.available_bytes > 0


def test_deepseek_v4_pro_without_its_sizes_names_what_is_missing():
    model = kvviz.load("deepseek-v4-pro")
    raw = raw_config_of(model, None, None)[0]
    del raw["hidden_size"]
    with pytest.raises(KvvizError, match="hidden_size") as err:
        estimate_weight_bytes(model, raw)
    assert "\n" not in str(err.value)
