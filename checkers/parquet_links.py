"""Topic-partition ids and per-process links (each row's predecessor), vectorized with Arrow."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from checkers.parquet_pairing import arange


class TopicIds:
    """Topic-partition ids (`tp`): one integer for a (topic, partition), for Spark's cheap keys.

    A topic's id is its rank of first appearance in the history; `tp` = id * 2**32 + partition +
    2**31, so distinct (topic, partition) pairs have distinct ids (null where either is null).
    """

    def __init__(self) -> None:
        self.known = pa.array([], pa.string())

    def ids(self, topic: pa.Array | pa.ChunkedArray) -> pa.Array:
        """Each topic's id (null where the topic is); new topics are numbered on."""
        ids = pc.index_in(topic, value_set=self.known)
        new = pc.filter(topic, pc.and_(pc.is_null(ids), pc.is_valid(topic)))
        if len(new):
            fresh = pc.unique(new)
            fresh = fresh.combine_chunks() if isinstance(fresh, pa.ChunkedArray) else fresh
            self.known = pa.concat_arrays([self.known, fresh.cast(pa.string())])
            ids = pc.index_in(topic, value_set=self.known)
        return ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids

    def tp(self, topic: pa.Array | pa.ChunkedArray, partition: pa.Array | pa.ChunkedArray) -> pa.Array:
        return tp_of(self.ids(topic), partition)


def tp_of(ids: pa.Array, partition: pa.Array | pa.ChunkedArray) -> pa.Array:
    """`tp` of topic ids and partitions (null where either is)."""
    high = pc.multiply(ids.cast(pa.int64()), pa.scalar(1 << 32, pa.int64()))
    result = pc.add(high, pc.add(partition.cast(pa.int64()), pa.scalar(1 << 31, pa.int64())))
    return result.combine_chunks() if isinstance(result, pa.ChunkedArray) else result


class Links:
    """Each eligible row's predecessor: the previous eligible row of its process on its partition.

    This is the per-process sequential part of poll-skip, nonmonotonic-poll (reads; the link also
    needs the same position epoch) and nonmonotonic-send (acks), done once while converting, like
    the pairing: rows come in history order, so a stable sort by (process, tp) after the rows
    carried from earlier chunks (the last one of each process and partition) puts each row right
    after its predecessor.
    """

    def __init__(self, payload: tuple[str, ...]) -> None:
        self.payload = payload
        fields = [("process", pa.int64()), ("tp", pa.int64()), ("epoch", pa.int64())]
        self.schema = pa.schema(fields + [(name, pa.int64()) for name in payload])
        self.carry = self.schema.empty_table()

    def feed(self, rows: pa.Table, eligible: pa.Array) -> dict[str, pa.Array]:
        """For each row of `rows` (columns process, tp, epoch and the payload): prev_<payload>."""
        n = rows.num_rows
        eligible = pc.fill_null(eligible, False)
        if isinstance(eligible, pa.ChunkedArray):
            eligible = eligible.combine_chunks()
        mine = rows.select(list(self.schema.names)).cast(self.schema).filter(eligible)
        k = self.carry.num_rows
        both = pa.concat_tables([self.carry, mine]).combine_chunks()
        m = both.num_rows
        prev: dict[str, pa.Array] = {}
        if m == 0 or mine.num_rows == 0:
            return {f"prev_{name}": pa.nulls(n, pa.int64()) for name in self.payload}
        order = pc.sort_indices(both, sort_keys=[("process", "ascending"), ("tp", "ascending")]).cast(
            pa.int64()
        )
        ordered = both.take(order)
        process, tp, epoch = (ordered.column(c).combine_chunks() for c in ("process", "tp", "epoch"))
        same = pc.and_(
            pc.and_(
                pc.equal(process.slice(1), process.slice(0, m - 1)), pc.equal(tp.slice(1), tp.slice(0, m - 1))
            ),
            pc.equal(epoch.slice(1), epoch.slice(0, m - 1)),
        )
        same = pa.concat_arrays([pa.array([False]), pc.fill_null(same, False)])
        mine_at = pc.take(pc.inverse_permutation(order), arange(m - k, k))
        for name in self.payload:
            column = ordered.column(name).combine_chunks()
            shifted = pa.concat_arrays([pa.nulls(1, pa.int64()), column.slice(0, m - 1)])
            linked = pc.if_else(same, shifted, pa.scalar(None, pa.int64()))
            prev[f"prev_{name}"] = pc.replace_with_mask(
                pa.nulls(n, pa.int64()), eligible, pc.take(linked, mine_at)
            )
        # The last row of each process and partition (whatever its epoch) is carried on.
        last = pc.or_(
            pc.not_equal(process.slice(0, m - 1), process.slice(1)),
            pc.not_equal(tp.slice(0, m - 1), tp.slice(1)),
        )
        last = pa.concat_arrays([pc.fill_null(last, True), pa.array([True])])
        self.carry = ordered.take(pc.indices_nonzero(last))  # few rows: a take, not a filter of each column
        return prev


def with_columns(table: pa.Table, columns: dict[str, pa.Array]) -> pa.Table:
    for name, column in columns.items():
        table = table.set_column(table.schema.get_field_index(name), name, column)
    return table
