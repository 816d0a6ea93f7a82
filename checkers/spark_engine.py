"""The Spark engine: the reference checker's rules (checkers/reference.py) as DataFrame jobs.

The rules, terms and example fields are the reference's, to the letter; this module only says how
they are computed at scale. Its inputs are the Parquet form of the history (`checkers.parquet`):
operations (each invocation already paired with the next line of its process, which is sequential
work done once while converting) and reads (each record of an ok poll, with its process's position
epoch). The plan, shuffles in brackets:

1. *operations* [none but tiny global aggregates]: outcome counts, open and superseded invocations,
   malformed operations, the status rank of each send and its ack.
2. *by value* [by value, once]: sends and reads of each value side by side: status, first read,
   first failed send, never-read acks (lost-write / unseen against the broadcast max read offset
   of their partition), and the first sighting of each (value, position), whose count per value
   gives duplicates without another shuffle.
3. *by position* [by (topic, partition, offset), of first sightings only]: inconsistent offsets.
4. *by process* [by process]: reads in order within (process, epoch, topic-partition) for
   poll-skip and nonmonotonic-poll, and acks in order within (process, topic-partition) for
   nonmonotonic-send, in one window.

Only counts and at most `MAX_EXAMPLES` examples per anomaly, chosen by the catalogue's order, reach
the driver, all in one collect.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from checkers.catalogue import (
    BY_NAME,
    HISTORY_ANOMALIES,
    MAX_EXAMPLES,
    AnomalyResult,
    EngineResult,
    EngineStats,
    OutcomeCounts,
    empty_counts,
)
from workloads.history import ReadProblem

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ParquetForm:
    """Where a history's Parquet form is (any path Spark reads) and what converting it found."""

    operations_path: str
    reads_path: str
    ops: int
    problems: list[ReadProblem]
    orphans: int = 0
    first_orphan: int | None = None


# Status ranks, as in the reference: the best outcome over a value's send operations.
FAIL, INFO, OK = 0, 1, 2


# Keep null fields in JSON payloads: examples carry None where the reference has None.
_JSON = {"ignoreNullFields": "false"}
# Every anomaly's `order` is "index" first, then optionally topic, then integers: one sort key shape.
_KEY_INTS = 6


def _order_key(name: str) -> Column:
    """The catalogue's order of one anomaly as a struct shared by all: (index, topic, ints...)."""
    from pyspark.sql import functions as F

    order = list(BY_NAME[name].order)
    assert order[0] == "index", order
    topic = F.col("topic") if len(order) > 1 and order[1] == "topic" else F.lit(None).cast("string")
    rest = [f for f in order[1:] if f != "topic"]
    ints = [F.col(f).cast("long") for f in rest] + [F.lit(None).cast("long")] * (_KEY_INTS - len(rest))
    return F.struct(
        F.col("index").cast("long").alias("k0"),
        topic.alias("ks"),
        *[c.alias(f"k{i + 1}") for i, c in enumerate(ints)],
    )


