"""The systems under test declare their capabilities as protocols, and name brokers one way."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from clusters import broker_identity, system_def
from clusters.defined_capabilities import defined_system
from clusters.sut import (
    HasBrokerDaemon,
    HasBrokerRegistry,
    HasClockFile,
    HasLazyfs,
    HasLeaders,
    HasZookeeper,
    NamesBrokers,
    RunsOnPython,
    ServesEveryPartition,
    WaitsReady,
)
from foundation.config import TestConfig
from tests.support.nemesis_fakes import FakeNode


def test_own_and_kafka_name_brokers_alike_and_say_what_they_offer(tmp_path: Path) -> None:
    nodes = [FakeNode(f"n{i}", f"10.77.9.{10 + i}") for i in (1, 2, 3)]
    zookeeper = [FakeNode("zk", "10.77.9.10")]
    own = defined_system(
        TestConfig(),
        system_def.load("own"),
        {"zookeeper": zookeeper, "broker": nodes},
        python=lambda: "python3",
    )
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
    sut.metadata._learn(brokers((111, "10.77.9.12:9092"), (7, "10.77.9.11:9092")))
    assert (sut.node_of_broker(111), sut.node_of_broker(7), sut.node_of_broker(1)) == ("n2", "n1", None)
    assert (sut.broker_id(nodes[0]), sut.broker_id(nodes[1]), sut.broker_id(nodes[2])) == (7, 111, 3)
    assert sut.node_of_broker(3) == "n3" and sut.node_of_broker(42) is None
    sut.metadata._learn(brokers((5, "10.99.0.1:9092")))  # advertises an address no node has
    assert sut.node_of_broker(5) is None


def brokers(*listed: tuple[int, str]) -> dict[str, object]:
    """A Metadata answer's broker list."""
    return {
        "brokers": [{"node_id": i, "host": e.split(":")[0], "port": int(e.split(":")[1])} for i, e in listed]
    }


def test_brokers_that_share_one_id_are_told_apart_by_the_answer_that_names_them() -> None:
    """Stateless brokers that each report id 111 and list only themselves: the id alone names no
    node, an id inside one broker's answer names the node that answered, and it is said once."""
    nodes = [FakeNode(f"n{i}", f"10.77.9.{10 + i}") for i in (1, 2, 3)]
    definition = dataclasses.replace(
        system_def.load("kafka"), metadata=system_def.MetadataDef(brokers="self", leaders="any-broker")
    )
    sut = defined_system(TestConfig(system="kafka"), definition, {"broker": nodes}, python=lambda: "python3")
    answers = [brokers((111, f"{n.address}:9092")) for n in nodes]
    for answer in answers:
        sut.metadata._learn(answer)
    assert [sut.broker_id(n) for n in nodes] == [111, 111, 111]
    assert sut.node_of_broker(111) is None  # three nodes advertise it: the id names none of them
    assert [sut.metadata.node_in(a, 111) for a in answers] == ["n1", "n2", "n3"]
    assert isinstance(sut, ServesEveryPartition) and not isinstance(sut, HasLeaders)
    assert not isinstance(sut, HasBrokerRegistry)  # a broker listing itself is no registry
    assert "serves every partition" in sut.leaderless()
    listings = [
        broker_identity.listing(n.name, f"{n.address}:9092", a) for n, a in zip(nodes, answers, strict=True)
    ]
    said = broker_identity.notes(listings, sut.node_of_endpoint)
    assert said == [
        "n1, n2 and n3 report the same broker id 111: brokers are told apart by the address they advertise",
        "each broker lists only itself in its Metadata: brokers are found by asking each node",
    ]
    kafka_like = [broker_identity.listing(n.name, f"{n.address}:9092", brokers(
        *((i, f"{m.address}:9092") for i, m in enumerate(nodes, 1)))) for n in nodes]  # fmt: skip
    assert broker_identity.notes(kafka_like, sut.node_of_endpoint) == []


def test_a_broker_advertising_no_node_address_is_named_in_one_line() -> None:
    seen = broker_identity.listing("n1", "10.77.9.11:9092", brokers((111, "0.0.0.0:9092")))
    assert broker_identity.unmappable(seen, lambda e: "n1" if e == "10.77.9.11:9092" else None)
    line = broker_identity.unmappable_error([seen])
    assert "n1 (10.77.9.11:9092) advertises 111 at 0.0.0.0:9092" in line and "\n" not in line


def test_every_broker_naming_itself_the_leader_of_every_partition_is_noticed() -> None:
    def answer(me: int, endpoint: str) -> dict[str, object]:
        return {
            **brokers((me, endpoint)),
            "topics": [{"name": "t0", "partitions": [{"partition_index": 0, "leader_id": me}]}],
        }

    ends = {"n1": "10.77.9.11:9092", "n2": "10.77.9.12:9092"}
    answers = [(e, answer(111, e)) for e in ends.values()]

    def node_in(a: dict[str, object], broker_id: int) -> str | None:
        listed = [f"{b['host']}:{b['port']}" for b in a["brokers"]]  # type: ignore[attr-defined,index]
        return next(n for n, e in ends.items() if e == listed[0])

    claim = broker_identity.self_claims(answers, node_in)
    assert claim is not None and "t0-0" in claim and 'metadata.leaders = "any-broker"' in claim
    assert broker_identity.self_claims(answers[:1], node_in) is None  # one answer proves nothing
