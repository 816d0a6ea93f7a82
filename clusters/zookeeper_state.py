"""A cluster's state as ZooKeeper-mode Kafka keeps it in ZooKeeper, read (and reassignments
written) by the controller with a kazoo client of its own.

Brokers register under /brokers/ids (ephemeral: a killed broker's node lives on until its session
times out, so a restarted one is registered anew once another session owns it); each partition's
leader, epoch and ISR are in /brokers/topics/<t>/partitions/<p>/state, its replicas in the topic
znode, the active controller in /controller. Partitions move the way an operator moved them on
ZooKeeper-mode Kafka: the target replicas are written to /admin/reassign_partitions (as
`kafka-reassign-partitions.sh --zookeeper` did) and the controller carries the move out; it is
finished when the partition has left that znode and its topic znode lists no adding or removing
replicas.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from broker.reassignment import encode_request, parse_request
from foundation.errors import InfrastructureError

log = logging.getLogger(__name__)

BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
CONTROLLER = "/controller"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"  # Kafka's ZooKeeper path (broker/zookeeper/layout.py)


class ZookeeperState:
    """Reads of ZooKeeper at `connect()` whose failure is one clear error; broker ids are named
    as nodes by `node_of_broker`."""

    def __init__(self, connect: Callable[[], str], node_of_broker: Callable[[int], str | None]) -> None:
        self.connect = connect
        self.node_of_broker = node_of_broker
        self._zk: Any = None  # a kazoo client, connected on first use
        self._lock = threading.Lock()
        self._stale_sessions: dict[int, int | None] = {}  # broker id -> session of its last process

    def client(self) -> Any:
        """A connected kazoo client."""
        from kazoo.client import KazooClient

        with self._lock:
            if self._zk is None:
                quiet = logging.getLogger("strandline.kazoo")
                quiet.setLevel(logging.ERROR)
                client = KazooClient(hosts=self.connect(), timeout=10.0, logger=quiet)
                try:
                    client.start(timeout=10.0)
                except Exception as e:
                    client.close()
                    raise InfrastructureError(f"cannot reach ZooKeeper at {self.connect()}: {e}") from None
                self._zk = client
            return self._zk

    def close(self) -> None:
        with self._lock:
            if self._zk is not None:
                try:
                    self._zk.stop()
                    self._zk.close()
                except Exception as e:  # a client of a dead server: nothing left to do
                    log.debug("closing the ZooKeeper client: %s", e)
                self._zk = None

    def read(self, what: str, read: Callable[[Any], Any]) -> Any:
        """A ZooKeeper read whose failure (connection loss, timeout) is one clear error."""
        from kazoo.exceptions import KazooException

        try:
            return read(self.client())
        except KazooException as e:
            raise InfrastructureError(
                f"reading {what} from ZooKeeper at {self.connect()}: {type(e).__name__} {e}"
            ) from None

    # --- the registry ---------------------------------------------------------------------------

    def registered_brokers(self) -> list[int]:
        def read(zk: Any) -> list[int]:
            if not zk.exists(BROKER_IDS):
                return []
            return sorted(int(i) for i in zk.get_children(BROKER_IDS))

        return self.read(BROKER_IDS, read)  # type: ignore[no-any-return]

    def registration_owner(self, broker_id: int) -> int | None:
        """The ZooKeeper session that holds /brokers/ids/<id> now (None: not registered)."""

        def read(zk: Any) -> int | None:
            stat = zk.exists(f"{BROKER_IDS}/{broker_id}")
            return int(stat.ephemeralOwner) if stat else None

        return self.read(f"{BROKER_IDS}/{broker_id}", read)  # type: ignore[no-any-return]

    def starting(self, broker_id: int, *, fresh: bool) -> None:
        """A broker is about to start: remember which session holds its registration now, so that
        readiness waits for a new one (`fresh`: there is no earlier registration to outwait)."""
        self._stale_sessions[broker_id] = None
        if not fresh:
            try:
                self._stale_sessions[broker_id] = self.registration_owner(broker_id)
            except InfrastructureError as e:  # unreachable: readiness is then port + registration
                log.debug("registration of broker %d unknown before start: %s", broker_id, e)

    def registered_anew(self, broker_id: int) -> bool:
        """Registered by a session other than the one of the broker's previous (killed) process:
        a killed broker's ephemeral node lives on until its session times out."""
        owner = self.registration_owner(broker_id)
        return owner is not None and owner != self._stale_sessions.get(broker_id)

    # --- leaders --------------------------------------------------------------------------------

    def partition_state(self) -> dict[tuple[str, int], dict[str, object]]:
        return self.read("partition states", self._partition_state)  # type: ignore[no-any-return]

    def _partition_state(self, zk: Any) -> dict[tuple[str, int], dict[str, object]]:
        from kazoo.exceptions import NoNodeError

        result: dict[tuple[str, int], dict[str, object]] = {}
        try:
            topics = sorted(zk.get_children(TOPICS))
        except NoNodeError:
            return result
        for topic in topics:
            replicas = topic_replicas(zk, topic)
            path = f"{TOPICS}/{topic}/partitions"
            try:  # a topic being created may not have its partitions (or their states) yet
                partitions = sorted(zk.get_children(path), key=int)
            except NoNodeError:
                continue
            for p in partitions:
                try:
                    data, _stat = zk.get(f"{path}/{p}/state")
                except NoNodeError:
                    continue
                state = json.loads(data)
                leader = int(state.get("leader", -1))
                result[(topic, int(p))] = {
                    "leader": self.node_of_broker(leader) if leader >= 0 else None,
                    "leader_epoch": int(state.get("leader_epoch", -1)),
                    "isr": [self.node_of_broker(int(b)) or str(b) for b in state.get("isr", [])],
                    "controller_epoch": state.get("controller_epoch"),
                    "replicas": [self.node_of_broker(b) or str(b) for b in replicas.get(int(p), ())],
                }
        return result

    def controller(self) -> str | None:
        return self.read("the controller", self._controller)  # type: ignore[no-any-return]

    def _controller(self, zk: Any) -> str | None:
        from kazoo.exceptions import NoNodeError

        try:
            data, _stat = zk.get(CONTROLLER)
        except NoNodeError:
            return None
        try:
            broker_id = int(json.loads(data)["brokerid"])
        except (ValueError, KeyError, TypeError):
            return None
        return self.node_of_broker(broker_id)

    # --- assignments ----------------------------------------------------------------------------

    def assignment(self) -> dict[tuple[str, int], list[str]]:
        def read(zk: Any) -> dict[tuple[str, int], list[str]]:
            if not zk.exists(TOPICS):
                return {}
            found: dict[tuple[str, int], list[str]] = {}
            for topic in sorted(zk.get_children(TOPICS)):
                for index, replicas in topic_replicas(zk, topic).items():
                    found[(topic, index)] = [self.node_of_broker(b) or str(b) for b in replicas]
            return found

        return self.read("the partition assignment", read)  # type: ignore[no-any-return]

    def reassign(self, by_id: dict[tuple[str, int], tuple[int, ...]]) -> None:
        """Add these targets to /admin/reassign_partitions (created, or updated by compare-and-set)."""

        def write(zk: Any) -> None:
            from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

            for _ in range(20):
                try:
                    data, stat = zk.get(REASSIGN_PARTITIONS)
                except NoNodeError:
                    try:
                        zk.create(
                            REASSIGN_PARTITIONS, json.dumps(encode_request(by_id)).encode(), makepath=True
                        )
                        return
                    except NodeExistsError:
                        continue
                pending, _ = parse_request(json.loads(data or b"{}"))
                try:
                    merged = encode_request({**pending, **by_id})
                    zk.set(REASSIGN_PARTITIONS, json.dumps(merged).encode(), stat.version)
                    return
                except (BadVersionError, NoNodeError):
                    continue
            raise InfrastructureError(f"could not write {REASSIGN_PARTITIONS}: it kept changing")

        self.read(REASSIGN_PARTITIONS, write)

    def reassigning(self) -> list[tuple[str, int]]:
        def read(zk: Any) -> list[tuple[str, int]]:
            from kazoo.exceptions import NoNodeError

            pending: set[tuple[str, int]] = set()
            try:
                data, _stat = zk.get(REASSIGN_PARTITIONS)
                pending |= set(parse_request(json.loads(data or b"{}"))[0])
            except NoNodeError:
                pass
            if zk.exists(TOPICS):
                for topic in zk.get_children(TOPICS):
                    try:
                        info = json.loads(zk.get(f"{TOPICS}/{topic}")[0] or b"{}")
                    except NoNodeError:
                        continue
                    for field in ("adding_replicas", "removing_replicas"):
                        pending |= {(topic, int(p)) for p, r in (info.get(field) or {}).items() if r}
            return sorted(pending)

        return self.read("reassignments in progress", read)  # type: ignore[no-any-return]


def topic_replicas(zk: Any, topic: str) -> dict[int, tuple[int, ...]]:
    """Each partition's replicas in the topic znode (RS: during a reassignment, TRS + ORS)."""
    from kazoo.exceptions import NoNodeError

    try:
        data, _stat = zk.get(f"{TOPICS}/{topic}")
    except NoNodeError:
        return {}
    info = json.loads(data or b"{}")
    return {int(p): tuple(int(b) for b in r) for p, r in (info.get("partitions") or {}).items()}


class ReadsZookeeper:
    """HasLeaders and the broker registry of a system whose state is read from ZooKeeper
    (`state = "zookeeper"` in its definition); the system holds the reader as `zookeeper_state`."""

    zookeeper_state: ZookeeperState

    def partition_state(self) -> dict[tuple[str, int], dict[str, object]]:
        return self.zookeeper_state.partition_state()

    def leaders(self) -> dict[tuple[str, int], str | None]:
        return {tp: s["leader"] for tp, s in self.partition_state().items()}  # type: ignore[misc]

    def controller(self) -> str | None:
        return self.zookeeper_state.controller()

    def registered_brokers(self) -> list[int]:
        return self.zookeeper_state.registered_brokers()
