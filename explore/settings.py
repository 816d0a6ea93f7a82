"""What a simulated test runs with: the broker's settings, the workload, the faults it may draw."""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.follower import TRUNCATIONS

# The fault vocabulary of the simulator, named as the nemesis names them (docs/faults.md).
FAULTS = ("kill", "restart", "pause", "partition", "power-loss", "clock")


@dataclass(frozen=True, slots=True)
class SimSettings:
    truncation: str = "leader-epoch"
    acks: int = -1  # -1 = all
    min_insync_replicas: int = 2
    unclean_leader_election: bool = False
    election_policy: str = "first-in-isr"
    eligible_leader_replicas: bool = False  # KIP-966 (eligible.leader.replicas.enable)
    isr_broker_epoch_check: bool = False  # KIP-903 (isr.broker.epoch.check.enable)
    flush_interval_messages: int | None = None  # None: never fsync on append (Kafka's default)
    brokers: int = 3
    session_timeout_ms: int = 6000
    lag_time_max_ms: int = 10000
    fetch_wait_max_ms: int = 500
    hw_checkpoint_interval_ms: int = 5000
    # a started broker serves after this long (a loaded 2-core machine: up to 5-6 s)
    startup_ms: tuple[int, int] = (1500, 6000)
    # after registering, a started broker sets up its watches before it sees any partition state
    watch_setup_ms: tuple[int, int] = (200, 3000)
    producers: int = 2
    produce_interval_ms: int = 250  # each producer, between its sends
    request_timeout_ms: int = 30000
    faults: tuple[str, ...] = FAULTS
    # the roles the faults are aimed at (e.g. ("leader",)); empty: each fault's usual targets
    targets: tuple[str, ...] = ()
    max_fault_steps: int = 6
    network_delay_ms: tuple[float, float] = (0.2, 2.0)

    @property
    def elr_min_insync(self) -> int:
        """min.insync.replicas when Eligible Leader Replicas are on; 0: off (broker.eligible)."""
        return self.min_insync_replicas if self.eligible_leader_replicas else 0

    def __post_init__(self) -> None:
        if self.truncation not in TRUNCATIONS:
            raise ValueError(f"truncation must be one of {', '.join(TRUNCATIONS)}, got {self.truncation!r}")
        if self.acks not in (-1, 0, 1):
            raise ValueError(f"acks must be all (-1), 1 or 0, got {self.acks}")
        if not 1 <= self.min_insync_replicas <= self.brokers:
            raise ValueError(f"min.insync.replicas must be 1..{self.brokers}, got {self.min_insync_replicas}")
        if self.brokers < 2:
            raise ValueError("the simulator needs at least 2 brokers")
        unknown = sorted(set(self.faults) - set(FAULTS))
        if unknown:
            raise ValueError(f"unknown faults {unknown}; the simulator models {', '.join(FAULTS)}")


def safe_settings(**changes: object) -> SimSettings:
    """The configuration that must survive every fault (docs/broker-variants.md): leader epochs,
    acks=all, min.insync.replicas=2, RF=3, clean elections — and fsync on every append, since
    a power loss of the leader alone in the ISR loses unflushed records in ZooKeeper-mode Kafka."""
    return SimSettings(**{"flush_interval_messages": 1, **changes})  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class Unsafe:
    """A known-unsafe setting the simulator must catch: its settings and the faults that show it."""

    name: str
    settings: SimSettings = field(default_factory=SimSettings)


def unsafe_settings() -> list[Unsafe]:
    """Each unsafe setting alone, on top of otherwise safe settings."""
    return [
        Unsafe("high-watermark", safe_settings(truncation="high-watermark", faults=("kill", "restart"))),
        Unsafe("acks=1", safe_settings(acks=1, faults=("kill", "pause"))),
        Unsafe(
            "unclean-election",
            safe_settings(unclean_leader_election=True, faults=("kill", "partition")),
        ),
        Unsafe("no-fsync", SimSettings(flush_interval_messages=None, faults=("power-loss", "kill"))),
        # acks=all answered by the leader alone once the ISR shrank to it; its unflushed tail dies
        # with it (a power loss) and, the last replica standing, it is elected again (KIP-966).
        # Aimed at the leader, with ELR on: a loss min.insync.replicas=2 would not have.
        Unsafe(
            "min.insync.replicas=1",
            SimSettings(
                min_insync_replicas=1,
                flush_interval_messages=None,
                eligible_leader_replicas=True,
                faults=("partition", "power-loss"),
                targets=("leader",),
            ),
        ),
    ]
