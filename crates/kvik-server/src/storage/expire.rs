//! Expiry of keys on disk, in three ways that together keep expired data from piling up:
//!
//! 1. Lazily: every read goes through `Storage::get_live` and treats an expired record as absent;
//!    writes overwrite or delete it under the key lock.
//! 2. Actively: [`ActiveExpiry::run`] is called by the server's timer (never on the worker lists).
//!    It reads the expiry index (`expiry_index`) from each database's scan start up to now, so
//!    it costs O(keys that expired), and nothing at all while no key is due; it deletes the due
//!    keys under their locks, re-checking after locking so a key rewritten meanwhile survives.
//! 3. At compaction, for collection members only: [`DataFilter`] drops the members of
//!    collections that are gone: deleted, overwritten (a new version), or expired, and the
//!    expired fields of hashes with field TTLs. This is what makes DEL of a big collection O(1).
//!
//! Hash fields with a TTL expire the same three ways: every read skips an expired field
//! (`members::Coll`), [`FieldExpiry::run`] removes the due fields the expiry index lists (and
//! the hash with its last field), and the compaction filter drops expired field records. A
//! record the filter dropped before active expiry saw it still has its index entry, so active
//! expiry finds the field missing with its entry present and takes it off the hash's length
//! then.
//!
//! Meta records are never dropped behind the writers' back: the key counts (`counts`) and the
//! expiry index must see every removal, so an expired key's meta record goes by active expiry,
//! through a commit like any write.

use super::building;
use super::counts::{DbCounts, KeyState};
use super::encoding::{
    data_key, db_prefix, decode_data_key, field_expired, meta_key, prefix_successor,
    split_field_value, DataKey, Kind, Meta,
};
use super::members::{Cf, Coll};
use super::{expiry_index, Batch, Storage, StorageResult, CF_DATA, CF_EXPIRY, CF_META};
use crate::clock::unix_ms;
use crate::key_list::KeyList;
use rocksdb::compaction_filter::{CompactionFilter, Decision};
use rocksdb::compaction_filter_factory::{CompactionFilterContext, CompactionFilterFactory};
use rocksdb::{ReadOptions, DB};
use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Instant;

/// The compaction filter of the data and score column families, one per compaction (RocksDB
/// asks [`DataFilterFactory`] for it): keeps an entry only while its collection's meta record
/// exists, is live, and names the entry's version, or while that version is being built
/// (`building`). A compaction meets the entries of one collection version one after another,
/// so the verdict for a version is read once and reused for the entries that follow it: one
/// meta read per collection and compaction, where a read per entry made compacting a deleted
/// million-member set read the meta record two million times. Reusing a verdict is safe both
/// ways: keeping is always safe, and a version once stale never becomes live again (versions
/// are never reused, and one built across several commits is marked from its first).
pub struct DataFilter {
    name: &'static CStr,
    db: Arc<OnceLock<Weak<DB>>>,
    closing: Arc<AtomicBool>,
    dropped_fields: Arc<AtomicU64>,
    /// The data prefix (database, slot, key, version) of the last verdict, and the verdict.
    last: Option<(Vec<u8>, Verdict)>,
}

/// What a collection version's meta record says of its entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Keep,
    /// A live hash with field TTLs: keep its entries but the expired fields.
    KeepLiveFields,
    Remove,
}

/// Creates a [`DataFilter`] for each compaction of the data and score column families.
pub struct DataFilterFactory {
    /// The name RocksDB's LOG shows (the factory's and its filters').
    pub name: &'static CStr,
    pub db: Arc<OnceLock<Weak<DB>>>,
    pub closing: Arc<AtomicBool>,
    /// Counts the expired hash fields the filters dropped.
    pub dropped_fields: Arc<AtomicU64>,
}

impl CompactionFilterFactory for DataFilterFactory {
    type Filter = DataFilter;

    fn create(&mut self, _context: CompactionFilterContext) -> DataFilter {
        DataFilter {
            name: self.name,
            db: self.db.clone(),
            closing: self.closing.clone(),
            dropped_fields: self.dropped_fields.clone(),
            last: None,
        }
    }

