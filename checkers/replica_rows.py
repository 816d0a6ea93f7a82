"""One replica's log as Arrow rows: what Spark's Python workers (or, for small data dirs, the driver)
read for the replica-log checks of `checkers/spark_replicas.py`.

A replica's records become rows of (replica, offset, leader epoch, value), its log one summary row
(log start and end, records, problems, each leader epoch's first offset), read with the reference's
own reading rule (`replica_logs.iter_replica_records`). Values are split into a long and a text
column (`split_value`), because Spark aggregates longs by hash and text by sorting.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from checkers.replica_logs import ReplicaScan, Value, decode_value, iter_replica_records

if TYPE_CHECKING:
    import pyarrow as pa

# What Spark's reader hands back: record rows (summary false) and one summary row per replica.
ROWS_SCHEMA = (
    "replica INT, offset LONG, epoch INT, value LONG, other STRING, summary BOOLEAN, "
    "log_start LONG, log_end LONG, records LONG, others LONG, ordered BOOLEAN, problems ARRAY<STRING>, "
    "epochs ARRAY<STRUCT<epoch: INT, offset: LONG>>"
)
ROWS_PER_BATCH = 65_536
_LONG = (-(2**63), 2**63)


def split_value(value: Value) -> tuple[int | None, str | None]:
    """A decoded value as (long, text): an int within 64 bits as the long, anything else as text."""
    if isinstance(value, int):
        return (value, None) if _LONG[0] <= value < _LONG[1] else (None, str(value))
    return None, value


def join_value(value: int | None, other: str | None) -> Value:
    """`split_value` undone: the value as the reference shows it."""
    if value is not None:
        return value
    if other is not None and other[:1] in ("-", *"0123456789"):
        return int(other)  # a decimal beyond 64 bits (a repr of bytes starts with b' or b")
    return other


def read_replica_rows(
    paths: list[str], batches: Iterable[pa.RecordBatch], *, last_of_each: bool = False
) -> Iterator[pa.RecordBatch]:
    """mapInArrow's function (with the listed paths bound): for each replica number of `batches`
    (an `id` column), its records and its summary row. `last_of_each`: a log that repeats offsets
    keeps the record read last at each (as `read_replica`'s dict does; the log is held in memory)."""
    for batch in batches:
        for replica in batch.column("id").to_pylist():
            yield from _replica_rows(int(replica), Path(paths[replica]), last_of_each)


def _replica_rows(replica: int, path: Path, last_of_each: bool) -> Iterator[pa.RecordBatch]:
    import pyarrow as pa

    scan = ReplicaScan()
    columns: dict[str, list[Any]] = {"offset": [], "epoch": [], "value": [], "other": []}
    latest: dict[int, tuple[int, int | None, str | None]] = {}
    ordered = True  # offsets strictly increasing (else the driver has the replica read again)
    last = -1
    n_text = count = 0

    def records(n: int) -> pa.RecordBatch:
        batch = pa.record_batch(
            {
                "replica": pa.array([replica] * n, pa.int32()),
                "offset": pa.array(columns["offset"], pa.int64()),
                "epoch": pa.array(columns["epoch"], pa.int32()),
                "value": pa.array(columns["value"], pa.int64()),
                "other": pa.array(columns["other"], pa.string()),
                "summary": pa.array([False] * n, pa.bool_()),
                **{name: pa.nulls(n, pa.int64()) for name in ("log_start", "log_end", "records", "others")},
                "ordered": pa.nulls(n, pa.bool_()),
                "problems": pa.nulls(n, pa.list_(pa.string())),
                "epochs": pa.nulls(n, epochs_type),
            }
        )
        for values in columns.values():
            values.clear()
        return batch

    epochs_type = pa.list_(pa.struct([("epoch", pa.int32()), ("offset", pa.int64())]))
    first_of_epoch: dict[int, int] = {}  # each batch leader epoch's least offset
    for offset, raw, epoch in iter_replica_records(path, scan):
        first_of_epoch[epoch] = min(first_of_epoch.get(epoch, offset), offset)
        ordered = ordered and offset > last
        last = max(last, offset)
        value, other = split_value(decode_value(raw))
        n_text += other is not None
        count += 1
        if last_of_each:
            latest[offset] = (epoch, value, other)
            continue
        for name, x in (("offset", offset), ("epoch", epoch), ("value", value), ("other", other)):
            columns[name].append(x)
        if len(columns["offset"]) >= ROWS_PER_BATCH:
            yield records(ROWS_PER_BATCH)
    if last_of_each:
        for offset, (epoch, value, other) in sorted(latest.items()):
            for name, x in (("offset", offset), ("epoch", epoch), ("value", value), ("other", other)):
                columns[name].append(x)
        count = len(latest)
    if columns["offset"]:
        yield records(len(columns["offset"]))
    yield pa.record_batch(
        {
            "replica": pa.array([replica], pa.int32()),
            "offset": pa.nulls(1, pa.int64()),
            "epoch": pa.nulls(1, pa.int32()),
            "value": pa.nulls(1, pa.int64()),
            "other": pa.nulls(1, pa.string()),
            "summary": pa.array([True]),
            "log_start": pa.array([scan.log_start], pa.int64()),
            "log_end": pa.array([scan.log_end], pa.int64()),
            "records": pa.array([count], pa.int64()),
            "others": pa.array([n_text], pa.int64()),
            "ordered": pa.array([ordered or last_of_each]),
            "problems": pa.array([scan.problems], pa.list_(pa.string())),
            "epochs": pa.array(
                [[{"epoch": e, "offset": o} for e, o in sorted(first_of_epoch.items())]], epochs_type
            ),
        }
    )
