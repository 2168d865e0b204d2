"""The weights one GPU of each pipeline stage holds, as vLLM 0.33 builds the model there
(docs/deploy.md#the-weights-of-each-pipeline-stage).

* a stage's decoder layers: `get_pp_indices` (distributed/utils.py, with VLLM_PP_LAYER_PARTITION;
  kvviz.vllm.pipeline.pp_indices), through `make_layers` (model_executor/models/utils.py);
* the embedding, the final norm and the LM head where the architecture's model file builds them, tied or not
  (kvviz.vllm.stage_modules);
* the parameters of each on one TP rank: kvviz.deploy.params's count of one rank's shapes (column- and
  row-parallel layers and vocabulary-parallel embeddings / TP, norms and routers whole, KV heads replicated once
  TP exceeds them), priced by the checkpoint's quantization (kvviz.deploy.weights.price_parts);
* the routed experts over DP x TP ranks (`FusedMoEParallelConfig.make`: without expert parallel they are
  TP-sharded over every DP x TP rank, `flatten_tp_across_dp_and_pcp`; with it each rank holds whole experts,
  `determine_expert_map`: E // EP each, one more on the first E % EP ranks, and the fullest rank is counted).
"""

from __future__ import annotations

import dataclasses

from kvviz.base.defaults import GIB
from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import short_repr
from kvviz.base.regions import cdiv


@dataclasses.dataclass(frozen=True)
class StageWeights:
    """One pipeline stage's weights: its layers [first_layer, end_layer), which modules outside the layers its
    model file builds there, and the parameters and bytes one of its GPUs holds (one TP rank's shapes, its share
    of the routed experts)."""

    stage: int
    first_layer: int
    end_layer: int
    embedding: bool
    norm: bool
    head: bool
    tied: bool  # the head is the embedding's tensor
    parameters: int
    bytes_per_gpu: int

    @property
    def label(self) -> str:
        """'stage 0 (layers 0-39 + embedding)': the stage, its layers and what else it builds."""
        extra = [
            name
            for name, here in (
                ("embedding", self.embedding),
                ("final norm", self.norm),
                ("LM head" + (" (the embedding, tied)" if self.tied and self.embedding else ""), self.head),
            )
            if here
        ]
        return f"stage {self.stage} (layers {self.first_layer}-{self.end_layer - 1}{' + ' if extra else ''}" + (
            " + ".join(extra) + ")"
        )

    def to_json(self) -> dict:
        """The stage's weights as a JSON object."""
        return {
            "stage": self.stage,
            "layers": [self.first_layer, self.end_layer],
            "embedding": self.embedding,
            "final_norm": self.norm,
            "lm_head": self.head,
            "lm_head_tied": self.tied and self.head,
            "parameters_per_gpu": self.parameters,
            "weights_bytes_per_gpu": self.bytes_per_gpu,
        }


@dataclasses.dataclass(frozen=True)
class StagedWeights:
    """Every stage's weights, the whole model's estimate (each module once, all ranks: what a checkpoint's exact
    total is compared with) and how the rule was read."""

    stages: tuple[StageWeights, ...]
    whole_bytes: int
    how: str

    def scaled(self, total_bytes: int) -> tuple[int, ...]:
        """Each stage's bytes a GPU for a checkpoint of `total_bytes` (exact, all ranks): the estimate's bytes a
        GPU times total / the whole estimate (a module built on several stages is in each). The split is an
        estimate; the total is not."""
        if self.whole_bytes <= 0:
            raise KvvizError("weights_bytes: the count gives the model no weights to split the checkpoint by")
        return tuple(cdiv(s.bytes_per_gpu * total_bytes, self.whole_bytes) for s in self.stages)


def model_file(model) -> str | None:
    """The vLLM 0.33 model file that builds `model`'s architecture (its registry row's `file`), None when the
    registry does not hold it."""
    from kvviz.families.refused import vllm_registry

    for rows in vllm_registry()["tables"].values():
        for row in rows:
            if row["architecture"] == model.architecture:
                return row["file"]
    return None


