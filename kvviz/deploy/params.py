"""The parameters a config.json implies, in the parts a checkpoint's quantization treats apart
(kvviz.deploy.quantized): `embeddings` (input embeddings and lm_head), `linear` (attention, dense
MLP, shared experts and state-mixer projections), `experts` (routed experts) and `other` (norms,
biases, routers, convolutions, A/D/dt vectors: kept in the model dtype).

Each count follows the layer shapes of vLLM 0.33's model for the family (model_executor/models/):
GQA / MLA attention (llama.py, deepseek_v2.py), gated MLPs and MoE (FusedMoE: w13 = 2 x I x h,
w2 = h x I per expert), and the state mixers of the hybrids (mamba_mixer.py, mamba_mixer2.py,
qwen3_next.py's GatedDeltaNet, short_conv.py, kimi_linear.py's KDA). MTP layers are left out (vLLM
loads them only with MTP speculative decoding); vision towers are left out (named in `how`).

A count is a `ParamCount`: each decoder layer's parts (its two norms included) and the modules outside the
layers (the token embedding, the final norm, the LM head, a family's other top-level modules), so a pipeline
stage's share is its own layers plus what its model file builds there (kvviz.deploy.stage_weights).
"""

from __future__ import annotations

import dataclasses

from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import short_repr

PARTS = ("embeddings", "linear", "experts", "other")
LAYER_PARTS = ("linear", "experts", "other")  # what a decoder layer holds (no embedding)
# the model types whose attention normalizes q and k per head (qwen3.py, qwen3_moe.py, gemma3.py Qwen3Attention /
# Gemma3Attention, qwen3_next.py Qwen3NextAttention and qwen3_5.py's, which is it; lfm2.py / lfm2_moe.py
# q_layernorm, k_layernorm)
QK_NORMS = (
    "qwen3",
    "qwen3_moe",
    "gemma3_text",
    "gemma3",
    "qwen3_next",
    "qwen3_5_text",
    "qwen3_5_moe_text",
    "lfm2",
    "lfm2_moe",
)
# VocabParallelEmbedding / ParallelLMHead pad the vocabulary to a multiple of 64 before splitting it over the TP
# ranks (model_executor/layers/vocab_parallel_embedding.py: DEFAULT_VOCAB_PADDING_SIZE, pad_vocab_size)
VOCAB_PADDING = 64


