"""The frame decoder: valid requests round-trip; any other bytes give FrameError/UnsupportedVersion."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker import protocol as p

VERSIONS = p.VERSIONS


def metadata_frame(version: int = 9, topics: list[str] | None = None) -> bytes:
    body = p.build_request(
        p.API_METADATA,
        version,
        {
            "topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": False,
        },
    )
    return p.encode_request(p.API_METADATA, version, 42, "test", body)[4:]


def produce_frame(version: int = 9) -> bytes:
    body = p.build_request(
        p.API_PRODUCE,
        version,
        {
            "acks": -1,
            "timeout": 1000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"x" * 70}]}],
        },
    )
    return p.encode_request(p.API_PRODUCE, version, 7, "test", body)[4:]


@pytest.mark.parametrize("version", [0, 1, 4, 9, 12])
def test_metadata_request_round_trips(version: int) -> None:
    request = p.parse_request(metadata_frame(version, ["a", "b"]), VERSIONS)
    assert (request.api_key, request.api_version, request.correlation_id) == (p.API_METADATA, version, 42)
    assert [t.name for t in request.body.topics] == ["a", "b"]


@pytest.mark.parametrize("version", [3, 7, 9])
def test_produce_request_keeps_records_opaque(version: int) -> None:
    request = p.parse_request(produce_frame(version), VERSIONS)
    assert request.body.topic_data[0].partition_data[0].records == b"x" * 70


def test_unsupported_api_versions_version_gets_fallback() -> None:
    frame = struct.pack(">hhi", p.API_API_VERSIONS, 99, 5)
    with pytest.raises(p.UnsupportedVersion) as info:
        p.parse_request(frame, VERSIONS)
    assert info.value.correlation_id == 5
    reply = p.api_versions_fallback(5, VERSIONS)
    size, correlation_id, error = struct.unpack_from(">iih", reply)
    assert size == len(reply) - 4 and correlation_id == 5 and error == 35


def test_unknown_api_key_is_a_frame_error() -> None:
    with pytest.raises(p.FrameError):
        p.parse_request(struct.pack(">hhi", 999, 0, 1), VERSIONS)


def test_response_encoding_has_size_and_flexible_header() -> None:
    body = p.build_response(
        p.API_METADATA, 9, {"brokers": [], "cluster_id": "c", "controller_id": 1, "topics": []}
    )
    data = p.encode_response(p.API_METADATA, 9, 3, body)
    assert struct.unpack_from(">i", data)[0] == len(data) - 4
    correlation_id, parsed = p.parse_response(p.API_METADATA, 9, data[4:])
    assert correlation_id == 3 and parsed.cluster_id == "c"


def test_api_versions_response_uses_header_v0() -> None:
    body = p.build_response(
        p.API_API_VERSIONS, 3, {"api_keys": [{"api_key": 0, "min_version": 3, "max_version": 9}]}
    )
    data = p.encode_response(p.API_API_VERSIONS, 3, 11, body)
    correlation_id, parsed = p.parse_response(p.API_API_VERSIONS, 3, data[4:])
    assert correlation_id == 11 and parsed.api_keys[0].max_version == 9


def _decode_or_reject(frame: bytes) -> None:
    try:
        p.parse_request(frame, VERSIONS)
    except (p.FrameError, p.UnsupportedVersion):
        pass


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_never_crash_the_decoder(frame: bytes) -> None:
    _decode_or_reject(frame)


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(
        [metadata_frame(9, ["topic"]), metadata_frame(1, ["x"]), produce_frame(9), produce_frame(3)]
    ),
    st.data(),
)
def test_mutated_valid_frames_never_crash_the_decoder(frame: bytes, data: st.DataObject) -> None:
    mutated = bytearray(frame)
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(mutated) - 1))
        mutated[position] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(mutated)))
    _decode_or_reject(bytes(mutated[:cut]))
    _decode_or_reject(bytes(mutated))
