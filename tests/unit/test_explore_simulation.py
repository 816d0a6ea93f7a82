"""The simulator of `strandline explore`: deterministic, finds each unsafe setting's loss, none with
the safe settings; its drivers agree with the real broker's on the same core decisions."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.config import BrokerConfig, Listener
from broker.fetcher import FollowingBroker, LeaderFetcher, _Followed
from broker.follower import FollowerReplica, ReplicaView
from broker.partition_state import PartitionState
from broker.replica_manager import ReplicaManager
from broker.replication import WriteIsr
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


@pytest.mark.parametrize(
    ("status", "verdict", "exit_code", "says"),
    [
        ("completed", "invalid", 1, "the real run lost data too"),
        ("failed", "unknown", 4, "the real run did not run to its verdict (failed: no cluster)"),
    ],
)
def test_explore_replays_the_written_schedule_and_reports_the_real_verdict(  # type: ignore[no-untyped-def]
    tmp_path: Path, capsys, monkeypatch, status: str, verdict: str, exit_code: int, says: str
) -> None:
    """The replay path, up to the real run (tests/integration/test_explore_replay.py runs it for
    real): the run it starts is the written test.toml, and its verdict closes the output."""
    import tomllib

    import harness.run
    from harness.cli import build_parser

    started = []

    def run_test(test, **_):  # type: ignore[no-untyped-def]
        started.append(test.config)
        return harness.run.RunOutcome(
            run_dir=tmp_path / "real",
            verdict=verdict,
            status=status,
            reason="no cluster",
            exit_code=exit_code,
        )

    monkeypatch.setattr(harness.run, "run_test", run_test)
    argv = ["explore", "--variant", "high-watermark", "--nemesis", "kill,restart", "--seed", "3"]
    args = build_parser().parse_args([*argv, "--budget", "60", "--store", str(tmp_path)])
    assert explore_main(args) == exit_code
    out = capsys.readouterr().out.splitlines()
    (written,) = tmp_path.glob("explore/*/test.toml")
    (replayed,) = started
    assert replayed == validate({**tomllib.loads(written.read_text()), "store": str(tmp_path)})
    assert replayed.schedule and replayed.nemesis == () and replayed.variant == "high-watermark"
    assert out[-3:] == ["replaying on a real cluster ...", says, f"verdict: {verdict} {tmp_path / 'real'}"]


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
        self.fetcher = LeaderFetcher(2, FollowingBroker(config, self.replicas, dict))
        self.follower = FollowerReplica(truncation, 2, 99)
        self.view = ReplicaView(self.partition)
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


leader_ops = st.lists(
    st.one_of(
        st.tuples(st.just("produce"), st.integers(0, 0)),
        st.tuples(st.just("fetch"), st.integers(2, 3), st.floats(0, 1)),
        st.tuples(st.just("tick"), st.sampled_from([100, 900, 4000, 12000])),
    ),
    max_size=25,
)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(ops=leader_ops, min_insync=st.integers(1, 3))
def test_real_and_simulated_leaders_take_the_same_actions(ops: list[tuple], min_insync: int) -> None:  # type: ignore[type-arg]
    """A leader fed the same produces (acks=1), follower fetches and timer ticks, through the real
    ReplicaManager on a PartitionLog and through the simulator's driver on a SimLog: the same
    high watermarks, ISR writes (all lost here, as a lost compare-and-set), log ends and answers."""
    with tempfile.TemporaryDirectory() as tmp:
        real = asyncio.run(_real_leader(Path(tmp), ops, min_insync))
    assert real == _simulated_leader(ops, min_insync)


STATE = PartitionState(leader=1, leader_epoch=0, isr=(1, 2, 3), replicas=(1, 2, 3), zk_version=0)


async def _real_leader(tmp: Path, ops: list[tuple], min_insync: int) -> list[tuple]:  # type: ignore[type-arg]
    config = BrokerConfig(
        broker_id=1, listener=Listener("127.0.0.1", 0), log_dirs=(tmp,), min_insync_replicas=min_insync
    )
    clock = [1000.0]
    replicas = ReplicaManager(config, clock=lambda: clock[0])
    writes: list[tuple[int, ...]] = []

    async def isr_writer(topic: str, index: int, action: WriteIsr) -> int | None:
        writes.append(action.state.isr)
        return None

    replicas.isr_writer = isr_writer
    replicas.apply_state("t0", 0, STATE)
    partition = replicas.partitions[("t0", 0)]
    seen = []
    for op in ops:
        answer: tuple = ()  # type: ignore[type-arg]
        if op[0] == "produce":
            result = await replicas.produce("t0", 0, build_batch([b"1"]), 1, 1000)
            answer = (result.error, result.base_offset)
        elif op[0] == "fetch":
            offset = int(op[2] * partition.log.log_end_offset)
            error, _ = replicas.read(partition, op[1], offset, 1 << 20)
            answer = (error,)
        else:
            clock[0] += op[1]
            replicas.tick()
        for _ in range(3):
            await asyncio.sleep(0)  # the ISR writes run as tasks
        r = partition.replica
        seen.append((answer, r.high_watermark, tuple(r.isr), tuple(writes), partition.log.log_end_offset))
    return seen


def _simulated_leader(ops: list[tuple], min_insync: int) -> list[tuple]:  # type: ignore[type-arg]
    sim = Simulation(SimSettings(acks=1, min_insync_replicas=min_insync), seed=0)
    sim.now = 1000.0
    b = sim.brokers[1]
    writes: list[tuple[int, ...]] = []

    def write_isr(broker: object, action: WriteIsr) -> None:
        writes.append(action.state.isr)
        b.replica.on_isr_write_failed()

    sim.write_isr = write_isr  # type: ignore[method-assign]
    sim.apply_state(b, STATE)
    seen = []
    for op in ops:
        answers: list[tuple] = []  # type: ignore[type-arg]
        if op[0] == "produce":
            sim.produce(b, 1, lambda error, offset, out=answers: out.append((error, offset)))
        elif op[0] == "fetch":
            offset = int(op[2] * b.log.log_end_offset)
            sim.serve_fetch(b, op[1], 0, offset, lambda error, *rest, out=answers: out.append((error,)))
            answers = answers or [(0,)]  # parked at the log end: no error
        else:
            sim.now += op[1]
            sim._tick(b, b.tick_gen)
        r = b.replica
        seen.append(
            (
                answers[0] if answers else (),
                r.high_watermark,
                tuple(r.isr),
                tuple(writes),
                b.log.log_end_offset,
            )
        )
    return seen


def test_a_restarted_leader_never_leads_its_old_epoch_again() -> None:
    """Without fsync, one leader's power loss loses nothing: the controller sees it registered
    again and elects another ISR member in a new epoch (ZooKeeper-mode Kafka). Once the ISR has
    shrunk to that leader alone, the same power loss loses what it acknowledged (KIP-966's last
    replica standing), with min.insync.replicas=1 and 2 alike."""
    power_loss = (Step(0.0, "power-loss", "leader"), Step(0.0, "start", "all"))
    outcome = simulate(SimSettings(), power_loss, 1, trace=True)
    assert not outcome.failed and not outcome.unknown
    assert any("clean election of 2 (epoch 1" in line for line in outcome.trace or [])
    alone = (Step(0.0, "partition", "leader"), Step(14.0, "power-loss", "leader"))
    for min_insync in (1, 2):
        assert simulate(SimSettings(min_insync_replicas=min_insync), alone, 1).lost


def test_eligible_leader_replicas_survive_the_last_replica_standing() -> None:
    """KIP-966: with ELR the same power loss loses nothing when min.insync.replicas=2 (the HW
    stood still once the ISR shrank, and an eligible follower is elected); with
    min.insync.replicas=1 the ELR stays empty and the leader's lone acknowledgements are lost."""
    alone = (Step(0.0, "partition", "leader"), Step(14.0, "power-loss", "leader"))
    for seed in (1, 2, 3):
        safe = simulate(SimSettings(eligible_leader_replicas=True), alone, seed)
        assert not safe.failed and not safe.unknown and safe.acked > 10
        assert simulate(SimSettings(eligible_leader_replicas=True, min_insync_replicas=1), alone, seed).lost


