"""The simulator of `strandline explore`: deterministic, finds each unsafe setting's loss, none with
the safe settings; its drivers agree with the real broker's on the same core decisions."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.config import BrokerConfig, Listener
from broker.fetcher import LeaderFetcher, _Followed, _ReplicaView
from broker.follower import FollowerReplica
from broker.replica_manager import ReplicaManager
from broker.storage.build import build_batch
from explore.schedule import Step, draw_schedule, scripted, tell
from explore.search import search
from explore.settings import SimSettings, safe_settings, unsafe_settings
from explore.simulation import Simulation, simulate
from foundation.config import validate
from harness.commands.explore import config_toml, replay_config
from harness.commands.explore import main as explore_main


def test_the_same_seed_gives_the_same_trace_byte_for_byte() -> None:
    s = SimSettings(truncation="high-watermark")
    import random

    schedule = draw_schedule(random.Random(5), s)
    runs = [simulate(s, schedule, 42, trace=True) for _ in range(2)]
    first, second = ("\n".join(r.trace or []).encode() for r in runs)
    assert first == second and len(first) > 1000
    other = simulate(s, schedule, 43, trace=True)
    assert "\n".join(other.trace or []).encode() != first


def test_the_same_seed_gives_the_same_search() -> None:
    s = SimSettings(truncation="high-watermark", faults=("kill", "restart"))
    a, b = (search(s, 3, budget_s=120, max_schedules=200) for _ in range(2))
    assert a.found is not None and b.found is not None
    assert (a.found.index, a.found.minimal) == (b.found.index, b.found.minimal)
    assert a.schedules == b.schedules


@pytest.mark.parametrize("unsafe", unsafe_settings(), ids=lambda u: u.name)
def test_each_unsafe_setting_loses_acknowledged_writes(unsafe) -> None:  # type: ignore[no-untyped-def]
    result = search(unsafe.settings, 1, budget_s=120, max_schedules=300)
    assert result.found is not None, f"{unsafe.name}: no loss in {result.schedules} schedules"
    outcome = result.found.outcome
    assert outcome.failed
    assert len(result.found.minimal) <= len(result.found.original)


def test_the_safe_settings_lose_nothing() -> None:
    result = search(safe_settings(), 11, budget_s=300, max_schedules=120)
    assert result.found is None, result.found and [f.text for f in result.found.outcome.fired]
    assert result.schedules == 120


def test_high_watermark_restart_then_failover_loses_what_was_acknowledged() -> None:
    """The pre-KIP-101 story, by hand: the followers restart, truncate to their checkpointed
    high watermark, and one of them is elected when the leader's session expires."""
    schedule = (Step(0.0, "restart", "followers"), Step(0.0, "kill", "leader"))
    hw = simulate(SimSettings(truncation="high-watermark"), schedule, 1)
    assert hw.lost and not hw.unknown
    epochs = simulate(SimSettings(truncation="leader-epoch"), schedule, 1)
    assert not epochs.failed and not epochs.unknown and epochs.acked > 10


def test_the_minimal_schedule_is_told_in_numbered_steps_and_is_a_valid_scripted_schedule(
    tmp_path: Path,
) -> None:
    schedule = (
        Step(2.0, "restart", "followers"),
        Step(0.0, "kill", "leader"),
        Step(1.5, "partition", "zk-leader"),
    )
    lines = tell([(step, f"step {i}") for i, step in enumerate(schedule)])
    assert lines == ["1. after 2 s of load, step 0", "2. at once, step 1", "3. 1.5 s later, step 2"]
    steps = scripted(schedule, 10.0)
    assert {"do": "restart", "target": "followers", "topic": "t0", "partition": 0} in steps
    assert {"do": "partition", "grudge": "zk-leader", "topic": "t0", "partition": 0} in steps
    import tomllib

    from nemesis import check_config

    base = validate({"variant": "high-watermark", "seed": 3})
    found = type("F", (), {"minimal": schedule})()
    config = replay_config(base, found)  # type: ignore[arg-type]
    parsed = validate(tomllib.loads(config_toml(config)))
    assert (
        parsed.schedule == config.schedule and parsed.partitions == 1 and parsed.variant == "high-watermark"
    )
    check_config(parsed)


