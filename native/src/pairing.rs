//! The conversion's per-process streaming work, line by line: the pairing of invocations with
//! their completions, each ack's and each read's link to its process's previous one on its
//! partition, and each ok send's predecessor in time (`checkers.parquet_native_pairing`).
//!
//! These are the rules of `history.pairing` as `checkers.parquet_pairing` and
//! `checkers.parquet_links` state them over Arrow arrays, chunk by chunk, and give the same rows in
//! the same order: per chunk, the lines carried from earlier chunks (the last line of each process,
//! in the order they were carried) come before the chunk's own lines, and an invocation becomes an
//! operation in the chunk where the next line of its process appears. A line without a process is
//! nobody's neighbour and is carried to the end. Columns come in as Arrow buffers (addresses the
//! caller keeps alive for the call) and go out as the buffers of new columns.

use ahash::AHashMap;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::columns::{bitmap, put, put_optional, raw, Optional};

// `checkers.parquet_schema`: TYPE_CODES, F_CODES, OUTCOME_CODES.
const INVOKE: i8 = 0;
const OK_TYPE: i8 = 1;
const INFO_TYPE: i8 = 3;
const SEND: i8 = 0;
const POLL: i8 = 1;
const ASSIGN: i8 = 2;
const CRASH: i8 = 3;
const OK: i8 = 0;
const OPEN: i8 = 3;

/// An Arrow column the caller holds: (validity address or 0, data address or 0 when every value is
/// null, offset in elements).
type View = (usize, usize, usize);

#[derive(Clone, Copy)]
struct Col<T> {
    valid: usize,
    data: usize,
    offset: usize,
    _t: std::marker::PhantomData<T>,
}

impl<T: Copy> Col<T> {
    fn new((valid, data, offset): View) -> Self {
        Col {
            valid,
            data,
            offset,
            _t: std::marker::PhantomData,
        }
    }

    /// Row `i`. SAFETY (of the callers' promise): the addresses are of live Arrow buffers with at
    /// least offset + rows elements, of type T.
    fn get(&self, i: usize) -> Option<T> {
        let j = self.offset + i;
        unsafe {
            if self.data == 0 {
                return None;
            }
            if self.valid != 0 && (*((self.valid as *const u8).add(j / 8)) >> (j % 8)) & 1 == 0 {
                return None;
            }
            Some(*((self.data as *const T).add(j)))
        }
    }
}

/// One client line, as carried from chunk to chunk.
#[derive(Clone, Copy, Default)]
struct Line {
    index: Option<i64>,
    time: Option<i64>,
    process: Option<i64>,
    kind: Option<i8>,
    f: Option<i8>,
    topic: Option<i32>,
    partition: Option<i32>,
    value: Option<i64>,
    offset: Option<i64>,
    bad_records: bool,
    epoch: Option<i64>,
    tp: Option<i64>,
}

/// A process's last ack (index, offset, value) or read (epoch, offset, index) on a partition.
type Last = (Option<i64>, Option<i64>, Option<i64>);

fn expect_columns(columns: &[View], n: usize) -> PyResult<()> {
    if columns.len() == n {
        Ok(())
    } else {
        Err(pyo3::exceptions::PyValueError::new_err(format!(
            "{n} columns expected, got {}",
            columns.len()
        )))
    }
}

fn is(v: Option<i8>, code: i8) -> bool {
    v == Some(code)
}

/// The operations' columns (`OPERATIONS_SCHEMA` with `f`, `topic` and `outcome` as codes).
struct Operations {
    invoke_index: Optional<i64>,
    process: Optional<i64>,
    f: Optional<i8>,
    topic: Optional<i32>,
    partition: Optional<i32>,
    value: Optional<i64>,
    index: Optional<i64>,
    time: Optional<i64>,
    offset: Optional<i64>,
    bad_records: Vec<bool>,
    outcome: Vec<i8>,
    next_index: Optional<i64>,
    tp: Optional<i64>,
    prev_index: Optional<i64>,
    prev_offset: Optional<i64>,
    prev_value: Optional<i64>,
    invoke_time: Optional<i64>,
    prev_ok_time: Optional<i64>,
}

impl Operations {
    fn with_capacity(n: usize) -> Self {
        Operations {
            invoke_index: Optional::with_capacity(n),
            process: Optional::with_capacity(n),
            f: Optional::with_capacity(n),
            topic: Optional::with_capacity(n),
            partition: Optional::with_capacity(n),
            value: Optional::with_capacity(n),
            index: Optional::with_capacity(n),
            time: Optional::with_capacity(n),
            offset: Optional::with_capacity(n),
            bad_records: Vec::with_capacity(n),
            outcome: Vec::with_capacity(n),
            next_index: Optional::with_capacity(n),
            tp: Optional::with_capacity(n),
            prev_index: Optional::with_capacity(n),
            prev_offset: Optional::with_capacity(n),
            prev_value: Optional::with_capacity(n),
            invoke_time: Optional::with_capacity(n),
            prev_ok_time: Optional::with_capacity(n),
        }
    }

