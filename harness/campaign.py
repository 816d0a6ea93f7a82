"""Campaigns: a matrix of tests from a TOML file, run one after another within a time budget.

    name = "nightly"            # the campaign's name
    budget = 3600               # seconds for the whole campaign; later tests are skipped past it
    [defaults]                  # any test key for every test: config keys, expect, matrix
    time_limit = 30
    [[test]]
    name = "safe-kill"          # the test name (runs go to <store>/<name>[-<matrix values>]/<time>/)
    nemesis = "kill"            # any config key: a per-entry override
    matrix = { seed = [1, 2], acks = ["all"] }   # every combination is one test
    expect = "valid"            # valid | invalid | unknown | any, or a list of them
                                # (rows are named by their matrix values: "safe-kill seed=2")
    [[test]]
    scenario = "kip-101-truncation"   # a repro scenario: its unsafe run (invalid) and safe run (valid)

The campaign directory `<store>/campaigns/<name>/<time>/` gets `summary.json`, `index.html` (a
table linking each run's report) and `junit.xml` for CI systems. A verdict other than the expected
one fails the campaign (exit 1). A test whose faults cannot run on this machine (`strandline run`
refuses it before any cluster starts) is shown as `refused: <reason>`: neither a pass nor a miss,
counted apart, and a skipped test case in JUnit; so is a run `unknown` because it tested too
little (results.json's `underpowered`: too little load before the first fault or in a fault
window, or a workload option that never happened).
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
import re
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jinja2
from rich.console import Console

from foundation import run_files
from foundation.config import SYSTEM_SETTINGS, TestConfig, validate
from foundation.errors import BadInput
from foundation.toml_file import read_toml
from harness import rundir
from harness.campaign_table import detection_rows, time_to_loss
from harness.compose import compose, precheck
from harness.run import RunOutcome, run_test
from harness.scenarios import scenario as lookup_scenario

log = logging.getLogger(__name__)

VERDICTS = ("valid", "invalid", "unknown")
NOT_RUN = ("refused", "skipped")  # no verdict: refused by the run, or past the budget
ENTRY_KEYS = {"name", "matrix", "expect", "scenario", "setting"}
SETUP_ALLOWANCE_S = 90.0  # cluster up, drain, check, report: added to time_limit when budgeting


@dataclass
class PlannedTest:
    name: str
    config: TestConfig
    expect: tuple[str, ...]
    entry: str  # the [[test]] it came from, for the summary
    settings: dict[str, Any] = field(default_factory=dict)  # the values that vary or matter
    matrix: dict[str, Any] = field(default_factory=dict)  # this row's matrix values
    setting: str = ""  # the row of the detection table (the entry's `setting`, else its name)

    @property
    def label(self) -> str:
        """The row's name on the page, in the summary and in JUnit: 'hw-kill seed=2101'."""
        values = " ".join(f"{k}={_text(v)}" for k, v in self.matrix.items())
        return f"{self.name} {values}" if values else self.name


@dataclass
class TestResult:
    test: PlannedTest
    verdict: str  # valid | invalid | unknown | refused | skipped
    seconds: float = 0.0
    run_dir: Path | None = None
    anomalies: dict[str, int] = field(default_factory=dict)
    reason: str = ""
    time_to_loss_s: float | None = None  # from the first fault to the first lost write's ack
    underpowered: bool = False  # unknown because it tested too little (results.json)

    @property
    def as_expected(self) -> bool:
        """Neither a refused run, nor one that tested too little, nor one past the budget is a miss:
        they count apart."""
        if self.verdict in NOT_RUN or self.underpowered:
            return True
        return "any" in self.test.expect or self.verdict in self.test.expect


@dataclass
class Campaign:
    name: str
    budget: float
    tests: list[PlannedTest]
    source: Path


def _expect(value: Any, where: str) -> tuple[str, ...]:
    values = value if isinstance(value, list) else [value]
    for v in values:
        if v not in (*VERDICTS, "any"):
            raise BadInput(f"{where}: expect must be valid, invalid, unknown or any, got {v!r}")
    return tuple(values)


def _text(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, list | tuple) else str(value)


def _slug(value: Any) -> str:
    text = ",".join(map(str, value)) if isinstance(value, list | tuple) else str(value)
    return re.sub(r"[^A-Za-z0-9_.,=+-]+", "_", text)[:40]


KEY_SETTINGS = (*SYSTEM_SETTINGS, "nemesis", "seed")


def _settings(config: TestConfig) -> dict[str, Any]:
    c = config.to_json()
    out = {k: c[k] for k in KEY_SETTINGS}
    out["nemesis"] = ",".join(config.nemesis) or "none"
    if config.schedule:
        out["nemesis"] = f"scripted ({len(config.schedule)} steps)"
    return out


