"""`strandline check` rewrites report.html, and the verdict line stays the last line."""

from __future__ import annotations

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
