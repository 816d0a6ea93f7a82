"""Broker properties from every TestConfig variant; names that fit the kernel's limits."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from clusters import system_def
from clusters.defined_capabilities import defined_system
from clusters.factory import build_cluster, default_cluster_name
from clusters.faketime import CLOCK_FAULTS, faketime_env, wants_clock
from clusters.lazyfs_mount import wants_lazyfs
from clusters.netns import NetnsNetwork
from foundation.config import TestConfig, validate
from foundation.errors import BadInput, InfrastructureError
from nemesis.packages import ALIASES, PACKAGES
from nemesis.packages.clockskew import Clock
from tests.support.nemesis_fakes import FakeNode


def parse(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


OWN = system_def.load("own")  # `--system own`


def render_broker_properties(
    config: TestConfig, broker_id: int, address: str, zookeeper_connect: str, home: str
) -> str:
    """The broker.properties that systems/own.toml gives broker `broker_id` (data dir: home/data)."""
    values = system_def.config_values(config)
    zk_address = zookeeper_connect.rsplit(":", 1)[0]
    values.update(system_def.role_values(OWN.role("zookeeper"), [(1, zk_address)]))
    values.update(system_def.role_values(OWN.broker_role, [(broker_id, address)]))
    values.update(system_def.own_role_values(OWN.broker_role, values))
    values.update({"id": str(broker_id), "address": address, "home": home})
    (properties,) = OWN.broker_role.files
    return system_def.render_file(properties, values)


class _HomeNode(FakeNode):
    home = "/w/c/n1"  # where the netns backend puts node n1 of cluster c under work dir /w


def own_system(config: TestConfig, brokers: list[FakeNode]) -> Any:
    """`--system own` on fake nodes (ZooKeeper on node zk)."""
    nodes = {"zookeeper": [FakeNode("zk", "10.77.9.10")], "broker": brokers}
    return defined_system(config, OWN, nodes, python=lambda: "/py")


def test_defaults_render_the_safe_settings() -> None:
    props = parse(render_broker_properties(TestConfig(), 2, "10.77.5.12", "10.77.5.10:2181", "/h"))
    assert props["broker.id"] == "2"
    assert props["listeners"] == props["advertised.listeners"] == "PLAINTEXT://10.77.5.12:9092"
    assert props["zookeeper.connect"] == "10.77.5.10:2181"
    assert props["log.dirs"] == "/h/data"
    assert props["replication.truncation"] == "leader-epoch"
    assert props["min.insync.replicas"] == "2"
    assert props["default.replication.factor"] == "3"
    assert props["unclean.leader.election.enable"] == "false"
    assert props["leader.election.policy"] == "first-in-isr"
    assert props["auto.create.topics.enable"] == "false"
    assert "log.flush.interval.messages" not in props  # unset: never fsync on append


def test_every_variant_reaches_the_properties() -> None:
    config = validate(
        {
            "variant": "high-watermark",
            "min_insync": 1,
            "unclean_election": True,
            "replication_factor": 2,
            "leader_election_policy": "longest-log",
            "log_flush_interval_messages": 1,
            "replica_high_watermark_checkpoint_interval_ms": 100,
            "zookeeper_session_timeout_ms": 4000,
            "replica_lag_time_max_ms": 3000,
            "partitions": 5,
        }
    )
    props = parse(render_broker_properties(config, 1, "10.77.1.11", "zk:2181", "/h"))
    assert props["replication.truncation"] == "high-watermark"
    assert props["min.insync.replicas"] == "1"
    assert props["unclean.leader.election.enable"] == "true"
    assert props["default.replication.factor"] == "2"
    assert props["leader.election.policy"] == "longest-log"
    assert props["log.flush.interval.messages"] == "1"
    assert props["replica.high.watermark.checkpoint.interval.ms"] == "100"
    assert props["zookeeper.session.timeout.ms"] == "4000"
    assert props["replica.lag.time.max.ms"] == "3000"
    assert props["num.partitions"] == "5"


def test_layout_command_and_faketime() -> None:
    node = _HomeNode("n1", "10.77.9.11")
    own = own_system(TestConfig(), [node])
    values = own.values(node)
    config_path = system_def.render(OWN.broker_role.files[0].path, values)
    data_dir = system_def.render(OWN.broker_role.data_dirs[0], values)
    assert config_path == "/w/c/n1/broker.properties" and data_dir == "/w/c/n1/data"
    command = [system_def.render(a, values) for a in OWN.broker_role.start]
    assert command == ["/py", "-m", "broker", "--config", config_path]
    env = faketime_env(values["clock_file"])
    assert env["FAKETIME_TIMESTAMP_FILE"] == "/w/c/n1/clock"
    assert env["FAKETIME_DONT_FAKE_MONOTONIC"] == "1" and env["FAKETIME_NO_CACHE"] == "1"
    assert Path(env["LD_PRELOAD"]).is_file()


def test_cluster_names_fit_interface_names() -> None:
    for name in ("queue", "A very long test name!", "---"):
        cluster = default_cluster_name(TestConfig(name=name))
        assert re.fullmatch(r"[a-z0-9]{1,10}", cluster)
        assert len(f"slbr-{cluster}") <= 15
        assert len("slv254-n32") <= 15
    assert default_cluster_name(TestConfig()) != default_cluster_name(TestConfig())


@pytest.mark.parametrize("bad", ["", "UPPER", "elevenchars", "a-b", "x/y"])
def test_bad_cluster_names_are_bad_input(bad: str, tmp_path: Path) -> None:
    with pytest.raises(BadInput):
        NetnsNetwork(bad, ["n1"], tmp_path, tmp_path)


def test_a_cluster_is_described_before_it_exists(tmp_path: Path) -> None:
    cluster = build_cluster(TestConfig(nodes=3), tmp_path, name="unit1", state_dir=tmp_path / "state")
    assert [n.name for n in cluster.nodes] == ["n1", "n2", "n3"]
    assert cluster.zookeeper_node is not None and cluster.zookeeper_node.name == "zk"
    assert [n.netns for n in cluster.network.nodes.values()] == [
        f"sl-unit1-{n}" for n in ("zk", "n1", "n2", "n3")
    ]
    with pytest.raises(InfrastructureError, match="not up"):
        cluster.bootstrap_servers()
    cluster.down()  # nothing was created: nothing to remove, no error


@pytest.mark.parametrize(
    "raw,wanted",
    [
        ({}, False),
        ({"nemesis": "kill,pause"}, False),
        ({"nemesis": "lose-unsynced"}, True),
        ({"nemesis": "lose-unsynced:all"}, True),
        ({"nemesis": "kill+power-loss"}, True),
        ({"schedule": [{"do": "lose-unsynced", "target": "one"}]}, True),
    ],
)
def test_data_dirs_go_on_lazyfs_only_for_the_power_loss_fault(raw: dict[str, object], wanted: bool) -> None:
    assert wants_lazyfs(validate(raw)) is wanted


@pytest.mark.parametrize(
    "raw,wanted",
    [
        ({}, False),
        ({"nemesis": "kill,pause,partition,loss"}, False),
        ({"nemesis": "clock"}, True),
        ({"nemesis": "kill+clock-strobe:leader"}, True),
        ({"nemesis": "skew"}, True),
        ({"nemesis": "all"}, True),
        ({"schedule": [{"do": "clock-bump", "target": "one", "offset": "+30s"}]}, True),
        ({"schedule": [{"do": "kill", "target": "one"}]}, False),
    ],
)
def test_brokers_run_under_libfaketime_only_for_clock_faults(raw: dict[str, object], wanted: bool) -> None:
    assert wants_clock(validate(raw)) is wanted


def test_every_clock_fault_is_known_to_the_system() -> None:
    clock_packages = {name for name, package in PACKAGES.items() if isinstance(package, Clock)}
    clock_aliases = {alias for alias, name in ALIASES.items() if name in clock_packages}
    assert clock_packages and clock_packages | clock_aliases == CLOCK_FAULTS


class _StartingNode(FakeNode):
    """Keeps the environment each daemon was started with."""

    started: dict[str, dict[str, str]]

    def start_daemon(
        self, name: str, argv: list[str], *, env: dict[str, str] | None = None, log_path: str
    ) -> int:
        self.started = {**getattr(self, "started", {}), name: dict(env or {})}
        return 1


@pytest.mark.parametrize("nemesis,preloaded", [((), False), (("kill", "clock"), True)])
def test_a_broker_preloads_libfaketime_only_when_its_clock_may_be_skewed(
    nemesis: tuple[str, ...], preloaded: bool
) -> None:
    node = _StartingNode("n1", "10.77.9.11")
    own = own_system(TestConfig(nemesis=nemesis), [node])
    own._start(node, fresh=True)
    env = node.started["broker"]
    assert ("LD_PRELOAD" in env) is preloaded and env["PYTHONUNBUFFERED"] == "1"
    # without the preload the clock fault has no file to write, so it refuses instead of doing nothing
    assert bool(own.clock_file(node)) is preloaded
