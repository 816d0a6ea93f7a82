"""The statistics of results.json (`checkers.stats.Facts`) computed by Spark from the Parquet form.

Same facts as `checkers.stats.history_facts` (the reference's one Python pass), so `assemble` gives
the same `stats` from either. Spark scans the completed client operations (each invocation paired
with its completion, with both times) and hands back summaries only, in two actions (three for
histories of a million completions or more), each one collect of a union of small aggregates; no
job grows with the number of fault windows or moves the history through one task:

1. operations by f and outcome, completions by second and outcome, per second the first and last
   ok send and (when the run had faults) the longest gap between two ok sends inside that second (a
   window partitioned by the second), the first send invocation, and the latency histogram's first
   level (16.8 ms buckets);
2. per fault window, only for the seconds where it starts and ends (an equi-join on the second with
   the small broadcast table of those seconds): the completions inside it by outcome, and its ok
   sends' first, last and longest gap between two. The seconds wholly inside a window are summed
   on the driver from action 1's per-second rows, so a completion is joined to a window only when
   it shares a second with the window's start or end (a join on the window's bounds instead copied
   each completion into every window that held it: quadratic in the number of windows);
   beside them, the latency percentiles, exact (nearest rank, as the reference): below `RADIX_FROM`
   completions the rows at the wanted ranks of a sort per f and of all; from it on, a radix select
   on the latency in nanoseconds, 12 bits a level: this action counts the next 12 bits within the
   first-level buckets that hold a wanted rank, and
3. counts the exact values within the second-level buckets that hold one (a few thousand rows).

The fault windows themselves are paired from the nemesis ops the conversion kept (a few dozen
lines: `checkers.stats.fault_windows`, the reference's rules).
"""

from __future__ import annotations

import logging
import math
from bisect import bisect_left, bisect_right
from collections import defaultdict
from typing import TYPE_CHECKING, Any

import numpy as np

from checkers.parquet_schema import F_CODES, OUTCOME_CODES
from checkers.spark_session import broadcast, read_form
from checkers.stats import NS, OUTCOMES, PROBLEMS_KEPT, Facts, fault_windows
from checkers.timeline import RATE_SERIES, LatencySample, Point
from history.format import ReadProblem

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger(__name__)

LEVEL_BITS = 12
# Latencies are long nanoseconds: the first level keeps the bits above 24 (16.8 ms buckets), then
# two levels of 12 bits reach the exact value.
FIRST_SHIFT = 2 * LEVEL_BITS
QUANTILES = (50, 95, 99)
OVERALL = -1  # the f code that stands for every f, in the percentiles' bookkeeping
# From this many completed operations on, percentiles by radix select rather than by a sort.
RADIX_FROM = 1_000_000

_OK, _OPEN = OUTCOME_CODES.index("ok"), OUTCOME_CODES.index("open")
_SEND = F_CODES.index("send")

# Every row an action collects has these columns (the ones a kind does not use are null).
_ROW_SCHEMA = (
    ("kind", "string"), ("w", "long"), ("s", "long"), ("code", "int"), ("n", "long"),
    ("lat", "long"), ("lo", "double"), ("hi", "double"), ("gap", "double"),
)  # fmt: skip


def _row(df: DataFrame, **columns: Any) -> DataFrame:
    """df's columns named as the common row (the others null)."""
    from pyspark.sql import functions as F

    return df.select(*[(columns.get(name, F.lit(None))).cast(kind).alias(name) for name, kind in _ROW_SCHEMA])


def _collect(parts: list[DataFrame]) -> list[Any]:
    """One action for all parts: the rows of their union."""
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part)
    return union.collect()


def nearest_rank(n: int, q: float) -> int:
    """The 1-based rank of the q-th percentile of n values, as `checkers.stats.percentile` takes it."""
    return max(1, math.ceil(q / 100 * n))


