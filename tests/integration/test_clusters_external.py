"""A cluster strandline did not start (`managed = false`): the own broker with ZooKeeper, started by
this module as an operator's services on sshd hosts in network namespaces (tests/support/outside.py),
tested through a definition that grants kill, start, stop, pause, resume, partition and heal as
commands run over ssh. The run kills a broker by its command and starts it again at heal, collects
the data dirs it names over sftp, and leaves every service running as it found it; a fault whose
command is missing is refused in one line (exit 2) before anything is created.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clusters.ports import port_open
from foundation.config import TestConfig
from harness.compose import compose
from harness.run import run_test
from tests.support.outside import (
    HEAL,
    PARTITION,
    Services,
    delete_topics,
    fill_topic,
    kafka_brokers,
    own_brokers,
    wait_brokers,
    zookeeper,
)
from tests.support.sshd import SshdHosts

pytestmark = [
    pytest.mark.integration,
    pytest.mark.ssh,
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
]


class Outside:
    def __init__(
        self, hosts: SshdHosts, services: Services, brokers: list[str], zookeeper: bool = True
    ) -> None:
        self.hosts, self.services, self.brokers, self.zookeeper = hosts, services, brokers, zookeeper

    def definition(self, path: Path, *, granted: tuple[str, ...], data_dirs: bool = True) -> Path:
        """The definition an operator writes: ssh defaults, the partition commands for every
        node, and per node its broker, data dir and its service's commands."""
        lines = [
            'name = "outside"',
            "managed = false",
            "[ssh]",
            f'key_file = "{self.hosts.client_key}"',
            f'known_hosts = "{self.hosts.known_hosts}"',
            "[commands]",
            *([f"partition = '{PARTITION}'", f"heal = '{HEAL}'"] if "partition" in granted else []),
        ]
        for i, broker in enumerate(self.brokers, start=1):
            service = f"b{i}"
            commands = ", ".join(
                f'{c} = "{self.services.command(service, c)}"' for c in granted if c != "partition"
            )
            lines += ["[[nodes]]", f'broker = "{broker}"', f"commands = {{ {commands} }}"]
            if data_dirs:
                lines.append(f'data_dirs = ["{self.services.dirs[service][1]}/data"]')
        path.write_text("\n".join(lines) + "\n")
        return path

    def running(self) -> dict[str, bool]:
        """Every service answers on its port (strandline stopped none of them)."""
        out = {"zk": port_open(self.hosts.addresses[3], 2181)} if self.zookeeper else {}
        for i, broker in enumerate(self.brokers, start=1):
            host, _, port = broker.rpartition(":")
            out[f"b{i}"] = port_open(host, int(port))
        return out


@pytest.fixture(scope="module")
def outside(scratch: Path) -> Iterator[Outside]:
    (scratch / "sshd").mkdir()
    hosts = SshdHosts(4, scratch / "sshd")
    services = Services(hosts, scratch / "services")
    try:
        hosts.start()
        brokers = own_brokers(services, [0, 1, 2], zookeeper(services, 3))
        yield Outside(hosts, services, brokers)
    finally:
        services.stop_all()
        hosts.stop()


def config(definition: Path, store: Path, **changes: object) -> TestConfig:
    base = TestConfig(
        system=str(definition),
        partitions=2,
        replication_factor=3,
        min_insync=2,
        checker="reference",
        time_limit=20,
        nemesis_interval=4,
        store=str(store),
        seed=7,
    )
    return TestConfig(**{**base.__dict__, **changes})  # type: ignore[arg-type]


def faulted_run(
    definition: Path, store: Path, **changes: object
) -> tuple[Path, dict[str, Any], list[dict[str, Any]]]:
    """Run the test; its run dir, results.json and history, its exit code asserted 0 (valid)."""
    started = time.monotonic()
    outcome = run_test(compose(config(definition, store, **changes)), live=False, screenshot=False)
    results = json.loads((outcome.run_dir / "results.json").read_text())
    ops = [json.loads(line) for line in (outcome.run_dir / "history.jsonl").read_text().splitlines()]
    power = results.get("power", {}).get("run")
    print(f"\nexternal run {changes.get('nemesis')}: {time.monotonic() - started:.1f}s, power {power}")
    said = {k: v for k, v in results.items() if k not in ("stats", "checker", "power")}
    assert outcome.exit_code == 0, (outcome.reason, said, results.get("power", {}).get("reasons"))
    return outcome.run_dir, results, ops


def test_kill_by_the_operators_commands(outside: Outside, scratch: Path) -> None:
    definition = outside.definition(scratch / "outside.toml", granted=("kill", "start"))
    run, results, ops = faulted_run(definition, scratch / "store", nemesis=("kill:one",))
    faults = [(op["f"], op["type"]) for op in ops if op["process"] == "nemesis"]
    assert results["valid"] is True
    assert ("kill", "ok") in faults and ("start", "ok") in faults
    assert json.loads((run / "test.json").read_text())["config"]["nodes"] == 3
    # The data dirs named in the definition were collected over sftp and read by the replica checks.
    assert list((run / "nodes" / "n1" / "data").glob("t0-*"))
    assert not (run / "nodes" / "replicas-unavailable.txt").exists()
    # Nothing was torn down: every service still runs, the killed broker again.
    assert outside.running() == {"zk": True, "b1": True, "b2": True, "b3": True}


