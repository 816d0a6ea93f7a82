"""The store's runs as rows for `strandline analyze`: one clean, typed row per run directory.

Reads what each run left on disk (test.json, results.json, outcome.json, the campaign summaries
that ran it, the history's Parquet form when the Spark checker wrote one) and never re-checks a run.
A run directory cut short anywhere is a row too, counted as what it is:

- `status`: outcome.json's (completed | interrupted | failed | refused); `killed` when there is no
  outcome.json (the controller died before finishing); `running` when, besides, its history was
  written in the last two minutes;
- `verdict`: results.json's (valid | invalid | unknown; a valid run that did not complete is
  unknown, as `strandline run` says it); empty when the run was not judged (no readable
  results.json, or refused).

Every value that comes from a file is cleaned here (types checked, text as text), so the Spark
job and the page may trust the rows.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from checkers.parquet import cache_dir_for
from foundation import run_files
from foundation.config import SYSTEM_SETTINGS
from harness.campaign_table import time_to_loss
from harness.store import run_dirs, summaries

log = logging.getLogger(__name__)

RUNNING_S = 120.0  # a history written this recently, with no outcome.json: the run is still going
OPERATIONS = "operations.parquet"  # in the history's Parquet form (checkers.parquet)


@dataclass
class RunRow:
    """One run directory, as the analysis tables hold it (None: not known for this run)."""

    run: str  # "<name>/<stamp>", relative to the store
    name: str
    stamp: str
    started: str  # "2026-11-24 23:58:17" (UTC) from the stamp, "" when the stamp is not one
    campaign: str = ""  # the campaign that ran it ("" when run on its own)
    night: str = ""  # the campaign run's stamp
    test: str = ""  # the campaign's row label ("safe-kill seed=2")
    expect: str = ""  # "valid", "invalid|unknown", ...
    as_expected: bool | None = None
    status: str = "killed"
    verdict: str = ""
    problem: str = ""  # what is missing or damaged, in words
    system: str = ""
    variant: str = ""
    acks: str = ""
    min_insync: int | None = None
    replication_factor: int | None = None
    unclean_election: bool | None = None
    fsync: int | None = None  # log.flush.interval.messages (0: never fsync on append)
    other: str = ""  # other broker settings that differ from the default ("elr, longest-log")
    mix: str = ""  # the fault mix: --nemesis, "none", or "scripted: kill+start"
    client: str = ""
    seed: int | None = None
    time_limit_s: float | None = None
    acked: int | None = None  # acknowledged sends
    acked_lost: int | None = None
    anomalies: str = ""  # the anomalies that counted against the run: "lost-write×3 log-divergence×1"
    first_fault_s: float | None = None
    first_lost_ack_s: float | None = None
    fault_to_loss_s: float | None = None
    unavailable_s: float | None = None  # stretches of >= 1 s without an acknowledged send, in the load
    availability: float | None = None  # 1 - unavailable_s / time_limit_s
    faulted_s: float | None = None  # seconds of the load with a fault in force (windows merged)
    run_s: float | None = None  # the run's wall time (outcome.json)
    check_s: float | None = None  # the checker's seconds (results.json)
    engine: str = ""
    report: str = ""  # "<name>/<stamp>/report.html" when there is one
    history_form: str = ""  # the history's operations.parquet (absolute), when readable
    # Merged fault windows within the load, seconds since the start (for the Spark job, not a column).
    windows: list[tuple[float, float]] = field(default_factory=list)

    @property
    def judged(self) -> bool:
        return self.verdict in ("valid", "invalid", "unknown")


# The table's columns in order (RunRow's fields but the windows), for Parquet, CSV and Spark.
RUN_COLUMNS: tuple[str, ...] = tuple(
    f for f in RunRow.__dataclass_fields__ if f not in ("windows", "history_form")
)
SETTING_COLUMNS = (*SYSTEM_SETTINGS, "fsync", "other")


@dataclass(frozen=True)
class Night:
    """One run of a campaign (its summary.json), with what only the summary knows."""

    campaign: str
    night: str
    tests: int
    as_expected: int  # tests whose verdict was as expected
    skipped: int
    seconds: float | None
    summary: str  # "campaigns/<name>/<stamp>/index.html", relative to the store


@dataclass
class Store:
    runs: list[RunRow]
    nights: list[Night]


def _text(value: Any, limit: int = 200) -> str:
    if value is None:
        return ""
    text = ",".join(map(str, value)) if isinstance(value, list | tuple) else str(value)
    return text[:limit]


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _json(path: Path) -> Any:
    """A JSON file's content; None when missing or damaged (the row says so; no warning per run)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        log.debug("%s: %s", path, e)
        return None


def started_of(stamp: str) -> str:
    """'20261124T235817' (or '...-2') -> '2026-11-24 23:58:17'; '' when it is no stamp."""
    try:
        return datetime.strptime(stamp[:15], "%Y%m%dT%H%M%S").strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return ""


