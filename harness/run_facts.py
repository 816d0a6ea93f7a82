"""Facts about how a stored run ended, for the report and `serve`: was it cut short, and how far did it get?

A controller killed with SIGKILL writes no outcome.json; its history simply stops. These facts are
read from what is on disk (outcome.json, test.json, the history's last line), so a report written
later (`strandline report`, `strandline check`) can say "cut short after 2.9 s of 60 s".
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from foundation import run_files
from harness import rundir

log = logging.getLogger(__name__)

_TAIL_BYTES = 64 * 1024


def last_history_time_s(history: Path) -> float | None:
    """Seconds since the test started at the history's last complete line (None: none readable)."""
    try:
        with history.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - _TAIL_BYTES))
            tail = f.read()
    except OSError:
        return None
    for line in reversed(tail.splitlines()):
        try:
            op = json.loads(line)
        except ValueError:
            continue  # a torn last line (killed mid-write) or the cut first line of the tail
        if isinstance(op, dict) and isinstance(op.get("time"), int | float):
            return round(op["time"] / 1e9, 2)
    return None


def run_facts(run_dir: str | Path) -> dict[str, Any]:
    """{"cut_short", "status", "reason", "ran_s", "time_limit_s", "recovery"} of one run directory.

    `status`: outcome.json's (completed | interrupted | failed), or "killed" when there is none
    (the controller died without finishing; a run still in progress looks the same). `ran_s`: the
    history's last timestamp; `cut_short`: the run did not complete, or its history stops well
    before the time limit. `recovery`: outcome.json's, when the run recorded one.
    """
    run = Path(run_dir)
    outcome = rundir.read_json(run / run_files.OUTCOME)
    test = rundir.read_json(run / run_files.TEST_JSON) or {}
    config = test.get("config") if isinstance(test, dict) else None
    limit = config.get("time_limit") if isinstance(config, dict) else None
    time_limit_s = float(limit) if isinstance(limit, int | float) else None
    ran_s = last_history_time_s(run / run_files.HISTORY)
    if isinstance(outcome, dict):
        status = str(outcome.get("status") or "completed")
        reason = str(outcome.get("reason") or "")
        recovery = outcome.get("recovery")
    else:
        status, reason, recovery = "killed", "no outcome.json: the controller stopped without finishing", None
    cut_short = status != "completed"
    if not cut_short and ran_s is not None and time_limit_s is not None and ran_s < 0.9 * time_limit_s:
        cut_short, reason = True, f"the history stops at {ran_s:g} s of {time_limit_s:g} s"
    return {
        "cut_short": cut_short,
        "status": status,
        "reason": reason,
        "ran_s": ran_s,
        "time_limit_s": time_limit_s,
        "recovery": recovery if isinstance(recovery, dict) else None,
    }