    /// The operation of invocation `inv`, completed (or superseded) by `next`, or left open.
    fn push(&mut self, inv: &Line, next: Option<&Line>) {
        let completed = next.is_some_and(|n| n.kind.is_some() && n.kind != Some(INVOKE));
        let outcome = match next {
            Some(n) if completed => {
                if is(n.f, CRASH) {
                    INFO_TYPE - 1
                } else {
                    n.kind.unwrap_or_default() - 1
                }
            }
            _ => OPEN,
        };
        let done = if completed { next } else { None };
        self.invoke_index.push(inv.index);
        self.process.push(inv.process);
        self.f.push(inv.f);
        self.topic.push(inv.topic);
        self.partition.push(inv.partition);
        self.value.push(inv.value);
        self.index.push(done.and_then(|n| n.index));
        self.time.push(done.and_then(|n| n.time));
        self.offset.push(done.and_then(|n| n.offset));
        self.bad_records.push(done.is_some_and(|n| n.bad_records));
        self.outcome.push(outcome);
        self.next_index.push(next.and_then(|n| n.index));
        self.tp.push(inv.tp);
        self.invoke_time.push(inv.time);
    }

    fn rows(&self) -> usize {
        self.outcome.len()
    }

    fn put(&self, d: &Bound<'_, PyDict>) -> PyResult<()> {
        d.set_item("rows", self.rows())?;
        put_optional(d, "invoke_index", &self.invoke_index)?;
        put_optional(d, "process", &self.process)?;
        put_optional(d, "f_code", &self.f)?;
        put_optional(d, "topic_id", &self.topic)?;
        put_optional(d, "partition", &self.partition)?;
        put_optional(d, "value", &self.value)?;
        put_optional(d, "index", &self.index)?;
        put_optional(d, "time", &self.time)?;
        put_optional(d, "offset", &self.offset)?;
        put(d, "bad_records", &bitmap(&self.bad_records))?;
        put(d, "outcome_code", raw(&self.outcome))?;
        put_optional(d, "next_index", &self.next_index)?;
        put_optional(d, "tp", &self.tp)?;
        put_optional(d, "prev_index", &self.prev_index)?;
        put_optional(d, "prev_offset", &self.prev_offset)?;
        put_optional(d, "prev_value", &self.prev_value)?;
        put_optional(d, "invoke_time", &self.invoke_time)?;
        put_optional(d, "prev_ok_time", &self.prev_ok_time)
    }
}

/// What one chunk gives: its operations, and per own line whether its records are reads and its
/// process's position epoch.
struct Paired {
    operations: Operations,
    reads: Vec<bool>,
    epoch: Optional<i64>,
}

/// A chunk's own client lines, read where the caller holds them.
struct Own {
    index: Col<i64>,
    time: Col<i64>,
    process: Col<i64>,
    kind: Col<i8>,
    f: Col<i8>,
    topic: Col<i32>,
    partition: Col<i32>,
    value: Col<i64>,
    offset: Col<i64>,
    bad: Col<i8>,
    tp: Col<i64>,
}

impl Own {
    fn new(c: &[View]) -> Self {
        Own {
            index: Col::new(c[0]),
            time: Col::new(c[1]),
            process: Col::new(c[2]),
            kind: Col::new(c[3]),
            f: Col::new(c[4]),
            topic: Col::new(c[5]),
            partition: Col::new(c[6]),
            value: Col::new(c[7]),
            offset: Col::new(c[8]),
            bad: Col::new(c[9]),
            tp: Col::new(c[10]),
        }
    }

    fn line(&self, i: usize) -> Line {
        Line {
            index: self.index.get(i),
            time: self.time.get(i),
            process: self.process.get(i),
            kind: self.kind.get(i),
            f: self.f.get(i),
            topic: self.topic.get(i),
            partition: self.partition.get(i),
            value: self.value.get(i),
            offset: self.offset.get(i),
            bad_records: self.bad.get(i).unwrap_or(0) != 0,
            epoch: None,
            tp: self.tp.get(i),
        }
    }
}

/// Pairs a history's client lines chunk by chunk (`checkers.parquet_pairing.ChunkPairing`), and
/// links each ack to its process's previous ack on its partition (`link_acks`) and each ok send to
/// the ok send before it in completion order (`link_ok_sends`).
#[pyclass(module = "checkers._native")]
pub(crate) struct Pairing {
    carry: Vec<Line>,
    #[pyo3(get)]
    orphans: u64,
    #[pyo3(get)]
    first_orphan: Option<i64>,
    acks: AHashMap<(i64, i64), Last>,
    last_ok_time: Option<i64>,
    #[pyo3(get)]
    ok_sends_in_order: bool,
}

