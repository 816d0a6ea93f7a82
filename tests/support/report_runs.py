"""A hand-written run directory for the report's tests: a KIP-101 style loss on t0-1 (kafka.record batches)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

from kafka.record.default_records import DefaultRecordBatchBuilder

from checkers import evidence
from checkers.evidence_reference import gather
from checkers.replica_logs import check_replica_logs
from checkers.stats import history_facts
from history.reader import iter_ops

NS = 1_000_000_000


def _batch(base_offset: int, epoch: int, values: list[Any]) -> bytes:
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i, v in enumerate(values):
        b.append(i, timestamp=1_700_000_000_000, key=None, value=str(v).encode(), headers=[])
    buf = bytearray(b.build())
    struct.pack_into(">q", buf, 0, base_offset)  # baseOffset and partitionLeaderEpoch are outside the CRC
    struct.pack_into(">i", buf, 12, epoch)
    return bytes(buf)


def write_replica(
    data: Path,
    topic: str,
    partition: int,
    batches: list[tuple[int, int, list[Any]]],
    hw: int,
    epochs: list[tuple[int, int]],
) -> None:
    pdir = data / f"{topic}-{partition}"
    pdir.mkdir(parents=True, exist_ok=True)
    (pdir / "00000000000000000000.log").write_bytes(b"".join(_batch(*b) for b in batches))
    (pdir / "leader-epoch-checkpoint").write_text(
        "0\n" + f"{len(epochs)}\n" + "".join(f"{e} {s}\n" for e, s in epochs)
    )
    ckpt = data / "replication-offset-checkpoint"
    lines = ckpt.read_text().splitlines()[2:] if ckpt.exists() else []
    lines.append(f"{topic} {partition} {hw}")
    ckpt.write_text("0\n" + f"{len(lines)}\n" + "".join(x + "\n" for x in lines))


def make_run(run: Path, *, lost: bool = True, evil: bool = False) -> Path:
    """A 30 s run: 2 partitions; kill n2 at 10 s, restart at 12 s; kill n1 (leader) at 20 s."""
    run.mkdir(parents=True, exist_ok=True)
    config = {
        "name": "queue",
        "system": "own",
        "backend": "netns",
        "nodes": 3,
        "topics": 1,
        "partitions": 2,
        "replication_factor": 3,
        "variant": "high-watermark" if lost else "leader-epoch",
        "acks": "all",
        "min_insync": 2,
        "unclean_election": False,
        "nemesis": ["kill"],
        "nemesis_interval": 10.0,
        "time_limit": 25.0,
        "rate": 60.0,
        "concurrency": 4,
        "client": "kafka-python",
        "seed": 7,
        "checker": "reference",
        "schedule": [],
    }
    (run / "test.json").write_text(json.dumps({"config": config, "seed": 7}))
    ops: list[dict[str, Any]] = []

    def add(t: float, **op: Any) -> dict[str, Any]:
        rec = {"index": len(ops), "time": int(t * NS), **op}
        ops.append(rec)
        return rec

    offsets = {0: 0, 1: 0}
    acked: dict[int, list[tuple[int, int]]] = {0: [], 1: []}
    lost_values: list[int] = []
    lost_idx: list[int] = []
    value = 0
    read_upto = 0  # partition 0's records the reader has polled
    t = 0.05
    nemesis = [
        (10.0, "kill", ["n2"]),
        (12.0, "start", ["n2"]),
        (20.0, "kill", {"nodes": ["n1"], "role": "leader"}),
        (25.5, "start", ["n1"]),
    ]
    while t < 29.0:
        while nemesis and nemesis[0][0] <= t:
            nt, f, v = nemesis.pop(0)
            add(nt, process="nemesis", type="invoke", f=f, value=v)
            add(nt + 0.05, process="nemesis", type="ok", f=f, value=v)
        p = value % 2
        proc = value % 4
        inv = add(t, process=proc, type="invoke", f="send", topic="t0", partition=p, value=value)
        lat = 0.004 + (value % 7) * 0.002
        if 20.0 <= t < 22.0:
            add(
                t + 1.5,
                process=proc,
                type="info",
                f="send",
                topic="t0",
                partition=p,
                value=value,
                error='KafkaTimeoutError: <timed out> & "quoted"',
            )
        elif 22.0 <= t < 23.0:
            add(
                t + 0.02,
                process=proc,
                type="fail",
                f="send",
                topic="t0",
                partition=p,
                value=value,
                error="NotLeaderForPartitionError",
            )
        else:
            ok = add(
                t + lat,
                process=proc,
                type="ok",
                f="send",
                topic="t0",
                partition=p,
                value=value,
                offset=offsets[p],
            )
            acked[p].append((offsets[p], value))
            if lost and p == 1 and 17.5 <= t < 20.0 and len(lost_values) < 3:
                lost_values.append(value)
                lost_idx += [inv["index"], ok["index"]]
            offsets[p] += 1
        value += 1
        t += 1 / 40
        if int(t) != int(t - 1 / 40) and len(acked[0]) > read_upto and not 20.0 <= t < 23.0:
            # a reader polls partition 0 (never lost) once a second: the load reads as it writes
            recs = [{"topic": "t0", "partition": 0, "offset": o, "value": v} for o, v in acked[0][read_upto:]]
            read_upto = len(acked[0])
            add(t, process=8, type="invoke", f="poll")
            add(t + 0.003, process=8, type="ok", f="poll", records=recs)
    # final reads
    for p in (0, 1):
        recs = [
            {"topic": "t0", "partition": p, "offset": o, "value": v}
            for o, v in acked[p]
            if v not in lost_values
        ]
        add(30.0, process=10 + p, type="invoke", f="poll")
        add(30.2, process=10 + p, type="ok", f="poll", records=recs)
    (run / "history.jsonl").write_text("".join(json.dumps(o) + "\n" for o in ops))

    lost_offsets = {o for o, v in acked[1] if v in lost_values}
    for node in ("n1", "n2", "n3"):
        data = run / "nodes" / node / "data"
        for p in (0, 1):
            recs = [(o, v) for o, v in acked[p]]
            if lost and p == 1 and node in ("n2", "n3"):
                # the new leader n2 truncated to its stale HW and took over: the lost offsets hold new values
                recs = [(o, v if o not in lost_offsets else 900000 + o) for o, v in recs]
            if evil and p == 0 and node == "n3":
                recs = [(o, "<script>alert(1)</script>" if o == 3 else v) for o, v in recs]
            cut = min(lost_offsets) if lost and p == 1 else len(recs) // 2
            batches = [(0, 0, [v for _o, v in recs[:cut]]), (cut, 1, [v for _o, v in recs[cut:]])]
            write_replica(
                data, "t0", p, batches, hw=len(recs) - (2 if node == "n3" else 0), epochs=[(0, 0), (1, cut)]
            )
        logs = run / "nodes" / node / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        (logs / "broker.log").write_text("started\n")
    (run / "cluster-state.json").write_text(
        json.dumps(
            {
                "partitions": [
                    {
                        "topic": "t0",
                        "partition": 0,
                        "leader": "n3",
                        "leader_epoch": 1,
                        "isr": ["n1", "n2", "n3"],
                    },
                    {
                        "topic": "t0",
                        "partition": 1,
                        "leader": "n2",
                        "leader_epoch": 1,
                        "isr": ["n1", "n2", "n3"],
                    },
                ]
            }
        )
    )
    findings = check_replica_logs(
        run / "nodes", run / "history.jsonl", final_state=json.loads((run / "cluster-state.json").read_text())
    )
    anomalies: dict[str, Any] = {}
    if lost:
        anomalies["lost-write"] = {
            "count": len(lost_values),
            "examples": [
                {
                    "topic": "t0",
                    "partition": 1,
                    "value": v,
                    "offset": o,
                    "invoke_index": lost_idx[2 * i],
                    "ok_index": lost_idx[2 * i + 1],
                }
                for i, (o, v) in enumerate(sorted((o, v) for o, v in acked[1] if v in lost_values))
            ],
        }
        anomalies["unseen"] = {"count": 0, "examples": []}
    if evil:
        anomalies["phantom"] = {
            "count": 1,
            "examples": [{"topic": "t0", "partition": 0, "offset": 3, "value": "<script>alert(1)</script>"}],
        }
    results = {
        "valid": not (lost or evil),
        "anomalies": anomalies,
        "stats": {
            "sends": {"ok": sum(len(a) for a in acked.values()), "fail": 20, "info": 40},
            "polls": {"ok": 2, "fail": 0, "info": 0},
            "acked_lost": len(lost_values),
            "ops_per_s": 40.0,
            "latency_ms": {"p50": 8.0, "p99": 1500.0},
            # what the replica-log checker records: the report draws replica marks from it
            "replicas": findings.partitions,
        },
        "checker": {"engine": "reference", "seconds": 0.4},
    }
    (run / "results.json").write_text(json.dumps(results))
    write_evidence(run)
    return run


def write_evidence(run: Path) -> None:
    """evidence.json as the reference checker writes it, for the run's (hand-written) results.json:
    again after a test changed the history."""
    history = run / "history.jsonl"
    findings = check_replica_logs(
        run / "nodes", history, final_state=json.loads((run / "cluster-state.json").read_text())
    )
    anomalies = json.loads((run / "results.json").read_text())["anomalies"]
    nemesis = [op for op in iter_ops(history, problems=[]) if op["process"] == "nemesis"]
    found = gather(history, anomalies, findings)
    ops = sum(1 for _ in iter_ops(history, problems=[]))
    evidence.write(run / "evidence.json", evidence.assemble(history_facts(history), ops, nemesis, found))
