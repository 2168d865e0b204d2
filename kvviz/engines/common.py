"""The result shapes every engine's planner returns (`EnginePool`, `EnginePlan`, `EngineRow`), the knobs
they read and the helpers they share; the engines themselves are `kvviz.engines.sglang` and
`kvviz.engines.trtllm`, `kvviz.engines.dispatch` chooses among them."""

from __future__ import annotations

import dataclasses

from kvviz.base.defaults import GIB
from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import having, of_type, short_repr
from kvviz.options import Options

ENGINES = ("vllm", "sglang", "trtllm")
# vLLM 0.33 engine/arg_utils.py _set_default_max_num_seqs_and_batched_tokens_args: max_num_seqs on
# a GPU of 70 GiB or more that is not an A100 (H100, H200, B200), the API server's and LLM's.
VLLM_MAX_NUM_SEQS = 1024


@dataclasses.dataclass(frozen=True)
class EnginePool:
    """One buffer (or family of per-layer buffers) an engine allocates.

    `unit` is what the engine counts: 'token' (SGLang's rows), 'block of 32 tokens' (TRT-LLM,
    vLLM), 'request slot' (recurrent states); `bytes_per_unit` covers all `layers` of the
    pool; `reserved_units` are allocated beyond `units` and never handed out (SGLang's padded
    page / padding slot)."""

    name: str
    holds: str
    unit: str
    bytes_per_unit: int
    units: int
    layers: int = 0
    reserved_units: int = 0
    # How the bytes lie (kvviz.engines.maps draws each its own way): 'layer buffers' (SGLang: one
    # buffer per layer, unit rows each), 'blocks' (TRT-LLM / vLLM: a unit holds every layer of the
    # pool), 'unified' (SGLang --enable-unified-memory: one buffer, two allocators from its ends).
    arrangement: str = "layer buffers"
    window: int | None = None  # TRT-LLM: the attention window the pool serves
    kind: str = "kv"  # 'kv', 'latent' (MLA), 'state' (recurrent)
    outside_budget: bool = False  # allocated before the KV budget is measured (TRT-LLM's Mamba states)

    @property
    def total_bytes(self) -> int:
        """Bytes of the pool: bytes per unit x (units + reserved units)."""
        return self.bytes_per_unit * (self.units + self.reserved_units)

    def to_json(self) -> dict:
        """The pool as a JSON object: name, what it holds, its unit and bytes per unit, units (and reserved ones),
        layers, total bytes and arrangement."""
        return {
            "name": self.name,
            "holds": self.holds,
            "unit": self.unit,
            "bytes_per_unit": self.bytes_per_unit,
            "units": self.units,
            "reserved_units": self.reserved_units,
            "layers": self.layers,
            "total_bytes": self.total_bytes,
            "arrangement": self.arrangement,
            "window": self.window,
            "kind": self.kind,
            "outside_budget": self.outside_budget,
        }


