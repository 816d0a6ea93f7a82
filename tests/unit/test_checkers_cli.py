"""`strandline check`: the last line and the exit code follow the verdict; bad input is exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from history.synthetic.generator import generate_ops
from tests.support.checked_runs import make_run
from tests.support.history_builder import HistoryBuilder


def run_check(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], str]:
    code = main(["check", *argv])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_valid_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(tmp_path, generate_ops(100, seed=1)[0])
    code, lines, _ = run_check(capsys, str(run), "--checker", "reference")
    assert code == 0 and lines[-1] == f"verdict: valid {run.resolve()}"
    assert (run / "results.json").exists()


def test_invalid_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    b = HistoryBuilder()
    b.assign(9, [("t0", 0), ("t0", 1)])
    b.send(0, 1, offset=0)
    b.send(0, 2, offset=1)
    b.poll(9, [(1, 2)])  # value 1, acknowledged at offset 0, was never read: lost-write
    run = make_run(tmp_path, b.ops)
    code, lines, _ = run_check(capsys, str(run), "--checker", "reference")
    assert code == 1 and lines[-1] == f"verdict: invalid {run.resolve()}"
    assert any("lost-write: 1 (invalid)" in line for line in lines)


def test_killed_run_with_torn_tail_is_unknown_never_valid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ops, _ = generate_ops(100, seed=2)
    run = make_run(tmp_path, ops, drain=None)
    history = run / "history.jsonl"
    history.write_bytes(history.read_bytes()[:-7])  # the controller died mid-write
    code, lines, _ = run_check(capsys, str(run), "--checker", "reference")
    assert code == 3 and lines[-1] == f"verdict: unknown {run.resolve()}"
    assert any("torn-tail" in line for line in lines)


def test_incomplete_drain_or_missing_data_dirs_are_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(tmp_path, generate_ops(100, seed=4)[0], drain=False)
    assert run_check(capsys, str(run), "--checker", "reference")[0] == 3
    run2 = make_run(tmp_path / "b", generate_ops(100, seed=4)[0], replicas=False)
    code, lines, _ = run_check(capsys, str(run2), "--checker", "reference")
    assert code == 3 and any("nodes is missing" in line for line in lines)


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, err = run_check(capsys, str(tmp_path / "nope"))
    assert code == 2 and lines == [] and len(err.strip().splitlines()) == 1 and "no such run directory" in err
    code, _, err = run_check(capsys, str(tmp_path), "--checker", "reference")
    assert code == 2 and "history.jsonl is missing" in err and len(err.strip().splitlines()) == 1


def test_console_script_last_line(tmp_path: Path) -> None:
    run = make_run(tmp_path, generate_ops(60, seed=5)[0])
    result = subprocess.run(
        [sys.executable, "-m", "harness.cli", "check", str(run), "--checker", "reference"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == f"verdict: valid {run.resolve()}"
