"""`strandline bench workload`: the load a run pushes, measured as a user meets it.

Runs `strandline run --client confluent-kafka --concurrency 100 --rate 100000 --time-limit 30
--checker reference` (fault-free, own broker, 3 nodes, RF 3, acks=all, netns: the command
docs/workloads.md recommends for the highest rate) in a fresh process, `--runs` times (default 3),
and reports what each run's history shows: acknowledged sends per second (from the first to the last
acknowledged send), the stall windows results.json lists under `unavailable` (a second or more with
no acknowledged send: in a fault-free run, a harness or broker bug), the longest stretch without an
acknowledged send, latencies, the verdict. The phases' wall times (outcome.json) and the CPU each part
used during the load are printed under that total, as a breakdown, with the machine's load average,
which lowers every figure when other processes share the cores.

`STRANDLINE_BENCH_SECONDS` (the run's --time-limit, default 30), `STRANDLINE_BENCH_CLIENT` (default
confluent-kafka) and `STRANDLINE_BENCH_CONCURRENCY` (default 100) change the command; `--keep DIR`
keeps the runs' directories there.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from foundation import run_files
from foundation.config import CLIENTS
from foundation.errors import BadInput, InfrastructureError
from history.reader import iter_ops

SECONDS = 30.0
CLIENT = "confluent-kafka"
CONCURRENCY = 100
RUNS = 3
SAMPLE_S = 0.5
# A run's own slack beyond its time limit: cluster up, drain, check and report (seconds).
RUN_SLACK_S = 600.0
_REPO = Path(__file__).resolve().parents[1]


def command(seconds: float, client: str, concurrency: int) -> list[str]:
    """The `strandline run` arguments measured (the store and name are added per run)."""
    return [
        "run",
        "--client",
        client,
        "--concurrency",
        str(concurrency),
        "--rate",
        "100000",
        "--time-limit",
        f"{seconds:g}",
        "--checker",
        "reference",
    ]


# --- what the history shows --------------------------------------------------------------------


@dataclass
class HistoryFigures:
    """Acknowledged sends and operations, and the longest stretch without an acknowledged send."""

    acked_sends: int = 0
    acked_ops: int = 0
    first_ack_s: float | None = None
    last_ack_s: float | None = None
    longest_gap_s: float = 0.0
    longest_gap_at_s: float = 0.0
    max_latency_ms: dict[str, float] = field(default_factory=dict)

    @property
    def span_s(self) -> float:
        if self.first_ack_s is None or self.last_ack_s is None:
            return 0.0
        return self.last_ack_s - self.first_ack_s

    @property
    def acked_sends_per_s(self) -> float:
        return self.acked_sends / self.span_s if self.span_s > 0 else 0.0


def history_figures(path: Path) -> HistoryFigures:
    """Read once: a client process runs one operation at a time, so its completion pairs with its
    last invocation."""
    figures = HistoryFigures()
    invoked: dict[Any, float] = {}
    for op in iter_ops(path, problems=[]):
        if op["process"] == "nemesis":
            continue
        t = op["time"] / 1e9
        if op["type"] == "invoke":
            invoked[op["process"]] = t
            continue
        started = invoked.pop(op["process"], None)
        f = str(op["f"])
        if started is not None:
            ms = (t - started) * 1000
            figures.max_latency_ms[f] = max(figures.max_latency_ms.get(f, 0.0), ms)
        if op["type"] != "ok":
            continue
        figures.acked_ops += 1
        if f != "send":
            continue
        figures.acked_sends += 1
        if figures.last_ack_s is not None and t - figures.last_ack_s > figures.longest_gap_s:
            figures.longest_gap_s, figures.longest_gap_at_s = t - figures.last_ack_s, figures.last_ack_s
        if figures.first_ack_s is None:
            figures.first_ack_s = t
        figures.last_ack_s = t
    return figures


# --- the machine while the run ran ---------------------------------------------------------------


def _cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system) of a process, from /proc; None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _part_of(pid: int, controller: int, work: str) -> str | None:
    """Which part of the run a process is: the controller, a broker, ZooKeeper, or none."""
    if pid == controller:
        return "controller"
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    if work not in cmdline:
        return None
    if "zookeeper" in cmdline:
        return "zookeeper"
    return "brokers" if "-m broker" in cmdline else None


class Sampler:
    """Samples, while the run runs, the load average and the CPU time of its processes (the
    controller and the processes started under the store's work dir)."""

    def __init__(self, controller: int, work: Path) -> None:
        self.controller = controller
        self.work = str(work)
        self.samples: list[tuple[float, float, dict[str, float]]] = []  # wall time, load, CPU by part
        self._last: dict[int, tuple[str, float]] = {}  # pid -> (part, CPU seconds last seen)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="bench-sampler", daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            for name in os.listdir("/proc"):
                if name.isdigit() and int(name) not in self._last:
                    part = _part_of(int(name), self.controller, self.work)
                    if part is not None:
                        self._last[int(name)] = (part, 0.0)
            for pid, (part, _) in list(self._last.items()):
                used = _cpu_s(pid)
                if used is not None:
                    self._last[pid] = (part, used)
            totals: dict[str, float] = {}
            for part, used in self._last.values():
                totals[part] = totals.get(part, 0.0) + used
            self.samples.append((time.time(), os.getloadavg()[0], totals))

    def between(self, start: float, end: float) -> tuple[dict[str, float], list[float]]:
        """CPU seconds each part used from `start` to `end` (wall clock), and the load averages seen."""
        inside = [s for s in self.samples if start <= s[0] <= end]
        if len(inside) < 2:
            return {}, [s[1] for s in inside]
        first, last = inside[0][2], inside[-1][2]
        return {part: last[part] - first.get(part, 0.0) for part in last}, [s[1] for s in inside]


# --- one run ---------------------------------------------------------------------------------------


@dataclass
class RunFigures:
    run_dir: Path
    verdict: str
    wall_s: float
    history: HistoryFigures
    stalls: list[dict[str, Any]]
    latency_ms_by_f: dict[str, dict[str, float]]
    phases: dict[str, float]  # phase_seconds: the wall time split at the phases
    cpu_s: dict[str, float]
    loads: list[float]


def _phase_starts(harness_log: Path) -> dict[str, float]:
    """When each phase began (wall clock), in order, from harness.log's `phase NAME:` lines."""
    starts: dict[str, float] = {}
    with contextlib.suppress(OSError):
        for line in harness_log.read_text(errors="replace").splitlines():
            match = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) .* phase (\w+):", line)
            if match:
                stamp = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S").timestamp()
                starts.setdefault(match.group(3), stamp + int(match.group(2)) / 1000)
    return starts


