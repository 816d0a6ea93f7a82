"""Pieces of the docker, ssh and Kafka code that need no engine, host or distribution.

The shell daemon logic shared by docker and ssh nodes (remote_shell.ShellDaemons) is exercised for
real, against a node whose `exec` runs commands on this machine: real processes, real signals.
"""

from __future__ import annotations

import http.server
import io
import os
import signal
import subprocess
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusters import node_software, software
from clusters.docker_backend import extract_single
from clusters.factory import build_cluster
from clusters.node import ExecResult
from clusters.remote_shell import ShellDaemons
from clusters.ssh_backend import SshNode, check_host_files, hosts_for
from foundation.config import SshHost, TestConfig, validate
from foundation.errors import BadInput


class LocalShellNode(ShellDaemons):
    """A node whose shell is this machine's (what a container or an ssh host gives the mixin)."""

    def __init__(self, root: Path) -> None:
        self.name = "local"
        self.pid_dir = str(root / "pids")
        self._home = str(root / "home")

    @property
    def home(self) -> str:
        return self._home

    def exec(
        self,
        argv: list[str],
        *,
        timeout: float = 60.0,
        check: bool = True,
        input: str | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        done = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout, check=False)
        return ExecResult(done.returncode, done.stdout, done.stderr)


@pytest.fixture
def node(tmp_path: Path) -> Iterator[LocalShellNode]:
    n = LocalShellNode(tmp_path)
    yield n
    n.kill_all()


def test_daemon_start_pid_signal_pause_and_kill(node: LocalShellNode, tmp_path: Path) -> None:
    log = tmp_path / "logs" / "d.log"
    pid = node.start_daemon(
        "d", ["sh", "-c", 'echo "up $GREETING"; sleep 1000 & wait'], env={"GREETING": "hi"}, log_path=str(log)
    )
    assert node.daemon_pid("d") == pid
    assert os.getpgid(pid) == pid  # its own session and process group
    deadline = time.monotonic() + 30  # generous: CI machines run loaded
    while len(node.daemon_pids("d")) < 2:  # the shell and its sleep
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert node.daemon_names() == ["d"]
    with pytest.raises(Exception, match="already running"):
        node.start_daemon("d", ["sleep", "1"], log_path=str(log))
    node.pause_daemon("d")
    deadline = time.monotonic() + 30  # generous: CI machines run loaded
    while not node.daemon_paused("d"):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    node.resume_daemon("d")
    children = node.daemon_pids("d")
    node.signal_daemon("d", signal.SIGKILL)
    assert node.daemon_pid("d") is None
    for child in children:  # the whole group died
        assert (
            not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]
        )
    assert "up hi" in log.read_text()


def test_a_reused_pid_is_not_the_daemon(node: LocalShellNode, tmp_path: Path) -> None:
    pid = node.start_daemon("d", ["sleep", "1000"], log_path=str(tmp_path / "d.log"))
    pid_file = Path(node.pid_file("d"))
    pid_file.write_text(f"{pid} 12345\n")  # same pid, another start time: not ours
    assert node.daemon_pid("d") is None
    node.signal_daemon("d", signal.SIGKILL)  # must not touch it
    assert Path(f"/proc/{pid}").exists()
    os.kill(pid, signal.SIGKILL)


def test_sigterm_reaches_the_group(node: LocalShellNode, tmp_path: Path) -> None:
    node.start_daemon("d", ["sleep", "1000"], log_path=str(tmp_path / "d.log"))
    node.signal_daemon("d", signal.SIGTERM)
    assert node.wait_daemon_exit("d", timeout=30)


def test_source_digest_follows_the_content(tmp_path: Path) -> None:
    (tmp_path / "broker").mkdir()
    (tmp_path / "broker" / "__init__.py").write_text("x = 1\n")
    (tmp_path / "broker" / "__pycache__").mkdir()
    (tmp_path / "broker" / "__pycache__" / "a.pyc").write_bytes(b"junk")
    first = node_software.source_digest(tmp_path)
    assert node_software.source_files(tmp_path) == [Path("broker/__init__.py")]
    assert node_software.source_digest(tmp_path) == first
    (tmp_path / "broker" / "__init__.py").write_text("x = 2\n")
    assert node_software.source_digest(tmp_path) != first
    data = node_software.source_tarball(tmp_path, prefix="src")
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        assert tar.getnames() == ["src/broker/__init__.py"]
    assert node_software.source_tarball(tmp_path, prefix="src") == data  # reproducible


def test_requirement_pins_are_the_controllers_versions() -> None:
    pins = node_software.requirement_pins()
    assert [p.split("==")[0] for p in pins] == list(node_software.BROKER_DISTRIBUTIONS)
    assert all("==" in p for p in pins)


def test_extract_single_file_and_merged_directory(tmp_path: Path) -> None:
    def archive(entries: dict[str, bytes]) -> bytes:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            for name, data in entries.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        return buffer.getvalue()

    extract_single(archive({"broker.log": b"hello"}), "broker.log", tmp_path / "logs" / "broker.log")
    assert (tmp_path / "logs" / "broker.log").read_bytes() == b"hello"
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "old").write_text("kept")
    extract_single(archive({"data/t0-0/00.log": b"x"}), "data", tmp_path / "data")
    assert (tmp_path / "data" / "t0-0" / "00.log").read_bytes() == b"x"
    assert (tmp_path / "data" / "old").read_text() == "kept"


