"""The rules of `checkers/rules/` evaluated over plain Python values, as the reference checker (and
the transaction and replica-log checks it shares with Spark) evaluates them: a row of a kind,
each rule of that kind asked whether it holds (`history.columns.VALUES`), the examples kept."""

from __future__ import annotations

from typing import Any

from checkers.catalogue import MAX_EXAMPLES, AnomalyResult, select_examples
from checkers.rules import of_row
from history.columns import VALUES, holds


class Examples:
    """Counts occurrences of one anomaly and keeps its smallest examples, in bounded memory."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.count = 0
        self._kept: list[dict[str, Any]] = []

    def add(self, example: dict[str, Any]) -> None:
        self.count += 1
        self._kept.append(example)
        if len(self._kept) >= 8 * MAX_EXAMPLES:
            self._kept = select_examples(self.name, self._kept)

    def add_all(self, examples: list[dict[str, Any]]) -> None:
        """Examples of occurrences counted elsewhere (`count` is set by the caller)."""
        self._kept = select_examples(self.name, self._kept + examples)

    def result(self) -> AnomalyResult:
        return {"count": self.count, "examples": select_examples(self.name, self._kept)}


def classify(
    found: dict[str, Examples], kind: type, row: Any, example_rows: dict[type, Any] | None = None
) -> list[str]:
    """Each rule of the row's kind (`checkers/rules/`) that holds for it adds its example (from the
    row, or from the one `example_rows[rule.example_row]()` builds); the names of those that held."""
    held = []
    for rule in of_row(kind):
        if holds(rule.holds(VALUES, row)):
            source = (
                row if rule.example_row is None or example_rows is None else example_rows[rule.example_row]()
            )
            found.setdefault(rule.name, Examples(rule.name)).add(rule.example_of(VALUES, source))
            held.append(rule.name)
    return held
