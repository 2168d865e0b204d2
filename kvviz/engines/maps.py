"""Each engine's pools as byte maps of their own shape: plain data, drawn by kvviz.engines.figure.

* SGLang (MHATokenToKVPool / MLATokenToKVPool / MambaPool, mem_cache/memory_pool.py): one buffer
  per layer (K and V apart), rows of one token (one request slot for states); the first
  page_size rows are the padding slot (`_kv_buffer_shapes`: size + page_size rows; MambaPool:
  size + 1 slots).
* SGLang --enable-unified-memory (mem_cache/unified_memory_pool.py UnifiedKVPool): one buffer;
  the SWA sub-pool grows up from byte 0, the full sub-pool down from the top; a token is one
  entry [K_0 | V_0 | K_1 | V_1 | ...].
* TensorRT-LLM (KVCacheManager::allocatePools, one primary pool per window size): blocks of
  tokens_per_block tokens back to back; a block holds every layer of its window:
  [layer][K|V][tokens_per_block x heads x head_dim] (pool shape numBlocks x numLayers x kvFactor x
  blockSize).
* vLLM 0.33: blocks of the one shared pool (kvviz.vllm draws their inside).
"""

from __future__ import annotations

import dataclasses

from kvviz.base.regions import Region
from kvviz.engines.common import EnginePlan, EnginePool


@dataclasses.dataclass(frozen=True)
class Buffer:
    """One allocation (or one unit of it, `zoom`), its regions in byte order."""

    name: str
    size: int
    regions: tuple[Region, ...]
    zoom: bool = False  # the inside of one unit (a block, an entry), not a whole allocation


@dataclasses.dataclass(frozen=True)
class ByteMap:
    """An engine's pools as buffers of bytes, in the engine's own shape."""

    engine: str
    model: str
    arrangement: str
    buffers: tuple[Buffer, ...]

    @property
    def total_bytes(self) -> int:
        """Bytes of the map's buffers drawn to scale (zoomed buffers left out)."""
        return sum(b.size for b in self.buffers if not b.zoom)


def _layer_buffers(p: EnginePool) -> list[Buffer]:
    """SGLang: `layers` buffers of (reserved + units) rows, the padding rows first."""
    row = p.bytes_per_unit // max(p.layers, 1)
    kind = {"state": "ssm" if "ssm" in p.name or "temporal" in p.name else "conv", "latent": "latent"}.get(
        p.kind, "v" if "v_buffer" in p.name else "k"
    )
    out = []
    for layer in range(max(p.layers, 1)):
        pad = p.reserved_units * row
        regions = ((Region("padding slot", 0, pad, "pad"),) if pad else ()) + (
            Region(f"{p.units:,} {p.unit}s", pad, p.units * row, kind),
        )
        out.append(Buffer(f"{p.name}[{layer}]", pad + p.units * row, regions))
    return out


def _block_buffers(p: EnginePool) -> list[Buffer]:
    """TRT-LLM / vLLM: one pool of blocks, and the inside of one block (per layer K then V)."""
    pool = Buffer(
        p.name,
        p.total_bytes,
        (
            Region(
                f"{p.units:,} {p.unit}s",
                0,
                p.units * p.bytes_per_unit,
                p.kind if p.kind in ("latent", "state") else "kv",
            ),
        ),
    )
    per_layer = p.bytes_per_unit // max(p.layers, 1)
    regions, off = [], 0
    for layer in range(max(p.layers, 1)):
        if p.kind in ("latent", "state"):  # one latent row / one recurrent state per layer, no K|V halves
            regions.append(Region(f"layer {layer} {p.kind}", off, per_layer, p.kind))
        else:
            half = per_layer // 2
            regions += [Region(f"layer {layer} K", off, half, "k"), Region(f"layer {layer} V", off + half, half, "v")]
        off += per_layer
    return [pool, Buffer(f"one block of {p.name}", p.bytes_per_unit, tuple(regions), zoom=True)]


def _unified_buffer(pools: list[EnginePool]) -> list[Buffer]:
    """UnifiedKVPool: the grow-up sub-pool from byte 0, the grow-down one from the top."""
    up, down = pools
    total = up.total_bytes + down.total_bytes
    regions = (
        Region(f"{up.name}: {up.units:,} entries", 0, up.total_bytes, "swa"),
        Region(f"{down.name}: {down.units:,} entries", total - down.total_bytes, down.total_bytes, "full"),
    )
    return [Buffer("unified buffer", total, regions)]


def byte_map(plan: EnginePlan) -> ByteMap:
    """The byte map of an EnginePlan, each pool in its arrangement."""
    buffers: list[Buffer] = []
    unified = [p for p in plan.pools if p.arrangement == "unified"]
    if unified:
        buffers += _unified_buffer(unified)
    for p in plan.pools:
        if p.arrangement == "layer buffers":
            buffers += _layer_buffers(p)
        elif p.arrangement == "blocks":
            blocks = _block_buffers(p)
            buffers += blocks if plan.engine != "vllm" else blocks[:1]  # vLLM's block inside: kvviz.vllm
    arrangement = "unified" if unified else plan.pools[0].arrangement
    return ByteMap(plan.engine, plan.model, arrangement, tuple(buffers))