class _Gather:
    """Anomaly rows and small figures from many DataFrames, gathered by one Spark action.

    On a small machine each Spark job and stage costs planning, code generation and scheduling that
    dwarf the work on small histories, so everything the driver needs comes back in one collect:
    figures as (key, n, JSON payload) rows from a few global aggregates, and every anomaly's count
    and MAX_EXAMPLES smallest examples from one window over the union of all anomaly rows.
    """

    def __init__(self) -> None:
        self.figures: list[DataFrame] = []
        self.anomalies: list[DataFrame] = []

    def aggregate(self, df: DataFrame, figures: dict[str, tuple[Column, Column | None]]) -> None:
        """One global aggregate of df: per key, how many rows match and the least `first` of them."""
        from pyspark.sql import functions as F

        aggs = []
        for i, (cond, first) in enumerate(figures.values()):
            aggs.append(F.count(F.when(cond, 1)).alias(f"n{i}"))
            if first is not None:
                aggs.append(F.min(F.when(cond, first)).alias(f"f{i}"))
        row = df.agg(*aggs)
        parts = []
        for i, (key, (_, first)) in enumerate(figures.items()):
            payload = (
                F.to_json(F.struct(F.col(f"f{i}").alias("v")), _JSON) if first is not None else F.lit(None)
            )
            parts.append(
                F.struct(
                    F.lit(key).alias("key"),
                    F.col(f"n{i}").alias("n"),
                    payload.cast("string").alias("payload"),
                )
            )
        self.figures.append(row.select(F.explode(F.array(*parts)).alias("x")).select("x.*"))

    def grouped(self, prefix: str, df: DataFrame, by: Column) -> None:
        """Row counts of df by `by`, keys prefix + str(value)."""
        from pyspark.sql import functions as F

        self.figures.append(
            df.groupBy(by.alias("g"))
            .agg(F.count(F.lit(1)).alias("n"))
            .select(
                F.concat(F.lit(prefix), F.col("g").cast("string")).alias("key"),
                "n",
                F.lit(None).cast("string").alias("payload"),
            )
        )

    def anomaly(self, name: str, df: DataFrame) -> None:
        from pyspark.sql import functions as F

        example = F.to_json(F.struct(*[F.col(f) for f in BY_NAME[name].example_fields]), _JSON)
        self.anomalies.append(
            df.select(F.lit(name).alias("name"), _order_key(name).alias("k"), example.alias("e"))
        )

    def collect(self) -> tuple[dict[str, int], dict[str, Any], dict[str, AnomalyResult]]:
        """(figures by key, first-payloads by key, anomalies by name)."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        found = self.anomalies[0]
        for part in self.anomalies[1:]:
            found = found.unionByName(part)
        w = Window.partitionBy("name").orderBy("k")
        top = (
            found.select(
                "name",
                "e",
                F.row_number().over(w).alias("rank"),
                F.count(F.lit(1)).over(Window.partitionBy("name")).alias("n"),
            )
            .filter(F.col("rank") <= MAX_EXAMPLES)
            .select(F.concat(F.lit("anomaly:"), F.col("name")).alias("key"), "n", F.col("e").alias("payload"))
        )
        union = top
        for part in self.figures:
            union = union.unionByName(part)
        counts: dict[str, int] = {}
        firsts: dict[str, Any] = {}
        anomalies: dict[str, AnomalyResult] = {}
        for row in union.collect():
            key, n, payload = row["key"], row["n"], row["payload"]
            if key.startswith("anomaly:"):
                result = anomalies.setdefault(key[len("anomaly:") :], {"count": int(n), "examples": []})
                result["examples"].append(json.loads(payload))
            else:
                counts[key] = int(n)
                if payload is not None:
                    firsts[key] = json.loads(payload)["v"]
        for name, result in anomalies.items():
            order = BY_NAME[name].order
            result["examples"].sort(key=lambda e: tuple(e[f] for f in order))
        return counts, firsts, anomalies


class SparkChecker:
    """One check of one history's Parquet form (checkers.parquet: operations and reads)."""

    def __init__(
        self,
        spark: SparkSession,
        operations_path: str,
        reads_path: str,
        *,
        ops: int,
        problems: list[ReadProblem],
        orphans: int = 0,
        first_orphan: int | None = None,
    ):
        self.spark = spark
        self.operations_path = operations_path
        self.reads_path = reads_path
        self.ops = ops
        self.problems = problems
        self.orphans = orphans
        self.first_orphan = first_orphan
        self.cached: list[DataFrame] = []

    def _cache(self, df: DataFrame) -> DataFrame:
        from pyspark import StorageLevel

        df = df.persist(StorageLevel.MEMORY_AND_DISK)
        self.cached.append(df)
        return df

    def run(self) -> EngineResult:
        try:
            return self._run()
        finally:
            for df in self.cached:
                df.unpersist()

    def _run(self) -> EngineResult:
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        col = F.col
        spark = self.spark
        operations = spark.read.parquet(self.operations_path)
        reads_all = spark.read.parquet(self.reads_path)
        out = _Gather()

        # 1. Operations (paired while converting): outcomes, pairing problems, malformed ops, acks.
        is_send = (col("f") == "send") & col("value").isNotNull()
        acked = (col("outcome") == "ok") & (col("offset") >= 0)
        figures: dict[str, tuple[Column, Column | None]] = {}
        for f in ("send", "poll", "assign"):
            for o in ("ok", "fail", "info", "open"):
                figures[f"op:{f}:{o}"] = ((col("f") == f) & (col("outcome") == o), None)
        figures["open"] = (
            col("next_index").isNull(),
            F.struct(col("invoke_index").alias("index"), "process", "f"),
        )
        figures["superseded"] = (
            (col("outcome") == "open") & col("next_index").isNotNull(),
            F.struct(col("next_index").alias("at"), "process", col("invoke_index").alias("index")),
        )
        figures["malformed:send"] = ((col("f") == "send") & col("value").isNull(), col("invoke_index"))
        figures["malformed:ack"] = (
            is_send & acked & (col("topic").isNull() | col("partition").isNull()),
            col("index"),
        )
        figures["acked"] = (is_send & acked & col("topic").isNotNull() & col("partition").isNotNull(), None)
        figures["malformed:poll"] = (
            (col("f") == "poll") & (col("outcome") == "ok") & col("bad_records"),
            col("index"),
        )
        out.aggregate(operations, figures)

        sends = operations.filter(is_send).select(
            "value",
            F.when(col("outcome") == "fail", FAIL).when(acked, OK).otherwise(INFO).alias("rank"),
            F.coalesce(acked & col("topic").isNotNull() & col("partition").isNotNull(), F.lit(False)).alias(
                "acked"
            ),
            "index",
            "invoke_index",
            "time",
            "process",
            "topic",
            "partition",
            "offset",
        )

        # Reads (records of ok completions of polls), well-formed ones.
        well_formed = (
            col("topic").isNotNull()
            & col("partition").isNotNull()
            & col("offset").isNotNull()
            & col("value").isNotNull()
        )
        out.aggregate(
            reads_all, {"malformed:record": (~well_formed, col("index")), "records_read": (well_formed, None)}
        )
        reads = reads_all.filter(well_formed)

        # 2. [by value] Sends and reads of each value, side by side.
        by_value = (
            sends.select(
                "value",
                F.lit(0).alias("kind"),
                "rank",
                "acked",
                "index",
                F.lit(0).alias("pos"),
                "invoke_index",
                "time",
                "process",
                "topic",
                "partition",
                "offset",
            )
            .unionByName(
                reads.select(
                    "value",
                    F.lit(1).alias("kind"),
                    F.lit(None).cast("int").alias("rank"),
                    F.lit(False).alias("acked"),
                    "index",
                    "pos",
                    F.lit(None).cast("long").alias("invoke_index"),
                    F.lit(None).cast("long").alias("time"),
                    "process",
                    "topic",
                    "partition",
                    "offset",
                )
            )
            .repartition("value")
        )
        is_read = col("kind") == 1
        values = self._cache(
            by_value.groupBy("value").agg(
                F.max("rank").alias("status"),
                F.min(F.when(col("rank") == FAIL, F.struct("index", "process"))).alias("first_fail"),
                F.min(
                    F.when(is_read, F.struct("index", "pos", "process", "topic", "partition", "offset"))
                ).alias("r"),
                F.collect_list(
                    F.when(
                        col("acked"),
                        F.struct("index", "invoke_index", "time", "process", "topic", "partition", "offset"),
                    )
                ).alias("acks"),
            )
        )
        first_read = values.filter(col("r").isNotNull()).select(
            col("r.index").alias("index"),
            col("r.process").alias("process"),
            col("r.topic").alias("topic"),
            col("r.partition").alias("partition"),
            col("r.offset").alias("offset"),
            "value",
            "status",
            col("first_fail.index").alias("send_index"),
            col("first_fail.process").alias("send_process"),
        )
        out.anomaly("aborted-read", first_read.filter(col("status") == FAIL))
        out.anomaly("phantom", first_read.filter(col("status").isNull()))

        # max_read(tp): the largest offset read, and the smallest poll index that read it.
        # (Two hash aggregates: a max over a struct would make Spark sort every read.)
        top = reads.groupBy("topic", "partition").agg(F.max("offset").alias("max_read_offset"))
        max_read = (
            reads.join(F.broadcast(top), ["topic", "partition"])
            .filter(col("offset") == col("max_read_offset"))
            .groupBy("topic", "partition", "max_read_offset")
            .agg(F.min("index").alias("max_read_index"))
        )
        never_read = (
            values.filter(col("r").isNull() & (F.size("acks") > 0))
            .select("value", F.explode("acks").alias("a"))
            .select("value", "a.*")
            .join(F.broadcast(max_read), ["topic", "partition"], "left")
        )
        lost = never_read.filter(col("max_read_offset") > col("offset"))
        out.anomaly("lost-write", lost)
        out.anomaly(
            "unseen",
            never_read.filter(col("max_read_offset").isNull() | (col("max_read_offset") <= col("offset"))),
        )
        out.grouped("lost_second:", lost, (col("time") / 1_000_000_000).cast("long"))

        # First sighting of each value at each position (same partitioning: no shuffle).
        sightings = self._cache(
            by_value.filter(is_read | col("acked"))
            .groupBy("value", "topic", "partition", "offset")
            # Fixed-width buffers (no min over a struct) keep this a hash aggregate, not a sort.
            .agg(F.min("index").alias("s_index"), F.min_by("process", "index").alias("s_process"))
            .select(
                "value",
                "topic",
                "partition",
                "offset",
                F.struct(col("s_index").alias("index"), col("s_process").alias("process")).alias("s"),
            )
        )
        out.anomaly(
            "duplicate",
            sightings.groupBy("value")
            .agg(
                F.count(F.lit(1)).alias("n"),
                F.min("s.index").alias("index"),
                F.sort_array(
                    F.collect_list(
                        F.struct(
                            "topic",
                            "partition",
                            "offset",
                            col("s.index").alias("index"),
                            col("s.process").alias("process"),
                        )
                    )
                ).alias("positions"),
            )
            .filter(col("n") > 1),
        )

        # 3. [by position]
        out.anomaly(
            "inconsistent-offsets",
            sightings.groupBy("topic", "partition", "offset")
            .agg(
                F.count(F.lit(1)).alias("n"),
                F.min("s.index").alias("index"),
                F.sort_array(
                    F.collect_list(
                        F.struct("value", col("s.index").alias("index"), col("s.process").alias("process"))
                    )
                ).alias("values"),
            )
            .filter(col("n") > 1),
        )

        # 4. [by process] Reads in order between position resets (their epoch, from the conversion),
        # and acks in order (epoch -1): one window.
        ordered = reads.select(
            "process",
            "epoch",
            "topic",
            "partition",
            "index",
            "pos",
            "offset",
            F.lit(None).cast("long").alias("value"),
        ).unionByName(
            sends.filter(col("acked")).select(
                "process",
                F.lit(-1).cast("long").alias("epoch"),
                "topic",
                "partition",
                "index",
                F.lit(0).alias("pos"),
                "offset",
                "value",
            )
        )
        wp = Window.partitionBy("process", "epoch", "topic", "partition").orderBy("index", "pos")
        pairs = self._cache(
            ordered.select(
                "*",
                F.lag("offset").over(wp).alias("prev_offset"),
                F.lag("index").over(wp).alias("prev_index"),
                F.lag("value").over(wp).alias("prev_value"),
            ).filter(
                col("prev_offset").isNotNull()
                & (
                    (
                        (col("epoch") >= 0)
                        & ((col("offset") > col("prev_offset") + 1) | (col("offset") <= col("prev_offset")))
                    )
                    | ((col("epoch") < 0) & (col("offset") < col("prev_offset")))
                )
            )
        )
        polled = pairs.filter(col("epoch") >= 0)
        out.anomaly(
            "poll-skip",
            polled.filter(col("offset") > col("prev_offset") + 1).withColumn(
                "skipped", col("offset") - col("prev_offset") - 1
            ),
        )
        out.anomaly("nonmonotonic-poll", polled.filter(col("offset") <= col("prev_offset")))
        out.anomaly("nonmonotonic-send", pairs.filter(col("epoch") < 0))

        counts, firsts, anomalies = out.collect()
        counts["ops"] = self.ops
        counts["orphans"] = self.orphans
        firsts["orphans"] = self.first_orphan
        return self._result(counts, firsts, anomalies)

    def _result(
        self, counts: dict[str, int], firsts: dict[str, Any], found: dict[str, AnomalyResult]
    ) -> EngineResult:
        stats: EngineStats = {
            "ops": counts.get("ops", 0),
            "sends": empty_counts(),
            "polls": empty_counts(),
            "assigns": empty_counts(),
            "records_read": counts.get("records_read", 0),
            "acked": counts.get("acked", 0),
            "lost_by_second": {},
        }
        by_f: dict[str, OutcomeCounts] = {
            "send": stats["sends"],
            "poll": stats["polls"],
            "assign": stats["assigns"],
        }
        lost_by_second: list[tuple[int, int]] = []
        for key, n in counts.items():
            if key.startswith("op:"):
                _, f, outcome = key.split(":")
                if outcome in by_f[f]:
                    by_f[f][outcome] += n  # type: ignore[literal-required]
            elif key.startswith("lost_second:"):
                lost_by_second.append((int(key.split(":")[1]), n))
        stats["lost_by_second"] = {str(s): n for s, n in sorted(lost_by_second)}

        anomalies: dict[str, AnomalyResult] = {
            name: found.get(name, {"count": 0, "examples": []}) for name in HISTORY_ANOMALIES
        }

        # Why the history cannot be trusted whole: the reference's reasons, in its order.
        incomplete = _problem_reasons(self.problems)
        if counts.get("open"):
            first = firsts["open"]
            incomplete.append(
                f"open-invocation: {counts['open']} client operation(s) never completed "
                f"(first: index {first['index']}, process {first['process']}, {first['f']})"
            )
        if counts.get("superseded"):
            first = firsts["superseded"]
            incomplete.append(
                f"unpaired: {counts['superseded']} invocation(s) while the process's previous one was open "
                f"(first: index {first['at']}, process {first['process']}, "
                f"open since index {first['index']})"
            )
        if counts.get("orphans"):
            incomplete.append(
                f"unpaired: {counts['orphans']} completion(s) without an invocation "
                f"(first: index {firsts['orphans']})"
            )
        reasons = {
            "malformed:send": "send without an integer value",
            "malformed:ack": "ok send without a topic and integer partition",
            "malformed:poll": "ok poll whose records are not a list",
            "malformed:record": "poll record without topic, partition, offset and value",
        }
        malformed = [(firsts[k], reason, counts[k]) for k, reason in reasons.items() if counts.get(k)]
        if malformed:
            total = sum(n for _, _, n in malformed)
            index, reason, _ = min(malformed, key=lambda m: m[0])
            incomplete.append(
                f"malformed-op: {total} malformed operation(s) (first: index {index}: {reason})"
            )
        return {"anomalies": anomalies, "stats": stats, "incomplete": incomplete}


def _problem_reasons(problems: list[ReadProblem]) -> list[str]:
    """Unreadable lines, worded as the reference words them."""
    reasons = []
    torn = [p for p in problems if p.torn_tail]
    bad = [p for p in problems if not p.torn_tail]
    if torn:
        reasons.append(
            f"torn-tail: the history ends with a torn line (line {torn[0].line_no}): the run was cut short"
        )
    if bad:
        reasons.append(
            f"malformed-line: {len(bad)} unreadable history line(s) (first: line {bad[0].line_no}: {bad[0].reason})"
        )
    return reasons


def check_parquet(
    spark: SparkSession,
    operations_path: str,
    reads_path: str,
    *,
    ops: int,
    problems: list[ReadProblem] | None = None,
    orphans: int = 0,
    first_orphan: int | None = None,
) -> EngineResult:
    """Check a history already in Parquet form (see checkers.parquet)."""
    checker = SparkChecker(
        spark,
        operations_path,
        reads_path,
        ops=ops,
        problems=problems or [],
        orphans=orphans,
        first_orphan=first_orphan,
    )
    return checker.run()
