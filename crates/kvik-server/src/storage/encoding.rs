//! On-disk encoding of keys and metadata.
//!
//! ```text
//! meta CF   key:   db (u16 BE) | slot (u16 BE) | user key
//!           value: kind (u8) | expire_at_ms (u64 BE, 0 = none) | payload
//!                  payload of a string:     the value bytes
//!                  payload of a collection: version (u64 BE) | length (u64 BE)
//!                  payload of a hash:       version | length [| flags (u8)]
//!                  payload of a list:       version | length | head (u64 BE)
//!                  payload of a bitmap:     version | byte length (u64 BE)
//!                  payload of a stream:     version | length | stream state ([`super::stream`])
//! data CF   key:   db | slot | key length (u32 BE) | user key | version (u64 BE) | member
//! score CF  key:   db | slot | key length | user key | version | score (8 bytes) | member
//! ```
//!
//! A stream's members in the data CF start with a tag byte ([`super::stream`] has the codecs):
//!
//! ```text
//! 0x00 | entry ID (16 bytes BE)                                  -> the entry's fields and values
//! 0x01 | group                                                   -> group: last-delivered ID,
//!                                                                   entries-read, pending, consumers
//! 0x02 | group len (u32 BE) | group | entry ID                   -> group PEL: delivery time,
//!                                                                   delivery count, consumer
//! 0x03 | group len | group | consumer                            -> consumer: seen time, pending
//! 0x04 | group len | group | consumer len (u32 BE) | consumer | entry ID -> consumer PEL (empty)
//! ```
//!
//! Entries are one range (XRANGE is a scan, XADD one put); group names and consumer names sort
//! as bytes, as Redis's radix trees list them.
//!
//! Every collection entry (data or score CF) starts with [`data_prefix`], so one key's members are
//! one prefix, a key is copied or exported without knowing its type, and the data compaction
//! filter (`expire::DataFilter`) recognises stale members by their version alone. The member part
//! is the type's business: a hash field, a set member, a list position ([`list_index`]), a sorted
//! set member (data CF, value = score) or score + member ([`encode_score`], score CF), or a
//! bitmap segment (see below).
//!
//! **Bitmaps.** A string written by the bit commands (SETBIT, BITFIELD, BITOP) stays an inline
//! string while it is at most [`BITMAP_INLINE_MAX`] bytes; a bit write that makes it longer turns
//! it into kind [`Kind::Bitmap`]: the meta record holds a version and the byte length, and the
//! bytes live in the data CF as segments of [`BITMAP_SEGMENT_LEN`] bytes, member = segment index
//! (u64 BE), value = the segment's bytes; a segment that is all zero is not stored. To users it
//! is a string (TYPE, SCAN TYPE, OBJECT ENCODING `raw`): string commands read it whole. A SETBIT
//! then writes one segment and the meta record whatever the offset (SETBIT at 2^32-1 writes 4 KiB,
//! not 512 MB), and DEL, overwrite and expiry stay O(1) (the segments are members of a version).
//! Why these sizes: 4 KiB is RocksDB's data block, so a segment read is one block and a
//! segment write is small next to the WAL record's fixed cost; 16 KiB inline keeps the bitmaps
//! most applications use (a few thousand flags) one point read, cacheable by the hot cache,
//! while a write of an inline value never copies more than 16 KiB. APPEND and SETRANGE write the
//! same way with a higher limit, `string-edit-inline-max` (64 KiB): a string they grow stays
//! inline up to it, so the strings applications build from pieces and read whole keep GET's
//! one point read (a segmented string's GET costs about twice an inline one's), and past it
//! each edit writes the segments it touches (APPEND to an 8 MB string copied all of it: 45 ms).
//!
//! **Hash field expiry.** A hash some of whose fields ever got a TTL (HEXPIRE and friends) has
//! bit [`HASH_FIELD_TTLS`] set in a flags byte after its length; hashes without it (all hashes
//! written before field expiry existed) have no flags byte and store plain field values. In a
//! flagged hash every field value is `expire_at_ms (u64 BE, 0 = none) | value`
//! ([`field_value`], [`split_field_value`]), so a field's expiry travels with it wherever the
//! entry is copied. The flag is set once (the first HEXPIRE rewrites the values) and stays for
//! the life of that version of the hash; it also keeps the hash out of the hot cache.
//!
//! The database index and the cluster slot come first so a database or a slot is one prefix
//! (FLUSHDB and slot migration are range operations), and cluster mode never changes the format.
//! The expiry sits at a fixed offset so the key counts (`counts`) read it without decoding the rest.

