//! Exact key counts per database, kept with the writes: DBSIZE and INFO keyspace in O(1).
//!
//! Every commit learns, for each key whose meta record it puts or deletes, what the key looked
//! like before ([`KeyState`], one point read under the key locks) and after, and turns the
//! difference into count deltas ([`Tally`]). The deltas go into the same RocksDB WriteBatch as
//! the write, as one delta record under a key of its own (a put: RocksDB's merge operands would
//! serialize memtable inserts, and measured 2-4x slower key creation), so the persisted counts
//! are exactly as durable as the keys: a `kill -9` replays both from the WAL or neither. In
//! memory, [`KeyCounts`] mirrors them in atomics. About once a second the timer folds the delta
//! records into absolute counts ([`Storage::fold_counts`]), so an open reads the absolute counts
//! plus at most about a second of delta records.
//!
//! Like Redis, a key counts until it is removed: a logically expired key counts until active
//! expiry (or a write) deletes it. FLUSHDB / FLUSHALL range-delete the counters with the keys.
//!
//! Beside the counts, the sum of the expiry times of the keys that have one is kept the same
//! way, so INFO keyspace's `avg_ttl` is the exact mean TTL in O(1) (Redis estimates it from the
//! keys its expiry cycle samples).
//!
//! ```text
//! counts CF  key:   db (u16 BE) | b'k' (keys) or b'e' (keys with an expiry)
//!            value: i64 LE, the count as of the last fold
//!            key:   db (u16 BE) | b's'
//!            value: i128 LE, the sum of the keys' expiry times (Unix ms) as of the last fold
//!            key:   INTERNAL_DB | b'd' | sequence (u64 BE): a delta record not folded yet
//!            value: 0x02, then (db u16 BE, keys delta i64 LE, expires delta i64 LE,
//!                   expiry sum delta i128 LE) per database touched
//!            key:   INTERNAL_DB | b"v": b"2" once the counts and sums are complete (see
//!                   `rebuild_counts`; b"1": counts complete, sums not kept yet)
//! ```
//!
//! Delta records written before the sums were kept hold 18-byte entries without the leading
//! byte: an even length, where a record of this format has an odd one.

use super::encoding::{db_prefix, decode_meta_key, meta_expire_at};
use super::expiry_index;
use super::{Storage, StorageResult, CF_COUNTS, CF_EXPIRY, CF_META, INTERNAL_DB};
use parking_lot::Mutex;
use rocksdb::{WriteBatch, WriteOptions};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const TAG_KEYS: u8 = b'k';
const TAG_EXPIRES: u8 = b'e';
const TAG_EXPIRY_SUM: u8 = b's';
/// Marks a counts column family whose counts cover every key (written last by `rebuild`).
const COMPLETE_KEY: [u8; 3] = [0xff, 0xff, b'v'];
/// [`COMPLETE_KEY`]'s value once the expiry sums are kept too.
const COMPLETE_WITH_SUMS: &[u8] = b"2";
/// Databases per lazily allocated chunk of [`KeyCounts`].
const CHUNK: usize = 256;

/// Delta records: INTERNAL_DB | b'd' | sequence, and the end of their range.
const DELTA_PREFIX: [u8; 3] = [0xff, 0xff, b'd'];
const DELTA_END: [u8; 3] = [0xff, 0xff, b'd' + 1];
/// First byte of a delta record with expiry sums.
const DELTA_WITH_SUMS: u8 = 2;
/// Bytes of one database's entry in a delta record.
const DELTA_ENTRY: usize = 34;
/// Bytes of one database's entry in a delta record written before the sums were kept.
const OLD_DELTA_ENTRY: usize = 18;

fn delta_key(seq: u64) -> [u8; 11] {
    let mut k = [0u8; 11];
    k[..3].copy_from_slice(&DELTA_PREFIX);
    k[3..].copy_from_slice(&seq.to_be_bytes());
    k
}

fn decode_i64(raw: &[u8]) -> i64 {
    raw.try_into().map(i64::from_le_bytes).unwrap_or(0)
}