def phase_seconds(starts: dict[str, float], began: float, ended: float) -> dict[str, float]:
    """The wall time of the process split at its phases' starts: `start-up` (the interpreter and
    imports, before the first phase), then each phase until the next (the last, `report`, until the
    process ended); they add up to the whole."""
    marks = [("start-up", began), *starts.items(), ("", ended)]
    return {name: max(0.0, marks[i + 1][1] - at) for i, (name, at) in enumerate(marks[:-1])}


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def run_once(args: list[str], store: Path, name: str, timeout: float) -> RunFigures:
    """One `strandline run` in a fresh process; its figures from its run directory."""
    argv = [sys.executable, "-m", "harness.cli", *args, "--store", str(store), "--name", name]
    began = time.time()
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        sampler = Sampler(proc.pid, store / ".work")
        with sampler:
            try:
                out, err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                raise InfrastructureError(f"bench workload: the run took over {timeout:.0f} s") from None
    ended = time.time()
    last = out.strip().splitlines()[-1] if out.strip() else ""
    match = re.fullmatch(r"verdict: (\w+) (.+)", last)
    if proc.returncode not in (0, 1, 3) or match is None:
        tail = (err.strip().splitlines() or ["(no output)"])[-1]
        raise InfrastructureError(f"bench workload: `strandline run` exited {proc.returncode}: {tail}")
    run_dir = Path(match.group(2))
    results = _read_json(run_dir / run_files.RESULTS)
    stats = results.get("stats", {})
    starts = _phase_starts(run_dir / run_files.HARNESS_LOG)
    load_start, load_end = starts.get("load", 0.0), starts.get("recover") or starts.get("drain") or ended
    cpu, loads = sampler.between(load_start, load_end)
    return RunFigures(
        run_dir=run_dir,
        verdict=match.group(1),
        wall_s=ended - began,
        history=history_figures(run_dir / run_files.HISTORY),
        stalls=list(stats.get("unavailable", [])),
        latency_ms_by_f=dict(stats.get("latency_ms_by_f", {})),
        phases=phase_seconds(starts, began, ended),
        cpu_s=cpu,
        loads=loads,
    )


# --- the report --------------------------------------------------------------------------------


def _stall_text(stalls: list[dict[str, Any]]) -> str:
    if not stalls:
        return "none"
    return ", ".join(f"{w['start_s']:.1f}-{w['end_s']:.1f} s ({w['seconds']:.1f} s)" for w in stalls)


