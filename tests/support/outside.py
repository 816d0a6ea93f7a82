"""Clusters started outside strandline, on the sshd hosts of tests/support/sshd.py, as an operator's
service manager would run them: each process is a "service" with a small script of its own
(`service.sh start|kill|stop|pause|resume`, a stand-in for `systemctl`), started here through
`ip netns exec` and afterwards only through the commands an external definition grants over ssh.
Nothing of strandline's cluster code starts them."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

from clusters import system_def
from clusters.local import REPO_ROOT
from clusters.ports import port_open
from tests.support.sshd import SshdHosts

SERVICE = r"""#!/bin/sh
# $1: start | kill | stop | pause | resume: one process, its process group in service.pid
dir=$(dirname "$(readlink -f "$0")"); pidfile="$dir/service.pid"
alive() { [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }
case "$1" in
  start) alive && exit 0
         cd "$dir" && setsid sh "$dir/run.sh" >> "$dir/service.out" 2>&1 < /dev/null &
         echo $! > "$pidfile" ;;
  kill) alive && /bin/kill -s KILL -- -"$(cat "$pidfile")"; while alive; do sleep 0.1; done; rm -f "$pidfile" ;;
  stop) alive && /bin/kill -s TERM -- -"$(cat "$pidfile")"; while alive; do sleep 0.2; done; rm -f "$pidfile" ;;
  pause) /bin/kill -s STOP -- -"$(cat "$pidfile")" ;;
  resume) /bin/kill -s CONT -- -"$(cat "$pidfile")" ;;
  *) echo "usage: $0 start|kill|stop|pause|resume" >&2; exit 2 ;;
esac
"""

# What an operator grants for a partition: its own iptables chain, dropping what `{drop}` names.
PARTITION = (
    "iptables -w -N OPS-CUT 2>/dev/null; iptables -w -C INPUT -j OPS-CUT 2>/dev/null || "
    'iptables -w -I INPUT -j OPS-CUT; for a in {drop}; do iptables -w -A OPS-CUT -s "$a" -j DROP; done'
)
HEAL = "iptables -w -F OPS-CUT 2>/dev/null || true"


class Services:
    """Services in the sshd hosts' namespaces: `add` one (its run.sh), `start` it, `stop_all`."""

    def __init__(self, hosts: SshdHosts, root: Path) -> None:
        self.hosts = hosts
        self.root = root
        self.dirs: dict[str, tuple[int, Path]] = {}
        self.ports: dict[str, int] = {}  # the port a service serves on, when later ones need it

    def add(self, name: str, host: int, run: str, files: dict[str, str] | None = None) -> Path:
        folder = self.root / name
        folder.mkdir(parents=True)
        (folder / "service.sh").write_text(SERVICE)
        (folder / "service.sh").chmod(0o755)
        (folder / "run.sh").write_text(f"#!/bin/sh\ncd {folder}\nexec {run}\n")
        for file, content in (files or {}).items():
            (folder / file).write_text(content)
        self.dirs[name] = (host, folder)
        return folder

    def start(self, name: str) -> None:
        host, folder = self.dirs[name]
        subprocess.run(
            ["ip", "netns", "exec", self.hosts.namespaces[host], "sh", str(folder / "service.sh"), "start"],
            check=True,
            timeout=30,
        )

    def command(self, name: str, action: str) -> str:
        """The command an external definition gives for this service (run there over ssh)."""
        return f"sh {self.dirs[name][1] / 'service.sh'} {action}"

    def fresh(self, wipe: list[str]) -> None:
        """What an operator does to start over: every service killed, the `wipe` folders (relative
        to the services' folders) emptied, every service started again in the order added."""
        self.stop_all()
        for path in wipe:
            shutil.rmtree(self.root / path, ignore_errors=True)
            (self.root / path).mkdir()
        for name in self.dirs:
            self.start(name)
            if name in self.ports:  # the next may need it (brokers need ZooKeeper)
                wait_port(self.hosts.addresses[self.dirs[name][0]], self.ports[name], 90, name)

    def stop_all(self) -> None:
        for host, folder in self.dirs.values():
            subprocess.run(
                [
                    "ip",
                    "netns",
                    "exec",
                    self.hosts.namespaces[host],
                    "sh",
                    str(folder / "service.sh"),
                    "kill",
                ],
                check=False,
                timeout=30,
            )


def wait_port(address: str, port: int, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not port_open(address, port):
        assert time.monotonic() < deadline, f"{what} at {address}:{port} did not start"
        time.sleep(0.2)


def wait_brokers(brokers: list[str], timeout: float) -> None:
    for broker in brokers:
        host, _, port = broker.rpartition(":")
        wait_port(host, int(port), timeout, "broker")


def delete_topics(brokers: list[str], topics: list[str]) -> None:
    """Delete the test's topics (Kafka's DeleteTopics), as an operator cleans up between runs."""
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=brokers, request_timeout_ms=30000)
    try:
        existing = [t for t in topics if t in admin.list_topics()]
        if existing:
            admin.delete_topics(existing, timeout_ms=30000)
        deadline = time.monotonic() + 60
        while set(topics) & set(admin.list_topics()):
            assert time.monotonic() < deadline, f"topics {topics} not deleted"
            time.sleep(0.5)
    finally:
        admin.close()


