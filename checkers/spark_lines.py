"""The few history lines the Parquet form does not carry, found by Spark in the history's text.

The refusals of a system (`checkers/refusals.py`) are read from the `error` of failed operations,
which the Parquet form leaves out. Spark scans the text for the lines that match the refusals'
patterns and hands over only those; the driver reads them with the history reader's own rules.
The transaction and consumer-group rules read their lines' fields as columns (`parsed_lines`).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from history.format import validate

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession


def java_pattern(patterns: list[re.Pattern[str]]) -> str:
    """One Java regular expression matching what any of the patterns matches (their syntax is the
    common subset: literals, alternatives, groups)."""
    flags = "(?i)" if any(p.flags & re.IGNORECASE for p in patterns) else ""
    return flags + "|".join(f"(?:{p.pattern})" for p in patterns)


def ops_matching(
    spark: SparkSession, history: str, patterns: list[re.Pattern[str]], containing: str | None = None
) -> list[dict[str, Any]]:
    """The history's ops whose line matches one of the patterns (and, given `containing`, holds
    that text), in line order (Spark hands the text's splits back in file order); lines that
    `history.reader.iter_ops` would skip are skipped.

    `containing` is searched first, as bytes: a case-insensitive alternation is tried by Java's
    regular expressions at every position of every line (a 10,000,000-line history: 39 s), a
    plain search skips a line at memory speed."""
    from pyspark.sql import functions as F

    if not patterns:
        return []
    line = F.col("value")
    wanted = line.rlike(java_pattern(patterns))
    if containing is not None:
        wanted = line.contains(containing) & wanted
    ops = []
    for row in spark.read.text(history).filter(wanted).collect():
        try:
            record = json.loads(row["value"])
        except json.JSONDecodeError:
            continue
        if validate(record) is None:
            ops.append(record)
    return ops


def parsed_lines(
    spark: SparkSession, history: str, pattern: str, fields: pa.Schema, words: tuple[str, ...] = ()
) -> DataFrame:
    """The history's lines that match `pattern` (a Java regular expression), parsed by Spark's JSON
    reader into the columns of `fields`: an Arrow schema of `checkers.parquet_schema.columns`, so
    that a field has the type it has in the Parquet form.

    `words`: texts one of which is in every line the pattern matches, searched first (as in
    `ops_matching`: a 10,000,000-line history's scan for the consumer groups' lines took 16.6 s with
    the pattern alone, 8.1 s with their words first)."""
    from functools import reduce

    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    line = F.col("value")
    wanted = line.rlike(pattern)
    if words:
        wanted = reduce(lambda a, b: a | b, [line.contains(w) for w in words]) & wanted
    return (
        spark.read.text(history)
        .filter(wanted)
        .select(F.from_json("value", from_arrow_schema(fields)).alias("op"))
        .select("op.*")
    )


def whole_records(records: DataFrame) -> DataFrame:
    """The polled records (rows read from the history's text) that name all four of topic,
    partition, offset and value; the read rules of the consumer groups and of transactions judge
    only those."""
    from pyspark.sql import functions as F

    return records.filter(
        F.col("topic").isNotNull()
        & F.col("partition").isNotNull()
        & F.col("offset").isNotNull()
        & F.col("value").isNotNull()
    )
