"""A results store for `strandline analyze`'s tests: two campaigns (three campaign runs) and runs cut
short every way a store holds them.

Every run directory is the report tests' hand-written KIP-101 run (`report_runs.make_run`: 25 s of
load, kills at 10 s and 20 s; with `lost`, 3 acknowledged writes lost on t0-1) with its own
settings in test.json, checked by the real reference checker (results.json), and for some the
history's Parquet form the Spark checker keeps (`checkers.parquet.convert`). The campaign summaries
are written by the campaign's own writer.

| run | campaign run | settings, mix | what |
|---|---|---|---|
| hw-kill/20261120T010100 | nightly 20261120T010000 | high-watermark, kill | invalid (3 lost) |
| safe-kill/20261120T010200 | nightly 20261120T010000 | leader-epoch, kill | valid |
| acks1-kill/20261120T010300 | nightly 20261120T010000 | acks=1, kill | valid (expected invalid) |
| hw-kill/20261121T010100 | nightly 20261121T010000 | high-watermark, kill | invalid (3 lost), Parquet |
| safe-kill/20261121T010200 | nightly 20261121T010000 | leader-epoch, kill | valid, Parquet |
| acks1-kill/20261121T010300 | nightly 20261121T010000 | acks=1, kill | invalid (3 lost), Parquet |
| (a skipped test) | nightly 20261121T010000 | | no run directory |
| safe-none/20261121T050100 | smoke 20261121T050000 | leader-epoch, none | valid |
| safe-delay/20261121T050200 | smoke 20261121T050000 | leader-epoch, delay | refused |
| adhoc-hw/20261119T000000 | | high-watermark, kill | killed: no outcome.json, no results.json |
| HOSTILE/20261119T010000 | | leader-epoch, kill | results.json torn |
| safe-kill/20261119T020000 | | leader-epoch, kill | interrupted (valid history: unknown) |
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from checkers.api import check_run
from checkers.engines import REFERENCE
from checkers.parquet import convert
from foundation import run_files
from foundation.config import validate
from harness.campaign import Campaign, PlannedTest, TestResult, write_outputs
from tests.support.report_runs import make_run

HOSTILE = "<img src=x onerror=alert(1)>"
HW = {"variant": "high-watermark", "nemesis": ["kill"]}
SAFE = {"variant": "leader-epoch", "nemesis": ["kill"]}
ACKS1 = {"variant": "leader-epoch", "acks": "1", "nemesis": ["kill"]}
NONE = {"variant": "leader-epoch", "nemesis": []}
DELAY = {"variant": "leader-epoch", "nemesis": ["delay"]}


def _run(
    store: Path,
    name: str,
    stamp: str,
    settings: dict[str, Any],
    *,
    lost: bool,
    run_s: float | None,
    status: str = "completed",
    parquet: bool = False,
    results: str = "checked",  # checked | none | torn
) -> Path:
    run = make_run(store / name / stamp, lost=lost)
    (run / run_files.RESULTS).unlink()
    test = json.loads((run / run_files.TEST_JSON).read_text())
    # Every key written out, as `strandline run` writes test.json.
    test["config"] = validate({**test["config"], **settings, "name": name, "checker": "reference"}).to_json()
    (run / run_files.TEST_JSON).write_text(json.dumps(test))
    if results == "checked" and status != "refused":
        check_run(run, REFERENCE)
    elif results == "torn":
        (run / run_files.RESULTS).write_text('{"valid": false, "anomal')
    if parquet:
        convert(run / run_files.HISTORY)
    if run_s is not None:
        outcome: dict[str, Any] = {"status": status, "timings": {"total": run_s}}
        if status == "refused":
            outcome["reason"] = "fault 'delay' cannot run here: tc netem is not available on n1"
        (run / run_files.OUTCOME).write_text(json.dumps(outcome))
    (run / run_files.REPORT).write_text(f"<html><body>report of {name}/{stamp}</body></html>")
    old = 1_700_000_000  # long ago: a run without outcome.json is killed, not running
    for path in (run / run_files.HISTORY, run):
        os.utime(path, (old, old))
    return run


def _campaign(
    store: Path, name: str, stamp: str, rows: list[tuple[str, dict[str, Any], str, str, Path | None]]
) -> None:
    """rows: (test name, settings, expect, verdict, run dir)."""
    tests, results = [], []
    for test_name, settings, expect, verdict, run in rows:
        config = validate({**settings, "name": test_name, "store": str(store)})
        planned = PlannedTest(test_name, config, (expect,), test_name)
        tests.append(planned)
        results.append(TestResult(planned, verdict, 60.0, run))
    campaign = Campaign(name, 3600.0, tests, Path(f"campaigns/{name}.toml"))
    out = store / "campaigns" / name / stamp
    out.mkdir(parents=True)
    write_outputs(campaign, out, results, 600.0)


def build_store(store: Path) -> Path:
    """The store of the table above; returns it."""
    n1 = [
        ("hw-kill", HW, "invalid", _run(store, "hw-kill", "20261120T010100", HW, lost=True, run_s=100)),
        ("safe-kill", SAFE, "valid", _run(store, "safe-kill", "20261120T010200", SAFE, lost=False, run_s=90)),
        (
            "acks1-kill",
            ACKS1,
            "invalid",
            _run(store, "acks1-kill", "20261120T010300", ACKS1, lost=False, run_s=95),
        ),
    ]
    _campaign(
        store,
        "nightly",
        "20261120T010000",
        [
            (name, s, expect, verdict, run)
            for (name, s, expect, run), verdict in zip(n1, ("invalid", "valid", "valid"), strict=True)
        ],
    )
    n2 = [
        (
            "hw-kill",
            HW,
            "invalid",
            _run(store, "hw-kill", "20261121T010100", HW, lost=True, run_s=110, parquet=True),
        ),
        (
            "safe-kill",
            SAFE,
            "valid",
            _run(store, "safe-kill", "20261121T010200", SAFE, lost=False, run_s=80, parquet=True),
        ),
        (
            "acks1-kill",
            ACKS1,
            "invalid",
            _run(store, "acks1-kill", "20261121T010300", ACKS1, lost=True, run_s=120, parquet=True),
        ),
    ]
    _campaign(
        store,
        "nightly",
        "20261121T010000",
        [(name, s, expect, "invalid" if name != "safe-kill" else "valid", run) for name, s, expect, run in n2]
        + [("unclean-kill", {**SAFE, "unclean_election": True}, "invalid", "skipped", None)],
    )
    smoke = [
        (
            "safe-none",
            NONE,
            "valid",
            "valid",
            _run(store, "safe-none", "20261121T050100", NONE, lost=False, run_s=50),
        ),
        (
            "safe-delay",
            DELAY,
            "valid",
            "refused",
            _run(store, "safe-delay", "20261121T050200", DELAY, lost=False, run_s=1, status="refused"),
        ),
    ]
    _campaign(store, "smoke", "20261121T050000", smoke)
    _run(store, "adhoc-hw", "20261119T000000", HW, lost=True, run_s=None, results="none")
    _run(store, HOSTILE, "20261119T010000", SAFE, lost=False, run_s=70, results="torn")
    _run(store, "safe-kill", "20261119T020000", SAFE, lost=False, run_s=30, status="interrupted")
    return store