def load_campaign(path: str | Path, store: str | None = None, checker: str | None = None) -> Campaign:
    """Parse and validate the whole campaign before anything runs (errors name the entry and key).

    `checker` (the command line's) overrides the file's for every test.
    """
    p = Path(path)
    data = read_toml(p, "campaign")
    unknown = sorted(set(data) - {"name", "budget", "defaults", "test", "store"})
    if unknown:
        raise BadInput(
            f"campaign {p}: unknown key {unknown[0]!r} (known: name, budget, store, defaults, test)"
        )
    name = str(data.get("name") or p.stem)
    budget = data.get("budget", 3600)
    if isinstance(budget, bool) or not isinstance(budget, int | float) or budget <= 0:
        raise BadInput(f"campaign {p}: budget must be a positive number of seconds, got {budget!r}")
    if not isinstance(data.get("defaults") or {}, dict):
        raise BadInput(f"campaign {p}: [defaults] must be a table, got {data['defaults']!r}")
    defaults = dict(data.get("defaults") or {})
    try:  # a wrong default is the [defaults]' fault, not the first test's
        validate({k: v for k, v in defaults.items() if k not in ENTRY_KEYS})
    except BadInput as e:
        raise BadInput(f"campaign {p}: [defaults]: {e}") from None
    store = store or data.get("store") or defaults.get("store")
    if store:
        defaults["store"] = store
    entries = data.get("test") or []
    if not isinstance(entries, list):
        raise BadInput(f"campaign {p}: test must be an array of tables ([[test]] entries), got {entries!r}")
    if not entries:
        raise BadInput(f"campaign {p}: no [[test]] entries")
    tests: list[PlannedTest] = []
    for i, entry in enumerate(entries):
        named = (entry.get("name") or entry.get("scenario")) if isinstance(entry, dict) else None
        label = f" ({named})" if named else ""
        where = f"campaign {p}: test[{i}]{label}"
        if not isinstance(entry, dict):
            raise BadInput(f"{where}: expected a table")
        for test in _expand(entry, defaults, where):
            try:
                precheck(test.config)  # fault names, schedules, targets: before any test runs
            except BadInput as e:
                raise BadInput(f"campaign {p}: test[{i}] ({test.label}): {e}") from None
            tests.append(test)
    if checker:
        tests = [dataclasses.replace(t, config=t.config.replace(checker=checker)) for t in tests]
    return Campaign(name=name, budget=float(budget), tests=tests, source=p)


def _expand(entry: dict[str, Any], all_defaults: dict[str, Any], where: str) -> list[PlannedTest]:
    # Any test key may be a default: config keys, expect, name, scenario; a matrix merges by key.
    defaults = {k: v for k, v in all_defaults.items() if k not in ENTRY_KEYS}
    default_matrix = all_defaults.get("matrix") or {}
    if not isinstance(default_matrix, dict):
        raise BadInput(f"{where}: defaults.matrix must be a table of lists")
    entry = {**{k: v for k, v in all_defaults.items() if k in ENTRY_KEYS}, **entry}
    overrides = {k: v for k, v in entry.items() if k not in ENTRY_KEYS}
    matrix = entry.get("matrix") or {}
    if not isinstance(matrix, dict):
        raise BadInput(f"{where}: matrix must be a table of lists")
    if matrix is not default_matrix:
        matrix = {**default_matrix, **matrix}
    axes = []
    for key, values in matrix.items():
        if not isinstance(values, list) or not values:
            raise BadInput(f"{where}: matrix.{key} must be a non-empty list")
        axes.append([(key, v) for v in values])
    combos = [dict(c) for c in itertools.product(*axes)] if axes else [{}]
    out: list[PlannedTest] = []
    if "scenario" in entry:
        s = lookup_scenario(str(entry["scenario"]))
        base_name = str(entry.get("name") or s.name)
        for combo in combos:
            # Both runs of a scenario share one seed: the same faults, two settings.
            seed = int(combo.get("seed", overrides.get("seed", 0)) or 0) or s.config(False).seed
            for safe in (False, True):
                config = s.config(
                    safe, seed=seed, store=defaults.get("store"), checker=defaults.get("checker")
                )
                extra = {k: v for k, v in {**overrides, **combo}.items() if k != "seed"}
                name = f"{base_name}-{'safe' if safe else 'unsafe'}"
                config = config.replace(name=name, **extra) if extra else config.replace(name=name)
                expect = _expect(entry["expect"], where) if "expect" in entry else (s.expected(safe),)
                out.append(PlannedTest(name, config, expect, base_name, _settings(config), combo))
        return out
    if "name" not in entry:
        raise BadInput(f"{where}: needs a name (or a scenario)")
    if "expect" not in entry:
        raise BadInput(f"{where}: needs expect (valid, invalid, unknown or any)")
    expect = _expect(entry["expect"], where)
    for combo in combos:
        suffix = "".join(f"-{_slug(v)}" for k, v in combo.items() if k != "seed")
        name = f"{entry['name']}{suffix}"
        raw = {**defaults, **overrides, **combo, "name": name}
        try:
            config = validate(raw)
        except BadInput as e:
            raise BadInput(f"{where}: {e}") from None
        setting = str(entry.get("setting") or entry["name"])
        out.append(PlannedTest(name, config, expect, str(entry["name"]), _settings(config), combo, setting))
    return out


