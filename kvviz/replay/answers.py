"""What a replay answers, printed (docs/replay.md#answers): requests finished, left out and never admitted; peak
running against the capacity line's promise; the first preemption and whom it hit; preemptions per request;
the prefix-cache hit rate and, per group, what its block size and retention let it hit (kvviz.replay.sharing);
queueing delay and time to first token in steps and ms (p50/p90/p99).

Definitions, from the Replay's recorded fields (vLLM 0.33's own reference fields):
* queueing delay = first_scheduled_step - arrival_step (steps a request waited before its first chunk ran);
* time to first token = first_token_step + 1 - arrival_step (to the end of the step whose batch sampled it);
* ms = steps x step_ms (the trace's step time, or one given): a fixed step time is an assumption;
* percentiles by nearest rank over the requests that finished (never-admitted ones have no such times);
* the hit rate is vLLM's PrefixCacheStats': hit tokens over prompt tokens at first admission (re-admissions
  after a preemption counted apart)."""

from __future__ import annotations

import dataclasses
import math

from kvviz.base.errors import require
from kvviz.replay.sharing import sharing_note
from kvviz.replay.workload import check

PERCENTILES = (50, 90, 99)


def percentiles(values, qs=PERCENTILES) -> tuple[int, ...]:
    """Nearest-rank percentiles (the smallest value with at least q% of the values at or below it); () if none."""
    ordered = sorted(values)
    if not ordered:
        return ()
    return tuple(ordered[max(math.ceil(q / 100 * len(ordered)) - 1, 0)] for q in qs)


@dataclasses.dataclass(frozen=True)
class GroupAnswer:
    """One KV cache group: what the workload's sharing lets it hit with an unbounded cache, and why."""

    name: str
    kind: str
    block_size: int
    whole_block_tokens: int  # shared spans rounded down to whole blocks of this group (capped at prompt - 1)
    reachable_tokens: int  # of those, what vLLM 0.33's retention keeps reachable (sliding window, Mamba)
    reason: str


