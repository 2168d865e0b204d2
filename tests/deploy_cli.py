"""`kvviz plan --json` run in-process (kvviz.cli main) on a recorded deploy case's config and knobs: the argv
both deploy reference tests (tests/test_deploy_axes.py, tests/test_deploy_more.py) build from a case's options."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path


def plan_argv(config_dir: Path, options: dict, budget: int, mnbt: int, max_model_len: int | None = None) -> list[str]:
    """The CLI flags for a case's options (tp, pp, partition, dcp, offload) at a budget and max_num_batched_tokens."""
    argv = ["plan", "--hf-config", str(config_dir), "--json", "--budget-bytes", str(budget)]
    if max_model_len is not None:
        argv += ["--max-model-len", str(max_model_len)]
    argv += ["--max-num-batched-tokens", str(mnbt), "--tensor-parallel-size", str(options.get("tp", 1))]
    if options.get("pp", 1) > 1:
        argv += ["--pipeline-parallel-size", str(options["pp"])]
    if "partition" in options:
        argv += ["--pp-layer-partition", options["partition"]]
    if options.get("dcp", 1) > 1:
        argv += ["--decode-context-parallel-size", str(options["dcp"])]
    if "offload" in options:
        argv += ["--kv-offloading-size", str(options["offload"])]
    return argv


def run_plan(argv: list[str]) -> tuple[int, dict | None, str]:
    """(exit status, the --json document when it succeeded, stderr)."""
    from kvviz.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 2
    return rc, (json.loads(out.getvalue()) if rc == 0 else None), err.getvalue()
