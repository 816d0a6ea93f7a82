"""The netns backend (the embedded default): every node is a network namespace on this machine.

One bridge per cluster (`slbr-<cluster>`, address 10.77.X.1/24 so the controller in the root
namespace reaches every node), one namespace per node (`sl-<cluster>-<node>`) joined to the bridge
by a veth pair (`slv<X>-<node>` outside, `eth0` inside), and a persistent UTS namespace per node
for its hostname. X, the cluster's slot, is derived from its name and claimed machine-wide, so
clusters coexist.

Processes started on a node run inside its namespace and in their own cgroup v2 directory
(`<cgroup2>/strandline/<cluster>/<node>/<daemon>`): a daemon (or the whole node) can be killed at
once (`cgroup.kill`), frozen (`cgroup.freeze`) and cleaned up without hunting for pids. Nodes share
the controller's filesystem, so upload and download are copies and each node has a home directory
under the work dir.

Everything is written into the cluster's `ClusterState` before it is created (see state.py).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shlex
import shutil
import signal as signals
import subprocess
import time
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from clusters import daemon_control
from clusters.handles import PrefixRunner
from clusters.network import BridgeNetwork, BridgeNode
from clusters.node import ExecResult
from clusters.state import (
    ClusterState,
    cgroup_pids,
    kill_cgroup,
    list_states,
    locked,
    process_alive,
    process_start_time,
    run_quiet,
)
from foundation.errors import BadInput, InfrastructureError

log = logging.getLogger(__name__)

UTS_DIR = Path("/run/strandline/uts")
SLOTS_DIR = Path("/run/strandline/slots")


def cgroup2_root() -> Path | None:
    """Where the cgroup v2 hierarchy is mounted (/sys/fs/cgroup, or .../unified on hybrid hosts)."""
    mounts = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/mounts").read_text().splitlines():
            parts = line.split()
            if len(parts) > 2 and parts[2] == "cgroup2":
                mounts.append(Path(parts[1]))
    for preferred in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified")):
        if preferred in mounts:
            return preferred
    return mounts[0] if mounts else None


def _ip(*args: str) -> None:
    """Run `ip ...`; a failure is an infrastructure error in one line."""
    result = run_quiet(["ip", *args])
    if result.returncode != 0:
        raise InfrastructureError(f"ip {' '.join(args)}: {result.stderr.strip() or 'failed'}")


def existing_namespaces() -> set[str]:
    result = run_quiet(["ip", "netns", "list"])
    names = {line.split()[0] for line in result.stdout.splitlines() if line.strip()}
    if Path("/run/netns").is_dir():
        names |= {p.name for p in Path("/run/netns").iterdir()}
    return names


def existing_links() -> set[str]:
    return {p.name for p in Path("/sys/class/net").iterdir()}


def used_slots() -> set[int]:
    """Third octets of 10.77.X.0/24 already on an interface of the root namespace."""
    result = run_quiet(["ip", "-o", "-4", "addr", "show"])
    slots = set()
    for match in re.finditer(r"inet (10\.77\.(\d+)\.\d+)/", result.stdout):
        slots.add(int(match.group(2)))
    return slots


def claimed_slots() -> set[int]:
    """Slots claimed by clusters whose state file still exists (live, or leftovers to clean)."""
    slots = set()
    for claim in SLOTS_DIR.glob("[0-9]*") if SLOTS_DIR.is_dir() else []:
        try:
            if Path(json.loads(claim.read_text())["state"]).exists():
                slots.add(int(claim.name))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return slots


def free_slot(cluster: str, taken: set[int]) -> int:
    """The third octet of a free 10.77.X.0/24 subnet: the first not in `taken`, counting from one
    the cluster's name picks (so a cluster tends to get the same subnet each time)."""
    start = zlib.crc32(cluster.encode()) % 254
    for step in range(254):
        slot = (start + step) % 254 + 1
        if slot not in taken:
            return slot
    raise InfrastructureError("no free 10.77.X.0/24 subnet: too many clusters are up")


def accept_bridge_traffic(state: ClusterState, bridge: str, cluster: str) -> None:
    """Accept in FORWARD the traffic that stays on the cluster's bridge, recorded before it runs.

    dockerd sets the FORWARD policy to DROP, and with br_netfilter bridged frames between the
    nodes traverse that chain.
    """
    spec = ["-i", bridge, "-o", bridge, "-m", "comment", "--comment", f"strandline:{cluster}", "-j", "ACCEPT"]  # fmt: skip
    state.add("iptables", f"FORWARD {bridge}", chain="FORWARD", spec=spec)
    result = run_quiet(["iptables", "-w", "-I", "FORWARD", "1", *spec])
    if result.returncode != 0:
        raise InfrastructureError(f"iptables -I FORWARD: {result.stderr.strip()}")


