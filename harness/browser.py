"""Headless Chromium: render a report to a PNG, dump its DOM, and collect console errors.

Used to keep a screenshot of each report (`report.png`) and by the tests that check a report in a
real browser. Chromium is started with a throw-away profile and no network features; its console
messages come out on stderr as `INFO:CONSOLE...` lines with --enable-logging=stderr.
"""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

_CONSOLE = re.compile(r":CONSOLE[:(]\d+\)?\]\s*(.*)")
_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--enable-logging=stderr",
    "--v=0",
]


@dataclass(frozen=True)
class BrowserResult:
    ok: bool
    output: str  # the DOM for dump_dom; empty for a screenshot
    console: list[str]  # console messages (errors, warnings, logs) the page produced


def chromium() -> str | None:
    """The Chromium binary, or None when there is none on this machine."""
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _run(extra: list[str], url: str, timeout: float) -> BrowserResult:
    binary = chromium()
    if binary is None:
        return BrowserResult(False, "", ["chromium is not installed"])
    with tempfile.TemporaryDirectory(prefix="sl-chromium-") as profile:
        argv = [binary, *_FLAGS, f"--user-data-dir={profile}", *extra, url]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return BrowserResult(False, "", [f"chromium did not finish within {timeout:.0f} s"])
    console = [m.group(1) for line in proc.stderr.splitlines() if (m := _CONSOLE.search(line))]
    if proc.returncode != 0:
        log.info("chromium exited %d: %s", proc.returncode, proc.stderr[-2000:])
    return BrowserResult(proc.returncode == 0, proc.stdout, console)


def screenshot(
    html: Path, png: Path, width: int = 1280, height: int = 2400, timeout: float = 60
) -> BrowserResult:
    """Render `html` and save a PNG of its first `height` pixels."""
    png.parent.mkdir(parents=True, exist_ok=True)
    result = _run(
        [f"--screenshot={png}", f"--window-size={width},{height}"], html.resolve().as_uri(), timeout
    )
    return BrowserResult(result.ok and png.exists() and png.stat().st_size > 0, "", result.console)


def dump_dom(html: Path, timeout: float = 60) -> BrowserResult:
    """The DOM after the page loaded, as the browser serialises it."""
    return _run(["--dump-dom"], html.resolve().as_uri(), timeout)


def dump_dom_url(url: str, timeout: float = 60) -> BrowserResult:
    """The DOM of a page served over HTTP (the results browser)."""
    return _run(["--dump-dom"], url, timeout)


def page_height(dom: str, default: int = 2400) -> int:
    """A rough height for a full-page screenshot: Chromium's CLI cannot measure it."""
    charts = dom.count("<svg")
    sections = dom.count("<section")
    rows = dom.count("<tr")
    return min(9000, max(default, 400 + 330 * charts + 60 * sections + 26 * rows))
