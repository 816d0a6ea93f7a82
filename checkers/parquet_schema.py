"""The layout of a history's Parquet form: its two tables and the small integer codes Spark compares.

`checkers.parquet` writes this form (Arrow), `checkers.spark_convert` writes the same with Spark,
and the Spark engine reads it; the layout is defined here once for all three, and so is the type
of each column, which the tables built on the way to the form and the Spark jobs that read history
lines again use too.
"""

from __future__ import annotations

import pyarrow as pa

# Bumped whenever the layout or what is derived into it changes: older caches are then rebuilt.
FORMAT_VERSION = 8
# The integer `process` a nemesis line gets while being parsed by Arrow (client processes are >= 0).
NEMESIS_SENTINEL = -(2**62)

META = "meta.json"  # beside the datasets: what the conversion found, and what it was made from
LINES = "lines.json"  # beside them: where some of the history's lines start (`parquet_lines.line_marks`)


def cache_name(history_name: str) -> str:
    """Where a history's Parquet form is kept, beside it: `history.jsonl` -> `history.parquet`."""
    stem = history_name[: -len(".jsonl")] if history_name.endswith(".jsonl") else history_name
    return stem + ".parquet"


# The Arrow type of every column the checkers' tables have: a history line's fields, and what the
# conversion derives from them. Every schema names its columns (`columns`), so a column has the same
# type in each table, and in the Spark schemas derived from these (`checkers.spark_lines`).
COLUMN_TYPES: dict[str, pa.DataType] = {
    # a history line's fields
    "index": pa.int64(),
    "time": pa.int64(),
    "process": pa.int64(),
    "type": pa.string(),
    "f": pa.string(),
    "topic": pa.string(),
    "partition": pa.int32(),
    "offset": pa.int64(),
    "value": pa.int64(),
    "bad_records": pa.bool_(),
    "group": pa.string(),
    "final": pa.bool_(),
    # derived: positions, links and codes
    "invoke_index": pa.int64(),
    "invoke_time": pa.int64(),
    "outcome": pa.string(),
    "next_index": pa.int64(),
    "pos": pa.int32(),
    "epoch": pa.int64(),
    "carried": pa.bool_(),
    "tp": pa.int64(),
    "prev_index": pa.int64(),
    "prev_offset": pa.int64(),
    "prev_value": pa.int64(),
    "prev_ok_time": pa.int64(),
    "f_code": pa.int8(),
    "outcome_code": pa.int8(),
}


def columns(*names: str | tuple[str, pa.DataType]) -> list[tuple[str, pa.DataType]]:
    """(name, type) of each column in this order: its type in COLUMN_TYPES, or the one given with
    the name, for a column of one table only or one a table holds in another form (the pairing
    carries `type` and `f` as their codes)."""
    return [name if isinstance(name, tuple) else (name, COLUMN_TYPES[name]) for name in names]


RECORD = pa.struct(columns("topic", "partition", "offset", "value"))  # one polled record
COLUMN_TYPES["records"] = pa.list_(RECORD)  # a poll's

READS_SCHEMA = pa.schema(
    columns(
        "index",
        "process",
        "pos",
        "topic",
        "partition",
        "offset",
        "value",
        "epoch",
        "tp",
        "prev_offset",
        "prev_index",
    )
)

OPERATIONS_SCHEMA = pa.schema(
    columns(
        "invoke_index",
        "process",
        "f",
        "topic",
        "partition",
        "value",
        "index",
        "time",
        "offset",
        "bad_records",
        "outcome",
        "next_index",
        "tp",
        "prev_index",
        "prev_offset",
        "prev_value",
        "f_code",
        "outcome_code",
        "invoke_time",
        # On an ok send: the completion time of the ok send before it in history order (any process).
        "prev_ok_time",
    )
)
# `f` and `outcome` again as small integers (their index in these), cheaper for Spark to compare.
F_CODES = ("send", "poll", "assign", "crash", "subscribe", "commit", "rebalance", "txn")
OUTCOME_CODES = ("ok", "fail", "info", "open")
TYPE_CODES = ("invoke", "ok", "fail", "info")  # `type` as a small integer while pairing
TYPE_CODE_ARRAY = pa.array(TYPE_CODES)
F_CODE_ARRAY = pa.array(F_CODES)
INVOKE, INFO_ = TYPE_CODES.index("invoke"), TYPE_CODES.index("info")