def _anomaly_counts(outcome: RunOutcome) -> dict[str, int]:
    """Anomalies that counted against the run (results.json's `fatal`; all found when it has none)."""
    results = outcome.results or {}
    anomalies = results.get("anomalies") or {}
    fatal = results.get("fatal")
    return {
        k: int(v.get("count", 0))
        for k, v in anomalies.items()
        if isinstance(v, dict) and v.get("count") and (not isinstance(fatal, list) or k in fatal)
    }


def run_campaign(campaign: Campaign, store: Path, console: Console) -> tuple[Path, list[TestResult]]:
    """Run every test (or skip what the budget no longer allows); write summary, index and JUnit."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    out_dir = store / "campaigns" / campaign.name / stamp
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    results: list[TestResult] = []
    for i, test in enumerate(campaign.tests, start=1):
        elapsed = time.monotonic() - started
        if elapsed + test.config.time_limit + SETUP_ALLOWANCE_S > campaign.budget:
            results.append(TestResult(test, "skipped", reason=f"budget of {campaign.budget:.0f} s spent"))
            console.print(f"[yellow]skipped[/] {test.label}: the budget is spent", highlight=False)
            continue
        console.rule(
            f"{campaign.name} {i}/{len(campaign.tests)}: {test.label} (expect {'|'.join(test.expect)})"
        )
        t0 = time.monotonic()
        try:
            outcome = run_test(compose(test.config), console=console)
        except BadInput:
            raise
        except Exception as e:  # one broken test must not end the campaign
            log.exception("campaign test %s failed", test.name)
            results.append(
                TestResult(test, "unknown", time.monotonic() - t0, reason=f"{type(e).__name__}: {e}")
            )
            continue
        underpowered = bool((outcome.results or {}).get("underpowered")) and outcome.verdict == "unknown"
        result = TestResult(
            test,
            "refused" if outcome.status == "refused" else outcome.verdict,
            time.monotonic() - t0,
            outcome.run_dir,
            _anomaly_counts(outcome),
            outcome.reason or (too_little(outcome.results) if underpowered else ""),
            time_to_loss(outcome.results),
            underpowered,
        )
        results.append(result)
        if result.verdict == "refused":
            console.print(f"[yellow]refused[/] {test.label}: {outcome.reason}", highlight=False)
        elif underpowered:
            console.print(
                f"[yellow]unknown[/] {test.label}: {result.reason} (counted apart)", highlight=False
            )
        else:
            mark = "[green]as expected[/]" if result.as_expected else "[red]NOT as expected[/]"
            console.print(f"{test.label}: {outcome.verdict} ({mark})", highlight=False)
        write_outputs(
            campaign, out_dir, results, time.monotonic() - started
        )  # partial results survive a crash
    write_outputs(campaign, out_dir, results, time.monotonic() - started)
    rundir.point_latest(store / "campaigns" / campaign.name, out_dir)
    return out_dir, results


def summary_json(campaign: Campaign, results: list[TestResult], seconds: float) -> dict[str, Any]:
    return {
        "campaign": campaign.name,
        "source": str(campaign.source),
        "budget": campaign.budget,
        "seconds": round(seconds, 1),
        "as_expected": all(r.as_expected for r in results),
        "counts": {
            **{v: sum(1 for r in results if r.verdict == v) for v in (*VERDICTS, *NOT_RUN)},
            # of the unknown: those that tested too little (too little load, an option never used)
            "underpowered": sum(1 for r in results if r.underpowered),
        },
        "tests": [
            {
                "name": r.test.label,
                "run_name": r.test.name,
                "matrix": r.test.matrix,
                "entry": r.test.entry,
                "settings": r.test.settings,
                "expect": list(r.test.expect),
                "verdict": r.verdict,
                "as_expected": r.as_expected,
                "seconds": round(r.seconds, 1),
                "anomalies": r.anomalies,
                "run_dir": str(r.run_dir) if r.run_dir else None,
                "reason": r.reason,
                "time_to_loss_s": r.time_to_loss_s,
                "underpowered": r.underpowered,
            }
            for r in results
        ],
        "detection": [row.as_json() for row in table(results)],
    }


def table(results: list[TestResult]) -> list[Any]:
    """The detection table's rows (harness/campaign_table.py): setting x mix, caught k of n."""
    return detection_rows(
        [
            (
                r.test.setting or r.test.entry,
                str(r.test.settings.get("nemesis", "")),
                r.test.expect,
                r.test.config.seed,
                r.verdict,
                r.time_to_loss_s,
                r.underpowered,
            )
            for r in results
        ]
    )


