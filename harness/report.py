"""The HTML report of one run: verdict in plain words, evidence, timeline, replica logs, files.

`write_report(run_dir)` reads only the run directory (test.json, results.json, history.jsonl,
nodes/, cluster-state.json, drain.json, outcome.json), so it works on any stored run, also one cut
short, refused or failed during set-up. The result is one self-contained file (inline CSS and SVG,
no script, no CDN) that opens offline. Every value from a history, a log or results.json is escaped
by jinja2's autoescape.

The pieces, one job each: report_inputs (read and clean the run dir), report_history (one pass
over the history), report_replicas (the collected data dirs), report_headline (the verdict in
words), report_examples, report_panels, report_pictures, report_svg (what the page shows),
report_context (putting it together); this module renders and writes the page.
"""

from __future__ import annotations

import logging
from pathlib import Path

import jinja2
from markupsafe import Markup

from foundation import run_files
from harness.report_context import build_context

__all__ = ["build_context", "render", "write_report"]

log = logging.getLogger(__name__)

_env: jinja2.Environment | None = None


def _environment() -> jinja2.Environment:
    global _env
    if _env is None:
        _env = jinja2.Environment(
            loader=jinja2.PackageLoader("harness", "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
    return _env


def render(run: Path) -> str:
    context = build_context(run)
    css = Markup(_environment().loader.get_source(_environment(), "report.css")[0])  # type: ignore[union-attr]
    return _environment().get_template("report.html.j2").render(css=css, **context)


def write_report(run_dir: str | Path) -> Path:
    """Render report.html into the run directory (atomically) and return its path."""
    run = Path(run_dir)
    html = render(run)
    out = run / run_files.REPORT
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(out)
    log.info("report written: %s", out)
    return out
