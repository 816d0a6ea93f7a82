"""Operation pairing and per-process links: how a history's lines become operations.

Every reader of a history (the reference checker, the Spark conversion, the workload's own
figures) pairs the same way:

* An *operation* is a client invocation plus its completion: the next non-invoke line of the same
  process. A completion with `f` = `crash` completes the open operation as `info`.
* An invocation while the process's previous operation is still open abandons that one
  (`superseded`; the abandoned operation stays `open`); a completion without an invocation is an
  *orphan*. An invocation that never completes is *open* (it counts as `info`: possibly happened).
* A process's *link* on a topic-partition is its previous read (or ack) there: what poll-skip,
  nonmonotonic-poll and nonmonotonic-send compare with (`ProcessLinks`).

`Pairing` streams these rules line by line (the reference checker); `completed`, `orphan`, `reads`
and `forgets_positions` state them over whole columns for the engines that pair a history at once.
"""

from __future__ import annotations

import os
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from history.format import NEMESIS_PROCESS, ReadProblem
from history.reader import iter_ops

CRASH = "crash"
OPEN = "open"  # the outcome of an operation that never completed

T = TypeVar("T")
E = TypeVar("E")


def outcome_of(completion: dict[str, Any]) -> str:
    """The outcome a completion gives its operation: its type, or `info` for a crash."""
    return "info" if completion["f"] == CRASH else str(completion["type"])


# --- the same rules over whole columns ------------------------------------------------------------
# Engines that pair a chunk or a whole history at once (the Arrow conversion, the Spark conversion)
# see each client line next to the previous and the next line of its process. The rules below are
# what `Pairing` and the reference checker do, stated once over such columns; each engine supplies
# the `Logic` of its column type (an Arrow array, a Spark column, or plain values in a unit test).


class Logic(Protocol[E]):
    """Boolean algebra over one engine's columns. `is_type`/`is_f` are never null: a missing
    neighbour (null) is of no type."""

    def is_type(self, column: E, type_: str) -> E: ...

    def is_f(self, column: E, f: str) -> E: ...

    def exists(self, column: E) -> E: ...

    def and_(self, a: E, b: E) -> E: ...

    def or_(self, a: E, b: E) -> E: ...

    def not_(self, a: E) -> E: ...


@dataclass(frozen=True)
class Neighbours(Generic[E]):
    """A client line's `type` and `f`, and those of the previous and next line of its process."""

    type: E
    f: E
    prev_type: E
    prev_f: E
    next_type: E
    next_f: E


def completed(logic: Logic[E], line: Neighbours[E]) -> E:
    """An invocation is completed by the next line of its process unless that is an invocation
    (which supersedes it) or there is none (it stays open)."""
    return logic.and_(logic.exists(line.next_type), logic.not_(logic.is_type(line.next_type, "invoke")))


def completed_by_crash(logic: Logic[E], line: Neighbours[E]) -> E:
    """The completion is a `crash`: the operation's outcome is `info` (see `outcome_of`)."""
    return logic.is_f(line.next_f, CRASH)


def orphan(logic: Logic[E], line: Neighbours[E]) -> E:
    """A completion (not a crash, which may follow nothing) whose previous line is no invocation."""
    return logic.and_(
        logic.and_(logic.not_(logic.is_type(line.type, "invoke")), logic.not_(logic.is_f(line.f, CRASH))),
        logic.not_(logic.is_type(line.prev_type, "invoke")),
    )


def _after_poll_invoke(logic: Logic[E], line: Neighbours[E]) -> E:
    return logic.and_(logic.is_type(line.prev_type, "invoke"), logic.is_f(line.prev_f, "poll"))


def reads(logic: Logic[E], line: Neighbours[E]) -> E:
    """The line's records are reads: it is an `ok` completion (not a crash) of a poll invocation."""
    return logic.and_(
        logic.and_(logic.is_type(line.type, "ok"), logic.not_(logic.is_f(line.f, CRASH))),
        _after_poll_invoke(logic, line),
    )


