//! The stream records: the state a stream's meta record carries, and the member keys and values
//! of its entries, consumer groups, consumers and pending entries lists (the layout is in
//! [`super::encoding`]'s header). Pure codecs, plus the one range delete trimming needs; the
//! commands are in `cmd::stream`.
//!
//! Every record lives under the stream's version, so deleting or overwriting a stream stays one
//! meta write and compaction reclaims the rest. Counts that replies need (a group's pending
//! entries and consumers, a consumer's pending entries) are kept in the records, so XINFO and
//! XPENDING's summary never count by scanning.

use super::encoding::data_prefix;
use super::members::Coll;
use super::{Batch, Storage, CF_DATA};
use kvik_types::stream_id::StreamId;

/// Tag of an entry member.
pub const TAG_ENTRY: u8 = 0x00;
/// Tag of a group record.
pub const TAG_GROUP: u8 = 0x01;
/// Tag of a group PEL record.
pub const TAG_PEL: u8 = 0x02;
/// Tag of a consumer record.
pub const TAG_CONSUMER: u8 = 0x03;
/// Tag of a consumer PEL index record.
pub const TAG_CONSUMER_PEL: u8 = 0x04;

/// Redis's `SCG_INVALID_ENTRIES_READ`: a group whose read counter is unknown.
pub const INVALID_ENTRIES_READ: i64 = -1;

fn word(raw: &[u8], i: usize) -> u64 {
    raw.get(i * 8..i * 8 + 8)
        .map_or(0, |b| u64::from_be_bytes(b.try_into().expect("8 bytes")))
}

fn id_at(raw: &[u8], at: usize) -> StreamId {
    raw.get(at..at + 16).map_or(StreamId::MIN, |b| {
        StreamId::from_bytes(b.try_into().expect("16 bytes"))
    })
}

/// What a stream's meta record holds besides version and length (Redis's `stream` struct
/// fields that are not its entries).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamState {
    /// The last ID generated (XADD, XSETID).
    pub last_id: StreamId,
    /// The largest ID ever deleted by XDEL (or set by XSETID MAXDELETEDID).
    pub max_deleted: StreamId,
    /// Entries ever added.
    pub entries_added: u64,
    /// The first entry's ID (0-0 when empty): Redis's `first_id`.
    pub first_id: StreamId,
}

impl StreamState {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(56);
        out.extend_from_slice(&self.last_id.to_bytes());
        out.extend_from_slice(&self.max_deleted.to_bytes());
        out.extend_from_slice(&self.entries_added.to_be_bytes());
        out.extend_from_slice(&self.first_id.to_bytes());
        out
    }

    /// Decodes a meta record's `value`; an empty one (a fresh stream) is the default state.
    pub fn decode(raw: &[u8]) -> StreamState {
        StreamState {
            last_id: id_at(raw, 0),
            max_deleted: id_at(raw, 16),
            entries_added: word(&raw[raw.len().min(32)..], 0),
            first_id: id_at(raw, 40),
        }
    }
}

/// The member of the entry `id`.
pub fn entry_member(id: StreamId) -> [u8; 17] {
    let mut m = [TAG_ENTRY; 17];
    m[1..].copy_from_slice(&id.to_bytes());
    m
}

/// The ID of an entry member, `None` for another record.
pub fn entry_id(member: &[u8]) -> Option<StreamId> {
    match member {
        [TAG_ENTRY, rest @ ..] if rest.len() == 16 => {
            Some(StreamId::from_bytes(rest.try_into().expect("16 bytes")))
        }
        _ => None,
    }
}

/// An entry's fields and values: each a u32 BE length and its bytes.
pub fn encode_fields<B: AsRef<[u8]>>(pairs: &[B]) -> Vec<u8> {
    let size: usize = pairs.iter().map(|p| 4 + p.as_ref().len()).sum();
    let mut out = Vec::with_capacity(size);
    for p in pairs {
        out.extend_from_slice(&(p.as_ref().len() as u32).to_be_bytes());
        out.extend_from_slice(p.as_ref());
    }
    out
}

