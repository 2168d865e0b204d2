"""Write real, encoded KV data through a `Pool`'s views, read it back, and show the damage hazards do.

`verify(layout, num_blocks)` runs four steps:

1. Blocks. A `BlockPool` hands every group its own block ids. ``assignment="round-robin"`` (the
   default) gives block b to group ``b % len(groups)``, so neighbouring blocks belong to different
   groups, as they do in a busy server; ``"contiguous"`` gives group g one run of ids. Every group
   needs at least one block. A hazard may then add a second owner to a block (`_setup_*`).
2. Write (`_write_layers`), group by group in layout order. The layers of one group that share a
   row format and sit equally far apart (one spec of one group: in vLLM 0.33's overlay-by-spec
   tensors they are `layer_stride` apart) form a `Batch`, written as ONE strided view
   (`Pool.stacked_view`), a few blocks at a time (`WorkItem`). Source values are seeded fp32 rows
   (``randn`` times a random power of two per 32 values, some all-zero rows, so every scale path
   runs), encoded with the layer's codec (`kvviz.quant`), laid out payloads first, then footers,
   then zero padding (`quant.pack_page`) and copied in. Opaque pages (groups from JSON) get
   seeded random bytes. Every layer has its own values: each `SEED_VALUES`-value unit of one
   layer's pages has its own generator, seeded from (seed, layer, unit), so any work item can
   regenerate its values without keeping them. Of each page the write keeps an 8-byte
   fingerprint (`_fingerprint`: any single changed byte changes it).
3. Read back (`_read_back`): a work item whose fingerprints still match is intact; any other is
   regenerated from the seed and compared byte for byte with the pool, and a changed page is
   reported with its layer, block, the absolute byte range inside the block and the count of
   changed bytes. Every owned byte that no page of its group covers (`Layout.unused_ranges`)
   must still be zero, as in a fresh pool; a change there is reported as
   ``"unused bytes of group G"``.
4. Decode errors: the first SAMPLE_ROWS rows of every layer's first block, and every work item
   with a changed page, are decoded from the bytes read back and compared with the fp32 source
   (max absolute error and max error / `quant.error_bound`, per format). Clean pages need no
   more: their bytes equal the encoding of their source, so their decode error is the codec's,
   which the sample already measures on the same code path, on every layer.

Working memory stays bounded: at most about `chunk_values(...)` source values are in flight,
whatever the pool's size, and the fit check counts them before the pool is allocated.

Hazards, each acted out on the real memory:

* ``shared-block`` (docs/hazards.md#shared-block): a second group claims the first block of group
  0 (``BlockPool.claim(..., hazard=True)``); group 1. Both write (in group order); the victims are
  the earlier writer's layers whose bytes the later group's pages overwrote (and each group's
  unused bytes that the other's pages wrote into).
* ``zeroer`` (docs/hazards.md#zeroer): after the writes, one layer's page in one block is zeroed
  the way vLLM #50276 did, as ``[offset, offset + stride)`` of the flat backing instead of
  ``[offset, offset + page)``: the following layers of the same group in that block are wiped
  and ``offset`` bytes spill into the next block, owned (round robin) by another group. The
  layer defaults to the indexer K cache nearest the middle of its group (the DSV4 incident lost
  indexer blocks), else the middle layer of the largest group; the block is the layer group's
  first block that has a next block owned by another group.
* ``misread`` (docs/hazards.md#misread): an indexer page written payload-first is read with
  `quant.read_interleaved` (rows of P + F bytes, the per-token layout) and decoded: truth vs
  misread values of the first rows, which bytes each reader took, and the error. The memory
  itself stays intact.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import sys
import time
from typing import Any, Callable, Iterator

import torch

from . import formats, quant
from .defaults import GIB, VERIFY_BLOCKS
from .errors import KvvizError, require
from .core.layout import Layout, Placement
from .pool import FREE, BlockPool, Pool, check_fits, check_views, resolve_device
from .core.kinds import CacheKind

HAZARDS = ("shared-block", "zeroer", "misread")
ASSIGNMENTS = ("round-robin", "contiguous")

# Source magnitudes: log2 of the per-32-value magnitude is uniform in [-SPREAD, SPREAD].
SPREAD = {"fp8_ds_mla": 6.0, "fp8": 2.0, "bf16": 8.0, "indexer_fp8": 6.0, "indexer_mxfp4": 6.0, "fp32": 8.0}
ZERO_ROW_FRACTION = 1 / 32  # all-zero rows exercise the amax floors
MISREAD_ROWS, MISREAD_VALUES = 4, 8  # how much of the misread page the report shows
# One generator per SEED_VALUES values of one layer (whole pages): the unit of reproducibility.
SEED_VALUES = 2**18
# Source values one work item holds at most (more only when one page alone is larger).
# On the CPU, larger work items only run slower (their temporaries leave the caches); a GPU wants
# large ones (fewer kernel launches) as long as they stay a small part of the pool.
CHUNK_VALUES = 2**20
GPU_CHUNK_VALUES = 2**26
# Bytes of working tensors per source value in flight: the fp32 source, the codec's fp32
# temporaries (about six), the expected page, the bytes read back and the decoded values.
WORK_BYTES_PER_VALUE = 48
# Decode errors of a clean work item are measured on the first SAMPLE_ROWS rows of its first block
# (every layer's; a changed page is decoded whole). error_bound costs more than the rest of a run.
SAMPLE_ROWS = 16
# Pages at least this large get a fingerprint (8 B each, under 1/32 of what they hold).
FINGERPRINT_MIN_PAGE = 256
FINGERPRINT_SEED = 0x6B7676  # seed of the fingerprint weights ("kvv")
# Bytes of the pool one step of the unused-bytes check reads at a time.
UNUSED_CHUNK_BYTES = 2**24
JSON_BLOCKS = 64  # block ids listed per group in to_json()
# A progress bar appears for runs that last longer than this (seconds).
PROGRESS_DELAY_S = 2.0


def unused_label(group: str) -> str:
    """The name a corruption of a group's unused bytes is reported under."""
    return f"unused bytes of group {group}"


# ---- report ------------------------------------------------------------------------------------
def _num(x: float):
    """JSON-safe float: inf/nan as strings."""
    return x if math.isfinite(x) else str(x)


@dataclasses.dataclass(frozen=True)
class Corruption:
    """One layer of one block whose bytes differ from what its group wrote; `layer` is
    ``unused_label(group)`` for the bytes of the block that no page of the group covers."""

    layer: str
    group: str
    block: int
    start: int  # absolute byte inside the block of the first changed byte
    end: int  # one past the last changed byte
    bytes_changed: int
    note: str = ""  # the hazard's reading: "neighbour", "spill", "overwritten by ..."

    @property
    def unused(self) -> bool:
        """True for bytes of an owned block that no page of the group covers."""
        return self.layer == unused_label(self.group)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class FormatError:
    """Decode error of one format: read-back bytes decoded vs the fp32 source."""

    format: str
    layers: int
    values: int
    max_abs_error: float
    max_error_over_bound: float  # <= 1: within quant.error_bound everywhere

    @property
    def within_bound(self) -> bool:
        return self.max_error_over_bound <= 1.0

    def to_json(self) -> dict:
        return {"format": self.format, "layers": self.layers, "values": self.values,
                "max_abs_error": _num(self.max_abs_error),
                "max_error_over_bound": _num(self.max_error_over_bound), "within_bound": self.within_bound}


