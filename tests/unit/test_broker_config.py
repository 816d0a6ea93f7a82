"""Broker properties files: Kafka key names, defaults, one clear error per bad value."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import BrokerConfig, parse_properties
from broker.errors import BadBrokerConfig


def test_defaults_and_overrides() -> None:
    config = BrokerConfig.from_properties(
        parse_properties(
            "# comment\nbroker.id=2\nlisteners=PLAINTEXT://10.77.0.2:9092\nlog.dirs=/a,/b\n"
            "replication.truncation = high-watermark\nunclean.leader.election.enable=true\n"
        )
    )
    assert config.broker_id == 2
    assert (config.listener.host, config.listener.port) == ("10.77.0.2", 9092)
    assert config.log_dirs == (Path("/a"), Path("/b"))
    assert config.truncation == "high-watermark" and config.unclean_leader_election
    assert config.min_insync_replicas == 1 and config.hw_checkpoint_interval_ms == 5000
    assert config.flush_interval_messages == 0


@pytest.mark.parametrize(
    "text, key",
    [
        ("listeners=PLAINTEXT://h:1\n", "broker.id"),
        ("broker.id=1\nreplication.truncation=maybe\n", "replication.truncation"),
        ("broker.id=1\nmin.insync.replicas=zero\n", "min.insync.replicas"),
        ("broker.id=1\nlisteners=SSL://h:1\n", "listeners"),
        ("broker.id=1\nunclean.leader.election.enable=yes\n", "unclean.leader.election.enable"),
    ],
)
def test_bad_values_name_the_key(text: str, key: str) -> None:
    with pytest.raises(BadBrokerConfig, match=key.replace(".", r"\.")):
        BrokerConfig.from_properties(parse_properties(text))


def test_missing_file_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadBrokerConfig):
        BrokerConfig.load(tmp_path / "nope.properties")
