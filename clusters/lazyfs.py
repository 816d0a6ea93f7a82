"""A FUSE filesystem that keeps un-fsynced writes in memory until fsync, and drops them on command.

After LazyFS (dsrhaslab/lazyfs): the broker's data dir is mounted on this filesystem, which passes
metadata (create, rename, unlink, mkdir) straight to a backing directory but holds file *contents*
written since the last fsync of that file in memory. `drop` discards them, as a power loss would
discard the page cache; followed by SIGKILL of the broker, that is the `lose-unsynced` fault.

Run it as a process (foreground; unmount with SIGTERM or `fusermount -u`):

    python -m clusters.lazyfs mount --backing DIR --mount DIR --control SOCKET

and talk to it through its Unix socket (one command per connection, one JSON line back):

    python -m clusters.lazyfs ctl SOCKET drop|sync|stats|ping

A clean unmount (SIGTERM) writes everything pending: only `drop` loses data.
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

BLOCK = 4096


@dataclass
class Pending:
    """What a file holds in memory beyond its backing file: dirty blocks and its logical size.

    `floor` is the lowest size the file was truncated to since its last fsync: backing bytes at or
    beyond it are no longer part of the file (they read as zeros until overwritten).
    """

    size: int
    floor: int
    blocks: dict[int, bytearray] = field(default_factory=dict)

    @property
    def dirty_bytes(self) -> int:
        return len(self.blocks) * BLOCK + (1 if self.floor < self.size else 0)


class LazyStore:
    """The in-memory layer, independent of FUSE so it can be unit-tested on a plain directory."""

    def __init__(self, backing: str):
        self.backing = os.path.realpath(backing)
        self.lock = threading.RLock()
        self.pending: dict[str, Pending] = {}
        self.dropped_bytes = 0
        self.synced_files = 0

    def real(self, path: str) -> str:
        return os.path.join(self.backing, path.lstrip("/"))

    def _backing_block(self, path: str, index: int, floor: int) -> bytearray:
        try:
            fd = os.open(self.real(path), os.O_RDONLY)
        except FileNotFoundError:
            data = b""
        else:
            try:
                data = os.pread(fd, BLOCK, index * BLOCK)
            finally:
                os.close(fd)
        block = bytearray(data.ljust(BLOCK, b"\0"))
        cut = floor - index * BLOCK
        if cut < BLOCK:
            block[max(cut, 0) :] = bytes(BLOCK - max(cut, 0))
        return block

    def _entry(self, path: str) -> Pending:
        entry = self.pending.get(path)
        if entry is None:
            size = os.lstat(self.real(path)).st_size
            entry = self.pending[path] = Pending(size=size, floor=size)
        return entry

    def size(self, path: str) -> int | None:
        with self.lock:
            entry = self.pending.get(path)
            return None if entry is None else entry.size

    def write(self, path: str, data: bytes, offset: int) -> int:
        with self.lock:
            entry = self._entry(path)
            pos = 0
            while pos < len(data):
                index, start = divmod(offset + pos, BLOCK)
                block = entry.blocks.get(index)
                if block is None:
                    block = entry.blocks[index] = self._backing_block(path, index, entry.floor)
                n = min(BLOCK - start, len(data) - pos)
                block[start : start + n] = data[pos : pos + n]
                pos += n
            entry.size = max(entry.size, offset + len(data))
            return len(data)

    def read(self, path: str, size: int, offset: int) -> bytes:
        with self.lock:
            entry = self.pending.get(path)
            if entry is None:
                fd = os.open(self.real(path), os.O_RDONLY)
                try:
                    return os.pread(fd, size, offset)
                finally:
                    os.close(fd)
            end = min(offset + size, entry.size)
            out = bytearray()
            pos = offset
            while pos < end:
                index, start = divmod(pos, BLOCK)
                block = entry.blocks.get(index)
                if block is None:
                    block = self._backing_block(path, index, entry.floor)
                n = min(BLOCK - start, end - pos)
                out += block[start : start + n]
                pos += n
            return bytes(out)

    def truncate(self, path: str, length: int) -> None:
        with self.lock:
            entry = self._entry(path)
            entry.size = length
            entry.floor = min(entry.floor, length)
            for index in [i for i in entry.blocks if i * BLOCK >= length]:
                del entry.blocks[index]
            last = entry.blocks.get(length // BLOCK)
            if last is not None:
                cut = length % BLOCK
                last[cut:] = bytes(BLOCK - cut)

    def fsync(self, path: str) -> None:
        """Write the file's pending data to the backing file and fsync it there."""
        with self.lock:
            entry = self.pending.pop(path, None)
            fd = os.open(self.real(path), os.O_WRONLY)
            try:
                if entry is not None:
                    os.ftruncate(fd, entry.floor)
                    for index, block in sorted(entry.blocks.items()):
                        os.pwrite(fd, bytes(block), index * BLOCK)
                    os.ftruncate(fd, entry.size)
                    self.synced_files += 1
                os.fsync(fd)
            finally:
                os.close(fd)

    def rename(self, old: str, new: str) -> None:
        with self.lock:
            os.rename(self.real(old), self.real(new))
            self.pending.pop(new, None)
            moved = {p: e for p, e in self.pending.items() if p == old or p.startswith(old + "/")}
            for p, e in moved.items():
                del self.pending[p]
                self.pending[new + p[len(old) :]] = e

    def forget(self, path: str) -> None:
        with self.lock:
            self.pending.pop(path, None)

    def drop(self) -> dict[str, int]:
        """Power loss: every write not fsynced is gone."""
        with self.lock:
            files = len(self.pending)
            lost = sum(e.dirty_bytes for e in self.pending.values())
            self.pending.clear()
            self.dropped_bytes += lost
            return {"files": files, "bytes": lost}

    def sync_all(self) -> dict[str, int]:
        with self.lock:
            paths = list(self.pending)
            for path in paths:
                try:
                    self.fsync(path)
                except FileNotFoundError:
                    self.pending.pop(path, None)
            return {"files": len(paths)}

    def stats(self) -> dict[str, int]:
        with self.lock:
            return {
                "pending_files": len(self.pending),
                "pending_bytes": sum(e.dirty_bytes for e in self.pending.values()),
                "dropped_bytes": self.dropped_bytes,
                "synced_files": self.synced_files,
            }