def padded_vocab(vocab: int) -> int:
    """The rows vLLM 0.33 allocates for a vocabulary of `vocab` tokens (pad_vocab_size(vocab, 64))."""
    return VOCAB_PADDING * -(-vocab // VOCAB_PADDING)


@dataclasses.dataclass(frozen=True)
class ParamCount:
    """The parameters of a model's text part on one tensor-parallel rank (of `tp`; 1: the whole model) where
    vLLM 0.33 builds them: `layers` holds each decoder layer's (linear, experts, other), its two norms in
    `other`; outside the layers, the token embedding (padded vocabulary / TP x hidden, with `extra_embeddings`
    beside it: Gemma 3n's per-layer table, its whole size), the final norm (hidden, whole on every rank), the LM
    head (padded vocabulary / TP x hidden; `tied`: the embedding itself) and `top`, a family's other top-level
    modules (linear, experts, other). `how` says how it was counted."""

    layers: tuple[tuple[int, int, int], ...]
    vocab: int
    hidden: int
    tied: bool
    extra_embeddings: int = 0
    top: tuple[int, int, int] = (0, 0, 0)
    how: str = ""
    tp: int = 1

    @property
    def embedding(self) -> int:
        """The token embedding's parameters on one rank (VocabParallelEmbedding: padded vocabulary / TP x
        hidden) and any table beside it (a VocabParallelEmbedding too)."""
        return (padded_vocab(self.vocab) * self.hidden + self.extra_embeddings) // self.tp

    @property
    def head(self) -> int:
        """The LM head's own matrix on one rank (ParallelLMHead: padded vocabulary / TP x hidden); a tied head
        shares the embedding's."""
        return padded_vocab(self.vocab) * self.hidden // self.tp

    def stage_parts(
        self, start: int, end: int, *, embedding: bool, norm: bool, head: bool, tied: bool | None = None
    ) -> dict[str, int]:
        """The parts of layers [start, end) and of the modules outside the layers a stage builds: the
        embedding, the final norm, the head (tied, and the embedding built on the same stage: nothing more; a
        tied head without the embedding there is its own matrix) and `top` with the embedding."""
        tied = self.tied if tied is None else tied
        out = dict.fromkeys(PARTS, 0)
        for layer in self.layers[start:end]:
            for part, count in zip(LAYER_PARTS, layer):
                out[part] += count
        out["embeddings"] = (self.embedding if embedding else 0) + (
            self.head if head and not (tied and embedding) else 0
        )
        if embedding:
            for part, count in zip(LAYER_PARTS, self.top):
                out[part] += count
        out["other"] += self.hidden if norm else 0
        return out

    @property
    def parts(self) -> dict[str, int]:
        """The whole model's parts: every layer, the embedding, the final norm and the head (one stage)."""
        return self.stage_parts(0, len(self.layers), embedding=True, norm=True, head=True)


class Need:
    """Reads integer fields of one (text) config; a missing one is refused naming `hint`. `tp` is the tensor-
    parallel size the count is of one rank of."""

    def __init__(self, cfg: dict, *, model: str, hint: str, tp: int = 1):
        self.cfg, self.model, self.hint, self.tp = cfg, model, hint, tp

    def __call__(self, key: str, default=None) -> int:
        value = self.cfg.get(key, default)
        if value is None:
            raise KvvizError(
                f"weights_bytes: {self.model}'s config has no {key!r} to estimate the weights from; {self.hint}"
            )
        require(
            type(value) is int and 0 <= value <= 1 << 40,
            f"weights_bytes: {self.model}: {key}={short_repr(value)} must be a non-negative integer; {self.hint}",
        )
        return value

    def get(self, key: str, default=None):
        """The field when present (checked as __call__ does), else `default`."""
        return self(key) if self.cfg.get(key) is not None else default


def gqa(need: Need, h: int) -> tuple[int, int, str]:
    """(linear, other, kind) of one GQA / MHA attention layer on one TP rank (llama.py LlamaAttention):
    QKVParallelLinear holds hq / TP query heads and max(1, hkv // TP) KV heads (a KV head replicated on TP / hkv
    ranks once TP exceeds them) and their biases; o_proj (RowParallelLinear) hq / TP heads' columns and its whole
    bias; gpt-oss's sinks hq / TP."""
    cfg = need.cfg
    hq = need("num_attention_heads")
    hkv = need.get("num_key_value_heads", hq)
    d = need.get("head_dim") or need.get("attention_head_dim") or h // max(hq, 1)
    q, kv = hq // need.tp, max(1, hkv // need.tp)
    gate = 2 if cfg.get("attn_output_gate") or cfg.get("model_type") in ("qwen3_next",) else 1
    linear = h * q * d * gate + 2 * h * kv * d + q * d * h
    other = 0
    if cfg.get("attention_bias") or cfg.get("qkv_bias"):
        other += (q + 2 * kv) * d + (h if cfg.get("attention_bias") else 0)
    elif cfg.get("model_type") in ("qwen2", "qwen2_moe"):
        other += (q + 2 * kv) * d
    if cfg.get("model_type") == "gpt_oss":
        other += q  # attention sinks
    if cfg.get("model_type") in QK_NORMS:
        other += 2 * d  # q_norm, k_norm (RMSNorm of head_dim, whole on every rank)
    return linear, other, "GQA" if hkv != hq else "MHA"


def mla(need: Need, h: int) -> tuple[int, int, str]:
    """(linear, other, kind) of one MLA layer on one TP rank (deepseek_v2.py DeepseekV2MLAAttention): the
    latent down-projections (fused_qkv_a_proj / kv_a_proj_with_mqa, ReplicatedLinear) and their norms whole on
    every rank; q_b_proj / q_proj, kv_b_proj (ColumnParallelLinear) and o_proj (RowParallelLinear) / TP."""
    hq = need("num_attention_heads") // need.tp
    rank, rope = need("kv_lora_rank"), need("qk_rope_head_dim")
    nope, v = need("qk_nope_head_dim"), need("v_head_dim")
    q_rank = need.get("q_lora_rank")
    q = h * q_rank + q_rank * hq * (nope + rope) if q_rank else h * hq * (nope + rope)
    linear = q + h * (rank + rope) + rank * hq * (nope + v) + hq * v * h
    return linear, rank + (q_rank or 0), "MLA"


def routed_experts(cfg: dict) -> int:
    """The routed experts a config names (n_routed_experts, num_experts or num_local_experts; 0: a dense model)."""
    return next(
        (cfg[k] for k in ("n_routed_experts", "num_experts", "num_local_experts") if type(cfg.get(k)) is int), 0
    )


def _is_moe(cfg: dict, i: int, n: int) -> bool:
    """Whether decoder layer i holds the routed experts, by the family's own layer rule."""
    if cfg.get("model_type") == "jamba":
        return i % (cfg.get("expert_layer_period") or 1) == (cfg.get("expert_layer_offset") or 0)
    if cfg.get("model_type") == "step3p5" and isinstance(cfg.get("mlp_layer_types"), list):  # step3p5.py _is_moe_layer
        return i < len(cfg["mlp_layer_types"]) and cfg["mlp_layer_types"][i] == "sparse"
    if isinstance(cfg.get("moe_layer_freq"), list):  # mimo_v2.py MiMoV2FlashDecoderLayer.is_moe_layer
        return i < len(cfg["moe_layer_freq"]) and bool(cfg["moe_layer_freq"][i])
    if isinstance(cfg.get("moe_layers_enum"), str):  # step3_text.py Step3TextDecoderLayer, step3p5.py
        return str(i) in {x.strip() for x in cfg["moe_layers_enum"].split(",")}
    first = cfg.get("first_k_dense_replace") or 0
    step = cfg.get("decoder_sparse_step") or cfg.get("interleave_moe_layer_step") or 1
    freq = cfg.get("moe_layer_freq") or 1
    only_dense = set(cfg.get("mlp_only_layers") or ())
    return i >= first and i not in only_dense and (i + 1) % step == 0 and (i - first) % freq == 0


def ffn(need: Need, h: int, i: int, n: int) -> tuple[int, int, int, bool]:
    """(linear, experts, other, is_moe) of layer i's feed-forward on one TP rank: gated MLPs and shared experts
    (MergedColumnParallelLinear + RowParallelLinear) and the routed experts' intermediate size / TP (FusedMoE:
    w13 E x 2 I/TP x h, w2 E x h x I/TP; gpt-oss's w2 bias E x h whole); the router (ReplicatedLinear), its
    bias, e_score_correction_bias and shared_expert_gate whole on every rank."""
    cfg, tp = need.cfg, need.tp
    e = routed_experts(cfg)
    if not (e and _is_moe(cfg, i, n)):
        inter = need.get("intermediate_size_mlp") or need("intermediate_size")
        return 3 * h * (inter // tp), 0, 0, False
    i_moe = need.get("moe_intermediate_size") or need("intermediate_size")
    experts = e * 3 * h * (i_moe // tp)
    other = h * e  # router
    if cfg.get("model_type") == "gpt_oss":
        experts += e * (2 * (i_moe // tp) + h)  # expert biases (w13_bias sharded, w2_bias whole)
        other += e
    if cfg.get("topk_method") == "noaux_tc":
        other += e  # e_score_correction_bias
    shared = (cfg.get("n_shared_experts") or cfg.get("num_shared_experts") or 0) * 3 * h * (i_moe // tp)
    if cfg.get("shared_expert_intermediate_size"):
        shared += 3 * h * (cfg["shared_expert_intermediate_size"] // tp)
        other += h  # shared_expert_gate
    if cfg.get("shared_intermediate_size"):  # granitemoehybrid's shared_mlp
        shared += 3 * h * (cfg["shared_intermediate_size"] // tp)
    if cfg.get("model_type") == "llama4_text":
        shared += 3 * h * (i_moe // tp)  # Llama4MoE's shared_expert
    return shared, experts, other, True


def text_config(raw: dict) -> dict:
    """The part of a config.json that describes the language model (its text_config when it has one)."""
    return raw["text_config"] if isinstance(raw.get("text_config"), dict) else raw


def count_from_layers(
    need, raw, n, h, per_layer, kinds, *, extra_embeddings: int = 0, top=(0, 0, 0), norms: int = 2
) -> ParamCount:
    """The ParamCount of `per_layer` ((linear, experts, other, is_moe) of each layer, before its `norms` RMSNorms
    of `h`: input and post-attention, or one for a single-mixer block), the embeddings (+ `extra_embeddings`, e.g.
    Gemma 3n's per-layer table), `top` (other top-level modules), the final norm and head, with a line saying
    how."""
    cfg = need.cfg
    vocab = need("vocab_size")
    tie = bool(cfg.get("tie_word_embeddings", raw.get("tie_word_embeddings", False)))
    layers = tuple((linear, experts, other + norms * h) for linear, experts, other, _ in per_layer)
    moe_layers = sum(moe for *_, moe in per_layer)
    count = ParamCount(layers, vocab, h, tie, extra_embeddings, top, tp=need.tp)
    parts = count.parts
    e = routed_experts(cfg)
    if e:
        kinds.append(f"MoE ({e} experts, {moe_layers} MoE layers)")
    elif "dense" not in kinds:
        kinds.append("dense")
    total = sum(parts.values())
    vision = " (vision tower not counted)" if isinstance(raw.get("vision_config"), dict) else ""
    how = (
        f"{' '.join(kinds)}: {n} layers: linear {parts['linear']:,} + routed experts {parts['experts']:,} + "
        f"norms, biases, routers {parts['other']:,} + embeddings {parts['embeddings']:,}"
        f"{' (tied)' if tie else ' (+ lm_head)'} = {total:,} parameters{vision}"
        + (f" on one of {need.tp} TP ranks" if need.tp > 1 else "")
    )
    return dataclasses.replace(count, how=how)


def decoder_count(raw: dict, *, model: str = "model", hint: str = "", tp: int = 1) -> ParamCount:
    """The ParamCount of a dense, MoE or MLA decoder on one of `tp` ranks: attention + MLP (gated 3 h I; MoE:
    every routed and shared expert and the router) + norms per layer, + embeddings (+ lm_head unless tied)."""
    cfg = text_config(raw)
    need = Need(cfg, model=model, hint=hint, tp=tp)
    h, n = need("hidden_size"), need("num_hidden_layers")
    if cfg.get("model_type") == "gemma3n_text":
        return _gemma3n_count(need, raw, n=n, h=h)
    attn_linear, attn_other, kind = mla(need, h) if cfg.get("kv_lora_rank") else gqa(need, h)
    layers = []
    for i in range(n):
        linear, experts, other, moe = ffn(need, h, i, n)
        layers.append((attn_linear + linear, experts, attn_other + other, moe))
    return count_from_layers(need, raw, n, h, layers, [kind])


def _gemma3n_count(need: Need, raw: dict, h: int, n: int) -> ParamCount:
    """Gemma 3n's text model as vLLM 0.33 builds it (models/gemma3n.py): per layer Gemma3nAttention
    (the last num_kv_shared_layers layers hold only q_proj, no k_norm), Gemma3nMLP at that layer's
    intermediate_size[i], Gemma3nLaurelBlock, Gemma3nAltUp, per_layer_input_gate / per_layer_projection
    and five RMSNorms; once: embed_tokens_per_layer (its per-layer embedding table),
    per_layer_model_projection and the altup (un)embed projections (Gemma3nSelfDecoder, Gemma3nTextModel)."""
    inter = need.cfg.get("intermediate_size")
    sizes = inter if isinstance(inter, list) else [need("intermediate_size")] * n
    require(
        len(sizes) == n and all(type(x) is int and 0 < x <= 1 << 40 for x in sizes),
        f"weights_bytes: {need.model}: intermediate_size={short_repr(inter)} must be one positive integer or one "
        f"per layer ({n}); {need.hint}",
    )
    hq, d = need("num_attention_heads"), need("head_dim")
    hkv = need.get("num_key_value_heads", hq)
    ple, k, r = need("hidden_size_per_layer_input"), need("altup_num_inputs"), need("laurel_rank")
    first_shared = n - need.get("num_kv_shared_layers", 0)
    layers = []
    for i in range(n):
        own_kv = i < first_shared
        attn = h * (hq + 2 * hkv) * d if own_kv else h * hq * d
        linear = attn + hq * d * h + 3 * h * sizes[i] + 2 * h * r + k * k + k**3 + h * k + 2 * h * ple
        other = d + (d if own_kv else 0) + h + 2 * h + 3 * h  # q/k_norm, laurel and altup norms, 3 more norms
        layers.append((linear // need.tp, 0, other, False))  # TP > 1: every projection / TP (not read rank by rank)
    top = ((h * n * ple + 2 * (k - 1) * h * h) // need.tp, 0, ple)  # per_layer_model_projection, altup, its norm
    extra = need("vocab_size_per_layer_input") * n * ple  # embed_tokens_per_layer
    kinds = ["GQA" if hkv != hq else "MHA", f"(per-layer embeddings {extra:,}; vision and audio towers not counted)"]
    return count_from_layers(need, raw, n, h, layers, kinds, extra_embeddings=extra, top=top)
