"""Write real data through a `Pool`'s views, read it back, and show the damage hazards do.

`verify(layout, num_blocks)` (kvviz.verify.run) puts together rooms with one job each:

* `report`: what a run found (VerifyReport: `clean`, `hazard_showed`, `passed`; text and JSON);
* `source`: the seeded content: a per-page integer pattern for the bulk, seeded fp32 rows for
  the real codec sample;
* `batches`: layers written as one strided view, and work items;
* `engine`: writes and reads back a Layout's pages in a Pool, blocks as the BlockPool hands them
  out (kvviz.pool.BlockPool, the one owner of block ownership); knows nothing of hazards;
* `samples`: real rows through kvviz.quant's encoders, and their decode errors;
* `hazards`: one module per hazard (shared-block, zeroer, misread; docs/hazards.md);
* `guards`: memory the run needs (checked before allocating), allocator failures, CPU threads,
  progress.
"""

from __future__ import annotations

from kvviz.pool import ASSIGNMENTS
from kvviz.verify.batches import Batch, WorkItem, layer_batches
from kvviz.verify.guards import cpu_threads, working_bytes
from kvviz.verify.hazards import HAZARDS
from kvviz.verify.report import (
    Corruption,
    FormatError,
    GroupBlocks,
    HazardReport,
    Misread,
    MisreadRow,
    VerifyReport,
    unused_label,
)
from kvviz.verify.run import blocks_for_budget, verify
from kvviz.verify.samples import SAMPLE_ROWS
from kvviz.verify.source import source_values

__all__ = [
    "verify",
    "VerifyReport",
    "Corruption",
    "FormatError",
    "GroupBlocks",
    "HazardReport",
    "Misread",
    "MisreadRow",
    "HAZARDS",
    "ASSIGNMENTS",
    "blocks_for_budget",
    "layer_batches",
    "Batch",
    "WorkItem",
    "working_bytes",
    "cpu_threads",
    "source_values",
    "unused_label",
    "SAMPLE_ROWS",
]
