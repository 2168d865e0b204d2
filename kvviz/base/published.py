"""vLLM #48993's published before/after table, as data (docs/published-numbers.md#the-published-table).

The only home of these numbers in the package: `kvviz compare` prints them next to its own, and the
budget range that reproduces them is derived from them (docs/published-numbers.md#budget-rounding),
never typed.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, kw_only=True)
class PublishedRow:
    """One row of the table: DeepSeek V4 Pro (MTP included) on one backend."""

    model: str
    backend: str
    budget_gib: float  # as published: rounded to 0.01 GiB
    blocks_before: int  # bucketed + padding + FP8 (132 B) indexer rows
    blocks_after: int  # overlay + MXFP4 (68 B) indexer rows


PUBLISHED_TABLE = (
    PublishedRow(
        model="deepseek-v4-pro", backend="flashinfer", budget_gib=26.46, blocks_before=21_709, blocks_after=23_120
    ),
    PublishedRow(
        model="deepseek-v4-pro", backend="flashmla", budget_gib=26.09, blocks_before=19_015, blocks_after=21_306
    ),
)


def published_row(model: str, backend: str) -> PublishedRow | None:
    """The published row for a model and backend, or None when the table has none."""
    return next((r for r in PUBLISHED_TABLE if (r.model, r.backend) == (model, backend)), None)
