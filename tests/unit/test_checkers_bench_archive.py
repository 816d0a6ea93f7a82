"""`strandline bench checker` says when a check's process wrote Spark's class archive: that one-time
cost (the machine's first Spark process per Java, pyspark install and options) is in its figures."""

from __future__ import annotations

import sys

from checkers.bench import measure
from checkers.spark_cds import SAVING
from harness.bench_checker import breakdown


def _figures(stderr: str) -> dict[str, object]:
    code = f'import sys; print(\'{{"checks": [{{"seconds": 0.1, "timings": {{}}}}]}}\'); sys.stderr.write({stderr!r})'
    return measure([sys.executable, "-c", code], "test")


def test_the_process_that_wrote_the_archive_is_named() -> None:
    wrote, did_not = _figures(SAVING + "\n"), _figures("")
    assert wrote["archived"] is True and did_not["archived"] is False
    assert "wrote Spark's class archive" in breakdown(wrote)
    assert "archive" not in breakdown(did_not)


def test_the_driver_passes_beside_the_rules_are_shown_inside_them_and_the_parts_add_up() -> None:
    timings = {"check": 20.0, "stats": 1.5, "power": 2.0, "beside": 0.5, "evidence": 1.0}
    figures = {"checks": [{"seconds": 21.5, "timings": timings}], "wall": 22.5}
    text = breakdown(figures)
    assert "rules 20.0 (statistics 1.5 and verdict power 2.0 beside them) + waiting for those 0.5" in text
    assert "+ statistics" not in text and "+ verdict power" not in text
    # Without "beside" (the Spark-converted form, the reference) each part is its own term.
    del timings["beside"]
    assert "+ statistics 1.5 + verdict power 2.0" in breakdown(figures)
