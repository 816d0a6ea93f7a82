"""The detection table of a campaign: for each setting under each fault mix, in how many runs the
checker caught a loss (k of n, with its 95 % Wilson interval) and how long after the first fault
the first lost write was acknowledged (the median over the runs that caught one). A row expected
`valid` (the safe settings) counts its false alarms instead: the runs that ended `invalid`.

A campaign entry names its row with `setting = "acks=1"` (default: the entry's name); the mix is
the entry's `--nemesis` value. Runs of one row differ only in their seed. Runs that ended
`unknown` because they tested too little (results.json's `underpowered`: too little load) count
apart, in their own column, and in n (a run that could not tell is no detection).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

Z95 = 1.959964  # the normal quantile of a two-sided 95 % interval


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of a proportion k/n (None when n is 0): unlike k/n +- z*se it
    stays inside [0, 1] and is not empty at k = 0 or k = n, where a detection table mostly is."""
    if n <= 0:
        return None
    p = k / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass
class Row:
    setting: str
    mix: str
    expect: tuple[str, ...]
    verdicts: list[str] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)
    times_to_loss: list[float] = field(default_factory=list)
    underpowered: int = 0  # runs `unknown` for too little load

    @property
    def runs(self) -> int:
        return sum(1 for v in self.verdicts if v not in ("skipped", "refused"))

    @property
    def caught(self) -> int:
        return sum(1 for v in self.verdicts if v == "invalid")

    @property
    def safe(self) -> bool:
        """A row of the safe settings: its `invalid` runs are false alarms."""
        return "valid" in self.expect and "invalid" not in self.expect

    @property
    def interval(self) -> tuple[float, float] | None:
        """95 % Wilson interval of the rate of `invalid` runs (detections, or false alarms)."""
        return wilson(self.caught, self.runs)

    @property
    def median_to_loss_s(self) -> float | None:
        return round(statistics.median(self.times_to_loss), 1) if self.times_to_loss else None

    def as_json(self) -> dict[str, Any]:
        return {
            "setting": self.setting,
            "mix": self.mix,
            "expect": list(self.expect),
            "caught": self.caught,
            "runs": self.runs,
            "rate": round(self.caught / self.runs, 3) if self.runs else None,
            "wilson95": [round(x, 3) for x in self.interval] if self.interval else None,
            "underpowered": self.underpowered,
            "seeds": self.seeds,
            "verdicts": self.verdicts,
            "median_first_fault_to_first_loss_s": self.median_to_loss_s,
        }


def time_to_loss(results: dict[str, Any] | None) -> float | None:
    """Seconds from the first fault to the acknowledgement of the first write later lost."""
    stats = (results or {}).get("stats") or {}
    first_fault, first_lost = stats.get("first_fault_s"), stats.get("first_lost_ack_s")
    if first_fault is None or first_lost is None:
        return None
    return max(0.0, float(first_lost) - float(first_fault))


def detection_rows(tests: list[tuple[Any, ...]]) -> list[Row]:
    """Rows from (setting, mix, expect, seed, verdict, time to loss[, underpowered]) per run, in
    first-seen order."""
    rows: dict[tuple[str, str], Row] = {}
    for setting, mix, expect, seed, verdict, to_loss, *rest in tests:
        row = rows.setdefault((setting, mix), Row(setting, mix, expect))
        row.verdicts.append(verdict)
        if rest and rest[0] and verdict == "unknown":
            row.underpowered += 1
        if verdict not in ("skipped", "refused"):
            row.seeds.append(seed)
        if verdict == "invalid" and to_loss is not None:
            row.times_to_loss.append(to_loss)
    return list(rows.values())


def _percent(interval: tuple[float, float] | None) -> str:
    return "-" if interval is None else f"{interval[0]:.0%}-{interval[1]:.0%}"


def render(rows: list[Row]) -> str:
    """The table as text: setting, mix, expected, caught k of n (a safe row: its false alarms)
    with the 95 % Wilson interval, median seconds to the first loss, runs unknown for too little
    load, seeds."""
    header = (
        "setting",
        "mix",
        "expect",
        "caught",
        "95% interval",
        "median s to loss",
        "too little load",
        "seeds",
    )
    lines = [
        (
            r.setting,
            r.mix,
            "|".join(r.expect),
            f"{r.caught} of {r.runs}" + (" false alarms" if r.safe else ""),
            _percent(r.interval),
            "-" if r.median_to_loss_s is None else f"{r.median_to_loss_s:g}",
            str(r.underpowered),
            ",".join(map(str, r.seeds)),
        )
        for r in rows
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *lines, strict=True)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(fmt.format(*line) for line in [header, *lines])
