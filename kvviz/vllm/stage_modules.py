"""Where vLLM 0.33's model files build the modules outside the decoder layers under pipeline parallel
(docs/deploy.md#the-weights-of-each-pipeline-stage).

`make_layers` (model_executor/models/utils.py) builds only a stage's own decoder layers (`get_pp_indices`); the
token embedding, the final norm and the LM head are each model file's choice: some build them on the first / last
stage only (`get_pp_group().is_first_rank` / `is_last_rank`, `PPMissingLayer` elsewhere), some on every stage.
A tied head (`lm_head.tie_weights(embed_tokens)`) is the embedding's own tensor where both are built; llama.py
builds the embedding on the last stage too when the config ties them (`is_first_rank or (tie_word_embeddings and
is_last_rank)`), so a tied model's first and last stages each hold one vocabulary matrix. Some files never tie
(no `tie_weights` call), one always does (gemma2.py computes its logits with the embedding).

`STAGE_MODULES` holds the rule of each file read, keyed by the file as vLLM 0.33's registry names it
(kvviz/families/vllm_registry.json `file`); a multimodal wrapper whose language model is another file's class
(`init_vllm_registered_model(..., architectures=[...])`) has that file's rule. A file not read here gets
`UNREAD`: every module on every stage (the most any file builds), said in every output.

An architecture whose class does not implement `SupportsPP` is refused at PP > 1 as
`ModelConfig.verify_with_parallel_config` refuses it ("Pipeline parallelism is not supported for this model"):
`supports_pp.json` beside this module lists vLLM 0.33's own verdict for each registered architecture
(scripts/vllm_supports_pp.py: `_ModelInfo.from_model_cls(...).supports_pp`, the registry's own inspection).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
from pathlib import Path

from kvviz.base.errors import require


class Where(enum.Enum):
    """The stages a model file builds a module on."""

    FIRST = "the first stage"
    LAST = "the last"
    EVERY = "every stage"
    FIRST_OR_TIED_LAST = "the first stage (and the last when tied)"  # llama.py LlamaModel.__init__


class Ties(enum.Enum):
    """Whether a model file ties its LM head to the embedding."""

    CONFIG = "tied as the config says"  # lm_head.tie_weights(embed_tokens) when tie_word_embeddings
    NEVER = "never tied"  # no tie_weights call
    ALWAYS = "always the embedding"  # its logits are computed with the embedding


FIRST, LAST, EVERY, FIRST_OR_TIED_LAST = Where.FIRST, Where.LAST, Where.EVERY, Where.FIRST_OR_TIED_LAST
_M = "vllm/model_executor/models/"


@dataclasses.dataclass(frozen=True)
class StageModules:
    """One model file's rule: on which stages it builds the embedding, the final norm and the LM head, whether
    the head ties to the embedding, and where that is read (`source`)."""

    source: str
    embedding: Where
    norm: Where
    head: Where
    ties: Ties = Ties.CONFIG
    read: bool = True  # False: UNREAD, the rule of a file kvviz has not read

    def tied(self, tie_word_embeddings: bool) -> bool:
        """Whether the head is the embedding's tensor, by the file's rule and the config's tie_word_embeddings."""
        return self.ties is Ties.ALWAYS or (self.ties is Ties.CONFIG and tie_word_embeddings)

    def built(self, stage: int, num_stages: int, tie_word_embeddings: bool) -> tuple[bool, bool, bool]:
        """(embedding, final norm, head) built on `stage` of `num_stages`."""
        first, last = stage == 0, stage == num_stages - 1
        tied = self.tied(tie_word_embeddings)

        def on(where: Where) -> bool:
            return where is EVERY or (where is FIRST and first) or (where is LAST and last)

        embedding = on(self.embedding) or (self.embedding is FIRST_OR_TIED_LAST and (first or (tied and last)))
        return embedding, on(self.norm), on(self.head)

    def words(self) -> str:
        """The rule in words, for an output line."""
        return (
            f"embedding on {self.embedding.value}, final norm on {self.norm.value}, LM head on {self.head.value} "
            f"({self.ties.value}) - {self.source}"
        )


