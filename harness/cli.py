"""The `strandline` command line: a thin layer of argparse over `harness.commands.*`.

Each subcommand lives in its own module with `main(args) -> int`; this file only parses flags and
turns errors into one line and the contract's exit code (docs/exit-codes.md). No traceback ever
reaches the user unless STRANDLINE_DEBUG=1.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from foundation.config import (
    ACKS,
    BACKENDS,
    CHECKERS,
    CLIENTS,
    CONSUME_MODES,
    VARIANTS,
    WORKLOADS,
    TestConfig,
)
from foundation.errors import EXIT_BAD_INPUT, EXIT_INFRASTRUCTURE, StrandlineError

EPILOG = """\
exit codes: 0 valid, 1 invalid, 2 bad input or usage, 3 unknown, 4 harness or infrastructure failure.
`run` and `check` print, as their last line, `verdict: valid|invalid|unknown <run-dir>`.
Docs: docs/ in the repository (history format, results format, faults, broker variants)."""


# The faults `--nemesis` accepts (nemesis.schedule.available() without the scripted-only
# clock-reset); tests/unit/test_harness_cli_help.py keeps this in step with the nemesis catalogue.
FAULTS = (
    "kill",
    "restart",
    "pause",
    "partition",
    "loss",
    "delay",
    "hold",
    "bandwidth",
    "clock",
    "clock-bump",
    "clock-strobe",
    "lose-unsynced",
    "corrupt",
    "member",
)

RUN_EXAMPLES = """\
examples:
  strandline run --time-limit 30 --nemesis kill,partition --checker reference
  strandline run --variant high-watermark --nemesis kill:leader --seed 101
  strandline run --config campaigns/my-test.toml --acks 1 --name acks1
  strandline run --config results/queue/latest/test.json      # rerun a stored test (same seed)"""


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
    g.add_argument("--config", metavar="FILE", help="a TOML config (or a run's test.json); flags override it")
    g.add_argument(
        "--system",
        metavar="own|kafka|PATH.toml",
        help="system under test: own broker + ZooKeeper, Apache Kafka, or a system definition file "
        "(docs/systems.md)",
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
        help="own broker's follower truncation: leader-epoch (KIP-101 with KIP-279, safe), "
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


def add_run_flags(p: argparse.ArgumentParser) -> None:
    add_cluster_flags(p)
    g = p.add_argument_group("workload and faults")
    g.add_argument("--acks", choices=ACKS, help="producer acks (default all)")
    g.add_argument(
        "--nemesis",
        metavar="FAULTS",
        help=f"comma-separated faults (default none): {', '.join(FAULTS)}; a fault may name its"
        " target (kill:leader) and faults join with + (partition+clock); see docs/faults.md",
    )
    g.add_argument("--nemesis-interval", type=float, metavar="S", help="seconds between faults (default 10)")
    g.add_argument("--time-limit", type=float, metavar="S", help="seconds of load and faults (default 60)")
    g.add_argument("--rate", type=float, metavar="OPS", help="target operations per second (default 200)")
    g.add_argument("--concurrency", type=int, metavar="C", help="client processes (default 10)")
    g.add_argument("--client", choices=CLIENTS, help="Kafka client driver (default kafka-python)")
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
    g.add_argument("--seed", type=int, metavar="N", help="seed for workload and faults (default: random)")
    g.add_argument("--store", metavar="DIR", help="where runs are stored (default results/)")
    g.add_argument(
        "--checker",
        choices=CHECKERS,
        help="checker engine: spark (default), reference (pure Python, the oracle), or auto"
        " (reference below 512 MiB of history, spark above)",
    )
    g.add_argument("--name", metavar="NAME", help="test name: runs go to <store>/<name>/<time>/")


def build_parser() -> _Parser:
    parser = _Parser(
        prog="strandline",
        description=(
            "strandline: a Jepsen-style fault-injection harness for Kafka-like replicated logs. "
            "It drives a cluster, injects faults, records every send and poll, and checks that no "
            "acknowledged write was lost."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log details to stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    parser.commands = sub.choices

    p = sub.add_parser(
        "run",
        help="run one test: cluster, load + faults, heal, drain, check, report",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_run_flags(p)
    p.epilog = run_epilog(p)

    p = sub.add_parser(
        "check",
        help="(re)check a stored run and write results.json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
        "  strandline check results/queue/latest\n"
        "  strandline check results/queue/latest --checker reference    # the pure-Python oracle\n"
        "  strandline check RUN_DIR --spark-master spark://host:7077    # an existing Spark cluster\n"
        "A cut or crashed run is still judged (unknown where its history is incomplete).\n"
        "See docs/checkers.md (anomalies, engines) and docs/results-format.md.\n\n" + EPILOG,
    )
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument(
        "--checker",
        choices=CHECKERS,
        default=None,
        help="checker engine (default: the run's test.json, else spark)",
    )
    p.add_argument("--spark-master", metavar="URL", help="Spark master (default local[*])")
    p.add_argument(
        "--spark-remote",
        metavar="sc://HOST:PORT",
        help="check on a Spark Connect server (no JVM here; default: $STRANDLINE_SPARK_REMOTE)",
    )

    p = sub.add_parser(
        "report",
        help="(re)write report.html of a stored run",
        epilog="Reads the run's results.json and history.jsonl; checks nothing (see `check`). "
        "exit codes: 0 written, 2 no such run.",
    )
    p.add_argument("run_dir", metavar="RUN_DIR")

    p = sub.add_parser(
        "campaign",
        help="run a matrix of tests from a TOML file, with a summary",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
        "  strandline campaign campaigns/smoke.toml          # a few minutes: the safe and unsafe settings\n"
        "  strandline campaign campaigns/nightly.toml --store /srv/strandline\n"
        "  strandline campaign campaigns/detection.toml      # how often random faults catch each setting\n"
        "Each row states its expected verdict; the summary, index.html and junit.xml go to the store,\n"
        "and `strandline analyze` runs at the end. See docs/running.md.\n\n"
        "exit codes: 0 every test as expected, 1 some test not as expected, 2 bad file, 4 infrastructure.",
    )
    p.add_argument("file", metavar="FILE.toml")
    p.add_argument("--store", metavar="DIR", help="where runs are stored (default results/)")
    add_checker_flag(p, "every test's checker (default: the file's, else spark)")

    p = sub.add_parser(
        "repro",
        help="reproduce a named, reported data-loss scenario",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Runs the scenario's unsafe setting (expected invalid: the reported loss), then its "
        "safe twin (expected valid: the fix holds), with the same scripted faults and seed.",
        epilog="examples:\n"
        "  strandline repro --list                       # every scenario, with its story and its fix\n"
        "  strandline repro kip-101-truncation\n"
        "  strandline repro kafka-17754-delayed-end-txn --checker reference --seed 7\n"
        "  strandline repro kip-101-truncation --system kafka  # Kafka 0.10.2.2 (invalid) vs 0.11.0.0 (valid)\n"
        "See docs/running.md (the scenarios).\n\n"
        "exit codes: 0 both verdicts as expected, 1 not as expected, 2 unknown scenario, 4 infrastructure.",
    )
    p.add_argument("scenario", metavar="NAME", nargs="?", help="the scenario (see --list)")
    p.add_argument("--list", action="store_true", help="list the scenarios")
    p.add_argument(
        "--system",
        choices=("own", "kafka"),
        default="own",
        help="own: the own broker's unsafe and safe variants (default); kafka: real Apache Kafka, "
        "the release that had the bug against the release that fixed it (see --list)",
    )
    p.add_argument("--store", metavar="DIR", help="where runs are stored (default results/)")
    p.add_argument("--seed", type=int, metavar="N", help="seed of both runs (default 0: drawn at random)")
    add_checker_flag(p, "checker engine (default spark)")

    p = sub.add_parser(
        "serve",
        help="browse stored runs and campaigns in a web browser",
        epilog="Serves the store's runs, campaigns and analysis page, read only; binds 127.0.0.1 unless "
        "--bind says otherwise.",
    )
    p.add_argument("--store", metavar="DIR", default="results")
    p.add_argument("--bind", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080)

    p = sub.add_parser(
        "analyze",
        help="a Spark job over every stored run: tables (Parquet, CSV) and a page with plots, in <store>/analysis/",
    )
    p.add_argument("--store", metavar="DIR", default="results", help="the results store (default results/)")
    p.epilog = (
        "Spark: local[*], or $STRANDLINE_SPARK_MASTER / $STRANDLINE_SPARK_REMOTE. See docs/analyze.md.\n"
        "exit codes: 0 written, 2 no such store or no run in it, 4 Spark failed."
    )

    p = sub.add_parser("cluster", help="bring a cluster up or down, or show its state")
    p.add_argument("action", choices=("up", "down", "status"))
    add_cluster_flags(p)
    p.add_argument("--state", metavar="FILE", help="cluster state file (default results/.cluster.json)")
    p.add_argument("--json", action="store_true", help="status as one JSON object")
    p.add_argument("--all", action="store_true", help="with down: every cluster strandline left behind")

    p = sub.add_parser(
        "explore",
        help="search fault schedules in a deterministic simulation; replay the minimal failing one",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_run_flags(p)
    p.add_argument("--budget", type=float, default=60.0, metavar="S", help="seconds of search (default 60)")
    p.add_argument(
        "--no-replay", action="store_true", help="do not replay the minimal schedule on real nodes"
    )
    p.epilog = (
        "The simulator runs the own broker's replication core (one partition, every broker a replica) with\n"
        "the test's settings; --nemesis picks the faults it draws (default kill,restart,pause,partition,clock;\n"
        "also power-loss). The same seed always gives the same search. See docs/explore.md.\n\n"
        "exit codes: 1 the simulation found a loss (invalid), 0 none within the budget, 2 bad input,\n"
        "4 infrastructure (the replay could not run)."
    )

    p = sub.add_parser(
        "shrink",
        help="delta debugging over a stored invalid run's faults, on real nodes: the smallest that still fails",
    )
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument(
        "--budget", type=float, default=1800.0, metavar="S", help="seconds of real runs (default 1800)"
    )
    p.epilog = (
        "exit codes: 1 a minimal schedule still gives invalid (stored as a run, with shrink.html), "
        "3 the schedule no longer fails when replayed, 2 bad input, 4 infrastructure. See docs/explore.md."
    )

    p = sub.add_parser(
        "bench",
        help="benchmarks that print figures",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="targets:\n"
        "  checker   a generated run of --ops operations checked end to end as `strandline check` does,\n"
        "            by Spark, DuckDB and the reference checker: wall time, ops/s, peak memory\n"
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
    p.add_argument("target", choices=("checker", "broker", "workload", "explore"))
    p.add_argument("--ops", type=int, default=1_000_000, metavar="N", help="operations (checker bench)")
    p.add_argument("--checker", choices=CHECKERS, default=None)
    p.add_argument(
        "--keep", metavar="DIR", help="checker and workload benches: keep the run directories here"
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
        help="checker bench: the check converts the history to Parquet itself (a history from "
        "elsewhere), rather than finding the form `strandline run` writes during the load",
    )

    p = sub.add_parser(
        "kafka",
        help="Apache Kafka releases: fetch one from Maven Central into the cache",
        epilog="examples:\n"
        "  strandline kafka fetch 4.4.0      # prints the folder holding the release's libs/\n"
        "  strandline kafka fetch 0.11.0.3   # old releases too (ZooKeeper mode: systems/kafka-zk.toml)\n"
        "exit codes: 0 fetched (or already there), 2 no such release (the nearest are named), "
        "4 Maven Central unreachable.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("action", choices=("fetch",))
    p.add_argument("version", metavar="VERSION")

    p = sub.add_parser(
        "demo",
        help="the main job: the seed scenario with both truncation protocols",
        epilog="Runs the KIP-101 scenario on 3 own brokers twice, same faults and seed: high-watermark "
        "truncation (expected invalid) and leader epochs (expected valid). exit codes: 0 as expected, "
        "1 not as expected, 4 infrastructure.",
    )
    p.add_argument("--store", metavar="DIR", help="where runs are stored (default results/)")
    p.add_argument("--seed", type=int, metavar="N", help="seed of both runs (default 101)")
    add_checker_flag(p, "checker engine (default spark)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        # said by the command's parser, so the line names the command whose --help lists the flags
        parser.commands.get(args.command or "", parser).error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command is None:
        parser.print_help()
        return EXIT_BAD_INPUT
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        module = importlib.import_module(f"harness.commands.{args.command}")
        return int(module.main(args))
    except StrandlineError as e:
        sys.stderr.write(f"strandline {args.command}: {e}\n")
        return e.exit_code
    except KeyboardInterrupt:
        sys.stderr.write(f"strandline {args.command}: interrupted\n")
        return 130
    except Exception as e:  # the one place that turns a bug into one line
        if os.environ.get("STRANDLINE_DEBUG"):
            raise
        sys.stderr.write(
            f"strandline {args.command}: internal error: {type(e).__name__}: {e} (STRANDLINE_DEBUG=1 for details)\n"
        )
        return EXIT_INFRASTRUCTURE


if __name__ == "__main__":
    sys.exit(main())
