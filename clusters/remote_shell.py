"""Daemons on a node that the controller reaches only through a shell (docker, ssh).

A daemon is started in a session of its own (`setsid`), so its pid is also its process group:
signals go to the whole group (the daemon and whatever it spawned). Its pid and start time (field
22 of /proc/PID/stat, so a reused pid is never mistaken for it) are kept in a pid file under the
node's pid directory; `daemon_pid` checks both, and a zombie counts as gone.

Used as a mixin: the class provides `exec` (the Node protocol's), `name` and `pid_dir`.
"""

from __future__ import annotations

import logging
import shlex
import signal as signals
from collections.abc import Callable, Mapping

from clusters import daemon_control
from clusters.node import ExecResult
from foundation.errors import InfrastructureError

log = logging.getLogger(__name__)

# $1: pid file. Prints "pid pgid state" when the recorded process runs (not a zombie).
_ALIVE = r"""
read pid start < "$1" 2>/dev/null || exit 1
[ -r /proc/$pid/stat ] || exit 1
stat=$(cat /proc/$pid/stat 2>/dev/null) || exit 1
rest=${stat##*) }
set -- $rest
state=$1; pgid=$3; now=${20}
[ "$state" != Z ] && [ "$now" = "$start" ] || exit 1
echo "$pid $pgid $state"
"""

# $1 pid file, $2 log file, $3 working directory, then the command. Prints the daemon's pid.
_START = r"""
pidfile=$1; logfile=$2; dir=$3; shift 3
mkdir -p "$(dirname "$pidfile")" "$(dirname "$logfile")" "$dir"
cd "$dir" || exit 1
setsid "$@" >> "$logfile" 2>&1 < /dev/null &
pid=$!
stat=$(cat /proc/$pid/stat)
rest=${stat##*) }
set -- $rest
echo "$pid ${20}" > "$pidfile"
echo "$pid"
"""


def env_prefix(env: Mapping[str, str] | None) -> list[str]:
    """`env K=V ...` so variables reach the command through any shell or exec API."""
    if not env:
        return []
    return ["env", *(f"{k}={v}" for k, v in env.items())]


class ShellDaemons:
    """start_daemon, daemon_pid, signal_daemon and the pause/kill helpers, over `exec`."""

    name: str
    pid_dir: str
    exec: Callable[..., ExecResult]  # the node class's own (`clusters.node.RunsCommands.exec`)

    @property
    def home(self) -> str:
        raise NotImplementedError

    def pid_file(self, name: str) -> str:
        return f"{self.pid_dir}/{name}.pid"

    def start_daemon(
        self, name: str, argv: list[str], *, env: dict[str, str] | None = None, log_path: str
    ) -> int:
        if self.daemon_pid(name) is not None:
            raise InfrastructureError(f"{self.name}: daemon {name!r} is already running")
        command = [*env_prefix(env), *argv]
        result = self.exec(
            ["sh", "-c", _START, "start", self.pid_file(name), log_path, self.home, *command],
            check=False,
        )
        text = result.stdout.strip()
        if not result.ok or not text.isdigit():
            why = (result.stderr.strip() or text or f"exit {result.exit_code}").splitlines()[-1]
            raise InfrastructureError(f"{self.name}: cannot start {name}: {why}")
        log.debug("%s: started %s pid %s: %s", self.name, name, text, shlex.join(argv))
        return int(text)

    def _alive(self, name: str) -> tuple[int, int, str] | None:
        result = self.exec(["sh", "-c", _ALIVE, "alive", self.pid_file(name)], check=False)
        fields = result.stdout.split()
        if not result.ok or len(fields) != 3:
            return None
        return int(fields[0]), int(fields[1]), fields[2]

    def daemon_pid(self, name: str) -> int | None:
        alive = self._alive(name)
        return alive[0] if alive else None

    def daemon_pids(self, name: str) -> list[int]:
        """Every process of the daemon's process group."""
        alive = self._alive(name)
        if alive is None:
            return []
        result = self.exec(["pgrep", "-g", str(alive[1])], check=False)
        pids = [int(p) for p in result.stdout.split() if p.isdigit()]
        return pids or [alive[0]]

    def daemon_names(self) -> list[str]:
        result = self.exec(["sh", "-c", 'cd "$1" 2>/dev/null && ls', "ls", self.pid_dir], check=False)
        return sorted(n[: -len(".pid")] for n in result.stdout.split() if n.endswith(".pid"))

    def signal_daemon(self, name: str, signal: int) -> None:
        alive = self._alive(name)
        if alive is None:
            return
        pid, pgid, _state = alive
        if signal == signals.SIGKILL:  # a stopped group must still die; SIGCONT is harmless after
            self.exec(["kill", "-KILL", "--", f"-{pgid}"], check=False)
        else:
            self.exec(["kill", f"-{int(signal)}", "--", f"-{pgid}"], check=False)
        if signal == signals.SIGKILL:
            self.wait_daemon_exit(name, timeout=10)

    def wait_daemon_exit(self, name: str, timeout: float) -> bool:
        """Wait until every process of the daemon is gone; False on timeout."""
        return daemon_control.wait_gone(self, name, timeout)

    def pause_daemon(self, name: str) -> None:
        self.signal_daemon(name, signals.SIGSTOP)

    def resume_daemon(self, name: str) -> None:
        self.signal_daemon(name, signals.SIGCONT)

    def daemon_paused(self, name: str) -> bool:
        alive = self._alive(name)
        return alive is not None and alive[2] in ("T", "t")

    def kill_all(self) -> None:
        """SIGKILL every daemon this node started."""
        for name in self.daemon_names():
            self.signal_daemon(name, signals.SIGKILL)
