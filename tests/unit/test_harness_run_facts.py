"""run_facts: a run whose controller was SIGKILLed (no outcome.json) is said to be cut short."""

from __future__ import annotations

import json
from pathlib import Path

from harness.run_facts import run_facts


def make(tmp_path: Path, times_s: list[float], outcome: dict[str, object] | None, torn: bool = False) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "test.json").write_text(json.dumps({"config": {"time_limit": 60}, "seed": 1}))
    lines = [json.dumps({"index": i, "time": int(t * 1e9), "process": 0, "type": "invoke", "f": "send"})
             for i, t in enumerate(times_s)]  # fmt: skip
    (run / "history.jsonl").write_text("\n".join(lines) + ('\n{"index": 9, "ti' if torn else "\n"))
    if outcome is not None:
        (run / "outcome.json").write_text(json.dumps(outcome))
    return run


def test_a_killed_controller_is_cut_short_with_how_far_it_got(tmp_path: Path) -> None:
    facts = run_facts(make(tmp_path, [0.1, 1.5, 2.93], None, torn=True))
    assert facts["cut_short"] is True and facts["status"] == "killed"
    assert (facts["ran_s"], facts["time_limit_s"]) == (2.93, 60.0)


def test_a_completed_run_is_not_cut_short(tmp_path: Path) -> None:
    recovery = {"min_isr": True, "full_isr": False, "seconds": 60.0, "why": "t0-1: ISR ['n1', 'n3']"}
    facts = run_facts(make(tmp_path, [0.1, 61.2], {"status": "completed", "recovery": recovery}))
    assert facts == {"cut_short": False, "status": "completed", "reason": "", "ran_s": 61.2,
                     "time_limit_s": 60.0, "recovery": recovery}  # fmt: skip


def test_an_interrupted_run_and_an_empty_dir(tmp_path: Path) -> None:
    facts = run_facts(make(tmp_path, [0.1, 5.0], {"status": "interrupted", "reason": "SIGTERM"}))
    assert facts["cut_short"] is True and facts["reason"] == "SIGTERM" and facts["ran_s"] == 5.0
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run_facts(empty)["cut_short"] is True and run_facts(empty)["ran_s"] is None
