"""vLLM 0.33's native CPU offload (`--kv-offloading-size GiB`) beside the GPU pool (docs/deploy.md#cpu-offload).

The arithmetic, each step from vLLM 0.33's source:

* config/vllm.py `_post_init_kv_transfer_config`: cpu_bytes_to_use = GiB x 2^30 (all ranks together);
* distributed/kv_transfer/kv_connector/v1/offloading/config.py `build_offloading_config`: every
  prefix-cacheable group is offloaded, its chunk covering `resolve_dcp_kv_block_size` tokens x
  blocks_per_chunk (1); worker_kv_bytes_per_block = the pool's bytes per block (tensor size // num_blocks);
  `replicated_layout` for a pure-MLA model at TP > 1 with no other parallel axis;
  `get_sliding_window_size_in_chunks`: a window's chunks, a chunked-local chunk's, one for a Mamba state;
* v1/kv_offload/cpu/spec.py `CPUOffloadingSpec.__init__`: bytes per chunk = worker bytes per block x copies
  (world size, or 1 replicated) x blocks_per_chunk, rounded up to BLOCK_SIZE_ALIGNMENT (4,096, mmap's
  page); num_chunks = cpu_bytes_to_use // that;
* with pipeline parallel: the scheduler's KVCacheConfig is the first worker's (stage 0's bytes per block), the
  copies TP x PP;
* the scheduler's store loop (offloading/scheduler.py, offload_prompt_only): one key per (block hash, group),
  each a whole chunk of the largest group's bytes: a full group every whole prompt chunk, a window group the
  window's chunks, a Mamba group one state. So a hybrid holds fewer host tokens than host bytes / bytes per
  token (vLLM #56871).
"""

from __future__ import annotations

import dataclasses

from kvviz.base.defaults import GIB
from kvviz.base.errors import require
from kvviz.base.inputs import of_type, short_repr
from kvviz.base.regions import cdiv
from kvviz.core.plan import Plan
from kvviz.options import Options

BLOCK_SIZE_ALIGNMENT = 4096  # v1/kv_offload/cpu/spec.py CPUOffloadingSpec.BLOCK_SIZE_ALIGNMENT (mmap.PAGESIZE)
BLOCKS_PER_CHUNK = 1  # build_offloading_config's default (no blocks_per_chunk / block_size extra config)


@dataclasses.dataclass(frozen=True)
class OffloadGroup:
    """One offloaded group: tokens a chunk covers, the chunks the tier keeps for one request
    (`sliding_window_size_in_chunks`; None: a full group, unbounded) and the chunks one max-length prompt stores."""

    name: str
    spec_class: str
    tokens_per_chunk: int
    window_chunks: int | None
    chunks_per_prompt: int

    def to_json(self) -> dict:
        """The group's offload numbers as a JSON object."""
        return {
            "name": self.name,
            "spec_class": self.spec_class,
            "tokens_per_chunk": self.tokens_per_chunk,
            "sliding_window_size_in_chunks": self.window_chunks,
            "chunks_per_prompt": self.chunks_per_prompt,
        }


@dataclasses.dataclass(frozen=True)
class Offload:
    """The host tier's numbers: bytes, copies, bytes per chunk, num_chunks, and what prompts of `prompt_len`
    tokens store in it, group by group."""

    cpu_bytes: int
    world_size: int
    copies: int
    worker_bytes_per_block: int
    bytes_per_chunk: int
    num_chunks: int
    prompt_len: int
    groups: tuple[OffloadGroup, ...]

    @property
    def slots_per_prompt(self) -> int:
        """Chunks one prompt of prompt_len tokens takes, over every group (one key per (hash, group))."""
        return sum(g.chunks_per_prompt for g in self.groups)

    @property
    def prompts_held(self) -> int:
        """Whole prompts of prompt_len tokens the host tier holds (num_chunks // slots)."""
        return self.num_chunks // self.slots_per_prompt if self.slots_per_prompt else 0

    @property
    def tokens_held(self) -> int:
        """Prompt tokens the host tier holds in every group at once (num_chunks x prompt_len // slots)."""
        return self.num_chunks * self.prompt_len // self.slots_per_prompt if self.slots_per_prompt else 0

    def line(self) -> str:
        """One line beside vLLM's GPU capacity line."""
        return (
            f"CPU offload: {self.cpu_bytes / GIB:g} GiB host = {self.num_chunks:,} chunks of "
            f"{self.bytes_per_chunk:,} B; a {self.prompt_len:,}-token prompt stores {self.slots_per_prompt:,} "
            f"chunks over {len(self.groups)} group(s): {self.prompts_held:,} prompts, {self.tokens_held:,} prompt "
            f"tokens held"
        )

    def to_json(self) -> dict:
        """`--json`'s `offload`: the spec's arithmetic and what prompts store, group by group."""
        return {
            "cpu_bytes_to_use": self.cpu_bytes,
            "world_size": self.world_size,
            "copies": self.copies,
            "worker_kv_bytes_per_block": self.worker_bytes_per_block,
            "blocks_per_chunk": BLOCKS_PER_CHUNK,
            "kv_bytes_per_chunk": self.bytes_per_chunk,
            "num_chunks": self.num_chunks,
            "prompt_len": self.prompt_len,
            "chunk_slots_per_prompt": self.slots_per_prompt,
            "prompts_held": self.prompts_held,
            "prompt_tokens_held_per_group": self.tokens_held,
            "groups": [g.to_json() for g in self.groups],
            "line": self.line(),
        }


