"""History -> Parquet with Spark's JSON reader, for histories on filesystems only Spark reaches.

Produces the same two datasets as `checkers.parquet` (which is several times faster for local
files). Spark cannot say on which line a bad line was, so such lines are reported by count and
reason without a line number; the cache (`<history>.parquet/` beside the history) is reused while
it is newer than the history.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

from workloads.history import CLIENT_FS, OP_TYPES, ReadProblem

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

JSON_SCHEMA = (
    "index BIGINT, time BIGINT, process STRING, type STRING, f STRING, topic STRING, partition INT, "
    "value STRING, offset BIGINT, records ARRAY<STRUCT<topic: STRING, partition: INT, offset: BIGINT, "
    "value: BIGINT>>, _corrupt_record STRING"
)


def _dest(path: str) -> str:
    base = path.rstrip("/")
    return (base[: -len(".jsonl")] if base.endswith(".jsonl") else base) + ".parquet"


def convert_with_spark(
    spark: SparkSession, path: str, force: bool = False
) -> tuple[str, str, list[ReadProblem]]:
    """(ops path, reads path, problems) of a history anywhere Spark reads."""
    from pyspark.sql import functions as F

    dest = _dest(path)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    conf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    src_path = jvm.org.apache.hadoop.fs.Path(path)
    fs = src_path.getFileSystem(conf)
    meta_path = jvm.org.apache.hadoop.fs.Path(dest + "/meta.json")
    source_mtime = fs.getFileStatus(src_path).getModificationTime()
    if not force and fs.exists(meta_path):
        stream = fs.open(meta_path)
        try:
            meta = json.loads(jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
        finally:
            stream.close()
        if meta.get("source_mtime") == source_mtime:
            problems = [ReadProblem(0, meta["reason"])] * int(meta.get("bad", 0))
            return dest + "/ops", dest + "/reads", problems

    df = (
        spark.read.schema(JSON_SCHEMA)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", "_corrupt_record")
        .json(path)
    )
    nemesis = F.col("process") == "nemesis"
    int_process = F.col("process").rlike(r"^-?[0-9]+$")
    good = (
        F.col("_corrupt_record").isNull()
        & F.col("index").isNotNull()
        & F.col("time").isNotNull()
        & F.col("type").isin(*OP_TYPES)
        & F.col("f").isNotNull()
        & (nemesis | (int_process & F.col("f").isin(*sorted(CLIENT_FS))))
    )
    df = df.withColumn("good", good).cache()
    try:
        bad = df.filter(~F.col("good")).count()
        ops = df.filter(F.col("good")).select(
            "index",
            "time",
            F.when(~nemesis, F.col("process").cast("long")).alias("process"),
            nemesis.alias("nemesis"),
            "type",
            "f",
            F.when(~nemesis, F.col("topic")).alias("topic"),
            F.when(~nemesis, F.col("partition")).alias("partition"),
            F.when(~nemesis & F.col("value").rlike(r"^-?[0-9]+$"), F.col("value").cast("long")).alias(
                "value"
            ),
            F.when(~nemesis, F.col("offset")).alias("offset"),
            F.when(~nemesis, F.size("records")).cast("int").alias("records"),
            F.lit(False).alias("bad_records"),
        )
        ops = ops.withColumn("records", F.when(F.col("records") >= 0, F.col("records")))
        ops.write.mode("overwrite").parquet(dest + "/ops")
        reads = df.filter(
            F.col("good") & ~nemesis & (F.col("type") == "ok") & F.col("records").isNotNull()
        ).select(
            "index", F.col("process").cast("long").alias("process"), F.posexplode("records").alias("pos", "r")
        )
        reads.select(
            "index",
            "process",
            F.col("pos").cast("int").alias("pos"),
            F.col("r.topic").alias("topic"),
            F.col("r.partition").alias("partition"),
            F.col("r.offset").alias("offset"),
            F.col("r.value").alias("value"),
        ).write.mode("overwrite").parquet(dest + "/reads")
    finally:
        df.unpersist()
    reason = "unreadable or malformed line (line number unknown: read by Spark)"
    out = fs.create(meta_path, True)
    try:
        out.write(json.dumps({"source_mtime": source_mtime, "bad": bad, "reason": reason}).encode())
    finally:
        out.close()
    return dest + "/ops", dest + "/reads", [ReadProblem(0, reason)] * bad