def spark_facts(
    spark: SparkSession,
    operations_path: str,
    *,
    max_time: int | None,
    nemesis: list[list[Any]],
    ok_sends_in_order: bool = False,
    latency: list[Point] | None = None,
    problems: list[ReadProblem] | None = None,
) -> Facts:
    """The statistics' facts of a history in Parquet form (see module docstring).

    `ok_sends_in_order`: the conversion found the ok sends' completion times never going back in
    history order, so each one's `prev_ok_time` is its predecessor in time (no sort needed).
    `latency`: the report's latency sample as the conversion took it (None: taken here, by a sort);
    `problems`: the lines the conversion could not read."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    col = F.col
    duration = max(0.0, (max_time or 0) / NS)
    windows = fault_windows([nemesis_op(row) for row in nemesis], duration)
    columns = ["invoke_index", "f_code", "outcome_code", "next_index", "time", "invoke_time"]
    operations = read_form(spark, operations_path).select(
        *columns, *(["prev_ok_time"] if ok_sends_in_order and windows else [])
    )
    # Times as the reference takes them: nanoseconds / 1e9 as a double, the second by truncation.
    t = col("time").cast("double") / NS
    completed = col("outcome_code") < _OPEN
    ok_send = completed & (col("f_code") == _SEND) & (col("outcome_code") == _OK)
    if not windows:
        prev = F.lit(None).cast("double")
    elif ok_sends_in_order:
        prev = F.when(ok_send, col("prev_ok_time").cast("double") / NS)
    else:
        # Each ok send with the previous one of its second (null for the second's first): a sort.
        second = Window.partitionBy(F.when(completed, t.cast("long")), ok_send).orderBy(t)
        prev = F.when(ok_send, F.lag(t).over(second))
    rows = operations.select(
        col("f_code").cast("int").alias("fc"),
        col("outcome_code").cast("int").alias("code"),
        # 0: completed; 1: never completed; 2: superseded by its process's next invocation.
        F.when(completed, 0).when(col("next_index").isNull(), 1).otherwise(2).alias("state"),
        F.when(completed, t).alias("t"),
        F.when(completed, t.cast("long")).alias("s"),
        ok_send.alias("ok"),
        F.when(completed, F.shiftright(col("time") - col("invoke_time"), FIRST_SHIFT)).alias("b"),
        (col("time") - col("invoke_time")).alias("lat"),
        "invoke_index",
        "invoke_time",
        prev.alias("prev"),
    )

    # --- Action 1: one pass, three groupings -------------------------------------------------
    # (s, fc, code): completions by second, f and outcome, and for the ok sends (fc send, code ok)
    # each second's first and last and the longest gap between two inside it; (fc, code, state):
    # operations by f and outcome, and each f's first invocation; (fc, b): the latency histogram's
    # first level (16.8 ms buckets).
    in_second = F.when(col("ok") & (col("prev") >= col("s")), col("t") - col("prev"))
    summary = rows.groupingSets(
        [["s", "fc", "code"], ["fc", "code", "state"], ["fc", "b"]],
        "s",
        "code",
        "fc",
        "state",
        "b",
    ).agg(
        F.grouping_id().alias("g"),
        F.count(F.lit(1)).alias("n"),
        F.min("t").alias("lo"),
        F.max("t").alias("hi"),
        F.max(in_second).alias("gap"),
        F.min("invoke_index").alias("first"),
        F.min_by("invoke_time", "invoke_index").alias("first_time"),
    )
    outcomes: dict[str, dict[str, int]] = defaultdict(lambda: {"ok": 0, "fail": 0, "info": 0, "open": 0})
    per_second: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
    ok_send_seconds: dict[int, tuple[float, float]] = {}
    in_second_gaps: dict[int, float | None] = {}
    first_send: tuple[int, float] | None = None
    first_level: dict[int, dict[int, int]] = defaultdict(dict)
    # grouping_id: a bit per grouping column (s, code, fc, state, b; the first the highest), set
    # where the column is not grouped.
    by_second, by_f, by_bucket = 0b00011, 0b10001, 0b11010
    rates: dict[tuple[str, str], dict[int, int]] = {}
    for r in summary.collect():
        g = r["g"]
        if g == by_second and r["s"] is not None:
            per_second[r["s"]][r["code"]] += r["n"]
            series = (F_CODES[r["fc"]], OUTCOME_CODES[r["code"]])
            if series in RATE_SERIES:
                rates.setdefault(series, {})[r["s"]] = r["n"]
            if r["fc"] == _SEND and r["code"] == _OK:
                ok_send_seconds[r["s"]] = (r["lo"], r["hi"])
                in_second_gaps[r["s"]] = r["gap"]
        elif g == by_f:
            if r["state"] != 2:
                outcomes[F_CODES[r["fc"]]][OUTCOME_CODES[r["code"]]] += r["n"]
            if r["fc"] == _SEND and (first_send is None or r["first"] < first_send[0]):
                first_send = (r["first"], r["first_time"] / NS)
        elif g == by_bucket and r["b"] is not None:
            first_level[r["fc"]][r["b"]] = r["n"]
    completed_n = sum(sum(v) for v in per_second.values())
    done = rows.filter(col("state") == 0)

    # --- Action 2 (and 3): fault windows at their ends' seconds, percentiles ------------------
    radix = completed_n >= RADIX_FROM
    selects = rank_selects(first_level)
    parts = []
    if windows:
        parts += _window_end_rows(spark, done, windows)
    lat_of: DataFrame | None = None
    if radix and selects:
        lat_of = done.select("fc", "lat").persist()
        parts.append(_level_rows(lat_of, selects, FIRST_SHIFT))
    elif selects:
        parts.append(_rank_rows(done, selects))
    try:
        collected = _collect(parts) if parts else []
        found: dict[tuple[int, int], int] = {}
        ends: dict[int, dict[int, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0, 0]))
        segments: dict[tuple[int, int], tuple[float, float, float | None]] = {}
        level: list[Any] = []
        for r in collected:
            if r["kind"] == "ops":
                ends[r["w"]][r["s"]][r["code"]] += r["n"]
            elif r["kind"] == "seg":
                segments[(r["w"], r["s"])] = (r["lo"], r["hi"], r["gap"])
            elif r["kind"] == "rank":
                for sel in selects:
                    if sel.group == r["code"] and sel.wanted == r["n"]:
                        found[(sel.group, sel.q)] = r["lat"]
            else:
                level.append(r)
        if lat_of is not None:
            _descend(selects, level)
            _descend(selects, _level_rows(lat_of, selects, FIRST_SHIFT - LEVEL_BITS).collect())
            found = {(sel.group, sel.q): sel.prefix for sel in selects if sel.prefix is not None}
    finally:
        if lat_of is not None:
            lat_of.unpersist()
    latency_ms, latency_by_f = quantiles_ms(found, sorted(first_level))
    window_facts(windows, per_second, ok_send_seconds, in_second_gaps, ends, segments)
    return Facts(
        outcomes={f: dict(v) for f, v in outcomes.items()},
        latency_ms=latency_ms,
        latency_ms_by_f=latency_by_f,
        per_second=dict(per_second),
        completed=completed_n,
        duration=duration,
        nemesis_ops=len(nemesis),
        first_send=first_send[1] if first_send is not None else None,
        ok_send_seconds=ok_send_seconds,
        windows=windows,
        rates={series: dict(sorted(rates[series].items())) for series in RATE_SERIES if series in rates},
        latency_sample=latency if latency is not None else _latency_sample(read_form(spark, operations_path)),
        problems=[(p.line_no, p.reason) for p in (problems or [])[:PROBLEMS_KEPT]],
    )


def _latency_sample(operations: DataFrame) -> list[Point]:
    """The report's latency sample (`checkers.timeline`) by Spark, for a form converted without it
    (by Spark, `checkers.spark_convert`): the completed sends in the order of their completions."""
    from pyspark.sql import functions as F

    sample = LatencySample()
    sends = operations.filter((F.col("f_code") == _SEND) & (F.col("outcome_code") < _OPEN))
    for r in sends.select("index", "time", "invoke_time", "outcome_code").orderBy("index").toLocalIterator():
        sample.add(r["time"], r["invoke_time"], OUTCOME_CODES[r["outcome_code"]])
    return sample.points()


def window_facts(
    windows: list[dict[str, Any]],
    per_second: dict[int, list[int]],
    ok_send_seconds: dict[int, tuple[float, float]],
    in_second_gaps: dict[int, float | None],
    ends: dict[int, dict[int, list[int]]],
    segments: dict[tuple[int, int], tuple[float, float, float | None]],
) -> None:
    """Fill each window's `ops` and `longest_gap_s` from per-second summaries and its ends' seconds.

    A window [start, end] covers seconds a = int(start) .. b = int(end). Its completions are those
    of the seconds strictly between a and b (`per_second`) and those of a and b inside the bounds
    (`ends[w][second]`, by outcome code). Its ok sends, in time order, are runs of one second each:
    a and b's runs inside the bounds (`segments[(w, second)]`: first, last, longest gap between two)
    and the whole runs of the seconds between (`ok_send_seconds` and `in_second_gaps`); the longest
    stretch without an ok send is the largest of the runs' inner gaps and the gaps between the
    window's start, the runs and its end, as `checkers.stats._longest_gap` walks them one by one.
    """
    # Prefix sums of the completions by second, and the ok sends' runs as arrays (gap[k]: between
    # run k-1's last and run k's first), so a window costs a few slices however many seconds it spans.
    seconds = sorted(per_second)
    done = np.zeros((len(seconds) + 1, 3), np.int64)
    if seconds:
        done[1:] = np.cumsum(np.asarray([per_second[s] for s in seconds], np.int64), axis=0)
    ok_seconds = sorted(ok_send_seconds)
    firsts = np.asarray([ok_send_seconds[s][0] for s in ok_seconds], np.float64)
    lasts = np.asarray([ok_send_seconds[s][1] for s in ok_seconds], np.float64)
    inner = np.asarray([in_second_gaps.get(s) or 0.0 for s in ok_seconds], np.float64)
    between = np.r_[0.0, firsts[1:] - lasts[:-1]] if ok_seconds else firsts
    for i, w in enumerate(windows):
        start, end = w["start_s"], w["end_s"]
        a, b = math.floor(start), math.floor(end)
        lo, hi = bisect_right(seconds, a), bisect_left(seconds, b)
        inside = (done[hi] - done[lo]).tolist() if hi > lo else [0, 0, 0]
        for counts in ends.get(i, {}).values():
            for code in range(3):
                inside[code] += counts[code]
        w["ops"] = dict(zip(OUTCOMES, inside, strict=True))
        longest, previous = 0.0, start
        if (i, a) in segments:
            first, last, gap = segments[(i, a)]
            longest, previous = max(longest, first - previous, gap or 0.0), last
        k0, k1 = bisect_right(ok_seconds, a), bisect_left(ok_seconds, b)
        if k1 > k0:
            longest = max(longest, float(firsts[k0]) - previous, float(inner[k0:k1].max()))
            if k1 - k0 > 1:
                longest = max(longest, float(between[k0 + 1 : k1].max()))
            previous = float(lasts[k1 - 1])
        if b != a and (i, b) in segments:
            first, last, gap = segments[(i, b)]
            longest, previous = max(longest, first - previous, gap or 0.0), last
        w["longest_gap_s"] = round(max(longest, end - previous), 3)


def _window_end_rows(spark: SparkSession, done: DataFrame, windows: list[dict[str, Any]]) -> list[DataFrame]:
    """Per window and per second where it starts or ends: the completions inside its bounds by
    outcome (`ops` rows) and its ok sends there: first, last and longest gap between two (`seg`)."""
    from pyspark.sql import functions as F

    col = F.col
    ends = broadcast(
        spark.createDataFrame(
            [
                (i, second, float(w["start_s"]), float(w["end_s"]))
                for i, w in enumerate(windows)
                for second in sorted({math.floor(w["start_s"]), math.floor(w["end_s"])})
            ],
            "w LONG, es LONG, start DOUBLE, end DOUBLE",
        )
    )
    within = (col("t") >= col("start")) & (col("t") <= col("end"))
    at_ends = done.join(ends, col("s") == col("es")).filter(within)
    counts = at_ends.groupBy("w", "es", "code").count()
    runs = (
        at_ends.filter(col("ok"))
        .groupBy("w", "es")
        .agg(
            F.min("t").alias("lo"),
            F.max("t").alias("hi"),
            F.max(
                F.when((col("prev") >= col("start")) & (col("prev") >= col("s")), col("t") - col("prev"))
            ).alias("gap"),
        )
    )
    return [
        _row(counts, kind=F.lit("ops"), w=col("w"), s=col("es"), code=col("code"), n=col("count")),
        _row(runs, kind=F.lit("seg"), w=col("w"), s=col("es"), lo=col("lo"), hi=col("hi"), gap=col("gap")),
    ]


def nemesis_op(row: list[Any]) -> dict[str, Any]:
    """A nemesis op from the row the conversion kept (`checkers.parquet_lines.nemesis_row`)."""
    index, time, type_, f, value = row
    return {"index": index, "time": time, "type": type_, "f": f, "value": value, "process": "nemesis"}


class RankSelect:
    """One wanted rank in one group (an f code, or OVERALL): where the search for its value stands."""

    def __init__(self, group: int, q: int, rank: int) -> None:
        self.group, self.q = group, q
        self.wanted = rank  # 1-based, among all the group's values
        self.rank = rank  # 1-based, within the current bucket
        self.prefix: int | None = None  # the value's bits above the current level

    def descend(self, counts: dict[int, int]) -> None:
        """Pick the bucket (of this level) that holds the rank; the rank within it."""
        for bucket in sorted(counts):
            if self.rank <= counts[bucket]:
                self.prefix = bucket
                return
            self.rank -= counts[bucket]
        raise AssertionError("rank beyond the counted values")


def _with_overall(levels: dict[int, dict[int, int]]) -> dict[int, dict[int, int]]:
    """Bucket counts per f, plus their sum over every f (OVERALL)."""
    total: dict[int, int] = defaultdict(int)
    for counts in levels.values():
        for b, n in counts.items():
            total[b] += n
    return {**levels, OVERALL: dict(total)}


def rank_selects(first_level: dict[int, dict[int, int]]) -> list[RankSelect]:
    """Every wanted rank (each quantile of each f and of all), placed in its first-level bucket."""
    selects = []
    for group, per_bucket in _with_overall(first_level).items():
        n = sum(per_bucket.values())
        for q in QUANTILES:
            if n:
                s = RankSelect(group, q, nearest_rank(n, q))
                s.descend(per_bucket)
                selects.append(s)
    return selects


def _descend(selects: list[RankSelect], level: list[Any]) -> None:
    """Move every select one level down, by one level's counts (rows of `_level_rows`)."""
    by_group: dict[int, dict[int, int]] = defaultdict(dict)
    for r in level:
        by_group[r["code"]][r["lat"]] = r["n"]
    counts = _with_overall(by_group)
    for s in selects:
        within = {b: n for b, n in counts.get(s.group, {}).items() if b >> LEVEL_BITS == s.prefix}
        s.descend(within)


