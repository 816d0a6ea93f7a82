"""Leaders, leader epochs, ISRs, the controller and the live brokers as Kafka's Metadata and
DescribeCluster answers show them to clients (kafka-python's admin client).

Used by every system that speaks Kafka's protocol without a ZooKeeper the harness reads directly:
Apache Kafka in KRaft mode (clusters/kafka.py) and systems from a definition file
(clusters/defined.py). A node's own readiness is asked of that node alone (`node_answers`).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from collections.abc import Callable, Sequence
from typing import Any

from foundation.errors import InfrastructureError

ATTEMPTS = 3  # fresh admin clients per metadata request
RETRY_PAUSE_S = 0.3


def field_of(record: dict[str, Any], *names: str, default: Any = None) -> Any:
    """kafka-python names Metadata fields differently across versions."""
    for name in names:
        if name in record:
            return record[name]
    return default


class KafkaMetadata:
    """One admin client on the bootstrap servers, reconnected after a failure."""

    def __init__(self, bootstrap: Callable[[], list[str]], node_of_broker: Callable[[int], str | None]):
        self.bootstrap = bootstrap
        self.node_of_broker = node_of_broker
        self._admin: Any = None

    def admin(self) -> Any:
        from kafka.admin import KafkaAdminClient

        if self._admin is None:
            try:
                self._admin = KafkaAdminClient(
                    bootstrap_servers=self.bootstrap(),
                    request_timeout_ms=10_000,
                    client_id="strandline-controller",
                )
            except Exception as e:
                raise InfrastructureError(
                    f"cannot reach Kafka at {','.join(self.bootstrap())}: {e}"
                ) from None
        return self._admin

    def close(self) -> None:
        if self._admin is not None:
            with contextlib.suppress(Exception):
                self._admin.close()
            self._admin = None

    def _ask(self, what: Callable[[Any], Any]) -> Any:
        """One admin request; on failure a fresh client (bootstrapped from any broker that answers:
        the one the old client used may be the broker a fault just killed) tries again."""
        error: Exception | None = None
        for attempt in range(ATTEMPTS):
            try:
                return what(self.admin())
            except Exception as e:
                error = e
                self.close()
                if attempt + 1 < ATTEMPTS:
                    time.sleep(RETRY_PAUSE_S)
        assert error is not None
        if isinstance(error, InfrastructureError):
            raise error
        raise InfrastructureError(f"reading Kafka metadata: {type(error).__name__} {error}") from None

    def registered_brokers(self) -> list[int]:
        """The brokers the metadata lists now (KRaft drops a broker once its session is fenced)."""
        brokers = self._ask(lambda a: a.describe_cluster()["brokers"])
        # DescribeCluster names them node_id; the Metadata fallback of older brokers broker_id
        return sorted(int(field_of(b, "node_id", "broker_id")) for b in brokers)

    def wait_brokers(self, wanted: set[int], timeout: float) -> None:
        """Until the metadata lists every broker in `wanted`."""
        deadline = time.monotonic() + timeout
        seen: set[int] = set()
        error = ""
        while True:
            try:
                seen = set(self.registered_brokers())
                if wanted <= seen:
                    return
            except Exception as e:  # not up yet: keep asking
                error = f" (last error: {type(e).__name__} {e})"
                self.close()
            if time.monotonic() > deadline:
                raise InfrastructureError(
                    f"brokers {sorted(wanted - seen)} are not in the metadata after {timeout:g}s{error}"
                )
            time.sleep(0.5)

    def partition_state(self) -> dict[tuple[str, int], dict[str, object]]:
        topics = self._ask(lambda a: a.describe_topics())
        result: dict[tuple[str, int], dict[str, object]] = {}
        for topic in topics:
            name = field_of(topic, "topic", "name")
            if field_of(topic, "is_internal", default=False) or str(name).startswith("__"):
                continue
            for p in field_of(topic, "partitions", default=[]):
                leader = int(field_of(p, "leader", "leader_id", default=-1))
                result[(str(name), int(field_of(p, "partition", "partition_index")))] = {
                    "leader": self.node_of_broker(leader) if leader >= 0 else None,
                    "leader_epoch": int(field_of(p, "leader_epoch", default=-1)),
                    "isr": [
                        self.node_of_broker(int(b)) or str(b)
                        for b in field_of(p, "isr", "isr_nodes", default=[])
                    ],
                }
        return result

    def leaders(self) -> dict[tuple[str, int], str | None]:
        return {tp: s["leader"] for tp, s in self.partition_state().items()}  # type: ignore[misc]

    def controller(self) -> str | None:
        """The broker Metadata names as controller (in KRaft: any live broker, as Kafka reports it)."""
        controller_id = self._ask(lambda a: a.describe_cluster().get("controller_id"))
        if controller_id is None or int(controller_id) < 0:
            return None
        return self.node_of_broker(int(controller_id))


def _request(sock: socket.socket, api_key: int, version: int, body: bytes) -> bytes:
    """One request (header v1) and its response body (after the correlation id)."""
    client = b"strandline-ready"
    header = struct.pack(">hhih", api_key, version, api_key, len(client)) + client
    frame = header + body
    sock.sendall(struct.pack(">i", len(frame)) + frame)
    size = struct.unpack(">i", _read(sock, 4))[0]
    return _read(sock, size)[4:]


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("connection closed")
        data += chunk
    return data


def _metadata_versions(api_versions: bytes) -> tuple[int, int] | None:
    """(min, max) Metadata versions from an ApiVersions v0 response body (None: error or absent)."""
    error, count = struct.unpack_from(">hi", api_versions, 0)
    if error:
        raise ConnectionError(f"ApiVersions error code {error}")
    for i in range(count):
        key, low, high = struct.unpack_from(">hhh", api_versions, 6 + 6 * i)
        if key == METADATA:
            return low, high
    return None


def _broker_ids(body: bytes, version: int) -> list[int]:
    """The node ids in a Metadata response of version 0..8 (non-flexible; brokers come first)."""
    pos = 4 if version >= 3 else 0  # throttle_time_ms
    (count,) = struct.unpack_from(">i", body, pos)
    pos += 4
    ids = []
    for _ in range(count):
        node_id, host_len = struct.unpack_from(">ih", body, pos)
        pos += 6 + host_len + 4  # host, port
        if version >= 1:  # rack: a nullable string
            (rack_len,) = struct.unpack_from(">h", body, pos)
            pos += 2 + max(rack_len, 0)
        ids.append(node_id)
    return ids


API_VERSIONS, METADATA = 18, 3
LAST_RIGID_METADATA = 8  # Metadata v9+ uses flexible (tagged) encodings


def node_answers(address: str, port: int, brokers: Sequence[int], timeout: float = 5.0) -> str | None:
    """Does the broker at address:port answer ApiVersions and list every broker in `brokers` in its
    Metadata? None when it does, else what is missing (asked of that one broker, no other)."""
    try:
        with socket.create_connection((address, port), timeout=timeout) as sock:
            versions = _metadata_versions(_request(sock, API_VERSIONS, 0, b""))
            if versions is None or versions[0] > LAST_RIGID_METADATA:
                return f"{address}:{port} offers no Metadata version 0..{LAST_RIGID_METADATA}"
            version = min(versions[1], LAST_RIGID_METADATA)
            body = struct.pack(">i", 0 if version >= 1 else 0)  # no topics: brokers only
            if version >= 4:
                body += b"\x00"  # allow_auto_topic_creation
            if version >= 8:
                body += b"\x00\x00"  # include cluster / topic authorized operations
            listed = set(_broker_ids(_request(sock, METADATA, version, body), version))
    except (OSError, ConnectionError, struct.error) as e:
        return f"{address}:{port} does not answer ApiVersions and Metadata ({type(e).__name__} {e})"
    missing = sorted(set(brokers) - listed)
    return f"{address}:{port} lists no broker {missing} in its metadata" if missing else None
