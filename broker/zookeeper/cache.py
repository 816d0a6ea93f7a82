"""The broker's view of the cluster, kept current by ZooKeeper watches.

Every broker watches the registrations, the topics (their assignments change when partitions are
reassigned: broker.reassignment) and every partition state; each state is pushed into the
ReplicaManager (`apply_state`), which decides the broker's role. Watch callbacks arrive on
kazoo's threads and are posted to the loop by the session.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from kazoo.exceptions import NoNodeError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from broker.metadata import BrokerAddress
from broker.partition_state import PartitionState, leadership_granted
from broker.reassignment import ReplicaAssignment
from broker.replica_manager import ReplicaManager
from broker.zookeeper.layout import IDS, TOPICS, decode_assignments, decode_state, parse_json, state_path
from broker.zookeeper.session import ZkSession

log = logging.getLogger(__name__)


class MetadataCache:
    """Brokers, topics, topic ids and partition states, as the watches last delivered them."""

    def __init__(self, session: ZkSession, replicas: ReplicaManager) -> None:
        self.session = session
        self.zk = session.zk
        self.replicas = replicas
        self.brokers: dict[int, BrokerAddress] = {}
        self.topics: dict[str, dict[int, tuple[int, ...]]] = {}  # each partition's replicas (RS)
        self.assignments: dict[str, dict[int, ReplicaAssignment]] = {}  # with reassignments
        self.topic_versions: dict[str, int] = {}  # the topic znode's version (compare-and-set)
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.topic_names: dict[uuid.UUID, str] = {}
        self.states: dict[tuple[str, int], PartitionState] = {}
        self._watched_topics: set[str] = set()
        self._watched_states: set[tuple[str, int]] = set()
        self._state_waiters: set[asyncio.Event] = set()
        self._brokers_lock = asyncio.Lock()
        # what changed, for the fetchers and the controller
        self.on_brokers_changed: Callable[[], None] = lambda: None
        self.on_topics_changed: Callable[[], None] = lambda: None
        self.on_state_changed: Callable[[PartitionState | None, tuple[str, int] | None], None] = (
            lambda _state, _key: None
        )

    def watch(self) -> None:
        """Start the watches (they last for the client's life)."""
        post = self.session.post
        ChildrenWatch(self.zk, IDS, lambda ids: post(self._on_broker_ids, list(ids)))
        ChildrenWatch(self.zk, TOPICS, lambda names: post(self._on_topics, list(names)))

    # --- registrations --------------------------------------------------------------------------
    def _on_broker_ids(self, ids: list[str]) -> None:
        self.session.spawn(self._refresh_brokers())

    async def _refresh_brokers(self) -> None:
        """Re-read the registrations (serialised, so a slow older refresh cannot win)."""
        async with self._brokers_lock:
            try:
                ids = await asyncio.to_thread(self.zk.get_children, IDS)
            except NoNodeError:
                ids = []
            fresh: dict[int, BrokerAddress] = {}
            for broker_id in sorted(int(i) for i in ids if i.isdigit()):
                try:
                    data, _ = await asyncio.to_thread(self.zk.get, f"{IDS}/{broker_id}")
                except NoNodeError:
                    continue
                info = parse_json(data) or {}
                if "host" in info and "port" in info:
                    fresh[broker_id] = BrokerAddress(broker_id, info["host"], int(info["port"]))
            if set(fresh) != set(self.brokers):
                log.info("live brokers: %s", sorted(fresh))
            self.brokers = fresh
        self.on_brokers_changed()

    # --- topics and partition states ------------------------------------------------------------
    def _on_topics(self, names: list[str]) -> None:
        for name in names:
            if name not in self._watched_topics:
                self._watched_topics.add(name)
                self.session.spawn(self._watch_topic(name))

    async def _watch_topic(self, name: str) -> None:
        """Watch the topic znode: its assignment changes when partitions are reassigned."""

        def callback(data: bytes | None, stat: Any) -> None:
            self.session.post(self._on_topic, name, data, stat)

        await asyncio.to_thread(DataWatch, self.zk, f"{TOPICS}/{name}", callback)

    def _on_topic(self, name: str, data: bytes | None, stat: Any) -> None:
        if data is None or stat is None:
            return  # topics are never deleted here; a missing znode is one being created
        topic_id, assignments = decode_assignments(name, parse_json(data) or {})
        self.assignments[name] = assignments
        self.topics[name] = {index: a.replicas for index, a in assignments.items()}
        self.topic_versions[name] = int(stat.version)
        self.topic_ids[name] = topic_id
        self.topic_names[topic_id] = name
        for index, assignment in sorted(assignments.items()):
            if (name, index) not in self._watched_states:
                self._watched_states.add((name, index))
                self.session.spawn(self._watch_state(name, index))
            state = self.states.get((name, index))
            if state is not None and (state.replicas, state.removing) != (
                assignment.replicas,
                assignment.removing,
            ):
                log.info(
                    "%s-%d: replicas %s -> %s", name, index, list(state.replicas), list(assignment.replicas)
                )
                state = replace(state, replicas=assignment.replicas, removing=assignment.removing)
                self.states[(name, index)] = state
                self._apply(name, index, state)
        # A replica the assignment no longer lists (reassigned away, maybe while this broker was
        # down) is stopped and its log deleted, as Kafka's StopReplica with delete does.
        for index, assignment in assignments.items():
            if self.replicas.broker_id not in assignment.replicas:
                self.replicas.remove_replica(
                    name, index, f"not in the assignment {list(assignment.replicas)}"
                )
        self.on_topics_changed()

    async def _watch_state(self, name: str, index: int) -> None:
        await asyncio.to_thread(
            DataWatch, self.zk, state_path(name, index), self._state_callback(name, index)
        )

    def _state_callback(self, topic: str, index: int) -> Callable[[bytes | None, Any], None]:
        # exactly two parameters: kazoo passes a third (the event) to functions that take more
        def callback(data: bytes | None, stat: Any) -> None:
            self.session.post(self._on_state, topic, index, data, stat)

        return callback

    def _on_state(self, topic: str, index: int, data: bytes | None, stat: Any) -> None:
        info = parse_json(data)
        if info is None or stat is None:
            self.states.pop((topic, index), None)
            self.on_state_changed(None, (topic, index))
            return
        assignment = self.assignments.get(topic, {}).get(index)
        replicas = assignment.replicas if assignment is not None else ()
        state = decode_state(info, replicas, int(stat.version), int(getattr(stat, "mzxid", 0)))
        if assignment is not None and assignment.removing:
            state = replace(state, removing=assignment.removing)
        old = self.states.get((topic, index))
        if old is not None and old.zk_version > state.zk_version:
            return  # a late notification
        self.states[(topic, index)] = state
        self._apply(topic, index, state)
        for event in self._state_waiters:
            event.set()
        self.on_state_changed(state, (topic, index))

    def _apply(self, topic: str, index: int, state: PartitionState) -> None:
        try:
            granted = leadership_granted(self.replicas.broker_id, state, self.session.registered_zxid)
            if granted is not state:
                log.warning(
                    "%s-%d: epoch %d was led by this broker before it registered again: "
                    "waiting for the controller to elect a leader",
                    topic,
                    index,
                    state.leader_epoch,
                )
            self.replicas.apply_state(topic, index, granted)
        except Exception:
            log.exception("applying state of %s-%d failed", topic, index)

    async def wait_for_states(self, seconds: float) -> None:
        """Wait (at most `seconds`, at most 0.5 s) for the next partition state to arrive."""
        event = asyncio.Event()
        self._state_waiters.add(event)
        try:
            await asyncio.wait_for(event.wait(), max(0.01, min(seconds, 0.5)))
        except TimeoutError:
            pass
        finally:
            self._state_waiters.discard(event)
