"""What a replay records, kept compact: one row per step with runs of repeated steps (`StepLog`), and one slot
per request in integer arrays (`RequestLog`); both expand to the reference's per-step columns and
per-request records only when asked (kvviz/replay/result.py). A million requests cost a few arrays, not a
million dicts; a billion idle steps cost one row."""

from __future__ import annotations

from array import array

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
# The fields that count steps: in a run of repeated steps they move on by one a step; all others stay
_COUNTING = tuple(STEP_FIELDS.index(k) for k in ("step", "scheduled_batch", "processed_batch"))
NONE = -1  # an array slot's None
LENGTH, NEVER_ADMITTED = 1, 2  # finish reasons (0: not finished)
REASONS = {0: None, LENGTH: "length", NEVER_ADMITTED: "never_admitted"}


class StepLog:
    """The steps of a replay: `rows` (one tuple per recorded step, in STEP_FIELDS order) and `repeats` (row index
    -> how many more steps repeat it, each with step, scheduled_batch and processed_batch one more)."""

    __slots__ = ("rows", "repeats")

    def __init__(self) -> None:
        self.rows: list = []
        self.repeats: dict[int, int] = {}

    def repeat_last(self, times: int) -> None:
        """The last row happens `times` more times (a quiet step repeated, or an idle gap)."""
        i = len(self.rows) - 1
        self.repeats[i] = self.repeats.get(i, 0) + times

    @property
    def num_steps(self) -> int:
        """Steps recorded, repeats included."""
        return len(self.rows) + sum(self.repeats.values())

    def weighted(self):
        """(row, how many steps it stands for) for each row."""
        rep = self.repeats
        for i, row in enumerate(self.rows):
            yield row, 1 + rep.get(i, 0)

    def expanded(self):
        """Every step's row, repeats written out."""
        rep = self.repeats
        for i, row in enumerate(self.rows):
            yield row
            for k in range(1, rep.get(i, 0) + 1):
                out = list(row)
                for f in _COUNTING:
                    if out[f] is not None:
                        out[f] += k
                yield tuple(out)

    def columns(self) -> dict:
        """field -> one value per step (the reference's column form)."""
        rows = list(self.expanded())
        if not rows:
            return {k: [] for k in STEP_FIELDS}
        return {k: list(col) for k, col in zip(STEP_FIELDS, zip(*rows))}


def _slots(n: int, fill: int, code: str = "q") -> array:
    return array(code, [fill]) * n


class RequestLog:
    """Per workload request (by index): the steps it was first scheduled, got its first token, finished and had
    its finish processed, its hits at first admission, its output tokens and finish reason, in integer
    arrays (NONE for None); re-admissions and preemption steps only for the requests preempted."""

    __slots__ = (
        "workload",
        "first_scheduled",
        "first_token",
        "finish",
        "finish_processed",
        "first_hits",
        "outputs",
        "reason",
        "admissions",
        "preempted",
    )

    def __init__(self, workload) -> None:
        n = len(workload)
        self.workload = workload  # the WorkloadRequests, in workload order
        self.first_scheduled = _slots(n, NONE)
        self.first_token = _slots(n, NONE)
        self.finish = _slots(n, NONE)
        self.finish_processed = _slots(n, NONE)
        self.first_hits = _slots(n, NONE)
        self.outputs = _slots(n, 0)
        self.reason = _slots(n, 0, "b")
        self.admissions: dict[int, list] = {}  # index -> [[step, hits], ...] beyond the first admission
        self.preempted: dict[int, list] = {}  # index -> steps it was preempted in

    def admitted(self, i: int, step: int, hits: int) -> None:
        """Request `i` admitted (or re-admitted) at `step` with `hits` prefix-hit tokens."""
        if self.first_scheduled[i] == NONE:
            self.first_scheduled[i] = step
            self.first_hits[i] = hits
        else:
            self.admissions.setdefault(i, []).append([step, hits])

    def preempt(self, i: int, step: int) -> None:
        """Request `i` preempted at `step`."""
        self.preempted.setdefault(i, []).append(step)

    def finished(self, i: int, batch_step: int, step: int, outputs: int, reason: int = LENGTH) -> None:
        """Request `i` finished in `batch_step`'s batch, processed at `step`."""
        self.finish[i] = batch_step
        self.finish_processed[i] = step
        self.outputs[i] = outputs
        self.reason[i] = reason

    def __len__(self) -> int:
        return len(self.workload)

    def record(self, i: int) -> dict:
        """Request `i`'s record with the reference's keys."""
        w = self.workload[i]

        def val(a):
            v = a[i]
            return None if v == NONE else v

        first = val(self.first_scheduled)
        admissions = [] if first is None else [[first, self.first_hits[i]]] + self.admissions.get(i, [])
        preempted = self.preempted.get(i, [])
        return {
            "id": w.id,
            "arrival_step": w.arrival_step,
            "prompt_len": w.prompt_len,
            "output_len": w.output_len,
            "prefix_group": w.prefix_group,
            "prefix_len": w.prefix_len,
            "first_scheduled_step": first,
            "first_token_step": val(self.first_token),
            "finish_step": val(self.finish),
            "finish_processed_step": val(self.finish_processed),
            "num_preemptions": len(preempted),
            "prefix_hit_tokens_at_admission": val(self.first_hits),
            "admissions": admissions,
            "preempted_steps": list(preempted),
            "num_output_tokens": self.outputs[i],
            "finish_reason": REASONS[self.reason[i]],
        }
