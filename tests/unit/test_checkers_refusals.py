"""checkers/refusals.py: a feature the test asked for is reported refused when the brokers'
ApiVersions lack its APIs or operations ended with the refusal; nothing is reported (and the
history is not read) when nothing was asked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checkers.refusals import describe, refusals
from foundation.config import TestConfig

REFUSAL = (
    "IncompatibleBrokerVersion: Kafka broker does not support the 'InitProducerIdRequest' Kafka protocol."
)
OFFERED = {"broker": "10.0.0.1:9092", "apis": {"0": [0, 13], "3": [0, 13], "22": [0, 5]}}
WITHOUT_PRODUCER_IDS = {"broker": "10.0.0.1:9092", "apis": {"0": [0, 13], "3": [0, 13]}}


def history(tmp_path: Path, *errors: str) -> Path:
    ops = []
    for i, error in enumerate(errors):
        ops.append({"index": 2 * i, "time": i, "process": i, "type": "invoke", "f": "send", "topic": "t0",
                    "partition": 0, "value": i})  # fmt: skip
        ops.append({"index": 2 * i + 1, "time": i, "process": i, "type": "fail", "f": "send", "topic": "t0",
                    "partition": 0, "value": i, "error": error})  # fmt: skip
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(op) + "\n" for op in ops))
    return path


def test_refused_idempotence_names_the_missing_api_and_the_refused_sends(tmp_path: Path) -> None:
    found = refusals(
        TestConfig(idempotence=True), history(tmp_path, REFUSAL, "NotEnoughReplicas"), WITHOUT_PRODUCER_IDS
    )
    assert found == {
        "idempotence": {"asked": "idempotence = true", "missing_apis": ["InitProducerId"],
                        "ops": {"fail": 1, "info": 0}, "error": REFUSAL, "examples": [1]}
    }  # fmt: skip
    assert describe("idempotence", found["idempotence"]).startswith(
        "idempotence (idempotence = true): its brokers do not offer InitProducerId (ApiVersions); "
        "1 operations ended fail and 0 info with its refusal"
    )


def test_an_offered_api_refused_by_an_error_still_counts(tmp_path: Path) -> None:
    librdkafka = (
        "KafkaException: _FATAL (Idempotent producer not supported by any of the 3 connected broker(s))"
    )
    found = refusals(TestConfig(idempotence=True), history(tmp_path, librdkafka), OFFERED)
    assert found["idempotence"]["missing_apis"] == [] and found["idempotence"]["ops"]["fail"] == 1


@pytest.mark.parametrize(
    "error",
    [  # an offered InitProducerId answered CLUSTER_AUTHORIZATION_FAILED (the broker's denied.apis)
        'KafkaException: KafkaError{code=_FATAL,val=-150,str="Unable to produce message: Local: Fatal error"} '
        "(CLUSTER_AUTHORIZATION_FAILED: Failed to acquire idempotence PID from broker 10.0.0.1:9092/1: "
        "Broker: Cluster authorization failed)",
        "KafkaError: KafkaError: Unexpected error in InitProducerIdResponse: [Error 31] ClusterAuthorizationFailedError",
    ],
)
def test_an_authorization_refusal_of_producer_ids_counts_in_each_clients_words(
    tmp_path: Path, error: str
) -> None:
    found = refusals(TestConfig(idempotence=True), history(tmp_path, error), OFFERED)
    assert found["idempotence"]["ops"]["fail"] == 1 and found["idempotence"]["error"] == error


def test_nothing_asked_or_nothing_refused_is_empty(tmp_path: Path) -> None:
    assert refusals(TestConfig(), tmp_path / "no-history.jsonl", WITHOUT_PRODUCER_IDS) == {}
    assert refusals(TestConfig(idempotence=True), history(tmp_path, "RequestTimedOut"), OFFERED) == {}
    assert refusals(TestConfig(idempotence=True), history(tmp_path, "RequestTimedOut"), None) == {}


def test_consumer_groups_are_asked_by_subscribing(tmp_path: Path) -> None:
    found = refusals(TestConfig(consume="subscribe"), history(tmp_path), WITHOUT_PRODUCER_IDS)
    assert found["consumer groups"]["missing_apis"][:2] == ["OffsetCommit", "OffsetFetch"]
