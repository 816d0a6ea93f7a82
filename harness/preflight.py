"""Refuse, before any cluster starts, a test whose faults cannot run on this system or machine.

`refusal(config, sut, work_dir, state_dir)` asks the system under test (built, not started) what
it offers, and, only when a requested fault needs something of a node (tc netem, FUSE, the clock
preload, the iptables statistic match), one bare node of the test's backend, created for the
question and removed at once. A reason comes back as one line; `strandline run` then ends with
exit 2 and status `refused` before anything else is created.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from foundation.config import TestConfig

log = logging.getLogger(__name__)


def refusal(config: TestConfig, sut: Any, work_dir: Path, state_dir: Path | None) -> str | None:
    """Why this test cannot run here, in one line, or None when every fault it asks for can."""
    from clusters.sut import RefusesTests

    if isinstance(sut, RefusesTests):  # what the system (a release of Kafka, say) cannot run
        why = sut.refusal()
        if why:
            return why
    if not (config.nemesis or config.schedule):
        return None
    from clusters.factory import probe_node
    from nemesis.preflight import node_probing_packages, node_refusal, system_refusal

    why = system_refusal(config, sut)
    if why:
        return why
    packages = node_probing_packages(config, sut)
    if not packages:
        return None
    log.info("asking one %s node what %s need", config.backend, ", ".join(p.name for p in packages))
    with probe_node(config, work_dir, state_dir=state_dir) as node:
        return node_refusal(packages, node)
