"""The layout of a history's Parquet form: its two tables and the small integer codes Spark compares.

`checkers.parquet` writes this form (Arrow), `checkers.spark_convert` writes the same with Spark,
and the Spark engine reads it; the layout is defined here once for all three.
"""

from __future__ import annotations

import pyarrow as pa

# Bumped whenever the layout or what is derived into it changes: older caches are then rebuilt.
FORMAT_VERSION = 7
# The integer `process` a nemesis line gets while being parsed by Arrow (client processes are >= 0).
NEMESIS_SENTINEL = -(2**62)

META = "meta.json"  # beside the datasets: what the conversion found, and what it was made from


def cache_name(history_name: str) -> str:
    """Where a history's Parquet form is kept, beside it: `history.jsonl` -> `history.parquet`."""
    stem = history_name[: -len(".jsonl")] if history_name.endswith(".jsonl") else history_name
    return stem + ".parquet"


RECORD = pa.struct(
    [("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()), ("value", pa.int64())]
)
READS_SCHEMA = pa.schema(
    [
        ("index", pa.int64()),
        ("process", pa.int64()),
        ("pos", pa.int32()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("value", pa.int64()),
        ("epoch", pa.int64()),
        ("tp", pa.int64()),
        ("prev_offset", pa.int64()),
        ("prev_index", pa.int64()),
    ]
)

OPERATIONS_SCHEMA = pa.schema(
    [
        ("invoke_index", pa.int64()),
        ("process", pa.int64()),
        ("f", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("value", pa.int64()),
        ("index", pa.int64()),
        ("time", pa.int64()),
        ("offset", pa.int64()),
        ("bad_records", pa.bool_()),
        ("outcome", pa.string()),
        ("next_index", pa.int64()),
        ("tp", pa.int64()),
        ("prev_index", pa.int64()),
        ("prev_offset", pa.int64()),
        ("prev_value", pa.int64()),
        ("f_code", pa.int8()),
        ("outcome_code", pa.int8()),
        ("invoke_time", pa.int64()),
        # On an ok send: the completion time of the ok send before it in history order (any process).
        ("prev_ok_time", pa.int64()),
    ]
)
# `f` and `outcome` again as small integers (their index in these), cheaper for Spark to compare.
F_CODES = ("send", "poll", "assign", "crash", "subscribe", "commit", "rebalance", "txn")
OUTCOME_CODES = ("ok", "fail", "info", "open")
TYPE_CODES = ("invoke", "ok", "fail", "info")  # `type` as a small integer while pairing
TYPE_CODE_ARRAY = pa.array(TYPE_CODES)
F_CODE_ARRAY = pa.array(F_CODES)
INVOKE, INFO_ = TYPE_CODES.index("invoke"), TYPE_CODES.index("info")
