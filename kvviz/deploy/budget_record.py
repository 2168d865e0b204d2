"""A KV budget as `kvviz.deploy.kv_budget` gives it: its terms (`Term`) and the result (`KVBudget`), with the
text and JSON every output prints; with pipeline stages, each stage's weights and KV memory
(kvviz.deploy.stage_weights.StageBudget)."""

from __future__ import annotations

import dataclasses

from kvviz.base.defaults import GIB
from kvviz.base.text import format_gib


@dataclasses.dataclass(frozen=True)
class Term:
    """One term of the budget: bytes (negative terms are subtracted), what it is, where it comes from."""

    key: str  # 'total', 'requested', 'weights', 'activation', 'kv_cache_memory_bytes'
    label: str
    value: int
    estimate: bool
    source: str = ""
    origin: str = ""  # the weights term: where the whole model's weights came from, whatever the TP / PP split

    def line(self) -> str:
        """The term as one line: label, bytes and GiB, an [estimate] mark where it is one, and its source."""
        mark = "  [estimate]" if self.estimate else ""
        return f"{self.label}: {self.value:,} B ({self.value / GIB:.2f} GiB){mark} - {self.source}"

    def to_json(self) -> dict:
        """The term as a JSON object: key, label, bytes, GiB, whether an estimate, and its source."""
        return {
            "key": self.key,
            "label": self.label,
            "bytes": self.value,
            "gib": round(self.value / GIB, 4),
            "estimate": self.estimate,
            "source": self.source,
        }


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
    available_bytes: int  # pipeline stages: the smallest stage's (each stage's in `stages`)
    exact_pool: bool = False  # --kv-cache-memory-bytes
    stages: tuple = ()  # pipeline parallel from a GPU: one kvviz.deploy.stage_weights.StageBudget a stage

    @property
    def budget(self) -> int | tuple[int, ...]:
        """What `Plan.capacity` takes: the KV memory on every GPU, or with pipeline stages one a stage (vLLM's
        per-worker `available_memory`, get_kv_cache_configs)."""
        return tuple(s.available_bytes for s in self.stages) if self.stages else self.available_bytes

    @property
    def pipeline_parallel_size(self) -> int:
        """The stages the budget was sized for (1: every GPU holds the whole model's layers / TP)."""
        return len(self.stages) or 1

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
            return (
                f"reserved {format_gib(self.available_bytes)} GiB memory for KV Cache as specified by "
                f"kv_cache_memory_bytes config and skipped memory profiling"
            )
        if self.stages:  # each stage's worker logs its own
            return "; ".join(
                f"stage {s.weights.stage}: Available KV cache memory: {format_gib(s.available_bytes)} GiB"
                for s in self.stages
            )
        return f"Available KV cache memory: {format_gib(self.available_bytes)} GiB"

    def lines(self) -> list[str]:
        """The budget as text: a head line (model, GPU, TP, whether it includes estimates), then one line per term
        and the result."""
        head = f"KV budget of {self.model}"
        if self.gpu:
            head += f" on one {self.gpu}"
        head += f", TP {self.tensor_parallel_size}"
        head += f" x PP {len(self.stages)} (one GPU of each stage)" if self.stages else " (one rank)"
        if self.estimate:
            head += " - includes estimates"
        out = [head]
        for t in self.terms:
            sign = "-" if t.key in ("weights", "activation") else " "
            out.append(f"  {sign} {t.line()}")
            if t.key == "weights":
                out.extend(f"      {s.line()}" for s in self.stages)
        mark = "  [estimate]" if self.estimate else ""
        out.append(
            f"  = available KV cache memory: {self.available_bytes:,} B ({self.available_bytes / GIB:.2f} GiB){mark}"
            + (" on the stage with the least (every stage above)" if self.stages else "")
        )
        out.append(f"  vLLM logs: {self.log_line}" + (" (from estimated terms)" if self.estimate else ""))
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def to_json(self) -> dict:
        """The budget as a JSON object: model, GPU, utilization, TP, each term, the available bytes and GiB, whether
        it includes estimates, and the log line."""
        return {
            "model": self.model,
            "gpu": self.gpu,
            "total_memory": self.total_memory,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "tensor_parallel_size": self.tensor_parallel_size,
            "exact_pool": self.exact_pool,
            "terms": [t.to_json() for t in self.terms],
            "available_bytes": self.available_bytes,
            "available_gib": round(self.available_gib, 4),
            "estimate": self.estimate,
            "log_line": self.log_line,
        } | (
            {"pipeline_parallel_size": len(self.stages), "stages": [s.to_json() for s in self.stages]}
            if self.stages
            else {}
        )
