"""The queue workload: client processes send unique integers and poll them back (assign or subscribe).

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

import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from foundation.config import TestConfig
from foundation.errors import BadInput, InfrastructureError
from history.journal import Journal, JournalClosed, LocalJournal
from history.processes import ProcessNumbers, process_numbers
from history.writer import HistoryWriter
from workloads.clients import make_driver
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
)
from workloads.generator import Op, SlotGenerator, group_of, slot_generators
from workloads.progress import LiveProgress
from workloads.stats import WorkloadStats
from workloads.workers import WorkerPool, default_workers

log = logging.getLogger(__name__)

POLL_TIMEOUT_S = 0.1
# A poll returns at most this many records. Every consumer reads every partition it is assigned
# (Jepsen's queue workload), so each acknowledged value is read tens of times; a poll of 100 made
# reading, not sending, what the run's CPU went to (docs/workloads.md, Rate).
MAX_POLL_RECORDS = 10
# When a slot falls this far behind its schedule, it forgets the debt instead of bursting.
MAX_SCHEDULE_DEBT_S = 1.0
# With crash_clients, at most this many client worker processes.
MAX_CRASHABLE_WORKERS = 32
# A group member commits its consumed positions this often (the libraries' auto-commit: 5 s).
AUTO_COMMIT_INTERVAL_S = 1.0
# How long the slots of one process wait for each other to prepare before the first operation.
PREPARE_TIMEOUT_S = 10.0


def records_json(records: list[Record]) -> list[dict[str, Any]]:
    return [
        {"topic": r.topic, "partition": r.partition, "offset": r.offset, "value": r.value} for r in records
    ]


def make_producer(driver: Driver) -> Producer:
    """A producer, or a clear error: bad settings are the user's, anything else infrastructure."""
    try:
        return driver.producer()
    except ClientError as e:
        raise BadInput(f"cannot create a {driver.name} producer: {e.error}") from None
    except Exception as e:
        if type(e).__name__ == "KafkaConfigurationError":
            raise BadInput(f"producer settings rejected by {driver.name}: {e}") from None
        raise InfrastructureError(
            f"cannot create a {driver.name} producer: {type(e).__name__}: {e}"
        ) from None


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
    """Each slot's operation stream, for the test's workload (queue, or txn: workloads.txn)."""
    if config.workload == "txn":
        from workloads.txn_generator import txn_generators

        return list(
            txn_generators(config.seed, config.concurrency, config.topics, config.partitions, config.abort_p)
        )
    return slot_generators(config.seed, config.concurrency, config.topics, config.partitions, config.consume)


def make_slot(
    config: TestConfig, gen: SlotGenerator, driver: Driver, journal: Journal, shared: Producer | None
) -> Slot:
    if config.workload == "txn":
        from workloads.txn import TxnSlot
        from workloads.txn_generator import TxnSlotGenerator

        assert isinstance(gen, TxnSlotGenerator)
        return TxnSlot(gen, driver, journal, config.rate)
    group = group_of(config.consume, config.concurrency, gen.slot) if gen.role == "subscribe" else None
    return Slot(gen, driver, journal, config.rate, shared, group)


def run_workload(
    config: TestConfig,
    bootstrap: list[str],
    history: HistoryWriter,
    stop_event: threading.Event,
    progress: LiveProgress | None = None,
    *,
    shared_producer: bool = True,
    workers: int | None = None,
    ready: threading.Event | None = None,
    go: threading.Event | None = None,
) -> WorkloadStats:
    """Drive `config.concurrency` client processes at `config.rate` ops/s until `stop_event` is set.

    `workers`: how many client worker processes run the slots (default: `default_workers`, see
    `workloads.workers`); 0 runs them as threads of this process. With `ready` and `go`, the
    clients are started (worker processes spawned, producers made) and `ready` is set; no
    operation starts before `go` is (a run's load phase, and its time limit, begin with the load,
    not with the seconds a loaded machine takes to start Python processes).
    """
    driver = make_driver(config, bootstrap)  # bad settings fail here, before any process starts
    stats = WorkloadStats()
    numbers = process_numbers(history)
    count = default_workers(config) if workers is None else workers
    if config.crash_clients > 0:
        # One client process per worker, so a crash kills exactly one (up to a bound on how many
        # Python processes a machine should carry; beyond it a worker holds a few).
        count = min(config.concurrency, MAX_CRASHABLE_WORKERS)
    started_progress = False
    if progress is not None:
        progress.attach(stats)
        started_progress = progress.start()
    try:
        gate = Gate(ready, go, stop_event)
        if count > 0:
            _run_in_workers(
                config, bootstrap, history, stats, numbers, stop_event, count, shared_producer, gate
            )
        else:
            _run_in_threads(
                driver, config, LocalJournal(history, stats, numbers), stop_event, shared_producer, gate
            )
    finally:
        stop_event.set()
        stats.finish()
        if progress is not None and started_progress:
            progress.stop()
    log.info("workload finished: %s", stats.as_dict())
    return stats


