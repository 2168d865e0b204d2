"""Re-make the shipped parsed form of every preset (`kvviz/presets/parsed/`): run
`python -m kvviz.tools.remake_parsed` after changing a preset or a family reader."""

from __future__ import annotations

import json
import sys

from kvviz.families.loader import PRESETS_DIR, model_from_dict, preset_names
from kvviz.families.parsed import write_shipped


def main() -> int:
    """Re-make the shipped parsed form of every preset (run after changing a preset or a reader)."""
    for name in preset_names():
        data = (PRESETS_DIR / f"{name}.json").read_bytes()
        print(write_shipped(name, data, model_from_dict(json.loads(data), name=name)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
