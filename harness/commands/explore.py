"""`strandline explore`: search fault schedules in the simulator, print the minimal failing one,
write it as a scripted schedule, and replay it on a real cluster (docs/explore.md).

Exit codes: 1 the simulation found a loss (invalid), 0 none within the budget, 2 bad input,
4 infrastructure (the replay could not run).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from explore.schedule import TARGETS, fault_steps, scripted, tell, to_toml
from explore.search import TIMINGS, Found, search
from explore.settings import FAULTS, SimSettings
from explore.simulation import Outcome
from foundation.config import TestConfig, resolve
from foundation.errors import EXIT_INVALID, EXIT_VALID, BadInput
from harness.commands.run import overrides
from harness.scenarios import EXPLORE_SEED

CALM_S = 10.0  # the replay's calm before the first step: clients connected, load flowing
DEFAULT_FAULTS = ("kill", "restart", "pause", "partition", "clock")
ALIASES = {"lose-unsynced": "power-loss", "disk": "power-loss"}


def sim_faults(nemesis: tuple[str, ...]) -> tuple[str, ...]:
    """The faults the simulator may draw, from `--nemesis` (names as the nemesis spells them)."""
    if not nemesis:
        return DEFAULT_FAULTS
    faults = []
    for name in nemesis:
        base = ALIASES.get(name.split(":")[0], name.split(":")[0])
        if base not in FAULTS:
            raise BadInput(f"the simulator does not model {name!r} (it models {', '.join(FAULTS)})")
        if base not in faults:
            faults.append(base)
    return tuple(faults)


def sim_targets(nemesis: tuple[str, ...]) -> tuple[str, ...]:
    """The roles `--nemesis` aims at (`power-loss:leader`): the search then draws only those targets
    (where a fault has none of them, its usual ones). Other qualifiers (patterns) are not modelled."""
    roles = {target for targets in TARGETS.values() for target in targets}
    aimed = [name.split(":", 1)[1] for name in nemesis if ":" in name]
    return tuple(dict.fromkeys(a for a in aimed if a in roles))


def sim_settings(config: TestConfig) -> SimSettings:
    """The simulated cluster with the test's settings (one partition, every broker a replica)."""
    if config.system != "own":
        raise BadInput("explore simulates the own broker (--system own)")
    try:
        return SimSettings(
            truncation=config.variant,
            acks={"all": -1, "1": 1, "0": 0}[config.acks],
            min_insync_replicas=config.min_insync,
            unclean_leader_election=config.unclean_election,
            eligible_leader_replicas=config.eligible_leader_replicas,
            isr_broker_epoch_check=config.isr_broker_epoch_check,
            election_policy=config.leader_election_policy,
            flush_interval_messages=config.log_flush_interval_messages or None,
            brokers=config.replication_factor,
            session_timeout_ms=config.zookeeper_session_timeout_ms,
            lag_time_max_ms=config.replica_lag_time_max_ms,
            hw_checkpoint_interval_ms=config.replica_high_watermark_checkpoint_interval_ms,
            faults=sim_faults(config.nemesis),
            targets=sim_targets(config.nemesis),
        )
    except ValueError as e:
        raise BadInput(str(e)) from None


def replay_config(config: TestConfig, found: Found) -> TestConfig:
    """The real test that replays the minimal schedule with the same settings."""
    steps = scripted(found.minimal, CALM_S)
    waits = sum(float(s.get("wait", 0)) for s in steps)
    return config.replace(
        topics=1,
        partitions=1,
        nodes=max(config.nodes, config.replication_factor),
        nemesis=[],
        schedule=steps,
        time_limit=waits + 20.0,
        name=f"explore-{config.variant}",
    )


def config_toml(config: TestConfig) -> str:
    """The replay's settings and schedule as a TOML config for `strandline run --config`."""
    keys = ("system", "backend", "nodes", "topics", "partitions", "replication_factor", "variant", "acks",
            "min_insync", "unclean_election", "eligible_leader_replicas", "isr_broker_epoch_check",
            "leader_election_policy", "log_flush_interval_messages", "zookeeper_session_timeout_ms",
            "replica_lag_time_max_ms", "replica_high_watermark_checkpoint_interval_ms",
            "client", "rate", "concurrency", "time_limit", "seed", "name")  # fmt: skip
    lines = []
    for key in keys:
        value = getattr(config, key)
        lines.append(f"{key} = {_toml_value(value)}")
    return "\n".join(lines) + "\n" + to_toml([dict(s) for s in config.schedule])


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


def _loss_text(outcome: Outcome) -> str:
    if outcome.lost:
        first = outcome.lost[0]
        return (
            f"{len(outcome.lost)} acknowledged write(s) are gone from the final leader's log "
            f"(value {first.value} was acknowledged at offset {first.offset})"
        )
    offset, a, b = outcome.divergent[0]
    return f"the replicas diverge: {a} and {b} hold different records at offset {offset}"


def main(args: argparse.Namespace) -> int:
    given = overrides(args)
    config = resolve(args.config, given)
    settings = sim_settings(config)
    seed = config.seed if args.seed is not None else EXPLORE_SEED  # --seed 0: drawn at random
    if args.budget <= 0:
        raise BadInput("--budget must be positive")
    print(
        f"explore: {config.variant}, acks={config.acks}, min.insync.replicas={config.min_insync}, "
        f"unclean election {'on' if config.unclean_election else 'off'}, "
        f"{'eligible leader replicas on, ' if config.eligible_leader_replicas else ''}"
        f"faults {','.join(settings.faults)}, "
        f"seed {seed}, budget {args.budget:g} s",
        flush=True,
    )
    result = search(settings, seed, args.budget)
    sim_s = result.sim_ms / 1000.0
    print(
        f"simulated {result.schedules} schedules ({sim_s:.0f} simulated s); search and shrinking took "
        f"{result.wall_s:.1f} s",
        flush=True,
    )
    found = result.found
    if found is None:
        print("no loss found within the budget")
        return EXIT_VALID
    outcome = found.outcome
    print(
        f"loss found by schedule {found.index} ({len(found.original)} steps), shrunk to "
        f"{fault_steps(found.minimal)} steps in {found.shrink_runs} simulations: "
        f"{len(outcome.lost)} acknowledged writes lost, {len(outcome.divergent)} diverging replica pairs; "
        f"it loses data in {found.robustness} of {TIMINGS} other simulated timings"
    )
    print("minimal schedule (the simulation's run of it):")
    lines = tell([(fired.step, fired.text) for fired in outcome.fired])
    lines.append(f"{len(lines) + 1}. everything heals; {_loss_text(outcome)}")
    for line in lines:
        print(line)
    replay = replay_config(config, found)
    out = Path(config.store) / "explore" / time.strftime("%Y%m%dT%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    (out / "test.toml").write_text(config_toml(replay))
    (out / "trace.txt").write_text("\n".join(outcome.trace or []) + "\n")
    print(f"schedule written: {out / 'test.toml'} (strandline run --config {out / 'test.toml'})")
    if args.no_replay:
        return EXIT_INVALID
    from harness.compose import compose
    from harness.run import run_test

    print("replaying on a real cluster ...", flush=True)
    real = run_test(compose(replay))
    if real.status != "completed":  # refused (2), failed (4) or interrupted: the replay did not run
        print(f"the real run did not run to its verdict ({real.status}: {real.reason})")
        print(real.verdict_line, flush=True)
        return real.exit_code
    lost_too = "lost data too" if real.verdict == "invalid" else f"did not lose data ({real.verdict})"
    print(f"the real run {lost_too}")
    print(real.verdict_line, flush=True)
    return EXIT_INVALID
