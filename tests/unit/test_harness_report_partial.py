"""Every run directory gets a page: partial, old or damaged results, and runs that ended early.

Hypothesis draws results.json files with keys missing, values None, lists empty and types wrong (an
older or newer checker, a file cut short); the page must still render and name its verdict. Real
early-failure run directories (made here as `strandline run` leaves them) must say what happened.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.report import build_context, render

VERDICT_WORDS = ("valid", "invalid", "unknown", "unchecked", "refused")

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 10**6), st.floats(allow_nan=False), st.text(max_size=8)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """The value, None, or any other JSON value (a field of another version or type)."""
    return st.one_of(strategy, st.none(), json_values)


counts = st.fixed_dictionaries({}, optional={k: maybe(st.integers(0, 50)) for k in ("ok", "fail", "info")})
latency = st.fixed_dictionaries(
    {}, optional={k: maybe(st.floats(0, 1e4, allow_nan=False)) for k in ("p50", "p95", "p99")}
)
example = st.fixed_dictionaries(
    {},
    optional={
        "index": maybe(st.integers(0, 40)),
        "value": maybe(st.integers(0, 40)),
        "offset": maybe(st.integers(0, 40)),
        "topic": maybe(st.just("t0")),
        "partition": maybe(st.integers(0, 2)),
        "leader": maybe(st.sampled_from(["n1", "n2"])),
        "replicas": maybe(st.lists(st.fixed_dictionaries({"node": st.just("n1"), "value": scalars}))),
        "positions": maybe(st.lists(json_values, max_size=2)),
        "values": maybe(st.lists(json_values, max_size=2)),
    },
)
anomaly = st.fixed_dictionaries(
    {},
    optional={
        "count": maybe(st.integers(0, 30)),
        "examples": maybe(st.lists(st.one_of(example, json_values), max_size=3)),
        "effect": maybe(st.sampled_from(["invalid", "allowed", "unknown"])),
    },
)
anomaly_names = st.sampled_from(
    ["lost-write", "unseen", "log-divergence", "lost-committed-on-replicas", "duplicate", "group-skip", "x"]
)
stats = st.fixed_dictionaries(
    {},
    optional={
        "sends": maybe(counts),
        "polls": maybe(counts),
        "ops_per_s": maybe(st.floats(0, 1e5, allow_nan=False)),
        "latency_ms": maybe(latency),
        "fault_windows": maybe(st.lists(json_values, max_size=2)),
        "replicas": maybe(
            st.dictionaries(
                st.sampled_from(["t0-0", "t0-1"]),
                maybe(
                    st.fixed_dictionaries(
                        {},
                        optional={
                            "divergent": maybe(
                                st.lists(st.lists(st.integers(-2, 60), max_size=3), max_size=3)
                            ),
                            "replicas": maybe(
                                st.lists(
                                    maybe(
                                        st.fixed_dictionaries(
                                            {"node": st.just("n1")}, optional={"absent_acked": json_values}
                                        )
                                    ),
                                    max_size=2,
                                )
                            ),
                        },
                    )
                ),
                max_size=2,
            )
        ),
        "incomplete": maybe(st.lists(st.text(max_size=10), max_size=2)),
    },
)
results_files = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {},
        optional={
            "valid": maybe(st.sampled_from([True, False, "unknown"])),
            "anomalies": maybe(st.dictionaries(anomaly_names, maybe(anomaly), max_size=3)),
            "stats": maybe(stats),
            "checker": maybe(
                st.fixed_dictionaries({"engine": maybe(st.text(max_size=5)), "seconds": scalars})
            ),
            "explanation": maybe(st.lists(json_values, max_size=2)),
            "incomplete": maybe(st.lists(json_values, max_size=2)),
            "fatal": maybe(st.lists(anomaly_names, max_size=2)),
        },
    ),
)
outcomes = st.one_of(
    st.none(),
    json_values,
    st.fixed_dictionaries(
        {},
        optional={
            "status": maybe(st.sampled_from(["completed", "failed", "interrupted", "refused"])),
            "reason": maybe(st.text(max_size=20)),
            "phase": maybe(st.sampled_from(["cluster_up", "topics", "load", "preflight"])),
            "verdict": maybe(st.sampled_from(["valid", "invalid", "unknown"])),
            "timings": maybe(st.dictionaries(st.text(max_size=5), scalars, max_size=2)),
        },
    ),
)
HISTORY = [
    {"index": 0, "time": 10, "process": 0, "type": "invoke", "f": "send", "topic": "t0", "partition": 0, "value": 1},
    {"index": 1, "time": 2_000_000, "process": 0, "type": "ok", "f": "send", "topic": "t0", "partition": 0, "value": 1, "offset": 0},
    {"index": 2, "time": 3_000_000, "process": "nemesis", "type": "invoke", "f": "kill", "value": ["n1"]},
    {"index": 3, "time": 4_000_000, "process": 1, "type": "invoke", "f": "send", "topic": "t0", "partition": 0, "value": 2},
]  # fmt: skip
histories = st.one_of(
    st.none(),
    st.just(""),
    st.integers(0, len(HISTORY)).map(lambda n: "".join(json.dumps(o) + "\n" for o in HISTORY[:n])),
    st.just(json.dumps(HISTORY[0]) + "\n" + json.dumps(HISTORY[1])[:25]),  # a torn last line
)


def verdict_on(page: str) -> str:
    found = re.search(r'data-verdict="([a-z]+)"', page)
    assert found is not None, "the page names no verdict"
    return found.group(1)


def write(run: Path, name: str, content: Any) -> None:
    if content is None:
        (run / name).unlink(missing_ok=True)
    else:
        (run / name).write_text(content if isinstance(content, str) else json.dumps(content))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    results=st.one_of(st.none(), results_files),
    outcome=outcomes,
    history=histories,
    test_json=st.one_of(st.none(), json_values, st.just({"config": {"name": "q", "time_limit": 5}})),
)
def test_any_partial_run_directory_renders_and_names_its_verdict(
    tmp_path: Path, results: Any, outcome: Any, history: str | None, test_json: Any
) -> None:
    run = tmp_path / "q" / "20260101T000000"
    run.mkdir(parents=True, exist_ok=True)
    write(run, "results.json", results)
    write(run, "outcome.json", outcome)
    write(run, "history.jsonl", history)
    write(run, "test.json", test_json)
    page = render(run)
    assert verdict_on(page) in VERDICT_WORDS
    assert "</html>" in page


def test_a_torn_results_file_renders_as_unchecked_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text('{"valid": true, "anom')
    page = render(tmp_path)
    assert verdict_on(page) == "unchecked"
    assert "results.json is unreadable" in page


def _failed_during_setup(run: Path, phase: str, reason: str) -> None:
    """What `strandline run` leaves when the cluster never came up: test.json, harness.log, outcome."""
    run.mkdir(parents=True)
    (run / "test.json").write_text(json.dumps({"config": {"name": "q", "time_limit": 10}, "seed": 1}))
    (run / "harness.log").write_text("cluster up failed\n")
    outcome = {"status": "failed", "reason": reason, "verdict": "unknown", "phase": phase, "timings": {}}
    (run / "outcome.json").write_text(json.dumps(outcome))


def test_a_run_that_failed_during_setup_says_what_happened_and_what_is_missing(tmp_path: Path) -> None:
    run = tmp_path / "q" / "20260101T000000"
    _failed_during_setup(run, "cluster_up", "zookeeper did not start on zk: port 2181 in use")
    context = build_context(run)
    assert context["verdict"] == "unknown"
    assert context["sentences"][0] == (
        "The run failed during set-up (cluster up), before any load: "
        "zookeeper did not start on zk: port 2181 in use."
    )
    page = render(run)
    assert verdict_on(page) == "unknown"
    for missing in ("history.jsonl", "results.json", "data dirs"):
        assert missing in page
    assert "strandline check" not in page  # nothing to check: no history


def test_a_refused_run_names_the_refusal(tmp_path: Path) -> None:
    run = tmp_path / "q" / "20260101T000000"
    _failed_during_setup(run, "preflight", "fault 'delay' cannot run here: tc netem is not available on n1")
    outcome = json.loads((run / "outcome.json").read_text())
    (run / "outcome.json").write_text(json.dumps({**outcome, "status": "refused"}))
    context = build_context(run)
    assert context["verdict"] == "refused"
    assert context["sentences"] == [
        "The run was refused before any cluster started: "
        "fault 'delay' cannot run here: tc netem is not available on n1."
    ]
    assert verdict_on(render(run)) == "refused"


def test_a_run_cut_by_sigkill_before_any_op_says_so(tmp_path: Path) -> None:
    """SIGKILL leaves test.json and an empty history: no outcome.json, no results, no data dirs."""
    run = tmp_path / "q" / "20260101T000000"
    run.mkdir(parents=True)
    (run / "test.json").write_text(json.dumps({"config": {"name": "q", "time_limit": 10}, "seed": 1}))
    (run / "history.jsonl").write_text("")
    context = build_context(run)
    assert context["verdict"] == "unchecked"
    page = render(run)
    assert "The history is empty" in page and "outcome.json" in page


def test_a_report_that_cannot_be_drawn_still_leaves_a_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import harness.report

    def broken(run: Path) -> str:
        raise RuntimeError("a <bug>")

    (tmp_path / "outcome.json").write_text(json.dumps({"status": "completed", "verdict": "invalid"}))
    monkeypatch.setattr(harness.report, "render", broken)
    with pytest.raises(RuntimeError):
        harness.report.write_report(tmp_path)
    page = (tmp_path / "report.html").read_text()
    assert verdict_on(page) == "invalid" and "RuntimeError: a &lt;bug&gt;" in page
