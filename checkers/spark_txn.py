"""Transactions on Spark: the reference's transaction rules (checkers/txn_checks.py) as DataFrame jobs.

The Parquet form of the history (`checkers.parquet`) pairs every operation, transactions included
(`f` = txn, with their outcome and completion index), but does not carry their micro-operations,
so the transaction lines are read again from the history's text (a cheap filter of the lines that
name `"f":"txn"`) and joined with the paired operations. From them:

* `prepare` makes rows shaped like the Parquet form's: one *operation* per send of a transaction
  (f send, the transaction's outcome, acknowledged when it committed and the send has an offset;
  the transaction's completion index; no link to the process's previous ack) and one *read* per
  record of its polls (the completion index, the position among the transaction's reads; no link
  to a previous read). The engine (`checkers/spark_engine.py`) checks them together with the single
  sends and polls, so every value and position rule covers transactions exactly as the reference's;
* `judge` finds what only transactions have: precommitted-read and torn-transaction with joins,
  and the dependency edges (ww from each partition's order of sighted offsets, wr from what each
  transaction polled), which reach the driver aggregated to one per (src, dst, kind), for
  networkx (`checkers/txn_graph.py`); and poll-skip, which in a transactional history counts a
  gap only over records sighted somewhere (markers and aborted records leave gaps).

Only histories with transactions pay for this: one scan of the operations' `f` code says.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from checkers.catalogue import BY_NAME, MAX_EXAMPLES, POSITION, AnomalyResult, OutcomeCounts, empty_counts
from checkers.parquet_schema import F_CODES, OUTCOME_CODES, columns
from checkers.rules import poll_skip, precommitted_read, torn_transaction
from checkers.rules.rows import LinkedRead, Transaction, TxnRead
from checkers.spark_columns import SQL, columns_of, expr
from checkers.spark_lines import parsed_lines, whole_records
from checkers.spark_session import Persisted, broadcast, read_form
from checkers.txn_graph import Edge, cycles

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

_TXN_LINE = r'"f"\s*:\s*"txn"'
_TXN_WORDS = ('"txn"',)  # in every line _TXN_LINE matches: searched first
# What is read of a transaction's line: its micro-operations, sends and polls (with their records).
_MOP = pa.struct(columns("f", "topic", "partition", "value", "offset", "records"))
_TXN_FIELDS = pa.schema(columns("index", "f", ("mops", pa.list_(_MOP))))
_TXN = F_CODES.index("txn")
_SEND = F_CODES.index("send")
_FAIL = OUTCOME_CODES.index("fail")
_OK = OUTCOME_CODES.index("ok")


# The rules' rows over this module's frames: a transaction's read joined with its smallest write
# there (`w`), and a committed transaction's values read (`visible`) and lost (`lost`).
_TXN_READ = columns_of(TxnRead, index="`txn`", write_offset="`w`.`offset`", write_value="`w`.`value`")
_COMMITTED = columns_of(
    Transaction, index="`txn`", outcome="'ok'", n_visible="size(`visible`)", n_lost="size(`lost`)"
)


@dataclass
class TxnParts:
    """A history's transactions as Spark sees them (see `prepare`)."""

    operations: DataFrame  # rows of the Parquet form's operations: one per send of a transaction
    reads: DataFrame  # rows of its reads: one per record a transaction polled
    writes: DataFrame  # txn, process, outcome_code, topic, partition, value, offset (any outcome)
    txn_reads: DataFrame  # txn, process, outcome_code, topic, partition, offset, value, pos
    topics: list[str]  # topic names by id, those of the transactions added
    counts: OutcomeCounts  # transactions by outcome
    cached: Persisted

    def unpersist(self) -> None:
        self.cached.release()


