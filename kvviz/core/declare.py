"""What a layer registers, before any engine picks a block size: the family's side of vLLM's
`get_kv_cache_spec` (one call per attention / Mamba layer, vllm/model_executor/models/*.py).

A model family turns a config into a tuple of these, at one tensor-parallel rank; an engine room
(`kvviz.vllm`, ...) picks the block sizes, pads pages and turns each into a `CacheSpec`. Every
byte count comes from the fields here and `kvviz.base.formats`, never typed in.
"""

from __future__ import annotations

import dataclasses
import math

from kvviz.base.formats import ELEMENT_BYTES


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AttentionCache:
    """A K|V attention layer (vLLM AttentionSpec: Full, SlidingWindow, ChunkedLocal or Cross): per token
    num_kv_heads x (head_size + head_size_v) elements of `kv_dtype`."""

    name: str
    layer: int
    num_kv_heads: int  # on one rank (ModelConfig.get_num_kv_heads)
    head_size: int
    head_size_v: int
    kv_dtype: str  # an element name of formats.ELEMENT_BYTES: 'bf16', 'fp16', 'fp32', 'fp8'
    sliding_window: int | None = None
    attention_chunk_size: int | None = None
    # an encoder-decoder's cross-attention layer (layers/attention/cross_attention.py CrossAttention:
    # CrossAttentionSpec, the same K|V page, blocks sized by the encoder's tokens)
    cross_attention: bool = False

    @property
    def token_bytes(self) -> int:
        """Bytes one token takes in this layer: num_kv_heads x (head_size + head_size_v) x element bytes (vLLM 0.33
        AttentionSpec.real_page_size_bytes per token)."""
        return self.num_kv_heads * (self.head_size + self.head_size_v) * ELEMENT_BYTES[self.kv_dtype]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class MLACache:
    """An MLA layer (vLLM MLAAttentionSpec): one latent head of kv_lora_rank + qk_rope_head_dim
    elements per token, the same on every TP rank (MLA is not sharded)."""

    name: str
    layer: int
    kv_lora_rank: int
    qk_rope_head_dim: int
    kv_dtype: str

    @property
    def token_bytes(self) -> int:
        """Bytes one token takes in this MLA layer: (kv_lora_rank + qk_rope_head_dim) x element bytes, one latent
        head (vLLM 0.33 MLAAttentionSpec)."""
        return (self.kv_lora_rank + self.qk_rope_head_dim) * ELEMENT_BYTES[self.kv_dtype]


@dataclasses.dataclass(frozen=True, slots=True)
class StatePart:
    """One tensor of a recurrent state (one of MambaSpec.shapes / dtypes): e.g. the conv state
    (kernel - 1) x conv_dim, or the SSM state heads x head_dim x state."""

    name: str
    shape: tuple[int, ...]
    dtype: str  # an element name of formats.ELEMENT_BYTES

    @property
    def count(self) -> int:
        """Elements in this state tensor (the product of its shape)."""
        return math.prod(self.shape)

    @property
    def num_bytes(self) -> int:
        """Bytes of this state tensor: elements x element bytes (one term of vLLM 0.33 MambaSpec.page_size_bytes)."""
        return self.count * ELEMENT_BYTES[self.dtype]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class MambaCache:
    """A recurrent-state layer (vLLM MambaSpec): one state of `parts` per request, of
    `mamba_type` ('mamba1', 'mamba2', 'short_conv', 'gdn', 'kda', 'linear')."""

    name: str
    layer: int
    mamba_type: str
    parts: tuple[StatePart, ...]
    backend: str = ""  # kvviz.vllm.pages.STATE_BACKENDS key when the layer's spec is not its mamba_type's default

    @property
    def state_bytes(self) -> int:
        """MambaSpec.page_size_bytes before padding: sum of prod(shape) x dtype size."""
        return sum(p.num_bytes for p in self.parts)


Declared = AttentionCache | MLACache | MambaCache
