"""Hand-written codecs for the hot path: Produce and Fetch responses, the replica Fetch request.

kio's generic path (dict -> validated dataclass -> writer) costs a broker more CPU per request
than the request's own work; these produce the same bytes (tests/unit/test_broker_wire.py
compares them with kio for every version this broker speaks) straight from the handlers' dicts.
Sans-IO: dicts in, bytes out.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import Any

from broker import protocol as p

_I16 = struct.Struct(">h").pack
_I32 = struct.Struct(">i").pack
_I64 = struct.Struct(">q").pack
_HEADER = struct.Struct(">ii")
_PARTITION_HEAD = struct.Struct(">ihq")  # index, error code, offset / high watermark

FLEXIBLE_PRODUCE = 9
FLEXIBLE_FETCH = 12
# From these versions on a topic travels as its 16-byte id, not its name (KIP-516).
PRODUCE_TOPIC_IDS = 13
FETCH_TOPIC_IDS = 13
# From Fetch v15 the follower's id moves from the body into the tagged ReplicaState (KIP-903).
FETCH_REPLICA_STATE = 15


def _uvarint(n: int) -> bytes:
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _string(value: str, flexible: bool) -> bytes:
    data = value.encode()
    return (_uvarint(len(data) + 1) if flexible else _I16(len(data))) + data


def _nullable_string(value: str | None, flexible: bool) -> bytes:
    if value is None:
        return b"\0" if flexible else _I16(-1)
    return _string(value, flexible)


def _array_length(n: int, flexible: bool) -> bytes:
    return _uvarint(n + 1) if flexible else _I32(n)


def _nullable_bytes(value: bytes | None, flexible: bool) -> bytes:
    if value is None:
        return b"\0" if flexible else _I32(-1)
    return (_uvarint(len(value) + 1) if flexible else _I32(len(value))) + value


def _topic(entry: Mapping[str, Any], name_key: str, by_id: bool, flexible: bool) -> bytes:
    """A topic entry's key: its id (16 bytes) from the topic-id versions on, else its name."""
    if by_id:
        topic_id = entry["topic_id"]
        return topic_id.bytes if topic_id is not None else _ZERO_UUID
    return _string(entry[name_key], flexible)


_ZERO_UUID = bytes(16)


def _error(value: Any) -> int:
    return int(getattr(value, "value", value))


def produce_response(version: int, data: Mapping[str, Any]) -> bytes:
    """ProduceResponse v3..v13 body (v13 names each topic by its id)."""
    flex = version >= FLEXIBLE_PRODUCE
    by_id = version >= PRODUCE_TOPIC_IDS
    tag = b"\0" if flex else b""
    out = [_array_length(len(data["responses"]), flex)]
    for topic in data["responses"]:
        parts = topic["partition_responses"]
        out.append(_topic(topic, "name", by_id, flex))
        out.append(_array_length(len(parts), flex))
        for part in parts:
            out.append(_PARTITION_HEAD.pack(part["index"], _error(part["error_code"]), part["base_offset"]))
            out.append(_I64(part.get("log_append_time_ms", -1)))
            if version >= 5:
                out.append(_I64(part.get("log_start_offset", -1)))
            if version >= 8:
                errors = part.get("record_errors") or ()
                out.append(_array_length(len(errors), flex))
                for e in errors:
                    out.append(_I32(e["batch_index"]))
                    out.append(_nullable_string(e.get("batch_index_error_message"), flex))
                    out.append(tag)
                out.append(_nullable_string(part.get("error_message"), flex))
            out.append(tag)
        out.append(tag)
    out.append(_I32(data.get("throttle_time_ms", 0)))
    out.append(tag)
    return b"".join(out)


def fetch_response(version: int, data: Mapping[str, Any]) -> bytes:
    """FetchResponse v4..v17 body (v13+ name each topic by its id)."""
    flex = version >= FLEXIBLE_FETCH
    by_id = version >= FETCH_TOPIC_IDS
    tag = b"\0" if flex else b""
    out = [_I32(data.get("throttle_time_ms", 0))]
    if version >= 7:
        out.append(_I16(_error(data.get("error_code", 0))))
        out.append(_I32(data.get("session_id", 0)))
    out.append(_array_length(len(data["responses"]), flex))
    for topic in data["responses"]:
        parts = topic["partitions"]
        out.append(_topic(topic, "topic", by_id, flex))
        out.append(_array_length(len(parts), flex))
        for part in parts:
            out.append(
                _PARTITION_HEAD.pack(
                    part["partition_index"], _error(part["error_code"]), part["high_watermark"]
                )
            )
            out.append(_I64(part.get("last_stable_offset", -1)))
            if version >= 5:
                out.append(_I64(part.get("log_start_offset", -1)))
            aborted = part.get("aborted_transactions")
            if aborted is None:
                out.append(b"\0" if flex else _I32(-1))
            else:
                out.append(_array_length(len(aborted), flex))
                for a in aborted:
                    out.append(_I64(a["producer_id"]))
                    out.append(_I64(a["first_offset"]))
                    out.append(tag)
            if version >= 11:
                out.append(_I32(part.get("preferred_read_replica", -1)))
            out.append(_nullable_bytes(part.get("records"), flex))
            out.append(tag)
        out.append(tag)
    out.append(tag)
    return b"".join(out)