def test_ssh_hosts_map_to_nodes() -> None:
    hosts = tuple(SshHost(host=f"h{i}") for i in range(4))
    config = TestConfig(backend="ssh", ssh_hosts=hosts)
    mapping = hosts_for(config, ["zk", "n1", "n2", "n3"])
    assert [mapping[n].host for n in ("n1", "n2", "n3", "zk")] == ["h0", "h1", "h2", "h3"]
    three = TestConfig(backend="ssh", ssh_hosts=hosts[:3])
    assert hosts_for(three, ["zk", "n1", "n2", "n3"])["zk"].host == "h0"  # beside n1
    with pytest.raises(BadInput, match="ssh_hosts"):
        validate({"backend": "ssh", "nodes": 3, "ssh_hosts": ["a", "b"]})


def test_ssh_command_lines_quote_env_and_sudo() -> None:
    node = SshNode("n1", SshHost(host="h", sudo=True), "c")
    line = node.command_line(["echo", "a b"], {"X": "1 2"})
    assert line == "sudo -n -- env 'X=1 2' echo 'a b'"
    assert SshNode("n1", SshHost(host="h"), "c").command_line(["true"]) == "true"


def test_ssh_missing_files_are_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="key_file .* does not exist"):
        check_host_files(SshHost(host="h", key_file=str(tmp_path / "nope"), known_hosts="/dev/null"))
    with pytest.raises(BadInput, match="known_hosts file .* does not exist"):
        check_host_files(SshHost(host="h", known_hosts=str(tmp_path / "nope")))
    check_host_files(SshHost(host="h", known_hosts=str(tmp_path / "nope"), insecure_skip_host_key_check=True))


def test_kafka_tarball_that_is_missing_or_not_kafka_is_refused_before_any_node(tmp_path: Path) -> None:
    cluster = build_cluster(
        TestConfig(system="kafka", kafka_tarball=str(tmp_path / "kafka.tgz")),
        tmp_path,
        state_dir=tmp_path / "s",
    )
    with pytest.raises(BadInput, match="no file"):
        cluster.up()
    not_kafka = tmp_path / "other.tgz"
    with tarfile.open(not_kafka, "w:gz") as tar:
        info = tarfile.TarInfo("other/README")
        tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(BadInput, match="holds no libs/"):
        software.unpacked_tarball(str(not_kafka))
    assert not (tmp_path / "s").exists() or not list((tmp_path / "s").glob("*.json"))


def test_kafka_from_an_image_uses_its_distribution_and_fetches_nothing() -> None:
    config = TestConfig(system="kafka", backend="docker", kafka_image="apache/kafka:3.9.0")
    installed = software.kind("kafka").fetch(config, None)
    assert (installed.folder, installed.node_path, installed.version) == (None, "/opt/kafka", "3.9.0")


def _distribution(version: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo(f"kafka_2.13-{version}/libs/kafka_2.13-{version}.jar")
        tar.addfile(info, io.BytesIO(b""))
    return buffer.getvalue()


def test_kafka_tarball_url_is_downloaded_and_unpacked_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STRANDLINE_CACHE", str(tmp_path / "cache"))
    served = tmp_path / "www"
    served.mkdir()
    (served / "kafka_2.13-9.9.0.tgz").write_bytes(_distribution("9.9.0"))
    hits: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(served), **kwargs)  # type: ignore[arg-type]

        def log_message(self, format: str, *args: object) -> None:
            hits.append(self.path)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/kafka_2.13-9.9.0.tgz"
        config = TestConfig(system="kafka", kafka_tarball=url)
        first = software.kind("kafka").fetch(config, None)
        second = software.kind("kafka").fetch(config, None)
        assert first == second and first.version == "9.9.0" and first.folder is not None
        assert (first.folder / "libs" / "kafka_2.13-9.9.0.jar").exists()
        assert len(hits) == 1
        with pytest.raises(BadInput, match="cannot download"):
            software.unpacked_tarball(url.replace("9.9.0", "0.0.0"))
    finally:
        server.shutdown()
        server.server_close()


def test_no_docker_engine_is_one_clear_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from clusters import docker_backend
    from foundation.errors import InfrastructureError

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no.sock")
    with pytest.raises(InfrastructureError, match="does not answer") as caught:
        docker_backend.ensure_dockerd(wait=1)
    assert "\n" not in str(caught.value)
    monkeypatch.delenv("DOCKER_HOST")
    monkeypatch.setattr(docker_backend, "SOCKET", str(tmp_path / "no.sock"))  # no engine answers here
    monkeypatch.setenv("PATH", str(tmp_path))  # and no dockerd to start
    with pytest.raises(InfrastructureError, match="docker is not installed"):
        docker_backend.ensure_dockerd(wait=1)
    # a dockerd that cannot start (here: one that exits at once) is reported with its log
    fake = tmp_path / "dockerd"
    fake.write_text("#!/bin/sh\necho 'failed to start daemon: no storage driver' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(docker_backend, "DOCKERD_LOG", str(tmp_path / "dockerd.log"))
    if os.geteuid() == 0:
        with pytest.raises(
            InfrastructureError, match="dockerd exited with 1 at start: failed to start daemon"
        ):
            docker_backend.ensure_dockerd(wait=5)


@pytest.mark.parametrize("backend", ["docker", "ssh"])
def test_power_loss_needs_netns_and_says_so_before_anything_exists(backend: str, tmp_path: Path) -> None:
    hosts = tuple(SshHost(host=f"h{i}", insecure_skip_host_key_check=True) for i in range(4))
    config = TestConfig(backend=backend, nemesis=("lose-unsynced",), ssh_hosts=hosts)  # type: ignore[arg-type]
    with pytest.raises(BadInput, match="needs the netns backend"):
        build_cluster(config, tmp_path, state_dir=tmp_path / "state")
    assert not (tmp_path / "state").exists()
