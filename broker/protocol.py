"""Kafka wire framing and codecs (via kio): parse a request frame, encode a response frame.

Sans-IO: bytes in, objects out, and back. The server and the replica fetcher both use it.
Handlers build responses as plain dicts; `build` turns a dict into the kio dataclass of whatever
version the client asked for, dropping fields that version lacks and defaulting the ones it has.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import EntityField, EntityTupleField, PrimitiveTupleField, classify_field
from kio.static.constants import EntityType

API_PRODUCE = 0
API_FETCH = 1
API_LIST_OFFSETS = 2
API_METADATA = 3
API_OFFSET_COMMIT = 8
API_OFFSET_FETCH = 9
API_FIND_COORDINATOR = 10
API_JOIN_GROUP = 11
API_HEARTBEAT = 12
API_LEAVE_GROUP = 13
API_SYNC_GROUP = 14
API_API_VERSIONS = 18
API_CREATE_TOPICS = 19
API_INIT_PRODUCER_ID = 22
API_OFFSET_FOR_LEADER_EPOCH = 23
API_ADD_PARTITIONS_TO_TXN = 24
API_ADD_OFFSETS_TO_TXN = 25
API_END_TXN = 26
API_WRITE_TXN_MARKERS = 27
API_TXN_OFFSET_COMMIT = 28
API_DESCRIBE_PRODUCERS = 61
API_DESCRIBE_TRANSACTIONS = 65
API_LIST_TRANSACTIONS = 66

# The versions this broker accepts: Apache Kafka 4.1's ranges (floors from KIP-896), for every API
# it implements. docs/broker-protocol.md has the table, the sources, and the ranges before. An API
# is offered where its handler is installed (broker.handlers.ApiHandlers, and `register` for the
# group and transaction coordinators).
VERSIONS: dict[int, tuple[int, int]] = {
    API_PRODUCE: (3, 13),
    API_FETCH: (4, 17),
    API_LIST_OFFSETS: (1, 10),
    API_METADATA: (0, 13),
    # OffsetCommit/OffsetFetch v10 (topics by id) were still unstable in 4.1, not listed by its
    # brokers; v9 answers classic groups as v8 does.
    API_OFFSET_COMMIT: (2, 9),
    API_OFFSET_FETCH: (1, 9),
    API_FIND_COORDINATOR: (0, 6),
    API_JOIN_GROUP: (0, 9),
    API_HEARTBEAT: (0, 4),
    API_LEAVE_GROUP: (0, 5),
    API_SYNC_GROUP: (0, 5),
    API_API_VERSIONS: (0, 4),
    API_CREATE_TOPICS: (2, 7),
    API_INIT_PRODUCER_ID: (0, 5),
    API_OFFSET_FOR_LEADER_EPOCH: (2, 4),
    API_ADD_PARTITIONS_TO_TXN: (0, 5),
    API_ADD_OFFSETS_TO_TXN: (0, 4),
    API_END_TXN: (0, 5),
    API_WRITE_TXN_MARKERS: (1, 1),  # v0 was removed in 4.0
    API_TXN_OFFSET_COMMIT: (0, 5),
    API_DESCRIBE_PRODUCERS: (0, 0),
    API_DESCRIBE_TRANSACTIONS: (0, 0),
    API_LIST_TRANSACTIONS: (0, 1),  # v2 (a pattern) came after 4.1
}

# Versions listed in ApiVersions below the accepted floor, as Kafka 4 lists them: Produce v0-v2
# (KAFKA-18659: librdkafka before 2.10 turns compression off unless Produce's range reaches v0).
# Requests of those versions are refused like any unsupported version.
ADVERTISED_FLOORS: dict[int, int] = {API_PRODUCE: 0}

API_NAMES: dict[int, str] = {
    API_PRODUCE: "Produce",
    API_FETCH: "Fetch",
    API_LIST_OFFSETS: "ListOffsets",
    API_METADATA: "Metadata",
    API_OFFSET_COMMIT: "OffsetCommit",
    API_OFFSET_FETCH: "OffsetFetch",
    API_FIND_COORDINATOR: "FindCoordinator",
    API_JOIN_GROUP: "JoinGroup",
    API_HEARTBEAT: "Heartbeat",
    API_LEAVE_GROUP: "LeaveGroup",
    API_SYNC_GROUP: "SyncGroup",
    API_API_VERSIONS: "ApiVersions",
    API_CREATE_TOPICS: "CreateTopics",
    API_INIT_PRODUCER_ID: "InitProducerId",
    API_OFFSET_FOR_LEADER_EPOCH: "OffsetForLeaderEpoch",
    API_ADD_PARTITIONS_TO_TXN: "AddPartitionsToTxn",
    API_ADD_OFFSETS_TO_TXN: "AddOffsetsToTxn",
    API_END_TXN: "EndTxn",
    API_WRITE_TXN_MARKERS: "WriteTxnMarkers",
    API_TXN_OFFSET_COMMIT: "TxnOffsetCommit",
    API_DESCRIBE_PRODUCERS: "DescribeProducers",
    API_DESCRIBE_TRANSACTIONS: "DescribeTransactions",
    API_LIST_TRANSACTIONS: "ListTransactions",
}


def api_name(api_key: int) -> str:
    return API_NAMES.get(api_key, f"api {api_key}")


def advertised_versions(versions: Mapping[int, tuple[int, int]]) -> dict[int, tuple[int, int]]:
    """What ApiVersions lists: the accepted ranges, with Kafka 4's advertised-only floors."""
    return {
        key: (min(low, ADVERTISED_FLOORS.get(key, low)), high)
        for key, (low, high) in sorted(versions.items())
    }


