"""The HTML report of one run: verdict in plain words, evidence, timeline, replica logs, files.

`write_report(run_dir)` reads only the run directory (test.json, results.json, history.jsonl,
nodes/, cluster-state.json, drain.json, outcome.json), so it works on any stored run, also one cut
short, refused or failed during set-up. The result is one self-contained file (inline CSS and SVG,
no script, no CDN) that opens offline. Every value from a history, a log or results.json is escaped
by jinja2's autoescape.

The package's modules, one job each: inputs (read and clean the run dir), history (one pass over
the history), replicas (the collected data dirs), headline (the verdict in words), examples,
panels, pictures, svg (what the page shows), context (putting it together); this module renders
and writes the page.
"""

from __future__ import annotations

import logging
from pathlib import Path

import jinja2
from markupsafe import Markup, escape

from foundation import run_files
from harness import rundir
from harness.report.context import build_context

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
    """Render report.html into the run directory (atomically) and return its path.

    Should rendering itself fail (a bug), a plain page that says so is written before the error
    is raised, so a run directory never ends without a report.html.
    """
    run = Path(run_dir)
    out = run / run_files.REPORT
    try:
        html = render(run)
    except Exception as e:
        _write(out, _fallback_page(run, f"{type(e).__name__}: {e}"))
        raise
    _write(out, html)
    log.info("report written: %s", out)
    return out


def _write(out: Path, html: str) -> None:
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(out)


def _fallback_page(run: Path, error: str) -> str:
    outcome = rundir.read_json(run / run_files.OUTCOME)
    verdict = outcome.get("verdict") if isinstance(outcome, dict) else None
    verdict = verdict if verdict in ("valid", "invalid", "unknown") else "unknown"
    files = "".join(
        f'<li><a href="{escape(p.name)}">{escape(p.name)}</a></li>'
        for p in sorted(run.iterdir())
        if p.is_file()
    )
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>strandline: {verdict}</title>'
        f'</head><body><header id="verdict" data-verdict="{verdict}"><h1>Verdict: {verdict}</h1></header>'
        f"<p>The full report could not be drawn ({escape(error)}); the run directory's files are below."
        f" Try <code>strandline report {escape(str(run))}</code> again after an update.</p>"
        f"<ul>{files}</ul></body></html>"
    )
