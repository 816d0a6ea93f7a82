"""The one generator of synthetic histories with planted anomalies: the checker benchmark's
millions of lines (`generate`, streamed to a file) and the checkers' tests' few hundred
(`generate_ops`, in memory).

A history is simulated, not recorded: producers append values to in-memory partition logs (at
invoke time, so a consumer can read a value before its send completes, as in Kafka), consumers read
the logs sequentially, processes crash (their open op completes `info` and a fresh process takes
over), the nemesis journals faults, and a final drain reads every partition from the beginning.
With `churn`, consumers also time out (an `info` poll or assign: a fresh process takes over) and
re-assign themselves to several partitions from the beginning. Such a history is clean by
construction; each planted anomaly is written as a small, self-contained episode by fresh
processes, so the planted anomalies are exactly the anomalies of the history.

Lines are preformatted strings (no json.dumps on the hot path): about a million ops in a few
seconds, ten million in well under a minute.
"""

from __future__ import annotations

import io
import itertools
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from history.synthetic.kinds import ANOMALY_KINDS, PLANTABLE

NEMESIS_FS = (("kill", "start"), ("pause", "resume"), ("partition", "heal"))


@dataclass
class Planted:
    """What a synthetic history holds, so a checker's findings can be asserted.

    `anomalies` maps an anomaly name to its planted instances; each instance names what the
    checkers count it by: `value` (lost-write, unseen, duplicate, aborted-read, phantom),
    `topic`/`partition`/`offset` (inconsistent-offsets), `process`/`topic`/`partition`
    (poll-skip, nonmonotonic-poll, nonmonotonic-send), `group`/`topic`/`partition` (`offset` too
    for group-skip; nonmonotonic-commit).
    """

    ops: int = 0
    anomalies: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {k: [] for k in PLANTABLE})

    def counts(self) -> dict[str, int]:
        return {name: len(instances) for name, instances in self.anomalies.items()}


@dataclass(frozen=True)
class Shape:
    """How a simulated system looks: its partitions, clients, crashes, faults and consumer churn."""

    topics: int
    partitions: int
    concurrency: int
    crash_rate: float
    nemesis_rate: float
    drain_batch: int
    churn: float


# The benchmark's histories: a few partitions, many clients, rare crashes and faults, no churn.
BENCH = Shape(
    topics=2, partitions=3, concurrency=20, crash_rate=0.0005, nemesis_rate=0.0002, drain_batch=500, churn=0.0
)
# The tests' small histories: one topic, few clients, and much more crashing, faults and churn.
SMALL = Shape(
    topics=1, partitions=2, concurrency=4, crash_rate=0.02, nemesis_rate=0.02, drain_batch=50, churn=0.05
)


class _Journal:
    """Buffers preformatted lines and assigns index and time."""

    def __init__(self, out: IO[str], rng: random.Random, flush_every: int = 20_000):
        self.out = out
        self.rng = rng
        self.buf: list[str] = []
        self.index = 0
        self.time = 0
        self.flush_every = flush_every

    def head(self, process: int | str, type_: str, f: str) -> str:
        """The common prefix of a line; the caller appends the rest and the closing brace."""
        self.time += 1000 + int(self.rng.random() * 200_000)
        p = f'"{process}"' if isinstance(process, str) else process
        line = f'{{"index":{self.index},"time":{self.time},"process":{p},"type":"{type_}","f":"{f}"'
        self.index += 1
        return line

    def add(self, line: str) -> None:
        self.buf.append(line)
        if len(self.buf) >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        if self.buf:
            self.out.write("\n".join(self.buf))
            self.out.write("\n")
            self.buf.clear()


@dataclass
class _Slot:
    """A client slot: its current process, its open op and, for a consumer, where it reads: its
    partition `part` at `position`, or after a re-assign, `spread` (partition -> position)."""

    process: int
    consumer: bool
    open: tuple[Any, ...] | None = None
    part: int = 0
    position: int = 0
    assigned: bool = False
    spread: dict[int, int] | None = None

    def close(self) -> tuple[Any, ...]:
        """The open op, which ends now (completed or crashed): the slot is free again."""
        op = self.open
        assert op is not None
        self.open = None
        return op


