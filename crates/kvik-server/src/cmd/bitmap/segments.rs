//! The segmented bitmap: a string kept as fixed-size segments under a version (layout and
//! sizes in `storage/encoding.rs`), read and written through `kvik_types::bits`'s byte-store
//! traits so the bit algorithms never see the difference.
//!
//! Reads load only the segments they need into a sparse [`Segmented`] store (missing segments
//! read as zeros); [`write_bits`] is the one write path of the bit commands: it decides between
//! the inline string and the segments, converts an inline string that grows past the limit,
//! and writes back only the segments the command changed.

use crate::cmd::ctx::{CmdError, Ctx};
use crate::storage::encoding::{Kind, Meta, BITMAP_INLINE_MAX, BITMAP_SEGMENT_LEN};
use crate::storage::{Batch, Cf, Coll, View};
use bytes::Bytes;
use kvik_types::bits::store::Segmented;
use kvik_types::bits::{BitRead, BitWrite, Chunk};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ops::{ControlFlow, Range};

const SEG: u64 = BITMAP_SEGMENT_LEN as u64;
/// Up to this many segments are read with point reads (a multi-get), more with an iterator.
const POINT_READS_MAX: u64 = 16;
/// A whole value, or a visited range, of up to this many segments (256 KiB) is read with one
/// multi-get too: an iterator must step over every older version of each segment still in the
/// memtable and L0 (a SETBIT rewrites its segment), which made BITCOUNT of a hot 125 KB bitmap
/// twice as slow as point reads, which find the newest version first.
const WHOLE_POINT_READS_MAX: u64 = 64;

/// A string's bytes as the bit algorithms read them: inline, the loaded part of a segmented
/// bitmap, or a segmented bitmap read in place ([`Stored`]).
pub enum BitValue<'a> {
    Inline(Bytes),
    Segments(Segmented),
    Stored(Stored<'a>),
}

impl BitValue<'_> {
    /// The storage error a [`Stored`] value met while it was read (the byte-store traits have
    /// no error channel); check it after running an algorithm.
    pub fn check(&self) -> Result<(), CmdError> {
        match self {
            BitValue::Stored(s) => s.error.borrow_mut().take().map_or(Ok(()), Err),
            _ => Ok(()),
        }
    }

    /// The whole value as one string.
    pub fn to_vec(&self) -> Result<Vec<u8>, CmdError> {
        let mut out = vec![0u8; self.byte_len() as usize];
        self.read_at(0, &mut out);
        self.check()?;
        Ok(out)
    }
}

impl BitRead for BitValue<'_> {
    fn byte_len(&self) -> u64 {
        match self {
            BitValue::Inline(b) => b.len() as u64,
            BitValue::Segments(s) => s.byte_len(),
            BitValue::Stored(s) => s.byte_len(),
        }
    }

    fn visit(&self, start: u64, end: u64, f: &mut dyn FnMut(Chunk<'_>) -> ControlFlow<()>) {
        match self {
            BitValue::Inline(b) => b[..].visit(start, end, f),
            BitValue::Segments(s) => s.visit(start, end, f),
            BitValue::Stored(s) => s.visit(start, end, f),
        }
    }
}

/// A segmented bitmap read in place from a snapshot: a visit walks the stored segments of its
/// range with one iterator, hands their bytes over without copying and reports the gaps as
/// zero runs, so BITCOUNT or BITPOS of a range reads only that range's segments.
pub struct Stored<'a> {
    view: View<'a>,
    db: u16,
    key: Vec<u8>,
    meta: Meta,
    error: RefCell<Option<CmdError>>,
}

impl BitRead for Stored<'_> {
    fn byte_len(&self) -> u64 {
        self.meta.len
    }

    fn visit(&self, start: u64, end: u64, f: &mut dyn FnMut(Chunk<'_>) -> ControlFlow<()>) {
        let coll = Coll::new(self.db, &self.key, &self.meta);
        if let Err(e) = visit_stored(&self.view, &coll, start, end, f) {
            *self.error.borrow_mut() = Some(e);
        }
    }
}

