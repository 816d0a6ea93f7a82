"""One vocabulary: the fault names, seeds, Spark flags, defaults and examples of every `--help`."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from foundation.errors import BadInput
from harness.cli import build_parser
from nemesis.schedule import alias_text, available, nemesis_names, parse_specs

ROOT = Path(__file__).resolve().parents[2]
PARSER = build_parser()
COMMANDS = dict(PARSER.commands)
# The commands that judge runs, and so choose a Spark: the same two flags in each.
CHECKING = ("run", "check", "campaign", "repro", "demo", "explore", "shrink", "analyze")


def help_of(command: argparse.ArgumentParser) -> str:
    return " ".join(command.format_help().split())  # argparse wraps; compare words


def test_fault_names_agree_in_help_error_and_docs() -> None:
    names = nemesis_names()
    assert names[:2] == ["none", "all"] and "clock-reset" not in names
    assert set(names) - {"none", "all"} == set(available()) - {"clock-reset"}
    nemesis = next(a for a in COMMANDS["run"]._actions if a.dest == "nemesis").help or ""
    assert ", ".join(names) in nemesis and alias_text() in nemesis
    with pytest.raises(BadInput) as e:
        parse_specs(["nope"])
    assert f"available: {', '.join(names)};" in str(e.value)
    with pytest.raises(BadInput, match="clock-reset is a scripted step"):
        parse_specs(["clock-reset"])
    assert parse_specs(["none"]) == []
    faults = (ROOT / "docs" / "faults.md").read_text().split("## Names accepted by `--nemesis`")[1]
    table = faults.split("\n\n")[2]
    documented = [re.match(r"\| `([a-z-]+)`", row).group(1) for row in table.splitlines()[2:]]  # type: ignore[union-attr]
    assert sorted(documented) == sorted(names)
    for alias in alias_text().split(", "):
        assert f"`{alias.split('=')[0]}`" in faults.split("\n\n")[1] + table


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help_shows_every_default_and_an_example_the_parser_takes(name: str) -> None:
    command = COMMANDS[name]
    text = command.format_help()
    for action in command._actions:
        if isinstance(action, argparse._HelpAction) or action.dest == "verbose":
            continue
        assert action.help, f"{name} {action.dest}: no help"
        takes_value = action.nargs != 0 and action.option_strings
        if takes_value:
            shown = command._get_formatter()._get_help_string(action)  # type: ignore[attr-defined]
            assert "default" in shown, f"{name} {action.option_strings}: default not shown"
    examples = [
        line.split("#")[0].strip()
        for line in text.split("examples:\n")[1].splitlines()
        if line.startswith("  strandline ")
    ]
    assert examples, f"{name}: no example"
    for example in examples:
        args = PARSER.parse_args(shlex.split(example)[1:])
        assert args.command == name, example


def test_seed_means_the_same_in_every_command() -> None:
    for name in ("run", "repro", "demo", "explore"):
        seed = next(a for a in COMMANDS[name]._actions if a.dest == "seed")
        assert "0: drawn at random" in (seed.help or ""), name
    assert "default 101" in help_of(COMMANDS["demo"]) and "default 1)" in help_of(COMMANDS["explore"])


def test_explore_help_names_its_own_fault_default() -> None:
    from explore.settings import FAULTS
    from harness.commands.explore import DEFAULT_FAULTS

    text = help_of(COMMANDS["explore"])
    assert f"(default: {','.join(DEFAULT_FAULTS)})" in text and ", ".join(FAULTS) in text
    assert "(default: none)" not in text


@pytest.mark.parametrize("name", CHECKING)
def test_every_checking_command_takes_the_same_spark_flags(name: str) -> None:
    flags = {s for a in COMMANDS[name]._actions for s in a.option_strings}
    assert {"--spark-master", "--spark-remote"} <= flags


def test_spark_master_flag_reaches_the_config_of_every_test(monkeypatch: pytest.MonkeyPatch) -> None:
    from foundation.config import resolve, validate
    from harness.cli import export_spark_flags
    from harness.commands.run import overrides

    monkeypatch.delenv("STRANDLINE_SPARK_MASTER", raising=False)
    assert validate({}).spark_master == "local[*]"
    args = PARSER.parse_args(["run", "--spark-master", "spark://h:7077"])
    assert resolve(None, overrides(args)).spark_master == "spark://h:7077"
    args = PARSER.parse_args(["repro", "kip-101-truncation", "--spark-master", "spark://h:7077"])
    export_spark_flags(args)  # repro, demo: the scenario's config, built later, takes it
    from harness.scenarios import scenario

    assert scenario("kip-101-truncation").config(False).spark_master == "spark://h:7077"
    assert validate({"spark_master": "local[2]"}).spark_master == "local[2]"  # a file's key wins


def test_verbose_works_after_the_command_too() -> None:
    assert PARSER.parse_args(["check", "results/latest", "-v"]).verbose is True
    assert PARSER.parse_args(["-v", "check", "results/latest"]).verbose is True
    assert PARSER.parse_args(["check", "results/latest"]).verbose is False
