"""Every shipped preset gets a full KV budget on an H200 (issue 29: `kvviz plan --model P --gpu H200
--gpu-memory-utilization 0.9` and `kvviz fit` print a budget for every preset): the presets carry the
config.json fields the weight estimate reads (kvviz/presets/README.md says where each came from).
A model whose weights do not fit one H200 at 0.9 gets one at -tp 8. Gemma 3n's count, the one
family sized here first, is derived by hand from vLLM 0.33's models/gemma3n.py."""

from __future__ import annotations

import json

import pytest

import kvviz
from kvviz.cli.main import main
from kvviz.deploy.weights import estimate_weight_bytes, raw_config_of
from kvviz.families import preset_names
from kvviz.families.hf import MAX_LEN_KEYS

GIB = 2**30
H200_AT_09 = 0.9 * 150_109_945_856  # the H200's total_memory (kvviz/deploy/gpus.py) x 0.9


def plan_json(capsys, name: str, *extra: str) -> tuple[int, dict | None, str]:
    argv = ["plan", "--model", name, "--gpu", "H200", "--gpu-memory-utilization", "0.9", "--json", *extra]
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if rc == 0 else None), err


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_plans_a_positive_budget_on_h200(name, capsys):
    rc, plan, err = plan_json(capsys, name)
    if rc != 0:
        # Only a model whose weights alone exceed one H200's share is refused, and for that reason.
        assert "no memory left for the KV cache" in err and "-tp" in err, err
        rc, plan, err = plan_json(capsys, name, "-tp", "8")
        assert rc == 0, err
    budget = plan["kv_budget"]
    assert budget["available_bytes"] > 0 and plan["num_blocks"] > 0
    weights = next(t for t in budget["terms"] if t["key"] == "weights")
    assert weights["bytes"] > 0 and "weights_bytes" not in json.dumps(budget)
    if rc == 0 and budget["tensor_parallel_size"] == 8:
        assert weights["bytes"] * 8 > H200_AT_09 - 3 * GIB  # refused at TP 1 because it does not fit


def test_fit_prints_a_budget_for_every_preset(capsys):
    """`kvviz fit` gives every preset at least one row with a KV budget and a capacity line (TP 1 or 8;
    a 2,048-token request, within every preset's max_model_len)."""
    for name in preset_names():
        assert main(["fit", "--model", name, "--gpus", "H200", "--tp", "1,8", "--contexts", "2048", "--json"]) == 0
        rows = json.loads(capsys.readouterr().out)["rows"]
        good = [r for r in rows if r["kv_budget_bytes"] and r["kv_budget_bytes"] > 0 and r["num_blocks"]]
        assert good and all(r["line"].startswith("GPU KV cache size: ") for r in good), (name, rows)
        assert not any("weights_bytes" in r["note"] or "has no" in r["note"] for r in rows), (name, rows)


def test_gemma_3n_e4b_by_hand():
    """google/gemma-3n-E4B-it's text model, module by module (vLLM 0.33 models/gemma3n.py)."""
    h, n, hq, hkv, d, inter, ple, k, r = 2048, 35, 8, 2, 256, 16384, 256, 4, 64
    vocab, vocab_ple, first_shared = 262400, 262144, 35 - 15  # num_kv_shared_layers 15: layers 20.. only q_proj
    own_kv = (h * (hq + 2 * hkv) * d + hq * d * h) + 2 * d  # qkv_proj + o_proj, q_norm + k_norm (v_norm: no weight)
    shared_kv = (h * hq * d + hq * d * h) + d  # q_proj + o_proj, q_norm
    mlp = 3 * h * inter  # gate_up_proj + down_proj
    laurel = h * r + r * h + h  # linear_left, linear_right, post_laurel_norm
    altup = k * k + k * k * k + h * k + h + h  # correction / prediction coefs, modality_router, router_norm, scale
    ple_layer = h * ple + ple * h  # per_layer_input_gate, per_layer_projection
    norms = 5 * h  # input / post_attention / pre_feedforward / post_feedforward / post_per_layer_input norms
    layer = mlp + laurel + altup + ple_layer + norms
    layers = first_shared * (own_kv + layer) + (n - first_shared) * (shared_kv + layer)
    once = vocab * h + vocab_ple * n * ple + h * n * ple + ple + 2 * (k - 1) * h * h + h  # tied lm_head; final norm
    total = layers + once
    model = kvviz.load("gemma-3n-e4b")
    w, how = estimate_weight_bytes(model, raw_config_of(model, None, None)[0])
    assert w == 2 * total and f"{total:,} parameters" in how  # bf16
    assert 6.8e9 < total < 6.9e9  # the text model of the "8B raw parameters" E4B (vision, audio towers apart)


