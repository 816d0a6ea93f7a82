"""The broker's ZooKeeper session: the kazoo client, its bridge to the asyncio loop, registration.

Kazoo runs its callbacks on its own threads; they only post to the asyncio loop (`post`). The
session registers the broker (ephemeral /brokers/ids/<id>), takes over the registration of a killed
previous incarnation, and tells its owner when the session is lost and when a new one begins.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NodeExistsError, NoNodeError

from broker.background import BackgroundTasks
from broker.config import BrokerConfig, Listener
from broker.errors import BrokerUnavailable
from broker.zookeeper.layout import CLUSTER_ID, IDS, TOPICS, new_cluster_id, parse_json

log = logging.getLogger(__name__)


class ZkSession:
    """One kazoo client for the broker's life (kazoo re-arms watches across sessions)."""

    def __init__(self, config: BrokerConfig, random_bytes: Callable[[int], bytes]) -> None:
        self.config = config
        self.zk = KazooClient(
            hosts=config.zookeeper_connect,
            timeout=config.zookeeper_session_timeout_ms / 1000.0,
            connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 1.0},
            command_retry={"max_tries": 3, "delay": 0.1, "max_delay": 1.0},
        )
        self.loop: asyncio.AbstractEventLoop | None = None
        self.advertised: Listener = config.advertised_listener
        self.cluster_id = ""
        self.registered_zxid = 0  # czxid of this process's registration (Kafka's broker epoch)
        self._random_bytes = random_bytes
        self._tasks = BackgroundTasks(lambda e: log.error("ZooKeeper task failed", exc_info=e))
        self._session_lost = False
        self._stopping = False
        self.on_lost: Callable[[], None] = lambda: None
        self.on_new_session: Callable[[], None] = lambda: None

    # --- the bridge to the loop -----------------------------------------------------------------
    def post(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run `fn(*args)` on the loop (callable from kazoo's threads)."""
        loop = self.loop
        if loop is not None and not loop.is_closed() and not self._stopping:
            loop.call_soon_threadsafe(fn, *args)

    def spawn(self, coro: Any) -> None:
        """Run `coro` on the loop, held until done; a failure is logged."""
        self._tasks.spawn(coro)

    # --- lifecycle ------------------------------------------------------------------------------
    async def start(self, advertised_port: int | None) -> None:
        self.loop = asyncio.get_running_loop()
        if advertised_port is not None:
            self.advertised = type(self.advertised)(self.advertised.host, advertised_port)
        started = time.monotonic()
        await self._connect()
        log.info("ZooKeeper session established in %.2fs", time.monotonic() - started)
        self.zk.add_listener(self._on_connection_state)
        await asyncio.to_thread(self._bootstrap_paths)
        await asyncio.to_thread(self.register)
        log.info("joined the cluster %.2fs after connecting to ZooKeeper", time.monotonic() - started)

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
        try:
            await asyncio.to_thread(self.zk.stop)
            await asyncio.to_thread(self.zk.close)
        except Exception:
            log.debug("closing the ZooKeeper client", exc_info=True)

    def _on_connection_state(self, state: str) -> None:
        # kazoo thread: no blocking calls here
        if state == KazooState.LOST:
            log.warning("ZooKeeper session lost")
            self._session_lost = True
            self.post(self.on_lost)
        elif state == KazooState.CONNECTED and self._session_lost:
            self._session_lost = False
            log.warning("ZooKeeper reconnected with a new session: registering again")
            self.post(self.spawn, asyncio.to_thread(self.register))
            self.post(self.on_new_session)

    # --- bootstrap and registration -------------------------------------------------------------
    def _bootstrap_paths(self) -> None:
        for path in (IDS, TOPICS):
            self.zk.ensure_path(path)
        try:
            cluster = {"version": "1", "id": new_cluster_id(self._random_bytes(16))}
            self.zk.create(CLUSTER_ID, json.dumps(cluster).encode(), makepath=True)
        except NodeExistsError:
            pass
        data, _ = self.zk.get(CLUSTER_ID)
        self.cluster_id = (parse_json(data) or {}).get("id", "")

    def register(self) -> None:
        host, port = self.advertised.host, self.advertised.port
        registration = json.dumps(
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
                self.zk.create(path, registration, ephemeral=True, makepath=True)
            except NodeExistsError:
                try:
                    _, stat = self.zk.get(path)
                except NoNodeError:
                    continue
                if stat.ephemeralOwner == self.zk.client_id[0]:
                    self.registered_zxid = max(self.registered_zxid, int(stat.czxid))
                    return
                # A previous incarnation of this broker (killed) still holds the node until its
                # session expires; take it over so a restart is quick (see docs/broker-variants.md).
                # In one transaction: the controller must never see the broker gone in between
                # (it would leave every ISR), only registered again, with a new czxid.
                log.warning(
                    "taking over the registration of a previous incarnation of broker %d",
                    self.config.broker_id,
                )
                takeover = self.zk.transaction()
                takeover.delete(path, version=stat.version)
                takeover.create(path, registration, ephemeral=True)
                if any(isinstance(result, Exception) for result in takeover.commit()):
                    continue  # the node changed meanwhile: look again
            self._registered(path)
            log.info("registered as broker %d at %s:%d", self.config.broker_id, host, port)
            return
        raise RuntimeError(f"could not register {path}")

    def _registered(self, path: str) -> None:
        """Remember when this process registered (the znode's czxid: Kafka's broker epoch)."""
        stat = self.zk.exists(path)
        if stat is not None and stat.ephemeralOwner == self.zk.client_id[0]:
            self.registered_zxid = max(self.registered_zxid, int(stat.czxid))
