"""The fault packages, by the names `--nemesis` accepts (see docs/faults.md)."""

from __future__ import annotations

from nemesis.packages import clockskew, corrupt, disk, link, membership, partition, process, storage
from nemesis.packages.base import Active, Context, NoTarget, Package, PlanEnv

PACKAGES: dict[str, Package] = {
    p.name: p
    for p in (
        *process.PACKAGES,
        *partition.PACKAGES,
        *link.PACKAGES,
        *clockskew.PACKAGES,
        *disk.PACKAGES,
        *corrupt.PACKAGES,
        *membership.PACKAGES,
        *storage.PACKAGES,
    )
}
ALIASES = {"disk": "lose-unsynced", "power-loss": "lose-unsynced", "skew": "clock"}

# What a report draws: each fault's colour and label, and the history `f` that ends its window.
SHADES: dict[str, dict[str, str]] = {
    p.f: {**p.shade, "healed_by": p.heal_f} for p in PACKAGES.values() if p.shade
}


def lookup(name: str) -> Package | None:
    return PACKAGES.get(ALIASES.get(name, name))


__all__ = ["ALIASES", "PACKAGES", "SHADES", "Active", "Context", "NoTarget", "Package", "PlanEnv", "lookup"]
