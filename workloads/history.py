"""The history journal: one JSON object per line, appended and flushed as it happens.

The history is sacred. The writer flushes (and by default fsyncs in batches) every line as it is
written, so a controller killed with SIGKILL leaves every completed line on disk. Readers stream the
file line by line, never loading it whole, and treat a torn last line (a crash mid-write) as the end
of the history, with a warning; a malformed line elsewhere is reported with its line number.

Format: docs/history-format.md. Field names are the contract; do not rename them.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

log = logging.getLogger(__name__)

OP_TYPES = ("invoke", "ok", "fail", "info")
CLIENT_FS = frozenset({"send", "poll", "assign", "crash", "subscribe", "commit", "rebalance"})
NEMESIS_PROCESS = "nemesis"


class HistoryError(Exception):
    """A history line that cannot be understood; carries the 1-based line number."""

    def __init__(self, path: str | os.PathLike[str], line_no: int, reason: str):
        super().__init__(f"{path}:{line_no}: {reason}")
        self.path = str(path)
        self.line_no = line_no
        self.reason = reason


@dataclass(frozen=True)
class ReadProblem:
    """Something a reader skipped; the checker turns any of these into an incomplete history."""

    line_no: int
    reason: str
    torn_tail: bool = False


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


def _validate(record: Any) -> str | None:
    """Why a decoded line is not a history op, or None when it is one."""
    if not isinstance(record, dict):
        return "not a JSON object"
    for key in ("index", "time", "process", "type", "f"):
        if key not in record:
            return f"missing field {key!r}"
    if record["type"] not in OP_TYPES:
        return f"unknown type {record['type']!r}"
    process = record["process"]
    if process == NEMESIS_PROCESS:
        return None
    if not isinstance(process, int) or isinstance(process, bool):
        return f"process must be an integer or 'nemesis', got {process!r}"
    if record["f"] not in CLIENT_FS:
        return f"unknown f {record['f']!r} for a client process"
    return None


def iter_ops(
    path: str | os.PathLike[str], problems: list[ReadProblem] | None = None
) -> Iterator[dict[str, Any]]:
    """Stream the ops of a history. Bad lines are skipped and recorded in `problems`.

    With `problems=None`, a malformed line raises HistoryError (with its line number); a torn last
    line (no trailing newline, not valid JSON) is always tolerated with a warning.
    """
    with open(path, encoding="utf-8", errors="replace") as f:
        line_no = 0
        for line in f:
            line_no += 1
            complete = line.endswith("\n")
            text = line.strip()
            if not text:
                continue
            try:
                record = json.loads(text)
            except json.JSONDecodeError as e:
                if not complete:
                    log.warning(
                        "%s:%d: torn last line ignored (controller crashed mid-write?)", path, line_no
                    )
                    if problems is not None:
                        problems.append(ReadProblem(line_no, "torn last line", torn_tail=True))
                    return
                reason = f"malformed JSON ({e.msg})"
                if problems is None:
                    raise HistoryError(path, line_no, reason) from None
                problems.append(ReadProblem(line_no, reason))
                continue
            reason_or_none = _validate(record)
            if reason_or_none is not None:
                if problems is None:
                    raise HistoryError(path, line_no, reason_or_none)
                problems.append(ReadProblem(line_no, reason_or_none))
                continue
            yield record


@dataclass
class HistorySummary:
    """What a quick pass over a history knows: used to decide `unknown` before checking."""

    ops: int = 0
    problems: list[ReadProblem] = field(default_factory=list)
    open_invocations: dict[Any, int] = field(default_factory=dict)  # process -> index of invoke

    @property
    def complete(self) -> bool:
        return not self.problems


def pair_problems(path: str | os.PathLike[str]) -> HistorySummary:
    """Check the invoke/completion discipline: one op at a time per process, no orphan completion."""
    summary = HistorySummary()
    for op in iter_ops(path, problems=summary.problems):
        summary.ops += 1
        process = op["process"]
        if op["type"] == "invoke":
            if process in summary.open_invocations and process != NEMESIS_PROCESS:
                summary.problems.append(
                    ReadProblem(op["index"] + 1, f"process {process} invoked while its op is still open")
                )
            summary.open_invocations[process] = op["index"]
        else:
            if process not in summary.open_invocations and process != NEMESIS_PROCESS:
                summary.problems.append(
                    ReadProblem(op["index"] + 1, f"completion without invocation for process {process}")
                )
            summary.open_invocations.pop(process, None)
    return summary
