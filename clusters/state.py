"""The cleanup ledger: every system resource a cluster creates, written down BEFORE it is created.

One JSON file per cluster in a state directory (default `/run/strandline`, which a reboot empties
together with the namespaces it describes). `down`, Ctrl-C and the next start after a crash all
remove resources the same way: in reverse order of creation, each removal idempotent (a thing that
is already gone is fine). A file whose owner process still runs belongs to a live cluster and is
left alone; a `detached` file (a cluster started by `strandline cluster up`, meant to outlive its
controller) is removed only by `cluster down` or `cluster down --all`.

Resource kinds: `netns`, `veth`, `bridge`, `iptables` (a rule spec for `iptables -D`), `mount`
(a bind mount such as a persistent UTS namespace), `cgroup` (a cgroup v2 directory: killed whole,
then removed), `pid` (a process, with its start time so a reused pid is never killed), `file`, `dir`,
`etcdir` (a directory under /etc). Other backends may add kinds with `register_remover`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from foundation.errors import InfrastructureError

log = logging.getLogger(__name__)

DEFAULT_STATE_DIR = "/run/strandline"


def state_dir_default() -> Path:
    """The state directory: `$STRANDLINE_STATE_DIR`, else /run/strandline."""
    return Path(os.environ.get("STRANDLINE_STATE_DIR") or DEFAULT_STATE_DIR)


def process_start_time(pid: int) -> int | None:
    """The start time (clock ticks since boot) of a process, or None when it does not exist."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] == "Z":
        return None
    return int(fields[19])


def process_alive(pid: int, start_time: int | None) -> bool:
    """Is this exact process (pid plus start time, so not a reused pid) still running?"""
    now = process_start_time(pid)
    return now is not None and (start_time is None or now == start_time)


