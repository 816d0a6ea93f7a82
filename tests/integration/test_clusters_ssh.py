"""The ssh backend against real sshd servers, each in a network namespace of its own.

The "hosts" are namespaces `sl-ssh<tag>-<i>` on a bridge in 10.77.240.0/24 (or the next free
/24), each running `sshd -D` with a host key and an authorized client key made for the test, and
a known_hosts file naming them. They share this machine's filesystem, so the install step finds
its own earlier work (and the test checks that it skips it). A 3-broker own cluster (ZooKeeper on
a fourth host) is brought up over ssh, produced to and consumed from, a broker is killed and
restarted through the node layer, and tear-down must leave no home, process or state behind.
Bad hosts and keys must fail in one line before anything is created.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusters.factory import Cluster, build_cluster
from clusters.ssh_backend import REMOTE_ROOT, SshNode, install_software, software_paths
from clusters.state import process_alive
from clusters.system_def import BROKERS_DEFAULT as BROKER
from foundation.errors import BadInput
from tests.support.sshd import SshdHosts, ssh_config

pytestmark = [
    pytest.mark.integration,
    pytest.mark.ssh,
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
]

TIMINGS: dict[str, float] = {}


@pytest.fixture(scope="module")
def hosts(scratch: Path) -> Iterator[SshdHosts]:
    work = scratch / "sshd"
    work.mkdir()
    sshd = SshdHosts(4, work)
    try:
        sshd.start()
        yield sshd
    finally:
        sshd.stop()
        assert sshd.leftovers() == []


def remote_leftovers(cluster: Cluster, pids: dict[str, int | None], state_dir: Path) -> list[str]:
    found = []
    home = Path(REMOTE_ROOT) / "clusters" / cluster.name
    if home.exists():
        found.append(f"home {home}")
    found += [f"{name} pid {pid}" for name, pid in pids.items() if pid and process_alive(pid, None)]
    if (state_dir / f"{cluster.name}.json").exists():
        found.append("state file")
    return found


@pytest.fixture(scope="module")
def cluster(hosts: SshdHosts, scratch: Path) -> Iterator[Cluster]:
    config = ssh_config(hosts)
    state_dir = scratch / "state"
    c = build_cluster(config, scratch / "work", name=f"ssh{secrets.token_hex(2)}", state_dir=state_dir)
    started = time.monotonic()
    c.up()
    TIMINGS["ssh_up_s"] = time.monotonic() - started
    pids: dict[str, int | None] = {}
    try:
        from workloads import setup_topics

        setup_topics(config, c.bootstrap_servers())
        yield c
    finally:
        for node in c.all_nodes:
            for daemon in ("broker", "zookeeper"):
                pids[f"{node.name}/{daemon}"] = node.daemon_pid(daemon)
        started = time.monotonic()
        c.down()
        TIMINGS["ssh_down_s"] = time.monotonic() - started
        print(
            f"\nssh 3-broker cluster (sshd in namespaces): bring-up {TIMINGS['ssh_up_s']:.2f}s, "
            f"tear-down {TIMINGS['ssh_down_s']:.2f}s"
        )
        assert remote_leftovers(c, pids, state_dir) == []


def test_nodes_run_commands_on_their_hosts(cluster: Cluster, hosts: SshdHosts) -> None:
    for node in cluster.all_nodes:
        assert isinstance(node, SshNode)
        # the command runs inside the host's namespace: its address is on its eth0
        assert node.address in node.exec(["ip", "-4", "addr", "show", "eth0"]).stdout
    n1 = cluster.nodes[0]
    result = n1.exec(["sh", "-c", "cat; echo err >&2; exit 3"], input="hello", check=False)
    assert (result.exit_code, result.stdout, result.stderr.strip()) == (3, "hello", "err")
    with pytest.raises(Exception, match="timed out"):
        n1.exec(["sleep", "5"], timeout=0.5)
    # ZooKeeper got the fourth host of its own
    assert cluster.zookeeper_node is not None and cluster.zookeeper_node.address == hosts.addresses[3]


def test_install_step_skips_work_already_done(cluster: Cluster) -> None:
    node = cluster.nodes[1]
    assert isinstance(node, SshNode)
    # The source dir of the cluster's own install step is in use:
    assert Path(cluster.network.python).exists()  # type: ignore[attr-defined]
    installed = install_software(node)  # others edit the tree while tests run: bring the host up to date
    source_dir, venv, _wheels = software_paths()
    before = Path(f"{venv}/.complete").stat().st_mtime
    source_marker = Path(installed.python).parent / ".complete"
    source_before = source_marker.stat().st_mtime
    started = time.monotonic()
    software = install_software(node)
    # Skipped work shows in the untouched markers; the bound only leaves room for a loaded machine.
    assert time.monotonic() - started < 15
    assert Path(f"{venv}/.complete").stat().st_mtime == before
    assert source_marker.stat().st_mtime == source_before
    assert software.python == f"{source_dir}/python"
    assert Path(software.faketime_library).exists()
    assert node.exec([software.python, "-c", "import broker, kazoo, kio, kafka"]).ok


@pytest.mark.slow
def test_produce_consume_kill_restart(cluster: Cluster) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers(), acks="all", retries=5)
    for value in range(20):
        producer.send("t0", value=str(value).encode(), partition=0).get(timeout=30)
    leader = cluster.sut.leaders()[("t0", 0)]
    node = cluster.node(leader)
    old_pid = node.daemon_pid(BROKER)
    cluster.sut.kill(node)
    assert node.daemon_pid(BROKER) is None
    for value in range(20, 40):  # the other two keep acks=all going (min.insync 2)
        producer.send("t0", value=str(value).encode(), partition=0).get(timeout=60)
    cluster.sut.start(node, wait_ready=True)
    assert node.daemon_pid(BROKER) not in (None, old_pid)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers(), consumer_timeout_ms=10_000)
    consumer.assign([TopicPartition("t0", 0)])
    consumer.seek_to_beginning()
    values = [int(r.value) for r in consumer]
    consumer.close()
    assert values == list(range(40))


def test_pause_resume_and_collect(cluster: Cluster, scratch: Path) -> None:
    node = cluster.nodes[2]
    cluster.sut.pause(node)
    assert node.daemon_paused(BROKER)  # type: ignore[attr-defined]
    cluster.sut.resume(node)
    assert not node.daemon_paused(BROKER)  # type: ignore[attr-defined]
    dest = scratch / "collected"
    cluster.collect(dest)
    assert (dest / "n1" / "logs" / "broker.log").stat().st_size > 0
    assert list((dest / "n1" / "data").glob("t0-*"))
    assert (dest / "zk" / "logs" / "zookeeper.log").exists()


def test_bad_hosts_fail_in_one_line_before_anything_exists(hosts: SshdHosts, scratch: Path) -> None:
    state_dir = scratch / "bad-state"
    cases = {
        # a port of our own host where nothing listens (never an address outside our namespaces)
        "unreachable": (dict(port=2), "unreachable"),
        "wrong key": (dict(key_file=str(scratch / "sshd" / "host_key")), "authentication failed"),
        "unknown host key": (dict(known_hosts=str(scratch / "empty_known_hosts")), "unknown host key"),
        "missing key": (dict(key_file=str(scratch / "nope")), "does not exist"),
    }
    (scratch / "empty_known_hosts").write_text("")
    for _what, (changes, message) in cases.items():
        bad = list(ssh_config(hosts).ssh_hosts)
        bad[1] = dataclasses.replace(bad[1], **changes)  # type: ignore[arg-type]
        config = ssh_config(hosts).replace(ssh_hosts=[dataclasses.asdict(h) for h in bad])
        with pytest.raises(BadInput, match=message) as caught:
            build_cluster(config, scratch / "work", name="sshbad", state_dir=state_dir).up()
        assert "\n" not in str(caught.value)
        assert not (state_dir / "sshbad.json").exists()
        assert not (Path(REMOTE_ROOT) / "clusters" / "sshbad").exists()


def test_insecure_opt_out_accepts_an_unknown_host_key(hosts: SshdHosts, scratch: Path) -> None:
    host = hosts.host(0, known_hosts=str(scratch / "empty_known_hosts"), insecure_skip_host_key_check=True)
    (scratch / "empty_known_hosts").write_text("")
    node = SshNode("n1", host, "probe")
    try:
        assert node.exec(["true"]).ok
    finally:
        node.close()


def test_cleanup_after_a_crashed_controller(hosts: SshdHosts, scratch: Path) -> None:
    """A state file whose owner died: the next start kills its daemons and removes its homes."""
    from clusters.ssh_backend import SshNetwork
    from clusters.state import ClusterState, cleanup_leftovers

    config = ssh_config(hosts).replace(system="own", nodes=1, replication_factor=1, min_insync=1)
    state_dir = scratch / "crash-state"
    name = f"sshc{secrets.token_hex(2)}"
    network = SshNetwork(name, ["n1"], config.replace(system="kafka"), state_dir)  # no install step
    network.create({"config": config.to_json()})
    node = network.nodes["n1"]
    pid = node.start_daemon("sleeper", ["sleep", "1000"], log_path=f"{node.home}/logs/sleeper.log")
    network.nodes["n1"].close()
    state = ClusterState.load(state_dir / f"{name}.json")
    state.data["owner"] = {"pid": 999_999_999, "start": 1}  # a controller that is gone
    state.save()
    assert cleanup_leftovers(state_dir) == [name]
    assert not process_alive(pid, None)
    assert not (Path(REMOTE_ROOT) / "clusters" / name).exists()
    assert not (state_dir / f"{name}.json").exists()


def test_sudo_hosts_run_commands_and_move_files_through_sudo(hosts: SshdHosts, scratch: Path) -> None:
    node = SshNode("n1", hosts.host(0, sudo=True), f"sudo{secrets.token_hex(2)}")
    local = scratch / "sudo-up"
    (local / "sub").mkdir(parents=True)
    (local / "sub" / "f").write_text("payload")
    try:
        assert node.command_line(["id", "-u"]).startswith("sudo -n -- ")
        assert node.exec(["id", "-u"]).stdout.strip() == "0"
        node.exec(["mkdir", "-p", node.home, node.pid_dir])
        node.upload(str(local), f"{node.home}/up")
        assert node.exec(["cat", f"{node.home}/up/sub/f"]).stdout == "payload"
        node.download(f"{node.home}/up", str(scratch / "sudo-down"))
        assert (scratch / "sudo-down" / "sub" / "f").read_text() == "payload"
        pid = node.start_daemon("sleeper", ["sleep", "1000"], log_path=f"{node.home}/logs/s.log")
        assert node.daemon_pid("sleeper") == pid
        node.signal_daemon("sleeper", signal.SIGKILL)
        assert node.daemon_pid("sleeper") is None
        assert not list(Path("/tmp").glob(".strandline-down-*")) and not list(
            Path("/tmp").glob(".strandline-up-*")
        )
    finally:
        node.exec(["rm", "-rf", str(Path(node.home).parent)], check=False)
        node.close()