class NetnsNode(BridgeNode["NetnsNetwork"]):
    """One node: a network namespace with its own address, hostname, cgroups and home directory."""

    def __init__(self, name: str, network: NetnsNetwork, index: int) -> None:
        super().__init__(name, network, index)
        self.cluster = network.cluster
        self.netns = f"sl-{network.cluster}-{name}"
        self.home = str(network.home / name)
        self.uts_file = UTS_DIR / self.netns
        # This node's cgroup directory (None: no cgroup v2 on this host).
        self.cgroup = network.cgroup / name if network.cgroup else None
        self._procs: dict[str, subprocess.Popen[bytes]] = {}

    @property
    def state(self) -> ClusterState | None:
        return self.network.state

    # --- commands -----------------------------------------------------------------------------

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """The argv that runs `argv` inside this node's network and UTS namespaces.

        `nsenter --net` rather than `ip netns exec`: the latter also enters a private mount
        namespace, and a mount made on a node (a FUSE data dir for the lose-unsynced fault) must
        be seen by the node's other processes, as on a real host.
        """
        uts = [f"--uts={self.uts_file}"] if self.uts_file.exists() else []
        return ["nsenter", f"--net=/run/netns/{self.netns}", *uts, "--", *argv]

    def handle(self) -> dict[str, Any]:
        """How to reach this node after a controller crash: its namespace and the argv prefix."""
        return {"backend": "netns", "netns": self.netns, "prefix": self.wrap([])}

    def exec(
        self,
        argv: list[str],
        *,
        timeout: float = 60.0,
        check: bool = True,
        input: str | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        """Run `argv` in the namespaces, through the runner its handle names (clusters.handles)."""
        command = shlex.join(argv)
        try:
            result = PrefixRunner(self.wrap([])).exec(
                argv, timeout=timeout, check=False, input=input, env=env
            )
        except subprocess.TimeoutExpired:
            raise InfrastructureError(f"{self.name}: `{command}` timed out after {timeout:g}s") from None
        except OSError as e:
            raise InfrastructureError(f"{self.name}: cannot run `{command}`: {e.strerror}") from None
        if check:
            result.raise_if_failed(self.name, command)
        return result

    # --- daemons ------------------------------------------------------------------------------

    def daemon_cgroup(self, name: str) -> Path | None:
        return self.cgroup / name if self.cgroup else None

    def start_daemon(
        self, name: str, argv: list[str], *, env: dict[str, str] | None = None, log_path: str
    ) -> int:
        """Start `argv` in the namespace, in its own cgroup, output appended to log_path."""
        if self.daemon_pid(name) is not None:
            raise InfrastructureError(f"{self.name}: daemon {name!r} is already running")
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        cgroup = self.daemon_cgroup(name)
        wrapped = self.wrap(argv)
        if cgroup is not None:
            cgroup.mkdir(parents=True, exist_ok=True)
            thaw(cgroup)  # a daemon restarted after a pause must not start frozen
            # The shell moves itself into the cgroup, then execs: the pid stays the daemon's.
            wrapped = ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(cgroup / "cgroup.procs"), *wrapped]
        log_file: IO[bytes]
        with open(log_path, "ab") as log_file:
            try:
                proc = subprocess.Popen(
                    wrapped,
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    env={**os.environ, **env} if env else None,
                    start_new_session=True,  # Ctrl-C at the controller is not the daemon's business
                    cwd=self.home if Path(self.home).is_dir() else None,
                )
            except OSError as e:
                raise InfrastructureError(f"{self.name}: cannot start {name}: {e.strerror}") from None
        self._procs[name] = proc
        if cgroup is not None:  # wait for the wrapper to join its cgroup (or to fail)
            deadline = time.monotonic() + 5
            while proc.pid not in cgroup_pids(cgroup) and proc.poll() is None:
                if time.monotonic() > deadline:
                    raise InfrastructureError(f"{self.name}: {name} did not join its cgroup {cgroup}")
                time.sleep(0.005)
        if self.state is not None:
            # One record per daemon: the previous one is dead (start_daemon refuses a running one).
            self.state.replace(
                "pid", {"node": self.name, "daemon": name}, str(proc.pid), start=process_start_time(proc.pid)
            )
        log.debug("%s: started %s pid %d: %s", self.name, name, proc.pid, shlex.join(argv))
        return proc.pid

    def _main_pid(self, name: str) -> tuple[int, int | None] | None:
        """The pid start_daemon returned (this process, or another via the state file)."""
        proc = self._procs.get(name)
        if proc is not None:
            proc.poll()  # reap it if it exited, so it is not mistaken for running
            return proc.pid, None
        if self.state is not None:
            records = [
                r for r in self.state.of_kind("pid") if r.get("node") == self.name and r.get("daemon") == name
            ]
            if records:
                return int(records[-1]["name"]), records[-1].get("start")
        return None

    def daemon_pid(self, name: str) -> int | None:
        main = self._main_pid(name)
        cgroup = self.daemon_cgroup(name)
        if cgroup is not None:
            pids = cgroup_pids(cgroup)
            if not pids:
                return None
            return main[0] if main and main[0] in pids else pids[0]
        if main and process_alive(*main):
            return main[0]
        return None

    def daemon_pids(self, name: str) -> list[int]:
        """Every process of a daemon (the daemon and anything it spawned)."""
        cgroup = self.daemon_cgroup(name)
        if cgroup is not None:
            return cgroup_pids(cgroup)
        pid = self.daemon_pid(name)
        return [pid] if pid else []

    def daemon_names(self) -> list[str]:
        if self.cgroup is not None and self.cgroup.is_dir():
            return sorted(p.name for p in self.cgroup.iterdir() if p.is_dir())
        return sorted(self._procs)

    def signal_daemon(self, name: str, signal: int) -> None:
        cgroup = self.daemon_cgroup(name)
        if signal == signals.SIGKILL and cgroup is not None:
            try:
                kill_cgroup(cgroup)
            except RuntimeError as e:
                raise InfrastructureError(f"{self.name}: {e}") from None
        else:
            for pid in self.daemon_pids(name):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal)
        proc = self._procs.get(name)
        if proc is not None and signal == signals.SIGKILL:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)

    def wait_daemon_exit(self, name: str, timeout: float) -> bool:
        """Wait until every process of the daemon is gone; False on timeout."""
        return daemon_control.wait_gone(self, name, timeout)

    def pause_daemon(self, name: str) -> None:
        """Freeze every process of the daemon (cgroup.freeze; SIGSTOP without cgroup v2)."""
        self._hold(name, held=True)

    def resume_daemon(self, name: str) -> None:
        self._hold(name, held=False)

    def _hold(self, name: str, held: bool) -> None:
        """Stop the daemon in place or let it go, the same way both ways: its cgroup's freeze
        file where it has a cgroup (nothing when that cgroup is gone), else SIGSTOP/SIGCONT."""
        cgroup = self.daemon_cgroup(name)
        if cgroup is None:
            self.signal_daemon(name, signals.SIGSTOP if held else signals.SIGCONT)
        elif cgroup.is_dir():
            (freeze if held else thaw)(cgroup)

    def daemon_paused(self, name: str) -> bool:
        cgroup = self.daemon_cgroup(name)
        return cgroup is not None and is_frozen(cgroup)

    def kill_all(self) -> None:
        """SIGKILL every process on the node at once (the node's whole cgroup)."""
        if self.cgroup is not None:
            kill_cgroup(self.cgroup)
        else:
            for name in list(self._procs):
                self.signal_daemon(name, signals.SIGKILL)

    def pause_all(self) -> None:
        if self.cgroup is not None and self.cgroup.is_dir():
            freeze(self.cgroup)

    def resume_all(self) -> None:
        if self.cgroup is not None and self.cgroup.is_dir():
            thaw(self.cgroup)

    # --- files: the node shares the controller's filesystem -------------------------------------

    def upload(self, local_path: str, remote_path: str) -> None:
        _copy(local_path, remote_path)

    def download(self, remote_path: str, local_path: str) -> None:
        _copy(remote_path, local_path)


