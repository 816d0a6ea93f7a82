"""Apache Kafka (KRaft, combined broker+controller nodes) as the system under test.

Runs on any backend through the Node protocol only, like the own system (clusters/own.py): files
are rendered on the controller (clusters/kafka_config.py) and uploaded, the server is a daemon
started with `start_daemon`, kills and pauses are `signal_daemon` / `pause_daemon`.

Where Kafka comes from:
- `kafka_tarball` (netns, ssh, docker): a path on the controller or an http(s) URL. A URL is
  downloaded once into the controller's cache (`~/.cache/strandline/kafka/`); the tarball is
  uploaded to each node and unpacked into `<home>/kafka` (skipped when already unpacked there).
- `kafka_image` (docker): the containers run that image (e.g. apache/kafka), whose distribution
  lives in /opt/kafka; nothing is uploaded.

Leaders, leader epochs and ISRs come from the brokers' Metadata (clusters/kafka_metadata.py), so
they are what clients see.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import signal
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from clusters import daemon_control, kafka_config
from clusters.broker_ids import broker_id_of, node_of_broker_id
from clusters.kafka_config import BROKER_PORT, KafkaNodeLayout
from clusters.kafka_metadata import KafkaMetadata, LeadersFromMetadata
from clusters.node import Node, node_home
from clusters.node_files import log_tail, put_text
from clusters.node_software import cache_root
from clusters.ports import port_open
from foundation.config import TestConfig
from foundation.errors import BadInput, InfrastructureError

log = logging.getLogger(__name__)

KAFKA = "kafka"  # the daemon's name on every node
IMAGE_INSTALL_DIR = "/opt/kafka"  # where the apache/kafka images keep the distribution


def is_url(source: str) -> bool:
    return urllib.parse.urlparse(source).scheme in ("http", "https")


def check_source(config: TestConfig) -> None:
    """Before anything is created: is there a Kafka to install?"""
    if config.backend == "docker" and config.kafka_image:
        return
    if not config.kafka_tarball:
        where = "kafka_image (docker) or kafka_tarball" if config.backend == "docker" else "kafka_tarball"
        raise BadInput(f"--system kafka needs {where}: a Kafka distribution (.tgz path or URL)")
    if not is_url(config.kafka_tarball):
        path = Path(os.path.expanduser(config.kafka_tarball))
        if not path.is_file():
            raise BadInput(f"config key 'kafka_tarball': no file {config.kafka_tarball}")


def fetch_tarball(source: str, cache: Path | None = None) -> Path:
    """A local path for the distribution: the file itself, or a URL downloaded once into the cache."""
    if not is_url(source):
        return Path(os.path.expanduser(source)).resolve()
    cache = cache or cache_root() / "kafka"
    name = os.path.basename(urllib.parse.urlparse(source).path) or "kafka.tgz"
    target = cache / hashlib.sha256(source.encode()).hexdigest()[:16] / name
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    log.info("downloading %s", source)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".download-")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(source, timeout=60) as response:  # noqa: S310
            shutil.copyfileobj(response, out)
        os.replace(tmp, target)
    except OSError as e:
        raise BadInput(f"config key 'kafka_tarball': cannot download {source}: {e}") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return target


class KafkaSystem(LeadersFromMetadata):
    """Lifecycle, Killable, Pausable, HasLeaders (Kafka Metadata), HasLogs, HasDataDirs for a KRaft cluster."""

    def __init__(
        self,
        config: TestConfig,
        nodes: Sequence[Node],
        *,
        ready_timeout: float = 120.0,
        cluster_id: str | None = None,
    ) -> None:
        check_source(config)
        self.config = config
        self.brokers = list(nodes)
        self.zookeeper_node: Node | None = None
        self.ready_timeout = ready_timeout
        self.cluster_id = cluster_id or kafka_config.new_cluster_id()
        self.from_image = config.backend == "docker" and bool(config.kafka_image)
        self.metadata = KafkaMetadata(self.bootstrap_servers, self.node_of_broker)

    # --- names and places ---------------------------------------------------------------------

    def home(self, node: Node) -> str:
        return node_home(node)

    def layout(self, node: Node) -> KafkaNodeLayout:
        layout = kafka_config.layout_under(self.home(node))
        if self.from_image:
            layout = KafkaNodeLayout(IMAGE_INSTALL_DIR, layout.config_path, layout.data_dir, layout.log_dir)
        return layout

    @property
    def broker_daemon(self) -> str:
        return KAFKA

    def broker_id(self, node: Node) -> int:
        """Kafka's broker id (`broker.id` / `node.id`) of the broker on `node` (1..N, in node order)."""
        return broker_id_of(self.brokers, node)

    def node_of_broker(self, broker_id: int) -> str | None:
        return node_of_broker_id(self.brokers, broker_id)

    def addresses(self) -> list[str]:
        return [b.address for b in self.brokers]

    def bootstrap_servers(self) -> list[str]:
        return [f"{a}:{BROKER_PORT}" for a in self.addresses()]

    def log_path(self, node: Node) -> str:
        """Kafka's stdout and stderr (its log4j also writes server.log beside it)."""
        return f"{self.layout(node).log_dir}/kafka.out"

    # --- Lifecycle ----------------------------------------------------------------------------

    def setup(self) -> None:
        tarball = None if self.from_image else fetch_tarball(self.config.kafka_tarball)
        for node in self.brokers:
            self.install(node, tarball)
        for node in self.brokers:  # every node is a voter: start them all, then wait
            self._start(node)
        deadline = time.monotonic() + self.ready_timeout
        for node in self.brokers:
            self.wait_ready(node, timeout=max(1.0, deadline - time.monotonic()))
        self.wait_brokers(timeout=max(1.0, deadline - time.monotonic()))

    def install(self, node: Node, tarball: Path | None) -> None:
        """Unpack (unless already there), render server.properties, format the storage."""
        lay = self.layout(node)
        node.exec(["mkdir", "-p", lay.data_dir, lay.log_dir])
        start_script = f"{lay.install_dir}/bin/kafka-server-start.sh"
        if not node.exec(["test", "-x", start_script], check=False).ok:
            if tarball is None:
                raise InfrastructureError(
                    f"{node.name}: no Kafka at {lay.install_dir} in image {self.config.kafka_image}"
                )
            remote = f"{self.home(node)}/{tarball.name}"
            node.upload(str(tarball), remote)
            node.exec(kafka_config.unpack_argv(remote, lay), timeout=300)
            node.exec(["rm", "-f", remote])
            if not node.exec(["test", "-x", start_script], check=False).ok:
                raise BadInput(
                    f"config key 'kafka_tarball': {tarball.name} holds no bin/kafka-server-start.sh"
                )
        properties = kafka_config.render_server_properties(
            self.config, self.broker_id(node), self.addresses(), lay
        )
        put_text(node, properties, lay.config_path)
        node.exec(kafka_config.format_storage_argv(lay, self.cluster_id), timeout=180, env=self._env(node))

    def _env(self, node: Node) -> dict[str, str]:
        return kafka_config.server_env(self.layout(node))

    def _start(self, node: Node) -> int:
        lay = self.layout(node)
        return node.start_daemon(
            KAFKA, kafka_config.server_start_argv(lay), env=self._env(node), log_path=self.log_path(node)
        )

    def wait_ready(self, node: Node, timeout: float | None = None) -> None:
        """Until the node's broker listens; else one error quoting its log."""
        timeout = self.ready_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while not port_open(node.address, BROKER_PORT):
            if node.daemon_pid(KAFKA) is None:
                raise InfrastructureError(f"Kafka on {node.name} exited; log: {self._log_tail(node)}")
            if time.monotonic() > deadline:
                raise InfrastructureError(
                    f"Kafka on {node.name} did not listen on {node.address}:{BROKER_PORT} within "
                    f"{timeout:g}s; log: {self._log_tail(node)}"
                )
            time.sleep(0.2)

    def registered_brokers(self) -> list[int]:
        """The brokers the metadata lists now (KRaft drops a broker once its session is fenced)."""
        return self.metadata.registered_brokers()

    def wait_brokers(self, timeout: float) -> None:
        """Until the metadata lists every broker (the controller quorum formed and registered them)."""
        self.metadata.wait_brokers(set(range(1, len(self.brokers) + 1)), timeout)

    def _log_tail(self, node: Node, lines: int = 8) -> str:
        return log_tail(node, self.log_path(node), lines)

    def teardown(self) -> None:
        self.close()
        for node in self.brokers:
            node.signal_daemon(KAFKA, signal.SIGKILL)

    def close(self) -> None:
        self.metadata.close()

    # --- Killable, Pausable ---------------------------------------------------------------------

    def kill(self, node: Node) -> None:
        node.signal_daemon(KAFKA, signal.SIGKILL)

    def start(self, node: Node, *, wait_ready: bool = False) -> None:
        if node.daemon_pid(KAFKA) is None:
            self._start(node)
        if wait_ready:
            self.wait_ready(node)

    def stop(self, node: Node, *, timeout: float = 30.0) -> None:
        """SIGTERM (Kafka's controlled shutdown), SIGKILL when it has not exited in time."""
        daemon_control.stop_gracefully(node, KAFKA, timeout, poll=0.1)

    def restart(self, node: Node) -> None:
        self.stop(node)
        self.start(node)

    def pause(self, node: Node) -> None:
        daemon_control.freeze(node, KAFKA)

    def resume(self, node: Node) -> None:
        daemon_control.thaw(node, KAFKA)

    # --- HasLogs, HasDataDirs -------------------------------------------------------------------

    def log_files(self, node: Node) -> list[str]:
        lay = self.layout(node)
        return [self.log_path(node), f"{lay.log_dir}/server.log", f"{lay.log_dir}/controller.log"]

    def data_dirs(self, node: Node) -> list[str]:
        return [self.layout(node).data_dir]