SIZE = struct.Struct(">i")
KEY_VERSION_CID = struct.Struct(">hhi")
_INT32 = struct.Struct(">i")


class FrameError(Exception):
    """A frame the broker cannot answer: the connection is closed (Kafka does the same)."""


@dataclass(frozen=True, slots=True)
class UnsupportedVersion(Exception):
    """A request version outside the accepted range; ApiVersions gets an answer, others a close."""

    api_key: int
    api_version: int
    correlation_id: int
    supported: tuple[int, int]

    def __str__(self) -> str:
        low, high = self.supported
        return (
            f"{api_name(self.api_key)} (api {self.api_key}) v{self.api_version} is not supported: "
            f"this broker accepts v{low}-v{high}"
        )


@dataclass(slots=True)
class Request:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any


@cache
def request_class(api_key: int, version: int) -> Any:
    module = load_payload_module(api_key, version, EntityType.request)
    return _payload_class(module, EntityType.request)


@cache
def response_class(api_key: int, version: int) -> Any:
    module = load_payload_module(api_key, version, EntityType.response)
    return _payload_class(module, EntityType.response)


def _payload_class(module: Any, kind: EntityType) -> Any:
    for value in vars(module).values():
        if isinstance(value, type) and getattr(value, "__type__", None) is kind:
            return value
    raise LookupError(f"no {kind.name} class in {module.__name__}")


@cache
def _reader(cls: Any) -> Any:
    return entity_reader(cls)


@cache
def _writer(cls: Any) -> Any:  # cls is a kio class (hashable)
    return entity_writer(cls)


