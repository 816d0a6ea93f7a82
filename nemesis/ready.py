"""After a heal: when the brokers it brought back serve clients again (the history's `ready` op).

A heal's `ok` says the nemesis started, resumed or reconnected the brokers; a Kafka JVM broker
started again serves 18-30 s later on a loaded 2-core machine (it loads its logs, registers,
catches up), the own broker once its old ZooKeeper session expired. Verdict power counts a fault
window's recovery from when its brokers serve again, not from the heal (checkers/power.py), so
the nemesis journals that moment: right after the heal's `ok`, `invoke` of `ready` with the
fault's `fault`, `fault_id` and `nodes`; then `ok` (with `waited_s`) once every one of those
nodes answers the system's readiness check (`wait_ready`: the own broker listens and is
registered anew in ZooKeeper, a defined system's broker answers ApiVersions and Metadata listing
itself), or `info` (error) when they did not within `READY_BOUND_S`. A watch runs in a thread of
its own, so the schedule goes on as before (a scripted schedule's timing is unchanged), and ends
without a completion when the history closes. Nodes that are no broker of the cluster (the own
system's ZooKeeper node, a definition's `zookeeper` role) and systems that cannot tell (no
`wait_ready`) are not watched.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from clusters.sut import WaitsReady
from history.faults import READY
from nemesis import role_targets
from nemesis.packages import Context

log = logging.getLogger(__name__)

# How long a watch waits for the brokers to serve again before it journals `info`.
READY_BOUND_S = 120.0
# Each readiness check's own bound, and the pause between checks.
CHECK_S = 1.0
POLL_S = 0.5

Journal = Callable[[str, str, dict[str, Any], "str | None"], None]


class ReadyWatch:
    """The watches of one nemesis: one thread per heal, journaling through `journal` until
    `closed()` says the history is closed."""

    def __init__(self, ctx: Context, journal: Journal, closed: Callable[[], bool]) -> None:
        self.ctx = ctx
        self._journal = journal
        self._closed = closed
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def watch(self, fault: str, fault_id: str, nodes: list[str]) -> None:
        """Journal `invoke ready` for the brokers among `nodes`, and watch them in a thread."""
        if not isinstance(self.ctx.sut, WaitsReady) or self._closed():
            return
        others = set(role_targets.zookeeper_nodes(self.ctx))
        names = [n for n in dict.fromkeys(nodes) if n in self.ctx.names and n not in others]
        if not names:
            return
        value = {"fault": fault, "fault_id": fault_id, "nodes": names}
        self._journal("invoke", READY, value, None)
        thread = threading.Thread(
            target=self._run, args=(value, time.monotonic()), name=f"ready-{fault_id}", daemon=True
        )
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()

    def wait(self, timeout: float, stop: threading.Event | None = None) -> bool:
        """Until every watch ended (True) or `timeout` s passed or `stop` was set (False)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                alive = [t for t in self._threads if t.is_alive()]
            if not alive:
                return True
            if time.monotonic() >= deadline or (stop is not None and stop.is_set()):
                return False
            alive[0].join(min(POLL_S, max(0.0, deadline - time.monotonic())))

    def _run(self, value: dict[str, Any], started: float) -> None:
        pending = list(value["nodes"])
        while not self._closed():
            pending = [n for n in pending if not self._serves(n)]
            waited = round(time.monotonic() - started, 3)
            if not pending:
                self._say("ok", {**value, "waited_s": waited}, None)
                return
            if waited >= READY_BOUND_S:
                error = f"{' '.join(pending)} did not serve again within {READY_BOUND_S:g} s"
                self._say("info", value, error)
                return
            time.sleep(POLL_S)
        log.info("nemesis: the history closed before %s served again", " ".join(pending))

    def _say(self, type_: str, value: dict[str, Any], error: str | None) -> None:
        if not self._closed():
            self._journal(type_, READY, value, error)

    def _serves(self, name: str) -> bool:
        try:
            self.ctx.sut.wait_ready(self.ctx.node(name), timeout=CHECK_S)
        except Exception as e:  # noqa: BLE001 - a broker still starting, exited or unreachable: not yet
            log.debug("nemesis: %s does not serve yet: %s", name, e)
            return False
        return True
