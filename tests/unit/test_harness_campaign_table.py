"""The detection table of a campaign: setting x mix, caught in k of n, median time to the first loss."""

from __future__ import annotations

from harness.campaign_table import detection_rows, render, time_to_loss


def test_time_to_loss_is_from_the_first_fault_to_the_first_lost_ack() -> None:
    assert time_to_loss({"stats": {"first_fault_s": 6.5, "first_lost_ack_s": 15}}) == 8.5
    assert time_to_loss({"stats": {"first_fault_s": 6.5, "first_lost_ack_s": 6}}) == 0.0  # same second
    assert time_to_loss({"stats": {"first_fault_s": 6.5, "first_lost_ack_s": None}}) is None
    assert time_to_loss(None) is None


def test_rows_count_caught_runs_per_setting_and_mix() -> None:
    runs = [
        ("acks=1", "all", ("invalid",), 1, "invalid", 9.0),
        ("acks=1", "all", ("invalid",), 2, "valid", None),
        ("acks=1", "all", ("invalid",), 3, "invalid", 13.0),
        ("acks=1", "all", ("invalid",), 4, "skipped", None),
        ("acks=1", "kill:stalled-failover", ("invalid",), 1, "invalid", 4.0),
        ("safe", "all", ("valid",), 1, "valid", None),
    ]
    rows = detection_rows(runs)
    assert [(r.setting, r.mix, r.caught, r.runs, r.seeds) for r in rows] == [
        ("acks=1", "all", 2, 3, [1, 2, 3]),
        ("acks=1", "kill:stalled-failover", 1, 1, [1]),
        ("safe", "all", 0, 1, [1]),
    ]
    assert rows[0].median_to_loss_s == 11.0 and rows[2].median_to_loss_s is None
    text = render(rows)
    assert "2 of 3" in text.splitlines()[1] and "11" in text.splitlines()[1]
    assert text.splitlines()[0].split()[:2] == ["setting", "mix"]