@dataclasses.dataclass(frozen=True)
class Answers:
    """A replay's answers (module docstring); `lines()` prints them, `markdown()` as a table, `to_json()`."""

    model: str
    step_ms: float | None
    requests: int
    finished: int
    never_admitted: tuple[str, ...]
    left_out: tuple[tuple[str, int], ...]  # (reason, rows) of a trace's window
    peak_running: int
    peak_running_step: int | None
    max_num_seqs: int
    max_model_len: int
    max_concurrency: float | None
    capacity_line: str | None
    first_preemption: tuple[int, tuple[str, ...]] | None  # (step, the requests it preempted)
    preemptions: int
    requests_preempted: int
    most_preempted: tuple[str, int] | None
    preemptions_per_request: tuple[tuple[int, int], ...]  # (times preempted, requests), times >= 1
    prompt_tokens: int
    hit_tokens: int
    readmission_tokens: int
    readmission_hits: int
    shared_tokens: int
    longest_shared_span: int
    reachable_tokens: int
    groups: tuple[GroupAnswer, ...]
    queueing_steps: tuple[int, ...]  # p50, p90, p99
    ttft_steps: tuple[int, ...]

    @property
    def hit_rate(self) -> float:
        """Hit tokens over prompt tokens at first admission (vLLM's PrefixCacheStats)."""
        return self.hit_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    def ms(self, steps: int) -> str:
        """`steps` in ms at the step time ('' without one)."""
        return "" if self.step_ms is None else f" ({steps * self.step_ms:,.0f} ms)"

    def _pcts(self, values: tuple[int, ...]) -> str:
        if not values:
            return "none finished"
        return ", ".join(f"p{q} {v:,} step{'' if v == 1 else 's'}{self.ms(v)}" for q, v in zip(PERCENTILES, values))

    def rows(self) -> list[tuple[str, str]]:
        """(question, answer) pairs, in the order they are printed."""
        left = ", ".join(f"{n:,} {why}" for why, n in self.left_out if n)
        rows = [
            (
                "requests",
                f"{self.finished:,} of {self.requests:,} finished"
                + (
                    f"; {len(self.never_admitted):,} never admitted (longer than the pool holds)"
                    if self.never_admitted
                    else ""
                )
                + (f"; left out of the trace: {left}" if left else ""),
            ),
        ]
        promise = (
            f" against the capacity line's {self.max_concurrency:.2f}x requests of {self.max_model_len:,} tokens"
            if self.max_concurrency is not None
            else ""
        )
        at = (
            ""
            if self.peak_running_step is None
            else f" at step {self.peak_running_step:,}{self.ms(self.peak_running_step)}"
        )
        rows.append(("peak running", f"{self.peak_running:,}{at}{promise} (max_num_seqs {self.max_num_seqs:,})"))
        if self.first_preemption is None:
            rows.append(("first preemption", "none"))
        else:
            step, ids = self.first_preemption
            more = f" and {len(ids) - 1} more" if len(ids) > 1 else ""
            rows.append(("first preemption", f"step {step:,}{self.ms(step)}: {ids[0]}{more}"))
        per = ", ".join(f"{n:,} x{k}" for k, n in self.preemptions_per_request)
        most = f"; most: {self.most_preempted[0]} ({self.most_preempted[1]})" if self.most_preempted else ""
        rows.append(
            (
                "preemptions",
                f"{self.preemptions:,} of {self.requests_preempted:,} requests" + (f" ({per}){most}" if per else ""),
            )
        )
        rows.append(
            (
                "prefix cache",
                f"{self.hit_tokens:,} of {self.prompt_tokens:,} prompt tokens hit ({self.hit_rate:.1%}); an unbounded "
                f"cache could hit {self.reachable_tokens:,} (shared: {self.shared_tokens:,}, longest span "
                f"{self.longest_shared_span:,}); re-admissions {self.readmission_hits:,} of "
                f"{self.readmission_tokens:,}",
            )
        )
        for names, g in _alike(self.groups):
            rows.append((f"  {names} ({g.kind}, {g.block_size:,}-token blocks)", g.reason))
        rows.append(("queueing delay", self._pcts(self.queueing_steps)))
        rows.append(("time to first token", self._pcts(self.ttft_steps)))
        return rows

    def lines(self) -> list[str]:
        """The answers as text lines (`kvviz replay` prints them)."""
        width = max(len(q) for q, _ in self.rows())
        return [f"{q.ljust(width)}  {a}" for q, a in self.rows()]

    def markdown(self) -> str:
        """The answers as a Markdown table (`kvviz replay --markdown`)."""
        out = [
            f"**{self.model}**" + (f" ({self.capacity_line})" if self.capacity_line else ""),
            "",
            "| | |",
            "|---|---|",
        ]
        out += [f"| {q.strip()} | {a.replace('|', '/')} |" for q, a in self.rows()]
        return "\n".join(out) + "\n"

    def to_json(self) -> dict:
        """The answers as a dict (`kvviz replay --json`'s `answers`)."""
        out = dataclasses.asdict(self)
        out["hit_rate"] = round(self.hit_rate, 6)
        out["left_out"] = dict(self.left_out)
        out["preemptions_per_request"] = {str(k): n for k, n in self.preemptions_per_request}
        out["queueing_steps"] = dict(zip((f"p{q}" for q in PERCENTILES), self.queueing_steps))
        out["ttft_steps"] = dict(zip((f"p{q}" for q in PERCENTILES), self.ttft_steps))
        return out


