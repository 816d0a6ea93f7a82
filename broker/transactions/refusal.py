"""Kafka's error responses for the transactional APIs a broker leaves out (`unsupported.apis`).

A Kafka-compatible system without transactions must still answer a client that asks for them: a
dropped connection looks like a network fault to the client, which retries it as one. So a request
for a transactional API that `unsupported.apis` withdrew is answered, on the same connection, with
that API's own response carrying UNSUPPORTED_VERSION (35) wherever it has an error code (per
partition, per transactional id, per marker, as Kafka's `getErrorResponse` shapes them), and the
API stays out of ApiVersions. Each builder takes the parsed request body and its version.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from broker.kafka_errors import UNSUPPORTED_VERSION
from broker.protocol import (
    API_ADD_OFFSETS_TO_TXN,
    API_ADD_PARTITIONS_TO_TXN,
    API_DESCRIBE_PRODUCERS,
    API_DESCRIBE_TRANSACTIONS,
    API_END_TXN,
    API_INIT_PRODUCER_ID,
    API_LIST_TRANSACTIONS,
    API_TXN_OFFSET_COMMIT,
    API_WRITE_TXN_MARKERS,
)

Refusal = Callable[[Any, int], dict[str, Any]]


def _init_producer_id(body: Any, version: int) -> dict[str, Any]:
    return {"error_code": UNSUPPORTED_VERSION, "producer_id": -1, "producer_epoch": -1}


def _add_partitions(body: Any, version: int) -> dict[str, Any]:
    if version >= 4:  # a batch of transactions: the error of the whole request
        return {"error_code": UNSUPPORTED_VERSION, "results_by_transaction": []}
    return {
        "results_by_topic_v3_and_below": [
            {
                "name": topic.name,
                "results_by_partition": [
                    {"partition_index": int(i), "partition_error_code": UNSUPPORTED_VERSION}
                    for i in topic.partitions
                ],
            }
            for topic in body.v3_and_below_topics
        ]
    }


def _error_only(body: Any, version: int) -> dict[str, Any]:
    return {"error_code": UNSUPPORTED_VERSION}


def _end_txn(body: Any, version: int) -> dict[str, Any]:
    return {"error_code": UNSUPPORTED_VERSION, "producer_id": -1, "producer_epoch": -1}


def _refused_partitions(
    topics: Iterable[Any],
    indexes: Callable[[Any], Iterable[int]] = lambda topic: topic.partition_indexes,
    **extra: Any,
) -> list[dict[str, Any]]:
    """The per-topic, per-partition answer three of these APIs share: every partition the request
    named (`indexes` of each topic), refused, with the API's `extra` fields."""
    return [
        {
            "name": topic.name,
            "partitions": [
                {"partition_index": int(i), "error_code": UNSUPPORTED_VERSION, **extra}
                for i in indexes(topic)
            ],
        }
        for topic in topics
    ]


def _write_txn_markers(body: Any, version: int) -> dict[str, Any]:
    return {
        "markers": [
            {"producer_id": marker.producer_id, "topics": _refused_partitions(marker.topics)}
            for marker in body.markers
        ]
    }


def _txn_offset_commit(body: Any, version: int) -> dict[str, Any]:
    return {
        "topics": _refused_partitions(
            body.topics, lambda topic: (part.partition_index for part in topic.partitions)
        )
    }


def _describe_producers(body: Any, version: int) -> dict[str, Any]:
    return {"topics": _refused_partitions(body.topics, error_message=None, active_producers=[])}


def _describe_transactions(body: Any, version: int) -> dict[str, Any]:
    return {
        "transaction_states": [
            {
                "error_code": UNSUPPORTED_VERSION,
                "transactional_id": tid,
                "transaction_state": "",
                "topics": [],
            }
            for tid in body.transactional_ids
        ]
    }


def _list_transactions(body: Any, version: int) -> dict[str, Any]:
    return {"error_code": UNSUPPORTED_VERSION, "unknown_state_filters": [], "transaction_states": []}


# API key -> its error response (InitProducerId also serves idempotent producers: refused alike).
REFUSALS: dict[int, Refusal] = {
    API_INIT_PRODUCER_ID: _init_producer_id,
    API_ADD_PARTITIONS_TO_TXN: _add_partitions,
    API_ADD_OFFSETS_TO_TXN: _error_only,
    API_END_TXN: _end_txn,
    API_WRITE_TXN_MARKERS: _write_txn_markers,
    API_TXN_OFFSET_COMMIT: _txn_offset_commit,
    API_DESCRIBE_PRODUCERS: _describe_producers,
    API_DESCRIBE_TRANSACTIONS: _describe_transactions,
    API_LIST_TRANSACTIONS: _list_transactions,
}
