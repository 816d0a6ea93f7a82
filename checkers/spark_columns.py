"""The column algebra of `history.columns` as Spark SQL text, so Spark evaluates the anomalies'
rules (`checkers/rules/`) as written: a rule over a row of columns becomes one SQL expression,
handed to Spark in one call (`F.expr`), rather than a Column built call by call."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from pyspark.sql import Column

R = TypeVar("R")


class Sql:
    """`history.columns.Columns` over SQL expression text."""

    def lit(self, value: Any) -> str:
        if value is None:
            return "NULL"
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int):
            return str(value)
        if isinstance(value, str):
            return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
        raise TypeError(f"no SQL literal for {value!r}")

    def is_null(self, a: str) -> str:
        return f"({a} IS NULL)"

    def eq(self, a: str, b: str) -> str:
        return f"({a} = {b})"

    def lt(self, a: str, b: str) -> str:
        return f"({a} < {b})"

    def le(self, a: str, b: str) -> str:
        return f"({a} <= {b})"

    def add(self, a: str, b: str) -> str:
        return f"({a} + {b})"

    def sub(self, a: str, b: str) -> str:
        return f"({a} - {b})"

    def and_(self, a: str, b: str) -> str:
        return f"({a} AND {b})"

    def or_(self, a: str, b: str) -> str:
        return f"({a} OR {b})"

    def not_(self, a: str) -> str:
        return f"(NOT {a})"

    def coalesce(self, a: str, b: str) -> str:
        return f"coalesce({a}, {b})"


SQL = Sql()


def columns_of(kind: type[R], **sql: str) -> R:
    """A row of `kind` whose fields are the columns of the same name (or the SQL given)."""
    return kind(**{f.name: sql.get(f.name, f"`{f.name}`") for f in dataclasses.fields(kind)})  # type: ignore[arg-type]


def expr(text: str) -> Column:
    from pyspark.sql import functions as F

    return F.expr(text)
