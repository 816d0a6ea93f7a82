"""ZooKeeper + N own brokers as local processes on 127.0.0.1 (free ports), for tests and tools.

    from clusters.local import LocalCluster

    with LocalCluster(brokers=3, settings={"min.insync.replicas": "2"}) as cluster:
        cluster.create_topic("t0", partitions=1, replication_factor=3)
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
        leader = cluster.wait_for_leader("t0", 0)
        cluster.kill(leader)                      # SIGKILL
        cluster.wait_for_leader("t0", 0, not_in={leader})
        cluster.start(leader)                     # same id, port, config and data dir
        cluster.partition_state("t0", 0)          # {"leader": .., "leader_epoch": .., "isr": [..], ...}

Broker ids are 1..N. Each broker gets `<base>/broker-<id>/{server.properties,data/,broker.log}`;
ZooKeeper gets `<base>/zookeeper/`. The base directory is a fresh temporary one (removed on exit)
unless `base_dir` is given. `settings` apply to every broker, `broker_settings[id]` to one.
Everything started is killed on exit, also if the test fails.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from broker.config import render_properties
from clusters import zookeeper
from clusters.ports import free_port, port_open

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parent.parent


PORT_ATTEMPTS = 3  # ports tried for a broker whose port was taken before it started


class PortTaken(RuntimeError):
    """A broker exited at its start because its port was in use."""


class LocalCluster:
    def __init__(
        self,
        brokers: int = 3,
        *,
        settings: Mapping[str, object] | None = None,
        broker_settings: Mapping[int, Mapping[str, object]] | None = None,
        base_dir: Path | None = None,
        session_timeout_ms: int = 3000,
        python: str = sys.executable,
        start_timeout: float = 30.0,
    ) -> None:
        self.broker_ids = list(range(1, brokers + 1))
        self.settings = dict(settings or {})
        self.broker_settings = {k: dict(v) for k, v in (broker_settings or {}).items()}
        self._own_dir = base_dir is None
        self.base_dir = Path(base_dir) if base_dir else Path(tempfile.mkdtemp(prefix="strandline-local-"))
        self.session_timeout_ms = session_timeout_ms
        self.python = python
        self.start_timeout = start_timeout
        self.zk_port = free_port()
        self.ports = {b: free_port() for b in self.broker_ids}
        self._zk_proc: subprocess.Popen[bytes] | None = None
        self._procs: dict[int, subprocess.Popen[bytes]] = {}
        self._started_at: dict[int, float] = {}
        self._log_start: dict[int, int] = {}  # where each broker's log was when it last started
        self._kazoo: Any = None

    # --- addresses --------------------------------------------------------------------------------
    @property
    def zk_connect(self) -> str:
        return f"127.0.0.1:{self.zk_port}"

    @property
    def bootstrap(self) -> str:
        """Comma-separated host:port of every broker (running or not), as clients take it."""
        return ",".join(f"127.0.0.1:{self.ports[b]}" for b in self.broker_ids)

    def address(self, broker_id: int) -> str:
        return f"127.0.0.1:{self.ports[broker_id]}"

    def broker_dir(self, broker_id: int) -> Path:
        return self.base_dir / f"broker-{broker_id}"

    def data_dir(self, broker_id: int) -> Path:
        return self.broker_dir(broker_id) / "data"

    def log_path(self, broker_id: int) -> Path:
        return self.broker_dir(broker_id) / "broker.log"

    # --- lifecycle --------------------------------------------------------------------------------
    def __enter__(self) -> LocalCluster:
        try:
            self.start_all()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start_all(self) -> None:
        self.start_zookeeper()
        for broker_id in self.broker_ids:
            self.start(broker_id, wait=False)
        for broker_id in self.broker_ids:
            # A port found free may be taken before the broker binds it (another process's outgoing
            # connection draws from the same range): before anyone knows the address, take another.
            for attempt in range(PORT_ATTEMPTS):
                try:
                    self.wait_until_registered(broker_id)
                    break
                except PortTaken:
                    if attempt == PORT_ATTEMPTS - 1:
                        raise
                    self.ports[broker_id] = free_port()
                    self.start(broker_id, wait=False)

    def start_zookeeper(self) -> None:
        zk_dir = self.base_dir / "zookeeper"
        cfg = zookeeper.write_server_files(zk_dir, client_port=self.zk_port)
        with open(zk_dir / "zookeeper.log", "ab") as out:
            self._zk_proc = subprocess.Popen(
                zookeeper.command(cfg, log_dir=zk_dir),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + self.start_timeout
        while not port_open("127.0.0.1", self.zk_port):
            if self._zk_proc.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited at start; see {zk_dir / 'zookeeper.log'}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"ZooKeeper did not listen on {self.zk_connect} in {self.start_timeout}s")
            time.sleep(0.05)

    def config_for(self, broker_id: int) -> dict[str, object]:
        props: dict[str, object] = {
            "broker.id": broker_id,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.ports[broker_id]}",
            "log.dirs": self.data_dir(broker_id),
            "zookeeper.connect": self.zk_connect,
            "zookeeper.session.timeout.ms": self.session_timeout_ms,
            "replica.fetch.wait.max.ms": 200,
        }
        props.update(self.settings)
        props.update(self.broker_settings.get(broker_id, {}))
        return props

    def start(self, broker_id: int, *, wait: bool = True) -> None:
        """Start (or restart) one broker with its config, port and data dir."""
        proc = self._procs.get(broker_id)
        if proc is not None and proc.poll() is None:
            raise RuntimeError(f"broker {broker_id} is already running (pid {proc.pid})")
        bdir = self.broker_dir(broker_id)
        bdir.mkdir(parents=True, exist_ok=True)
        cfg = bdir / "server.properties"
        cfg.write_text(render_properties(self.config_for(broker_id)))
        env = dict(os.environ)
        env["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self._started_at[broker_id] = time.time()
        with open(self.log_path(broker_id), "ab") as out:
            self._log_start[broker_id] = out.tell()
            self._procs[broker_id] = subprocess.Popen(
                [self.python, "-m", "broker", "--config", str(cfg)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=str(REPO_ROOT),
                start_new_session=True,
            )
        if wait:
            self.wait_until_registered(broker_id)

    def wait_until_registered(self, broker_id: int, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (timeout or self.start_timeout)
        zk = self.zk()
        path = f"/brokers/ids/{broker_id}"
        while True:
            proc = self._procs.get(broker_id)
            if proc is not None and proc.poll() is not None:
                failure = PortTaken if self._port_taken(broker_id) else RuntimeError
                raise failure(
                    f"broker {broker_id} exited with {proc.returncode}; see {self.log_path(broker_id)}"
                )
            data = None
            with contextlib.suppress(Exception):
                data, stat = zk.get(path)
                if stat.ephemeralOwner and port_open("127.0.0.1", self.ports[broker_id]):
                    info = json.loads(data)
                    if (
                        int(info.get("port", -1)) == self.ports[broker_id]
                        and int(info.get("timestamp", 0)) > 0
                    ):
                        if self._registered_after_start(broker_id, info):
                            return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"broker {broker_id} did not register in time; see {self.log_path(broker_id)}"
                )
            time.sleep(0.05)

    def _port_taken(self, broker_id: int) -> bool:
        """Whether this start of the broker ended because its port was in use."""
        with open(self.log_path(broker_id), "rb") as log:
            log.seek(self._log_start.get(broker_id, 0))
            return b"address already in use" in log.read().lower()

    def _registered_after_start(self, broker_id: int, info: Mapping[str, Any]) -> bool:
        """True unless the registration is a previous incarnation's (killed, session not expired)."""
        started = self._started_at.get(broker_id, 0.0)
        return int(info["timestamp"]) / 1000.0 >= started - 0.5

    def kill(self, broker_id: int, sig: int = signal.SIGKILL) -> None:
        """Send `sig` (SIGKILL by default) and wait for the process to end."""
        proc = self._procs.get(broker_id)
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=15)

    def stop_broker(self, broker_id: int) -> None:
        """Graceful stop (SIGTERM): closes its ZooKeeper session, checkpoints HWs."""
        self.kill(broker_id, signal.SIGTERM)
        proc = self._procs.get(broker_id)
        if proc is not None and proc.poll() is None:
            self.kill(broker_id, signal.SIGKILL)

    def pause(self, broker_id: int) -> None:
        self.kill_nowait(broker_id, signal.SIGSTOP)

    def resume(self, broker_id: int) -> None:
        self.kill_nowait(broker_id, signal.SIGCONT)

    def kill_nowait(self, broker_id: int, sig: int) -> None:
        proc = self._procs.get(broker_id)
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, sig)

    def running(self, broker_id: int) -> bool:
        proc = self._procs.get(broker_id)
        return proc is not None and proc.poll() is None

    def stop(self) -> None:
        """Kill every broker and ZooKeeper; remove the base directory if we made it."""
        for broker_id in list(self._procs):
            self.kill_nowait(broker_id, signal.SIGCONT)
            self.kill(broker_id)
        if self._kazoo is not None:
            with contextlib.suppress(Exception):
                self._kazoo.stop()
                self._kazoo.close()
            self._kazoo = None
        if self._zk_proc is not None and self._zk_proc.poll() is None:
            self._zk_proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._zk_proc.wait(timeout=10)
        if self._own_dir and not os.environ.get("STRANDLINE_KEEP_LOCALCLUSTER"):
            shutil.rmtree(self.base_dir, ignore_errors=True)

    # --- ZooKeeper views --------------------------------------------------------------------------
    def zk(self) -> Any:
        """A connected kazoo client (shared, for reading cluster state)."""
        if self._kazoo is None:
            from kazoo.client import KazooClient

            quiet = logging.getLogger("strandline.localcluster.kazoo")
            quiet.setLevel(logging.CRITICAL)
            client = KazooClient(hosts=self.zk_connect, timeout=10.0, logger=quiet)
            client.start(timeout=15)
            self._kazoo = client
        return self._kazoo

    def partition_state(self, topic: str, partition: int) -> dict[str, Any] | None:
        """The partition's state znode ({"leader", "leader_epoch", "isr", "controller_epoch", ...})."""
        from kazoo.exceptions import NoNodeError

        try:
            data, _ = self.zk().get(f"/brokers/topics/{topic}/partitions/{partition}/state")
        except NoNodeError:
            return None
        return dict(json.loads(data))

    def live_brokers(self) -> list[int]:
        return sorted(int(b) for b in self.zk().get_children("/brokers/ids"))

    def controller(self) -> int | None:
        from kazoo.exceptions import NoNodeError

        try:
            data, _ = self.zk().get("/controller")
        except NoNodeError:
            return None
        return int(json.loads(data)["brokerid"])

    def wait_for(self, predicate: Any, timeout: float, what: str) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
            time.sleep(0.05)

    def wait_for_leader(
        self, topic: str, partition: int = 0, *, not_in: Collection[int] = (), timeout: float = 30.0
    ) -> int:
        """Wait until the partition has a leader outside `not_in`; return its id."""

        def check() -> int | None:
            state = self.partition_state(topic, partition)
            if state and state["leader"] >= 0 and state["leader"] not in not_in:
                return int(state["leader"])
            return None

        return int(self.wait_for(check, timeout, f"a leader of {topic}-{partition} outside {set(not_in)}"))

    def wait_for_isr(self, topic: str, partition: int, isr: Collection[int], timeout: float = 30.0) -> None:
        want = set(isr)

        def check() -> bool:
            state = self.partition_state(topic, partition)
            return bool(state) and set(state["isr"]) == want  # type: ignore[index]

        self.wait_for(check, timeout, f"ISR of {topic}-{partition} to be {sorted(want)}")

    # --- conveniences -----------------------------------------------------------------------------
    def create_topic(
        self, name: str, partitions: int = 1, replication_factor: int = 3, timeout: float = 30.0
    ) -> None:
        """Create a topic through the CreateTopics API (kafka-python's admin client) and wait for leaders.

        The controller counts the live brokers its ZooKeeper watch last delivered, which can lag the
        registrations `start` waited for by a moment: "larger than available brokers" is retried.
        """
        from kafka.admin import KafkaAdminClient, NewTopic
        from kafka.errors import InvalidReplicationFactorError

        deadline = time.monotonic() + timeout
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=int(timeout * 1000))
        try:
            while True:
                try:
                    admin.create_topics(
                        [NewTopic(name, partitions, replication_factor)], timeout_ms=int(timeout * 1000)
                    )
                    break
                except InvalidReplicationFactorError:
                    if replication_factor > len(self.ports) or time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
        finally:
            admin.close()
        for p in range(partitions):
            self.wait_for_leader(name, p, timeout=timeout)

    def pids(self) -> Iterator[tuple[int, int]]:
        for broker_id, proc in self._procs.items():
            if proc.poll() is None:
                yield broker_id, proc.pid
