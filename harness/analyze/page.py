"""The analysis page (`<store>/analysis/index.html`): what the tables say, in plots and words.

Self-contained (inline CSS and SVG, no script): it opens offline, from the store or through
`strandline serve`. Every value from a run reaches the page through Jinja's autoescape or
`harness.analyze.svg` (which escapes its labels); links to reports are relative to the page.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from harness.analyze.runs import SETTING_COLUMNS, Store, relative_link, started_of
from harness.analyze.spark import Tables
from harness.analyze.svg import Bar, Dots, Series, TrendChart, bar_chart, dot_chart, trend_chart

RED, GREEN, ORANGE, BLUE, GREY = "#c92a2a", "#2b8a3e", "#e8890c", "#1c7ed6", "#868e96"


def _words(key: str, value: Any) -> str:
    """One setting in a reader's words: 'acks=1', 'min.insync=1', 'no fsync', 'unclean election'."""
    if value is None or value == "":
        return ""
    if key == "system":
        return Path(str(value)).name if str(value).endswith(".toml") else str(value)
    if key == "unclean_election":
        return "unclean election" if value else "clean election"
    if key == "fsync":
        return "no fsync" if value == 0 else "fsync each message" if value == 1 else f"fsync every {value}"
    return {"acks": "acks=", "min_insync": "min.insync=", "replication_factor": "rf="}.get(key, "") + str(
        value
    )


def setting_labels(settings: list[dict[str, Any]]) -> list[str]:
    """'high-watermark · acks=all under kill' for each row: the settings that differ between rows."""
    varying = [k for k in SETTING_COLUMNS if len({str(s.get(k)) for s in settings}) > 1]
    shown = varying or ["variant", "acks"]
    labels = []
    for s in settings:
        words = [w for k in shown if (w := _words(k, s.get(k)))]
        labels.append(f"{' · '.join(words) or '(no test.json)'} under {s.get('mix') or '?'}")
    return labels


def _pct(rate: float | None) -> str:
    return "–" if rate is None else f"{rate * 100:.0f} %"


@dataclass(frozen=True)
class Cell:
    """One square of a campaign's verdict grid."""

    verdict: str
    expectation: str  # as-expected | not-expected | no-expectation | not-run
    link: str
    title: str


def _charts(
    settings: list[dict[str, Any]], labels: list[str], runs: list[dict[str, Any]]
) -> dict[str, Markup]:
    judged = [(s, label) for s, label in zip(settings, labels, strict=True) if s["judged"]]
    charts: dict[str, Markup] = {}
    if judged:
        charts["invalid"] = bar_chart(
            [
                Bar(
                    label,
                    s["invalid_rate"],
                    f"{s['invalid']} of {s['judged']}",
                    RED if s["invalid"] else GREEN,
                )
                for s, label in judged
            ],
            "share of judged runs that were invalid",
            percent=True,
            hi=1.0,
        )
        charts["lost"] = bar_chart(
            [
                Bar(
                    label,
                    float(s["acked_lost"] or 0),
                    f"{s['acked_lost'] or 0} in {s['runs_with_loss']} runs",
                    RED,
                )
                for s, label in judged
            ],
            "acknowledged writes lost",
        )
    with_availability = [
        (s, label) for s, label in zip(settings, labels, strict=True) if s["availability_mean"] is not None
    ]
    if with_availability:
        charts["availability"] = bar_chart(
            [
                Bar(
                    label,
                    s["availability_mean"],
                    f"mean {_pct(s['availability_mean'])}",
                    BLUE,
                    f"{label}: mean {_pct(s['availability_mean'])}, lowest {_pct(s['availability_min'])}",
                    (s["availability_min"],),
                )
                for s, label in with_availability
            ],
            "availability: share of the load with acknowledged writes",
            percent=True,
            hi=1.0,
        )
    kept = [
        (s, label)
        for s, label in zip(settings, labels, strict=True)
        if s["kept_under_faults_mean"] is not None
    ]
    if kept:
        charts["kept"] = bar_chart(
            [
                Bar(label, s["kept_under_faults_mean"], _pct(s["kept_under_faults_mean"]), BLUE)
                for s, label in kept
            ],
            "acknowledged writes per second under faults, against without",
            percent=True,
            hi=max([1.0, *(s["kept_under_faults_mean"] for s, _ in kept)]),
        )
    by_setting: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in runs:
        if r["fault_to_loss_s"] is not None:
            by_setting.setdefault(tuple(r[k] for k in (*SETTING_COLUMNS, "mix")), []).append(r)
    dots = []
    for s, label in zip(settings, labels, strict=True):
        found = by_setting.get(tuple(s[k] for k in (*SETTING_COLUMNS, "mix")), [])
        if found:
            dots.append(
                Dots(
                    label,
                    tuple(r["fault_to_loss_s"] for r in found),
                    s["median_fault_to_loss_s"],
                    tuple(relative_link(r["report"]) if r["report"] else "" for r in found),
                )
            )
    if dots:
        charts["to_loss"] = dot_chart(dots, "seconds from the first fault to the first lost write")
    return charts


