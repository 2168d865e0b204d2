"""The weight estimate behind the GPU path (kvviz.deploy.params, quantized, weights): four models' own
config.json (tests/data/own-configs, README there) against totals derived here by hand from the
config's shapes, the quantization_config deciding bytes per parameter, and the CLI's `--gpu` path
printing a full budget for them and naming its flags when it cannot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hand_weights import deepseek_v3_rank_bytes

import kvviz
from kvviz.base.errors import KvvizError
from kvviz.cli.main import main
from kvviz.deploy.budget import kv_budget
from kvviz.deploy.weights import estimate_parameters, estimate_weight_bytes

OWN = Path(__file__).parent / "data" / "own-configs"


def raw(name: str) -> dict:
    return json.loads((OWN / name / "config.json").read_text())


def gated(h, i):  # gate, up, down
    return 3 * h * i


def test_llama_3_3_70b_by_hand():
    h, n, hq, hkv, d, inter, vocab = 8192, 80, 64, 8, 128, 28672, 128256
    attn = h * hq * d + 2 * h * hkv * d + hq * d * h
    total = n * (attn + gated(h, inter) + 2 * h) + h + 2 * vocab * h
    assert estimate_parameters(raw("llama-3.3-70b"))[0] == total
    assert 70.5e9 < total < 70.6e9  # the published 70.6 B
    model = kvviz.load(OWN / "llama-3.3-70b")
    assert estimate_weight_bytes(model, raw("llama-3.3-70b"))[0] == 2 * total  # bf16


def test_qwen3_30b_a3b_by_hand():
    h, n, hq, hkv, d, e, i_moe, vocab = 2048, 48, 32, 4, 128, 128, 768, 151936
    attn = h * hq * d + 2 * h * hkv * d + hq * d * h + 2 * d  # + q_norm, k_norm
    moe = e * gated(h, i_moe) + h * e  # experts + router
    total = n * (attn + moe + 2 * h) + h + 2 * vocab * h
    assert estimate_parameters(raw("qwen3-30b-a3b"))[0] == total
    assert 30.4e9 < total < 30.6e9  # the published 30.5 B


def test_gpt_oss_120b_mxfp4_by_hand():
    h, n, hq, hkv, d, e, inter, vocab = 2880, 36, 64, 8, 64, 128, 2880, 201088
    attn = h * hq * d + 2 * h * hkv * d + hq * d * h
    attn_small = (hq + 2 * hkv) * d + h + hq  # q/k/v and o biases, sinks
    experts = e * (gated(h, inter) + 2 * inter + h)  # w13 + w2 and their biases
    small = n * (attn_small + h * e + e + 2 * h) + h  # router weight and bias, norms
    embed = 2 * vocab * h
    total = n * attn + n * experts + small + embed
    assert estimate_parameters(raw("gpt-oss-120b"))[0] == total
    assert 116.7e9 < total < 116.9e9  # the published 116.8 B
    model = kvviz.load(OWN / "gpt-oss-120b")
    w, how = estimate_weight_bytes(model, raw("gpt-oss-120b"))
    # MXFP4 (4 bits + an E8M0 scale per 32 weights) on the routed experts only; the rest bf16
    assert w == round(n * experts * 4.25 / 8 + 2 * (n * attn + small + embed))
    assert 64e9 < w < 66e9 and "mxfp4" in how  # the published checkpoint is ~65 GB


def test_deepseek_v3_fp8_by_hand():
    h, n, hq, e, i_moe, inter, vocab = 7168, 61, 128, 256, 2048, 18432, 129280
    rank, rope, nope, v, q_rank = 512, 64, 128, 128, 1536
    mla = h * q_rank + q_rank * hq * (nope + rope) + h * (rank + rope) + rank * hq * (nope + v) + hq * v * h
    dense, moe_layers = 3, 58
    linear = n * mla + dense * gated(h, inter) + moe_layers * gated(h, i_moe)  # + the shared expert
    experts = moe_layers * e * gated(h, i_moe)
    small = n * (rank + q_rank + 2 * h) + moe_layers * (h * e + e) + h  # latent norms, router, bias
    embed = 2 * vocab * h
    assert estimate_parameters(raw("deepseek-v3"))[0] == linear + experts + small + embed
    assert 670e9 < linear + experts + small + embed < 672e9  # 671 B without the MTP layer
    model = kvviz.load(OWN / "deepseek-v3")
    w, _ = estimate_weight_bytes(model, raw("deepseek-v3"))
    # FP8 on every linear and expert, plus a float32 scale per 128 x 128 block; the rest bf16
    assert w == round((linear + experts) * (1 + 4 / (128 * 128)) + 2 * (small + embed))
    b = kv_budget(model, gpu="H200", gpu_memory_utilization=0.9, tensor_parallel_size=8, raw_config=raw("deepseek-v3"))
    assert b.weights_bytes == deepseek_v3_rank_bytes(8) and b.available_bytes > 40 * 2**30  # 8 x H200 fits


@pytest.mark.parametrize(
    "name, tp", [("qwen3-30b-a3b", 1), ("llama-3.3-70b", 2), ("gpt-oss-120b", 1), ("deepseek-v3", 8)]
)
def test_cli_gpu_path_prints_a_full_budget(name, tp, capsys):
    argv = ["plan", "--hf-config", str(OWN / name), "--gpu", "H200", "--gpu-memory-utilization", "0.9"]
    assert main(argv + ["-tp", str(tp)]) == 0
    out = capsys.readouterr().out
    assert "weights on one rank" in out and "available KV cache memory" in out


def test_checkpoint_index_beside_the_config_is_exact(tmp_path, capsys):
    (tmp_path / "config.json").write_text((OWN / "llama-3.3-70b" / "config.json").read_text())
    size = 141_107_412_992
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": size}}))
    assert main(["plan", "--hf-config", str(tmp_path), "--gpu", "H200", "-tp", "2"]) == 0
    out = capsys.readouterr().out
    assert f"{size // 2:,} B" in out and "metadata.total_size" in out


def test_missing_field_names_cli_flags_on_the_cli_and_arguments_in_python(tmp_path, capsys):
    cfg = raw("llama-3.3-70b")
    del cfg["intermediate_size"]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert main(["plan", "--hf-config", str(tmp_path), "--gpu", "H200", "-tp", "2"]) == 2
    err = capsys.readouterr().err
    assert "'intermediate_size'" in err and "--weights-bytes" in err and "--checkpoint" in err
    assert "weights_bytes=" not in err
    with pytest.raises(KvvizError, match="intermediate_size.*weights_bytes=.*checkpoint_dir="):
        kv_budget(kvviz.load(tmp_path), gpu="H200", tensor_parallel_size=2, raw_config=cfg)


@pytest.mark.parametrize(
    "quant, per",
    [
        ({"quant_method": "awq", "bits": 4, "group_size": 128}, 0.5 + 2.5 / 128),
        ({"quant_method": "gptq", "bits": 4, "group_size": 128}, 0.5 + 2.5 / 128),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, 4.5 / 8),
        ({"quant_method": "fp8"}, 1.0),
    ],
)
def test_quantized_bytes_per_parameter(quant, per):
    cfg = dict(raw("llama-3.3-70b"), quantization_config=quant)
    model = kvviz.load(OWN / "llama-3.3-70b")
    params = estimate_parameters(cfg)[0]
    h, vocab = 8192, 128256
    embed, norms = 2 * vocab * h, 80 * 2 * h + h
    w, _ = estimate_weight_bytes(model, cfg)
    assert w == round((params - embed - norms) * per + 2 * (embed + norms))


def test_unknown_quant_method_is_one_line():
    cfg = dict(raw("llama-3.3-70b"), quantization_config={"quant_method": "bitsandbytes"})
    with pytest.raises(KvvizError, match="quant_method 'bitsandbytes'.*weights_bytes="):
        estimate_weight_bytes(kvviz.load(OWN / "llama-3.3-70b"), cfg)


@pytest.mark.parametrize(
    "name, tp", [("qwen3-30b-a3b", 1), ("llama-3.3-70b", 2), ("gpt-oss-120b", 1), ("deepseek-v3", 8)]
)
def test_fit_prints_budgets_for_an_own_config(name, tp, capsys):
    """`kvviz fit` on each own config: no row says the weights are unknown, and the TP that fits (the
    one the plan test above uses; DeepSeek-V3 FP8 on 8 x H200) has a row with a KV budget."""
    argv = ["fit", "--hf-config", str(OWN / name), "--gpus", "H200", "--tp", f"1,{tp}", "--contexts", "8192", "--json"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "weights_bytes" not in out and "no config.json" not in out
    rows = json.loads(out)["rows"]
    good = [r for r in rows if r["tp"] == tp and r["kv_budget_bytes"] and r["num_blocks"]]
    assert good and all(r["line"].startswith("GPU KV cache size: ") for r in good), rows


def test_no_room_names_the_tp_flag_on_the_cli(capsys):
    assert main(["plan", "--model", "deepseek-v3", "--gpu", "H200"]) == 2
    err = capsys.readouterr().err
    assert "(or --tensor-parallel-size / -tp)" in err and "`gpu_memory_utilization`'" in err
    with pytest.raises(KvvizError, match=r"\(or tensor_parallel_size\)"):
        kv_budget(kvviz.load("deepseek-v3"), gpu="H200")
