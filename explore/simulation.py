"""A deterministic simulation of a cluster of own brokers, on the broker's own sans-IO core.

N brokers hold one partition (t0/0, every broker a replica). Each runs the broker's replication
core — broker.replication.PartitionReplica (leader: HW, ISR, min.insync at produce),
broker.follower.FollowerReplica (truncation in both variants, fetching, out-of-range),
broker.replication.role_change — on a SimLog; a simulated ZooKeeper keeps registrations with
session expiry, the partition state (compare-and-set on its version) and the controller, whose
decisions are broker.controller.reconcile. A seeded network delays, drops and cuts messages;
time is virtual (an event queue); producers send unique values and remember what was acknowledged.
Everything random comes from one `random.Random(seed)`: the same seed gives the same run, event
for event (`trace`).

The drivers here mirror broker.replica_manager, broker.fetcher and broker.zookeeper: where the
real broker decides, the simulation calls the same function.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.replication import Role
from explore.processes import Processes
from explore.replica import Replica
from explore.schedule import Schedule
from explore.settings import SimSettings
from explore.state import Acked, FiredStep
from explore.workload import Workload
from explore.zookeeper import ZooKeeper
from history import logs
from history.columns import VALUES


@dataclass(slots=True)
class Outcome:
    lost: list[Acked]  # acknowledged, missing from the final leader's log at their offset
    divergent: list[tuple[int, str, str]]  # (offset, node, node) holding different records
    unknown: bool  # no leader after the heal: nothing could be read
    acked: int
    sent: int
    sim_ms: float
    events: int
    fired: list[FiredStep]
    trace: list[str] | None

    @property
    def failed(self) -> bool:
        return bool(self.lost or self.divergent)


class Simulation(ZooKeeper, Replica, Processes, Workload):
    """One run: build the cluster, run a schedule, heal, settle, check."""

    # --- a whole run --------------------------------------------------------------------------
    def settled(self) -> bool:
        state = self.zk_state
        if state is None or state.leader < 0:
            return False
        leader = self.brokers[state.leader]
        if not leader.up or leader.replica.role is not Role.LEADER:
            return False
        end = leader.log.log_end_offset
        if leader.replica.high_watermark != end or len(state.isr) != len(self.replicas):
            return False
        return all(b.up and b.log.log_end_offset == end for b in self.brokers.values())

    def run(
        self,
        schedule: Schedule,
        calm_ms: float = 3000.0,
        tail_ms: float = 10_000.0,
        settle_max_ms: float = 40_000.0,
    ) -> Outcome:
        self.boot()
        t = calm_ms
        for step in schedule:
            t += step.wait_s * 1000.0
            self.at(t, self.fire, step, t)
        end = t + tail_ms
        # what is acknowledged after the last fault changes nothing the checks look at
        self.run_until(t + 1000.0)
        self.producing = False
        self.run_until(end)
        self.note("heal: everything")
        self.heal_all()
        self.run_until(end + 1000.0)
        deadline = end + settle_max_ms
        while self.now < deadline and not self.settled():
            self.run_until(min(self.now + 500.0, deadline))
        return self.check()

    def check(self) -> Outcome:
        """The checkers' rules (`history.logs`, which the checkers evaluate too): lost-committed-on-
        replicas against the final leader's log, log-divergence between every two replicas."""
        state = self.zk_state
        unknown = not self.settled()
        lost: list[Acked] = []
        divergent: list[tuple[int, str, str]] = []
        if state is not None and state.leader >= 0 and self.brokers[state.leader].up:
            final = self.brokers[state.leader].log.values
            held = set(final)
            lost = [
                a
                for a in self.acked
                if logs.lost_committed(VALUES, logs.absent_at(final, a.offset, a.value), a.value in held)
            ]
            unknown = unknown and not lost
        replicas = [(b.name, b.log.values) for b in self.brokers.values() if b.up]
        for i, (name_a, values_a) in enumerate(replicas):
            for name_b, values_b in replicas[i + 1 :]:
                # Both logs cover every offset below the shorter one's end (they start at 0).
                offset = logs.first_divergence(values_a, values_b, min(len(values_a), len(values_b)))
                if offset is not None:
                    divergent.append((offset, name_a, name_b))
        for gone in lost[:5]:
            self.note(f"check: value {gone.value} acknowledged at offset {gone.offset} is lost")
        return Outcome(
            lost,
            divergent,
            unknown and not divergent,
            len(self.acked),
            self.sent,
            self.now,
            self.events,
            self.fired,
            self.trace,
        )


def simulate(settings: SimSettings, schedule: Schedule, seed: int, trace: bool = False) -> Outcome:
    return Simulation(settings, seed, trace).run(schedule)