def _latency_text(r: RunFigures) -> str:
    parts = []
    for f in ("send", "poll", "assign"):
        q = r.latency_ms_by_f.get(f)
        if q:
            worst = r.history.max_latency_ms.get(f, 0.0)
            parts.append(f"{f} {q['p50']:.1f}/{q['p95']:.1f}/{q['p99']:.1f}/{worst:.0f}")
    return "  ".join(parts)


def _breakdown(r: RunFigures) -> str:
    phases = ", ".join(f"{k} {v:.1f}" for k, v in r.phases.items() if v >= 0.05)
    line = f"    breakdown of the {r.wall_s:.1f} s wall (s): {phases}\n"
    if r.cpu_s:
        seconds = r.phases.get("load") or 1.0
        ops = max(r.history.acked_ops, 1)
        used = ", ".join(
            f"{part} {r.cpu_s[part]:.1f} s ({r.cpu_s[part] / seconds:.2f} cores, "
            f"{1000 * r.cpu_s[part] / ops:.2f} ms per acked op)"
            for part in ("controller", "brokers", "zookeeper")
            if part in r.cpu_s
        )
        line += f"    CPU during the load: {used}\n"
    return line


def report(i: int, runs: int, r: RunFigures) -> str:
    h = r.history
    loads = r.loads or [os.getloadavg()[0]]
    return (
        f"run {i}/{runs}: {h.acked_sends_per_s:,.0f} acked sends/s ({h.acked_sends:,} in {h.span_s:.1f} s, "
        f"first to last acked send), verdict {r.verdict}, load average {min(loads):.1f}-{max(loads):.1f} "
        f"(mean {sum(loads) / len(loads):.1f})\n"
        f"    stall windows (results.json `unavailable`, 1 s or more without an acked send): "
        f"{_stall_text(r.stalls)}\n"
        f"    longest stretch without an acked send: {h.longest_gap_s:.2f} s (from {h.longest_gap_at_s:.1f} s)\n"
        f"    latency ms p50/p95/p99/max: {_latency_text(r)}\n"
        f"    acked operations/s (sends, polls, assigns): {h.acked_ops / h.span_s if h.span_s else 0:,.0f}\n"
        f"{_breakdown(r)}"
        f"    run dir: {r.run_dir}\n"
    )


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(_REPO), "describe", "--always", "--dirty", "--abbrev=7"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.stdout.strip() or "unknown"


def _env_number(name: str, default: float, least: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise BadInput(f"{name}: expected a number, got {raw!r}") from None
    if value < least:
        raise BadInput(f"{name}: must be at least {least:g}")
    return value


@contextlib.contextmanager
def _store(keep: str | None) -> Iterator[Path]:
    if keep:
        path = Path(keep)
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="strandline-bench-workload-") as tmp:
        yield Path(tmp)


def main(args: argparse.Namespace) -> int:
    seconds = _env_number("STRANDLINE_BENCH_SECONDS", SECONDS, 1)
    concurrency = int(_env_number("STRANDLINE_BENCH_CONCURRENCY", CONCURRENCY, 1))
    client = os.environ.get("STRANDLINE_BENCH_CLIENT", "").strip() or CLIENT
    if client not in CLIENTS:
        raise BadInput(f"STRANDLINE_BENCH_CLIENT: unknown client {client!r} (known: {', '.join(CLIENTS)})")
    runs = getattr(args, "runs", None)
    runs = RUNS if runs is None else runs
    if runs < 1:
        raise BadInput("--runs: must be at least 1")
    args_run = command(seconds, client, concurrency)
    sys.stdout.write(
        f"bench workload: strandline {' '.join(args_run)}\n"
        f"  fault-free, own broker, 3 nodes, RF 3, acks=all, netns; each run a fresh process, end to end; "
        f"commit {_commit()}; {os.cpu_count()} cores, load average now {os.getloadavg()[0]:.1f} "
        f"(other processes on the cores lower every figure)\n"
    )
    sys.stdout.flush()
    figures: list[RunFigures] = []
    with _store(getattr(args, "keep", None)) as store:
        for i in range(1, runs + 1):
            r = run_once(args_run, store, f"bench-workload-{i}", seconds + RUN_SLACK_S)
            figures.append(r)
            sys.stdout.write(report(i, runs, r))
            sys.stdout.flush()
    rates = " / ".join(f"{r.history.acked_sends_per_s:,.0f}" for r in figures)
    stalls = " / ".join(str(len(r.stalls)) for r in figures)
    sys.stdout.write(f"acked sends/s: {rates}; stall windows: {stalls}\n")
    return 0 if all(r.verdict == "valid" for r in figures) else 1