VLLM_LENGTH_KEYS = MAX_LEN_KEYS  # vLLM 0.33 derive_max_model_len_and_key's keys, one home (kvviz/families/hf.py)


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_carries_its_published_length(name):
    """Issue 29 "each preset's real context length": every preset's config.json carries one of the
    length keys vLLM 0.33 reads, so none plans at a config class's default (GraniteMoeHybridConfig
    2,048, KimiLinearConfig 4,096) or at _get_and_verify_max_len's 2,048-token fallback."""
    from kvviz.families import preset_raw

    raw = preset_raw(name)
    text = raw.get("text_config") or raw
    assert any(isinstance(text.get(k, raw.get(k)), int) for k in VLLM_LENGTH_KEYS), name
    source = kvviz.load(name).max_model_len_source
    assert "default" not in source and "no length field" not in source, (name, source)


def test_granite_and_kimi_linear_lengths_by_hand():
    """derive_max_model_len_and_key: the smallest key found, then `model_max_length` (when set) wins;
    neither model has rope scaling, so _get_and_verify_max_len keeps the derived length.
    granite-4.0-h-small: max_position_embeddings alone (131,072). Kimi-Linear: KimiLinearConfig
    (transformers_utils/configs/kimi_linear.py) always sets max_position_embeddings (default 4,096, the
    smaller key), and the published config's model_max_length (1,048,576) overrides it."""
    from kvviz.families import preset_raw

    granite, kimi = preset_raw("granite-4.0-h"), preset_raw("kimi-linear")
    assert "rope_scaling" not in granite and "rope_scaling" not in kimi
    assert kvviz.load("granite-4.0-h").max_model_len == granite["max_position_embeddings"] == 131072
    assert "max_position_embeddings" not in kimi
    assert kvviz.load("kimi-linear").max_model_len == kimi["model_max_length"] == 1048576


@pytest.mark.parametrize("name", preset_names())
def test_a_preset_file_given_as_hf_config_gets_the_same_budget(name, capsys):
    """`kvviz plan --hf-config kvviz/presets/NAME.json --gpu H200` reads the same trimmed config as
    `--model NAME`, so its weights are sized from the same fields: before, ten presets
    were refused for a missing intermediate_size / hidden_size, and DeepSeek-V3 was sized in bf16."""
    from kvviz.families.loader import PRESETS_DIR

    tp: tuple[str, ...] = ()
    rc, by_name, err = plan_json(capsys, name)
    if rc != 0:  # weights alone exceed one H200's share (the test above): both at TP 8
        tp = ("-tp", "8")
        rc, by_name, err = plan_json(capsys, name, *tp)
    assert rc == 0 and by_name is not None, err
    argv = ["plan", "--hf-config", str(PRESETS_DIR / f"{name}.json"), "--gpu", "H200"]
    assert main([*argv, "--gpu-memory-utilization", "0.9", "--json", *tp]) == 0, capsys.readouterr().err
    by_file = json.loads(capsys.readouterr().out)
    weights = [next(t for t in p["kv_budget"]["terms"] if t["key"] == "weights")["bytes"] for p in (by_name, by_file)]
    assert weights[0] == weights[1] and by_file["num_blocks"] == by_name["num_blocks"] > 0
