"""The frozen result of a replay: steps (column lists, as vLLM 0.33's reference replays store them),
requests and totals, with the reference's field names."""

from __future__ import annotations

import dataclasses
import json

from kvviz.replay.log import NEVER_ADMITTED, STEP_FIELDS, RequestLog, StepLog

__all__ = ["Replay", "STEP_FIELDS"]


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


@dataclasses.dataclass(frozen=True, eq=False)
class Replay:
    """A replay's `steps` (kvviz/replay/log.py `StepLog`: a row per step, repeated steps as runs), `requests`
    (`RequestLog`: one slot per workload request, in workload order), `totals` (counts over the run) and
    `kv_cache_config` / `inputs` (what it ran on); `step_columns()`, `request_records()` and `to_json()` write
    them out in the reference's form."""

    inputs: tuple
    kv_cache_config: tuple
    steps: StepLog
    requests: RequestLog
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
    def build(cls, inputs, config, steps: StepLog, requests: RequestLog, stats, block_log: tuple = ()) -> "Replay":
        """The frozen Replay of one run: its inputs, KV cache config, steps, request slots and totals (summed over
        the rows, each counted as often as it repeats)."""
        cols = dict(zip(STEP_FIELDS, zip(*steps.rows))) if steps.rows else {k: () for k in STEP_FIELDS}

        def total(field: str) -> int:  # over every step: a repeated row counts once per repeat
            col = cols[field]
            return sum(col) + sum(col[i] * times for i, times in steps.repeats.items())

        held = cols["held_blocks"]  # repeats change no maximum or minimum
        after = [x for x in cols["free_blocks_after_schedule"] if x is not None]
        reason, outputs, work = requests.reason, requests.outputs, requests.workload
        n = len(requests)
        finished = [i for i in range(n) if reason[i] and reason[i] != NEVER_ADMITTED]
        totals = {
            "num_steps": steps.num_steps,
            "num_idle_steps": total("idle"),
            "num_requests": n,
            "num_finished": len(finished),
            "never_admitted": [work[i].id for i in range(n) if reason[i] == NEVER_ADMITTED],
            "all_outputs_complete": all(outputs[i] == work[i].output_len for i in finished) and len(finished) == n,
            "total_preemptions": total("preemptions"),
            "requests_preempted": len(requests.preempted),
            "prefix_cache": dict(stats),
            "prefix_hit_rate": round(stats["hits"] / stats["queries"], 4) if stats["queries"] else 0.0,
            "tokens_scheduled": total("tokens_scheduled"),
            "prefill_tokens": total("prefill_tokens"),
            "decode_tokens": total("decode_tokens"),
            "max_held_blocks": max(map(sum, held), default=0),
            "peak_held_blocks_per_group": [max(col) for col in zip(*held)] if held else [],
            "min_free_blocks": min(after + list(cols["free_blocks"]), default=0),
            "peak_running": max(cols["num_running"], default=0),
            "last_finish_step": max((requests.finish[i] for i in finished), default=None),
        }
        return cls(_freeze(inputs), _freeze(config), steps, requests, _freeze(totals), block_log)

    # ---- plain views -------------------------------------------------------------------
    def step_columns(self) -> dict:
        """The steps as field -> list of values, one per step (repeated steps written out)."""
        return self.steps.columns()

    def request_records(self) -> list[dict]:
        """The requests as plain dicts, in workload order."""
        return [self.requests.record(i) for i in range(len(self.requests))]

    def totals_dict(self) -> dict:
        """The run's totals as a dict (the `totals` member of `to_json`)."""
        return {k: (dict(_thaw_pairs(v)) if k == "prefix_cache" else _thaw(v)) for k, v in self.totals}

    @property
    def num_steps(self) -> int:
        """How many engine steps the run took (idle steps included)."""
        return self.steps.num_steps

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
