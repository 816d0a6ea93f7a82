"""One node abstraction for every backend (netns, docker, ssh), after Jepsen's `Remote`.

No fault, workload or system-under-test code asks which backend it runs on: it calls these methods.
Commands are argument lists (quoted with shlex.quote where a backend needs a shell string).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from foundation.errors import InfrastructureError


@dataclass(frozen=True)
class ExecResult:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def last_line(self, default: str = "no output") -> str:
        """The last line the command printed (stderr first): what a one-line error quotes."""
        return (self.stderr.strip() or self.stdout.strip() or default).splitlines()[-1]

    def raise_if_failed(self, node: str, command: str) -> None:
        """Raise InfrastructureError (node, command, exit code, last line) unless the command succeeded."""
        if not self.ok:
            raise InfrastructureError(f"{node}: `{command}` exited {self.exit_code}: {self.last_line()}")


@runtime_checkable
class RunsCommands(Protocol):
    """Something commands run on: a node, or a node re-attached from its handle (clusters.handles)."""

    def exec(
        self,
        argv: list[str],
        *,
        timeout: float = 60.0,
        check: bool = True,
        input: str | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        """Run a command on the node and wait. check=True raises InfrastructureError on non-zero exit."""
        ...


@runtime_checkable
class Node(RunsCommands, Protocol):
    """A host the controller drives. `name` is stable (n1, n2 ...); `address` is its IP."""

    name: str

    @property
    def address(self) -> str: ...

    @property
    def hostname(self) -> str: ...

    def start_daemon(
        self, name: str, argv: list[str], *, env: dict[str, str] | None = None, log_path: str
    ) -> int:
        """Start a long-running process named `name` (e.g. "broker", "zookeeper"); return its pid."""
        ...

    def daemon_pid(self, name: str) -> int | None:
        """The pid of a running daemon started by start_daemon, or None."""
        ...

    def signal_daemon(self, name: str, signal: int) -> None:
        """Send a signal (SIGKILL, SIGTERM, SIGSTOP, SIGCONT) to a daemon and all its children."""
        ...

    def upload(self, local_path: str, remote_path: str) -> None: ...

    def download(self, remote_path: str, local_path: str) -> None:
        """Copy a file or a directory (recursively) from the node to the controller."""
        ...


# Optional node capabilities: a fault or command asks `isinstance(node, PausesDaemons)`.


@runtime_checkable
class PausesDaemons(Protocol):
    """Freezes a daemon with everything it started (a cgroup freeze, or SIGSTOP to its group)."""

    def pause_daemon(self, name: str) -> None: ...

    def resume_daemon(self, name: str) -> None: ...


@runtime_checkable
class HasDaemonCgroups(Protocol):
    def daemon_cgroup(self, name: str) -> Path | None:
        """The cgroup directory of a daemon on this machine (None: the daemon has none)."""
        ...


@runtime_checkable
class InspectsDaemons(Protocol):
    """What `strandline cluster status` shows of a node's daemons."""

    def daemon_names(self) -> list[str]: ...

    def daemon_pids(self, name: str) -> list[int]: ...

    def daemon_paused(self, name: str) -> bool: ...


@runtime_checkable
class CarriesFaketime(Protocol):
    """A node whose backend installs its own libfaketime (docker image, ssh host software)."""

    faketime_library: str | None


@runtime_checkable
class HasHome(Protocol):
    """A node whose backend chose its working directory (netns: under the work dir; docker)."""

    @property
    def home(self) -> str: ...


def node_home(node: Node) -> str:
    """The node's working directory: its backend's choice, else /var/lib/strandline/<name>."""
    return node.home if isinstance(node, HasHome) else f"/var/lib/strandline/{node.name}"


@runtime_checkable
class Reattachable(Protocol):
    def handle(self) -> dict[str, Any]:
        """How to reach this node again without the cluster object (plain JSON; clusters.handles)."""
        ...
