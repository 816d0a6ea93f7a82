"""A small algebra over columns, so that a rule is written once and every engine evaluates it.

A rule (an anomaly's classification, `checkers/rules/`; the two-log comparisons of `history.logs`)
is a function of an algebra `c` and the fields of a row; each engine brings the algebra of its
column type: `VALUES` here (one row's plain Python values: the reference checker, the simulation),
SQL expression text for Spark (`checkers.spark_columns`). `history.pairing`'s `Logic` is the same
idea for the pairing of lines.

Nulls follow SQL's three-valued logic, as Spark evaluates them: an operation on a null is null, a
comparison with a null is null (not false), `and_` is false when either side is false, `or_` true
when either side is true; a row is counted only where the rule is true.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

E = TypeVar("E")


class Columns(Protocol[E]):
    """The operations a rule may use, over one engine's column type `E`."""

    def lit(self, value: Any) -> E: ...

    def is_null(self, a: E) -> E: ...

    def eq(self, a: E, b: E) -> E: ...

    def lt(self, a: E, b: E) -> E: ...

    def le(self, a: E, b: E) -> E: ...

    def add(self, a: E, b: E) -> E: ...

    def sub(self, a: E, b: E) -> E: ...

    def and_(self, a: E, b: E) -> E: ...

    def or_(self, a: E, b: E) -> E: ...

    def not_(self, a: E) -> E: ...

    def coalesce(self, a: E, b: E) -> E: ...


class Values:
    """`Columns` over one row's plain values (None is null)."""

    def lit(self, value: Any) -> Any:
        return value

    def is_null(self, a: Any) -> bool:
        return a is None

    def eq(self, a: Any, b: Any) -> bool | None:
        return None if a is None or b is None else a == b

    def lt(self, a: Any, b: Any) -> bool | None:
        return None if a is None or b is None else a < b

    def le(self, a: Any, b: Any) -> bool | None:
        return None if a is None or b is None else a <= b

    def add(self, a: Any, b: Any) -> Any:
        return None if a is None or b is None else a + b

    def sub(self, a: Any, b: Any) -> Any:
        return None if a is None or b is None else a - b

    def and_(self, a: bool | None, b: bool | None) -> bool | None:
        if a is False or b is False:
            return False
        return None if a is None or b is None else True

    def or_(self, a: bool | None, b: bool | None) -> bool | None:
        if a is True or b is True:
            return True
        return None if a is None or b is None else False

    def not_(self, a: bool | None) -> bool | None:
        return None if a is None else not a

    def coalesce(self, a: Any, b: Any) -> Any:
        return b if a is None else a


VALUES = Values()


def holds(verdict: Any) -> bool:
    """A rule's result for one row as Python decides it: only true counts (null does not)."""
    return verdict is True