class _Simulation:
    def __init__(self, out: IO[str], rng: random.Random, shape: Shape):
        self.j = _Journal(out, rng)
        topics, partitions, concurrency = shape.topics, shape.partitions, shape.concurrency
        self.churn = shape.churn
        self.rng = rng
        self.parts: list[tuple[str, int]] = [(f"t{t}", p) for t in range(topics) for p in range(partitions)]
        self.logs: list[list[int]] = [[] for _ in self.parts]
        # Preformatted pieces per partition.
        self.tp = [f'"topic":"{t}","partition":{p}' for t, p in self.parts]
        self.rec = [f'{{"topic":"{t}","partition":{p},"offset":' for t, p in self.parts]
        # Fresh values count from 1, fresh processes from 0.
        self.fresh_value: Callable[[], int] = itertools.count(1).__next__
        self.fresh_process: Callable[[], int] = itertools.count().__next__
        self.crash_rate = shape.crash_rate
        self.nemesis_rate = shape.nemesis_rate
        self.nemesis_open: tuple[str, str] | None = None
        # The nemesis strikes only once the load flows (a write acknowledged, a read that returned
        # records), as a real run's does: before that a fault tests nothing (checkers/power.py).
        self.acked = False
        self.read = False
        consumers = max(1, min(len(self.parts), concurrency // 3))
        self.slots = [
            self._slot(consumer=i < consumers, part=i % len(self.parts)) for i in range(concurrency)
        ]
        self.planted = Planted()

    # -- helpers -----------------------------------------------------------------------------
    def _slot(self, consumer: bool, part: int = 0) -> _Slot:
        s = _Slot(self.fresh_process(), consumer, part=part)
        return s

    def send_invoke(self, process: int, part: int, value: int) -> None:
        self.j.add(f'{self.j.head(process, "invoke", "send")},{self.tp[part]},"value":{value}}}')

    def send_done(self, process: int, part: int, value: int, type_: str, offset: int | None) -> None:
        head = self.j.head(process, type_, "send")
        if type_ == "ok":
            self.acked = True
            self.j.add(f'{head},{self.tp[part]},"value":{value},"offset":{offset}}}')
        else:
            error = "NotEnoughReplicasError" if type_ == "fail" else "RequestTimedOutError"
            self.j.add(f'{head},{self.tp[part]},"value":{value},"error":"{error}"}}')

    def records(self, part: int, start: int, end: int) -> str:
        log = self.logs[part]
        pre = self.rec[part]
        return ",".join([f'{pre}{o},"value":{log[o]}}}' for o in range(start, end)])

    def assign(self, process: int, part: int, seek: str | int) -> None:
        t, p = self.parts[part]
        s = f'"{seek}"' if isinstance(seek, str) else seek
        self.j.add(f'{self.j.head(process, "invoke", "assign")},"partitions":[["{t}",{p}]],"seek":{s}}}')
        self.j.add(f'{self.j.head(process, "ok", "assign")},"partitions":[["{t}",{p}]],"seek":{s}}}')

    def partitions(self, parts: list[int]) -> str:
        return ",".join(f'["{self.parts[i][0]}",{self.parts[i][1]}]' for i in parts)

    def poll(self, process: int, part: int, start: int, end: int) -> None:
        self.j.add(f"{self.j.head(process, 'invoke', 'poll')}}}")
        self.j.add(f'{self.j.head(process, "ok", "poll")},"records":[{self.records(part, start, end)}]}}')

    def append_ok_values(self, part: int, n: int) -> int:
        """A fresh producer sends n values, all acknowledged; returns the first offset."""
        process = self.fresh_process()
        log = self.logs[part]
        first = len(log)
        for _ in range(n):
            value = self.fresh_value()
            log.append(value)
            self.send_invoke(process, part, value)
            self.send_done(process, part, value, "ok", len(log) - 1)
        return first

    # -- the clean simulation ----------------------------------------------------------------
    def step(self) -> None:
        rng = self.rng
        r = rng.random()
        if r < self.nemesis_rate:
            if (self.acked and self.read) or self.nemesis_open is not None:
                self.nemesis_step()
            return
        slot = self.slots[int(rng.random() * len(self.slots))]
        if slot.open is not None:
            if rng.random() < self.crash_rate:
                self.crash(slot)
            else:
                self.complete(slot)
        elif slot.consumer:
            if self.churn and slot.assigned and rng.random() < self.churn:
                slot.assigned, slot.spread = False, {}  # re-assign, to several partitions
            if not slot.assigned and slot.spread is not None:
                chosen = [i for i in range(len(self.parts)) if rng.random() < 0.7] or [self._part()]
                slot.spread = dict.fromkeys(chosen, 0)
                head = self.j.head(slot.process, "invoke", "assign")
                self.j.add(f'{head},"partitions":[{self.partitions(chosen)}],"seek":"beginning"}}')
                slot.open = ("assign", '"beginning"')
            elif not slot.assigned:
                t, p = self.parts[slot.part]
                seek: str | int = "beginning" if slot.position == 0 else slot.position
                s = f'"{seek}"' if isinstance(seek, str) else seek
                self.j.add(
                    f'{self.j.head(slot.process, "invoke", "assign")},"partitions":[["{t}",{p}]],"seek":{s}}}'
                )
                slot.open = ("assign", s)
            else:
                self.j.add(f"{self.j.head(slot.process, 'invoke', 'poll')}}}")
                slot.open = ("poll",)
        else:
            part = int(rng.random() * len(self.parts))
            value = self.fresh_value()
            r = rng.random()
            if r < 0.9:
                outcome = "ok"
            elif r < 0.95:
                outcome = "fail"
            else:
                outcome = "info"
            offset = None
            if outcome == "ok" or (outcome == "info" and rng.random() < 0.5):
                log = self.logs[part]
                offset = len(log)
                log.append(value)
            self.send_invoke(slot.process, part, value)
            slot.open = ("send", part, value, outcome, offset)

    def complete(self, slot: _Slot) -> None:
        op = slot.close()
        if op[0] == "send":
            _, part, value, outcome, offset = op
            self.send_done(slot.process, part, value, outcome, offset)
        elif self.churn and self.rng.random() < self.churn:
            # A consumer's poll or assign timed out: the process is never reused.
            self.j.add(f'{self.j.head(slot.process, "info", op[0])},"error":"timed out"}}')
            slot.process, slot.assigned = self.fresh_process(), False
            if slot.spread is not None:
                slot.spread = {}
        elif op[0] == "poll" and slot.spread is not None:
            pieces = []
            for part, start in sorted(slot.spread.items()):
                end = min(len(self.logs[part]), start + int(self.rng.random() * 5))
                if end > start:
                    pieces.append(self.records(part, start, end))
                    self.read = True
                slot.spread[part] = end
            self.j.add(f'{self.j.head(slot.process, "ok", "poll")},"records":[{",".join(pieces)}]}}')
        elif op[0] == "poll":
            log = self.logs[slot.part]
            start = slot.position
            end = min(len(log), start + 1 + int(self.rng.random() * 8))
            recs = self.records(slot.part, start, end)
            self.read = self.read or end > start
            self.j.add(f'{self.j.head(slot.process, "ok", "poll")},"records":[{recs}]}}')
            slot.position = end
        else:
            parts = sorted(slot.spread) if slot.spread is not None else [slot.part]
            head = self.j.head(slot.process, "ok", "assign")
            self.j.add(f'{head},"partitions":[{self.partitions(parts)}],"seek":{op[1]}}}')
            slot.assigned = True

    def tail(self) -> None:
        """The load's last moments, inside every fault still in force: a write acknowledged and
        read back, then one more write (the load ends with its last write)."""
        offset = self.append_ok_values(0, 1)
        process = self.fresh_process()
        self.assign(process, 0, offset)
        self.poll(process, 0, offset, offset + 1)
        self.append_ok_values(0, 1)

    def crash(self, slot: _Slot) -> None:
        """The client dies mid-op: the op is `info`, the process is never reused."""
        op = slot.close()
        if op[0] == "send":
            _, part, value, _outcome, offset = op
            # An op whose record reached the log stays there; the client just never heard back.
            self.send_done(slot.process, part, value, "info", offset)
        else:
            self.j.add(f'{self.j.head(slot.process, "info", op[0])},"error":"client crashed"}}')
        self.j.add(f"{self.j.head(slot.process, 'invoke', 'crash')}}}")
        self.j.add(f"{self.j.head(slot.process, 'info', 'crash')}}}")
        slot.process = self.fresh_process()
        slot.assigned = False
        if slot.spread is not None:
            slot.spread = {}

    def nemesis_step(self) -> None:
        if self.nemesis_open is None:
            start, stop = NEMESIS_FS[int(self.rng.random() * len(NEMESIS_FS))]
            node = f"n{1 + int(self.rng.random() * 3)}"
            self.j.add(f'{self.j.head("nemesis", "invoke", start)},"value":["{node}"]}}')
            self.j.add(f'{self.j.head("nemesis", "info", start)},"value":["{node}"]}}')
            self.nemesis_open = (stop, node)
        else:
            stop, node = self.nemesis_open
            self.j.add(f'{self.j.head("nemesis", "invoke", stop)},"value":["{node}"]}}')
            self.j.add(f'{self.j.head("nemesis", "info", stop)},"value":{{"healed":["{node}"]}}}}')
            self.nemesis_open = None

    def finish(self, drain_batch: int) -> None:
        """Complete every open op, heal, then drain: read every partition from the beginning."""
        for slot in self.slots:
            if slot.open is not None:
                self.complete(slot)
        if self.nemesis_open is not None:
            self.nemesis_step()
        for part, log in enumerate(self.logs):
            process = self.fresh_process()
            self.assign(process, part, "beginning")
            for start in range(0, len(log), drain_batch):
                self.poll(process, part, start, min(len(log), start + drain_batch))
        self.j.flush()
        self.planted.ops = self.j.index

    # -- planted anomalies -------------------------------------------------------------------
    def plant(self, kind: str) -> None:
        getattr(self, "plant_" + kind.replace("-", "_"))()

    def _note(self, kind: str, **instance: Any) -> None:
        self.planted.anomalies[kind].append(instance)

    def _note_on(self, kind: str, part: int, **instance: Any) -> None:
        """Note an anomaly planted on partition slot `part` (named by its topic and partition)."""
        topic, partition = self.parts[part]
        self._note(kind, **instance, topic=topic, partition=partition)

    def _part(self) -> int:
        return int(self.rng.random() * len(self.parts))

    def plant_lost_write(self) -> None:
        """Acked at an offset that a later leader reused for another value (also inconsistent)."""
        part = self._part()
        a, b = self.fresh_process(), self.fresh_process()
        lost, winner, after = self.fresh_value(), self.fresh_value(), self.fresh_value()
        log = self.logs[part]
        offset = len(log)
        log.append(winner)
        log.append(after)
        self.send_invoke(a, part, lost)
        self.send_invoke(b, part, winner)
        self.send_done(a, part, lost, "ok", offset)
        self.send_done(b, part, winner, "ok", offset)
        self.send_invoke(b, part, after)
        self.send_done(b, part, after, "ok", offset + 1)
        self._note_on("lost-write", part, value=lost, offset=offset)
        self._note_on("inconsistent-offsets", part, offset=offset)

    def plant_unseen(self) -> None:
        """Acked beyond the final end of the log (called after the last regular append)."""
        part = self._part()
        process, value = self.fresh_process(), self.fresh_value()
        offset = len(self.logs[part]) + sum(
            1 for u in self.planted.anomalies["unseen"] if (u["topic"], u["partition"]) == self.parts[part]
        )
        self.send_invoke(process, part, value)
        self.send_done(process, part, value, "ok", offset)
        self._note_on("unseen", part, value=value, offset=offset)

    def plant_duplicate(self) -> None:
        """A send whose record the broker appended twice (a retry without idempotence)."""
        part = self._part()
        process, value = self.fresh_process(), self.fresh_value()
        log = self.logs[part]
        log.append(value)
        log.append(value)
        self.send_invoke(process, part, value)
        self.send_done(process, part, value, "ok", len(log) - 1)
        self._note_on("duplicate", part, value=value)

    def plant_inconsistent_offsets(self) -> None:
        """A reader saw an unacknowledged value at an offset a new leader then gave to another."""
        part = self._part()
        a, b, reader = self.fresh_process(), self.fresh_process(), self.fresh_process()
        old, new = self.fresh_value(), self.fresh_value()
        log = self.logs[part]
        offset = len(log)
        log.append(old)
        self.send_invoke(a, part, old)
        self.assign(reader, part, offset)
        self.poll(reader, part, offset, offset + 1)
        self.send_done(a, part, old, "info", None)
        log[offset] = new
        self.send_invoke(b, part, new)
        self.send_done(b, part, new, "ok", offset)
        self._note_on("inconsistent-offsets", part, offset=offset)

    def plant_aborted_read(self) -> None:
        """A send reported failed whose record nevertheless reached the log."""
        part = self._part()
        process, value = self.fresh_process(), self.fresh_value()
        self.logs[part].append(value)
        self.send_invoke(process, part, value)
        self.send_done(process, part, value, "fail", None)
        self._note_on("aborted-read", part, value=value)

    def plant_phantom(self) -> None:
        """A record in the log that no send carried."""
        part = self._part()
        value = self.fresh_value()
        self.logs[part].append(value)
        self._note_on("phantom", part, value=value)

    def plant_poll_skip(self) -> None:
        """A reader's second poll of a partition starts past where its first ended."""
        self._two_polls("poll-skip", (0, 2), (3, 5))

    def plant_nonmonotonic_poll(self) -> None:
        """A reader's second poll of a partition starts before where its first ended."""
        self._two_polls("nonmonotonic-poll", (0, 4), (1, 3))

    def _two_polls(self, kind: str, first_poll: tuple[int, int], second_poll: tuple[int, int]) -> None:
        """Six fresh acked values, then one reader's two polls of them (offsets relative to the first)."""
        part = self._part()
        first = self.append_ok_values(part, 6)
        reader = self.fresh_process()
        self.assign(reader, part, first)
        for start, end in (first_poll, second_poll):
            self.poll(reader, part, first + start, first + end)
        self._note_on(kind, part, process=reader)

    def plant_nonmonotonic_send(self) -> None:
        """One process's second send acked at an earlier offset than its first."""
        part = self._part()
        process = self.fresh_process()
        v1, v2 = self.fresh_value(), self.fresh_value()
        log = self.logs[part]
        offset = len(log)
        log.append(v2)
        log.append(v1)
        self.send_invoke(process, part, v1)
        self.send_done(process, part, v1, "ok", offset + 1)
        self.send_invoke(process, part, v2)
        self.send_done(process, part, v2, "ok", offset)
        self._note_on("nonmonotonic-send", part, process=process)

    def plant_group_skip(self) -> None:
        """A member committed past a value no member of its group returned (a topic of its own)."""
        serial = len(self.planted.anomalies["group-skip"])
        topic, group = f"tgroup{serial}", f"gplant{serial}"
        skipped, read = self.fresh_value(), self.fresh_value()
        for value, offset in ((skipped, 0), (read, 1)):
            process = self.fresh_process()
            head = f'"topic":"{topic}","partition":0,"value":{value}'
            self.j.add(f"{self.j.head(process, 'invoke', 'send')},{head}}}")
            self.j.add(f'{self.j.head(process, "ok", "send")},{head},"offset":{offset}}}')
        member = self.fresh_process()
        self._group_op(member, "subscribe", f'"group":"{group}","topics":["{topic}"]')
        record = f'{{"topic":"{topic}","partition":0,"offset":1,"value":{read}}}'
        self.j.add(f"{self.j.head(member, 'invoke', 'poll')}}}")
        self.j.add(f'{self.j.head(member, "ok", "poll")},"records":[{record}]}}')
        self._commit(member, group, topic, 2)
        reader = self.fresh_process()
        both = f'{{"topic":"{topic}","partition":0,"offset":0,"value":{skipped}}},{record}'
        self.j.add(f"{self.j.head(reader, 'invoke', 'poll')}}}")
        self.j.add(f'{self.j.head(reader, "ok", "poll")},"records":[{both}]}}')
        self._note("group-skip", group=group, topic=topic, partition=0, offset=0)

    def plant_nonmonotonic_commit(self) -> None:
        """A group's second commit on a partition is lower than its first (a topic of its own)."""
        serial = len(self.planted.anomalies["nonmonotonic-commit"])
        topic, group = f"tcommit{serial}", f"gcommit{serial}"
        for offset in (5, 3):
            member = self.fresh_process()
            self._group_op(member, "subscribe", f'"group":"{group}","topics":["{topic}"]')
            self._commit(member, group, topic, offset)
        self._note("nonmonotonic-commit", group=group, topic=topic, partition=0)

    def _group_op(self, process: int, f: str, fields: str) -> None:
        self.j.add(f"{self.j.head(process, 'invoke', f)},{fields}}}")
        self.j.add(f"{self.j.head(process, 'ok', f)},{fields}}}")

    def _commit(self, process: int, group: str, topic: str, offset: int) -> None:
        offsets = f'[{{"topic":"{topic}","partition":0,"offset":{offset}}}]'
        self._group_op(process, "commit", f'"group":"{group}","mode":"explicit","offsets":{offsets}')


def default_plants(ops: int) -> dict[str, int]:
    """A few of every kind; more in bigger histories, at most 50 of each."""
    n = max(1, min(50, ops // 200_000))
    return dict.fromkeys(ANOMALY_KINDS, n)


def generate(
    path: str | Path,
    ops: int,
    *,
    seed: int = 0,
    plants: dict[str, int] | None = None,
    progress: Callable[[int], None] | None = None,
    **shape: Any,
) -> Planted:
    """Write a history of about `ops` ops (the drain adds a few) to `path`; return what was planted.

    `plants` maps anomaly names to how many of each to plant (default: `default_plants(ops)`);
    `shape` overrides fields of `BENCH` (the benchmark's shape).
    """
    plants = _plantable(default_plants(ops) if plants is None else plants)
    with open(path, "w", encoding="utf-8", buffering=1 << 20) as out:
        return _write(out, ops, seed, plants, replace(BENCH, **shape), progress)


def generate_ops(
    ops: int, *, seed: int = 0, plants: dict[str, int] | None = None, **shape: Any
) -> tuple[list[dict[str, Any]], Planted]:
    """A small history in memory and what was planted (by default nothing); `shape` overrides
    fields of `SMALL`. Tests write it with `tests.support.history_builder.write_history`."""
    out = io.StringIO()
    planted = _write(out, ops, seed, _plantable(plants or {}), replace(SMALL, **shape), None)
    return [json.loads(line) for line in out.getvalue().splitlines()], planted


def _plantable(plants: dict[str, int]) -> dict[str, int]:
    unknown = set(plants) - set(PLANTABLE)
    if unknown:
        raise ValueError(f"unknown anomaly kinds: {sorted(unknown)}")
    return plants


def _write(
    out: IO[str],
    ops: int,
    seed: int,
    plants: dict[str, int],
    shape: Shape,
    progress: Callable[[int], None] | None,
) -> Planted:
    rng = random.Random(seed)
    sim = _Simulation(out, rng, shape)
    drain_batch = shape.drain_batch
    # The drain reads every value once more, in big polls: budget the main loop's ops for it.
    plant_lines = 2 * plants.get("unseen", 0)
    main_ops = max(0, ops - plant_lines - 4 * len(sim.parts) - 2 * shape.concurrency)
    schedule = sorted(
        (rng.randrange(1, max(2, int(main_ops * 0.95))), kind)
        for kind, n in plants.items()
        if kind != "unseen"
        for _ in range(n)
    )
    j = sim.j
    step = sim.step
    next_plant = 0
    next_progress = 1_000_000
    reserve = 0
    while j.index + reserve < main_ops:
        if j.index & 0xFFF == 0:
            # The drain's lines: an assign and polls of drain_batch records per partition.
            reserve = sum(2 * (len(log) // drain_batch + 2) for log in sim.logs)
        while next_plant < len(schedule) and schedule[next_plant][0] <= j.index:
            sim.plant(schedule[next_plant][1])
            next_plant += 1
        step()
        if progress is not None and j.index >= next_progress:
            progress(j.index)
            next_progress += 1_000_000
    for _, kind in schedule[next_plant:]:
        sim.plant(kind)
    for slot in sim.slots:
        if slot.open is not None:
            sim.complete(slot)
    sim.tail()
    for _ in range(plants.get("unseen", 0)):
        sim.plant_unseen()
    sim.finish(drain_batch)
    return sim.planted
