"""vLLM 0.33's `KVCacheManager` and its coordinator over kvviz's own plan
(vllm/v1/core/kv_cache_manager.py, vllm/v1/core/kv_cache_coordinator.py).

The groups, their block sizes, sliding windows, attention chunks and Mamba specs, and the number of blocks all come
from a `kvviz.core.plan.Plan` and `Plan.capacity(budget_bytes)`; nothing is typed in."""

from __future__ import annotations

import dataclasses

from kvviz.base.errors import KvvizError
from kvviz.base.regions import cdiv
from kvviz.core.spec import Scheduling
from kvviz.replay.mamba import MambaManager
from kvviz.replay.managers import ChunkedLocalManager, Manager, SlidingWindowManager
from kvviz.replay.pool import NULL, BlockPool
from kvviz.replay.running import RunningSlots


@dataclasses.dataclass(frozen=True)
class GroupSpec:
    """One KV cache group as the scheduler sees it (vLLM's `KVCacheGroupSpec`). Two groups compare equal when
    their layers' spec does (vLLM's `kv_cache_spec ==`): the name is not compared."""

    name: str = dataclasses.field(compare=False)
    kind: str  # 'full', 'sliding', 'chunked' or 'mamba'
    block_size: int
    sliding_window: int | None = None
    checkpoint_blocks: int = 0
    layer_spec: object = None  # the group's layer spec less its layer name and index
    attention_chunk_size: int | None = None  # chunked local attention (Llama 4)


def groups_from_plan(plan) -> tuple[GroupSpec, ...]:
    """The plan's groups (one shared pool) as scheduler groups: each group's first layer says its class."""
    if len(plan.pools) != 1 or plan.separate:
        raise KvvizError(
            f"replay: {plan.model!r} is planned as separate pools ({plan.planner}); vLLM 0.33 keeps "
            f"one shared pool: plan with planner='vllm'"
        )
    out = []
    for g in plan.layout.groups:
        c = g.layers[0]
        same = dataclasses.replace(c, name="", layer=None)
        if c.is_state:
            out.append(GroupSpec(g.name, "mamba", c.tokens_per_block, None, c.checkpoint_blocks, same))
        elif c.attention_chunk_size is not None:
            out.append(GroupSpec(g.name, "chunked", c.tokens_per_block, None, 0, same, c.attention_chunk_size))
        elif c.sliding_window is not None:
            out.append(GroupSpec(g.name, "sliding", c.tokens_per_block, c.sliding_window, 0, same))
        else:
            out.append(GroupSpec(g.name, "full", c.tokens_per_block, None, 0, same))
    return tuple(out)


