"""What a netns cluster could leave behind on this machine, for the tests that check nothing is."""

from __future__ import annotations

import subprocess
from pathlib import Path

from clusters.netns import existing_links, existing_namespaces
from clusters.state import process_alive


def leftovers(name: str, slot: int | None, pids: list[tuple[int, int | None]], state_dir: Path) -> list[str]:
    """Everything a cluster could leave behind that still exists."""
    found = [f"netns {n}" for n in existing_namespaces() if n.startswith(f"sl-{name}-")]
    found += [
        f"link {link}"
        for link in existing_links()
        if link == f"slbr-{name}" or (slot is not None and link.startswith(f"slv{slot}-"))
    ]
    rules = subprocess.run(["iptables", "-w", "-S", "FORWARD"], capture_output=True, text=True).stdout
    found += [f"iptables {r}" for r in rules.splitlines() if f"strandline:{name}" in r]
    found += [f"uts {p}" for p in Path("/run/strandline/uts").glob(f"sl-{name}-*")]
    for root in (Path("/sys/fs/cgroup/strandline"), Path("/sys/fs/cgroup/unified/strandline")):
        if (root / name).exists():
            found.append(f"cgroup {root / name}")
    found += [f"pid {pid}" for pid, start in pids if process_alive(pid, start)]
    if (state_dir / f"{name}.json").exists():
        found.append(f"state file {state_dir / name}.json")
    return found


def nothing_left(tmp_path: Path, name: str) -> None:
    """No cluster state under the test's state dir (tmp_path/state) and no namespace named `name`."""
    assert list((tmp_path / "state").glob("*.json")) == []
    spaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    assert name not in spaces
