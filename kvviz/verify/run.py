"""The entry point: `verify(layout, num_blocks, ...)` puts the rooms together.

1. Blocks: a BlockPool hands every group its own block ids (`BlockPool.assigned`: round robin by
   default, or contiguous); a hazard's set-up may add a second owner to a block.
2. Fit: the pool plus verify's measured working copies must fit (free memory, RLIMIT_AS, the
   cgroup's memory.max), checked before anything is allocated.
3. Write: group by group, the pattern into every page and the sampled real rows over it.
4. Act: the hazard's damage, then `corrupt(pool)` if given.
5. Read back: every page against what it is meant to hold, every unused byte against zero; the
   sampled rows decoded against their fp32 source; the hazard describes what it did.
"""

from __future__ import annotations

import time
from typing import Callable

import torch

from kvviz.base.defaults import SEED, VERIFY_BLOCKS
from kvviz.base.errors import require
from kvviz.base.inputs import MAX_BUDGET_BYTES, bounded_int, of_type, short_repr
from kvviz.core.accept import pools_of
from kvviz.core.layout import Layout
from kvviz.core.plan import Plan
from kvviz.pool import ASSIGNMENTS, FREE, BlockPool, Pool, check_views, resolve_device
from kvviz.verify.batches import item_bytes, layer_batches
from kvviz.verify.engine import Engine
from kvviz.verify.guards import (
    MAX_THREADS,
    allocation_guard,
    check_fit,
    cpu_threads,
    progress_bar,
    sync,
    working_bytes,
)
from kvviz.verify.hazards import HAZARDS, hazard_class
from kvviz.verify.report import JSON_BLOCKS, FormatError, GroupBlocks, VerifyReport
from kvviz.verify.samples import choose_samples, decode_errors, encode_samples, page_bytes, sample_values


def blocks_for_budget(layout: Layout, budget_bytes: int) -> int:
    """floor(budget / block_stride) (Layout.num_blocks); a budget under one stride is an error."""
    of_type(layout, Layout, field="layout", give="a kvviz Layout (plan.layout)")
    bounded_int(budget_bytes, field="budget_bytes", low=1, high=MAX_BUDGET_BYTES)
    n = layout.num_blocks(budget_bytes)
    require(n > 0, f"budget_bytes={budget_bytes:,}: smaller than one block stride ({layout.block_stride:,} B)")
    return n


def _check_args(layout, num_blocks, seed, hazard, assignment) -> None:
    require(hazard is None or hazard in HAZARDS, f"hazard={hazard!r}: unknown; choose one of {', '.join(HAZARDS)}")
    require(assignment in ASSIGNMENTS, f"assignment={assignment!r}: unknown; choose one of {', '.join(ASSIGNMENTS)}")
    require(
        isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0,
        f"seed={seed!r}: must be a non-negative integer",
    )
    require(isinstance(layout, Layout), f"layout: expected a kvviz Layout, got {type(layout).__name__}")
    G = len(layout.groups)
    require(
        isinstance(num_blocks, int) and not isinstance(num_blocks, bool) and num_blocks > 0,
        f"num_blocks={num_blocks!r}: must be a positive integer",
    )
    require(
        num_blocks >= G,
        f"num_blocks={num_blocks}: verify gives every group its own blocks, so it needs at least {G} (one per group)",
    )
    if hazard is not None:
        hazard_class(hazard).refuse(layout, num_blocks)


def _check_run_args(keep_pool, corrupt, progress, threads) -> None:
    of_type(keep_pool, bool, field="keep_pool", give="True or False")
    require(
        corrupt is None or callable(corrupt), f"corrupt={short_repr(corrupt)}: give a function of the Pool, or None"
    )
    require(
        callable(progress) or isinstance(progress, bool),
        f"progress={short_repr(progress)}: give True, False or a function of the bytes done",
    )
    if threads is not None:
        bounded_int(threads, field="threads", low=1, high=MAX_THREADS)


