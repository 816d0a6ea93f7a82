"""The generic runner of a workload: `config.concurrency` client slots at `config.rate` ops/s.

Which slots, and what each runs, is the workload's (`workloads.workload.Workload`: the queue's
`workloads.queue`, the transactions' `workloads.txn`); this module runs them, as threads of this
process or in a few client worker processes (`workloads.workers`), until the load stops.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable

from foundation.config import TestConfig
from history.journal import Journal, LocalJournal
from history.processes import process_numbers
from history.writer import HistoryWriter
from workloads.clients import make_driver, make_producer
from workloads.clients.base import Driver
from workloads.kinds import workload_of
from workloads.progress import LiveProgress
from workloads.stats import WorkloadStats
from workloads.workers import ClientLoad, WorkerPool, default_workers
from workloads.workload import PREPARE_TIMEOUT_S, Workload

log = logging.getLogger(__name__)

# With crash_clients, at most this many client worker processes; with the Java client each worker
# also runs a JVM (about 100 MB, and a few CPU seconds to start), so fewer of them.
MAX_CRASHABLE_WORKERS = 32
MAX_CRASHABLE_JVMS = 4


def run_workload(
    config: TestConfig,
    bootstrap: list[str],
    history: HistoryWriter,
    stop_event: threading.Event,
    progress: LiveProgress | None = None,
    *,
    workload: Workload | None = None,
    shared_producer: bool = True,
    workers: int | None = None,
    ready: threading.Event | None = None,
    go: threading.Event | None = None,
) -> WorkloadStats:
    """Drive `config.concurrency` client processes at `config.rate` ops/s until `stop_event` is set.

    `workload`: the test's (default: the one its config names, `workloads.kinds`).
    `workers`: how many client worker processes run the slots (default: `default_workers`, see
    `workloads.workers`); 0 runs them as threads of this process. With `ready` and `go`, the
    clients are started (worker processes spawned, producers made) and `ready` is set; no
    operation starts before `go` is (a run's load phase, and its time limit, begin with the load,
    not with the seconds a loaded machine takes to start Python processes).
    """
    workload = workload if workload is not None else workload_of(config)
    shared_producer = shared_producer and workload.shares_producer
    # bad settings fail here, before any process starts
    driver = make_driver(config, bootstrap, read_committed=workload.reads_committed)
    stats = WorkloadStats()
    numbers = process_numbers(history)
    count = default_workers(config) if workers is None else workers
    if config.crash_clients > 0:
        # One client process per worker, so a crash kills exactly one (up to a bound on how many
        # Python processes a machine should carry; beyond it a worker holds a few).
        most = MAX_CRASHABLE_JVMS if config.client == "java" else MAX_CRASHABLE_WORKERS
        count = min(config.concurrency, most)
    started_progress = False
    if progress is not None:
        progress.attach(stats)
        started_progress = progress.start()
    try:
        gate = Gate(ready, go, stop_event)
        if count > 0:
            load = ClientLoad(config, workload, bootstrap, history, stats, numbers, shared_producer)
            _run_in_workers(load, stop_event, count, gate)
        else:
            _run_in_threads(
                driver,
                config,
                workload,
                LocalJournal(history, stats, numbers),
                stop_event,
                shared_producer,
                gate,
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
    workload: Workload,
    journal: Journal,
    stop_event: threading.Event,
    shared_producer: bool,
    gate: Gate,
) -> None:
    shared = make_producer(driver) if shared_producer else None
    slots = [workload.make_slot(config, gen, driver, journal, shared) for gen in workload.generators(config)]
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


def _run_in_workers(load: ClientLoad, stop_event: threading.Event, count: int, gate: Gate) -> None:
    pool = WorkerPool(load, count, held=True)
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
