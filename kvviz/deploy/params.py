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
# VocabParallelEmbedding / ParallelLMHead pad the vocabulary to a multiple of 64 before splitting it over the TP
# ranks (model_executor/layers/vocab_parallel_embedding.py: DEFAULT_VOCAB_PADDING_SIZE, pad_vocab_size)
VOCAB_PADDING = 64


def padded_vocab(vocab: int) -> int:
    """The rows vLLM 0.33 allocates for a vocabulary of `vocab` tokens (pad_vocab_size(vocab, 64))."""
    return VOCAB_PADDING * -(-vocab // VOCAB_PADDING)


@dataclasses.dataclass(frozen=True)
class ParamCount:
    """The parameters of a model's text part where vLLM 0.33 builds them: `layers` holds each decoder layer's
    (linear, experts, other), its two norms in `other`; outside the layers, the token embedding (padded
    vocabulary x hidden, with `extra_embeddings` beside it: Gemma 3n's per-layer table), the final norm
    (hidden), the LM head (padded vocabulary x hidden; `tied`: the embedding itself) and `top`, a family's other
    top-level modules (linear, experts, other). `how` says how it was counted."""

    layers: tuple[tuple[int, int, int], ...]
    vocab: int
    hidden: int
    tied: bool
    extra_embeddings: int = 0
    top: tuple[int, int, int] = (0, 0, 0)
    how: str = ""

    @property
    def embedding(self) -> int:
        """The token embedding's parameters (VocabParallelEmbedding: padded vocabulary x hidden) and any table
        beside it."""
        return padded_vocab(self.vocab) * self.hidden + self.extra_embeddings

    @property
    def head(self) -> int:
        """The LM head's own matrix (ParallelLMHead: padded vocabulary x hidden); a tied head shares the
        embedding's."""
        return padded_vocab(self.vocab) * self.hidden

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
    """Reads integer fields of one (text) config; a missing one is refused naming `hint`."""

    def __init__(self, cfg: dict, *, model: str, hint: str):
        self.cfg, self.model, self.hint = cfg, model, hint

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


def _gqa(need: Need, h: int) -> tuple[int, int, str]:
    """(linear, other, kind) of one GQA / MHA attention layer (QKVParallelLinear + o_proj)."""
    cfg = need.cfg
    hq = need("num_attention_heads")
    hkv = need.get("num_key_value_heads", hq)
    d = need.get("head_dim") or need.get("attention_head_dim") or h // max(hq, 1)
    gate = 2 if cfg.get("attn_output_gate") or cfg.get("model_type") in ("qwen3_next",) else 1
    linear = h * hq * d * gate + 2 * h * hkv * d + hq * d * h
    other = 0
    if cfg.get("attention_bias") or cfg.get("qkv_bias"):
        other += (hq + 2 * hkv) * d + (h if cfg.get("attention_bias") else 0)
    elif cfg.get("model_type") in ("qwen2", "qwen2_moe"):
        other += (hq + 2 * hkv) * d
    if cfg.get("model_type") == "gpt_oss":
        other += hq  # attention sinks
    return linear, other, "GQA" if hkv != hq else "MHA"


def _mla(need: Need, h: int) -> tuple[int, int, str]:
    """(linear, other, kind) of one MLA layer (deepseek_v2.py DeepseekV2MLAAttention)."""
    hq = need("num_attention_heads")
    rank, rope = need("kv_lora_rank"), need("qk_rope_head_dim")
    nope, v = need("qk_nope_head_dim"), need("v_head_dim")
    q_rank = need.get("q_lora_rank")
    q = h * q_rank + q_rank * hq * (nope + rope) if q_rank else h * hq * (nope + rope)
    linear = q + h * (rank + rope) + rank * hq * (nope + v) + hq * v * h
    return linear, rank + (q_rank or 0), "MLA"


def _experts(cfg: dict) -> int:
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


def _ffn(need: Need, h: int, i: int, n: int) -> tuple[int, int, int, bool]:
    """(linear, experts, other, is_moe) of layer i's feed-forward."""
    cfg = need.cfg
    e = _experts(cfg)
    if not (e and _is_moe(cfg, i, n)):
        inter = need.get("intermediate_size_mlp") or need("intermediate_size")
        return 3 * h * inter, 0, 0, False
    i_moe = need.get("moe_intermediate_size") or need("intermediate_size")
    experts = e * 3 * h * i_moe
    other = h * e  # router
    if cfg.get("model_type") == "gpt_oss":
        experts += e * (2 * i_moe + h)  # expert biases (gate_up_proj_bias, down_proj_bias)
        other += e
    if cfg.get("topk_method") == "noaux_tc":
        other += e  # e_score_correction_bias
    shared = (cfg.get("n_shared_experts") or cfg.get("num_shared_experts") or 0) * 3 * h * i_moe
    if cfg.get("shared_expert_intermediate_size"):
        shared += 3 * h * cfg["shared_expert_intermediate_size"]
        other += h  # shared_expert_gate
    if cfg.get("shared_intermediate_size"):  # granitemoehybrid's shared_mlp
        shared += 3 * h * cfg["shared_intermediate_size"]
    if cfg.get("model_type") == "llama4_text":
        shared += 3 * h * i_moe  # Llama4MoE's shared_expert
    return shared, experts, other, True


def text_config(raw: dict) -> dict:
    """The part of a config.json that describes the language model (its text_config when it has one)."""
    return raw["text_config"] if isinstance(raw.get("text_config"), dict) else raw


def _count(need, raw, n, h, per_layer, kinds, *, extra_embeddings: int = 0, top=(0, 0, 0)) -> ParamCount:
    """The ParamCount of `per_layer` ((linear, experts, other, is_moe) of each layer, before its two norms),
    the embeddings (+ `extra_embeddings`, e.g. Gemma 3n's per-layer table), `top` (other top-level modules), the
    final norm and head, with a line saying how."""
    cfg = need.cfg
    vocab = need("vocab_size")
    tie = bool(cfg.get("tie_word_embeddings", raw.get("tie_word_embeddings", False)))
    layers = tuple((linear, experts, other + 2 * h) for linear, experts, other, _ in per_layer)  # input/post norms
    moe_layers = sum(moe for *_, moe in per_layer)
    count = ParamCount(layers, vocab, h, tie, extra_embeddings, top)
    parts = count.parts
    e = _experts(cfg)
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
    )
    return dataclasses.replace(count, how=how)


