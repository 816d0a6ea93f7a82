"""The registry of anomalies (`checkers/rules/`): each module's record is what the catalogue, the
verdict, the report and docs/checkers.md take, and its rule evaluates in both algebras."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from checkers import catalogue, verdict
from checkers.rules import ANOMALIES, of_row
from checkers.spark_columns import SQL, columns_of
from harness.report.catalogue import description, severity_rank
from history.columns import VALUES

DOCS = Path(__file__).resolve().parents[2] / "docs" / "checkers.md"


def test_docs_show_each_anomalys_rule_as_its_module_states_it() -> None:
    text = DOCS.read_text().splitlines()
    for anomaly in ANOMALIES:
        assert anomaly.docs_line() in text, f"docs/checkers.md lacks (or has another) {anomaly.docs_line()}"


def test_the_catalogue_the_verdict_and_the_report_take_the_records() -> None:
    assert catalogue.NAMES == tuple(a.name for a in ANOMALIES)
    assert len(set(catalogue.NAMES)) == len(catalogue.NAMES)
    for anomaly in ANOMALIES:
        assert description(anomaly.name) == anomaly.report
        assert severity_rank(anomaly.name) == anomaly.severity
        for v in anomaly.verdict:
            assert v.condition in verdict.CONDITIONS
            assert verdict.Rule(anomaly.name, v.effect, v.condition, v.because) in verdict.RULES
        assert set(anomaly.order) <= set(anomaly.example_fields)
    assert catalogue.MEMBER_COUNTED == ("poll-skip", "nonmonotonic-poll")


def test_each_rule_evaluates_on_plain_values_and_as_sql() -> None:
    """On a row of nulls each rule answers in SQL's three values; as SQL each rule is one expression
    and its example names its fields in order."""
    for anomaly in ANOMALIES:
        assert anomaly in of_row(anomaly.row)
        nulls = anomaly.row(**{f.name: None for f in dataclasses.fields(anomaly.row)})
        assert anomaly.holds(VALUES, nulls) in (True, False, None), anomaly.name
        sql = anomaly.holds(SQL, columns_of(anomaly.row))
        assert isinstance(sql, str) and sql.count("(") == sql.count(")")
        source = anomaly.example_row or anomaly.row
        example = anomaly.example_of(SQL, columns_of(source))
        assert list(example) == list(anomaly.example_fields), anomaly.name


def test_null_logic_is_sqls() -> None:
    assert VALUES.and_(False, None) is False and VALUES.and_(True, None) is None
    assert VALUES.or_(True, None) is True and VALUES.or_(False, None) is None
    assert VALUES.lt(None, 1) is None and VALUES.not_(None) is None
    assert VALUES.coalesce(None, 3) == 3 and VALUES.add(1, None) is None
