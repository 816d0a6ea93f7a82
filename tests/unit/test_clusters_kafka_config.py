"""Rendering of Apache Kafka's KRaft configuration from a test config."""

from __future__ import annotations

import base64

import pytest

from clusters.kafka_config import (
    format_storage_argv,
    layout_under,
    new_cluster_id,
    render_server_properties,
    unpack_argv,
)
from foundation.config import validate
from foundation.errors import BadInput

ADDRESSES = ["10.77.1.11", "10.77.1.12", "10.77.1.13"]


def _props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def test_server_properties_carry_the_test_settings() -> None:
    config = validate(
        {"system": "kafka", "min_insync": 2, "unclean_election": True, "log_flush_interval_messages": 1}
    )
    props = _props(render_server_properties(config, 2, ADDRESSES, layout_under("/srv/n2")))
    assert props["node.id"] == "2"
    assert props["process.roles"] == "broker,controller"
    assert props["controller.quorum.voters"] == "1@10.77.1.11:9093,2@10.77.1.12:9093,3@10.77.1.13:9093"
    assert props["listeners"] == "PLAINTEXT://10.77.1.12:9092,CONTROLLER://10.77.1.12:9093"
    assert props["advertised.listeners"] == "PLAINTEXT://10.77.1.12:9092"
    assert props["log.dirs"] == "/srv/n2/data"
    assert props["min.insync.replicas"] == "2"
    assert props["unclean.leader.election.enable"] == "true"
    assert props["log.flush.interval.messages"] == "1"
    assert props["default.replication.factor"] == "3"


def test_safe_defaults_leave_flush_to_kafka() -> None:
    props = _props(render_server_properties(validate({}), 1, ADDRESSES, layout_under("/x")))
    assert "log.flush.interval.messages" not in props
    assert props["unclean.leader.election.enable"] == "false"


def test_node_id_out_of_range_is_bad_input() -> None:
    with pytest.raises(BadInput):
        render_server_properties(validate({}), 4, ADDRESSES, layout_under("/x"))


def test_cluster_id_is_16_bytes_base64() -> None:
    cid = new_cluster_id(b"0123456789abcdef")
    assert base64.urlsafe_b64decode(cid + "==") == b"0123456789abcdef"
    assert len(new_cluster_id()) == 22


def test_command_lines_quote_paths() -> None:
    layout = layout_under("/srv/with space")
    assert format_storage_argv(layout, "abc")[:3] == [
        "/srv/with space/kafka/bin/kafka-storage.sh",
        "format",
        "--ignore-formatted",
    ]
    script = unpack_argv("/tmp/kafka 4.tgz", layout)[2]
    assert "'/tmp/kafka 4.tgz'" in script and "'/srv/with space/kafka'" in script