def expert_share(num_experts: int, ranks: int, expert_parallel: bool) -> float:
    """The fraction of a layer's routed experts on the fullest of `ranks` GPUs: 1 / ranks TP-sharded; with expert
    parallel whole experts, those of EP rank 0 (expert_range: ceil(E / ranks) of E)."""
    if not expert_parallel or num_experts <= 0:
        return 1 / ranks
    first, end = expert_range(num_experts, ranks, 0)
    return (end - first) / num_experts


def expert_range(num_experts: int, ranks: int, rank: int) -> tuple[int, int]:
    """[first, end) of the experts expert-parallel rank `rank` of `ranks` holds, as determine_expert_map's linear
    placement (fused_moe/expert_map_manager.py): E // ranks each, one more on the first E % ranks, in order."""
    base, extra = divmod(num_experts, ranks)
    first = rank * base + min(rank, extra)
    return first, first + base + (rank < extra)


def stage_weights(
    model,
    raw: dict,
    *,
    tensor_parallel_size: int = 1,
    pipeline_parallel_size: int = 1,
    pp_layer_partition: tuple[int, ...] | None = None,
    data_parallel_size: int = 1,
    enable_expert_parallel: bool = False,
    hint: str = "",
) -> StagedWeights:
    """Each stage's weights of `model` (a `Model`) from its config.json `raw`, at these parallel sizes;
    `how` names the model file's rule. A model class vLLM 0.33 does not pipeline (no SupportsPP) is refused at
    PP > 1, as ModelConfig.verify_with_parallel_config refuses it."""
    from kvviz.deploy.params import routed_experts, text_config
    from kvviz.deploy.weights import param_count, price_parts
    from kvviz.vllm.pipeline import stage_ranges
    from kvviz.vllm.stage_modules import require_pipelined, stage_modules

    tp, pp, dp, ep = tensor_parallel_size, pipeline_parallel_size, data_parallel_size, enable_expert_parallel
    file = model_file(model)
    rule = stage_modules(file)
    require_pipelined(model, pp)
    count = param_count(model, raw, hint=hint, tp=tp)  # one TP rank's shapes
    e = routed_experts(text_config(raw))
    # the routed experts: TP-sharded over DP x TP ranks, or whole experts over them (expert parallel)
    moe = count if dp == 1 and not ep else param_count(model, raw, hint=hint, tp=1 if ep else dp * tp)
    local = expert_share(e, dp * tp, True) if ep else 1.0  # the fullest rank's share of the E whole experts
    ranges = stage_ranges(len(count.layers), pp, pp_layer_partition, model=model.name)
    stages = []
    for rank, (start, end) in enumerate(ranges):
        embedding, norm, head = rule.built(rank, pp, count.tied)
        tied = rule.tied(count.tied)
        require(  # lm_head.tie_weights(self.model.embed_tokens) reads the weight of a PPMissingLayer there
            not (tied and head and not embedding),
            f"pipeline_parallel_size={pp}: vLLM 0.33 cannot build {model.name}'s stage {rank}: its head is tied to "
            f"an embedding that stage does not build (AttributeError: 'PPMissingLayer' object has no attribute "
            f"'weight'; {rule.source})",
        )
        parts = count.stage_parts(start, end, embedding=embedding, norm=norm, head=head, tied=tied)
        experts = moe.stage_parts(start, end, embedding=False, norm=False, head=False)["experts"] * local
        priced, _ = price_parts(model, raw, parts | {"experts": experts}, hint=hint)
        params = int(round(sum(parts.values()) - parts["experts"] + experts))
        stages.append(
            StageWeights(rank, start, end, embedding, norm, head, tied, params, int(round(sum(priced.values()))))
        )
    if not rule.read:
        how = f"{model.architecture} ({file or 'not in the registry'}): {rule.source}"
    else:
        how = f"{model.architecture}: {rule.words()}"
    whole, _ = price_parts(model, raw, param_count(model, raw, hint=hint).parts, hint=hint)
    return StagedWeights(tuple(stages), int(round(sum(whole.values()))), how)


