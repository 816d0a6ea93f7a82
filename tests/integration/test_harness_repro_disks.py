"""The damaged-disk and membership repros, each both ways on a real netns cluster (slow: ~2-3 min
each; CI's fast representative is test_nemesis_faults' damaged-disk test)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from harness.repro import reproduce
from harness.scenarios import scenario

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _reproduce(name: str, tmp_path: Path) -> Any:
    """Both twins of the scenario (seed 7), the unsafe one within its budget."""
    return reproduce(
        scenario(name), seed=7, store=str(tmp_path), console=Console(quiet=True), checker="reference"
    )


def test_bitflip_minority_is_lost_with_unclean_elections_and_survived_with_the_safe_settings(
    tmp_path: Path,
) -> None:
    result = _reproduce("bitflip-minority", tmp_path)
    assert (
        result.unsafe[-1].verdict == "invalid" and result.safe is not None and result.safe.verdict == "valid"
    )
    assert result.reproduced_after_s is not None and result.reproduced_after_s < 180
    run = result.unsafe[-1].outcome.run_dir
    damaged = json.loads((Path(run) / "results.json").read_text())["stats"]["damaged_replicas"]
    assert [d["kind"] for d in damaged] == ["bitflip"] and damaged[0]["partitions"] == ["t0-0"]


def test_membership_kill_loses_acks_1_writes_and_the_safe_settings_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STRANDLINE_STATE_DIR", str(tmp_path / "state"))
    result = reproduce(
        scenario("membership-kill"),
        seed=7,
        store=str(tmp_path),
        console=Console(quiet=True),
        checker="reference",
    )
    assert result.reproduced_after_s is not None and result.reproduced_after_s < 180
    assert result.safe is not None and result.safe.verdict == "valid"
    history = Path(result.safe.outcome.run_dir) / "history.jsonl"
    ops = [json.loads(line) for line in history.read_text().splitlines()]
    settled = [o for o in ops if o["f"] == "member-settled" and o["type"] == "ok"]
    assert len(settled) == 2 and settled[-1]["value"]["removed"]
