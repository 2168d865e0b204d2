"""Edges a user runs into: hazards acted out with contiguous block ids, signals, odd paths,
renders that fail or meet links, transformers' chatter. Each case is what a user relies on."""

from __future__ import annotations

import contextlib
import io

import pytest

from kvviz.cli import main


def invoke(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


# ---- verify: the zeroer with contiguous block ids -------------------------------------------
@pytest.mark.parametrize("model", ["deepseek-v4-pro", "gpt-oss-120b", "llama-4-scout"])
def test_zeroer_with_contiguous_assignment_shows_the_damage(model):
    """The zeroed page sits past a work item's first block: the first-block sample must not
    index it (it used to end in an IndexError traceback)."""
    code, out, err = invoke(["verify", "--model", model, "--hazard", "zeroer", "--assignment", "contiguous",
                             "--device", "cpu", "--blocks", "16"])
    assert (code, err) == (0, ""), err
    assert out.rstrip().endswith("OK (the hazard's damage showed)")