    fn name(&self) -> &CStr {
        self.name
    }
}

impl CompactionFilter for DataFilter {
    fn filter(&mut self, _level: u32, key: &[u8], value: &[u8]) -> Decision {
        if self.closing.load(Ordering::Relaxed) {
            return Decision::Keep;
        }
        let Some(k) = decode_data_key(key) else {
            return Decision::Keep;
        };
        let prefix = &key[..key.len() - k.member.len()];
        let verdict = match &self.last {
            Some((p, v)) if p[..] == *prefix => *v,
            _ => {
                // The database is gone while it closes: keep, and remember nothing.
                let Some(db) = self.db.get().and_then(Weak::upgrade) else {
                    return Decision::Keep;
                };
                let Some(v) = verdict(&db, &k) else {
                    return Decision::Keep;
                };
                self.last = Some((prefix.to_vec(), v));
                v
            }
        };
        match verdict {
            Verdict::Keep => Decision::Keep,
            Verdict::Remove => Decision::Remove,
            Verdict::KeepLiveFields => {
                if field_expired(split_field_value(value).0, unix_ms()) {
                    self.dropped_fields.fetch_add(1, Ordering::Relaxed);
                    Decision::Remove
                } else {
                    Decision::Keep
                }
            }
        }
    }

    fn name(&self) -> &CStr {
        self.name
    }
}

/// The verdict for the entries of version `k.version` of `k.key`; `None` if a read failed or
/// a record could not be decoded (keep them: they are looked at again in a later compaction).
///
/// Entries the meta record does not name when first read are kept while their version is
/// being built (`building`: a copy commits its entries before the meta record), and kept if
/// the meta record names them by a second read (the copy ended after the first, deleting the
/// mark in the batch that put the record; read in this order, one of the reads sees it).
fn verdict(db: &DB, k: &DataKey<'_>) -> Option<Verdict> {
    let cf = db.cf_handle(CF_META)?;
    if let Some(v) = named(db, cf, k)? {
        return Some(v);
    }
    if building::is_building(db, k.version) {
        return Some(Verdict::Keep);
    }
    Some(named(db, cf, k)?.unwrap_or(Verdict::Remove))
}

/// What the key's meta record says of version `k.version`: `Some(None)` if it does not name
/// it as a live collection (no record, another version, expired); `None` if unreadable.
fn named(db: &DB, meta_cf: &rocksdb::ColumnFamily, k: &DataKey<'_>) -> Option<Option<Verdict>> {
    let Some(raw) = db.get_pinned_cf(meta_cf, meta_key(k.db, k.key)).ok()? else {
        return Some(None);
    };
    let m = Meta::decode(&raw)?;
    if !m.is_collection() || m.version != k.version || m.is_expired(unix_ms()) {
        return Some(None);
    }
    Some(Some(if m.kind == Kind::Hash && m.field_ttls {
        Verdict::KeepLiveFields
    } else {
        Verdict::Keep
    }))
}

/// The active expiry cycle; each database's scan start is kept in its counts
/// (`DbCounts::expiry_scan_from`), so the cycle itself only remembers where to begin next time.
#[derive(Default)]
pub struct ActiveExpiry {
    next_db: u16,
}

/// How much one [`ActiveExpiry::run`] may do: at most `entries` index entries, and nothing more
/// once `until` has passed. Both are checked between steps of [`STEP`] entries, and the time
/// only after the first, so a run always makes progress and overshoots its time by one step.
#[derive(Clone, Copy, Debug)]
pub struct Limit {
    pub entries: usize,
    pub until: Option<Instant>,
}

impl Limit {
    /// At most `n` index entries, however long they take.
    pub fn entries(n: usize) -> Limit {
        Limit {
            entries: n,
            until: None,
        }
    }

    /// As many entries as fit before `until`.
    pub fn until(until: Instant) -> Limit {
        Limit {
            entries: usize::MAX,
            until: Some(until),
        }
    }

    /// Whether a run with `left` entries to go, `stepped` once already, must stop.
    fn reached(&self, left: usize, stepped: bool) -> bool {
        left == 0 || (stepped && self.until.is_some_and(|t| Instant::now() >= t))
    }
}

