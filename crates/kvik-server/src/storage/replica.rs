//! The storage side of replication: what a primary reads (its sequence number, its WAL, a
//! checkpoint) and what a replica writes (its primary's batches, a checkpoint's contents), with
//! the replica's position kept in the same writes.
//!
//! A replica never commits through [`Storage::commit`]: the batches it applies already carry
//! the primary's count deltas and expiry index changes. What commit does for the hot cache and
//! the write observers, [`Storage::apply_replicated`] does from the batch's own contents.

use super::encoding::{decode_meta_key, meta_key, Kind, Meta, META_HEADER_LEN};
use super::INTERNAL_DB;
use super::{Storage, StorageResult, CF_COUNTS, CF_DATA, CF_EXPIRY, CF_META, CF_SCORE};
use bytes::Bytes;
use rocksdb::{DBWALIterator, Options, WriteBatch, WriteBatchIteratorCf, WriteOptions, DB};
use std::path::Path;
use std::sync::OnceLock;

/// The INTERNAL_DB record of a replica's position: replication id, then the offset (u64 BE).
const POSITION_KEY: &[u8] = b"repl-applied";
/// The INTERNAL_DB record of a primary's replication id.
const REPL_ID_KEY: &[u8] = b"repl-id";
/// Every column family kvik writes, copied by a full sync.
const COPIED_CFS: [&str; 5] = [CF_META, CF_DATA, CF_SCORE, CF_EXPIRY, CF_COUNTS];
/// Bytes per write batch while loading a checkpoint.
const LOAD_BATCH_BYTES: usize = 4 << 20;

/// The INTERNAL_DB key prefix of an atomic group's mark (see [`AtomicGroup`]).
pub const GROUP_TAG: &[u8] = b"repl-group:";

thread_local! {
    /// The atomic group this thread's commits belong to, and whether one was committed.
    static GROUP: std::cell::Cell<Option<(u64, bool)>> = const { std::cell::Cell::new(None) };
}

/// Marks the commits of one atomic unit of several commits (EXEC, a script) so a replica
/// applies them as one write: each of its batches puts the group's mark record, and the end of
/// the group deletes it in a batch of its own. A replica holds back every batch from the first
/// open mark until no mark is open (`replication::replica`), so readers there never see part
/// of a transaction. Nested groups join the outer one.
pub struct AtomicGroup<'a> {
    storage: &'a Storage,
    id: Option<u64>,
}

impl Drop for AtomicGroup<'_> {
    fn drop(&mut self) {
        let Some(id) = self.id else {
            return;
        };
        let wrote = GROUP.with(|g| g.replace(None)).is_some_and(|(_, w)| w);
        if wrote {
            let mut b = WriteBatch::default();
            b.delete_cf(self.storage.meta_cf(), group_key(id));
            // Durable with the group's other writes, before the replies (group commit).
            if let Err(e) = self.storage.write(b, super::Wait::Allowed) {
                tracing::warn!(error = %e, "closing an atomic group's mark failed");
            }
        }
    }
}

fn group_key(id: u64) -> Vec<u8> {
    let mut k = GROUP_TAG.to_vec();
    k.extend_from_slice(&id.to_be_bytes());
    meta_key(INTERNAL_DB, &k)
}

/// The group marks a replicated batch opens and closes (their keys), if it has any.
pub fn group_marks(data: &[u8]) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    if memchr::memmem::find(data, GROUP_TAG).is_none() {
        return (Vec::new(), Vec::new());
    }
    struct Marks(Vec<Vec<u8>>, Vec<Vec<u8>>);
    impl WriteBatchIteratorCf for Marks {
        fn put_cf(&mut self, _: u32, key: &[u8], _: &[u8]) {
            if is_group_key(key) {
                self.0.push(key.to_vec());
            }
        }
        fn delete_cf(&mut self, _: u32, key: &[u8]) {
            if is_group_key(key) {
                self.1.push(key.to_vec());
            }
        }
        fn merge_cf(&mut self, _: u32, _: &[u8], _: &[u8]) {}
    }
    let mut m = Marks(Vec::new(), Vec::new());
    WriteBatch::from_data(data).iterate_cf(&mut m);
    (m.0, m.1)
}

fn is_group_key(raw: &[u8]) -> bool {
    decode_meta_key(raw).is_some_and(|(db, _, key)| db == INTERNAL_DB && key.starts_with(GROUP_TAG))
}

