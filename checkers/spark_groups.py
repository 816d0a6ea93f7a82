"""The consumer-group rules (group-skip, nonmonotonic-commit, and which poll anomalies are group
members') as Spark jobs, the reference's to the letter.

The rules, terms and example fields are those of `checkers/reference.py` (module docstring). The
Parquet form of the history (`checkers.parquet`) carries operations and reads but not the fields
only group operations have (`group`, `offsets`), so the few `subscribe` and `commit` lines are read
again from the history's text here, and joined with the paired operations (for each commit's
outcome and completion index) and with the reads. Only histories with commits pay for this: one
scan of the operations' `f` column says whether there are any.

* nonmonotonic-commit: the ok commits of each (group, topic, partition), joined with those that
  completed before each one was invoked; the greatest offset among those, and the first of them to
  reach it, is the floor a commit must not go below.
* group-skip: each (group, topic, partition)'s ok commits, in completion order, make a staircase of
  new maxima; the step covering offset o (previous maximum <= o < its offset) is the first commit
  past o. Every position of the final log (the first read of each by the final drain's processes,
  those of the `final: true` assigns, or by any process in a history without them) is matched to
  the steps of its partition (the steps are few: broadcast), then the values some member of the
  group returned (read after it subscribed) are taken out (an anti join).
* members of poll-skip and nonmonotonic-poll: the linked reads that are one or the other (as the
  engine found them, `checkers/spark_engine.py`) whose process had subscribed before the read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

from checkers.catalogue import BY_NAME, MAX_EXAMPLES, MEMBER_COUNTED, POSITION, AnomalyResult
from checkers.parquet_schema import columns
from checkers.rules import of_row
from checkers.rules.rows import CommitFloor, FinalPosition, LinkedRead
from checkers.spark_columns import SQL, columns_of, expr
from checkers.spark_lines import parsed_lines, whole_records
from checkers.spark_session import broadcast, read_form

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

GROUP_ANOMALIES = ("group-skip", "nonmonotonic-commit")
# The operation kinds the group rules read.
GROUP_KINDS = frozenset({"subscribe", "commit"})
# A line of a subscribe or commit, or of the final drain's assign (the writer's compact JSON, or
# JSON with spaces).
_GROUP_LINE = r'"f"\s*:\s*"(subscribe|commit)"|"final"\s*:\s*true'
# One of these is in every line _GROUP_LINE matches: searched first (`spark_lines.parsed_lines`).
_GROUP_WORDS = ("subscribe", "commit", '"final"')
# What is read of those lines; a commit's offsets name their partition as a long (cast to the reads'
# int once parsed).
_COMMITTED = pa.struct(columns("topic", ("partition", pa.int64()), "offset"))
_GROUP_FIELDS = pa.schema(
    columns("index", "process", "type", "f", "group", "final", ("offsets", pa.list_(_COMMITTED)))
)


def _none() -> dict[str, AnomalyResult]:
    return {name: {"count": 0, "examples": []} for name in GROUP_ANOMALIES}


def _member_polls(members: DataFrame, reads: DataFrame) -> dict[str, int]:
    """How many occurrences of the member-counted rules of linked reads (poll-skip,
    nonmonotonic-poll) are reads of a group member."""
    from pyspark.sql import functions as F

    col = F.col
    since = members.groupBy("process").agg(F.min("index").alias("member_since"))
    linked = reads.filter(
        col("tp").isNotNull()
        & col("offset").isNotNull()
        & col("value").isNotNull()
        & col("prev_offset").isNotNull()
    )
    rules = [r for r in of_row(LinkedRead) if r.member_counted]
    read = columns_of(LinkedRead, skipped="(`offset` - `prev_offset` - 1)")
    row = (
        linked.join(broadcast(since), "process")
        .filter(col("member_since") < col("index"))
        .agg(*[F.count(F.when(expr(r.holds(SQL, read)), 1)).alias(r.name) for r in rules])
        .collect()[0]
    )
    return {r.name: int(row[r.name] or 0) for r in rules}


def anomaly_result(name: str, df: DataFrame) -> AnomalyResult:
    """One anomaly's count and its MAX_EXAMPLES smallest examples (the catalogue's order) of df."""
    from pyspark.sql import functions as F

    fields = BY_NAME[name].example_fields
    df = df.select(*fields).cache()
    count = df.count()
    rows = df.orderBy(*[F.col(f).asc() for f in BY_NAME[name].order]).limit(MAX_EXAMPLES).collect()
    df.unpersist()
    return {"count": count, "examples": [{f: row[f] for f in fields} for row in rows]}


def check_groups(
    spark: SparkSession,
    history_path: str,
    operations_path: str,
    reads_path: str,
    kinds: list[str] | None = None,
) -> tuple[dict[str, AnomalyResult], dict[str, int]]:
    """group-skip and nonmonotonic-commit of one history (counts and examples, as the reference),
    and how many poll-skip and nonmonotonic-poll occurrences are group members' reads (`kinds`: the
    operation kinds the conversion found, when it counted them; without subscribes and commits no
    Spark job runs)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    col = F.col
    operations = read_form(spark, operations_path)
    present = (
        {row["f"] for row in operations.filter(col("f").isin(*GROUP_KINDS)).select("f").distinct().collect()}
        if kinds is None
        else GROUP_KINDS & set(kinds)
    )
    if not present:
        return _none(), dict.fromkeys(MEMBER_COUNTED, 0)

    lines = (
        parsed_lines(spark, history_path, _GROUP_LINE, _GROUP_FIELDS, _GROUP_WORDS)
        .filter(
            (col("type") == "invoke")
            & col("process").isNotNull()
            & (col("group").isNotNull() | ((col("f") == "assign") & (col("final") == F.lit(True))))
        )
        .cache()
    )
    subscribes = lines.filter((col("f") == "subscribe") & col("group").isNotNull()).select(
        "process", "group", "index"
    )
    reads = read_form(spark, reads_path)
    member_polls = _member_polls(subscribes, reads)
    if "commit" not in present:
        lines.unpersist()
        return _none(), member_polls
    well_formed = col("offsets").isNotNull() & F.forall(
        "offsets",
        lambda e: e.isNotNull() & e.topic.isNotNull() & e.partition.isNotNull() & e.offset.isNotNull(),
    )
    invoked = lines.filter((col("f") == "commit") & col("group").isNotNull() & well_formed).select(
        col("index").alias("invoke_index"), "process", "group", "offsets"
    )
    completed = operations.filter((col("f") == "commit") & (col("outcome") == "ok")).select(
        "invoke_index", col("index")
    )
    commits = (
        invoked.join(completed, "invoke_index")
        .select("invoke_index", "index", "process", "group", F.explode("offsets").alias("o"))
        .select(
            "invoke_index",
            "index",
            "process",
            "group",
            col("o.topic").alias("topic"),
            col("o.partition").cast("int").alias("partition"),
            col("o.offset").alias("offset"),
        )
        .cache()
    )

    # nonmonotonic-commit: below the greatest commit that completed before this one began.
    later, earlier = commits.alias("later"), commits.alias("earlier")
    floors = (
        later.join(
            earlier,
            (col("later.group") == col("earlier.group"))
            & (col("later.topic") == col("earlier.topic"))
            & (col("later.partition") == col("earlier.partition"))
            & (col("earlier.index") < col("later.invoke_index")),
        )
        .groupBy(
            "later.index", "later.process", "later.group", "later.topic", "later.partition", "later.offset"
        )
        .agg(
            F.max(
                F.struct(col("earlier.offset").alias("offset"), (-col("earlier.index")).alias("neg_index"))
            ).alias("floor")
        )
    )
    floors = floors.withColumn("prev_index", -col("floor.neg_index")).withColumn(
        "prev_offset", col("floor.offset")
    )

    # group-skip: the staircase of each (group, tp)'s new maxima, in completion order.
    by_key = Window.partitionBy("group", "topic", "partition").orderBy("index")
    steps = (
        commits.withColumn("below", F.max("offset").over(by_key.rowsBetween(Window.unboundedPreceding, -1)))
        .filter(col("below").isNull() | (col("offset") > col("below")))
        .select(
            "group",
            col("topic").alias("step_topic"),
            col("partition").alias("step_partition"),
            col("index"),
            col("process"),
            col("offset").alias("committed_offset"),
            F.coalesce(col("below"), F.lit(-(2**62))).alias("below"),
        )
    )
    reads = whole_records(reads)
    # The final log: what the final drain read (`final: true` assigns), or every read without one.
    drain = lines.filter(col("f") == "assign").select("process").distinct()
    log_reads = reads.join(broadcast(drain), "process") if drain.limit(1).count() else reads
    first_reads = (
        log_reads.groupBy(*POSITION)
        .agg(F.min(F.struct("index", "pos", "process", "value")).alias("first"))
        .select(
            *POSITION,
            col("first.index").alias("read_index"),
            col("first.process").alias("read_process"),
            col("first.value").alias("value"),
        )
    )
    # A value a member returned: read by the process after it subscribed to the group.
    joined = subscribes.groupBy("process", "group").agg(F.min("index").alias("member_since"))
    returned = (
        reads.join(broadcast(joined), "process")
        .filter(col("member_since") < col("index"))
        .select("group", "value")
        .distinct()
    )
    positions = first_reads.join(
        broadcast(steps),
        (col("topic") == col("step_topic"))
        & (col("partition") == col("step_partition"))
        & (col("below") <= col("offset"))
        & (col("offset") < col("committed_offset")),
    ).join(returned.withColumn("returned", F.lit(True)), ["group", "value"], "left")
    final_position = columns_of(FinalPosition, returned="coalesce(`returned`, false)")
    found = {
        **{
            r.name: anomaly_result(r.name, floors.filter(expr(r.holds(SQL, columns_of(CommitFloor)))))
            for r in of_row(CommitFloor)
        },
        **{
            r.name: anomaly_result(r.name, positions.filter(expr(r.holds(SQL, final_position))))
            for r in of_row(FinalPosition)
        },
    }
    commits.unpersist()
    lines.unpersist()
    return found, member_polls


def merge_into(anomalies: dict[str, Any], found: tuple[dict[str, AnomalyResult], dict[str, int]]) -> None:
    """Put the group anomalies, and the members' share of the poll anomalies, into an engine
    result's anomalies, keeping the catalogue's order."""
    groups, member_polls = found
    for name in GROUP_ANOMALIES:
        anomalies[name] = groups[name]
    for name, members in member_polls.items():
        anomalies[name]["members"] = members
