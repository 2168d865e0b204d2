"""Running requests in steady decode, replayed lazily: the scheduler's fast path (docs/replay.md#speed).

A running request past its prefill that vLLM 0.33's scheduler gives one token a step, whose allocate_slots
would allocate, hash and free nothing (below its `quiet_end` and `trim_limit`, kvviz/replay/running.py) and
whose processed token neither finishes it nor hashes a block (below `finish_at`, `cache_limit`), does the same
thing every step: one scheduled token (`Scheduler.schedule`), one sampled token (`update_from_output`), and
nothing else, for the scheduler, the pool or the records. Such a request is taken out of the per-step loops
(`Request.lazy` = the first batch it sits out) and counted instead: each step schedules `count` such tokens.
Its counters are brought up to date (`_materialize`) only when it needs the scheduler again: at the first
batch that is not quiet (its wake, known in advance from those limits, all of which only its own steps move),
when it is preempted, or when the token budget binds on the running requests (every steady request then
goes back to the per-step loop for that step).

The counters of a steady request at the start of step s, from its state at the end of step b0 - 1 (b0 its
first lazy batch): batches b0 .. s - 1 scheduled one token each; batches b0 .. s - 2 processed (async
scheduling: batch s - 1 is processed later in step s, so a woken request joins that batch's sampled list) or
b0 .. s - 1 (async off)."""

from __future__ import annotations

import heapq

from kvviz.replay.request import RUNNING


