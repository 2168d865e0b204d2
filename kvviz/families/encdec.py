"""Encoder-decoder models and visual-prefix decoders of the same model files: each decoder layer
registers a self-attention K|V cache and, where it attends to an encoder, a cross-attention cache
(docs/model-core.md#encoder-decoder-cross-attention).

Rules, each from vLLM 0.33's model file (vllm/model_executor/models/):

* the encoder's own attention registers nothing (WhisperEncoderAttention is an MMEncoderAttention;
  Attention.get_kv_cache_spec returns None for ENCODER / ENCODER_ONLY; the conformer of
  cohere_asr.py is a plain module);
* a decoder layer's self-attention is an `Attention` (FullAttentionSpec) and its cross-attention a
  `CrossAttention` (layers/attention/cross_attention.py: CrossAttentionSpec, the same K|V page);
* heads: num_heads // TP a rank, num_kv_heads = max(1, heads // TP), head_dim = embed_dim // heads
  (whisper.py WhisperAttention, cohere_asr.py CohereASRAttention); Parse 3.5's self-attention takes
  `self_attention_kv_heads` KV heads (nemotron_parse3_5.py NemotronParseSelfAttention, QKVParallelLinear);
* names: the model is built with prefix '' and each file writes f"{prefix}.decoder" (a leading
  dot), make_layers then f"{prefix}.layers" inside the layer (whisper.py WhisperDecoder,
  cohere_asr.py CohereASRDecoder: maybe_prefix gives 'decoder'); nemotron_parse*.py
  MBartDecoderNoPos names its layers f"{prefix}.layers.{i}" directly.
"""

from __future__ import annotations

import dataclasses
import types
from typing import Callable, ClassVar

from kvviz.base.errors import require
from kvviz.base.inputs import MAX_DIM, bounded_int
from kvviz.core.declare import AttentionCache
from kvviz.families.hf import check_tp_heads, derive_max_model_len, kv_heads_per_rank, read_config, resolve_dtype
from kvviz.families.hf_bounds import field
from kvviz.families.record import JSON, TRANSFORMERS, Read, Record
from kvviz.families.registry import Family, Model, model_method, register
from kvviz.options import Options


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class EncDecRecord(Record):
    """An encoder-decoder architecture: where its decoder lives in its config (`sub`: the keys from the top
    config to the decoder's; vLLM's model file reads it there), the decoder's fields (`layers`, `heads`,
    `hidden`, `kv_heads`: a KV-head key of its own, None: KV heads = heads) and what vLLM names its layers
    (`self_name`, `cross_name`: formats of the layer index {i}; None: no cross-attention);
    `text_is_sub`: ModelConfig.hf_text_config is get_text_config(), the `decoder` sub-config where the config has
    one (Nemotron Parse), else the top config (Cohere ASR's transf_decoder is no text config name)."""

    family: ClassVar[str] = "encdec"

    sub: tuple[str, ...]
    layers: str
    heads: str
    hidden: str
    kv_heads: str | None
    self_name: str
    cross_name: str | None
    text_is_sub: bool = True
    refuse: Callable | None = None  # what the model file refuses of the decoder's config


def causal_prefix_only(text, *, name: str) -> None:
    """nemotron_parse3_5.py RadioMBartPrefixForCausalLM.__init__: a causal visual prefix, no cross-attention."""
    require(
        getattr(text, "causal_vision_prefix", False),
        f"{name}: config.decoder.causal_vision_prefix: vLLM refuses unless it is true "
        f"('Parse 3.5 requires a causal visual prefix')",
    )
    require(
        not getattr(text, "add_cross_attention", True),
        f"{name}: config.decoder.add_cross_attention: vLLM refuses unless it is false "
        f"('Parse 3.5 does not support decoder cross-attention')",
    )