/// The share of a timer tick, in percent, the active expiry cycle may take, paced as Redis
/// paces its own: 25% of the tick at `active-expire-effort` 1, two points more per step (43% at
/// 10). While the last run ended behind (due keys left at its limit) it may take 75%, about
/// what Redis's fast cycles add to its slow one then: keys written with a TTL faster than a
/// quarter of a core deletes them take more of the timer's core, not more disk, and the
/// writers that share the cores slow down instead.
pub fn tick_share_percent(effort: u64, behind: bool) -> u32 {
    if behind {
        BEHIND_SHARE_PERCENT
    } else {
        25 + 2 * (effort.clamp(1, 10) as u32 - 1)
    }
}

const BEHIND_SHARE_PERCENT: u32 = 75;

/// What one [`ActiveExpiry::run`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cycle {
    /// Keys deleted.
    pub deleted: u64,
    /// The run stopped at its limit while entries may still be due: the expiry is behind.
    pub behind: bool,
}

/// An expiry index entry found due: (expire_at_ms, user key).
type DueEntry = (u64, Vec<u8>);

/// Keys deleted per commit by the active expiry cycle (and locked together).
const DELETE_GROUP: usize = 64;
/// Index entries read per step of a run (the limit is checked between steps).
const STEP: usize = 4 * DELETE_GROUP;

impl ActiveExpiry {
    /// Deletes the due keys of databases `0..databases` within `limit`, starting with the
    /// database the last run stopped in.
    pub fn run(&mut self, storage: &Storage, databases: u16, limit: Limit) -> StorageResult<Cycle> {
        let now = unix_ms();
        let dbs: Vec<u16> =
            due_databases(storage, databases, now, |c| &c.expiry_scan_from).collect();
        paced(&mut self.next_db, &dbs, limit, |db, budget| {
            expire_db(storage, db, now, budget)
        })
    }
}

/// The databases of `0..databases` whose scan start (`scan_from` of their counts) is due.
fn due_databases<'s>(
    storage: &'s Storage,
    databases: u16,
    now: u64,
    scan_from: impl Fn(&DbCounts) -> &AtomicU64 + 's,
) -> impl Iterator<Item = u16> + 's {
    storage
        .counts
        .each(databases)
        .filter(move |(_, c)| scan_from(c).load(Ordering::Acquire) <= now)
        .map(|(db, _)| db)
}

/// Runs `step(db, budget)` over `dbs` from `next_db` on, in steps of at most [`STEP`] entries,
/// until each database has nothing due or `limit` is reached; `next_db` is where the next run
/// starts. A step returns (entries visited, removed, whether more are due).
fn paced(
    next_db: &mut u16,
    dbs: &[u16],
    limit: Limit,
    mut step: impl FnMut(u16, usize) -> StorageResult<(usize, u64, bool)>,
) -> StorageResult<Cycle> {
    let first = dbs.iter().position(|&db| db >= *next_db).unwrap_or(0);
    let (mut left, mut deleted, mut stepped) = (limit.entries, 0, false);
    for &db in dbs[first..].iter().chain(&dbs[..first]) {
        loop {
            if limit.reached(left, stepped) {
                *next_db = db;
                return Ok(Cycle {
                    deleted,
                    behind: true,
                });
            }
            let (visited, n, more) = step(db, left.min(STEP))?;
            stepped = true;
            left -= visited;
            deleted += n;
            if !more {
                break;
            }
        }
    }
    *next_db = 0;
    Ok(Cycle {
        deleted,
        behind: false,
    })
}

/// Deletes the keys of `db` whose index entries are due at `now`, at most `budget` entries.
/// Returns (entries visited, keys deleted, whether more entries are due).
fn expire_db(
    storage: &Storage,
    db: u16,
    now: u64,
    budget: usize,
) -> StorageResult<(usize, u64, bool)> {
    let Some(counts) = storage.counts.get(db) else {
        return Ok((0, 0, false));
    };
    scan_step(
        &counts.expiry_scan_from,
        |from| due_entries(storage, db, from, now, budget),
        |e| e.0,
        |group| delete_if_due(storage, db, group),
        now,
    )
}

