"""How a client slot journals its operations: in this process, or through the controller's writer.

A slot never touches the history file itself; it asks its `Journal` to

- `invoke(op)`: write the invocation, returning only once the line is written, so the operation
  starts after its invoke is on record (real-time order in the history is never inverted);
- `complete(op, latency_s, records)`: write the completion (and count it for the live figures);
  a completion written slightly late only widens the operation's window, which is safe;
- `new_process()`: a process number never used before in this history.

`LocalJournal` serves slot threads inside the controller. `RemoteJournal` serves slot threads inside
a client worker process (`workloads/worker.py`): it sends each op, JSON-encoded, over the slot's own
socket to the controller, whose single writer (`workloads/workers.py`) gives it its `index` and
`time` and acknowledges invokes.
"""

from __future__ import annotations

from multiprocessing.connection import Connection
from typing import Any, Protocol

from history.format import encode
from history.processes import ProcessNumbers
from history.writer import HistoryWriter

# Wire messages, worker -> controller (pickled tuples over a multiprocessing Connection):
#   (INVOKE, body)                               answered with None once the line is written
#   (COMPLETE, body, f, type, latency_s, records) not answered
#   (PROCESS,)                                   answered with a new process number
INVOKE = "i"
COMPLETE = "c"
PROCESS = "p"


class JournalClosed(Exception):
    """The controller is gone: nothing more can be journaled, so no operation may start."""


class Counters(Protocol):
    """The live figures a journal keeps up to date (the workload's `WorkloadStats`)."""

    def completed(self, f: str, outcome: str, latency_s: float, records: int = 0) -> None: ...

    def process_started(self) -> None: ...


class Journal(Protocol):
    def invoke(self, op: dict[str, Any]) -> None: ...

    def complete(self, op: dict[str, Any], latency_s: float, records: int = 0) -> None: ...

    def new_process(self) -> int: ...


class LocalJournal:
    """Slots running as threads of the controller: straight to the writer, the counters, the numbers."""

    def __init__(self, history: HistoryWriter, stats: Counters, numbers: ProcessNumbers):
        self.history = history
        self.stats = stats
        self.numbers = numbers

    def invoke(self, op: dict[str, Any]) -> None:
        self.history.append(op)

    def complete(self, op: dict[str, Any], latency_s: float, records: int = 0) -> None:
        self.history.append(op)
        self.stats.completed(op["f"], op["type"], latency_s, records=records)

    def new_process(self) -> int:
        number = self.numbers.next()
        self.stats.process_started()
        return number


class RemoteJournal:
    """Slots running in a client worker process: one socket per slot, one request at a time."""

    def __init__(self, conn: Connection):
        self.conn = conn

    def _call(self, message: tuple[Any, ...]) -> Any:
        try:
            self.conn.send(message)
            return self.conn.recv()
        except (EOFError, OSError) as e:
            raise JournalClosed(f"controller gone: {e}") from None

    def invoke(self, op: dict[str, Any]) -> None:
        self._call((INVOKE, encode(op)))

    def complete(self, op: dict[str, Any], latency_s: float, records: int = 0) -> None:
        try:
            self.conn.send((COMPLETE, encode(op), op["f"], op["type"], latency_s, records))
        except OSError as e:
            raise JournalClosed(f"controller gone: {e}") from None

    def new_process(self) -> int:
        return int(self._call((PROCESS,)))