/// Hands `f` bytes `start..end` of the segmented value `coll` as stored in `view`: the stored
/// segments' bytes without copying, the gaps as zero runs. Up to [`WHOLE_POINT_READS_MAX`]
/// segments are read with one multi-get, more with one iterator (a wide range: most may be
/// absent).
fn visit_stored(
    view: &View<'_>,
    coll: &Coll<'_>,
    start: u64,
    end: u64,
    f: &mut dyn FnMut(Chunk<'_>) -> ControlFlow<()>,
) -> Result<(), CmdError> {
    let mut pos = start;
    let flow = match segments_of(&(start..end)) {
        Some((first, last)) if last - first < WHOLE_POINT_READS_MAX => {
            let indexes: Vec<[u8; 8]> = (first..=last).map(u64::to_be_bytes).collect();
            let values = view.get_members(coll, &indexes)?;
            let mut flow = ControlFlow::Continue(());
            for (index, bytes) in (first..=last).zip(values) {
                if let Some(bytes) = bytes {
                    flow = emit_segment(f, &mut pos, end, index * SEG, &bytes);
                    if flow.is_break() {
                        break;
                    }
                }
            }
            flow
        }
        Some((first, _)) => {
            let mut c = view.members(Cf::Data, coll);
            c.seek(&first.to_be_bytes());
            let mut flow = ControlFlow::Continue(());
            while pos < end {
                let Some((member, bytes)) = c.entry() else {
                    break;
                };
                let Ok(index) = <[u8; 8]>::try_from(member) else {
                    break;
                };
                let seg_start = u64::from_be_bytes(index) * SEG;
                if seg_start >= end {
                    break;
                }
                flow = emit_segment(f, &mut pos, end, seg_start, bytes);
                if flow.is_break() {
                    break;
                }
                c.next();
            }
            c.status()?;
            flow
        }
        None => ControlFlow::Continue(()),
    };
    if flow.is_continue() && pos < end {
        let _ = f(Chunk::Zeros(end - pos));
    }
    Ok(())
}

/// Hands `f` the stored segment at `seg_start` (its `bytes`, possibly shorter than a segment)
/// as far as it lies in `pos..end`, the gap before it and its unstored tail as zero runs, and
/// moves `pos` past it.
fn emit_segment(
    f: &mut dyn FnMut(Chunk<'_>) -> ControlFlow<()>,
    pos: &mut u64,
    end: u64,
    seg_start: u64,
    bytes: &[u8],
) -> ControlFlow<()> {
    if seg_start > *pos {
        f(Chunk::Zeros(seg_start - *pos))?;
        *pos = seg_start;
    }
    let seg_end = (seg_start + SEG).min(end);
    let from = (*pos - seg_start) as usize;
    let stored = bytes.len().min((seg_end - seg_start) as usize);
    if from < stored {
        f(Chunk::Bytes(&bytes[from..stored]))?;
        *pos = seg_start + stored as u64;
    }
    if seg_end > *pos {
        f(Chunk::Zeros(seg_end - *pos))?;
        *pos = seg_end;
    }
    ControlFlow::Continue(())
}

/// The segments covering byte range `bytes` (none for an empty range).
fn segments_of(bytes: &Range<u64>) -> Option<(u64, u64)> {
    (bytes.start < bytes.end).then(|| (bytes.start / SEG, (bytes.end - 1) / SEG))
}

/// Loads into `store` the stored segments `first..=last` of `coll`.
fn load_segments(
    view: &View<'_>,
    coll: &Coll<'_>,
    store: &mut Segmented,
    first: u64,
    last: u64,
) -> Result<(), CmdError> {
    let mut c = view.members(Cf::Data, coll);
    c.seek(&first.to_be_bytes());
    while let Some((member, value)) = c.entry() {
        let Ok(index) = <[u8; 8]>::try_from(member) else {
            break;
        };
        let index = u64::from_be_bytes(index);
        if index > last {
            break;
        }
        let mut bytes = value.to_vec();
        bytes.resize(BITMAP_SEGMENT_LEN, 0);
        store.segments.insert(index, bytes);
        c.next();
    }
    c.status()?;
    Ok(())
}

/// The part of a segmented bitmap (`meta`, kind Bitmap) that covers the byte ranges `spans`
/// (`None`: all of it), read from `view`.
pub fn load(
    view: &View<'_>,
    db: u16,
    key: &[u8],
    meta: &Meta,
    spans: Option<&[Range<u64>]>,
) -> Result<Segmented, CmdError> {
    let mut store = Segmented::new(BITMAP_SEGMENT_LEN);
    store.len = meta.len;
    let coll = Coll::new(db, key, meta);
    let whole = 0..meta.len;
    // Segments past the value's end do not exist; one that holds its end may also hold the
    // first bytes past it that a write grows into, so spans are cut at segments, not bytes.
    let Some((_, last_stored)) = segments_of(&(0..meta.len)) else {
        return Ok(store);
    };
    let ranges: Vec<(u64, u64)> = spans
        .unwrap_or(std::slice::from_ref(&whole))
        .iter()
        .filter_map(segments_of)
        .filter(|&(first, _)| first <= last_stored)
        .map(|(first, last)| (first, last.min(last_stored)))
        .collect();
    let count: u64 = ranges.iter().map(|(f, l)| l - f + 1).sum();
    let point_reads_max = if spans.is_some() {
        POINT_READS_MAX
    } else {
        WHOLE_POINT_READS_MAX
    };
    if count <= point_reads_max {
        // A few segments (SETBIT, GETBIT, BITFIELD, a small whole bitmap): point reads,
        // cheaper than an iterator.
        let indexes: Vec<[u8; 8]> = ranges
            .iter()
            .flat_map(|&(f, l)| (f..=l).map(u64::to_be_bytes))
            .collect();
        for (index, value) in indexes.iter().zip(view.get_members(&coll, &indexes)?) {
            if let Some(mut bytes) = value {
                bytes.resize(BITMAP_SEGMENT_LEN, 0);
                store.segments.insert(u64::from_be_bytes(*index), bytes);
            }
        }
    } else {
        for (first, last) in ranges {
            load_segments(view, &coll, &mut store, first, last)?;
        }
    }
    Ok(store)
}

/// Appends the whole value of a segmented bitmap to `out` (GET and the other string
/// commands), copied once from the stored segments.
pub fn read_whole(
    view: &View<'_>,
    db: u16,
    key: &[u8],
    meta: &Meta,
    out: &mut Vec<u8>,
) -> Result<(), CmdError> {
    let coll = Coll::new(db, key, meta);
    visit_stored(view, &coll, 0, meta.len, &mut |chunk| {
        match chunk {
            Chunk::Bytes(b) => out.extend_from_slice(b),
            Chunk::Zeros(n) => out.resize(out.len() + n as usize, 0),
        }
        ControlFlow::Continue(())
    })
}

/// The whole value of a segmented bitmap as one string.
pub fn materialize(view: &View<'_>, db: u16, key: &[u8], meta: &Meta) -> Result<Vec<u8>, CmdError> {
    let mut out = Vec::with_capacity(meta.len as usize);
    read_whole(view, db, key, meta, &mut out)?;
    Ok(out)
}

/// A key's value for a bit read: `None` if absent, WRONGTYPE unless a string. A segmented
/// bitmap's segments covering `spans` are loaded; with `None` it is read in place ([`Stored`]).
/// Counts a keyspace hit or miss.
pub fn read<'a>(
    ctx: &Ctx<'a>,
    key: &[u8],
    spans: Option<&[Range<u64>]>,
) -> Result<Option<BitValue<'a>>, CmdError> {
    match ctx.lookup_read(key)? {
        None => Ok(None),
        Some(m) if m.kind == Kind::String => Ok(Some(BitValue::Inline(Bytes::from(m.value)))),
        Some(m) if m.kind == Kind::Bitmap => {
            // Meta from the same snapshot as the segments, so they agree.
            let view = ctx.view();
            match view.get_live(ctx.db(), key, ctx.now_ms)? {
                Some(m) if m.kind == Kind::Bitmap => Ok(Some(match spans {
                    Some(spans) => BitValue::Segments(load(&view, ctx.db(), key, &m, Some(spans))?),
                    None => BitValue::Stored(Stored {
                        view,
                        db: ctx.db(),
                        key: key.to_vec(),
                        meta: m,
                        error: RefCell::new(None),
                    }),
                })),
                Some(m) if m.kind == Kind::String => Ok(Some(BitValue::Inline(m.value.into()))),
                Some(_) => Err(CmdError::wrong_type()),
                None => Ok(None),
            }
        }
        Some(_) => Err(CmdError::wrong_type()),
    }
}