# transformers ships WhisperConfig and CohereAsrConfig; Nemotron Parse's configs are custom code (trust_remote_code)
_CUSTOM = Read(how=JSON, cls="the checkpoint's NemotronParseConfig (custom code)")
RECORDS = (
    EncDecRecord(
        name="WhisperForConditionalGeneration",
        vllm="whisper.py WhisperDecoderLayer (self_attn: Attention, encoder_attn: WhisperCrossAttention)",
        sub=(),
        layers="decoder_layers",
        heads="decoder_attention_heads",
        hidden="d_model",
        kv_heads=None,
        self_name=".decoder.layers.{i}.layers.self_attn.attn",
        cross_name=".decoder.layers.{i}.layers.encoder_attn.attn",
    ),
    EncDecRecord(
        name="CohereAsrForConditionalGeneration",
        vllm="cohere_asr.py CohereASRDecoderLayer (first_sub_layer: Attention, second_sub_layer: CrossAttention)",
        sub=("transf_decoder", "config_dict"),
        layers="num_layers",
        heads="num_attention_heads",
        hidden="hidden_size",
        kv_heads=None,
        self_name="decoder.layers.{i}.layers.first_sub_layer.attn",
        cross_name="decoder.layers.{i}.layers.second_sub_layer.attn",
        text_is_sub=False,
    ),
    EncDecRecord(
        name="NemotronParseForConditionalGeneration",
        vllm="nemotron_parse.py MBartDecoderLayer (self_attn: WhisperAttention, encoder_attn: WhisperCrossAttention)",
        sub=("decoder",),
        layers="decoder_layers",
        heads="decoder_attention_heads",
        hidden="d_model",
        kv_heads=None,
        self_name=".decoder.layers.{i}.self_attn.attn",
        cross_name=".decoder.layers.{i}.encoder_attn.attn",
        config=_CUSTOM,
    ),
    EncDecRecord(
        name="RadioMBartPrefixForCausalLM",
        vllm="nemotron_parse3_5.py MBartDecoderLayer (self_attn only: a causal visual prefix, no cross-attention)",
        sub=("decoder",),
        layers="decoder_layers",
        heads="decoder_attention_heads",
        hidden="d_model",
        kv_heads="self_attention_kv_heads",
        self_name=".decoder.layers.{i}.self_attn.attn",
        cross_name=None,
        config=_CUSTOM,
        refuse=causal_prefix_only,
    ),
)


@dataclasses.dataclass(frozen=True)
class EncDecConfig:
    """What the cache sizes depend on: the decoder's layers, heads, KV heads and head size, and the
    layer names of its self- and cross-attention."""

    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    self_name: str
    cross_name: str | None
    source: str
    is_encoder_decoder: bool = False  # the config's (or its decoder config's) is_encoder_decoder


def _ns(value):
    return types.SimpleNamespace(**value) if isinstance(value, dict) else value


def _sub(top, keys: tuple[str, ...], *, name: str):
    """The decoder's config under `keys` (config.decoder, config.transf_decoder.config_dict); one line when absent."""
    text, path = top, "config"
    for k in keys:
        text = text.get(k) if isinstance(text, dict) else getattr(text, k, None)
        path += f".{k}"
        require(isinstance(text, (dict, types.SimpleNamespace)), f"{name}: {path} is missing (the model file reads it)")
    return _ns(text)