def _operations(store: LazyStore) -> Any:
    """The fusepy Operations over a LazyStore (imported lazily: fusepy needs libfuse at import)."""
    from fuse import FuseOSError, Operations

    class LazyOperations(Operations):  # type: ignore[misc]
        use_ns = True

        def __call__(self, op: str, *args: Any) -> Any:
            try:
                return super().__call__(op, *args)
            except OSError as e:
                raise FuseOSError(e.errno or errno.EIO) from None

        def access(self, path: str, amode: int) -> None:
            if not os.access(store.real(path), amode):
                raise FuseOSError(errno.EACCES)

        def chmod(self, path: str, mode: int) -> None:
            os.chmod(store.real(path), mode)

        def chown(self, path: str, uid: int, gid: int) -> None:
            os.chown(store.real(path), uid, gid)

        def getattr(self, path: str, fh: Any = None) -> dict[str, Any]:
            st = os.lstat(store.real(path))
            attrs = {
                key: getattr(st, key)
                for key in ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_blocks")
            }
            for key in ("st_atime", "st_mtime", "st_ctime"):
                attrs[key] = getattr(st, key + "_ns")
            size = store.size(path)
            if size is not None:
                attrs["st_size"] = size
                attrs["st_blocks"] = (size + 511) // 512
            return attrs

        def readdir(self, path: str, fh: Any) -> Iterator[str]:
            yield "."
            yield ".."
            yield from os.listdir(store.real(path))

        def readlink(self, path: str) -> str:
            return os.readlink(store.real(path))

        def mknod(self, path: str, mode: int, dev: int) -> None:
            os.mknod(store.real(path), mode, dev)

        def mkdir(self, path: str, mode: int) -> None:
            os.mkdir(store.real(path), mode)

        def rmdir(self, path: str) -> None:
            os.rmdir(store.real(path))

        def unlink(self, path: str) -> None:
            os.unlink(store.real(path))
            store.forget(path)

        def symlink(self, target: str, source: str) -> None:
            os.symlink(source, store.real(target))

        def link(self, target: str, source: str) -> None:
            os.link(store.real(source), store.real(target))

        def rename(self, old: str, new: str) -> None:
            store.rename(old, new)

        def utimens(self, path: str, times: Any = None) -> None:
            os.utime(store.real(path), ns=times) if times else os.utime(store.real(path))

        def statfs(self, path: str) -> dict[str, Any]:
            sv = os.statvfs(store.real(path))
            return {
                key: getattr(sv, key)
                for key in (
                    "f_bavail",
                    "f_bfree",
                    "f_blocks",
                    "f_bsize",
                    "f_favail",
                    "f_ffree",
                    "f_files",
                    "f_flag",
                    "f_frsize",
                    "f_namemax",
                )
            }

        def create(self, path: str, mode: int, fi: Any = None) -> int:
            fd = os.open(store.real(path), os.O_WRONLY | os.O_CREAT, mode)
            os.close(fd)
            return 0

        def open(self, path: str, flags: int) -> int:
            if not os.path.exists(store.real(path)):
                raise FuseOSError(errno.ENOENT)
            return 0

        def read(self, path: str, size: int, offset: int, fh: Any) -> bytes:
            return store.read(path, size, offset)

        def write(self, path: str, data: bytes, offset: int, fh: Any) -> int:
            return store.write(path, data, offset)

        def truncate(self, path: str, length: int, fh: Any = None) -> None:
            store.truncate(path, length)

        def flush(self, path: str, fh: Any) -> None:
            return None

        def release(self, path: str, fh: Any) -> None:
            return None

        def fsync(self, path: str, datasync: int, fh: Any) -> None:
            store.fsync(path)

        def fsyncdir(self, path: str, datasync: int, fh: Any) -> None:
            return None

        def destroy(self, path: str) -> None:
            store.sync_all()

    return LazyOperations()


