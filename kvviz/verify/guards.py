"""Resource guards of a verify run: the memory it needs beyond its pool (counted from the buffers it
allocates, before anything is allocated), allocator failures as one line, CPU threads, progress.

What a run holds besides the pool (`working_bytes`), each bounded by the layout and not by the
pool's size: the work item buffer the read-back regenerates pages into (at most one item), the
diff of a changed item (a few times one item, only when a page changed), the sampled real rows
(`samples.SAMPLE_BYTES_PER_VALUE` per value, measured) and the block ownership tensors (the
BlockPool's one byte per block, the ascending id lists it hands out, 8 B per block of one group
at a time, and each block's 8-byte pattern key). benchmarks/bench_verify_memory.py measures the
peak beyond the pool per kind.
"""

from __future__ import annotations

import contextlib
import sys

import torch

from kvviz.base.errors import KvvizError
from kvviz.base.inputs import MAX_BLOCKS, MAX_BUDGET_BYTES, bounded_int, of_type
from kvviz.base.text import bytes_label
from kvviz.core.layout import Layout
from kvviz.pool import BlockPool, allocation_failed, check_fits
from kvviz.verify.batches import Batch, blocks_per_item
from kvviz.verify.samples import SAMPLE_BYTES_PER_VALUE

# What a run holds beyond its tensors, measured by benchmarks/bench_verify_memory.py (the peak
# beyond the counted buffers for small layouts: allocator slack, codec tables, Python objects).
RUNTIME_BYTES = 16 * 2**20
DIFF_COPIES = 5  # a changed item's bool diff, its changed rows, their uint8 and flipped copies
MAX_THREADS = 1 << 12  # torch CPU threads verify may be asked to run with
PROGRESS_DELAY_S = 2.0  # a progress bar appears for runs that last longer than this (seconds)


def working_bytes(
    layout: Layout, num_blocks: int, batches: tuple[Batch, ...], max_item_bytes: int, sample_values: int
) -> int:
    """Bytes verify holds besides the pool (see the module docstring)."""
    of_type(layout, Layout, field="layout", give="a kvviz Layout (plan.layout)")
    bounded_int(num_blocks, field="num_blocks", low=1, high=MAX_BLOCKS)
    of_type(batches, (tuple, list), field="batches", give="kvviz.verify.layer_batches(...)'s batches")
    for b in batches:
        of_type(b, Batch, field="batches", give="kvviz.verify.layer_batches(...)'s batches")
    bounded_int(max_item_bytes, field="max_item_bytes", low=1, high=MAX_BUDGET_BYTES)
    bounded_int(sample_values, field="sample_values", low=0, high=MAX_BUDGET_BYTES)
    G = len(layout.groups)
    per_group = -(-num_blocks // G) + 1  # a hazard may give a group one more block
    item = max((min(per_group, blocks_per_item(b, max_item_bytes)) * b.block_bytes for b in batches), default=0)
    buffer = max(item, max_item_bytes)
    # the BlockPool and its filling copy, the ascending ids it hands out, 8 B of pattern key per block
    ownership = 2 * BlockPool.nbytes_for(num_blocks, G) + 3 * 8 * per_group + 8 * num_blocks
    return RUNTIME_BYTES + buffer + DIFF_COPIES * item + sample_values * SAMPLE_BYTES_PER_VALUE + ownership


def check_fit(num_blocks: int, pool_bytes: int, work: int, device: torch.device) -> None:
    """Refuse, before allocating anything, a pool plus verify's working copies that would not fit
    (free memory, RLIMIT_AS, the cgroup's memory.max: kvviz.pool.free_bytes)."""
    check_fits(
        pool_bytes + work,
        device,
        what=f"num_blocks={num_blocks}: pool {pool_bytes:,} B + verify's working "
        f"copies and block bookkeeping {work:,} B",
    )


@contextlib.contextmanager
def allocation_guard(num_blocks: int, pool_bytes: int, device: torch.device):
    """An allocator's refusal inside the block (torch's RuntimeError, MemoryError) becomes one
    KvvizError line naming the pool's size; anything else passes through."""
    try:
        yield
    except (MemoryError, RuntimeError) as e:
        if isinstance(e, KvvizError) or not allocation_failed(e):
            raise
        first = (str(e).splitlines() or [type(e).__name__])[0][:200]
        raise KvvizError(
            f"num_blocks={num_blocks}: a pool of {bytes_label(pool_bytes)} and verify's working copies "
            f"did not fit on {device} ({type(e).__name__}: {first})"
        ) from None


@contextlib.contextmanager
def cpu_threads(device: torch.device, n: int | None = 1):
    """Run with `n` torch intra-op threads on the CPU, restoring the old count afterwards.

    Why: every torch operation ends with its threads waiting for each other, so on a CPU that other
    work also uses, one descheduled thread stalls them all (on a loaded 2-core machine verify's
    strided copies took 11-105 s instead of about 2.5 s with one). n=None keeps torch's setting.
    """
    of_type(device, torch.device, field="device", give="a torch.device")
    if n is not None:
        bounded_int(n, field="n", low=1, high=MAX_THREADS)
    old = torch.get_num_threads()
    if device.type == "cpu" and n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


@contextlib.contextmanager
def progress_bar(enabled, total: int):
    """A callback taking bytes done: `enabled` itself when callable; True: a tqdm bar on stderr
    that appears only for runs over PROGRESS_DELAY_S seconds; False, or no tqdm: does nothing."""
    if callable(enabled):
        yield enabled
        return
    bar = None
    if enabled:
        try:
            from tqdm import tqdm  # imported here: optional (not on every machine), off light paths
        except ImportError:
            tqdm = None
        if tqdm is not None:
            bar = tqdm(
                total=total,
                unit="B",
                unit_scale=True,
                unit_divisor=1000,
                desc="verify",
                file=sys.stderr,
                delay=PROGRESS_DELAY_S,
                leave=False,
                dynamic_ncols=True,
            )
    try:
        yield (lambda n: None) if bar is None else bar.update
    finally:
        if bar is not None:
            bar.close()


def sync(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA), so that timings are the work's."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
