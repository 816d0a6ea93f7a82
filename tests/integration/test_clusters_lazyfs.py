"""lazyfs as a real FUSE mount on this machine: after `drop`, only fsynced data is left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clusters import lazyfs

pytestmark = [pytest.mark.integration]


@pytest.fixture
def mounted(tmp_path: Path):  # type: ignore[no-untyped-def]
    backing, mount, sock = tmp_path / "backing", tmp_path / "mount", tmp_path / "ctl.sock"
    proc = subprocess.Popen(
        lazyfs.mount_argv(sys.executable, str(backing), str(mount), str(sock)),
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "lazyfs.log", "wb"),  # noqa: SIM115 - closed with the process
    )
    try:
        deadline = time.monotonic() + 20
        while not (sock.exists() and os.path.ismount(mount)):
            assert proc.poll() is None, (tmp_path / "lazyfs.log").read_text()
            assert time.monotonic() < deadline, "lazyfs did not mount"
            time.sleep(0.05)
        yield backing, mount, sock
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            subprocess.run(["fusermount", "-u", "-z", str(mount)], check=False)
            proc.kill()
            proc.wait(timeout=10)
        assert not os.path.ismount(mount)


def ctl(sock: Path, command: str) -> dict:  # type: ignore[type-arg]
    out = subprocess.run(
        lazyfs.ctl_argv(sys.executable, str(sock), command), capture_output=True, text=True, check=True
    )
    import json

    return dict(json.loads(out.stdout))


def test_lost_unsynced_writes_leave_only_fsynced_data(mounted) -> None:  # type: ignore[no-untyped-def]
    backing, mount, sock = mounted
    (mount / "topic-0").mkdir()
    segment = mount / "topic-0" / "00000000000000000000.log"
    with open(segment, "ab") as f:
        f.write(b"acked-and-synced;")
        f.flush()
        os.fsync(f.fileno())
        f.write(b"acked-not-synced;")
        f.flush()
    with open(mount / "checkpoint.tmp", "w") as f:  # written and renamed, never fsynced
        f.write("0\n1\ntopic 0 17\n")
    os.rename(mount / "checkpoint.tmp", mount / "checkpoint")
    assert segment.read_bytes() == b"acked-and-synced;acked-not-synced;"
    assert ctl(sock, "stats")["pending_files"] == 2
    dropped = ctl(sock, "drop")
    assert dropped["files"] == 2 and dropped["bytes"] > 0
    assert segment.read_bytes() == b"acked-and-synced;"
    assert os.path.getsize(segment) == len(b"acked-and-synced;")
    assert (mount / "checkpoint").read_text() == ""  # the rename survived, its data did not
    assert (backing / "topic-0" / "00000000000000000000.log").read_bytes() == b"acked-and-synced;"


def test_clean_unmount_keeps_everything(tmp_path: Path) -> None:
    backing, mount, sock = tmp_path / "b", tmp_path / "m", tmp_path / "s"
    proc = subprocess.Popen(lazyfs.mount_argv(sys.executable, str(backing), str(mount), str(sock)))
    deadline = time.monotonic() + 20
    while not (sock.exists() and os.path.ismount(mount)):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    (mount / "f").write_bytes(b"unsynced but cleanly unmounted")
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=10)
    assert not os.path.ismount(mount)
    assert (backing / "f").read_bytes() == b"unsynced but cleanly unmounted"


def test_a_leader_epoch_checkpoint_without_fsync_comes_back_empty_after_a_power_cut(mounted) -> None:  # type: ignore[no-untyped-def]
    """KAFKA-16541's mechanism on a real FUSE mount: the checkpoint replaced without fsync (tmp
    file, rename) is empty after a drop; written with fsync it survives. The log (fsynced per
    append) survives both, and reopening rebuilds epochs only past the recovery point."""
    from broker.storage import PartitionLog
    from broker.storage.build import build_batch

    _, mount, sock = mounted
    for fsync, survives in ((False, False), (True, True)):
        log_dir = mount / f"t{int(fsync)}-0"
        size = len(build_batch([b"00"]))
        log = PartitionLog(
            log_dir, flush_interval_messages=1, segment_bytes=2 * size, epoch_checkpoint_fsync=fsync
        )
        for i in range(6):  # segments of two batches, epochs 0, 1, 2 starting at 0, 2, 4
            log.append_as_leader(build_batch([b"%02d" % i]), i // 2)
        assert log.epochs.entries() == [(0, 0), (1, 2), (2, 4)]
        log.close()
        ctl(sock, "drop")
        text = (log_dir / "leader-epoch-checkpoint").read_text()
        assert (text != "") is survives, text
        reopened = PartitionLog(
            log_dir, segment_bytes=2 * size, recovery_point=6, epoch_checkpoint_fsync=fsync
        )
        assert reopened.log_end_offset == 6
        assert reopened.epochs.entries() == ([(0, 0), (1, 2), (2, 4)] if survives else [(2, 4)])
        reopened.close()
