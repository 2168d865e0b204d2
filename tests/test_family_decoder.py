"""Attention-only decoders, each rule derived by hand from vLLM 0.33's model files (cited per test;
docs/model-core.md#attention-decoders): which layers register a cache, their spec class, window,
names and page = block_size x num_kv_heads x (head_size + head_size_v) x dtype bytes."""

from __future__ import annotations

import pytest

from kvviz.base.errors import KvvizError
from kvviz.core.kinds import CacheKind
from kvviz.families import load_preset, model_from_dict
from kvviz.options import Options
from kvviz.vllm.plan import plan_model

BF16 = 2


def _plan(model, **knobs):
    return plan_model(model, None, Options(**knobs))


def _layers(plan):
    return {p.cache.layer: p.cache for p in plan.layout.placements}


def test_llama_31_all_full_one_group():
    # llama.py LlamaAttention: no layer_types -> FullAttentionSpec on every layer; 8 KV heads x 128.
    m = load_preset("llama-3.1-8b")
    plan = _plan(m)
    (group,) = plan.layout.groups
    assert len(group.layers) == 32 and {c.kind for c in group.layers} == {CacheKind.FULL_ATTENTION}
    assert {c.page_bytes for c in group.layers} == {16 * 8 * (128 + 128) * BF16}
    assert group.layers[0].name == "model.layers.0.self_attn.attn"
    # max_model_len: max_position_embeddings, llama3 rope not multiplied (_get_and_verify_max_len)
    assert m.max_model_len == 131_072