def _window_chunks(cache, tokens_per_chunk: int) -> int | None:
    """`get_sliding_window_size_in_chunks` (offloading/config.py) with extra_retained_tokens 0 (no MTP draft)."""
    if cache.kind.is_state:
        return 1
    if cache.attention_chunk_size is not None:
        return cdiv(cache.attention_chunk_size, tokens_per_chunk)
    if cache.sliding_window is not None:
        w = cache.sliding_window
        return max(cdiv(w, tokens_per_chunk), cdiv(w - 1, tokens_per_chunk))
    return None


def offload_for(plan: Plan, options: Options, prompt_len: int | None = None) -> Offload:
    """vLLM 0.33's CPU offload of `options.kv_offloading_size` GiB for `plan` (see the module's steps), with what
    prompts of `prompt_len` tokens (default max_model_len) store.

    With pipeline parallel vLLM 0.33 raises nothing: the scheduler's connector is built on the scheduler's
    KVCacheConfig, a copy of the first worker's (kv_cache_utils.generate_scheduler_kv_cache_config), so
    `worker_kv_bytes_per_block` is stage 0's bytes per block (its tensor // num_blocks), the copies are the
    whole world (TP x PP: `replicated_layout` requires PP 1), and each group's chunks are the global group's."""
    of_type(plan, Plan, field="plan", give="a kvviz.plan(...) result")
    of_type(options, Options, field="options", give="a kvviz.Options record (with kv_offloading_size)")
    size = options.kv_offloading_size
    require(size is not None, "kv_offloading_size: give the host GiB to offload to")
    require(plan.planner == "vllm" and len(plan.pools) == 1, "kv_offloading_size: offload follows vLLM's own plan")
    length = plan.max_model_len if prompt_len is None else prompt_len
    require(type(length) is int and length > 0, f"prompt_len={short_repr(length)}: must be a positive integer")
    tp, dcp, pp = options.tensor_parallel_size or 1, plan.scheduling.dcp, len(plan.stages or ()) or 1
    world = tp * pp  # ParallelConfig.world_size: DCP reuses the TP ranks
    caches = [c for g in plan.groups for c in g.layers]
    pure_mla = all(c.spec_class == "MLAAttentionSpec" for c in caches)
    # build_offloading_config's replicated_layout: MLA, TP > 1, every TP rank a replica, no PP / DCP
    copies = 1 if pure_mla and tp > 1 and dcp == 1 and pp == 1 else world
    # tensors[0].size // num_blocks of the scheduler's config: the first worker's (stage 0's) bytes per block
    worker = plan.stages[0].bytes_per_block if plan.stages else plan.layout.block_stride
    per_chunk = worker * copies * BLOCKS_PER_CHUNK
    aligned = cdiv(per_chunk, BLOCK_SIZE_ALIGNMENT) * BLOCK_SIZE_ALIGNMENT
    cpu_bytes = int(size * (1 << 30)) if size is not None else 0
    groups = []
    for g in plan.groups:
        first = g.layers[0]
        tokens = first.tokens_per_block * (dcp if first.dcp_sharded else 1) * BLOCKS_PER_CHUNK
        window = _window_chunks(first, tokens)
        whole = length // tokens  # offload stores whole chunks only (no partial tail)
        per_prompt = whole if window is None else (1 if first.kind.is_state else min(window, whole))
        groups.append(OffloadGroup(g.name, first.spec_class, tokens, window, per_prompt))
    return Offload(cpu_bytes, world, copies, worker, aligned, cpu_bytes // aligned, length, tuple(groups))
