"""The docker backend: every node is a container on a user-defined bridge network of its cluster.

- dockerd: used when it answers; otherwise started here (`dockerd --bridge=none --iptables=false`,
  log in /var/log/strandline-dockerd.log) and left running like a service. Our dockerd therefore
  never touches the FORWARD chain; a user's dockerd sets its policy to DROP, so, like the netns
  backend, each cluster accepts the traffic that stays on its own bridge.
- network `sl-<cluster>`: bridge `slbr-<cluster>`, subnet 10.77.X.0/24 (X unique among live
  clusters of every backend, gateway .1 = the controller), internal (no route out).
- containers `sl-<cluster>-<node>`: hostname = node name, address 10.77.X.(10+i), NET_ADMIN (the
  nemesis runs iptables inside), docker's init as pid 1 (it reaps killed daemons), command
  `sleep infinity`; the image is `docker_image` or the cached node image (docker_image.py).
- daemons inside a container: remote_shell.ShellDaemons (setsid, pid files, process groups).
- files: put_archive / get_archive.

Every container, network and iptables rule is written into the cluster's state file before it is
created, so `down`, Ctrl-C and the next start after a crash remove them (state.py).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clusters import docker_image
from clusters.lazyfs_mount import refuse_lazyfs_off_netns
from clusters.netns import accept_bridge_traffic, copy_over, free_slot, used_slots
from clusters.network import BridgeNetwork, BridgeNode
from clusters.node import ExecResult
from clusters.remote_shell import ShellDaemons
from clusters.state import ClusterState, list_states, locked, register_remover
from foundation.config import TestConfig
from foundation.errors import BadInput, InfrastructureError

log = logging.getLogger(__name__)

SOCKET = "/var/run/docker.sock"
DOCKERD_LOG = "/var/log/strandline-dockerd.log"
LABEL = "strandline.cluster"
HOME_ROOT = "/var/lib/strandline"
PID_DIR = "/run/strandline"
TIMED_OUT = 124  # coreutils timeout's exit status


# --- the engine -------------------------------------------------------------------------------


def _client(timeout: float = 3600) -> Any:
    import docker

    return docker.DockerClient(
        base_url=os.environ.get("DOCKER_HOST") or f"unix://{SOCKET}", timeout=int(timeout)
    )


def _answers(timeout: float = 5) -> bool:
    import docker.errors
    import requests

    try:
        return bool(_client(timeout).ping())
    except (docker.errors.DockerException, requests.RequestException, OSError):
        return False


def ensure_dockerd(wait: float = 60.0) -> Any:
    """A client of a running engine, starting dockerd in the background when none answers."""
    if _answers():
        return _client()
    if os.environ.get("DOCKER_HOST"):
        raise InfrastructureError(
            f"the docker engine at DOCKER_HOST={os.environ['DOCKER_HOST']} does not answer"
        )
    dockerd = shutil.which("dockerd")
    if dockerd is None:
        raise InfrastructureError("docker is not installed (no dockerd; scripts/setup.sh installs docker.io)")
    if os.geteuid() != 0:
        raise InfrastructureError("no docker engine runs, and starting dockerd needs root")
    log.info("starting dockerd (log: %s)", DOCKERD_LOG)
    Path(DOCKERD_LOG).parent.mkdir(parents=True, exist_ok=True)
    with open(DOCKERD_LOG, "ab") as out:
        proc = subprocess.Popen(
            [dockerd, "--bridge=none", "--iptables=false", f"--host=unix://{SOCKET}"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a service: it outlives this controller
        )
    deadline = time.monotonic() + wait
    while not _answers():
        if proc.poll() is not None:
            raise InfrastructureError(f"dockerd exited with {proc.returncode} at start: {_log_tail()}")
        if time.monotonic() > deadline:
            raise InfrastructureError(f"dockerd did not answer on {SOCKET} within {wait:g}s: {_log_tail()}")
        time.sleep(0.2)
    return _client()


def _log_tail() -> str:
    try:
        lines = [line for line in Path(DOCKERD_LOG).read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "(no log)"
    return lines[-1][-300:] if lines else "(empty log)"


def _docker_error(e: Exception) -> str:
    explanation = getattr(e, "explanation", None)
    return (
        str(explanation or e).strip().splitlines()[0] if str(explanation or e).strip() else type(e).__name__
    )


# --- a node -----------------------------------------------------------------------------------


class DockerNode(BridgeNode["DockerNetwork"], ShellDaemons):
    """One container: exec through the engine's exec API, files through archives."""

    def __init__(self, name: str, network: DockerNetwork, index: int) -> None:
        super().__init__(name, network, index)
        self.container = f"sl-{network.cluster}-{name}"
        self.pid_dir = PID_DIR
        self._home = f"{HOME_ROOT}/{name}"

    @property
    def home(self) -> str:
        return self._home

    def handle(self) -> dict[str, Any]:
        """How to reach this node after a controller crash: its container, through `docker exec`."""
        return {
            "backend": "docker",
            "container": self.container,
            "prefix": ["docker", "exec", self.container],
        }

    @property
    def faketime_library(self) -> str:
        """libfaketime inside the node image (a definition with `faketime = true` preloads it into brokers)."""
        return docker_image.FAKETIME_LIBRARY

    @property
    def client(self) -> Any:
        return self.network.client

    def exec(
        self,
        argv: list[str],
        *,
        timeout: float = 60.0,
        check: bool = True,
        input: str | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        import docker.errors

        command = ["timeout", "-k", "5", f"{timeout:g}", *argv]
        if input is not None:
            stdin_file = f"/tmp/.strandline-stdin-{uuid.uuid4().hex}"
            self._put_bytes(input.encode(), stdin_file)
            command = ["sh", "-c", '"$@" < "$0"; rc=$?; rm -f "$0"; exit $rc', stdin_file, *command]
        shown = " ".join(argv)
        try:
            created = self.client.api.exec_create(self.container, command, environment=env or None)
            out, err = self.client.api.exec_start(created["Id"], demux=True)
            code = self.client.api.exec_inspect(created["Id"])["ExitCode"]
        except docker.errors.NotFound:
            raise InfrastructureError(f"{self.name}: container {self.container} does not exist") from None
        except docker.errors.APIError as e:
            raise InfrastructureError(f"{self.name}: `{shown}`: {_docker_error(e)}") from None
        result = ExecResult(
            int(code if code is not None else -1),
            (out or b"").decode(errors="replace"),
            (err or b"").decode(errors="replace"),
        )
        if result.exit_code == TIMED_OUT:
            raise InfrastructureError(f"{self.name}: `{shown}` timed out after {timeout:g}s")
        if check:
            result.raise_if_failed(self.name, shown)
        return result

    # --- files ----------------------------------------------------------------------------------

    def _put_archive(self, directory: str, data: bytes) -> None:
        import docker.errors

        try:
            self.client.api.put_archive(self.container, directory, data)
        except docker.errors.APIError as e:
            raise InfrastructureError(
                f"{self.name}: cannot write into {directory}: {_docker_error(e)}"
            ) from None

    def _put_bytes(self, data: bytes, remote_path: str) -> None:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            info = tarfile.TarInfo(os.path.basename(remote_path))
            info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
            tar.addfile(info, io.BytesIO(data))
        self._put_archive(os.path.dirname(remote_path) or "/", buffer.getvalue())

    def upload(self, local_path: str, remote_path: str) -> None:
        source = Path(local_path)
        if not source.exists():
            raise InfrastructureError(f"cannot upload {source}: no such file")
        parent = os.path.dirname(remote_path.rstrip("/")) or "/"
        self.exec(["mkdir", "-p", parent])
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            tar.add(str(source), arcname=os.path.basename(remote_path.rstrip("/")))
        self._put_archive(parent, buffer.getvalue())

    def download(self, remote_path: str, local_path: str) -> None:
        import docker.errors

        try:
            stream, _stat = self.client.api.get_archive(self.container, remote_path)
            data = b"".join(stream)
        except docker.errors.NotFound:
            raise InfrastructureError(f"{self.name}: no {remote_path}") from None
        except docker.errors.APIError as e:
            raise InfrastructureError(f"{self.name}: cannot read {remote_path}: {_docker_error(e)}") from None
        extract_single(data, os.path.basename(remote_path.rstrip("/")), Path(local_path))


def extract_single(tar_bytes: bytes, top: str, dest: Path) -> None:
    """Extract an archive holding one file or directory `top` to `dest` (merging directories)."""
    with tempfile.TemporaryDirectory(prefix="strandline-get-") as tmp:
        with tarfile.open(fileobj=io.BytesIO(tar_bytes), mode="r:*") as tar:
            tar.extractall(tmp, filter="data")
        try:
            copy_over(Path(tmp) / top, dest)
        except OSError as e:
            raise InfrastructureError(f"cannot write {dest}: {e.strerror or e}") from None


# --- the network of a cluster -----------------------------------------------------------------


class DockerNetwork(BridgeNetwork):
    """The containers, network and iptables rule of one cluster, created through its state."""

    backend = "docker"
    python = docker_image.PYTHON
    faketime_library = docker_image.FAKETIME_LIBRARY

    def __init__(self, cluster: str, node_names: Sequence[str], config: TestConfig, state_dir: Path) -> None:
        super().__init__(cluster, node_names, state_dir)
        refuse_lazyfs_off_netns(config, self.backend)
        self.config = config
        self.network_name = f"sl-{cluster}"
        self.image: str | None = None
        self._client: Any = None
        self.nodes: dict[str, DockerNode] = {n: DockerNode(n, self, i) for i, n in enumerate(self.node_names)}

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = ensure_dockerd()
        return self._client

    @classmethod
    def attach(cls, state: ClusterState, config: TestConfig) -> DockerNetwork:
        info = state.info
        net = cls(state.cluster, info["nodes"], config, state.path.parent)
        net.state = state
        net.slot = int(info["slot"])
        net.image = info.get("image")
        return net

    def user_image(self) -> tuple[str, str]:
        """(config key, image) when the user names an image: Kafka's for `--system kafka`, else theirs."""
        if self.config.system == "kafka" and self.config.kafka_image:
            return "kafka_image", self.config.kafka_image
        return "docker_image", self.config.docker_image

    def _allocate(self, info: dict[str, object]) -> None:
        """Pick a free 10.77.X.0/24 and write the state file, under the state-directory lock."""
        import docker.errors

        with locked(self.state_dir):
            self.refuse_if_up()
            for node in self.nodes.values():
                with contextlib.suppress(docker.errors.NotFound):
                    self.client.containers.get(node.container)
                    raise BadInput(
                        f"a container named {node.container} already exists; choose another cluster name"
                    )
            if self.client.networks.list(names=[self.network_name]):
                raise BadInput(
                    f"a docker network named {self.network_name} already exists; choose another cluster name"
                )
            if Path(f"/sys/class/net/{self.bridge}").exists():
                raise BadInput(f"network interface {self.bridge} already exists; choose another cluster name")
            taken = used_slots() | {
                int(s.info["slot"]) for s in list_states(self.state_dir) if "slot" in s.info
            }
            self.slot = slot = free_slot(self.cluster, taken)
            self.create_state(info, slot=slot, image=self.image)

    def create(self, info: dict[str, object] | None = None) -> None:
        """Image (cached), network, rule, containers; every step recorded before it runs."""
        import docker.errors
        import docker.types

        client = self.client
        key, own_image = self.user_image()
        if own_image:
            try:
                client.images.get(own_image)
            except docker.errors.ImageNotFound:
                raise BadInput(f"config key {key!r}: no image {own_image!r} in the docker engine") from None
        self.image = own_image or docker_image.ensure_image(client)
        self._allocate(dict(info or {}))
        state = self.state
        assert state is not None and self.slot is not None

        accept_bridge_traffic(state, self.bridge, self.cluster)

        state.add("docker-network", self.network_name)
        try:
            client.networks.create(
                self.network_name,
                driver="bridge",
                internal=True,
                ipam=docker.types.IPAMConfig(
                    pool_configs=[
                        docker.types.IPAMPool(subnet=f"10.77.{self.slot}.0/24", gateway=self.bridge_address)
                    ]
                ),
                options={"com.docker.network.bridge.name": self.bridge},
                labels={LABEL: self.cluster},
            )
        except docker.errors.APIError as e:
            raise InfrastructureError(
                f"cannot create docker network {self.network_name}: {_docker_error(e)}"
            ) from None
        for node in self.nodes.values():
            self._create_node(node)
        for node in self.nodes.values():
            node.exec(["mkdir", "-p", node.home, node.pid_dir])
            # Nodes talk to each other and to the controller (on-link) only: no route elsewhere,
            # whatever the engine's iptables settings.
            node.exec(["ip", "route", "del", "default"], check=False)

    def _create_node(self, node: DockerNode) -> None:
        import docker.errors

        state = self.state
        assert state is not None
        api = self.client.api
        state.add("docker-container", node.container)
        try:
            created = api.create_container(
                self.image,
                command=["sleep", "infinity"],
                entrypoint=[],
                hostname=node.hostname,
                name=node.container,
                user="0",  # images such as apache/kafka default to a user that cannot run iptables
                detach=True,
                labels={LABEL: self.cluster},
                host_config=api.create_host_config(
                    cap_add=["NET_ADMIN"], init=True, network_mode=self.network_name
                ),
                networking_config=api.create_networking_config(
                    {self.network_name: api.create_endpoint_config(ipv4_address=node.address)}
                ),
            )
            api.start(created["Id"])
        except docker.errors.APIError as e:
            raise InfrastructureError(
                f"cannot start container {node.container}: {_docker_error(e)}"
            ) from None


# --- removers (state.py calls them for `down`, Ctrl-C and leftovers of crashed controllers) ----


def _engine_for_cleanup() -> Any:
    if not _answers():
        if not Path(SOCKET).exists() and not os.environ.get("DOCKER_HOST"):
            return None  # no engine, so no container of ours runs (e.g. after a reboot)
        raise RuntimeError("the docker engine does not answer")
    return _client(timeout=120)


def _remove_container(r: dict[str, Any]) -> None:
    import docker.errors

    client = _engine_for_cleanup()
    if client is None:
        return
    with contextlib.suppress(docker.errors.NotFound):
        client.api.remove_container(r["name"], force=True, v=True)


def _remove_network(r: dict[str, Any]) -> None:
    import docker.errors

    client = _engine_for_cleanup()
    if client is None:
        return
    for network in client.networks.list(names=[r["name"]]):
        if network.name != r["name"]:
            continue
        with contextlib.suppress(docker.errors.NotFound):
            network.remove()


register_remover("docker-container", _remove_container)
register_remover("docker-network", _remove_network)


def cluster_containers(cluster: str) -> list[str]:
    """Names of the containers labelled with this cluster (for tests and `status`)."""
    client = _client(timeout=30)
    return [c.name for c in client.containers.list(all=True, filters={"label": f"{LABEL}={cluster}"})]


def cluster_networks(cluster: str) -> list[str]:
    client = _client(timeout=30)
    return [n.name for n in client.networks.list(filters={"label": f"{LABEL}={cluster}"})]
