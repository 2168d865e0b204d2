"""What a deployment's KV budget is, and the longest request it holds (vLLM 0.33's rules).

Light: imports no torch, transformers or matplotlib at module level.

* `GPUS` (kept in kvviz.gpus, named here too): accelerators with their total memory in bytes as
  the device reports it; estimates are labelled in every output.
* `kv_budget(model, gpu=...)`: vLLM's `Worker.determine_available_memory`
  (v1/worker/gpu_worker.py) term by term: requested = ceil(total x gpu_memory_utilization)
  (v1/worker/utils.py `request_memory`; default 0.92, config/cache.py), minus the weights on one
  rank, minus an activation / CUDA-graph allowance. vLLM measures the last two; kvviz reads the
  weights from a checkpoint's `model.safetensors.index.json` when it has one (exact) and
  estimates the rest (labelled). `kv_cache_memory_bytes` is vLLM's `--kv-cache-memory-bytes`:
  the budget, exactly, with no terms.
* `largest_context(model, options, budget)`: what `--max-model-len -1` picks
  (v1/core/kv_cache_planning.py `_auto_fit_max_model_len` / `_estimate_max_model_len_from_groups`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import struct
from pathlib import Path

from .defaults import GIB, GPU_MEMORY_UTILIZATION, TENSOR_PARALLEL_SIZE
from .errors import KvvizError, require
from .gpus import GPU, GPUS, gpu_spec  # noqa: F401 (GPU, gpu_spec: kvviz.deploy's names too)
from .options import Options

# vLLM 0.33's CacheConfig.gpu_memory_utilization default (config/cache.py: Field(default=0.92, gt=0, le=1)).
DEFAULT_GPU_MEMORY_UTILIZATION = GPU_MEMORY_UTILIZATION
# kvviz's stated activation / CUDA-graph allowance (an estimate; vLLM has no constant, it measures:
# memory_profiling's non-torch increase + transient peak of the dummy forward, plus
# profile_cudagraph_memory). deploy-rules.md §4: non-torch ~0.5-1 GiB, peak activation ~1-3 GiB for
# 7-70B dense at 8192 tokens, CUDA graphs ~0.5-1.5 GiB -> one ~3 GiB default (eager ~2 GiB).
DEFAULT_ACTIVATION_BYTES = 3 * GIB
ACTIVATION_SOURCE = ("kvviz's stated default (deploy-rules.md §4: non-torch ~0.5-1 GiB + peak activation ~1-3 GiB + "
                     "CUDA graphs ~0.5-1.5 GiB); vLLM measures it (memory_profiling, profile_cudagraph_memory)")
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 1}


def format_gib(num_bytes: int) -> str:
    """vLLM's utils/mem_utils.py format_gib: f"{round(b / 2**30, 2)}"."""
    return f"{round(num_bytes / GIB, 2)}"


# ---- weights -------------------------------------------------------------------------------------


def checkpoint_weight_bytes(checkpoint_dir) -> tuple[int, str] | None:
    """(bytes, source) of a checkpoint folder's weights: `model.safetensors.index.json`'s
    metadata.total_size (the tensor bytes over all shards), else a single `model.safetensors`'s
    header (sum of data_offsets spans); None when the folder holds neither."""
    d = Path(checkpoint_dir)
    require(d.is_dir(), f"checkpoint_dir={str(checkpoint_dir)!r}: no such folder")
    index = d / "model.safetensors.index.json"
    if index.is_file():
        from .inputs import read_json

        raw = read_json(index, what="checkpoint_dir")
        meta = raw.get("metadata") if isinstance(raw, dict) else None
        size = meta.get("total_size") if isinstance(meta, dict) else None
        if isinstance(size, float) and size.is_integer():
            size = int(size)
        require(type(size) is int and size > 0,
                f"checkpoint_dir: {index.name}: metadata.total_size={size!r}: must be a positive integer")
        return size, f"{index.name} metadata.total_size"
    single = d / "model.safetensors"
    if single.is_file():
        with single.open("rb") as f:
            head = f.read(8)
            require(len(head) == 8, f"checkpoint_dir: {single.name}: shorter than a safetensors header")
            (n,) = struct.unpack("<Q", head)
            require(0 < n <= 100 << 20, f"checkpoint_dir: {single.name}: header length {n} is not plausible")
            try:
                header = json.loads(f.read(n))
            except (ValueError, UnicodeDecodeError):
                raise KvvizError(f"checkpoint_dir: {single.name}: header is not JSON") from None
        total = 0
        for name, t in header.items():
            if name == "__metadata__":
                continue
            offs = t.get("data_offsets") if isinstance(t, dict) else None
            require(isinstance(offs, list) and len(offs) == 2 and all(type(x) is int for x in offs),
                    f"checkpoint_dir: {single.name}: tensor {name!r} has no data_offsets")
            total += offs[1] - offs[0]
        return total, f"{single.name} header (sum of tensor data)"
    return None


