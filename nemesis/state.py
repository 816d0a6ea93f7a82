"""The fault ledger: every fault is written down BEFORE it is applied, and crossed out once healed.

A controller killed with SIGKILL leaves its partitions, paused brokers and skewed clocks behind;
`heal_leftovers(state_dir)` reads this file at the next start and runs each fault's heal recipe.
A recipe is a list of `{"node", "argv"}` commands plus, for each node, how to reach it without the
cluster object (`access`: the node's handle, `clusters.handles`).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from clusters.handles import LOCAL, handle_of, reattach
from clusters.node import Node, RunsCommands
from clusters.state import process_alive, process_start_time

log = logging.getLogger(__name__)

LEDGER_DIR = "nemesis"  # under the state dir shared with clusters/state.py


def default_state_dir() -> Path:
    """The directory the cluster ledgers live in too (`$STRANDLINE_STATE_DIR`, else /run/strandline)."""
    from clusters.state import state_dir_default

    return state_dir_default()


_LIVE: set[Path] = set()  # ledgers that a Nemesis of this process still writes to
_SEQUENCE = itertools.count(1)


class FaultLedger:
    """One JSON file per Nemesis listing the faults that are (or may be) in effect.

    The file is named after its owner (pid, process start time, a sequence number), so concurrent
    runs sharing a state dir never heal each other's faults: `heal_leftovers` only takes files
    whose owner process is dead, or that no live Nemesis of this process still holds.
    """

    def __init__(self, state_dir: str | os.PathLike[str], path: Path | None = None):
        if path is None:
            pid = os.getpid()
            name = f"{pid}-{process_start_time(pid) or 0}-{next(_SEQUENCE)}.json"
            path = Path(state_dir) / LEDGER_DIR / name
            _LIVE.add(path)
        self.path = path
        self._lock = threading.Lock()

    @property
    def owner_alive(self) -> bool:
        try:
            pid, start = (int(x) for x in self.path.stem.split("-")[:2])
        except ValueError:
            return False
        if pid == os.getpid():
            return self.path in _LIVE  # an earlier Nemesis of this process left it: ours to heal
        return process_alive(pid, start or None)

    def release(self) -> None:
        """This Nemesis is done with its ledger (everything healed)."""
        _LIVE.discard(self.path)

    @staticmethod
    def all_in(state_dir: str | os.PathLike[str]) -> list[FaultLedger]:
        folder = Path(state_dir) / LEDGER_DIR
        return [FaultLedger(state_dir, p) for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []

    def load(self) -> list[dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return []
        except (OSError, json.JSONDecodeError) as e:
            log.warning("nemesis ledger %s unreadable (%s): ignoring it", self.path, e)
            return []
        faults = data.get("faults", []) if isinstance(data, dict) else []
        return [f for f in faults if isinstance(f, dict)]

    def _save(self, faults: list[dict[str, Any]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump({"faults": faults}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def record(self, entry: dict[str, Any]) -> None:
        """Write the fault (with its heal recipe) down; call this before applying it."""
        with self._lock:
            faults = [f for f in self.load() if f.get("id") != entry["id"]]
            faults.append(entry)
            self._save(faults)

    def cross_out(self, fault_id: str) -> None:
        with self._lock:
            faults = self.load()
            remaining = [f for f in faults if f.get("id") != fault_id]
            if len(remaining) != len(faults):
                self._save(remaining)

    def clear(self) -> None:
        with self._lock, contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def recipe_step(node: Node, argv: list[str]) -> dict[str, Any]:
    return {"node": node.name, "argv": argv, "access": handle_of(node)}


def run_recipe(
    entry: Mapping[str, Any], nodes: Mapping[str, Node] | None = None, timeout: float = 30.0
) -> list[str]:
    """Run one fault's heal recipe; returns the problems (empty when everything healed).

    A step runs on the live node of that name when there is one, else through its recorded handle
    (after a controller crash); a step without a node runs on this machine.
    """
    problems: list[str] = []
    for step in entry.get("heal", []):
        name, argv = step.get("node"), step.get("argv")
        if not isinstance(argv, list):
            continue
        live: RunsCommands | None = (nodes or {}).get(str(name))
        access = step.get("access")
        try:
            runner = live or reattach(str(name), LOCAL if name is None and access is None else access)
            if runner is None:
                problems.append(f"{entry.get('kind')} on {name}: no way to reach the node")
                continue
            result = runner.exec(argv, timeout=timeout, check=False)
        except Exception as e:  # noqa: BLE001 - healing goes on with the next step
            problems.append(f"{entry.get('kind')} on {name}: {e}")
            continue
        if not result.ok:
            problems.append(f"{entry.get('kind')} on {name}: {result.stderr.strip() or 'failed'}")
    return problems
