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
