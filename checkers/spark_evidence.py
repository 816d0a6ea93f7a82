"""The Spark checker's part of evidence.json (`checkers.evidence`): what the report quotes, found
without a pass over the history.

One Spark job over the Parquet form's operations finds the send operations of the wanted values
(the last invocation carrying each) and the first ack at each wanted offset; the history lines
wanted (the examples' indices, and those sends' invocations and completions) are then read where
they are, by the line marks the conversion noted (`history.reader.ops_at`): a few KiB each. A form
converted by Spark (a history on another filesystem) has no marks: Spark finds the lines in the
text. The replicas' views come from the replica-log job (`checkers.spark_replicas`).
"""

from __future__ import annotations

import json
import re
from functools import reduce
from pathlib import Path
from typing import TYPE_CHECKING, Any

from checkers.evidence import Found, TopicPartition, Wanted, quoted, send_of, value_key
from checkers.parquet_schema import F_CODES, OUTCOME_CODES
from checkers.spark_engine import ParquetForm
from checkers.spark_lines import ops_matching
from checkers.spark_replicas import history_tp
from checkers.spark_session import read_form
from history.reader import ops_at

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_SEND = F_CODES.index("send")
_OK, _OPEN = OUTCOME_CODES.index("ok"), OUTCOME_CODES.index("open")


def find_in_form(
    spark: SparkSession,
    form: ParquetForm,
    history: str,
    want: Wanted,
    acked_at: dict[TopicPartition, list[int]],
) -> Found:
    """The wanted lines, the last send of each wanted value, and the first value acknowledged at
    each of `acked_at`'s offsets (the reference's `find_in_history`, from the Parquet form)."""
    from pyspark.sql import functions as F

    col = F.col
    found = Found()
    topics = form.topics or []
    tp_of: dict[int, TopicPartition] = {}
    conditions = []
    values = want.int_values
    is_send = col("f_code") == _SEND
    if values:
        conditions.append(is_send & col("value").isin(values))
    ack = is_send & col("value").isNotNull() & (col("outcome_code") == _OK) & (col("offset") >= 0)
    for (topic, partition), offsets in acked_at.items():
        tp = history_tp(topics, topic, partition)
        if tp is not None and offsets:
            tp_of[tp] = (topic, partition)
            conditions.append(ack & (col("tp") == tp) & col("offset").isin(offsets))
    sends: dict[str, tuple[int, int | None]] = {}  # value -> (invoke index, completion index)
    if conditions:
        rows = (
            read_form(spark, form.operations_path)
            .filter(reduce(lambda a, b: a | b, conditions))
            .select("invoke_index", "index", "value", "tp", "offset", "outcome_code", "f_code")
            .collect()
        )
        for r in sorted(rows, key=lambda r: r["invoke_index"]):
            key = value_key(r["value"])
            if key in want.values:
                done = r["index"] if r["outcome_code"] != _OPEN else None
                sends[key] = (r["invoke_index"], done)
        for r in sorted(rows, key=lambda r: r["index"] if r["index"] is not None else -1):
            where = tp_of.get(r["tp"]) if r["tp"] is not None else None
            if where is None or r["outcome_code"] != _OK or r["offset"] not in acked_at[where]:
                continue
            found.acked.setdefault(where, {}).setdefault(r["offset"], r["value"])
    indices = set(want.indices)
    for invoked, done in sends.values():
        indices.add(invoked)
        if done is not None:
            indices.add(done)
    lines = _lines(spark, form, history, indices)
    found.ops = {i: quoted(lines[i]) for i in sorted(want.indices) if i in lines}
    for key, (invoked, done) in sends.items():
        if invoked in lines:
            found.sends[key] = send_of(lines[invoked], lines.get(done) if done is not None else None)
    return found


def _lines(
    spark: SparkSession, form: ParquetForm, history: str, indices: set[int]
) -> dict[int, dict[str, Any]]:
    """The history's ops at these indices (the first line of each index)."""
    if not indices:
        return {}
    if form.lines_path is not None and Path(form.lines_path).is_file():
        marks = [(int(i), int(o)) for i, o in json.loads(Path(form.lines_path).read_text())]
        return ops_at(history, marks, indices)
    pattern = re.compile(r'"index"\s*:\s*(' + "|".join(str(i) for i in sorted(indices)) + r")\b")
    out: dict[int, dict[str, Any]] = {}
    for op in ops_matching(spark, history, [pattern]):
        if op["index"] in indices:
            out.setdefault(op["index"], op)
    return out
