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
    from pyspark.sql import Column, DataFrame, SparkSession


def java_pattern(patterns: list[re.Pattern[str]]) -> str:
    """One Java regular expression matching what any of the patterns matches (their syntax is the
    common subset: literals, alternatives, groups)."""
    flags = "(?i)" if any(p.flags & re.IGNORECASE for p in patterns) else ""
    return flags + "|".join(f"(?:{p.pattern})" for p in patterns)


def _matching(pattern: str, words: tuple[str, ...]) -> Column:
    """A text line that matches `pattern` (a Java regular expression); with `words` (texts one of
    which is in every line the pattern matches), only a line that holds one is tried. Java's regular
    expressions try a pattern at every position of every line, a plain search skips a line at memory
    speed (a 10,000,000-line history: the refusals' case-insensitive alternation 39 s alone; the
    consumer groups' pattern 16.6 s alone, 8.1 s with its words first)."""
    from functools import reduce

    from pyspark.sql import functions as F

    line = F.col("value")
    if not words:
        return line.rlike(pattern)
    return reduce(lambda a, b: a | b, [line.contains(w) for w in words]) & line.rlike(pattern)


def ops_matching(
    spark: SparkSession, history: str, patterns: list[re.Pattern[str]], words: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    """The history's ops whose line matches one of the patterns (and holds one of `words`, when
    given: see `_matching`), in line order (Spark hands the text's splits back in file order); lines
    that `history.reader.iter_ops` would skip are skipped."""
    if not patterns:
        return []
    ops = []
    for row in spark.read.text(history).filter(_matching(java_pattern(patterns), words)).collect():
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
    that a field has the type it has in the Parquet form. `words`: see `_matching`."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    return (
        spark.read.text(history)
        .filter(_matching(pattern, words))
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
