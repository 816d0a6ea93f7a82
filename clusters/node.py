"""One node abstraction for every backend (netns, docker, ssh), after Jepsen's `Remote`.

No fault, workload or system-under-test code asks which backend it runs on: it calls these methods.
Commands are argument lists (quoted with shlex.quote where a backend needs a shell string).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class ExecResult:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


@runtime_checkable
class Node(Protocol):
    """A host the controller drives. `name` is stable (n1, n2 ...); `address` is its IP."""

    name: str

    @property
    def address(self) -> str: ...

    @property
    def hostname(self) -> str: ...

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
