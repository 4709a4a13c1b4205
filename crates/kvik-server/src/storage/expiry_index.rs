//! The expiry index: one entry per key that has an expiry, ordered by database and expiry time,
//! so active expiry finds the keys that are due by one seek instead of walking the keyspace.
//!
//! ```text
//! expiry CF  key:   db (u16 BE) | expire_at_ms (u64 BE) | user key
//!            value: empty
//! ```
//!
//! Entries are written only by [`Storage::commit`](super::Storage::commit), from the same
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
}
