"""The queue workload: client processes send unique integers and poll them back (assign or subscribe).

This module is the queue workload's `Slot` (which the transactional slot extends) and its
`WORKLOAD`; the generic runner that drives any workload's slots is `workloads.runner`.

Each of `config.concurrency` client slots is a thread: in the controller, or (kafka-python, by
default) in one of a few client worker processes (`workloads.workers`), so that decoding polled
records in Python uses every core. A slot runs one client process at a time; the process journals
every operation, through its `Journal`, as an invoke (written before the operation starts) and
exactly one completion. When an operation ends `info` (outcome unknown: the client may be in any
state), the slot closes its consumer, takes a new process number, and its next operation is a
fresh assign — Jepsen's rule that a crashed process is never reused.

A slot whose role is `subscribe` (`config.consume`, see `workloads.generator`) is a member of a
consumer group instead: it subscribes, polls, and commits what it polled, explicitly (an op of its
mix) and automatically (every `AUTO_COMMIT_INTERVAL_S`, the consumer's consumed positions, as the
libraries' auto-commit would, but as an operation of its own so that it is journaled); each
rebalance the library reports during an operation is journaled, right after that operation, as a
`rebalance` operation (`revoked`, `assigned`).

By default the slots of one process share one producer (the library's producer is thread-safe and
batches concurrent sends into one request per partition); `shared_producer=False` gives each client
process its own producer, replaced on a crash, as Jepsen's clients do.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from foundation.config import TestConfig
from history.journal import Journal, JournalClosed
from workloads.clients.base import (
    ClientError,
    Consumer,
    Driver,
    GroupConsumer,
    Producer,
    RebalanceEvent,
    Record,
    SendOutcome,
    TopicPartition,
    describe,
    records_json,
)
from workloads.generator import Op, SlotGenerator, group_of, slot_generators
from workloads.workload import PREPARE_TIMEOUT_S, Workload

log = logging.getLogger(__name__)

POLL_TIMEOUT_S = 0.1
# A poll returns at most this many records. Every consumer reads every partition it is assigned
# (Jepsen's queue workload), so each acknowledged value is read tens of times; a poll of 100 made
# reading, not sending, what the run's CPU went to (docs/workloads.md, Rate).
MAX_POLL_RECORDS = 10
# When a slot falls this far behind its schedule, it forgets the debt instead of bursting.
MAX_SCHEDULE_DEBT_S = 1.0
# A group member commits its consumed positions this often (the libraries' auto-commit: 5 s).
AUTO_COMMIT_INTERVAL_S = 1.0


class Slot:
    """One client slot: runs its generator's operations, one process at a time."""

    def __init__(
        self,
        gen: SlotGenerator,
        driver: Driver,
        journal: Journal,
        rate: float,
        shared_producer: Producer | None,
        group: str | None = None,
    ):
        self.gen = gen
        self.group = group  # the consumer group of a subscribing slot
        self.driver = driver
        self.journal = journal
        self.rate = rate
        self.shared_producer = shared_producer
        self.producer: Producer | None = shared_producer
        self.consumer: Consumer | None = None
        self.group_consumer: GroupConsumer | None = None
        # The partitions the group assigned to this member (from its rebalance callbacks).
        self.assignment: set[TopicPartition] = set()
        self.next_auto_commit = time.monotonic() + AUTO_COMMIT_INTERVAL_S
        self.process = self._new_process()
        # Where this slot's reads of each partition got to: `seek: position` resumes there.
        self.read_up_to: dict[TopicPartition, int] = {}
        self._first: Op | None = None  # the first operation, planned by `prepare`

    def _new_process(self) -> int:
        return self.journal.new_process()

    def run(
        self,
        stop: threading.Event,
        start: threading.Barrier | None = None,
        opened: Callable[[], bool] | None = None,
    ) -> None:
        """Run until `stop`; with `start`, prepare first and begin when every slot of it has;
        with `opened`, then wait for the load phase (False: it never began)."""
        try:
            if start is not None:
                self.prepare(stop)
                try:
                    start.wait()
                except threading.BrokenBarrierError:  # a slot took too long, or the load stopped
                    pass
            if opened is not None and not opened():
                return
            self._run(stop)
        except JournalClosed as e:  # the controller is gone: no operation may start
            log.warning("slot %d stops: %s", self.gen.slot, e)
        finally:
            self.close()

    def prepare(self, stop: threading.Event) -> None:
        """Make the clients the first operation needs, and let its consumer ask the partitions it
        will assign for their ends (bootstrap, metadata, connections), before the first invocation:
        a hundred clients starting up inside their first operations held the first sends for seconds."""
        op = self._first = self.gen.next_op()
        if not self._ensure_clients(op, stop) or self.consumer is None or not op.partitions:
            return
        try:
            self.consumer.end_offsets(list(op.partitions), PREPARE_TIMEOUT_S)
        except Exception as e:  # the first operation meets the problem and journals it
            log.info("slot %d: its consumer did not reach the cluster yet: %s", self.gen.slot, e)

    def _run(self, stop: threading.Event) -> None:
        next_at = time.monotonic()
        op, self._first = self._first, None
        if op is not None:  # planned by `prepare`: the generator's draws stay in the same order
            next_at += self.gen.next_delay(self.rate)
        while not stop.is_set():
            if op is None:
                op = self.gen.next_op()
                next_at += self.gen.next_delay(self.rate)
            now = time.monotonic()
            if next_at > now:
                if stop.wait(next_at - now):
                    break
            elif now - next_at > MAX_SCHEDULE_DEBT_S:
                next_at = now
            if not self._ensure_clients(op, stop):
                continue  # the same op again once a client can be made
            if self._auto_commit_due():
                self.next_auto_commit = time.monotonic() + AUTO_COMMIT_INTERVAL_S
                self._commit("auto")
                continue  # the planned op comes next, on its own schedule
            self.execute(op)
            op = None

    def _ensure_clients(self, op: Op, stop: threading.Event) -> bool:
        try:
            if op.kind == "send" and self.producer is None:
                self.producer = self.driver.producer()
            if self.group is not None:
                if op.kind in ("subscribe", "poll", "commit") and self.group_consumer is None:
                    self.group_consumer = self.driver.group_consumer(self.group)
            elif op.kind in ("assign", "poll") and self.consumer is None:
                self.consumer = self.driver.consumer()
            return True
        except Exception as e:  # not journaled: no operation was invoked
            log.info("slot %d: cannot create a client yet: %s", self.gen.slot, e)
            stop.wait(0.5)
            return False

    def execute(self, op: Op) -> None:
        if op.kind == "send":
            self._send(op)
        elif op.kind == "poll":
            if self.group is None:
                self._poll()
            else:
                self._group_poll()
        elif op.kind == "subscribe":
            self._subscribe(op)
        elif op.kind == "commit":
            self._commit("explicit")
        else:
            self._assign(op)

    def _send(self, op: Op) -> None:
        assert self.producer is not None
        invoke = {
            "process": self.process,
            "type": "invoke",
            "f": "send",
            "topic": op.topic,
            "partition": op.partition,
            "value": op.value,
        }
        self.journal.invoke(invoke)
        started = time.monotonic()
        try:
            outcome = self.producer.send(op.topic, op.partition, op.value)
        except Exception as e:  # a driver must not raise; if it does, the outcome is unknown
            outcome = SendOutcome("info", error=describe(e))
        completion: dict[str, Any] = {**invoke, "type": outcome.type}
        if outcome.type == "ok":
            completion["offset"] = outcome.offset
        else:
            completion["error"] = outcome.error
        self.journal.complete(completion, time.monotonic() - started)
        if outcome.type == "info":
            self._crash()

    def _poll(self) -> None:
        assert self.consumer is not None
        records = self._journaled_poll(self.consumer)
        if records is not None:
            self._note_read(records)

    def _journaled_poll(self, consumer: Consumer | GroupConsumer) -> list[Record] | None:
        """One journaled poll of either consumer; None when it ended info (the process crashed)."""
        invoke = {"process": self.process, "type": "invoke", "f": "poll"}
        self.journal.invoke(invoke)
        started = time.monotonic()
        try:
            records = consumer.poll(POLL_TIMEOUT_S, MAX_POLL_RECORDS)
        except Exception as e:
            error = e.error if isinstance(e, ClientError) else describe(e)
            self.journal.complete({**invoke, "type": "info", "error": error}, time.monotonic() - started)
            self._crash()
            return None
        self.journal.complete(
            {**invoke, "type": "ok", "records": records_json(records)},
            time.monotonic() - started,
            records=len(records),
        )
        return records

    def _note_read(self, records: list[Record]) -> None:
        """How far this process has read each partition (its final reads start there)."""
        for r in records:
            key = (r.topic, r.partition)
            if r.offset + 1 > self.read_up_to.get(key, 0):
                self.read_up_to[key] = r.offset + 1

    def _assign(self, op: Op) -> None:
        assert self.consumer is not None
        partitions = list(op.partitions)
        positions: dict[TopicPartition, int] = {}
        invoke: dict[str, Any] = {
            "process": self.process,
            "type": "invoke",
            "f": "assign",
            "partitions": [[t, p] for t, p in partitions],
            "seek": op.seek,
        }
        if op.seek == "position":
            positions = {tp: self.read_up_to[tp] for tp in partitions if tp in self.read_up_to}
            invoke["positions"] = [[t, p, o] for (t, p), o in sorted(positions.items())]
        self.journal.invoke(invoke)
        started = time.monotonic()
        try:
            self.consumer.assign(partitions, positions)
        except Exception as e:
            self._failed(invoke, e, started)
            return
        self.journal.complete({**invoke, "type": "ok"}, time.monotonic() - started)

    def _failed(self, invoke: dict[str, Any], e: Exception, started: float) -> str:
        """Complete `invoke` after the client raised: `fail` if it certainly had no effect, else
        `info`, which crashes this process (the next operation gets a new one). Returns the outcome."""
        definite = isinstance(e, ClientError) and e.definite
        outcome = "fail" if definite else "info"
        error = e.error if isinstance(e, ClientError) else describe(e)
        self.journal.complete({**invoke, "type": outcome, "error": error}, time.monotonic() - started)
        if outcome == "info":
            self._crash()
        return outcome

    # --- group members -------------------------------------------------------------------------
    def _auto_commit_due(self) -> bool:
        return (
            self.group_consumer is not None
            and self.gen.subscribed
            and time.monotonic() >= self.next_auto_commit
        )

    def _subscribe(self, op: Op) -> None:
        assert self.group_consumer is not None
        invoke: dict[str, Any] = {
            "process": self.process,
            "type": "invoke",
            "f": "subscribe",
            "group": self.group,
            "topics": list(op.topics),
        }
        self.journal.invoke(invoke)
        started = time.monotonic()
        try:
            self.group_consumer.subscribe(list(op.topics))
        except Exception as e:
            error = e.error if isinstance(e, ClientError) else describe(e)
            self.journal.complete({**invoke, "type": "info", "error": error}, time.monotonic() - started)
            self._crash()
            return
        self.journal.complete({**invoke, "type": "ok"}, time.monotonic() - started)
        self.assignment = set()
        self.read_up_to.clear()
        self.next_auto_commit = time.monotonic() + AUTO_COMMIT_INTERVAL_S

    def _group_poll(self) -> None:
        assert self.group_consumer is not None
        records = self._journaled_poll(self.group_consumer)
        if records is None:
            return
        # The callbacks ran inside the poll, before it fetched what it returned.
        self._rebalanced(self.group_consumer.rebalances())
        self._note_read(records)

    def _rebalanced(self, events: list[RebalanceEvent]) -> None:
        """Journal what the rebalance callbacks said, a revocation and the assignment after it as one op."""
        revoked: list[TopicPartition] = []
        assigned: list[TopicPartition] = []
        for event in events:
            if event.kind == "revoked" and assigned:
                self._journal_rebalance(revoked, assigned)
                revoked, assigned = [], []
            (revoked if event.kind == "revoked" else assigned).extend(event.partitions)
            for tp in event.partitions:  # a new owner resumes from the group's committed offset
                self.read_up_to.pop(tp, None)
            if event.kind == "revoked":
                self.assignment.difference_update(event.partitions)
            else:
                self.assignment.update(event.partitions)
        if revoked or assigned:
            self._journal_rebalance(revoked, assigned)

    def _journal_rebalance(self, revoked: list[TopicPartition], assigned: list[TopicPartition]) -> None:
        invoke = {
            "process": self.process,
            "type": "invoke",
            "f": "rebalance",
            "group": self.group,
            "revoked": [[t, p] for t, p in sorted(revoked)],
            "assigned": [[t, p] for t, p in sorted(assigned)],
        }
        self.journal.invoke(invoke)
        self.journal.complete({**invoke, "type": "ok"}, 0.0)

    def _commit(self, mode: str) -> None:
        """Commit what this member consumed of its assigned partitions; nothing to commit: no op."""
        assert self.group_consumer is not None
        if mode == "explicit":
            offsets = {tp: o for tp, o in self.read_up_to.items() if tp in self.assignment}
        else:
            consumed = self.group_consumer.consumed_positions()
            offsets = {tp: o for tp, o in consumed.items() if tp in self.assignment}
        if not offsets:
            return
        invoke = {
            "process": self.process,
            "type": "invoke",
            "f": "commit",
            "group": self.group,
            "mode": mode,
            "offsets": [{"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(offsets.items())],
        }
        self.journal.invoke(invoke)
        started = time.monotonic()
        try:
            self.group_consumer.commit(offsets)
        except Exception as e:
            if self._failed(invoke, e, started) == "fail":
                self._rebalanced(self.group_consumer.rebalances())
            return
        self.journal.complete({**invoke, "type": "ok"}, time.monotonic() - started)
        self._rebalanced(self.group_consumer.rebalances())

    def _crash(self) -> None:
        """The process's client is in an unknown state: replace it under a new process number."""
        if self.group_consumer is not None:
            self.assignment = set()
            self.read_up_to.clear()
        self.close()
        self.process = self._new_process()
        self.gen.crashed()

    def close(self) -> None:
        """Close the clients this process owns (the shared producer stays with its owner)."""
        if self.consumer is not None:
            self.consumer.close()
            self.consumer = None
        if self.group_consumer is not None:
            self.group_consumer.close()
            self.group_consumer = None
        if self.producer is not None and self.producer is not self.shared_producer:
            self.producer.close()
            self.producer = None


def generators(config: TestConfig) -> list[SlotGenerator]:
    """Each slot's operation stream: sends, polls, assigns (or a group member's subscribes and commits)."""
    return slot_generators(config.seed, config.concurrency, config.topics, config.partitions, config.consume)


def make_slot(
    config: TestConfig, gen: SlotGenerator, driver: Driver, journal: Journal, shared: Producer | None
) -> Slot:
    group = group_of(config.consume, config.concurrency, gen.slot) if gen.role == "subscribe" else None
    return Slot(gen, driver, journal, config.rate, shared, group)


WORKLOAD = Workload("queue", generators, make_slot, shares_producer=True, reads_committed=False)