# The fields a shipped preset leaves out (its config.json is trimmed to the KV-relevant part), from
# the model's Hugging Face config.json (also /work/notes/configs/<name>/config.json), so the weight
# estimate can be made for them.
PRESET_FILL = {
    "meta-llama/Llama-3.1-8B": {"intermediate_size": 14336, "vocab_size": 128256, "tie_word_embeddings": False},
    "mistralai/Mistral-7B-v0.1": {"intermediate_size": 14336, "vocab_size": 32000, "tie_word_embeddings": False},
    "microsoft/Phi-3-mini-4k-instruct": {"intermediate_size": 8192, "vocab_size": 32064,
                                         "tie_word_embeddings": False},
}


def _raw_config(model, checkpoint_dir, raw_config) -> tuple[dict | None, str]:
    if raw_config is not None:
        require(isinstance(raw_config, dict), "raw_config: must be a parsed config.json (a dict)")
        return raw_config, "the given config"
    if checkpoint_dir is not None and (Path(checkpoint_dir) / "config.json").is_file():
        from .inputs import read_json

        return read_json(Path(checkpoint_dir) / "config.json", what="checkpoint_dir"), "checkpoint config.json"
    from .families import preset_names, preset_raw

    if model.name in preset_names():
        raw = dict(preset_raw(model.name))
        fill = PRESET_FILL.get(raw.get("_name_or_path", ""))
        if fill:
            target = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else raw
            for k, v in fill.items():
                target.setdefault(k, v)
            return raw, f"preset {model.name} + {raw['_name_or_path']}'s config.json fields"
        return raw, f"preset {model.name}"
    return None, ""


def _int(cfg: dict, key: str, *, model: str, default=None) -> int:
    value = cfg.get(key, default)
    if value is None:
        raise KvvizError(f"weights_bytes: {model}'s config has no {key!r} to estimate the weights from; pass "
                         f"weights_bytes= or checkpoint_dir=")
    require(type(value) is int and value >= 0, f"weights_bytes: {model}: {key}={value!r} must be a non-negative integer")
    return value


def estimate_parameters(raw: dict, *, model: str = "model") -> tuple[int, str]:
    """(parameters, how) a config.json implies for a dense, MoE or MLA decoder (deploy-rules.md §6):
    attention (GQA q/k/v/o, or MLA's low-rank projections) + MLP (gated: 3 h I; MoE: every routed
    and shared expert and the router) + norms per layer, + embeddings (+ lm_head unless tied).
    MTP layers are left out (vLLM loads them only with MTP speculative decoding)."""
    cfg = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else raw
    h = _int(cfg, "hidden_size", model=model)
    n = _int(cfg, "num_hidden_layers", model=model)
    vocab = _int(cfg, "vocab_size", model=model)
    hq = _int(cfg, "num_attention_heads", model=model)
    tie = cfg.get("tie_word_embeddings", raw.get("tie_word_embeddings", False))
    kinds = []
    if cfg.get("kv_lora_rank"):
        rank = _int(cfg, "kv_lora_rank", model=model)
        rope = _int(cfg, "qk_rope_head_dim", model=model)
        nope = _int(cfg, "qk_nope_head_dim", model=model)
        v = _int(cfg, "v_head_dim", model=model)
        q_rank = cfg.get("q_lora_rank")
        q = (h * q_rank + q_rank + q_rank * hq * (nope + rope)) if q_rank else h * hq * (nope + rope)
        attn = q + h * (rank + rope) + rank + rank * hq * (nope + v) + hq * v * h
        kinds.append("MLA")
    else:
        hkv = _int(cfg, "num_key_value_heads", model=model, default=hq)
        d = cfg.get("head_dim") or h // hq
        attn = h * hq * d + 2 * h * hkv * d + hq * d * h
        if cfg.get("attention_bias") or cfg.get("model_type") == "qwen2":
            attn += (hq + 2 * hkv) * d
        kinds.append("GQA" if hkv != hq else "MHA")
    experts = next((cfg[k] for k in ("n_routed_experts", "num_experts", "num_local_experts") if cfg.get(k)), 0)
    dense_mlp = 0
    if not experts or cfg.get("first_k_dense_replace") or cfg.get("mlp_only_layers") or \
            (cfg.get("decoder_sparse_step") or 1) > 1:
        dense_mlp = 3 * h * _int(cfg, "intermediate_size", model=model)
    if experts:
        i_moe = cfg.get("moe_intermediate_size") or _int(cfg, "intermediate_size", model=model)
        moe = experts * 3 * h * i_moe + h * experts
        moe += (cfg.get("n_shared_experts") or 0) * 3 * h * i_moe
        if cfg.get("shared_expert_intermediate_size"):
            moe += 3 * h * cfg["shared_expert_intermediate_size"] + h
        first_dense = cfg.get("first_k_dense_replace") or 0
        only_dense = set(cfg.get("mlp_only_layers") or ())
        step = cfg.get("decoder_sparse_step") or 1
        is_moe = [i >= first_dense and i not in only_dense and (i + 1) % step == 0 for i in range(n)]
        mlp_total = sum(moe if m else dense_mlp for m in is_moe)
        kinds.append(f"MoE ({experts} experts, {sum(is_moe)} MoE layers)")
    else:
        mlp_total = n * dense_mlp
        kinds.append("dense")
    norms = n * 2 * h + h
    embed = vocab * h * (1 if tie else 2)
    total = n * attn + mlp_total + norms + embed
    how = (f"{' '.join(kinds)}: {n} layers x attention {attn:,} + MLP {mlp_total:,} + norms {norms:,} + "
           f"embeddings {embed:,}{' (tied)' if tie else ' (+ lm_head)'} = {total:,} parameters")
    return total, how


