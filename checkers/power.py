"""Verdict power: how much a run tested, and whether that is enough to call it `valid`.

A `valid` verdict claims that the system was tested and nothing was lost. A run whose clients
barely got through (a loaded machine, a cluster that never served) proves little, however clean
its history, so the verdict asks for load where it matters. The rule is defined here once; each
engine counts the events it needs into a `Tally` (`checkers/power_history.py` in one Python pass,
`checkers/power_form.py` and `checkers/spark_power.py` over the Parquet form's columns, with Arrow
or Spark), and `evaluate` turns a tally into
results.json's `power`, so both engines agree wherever their tallies do.

Events (completed client operations, at their completion time):
* `acked`: an acknowledged write: an `ok` send with an offset >= 0; each send of a committed
  transaction that its completion gives an offset;
* `read`: an operation that returned records: an `ok` poll with at least one whole record (topic,
  partition, offset, value); a committed transaction whose polls returned one;
* `commit`, `rebalance`: `ok` commits and rebalances of consumer-group members;
* `crash`: a client process killed on purpose (`crash` operations, at their invocation);
* `write`: any completed send or transaction, whatever its outcome: the load ends with the last.

The load runs from the first client invocation to the last completed send or transaction (the
final drain's reads come after it and are not load); the clients issued it until their last send
or transaction was invoked (`issued_until`: operations blocked on a paused broker complete long
after the time limit stopped the clients). Each fault window (`history.faults`: from the fault's
invocation to its heal) is counted from `IN_FLIGHT_S` (at most a tenth of the window) after its
start to when it was over for the clients plus `recovery_s` (two session timeouts and the
clients' request timeout: the cluster notices a crashed broker, takes the registration of the
restarted one once its old session expired and elects, and the clients' requests stuck on it give
up and go elsewhere), clipped to the load's end. It is over when the brokers its heal brought back
serve again (the nemesis's `ready` op, nemesis/ready.py: a Kafka broker started again serves
18-30 s later on a loaded machine, so counting from the heal would count a window whose brokers
never served in it), or at its heal when the history has no `ready` op for it (histories written
before it judge as they did); awaited but never served, or never healed: at the load's end.
Faults in force together are tested together: a window is counted to the last time the faults in
force with it were over, plus the recovery (a follower restarted in an instant while its leader is
cut off and then killed struck into the outage the others made, and the load after their heal is
its load too).

The rule (docs/checkers.md, "Verdict power"): a run is `valid` only when
* its acknowledged writes reach `MIN_ACKED_SHARE` of the operations its rate asked for (at most
  `MIN_ACKED_PER_S` per second) while the clients issued them, less the time between a heal and
  the `ready` that said its brokers served again (`restarting_s`: the cluster was being brought
  back; a Kafka cluster whose brokers all restart serves nothing for 20-60 s on a loaded machine)
  (at least one; without test.json the rate is not known and only "at least one" holds), and at
  least one read returned records;
* before the first fault, and inside every fault window, at least one write was acknowledged and
  one read returned records;
* what the workload was asked to do happened: with `crash_clients`, a client crashed; with
  consumer groups, a commit succeeded; with faults asked for, one struck.
Otherwise it is `unknown`, with the reasons.

Counting is exact: a tally holds, per kind and second, the events' count, first and last time,
plus every event's time in the seconds where an interval starts or ends. The longest stretch
without an acknowledged write is exact from `MIN_STRETCH_S` up (such a stretch ends at a second's
first ack and starts at a previous second's last); shorter ones count as 0.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from foundation.config import TestConfig
from history.faults import FaultWindow

NS = 1_000_000_000
KINDS = ("acked", "read", "commit", "rebalance", "crash", "write")
# Of the operations the test's rate asks for while the clients issue them, at least this share
# must be acknowledged writes. The queue workload makes 55 % of its operations sends; on a loaded
# 2-core machine a run under `--nemesis all` acknowledges 10-20 % of its asked operations, a repro
# that keeps its one partition offline for half its run about 5 %; below 2 % the clients barely got
# through (a machine too loaded to run the test as asked: 24 acknowledged writes in 45 s at 200
# ops/s is 0.3 %).
MIN_ACKED_SHARE = 0.02
# ... but never more than this many per second: a rate far above what the machine can serve (`bench
# workload` asks 100,000 ops/s to find the ceiling) asks nothing the clients could do, and ten
# acknowledged writes every second is load flowing whatever was asked.
MIN_ACKED_PER_S = 10.0
# Stretches without an acknowledged write shorter than this are not measured (reported as 0).
MIN_STRETCH_S = 1.0
# A fault window's load is counted from this long after the fault struck: what was in flight then
# (an acknowledgement already on the wire to a client) completes within it, and is not load the
# fault saw (every broker paused: one acknowledgement and three reads completed in its first 50 ms).
IN_FLIGHT_S = 1.0
# ... but never more than this share of the window: a window that lasts less than 10 s (a fault
# struck shortly before the load ended; a synthetic history that spans milliseconds) keeps 90 % of
# its span, so that the margin cannot swallow it whole.
IN_FLIGHT_SHARE = 0.1


@dataclass
class Cuts:
    """One second's events of a kind, as few numbers: split at the interval bounds that fall in
    that second (`cuts`, sorted), each part's (count, first, last) by its number (part 2i+1: the
    events at cuts[i]; part 2i: those between cuts[i-1] and cuts[i]). It answers for the intervals
    it was cut for what the events' times would (`Tally.count`, `Tally.longest_gap`: the stretches
    inside one of seconds 1, 2, ... are shorter than MIN_STRETCH_S, so only a part's first and last
    can bound one), and its size does not grow with the second's events. Seconds 0 and below
    (int(t) toward zero: second 0 spans two) keep their times."""

    second: int
    cuts: list[float]
    parts: dict[int, tuple[int, float, float]] = field(default_factory=dict)

    def add(self, part: int, n: int, first: float, last: float) -> None:
        if part in self.parts:
            m, a, b = self.parts[part]
            self.parts[part] = (m + n, min(a, first), max(b, last))
        else:
            self.parts[part] = (n, first, last)

    def within(self, lo: float, hi: float) -> list[tuple[int, float, float]]:
        """The parts whose events lie in [lo, hi], in time order (each bound is outside the second
        or one of its cuts)."""
        low = 0 if lo < self.second else 2 * len(self.cuts) + 1 if lo >= self.second + 1 else self._at(lo)
        high = -1 if hi < self.second else 2 * len(self.cuts) if hi >= self.second + 1 else self._at(hi)
        return [self.parts[p] for p in sorted(self.parts) if low <= p <= high]

    def _at(self, x: float) -> int:
        i = bisect_left(self.cuts, x)
        if i == len(self.cuts) or self.cuts[i] != x:
            raise ValueError(f"{x} is not a bound this second was cut at")
        return 2 * i + 1


@dataclass
class Tally:
    """What an engine counted: per kind, per second (count, first, last) of its events' times
    (seconds since the test started), and every event's time in the seconds `exact_seconds`
    asks for; the load's first invocation and last completed write."""

    per_second: dict[str, dict[int, tuple[int, float, float]]] = field(default_factory=dict)
    exact: dict[str, dict[int, list[float] | Cuts]] = field(default_factory=dict)
    load_start: float | None = None
    load_end: float | None = None
    issued_until: float | None = None  # the last send or transaction invoked
    # Per kind, built once its seconds are all in (`_sorted`).
    _index: dict[str, _Ordered] = field(default_factory=dict, repr=False, compare=False)

    def _sorted(self, kind: str) -> _Ordered:
        seconds = self.per_second.get(kind, {})
        known = self._index.get(kind)
        if known is None or len(known.seconds) != len(seconds):
            known = self._index[kind] = _Ordered.of(seconds)
        return known

    def count(self, kind: str, lo: float, hi: float) -> int:
        """Events of `kind` with lo <= t <= hi."""
        if hi < lo:
            return 0
        first, last = int(lo), int(hi)
        ordered = self._sorted(kind)
        total = max(0, ordered.before[ordered.at(last)] - ordered.before[ordered.after(first)])
        exact = self.exact.get(kind, {})
        for s in {first, last}:
            values = exact.get(s, [])
            if isinstance(values, Cuts):
                total += sum(n for n, _, _ in values.within(lo, hi))
            else:
                total += sum(1 for t in values if lo <= t <= hi)
        return total

    def longest_gap(self, kind: str, lo: float, hi: float) -> float:
        """The longest stretch within [lo, hi] without an event of `kind` (0 below MIN_STRETCH_S)."""
        if hi < lo:
            return 0.0
        first, last = int(lo), int(hi)
        ordered = self._sorted(kind)
        # The events that can bound a stretch of a second or more: every one in the seconds of the
        # bounds, each other second's first and last (their stretches come from `_Ordered`).
        left, right = [lo, *self._exact_points(kind, first, lo, hi)], [hi]
        if last != first:
            right = [*self._exact_points(kind, last, lo, hi), hi]
        a, b = ordered.after(first), ordered.at(last)
        # Without seconds between, one run of events; else into them, inside them and out of them.
        runs = (
            [left + right]
            if b <= a
            else [[*left, ordered.points[2 * a]], [ordered.points[2 * b - 1], *right]]
        )
        longest = max(float(y - x) for ends in runs for x, y in zip(ends, ends[1:], strict=False))
        if b > a:
            longest = max(longest, float(ordered.gaps[2 * a : 2 * b - 1].max()))
        return round(longest, 3) if longest >= MIN_STRETCH_S else 0.0

    def _exact_points(self, kind: str, s: int, lo: float, hi: float) -> list[float]:
        """The events of second `s` in [lo, hi] that can bound a stretch, in time order."""
        if s not in self.per_second.get(kind, {}):
            return []
        values = self.exact.get(kind, {}).get(s, [])
        if isinstance(values, Cuts):
            return [t for _, x, y in values.within(lo, hi) for t in (x, y)]
        return sorted(t for t in values if lo <= t <= hi)