@dataclasses.dataclass(frozen=True)
class EnginePlan:
    """What one engine does with one budget: its pools, its token capacity (SGLang's
    max_total_num_tokens, TRT-LLM's max tokens per window, vLLM's GPU KV cache size), the
    requests it runs at once, and the line it logs."""

    engine: str  # one of ENGINES
    version: str  # the engine version whose rules are mirrored
    model: str
    kv_budget_bytes: int
    pools: tuple[EnginePool, ...]
    token_capacity: int
    token_capacity_name: str  # the engine's own name for it
    request_bound: int  # requests served at once (SGLang: max_running_requests)
    request_bound_rule: str  # how the engine arrives at it
    max_model_len: int  # the request length the bound is counted for
    log_lines: tuple[str, ...]  # the engine's own lines, in its wording; the last is the capacity line
    derivation: tuple[str, ...] = ()
    tokens_per_window: tuple[tuple[int, int], ...] = ()  # TRT-LLM: (window, max tokens)
    notes: tuple[str, ...] = ()  # what the engine does here that kvviz does not model
    # What one of token_capacity's tokens is, in a few words: the engines count differently, so a
    # comparison prints this beside the number ('requests at once' is the like-for-like column).
    token_capacity_counts: str = ""
    # Requests of max_model_len tokens the pools hold at once, within request_bound; None when
    # request_bound already counts them (vLLM, TensorRT-LLM's reserve-to-completion scheduler).
    # SGLang's max_running_requests and TensorRT-LLM's KVCacheV2Scheduler cap requests of any
    # length, so their plans give this too.
    requests_fit: int | None = None

    @property
    def log_line(self) -> str:
        """The engine's own capacity line (the last of its log lines)."""
        return self.log_lines[-1]

    @property
    def used_bytes(self) -> int:
        """Bytes of the budget the pools take, reserved units included."""
        return sum(p.total_bytes for p in self.pools)

    @property
    def kv_bytes(self) -> int:
        """Bytes of the pools carved from the KV budget (TRT-LLM's Mamba slots are outside it)."""
        return sum(p.total_bytes for p in self.pools if not p.outside_budget)

    @property
    def waste_bytes(self) -> int:
        """Budget bytes no pool holds (the floor to whole tokens, pages or blocks)."""
        return max(self.kv_budget_bytes - self.kv_bytes, 0)

    @property
    def full_length_requests(self) -> int:
        """Requests of max_model_len tokens running at once: the pools' count within the engine's
        bound (the number that compares like for like across engines)."""
        return self.request_bound if self.requests_fit is None else self.requests_fit

    @property
    def concurrency(self) -> float:
        """Token capacity over the request length: requests of max_model_len tokens that fit."""
        return self.token_capacity / self.max_model_len

    def describe(self) -> str:
        """The plan as text: the engine, model and budget, one line per pool (units x bytes per unit), the token
        capacity under the engine's own name, and the engine's log lines."""
        lines = [
            f"{self.engine} {self.version}: {self.model}, KV budget {self.kv_budget_bytes:,} B "
            f"({self.kv_budget_bytes / GIB:.2f} GiB)"
        ]
        for p in self.pools:
            extra = f" (+{p.reserved_units:,} reserved)" if p.reserved_units else ""
            lines.append(
                f"  pool {p.name}: {p.holds}; {p.units:,}{extra} x {p.unit} of {p.bytes_per_unit:,} B "
                f"= {p.total_bytes:,} B"
            )
        lines.append(
            f"  {self.token_capacity_name} = {self.token_capacity:,}"
            + (f" ({self.token_capacity_counts})" if self.token_capacity_counts else "")
        )
        for window, tokens in self.tokens_per_window:
            lines.append(f"  window {window:,}: {tokens:,} tokens")
        lines.append(
            f"  requests at once = {self.request_bound:,} ({self.request_bound_rule}); "
            f"{self.concurrency:.2f}x requests of {self.max_model_len:,} tokens"
        )
        if self.requests_fit is not None:
            lines.append(f"  requests of {self.max_model_len:,} tokens at once = {self.requests_fit:,}")
        lines.extend(f"  {d}" for d in self.derivation)
        lines.extend(f"  not modelled: {n}" for n in self.notes)
        lines.extend(f"  log: {line}" for line in self.log_lines)
        return "\n".join(lines)

    def to_json(self) -> dict:
        """The plan as a JSON object: engine, version, model, budget, pools, used and wasted bytes, token capacity,
        request bound, concurrency and the engine's log lines."""
        return {
            "engine": self.engine,
            "version": self.version,
            "model": self.model,
            "kv_budget_bytes": self.kv_budget_bytes,
            "pools": [p.to_json() for p in self.pools],
            "used_bytes": self.used_bytes,
            "waste_bytes": self.waste_bytes,
            "token_capacity": self.token_capacity,
            "token_capacity_name": self.token_capacity_name,
            "token_capacity_counts": self.token_capacity_counts,
            "request_bound": self.request_bound,
            "request_bound_rule": self.request_bound_rule,
            "full_length_requests": self.full_length_requests,
            "max_model_len": self.max_model_len,
            "concurrency": round(self.concurrency, 4),
            "log_line": self.log_line,
            "log_lines": list(self.log_lines),
            "derivation": list(self.derivation),
            "tokens_per_window": [list(t) for t in self.tokens_per_window],
            "notes": list(self.notes),
        }


