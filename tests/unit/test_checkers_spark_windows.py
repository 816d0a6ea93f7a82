"""The fault windows' facts the Spark engine puts together from per-second summaries and the
seconds where each window starts and ends (`checkers.spark_stats.window_facts`) equal the
reference's, which walks every completion (`checkers.stats`): the same summaries are made here in
Python, exactly as Spark's aggregates define them, from random completions and windows."""

from __future__ import annotations

import math
import random
from array import array
from bisect import bisect_left, bisect_right
from collections import defaultdict
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.spark_stats import window_facts
from checkers.stats import _longest_gap


def summaries(completions: list[tuple[float, int, bool]], windows: list[dict[str, Any]]) -> tuple[Any, ...]:
    """What Spark's actions 1 and 2 hand back, computed naively: (t, outcome code, ok send) rows."""
    per_second: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
    ok_by_second: dict[int, list[float]] = defaultdict(list)
    for t, code, ok_send in completions:
        per_second[int(t)][code] += 1
        if ok_send:
            ok_by_second[int(t)].append(t)
    ok_send_seconds, in_second_gaps = {}, {}
    for s, ts in ok_by_second.items():
        ts.sort()
        ok_send_seconds[s] = (ts[0], ts[-1])
        in_second_gaps[s] = max((b - a for a, b in zip(ts, ts[1:], strict=False)), default=None)
    ends: dict[int, dict[int, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0, 0]))
    segments = {}
    for i, w in enumerate(windows):
        start, end = w["start_s"], w["end_s"]
        for s in {math.floor(start), math.floor(end)}:
            for t, code, _ in completions:
                if int(t) == s and start <= t <= end:
                    ends[i][s][code] += 1
            ts = sorted(ok_by_second.get(s, []))
            inside = [(j, t) for j, t in enumerate(ts) if start <= t <= end]
            if inside:
                gaps = [t - ts[j - 1] for j, t in inside if j > 0 and ts[j - 1] >= start]
                segments[(i, s)] = (inside[0][1], inside[-1][1], max(gaps, default=None))
    return per_second, ok_send_seconds, in_second_gaps, ends, segments


def reference(completions: list[tuple[float, int, bool]], windows: list[dict[str, Any]]) -> list[Any]:
    """The reference's own walk (checkers.stats.history_facts) over the same completions."""
    times = sorted(completions)
    completion_times = array("d", (t for t, _, _ in times))
    ok_sends = array("d", (t for t, _, ok in times if ok))
    out = []
    for w in windows:
        lo, hi = bisect_left(completion_times, w["start_s"]), bisect_right(completion_times, w["end_s"])
        inside = [0, 0, 0]
        for _, code, _ in times[lo:hi]:
            inside[code] += 1
        out.append((inside, _longest_gap(ok_sends, w["start_s"], w["end_s"])))
    return out


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32), st.integers(0, 300), st.integers(0, 12), st.floats(0.5, 30.0))
def test_window_facts_equal_the_references_walk(seed: int, n: int, n_windows: int, duration: float) -> None:
    rng = random.Random(seed)
    completions = [
        (round(rng.uniform(0, duration), rng.choice((0, 1, 3, 9))), rng.randrange(3), rng.random() < 0.5)
        for _ in range(n)
    ]
    windows = []
    for _ in range(n_windows):
        start = rng.choice([rng.uniform(0, duration), float(int(rng.uniform(0, duration)))])
        end = rng.choice([start, start + rng.uniform(0, duration), float(math.ceil(start)), start - 0.5])
        windows.append({"start_s": start, "end_s": end})
    window_facts(windows, *summaries(completions, windows))
    got = [([w["ops"]["ok"], w["ops"]["fail"], w["ops"]["info"]], w["longest_gap_s"]) for w in windows]
    assert got == reference(completions, windows)


def test_a_window_without_ok_sends_is_unavailable_throughout() -> None:
    windows = [{"start_s": 1.5, "end_s": 4.25}]
    window_facts(windows, *summaries([(2.0, 1, False), (5.0, 0, True)], windows))
    assert windows[0]["ops"] == {"ok": 0, "fail": 1, "info": 0}
    assert windows[0]["longest_gap_s"] == 2.75