@dataclass(frozen=True)
class _Ordered:
    """A kind's seconds in order, with the running count of its events before each and each
    second's first and last event one after another (`points`) and the stretches between them
    (`gaps`): a window's count and longest stretch cost a binary search and a slice, not a pass
    over the run's seconds."""

    seconds: list[int]
    before: list[int]
    points: np.ndarray[Any, Any]
    gaps: np.ndarray[Any, Any]

    @staticmethod
    def of(per_second: dict[int, tuple[int, float, float]]) -> _Ordered:
        ordered = sorted(per_second)
        before = [0]
        for s in ordered:
            before.append(before[-1] + per_second[s][0])
        points = np.asarray([t for s in ordered for t in per_second[s][1:]], np.float64)
        return _Ordered(ordered, before, points, np.diff(points))

    def after(self, s: int) -> int:
        """The position of the first second after `s`."""
        return bisect_right(self.seconds, s)

    def at(self, s: int) -> int:
        """The position of the first second at or after `s`."""
        return bisect_left(self.seconds, s)


def bound_load(
    tally: Tally, starts: list[float], issued: list[float], windows: list[FaultWindow], asked: Asked
) -> list[int]:
    """Set a tally's load from its engine's invocation times (`starts`: the earliest of some;
    `issued`: the latest send or transaction invocations of some) and its writes; the seconds
    whose events it must then hold one by one (`exact_seconds`), sorted."""
    writes = tally.per_second.get("write", {})
    tally.load_start = min(starts) if starts else None
    tally.issued_until = max(issued) if issued else None
    tally.load_end = max(hi for _, _, hi in writes.values()) if writes else None
    return sorted(exact_seconds(intervals(windows, asked, tally.load_start, tally.load_end)))


