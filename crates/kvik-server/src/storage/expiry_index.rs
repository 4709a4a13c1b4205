//! The expiry index: one entry per key that has an expiry, ordered by database and expiry time,
//! so active expiry finds the keys that are due by one seek instead of walking the keyspace.
//!
//! ```text
//! expiry CF  key:   db (u16 BE) | expire_at_ms (u64 BE) | user key
//!            value: empty
//! ```
//!
//! Hash fields with a TTL (HEXPIRE ...) have entries of their own in the same column family,
//! after every key entry of their database: the time's top bit is set, which no key expiry has
//! (Unix milliseconds stay far below 2^63), so a key scan stops before them and a key entry can
//! never collide with a field entry:
//!
//! ```text
//! expiry CF  key:   db | (expire_at_ms | 1 << 63) | key length (u32 BE) | key | version | field
//!            value: empty
//! ```
//!
//! Field entries are written by the hash commands with the field (in the same batch) and
//! checked before use: active expiry deletes a field only if the hash still has that version
//! and the field still expires at that time; an entry left behind by a DEL or an overwrite of the
//! whole hash is simply dropped when it comes due. FLUSHDB removes them with the database.
//!
//! Key entries are written only by [`Storage::commit`](super::Storage::commit), from the same
//! before/after states as the key counts (`counts::Tally`): a key whose expiry changes loses its
//! old entry and gets the new one in the same WriteBatch, so the index never disagrees with the
//! meta column family, across crashes too.

use super::encoding::db_prefix;

/// Bytes before the user key in an index entry.
const PREFIX_LEN: usize = 10;

/// The index entry of `key` of database `db` expiring at `at` (Unix ms).
pub fn key(db: u16, at: u64, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(PREFIX_LEN + key.len());
    out.extend_from_slice(&db_prefix(db));
    out.extend_from_slice(&at.to_be_bytes());
    out.extend_from_slice(key);
    out
}

/// The position of database `db`'s entries expiring at `at` or later.
pub fn position(db: u16, at: u64) -> Vec<u8> {
    key(db, at, b"")
}

/// Splits an index entry into (expire_at_ms, user key).
pub fn decode(raw: &[u8]) -> Option<(u64, &[u8])> {
    let at = u64::from_be_bytes(raw.get(2..PREFIX_LEN)?.try_into().ok()?);
    Some((at, &raw[PREFIX_LEN..]))
}

/// The top bit of the time of a field entry.
const FIELD_BIT: u64 = 1 << 63;

/// Whether `at`, as [`decode`] read it, is the time of a hash field's entry.
pub fn is_field_time(at: u64) -> bool {
    at & FIELD_BIT != 0
}

/// The index entry of field `field` of version `version` of hash `key`, expiring at `at`.
pub fn field_key(db: u16, at: u64, key: &[u8], version: u64, field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(PREFIX_LEN + 12 + key.len() + field.len());
    out.extend_from_slice(&db_prefix(db));
    out.extend_from_slice(&(at | FIELD_BIT).to_be_bytes());
    out.extend_from_slice(&(key.len() as u32).to_be_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&version.to_be_bytes());
    out.extend_from_slice(field);
    out
}

/// The position of database `db`'s field entries expiring at `at` or later.
pub fn field_position(db: u16, at: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(PREFIX_LEN);
    out.extend_from_slice(&db_prefix(db));
    out.extend_from_slice(&(at | FIELD_BIT).to_be_bytes());
    out
}

/// A field entry split into its parts.
#[derive(Debug, PartialEq, Eq)]
pub struct FieldEntry<'a> {
    pub at: u64,
    pub key: &'a [u8],
    pub version: u64,
    pub field: &'a [u8],
}

/// Splits a field entry; `None` for a key entry or a malformed one.
pub fn decode_field(raw: &[u8]) -> Option<FieldEntry<'_>> {
    let at = u64::from_be_bytes(raw.get(2..PREFIX_LEN)?.try_into().ok()?);
    if at & FIELD_BIT == 0 {
        return None;
    }
    let key_len = u32::from_be_bytes(raw.get(PREFIX_LEN..PREFIX_LEN + 4)?.try_into().ok()?);
    let key_end = PREFIX_LEN + 4 + key_len as usize;
    let key = raw.get(PREFIX_LEN + 4..key_end)?;
    let version = u64::from_be_bytes(raw.get(key_end..key_end + 8)?.try_into().ok()?);
    Some(FieldEntry {
        at: at & !FIELD_BIT,
        key,
        version,
        field: &raw[key_end + 8..],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_sort_by_db_then_time_and_round_trip() {
        let a = key(0, 5, b"zzz");
        let b = key(0, 6, b"aaa");
        let c = key(1, 1, b"aaa");
        assert!(a < b && b < c);
        assert!(position(0, 6) <= b && position(0, 7) > b);
        assert_eq!(decode(&b), Some((6, &b"aaa"[..])));
        assert_eq!(decode(b"\0\0\0"), None);
    }

    #[test]
    fn field_entries_sort_after_key_entries_and_round_trip() {
        let k = key(0, u64::MAX >> 2, b"zzz");
        let f = field_key(0, 5, b"h", 9, b"f1");
        assert!(k < f && f < key(1, 0, b""));
        assert!(field_position(0, 5) <= f && field_position(0, 6) > f);
        let e = decode_field(&f).unwrap();
        assert_eq!(
            (e.at, e.key, e.version, e.field),
            (5, &b"h"[..], 9, &b"f1"[..])
        );
        assert_eq!(decode_field(&k), None);
    }
}
