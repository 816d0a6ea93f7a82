"""Wiring: load logs, start the server, join the cluster (or run standalone), run the timers."""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import Any

from broker.config import BrokerConfig
from broker.forwarding import Forwarder
from broker.groups.service import GroupService
from broker.groups.service import install as install_group_apis
from broker.handlers import ApiHandlers
from broker.metadata import BrokerAddress, ClusterMetadata, StandaloneMetadata
from broker.replica_manager import ReplicaManager
from broker.server import BrokerServer
from broker.transactions.service import TxnService
from broker.transactions.service import install as install_txn_apis
from broker.watchdog import LoopWatchdog

log = logging.getLogger(__name__)

TICK_SECONDS = 0.2


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.replicas = ReplicaManager(config)
        self.metadata: ClusterMetadata | None = None
        self.server: BrokerServer | None = None
        self.cluster: Any = None  # broker.zookeeper.ZkCluster in ZooKeeper mode
        self.groups: GroupService | None = None
        self.txns: TxnService | None = None
        self.forwarder: Forwarder | None = None  # shared.node.id: requests passed on to other brokers
        self._stop = asyncio.Event()
        self._timers: list[asyncio.Task[None]] = []
        self.watchdog = LoopWatchdog()

    async def start(self) -> None:
        config = self.config
        self.watchdog.start()
        self.replicas.load_logs()
        if config.zookeeper_connect:
            from broker.zookeeper import ZkCluster

            self.cluster = ZkCluster(config, self.replicas)
            metadata: ClusterMetadata = self.cluster
        else:
            advertised = config.advertised_listener
            metadata = StandaloneMetadata(
                self.replicas, BrokerAddress(config.broker_id, advertised.host, advertised.port)
            )
        self.metadata = metadata
        self.replicas.isr_writer = metadata.write_isr
        handlers = ApiHandlers(config, self.replicas, metadata)
        zk = self.cluster.zk if self.cluster is not None else None
        self.groups, group_ticks = install_group_apis(handlers, config, metadata, zk)
        self._timers.append(group_ticks)  # cancelled with the broker's other timers on stop
        self.txns, txn_timeouts = install_txn_apis(handlers, config, metadata, self.groups)
        self._timers.append(txn_timeouts)
        if config.shared_node_id >= 0:
            from broker.shared_identity import install as install_shared_identity

            self.forwarder = install_shared_identity(handlers, config, metadata, self.groups, self.txns)
        handlers.withdraw(config.unsupported_apis)
        handlers.deny(config.denied_apis)
        self.server = BrokerServer(handlers, config.listener, config.socket_request_max_bytes)
        await self.server.start()
        if self.cluster is not None:
            await self.cluster.start(advertised_port=self.server.port if config.advertised is None else None)
        elif isinstance(metadata, StandaloneMetadata) and config.listener.port == 0:
            metadata._address = BrokerAddress(config.broker_id, config.listener.host, self.server.port)
        self._timers.append(asyncio.create_task(self._every(TICK_SECONDS, self.replicas.tick)))
        self._timers.append(
            asyncio.create_task(
                self._every(
                    config.hw_checkpoint_interval_ms / 1000.0, self.replicas.checkpoint_high_watermarks
                )
            )
        )
        log.info("broker %d started on %s:%d", config.broker_id, config.listener.host, self.server.port)

    async def _every(self, seconds: float, action: Any) -> None:
        while True:
            await asyncio.sleep(seconds)
            try:
                action()
            except Exception:
                log.exception("periodic %s failed", getattr(action, "__name__", action))

    def request_stop(self) -> None:
        self._stop.set()

    async def run_until_stopped(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop)
        await self.start()
        await self._stop.wait()
        await self.stop()

    async def stop(self) -> None:
        log.info("broker %d shutting down", self.config.broker_id)
        self.watchdog.stop()
        for task in self._timers:
            task.cancel()
        if self.txns is not None:
            self.txns.close()
        if self.server is not None:
            await self.server.close()
        if self.forwarder is not None:
            self.forwarder.peers.close()
        if self.cluster is not None:
            await self.cluster.stop()
        try:
            self.replicas.checkpoint_high_watermarks()
        except Exception:
            log.exception("final HW checkpoint failed")
        self.replicas.close()
