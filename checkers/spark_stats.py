"""The statistics of results.json (`checkers.stats.Facts`) computed by Spark from the Parquet form.

Same facts as `checkers.stats.history_facts` (the reference's one Python pass), so `assemble` gives
the same `stats` from either. Spark scans the operations (each invocation paired with its
completion, with both times) and hands back summaries only, in few actions:

1. one collect of small aggregates: operations by f and outcome, completions by second and
   outcome, each second's first and last ok send (enough for gaps of a second or more), the first
   send invocation, and the first level of the latency percentiles;
2. the latency percentiles, exact (nearest rank, as the reference) and, when the run had faults,
   per fault window the completions inside it by outcome and the longest stretch without an ok
   send (a window function over the ok sends inside each window). Up to `RADIX_FROM` completions
   the percentiles are the rows at the wanted ranks of a sort per f (one action with the
   windows); above it, a radix select on the latency in nanoseconds, 12 bits a level (three more
   small actions): each level counts the values by the next bits within the buckets that hold a
   wanted rank (a few thousand rows at most), until the value is known. A sort would move every
   completion through one task; the radix select only scans a cached column.

The fault windows themselves are paired from the nemesis ops the conversion kept (a few dozen
lines: `checkers.stats.fault_windows`, the reference's rules).
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from checkers.parquet_schema import F_CODES, OUTCOME_CODES
from checkers.stats import NS, OUTCOMES, Facts, fault_windows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

LEVEL_BITS = 12
# Latencies are long nanoseconds: the first level keeps the bits above 36 (68.7 s buckets), then
# three levels of 12 bits reach the exact value.
FIRST_SHIFT = 3 * LEVEL_BITS
QUANTILES = (50, 95, 99)
OVERALL = "*"
# From this many completed operations on, percentiles by radix select rather than by a sort.
RADIX_FROM = 1_000_000


def nearest_rank(n: int, q: float) -> int:
    """The 1-based rank of the q-th percentile of n values, as `checkers.stats.percentile` takes it."""
    return max(1, math.ceil(q / 100 * n))


def spark_facts(
    spark: SparkSession,
    operations_path: str,
    *,
    max_time: int | None,
    nemesis: list[list[Any]],
) -> Facts:
    """The statistics' facts of a history in Parquet form (see module docstring)."""
    from pyspark.sql import functions as F

    col = F.col
    operations = spark.read.parquet(operations_path).select(
        "invoke_index", "f_code", "outcome_code", "next_index", "time", "invoke_time"
    )
    f_name = F.element_at(F.array(*[F.lit(f) for f in F_CODES]), col("f_code").cast("int") + 1)
    completed = operations.filter(col("outcome_code") < OUTCOME_CODES.index("open")).select(
        f_name.alias("f"),
        col("outcome_code").cast("int").alias("code"),
        (col("time").cast("double") / NS).alias("t"),
        (col("time") - col("invoke_time")).alias("lat"),
    )
    second = col("t").cast("long")
    ok_send = (col("f") == "send") & (col("code") == OUTCOME_CODES.index("ok"))

    def rows(kind: str, df: DataFrame, key: Any, n: Any, x: Any, y: Any) -> DataFrame:
        return df.select(
            F.lit(kind).alias("kind"),
            key.cast("string").alias("key"),
            n.cast("long").alias("n"),
            x.cast("long").alias("k2"),
            y.cast("double").alias("x"),
            F.lit(None).cast("double").alias("y"),
        )

    # --- Action 1: small aggregates, one collect ------------------------------------------------
    # Outcomes by f: completed ones, and the invocations never completed (no next line at all; an
    # invocation superseded by the next one of its process is counted nowhere, as in the reference).
    by_outcome = (
        operations.filter(col("next_index").isNull() | (col("outcome_code") < OUTCOME_CODES.index("open")))
        .groupBy(f_name.alias("f"), col("outcome_code").alias("code"))
        .count()
    )
    parts = [
        rows("outcome", by_outcome, F.col("f"), col("count"), col("code"), F.lit(None)),
        rows(
            "second",
            completed.groupBy(second.alias("s"), "code").count(),
            col("s"),
            col("count"),
            col("code"),
            F.lit(None),
        ),
        completed.filter(ok_send)
        .groupBy(second.alias("s"))
        .agg(F.min("t").alias("lo"), F.max("t").alias("hi"))
        .select(
            F.lit("ok_send").alias("kind"),
            col("s").cast("string").alias("key"),
            F.lit(0).cast("long").alias("n"),
            F.lit(None).cast("long").alias("k2"),
            col("lo").alias("x"),
            col("hi").alias("y"),
        ),
        rows(
            "first_send",
            operations.filter(col("f_code") == F_CODES.index("send")).agg(
                F.min_by("invoke_time", "invoke_index").alias("t")
            ),
            F.lit(None),
            F.lit(0),
            F.lit(None),
            col("t").cast("double") / NS,
        ),
        rows(
            "lat",
            completed.groupBy("f", F.shiftright("lat", FIRST_SHIFT).alias("b")).count(),
            col("f"),
            col("count"),
            col("b"),
            F.lit(None),
        ),
    ]
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part)
    outcomes: dict[str, dict[str, int]] = defaultdict(lambda: {"ok": 0, "fail": 0, "info": 0, "open": 0})
    per_second: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
    ok_send_seconds: dict[int, tuple[float, float]] = {}
    first_send: float | None = None
    buckets: dict[str, dict[int, int]] = defaultdict(dict)
    for r in union.collect():
        kind = r["kind"]
        if kind == "outcome":
            outcomes[r["key"]][OUTCOME_CODES[r["k2"]]] += r["n"]
        elif kind == "second":
            per_second[int(r["key"])][r["k2"]] += r["n"]
        elif kind == "ok_send":
            ok_send_seconds[int(r["key"])] = (r["x"], r["y"])
        elif kind == "first_send":
            first_send = r["x"]
        elif kind == "lat":
            buckets[r["key"]][r["k2"]] = r["n"]
    completed_n = sum(sum(v) for v in per_second.values())
    duration = max(0.0, (max_time or 0) / NS)

    # --- Action 2 (and three small ones for big histories): percentiles, fault windows ----
    windows = fault_windows([_nemesis_op(row) for row in nemesis], duration)
    parts = []
    if windows:
        parts.append(_window_rows(spark, completed, ok_send, windows))
    if completed_n >= RADIX_FROM:
        cached = completed.select("f", "lat").persist()
        try:
            latency_ms, latency_by_f = _radix_percentiles(cached, buckets)
        finally:
            cached.unpersist()
    else:
        ranks = _wanted_ranks(buckets)
        if ranks:
            parts.append(_rank_rows(completed, ranks))
    found: dict[tuple[str, int], int] = {}
    ops: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
    sends: dict[int, tuple[float | None, float, float]] = {}
    if parts:
        union = parts[0]
        for part in parts[1:]:
            union = union.unionByName(part)
        for r in union.collect():
            if r["kind"] == "rank":
                for q in ranks[(r["g"], r["n"])]:
                    found[(r["g"], q)] = r["lat"]
            elif r["kind"] == "ops":
                ops[r["w"]][r["code"]] += r["n"]
            else:
                sends[r["w"]] = (r["gap"], r["lo"], r["hi"])
    if completed_n < RADIX_FROM:
        latency_ms, latency_by_f = _quantiles(found, [f for f in buckets if buckets[f]])
    for i, w in enumerate(windows):
        w["ops"] = dict(zip(OUTCOMES, ops[i], strict=True))
        start, end = w["start_s"], w["end_s"]
        if i in sends:
            gap, lo, hi = sends[i]
            longest = max(gap or 0.0, lo - start, end - hi)
        else:
            longest = end - start
        w["longest_gap_s"] = round(max(longest, 0.0), 3)
    return Facts(
        outcomes={f: dict(v) for f, v in outcomes.items()},
        latency_ms=latency_ms,
        latency_ms_by_f=latency_by_f,
        per_second=dict(per_second),
        completed=completed_n,
        duration=duration,
        nemesis_ops=len(nemesis),
        first_send=first_send,
        ok_send_seconds=ok_send_seconds,
        windows=windows,
    )