def tally_from_times(
    times: dict[str, list[float]],
    load_start: float | None,
    load_end: float | None,
    seconds: Iterable[int],
    issued_until: float | None = None,
) -> Tally:
    """A tally from every event's time (the reference's way), exact in `seconds`."""
    tally = Tally(load_start=load_start, load_end=load_end, issued_until=issued_until)
    wanted = set(seconds)
    for kind, values in times.items():
        per: dict[int, tuple[int, float, float]] = {}
        exact: dict[int, list[float]] = {}
        for t in values:
            s = int(t)
            n, lo, hi = per.get(s, (0, t, t))
            per[s] = (n + 1, min(lo, t), max(hi, t))
            if s in wanted:
                exact.setdefault(s, []).append(t)
        tally.per_second[kind] = per
        tally.exact[kind] = {s: sorted(v) for s, v in exact.items()}
    return tally


def cut_into(
    times: np.ndarray[Any, Any], cuts: np.ndarray[Any, Any], into: dict[int, list[float] | Cuts]
) -> None:
    """Add events' times (in the exact seconds) to their seconds' `Cuts` (`cuts`: every interval
    bound, sorted); seconds 0 and below keep the times themselves."""
    seconds = times.astype(np.int64)
    for t in times[seconds <= 0].tolist():
        values = into.setdefault(int(t), [])
        assert isinstance(values, list)
        values.append(t)
    times, seconds = times[seconds > 0], seconds[seconds > 0]
    if len(times) == 0:
        return
    i = np.searchsorted(cuts, times)
    at = (i < len(cuts)) & (cuts[np.minimum(i, len(cuts) - 1)] == times)
    # A part's number within its second: counted from the second's first cut.
    parts = 2 * (i - np.searchsorted(cuts, seconds)) + at
    order = np.lexsort((parts, seconds))
    seconds, parts, times = seconds[order], parts[order], times[order]
    starts = np.flatnonzero(np.r_[True, (seconds[1:] != seconds[:-1]) | (parts[1:] != parts[:-1])])
    counts = np.diff(np.r_[starts, len(times)])
    lows, highs = np.minimum.reduceat(times, starts), np.maximum.reduceat(times, starts)
    for s, part, n, lo, hi in zip(
        seconds[starts].tolist(),
        parts[starts].tolist(),
        counts.tolist(),
        lows.tolist(),
        highs.tolist(),
        strict=True,
    ):
        second = into.get(s)
        if second is None:
            first, last = np.searchsorted(cuts, [s, s + 1])
            second = into[s] = Cuts(s, cuts[first:last].tolist())
        assert isinstance(second, Cuts)
        second.add(part, n, lo, hi)