def test_explore_command_prints_the_minimal_schedule_and_exits_1(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from harness.cli import build_parser

    args = build_parser().parse_args(
        [
            "explore",
            "--variant",
            "high-watermark",
            "--no-replay",
            "--budget",
            "60",
            "--seed",
            "2",
            "--store",
            str(tmp_path),
        ]
    )
    assert explore_main(args) == 1
    out = capsys.readouterr().out
    numbered = [line for line in out.splitlines() if line[:1].isdigit() and ". " in line[:4]]
    assert numbered and numbered[0].startswith("1. ") and "acknowledged" in numbered[-1]
    (written,) = tmp_path.glob("explore/*/test.toml")
    assert "schedule = [" in written.read_text()


def test_explore_command_finds_nothing_with_leader_epochs_within_a_small_budget(
    tmp_path: Path, capsys
) -> None:  # type: ignore[no-untyped-def]
    from harness.cli import build_parser

    args = build_parser().parse_args(["explore", "--no-replay", "--budget", "2", "--store", str(tmp_path)])
    assert explore_main(args) == 0
    assert "no loss found" in capsys.readouterr().out


# --- the simulator's drivers against the real broker's, on the same core decisions -------------
logs = st.lists(st.integers(0, 3), min_size=0, max_size=12).map(sorted)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shared=logs,
    own_tail=st.lists(st.integers(0, 3), max_size=5),
    leader_tail=st.lists(st.integers(0, 3), max_size=5),
    hw_back=st.integers(0, 6),
    truncation=st.sampled_from(["leader-epoch", "high-watermark"]),
)
def test_real_and_simulated_followers_take_the_same_actions(
    shared: list[int], own_tail: list[int], leader_tail: list[int], hw_back: int, truncation: str
) -> None:
    """A follower whose log shares a prefix with its leader's becomes a follower, truncates (by
    HW or by epochs, asking the leader as often as it says) and fetches once: on a real
    PartitionLog through broker.fetcher, and on the simulator's SimLog. Same actions, same logs."""
    top = shared[-1] if shared else 0
    own = shared + sorted(top + e for e in own_tail)
    leader = shared + sorted(top + 4 + e for e in leader_tail)  # the leader's later epochs are new
    hw = max(0, len(own) - hw_back)
    with tempfile.TemporaryDirectory() as tmp:
        real = RealFollower(Path(tmp), own, hw, truncation)
        simulated = SimulatedFollower(own, hw, truncation)
        leader_epochs = SimulatedFollower(leader, 0, truncation).sim.brokers[1].log.epochs
        for side in (real, simulated):
            side.start()
            for _ in range(10):
                if not side.follower.asks_epoch:
                    break
                epoch, end = leader_epochs.end_offset_for(side.follower.epoch_request(side.view))
                side.act(side.follower.on_epoch_answer(0, epoch, end, side.view))
            offset = side.view.log_end_offset
            if offset <= len(leader):
                side.act(side.follower.on_fetch_answer(0, len(leader)), leader[offset:], offset)
        assert real.actions == simulated.actions
        assert real.state() == simulated.state()


class RealFollower:
    def __init__(self, tmp: Path, epochs: list[int], hw: int, truncation: str) -> None:
        config = BrokerConfig(
            broker_id=1, listener=Listener("127.0.0.1", 0), log_dirs=(tmp,), truncation=truncation
        )
        self.replicas = ReplicaManager(config, clock=lambda: 0.0)
        self.partition = self.replicas.get_or_create("t0", 0)
        for offset, epoch in enumerate(epochs):
            self.partition.log.append_as_follower(
                build_batch([str(offset).encode()], base_offset=offset, leader_epoch=epoch)
            )
        self.partition.replica.log_end_offset = self.partition.log.log_end_offset
        self.partition.replica.high_watermark = hw
        self.fetcher = LeaderFetcher(2, config, self.replicas, dict)
        self.follower = FollowerReplica(truncation, 2, 99)
        self.view = _ReplicaView(self.partition)
        self.followed = _Followed(self.partition, self.follower, self.view)
        self.actions: list[object] = []

    def start(self) -> None:
        self.act(self.follower.start(self.view))

    def act(self, actions: list, epochs: list[int] | None = None, offset: int = 0) -> None:  # type: ignore[type-arg]
        self.actions.extend(actions)
        records = b"".join(
            build_batch([str(offset + i).encode()], base_offset=offset + i, leader_epoch=e)
            for i, e in enumerate(epochs or [])
        )
        self.fetcher._carry_out(self.followed, actions, records)

    def state(self) -> tuple[int, int, list[tuple[int, int]]]:
        log = self.partition.log
        return log.log_end_offset, self.partition.replica.high_watermark, log.epochs.entries()


class SimulatedFollower:
    def __init__(self, epochs: list[int], hw: int, truncation: str) -> None:
        self.sim = Simulation(SimSettings(truncation=truncation), seed=0)
        self.b = self.sim.brokers[1]
        self.b.log.append(list(range(len(epochs))), epochs)
        self.b.replica.log_end_offset = self.b.log.log_end_offset
        self.b.replica.high_watermark = hw
        self.follower = FollowerReplica(truncation, 2, 99)
        self.view = self.b.view
        self.actions: list[object] = []

    def start(self) -> None:
        self.act(self.follower.start(self.view))

    def act(self, actions: list, epochs: list[int] | None = None, offset: int = 0) -> None:  # type: ignore[type-arg]
        self.actions.extend(actions)
        epochs = epochs or []
        self.sim.carry_out(self.b, actions, list(range(offset, offset + len(epochs))), epochs)

    def state(self) -> tuple[int, int, list[tuple[int, int]]]:
        log = self.b.log
        return log.log_end_offset, self.b.replica.high_watermark, log.epochs.entries()
