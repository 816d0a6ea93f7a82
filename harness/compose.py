"""The composition root: `compose(config) -> Test`, one test as the objects a run drives.

Every string of the config that picks a part is read here, once: the system and backend
(`clusters.factory.build_cluster`), the workload (`workloads.workload_of`), the faults (the nemesis,
made on the run's cluster and history), the checker engine. `harness.run.run_test` then calls these
objects and reads the config only for numbers (time limit, rate, timeouts) and words on screen.
The lifecycle's own tests pass a `Test` of stand-ins.
"""

from __future__ import annotations

import functools
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from foundation.config import TestConfig, check_local_files
from foundation.errors import BadInput

if TYPE_CHECKING:
    from checkers.engines import Engine


class RunsFaults(Protocol):
    """What a run asks of its nemesis (`nemesis.core.Nemesis`)."""

    def validate(self) -> None: ...

    def run_schedule(self, stop: threading.Event, /) -> None: ...

    def heal_all(self) -> object: ...

    def active_faults(self) -> list[dict[str, Any]]: ...


class ShowsProgress(Protocol):
    """What a run asks of the live display (`workloads.LiveProgress`)."""

    def set_faults(self, faults: Callable[[], list[str]]) -> None: ...

    def stop(self) -> None: ...


class RunsLoad(Protocol):
    """What a run asks of its workload: topics, the client's set-up, the load, the final drain."""

    def client_setup(self) -> tuple[str, Callable[[Any], None]] | None:
        """What the client needs before the test starts, as (what, step); None: nothing."""
        ...

    def setup_topics(self, bootstrap: list[str]) -> Any: ...

    def refusal(self, bootstrap: list[str]) -> str | None:
        """Why the test's client cannot talk to brokers that answer strandline (None: it can)."""
        ...

    def progress(self, *, enabled: bool, console: Any, title: str) -> ShowsProgress: ...

    def run(
        self,
        bootstrap: list[str],
        history: Any,
        stop: threading.Event,
        progress: Any,
        *,
        ready: threading.Event,
        go: threading.Event,
    ) -> Any: ...

    def drain(self, bootstrap: list[str], history: Any, timeout: float, *, path: Path) -> Any: ...


class Checks(Protocol):
    """What a run asks of its checker engine."""

    @property
    def engine(self) -> str:
        """Its name, for the phase line."""
        ...

    def journal(self, history: Path) -> Any | None:
        """Something that keeps the history's Parquet form during the run (`finish()` once it is
        closed), or None when this engine does not read it."""
        ...

    def check(self, run: Path) -> dict[str, Any]: ...


class HealsLeftovers(Protocol):
    """What crashed controllers left behind: their faults, then their clusters."""

    def faults(self) -> list[Any]: ...

    def clusters(self) -> list[Any]: ...


@dataclass
class Test:
    """One test as objects (Jepsen's test map): what `harness.run.run_test` drives."""

    config: TestConfig  # as the run uses it (`precheck`): for numbers and words on screen
    # Builds the cluster (not yet up); `cluster` calls it once, when the run first asks, so a
    # backend's refusal (bad hosts, a fault it cannot carry) is the run's, reported in its run dir.
    build_cluster: Callable[[], Any]
    load: RunsLoad
    checker: Checks
    leftovers: HealsLeftovers
    # The nemesis, made on the run's cluster and history; None: the test asks for no faults.
    faults: Callable[[Any, Any], RunsFaults] | None = None
    # Why the requested faults (or the system) cannot run here, given the system under test;
    # asked before any cluster starts. None: nothing to ask.
    preflight: Callable[[Any], str | None] | None = None
    state_dir: Path | None = None  # the clusters' state files (None: the default)
    cluster_text: str = "cluster up"  # the cluster phase's words (`bring_up_text`)

    @functools.cached_property
    def cluster(self) -> Any:
        """The test's cluster (`clusters.factory.Cluster`), built on first use."""
        return self.build_cluster()


def precheck(config: TestConfig) -> TestConfig:
    """Bad input found before anything is created: unknown faults, malformed schedule steps, a
    system definition file that does not parse (one line naming the file and the key, exit 2).
    Returns the config the run uses: a cluster strandline did not start has the nodes it names."""
    from clusters import external_def, system_def
    from clusters.factory import fit_external
    from nemesis import check_config

    if external_def.is_external(config.system):
        config = fit_external(config)
        _precheck_external(config)
    elif system_def.is_definition(config.system):
        system_def.load(config.system)
    check_local_files(config)
    check_config(config)
    return config


