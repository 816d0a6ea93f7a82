"""The Spark job of `strandline analyze`: the runs table, the per-setting and per-night tables.

Input: the runs as rows (`harness.analyze.runs`, read from results.json, test.json, outcome.json
and the campaign summaries) and, for every run whose history the Spark checker converted, the
history's Parquet form (`history.parquet/operations.parquet`), all read by Spark in one scan.

From the histories, per run: how many operations, and the acknowledged sends per second while a
fault was in force against those outside (results.json's fault windows, merged, within the load
[0, time limit]); `kept_under_faults` is their ratio (1: the faults did not slow the writes; 0:
nothing was acknowledged while they were in force).

Output: the three tables' rows, sorted (they are small: one row per run, per setting, per campaign
run); `harness.analyze` writes them as Parquet and CSV and draws the page from them.
"""

from __future__ import annotations

import logging
import re
import typing
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

import pyarrow as pa

from harness.analyze.runs import RUN_COLUMNS, SETTING_COLUMNS, Night, RunRow, Store

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger(__name__)

NS = 1_000_000_000
HISTORY_COLUMNS = ("ops", "acked_faulted_per_s", "acked_calm_per_s", "kept_under_faults")
SETTINGS_TABLE = (
    *SETTING_COLUMNS,
    "mix",
    "runs",
    "judged",
    "valid",
    "invalid",
    "unknown",
    "invalid_rate",
    "refused",
    "cut_short",
    "unchecked",
    "runs_with_loss",
    "acked",
    "acked_lost",
    "median_fault_to_loss_s",
    "availability_mean",
    "availability_min",
    "kept_under_faults_mean",
    "with_history",
)
NIGHTS_TABLE = (
    "campaign",
    "night",
    "tests",
    "as_expected",
    "skipped",
    "seconds",
    "runs",
    "judged",
    "valid",
    "invalid",
    "unknown",
    "acked_lost",
    "availability_mean",
    "summary",
)
TOP = 10  # rows in the slowest and most lossy lists


@dataclass
class Tables:
    runs: list[dict[str, Any]]  # RUN_COLUMNS + HISTORY_COLUMNS, newest first
    settings: list[dict[str, Any]]  # SETTINGS_TABLE, most invalid first
    nights: list[dict[str, Any]]  # NIGHTS_TABLE, by campaign then night
    slowest: list[dict[str, Any]]
    lossiest: list[dict[str, Any]]
    history_runs: int  # runs whose history's Parquet form was read
    schemas: dict[str, pa.Schema] = field(default_factory=dict)  # runs, settings, nights: their columns


