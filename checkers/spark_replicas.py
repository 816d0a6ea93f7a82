"""The replica-log checks on Spark: log-divergence and lost-committed-on-replicas, the reference's
rules (`checkers/replica_logs.py`) to the letter, computed from the collected data dirs read by Spark.

The driver lists the replica directories (names and the HW checkpoints: `list_replicas`, the same
list the reference reads) and reads no log. Spark reads the segments, one task per replica, with
kafka.record through `replica_logs.iter_replica_records` (the reference's own reading rule: good
batches up to the first CRC failure, control batches hold no values) into rows of (replica, offset,
leader epoch, value), plus one summary row per replica (log start and end, records, problems). Then,
in one more action, each a collect of small results:

* log-divergence: the records grouped by (partition, offset) give how many of the replicas that
  cover the offset hold a value there, and the least and greatest value; a broadcast join with the
  few replicas counts the covering ones. Two covering replicas differ exactly when some hold a
  value and others none, or the least and greatest values differ. The same over the replicas that
  are not a lagging replica's pending tail (outside the final ISR, at or above its HW) says whether
  the offset counts or only goes to `notes`. Examples: the 20 first offsets, with every covering
  replica's value; every divergent offset as ranges (`stats.replicas`).
* lost-committed-on-replicas: the acks (from the history's Parquet form: the engine's own acks)
  joined with their partition's leader and anti-joined, by value, with the leader's records; the
  acked offsets each replica does not hold with the acked value (`absent_acked`) by a join on
  (replica, offset), as ranges.

Values compare exactly: an ASCII decimal value as a long; anything else (what `decode_value` shows
as a short repr, or a decimal beyond 64 bits) as text, compared as text only when a replica holds
such a value (Spark aggregates longs by hash, text by sorting).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial, reduce
from pathlib import Path
from typing import TYPE_CHECKING, Any

from checkers.catalogue import MAX_EXAMPLES, REPLICA_ANOMALIES, AnomalyResult
from checkers.data_dirs import LEADER_EPOCH_CHECKPOINT, CheckpointError, read_epoch_checkpoint
from checkers.evidence import ReplicaView, epochs_of
from checkers.parquet_schema import F_CODES, OUTCOME_CODES
from checkers.replica_logs import (
    ReplicaDir,
    ReplicaFindings,
    TopicPartition,
    Value,
    assignments_from_state,
    divergence_example,
    follow_assignment,
    isrs_from_state,
    leaders_from_state,
    list_replicas,
    missing_replicas,
    partition_summary,
    pending_note,
)
from checkers.replica_rows import ROWS_SCHEMA, join_value, read_replica_rows
from checkers.rules import log_divergence, lost_committed
from checkers.rules.rows import LeaderAck, ReplicaPosition
from checkers.spark_columns import SQL, columns_of, expr
from checkers.spark_session import Persisted, read_form

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger(__name__)

# Up to this many wrong positions are collected at once; more are streamed in order.
ON_DRIVER = 100_000
# Replicas whose segments hold at most this many bytes in all are read in the driver.
READ_HERE_BYTES = 32 << 20
# A value's kind: none (no record, or a record without value), a long, or text.
NONE, LONG, TEXT = 0, 1, 2


@dataclass
class _Replica:
    """One listed replica, its place among its partition's replicas, and what its summary said."""

    id: int
    dir: ReplicaDir
    slot: int = 0
    log_start: int = 0
    log_end: int = 0
    records: int = 0
    problems: tuple[str, ...] = ()
    first_of_epoch: dict[int, int] = field(default_factory=dict)  # batch leader epoch -> least offset

    @property
    def node(self) -> str:
        return self.dir.node


def history_tp(topics: list[str], topic: str, partition: int) -> int | None:
    """The history's Parquet `tp` of a topic-partition (`checkers.parquet_links.TopicIds`)."""
    if topic not in topics:
        return None
    return (topics.index(topic) << 32) + partition + (1 << 31)


def check_replicas(
    spark: SparkSession, nodes_dir: Path, operations_path: str | None, topics: list[str], **settings: Any
) -> ReplicaFindings:
    """`checkers.replica_logs.check_replica_logs`, computed by Spark (see the module docstring);
    `settings` as `judged_replicas` takes them."""
    with judged_replicas(spark, nodes_dir, operations_path, topics, **settings) as (findings, _):
        return findings