fn decode_i128(raw: &[u8]) -> i128 {
    raw.try_into().map(i128::from_le_bytes).unwrap_or(0)
}

fn counter_key(db: u16, tag: u8) -> [u8; 3] {
    let [a, b] = db_prefix(db);
    [a, b, tag]
}

/// One database's counts, and where its active expiry scan resumes.
#[derive(Default)]
pub struct DbCounts {
    keys: AtomicI64,
    expires: AtomicI64,
    /// Sum of the expiry times (Unix ms) of the keys that have one: a few keys with the
    /// farthest expiries Redis accepts overflow an i64, and no 128-bit atomic is stable, so a
    /// lock, taken by the commits that change an expiry. `expires` changes under it too, so
    /// `avg_ttl` never divides one commit's sum by another's count (with two keys, that would
    /// show decades).
    expiry_sum: Mutex<i128>,
    /// No expiry index entry of this database is due before this time (Unix ms): the active
    /// expiry cycle skips the database until then. Lowered by every commit that indexes an
    /// earlier expiry (after its write, see `expire`), raised by the cycle.
    pub(super) expiry_scan_from: AtomicU64,
    /// The same for this database's hash field entries (`expire::FieldExpiry`).
    pub(super) field_scan_from: AtomicU64,
}

impl DbCounts {
    pub fn keys(&self) -> u64 {
        self.keys.load(Ordering::Relaxed).max(0) as u64
    }

    pub fn expires(&self) -> u64 {
        self.expires.load(Ordering::Relaxed).max(0) as u64
    }

    /// The mean time to live (ms) of the keys with an expiry at `now_ms`, 0 without any. A key
    /// expired but not removed yet counts with its negative time left, so the mean is a little
    /// low (never below 0) while active expiry is behind (Redis leaves such keys out of its
    /// sample).
    pub fn avg_ttl_ms(&self, now_ms: u64) -> u64 {
        let sum = self.expiry_sum.lock();
        let expires = self.expires.load(Ordering::Relaxed);
        if expires <= 0 {
            return 0;
        }
        let mean = *sum / i128::from(expires);
        (mean - i128::from(now_ms)).clamp(0, i128::from(u64::MAX)) as u64
    }

    fn add(&self, keys: i64, expires: i64, expiry_sum: i128) {
        self.keys.fetch_add(keys, Ordering::Relaxed);
        if expires != 0 || expiry_sum != 0 {
            let mut sum = self.expiry_sum.lock();
            self.expires.fetch_add(expires, Ordering::Relaxed);
            *sum += expiry_sum;
        }
    }

    fn reset(&self) {
        let mut sum = self.expiry_sum.lock();
        self.keys.store(0, Ordering::Relaxed);
        self.expires.store(0, Ordering::Relaxed);
        *sum = 0;
        drop(sum);
        self.expiry_scan_from.store(u64::MAX, Ordering::Relaxed);
        self.field_scan_from.store(u64::MAX, Ordering::Relaxed);
    }
}

/// The in-memory counts of every database, allocated in chunks on first use (there may be
/// 65535 databases; most servers use one).
pub struct KeyCounts {
    chunks: Box<[OnceLock<Box<[DbCounts]>>]>,
    /// Sequence of the next delta record, and the sequence up to which they are folded.
    next_delta: AtomicU64,
    folded_to: AtomicU64,
}

impl Default for KeyCounts {
    fn default() -> Self {
        KeyCounts {
            chunks: (0..(usize::from(u16::MAX) + 1) / CHUNK)
                .map(|_| OnceLock::new())
                .collect(),
            next_delta: AtomicU64::new(0),
            folded_to: AtomicU64::new(0),
        }
    }
}

impl KeyCounts {
    /// The counts of `db`, if anything was ever counted in its chunk.
    pub fn get(&self, db: u16) -> Option<&DbCounts> {
        let db = usize::from(db);
        self.chunks[db / CHUNK].get().map(|c| &c[db % CHUNK])
    }

