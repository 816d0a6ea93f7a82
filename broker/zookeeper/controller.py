"""The controller's ZooKeeper driver: who is controller, and carrying out its decisions.

The broker that creates the ephemeral /controller znode is the controller (its epoch bumped in
/controller_epoch). Whenever something changes (and every RECONCILE_SECONDS as a safety net) it
reads the live registrations (and when each was made: a broker that registered again restarted),
asks broker.controller.reconcile what to do, and writes each partition state it returns with
compare-and-set on the znode version: new states, elections (a dead or restarted leader), and
ISRs without the brokers whose sessions expired (docs/broker-variants.md). It also carries out the
partition reassignments asked for in /admin/reassign_partitions (broker.reassignment).
"""

from __future__ import annotations

import asyncio
import json
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
    RemoveFromIsr,
    needs_election,
    offline_partitions,
    reconcile,
)
from broker.partition_state import Key, LeaderAndIsr, PartitionState
from broker.reassignment import (
    CompleteReassignment,
    DropRequest,
    MoveLeadershipAndShrinkIsr,
    ReplicaAssignment,
    StartReassignment,
    WriteAssignment,
    encode_request,
    parse_request,
    plan,
)
from broker.zookeeper.cache import MetadataCache
from broker.zookeeper.layout import (
    CONTROLLER,
    CONTROLLER_EPOCH,
    IDS,
    REASSIGN_PARTITIONS,
    TOPICS,
    encode_assignments,
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
        DataWatch(self.zk, REASSIGN_PARTITIONS, lambda data, stat: self.session.post(self.needed))

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    def needed(self) -> None:
        """Something changed: reconcile soon (if controller)."""
        self._reconcile_needed.set()

    def state_changed(self, state: PartitionState | None, key: tuple[str, int] | None = None) -> None:
        if state is None or (self.is_controller and needs_election(state.leader, self.cache.brokers)):
            self._reconcile_needed.set()
        elif self.is_controller and key is not None:
            assignment = self.cache.assignments.get(key[0], {}).get(key[1])
            if assignment is not None and assignment.reassigning:
                self._reconcile_needed.set()  # an adding replica may have joined the ISR

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
        states = dict(self.cache.states)
        log_ends = None
        if self.config.election_policy == "longest-log":
            offline = offline_partitions(assignments, states, live)
            log_ends = {
                key: await self._log_end_offsets(*key, candidates) for key, candidates in offline.items()
            }
        reconciled = reconcile(
            assignments=assignments,
            states=states,
            live=live,
            settings=self.config,
            log_ends=log_ends,
            registered=registered,
        )
        retry = False
        for action in reconciled:
            if not self.is_controller:
                return False
            retry |= not await self._write(action, log_ends)
        busy = {a.partition for a in reconciled}
        return await self._reassign(live, busy) or retry

    # --- partition reassignment (broker.reassignment) -------------------------------------------
    async def _reassign(self, live: set[int], busy: set[tuple[str, int]]) -> bool:
        """The next step of every requested or unfinished reassignment; True: try again soon."""
        requested, version = await asyncio.to_thread(self._read_request)
        if not {b for target in requested.values() for b in target} <= live:
            # This pass read the registrations before it read the request: a broker that registered
            # in between (and was then named in the request) would be taken for unknown and the
            # request dropped. Read them again, after the request.
            live = set(await asyncio.to_thread(self._registrations))
        assignments = {
            (topic, index): a for topic, parts in self.cache.assignments.items() for index, a in parts.items()
        }
        if not requested and not any(a.reassigning for a in assignments.values()):
            return False
        actions = [
            a
            for a in plan(requested=requested, assignments=assignments, states=self.cache.states, live=live)
            if a.partition not in busy
        ]
        retry = False
        topic_writes: dict[str, dict[int, ReplicaAssignment]] = {}
        finished: dict[tuple[str, int], str] = {}
        for action in actions:
            key = action.partition
            if isinstance(action, WriteAssignment):
                if isinstance(action, StartReassignment):
                    log.warning(
                        "%s-%d: reassigning to %s: replicas %s, adding %s, removing %s",
                        *key,
                        list(requested[key]),
                        list(action.assignment.replicas),
                        list(action.assignment.adding),
                        list(action.assignment.removing),
                    )
                elif isinstance(action, CompleteReassignment):
                    log.warning(
                        "%s-%d: reassignment complete: replicas %s", *key, list(action.assignment.replicas)
                    )
                    finished[key] = "complete"
                topic, index = key
                topic_writes.setdefault(topic, {})[index] = action.assignment
            elif isinstance(action, DropRequest):
                if action.reason != "done":
                    log.warning("%s-%d: reassignment request dropped: %s", *key, action.reason)
                finished[key] = action.reason
            elif isinstance(action, MoveLeadershipAndShrinkIsr):
                if not await self._replace_state(key, action.state):
                    retry = True
                    continue
                log.warning(
                    "%s-%d: reassignment: leader %d -> %d, epoch %d, isr %s",
                    *key,
                    action.previous_leader,
                    action.state.leader,
                    action.state.leader_epoch,
                    list(action.state.isr),
                )
        for topic, changed in topic_writes.items():
            if not await self._write_assignment(topic, changed):
                retry = True
                finished = {k: v for k, v in finished.items() if k[0] != topic or v != "complete"}
        if finished:
            await asyncio.to_thread(self._remove_from_request, set(finished), version)
        return retry

    def _read_request(self) -> tuple[dict[tuple[str, int], tuple[int, ...]], int]:
        """The entries of /admin/reassign_partitions and the znode's version (-1: none)."""
        try:
            data, stat = self.zk.get(REASSIGN_PARTITIONS)
        except NoNodeError:
            return {}, -1
        targets, problems = parse_request(parse_json(data))
        for problem in problems:
            log.warning("%s: %s", REASSIGN_PARTITIONS, problem)
        return targets, int(stat.version)

    def _remove_from_request(self, keys: set[tuple[str, int]], version: int) -> None:
        """Drop finished partitions from the request (the znode goes when it is empty), as Kafka's
        controller does; a request rewritten meanwhile is read again at the next pass."""
        if version < 0:
            return
        try:
            data, stat = self.zk.get(REASSIGN_PARTITIONS)
            targets, _ = parse_request(parse_json(data))
            left = {k: v for k, v in targets.items() if k not in keys}
            if left:
                self.zk.set(REASSIGN_PARTITIONS, json.dumps(encode_request(left)).encode(), stat.version)
            else:
                self.zk.delete(REASSIGN_PARTITIONS, stat.version)
        except (NoNodeError, BadVersionError):
            self._reconcile_needed.set()

    async def _write_assignment(self, topic: str, changed: dict[int, ReplicaAssignment]) -> bool:
        """Compare-and-set of the topic znode with some partitions' new assignments."""
        current = dict(self.cache.assignments.get(topic, {}))
        version = self.cache.topic_versions.get(topic)
        if version is None:
            return False
        current.update(changed)
        data = encode_assignments(self.cache.topic_ids[topic], current)
        try:
            await asyncio.to_thread(self.zk.set, f"{TOPICS}/{topic}", data, version)
        except (BadVersionError, NoNodeError):
            return False
        return True

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
        if isinstance(action, CreateState):
            data = encode_state(action.state, self.controller_epoch)
            try:
                await asyncio.to_thread(self.zk.create, state_path(*action.partition), data, makepath=True)
                log.info(
                    "%s-%d: created, leader %d, isr %s",
                    *action.partition,
                    action.state.leader,
                    list(action.state.isr),
                )
            except NodeExistsError:
                pass  # the watch will deliver it
            return True
        assert isinstance(action, ElectLeader)
        elected = action.state
        if not await self._replace_state(action.partition, elected):
            return False
        ends = (log_ends or {}).get(action.partition)
        log.warning(
            "%s-%d: %s election: leader %d -> %d, epoch %d, isr %s%s",
            *action.partition,
            "unclean" if action.unclean else "clean",
            action.previous_leader,
            elected.leader,
            elected.leader_epoch,
            list(elected.isr),
            (f", elr {list(elected.elr)}" if elected.elr else "") + (f", log ends {ends}" if ends else ""),
        )
        return True

    async def _replace_state(self, partition: Key, state: LeaderAndIsr) -> bool:
        """Compare-and-set of a partition state on the version `state` replaces; False when someone
        else wrote it first."""
        data = encode_state(state, self.controller_epoch)
        try:
            await asyncio.to_thread(self.zk.set, state_path(*partition), data, state.zk_version)
        except (BadVersionError, NoNodeError):
            return False
        return True

    async def _remove_from_isr(self, action: RemoveFromIsr) -> bool:
        state = action.state
        if not await self._replace_state(action.partition, state):
            return False
        log.warning(
            "%s-%d: brokers %s gone: isr %s, elr %s (leader %d, epoch %d)",
            *action.partition,
            list(action.removed),
            list(state.isr),
            list(state.elr),
            state.leader,
            state.leader_epoch,
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
