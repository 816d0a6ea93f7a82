"""The Spark engine: the reference checker's rules (checkers/reference.py) as DataFrame jobs.

The rules, terms and example fields are the reference's, to the letter; this module only says how
they are computed at scale. Its inputs are the Parquet form of the history (`checkers.parquet`):
operations (each invocation already paired with the next line of its process) and reads (each
record of an ok poll). The sequential, per-process work is done once while converting, in one
streaming pass: the pairing, each read's previous read by its process of its partition in the same
position epoch, each ack's previous ack by its process on its partition, the outcome counts. What
is left for Spark is relational, in three actions, each one collect of small results:

1. the per-process anomalies (poll-skip and nonmonotonic-poll from one filter over reads,
   nonmonotonic-send from one over operations), and *by value* [the one big shuffle: sends and
   reads, partitioned by value, one hash aggregate]: per value the OR of what happened to it (read,
   acked, sent and failed / info / ok: its status) and its least and greatest sighting position,
   which differ exactly when it is a duplicate. The result is cached; its flag counts come back;
2. *by position* [a shuffle of one row per value]: each value's position (all positions, gathered,
   for the few duplicates) grouped by position: two values at one position are inconsistent
   offsets. Beside it, the examples of the per-value anomalies, gathered only for the candidate
   values (broadcast when few) from acks and reads: first reads (aborted-read, phantom), first
   failed sends, never-read acks against max_read(tp) (lost-write, unseen), duplicate positions;
3. (when there are any) the examples of inconsistent offsets, gathered for their positions only.

Big scans read numeric columns only (`tp` stands for topic and partition; `f_code`,
`outcome_code`); topic names are put back on examples from the conversion's list. Every count and
at most `MAX_EXAMPLES` examples per anomaly, chosen by the catalogue's order, reach the driver.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from functools import reduce
from typing import TYPE_CHECKING, Any

from checkers.catalogue import (
    BY_NAME,
    HISTORY_ANOMALIES,
    MAX_EXAMPLES,
    MEMBER_COUNTED,
    AnomalyResult,
    EngineResult,
    EngineStats,
    OutcomeCounts,
    empty_counts,
)
from checkers.parquet_schema import F_CODES, OUTCOME_CODES
from checkers.rules import lost_write, of_row
from checkers.rules.rows import (
    FirstRead,
    LinkedAck,
    LinkedRead,
    NeverReadAck,
    SightedPosition,
    SightedValue,
    ValuePositions,
)
from checkers.spark_columns import SQL, columns_of, expr
from checkers.spark_session import Persisted, broadcast, read_form
from checkers.timeline import Point
from history.format import ReadProblem

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
    figures: dict[str, Any] | None = None
    topics: list[str] | None = None
    max_time: int | None = None  # the largest `time` of any line
    nemesis: list[list[Any]] | None = None  # the nemesis ops: [index, time, type, f, value]
    ok_sends_in_order: bool = False  # `prev_ok_time` is each ok send's predecessor in time
    latency: list[Point] | None = None  # the report's latency sample, when the conversion took it
    lines_path: str | None = None  # where some lines start (`parquet_lines.line_marks`), when known


# Candidate sets up to this many rows are broadcast to the joins that gather their examples.
BROADCAST_ROWS = 1_000_000

# What happened to a value, as bits OR-ed over its sends and reads: its status (the best outcome
# over its send operations, as in the reference: ok > info = open > fail) is its highest SENT_ bit.
READ, ACKED, SENT_FAIL, SENT_INFO, SENT_OK = 1, 2, 4, 8, 16


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


def _flag(name: str) -> str:
    """The column that says an anomaly's rule holds for a row ("is_lost_write")."""
    return "is_" + name.replace("-", "_").lower()