@dataclasses.dataclass(frozen=True)
class EngineKnobs:
    """Engine settings that only one engine has (None / False: that engine's default).

    TensorRT-LLM: `max_attention_window` (KvCacheConfig.max_attention_window, a per-layer pattern
    repeated over the attention layers; two or more sizes make VSWA pools) and
    `window_size_shares` (TRTLLM_WINDOW_SIZE_SHARES: each window size's share of the pool, summing
    to 1), `max_batch_size` (LlmArgs.max_batch_size, None: 2048) and `use_py_mamba` (a hybrid Mamba
    model on the legacy MixedMambaHybridCacheManager: use_kv_cache_manager_v2=False with
    TRTLLM_USE_PY_MAMBA=1). SGLang: `unified_memory` (--enable-unified-memory: one buffer, two allocators)."""

    max_attention_window: tuple[int, ...] | None = None
    window_size_shares: tuple[float, ...] | None = None
    unified_memory: bool = False
    max_batch_size: int | None = None
    use_py_mamba: bool = False

    def __post_init__(self) -> None:
        w = self.max_attention_window
        if w is not None:
            require(
                isinstance(w, tuple) and w and all(type(x) is int and x > 0 for x in w),
                f"max_attention_window={w!r}: a tuple of positive token counts",
            )
        s = self.window_size_shares
        if s is not None:
            require(w is not None, "window_size_shares: applies only with max_attention_window")
            require(
                isinstance(s, tuple) and all(isinstance(x, (int, float)) and 0 < x <= 1 for x in s),
                f"window_size_shares={s!r}: a tuple of shares in (0, 1]",
            )
        require(isinstance(self.unified_memory, bool), f"unified_memory={self.unified_memory!r}: True or False")
        b = self.max_batch_size
        require(b is None or (type(b) is int and b > 0), f"max_batch_size={b!r}: a positive integer")
        require(isinstance(self.use_py_mamba, bool), f"use_py_mamba={self.use_py_mamba!r}: True or False")


def check_call(model, options) -> None:
    """What every engine's planner asks of its arguments first: a kvviz.load(...) model (the engines may not import
    its class: kvviz.base.inputs.having) and an Options record; else one line naming the argument."""
    having(model, ("name", "architecture", "reader"), field="model", give="a kvviz.load(...) model")
    of_type(options, Options, field="options", give="a kvviz.Options record, e.g. Options(kv_dtype='fp8')")


def check_engines(engines) -> tuple[str, ...]:
    """The engines to put side by side: a list or tuple of ENGINES' names, else one line naming `engines`."""
    of_type(engines, (tuple, list), field="engines", give=f"a list of engines, e.g. {list(ENGINES)}")
    for e in engines:
        require(
            e in ENGINES if isinstance(e, str) else False, f"engines: {short_repr(e)}: choose from {', '.join(ENGINES)}"
        )
    return tuple(engines)


def check_budget(kv_budget_bytes) -> int:
    """The KV budget in bytes, checked: a positive integer, else one line naming kv_budget_bytes."""
    require(
        isinstance(kv_budget_bytes, int) and not isinstance(kv_budget_bytes, bool) and kv_budget_bytes > 0,
        f"kv_budget_bytes={short_repr(kv_budget_bytes)}: must be a positive integer",
    )
    return kv_budget_bytes


@dataclasses.dataclass(frozen=True)
class EngineRow:
    """One engine's answer in a comparison: its plan, or the one line saying why it has none
    (the engine does not serve the model, or kvviz does not model that engine's pools for it)."""

    engine: str
    plan: EnginePlan | None
    refusal: str | None = None


def token_count_lines(rows) -> list[str]:
    """What each engine's 'tokens' counts, one line per planned engine, under a heading that says
    the engines count differently and 'requests at once' is the column to compare; [] when no plan
    says what its tokens are."""
    of_type(rows, (tuple, list), field="rows", give="kvviz.engines.compare_rows(...)'s rows")
    for r in rows:
        of_type(r, EngineRow, field="rows", give="kvviz.engines.compare_rows(...)'s rows")
    said = [(r.engine, r.plan.token_capacity_counts) for r in rows if r.plan and r.plan.token_capacity_counts]
    if not said:
        return []
    return [
        "tokens are each engine's own count, not one unit; 'requests at once' (of max_model_len tokens, "
        "within the engine's bound) compares like for like:"
    ] + [f"  {engine}: {counts}" for engine, counts in said]