/// Concatenates two raw write batches into one (the first's sequence number, both counts), as
/// RocksDB's own `WriteBatchInternal::Append` does.
pub fn append_batch(into: &mut Vec<u8>, next: &[u8]) {
    const HEADER: usize = 12;
    if into.len() < HEADER {
        into.clear();
        into.extend_from_slice(next);
        return;
    }
    let count = |d: &[u8]| u32::from_le_bytes(d[8..12].try_into().unwrap_or_default());
    let total = count(into) + next.get(..HEADER).map_or(0, count);
    into[8..12].copy_from_slice(&total.to_le_bytes());
    into.extend_from_slice(next.get(HEADER..).unwrap_or_default());
}

/// A replica's position in its primary's history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Position {
    pub replid: String,
    pub offset: u64,
}

impl Position {
    fn encode(&self) -> Vec<u8> {
        let mut v = self.replid.as_bytes().to_vec();
        v.extend_from_slice(&self.offset.to_be_bytes());
        v
    }

    fn decode(raw: &[u8]) -> Option<Position> {
        let (id, off) = raw.split_at_checked(raw.len().checked_sub(8)?)?;
        Some(Position {
            replid: String::from_utf8(id.to_vec()).ok()?,
            offset: u64::from_be_bytes(off.try_into().ok()?),
        })
    }
}

/// Column family ids of `meta` and `counts` (RocksDB numbers them; the Rust binding does not
/// expose the number, so it is learnt once from a batch that writes each).
struct CfIds {
    meta: u32,
    counts: u32,
}

/// What a walk of a replicated batch found.
#[derive(Default)]
struct Walk {
    ids: Option<(u32, u32)>,
    /// Operations seen; fewer than the batch's count means a range delete stopped the walk.
    ops: usize,
    /// Raw meta keys put (with the value) or deleted, in batch order.
    meta_keys: Vec<(Vec<u8>, Option<Bytes>)>,
    /// Count delta records put (key, value).
    deltas: Vec<(Vec<u8>, Vec<u8>)>,
    /// The first column family id seen (used to learn the ids).
    first_cf: Option<u32>,
}

impl WriteBatchIteratorCf for Walk {
    fn put_cf(&mut self, cf_id: u32, key: &[u8], value: &[u8]) {
        self.ops += 1;
        self.first_cf.get_or_insert(cf_id);
        if let Some((meta, counts)) = self.ids {
            if cf_id == meta {
                self.meta_keys
                    .push((key.to_vec(), Some(Bytes::copy_from_slice(value))));
            } else if cf_id == counts {
                self.deltas.push((key.to_vec(), value.to_vec()));
            }
        }
    }

    fn delete_cf(&mut self, cf_id: u32, key: &[u8]) {
        self.ops += 1;
        if self.ids.is_some_and(|(meta, _)| meta == cf_id) {
            self.meta_keys.push((key.to_vec(), None));
        }
    }

    fn merge_cf(&mut self, _cf_id: u32, _key: &[u8], _value: &[u8]) {
        self.ops += 1;
    }
}

/// The sequence number of the last write a checkpoint (or any closed database) holds.
pub fn checkpoint_seq(dir: &Path) -> StorageResult<u64> {
    let names = DB::list_cf(&Options::default(), dir)?;
    let db = DB::open_cf_for_read_only(&Options::default(), dir, &names, false)?;
    Ok(db.latest_sequence_number())
}