/// True if every byte is zero (such a segment is not stored).
fn is_zero(bytes: &[u8]) -> bool {
    bytes.iter().all(|&b| b == 0)
}

/// How a partial write of a string treats the key: when it stores it, and how long the value
/// may grow and stay inline.
#[derive(Clone, Copy)]
pub struct WriteRule {
    /// Store the key even when its bytes come out unchanged.
    pub always_store: bool,
    /// The longest value left inline; a write that makes it longer segments it.
    pub inline_max: u64,
}

/// SETBIT and BITFIELD: stored only if created or changed, as Redis 7.0 does.
pub const BIT_WRITE: WriteRule = WriteRule {
    always_store: false,
    inline_max: BITMAP_INLINE_MAX,
};

/// APPEND and SETRANGE: always stored (Redis's modify the key whatever they write), inline up
/// to `inline_max` (`string-edit-inline-max`; 0: no limit).
pub fn byte_write(inline_max: u64) -> WriteRule {
    WriteRule {
        always_store: true,
        inline_max: if inline_max == 0 {
            u64::MAX
        } else {
            inline_max
        },
    }
}

/// A partial write of a string (the bit commands, APPEND, SETRANGE) on `key`, whose lock the
/// caller holds: `spans` gets the value's current length (0 if missing) and names the byte
/// ranges the write touches, or refuses it; `f` gets the value as a byte store (an empty one for
/// a missing key, then `created` is true) with the segments covering those ranges loaded, and
/// returns the command's result. The value stays an inline string while it is at most
/// `rule.inline_max` bytes and becomes segmented past that, so a write into a long string
/// costs the segments it touches, not the string's length (APPEND to an 8 MB string rewrote
/// all of it). It is stored as `rule` says, and then only its changed segments, with the meta
/// record (its expiry kept). Returns `f`'s result and whether the key was written. WRONGTYPE
/// unless the key is a string, checked before `spans` is asked.
pub fn write_bits<R, S: AsRef<[Range<u64>]>>(
    ctx: &Ctx<'_>,
    key: &[u8],
    rule: WriteRule,
    spans: impl FnOnce(u64) -> Result<S, CmdError>,
    f: impl FnOnce(&mut dyn BitWrite, bool) -> R,
) -> Result<(R, bool), CmdError> {
    let storage = ctx.storage();
    let db = ctx.db();
    let current = ctx.lookup_write(key)?;
    let created = current.is_none();
    let len = match &current {
        None => 0,
        Some(m) if m.kind == Kind::Bitmap => m.len,
        Some(m) if m.kind == Kind::String => m.value.len() as u64,
        Some(_) => return Err(CmdError::wrong_type()),
    };
    let spans = spans(len)?;
    let spans = spans.as_ref();
    let needed = spans.iter().map(|s| s.end).max().unwrap_or(0);
    let (mut meta, mut value, loaded) = match current {
        Some(m) if m.kind == Kind::Bitmap => {
            let value = load(&ctx.latest(), db, key, &m, Some(spans))?;
            let loaded = value.segments.clone();
            (m, value, loaded)
        }
        current => {
            let (bytes, expire_at_ms) =
                current.map_or((Vec::new(), 0), |m| (m.value, m.expire_at_ms));
            if len.max(needed) <= rule.inline_max {
                // Only a conditional store needs the bytes before, to compare.
                let before = (!created && !rule.always_store).then(|| bytes.clone());
                let mut bytes = bytes;
                let result = f(&mut bytes, created);
                let write = created || rule.always_store || before.as_ref() != Some(&bytes);
                if write {
                    let mut batch = Batch::default();
                    batch.put_meta(storage, db, key, &Meta::string(bytes, expire_at_ms));
                    ctx.commit(batch)?;
                }
                return Ok((result, write));
            }
            // Grows past the inline limit: the same bytes as segments under a new version.
            let meta = Meta::collection(Kind::Bitmap, ctx.next_version()?, expire_at_ms);
            let mut value = Segmented::new(BITMAP_SEGMENT_LEN);
            value.len = bytes.len() as u64;
            for (index, chunk) in bytes.chunks(BITMAP_SEGMENT_LEN).enumerate() {
                if !is_zero(chunk) {
                    let mut seg = chunk.to_vec();
                    seg.resize(BITMAP_SEGMENT_LEN, 0);
                    value.segments.insert(index as u64, seg);
                }
            }
            (meta, value, BTreeMap::new())
        }
    };
    let result = f(&mut value, created);
    let coll = Coll::new(db, key, &meta);
    let mut batch = Batch::default();
    let mut changed = false;
    for (index, seg) in &value.segments {
        let before = loaded.get(index);
        if before == Some(seg) {
            continue;
        }
        let member = index.to_be_bytes();
        if !is_zero(seg) {
            batch.put_member(storage, Cf::Data, &coll, &member, seg);
            changed = true;
        } else if before.is_some() {
            batch.delete_member(storage, Cf::Data, &coll, &member);
            changed = true;
        }
    }
    changed |= value.len != meta.len;
    let write = created || changed || rule.always_store;
    if write {
        meta.len = value.len;
        batch.put_meta(storage, db, key, &meta);
        ctx.commit(batch)?;
    }
    Ok((result, write))
}

