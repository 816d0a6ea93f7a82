"""Client process numbers: never reused within one history, across the load and the drain.

The workload and the final drain are separate calls that share only the `HistoryWriter`, so the
allocator hangs off the writer; for a writer that reopened an existing history, the first
allocation starts above the highest client process already written.
"""

from __future__ import annotations

import itertools
import threading
import weakref

from history.reader import iter_ops
from history.writer import HistoryWriter

_allocators: weakref.WeakKeyDictionary[HistoryWriter, ProcessNumbers] = weakref.WeakKeyDictionary()
_registry_lock = threading.Lock()


class ProcessNumbers:
    """Hands out 0, 1, 2, ... (from `start`), thread-safely."""

    def __init__(self, start: int = 0):
        self._counter = itertools.count(start)
        self._lock = threading.Lock()
        self.highest = start - 1

    def next(self) -> int:
        with self._lock:
            number = next(self._counter)
            self.highest = number
            return number


def _highest_written(history: HistoryWriter) -> int:
    highest = -1
    if history.path.exists():
        for op in iter_ops(history.path, problems=[]):
            process = op["process"]
            if isinstance(process, int) and process > highest:
                highest = process
    return highest


def process_numbers(history: HistoryWriter) -> ProcessNumbers:
    """The allocator of this history (created on first use)."""
    with _registry_lock:
        allocator = _allocators.get(history)
        if allocator is None:
            allocator = ProcessNumbers(_highest_written(history) + 1)
            _allocators[history] = allocator
        return allocator