def prepare(
    spark: SparkSession,
    history_path: str,
    operations_path: str,
    reads_path: str,
    topics: list[str] | None,
    kinds: list[str] | None = None,
) -> TxnParts | None:
    """The transactions of a history, or None when it has none (`kinds`: the operation kinds the
    conversion found, when it counted them; without `txn` among them no Spark job runs)."""
    if kinds is not None and "txn" not in kinds:
        return None
    from pyspark.sql import functions as F

    col = F.col
    operations = read_form(spark, operations_path)
    txns = operations.filter(col("f_code") == _TXN).select(
        "invoke_index",
        col("index").alias("done_index"),
        F.coalesce(col("index"), col("invoke_index")).alias("txn"),
        "process",
        "outcome_code",
        "time",
    )
    counts = {int(r["outcome_code"]): int(r["count"]) for r in txns.groupBy("outcome_code").count().collect()}
    if not counts:
        return None
    cached = Persisted()
    cache = cached.keep

    lines = cache(
        parsed_lines(spark, history_path, _TXN_LINE, _TXN_FIELDS, _TXN_WORDS).filter(
            (col("f") == "txn") & col("index").isNotNull()
        )
    )
    invoked = txns.join(
        lines.select(col("index").alias("invoke_index"), col("mops").alias("asked")), "invoke_index"
    )
    done = lines.select(col("index").alias("done_index"), col("mops").alias("done"))
    paired = cache(invoked.join(done, "done_index", "left"))

    # Writes: each send the invocation lists, with the offset its completion gives it (the same
    # position, the same send: history.txn.writes).
    asked = paired.select("*", F.posexplode("asked").alias("i", "m")).filter(col("m.f") == "send")
    answered = F.when(
        (col("i") < F.size(col("done")))
        & (F.element_at("done", col("i") + 1)["f"] == "send")
        & (F.element_at("done", col("i") + 1)["value"] == col("m.value"))
        & (F.element_at("done", col("i") + 1)["offset"] >= 0),
        F.element_at("done", col("i") + 1)["offset"],
    )
    writes = cache(
        asked.select(
            "txn",
            "invoke_index",
            "process",
            "outcome_code",
            "time",
            col("m.topic").alias("topic"),
            col("m.partition").alias("partition"),
            col("m.value").alias("value"),
            F.when(col("done").isNotNull(), answered).alias("offset"),
        )
    )
    # Reads: the records of the completion's polls, in order (one position across its polls).
    polled = (
        paired.filter(col("done").isNotNull())
        .select("txn", "process", "outcome_code", F.posexplode("done").alias("i", "m"))
        .filter((col("m.f") == "poll") & col("m.records").isNotNull())
        .select("txn", "process", "outcome_code", "i", F.posexplode("m.records").alias("j", "r"))
    )
    txn_reads = cache(
        whole_records(
            # "r.*": the record's topic, partition, offset and value (parquet_schema.RECORD)
            polled.select("txn", "process", "outcome_code", "i", "j", "r.*")
            .withColumn("pos", (F.row_number().over(_window()) - 1).cast("int"))
            .drop("i", "j")
        )
    )

    names = list(topics) if topics is not None else _names_in(spark, operations_path, reads_path)
    for row in writes.select("topic").union(txn_reads.select("topic")).distinct().collect():
        if row["topic"] is not None and row["topic"] not in names:
            names.append(row["topic"])
    ids = spark.createDataFrame([(name, i) for i, name in enumerate(names)], "topic STRING, topic_id LONG")

    def with_tp(df: DataFrame) -> DataFrame:
        tp = col("topic_id") * F.lit(1 << 32) + col("partition").cast("long") + F.lit(1 << 31)
        return df.join(broadcast(ids), "topic", "left").withColumn("tp", tp).drop("topic_id")

    acked = (col("outcome_code") == _OK) & col("offset").isNotNull()
    extra_operations = with_tp(writes).select(
        "invoke_index",
        "process",
        F.lit("send").alias("f"),
        "topic",
        "partition",
        "value",
        F.when(col("outcome_code") != OUTCOME_CODES.index("open"), col("txn")).alias("index"),
        "time",
        F.when(acked, col("offset")).alias("offset"),
        F.lit(_SEND).cast("byte").alias("f_code"),
        col("outcome_code").cast("byte").alias("outcome_code"),
        "tp",
    )
    extra_reads = with_tp(txn_reads).select(
        col("txn").alias("index"), "process", "pos", "topic", "partition", "offset", "value", "tp"
    )
    outcomes = empty_counts()
    for code, n in counts.items():
        outcomes[OUTCOME_CODES[code]] += n  # type: ignore[literal-required]
    return TxnParts(extra_operations, extra_reads, writes, txn_reads, names, outcomes, cached)