class Steady:
    """The steady requests of one replay: their count and a calendar of their wakes (wake batch -> entries
    (admission order, request, first batch, in place); a heap of the batches that have one)."""

    def __init__(self, async_: bool, windowed: bool, dense=None) -> None:
        self.async_ = async_
        self.windowed = windowed  # a window or Mamba group: trim_limit applies (Scheduler.schedule's `plain`)
        self.dense = dense  # a model of one full-attention group: its (dense_slots, dense_crossings), else None
        self.calendar: dict[int, list] = {}
        self.days: list[int] = []  # heap of the calendar's batches
        self.count = 0
        self.explicit: dict = {}  # the scheduler's running requests that are not steady, by seq

    def _wake(self, r, first: int, out: int) -> tuple[int, bool]:
        """The first batch from `first` on that is not quiet for `r` (output `out` at batch `first`'s schedule),
        and whether only its schedule's pool work makes it so (allocate_slots: `cross` does it in place)."""
        base = r.prompt_len + out
        if self.async_:
            # batch first + k (output o + k at its schedule) is not quiet when its processed token finishes the
            # request (o + k + 2 >= finish_at), or its schedule needs a block (computed + 1 > alloc_limit),
            # hashes one (allocate_slots hashes up to min(computed + 1, num_tokens) = computed: computed >=
            # cache_limit; below it the scheduler's call at computed + 1 = cache_limit is a no-op, and so is the
            # processed token's: the next schedule hashes first) or frees one (processed = computed - 1 >=
            # trim_limit)
            finish = r.finish_at - 2 - out
            pool = r.alloc_limit - base
        else:  # computed = prompt + o + k - 1 at batch first + k's schedule, processed in the same step
            finish = r.finish_at - 1 - out
            pool = r.alloc_limit - base + 1
        k = r.cache_limit - base
        if k < pool:
            pool = k
        if self.windowed:
            k = r.trim_limit - base + 1
            if k < pool:
                pool = k
        if pool < finish:
            return first + pool, True
        return first + finish, False

    def enter(self, batch: list, step: int) -> None:
        """At the end of step `step`: each request of the batch's sampled list that is running in steady decode
        and quiet for at least its next batch sits the next batches out, until its wake."""
        async_ = self.async_
        first = step + 1
        for r, n in batch:
            if n != 1 or r.status is not RUNNING or r.num_stale_output_tokens or r.lazy >= 0:
                continue
            out = r.num_output
            if async_:
                # batch `step` in flight: one placeholder, one token in flight, computed = prompt + output
                if (
                    r.num_output_placeholders != 1
                    or r.num_in_flight_tokens != 1
                    or r.num_computed_tokens != r.prompt_len + out
                ):
                    continue
            elif r.num_output_placeholders or r.num_in_flight_tokens or r.num_computed_tokens != r.prompt_len + out - 1:
                continue
            wake, in_place = self._wake(r, first, out)
            if wake > first:
                r.lazy = first
                self._book(wake, (r.seq, r, first, in_place))
                self.count += 1
                del self.explicit[r.seq]

    def _deltas(self, r, step: int) -> tuple[int, int]:
        """(batches scheduled, batches processed) lazily by the start of step `step`'s schedule."""
        scheduled = step - r.lazy
        if scheduled <= 0:
            return 0, 0
        return scheduled, scheduled - 1 if self.async_ else scheduled

    def _materialize(self, r, step: int, last) -> None:
        """Bring a steady request's counters to the start of step `step` (before its schedule) and put it back in
        the per-step loops; under async scheduling it joins batch `step - 1`'s sampled list (`last`), processed
        later in this step."""
        scheduled, processed = self._deltas(r, step)
        r.lazy = -1
        self.count -= 1
        self.explicit[r.seq] = r
        if scheduled:
            if self.async_:
                last["sampled"].append((r, 1))
                r.num_in_flight_tokens += 1
                r.num_output_placeholders += 1
            r.num_computed_tokens += scheduled
            r.num_output += processed

    def cross(self, r, step: int, allocate) -> bool:
        """Batch `step`'s pool work for steady request `r` done in place (it stays steady): `allocate(r, 1)`, the
        running request's allocate_slots, on its counters of that schedule, then its next wake. False (nothing
        kept but what allocate_slots does before it fails) when the blocks are not there: the caller then
        preempts as the scheduler does."""
        scheduled, processed = self._deltas(r, step)
        if self.dense is not None:  # one full-attention group: its counters are all the call reads
            ok = self.dense[0](r, r.num_computed_tokens + scheduled, r.prompt_len + r.num_output + processed, 1)
        else:
            inflight = scheduled - processed
            r.num_computed_tokens += scheduled
            r.num_output += processed
            r.num_in_flight_tokens += inflight
            r.num_output_placeholders += inflight
            ok = allocate(r, 1)
            r.num_computed_tokens -= scheduled
            r.num_output -= processed
            r.num_in_flight_tokens -= inflight
            r.num_output_placeholders -= inflight
        if ok:
            first = r.lazy
            # its output at batch `first`'s schedule: under async scheduling the stored count has the token of the
            # batch before it since (processed, one by one, at step `first`)
            wake, in_place = self._wake(r, first, r.num_output - 1 if self.async_ else r.num_output)
            if wake <= step:  # conditions that hold already hold at the next batch
                wake = step + 1
            self._book(wake, (r.seq, r, first, in_place))
        return ok

    def cross_all(self, reqs: list, step: int, crossings) -> bool:
        """`cross` for each of `reqs` (steady, due for pool work alone, in running order, with nothing else of the
        step between them) at once: `crossings` (a dense model's `RunningSlots.dense_crossings`) on their counters
        of that schedule, then their next wakes. False, having done nothing, when the blocks are not there."""
        items = []
        for r in reqs:
            scheduled, processed = self._deltas(r, step)
            items.append((r, r.num_computed_tokens + scheduled, r.prompt_len + r.num_output + processed))
        if not crossings(items):
            return False
        lag = 1 if self.async_ else 0  # see `cross`
        for r in reqs:
            first = r.lazy
            wake, in_place = self._wake(r, first, r.num_output - lag)
            self._book(wake if wake > step else step + 1, (r.seq, r, first, in_place))
        return True

    def _book(self, wake: int, entry: tuple) -> None:
        day = self.calendar.get(wake)
        if day is None:
            self.calendar[wake] = [entry]
            heapq.heappush(self.days, wake)
        else:
            day.append(entry)

    def take_due(self, step: int) -> list:
        """The live entries due at batch `step`, in admission order, off the calendar (`put_back` returns them)."""
        day = self.calendar.pop(step, None)
        if day is None:
            return []
        live = [e for e in day if e[1].lazy == e[2]]
        if len(live) > 1:
            live.sort()  # by admission order (seq is unique)
        return live

    def put_back(self, step: int, entries: list) -> None:
        """Entries taken by `take_due` at batch `step`, booked again."""
        for entry in entries:
            self._book(step, entry)

    def wake_due(self, step: int, last) -> list:
        """At the start of step `step`'s schedule: the requests whose wake batch has come are back in the per-step
        loops, but those due for pool work alone, returned (in admission order) for `cross`."""
        crossing = []
        for _, r, _, in_place in self.take_due(step):  # a wake is never passed over: the loop stops at each
            if in_place:
                crossing.append(r)
            else:
                self._materialize(r, step, last)
        return crossing

    def wake_all(self, step: int, last, crossing: list) -> None:
        """Every steady request back to the per-step loops (the token budget binds on the running requests)."""
        for day in self.calendar.values():
            for _, r, first, _ in day:
                if r.lazy == first:
                    self._materialize(r, step, last)
        for r in crossing:
            if r.lazy >= 0:
                self._materialize(r, step, last)
        self.calendar.clear()
        self.days.clear()

    def release(self, r, step: int, last) -> None:
        """One steady request back to the per-step loops now (a preemption takes it, or its pool work failed)."""
        if r.lazy >= 0:
            self._materialize(r, step, last)

    def next_wake(self) -> int | None:
        """The earliest batch with a wake booked (its entries may all be stale: taking it then does nothing), None
        without one."""
        days, calendar = self.days, self.calendar
        while days and days[0] not in calendar:
            heapq.heappop(days)
        return days[0] if days else None