def _rule(source: str, embedding: Where, norm: Where, head: Where, ties: Ties = Ties.CONFIG) -> StageModules:
    return StageModules(source, embedding, norm, head, ties)


_LLAMA = _rule(
    "llama.py LlamaModel.__init__ (embed_tokens if is_first_rank or tie_word_embeddings and is_last_rank; norm if "
    "is_last_rank), LlamaForCausalLM.__init__ (lm_head if is_last_rank, tie_weights when tied)",
    FIRST_OR_TIED_LAST,
    LAST,
    LAST,
)
_QWEN2 = dataclasses.replace(
    _LLAMA,
    source="qwen2.py Qwen2Model.__init__ (embed_tokens if is_first_rank or tie_word_embeddings and is_last_rank; "
    "norm if is_last_rank), lm_head if is_last_rank",
)
_EVERY = "builds embed_tokens, the final norm and lm_head unguarded: on every stage"
_GEMMA3 = _rule(f"gemma3.py Gemma3Model, Gemma3ForCausalLM {_EVERY}", EVERY, EVERY, EVERY)
_LLAMA4 = dataclasses.replace(_LLAMA, source="llama4.py Llama4Model(LlamaModel), Llama4ForCausalLM: " + _LLAMA.source)

STAGE_MODULES: dict[str, StageModules] = {
    _M + "llama.py": _LLAMA,
    _M + "mistral.py": dataclasses.replace(_LLAMA, source="mistral.py MistralModel(LlamaModel): " + _LLAMA.source),
    _M + "phi3.py": dataclasses.replace(_LLAMA, source="phi3.py Phi3ForCausalLM(LlamaForCausalLM): " + _LLAMA.source),
    _M + "llama4.py": _LLAMA4,
    _M + "mllama4.py": dataclasses.replace(
        _LLAMA4, source="mllama4.py (language model Llama4ForCausalLM): " + _LLAMA4.source
    ),
    _M + "qwen2.py": _QWEN2,
    _M + "qwen3.py": dataclasses.replace(_QWEN2, source="qwen3.py Qwen3Model(Qwen2Model): " + _QWEN2.source),
    _M + "qwen2_moe.py": _rule(f"qwen2_moe.py Qwen2MoeModel, Qwen2MoeForCausalLM {_EVERY}", EVERY, EVERY, EVERY),
    _M + "qwen3_moe.py": _rule(f"qwen3_moe.py Qwen3MoeModel, Qwen3MoeForCausalLM {_EVERY}", EVERY, EVERY, EVERY),
    _M + "mixtral.py": _rule(f"mixtral.py MixtralModel, MixtralForCausalLM {_EVERY}", EVERY, EVERY, EVERY),
    _M + "gpt_oss.py": _rule(
        f"gpt_oss.py GptOssModel, GptOssForCausalLM {_EVERY}; no tie_weights", EVERY, EVERY, EVERY, Ties.NEVER
    ),
    _M + "deepseek_v2.py": _rule(
        "deepseek_v2.py DeepseekV2Model.__init__ (embed_tokens if is_first_rank, norm if is_last_rank), "
        "DeepseekV2ForCausalLM (lm_head if is_last_rank; no tie_weights)",
        FIRST,
        LAST,
        LAST,
        Ties.NEVER,
    ),
    _M + "glm4_moe.py": _rule(
        "glm4_moe.py Glm4MoeModel (embed_tokens if is_first_rank, norm if is_last_rank), lm_head if is_last_rank; "
        "no tie_weights",
        FIRST,
        LAST,
        LAST,
        Ties.NEVER,
    ),
    _M + "minimax_m2.py": _rule(
        "minimax_m2.py MiniMaxM2Model (embed_tokens if is_first_rank, norm if is_last_rank), lm_head if "
        "is_last_rank; no tie_weights",
        FIRST,
        LAST,
        LAST,
        Ties.NEVER,
    ),
    _M + "gemma2.py": _rule(
        "gemma2.py Gemma2Model builds embed_tokens and norm unguarded; no lm_head: compute_logits uses embed_tokens",
        EVERY,
        EVERY,
        EVERY,
        Ties.ALWAYS,
    ),
    _M + "gemma3.py": _GEMMA3,
    _M + "gemma3_mm.py": dataclasses.replace(
        _GEMMA3, source="gemma3_mm.py (language model Gemma3ForCausalLM): " + _GEMMA3.source
    ),
    _M + "qwen3_next.py": _rule(
        "qwen3_next.py Qwen3NextModel (embed_tokens unguarded, norm if is_last_rank), Qwen3NextForCausalLM "
        "(lm_head unguarded; no tie_weights)",
        EVERY,
        LAST,
        EVERY,
        Ties.NEVER,
    ),
    _M + "qwen3_5.py": _rule(
        "qwen3_5.py Qwen3_5Model (embed_tokens unguarded, norm if is_last_rank), Qwen3_5ForCausalLMBase (lm_head "
        "if is_last_rank, tie_weights when tied)",
        EVERY,
        LAST,
        LAST,
    ),
    _M + "nemotron_h.py": _rule(
        f"nemotron_h.py NemotronHModel, NemotronHForCausalLM {_EVERY}; no tie_weights", EVERY, EVERY, EVERY, Ties.NEVER
    ),
    _M + "jamba.py": _rule(
        f"jamba.py JambaModel, JambaForCausalLM {_EVERY}; no tie_weights", EVERY, EVERY, EVERY, Ties.NEVER
    ),
    _M + "granitemoehybrid.py": _rule(
        f"granitemoehybrid.py GraniteMoeHybridModel, GraniteMoeHybridForCausalLM {_EVERY}", EVERY, EVERY, EVERY
    ),
    _M + "lfm2.py": _rule(
        "lfm2.py Lfm2Model (embed_tokens unguarded, embedding_norm if is_last_rank), Lfm2ForCausalLM (lm_head if "
        "is_last_rank, tie_weights when tied)",
        EVERY,
        LAST,
        LAST,
    ),
    _M + "lfm2_moe.py": _rule(
        "lfm2_moe.py Lfm2MoeModel (embed_tokens unguarded, embedding_norm if is_last_rank), lm_head if is_last_rank",
        EVERY,
        LAST,
        LAST,
    ),
    _M + "falcon_h1.py": _rule(
        "falcon_h1.py FalconH1Model (embed_tokens if is_first_rank, final_layernorm if is_last_rank), lm_head if "
        "is_last_rank",
        FIRST,
        LAST,
        LAST,
    ),
}

UNREAD = StageModules(
    "a model file kvviz has not read: every module counted on every stage (the most any file builds)",
    EVERY,
    EVERY,
    EVERY,
    read=False,
)


def stage_modules(file: str | None) -> StageModules:
    """The rule of vLLM 0.33's model file `file` (its path as the registry names it), UNREAD when not read."""
    return STAGE_MODULES.get(file or "", UNREAD)


@functools.cache
def _no_supports_pp() -> frozenset[str]:
    raw = json.loads((Path(__file__).resolve().parent / "supports_pp.json").read_text())
    return frozenset(raw["no_supports_pp"])


def require_pipelined(model, pipeline_parallel_size) -> None:
    """Refuse PP > 1 for an architecture whose vLLM 0.33 class does not implement SupportsPP, in vLLM's words
    (ModelConfig.verify_with_parallel_config)."""
    require(
        (pipeline_parallel_size or 1) == 1 or model.architecture not in _no_supports_pp(),
        f"pipeline_parallel_size={pipeline_parallel_size}: vLLM 0.33 refuses it for {model.name}: Pipeline "
        f"parallelism is not supported for this model. Supported models implement the `SupportsPP` interface. "
        f"({model.architecture}; ModelConfig.verify_with_parallel_config)",
    )
