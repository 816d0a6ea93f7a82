"""ZooKeeper mode (kazoo): registration, metadata cache via watches, the controller, ISR writes.

Kafka's ZooKeeper layout:
  /brokers/ids/<id>                          ephemeral, {"host", "port", "endpoints", ...}
  /controller                                ephemeral, {"version":1,"brokerid":N,"timestamp":..}
  /controller_epoch                          "N"
  /brokers/topics/<t>                        {"version":2,"partitions":{"0":[1,2,3]}, ...}
  /brokers/topics/<t>/partitions/<p>/state   {"controller_epoch","leader","version":1,"leader_epoch","isr"}
  /latest_producer_id_block                  {"version":1,"broker":N,"block_start":"..","block_end":".."}
  /cluster/id                                {"version":"1","id":".."}

Every broker watches broker registrations, topics and every partition state, and pushes states
into the ReplicaManager. The broker holding /controller creates states for new topics and elects
leaders for partitions whose leader is gone (broker.controller decides; this module writes, always
compare-and-set on the znode version). Dead followers are not removed from the ISR by the
controller: the leader shrinks the ISR after replica.lag.time.max.ms (docs/broker-variants.md).
Kazoo runs its callbacks on its own threads; they only post to the asyncio loop.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from broker import protocol as p
from broker.client import BrokerConnection
from broker.config import BrokerConfig
from broker.controller import elect_leader, initial_state, needs_election
from broker.errors import BrokerUnavailable
from broker.fetcher import FetcherManager
from broker.metadata import (
    INVALID_REPLICA_ASSIGNMENT,
    INVALID_REPLICATION_FACTOR,
    TOPIC_ALREADY_EXISTS,
    BrokerAddress,
    TopicCreation,
    assign_replicas,
)
from broker.replica_manager import PartitionState, ReplicaManager
from broker.replication import WriteIsr

log = logging.getLogger(__name__)

IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
CLUSTER_ID = "/cluster/id"
PRODUCER_ID_BLOCK_SIZE = 1000
RECONCILE_SECONDS = 5.0
REQUEST_TIMED_OUT = 7


def state_path(topic: str, index: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{index}/state"


def encode_state(leader: int, leader_epoch: int, isr: tuple[int, ...], controller_epoch: int) -> bytes:
    return json.dumps(
        {
            "controller_epoch": controller_epoch,
            "leader": leader,
            "version": 1,
            "leader_epoch": leader_epoch,
            "isr": list(isr),
        }
    ).encode()


def _json(data: bytes | None) -> Any:
    if not data:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None


class ZkCluster:
    """ClusterMetadata in ZooKeeper mode (see broker.metadata.ClusterMetadata)."""

    def __init__(self, config: BrokerConfig, replicas: ReplicaManager) -> None:
        self.config = config
        self.replicas = replicas
        self.zk = KazooClient(
            hosts=config.zookeeper_connect,
            timeout=config.zookeeper_session_timeout_ms / 1000.0,
            connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 1.0},
            command_retry={"max_tries": 3, "delay": 0.1, "max_delay": 1.0},
        )
        self.loop: asyncio.AbstractEventLoop | None = None
        self._brokers: dict[int, BrokerAddress] = {}
        self._topics: dict[str, dict[int, tuple[int, ...]]] = {}
        self._topic_ids: dict[str, uuid.UUID] = {}
        self._states: dict[tuple[str, int], PartitionState] = {}
        self._watched_topics: set[str] = set()
        self._controller_id = -1
        self._cluster_id = ""
        self._registration: bytes = b""
        self._advertised = config.advertised_listener
        self._state_waiters: set[asyncio.Event] = set()
        self.is_controller = False
        self.controller_epoch = 0
        self._reconcile_needed = asyncio.Event()
        self._controller_task: asyncio.Task[None] | None = None
        self._producer_ids: list[int] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._brokers_lock = asyncio.Lock()
        self._session_lost = False
        self._stopping = False
        self.fetchers = FetcherManager(config, replicas, self.brokers)
        replicas.follower_listener = self.fetchers.on_partition_state

    # --- lifecycle --------------------------------------------------------------------------------
    async def start(self, advertised_port: int | None = None) -> None:
        self.loop = asyncio.get_running_loop()
        if advertised_port is not None:
            self._advertised = type(self._advertised)(self._advertised.host, advertised_port)
        started = time.monotonic()
        await self._connect()
        log.info("ZooKeeper session established in %.2fs", time.monotonic() - started)
        self.zk.add_listener(self._on_connection_state)
        await asyncio.to_thread(self._bootstrap_paths)
        await asyncio.to_thread(self._register)
        log.info("joined the cluster %.2fs after connecting to ZooKeeper", time.monotonic() - started)
        self._controller_task = asyncio.create_task(self._controller_loop())
        # Watches last for the client's life (kazoo re-arms them across sessions).
        ChildrenWatch(self.zk, IDS, lambda ids: self._post(self._on_broker_ids, list(ids)))
        ChildrenWatch(self.zk, TOPICS, lambda names: self._post(self._on_topics, list(names)))
        DataWatch(self.zk, CONTROLLER, lambda data, stat: self._post(self._on_controller, data))

    async def _connect(self, patience_s: float = 120.0) -> None:
        """Wait for ZooKeeper (it may start after us); give up with one clear line."""
        deadline = time.monotonic() + patience_s
        while True:
            try:
                await asyncio.to_thread(self.zk.start, 5.0)
                return
            except Exception as exc:  # kazoo raises a timeout of its handler's type
                if time.monotonic() > deadline:
                    raise BrokerUnavailable(
                        f"cannot reach ZooKeeper at {self.config.zookeeper_connect} for {patience_s:g}s"
                    ) from exc
                log.warning("ZooKeeper at %s not reachable yet: %r", self.config.zookeeper_connect, exc)

    async def stop(self) -> None:
        self._stopping = True
        self.fetchers.stop()
        if self._controller_task is not None:
            self._controller_task.cancel()
        try:
            await asyncio.to_thread(self.zk.stop)
            await asyncio.to_thread(self.zk.close)
        except Exception:
            log.debug("closing the ZooKeeper client", exc_info=True)

    def _post(self, fn: Callable[..., Any], *args: Any) -> None:
        loop = self.loop
        if loop is not None and not loop.is_closed() and not self._stopping:
            loop.call_soon_threadsafe(fn, *args)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("ZooKeeper task failed", exc_info=task.exception())

    def _on_connection_state(self, state: str) -> None:
        # kazoo thread: no blocking calls here
        if state == KazooState.LOST:
            log.warning("ZooKeeper session lost")
            self._session_lost = True
            self._post(self._lost_session)
        elif state == KazooState.CONNECTED and self._session_lost:
            self._session_lost = False
            log.warning("ZooKeeper reconnected with a new session: registering again")
            self._post(self._spawn, asyncio.to_thread(self._register))
            self._post(self._spawn, self._elect_controller())

    def _lost_session(self) -> None:
        if self.is_controller:
            log.warning("no longer controller (session lost)")
        self.is_controller = False

    # --- bootstrap and registration ---------------------------------------------------------------
    def _bootstrap_paths(self) -> None:
        for path in (IDS, TOPICS):
            self.zk.ensure_path(path)
        try:
            self.zk.create(
                CLUSTER_ID, json.dumps({"version": "1", "id": _new_cluster_id()}).encode(), makepath=True
            )
        except NodeExistsError:
            pass
        data, _ = self.zk.get(CLUSTER_ID)
        self._cluster_id = (_json(data) or {}).get("id", "")

    def _register(self) -> None:
        host, port = self._advertised.host, self._advertised.port
        self._registration = json.dumps(
            {
                "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
                "endpoints": [f"PLAINTEXT://{host}:{port}"],
                "jmx_port": -1,
                "features": {},
                "host": host,
                "timestamp": str(int(time.time() * 1000)),
                "port": port,
                "version": 5,
            }
        ).encode()
        path = f"{IDS}/{self.config.broker_id}"
        for _ in range(100):
            try:
                self.zk.create(path, self._registration, ephemeral=True, makepath=True)
                log.info("registered as broker %d at %s:%d", self.config.broker_id, host, port)
                return
            except NodeExistsError:
                try:
                    _, stat = self.zk.get(path)
                except NoNodeError:
                    continue
                if stat.ephemeralOwner == self.zk.client_id[0]:
                    return
                # A previous incarnation of this broker (killed) still holds the node until its
                # session expires; take it over so a restart is quick (see docs/broker-variants.md).
                log.warning(
                    "taking over the registration of a previous incarnation of broker %d",
                    self.config.broker_id,
                )
                try:
                    self.zk.delete(path, version=stat.version)
                except (NoNodeError, BadVersionError):
                    pass
        raise RuntimeError(f"could not register {path}")

    # --- ClusterMetadata --------------------------------------------------------------------------
    def brokers(self) -> dict[int, BrokerAddress]:
        return self._brokers

    def controller_id(self) -> int:
        return self._controller_id

    def cluster_id(self) -> str:
        return self._cluster_id

    def topics(self) -> dict[str, dict[int, tuple[int, ...]]]:
        return self._topics

    def topic_id(self, topic: str) -> uuid.UUID:
        return self._topic_ids.get(topic, uuid.UUID(int=0))

    def partition_state(self, topic: str, index: int) -> PartitionState | None:
        return self._states.get((topic, index))

    async def create_topic(self, creation: TopicCreation, timeout_ms: int) -> tuple[int, str | None]:
        live = sorted(self._brokers)
        if creation.name in self._topics:
            return TOPIC_ALREADY_EXISTS, f"Topic '{creation.name}' already exists."
        if creation.assignment is None:
            if creation.replication_factor > len(live):
                return (
                    INVALID_REPLICATION_FACTOR,
                    f"Replication factor: {creation.replication_factor} larger than available brokers: {len(live)}.",
                )
            assignment = assign_replicas(live, creation.num_partitions, creation.replication_factor)
        else:
            assignment = creation.assignment
            if sorted(assignment) != list(range(len(assignment))) or any(
                len(set(r)) != len(r) or not r for r in assignment.values()
            ):
                return INVALID_REPLICA_ASSIGNMENT, "partitions must be 0..n-1, each with distinct brokers"
        topic_id = uuid.uuid4()
        data = json.dumps(
            {
                "version": 3,
                "topic_id": base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("="),
                "partitions": {str(p): list(r) for p, r in assignment.items()},
                "adding_replicas": {},
                "removing_replicas": {},
            }
        ).encode()
        try:
            await asyncio.to_thread(self.zk.create, f"{TOPICS}/{creation.name}", data, makepath=True)
        except NodeExistsError:
            return TOPIC_ALREADY_EXISTS, f"Topic '{creation.name}' already exists."
        log.info("created topic %s with assignment %s", creation.name, assignment)
        # Kafka answers once the controller has elected leaders; wait for the states (bounded).
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000.0
        while time.monotonic() < deadline:
            states = [self._states.get((creation.name, p)) for p in assignment]
            if all(s is not None and s.leader >= 0 for s in states):
                return 0, None
            await self._wait_for_states(deadline - time.monotonic())
        if timeout_ms <= 0:
            return 0, None
        return REQUEST_TIMED_OUT, "topic created; leaders not elected within the timeout"

    async def _wait_for_states(self, seconds: float) -> None:
        event = asyncio.Event()
        self._state_waiters.add(event)
        try:
            await asyncio.wait_for(event.wait(), max(0.01, min(seconds, 0.5)))
        except TimeoutError:
            pass
        finally:
            self._state_waiters.discard(event)

    async def write_isr(self, topic: str, index: int, action: WriteIsr) -> int | None:
        state = self._states.get((topic, index))
        controller_epoch = state.controller_epoch if state else self.controller_epoch
        data = encode_state(self.config.broker_id, action.leader_epoch, action.isr, controller_epoch)
        try:
            stat = await asyncio.to_thread(self.zk.set, state_path(topic, index), data, action.zk_version)
        except (BadVersionError, NoNodeError):
            log.info(
                "%s-%d: ISR write lost the compare-and-set (version %d)", topic, index, action.zk_version
            )
            return None
        except KazooException as exc:
            log.warning("%s-%d: ISR write failed: %r", topic, index, exc)
            return None
        return int(stat.version)

    async def allocate_producer_id(self) -> int:
        if not self._producer_ids:
            start = await asyncio.to_thread(self._claim_producer_id_block)
            self._producer_ids = list(range(start + PRODUCER_ID_BLOCK_SIZE - 1, start - 1, -1))
        return self._producer_ids.pop()

    def _claim_producer_id_block(self) -> int:
        while True:
            try:
                data, stat = self.zk.get(PRODUCER_ID_BLOCK)
            except NoNodeError:
                data, stat = None, None
            current = _json(data)
            start = int(current["block_end"]) + 1 if current else 0
            block = json.dumps(
                {
                    "version": 1,
                    "broker": self.config.broker_id,
                    "block_start": str(start),
                    "block_end": str(start + PRODUCER_ID_BLOCK_SIZE - 1),
                }
            ).encode()
            try:
                if stat is None:
                    self.zk.create(PRODUCER_ID_BLOCK, block)
                else:
                    self.zk.set(PRODUCER_ID_BLOCK, block, version=stat.version)
                return start
            except (NodeExistsError, BadVersionError):
                continue

    # --- watches (on the loop) --------------------------------------------------------------------
    def _on_broker_ids(self, ids: list[str]) -> None:
        self._spawn(self._refresh_brokers())

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
                info = _json(data) or {}
                if "host" in info and "port" in info:
                    fresh[broker_id] = BrokerAddress(broker_id, info["host"], int(info["port"]))
            if set(fresh) != set(self._brokers):
                log.info("live brokers: %s", sorted(fresh))
            self._brokers = fresh
        self.fetchers.brokers_changed()
        self._reconcile_needed.set()

    def _on_topics(self, names: list[str]) -> None:
        for name in names:
            if name not in self._watched_topics:
                self._watched_topics.add(name)
                self._spawn(self._watch_topic(name))

    async def _watch_topic(self, name: str) -> None:
        try:
            data, _ = await asyncio.to_thread(self.zk.get, f"{TOPICS}/{name}")
        except NoNodeError:
            self._watched_topics.discard(name)
            return
        info = _json(data) or {}
        assignment = {int(k): tuple(int(b) for b in v) for k, v in (info.get("partitions") or {}).items()}
        self._topics[name] = assignment
        raw_id = str(info.get("topic_id") or "")
        try:
            self._topic_ids[name] = uuid.UUID(
                bytes=base64.urlsafe_b64decode(raw_id + "=" * (-len(raw_id) % 4))
            )
        except (TypeError, ValueError):
            self._topic_ids[name] = uuid.uuid5(uuid.NAMESPACE_URL, f"strandline:{name}")
        for index in assignment:
            path = state_path(name, index)
            await asyncio.to_thread(DataWatch, self.zk, path, self._state_callback(name, index))
        self._reconcile_needed.set()

    def _state_callback(self, topic: str, index: int) -> Callable[[bytes | None, Any], None]:
        # exactly two parameters: kazoo passes a third (the event) to functions that take more
        def callback(data: bytes | None, stat: Any) -> None:
            self._post(self._on_state, topic, index, data, stat)

        return callback

    def _on_state(self, topic: str, index: int, data: bytes | None, stat: Any) -> None:
        info = _json(data)
        if info is None or stat is None:
            self._states.pop((topic, index), None)
            self._reconcile_needed.set()
            return
        replicas = self._topics.get(topic, {}).get(index, ())
        state = PartitionState(
            leader=int(info.get("leader", -1)),
            leader_epoch=int(info.get("leader_epoch", 0)),
            isr=tuple(int(b) for b in info.get("isr", [])),
            replicas=replicas,
            zk_version=int(stat.version),
            controller_epoch=int(info.get("controller_epoch", 0)),
        )
        old = self._states.get((topic, index))
        if old is not None and old.zk_version > state.zk_version:
            return  # a late notification
        self._states[(topic, index)] = state
        try:
            self.replicas.apply_state(topic, index, state)
        except Exception:
            log.exception("applying state of %s-%d failed", topic, index)
        for event in self._state_waiters:
            event.set()
        if self.is_controller and needs_election(state.leader, self._brokers):
            self._reconcile_needed.set()

    # --- controller -------------------------------------------------------------------------------
    def _on_controller(self, data: bytes | None) -> None:
        info = _json(data)
        if info is None:
            self._controller_id = -1
            self._spawn(self._elect_controller())
            return
        self._controller_id = int(info.get("brokerid", -1))
        if self._controller_id != self.config.broker_id and self.is_controller:
            log.warning("controller is now %d; resigning", self._controller_id)
            self.is_controller = False

    async def _elect_controller(self) -> None:
        data = json.dumps(
            {"version": 1, "brokerid": self.config.broker_id, "timestamp": str(int(time.time() * 1000))}
        ).encode()
        try:
            await asyncio.to_thread(self.zk.create, CONTROLLER, data, ephemeral=True)
        except NodeExistsError:
            return
        except Exception:
            log.exception("controller election failed")
            return
        self.controller_epoch = await asyncio.to_thread(self._bump_controller_epoch)
        self._controller_id = self.config.broker_id
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

    async def _controller_loop(self) -> None:
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
        live = {int(i) for i in await asyncio.to_thread(self.zk.get_children, IDS) if i.isdigit()}
        retry = False
        for topic, assignment in list(self._topics.items()):
            for index, replicas in assignment.items():
                if not self.is_controller:
                    return False
                state = self._states.get((topic, index))
                if state is None:
                    retry |= not await self._create_state(topic, index, replicas, live)
                elif needs_election(state.leader, live):
                    retry |= not await self._elect(topic, index, state, replicas, live)
        return retry

    async def _create_state(self, topic: str, index: int, replicas: tuple[int, ...], live: set[int]) -> bool:
        choice = initial_state(replicas, live)
        data = encode_state(choice.leader, 0, choice.isr, self.controller_epoch)
        try:
            await asyncio.to_thread(self.zk.create, state_path(topic, index), data, makepath=True)
            log.info("%s-%d: created, leader %d, isr %s", topic, index, choice.leader, list(choice.isr))
        except NodeExistsError:
            pass  # the watch will deliver it
        return True

    async def _elect(
        self, topic: str, index: int, state: PartitionState, replicas: tuple[int, ...], live: set[int]
    ) -> bool:
        log_ends = None
        if self.config.election_policy == "longest-log":
            candidates = [r for r in replicas if r in live]
            log_ends = await self._log_end_offsets(topic, index, candidates)
        choice = elect_leader(
            replicas=replicas,
            isr=state.isr,
            live=live,
            unclean_allowed=self.config.unclean_leader_election,
            policy=self.config.election_policy,
            log_ends=log_ends,
        )
        if choice.leader < 0 and state.leader < 0:
            return True  # still offline; a returning ISR member will trigger another pass
        new_epoch = state.leader_epoch + 1
        data = encode_state(choice.leader, new_epoch, choice.isr, self.controller_epoch)
        try:
            await asyncio.to_thread(self.zk.set, state_path(topic, index), data, state.zk_version)
        except (BadVersionError, NoNodeError):
            return False
        log.warning(
            "%s-%d: %s election: leader %d -> %d, epoch %d, isr %s%s",
            topic,
            index,
            "unclean" if choice.unclean else "clean",
            state.leader,
            choice.leader,
            new_epoch,
            list(choice.isr),
            f", log ends {log_ends}" if log_ends else "",
        )
        return True

    async def _log_end_offsets(self, topic: str, index: int, candidates: list[int]) -> dict[int, int]:
        """Ask each candidate its log end offset (ListOffsets latest with the debug replica id)."""

        async def ask(broker_id: int) -> tuple[int, int]:
            address = self._brokers.get(broker_id)
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


def _new_cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
