"""History -> Parquet with Spark's JSON reader, for histories on filesystems only Spark reaches.

Produces the same two datasets as `checkers.parquet` (which is several times faster for local
files). Spark cannot say on which line a bad line was, so such lines are reported by count and
reason without a line number; the cache (`<history>.parquet/` beside the history) is reused while
it is newer than the history.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from checkers.parquet_schema import F_CODES, FORMAT_VERSION, META, OUTCOME_CODES, cache_name
from checkers.spark_engine import ParquetForm, spark_figures
from history import pairing
from history.format import CLIENT_FS, OP_TYPES, ReadProblem
from history.txn import MOP_FS

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger(__name__)

JSON_SCHEMA = (
    "index BIGINT, time BIGINT, process STRING, type STRING, f STRING, topic STRING, partition INT, "
    "value STRING, offset BIGINT, records ARRAY<STRUCT<topic: STRING, partition: INT, offset: BIGINT, "
    "value: BIGINT>>, mops ARRAY<STRUCT<f: STRING, topic: STRING, partition: INT, value: STRING>>, "
    "_corrupt_record STRING"
)


def _dest(path: str) -> str:
    base = path.rstrip("/")
    name = base.rsplit("/", 1)[-1]
    return base[: len(base) - len(name)] + cache_name(name)


def _readable_mops(mops: Column, integer: str) -> Column:
    """`history.txn.mops_problem` is None: a non-empty list of sends (with topic, partition and an
    integer value) and polls."""
    from pyspark.sql import functions as F

    def readable(m: Column) -> Column:
        send_ok = m["topic"].isNotNull() & m["partition"].isNotNull() & m["value"].rlike(integer)
        return m["f"].isin(*MOP_FS) & ((m["f"] != "send") | F.coalesce(send_ok, F.lit(False)))

    return F.coalesce((F.size(mops) > 0) & F.forall(mops, readable), F.lit(False))


def convert_with_spark(spark: SparkSession, path: str, force: bool = False) -> ParquetForm:
    """The Parquet form (operations, reads) of a history anywhere Spark reads."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    col = F.col
    dest = _dest(path)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    conf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    src_path = jvm.org.apache.hadoop.fs.Path(path)
    fs = src_path.getFileSystem(conf)
    meta_path = jvm.org.apache.hadoop.fs.Path(f"{dest}/{META}")
    source_mtime = fs.getFileStatus(src_path).getModificationTime()
    if not force and fs.exists(meta_path):
        stream = fs.open(meta_path)
        try:
            meta = json.loads(jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
        finally:
            stream.close()
        if meta.get("source_mtime") == source_mtime and meta.get("version") == FORMAT_VERSION:
            return _form(dest, meta)

    df = (
        spark.read.schema(JSON_SCHEMA)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", "_corrupt_record")
        .json(path)
    )
    nemesis = col("process") == "nemesis"
    integer = r"^-?[0-9]+$"
    good = (
        col("_corrupt_record").isNull()
        & col("index").isNotNull()
        & col("time").isNotNull()
        & col("type").isin(*OP_TYPES)
        & col("f").isNotNull()
        & (nemesis | (col("process").rlike(integer) & col("f").isin(*sorted(CLIENT_FS))))
        & (nemesis | (col("f") != "txn") | _readable_mops(col("mops"), integer))
    )
    df = df.withColumn("good", good).cache()
    try:
        counts = df.agg(
            F.count(F.when(~col("good"), 1)).alias("bad"),
            F.count(F.when(col("good"), 1)).alias("ops"),
            F.max(F.when(col("good"), col("time"))).alias("max_time"),
        ).first()
        assert counts is not None
        # The nemesis ops (a few dozen lines), for the fault windows of the statistics.
        nemesis_ops = [
            [r["index"], r["time"], r["type"], r["f"], _json_value(r["value"])]
            for r in df.filter(col("good") & nemesis)
            .select("index", "time", "type", "f", "value")
            .orderBy("index")
            .collect()
        ]
        w = Window.partitionBy("process").orderBy("index")
        lines = df.filter(col("good") & ~nemesis).select(
            "index",
            "time",
            col("process").cast("long").alias("process"),
            "type",
            "f",
            "topic",
            "partition",
            F.when(col("value").rlike(integer), col("value").cast("long")).alias("value"),
            "offset",
            "records",
        )
        lines = lines.select(
            "*",
            F.lead("type").over(w).alias("next_type"),
            F.lead("f").over(w).alias("next_f"),
            F.lead("index").over(w).alias("next_index"),
            F.lead("time").over(w).alias("next_time"),
            F.lead("offset").over(w).alias("next_offset"),
            F.lag("type").over(w).alias("prev_type"),
            F.lag("f").over(w).alias("prev_f"),
        )
        is_invoke = col("type") == "invoke"
        # The rules of `history.pairing`, over each line and its process's neighbouring lines.
        line = pairing.Neighbours(
            *(col(c) for c in ("type", "f", "prev_type", "prev_f", "next_type", "next_f"))
        )
        reset = pairing.forgets_positions(_SPARK, line)
        lines = lines.withColumn(
            "epoch",
            F.sum(reset.cast("long")).over(w.rowsBetween(Window.unboundedPreceding, Window.currentRow)),
        ).cache()
        completed = pairing.completed(_SPARK, line)
        # Topic-partition ids as checkers.parquet makes them: topic rank * 2**32 + partition + 2**31.
        # (Topic names only: a handful of strings, never the history.)
        names = sorted(
            r[0]
            for r in lines.select("topic")
            .unionByName(lines.select(F.explode("records.topic").alias("topic")))
            .filter(col("topic").isNotNull())
            .distinct()
            .collect()
        )
        topics = F.broadcast(
            spark.createDataFrame([(t, i) for i, t in enumerate(names)], "topic STRING, topic_id LONG")
        )

        def with_tp(df: DataFrame) -> DataFrame:
            tp = col("topic_id") * (1 << 32) + col("partition").cast("long") + (1 << 31)
            return df.join(topics, "topic", "left").withColumn("tp", tp).drop("topic_id")

        operations = with_tp(
            lines.filter(is_invoke).select(
                col("index").alias("invoke_index"),
                "process",
                "f",
                "topic",
                "partition",
                "value",
                F.when(completed, col("next_index")).alias("index"),
                F.when(completed, col("next_time")).alias("time"),
                col("time").alias("invoke_time"),
                F.when(completed, col("next_offset")).alias("offset"),
                F.lit(False).alias("bad_records"),
                F.when(~completed, "open")
                .when(pairing.completed_by_crash(_SPARK, line), "info")
                .otherwise(col("next_type"))
                .alias("outcome"),
                "next_index",
            )
        )

        def code(column: str, names: tuple[str, ...]) -> Column:
            return (F.array_position(F.array(*[F.lit(x) for x in names]), col(column)) - 1).cast("byte")

        operations = operations.withColumn("f_code", code("f", F_CODES)).withColumn(
            "outcome_code", code("outcome", OUTCOME_CODES)
        )
        # Each ack's previous ack of its process on its partition (nonmonotonic-send).
        ack = (
            (col("f") == "send")
            & col("value").isNotNull()
            & (col("outcome") == "ok")
            & (col("offset") >= 0)
            & col("tp").isNotNull()
        )
        wa = Window.partitionBy("process", "tp").orderBy("index")
        none = F.lit(None).cast("long")
        operations.filter(ack).select(
            "*",
            F.lag("index").over(wa).alias("prev_index"),
            F.lag("offset").over(wa).alias("prev_offset"),
            F.lag("value").over(wa).alias("prev_value"),
        ).unionByName(
            operations.filter(~F.coalesce(ack, F.lit(False))).select(
                "*", none.alias("prev_index"), none.alias("prev_offset"), none.alias("prev_value")
            )
        ).withColumn("prev_ok_time", none).write.mode("overwrite").parquet(dest + "/operations")
        orphans = lines.filter(pairing.orphan(_SPARK, line)).agg(F.count(F.lit(1)), F.min("index")).first()
        assert orphans is not None
        reads = with_tp(
            lines.filter(pairing.reads(_SPARK, line) & col("records").isNotNull())
            .select("index", "process", "epoch", F.posexplode("records").alias("pos", "r"))
            .select(
                "index",
                "process",
                col("pos").cast("int").alias("pos"),
                col("r.topic").alias("topic"),
                col("r.partition").alias("partition"),
                col("r.offset").alias("offset"),
                col("r.value").alias("value"),
                "epoch",
            )
        )
        # Each well-formed read's previous read by its process of its partition, same epoch.
        well_formed = col("tp").isNotNull() & col("offset").isNotNull() & col("value").isNotNull()
        wr = Window.partitionBy("process", "epoch", "tp").orderBy("index", "pos")
        reads.filter(well_formed).select(
            "*", F.lag("offset").over(wr).alias("prev_offset"), F.lag("index").over(wr).alias("prev_index")
        ).unionByName(
            reads.filter(~well_formed).select("*", none.alias("prev_offset"), none.alias("prev_index"))
        ).write.mode("overwrite").parquet(dest + "/reads")
        lines.unpersist()
    finally:
        df.unpersist()
    figures = spark_figures(spark.read.parquet(dest + "/operations"), spark.read.parquet(dest + "/reads"))
    meta = {
        "figures": figures,
        "topics": names,
        "source_mtime": source_mtime,
        "version": FORMAT_VERSION,
        "bad": int(counts["bad"]),
        "ops": int(counts["ops"]),
        "orphans": int(orphans[0]),
        "first_orphan": orphans[1],
        "reason": "unreadable or malformed line (line number unknown: read by Spark)",
        "max_time": counts["max_time"],
        "nemesis": nemesis_ops,
    }
    out = fs.create(meta_path, True)
    try:
        out.write(json.dumps(meta).encode())
    finally:
        out.close()
    return _form(dest, meta)


class _SparkLogic:
    """`history.pairing.Logic` over Spark columns (a missing neighbour is null: of no type)."""

    def is_type(self, column: Column, type_: str) -> Column:
        from pyspark.sql import functions as F

        return F.coalesce(column == type_, F.lit(False))

    def is_f(self, column: Column, f: str) -> Column:
        from pyspark.sql import functions as F

        return F.coalesce(column == f, F.lit(False))

    def exists(self, column: Column) -> Column:
        return column.isNotNull()

    def and_(self, a: Column, b: Column) -> Column:
        return a & b

    def or_(self, a: Column, b: Column) -> Column:
        return a | b

    def not_(self, a: Column) -> Column:
        return ~a


_SPARK = _SparkLogic()


def _form(dest: str, meta: dict[str, Any]) -> ParquetForm:
    return ParquetForm(
        dest + "/operations",
        dest + "/reads",
        int(meta["ops"]),
        [ReadProblem(0, meta["reason"])] * int(meta["bad"]),
        int(meta["orphans"]),
        meta["first_orphan"],
        meta.get("figures"),
        meta.get("topics"),
        meta.get("max_time"),
        list(meta.get("nemesis") or []),
    )


def _json_value(text: str | None) -> Any:
    """A nemesis `value` as Spark's JSON reader hands it over (JSON text for objects) -> Python."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text  # a JSON string's content
