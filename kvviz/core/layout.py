"""The `Layout` every planner produces: where each layer's page sits inside one block."""

from __future__ import annotations

import dataclasses
from functools import cached_property

from kvviz.base.defaults import GIB
from kvviz.base.errors import require
from kvviz.base.text import plural
from kvviz.core.group import KVGroup
from kvviz.core.kinds import CacheKind
from kvviz.core.spec import CacheSpec


@dataclasses.dataclass(frozen=True, slots=True)
class Placement:
    """One layer's page inside the per-block slab: bytes [offset, offset + page_bytes)."""

    cache: CacheSpec
    group: int  # index into Layout.groups
    offset: int

    @property
    def name(self) -> str:
        """The placed cache's vLLM layer name."""
        return self.cache.name

    @property
    def page_bytes(self) -> int:
        """The placed cache's page size in bytes."""
        return self.cache.page_bytes

    @property
    def end(self) -> int:
        """The byte just past this page in the block (offset + page bytes)."""
        return self.offset + self.cache.page_bytes


@dataclasses.dataclass(frozen=True, slots=True)
class SharedTensor:
    """One tensor of the pool: layers that start at `offset` (PR-era planners: one per distinct
    offset, layers of all groups there in group order), or, for vLLM 0.33, one spec of one group
    whose layers follow each other `layer_stride` bytes apart."""

    offset: int
    layers: tuple[str, ...]
    layer_stride: int | None = None


def text_table(rows: list[list], header: list[str]) -> str:
    """Rows as a plain-text table: first column left-aligned, the others right-aligned, a rule under
    the header (the text views of the CLI and of kvviz.hybrid)."""
    cells = [header] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.rjust(w) if j else c.ljust(w) for j, (c, w) in enumerate(zip(r, widths))) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


# The text map's glyphs, each kind's own (CacheKind's style record), and the glyph of padding.
GLYPHS = {k: k.glyph for k in CacheKind}
PADDING_GLYPH = "~"  # a page padded past its content (page_size_padded), in the text byte map