class KVCacheManager(RunningSlots):
    """`KVCacheManager` + `UnitaryKVCacheCoordinator` / `HybridKVCacheCoordinator`."""

    def __init__(
        self,
        groups,
        num_blocks: int,
        *,
        max_model_len: int,
        max_in_flight_tokens: int,
        enable_caching: bool,
        mamba_mode: str = "none",
    ) -> None:
        self.groups = groups
        self.max_model_len = max_model_len
        self.caching = enable_caching
        self.pool = BlockPool(num_blocks, enable_caching)
        self.pool.held = [0] * len(groups)
        self.scheduler_block_size = max(g.block_size for g in groups)
        mamba_align = next((g.block_size for g in groups if g.kind == "mamba"), None)
        self.managers: list[Manager] = []
        # `max_admission_blocks_per_request` of a recycling spec (sliding window, chunked local): the planner's
        # own blocks per request (CacheSpec.blocks_per_request) at the replay's length and tokens in flight
        scheduling = Scheduling(max_model_len=max_model_len, max_in_flight_tokens=max_in_flight_tokens)
        for i, g in enumerate(groups):
            if g.kind == "sliding":
                m = SlidingWindowManager(
                    self.pool,
                    i,
                    g.block_size,
                    enable_caching,
                    admission_cap=g.layer_spec.blocks_per_request(scheduling),
                    window=g.sliding_window,
                )
            elif g.kind == "chunked":
                m = ChunkedLocalManager(
                    self.pool,
                    i,
                    g.block_size,
                    enable_caching,
                    admission_cap=g.layer_spec.blocks_per_request(scheduling),
                    chunk=g.attention_chunk_size,
                )
            elif g.kind == "mamba":
                if mamba_mode != "align" and enable_caching:
                    raise KvvizError("replay: Mamba prefix caching needs mamba_cache_mode='align'")
                m = MambaManager(
                    self.pool,
                    i,
                    g.block_size,
                    enable_caching,
                    checkpoint_blocks=g.checkpoint_blocks,
                    checkpoint_alignment=mamba_align,
                )
            else:
                m = Manager(self.pool, i, g.block_size, enable_caching)
            self.managers.append(m)
        # HybridKVCacheCoordinator.verify_and_split_kv_cache_groups: groups of one spec (equal layer specs, as
        # vLLM's `group.spec == spec`) looked up together, full attention first; with one full attention and one
        # other spec, `find_longest_cache_hit` is its "simple hybrid" single pass.
        specs: dict = {}
        for i, g in enumerate(groups):
            specs.setdefault(g, []).append(i)
        self.spec_groups = sorted(specs.items(), key=lambda kv: kv[0].kind != "full")
        self.hybrid = len(groups) > 1
        # The groups of each spec, in group order: their tables have one shape (kvviz/replay/running.py)
        runs: dict = {}
        for g, m in zip(groups, self.managers):
            runs.setdefault(g, []).append(m)
        self.spec_runs = [(ms[0], tuple(ms)) for ms in runs.values()]
        # One full-attention group (dense and MLA models): the running paths written out for it (running.py)
        self.dense = len(groups) == 1 and groups[0].kind == "full"
        if self.dense:
            self._allocate_running = self._allocate_dense
            self.cache_running = self._cache_running_dense
        # Per-group constants for the decode fast path of `allocate_slots` (no Mamba group).
        self.no_mamba = all(m.kind != "mamba" for m in self.managers)
        # A skipped step schedules at most this many tokens: fewer than a Mamba block cannot need a prefill
        # checkpoint (`mamba_checkpoint_valid`: start + block <= position < end).
        self.skip_max_tokens = min((m.block_size for m in self.managers if m.kind == "mamba"), default=max_model_len)
        self.windowed = [m for m in self.managers if m.windowed]  # their blocks leave a window (running.py)
        self.mamba = [m for m in self.managers if m.kind == "mamba"]
        self.stats = {"queries": 0, "hits": 0, "preempted_queries": 0, "preempted_hits": 0}

    # ---- prefix hits -------------------------------------------------------------------
    def _find(self, spec: GroupSpec, gids, request, max_length):
        pool, bs = self.pool, spec.block_size
        if spec.kind == "sliding":
            return SlidingWindowManager.find_longest_cache_hit_window(
                request, max_length, gids, pool, bs, spec.sliding_window
            )
        if spec.kind == "mamba":
            return MambaManager.find_longest_cache_hit_state(request, max_length, gids, pool, bs)
        if spec.kind == "chunked":
            return ChunkedLocalManager.find_longest_cache_hit_chunked(
                request, max_length, gids, pool, bs, spec.attention_chunk_size
            )
        return Manager.find_longest_cache_hit(request, max_length, gids, pool, bs)

    def get_computed_blocks(self, request):
        """`KVCacheManager.get_computed_blocks`: at most num_tokens - 1 tokens, the longest length every
        group accepts (`HybridKVCacheCoordinator.find_longest_cache_hit`), and the shared-prefix junction."""
        n = len(self.groups)
        if not self.caching:
            return None, 0, 0
        max_len = request.num_tokens - 1
        if not self.hybrid:
            spec, gids = self.spec_groups[0]
            blocks, hit = self._find(spec, gids, request, max_len)
            return (tuple(blocks) if any(blocks) else None), hit, 0
        hit_length, longest = max_len, 0
        by_group: list = [None] * n
        len_by_group = [0] * n
        simple = len(self.spec_groups) == 2 and self.spec_groups[0][0].kind == "full"
        while True:
            curr = hit_length
            for spec, gids in self.spec_groups:
                first = gids[0]
                if spec.kind == "full" and by_group[first] is not None:
                    curr = min(curr, len_by_group[first])
                    continue
                blocks, new_hit = self._find(spec, gids, request, curr)
                curr = new_hit
                for g, blk in zip(gids, blocks):
                    by_group[g] = blk
                    len_by_group[g] = new_hit
                longest = max(longest, curr)
            if curr >= hit_length:
                break
            hit_length = curr
            if simple:
                break
        for spec, gids in self.spec_groups:
            if spec.kind == "full":
                for g in gids:
                    if by_group[g] is not None:
                        del by_group[g][cdiv(hit_length, spec.block_size) :]
        blocks = tuple(b if b is not None else [] for b in by_group)
        uncached = longest - hit_length
        return (blocks if any(blocks) else None), hit_length, (hit_length + uncached if uncached else 0)

    # ---- allocation --------------------------------------------------------------------
    def _to_allocate(self, request, num_tokens, new_computed, total, local, main, cap, prefill_end) -> int:
        """The groups' `get_num_blocks_to_allocate`, summed (`KVCacheCoordinator.get_num_blocks_to_allocate`).
        With no hit blocks, a spec's first group answers for all of its groups (tables of one shape: the same
        new blocks, no evictable hits); they take its checkpoint decision (`MambaManager`'s side effect, with
        the table entry that vLLM's defaultdict creates). With hit blocks (ids differ), each group is asked."""
        rid = request.rid
        if new_computed and any(new_computed):
            return sum(
                m.num_blocks_to_allocate(rid, num_tokens, new_computed[i], total, local, main, cap, prefill_end)
                for i, m in enumerate(self.managers)
            )
        count = 0
        for m, members in self.spec_runs:
            k = m.num_blocks_to_allocate(rid, num_tokens, (), total, local, main, cap, prefill_end)
            count += k * len(members)
            if m.kind == "mamba" and len(members) > 1:
                checkpoint = m.checkpoints.get(rid)
                for g in members[1:]:
                    g.req_to_blocks.setdefault(rid, [])
                    if not cap:
                        if checkpoint is None:
                            g.checkpoints.pop(rid, None)
                        else:
                            g.checkpoints[rid] = checkpoint
        return count

    def allocate_slots(
        self,
        request,
        num_new_tokens: int,
        num_new_computed: int = 0,
        new_computed=None,
        full_sequence_must_fit: bool = False,
    ):
        """`KVCacheManager.allocate_slots` (no lookahead, no connector, watermark 0): the admission check of the
        whole sequence (`scheduler_reserve_full_isl`, sliding windows capped), windows trimmed, blocks allocated
        and the full blocks hashed at once. Returns False when the blocks are not there."""
        rid = request.rid
        running = new_computed is None and not full_sequence_must_fit and not num_new_computed
        if running and self.no_mamba:
            return self._allocate_running(request, num_new_tokens)
        local = request.num_computed_tokens + num_new_computed
        total = min(local, self.max_model_len)
        prefill_end = max(request.prompt_len, request.num_tokens - 1)
        free = self.pool.num_free
        if full_sequence_must_fit:
            full = min(request.num_tokens, self.max_model_len)
            # A waiting request holds no blocks, so the count depends only on its lengths, its hit blocks and
            # which of them are unreferenced: asked again when the hit (a new get_computed_blocks answer) or
            # any block's free / touched state (BlockPool.ref_epoch) changed. A Mamba group's count also reads
            # the states cached in this step (none: the count is theirs of any step with none).
            settled = not any(m.cached_this_step for m in self.mamba)
            key = (new_computed, total, full, prefill_end, self.pool.ref_epoch, settled)
            memo = request.admit_memo
            if settled and memo is not None and memo[0] == key:
                count = memo[1]
            else:
                count = self._to_allocate(request, full, new_computed, total, local, full, True, prefill_end)
                request.admit_memo = (key, count)
            if count > free:
                return False
        main = total + num_new_tokens
        need = min(main, self.max_model_len)
        processed = max(0, total - request.num_in_flight_tokens)
        for m in self.managers:
            m.remove_skipped_blocks(rid, processed)
        if self._to_allocate(request, need, new_computed, local, local, main, False, prefill_end) > self.pool.num_free:
            return False
        if new_computed is not None and not any(rid in m.num_cached_block for m in self.managers):
            for i, m in enumerate(self.managers):  # allocate_new_computed_blocks
                m.add_local_computed_blocks(rid, new_computed[i], local)
        for m in self.managers:
            m.allocate_new_blocks(rid, need, main)
        self.cache_blocks(request, min(total + num_new_tokens, request.num_tokens))
        if running:
            self._set_limits(request, main)
        return True

    def cache_blocks(self, request, num_tokens: int) -> None:
        """`KVCacheCoordinator.cache_blocks` (hybrid: rounded down to the scheduler block size)."""
        if not self.caching:
            return
        if self.hybrid:
            num_tokens = num_tokens // self.scheduler_block_size * self.scheduler_block_size
        rid = request.rid
        hashed = request.prompt_len + request.num_output
        upto = num_tokens if num_tokens < hashed else hashed
        for m, members in self.spec_runs:
            # Manager.cache_blocks returns at once when the full blocks are already hashed; Mamba's also caches
            # a tail block, which it skips (MambaManager._cache_tail) without a checkpoint unless num_tokens
            # is the block-aligned prompt checkpoint position. One spec's groups answer alike (running.py);
            # each group hashes only its own blocks, so the order across specs does not matter.
            bs = m.block_size
            if m.num_cached_block.get(rid, 0) < upto // bs:
                for g in members:
                    g.cache_blocks(request, num_tokens)
            elif m.kind == "mamba" and not m.tail_is_noop(request, num_tokens):
                # MambaManager.cache_blocks with its full blocks hashed already: the tail alone, asked of the
                # spec's first group (its groups' tables and hashes move together)
                for g in members:
                    g.cache_tail(request, num_tokens)

    def record_prefix_cache_stats(self, request, hits: int) -> None:
        """`PrefixCacheStats.record`, called when a request is admitted."""
        if not self.caching:
            return
        if request.num_preemptions > 0:
            self.stats["preempted_queries"] += request.num_tokens
            self.stats["preempted_hits"] += hits
        else:
            self.stats["queries"] += request.num_tokens
            self.stats["hits"] += hits

    def free(self, rid: str) -> None:
        """`KVCacheCoordinator.free`: group by group, each request's blocks tail first."""
        for m in self.managers:
            m.free(rid)

    def new_step_starts(self) -> None:
        """At the start of an engine step: each group manager forgets the blocks it counted as new in the last one."""
        for m in self.managers:
            m.new_step_starts()

    def held_blocks(self) -> list[int]:
        """Distinct non-null block ids each group holds (kept by the pool as references change)."""
        return list(self.pool.held)

    def held_blocks_slow(self) -> list[int]:
        """Distinct non-null block ids each group's tables hold, counted from the tables (tests)."""
        out = []
        for m in self.managers:
            s = set()
            for blocks in m.req_to_blocks.values():
                s.update(blocks)
            s.discard(NULL)
            out.append(len(s))
        return out
