"""The simulated world every part of the simulation shares: the event queue and virtual clock, the
seeded randomness, the trace, the network, and the cluster's state.

The parts (explore.zookeeper, explore.replica, explore.processes, explore.workload) extend it;
what one part asks of another is declared here.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from typing import Any

from broker.partition_state import PartitionState
from broker.replication import Action, PartitionReplica, WriteIsr
from explore.log import SimLog
from explore.settings import SimSettings
from explore.state import Acked, FiredStep, Pending, SimBroker

CONNECT_REFUSED = -100  # a request to a dead process: refused at once
ZK = "zk"
CLIENT = "client"


class World:
    """State and plumbing shared by the parts of a simulation."""

    def __init__(self, settings: SimSettings, seed: int, trace: bool = False) -> None:
        self.settings = s = settings
        self.rng = random.Random(seed)
        self.now = 0.0
        self._queue: list[tuple[float, int, Callable[..., None], tuple[Any, ...]]] = []
        self._seq = 0
        self.events = 0
        self.trace: list[str] | None = [] if trace else None
        self.brokers: dict[int, SimBroker] = {}
        for i in range(1, s.brokers + 1):
            b = SimBroker(
                i,
                f"n{i}",
                SimLog(s.flush_interval_messages),
                PartitionReplica(i, s.lag_time_max_ms, elr_min_insync=s.elr_min_insync),
            )
            self.brokers[i] = b
        self.by_name = {b.name: b for b in self.brokers.values()}
        self.replicas = tuple(self.brokers)
        # the network: symmetric cuts between endpoints (node names, "zk")
        self.cuts: set[frozenset[str]] = set()
        # simulated ZooKeeper
        self.registered: set[int] = set()
        self.zk_state: PartitionState | None = None
        self.controller = -1
        self.controller_epoch = 0
        self.zxid = 0  # ZooKeeper's transaction id: orders registrations and state writes
        self._expiry_token: dict[int, int] = {}
        self._reconcile_pending = False
        # the workload
        self.next_value = 0
        self.acked: list[Acked] = []
        self.sent = 0
        self.producing = True
        self.in_flight: dict[int, tuple[Pending, float]] = {}
        self._producer_watch: set[int] = set()
        self.fired: list[FiredStep] = []

    def next_zxid(self) -> int:
        self.zxid += 1
        return self.zxid

    # --- the event queue ----------------------------------------------------------------------
    def at(self, when: float, fn: Callable[..., None], *args: Any) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (when, self._seq, fn, args))

    def after(self, delay: float, fn: Callable[..., None], *args: Any) -> None:
        self.at(self.now + delay, fn, *args)

    def run_until(self, end: float, stop: Callable[[], bool] | None = None) -> None:
        queue = self._queue
        while queue and queue[0][0] <= end:
            when, _, fn, args = heapq.heappop(queue)
            self.now = when
            self.events += 1
            fn(*args)
            if stop is not None and stop():
                return
        self.now = max(self.now, end)

    def note(self, text: str) -> None:
        if self.trace is not None:
            self.trace.append(f"{self.now / 1000:9.3f} {text}")

    # --- brokers as event targets -------------------------------------------------------------
    def on_broker(self, b: SimBroker, incarnation: int, fn: Callable[..., None], *args: Any) -> None:
        """Run fn on broker b's process, if it is still that process; a paused one holds it."""
        if not b.up or b.incarnation != incarnation:
            return
        if b.paused:
            b.held.append((fn, args))
            return
        fn(*args)

    def broker_after(self, b: SimBroker, delay: float, fn: Callable[..., None], *args: Any) -> None:
        self.after(delay, self.on_broker, b, b.incarnation, fn, *args)

    def clock(self, b: SimBroker) -> float:
        return self.now + b.clock_offset_ms

    # --- the network --------------------------------------------------------------------------
    def _delay(self) -> float:
        low, high = self.settings.network_delay_ms
        return low + self.rng.random() * (high - low)

    def cut(self, a: str, b: str) -> bool:
        return frozenset((a, b)) in self.cuts

    def request(
        self,
        src: str,
        dst: SimBroker,
        handle: Callable[[Callable[..., None]], None],
        on_reply: Callable[..., None],
        reply_to: SimBroker | None,
    ) -> None:
        """Send a request from `src` to broker `dst`: `handle(respond)` runs there; `respond(*answer)`
        sends the answer back to `on_reply` (on `reply_to`'s current process, or the client)."""
        if self.cut(src, dst.name):
            return  # dropped: the requester's timeout takes over
        src_inc = reply_to.incarnation if reply_to is not None else 0

        def deliver_reply(*answer: Any) -> None:
            if reply_to is None:
                on_reply(*answer)
            else:
                self.on_broker(reply_to, src_inc, on_reply, *answer)

        def respond(*answer: Any) -> None:
            if self.cut(src, dst.name):
                return
            self.after(self._delay(), deliver_reply, *answer)

        def arrive() -> None:
            if not dst.up:
                respond(CONNECT_REFUSED)
                return
            if dst.paused:
                dst.held.append((handle, (respond,)))
                return
            handle(respond)

        self.after(self._delay(), arrive)

    # --- what the parts ask of each other -------------------------------------------------------
    def zk_connected(self, b: SimBroker) -> bool:
        return b.up and not b.paused and not self.cut(b.name, ZK)

    def apply_state(self, b: SimBroker, state: PartitionState) -> None:
        raise NotImplementedError  # explore.replica

    def run_actions(self, b: SimBroker, actions: list[Action]) -> None:
        raise NotImplementedError  # explore.replica

    def start_producers(self) -> None:
        raise NotImplementedError  # explore.workload

    def write_isr(self, b: SimBroker, action: WriteIsr) -> None:
        raise NotImplementedError  # explore.zookeeper

    def stop_following(self, b: SimBroker) -> None:
        raise NotImplementedError  # explore.replica

    def checkpoint(self, b: SimBroker) -> None:
        raise NotImplementedError  # explore.replica

    def produce(self, b: SimBroker, value: int, respond: Callable[..., None]) -> None:
        raise NotImplementedError  # explore.replica

    def session_check(self, b: SimBroker) -> None:
        raise NotImplementedError  # explore.zookeeper

    def register(self, b: SimBroker) -> None:
        raise NotImplementedError  # explore.zookeeper

    def deregister(self, b: SimBroker) -> None:
        raise NotImplementedError  # explore.zookeeper

    def notify(self, b: SimBroker) -> None:
        raise NotImplementedError  # explore.zookeeper
