"""The knobs a deployment chooses, for every model: one frozen record (docs/model-core.md#knobs).

`None` means the engine's own choice (vLLM 0.33's default for that model). A family says which
of these apply to a model (`Family.knobs_for`); a knob given for a model it does not apply to is
refused in one line, never ignored. The record itself imports no family.
"""

from __future__ import annotations

import dataclasses

from kvviz.base.defaults import MAX_NUM_BATCHED_TOKENS
from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import (
    MAX_CONTEXT_TOKENS,
    MAX_DIM,
    MAX_SLIDING_WINDOW,
    MAX_TOKENS_PER_BLOCK,
    bounded_int,
    short_repr,
)

KV_DTYPES = ("bf16", "fp16", "fp32", "fp8")
SSM_DTYPES = ("bfloat16", "float32")
# vLLM's --kv-cache-dtype / --mamba-ssm-cache-dtype spellings -> kvviz's element names.
KV_DTYPE_ALIASES = {"auto": None, "bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "fp8_e4m3": "fp8"}

# Knob name -> (what it is, the CLI option that sets it). The CLI and the explorer read this.
KNOB_OPTIONS = {
    "kv_dtype": "--kv-dtype",
    "block_size": "--block-size",
    "mamba_ssm_dtype": "--mamba-ssm-dtype",
    "prefix_caching": "--no-prefix-caching",
    "sliding_window": "--sliding-window",
    "max_model_len": "--max-model-len",
    "max_num_batched_tokens": "--max-num-batched-tokens",
    "async_scheduling": "--no-async-scheduling",
    "tensor_parallel_size": "--tensor-parallel-size",
    "decode_context_parallel_size": "--decode-context-parallel-size",
    "pipeline_parallel_size": "--pipeline-parallel-size",
    "pp_layer_partition": "--pp-layer-partition",
    "kv_offloading_size": "--kv-offloading-size",
    "backend": "--backend",
    "main_format": "--main-format",
    "indexer_format": "--indexer",
    "mtp": "--no-mtp",
    "head_dim": "--head-dim",
    "rope_dim": "--rope-dim",
    "index_head_dim": "--index-head-dim",
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Options:
    """Every knob kvviz plans with; None = the engine's default for the model.

    Any model: kv_dtype ('bf16', 'fp16', 'fp32', 'fp8'; None: the model dtype, vLLM's 'auto'),
    block_size (tokens per attention block), max_model_len (None: the model's own maximum, as
    vLLM derives it), max_num_batched_tokens (vLLM serve's 8192 on an H200), async_scheduling
    (vLLM's default: on, two batches in flight), tensor_parallel_size (one rank is planned),
    decode_context_parallel_size (vLLM's DCP: full-attention / MLA tokens split over that many of
    the TP ranks; None = 1; any model that takes tensor_parallel_size, refused where vLLM refuses),
    pipeline_parallel_size (stages of layers, each planned on its own GPUs; docs/deploy.md#pipeline-parallel)
    and pp_layer_partition (VLLM_PP_LAYER_PARTITION: layers per stage), kv_offloading_size (GiB of host memory
    for vLLM's native CPU offload; docs/deploy.md#cpu-offload).
    States: mamba_ssm_dtype, prefix_caching (on: 'align' mode). Sliding layers: sliding_window.
    DeepSeek V4: backend, main_format, indexer_format, mtp and the head_dim / rope_dim /
    index_head_dim overrides."""

    kv_dtype: str | None = None
    block_size: int | None = None
    mamba_ssm_dtype: str | None = None
    prefix_caching: bool | None = None
    sliding_window: int | None = None
    max_model_len: int | None = None
    max_num_batched_tokens: int | None = None
    async_scheduling: bool | None = None
    tensor_parallel_size: int | None = None
    decode_context_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    pp_layer_partition: tuple[int, ...] | None = None
    kv_offloading_size: float | None = None
    backend: str | None = None
    main_format: str | None = None
    indexer_format: str | None = None
    mtp: bool | None = None
    head_dim: int | None = None
    rope_dim: int | None = None
    index_head_dim: int | None = None

    def __post_init__(self) -> None:
        kv = KV_DTYPE_ALIASES.get(self.kv_dtype, self.kv_dtype) if isinstance(self.kv_dtype, str) else self.kv_dtype
        object.__setattr__(self, "kv_dtype", kv)  # vLLM's spellings accepted, kept as kvviz's name
        if self.kv_dtype is not None and self.kv_dtype not in KV_DTYPES:
            raise KvvizError(f"kv_dtype={self.kv_dtype!r}: unknown; choose one of {', '.join(KV_DTYPES)}")
        if self.mamba_ssm_dtype is not None and self.mamba_ssm_dtype not in SSM_DTYPES:
            raise KvvizError(
                f"mamba_ssm_dtype={self.mamba_ssm_dtype!r}: unknown; choose one of {', '.join(SSM_DTYPES)}"
            )
        for field, high in (
            ("block_size", MAX_TOKENS_PER_BLOCK),
            ("sliding_window", MAX_SLIDING_WINDOW),
            ("max_model_len", MAX_CONTEXT_TOKENS),
            ("max_num_batched_tokens", MAX_CONTEXT_TOKENS),
            ("tensor_parallel_size", 1 << 16),
            ("decode_context_parallel_size", 1 << 16),
            ("pipeline_parallel_size", 1 << 16),
            ("head_dim", MAX_DIM),
            ("rope_dim", MAX_DIM),
            ("index_head_dim", MAX_DIM),
        ):
            if getattr(self, field) is not None:
                bounded_int(getattr(self, field), field=field, low=1, high=high)
        _check_deploy_knobs(self)
        for field in ("prefix_caching", "async_scheduling", "mtp"):
            value = getattr(self, field)
            require(value is None or isinstance(value, bool), f"{field}={value!r}: must be True or False")

    def given(self) -> tuple[str, ...]:
        """The knobs set (not None), in field order."""
        return tuple(f.name for f in dataclasses.fields(self) if getattr(self, f.name) is not None)

    def with_(self, **changes) -> "Options":
        """A copy with `changes` applied (dataclasses.replace)."""
        return dataclasses.replace(self, **changes)

    @property
    def resolved_max_num_batched_tokens(self) -> int:
        """max_num_batched_tokens, or vLLM's default (defaults.MAX_NUM_BATCHED_TOKENS) when not given."""
        return MAX_NUM_BATCHED_TOKENS if self.max_num_batched_tokens is None else self.max_num_batched_tokens

    @property
    def max_concurrent_batches(self) -> int:
        """VllmConfig.max_concurrent_batches (config/vllm.py): with async scheduling (vLLM 0.33's default) and its
        default V2 model runner, pipeline_parallel_size + 1 (2 at PP 1); without it, pipeline_parallel_size."""
        pp = self.pipeline_parallel_size or 1
        return pp if self.async_scheduling is False else pp + 1

    @property
    def max_in_flight_tokens(self) -> int:
        """VllmConfig.max_in_flight_tokens = max_concurrent_batches x max_num_batched_tokens."""
        return self.max_concurrent_batches * self.resolved_max_num_batched_tokens


def _check_deploy_knobs(o: Options) -> None:
    """pp_layer_partition: a tuple of positive layer counts, one per stage (checked against the model's layers
    when it is planned); kv_offloading_size: a positive, finite GiB count."""
    part = o.pp_layer_partition
    if part is not None:
        if isinstance(part, list):
            part = tuple(part)
            object.__setattr__(o, "pp_layer_partition", part)
        require(
            isinstance(part, tuple) and len(part) > 0 and all(type(x) is int and x > 0 for x in part),
            f"pp_layer_partition={short_repr(part)}: give the layers of each stage as positive integers, e.g. (12, 20)",
        )
    size = o.kv_offloading_size
    if size is not None:
        require(
            isinstance(size, (int, float)) and not isinstance(size, bool) and 0 < size <= 1 << 30,
            f"kv_offloading_size={size!r}: give the host memory for offloaded KV in GiB, a positive number",
        )
