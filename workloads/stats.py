"""Counters of a running workload: what the progress display shows and what `run_workload` returns."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

_LATENCY_SAMPLES = 20000
# The client operations counted (a crash is journaled by the controller, not completed by a client).
CLIENT_OPS = ("send", "poll", "assign", "subscribe", "commit", "rebalance", "crash", "txn")


@dataclass
class WorkloadStats:
    """Completions by operation and outcome, plus send latencies (a bounded reservoir)."""

    started: float = field(default_factory=time.monotonic)
    finished: float | None = None
    counts: dict[str, dict[str, int]] = field(
        default_factory=lambda: {f: {"ok": 0, "fail": 0, "info": 0} for f in CLIENT_OPS}
    )
    records_read: int = 0
    processes: int = 0
    _send_latencies: list[float] = field(default_factory=list, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def completed(self, f: str, outcome: str, latency_s: float, records: int = 0) -> None:
        with self._lock:
            self.counts[f][outcome] += 1
            self.records_read += records
            if f == "send" and outcome == "ok":
                if len(self._send_latencies) < _LATENCY_SAMPLES:
                    self._send_latencies.append(latency_s)
                else:  # keep a uniform-ish sample without growing
                    self._send_latencies[self.counts["send"]["ok"] % _LATENCY_SAMPLES] = latency_s

    def process_started(self) -> None:
        with self._lock:
            self.processes += 1

    def finish(self) -> None:
        self.finished = time.monotonic()

    @property
    def elapsed(self) -> float:
        return (self.finished or time.monotonic()) - self.started

    @property
    def acked(self) -> int:
        return self.counts["send"]["ok"]

    @property
    def failed(self) -> int:
        return sum(c["fail"] for c in self.counts.values())

    @property
    def unknown(self) -> int:
        return sum(c["info"] for c in self.counts.values())

    @property
    def ops(self) -> int:
        return sum(sum(c.values()) for c in self.counts.values())

    @property
    def ok_ops(self) -> int:
        return sum(c["ok"] for c in self.counts.values())

    def rate(self, count: int) -> float:
        elapsed = self.elapsed
        return count / elapsed if elapsed > 0 else 0.0

    def latency_ms(self) -> dict[str, float]:
        with self._lock:
            samples = sorted(self._send_latencies)
        if not samples:
            return {"p50": 0.0, "p99": 0.0}

        def pick(q: float) -> float:
            return round(samples[min(len(samples) - 1, int(q * len(samples)))] * 1000, 3)

        return {"p50": pick(0.50), "p99": pick(0.99)}

    def as_dict(self) -> dict[str, Any]:
        """Plain data for results and benchmarks."""
        with self._lock:
            counts = {f: dict(c) for f, c in self.counts.items()}
        return {
            "seconds": round(self.elapsed, 3),
            "sends": counts["send"],
            "polls": counts["poll"],
            "assigns": counts["assign"],
            "commits": counts["commit"],
            "rebalances": counts["rebalance"]["ok"],
            "crashes": counts["crash"]["info"],
            "txns": counts["txn"],
            "committed_txns_per_s": round(self.rate(counts["txn"]["ok"]), 1),
            "records_read": self.records_read,
            "processes": self.processes,
            "ops_per_s": round(self.rate(self.ops), 1),
            "ok_ops_per_s": round(self.rate(self.ok_ops), 1),
            "acked_sends_per_s": round(self.rate(self.acked), 1),
            "latency_ms": self.latency_ms(),
        }
