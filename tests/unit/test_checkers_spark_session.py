"""How many shuffle partitions a check of a history of a given size runs with."""

from __future__ import annotations


def test_shuffle_partitions_follow_the_history_size() -> None:
    from checkers.spark_session import partitions_for

    assert partitions_for(20_000, "local[2]") == 2
    assert partitions_for(1_500_000, "local[2]") == 3
    assert partitions_for(10_000_000, "local[2]") == 8  # the session's own: 4 per core
    assert partitions_for(10_000_000, "local[1]") == 7  # one per 1,500,000 operations beyond it
    assert partitions_for(100_000_000, "local[2]") == 67
