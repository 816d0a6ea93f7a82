"""The stand-in for a third-party system whose brokers do not know each other: systems/own.toml with
`shared.node.id=111` (every broker answers Metadata as node 111, alone, leader of every partition,
and passes on underneath what another broker really leads) and `[metadata] brokers = "self"`
(docs/systems.md, "A stand-in made from the own broker"). Written from own.toml at test time, so
the two never drift apart."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OWN = REPO / "systems" / "own.toml"
SHARED_ID = 111


# What makes systems/own.toml read ZooKeeper (`--system own`), and what a system that is known only
# through Kafka's protocol says instead: leaders, registry and readiness from Metadata.
THROUGH_ZOOKEEPER = {
    'state = "zookeeper"': 'state = "metadata"',
    'membership = "zookeeper"': 'membership = "none"',
    'ready = { kind = "zookeeper", timeout = 60 }': 'ready = { kind = "kafka", timeout = 90 }',
}


def through_kafka_protocol(own: str) -> str:
    """own.toml's text as a system strandline sees only through Kafka's protocol, as a third-party
    system is seen: no ZooKeeper reads (the stand-ins below are made from it)."""
    for zookeeper, kafka in THROUGH_ZOOKEEPER.items():
        if zookeeper not in own:
            raise AssertionError(f"{OWN} no longer says {zookeeper}")
        own = own.replace(zookeeper, kafka)
    return own


def standin_definition(directory: Path, name: str = "standin") -> Path:
    """The stand-in's definition file in `directory`."""
    own = through_kafka_protocol(OWN.read_text())
    text = own.replace("broker.id={id}\n", f"broker.id={{id}}\nshared.node.id={SHARED_ID}\n")
    if text == own:
        raise AssertionError(f"{OWN} no longer has a broker.id line to add shared.node.id after")
    text = text.replace('name = "own"', f'name = "{name}"', 1)
    path = directory / f"{name}.toml"
    path.write_text(
        text + '\n[metadata]\nbrokers = "self"            # each broker lists only itself, as node 111\n'
    )
    return path
