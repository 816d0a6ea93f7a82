"""The column rules of `history.pairing` (what the Arrow and Spark conversions evaluate) say what the
streaming `Pairing` does, line for line, on histories with crashes, orphans and superseded ops."""

from __future__ import annotations

from typing import Any

import pytest

from history import pairing
from history.pairing import Pairing, outcome_of
from history.synthetic.generator import generate_ops
from tests.support.history_builder import HistoryBuilder


class PlainLogic:
    """`pairing.Logic` over single Python values (None: no neighbouring line)."""

    def is_type(self, column: Any, type_: str) -> bool:
        return bool(column == type_)

    def is_f(self, column: Any, f: str) -> bool:
        return bool(column == f)

    def exists(self, column: Any) -> bool:
        return column is not None

    def and_(self, a: bool, b: bool) -> bool:
        return a and b

    def or_(self, a: bool, b: bool) -> bool:
        return a or b

    def not_(self, a: bool) -> bool:
        return not a


LOGIC = PlainLogic()


def by_rules(ops: list[dict[str, Any]]) -> dict[str, Any]:
    """Outcomes, orphans, reads and position resets, from the column rules."""
    by_process: dict[Any, list[dict[str, Any]]] = {}
    for op in ops:
        by_process.setdefault(op["process"], []).append(op)
    found: dict[str, Any] = {"outcomes": {}, "orphans": set(), "reads": set(), "forgets": set()}
    for lines in by_process.values():
        for i, op in enumerate(lines):
            prev = lines[i - 1] if i else {}
            nxt = lines[i + 1] if i + 1 < len(lines) else {}
            line = pairing.Neighbours(
                op["type"], op["f"], prev.get("type"), prev.get("f"), nxt.get("type"), nxt.get("f")
            )
            if op["type"] == "invoke":
                if pairing.completed(LOGIC, line):
                    crash = pairing.completed_by_crash(LOGIC, line)
                    found["outcomes"][op["index"]] = "info" if crash else nxt["type"]
                else:
                    found["outcomes"][op["index"]] = pairing.OPEN
            for rule in ("orphan", "reads", "forgets_positions"):
                if getattr(pairing, rule)(LOGIC, line):
                    found[{"orphan": "orphans", "forgets_positions": "forgets"}.get(rule, rule)].add(
                        op["index"]
                    )
    return found


def by_streaming(ops: list[dict[str, Any]]) -> dict[str, Any]:
    """The same, as the reference checker derives them from `Pairing`, line by line."""
    p = Pairing()
    found: dict[str, Any] = {"outcomes": {}, "orphans": set(), "reads": set(), "forgets": set()}
    for op in ops:
        if op["type"] == "invoke":
            previous = p.invoke(op)
            if previous is not None:
                found["outcomes"][previous["index"]] = pairing.OPEN
            if op["f"] == "assign" or (previous is not None and previous["f"] == "poll"):
                found["forgets"].add(op["index"])
            continue
        invocation = p.complete(op)
        if invocation is None:
            if op["f"] != pairing.CRASH:
                found["orphans"].add(op["index"])
            continue
        outcome = outcome_of(op)
        found["outcomes"][invocation["index"]] = outcome
        if invocation["f"] == "poll" and outcome == "ok":
            found["reads"].add(op["index"])
        if invocation["f"] == "poll" and outcome == "info":
            found["forgets"].add(op["index"])
    for _process, invocation in p.close_open():
        found["outcomes"][invocation["index"]] = pairing.OPEN
    return found


@pytest.mark.parametrize("seed", range(6))
def test_column_rules_agree_with_streaming_pairing(seed: int) -> None:
    ops, _ = generate_ops(400, seed=seed, partitions=3, concurrency=6, churn=0.1)
    assert by_rules(ops) == by_streaming(ops)


def test_column_rules_on_crashes_orphans_and_superseded_ops() -> None:
    b = HistoryBuilder()
    b.invoke_poll(0)
    b.op(process=0, type="info", f="crash")  # a crash completing a poll: info, positions lost
    b.complete_send(1, 5)  # an orphan
    b.op(process=2, type="info", f="crash")  # a crash of a process with nothing open: no orphan
    b.invoke_poll(3)
    b.invoke_send(3, 6)  # supersedes the poll: positions lost
    b.complete_send(3, 6, offset=0)
    b.assign(4)
    b.poll(4, [(0, 6)])
    b.invoke_poll(4)  # left open at the end
    found = by_rules(b.ops)
    assert found == by_streaming(b.ops)
    assert found["orphans"] == {2} and found["reads"] == {10} and found["forgets"] == {1, 5, 7}
    assert found["outcomes"] == {0: "info", 4: pairing.OPEN, 5: "ok", 7: "ok", 9: "ok", 11: pairing.OPEN}
