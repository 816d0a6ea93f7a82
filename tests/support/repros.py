"""One scenario reproduced both ways, as the repro integration tests need it."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from harness.repro import reproduce
from harness.scenarios import scenario


def both_ways(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, system: str = "own"
) -> dict[str, object]:
    """The repro's summary once the unsafe twin lost acknowledged writes (invalid) within its budget
    and the safe twin lost nothing (judged valid); no cluster is left behind."""
    monkeypatch.setenv("STRANDLINE_STATE_DIR", str(tmp_path / "state"))
    result = reproduce(
        scenario(name),
        seed=1,
        store=str(tmp_path / "store"),
        console=Console(quiet=True),
        checker="reference",
        system=system,
    )
    summary = result.summary()
    assert summary["reproduced"], summary
    assert result.safe is not None and result.safe.verdict == "valid" and result.safe.judged, summary
    assert list((tmp_path / "state").glob("*.json")) == [], "a cluster was left behind"
    return summary