@dataclasses.dataclass(frozen=True)
class StageBudget:
    """One stage's share of a GPU budget: its weights, the bytes one of its GPUs holds (the count's, or a
    checkpoint's exact total split as the count splits it) and what is left there for the KV cache (each worker's
    own `determine_available_memory`)."""

    weights: StageWeights
    weights_bytes: int
    available_bytes: int

    def line(self) -> str:
        """The stage's weights and KV memory as one line."""
        return (
            f"{self.weights.label}: weights {self.weights_bytes:,} B ({self.weights_bytes / GIB:.2f} GiB) a GPU, "
            f"KV cache {self.available_bytes:,} B ({self.available_bytes / GIB:.2f} GiB)"
        )

    def to_json(self) -> dict:
        """The stage's budget as a JSON object."""
        return self.weights.to_json() | {
            "weights_bytes_per_gpu": self.weights_bytes,
            "available_bytes": self.available_bytes,
        }


def parallel_sizes(pp, partition, dp, ep) -> tuple[int, tuple[int, ...] | None, int, bool] | None:
    """(PP, partition, DP, expert parallel) checked, or None when every GPU holds the whole model / TP."""
    pp = 1 if pp is None else pp
    dp = 1 if dp is None else dp
    for field, value in (("pipeline_parallel_size", pp), ("data_parallel_size", dp)):
        require(
            type(value) is int and 1 <= value <= 1 << 16, f"{field}={short_repr(value)}: must be a positive integer"
        )
    require(isinstance(ep, bool), f"enable_expert_parallel={short_repr(ep)}: must be True or False")
    if partition is not None:
        require(
            isinstance(partition, tuple) and all(type(x) is int and x > 0 for x in partition),
            f"pp_layer_partition={short_repr(partition)}: give the layers of each stage as positive integers",
        )
    if pp == 1 and dp == 1 and not ep and partition is None:
        return None
    return pp, partition, dp, ep


def stage_weight_bytes(
    model, tp, parallel, weights_bytes, checkpoint_dir, raw_config
) -> tuple[str, int, str, str, tuple]:
    """kv_budget's weights term with `parallel` (parallel_sizes): (label, the heaviest stage's bytes a GPU, source,
    origin (where the whole model's weights came from), ((StageWeights, its bytes a GPU), ...) a stage): the
    count's, or a checkpoint's exact total split as the count splits it."""
    from kvviz.deploy.weights import PYTHON_HINT, checkpoint_weight_bytes, raw_config_of

    pp, partition, dp, ep = parallel
    raw, where = raw_config_of(model, checkpoint_dir, raw_config)
    if raw is None:
        raise KvvizError(
            f"weights_bytes: no config.json to split {model.name}'s weights over its stages and ranks from; "
            f"{PYTHON_HINT}"
        )
    staged = stage_weights(
        model,
        raw,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        pp_layer_partition=partition,
        data_parallel_size=dp,
        enable_expert_parallel=ep,
        hint=PYTHON_HINT,
    )
    require(
        weights_bytes is None or (type(weights_bytes) is int and weights_bytes >= 0),
        f"weights_bytes={short_repr(weights_bytes)}: must be a non-negative integer number of bytes",
    )
    given = weights_bytes
    found = checkpoint_weight_bytes(checkpoint_dir) if given is None and checkpoint_dir is not None else None
    exact = (given, f"given (weights_bytes {given:,} B)") if given is not None else found
    per_gpu = staged.scaled(exact[0]) if exact else tuple(s.bytes_per_gpu for s in staged.stages)
    heavy = max(range(len(per_gpu)), key=lambda i: (per_gpu[i], -i))
    split = f"TP {tp}" + (f", routed experts over DP {dp} x TP {tp}" if dp > 1 or ep else "")
    if ep:
        from kvviz.deploy.params import routed_experts, text_config

        e = routed_experts(text_config(raw))
        first, end = expert_range(e, dp * tp, 0)
        split += f" (whole experts, expert parallel: EP rank 0 holds experts {first}-{end - 1} of {e}, the most)"
    source = (
        f"{exact[1]} = {exact[0]:,} B split over the stages as the count from {where} splits it ({split}): "
        if exact
        else f"estimate from {where}, each stage's own layers and modules ({split}): "
    ) + staged.how
    label = f"weights on one GPU of {staged.stages[heavy].label}" if pp > 1 else f"weights on one GPU ({split})"
    origin = f"{exact[1]} = {exact[0]:,} B" if exact else f"estimate from {where}"
    return label, per_gpu[heavy], source, origin, tuple(zip(staged.stages, per_gpu))
