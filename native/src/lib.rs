//! The conversion's native part (`checkers._native`): the strict reader of history lines (here) and
//! the pairing and links (`pairing`).
//!
//! History lines -> the buffers of Arrow columns, strictly, or nothing.
//!
//! The conversion (`checkers.parquet_strict`) hands over a chunk of whole history lines. Lines whose
//! `process` is the string "nemesis" are left out and their places handed back (the nemesis journals
//! free-form JSON; the conversion reads those few lines with Python's `json`). The chunk is kept only
//! when every other line that is not blank is a JSON object whose fields of the history's format
//! have exactly their JSON type: `index`, `time` and `process`
//! integers, `type` and `f` strings of the kinds given, the optional `topic` a string, `partition`,
//! `offset` and `value` integers, `records` a list of objects with those four, all in range. Any
//! other line (a float where an integer belongs, a string number, a missing field, bad JSON, bad
//! UTF-8, a duplicated field, a `bad_records` key) makes the answer None: the line-by-line reader
//! (`history.reader` rules) then reads the chunk and decides, so what is kept here is exactly what
//! that reader keeps, only faster. Fields the format does not name are checked as JSON and skipped.

use std::borrow::Cow;

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::columns::{put, put_bits, put_nullable, raw, Bits, Nullable};

mod columns;
mod pairing;
use serde::Deserialize;

/// A JSON string, borrowed from the line unless it holds escapes.
struct Text<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(s.to_owned())))
            }
        }
        d.deserialize_str(Visit)
    }
}

fn text<'a>(t: &'a Option<Text<'_>>) -> Option<&'a str> {
    t.as_ref().map(|t| &*t.0)
}

/// One polled record.
#[derive(Deserialize)]
struct Record<'a> {
    #[serde(borrow)]
    topic: Option<Text<'a>>,
    partition: Option<i64>,
    offset: Option<i64>,
    value: Option<i64>,
}

/// One history line, as far as the conversion reads it.
#[derive(Deserialize)]
struct Line<'a> {
    index: Option<i64>,
    time: Option<i64>,
    process: Option<i64>,
    #[serde(rename = "type", borrow)]
    kind: Option<Text<'a>>,
    #[serde(borrow)]
    f: Option<Text<'a>>,
    #[serde(borrow)]
    topic: Option<Text<'a>>,
    partition: Option<i64>,
    value: Option<i64>,
    offset: Option<i64>,
    #[serde(borrow)]
    records: Option<Vec<Record<'a>>>,
    bad_records: Option<serde::de::IgnoredAny>,
}

/// Just the `process` of a line, when it is a string (a nemesis line's).
#[derive(Deserialize)]
struct Tagged<'a> {
    #[serde(borrow)]
    process: Text<'a>,
}

/// A nullable UTF-8 column: validity, 32-bit offsets, data.
struct Strings {
    valid: Bits,
    offsets: Vec<i32>,
    data: Vec<u8>,
}

impl Default for Strings {
    fn default() -> Self {
        Strings {
            valid: Bits::default(),
            offsets: vec![0],
            data: Vec::new(),
        }
    }
}

impl Strings {
    /// None when the column outgrows 32-bit offsets.
    fn push(&mut self, s: Option<&str>) -> Option<()> {
        self.valid.push(s.is_some());
        if let Some(s) = s {
            self.data.extend_from_slice(s.as_bytes());
        }
        self.offsets.push(i32::try_from(self.data.len()).ok()?);
        Some(())
    }
}

/// The chunk's columns; `kind` and `f` as positions in the names the caller gave; where the nemesis
/// lines are (start and end byte, without the newline).
struct Columns {
    nemesis: Vec<(usize, usize)>,
    index: Vec<i64>,
    time: Vec<i64>,
    process: Vec<i64>,
    kind: Vec<i8>,
    f: Vec<i8>,
    topic: Strings,
    partition: Nullable<i32>,
    value: Nullable<i64>,
    offset: Nullable<i64>,
    records: Bits,
    record_offsets: Vec<i32>,
    record_topic: Strings,
    record_partition: Nullable<i32>,
    record_offset: Nullable<i64>,
    record_value: Nullable<i64>,
}

impl Columns {
    fn new() -> Self {
        Columns {
            nemesis: Vec::new(),
            index: Vec::new(),
            time: Vec::new(),
            process: Vec::new(),
            kind: Vec::new(),
            f: Vec::new(),
            topic: Strings::default(),
            partition: Nullable::default(),
            value: Nullable::default(),
            offset: Nullable::default(),
            records: Bits::default(),
            record_offsets: vec![0],
            record_topic: Strings::default(),
            record_partition: Nullable::default(),
            record_offset: Nullable::default(),
            record_value: Nullable::default(),
        }
    }

    /// Adds one line; None when it is not one this reader keeps as is.
    fn push(&mut self, op: Line<'_>, kinds: &[String], fs: &[String]) -> Option<()> {
        if op.bad_records.is_some() {
            return None;
        }
        self.index.push(op.index?);
        self.time.push(op.time?);
        self.process.push(op.process?);
        self.kind.push(code(text(&op.kind)?, kinds)?);
        self.f.push(code(text(&op.f)?, fs)?);
        self.topic.push(text(&op.topic))?;
        self.partition.push(partition(op.partition)?);
        self.value.push(op.value);
        self.offset.push(op.offset);
        self.records.push(op.records.is_some());
        for r in op.records.iter().flatten() {
            self.record_topic.push(text(&r.topic))?;
            self.record_partition.push(partition(r.partition)?);
            self.record_offset.push(r.offset);
            self.record_value.push(r.value);
        }
        self.record_offsets
            .push(i32::try_from(self.record_value.values.len()).ok()?);
        Some(())
    }
}

