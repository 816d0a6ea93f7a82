"""The CLI contract: commands listed, usage errors exit 2 in one line, config keys validated."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from foundation.config import TestConfig, load_file, resolve, validate
from foundation.errors import BadInput
from harness.cli import build_parser, main

CONTRACT_COMMANDS = ("run", "check", "report", "campaign", "repro", "serve", "cluster", "bench", "analyze")


def test_help_lists_every_contract_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for command in CONTRACT_COMMANDS:
        assert f"    {command} " in out


def test_console_script_help_runs() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "harness.cli", "--help"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0
    assert "strandline" in result.stdout


def test_bad_flag_value_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--nodes", "three"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--nodes" in err


@pytest.mark.parametrize(
    ("argv", "said_by"),
    [(["cluster", "down", "--name", "x"], "strandline cluster: "), (["--bogus"], "strandline: ")],
)
def test_an_unknown_flag_is_named_by_the_command_it_was_given_to(
    argv: list[str], said_by: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(said_by + "unrecognized arguments: ") and len(err.splitlines()) == 1


def test_unknown_config_key_names_the_key(tmp_path: pytest.TempPathFactory) -> None:
    with pytest.raises(BadInput, match="'replicas'"):
        validate({"replicas": 3})


def test_config_errors_name_the_key() -> None:
    with pytest.raises(BadInput, match="'acks'"):
        validate({"acks": "most"})
    with pytest.raises(BadInput, match="'replication_factor'"):
        validate({"nodes": 3, "replication_factor": 4})
    with pytest.raises(BadInput, match="'min_insync'"):
        validate({"min_insync": 4})


def test_config_round_trips_through_test_json(tmp_path) -> None:  # type: ignore[no-untyped-def]
    config = resolve(None, {"nemesis": "kill,partition", "seed": 7, "acks": "1"})
    assert config.nemesis == ("kill", "partition") and config.seed == 7
    path = tmp_path / "test.json"
    path.write_text(json.dumps({"config": config.to_json(), "seed": config.seed}))
    assert validate(load_file(path)) == config


def test_seed_zero_draws_a_seed() -> None:
    assert validate({}).seed > 0
    assert TestConfig().seed == 0


def test_malformed_toml_is_bad_input(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "bad.toml"
    path.write_text("nodes = [\n")
    with pytest.raises(BadInput, match="malformed config"):
        load_file(path)


def test_spark_is_the_default_checker_and_auto_is_still_accepted(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import checkers.engines as engines

    history = tmp_path / "history.jsonl"
    history.write_text('{"index":0}\n')
    assert validate({}).checker == "spark"
    assert validate({"checker": "auto"}).checker == "auto"
    assert engines.engine_named("auto").for_history(history).name == "reference"
    assert engines.engine_named("spark").for_history(history).name == "spark"
    monkeypatch.setattr(engines, "AUTO_SPARK_BYTES", 1)
    assert engines.engine_named("auto").for_history(history).name == "spark"