def fill_topic(brokers: list[str], topic: str, partitions: int = 2, replicas: int = 3) -> None:
    """One record in `topic` (created when missing), as an earlier run would have left there."""
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=brokers, request_timeout_ms=30000)
    try:
        if topic not in admin.list_topics():
            admin.create_topics([NewTopic(topic, partitions, replicas)], timeout_ms=30000)
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=brokers, acks="all", retries=10)
    try:
        producer.send(topic, b"left by an earlier run", partition=0).get(timeout=60)
    finally:
        producer.close()


def zookeeper(services: Services, host: int) -> str:
    """Debian's ZooKeeper as systems/own.toml runs it; returns its connect string."""
    role = system_def.load(system_def.SYSTEMS_DIR / "own.toml").role("zookeeper")
    address = services.hosts.addresses[host]
    folder = services.root / "zk"
    values = {"home": str(folder), "port": "2181", "address": address}
    command = system_def.render(role.start, values) if isinstance(role.start, str) else ""
    files = {
        Path(system_def.render(f.path, values)).name: system_def.render(f.content, values) for f in role.files
    }
    services.add("zk", host, command, files)
    services.ports["zk"] = 2181
    (folder / "zookeeper").mkdir()
    services.start("zk")
    wait_port(address, 2181, 60, "ZooKeeper")
    return f"{address}:2181"


def own_brokers(services: Services, hosts: list[int], zookeeper_connect: str) -> list[str]:
    """The own broker on each host (ids 1..N), safe settings; returns each broker's host:port."""
    brokers = []
    for i, host in enumerate(hosts, start=1):
        address = services.hosts.addresses[host]
        folder = services.root / f"b{i}"
        properties = "\n".join(
            [
                f"broker.id={i}",
                f"listeners=PLAINTEXT://{address}:9092",
                f"advertised.listeners=PLAINTEXT://{address}:9092",
                f"log.dirs={folder}/data",
                f"zookeeper.connect={zookeeper_connect}",
                "zookeeper.session.timeout.ms=6000",
                "default.replication.factor=3",
                "min.insync.replicas=2",
                "auto.create.topics.enable=false",
            ]
        )
        run = f"env PYTHONUNBUFFERED=1 PYTHONPATH={REPO_ROOT} {sys.executable} -m broker --config {folder}/broker.properties"
        services.add(f"b{i}", host, run, {"broker.properties": properties + "\n"})
        services.start(f"b{i}")
        brokers.append(f"{address}:9092")
    wait_brokers(brokers, 90)
    return brokers


def kafka_brokers(services: Services, hosts: list[int], release: Path) -> list[str]:
    """Apache Kafka in KRaft mode, every node a broker and a controller (as systems/kafka-kraft.toml
    runs it, by hand): storage formatted here, then each started as a service; returns host:port."""
    addresses = [services.hosts.addresses[h] for h in hosts]
    voters = ",".join(f"{i}@{a}:9093" for i, a in enumerate(addresses, start=1))
    classpath = f"{release}/libs/*"
    cluster_id = system_def.new_cluster_id()
    brokers = []
    for i, (host, address) in enumerate(zip(hosts, addresses, strict=True), start=1):
        folder = services.root / f"b{i}"
        properties = "\n".join(
            [
                "process.roles=broker,controller",
                f"node.id={i}",
                f"controller.quorum.voters={voters}",
                f"listeners=PLAINTEXT://{address}:9092,CONTROLLER://{address}:9093",
                f"advertised.listeners=PLAINTEXT://{address}:9092",
                "controller.listener.names=CONTROLLER",
                "inter.broker.listener.name=PLAINTEXT",
                "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                f"log.dirs={folder}/data",
                "default.replication.factor=3",
                "min.insync.replicas=2",
                "offsets.topic.replication.factor=3",
                "transaction.state.log.replication.factor=3",
                "transaction.state.log.min.isr=2",
                "broker.session.timeout.ms=12000",
                "auto.create.topics.enable=false",
                "group.initial.rebalance.delay.ms=0",
            ]
        )
        java = "java -Xms256m -Xmx512m -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:ParallelGCThreads=2 -XX:CICompilerCount=2"
        run = f"{java} -cp '{classpath}' kafka.Kafka {folder}/server.properties"
        services.add(f"b{i}", host, run, {"server.properties": properties + "\n"})
        subprocess.run(
            [
                "java",
                "-Xmx256m",
                "-cp",
                classpath,
                "kafka.tools.StorageTool",
                "format",
                "--ignore-formatted",
                "-t",
                cluster_id,
                "-c",
                str(folder / "server.properties"),
            ],  # fmt: skip
            check=True,
            capture_output=True,
            timeout=120,
        )
        services.start(f"b{i}")
        brokers.append(f"{address}:9092")
    wait_brokers(brokers, 180)
    return brokers