def fault_mix(config: dict[str, Any]) -> str:
    """The fault mix a run was given: its --nemesis value, or the kinds of its scripted steps."""
    schedule = config.get("schedule")
    if isinstance(schedule, list) and schedule:
        kinds = sorted({str(s["do"]) for s in schedule if isinstance(s, dict) and s.get("do")})
        return "scripted: " + ("+".join(kinds) or "waits only")
    nemesis = config.get("nemesis")
    if isinstance(nemesis, str):
        return nemesis or "none"
    if isinstance(nemesis, list | tuple):
        return ",".join(map(str, nemesis)) or "none"
    return ""


# Broker settings beyond the columns, named when they differ from the default.
OTHER_SETTINGS: tuple[tuple[str, Any, Callable[[Any], str]], ...] = (
    ("leader_election_policy", "first-in-isr", lambda v: f"election={v}"),
    ("eligible_leader_replicas", False, lambda v: "elr" if v else "no-elr"),
    ("isr_broker_epoch_check", False, lambda v: "kip-903" if v else "no-kip-903"),
    ("idempotence", False, lambda v: "idempotence" if v else "no-idempotence"),
    (
        "leader_epoch_checkpoint_fsync",
        True,
        lambda v: "epoch-checkpoint-fsync" if v else "no-epoch-checkpoint-fsync",
    ),
)


def _settings(row: RunRow, config: dict[str, Any]) -> None:
    row.system = _text(config.get("system"))
    row.variant = _text(config.get("variant"))
    row.acks = _text(config.get("acks"))
    row.min_insync = _int(config.get("min_insync"))
    row.replication_factor = _int(config.get("replication_factor"))
    row.unclean_election = _bool(config.get("unclean_election"))
    row.fsync = _int(config.get("log_flush_interval_messages"))
    row.other = ", ".join(
        name(config[key]) for key, default, name in OTHER_SETTINGS if key in config and config[key] != default
    )
    row.mix = fault_mix(config)
    row.client = _text(config.get("client"))
    row.seed = _int(config.get("seed"))
    limit = _num(config.get("time_limit"))
    row.time_limit_s = limit if limit is not None and limit > 0 else None


def _spans(items: Any, load_end: float | None) -> list[tuple[float, float]]:
    """(start_s, end_s) of each well-formed item, clipped to the load [0, load_end] (empty ones dropped)."""
    spans = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        start, end = _num(item.get("start_s")), _num(item.get("end_s"))
        if start is None or end is None:
            continue
        if load_end is not None:
            start, end = max(0.0, start), min(end, load_end)
        if end > start:
            spans.append((start, end))
    return spans


def merged_windows(stats: dict[str, Any], load_end: float | None) -> list[tuple[float, float]]:
    """results.json's fault windows clipped to the load [0, load_end] and merged (disjoint, sorted)."""
    merged: list[tuple[float, float]] = []
    for start, end in sorted(_spans(stats.get("fault_windows"), load_end)):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _results(row: RunRow, results: dict[str, Any]) -> None:
    valid = results.get("valid")
    row.verdict = "valid" if valid is True else "invalid" if valid is False else "unknown"
    stats = results.get("stats") if isinstance(results.get("stats"), dict) else {}
    assert isinstance(stats, dict)
    sends = stats.get("sends") if isinstance(stats.get("sends"), dict) else {}
    assert isinstance(sends, dict)
    row.acked = _int(stats.get("acked"))
    if row.acked is None:
        row.acked = _int(sends.get("ok"))
    row.acked_lost = _int(stats.get("acked_lost"))
    fatal = results.get("fatal")
    counted = []
    anomalies = results.get("anomalies") if isinstance(results.get("anomalies"), dict) else {}
    assert isinstance(anomalies, dict)
    for name, found in sorted(anomalies.items()):
        count = _int(found.get("count")) if isinstance(found, dict) else None
        if count and (not isinstance(fatal, list) or name in fatal):
            counted.append(f"{_text(name, 60)}×{count}")
    row.anomalies = " ".join(counted)
    row.first_fault_s = _num(stats.get("first_fault_s"))
    row.first_lost_ack_s = _num(stats.get("first_lost_ack_s"))
    to_loss = time_to_loss(
        {"stats": {"first_fault_s": row.first_fault_s, "first_lost_ack_s": row.first_lost_ack_s}}
    )
    row.fault_to_loss_s = round(to_loss, 3) if to_loss is not None else None
    gaps = stats.get("unavailable")
    if isinstance(gaps, list):
        row.unavailable_s = round(sum((end - start for start, end in _spans(gaps, row.time_limit_s)), 0.0), 3)
        if row.time_limit_s:
            row.availability = round(max(0.0, 1.0 - row.unavailable_s / row.time_limit_s), 4)
    row.windows = merged_windows(stats, row.time_limit_s)
    row.faulted_s = round(sum((end - start for start, end in row.windows), 0.0), 3)
    checker = results.get("checker") if isinstance(results.get("checker"), dict) else {}
    assert isinstance(checker, dict)
    row.check_s = _num(checker.get("seconds"))
    row.engine = _text(checker.get("engine"))


