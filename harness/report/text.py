"""Plain-words pieces of the report: example headlines, availability, how far the run got.

Kept apart from the rendering (the package itself) so the wording can be read (and tested) in one place. Every function
returns plain text; the template escapes it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.report.cycles import cycle_sentence
from harness.report.history import NS, HistoryDigest
from harness.run_facts import run_facts as stored_facts

log = logging.getLogger(__name__)

# Below this share of load seconds with an acknowledged write, a valid verdict is weak evidence.
WEAK_AVAILABILITY = 0.5
WEAK_ACKED = 100


def _tp(ex: dict[str, Any]) -> str:
    if ex.get("topic") is not None and ex.get("partition") is not None:
        return f"{ex['topic']}-{ex['partition']}"
    return "its partition"


def _who(ex: dict[str, Any]) -> str:
    bits = []
    if ex.get("process") is not None:
        bits.append(f"process {ex['process']}")
    if ex.get("index") is not None:
        bits.append(f"history index {ex['index']}")
    return f" ({', '.join(bits)})" if bits else ""


def _humanise(key: str, v: Any) -> str:
    words = str(key).replace("_", " ").replace("-", " ")
    if isinstance(v, bool):
        return f"{words}: {'yes' if v else 'no'}"
    if isinstance(v, list | tuple):
        shown = ", ".join(_plain(x) for x in v[:6]) + (f", … ({len(v)} in all)" if len(v) > 6 else "")
        return f"{words}: {shown}"
    return f"{words} {_plain(v)}"


def _listed(values: Any) -> str:
    items = list(values) if isinstance(values, list | tuple) else [values]
    shown = ", ".join(str(v) for v in items[:6]) + (f", … ({len(items)} in all)" if len(items) > 6 else "")
    return ("value " if len(items) == 1 else "values ") + shown


def _plain(v: Any) -> str:
    if isinstance(v, dict):
        return " ".join(_humanise(k, x) for k, x in v.items())
    return str(v)


def example_title(name: str, ex: Any) -> str:
    """One sentence that says what an example shows, whatever keys the checker used."""
    if not isinstance(ex, dict):
        return str(ex)
    try:
        return _title(name, ex)
    except (KeyError, TypeError, ValueError, AttributeError):
        return "; ".join(_humanise(k, v) for k, v in ex.items())


def _title(name: str, ex: dict[str, Any]) -> str:
    value, offset, tp = ex.get("value"), ex.get("offset"), _tp(ex)
    if name == "lost-committed-on-replicas" and value is not None:
        leader = ex.get("leader")
        where = f"the leader {leader}" if leader else "the leader"
        if ex.get("leader_known") is False:
            where = f"{leader or 'the replica taken as leader'} (the final leader was not known for certain)"
        end = (
            f", whose log ends at offset {ex['leader_log_end']}"
            if ex.get("leader_log_end") is not None
            else ""
        )
        return (
            f"Value {value}, acknowledged at offset {offset} of {tp}{_who(ex)}, "
            f"is missing from the final log of {where}{end}."
        )
    if name == "lost-write" and value is not None:
        reach = ex.get("max_read_offset")
        tail = (
            f" although reads reached offset {reach}"
            if reach is not None
            else " although reads reached past it"
        )
        return f"Value {value}, acknowledged at offset {offset} of {tp}{_who(ex)}, was never read back{tail}."
    if name == "unseen" and value is not None:
        reach = ex.get("max_read_offset")
        tail = f"; reads reached only offset {reach}" if reach is not None else ""
        return f"Value {value}, acknowledged at offset {offset} of {tp}{_who(ex)}, was never read{tail}."
    if name == "log-divergence" and isinstance(ex.get("replicas"), list):
        held = ", ".join(
            f"{r.get('node')} holds {r.get('value')}" for r in ex["replicas"] if isinstance(r, dict)
        )
        below = " (below the high watermarks: committed data)" if ex.get("below_high_watermarks") else ""
        return f"At offset {offset} of {tp} the replicas disagree: {held}{below}."
    if name == "inconsistent-offsets" and isinstance(ex.get("values"), list):
        seen = " and ".join(f"{v.get('value')}" + _who(v) for v in ex["values"] if isinstance(v, dict))
        return f"Offset {offset} of {tp} was seen with different values: {seen}."
    if name == "duplicate" and isinstance(ex.get("positions"), list):
        at = " and ".join(
            f"offset {p.get('offset')} of {_tp(p)}" for p in ex["positions"] if isinstance(p, dict)
        )
        return f"Value {value} is stored twice: at {at}."
    if name == "aborted-read" and value is not None:
        return f"Value {value}, whose send failed{_who(ex)}, was read at offset {offset} of {tp}."
    if name == "phantom" and value is not None:
        return f"Value {value}, read at offset {offset} of {tp}, was never sent."
    if name in ("G0", "G1c") and isinstance(ex.get("steps"), list):
        return cycle_sentence(name, ex)
    if name == "torn-transaction" and isinstance(ex.get("lost"), list):
        return (
            f"Transaction {ex.get('index')} (process {ex.get('process')}) committed, yet only part of it"
            f" reached the log: {_listed(ex.get('visible'))} were read, {_listed(ex['lost'])} never were"
            " although reads went past them."
        )
    if name == "precommitted-read" and value is not None:
        own = (
            "its own write"
            if ex.get("write_offset") == offset
            else f"its own write at offset {ex.get('write_offset')}"
        )
        return (
            f"Transaction {ex.get('index')} (process {ex.get('process')}) polled {value} at offset {offset} of {tp},"
            f" at or past {own} ({ex.get('write_value')}), before it had committed."
        )
    return "; ".join(_humanise(k, v) for k, v in ex.items())


@dataclass
class RunFacts:
    """How far the run got: the report's load line and the unknown verdict speak of it."""

    cut_short: bool
    ran_s: float
    time_limit_s: float | None
    final_reads: bool
    why: str = ""

    def cut_text(self) -> str:
        """'cut short at 2.9 s of 60 s (controller died; no final reads)'."""
        limit = f" of {self.time_limit_s:g} s" if self.time_limit_s else ""
        why = self.why or ("no final reads" if not self.final_reads else "")
        return f"cut short at {self.ran_s:.1f} s{limit}" + (f" ({why})" if why else "")

    def load_text(self) -> str:
        return "run " + self.cut_text()


