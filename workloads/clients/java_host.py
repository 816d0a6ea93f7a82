"""A client host: one JVM running the Java client program for many client slots, and the line
protocol that drives it (requests on its stdin, replies on its stdout, one JSON object a line).

One host per process serves every client that process makes (`host_for`): a hundred slots cost
one JVM and a hundred client threads in it, not a hundred JVMs. Each request carries an `id`; the
caller waits for the reply with that id, at most as long as the operation may take, so a slow
client holds up only its own slot. A reply that comes after its caller stopped waiting is dropped.

Lifetime. The JVM is started by a thread of its own that then waits for it to exit, and with
PR_SET_PDEATHSIG (`setpriv --pdeathsig KILL`): when the process that started it dies, also by
SIGKILL, the kernel kills the JVM with SIGKILL. A crashed client worker process
(`--crash-clients`) therefore takes its JVM, with every Kafka client in it, down at the same
instant. When the controller merely closes its end of the pipe, the program halts by itself. If the
JVM dies, every request waiting for it ends with `HostGone`, and the next client made starts a new
one.

Stderr of the JVM (the client library's warnings) goes to this module's logger at DEBUG; the last
lines are kept for the error that says why the JVM died.
"""

from __future__ import annotations

import atexit
import collections
import itertools
import json
import logging
import shutil
import subprocess
import threading
import time
from typing import IO, Any

from foundation.errors import InfrastructureError
from workloads.clients.java_program import JavaProgram

log = logging.getLogger(__name__)

START_TIMEOUT_S = 60.0  # a cold JVM on a loaded machine: class loading takes seconds
STDERR_KEPT = 20


class HostGone(Exception):
    """The JVM exited (or was killed) before it answered."""


class HostTimeout(Exception):
    """No answer within the caller's bound; the JVM may still be working on it."""


class _Waiter:
    __slots__ = ("done", "reply")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.reply: dict[str, Any] | None = None


class ClientHost:
    """One JVM and its pipes; thread-safe: every slot thread calls `call` on the same host."""

    def __init__(self, program: JavaProgram):
        self.program = program
        self._ids = itertools.count(1)
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()  # the waiters and the stdin pipe
        self._waiting: dict[int, _Waiter] = {}
        self._stdin: IO[str] | None = None
        self._proc: subprocess.Popen[str] | None = None
        self._gone: str | None = None
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_KEPT)
        self.version = ""
        # The client properties its clients were made with once (workloads.clients.java.warm_up).
        self.tried: set[tuple[str, ...]] = set()

    # -- starting ------------------------------------------------------------------------------
    def start(self) -> ClientHost:
        """Start the JVM and wait for its hello; InfrastructureError when it does not answer."""
        started = threading.Event()
        failure: list[BaseException] = []
        threading.Thread(
            target=self._own, args=(started, failure), name="java-client-host", daemon=True
        ).start()
        started.wait()
        if failure:
            raise InfrastructureError(f"cannot start the Java client program: {failure[0]}")
        try:
            hello = self.call({"op": "hello"}, START_TIMEOUT_S)
        except (HostGone, HostTimeout) as e:
            self.kill()
            raise InfrastructureError(f"the Java client program did not start: {e}") from None
        self.version = str(hello.get("version", ""))
        log.info(
            "Java client host (pid %s): kafka-clients %s on Java %s",
            self.pid,
            self.version,
            hello.get("java", "?"),
        )
        return self

    def _own(self, started: threading.Event, failure: list[BaseException]) -> None:
        """Start the JVM from this thread and stay until it exits (its death signal is tied to
        the thread that started it: this one lives exactly as long as the JVM)."""
        argv = self.program.command()
        setpriv = shutil.which("setpriv")
        if setpriv is not None:
            argv = [setpriv, "--pdeathsig", "KILL", "--", *argv]
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                encoding="utf-8",
                bufsize=1,
            )
        except OSError as e:
            failure.append(e)
            started.set()
            return
        self._proc = proc
        self._stdin = proc.stdin
        threading.Thread(
            target=self._read_stderr, args=(proc,), name="java-client-stderr", daemon=True
        ).start()
        started.set()
        assert proc.stdout is not None
        for line in proc.stdout:
            self._deliver(line)
        code = proc.wait()
        last = f"; its last words: {self._stderr[-1]}" if self._stderr else ""
        self._end(f"the Java client JVM (pid {proc.pid}) exited with status {code}{last}")

    def _read_stderr(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            line = line.rstrip()
            if line:
                self._stderr.append(line)
                log.debug("jvm: %s", line)

    def _deliver(self, line: str) -> None:
        try:
            reply = json.loads(line)
            waiter = self._waiting.pop(int(reply["id"]), None)
        except (ValueError, KeyError, TypeError):
            log.warning("unreadable line from the Java client program: %r", line[:200])
            return
        if waiter is not None:  # else its caller stopped waiting: dropped
            waiter.reply = reply
            waiter.done.set()

    def _end(self, why: str) -> None:
        with self._lock:
            self._gone = why
            waiting, self._waiting = self._waiting, {}
        for waiter in waiting.values():
            waiter.done.set()
        log.info("%s", why)

    # -- asking --------------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def alive(self) -> bool:
        return self._gone is None and self._proc is not None

    def new_client_number(self) -> int:
        return next(self._numbers)

    def call(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """Send `request` and wait at most `timeout_s` for its reply (`ok` true or false)."""
        waiter = self.ask(request)
        if not waiter.done.wait(timeout_s):
            with self._lock:
                self._waiting.pop(request["id"], None)
            raise HostTimeout(f"no answer from the Java client program within {timeout_s:g} s")
        if waiter.reply is None:
            raise HostGone(self._gone or "the Java client JVM is gone")
        return waiter.reply

    def ask(self, request: dict[str, Any]) -> _Waiter:
        """Send `request` (an `id` is added) without waiting; the waiter is set on its reply."""
        waiter = _Waiter()
        with self._lock:
            request["id"] = next(self._ids)
            if self._gone is not None or self._stdin is None:
                waiter.done.set()
                return waiter
            self._waiting[request["id"]] = waiter
            try:
                self._stdin.write(json.dumps(request, separators=(",", ":")) + "\n")
                self._stdin.flush()
            except (OSError, ValueError):  # the JVM is gone: its reader ends every waiter
                self._waiting.pop(request["id"], None)
                waiter.done.set()
        return waiter

    # -- ending --------------------------------------------------------------------------------
    def close(self, timeout_s: float = 5.0) -> None:
        """Close stdin (the program halts by itself), then kill it if it has not."""
        with self._lock:
            stdin, self._stdin = self._stdin, None
        if stdin is not None:
            try:
                stdin.close()
            except OSError:
                pass
        proc = self._proc
        if proc is None:
            return
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()


_hosts: dict[JavaProgram, ClientHost] = {}
_hosts_lock = threading.Lock()


def host_for(program: JavaProgram) -> ClientHost:
    """This process's host for `program`, started on first use and again after its JVM died."""
    with _hosts_lock:
        host = _hosts.get(program)
        if host is None or not host.alive:
            if not _hosts:
                atexit.register(close_hosts)
            host = ClientHost(program).start()
            _hosts[program] = host
        return host


def close_hosts() -> None:
    """Stop every host of this process (at exit; a test that wants a fresh JVM)."""
    with _hosts_lock:
        hosts = list(_hosts.values())
        _hosts.clear()
    deadline = time.monotonic() + 5
    for host in hosts:
        host.close(max(0.1, deadline - time.monotonic()))
