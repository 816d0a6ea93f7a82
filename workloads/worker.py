"""A client worker process: some of the workload's slots, as threads, journaling through the controller.

Started by `workloads.workers` as `python -m workloads.worker PARENT_PID CONTROL_FD SLOT_FD...`.
Each slot thread journals over its own socket (`RemoteJournal`); the control socket carries the
setup (the test's settings, which slots), `ready`/`error`, forwarded log records, and `stop`.

The worker dies with the controller: the kernel sends it SIGKILL when its parent exits
(PR_SET_PDEATHSIG), and a closed control socket also stops it. Ctrl-C is the controller's to
handle (it stops the workers so that every operation in flight gets its completion), so the worker
ignores SIGINT.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import threading
from multiprocessing.connection import Connection
from typing import Any

from foundation.errors import BadInput, InfrastructureError

PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """SIGKILL this process when the controller exits (Linux); exit now if it already has."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the closed control socket still stops the worker
    if os.getppid() != parent:
        os._exit(3)


class ForwardLogs(logging.Handler):
    """Log records go to the controller, which logs them where its own logs go."""

    def __init__(self, control: Connection, lock: threading.Lock):
        super().__init__()
        self.control = control
        self.send_lock = lock

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
            if record.exc_info:
                message += "\n" + logging.Formatter().formatException(record.exc_info)
            with self.send_lock:
                self.control.send(("log", record.name, record.levelno, message, record.threadName))
        except Exception:  # the controller is gone or the record cannot be sent: drop it
            pass


def serve(control: Connection, slot_conns: list[Connection]) -> int:
    """Run the slots the controller assigns until it says stop (or disappears)."""
    from history.journal import JournalClosed, RemoteJournal
    from workloads.workload import PREPARE_TIMEOUT_S

    setup: dict[str, Any] = control.recv()
    lock = threading.Lock()
    root = logging.getLogger()
    root.handlers[:] = [ForwardLogs(control, lock)]
    root.setLevel(setup["log_levels"].get("", logging.WARNING))
    for name, level in setup["log_levels"].items():
        if name:
            logging.getLogger(name).setLevel(level)

    from workloads.clients import make_driver, make_producer

    config = setup["config"]
    workload = setup["workload"]  # `workloads.workload.Workload`, pickled by the controller
    try:
        driver = make_driver(config, setup["bootstrap"], read_committed=workload.reads_committed)
        shared = make_producer(driver) if setup["shared_producer"] else None
    except (BadInput, InfrastructureError) as e:
        with lock:
            control.send(("error", type(e).__name__, str(e)))
        return 1
    gens = workload.generators(config)
    for number, (incarnation, sends) in setup.get("resume", {}).items():
        gens[number].resume(incarnation, sends)  # a replacement for a crashed worker
    stop = threading.Event()
    threads = []
    try:
        slots = [
            workload.make_slot(config, gens[number], driver, RemoteJournal(conn), shared)
            for number, conn in zip(setup["slots"], slot_conns, strict=True)
        ]
    except JournalClosed:
        return 1
    # The slots prepare their first clients together (workloads.queue.Slot.run); the controller
    # hears "ready" once every one has (or the barrier broke), and they begin at its "go".
    start = threading.Barrier(len(slots), timeout=PREPARE_TIMEOUT_S) if slots else None
    ready_sent = threading.Event()
    go = threading.Event()

    def say_ready() -> None:
        with lock:
            if not ready_sent.is_set():
                control.send(("ready",))
                ready_sent.set()

    def opened() -> bool:
        say_ready()
        while not go.wait(0.1):
            if stop.is_set():
                return False
        return not stop.is_set()

    if not slots:
        say_ready()
    for slot in slots:
        t = threading.Thread(
            target=slot.run, args=(stop, start, opened), name=f"client-{slot.gen.slot}", daemon=True
        )
        t.start()
        threads.append(t)
    try:
        if not setup.get("held") or control.recv() == "go":
            go.set()
            control.recv()  # "stop"
    except (EOFError, OSError):
        pass  # the controller is gone: stop too
    stop.set()
    if start is not None:
        start.abort()
    for t in threads:
        t.join()
    return _close(shared, slot_conns)


def _close(shared: Any, slot_conns: list[Connection]) -> int:
    if shared is not None:
        shared.close()
    for conn in slot_conns:
        conn.close()
    return 0


def main(argv: list[str]) -> int:
    parent, control_fd, *slot_fds = (int(a) for a in argv)
    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    control = Connection(control_fd)
    return serve(control, [Connection(fd) for fd in slot_fds])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
