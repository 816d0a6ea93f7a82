"""The report explains a dependency cycle in a sentence and draws it, escaping what the results say."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from checkers.api import check_run
from checkers.engines import REFERENCE
from harness.report import build_context, write_report
from harness.report.cycles import cycle_sentence, cycle_svg
from tests.support.history_builder import write_history
from tests.support.txn_histories import generate_txn_ops


def wr_cycle(topic: str = "t0") -> dict[str, Any]:
    return {
        "index": 4, "size": 2, "cycle": [4, 9], "wr_only": True,
        "steps": [
            {"from": 4, "to": 9, "type": "wr", "topic": topic, "partition": 1, "offset": 3, "value": 17,
             "next_offset": None, "next_value": None},
            {"from": 9, "to": 4, "type": "wr", "topic": topic, "partition": 0, "offset": 7, "value": 23,
             "next_offset": None, "next_value": None},
        ],
    }  # fmt: skip


def test_a_cycle_in_a_sentence() -> None:
    text = cycle_sentence("G1c", wr_cycle())
    assert text.startswith("Transactions T4 and T9 form a cycle of information flow through reads alone:")
    assert "T9 polled T4's 17 (t0-1 offset 3); T4 polled T9's 23 (t0-0 offset 7)" in text
    assert "read_committed cannot produce this" in text
    ww = {**wr_cycle(), "wr_only": False}
    ww["steps"][1] = {**ww["steps"][1], "type": "ww", "next_offset": 8, "next_value": 30}
    assert "T9's 23 came right before T4's 30 on t0-0 (offsets 7 and 8)" in cycle_sentence("G1c", ww)
    assert "missing write isolation allows" in cycle_sentence("G1c", ww)


def test_the_drawing_escapes_the_results() -> None:
    svg = str(cycle_svg(wr_cycle(topic="<script>alert(1)</script>")))
    assert (
        svg.startswith("<svg") and svg.count('marker-end="url(#arrow-wr)"') == 2 and svg.count("<circle") == 2
    )
    assert "<script>" not in svg and "&lt;script&gt;alert(1)&lt;/script&gt;" in svg
    assert cycle_svg({"cycle": [1], "steps": []}) is None


def test_a_checked_transactional_run_shows_its_cycles(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    ops, _planted = generate_txn_ops(7, 30, {"G1c": 1, "G1c-ww": 1, "G0": 1})
    write_history(run / "history.jsonl", ops)
    (run / "test.json").write_text(json.dumps({"config": {"name": "txn", "workload": "txn"}, "seed": 7}))
    (run / "drain.json").write_text(json.dumps({"complete": True, "reason": ""}))
    results = check_run(run, engine=REFERENCE, replica_logs=False)
    assert results["valid"] is False and results["fatal"] == ["G1c"]
    context = build_context(run)
    g1c = next(a for a in context["anomalies"] if a.name == "G1c")
    assert g1c.fatal and g1c.count == 2
    assert any("through reads alone" in e.title for e in g1c.examples)
    html = write_report(run).read_text()
    assert html.count('class="cycle"') >= 3  # the two G1c examples and the G0 one
    assert "form a write cycle" in html
