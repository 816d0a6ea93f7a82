"""The history writer: appended and flushed as it happens.

The history is sacred. The writer flushes (and by default fsyncs in batches) every line as it is
written, so a controller killed with SIGKILL leaves every completed line on disk.
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

    def __init__(self, path: str | os.PathLike[str], fsync_every: int = 64, start_ns: int | None = None):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._start_ns = time.monotonic_ns() if start_ns is None else start_ns
        self._fsync_every = fsync_every
        self._since_fsync = 0
        self._index = 0
        # Appending to an existing history continues its indices (e.g. a drain after a restart).
        if self.path.exists():
            self._index = sum(1 for _ in iter_ops(self.path, problems=[]))
        self._file: IO[str] = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def now_ns(self) -> int:
        return time.monotonic_ns() - self._start_ns

    def append(self, op: dict[str, Any]) -> dict[str, Any]:
        """Write one op (without index/time; they are filled in) and return the written record."""
        with self._lock:
            record = {"index": self._index, "time": self.now_ns(), **op}
            self._write_line(json.dumps(record, separators=(",", ":")))
            return record

    def append_encoded(self, body: str) -> int:
        """Write one op that is already a compact JSON object without index/time; returns its index.

        For client worker processes (workloads/workers.py): they encode their ops themselves and the
        controller's single writer only stamps them. The line is the one `append` would write.
        """
        if not (body.startswith('{"') and body.endswith("}")) or "\n" in body:
            raise ValueError(f"not a compact JSON object: {body[:80]!r}")
        with self._lock:
            index = self._index
            self._write_line(f'{{"index":{index},"time":{self.now_ns()},{body[1:]}')
            return index

    def _write_line(self, line: str) -> None:
        """Append and flush one line as the next index (the caller holds the lock)."""
        self._file.write(line + "\n")
        self._file.flush()
        self._index += 1
        self._since_fsync += 1
        if self._fsync_every and self._since_fsync >= self._fsync_every:
            os.fsync(self._file.fileno())
            self._since_fsync = 0

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.flush()
                os.fsync(self._file.fileno())
                self._file.close()

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