ENCODERS: dict[int, tuple[int, Callable[[int, Mapping[str, Any]], bytes]]] = {
    p.API_PRODUCE: (3, produce_response),
    p.API_FETCH: (4, fetch_response),
}


def encode_response(
    api_key: int, api_version: int, correlation_id: int, data: Mapping[str, Any]
) -> bytes | None:
    """The whole response frame for a hot-path API, or None when this module has no codec for it."""
    codec = ENCODERS.get(api_key)
    if codec is None or api_version < codec[0]:
        return None
    flexible = (api_key == p.API_PRODUCE and api_version >= FLEXIBLE_PRODUCE) or (
        api_key == p.API_FETCH and api_version >= FLEXIBLE_FETCH
    )
    body = codec[1](api_version, data)
    header = b"\0" if flexible else b""
    return _HEADER.pack(4 + len(header) + len(body), correlation_id) + header + body


def fetch_request(version: int, data: Mapping[str, Any]) -> bytes:
    """FetchRequest v12..v17 body (what the replica fetcher sends); v13+ name topics by id."""
    if not FLEXIBLE_FETCH <= version <= _FETCH_REQUEST_MAX:
        raise ValueError(f"no hand-written FetchRequest v{version}")
    by_id = version >= FETCH_TOPIC_IDS
    replica_state = version >= FETCH_REPLICA_STATE
    head = _FETCH_HEAD.pack(
        data["max_wait"],
        data["min_bytes"],
        data["max_bytes"],
        data.get("isolation_level", 0),
        data.get("session_id", 0),
        data.get("session_epoch", -1),
    )
    out = [head if replica_state else _I32(data["replica_id"]) + head, _uvarint(len(data["topics"]) + 1)]
    for topic in data["topics"]:
        parts = topic["partitions"]
        out.append(_topic(topic, "topic", by_id, True))
        out.append(_uvarint(len(parts) + 1))
        for part in parts:
            out.append(
                _FETCH_PARTITION.pack(
                    part["partition"],
                    part.get("current_leader_epoch", -1),
                    part["fetch_offset"],
                    part.get("last_fetched_epoch", -1),
                    part.get("log_start_offset", -1),
                    part["partition_max_bytes"],
                )
            )
            out.append(b"\0")
        out.append(b"\0")
    forgotten = data.get("forgotten_topics_data") or ()
    out.append(_uvarint(len(forgotten) + 1))
    for topic in forgotten:
        out.append(_topic(topic, "topic", by_id, True))
        out.append(_uvarint(len(topic["partitions"]) + 1))
        out.extend(_I32(i) for i in topic["partitions"])
        out.append(b"\0")
    out.append(_string(data.get("rack_id", ""), True))
    state = data.get("replica_state") or {}
    if replica_state and (state.get("replica_id", -1) != -1 or state.get("replica_epoch", -1) != -1):
        # one tagged field, tag 1: ReplicaState {replica_id int32, replica_epoch int64, no tags}
        payload = _REPLICA_STATE.pack(state.get("replica_id", -1), state.get("replica_epoch", -1)) + b"\0"
        out.append(b"\1\1" + _uvarint(len(payload)) + payload)
    else:
        out.append(b"\0")
    return b"".join(out)


_FETCH_REQUEST_MAX = 17
_FETCH_HEAD = struct.Struct(">iiibii")
_REPLICA_STATE = struct.Struct(">iq")
_FETCH_PARTITION = struct.Struct(">iiqiqi")
_REQUEST_HEADER = struct.Struct(">ihhi")


def encode_request(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, data: Mapping[str, Any]
) -> bytes | None:
    """The whole request frame (header v2) for the replica fetcher's Fetch, or None: use kio."""
    if api_key != p.API_FETCH or not FLEXIBLE_FETCH <= api_version <= _FETCH_REQUEST_MAX:
        return None
    body = _nullable_string(client_id, False) + b"\0" + fetch_request(api_version, data)
    return _REQUEST_HEADER.pack(8 + len(body), api_key, api_version, correlation_id) + body
