"""Client slots in worker processes, journaled by the controller's single writer.

Why processes: a Python client spends most of its CPU decoding what it polls (kafka-python decodes
every record in Python), and one process runs Python on one core at a time. Spreading the slots
over a few worker processes (`workloads.worker`) lets the client use every core.

Why a single writer (rather than workers appending to the file under a cross-process lock): the
history keeps exactly one writer, the controller's `HistoryWriter`, shared with the nemesis; a
worker that dies (or is killed) mid-operation can neither tear a line in the middle of the file nor
leave a lock held, and the controller, which sees its sockets close, completes the operations it
had open as `info`.

The protocol, per slot (one socket each, one request at a time, see `history.journal`): the slot
sends its invoke and waits for the acknowledgement, which the controller sends only after the line
is written and flushed, so an operation never starts before its invoke is on record; it sends the
completion without waiting (a completion stamped slightly late only widens the operation's window).
Process numbers come from the controller's allocator, so they are never reused, also across the
drain. Crashing clients (`config.crash_clients` = S): every S seconds on average (exponential gaps, seeded
by the test's seed) the controller kills one worker with SIGKILL, mid-operation: its consumer
sends no LeaveGroup, its producer dies with whatever it had in flight. Each slot then runs in a
worker of its own, so one kill is one client process. What the victim left open ends `info`
("crashed: ..."), its process is journaled as a `crash` operation (invoke, then `info`), and a new
worker takes the slot under a new process number, its values continuing where the old one's
stopped. Stopping: `stop_event` makes the controller tell every worker to stop; slots finish the
operation in flight, and the controller writes its completion before `run_workload` returns.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import selectors
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from foundation.config import TestConfig, delivery_timeout_ms
from foundation.errors import BadInput, InfrastructureError
from history.journal import COMPLETE, INVOKE, PROCESS
from history.processes import ProcessNumbers
from history.writer import HistoryWriter
from workloads.stats import WorkloadStats
from workloads.workload import Workload

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parent.parent
# Loggers whose level the workers copy from the controller (the root's "" included).
FORWARDED_LOGGERS = ("", "kafka", "workloads", "confluent_kafka")
START_TIMEOUT_S = 60.0
# What a send invocation holds near its start (journal.encode of the slot's dict): cheap to spot.
SEND_MARK = '"f":"send"'
TXN_MARK = '"f":"txn"'  # a transaction's invocation: its sends are among its `mops`


def default_workers(config: TestConfig) -> int:
    """How many worker processes run the slots by default; 0: threads of the controller.

    kafka-python decodes every record in Python, so its slots get one process per core (at least
    two, never more than there are slots). librdkafka does that work in C threads outside the GIL,
    and so does the Java client in its JVM: their slots run best as threads of the controller, one
    producer batching all their sends.
    """
    if config.client in ("confluent-kafka", "java"):
        return 0
    return max(1, min(config.concurrency, max(2, os.cpu_count() or 1)))


def op_bound_s(config: TestConfig) -> float:
    """How long an operation may take at most (the drivers' delivery timeout and wait), plus slack."""
    return delivery_timeout_ms(config) / 1000 + 5 + 10


@dataclass
class _Worker:
    number: int
    proc: subprocess.Popen[bytes]
    control: Connection
    slots: list[int]
    conns: list[Connection] = field(default_factory=list)
    ready: bool = False
    crashed: bool = False  # killed on purpose (crash_clients)


@dataclass
class _SlotLink:
    worker: _Worker
    slot: int
    open_invoke: str | None = None  # the body of the invoke awaiting its completion


@dataclass(frozen=True)
class ClientLoad:
    """One run's load as the client workers take it: what they run (the config, its workload,
    the brokers) and where the controller journals for them (history, stats, process numbers)."""

    config: TestConfig
    workload: Workload
    bootstrap: list[str]
    history: HistoryWriter
    stats: WorkloadStats
    numbers: ProcessNumbers
    shared_producer: bool = True  # one producer per worker for the slots that share it


class WorkerPool:
    """The controller's side: starts the workers, journals for them, stops them, leaves no orphan."""

    def __init__(self, load: ClientLoad, workers: int, held: bool = False):
        config = self.config = load.config
        self.bootstrap = load.bootstrap
        self.history = load.history
        self.stats = load.stats
        self.numbers = load.numbers
        self.count = max(1, min(workers, config.concurrency))
        self.workload = load.workload
        self.shared_producer = load.shared_producer and load.workload.shares_producer
        self.workers: list[_Worker] = []
        self.links: dict[Connection, _SlotLink] = {}
        self.selector = selectors.DefaultSelector()
        self.error: Exception | None = None
        self.stopping = False
        self.closed = False
        self.killed: set[int] = set()
        # Per slot: the body of its latest send invocation and its latest process number (what a
        # replacement worker needs to go on with fresh values under a fresh number).
        self.last_send: dict[int, str] = {}
        self.last_process: dict[int, int] = {}
        self.incarnations: dict[int, int] = {}
        self.crash_rng = random.Random(f"strandline-crash-clients:{config.seed}")
        self.next_crash: float | None = None
        # Held: the workers start their clients and wait for `release` before any operation.
        self.held = held

    # -- starting -----------------------------------------------------------------------------
    def start(self, stop_event: threading.Event) -> None:
        for w in range(self.count):
            self.workers.append(self._spawn(w, list(range(w, self.config.concurrency, self.count))))
        for worker in self.workers:
            self._setup(worker, {})
        deadline = time.monotonic() + START_TIMEOUT_S
        while not all(w.ready for w in self.workers):
            if self.error is not None:
                raise self.error
            if stop_event.is_set():
                return
            if time.monotonic() > deadline:
                raise InfrastructureError(f"client workers did not start within {START_TIMEOUT_S:g} s")
            self._pump(0.1)

    def release(self) -> None:
        """Let held workers begin (those started later, to replace a crashed one, begin at once)."""
        self.held = False
        for worker in self.workers:
            with contextlib.suppress(OSError):
                worker.control.send("go")

    def _setup(self, worker: _Worker, resume: dict[int, tuple[int, int]]) -> None:
        """Send a worker its slots; `resume`: slot -> (incarnation, sends already made)."""
        levels = {name: logging.getLogger(name).getEffectiveLevel() for name in FORWARDED_LOGGERS}
        worker.control.send(
            {
                "config": self.config,
                "workload": self.workload,
                "bootstrap": self.bootstrap,
                "slots": worker.slots,
                "shared_producer": self.shared_producer,
                "log_levels": levels,
                "resume": resume,
                "held": self.held,
            }
        )

    def _spawn(self, number: int, slots: list[int]) -> _Worker:
        control_parent, control_child = socket.socketpair()
        pairs = [socket.socketpair() for _ in slots]
        child_fds = [control_child.fileno()] + [child.fileno() for _, child in pairs]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "workloads.worker", str(os.getpid()), *map(str, child_fds)],
                pass_fds=child_fds,
                env=env,
                stdin=subprocess.DEVNULL,
            )
        except OSError as e:
            raise InfrastructureError(f"cannot start a client worker: {e}") from None
        finally:
            control_child.close()
            for _, child in pairs:
                child.close()
        worker = _Worker(number, proc, Connection(control_parent.detach()), slots)
        self.selector.register(worker.control, selectors.EVENT_READ, None)
        for slot, (parent, _) in zip(slots, pairs, strict=True):
            conn = Connection(parent.detach())
            worker.conns.append(conn)
            self.links[conn] = _SlotLink(worker, slot)
            self.selector.register(conn, selectors.EVENT_READ, None)
        log.info("client worker %d (pid %d): slots %s", number, proc.pid, slots)
        return worker

    # -- serving ------------------------------------------------------------------------------
    def serve(self, stop_event: threading.Event) -> None:
        """Journal for the workers until `stop_event`, then until every slot has finished."""
        if self.config.crash_clients > 0:
            self.next_crash = time.monotonic() + self.crash_rng.expovariate(1 / self.config.crash_clients)
        while not stop_event.is_set() and self.links and self.error is None:
            self._pump(0.1)
            if self.next_crash is not None and time.monotonic() >= self.next_crash:
                self._crash_one()
                self.next_crash = time.monotonic() + self.crash_rng.expovariate(1 / self.config.crash_clients)
        if not self.links and self.error is None and not stop_event.is_set():
            self.error = InfrastructureError("every client worker process exited before the test ended")
        self.stop()

    def _pump(self, timeout: float) -> None:
        """Serve what the sockets hold: every line that arrived together is written with one write
        and one flush (group commit), and only then are the invokes among them acknowledged."""
        batch: list[tuple[Connection, _SlotLink, tuple[Any, ...]]] = []
        gone: list[tuple[Connection, _SlotLink]] = []
        for key, _ in self.selector.select(timeout):
            conn: Connection = key.fileobj  # type: ignore[assignment]
            link = self.links.get(conn)
            if link is None:
                self._control_message(conn)
            elif not self._slot_messages(conn, link, batch):
                gone.append((conn, link))
        if batch:
            self.history.append_encoded_many([message[1] for _, _, message in batch])
            for conn, link, message in batch:
                if message[0] == INVOKE:
                    try:
                        conn.send(None)
                    except OSError:
                        if (conn, link) not in gone:
                            gone.append((conn, link))
                else:
                    _, _, f, outcome, latency_s, records = message
                    self.stats.completed(f, outcome, latency_s, records=records)
        for conn, link in gone:
            if conn in self.links:
                self._slot_gone(conn, link, "the client worker process exited")

    def _slot_messages(
        self, conn: Connection, link: _SlotLink, batch: list[tuple[Connection, _SlotLink, tuple[Any, ...]]]
    ) -> bool:
        """Take every message a slot's socket holds (in order); False when the socket closed."""
        try:
            while True:
                message = conn.recv()
                kind = message[0]
                if kind == INVOKE:
                    batch.append((conn, link, message))
                    link.open_invoke = message[1]
                    head = message[1][:64]
                    # noted now: the worker may be dead already
                    if SEND_MARK in head or (TXN_MARK in head and SEND_MARK in message[1]):
                        self.last_send[link.slot] = message[1]
                    return True  # the slot waits for its acknowledgement: nothing more comes
                if kind == COMPLETE:
                    batch.append((conn, link, message))
                    link.open_invoke = None
                elif kind == PROCESS:
                    number = self.numbers.next()
                    self.stats.process_started()
                    self.last_process[link.slot] = number
                    conn.send(number)
                else:
                    log.warning("client worker %d: unknown message %r", link.worker.number, kind)
                if not conn.poll(0):
                    return True
        except (EOFError, OSError):
            return False

    def _slot_gone(self, conn: Connection, link: _SlotLink, why: str) -> None:
        """A slot's socket closed: an operation it left open ends `info`, its process is retired."""
        if link.worker.crashed:
            why = "crashed: the client process was killed (crash_clients)"
        if link.open_invoke is not None:
            invoke = json.loads(link.open_invoke)
            self.history.append({**invoke, "type": "info", "error": why})
            self.stats.completed(invoke["f"], "info", 0.0)
            log.warning("slot %d: %s during %s (journaled as info)", link.slot, why, invoke["f"])
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(conn)
        del self.links[conn]
        conn.close()

    # -- crashing clients ----------------------------------------------------------------------
    def _crash_one(self) -> None:
        """Kill one live worker abruptly, journal its process's crash, and start its replacement."""
        live = [w for w in self.workers if w.ready and not w.crashed and w.proc.poll() is None]
        if not live:
            return
        victim = self.crash_rng.choice(live)
        victim.crashed = True
        self.killed.add(victim.number)
        victim.proc.kill()
        victim.proc.wait()
        log.info("crash_clients: killed client worker %d (pid %d)", victim.number, victim.proc.pid)
        # What it sent before dying is journaled first; then its sockets end (open ops end info).
        while any(link.worker is victim for link in self.links.values()):
            self._pump(0.1)
        resume = {}
        for slot in victim.slots:
            process = self.last_process.get(slot)
            if process is not None:
                crash = {"process": process, "f": "crash"}
                self.history.append({**crash, "type": "invoke"})
                self.history.append({**crash, "type": "info", "error": "killed abruptly (crash_clients)"})
                self.stats.completed("crash", "info", 0.0)
            self.incarnations[slot] = self.incarnations.get(slot, 0) + 1
            resume[slot] = (self.incarnations[slot], self._sends_made(slot))
        replacement = self._spawn(len(self.workers), list(victim.slots))
        self.workers.append(replacement)
        self._setup(replacement, resume)

    def _sends_made(self, slot: int) -> int:
        """How many values the slot has used: its values are slot + concurrency x k, k = 0, 1, ..."""
        body = self.last_send.get(slot)
        if body is None:
            return 0
        op = json.loads(body)
        values = [m["value"] for m in op["mops"] if m.get("f") == "send"] if "mops" in op else [op["value"]]
        return (max(values) - slot) // self.config.concurrency + 1

    def _control_message(self, conn: Connection) -> None:
        worker = next(w for w in self.workers if w.control is conn)
        try:
            message = conn.recv()
        except (EOFError, OSError):
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(conn)
            if not worker.ready and self.error is None:
                self.error = InfrastructureError(f"client worker {worker.number} exited while starting")
            return
        kind = message[0]
        if kind == "ready":
            worker.ready = True
        elif kind == "error":
            _, cls, text = message
            self.error = BadInput(text) if cls == "BadInput" else InfrastructureError(text)
        elif kind == "log":
            _, name, level, text, thread = message
            logger = logging.getLogger(name)
            if logger.isEnabledFor(level):
                record = logger.makeRecord(name, level, "(worker)", 0, text, (), None)
                record.threadName = f"worker{worker.number}/{thread}"
                logger.handle(record)

    # -- stopping -----------------------------------------------------------------------------
    def stop(self, kill: bool = False) -> None:
        """Tell every worker to stop (or kill them all), journal until their slots finish, reap them.

        Every operation a slot invoked gets its completion: the worker's own, or `info` when the
        worker died or had to be killed with it open. Safe to call again (e.g. a second Ctrl-C
        turns a graceful stop into `stop(kill=True)`).
        """
        if self.closed:
            return
        self.stopping = True
        if kill:
            self.kill()
        for worker in self.workers:
            with contextlib.suppress(OSError):
                worker.control.send("stop")
        deadline = time.monotonic() + op_bound_s(self.config)
        while (
            self.links or any(w.proc.poll() is None for w in self.workers)
        ) and time.monotonic() < deadline:
            self._pump(0.1)
        for worker in self.workers:
            if worker.proc.poll() is None:
                log.warning(
                    "client worker %d (pid %d) killed: it did not stop", worker.number, worker.proc.pid
                )
        self.kill()
        # Whatever a dead worker left open ends `info` (its sockets are closed, so this ends).
        while self.links:
            self._pump(0.1)
        for worker in self.workers:
            if worker.proc.returncode != 0 and worker.number not in self.killed:
                log.warning("client worker %d exited with status %s", worker.number, worker.proc.returncode)
            with contextlib.suppress(OSError):
                worker.control.close()
        self.selector.close()
        self.closed = True

    def kill(self) -> None:
        """No worker outlives the pool."""
        for worker in self.workers:
            if worker.proc.poll() is None:
                self.killed.add(worker.number)
                worker.proc.kill()
                worker.proc.wait()