impl Storage {
    /// Starts an atomic group for this thread (see [`AtomicGroup`]); it ends when dropped.
    pub fn atomic_group(&self) -> AtomicGroup<'_> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let id = GROUP.with(|g| {
            if g.get().is_some() {
                return None;
            }
            let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            g.set(Some((id, false)));
            Some(id)
        });
        AtomicGroup { storage: self, id }
    }

    /// Adds this thread's open group's mark to a batch being committed, if a group is open.
    pub(super) fn mark_group(&self, batch: &mut WriteBatch) {
        GROUP.with(|g| {
            if let Some((id, _)) = g.get() {
                batch.put_cf(
                    self.meta_cf(),
                    group_key(id),
                    Meta::string(Vec::new(), 0).encode(),
                );
                g.set(Some((id, true)));
            }
        });
    }

    /// The sequence number of the last write (a primary's replication offset).
    pub fn latest_seq(&self) -> u64 {
        self.db.latest_sequence_number()
    }

    /// The WAL's batches after sequence number `seq` (see `replication::primary`).
    pub fn wal_after(&self, seq: u64) -> StorageResult<DBWALIterator> {
        self.db.get_updates_since(seq)
    }

    /// The sequence number of the oldest batch the WAL still holds, if any.
    pub fn oldest_wal_seq(&self) -> Option<u64> {
        let mut it = self.db.get_updates_since(0).ok()?;
        it.next().and_then(Result::ok).map(|(seq, _)| seq)
    }

    /// Stops (`true`) or allows again (`false`) RocksDB's deletion of obsolete files, WAL files
    /// included, and kvik's own WAL retention (`wal_retention`); calls nest.
    pub fn hold_files(&self, hold: bool) -> StorageResult<()> {
        let mut held = self.files_held.lock();
        if hold {
            self.db.disable_file_deletions()?;
            *held += 1;
        } else {
            self.db.enable_file_deletions()?;
            *held = held.saturating_sub(1);
        }
        Ok(())
    }

    /// The replica position recorded with the last batch applied, if this node follows (or
    /// followed) a primary.
    pub fn repl_position(&self) -> StorageResult<Option<Position>> {
        Ok(self
            .get_internal(POSITION_KEY)?
            .and_then(|raw| Position::decode(&raw)))
    }

    /// Forgets the replica position (promotion, or the start of a full sync), synced.
    pub fn clear_repl_position(&self) -> StorageResult<()> {
        self.put_internal(POSITION_KEY, None)
    }

    /// This node's own replication id as a primary, if it has one.
    pub fn repl_id(&self) -> StorageResult<Option<String>> {
        Ok(self
            .get_internal(REPL_ID_KEY)?
            .and_then(|raw| String::from_utf8(raw).ok()))
    }

    /// Records this node's replication id as a primary, synced.
    pub fn set_repl_id(&self, id: &str) -> StorageResult<()> {
        self.put_internal(REPL_ID_KEY, Some(id.as_bytes()))
    }

    fn cf_ids(&self) -> &CfIds {
        static IDS: OnceLock<CfIds> = OnceLock::new();
        IDS.get_or_init(|| {
            let learn = |name: &str| {
                let mut b = WriteBatch::default();
                b.put_cf(self.cf(name), b"k", b"v");
                let mut w = Walk::default();
                b.iterate_cf(&mut w);
                w.first_cf.unwrap_or(u32::MAX)
            };
            CfIds {
                meta: learn(CF_META),
                counts: learn(CF_COUNTS),
            }
        })
    }

    /// Applies one of the primary's batches (`data`, as `WriteBatch::data` gave it) and records
    /// `position` in the same write. The hot cache entries of every key it writes are dropped
    /// (after a write epoch bump before the write, as commit does), the write observers told,
    /// and the key counts follow the delta records it carries. A batch with a range delete
    /// (FLUSHDB, FLUSHALL, the counts' fold) empties the cache and reloads the counts.
    pub fn apply_replicated(&self, data: &[u8], position: &Position) -> StorageResult<()> {
        let ids = self.cf_ids();
        let mut batch = WriteBatch::from_data(data);
        let mut walk = Walk {
            ids: Some((ids.meta, ids.counts)),
            ..Walk::default()
        };
        batch.iterate_cf(&mut walk);
        let whole = walk.ops >= batch.len();
        // (db, key, what the cache and the observers learn: kind, expiry and payload of a put)
        type Put = Option<(Kind, u64, Bytes)>;
        let keys: Vec<(u16, &[u8], Put)> = walk
            .meta_keys
            .iter()
            .filter_map(|(k, v)| {
                let (db, _, key) = decode_meta_key(k)?;
                let put = v.as_ref().and_then(|v| {
                    let kind = Kind::from_byte(*v.first()?)?;
                    let expire_at = u64::from_be_bytes(v.get(1..9)?.try_into().ok()?);
                    Some((kind, expire_at, v.slice(META_HEADER_LEN..)))
                });
                Some((db, key, put))
            })
            .collect();
        // Held as a writer holds them (from before the write to after the cache update), so
        // readers' isolation (`cmd::isolation`) works on replicas too.
        let _locks = self.lock_in(keys.iter().map(|(db, key, _)| (*db, *key)));
        // The primary's writes do not pass through `Batch`: the notes of pops, and the decks,
        // of the collections they change (each changes its meta record too) may not hold.
        self.forget_pop_notes_of(keys.iter().map(|(db, key, _)| (*db, *key)));
        for &(db, key, _) in &keys {
            self.cache.begin_write(db, key);
        }
        batch.put_cf(
            self.meta_cf(),
            meta_key(INTERNAL_DB, POSITION_KEY),
            Meta::string(position.encode(), 0).encode(),
        );
        let result = self
            .write(batch, super::Wait::Allowed)
            .and_then(|()| self.make_durable());
        // As commit: a cached entry takes the new value, a delete (or a failed write) drops it.
        for (db, key, put) in &keys {
            self.cache
                .apply(*db, key, put.clone().filter(|_| result.is_ok()));
        }
        let observers = self.observers.read();
        if !keys.is_empty() && !observers.is_empty() {
            let written: Vec<(u16, &[u8], Option<Kind>)> = keys
                .iter()
                .map(|(db, key, put)| (*db, *key, put.as_ref().map(|p| p.0)))
                .collect();
            for o in observers.iter() {
                o.keys_written(&written);
            }
        }
        drop(observers);
        if whole {
            if result.is_ok() {
                for (k, v) in &walk.deltas {
                    self.counts.add_delta_record(k, v);
                }
            }
        } else {
            self.forget_pop_notes();
            self.cache.clear();
            self.flushed(None);
            self.reload_counts()?;
        }
        result
    }

    /// Replaces the whole database with the checkpoint in `dir` (a full sync) and records
    /// `position`. Restartable: the position is forgotten first and written last (after the
    /// copy, written without the WAL, is flushed), so a crash in between leaves no position
    /// and the next sync is full again.
    pub fn load_checkpoint(&self, dir: &Path, position: &Position) -> StorageResult<u64> {
        self.forget_pop_notes();
        self.clear_repl_position()?;
        let names = DB::list_cf(&Options::default(), dir)?;
        let src = DB::open_cf_for_read_only(&Options::default(), dir, &names, false)?;
        // A write still in progress from before this server became a replica commits before
        // the data is replaced, not into it (see `flush_gate`); the cache and the counts are
        // reset before writers come back.
        let _closed = self.close_flush_gate();
        let _gate = self.commit_gate.write();
        let mut no_wal = WriteOptions::default();
        no_wal.disable_wal(true);
        let mut copied = 0u64;
        for name in COPIED_CFS {
            let cf = self.cf(name);
            // Clear: one range delete from the first to just past the last key.
            let mut it = self.db.raw_iterator_cf(cf);
            it.seek_to_first();
            if let Some(first) = it.key().map(<[u8]>::to_vec) {
                it.seek_to_last();
                let mut end = it.key().map(<[u8]>::to_vec).unwrap_or_default();
                end.push(0);
                drop(it);
                let mut b = WriteBatch::default();
                b.delete_range_cf(cf, first, end);
                self.db.write_opt(b, &no_wal)?;
            }
            let Some(src_cf) = src.cf_handle(name) else {
                continue;
            };
            let mut it = src.raw_iterator_cf(src_cf);
            it.seek_to_first();
            let mut b = WriteBatch::default();
            while let (Some(k), Some(v)) = (it.key(), it.value()) {
                b.put_cf(cf, k, v);
                copied += 1;
                if b.size_in_bytes() >= LOAD_BATCH_BYTES {
                    self.db.write_opt(std::mem::take(&mut b), &no_wal)?;
                }
                it.next();
            }
            it.status()?;
            self.db.write_opt(b, &no_wal)?;
        }
        drop(src);
        for name in COPIED_CFS {
            self.db.flush_cf(self.cf(name))?;
        }
        drop(_gate);
        self.put_internal(POSITION_KEY, Some(&position.encode()))?;
        self.cache.clear();
        self.flushed(None);
        self.reload_counts()?;
        Ok(copied)
    }

    /// Reads the key counts from disk again (after a full sync or a replicated range delete).
    pub fn reload_counts(&self) -> StorageResult<()> {
        self.counts.reset(0, INTERNAL_DB);
        self.load_counts()
    }

    /// After a promotion: collection versions continue above the floor the primary persisted
    /// (a replica hands none out while it follows).
    pub fn resume_versions(&self) -> StorageResult<()> {
        self.init_versions()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn position_round_trips() {
        let p = Position {
            replid: "a".repeat(40),
            offset: 12345,
        };
        assert_eq!(Position::decode(&p.encode()), Some(p));
        assert_eq!(Position::decode(b"short"), None);
    }

    #[test]
    fn a_replicated_batch_lands_with_its_position_and_drops_cached_keys() {
        let dir = tempfile::tempdir().unwrap();
        let primary = Storage::open(&dir.path().join("p")).unwrap();
        let replica = Storage::open(&dir.path().join("r")).unwrap();
        let from = primary.latest_seq();
        let mut b = super::super::Batch::default();
        b.put_meta(&primary, 0, b"k", &Meta::string(b"v1".to_vec(), 0));
        primary.commit(b).unwrap();
        primary.make_durable().unwrap(); // group commit: the WAL file has it once flushed
        let mut applied = 0;
        for item in primary.wal_after(from).unwrap() {
            let (seq, batch) = item.unwrap();
            let pos = Position {
                replid: "x".repeat(40),
                offset: seq + batch.len() as u64 - 1,
            };
            replica.apply_replicated(batch.data(), &pos).unwrap();
            applied += 1;
        }
        assert!(applied >= 1);
        assert_eq!(replica.get_meta(0, b"k").unwrap().unwrap().value, b"v1");
        assert_eq!(replica.key_count(0), 1);
        let pos = replica.repl_position().unwrap().unwrap();
        assert_eq!(pos.offset, primary.latest_seq());
    }
}
