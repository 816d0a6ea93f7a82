"""`strandline check` rewrites report.html, and the verdict line stays the last line."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from harness.cli import main
from history.synthetic.generator import generate_ops
from tests.support.checked_runs import make_run


def test_check_rewrites_a_stale_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(tmp_path, generate_ops(60, seed=1)[0])
    (run / "report.html").write_text("stale")
    code = main(["check", str(run), "--checker", "reference"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0 and lines[-1] == f"verdict: valid {run.resolve()}"
    assert lines[-2] == f"report: {run.resolve() / 'report.html'}"
    assert 'data-verdict="valid"' in (run / "report.html").read_text()


def test_a_failing_report_leaves_a_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import harness.report

    def broken(run: Path) -> Path:
        raise RuntimeError("template missing")

    monkeypatch.setattr(harness.report, "write_report", broken)
    run = make_run(tmp_path, generate_ops(20, seed=2)[0])
    code = main(["check", str(run), "--checker", "reference"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0 and lines[-1].startswith("verdict: valid ")
    assert "report not rewritten (RuntimeError: template missing); try: strandline report" in lines[-2]


def test_the_report_reads_neither_the_history_nor_the_data_dirs(tmp_path: Path) -> None:
    """Once checked, the report is drawn from results.json and evidence.json alone: the same page
    after the history is overwritten (same size) and the data dirs are emptied."""
    from harness.report import render

    ops, _ = generate_ops(200, seed=4, plants={"lost-write": 1, "duplicate": 1, "poll-skip": 1})
    run = make_run(tmp_path, ops)
    assert main(["check", str(run), "--checker", "reference"]) == 1
    before = render(run)
    history = run / "history.jsonl"
    history.write_bytes(b"x" * history.stat().st_size)
    for data in (run / "nodes").glob("*/data"):
        shutil.rmtree(data)
        data.mkdir()

    def stable(page: str) -> str:
        return re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", "", page)

    after = render(run)
    assert stable(after) == stable(before)
    assert "lost-write" in after and "rate-chart" in after and "latency-chart" in after
