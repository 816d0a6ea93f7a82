"""What QA asked of the report's layout and words: order, folded examples, labels that never
overlap, red only where a replica is wrong, availability, sentences, collapsed allowed anomalies,
and a run cut short said as such."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from harness.report import build_context, write_report
from harness.report.pictures import divergence_table as _divergence_table
from harness.report.pictures import missing_groups as _missing_groups
from harness.report.replicas import Marks, PartitionLogs, Replica
from harness.report.svg import replica_chart
from harness.report.text import availability_text, example_title, weak_evidence
from tests.support.report_runs import make_run, write_evidence

NS = 1_000_000_000


def _results(run: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run / "results.json").read_text())
    return data


def _write_results(run: Path, results: dict[str, Any]) -> None:
    (run / "results.json").write_text(json.dumps(results))


def test_replicas_come_right_after_at_a_glance_and_examples_fold_to_three(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    results = _results(run)
    lost = results["anomalies"]["lost-write"]
    lost["examples"] = (lost["examples"] * 4)[:10]
    lost["count"] = 10
    _write_results(run, results)
    html = write_report(run).read_text()
    order = [html.index(f'id="{s}"') for s in ("stats", "replicas", "timeline", "anomaly-lost-write")]
    assert order == sorted(order)
    section = html[html.index('id="anomaly-lost-write"') :]
    section = section[: section.index("</section>")]
    folded = section.index('<details class="more-examples">')
    assert section[:folded].count('class="example"') == 3
    assert section[folded:].count('class="example"') == 7
    assert "7 more examples" in section


def _label_boxes(svg: str) -> list[tuple[float, float, float, float, str]]:
    """(x0, y0, x1, y1, text) of every <text> in an SVG, 6.6 px a character at 11-13 px fonts."""
    boxes = []
    for m in re.finditer(r'<text x="([\d.]+)" y="([\d.]+)"([^>]*)>(.*?)</text>', svg):
        x, y, attrs = float(m[1]), float(m[2]), m[3]
        text = re.sub(r"<title>.*?</title>", "", m[4])
        width = 6.6 * len(text)
        if 'text-anchor="end"' in attrs:
            x -= width
        elif 'text-anchor="middle"' in attrs:
            x -= width / 2
        boxes.append((x, y - 11, x + width, y + 2, text))
    return boxes


def _kip101_partition() -> tuple[PartitionLogs, dict[str, Marks]]:
    """QA's hw-s4: 188-record logs, epochs 1 and 5 starting at 168 and 178, 20 diverged offsets."""
    logs = PartitionLogs("t0", 0)
    for node, epochs in (("n1", [(0, 0)]), ("n2", [(0, 0), (1, 168), (5, 178)]), ("n3", [(0, 0), (5, 178)])):
        r = Replica(node=node, log_end=188, high_watermark=307 if node == "n1" else 178, epochs=epochs)
        for o in range(188):
            epoch = max(e for e, s in epochs if s <= o)
            new = (node == "n2" and o >= 168) or (node == "n3" and o >= 178)  # truncated, rewritten
            r.records[o] = (1000 + o if new else o, epoch)
        logs.replicas[node] = r
    marks = {
        n: Marks(divergent=set(range(168, 188)), missing_acked=set(range(168 if n == "n2" else 188, 307)))
        for n in logs.replicas
    }
    return logs, marks


def test_replica_picture_labels_never_overlap_and_epochs_stay_readable() -> None:
    logs, marks = _kip101_partition()
    svg = str(replica_chart(logs, marks, "n2"))
    boxes = _label_boxes(svg)
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            overlap = a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]
            assert not overlap, f"{a[4]!r} overlaps {b[4]!r}"
    texts = [b[4] for b in boxes]
    assert "epochs: e0 from 0, e1 from 168, e5 from 178" in texts
    assert any("20 offsets differ" in t and "139 acknowledged records absent" in t for t in texts)
    assert svg.count('class="epochline"') >= 3  # boundaries drawn over the red, not hidden by it


def test_divergence_table_reds_only_the_replica_that_differs() -> None:
    logs, marks = _kip101_partition()
    table = _divergence_table(logs, marks, {168: 168, 178: 178})
    assert table is not None
    first = table["rows"][0]
    assert first["offset"] == 168 and first["acked"] == 168
    assert [c["bad"] for c in first["cells"]] == [False, True, False]  # n2 holds 1168
    row_178 = next(r for r in table["rows"] if r["offset"] == 178)
    assert [c["bad"] for c in row_178["cells"]] == [False, True, True]
    assert _missing_groups(marks) == [
        {"who": "n1, n3", "count": 119, "ranges": "188–306"},
        {"who": "n2", "count": 139, "ranges": "168–306"},
    ]
    # without an acknowledged value, the majority decides
    table = _divergence_table(logs, marks, {})
    assert table is not None
    assert [c["bad"] for c in table["rows"][0]["cells"]] == [False, True, False]


