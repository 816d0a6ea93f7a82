"""The docs a newcomer reads match the code: no stale sentences, no issue numbers, every key."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from foundation.config import TestConfig

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted((ROOT / "docs").glob("*.md"))
README = ROOT / "README.md"

# Sentences that were true once and misled a reader afterwards.
STALE = (
    "have no workload yet",
    "until it learns transactions",
    "a command not built yet",
    "results/queue/latest",
)


def texts() -> list[tuple[str, str]]:
    return [(p.name, p.read_text()) for p in [*DOCS, README]]


@pytest.mark.parametrize("phrase", STALE)
def test_no_stale_phrase(phrase: str) -> None:
    assert [name for name, text in texts() if phrase in text] == []


def test_no_issue_numbers_a_reader_cannot_look_up() -> None:
    found = [
        f"{name}: {m.group(0)}"
        for name, text in texts()
        for m in re.finditer(r"\bissues? ?#?\d+", text, re.IGNORECASE)
    ]
    assert found == []


def test_every_config_key_is_documented_in_running_md() -> None:
    section = (ROOT / "docs" / "running.md").read_text().split("### Every config key")[1]
    table = section.split("\n### ")[0]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    documented = {k for row in rows for k in re.findall(r"`([a-z_]+)`", row.split("|")[1])}
    missing = [f.name for f in dataclasses.fields(TestConfig) if f.name not in documented]
    assert missing == []


def test_readme_lists_every_doc_and_every_exit_code() -> None:
    readme = README.read_text()
    assert [p.name for p in DOCS if f"docs/{p.name}" not in readme] == []
    codes = (ROOT / "docs" / "exit-codes.md").read_text()
    for code in re.findall(r"^\| (\d+) \|", codes, re.MULTILINE):
        assert re.search(rf"\b{code}\b", readme.split("Exit codes:")[1].split("\n\n")[0]), code


def test_readme_first_screen_says_how_to_test_your_own_system_and_cluster() -> None:
    first_screen = "\n".join(README.read_text().splitlines()[:25])
    assert "--system mysystem.toml" in first_screen and "docs/systems.md" in first_screen
    assert "--backend ssh" in first_screen


def test_version_is_printed(capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import build_parser

    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["--version"])
    assert e.value.code == 0 and re.fullmatch(r"strandline \S+\n", capsys.readouterr().out)
