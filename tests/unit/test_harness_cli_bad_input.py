"""The one-line rule where a newcomer found it broken: one line, the right exit code, nothing left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main

STRANDLINE = str(Path(sys.executable).with_name("strandline"))


def clean_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "HYPOTHESIS_STORAGE_DIRECTORY"}
    return {**env, "STRANDLINE_CACHE": str(tmp_path / "cache")}


def test_a_missing_kafka_tarball_is_found_before_a_run_directory_and_leaves_nothing_in_cwd(
    tmp_path: Path,
) -> None:
    work = tmp_path / "cwd"
    work.mkdir()
    (work / "t.toml").write_text('system = "kafka"\nkafka_tarball = "/nonexistent/kafka_2.13-4.0.0.tgz"\n')
    out = subprocess.run(
        [STRANDLINE, "run", "--config", "t.toml", "--store", str(tmp_path / "store")],
        cwd=work,
        env=clean_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2, out.stderr
    assert (
        out.stderr
        == "strandline run: config key 'kafka_tarball': no file /nonexistent/kafka_2.13-4.0.0.tgz\n"
    )
    assert not (tmp_path / "store").exists()
    assert sorted(p.name for p in work.iterdir()) == ["t.toml"]  # no .hypothesis/ of the libraries


def test_serve_stops_with_exit_0_on_sigterm(tmp_path: Path) -> None:
    (tmp_path / "store").mkdir()
    proc = subprocess.Popen(
        [STRANDLINE, "serve", "--store", str(tmp_path / "store"), "--port", "0"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert "serving" in line, line
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_repro_list_name_shows_that_scenario_aligned(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["repro", "--list", "kafka-17754-delayed-end-txn"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("kafka-17754-delayed-end-txn ") and len(lines[0].split("  ")) == 1
    indent = len("kafka-17754-delayed-end-txn ")
    # every line under the name's column (the real-Kafka block indents its own lines two more)
    assert all(line[:indent].strip() == "" and line[indent:].strip() for line in lines[1:])
    assert any(line[indent:].startswith("real Kafka (--system kafka") for line in lines[1:])
    assert main(["repro", "--list", "nope"]) == 2
    assert "unknown scenario 'nope'" in capsys.readouterr().err


def test_a_wrong_type_in_a_definition_is_named_as_a_wrong_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "sys.toml").write_text('name = "x"\nroles = "broker"\n')
    assert main(["run", "--system", str(tmp_path / "sys.toml"), "--store", str(tmp_path / "store")]) == 2
    assert "roles: expected a table of roles ([roles.broker] ...), got 'broker'" in capsys.readouterr().err
    assert not (tmp_path / "store").exists()


def test_shrink_exit_codes_are_documented() -> None:
    codes = (Path(__file__).resolve().parents[2] / "docs" / "exit-codes.md").read_text()
    assert "`shrink`" in codes and "`serve`" in codes
