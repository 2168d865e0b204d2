"""The MLA decoders kvviz plans (kvviz.families.mla): one `MLARecord` per architecture of vLLM 0.33's
registry, each naming the model file it mirrors (vllm/model_executor/models/<file>.py unless another path
is given) and what that file does beyond one MLA module a layer.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from kvviz.families.record import JSON, Read, Record


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class MLARecord(Record):
    """An MLA decoder: every layer registers one latent cache per MLA module (`attentions`, each at
    `{prefix}.{i}.{module}.attn`), `layers_key` layers; `dsa`: DeepSeek V3.2's sparse attention (an indexer K
    cache beside each layer's MLA, index_topk required); `always_mla`: the model file builds MLA whatever
    ModelConfig.use_mla says (its model type is not in is_deepseek_mla); `requires`: fields the model file
    needs to build MLA; `v2_layer`: DeepseekV2DecoderLayer, which builds plain attention where a layer has no
    MLA (kvviz.families.deepseek_text)."""

    family: ClassVar[str] = "mla"

    attentions: tuple[str, ...] = ("self_attn",)
    layers_key: str = "num_hidden_layers"
    dsa: bool = False
    always_mla: bool = False
    requires: tuple[str, ...] = ()
    v2_layer: bool = False


M = MLARecord
# longcat_flash.py FlashDecoderLayer: two DeepseekV2MLAAttention a layer, prefixes self_attn.0 / self_attn.1
# (model_arch_config_convertor.py LongCatFlashModelArchConfigConvertor: the layer count is num_layers)
_LONGCAT = dict(attentions=("self_attn.0", "self_attn.1"), layers_key="num_layers")
RECORDS: tuple[MLARecord, ...] = (
    M(
        name="DeepseekV2ForCausalLM",
        vllm="deepseek_v2.py DeepseekV2DecoderLayer, DeepseekV2MLAAttention",
        model_types=("deepseek_v2",),
        v2_layer=True,
        lm_model_type="deepseek_v2",
    ),
    # Kimi-K2's config.json: architectures DeepseekV3ForCausalLM, model_type kimi_k2, which vLLM reads with
    # transformers' DeepseekV3Config (transformers_utils/config.py _CONFIG_REGISTRY kimi_k2="DeepseekV3Config",
    # configs/__init__.py: "DeepseekV3Config" from "transformers")
    M(
        name="DeepseekV3ForCausalLM",
        vllm="deepseek_v2.py DeepseekV3ForCausalLM (DeepseekV2DecoderLayer)",
        model_types=("deepseek_v3", "kimi_k2"),
        v2_layer=True,
        config=Read(cls="transformers' DeepseekV3Config", as_type="deepseek_v3", only=("kimi_k2",)),
    ),
    M(
        name="MistralLarge3ForCausalLM",
        vllm="mistral_large_3.py MistralLarge3ForCausalLM (DeepseekV3ForCausalLM; model_type deepseek_v3)",
    ),
    M(name="AXK1ForCausalLM", vllm="AXK1.py (MultiHeadLatentAttentionWrapper, no indexer)", model_types=("axk1",)),
    M(name="Glm4MoeLiteForCausalLM", vllm="glm4_moe_lite.py (DeepseekV2MLAAttention)", model_types=("glm4_moe_lite",)),
    # openpangu.py OpenPanguDecoderLayer.use_mla: qk_nope_head_dim, qk_rope_head_dim, v_head_dim, kv_lora_rank
    M(
        name="PanguUltraMoEForCausalLM",
        vllm="openpangu.py OpenPanguMLAAttention",
        model_types=("pangu_ultra_moe",),
        requires=("qk_nope_head_dim", "v_head_dim"),
        config=Read(how=JSON, cls="the checkpoint's PanguUltraMoEConfig (custom code)", only=("pangu_ultra_moe",)),
    ),
    M(name="HYV4ForCausalLM", vllm="models/hy_v4/nvidia/attention.py HYV4MLAAttention", model_types=("hy_v4",)),
    # models/deepseek_v32/__init__.py: DeepseekV32ForCausalLM serves every DSA checkpoint (GLM-MoE-DSA too)
    M(
        name="DeepseekV32ForCausalLM",
        vllm="models/deepseek_v32/attention.py DeepseekV32Attention (DSA)",
        model_types=("deepseek_v32",),
        dsa=True,
    ),
    M(
        name="GlmMoeDsaForCausalLM",
        vllm="models/deepseek_v32 DeepseekV32ForCausalLM (DSA)",
        model_types=("glm_moe_dsa",),
        dsa=True,
    ),
    M(
        name="LongcatFlashForCausalLM",
        vllm="longcat_flash.py FlashDecoderLayer",
        model_types=("longcat_flash",),
        **_LONGCAT,
    ),
    # longcat_flash_ngram.py builds the same FlashModel: its n-gram embedding history is model-runner state
    M(name="LongcatFlashNgramForCausalLM", vllm="longcat_flash_ngram.py (longcat_flash.py FlashModel)", **_LONGCAT),
    # sarvam.py SarvamMLAAttention always wraps MultiHeadLatentAttentionWrapper (use_mla False changes nothing
    # MLAAttention.get_kv_cache_spec reads)
    M(
        name="SarvamMLAForCausalLM",
        vllm="sarvam.py SarvamMLAAttention",
        model_types=("sarvam_mla",),
        always_mla=True,
    ),
)
