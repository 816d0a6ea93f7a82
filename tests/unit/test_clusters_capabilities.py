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


def test_brokers_are_known_by_the_address_they_advertise_not_by_an_assumed_number() -> None:
    """A system that numbers its brokers its own way (111, 7) is mapped by advertised host:port;
    a broker not seen in Metadata yet falls back to the id the definition gives its node."""
    nodes = [FakeNode(f"n{i}", f"10.77.9.{10 + i}") for i in (1, 2, 3)]
    sut = defined_system(
        TestConfig(system="kafka"), system_def.load("kafka"), {"broker": nodes}, python=lambda: "python3"
    )
    assert [sut.broker_id(n) for n in nodes] == [1, 2, 3]  # nothing advertised yet: the file's ids
    sut.metadata.endpoints.update({111: "10.77.9.12:9092", 7: "10.77.9.11:9092"})
    assert (sut.node_of_broker(111), sut.node_of_broker(7), sut.node_of_broker(1)) == ("n2", "n1", None)
    assert (sut.broker_id(nodes[0]), sut.broker_id(nodes[1]), sut.broker_id(nodes[2])) == (7, 111, 3)
    assert sut.node_of_broker(3) == "n3" and sut.node_of_broker(42) is None
    sut.metadata.endpoints[5] = "10.99.0.1:9092"  # advertises an address no node has
    assert sut.node_of_broker(5) is None
