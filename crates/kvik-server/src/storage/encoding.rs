//! On-disk encoding of keys and metadata.
//!
//! ```text
//! meta CF   key:   db (u16 BE) | slot (u16 BE) | user key
//!           value: kind (u8) | expire_at_ms (u64 BE, 0 = none) | payload
//!                  payload of a string:     the value bytes
//!                  payload of a collection: version (u64 BE) | length (u64 BE)
//! data CF   key:   db | slot | key length (u32 BE) | user key | version (u64 BE) | member
//! ```
//!
//! The database index and the cluster slot come first so a database or a slot is one prefix
//! (FLUSHDB and slot migration are range operations), and cluster mode never changes the format.
//! The expiry sits at a fixed offset so the compaction filter reads it without decoding the rest.

use crate::slot::key_slot;

/// Bytes before the user key in a meta key.
pub const META_KEY_PREFIX_LEN: usize = 4;
/// Bytes before the payload in a meta value.
pub const META_HEADER_LEN: usize = 9;

/// The type of a key, as TYPE reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    String = 1,
    Hash = 2,
    List = 3,
    Set = 4,
    ZSet = 5,
}

impl Kind {
    fn from_byte(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::String,
            2 => Kind::Hash,
            3 => Kind::List,
            4 => Kind::Set,
            5 => Kind::ZSet,
            _ => return None,
        })
    }

    /// The name TYPE replies with.
    pub fn type_name(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::Hash => "hash",
            Kind::List => "list",
            Kind::Set => "set",
            Kind::ZSet => "zset",
        }
    }
}

/// A key's metadata record: what the `meta` column family holds for one user key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    pub kind: Kind,
    /// Absolute expiry in Unix milliseconds; 0 means the key does not expire.
    pub expire_at_ms: u64,
    /// Collection version (0 for strings): members of other versions are stale.
    pub version: u64,
    /// Collection length (0 for strings).
    pub len: u64,
    /// A string's value (empty for collections).
    pub value: Vec<u8>,
}

impl Meta {
    /// A string record.
    pub fn string(value: Vec<u8>, expire_at_ms: u64) -> Meta {
        Meta {
            kind: Kind::String,
            expire_at_ms,
            version: 0,
            len: 0,
            value,
        }
    }

    /// True if the key has expired at `now_ms`.
    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expire_at_ms != 0 && self.expire_at_ms <= now_ms
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(META_HEADER_LEN + self.value.len().max(16));
        out.push(self.kind as u8);
        out.extend_from_slice(&self.expire_at_ms.to_be_bytes());
        if self.kind == Kind::String {
            out.extend_from_slice(&self.value);
        } else {
            out.extend_from_slice(&self.version.to_be_bytes());
            out.extend_from_slice(&self.len.to_be_bytes());
        }
        out
    }

    /// Decodes a meta value; `None` for a record this version cannot read (treated as corrupt).
    pub fn decode(raw: &[u8]) -> Option<Meta> {
        if raw.len() < META_HEADER_LEN {
            return None;
        }
        let kind = Kind::from_byte(raw[0])?;
        let expire_at_ms = u64::from_be_bytes(raw[1..9].try_into().ok()?);
        let payload = &raw[META_HEADER_LEN..];
        if kind == Kind::String {
            return Some(Meta::string(payload.to_vec(), expire_at_ms));
        }
        if payload.len() < 16 {
            return None;
        }
        Some(Meta {
            kind,
            expire_at_ms,
            version: u64::from_be_bytes(payload[0..8].try_into().ok()?),
            len: u64::from_be_bytes(payload[8..16].try_into().ok()?),
            value: Vec::new(),
        })
    }
}

/// Reads only the expiry of an encoded meta value (the compaction filter's fast path).
pub fn meta_expire_at(raw: &[u8]) -> Option<u64> {
    raw.get(1..9)
        .map(|b| u64::from_be_bytes(b.try_into().expect("8 bytes")))
}

/// Reads only the kind of an encoded meta value.
pub fn meta_kind(raw: &[u8]) -> Option<Kind> {
    raw.first().copied().and_then(Kind::from_byte)
}

/// The prefix shared by every key of database `db`.
pub fn db_prefix(db: u16) -> [u8; 2] {
    db.to_be_bytes()
}

/// The meta key of `key` in database `db`.
pub fn meta_key(db: u16, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(META_KEY_PREFIX_LEN + key.len());
    out.extend_from_slice(&db.to_be_bytes());
    out.extend_from_slice(&key_slot(key).to_be_bytes());
    out.extend_from_slice(key);
    out
}

/// Splits a meta key into database, slot and user key.
pub fn decode_meta_key(raw: &[u8]) -> Option<(u16, u16, &[u8])> {
    if raw.len() < META_KEY_PREFIX_LEN {
        return None;
    }
    let db = u16::from_be_bytes([raw[0], raw[1]]);
    let slot = u16::from_be_bytes([raw[2], raw[3]]);
    Some((db, slot, &raw[META_KEY_PREFIX_LEN..]))
}

/// The prefix of every member of one version of a collection in the data CF.
pub fn data_prefix(db: u16, key: &[u8], version: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + 4 + key.len() + 8 + 16);
    out.extend_from_slice(&db.to_be_bytes());
    out.extend_from_slice(&key_slot(key).to_be_bytes());
    out.extend_from_slice(&(key.len() as u32).to_be_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&version.to_be_bytes());
    out
}

/// The smallest byte string greater than every string that starts with `prefix`, for range
/// deletes and iterator bounds; `None` if `prefix` is all 0xff.
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut out = prefix.to_vec();
    while let Some(last) = out.pop() {
        if last != 0xff {
            out.push(last + 1);
            return Some(out);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_round_trips() {
        let s = Meta::string(b"hello".to_vec(), 1234);
        assert_eq!(Meta::decode(&s.encode()), Some(s.clone()));
        assert_eq!(meta_expire_at(&s.encode()), Some(1234));
        let h = Meta {
            kind: Kind::Hash,
            expire_at_ms: 0,
            version: 77,
            len: 3,
            value: Vec::new(),
        };
        assert_eq!(Meta::decode(&h.encode()), Some(h));
        assert_eq!(Meta::decode(b"\x09xxxxxxxx"), None);
        assert_eq!(Meta::decode(b"\x01"), None);
    }

    #[test]
    fn meta_keys_sort_by_db_then_slot() {
        let a = meta_key(0, b"foo");
        let b = meta_key(1, b"bar");
        assert!(a < b);
        let (db, slot, key) = decode_meta_key(&b).unwrap();
        assert_eq!(
            (db, slot, key),
            (1, crate::slot::key_slot(b"bar"), &b"bar"[..])
        );
    }

    #[test]
    fn prefix_successor_bounds_the_prefix() {
        assert_eq!(prefix_successor(&[0, 1]), Some(vec![0, 2]));
        assert_eq!(prefix_successor(&[0, 0xff]), Some(vec![1]));
        assert_eq!(prefix_successor(&[0xff, 0xff]), None);
    }
}