def _nemesis_op(row: list[Any]) -> dict[str, Any]:
    index, time, type_, f, value = row
    return {"index": index, "time": time, "type": type_, "f": f, "value": value, "process": "nemesis"}


_ROW_SCHEMA = (
    ("kind", "string"), ("w", "int"), ("code", "int"), ("n", "long"), ("gap", "double"),
    ("lo", "double"), ("hi", "double"), ("g", "string"), ("lat", "long"),
)  # fmt: skip


def _row(df: DataFrame, **columns: Any) -> DataFrame:
    """df's columns named as the final collect's common row (the others null)."""
    from pyspark.sql import functions as F

    return df.select(*[(columns.get(name, F.lit(None))).cast(kind).alias(name) for name, kind in _ROW_SCHEMA])


def _with_overall(levels: dict[str, dict[int, int]]) -> dict[str, dict[int, int]]:
    """Bucket counts per f, plus their sum over every f (OVERALL)."""
    total: dict[int, int] = defaultdict(int)
    for counts in levels.values():
        for b, n in counts.items():
            total[b] += n
    return {**levels, OVERALL: dict(total)}


def _wanted_ranks(first_level: dict[str, dict[int, int]]) -> dict[tuple[str, int], list[int]]:
    """(group, 1-based rank) -> the quantiles found at that rank, for every f and OVERALL."""
    wanted: dict[tuple[str, int], list[int]] = defaultdict(list)
    for group, per_bucket in _with_overall(first_level).items():
        n = sum(per_bucket.values())
        if n:
            for q in QUANTILES:
                wanted[(group, nearest_rank(n, q))].append(q)
    return dict(wanted)