# ---- the budget ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Term:
    """One term of the budget: bytes (negative terms are subtracted), what it is, where it comes from."""

    key: str  # 'total', 'requested', 'weights', 'activation', 'kv_cache_memory_bytes'
    label: str
    value: int
    estimate: bool
    source: str = ""

    def line(self) -> str:
        """The term as one line: label, bytes and GiB, an [estimate] mark where it is one, and its source."""
        mark = "  [estimate]" if self.estimate else ""
        return f"{self.label}: {self.value:,} B ({self.value / GIB:.2f} GiB){mark} - {self.source}"

    def to_json(self) -> dict:
        """The term as a JSON object: key, label, bytes, GiB, whether an estimate, and its source."""
        return {"key": self.key, "label": self.label, "bytes": self.value, "gib": round(self.value / GIB, 4),
                "estimate": self.estimate, "source": self.source}


@dataclasses.dataclass(frozen=True)
class KVBudget:
    """The KV cache memory of one rank, term by term: available = requested - weights - allowance
    (or, with `--kv-cache-memory-bytes`, exactly that, no terms)."""

    model: str
    gpu: str | None
    total_memory: int | None
    gpu_memory_utilization: float | None
    tensor_parallel_size: int
    terms: tuple[Term, ...]  # total (informational), requested, weights, activation; or kv_cache_memory_bytes
    available_bytes: int
    exact_pool: bool = False  # --kv-cache-memory-bytes

    def term(self, key: str) -> Term | None:
        """The term of key `key` ('requested', 'weights', 'activation', ...), or None when the budget has none."""
        return next((t for t in self.terms if t.key == key), None)

    def _value(self, key: str) -> int | None:
        t = self.term(key)
        return None if t is None else t.value

    @property
    def requested_bytes(self) -> int | None:
        """ceil(total x gpu_memory_utilization) in bytes (vLLM 0.33 v1/worker/utils.py request_memory); None when
        the budget was given exactly."""
        return self._value("requested")

    @property
    def weights_bytes(self) -> int | None:
        """The weights on one rank subtracted, in bytes (None when the budget was given exactly)."""
        return self._value("weights")

    @property
    def activation_bytes(self) -> int | None:
        """The activation / CUDA-graph allowance subtracted, in bytes (None when the budget was given exactly)."""
        return self._value("activation")

    @property
    def estimate(self) -> bool:
        """Whether any term the budget depends on is an estimate."""
        return any(t.estimate for t in self.terms)

    @property
    def available_gib(self) -> float:
        """The KV budget in GiB (available_bytes / 2^30)."""
        return self.available_bytes / GIB

    @property
    def log_line(self) -> str:
        """The line vLLM's determine_available_memory logs (with --kv-cache-memory-bytes: the part of
        its message that names the reservation; the free memory it also prints is the device's)."""
        if self.exact_pool:
            return (f"reserved {format_gib(self.available_bytes)} GiB memory for KV Cache as specified by "
                    f"kv_cache_memory_bytes config and skipped memory profiling")
        return f"Available KV cache memory: {format_gib(self.available_bytes)} GiB"

    def lines(self) -> list[str]:
        """The budget as text: a head line (model, GPU, TP, whether it includes estimates), then one line per term
        and the result."""
        head = f"KV budget of {self.model}"
        if self.gpu:
            head += f" on one {self.gpu}"
        head += f", TP {self.tensor_parallel_size} (one rank)"
        if self.estimate:
            head += " - includes estimates"
        out = [head]
        for t in self.terms:
            sign = "-" if t.key in ("weights", "activation") else " "
            out.append(f"  {sign} {t.line()}")
        mark = "  [estimate]" if self.estimate else ""
        out.append(f"  = available KV cache memory: {self.available_bytes:,} B ({self.available_bytes / GIB:.2f} GiB)"
                   f"{mark}")
        out.append(f"  vLLM logs: {self.log_line}" + (" (from estimated terms)" if self.estimate else ""))
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def to_json(self) -> dict:
        """The budget as a JSON object: model, GPU, utilization, TP, each term, the available bytes and GiB, whether
        it includes estimates, and the log line."""
        return {"model": self.model, "gpu": self.gpu, "total_memory": self.total_memory,
                "gpu_memory_utilization": self.gpu_memory_utilization,
                "tensor_parallel_size": self.tensor_parallel_size, "exact_pool": self.exact_pool,
                "terms": [t.to_json() for t in self.terms], "available_bytes": self.available_bytes,
                "available_gib": round(self.available_gib, 4), "estimate": self.estimate, "log_line": self.log_line}