    fn get_or_init(&self, db: u16) -> &DbCounts {
        let db = usize::from(db);
        &self.chunks[db / CHUNK].get_or_init(|| {
            (0..CHUNK)
                .map(|_| DbCounts {
                    expiry_scan_from: AtomicU64::new(u64::MAX),
                    field_scan_from: AtomicU64::new(u64::MAX),
                    ..DbCounts::default()
                })
                .collect()
        })[db % CHUNK]
    }

    /// Live keys of `db` (expired keys not yet removed included, as in Redis).
    pub fn keys(&self, db: u16) -> u64 {
        self.get(db).map_or(0, DbCounts::keys)
    }

    /// Keys of `db` with an expiry.
    pub fn expires(&self, db: u16) -> u64 {
        self.get(db).map_or(0, DbCounts::expires)
    }

    /// The sum of the expiry times of `db`'s keys with an expiry.
    #[cfg(test)]
    pub(super) fn expiry_sum(&self, db: u16) -> i128 {
        self.get(db).map_or(0, |c| *c.expiry_sum.lock())
    }

    /// The mean time to live of `db`'s keys with an expiry, in ms (see [`DbCounts::avg_ttl_ms`]).
    pub fn avg_ttl_ms(&self, db: u16, now_ms: u64) -> u64 {
        self.get(db).map_or(0, |c| c.avg_ttl_ms(now_ms))
    }

    /// Every allocated database below `databases`, with its counts.
    pub fn each(&self, databases: u16) -> impl Iterator<Item = (u16, &DbCounts)> {
        self.chunks
            .iter()
            .enumerate()
            .filter_map(|(i, c)| Some((i, c.get()?)))
            .flat_map(|(i, c)| c.iter().enumerate().map(move |(j, d)| (i * CHUNK + j, d)))
            .take_while(move |(db, _)| *db < usize::from(databases))
            .map(|(db, d)| (db as u16, d))
    }

    /// Zeroes the counts of databases `from..to` (FLUSHDB, FLUSHALL).
    pub(super) fn reset(&self, from: u16, to: u16) {
        for (db, d) in self.each(to) {
            if db >= from {
                d.reset();
            }
        }
    }

    /// If `key` is a delta record's key, adds its `value` to the counts (loading at open, or a
    /// replica applying its primary's batch) and returns true.
    pub(super) fn add_delta_record(&self, key: &[u8], value: &[u8]) -> bool {
        if !key.starts_with(&DELTA_PREFIX) {
            return false;
        }
        let (entries, size) = match value.split_first() {
            Some((&DELTA_WITH_SUMS, rest)) if value.len() % 2 == 1 => (rest, DELTA_ENTRY),
            _ => (value, OLD_DELTA_ENTRY),
        };
        for e in entries.chunks_exact(size) {
            let sum = e.get(18..34).map_or(0, decode_i128);
            self.get_or_init(u16::from_be_bytes([e[0], e[1]])).add(
                decode_i64(&e[2..10]),
                decode_i64(&e[10..18]),
                sum,
            );
        }
        true
    }

    /// Lowers `db`'s expiry scan start to `at` (an expiry just indexed).
    pub(super) fn expiry_indexed(&self, db: u16, at: u64) {
        self.get_or_init(db)
            .expiry_scan_from
            .fetch_min(at, Ordering::AcqRel);
    }

    /// Lowers `db`'s field expiry scan start to `at` (a hash field's expiry just indexed).
    pub(super) fn field_expiry_indexed(&self, db: u16, at: u64) {
        self.get_or_init(db)
            .field_scan_from
            .fetch_min(at, Ordering::AcqRel);
    }
}

/// What a key looked like before or after a write, as far as counting goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyState {
    Absent,
    /// Present, with its expiry (0 = none).
    Present(u64),
}