@dataclass(frozen=True)
class Asked:
    """What the test asked of its workload and faults (from test.json; `rate` None without one)."""

    rate: float | None
    crash_clients: float = 0.0
    groups: bool = False
    faults: bool = False
    recovery_s: float = 17.0

    @staticmethod
    def of(config: TestConfig, known: bool) -> Asked:
        return Asked(
            rate=config.rate if known else None,
            crash_clients=config.crash_clients,
            # Only the queue workload's consumers may join groups: `foundation.config` refuses any
            # `consume` but assign for the txn workload, so the config's `consume` says it alone.
            groups=config.consume != "assign",
            faults=bool(config.nemesis) or bool(config.schedule),
            recovery_s=(2 * config.zookeeper_session_timeout_ms + config.request_timeout_ms) / 1000,
        )


@dataclass(frozen=True)
class Interval:
    """A stretch of the run the rule counts in: the load, before the first fault, a window."""

    lo: float
    hi: float


def served_again(window: FaultWindow, load_end: float) -> float:
    """When the fault was over for the clients: when the brokers its heal brought back served again
    (the nemesis's `ready`; its heal when that came first); journaled as awaited but never served
    within the history, or never healed: the load's end; a history without `ready` ops: its heal."""
    if window.healed_ns is None:
        return load_end
    healed = window.healed_ns / NS
    if window.ready_ns is not None:
        return max(healed, window.ready_ns / NS)
    return max(healed, load_end) if window.ready_awaited else healed


def window_intervals(windows: list[FaultWindow], recovery_s: float, load_end: float) -> list[Interval]:
    """The fault windows as the rule counts them: each from IN_FLIGHT_S (at most IN_FLIGHT_SHARE of
    the window) after its start to the last time the faults in force with it were over
    (`served_again`) plus the recovery time, clipped to the load's end. `windows` by start (as
    `history.faults` gives them)."""
    spans = [Interval(w.invoked_ns / NS, served_again(w, load_end)) for w in windows]
    heals = [span.hi for span in spans]
    begun, last = 0, -math.inf  # the faults in force together so far: from `begun`, over at `last`
    for i, span in enumerate(spans):
        if i > begun and span.lo > last:
            heals[begun:i] = [last] * (i - begun)
            begun, last = i, -math.inf
        last = max(last, span.hi)
    heals[begun:] = [last] * (len(spans) - begun)
    out = []
    for span, heal in zip(spans, heals, strict=True):
        hi = min(heal + recovery_s, load_end)
        out.append(Interval(span.lo + min(IN_FLIGHT_S, max(0.0, hi - span.lo) * IN_FLIGHT_SHARE), hi))
    return out