/// Writes `bytes` (a BITOP result of `len` bytes, produced in order by `produce`) as `key`,
/// replacing whatever it held, with no expiry: inline when short, segmented otherwise. The
/// caller holds the key's lock and has handled the empty result.
pub fn store_new(
    ctx: &Ctx<'_>,
    key: &[u8],
    len: u64,
    produce: impl FnOnce(&mut dyn FnMut(u64, &[u8])),
) -> Result<(), CmdError> {
    let storage = ctx.storage();
    let db = ctx.db();
    let mut batch = Batch::default();
    if len <= BITMAP_INLINE_MAX {
        let mut value = vec![0u8; len as usize];
        produce(&mut |offset, chunk| {
            let at = offset as usize;
            value[at..at + chunk.len()].copy_from_slice(chunk);
        });
        batch.put_meta(storage, db, key, &Meta::string(value, 0));
    } else {
        let mut meta = Meta::collection(Kind::Bitmap, storage.next_version()?, 0);
        meta.len = len;
        let coll = Coll::new(db, key, &meta);
        let mut seg = vec![0u8; BITMAP_SEGMENT_LEN];
        let mut seg_index = 0u64;
        let flush = |batch: &mut Batch, index: u64, seg: &mut Vec<u8>| {
            if !is_zero(seg) {
                batch.put_member(storage, Cf::Data, &coll, &index.to_be_bytes(), seg);
                seg.fill(0);
            }
        };
        produce(&mut |offset, chunk| {
            for (i, &b) in chunk.iter().enumerate() {
                let pos = offset + i as u64;
                if pos / SEG != seg_index {
                    flush(&mut batch, seg_index, &mut seg);
                    seg_index = pos / SEG;
                }
                seg[(pos % SEG) as usize] = b;
            }
        });
        flush(&mut batch, seg_index, &mut seg);
        batch.put_meta(storage, db, key, &meta);
    }
    storage.commit(batch)?;
    Ok(())
}