impl KeyState {
    /// The state an encoded meta value describes (a record too short to read counts as a key
    /// without expiry: it exists).
    pub fn of_meta(raw: Option<&[u8]>) -> KeyState {
        match raw {
            None => KeyState::Absent,
            Some(raw) => KeyState::Present(meta_expire_at(raw).unwrap_or(0)),
        }
    }

    pub(super) fn counts(self) -> (i64, i64) {
        match self {
            KeyState::Absent => (0, 0),
            KeyState::Present(0) => (1, 0),
            KeyState::Present(_) => (1, 1),
        }
    }

    fn expiry(self) -> Option<u64> {
        match self {
            KeyState::Present(at) if at != 0 => Some(at),
            _ => None,
        }
    }

    /// What the key adds to its database's expiry sum.
    fn expiry_sum(self) -> i128 {
        self.expiry().map_or(0, i128::from)
    }
}

/// One database's changes in a batch.
#[derive(Clone, Copy)]
struct Delta {
    db: u16,
    keys: i64,
    expires: i64,
    expiry_sum: i128,
}

/// The count deltas and expiry index changes of one batch, worked out from the keys' states
/// before and after each write; see [`Tally::key_written`].
#[derive(Default)]
pub struct Tally {
    /// One entry per database touched (usually one).
    deltas: Vec<Delta>,
    /// Expiries indexed by this batch, as (db, expire_at_ms).
    indexed: Vec<(u16, u64)>,
}

impl Tally {
    /// Accounts one key's change from `before` to `after`: adds its expiry index updates to
    /// `batch` and remembers the count deltas.
    pub fn key_written(
        &mut self,
        storage: &Storage,
        batch: &mut WriteBatch,
        db: u16,
        key: &[u8],
        before: KeyState,
        after: KeyState,
    ) {
        if before == after {
            return;
        }
        let (k0, e0) = before.counts();
        let (k1, e1) = after.counts();
        let change = Delta {
            db,
            keys: k1 - k0,
            expires: e1 - e0,
            expiry_sum: after.expiry_sum() - before.expiry_sum(),
        };
        let counted = change.keys != 0 || change.expires != 0 || change.expiry_sum != 0;
        match self.deltas.iter_mut().find(|d| d.db == db) {
            _ if !counted => {}
            Some(d) => {
                d.keys += change.keys;
                d.expires += change.expires;
                d.expiry_sum += change.expiry_sum;
            }
            None => self.deltas.push(change),
        }
        let index = storage.cf(CF_EXPIRY);
        if let Some(at) = before.expiry() {
            batch.delete_cf(index, expiry_index::key(db, at, key));
        }
        if let Some(at) = after.expiry() {
            batch.put_cf(index, expiry_index::key(db, at, key), []);
            self.indexed.push((db, at));
        }
    }

    /// Adds the count deltas to `batch`, as one delta record.
    pub fn add_to(&self, storage: &Storage, batch: &mut WriteBatch) {
        if self.deltas.is_empty() {
            return;
        }
        let seq = storage.counts.next_delta.fetch_add(1, Ordering::Relaxed);
        batch.put_cf(storage.cf(CF_COUNTS), delta_key(seq), self.delta_record());
    }

    /// The value of the batch's delta record.
    fn delta_record(&self) -> Vec<u8> {
        let mut value = Vec::with_capacity(1 + self.deltas.len() * DELTA_ENTRY);
        value.push(DELTA_WITH_SUMS);
        for d in &self.deltas {
            value.extend_from_slice(&d.db.to_be_bytes());
            value.extend_from_slice(&d.keys.to_le_bytes());
            value.extend_from_slice(&d.expires.to_le_bytes());
            value.extend_from_slice(&d.expiry_sum.to_le_bytes());
        }
        value
    }

    /// Mirrors a committed batch in memory.
    pub fn apply(&self, counts: &KeyCounts) {
        for d in &self.deltas {
            counts
                .get_or_init(d.db)
                .add(d.keys, d.expires, d.expiry_sum);
        }
        for &(db, at) in &self.indexed {
            counts.expiry_indexed(db, at);
        }
    }
}

