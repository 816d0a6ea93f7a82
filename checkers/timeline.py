"""What the report's timeline draws, defined once for both engines: completions per second of the
operations it plots, and a bounded sample of send latencies.

* Rates: operations by their invocation's `f` and their outcome (a crash completes as `info`),
  counted in the second of their completion (`int(time / 1e9)`), for the series in `RATE_SERIES`.
* Latency sample: each completed send as (completion time in s, latency in ms, outcome). Of the
  `ok` sends, in the history order of their completions (ordinal k = 0, 1, ...), those whose k is a
  multiple of `step`: the smallest power of two that keeps at most `POINTS` of them; of the
  others (`fail`, `info`), the first `POINTS`. A stream keeps this by doubling `step` whenever
  more than `POINTS` are kept (dropping the odd multiples), so the reference's pass and the
  conversion's chunks (`checkers.parquet_pipeline`) find the same sample.
"""

from __future__ import annotations

from typing import Any

import numpy as np

NS = 1_000_000_000
POINTS = 3000
# (f, outcome) of the series the report's rate chart draws.
RATE_SERIES = (("send", "ok"), ("send", "info"), ("send", "fail"), ("poll", "ok"))
Point = tuple[float, float, str]  # completion time (s), latency (ms), outcome


class LatencySample:
    """The latency sample of a stream of completed sends (see the module docstring)."""

    def __init__(self) -> None:
        self.step = 1
        self.seen = 0  # ok sends so far
        self.ok: list[tuple[int, float, float]] = []  # (ordinal, t, ms)
        self.other: list[Point] = []

    def add(self, time_ns: int, invoke_ns: int, outcome: str) -> None:
        """One completed send, in the history order of completions."""
        if outcome != "ok":
            if len(self.other) < POINTS:
                self.other.append((time_ns / NS, (time_ns - invoke_ns) / 1e6, outcome))
            return
        if self.seen % self.step == 0:
            self.ok.append((self.seen, time_ns / NS, (time_ns - invoke_ns) / 1e6))
            self._thin()
        self.seen += 1

    def add_ok(self, times_ns: Any, invoke_ns: Any) -> None:
        """Many ok sends at once (int64 arrays, in completion order): as `add` one by one."""
        times = np.asarray(times_ns, dtype=np.int64)
        ordinals = np.arange(self.seen, self.seen + len(times), dtype=np.int64)
        self.seen += len(times)
        while True:
            kept = np.flatnonzero(ordinals % self.step == 0)
            if len(self.ok) + len(kept) <= POINTS:
                break
            self.step *= 2
            self.ok = [p for p in self.ok if p[0] % self.step == 0]
        invoked = np.asarray(invoke_ns, dtype=np.int64)[kept]
        at = times[kept]
        self.ok += zip(
            ordinals[kept].tolist(),
            (at / NS).tolist(),
            ((at - invoked) / 1e6).tolist(),
            strict=True,
        )

    def add_others(self, times_ns: Any, invoke_ns: Any, outcomes: list[str]) -> None:
        """Many fail/info sends at once (in completion order): as `add` one by one."""
        room = POINTS - len(self.other)
        if room <= 0:
            return
        times = np.asarray(times_ns, dtype=np.int64)[:room]
        invoked = np.asarray(invoke_ns, dtype=np.int64)[:room]
        self.other += zip(
            (times / NS).tolist(), ((times - invoked) / 1e6).tolist(), outcomes[:room], strict=True
        )

    def _thin(self) -> None:
        while len(self.ok) > POINTS:
            self.step *= 2
            self.ok = [p for p in self.ok if p[0] % self.step == 0]

    def points(self) -> list[Point]:
        """The ok points (in completion order), then the others."""
        return [(t, ms, "ok") for _, t, ms in self.ok] + list(self.other)


def points_from_json(points: Any) -> list[Point]:
    """Points as JSON gave them back (lists), or [] when there are none."""
    return [(float(t), float(ms), str(kind)) for t, ms, kind in points or []]
