"""The run directory: creating it and careful readers (a run may have been cut short anywhere).

Its file names are `foundation.run_files`. `<store>/latest` points at the newest run.
"""

from __future__ import annotations

import json
import logging
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from foundation.errors import BadInput
from foundation.run_files import HISTORY, TEST_JSON

log = logging.getLogger(__name__)


def read_json(path: Path) -> Any:
    """A JSON file's content, or None when it is missing or damaged (logged, never raised)."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, json.JSONDecodeError) as e:
        log.warning("%s: unreadable: %s", path, e)
        return None


def write_json(path: Path, data: Any) -> None:
    """Write atomically (temp file + rename) so a crash never leaves half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    os.replace(tmp, path)


def existing_run_dir(path: str | Path) -> Path:
    """The run directory a user named (following `latest`), or BadInput saying what is wrong."""
    p = Path(path)
    if not p.exists():
        raise BadInput(f"no such run directory: {p}")
    if not p.is_dir():
        raise BadInput(f"not a directory: {p}")
    p = p.resolve()
    if not (p / TEST_JSON).exists() and not (p / HISTORY).exists():
        raise BadInput(f"not a run directory (no {TEST_JSON} or {HISTORY}): {p}")
    return p


def new_run_dir(store: Path, name: str) -> Path:
    """Create `<store>/<name>/<YYYYmmddTHHMMSS>/` (unique even within one second) and point latest at it."""
    store = store.resolve()  # absolute, so printed paths open from anywhere
    base = store / name
    base.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    run = base / stamp
    n = 1
    while True:
        try:
            run.mkdir()
            break
        except FileExistsError:
            n += 1
            run = base / f"{stamp}-{n}"
    point_latest(store, run)
    return run


def point_latest(store: Path, run: Path) -> None:
    link = store / "latest"
    tmp = store / f".latest.{os.getpid()}"
    try:
        if tmp.is_symlink() or tmp.exists():
            tmp.unlink()
        tmp.symlink_to(os.path.relpath(run, store))
        os.replace(tmp, link)
    except OSError as e:
        log.warning("could not point %s at %s: %s", link, run, e)