/// One step of a database's scan: reads the due entries from `scan_from` on (`read`) and
/// removes them in groups of [`DELETE_GROUP`] (`delete`, which returns how many it removed).
/// Returns (entries visited, removed, whether more entries are due).
///
/// The scan start is taken (set to "never") before the index is read, and put back after:
/// lowered to the first entry not yet due, or to where the budget ran out, or to the first
/// group a failed delete left. A commit that indexes an earlier expiry lowers it after its
/// write, so an entry the iterator could not see yet is scanned by the next cycle.
fn scan_step<E>(
    scan_from: &AtomicU64,
    read: impl FnOnce(u64) -> StorageResult<(Vec<E>, u64)>,
    at: impl Fn(&E) -> u64,
    mut delete: impl FnMut(&[E]) -> StorageResult<u64>,
    now: u64,
) -> StorageResult<(usize, u64, bool)> {
    let from = scan_from.swap(u64::MAX, Ordering::AcqRel);
    let (due, resume) = match read(from) {
        Ok(found) => found,
        Err(e) => {
            scan_from.fetch_min(from, Ordering::AcqRel);
            return Err(e);
        }
    };
    let mut removed = 0;
    for group in due.chunks(DELETE_GROUP) {
        match delete(group) {
            Ok(n) => removed += n,
            Err(e) => {
                scan_from.fetch_min(at(&group[0]), Ordering::AcqRel);
                return Err(e);
            }
        }
    }
    scan_from.fetch_min(resume, Ordering::AcqRel);
    Ok((due.len(), removed, resume <= now))
}

/// The index entries of `db` from time `from` on that are due at `now` (at most `budget`), and
/// the time of the first entry not returned (`u64::MAX` past the last).
fn due_entries(
    storage: &Storage,
    db: u16,
    from: u64,
    now: u64,
    budget: usize,
) -> StorageResult<(Vec<DueEntry>, u64)> {
    let mut opts = ReadOptions::default();
    if let Some(end) = prefix_successor(&db_prefix(db)) {
        opts.set_iterate_upper_bound(end);
    }
    let mut it = storage.db.raw_iterator_cf_opt(storage.cf(CF_EXPIRY), opts);
    it.seek(expiry_index::position(db, from));
    let mut due = Vec::new();
    while let Some((at, key)) = it.key().and_then(expiry_index::decode) {
        if at > now || due.len() >= budget {
            return Ok((due, at));
        }
        due.push((at, key.to_vec()));
        it.next();
    }
    it.status()?;
    Ok((due, u64::MAX))
}

/// The values of `raw_keys` in column family `cf`, read together (one batched lookup).
fn multi_get<'s>(
    storage: &'s Storage,
    cf: &str,
    raw_keys: &[Vec<u8>],
) -> Vec<StorageResult<Option<rocksdb::DBPinnableSlice<'s>>>> {
    if raw_keys.is_empty() {
        return Vec::new();
    }
    storage.db.batched_multi_get_cf_opt(
        storage.cf(cf),
        raw_keys.iter().map(Vec::as_slice),
        false,
        &ReadOptions::default(),
    )
}

/// Deletes those of `entries` (expiry, key) whose key still has that expiry, under their locks,
/// in one commit; an entry whose key changed meanwhile is left to the commit that changed it
/// (it already replaced the entry). Returns how many keys were deleted.
fn delete_if_due(storage: &Storage, db: u16, entries: &[DueEntry]) -> StorageResult<u64> {
    let keys: Vec<&[u8]> = entries.iter().map(|(_, k)| k.as_slice()).collect();
    let _guard = storage.lock(db, &keys);
    // Each key's state now: from the hot cache where it holds the key (current under the
    // lock), the rest with one batched read (sorted keys share their index and data block
    // lookups). The commit counts from these states (`delete_meta_known`) instead of reading
    // the records again.
    let mut states: Vec<Option<KeyState>> = keys
        .iter()
        .map(|k| storage.cache.cached_state(db, k))
        .collect();
    let unread: Vec<usize> = (0..states.len()).filter(|&i| states[i].is_none()).collect();
    if !unread.is_empty() {
        let raw_keys: Vec<Vec<u8>> = unread.iter().map(|&i| meta_key(db, keys[i])).collect();
        for (&i, meta) in unread.iter().zip(multi_get(storage, CF_META, &raw_keys)) {
            states[i] = Some(KeyState::of_meta(meta?.as_deref()));
        }
    }
    let mut batch = Batch::default();
    let mut deleted = 0;
    for ((at, key), state) in entries.iter().zip(states) {
        match state {
            // Entries are due (`at` <= the scan's now), so a key still at `at` has expired.
            Some(state @ KeyState::Present(expiry)) if expiry == *at => {
                batch.delete_meta_known(storage, db, key, state);
                deleted += 1;
            }
            // The key's expiry changed or it went after the scan read this entry (the commit
            // that did it deleted the entry already), or the index was damaged: deleting the
            // entry is harmless either way.
            _ => batch.delete_index_entry(storage, db, *at, key),
        }
    }
    if !batch.is_empty() {
        storage.commit(batch)?;
    }
    Ok(deleted)
}

