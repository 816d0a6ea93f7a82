"""The KAFKA-17754 repro both ways on a real netns cluster of own brokers: with transaction
version 1 the held-back EndTxn ends the producer's next transaction (invalid: aborted reads,
precommitted reads, lost writes or torn transactions), with version 2 it is fenced (valid).

About three minutes on 2 cores: `slow` (`make test-all`). CI checks the mechanism itself, a late
EndTxn against one broker of each version, in tests/integration/test_broker_transactions.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from harness.repro import reproduce
from harness.scenarios import scenario

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]


def test_kafka_17754_delayed_end_txn_both_ways(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRANDLINE_STATE_DIR", str(tmp_path / "state"))
    result = reproduce(
        scenario("kafka-17754-delayed-end-txn"),
        seed=31,
        store=str(tmp_path / "store"),
        console=Console(quiet=True),
        checker="reference",
    )
    summary = result.summary()
    assert summary["reproduced"], summary
    unsafe = result.unsafe[-1].outcome.results or {}
    assert set(unsafe.get("fatal") or []) <= {
        "aborted-read", "precommitted-read", "lost-write", "torn-transaction", "unseen", "poll-skip",
    }, unsafe.get("fatal")  # fmt: skip
    assert result.safe is not None and result.safe.verdict == "valid", summary
