"""What a workload shares, before any cache decides what is kept: for each request, the longest prefix of its
prompt that an earlier request's prompt also has (an unbounded cache holding every earlier prompt), and
what of it a group of a given block size could hit: whole blocks, at most prompt - 1 tokens
(KVCacheManager.get_computed_blocks' max_cache_hit_length, vLLM 0.33).

Sharing is that of the workload format (kvviz/replay/workload.py): a prefix group shares its first
prefix_len tokens (two of one group share the shorter); a hash chain shares, block by block, the tokens of
its common leading ids, a partial block the first tokens of the same id's block (the real-trace references'
rule, replay-traces/README.md). Requests are taken in the order the engine adds them (arrival step, then
workload order).

A sliding-window or Mamba group (sparse retention) hits at a block boundary only where earlier requests kept
the blocks a hit there needs: at vLLM 0.33's default prefix_cache_retention_interval 0 a request keeps the run
(a window's cdiv(window - 1, block) blocks, a Mamba state's one) ending at its prompt's last boundary
(kv_cache_coordinator.replay_boundaries: prompt - 1, rounded down to the block) and the run ending at the
junction it pinned (KVCacheManager.get_computed_blocks' shared_prefix_boundary: where a full-attention hit
went past the sparse group's). `reachable` follows that rule over the unbounded cache; time (a request that
comes before an earlier one is cached) and eviction are the replay's."""

from __future__ import annotations

from kvviz.replay.workload import WorkloadRequest


def shared_spans(requests) -> tuple[int, ...]:
    """Per request (workload order), the tokens of its prompt's longest prefix also at the start of an earlier
    request's prompt (earlier: added before it)."""
    order = sorted(range(len(requests)), key=lambda i: requests[i].arrival_step)
    group_seen: dict = {}  # prefix group -> the longest prefix_len seen
    id_seen: dict = {}  # hash id -> the most of its block's tokens seen (a partial block is its first tokens)
    out = [0] * len(requests)
    for i in order:
        r = requests[i]
        if r.hash_ids is not None:
            out[i] = _chain_span(r, id_seen)
        elif r.prefix_group is not None and r.prefix_len:
            out[i] = min(r.prefix_len, group_seen.get(r.prefix_group, 0))
            group_seen[r.prefix_group] = max(r.prefix_len, group_seen.get(r.prefix_group, 0))
    return tuple(out)


def _chain_span(r: WorkloadRequest, seen: dict) -> int:
    block = r.hash_block_tokens or 1
    span, whole = 0, True
    for k, h in enumerate(r.hash_ids or ()):
        mine = min(block, r.prompt_len - k * block)
        if mine <= 0:
            break
        if whole:
            common = min(mine, seen.get(h, 0))
            span += common
            whole = common == block  # sharing goes on past a block only if the whole block was shared
        seen[h] = max(seen.get(h, 0), mine)
    return span