// ---- Hash fields ----------------------------------------------------------------------------

/// A hash field active expiry removed: (on-disk database, key, whether the hash went with it),
/// for the `hexpired` and `del` keyspace events.
pub type ExpiredField = (u16, Vec<u8>, bool);

/// A due field index entry: (expire_at_ms, key, version, field).
type DueField = (u64, Vec<u8>, u64, Vec<u8>);

/// The active expiry of hash fields, run by the timer next to [`ActiveExpiry::run`] and paced
/// the same way, over the same kind of scan: each database's field entries from its
/// `DbCounts::field_scan_from` on (lowered by every commit that indexes a field).
#[derive(Default)]
pub struct FieldExpiry {
    next_db: u16,
}

impl FieldExpiry {
    /// Whether a field entry of a database below `databases` may be due at `now`.
    pub fn may_be_due(storage: &Storage, databases: u16, now: u64) -> bool {
        due_databases(storage, databases, now, |c| &c.field_scan_from)
            .next()
            .is_some()
    }

    /// Removes the due hash fields of databases `0..databases` within `limit` (and a hash with
    /// its last field), starting with the database the last run stopped in; each removed field
    /// is added to `expired` (`Cycle::deleted` counts them).
    pub fn run(
        &mut self,
        storage: &Storage,
        databases: u16,
        limit: Limit,
        expired: &mut Vec<ExpiredField>,
    ) -> StorageResult<Cycle> {
        let now = unix_ms();
        let dbs: Vec<u16> =
            due_databases(storage, databases, now, |c| &c.field_scan_from).collect();
        paced(&mut self.next_db, &dbs, limit, |db, budget| {
            let Some(counts) = storage.counts.get(db) else {
                return Ok((0, 0, false));
            };
            scan_step(
                &counts.field_scan_from,
                |from| due_fields(storage, db, from, now, budget),
                |e| e.0,
                |group| {
                    let before = expired.len();
                    delete_fields_if_due(storage, db, group, now, expired)?;
                    Ok((expired.len() - before) as u64)
                },
                now,
            )
        })
    }
}

/// The field entries of `db` from time `from` on that are due at `now` (at most `budget`), and
/// the time of the first entry not returned (`u64::MAX` past the last).
fn due_fields(
    storage: &Storage,
    db: u16,
    from: u64,
    now: u64,
    budget: usize,
) -> StorageResult<(Vec<DueField>, u64)> {
    let mut opts = ReadOptions::default();
    if let Some(end) = prefix_successor(&db_prefix(db)) {
        opts.set_iterate_upper_bound(end);
    }
    let mut it = storage.db.raw_iterator_cf_opt(storage.cf(CF_EXPIRY), opts);
    it.seek(expiry_index::field_position(db, from));
    let mut due = Vec::new();
    while let Some(e) = it.key().and_then(expiry_index::decode_field) {
        if e.at > now || due.len() >= budget {
            return Ok((due, e.at));
        }
        due.push((e.at, e.key.to_vec(), e.version, e.field.to_vec()));
        it.next();
    }
    it.status()?;
    Ok((due, u64::MAX))
}

