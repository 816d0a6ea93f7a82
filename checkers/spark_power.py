"""The Spark engine's tally of verdict power (`checkers.power`), from the history's Parquet form.

The same events as `checkers.power_history` (the reference's pass), as rows (kind, time, second)
of the paired operations, the reads (the polls that returned a whole record) and, in a
transactional history, the transactions' acknowledged sends and polls (`checkers.spark_txn`).
Two actions, each one collect of summaries:

1. per kind and second: the events' count, first and last time (a few rows per second of the run);
   the load's first invocation and last completed write come with them;
2. every event's time in the seconds where an interval of the rule starts or ends (known once the
   load's end is): a few hundred rows.

The reads' completion indices, which both actions join, are kept in between (one long per poll
that returned records).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from checkers.parquet_schema import F_CODES, OUTCOME_CODES
from checkers.power import KINDS, NS, Asked, Tally, bound_load
from checkers.spark_session import Persisted
from history.faults import FaultWindow, fault_windows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from checkers.spark_txn import TxnParts

_OK, _OPEN = OUTCOME_CODES.index("ok"), OUTCOME_CODES.index("open")
_F = {f: F_CODES.index(f) for f in ("send", "poll", "commit", "rebalance", "crash", "txn")}
INVOKED = len(KINDS)  # the kind code of client invocations (the load's start)
ISSUED = INVOKED + 1  # the kind code of send and transaction invocations (what the clients issued)


def _code(kind: str) -> int:
    return KINDS.index(kind)


def events(spark: SparkSession, operations_path: str, reads: DataFrame, txns: TxnParts | None) -> DataFrame:
    """Every event (`k`: a KINDS index, or INVOKED), with its time `t` in s and second `s`."""
    from pyspark.sql import functions as F

    col = F.col
    ops = spark.read.parquet(operations_path).select(
        "index", "f_code", "outcome_code", "time", "invoke_time", "offset"
    )
    t = col("time").cast("double") / NS
    f, ok = col("f_code"), col("outcome_code") == _OK
    completed = col("outcome_code") < _OPEN

    def rows(df: DataFrame, kind: int, at: Any = t) -> DataFrame:
        return df.select(F.lit(kind).cast("int").alias("k"), at.alias("t"))

    parts = [
        rows(ops, INVOKED, col("invoke_time").cast("double") / NS),
        rows(ops.filter(f.isin(_F["send"], _F["txn"])), ISSUED, col("invoke_time").cast("double") / NS),
        rows(ops.filter(completed & f.isin(_F["send"], _F["txn"])), _code("write")),
        rows(ops.filter((f == _F["send"]) & ok & (col("offset") >= 0)), _code("acked")),
        rows(ops.filter((f == _F["poll"]) & ok).join(reads, "index", "left_semi"), _code("read")),
        rows(ops.filter((f == _F["commit"]) & ok), _code("commit")),
        rows(ops.filter((f == _F["rebalance"]) & ok), _code("rebalance")),
        rows(ops.filter(f == _F["crash"]), _code("crash"), col("invoke_time").cast("double") / NS),
    ]
    if txns is not None:
        acked = txns.writes.filter((col("outcome_code") == _OK) & col("offset").isNotNull())
        polled = txns.txn_reads.select(col("txn").alias("index")).distinct()
        parts += [
            rows(acked, _code("acked")),
            rows(ops.filter((f == _F["txn"]) & ok).join(polled, "index", "left_semi"), _code("read")),
        ]
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part)
    return union.filter(col("t").isNotNull()).withColumn("s", col("t").cast("long"))


def tally(
    spark: SparkSession,
    operations_path: str,
    reads_path: str,
    nemesis: list[dict[str, Any]],
    asked: Asked,
    txns: TxnParts | None = None,
) -> tuple[Tally, list[FaultWindow]]:
    """The run's tally (see module docstring) and its fault windows (from the nemesis ops)."""
    from pyspark.sql import functions as F

    col = F.col
    kept = Persisted()
    try:
        whole = (
            spark.read.parquet(reads_path)
            .filter(col("tp").isNotNull() & col("offset").isNotNull() & col("value").isNotNull())
            .select("index")
            .distinct()
        )
        every = events(spark, operations_path, kept.keep(whole), txns)
        out = Tally()
        starts: list[float] = []
        issued: list[float] = []
        for r in every.groupBy("k", "s").agg(F.count(F.lit(1)).alias("n"), F.min("t"), F.max("t")).collect():
            k, s, n, lo, hi = r
            if k in (INVOKED, ISSUED):
                (starts if k == INVOKED else issued).append(lo if k == INVOKED else hi)
                continue
            out.per_second.setdefault(KINDS[k], {})[int(s)] = (int(n), float(lo), float(hi))
        windows = fault_windows(nemesis)
        seconds = bound_load(out, starts, issued, windows, asked)
        if seconds:
            exact = every.filter(col("s").isin(seconds) & (col("k") < INVOKED)).select("k", "s", "t")
            times: dict[str, dict[int, list[float]]] = {}
            for k, s, t in exact.collect():
                times.setdefault(KINDS[k], {}).setdefault(int(s), []).append(float(t))
            for kind, per_second in times.items():
                out.exact[kind] = {s: sorted(values) for s, values in per_second.items()}
        return out, windows
    finally:
        kept.release()