def test_the_broker_epoch_check_keeps_an_empty_disk_follower_from_being_elected() -> None:
    """KIP-903: the followers lose their unsynced logs, come back cut off from the leader and stay
    in the ISR; the leader dies and an empty follower is elected. With the check they leave the ISR."""
    schedule = (
        Step(0.0, "power-loss", "followers"),
        Step(0.0, "partition", "leader"),
        Step(0.0, "start", "all"),
        Step(7.0, "kill", "leader"),
    )
    slow = {"lag_time_max_ms": 30000, "session_timeout_ms": 15000}
    for seed in (1, 2):
        assert simulate(SimSettings(**slow), schedule, seed).lost  # type: ignore[arg-type]
        safe = simulate(SimSettings(isr_broker_epoch_check=True, **slow), schedule, seed)  # type: ignore[arg-type]
        assert not safe.failed and not safe.unknown


def test_fast_leader_changes_diverge_with_v0_truncation_only() -> None:
    """KIP-279, as explore found it: the successor n2 is cut off, the leader restarts (n2 leads an
    epoch nobody can fetch), n2 dies (n3 leads a third epoch from its longer log)."""
    schedule = (
        Step(0.0, "partition", "n2"),
        Step(0.5, "restart", "leader"),
        Step(0.4, "power-loss", "leader"),
    )
    for seed in (1, 2, 3):
        assert simulate(safe_settings(truncation="leader-epoch-v0"), schedule, seed).divergent
        fixed = simulate(safe_settings(truncation="leader-epoch"), schedule, seed)
        assert not fixed.failed and not fixed.unknown


def test_explore_finds_the_min_insync_1_loss_that_eligible_leader_replicas_prevent_at_2() -> None:
    """With faults aimed at the leader (partition, power loss; no fsync), the search finds the
    min.insync.replicas=1 loss: the leader, cut off, shrinks the ISR to itself, acknowledges alone,
    and loses those writes with its power. With min.insync.replicas=2 and ELR nothing is lost."""
    aimed = {"faults": ("partition", "power-loss"), "targets": ("leader",), "eligible_leader_replicas": True}
    found = search(SimSettings(min_insync_replicas=1, **aimed), 1, budget_s=120, max_schedules=300).found  # type: ignore[arg-type]
    assert found is not None and found.outcome.lost and len(found.minimal) <= 3
    assert [s.fault for s in found.minimal if s.fault != "heal"] == ["partition", "power-loss"]
    clean = search(SimSettings(min_insync_replicas=2, **aimed), 1, budget_s=120, max_schedules=100)  # type: ignore[arg-type]
    assert clean.found is None and clean.schedules == 100
