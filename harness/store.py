"""The results store as the results browser sees it: runs by test name, campaigns, verdict trends.

Layout: `<store>/<name>/<stamp>/` (a run: test.json, results.json, outcome.json …) and
`<store>/campaigns/<campaign>/<stamp>/summary.json`. Reading is tolerant: a run cut short, or one
still running, is listed with what it has.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from foundation import run_files
from harness import rundir

SKIP = {"campaigns", "latest", ".work", run_files.ANALYSIS}


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
    # From the campaign that ran it (None: run on its own, nothing was expected of it).
    expect: tuple[str, ...] | None = None
    as_expected: bool | None = None

    @property
    def expectation(self) -> str:
        """The trend square's class: as-expected | not-expected | no-expectation (colour by this)."""
        if self.as_expected is None:
            return "no-expectation"
        return "as-expected" if self.as_expected else "not-expected"


@dataclass
class CampaignInfo:
    name: str
    stamp: str
    path: Path  # relative to the store
    as_expected: bool | None
    counts: dict[str, int]
    tests: int
    seconds: float | None
    expected: int = 0  # tests whose verdict was as expected (skipped ones count, as in summary.json)

    @property
    def result(self) -> str:
        """'3/4 as expected' for the campaigns table."""
        return f"{self.expected}/{self.tests} as expected"


def _verdict(results: Any, outcome: Any) -> str:
    if isinstance(results, dict):
        valid = results.get("valid")
        return "valid" if valid is True else "invalid" if valid is False else "unknown"
    if isinstance(outcome, dict):
        return "unknown"
    return "running"


def read_run(store: Path, run: Path) -> RunInfo:
    test = rundir.read_json(run / run_files.TEST_JSON) or {}
    config = test.get("config", {}) if isinstance(test, dict) else {}
    results = rundir.read_json(run / run_files.RESULTS)
    outcome = rundir.read_json(run / run_files.OUTCOME)
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
        # No outcome.json but a checked history: the controller was killed (harness.run_facts).
        status=str(outcome.get("status", ""))
        if isinstance(outcome, dict)
        else ("killed" if isinstance(results, dict) else ""),
        has_report=(run / run_files.REPORT).exists(),
    )


def run_dirs(store: Path) -> Iterator[Path]:
    """Every run directory of the store: `<name>/<stamp>/` with a test.json or a history."""
    if not store.is_dir():
        return
    for name_dir in sorted(store.iterdir()):
        if (
            name_dir.name in SKIP
            or name_dir.name.startswith(".")
            or not name_dir.is_dir()
            or name_dir.is_symlink()
        ):
            continue
        for run in sorted(name_dir.iterdir()):
            if (
                run.is_dir()
                and not run.is_symlink()
                and ((run / run_files.TEST_JSON).exists() or (run / run_files.HISTORY).exists())
            ):
                yield run


def list_runs(store: Path) -> list[RunInfo]:
    """Every run in the store, newest first."""
    runs = [read_run(store, run) for run in run_dirs(store)]
    expected = expectations(store)
    for r in runs:
        found = expected.get(str((store / r.path).resolve()))
        if found is not None:
            r.expect, r.as_expected = found
    return sorted(runs, key=lambda r: (r.stamp, r.name), reverse=True)


def summaries(store: Path) -> list[Path]:
    """Every campaign summary.json, not counting the `latest` symlinks (no duplicate rows)."""
    root = store / "campaigns"
    if not root.is_dir():
        return []
    return sorted(s for s in root.glob(f"*/*/{run_files.CAMPAIGN_SUMMARY}") if not s.parent.is_symlink())


def expectations(store: Path) -> dict[str, tuple[tuple[str, ...], bool | None]]:
    """Resolved run dir -> (expected verdicts, as expected?) from every campaign that ran it."""
    out: dict[str, tuple[tuple[str, ...], bool | None]] = {}
    for summary in summaries(store):
        data = rundir.read_json(summary) or {}
        for t in data.get("tests") or []:
            if isinstance(t, dict) and t.get("run_dir"):
                ok = t.get("as_expected")
                out[str(Path(t["run_dir"]).resolve())] = (
                    tuple(map(str, t.get("expect") or ())),
                    ok if isinstance(ok, bool) else None,
                )
    return out


def list_campaigns(store: Path) -> list[CampaignInfo]:
    out: list[CampaignInfo] = []
    for summary in summaries(store):
        data = rundir.read_json(summary) or {}
        tests = [t for t in data.get("tests") or [] if isinstance(t, dict)]
        out.append(
            CampaignInfo(
                name=summary.parent.parent.name,
                stamp=summary.parent.name,
                path=summary.parent.relative_to(store),
                as_expected=data.get("as_expected"),
                counts=dict(data.get("counts") or {}),
                tests=len(tests),
                seconds=data.get("seconds"),
                expected=sum(1 for t in tests if t.get("as_expected") is True),
            )
        )
    return sorted(out, key=lambda c: c.stamp, reverse=True)


def trends(runs: list[RunInfo], limit: int = 30) -> dict[str, list[RunInfo]]:
    """Per test name, its last `limit` runs oldest to newest: a regression shows as a colour change."""
    by_name: dict[str, list[RunInfo]] = {}
    for r in sorted(runs, key=lambda r: r.stamp):
        by_name.setdefault(r.name, []).append(r)
    return {name: rs[-limit:] for name, rs in sorted(by_name.items())}