def test_mistral_config_wide_window_on_every_layer():
    # EngineArgs.create_engine_config: no layer_types -> CacheConfig.sliding_window = 4096 for all.
    plan = _plan(load_preset("mistral-7b-v0.1"), max_model_len=32_768)
    caches = _layers(plan)
    assert len(caches) == 32 and {c.sliding_window for c in caches.values()} == {4096}
    assert {c.spec_class for c in caches.values()} == {"SlidingWindowSpec"}
    # SlidingWindowSpec.max_admission_blocks_per_request, 2 x 8192 in flight
    assert plan.capacity(1 << 30).blocks_per_request == -(-(4096 - 1 + 2 * 8192) // 16) + 1


def test_phi3_head_size_from_hidden_and_window():
    # phi3.py (llama rules): head_size = hidden_size // heads = 3072 // 32 = 96; window 2047.
    caches = _layers(_plan(load_preset("phi-3-mini-4k")))
    assert {c.page_bytes for c in caches.values()} == {16 * 32 * (96 + 96) * BF16}
    assert {c.sliding_window for c in caches.values()} == {2047}


def test_gemma3n_shared_layers_register_nothing():
    # gemma3n.py Gemma3nAttention: first = 35 - 15 = 20 layers own a cache; the rest share layer
    # 18 (sliding) or 19 (full). layer_types: every 5th layer full.
    m = load_preset("gemma-3n-e4b")
    caches = _layers(_plan(m))
    assert sorted(caches) == list(range(20))
    assert [i for i, c in caches.items() if c.kind is CacheKind.FULL_ATTENTION] == [4, 9, 14, 19]
    assert {c.sliding_window for c in caches.values() if c.kind is CacheKind.SLIDING_ATTENTION} == {512}
    assert caches[0].name == "language_model.model.layers.0.self_attn.attn"  # the multimodal wrapper
    assert dict(m.config.shared_targets)[20] == 18 and dict(m.config.shared_targets)[24] == 19


def _cfg(model_type, arch, **fields):
    return {
        "architectures": [arch],
        "model_type": model_type,
        "torch_dtype": "bfloat16",
        "num_hidden_layers": 8,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "hidden_size": 1024,
        "max_position_embeddings": 8192,
        **fields,
    }


def test_cohere2_sliding_layers_see_window_plus_one():
    # commandr.py CohereAttention: "cohere swa layer sees [pos - sliding_window, pos]" -> window + 1.
    raw = _cfg(
        "cohere2",
        "Cohere2ForCausalLM",
        sliding_window=4096,
        layer_types=["sliding_attention"] * 3 + ["full_attention"] + ["sliding_attention"] * 3 + ["full_attention"],
    )
    caches = _layers(_plan(model_from_dict(raw, name="cohere2-test")))
    assert {c.sliding_window for c in caches.values() if c.sliding_window} == {4097}
    assert [i for i, c in caches.items() if c.is_full_attention] == [3, 7]


def test_qwen2_head_size_is_hidden_over_heads_whatever_head_dim_says():
    # qwen2.py Qwen2Attention: head_dim = hidden_size // num_heads (config.head_dim not read).
    raw = _cfg("qwen2", "Qwen2ForCausalLM", head_dim=64)
    caches = _layers(_plan(model_from_dict(raw, name="qwen2-test")))
    assert {c.page_bytes for c in caches.values()} == {16 * 2 * 2 * (1024 // 8) * BF16}


def test_gemma2_alternates_sliding_and_full():
    # gemma2.py Gemma2Attention: layer_types (transformers: even layers sliding) pick the window.
    raw = _cfg("gemma2", "Gemma2ForCausalLM", head_dim=256, sliding_window=4096)
    plan = _plan(model_from_dict(raw, name="gemma2-test"))
    caches = _layers(plan)
    assert [i for i, c in caches.items() if c.sliding_window == 4096] == [0, 2, 4, 6]
    assert sorted(g.name for g in plan.layout.groups) == ["full", "sliding4096"]


def test_gpt_oss_parity_not_layer_types():
    # gpt_oss.py OAIAttention: sliding_window if layer_idx % 2 == 0, names model.layers.i.attn.attn.
    raw = _cfg("gpt_oss", "GptOssForCausalLM", head_dim=64, sliding_window=128, layer_types=["full_attention"] * 8)
    caches = _layers(_plan(model_from_dict(raw, name="gpt-oss-test")))
    assert [i for i, c in caches.items() if c.sliding_window == 128] == [0, 2, 4, 6]
    assert caches[1].name == "model.layers.1.attn.attn"


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_tensor_parallel_kv_heads_per_rank(tp):
    # ModelConfig.get_num_kv_heads: max(1, 8 // tp) KV heads on a rank of Llama 3.1 8B.
    caches = _layers(_plan(load_preset("llama-3.1-8b"), tensor_parallel_size=tp))
    assert {c.page_bytes for c in caches.values()} == {16 * max(1, 8 // tp) * 256 * BF16}


def test_a_tp_that_does_not_divide_the_heads_is_refused():
    with pytest.raises(KvvizError, match="tensor_parallel_size=3"):
        _plan(load_preset("llama-3.1-8b"), tensor_parallel_size=3)


def test_fp8_kv_halves_the_page():
    caches = _layers(_plan(load_preset("llama-3.1-8b"), kv_dtype="fp8"))
    assert {c.page_bytes for c in caches.values()} == {16 * 8 * 256 * 1}


def test_a_float32_checkpoint_is_served_in_bf16():
    # config/model.py _resolve_auto_dtype: a float32 checkpoint -> bfloat16 on CUDA sm >= 80.
    m = model_from_dict(_cfg("llama", "LlamaForCausalLM", torch_dtype="float32"), name="fp32-test")
    assert m.dtype == "bf16"


# -- issue 27: KV heads / head sizes of their own (the records' `heads` rules; vLLM's own plans of the default
# configs: tests/test_registry_plans.py) --------------------------------------------------------------------

import json  # noqa: E402
from pathlib import Path  # noqa: E402

REGISTRY = Path(__file__).parent / "data" / "vllm-0.33" / "registry" / "configs"


def _registry(arch: str, **changes) -> dict:
    return {**json.loads((REGISTRY / arch / "config.json").read_text()), **changes}


@pytest.mark.parametrize(
    "changes,kv",
    [
        (dict(new_decoder_architecture=True, num_kv_heads=8, num_attention_heads=128, hidden_size=8192), 8),
        (dict(new_decoder_architecture=False, multi_query=True), 1),
        (dict(new_decoder_architecture=False, multi_query=False), 71),
    ],
)
def test_falcon_kv_heads(changes, kv):
    """falcon.py FalconAttention.__init__: new_decoder_architecture -> config.num_kv_heads, else multi_query
    -> 1, else num_attention_heads; head_dim = hidden_size // num_attention_heads; names
    transformer.h.{i}.self_attention.attn."""
    raw = _registry("FalconForCausalLM", **changes)
    m = model_from_dict(raw, name="falcon")
    caches = m.reader.caches(m, Options())
    assert caches[0].name == "transformer.h.0.self_attention.attn"
    assert {(c.num_kv_heads, c.head_size) for c in caches} == {(kv, raw["hidden_size"] // raw["num_attention_heads"])}


def test_falcon_kv_dtype_does_not_apply():
    """falcon.py builds Attention(...) without cache_config (rotary and alibi), so Attention.__init__ takes
    kv_cache_dtype 'auto': the cache is the model dtype whatever --kv-cache-dtype says. The knob is refused;
    a multi-query cache at TP 2 keeps one KV head (max(1, 1 // 2))."""
    m = model_from_dict(_registry("FalconForCausalLM"), name="falcon")
    assert "kv_dtype" not in m.reader.knobs_for(m)
    with pytest.raises(KvvizError, match="kv_dtype"):
        _plan(m, kv_dtype="fp8")
    m = model_from_dict(_registry("FalconForCausalLM", num_attention_heads=64, hidden_size=4096), name="falcon-64")
    assert {c.num_kv_heads for c in m.reader.caches(m, Options(tensor_parallel_size=2))} == {1}


def test_minicpm3_plain_attention_tp():
    """minicpm3.py MiniCPM3Attention: Attention(num_local_heads, qk_nope_head_dim + qk_rope_head_dim,
    num_kv_heads=num_local_heads): not MLA, whatever kv_lora_rank says; at TP 2 half the heads."""
    raw = _registry("MiniCPM3ForCausalLM")
    m = model_from_dict(raw, name="minicpm3")
    assert m.family == "decoder"
    for tp in (1, 2):
        caches = m.reader.caches(m, Options(tensor_parallel_size=tp))
        want = (raw["num_attention_heads"] // tp, raw["qk_nope_head_dim"] + raw["qk_rope_head_dim"])
        assert {(c.num_kv_heads, c.head_size) for c in caches} == {want}


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_gemma4_per_kind_heads_tp(tp):
    """gemma4.py Gemma4DecoderLayer: config.per_layer_config[i] gives each layer's head_dim and KV heads
    (Gemma4TextConfig: full-attention layers head_dim global_head_dim 512, sliding ones head_dim 256);
    sliding layers carry sliding_window. KV heads per rank max(1, kv // tp)."""
    raw = _registry("Gemma4ForCausalLM")
    m = model_from_dict(raw, name="gemma4")
    caches = m.reader.caches(m, Options(tensor_parallel_size=tp))
    kv = max(1, raw["num_key_value_heads"] // tp)
    for i, (c, kind) in enumerate(zip(caches, raw["layer_types"], strict=True)):
        assert c.name == f"model.layers.{i}.self_attn.attn"
        if kind == "full_attention":
            assert (c.num_kv_heads, c.head_size, c.sliding_window) == (kv, 512, None)
        else:
            assert (c.num_kv_heads, c.head_size, c.sliding_window) == (kv, raw["head_dim"], raw["sliding_window"])


def test_gemma4_kv_shared_layers_reuse_the_last_of_their_type():
    """gemma4.py Gemma4Attention: a layer among the last num_kv_shared_layers reuses the last earlier layer of
    its own type (kv_sharing_target_layer_name) and registers no cache of its own."""
    raw = _registry("Gemma4ForCausalLM", num_kv_shared_layers=10)
    m = model_from_dict(raw, name="gemma4-shared")
    first = raw["num_hidden_layers"] - 10
    names = [c.name for c in m.reader.caches(m, Options())]
    assert names == [f"model.layers.{i}.self_attn.attn" for i in range(first)]
    types = raw["layer_types"]
    for layer, target in m.config.shared_targets:
        assert target == max(j for j in range(first) if types[j] == types[layer])


def test_hrm_text_stacked_steps_tp():
    """hrm_text.py: L_module then H_module; layer k of num_layers_per_stack registers one cache per step it
    runs at (L: h x (L_cycles + 1) + l, H: h x (L_cycles + 1) + L_cycles) named
    model.{L,H}_module.layers.{step x num_layers_per_stack + k}.self_attn.attn; KV heads = heads / tp."""
    raw = _registry("HrmTextForCausalLM", H_cycles=2, L_cycles=2, num_layers_per_stack=3)
    m = model_from_dict(raw, name="hrm")
    caches = m.reader.caches(m, Options(tensor_parallel_size=2))
    # L steps 0, 1, 3, 4; H steps 2, 5; three layers a stack
    want = [f"model.L_module.layers.{s * 3 + k}.self_attn.attn" for k in range(3) for s in (0, 1, 3, 4)]
    want += [f"model.H_module.layers.{s * 3 + k}.self_attn.attn" for k in range(3) for s in (2, 5)]
    assert [c.name for c in caches] == want
    assert {(c.num_kv_heads, c.head_size, c.sliding_window) for c in caches} == {
        (raw["num_attention_heads"] // 2, raw["head_dim"], None)
    }


def test_dory_per_loop_caches_and_tp():
    """dory.py: an attention layer of the recurrent range registers n_recurrent_loops caches with
    recurrent_kv_cache_mode 'per_loop' (loop j: backbone.layers.{j x num_hidden_layers + i}.mixer.attn),
    one otherwise; 'mlp' layers none; DoryForCausalLM refuses TP != 1."""
    layer_types = ["sliding_attention", "mlp", "full_attention", "mlp"]
    base = dict(num_hidden_layers=4, layer_types=layer_types, n_input_layers=1, n_output_layers=1)
    m = model_from_dict(_registry("DoryForCausalLM", n_recurrent_layers=2, n_recurrent_loops=3, **base), name="d")
    caches = m.reader.caches(m, Options())
    assert [(c.name, c.sliding_window) for c in caches] == [
        ("backbone.layers.0.mixer.attn", 1024),  # input layer: one cache
        ("backbone.layers.2.mixer.attn", None),  # recurrent layer 2: loops 0, 1, 2
        ("backbone.layers.6.mixer.attn", None),
        ("backbone.layers.10.mixer.attn", None),
    ]
    shared = model_from_dict(
        _registry(
            "DoryForCausalLM", n_recurrent_layers=2, n_recurrent_loops=3, recurrent_kv_cache_mode="shared", **base
        ),
        name="d",
    )
    assert len(shared.reader.caches(shared, Options())) == 2
    with pytest.raises(KvvizError, match="tensor_parallel_size=2"):
        m.reader.caches(m, Options(tensor_parallel_size=2))


def test_beam_and_dory_read_with_vllm_config_defaults():
    """vLLM reads beam and dory with its own config classes (transformers_utils/config.py _CONFIG_REGISTRY),
    not transformers': BeamConfig's head_dim None (BeamAttention: hidden_size // heads) and layer_types all
    sliding; DoryConfig's 72 layers and its layer pattern (mlp at odd layers, full at i % 8 == 6)."""
    beam = model_from_dict({"architectures": ["BeamForCausalLM"], "model_type": "beam"}, name="beam")
    caches = beam.reader.caches(beam, Options())
    assert len(caches) == 24 and {(c.num_kv_heads, c.head_size, c.sliding_window) for c in caches} == {(4, 64, 4096)}
    dory = model_from_dict({"architectures": ["DoryForCausalLM"], "model_type": "dory"}, name="dory")
    caches = dory.reader.caches(dory, Options())
    full = [i for i in range(72) if i % 2 == 0 and i % 8 == 6]
    assert [c.name for c in caches if c.sliding_window is None] == [f"backbone.layers.{i}.mixer.attn" for i in full]
    assert len(caches) == 36 and {c.head_size for c in caches} == {256}


@pytest.mark.parametrize("tp", [1, 8])
def test_sarvam_moe_is_bailing_attention(tp):
    """sarvam.py SarvamMoEForCausalLM subclasses bailing_moe.py BailingMoeForCausalLM: BailingAttention with
    head_dim = config.head_dim or hidden_size // heads, KV heads max(1, num_key_value_heads // tp), named
    model.layers.{i}.attention.attn (BailingMoeBlock: prefix .attention). Not MLA. transformers' default
    SarvamMoeConfig: 19 layers, 64 heads, 4 KV heads, head_dim 64."""
    m = model_from_dict({"architectures": ["SarvamMoEForCausalLM"], "model_type": "sarvam_moe"}, name="sarvam")
    caches = m.reader.caches(m, Options(tensor_parallel_size=tp))
    assert [c.name for c in caches] == [f"model.layers.{i}.attention.attn" for i in range(19)]
    assert {(c.num_kv_heads, c.head_size, c.sliding_window) for c in caches} == {(max(1, 4 // tp), 64, None)}


def test_gemma4_layer_mix_moves_head_sizes_with_kinds():
    """The explorer's full_layers what-if on Gemma 4: a layer made full takes the full layers' head size
    (per_layer_config: global_head_dim 512), one made sliding the sliding layers' (head_dim)."""
    raw = _registry("Gemma4ForCausalLM")
    m = model_from_dict(raw, name="gemma4")
    mixed = m.reader.with_full_layers(m, 10)
    for c in mixed.reader.caches(mixed, Options()):
        assert c.head_size == (512 if c.sliding_window is None else raw["head_dim"])
