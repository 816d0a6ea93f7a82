"""An anomaly's record: what its module under `checkers/rules/` declares once, and everything else
(the catalogue, the verdict, the report, docs/checkers.md) takes from it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

Source = Literal["history", "replicas"]
# "presence": the history lines that show it cannot be undone by lines the history lacks (a torn
# tail); "absence": it claims something never happened, so a missing line could refute it.
Evidence = Literal["presence", "absence"]
# A place in a partition's log: where acks, reads and commits are compared.
POSITION = ("topic", "partition", "offset")
# Where a record was acknowledged or read: the fields most examples start with.
RECORD = ("index", "process", *POSITION, "value")
# Where a group committed an offset: the fields the group anomalies' examples start with.
COMMIT = ("index", "process", "group", *POSITION)
# An ack never read: lost-write's and unseen's examples.
NEVER_READ = ("index", "invoke_index", "process", *POSITION, "value", "max_read_offset")
# A read linked to its process's previous one: the poll anomalies' examples, and their order.
LINKED_READ = ("index", "process", *POSITION, "prev_offset", "prev_index")
LINKED_ORDER = ("index", *POSITION, "prev_offset", "prev_index")
# A component of the transactions' dependencies: the cycle anomalies' examples.
CYCLE = ("index", "size", "cycle", "steps")


def example_start(fields: tuple[str, ...], *values: Any) -> dict[str, Any]:
    """An example's leading fields (RECORD or COMMIT) in their order; the engine adds its anomaly's own."""
    return dict(zip(fields, values, strict=True))


@dataclass(frozen=True)
class Verdict:
    """When `condition` (a name of `checkers.verdict.CONDITIONS`) holds, a present anomaly has
    `effect` instead of invalid, `because` so."""

    effect: Literal["allowed", "unknown"]
    condition: str
    because: str


@dataclass(frozen=True)
class Anomaly:
    """One anomaly kind (Jepsen's name where Jepsen has one), declared once by its module.

    `holds(c, row)` classifies one row of its `row` kind (`checkers.rules.rows`) in the column
    algebra `c` (`history.columns`): every engine evaluates it over its own columns. `example`
    names the example's fields (`example_fields`, in that order) as expressions of the row; by
    default each is the row's field of that name.
    """

    name: str
    description: str  # the catalogue's words (results consumers, the report's fallback)
    report: str  # the report's shorter sentence
    severity: int  # the report's rank: 1 is the most serious (the headline speaks of it first)
    source: Source
    evidence: Evidence
    example_fields: tuple[str, ...]
    # Examples are sorted by these fields (ascending) and the first MAX_EXAMPLES kept.
    order: tuple[str, ...]
    counts: str  # what one counted occurrence is (results consumers)
    occurrence: str  # the same, in docs/checkers.md's words
    rule: str  # the rule in prose: docs/checkers.md's table shows it
    example_text: str  # the example's fields in docs/checkers.md's words
    row: type
    holds: Callable[[Any, Any], Any]
    verdict: tuple[Verdict, ...] = ()
    member_counted: bool = False  # the result also counts the occurrences of group members
    example: Callable[[Any, Any], dict[str, Any]] | None = None
    # The kind of row the example is drawn from, when not the classified row itself (a value's
    # rules are decided per value, their examples from its first read or from its positions).
    example_row: type | None = None

    def example_of(self, c: Any, row: Any) -> dict[str, Any]:
        """The example's fields, in order, as expressions of the row in `c`."""
        if self.example is not None:
            return self.example(c, row)
        return {f: getattr(row, f) for f in self.example_fields}

    def docs_line(self) -> str:
        """Its line in docs/checkers.md's table of anomalies."""
        return f"| `{self.name}` | {self.occurrence} | {self.rule} | {self.example_text} |"