def _names_in(spark: SparkSession, operations_path: str, reads_path: str) -> list[str]:
    """Topic names by id (`tp` >> 32) from the Parquet form's data (a form without the list)."""
    from pyspark.sql import functions as F

    rows = (
        read_form(spark, operations_path)
        .select("tp", "topic")
        .unionByName(read_form(spark, reads_path).select("tp", "topic"))
        .filter(F.col("tp").isNotNull())
        .select(F.shiftright("tp", 32).alias("topic_id"), "topic")
        .distinct()
        .collect()
    )
    ids = {int(r["topic_id"]): r["topic"] for r in rows}
    return [ids.get(i, "") for i in range(max(ids, default=-1) + 1)]


def _window() -> Any:
    from pyspark.sql import Window

    return Window.partitionBy("txn").orderBy("i", "j")


def judge(
    spark: SparkSession, parts: TxnParts, operations_path: str, reads_path: str, topics: list[str]
) -> tuple[dict[str, AnomalyResult], dict[str, int]]:
    """precommitted-read, torn-transaction, G0, G1c and (transactional histories) poll-skip; and
    the statistics transactions add: acked sends and records read."""
    from pyspark.sql import functions as F

    col = F.col
    operations = read_form(spark, operations_path)
    standalone_reads = read_form(spark, reads_path).filter(
        col("tp").isNotNull() & col("offset").isNotNull() & col("value").isNotNull()
    )
    names = F.array(*[F.lit(t) for t in topics] or [F.lit(None).cast("string")])
    sighting = (*POSITION, "value")  # a record acknowledged or read, where it was

    def named(df: DataFrame) -> DataFrame:
        return df.withColumn("topic", F.element_at(names, F.shiftright("tp", 32).cast("int") + 1)).withColumn(
            "partition", (col("tp").bitwiseAND(F.lit(0xFFFFFFFF)) - F.lit(1 << 31)).cast("int")
        )

    standalone_acks = named(
        operations.filter(
            (col("f_code") == _SEND)
            & col("value").isNotNull()
            & (col("outcome_code") == _OK)
            & (col("offset") >= 0)
            & col("tp").isNotNull()
        ).select("tp", "offset", "value")
    ).select(*sighting)
    txn_acks = parts.writes.filter((col("outcome_code") == _OK) & col("offset").isNotNull()).select(*sighting)
    reads = named(standalone_reads.select("tp", "offset", "value")).select(*sighting)
    all_reads = reads.unionByName(parts.txn_reads.select(*sighting))
    sightings = standalone_acks.unionByName(txn_acks).unionByName(all_reads)

    found: dict[str, AnomalyResult] = {}

    # precommitted-read: a read at or past the transaction's own smallest write offset there.
    own = (
        parts.writes.filter(col("offset").isNotNull())
        .groupBy("txn", "topic", "partition")
        .agg(F.min(F.struct(col("offset"), col("value"))).alias("w"))
    )
    early = (
        parts.txn_reads.join(own, ["txn", "topic", "partition"])
        .filter(expr(precommitted_read.RULE.holds(SQL, _TXN_READ)))
        .groupBy("txn", "process")
        .agg(F.min(F.struct("topic", "partition", "offset", "value", "w")).alias("r"))
        .select(
            col("txn").alias("index"),
            "process",
            col("r.topic").alias("topic"),
            col("r.partition").alias("partition"),
            col("r.offset").alias("offset"),
            col("r.value").alias("value"),
            col("r.w.offset").alias("write_offset"),
            col("r.w.value").alias("write_value"),
        )
    )
    frames = {"precommitted-read": early}

    # torn-transaction: a committed transaction with a value read and an acknowledged one lost
    # (never read although some read of its partition went past its offset).
    read_values = all_reads.select("value").distinct().withColumn("read", F.lit(True))
    max_read = all_reads.groupBy("topic", "partition").agg(F.max("offset").alias("max_read"))
    committed = (
        parts.writes.filter(col("outcome_code") == _OK)
        .join(read_values, "value", "left")
        .join(max_read, ["topic", "partition"], "left")
    )
    lost = col("read").isNull() & col("offset").isNotNull() & (col("max_read") > col("offset"))
    torn = (
        committed.groupBy("txn", "process")
        .agg(
            F.sort_array(F.collect_list(F.when(col("read"), col("value")))).alias("visible"),
            F.sort_array(F.collect_list(F.when(lost, col("value")))).alias("lost"),
        )
        .filter(expr(torn_transaction.RULE.holds(SQL, _COMMITTED)))
        .select(col("txn").alias("index"), "process", "visible", "lost")
    )
    frames["torn-transaction"] = torn

    # The dependency edges between the graph's transactions (committed, or may have).
    writer = (
        parts.writes.filter(col("outcome_code") != _FAIL).groupBy("value").agg(F.min("txn").alias("writer"))
    )
    order = sightings.groupBy(*POSITION).agg(F.min("value").alias("value")).join(writer, "value")
    from pyspark.sql import Window

    by_tp = Window.partitionBy("topic", "partition").orderBy("offset")
    # ww: each record's writer -> the writer of the next record of its partition.
    overwritten = order.select(
        *sighting,
        "writer",
        F.lead("offset").over(by_tp).alias("next_offset"),
        F.lead("value").over(by_tp).alias("next_value"),
        F.lead("writer").over(by_tp).alias("next_writer"),
    ).filter(col("next_writer").isNotNull() & (col("writer") != col("next_writer")))
    # wr: a record's writer -> the transaction that read it.
    read = (
        parts.txn_reads.filter(col("outcome_code") != _FAIL)
        .join(writer, "value")
        .filter(col("writer") != col("txn"))
    )
    no_offset = F.lit(None).cast("long")
    ww = _edges(overwritten, "ww", "writer", "next_writer", col("next_offset"), col("next_value"))
    wr = _edges(read, "wr", "writer", "txn", no_offset, no_offset)
    edges = [
        Edge(
            int(r["src"]),
            int(r["dst"]),
            r["kind"],
            r["e"]["topic"],
            int(r["e"]["partition"]),
            int(r["e"]["offset"]),
            int(r["e"]["value"]),
            r["e"]["next_offset"],
            r["e"]["next_value"],
        )  # fmt: skip
        for r in ww.unionByName(wr)
        .groupBy("src", "dst", "kind")
        .agg(F.min(F.struct("topic", "partition", "offset", "value", "next_offset", "next_value")).alias("e"))
        .collect()
    ]
    found.update(cycles(edges))

    # poll-skip in a transactional history: a linked gap over sighted records only.
    sighted = sightings.select(*POSITION).distinct()
    ranked = sighted.withColumn("rank", F.dense_rank().over(by_tp))
    linked = named(
        standalone_reads.filter(
            col("prev_offset").isNotNull() & (col("offset") > col("prev_offset") + 1)
        ).select("index", "process", "tp", "offset", "prev_offset", "prev_index")
    )
    at = ranked.select(*POSITION, col("rank").alias("r"))
    before = ranked.select("topic", "partition", col("offset").alias("prev_offset"), col("rank").alias("pr"))
    skips = (
        linked.join(at, list(POSITION))
        .join(before, ["topic", "partition", "prev_offset"])
        .withColumn("skipped", col("r") - col("pr") - 1)
        .filter(expr(poll_skip.RULE.holds(SQL, columns_of(LinkedRead))))
    )
    frames["poll-skip"] = skips
    gathered, figures = _gather(frames, {"acked": txn_acks, "records_read": parts.txn_reads})
    found.update(gathered)
    return found, figures