def parse_request(frame: bytes, versions: Mapping[int, tuple[int, int]]) -> Request:
    """Decode one frame (without its size prefix). Raises FrameError or UnsupportedVersion."""
    if len(frame) < KEY_VERSION_CID.size:
        raise FrameError(f"frame of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id = KEY_VERSION_CID.unpack_from(frame)
    supported = versions.get(api_key)
    if supported is None:
        raise FrameError(f"unknown or unsupported api key {api_key}")
    if not supported[0] <= api_version <= supported[1]:
        raise UnsupportedVersion(api_key, api_version, correlation_id, supported)
    cls = request_class(api_key, api_version)
    try:
        header, offset = _reader(cls.__header_schema__)(frame, 0)
        body, end = _reader(cls)(frame, offset)
    except Exception as exc:  # kio raises several types for bad input; all mean "malformed"
        raise FrameError(f"malformed api {api_key} v{api_version} request: {exc!r}") from None
    if end > len(frame):
        raise FrameError("request body runs past the frame")
    return Request(api_key, api_version, correlation_id, header.client_id, body)


def encode_response(api_key: int, api_version: int, correlation_id: int, body: Any) -> bytes:
    """Size prefix + response header (v1 with tagged fields for flexible versions) + body."""
    cls: Any = type(body)
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    buf.write(_INT32.pack(correlation_id))
    # ApiVersions responses always use header v0, so clients can read them before negotiating.
    if cls.__flexible__ and api_key != API_API_VERSIONS:
        buf.write(b"\0")
    _writer(cls)(buf, body)
    out = buf.getbuffer()
    SIZE.pack_into(out, 0, len(out) - 4)
    del out
    return buf.getvalue()


def encode_request(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: Any
) -> bytes:
    """Size prefix + request header + body (the broker's own replica fetcher and controller use this)."""
    cls: Any = type(body)
    header_cls = cls.__header_schema__
    header = build(
        header_cls,
        {
            "request_api_key": api_key,
            "request_api_version": api_version,
            "correlation_id": correlation_id,
            "client_id": client_id,
        },
    )
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    _writer(header_cls)(buf, header)
    _writer(cls)(buf, body)
    out = buf.getbuffer()
    SIZE.pack_into(out, 0, len(out) - 4)
    del out
    return buf.getvalue()


def parse_response(api_key: int, api_version: int, frame: bytes) -> tuple[int, Any]:
    """Decode a response frame (without size prefix) into (correlation_id, body)."""
    cls = response_class(api_key, api_version)
    (correlation_id,) = _INT32.unpack_from(frame)
    offset = 4
    if cls.__flexible__ and api_key != API_API_VERSIONS:
        offset += 1  # empty tagged fields of response header v1
    body, _ = _reader(cls)(frame, offset)
    return correlation_id, body


def api_versions_fallback(correlation_id: int, versions: Mapping[int, tuple[int, int]]) -> bytes:
    """ApiVersions v0 answer with UNSUPPORTED_VERSION and our ranges (what Kafka sends)."""
    listed = advertised_versions(versions)
    body = bytearray()
    body += struct.pack(">ih", correlation_id, ErrorCode.unsupported_version.value)
    body += struct.pack(">i", len(listed))
    for key, (low, high) in listed.items():
        body += struct.pack(">hhh", key, low, high)
    return SIZE.pack(len(body)) + bytes(body)


# --- building version-specific dataclasses from dicts -------------------------------------------

_PRIMITIVE_DEFAULTS = {
    "int8": 0,
    "int16": 0,
    "int32": 0,
    "int64": 0,
    "uint16": 0,
    "uint32": 0,
    "uint64": 0,
    "float64": 0.0,
    "bool": False,
    "string": "",
    "bytes": b"",
    "records": None,
    "timedelta_i32": None,
    "timedelta_i64": None,
}


@cache
def _field_plan(cls: Any) -> tuple[tuple[str, str, Any, bool, Any], ...]:
    """(name, kind, nested class, has default, fallback value) for each field of cls."""
    plan = []
    for f in dataclasses.fields(cls):
        kind_info = classify_field(f)
        kind = "primitive"
        nested = None
        if isinstance(kind_info, EntityTupleField):
            kind, nested = "entity_tuple", kind_info.type_
        elif isinstance(kind_info, EntityField):
            kind, nested = "entity", kind_info.type_
        elif isinstance(kind_info, PrimitiveTupleField):
            kind = "primitive_tuple"
        elif f.metadata.get("kafka_type") in ("timedelta_i32", "timedelta_i64"):
            kind = "timedelta"
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        fallback: Any = None
        if not has_default:
            if kind in ("entity_tuple", "primitive_tuple"):
                fallback = ()
            elif kind == "entity":
                fallback = None
            else:
                ktype = f.metadata.get("kafka_type", "")
                if ktype == "error_code":
                    fallback = ErrorCode.none
                elif ktype in ("timedelta_i32", "timedelta_i64"):
                    fallback = datetime.timedelta(0)
                else:
                    fallback = _PRIMITIVE_DEFAULTS.get(ktype)
        plan.append((f.name, kind, nested, has_default, fallback))
    return tuple(plan)


def build(cls: Any, data: Mapping[str, Any]) -> Any:
    """Instantiate kio class `cls` from a dict; nested dicts/lists become nested entities."""
    kwargs: dict[str, Any] = {}
    for name, kind, nested, has_default, fallback in _field_plan(cls):
        if name in data:
            value = data[name]
            if kind == "entity_tuple":
                value = (
                    None
                    if value is None
                    else tuple(build(nested, v) if isinstance(v, Mapping) else v for v in value)
                )
            elif kind == "entity":
                if isinstance(value, Mapping):
                    value = build(nested, value)
            elif kind == "primitive_tuple":
                value = None if value is None else tuple(value)
            elif kind == "timedelta" and isinstance(value, int):
                value = datetime.timedelta(milliseconds=value)
            elif name.endswith("error_code") and isinstance(value, int) and not isinstance(value, ErrorCode):
                value = ErrorCode(value)
            kwargs[name] = value
        elif not has_default:
            if kind == "entity" and nested is not None:
                kwargs[name] = build(nested, {})
            else:
                kwargs[name] = fallback
    return cls(**kwargs)


def build_response(api_key: int, api_version: int, data: Mapping[str, Any]) -> Any:
    return build(response_class(api_key, api_version), data)


def build_request(api_key: int, api_version: int, data: Mapping[str, Any]) -> Any:
    return build(request_class(api_key, api_version), data)
