"""The state-space / linear-attention hybrids kvviz plans (kvviz.families.state): one `StateRecord` per
architecture of vLLM 0.33's registry, each naming its model file (vllm/model_executor/models/<file>.py unless
another path is given) and the reader that turns its config into the caches each layer registers
(kvviz.families.state_mamba, state_delta, state_bailing).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, ClassVar

from kvviz.families import state_bailing as bailing
from kvviz.families import state_delta as delta
from kvviz.families import state_mamba as mamba
from kvviz.families.record import JSON, Read, Record
from kvviz.families.state_config import KIMI_LINEAR_MAX_POSITION_EMBEDDINGS, custom_code_config


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class StateRecord(Record):
    """A hybrid whose layers register recurrent states (vLLM MambaSpec) beside attention or MLA: `reader`
    (raw, top, text, name=) -> StateConfig, its layers in vLLM's registration order; `own` (raw, name=) ->
    (top, text) where vLLM reads the config with a class that is not transformers' (None: as `config` says);
    `max_len_default`: the config class's max_position_embeddings when config.json gives no length."""

    family: ClassVar[str] = "state"

    reader: Callable
    own: Callable | None = None
    max_len_default: int | None = None


S = StateRecord
_KIMI_LINEAR = "transformers_utils/configs/kimi_linear.py KimiLinearConfig"
RECORDS: tuple[StateRecord, ...] = (
    S(name="JambaForCausalLM", vllm="jamba.py JambaForCausalLM", model_types=("jamba",), reader=mamba.jamba),
    # registry.py: ("nemotron_h", "NemotronHForCausalLM") serves the Puzzle architecture too
    S(
        name="NemotronHForCausalLM",
        vllm="nemotron_h.py NemotronHForCausalLM",
        aliases=("NemotronHPuzzleForCausalLM",),
        model_types=("nemotron_h",),
        reader=mamba.nemotron_h,
    ),
    S(
        name="FalconH1ForCausalLM",
        vllm="falcon_h1.py FalconH1ParallelHybrid",
        model_types=("falcon_h1",),
        reader=mamba.falcon_h1,
    ),
    S(
        name="GraniteMoeHybridForCausalLM",
        vllm="granitemoehybrid.py GraniteMoeHybridForCausalLM",
        model_types=("granitemoehybrid",),
        reader=mamba.granite_h,
    ),
    S(name="Zamba2ForCausalLM", vllm="zamba2.py Zamba2Model", model_types=("zamba2",), reader=mamba.zamba2),
    S(name="Lfm2ForCausalLM", vllm="lfm2.py Lfm2ForCausalLM", model_types=("lfm2",), reader=mamba.lfm2),
    S(
        name="Lfm2MoeForCausalLM",
        vllm="lfm2_moe.py Lfm2MoeForCausalLM",
        model_types=("lfm2_moe",),
        reader=mamba.lfm2_moe,
    ),
    # registry.py: ("mamba", "MambaForCausalLM") serves FalconMamba too
    S(
        name="MambaForCausalLM",
        vllm="mamba.py MambaForCausalLM",
        aliases=("FalconMambaForCausalLM",),
        model_types=("mamba", "falcon_mamba"),
        reader=mamba.mamba1,
    ),
    S(name="Mamba2ForCausalLM", vllm="mamba2.py Mamba2ForCausalLM", model_types=("mamba2",), reader=mamba.mamba2),
    S(
        name="Qwen3NextForCausalLM",
        vllm="qwen3_next.py Qwen3NextForCausalLM",
        model_types=("qwen3_next",),
        reader=delta.qwen3_next,
    ),
    S(name="Qwen3_5ForCausalLM", vllm="qwen3_5.py Qwen3_5ForCausalLM", reader=delta.qwen3_5),
    S(name="Qwen3_5MoeForCausalLM", vllm="qwen3_5.py Qwen3_5MoeForCausalLM", reader=delta.qwen3_5),
    S(
        name="Qwen3_5ForConditionalGeneration",
        vllm="qwen3_5.py Qwen3_5ForConditionalGeneration",
        model_types=("qwen3_5",),
        reader=delta.qwen3_5,
    ),
    S(
        name="Qwen3_5MoeForConditionalGeneration",
        vllm="qwen3_5.py Qwen3_5MoeForConditionalGeneration",
        model_types=("qwen3_5_moe",),
        reader=delta.qwen3_5,
    ),
    S(
        name="InternS2PreviewForConditionalGeneration",
        vllm="interns2_preview.py (Qwen3_5MoeForConditionalGeneration)",
        reader=delta.interns2,
        own=delta.interns2_config,
    ),
    S(
        name="InternS2MobiusForConditionalGeneration",
        vllm="interns2_mobius.py InternS2MobiusDecoderLayer",
        reader=delta.interns2,
        own=delta.interns2_config,
    ),
    S(
        name="OlmoHybridForCausalLM",
        vllm="olmo_hybrid.py OlmoHybridForCausalLM",
        model_types=("olmo_hybrid",),
        reader=delta.olmo_hybrid,
    ),
    S(
        name="KimiLinearForCausalLM",
        vllm="models/kimi_k3/nvidia/model.py KimiDecoderLayer",
        model_types=("kimi_linear",),
        reader=delta.kimi_linear,
        config=Read(how=JSON, cls=_KIMI_LINEAR, only=("kimi_linear",)),
        max_len_default=KIMI_LINEAR_MAX_POSITION_EMBEDDINGS,
    ),
    S(
        name="KimiK3ForConditionalGeneration",
        vllm="models/kimi_k3/nvidia/model.py KimiK3ForConditionalGeneration (KimiLinearForCausalLM)",
        reader=delta.kimi_k3,
        own=delta.kimi_k3_config,
        max_len_default=KIMI_LINEAR_MAX_POSITION_EMBEDDINGS,
    ),
    S(
        name="AliceAIForCausalLM",
        vllm="alice_ai.py AliceAIDecoderBlock",
        reader=delta.alice_ai,
        own=custom_code_config,
    ),
    S(
        name="BailingMoeV2_5ForCausalLM",
        vllm="bailing_moe_linear.py BailingMoeV25Model",
        reader=bailing.bailing_v2_5,
        own=custom_code_config,
    ),
    S(
        name="BailingMoeV3ForCausalLM",
        vllm="bailing_moe_v3.py BailingMoeV3DecoderLayer",
        reader=bailing.bailing_v3,
        own=bailing.bailing_v3_config,
    ),
    S(
        name="BailingMoeV3VLForConditionalGeneration",
        vllm="bailing_moe_v3_vl.py (BailingMoeV3ForCausalLM under language_model.)",
        reader=bailing.bailing_v3,
        own=bailing.bailing_v3_config,
    ),
)
