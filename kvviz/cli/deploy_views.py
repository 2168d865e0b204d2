"""`kvviz plan`'s deployment views past one GPU and one memory tier (docs/deploy.md): pipeline parallel's start-up
refusal, CPU offload beside the GPU pool, the prefill/decode transfer of one prompt, and what fp8 KV buys."""

from __future__ import annotations

import dataclasses

from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import MAX_CONTEXT_TOKENS
from kvviz.cli.values import _int_in


@dataclasses.dataclass(frozen=True)
class DeployViews:
    """What the views add: lines after the capacity line, keys in `--json`."""

    lines: tuple[str, ...] = ()
    json: dict = dataclasses.field(default_factory=dict)


def add_deploy_view_arguments(p) -> None:
    """`kvviz plan`'s --transfer PROMPT_LEN [--prefill-tp N] and --fp8-gain."""
    g = p.add_argument_group("deployment views (docs/deploy.md)")
    g.add_argument(
        "--transfer",
        type=_int_in(1, MAX_CONTEXT_TOKENS),
        metavar="PROMPT_LEN",
        help="bytes vLLM's NIXL connector moves from a prefill to this decode instance for one prompt, per group",
    )
    g.add_argument(
        "--prefill-tp",
        type=_int_in(1, 1 << 16),
        metavar="N",
        help="with --transfer: the prefill instance's TP (default: the same as --tensor-parallel-size)",
    )
    g.add_argument(
        "--fp8-gain",
        action="store_true",
        help="the capacity of fp8 KV over bf16 KV at this context and budget, and the group that explains it",
    )


def deploy_views(args, planned, budget: int | None) -> DeployViews:
    """The views the flags ask for, on `planned` (a vLLM plan) at `budget`; a PP plan vLLM would refuse to start
    is refused in vLLM's words."""
    p, options = planned.plan, planned.options
    lines: list[str] = []
    out: dict = {}
    if p.stages and budget is not None:
        from kvviz.vllm.pipeline import startup_refusal

        refusal = startup_refusal(p, budget)
        if refusal is not None:
            raise KvvizError(f"--pipeline-parallel-size {len(p.stages)}: vLLM 0.33 refuses to start: {refusal}")
        stages = p.to_json(budget_bytes=budget)["stages"]
        lines.append(
            "stages: "
            + "; ".join(
                f"{s['stage']}: layers {s['layers'][0]}-{s['layers'][1] - 1}, {s['bytes_per_block']:,} B a block, "
                f"{s['num_blocks_alone']:,} blocks alone{' (binds)' if s['binds'] else ''}"
                for s in stages
            )
        )
    if options is not None and options.kv_offloading_size is not None:
        from kvviz.vllm.offload import offload_for

        off = offload_for(p, options)
        out["offload"] = off.to_json()
        lines.append(off.line())
    if getattr(args, "transfer", None) is not None:
        from kvviz.vllm.transfer import transfer

        t = transfer(p, args.transfer, decode_tp=options.tensor_parallel_size or 1, prefill_tp=args.prefill_tp)
        out["transfer"] = t.to_json()
        lines.extend(t.lines())
    else:
        require(getattr(args, "prefill_tp", None) is None, "--prefill-tp: goes with --transfer PROMPT_LEN")
    if getattr(args, "fp8_gain", False):
        from kvviz.deploy.fp8 import fp8_gain

        require(budget is not None, "--fp8-gain: compares capacity at a budget; give one")
        gain = fp8_gain(planned.model, p.max_model_len, budget, options)
        out["fp8_gain"] = gain.to_json()
        lines.append(gain.line)
    return DeployViews(tuple(lines), out)