impl Storage {
    /// Loads the persisted counts, or counts every key once if this data directory was written
    /// before counts were kept (then persists them), or sums the expiries once if it was
    /// written before their sums were kept.
    pub(super) fn load_counts(&self) -> StorageResult<()> {
        let cf = self.cf(CF_COUNTS);
        match self.db.get_pinned_cf(cf, COMPLETE_KEY)?.as_deref() {
            None => self.rebuild_counts()?,
            Some(COMPLETE_WITH_SUMS) => {}
            Some(_) => self.sum_expiries()?,
        }
        let mut it = self.db.raw_iterator_cf(cf);
        it.seek_to_first();
        while let (Some(k), Some(v)) = (it.key(), it.value()) {
            if self.counts.add_delta_record(k, v) {
                // a delta record: added
            } else if let [a, b, tag] = *k {
                let db = u16::from_be_bytes([a, b]);
                if db != INTERNAL_DB {
                    let c = self.counts.get_or_init(db);
                    match tag {
                        TAG_KEYS => c.add(decode_i64(v), 0, 0),
                        TAG_EXPIRES => c.add(0, decode_i64(v), 0),
                        TAG_EXPIRY_SUM => c.add(0, 0, decode_i128(v)),
                        _ => {}
                    }
                }
            }
            it.next();
        }
        it.status()?;
        drop(it);
        // Expired keys and fields may be waiting: the first expiry cycles scan every database
        // from the start.
        for (_, c) in self.counts.each(INTERNAL_DB) {
            c.expiry_scan_from.store(0, Ordering::Relaxed);
            c.field_scan_from.store(0, Ordering::Relaxed);
        }
        // The loaded delta records are folded; new ones start over at sequence 0 (the fold's
        // range delete is older than them).
        let mut batch = WriteBatch::default();
        self.fold_counts_into(&mut batch);
        self.write(batch, super::Wait::Allowed)
    }

    /// Folds the delta records into absolute counts, if any were written since the last fold:
    /// with no commit in flight (the gate), the in-memory counts are exactly the absolute
    /// counts plus every delta record written, so they replace them in one batch.
    pub fn fold_counts(&self) -> StorageResult<()> {
        let _gate = self.commit_gate.write();
        if self.counts.folded_to.load(Ordering::Relaxed)
            == self.counts.next_delta.load(Ordering::Relaxed)
        {
            return Ok(());
        }
        let mut batch = WriteBatch::default();
        self.fold_counts_into(&mut batch);
        self.write(batch, super::Wait::Allowed)
    }

    /// Adds the fold to `batch` (with the gate held: FLUSHDB's batch, or the fold's own): the
    /// in-memory counts as absolute counts, and the deletion of every delta record.
    pub(super) fn fold_counts_into(&self, batch: &mut WriteBatch) {
        let next = self.counts.next_delta.load(Ordering::Relaxed);
        let cf = self.cf(CF_COUNTS);
        for (db, c) in self.counts.each(INTERNAL_DB) {
            let (keys, expires, sum) = (
                c.keys.load(Ordering::Relaxed),
                c.expires.load(Ordering::Relaxed),
                *c.expiry_sum.lock(),
            );
            put_counters(batch, cf, db, keys, expires, sum);
        }
        batch.delete_range_cf(cf, DELTA_PREFIX, DELTA_END);
        self.counts.folded_to.store(next, Ordering::Relaxed);
    }