def _level_rows(latencies: DataFrame, selects: list[RankSelect], shift: int) -> DataFrame:
    """The counts of the next 12 bits of the latencies within the buckets (of `shift`) that hold a
    wanted rank (`lat` rows: f code, bucket, count)."""
    from pyspark.sql import functions as F

    prefixes = sorted({s.prefix for s in selects if s.prefix is not None})
    finer = shift - LEVEL_BITS
    level = (
        latencies.filter(F.shiftright("lat", shift).isin(prefixes))
        .groupBy("fc", F.shiftright("lat", finer).alias("b"))
        .count()
    )
    return _row(level, kind=F.lit("lat"), code=F.col("fc"), lat=F.col("b"), n=F.col("count"))


def _rank_rows(completed: DataFrame, selects: list[RankSelect]) -> DataFrame:
    """The latencies at the wanted ranks, by a sort per f and one of all (small histories)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    col = F.col
    ranked = completed.select(
        "fc",
        "lat",
        F.row_number().over(Window.partitionBy("fc").orderBy("lat")).alias("r"),
        F.row_number().over(Window.partitionBy(F.lit(0)).orderBy("lat")).alias("r_all"),
    )
    cond_f: Column = F.lit(False)
    for s in selects:
        if s.group != OVERALL:
            cond_f = cond_f | ((col("fc") == s.group) & (col("r") == s.wanted))
    overall = [s.wanted for s in selects if s.group == OVERALL]
    return _row(
        ranked.filter(cond_f), kind=F.lit("rank"), code=col("fc"), n=col("r"), lat=col("lat")
    ).unionByName(
        _row(
            ranked.filter(col("r_all").isin(overall)),
            kind=F.lit("rank"),
            code=F.lit(OVERALL),
            n=col("r_all"),
            lat=col("lat"),
        )
    )


def quantiles_ms(
    found: dict[tuple[int, int], int], fs: list[int]
) -> tuple[dict[str, float | None], dict[str, dict[str, float | None]]]:
    """The percentiles in ms (as the reference rounds them), overall and per f."""

    def of(group: int) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        for q in QUANTILES:
            ns = found.get((group, q))
            out[f"p{q}"] = None if ns is None else round(ns / 1e6, 3)
        return out

    return of(OVERALL), {F_CODES[f]: of(f) for f in fs}
