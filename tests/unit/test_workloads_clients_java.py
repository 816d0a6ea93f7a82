"""The Java client driver's pieces that need no JVM: how a reply maps to an outcome, the Kafka
properties made from a test, the safe preset, the version and JDK checks. The program itself, its
protocol and the outcomes of real failures: tests/integration/test_workloads_java.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checkers.refusals import refusals
from foundation.config import RETRY_UNTIL_TIMEOUT, TestConfig, delivery_timeout_ms, validate
from foundation.errors import BadInput, InfrastructureError
from workloads.clients import base, java, java_program

BOOT = ["10.0.0.1:9092", "10.0.0.2:9092"]
NOT_ENOUGH_REPLICAS = 19
NOT_LEADER = 6
REQUEST_TIMED_OUT = 7


def error(code: int, appended: bool | None = True, cls: str = "org.apache.kafka.common.errors.X") -> dict:
    reply = {"ok": False, "class": cls, "error": f"X: code {code}", "code": code}
    if appended is not None:
        reply["appended"] = appended
    return reply


def test_an_acknowledged_send_is_ok_with_its_offset() -> None:
    assert java.classify_send({"ok": True, "offset": 41}, retries=5) == base.SendOutcome("ok", offset=41)


def test_a_record_that_never_reached_the_buffer_is_fail_whatever_the_error() -> None:
    # e.g. TimeoutException "Topic t0 not present in metadata after 5000 ms." from max.block.ms
    outcome = java.classify_send(error(REQUEST_TIMED_OUT, appended=False), retries=RETRY_UNTIL_TIMEOUT)
    assert outcome.type == "fail" and outcome.error == "X: code 7"


@pytest.mark.parametrize(("code", "retries", "outcome"), [
    (NOT_ENOUGH_REPLICAS, 0, "fail"),  # refused before any append, and never retried
    (NOT_ENOUGH_REPLICAS, 5, "info"),  # the callback names the last attempt only
    (NOT_LEADER, 0, "info"),  # Kafka answers it also for records appended before leadership moved
    (REQUEST_TIMED_OUT, 0, "info"),
    (-1, 0, "info"),  # not a Kafka error (UNKNOWN_SERVER_ERROR's code: anything unexpected)
])  # fmt: skip
def test_a_broker_error_is_fail_only_when_definite_and_not_retried(
    code: int, retries: int, outcome: str
) -> None:
    assert java.classify_send(error(code), retries).type == outcome


def test_commits_the_coordinator_refused_are_told_apart_from_unknown_ones() -> None:
    assert java.commit_refused(error(-1, None, "org.apache.kafka.clients.consumer.CommitFailedException"))
    for code in (22, 25, 27, 113):  # illegal generation, unknown member, rebalancing, stale epoch
        assert java.commit_refused(error(code, None))
    assert not java.commit_refused(error(REQUEST_TIMED_OUT, None))
    assert not java.commit_refused(error(-1, None, "org.apache.kafka.common.errors.TimeoutException"))


def test_the_safe_preset_applies_where_the_test_gives_no_setting() -> None:
    config = validate({"client": "java"})
    assert (config.acks, config.idempotence, config.retries) == ("all", True, RETRY_UNTIL_TIMEOUT)
    # retrying until the delivery timeout is bounded as the default 5 retries are: 6 x 5 s + 1 s
    assert delivery_timeout_ms(config) == 31000
    assert validate({"client": "java", "idempotence": False}).idempotence is False
    assert validate({"client": "java", "acks": "1"}).idempotence is False  # needs acks=all
    assert validate({"client": "java", "retries": 0}).idempotence is False
    assert validate({"client": "kafka-python"}).idempotence is False  # other clients: as before
    rerun = validate(config.to_json())  # test.json reruns the same settings
    assert (rerun.idempotence, rerun.retries) == (True, RETRY_UNTIL_TIMEOUT)


def test_java_only_keys_are_refused_for_other_clients_and_properties_need_a_name() -> None:
    with pytest.raises(BadInput, match="group_protocol"):
        validate({"client": "confluent-kafka", "group_protocol": "consumer"})
    with pytest.raises(BadInput, match="java_client_properties"):
        validate({"client": "kafka-python", "java_client_properties": ["linger.ms=5"]})
    with pytest.raises(BadInput, match="name=value"):
        validate({"client": "java", "java_client_properties": ["linger.ms"]})


def test_producer_properties_come_from_the_test_and_the_overrides_go_last() -> None:
    config = TestConfig(client="java", acks="all", idempotence=True, retries=RETRY_UNTIL_TIMEOUT)
    settings = java.producer_settings(config, BOOT)
    assert settings["bootstrap.servers"] == "10.0.0.1:9092,10.0.0.2:9092"
    assert (settings["acks"], settings["enable.idempotence"]) == ("all", "true")
    assert settings["retries"] == RETRY_UNTIL_TIMEOUT and settings["delivery.timeout.ms"] == 31000
    assert settings["metric.reporters"] == "" and settings["enable.metrics.push"] == "false"
    tuned = config.replace(java_client_properties=["linger.ms=20", " acks = 1"])
    assert java.producer_settings(tuned, BOOT)["linger.ms"] == "20"
    assert java.producer_settings(tuned, BOOT)["acks"] == "1"
    with pytest.raises(BadInput, match="group.id is set by the driver"):
        java.producer_settings(config.replace(java_client_properties=["group.id=mine"]), BOOT)


def test_transactional_producers_block_for_at_most_the_end_bound() -> None:
    config = TestConfig(client="java", idempotence=False, transaction_timeout_ms=7000)
    settings = java.txn_producer_settings(config, BOOT, "strandline-txn-3")
    assert settings["transactional.id"] == "strandline-txn-3" and settings["enable.idempotence"] == "true"
    assert settings["transaction.timeout.ms"] == 7000
    assert settings["max.block.ms"] == int(base.end_bound_s(config) * 1000)


def test_consumers_read_from_the_earliest_offset_without_automatic_commits() -> None:
    queue = java.consumer_settings(TestConfig(client="java"), BOOT)
    assert (queue["enable.auto.commit"], queue["auto.offset.reset"]) == ("false", "earliest")
    assert queue["isolation.level"] == "read_uncommitted" and "group.id" not in queue
    assert queue["max.poll.records"] == java.MAX_POLL_RECORDS
    txn = java.consumer_settings(
        TestConfig(client="java", workload="txn"), BOOT, bulk=True, read_committed=True
    )
    assert txn["isolation.level"] == "read_committed" and txn["max.poll.records"] == java.BULK_POLL_RECORDS


def test_group_members_use_the_classic_timeouts_or_leave_them_to_the_broker() -> None:
    classic = java.group_consumer_settings(TestConfig(client="java"), BOOT, "strandline-g0")
    assert classic["group.id"] == "strandline-g0" and classic["session.timeout.ms"] == 6000
    assert "group.protocol" not in classic
    modern = java.group_consumer_settings(TestConfig(client="java", group_protocol="consumer"), BOOT, "g")
    # KIP-848: the broker sets the session and heartbeat; the client refuses them
    assert modern["group.protocol"] == "consumer" and "session.timeout.ms" not in modern
    assert "heartbeat.interval.ms" not in modern and modern["max.poll.interval.ms"] == 60000


def test_settings_a_release_does_not_know_are_left_out() -> None:
    assert java.quiet("2.8.2") == {"metric.reporters": ""}
    assert java.quiet("3.5.2") == {"metric.reporters": "", "auto.include.jmx.reporter": "false"}
    assert java.quiet("4.4.0") == {"metric.reporters": "", "enable.metrics.push": "false"}


@pytest.mark.parametrize(("version", "why"), [
    ("4.4", "not a kafka-clients release number"),
    ("latest", "not a kafka-clients release number"),
    ("2.1.1", "older than 2.2"),
])  # fmt: skip
def test_a_version_the_program_cannot_use_is_bad_input(version: str, why: str) -> None:
    with pytest.raises(BadInput, match=why):
        java_program.check_version(version)


def test_no_jdk_is_an_infrastructure_error_saying_what_is_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(InfrastructureError, match="has no bin/javac"):
        java_program.jdk()
    monkeypatch.delenv("JAVA_HOME")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(InfrastructureError, match="no javac on PATH"):
        java_program.jdk()


def test_a_broker_without_the_consumer_group_protocol_is_reported_as_refusing_it(tmp_path: Path) -> None:
    error = (
        "UnsupportedVersionException: The cluster does not support the new CONSUMER group protocol. Set "
        "group.protocol=classic on the consumer configs to revert to the CLASSIC protocol until the "
        "cluster is upgraded."
    )
    ops = [
        {"index": 0, "time": 0, "process": 1, "type": "invoke", "f": "poll"},
        {"index": 1, "time": 1, "process": 1, "type": "info", "f": "poll", "error": error},
    ]
    history = tmp_path / "history.jsonl"
    history.write_text("".join(json.dumps(op) + "\n" for op in ops))
    config = TestConfig(client="java", consume="subscribe", group_protocol="consumer")
    offered = {"apis": {str(key): [0, 9] for key in (0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 22)}}
    found = refusals(config, history, offered)["consumer group protocol (KIP-848)"]
    assert found["missing_apis"] == ["ConsumerGroupHeartbeat"] and found["ops"]["info"] == 1
    assert refusals(config.replace(group_protocol="classic"), history, offered) == {}