def too_little(results: dict[str, Any] | None) -> str:
    """Why a run tested too little, from its results.json's `power` (one line)."""
    power = (results or {}).get("power") or {}
    return "; ".join(power.get("reasons") or []) or "tested too little"


def failure_message(r: TestResult) -> str:
    """'expected valid, got invalid: log-divergence ×1; report: <run>/report.html' (one line for CI)."""
    text = f"expected {'|'.join(r.test.expect)}, got {r.verdict}"
    if r.anomalies:
        text += ": " + ", ".join(f"{k} ×{v}" for k, v in r.anomalies.items())
    elif r.reason:
        text += f": {r.reason}"
    if r.run_dir is not None:
        text += f"; report: {r.run_dir / run_files.REPORT}"
    return text


def junit_xml(campaign: Campaign, results: list[TestResult], seconds: float) -> bytes:
    failures = sum(1 for r in results if not r.as_expected)
    skipped = sum(1 for r in results if r.verdict in NOT_RUN)
    suite = ET.Element(
        "testsuite",
        name=f"strandline.{campaign.name}",
        tests=str(len(results)),
        failures=str(failures),
        errors="0",
        skipped=str(skipped),
        time=f"{seconds:.1f}",
        timestamp=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S"),
    )
    for r in results:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"strandline.{campaign.name}.{r.test.entry}",
            name=r.test.label + ("" if "seed" in r.test.matrix else f" seed={r.test.config.seed}"),
            time=f"{r.seconds:.1f}",
        )
        if r.verdict == "skipped":
            ET.SubElement(case, "skipped", message=r.reason)
        elif r.verdict == "refused":
            ET.SubElement(case, "skipped", message=f"refused: {r.reason}")
        elif r.underpowered:
            ET.SubElement(case, "skipped", message=f"unknown: {r.reason or 'too little load'}")
        elif not r.as_expected:
            failure = ET.SubElement(case, "failure", message=failure_message(r), type="verdict")
            failure.text = "\n".join(
                [f"run: {r.run_dir}", *(f"{k}: {v}" for k, v in r.anomalies.items()), r.reason]
            ).strip()
        if r.run_dir is not None:
            said = f"refused: {r.reason}" if r.verdict == "refused" else f"verdict: {r.verdict} {r.run_dir}"
            ET.SubElement(case, "system-out").text = f"{said}\nreport: {r.run_dir / run_files.REPORT}"
    root = ET.Element("testsuites", name="strandline", tests=str(len(results)), failures=str(failures))
    root.append(suite)
    ET.indent(root)
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="utf-8")


def index_html(campaign: Campaign, results: list[TestResult], seconds: float, out_dir: Path) -> str:
    env = jinja2.Environment(loader=jinja2.PackageLoader("harness", "templates"), autoescape=True)
    rows = []
    for r in results:
        link = os.path.relpath(r.run_dir / run_files.REPORT, out_dir) if r.run_dir is not None else None
        rows.append({"r": r, "link": link})
    return env.get_template("campaign.html.j2").render(
        campaign=campaign,
        rows=rows,
        seconds=seconds,
        ok=all(r.as_expected for r in results),
        refused=sum(1 for r in results if r.verdict == "refused"),
        underpowered=sum(1 for r in results if r.underpowered),
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
    )


def write_outputs(campaign: Campaign, out_dir: Path, results: list[TestResult], seconds: float) -> None:
    rundir.write_json(out_dir / run_files.CAMPAIGN_SUMMARY, summary_json(campaign, results, seconds))
    (out_dir / "junit.xml").write_bytes(junit_xml(campaign, results, seconds))
    (out_dir / run_files.CAMPAIGN_PAGE).write_text(
        index_html(campaign, results, seconds, out_dir), encoding="utf-8"
    )
