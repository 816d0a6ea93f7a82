//! Arrow columns being built in Rust and handed to Python as the buffers Arrow is made of.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

/// An Arrow validity bitmap being filled.
#[derive(Default)]
pub(crate) struct Bits {
    pub(crate) bytes: Vec<u8>,
    len: usize,
    pub(crate) nulls: usize,
}

impl Bits {
    pub(crate) fn push(&mut self, valid: bool) {
        if self.len % 8 == 0 {
            self.bytes.push(0);
        }
        if valid {
            *self.bytes.last_mut().expect("a byte was pushed") |= 1 << (self.len % 8);
        } else {
            self.nulls += 1;
        }
        self.len += 1;
    }
}

/// A nullable column of integers.
#[derive(Default)]
pub(crate) struct Nullable<T> {
    pub(crate) valid: Bits,
    pub(crate) values: Vec<T>,
}

impl<T: Default + Copy> Nullable<T> {
    pub(crate) fn push(&mut self, v: Option<T>) {
        self.valid.push(v.is_some());
        self.values.push(v.unwrap_or_default());
    }
}

pub(crate) fn raw<T: Copy>(v: &[T]) -> &[u8] {
    // SAFETY: plain integers, read as the bytes they are made of (native order, as Arrow's).
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

pub(crate) fn put(d: &Bound<'_, PyDict>, key: &str, bytes: &[u8]) -> PyResult<()> {
    d.set_item(key, PyBytes::new(d.py(), bytes))
}

/// A validity bitmap, or None when nothing is null (Arrow's way to say so).
pub(crate) fn put_bits(d: &Bound<'_, PyDict>, key: &str, bits: &Bits) -> PyResult<()> {
    if bits.nulls == 0 {
        d.set_item(key, d.py().None())
    } else {
        put(d, key, &bits.bytes)
    }
}

pub(crate) fn put_nullable<T: Copy>(
    d: &Bound<'_, PyDict>,
    key: &str,
    n: &Nullable<T>,
) -> PyResult<()> {
    put_bits(d, &format!("{key}.valid"), &n.valid)?;
    put(d, key, raw(&n.values))
}

/// A nullable column of integers whose validity is packed into Arrow's bitmap only when handed
/// over: cheaper to fill than `Nullable` when most rows are written one field at a time.
pub(crate) struct Optional<T> {
    pub(crate) values: Vec<T>,
    valid: Vec<bool>,
    nulls: usize,
}

impl<T: Default + Copy> Optional<T> {
    pub(crate) fn with_capacity(n: usize) -> Self {
        Optional {
            values: Vec::with_capacity(n),
            valid: Vec::with_capacity(n),
            nulls: 0,
        }
    }

    #[inline]
    pub(crate) fn push(&mut self, v: Option<T>) {
        self.valid.push(v.is_some());
        self.nulls += usize::from(v.is_none());
        self.values.push(v.unwrap_or_default());
    }

    #[inline]
    pub(crate) fn get(&self, i: usize) -> Option<T> {
        self.valid[i].then(|| self.values[i])
    }
}

/// Booleans as Arrow's bitmap (a validity, or a boolean column's data).
pub(crate) fn bitmap(bits: &[bool]) -> Vec<u8> {
    bits.chunks(8)
        .map(|byte| {
            byte.iter()
                .enumerate()
                .fold(0u8, |b, (i, &set)| b | (u8::from(set) << i))
        })
        .collect()
}

pub(crate) fn put_optional<T: Copy>(
    d: &Bound<'_, PyDict>,
    key: &str,
    n: &Optional<T>,
) -> PyResult<()> {
    if n.nulls == 0 {
        d.set_item(format!("{key}.valid"), d.py().None())?;
    } else {
        put(d, &format!("{key}.valid"), &bitmap(&n.valid))?;
    }
    put(d, key, raw(&n.values))
}
