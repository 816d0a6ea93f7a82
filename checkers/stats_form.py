"""The statistics' facts (`checkers.stats.Facts`) from the history's Parquet form, in the driver with
Arrow and numpy, without a Spark job.

The same facts as `checkers.spark_stats.spark_facts` (and the reference's pass,
`checkers.stats.history_facts`), counted the same way from the same columns of
`operations.parquet` (one row per invocation, paired with its completion) in two streaming passes,
a row group at a time, so memory stays bounded by a row group and the summaries:

1. operations by f and outcome, completions by second, f and outcome, per second the first and last
   ok send and the longest gap between two inside it (each ok send's `prev_ok_time` is its
   predecessor in time when the conversion found them in order), the first send invocation, each
   fault window's completions and ok sends in the seconds where it starts and ends (the seconds
   between are summed from the per-second rows by `spark_stats.window_facts`), and the latencies'
   histogram in buckets of 2**16 ns by f;
2. the exact latencies (nanoseconds) counted by value within the buckets that hold a wanted rank
   (at most 2**16 distinct values a bucket): the nearest-rank percentiles, exact, as the reference's.

A hand-made history whose ok sends go back in time keeps their completion times in memory (sorted
once) to find each one's predecessor; `strandline run` writes its history in time order.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from checkers import cancelled, freed_memory
from checkers.parquet_schema import F_CODES, OUTCOME_CODES
from checkers.power_form import column_ints
from checkers.spark_stats import OVERALL, nemesis_op, quantiles_ms, rank_selects, window_facts
from checkers.stats import NS, PROBLEMS_KEPT, Facts, fault_windows
from checkers.timeline import RATE_SERIES, Point
from history.format import ReadProblem

Array = np.ndarray[Any, Any]
BUCKET_BITS = 16  # the latency histogram's buckets: 65.5 us, at most 2**16 distinct values each
BATCH_ROWS = 1 << 18
COMPACT_AT = 1 << 18  # keys held before the counts are summed up
_OK, _OPEN = OUTCOME_CODES.index("ok"), OUTCOME_CODES.index("open")
_SEND = F_CODES.index("send")
_NF, _NC, _NO = len(F_CODES), 3, len(OUTCOME_CODES)  # f codes; completed outcomes (ok, fail, info); all
_COLUMNS = ["invoke_index", "f_code", "outcome_code", "next_index", "time", "invoke_time"]


class _KeyCounts:
    """How many times each int64 key occurred, kept as numpy arrays (compacted as they grow), so a
    histogram of many buckets costs 16 bytes a bucket, not a Python dict entry. A compaction sorts
    every key held, so the next waits until as many more keys arrived as it left distinct (and at
    least COMPACT_AT): summing up every COMPACT_AT keys sorted the same millions of distinct exact
    latencies again and again (10 of the statistics' 15 s at 30,000,000 operations)."""

    def __init__(self) -> None:
        self.keys: list[Array] = []
        self.counts: list[Array] = []
        self.held = 0
        self.distinct = 0  # keys left by the last compaction

    def add(self, keys: Array) -> None:
        """Count each of `keys` once."""
        if len(keys) == 0:
            return
        low, high = int(keys.min()), int(keys.max())
        if high - low <= 4 * len(keys) + 1024:
            dense = np.bincount(keys - low)
            at = np.flatnonzero(dense)
            keys, counts = at + low, dense[at]
        else:
            keys, counts = np.unique(keys, return_counts=True)
        self.keys.append(keys)
        self.counts.append(counts)
        self.held += len(keys)
        if self.held > self.distinct + max(COMPACT_AT, self.distinct):
            self.totals()

    def totals(self) -> tuple[Array, Array]:
        """The distinct keys (ascending) and their counts."""
        if not self.keys:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        keys, inverse = np.unique(np.concatenate(self.keys), return_inverse=True)
        counts = np.bincount(inverse, weights=np.concatenate(self.counts)).astype(np.int64)
        self.keys, self.counts, self.held = [keys], [counts], len(keys)
        self.distinct = len(keys)
        return keys, counts


def _among(values: Array, sorted_set: Array) -> Array:
    """Which of `values` are in `sorted_set` (sorted, unique, not empty): a binary search each."""
    at = np.minimum(np.searchsorted(sorted_set, values), len(sorted_set) - 1)
    return np.asarray(sorted_set[at] == values)


End = tuple[int, int, float, float]  # a fault window, a second where it starts or ends, its bounds


class _WindowEnds:
    """The seconds where each fault window starts and ends, found by second."""

    def __init__(self, windows: list[dict[str, Any]]) -> None:
        self.rows: list[End] = sorted(
            ((i, second, float(w["start_s"]), float(w["end_s"])) for i, w in enumerate(windows)
             for second in sorted({math.floor(w["start_s"]), math.floor(w["end_s"])})),
            key=lambda e: e[1],
        )  # fmt: skip
        self.seconds = np.asarray([e[1] for e in self.rows], np.int64)
        self.distinct = np.unique(self.seconds)

    def among(self, seconds: Array) -> Array:
        """Which of `seconds` are a window's start's or end's."""
        return _among(seconds, self.distinct) if len(self.distinct) else np.zeros(len(seconds), bool)

    def of(self, seconds: Array) -> Iterator[End]:
        """The windows' ends in any of `seconds` (the others cost nothing: no loop over every window)."""
        for second in np.unique(seconds[self.among(seconds)]).tolist():
            a, b = (
                np.searchsorted(self.seconds, second, "left"),
                np.searchsorted(self.seconds, second, "right"),
            )
            yield from self.rows[a:b]


class _OkSends:
    """Per second: the first and last ok send and the longest gap between two inside it; per fault
    window and second where it starts or ends: the same of its ok sends inside its bounds."""

    def __init__(self, ends: _WindowEnds) -> None:
        self.ends = ends
        self.seconds: dict[int, tuple[float, float]] = {}
        self.gaps: dict[int, float | None] = {}
        self.segments: dict[tuple[int, int], tuple[float, float, float | None]] = {}

    def add(self, t: Array, prev: Array) -> None:
        """Ok sends' completion times (s) and their predecessors' in time (NaN: none)."""
        if len(t) == 0:
            return
        s = t.astype(np.int64)
        order = np.argsort(s, kind="stable")
        s, t, prev = s[order], t[order], prev[order]
        gap = np.where(prev >= s, t - prev, np.nan)
        starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
        lows, highs = np.minimum.reduceat(t, starts), np.maximum.reduceat(t, starts)
        gaps = np.fmax.reduceat(gap, starts)
        for second, lo, hi, g in zip(
            s[starts].tolist(), lows.tolist(), highs.tolist(), gaps.tolist(), strict=True
        ):
            _merge(self.seconds, self.gaps, second, lo, hi, g)
        for w, second, start, end in self.ends.of(s[starts]):
            a, b = np.searchsorted(s, second, "left"), np.searchsorted(s, second, "right")
            at, before = t[a:b], prev[a:b]
            inside = (at >= start) & (at <= end)
            if not inside.any():
                continue
            at, before = at[inside], before[inside]
            within = (before >= start) & (before >= second)
            g = float((at - before)[within].max()) if within.any() else None
            key = (w, second)
            lo, hi = float(at.min()), float(at.max())
            if key in self.segments:
                lo0, hi0, g0 = self.segments[key]
                lo, hi, g = min(lo, lo0), max(hi, hi0), _larger(g, g0)
            self.segments[key] = (lo, hi, g)


def _larger(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)


def _merge(
    seconds: dict[int, tuple[float, float]],
    gaps: dict[int, float | None],
    second: int,
    lo: float,
    hi: float,
    gap: float,
) -> None:
    g = None if gap != gap else gap  # NaN: no gap inside the second
    if second in seconds:
        lo0, hi0 = seconds[second]
        seconds[second] = (min(lo, lo0), max(hi, hi0))
        gaps[second] = _larger(g, gaps[second])
    else:
        seconds[second] = (lo, hi)
        gaps[second] = g


def _batches(path: str | Path, columns: list[str]) -> Iterator[pa.RecordBatch]:
    """The columns, a row group at a time, in batches of at most BATCH_ROWS. (`iter_batches` read
    ahead: at 10M operations 3 times as slow, and 150 MiB of Arrow buffers rather than 14.)"""
    form = pq.ParquetFile(path)
    for group in range(form.metadata.num_row_groups):
        cancelled.check()
        yield from form.read_row_group(group, columns=columns).to_batches(max_chunksize=BATCH_ROWS)


def form_facts(
    operations_path: str | Path,
    *,
    max_time: int | None,
    nemesis: list[list[Any]],
    ok_sends_in_order: bool,
    latency: list[Point],
    problems: list[ReadProblem] | None = None,
) -> Facts:
    """The statistics' facts of a history in Parquet form (see module docstring); `latency` and
    `problems`: the report's latency sample and the unreadable lines, as the conversion found them."""
    duration = max(0.0, (max_time or 0) / NS)
    windows = fault_windows([nemesis_op(row) for row in nemesis], duration)
    ends = _WindowEnds(windows)
    linked = ok_sends_in_order and bool(windows)
    outcomes = np.zeros((_NF, _NO), np.int64)
    by_second = _KeyCounts()  # (second * _NF + f) * _NC + outcome -> completions
    histogram = _KeyCounts()  # bucket * _NF + f -> completions
    at_ends: dict[tuple[int, int, int], int] = {}  # (window, second, outcome) -> completions
    ok_sends = _OkSends(ends)
    unordered: list[Array] = []
    first_send: tuple[int, int] | None = None
    columns = _COLUMNS + (["prev_ok_time"] if linked else [])
    for batch in _batches(operations_path, columns):
        f = column_ints(batch, "f_code", -1)
        code = column_ints(batch, "outcome_code", _OPEN)
        done = (code < _OPEN) & (f >= 0)
        counted = (f >= 0) & (done | ~batch.column("next_index").is_valid().to_numpy(zero_copy_only=False))
        outcomes += np.bincount(f[counted] * _NO + code[counted], minlength=_NF * _NO).reshape(_NF, _NO)
        sends = (f == _SEND) & batch.column("invoke_index").is_valid().to_numpy(zero_copy_only=False)
        if sends.any():
            first = column_ints(batch, "invoke_index", 0)[sends]
            j = int(first.argmin())
            if first_send is None or int(first[j]) < first_send[0]:
                first_send = (int(first[j]), int(column_ints(batch, "invoke_time", 0)[sends][j]))
        time = column_ints(batch, "time", 0)[done]
        f, code = f[done], code[done]
        t = time.astype(np.float64) / NS
        s = t.astype(np.int64)
        by_second.add((s * _NF + f) * _NC + code)
        lat = time - column_ints(batch, "invoke_time", 0)[done]
        histogram.add((lat >> BUCKET_BITS) * _NF + f)
        ok = (f == _SEND) & (code == _OK)
        if linked:
            prev = pc.cast(batch.column("prev_ok_time"), pa.float64()).to_numpy(zero_copy_only=False)
            ok_sends.add(t[ok], prev[done][ok] / NS)
        elif windows:
            unordered.append(t[ok])
        else:
            ok_sends.add(t[ok], np.full(int(ok.sum()), np.nan))
        _count_ends(at_ends, ends, t, s, code)
    if unordered:
        t = np.sort(np.concatenate(unordered))
        s = t.astype(np.int64)
        prev = np.where(np.r_[False, s[1:] == s[:-1]], np.r_[np.nan, t[:-1]], np.nan)
        del unordered
        ok_sends.add(t, prev)
    per_second: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
    rates: dict[tuple[str, str], dict[int, int]] = {}
    for key, n in zip(*(x.tolist() for x in by_second.totals()), strict=True):
        second, rest = divmod(key, _NF * _NC)
        fc, c = divmod(rest, _NC)
        per_second[second][c] += n
        series = (F_CODES[fc], OUTCOME_CODES[c])
        if series in RATE_SERIES:
            rates.setdefault(series, {})[second] = n
    first_level: dict[int, dict[int, int]] = defaultdict(dict)
    for key, n in zip(*(x.tolist() for x in histogram.totals()), strict=True):
        bucket, fc = divmod(key, _NF)
        first_level[fc][bucket] = n
    ends_by: dict[int, dict[int, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0, 0]))
    for (w, second, c), n in at_ends.items():
        ends_by[w][second][c] += n
    window_facts(windows, per_second, ok_sends.seconds, ok_sends.gaps, ends_by, ok_sends.segments)
    latency_ms, latency_by_f = quantiles_ms(_percentiles(operations_path, first_level), sorted(first_level))
    freed_memory.release()  # what the passes' batches and arrays freed
    return Facts(
        outcomes={F_CODES[fc]: dict(zip(OUTCOME_CODES, row.tolist(), strict=True))
                  for fc, row in enumerate(outcomes) if row.any()},
        latency_ms=latency_ms,
        latency_ms_by_f=latency_by_f,
        per_second=dict(per_second),
        completed=int(by_second.totals()[1].sum()),
        duration=duration,
        nemesis_ops=len(nemesis),
        first_send=first_send[1] / NS if first_send is not None else None,
        ok_send_seconds=ok_sends.seconds,
        windows=windows,
        rates={series: rates[series] for series in RATE_SERIES if series in rates},
        latency_sample=latency,
        problems=[(p.line_no, p.reason) for p in (problems or [])[:PROBLEMS_KEPT]],
    )  # fmt: skip