def _serve_control(store: LazyStore, control: str) -> socket.socket:
    """A Unix socket: one command per connection, one JSON line back."""
    if os.path.exists(control):
        os.unlink(control)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(control)
    server.listen(8)

    def handle(conn: socket.socket) -> None:
        with conn:
            command = conn.recv(256).decode(errors="replace").strip()
            if command == "drop":
                reply: dict[str, Any] = {"ok": True, **store.drop()}
            elif command == "sync":
                reply = {"ok": True, **store.sync_all()}
            elif command == "stats":
                reply = {"ok": True, **store.stats()}
            elif command == "ping":
                reply = {"ok": True}
            else:
                reply = {"ok": False, "error": f"unknown command {command!r} (drop, sync, stats, ping)"}
            log.info("control %s -> %s", command, reply)
            conn.sendall((json.dumps(reply) + "\n").encode())

    def loop() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            handle(conn)

    threading.Thread(target=loop, name="lazyfs-control", daemon=True).start()
    return server


def control(sock_path: str, command: str, timeout: float = 10.0) -> dict[str, Any]:
    """Send one command to a running lazyfs and return its JSON answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(sock_path)
        s.sendall(command.encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    result: dict[str, Any] = json.loads(data.decode())
    return result


def mount_argv(python: str, backing: str, mountpoint: str, control_socket: str) -> list[str]:
    """The command line a system under test runs (as a daemon) to mount a data dir on lazyfs."""
    return [
        python,
        "-m",
        "clusters.lazyfs",
        "mount",
        "--backing",
        backing,
        "--mount",
        mountpoint,
        "--control",
        control_socket,
    ]


def ctl_argv(python: str, control_socket: str, command: str) -> list[str]:
    """The command line that sends `command` to a lazyfs from the node (through Node.exec)."""
    return [python, "-m", "clusters.lazyfs", "ctl", control_socket, command]


def _mount(args: argparse.Namespace) -> int:
    from fuse import FUSE

    os.makedirs(args.backing, exist_ok=True)
    os.makedirs(args.mount, exist_ok=True)
    store = LazyStore(args.backing)
    server = _serve_control(store, args.control)

    # libfuse installs its own SIGTERM/SIGINT handlers (which unmount) only when none is set: keep
    # Python's out of the way.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        FUSE(
            _operations(store),
            args.mount,
            foreground=True,
            nothreads=False,
            fsname="lazyfs",
            # No attribute caching: after a drop, sizes must come from the store, not the kernel.
            attr_timeout=0,
            entry_timeout=0,
            negative_timeout=0,
        )
    finally:
        server.close()
        store.sync_all()
        try:
            os.unlink(args.control)
        except OSError:
            pass
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m clusters.lazyfs", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("mount", help="mount BACKING on MOUNT (foreground)")
    m.add_argument("--backing", required=True)
    m.add_argument("--mount", required=True)
    m.add_argument("--control", required=True, help="path of the control Unix socket")
    c = sub.add_parser("ctl", help="send a command to a running lazyfs")
    c.add_argument("socket")
    c.add_argument("what", choices=["drop", "sync", "stats", "ping"])
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="lazyfs: %(message)s")
    if args.command == "mount":
        return _mount(args)
    try:
        reply = control(args.socket, args.what)
    except OSError as e:
        sys.stderr.write(f"lazyfs ctl: cannot reach {args.socket}: {e.strerror or e}\n")
        return 4
    sys.stdout.write(json.dumps(reply) + "\n")
    return 0 if reply.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