Views = Callable[[dict[TopicPartition, set[int]]], dict[TopicPartition, list[ReplicaView]]]


@contextmanager
def judged_replicas(
    spark: SparkSession,
    nodes_dir: Path,
    operations_path: str | None,
    topics: list[str],
    *,
    final_state: Any = None,
    expected: Iterable[TopicPartition] = (),
    replication_factor: int = 1,
    brokers: Iterable[str] | None = None,
) -> Iterator[tuple[ReplicaFindings, Views]]:
    """The replica-log findings, and while inside, the replicas' views for evidence.json at some
    offsets (the replicas' records stay cached until the end).

    `operations_path`: the history's Parquet operations (the acks; None: no history to judge
    against), `topics`: its topic names by id."""
    listed, incomplete = list_replicas(nodes_dir, brokers)
    node_names = [p.name for p in nodes_dir.iterdir()] if nodes_dir.is_dir() else []
    dirs: dict[TopicPartition, list[ReplicaDir]] = {}
    for d in listed:
        dirs.setdefault((d.topic, d.partition), []).append(d)
    notes: list[str] = []
    if final_state is not None:
        dirs = follow_assignment(dirs, assignments_from_state(final_state, node_names), notes)
    if nodes_dir.is_dir():
        incomplete += missing_replicas(dirs, expected, replication_factor)
    replicas = [_Replica(i, d) for i, d in enumerate(d for same in dirs.values() for d in same)]
    by_tp: dict[TopicPartition, list[_Replica]] = {}
    for r in replicas:
        same = by_tp.setdefault((r.dir.topic, r.dir.partition), [])
        r.slot = len(same)
        same.append(r)
    leaders = leaders_from_state(final_state, node_names) if final_state is not None else {}
    isrs = isrs_from_state(final_state, node_names) if final_state is not None else {}
    if not replicas:
        anomalies: dict[str, AnomalyResult] = {
            name: {"count": 0, "examples": []} for name in REPLICA_ANOMALIES
        }
        yield ReplicaFindings(anomalies, {}, incomplete, notes, {}), lambda _: {}
        return
    job = _Job(spark, replicas, by_tp, leaders, isrs, topics)
    try:
        yield job.run(operations_path, incomplete, notes), job.views
    finally:
        job.close()


@dataclass
class _Found:
    """The findings, as the wrong positions come in (and the lost acks)."""

    divergent: int = 0
    divergent_ranges: dict[TopicPartition, list[list[int]]] = field(default_factory=dict)
    at: dict[tuple[int, int], dict[int, Value]] = field(default_factory=dict)  # examples: slot -> value
    pending: dict[TopicPartition, dict[str, tuple[int, int, int]]] = field(default_factory=dict)
    absent: dict[tuple[TopicPartition, int], list[list[int]]] = field(default_factory=dict)
    lost: int = 0
    lost_examples: list[dict[str, Any]] = field(default_factory=list)
    lost_by_second: dict[int, int] = field(default_factory=dict)