def intervals(
    windows: list[FaultWindow], asked: Asked, load_start: float | None, load_end: float | None
) -> list[Interval]:
    """Every interval the rule counts in (the load, before the first fault, each window)."""
    if load_start is None or load_end is None:
        return []
    out = [Interval(load_start, load_end)]
    if windows:
        out.append(Interval(load_start, windows[0].invoked_ns / NS))
        out += window_intervals(windows, asked.recovery_s, load_end)
    return out


def exact_seconds(spans: Iterable[Interval]) -> set[int]:
    """The seconds whose events a tally must hold one by one: where an interval starts or ends."""
    return {int(x) for span in spans if span.hi >= span.lo for x in (span.lo, span.hi)}


def _counts(tally: Tally, span: Interval) -> dict[str, Any]:
    return {
        "acked_writes": tally.count("acked", span.lo, span.hi),
        "reads": tally.count("read", span.lo, span.hi),
        "commits": tally.count("commit", span.lo, span.hi),
        "rebalances": tally.count("rebalance", span.lo, span.hi),
        "longest_without_ack_s": tally.longest_gap("acked", span.lo, span.hi),
    }


def _loaded(counts: dict[str, Any]) -> bool:
    return bool(counts["acked_writes"] >= 1 and counts["reads"] >= 1)


def _what(window: FaultWindow) -> str:
    nodes = " ".join(window.nodes)
    return f"{window.f} {nodes}".strip()


def restarting_s(windows: list[FaultWindow], lo: float, hi: float) -> float:
    """Seconds within [lo, hi] between a heal and the `ready` that said its brokers served again
    (overlaps counted once): the cluster was being brought back, not serving clients."""
    spans = sorted(
        (max(lo, w.healed_ns / NS), min(hi, w.ready_ns / NS))
        for w in windows
        if w.healed_ns is not None and w.ready_ns is not None and w.ready_ns > w.healed_ns
    )
    total, reached = 0.0, lo
    for a, b in spans:
        a = max(a, reached)
        if b > a:
            total += b - a
            reached = b
    return round(total, 3)


def _minimum(rate: float | None, issued: float, restarting: float = 0.0) -> tuple[int, str]:
    """The acknowledged writes the run needs, and why: MIN_ACKED_SHARE of what `rate` asks for in
    the `issued` seconds but those `restarting`, at most MIN_ACKED_PER_S a second; one when the
    rate is not known."""
    if rate is None:
        return 1, "one (no test.json: the rate is not known)"
    asked = max(0.0, issued - restarting)
    seconds = f"{asked:g} s" + (
        f" ({issued:g} s but {restarting:g} s while restarted brokers did not serve yet)"
        if restarting
        else ""
    )
    per_second = MIN_ACKED_SHARE * rate
    if per_second <= MIN_ACKED_PER_S:
        why = f"{MIN_ACKED_SHARE:.0%} of the operations {rate:g} ops/s asks for in {seconds}"
    else:
        per_second = MIN_ACKED_PER_S
        why = f"{MIN_ACKED_PER_S:g} per second in {seconds} ({MIN_ACKED_SHARE:.0%} of {rate:g} ops/s is more)"
    return max(1, math.ceil(per_second * asked)), why


