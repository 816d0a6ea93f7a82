"""The systems under test declare their capabilities as protocols, and name brokers one way."""

from __future__ import annotations

from pathlib import Path

from clusters import system_def
from clusters.defined import defined_system
from clusters.own import OwnSystem
from clusters.sut import (
    HasBrokerDaemon,
    HasBrokerRegistry,
    HasClockFile,
    HasLazyfs,
    HasZookeeper,
    NamesBrokers,
    RunsOnPython,
    WaitsReady,
)
from foundation.config import TestConfig
from tests.support.nemesis_fakes import FakeNode


def test_own_and_kafka_name_brokers_alike_and_say_what_they_offer(tmp_path: Path) -> None:
    nodes = [FakeNode(f"n{i}", f"10.77.9.{10 + i}") for i in (1, 2, 3)]
    own = OwnSystem(TestConfig(), nodes, FakeNode("zk", "10.77.9.10"))
    config = TestConfig(system="kafka")
    kafka = defined_system(config, system_def.load("kafka"), {"broker": nodes}, python=lambda: "python3")
    for sut in (own, kafka):
        assert isinstance(sut, NamesBrokers) and isinstance(sut, HasBrokerRegistry)
        assert isinstance(sut, WaitsReady) and isinstance(sut, HasBrokerDaemon)
        assert [sut.broker_id(n) for n in nodes] == [1, 2, 3]
        assert (sut.node_of_broker(2), sut.node_of_broker(9)) == ("n2", None)
    assert (own.broker_daemon, kafka.broker_daemon) == ("broker", "broker")
    for capability in (HasClockFile, HasLazyfs, RunsOnPython):
        assert isinstance(own, capability) and isinstance(kafka, capability), capability.__name__
    assert isinstance(own, HasZookeeper) and not isinstance(kafka, HasZookeeper)