def _campaigns(tables: Tables) -> list[dict[str, Any]]:
    out = []
    by_campaign: dict[str, list[dict[str, Any]]] = {}
    for n in tables.nights:
        by_campaign.setdefault(n["campaign"], []).append(n)
    for campaign, nights in sorted(by_campaign.items()):
        stamps = [n["night"] for n in nights]
        labels = [started_of(s)[:16] or s for s in stamps]
        runs = [r for r in tables.runs if r["campaign"] == campaign]
        tests = sorted({r["test"] or r["name"] for r in runs})
        grid = []
        for test in tests:
            cells = []
            for stamp in stamps:
                found = [r for r in runs if r["night"] == stamp and (r["test"] or r["name"]) == test]
                if not found:
                    cells.append(Cell("", "not-run", "", "not in this campaign run"))
                    continue
                r = found[0]
                expectation = (
                    "no-expectation"
                    if r["as_expected"] is None
                    else "as-expected"
                    if r["as_expected"]
                    else "not-expected"
                )
                word = r["verdict"] or r["status"]
                title = f"{r['night']}: {word}" + (f" (expected {r['expect']})" if r["expect"] else "")
                cells.append(
                    Cell(word, expectation, relative_link(r["report"]) if r["report"] else "", title)
                )
            grid.append((test, cells))
        chart = TrendChart(
            labels,
            [
                Series("invalid runs", RED, tuple(float(n["invalid"]) for n in nights)),
                Series(
                    "not as expected",
                    ORANGE,
                    tuple(float(n["tests"] - n["as_expected"]) for n in nights),
                    dashed=True,
                ),
                Series("tests", GREY, tuple(float(n["tests"]) for n in nights), dashed=True),
            ],
        )
        lost = TrendChart(
            labels, [Series("acked writes lost", RED, tuple(float(n["acked_lost"] or 0) for n in nights))]
        )
        out.append(
            {
                "name": campaign,
                "nights": [
                    {**n, "link": relative_link(n["summary"]), "label": label}
                    for n, label in zip(nights, labels, strict=True)
                ],
                "chart": trend_chart(chart, f"campaign {campaign}: verdicts per night", "tests"),
                "lost_chart": trend_chart(
                    lost, f"campaign {campaign}: acknowledged writes lost per night", "writes lost"
                ),
                "grid": grid,
                "labels": labels,
            }
        )
    return out


def _linked(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**r, "link": relative_link(r["report"]) if r["report"] else ""} for r in rows]


def render_page(store: Path, data: Store, tables: Tables, files: list[str], seconds: float) -> str:
    """The page's HTML."""
    settings = tables.settings
    labels = setting_labels(settings)
    statuses = Counter(r["status"] for r in tables.runs)
    verdicts = Counter(r["verdict"] or "not judged" for r in tables.runs)
    not_judged = [r for r in tables.runs if not r["verdict"]]
    env = jinja2.Environment(loader=jinja2.PackageLoader("harness", "templates"), autoescape=True)
    return env.get_template("analyze.html.j2").render(
        store=str(store),
        runs=len(tables.runs),
        statuses=sorted(statuses.items(), key=lambda kv: (-kv[1], kv[0])),
        verdicts=verdicts,
        history_runs=tables.history_runs,
        settings=[{**s, "label": label} for s, label in zip(settings, labels, strict=True)],
        charts=_charts(settings, labels, tables.runs),
        campaigns=_campaigns(tables),
        slowest=_linked(tables.slowest),
        lossiest=_linked(tables.lossiest),
        not_judged=_linked(not_judged[:100]),
        not_judged_total=len(not_judged),
        nights=len(data.nights),
        files=files,
        pct=_pct,
        seconds=seconds,
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
    )
