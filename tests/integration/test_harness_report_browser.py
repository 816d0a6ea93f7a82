"""The report in a real headless Chromium: it renders, no console errors, verdict and charts present,
and `strandline report` keeps a screenshot (report.png) in the run dir."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest

from harness import browser
from tests.support.report_runs import make_run

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def reported_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = make_run(tmp_path_factory.mktemp("report") / "run", evil=True)
    out = subprocess.run(
        [sys.executable, "-m", "harness.cli", "report", str(run)], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == f"report: {run.resolve() / 'report.html'}"
    return run


def test_report_renders_in_chromium_without_console_errors(reported_run: Path) -> None:
    assert browser.chromium() is not None, "chromium is needed (scripts/setup.sh installs it)"
    dom = browser.dump_dom(reported_run / "report.html")
    assert dom.ok
    assert dom.console == []
    assert 'data-verdict="invalid"' in dom.output
    assert "3 acknowledged writes were lost on t0-1 after the leader n1 was killed at 20.0 s." in dom.output
    for chart in ('id="rate-chart"', 'id="latency-chart"', 'class="replica-chart"'):
        assert chart in dom.output
    assert dom.output.count("<svg") >= 4  # rate, latency, two partitions
    assert "<script" not in dom.output  # the hostile value stayed text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom.output


def test_screenshot_is_kept_in_the_run_dir(reported_run: Path) -> None:
    png = reported_run / "report.png"
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert width == 1280 and height >= 2400
    assert len(data) > 50_000  # a rendered page, not a blank one