@dataclasses.dataclass(frozen=True)
class MisreadRow:
    """One row of a misread page: values and the byte ranges (absolute inside the block) each reader took."""

    row: int
    source: tuple[float, ...]
    truth: tuple[float, ...]  # payload-first reader (quant.unpack_page), decoded
    misread: tuple[float, ...]  # interleaved reader (quant.read_interleaved), decoded
    payload: tuple[int, int]
    footer: tuple[int, int]
    read_payload: tuple[int, int]
    read_footer: tuple[int, int]

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        for k in ("source", "truth", "misread"):
            d[k] = [_num(v) for v in d[k]]
        return d


@dataclasses.dataclass(frozen=True)
class Misread:
    layer: str
    group: str
    block: int
    format: str
    rows: int
    payload_bytes: int
    footer_bytes: int
    rows_wrong: int  # rows whose misread values differ from the truth
    wrong_rows: tuple[int, ...]
    max_abs_error: float  # misread vs truth, over the page
    truth_max_abs_error: float  # truth vs source (the quantization error alone)
    sample: tuple[MisreadRow, ...]

    def to_json(self) -> dict:
        d = {k: getattr(self, k) for k in ("layer", "group", "block", "format", "rows", "payload_bytes",
                                           "footer_bytes", "rows_wrong")}
        d["wrong_rows"] = list(self.wrong_rows)
        d["max_abs_error"] = _num(self.max_abs_error)
        d["truth_max_abs_error"] = _num(self.truth_max_abs_error)
        d["sample"] = [r.to_json() for r in self.sample]
        return d


@dataclasses.dataclass(frozen=True)
class HazardReport:
    name: str
    description: str
    facts: dict  # what the hazard did: blocks, groups, byte ranges
    misread: Misread | None = None

    def to_json(self) -> dict:
        return {"name": self.name, "description": self.description, "facts": self.facts,
                "misread": None if self.misread is None else self.misread.to_json()}


@dataclasses.dataclass(frozen=True)
class GroupBlocks:
    """The blocks one group held: how many, and the first JSON_BLOCKS ids (ascending)."""

    name: str
    layers: int
    num_blocks: int
    first_blocks: tuple[int, ...]

    def to_json(self) -> dict:
        return {"name": self.name, "layers": self.layers, "num_blocks": self.num_blocks,
                "blocks": list(self.first_blocks), "blocks_truncated": len(self.first_blocks) < self.num_blocks}


@dataclasses.dataclass(frozen=True)
class VerifyReport:
    planner: str
    block_stride: int
    num_blocks: int
    device: str
    seed: int
    assignment: str
    groups: tuple[GroupBlocks, ...]
    layers: int  # distinct layers checked
    pages: int  # (layer, block) pages checked
    blocks: int  # blocks owned by some group
    bytes_written: int  # through the page views
    bytes_read: int
    formats: tuple[FormatError, ...]
    corrupted: tuple[Corruption, ...]
    unused_bytes: int = 0  # owned bytes outside the group's pages, checked to be zero
    hazard: HazardReport | None = None
    seconds: float = 0.0
    timings: tuple[tuple[str, float], ...] = ()
    # Index into `groups` of the group holding each block (the first holder under a shared-block
    # hazard; FREE = -1), and, with verify(..., keep_pool=True), the pool itself as the run left
    # it (for kvviz.plot.live_bytes).
    owner_ids: torch.Tensor | None = dataclasses.field(default=None, repr=False, compare=False)
    pool: Pool | None = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def block_groups(self) -> tuple[str | None, ...]:
        """Name of the group holding each block (None: free); one entry per block."""
        if self.owner_ids is None:
            return ()
        names = [g.name for g in self.groups]
        return tuple(None if i == FREE else names[i] for i in self.owner_ids.tolist())

    @property
    def gb_written(self) -> float:
        return self.bytes_written / 1e9

    @property
    def gb_per_s(self) -> float:
        """GB (10^9 B) written per second of the whole run (write, read back, compare, decode)."""
        return self.gb_written / self.seconds if self.seconds > 0 else math.inf

    @property
    def clean(self) -> bool:
        return not self.corrupted

    @property
    def within_bounds(self) -> bool:
        return all(f.within_bound for f in self.formats)

    @property
    def ok(self) -> bool:
        """A clean run: no corruption and every decode error within its bound. A hazard run: the
        damage showed (corrupted layers; for misread, intact memory but misread rows)."""
        if self.hazard is None:
            return self.clean and self.within_bounds
        if self.hazard.name == "misread":
            return self.clean and self.hazard.misread is not None and self.hazard.misread.rows_wrong > 0
        return not self.clean

    def to_json(self) -> dict:
        return {
            "planner": self.planner, "block_stride": self.block_stride, "num_blocks": self.num_blocks,
            "pool_bytes": self.num_blocks * self.block_stride, "device": self.device, "seed": self.seed,
            "assignment": self.assignment, "groups": [g.to_json() for g in self.groups],
            "layers": self.layers, "pages": self.pages, "blocks": self.blocks,
            "bytes_written": self.bytes_written, "gb_written": round(self.gb_written, 6),
            "bytes_read": self.bytes_read, "unused_bytes": self.unused_bytes,
            "formats": [f.to_json() for f in self.formats],
            "corrupted": [c.to_json() for c in self.corrupted],
            "clean": self.clean, "within_bounds": self.within_bounds, "ok": self.ok,
            "hazard": None if self.hazard is None else self.hazard.to_json(),
            "seconds": round(self.seconds, 4), "gb_per_s": _num(round(self.gb_per_s, 4)),
            "timings": {k: round(v, 4) for k, v in self.timings},
        }

    def text(self, *, max_victims: int = 40) -> str:
        pool = self.num_blocks * self.block_stride
        out = [f"verify: {self.planner} layout, block stride {self.block_stride:,} B x {self.num_blocks:,} blocks "
               f"= {pool:,} B ({pool / GIB:.2f} GiB) on {self.device}, seed {self.seed}"]
        out.append(f"blocks ({self.assignment}): " + ", ".join(
            f"{g.name} {g.num_blocks:,}" + (f" [{', '.join(map(str, g.first_blocks[:4]))}"
                                            f"{', ...' if g.num_blocks > 4 else ''}]" if g.num_blocks else "")
            for g in self.groups))
        out.append(f"checked {self.layers:,} layers in {self.pages:,} pages of {self.blocks:,} blocks, and "
                   f"{self.unused_bytes:,} B no page covers; wrote {self.bytes_written:,} B ({self.gb_written:.3f} GB), "
                   f"read back {self.bytes_read:,} B in {self.seconds:.2f} s = {self.gb_per_s:.3f} GB/s")
        if self.formats:
            out.append("decode error vs the fp32 source (read-back bytes decoded: the first rows of every "
                       "layer's first block, every changed page):")
            damaged = " (includes the corrupted pages)" if self.corrupted else ""
            w = max(len(f.format) for f in self.formats)
            for f in self.formats:
                out.append(f"  {f.format:<{w}}  {f.layers:>4} layers  {f.values:>12,} values  "
                           f"max abs {f.max_abs_error:.3g}  max err/bound {f.max_error_over_bound:.3g}"
                           f"{'' if f.within_bound else '  OUT OF BOUND' + damaged}")
        if self.hazard is not None:
            out.append(f"hazard {self.hazard.name}: {self.hazard.description}")
        if self.corrupted:
            out.append(f"corrupted layers: {len(self.corrupted)}")
            for c in self.corrupted[:max_victims]:
                out.append(f"  block {c.block:>5}  {c.group:<10}  {c.layer}  bytes [{c.start:,}, {c.end:,}) "
                           f"{c.bytes_changed:,} changed{'  (' + c.note + ')' if c.note else ''}")
            if len(self.corrupted) > max_victims:
                out.append(f"  ... and {len(self.corrupted) - max_victims} more (--json lists all)")
        else:
            out.append("corrupted layers: none")
        m = self.hazard.misread if self.hazard is not None else None
        if m is not None:
            out.append(f"misread {m.layer} ({m.format}, block {m.block}): {m.rows_wrong} of {m.rows} rows wrong, "
                       f"max |misread - truth| {m.max_abs_error:.3g} (quantization error alone "
                       f"{m.truth_max_abs_error:.3g})")
            for r in m.sample:
                out.append(f"  row {r.row}: payload [{r.payload[0]:,}, {r.payload[1]:,}) scales "
                           f"[{r.footer[0]:,}, {r.footer[1]:,}); interleaved reader took [{r.read_payload[0]:,}, "
                           f"{r.read_payload[1]:,}) and [{r.read_footer[0]:,}, {r.read_footer[1]:,})")
                out.append("    source  " + " ".join(f"{v:9.4g}" for v in r.source))
                out.append("    truth   " + " ".join(f"{v:9.4g}" for v in r.truth))
                out.append("    misread " + " ".join(f"{v:9.4g}" for v in r.misread))
        verdict = ("OK" if self.ok else "FAILED") + (
            "" if self.hazard is None else (" (the hazard's damage showed)" if self.ok else " (no damage showed)"))
        out.append(verdict)
        return "\n".join(out)

    def __str__(self) -> str:
        return self.text()