def test_topics_an_earlier_run_filled_are_refused(outside: Outside, scratch: Path) -> None:
    """Records an earlier run left in t0 (the kill run above, or one put there here) would read as
    the next run's own."""
    fill_topic(outside.brokers, "t0")
    definition = outside.definition(scratch / "again.toml", granted=("kill", "start"), data_dirs=False)
    outcome = run_test(
        compose(config(definition, scratch / "store", time_limit=5)), live=False, screenshot=False
    )
    assert outcome.exit_code == 2 and "already holds records" in outcome.reason, outcome.reason
    assert not (outcome.run_dir / "history.jsonl").exists()


@pytest.mark.slow
def test_partition_by_the_operators_commands_without_data_dirs(outside: Outside, scratch: Path) -> None:
    outside.services.fresh(["zk/zookeeper", "b1/data", "b2/data", "b3/data"])  # the operator starts over
    wait_brokers(outside.brokers, 90)
    granted = ("kill", "start", "partition")
    definition = outside.definition(scratch / "cut.toml", granted=granted, data_dirs=False)
    run, results, ops = faulted_run(definition, scratch / "store", nemesis=("partition:one",))
    cuts = [op for op in ops if op["process"] == "nemesis" and op["f"] == "partition" and op["type"] == "ok"]
    assert cuts and all(op["value"]["grudge"] for op in cuts)
    # No data dirs named: the replica-log checks say they were not available, and the verdict stands.
    assert "replicas_unavailable" in results
    assert "no data_dirs" in (run / "nodes" / "replicas-unavailable.txt").read_text()
    # Cut by the operator's command (its chain exists where it ran), healed (the chain is empty).
    for ns in (
        outside.hosts.namespaces[int(n[1:]) - 1]
        for op in cuts
        for n, drops in op["value"]["grudge"].items()
        if drops
    ):
        rules = subprocess.run(
            ["ip", "netns", "exec", ns, "iptables", "-w", "-S", "OPS-CUT"], capture_output=True, text=True
        )
        assert rules.returncode == 0 and "DROP" not in rules.stdout, rules
    assert outside.running() == {"zk": True, "b1": True, "b2": True, "b3": True}


def test_a_fault_without_its_command_is_refused_before_anything(outside: Outside, scratch: Path) -> None:
    definition = outside.definition(scratch / "no-pause.toml", granted=("kill", "start"), data_dirs=False)
    store = scratch / "refused"
    strandline = str(Path(sys.executable).parent / "strandline")
    done = subprocess.run(
        [strandline, "run", "--system", str(definition), "--nemesis", "pause", "--store", str(store)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "fault 'pause' needs the command 'pause'" in lines[0], lines
    assert not store.exists()


@pytest.fixture(scope="module")
def outside_kafka(scratch: Path, release: str) -> Iterator[Outside]:
    from clusters import kafka_release

    (scratch / "sshd-kafka").mkdir()
    hosts = SshdHosts(3, scratch / "sshd-kafka")
    services = Services(hosts, scratch / "kafka-services")
    try:
        hosts.start()
        brokers = kafka_brokers(services, [0, 1, 2], kafka_release.fetch(release))
        yield Outside(hosts, services, brokers, zookeeper=False)
    finally:
        services.stop_all()
        hosts.stop()


@pytest.mark.slow
@pytest.mark.kafka
@pytest.mark.timeout(900)
@pytest.mark.parametrize("fault", ["kill:one", "partition:one"])
def test_real_kafka_started_outside(outside_kafka: Outside, scratch: Path, fault: str) -> None:
    """Apache Kafka 4.4.0 in KRaft mode, started by this module: killed and started again, and
    cut off, by the operator's commands; valid, with load in every fault window."""
    granted = ("kill", "start", "partition")
    definition = outside_kafka.definition(scratch / "kafka.toml", granted=granted)
    delete_topics(outside_kafka.brokers, ["t0"])  # what an earlier run left (none before the first)
    store = scratch / "kafka-store"
    # Kafka's broker session is 12 s here (as in the other real-Kafka runs under faults)
    run, _results, _ops = faulted_run(
        definition,
        store,
        nemesis=(fault,),
        client="confluent-kafka",  # as the other real-Kafka runs under faults (kafka-python's
        zookeeper_session_timeout_ms=12000,  # sends stalled for 41 s after a kill here)
        time_limit=30,
        nemesis_interval=8,
        seed=3,
    )
    assert list((run / "nodes" / "n1" / "data").glob("t0-*"))
    assert outside_kafka.running() == {"b1": True, "b2": True, "b3": True}