/// Deletes the fields of `entries` that still expire at their entry's time, under their keys'
/// locks, in one commit; a hash whose last field goes is deleted. Every entry is removed from
/// the index (one whose field or hash changed meanwhile is stale).
fn delete_fields_if_due(
    storage: &Storage,
    db: u16,
    entries: &[DueField],
    now: u64,
    expired: &mut Vec<ExpiredField>,
) -> StorageResult<()> {
    let keys: Vec<&[u8]> = entries.iter().map(|e| e.1.as_slice()).collect();
    let _guard = storage.lock(db, &keys);
    // Each hash's meta as this commit will leave it, and its last field in `expired` if the
    // commit deletes any (up to a cycle's budget of hashes: found by hashing, not a scan).
    let mut hashes: KeyList<'_, (Option<Meta>, Option<usize>)> =
        KeyList::with_capacity(entries.len());
    for key in &keys {
        hashes.insert(key, (None, None));
    }
    // Two batched reads (sorted keys share their index and data block lookups) instead of a
    // point read per hash and per field: the hashes' metas, then the fields of the live ones.
    let meta_keys: Vec<Vec<u8>> = hashes.list.iter().map(|h| meta_key(db, h.0)).collect();
    let metas = multi_get(storage, CF_META, &meta_keys);
    for (hash, raw) in hashes.list.iter_mut().zip(metas) {
        hash.1 .0 = raw?.as_deref().and_then(Meta::decode);
    }
    let live = |hash: &(Option<Meta>, Option<usize>), version: u64| {
        hash.0.as_ref().is_some_and(|m| {
            m.kind == Kind::Hash && m.field_ttls && m.version == version && !m.is_expired(now)
        })
    };
    let positions: Vec<usize> = entries
        .iter()
        .map(|e| hashes.position(&e.1).expect("every entry's key is listed"))
        .collect();
    let field_keys: Vec<Vec<u8>> = entries
        .iter()
        .zip(&positions)
        .filter(|(e, &i)| live(&hashes.list[i].1, e.2))
        .map(|(e, _)| data_key(db, &e.1, e.2, &e.3))
        .collect();
    let mut values = multi_get(storage, CF_DATA, &field_keys).into_iter();
    let mut batch = Batch::default();
    for ((at, key, version, field), &i) in entries.iter().zip(&positions) {
        let index_key = expiry_index::field_key(db, *at, key, *version, field);
        let entry = &mut hashes.list[i].1;
        // (A field's value was read if its hash was live when read; fields earlier in this
        // group only shorten it, so it still is.)
        if live(entry, *version) {
            let coll = Coll::new(db, key, entry.0.as_ref().expect("live")).raw();
            let value = values.next().expect("a value per live entry")?;
            let gone = match value.as_deref() {
                Some(v) if split_field_value(v).0 == *at => {
                    batch.delete_member(storage, Cf::Data, &coll, field);
                    true
                }
                Some(_) => false,
                // Dropped by the compaction filter if its index entry is still there (a writer
                // that removes a field removes its entry in the same batch).
                None => storage
                    .db
                    .get_pinned_cf(storage.cf(CF_EXPIRY), &index_key)?
                    .is_some(),
            };
            if gone {
                let meta = entry.0.as_mut().expect("live");
                meta.len = meta.len.saturating_sub(1);
                entry.1 = Some(expired.len());
                storage.expired_fields.fetch_add(1, Ordering::Relaxed);
                expired.push((db, key.clone(), false));
            }
        }
        batch.delete_raw(storage, CF_EXPIRY, index_key);
    }
    for (key, (meta, last_expired)) in &hashes.list {
        // The commit counts from the meta read above (the hash is present, with its expiry).
        match (meta, last_expired) {
            (Some(m), Some(last)) if m.len == 0 => {
                batch.delete_meta_known(storage, db, key, KeyState::Present(m.expire_at_ms));
                expired[*last].2 = true;
            }
            (Some(m), Some(_)) => {
                batch.put_meta_known(storage, db, key, m, KeyState::Present(m.expire_at_ms))
            }
            _ => {}
        }
    }
    if !batch.is_empty() {
        storage.commit(batch)?;
    }
    Ok(())
}
