"""Kafka's error responses for the transactional APIs a broker leaves out (`unsupported.apis`).

A Kafka-compatible system without transactions must still answer a client that asks for them: a
dropped connection looks like a network fault to the client, which retries it as one. So a request
for a transactional API that `unsupported.apis` withdrew is answered, on the same connection, with
that API's own response carrying UNSUPPORTED_VERSION (35) wherever it has an error code (per
partition, per transactional id, per marker, as Kafka's `getErrorResponse` shapes them), and the
API stays out of ApiVersions. Each builder takes the parsed request body and its version.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.kafka_errors import UNSUPPORTED_VERSION

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


def _write_txn_markers(body: Any, version: int) -> dict[str, Any]:
    return {
        "markers": [
            {
                "producer_id": marker.producer_id,
                "topics": [
                    {
                        "name": topic.name,
                        "partitions": [
                            {"partition_index": int(i), "error_code": UNSUPPORTED_VERSION}
                            for i in topic.partition_indexes
                        ],
                    }
                    for topic in marker.topics
                ],
            }
            for marker in body.markers
        ]
    }


def _txn_offset_commit(body: Any, version: int) -> dict[str, Any]:
    return {
        "topics": [
            {
                "name": topic.name,
                "partitions": [
                    {"partition_index": part.partition_index, "error_code": UNSUPPORTED_VERSION}
                    for part in topic.partitions
                ],
            }
            for topic in body.topics
        ]
    }


def _describe_producers(body: Any, version: int) -> dict[str, Any]:
    return {
        "topics": [
            {
                "name": topic.name,
                "partitions": [
                    {
                        "partition_index": int(i),
                        "error_code": UNSUPPORTED_VERSION,
                        "error_message": None,
                        "active_producers": [],
                    }
                    for i in topic.partition_indexes
                ],
            }
            for topic in body.topics
        ]
    }


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
    22: _init_producer_id,
    24: _add_partitions,
    25: _error_only,
    26: _end_txn,
    27: _write_txn_markers,
    28: _txn_offset_commit,
    61: _describe_producers,
    65: _describe_transactions,
    66: _list_transactions,
}
