"""The detection table of a campaign: for each setting under each fault mix, in how many runs the
checker caught a loss (k of n) and how long after the first fault the first lost write was
acknowledged (the median over the runs that caught one).

A campaign entry names its row with `setting = "acks=1"` (default: the entry's name); the mix is
the entry's `--nemesis` value. Runs of one row differ only in their seed.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Row:
    setting: str
    mix: str
    expect: tuple[str, ...]
    verdicts: list[str] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)
    times_to_loss: list[float] = field(default_factory=list)

    @property
    def runs(self) -> int:
        return sum(1 for v in self.verdicts if v not in ("skipped", "refused"))

    @property
    def caught(self) -> int:
        return sum(1 for v in self.verdicts if v == "invalid")

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


def detection_rows(tests: list[tuple[str, str, tuple[str, ...], int, str, float | None]]) -> list[Row]:
    """Rows from (setting, mix, expect, seed, verdict, time to loss) per run, in first-seen order."""
    rows: dict[tuple[str, str], Row] = {}
    for setting, mix, expect, seed, verdict, to_loss in tests:
        row = rows.setdefault((setting, mix), Row(setting, mix, expect))
        row.verdicts.append(verdict)
        if verdict not in ("skipped", "refused"):
            row.seeds.append(seed)
        if verdict == "invalid" and to_loss is not None:
            row.times_to_loss.append(to_loss)
    return list(rows.values())


def render(rows: list[Row]) -> str:
    """The table as text: setting, mix, expected, caught k of n, median seconds to the first loss."""
    header = ("setting", "mix", "expect", "caught", "median s to loss", "seeds")
    lines = [
        (
            r.setting,
            r.mix,
            "|".join(r.expect),
            f"{r.caught} of {r.runs}",
            "-" if r.median_to_loss_s is None else f"{r.median_to_loss_s:g}",
            ",".join(map(str, r.seeds)),
        )
        for r in rows
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *lines, strict=True)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(fmt.format(*line) for line in [header, *lines])