def verify(
    layout: Layout | Plan,
    num_blocks: int = VERIFY_BLOCKS,
    *,
    device: str | torch.device = "auto",
    seed: int = SEED,
    hazard: str | None = None,
    assignment: str = "round-robin",
    hazard_layer: str | None = None,
    keep_pool: bool = False,
    corrupt: Callable[[Pool], None] | None = None,
    progress: bool | Callable[[int], None] = False,
    threads: int | None = 1,
) -> VerifyReport | tuple[VerifyReport, ...]:
    """Write into every layer of every owned block of a real pool, read it back, and return a
    VerifyReport of every changed byte and the decode errors (see the module docstring).

    hazard: act one out (HAZARDS). corrupt: called with the Pool after the writes (and the hazard)
    and before the read-back, to change bytes on purpose (the report must then name each changed
    byte; tests/test_detection.py), e.g. ``corrupt=lambda pool: pool.blocks[3, 700].bitwise_xor_(1)``.
    keep_pool=True keeps the pool in the report (`report.pool.blocks`: the bytes as left).
    progress: True for a tqdm bar on stderr (runs over a few seconds), or a callback taking bytes
    done (write and read-back both count). threads: torch CPU threads during the run (None keeps
    torch's). Errors are KvvizError lines naming the argument (`seed=-1: ...`).
    `layout`: a Layout or a Plan (kvviz.core.accept.pools_of); a separate-pools Plan gives one VerifyReport
    per pool (a tuple), each pool its own backing of `num_blocks` blocks, as `kvviz verify` runs them.
    """
    pools = pools_of(layout, "layout")
    if len(pools) > 1:
        args = dict(device=device, seed=seed, hazard=hazard, assignment=assignment, hazard_layer=hazard_layer)
        more = dict(keep_pool=keep_pool, corrupt=corrupt, progress=progress, threads=threads)
        return tuple(verify(pool, num_blocks, **args, **more) for pool in pools)
    layout = pools[0]
    t_start = time.perf_counter()
    _check_args(layout, num_blocks, seed, hazard, assignment)
    if hazard_layer is not None:
        require(hazard in ("zeroer", "misread"), "hazard_layer: applies only with hazard='zeroer' or 'misread'")
    _check_run_args(keep_pool, corrupt, progress, threads)
    dev = resolve_device(device)
    check_views(layout)
    pool_bytes = num_blocks * layout.block_stride
    max_item = item_bytes(dev, pool_bytes)
    batches = layer_batches(layout, max_item)
    # before anything per block is built: the pool, the buffers and the ownership tensors
    check_fit(num_blocks, pool_bytes, working_bytes(layout, num_blocks, batches, max_item, 0), dev)
    blocks = BlockPool.assigned(num_blocks, len(layout.groups), assignment)
    acted = None if hazard is None else hazard_class(hazard)(layout, blocks, hazard_layer)
    firsts = tuple(
        int(ids[0]) if ids.numel() else None for ids in (blocks.block_ids(g) for g in range(len(layout.groups)))
    )
    kinds = choose_samples(layout, batches, firsts, () if acted is None else acted.whole_pages)
    work = working_bytes(layout, num_blocks, batches, max_item, sample_values(kinds))
    check_fit(num_blocks, pool_bytes, work, dev)

    with allocation_guard(num_blocks, pool_bytes, dev), cpu_threads(dev, threads):
        # Every block owned: the engine writes every byte (unused ones zeroed, pages patterned), so
        # a zero fill of torch's, a whole pass over the pool, is left out (a CPU pool comes zeroed
        # by the kernel: kvviz.pool.host_zeros).
        pool = Pool(layout, num_blocks, dev, zero=bool((blocks.owner_ids == FREE).any()))
        engine = Engine(layout, pool, blocks, seed, batches, max_item)
        total = sum(item.bytes for item in engine.items())
        with progress_bar(progress, 2 * total) as tick:
            sync(dev)
            t0 = time.perf_counter()
            if not pool.zeroed:
                engine.clear_unused()
            samples = encode_samples(kinds, seed, dev)
            fixed = page_bytes(samples)
            written = engine.write(tick, fixed)
            if acted is not None:
                acted.act(pool)
            if corrupt is not None:
                corrupt(pool)
            sync(dev)
            t_write = time.perf_counter() - t0
            t0 = time.perf_counter()
            zeroed = frozenset() if acted is None else acted.zeroed
            notes = {} if acted is None else acted.notes
            corrupted, read = engine.read_back(tick, fixed=fixed, zeroed=zeroed, notes=notes)
            bad_unused, unused = engine.check_unused(notes)
            corrupted += bad_unused
            errors = decode_errors(pool, samples, zeroed)
            hazard_report = None if acted is None else acted.describe(pool, samples, corrupted)
            sync(dev)
            t_check = time.perf_counter() - t0
    counts = [engine.count(g) for g in range(len(layout.groups))]
    return VerifyReport(
        planner=layout.planner,
        block_stride=layout.block_stride,
        num_blocks=num_blocks,
        device=str(dev),
        seed=seed,
        assignment=assignment,
        groups=tuple(
            GroupBlocks(g.name, len(g.layers), counts[i], engine.first_blocks(JSON_BLOCKS)[i])
            for i, g in enumerate(layout.groups)
        ),
        layers=len(layout.placements),
        pages=sum(len(g.layers) * counts[i] for i, g in enumerate(layout.groups)),
        blocks=num_blocks - int((blocks.owner_ids == FREE).sum()),
        bytes_written=written,
        bytes_read=read,
        unused_bytes=unused,
        formats=tuple(
            FormatError(name, len(s.layers), s.values, s.max_abs_error, s.max_error_over_bound)
            for name, s in errors.items()
        ),
        corrupted=tuple(sorted(corrupted, key=lambda c: (c.block, c.start))),
        hazard=hazard_report,
        seconds=time.perf_counter() - t_start,
        timings=(("write", t_write), ("check", t_check)),
        owner_ids=blocks.owner_ids,
        pool=pool if keep_pool else None,
    )


__all__ = ["blocks_for_budget", "verify"]
