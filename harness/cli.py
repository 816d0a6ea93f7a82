"""The `strandline` command line: a thin layer of argparse over `harness.commands.*`.

Each subcommand lives in its own module with `main(args) -> int`; this file only parses flags and
turns errors into one line and the contract's exit code (docs/exit-codes.md). No traceback ever
reaches the user unless STRANDLINE_DEBUG=1.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NoReturn

import argcomplete

from foundation.config import (
    ACKS,
    BACKENDS,
    CHECKERS,
    CLIENTS,
    CONSUME_MODES,
    GROUP_PROTOCOLS,
    VARIANTS,
    WORKLOADS,
    TestConfig,
)
from foundation.errors import EXIT_BAD_INPUT, EXIT_INFRASTRUCTURE, StrandlineError
from harness.scenarios import DEMO_SEED, EXPLORE_SEED

EPILOG = """\
exit codes: 0 valid, 1 invalid, 2 bad input or usage, 3 unknown, 4 harness or infrastructure failure.
`run` and `check` print, as their last line, `verdict: valid|invalid|unknown <run-dir>`.
Docs: docs/ in the repository (history format, results format, faults, broker variants)."""


SEED_HELP = "seed of workload and faults; 0: drawn at random, printed and kept in test.json"


def nemesis_help() -> str:
    """`--nemesis`'s help: the names from the nemesis registry (docs/faults.md lists the same)."""
    if os.environ.get("_ARGCOMPLETE"):  # completing a word: no need to load the nemesis
        return "comma-separated faults"
    from nemesis.schedule import alias_text, nemesis_names

    return (
        f"comma-separated faults (default: none): {', '.join(nemesis_names())} (aliases: {alias_text()});"
        " a fault may name its target (kill:leader) and faults join with + (partition+clock);"
        " see docs/faults.md"
    )


RUN_EXAMPLES = """\
examples:
  strandline run --time-limit 30 --nemesis kill,partition --checker reference
  strandline run --variant high-watermark --nemesis kill:leader --seed 101
  strandline run --config campaigns/my-test.toml --acks 1 --name acks1
  strandline run --config results/latest/test.json      # rerun the latest stored test (same seed)"""


def run_epilog(parser: argparse.ArgumentParser) -> str:
    """Examples, and the TestConfig keys that have no flag (settable only in --config FILE.toml)."""
    flagged = {a.dest for a in parser._actions}
    config_only = [f.name for f in dataclasses.fields(TestConfig) if f.name not in flagged]
    keys = "\n".join("  " + line for line in _wrap(", ".join(config_only), 96))
    return (
        f"{RUN_EXAMPLES}\n\nconfig-file-only keys (TOML, e.g. `drain_timeout = 90`):\n{keys}\n"
        "See docs/running.md (the run, its settings) and docs/faults.md (faults, schedules).\n\n" + EPILOG
    )


def _wrap(text: str, width: int) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width, break_on_hyphens=False)


class _Help(argparse.RawDescriptionHelpFormatter):
    """Examples kept as written, and every flag's default shown (unless its help says it)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if "default" in text or default in (None, False, argparse.SUPPRESS) or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"


def add_spark_flags(p: argparse._ActionsContainer) -> None:
    """The checker's Spark, the same two flags in every command that checks (docs/running.md)."""
    p.add_argument(
        "--spark-master",
        metavar="URL",
        help="Spark master of the check (default: the config's spark_master, else "
        "$STRANDLINE_SPARK_MASTER, else local[*])",
    )
    p.add_argument(
        "--spark-remote",
        metavar="sc://HOST:PORT",
        help="check on a Spark Connect server, no JVM here (default: $STRANDLINE_SPARK_REMOTE)",
    )


