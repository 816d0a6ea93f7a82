"""What the requested faults need, asked before any cluster starts (a refusal costs nothing).

Two kinds of need: what the system under test must offer (a role such as `leader` needs a system
that knows its leaders, power loss a system that mounts lazyfs, clock skew one whose brokers read a
clock file: the static checks of `Nemesis.validate`, here against the real, not yet started system)
and what a node must have (tc netem, the iptables statistic match, FUSE, the clock preload: each
package's `node_probe`, asked of one bare node only when some fault in use has such a need).
"""

from __future__ import annotations

import random
from typing import Any

from clusters.node import Node
from clusters.sut import FaultsByCommand
from foundation.config import TestConfig
from foundation.errors import BadInput
from nemesis import schedule
from nemesis.core import Nemesis
from nemesis.packages import Package
from nemesis.static import ShapeCluster


def _nemesis(config: TestConfig, sut: Any) -> Nemesis:
    return Nemesis(config, ShapeCluster(config.nodes, sut), None, random.Random(0), state_dir=".")


def system_refusal(config: TestConfig, sut: Any) -> str | None:
    """Why this system cannot run the requested faults (or schedule), or None."""
    try:
        _nemesis(config, sut).validate(probe=False)
    except BadInput as e:
        return str(e)
    return None


def node_probing_packages(config: TestConfig, sut: Any) -> list[Package]:
    """The fault packages in use that need something of a node. `--nemesis all` needs nothing of
    a node: it leaves out, when the cluster is up, what the nodes cannot do (Nemesis.validate)."""
    if schedule.wants_all(config.nemesis) and not config.schedule:
        return []
    if isinstance(sut, FaultsByCommand):  # its faults are its owner's commands: nothing to ask a node
        return []
    return [p for p in _nemesis(config, sut).packages_in_use() if p.probes_node]


def node_refusal(packages: list[Package], node: Node) -> str | None:
    """The first need a bare node does not meet, as a reason, or None."""
    for package in packages:
        why = package.node_probe(node)
        if why:
            return f"fault {package.name!r} cannot run here: {why}"
    return None
