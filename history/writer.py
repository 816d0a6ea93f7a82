"""The history writer: appended and flushed as it happens.

The history is sacred. The writer flushes every line as it is written, so a controller killed with
SIGKILL leaves every completed line on disk; a background thread fsyncs what was written at most
`fsync_interval_s` later (or as soon as `fsync_every` lines are waiting), never holding up writers,
so a machine that loses power loses at most that much of the tail.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import IO, Any

from history.reader import iter_ops


class HistoryWriter:
    """Appends ops as JSON lines; assigns `index` and `time` so callers cannot get them wrong.

    Thread-safe: client threads and the nemesis share one writer. `time` is nanoseconds of the
    controller's monotonic clock since the writer was created (the test start).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        fsync_every: int = 64,
        start_ns: int | None = None,
        fsync_interval_s: float = 0.2,
    ):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._fsync_interval_s = fsync_interval_s
        self._unsynced = threading.Event()  # lines written since the last fsync
        self._sync_now = threading.Event()  # fsync_every lines are waiting
        self._start_ns = time.monotonic_ns() if start_ns is None else start_ns
        self._fsync_every = fsync_every
        self._since_fsync = 0
        self._index = 0
        # Appending to an existing history continues its indices (e.g. a drain after a restart).
        if self.path.exists():
            self._index = sum(1 for _ in iter_ops(self.path, problems=[]))
        self._file: IO[str] = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._closing = threading.Event()
        self._syncer: threading.Thread | None = None
        if fsync_every:
            self._syncer = threading.Thread(target=self._sync_loop, name="history-fsync", daemon=True)
            self._syncer.start()

    @property
    def closed(self) -> bool:
        """Closed (or closing): nothing more may be appended."""
        return self._closing.is_set()

    def now_ns(self) -> int:
        return time.monotonic_ns() - self._start_ns

    def append(self, op: dict[str, Any]) -> dict[str, Any]:
        """Write one op (without index/time; they are filled in) and return the written record."""
        if not op or "index" in op or "time" in op:
            with self._lock:
                record = {"index": self._index, "time": self.now_ns(), **op}
                self._write_lines([json.dumps(record, separators=(",", ":"))])
                return record
        body = json.dumps(op, separators=(",", ":"))  # encoded outside the lock
        with self._lock:
            index, now = self._index, self.now_ns()
            self._write_lines([f'{{"index":{index},"time":{now},{body[1:]}'])
        return {"index": index, "time": now, **op}

    def append_encoded(self, body: str) -> int:
        """Write one op that is already a compact JSON object without index/time; returns its index.

        For client worker processes (workloads/workers.py): they encode their ops themselves and the
        controller's single writer only stamps them. The line is the one `append` would write.
        """
        return self.append_encoded_many([body])

    def append_encoded_many(self, bodies: list[str]) -> int:
        """`append_encoded` for several ops at once: consecutive indices, one write and one flush
        (the controller's group commit of lines that arrived together). Returns the first index."""
        for body in bodies:
            if not (body.startswith('{"') and body.endswith("}")) or "\n" in body:
                raise ValueError(f"not a compact JSON object: {body[:80]!r}")
        with self._lock:
            first = self._index
            now = self.now_ns()
            self._write_lines(
                [f'{{"index":{first + i},"time":{now},{body[1:]}' for i, body in enumerate(bodies)]
            )
            return first

    def _write_lines(self, lines: list[str]) -> None:
        """Append and flush lines as the next indices (the caller holds the lock)."""
        self._file.write("".join(line + "\n" for line in lines))
        self._file.flush()
        self._index += len(lines)
        self._since_fsync += len(lines)
        self._unsynced.set()
        if self._fsync_every and self._since_fsync >= self._fsync_every:
            self._since_fsync = 0
            self._sync_now.set()

    def _sync_loop(self) -> None:
        """fsync what was written, off the writers' path: soon after each line, early when many wait."""
        while not self._closing.is_set():
            self._sync_now.wait(self._fsync_interval_s)
            self._sync_now.clear()
            if self._unsynced.is_set():
                self._unsynced.clear()
                try:
                    os.fsync(self._file.fileno())
                except (OSError, ValueError):  # closed meanwhile: close() syncs
                    return

    def close(self) -> None:
        self._closing.set()
        self._sync_now.set()
        if self._syncer is not None:
            self._syncer.join()
        with self._lock:
            if not self._file.closed:
                self._file.flush()
                os.fsync(self._file.fileno())
                self._file.close()

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