@contextlib.contextmanager
def locked(state_dir: Path) -> Iterator[None]:
    """An exclusive lock over the state directory (slot allocation, cleanup of leftovers)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    with open(state_dir / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class ClusterState:
    """The ledger of one cluster, saved atomically after every change."""

    def __init__(self, path: Path, data: dict[str, Any]) -> None:
        self.path = path
        self.data = data
        # The nemesis starts and kills daemons from several threads at once: one writer at a time.
        self.lock = threading.RLock()

    @classmethod
    def create(cls, state_dir: Path, cluster: str, info: dict[str, Any] | None = None) -> ClusterState:
        pid = os.getpid()
        data = {
            "cluster": cluster,
            "owner": {"pid": pid, "start": process_start_time(pid)},
            "detached": False,
            "info": dict(info or {}),
            "resources": [],
        }
        state = cls(state_dir / f"{cluster}.json", data)
        state.save()
        return state

    @classmethod
    def load(cls, path: Path) -> ClusterState:
        return cls(path, json.loads(path.read_text()))

    @property
    def cluster(self) -> str:
        return str(self.data["cluster"])

    @property
    def info(self) -> dict[str, Any]:
        info: dict[str, Any] = self.data.setdefault("info", {})
        return info

    @property
    def resources(self) -> list[dict[str, Any]]:
        resources: list[dict[str, Any]] = self.data["resources"]
        return resources

    def save(self) -> None:
        with self.lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            with open(tmp, "w") as f:
                json.dump(self.data, f, indent=1)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)

    def add(self, kind: str, name: str, **extra: Any) -> None:
        """Record a resource about to be created (call BEFORE creating it)."""
        with self.lock:
            if not self.has(kind, name):
                self.resources.append({"kind": kind, "name": name, **extra})
                self.save()

    def replace(self, kind: str, match: dict[str, Any], name: str, **extra: Any) -> None:
        """Drop the records of `kind` whose fields equal `match`, then add this one (one save)."""
        with self.lock:
            self.data["resources"] = [
                r
                for r in self.resources
                if not (r["kind"] == kind and all(r.get(k) == v for k, v in match.items()))
            ]
            self.resources.append({"kind": kind, "name": name, **match, **extra})
            self.save()

    def has(self, kind: str, name: str) -> bool:
        return any(r["kind"] == kind and r["name"] == name for r in self.resources)

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.resources if r["kind"] == kind]

    def forget(self, kind: str, name: str) -> None:
        with self.lock:
            self.data["resources"] = [
                r for r in self.resources if not (r["kind"] == kind and r["name"] == name)
            ]
            self.save()

    def set_info(self, **info: Any) -> None:
        with self.lock:
            self.info.update(info)
            self.save()

    def detach(self) -> None:
        """The cluster outlives this process (`cluster up`): only an explicit down removes it."""
        with self.lock:
            self.data["detached"] = True
            self.data["owner"] = None
            self.save()

    def owner_alive(self) -> bool:
        owner = self.data.get("owner")
        if not owner:
            return False
        return process_alive(int(owner["pid"]), owner.get("start"))

    def cleanup(self) -> list[str]:
        """Remove every recorded resource (newest first), then the file. Returns what failed."""
        failures: list[str] = []
        for resource in reversed(list(self.resources)):
            try:
                remove_resource(resource)
            except Exception as e:  # keep going: one stuck resource must not strand the rest
                failures.append(f"{resource['kind']} {resource['name']}: {e}")
                log.warning("cleanup of %s %s failed: %s", resource["kind"], resource["name"], e)
                continue
            self.forget(resource["kind"], resource["name"])
        if not failures:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        return failures


def list_states(state_dir: Path) -> list[ClusterState]:
    states = []
    for path in sorted(state_dir.glob("*.json")) if state_dir.is_dir() else []:
        try:
            states.append(ClusterState.load(path))
        except (OSError, ValueError, KeyError) as e:
            log.warning("unreadable state file %s: %s", path, e)
    return states


def cleanup_leftovers(state_dir: Path | None = None, *, include_detached: bool = False) -> list[str]:
    """Remove what crashed controllers left behind; returns the cluster names cleaned.

    A cluster whose owner still runs is never touched. Detached clusters (`cluster up`) are
    removed only with include_detached (`cluster down --all`).
    """
    state_dir = state_dir or state_dir_default()
    cleaned = []
    with locked(state_dir):
        for state in list_states(state_dir):
            if state.owner_alive():
                continue
            if state.data.get("detached") and not include_detached:
                continue
            log.info("cleaning up leftovers of cluster %s (%s)", state.cluster, state.path)
            failures = state.cleanup()
            if failures:
                log.warning("leftovers of %s not fully removed: %s", state.cluster, "; ".join(failures))
            cleaned.append(state.cluster)
    return cleaned


# --- removers: one per kind, each idempotent --------------------------------------------------

Remover = Callable[[dict[str, Any]], None]
_REMOVERS: dict[str, Remover] = {}


def register_remover(kind: str, remover: Remover) -> None:
    """Another backend's resource kind (e.g. a docker container)."""
    _REMOVERS[kind] = remover


def remove_resource(resource: dict[str, Any]) -> None:
    remover = _REMOVERS.get(resource["kind"])
    if remover is None:
        raise ValueError(f"no remover for resource kind {resource['kind']!r}")
    remover(resource)


