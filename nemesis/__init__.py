"""Faults and fault schedules, written once against the node abstraction (see docs/faults.md).

`check_config(config)` raises BadInput for impossible faults before anything is created;
`build_nemesis(config, cluster, history, rng)` -> Nemesis (.validate, .run_schedule, .heal_all,
.active_faults); `heal_leftovers(state_dir)` heals what a crashed controller left behind.
"""

from nemesis.core import Nemesis, build_nemesis
from nemesis.heal import heal_leftovers
from nemesis.packages import PACKAGES, SHADES
from nemesis.static import check_config

__all__ = [
    "PACKAGES",
    "SHADES",
    "Nemesis",
    "build_nemesis",
    "check_config",
    "heal_leftovers",
]