def _copy(source: str, dest: str) -> None:
    src, dst = Path(source), Path(dest)
    if src.resolve() == dst.resolve():
        return
    try:
        copy_over(src, dst)
    except OSError as e:
        raise InfrastructureError(f"cannot copy {src} to {dst}: {e.strerror or e}") from None


def copy_over(source: Path, dest: Path) -> None:
    """Copy a file or a directory to `dest` on this machine, making its parent: a directory is
    merged into what is there, symlinks stay links (a node's data dir as the node left it).
    Raises OSError; the caller says what failed in its own terms."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, dest, dirs_exist_ok=True, symlinks=True)
    else:
        shutil.copy2(source, dest)


def freeze(cgroup: Path, *, timeout: float = 5.0) -> None:
    """Freeze a cgroup and wait until the kernel says it is frozen."""
    (cgroup / "cgroup.freeze").write_text("1")
    deadline = time.monotonic() + timeout
    while not is_frozen(cgroup):
        if time.monotonic() > deadline:
            raise InfrastructureError(f"cgroup {cgroup} did not freeze within {timeout:g}s")
        time.sleep(0.01)


def thaw(cgroup: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        (cgroup / "cgroup.freeze").write_text("0")


def is_frozen(cgroup: Path) -> bool:
    try:
        events = (cgroup / "cgroup.events").read_text()
    except OSError:
        return False
    return "frozen 1" in events


class NetnsNetwork(BridgeNetwork):
    """The bridge, namespaces and veths of one cluster, created and destroyed through its state."""

    backend = "netns"

    def __init__(self, cluster: str, node_names: Sequence[str], work_dir: Path, state_dir: Path) -> None:
        super().__init__(cluster, node_names, state_dir)
        self.work_dir = Path(work_dir).resolve()
        self.home = self.work_dir / cluster
        root = cgroup2_root()
        self.cgroup = root / "strandline" / cluster if root else None
        self.nodes: dict[str, NetnsNode] = {n: NetnsNode(n, self, i) for i, n in enumerate(self.node_names)}

    def planned_namespaces(self) -> list[str]:
        return [f"sl-{self.cluster}-{n}" for n in self.node_names]

    @classmethod
    def attach(cls, state: ClusterState) -> NetnsNetwork:
        """The network of an existing cluster, from its state file (for status and down)."""
        info = state.info
        net = cls(state.cluster, info["nodes"], Path(info["work_dir"]), state.path.parent)
        net.state = state
        net.slot = int(info["slot"])
        return net

    def _check_clashes(self) -> None:
        """Refuse, before creating anything, when a name we need is taken by someone else."""
        namespaces = existing_namespaces()
        for ns in self.planned_namespaces():
            if ns in namespaces:
                raise BadInput(
                    f"network namespace {ns} already exists and is not one of strandline's live "
                    f"clusters; remove it (ip netns delete {ns}) or choose another cluster name"
                )
        links = existing_links()
        if self.bridge in links:
            raise BadInput(f"network interface {self.bridge} already exists; choose another cluster name")
        self.refuse_if_up()

    def _allocate(self, info: dict[str, object]) -> None:
        """Pick a free slot, claim it machine-wide and write the state file.

        Clusters may keep their state in different directories (tests do), so the slot is claimed
        in one machine-wide place (`/run/strandline/slots/<X>`, naming the claimant's state file)
        under a machine-wide lock: two clusters never share a subnet, even while neither has its
        bridge address yet.
        """
        with locked(SLOTS_DIR), locked(self.state_dir):
            self._check_clashes()
            taken = (
                used_slots()
                | claimed_slots()
                | {int(s.info["slot"]) for s in list_states(self.state_dir) if "slot" in s.info}
            )
            self.slot = slot = free_slot(self.cluster, taken)
            links = existing_links()
            for n in self.node_names:
                if self.veth(n) in links:
                    raise BadInput(f"network interface {self.veth(n)} already exists; is a stale cluster up?")
            state = self.create_state(info, slot=slot, work_dir=str(self.work_dir))
            claim = SLOTS_DIR / str(slot)
            state.add("file", str(claim))
            claim.write_text(json.dumps({"cluster": self.cluster, "state": str(state.path)}) + "\n")

    def veth(self, node: str) -> str:
        return f"slv{self.slot}-{node}"

    def create(self, info: dict[str, object] | None = None) -> None:
        """Create bridge, rule, cgroup, namespaces and veths; every step recorded before it runs."""
        if os.geteuid() != 0:
            raise InfrastructureError("the netns backend needs root (network namespaces, bridge, iptables)")
        self._allocate(dict(info or {}))
        state = self.state
        assert state is not None

        state.add("dir", str(self.home))
        self.home.mkdir(parents=True, exist_ok=True)

        state.add("bridge", self.bridge)
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.bridge_address}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")

        accept_bridge_traffic(state, self.bridge, self.cluster)

        if self.cgroup is not None:
            state.add("cgroup", str(self.cgroup))
            self.cgroup.mkdir(parents=True, exist_ok=True)

        for node in self.nodes.values():
            self._create_node(node)

    def _create_node(self, node: NetnsNode) -> None:
        state = self.state
        assert state is not None
        ns, veth = node.netns, self.veth(node.name)
        state.add("netns", ns)
        _ip("netns", "add", ns)
        state.add("veth", veth)
        _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
        _ip("link", "set", veth, "master", self.bridge, "up")
        _ip("-n", ns, "addr", "add", f"{node.address}/24", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        _ip("-n", ns, "link", "set", "lo", "up")

        state.add("mount", str(node.uts_file))
        UTS_DIR.mkdir(parents=True, exist_ok=True)
        node.uts_file.touch()
        result = run_quiet(["unshare", f"--uts={node.uts_file}", "hostname", node.hostname])
        if result.returncode != 0:
            raise InfrastructureError(f"cannot give {node.name} its hostname: {result.stderr.strip()}")
        Path(node.home).mkdir(parents=True, exist_ok=True)