@dataclasses.dataclass(frozen=True)
class Layout:
    """A planned block: groups, every layer's offset, the shared tensors and the block stride."""

    planner: str
    groups: tuple[KVGroup, ...]
    placements: tuple[Placement, ...]  # group by group; within a group in planner order
    block_stride: int
    tensors: tuple[SharedTensor, ...]
    derivation: tuple[str, ...] = ()  # how the stride was computed, one line a term
    tokens_per_block: int | None = None  # the attention block size (None: as each cache says)

    def __post_init__(self) -> None:
        require(self.block_stride > 0, "block_stride: must be positive")

    # ---- lookups -------------------------------------------------------------------------
    @cached_property
    def by_name(self) -> dict[str, Placement]:
        return {p.name: p for p in self.placements}

    def placement(self, name: str) -> Placement:
        """The placement of the layer cache named `name` (vLLM's layer name); KeyError when there is none."""
        return self.by_name[name]

    @cached_property
    def _by_group(self) -> tuple[tuple[Placement, ...], ...]:
        """Placements indexed by group once (in planner order), so per-group views stay linear."""
        lanes: list[list[Placement]] = [[] for _ in self.groups]
        for p in self.placements:
            lanes[p.group].append(p)
        return tuple(map(tuple, lanes))

    def group_placements(self, group: int) -> tuple[Placement, ...]:
        """The placements of group `group`'s layers, in the group's order."""
        return self._by_group[group]

    # ---- derived sizes -------------------------------------------------------------------
    def group_total(self, group: int) -> int:
        """Bytes the group's pages take (sum of its pages)."""
        return self.groups[group].total_bytes

    def group_unused(self, group: int) -> int:
        """Bytes of the stride the group leaves unused (tail and holes)."""
        return self.block_stride - self.group_total(group)

    def unused_ranges(self, group: int) -> list[tuple[int, int]]:
        """Contiguous byte ranges of [0, block_stride) that none of the group's pages covers."""
        spans = sorted((p.offset, p.end) for p in self.group_placements(group))
        out, cursor = [], 0
        for lo, hi in spans:
            if lo > cursor:
                out.append((cursor, lo))
            cursor = max(cursor, hi)
        if cursor < self.block_stride:
            out.append((cursor, self.block_stride))
        return out

    @cached_property
    def largest_group(self) -> int:
        """Index of the group with the largest total (the first such group on a tie)."""
        return max(range(len(self.groups)), key=self.group_total)

    @cached_property
    def binding_group(self) -> int | None:
        """The group whose total is the stride (overlay planners); None when no group fills the
        stride (bucketed: the stride is a sum of page-size buckets)."""
        i = self.largest_group
        return i if self.group_total(i) == self.block_stride else None

    @property
    def binding_label(self) -> str:
        """The name of the group that sets the block stride, or a note that none does (bucketed layouts sum their
        page-size buckets)."""
        i = self.binding_group
        return self.groups[i].name if i is not None else "none (sum of page-size buckets)"

    @property
    def num_layers(self) -> int:
        """How many layer caches the block holds (one placement each)."""
        return len(self.placements)

    def num_blocks(self, budget_bytes: int) -> int:
        """floor(budget / stride): how many per-block slabs the budget holds (vLLM's
        `available_memory // page_size` with the block stride as the page)."""
        require(
            isinstance(budget_bytes, int) and not isinstance(budget_bytes, bool) and budget_bytes > 0,
            f"budget_bytes={budget_bytes!r}: must be a positive integer",
        )
        return budget_bytes // self.block_stride

    # ---- views ---------------------------------------------------------------------------
    def to_records(self) -> list[dict]:
        """One dict per placement: group, layer, kind, offset, page bytes and the rest of the row, for tables."""
        return [
            {
                "group": p.group,
                "group_name": self.groups[p.group].name,
                "layer": p.name,
                "kind": p.cache.kind.label,
                "offset": p.offset,
                "page_bytes": p.page_bytes,
                "end": p.end,
                "rows": p.cache.rows,
                "row_bytes": p.cache.row_bytes,
                "padding_bytes": p.cache.padding_bytes,
            }
            for p in self.placements
        ]

    def to_dataframe(self):
        """`to_records()` as a pandas DataFrame (pandas is imported here only)."""
        import pandas as pd  # only for tables: pandas stays off the light commands (plan, compare)

        return pd.DataFrame.from_records(self.to_records())

    def group_table(self):
        """One row per group: layers, total, unused bytes, whether it binds the stride."""
        import pandas as pd  # only for tables, as above

        return pd.DataFrame.from_records(
            [
                {
                    "group": g.name,
                    "layers": len(g.layers),
                    "total_bytes": self.group_total(i),
                    "unused_bytes": self.group_unused(i),
                    "binds_stride": i == self.binding_group,
                }
                for i, g in enumerate(self.groups)
            ]
        )

    def to_json(self, *, num_blocks: int | None = None) -> dict:
        """The layout as a JSON object: planner, block stride, binding group, each group's block size (tokens) and
        layers with their offsets and pages, and `num_blocks` when given."""
        return {
            "planner": self.planner,
            "block_stride": self.block_stride,
            "num_blocks": num_blocks,
            "binding_group": None if self.binding_group is None else self.groups[self.binding_group].name,
            "groups": [
                {
                    "name": g.name,
                    "tokens_per_block": g.tokens_per_block,
                    "total_bytes": self.group_total(i),
                    "unused_bytes": self.group_unused(i),
                    "layers": [
                        {"name": p.name, "kind": p.cache.kind.key, "offset": p.offset, "page_bytes": p.page_bytes}
                        for p in self.group_placements(i)
                    ],
                }
                for i, g in enumerate(self.groups)
            ],
            "tensors": [
                {"offset": t.offset, "shared_by": list(t.layers)}
                | ({"layer_stride": t.layer_stride} if t.layer_stride is not None else {})
                for t in self.tensors
            ],
            "derivation": list(self.derivation),
        }

    def text_map(self, width: int = 72) -> str:
        """A compact byte map: one lane per group, one glyph per width-th of the stride, '.' unused,
        '~' the padding of a padded page (page_size_padded)."""
        lines = []
        name_w = max(len(g.name) for g in self.groups)
        stride = self.block_stride
        padded = False
        for i, g in enumerate(self.groups):
            cells = ["."] * width
            for p in self.group_placements(i):
                content_end = p.end if p.cache.padded_page_bytes is None else p.offset + p.cache.content_bytes
                padded = padded or content_end < p.end
                for lo_b, hi_b, glyph in (
                    (p.offset, content_end, p.cache.kind.glyph),
                    (content_end, p.end, PADDING_GLYPH),
                ):
                    if hi_b <= lo_b:
                        continue
                    # Cells floor(lo*w/stride) .. ceil(hi*w/stride), at least one, clipped.
                    lo = lo_b * width // stride
                    hi = min(max(lo + 1, -(-hi_b * width // stride)), width)
                    if hi > lo:
                        cells[lo:hi] = glyph * (hi - lo)
            layers = "layer " if len(g.layers) == 1 else "layers"  # column width kept
            lines.append(
                f"{g.name:>{name_w}} |{''.join(cells)}| {len(g.layers):>4} {layers} {self.group_total(i):>14,} B"
            )
        kinds = dict.fromkeys(p.cache.kind for p in self.placements)
        legend = "  ".join(f"{k.glyph}={k.label}" for k in kinds)
        if padded:
            legend += f"  {PADDING_GLYPH}=padding"
        tokens = "" if self.tokens_per_block is None else f", {self.tokens_per_block} tokens"
        raised = {  # only raised: DeepSeek V4's compressed caches hold fewer entries a block, their own rule
            g.name: n
            for g in self.groups
            if (n := g.tokens_per_block) and self.tokens_per_block and n > self.tokens_per_block
        }
        if raised:  # a group whose block unify_kv_cache_spec_page_size raised (Gemma 4's sliding: 32)
            tokens += " (" + ", ".join(f"{name} {n}" for name, n in raised.items()) + ")"
        lines.append(f"{'':>{name_w}}  block stride {self.block_stride:,} B{tokens} ({self.planner})")
        lines.append(f"{'':>{name_w}}  {legend}  .=unused")
        return "\n".join(lines)

    def explain(self, budget_bytes: int | None = None) -> str:
        """How the stride was derived, term by term, and (with a budget) the block count."""
        lines = list(self.derivation)
        if budget_bytes is not None:
            blocks = self.num_blocks(budget_bytes)
            lines.append(
                f"{budget_bytes:,} B budget ({budget_bytes / GIB:.4f} GiB) // {self.block_stride:,} B "
                f"= {plural(blocks, 'block')} ({budget_bytes - blocks * self.block_stride:,} B left over)"
            )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text_map()
