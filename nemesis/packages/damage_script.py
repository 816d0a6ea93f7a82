"""Damage a stopped broker's data dir, on its node: flip a bit, cut a segment's tail, or wipe it.

This module runs on the node (`python -c <this file's source> <json request>`, see
`nemesis.packages.corrupt`), so it uses the standard library only and imports nothing of the
project. It reads Kafka's on-disk layout itself: `<topic>-<partition>/<20-digit base offset>.log`
segments of v2 record batches (base offset int64, length int32, partition leader epoch int32, magic
int8, CRC uint32 over everything from the attributes on), and Kafka's sparse `.index` files.

A bit flip in a batch lands in the bytes its CRC covers (the records when the batch has any), so a
broker that checks CRCs as Kafka's log recovery does sees it; the partition leader epoch and the
base offset lie outside the CRC in Kafka's format, and a flip there is a different, undetectable
fault that this does not draw. Every change is fsynced (a data dir on lazyfs keeps it through a
later power loss). It prints one JSON line: what was damaged, with offsets the checkers can name.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import struct
import sys
from typing import Any

HEADER = struct.Struct(">qiibI")  # base offset, length, partition leader epoch, magic, crc
LOG_OVERHEAD = 12  # base offset + length: the bytes the length does not count
CRC_FROM = 21  # the attributes: the first byte the CRC covers
RECORDS_FROM = 61  # the v2 batch header's size: the records start here
SEGMENT_SUFFIX = ".log"
INDEX_SUFFIX = ".index"


def partition_dirs(data_dir: str) -> list[tuple[str, int, str]]:
    """(topic, partition, path) of each `<topic>-<partition>` directory, sorted."""
    out = []
    for name in sorted(os.listdir(data_dir)) if os.path.isdir(data_dir) else []:
        topic, sep, partition = name.rpartition("-")
        path = os.path.join(data_dir, name)
        if sep and topic and partition.isdigit() and os.path.isdir(path):
            out.append((topic, int(partition), path))
    return out


def files(path: str, suffix: str) -> list[str]:
    names = [n for n in os.listdir(path) if n.endswith(suffix) and n[: -len(suffix)].isdigit()]
    return [os.path.join(path, n) for n in sorted(names) if os.path.getsize(os.path.join(path, n)) > 0]


def batches(data: bytes) -> list[tuple[int, int, int]]:
    """(position, size, base offset) of each whole v2 batch from the start, to the first torn one."""
    out = []
    pos = 0
    while pos + HEADER.size <= len(data):
        base, length, _epoch, magic, _crc = HEADER.unpack_from(data, pos)
        size = LOG_OVERHEAD + length
        if magic != 2 or length < RECORDS_FROM - LOG_OVERHEAD or pos + size > len(data):
            break
        out.append((pos, size, base))
        pos += size
    return out


def _write_at(path: str, position: int, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, data, position)
        os.fsync(fd)
    finally:
        os.close(fd)


def _truncate(path: str, size: int) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    finally:
        os.close(fd)


def _candidates(data_dirs: list[str], topic: str | None, partition: int | None) -> list[tuple[str, int, str]]:
    found = [p for d in data_dirs for p in partition_dirs(d)]
    if topic is not None:
        found = [p for p in found if p[0] == topic and (partition is None or p[1] == partition)]
    return found


def flip_records(rng: random.Random, where: tuple[str, int, str]) -> dict[str, Any] | None:
    """Flip one bit of one batch's CRC-covered bytes (its records when it has any)."""
    topic, partition, path = where
    segments = [(s, b) for s in files(path, SEGMENT_SUFFIX) for b in batches(_read(s))]
    if not segments:
        return None
    segment, (position, size, base) = rng.choice(segments)
    start = RECORDS_FROM if size > RECORDS_FROM else CRC_FROM
    spot = position + rng.randrange(start, size)
    bit = rng.randrange(8)
    byte = _read(segment)[spot]
    _write_at(segment, spot, bytes([byte ^ (1 << bit)]))
    return {
        "topic": topic,
        "partition": partition,
        "file": os.path.basename(segment),
        "position": spot,
        "bit": bit,
        "batch_position": position,
        "first_damaged_offset": base,
    }


def flip_index(rng: random.Random, where: tuple[str, int, str]) -> dict[str, Any] | None:
    """Flip one bit among an offset index's entries (Kafka preallocates the rest with zeros)."""
    topic, partition, path = where
    indexes = []
    for index in files(path, INDEX_SUFFIX):
        used = len(_read(index).rstrip(b"\0"))
        if used:
            indexes.append((index, used))
    if not indexes:
        return None
    index, used = rng.choice(indexes)
    spot = rng.randrange(used)
    bit = rng.randrange(8)
    _write_at(index, spot, bytes([_read(index)[spot] ^ (1 << bit)]))
    return {
        "topic": topic,
        "partition": partition,
        "file": os.path.basename(index),
        "position": spot,
        "bit": bit,
        "first_damaged_offset": int(os.path.basename(index)[: -len(INDEX_SUFFIX)]),
    }


def cut_tail(rng: random.Random, where: tuple[str, int, str]) -> dict[str, Any] | None:
    """Cut the last segment inside one of its batches: that batch and all after it are torn off."""
    topic, partition, path = where
    segments = files(path, SEGMENT_SUFFIX)
    if not segments:
        return None
    segment = segments[-1]
    data = _read(segment)
    found = batches(data)
    if not found:
        return None
    position, size, base = rng.choice(found)
    cut = position + rng.randrange(1, size)
    _truncate(segment, cut)
    return {
        "topic": topic,
        "partition": partition,
        "file": os.path.basename(segment),
        "size_before": len(data),
        "size_after": cut,
        "first_damaged_offset": base,
    }


def wipe(data_dirs: list[str]) -> dict[str, Any]:
    """Empty every data dir (the directories stay: they may be mount points)."""
    removed = 0
    partitions = []
    for data_dir in data_dirs:
        partitions += [f"{t}-{p}" for t, p, _ in partition_dirs(data_dir)]
        for name in os.listdir(data_dir) if os.path.isdir(data_dir) else []:
            path = os.path.join(data_dir, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
            removed += 1
        fd = os.open(data_dir, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return {"entries_removed": removed, "partitions": sorted(partitions)}


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def damage(request: dict[str, Any]) -> dict[str, Any]:
    """Apply one damage as the request says; what was damaged (`damaged: false` when nothing was)."""
    kind = request["kind"]
    dirs = [str(d) for d in request["data_dirs"]]
    rng = random.Random(int(request.get("seed", 0)))
    if kind == "wipe":
        return {"kind": kind, "damaged": True, **wipe(dirs)}
    what = {"bitflip": flip_records, "truncate": cut_tail}[kind]
    if kind == "bitflip" and request.get("where") == "index":
        what = flip_index
    partition = request.get("partition")
    places = _candidates(dirs, request.get("topic"), None if partition is None else int(partition))
    rng.shuffle(places)
    for place in places:  # the drawn partition, else the next one that has something to damage
        done = what(rng, place)
        if done is not None:
            return {"kind": kind, "damaged": True, **done}
    return {"kind": kind, "damaged": False, "reason": "no segment data to damage"}


def main(argv: list[str]) -> int:
    print(json.dumps(damage(json.loads(argv[1]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