def _order_key_sql(name: str, example: dict[str, str]) -> str:
    """`_order_key` as SQL over an example's fields."""
    order = list(BY_NAME[name].order)
    assert order[0] == "index", order
    topic = example["topic"] if len(order) > 1 and order[1] == "topic" else "CAST(NULL AS STRING)"
    rest = [f"CAST({example[f]} AS BIGINT)" for f in order[1:] if f != "topic"]
    rest += ["CAST(NULL AS BIGINT)"] * (_KEY_INTS - len(rest))
    parts = [f"'k0', CAST({example['index']} AS BIGINT)", f"'ks', {topic}"]
    parts += [f"'k{i + 1}', {c}" for i, c in enumerate(rest)]
    return f"named_struct({', '.join(parts)})"


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

    def aggregate_sum(self, df: DataFrame, key: str, what: Column) -> None:
        """One figure: the sum of `what` over df (0 when nothing to sum)."""
        from pyspark.sql import functions as F

        self.figures.append(
            df.agg(F.coalesce(F.sum(what), F.lit(0)).cast("long").alias("n")).select(
                F.lit(key).alias("key"), "n", F.lit(None).cast("string").alias("payload")
            )
        )

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

    def classify(self, kind: type, df: DataFrame, row: Any = None) -> None:
        """Each row of df (which has every field of `kind` as a column, or the SQL `row` gives
        for it) into the anomalies of the kind's rules that hold for it (`checkers/rules/`), in one
        scan: each rule's classification and example are its own, as SQL."""
        from pyspark.sql import functions as F

        row = row if row is not None else columns_of(kind)
        found = []
        for rule in of_row(kind):
            example = rule.example_of(SQL, row)
            fields = ", ".join(f"{SQL.lit(f)}, {example[f]}" for f in rule.example_fields)
            found.append(
                f"IF({rule.holds(SQL, row)}, named_struct('name', {SQL.lit(rule.name)}, "
                f"'k', {_order_key_sql(rule.name, example)}, "
                f"'e', to_json(named_struct({fields}), map('ignoreNullFields', 'false'))), NULL)"
            )
        if found:
            # Only the rows some rule holds for reach the array and its `filter` (a higher-order
            # function: evaluated row by row, outside the generated code), e.g. the few
            # nonmonotonic acks among millions of linked ones.
            held = " OR ".join(f"({rule.holds(SQL, row)})" for rule in of_row(kind))
            x = F.expr(f"explode(filter(array({', '.join(found)}), x -> x IS NOT NULL))")
            self.anomalies.append(df.filter(F.expr(held)).select(x.alias("x")).select("x.name", "x.k", "x.e"))

    def collect(self) -> tuple[dict[str, int], dict[str, Any], dict[str, AnomalyResult]]:
        """(figures by key, first-payloads by key, anomalies by name)."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        parts = list(self.figures)
        if self.anomalies:
            found = self.anomalies[0]
            for part in self.anomalies[1:]:
                found = found.unionByName(part)
            w = Window.partitionBy("name").orderBy("k")
            parts.append(
                found.select(
                    "name",
                    "e",
                    F.row_number().over(w).alias("rank"),
                    F.count(F.lit(1)).over(Window.partitionBy("name")).alias("n"),
                )
                .filter(F.col("rank") <= MAX_EXAMPLES)
                .select(
                    F.concat(F.lit("anomaly:"), F.col("name")).alias("key"), "n", F.col("e").alias("payload")
                )
            )
        if not parts:
            return {}, {}, {}
        union = parts[0]
        for part in parts[1:]:
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


@dataclass(eq=False)
class SparkChecker:
    """One check of one history's Parquet form (checkers.parquet: operations and reads)."""

    spark: SparkSession
    form: ParquetForm
    # Rows of a history's transactions (checkers/spark_txn.py): their sends as operations, the
    # records they polled as reads; checked with the others by every value and position rule.
    extra: tuple[DataFrame, DataFrame] | None = None
    persisted: Persisted = field(default_factory=Persisted, init=False)

    def run(self) -> EngineResult:
        try:
            return self._run()
        finally:
            self.persisted.release()

    def _broadcast_if_small(self, df: DataFrame, rows: int) -> DataFrame:

        return broadcast(df) if rows <= BROADCAST_ROWS else df

    def _topics(self, operations: DataFrame, reads: DataFrame) -> list[str]:
        """Topic names by topic id (`tp` >> 32): from the conversion, else from the data."""
        if self.form.topics is not None:
            return self.form.topics
        return _topic_names(operations, reads)

    def _run(self) -> EngineResult:
        from pyspark.sql import functions as F

        col = F.col
        spark = self.spark
        operations = read_form(spark, self.form.operations_path)
        reads_all = read_form(spark, self.form.reads_path)
        figures = self.form.figures if self.form.figures is not None else spark_figures(operations, reads_all)
        if self.extra is not None:
            operations = operations.unionByName(self.extra[0], allowMissingColumns=True)
            reads_all = reads_all.unionByName(self.extra[1], allowMissingColumns=True)
        names = F.array(
            *[F.lit(t) for t in self._topics(operations, reads_all)] or [F.lit(None).cast("string")]
        )

        def named(df: DataFrame) -> DataFrame:
            """df (with `tp`) with its topic and partition, which examples name (no join needed)."""
            topic = F.element_at(names, F.shiftright("tp", 32).cast("int") + 1)
            partition = (F.col("tp").bitwiseAND(F.lit(0xFFFFFFFF)) - F.lit(1 << 31)).cast("int")
            return df.withColumn("topic", topic).withColumn("partition", partition)

        # --- Action 1: the per-process anomalies, and the per-value aggregate --------------------
        out = _Gather()
        # Numeric columns only in the big scans (strings cost Spark more to read and compare).
        is_send = (col("f_code") == F_CODES.index("send")) & col("value").isNotNull()
        outcome = col("outcome_code")
        acked = (outcome == OUTCOME_CODES.index("ok")) & (col("offset") >= 0)
        # An ack: an acked send with a topic and partition (`tp` is null without either).
        ack = is_send & acked & col("tp").isNotNull()
        # Linked acks (nonmonotonic-send): the conversion linked each ack to its process's
        # previous ack on its tp.
        out.classify(
            LinkedAck,
            named(
                operations.filter(ack & col("prev_offset").isNotNull()).select(
                    "index", "process", "tp", "offset", "value", "prev_index", "prev_offset", "prev_value"
                )
            ),
        )
        # Reads: records of ok completions of polls, the well-formed ones.
        well_formed = col("tp").isNotNull() & col("offset").isNotNull() & col("value").isNotNull()
        reads = reads_all.filter(well_formed)
        # Linked reads (poll-skip, nonmonotonic-poll): each read was linked to its process's
        # previous read of its tp in the same position epoch while converting; the read of the next
        # offset is the normal case (no row).
        linked = col("prev_offset").isNotNull() & (col("offset") != col("prev_offset") + 1)
        out.classify(
            LinkedRead,
            named(
                reads.filter(linked).select(
                    "index",
                    "process",
                    "tp",
                    "offset",
                    "prev_offset",
                    "prev_index",
                    (col("offset") - col("prev_offset") - 1).alias("skipped"),
                )
            ),
        )

        # [by value, the one big shuffle] Per value, the OR of what happened to it (bits: read,
        # acked, sent and failed / info / ok), and its least and greatest sighting position, which
        # differ exactly when it was sighted at two positions. Fixed-width buffers only (a hash
        # aggregate), and partitioned by value before it (no map-side partial aggregation, which
        # would not reduce: a value is sent once and read a few times, far apart).
        send_bits = (
            F.when(outcome == OUTCOME_CODES.index("fail"), SENT_FAIL)
            .when(acked, SENT_OK)
            .otherwise(SENT_INFO)
        )
        values = self.persisted.keep(
            operations.filter(is_send)
            .select(
                "value",
                (send_bits + F.when(ack, ACKED).otherwise(0)).cast("int").alias("bits"),
                F.when(ack, col("tp")).alias("tp"),
                F.when(ack, col("offset")).alias("offset"),
            )
            .unionByName(reads.select("value", F.lit(READ).alias("bits"), "tp", "offset"))
            .repartition("value")
            .groupBy("value")
            .agg(
                F.bit_or("bits").alias("bits"),
                F.min("tp").alias("tp"),
                F.max("tp").alias("tp_hi"),
                F.min("offset").alias("offset"),
                F.max("offset").alias("offset_hi"),
            )
            .select(
                "value",
                "bits",
                "tp",
                "offset",
                F.coalesce(
                    (col("tp") != col("tp_hi")) | (col("offset") != col("offset_hi")), F.lit(False)
                ).alias("duplicate"),
            )
        )
        bits = col("bits")
        has = lambda bit: bits.bitwiseAND(F.lit(bit)) != 0  # noqa: E731
        # Per value, each of its rules (`SightedValue`); and the facts the rows of other kinds need:
        # acked and never read (`NeverReadAck`), sighted at several positions (its sightings).
        value_row = columns_of(
            SightedValue,
            read=f"((`bits` & {READ}) != 0)",
            sent_fail=f"((`bits` & {SENT_FAIL}) != 0)",
            sent_info=f"((`bits` & {SENT_INFO}) != 0)",
            sent_ok=f"((`bits` & {SENT_OK}) != 0)",
            several_positions="`duplicate`",
        )
        value_rules = of_row(SightedValue)
        flags = {_flag(r.name): expr(r.holds(SQL, value_row)) for r in value_rules}
        flags["never_read"] = ~has(READ) & has(ACKED)
        flags["several"] = col("duplicate")
        out.aggregate(values, {f"values:{k}": (c, None) for k, c in flags.items()})
        counts, firsts, anomalies = out.collect()
        counts.update(figures["counts"])
        firsts.update(figures["firsts"])

        # --- Action 2: by position, and the examples of the per-value anomalies ----------------
        out = _Gather()
        n = {k: counts.get(f"values:{k}", 0) for k in flags}
        candidates = sum(n.values())
        acks = operations.filter(ack).select(
            "value", "tp", "offset", "index", "process", "invoke_index", "time"
        )
        sighted = reads.select("value", "tp", "offset", "index", "pos", "process")
        if candidates:
            cand = self._broadcast_if_small(
                values.filter(reduce(lambda a, b: a | b, flags.values())).select(
                    "value", *[c.alias(k) for k, c in flags.items()]
                ),
                candidates,
            )
            cand_reads = self.persisted.keep(named(sighted.join(cand, "value")))
            cand_acks = self.persisted.keep(named(acks.join(cand, "value")))
        # The examples of a value's rules: from its first read (and first failed send), or from
        # its positions.
        first_flags = [_flag(r.name) for r in value_rules if r.example_row is FirstRead and n[_flag(r.name)]]
        if first_flags:
            first_read = (
                cand_reads.filter(reduce(lambda a, b: a | b, [col(f) for f in first_flags]))
                .groupBy("value", *first_flags)
                .agg(F.min(F.struct("index", "pos", "process", "topic", "partition", "offset")).alias("r"))
                .select("value", *first_flags, "r.*")
            )
            fails = operations.filter(is_send & (outcome == OUTCOME_CODES.index("fail"))).select(
                "value", "index", "process"
            )
            first_fail = (
                fails.join(first_read.select("value"), "value")
                .groupBy("value")
                .agg(F.min("index").alias("send_index"), F.min_by("process", "index").alias("send_process"))
            )
            with_send = first_read.join(first_fail, "value", "left")
            for rule in value_rules:
                if _flag(rule.name) in first_flags:
                    out.anomaly(rule.name, with_send.filter(col(_flag(rule.name))))
        if n["never_read"]:
            # max_read(tp): the largest offset read, then the smallest poll index that read it (at
            # that offset): two hash aggregates over two narrow scans. The least (-offset, index)
            # as one aggregate of a struct is a sort-based aggregate: it sorted every read (10M
            # operations: 2.8 CPU s of tasks and 2.2 s of collections, against 1.2 and 0.1).
            top = reads.groupBy("tp").agg(F.max("offset").alias("offset"))
            max_read = (
                reads.select("tp", "offset", "index")
                .join(broadcast(top), ["tp", "offset"])
                .groupBy("tp", "offset")
                .agg(F.min("index").alias("max_read_index"))
                .select("tp", col("offset").alias("max_read_offset"), "max_read_index")
            )
            # Kept: its two uses would otherwise scan the reads for max_read twice each.
            never_read = self.persisted.keep(
                cand_acks.filter(col("never_read")).join(broadcast(max_read), "tp", "left")
            )
            out.classify(NeverReadAck, never_read)
            lost = never_read.filter(expr(lost_write.RULE.holds(SQL, columns_of(NeverReadAck))))
            out.grouped("lost_second:", lost, (col("time") / 1_000_000_000).cast("long"))
        # The first sighting of each (value, position) of the values sighted at several positions.
        positions = values.filter(~col("duplicate") & col("tp").isNotNull()).select("tp", "offset", "value")
        if n["several"]:
            fields = ["value", "tp", "topic", "partition", "offset", "index", "process"]
            sightings = self.persisted.keep(
                cand_acks.filter(col("several"))
                .select(*fields)
                .unionByName(cand_reads.filter(col("several")).select(*fields))
                .groupBy("value", "tp", "topic", "partition", "offset")
                .agg(F.min("index").alias("s_index"), F.min_by("process", "index").alias("s_process"))
            )
            by_value = (
                sightings.groupBy("value").agg(
                    F.min("s_index").alias("index"),
                    F.sort_array(
                        F.collect_list(
                            F.struct(
                                "topic",
                                "partition",
                                "offset",
                                col("s_index").alias("index"),
                                col("s_process").alias("process"),
                            )
                        )
                    ).alias("positions"),
                )
            ).join(cand.select("value", *[_flag(r.name) for r in value_rules]), "value")
            for rule in value_rules:
                if rule.example_row is ValuePositions and n[_flag(rule.name)]:
                    out.anomaly(rule.name, by_value.filter(col(_flag(rule.name))))
            positions = positions.unionByName(sightings.select("tp", "offset", "value"))
        # [by position] Positions sighted with two or more distinct values (each value once here),
        # each with its rules (`SightedPosition`).
        position_rules = of_row(SightedPosition)
        several_values = columns_of(SightedPosition, several_values="true")
        # Partitioned by position before it, as by value: a position has one value or a few, so a
        # map-side partial aggregate would not reduce, only cost (10M operations: the map side
        # took 3.1 CPU s with it, 1.4 without, and shuffles a third less).
        inconsistent = self.persisted.keep(
            positions.repartition("tp", "offset")
            .groupBy("tp", "offset")
            .agg(F.min("value").alias("lo"), F.max("value").alias("hi"))
            .filter(col("lo") != col("hi"))
            .select(
                "tp",
                "offset",
                *[expr(r.holds(SQL, several_values)).alias(_flag(r.name)) for r in position_rules],
            )
        )
        out.aggregate(
            inconsistent, {f"positions:{r.name}": (col(_flag(r.name)), None) for r in position_rules}
        )
        counts2, _, anomalies2 = out.collect()
        counts.update(counts2)
        anomalies.update(anomalies2)

        # --- Action 3: examples of inconsistent offsets, when there are any --------------------
        held = [r for r in position_rules if counts.get(f"positions:{r.name}", 0)]
        if held:
            out = _Gather()
            at = self._broadcast_if_small(
                inconsistent.filter(reduce(lambda a, b: a | b, [col(_flag(r.name)) for r in held])),
                sum(counts[f"positions:{r.name}"] for r in held),
            )
            fields = ["value", "tp", "offset", "index", "process"]
            seen = named(
                acks.select(*fields)
                .unionByName(sighted.select(*fields))
                .join(at.drop("lo", "hi"), ["tp", "offset"])
                .groupBy("tp", "offset", "value", *[_flag(r.name) for r in held])
                .agg(F.min("index").alias("s_index"), F.min_by("process", "index").alias("s_process"))
            )
            by_position = seen.groupBy(
                "tp", "topic", "partition", "offset", *[_flag(r.name) for r in held]
            ).agg(
                F.min("s_index").alias("index"),
                F.sort_array(
                    F.collect_list(
                        F.struct("value", col("s_index").alias("index"), col("s_process").alias("process"))
                    )
                ).alias("values"),
            )
            for rule in held:
                out.anomaly(rule.name, by_position.filter(col(_flag(rule.name))))
            _, _, anomalies3 = out.collect()
            anomalies.update(anomalies3)

        counts["ops"] = self.form.ops
        counts["orphans"] = self.form.orphans
        firsts["orphans"] = self.form.first_orphan
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
            "txns": empty_counts(),  # counted by checkers/spark_txn.py, merged in by checkers/spark.py
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
        # Which poll anomalies are group members' needs the group operations' own fields: like the
        # group anomalies, counted by checkers/spark_groups.py and merged in by checkers/spark.py.
        for name in MEMBER_COUNTED:
            anomalies[name]["members"] = 0
        # Cycles between transactions are found by checkers/spark_txn.py (with `wr_only`), merged in
        # by checkers/spark.py; a history without transactions has none.
        anomalies["G1c"]["wr_only"] = 0

        # Why the history cannot be trusted whole: the reference's reasons, in its order.
        incomplete = _problem_reasons(self.form.problems)
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