fn code(name: &str, names: &[String]) -> Option<i8> {
    names
        .iter()
        .position(|n| n == name)
        .and_then(|i| i8::try_from(i).ok())
}

/// A partition that fits Arrow's int32 (Some(None): absent or null; None: out of range).
fn partition(p: Option<i64>) -> Option<Option<i32>> {
    match p {
        None => Some(None),
        Some(p) => i32::try_from(p).ok().map(Some),
    }
}

/// Blank as the history's readers skip it (JSON whitespace only; other lines go to JSON).
fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r'))
}

/// The columns of every line of the chunk, or None when one line is not one this reader keeps.
fn parse(chunk: &[u8], kinds: &[String], fs: &[String]) -> Option<Columns> {
    let mut columns = Columns::new();
    let mut start = 0;
    for end in memchr::memchr_iter(b'\n', chunk).chain(std::iter::once(chunk.len())) {
        let line = &chunk[start..end];
        start = end + 1;
        if is_blank(line) {
            continue;
        }
        match sonic_rs::from_slice::<Line>(line) {
            Ok(op) => columns.push(op, kinds, fs)?,
            // A nemesis line (the caller reads it, and decides); any other: the line-by-line reader.
            Err(_) => match sonic_rs::from_slice::<Tagged>(line) {
                Ok(t) if t.process.0 == "nemesis" => columns.nemesis.push((end - line.len(), end)),
                _ => return None,
            },
        }
    }
    Some(columns)
}

fn put_strings(d: &Bound<'_, PyDict>, key: &str, s: &Strings) -> PyResult<()> {
    put_bits(d, &format!("{key}.valid"), &s.valid)?;
    put(d, &format!("{key}.offsets"), raw(&s.offsets))?;
    put(d, key, &s.data)
}

/// The buffers of a chunk's columns by name (`rows`, `index`, `topic.valid`, `topic.offsets`, ...)
/// and the nemesis lines' (start, end) in `nemesis`, or None when a line needs the line-by-line reader. `kinds` and `fs`: the `type` and `f` values
/// kept, whose positions the `type` and `f` buffers hold. The GIL is released while reading.
#[pyfunction]
fn read<'py>(
    py: Python<'py>,
    chunk: PyBuffer<u8>,
    kinds: Vec<String>,
    fs: Vec<String>,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    if !chunk.is_c_contiguous() {
        return Ok(None);
    }
    let (at, len) = (chunk.buf_ptr() as usize, chunk.len_bytes());
    // SAFETY: `chunk` holds the exported buffer (and so its memory) until this function returns.
    let lines = unsafe { std::slice::from_raw_parts(at as *const u8, len) };
    let Some(c) = py.detach(|| parse(lines, &kinds, &fs)) else {
        return Ok(None);
    };
    let d = PyDict::new(py);
    d.set_item("nemesis", c.nemesis)?;
    d.set_item("rows", c.index.len())?;
    put(&d, "index", raw(&c.index))?;
    put(&d, "time", raw(&c.time))?;
    put(&d, "process", raw(&c.process))?;
    put(&d, "type", raw(&c.kind))?;
    put(&d, "f", raw(&c.f))?;
    put_strings(&d, "topic", &c.topic)?;
    put_nullable(&d, "partition", &c.partition)?;
    put_nullable(&d, "value", &c.value)?;
    put_nullable(&d, "offset", &c.offset)?;
    put_bits(&d, "records.valid", &c.records)?;
    put(&d, "records.offsets", raw(&c.record_offsets))?;
    d.set_item("records.rows", c.record_value.values.len())?;
    put_strings(&d, "records.topic", &c.record_topic)?;
    put_nullable(&d, "records.partition", &c.record_partition)?;
    put_nullable(&d, "records.offset", &c.record_offset)?;
    put_nullable(&d, "records.value", &c.record_value)?;
    Ok(Some(d))
}

/// How many lines end in the chunk (its newlines), counted without the GIL: Python's count of a
/// byte looks at each one, a third of a second per gigabyte of history.
#[pyfunction]
fn count_lines(py: Python<'_>, chunk: PyBuffer<u8>) -> PyResult<usize> {
    if !chunk.is_c_contiguous() {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "a contiguous buffer expected",
        ));
    }
    let (at, len) = (chunk.buf_ptr() as usize, chunk.len_bytes());
    // SAFETY: `chunk` holds the exported buffer (and so its memory) until this function returns.
    Ok(py.detach(|| {
        memchr::memchr_iter(b'\n', unsafe {
            std::slice::from_raw_parts(at as *const u8, len)
        })
        .count()
    }))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(read, m)?)?;
    m.add_function(wrap_pyfunction!(count_lines, m)?)?;
    m.add_class::<pairing::Pairing>()?;
    m.add_class::<pairing::ReadLinks>()?;
    Ok(())
}
