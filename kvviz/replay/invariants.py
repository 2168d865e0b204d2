"""The pool's invariants, checked from the block tables after every step of `replay(..., check_invariants=True)`
(the tests' check)."""

from __future__ import annotations


def check_pool(kv) -> None:
    """The pool's invariants, from the block tables (tests): one owner per block id, reference counts equal
    to the tables holding a block, free + held = num_blocks - 1, the counters equal to a recount."""
    pool = kv.pool
    owner: dict = {}
    refs: dict = {}
    for g, m in enumerate(kv.managers):
        for blocks in m.req_to_blocks.values():
            for b in blocks:
                if b == 0:
                    continue
                if owner.setdefault(b, g) != g:
                    raise AssertionError(f"block {b} held by groups {owner[b]} and {g}")
                refs[b] = refs.get(b, 0) + 1
    free = set(pool.free_ids())
    if len(free) != pool.num_free or 0 in free:  # (a test's pool: its untouched ids are listed too)
        raise AssertionError("free queue length or null block in the free queue")
    for b, n in refs.items():
        if pool.ref[b] != n or b in free:
            raise AssertionError(f"block {b}: ref {pool.ref[b]} but held {n} times")
    if pool.num_free + len(refs) != pool.num_blocks - 1:
        raise AssertionError(f"free {pool.num_free} + held {len(refs)} != {pool.num_blocks - 1}")
    if kv.held_blocks_slow() != kv.held_blocks() or pool.num_cached_free_slow() != pool.cached_free:
        raise AssertionError("held / cached-free counters differ from a recount")
    for first, members in kv.spec_runs:  # one spec's groups: tables of one shape (kvviz/replay/running.py)
        for m in members[1:]:
            for rid, blocks in m.req_to_blocks.items():
                mine = first.req_to_blocks.get(rid)
                if mine is None or [b == 0 for b in blocks] != [b == 0 for b in mine]:
                    raise AssertionError(f"groups {first.gid} and {m.gid} of one spec: {rid}'s tables differ")
            if m.num_cached_block != first.num_cached_block or m.req_to_blocks.keys() != first.req_to_blocks.keys():
                raise AssertionError(f"groups {first.gid} and {m.gid} of one spec hash or hold differently")
