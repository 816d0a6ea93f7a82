"""One node id for every broker (`shared.node.id`): a stand-in, made from this broker, for
third-party systems whose brokers do not know each other (stateless brokers over a shared store,
like tansu, whose every broker answers as node 111).

Each broker answers Metadata with one broker, itself, under the shared id, the leader of every
partition, its replicas and ISR the shared id once per real replica (as tansu answers), at leader
epoch -1 (so clients fence nothing by epoch: the real epochs differ per partition and broker), and
FindCoordinator with itself. Underneath, the brokers keep ZooKeeper, leaders, replication and
coordinators as ever, and broker.forwarding passes on what another broker really leads or
coordinates. So a harness sees the third-party shape (one id at several addresses, every broker
claiming every partition) while acknowledged writes stay replicated (RF 3, acks=all), and kill
and partition faults must end valid.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from broker import protocol as p
from broker.config import BrokerConfig
from broker.forwarding import Forwarder
from broker.groups.service import GroupService
from broker.handlers import ApiHandlers, Handler
from broker.kafka_errors import LEADER_NOT_AVAILABLE, NONE
from broker.metadata import BrokerAddress, ClusterMetadata
from broker.transactions.service import TxnService

log = logging.getLogger(__name__)

GROUP_APIS = (
    p.API_OFFSET_COMMIT,
    p.API_OFFSET_FETCH,
    p.API_JOIN_GROUP,
    p.API_HEARTBEAT,
    p.API_LEAVE_GROUP,
    p.API_SYNC_GROUP,
    p.API_TXN_OFFSET_COMMIT,  # kept with the group's offsets
)
TXN_APIS = (p.API_ADD_PARTITIONS_TO_TXN, p.API_ADD_OFFSETS_TO_TXN, p.API_END_TXN)


class SharedIdentity:
    """The Metadata and FindCoordinator answers under the shared id (see the module docstring)."""

    def __init__(self, config: BrokerConfig, metadata: ClusterMetadata) -> None:
        self.shared_id = config.shared_node_id
        self.config = config
        self.metadata = metadata

    def me(self) -> BrokerAddress:
        """This broker's address as registered (its advertised listener), under the shared id."""
        known = self.metadata.brokers().get(self.config.broker_id)
        advertised = self.config.advertised_listener
        host, port = (known.host, known.port) if known else (advertised.host, advertised.port)
        return BrokerAddress(self.shared_id, host, port)

    def metadata_answer(self, local: Handler) -> Handler:
        async def answer(request: p.Request) -> Any:
            data = await local(request)
            me = self.me()
            data["brokers"] = [{"node_id": me.broker_id, "host": me.host, "port": me.port, "rack": None}]
            data["controller_id"] = me.broker_id
            for topic in data["topics"]:
                for part in topic["partitions"]:
                    if part["error_code"] in (NONE, LEADER_NOT_AVAILABLE):
                        # claimed with or without a leader underneath (a request for it is then
                        # answered NOT_LEADER_OR_FOLLOWER until there is one, and clients retry);
                        # the shared id once per replica, as tansu answers: the replication
                        # factor stays visible
                        shared = [me.broker_id] * len(part["replica_nodes"])
                        part.update(
                            error_code=NONE,
                            leader_id=me.broker_id,
                            leader_epoch=-1,
                            replica_nodes=shared,
                            isr_nodes=shared,
                            offline_replicas=[],
                        )
            return data

        return answer

    def coordinator_answer(self, local: Handler) -> Handler:
        async def answer(request: p.Request) -> Any:
            data = await local(request)
            me = self.me()
            for entry in data.get("coordinators", [data]):
                if entry["error_code"] == NONE:
                    entry.update(node_id=me.broker_id, host=me.host, port=me.port)
            return data

        return answer


def install(
    handlers: ApiHandlers,
    config: BrokerConfig,
    metadata: ClusterMetadata,
    groups: GroupService,
    txns: TxnService,
) -> Forwarder:
    """Answer as the shared id and pass on what is led or coordinated elsewhere; the caller closes
    the returned Forwarder's connections when the broker stops."""
    identity = SharedIdentity(config, metadata)
    handlers.intercept(p.API_METADATA, identity.metadata_answer)
    handlers.intercept(p.API_FIND_COORDINATOR, identity.coordinator_answer)
    coordinators = {key: (lambda request: groups.coordinator_id()) for key in GROUP_APIS}
    coordinators.update({key: (lambda request: txns.coordinator_id()) for key in TXN_APIS})
    coordinators[p.API_INIT_PRODUCER_ID] = lambda request: (
        txns.coordinator_id() if request.body.transactional_id is not None else None
    )
    forwarder = Forwarder(config.broker_id, metadata, coordinators)
    for api_key in (
        p.API_PRODUCE,
        p.API_FETCH,
        p.API_LIST_OFFSETS,
        p.API_OFFSET_FOR_LEADER_EPOCH,
        *coordinators,
    ):
        handlers.intercept(api_key, functools.partial(forwarder.wrap, api_key))
    log.info(
        "broker %d answers as node %d, alone, leader of every partition",
        config.broker_id,
        config.shared_node_id,
    )
    return forwarder