use crate::slot::key_slot;

/// Bytes before the user key in a meta key.
pub const META_KEY_PREFIX_LEN: usize = 4;
/// Bytes before the payload in a meta value.
pub const META_HEADER_LEN: usize = 9;

/// Bytes of one stored bitmap segment (see the module header).
pub const BITMAP_SEGMENT_LEN: usize = 4096;
/// The longest string a bit write leaves inline; longer ones become [`Kind::Bitmap`].
pub const BITMAP_INLINE_MAX: u64 = 16 * 1024;

/// Flag bit of a hash's meta record: its field values carry an expiry prefix.
pub const HASH_FIELD_TTLS: u8 = 1;

/// Bytes of the expiry prefix of a field value in a hash with [`HASH_FIELD_TTLS`].
pub const FIELD_TTL_LEN: usize = 8;

/// A field value of a hash with field TTLs: `expire_at_ms` (0 = none) then the value.
pub fn field_value(expire_at_ms: u64, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(FIELD_TTL_LEN + value.len());
    out.extend_from_slice(&expire_at_ms.to_be_bytes());
    out.extend_from_slice(value);
    out
}

/// Splits a stored field value of a hash with field TTLs into (expire_at_ms, value); a value too
/// short to hold the prefix (corruption) reads as a persistent empty value.
pub fn split_field_value(raw: &[u8]) -> (u64, &[u8]) {
    match raw.get(..FIELD_TTL_LEN) {
        Some(at) => (
            u64::from_be_bytes(at.try_into().expect("8 bytes")),
            &raw[FIELD_TTL_LEN..],
        ),
        None => (0, &raw[raw.len()..]),
    }
}

/// True if a field expiring at `at` (0 = never) has expired at `now_ms`.
pub fn field_expired(at: u64, now_ms: u64) -> bool {
    at != 0 && at <= now_ms
}

/// The type of a key, as TYPE reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    String = 1,
    Hash = 2,
    List = 3,
    Set = 4,
    ZSet = 5,
    /// A string stored as segments (module header); TYPE says "string".
    Bitmap = 6,
    Stream = 7,
}

impl Kind {
    pub(super) fn from_byte(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::String,
            2 => Kind::Hash,
            3 => Kind::List,
            4 => Kind::Set,
            5 => Kind::ZSet,
            6 => Kind::Bitmap,
            7 => Kind::Stream,
            _ => return None,
        })
    }

    /// The name TYPE replies with.
    pub fn type_name(self) -> &'static str {
        match self {
            Kind::String | Kind::Bitmap => "string",
            Kind::Hash => "hash",
            Kind::List => "list",
            Kind::Set => "set",
            Kind::ZSet => "zset",
            Kind::Stream => "stream",
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
    /// A list's position of its first element (see [`list_index`]); 0 for other kinds.
    pub head: u64,
    /// A string's value; a stream's encoded state (`super::stream::StreamState`); empty for
    /// other collections.
    pub value: Vec<u8>,
    /// A hash whose field values carry an expiry prefix ([`HASH_FIELD_TTLS`]).
    pub field_ttls: bool,
}

impl Meta {
    /// A string record.
    pub fn string(value: Vec<u8>, expire_at_ms: u64) -> Meta {
        Meta {
            kind: Kind::String,
            expire_at_ms,
            version: 0,
            len: 0,
            head: 0,
            value,
            field_ttls: false,
        }
    }