def run_quiet(argv: list[str], *, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    """Run a system tool; the caller decides what a non-zero exit means."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise InfrastructureError(f"{argv[0]} is not installed (scripts/setup.sh installs it)") from None
    except subprocess.TimeoutExpired:
        raise InfrastructureError(f"`{' '.join(argv)}` timed out after {timeout:g}s") from None


def _gone(result: subprocess.CompletedProcess[str], *markers: str) -> bool:
    text = (result.stderr + result.stdout).lower()
    return any(m in text for m in markers)


def _remove_netns(r: dict[str, Any]) -> None:
    result = run_quiet(["ip", "netns", "delete", r["name"]])
    if result.returncode != 0 and Path(f"/run/netns/{r['name']}").exists():
        raise RuntimeError(result.stderr.strip())


def _remove_link(r: dict[str, Any]) -> None:
    result = run_quiet(["ip", "link", "delete", r["name"]])
    if result.returncode != 0 and not _gone(result, "cannot find", "does not exist"):
        raise RuntimeError(result.stderr.strip())


def _remove_iptables(r: dict[str, Any]) -> None:
    spec = list(r["spec"])
    table = ["-t", r["table"]] if r.get("table") else []
    # -C first so a rule inserted twice is removed twice, and a missing one is not an error.
    while run_quiet(["iptables", "-w", *table, "-C", r["chain"], *spec]).returncode == 0:
        result = run_quiet(["iptables", "-w", *table, "-D", r["chain"], *spec])
        if result.returncode != 0:
            raise RuntimeError(result.stderr.strip())


def mount_points_under(path: Path) -> list[Path]:
    """Mount points at or below `path`, deepest first."""
    found = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mounts").read_text().splitlines():
            point = Path(line.split()[1].replace("\\040", " "))
            if point == path or path in point.parents:
                found.append(point)
    return sorted(found, key=lambda p: -len(p.parts))


def unmount(path: Path) -> None:
    """Unmount, lazily when busy (a FUSE daemon already killed, a file still open)."""
    result = run_quiet(["umount", str(path)])
    if result.returncode != 0 and not _gone(result, "not mounted", "no such file", "not found"):
        lazy = run_quiet(["umount", "-l", str(path)])
        if lazy.returncode != 0 and not _gone(lazy, "not mounted", "no such file", "not found"):
            raise RuntimeError(lazy.stderr.strip() or result.stderr.strip())


def _remove_mount(r: dict[str, Any]) -> None:
    path = Path(r["name"])
    unmount(path)
    if not path.is_dir():
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def cgroup_pids(path: Path) -> list[int]:
    """Every pid in a cgroup directory and its descendants."""
    pids: list[int] = []
    for procs in sorted(path.rglob("cgroup.procs")) if path.is_dir() else []:
        with contextlib.suppress(OSError):
            pids += [int(line) for line in procs.read_text().split()]
    return pids


def kill_cgroup(path: Path, *, timeout: float = 10.0) -> None:
    """SIGKILL everything in a cgroup subtree (frozen or not) and wait until it is empty."""
    if not path.is_dir():
        return
    kill_file = path / "cgroup.kill"
    if kill_file.exists():
        kill_file.write_text("1")
    else:  # kernels before 5.14: signal each pid, thawing first so SIGKILL is delivered
        for freeze in path.rglob("cgroup.freeze"):
            with contextlib.suppress(OSError):
                freeze.write_text("0")
        for pid in cgroup_pids(path):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while cgroup_pids(path):
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes still in {path} after SIGKILL: {cgroup_pids(path)}")
        time.sleep(0.02)


def remove_cgroup(path: Path) -> None:
    """Kill the subtree, then remove its directories bottom-up."""
    kill_cgroup(path)
    if not path.is_dir():
        return
    for sub in sorted((p for p in path.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        _rmdir_cgroup(sub)
    _rmdir_cgroup(path)


def _rmdir_cgroup(path: Path) -> None:
    for _ in range(100):
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as e:  # EBUSY while the last killed task is being reaped
            if e.errno != errno.EBUSY:
                raise
            time.sleep(0.02)
    path.rmdir()


def _remove_cgroup(r: dict[str, Any]) -> None:
    # The shared `strandline/` parent stays: another cluster may be creating its directory in it.
    remove_cgroup(Path(r["name"]))


def _remove_pid(r: dict[str, Any]) -> None:
    pid = int(r["name"])
    if process_alive(pid, r.get("start")):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while process_alive(pid, r.get("start")) and time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            time.sleep(0.02)


def _remove_file(r: dict[str, Any]) -> None:
    Path(r["name"]).unlink(missing_ok=True)


def _remove_dir(r: dict[str, Any]) -> None:
    path = Path(r["name"])
    for point in mount_points_under(path):  # e.g. a data dir on FUSE: never delete through it
        unmount(point)
    shutil.rmtree(path, ignore_errors=True)


register_remover("netns", _remove_netns)
register_remover("veth", _remove_link)
register_remover("bridge", _remove_link)
register_remover("iptables", _remove_iptables)
register_remover("mount", _remove_mount)
register_remover("cgroup", _remove_cgroup)
register_remover("pid", _remove_pid)
register_remover("dir", _remove_dir)
register_remover("file", _remove_file)
register_remover("etcdir", _remove_dir)
