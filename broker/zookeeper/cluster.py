"""ZkCluster: the broker's ClusterMetadata in ZooKeeper mode, wiring the session, the metadata
cache, the controller driver, topic creation and the fetchers together (broker.metadata)."""

from __future__ import annotations

import asyncio
import logging
import random
import uuid

from kazoo.exceptions import BadVersionError, KazooException, NoNodeError

from broker.config import BrokerConfig
from broker.fetcher import FetcherManager, FollowingBroker
from broker.metadata import BrokerAddress, TopicCreation
from broker.partition_state import PartitionState
from broker.replica_manager import ReplicaManager
from broker.replication import WriteIsr
from broker.zookeeper.cache import MetadataCache
from broker.zookeeper.controller import ControllerDriver
from broker.zookeeper.layout import encode_state, state_path
from broker.zookeeper.session import ZkSession
from broker.zookeeper.topics import ProducerIds, create_topic

log = logging.getLogger(__name__)


class ZkCluster:
    """ClusterMetadata in ZooKeeper mode (see broker.metadata.ClusterMetadata)."""

    def __init__(
        self, config: BrokerConfig, replicas: ReplicaManager, rng: random.Random | None = None
    ) -> None:
        self.config = config
        self.replicas = replicas
        self.rng = rng if rng is not None else random.Random()
        self.session = ZkSession(config, self.rng.randbytes)
        self.zk = self.session.zk
        self.cache = MetadataCache(self.session, replicas)
        self.controller = ControllerDriver(config, self.session, self.cache)
        self.fetchers = FetcherManager(FollowingBroker(config, replicas, self.brokers, self.topic_id))
        self.producer_ids = ProducerIds(self.cache, config.broker_id)
        replicas.follower_listener = self.fetchers.on_partition_state
        self.cache.on_brokers_changed = self._brokers_changed
        self.cache.on_topics_changed = self.controller.needed
        self.cache.on_state_changed = self.controller.state_changed
        self.session.on_lost = self.controller.session_lost
        self.session.on_new_session = self.controller.new_session

    def _brokers_changed(self) -> None:
        self.fetchers.brokers_changed()
        self.controller.needed()

    @property
    def is_controller(self) -> bool:
        return self.controller.is_controller

    async def start(self, advertised_port: int | None = None) -> None:
        await self.session.start(advertised_port)
        self.controller.start()
        self.cache.watch()

    async def stop(self) -> None:
        self.fetchers.stop()
        self.controller.stop()
        await self.session.stop()

    # --- ClusterMetadata --------------------------------------------------------------------------
    def brokers(self) -> dict[int, BrokerAddress]:
        return self.cache.brokers

    def controller_id(self) -> int:
        return self.controller.controller_id

    def cluster_id(self) -> str:
        return self.session.cluster_id

    def topics(self) -> dict[str, dict[int, tuple[int, ...]]]:
        return self.cache.topics

    def topic_id(self, topic: str) -> uuid.UUID:
        return self.cache.topic_ids.get(topic, uuid.UUID(int=0))

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self.cache.topic_names.get(topic_id)

    def partition_state(self, topic: str, index: int) -> PartitionState | None:
        return self.cache.states.get((topic, index))

    async def create_topic(self, creation: TopicCreation, timeout_ms: int) -> tuple[int, str | None]:
        return await create_topic(self.cache, creation, timeout_ms, self.rng)

    async def write_isr(self, topic: str, index: int, action: WriteIsr) -> int | None:
        """The leader's ISR change, compare-and-set on the version it knows; None when it lost."""
        state = self.cache.states.get((topic, index))
        controller_epoch = state.controller_epoch if state else self.controller.controller_epoch
        data = encode_state(action.state, controller_epoch)
        version = action.state.zk_version
        try:
            stat = await asyncio.to_thread(self.zk.set, state_path(topic, index), data, version)
        except (BadVersionError, NoNodeError):
            log.info("%s-%d: ISR write lost the compare-and-set (version %d)", topic, index, version)
            return None
        except KazooException as exc:
            log.warning("%s-%d: ISR write failed: %r", topic, index, exc)
            return None
        return int(stat.version)

    async def allocate_producer_id(self) -> int:
        return await self.producer_ids.allocate()