def answers(replay, *, step_ms: float | None = None) -> Answers:
    """The answers of `replay` (a kvviz.replay Replay); `step_ms` for the ms of a workload without a trace's
    step time (a trace's own wins)."""
    require(hasattr(replay, "step_columns") and hasattr(replay, "notes_dict"), "replay: give a kvviz.replay Replay")
    doc = replay.to_json()
    notes, totals, cfg, inputs = doc.get("notes", {}), doc["totals"], doc["kv_cache_config"], doc["inputs"]
    trace = notes.get("trace") or {}
    step_ms = trace.get("step_ms", step_ms)
    cols, recs = doc["steps"], doc["requests"]
    running = cols["num_running"]
    peak = max(running, default=0)
    first = next(((s, tuple(p)) for s, p in zip(cols["step"], cols["preempted"]) if p), None)
    done = [r for r in recs if r["finish_reason"] not in (None, "never_admitted")]
    counts: dict[int, int] = {}
    for r in recs:
        if r["num_preemptions"]:
            counts[r["num_preemptions"]] = counts.get(r["num_preemptions"], 0) + 1
    most = max(recs, key=lambda r: r["num_preemptions"], default=None)
    groups = [(g["name"], g["kind"], g["block_size"], g["sliding_window"]) for g in cfg["groups"]]
    share = sharing_note(check(replay.workload), groups) if replay.workload else None  # dicts -> requests
    pc = totals["prefix_cache"]
    return Answers(
        model=inputs["model"],
        step_ms=step_ms,
        requests=totals["num_requests"],
        finished=totals["num_finished"],
        never_admitted=tuple(totals["never_admitted"]),
        left_out=(
            ("zero length", trace.get("left_out_zero_length", 0)),
            ("longer than max_model_len", trace.get("left_out_too_long", 0)),
        ),
        peak_running=peak,
        peak_running_step=running.index(peak) if running else None,
        max_num_seqs=inputs["max_num_seqs"],
        max_model_len=inputs["max_model_len"],
        max_concurrency=notes.get("max_concurrency"),
        capacity_line=notes.get("capacity_line"),
        first_preemption=first,
        preemptions=totals["total_preemptions"],
        requests_preempted=totals["requests_preempted"],
        most_preempted=(most["id"], most["num_preemptions"]) if most and most["num_preemptions"] else None,
        preemptions_per_request=tuple(sorted(counts.items())),
        prompt_tokens=pc["queries"],
        hit_tokens=pc["hits"],
        readmission_tokens=pc["preempted_queries"],
        readmission_hits=pc["preempted_hits"],
        shared_tokens=share["shared_tokens"] if share else 0,
        longest_shared_span=share["longest_shared_span"] if share else 0,
        reachable_tokens=share["reachable_tokens"] if share else 0,
        groups=tuple(_group(g, share) for g in (share["groups"] if share else ())),
        queueing_steps=percentiles(r["first_scheduled_step"] - r["arrival_step"] for r in done),
        ttft_steps=percentiles(r["first_token_step"] + 1 - r["arrival_step"] for r in done),
    )


def _alike(groups) -> list[tuple[str, GroupAnswer]]:
    """Groups with the same answer as one line: ('state-0, state-1, state-2', the first's answer)."""
    out: dict = {}
    for g in groups:
        out.setdefault((g.kind, g.block_size, g.whole_block_tokens, g.reachable_tokens, g.reason), []).append(g)
    return [(", ".join(x.name for x in same), same[0]) for same in out.values()]


def _group(g: dict, share: dict) -> GroupAnswer:
    """A group's answer, with the reason it can hit little or nothing."""
    block, whole, reach = g["block_size"], g["whole_block_tokens"], g["reachable_tokens"]
    prompts = share["prompt_tokens"] or 1
    if not share["shared_tokens"]:
        reason = "nothing in the workload is shared between requests"
    elif not whole:
        reason = (
            f"hits nothing: no shared span holds a whole {block:,}-token block (the longest is "
            f"{share['longest_shared_span']:,} tokens)"
        )
    elif not reach:
        what = "state" if g["kind"] == "mamba" else "window"
        reason = (
            f"hits nothing: {whole:,} shared tokens fill whole {block:,}-token blocks, but no earlier request kept "
            f"its {what} at those boundaries (vLLM 0.33 keeps it at a prompt's last block and a pinned junction)"
        )
    else:
        kept = "" if reach == whole else f" of {whole:,} in whole blocks (the rest not kept: sparse retention)"
        reason = f"could hit {reach:,} tokens ({reach / prompts:.1%} of prompts){kept}"
    return GroupAnswer(g["group"], g["kind"], block, whole, reach, reason)
