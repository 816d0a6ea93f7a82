"""The hand-written hot-path codecs give kio's bytes, for every version the broker speaks."""

from __future__ import annotations

from typing import Any

import pytest

from broker import protocol as p
from broker import wire

PRODUCE = [
    {"responses": []},
    {
        "responses": [
            {
                "name": "t0",
                "partition_responses": [
                    {
                        "index": 0,
                        "error_code": 0,
                        "base_offset": 12345678901,
                        "log_start_offset": 0,
                        "record_errors": [],
                    },
                    {
                        "index": 1,
                        "error_code": 6,
                        "base_offset": -1,
                        "log_start_offset": -1,
                        "record_errors": [],
                    },
                ],
            },
            {"name": "ü" * 70, "partition_responses": [{"index": 7, "error_code": 19, "base_offset": 3}]},
        ]
    },
]


def _partition(i: int, records: bytes | None, error: int = 0) -> dict[str, Any]:
    return {
        "partition_index": i,
        "error_code": error,
        "high_watermark": 10 * i,
        "last_stable_offset": 10 * i,
        "log_start_offset": i,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": records,
    }


FETCH = [
    {"error_code": 0, "session_id": 0, "responses": []},
    {
        "error_code": 0,
        "session_id": 0,
        "responses": [
            {
                "topic": "t0",
                "partitions": [_partition(0, b""), _partition(1, None, 6), _partition(2, b"x" * 300)],
            },
            {"topic": "other", "partitions": [_partition(5, bytes(range(256)) * 600)]},
        ],
    },
]


@pytest.mark.parametrize("version", range(3, p.CORE_VERSIONS[p.API_PRODUCE][1] + 1))
@pytest.mark.parametrize("data", PRODUCE)
def test_produce_response_matches_kio(version: int, data: dict[str, Any]) -> None:
    expected = p.encode_response(p.API_PRODUCE, version, 42, p.build_response(p.API_PRODUCE, version, data))
    assert wire.encode_response(p.API_PRODUCE, version, 42, data) == expected


@pytest.mark.parametrize("version", range(4, p.CORE_VERSIONS[p.API_FETCH][1] + 1))
@pytest.mark.parametrize("data", FETCH)
def test_fetch_response_matches_kio(version: int, data: dict[str, Any]) -> None:
    expected = p.encode_response(p.API_FETCH, version, 7, p.build_response(p.API_FETCH, version, data))
    assert wire.encode_response(p.API_FETCH, version, 7, data) == expected


def test_other_apis_fall_back_to_kio() -> None:
    assert wire.encode_response(p.API_METADATA, 9, 1, {}) is None


def test_replica_fetch_request_matches_kio() -> None:
    from broker.fetcher import FETCH_VERSION

    body = {
        "replica_id": 2,
        "max_wait": 500,
        "min_bytes": 1,
        "max_bytes": 16 * 1024 * 1024,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": "t0",
                "partitions": [
                    {
                        "partition": i,
                        "current_leader_epoch": 3,
                        "fetch_offset": 10**10 + i,
                        "last_fetched_epoch": -1,
                        "log_start_offset": 0,
                        "partition_max_bytes": 4 * 1024 * 1024,
                    }
                    for i in range(3)
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    version = FETCH_VERSION
    for client_id in ("replica-fetcher-2", None):
        expected = p.encode_request(
            p.API_FETCH, version, 9, client_id, p.build_request(p.API_FETCH, version, body)
        )
        assert wire.encode_request(p.API_FETCH, version, 9, client_id, body) == expected
    assert wire.encode_request(p.API_LIST_OFFSETS, 4, 9, "x", {}) is None