# ---- source values -----------------------------------------------------------------------------
def source_values(fmt: str, shape: tuple[int, ...], generator: torch.Generator, device: torch.device) -> torch.Tensor:
    """Seeded fp32 source rows [..., rows, dims] for a format: randn times 2^u per 32 values (u
    uniform in [-SPREAD, SPREAD]), with some all-zero rows."""
    x = torch.randn(shape, generator=generator, device=device)
    spread = SPREAD.get(fmt, 0.0)
    dims = shape[-1]
    chunk = 32 if dims % 32 == 0 else dims
    u = (torch.rand(*shape[:-1], dims // chunk, 1, generator=generator, device=device) * 2 - 1) * spread
    keep = torch.rand(*shape[:-1], 1, 1, generator=generator, device=device) >= ZERO_ROW_FRACTION
    scale = torch.exp2(u) * keep  # one factor per 32 values; 0 for the all-zero rows
    return (x.unflatten(-1, (dims // chunk, chunk)) * scale).flatten(-2)


_MASK64 = 2**64 - 1


def _mix64(x: int) -> int:
    """splitmix64's finalizer: a bijection of 64-bit integers that scatters nearby inputs."""
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def unit_seed(seed: int, layer: int, unit: int) -> int:
    """The generator seed of one unit of one layer's pages: (seed, layer, unit) mixed in turn, so
    neighbouring layers and units get unrelated seeds (63 bits, as torch's manual_seed takes)."""
    x = _mix64((seed + 0x9E3779B97F4A7C15) & _MASK64)
    x = _mix64(x ^ layer)
    return _mix64(x ^ unit) >> 1


def _codec_opts(p: Placement) -> dict:
    """Encode options that make the codec's row match the layout's RowFormat (checked)."""
    fmt = p.cache.row_format
    opts: dict[str, Any] = {}
    if fmt.name == "fp8_ds_mla":
        # the RoPE tail is the payload's bf16 field (formats.ds_mla_row); asked by element type
        opts["rope_dims"] = sum(f.count for f in fmt.payload if f.element is formats.Element.BF16)
    if fmt.codec_name == "parts":  # hybrid rows: K|V or conv|SSM state, element by element
        opts["parts"] = quant.parts_of(fmt)
    codec = quant.get_codec(fmt.codec_name)
    got = codec.row_bytes(fmt.dims, **opts)
    require(got == (fmt.payload_bytes, fmt.footer_bytes),
            f"layer {p.name!r}: codec {fmt.name} makes rows of {got[0]} + {got[1]} B but the layout says "
            f"{fmt.payload_bytes} + {fmt.footer_bytes} B")
    return opts


# ---- blocks ------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class GroupRuns:
    """The blocks one group writes, ascending, as runs of equally spaced ids (one `range` per run:
    round robin and contiguous give one run; a hazard's extra block adds a run of one)."""

    runs: tuple[range, ...]

    @property
    def count(self) -> int:
        return sum(len(r) for r in self.runs)

    def first(self, n: int) -> tuple[int, ...]:
        out: list[int] = []
        for r in self.runs:
            out.extend(r[:n - len(out)])
            if len(out) >= n:
                break
        return tuple(out)

    def pieces(self, k0: int, k1: int) -> tuple[range, ...]:
        """The block ids at positions [k0, k1) of the ascending list, as runs."""
        out, base = [], 0
        for r in self.runs:
            lo, hi = max(k0 - base, 0), min(k1 - base, len(r))
            if lo < hi:
                out.append(r[lo:hi])
            base += len(r)
        return tuple(out)

    def position(self, block: int) -> int | None:
        base = 0
        for r in self.runs:
            if block in r:
                return base + r.index(block)
            base += len(r)
        return None

    def with_block(self, block: int) -> "GroupRuns":
        runs = []
        for r in self.runs:
            if block in r:
                i = r.index(block)
                runs += [r[:i], r[i + 1:]]
            else:
                runs.append(r)
        runs.append(range(block, block + 1))
        return GroupRuns(tuple(sorted((r for r in runs if len(r)), key=lambda r: r[0])))


def _assignment_runs(num_groups: int, num_blocks: int, assignment: str) -> tuple[GroupRuns, ...]:
    """Round robin: group g holds g, g + G, ...; contiguous: one run per group, in group order."""
    G = num_groups
    if assignment == "round-robin":
        return tuple(GroupRuns((range(g, num_blocks, G),)) for g in range(G))
    out, start = [], 0
    for g in range(G):
        n = num_blocks // G + (g < num_blocks % G)
        out.append(GroupRuns((range(start, start + n),)))
        start += n
    return tuple(out)


def _block_pool(runs: tuple[GroupRuns, ...], num_blocks: int) -> BlockPool:
    """A BlockPool whose owners follow `runs` (groups by index), filled in one tensor operation."""
    bp = BlockPool(num_blocks, max_groups=len(runs))
    owner = torch.full((num_blocks,), FREE, dtype=bp.owner_ids.dtype)
    for g, gr in enumerate(runs):
        for r in gr.runs:
            owner[r.start:r.stop:r.step] = g
    bp.assign(owner, range(len(runs)))
    return bp


# ---- batches and work items --------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Batch:
    """Layers of one group with one row format and equally spaced offsets: one strided view."""

    group: int
    placements: tuple[Placement, ...]
    indices: tuple[int, ...]  # each layer's index in layout.placements (its seed)
    opts: dict | None  # encode options; None: opaque bytes, no codec

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.placements)

    @property
    def first(self) -> Placement:
        return self.placements[0]

    @property
    def fmt(self) -> formats.RowFormat:
        return self.first.cache.row_format

    @property
    def page_bytes(self) -> int:
        return self.first.page_bytes

    @property
    def page_values(self) -> int:
        """Source values of one page (opaque: bytes)."""
        return self.page_bytes if self.opts is None else self.first.cache.rows * self.fmt.dims

    @property
    def unit_blocks(self) -> int:
        """Pages of one layer per generator (whole pages, at least one)."""
        return max(1, SEED_VALUES // self.page_values)

    @property
    def fingerprinted(self) -> bool:
        """Whether the write step fingerprints the pages (4-byte words, pages worth 8 B of memory)."""
        return (self.page_bytes >= FINGERPRINT_MIN_PAGE and self.page_bytes % 4 == 0
                and all(p.offset % 4 == 0 for p in self.placements))


def _same_kind(a: Placement, b: Placement) -> bool:
    return (a.cache.row_format == b.cache.row_format and a.page_bytes == b.page_bytes
            and a.cache.rows == b.cache.rows)


def chunk_values(device: torch.device, pool_bytes: int) -> int:
    """Source values per work item: CHUNK_VALUES on the CPU; on a GPU up to GPU_CHUNK_VALUES, with
    the working copies under a quarter of the pool."""
    if device.type == "cpu":
        return CHUNK_VALUES
    return max(CHUNK_VALUES, min(GPU_CHUNK_VALUES, pool_bytes // (4 * WORK_BYTES_PER_VALUE)))


def layer_batches(layout: Layout, chunk: int = CHUNK_VALUES) -> tuple[Batch, ...]:
    """Each group's layers, in order, cut into runs of one format at equally spaced offsets, each
    run cut so that one block of it holds at most `chunk` values."""
    index = {p.name: i for i, p in enumerate(layout.placements)}
    out = []
    for g in range(len(layout.groups)):
        run: list[Placement] = []

        def flush():
            if not run:
                return
            fmt = run[0].cache.row_format
            opaque = fmt.codec_name not in quant.CODECS
            if opaque:
                require(fmt.name == "opaque", f"layer {run[0].name!r}: format {fmt.name!r} has no codec in kvviz.quant")
            opts = None if opaque else _codec_opts(run[0])
            probe = Batch(g, (run[0],), (0,), opts)
            per = max(1, chunk // (probe.unit_blocks * probe.page_values))
            for i in range(0, len(run), per):
                part = tuple(run[i:i + per])
                out.append(Batch(g, part, tuple(index[p.name] for p in part), opts))
            run.clear()

        for p in layout.group_placements(g):
            if run and not (_same_kind(run[0], p) and (len(run) < 2 or p.offset - run[-1].offset
                                                       == run[1].offset - run[0].offset)
                            and p.offset > run[-1].offset):
                flush()
            run.append(p)
        flush()
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class WorkItem:
    """One batch over the group's blocks at positions [k0, k1) of its ascending list."""

    batch: Batch
    k0: int
    k1: int
    pieces: tuple[range, ...]  # those blocks, as runs of equally spaced ids

    @property
    def bytes(self) -> int:
        return (self.k1 - self.k0) * len(self.batch.placements) * self.batch.page_bytes


def _item_blocks(batch: Batch, chunk: int) -> int:
    """Blocks per work item: whole seed units, about `chunk` values."""
    u = batch.unit_blocks
    return u * max(1, chunk // (u * batch.page_values * len(batch.placements)))


def _work_items(batch: Batch, runs: GroupRuns, chunk: int) -> Iterator[WorkItem]:
    per = _item_blocks(batch, chunk)
    n = runs.count
    for k0 in range(0, n, per):
        k1 = min(n, k0 + per)
        yield WorkItem(batch, k0, k1, runs.pieces(k0, k1))


def layer_values(batch: Batch, j: int, k0: int, k1: int, n_owned: int, seed: int,
                  dev: torch.device) -> torch.Tensor:
    """Source of layer j of the batch for the group's blocks at positions [k0, k1): the units
    that cover them, each from its own generator (so any range regenerates alike)."""
    u = batch.unit_blocks
    p = batch.placements[j]
    parts = []
    for unit in range(k0 // u, (k1 - 1) // u + 1):
        n = min(u, n_owned - unit * u)  # the last unit holds the blocks that are left
        gen = torch.Generator(device=dev).manual_seed(unit_seed(seed, batch.indices[j], unit))
        if batch.opts is None:
            parts.append(torch.randint(0, 256, (n, p.page_bytes), generator=gen, device=dev, dtype=torch.uint8))
        else:
            parts.append(source_values(batch.fmt.name, (n, p.cache.rows, batch.fmt.dims), gen, dev))
    x = parts[0] if len(parts) == 1 else torch.cat(parts)
    lo = k0 - (k0 // u) * u
    return x[lo:lo + k1 - k0]

# ---- hazards -----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class HazardPlan:
    """What a hazard does to the run: extra owners before the writes, a flat range zeroed after
    them, the page it meant to zero, how it touched each block, the layer it misreads."""

    name: str
    description: str = ""
    facts: dict = dataclasses.field(default_factory=dict)
    claims: tuple[tuple[int, int], ...] = ()  # (group, block) claimed with hazard=True
    zero_flat: tuple[int, int] | None = None  # [lo, hi) of the flat backing zeroed after the writes
    zeroed_page: tuple[str, int] | None = None  # (layer, block): expected zero, left out of decode errors
    notes: dict = dataclasses.field(default_factory=dict)  # block -> how the hazard touched it
    misread: Placement | None = None


def _default_zeroer_layer(layout: Layout) -> Placement:
    idx = [p for p in layout.placements if p.cache.kind is CacheKind.INDEXER_K]
    if idx:
        g = idx[0].group
        members = [p for p in layout.group_placements(g) if p.cache.kind is CacheKind.INDEXER_K]
        middle = layout.group_placements(g)[len(layout.group_placements(g)) // 2].offset
        return min(members, key=lambda p: (abs(p.offset - middle), p.offset))
    gp = layout.group_placements(layout.largest_group)
    return gp[len(gp) // 2]


def _default_misread_layer(layout: Layout) -> Placement:
    for kinds in ((CacheKind.INDEXER_K,), None):
        for p in layout.placements:
            fmt = p.cache.row_format
            # a page of one row reads the same either way: only pages of several rows can be misread
            if (fmt.footer_bytes and p.cache.rows > 1 and fmt.codec_name in quant.CODECS
                    and (kinds is None or p.cache.kind in kinds)):
                return p
    raise KvvizError("--hazard=misread: the layout has no page of several rows whose second part (scales, V) "
                     "sits after every row's first part, so there is nothing to misread")


def _hazard_layer(layout: Layout, name: str | None, default) -> Placement:
    if name is None:
        return default(layout)
    p = layout.by_name.get(name)
    if p is None:
        raise KvvizError(f"--hazard-layer={name!r}: not a layer of this layout")
    return p


def _owner_of(runs: tuple[GroupRuns, ...], block: int) -> int | None:
    return next((g for g, gr in enumerate(runs) if gr.position(block) is not None), None)


def _setup_shared_block(layout: Layout, runs: tuple[GroupRuns, ...]) -> HazardPlan:
    """Group 1 claims group 0's first block; group 1 writes later, over group 0's pages."""
    names = [g.name for g in layout.groups]
    owner, intruder = 0, 1  # groups write in order, so the intruder (group 1) writes after the owner
    block = runs[owner].first(1)[0]
    return HazardPlan(
        "shared-block",
        description=(f"groups {names[owner]!r} (owner) and {names[intruder]!r} (claimed with hazard=True) both "
                     f"hold block {block}; {names[intruder]!r} wrote last, so the layers of {names[owner]!r} "
                     f"under its pages are overwritten"),
        facts={"block": block, "owner": names[owner], "intruder": names[intruder],
               "earlier_writer": names[owner], "later_writer": names[intruder]},
        claims=((intruder, block),), notes={block: f"overwritten by {names[intruder]}"})


def _zeroer_block(runs: tuple[GroupRuns, ...], group: int, num_blocks: int) -> int | None:
    """The group's lowest block followed by a block of another group, else its lowest block that
    has a next block at all (only run ends and strided runs can be followed by another group)."""
    mine = runs[group]
    ends = sorted({b for r in mine.runs for b in ((r[0], r[-1]) if r.step == 1 else (r[0],))})
    for b in ends:
        if b + 1 < num_blocks and _owner_of(runs, b + 1) != group:
            return b
    first = mine.first(1)
    return first[0] if first and first[0] + 1 < num_blocks else None


def _setup_zeroer(layout: Layout, runs: tuple[GroupRuns, ...], num_blocks: int, layer: str | None) -> HazardPlan:
    """Zero [offset, offset + stride) of the flat backing at one page (vLLM #50276's bug)."""
    names = [g.name for g in layout.groups]
    target = _hazard_layer(layout, layer, _default_zeroer_layer)
    stride = layout.block_stride
    zblock = _zeroer_block(runs, target.group, num_blocks)
    require(zblock is not None, f"num_blocks={num_blocks}: --hazard=zeroer needs a block of group "
                                f"{names[target.group]!r} followed by another block")
    lo = zblock * stride + target.offset
    spill_owner = _owner_of(runs, zblock + 1)
    return HazardPlan(
        "zeroer",
        description=(f"zeroed {target.name} in block {zblock} as flat [{lo:,}, {lo + stride:,}) = [offset, "
                     f"offset + stride) instead of [offset, offset + page) = [{lo:,}, {lo + target.page_bytes:,}): "
                     f"bytes [{target.end:,}, {stride:,}) of block {zblock} (its group's later layers) and "
                     f"{target.offset:,} bytes [0, {target.offset:,}) of block {zblock + 1}"
                     + (f" (owned by {names[spill_owner]!r})" if spill_owner is not None else "")),
        facts={"layer": target.name, "group": names[target.group], "block": zblock, "offset": target.offset,
               "page_bytes": target.page_bytes, "block_stride": stride, "meant": [lo, lo + target.page_bytes],
               "zeroed": [lo, lo + stride], "neighbour_range": [target.end, stride], "spill_block": zblock + 1,
               "spill_range": [0, target.offset],
               "spill_owner": None if spill_owner is None else names[spill_owner]},
        zero_flat=(lo, lo + stride), zeroed_page=(target.name, zblock),
        notes={zblock: "neighbour", zblock + 1: "spill"})


def _setup_misread(layout: Layout, layer: str | None) -> HazardPlan:
    """Pick the payload-first page the interleaved reader will misread after the read-back."""
    target = _hazard_layer(layout, layer, _default_misread_layer)
    fmt = target.cache.row_format
    require(fmt.footer_bytes > 0 and fmt.codec_name in quant.CODECS,
            f"--hazard-layer={target.name!r}: format {fmt.name} has no footer to misread")
    return HazardPlan("misread", misread=target)


def _setup_hazard(hazard: str | None, layout: Layout, runs, num_blocks: int, layer: str | None) -> HazardPlan | None:
    if hazard == "shared-block":
        return _setup_shared_block(layout, runs)
    if hazard == "zeroer":
        return _setup_zeroer(layout, runs, num_blocks, layer)
    if hazard == "misread":
        return _setup_misread(layout, layer)
    return None


# ---- one run -----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class _Run:
    """Everything the write and read-back steps share."""

    layout: Layout
    pool: Pool
    seed: int
    runs: tuple[GroupRuns, ...]  # the blocks each group writes (hazard claims included)
    batches: tuple[Batch, ...]
    hazard: HazardPlan | None
    chunk: int  # source values per work item (chunk_values)
    fingerprint_weights: dict = dataclasses.field(default_factory=dict)  # words -> weights (a cache)

    @property
    def device(self) -> torch.device:
        return self.pool.device

    def group_name(self, g: int) -> str:
        return self.layout.groups[g].name

    def note(self, block: int) -> str:
        return "" if self.hazard is None else self.hazard.notes.get(block, "")

    def items(self) -> Iterator[WorkItem]:
        for batch in self.batches:
            yield from _work_items(batch, self.runs[batch.group], self.chunk)

    def values(self, item: WorkItem) -> torch.Tensor:
        """Source of a work item: (blocks, layers, rows, dims) fp32, or (blocks, layers, page) uint8."""
        n = self.runs[item.batch.group].count
        return torch.stack([layer_values(item.batch, j, item.k0, item.k1, n, self.seed, self.device)
                            for j in range(len(item.batch.placements))], dim=1)

    def views(self, item: WorkItem) -> Iterator[tuple[int, int, range, torch.Tensor]]:
        """Per piece: its [a, b) positions in the item, its block ids and the pool's strided view."""
        a = 0
        for piece in item.pieces:
            b = a + len(piece)
            yield a, b, piece, self.pool.stacked_view(item.batch.names, slice(piece.start, piece.stop, piece.step))
            a = b

    def weights(self, words: int) -> torch.Tensor:
        """The fingerprint's odd int32 weight of each 4-byte word of a page (fixed, per page size)."""
        w = self.fingerprint_weights.get(words)
        if w is None:
            gen = torch.Generator().manual_seed(FINGERPRINT_SEED)
            w = torch.randint(-2**31, 2**31, (words,), generator=gen, dtype=torch.int32) | 1
            w = self.fingerprint_weights[words] = w.to(self.device)
        return w


@dataclasses.dataclass(frozen=True)
class _Encoded:
    """A work item's expected page bytes, and what decoding them needs."""

    pages: torch.Tensor  # (blocks, layers, page_bytes) uint8
    source: torch.Tensor | None  # fp32 source (None: opaque)
    encoded: quant.Encoded | None


def _encode(run: _Run, item: WorkItem) -> _Encoded:
    x = run.values(item)
    if item.batch.opts is None:
        return _Encoded(x, None, None)
    enc = quant.get_codec(item.batch.fmt.codec_name).encode(x, **item.batch.opts)
    return _Encoded(quant.pack_page(enc.payload, enc.footer, item.batch.page_bytes), x, enc)


def _fingerprint(run: _Run, pages: torch.Tensor) -> torch.Tensor:
    """(blocks, layers) int64: sum over a page's 4-byte words of word * weight, the products taken
    modulo 2^32 (int32 arithmetic wraps, two's complement, in torch's CPU and CUDA kernels).

    Any single changed byte changes its page's fingerprint: the word changes by d * 2^(8i) with
    0 < |d| < 256, i < 4, so its product changes by that times an odd weight, which is not 0
    modulo 2^32. Other changes go unseen only if they cancel modulo 2^32 (about 2^-32 for unrelated
    damage); a page whose fingerprint changed is compared byte for byte.
    """
    words = pages.view(torch.int32)
    return (words * run.weights(words.shape[-1])).sum(-1, dtype=torch.int64)


@dataclasses.dataclass(frozen=True)
class _Written:
    """What the write step keeps of one work item: its pages' fingerprints (None: not taken, the
    read-back regenerates the item) and the decode errors of its first block when it is the first
    work item of its batch."""

    fingerprint: torch.Tensor | None
    sample: tuple[str, "_ErrorSum"] | None


def _write_layers(run: _Run, progress: Callable[[int], None]) -> tuple[int, list[_Written]]:
    """Step 2: every batch's pages into the pool, through its strided views (one copy per view of
    the pages quant.pack_page laid out). Bytes written, and what the read-back needs per item."""
    written, kept = 0, []
    for item in run.items():
        exp = _encode(run, item)
        for a, b, _, view in run.views(item):
            view.copy_(exp.pages[a:b])
        sample = None
        if item.k0 == 0 and item.batch.opts is not None:
            first = _Encoded(exp.pages[:1], exp.source[:1], exp.encoded)
            sample = _decode_errors(run, item, first, exp.pages[:1], rows=SAMPLE_ROWS)
        kept.append(_Written(_fingerprint(run, exp.pages) if item.batch.fingerprinted else None, sample))
        written += item.bytes
        progress(item.bytes)
    return written, kept


def _apply_zeroer(run: _Run) -> None:
    if run.hazard is not None and run.hazard.zero_flat is not None:
        lo, hi = run.hazard.zero_flat
        run.pool.backing[lo:hi].zero_()  # the bug: a stride's worth from the layer's offset


@dataclasses.dataclass(frozen=True)
class _ErrorSum:
    """Decode errors of one format so far."""

    layers: frozenset[str] = frozenset()
    values: int = 0
    max_abs_error: float = 0.0
    max_error_over_bound: float = 0.0

    def merge(self, other: "_ErrorSum") -> "_ErrorSum":
        return _ErrorSum(self.layers | other.layers, self.values + other.values,
                         max(self.max_abs_error, other.max_abs_error),
                         max(self.max_error_over_bound, other.max_error_over_bound))


def _add_errors(errors: dict, sample: tuple[str, _ErrorSum] | None) -> None:
    if sample is not None:
        fmt, s = sample
        errors[fmt] = errors.get(fmt, _ErrorSum()).merge(s)


def _changed_ranges(diff: torch.Tensor) -> tuple[list[int], list[int], list[int], list[int]]:
    """Rows of a (n, bytes) bool diff that changed: their index, first and last changed byte, count."""
    changed = diff.any(dim=1)
    rows = changed.nonzero().flatten()
    d = diff[rows]
    first = d.to(torch.uint8).argmax(dim=1)
    last = d.shape[1] - 1 - d.flip(1).to(torch.uint8).argmax(dim=1)
    return rows.tolist(), first.tolist(), last.tolist(), d.sum(dim=1).tolist()


def _decode_errors(run: _Run, item: WorkItem, exp: _Encoded, got: torch.Tensor,
                   rows: int | None = None) -> tuple[str, _ErrorSum] | None:
    """Step 4 for one work item: decode the bytes read back, compare with the fp32 source (every
    row, or the first `rows` rows of each page: the sample of a clean item)."""
    batch = item.batch
    fmt = batch.fmt
    codec = quant.get_codec(fmt.codec_name)
    payload, footer = quant.unpack_page(got, batch.first.cache.rows, fmt.payload_bytes, fmt.footer_bytes)
    dec = codec.decode(quant.Encoded(payload, footer, exp.encoded.side, codec.name, exp.encoded.opts))
    x = exp.source
    if rows is not None:
        x, dec = x[..., :rows, :], dec[..., :rows, :]
    keep = torch.ones(dec.shape[:2], dtype=torch.bool, device=dec.device)
    if run.hazard is not None and run.hazard.zeroed_page is not None:
        layer, block = run.hazard.zeroed_page
        k = run.runs[batch.group].position(block)
        # `got` holds the item's first len(got) blocks (a clean item's sample is its first block
        # only), not always all of item.k0..item.k1: the zeroed page is left out only when it is
        # one of the blocks given.
        if layer in batch.names and k is not None and 0 <= k - item.k0 < keep.shape[0]:
            keep[k - item.k0, batch.names.index(layer)] = False  # the page the zeroer meant to clear
    if not bool(keep.all()):
        x, dec = x[keep], dec[keep]
    if not x.numel():
        return None
    err = torch.nan_to_num((dec - x).abs(), nan=math.inf)
    bopts = dict(exp.encoded.opts)
    if codec.side_option is not None and bopts.get(codec.side_option) is None:
        bopts[codec.side_option] = exp.encoded.side  # the per-tensor scale(s) the encoder chose, held outside the cache
    bound = quant.error_bound(codec.name, x, **bopts)
    ratio = torch.where(bound > 0, err / bound, torch.where(err > 0, math.inf, 0.0))
    return fmt.name, _ErrorSum(frozenset(batch.names), x.numel(), float(err.max()), float(ratio.max()))


def _read_back(run: _Run, written: list[_Written], progress: Callable[[int], None], corrupted: list,
               errors: dict) -> int:
    """Step 3 (and 4). A work item whose pages' fingerprints are what the write step took is
    intact (its first block's decode errors, measured on the bytes written, are those of the bytes
    read). Any other work item is regenerated from the seed, compared with the pool byte for byte
    (every changed page reported) and decoded: all of it when a page changed, else its first
    block when it is a batch's first item. Bytes read."""
    read = 0
    zeroed = None if run.hazard is None else run.hazard.zeroed_page
    for item, kept in zip(run.items(), written):
        batch = item.batch
        read += item.bytes
        progress(item.bytes)
        if kept.fingerprint is not None:
            now = torch.cat([_fingerprint(run, view) for _, _, _, view in run.views(item)])
            if torch.equal(now, kept.fingerprint):
                _add_errors(errors, kept.sample)
                continue
        exp = _encode(run, item)
        if zeroed is not None and zeroed[0] in batch.names:
            k = run.runs[batch.group].position(zeroed[1])
            if k is not None and item.k0 <= k < item.k1:
                exp.pages[k - item.k0, batch.names.index(zeroed[0])].zero_()  # what the zeroer meant
        damaged = False
        for a, b, piece, view in run.views(item):
            want = exp.pages[a:b]
            if torch.equal(view, want):
                continue
            damaged = True
            n, L, page = want.shape
            rows, first, last, count = _changed_ranges((view != want).reshape(n * L, page))
            for r, f, l, c in zip(rows, first, last, count):
                k, j = divmod(r, L)
                p = batch.placements[j]
                corrupted.append(Corruption(p.name, run.group_name(p.group), piece[k], p.offset + f,
                                            p.offset + l + 1, c, run.note(piece[k])))
        if batch.opts is not None and (item.k0 == 0 or damaged):
            got = torch.cat([view for _, _, _, view in run.views(item)])
            if not damaged:  # a clean item: its first block is the sample (see the module docstring)
                got, exp = got[:1], _Encoded(exp.pages[:1], exp.source[:1], exp.encoded)
            _add_errors(errors, _decode_errors(run, item, exp, got, rows=None if damaged else SAMPLE_ROWS))
    return read


def _check_unused(run: _Run, corrupted: list) -> int:
    """Every owned byte outside the group's pages must still be zero (a fresh pool). Bytes checked."""
    stride = run.layout.block_stride
    step = max(1, UNUSED_CHUNK_BYTES // stride)
    checked = 0
    for g, gr in enumerate(run.runs):
        ranges = run.layout.unused_ranges(g)
        if not ranges:
            continue
        for r in gr.runs:
            for i in range(0, len(r), step):
                piece = r[i:i + step]
                blocks = run.pool.blocks[piece.start:piece.stop:piece.step]
                for lo, hi in ranges:
                    region = blocks[:, lo:hi]
                    checked += region.numel()
                    if not bool(region.any()):
                        continue
                    rows, first, last, count = _changed_ranges(region != 0)
                    for k, f, l, c in zip(rows, first, last, count):
                        corrupted.append(Corruption(unused_label(run.group_name(g)), run.group_name(g), piece[k],
                                                    lo + f, lo + l + 1, c, run.note(piece[k])))
    return checked


# ---- running it --------------------------------------------------------------------------------
@contextlib.contextmanager
def cpu_threads(device: torch.device, n: int | None = 1):
    """Run with `n` torch intra-op threads on the CPU, restoring the old count afterwards.

    Why: every torch operation ends with its threads waiting for each other, so on a CPU that other
    work also uses, one descheduled thread stalls them all; with torch's two default threads on a
    loaded 2-core machine verify's strided copies took 11-105 s (36 s for 64 blocks of Pro in one
    run) instead of about 2.5 s with one. One thread makes the run's time depend on its own work
    only. n=None keeps torch's setting.
    """
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
            bar = tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1000, desc="verify", file=sys.stderr,
                       delay=PROGRESS_DELAY_S, leave=False, dynamic_ncols=True)
    try:
        yield (lambda n: None) if bar is None else bar.update
    finally:
        if bar is not None:
            bar.close()


def blocks_for_budget(layout: Layout, budget_bytes: int) -> int:
    """floor(budget / block_stride) (Layout.num_blocks); a budget under one stride is an error."""
    n = layout.num_blocks(budget_bytes)
    require(n > 0, f"--budget-gib/--budget-bytes: {budget_bytes:,} B is smaller than one block stride "
                   f"({layout.block_stride:,} B)")
    return n


def working_bytes(layout: Layout, num_blocks: int, chunk: int = CHUNK_VALUES) -> int:
    """Bytes verify needs besides the pool: the largest work item's working copies (source values,
    expected and read-back pages, decode buffers), the pages' fingerprints and the per-block
    ownership bookkeeping."""
    G = len(layout.groups)
    per_group = -(-num_blocks // G)
    item_values = fingerprints = 0
    for batch in layer_batches(layout, chunk):
        u = batch.unit_blocks
        blocks = min(per_group, _item_blocks(batch, chunk))
        item_values = max(item_values, (blocks + u) * len(batch.placements) * batch.page_values)
        if batch.fingerprinted:
            fingerprints += 8 * per_group * len(batch.placements)
    return item_values * WORK_BYTES_PER_VALUE + fingerprints + BlockPool.nbytes_for(num_blocks, G)


def _check_fit(layout: Layout, num_blocks: int, device: torch.device, chunk: int) -> None:
    """Refuse, before allocating anything, a pool plus verify's working copies that would not fit."""
    pool = num_blocks * layout.block_stride
    work = working_bytes(layout, num_blocks, chunk)
    check_fits(pool + work, device, what=f"num_blocks={num_blocks}: pool {pool:,} B + verify's working copies and "
                                         f"block bookkeeping {work:,} B")


def _check_args(layout, num_blocks, seed, hazard, assignment) -> None:
    require(hazard is None or hazard in HAZARDS, f"--hazard={hazard!r}: unknown; choose one of {', '.join(HAZARDS)}")
    require(assignment in ASSIGNMENTS, f"--assignment={assignment!r}: unknown; choose one of {', '.join(ASSIGNMENTS)}")
    require(isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0,
            f"--seed={seed!r}: must be a non-negative integer")
    require(isinstance(layout, Layout), f"layout: expected a kvviz Layout, got {type(layout).__name__}")
    G = len(layout.groups)
    require(isinstance(num_blocks, int) and not isinstance(num_blocks, bool) and num_blocks > 0,
            f"num_blocks={num_blocks!r}: must be a positive integer")
    require(num_blocks >= G, f"num_blocks={num_blocks}: verify gives every group its own blocks, so it needs "
                             f"at least {G} (one per group)")
    if hazard == "shared-block":
        require(G >= 2, "--hazard=shared-block: needs at least two groups (this layout has one)")


def verify(layout: Layout, num_blocks: int = VERIFY_BLOCKS, *, device: str | torch.device = "auto", seed: int = 0,
           hazard: str | None = None, assignment: str = "round-robin", hazard_layer: str | None = None,
           keep_pool: bool = False, corrupt: Callable[[Pool], None] | None = None,
           progress: bool | Callable[[int], None] = False, threads: int | None = 1) -> VerifyReport:
    """Write encoded data into every layer of every owned block of a real pool, read it back, and
    report every changed byte and the decode errors (see the module docstring).

    hazard: act one out (HAZARDS). corrupt: called with the Pool after the writes (and the hazard)
    and before the read-back, to change bytes on purpose (the report must then name each changed
    byte; tests/test_detection.py), e.g. ``corrupt=lambda pool: pool.blocks[3, 700].bitwise_xor_(1)``.
    keep_pool=True keeps the pool in the report (`report.pool.blocks`: the bytes as left).
    progress: True for a tqdm bar on stderr (runs over a few seconds), or a callback taking bytes
    done (write and read-back both count). threads: torch CPU threads during the run (see
    cpu_threads; None keeps torch's).
    """
    t_start = time.perf_counter()
    _check_args(layout, num_blocks, seed, hazard, assignment)
    dev = resolve_device(device)
    check_views(layout)
    chunk = chunk_values(dev, num_blocks * layout.block_stride)
    _check_fit(layout, num_blocks, dev, chunk)
    batches = layer_batches(layout, chunk)
    runs = _assignment_runs(len(layout.groups), num_blocks, assignment)
    plan = _setup_hazard(hazard, layout, runs, num_blocks, hazard_layer)
    bp = _block_pool(runs, num_blocks)
    for g, block in (() if plan is None else plan.claims):
        bp.claim(g, block, hazard=True)
        runs = runs[:g] + (runs[g].with_block(block),) + runs[g + 1:]
    pool = Pool(layout, num_blocks, dev)
    run = _Run(layout, pool, seed, runs, batches, plan, chunk)
    total = sum(item.bytes for item in run.items())

    corrupted: list[Corruption] = []
    errors: dict[str, _ErrorSum] = {}
    with cpu_threads(dev, threads), progress_bar(progress, 2 * total) as tick:
        _sync(dev)
        t0 = time.perf_counter()
        written, kept = _write_layers(run, tick)
        _apply_zeroer(run)
        if corrupt is not None:
            corrupt(pool)
        _sync(dev)
        t_write = time.perf_counter() - t0
        t0 = time.perf_counter()
        read = _read_back(run, kept, tick, corrupted, errors)
        unused = _check_unused(run, corrupted)
        misread = _misread_target(run)
        _sync(dev)
        t_check = time.perf_counter() - t0
    return VerifyReport(
        planner=layout.planner, block_stride=layout.block_stride, num_blocks=num_blocks, device=str(dev), seed=seed,
        assignment=assignment,
        groups=tuple(GroupBlocks(g.name, len(g.layers), runs[i].count, runs[i].first(JSON_BLOCKS))
                     for i, g in enumerate(layout.groups)),
        layers=len(layout.placements), pages=sum(len(i.batch.placements) * (i.k1 - i.k0) for i in run.items()),
        blocks=num_blocks - int((bp.owner_ids == FREE).sum()),
        bytes_written=written, bytes_read=read, unused_bytes=unused,
        formats=tuple(FormatError(name, len(s.layers), s.values, s.max_abs_error, s.max_error_over_bound)
                      for name, s in errors.items()),
        corrupted=tuple(sorted(corrupted, key=lambda c: (c.block, c.start))),
        hazard=_hazard_report(plan, misread),
        seconds=time.perf_counter() - t_start, timings=(("write", t_write), ("check", t_check)),
        owner_ids=bp.owner_ids, pool=pool if keep_pool else None,
    )


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _hazard_report(plan: HazardPlan | None, misread: "Misread | None") -> HazardReport | None:
    if plan is None:
        return None
    if misread is None:
        return HazardReport(plan.name, plan.description, plan.facts)
    m = misread
    facts = {"layer": m.layer, "group": m.group, "block": m.block, "format": m.format, "rows": m.rows,
             "payload_bytes": m.payload_bytes, "footer_bytes": m.footer_bytes}
    description = (f"{m.layer} ({m.format}) of block {m.block} was written payload-first ({m.rows} x "
                   f"{m.payload_bytes} B, then {m.rows} x {m.footer_bytes} B of scales) and read as {m.rows} "
                   f"interleaved rows of {m.payload_bytes + m.footer_bytes} B")
    return HazardReport(plan.name, description, facts, m)


def _misread_target(run: _Run) -> "Misread | None":
    """Step 5 of a misread hazard: read the target's first page with the interleaved reader."""
    if run.hazard is None or run.hazard.misread is None:
        return None
    p = run.hazard.misread
    batch = next(b for b in run.batches if p.name in b.names)
    gr = run.runs[p.group]
    x = layer_values(batch, batch.names.index(p.name), 0, 1, gr.count, run.seed, run.device)
    enc = quant.get_codec(batch.fmt.codec_name).encode(x, **batch.opts)
    return _misread(run.pool, p, gr.first(1)[0], x[0], enc.side, enc.opts, run.group_name(p.group))


def _misread(pool: Pool, p: Placement, block: int, source: torch.Tensor | None, side, opts,
             group: str) -> Misread:
    """Read one payload-first page with the interleaved reader and decode both readings."""
    fmt = p.cache.row_format
    rows, P, F = p.cache.rows, fmt.payload_bytes, fmt.footer_bytes
    codec = quant.get_codec(fmt.codec_name)
    page = pool.page_view(p.name)[block]  # the real memory
    tp, tf = quant.unpack_page(page, rows, P, F)
    wp, wf = quant.read_interleaved(page, rows, P, F)
    truth = codec.decode(quant.Encoded(tp, tf, side, codec.name, opts))
    wrong = codec.decode(quant.Encoded(wp, wf, side, codec.name, opts))
    same = (truth == wrong) | (torch.isnan(truth) & torch.isnan(wrong))
    wrong_rows = (~same.all(dim=1)).nonzero().flatten().tolist()
    err = torch.nan_to_num((wrong - truth).abs(), nan=math.inf)
    terr = 0.0 if source is None else float(torch.nan_to_num((truth - source).abs(), nan=math.inf).max())
    regions = {r.name: r for r in formats.page_regions(fmt, rows, p.page_bytes)}
    o = p.offset
    pay, foot = o + regions["payload"].start, o + regions["footer"].start  # where the writer put them
    sample = []
    k = min(MISREAD_VALUES, fmt.dims)
    for t in range(min(MISREAD_ROWS, rows)):
        sample.append(MisreadRow(
            row=t,
            source=tuple(source[t, :k].tolist()) if source is not None else (),
            truth=tuple(truth[t, :k].tolist()), misread=tuple(wrong[t, :k].tolist()),
            payload=(pay + t * P, pay + (t + 1) * P), footer=(foot + t * F, foot + (t + 1) * F),
            read_payload=(o + t * (P + F), o + t * (P + F) + P), read_footer=(o + t * (P + F) + P, o + (t + 1) * (P + F)),
        ))
    return Misread(p.name, group, block, fmt.name, rows, P, F, len(wrong_rows), tuple(wrong_rows),
                   float(err.max()), terr, tuple(sample))