def _nonneg_int(value, field: str) -> int:
    require(type(value) is int, f"{field}={value!r}: must be an integer number of bytes")
    require(value >= 0, f"{field}={value!r}: must not be negative")
    return value


def _device(gpu, gpu_memory_gib) -> tuple[str | None, int | None, bool, str]:
    """(name, total bytes, estimate, source) of the device; (None, None, ...) when neither is given."""
    if gpu_memory_gib is not None:
        require(isinstance(gpu_memory_gib, (int, float)) and not isinstance(gpu_memory_gib, bool)
                and math.isfinite(gpu_memory_gib), f"gpu_memory_gib={gpu_memory_gib!r}: must be a number")
        require(gpu_memory_gib > 0, f"gpu_memory_gib={gpu_memory_gib!r}: must be positive")
        name = gpu_spec(gpu).name if gpu is not None else None
        return name, int(gpu_memory_gib * GIB), False, "given (gpu_memory_gib)"
    if gpu is not None:
        g = gpu_spec(gpu)
        return g.name, g.total_memory, g.estimate, g.source
    return None, None, False, ""


def kv_budget(model, *, gpu=None, gpu_memory_gib=None, gpu_memory_utilization=DEFAULT_GPU_MEMORY_UTILIZATION,
              tensor_parallel_size=TENSOR_PARALLEL_SIZE, weights_bytes=None, checkpoint_dir=None, activation_bytes=None,
              kv_cache_memory_bytes=None, raw_config=None) -> KVBudget:
    """The KV cache memory of one rank of `model` on `gpu` (a `GPUS` name) or a device of
    `gpu_memory_gib`, as vLLM 0.33's `Worker.determine_available_memory` computes it:

    * requested = ceil(total x gpu_memory_utilization) (v1/worker/utils.py request_memory; 0.92 is
      CacheConfig's default);
    * weights on one rank: the checkpoint's bytes (`weights_bytes`, the whole model's, or
      `checkpoint_dir`'s model.safetensors.index.json metadata.total_size) / TP, exact; else an
      estimate from the parameters the config implies times the model dtype's bytes, / TP;
    * activation / CUDA-graph allowance: `activation_bytes`, else DEFAULT_ACTIVATION_BYTES
      (an estimate);
    * available = requested - weights - allowance; <= 0 is refused like vLLM's "No available
      memory for the cache blocks".

    `kv_cache_memory_bytes` (vLLM's --kv-cache-memory-bytes): the budget is exactly that, no terms
    (determine_available_memory returns it and ignores gpu_memory_utilization)."""
    from .families import Model

    require(isinstance(model, Model), f"model={type(model).__name__}: give a kvviz.load(...) result")
    tp = tensor_parallel_size
    require(type(tp) is int and tp >= 1, f"tensor_parallel_size={tp!r}: must be a positive integer")
    name, total, total_estimate, total_source = _device(gpu, gpu_memory_gib)
    if kv_cache_memory_bytes is not None:
        pool = _nonneg_int(kv_cache_memory_bytes, "kv_cache_memory_bytes")
        require(pool > 0, "kv_cache_memory_bytes=0: must be positive")
        if total is not None:
            require(pool <= total, f"kv_cache_memory_bytes={pool:,}: larger than the device's {total:,} B "
                                   f"({total / GIB:.2f} GiB{', an estimate' if total_estimate else ''})")
        term = Term("kv_cache_memory_bytes", "--kv-cache-memory-bytes", pool, False,
                    "given; vLLM returns it exactly (gpu_worker.determine_available_memory), ignoring "
                    "gpu_memory_utilization and profiling")
        return KVBudget(model.name, name, total, None, tp, (term,), pool, exact_pool=True)
    require(total is not None, f"gpu: give a GPU name ({', '.join(GPUS)}), gpu_memory_gib or kv_cache_memory_bytes")
    util = gpu_memory_utilization
    require(isinstance(util, (int, float)) and not isinstance(util, bool) and math.isfinite(util) and 0 < util <= 1,
            f"gpu_memory_utilization={util!r}: must be in (0, 1] (vLLM's gt=0, le=1)")
    requested = math.ceil(total * util)
    terms = [Term("total", f"device total memory{' (' + name + ')' if name else ''}", total, total_estimate,
                  total_source),
             Term("requested", f"requested = ceil(total x gpu_memory_utilization {util})", requested, total_estimate,
                  "v1/worker/utils.py request_memory (default 0.92: config/cache.py CacheConfig)")]
    terms.append(_weights_term(model, tp, weights_bytes, checkpoint_dir, raw_config, total))
    if activation_bytes is None:
        terms.append(Term("activation", "activation / CUDA-graph allowance", DEFAULT_ACTIVATION_BYTES, True,
                          ACTIVATION_SOURCE))
    else:
        terms.append(Term("activation", "activation / CUDA-graph allowance",
                          _nonneg_int(activation_bytes, "activation_bytes"), False, "given (activation_bytes)"))
    weights, act = terms[2].value, terms[3].value
    available = requested - weights - act
    if available <= 0:
        est = " (estimated terms)" if any(t.estimate for t in terms[2:]) else ""
        raise KvvizError(f"no memory left for the KV cache: gpu_memory_utilization {util} of {total / GIB:.2f} GiB "
                         f"= {requested / GIB:.2f} GiB - weights {weights / GIB:.2f} GiB (TP {tp}) - allowance "
                         f"{act / GIB:.2f} GiB = {available / GIB:.2f} GiB{est}; vLLM: 'No available memory for the "
                         f"cache blocks. Try increasing `gpu_memory_utilization`' (or tensor_parallel_size)")
    return KVBudget(model.name, name, total, util, tp, tuple(terms), available)


