"""Raw Kafka wire access for the broker's tests: one connection, requests in, responses out; one-record batches."""

from __future__ import annotations

import socket
import struct
import time

from broker import protocol as p
from broker.storage.build import build_batch


class Wire:
    """A raw Kafka connection: send a request, read its response."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.correlation_id = 0

    def call(self, api_key: int, version: int, body: dict[str, object]) -> object:
        self.send(api_key, version, body)
        return self.receive(api_key, version)

    def send(self, api_key: int, version: int, body: dict[str, object]) -> None:
        """Send a request without waiting for its answer (`receive` reads it)."""
        self.correlation_id += 1
        frame = p.encode_request(
            api_key, version, self.correlation_id, "fuzz", p.build_request(api_key, version, body)
        )
        self.sock.sendall(frame)

    def receive(self, api_key: int, version: int) -> object:
        """The answer to the last request sent."""
        size = struct.unpack(">i", self._read(4))[0]
        correlation_id, response = p.parse_response(api_key, version, self._read(size))
        assert correlation_id == self.correlation_id
        return response

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    def close(self) -> None:
        self.sock.close()


def one_record_batch(value: bytes) -> bytes:
    return build_batch([value], timestamp_ms=int(time.time() * 1000))