def forgets_positions(logic: Logic[E], line: Neighbours[E]) -> E:
    """The process loses its place on every partition at this line (`ProcessLinks.forget`): an
    assign invocation, a poll completed `info` or by a crash, an invocation superseding a poll."""
    is_invoke = logic.is_type(line.type, "invoke")
    after_poll = _after_poll_invoke(logic, line)
    poll_unsure = logic.and_(
        logic.and_(logic.not_(is_invoke), after_poll),
        logic.or_(logic.is_type(line.type, "info"), logic.is_f(line.f, CRASH)),
    )
    return logic.or_(
        logic.or_(logic.and_(is_invoke, logic.is_f(line.f, "assign")), poll_unsure),
        logic.and_(is_invoke, after_poll),
    )


class Pairing:
    """Streams ops (in history order) into operations, one open invocation per process."""

    def __init__(self) -> None:
        self.open: dict[Any, dict[str, Any]] = {}  # process -> its open invocation
        self.superseded: list[tuple[int, Any, int]] = []  # (index, process, abandoned invoke index)
        self.orphans: list[dict[str, Any]] = []  # completions without an invocation

    def invoke(self, op: dict[str, Any]) -> dict[str, Any] | None:
        """Open `op`'s operation; returns the invocation it abandons (the process's open one), if any."""
        process = op["process"]
        previous = self.open.get(process)
        if previous is not None:
            self.superseded.append((op["index"], process, previous["index"]))
        self.open[process] = op
        return previous

    def complete(self, op: dict[str, Any]) -> dict[str, Any] | None:
        """Close the process's open operation with `op`; returns its invocation (None: an orphan)."""
        invocation = self.open.pop(op["process"], None)
        if invocation is None:
            self.orphans.append(op)
        return invocation

    def close_open(self) -> list[tuple[Any, dict[str, Any]]]:
        """The operations still open at the end of the history, (process, invocation); forgotten."""
        still = list(self.open.items())
        self.open.clear()
        return still


class ProcessLinks(Generic[T]):
    """Each process's last item (a read's or an ack's position) per topic-partition."""

    def __init__(self) -> None:
        self._last: dict[Any, dict[Hashable, T]] = {}

    def link(self, process: Any, tp: Hashable, item: T) -> T | None:
        """Record `item` as the process's last on `tp`; returns the one it follows (None: none)."""
        mine = self._last.get(process)
        if mine is None:
            mine = self._last[process] = {}
        previous = mine.get(tp)
        mine[tp] = item
        return previous

    def forget(self, process: Any) -> None:
        """The process lost its place on every partition (an `assign`, a poll that may have read unseen)."""
        self._last.pop(process, None)


@dataclass
class HistorySummary:
    """What a quick pass over a history knows: used to decide `unknown` before checking."""

    ops: int = 0
    problems: list[ReadProblem] = field(default_factory=list)
    open_invocations: dict[Any, int] = field(default_factory=dict)  # process -> index of invoke

    @property
    def complete(self) -> bool:
        return not self.problems


def pair_problems(path: str | os.PathLike[str]) -> HistorySummary:
    """Check the invoke/completion discipline: one op at a time per process, no orphan completion."""
    summary = HistorySummary()
    pairing = Pairing()
    for op in iter_ops(path, problems=summary.problems):
        summary.ops += 1
        process = op["process"]
        if op["type"] == "invoke":
            if pairing.invoke(op) is not None and process != NEMESIS_PROCESS:
                summary.problems.append(
                    ReadProblem(op["index"] + 1, f"process {process} invoked while its op is still open")
                )
        elif pairing.complete(op) is None and process != NEMESIS_PROCESS:
            summary.problems.append(
                ReadProblem(op["index"] + 1, f"completion without invocation for process {process}")
            )
    summary.open_invocations = {process: invocation["index"] for process, invocation in pairing.open.items()}
    return summary