def decoder_count(raw: dict, *, model: str = "model", hint: str = "") -> ParamCount:
    """The ParamCount of a dense, MoE or MLA decoder: attention + MLP (gated 3 h I; MoE: every routed
    and shared expert and the router) + norms per layer, + embeddings (+ lm_head unless tied)."""
    cfg = text_config(raw)
    need = Need(cfg, model=model, hint=hint)
    h, n = need("hidden_size"), need("num_hidden_layers")
    if cfg.get("model_type") == "gemma3n_text":
        return _gemma3n_count(need, raw, n=n, h=h)
    attn_linear, attn_other, kind = _mla(need, h) if cfg.get("kv_lora_rank") else _gqa(need, h)
    if cfg.get("model_type") in ("qwen3", "qwen3_moe", "gemma3_text", "gemma3"):
        attn_other += 2 * (need.get("head_dim") or h // need("num_attention_heads"))  # q_norm, k_norm
    layers = []
    for i in range(n):
        linear, experts, other, moe = _ffn(need, h, i, n)
        layers.append((attn_linear + linear, experts, attn_other + other, moe))
    return _count(need, raw, n, h, layers, [kind])


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
        layers.append((linear, 0, other, False))
    top = (h * n * ple + 2 * (k - 1) * h * h, 0, ple)  # per_layer_model_projection, altup (un)embed, its norm
    extra = need("vocab_size_per_layer_input") * n * ple  # embed_tokens_per_layer
    kinds = ["GQA" if hkv != hq else "MHA", f"(per-layer embeddings {extra:,}; vision and audio towers not counted)"]
    return _count(need, raw, n, h, layers, kinds, extra_embeddings=extra, top=top)


def _state_mixer(need: Need, h: int, mamba_type: str, args: dict) -> tuple[int, int]:
    """(linear, other) of one state mixer, from the shape arguments the model's cache spec reads."""
    k = args.get("conv_kernel", 4)
    if mamba_type == "mamba1":  # mamba_mixer.py MambaMixer
        d, n_state = args["intermediate_size"], args["state_size"]
        dt_rank = need.get("mamba_dt_rank") or -(-h // 16)
        linear = h * 2 * d + d * (dt_rank + 2 * n_state) + dt_rank * d + d * h
        return linear, d * k + d + d + d * n_state + d
    if mamba_type == "mamba2":  # mamba_mixer2.py MambaMixer2
        d, g, heads, n_state = args["intermediate_size"], args["n_groups"], args["num_heads"], args["state_size"]
        conv = d + 2 * g * n_state
        return h * (2 * d + 2 * g * n_state + heads) + d * h, conv * k + conv + 3 * heads + d
    if mamba_type == "gdn":  # qwen3_next.py Qwen3NextGatedDeltaNet
        key = args["num_k_heads"] * args["head_k_dim"]
        val = args["num_v_heads"] * args["head_v_dim"]
        nv = args["num_v_heads"]
        return h * (2 * key + 2 * val) + h * 2 * nv + val * h, (2 * key + val) * k + 2 * nv + args["head_v_dim"]
    if mamba_type == "short_conv":  # short_conv.py ShortConv
        c = args["conv_dim"]
        return h * 3 * c + c * h, c * k
    if mamba_type == "kda":  # kimi_linear.py KimiDeltaAttention
        heads, d = args["num_heads"], args["head_dim"]
        hd = heads * d
        linear = 3 * h * hd + 2 * (h * d + d * hd) + h * heads + hd * h
        return linear, 3 * hd * k + heads + hd + d
    raise KvvizError(f"weights_bytes: kvviz does not size a {mamba_type} mixer; {need.hint}")


def _lfm2_ff(need: Need) -> int:
    """lfm2.py Lfm2MLP: block_ff_dim, 2/3 of it when auto-adjusted, times the multiplier, rounded up."""
    ff = need("block_ff_dim", need.cfg.get("intermediate_size"))
    if need.cfg.get("block_auto_adjust_ff_dim"):
        ff = int(2 * ff / 3)
        mult = need.cfg.get("block_ffn_dim_multiplier")
        if isinstance(mult, (int, float)) and mult:
            ff = int(mult * ff)
        step = need("block_multiple_of", 256)
        ff = step * -(-ff // step)
    return ff


def state_count(model, raw: dict, *, hint: str = "") -> ParamCount:
    """The ParamCount of a state-space / linear-attention hybrid: its state mixers (from the model's
    parsed StateConfig: which layers hold them and their shape arguments), its attention layers
    (GQA or MLA) and each layer's feed-forward by the family's rule."""
    cfg = text_config(raw)
    c = model.config
    need = Need(cfg, model=model.name, hint=hint)
    h, n = need("hidden_size"), c.num_hidden_layers
    args = dict(c.state_args)
    mixer = _state_mixer(need, h, c.mamba_type, args)
    attn = _mla(need, h) if c.kv_lora_rank else _gqa(need, h)
    by_layer: dict[int, list[str]] = {}
    for slot in c.slots:
        by_layer.setdefault(slot.layer, []).append(slot.kind)
    mt = cfg.get("model_type")
    pattern = cfg.get("hybrid_override_pattern") if mt == "nemotron_h" else None
    layers = []
    for i in range(n):
        linear = other = experts = 0
        moe = False
        for kind in by_layer.get(i, ()):
            if mt == "zamba2" and kind != "state":
                continue  # a shared block, counted once below
            lin, oth = mixer if kind == "state" else attn[:2]
            linear, other = linear + lin, other + oth
        if pattern is not None:  # nemotron_h: one block per layer: M, *, - (relu2 MLP: up + down) or E
            ch = pattern[i] if i < len(pattern) else "M"
            if ch == "-":
                linear += 2 * h * need("intermediate_size")
            elif ch == "E":
                lin, experts, oth, moe = _ffn(need, h, i, n)
                linear, other = linear + lin, other + oth
        elif mt == "lfm2":
            linear += 3 * h * _lfm2_ff(need)
        elif mt == "zamba2":
            pass  # the shared blocks are counted once below
        else:
            lin, experts, oth, moe = _ffn(need, h, i, n)
            linear, other = linear + lin, other + oth
        layers.append((linear, experts, other, moe))
    kinds = [f"{c.mamba_type} hybrid", attn[2]]
    top = (0, 0, 0)
    if mt == "zamba2":  # Zamba2: num_mem_blocks shared blocks (attention on [h, embeddings] = 2h, gated MLP)
        blocks = need("num_mem_blocks", 1)
        a = 2 * h
        shared = a * a * 3 + a * h + 3 * h * need("ffn_hidden_size")
        hybrid_layers = sum(1 for slot in c.slots if slot.kind != "state")
        top = (blocks * shared + hybrid_layers * h * h, 0, 0)
        kinds.append(f"({blocks} shared blocks, LoRA adapters not counted)")
    return _count(need, raw, n, h, layers, kinds, top=top)
