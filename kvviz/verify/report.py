"""What a verify run found: every changed byte range, the decode errors, the hazard's reading,
and its verdicts, as text (`VerifyReport.text`) and JSON (`VerifyReport.to_json`).

Two verdicts that mean different things: `clean` (no byte of an owned block differs from what its
group wrote) and `hazard_showed` (a hazard run only: the damage it acts out is visible). `passed`
is the one a command turns into its exit status: clean and within the codecs' bounds for a plain
run, the damage visible for a hazard run.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from kvviz.base.inputs import of_type
from kvviz.base.text import binary_size, bytes_label
from kvviz.pool import FREE, Pool

JSON_BLOCKS = 64  # block ids listed per group in to_json()


def unused_label(group: str) -> str:
    """The name a corruption of a group's unused bytes is reported under."""
    of_type(group, str, field="group", give="a group's name")
    return f"unused bytes of group {group}"


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
        """The record as JSON-safe values."""
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
        """Whether every value decoded within quant.error_bound."""
        return self.max_error_over_bound <= 1.0

    def to_json(self) -> dict:
        """The record as JSON-safe values."""
        return {
            "format": self.format,
            "layers": self.layers,
            "values": self.values,
            "max_abs_error": _num(self.max_abs_error),
            "max_error_over_bound": _num(self.max_error_over_bound),
            "within_bound": self.within_bound,
        }


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
        """The record as JSON-safe values."""
        d = dataclasses.asdict(self)
        for k in ("source", "truth", "misread"):
            d[k] = [_num(v) for v in d[k]]
        return d


@dataclasses.dataclass(frozen=True)
class Misread:
    """The misread hazard's reading of one payload-first page with the interleaved reader."""

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
        """The record as JSON-safe values."""
        d = {
            k: getattr(self, k)
            for k in ("layer", "group", "block", "format", "rows", "payload_bytes", "footer_bytes", "rows_wrong")
        }
        d["wrong_rows"] = list(self.wrong_rows)
        d["max_abs_error"] = _num(self.max_abs_error)
        d["truth_max_abs_error"] = _num(self.truth_max_abs_error)
        d["sample"] = [r.to_json() for r in self.sample]
        return d


@dataclasses.dataclass(frozen=True)
class HazardReport:
    """What a hazard did (its description and facts), its misread page, and whether it showed."""

    name: str
    description: str
    facts: dict  # what the hazard did: blocks, groups, byte ranges
    misread: Misread | None = None
    showed: bool = False  # whether the damage is visible (the hazard's own reading of the run)

    def to_json(self) -> dict:
        """The record as JSON-safe values."""
        return {
            "name": self.name,
            "description": self.description,
            "facts": self.facts,
            "misread": None if self.misread is None else self.misread.to_json(),
            "showed": self.showed,
        }


@dataclasses.dataclass(frozen=True)
class GroupBlocks:
    """The blocks one group held: how many, and the first JSON_BLOCKS ids (ascending)."""

    name: str
    layers: int
    num_blocks: int
    first_blocks: tuple[int, ...]

    def to_json(self) -> dict:
        """The record as JSON-safe values."""
        return {
            "name": self.name,
            "layers": self.layers,
            "num_blocks": self.num_blocks,
            "blocks": list(self.first_blocks),
            "blocks_truncated": len(self.first_blocks) < self.num_blocks,
        }


