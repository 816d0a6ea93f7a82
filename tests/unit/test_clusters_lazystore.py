"""The in-memory layer of lazyfs on a plain directory: only fsynced bytes survive a drop."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from clusters.lazyfs import BLOCK, LazyStore


def make(tmp_path: Path, name: str = "f", content: bytes = b"") -> LazyStore:
    (tmp_path / name).write_bytes(content)
    return LazyStore(str(tmp_path))


def test_writes_stay_in_memory_until_fsync(tmp_path: Path) -> None:
    store = make(tmp_path)
    store.write("/f", b"hello", 0)
    assert store.read("/f", 100, 0) == b"hello" and store.size("/f") == 5
    assert (tmp_path / "f").read_bytes() == b""
    store.fsync("/f")
    assert (tmp_path / "f").read_bytes() == b"hello"
    store.write("/f", b" world", 5)
    assert store.drop()["files"] == 1
    assert store.read("/f", 100, 0) == b"hello" and store.size("/f") is None


def test_truncate_then_extend_reads_zeros_not_stale_bytes(tmp_path: Path) -> None:
    store = make(tmp_path, content=b"x" * (BLOCK + 100))
    store.truncate("/f", 10)
    store.write("/f", b"y", BLOCK + 50)
    data = store.read("/f", 2 * BLOCK, 0)
    assert data[:10] == b"x" * 10 and set(data[10 : BLOCK + 50]) == {0} and data[-1:] == b"y"
    store.fsync("/f")
    assert (tmp_path / "f").read_bytes() == data


def test_rename_moves_pending_data(tmp_path: Path) -> None:
    store = make(tmp_path, "a")
    store.write("/a", b"abc", 0)
    store.rename("/a", "/b")
    assert store.read("/b", 10, 0) == b"abc"
    store.drop()
    assert (tmp_path / "b").read_bytes() == b""


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["write", "truncate", "fsync"]),
            st.integers(0, 3 * BLOCK),
            st.binary(min_size=1, max_size=BLOCK + 10),
        ),
        max_size=12,
    )
)
def test_matches_a_model_file(tmp_path_factory: object, ops: list[tuple[str, int, bytes]]) -> None:
    """Reads equal a plain bytearray model; after a drop, the file equals the model at the last fsync."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        store = make(Path(d))
        model = bytearray()
        synced = b""
        for op, n, data in ops:
            if op == "write":
                if len(model) < n:
                    model += bytes(n - len(model))
                model[n : n + len(data)] = data
                store.write("/f", data, n)
            elif op == "truncate":
                del model[n:]
                model += bytes(max(0, n - len(model)))
                store.truncate("/f", n)
            else:
                store.fsync("/f")
                synced = bytes(model)
            assert store.read("/f", 4 * BLOCK, 0) == bytes(model)
        store.drop()
        assert (Path(d) / "f").read_bytes() == synced
