"""The results store as the results browser sees it: runs by test name, campaigns, verdict trends.

Layout: `<store>/<name>/<stamp>/` (a run: test.json, results.json, outcome.json …) and
`<store>/campaigns/<campaign>/<stamp>/summary.json`. Reading is tolerant: a run cut short, or one
still running, is listed with what it has.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import rundir

SKIP = {"campaigns", "latest", ".work"}


@dataclass
class RunInfo:
    name: str
    stamp: str
    path: Path  # relative to the store
    verdict: str  # valid | invalid | unknown | running
    settings: dict[str, Any] = field(default_factory=dict)
    anomalies: dict[str, int] = field(default_factory=dict)
    seconds: float | None = None
    status: str = ""
    has_report: bool = False


@dataclass
class CampaignInfo:
    name: str
    stamp: str
    path: Path  # relative to the store
    as_expected: bool | None
    counts: dict[str, int]
    tests: int
    seconds: float | None


def _verdict(results: Any, outcome: Any) -> str:
    if isinstance(results, dict):
        valid = results.get("valid")
        return "valid" if valid is True else "invalid" if valid is False else "unknown"
    if isinstance(outcome, dict):
        return "unknown"
    return "running"


def read_run(store: Path, run: Path) -> RunInfo:
    test = rundir.read_json(run / rundir.TEST_JSON) or {}
    config = test.get("config", {}) if isinstance(test, dict) else {}
    results = rundir.read_json(run / rundir.RESULTS)
    outcome = rundir.read_json(run / rundir.OUTCOME)
    anomalies = {}
    if isinstance(results, dict):
        fatal = results.get("fatal")
        for k, v in (results.get("anomalies") or {}).items():
            if isinstance(v, dict) and v.get("count") and (fatal is None or k in fatal):
                anomalies[k] = int(v["count"])
    settings = {
        k: config.get(k)
        for k in (
            "system",
            "variant",
            "acks",
            "min_insync",
            "replication_factor",
            "nemesis",
            "time_limit",
            "seed",
        )
        if k in config
    }
    if config.get("schedule"):
        settings["nemesis"] = "scripted"
    elif isinstance(settings.get("nemesis"), list):
        settings["nemesis"] = ",".join(map(str, settings["nemesis"] or [])) or "none"
    timings = outcome.get("timings", {}) if isinstance(outcome, dict) else {}
    return RunInfo(
        name=run.parent.name,
        stamp=run.name,
        path=run.relative_to(store),
        verdict=_verdict(results, outcome),
        settings=settings,
        anomalies=anomalies,
        seconds=timings.get("total") if isinstance(timings, dict) else None,
        status=str(outcome.get("status", "")) if isinstance(outcome, dict) else "",
        has_report=(run / rundir.REPORT).exists(),
    )


def list_runs(store: Path) -> list[RunInfo]:
    """Every run in the store, newest first."""
    runs: list[RunInfo] = []
    if not store.is_dir():
        return runs
    for name_dir in store.iterdir():
        if (
            name_dir.name in SKIP
            or name_dir.name.startswith(".")
            or not name_dir.is_dir()
            or name_dir.is_symlink()
        ):
            continue
        for run in name_dir.iterdir():
            if (
                run.is_dir()
                and not run.is_symlink()
                and ((run / rundir.TEST_JSON).exists() or (run / rundir.HISTORY).exists())
            ):
                runs.append(read_run(store, run))
    return sorted(runs, key=lambda r: (r.stamp, r.name), reverse=True)


def list_campaigns(store: Path) -> list[CampaignInfo]:
    out: list[CampaignInfo] = []
    root = store / "campaigns"
    if not root.is_dir():
        return out
    for summary in root.glob("*/*/summary.json"):
        data = rundir.read_json(summary) or {}
        out.append(
            CampaignInfo(
                name=summary.parent.parent.name,
                stamp=summary.parent.name,
                path=summary.parent.relative_to(store),
                as_expected=data.get("as_expected"),
                counts=dict(data.get("counts") or {}),
                tests=len(data.get("tests") or []),
                seconds=data.get("seconds"),
            )
        )
    return sorted(out, key=lambda c: c.stamp, reverse=True)


def trends(runs: list[RunInfo], limit: int = 30) -> dict[str, list[RunInfo]]:
    """Per test name, its last `limit` runs oldest to newest: a regression shows as a colour change."""
    by_name: dict[str, list[RunInfo]] = {}
    for r in sorted(runs, key=lambda r: r.stamp):
        by_name.setdefault(r.name, []).append(r)
    return {name: rs[-limit:] for name, rs in sorted(by_name.items())}