def _edges(
    rows: DataFrame, kind: str, src: str, dst: str, next_offset: Column, next_value: Column
) -> DataFrame:
    """`rows` as dependency edges of `kind` from transaction column `src` to `dst`, in the columns of
    `txn_graph.Edge` (the same for every kind, so that the kinds' edges are one union)."""
    from pyspark.sql import functions as F

    return rows.select(
        F.col(src).alias("src"),
        F.col(dst).alias("dst"),
        F.lit(kind).alias("kind"),
        "topic",
        "partition",
        "offset",
        "value",
        next_offset.alias("next_offset"),
        next_value.alias("next_value"),
    )


def _gather(
    anomalies: dict[str, DataFrame], counted: dict[str, DataFrame]
) -> tuple[dict[str, AnomalyResult], dict[str, int]]:
    """Every anomaly's count and MAX_EXAMPLES smallest examples (the catalogue's order), and the
    row counts of `counted`, in one Spark action (each action costs seconds on a loaded machine)."""
    import json

    from pyspark.sql import Window
    from pyspark.sql import functions as F

    col = F.col
    parts = []
    for name, df in anomalies.items():
        order = list(BY_NAME[name].order)
        ints = [col(f).cast("long") for f in order if f != "topic"]
        topic = col("topic") if "topic" in order else F.lit(None).cast("string")
        key = F.struct(ints[0].alias("k0"), topic.alias("ks"), *[
            (ints[i] if i < len(ints) else F.lit(None).cast("long")).alias(f"k{i}") for i in range(1, 6)
        ])  # fmt: skip
        example = F.to_json(
            F.struct(*[col(f) for f in BY_NAME[name].example_fields]), {"ignoreNullFields": "false"}
        )
        parts.append(df.select(F.lit(name).alias("name"), key.alias("k"), example.alias("e")))
    rows = parts[0]
    for part in parts[1:]:
        rows = rows.unionByName(part)
    ranked = rows.select(
        "name",
        "e",
        F.row_number().over(Window.partitionBy("name").orderBy("k")).alias("rank"),
        F.count(F.lit(1)).over(Window.partitionBy("name")).alias("n"),
    ).filter(col("rank") <= MAX_EXAMPLES)
    for name, df in counted.items():
        ranked = ranked.unionByName(
            df.agg(F.count(F.lit(1)).alias("n")).select(
                F.lit(name).alias("name"),
                F.lit(None).cast("string").alias("e"),
                F.lit(0).alias("rank"),
                "n",
            )
        )
    found: dict[str, AnomalyResult] = {name: {"count": 0, "examples": []} for name in anomalies}
    figures: dict[str, int] = {}
    for row in ranked.collect():
        if row["name"] in counted:
            figures[row["name"]] = int(row["n"])
        else:
            found[row["name"]]["count"] = int(row["n"])
            found[row["name"]]["examples"].append(json.loads(row["e"]))
    for name, result in found.items():
        result["examples"].sort(key=lambda e: tuple(e[f] for f in BY_NAME[name].order))
    return found, figures


def merge_into(
    result: Any, parts: TxnParts, found: dict[str, AnomalyResult], figures: dict[str, int]
) -> None:
    """Put the transaction rules' findings and figures into the engine's result (poll-skip keeps
    the count of group members the consumer-group rules found)."""
    anomalies = result["anomalies"]
    for name, found_result in found.items():
        members = anomalies.get(name, {}).get("members")
        anomalies[name] = dict(found_result)
        if members is not None:
            anomalies[name]["members"] = members
    stats = result["stats"]
    stats["txns"] = dict(parts.counts)
    stats["acked"] += figures["acked"]
    stats["records_read"] += figures["records_read"]
