"""The Maven resolver's pure parts (clusters/maven.py) and which artifacts make a Kafka release
(clusters/kafka_release.py); tests/integration/test_clusters_maven.py runs `mvn` itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusters import kafka_release, maven
from foundation.errors import BadInput


def test_a_complete_folder_is_reused_without_maven(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRANDLINE_CACHE", str(tmp_path))
    monkeypatch.setattr(maven, "MVN", "/nonexistent/mvn")
    coordinates, _ = kafka_release.artifacts("3.9.1")
    folder = maven.folder_of("kafka", "3.9.1")
    (folder / "libs").mkdir(parents=True)
    (folder / maven.MARKER).write_text(json.dumps({"artifacts": coordinates}))
    assert kafka_release.fetch("3.9.1") == folder
    (folder / maven.MARKER).write_text(json.dumps({"artifacts": coordinates[:1]}))  # another set
    assert kafka_release.fetched("3.9.1") is None


def test_releases_pick_their_scala_build_and_logging() -> None:
    assert [kafka_release.scala_line(v) for v in ("0.10.1.1", "0.11.0.3", "2.3.1", "2.4.0", "4.4.0")] == [
        "2.11", "2.12", "2.12", "2.13", "2.13"
    ]  # fmt: skip
    new, excluded = kafka_release.artifacts("4.4.0")
    assert new[0] == "org.apache.kafka:kafka_2.13:4.4.0" and not excluded
    assert any(a.startswith("org.apache.logging.log4j:log4j-slf4j-impl:") for a in new)
    old, excluded = kafka_release.artifacts("0.11.0.3")
    assert old[0] == "org.apache.kafka:kafka_2.12:0.11.0.3" and "log4j:log4j" in excluded
    assert kafka_release.JAXB in old and kafka_release.JAXB not in kafka_release.artifacts("2.0.1")[0]
    assert kafka_release.ZOOKEEPER_CLIENT in kafka_release.artifacts("2.0.1")[0]  # ZOOKEEPER-3779
    assert kafka_release.ZOOKEEPER_CLIENT not in kafka_release.artifacts("2.4.0")[0]
    with pytest.raises(BadInput, match="not a Kafka release number"):
        kafka_release.check_version("4.4")


def test_nearest_releases_share_the_longest_prefix() -> None:
    known = ["3.6.2", "3.7.0", "3.7.1", "3.7.2", "3.8.0", "4.3.1", "4.4.0"]
    assert maven.nearest("3.7.5", known, 3) == ["3.7.0", "3.7.1", "3.7.2"]
    assert maven.nearest("9.9.9", known, 2) == ["4.3.1", "4.4.0"]
    assert maven.version_key("0.10.2.2") < maven.version_key("0.11.0.0") < maven.version_key("4.0.0")


def test_the_pom_excludes_what_the_caller_replaces() -> None:
    pom = maven._pom([maven.Artifact.parse("g:a:1")], exclusions=["log4j:log4j"])
    assert "<exclusion><groupId>log4j</groupId><artifactId>log4j</artifactId></exclusion>" in pom
    with pytest.raises(BadInput, match="not Maven coordinates"):
        maven.Artifact.parse("g:a")
