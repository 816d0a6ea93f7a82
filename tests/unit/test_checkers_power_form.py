"""Verdict power counted from the Parquet form with Arrow (checkers/power_form.py) agrees with the
reference's pass (`==` on the tally's per-second summaries and on results.json's `power`): on a generated history with
faults and planted anomalies, one with consumer groups, silent windows and events on the seconds
where windows end, and a history with malformed lines and an open operation."""

from __future__ import annotations

from pathlib import Path

import pytest

from checkers import power_form
from checkers.parquet import convert
from checkers.power import Asked, evaluate
from checkers.power_history import tally_history
from checkers.spark_stats import nemesis_op
from history.synthetic.generator import generate_ops
from tests.support.history_builder import HistoryBuilder, write_history
from tests.support.power_histories import grouped

ASKED = Asked(rate=50.0, crash_clients=2.0, groups=True, faults=True, recovery_s=1.5)


def _history(path: Path, kind: str) -> None:
    if kind == "generated":
        ops, _ = generate_ops(3000, seed=5, plants={"lost-write": 2, "duplicate": 1}, nemesis_rate=0.01)
        write_history(path, ops)
        return
    b = HistoryBuilder()
    grouped(b)
    if kind == "damaged":
        b.op(process=3, type="invoke", f="send", topic="t0", partition=0, value=77)  # never completes
        b.write(path)
        with path.open("a") as f:
            f.write('{"index": "x", "time": 1}\nnot json\n')
        return
    b.write(path)


@pytest.mark.parametrize("kind", ["generated", "groups", "damaged"])
def test_the_form_tally_equals_the_reference(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "history.jsonl"
    _history(path, kind)
    form = convert(path)
    nemesis = [nemesis_op(row) for row in form.nemesis]
    from_form = power_form.tally(form.operations_path, form.reads_path, nemesis, ASKED)
    reference = tally_history(path, ASKED)
    # The form's tally keeps the bounds' seconds as `Cuts`, the reference's their times: the
    # per-second summaries are the same and so is every figure of `power`.
    assert from_form[0].per_second == reference[0].per_second
    assert (from_form[0].load_start, from_form[0].load_end) == (
        reference[0].load_start,
        reference[0].load_end,
    )
    assert evaluate(*from_form, ASKED) == evaluate(*reference, ASKED)
    assert reference[0].per_second["acked"] and reference[0].per_second["read"]
    if kind != "generated":
        assert sum(n for n, _, _ in reference[0].per_second["commit"].values()) == 6


def test_the_exact_pass_reads_only_the_row_groups_of_its_seconds(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "operations.parquet"
    times = [0, 1, 5, 6, 10, 11]  # seconds, two rows per row group
    table = pa.table(
        {
            "time": pa.array([s * 1_000_000_000 for s in times], pa.int64()),
            "invoke_time": pa.array([s * 1_000_000_000 - 1 for s in times], pa.int64()),
        }
    )
    pq.write_table(table, path, row_group_size=2)
    assert power_form.touching(path, [5]) == [1]
    assert power_form.touching(path, [0, 11]) == [0, 2]
    assert power_form.touching(path, [3, 8]) == []
    pq.write_table(table, path, row_group_size=2, write_statistics=False)
    assert power_form.touching(path, [3]) == [0, 1, 2]  # no statistics: every group is read
