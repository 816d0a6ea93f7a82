"""What each anomaly means to a reader of the report, and which are the most serious: each
anomaly's record says it (`checkers/rules/`: `Anomaly.report`, `Anomaly.severity`)."""

from __future__ import annotations

from checkers.catalogue import BY_NAME


def description(name: str) -> str:
    """The reader's text for an anomaly ('' for a name no checker knows)."""
    anomaly = BY_NAME.get(name)
    return anomaly.report if anomaly is not None else ""


def severity_rank(name: str) -> int:
    """0 for the most serious; a name no checker knows comes last."""
    anomaly = BY_NAME.get(name)
    return anomaly.severity if anomaly is not None else max(a.severity for a in BY_NAME.values()) + 1


def sentence(text: str) -> str:
    """'an acked send' -> 'An acked send.'"""
    text = text.strip()
    return (text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")) if text else ""