impl Pairing {
    /// The rows of `both`: the carried lines (0..k), then the chunk's own (k..k + n).
    fn pair(&mut self, own: &Own, n: usize) -> Paired {
        let carry = std::mem::take(&mut self.carry);
        let k = carry.len();
        let m = k + n;
        let line = |i: usize| if i < k { carry[i] } else { own.line(i - k) };
        let (mut kinds, mut fs) = (Vec::with_capacity(m), Vec::with_capacity(m));
        let mut prev: Vec<Option<usize>> = vec![None; m];
        let mut next: Vec<Option<usize>> = vec![None; m];
        let mut has_process = vec![false; m];
        let mut last: AHashMap<i64, usize> = AHashMap::with_capacity(1024);
        for i in 0..m {
            let (process, kind, f) = if i < k {
                (carry[i].process, carry[i].kind, carry[i].f)
            } else {
                (
                    own.process.get(i - k),
                    own.kind.get(i - k),
                    own.f.get(i - k),
                )
            };
            kinds.push(kind);
            fs.push(f);
            if let Some(p) = process {
                has_process[i] = true;
                if let Some(j) = last.insert(p, i) {
                    prev[i] = Some(j);
                    next[j] = Some(i);
                }
            }
        }
        let mut epoch: Vec<Option<i64>> = vec![None; m];
        let mut reads = Vec::with_capacity(n);
        let mut own_epoch = Optional::with_capacity(n);
        for i in 0..m {
            let (kind, f) = (kinds[i], fs[i]);
            let (prev_kind, prev_f) = prev[i].map_or((None, None), |j| (kinds[j], fs[j]));
            let carried = i < k;
            if has_process[i] {
                let invoke = is(kind, INVOKE);
                let after_poll = is(prev_kind, INVOKE) && is(prev_f, POLL);
                let unsure = !invoke && after_poll && (is(kind, INFO_TYPE) || is(f, CRASH));
                let resets =
                    !carried && ((invoke && is(f, ASSIGN)) || unsure || (invoke && after_poll));
                let base = match prev[i] {
                    Some(j) => epoch[j].unwrap_or(0),
                    None if carried => carry[i].epoch.unwrap_or(0),
                    None => 0,
                };
                epoch[i] = Some(base + i64::from(resets));
            }
            if carried {
                continue;
            }
            if !is(kind, INVOKE) && !is(f, CRASH) && !is(prev_kind, INVOKE) {
                self.orphans += 1;
                if let Some(index) = own.index.get(i - k) {
                    self.first_orphan = Some(self.first_orphan.map_or(index, |f| f.min(index)));
                }
            }
            reads.push(
                is(kind, OK_TYPE) && !is(f, CRASH) && is(prev_kind, INVOKE) && is(prev_f, POLL),
            );
            own_epoch.push(epoch[i]);
        }
        let mut operations = Operations::with_capacity(m / 2 + 1);
        for i in 0..m {
            if let (true, Some(j)) = (is(kinds[i], INVOKE), next[i]) {
                operations.push(&line(i), Some(&line(j)));
            }
        }
        self.link_acks(&mut operations);
        self.link_ok_sends(&mut operations);
        self.carry = (0..m)
            .filter(|&i| next[i].is_none())
            .map(|i| Line {
                epoch: epoch[i],
                ..line(i)
            })
            .collect();
        Paired {
            operations,
            reads,
            epoch: own_epoch,
        }
    }

    /// Each ack's previous ack of its process on its partition (`checkers.parquet_links.Links`).
    fn link_acks(&mut self, ops: &mut Operations) {
        for r in 0..ops.rows() {
            let (process, tp, offset, value) = (
                ops.process.get(r),
                ops.tp.get(r),
                ops.offset.get(r),
                ops.value.get(r),
            );
            let ack = ops.f.get(r) == Some(SEND)
                && value.is_some()
                && ops.outcome[r] == OK
                && offset.is_some_and(|o| o >= 0)
                && tp.is_some();
            let mut before = None;
            if let (true, Some(p), Some(t)) = (ack, process, tp) {
                before = self.acks.insert((p, t), (ops.index.get(r), offset, value));
            }
            let (i, o, v) = before.unwrap_or((None, None, None));
            ops.prev_index.push(i);
            ops.prev_offset.push(o);
            ops.prev_value.push(v);
        }
    }

