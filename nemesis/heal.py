"""Healing after a crashed controller: run the heal recipes the ledger still lists.

Called at the next start (`heal_leftovers(state_dir)`), with no cluster object: each recipe step
says how to reach its node (an argv prefix recorded from the node, e.g. `ip netns exec <ns>`). A
node that no longer exists (its namespace was cleaned up with its cluster) has nothing to heal.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Mapping
from typing import Any

from clusters.node import Node
from nemesis.state import FaultLedger, default_state_dir, run_recipe

log = logging.getLogger(__name__)


def _gone(step: Mapping[str, Any]) -> bool:
    """Whether the step's node has vanished (a netns that no longer exists)."""
    access = step.get("access") or []
    if not isinstance(access, list):
        return False
    if len(access) == 3 and access[:2] == ["docker", "exec"]:
        probe = subprocess.run(
            ["docker", "inspect", "--format", "{{.State.Running}}", access[2]],
            capture_output=True,
            text=True,
            check=False,
        )
        return probe.stdout.strip() != "true"
    if len(access) >= 4 and access[:3] == ["ip", "netns", "exec"]:
        return not os.path.exists(f"/run/netns/{access[3]}")
    for arg in access:  # nsenter --net=/run/netns/<ns> ...
        if isinstance(arg, str) and arg.startswith("--net="):
            return not os.path.exists(arg[len("--net=") :])
    return False


def heal_leftovers(
    state_dir: str | os.PathLike[str] | None = None, nodes: Mapping[str, Node] | None = None
) -> list[str]:
    """Heal every fault a dead controller recorded and did not cross out; returns the fault ids healed.

    Ledgers of live controllers are left alone. Problems are logged; entries that could not be
    healed stay in their ledger for the next try.
    """
    healed: list[str] = []
    for ledger in FaultLedger.all_in(state_dir if state_dir is not None else default_state_dir()):
        if ledger.owner_alive:
            continue
        for entry in ledger.load():
            gone = [s for s in entry.get("heal", []) if not (nodes and s.get("node") in nodes) and _gone(s)]
            live = {**entry, "heal": [s for s in entry.get("heal", []) if s not in gone]}
            problems = run_recipe(live, nodes)
            if problems:
                for p in problems:
                    log.warning("leftover fault %s: %s", entry.get("id"), p)
                continue
            ledger.cross_out(str(entry.get("id")))
            healed.append(f"fault {entry.get('id')} on {', '.join(map(str, entry.get('nodes', [])))}")
            log.info(
                "healed leftover fault %s (%s on %s)", entry.get("id"), entry.get("kind"), entry.get("nodes")
            )
        if not ledger.load():
            ledger.clear()
    return healed
