"""The controller's ZooKeeper driver: who is controller, and carrying out its decisions.

The broker that creates the ephemeral /controller znode is the controller (its epoch bumped in
/controller_epoch). Whenever something changes (and every RECONCILE_SECONDS as a safety net) it
reads the live registrations (and when each was made: a broker that registered again restarted),
asks broker.controller.reconcile what to do, and writes each partition state it returns with
compare-and-set on the znode version: new states, elections (a dead or restarted leader), and
ISRs without the brokers whose sessions expired (docs/broker-variants.md).
"""

from __future__ import annotations

import asyncio
import logging
import time

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.recipe.watchers import DataWatch

from broker import protocol as p
from broker.client import BrokerConnection
from broker.config import BrokerConfig
from broker.controller import (
    ControllerAction,
    CreateState,
    ElectLeader,
    KnownState,
    RemoveFromIsr,
    needs_election,
    offline_partitions,
    reconcile,
)
from broker.partition_state import PartitionState
from broker.zookeeper.cache import MetadataCache
from broker.zookeeper.layout import (
    CONTROLLER,
    CONTROLLER_EPOCH,
    IDS,
    encode_controller,
    encode_state,
    parse_json,
    state_path,
)
from broker.zookeeper.session import ZkSession

log = logging.getLogger(__name__)

RECONCILE_SECONDS = 5.0