def test_availability_and_weak_evidence_are_said() -> None:
    assert availability_text((7, 60)) == "The cluster accepted writes during only 7 s of 60 s of load."
    assert availability_text((60, 60)) == "The cluster accepted writes in every second of the 60 s of load."
    assert weak_evidence((7, 60), 500).startswith("The evidence is weak: writes succeeded during only 7 s")
    assert weak_evidence((58, 60), 5000) == ""


def test_valid_run_on_little_load_says_the_evidence_is_weak(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", lost=False)
    lines = (run / "history.jsonl").read_text().splitlines()
    # only the first 5 s of sends were acknowledged: later ok sends become info
    kept = []
    for line in lines:
        op = json.loads(line)
        if op.get("f") == "send" and op["type"] == "ok" and op["time"] > 5 * NS:
            op = {**op, "type": "info", "error": "timeout"}
            op.pop("offset", None)
        kept.append(json.dumps(op))
    (run / "history.jsonl").write_text("\n".join(kept) + "\n")
    write_evidence(run)  # as the check of that history writes it
    ctx = build_context(run)
    assert ctx["verdict"] == "valid"
    assert all(not p["affected"] for p in ctx["pictures"])
    assert "<summary>Replicas agree on every partition" in write_report(run).read_text()
    assert ctx["availability"].startswith("The cluster accepted writes during only ")
    assert any(s.startswith("The evidence is weak") for s in ctx["sentences"])


def test_examples_read_as_sentences_and_losses_stand_out() -> None:
    title = example_title(
        "lost-committed-on-replicas",
        {
            "index": 1251,
            "process": 4,
            "topic": "t0",
            "partition": 0,
            "offset": 168,
            "value": 354,
            "leader": "n2",
            "leader_log_end": 188,
            "leader_known": True,
        },
    )
    assert title == (
        "Value 354, acknowledged at offset 168 of t0-0 (process 4, history index 1251), "
        "is missing from the final log of the leader n2, whose log ends at offset 188."
    )
    assert "leader_known" not in example_title("something-new", {"leader_known": True, "x": [1, 2]})


def test_lost_count_card_is_red_and_allowed_anomalies_are_collapsed(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    results = _results(run)
    results["anomalies"]["duplicate"] = {
        "count": 14,
        "effect": "allowed",
        "examples": [{"index": 5, "value": 3, "positions": [{"topic": "t0", "partition": 0, "offset": 1}]}],
    }
    results["explanation"] = ["duplicate x14: allowed (a producer that retries may write twice)"]
    _write_results(run, results)
    ctx = build_context(run)
    assert ("acknowledged, never read back", "3 lost", "bad") in ctx["cards"]
    html = write_report(run).read_text()
    section = html[html.index('id="anomaly-duplicate"') :]
    section = section[: section.index("</section>")]
    assert 'class="anomaly allowed"' in html and "<details>" in section and "open" not in section
    assert "allowed by this test's settings (a producer that retries may write twice)" in section
    # t0-0 is named only by the allowed duplicate: its replicas agree, so it is not drawn first
    assert [p["name"] for p in ctx["pictures"]] == ["t0-1"]


def test_run_of_a_killed_controller_says_it_was_cut_short(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", lost=False)
    (run / "outcome.json").unlink(missing_ok=True)
    (run / "drain.json").unlink(missing_ok=True)
    ops = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    (run / "history.jsonl").write_text(
        "".join(json.dumps(op) + "\n" for op in ops if op["time"] <= 2.9 * NS and op["process"] != "nemesis")
    )
    test = json.loads((run / "test.json").read_text())
    test["config"]["time_limit"] = 60
    (run / "test.json").write_text(json.dumps(test))
    results = _results(run)
    results["valid"] = "unknown"
    results["incomplete"] = ["the final reads did not finish"]
    _write_results(run, results)
    write_evidence(run)
    ctx = build_context(run)
    assert ctx["verdict"] == "unknown"
    assert ctx["sentences"][0].startswith("The verdict is unknown: the run was cut short at 2.")
    assert ctx["sentences"][0].endswith(" s of 60 s (controller died; no final reads).")
    load = dict(ctx["settings"])["load"]
    assert load.startswith("run cut short at 2.") and "of 60 s (controller died; no final reads)" in load
