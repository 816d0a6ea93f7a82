"""Malformed input against a running broker process: it answers or closes, and keeps serving.

Hypothesis throws random, truncated, oversized and mutated frames at a standalone broker (no
ZooKeeper needed) on fresh connections, while one long-lived connection keeps asking ApiVersions.
A batch with a bad CRC is refused with CORRUPT_MESSAGE and never reaches the log.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker import protocol as p
from tests.support.standalone import standalone_broker
from tests.support.wire import Wire, one_record_batch

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    base = tmp_path_factory.mktemp("fuzzbroker")
    with standalone_broker(base) as port:
        wire = Wire(port)
        created = wire.call(
            p.API_CREATE_TOPICS,
            5,
            {"topics": [{"name": "fz", "num_partitions": 1, "replication_factor": 1}], "timeout": 5000},
        )
        assert created.topics[0].error_code.value == 0  # type: ignore[attr-defined]
        wire.close()
        yield port, base


def valid_frames() -> list[bytes]:
    meta = p.build_request(p.API_METADATA, 9, {"topics": [{"name": "fz"}]})
    produce = p.build_request(
        p.API_PRODUCE,
        8,
        {
            "acks": 1,
            "timeout": 1000,
            "topic_data": [
                {"name": "fz", "partition_data": [{"index": 0, "records": one_record_batch(b"7")}]}
            ],
        },
    )
    return [
        p.encode_request(p.API_METADATA, 9, 1, "fuzz", meta),
        p.encode_request(p.API_PRODUCE, 8, 2, "fuzz", produce),
    ]


def _throw(port: int, data: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            sock.settimeout(2)
            while sock.recv(65536):
                pass
        except OSError:
            pass  # a reset is an acceptable answer to garbage


frames = st.one_of(
    st.binary(max_size=300).map(lambda b: struct.pack(">i", len(b)) + b),  # well framed garbage
    st.binary(min_size=1, max_size=300),  # anything
    st.integers(-(2**31), 2**31 - 1).map(lambda n: struct.pack(">i", n) + b"\x00\x03\x00\x09"),  # bad sizes
    st.tuples(st.sampled_from(valid_frames()), st.integers(0, 10**6), st.integers(0, 255)).map(
        lambda t: t[0][: 4 + t[1] % (len(t[0]) - 4)] if t[2] % 2 else _mutate(t[0], t[1], t[2])
    ),
)


def _mutate(frame: bytes, position: int, value: int) -> bytes:
    data = bytearray(frame)
    data[4 + position % (len(data) - 4)] = value
    return bytes(data)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=frames)
def test_malformed_frames_never_stop_the_broker(broker: tuple[int, Path], data: bytes) -> None:
    port, _ = broker
    _throw(port, data)
    wire = Wire(port)
    try:
        response = wire.call(
            p.API_API_VERSIONS, 3, {"client_software_name": "fuzz", "client_software_version": "1"}
        )
        assert response.error_code.value == 0  # type: ignore[attr-defined]
    finally:
        wire.close()


def test_bad_crc_is_refused_and_not_written(broker: tuple[int, Path]) -> None:
    port, _ = broker
    wire = Wire(port)

    def log_end() -> int:
        r = wire.call(
            p.API_LIST_OFFSETS,
            5,
            {
                "replica_id": -1,
                "topics": [{"name": "fz", "partitions": [{"partition_index": 0, "timestamp": -1}]}],
            },
        )
        return int(r.topics[0].partitions[0].offset)  # type: ignore[attr-defined]

    def produce(records: bytes) -> int:
        r = wire.call(
            p.API_PRODUCE,
            8,
            {
                "acks": -1,
                "timeout": 5000,
                "topic_data": [{"name": "fz", "partition_data": [{"index": 0, "records": records}]}],
            },
        )
        return int(r.responses[0].partition_responses[0].error_code.value)  # type: ignore[attr-defined]

    before = log_end()
    good = bytearray(one_record_batch(b"12345"))
    good[-1] ^= 0xFF  # flip a bit inside the CRC-covered records
    assert produce(bytes(good)) == 2  # CORRUPT_MESSAGE
    assert produce(one_record_batch(b"1")[:40]) == 2  # a truncated batch
    assert log_end() == before
    assert produce(one_record_batch(b"1")) == 0
    assert log_end() == before + 1
    wire.close()