    /// Counts the keys of every user database and indexes their expiries by one scan of the
    /// meta column family, then writes the counts and the completion mark in one batch. Run
    /// at open, before any client, on a data directory without counts; an interrupted run
    /// simply runs again at the next open.
    fn rebuild_counts(&self) -> StorageResult<()> {
        let started = Instant::now();
        let mut it = self.db.raw_iterator_cf(self.cf(CF_META));
        it.seek_to_first();
        let mut tally = Tally::default();
        let mut batch = WriteBatch::default();
        let (mut seen, mut last_log) = (0u64, Instant::now());
        while let (Some(raw_key), Some(raw_val)) = (it.key(), it.value()) {
            let Some((db, _, key)) = decode_meta_key(raw_key) else {
                it.next();
                continue;
            };
            if db == INTERNAL_DB {
                break;
            }
            if seen == 0 {
                tracing::info!(
                    "counting the keys of a data directory written before key counts were kept"
                );
            }
            let state = KeyState::of_meta(Some(raw_val));
            tally.key_written(self, &mut batch, db, key, KeyState::Absent, state);
            seen += 1;
            if batch.len() >= 10_000 {
                self.db.write(std::mem::take(&mut batch))?;
                tally.indexed.clear();
            }
            if last_log.elapsed() >= Duration::from_secs(2) {
                tracing::info!(keys = seen, "counting keys...");
                last_log = Instant::now();
            }
            it.next();
        }
        it.status()?;
        let cf = self.cf(CF_COUNTS);
        batch.delete_range_cf(cf, [0u8, 0], db_prefix(INTERNAL_DB));
        batch.delete_range_cf(cf, DELTA_PREFIX, DELTA_END);
        for d in &tally.deltas {
            put_counters(&mut batch, cf, d.db, d.keys, d.expires, d.expiry_sum);
        }
        batch.put_cf(cf, COMPLETE_KEY, COMPLETE_WITH_SUMS);
        let mut wo = WriteOptions::default();
        wo.set_sync(true);
        self.db.write_opt(batch, &wo)?;
        if seen > 0 {
            tracing::info!(
                keys = seen,
                ms = started.elapsed().as_millis() as u64,
                "key counts built"
            );
        }
        Ok(())
    }

    /// Sums the expiry times of every user database's keys from the expiry index (which holds
    /// exactly the keys with an expiry), once, at open of a data directory whose counts were
    /// kept before the sums were: it reads only the keys with an expiry.
    fn sum_expiries(&self) -> StorageResult<()> {
        let started = Instant::now();
        let mut sums: Vec<(u16, i128)> = Vec::new();
        let (mut seen, mut last_log) = (0u64, Instant::now());
        let mut it = self.db.raw_iterator_cf(self.cf(CF_EXPIRY));
        it.seek_to_first();
        while let Some(raw) = it.key() {
            if last_log.elapsed() >= Duration::from_secs(2) {
                tracing::info!(
                    keys = seen,
                    "summing the expiry times of the keys with a TTL..."
                );
                last_log = Instant::now();
            }
            let db = u16::from_be_bytes([raw[0], raw[1]]);
            if db == INTERNAL_DB {
                break;
            }
            match expiry_index::decode(raw) {
                // A hash field's entry: every key entry of this database came before it.
                Some((at, _)) if expiry_index::is_field_time(at) => {
                    it.seek(db_prefix(db + 1));
                    continue;
                }
                Some((at, _)) => {
                    seen += 1;
                    match sums.last_mut() {
                        Some((d, sum)) if *d == db => *sum += i128::from(at),
                        _ => sums.push((db, i128::from(at))),
                    }
                }
                None => {}
            }
            it.next();
        }
        it.status()?;
        drop(it);
        let cf = self.cf(CF_COUNTS);
        let mut batch = WriteBatch::default();
        for &(db, sum) in &sums {
            batch.put_cf(cf, counter_key(db, TAG_EXPIRY_SUM), sum.to_le_bytes());
        }
        batch.put_cf(cf, COMPLETE_KEY, COMPLETE_WITH_SUMS);
        let mut wo = WriteOptions::default();
        wo.set_sync(true);
        self.db.write_opt(batch, &wo)?;
        tracing::info!(
            databases = sums.len(),
            keys = seen,
            ms = started.elapsed().as_millis() as u64,
            "expiry times summed (INFO keyspace avg_ttl)"
        );
        Ok(())
    }

    /// Keys in database `db` (DBSIZE), in O(1).
    pub fn key_count(&self, db: u16) -> u64 {
        let pending = self.txn_count_delta(db).0;
        (self.counts.keys(db) as i64 + pending).max(0) as u64
    }

