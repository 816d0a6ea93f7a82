"""strandline's S3 proxy: HTTP/1.1 in front of an S3-compatible store, on the store's own node.

It sits between a system's brokers and the S3-compatible store they keep everything in (they are
pointed at the proxy instead of the store), so faults can do to the brokers' requests what users
of object-storage Kafka meet: 503 SlowDown (throttling), slow requests, a reply lost after the
store applied the request (a PUT that succeeded but whose client never heard), and connection
resets. A fault is a rule in a JSON file written beside it (`{"id", "fault", "probability",
"latency_ms", "methods", "seed"}`; `{}`: none), read at every request and taken anew when it changed; each request meets
the rule with its probability, for as long as the rule is in place (the fault's window). Every
injection is logged (stdout) and counted in a stats file. A role of `kind = "s3"` in a system
definition gets one (clusters/store_proxy.py); the `storage` faults (nemesis/packages/storage.py)
write its rules.

It runs on the node as `python -m clusters.s3_proxy --listen A:P --upstream A:P --rules F --stats F`
and uses the standard library only. Requests are relayed as they are (headers, bodies in
Content-Length or chunked form, keep-alive); an `Expect: 100-continue` is answered by the proxy
itself, so the store gets the body at once.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import random
import socket
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("s3proxy")

FAULTS = ("slowdown", "latency", "drop-reply", "reset")
HEAD_LIMIT = 64 * 1024
SLOWDOWN_BODY = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message><RequestId>strandline-s3-proxy</RequestId></Error>"
)


@dataclass
class Rule:
    """The fault in place ("" : none)."""

    id: str = ""
    fault: str = ""
    probability: float = 1.0
    latency_ms: int = 1000
    methods: tuple[str, ...] = ()  # empty: every method
    rng: random.Random = field(default_factory=random.Random)

    def strikes(self, method: str) -> bool:
        if not self.fault or (self.methods and method not in self.methods):
            return False
        return self.rng.random() < self.probability


class Rules:
    """The rules file, read at each request (a few bytes) and parsed again when its text changed."""

    def __init__(self, path: Path, stats: Path) -> None:
        self.path, self.stats_path = path, stats
        self.stamp: str | None = None
        self.rule = Rule()
        self.counts: dict[str, int] = {"requests": 0, "injected": 0}

    def current(self) -> Rule:
        try:
            stamp = self.path.read_text()  # small: read whole (two writes may share an mtime)
        except OSError:
            stamp = None
        if stamp != self.stamp:
            self.stamp = stamp
            self.rule = _read_rule(self.path)
            self.counts = {"requests": 0, "injected": 0}
            _say(f"rule {self.rule.id or '(none)'}: {self.rule.fault or 'no fault'}")
        return self.rule

    def count(self, injected: bool) -> None:
        self.counts["requests"] += 1
        if injected:
            self.counts["injected"] += 1
            self._write_stats()

    def _write_stats(self) -> None:
        tmp = self.stats_path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"id": self.rule.id, **self.counts}))
        os.replace(tmp, self.stats_path)


def _read_rule(path: Path) -> Rule:
    try:
        raw = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return Rule()
    fault = str(raw.get("fault", ""))
    if fault not in FAULTS:
        return Rule()
    return Rule(
        id=str(raw.get("id", "")),
        fault=fault,
        probability=float(raw.get("probability", 1.0)),
        latency_ms=int(raw.get("latency_ms", 1000)),
        methods=tuple(str(m).upper() for m in raw.get("methods") or ()),
        rng=random.Random(int(raw.get("seed", 0))),
    )


def _say(line: str) -> None:
    log.info("%s", line)


# --- HTTP/1.1 framing ---------------------------------------------------------------------------


@dataclass
class Message:
    head: bytes  # the start line and headers, with the final CRLF CRLF
    body: bytes  # as it travels (chunked bodies keep their framing)
    first_line: str
    headers: dict[str, str]  # lowercase names (the last of repeated ones)

    @property
    def closes(self) -> bool:
        return self.headers.get("connection", "").lower() == "close"


async def _read_head(reader: asyncio.StreamReader) -> tuple[bytes, str, dict[str, str]] | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as e:
        if e.partial.strip():
            raise ConnectionError("connection closed inside a message head") from None
        return None  # closed between messages: the peer is done
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return head, lines[0], headers


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str], until_close: bool) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        out = bytearray()
        while True:
            size_line = await reader.readuntil(b"\r\n")
            out += size_line
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while True:  # trailers, then an empty line
                    trailer = await reader.readuntil(b"\r\n")
                    out += trailer
                    if trailer == b"\r\n":
                        return bytes(out)
            out += await reader.readexactly(size + 2)
    if "content-length" in headers:
        return await reader.readexactly(int(headers["content-length"]))
    return await reader.read() if until_close else b""


async def read_request(reader: asyncio.StreamReader) -> Message | None:
    got = await _read_head(reader)
    if got is None:
        return None
    head, first, headers = got
    return Message(head, b"", first, headers)


async def read_response(reader: asyncio.StreamReader, method: str) -> Message:
    while True:
        got = await _read_head(reader)
        if got is None:
            raise ConnectionError("the store closed the connection without answering")
        head, first, headers = got
        status = int(first.split(" ")[1]) if len(first.split(" ")) > 1 else 0
        if 100 <= status < 200:
            continue  # an interim answer: the real one follows
        bodiless = method == "HEAD" or status in (204, 304)
        body = b"" if bodiless else await _read_body(reader, headers, until_close=True)
        return Message(head, body, first, headers)


def _without_expect(head: bytes) -> bytes:
    lines = head.split(b"\r\n")
    return b"\r\n".join(line for line in lines if not line.lower().startswith(b"expect:"))


def slowdown_response() -> bytes:
    return (
        b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n"
        + f"Content-Length: {len(SLOWDOWN_BODY)}\r\n".encode()
        + b"Retry-After: 1\r\nConnection: keep-alive\r\n\r\n"
        + SLOWDOWN_BODY
    )


def reset(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP reset (SO_LINGER 0), as a load balancer or a crashed front end does."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


# --- the proxy ------------------------------------------------------------------------------------


class Proxy:
    def __init__(self, upstream: tuple[str, int], rules: Rules) -> None:
        self.upstream = upstream
        self.rules = rules

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        store: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            while True:
                request = await read_request(reader)
                if request is None:
                    return
                if request.headers.get("expect", "").lower() == "100-continue":
                    writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                    await writer.drain()
                    request.head = _without_expect(request.head)
                request.body = await _read_body(reader, request.headers, until_close=False)
                method = request.first_line.split(" ")[0].upper()
                rule = self.rules.current()
                strikes = rule.strikes(method)
                self.rules.count(strikes)
                if strikes:
                    _say(f"{rule.id}: {rule.fault} {request.first_line}")
                if strikes and rule.fault == "reset":
                    reset(writer)
                    return
                if strikes and rule.fault == "slowdown":
                    writer.write(slowdown_response())
                    await writer.drain()
                    continue
                if strikes and rule.fault == "latency":
                    await asyncio.sleep(rule.latency_ms / 1000)
                store, response = await self._forward(store, request, method)
                if strikes and rule.fault == "drop-reply":
                    writer.close()  # the store applied it; its client never hears so
                    return
                writer.write(response.head + response.body)
                await writer.drain()
                if request.closes or response.closes:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as e:
            _say(f"connection ended: {type(e).__name__} {e}")
        finally:
            if store is not None:
                store[1].close()
            with contextlib.suppress(Exception):
                writer.close()

    async def _forward(
        self, store: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None, request: Message, method: str
    ) -> tuple[tuple[asyncio.StreamReader, asyncio.StreamWriter], Message]:
        """Relay one request on the connection to the store (opened again when it was closed)."""
        for attempt in (0, 1):
            if store is None or store[1].is_closing():
                store = await asyncio.open_connection(*self.upstream, limit=HEAD_LIMIT)
            try:
                store[1].write(request.head + request.body)
                await store[1].drain()
                response = await read_response(store[0], method)
            except (ConnectionError, asyncio.IncompleteReadError):
                store[1].close()
                store = None
                if attempt:
                    raise
                continue  # a kept-alive connection the store had closed: once more on a new one
            if (
                response.closes
                or "content-length" not in response.headers
                and "chunked" not in (response.headers.get("transfer-encoding", ""))
            ):
                store[1].close()
            return store, response
        raise ConnectionError("unreachable")


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


async def _main(args: argparse.Namespace) -> None:
    proxy = Proxy(_address(args.upstream), Rules(Path(args.rules), Path(args.stats)))
    host, port = _address(args.listen)
    server = await asyncio.start_server(proxy.serve, host, port, limit=HEAD_LIMIT, reuse_address=True)
    _say(f"s3 proxy on {args.listen} for {args.upstream}; rules in {args.rules}")
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m clusters.s3_proxy", description=__doc__.splitlines()[0])
    parser.add_argument("--listen", required=True, help="host:port to serve on")
    parser.add_argument("--upstream", required=True, help="host:port of the S3-compatible store")
    parser.add_argument("--rules", required=True, help="the JSON rules file the nemesis writes")
    parser.add_argument("--stats", required=True, help="where the injection counts go")
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(asctime)s %(message)s")
    try:
        asyncio.run(_main(args))
    except KeyboardInterrupt:
        return 0
    except OSError as e:
        log.error("s3 proxy: %s", e)
        return 4
    return 0


if __name__ == "__main__":
    sys.exit(main())