def _weights_term(model, tp, weights_bytes, checkpoint_dir, raw_config, total) -> Term:
    label = f"weights on one rank (/ TP {tp})"
    if weights_bytes is not None:
        w = _nonneg_int(weights_bytes, "weights_bytes")
        return Term("weights", label, -(-w // tp), False, f"given (weights_bytes {w:,} B for the whole model) / TP")
    if checkpoint_dir is not None:
        found = checkpoint_weight_bytes(checkpoint_dir)
        if found is not None:
            w, how = found
            if total is not None:
                require(-(-w // tp) < 64 * total, f"checkpoint_dir: {how} = {w:,} B is not plausible")
            return Term("weights", label, -(-w // tp), False,
                        f"{how} = {w:,} B / TP (sharded linears and vocab-parallel embeddings; replicated norms "
                        f"ignored)")
    if model.family not in ("decoder", "mla"):
        raise KvvizError(f"weights_bytes: kvviz estimates weights of dense, MoE and MLA decoders only; "
                         f"{model.name} is a {model.reader.title}: pass weights_bytes= or checkpoint_dir=")
    raw, where = _raw_config(model, checkpoint_dir, raw_config)
    if raw is None:
        raise KvvizError(f"weights_bytes: no config.json to estimate {model.name}'s weights from; pass weights_bytes=, "
                         f"checkpoint_dir= or raw_config=")
    params, how = estimate_parameters(raw, model=model.name)
    per = DTYPE_BYTES[model.dtype]
    w = params * per
    quant = raw.get("quantization_config") or (raw.get("text_config") or {}).get("quantization_config")
    note = ""
    if isinstance(quant, dict):
        note = (f"; the checkpoint is quantized ({quant.get('quant_method', '?')}): counting {model.dtype} "
                f"overstates it, pass checkpoint_dir=")
    return Term("weights", label, -(-w // tp), True,
                f"estimate from {where}: {how} x {per} B ({model.dtype}) = {w:,} B / TP{note}")


# ---- the longest request -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class AutoFit:
    """What `--max-model-len -1` picks (kv_cache_planning._auto_fit_max_model_len)."""

    max_model_len: int  # the fitted length (0: not even one token fits)
    derived_max_model_len: int  # the model's own (the search's upper end)
    budget_bytes: int
    bytes_per_block: int
    check_bytes: int  # budget - one block (the null block)
    request_bytes: int  # _max_memory_usage_bytes_from_groups at the fitted length

    @property
    def reduced(self) -> bool:
        """Whether the fitted max_model_len is below the model's own."""
        return self.max_model_len < self.derived_max_model_len

    @property
    def log_line(self) -> str:
        """vLLM 0.33's auto-fit log line (kv_cache_planning._auto_fit_max_model_len): the full context fits, or it
        was reduced to the fitted length, with the memory it was checked against."""
        mem = f"{format_gib(self.check_bytes)} GiB GPU"
        if not self.reduced:
            return (f"Auto-fit max_model_len: full model context length {self.derived_max_model_len} fits in "
                    f"available KV cache memory ({mem})")
        return (f"Auto-fit max_model_len: reduced from {self.derived_max_model_len} to {self.max_model_len} to fit "
                f"in available KV cache memory ({mem})")


def auto_fit(model, options: Options = Options(), budget_bytes: int = 0, *, planner: str | None = None) -> AutoFit:
    """vLLM 0.33's `_estimate_max_model_len_from_groups`: the largest L in [1, the model's derived
    max_model_len] whose request memory (bytes per block x the blocks every group holds at L,
    `_max_memory_usage_bytes_from_groups`) fits the budget less one block (the null block,
    get_kv_cache_configs' check_memory). One plan gives the layout (a page does not depend on the
    request length: a Mamba 'none'-mode state's block size is max_model_len, its bytes are not);
    each L changes only the Scheduling. `options.max_model_len` is ignored (-1 replaces it)."""
    from .core.capacity import group_blocks_for_request
    from .vllm.plan import plan_model

    require(type(budget_bytes) is int and budget_bytes > 0, f"budget_bytes={budget_bytes!r}: must be a positive integer")
    plan = plan_model(model, planner, dataclasses.replace(options, max_model_len=None))
    derived = model.max_model_len
    stride = plan.block_stride

    def need(length: int) -> int:
        s = dataclasses.replace(plan.scheduling, max_model_len=length)
        return sum(sum(group_blocks_for_request(p, s)) * p.block_stride for p in plan.pools)

    check = budget_bytes - stride
    if check <= 0 or need(1) > check:
        return AutoFit(0, derived, budget_bytes, stride, check, 0)
    left, right, result = 1, derived, 1
    while left <= right:
        mid = (left + right) // 2
        if need(mid) <= check:
            result, left = mid, mid + 1
        else:
            right = mid - 1
    return AutoFit(result, derived, budget_bytes, stride, check, need(result))


def largest_context(model, options: Options = Options(), budget_bytes: int = 0, *, planner: str | None = None) -> int:
    """The max_model_len `--max-model-len -1` picks for `budget_bytes` of KV memory (see `auto_fit`);
    refused, like vLLM's "Cannot auto-fit max_model_len", when not even one token fits."""
    fit = auto_fit(model, options, budget_bytes, planner=planner)
    if fit.max_model_len <= 0:
        raise KvvizError(f"budget_bytes={budget_bytes:,}: Cannot auto-fit max_model_len: not enough GPU memory "
                         f"available to serve even a single token (one block is {fit.bytes_per_block:,} B, plus the "
                         f"null block)")
    return fit.max_model_len