@dataclasses.dataclass(frozen=True)
class VerifyReport:
    """Everything one verify run found (see the module docstring for its verdicts)."""

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
    # it (for kvviz.views.live_bytes).
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
        """GB (10^9 B) written through the page views."""
        return self.bytes_written / 1e9

    @property
    def gb_per_s(self) -> float:
        """GB (10^9 B) written per second of the whole run (write, read back, compare, decode)."""
        return self.gb_written / self.seconds if self.seconds > 0 else math.inf

    @property
    def clean(self) -> bool:
        """No byte of an owned block differs from what its group wrote."""
        return not self.corrupted

    @property
    def within_bounds(self) -> bool:
        """Every sampled value decoded within its codec's error bound."""
        return all(f.within_bound for f in self.formats)

    @property
    def hazard_showed(self) -> bool | None:
        """A hazard run: whether its damage is visible (each hazard's own reading: corrupted
        layers, or for misread intact memory read wrong). None for a plain run."""
        return None if self.hazard is None else self.hazard.showed

    @property
    def passed(self) -> bool:
        """What the run set out to show held: a plain run is clean and within every codec's bound;
        a hazard run's damage showed. The CLI's exit status (0) and JSON's "passed"."""
        return self.clean and self.within_bounds if self.hazard is None else bool(self.hazard.showed)

    @property
    def ok(self) -> bool:
        """The same as `passed` (kept for callers of kvviz 0.2; say `clean` or `hazard_showed`)."""
        return self.passed

    def to_json(self) -> dict:
        """The record as JSON-safe values."""
        return {
            "planner": self.planner,
            "block_stride": self.block_stride,
            "num_blocks": self.num_blocks,
            "pool_bytes": self.num_blocks * self.block_stride,
            "device": self.device,
            "seed": self.seed,
            "assignment": self.assignment,
            "groups": [g.to_json() for g in self.groups],
            "layers": self.layers,
            "pages": self.pages,
            "blocks": self.blocks,
            "bytes_written": self.bytes_written,
            "gb_written": round(self.gb_written, 6),
            "bytes_read": self.bytes_read,
            "unused_bytes": self.unused_bytes,
            "formats": [f.to_json() for f in self.formats],
            "corrupted": [c.to_json() for c in self.corrupted],
            "clean": self.clean,
            "within_bounds": self.within_bounds,
            "hazard_showed": self.hazard_showed,
            "passed": self.passed,
            "ok": self.passed,
            "hazard": None if self.hazard is None else self.hazard.to_json(),
            "seconds": round(self.seconds, 4),
            "gb_per_s": _num(round(self.gb_per_s, 4)),
            "timings": {k: round(v, 4) for k, v in self.timings},
        }

    def text(self, *, max_victims: int = 40) -> str:
        """The report for a terminal: pool, blocks, what was checked, decode errors, victims, verdict."""
        pool = self.num_blocks * self.block_stride
        out = [
            f"verify: {self.planner} layout, block stride {self.block_stride:,} B x {self.num_blocks:,} blocks "
            f"= {bytes_label(pool)} on {self.device}, seed {self.seed}"
        ]
        out.append(
            f"blocks ({self.assignment}): "
            + ", ".join(
                f"{g.name} {g.num_blocks:,}"
                + (
                    f" [{', '.join(map(str, g.first_blocks[:4]))}{', ...' if g.num_blocks > 4 else ''}]"
                    if g.num_blocks
                    else ""
                )
                for g in self.groups
            )
        )
        out.append(
            f"checked {self.layers:,} layers in {self.pages:,} pages of {self.blocks:,} blocks, and "
            f"{self.unused_bytes:,} B no page covers; wrote {bytes_label(self.bytes_written)}, "
            f"read back {self.bytes_read:,} B in {self.seconds:.2f} s = "
            f"{binary_size(round(self.bytes_written / self.seconds)) if self.seconds > 0 else '-'}/s"
        )
        if self.formats:
            out.append(
                "decode error vs the fp32 source (read-back bytes decoded: the sample of real "
                "rows in each group's first block):"
            )
            damaged = " (includes the corrupted pages)" if self.corrupted else ""
            w = max(len(f.format) for f in self.formats)
            for f in self.formats:
                out.append(
                    f"  {f.format:<{w}}  {f.layers:>4} layers  {f.values:>12,} values  "
                    f"max abs {f.max_abs_error:.3g}  max err/bound {f.max_error_over_bound:.3g}"
                    f"{'' if f.within_bound else '  OUT OF BOUND' + damaged}"
                )
        if self.hazard is not None:
            out.append(f"hazard {self.hazard.name}: {self.hazard.description}")
        if self.corrupted:
            out.append(f"corrupted layers: {len(self.corrupted)}")
            for c in self.corrupted[:max_victims]:
                out.append(
                    f"  block {c.block:>5}  {c.group:<10}  {c.layer}  bytes [{c.start:,}, {c.end:,}) "
                    f"{c.bytes_changed:,} changed{'  (' + c.note + ')' if c.note else ''}"
                )
            if len(self.corrupted) > max_victims:
                out.append(f"  ... and {len(self.corrupted) - max_victims} more (--json lists all)")
        else:
            out.append("corrupted layers: none")
        m = self.hazard.misread if self.hazard is not None else None
        if m is not None:
            out.append(
                f"misread {m.layer} ({m.format}, block {m.block}): {m.rows_wrong} of {m.rows} rows wrong, "
                f"max |misread - truth| {m.max_abs_error:.3g} (quantization error alone "
                f"{m.truth_max_abs_error:.3g})"
            )
            for r in m.sample:
                out.append(
                    f"  row {r.row}: payload [{r.payload[0]:,}, {r.payload[1]:,}) scales "
                    f"[{r.footer[0]:,}, {r.footer[1]:,}); interleaved reader took [{r.read_payload[0]:,}, "
                    f"{r.read_payload[1]:,}) and [{r.read_footer[0]:,}, {r.read_footer[1]:,})"
                )
                out.append("    source  " + " ".join(f"{v:9.4g}" for v in r.source))
                out.append("    truth   " + " ".join(f"{v:9.4g}" for v in r.truth))
                out.append("    misread " + " ".join(f"{v:9.4g}" for v in r.misread))
        verdict = ("OK" if self.passed else "FAILED") + (
            ""
            if self.hazard is None
            else (" (the hazard's damage showed)" if self.hazard_showed else " (no damage showed)")
        )
        out.append(verdict)
        return "\n".join(out)

    def __str__(self) -> str:
        """text()."""
        return self.text()
