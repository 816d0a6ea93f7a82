"""Live progress for a person watching a test: ops/s, acked, failed, unknown, current faults.

Silent unless stderr is a terminal (and not disabled), so logs and CI output stay clean. The
nemesis tells it what is broken through `set_faults(callable_or_text)`; the callable is asked at
each refresh, so the display never holds stale fault state of its own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.text import Text

from workloads.stats import WorkloadStats

FaultSource = Callable[[], "Iterable[str] | str | None"]


class LiveProgress:
    """A one-table rich display refreshed a few times per second from `WorkloadStats`."""

    def __init__(self, enabled: bool = True, console: Console | None = None, title: str = "strandline"):
        self.console = console or Console(stderr=True)
        self.enabled = enabled and self.console.is_terminal
        self.title = title
        self._stats: WorkloadStats | None = None
        self._faults: FaultSource | None = None
        self._live: Live | None = None
        self._lock = threading.Lock()
        self._last: tuple[float, int] = (time.monotonic(), 0)
        self._ops_per_s = 0.0

    def set_faults(self, faults: FaultSource | Iterable[str] | str | None) -> None:
        """What is currently broken: a callable asked at each refresh, or a fixed text/list."""
        if faults is None or callable(faults):
            self._faults = faults
        else:
            fixed = faults if isinstance(faults, str) else list(faults)
            self._faults = lambda: fixed

    def attach(self, stats: WorkloadStats) -> None:
        self._stats = stats
        self._last = (time.monotonic(), stats.ops)

    @property
    def stats(self) -> WorkloadStats | None:
        """The attached workload's counts (None before the workload started)."""
        return self._stats

    def start(self) -> bool:
        """Start the display; False when it is disabled or already running."""
        with self._lock:
            if not self.enabled or self._live is not None:
                return False
            self._live = Live(self, console=self.console, refresh_per_second=4, transient=False)
            self._live.start()
            return True

    def stop(self) -> None:
        with self._lock:
            if self._live is not None:
                self._live.stop()
                self._live = None

    def __enter__(self) -> LiveProgress:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def faults_text(self) -> str:
        if self._faults is None:
            return "none"
        try:
            current = self._faults()
        except Exception as e:  # the display must never break the test
            return f"? ({type(e).__name__})"
        if current is None:
            return "none"
        if isinstance(current, str):
            return current or "none"
        items = [str(c) for c in current]
        return ", ".join(items) if items else "none"

    def _current_rate(self, stats: WorkloadStats) -> float:
        now, ops = time.monotonic(), stats.ops
        then, ops_then = self._last
        if now - then >= 1.0:
            self._ops_per_s = (ops - ops_then) / (now - then)
            self._last = (now, ops)
        return self._ops_per_s

    def __rich__(self) -> Any:
        """One line that is cut, never wrapped, on a narrow terminal."""
        stats = self._stats
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(self.title, style="bold")
        if stats is None:
            line.append("  starting")
            return line
        line.append(f"  {stats.elapsed:6.1f} s  ops/s {self._current_rate(stats):7.1f}  ")
        committed = stats.counts["txn"]["ok"]
        line.append(f"committed {committed}" if committed else f"acked {stats.acked}", style="green")
        line.append("  ")
        line.append(f"failed {stats.failed}", style="yellow")
        line.append("  ")
        line.append(f"unknown {stats.unknown}", style="magenta")
        line.append("  ")
        line.append(f"faults: {self.faults_text()}", style="red" if self._faults else "")
        return line
