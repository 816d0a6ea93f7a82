"""`strandline shrink`: a run's faults as a scripted schedule, and delta debugging over them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from foundation.errors import BadInput
from harness.shrink import FaultGroup, fault_groups, minimize, schedule_of, side_by_side_html, tell

S = 1_000_000_000


def nemesis(index: int, time_s: float, type_: str, f: str, value: dict) -> dict:  # type: ignore[type-arg]
    return {
        "index": index,
        "time": int(time_s * S),
        "process": "nemesis",
        "type": type_,
        "f": f,
        "value": value,
    }


def write_history(path: Path) -> Path:
    ops = [
        {
            "index": 0,
            "time": 1,
            "process": 0,
            "type": "invoke",
            "f": "send",
            "topic": "t0",
            "partition": 0,
            "value": 1,
        },
        nemesis(
            1, 10.0, "invoke", "kill", {"target": "failover", "fault_id": "kill-1", "failover": {"step": 1}}
        ),
        nemesis(2, 10.5, "ok", "kill", {"nodes": ["n1"], "fault_id": "kill-1"}),
        nemesis(3, 12.0, "invoke", "partition", {"grudge": "halves", "fault_id": "partition-2"}),
        nemesis(
            4, 12.1, "ok", "partition", {"grudge": {"n2": ["n3"], "n3": ["n2"]}, "fault_id": "partition-2"}
        ),
        nemesis(5, 14.0, "invoke", "clock-bump", {"target": "one", "offset": "+30s", "fault_id": "clock-3"}),
        nemesis(6, 14.2, "ok", "clock-bump", {"nodes": ["n3"], "fault_id": "clock-3"}),
        nemesis(7, 20.0, "invoke", "heal", {"fault": "partition", "fault_id": "partition-2"}),
        nemesis(
            8, 20.1, "ok", "heal", {"fault": "partition", "nodes": ["n2", "n3"], "fault_id": "partition-2"}
        ),
        nemesis(9, 21.0, "invoke", "start", {"fault": "kill", "nodes": ["n1"], "fault_id": "kill-1"}),
        nemesis(10, 23.0, "ok", "start", {"fault": "kill", "nodes": ["n1"], "fault_id": "kill-1"}),
        nemesis(11, 24.0, "invoke", "pause", {"target": "leader", "fault_id": "pause-4"}),
        nemesis(12, 24.1, "fail", "pause", {"fault_id": "pause-4"}),
    ]
    history = path / "history.jsonl"
    history.write_text("".join(json.dumps(op) + "\n" for op in ops))
    return history


def test_the_faults_of_a_run_become_a_scripted_schedule_with_their_heals(tmp_path: Path) -> None:
    groups = fault_groups(write_history(tmp_path))
    assert [g.fault_id for g in groups] == [
        "kill-1",
        "partition-2",
        "clock-3",
    ]  # the failed pause is not a fault
    assert schedule_of(groups) == [
        {"wait": 10.0},
        {"do": "kill", "target": ["n1"]},
        {"wait": 1.5},
        {"do": "partition", "grudge": {"n2": ["n3"], "n3": ["n2"]}},
        {"wait": 1.9},
        {"do": "clock-bump", "target": ["n3"], "offset": "+30s"},
        {"wait": 5.8},
        {"heal": "partition"},
        {"wait": 0.9},
        {"do": "start", "target": ["n1"]},
    ]
    assert tell(schedule_of(groups)) == [
        "1. after 10 s, kill n1",
        '2. after 1.5 s, partition {"n2": ["n3"], "n3": ["n2"]}',
        "3. after 1.9 s, clock-bump n3 offset=+30s",
        "4. after 5.8 s, heal partition",
        "5. after 0.9 s, start n1",
    ]
    # without the kill, its start goes too; waits keep the others where they were
    assert schedule_of(groups[1:], 0.5)[:2] == [
        {"wait": 6.0},
        {"do": "partition", "grudge": {"n2": ["n3"], "n3": ["n2"]}},
    ]


def test_delta_debugging_keeps_only_the_faults_the_failure_needs() -> None:
    groups = [FaultGroup(f"f{i}") for i in range(8)]
    needed = {"f2", "f5"}
    seen: list[tuple[int, float]] = []

    def fails(candidate: list[FaultGroup], scale: float) -> tuple[bool, Path | None]:
        seen.append((len(candidate), scale))
        ids = {g.fault_id for g in candidate}
        return needed <= ids and scale >= 0.5, Path(f"run-{len(seen)}")

    result = minimize(groups, fails, budget_s=1e9)
    assert {g.fault_id for g in result.minimal} == needed
    assert result.scale == 0.5 and result.minimal_run == Path(f"run-{len(seen) - 1}")
    assert seen[-1] == (2, 0.25)  # waits halved, then quartered (not an eighth)
    assert seen[0] == (8, 1.0) and len(seen) < 30
    page = side_by_side_html(result, Path("run<1>"))
    assert "run&lt;1&gt;" in page and "Original" in page and "Minimal" in page


def test_nothing_to_shrink_when_the_replay_does_not_fail_and_the_budget_stops_the_search() -> None:
    groups = [FaultGroup(f"f{i}") for i in range(4)]
    result = minimize(groups, lambda c, s: (False, None), budget_s=1e9)
    assert result.minimal_run is None and len(result.runs) == 1
    ticks = iter(range(100))
    result = minimize(groups, lambda c, s: (True, Path("r")), budget_s=2.5, clock=lambda: float(next(ticks)))
    assert result.out_of_budget and len(result.runs) <= 3


def test_shrink_refuses_a_run_that_is_not_invalid(tmp_path: Path) -> None:
    from harness.cli import build_parser
    from harness.commands.shrink import main

    (tmp_path / "test.json").write_text(json.dumps({"config": {}, "seed": 1}))
    write_history(tmp_path)
    (tmp_path / "results.json").write_text(json.dumps({"valid": True}))
    args = build_parser().parse_args(["shrink", str(tmp_path), "--budget", "10"])
    with pytest.raises(BadInput, match="not invalid"):
        main(args)
