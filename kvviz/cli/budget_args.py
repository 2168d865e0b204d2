"""The budget flags of the CLI (--kv-budget-bytes, --gpu, --gpu-memory-utilization, ...) and the
one budget they give, in vLLM's words where the flags are vLLM's."""

from __future__ import annotations

import argparse
import dataclasses

from kvviz.api import budget_record
from kvviz.base.defaults import GPU_MEMORY_UTILIZATION, TENSOR_PARALLEL_SIZE
from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import (
    MAX_BUDGET_BYTES,
)
from kvviz.cli.values import gib_value, int_in, nonempty
from kvviz.core import capacity


@dataclasses.dataclass(frozen=True)
class Budget:
    """The KV budget a command's flags give, handed from module to module as a value (never kept on
    the argparse namespace): `bytes` (None where no budget was given; one a pipeline stage where a
    GPU sized each stage's own), the GiB given, a GPU's
    derivation (`derived`: kvviz.deploy.kv_budget's record, None for a budget given in bytes or
    GiB) and --max-model-len -1's fit (`auto_fit`: kvviz.deploy.auto_fit's record)."""

    bytes: int | tuple[int, ...] | None
    gib: float | None = None
    derived: object = None
    auto_fit: object = None

    def to_json(self) -> dict:
        """The budget of a command's --json: how it was had (`kvviz.api.budget_record`: the rule and its
        inputs), the GPU's terms (`kv_budget`) and --max-model-len -1's fit."""
        out = {}
        if self.bytes is not None:
            out["budget"] = budget_record(self.bytes, self.derived, budget_gib=self.gib)
        if self.derived is not None:
            out["kv_budget"] = self.derived.to_json()
        if self.auto_fit is not None:
            out["auto_fit"] = {"max_model_len": self.auto_fit.max_model_len, "log_line": self.auto_fit.log_line}
        return out

    def lines(self) -> list[str]:
        """The budget's derivation lines (the GPU's terms, the auto-fitted max_model_len) for text output."""
        return [
            *(self.derived.lines() if self.derived is not None else ()),
            *([self.auto_fit.log_line] if self.auto_fit is not None else []),
        ]


def add_budget_arguments(p: argparse.ArgumentParser, *, required: bool = False) -> None:
    """Add the budget flags to `p`: --budget-gib / --budget-bytes (vLLM's --kv-cache-memory-bytes), or a GPU's
    budget (--gpu, --gpu-memory-gib, --gpu-memory-utilization, --weights-bytes, --checkpoint, --activation-
    bytes); `required` makes a command refuse to run without one."""
    b = p.add_mutually_exclusive_group(required=False)
    b.add_argument("--budget-gib", type=gib_value, metavar="GIB", help="KV budget in GiB (1 GiB = 2^30 B)")
    b.add_argument(
        "--budget-bytes",
        "--kv-cache-memory-bytes",
        dest="budget_bytes",
        type=int_in(1, MAX_BUDGET_BYTES),
        metavar="BYTES",
        help="KV budget in bytes (vLLM's --kv-cache-memory-bytes: the exact path)",
    )
    g = p.add_argument_group("the budget from a GPU (vLLM's profile, term by term; estimates are labelled)")
    g.add_argument("--gpu", type=nonempty("the GPU"), help="a GPU of kvviz.deploy.budget.GPUS (H100, H200, B200, ...)")
    g.add_argument("--gpu-memory-gib", type=gib_value, metavar="GIB", help="a device of this much memory instead")
    g.add_argument(
        "--gpu-memory-utilization",
        type=float,
        default=None,
        metavar="F",
        help=f"vLLM's --gpu-memory-utilization (default {GPU_MEMORY_UTILIZATION})",
    )
    g.add_argument(
        "--weights-bytes",
        type=int_in(0, MAX_BUDGET_BYTES),
        metavar="BYTES",
        help="the checkpoint's weights (whole model; default: its safetensors index, else an estimate)",
    )
    g.add_argument(
        "--checkpoint", metavar="DIR", help="a checkpoint folder (model.safetensors.index.json: exact weights)"
    )
    g.add_argument(
        "--activation-bytes",
        type=int_in(0, MAX_BUDGET_BYTES),
        metavar="BYTES",
        help="activation / CUDA-graph allowance (default: kvviz.deploy.budget's stated estimate)",
    )
    p.set_defaults(budget_required=required)


