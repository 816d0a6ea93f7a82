"""Apache Kafka releases by version number: which Maven artifacts make one, fetched into the
software cache (clusters/maven.py), and what a release can do.

Kafka's `bin/` scripts only put `libs/*.jar` on a classpath and start a main class (`kafka.Kafka`,
`kafka.tools.StorageTool`); the same jars are published to Maven Central as the Scala build of the
broker (`org.apache.kafka:kafka_2.13` for 2.4 and later, `kafka_2.12` for 0.10.2 to 2.3,
`kafka_2.11` before) with its runtime dependencies. A release here is those jars plus an SLF4J
binding for the logging framework the release's own distribution ships (Log4j 2 from 4.0, Log4j 1
through reload4j before), so the broker's log reaches its output.

    folder = fetch("4.4.0", progress=print)   # <cache>/maven/kafka/4.4.0/libs/*.jar
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

from clusters import maven
from foundation.errors import BadInput

log = logging.getLogger(__name__)

GROUP = "org.apache.kafka"
# The newest release that starts on this machine's Java 17 (tried: docs/clusters.md lists them).
DEFAULT_VERSION = "4.4.0"
SCALA_LINES = ("2.13", "2.12", "2.11")
FOLDER = "kafka"  # the cache folder's name (clusters/maven.py: one per name and version)
# Log4j 2 as Kafka 4.0's distribution ships it, with its SLF4J binding (the Maven POMs of 4.x
# declare the API only); declared directly, so they win over the versions the broker pulls in.
LOG4J2 = "2.24.3"
LOG4J2_ARTIFACTS = ("log4j-api", "log4j-core", "log4j-slf4j-impl")
# Before 4.0 Kafka logs through SLF4J 1.7 to Log4j 1 (reload4j from 3.1.1 on): one binding for all.
SLF4J = "1.7.36"
RELOAD4J = "1.2.25"
JAXB = "javax.xml.bind:jaxb-api:2.3.1"
# Kafka 2.0 to 2.3 ship the ZooKeeper client 3.4.13/3.4.14, which cannot connect on Java 14 and
# later (ZOOKEEPER-3779: UnresolvedAddressException); 3.4.12, the client before that change, can.
ZOOKEEPER_CLIENT = "org.apache.zookeeper:zookeeper:3.4.12"
LOG4J1_BINDINGS = (
    "org.slf4j:slf4j-log4j12",
    "log4j:log4j",
    "org.slf4j:slf4j-reload4j",
    "ch.qos.reload4j:reload4j",
)
VERSION = re.compile(r"^\d+(\.\d+){2,3}$")


@dataclass(frozen=True)
class Features:
    """What a release can be asked to do (`refusals` turns a missing one into a reason)."""

    kraft: bool  # KRaft mode, production-ready (3.3+)
    zookeeper: bool  # ZooKeeper mode (before 4.0)
    storage_features: bool  # `kafka-storage format --feature NAME=LEVEL` (3.8+... checked: 4.0+)
    transaction_version: bool  # the transaction.version feature (KIP-890 part 2, 4.0+)
    eligible_leader_replicas: bool  # the eligible.leader.replicas.version feature (KIP-966, 4.0+)
    reassignment_api: bool  # AlterPartitionReassignments (KIP-455, 2.4+)
    describe_quorum: bool  # DescribeQuorum answered by brokers and controllers (3.3+)


def check_version(version: str) -> str:
    """The version as given, or BadInput when it is not a release number."""
    if not VERSION.match(version):
        raise BadInput(
            f"config key 'kafka_version': {version!r} is not a Kafka release number such as {DEFAULT_VERSION}"
        )
    return version


def key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def scala_line(version: str) -> str:
    """The Scala build Maven Central has for this release (the newest one it publishes)."""
    v = key(version)
    if v >= (2, 4):
        return "2.13"
    if v >= (0, 10, 2):
        return "2.12"
    return "2.11"


def features(version: str) -> Features:
    v = key(version)
    return Features(
        kraft=v >= (3, 3),
        zookeeper=v < (4, 0),
        storage_features=v >= (4, 0),
        transaction_version=v >= (4, 0),
        eligible_leader_replicas=v >= (4, 0),
        reassignment_api=v >= (2, 4),
        describe_quorum=v >= (3, 3),
    )


def artifacts(version: str) -> tuple[list[str], list[str]]:
    """(coordinates, exclusions) that make the release's libs/: the broker's Scala build and the
    logging its distribution ships."""
    broker = f"{GROUP}:kafka_{scala_line(version)}:{version}"
    if key(version) >= (4, 0):
        return [broker, *(f"org.apache.logging.log4j:{a}:{LOG4J2}" for a in LOG4J2_ARTIFACTS)], []
    # Before 2.0 the broker needs JAXB, which Java 11 dropped from the JDK (as on any newer Java).
    jaxb = [JAXB] if key(version) < (2, 0) else []
    zookeeper = [ZOOKEEPER_CLIENT] if (2, 0) <= key(version) < (2, 4) else []
    log4j1 = [
        *jaxb,
        *zookeeper,
        f"org.slf4j:slf4j-api:{SLF4J}",
        f"org.slf4j:slf4j-reload4j:{SLF4J}",
        f"ch.qos.reload4j:reload4j:{RELOAD4J}",
    ]
    return [broker, *log4j1], list(LOG4J1_BINDINGS[:2])


def fetched(version: str) -> Path | None:
    """The release's folder when it was fetched already (no network)."""
    coordinates, _ = artifacts(version)
    return maven.resolved(FOLDER, version, coordinates)


def fetch(version: str, *, progress: maven.Progress | None = None) -> Path:
    """The folder of the release (`libs/*.jar`), fetched from Maven Central on first use.

    A version Maven Central does not list is BadInput naming the nearest releases; an unreachable
    repository is maven.MavenUnreachable (exit 4), with nothing left half-written."""
    check_version(version)
    coordinates, exclusions = artifacts(version)
    done = maven.resolved(FOLDER, version, coordinates)
    if done is not None:
        return done
    try:
        return maven.resolve(coordinates, FOLDER, version, exclusions=exclusions, progress=progress)
    except maven.MavenUnreachable:
        raise
    except Exception:
        known = releases()
        if version not in known:
            near = ", ".join(maven.nearest(version, known)) or "none listed"
            raise BadInput(f"Kafka {version} is not on Maven Central (nearest releases: {near})") from None
        raise


def releases() -> list[str]:
    """Every Kafka release Maven Central lists, over the Scala builds (oldest first)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(SCALA_LINES)) as pool:  # three Maven runs at once
        lists = list(pool.map(lambda scala: maven.released_versions(GROUP, f"kafka_{scala}"), SCALA_LINES))
    found = {v for versions in lists for v in versions if VERSION.match(v)}
    return sorted(found, key=key)


def version_in_folder(folder: Path) -> str | None:
    """The release a folder of Kafka jars holds (`libs/kafka_<scala>-<version>.jar`), or None."""
    for jar in sorted((folder / "libs").glob("kafka_2.*-*.jar")):
        m = re.match(r"kafka_2\.\d+-(\d+(?:\.\d+){2,3})\.jar$", jar.name)
        if m:
            return m.group(1)
    return None