/// The fields and values of an encoded entry, flat (field, value, field, value ...); a
/// malformed tail is dropped.
pub fn decode_fields(mut raw: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while raw.len() >= 4 {
        let n = u32::from_be_bytes(raw[..4].try_into().expect("4 bytes")) as usize;
        let Some(item) = raw.get(4..4 + n) else { break };
        out.push(item);
        raw = &raw[4 + n..];
    }
    if out.len() % 2 == 1 {
        out.pop();
    }
    out
}

fn with_len(out: &mut Vec<u8>, part: &[u8]) {
    out.extend_from_slice(&(part.len() as u32).to_be_bytes());
    out.extend_from_slice(part);
}

/// The member of group `name`.
pub fn group_member(name: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(1 + name.len());
    m.push(TAG_GROUP);
    m.extend_from_slice(name);
    m
}

/// The prefix of group `group`'s PEL records (append an ID for one).
pub fn pel_prefix(group: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(5 + group.len() + 16);
    m.push(TAG_PEL);
    with_len(&mut m, group);
    m
}

/// The member of `group`'s PEL record of `id`.
pub fn pel_member(group: &[u8], id: StreamId) -> Vec<u8> {
    let mut m = pel_prefix(group);
    m.extend_from_slice(&id.to_bytes());
    m
}

/// The prefix of group `group`'s consumer records (append a name for one).
pub fn consumer_prefix(group: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(5 + group.len() + 16);
    m.push(TAG_CONSUMER);
    with_len(&mut m, group);
    m
}

/// The member of consumer `name` of `group`.
pub fn consumer_member(group: &[u8], name: &[u8]) -> Vec<u8> {
    let mut m = consumer_prefix(group);
    m.extend_from_slice(name);
    m
}

/// The prefix of every consumer PEL index record of `group` (all consumers).
pub fn group_consumer_pel_prefix(group: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(5 + group.len());
    m.push(TAG_CONSUMER_PEL);
    with_len(&mut m, group);
    m
}

/// The prefix of consumer `name`'s PEL index records (append an ID for one).
pub fn consumer_pel_prefix(group: &[u8], name: &[u8]) -> Vec<u8> {
    let mut m = group_consumer_pel_prefix(group);
    with_len(&mut m, name);
    m
}

/// The member of consumer `name`'s PEL index record of `id`.
pub fn consumer_pel_member(group: &[u8], name: &[u8], id: StreamId) -> Vec<u8> {
    let mut m = consumer_pel_prefix(group, name);
    m.extend_from_slice(&id.to_bytes());
    m
}

/// The ID at the end of a PEL or consumer PEL member.
pub fn trailing_id(member: &[u8]) -> Option<StreamId> {
    let at = member.len().checked_sub(16)?;
    Some(id_at(member, at))
}

/// A consumer group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupRec {
    pub last_id: StreamId,
    /// Logical reads counter, [`INVALID_ENTRIES_READ`] when unknown.
    pub entries_read: i64,
    /// Entries in the group's PEL.
    pub pending: u64,
    /// Consumers in the group.
    pub consumers: u64,
}

impl GroupRec {
    pub fn new(last_id: StreamId, entries_read: i64) -> GroupRec {
        GroupRec {
            last_id,
            entries_read,
            pending: 0,
            consumers: 0,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(40);
        out.extend_from_slice(&self.last_id.to_bytes());
        out.extend_from_slice(&self.entries_read.to_be_bytes());
        out.extend_from_slice(&self.pending.to_be_bytes());
        out.extend_from_slice(&self.consumers.to_be_bytes());
        out
    }

    pub fn decode(raw: &[u8]) -> GroupRec {
        let rest = &raw[raw.len().min(16)..];
        GroupRec {
            last_id: id_at(raw, 0),
            entries_read: word(rest, 0) as i64,
            pending: word(rest, 1),
            consumers: word(rest, 2),
        }
    }
}

/// One pending entry of a group: who has it, since when, how many deliveries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingRec {
    pub delivery_ms: u64,
    pub delivery_count: u64,
    pub consumer: Vec<u8>,
}

