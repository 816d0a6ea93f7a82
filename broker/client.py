"""A minimal Kafka client connection for broker-to-broker calls (replica fetches, controller queries).

One request in flight at a time; requests and responses use the same codecs as the server.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping
from typing import Any

from broker import protocol as p
from broker import wire


class ConnectionClosed(Exception):
    pass


class BrokerConnection:
    def __init__(self, host: str, port: int, client_id: str) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._ids = itertools.count(1)
        self._lock = asyncio.Lock()

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    async def connect(self, timeout: float = 2.0) -> None:
        self._reader, self._writer = await asyncio.wait_for(
            asyncio.open_connection(self.host, self.port, limit=2**22), timeout
        )

    def _frame(self, api_key: int, version: int, correlation_id: int, body: Any) -> bytes:
        """A dict body through the hand-written codec or kio; a kio body (a client's request being
        passed on, broker.forwarding) as it is."""
        if not isinstance(body, Mapping):
            return p.encode_request(api_key, version, correlation_id, self.client_id, body)
        frame = wire.encode_request(api_key, version, correlation_id, self.client_id, body)
        if frame is None:
            frame = p.encode_request(
                api_key, version, correlation_id, self.client_id, p.build_request(api_key, version, body)
            )
        return frame

    async def send(self, api_key: int, version: int, body: Any) -> None:
        """A request that gets no response (Produce with acks=0)."""
        async with self._lock:
            if not self.connected:
                await self.connect()
            assert self._writer is not None
            try:
                self._writer.write(self._frame(api_key, version, next(self._ids), body))
                await self._writer.drain()
            except OSError as exc:
                self.close()
                raise ConnectionClosed(f"{self.host}:{self.port}: {exc!r}") from None

    async def request(self, api_key: int, version: int, body: Any, timeout: float = 10.0) -> Any:
        """`body`: a dict (built for `version`) or a kio request object."""
        async with self._lock:
            if not self.connected:
                await self.connect()
            assert self._reader is not None and self._writer is not None
            correlation_id = next(self._ids)
            frame = self._frame(api_key, version, correlation_id, body)
            try:
                self._writer.write(frame)
                await self._writer.drain()
                async with asyncio.timeout(timeout):  # one timer, not a task per read
                    size_bytes = await self._reader.readexactly(4)
                    (size,) = p.SIZE.unpack(size_bytes)
                    data = await self._reader.readexactly(size)
            except (OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
                self.close()
                raise ConnectionClosed(f"{self.host}:{self.port}: {exc!r}") from None
            got_id, response = p.parse_response(api_key, version, data)
            if got_id != correlation_id:
                self.close()
                raise ConnectionClosed(
                    f"{self.host}:{self.port}: correlation id {got_id} != {correlation_id}"
                )
            return response

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None
