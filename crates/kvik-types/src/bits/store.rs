//! The byte store the bit algorithms run on. A plain `Vec<u8>` is one; the storage layer's
//! segmented bitmap is another: it visits a range segment by segment and reports missing
//! segments as zero runs, so nothing the size of the value is ever materialised.

use std::ops::ControlFlow;

/// A piece of a visited range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chunk<'a> {
    /// Stored bytes.
    Bytes(&'a [u8]),
    /// This many zero bytes (e.g. a segment that was never written).
    Zeros(u64),
}

impl Chunk<'_> {
    pub fn len(&self) -> u64 {
        match self {
            Chunk::Bytes(b) => b.len() as u64,
            Chunk::Zeros(n) => *n,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Read access to a string value's bytes.
pub trait BitRead {
    /// The value's length in bytes (STRLEN).
    fn byte_len(&self) -> u64;

    /// Calls `f` with the bytes of `[start, end)` in order, `end <= byte_len()`, as stored
    /// bytes or zero runs, until the range is covered or `f` breaks.
    fn visit(&self, start: u64, end: u64, f: &mut dyn FnMut(Chunk<'_>) -> ControlFlow<()>);

    /// Copies the bytes at `offset` into `buf`; bytes past the end read as zero.
    fn read_at(&self, offset: u64, buf: &mut [u8]) {
        buf.fill(0);
        let len = self.byte_len();
        if offset >= len {
            return;
        }
        let end = (offset + buf.len() as u64).min(len);
        let mut pos = 0usize;
        self.visit(offset, end, &mut |chunk| {
            if let Chunk::Bytes(b) = chunk {
                buf[pos..pos + b.len()].copy_from_slice(b);
            }
            pos += chunk.len() as usize;
            ControlFlow::Continue(())
        });
    }
}

/// Write access: the storage layer turns these into segment writes.
pub trait BitWrite: BitRead {
    /// Grows the value with zero bytes to at least `len` bytes (SETBIT and BITFIELD do this
    /// before writing, as Redis does).
    fn grow_to(&mut self, len: u64);

    /// Overwrites bytes at `offset` (within the length after [`BitWrite::grow_to`]).
    fn write_at(&mut self, offset: u64, data: &[u8]);
}

impl BitRead for [u8] {
    fn byte_len(&self) -> u64 {
        self.len() as u64
    }

    fn visit(&self, start: u64, end: u64, f: &mut dyn FnMut(Chunk<'_>) -> ControlFlow<()>) {
        let _ = f(Chunk::Bytes(&self[start as usize..end as usize]));
    }
}

impl BitRead for Vec<u8> {
    fn byte_len(&self) -> u64 {
        self.as_slice().byte_len()
    }

    fn visit(&self, start: u64, end: u64, f: &mut dyn FnMut(Chunk<'_>) -> ControlFlow<()>) {
        self.as_slice().visit(start, end, f)
    }
}

impl BitWrite for Vec<u8> {
    fn grow_to(&mut self, len: u64) {
        if (self.len() as u64) < len {
            self.resize(len as usize, 0);
        }
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) {
        let at = offset as usize;
        self[at..at + data.len()].copy_from_slice(data);
    }
}

/// A sparse test store: fixed-size segments, absent ones reported as zero runs. It is the
/// shape the storage layer uses, kept here so every algorithm is tested against it too.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Segmented {
    pub segment_len: usize,
    pub len: u64,
    pub segments: std::collections::BTreeMap<u64, Vec<u8>>,
}

impl Segmented {
    pub fn new(segment_len: usize) -> Segmented {
        Segmented {
            segment_len,
            ..Segmented::default()
        }
    }

    /// The value as one byte string (for tests).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.len as usize];
        self.read_at(0, &mut out);
        out
    }
}

impl BitRead for Segmented {
    fn byte_len(&self) -> u64 {
        self.len
    }

    fn visit(&self, start: u64, end: u64, f: &mut dyn FnMut(Chunk<'_>) -> ControlFlow<()>) {
        let seg = self.segment_len as u64;
        let mut pos = start;
        while pos < end {
            let index = pos / seg;
            let within = (pos % seg) as usize;
            let take = (seg - within as u64).min(end - pos);
            let chunk = match self.segments.get(&index) {
                Some(s) => Chunk::Bytes(&s[within..within + take as usize]),
                None => Chunk::Zeros(take),
            };
            if f(chunk).is_break() {
                return;
            }
            pos += take;
        }
    }
}

impl BitWrite for Segmented {
    fn grow_to(&mut self, len: u64) {
        self.len = self.len.max(len);
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) {
        let seg = self.segment_len as u64;
        for (i, &b) in data.iter().enumerate() {
            let pos = offset + i as u64;
            let s = self
                .segments
                .entry(pos / seg)
                .or_insert_with(|| vec![0u8; self.segment_len]);
            s[(pos % seg) as usize] = b;
        }
    }
}