def _topic_names(operations: DataFrame, reads: DataFrame) -> list[str]:
    """Topic names by topic id (`tp` >> 32), from the data (a Parquet form without the list: the
    names are a handful of strings)."""
    from pyspark.sql import functions as F

    rows = (
        operations.select("tp", "topic")
        .unionByName(reads.select("tp", "topic"))
        .filter(F.col("tp").isNotNull())
        .select(F.shiftright("tp", 32).alias("topic_id"), "topic")
        .distinct()
        .collect()
    )
    names = dict((int(r["topic_id"]), r["topic"]) for r in rows)
    return [names.get(i, "") for i in range(max(names, default=-1) + 1)]


def topic_names(spark: SparkSession, form: ParquetForm) -> list[str]:
    """A Parquet form's topic names by topic id."""
    return _topic_names(read_form(spark, form.operations_path), read_form(spark, form.reads_path))


def check_parquet(
    spark: SparkSession, form: ParquetForm, extra: tuple[DataFrame, DataFrame] | None = None
) -> EngineResult:
    """Check a history already in Parquet form (see checkers.parquet).

    `form.figures` are the outcome counts and malformed operations the conversion counted
    (`checkers.parquet_figures.Figures`); without them Spark counts them (`spark_figures`).
    `extra`: more operations and reads to check with the form's (a history's transactions,
    `checkers.spark_txn.prepare`).
    """
    return SparkChecker(spark, form, extra).run()


def spark_figures(operations: DataFrame, reads: DataFrame) -> dict[str, Any]:
    """The figures of `checkers.parquet_figures.Figures`, counted by Spark: {"counts": .., "firsts": ..}."""
    from pyspark.sql import functions as F

    col = F.col
    out = _Gather()
    is_send = (col("f") == "send") & col("value").isNotNull()
    acked = (col("outcome") == "ok") & (col("offset") >= 0)
    ack = is_send & acked & col("tp").isNotNull()
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
    figures["malformed:ack"] = (is_send & acked & col("tp").isNull(), col("index"))
    figures["acked"] = (ack, None)
    figures["malformed:poll"] = (
        (col("f") == "poll") & (col("outcome") == "ok") & col("bad_records"),
        col("index"),
    )
    out.aggregate(operations, figures)
    well_formed = col("tp").isNotNull() & col("offset").isNotNull() & col("value").isNotNull()
    out.aggregate(
        reads, {"malformed:record": (~well_formed, col("index")), "records_read": (well_formed, None)}
    )
    counts, firsts, _ = out.collect()
    return {"counts": {k: n for k, n in counts.items() if n}, "firsts": firsts}