# Architectures an engine serves through pools of its own that kvviz does not mirror (yet):
# the comparison says so in one line instead of inventing numbers.
OWN_POOLS = {
    ("sglang", "DeepseekV4ForCausalLM"): "SGLang 0.5.23 serves it through its own pools (mem_cache/"
    "deepseek_v4_memory_pool.py DeepSeekV4TokenToKVPool: compressed c4/c128 + SWA + indexer)",
}
# Architectures an engine's registry lists (kvviz.engines.served) but that it does not serve for the
# model's config: one line, no numbers.
NOT_SERVED = {
    ("trtllm", "KimiLinearForCausalLM"): "TensorRT-LLM main's KimiLinearForCausalLM (_torch/models/"
    "modeling_kimi_linear.py at commit cf328e85) is the Kimi K3 runtime: KimiLinearDecoderLayer asserts "
    "attn_res_block_size ('Kimi K3 runtime expects attn_res_block_size to be set'), which Kimi-Linear-48B-A3B's "
    "config does not set",
}


def state_bytes(state, conv_dtype: str, ssm_dtype: str) -> tuple[int, int]:
    """(conv bytes, SSM bytes) of one declared recurrent state (core.declare.MambaCache) priced in
    an engine's own dtypes: of a state with more than one part the last is its temporal (SSM)
    state and the rest are conv (SGLang's BaseLinearStateParams, TensorRT-LLM's conv_states /
    ssm_states and SsmLayerConfig alike); a one-part state (short conv) is all conv."""
    from kvviz.base.formats import ELEMENT_BYTES

    having(state, ("parts",), field="state", give="a declared recurrent state (kvviz.core.declare.MambaCache)")
    for name, dtype in (("conv_dtype", conv_dtype), ("ssm_dtype", ssm_dtype)):
        require(
            isinstance(dtype, str) and dtype in ELEMENT_BYTES,
            f"{name}={short_repr(dtype)}: give an element dtype: {', '.join(ELEMENT_BYTES)}",
        )
    temporal = state.parts[-1] if len(state.parts) > 1 else None
    ssm = temporal.count * ELEMENT_BYTES[ssm_dtype] if temporal is not None else 0
    conv = sum(p.count for p in state.parts if p is not temporal) * ELEMENT_BYTES[conv_dtype]
    return conv, ssm


def split_declared(model, caches, engine: str = "") -> tuple[list, list, list]:
    """(attention, MLA, recurrent-state) declared caches; a family that returns finished vLLM
    CacheSpecs (DeepSeek V4) has no engine-neutral declaration to size from."""
    from kvviz.core.declare import AttentionCache, MambaCache, MLACache

    having(model, ("name", "architecture"), field="model", give="a kvviz.load(...) model")
    of_type(caches, (tuple, list), field="caches", give="the model's declared caches (model.reader.caches(...))")
    of_type(engine, str, field="engine", give=f"an engine's name: {', '.join(ENGINES)}")
    own = OWN_POOLS.get((engine, model.architecture))
    if own:
        raise KvvizError(f"{model.name}: {own}; those pools are not modelled by kvviz")
    unserved = NOT_SERVED.get((engine, model.architecture))
    if unserved:
        raise KvvizError(f"{model.name}: {model.architecture} is not served: {unserved}")

    attn, mla, states = [], [], []
    for c in caches:
        if isinstance(c, AttentionCache):
            attn.append(c)
        elif isinstance(c, MLACache):
            mla.append(c)
        elif isinstance(c, MambaCache):
            states.append(c)
        else:
            raise KvvizError(
                f"{model.name}: its family returns vLLM-paged caches ({type(c).__name__}), not "
                f"declared ones; the other engines' pools for it are not modelled"
            )
    require(attn or mla or states, f"{model.name}: registers no KV caches")
    return attn, mla, states
