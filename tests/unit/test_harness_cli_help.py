"""`strandline run --help`: real fault names, examples, config-only keys; config typos get a hint."""

from __future__ import annotations

import pytest

from foundation.config import validate
from foundation.errors import BadInput
from harness.cli import build_parser


def run_help(capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--help"])
    return capsys.readouterr().out


def test_run_help_has_examples_and_every_config_only_key(capsys: pytest.CaptureFixture[str]) -> None:
    text = run_help(capsys)
    assert "examples:" in text and "strandline run --config" in text and "docs/running.md" in text
    for key in ("schedule", "idempotence", "log_flush_interval_messages", "drain_timeout",
                "recover_timeout", "leader_election_policy"):  # fmt: skip
        assert key in text, key
    flagged = {"nemesis_interval", "time_limit", "min_insync"}
    section = text.split("config-file-only keys")[1]
    assert not any(k in section for k in flagged)


def test_unknown_config_key_suggests_the_closest() -> None:
    with pytest.raises(BadInput, match="did you mean 'variant'"):
        validate({"varient": "high-watermark"})
    with pytest.raises(BadInput, match=r"unknown key \(see"):
        validate({"zzz": 1})
