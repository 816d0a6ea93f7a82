"""Targets by role: ZooKeeper, the group and transaction coordinators (asked with FindCoordinator)."""

from __future__ import annotations

import socket
import struct
import threading
from dataclasses import dataclass, field
from typing import Any

import pytest

from foundation.errors import BadInput
from nemesis import role_targets


@dataclass
class N:
    name: str
    address: str


@dataclass
class Ctx:
    nodes: list[N]
    zookeeper: N | None
    sut: Any
    servers: list[str] = field(default_factory=list)

    def bootstrap(self) -> list[str]:
        return self.servers


class Named:
    def broker_id(self, node: Any) -> int:
        return int(node.name[1:])

    def node_of_broker(self, broker_id: int) -> str | None:
        return f"n{broker_id}"


BROKERS = [N("n1", "10.0.0.1"), N("n2", "10.0.0.2"), N("n3", "10.0.0.3")]


def test_zookeeper_is_the_node_apart_and_refused_where_there_is_none() -> None:
    assert role_targets.zookeeper_nodes(Ctx(BROKERS, N("zk", "10.0.0.9"), Named())) == ["zk"]
    kraft = Ctx(BROKERS, None, Named())
    with pytest.raises(BadInput, match="target zookeeper needs a ZooKeeper apart from the brokers"):
        role_targets.check("zookeeper", kraft, "kill")
    with pytest.raises(BadInput, match="names its brokers"):
        role_targets.check("coordinator", Ctx(BROKERS, None, object()), "pause")


def answer_find_coordinator(error: int, node_id: int) -> tuple[int, list[tuple[str, int]]]:
    """A one-shot broker on 127.0.0.1 answering FindCoordinator v1; returns its port and the
    (key, key type) it was asked."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    asked: list[tuple[str, int]] = []

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            size = struct.unpack(">i", conn.recv(4))[0]
            data = b""
            while len(data) < size:
                data += conn.recv(size - len(data))
            client_len = struct.unpack_from(">h", data, 8)[0]
            pos = 10 + client_len
            key_len = struct.unpack_from(">h", data, pos)[0]
            key = data[pos + 2 : pos + 2 + key_len].decode()
            asked.append((key, data[pos + 2 + key_len]))
            body = struct.pack(">iih", 1, 0, error) + struct.pack(">h", -1)
            body += struct.pack(">ih", node_id, 9) + b"127.0.0.1" + struct.pack(">i", 9092)
            conn.sendall(struct.pack(">i", len(body)) + body)
        server.close()

    threading.Thread(target=serve, daemon=True).start()
    return server.getsockname()[1], asked


def test_the_coordinator_is_the_broker_find_coordinator_names() -> None:
    port, asked = answer_find_coordinator(0, 2)
    ctx = Ctx(BROKERS, None, Named(), [f"127.0.0.1:{port}"])
    assert role_targets.resolve("coordinator", ctx, {"group": "g7"}) == ["n2"]
    assert asked == [("g7", 0)]


def test_a_coordinator_that_is_not_available_names_no_node() -> None:
    port, asked = answer_find_coordinator(15, -1)  # COORDINATOR_NOT_AVAILABLE
    ctx = Ctx(BROKERS, None, Named(), ["127.0.0.1:1", f"127.0.0.1:{port}"])  # the first one is down
    assert role_targets.resolve("txn-coordinator", ctx, {}) == []
    assert asked == [("strandline-txn-0", 1)]