def run_facts(
    run: Path,
    config: dict[str, Any],
    digest: HistoryDigest,
    outcome: dict[str, Any] | None,
    drain: dict[str, Any] | None,
) -> RunFacts:
    """How far the run got (harness/run_facts.py reads it from the run dir), in the report's words."""
    limit = config.get("time_limit")
    time_limit = float(limit) if isinstance(limit, int | float) else None
    final_reads = isinstance(drain, dict) and bool(drain.get("complete"))
    got = stored_facts(run)
    status = str(got.get("status") or "")
    why = {"killed": "controller died"}.get(status) or str(got.get("reason") or status)
    if not final_reads:
        why = f"{why}; no final reads" if why else "no final reads"
    ran_s = got.get("ran_s")
    limit_s = got.get("time_limit_s")
    return RunFacts(
        cut_short=bool(got.get("cut_short")),
        ran_s=float(ran_s) if isinstance(ran_s, int | float) else digest.end_ns / NS,
        time_limit_s=float(limit_s) if isinstance(limit_s, int | float) else time_limit,
        final_reads=final_reads,
        why=why,
    )


def availability(digest: HistoryDigest, load_s: float | None) -> tuple[int, int] | None:
    """(seconds with at least one acknowledged send, seconds of load), or None without load."""
    if not digest.ops:
        return None
    span = load_s if load_s and load_s > 0 else digest.end_ns / NS
    seconds = max(1, int(round(span)))
    ok = digest.rate.get(("send", "ok"), {})
    up = sum(1 for s, n in ok.items() if 0 <= s < seconds and n > 0)
    return up, seconds


def availability_text(avail: tuple[int, int] | None, cut_short: bool = False) -> str:
    if avail is None:
        return ""
    up, total = avail
    span = "it ran" if cut_short else "of load"
    if up >= total:
        return f"The cluster accepted writes in every second of the {total} s {span}."
    only = "only " if up < total * 0.8 else ""
    return f"The cluster accepted writes during {only}{up} s of {total} s {span}."


def weak_evidence(avail: tuple[int, int] | None, acked: int | None) -> str:
    """A warning when a valid verdict rests on little successful load, else ''."""
    reasons = []
    if avail is not None and avail[0] < avail[1] * WEAK_AVAILABILITY:
        reasons.append(f"writes succeeded during only {avail[0]} s of {avail[1]} s")
    if acked is not None and acked < WEAK_ACKED:
        reasons.append(f"only {acked} writes were acknowledged")
    if not reasons:
        return ""
    return "The evidence is weak: " + " and ".join(reasons) + ", so little was at stake when the faults hit."
