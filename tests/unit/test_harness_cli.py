"""Bad input to run, report, repro and demo: one clear line on stderr and exit 2, nothing created."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main


def strandline(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in-process (fast), with its exit code and output as a subprocess would give them."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as e:
            code = int(e.code or 0)
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["report", "/nonexistent/run"], "no such run directory"),
        (["repro", "no-such-scenario"], "unknown scenario 'no-such-scenario'"),
        (["repro"], "name a scenario"),
        (["run", "--nemesis", "kill,teleport"], "unknown fault 'teleport'"),
        (["run", "--time-limit", "-5"], "'time_limit'"),
        (["run", "--replication-factor", "4"], "'replication_factor'"),
        (["run", "--acks", "most"], "--acks"),
        (["run", "--consume", "sometimes"], "--consume"),
        (["run", "--crash-clients", "-1"], "'crash_clients'"),
        (["demo", "--seed", "many"], "--seed"),
        (["serve", "--store", "/nonexistent/store"], "no results store"),
        (["campaign", "/nonexistent/c.toml"], "cannot read campaign"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], needle: str) -> None:
    out = strandline(*args, "--store", str(tmp_path / "store")) if args[0] == "run" else strandline(*args)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], out.stderr
    assert not (tmp_path / "store").exists()  # nothing was created for a test that cannot run


def test_report_of_a_directory_that_is_not_a_run(tmp_path: Path) -> None:
    out = strandline("report", str(tmp_path))
    assert out.returncode == 2 and "not a run directory" in out.stderr


def test_bad_consume_in_a_config_file_names_the_key(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('consume = "sometimes"\n')
    out = strandline("run", "--config", str(config), "--store", str(tmp_path / "store"))
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "'consume'" in out.stderr and "assign, subscribe, mixed" in out.stderr


def test_bad_config_file_names_the_key(tmp_path: Path) -> None:
    cfg = tmp_path / "t.toml"
    cfg.write_text('nodes = 3\nacks = "sometimes"\n')
    out = strandline("run", "--config", str(cfg))
    assert out.returncode == 2 and "'acks'" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_repro_list_names_every_scenario() -> None:
    out = strandline("repro", "--list")
    assert out.returncode == 0
    for name in (
        "kip-101-truncation",
        "kip-101-divergence",
        "acks-1-leader-crash",
        "min-isr-1",
        "unclean-election",
        "kip-966-last-replica-standing",
        "kip-903-empty-disk",
        "kip-279-fast-leader-change",
        "bitflip-minority",
        "kafka-16541-epoch-checkpoint",
        "membership-kill",
    ):
        assert name in out.stdout
    # each with its story: how the schedule provokes the loss
    assert "decommission a broker while the leader is killed" in " ".join(out.stdout.split())


def test_scenarios_build_valid_configs() -> None:
    from harness.scenarios import SCENARIOS
    from nemesis import schedule

    for s in SCENARIOS.values():
        for safe in (False, True):
            config = s.config(safe, seed=5)
            assert config.seed == 5 and config.name.startswith(s.name)
            for i, step in enumerate(config.schedule):
                schedule.step_kind(step, i)
        assert s.config(False).to_json() != s.config(True).to_json()


def test_a_membership_change_that_leaves_fewer_brokers_than_rf_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "member.toml"
    config.write_text('spare_nodes = 0\nnemesis = ["member:decommission"]\n')
    out = strandline("run", "--config", str(config), "--store", str(tmp_path / "store"))
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines() == [
        "strandline run: fault 'member': member:decommission would leave 2 brokers, fewer than the "
        "replication factor 3 (nodes 3 + spare_nodes 0)"
    ]
    assert not (tmp_path / "store").exists()


# Ctrl-C arrives and is swallowed; what the command raises next ends it.
_CTRL_C_THEN = """
    try:
        os.kill(os.getpid(), signal.SIGINT)
    except KeyboardInterrupt:
        pass
"""
# A command that meets Ctrl-C in three ways, each run as `strandline check` in a fresh interpreter.
_CTRL_C = {
    # py4j logs the KeyboardInterrupt it was sending on, with a traceback, and re-raises it.
    "a library logs it": """
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt:
        logging.exception("KeyboardInterrupt while sending command.")
        raise
""",
    # The terminal's Ctrl-C also ends Spark's JVM: py4j meets its dead socket first.
    "a child died first": _CTRL_C_THEN + '    raise RuntimeError("Answer from Java side is empty")\n',
    # An error of ours (a heal that failed) after the Ctrl-C: said, not hidden.
    "an error of ours": _CTRL_C_THEN + '    raise InfrastructureError("could not heal: iptables is gone")\n',
}
_SAID = {
    "a library logs it": "strandline check: interrupted",
    "a child died first": "strandline check: interrupted",
    "an error of ours": "strandline check: interrupted (could not heal: iptables is gone)",
}


@pytest.mark.parametrize("how", sorted(_CTRL_C))
def test_ctrl_c_is_one_line_and_exit_130(how: str) -> None:
    script = (
        "import logging, os, signal, sys\n"
        "import harness.commands.check as check\n"
        "from foundation.errors import InfrastructureError\n"
        "from harness.cli import main\n"
        "def interrupted(args):" + _CTRL_C[how] + "check.main = interrupted\n"
        "sys.exit(main(['check', 'somewhere']))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 130
    assert done.stderr.strip() == _SAID[how], done.stderr


def test_the_interrupt_filter_walks_a_looping_chain_once() -> None:
    import logging

    from harness.cli import _InterruptNoise

    a, b = ValueError("a"), OSError("b")
    a.__cause__, b.__cause__ = b, a  # a loop, set by hand
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "m", None, (ValueError, a, None))
    assert _InterruptNoise().filter(record)
    b.__context__ = KeyboardInterrupt()
    b.__cause__ = None
    assert not _InterruptNoise().filter(record)
