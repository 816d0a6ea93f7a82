"""The first sentence of a report and the demo's comparison lead with the larger loss figure."""

from __future__ import annotations

from pathlib import Path

from harness.repro import lost_text
from harness.run import RunOutcome


def _results(lost_write: int, missing_on_leader: int) -> dict:
    return {
        "valid": False,
        "anomalies": {
            "lost-write": {"count": lost_write, "examples": []},
            "lost-committed-on-replicas": {"count": missing_on_leader, "examples": []},
        },
    }


def test_comparison_line_uses_the_larger_loss_count() -> None:
    outcome = RunOutcome(Path("/tmp/run"), verdict="invalid", results=_results(1, 239))
    assert lost_text(outcome) == "239 acknowledged writes lost"
    outcome = RunOutcome(Path("/tmp/run"), verdict="invalid", results=_results(5, 0))
    assert lost_text(outcome) == "5 acknowledged writes lost"


def test_headline_leads_with_the_larger_loss_count() -> None:
    from harness.report.headline import headline
    from harness.report.history import HistoryDigest

    word, sentences = headline(
        _results(1, 239), HistoryDigest(), [], {"lost-write", "lost-committed-on-replicas"}
    )
    assert sentences[0].startswith("239 acknowledged writes were lost")
    word, sentences = headline(
        _results(7, 2), HistoryDigest(), [], {"lost-write", "lost-committed-on-replicas"}
    )
    assert sentences[0].startswith("7 acknowledged writes were lost")