class ControllerDriver:
    """Runs the controller role on this broker when it holds /controller."""

    def __init__(self, config: BrokerConfig, session: ZkSession, cache: MetadataCache) -> None:
        self.config = config
        self.session = session
        self.zk = session.zk
        self.cache = cache
        self.controller_id = -1
        self.is_controller = False
        self.controller_epoch = 0
        self._reconcile_needed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())
        DataWatch(self.zk, CONTROLLER, lambda data, stat: self.session.post(self._on_controller, data))

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    def needed(self) -> None:
        """Something changed: reconcile soon (if controller)."""
        self._reconcile_needed.set()

    def state_changed(self, state: PartitionState | None) -> None:
        if state is None or (self.is_controller and needs_election(state.leader, self.cache.brokers)):
            self._reconcile_needed.set()

    def session_lost(self) -> None:
        if self.is_controller:
            log.warning("no longer controller (session lost)")
        self.is_controller = False

    def new_session(self) -> None:
        self.session.spawn(self._elect_controller())

    # --- controller election --------------------------------------------------------------------
    def _on_controller(self, data: bytes | None) -> None:
        info = parse_json(data)
        if info is None:
            self.controller_id = -1
            self.session.spawn(self._elect_controller())
            return
        self.controller_id = int(info.get("brokerid", -1))
        if self.controller_id != self.config.broker_id and self.is_controller:
            log.warning("controller is now %d; resigning", self.controller_id)
            self.is_controller = False

    async def _elect_controller(self) -> None:
        data = encode_controller(self.config.broker_id, int(time.time() * 1000))
        try:
            await asyncio.to_thread(self.zk.create, CONTROLLER, data, ephemeral=True)
        except NodeExistsError:
            return
        except Exception:
            log.exception("controller election failed")
            return
        self.controller_epoch = await asyncio.to_thread(self._bump_controller_epoch)
        self.controller_id = self.config.broker_id
        self.is_controller = True
        log.info("elected controller (controller epoch %d)", self.controller_epoch)
        self._reconcile_needed.set()

    def _bump_controller_epoch(self) -> int:
        while True:
            try:
                data, stat = self.zk.get(CONTROLLER_EPOCH)
            except NoNodeError:
                try:
                    self.zk.create(CONTROLLER_EPOCH, b"1")
                    return 1
                except NodeExistsError:
                    continue
            epoch = int(data or b"0") + 1
            try:
                self.zk.set(CONTROLLER_EPOCH, str(epoch).encode(), version=stat.version)
                return epoch
            except BadVersionError:
                continue

    # --- reconciliation -------------------------------------------------------------------------
    async def _loop(self) -> None:
        """Level-triggered: whenever something changed, bring every partition to a sane state.

        Also every RECONCILE_SECONDS, as a safety net against a missed or failed notification.
        """
        while True:
            try:
                await asyncio.wait_for(self._reconcile_needed.wait(), RECONCILE_SECONDS)
            except TimeoutError:
                pass
            self._reconcile_needed.clear()
            if not self.is_controller:
                continue
            try:
                retry = await self._reconcile()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("controller reconciliation failed")
                retry = True
            if retry:
                await asyncio.sleep(0.1)
                self._reconcile_needed.set()

    async def _reconcile(self) -> bool:
        # The registrations themselves, not the cache: a new controller's cache may still be empty.
        registered = await asyncio.to_thread(self._registrations)
        live = set(registered)
        assignments = dict(self.cache.topics)
        states = {
            key: KnownState(s.leader, s.leader_epoch, s.isr, s.zk_version, s.written, s.elr)
            for key, s in self.cache.states.items()
        }
        log_ends = None
        if self.config.election_policy == "longest-log":
            offline = offline_partitions(assignments, states, live)
            log_ends = {
                key: await self._log_end_offsets(*key, candidates) for key, candidates in offline.items()
            }
        actions = reconcile(
            assignments=assignments,
            states=states,
            live=live,
            unclean_allowed=self.config.unclean_leader_election,
            policy=self.config.election_policy,
            log_ends=log_ends,
            registered=registered,
            elr_min_insync=self.config.elr_min_insync,
            isr_broker_epoch_check=self.config.isr_broker_epoch_check,
        )
        retry = False
        for action in actions:
            if not self.is_controller:
                return False
            retry |= not await self._write(action, log_ends)
        return retry

    def _registrations(self) -> dict[int, int]:
        """The live brokers and when each registered (its znode's czxid: Kafka's broker epoch)."""
        found: dict[int, int] = {}
        for name in self.zk.get_children(IDS):
            if name.isdigit():
                stat = self.zk.exists(f"{IDS}/{name}")
                if stat is not None:
                    found[int(name)] = int(stat.czxid)
        return found

    async def _write(
        self, action: ControllerAction, log_ends: dict[tuple[str, int], dict[int, int]] | None
    ) -> bool:
        if isinstance(action, RemoveFromIsr):
            return await self._remove_from_isr(action)
        choice = action.election
        if isinstance(action, CreateState):
            data = encode_state(choice.leader, 0, choice.isr, self.controller_epoch)
            try:
                await asyncio.to_thread(
                    self.zk.create, state_path(action.topic, action.index), data, makepath=True
                )
                log.info(
                    "%s-%d: created, leader %d, isr %s",
                    action.topic,
                    action.index,
                    choice.leader,
                    list(choice.isr),
                )
            except NodeExistsError:
                pass  # the watch will deliver it
            return True
        assert isinstance(action, ElectLeader)
        data = encode_state(choice.leader, action.leader_epoch, choice.isr, self.controller_epoch, choice.elr)
        if not await self._replace_state(action.topic, action.index, data, action.zk_version):
            return False
        ends = (log_ends or {}).get((action.topic, action.index))
        log.warning(
            "%s-%d: %s election: leader %d -> %d, epoch %d, isr %s%s",
            action.topic,
            action.index,
            "unclean" if choice.unclean else "clean",
            action.previous_leader,
            choice.leader,
            action.leader_epoch,
            list(choice.isr),
            (f", elr {list(choice.elr)}" if choice.elr else "") + (f", log ends {ends}" if ends else ""),
        )
        return True

    async def _replace_state(self, topic: str, index: int, data: bytes, zk_version: int) -> bool:
        """Compare-and-set of a partition state; False when someone else wrote it first."""
        try:
            await asyncio.to_thread(self.zk.set, state_path(topic, index), data, zk_version)
        except (BadVersionError, NoNodeError):
            return False
        return True

    async def _remove_from_isr(self, action: RemoveFromIsr) -> bool:
        data = encode_state(action.leader, action.leader_epoch, action.isr, self.controller_epoch, action.elr)
        if not await self._replace_state(action.topic, action.index, data, action.zk_version):
            return False
        log.warning(
            "%s-%d: brokers %s gone: isr %s, elr %s (leader %d, epoch %d)",
            action.topic,
            action.index,
            list(action.removed),
            list(action.isr),
            list(action.elr),
            action.leader,
            action.leader_epoch,
        )
        return True

    async def _log_end_offsets(self, topic: str, index: int, candidates: list[int]) -> dict[int, int]:
        """Ask each candidate its log end offset (ListOffsets latest with the debug replica id)."""

        async def ask(broker_id: int) -> tuple[int, int]:
            address = self.cache.brokers.get(broker_id)
            if address is None:
                return broker_id, -1
            conn = BrokerConnection(address.host, address.port, f"controller-{self.config.broker_id}")
            try:
                body = {
                    "replica_id": -2,
                    "isolation_level": 0,
                    "topics": [
                        {
                            "name": topic,
                            "partitions": [
                                {"partition_index": index, "current_leader_epoch": -1, "timestamp": -1}
                            ],
                        }
                    ],
                }
                response = await asyncio.wait_for(conn.request(p.API_LIST_OFFSETS, 4, body, timeout=2.0), 3.0)
                result = response.topics[0].partitions[0]
                return broker_id, int(result.offset) if result.error_code.value == 0 else -1
            except Exception:
                return broker_id, -1
            finally:
                conn.close()

        return dict(await asyncio.gather(*(ask(b) for b in candidates)))