def history_form(run: Path) -> Path | None:
    """The operations table of the history's Parquet form, when one is there and its footer reads."""
    path = cache_dir_for(run / run_files.HISTORY) / OPERATIONS
    if not path.is_file():
        return None
    import pyarrow.parquet as pq

    try:
        pq.read_metadata(path)
    except Exception as e:  # torn or foreign: the run counts without its history's figures
        log.info("%s: unreadable (%s)", path, e)
        return None
    return path


def read_run(run: Path, now: float | None = None) -> RunRow:
    """One run directory as a row; never raises for what is missing or damaged."""
    row = RunRow(
        run=f"{run.parent.name}/{run.name}",
        name=run.parent.name,
        stamp=run.name,
        started=started_of(run.name),
    )
    problems = []
    test = _json(run / run_files.TEST_JSON)
    config = test.get("config") if isinstance(test, dict) else None
    if isinstance(config, dict):
        _settings(row, config)
    else:
        problems.append(f"no readable {run_files.TEST_JSON}")
    outcome = _json(run / run_files.OUTCOME)
    if isinstance(outcome, dict):
        row.status = _text(outcome.get("status"), 40) or "completed"
        timings = outcome.get("timings")
        row.run_s = _num(timings.get("total")) if isinstance(timings, dict) else None
    else:
        history = run / run_files.HISTORY
        try:
            fresh = (now if now is not None else time.time()) - history.stat().st_mtime < RUNNING_S
        except OSError:
            fresh = False
        row.status = "running" if fresh else "killed"
    results = _json(run / run_files.RESULTS)
    if isinstance(results, dict):
        _results(row, results)
        if row.status != "completed" and row.verdict == "valid":
            row.verdict = "unknown"  # nothing wrong was seen, but the run did not go to its end
    elif (run / run_files.RESULTS).exists():
        problems.append(f"{run_files.RESULTS} unreadable")
    elif row.status != "refused":
        problems.append(f"no {run_files.RESULTS}")
    if row.status == "refused":
        row.verdict = ""
        problems.append("refused: " + _text(outcome.get("reason") if isinstance(outcome, dict) else "", 200))
    row.problem = "; ".join(p for p in problems if p)
    if (run / run_files.REPORT).is_file():
        row.report = f"{row.run}/{run_files.REPORT}"
    form = history_form(run)
    row.history_form = str(form) if form else ""
    return row


def read_nights(store: Path, rows: dict[str, RunRow]) -> list[Night]:
    """Every campaign run; marks the rows it ran with the campaign, the night and the expectation.

    A summary names each run by its directory; the store may have moved since, so a run is found
    by its last two path parts (`<name>/<stamp>`).
    """
    nights = []
    for summary in summaries(store):
        data = _json(summary)
        if not isinstance(data, dict):
            continue
        campaign, night = summary.parent.parent.name, summary.parent.name
        tests = [t for t in data.get("tests") or [] if isinstance(t, dict)]
        for t in tests:
            run_dir = t.get("run_dir")
            if not isinstance(run_dir, str) or not run_dir:
                continue
            parts = Path(run_dir).parts
            row = rows.get("/".join(parts[-2:]))
            if row is None:
                continue
            row.campaign, row.night, row.test = campaign, night, _text(t.get("name"))
            expect = t.get("expect")
            row.expect = "|".join(map(str, expect)) if isinstance(expect, list) else _text(expect)
            row.as_expected = _bool(t.get("as_expected"))
        nights.append(
            Night(
                campaign=campaign,
                night=night,
                tests=len(tests),
                as_expected=sum(1 for t in tests if t.get("as_expected") is True),
                skipped=sum(1 for t in tests if t.get("verdict") == "skipped"),
                seconds=_num(data.get("seconds")),
                summary=f"campaigns/{campaign}/{night}/{run_files.CAMPAIGN_PAGE}",
            )
        )
    return nights


def read_store(store: Path, progress: Callable[[int, int], None] | None = None) -> Store:
    """Every run and campaign run of the store; `progress(done, total)` now and then."""
    dirs = list(run_dirs(store))
    now = time.time()
    rows: dict[str, RunRow] = {}
    last = time.monotonic()
    for i, run in enumerate(dirs, start=1):
        row = read_run(run, now)
        rows[row.run] = row
        if progress is not None and (time.monotonic() - last > 2.0 or i == len(dirs)):
            progress(i, len(dirs))
            last = time.monotonic()
    nights = read_nights(store, rows)
    return Store(list(rows.values()), nights)


def relative_link(target: str) -> str:
    """A link from `<store>/analysis/index.html` to a store path: '../<name>/<stamp>/report.html'."""
    from urllib.parse import quote

    return "../" + "/".join(quote(part) for part in target.split(os.sep))