def export_spark_flags(args: argparse.Namespace) -> None:
    """Hand --spark-master/--spark-remote to the checker as its environment variables, so every
    test a command starts (a campaign's, a repro's) and every process it spawns uses them."""
    for flag, variable in (
        ("spark_master", "STRANDLINE_SPARK_MASTER"),
        ("spark_remote", "STRANDLINE_SPARK_REMOTE"),
    ):
        value = getattr(args, flag, None)
        if value:
            os.environ[variable] = value


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit 2 (the contract's 'bad input or usage')."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # the commands' own parsers, by name (the top-level parser's; empty in theirs)
        self.commands: Mapping[str, argparse.ArgumentParser] = {}

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: {message} (see --help)\n")
        sys.exit(EXIT_BAD_INPUT)


def add_cluster_flags(p: argparse.ArgumentParser) -> None:
    """Flags that describe a cluster: shared by `run` and `cluster`. None means 'not given'."""
    g = p.add_argument_group("cluster")
    g.add_argument(
        "--config",
        metavar="FILE",
        help="a TOML config (or a run's test.json); flags override it (default: none, every key's default)",
    )
    g.add_argument(
        "--system",
        metavar="own|kafka|PATH.toml",
        help="system under test: own broker + ZooKeeper (default), Apache Kafka, or a system definition "
        "file (docs/systems.md)",
    )
    g.add_argument(
        "--backend", choices=BACKENDS, help="where nodes run: network namespaces (default), docker, ssh"
    )
    g.add_argument("--nodes", type=int, metavar="N", help="number of broker nodes (default 3)")
    g.add_argument("--topics", type=int, metavar="T", help="number of topics (default 1)")
    g.add_argument("--partitions", type=int, metavar="P", help="partitions per topic (default 2)")
    g.add_argument("--replication-factor", type=int, metavar="R", help="replicas per partition (default 3)")
    g.add_argument(
        "--variant",
        choices=VARIANTS,
        help="own broker's follower truncation: leader-epoch (default; KIP-101 with KIP-279, safe), "
        "leader-epoch-v0 (KIP-101 before KIP-279) or high-watermark (pre-KIP-101)",
    )
    g.add_argument("--min-insync", type=int, metavar="N", help="min.insync.replicas (default 2)")
    g.add_argument(
        "--unclean-election", action="store_const", const=True, help="unclean.leader.election.enable=true"
    )
    g.add_argument(
        "--kafka-version",
        metavar="V",
        help="the Apache Kafka release of --system kafka (fetched from Maven Central on first use; "
        "default: the newest that starts on Java 17)",
    )


def add_checker_flag(p: argparse.ArgumentParser, text: str) -> None:
    p.add_argument("--checker", choices=CHECKERS, default=None, help=text)


def add_run_flags(p: argparse.ArgumentParser, nemesis: str | None = None) -> None:
    add_cluster_flags(p)
    g = p.add_argument_group("workload and faults")
    g.add_argument("--acks", choices=ACKS, help="producer acks (default all)")
    g.add_argument("--nemesis", metavar="FAULTS", help=nemesis or nemesis_help())
    g.add_argument("--nemesis-interval", type=float, metavar="S", help="seconds between faults (default 10)")
    g.add_argument("--time-limit", type=float, metavar="S", help="seconds of load and faults (default 60)")
    g.add_argument("--rate", type=float, metavar="OPS", help="target operations per second (default 200)")
    g.add_argument("--concurrency", type=int, metavar="C", help="client processes (default 10)")
    g.add_argument(
        "--client",
        choices=CLIENTS,
        help="Kafka client driver (default kafka-python); java: Apache Kafka's own client, in a JVM"
        " (docs/workloads.md)",
    )
    g.add_argument(
        "--java-client-version",
        metavar="V",
        help="the kafka-clients release of --client java (fetched from Maven Central on first use;"
        " default: the newest that runs on this machine's Java)",
    )
    g.add_argument(
        "--group-protocol",
        choices=GROUP_PROTOCOLS,
        help="--client java group members' protocol: classic (default) or consumer (KIP-848, where"
        " the broker offers it)",
    )
    g.add_argument(
        "--workload",
        choices=WORKLOADS,
        help="queue (default): single sends and polls; txn: transactions of sends and polls, "
        "committed or aborted (abort_p), read committed (docs/workloads.md)",
    )
    g.add_argument(
        "--consume",
        choices=CONSUME_MODES,
        help="how clients consume: assign partitions (default), subscribe in consumer groups, or mixed",
    )
    g.add_argument(
        "--crash-clients",
        type=float,
        metavar="S",
        help="kill a random client process abruptly every S seconds on average (default 0: never)",
    )
    g.add_argument("--seed", type=int, metavar="N", help=SEED_HELP + " (default 0)")
    g.add_argument("--store", metavar="DIR", help="where runs are stored (default results/)")
    g.add_argument(
        "--checker",
        choices=CHECKERS,
        help="checker engine: spark (default), reference (pure Python, the oracle), or auto"
        " (reference below 512 MiB of history, spark above)",
    )
    g.add_argument(
        "--name", metavar="NAME", help="test name: runs go to <store>/<name>/<time>/ (default queue)"
    )
    add_spark_flags(g)


def build_parser() -> _Parser:
    parser = _Parser(
        prog="strandline",
        description=(
            "strandline: a Jepsen-style fault-injection harness for Kafka-like replicated logs. "
            "It drives a cluster, injects faults, records every send and poll, and checks that no "
            "acknowledged write was lost."
        ),
        epilog=EPILOG,
        formatter_class=_Help,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log details to stderr")
    parser.add_argument("--version", action="version", version=f"strandline {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    parser.commands = sub.choices

    p = sub.add_parser(
        "run",
        help="run one test: cluster, load + faults, heal, drain, check, report",
    )
    add_run_flags(p)
    p.epilog = run_epilog(p)

    p = sub.add_parser(
        "check",
        help="(re)check a stored run and write results.json",
        epilog="examples:\n"
        "  strandline check results/latest\n"
        "  strandline check results/latest --checker reference    # the pure-Python oracle\n"
        "  strandline check results/latest --spark-master spark://host:7077    # an existing Spark cluster\n"
        "A cut or crashed run is still judged (unknown where its history is incomplete).\n"
        "See docs/checkers.md (anomalies, engines) and docs/results-format.md.\n\n" + EPILOG,
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (<store>/latest: the newest run)")
    p.add_argument(
        "--checker",
        choices=CHECKERS,
        default=None,
        help="checker engine (default: the run's test.json, else spark)",
    )
    add_spark_flags(p)

    p = sub.add_parser(
        "report",
        help="(re)write report.html of a stored run",
        epilog="examples:\n"
        "  strandline report results/latest\n"
        "Reads the run's results.json and history.jsonl; checks nothing (see `check`).\n"
        "exit codes: 0 written, 2 no such run.",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (<store>/latest: the newest run)")

    p = sub.add_parser(
        "campaign",
        help="run a matrix of tests from a TOML file, with a summary",
        epilog="examples:\n"
        "  strandline campaign campaigns/smoke.toml          # a few minutes: the safe and unsafe settings\n"
        "  strandline campaign campaigns/nightly.toml --store /srv/strandline\n"
        "  strandline campaign campaigns/detection.toml      # how often random faults catch each setting\n"
        "Each row states its expected verdict; the summary, index.html and junit.xml go to the store,\n"
        "and `strandline analyze` runs at the end. See docs/running.md.\n\n"
        "exit codes: 0 every test as expected, 1 some test not as expected, 2 bad file, 4 infrastructure.",
    )
    p.add_argument("file", metavar="FILE.toml", help="the campaign (campaigns/*.toml are examples)")
    p.add_argument(
        "--store", metavar="DIR", help="where runs are stored (default: the file's, else results/)"
    )
    add_checker_flag(p, "every test's checker (default: the file's, else spark)")
    add_spark_flags(p)

    p = sub.add_parser(
        "repro",
        help="reproduce a named, reported data-loss scenario",
        description="Runs the scenario's unsafe setting (expected invalid: the reported loss), then its "
        "safe twin (expected valid: the fix holds), with the same scripted faults and seed.",
        epilog="examples:\n"
        "  strandline repro --list                       # every scenario, with its story and its fix\n"
        "  strandline repro --list kip-101-truncation    # one scenario's story\n"
        "  strandline repro kip-101-truncation\n"
        "  strandline repro kafka-17754-delayed-end-txn --checker reference --seed 7\n"
        "  strandline repro kip-101-truncation --system kafka  # Kafka 0.10.2.2 (invalid) vs 0.11.0.0 (valid)\n"
        "See docs/running.md (the scenarios).\n\n"
        "exit codes: 0 both verdicts as expected, 1 not as expected, 2 unknown scenario, 4 infrastructure.",
    )
    p.add_argument("scenario", metavar="NAME", nargs="?", help="the scenario (see --list)")
    p.add_argument("--list", action="store_true", help="list the scenarios (with NAME: that one)")
    p.add_argument(
        "--system",
        choices=("own", "kafka"),
        default="own",
        help="own: the own broker's unsafe and safe variants (default); kafka: real Apache Kafka, "
        "the release that had the bug against the release that fixed it (see --list)",
    )
    p.add_argument("--store", metavar="DIR", help="where runs are stored (default results/)")
    p.add_argument("--seed", type=int, metavar="N", help=SEED_HELP + " (default 0)")
    add_checker_flag(p, "checker engine (default spark)")
    add_spark_flags(p)

    p = sub.add_parser(
        "serve",
        help="browse stored runs and campaigns in a web browser",
        epilog="examples:\n"
        "  strandline serve --port 8080    # then open http://127.0.0.1:8080\n"
        "Serves the store's runs, campaigns and analysis page, read only; binds 127.0.0.1 unless "
        "--bind says otherwise. Ctrl-C or SIGTERM stops it (exit 0).",
    )
    p.add_argument("--store", metavar="DIR", default="results", help="the results store")
    p.add_argument("--bind", default="127.0.0.1", help="address to listen on")
    p.add_argument("--port", type=int, default=8080, help="port to listen on")

    p = sub.add_parser(
        "analyze",
        help="a Spark job over every stored run: tables (Parquet, CSV) and a page with plots, in <store>/analysis/",
    )
    p.add_argument("--store", metavar="DIR", default="results", help="the results store")
    p.add_argument(
        "--spark-master",
        metavar="URL",
        help="Spark master (default: $STRANDLINE_SPARK_MASTER, else local[*])",
    )
    p.add_argument(
        "--spark-remote",
        metavar="sc://HOST:PORT",
        help="run on a Spark Connect server, no JVM here (default: $STRANDLINE_SPARK_REMOTE)",
    )
    p.epilog = (
        "examples:\n"
        "  strandline analyze --store results\n"
        "See docs/analyze.md.\n"
        "exit codes: 0 written, 2 no such store or no run in it, 4 Spark failed."
    )

    p = sub.add_parser(
        "cluster",
        help="bring a cluster up or down, or show its state",
        epilog="examples:\n"
        "  strandline cluster up --nodes 3 --variant high-watermark    # prints the bootstrap servers\n"
        "  strandline cluster status --json\n"
        "  strandline cluster down\n"
        "See docs/clusters.md (using a cluster with your own clients).",
    )
    p.add_argument("action", choices=("up", "down", "status"), help="what to do")
    add_cluster_flags(p)
    p.add_argument("--state", metavar="FILE", help="cluster state file (default results/.cluster.json)")
    p.add_argument("--json", action="store_true", help="status as one JSON object")
    p.add_argument("--all", action="store_true", help="with down: every cluster strandline left behind")

    p = sub.add_parser(
        "explore",
        help="search fault schedules in a deterministic simulation; replay the minimal failing one",
    )
    add_run_flags(
        p,
        nemesis="the faults the simulator draws (default: kill,restart,pause,partition,clock); it models "
        "kill, restart, pause, partition, power-loss, clock",
    )
    p.add_argument("--budget", type=float, default=60.0, metavar="S", help="seconds of search")
    next(a for a in p._actions if a.dest == "seed").help = SEED_HELP + f" (default {EXPLORE_SEED})"
    p.add_argument(
        "--no-replay", action="store_true", help="do not replay the minimal schedule on real nodes"
    )
    p.epilog = (
        "examples:\n"
        "  strandline explore --variant high-watermark --seed 1\n"
        "  strandline explore --variant leader-epoch --budget 60 --no-replay\n"
        "The simulator runs the own broker's replication core (one partition, every broker a replica) with\n"
        "the test's settings. The same seed always gives the same search. See docs/explore.md.\n\n"
        "exit codes: 1 the simulation found a loss (invalid), 0 none within the budget, 2 bad input,\n"
        "4 infrastructure (the replay could not run)."
    )

    p = sub.add_parser(
        "shrink",
        help="delta debugging over a stored invalid run's faults, on real nodes: the smallest that still fails",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="an invalid run's directory")
    p.add_argument("--budget", type=float, default=1800.0, metavar="S", help="seconds of real runs")
    add_spark_flags(p)
    p.epilog = (
        "examples:\n"
        "  strandline shrink results/latest --budget 900\n"
        "exit codes: 1 a minimal schedule still gives invalid (stored as a run, with shrink.html), "
        "3 (unknown) the failure does not come back when replayed, 2 bad input, 4 infrastructure. "
        "See docs/explore.md."
    )

    p = sub.add_parser(
        "bench",
        help="benchmarks that print figures",
        epilog="targets:\n"
        "  checker   `strandline check` timed whole on a generated run of --ops operations, without and\n"
        "            with its Parquet form, beside DuckDB and the reference checker, then a small run's\n"
        "            first and second check: wall time, ops/s, peak memory, breakdown\n"
        "  workload  `strandline run --client confluent-kafka --concurrency 100 --rate 100000\n"
        "            --time-limit 30 --checker reference` in a fresh process, --runs times: acknowledged\n"
        "            sends/s and stall windows from each run's history, phases and CPU as a breakdown\n"
        "  broker    raw pipelined acks=all produce throughput on 3 local own brokers (RF 3): a ceiling\n"
        "  explore   the simulator: seeds that find each known loss, time to find, safe schedules\n"
        "examples:\n"
        "  strandline bench checker --ops 10000000\n"
        "  strandline bench workload\n"
        "See docs/checkers.md and docs/workloads.md for measured figures.",
    )
    p.add_argument("target", choices=("checker", "broker", "workload", "explore"), help="what to measure")
    p.add_argument("--ops", type=int, default=1_000_000, metavar="N", help="checker bench: operations")
    p.add_argument(
        "--checker", choices=CHECKERS, default=None, help="checker bench: the engine (default spark)"
    )
    p.add_argument(
        "--keep",
        metavar="DIR",
        help="keep what the bench made in DIR (checker: the generated run directory; workload: a store "
        "holding its runs) (default: a temporary directory, removed)",
    )
    p.add_argument("--runs", type=int, default=None, metavar="N", help="workload bench: runs (default 3)")
    p.add_argument("--schedules", type=int, default=10_000, metavar="N", help="explore bench: safe schedules")
    p.add_argument("--budget", type=float, default=600.0, metavar="S", help="explore bench: seconds per part")
    p.add_argument("--no-duckdb", action="store_true", help="checker bench: skip the DuckDB comparison")
    p.add_argument(
        "--no-reference", action="store_true", help="checker bench: skip the reference checker beside Spark"
    )
    p.add_argument(
        "--in-process",
        action="store_true",
        help="checker bench: check in this process (no fresh interpreter)",
    )
    p.add_argument(
        "--convert",
        action="store_true",
        help="checker bench: only the check that converts the history to Parquet itself (a history "
        "from elsewhere), not the one that finds the form `strandline run` writes during the load",
    )
    p.add_argument(
        "--no-convert",
        action="store_true",
        help="checker bench: only the check that finds the history's Parquet form (as after `strandline run`)",
    )
    p.add_argument(
        "--small-ops",
        type=int,
        default=2000,
        metavar="N",
        help="checker bench: operations of the small run checked twice in one process (default 2000)",
    )
    p.add_argument("--no-small", action="store_true", help="checker bench: skip the small run")

    p = sub.add_parser(
        "kafka",
        help="Apache Kafka releases: fetch one from Maven Central into the cache",
        epilog="examples:\n"
        "  strandline kafka fetch 4.4.0      # prints the folder holding the release's libs/\n"
        "  strandline kafka fetch 0.11.0.3   # old releases too (ZooKeeper mode: systems/kafka-zk.toml)\n"
        "exit codes: 0 fetched (or already there), 2 no such release (the nearest are named), "
        "4 Maven Central unreachable.",
    )
    p.add_argument("action", choices=("fetch",), help="what to do")
    p.add_argument("version", metavar="VERSION", help="a release, e.g. 4.4.0")

    p = sub.add_parser(
        "tansu",
        help="the tansu broker of systems/tansu-*.toml: build it once with cargo into the cache",
        epilog="examples:\n"
        "  strandline tansu fetch            # prints the path of the tansu binary (built once: long)\n"
        "exit codes: 0 built (or already there), 2 no cargo on PATH or another release, "
        "4 the build failed.",
    )
    p.add_argument("action", choices=("fetch",), help="what to do")
    p.add_argument("version", metavar="VERSION", nargs="?", help="the release (default and only: 0.6.0)")

    p = sub.add_parser(
        "demo",
        help="the main job: the seed scenario with both truncation protocols",
        epilog="examples:\n"
        "  strandline demo --checker reference\n"
        "Runs the KIP-101 scenario on 3 own brokers twice, same faults and seed: high-watermark "
        "truncation (expected invalid) and leader epochs (expected valid). exit codes: 0 as expected, "
        "1 not as expected, 4 infrastructure.",
    )
    p.add_argument("--store", metavar="DIR", help="where runs are stored (default results/)")
    p.add_argument("--seed", type=int, metavar="N", help=SEED_HELP + f" (default {DEMO_SEED})")
    add_checker_flag(p, "checker engine (default spark)")
    add_spark_flags(p)

    for command in sub.choices.values():
        command.formatter_class = _Help
        # `-v` after the command too; SUPPRESS keeps one given before it
        command.add_argument(
            "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="log details to stderr"
        )
    return parser


def keep_cwd_clean() -> None:
    """Nothing of ours in the user's current directory: the Kafka protocol library imports
    hypothesis, which would otherwise keep its data in ./.hypothesis (the cache is ours)."""
    cache = os.environ.get("STRANDLINE_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "strandline"
    )
    os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", os.path.join(cache, "hypothesis"))


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("strandline")
    except PackageNotFoundError:  # run from a checkout without an install
        return "(not installed)"


class _InterruptNoise(logging.Filter):
    """A library that logs the Ctrl-C it was interrupted by, with a traceback (py4j: 'KeyboardInterrupt
    while sending command', then the broken socket it closes): the command says `interrupted` itself,
    in one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        seen: BaseException | None = record.exc_info[1] if record.exc_info else None
        met: set[int] = set()  # a chain that loops back (set by hand) is walked once
        while seen is not None and id(seen) not in met:  # also an error met closing its socket
            if isinstance(seen, KeyboardInterrupt):
                return False
            met.add(id(seen))
            seen = seen.__cause__ or seen.__context__
        return True


@contextlib.contextmanager
def _noting_interrupts() -> Iterator[threading.Event]:
    """An event set on Ctrl-C. A terminal's Ctrl-C also reaches the command's children (Spark's
    JVM, a broker): one may die before Python raises KeyboardInterrupt, and the error its end
    causes (py4j: 'Answer from Java side is empty') is then what ends the command. It was
    interrupted."""
    seen = threading.Event()
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield seen  # ignored (nohup, a background job) or handled by whoever called us
        return

    def on_interrupt(signum: int, frame: Any) -> None:
        seen.set()
        signal.default_int_handler(signum, frame)

    signal.signal(signal.SIGINT, on_interrupt)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _interrupted(command: str, then: str | None = None) -> int:
    sys.stderr.write(f"strandline {command}: interrupted" + (f" ({then})" if then else "") + "\n")
    return 130


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argcomplete.autocomplete(parser)  # answers the shell's completion request and exits; else nothing
    args, extra = parser.parse_known_args(argv)
    if extra:
        # said by the command's parser, so the line names the command whose --help lists the flags
        parser.commands.get(args.command or "", parser).error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command is None:
        parser.print_help()
        return EXIT_BAD_INPUT
    export_spark_flags(args)
    keep_cwd_clean()
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not args.verbose:
        for handler in logging.getLogger().handlers:
            handler.addFilter(_InterruptNoise())
    with _noting_interrupts() as interrupted:
        return _run_command(args, interrupted)


def _run_command(args: argparse.Namespace, interrupted: threading.Event) -> int:
    """The command, its errors each one line and its exit code."""
    try:
        module = importlib.import_module(f"harness.commands.{args.command}")
        return int(module.main(args))
    except StrandlineError as e:
        if interrupted.is_set():  # what the Ctrl-C ended, said on the same line
            return _interrupted(args.command, str(e))
        sys.stderr.write(f"strandline {args.command}: {e}\n")
        return e.exit_code
    except KeyboardInterrupt:
        return _interrupted(args.command)
    except BrokenPipeError:  # `strandline repro --list | head`: the reader has seen enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as e:  # the one place that turns a bug into one line
        if interrupted.is_set():
            return _interrupted(args.command)
        if os.environ.get("STRANDLINE_DEBUG"):
            raise
        sys.stderr.write(
            f"strandline {args.command}: internal error: {type(e).__name__}: {e} (STRANDLINE_DEBUG=1 for details)\n"
        )
        return EXIT_INFRASTRUCTURE


if __name__ == "__main__":
    sys.exit(main())
