"""Keep `report.png` next to a report: a picture for chat, tickets and the results browser."""

from __future__ import annotations

import logging
from pathlib import Path

from foundation import run_files
from harness import browser

log = logging.getLogger(__name__)


def keep_screenshot(report: Path) -> Path | None:
    """Screenshot the report into its run dir; a missing browser is logged, never fatal."""
    if browser.chromium() is None:
        log.info("no chromium: %s kept without a screenshot", report)
        return None
    height = browser.page_height(report.read_text(encoding="utf-8", errors="replace"))
    png = report.with_name(run_files.REPORT_PNG)
    shot = browser.screenshot(report, png, height=height, timeout=45)
    if not shot.ok:
        log.warning("could not screenshot %s: %s", report, "; ".join(shot.console) or "chromium failed")
        return None
    return png
