"""The asyncio TCP server: frames in, handler tasks, responses out in request order.

Requests on one connection are decoded in order and each handler starts at once (appends happen
synchronously at the start of a produce handler, so per-connection order is kept); responses are
written in request order, as Kafka clients require. A bad frame closes only its own connection.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from broker import protocol as p
from broker.config import Listener
from broker.handlers import ApiHandlers

log = logging.getLogger(__name__)

MAX_IN_FLIGHT = 64
# Which client software uses which version of which API, logged once each (bounded), so a user sees
# what every client negotiated with this broker.
_SEEN_VERSIONS: set[tuple[str | None, int, int]] = set()
_SEEN_LIMIT = 500


def _note_version(request: p.Request, peer: object) -> None:
    key = (request.client_id, request.api_key, request.api_version)
    if key in _SEEN_VERSIONS or len(_SEEN_VERSIONS) >= _SEEN_LIMIT:
        return
    _SEEN_VERSIONS.add(key)
    log.info(
        "client %r (%s) uses %s v%d",
        request.client_id,
        peer,
        p.api_name(request.api_key),
        request.api_version,
    )


class Connection:
    def __init__(
        self,
        handlers: ApiHandlers,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        max_frame: int,
    ) -> None:
        self.handlers = handlers
        self.reader = reader
        self.writer = writer
        self.max_frame = max_frame
        self.peer = writer.get_extra_info("peername")
        self.pending: asyncio.Queue[tuple[p.Request, asyncio.Task[Any]] | None] = asyncio.Queue(MAX_IN_FLIGHT)

    async def serve(self) -> None:
        responder = asyncio.create_task(self._respond())
        self._responder = responder
        try:
            await self._read_requests()
        finally:
            if responder.done():
                self._drain_pending()
            else:
                await self.pending.put(None)
            try:
                await responder
            except Exception:
                log.debug("responder for %s ended with an error", self.peer, exc_info=True)
            self.writer.close()

    async def _read_requests(self) -> None:
        while not self._responder.done():
            try:
                size_bytes = await self.reader.readexactly(4)
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            (size,) = p.SIZE.unpack(size_bytes)
            if size < 0 or size > self.max_frame:
                log.warning("closing %s: frame size %d outside [0, %d]", self.peer, size, self.max_frame)
                return
            try:
                frame = await self.reader.readexactly(size)
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            try:
                request = p.parse_request(frame, self.handlers.accepted)
            except p.UnsupportedVersion as exc:
                if exc.api_key == p.API_API_VERSIONS:
                    # Kafka's answer: UNSUPPORTED_VERSION in an ApiVersions v0 body with our ranges,
                    # so the client retries with a version it finds there.
                    log.info(
                        "%s from %s: answered UNSUPPORTED_VERSION with the supported ranges", exc, self.peer
                    )
                    await self._send_now(p.api_versions_fallback(exc.correlation_id, self.handlers.versions))
                    continue
                # Any other API: Kafka 4 closes the connection (its request parser refuses the header).
                log.warning("closing %s: %s", self.peer, exc)
                return
            except p.FrameError as exc:
                log.warning("closing %s: %s", self.peer, exc)
                return
            _note_version(request, self.peer)
            task = asyncio.ensure_future(self.handlers.respond(request))
            if self._responder.done():
                task.cancel()
                return
            await self.pending.put((request, task))

    async def _send_now(self, data: bytes) -> None:
        # Responses must stay in order: wait for everything queued before this one.
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        async def marker() -> Any:
            await done
            return None

        task = asyncio.ensure_future(marker())
        await self.pending.put((p.Request(-1, 0, 0, None, data), task))
        done.set_result(None)

    async def _respond(self) -> None:
        while True:
            item = await self.pending.get()
            if item is None:
                return
            request, task = item
            try:
                body = await task
            except Exception:
                log.exception(
                    "handler for api %d v%d failed; closing %s",
                    request.api_key,
                    request.api_version,
                    self.peer,
                )
                self.writer.close()
                self._drain_pending()
                return
            if request.api_key == -1:
                data = request.body
            elif body is None:
                continue
            else:
                data = body  # the handler encoded its frame (broker.wire or kio)
            try:
                self.writer.write(data)
                await self.writer.drain()
            except (ConnectionError, RuntimeError):
                self._drain_pending()
                return

    def _drain_pending(self) -> None:
        while not self.pending.empty():
            item = self.pending.get_nowait()
            if item is not None:
                item[1].cancel()


class BrokerServer:
    def __init__(self, handlers: ApiHandlers, listener: Listener, max_frame: int) -> None:
        self.handlers = handlers
        self.listener = listener
        self.port = listener.port  # once started, the port bound (a listener's port 0: a free one)
        self.max_frame = max_frame
        self._server: asyncio.AbstractServer | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        host = self.listener.host
        self._server = await asyncio.start_server(self._accept, host, self.listener.port, limit=2**20)
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]
        log.info("listening on %s:%d", host, self.port)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            await Connection(self.handlers, reader, writer, self.max_frame).serve()
        except Exception:
            log.exception("connection handler crashed")
        finally:
            self._writers.discard(writer)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        # Closing the sockets ends each connection's read loop (cancelling the handler tasks
        # instead makes asyncio's stream callbacks log spurious errors).
        for writer in list(self._writers):
            writer.close()
        await asyncio.sleep(0)