@dataclass(eq=False)
class _Job:
    """The Spark side of one replica check: read and summarize (action 1), judge (action 2)."""

    spark: SparkSession
    replicas: list[_Replica]
    by_tp: dict[TopicPartition, list[_Replica]]
    leaders: dict[TopicPartition, str]
    isrs: dict[TopicPartition, set[str]]
    topics: list[str]
    persisted: Persisted = field(default_factory=Persisted, init=False)
    chosen: dict[TopicPartition, tuple[_Replica, bool]] = field(default_factory=dict, init=False)
    records: DataFrame | None = field(default=None, init=False)  # (replica, offset, epoch, value, other)
    read_here: bool | None = field(default=None, init=False)  # the logs are read in this process

    def __post_init__(self) -> None:
        # Partitions in (topic, partition) order: ordering by this id is the examples' order.
        self.tp_ids = {tp: i for i, tp in enumerate(sorted(self.by_tp))}
        self.tp_of = {i: tp for tp, i in self.tp_ids.items()}
        self.slots = max(len(rs) for rs in self.by_tp.values())

    def close(self) -> None:
        self.persisted.release()

    def _read(self, ids: list[int], last_of_each: bool = False) -> DataFrame:
        """These replicas' rows (`read_replica_rows`): read by Spark's Python workers (replicas
        spread over the tasks), or, when the data dirs are small, here, handed to Spark as Arrow
        (starting Python workers would cost more than reading)."""
        paths = [str(r.dir.path) for r in self.replicas]
        if self._small():
            import pyarrow as pa

            batches = list(
                read_replica_rows(paths, [pa.record_batch({"id": ids})], last_of_each=last_of_each)
            )
            return self.spark.createDataFrame(pa.Table.from_batches(batches))
        if len(ids) == len(paths):  # every replica: spread over the tasks
            tasks = max(1, min(len(ids), 2 * int(self.spark.conf.get("spark.sql.shuffle.partitions") or 2)))
            numbers = self.spark.range(0, len(ids), 1, tasks)
        else:
            numbers = self.spark.createDataFrame([(i,) for i in ids], "id LONG")
        read = partial(read_replica_rows, paths, last_of_each=last_of_each)
        return self.persisted.keep(numbers.mapInArrow(read, ROWS_SCHEMA))

    def _small(self) -> bool:
        """The replicas' logs are small enough to read in this process (READ_HERE_BYTES in all)."""
        if self.read_here is None:
            total = 0
            for r in self.replicas:
                total += sum(f.stat().st_size for f in r.dir.path.glob("*.log"))
            self.read_here = total <= READ_HERE_BYTES
        return self.read_here

    def run(self, operations_path: str | None, incomplete: list[str], notes: list[str]) -> ReplicaFindings:
        """The findings; `notes` so far (the copies set aside) come first."""
        from pyspark.sql import functions as F

        col = F.col
        rows = self._read([r.id for r in self.replicas])
        # --- Action 1: each replica's summary ----------------------------------------------------
        unordered: list[int] = []
        texts = 0
        for s in rows.filter(col("summary")).collect():
            r = self.replicas[s["replica"]]
            r.log_start, r.log_end = int(s["log_start"]), int(s["log_end"])
            r.records = int(s["records"] or 0)
            r.problems = tuple(s["problems"] or ())
            r.first_of_epoch = {int(e["epoch"]): int(e["offset"]) for e in s["epochs"] or []}
            texts += int(s["others"] or 0)
            if not s["ordered"]:
                unordered.append(r.id)
        records = rows.filter(~col("summary")).select("replica", "offset", "epoch", "value", "other")
        if unordered:
            records = self._reread_unordered(records, unordered)
        self.records = records
        self.chosen = {tp: self._choose_leader(tp, rs) for tp, rs in self.by_tp.items()}

        # --- Action 2: everything judged per position; the wrong positions, in order (a few, collected
        # without a count before them; streamed when many) ---------------------------------------
        acks = self._acks(operations_path) if operations_path is not None else None
        wrong = self._wrong_positions(records, acks, texts > 0)
        found = _Found()
        few = wrong.limit(ON_DRIVER + 1).collect()
        ordered: Iterable[Any] = sorted(few, key=lambda r: (r["tp"], r["offset"]))
        if len(few) > ON_DRIVER:
            ordered = wrong.orderBy("tp", "offset").toLocalIterator()
        suspect = False
        for row in ordered:
            suspect = suspect or bool(row["suspect"])
            self._take(found, row, texts > 0)
        if acks is not None and suspect:
            # --- Action 3: which suspect acks are nowhere in the leader's log --------------------
            self._lost(found, wrong, records, acks)
        return self._findings(found, incomplete, notes)

    def views(self, offsets: dict[TopicPartition, set[int]]) -> dict[TopicPartition, list[ReplicaView]]:
        """Each judged replica as the report draws it (`checkers.evidence.ReplicaView`), with its
        records at `offsets` (one small job; none without offsets)."""
        from pyspark.sql import functions as F

        col = F.col
        held: dict[int, dict[int, tuple[Value, int]]] = {}
        wanted = [(r, sorted(offsets[tp])) for tp, rs in self.by_tp.items() if offsets.get(tp) for r in rs]
        if wanted and self.records is not None:
            condition = reduce(
                lambda a, b: a | b,
                [(col("replica") == r.id) & col("offset").isin(at) for r, at in wanted],
            )
            for row in self.records.filter(condition).collect():
                held.setdefault(row["replica"], {})[row["offset"]] = (
                    join_value(row["value"], row["other"]),
                    int(row["epoch"]),
                )
        out: dict[TopicPartition, list[ReplicaView]] = {}
        for tp, rs in sorted(self.by_tp.items()):
            out[tp] = [
                ReplicaView(
                    node=r.node,
                    log_start=r.log_start,
                    log_end=r.log_end,
                    high_watermark=r.dir.high_watermark,
                    epochs=epochs_of(_checkpoint(r.dir.path), r.first_of_epoch),
                    problem="; ".join(r.problems[:3]) or None,
                    records=held.get(r.id, {}),
                )
                for r in rs
            ]
        return out

    # --- the pieces ------------------------------------------------------------------------------

    def _reread_unordered(self, records: DataFrame, unordered: list[int]) -> DataFrame:
        """A replica whose log repeats offsets is read again keeping, per offset, the record read
        last (as the reference's dict does); its records count is then the distinct offsets."""
        from pyspark.sql import functions as F

        col = F.col
        again = self._read(unordered, last_of_each=True)
        for row in again.filter(col("summary")).select("replica", "records").collect():
            self.replicas[row["replica"]].records = int(row["records"])
        kept = again.filter(~col("summary")).select("replica", "offset", "epoch", "value", "other")
        return records.filter(~col("replica").isin(unordered)).unionByName(kept)

    def _choose_leader(self, tp: TopicPartition, rs: list[_Replica]) -> tuple[_Replica, bool]:
        """`replica_logs.choose_leader` over the summaries."""
        named = self.leaders.get(tp)
        if named is not None:
            for r in rs:
                if r.node == named:
                    return r, True
        return min(rs, key=lambda r: (-r.log_end, r.node)), False

    def _pending_from(self, tp: TopicPartition, r: _Replica) -> int | None:
        """The offset from which the replica's records are a pending tail (`_pending_tail`), if any."""
        isr = self.isrs.get(tp)
        if isr is None or r.node in isr or r.dir.high_watermark is None:
            return None
        return r.dir.high_watermark

    def _acks(self, operations_path: str) -> DataFrame | None:
        """The history's acks (the engine's own: `checkers/spark_engine.py`) on the partitions with
        replicas, with the partition's number here (None: no ack names one)."""
        from pyspark.sql import functions as F

        col = F.col
        ack = (
            (col("f_code") == F_CODES.index("send"))
            & col("value").isNotNull()
            & (col("outcome_code") == OUTCOME_CODES.index("ok"))
            & (col("offset") >= 0)
            & col("tp").isNotNull()
        )
        known = {h: i for tp, i in self.tp_ids.items() if (h := history_tp(self.topics, *tp)) is not None}
        if not known:
            return None
        tp = F.element_at(
            F.create_map(*[F.lit(x) for pair in sorted(known.items()) for x in pair]), col("tp")
        )
        return (
            read_form(self.spark, operations_path)
            .filter(ack & col("tp").isin(list(known)))
            .select("index", "process", tp.cast("int").alias("tp"), "offset", "value", "time")
        )

    def _by_tp(self, values: list[Any], kind: str) -> Column:
        """A per-partition value (`values[tp]`) looked up for each row's `tp` (a literal array: no
        join, no broadcast)."""
        from pyspark.sql import functions as F

        return F.element_at(F.array(*[F.lit(v).cast(kind) for v in values]), F.col("tp") + 1)

    def _partition_columns(self) -> list[Column]:
        """Per partition: each slot's log start and end and pending tail start; the leader's slot
        and log start (as `_by_tp` lookups)."""
        ordered = [self.by_tp[self.tp_of[i]] for i in range(len(self.tp_of))]
        leaders = [self.chosen[self.tp_of[i]][0] for i in range(len(self.tp_of))]
        columns = [
            self._by_tp([r.slot for r in leaders], "int").alias("leader_slot"),
            self._by_tp([r.log_start for r in leaders], "long").alias("leader_start"),
        ]
        for k in range(self.slots):
            slot = [rs[k] if k < len(rs) else None for rs in ordered]
            columns += [
                self._by_tp([r.log_start if r else None for r in slot], "long").alias(f"st{k}"),
                self._by_tp([r.log_end if r else None for r in slot], "long").alias(f"en{k}"),
                self._by_tp(
                    [self._pending_from(self.tp_of[i], r) if r else None for i, r in enumerate(slot)], "long"
                ).alias(f"pf{k}"),
            ]
        return columns

    def _wrong_positions(self, records: DataFrame, acks: DataFrame | None, texts: bool) -> DataFrame:
        """The (partition, offset) positions where something is wrong (normally none), each with
        every slot's value there and what is wrong (`_flags`), from one row per position that a
        replica holds or an ack names [the one shuffle]; cached."""
        from pyspark.sql import functions as F

        col = F.col
        of_replica = [(self.tp_ids[(r.dir.topic, r.dir.partition)], r.slot) for r in self.replicas]
        kind = F.when(col("value").isNotNull(), LONG).when(col("other").isNotNull(), TEXT)
        held = records.select(
            F.element_at(F.array(*[F.lit(t) for t, _ in of_replica]), col("replica") + 1).alias("tp"),
            "offset",
            F.element_at(F.array(*[F.lit(k) for _, k in of_replica]), col("replica") + 1).alias("slot"),
            kind.alias("kind"),
            "value",
            "other",
            F.lit(None).cast("long").alias("acked"),
        )
        if acks is not None:
            held = held.unionByName(
                acks.select(
                    "tp",
                    "offset",
                    F.lit(None).cast("int").alias("slot"),
                    F.lit(None).cast("int").alias("kind"),
                    F.lit(None).cast("long").alias("value"),
                    F.lit(None).cast("string").alias("other"),
                    col("value").alias("acked"),
                )
            )
        aggs = []
        for k in range(self.slots):
            mine = col("slot") == k
            aggs += [
                F.max(F.when(mine, col("kind"))).alias(f"kd{k}"),
                F.max(F.when(mine, col("value"))).alias(f"v{k}"),
            ]
            if texts:
                aggs.append(F.max(F.when(mine, col("other"))).alias(f"t{k}"))
        aggs += [
            F.count("acked").alias("acks"),
            F.min("acked").alias("ack_lo"),
            F.max("acked").alias("ack_hi"),
        ]
        per_offset = held.groupBy("tp", "offset").agg(*aggs)
        per_offset = per_offset.select("*", *self._partition_columns())
        flagged = self._flags(per_offset, texts)
        wrong = col("divergent") | col("suspect")
        for k in range(self.slots):
            wrong = wrong | col(f"absent{k}")
        return self.persisted.keep(flagged.filter(wrong))

    def _flags(self, df: DataFrame, texts: bool) -> DataFrame:
        """The rules at one position, as columns over its slots (docs: checkers/replica_logs.py):

        * `divergent`: two covering slots hold different records (none counts as a record);
          `counted`: also among the covering slots that are not a pending tail;
        * `pend{k}`: slot k is a pending tail at an offset only such tails make divergent;
        * `absent{k}`: an ack names the offset, at or past slot k's log start, and slot k does not
          hold the acked value (every ack's value, when several name it);
        * `suspect`: an ack names the offset, at or past the leader's log start, and the leader
          does not hold the acked value there: the ack is lost unless the value is elsewhere in
          the leader's log (decided by value, for these acks only).
        """
        from pyspark.sql import functions as F

        col = F.col
        o = col("offset")
        n = self.slots
        covers = [col(f"st{k}").isNotNull() & (col(f"st{k}") <= o) & (o < col(f"en{k}")) for k in range(n)]
        pending = [col(f"pf{k}").isNotNull() & (o >= col(f"pf{k}")) for k in range(n)]

        def same(i: int, j: int) -> Column:
            eq = col(f"kd{i}").eqNullSafe(col(f"kd{j}")) & col(f"v{i}").eqNullSafe(col(f"v{j}"))
            return eq & col(f"t{i}").eqNullSafe(col(f"t{j}")) if texts else eq

        def differ(among: list[Column]) -> Column:
            pairs = [among[i] & among[j] & ~same(i, j) for i in range(n) for j in range(i + 1, n)]
            return reduce(lambda a, b: a | b, pairs, F.lit(False))

        covering = reduce(lambda a, b: a + b, [F.when(c, 1).otherwise(0) for c in covers], F.lit(0))
        settled = [c & ~p for c, p in zip(covers, pending, strict=True)]

        def holds_acked(k: int) -> Column:
            v = col(f"v{k}")
            return (col(f"kd{k}") == LONG) & (v == col("ack_lo")) & (v == col("ack_hi"))

        acked = col("acks") > 0
        leader_kd = F.coalesce(*[F.when(col("leader_slot") == k, col(f"kd{k}")) for k in range(n)])
        leader_v = F.coalesce(*[F.when(col("leader_slot") == k, col(f"v{k}")) for k in range(n)])
        leader_holds = (leader_kd == LONG) & (leader_v == col("ack_lo")) & (leader_v == col("ack_hi"))
        facts = [
            covering.alias("covering"),
            differ(covers).alias("differ"),
            differ(settled).alias("differ_settled"),
            (acked & (o >= col("leader_start")) & ~F.coalesce(leader_holds, F.lit(False))).alias("suspect"),
        ]
        for k in range(n):
            facts.append((covers[k] & pending[k]).alias(f"tail{k}"))
            mine = acked & col(f"st{k}").isNotNull() & (o >= col(f"st{k}"))
            facts.append((mine & ~F.coalesce(holds_acked(k), F.lit(False))).alias(f"absent{k}"))
        keep = (
            [f"kd{k}" for k in range(n)]
            + [f"v{k}" for k in range(n)]
            + ([f"t{k}" for k in range(n)] if texts else [])
        )
        # log-divergence's rule (`checkers/rules/log_divergence.py`) over this position's facts;
        # where the replicas differ but only a pending tail makes them, the tail goes to `notes`.
        counted = expr(log_divergence.RULE.holds(SQL, columns_of(ReplicaPosition)))
        divergent = (col("covering") >= 2) & col("differ")
        return df.select("tp", "offset", *keep, *facts).select(
            "tp",
            "offset",
            *keep,
            divergent.alias("divergent"),
            counted.alias("counted"),
            "suspect",
            *[(divergent & ~counted & col(f"tail{k}")).alias(f"pend{k}") for k in range(n)],
            *[f"absent{k}" for k in range(n)],
        )

    def _take(self, found: _Found, row: Any, texts: bool) -> None:
        """One wrong position (they come in (partition, offset) order) into the findings."""
        tp = self.tp_of[row["tp"]]
        offset = row["offset"]
        if row["counted"]:
            found.divergent += 1
            _extend(found.divergent_ranges.setdefault(tp, []), offset)
            if len(found.at) < MAX_EXAMPLES:
                found.at[(row["tp"], offset)] = {
                    k: join_value(row[f"v{k}"], row[f"t{k}"] if texts else None)
                    for k in range(self.slots)
                    if row[f"kd{k}"] is not None
                }
        elif row["divergent"]:
            for k in range(self.slots):
                if row[f"pend{k}"]:
                    node = self.by_tp[tp][k].node
                    n, lo, hi = found.pending.setdefault(tp, {}).get(node, (0, offset, offset))
                    found.pending[tp][node] = (n + 1, min(lo, offset), max(hi, offset))
        for k in range(self.slots):
            if row[f"absent{k}"]:
                _extend(found.absent.setdefault((tp, k), []), offset)

    def _lost(self, found: _Found, wrong: DataFrame, records: DataFrame, acks: DataFrame) -> None:
        """lost-committed-on-replicas: the acks at suspect positions whose value is nowhere in the
        leader's log (a join by value with the leader's records, for those acks only)."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        col = F.col
        suspects = acks.join(
            wrong.filter(col("suspect")).select("tp", "offset"), ["tp", "offset"], "left_semi"
        )
        leaders = {leader.id: self.tp_ids[tp] for tp, (leader, _) in self.chosen.items()}
        tp_of_leader = F.create_map(*[F.lit(x) for pair in sorted(leaders.items()) for x in pair])
        held = records.filter(col("value").isNotNull() & col("replica").isin(list(leaders))).select(
            F.element_at(tp_of_leader, col("replica")).alias("tp"), "value"
        )
        held = held.join(suspects.select("tp", "value"), ["tp", "value"], "left_semi").distinct()
        # lost-committed-on-replicas' rule (`checkers/rules/lost_committed.py`): a suspect ack is
        # absent at its offset; is its value held elsewhere in the leader's log?
        ack = columns_of(LeaderAck, absent="true", held="coalesce(`held`, false)")
        lost = (
            suspects.join(held.withColumn("held", F.lit(True)), ["tp", "value"], "left")
            .filter(expr(lost_committed.RULE.holds(SQL, ack)))
            .drop("held")
        )
        # One shuffle: each second's lost acks, its count and its first examples by index.
        second = F.floor(col("time") / F.lit(1_000_000_000)).alias("second")
        in_second = Window.partitionBy("second")
        firsts = (
            lost.select("*", second)
            .select(
                "*",
                F.count(F.lit(1)).over(in_second).alias("n"),
                F.row_number().over(in_second.orderBy("index")).alias("rank"),
            )
            .filter(col("rank") <= MAX_EXAMPLES)
        )
        for row in firsts.collect():
            if row["rank"] == 1:
                found.lost += int(row["n"])
                found.lost_by_second[int(row["second"])] = int(row["n"])
            tp = self.tp_of[row["tp"]]
            leader, known = self.chosen[tp]
            found.lost_examples.append(
                {
                    "index": row["index"],
                    "process": row["process"],
                    "topic": tp[0],
                    "partition": tp[1],
                    "offset": row["offset"],
                    "value": row["value"],
                    "leader": leader.node,
                    "leader_log_end": leader.log_end,
                    "leader_known": known,
                }
            )
        found.lost_examples = sorted(found.lost_examples, key=lambda e: e["index"])[:MAX_EXAMPLES]

    def _findings(self, found: _Found, incomplete: list[str], notes: list[str]) -> ReplicaFindings:
        """The reference's ReplicaFindings from the findings and the summaries."""
        notes = notes + self._pending_notes(found.pending)
        partitions: dict[str, dict[str, Any]] = {}
        for tp, rs in sorted(self.by_tp.items()):
            leader, known = self.chosen[tp]
            summaries = [
                {
                    "node": r.node,
                    "log_start": r.log_start,
                    "log_end": r.log_end,
                    "high_watermark": r.dir.high_watermark,
                    "records": r.records,
                    "problems": list(r.problems),
                    "absent_acked": found.absent.get((tp, r.slot), []),
                }
                for r in rs
            ]
            partitions[f"{tp[0]}-{tp[1]}"] = partition_summary(
                tp, leader.node, known, found.divergent_ranges.get(tp, []), summaries, notes
            )
        anomalies: dict[str, AnomalyResult] = {
            "log-divergence": {"count": found.divergent, "examples": self._divergence_examples(found.at)},
            "lost-committed-on-replicas": {
                "count": found.lost,
                "examples": sorted(found.lost_examples, key=lambda e: e["index"]),
            },
        }
        by_second = {str(s): n for s, n in sorted(found.lost_by_second.items())}
        return ReplicaFindings(anomalies, partitions, incomplete, notes, by_second)

    def _pending_notes(self, pending: dict[TopicPartition, dict[str, tuple[int, int, int]]]) -> list[str]:
        notes = []
        for tp in sorted(pending):
            for node, offsets in sorted(pending[tp].items()):
                hw = next(r.dir.high_watermark for r in self.by_tp[tp] if r.node == node)
                notes.append(pending_note(tp, node, self.isrs.get(tp), hw, offsets))
        return notes

    def _divergence_examples(self, at: dict[tuple[int, int], dict[int, Value]]) -> list[dict[str, Any]]:
        """The first examples (by partition, then offset), with every covering replica's record."""
        examples = []
        for tp_id, offset in sorted(at):
            tp = self.tp_of[tp_id]
            held = at[(tp_id, offset)]
            covering = [
                (r.node, held.get(r.slot), r.log_end, r.dir.high_watermark)
                for r in self.by_tp[tp]
                if r.log_start <= offset < r.log_end
            ]
            examples.append(divergence_example(tp, offset, covering))
        return examples


def _checkpoint(path: Path) -> list[tuple[int, int]] | None:
    """A replica's leader-epoch-checkpoint entries (None when it has none to read)."""
    try:
        return read_epoch_checkpoint(path / LEADER_EPOCH_CHECKPOINT)
    except CheckpointError as e:
        log.warning("%s", e)
        return None


def _extend(ranges: list[list[int]], offset: int) -> None:
    """Add an offset (they come in increasing order) to inclusive ranges of consecutive offsets."""
    if ranges and offset == ranges[-1][1] + 1:
        ranges[-1][1] = offset
    else:
        ranges.append([offset, offset])
