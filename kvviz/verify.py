"""Write real, encoded KV data through a `Pool`'s views, read it back, and show the damage hazards do.

`verify(layout, num_blocks)`:

1. Block ownership. A `BlockPool` hands every group its own block ids. ``assignment="round-robin"``
   (the default) gives block b to group ``b % len(groups)``, so neighbouring blocks belong to
   different groups, as they do in a busy server; ``"contiguous"`` gives group g one run of ids.
   Every group needs at least one block.
2. Writes, group by group (groups in layout order, layers in group order): for each layer, seeded
   random fp32 source rows (``randn`` times a random power-of-two-ish magnitude per 32 values, some
   all-zero rows, so every scale path is exercised) are encoded with the layer's codec
   (`kvviz.quant`) and written into every owned block through the layer's uint8 page view,
   payloads first, then footers, then zero padding (`quant.write_page`). The expected page bytes
   are built separately (`quant.pack_page`) and kept. Opaque pages (groups from JSON) get seeded
   random bytes and are compared byte for byte only.
3. Read back: every layer of every owned block is compared with its expected bytes (a corrupted
   layer is reported with its block, the absolute byte range inside the block that changed, and
   the count of changed bytes), and the bytes read back are decoded and compared with the fp32
   source (max absolute error and max error / `quant.error_bound`, per format).

Hazards (REFERENCE.md section 8), each acted out on the real memory:

* ``shared-block``: a second group claims the first block of group 0 (``BlockPool.claim(...,
  hazard=True)``); group 1 when there are two or more groups. Both write (in group order); the
  victims are the earlier writer's layers whose bytes the later group's pages overwrote.
* ``zeroer``: after the writes, one layer's page in one block is zeroed the way vLLM #50276 did,
  as ``[offset, offset + stride)`` of the flat backing instead of ``[offset, offset + page)``:
  the following layers of the same group in that block are wiped and ``offset`` bytes spill into
  the next block, owned (round robin) by another group. The layer defaults to the indexer K cache
  nearest the middle of its group (the DSV4 incident lost indexer blocks), else the middle layer
  of the largest group; the block is the layer group's first block that has a next block.
* ``misread``: an indexer page written payload-first is read with `quant.read_interleaved` (rows
  of P + F bytes, the per-token layout) and decoded: truth vs misread values of the first rows,
  which bytes each reader took, and the error. The memory itself stays intact.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from typing import Any

import torch

from . import quant
from .errors import KvvizError, require
from .layout import Layout, Placement
from .pool import GIB, BlockPool, Pool, check_fits

HAZARDS = ("shared-block", "zeroer", "misread")
ASSIGNMENTS = ("round-robin", "contiguous")

# Source magnitudes: log2 of the per-32-value magnitude is uniform in [-SPREAD, SPREAD].
SPREAD = {"fp8_ds_mla": 6.0, "fp8": 2.0, "bf16": 8.0, "indexer_fp8": 6.0, "indexer_mxfp4": 6.0, "fp32": 8.0}
ZERO_ROW_FRACTION = 1 / 32  # all-zero rows exercise the amax floors
MISREAD_ROWS, MISREAD_VALUES = 4, 8  # how much of the misread page the report shows
# Up to this many bytes of fp32 source values are kept between writing and checking; above it the
# check regenerates them from the seed (same generator, same values), layer by layer.
KEEP_SOURCE_BYTES = 512 * 2**20
JSON_BLOCKS = 64  # block ids listed per group in to_json()


# ---- report ------------------------------------------------------------------------------------
def _num(x: float):
    """JSON-safe float: inf/nan as strings."""
    return x if math.isfinite(x) else str(x)


@dataclasses.dataclass(frozen=True)
class Corruption:
    """One layer of one block whose bytes differ from what its group wrote."""

    layer: str
    group: str
    block: int
    start: int  # absolute byte inside the block of the first changed byte
    end: int  # one past the last changed byte
    bytes_changed: int
    note: str = ""  # the hazard's reading: "neighbour", "spill", "overwritten by ..."

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
    name: str
    layers: int
    blocks: tuple[int, ...]

    def to_json(self) -> dict:
        shown = self.blocks[:JSON_BLOCKS]
        return {"name": self.name, "layers": self.layers, "num_blocks": len(self.blocks), "blocks": list(shown),
                "blocks_truncated": len(shown) < len(self.blocks)}


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
    hazard: HazardReport | None = None
    seconds: float = 0.0
    timings: tuple[tuple[str, float], ...] = ()
    # Which group holds each block (the first holder under a shared-block hazard; None: free), and,
    # with verify(..., keep_pool=True), the pool itself as the run left it (for kvviz.plot.live_bytes).
    block_groups: tuple[str | None, ...] = ()
    pool: Pool | None = dataclasses.field(default=None, repr=False, compare=False)

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
            "bytes_written": self.bytes_written, "bytes_read": self.bytes_read,
            "formats": [f.to_json() for f in self.formats],
            "corrupted": [c.to_json() for c in self.corrupted],
            "clean": self.clean, "within_bounds": self.within_bounds, "ok": self.ok,
            "hazard": None if self.hazard is None else self.hazard.to_json(),
            "seconds": round(self.seconds, 4), "timings": {k: round(v, 4) for k, v in self.timings},
        }

    def text(self, *, max_victims: int = 40) -> str:
        pool = self.num_blocks * self.block_stride
        out = [f"verify: {self.planner} layout, block stride {self.block_stride:,} B x {self.num_blocks:,} blocks "
               f"= {pool:,} B ({pool / GIB:.2f} GiB) on {self.device}, seed {self.seed}"]
        out.append(f"blocks ({self.assignment}): " + ", ".join(
            f"{g.name} {len(g.blocks)}" + (f" [{', '.join(map(str, g.blocks[:4]))}{', ...' if len(g.blocks) > 4 else ''}]"
                                          if g.blocks else "")
            for g in self.groups))
        out.append(f"checked {self.layers:,} layers in {self.pages:,} pages of {self.blocks:,} blocks; "
                   f"wrote {self.bytes_written:,} B, read back {self.bytes_read:,} B in {self.seconds:.2f} s")
        if self.formats:
            out.append("decode error vs the fp32 source (read-back bytes decoded):")
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


# ---- helpers -----------------------------------------------------------------------------------
def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _codec_opts(p: Placement) -> dict:
    """Encode options that make the codec's row match the layout's RowFormat (checked)."""
    fmt = p.cache.row_format
    opts: dict[str, Any] = {}
    if fmt.name == "fp8_ds_mla":
        opts["rope_dims"] = sum(f.count for f in fmt.payload if f.name == "RoPE")
    codec = quant.get_codec(fmt.name)
    got = codec.row_bytes(fmt.dims, **opts)
    require(got == (fmt.payload_bytes, fmt.footer_bytes),
            f"layer {p.name!r}: codec {fmt.name} makes rows of {got[0]} + {got[1]} B but the layout says "
            f"{fmt.payload_bytes} + {fmt.footer_bytes} B")
    return opts


def _layer_seed(seed: int, index: int) -> int:
    return (seed * 1_000_003 + index * 7_919 + 12_345) % (2**63 - 1)


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


def _selector(ids: list[int]):
    """A basic slice when the ids are an arithmetic progression (zero-copy view), else a LongTensor."""
    if len(ids) == 1:
        return slice(ids[0], ids[0] + 1)
    step = ids[1] - ids[0]
    if step > 0 and all(b - a == step for a, b in zip(ids, ids[1:])):
        return slice(ids[0], ids[-1] + 1, step)
    return ids


def _assign(layout: Layout, num_blocks: int, assignment: str) -> BlockPool:
    G = len(layout.groups)
    bp = BlockPool(num_blocks)
    if assignment == "round-robin":
        for b in range(num_blocks):
            bp.allocate(b % G, 1)  # the lowest free id: block b
    else:
        for g in range(G):
            bp.allocate(g, num_blocks // G + (g < num_blocks % G))
    return bp


def _default_zeroer_layer(layout: Layout) -> Placement:
    idx = [p for p in layout.placements if p.cache.kind.name == "INDEXER_K"]
    if idx:
        g = idx[0].group
        members = [p for p in layout.group_placements(g) if p.cache.kind.name == "INDEXER_K"]
        middle = layout.group_placements(g)[len(layout.group_placements(g)) // 2].offset
        return min(members, key=lambda p: (abs(p.offset - middle), p.offset))
    gp = layout.group_placements(layout.largest_group)
    return gp[len(gp) // 2]


def _default_misread_layer(layout: Layout) -> Placement:
    for names in (("indexer_mxfp4", "indexer_fp8"), None):
        for p in layout.placements:
            fmt = p.cache.row_format
            if (names is None and fmt.footer_bytes and fmt.name in quant.CODECS) or (names and fmt.name in names):
                return p
    raise KvvizError("--hazard=misread: the layout has no layer whose scales sit in a footer (no indexer K, "
                     "no fp8_ds_mla), so there is nothing to misread")


def _hazard_layer(layout: Layout, name: str | None, default) -> Placement:
    if name is None:
        return default(layout)
    p = layout.by_name.get(name)
    if p is None:
        raise KvvizError(f"--hazard-layer={name!r}: not a layer of this layout")
    return p


# ---- verify ------------------------------------------------------------------------------------
def verify(layout: Layout, num_blocks: int = 64, *, device: str | torch.device = "auto", seed: int = 0,
           hazard: str | None = None, assignment: str = "round-robin",
           hazard_layer: str | None = None, keep_pool: bool = False) -> VerifyReport:
    """Write encoded data into every layer of every owned block of a real pool, read it back,
    report corruption and decode errors (see the module docstring); `hazard` acts one out.
    keep_pool=True keeps the pool in the report (`report.pool.blocks`: the bytes as left)."""
    t_start = time.perf_counter()
    require(hazard is None or hazard in HAZARDS, f"--hazard={hazard!r}: unknown; choose one of {', '.join(HAZARDS)}")
    require(assignment in ASSIGNMENTS, f"assignment={assignment!r}: unknown; choose one of {', '.join(ASSIGNMENTS)}")
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
    pool = Pool(layout, num_blocks, device)
    dev = pool.device
    stride = layout.block_stride
    bp = _assign(layout, num_blocks, assignment)
    group_name = [g.name for g in layout.groups]

    # ---- hazard set-up ------------------------------------------------------------------------
    facts: dict[str, Any] = {}
    description = ""
    skip: set[tuple[str, int]] = set()  # (layer, block) pages left out of the decode statistics
    notes: dict[int, str] = {}  # block -> how the hazard touched it
    zeroer = misread_target = None
    if hazard == "shared-block":
        owner, intruder = 0, 1
        block = bp.blocks_of(owner)[0]
        bp.claim(intruder, block, hazard=True)
        earlier, later = min(owner, intruder), max(owner, intruder)
        facts = {"block": block, "owner": group_name[owner], "intruder": group_name[intruder],
                 "earlier_writer": group_name[earlier], "later_writer": group_name[later]}
        description = (f"groups {group_name[owner]!r} (owner) and {group_name[intruder]!r} (claimed with "
                       f"hazard=True) both hold block {block}; {group_name[later]!r} wrote last, so the "
                       f"layers of {group_name[earlier]!r} under its pages are overwritten")
        notes[block] = f"overwritten by {group_name[later]}"
    elif hazard == "zeroer":
        zeroer = _hazard_layer(layout, hazard_layer, _default_zeroer_layer)
        mine = bp.blocks_of(zeroer.group)
        cands = [b for b in mine if b + 1 < num_blocks]
        require(cands, f"num_blocks={num_blocks}: --hazard=zeroer needs a block of group "
                       f"{group_name[zeroer.group]!r} followed by another block")
        others = [b for b in cands if bp.owner(b + 1) != zeroer.group]
        zblock = (others or cands)[0]
        skip.add((zeroer.name, zblock))
        notes[zblock] = "neighbour"
        notes[zblock + 1] = "spill"
        lo = zblock * stride + zeroer.offset
        spill_owner = bp.owner(zblock + 1)
        facts = {"layer": zeroer.name, "group": group_name[zeroer.group], "block": zblock,
                 "offset": zeroer.offset, "page_bytes": zeroer.page_bytes, "block_stride": stride,
                 "meant": [lo, lo + zeroer.page_bytes], "zeroed": [lo, lo + stride],
                 "neighbour_range": [zeroer.end, stride], "spill_block": zblock + 1,
                 "spill_range": [0, zeroer.offset],
                 "spill_owner": None if spill_owner is None else group_name[spill_owner]}
        description = (f"zeroed {zeroer.name} in block {zblock} as flat [{lo:,}, {lo + stride:,}) = "
                       f"[offset, offset + stride) instead of [offset, offset + page) = [{lo:,}, "
                       f"{lo + zeroer.page_bytes:,}): bytes [{zeroer.end:,}, {stride:,}) of block {zblock} "
                       f"(its group's later layers) and {zeroer.offset:,} bytes [0, {zeroer.offset:,}) of "
                       f"block {zblock + 1}"
                       + (f" (owned by {group_name[spill_owner]!r})" if spill_owner is not None else ""))
    elif hazard == "misread":
        misread_target = _hazard_layer(layout, hazard_layer, _default_misread_layer)
        fmt = misread_target.cache.row_format
        require(fmt.footer_bytes > 0 and fmt.name in quant.CODECS,
                f"--hazard-layer={misread_target.name!r}: format {fmt.name} has no footer to misread")

    # ---- jobs: which blocks each layer is written to -------------------------------------------
    blocks_of = {g: bp.blocks_of(g) for g in range(G)}
    jobs = []
    for i, p in enumerate(layout.placements):
        ids = blocks_of[p.group]
        fmt = p.cache.row_format
        opaque = fmt.name not in quant.CODECS
        if opaque:
            require(fmt.name == "opaque", f"layer {p.name!r}: format {fmt.name!r} has no codec in kvviz.quant")
        jobs.append((i, p, ids, None if opaque else _codec_opts(p)))
    expected_bytes = sum(len(ids) * p.page_bytes for _, p, ids, _ in jobs)
    check_fits(expected_bytes, dev, what=f"num_blocks={num_blocks}: verify's copy of the expected bytes")

    def generator(i: int) -> torch.Generator:
        return torch.Generator(device=dev).manual_seed(_layer_seed(seed, i))

    source_bytes = sum(4 * len(ids) * p.cache.rows * p.cache.row_format.dims for _, p, ids, o in jobs if o is not None)
    kept: dict[str, torch.Tensor] | None = {} if source_bytes <= KEEP_SOURCE_BYTES else None

    def source(i: int, p: Placement, n: int) -> torch.Tensor:
        if kept is not None and p.name in kept:
            return kept.pop(p.name)
        fmt = p.cache.row_format
        x = source_values(fmt.name, (n, p.cache.rows, fmt.dims), generator(i), dev)
        if kept is not None:
            kept[p.name] = x
        return x

    # ---- write --------------------------------------------------------------------------------
    _sync(dev)
    t0 = time.perf_counter()
    expected: dict[str, torch.Tensor] = {}
    sides: dict[str, tuple] = {}
    bytes_written = 0
    for i, p, ids, opts in jobs:
        view = pool.page_view(p.name)
        sel = _selector(ids)
        if opts is None:
            exp = torch.randint(0, 256, (len(ids), p.page_bytes), generator=generator(i), device=dev,
                                dtype=torch.uint8)
            if isinstance(sel, slice):
                view[sel].copy_(exp)
            else:
                view[torch.tensor(sel, device=dev)] = exp
        else:
            fmt = p.cache.row_format
            x = source(i, p, len(ids))
            enc = quant.get_codec(fmt.name).encode(x, **opts)
            exp = quant.pack_page(enc.payload, enc.footer, p.page_bytes)
            if isinstance(sel, slice):
                quant.write_page(view[sel], enc.payload, enc.footer)  # in place, through the view
            else:
                view[torch.tensor(sel, device=dev)] = exp  # index_put through the view
            sides[p.name] = (enc.side, enc.opts)
        expected[p.name] = exp
        bytes_written += len(ids) * p.page_bytes
    if zeroer is not None:
        lo = facts["zeroed"][0]
        pool.backing[lo:lo + stride].zero_()  # the bug: a stride's worth from the layer's offset
        k = blocks_of[zeroer.group].index(facts["block"])
        expected[zeroer.name][k].zero_()  # what the zeroer meant: that layer's page, and only that
    _sync(dev)
    t_write = time.perf_counter() - t0

    # ---- read back, compare, decode -----------------------------------------------------------
    t0 = time.perf_counter()
    corrupted: list[Corruption] = []
    stats: dict[str, list] = {}  # format -> [layers, values, max abs, max ratio]
    misread = None
    bytes_read = pages = 0
    for i, p, ids, opts in jobs:
        view = pool.page_view(p.name)
        sel = _selector(ids)
        got = view[sel] if isinstance(sel, slice) else view[torch.tensor(sel, device=dev)]
        exp = expected[p.name]
        bytes_read += got.numel()
        pages += len(ids)
        diff = got != exp
        changed = diff.any(dim=1)
        if bool(changed.any()):
            rows_bad = changed.nonzero().flatten()
            d = diff[rows_bad]
            first = d.to(torch.uint8).argmax(dim=1)
            last = p.page_bytes - 1 - d.flip(1).to(torch.uint8).argmax(dim=1)
            count = d.sum(dim=1)
            for r, f, l, c in zip(rows_bad.tolist(), first.tolist(), last.tolist(), count.tolist()):
                b = ids[r]
                corrupted.append(Corruption(p.name, group_name[p.group], b, p.offset + f, p.offset + l + 1, c,
                                            notes.get(b, "")))
        if opts is None:
            continue
        fmt = p.cache.row_format
        codec = quant.get_codec(fmt.name)
        x = source(i, p, len(ids))
        payload, footer = quant.unpack_page(got, p.cache.rows, fmt.payload_bytes, fmt.footer_bytes)
        side, eopts = sides[p.name]
        dec = codec.decode(quant.Encoded(payload, footer, side, fmt.name, eopts))
        keep = [k for k, b in enumerate(ids) if (p.name, b) not in skip]
        if len(keep) < len(ids):
            keep_t = torch.tensor(keep, device=dev, dtype=torch.long)
            x, dec = x[keep_t], dec[keep_t]
        if x.numel():
            err = torch.nan_to_num((dec - x).abs(), nan=math.inf)
            bopts = dict(eopts)
            if fmt.name == "fp8" and bopts.get("scale") is None:
                bopts["scale"] = side  # the per-tensor scale the encoder chose, held outside the cache
            bound = quant.error_bound(fmt.name, x, **bopts)
            ratio = torch.where(bound > 0, err / bound, torch.where(err > 0, math.inf, 0.0))
            s = stats.setdefault(fmt.name, [0, 0, 0.0, 0.0])
            s[0] += 1
            s[1] += x.numel()
            s[2] = max(s[2], float(err.max()))
            s[3] = max(s[3], float(ratio.max()))
        if misread_target is not None and p.name == misread_target.name:
            misread = _misread(pool, p, ids[0], x[0] if (p.name, ids[0]) not in skip else None,
                               side, eopts, group_name[p.group])
    _sync(dev)
    t_check = time.perf_counter() - t0

    if misread is not None:
        facts = {"layer": misread.layer, "group": misread.group, "block": misread.block, "format": misread.format,
                 "rows": misread.rows, "payload_bytes": misread.payload_bytes, "footer_bytes": misread.footer_bytes}
        description = (f"{misread.layer} ({misread.format}) of block {misread.block} was written payload-first "
                       f"({misread.rows} x {misread.payload_bytes} B, then {misread.rows} x {misread.footer_bytes} B "
                       f"of scales) and read as {misread.rows} interleaved rows of "
                       f"{misread.payload_bytes + misread.footer_bytes} B")
    haz = None
    if hazard is not None:
        haz = HazardReport(hazard, description, facts, misread)
    order = sorted(range(len(corrupted)), key=lambda k: (corrupted[k].block, corrupted[k].start))
    formats = tuple(FormatError(name, s[0], s[1], s[2], s[3]) for name, s in stats.items())
    return VerifyReport(
        planner=layout.planner, block_stride=stride, num_blocks=num_blocks, device=str(dev), seed=seed,
        assignment=assignment,
        groups=tuple(GroupBlocks(g.name, len(g.layers), tuple(bp.blocks_of(gi))) for gi, g in enumerate(layout.groups)),
        layers=len(jobs), pages=pages, blocks=sum(1 for b in range(num_blocks) if bp.owner(b) is not None),
        bytes_written=bytes_written, bytes_read=bytes_read, formats=formats,
        corrupted=tuple(corrupted[k] for k in order), hazard=haz,
        seconds=time.perf_counter() - t_start, timings=(("write", t_write), ("check", t_check)),
        block_groups=tuple(None if bp.owner(b) is None else group_name[bp.owner(b)] for b in range(num_blocks)),
        pool=pool if keep_pool else None,
    )


def _misread(pool: Pool, p: Placement, block: int, source: torch.Tensor | None, side, opts, group: str) -> Misread:
    """Read one payload-first page with the interleaved reader and decode both readings."""
    fmt = p.cache.row_format
    rows, P, F = p.cache.rows, fmt.payload_bytes, fmt.footer_bytes
    codec = quant.get_codec(fmt.name)
    page = pool.page_view(p.name)[block]  # the real memory
    tp, tf = quant.unpack_page(page, rows, P, F)
    wp, wf = quant.read_interleaved(page, rows, P, F)
    truth = codec.decode(quant.Encoded(tp, tf, side, fmt.name, opts))
    wrong = codec.decode(quant.Encoded(wp, wf, side, fmt.name, opts))
    same = (truth == wrong) | (torch.isnan(truth) & torch.isnan(wrong))
    wrong_rows = (~same.all(dim=1)).nonzero().flatten().tolist()
    err = torch.nan_to_num((wrong - truth).abs(), nan=math.inf)
    terr = 0.0 if source is None else float(torch.nan_to_num((truth - source).abs(), nan=math.inf).max())
    o = p.offset
    sample = []
    k = min(MISREAD_VALUES, fmt.dims)
    for t in range(min(MISREAD_ROWS, rows)):
        sample.append(MisreadRow(
            row=t,
            source=tuple(source[t, :k].tolist()) if source is not None else (),
            truth=tuple(truth[t, :k].tolist()), misread=tuple(wrong[t, :k].tolist()),
            payload=(o + t * P, o + (t + 1) * P), footer=(o + rows * P + t * F, o + rows * P + (t + 1) * F),
            read_payload=(o + t * (P + F), o + t * (P + F) + P), read_footer=(o + t * (P + F) + P, o + (t + 1) * (P + F)),
        ))
    return Misread(p.name, group, block, fmt.name, rows, P, F, len(wrong_rows), tuple(wrong_rows),
                   float(err.max()), terr, tuple(sample))


# ---- CLI ---------------------------------------------------------------------------------------
def register(subparsers) -> None:
    from .cli import add_budget_arguments, add_model_arguments

    p = subparsers.add_parser("verify", help="write encoded data through real pool views, read it back, show hazards")
    add_model_arguments(p)
    add_budget_arguments(p)
    p.add_argument("--blocks", type=int, default=None, help="number of blocks (default 64; or give a budget)")
    p.add_argument("--device", default="auto", help="auto (CUDA when available), cpu, cuda or cuda:N")
    p.add_argument("--seed", type=int, default=0, help="seed of the source values (default 0)")
    p.add_argument("--hazard", choices=HAZARDS, default=None, help="act out a known overlay hazard")
    p.add_argument("--hazard-layer", default=None, help="the layer the zeroer/misread hazard acts on")
    p.add_argument("--assignment", choices=ASSIGNMENTS, default="round-robin",
                   help="how block ids go to groups (default round-robin: block b to group b mod groups)")
    p.add_argument("--json", action="store_true", help="machine-readable output, every victim listed")
    p.set_defaults(func=run)


def run(args) -> int:
    """`kvviz verify`: 0 when the check held (clean, or the hazard's damage showed), 1 otherwise."""
    from .capacity import num_blocks as blocks_for
    from .cli import budget_from_args, layout_from_args

    layout = layout_from_args(args)
    budget = budget_from_args(args)
    if budget is not None:
        require(args.blocks is None, "--blocks: give either --blocks or a budget (--budget-gib/--budget-bytes)")
        n = blocks_for(layout, budget)
        require(n > 0, f"--budget-gib/--budget-bytes: {budget:,} B is smaller than one block stride "
                       f"({layout.block_stride:,} B)")
    else:
        n = 64 if args.blocks is None else args.blocks
        require(n > 0, f"--blocks={n}: must be a positive integer")
    report = verify(layout, n, device=args.device, seed=args.seed, hazard=args.hazard,
                    assignment=args.assignment, hazard_layer=args.hazard_layer)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(report.text())
    return 0 if report.ok else 1