def _count_ends(
    into: dict[tuple[int, int, int], int], ends: _WindowEnds, t: Array, s: Array, code: Array
) -> None:
    """Add the completions inside each window's bounds in the seconds where it starts or ends."""
    hit = ends.among(s)
    if not hit.any():
        return
    order = np.argsort(s[hit], kind="stable")
    t, s, code = t[hit][order], s[hit][order], code[hit][order]
    for w, second, start, end in ends.of(np.unique(s)):
        a, b = np.searchsorted(s, second, "left"), np.searchsorted(s, second, "right")
        inside = (t[a:b] >= start) & (t[a:b] <= end)
        for c, n in enumerate(np.bincount(code[a:b][inside], minlength=_NC).tolist()):
            if n:
                into[(w, second, c)] = into.get((w, second, c), 0) + n


def _percentiles(
    operations_path: str | Path, first_level: dict[int, dict[int, int]]
) -> dict[tuple[int, int], int]:
    """The latency (ns) at each wanted rank, per f and of all: pass 2, the exact values counted
    within the first level's buckets that hold one."""
    selects = rank_selects(first_level)
    if not selects:
        return {}
    wanted = np.unique(np.asarray([s.prefix for s in selects], np.int64))
    exact = _KeyCounts()  # latency * _NF + f -> completions
    for batch in _batches(operations_path, ["f_code", "outcome_code", "time", "invoke_time"]):
        code = column_ints(batch, "outcome_code", _OPEN)
        f = column_ints(batch, "f_code", -1)
        done = (code < _OPEN) & (f >= 0)
        lat = (column_ints(batch, "time", 0) - column_ints(batch, "invoke_time", 0))[done]
        f = f[done]
        hit = _among(lat >> BUCKET_BITS, wanted)
        exact.add(lat[hit] * _NF + f[hit])
    values, total = exact.totals()
    lat, f = np.divmod(values, _NF)
    found = {}
    for sel in selects:
        mine = (lat >> BUCKET_BITS == sel.prefix) & ((f == sel.group) if sel.group != OVERALL else True)
        # Within the bucket, by value (the f's of one value are adjacent): the rank's value.
        at_values, n = lat[mine], total[mine]
        cumulative = np.cumsum(n)
        found[(sel.group, sel.q)] = int(at_values[int(np.searchsorted(cumulative, sel.rank))])
    return found
