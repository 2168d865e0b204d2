"""What a cache holds, and how every view shows it: one style record per cache kind.

`CacheKind` is the one home of a kind's label, text-map glyph, colour, JSON key, the base name of
the groups it forms and whether it is a recurrent state (vLLM's `MambaSpec`) rather than a
per-token page. The text map (`core.layout`), the figures and the live map (`kvviz.views.blockmap_data`) ask
it; none keeps a table of its own.
"""

from __future__ import annotations

import dataclasses
import enum


@dataclasses.dataclass(frozen=True)
class Style:
    """How one kind is shown: `label` in legends, `glyph` in the text map, `color` in figures."""

    label: str
    glyph: str
    color: str
    letter: str  # its row in docs/caches.md (DeepSeek V4's A-E), "" for the other kinds
    group_base: str  # the base name of the groups it forms (vLLM names none; kvviz's own)
    is_state: bool = False  # a recurrent state (MambaSpec): one page per request, not per token


class CacheKind(enum.Enum):
    """Every cache kind kvviz plans: DeepSeek V4's seven (docs/caches.md), the attention kinds of
    vLLM's spec family (full, sliding window, chunked local, MLA, cross-attention) and the recurrent states of
    vLLM's `MambaSpec` by mamba_type (docs/model-core.md#cache-kinds)."""

    # DeepSeek V4 (docs/caches.md#the-caches-a-layer-registers)
    MAIN_C4 = Style("main KV c4", "A", "#1f77b4", "A", "c4")
    MAIN_C128 = Style("main KV c128", "a", "#7fb8e0", "A", "c128")
    INDEXER_K = Style("indexer K", "B", "#ff7f0e", "B", "indexer")
    SWA_KV = Style("sliding-window KV", "C", "#2ca02c", "C", "swa")
    STATE_C4 = Style("compressor state c4", "D", "#9467bd", "D", "c4-state")
    STATE_C128 = Style("compressor state c128", "d", "#c9b3e0", "D", "c128-state")
    INDEXER_STATE = Style("indexer state", "E", "#8c564b", "E", "c4-state")
    CUSTOM = Style("custom", "#", "#17becf", "?", "custom")
    # attention (vLLM FullAttentionSpec, SlidingWindowSpec, ChunkedLocalAttentionSpec, MLAAttentionSpec)
    FULL_ATTENTION = Style("full-attention K|V", "F", "#3a6fb0", "F", "full")
    SLIDING_ATTENTION = Style("sliding-window K|V", "S", "#59a14f", "S", "sliding")
    CHUNKED_ATTENTION = Style("chunked-local K|V", "L", "#e377c2", "L", "chunked")
    MLA = Style("MLA latent|rope", "X", "#4e79a7", "X", "mla")
    # an encoder-decoder's cross-attention K|V of the encoder's tokens (vLLM CrossAttentionSpec)
    CROSS_ATTENTION = Style("cross-attention K|V", "R", "#edc948", "R", "cross")
    # recurrent states (vLLM MambaSpec, by mamba_type)
    MAMBA1_STATE = Style("Mamba-1 conv|SSM state", "m", "#f28e2b", "", "state", True)
    MAMBA2_STATE = Style("Mamba-2 conv|SSM state", "M", "#e15759", "", "state", True)
    SHORT_CONV_STATE = Style("short-conv state", "c", "#76b7b2", "", "state", True)
    GDN_STATE = Style("gated delta net conv|SSM state", "G", "#b07aa1", "", "state", True)
    KDA_STATE = Style("KDA conv|recurrent state", "K", "#9c755f", "", "state", True)
    LINEAR_STATE = Style("linear-attention state", "Y", "#bab0ac", "", "state", True)

    @property
    def style(self) -> Style:
        """The kind's whole style record (label, glyph, colour, JSON key, group base name)."""
        return self.value

    @property
    def label(self) -> str:
        """The kind's name in legends and tables."""
        return self.value.label

    @property
    def letter(self) -> str:
        """The kind's letter in the docs (DeepSeek V4's caches A to E)."""
        return self.value.letter

    @property
    def glyph(self) -> str:
        """The one character the text map draws this kind's bytes with."""
        return self.value.glyph

    @property
    def color(self) -> str:
        """The kind's colour in every figure and the live map."""
        return self.value.color

    @property
    def is_state(self) -> bool:
        """Whether this kind is a recurrent state (vLLM's MambaSpec: one row a block, whatever the block size)."""
        return self.value.is_state

    @property
    def key(self) -> str:
        """The kind as JSON names it: 'full_attention', 'mla', 'mamba2_state', ..."""
        return self.name.lower()


# A mamba_type (vLLM's MambaSpec.mamba_type, as kvviz's families name it) -> its state kind.
STATE_KINDS = {
    "mamba1": CacheKind.MAMBA1_STATE,
    "mamba2": CacheKind.MAMBA2_STATE,
    "short_conv": CacheKind.SHORT_CONV_STATE,
    "gdn": CacheKind.GDN_STATE,
    "kda": CacheKind.KDA_STATE,
    "linear": CacheKind.LINEAR_STATE,
}