class EncDecFamily(Family):
    """Encoder-decoder models (Whisper, Cohere ASR, Nemotron Parse) and Parse 3.5's visual-prefix decoder."""

    key = "encdec"
    title = "encoder-decoder (self- and cross-attention)"
    knobs = (
        "kv_dtype",
        "block_size",
        "max_model_len",
        "max_num_batched_tokens",
        "async_scheduling",
        "tensor_parallel_size",
    )

    def read(self, raw: dict, *, name: str, record: EncDecRecord) -> Model:
        arch = str((raw.get("architectures") or [""])[0])
        reader = record
        if record.config.how == TRANSFORMERS:  # a class transformers ships: its defaults fill what the JSON leaves out
            top, _ = read_config(raw, name=name)
        else:  # custom-code configs (trust_remote_code): the JSON as the model file reads it
            top = types.SimpleNamespace(**{k: v for k, v in raw.items() if isinstance(k, str)})
        text = _sub(top, reader.sub, name=name) if reader.sub else top
        sub = vars(text) if reader.sub else {}
        if isinstance(sub.get("model_type"), str):
            # a decoder config of a model type transformers ships (Nemotron Parse's mbart): read with that class's
            # defaults, as the checkpoint's config code builds it (its is_encoder_decoder, max_position_embeddings)
            text, _ = read_config(dict(sub), name=f"{name}: config.{'.'.join(reader.sub)}")
        where = ".".join(("config",) + reader.sub)
        n = field(text, reader.layers, model=f"{name}: {where}")
        heads = field(text, reader.heads, model=f"{name}: {where}")
        hidden = field(text, reader.hidden, model=f"{name}: {where}")
        kv = heads
        if reader.kv_heads:
            kv = field(text, reader.kv_heads, model=f"{name}: {where}", required=False, default=heads)
        for fname, value in ((reader.layers, n), (reader.heads, heads), (reader.hidden, hidden), ("kv heads", kv)):
            bounded_int(value, field=f"{name}: {where}.{fname}", low=1, high=MAX_DIM)
        require(
            hidden % heads == 0,
            f"{name}: {where}.{reader.hidden}={hidden}: must be divisible by {reader.heads}={heads} (vLLM raises)",
        )
        require(heads % kv == 0, f"{name}: {where}.{reader.kv_heads}={kv}: must divide {reader.heads}={heads}")
        if reader.refuse is not None:  # what the model file refuses of the decoder's config
            reader.refuse(text, name=name)
        hf_text = text if reader.text_is_sub else top  # ModelConfig.hf_text_config
        # transformers_utils/config.py is_encoder_decoder: the config's flag or its text config's
        flag = bool(getattr(top, "is_encoder_decoder", False) or getattr(hf_text, "is_encoder_decoder", False))
        config = EncDecConfig(n, heads, kv, hidden // heads, reader.self_name, reader.cross_name, reader.vllm, flag)
        length, key = derive_max_model_len(hf_text)
        return Model(
            name=name,
            family=self.key,
            architecture=arch,
            model_type=str(raw.get("model_type")),
            dtype=resolve_dtype(top, hf_text, raw, name=name),
            max_model_len=length,
            config=config,
            max_model_len_source=key,
        )

    @model_method
    def caches(self, model: Model, options: Options) -> tuple[AttentionCache, ...]:
        c: EncDecConfig = model.config
        tp = options.tensor_parallel_size or 1
        check_tp_heads(c.num_attention_heads, tp, model=model.name)
        kv = kv_heads_per_rank(c.num_kv_heads, tp, model=model.name)
        dtype = options.kv_dtype or model.dtype
        out = []
        for i in range(c.num_layers):  # registration order: each layer's self-attention, then its cross-attention
            for fmt, cross in ((c.self_name, False), (c.cross_name, True)):
                if fmt is None:
                    continue
                out.append(
                    AttentionCache(
                        name=fmt.format(i=i),
                        layer=i,
                        num_kv_heads=kv,
                        head_size=c.head_dim,
                        head_size_v=c.head_dim,
                        kv_dtype=dtype,
                        cross_attention=cross,
                    )
                )
        return tuple(out)

    @model_method
    def encoder_decoder(self, model: Model) -> bool:
        return model.config.is_encoder_decoder

    @model_method
    def describe(self, model: Model) -> str:
        c: EncDecConfig = model.config
        what = (
            "self- and cross-attention (the encoder's own attention holds no KV cache)"
            if c.cross_name
            else "self-attention (no cross-attention)"
        )
        return (
            f"{model.name} ({model.architecture}): {c.num_layers} decoder layers of {what}; "
            f"{c.num_kv_heads} KV heads x head_dim {c.head_dim}; {model.dtype}; max_model_len {model.max_model_len:,}"
        )


ENCDEC = register(EncDecFamily(), RECORDS)