_ARROW = {
    "string": pa.string(),
    "bigint": pa.int64(),
    "int": pa.int64(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
}


def arrow_schema(frame: DataFrame) -> pa.Schema:
    """A Spark result's columns as an Arrow schema (the types these tables use)."""
    return pa.schema(
        [(f.name, _ARROW.get(f.dataType.simpleString(), pa.string())) for f in frame.schema.fields]
    )


def _spark_type(annotation: Any) -> Any:
    from pyspark.sql import types as T

    args = set(typing.get_args(annotation)) - {type(None)}
    base = next(iter(args)) if args else annotation
    return {str: T.StringType(), int: T.LongType(), float: T.DoubleType(), bool: T.BooleanType()}[base]


def runs_schema() -> Any:
    from pyspark.sql import types as T

    hints = typing.get_type_hints(RunRow)
    return T.StructType(
        [
            T.StructField(name, _spark_type(hints[name]), name not in ("run", "name", "stamp"))
            for name in RUN_COLUMNS
        ]
    )


_FLOAT_COLUMNS = frozenset(
    name
    for name, hint in typing.get_type_hints(RunRow).items()
    if hint is float or float in typing.get_args(hint)
)


def spark_row(row: RunRow) -> tuple[Any, ...]:
    """A run's row as the schema's tuple: a whole number in a float column becomes a float (a Spark
    DoubleType column refuses a Python int)."""
    values = []
    for name in RUN_COLUMNS:
        value = getattr(row, name)
        if name in _FLOAT_COLUMNS and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        values.append(value)
    return tuple(values)


_GLOB = re.compile(r"([\\*?\[\]{}])")


def spark_path(path: str) -> str:
    """A local path as Spark's reader takes it literally (it expands glob characters otherwise)."""
    return _GLOB.sub(r"\\\1", path)


# Spark names a local file 'file:/tmp/x' in one place and 'file:///tmp/x' in another: the key is '/tmp/x'
# (still URI-encoded, the same on both sides).
_FILE = re.compile(r"^file:/*")


def local_path(uri: str) -> str:
    """Spark's `_metadata.file_path` ('file:/tmp/a%20b/x') back to the local path ('/tmp/a b/x')."""
    return unquote(urlparse(uri).path)


def _history_figures(session: SparkSession, rows: list[RunRow]) -> DataFrame | None:
    """Per run with a history form: its operations, its acknowledged sends within the load, and
    those of them completed while a fault was in force (one scan of every history, one shuffle)."""
    from pyspark.sql import functions as F

    forms = {r.history_form: r.run for r in rows if r.history_form}
    if not forms:
        return None
    ops = session.read.parquet(*(spark_path(p) for p in sorted(forms)))
    # The files as Spark names them (URIs) from its file index, without a job; matched back to runs.
    files = ops.inputFiles()
    load_end = {r.run: int(r.time_limit_s * NS) if r.time_limit_s is not None else None for r in rows}
    owners = [
        (_FILE.sub("/", uri), forms[local_path(uri)], load_end[forms[local_path(uri)]])
        for uri in files
        if local_path(uri) in forms
    ]
    if len(owners) < len(files):
        log.warning(
            "history files Spark read that no run claims: %s", sorted(set(files) - {o[0] for o in owners})
        )
    owner = session.createDataFrame(owners, "file string, run string, load_end long")
    windows = session.createDataFrame(
        [(r.run, int(start * NS), int(end * NS)) for r in rows if r.history_form for start, end in r.windows],
        "w_run string, start long, end long",
    )
    file = F.regexp_replace(F.col("_metadata.file_path"), _FILE.pattern, "/")
    ops = ops.select("f", "outcome", "time", file.alias("file")).join(F.broadcast(owner), "file")
    # Windows are disjoint (merged), so an operation meets at most one: the left join adds no rows.
    flagged = ops.join(
        F.broadcast(windows),
        (ops["run"] == windows["w_run"]) & ops["time"].between(windows["start"], windows["end"]),
        "left",
    )
    ack = (
        (F.col("f") == "send")
        & (F.col("outcome") == "ok")
        & F.col("time").between(F.lit(0), F.col("load_end"))
    )
    return flagged.groupBy("run").agg(
        F.count(F.lit(1)).alias("ops"),
        _count(ack).alias("acks_in_load"),
        _count(ack & F.col("start").isNotNull()).alias("acks_faulted"),
    )


def _rates(full: DataFrame) -> DataFrame:
    """Acknowledged sends per second under faults and without, and their ratio."""
    from pyspark.sql import functions as F

    faulted_s, calm_s = F.col("faulted_s"), F.col("time_limit_s") - F.col("faulted_s")
    faulted_rate = F.when(faulted_s > 0, F.col("acks_faulted") / faulted_s)
    calm_rate = F.when(calm_s > 0, (F.col("acks_in_load") - F.col("acks_faulted")) / calm_s)
    return full.select(
        *RUN_COLUMNS,
        "ops",
        F.round(faulted_rate, 3).alias("acked_faulted_per_s"),
        F.round(calm_rate, 3).alias("acked_calm_per_s"),
        F.round(F.when(calm_rate > 0, faulted_rate / calm_rate), 4).alias("kept_under_faults"),
    )


def _count(condition: Column) -> Column:
    from pyspark.sql import functions as F

    return F.sum(F.when(condition, 1).otherwise(0))


def _settings(runs: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    verdict, status = F.col("verdict"), F.col("status")
    judged = _count(verdict != "")
    invalid = _count(verdict == "invalid")
    return (
        runs.groupBy(*SETTING_COLUMNS, "mix")
        .agg(
            F.count(F.lit(1)).alias("runs"),
            judged.alias("judged"),
            _count(verdict == "valid").alias("valid"),
            invalid.alias("invalid"),
            _count(verdict == "unknown").alias("unknown"),
            F.round(F.when(judged > 0, invalid / judged), 4).alias("invalid_rate"),
            _count(status == "refused").alias("refused"),
            _count(status.isin("interrupted", "failed", "killed", "running")).alias("cut_short"),
            _count((verdict == "") & (status != "refused")).alias("unchecked"),
            _count(F.col("acked_lost") > 0).alias("runs_with_loss"),
            F.sum("acked").alias("acked"),
            F.sum("acked_lost").alias("acked_lost"),
            F.round(F.median("fault_to_loss_s"), 3).alias("median_fault_to_loss_s"),
            F.round(F.avg("availability"), 4).alias("availability_mean"),
            F.min("availability").alias("availability_min"),
            F.round(F.avg("kept_under_faults"), 4).alias("kept_under_faults_mean"),
            _count(F.col("ops").isNotNull()).alias("with_history"),
        )
        .select(*SETTINGS_TABLE)
    )


def _nights(session: SparkSession, runs: DataFrame, nights: list[Night]) -> DataFrame:
    from pyspark.sql import functions as F

    verdict = F.col("verdict")
    per_night = (
        runs.where(F.col("campaign") != "")
        .groupBy("campaign", "night")
        .agg(
            F.count(F.lit(1)).alias("runs"),
            _count(verdict != "").alias("judged"),
            _count(verdict == "valid").alias("valid"),
            _count(verdict == "invalid").alias("invalid"),
            _count(verdict == "unknown").alias("unknown"),
            F.sum("acked_lost").alias("acked_lost"),
            F.round(F.avg("availability"), 4).alias("availability_mean"),
        )
    )
    summaries = session.createDataFrame(
        [asdict(n) for n in nights],
        "campaign string, night string, tests long, as_expected long, skipped long, seconds double, summary string",
    )
    zero: dict[str, bool | float | int | str] = {
        c: 0 for c in ("runs", "judged", "valid", "invalid", "unknown")
    }
    return summaries.join(per_night, ["campaign", "night"], "left").fillna(zero).select(*NIGHTS_TABLE)


def _rows(frame: DataFrame) -> list[dict[str, Any]]:
    return [row.asDict() for row in frame.collect()]


def run_job(session: SparkSession, store: Store, progress: Callable[[str], None] = lambda _: None) -> Tables:
    """The whole analysis on Spark (three jobs: the runs with their histories' figures, the
    settings, the nights); the rows come back sorted for the tables and the page."""
    from pyspark.sql import functions as F

    rows = store.runs
    runs = session.createDataFrame([spark_row(r) for r in rows], runs_schema())
    with_history = sum(1 for r in rows if r.history_form)
    progress(f"reading the histories' Parquet form of {with_history} runs")
    figures = _history_figures(session, rows)
    if figures is None:
        counted = ("ops", "acks_in_load", "acks_faulted")
        full = runs.select("*", *(F.lit(None).cast("long").alias(c) for c in counted))
    else:
        full = runs.join(F.broadcast(figures), "run", "left")
    # One partition, sorted inside it: small tables need no range-partitioning job to be ordered.
    full = _rates(full).coalesce(1).persist()
    try:
        runs_out = _rows(full.sortWithinPartitions(F.desc("stamp"), "name"))
        progress("aggregating per setting and fault mix, per campaign run")
        settings = (
            _settings(full)
            .coalesce(1)
            .sortWithinPartitions(
                F.desc_nulls_last("invalid_rate"), F.desc("acked_lost"), *SETTING_COLUMNS, "mix"
            )
        )
        nights = _nights(session, full, store.nights).coalesce(1).sortWithinPartitions("campaign", "night")
        return Tables(
            runs=runs_out,
            settings=_rows(settings),
            nights=_rows(nights),
            slowest=sorted(
                (r for r in runs_out if r["run_s"] is not None), key=lambda r: (-r["run_s"], r["run"])
            )[:TOP],
            lossiest=sorted(
                (r for r in runs_out if (r["acked_lost"] or 0) > 0),
                key=lambda r: (-r["acked_lost"], r["run"]),
            )[:TOP],
            history_runs=with_history,
            schemas={
                "runs": arrow_schema(full),
                "settings": arrow_schema(settings),
                "nights": arrow_schema(nights),
            },
        )
    finally:
        full.unpersist()