impl PendingRec {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + self.consumer.len());
        out.extend_from_slice(&self.delivery_ms.to_be_bytes());
        out.extend_from_slice(&self.delivery_count.to_be_bytes());
        out.extend_from_slice(&self.consumer);
        out
    }

    pub fn decode(raw: &[u8]) -> PendingRec {
        PendingRec {
            delivery_ms: word(raw, 0),
            delivery_count: word(raw, 1),
            consumer: raw.get(16..).unwrap_or_default().to_vec(),
        }
    }
}

/// A consumer of a group.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConsumerRec {
    /// Last time it was seen (read or claimed), Unix ms.
    pub seen_ms: u64,
    /// Entries in its PEL.
    pub pending: u64,
}

impl ConsumerRec {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16);
        out.extend_from_slice(&self.seen_ms.to_be_bytes());
        out.extend_from_slice(&self.pending.to_be_bytes());
        out
    }

    pub fn decode(raw: &[u8]) -> ConsumerRec {
        ConsumerRec {
            seen_ms: word(raw, 0),
            pending: word(raw, 1),
        }
    }
}

impl Batch {
    /// Deletes the members of `coll` in the data CF from `from` (inclusive) to `to`
    /// (exclusive) with one range tombstone: trimming many entries, dropping a group's records.
    pub fn delete_member_range(&mut self, storage: &Storage, coll: &Coll, from: &[u8], to: &[u8]) {
        let prefix = data_prefix(coll.db, coll.key, coll.version);
        let mut lo = prefix.clone();
        lo.extend_from_slice(from);
        let mut hi = prefix;
        hi.extend_from_slice(to);
        self.delete_range_raw(storage, CF_DATA, &lo, &hi);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let st = StreamState {
            last_id: StreamId::new(5, 6),
            max_deleted: StreamId::new(1, 2),
            entries_added: 9,
            first_id: StreamId::new(3, 4),
        };
        assert_eq!(StreamState::decode(&st.encode()), st);
        assert_eq!(StreamState::decode(&[]), StreamState::default());
        let g = GroupRec {
            last_id: StreamId::new(7, 8),
            entries_read: INVALID_ENTRIES_READ,
            pending: 3,
            consumers: 2,
        };
        assert_eq!(GroupRec::decode(&g.encode()), g);
        let p = PendingRec {
            delivery_ms: 11,
            delivery_count: 2,
            consumer: b"alice".to_vec(),
        };
        assert_eq!(PendingRec::decode(&p.encode()), p);
        let c = ConsumerRec {
            seen_ms: 4,
            pending: 1,
        };
        assert_eq!(ConsumerRec::decode(&c.encode()), c);
    }

    #[test]
    fn members_sort_and_split() {
        let a = entry_member(StreamId::new(1, u64::MAX));
        let b = entry_member(StreamId::new(2, 0));
        assert!(a < b);
        assert_eq!(entry_id(&b), Some(StreamId::new(2, 0)));
        assert_eq!(entry_id(&group_member(b"g")), None);
        // Entries sort before every other record.
        assert!(entry_member(StreamId::MAX).as_slice() < group_member(b"").as_slice());
        let pel = pel_member(b"g", StreamId::new(3, 1));
        assert!(pel.starts_with(&pel_prefix(b"g")));
        assert_eq!(trailing_id(&pel), Some(StreamId::new(3, 1)));
        // A group's prefixes never cover another group's records.
        assert!(!pel_member(b"ab", StreamId::MIN).starts_with(&pel_prefix(b"a")));
        let cp = consumer_pel_member(b"g", b"c", StreamId::new(9, 9));
        assert!(cp.starts_with(&consumer_pel_prefix(b"g", b"c")));
        assert!(cp.starts_with(&group_consumer_pel_prefix(b"g")));
        assert_eq!(trailing_id(&cp), Some(StreamId::new(9, 9)));
        let fields = encode_fields(&[&b"f"[..], b"v", b"", b"x"]);
        assert_eq!(decode_fields(&fields), vec![&b"f"[..], b"v", b"", b"x"]);
    }
}
