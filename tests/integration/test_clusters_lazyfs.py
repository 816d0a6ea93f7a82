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