    /// An empty collection record of `kind` with a fresh `version` (from
    /// `Storage::next_version`); a list starts in the middle of the index space so it can grow
    /// at both ends.
    pub fn collection(kind: Kind, version: u64, expire_at_ms: u64) -> Meta {
        debug_assert!(kind != Kind::String);
        Meta {
            kind,
            expire_at_ms,
            version,
            len: 0,
            head: if kind == Kind::List { LIST_MIDDLE } else { 0 },
            value: Vec::new(),
            field_ttls: false,
        }
    }

    /// True for hashes, lists, sets, sorted sets and segmented bitmaps (records with members in
    /// the data CF).
    pub fn is_collection(&self) -> bool {
        self.kind != Kind::String
    }

    /// True if the key has expired at `now_ms`.
    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expire_at_ms != 0 && self.expire_at_ms <= now_ms
    }

    pub fn encode(&self) -> Vec<u8> {
        if self.kind == Kind::String {
            return encode_string(&self.value, self.expire_at_ms);
        }
        let mut out = Vec::with_capacity(META_HEADER_LEN + self.value.len().max(16));
        out.push(self.kind as u8);
        out.extend_from_slice(&self.expire_at_ms.to_be_bytes());
        out.extend_from_slice(&self.version.to_be_bytes());
        out.extend_from_slice(&self.len.to_be_bytes());
        if self.kind == Kind::List {
            out.extend_from_slice(&self.head.to_be_bytes());
        }
        if self.kind == Kind::Stream {
            out.extend_from_slice(&self.value);
        }
        if self.kind == Kind::Hash && self.field_ttls {
            out.push(HASH_FIELD_TTLS);
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
        let need = if kind == Kind::List { 24 } else { 16 };
        if payload.len() < need {
            return None;
        }
        let word = |i: usize| u64::from_be_bytes(payload[i * 8..i * 8 + 8].try_into().expect("8"));
        Some(Meta {
            kind,
            expire_at_ms,
            version: word(0),
            len: word(1),
            head: if kind == Kind::List { word(2) } else { 0 },
            // A stream's state (last ID, counters) rides in `value`: see `super::stream`.
            value: if kind == Kind::Stream {
                payload[16..].to_vec()
            } else {
                Vec::new()
            },
            field_ttls: kind == Kind::Hash
                && payload.get(16).is_some_and(|f| f & HASH_FIELD_TTLS != 0),
        })
    }
}

/// The meta record of a string `value` expiring at `expire_at_ms` (0: never), what
/// [`Meta::string`] would encode, without a [`Meta`] holding a copy of the value.
pub fn encode_string(value: &[u8], expire_at_ms: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(META_HEADER_LEN + value.len());
    out.push(Kind::String as u8);
    out.extend_from_slice(&expire_at_ms.to_be_bytes());
    out.extend_from_slice(value);
    out
}

/// Reads only the expiry of an encoded meta value (the fast path of the key counts).
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
    data_prefix_with_room(db, key, version, 16)
}

/// The data CF key of `member` of collection `key` at `version`, allocated at its exact size
/// (a buffered write keeps it as it is).
pub fn data_key(db: u16, key: &[u8], version: u64, member: &[u8]) -> Vec<u8> {
    let mut out = data_prefix_with_room(db, key, version, member.len());
    out.extend_from_slice(member);
    out
}

/// [`data_prefix`] with room for `room` more bytes.
fn data_prefix_with_room(db: u16, key: &[u8], version: u64, room: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + 4 + key.len() + 8 + room);
    out.extend_from_slice(&db.to_be_bytes());
    out.extend_from_slice(&key_slot(key).to_be_bytes());
    out.extend_from_slice(&(key.len() as u32).to_be_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&version.to_be_bytes());
    out
}

/// Where a new list's first element goes: the middle of the u64 index space, so pushes at either
/// end never run out of room.
pub const LIST_MIDDLE: u64 = 1 << 63;

/// The data CF member part of list position `index` (big-endian, so positions sort in order).
pub fn list_index(index: u64) -> [u8; 8] {
    index.to_be_bytes()
}

