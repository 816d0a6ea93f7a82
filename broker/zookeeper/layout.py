"""Kafka's ZooKeeper layout: the paths and the JSON the brokers write and read there.

/brokers/ids/<id>                          ephemeral, {"host", "port", "endpoints", ...}
/controller                                ephemeral, {"version":1,"brokerid":N,"timestamp":..}
/controller_epoch                          "N"
/brokers/topics/<t>                        {"version":3,"topic_id":..,"partitions":{"0":[1,2,3]},
                                            "adding_replicas":{..},"removing_replicas":{..}}
/brokers/topics/<t>/partitions/<p>/state   {"controller_epoch","leader","version":1,"leader_epoch","isr"}
/latest_producer_id_block                  {"version":1,"broker":N,"block_start":"..","block_end":".."}
/cluster/id                                {"version":"1","id":".."}
/admin/reassign_partitions                 {"version":1,"partitions":[{"topic","partition","replicas"}]}
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Mapping
from typing import Any

from broker.partition_state import LeaderAndIsr, PartitionState
from broker.reassignment import ReplicaAssignment

IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
CLUSTER_ID = "/cluster/id"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"


def state_path(topic: str, index: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{index}/state"


def encode_state(state: LeaderAndIsr, controller_epoch: int) -> bytes:
    """The state znode's JSON (its version and mzxid are ZooKeeper's, not in it)."""
    info: dict[str, Any] = {
        "controller_epoch": controller_epoch,
        "leader": state.leader,
        "version": 1,
        "leader_epoch": state.leader_epoch,
        "isr": list(state.isr),
    }
    if state.elr:  # KIP-966 (Kafka keeps it in KRaft's PartitionRecord; ZooKeeper-mode has none)
        info["eligible_leader_replicas"] = list(state.elr)
    return json.dumps(info).encode()


def decode_state(
    info: dict[str, Any], replicas: tuple[int, ...], zk_version: int, written: int = 0
) -> PartitionState:
    return PartitionState(
        leader=int(info.get("leader", -1)),
        leader_epoch=int(info.get("leader_epoch", 0)),
        isr=tuple(int(b) for b in info.get("isr", [])),
        replicas=replicas,
        zk_version=zk_version,
        controller_epoch=int(info.get("controller_epoch", 0)),
        written=written,
        elr=tuple(int(b) for b in info.get("eligible_leader_replicas", [])),
    )


def encode_topic(
    topic_id: uuid.UUID,
    assignment: Mapping[int, tuple[int, ...]],
    adding: Mapping[int, tuple[int, ...]] | None = None,
    removing: Mapping[int, tuple[int, ...]] | None = None,
) -> bytes:
    """Kafka's topic znode (version 3): the replicas of each partition and, for partitions being
    reassigned (KIP-455), the adding and removing replicas among them."""
    return json.dumps(
        {
            "version": 3,
            "topic_id": base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("="),
            "partitions": {str(p): list(r) for p, r in assignment.items()},
            "adding_replicas": {str(p): list(r) for p, r in (adding or {}).items() if r},
            "removing_replicas": {str(p): list(r) for p, r in (removing or {}).items() if r},
        }
    ).encode()


def encode_assignments(topic_id: uuid.UUID, assignments: Mapping[int, ReplicaAssignment]) -> bytes:
    return encode_topic(
        topic_id,
        {p: a.replicas for p, a in assignments.items()},
        {p: a.adding for p, a in assignments.items()},
        {p: a.removing for p, a in assignments.items()},
    )


def decode_topic(name: str, info: dict[str, Any]) -> tuple[uuid.UUID, dict[int, tuple[int, ...]]]:
    """(topic id, assignment); a topic written without an id gets a stable one from its name."""
    topic_id, assignments = decode_assignments(name, info)
    return topic_id, {p: a.replicas for p, a in assignments.items()}


def decode_assignments(name: str, info: dict[str, Any]) -> tuple[uuid.UUID, dict[int, ReplicaAssignment]]:
    """(topic id, each partition's replicas with the adding and removing ones of a reassignment)."""

    def by_partition(field: str) -> dict[int, tuple[int, ...]]:
        raw = info.get(field) or {}
        return {int(k): tuple(int(b) for b in v) for k, v in raw.items()} if isinstance(raw, dict) else {}

    replicas, adding, removing = (
        by_partition(f) for f in ("partitions", "adding_replicas", "removing_replicas")
    )
    raw_id = str(info.get("topic_id") or "")
    try:
        topic_id = uuid.UUID(bytes=base64.urlsafe_b64decode(raw_id + "=" * (-len(raw_id) % 4)))
    except (TypeError, ValueError):
        topic_id = uuid.uuid5(uuid.NAMESPACE_URL, f"strandline:{name}")
    assignments = {
        p: ReplicaAssignment(r, adding.get(p, ()), removing.get(p, ())) for p, r in replicas.items()
    }
    return topic_id, assignments


def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    return json.dumps({"version": 1, "brokerid": broker_id, "timestamp": str(timestamp_ms)}).encode()


def new_cluster_id(random_bytes: bytes) -> str:
    return base64.urlsafe_b64encode(random_bytes).decode().rstrip("=")


def parse_json(data: bytes | None) -> Any:
    if not data:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None
