"""The hand-written hot-path codecs give kio's bytes, for every version the broker speaks."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker import protocol as p
from broker import wire

PRODUCE = [
    {"responses": []},
    {
        "responses": [
            {
                "name": "t0",
                "topic_id": uuid.UUID(int=12345),
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
            {
                "name": "ü" * 70,
                "topic_id": uuid.uuid4(),
                "partition_responses": [{"index": 7, "error_code": 19, "base_offset": 3}],
            },
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
                "topic_id": uuid.uuid4(),
                "partitions": [_partition(0, b""), _partition(1, None, 6), _partition(2, b"x" * 300)],
            },
            {
                "topic": "other",
                "topic_id": uuid.UUID(int=0),
                "partitions": [_partition(5, bytes(range(256)) * 600), _partition(6, None, 100)],
            },
        ],
    },
]


@pytest.mark.parametrize("version", range(3, p.VERSIONS[p.API_PRODUCE][1] + 1))
@pytest.mark.parametrize("data", PRODUCE)
def test_produce_response_matches_kio(version: int, data: dict[str, Any]) -> None:
    expected = p.encode_response(p.API_PRODUCE, version, 42, p.build_response(p.API_PRODUCE, version, data))
    assert wire.encode_response(p.API_PRODUCE, version, 42, data) == expected


@pytest.mark.parametrize("version", range(4, p.VERSIONS[p.API_FETCH][1] + 1))
@pytest.mark.parametrize("data", FETCH)
def test_fetch_response_matches_kio(version: int, data: dict[str, Any]) -> None:
    expected = p.encode_response(p.API_FETCH, version, 7, p.build_response(p.API_FETCH, version, data))
    assert wire.encode_response(p.API_FETCH, version, 7, data) == expected


def test_other_apis_fall_back_to_kio() -> None:
    assert wire.encode_response(p.API_METADATA, 9, 1, {}) is None


@pytest.mark.parametrize("version", range(wire.FLEXIBLE_FETCH, p.VERSIONS[p.API_FETCH][1] + 1))
def test_replica_fetch_request_matches_kio(version: int) -> None:
    body = {
        "replica_id": 2,
        "replica_state": {"replica_id": 2, "replica_epoch": -1},
        "max_wait": 500,
        "min_bytes": 1,
        "max_bytes": 16 * 1024 * 1024,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": "t0",
                "topic_id": uuid.uuid4(),
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
    for client_id in ("replica-fetcher-2", None):
        expected = p.encode_request(
            p.API_FETCH, version, 9, client_id, p.build_request(p.API_FETCH, version, body)
        )
        assert wire.encode_request(p.API_FETCH, version, 9, client_id, body) == expected
    assert wire.encode_request(p.API_LIST_OFFSETS, 4, 9, "x", {}) is None


def test_replica_fetcher_speaks_kafka_4s_newest_fetch() -> None:
    from broker.fetcher import FETCH_BY_NAME_VERSION, FETCH_VERSION

    assert FETCH_VERSION == p.VERSIONS[p.API_FETCH][1] == 17
    assert FETCH_BY_NAME_VERSION == wire.FETCH_TOPIC_IDS - 1


# --- property tests: any body the handlers can build encodes as kio encodes it ----------------------
_I32 = st.integers(-(2**31), 2**31 - 1)
_I64 = st.integers(-(2**63), 2**63 - 1)
_NAMES = st.text(min_size=1, max_size=20)
_IDS = st.uuids() | st.just(uuid.UUID(int=0))
_ERRORS = st.sampled_from([0, 1, 3, 6, 19, 74, 100])
_RECORDS = st.none() | st.binary(max_size=300)

_produce_partitions = st.fixed_dictionaries(
    {"index": _I32, "error_code": _ERRORS, "base_offset": _I64},
    optional={
        "log_start_offset": _I64,
        "record_errors": st.lists(
            st.fixed_dictionaries(
                {"batch_index": _I32},
                optional={"batch_index_error_message": st.none() | st.text(max_size=10)},
            ),
            max_size=2,
        ),
        "error_message": st.none() | st.text(max_size=10),
    },
)
_produce = st.fixed_dictionaries(
    {
        "responses": st.lists(
            st.fixed_dictionaries(
                {
                    "name": _NAMES,
                    "topic_id": _IDS,
                    "partition_responses": st.lists(_produce_partitions, max_size=3),
                }
            ),
            max_size=3,
        )
    }
)
_fetch_partitions = st.fixed_dictionaries(
    {
        "partition_index": _I32,
        "error_code": _ERRORS,
        "high_watermark": _I64,
        "last_stable_offset": _I64,
        "log_start_offset": _I64,
        "aborted_transactions": st.none()
        | st.lists(st.fixed_dictionaries({"producer_id": _I64, "first_offset": _I64}), max_size=2),
        "preferred_read_replica": _I32,
        "records": _RECORDS,
    }
)
_fetch = st.fixed_dictionaries(
    {
        "error_code": _ERRORS,
        "session_id": _I32,
        "responses": st.lists(
            st.fixed_dictionaries(
                {"topic": _NAMES, "topic_id": _IDS, "partitions": st.lists(_fetch_partitions, max_size=3)}
            ),
            max_size=3,
        ),
    }
)
_PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


@_PROPERTY
@given(version=st.integers(3, p.VERSIONS[p.API_PRODUCE][1]), data=_produce)
def test_any_produce_response_matches_kio(version: int, data: dict[str, Any]) -> None:
    expected = p.encode_response(p.API_PRODUCE, version, 5, p.build_response(p.API_PRODUCE, version, data))
    assert wire.encode_response(p.API_PRODUCE, version, 5, data) == expected


@_PROPERTY
@given(version=st.integers(4, p.VERSIONS[p.API_FETCH][1]), data=_fetch)
def test_any_fetch_response_matches_kio(version: int, data: dict[str, Any]) -> None:
    if version < 7:
        data = {**data, "error_code": 0, "session_id": 0}  # not on the wire before v7
    expected = p.encode_response(p.API_FETCH, version, 6, p.build_response(p.API_FETCH, version, data))
    assert wire.encode_response(p.API_FETCH, version, 6, data) == expected