    /// Each ok send with the completion time of the ok send before it in completion order.
    fn link_ok_sends(&mut self, ops: &mut Operations) {
        let n = ops.rows();
        // By completion index, nulls last, stable (Arrow's sort_indices): the row breaks ties.
        let mut ok: Vec<(bool, i64, usize)> = (0..n)
            .filter(|&r| ops.f.get(r) == Some(SEND) && ops.outcome[r] == OK)
            .map(|r| {
                let index = ops.index.get(r);
                (index.is_none(), index.unwrap_or(0), r)
            })
            .collect();
        let mut before: Vec<Option<i64>> = vec![None; n];
        if !ok.is_empty() {
            ok.sort_unstable();
            let mut last = self.last_ok_time;
            for &(_, _, r) in &ok {
                let time = ops.time.get(r);
                match (time, last) {
                    (None, _) => self.ok_sends_in_order = false,
                    (Some(t), Some(l)) if t < l => self.ok_sends_in_order = false,
                    _ => {}
                }
                before[r] = last;
                last = time;
            }
            self.last_ok_time = last;
        }
        for b in before {
            ops.prev_ok_time.push(b);
        }
    }
}

#[pymethods]
impl Pairing {
    #[new]
    fn new() -> Self {
        Pairing {
            carry: Vec::new(),
            orphans: 0,
            first_orphan: None,
            acks: AHashMap::new(),
            last_ok_time: None,
            ok_sends_in_order: true,
        }
    }

    /// One chunk's client lines (`n` rows; the views of index, time, process, type code, f code,
    /// topic id, partition, value, offset, bad_records as int8, tp): the buffers of its operations'
    /// columns, and per line `reads` (bits) and `epoch`. The GIL is released while pairing.
    fn feed<'py>(
        &mut self,
        py: Python<'py>,
        n: usize,
        columns: Vec<View>,
    ) -> PyResult<Bound<'py, PyDict>> {
        expect_columns(&columns, 11)?;
        let paired = py.detach(|| self.pair(&Own::new(&columns), n));
        let d = PyDict::new(py);
        paired.operations.put(&d)?;
        put(&d, "reads", &bitmap(&paired.reads))?;
        put_optional(&d, "epoch", &paired.epoch)?;
        Ok(d)
    }

    /// The operations still open at the end of the history (the carried invocations).
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let mut operations = Operations::with_capacity(self.carry.len());
        for line in self.carry.iter().filter(|l| is(l.kind, INVOKE)) {
            operations.push(line, None);
            operations.prev_index.push(None);
            operations.prev_offset.push(None);
            operations.prev_value.push(None);
            operations.prev_ok_time.push(None);
        }
        let d = PyDict::new(py);
        operations.put(&d)?;
        Ok(d)
    }
}

/// Each well-formed read's previous read of its process on its partition in the same position
/// epoch (`checkers.parquet_links.Links` over reads): the last read of each process and partition
/// is kept whatever its epoch.
#[pyclass(module = "checkers._native")]
pub(crate) struct ReadLinks {
    last: AHashMap<(i64, i64), Last>,
}

#[pymethods]
impl ReadLinks {
    #[new]
    fn new() -> Self {
        ReadLinks {
            last: AHashMap::new(),
        }
    }

    /// `n` reads (the views of process, tp, epoch, offset, index, value): prev_offset, prev_index.
    fn feed<'py>(
        &mut self,
        py: Python<'py>,
        n: usize,
        columns: Vec<View>,
    ) -> PyResult<Bound<'py, PyDict>> {
        expect_columns(&columns, 6)?;
        let (prev_offset, prev_index) = py.detach(|| {
            let c: Vec<Col<i64>> = columns.iter().map(|&v| Col::new(v)).collect();
            let (mut prev_offset, mut prev_index) =
                (Optional::with_capacity(n), Optional::with_capacity(n));
            for r in 0..n {
                let (process, tp, epoch, offset, index) = (
                    c[0].get(r),
                    c[1].get(r),
                    c[2].get(r),
                    c[3].get(r),
                    c[4].get(r),
                );
                let well_formed = tp.is_some() && offset.is_some() && c[5].get(r).is_some();
                let mut linked = (None, None);
                if let (true, Some(p), Some(t)) = (well_formed, process, tp) {
                    if let Some((e, o, i)) = self.last.insert((p, t), (epoch, offset, index)) {
                        if e.is_some() && e == epoch {
                            linked = (o, i);
                        }
                    }
                }
                prev_offset.push(linked.0);
                prev_index.push(linked.1);
            }
            (prev_offset, prev_index)
        });
        let d = PyDict::new(py);
        put_optional(&d, "prev_offset", &prev_offset)?;
        put_optional(&d, "prev_index", &prev_index)?;
        Ok(d)
    }
}