/// A score as 8 bytes whose unsigned byte order is the numeric order of the scores (sign bit
/// flipped for positives, all bits flipped for negatives). -0.0 is stored as 0.0, as Redis
/// treats them as the same score.
pub fn encode_score(score: f64) -> [u8; 8] {
    let score = if score == 0.0 { 0.0 } else { score };
    let bits = score.to_bits();
    let ordered = if bits >> 63 == 0 {
        bits | (1 << 63)
    } else {
        !bits
    };
    ordered.to_be_bytes()
}

/// The inverse of [`encode_score`].
pub fn decode_score(raw: &[u8]) -> Option<f64> {
    let ordered = u64::from_be_bytes(raw.get(..8)?.try_into().ok()?);
    let bits = if ordered >> 63 == 1 {
        ordered & !(1 << 63)
    } else {
        !ordered
    };
    Some(f64::from_bits(bits))
}

/// A data or score CF key split into its parts.
#[derive(Debug, PartialEq, Eq)]
pub struct DataKey<'a> {
    pub db: u16,
    pub key: &'a [u8],
    pub version: u64,
    /// What follows the version: the member part.
    pub member: &'a [u8],
}

/// Splits a data or score CF key; `None` if it is malformed.
pub fn decode_data_key(raw: &[u8]) -> Option<DataKey<'_>> {
    let db = u16::from_be_bytes(raw.get(0..2)?.try_into().ok()?);
    let key_len = u32::from_be_bytes(raw.get(4..8)?.try_into().ok()?) as usize;
    let key = raw.get(8..8 + key_len)?;
    let version = u64::from_be_bytes(raw.get(8 + key_len..16 + key_len)?.try_into().ok()?);
    Some(DataKey {
        db,
        key,
        version,
        member: &raw[16 + key_len..],
    })
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
            head: 0,
            value: Vec::new(),
            field_ttls: false,
        };
        assert_eq!(Meta::decode(&h.encode()), Some(h.clone()));
        let flagged = Meta {
            field_ttls: true,
            ..h
        };
        assert_eq!(flagged.encode().len(), META_HEADER_LEN + 17);
        assert_eq!(Meta::decode(&flagged.encode()), Some(flagged));
        let v = field_value(42, b"abc");
        assert_eq!(split_field_value(&v), (42, &b"abc"[..]));
        assert!(field_expired(5, 5) && !field_expired(0, 5) && !field_expired(6, 5));
        let mut l = Meta::collection(Kind::List, 9, 5);
        l.len = 2;
        assert_eq!(l.head, LIST_MIDDLE);
        assert_eq!(Meta::decode(&l.encode()), Some(l));
        let mut b = Meta::collection(Kind::Bitmap, 7, 0);
        b.len = BITMAP_INLINE_MAX + 1;
        assert_eq!(Meta::decode(&b.encode()), Some(b));
        assert_eq!(Kind::Bitmap.type_name(), "string");
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
    fn scores_sort_as_bytes() {
        let scores = [
            f64::NEG_INFINITY,
            -1e300,
            -2.5,
            -1.0,
            -f64::MIN_POSITIVE,
            0.0,
            f64::MIN_POSITIVE,
            1.0,
            2.5,
            1e300,
            f64::INFINITY,
        ];
        for w in scores.windows(2) {
            assert!(
                encode_score(w[0]) < encode_score(w[1]),
                "{} < {}",
                w[0],
                w[1]
            );
        }
        for s in scores {
            assert_eq!(decode_score(&encode_score(s)), Some(s));
        }
        assert_eq!(encode_score(-0.0), encode_score(0.0));
    }

    #[test]
    fn data_keys_round_trip() {
        let mut raw = data_prefix(3, b"key", 42);
        raw.extend_from_slice(b"field");
        let d = decode_data_key(&raw).unwrap();
        assert_eq!(
            d,
            DataKey {
                db: 3,
                key: b"key",
                version: 42,
                member: b"field"
            }
        );
        assert!(decode_data_key(&raw[..10]).is_none());
    }

    #[test]
    fn prefix_successor_bounds_the_prefix() {
        assert_eq!(prefix_successor(&[0, 1]), Some(vec![0, 2]));
        assert_eq!(prefix_successor(&[0, 0xff]), Some(vec![1]));
        assert_eq!(prefix_successor(&[0xff, 0xff]), None);
    }
}