def evaluate(tally: Tally, windows: list[FaultWindow], asked: Asked) -> dict[str, Any]:
    """results.json's `power`: the counts of the run, before the first fault and per fault window,
    and whether they are enough for a `valid` verdict (`enough`, with `reasons` when not)."""
    start, end = tally.load_start, tally.load_end
    reasons: list[str] = []
    out: dict[str, Any] = {"recovery_s": asked.recovery_s}
    if start is None or end is None:
        out.update(load=None, run=None, before_first_fault=None, windows=[], minimum=None, enough=False)
        out["reasons"] = ["too little load: no write completed"]
        return out
    seconds = round(max(0.0, end - start), 3)
    issued = round(max(0.0, (tally.issued_until if tally.issued_until is not None else end) - start), 3)
    run = _counts(tally, Interval(start, end))
    run["crashes"] = tally.count("crash", start, end)
    restarting = restarting_s(windows, start, start + issued)
    minimum, why = _minimum(asked.rate, issued, restarting)
    out["load"] = {
        "start_s": round(start, 3),
        "end_s": round(end, 3),
        "seconds": seconds,
        "issued_s": issued,
        "restarting_s": restarting,
    }
    out["run"] = run
    out["minimum"] = {"acked_writes": minimum, "why": why}
    short: list[str] = []
    if run["acked_writes"] < minimum:
        asked_s = f"{issued:.0f} s" + (f", {restarting:.0f} s of them restarting" if restarting else "")
        short.append(f"{run['acked_writes']} acknowledged writes in {asked_s} (at least {minimum})")
    if run["reads"] < 1:
        short.append("no read returned records")
    before = None
    if windows:
        before = _counts(tally, Interval(start, windows[0].invoked_ns / NS))
        before.update(start_s=round(start, 3), end_s=round(windows[0].invoked_ns / NS, 3))
        if not _loaded(before):
            short.append("none before the first fault")
    rows = []
    for w, span in zip(windows, window_intervals(windows, asked.recovery_s, end), strict=True):
        row: dict[str, Any] = {
            "fault": w.f,
            "fault_id": w.fault_id,
            "nodes": w.nodes,
            "start_s": round(w.invoked_ns / NS, 3),  # counted from IN_FLIGHT_S later
            "healed_s": None if w.healed_ns is None else round(w.healed_ns / NS, 3),
            "ready_s": None if w.ready_ns is None else round(w.ready_ns / NS, 3),
            "end_s": round(span.hi, 3),
            **_counts(tally, span),
        }
        pattern = w.value.get("pattern") if isinstance(w.value, dict) else None
        if isinstance(pattern, dict) and pattern.get("name"):
            row["pattern"] = str(pattern["name"])
        row["loaded"] = _loaded(row)
        rows.append(row)
    silent = [r for r, w in zip(rows, windows, strict=True) if not r["loaded"]]
    if silent:
        first = silent[0]
        what = _what(windows[rows.index(first)])
        short.append(
            f"none in {len(silent)} of {len(rows)} fault windows (first: {what} at {first['start_s']:g} s:"
            f" {first['acked_writes']} acknowledged writes, {first['reads']} reads with records)"
        )
    if short:
        reasons.append("too little load: " + "; ".join(short))
    if asked.crash_clients > 0 and run["crashes"] == 0:
        reasons.append(f"crash_clients = {asked.crash_clients:g}: no client process crashed")
    if asked.groups and run["commits"] == 0:
        reasons.append("consumer groups: no offset commit succeeded")
    if asked.faults and not windows:
        reasons.append("faults were asked for and none struck")
    out.update(before_first_fault=before, windows=rows, enough=not reasons, reasons=reasons)
    return out


def lines(power: dict[str, Any] | None) -> list[str]:
    """What a console says of a run's power: one line of counts, one per reason it falls short."""
    if not isinstance(power, dict):
        return []
    return [
        f"power: {summary(power)}",
        *(f"  not enough to call it valid: {r}" for r in power.get("reasons") or []),
    ]


def summary(power: dict[str, Any] | None) -> str:
    """One line for people: '4312 acknowledged writes, 2011 reads with records in 58 s; every one
    of 5 fault windows had load; longest stretch without an ack 6.2 s'."""
    if not isinstance(power, dict) or not isinstance(power.get("run"), dict):
        return "no load"
    run, load = power["run"], power.get("load") or {}
    text = (
        f"{run.get('acked_writes')} acknowledged writes, {run.get('reads')} reads with records"
        f" in {float(load.get('seconds') or 0):.0f} s"
    )
    windows = power.get("windows") or []
    if windows:
        loaded = sum(1 for w in windows if isinstance(w, dict) and w.get("loaded"))
        text += f"; {loaded} of {len(windows)} fault windows had load"
    gap = run.get("longest_without_ack_s")
    if gap:
        text += f"; longest stretch without an ack {gap:g} s"
    return text