def _rank_rows(completed: DataFrame, wanted: dict[tuple[str, int], list[int]]) -> DataFrame:
    """The latencies at the wanted ranks, by a sort per f and one of all (small histories)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    col = F.col
    ranked = completed.select(
        "f",
        "lat",
        F.row_number().over(Window.partitionBy("f").orderBy("lat")).alias("r"),
        F.row_number().over(Window.partitionBy(F.lit(0)).orderBy("lat")).alias("r_all"),
    )
    by_f = [(g, r) for g, r in wanted if g != OVERALL]
    overall = [r for g, r in wanted if g == OVERALL]
    cond_f = F.lit(False)
    for g, r in by_f:
        cond_f = cond_f | ((col("f") == g) & (col("r") == r))
    parts = [
        _row(ranked.filter(cond_f), kind=F.lit("rank"), g=col("f"), n=col("r"), lat=col("lat")),
        _row(
            ranked.filter(col("r_all").isin(overall)),
            kind=F.lit("rank"),
            g=F.lit(OVERALL),
            n=col("r_all"),
            lat=col("lat"),
        ),
    ]
    return parts[0].unionByName(parts[1])


def _quantiles(
    found: dict[tuple[str, int], int], fs: list[str]
) -> tuple[dict[str, float | None], dict[str, dict[str, float | None]]]:
    """The percentiles in ms (as the reference rounds them), overall and per f."""

    def of(group: str) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        for q in QUANTILES:
            ns = found.get((group, q))
            out[f"p{q}"] = None if ns is None else round(ns / 1e6, 3)
        return out

    return of(OVERALL), {f: of(f) for f in fs}


class _Select:
    """One wanted rank in one group (a client f, or OVERALL): where the radix select stands."""

    def __init__(self, group: str, q: int, rank: int) -> None:
        self.group, self.q = group, q
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


def _radix_percentiles(
    completed: DataFrame, first_level: dict[str, dict[int, int]]
) -> tuple[dict[str, float | None], dict[str, dict[str, float | None]]]:
    """p50/p95/p99 overall and per f, exact: a radix select over the latency in nanoseconds."""
    from pyspark.sql import functions as F

    selects = []
    for group, per_bucket in _with_overall(first_level).items():
        n = sum(per_bucket.values())
        for q in QUANTILES:
            if n:
                s = _Select(group, q, nearest_rank(n, q))
                s.descend(per_bucket)
                selects.append(s)
    shift = FIRST_SHIFT
    while shift > 0 and selects:
        finer = shift - LEVEL_BITS
        prefixes = sorted({s.prefix for s in selects if s.prefix is not None})
        level = (
            completed.filter(F.shiftright("lat", shift).isin(prefixes))
            .groupBy("f", F.shiftright("lat", finer).alias("b"))
            .count()
            .collect()
        )
        by_group: dict[str, dict[int, int]] = defaultdict(dict)
        for r in level:
            by_group[r["f"]][int(r["b"])] = int(r["count"])
        counts = _with_overall(by_group)
        for s in selects:
            within = {b: n for b, n in counts.get(s.group, {}).items() if b >> LEVEL_BITS == s.prefix}
            s.descend(within)
        shift = finer
    found = {(s.group, s.q): s.prefix for s in selects if s.prefix is not None}
    return _quantiles(found, [f for f in first_level if first_level[f]])


def _window_rows(
    spark: SparkSession, completed: DataFrame, ok_send: Any, windows: list[dict[str, Any]]
) -> DataFrame:
    """Per window: completions inside it by outcome (`ops` rows) and, over its ok sends, the
    longest gap between two and the first and last (a `gap` row)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    col = F.col
    # Each window once per second it touches: an equi-join on the second, then the exact bounds
    # (a join on the bounds alone would compare every completion with every window).
    spans = F.broadcast(
        spark.createDataFrame(
            [
                (i, second, float(w["start_s"]), float(w["end_s"]))
                for i, w in enumerate(windows)
                for second in range(math.floor(w["start_s"]), math.floor(w["end_s"]) + 1)
            ],
            "w INT, s LONG, start DOUBLE, end DOUBLE",
        )
    )
    inside = completed.join(
        spans, (F.floor(col("t")) == col("s")) & (col("t") >= col("start")) & (col("t") <= col("end"))
    )
    counts = _row(
        inside.groupBy("w", "code").count(), kind=F.lit("ops"), w=col("w"), code=col("code"), n=col("count")
    )
    ordered = Window.partitionBy("w").orderBy("t")
    gaps = (
        inside.filter(ok_send)
        .select("w", "t", (col("t") - F.lag("t").over(ordered)).alias("gap"))
        .groupBy("w")
        .agg(F.max("gap").alias("gap"), F.min("t").alias("lo"), F.max("t").alias("hi"))
    )
    return counts.unionByName(
        _row(gaps, kind=F.lit("gap"), w=col("w"), gap=col("gap"), lo=col("lo"), hi=col("hi"))
    )
