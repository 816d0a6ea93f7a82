"""The group-coordinator lease in ZooKeeper (broker.groups.lease): watched, and claimed by
compare-and-set when its holder is gone.

Each broker keeps the lease as the watch last delivered it and the registrations (with the czxid
of each) as its last pass read them. A pass (on a change of either, and every PASS_SECONDS as a
safety net) reads both afresh and, when `lease.claim` says it is this broker's turn, writes the
next lease with the version it read: of two brokers claiming at once, one wins. The kazoo calls
block, so a pass runs in a thread; its results and the watch callbacks are applied on the loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from kazoo.client import KazooState
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from broker.background import BackgroundTasks
from broker.groups.lease import PATH, Lease, claim, decode, encode, holder_alive

log = logging.getLogger(__name__)

IDS = "/brokers/ids"  # broker.zookeeper.layout.IDS (Kafka's registrations)
PASS_SECONDS = 1.0


class ZkLease:
    """This broker's view of the lease; `held_version` is the fence its writes check."""

    def __init__(self, zk: Any, broker_id: int, on_change: Callable[[], None] = lambda: None) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.on_change = on_change
        self.lease: Lease | None = None
        self.registrations: dict[int, int] = {}
        self.my_epoch: int | None = None  # czxid of this process's registration
        self._fenced_version = -1
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watching = False
        self._passing = False
        self._pass_again = False
        self._last_pass = 0.0
        self._tasks = BackgroundTasks(
            lambda e: log.warning("group-coordinator lease: %r (the periodic pass carries on)", e)
        )

    # --- what the group service asks ------------------------------------------------------------
    def coordinator(self) -> int | None:
        """The broker FindCoordinator names: the lease's holder while it is registered."""
        lease = self.lease
        return lease.broker_id if lease is not None and holder_alive(lease, self.registrations) else None

    def held_version(self) -> int | None:
        """The lease's znode version while this broker, in this life, holds it; else None."""
        lease = self.lease
        if lease is None or self.my_epoch is None or lease.version <= self._fenced_version:
            return None
        if (lease.broker_id, lease.broker_epoch) != (self.broker_id, self.my_epoch):
            return None
        return lease.version

    def fenced(self, version: int) -> None:
        """A write checked against `version` failed: the lease moved on; read it again."""
        if version > self._fenced_version:
            log.warning("group-coordinator lease version %d was fenced: another broker holds it", version)
        self._fenced_version = max(self._fenced_version, version)
        self.refresh()

    # --- keeping the view current ---------------------------------------------------------------
    def maybe_start(self) -> None:
        """Set the watches once the ZooKeeper client is connected (called from the service's ticks)."""
        if self._watching or not self.zk.connected:
            return
        self._watching = True
        self._loop = asyncio.get_running_loop()
        self.zk.add_listener(self._on_connection_state)
        self._tasks.spawn(asyncio.to_thread(self._watch))

    def _watch(self) -> None:
        """In a thread: setting a watch reads its znode."""
        self.zk.ensure_path(IDS)
        DataWatch(self.zk, PATH, lambda data, stat: self._post(self._on_lease, data, stat))
        ChildrenWatch(self.zk, IDS, lambda _ids: self._post(self.refresh))

    def tick(self) -> None:
        self.maybe_start()
        if self._watching and time.monotonic() - self._last_pass >= PASS_SECONDS:
            self.refresh()

    def _post(self, fn: Callable[..., None], *args: Any) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(fn, *args)

    def _on_connection_state(self, state: str) -> None:
        # kazoo thread: no blocking calls here
        if state == KazooState.LOST:
            self._post(self._session_lost)
        elif state == KazooState.CONNECTED:
            self._post(self.refresh)

    def _session_lost(self) -> None:
        """The registration died with the session: whatever lease this broker held is not its own."""
        if self.held_version() is not None:
            log.warning("ZooKeeper session lost: no longer the group coordinator")
        self.my_epoch = None
        self.on_change()

    def _on_lease(self, data: bytes | None, stat: Any) -> None:
        self._apply(decode(data, int(stat.version)) if stat is not None else None)
        self.on_change()

    def _apply(self, lease: Lease | None) -> None:
        """Keep the newest lease (a pass's read may arrive after a later watch delivery)."""
        current = self.lease
        if lease is None or current is None or lease.version >= current.version:
            if lease != current and lease is not None:
                log.info(
                    "group coordinator: broker %d (coordinator epoch %d, lease version %d)",
                    lease.broker_id,
                    lease.coordinator_epoch,
                    lease.version,
                )
            self.lease = lease

    def refresh(self) -> None:
        """Read the registrations and the lease again, and claim the lease if it is our turn."""
        if not self._watching:
            return
        if self._passing:
            self._pass_again = True
            return
        self._passing = True
        self._tasks.spawn(self._pass())

    async def _pass(self) -> None:
        try:
            while True:
                self._pass_again = False
                self._last_pass = time.monotonic()
                try:
                    lease, registrations, mine = await asyncio.to_thread(self._read_and_claim)
                except Exception as exc:  # ZooKeeper out of reach: keep the last view, try again later
                    log.debug("group-coordinator lease pass failed: %r", exc)
                else:
                    self.registrations, self.my_epoch = registrations, mine
                    self._apply(lease)
                    self.on_change()
                if not self._pass_again:
                    return
        finally:
            self._passing = False

    def _read_and_claim(self) -> tuple[Lease | None, dict[int, int], int | None]:
        """(the lease, the registrations, this process's registration czxid); in a thread."""
        session = self.zk.client_id[0] if self.zk.client_id else None
        registrations: dict[int, int] = {}
        mine = None
        for name in self.zk.get_children(IDS):
            stat = self.zk.exists(f"{IDS}/{name}") if name.isdigit() else None
            if stat is None:
                continue
            registrations[int(name)] = int(stat.czxid)
            if int(name) == self.broker_id and stat.ephemeralOwner == session:
                mine = int(stat.czxid)
        for _ in range(3):
            try:
                data, stat = self.zk.get(PATH)
                version: int | None = int(stat.version)
            except NoNodeError:
                data, version = None, None
            lease = decode(data, version if version is not None else -1)
            wanted = claim(lease, registrations, self.broker_id) if mine is not None else None
            if wanted is None:
                return lease, registrations, mine
            try:
                if version is None:
                    self.zk.create(PATH, encode(wanted))
                    written = 0
                else:
                    written = int(self.zk.set(PATH, encode(wanted), version=version).version)
            except (BadVersionError, NodeExistsError):
                continue  # another broker claimed it first: read what it wrote
            log.warning(
                "took the group-coordinator lease: coordinator epoch %d, lease version %d (previous: %s)",
                wanted.coordinator_epoch,
                written,
                "none" if lease is None else f"broker {lease.broker_id}, epoch {lease.coordinator_epoch}",
            )
            return replace(wanted, version=written), registrations, mine
        return lease, registrations, mine
