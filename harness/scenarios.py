"""The library of reported data-loss scenarios: settings, a scripted fault schedule, expected verdicts.

Each scenario is a bug report turned into a test: an *unsafe* configuration that must lose
acknowledged data (expected `invalid`), and the same faults under the *safe* settings that must
not (expected `valid`). `strandline repro NAME` runs the unsafe one until it reproduces (or its
budget runs out), then the safe one; `strandline demo` runs the seed scenario (kip-101-truncation)
once each way. Schedules use the nemesis's scripted steps (nemesis/schedule.py, docs/faults.md):
`{"wait": s}`, `{"do": fault, "target": ...}`, `{"wait_until": condition, ...}`, `{"heal": "all"}`.

Every scenario runs one topic with one partition, so that the faults aimed at "the leader of t0-0"
hit the partition that carries all the load.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from foundation.config import TestConfig, validate
from foundation.errors import BadInput

P0 = {"topic": "t0", "partition": 0}

# Shared by all scenarios: small, fast, one partition (checked with Spark, as every run by default).
BASE: dict[str, Any] = {
    "system": "own",
    "backend": "netns",
    "nodes": 3,
    "topics": 1,
    "partitions": 1,
    "replication_factor": 3,
    "min_insync": 2,
    "acks": "all",
    "rate": 150.0,
    "concurrency": 6,
    "drain_timeout": 40.0,
    "recover_timeout": 40.0,
}


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str  # the bug, in one line
    story: str  # how the schedule provokes it
    unsafe: dict[str, Any]  # settings that must lose data
    safe: dict[str, Any]  # the same test with the safe settings
    schedule: tuple[dict[str, Any], ...]
    time_limit: float
    budget: float = 120.0  # seconds of attempts for the unsafe run, in repro
    extra: dict[str, Any] = field(default_factory=dict)

    def config(
        self, safe: bool, seed: int = 0, store: str | None = None, checker: str | None = None
    ) -> TestConfig:
        """The TestConfig of the unsafe (safe=False) or safe run; seed 0 draws one."""
        raw = {
            **BASE,
            **self.extra,
            **(self.safe if safe else self.unsafe),
            "name": f"{self.name}-{'safe' if safe else 'unsafe'}",
            "schedule": [dict(s) for s in self.schedule],
            "time_limit": self.time_limit,
            "seed": seed,
        }
        if store is not None:
            raw["store"] = store
        if checker is not None:
            raw["checker"] = checker
        return validate(raw)

    def expected(self, safe: bool) -> str:
        return "valid" if safe else "invalid"


KIP_101_TRUNCATION = Scenario(
    name="kip-101-truncation",
    summary="a restarted follower truncates to its stale checkpointed high watermark, then is elected "
    "leader: acknowledged writes are lost (KAFKA-1211, fixed by KIP-101 leader epochs)",
    story=(
        "Kill one follower and let the leader drop it from the ISR. Wait until the other follower "
        "holds records above the high watermark it last checkpointed. Cut the leader off from the "
        "other brokers, kill that follower and start it again: with high-watermark truncation it cuts "
        "its log back to the stale checkpoint and cannot fetch the rest. Kill the leader: the "
        "truncated follower, the only live member of the ISR, is elected, and the acknowledged "
        "records above its checkpoint are gone. With leader epochs the restarted follower truncates "
        "nothing it cannot confirm with the leader, so nothing acknowledged is lost."
    ),
    unsafe={"variant": "high-watermark"},
    safe={"variant": "leader-epoch"},
    # The follower's checkpoint must still be stale when it is killed: with Kafka's 5 s interval a
    # checkpoint written between the condition and the kill (a few tenths of a second) left it
    # nothing acknowledged to truncate in about one run in twenty. With 60 s no broker checkpoints
    # during the scenario, so the restarted follower always truncates to the stale checkpoint.
    extra={"replica_high_watermark_checkpoint_interval_ms": 60_000},
    schedule=(
        {"wait": 3},
        {"do": "kill", "target": "follower", **P0},
        {"wait": 13},
        {"wait_until": "follower-fetched-past-hw", **P0, "timeout": 20},
        {"do": "partition", "grudge": "leader", **P0},
        {"do": "kill", "target": "follower", **P0},
        {"do": "start", "target": "followers", **P0},
        {"wait": 3},
        {"do": "kill", "target": "leader", **P0},
        {"wait": 5},
        {"heal": "all"},
    ),
    time_limit=38.0,
)

KIP_101_DIVERGENCE = Scenario(
    name="kip-101-divergence",
    summary="a power cut of every broker, then the followers back first: each truncates to its own "
    "stale high-watermark checkpoint, so replicas hold different records at one offset and "
    "acknowledged writes are lost (KIP-101 scenario 2)",
    story=(
        "Power-cut every broker (each fsyncs every append, so no acknowledged record is lost by the "
        "cut itself). Start one follower alone: with high-watermark truncation it cuts its log back "
        "to the high watermark it last checkpointed, and once the controller notices the others are "
        "gone it is elected leader of that shorter log and takes new writes at offsets the others "
        "still hold with other records. Start the rest: each truncates only to its own (higher) "
        "checkpoint and fetches on from there, so the replicas diverge at those offsets and the "
        "records acknowledged above the new leader's checkpoint are gone. With leader epochs nothing "
        "is truncated on restart that the leader has not confirmed, so nothing is lost."
    ),
    unsafe={"variant": "high-watermark"},
    safe={"variant": "leader-epoch"},
    # fsync every append: acknowledged records survive the power cuts, so any loss is truncation's.
    extra={"log_flush_interval_messages": 1},
    schedule=(
        {"wait": 5},
        {"do": "lose-unsynced", "target": "all"},
        # One follower back alone: it becomes a follower of the dead leader and truncates; after
        # the ZooKeeper session timeout (6 s) the controller elects it, the only live ISR member.
        {"do": "start", "target": "follower", **P0},
        {"wait": 9},
        {"do": "start", "target": "all"},
        {"wait": 6},
        {"heal": "all"},
    ),
    time_limit=30.0,
)

ACKS_1_LEADER_CRASH = Scenario(
    name="acks-1-leader-crash",
    summary="with acks=1 the leader acknowledges before any follower has the record; killing it loses them",
    story=(
        "Cut the leader off from its followers (it still serves clients and, with acks=1, keeps "
        "acknowledging), then kill it: a follower that never received those records is elected."
    ),
    unsafe={"acks": "1"},
    safe={"acks": "all"},
    schedule=(
        {"wait": 3},
        {"do": "partition", "grudge": "leader", **P0},
        {"wait": 3},
        {"do": "kill", "target": "leader", **P0},
        {"wait": 4},
        {"heal": "all"},
    ),
    time_limit=18.0,
)

# Cut the leader off until it shrinks the ISR to itself, then cut its power (unsynced writes lost)
# and heal: it is the only ISR member, so a clean election makes it leader with a shorter log.
_LEADER_ALONE_THEN_POWER_LOSS = (
    {"wait": 3},
    {"do": "partition", "grudge": "leader", **P0},
    {"wait": 14},
    {"do": "lose-unsynced", "target": "leader", **P0},
    {"heal": "all"},
)

MIN_ISR_1 = Scenario(
    name="min-isr-1",
    summary="acks=all with min.insync.replicas=1: once the ISR shrinks to the leader alone it keeps "
    "acknowledging alone, and a power loss on it loses those writes",
    story=(
        "Cut the leader off from its followers until it shrinks the ISR to itself; with "
        "min.insync.replicas=1 it goes on acknowledging alone. Power-cut it (unsynced writes lost) and "
        "heal: it is still the only ISR member and is elected with a shorter log. The safe twin "
        "refuses those writes (min.insync.replicas=2) and fsyncs every append, because a power loss on "
        "a sole ISR member loses even older writes without fsync (see kip-966-power-loss)."
    ),
    unsafe={"min_insync": 1},
    safe={"min_insync": 2, "log_flush_interval_messages": 1},
    schedule=_LEADER_ALONE_THEN_POWER_LOSS,
    time_limit=26.0,
)

KIP_966_POWER_LOSS = Scenario(
    name="kip-966-power-loss",
    summary="even with acks=all and min.insync.replicas=2 the ISR may shrink to the leader alone; a power "
    "loss on it without fsync, and its clean re-election, lose writes all replicas had acknowledged "
    "(Kafka's KIP-966 problem)",
    story=(
        "The same faults as min-isr-1 with the safe replication settings: the leader alone in the ISR "
        "loses its unsynced writes and, as the only ISR member, is elected again; the followers "
        "truncate to it. Fsync on every append (log.flush.interval.messages=1) keeps them."
    ),
    unsafe={"log_flush_interval_messages": 0},
    safe={"log_flush_interval_messages": 1},
    schedule=_LEADER_ALONE_THEN_POWER_LOSS,
    time_limit=26.0,
)

KIP_966_LAST_REPLICA_STANDING = Scenario(
    name="kip-966-last-replica-standing",
    summary="the ISR shrinks to the leader alone; its power loss without fsync drops writes every replica "
    "had acknowledged, and as the last replica standing it is elected again with its shorter log "
    "(fixed by KIP-966, Eligible Leader Replicas)",
    story=(
        "Cut the leader off from its followers until it shrinks the ISR to itself (acks=all, "
        "min.insync.replicas=2: it stops acknowledging, but what it acknowledged before is only in "
        "the page cache everywhere). Cut its power and heal: it registers again, no other ISR member "
        "is left, so the controller elects it once more, in a new epoch, and the followers truncate "
        "to its shorter log. With eligible.leader.replicas.enable=true the followers that left the "
        "ISR below min.insync.replicas became eligible leader replicas (the high watermark stood "
        "still since), so the controller elects one of them instead and nothing acknowledged is lost."
    ),
    unsafe={"log_flush_interval_messages": 0, "eligible_leader_replicas": False},
    safe={"log_flush_interval_messages": 0, "eligible_leader_replicas": True},
    schedule=_LEADER_ALONE_THEN_POWER_LOSS,
    time_limit=26.0,
)

KIP_903_EMPTY_DISK = Scenario(
    name="kip-903-empty-disk",
    summary="a follower comes back with an empty disk and, still listed in the ISR, is elected leader: "
    "everything acknowledged is lost (fixed by KIP-903, broker epochs on ISR changes)",
    story=(
        "Cut the power of both followers (without fsync their logs are gone: an empty disk) and cut "
        "the leader off from them; start them again at once: they take their registrations over, "
        "and nothing removes them from the ISR before the leader's replica.lag.time.max.ms. Kill "
        "the leader: when its session expires the controller elects a follower with an empty log, "
        "and the old leader truncates to it. With isr.broker.epoch.check.enable=true ISR membership "
        "belongs to a broker epoch: the controller takes the re-registered followers out of the "
        "ISR, the partition waits offline for its last ISR member, and nothing is lost."
    ),
    unsafe={"isr_broker_epoch_check": False},
    safe={"isr_broker_epoch_check": True},
    # long enough that the restarted followers take their registrations over before their old
    # sessions expire, and that the leader does not drop them from the ISR first
    extra={"zookeeper_session_timeout_ms": 15000, "replica_lag_time_max_ms": 30000},
    schedule=(
        {"wait": 4},
        {"do": "lose-unsynced", "target": "followers", **P0},
        {"do": "partition", "grudge": "leader", **P0},
        {"do": "start", "target": "all"},
        {"wait_until": "brokers-ready", "timeout": 30},
        {"wait": 2},
        {"do": "kill", "target": "leader", **P0},
        {"wait": 25},
        {"heal": "all"},
    ),
    time_limit=55.0,
    budget=150.0,
)

KIP_279_FAST_LEADER_CHANGE = Scenario(
    name="kip-279-fast-leader-change",
    summary="two fast leader changes with leader epochs but KIP-101's one-round truncation leave replicas "
    "with different records at one offset (fixed by KIP-279)",
    story=(
        "Cut the successor (the ISR member elected next) off from the other brokers; the other "
        "follower keeps fetching and gets ahead of it. Restart the leader: the successor is elected "
        "and appends records in its new epoch that nobody can fetch. Kill it: the other follower is "
        "elected in a third epoch, starting at its longer log end. When the old successor returns it "
        "asks for the end of its epoch, which the new leader never had; with OffsetForLeaderEpoch v0 "
        "(replication.truncation=leader-epoch-v0) it cuts back to where the new leader's epoch starts "
        "and keeps its own records below that offset, where the others hold different ones. With "
        "KIP-279 the answer names the epoch it is for and the follower truncates to the end of the "
        "epoch both replicas share."
    ),
    unsafe={"variant": "leader-epoch-v0"},
    safe={"variant": "leader-epoch"},
    schedule=(
        {"wait": 3},
        {"do": "partition", "grudge": "successor", **P0},
        {"wait": 2},
        {"do": "restart", "target": "leader", **P0},
        {"wait": 2},
        {"do": "kill", "target": "leader", **P0},
        {"wait": 10},
        {"heal": "all"},
    ),
    time_limit=32.0,
)

UNCLEAN_ELECTION = Scenario(
    name="unclean-election",
    summary="unclean.leader.election.enable=true elects a replica that fell out of the ISR: "
    "everything it missed is lost",
    story=(
        "Pause one follower until it falls out of the ISR while the others go on acknowledging. "
        "Kill the other follower and the leader, then resume the stale one: an unclean election "
        "makes it leader with a short log, and when the others come back they truncate to it. "
        "With clean elections the partition waits, offline, for an ISR member."
    ),
    unsafe={"unclean_election": True},
    safe={"unclean_election": False},
    schedule=(
        {"wait": 3},
        {"do": "pause", "target": "follower", **P0},
        {"wait": 13},
        {"do": "kill", "target": "followers", **P0},
        {"do": "kill", "target": "leader", **P0},
        {"do": "resume"},
        {"wait": 8},
        {"heal": "all"},
    ),
    time_limit=32.0,
)

BITFLIP_MINORITY = Scenario(
    name="bitflip-minority",
    summary="a bit flip in one replica's log (Jepsen's NATS 2.12 analysis lost acknowledged writes this "
    "way): safe settings survive it; an unclean election of the damaged replica loses data",
    story=(
        "Stop one follower, flip a bit in its log (inside a batch's CRC) and leave it down until the "
        "leader drops it from the ISR. Kill the leader and the other follower, then start the damaged "
        "one alone: its log recovery finds the CRC mismatch and truncates there, never serving the "
        "damaged batch. With unclean elections it is elected with its truncated log and everything "
        "from the flip on is lost (the checkers name it as the replica that held damaged data). With "
        "clean elections the partition waits for an ISR member, and the damaged replica re-fetches "
        "what it cut."
    ),
    unsafe={"unclean_election": True},
    safe={"unclean_election": False},
    schedule=(
        {"wait": 3},
        {"do": "corrupt", "kind": "bitflip", "target": "follower", **P0},
        {"wait": 13},
        {"do": "kill", "target": "followers", **P0},
        {"do": "kill", "target": "leader", **P0},
        {"heal": "corrupt"},
        {"wait": 8},
        {"heal": "all"},
    ),
    time_limit=34.0,
)

KAFKA_16541_EPOCH_CHECKPOINT = Scenario(
    name="kafka-16541-epoch-checkpoint",
    summary="the leader-epoch checkpoint is replaced without fsync (Kafka 3.7.0, KAFKA-15046); an OS "
    "crash empties it, the new leader answers OffsetForLeaderEpoch from the few epochs it rebuilt, "
    "and a returning replica keeps records the others overwrote (fixed by KAFKA-16541)",
    story=(
        "Cut the leader off from its followers: it goes on appending what producers send (never "
        "acknowledged) past where the others stop. Kill it; a follower is elected in epoch 1 and "
        "takes acknowledged writes at the same offsets, over several small segments. Power-cut every "
        "broker (every append is fsynced, so no acknowledged record is lost by the cut) and start "
        "the new leader alone: without the fsync its leader-epoch checkpoint comes back empty, and "
        "recovery, like Kafka's, rebuilds epochs only from the segments past the last recovery "
        "point, so epoch 1 seems to start later than it did. Start the old leader: asked where its "
        "epoch 0 ended, the new leader names that later offset, and the old leader keeps its "
        "unacknowledged epoch-0 tail where the others hold acknowledged epoch-1 records "
        "(log-divergence; elected later, it would serve them as the log). With the checkpoint "
        "fsynced the answer is where epoch 1 really starts, and the old leader truncates there."
    ),
    unsafe={"leader_epoch_checkpoint_fsync": False},
    safe={"leader_epoch_checkpoint_fsync": True},
    # fsync every append: acknowledged records survive the power cuts, so what goes wrong is the
    # epoch checkpoint's; small segments roll several times while epoch 1 is led, so the recovery
    # point passes the segment where epoch 1 starts
    extra={"log_flush_interval_messages": 1, "log_segment_bytes": 8192},
    schedule=(
        {"wait": 3},
        {"do": "partition", "grudge": "leader", **P0},
        {"wait": 4},
        {"do": "kill", "target": "leader", **P0},
        {"heal": "partition"},
        {"wait": 16},
        # every broker loses what it never fsynced (the old leader is down already), then the
        # new leader comes back alone and is elected again, in epoch 2
        {"do": "lose-unsynced", "target": "all"},
        {"do": "start", "target": "leader", **P0},
        {"wait": 8},
        {"heal": "all"},
        {"wait": 6},
    ),
    time_limit=50.0,
    budget=170.0,
)

MEMBERSHIP_KILL = Scenario(
    name="membership-kill",
    summary="partition reassignment while brokers are killed (Jepsen's Redpanda analysis lost writes "
    "only once membership changes joined the kills): the safe settings keep every acknowledged write",
    story=(
        "Add a broker on a spare node. Freeze the successor, kill the leader and thaw the successor "
        "(the failover to a stalled replica); with the old leader still down, move the new leader's "
        "replica onto the added broker: the reassignment finishes without the dead replica, once "
        "the new one is in sync, and the controller moves leadership onto the target set. Start "
        "the dead broker, then decommission a broker while the leader is killed again: its "
        "replicas move to the others and it is stopped once they have. With acks=all and "
        "min.insync.replicas=2 nothing acknowledged is lost; with acks=1 the leader acknowledged "
        "alone what the stalled successor, elected, never had."
    ),
    unsafe={"acks": "1"},
    safe={"acks": "all"},
    extra={"spare_nodes": 1},
    schedule=(
        {"wait": 3},
        {"do": "member", "action": "add"},
        {"do": "kill", "target": "stalled-failover", **P0},
        {"wait": 7},  # the successor is elected (the session timeout after the kill)
        {"do": "member", "action": "move", **P0, "from": "leader", "to": "n4"},
        {"wait": 6},
        {"heal": "all"},
        {"wait_until": "brokers-ready", "timeout": 30},
        {"wait": 2},
        {"do": "member", "action": "decommission"},
        {"do": "kill", "target": "leader", **P0},
        {"wait": 8},
        {"heal": "all"},
        {"wait": 3},
    ),
    time_limit=60.0,
    budget=170.0,
)

# The coordinator link is held longer than a request may take (2 s: the client's retry goes
# through on a new connection); at the heal the held EndTxn is retransmitted (the sender's backoff
# has grown to a few seconds by then) and reaches the coordinator late. The next hold waits until
# the held ones got through: a connection the client gave up on still looks established to the
# broker, and holding it again would swallow the retransmission.
HOLD_COORDINATOR = (
    {"do": "hold", "target": "txn-coordinator"},
    {"wait": 3},
    {"heal": "all"},
    {"wait": 5},
)

KAFKA_17754_DELAYED_END_TXN = Scenario(
    name="kafka-17754-delayed-end-txn",
    summary="a delayed EndTxn ends the producer's next transaction (KAFKA-17754, Jepsen's Bufstream 0.1 "
    "analysis): aborted records become visible and committed ones are lost, until KIP-890 part 2 "
    "(transaction version 2) bumps the producer epoch after every transaction",
    story=(
        "Transactional producers commit and abort transactions continuously. Hold the clients' "
        "connections to the transaction coordinator (their packets are dropped; new connections "
        "pass): a producer's EndTxn sent on a held connection times out, the producer retries it on "
        "a new connection, it succeeds, and the producer goes on with its next transaction, with "
        "the same producer epoch. Release the held connections: the first EndTxn is retransmitted "
        "and reaches the coordinator late, while that next transaction is open. With transaction "
        "version 1 its epoch still matches, so it commits (or aborts) the next transaction early: "
        "records of a transaction the producer then aborts are committed (aborted reads), and "
        "records it writes after the early end belong to no transaction the coordinator knows, so "
        "a later abort takes them away although their transaction committed (lost writes, torn "
        "transactions). With transaction version 2 every EndTxn bumps the producer's epoch (EndTxn "
        "v5, KIP-890 part 2), so the late one carries an old epoch and is fenced."
    ),
    unsafe={"transaction_version": 1},
    safe={"transaction_version": 2},
    extra={
        "workload": "txn",
        "client": "kafka-python",
        # Every producer whose EndTxn is held gets one late EndTxn; it shows when it lands in that
        # producer's next transaction (which is open for a part of the time) and that one then
        # sends to a partition it had not yet (a transaction the coordinator starts afresh, which
        # the producer's own end then commits or aborts alone), polls its own record, or aborts:
        # many producers, many partitions, half of the transactions aborting.
        "partitions": 8,
        "abort_p": 0.5,
        "concurrency": 12,
        "rate": 300.0,
        "request_timeout_ms": 1500,
        "transaction_timeout_ms": 15000,
    },
    schedule=({"wait": 4}, *(HOLD_COORDINATOR * 7)),
    time_limit=62.0,
    budget=170.0,
)

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        KIP_101_TRUNCATION,
        KIP_101_DIVERGENCE,
        ACKS_1_LEADER_CRASH,
        MIN_ISR_1,
        KIP_966_POWER_LOSS,
        KIP_966_LAST_REPLICA_STANDING,
        KIP_903_EMPTY_DISK,
        KIP_279_FAST_LEADER_CHANGE,
        UNCLEAN_ELECTION,
        BITFLIP_MINORITY,
        KAFKA_16541_EPOCH_CHECKPOINT,
        MEMBERSHIP_KILL,
        KAFKA_17754_DELAYED_END_TXN,
    )
}
SEED_SCENARIO = KIP_101_TRUNCATION.name


def scenario(name: str) -> Scenario:
    try:
        return SCENARIOS[name]
    except KeyError:
        raise BadInput(f"unknown scenario {name!r} (known: {', '.join(SCENARIOS)})") from None