    /// The mean time to live (ms) of database `db`'s keys with an expiry (INFO keyspace
    /// `avg_ttl=`), in O(1).
    pub fn avg_ttl_ms(&self, db: u16) -> u64 {
        self.counts.avg_ttl_ms(db, crate::clock::unix_ms())
    }

    /// Keys in database `db` that have an expiry (INFO keyspace `expires=`), in O(1).
    pub fn expires_count(&self, db: u16) -> u64 {
        let pending = self.txn_count_delta(db).1;
        (self.counts.expires(db) as i64 + pending).max(0) as u64
    }
}

/// Puts one database's absolute counters into `batch`, or deletes them when all are zero.
fn put_counters(
    batch: &mut WriteBatch,
    cf: &rocksdb::ColumnFamily,
    db: u16,
    keys: i64,
    expires: i64,
    expiry_sum: i128,
) {
    if keys == 0 && expires == 0 && expiry_sum == 0 {
        for tag in [TAG_KEYS, TAG_EXPIRES, TAG_EXPIRY_SUM] {
            batch.delete_cf(cf, counter_key(db, tag));
        }
    } else {
        batch.put_cf(cf, counter_key(db, TAG_KEYS), keys.to_le_bytes());
        batch.put_cf(cf, counter_key(db, TAG_EXPIRES), expires.to_le_bytes());
        batch.put_cf(
            cf,
            counter_key(db, TAG_EXPIRY_SUM),
            expiry_sum.to_le_bytes(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// INFO reads `avg_ttl` while commits add and remove keys with an expiry: it must never
    /// divide one commit's sum by another's count. With one key expiring at `at` always there
    /// and a second one coming and going, a torn read shows about `at` ms (decades) instead
    /// of at most `at - now`.
    #[test]
    fn avg_ttl_never_mixes_one_commits_sum_with_anothers_count() {
        let counts = DbCounts::default();
        let now = 1_000_000_000_000u64;
        let at = now + 1_000_000;
        counts.add(1, 1, i128::from(at));
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..300_000 {
                    counts.add(1, 1, i128::from(at));
                    counts.add(-1, -1, -i128::from(at));
                }
                done.store(true, Ordering::Relaxed);
            });
            let mut reads = 0u64;
            while !done.load(Ordering::Relaxed) || reads < 1000 {
                let avg = counts.avg_ttl_ms(now);
                assert!(avg <= at - now, "avg_ttl {avg} after {reads} reads");
                reads += 1;
            }
        });
        assert_eq!(counts.avg_ttl_ms(now), at - now);
    }

    /// Delta records of both formats load: the one with sums, and the 18-byte entries written
    /// before sums were kept (whose even length tells them apart even when a database number
    /// starts with the format byte).
    #[test]
    fn delta_records_of_both_formats_load() {
        let counts = KeyCounts::default();
        let mut old = Vec::new();
        for (db, keys, expires) in [(0x0200u16, 7i64, 1i64), (3, 5, 2)] {
            old.extend_from_slice(&db.to_be_bytes());
            old.extend_from_slice(&keys.to_le_bytes());
            old.extend_from_slice(&expires.to_le_bytes());
        }
        assert!(counts.add_delta_record(&delta_key(1), &old));
        let mut tally = Tally::default();
        tally.deltas.push(Delta {
            db: 3,
            keys: 1,
            expires: 1,
            expiry_sum: 1 << 70,
        });
        let new = tally.delta_record();
        assert!(counts.add_delta_record(&delta_key(2), &new));
        assert!(!counts.add_delta_record(&counter_key(3, TAG_KEYS), &new));
        assert_eq!((counts.keys(3), counts.expires(3)), (6, 3));
        assert_eq!((counts.keys(0x0200), counts.expires(0x0200)), (7, 1));
        assert_eq!(counts.expiry_sum(3), 1 << 70);
    }
}