def budget_from_args(args, model=None) -> Budget:
    """The KV budget: --budget-gib / --budget-bytes, or one rank's share of a GPU (kvviz.deploy.budget)
    with its terms for the output. From a GPU with --pipeline-parallel-size, one budget a stage (each
    stage's GPUs hold their own weights); --data-parallel-size and --enable-expert-parallel split the
    routed experts."""
    if getattr(args, "gpu", None) is not None or getattr(args, "gpu_memory_gib", None) is not None:
        from kvviz import deploy

        require(args.budget_gib is None, "--budget-gib: give either a budget or --gpu / --gpu-memory-gib")
        require(model is not None, "--gpu: sizes a model's budget; a --groups file has no weights")
        util = GPU_MEMORY_UTILIZATION if args.gpu_memory_utilization is None else args.gpu_memory_utilization
        b = deploy.kv_budget(
            model,
            gpu=args.gpu,
            gpu_memory_gib=args.gpu_memory_gib,
            gpu_memory_utilization=util,
            tensor_parallel_size=args.tensor_parallel_size or TENSOR_PARALLEL_SIZE,
            activation_bytes=args.activation_bytes,
            kv_cache_memory_bytes=args.budget_bytes,
            pipeline_parallel_size=getattr(args, "pipeline_parallel_size", None),
            pp_layer_partition=getattr(args, "pp_layer_partition", None),
            data_parallel_size=getattr(args, "data_parallel_size", None),
            enable_expert_parallel=bool(getattr(args, "enable_expert_parallel", False)),
            **weights_sources(args),
        )
        return Budget(b.budget, derived=b)
    for option, dest in (
        ("--gpu-memory-utilization", "gpu_memory_utilization"),
        ("--weights-bytes", "weights_bytes"),
        ("--checkpoint", "checkpoint"),
        ("--activation-bytes", "activation_bytes"),
    ):
        if getattr(args, dest, None) is not None:
            raise KvvizError(f"{option}: applies only with --gpu or --gpu-memory-gib")
    if args.budget_gib is None and args.budget_bytes is None:
        require(
            not getattr(args, "budget_required", False),
            f"{args.command}: needs a budget: --budget-gib, --budget-bytes (--kv-cache-memory-bytes) or --gpu",
        )
        return Budget(None)
    return Budget(capacity.budget_bytes(gib=args.budget_gib, num_bytes=args.budget_bytes), gib=args.budget_gib)


def weights_sources(args) -> dict:
    """What kvviz.deploy.kv_budget sizes the weights from besides the model: --weights-bytes and --checkpoint
    (the model itself carries its config.json and the folder beside it: kvviz.deploy.weights)."""
    out = {"weights_bytes": args.weights_bytes, "checkpoint_dir": args.checkpoint}
    return {k: v for k, v in out.items() if v is not None}


def budget_option(args) -> str:
    """The budget flag as the user gave it (`--gpu H100`, `--gpu-memory-gib X`, `--budget-gib X` or
    `--budget-bytes N`), to name it in an error."""
    for flag, dest in (("--gpu", "gpu"), ("--gpu-memory-gib", "gpu_memory_gib"), ("--budget-gib", "budget_gib")):
        if getattr(args, dest, None) is not None:
            return f"{flag} {getattr(args, dest)}"
    return f"--budget-bytes {args.budget_bytes}"


def require_budget_holds_a_block(args, budget: int, stride: int, what: str = "one block stride") -> None:
    """A budget that holds no block is an error, before anything is printed."""
    require(budget >= stride, f"{budget_option(args)}: {budget:,} B is smaller than {what} ({stride:,} B)")