class Gate:
    """The clients' start line: `started()` once they can run (sets `ready`), `opened()` waits
    for `go` (True) or a stop (False). Without events it is always open."""

    def __init__(self, ready: threading.Event | None, go: threading.Event | None, stop: threading.Event):
        self.ready, self.go, self.stop = ready, go, stop

    def started(self) -> None:
        if self.ready is not None:
            self.ready.set()

    def opened(self) -> bool:
        while self.go is not None and not self.go.wait(0.1):
            if self.stop.is_set():
                return False
        return not self.stop.is_set()


def _run_in_threads(
    driver: Driver,
    config: TestConfig,
    journal: Journal,
    stop_event: threading.Event,
    shared_producer: bool,
    gate: Gate,
) -> None:
    shared = make_producer(driver) if shared_producer and config.workload == "queue" else None
    slots = [make_slot(config, gen, driver, journal, shared) for gen in generators(config)]
    # The slots prepare their first clients together; once every one has (or the barrier broke),
    # the clients count as started and each waits for the gate before its first operation.
    start = threading.Barrier(len(slots), timeout=PREPARE_TIMEOUT_S)

    def opened() -> bool:
        gate.started()
        return gate.opened()

    finished: list[threading.Event] = []
    try:
        for slot in slots:
            run = functools.partial(slot.run, stop_event, start, opened)
            finished.append(_start_thread(run, f"client-{slot.gen.slot}"))
        for done in finished:
            _wait(done)
    finally:
        # Ctrl-C or an error: every slot finishes the operation in flight and journals it.
        stop_event.set()
        start.abort()
        for done in finished:
            _wait(done)
        if shared is not None:
            shared.close()


def _run_in_workers(
    config: TestConfig,
    bootstrap: list[str],
    history: HistoryWriter,
    stats: WorkloadStats,
    numbers: ProcessNumbers,
    stop_event: threading.Event,
    count: int,
    shared_producer: bool,
    gate: Gate,
) -> None:
    pool = WorkerPool(config, bootstrap, history, stats, numbers, count, shared_producer, held=True)
    failures: list[BaseException] = []

    def journal() -> None:
        """The controller's side, in its own thread: a Ctrl-C (delivered to the main thread) can
        never interrupt it between writing a line and tracking or acknowledging it."""
        try:
            pool.start(stop_event)
            gate.started()
            if gate.opened():
                pool.release()
            pool.serve(stop_event)
        except BaseException as e:
            log.info("client workers failed: %r", e, exc_info=True)
            failures.append(e)
            stop_event.set()
            try:
                pool.stop()
            except BaseException:
                pool.kill()

    done = _start_thread(journal, "journal")
    try:
        _wait(done)
    except BaseException:
        # Ctrl-C: the workers finish the operations in flight; a second one kills them (what they
        # left open ends `info`).
        stop_event.set()
        try:
            _wait(done)
        except BaseException:
            pool.kill()
            _wait(done)
        raise
    if failures:
        raise failures[0]
    if pool.error is not None:
        raise pool.error


def _start_thread(target: Callable[[], None], name: str) -> threading.Event:
    """Start a daemon thread; the event is set when it has finished.

    Waiting on the event rather than joining: on Python 3.11, a join interrupted by Ctrl-C can mark
    a thread that is still running as finished, and the caller would go on (and close the history)
    under its feet.
    """
    done = threading.Event()

    def run() -> None:
        try:
            target()
        finally:
            done.set()

    threading.Thread(target=run, name=name, daemon=True).start()
    return done


def _wait(done: threading.Event) -> None:
    """Wait in short steps, so that a Ctrl-C reaches this (main) thread at once."""
    while not done.wait(0.2):
        pass