def _precheck_external(config: TestConfig) -> None:
    """A cluster strandline did not start: its definition parses, and every fault asked for has
    the commands it needs on every node (else one line naming the fault and the command)."""
    from clusters.external import ExternalNetwork, external_system
    from clusters.external_def import load
    from nemesis.preflight import system_refusal

    definition = load(config.system)
    sut = external_system(config, definition, ExternalNetwork("precheck", definition, None))
    why = system_refusal(config, sut) if wants_nemesis(config) else None
    if why:
        raise BadInput(why)


def wants_nemesis(config: TestConfig) -> bool:
    return bool(config.nemesis) or bool(config.schedule)


def bring_up_text(config: TestConfig) -> str:
    """The cluster phase's words: a cluster strandline starts, or one it only waits for."""
    from clusters.external_def import is_external

    if is_external(config.system):
        return f"cluster: waiting for the {config.nodes} brokers of {Path(config.system).name} (not started by strandline)"
    return f"cluster up: {config.system} on {config.backend}, {config.nodes} nodes"


@dataclass(frozen=True)
class Load:
    """The test's workload (`workloads.Workload`) with the config and client it runs with."""

    config: TestConfig
    workload: Any  # workloads.Workload

    def client_setup(self) -> tuple[str, Callable[[Any], None]] | None:
        from workloads import client_setup

        return client_setup(self.config)

    def setup_topics(self, bootstrap: list[str]) -> Any:
        from workloads import setup_topics

        return setup_topics(self.config, bootstrap)

    def refusal(self, bootstrap: list[str]) -> str | None:
        from workloads.handshake import client_refusal

        return client_refusal(self.config, bootstrap, read_committed=self.workload.reads_committed)

    def progress(self, *, enabled: bool, console: Any, title: str) -> ShowsProgress:
        from workloads import LiveProgress

        return LiveProgress(enabled=enabled, console=console, title=title)

    def run(
        self,
        bootstrap: list[str],
        history: Any,
        stop: threading.Event,
        progress: Any,
        *,
        ready: threading.Event,
        go: threading.Event,
    ) -> Any:
        from workloads import run_workload

        return run_workload(
            self.config, bootstrap, history, stop, progress, workload=self.workload, ready=ready, go=go
        )

    def drain(self, bootstrap: list[str], history: Any, timeout: float, *, path: Path) -> Any:
        from workloads import final_drain

        return final_drain(self.config, bootstrap, history, timeout, path=path, workload=self.workload)


@dataclass(frozen=True)
class Checker:
    """The checker engine the config names (`checkers.engines`), with its Spark master."""

    judge: Engine
    spark_master: str | None

    @staticmethod
    def of(config: TestConfig) -> Checker:
        from checkers.engines import engine_named

        return Checker(engine_named(config.checker or "spark"), config.spark_master)

    @property
    def engine(self) -> str:
        return self.judge.name

    def journal(self, history: Path) -> Any | None:
        # Every engine but the reference checker (which reads the history itself) reads the
        # history's Parquet form, kept during the run.
        if not self.judge.reads_parquet:
            return None
        from checkers.parquet_journal import ColumnarJournal

        return ColumnarJournal(history).start()

    def check(self, run: Path) -> dict[str, Any]:
        from checkers.api import check_run

        return check_run(run, self.judge, spark_master=self.spark_master)


@dataclass(frozen=True)
class Leftovers:
    """Heals what crashed controllers left in `state_dir` (None: the default)."""

    state_dir: Path | None

    def faults(self) -> list[Any]:
        from clusters.state import state_dir_default
        from nemesis import heal_leftovers

        return heal_leftovers(self.state_dir or state_dir_default())

    def clusters(self) -> list[Any]:
        from clusters.state import cleanup_leftovers

        return cleanup_leftovers(self.state_dir)


def compose(config: TestConfig, *, state_dir: Path | None = None) -> Test:
    """The test `config` describes, built once; bad input (exit 2) before anything exists."""
    from clusters.factory import build_cluster
    from harness.preflight import refusal
    from nemesis import build_nemesis
    from workloads import workload_of

    config = precheck(config)
    work = Path(config.store) / ".work"

    def cluster() -> Any:
        work.mkdir(parents=True, exist_ok=True)
        return build_cluster(config, work, state_dir=state_dir)

    def faults(cluster: Any, history: Any) -> RunsFaults:
        return build_nemesis(config, cluster, history, random.Random(config.seed))

    def preflight(sut: Any) -> str | None:
        return refusal(config, sut, work, state_dir)

    return Test(
        config=config,
        build_cluster=cluster,
        load=Load(config, workload_of(config)),
        checker=Checker.of(config),
        leftovers=Leftovers(state_dir),
        faults=faults if wants_nemesis(config) else None,
        preflight=preflight,
        state_dir=state_dir,
        cluster_text=bring_up_text(config),
    )
