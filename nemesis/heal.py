"""Healing after a crashed controller: run the heal recipes the ledger still lists.

Called at the next start (`heal_leftovers(state_dir)`), with no cluster object: each recipe step
says how to reach its node (the node's handle, `clusters.handles`: a namespace, a container, an
ssh host). A node that no longer exists (its namespace or container was removed with its cluster)
has nothing to heal.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from clusters.handles import gone as node_gone
from clusters.node import Node
from nemesis.state import FaultLedger, default_state_dir, run_recipe

log = logging.getLogger(__name__)


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
            vanished = [
                s
                for s in entry.get("heal", [])
                if not (nodes and s.get("node") in nodes) and node_gone(s.get("access"))
            ]
            live = {**entry, "heal": [s for s in entry.get("heal", []) if s not in vanished]}
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
