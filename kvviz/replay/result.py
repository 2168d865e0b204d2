"""The frozen result of a replay: steps (column lists, as vLLM 0.33's reference replays store them),
requests and totals, with the reference's field names."""

from __future__ import annotations

import dataclasses
import json

STEP_FIELDS = (
    "step",
    "idle",
    "scheduled_batch",
    "processed_batch",
    "num_running",
    "num_waiting",
    "num_scheduled_reqs",
    "tokens_scheduled",
    "prefill_tokens",
    "decode_tokens",
    "admitted",
    "preempted",
    "preemptions",
    "finished",
    "free_blocks_after_schedule",
    "free_blocks",
    "cached_free_blocks",
    "held_blocks_after_schedule",
    "held_blocks",
    "pc_queries",
    "pc_hits",
    "pc_preempted_queries",
    "pc_preempted_hits",
)


def _freeze(value):
    t = type(value)
    if t is list:
        for v in value:
            if type(v) is list or type(v) is dict:
                return tuple([_freeze(v) for v in value])
        return tuple(value)  # scalars only (most step columns)
    if t is dict:
        return tuple((k, _freeze(v)) for k, v in value.items())
    return value


def _thaw(value):
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


@dataclasses.dataclass(frozen=True)
class Replay:
    """`steps`: field -> one value per engine step; `requests`: one record per workload request (in
    workload order); `totals`: counts over the run; `kv_cache_config` / `inputs`: what it ran on."""

    inputs: tuple
    kv_cache_config: tuple
    steps: tuple  # ((field, (values...)), ...)
    requests: tuple  # ((key, value), ...) per request
    totals: tuple
    # Per step, the blocks whose state changed: ((block id, state, group, request id), ...) with state 1
    # held, 2 free but cached (evictable), 0 free; empty unless replayed with record_blocks=True.
    block_log: tuple = ()
    # JSON text of what the front door noted (kvviz/replay/front.py): the trace read and the capacity line's
    # promise; "" when the engine ran alone
    notes: str = ""
    # the requests replayed, as given (WorkloadRequests or dicts; the front door keeps them: the answers read
    # their sharing); not compared
    workload: tuple = dataclasses.field(default=(), compare=False, repr=False)

    @classmethod
    def build(cls, inputs, config, cols, records, stats, block_log: tuple = ()) -> "Replay":
        """The frozen Replay of one run: its inputs, KV cache config, step columns, request records and totals."""
        n = len(cols["step"])
        finished = [r for r in records if r["finish_reason"] is None and r["finish_step"] is not None]
        for r in finished:
            r["finish_reason"] = "length"
        held = cols["held_blocks"]
        totals = {
            "num_steps": n,
            "num_idle_steps": sum(cols["idle"]),
            "num_requests": len(records),
            "num_finished": len(finished),
            "never_admitted": [r["id"] for r in records if r["finish_reason"] == "never_admitted"],
            "all_outputs_complete": all(r["num_output_tokens"] == r["output_len"] for r in finished)
            and len(finished) == len(records),
            "total_preemptions": sum(cols["preemptions"]),
            "requests_preempted": sum(1 for r in records if r["num_preemptions"]),
            "prefix_cache": dict(stats),
            "prefix_hit_rate": round(stats["hits"] / stats["queries"], 4) if stats["queries"] else 0.0,
            "tokens_scheduled": sum(cols["tokens_scheduled"]),
            "prefill_tokens": sum(cols["prefill_tokens"]),
            "decode_tokens": sum(cols["decode_tokens"]),
            "max_held_blocks": max((sum(h) for h in held), default=0),
            "peak_held_blocks_per_group": [max(col) for col in zip(*held)] if held else [],
            "min_free_blocks": min(
                [f for f in cols["free_blocks_after_schedule"] if f is not None] + cols["free_blocks"], default=0
            ),
            "peak_running": max(cols["num_running"], default=0),
            "last_finish_step": max((r["finish_step"] for r in finished), default=None),
        }
        return cls(
            _freeze(inputs),
            _freeze(config),
            tuple((k, _freeze(cols[k])) for k in STEP_FIELDS),
            tuple(_freeze(r) for r in records),
            _freeze(totals),
            block_log,
        )

    # ---- plain views -------------------------------------------------------------------
    def step_columns(self) -> dict:
        """The steps as field -> list of values."""
        return {k: _thaw(v) for k, v in self.steps}

    def request_records(self) -> list[dict]:
        """The requests as plain dicts."""
        return [{k: _thaw(v) for k, v in r} for r in self.requests]

    def totals_dict(self) -> dict:
        """The run's totals as a dict (the `totals` member of `to_json`)."""
        return {k: (dict(_thaw_pairs(v)) if k == "prefix_cache" else _thaw(v)) for k, v in self.totals}

    @property
    def num_steps(self) -> int:
        """How many engine steps the run took (idle steps included)."""
        return len(dict(self.steps)["step"])

    def to_json(self) -> dict:
        """`kvviz replay --json`: inputs, kv_cache_config, steps (column lists), requests, totals."""
        return {
            "inputs": {k: _thaw(v) for k, v in self.inputs},
            "kv_cache_config": {
                k: _thaw(v) if k != "groups" else [dict(_thaw_pairs(g)) for g in v] for k, v in self.kv_cache_config
            },
            "steps": self.step_columns(),
            "requests": self.request_records(),
            "totals": self.totals_dict(),
        } | ({"notes": self.notes_dict()} if self.notes else {})

    def to_dataframe(self, what: str = "steps"):
        """A pandas DataFrame: one row per step (`what='steps'`) or per request (`what='requests'`)."""
        import pandas as pd

        if what == "steps":
            return pd.DataFrame(self.step_columns())
        if what == "requests":
            return pd.DataFrame(self.request_records())
        from kvviz.base.errors import KvvizError

        raise KvvizError(f"what={what!r}: choose 'steps' or 'requests'")

    def with_notes(self, workload: tuple = (), **notes) -> "Replay":
        """A copy carrying more notes (JSON values: what the front door read, the capacity line's promise) and
        the `workload` replayed; the steps, requests and totals are the same objects."""
        notes = json.dumps({**self.notes_dict(), **notes}, sort_keys=True)
        return dataclasses.replace(self, notes=notes, workload=workload or self.workload)

    def notes_dict(self) -> dict:
        """The notes as a dict ({} for a replay made by the engine alone)."""
        return json.loads(self.notes) if self.notes else {}

    def dumps(self) -> str:
        """`to_json()` as JSON text, as `kvviz replay --json` prints it."""
        return json.dumps(self.to_json())


def _thaw_pairs(value):
    return [(k, _thaw(v)) for k, v in value]