def whole_blocks(requests, spans, block_size: int) -> tuple[int, ...]:
    """Per request, what a full-attention group of `block_size` could hit with an unbounded cache: its shared
    span capped at prompt - 1, rounded down to whole blocks."""
    return tuple(min(s, r.prompt_len - 1) // block_size * block_size for r, s in zip(requests, spans))


def group_reach(requests, spans, kind: str, block_size: int, sliding_window: int | None) -> tuple[int, ...]:
    """Per request, what one group could hit with an unbounded cache: a full-attention group whole blocks of
    the shared span; a sliding window (cdiv(window - 1, block) blocks before a hit) or a Mamba state (1) what
    retention kept (`reachable`)."""
    if kind == "full":
        return whole_blocks(requests, spans, block_size)
    run = -(-(sliding_window - 1) // block_size) if kind == "sliding" and sliding_window else 1
    return reachable(requests, spans, block_size, run)


def model_reach(requests, groups) -> tuple[int, ...]:
    """Per request, what the model could hit with an unbounded cache: the least of its groups' (a hit is the
    longest length every group accepts); `groups`: (name, kind, block_size, sliding_window)."""
    spans = shared_spans(requests)
    per_group = [group_reach(requests, spans, kind, block, window) for _, kind, block, window in groups]
    return tuple(min(h) for h in zip(*per_group)) if per_group else (0,) * len(requests)


def sharing_note(requests, groups) -> dict:
    """The workload's sharing as each group sees it (`groups`: (name, kind, block_size, sliding_window) with kind
    'full', 'sliding' or 'mamba'): per group the tokens it could hit with an unbounded cache, and the model's
    (`model_reach`, summed)."""
    spans = shared_spans(requests)
    per_group = [
        (name, kind, block, group_reach(requests, spans, kind, block, window)) for name, kind, block, window in groups
    ]
    return {
        "prompt_tokens": sum(r.prompt_len for r in requests),
        "shared_tokens": sum(spans),
        "longest_shared_span": max(spans, default=0),
        "requests_sharing": sum(1 for s in spans if s),
        "groups": [
            {
                "group": name,
                "kind": kind,
                "block_size": block,
                "whole_block_tokens": sum(whole_blocks(requests, spans, block)),
                "reachable_tokens": sum(hits),
            }
            for name, kind, block, hits in per_group
        ],
        "reachable_tokens": sum(min(h) for h in zip(*(hits for *_, hits in per_group))) if per_group else 0,
    }


def _boundary_key(r: WorkloadRequest, position: int):
    """The identity of r's first `position` tokens where another request can share them (None: r's own)."""
    if position <= 0:
        return None
    if r.hash_ids is not None:
        block = r.hash_block_tokens or 1
        k, offset = divmod(position - 1, block)
        return (r.hash_ids[k], offset + 1) if k < len(r.hash_ids) else None
    if r.prefix_group is not None and position <= r.prefix_len:
        return (r.prefix_group, position)
    return None


def reachable(requests, spans, block_size: int, run_blocks: int = 1) -> tuple[int, ...]:
    """Per request, what a sparse-retention group (sliding window, Mamba) of `block_size` could hit with an
    unbounded cache (module docstring): the highest whole-block boundary p within its shared span (and
    prompt - 1) at which the `run_blocks` blocks ending at p (a sliding window's cdiv(window - 1, block), a
    Mamba state's 1), or every block from the start when p is shorter, are all kept by earlier requests
    (SlidingWindowManager.find_longest_cache_hit; one block may be kept by one request, the next by another).
    A request keeps the run ending at its prompt's last boundary and the run ending at its pinned junction
    (reachable_block_mask)."""
    kept: dict = {}  # identity of a block's chunk (hash id or prefix group) -> offsets of kept block ends in it
    out = [0] * len(requests)
    for i in sorted(range(len(requests)), key=lambda i: requests[i].arrival_step):
        r = requests[i]
        full = min(spans[i], r.prompt_len - 1) // block_size * block_size  # a full-attention group's hit
        hit = next(
            (p for p in _kept_ends(r, full, block_size, kept) if _run_kept(r, p, block_size, run_blocks, kept)), 0
        )
        out[i] = hit
        for boundary in {(r.prompt_len - 1) // block_size * block_size, full if full > hit else 0}:
            for p in range(max(block_size, boundary - (run_blocks - 1) * block_size), boundary + 1, block_size):
                key = _boundary_key(r, p)
                if key is not None:
                    kept.setdefault(key[0], set()).add(key[1])
    return tuple(out)


def _is_kept(r: WorkloadRequest, p: int, kept: dict) -> bool:
    key = _boundary_key(r, p)
    return key is not None and key[1] in kept.get(key[0], ())


def _run_kept(r: WorkloadRequest, p: int, block_size: int, run_blocks: int, kept: dict) -> bool:
    """Every block of the run a hit at p needs is kept: the run_blocks blocks ending at p, or all from 0."""
    return all(_is_kept(r, q, kept) for q in range(max(block_size, p - (run_blocks - 1) * block_size), p, block_size))


def _kept_ends(r: WorkloadRequest, full: int, block_size: int, kept: dict):
    """The kept block ends p <= full (multiples of block_size) in r's identity, highest first, found from the
    kept offsets of r's chunks instead of trying every boundary."""
    if r.hash_ids is not None:
        run = r.hash_block_tokens or 1
        for k in range(min((full - 1) // run, len(r.hash_ids) - 1), -1, -1):
            ends = (k * run + o for o in kept.get(r.hash_ids[k], ()))
            yield from sorted((p for p in ends if p <= full and p % block_size == 0), reverse=True)
    elif r.prefix_group is not None:
        yield from sorted((p for p in kept.get(r.prefix_group, ()) if p <= full and p % block_size == 0), reverse=True)
