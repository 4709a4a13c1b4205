//! RocksDB storage: column families, key encoding, durability, expiry.
//!
//! Role: the only module that talks to RocksDB. Command handlers read metadata with
//! [`Storage::get_meta`] (no lock), and write by taking the key's stripe lock
//! ([`Storage::lock`]), building a [`Batch`], and committing it with [`Storage::commit`], which
//! writes the memtable and the WAL buffer; the thread that releases the reply first calls
//! [`Storage::make_durable`], which writes the buffer to the WAL file (and, with `appendfsync
//! always`, syncs it) once for all writes waiting (group commit, see `wal`). Every acknowledged
//! write is therefore in the WAL file before its reply leaves, so a `kill -9` loses nothing in
//! any mode; `appendfsync` only decides how much an OS crash or power loss can take (always:
//! nothing, everysec: about a second, no: what the OS had not written).
//!
//! Layout (see `encoding`): `meta` holds one record per user key (a string's value inline), `data`
//! holds collection members, `score` the sorted-set score index, `expiry` the keys with an expiry
//! by time (`expiry_index`), `counts` the key counts per database (`counts`). Expired keys are
//! removed by the active expiry cycle in `expire`, members of gone collections by its compaction
//! filter.
//!
//! [`Storage::commit`] keeps the counts and the expiry index with every write: it reads the
//! state of each key the batch writes (it runs under the writer's key locks, so nothing changes
//! in between) and adds the differences to the same WriteBatch. Handlers just write keys.

pub mod backlog;
pub mod budget;
mod building;
pub mod checkpoint;
#[cfg(test)]
mod count_tests;
pub mod counts;
pub mod dbmap;
pub mod encoding;
pub mod expire;
pub mod expiry_index;
pub mod flush_gate;
pub mod health;
mod introspect;
pub mod locks;
pub mod members;
mod memtables;
pub mod options;
pub mod pop_decks;
pub mod pop_hints;
pub mod prefix_scan;
pub mod replica;
pub mod stream;
#[cfg(test)]
mod tests;
pub mod txn;
pub mod wal;
pub mod wal_retention;

use crate::cache::{Cache, CacheSettings, CachedValue, CollUpdate, CollValue};
use crate::key_list::KeyList;
use bytes::Bytes;
use counts::{KeyCounts, KeyState, Tally};
use encoding::{
    db_prefix, decode_meta_key, meta_expire_at, meta_key, meta_kind, prefix_successor, Kind, Meta,
    META_HEADER_LEN,
};
use locks::{KeyGuard, KeyLocks};
pub use members::{Cf, Coll, KeyRecord, MemberCursor, View};
use options::{CfRole, Tuning};
use parking_lot::{Mutex, RwLock};
use rocksdb::{ColumnFamily, ColumnFamilyDescriptor, ReadOptions, WriteOptions, DB};
use smallvec::SmallVec;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock, Weak};
pub use txn::Txn;

pub use rocksdb::Error as StorageError;
pub type StorageResult<T> = Result<T, StorageError>;

const CF_META: &str = "meta";
const CF_DATA: &str = "data";
const CF_SCORE: &str = "score";
const CF_EXPIRY: &str = "expiry";
const CF_COUNTS: &str = "counts";
/// The column families a database's or the keyspace's range delete (FLUSHDB, FLUSHALL) covers:
/// every one whose keys start with the database index.
const DB_PREFIXED_CFS: [&str; 5] = [CF_META, CF_DATA, CF_SCORE, CF_EXPIRY, CF_COUNTS];
/// Every column family opened with kvik's options (`options::cf_options`): what a CONFIG SET of
/// a RocksDB setting changes.
const TUNED_CFS: [&str; 5] = [CF_META, CF_DATA, CF_SCORE, CF_EXPIRY, CF_COUNTS];
/// The column families that hold the data, in the order INFO lists them (the small `expiry`
/// and `counts` ones are laid out as scan-only, like `score`).
pub const COLUMN_FAMILIES: [&str; 3] = [CF_META, CF_DATA, CF_SCORE];

/// Database index reserved for kvik's own records (topology, version floor). User databases are
/// limited to fewer than this, so FLUSHALL's range never reaches it.
pub const INTERNAL_DB: u16 = u16::MAX;

/// The INTERNAL_DB record holding the collection version floor (see [`Storage::next_version`]).
const VERSION_FLOOR_KEY: &[u8] = b"version-floor";
/// Versions reserved per floor write: the floor is persisted about once per this many new
/// collections.
const VERSION_RESERVE: u64 = 1 << 24;

/// Told about every committed write, while the writer still holds its key locks: WATCH marks
/// transactions dirty, blocked clients learn that a key they wait on got data.
pub trait WriteObserver: Send + Sync {
    /// `keys`: every key whose meta record the batch put or deleted, as (db, key, kind after the
    /// write, or `None` if deleted). Observers see logical (client-visible) databases, here and
    /// below (see `dbmap`).
    fn keys_written(&self, keys: &[(u16, &[u8], Option<Kind>)]);
    /// A commit Redis does not signal as a modification of its keys (stream consumer-group
    /// bookkeeping, see [`Batch::quiet`]): no WATCH abort, no tracking invalidation; blocked
    /// clients may still need to look (XGROUP DESTROY answers NOGROUP).
    fn keys_touched(&self, _keys: &[(u16, &[u8], Option<Kind>)]) {}
    /// FLUSHDB (`Some(db)`) or FLUSHALL (`None`).
    fn db_flushed(&self, db: Option<u16>);
    /// Whether [`keys_changed`](WriteObserver::keys_changed) should be worked out at all
    /// (keyspace notifications ask for it only while `expired` or `new` events are enabled).
    fn wants_changes(&self) -> bool {
        false
    }
    /// The keys of a commit whose record was already expired when the batch replaced or
    /// deleted it, or that the batch created (absent or expired before, present after).
    fn keys_changed(&self, _changes: &[KeyChange<'_>]) {}
}

/// One key of a commit that expired or was created (see [`WriteObserver::keys_changed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyChange<'a> {
    pub db: u16,
    pub key: &'a [u8],
    /// Its record had expired before this write replaced or removed it.
    pub expired: bool,
    /// The write created the key.
    pub created: bool,
}

/// Whether a storage call may wait: for a key lock, a disk read or a write stall. An I/O thread
/// running a command to completion waits for no lock and no stall; RocksDB then answers
/// `Incomplete` instead (writes with `no_slowdown`), and the command goes to the pool, having
/// changed nothing. Whether its reads may leave RocksDB's memory is the I/O thread's call
/// (`cmd::disk_gate`: while its disk reads are fast).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// A worker: anything may wait.
    Allowed,
    /// An I/O thread: nothing waits; reads answer from the memtables and the block cache.
    Never,
    /// An I/O thread whose disk reads are fast: no lock or stall waits, reads may go to disk.
    ReadsOnly,
}

impl Wait {
    /// Whether locks and write stalls may be waited for (a worker).
    pub fn allowed(self) -> bool {
        self == Wait::Allowed
    }

    pub(crate) fn read_options(self) -> ReadOptions {
        let mut ro = ReadOptions::default();
        if self == Wait::Never {
            ro.set_read_tier(rocksdb::ReadTier::BlockCache);
        }
        ro
    }
}

/// How often the WAL is synced to stable storage, in Redis's `appendfsync` terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum FsyncPolicy {
    /// Sync the WAL before acknowledging each write.
    Always = 0,
    /// Sync the WAL once a second from a timer.
    Everysec = 1,
    /// Leave syncing to the OS.
    No = 2,
}

impl FsyncPolicy {
    pub fn parse(s: &str) -> Option<FsyncPolicy> {
        match s.to_ascii_lowercase().as_str() {
            "always" => Some(FsyncPolicy::Always),
            "everysec" => Some(FsyncPolicy::Everysec),
            "no" => Some(FsyncPolicy::No),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            FsyncPolicy::Always => "always",
            FsyncPolicy::Everysec => "everysec",
            FsyncPolicy::No => "no",
        }
    }
}

/// A set of writes committed atomically, with one WAL record.
///
/// It also records, per key written, the write's effect on the hot cache (a put updates an
/// entry already cached, a delete drops it); [`Storage::commit`] applies them right after the
/// RocksDB write, while the writer still holds its key locks. Every write goes through a batch,
/// so no write command can forget its cache update.
pub struct Batch {
    /// Created at the first write that goes to RocksDB directly (never, for a batch buffered
    /// into a transaction: most writes on an I/O thread).
    inner: Option<rocksdb::WriteBatch>,
    /// The batch's writes again, kept while this thread has a transaction open (see `txn`).
    log: Option<OpLog>,
    effects: Effects,
    /// A write Redis does not signal as a modification of its keys (see [`Batch::quiet`]).
    quiet: bool,
    /// The earliest hash-field expiry this batch indexes, per database (most batches: none).
    field_expiry_min: Vec<(u16, u64)>,
}

/// A batch's logged writes: most write commands make one or two (a member and its meta), kept
/// inline so a command's batch allocates nothing of its own.
type OpLog = SmallVec<[txn::Op; 2]>;
/// A batch's cache effects: most write commands write one key.
type Effects = SmallVec<[CacheEffect; 1]>;

/// `inner`, created if it was not yet.
fn rocks(inner: &mut Option<rocksdb::WriteBatch>) -> &mut rocksdb::WriteBatch {
    inner.get_or_insert_with(rocksdb::WriteBatch::default)
}

impl Default for Batch {
    fn default() -> Batch {
        Batch {
            inner: None,
            log: txn::recording().then(OpLog::new),
            effects: Effects::new(),
            quiet: false,
            field_expiry_min: Vec::new(),
        }
    }
}

/// One key's write: the raw meta key and, for a put, the encoded meta value (shared with the
/// cache entry, not copied). Commit derives the cache update, the count deltas and the expiry
/// index changes from it.
struct CacheEffect {
    raw_key: Bytes,
    put: Option<Bytes>,
    /// For a put of a collection the cache holds: a small hash's whole new field set (rebuilt
    /// from the cached copy) or the member edits of a [`BigColl`](crate::cache::BigColl), so
    /// the cache entry is updated rather than dropped.
    update: Option<CollUpdate>,
    /// Written by a quiet batch (see [`Batch::quiet`]; a transaction mixes both kinds).
    quiet: bool,
    /// The key's state before the batch, when its writer read it under the key's lock
    /// ([`Batch::delete_meta_known`]): the commit counts from it instead of reading it again.
    prior: Option<KeyState>,
}

pub struct Storage {
    db: Arc<DB>,
    fsync: AtomicU8,
    locks: KeyLocks,
    cache: Cache,
    /// Last collection version handed out, and the persisted floor it must stay below.
    version: AtomicU64,
    version_floor: Mutex<u64>,
    /// The first version this process handed out (versions below it are older runs').
    first_version: AtomicU64,
    observers: RwLock<Vec<Arc<dyn WriteObserver>>>,
    /// Set before the DB closes, so the data compaction filter stops looking up metadata.
    closing: Arc<AtomicBool>,
    /// Key counts per database, mirroring the `counts` column family.
    counts: KeyCounts,
    /// Commits hold it shared from their state reads to their counts update; FLUSHDB and
    /// FLUSHALL hold it exclusively, so no commit counts a key against a state a flush erased.
    commit_gate: RwLock<()>,
    /// FLUSHDB and FLUSHALL so far: a transaction whose key states were noted before one of
    /// them reads them again (see `txn`).
    flushes: AtomicU64,
    /// What the timer saw of each memtable, and the flushes it asked for (see `memtables`).
    memtables: memtables::MemtableWatch,
    /// Block cache, write buffer manager and statistics, shared by the column families.
    shared: options::Shared,
    /// Group commit: when the WAL buffer reaches the file (see `wal`).
    wal: wal::WalGroup,
    /// Where sorted sets' low ends start, as their pops left them (see `pop_hints`).
    pop_hints: pop_hints::PopHints,
    /// A random order of sets' members that SPOP takes from (see `pop_decks`).
    pop_decks: pop_decks::PopDecks,
    /// Whether writes are taken: disk space, and RocksDB's last write (see `health`).
    health: health::WriteHealth,
    /// The recent batches replicas are fed from (see `backlog`).
    backlog: backlog::Backlog,
    /// File deletions held (`hold_files`); the WAL retention deletes nothing meanwhile.
    files_held: Mutex<u64>,
    /// The WAL archive as the retention last saw it (see `wal_retention`).
    archive: wal_retention::ArchiveStats,
    /// Logical (client-visible) database -> on-disk database (SWAPDB).
    dbs: dbmap::DbMap,
    /// Hash fields removed by active expiry, and expired field records the data compaction
    /// filter dropped (INFO `expired_subkeys`, `kvik_compaction_expired_fields`).
    pub expired_fields: AtomicU64,
    pub compaction_expired_fields: Arc<AtomicU64>,
    /// `txn-skip-superseded`: a transaction leaves out of its batch the writes of a record a
    /// later write of it replaces (see `txn`).
    skip_superseded: AtomicBool,
    /// Writes left out so (INFO `kvik_superseded_writes`).
    pub superseded_writes: AtomicU64,
}

impl Drop for Storage {
    fn drop(&mut self) {
        self.closing.store(true, Ordering::SeqCst);
        // Waits for running compactions, whose filter may hold a strong reference to the DB:
        // the last reference must be dropped here, not on a RocksDB background thread.
        self.db.cancel_all_background_work(true);
    }
}

impl Storage {
    /// Opens (or creates) the database under `dir`, with a default hot cache.
    pub fn open(dir: &Path) -> StorageResult<Storage> {
        Storage::open_with_cache(dir, Cache::new(CacheSettings::default()))
    }

    /// Opens (or creates) the database under `dir`; `cache` fronts it.
    pub fn open_with_cache(dir: &Path, cache: Cache) -> StorageResult<Storage> {
        Storage::open_tuned(dir, cache, &Tuning::default())
    }

    /// Opens (or creates) the database under `dir` with the RocksDB options `options` derives
    /// from `tuning`; `cache` fronts it.
    pub fn open_tuned(dir: &Path, cache: Cache, tuning: &Tuning) -> StorageResult<Storage> {
        let (opts, shared) = options::db_options(tuning);
        let meta_opts = options::cf_options(&opts, &shared, tuning, CfRole::Meta);
        let handle: Arc<OnceLock<Weak<DB>>> = Arc::default();
        let closing = Arc::new(AtomicBool::new(false));
        let compaction_expired_fields = Arc::new(AtomicU64::new(0));
        let data_cf_opts = |name: &'static std::ffi::CStr, role: CfRole| {
            let mut o = options::cf_options(&opts, &shared, tuning, role);
            o.set_compaction_filter_factory(expire::DataFilterFactory {
                name,
                db: handle.clone(),
                closing: closing.clone(),
                dropped_fields: compaction_expired_fields.clone(),
            });
            o
        };

        let expiry_opts = options::cf_options(&opts, &shared, tuning, CfRole::Score);
        let counts_opts = options::cf_options(&opts, &shared, tuning, CfRole::Score);

        let cfs = vec![
            ColumnFamilyDescriptor::new(CF_META, meta_opts),
            ColumnFamilyDescriptor::new(CF_DATA, data_cf_opts(c"kvik-data-stale", CfRole::Data)),
            ColumnFamilyDescriptor::new(CF_SCORE, data_cf_opts(c"kvik-score-stale", CfRole::Score)),
            ColumnFamilyDescriptor::new(CF_EXPIRY, expiry_opts),
            ColumnFamilyDescriptor::new(CF_COUNTS, counts_opts),
        ];
        let db = Arc::new(DB::open_cf_descriptors(&opts, dir, cfs)?);
        let _ = handle.set(Arc::downgrade(&db));
        let triggers = options::TombstoneCleanup::memtable_options(tuning.tombstone_cleanup);
        let triggers: Vec<(&str, &str)> = triggers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        for name in TUNED_CFS {
            let cf = db.cf_handle(name).expect("the column families just opened");
            db.set_options_cf(cf, &triggers)?;
        }
        let mut storage = Storage {
            db,
            fsync: AtomicU8::new(FsyncPolicy::Everysec as u8),
            locks: KeyLocks::default(),
            cache,
            version: AtomicU64::new(0),
            version_floor: Mutex::new(0),
            first_version: AtomicU64::new(0),
            observers: RwLock::new(Vec::new()),
            closing,
            counts: KeyCounts::default(),
            commit_gate: RwLock::new(()),
            flushes: AtomicU64::new(0),
            memtables: Default::default(),
            shared,
            wal: wal::WalGroup::default(),
            pop_hints: Default::default(),
            pop_decks: Default::default(),
            health: health::WriteHealth::default(),
            backlog: backlog::Backlog::default(),
            files_held: Mutex::new(0),
            archive: Default::default(),
            dbs: dbmap::DbMap::default(),
            expired_fields: AtomicU64::new(0),
            skip_superseded: AtomicBool::new(true),
            superseded_writes: AtomicU64::new(0),
            compaction_expired_fields,
        };
        storage.dbs = dbmap::DbMap::load(storage.get_internal(dbmap::DB_MAP_KEY)?.as_deref());
        storage.init_versions()?;
        storage.load_counts()?;
        Ok(storage)
    }

    /// Starts collection versions above both the persisted floor and the clock (microseconds),
    /// and persists a new floor, so a version is never reused, even if the clock went back.
    fn init_versions(&self) -> StorageResult<()> {
        let floor = self
            .get_meta(INTERNAL_DB, VERSION_FLOOR_KEY)?
            .and_then(|m| Some(u64::from_be_bytes(m.value.get(..8)?.try_into().ok()?)))
            .unwrap_or(0);
        let start = floor.max(crate::clock::unix_ms().saturating_mul(1000));
        self.version.store(start, Ordering::SeqCst);
        self.first_version.store(start + 1, Ordering::SeqCst);
        self.write_version_floor(start + VERSION_RESERVE)?;
        *self.version_floor.lock() = start + VERSION_RESERVE;
        Ok(())
    }

    fn write_version_floor(&self, floor: u64) -> StorageResult<()> {
        let mut batch = Batch::default();
        batch.put_meta(
            self,
            INTERNAL_DB,
            VERSION_FLOOR_KEY,
            &Meta::string(floor.to_be_bytes().to_vec(), 0),
        );
        batch.materialize(self);
        self.write_synced(batch.inner.unwrap_or_default())
    }

    /// A kvik record of its own (an `INTERNAL_DB` key, never seen by clients, kept by FLUSHALL):
    /// its value, if written.
    pub fn get_internal(&self, key: &[u8]) -> StorageResult<Option<Vec<u8>>> {
        Ok(self.get_meta(INTERNAL_DB, key)?.map(|m| m.value))
    }

    /// Writes (or, with `None`, deletes) an internal record, synced: the callers (FUNCTION LOAD
    /// and friends) reply only once their change would survive a crash.
    pub fn put_internal(&self, key: &[u8], value: Option<&[u8]>) -> StorageResult<()> {
        let mut batch = Batch::default();
        match value {
            Some(v) => batch.put_meta(self, INTERNAL_DB, key, &Meta::string(v.to_vec(), 0)),
            None => batch.delete_raw(self, CF_META, meta_key(INTERNAL_DB, key)),
        }
        batch.materialize(self);
        self.write_synced(batch.inner.unwrap_or_default())
    }

    /// A collection version never handed out before (on this database, across restarts).
    pub fn next_version(&self) -> StorageResult<u64> {
        let v = self.version.fetch_add(1, Ordering::SeqCst) + 1;
        let mut floor = self.version_floor.lock();
        if v >= *floor {
            self.write_version_floor(v + VERSION_RESERVE)?;
            *floor = v + VERSION_RESERVE;
        }
        Ok(v)
    }

    /// [`Storage::next_version`] for a caller that must not wait: `None` when the persisted
    /// floor would have to move first (a synced write, once per `VERSION_RESERVE` versions; the
    /// version taken is then simply never used).
    pub fn next_version_reserved(&self) -> Option<u64> {
        let v = self.version.fetch_add(1, Ordering::SeqCst) + 1;
        (v < *self.version_floor.lock()).then_some(v)
    }

    /// Which on-disk database holds each client-visible one (see `dbmap`).
    pub fn dbs(&self) -> &dbmap::DbMap {
        &self.dbs
    }

    /// SWAPDB: logical databases `a` and `b` trade their contents, in O(1) (one synced record;
    /// no key is rewritten). The hot cache is keyed by on-disk database, so it stays right.
    /// `then` runs right after, before any EXEC or script of another client can start (WATCH
    /// and blocked clients are told there).
    pub fn swap_dbs(&self, a: u16, b: u16, then: impl FnOnce()) -> StorageResult<()> {
        self.dbs.swap(
            a,
            b,
            |raw| self.put_internal(dbmap::DB_MAP_KEY, Some(raw)),
            then,
        )
    }

    /// Registers an observer of committed writes (see [`WriteObserver`]).
    pub fn add_observer(&self, observer: Arc<dyn WriteObserver>) {
        self.observers.write().push(observer);
    }

    /// The hot cache in front of this storage.
    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    fn cf(&self, name: &str) -> &ColumnFamily {
        self.db
            .cf_handle(name)
            .expect("column family created at open")
    }

    pub(crate) fn meta_cf(&self) -> &ColumnFamily {
        self.cf(CF_META)
    }

    pub fn fsync_policy(&self) -> FsyncPolicy {
        match self.fsync.load(Ordering::Relaxed) {
            0 => FsyncPolicy::Always,
            1 => FsyncPolicy::Everysec,
            _ => FsyncPolicy::No,
        }
    }

    /// `txn-skip-superseded` (see `txn`).
    pub fn set_skip_superseded(&self, on: bool) {
        self.skip_superseded.store(on, Ordering::Relaxed);
    }

    pub fn set_fsync_policy(&self, policy: FsyncPolicy) {
        self.fsync.store(policy as u8, Ordering::Relaxed);
    }

    /// Locks `keys` of database `db` for a read-modify-write; see `locks`.
    pub fn lock<K: AsRef<[u8]>>(&self, db: u16, keys: &[K]) -> KeyGuard<'_> {
        self.locks.lock(db, keys)
    }

    /// True if this thread holds `key`'s lock stripe.
    pub fn key_held_here(&self, db: u16, key: &[u8]) -> bool {
        self.locks.held_here(db, key)
    }

    /// Releases the stripes this thread kept after their guards went (see `locks::retain`).
    pub fn release_retained_locks(&self) {
        self.locks.release_retained();
    }

    /// True if a writer holds `key`'s stripe lock right now (see `cmd::isolation`).
    pub fn key_locked(&self, db: u16, key: &[u8]) -> bool {
        self.locks.is_locked(db, key)
    }

    /// Locks keys across databases (MOVE, COPY ... DB).
    pub fn lock_in<'k>(&self, keys: impl Iterator<Item = (u16, &'k [u8])>) -> KeyGuard<'_> {
        self.locks.lock_in(keys)
    }

    /// Like [`Storage::lock_in`], but gives up after the wait `patience` allows on a stripe
    /// another thread holds (an I/O thread, a script locking a key it did not declare; see
    /// `locks`).
    pub fn try_lock_in_for<'k>(
        &self,
        keys: impl Iterator<Item = (u16, &'k [u8])>,
        patience: locks::Patience,
    ) -> Option<KeyGuard<'_>> {
        self.locks.try_lock_in_for(keys, patience)
    }

    /// The metadata of `key`, expired or not; callers decide what expiry means for them.
    pub fn get_meta(&self, db: u16, key: &[u8]) -> StorageResult<Option<Meta>> {
        self.get_meta_with(db, key, Wait::Allowed)
    }

    /// [`Storage::get_meta`]; with [`Wait::Never`], `Incomplete` if it is not in memory.
    pub fn get_meta_with(&self, db: u16, key: &[u8], wait: Wait) -> StorageResult<Option<Meta>> {
        let raw_key = meta_key(db, key);
        if let Some(buffered) = self.txn_lookup(CF_META, &raw_key) {
            return Ok(buffered.and_then(|raw| Meta::decode(&raw)));
        }
        // Only a memory-only read needs options of its own (each is a RocksDB object made and
        // freed); a read that may go to disk takes the defaults, on a worker or an I/O thread.
        let raw = match wait {
            Wait::Allowed | Wait::ReadsOnly => self.db.get_pinned_cf(self.meta_cf(), raw_key)?,
            Wait::Never => {
                self.db
                    .get_pinned_cf_opt(self.meta_cf(), raw_key, &wait.read_options())?
            }
        };
        Ok(raw.and_then(|raw| Meta::decode(&raw)))
    }

    /// The metadata of `key` if it exists and has not expired at `now_ms`.
    pub fn get_live(&self, db: u16, key: &[u8], now_ms: u64) -> StorageResult<Option<Meta>> {
        Ok(self.get_meta(db, key)?.filter(|m| !m.is_expired(now_ms)))
    }

    /// Commits `batch` with the durability `appendfsync` asks for, with the key count and
    /// expiry index changes its writes make, then applies its cache effects. Callers hold the
    /// locks of every key the batch writes, so no other write of these keys interleaves.
    pub fn commit(&self, batch: Batch) -> StorageResult<()> {
        self.commit_with(batch, Wait::Allowed)
    }

    /// [`Storage::commit`]; with [`Wait::Never`] it fails with `Incomplete`, having written
    /// nothing, rather than read a key's state from disk or wait out a write stall. Inside a
    /// transaction (see `txn`) the batch is buffered, and written with the transaction.
    pub fn commit_with(&self, batch: Batch, wait: Wait) -> StorageResult<()> {
        if batch.log.is_some() && self.in_txn() {
            return self.buffer(batch, wait);
        }
        self.write_batch(batch, wait, None)
    }

    /// Writes `batch` with its counts and expiry index changes, applies its cache effects and
    /// tells the observers. `prior`: the keys' states before the batch as a transaction noted
    /// them (its cache effects are then already applied); without it they are read here.
    fn write_batch(
        &self,
        mut batch: Batch,
        wait: Wait,
        prior: Option<&txn::Prior>,
    ) -> StorageResult<()> {
        batch.materialize(self);
        let observers = self.observers.read();
        let gate = self.commit_gate.read();
        // A transaction told its changes as it buffered them (see `txn`).
        let mut changes =
            (prior.is_none() && observers.iter().any(|o| o.wants_changes())).then(Vec::new);
        let tally = self.tally(&mut batch, changes.as_mut(), wait, prior)?;
        if !prior.is_some_and(|p| p.whole) {
            self.mark_group(rocks(&mut batch.inner));
        }
        // A transaction's values are in the cache already (see `txn`).
        let in_cache = prior.is_some();
        for e in batch.effects.iter().filter(|_| !in_cache) {
            if let Some((db, _, key)) = decode_meta_key(&e.raw_key) {
                self.cache.begin_write(db, key);
            }
        }
        let result = self.write(batch.inner.take().unwrap_or_default(), wait);
        if result.is_err() {
            // Pops may have been noted on writes that did not happen.
            self.forget_pop_notes();
        }
        if result.is_ok() {
            tally.apply(&self.counts);
            // After the write, so a running field expiry cycle that could not see the new
            // index entry yet looks again (as the key index's scan start).
            for &(db, at) in &batch.field_expiry_min {
                self.counts.field_expiry_indexed(db, at);
            }
        }
        drop(gate);
        let capacity = if observers.is_empty() {
            0
        } else {
            batch.effects.len()
        };
        let mut written = Vec::with_capacity(capacity);
        let mut touched = Vec::new();
        // Applied even if the write failed (then as a drop): a failed write may still have
        // reached the memtable, and dropping an entry is always safe. A transaction's values
        // are in the cache already: kept if written, dropped if not.
        for e in &batch.effects {
            let Some((db, _, key)) = decode_meta_key(&e.raw_key) else {
                continue;
            };
            let put = e.put.as_ref().filter(|_| result.is_ok());
            if !observers.is_empty() {
                let list = if e.quiet || batch.quiet {
                    &mut touched
                } else {
                    &mut written
                };
                list.push((self.dbs.logical(db), key, put.and_then(|v| meta_kind(v))));
            }
            if in_cache {
                self.cache.end_write(db, key, result.is_err());
                continue;
            }
            update_cache(&self.cache, db, key, put, e.update.as_ref(), false);
        }
        for o in observers.iter() {
            if !touched.is_empty() {
                o.keys_touched(&touched);
            }
            if !written.is_empty() {
                o.keys_written(&written);
            }
        }
        if let Some(changes) = changes.filter(|c| !c.is_empty() && result.is_ok()) {
            let changes: Vec<KeyChange<'_>> = changes
                .iter()
                .filter_map(|&(i, expired, created)| {
                    let (db, _, key) = decode_meta_key(&batch.effects[i].raw_key)?;
                    Some(KeyChange {
                        db: self.dbs.logical(db),
                        key,
                        expired,
                        created,
                    })
                })
                .collect();
            for o in observers.iter() {
                o.keys_changed(&changes);
            }
        }
        result
    }

    /// Works out what `batch`'s meta writes change in the key counts and the expiry index,
    /// from the state of each key before the batch (one read of all keys) and after each of its
    /// writes in order (a batch may write one key several times: RENAME, EXEC), and adds it to
    /// the batch.
    /// With `changes`, also notes per write (effect index, expired, created) for
    /// [`WriteObserver::keys_changed`].
    fn tally(
        &self,
        batch: &mut Batch,
        mut changes: Option<&mut Vec<(usize, bool, bool)>>,
        wait: Wait,
        prior: Option<&txn::Prior>,
    ) -> StorageResult<Tally> {
        let mut tally = Tally::default();
        if batch.effects.is_empty() {
            return Ok(tally);
        }
        // Each key's state before the batch: as a transaction noted it, as the writer read it,
        // or from the hot cache when it holds the key (the writer holds the key's lock, so the
        // entry is current), else from RocksDB.
        let mut states = KeyList::with_capacity(batch.effects.len());
        // Each effect's key's place in `states`, so the second pass looks nothing up again.
        let mut slots: SmallVec<[usize; 4]> = SmallVec::with_capacity(batch.effects.len());
        let mut unknown: Vec<usize> = Vec::new();
        for e in &batch.effects {
            if let Some(at) = states.position(&e.raw_key) {
                slots.push(at);
                continue;
            }
            let known = match prior {
                // Noted before a flush that came in between: read again (not from the cache,
                // which holds the transaction's own values).
                Some(p) if p.flushes != self.flushes.load(Ordering::Acquire) => None,
                Some(p) => p.state_of(&e.raw_key),
                None => e.prior.or_else(|| {
                    decode_meta_key(&e.raw_key)
                        .and_then(|(db, _, key)| self.cache.cached_state(db, key))
                }),
            };
            let at = states.push(&e.raw_key, known.unwrap_or(KeyState::Absent));
            if known.is_none() {
                unknown.push(at);
            }
            slots.push(at);
        }
        let ro = wait.read_options();
        let list = &mut states.list;
        if let [i] = unknown[..] {
            let raw = self.db.get_pinned_cf_opt(self.meta_cf(), list[i].0, &ro)?;
            list[i].1 = KeyState::of_meta(raw.as_deref());
        } else if !unknown.is_empty() {
            let cf = self.meta_cf();
            let keys: Vec<&[u8]> = unknown.iter().map(|&i| list[i].0).collect();
            let read = self.db.batched_multi_get_cf_opt(cf, keys, false, &ro);
            for (&i, raw) in unknown.iter().zip(read) {
                list[i].1 = KeyState::of_meta(raw?.as_deref());
            }
        }
        let now = crate::clock::unix_ms();
        for (i, e) in batch.effects.iter().enumerate() {
            let Some((db, _, key)) = decode_meta_key(&e.raw_key) else {
                continue;
            };
            let after = KeyState::of_meta(e.put.as_deref());
            let state = &mut states.list[slots[i]].1;
            tally.key_written(self, rocks(&mut batch.inner), db, key, *state, after);
            if let Some(changes) = changes.as_deref_mut() {
                let expired = matches!(*state, KeyState::Present(at) if at != 0 && at <= now);
                let created = (expired || *state == KeyState::Absent) && after != KeyState::Absent;
                if expired || created {
                    changes.push((i, expired, created));
                }
            }
            *state = after;
        }
        tally.add_to(self, rocks(&mut batch.inner));
        Ok(tally)
    }

    fn flushed(&self, db: Option<u16>) {
        let db = db.map(|d| self.dbs.logical(d));
        for o in self.observers.read().iter() {
            o.db_flushed(db);
        }
    }

    /// Syncs the WAL to stable storage (the everysec timer and shutdown call this).
    pub fn sync_wal(&self) -> StorageResult<()> {
        self.checked(self.db.flush_wal(true))
    }

    /// Calls `f(user_key, meta)` for the keys of database `db` in storage order, starting after
    /// the raw meta key `after` (or at the start), until `f` returns false or `limit` records were
    /// visited. Returns the raw meta key of the last record visited, or `None` at the end.
    pub fn scan_meta(
        &self,
        db: u16,
        after: Option<&[u8]>,
        limit: usize,
        f: impl FnMut(&[u8], &Meta) -> bool,
    ) -> StorageResult<Option<Vec<u8>>> {
        self.scan_meta_prefix(&db_prefix(db), after, limit, f)
    }

    /// [`scan_meta`](Storage::scan_meta) over the keys of one cluster slot of database `db`
    /// (CLUSTER COUNTKEYSINSLOT / GETKEYSINSLOT, slot migration).
    pub fn scan_slot(
        &self,
        db: u16,
        slot: u16,
        after: Option<&[u8]>,
        limit: usize,
        f: impl FnMut(&[u8], &Meta) -> bool,
    ) -> StorageResult<Option<Vec<u8>>> {
        let mut prefix = db_prefix(db).to_vec();
        prefix.extend_from_slice(&slot.to_be_bytes());
        self.scan_meta_prefix(&prefix, after, limit, f)
    }

    fn scan_meta_prefix(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
        mut f: impl FnMut(&[u8], &Meta) -> bool,
    ) -> StorageResult<Option<Vec<u8>>> {
        let mut opts = ReadOptions::default();
        let end = prefix_successor(prefix);
        if let Some(end) = &end {
            // Stops at the prefix's end instead of stepping over what follows it (which may
            // be a run of deleted records).
            opts.set_iterate_upper_bound(end.clone());
        }
        let it = self.db.raw_iterator_cf_opt(self.meta_cf(), opts);
        let mut it = self.txn_cursor(CF_META, prefix, end.as_deref(), it);
        match after {
            Some(after) => {
                it.seek(after);
                if it.valid() && it.key() == Some(after) {
                    it.next();
                }
            }
            None => it.seek(prefix),
        }
        let mut visited = 0;
        while it.valid() {
            let (Some(raw_key), Some(raw_val)) = (it.key(), it.value()) else {
                break;
            };
            if !raw_key.starts_with(prefix) {
                break;
            }
            visited += 1;
            if let (Some((_, _, user_key)), Some(meta)) =
                (decode_meta_key(raw_key), Meta::decode(raw_val))
            {
                if !f(user_key, &meta) {
                    return Ok(Some(raw_key.to_vec()));
                }
            }
            if visited >= limit {
                return Ok(Some(raw_key.to_vec()));
            }
            it.next();
        }
        it.status()?;
        Ok(None)
    }

    /// Removes every key of database `db` (and its cache entries).
    pub fn flush_db(&self, db: u16) -> StorageResult<()> {
        self.flush_dbs(db, db + 1, || self.cache.clear_db(db), Some(db))
    }

    /// Removes every key of every user database (and the whole cache).
    pub fn flush_all(&self) -> StorageResult<()> {
        self.flush_dbs(0, INTERNAL_DB, || self.cache.clear(), None)
    }

    /// Empties databases `from..to` (`told`: the one FLUSHDB empties, `None` for FLUSHALL) with
    /// the flush gate closed: no write is between its reads and its commit, and the next one
    /// reads the keys after the cache dropped them (see `flush_gate`).
    fn flush_dbs(
        &self,
        from: u16,
        to: u16,
        clear_cache: impl FnOnce(),
        told: Option<u16>,
    ) -> StorageResult<()> {
        // What an open transaction of this thread buffered goes first (see `txn`).
        self.settle_txn()?;
        let _closed = self.close_flush_gate();
        let r = self.delete_dbs(from, to);
        clear_cache();
        self.flushed(told);
        r
    }

    /// Keeps every other thread from taking key locks until the guard is dropped, once those
    /// that hold some let go (see `flush_gate`): EXEC closes it before it locks its keys when
    /// it runs a flush.
    pub fn close_flush_gate(&self) -> flush_gate::Closed<'_> {
        self.locks.close_gate()
    }

    /// Range-deletes databases `from..to` in every column family, their counts included, in one
    /// batch, while no commit is between its state reads and its counts update.
    fn delete_dbs(&self, from: u16, to: u16) -> StorageResult<()> {
        let _gate = self.commit_gate.write();
        self.flushes.fetch_add(1, Ordering::AcqRel);
        let mut batch = rocksdb::WriteBatch::default();
        for cf in DB_PREFIXED_CFS {
            batch.delete_range_cf(self.cf(cf), db_prefix(from), db_prefix(to));
        }
        // Counted as emptied even if the write fails: it may still reach the memtable.
        self.counts.reset(from, to);
        self.fold_counts_into(&mut batch);
        self.mark_group(&mut batch);
        self.write(batch, Wait::Allowed)
    }

    /// Writes `batch` to the memtable and the WAL buffer; it reaches the WAL file (synced with
    /// `appendfsync always`) at the writing thread's next [`Storage::make_durable`], or at
    /// once with `group-commit no`.
    fn write(&self, batch: rocksdb::WriteBatch, wait: Wait) -> StorageResult<()> {
        let mut wo = WriteOptions::default();
        wo.set_no_slowdown(!wait.allowed());
        let ticket = self.logged_write(batch, &wo)?;
        let flushed =
            self.wal
                .wrote(ticket, &self.db, self.fsync_policy() == FsyncPolicy::Always)?;
        if let Some(upto) = flushed {
            self.backlog.flushed(upto);
        }
        Ok(())
    }

    /// Writes `batch` synced (so in the WAL file, with everything buffered before it).
    fn write_synced(&self, batch: rocksdb::WriteBatch) -> StorageResult<()> {
        let mut wo = WriteOptions::default();
        wo.set_sync(true);
        let ticket = self.logged_write(batch, &wo)?;
        self.backlog.flushed(ticket);
        Ok(())
    }

    /// Writes `batch` to the memtable and the WAL buffer and, while replicas follow the
    /// backlog, appends it there in sequence order (see `backlog`). Returns its group-commit
    /// ticket.
    fn logged_write(&self, batch: rocksdb::WriteBatch, wo: &WriteOptions) -> StorageResult<u64> {
        let Some(order) = self.backlog.begin() else {
            self.checked(self.db.write_opt(batch, wo))?;
            return Ok(self.wal.ticket());
        };
        let data: std::sync::Arc<[u8]> = batch.data().into();
        let count = batch.len() as u64;
        let before = self.db.latest_sequence_number();
        self.checked(self.db.write_opt(batch, wo))?;
        let ticket = self.wal.ticket();
        let after = self.db.latest_sequence_number();
        self.backlog
            .append(order, (before, after), count, ticket, data);
        Ok(ticket)
    }

    /// The replication backlog (see `backlog`).
    pub fn backlog(&self) -> &backlog::Backlog {
        &self.backlog
    }

    /// Makes every write this thread made durable (in the WAL file; synced with `appendfsync
    /// always`), together with whatever other threads buffered meanwhile: call it before
    /// releasing replies that acknowledge writes. Cheap if the thread wrote nothing since.
    pub fn make_durable(&self) -> StorageResult<()> {
        self.make_durable_through(self.wal.take_pending_here())
    }

    /// [`Storage::make_durable`] for the writes up to WAL ticket `ticket`, made by any thread
    /// (`wal::WalGroup::take_pending_here` gave it): the WAL's sync thread's work.
    pub fn make_durable_through(&self, ticket: u64) -> StorageResult<()> {
        let flushed = self.checked(self.wal.make_durable_through(
            ticket,
            &self.db,
            self.fsync_policy() == FsyncPolicy::Always,
        ))?;
        if let Some(upto) = flushed {
            self.backlog.flushed(upto);
        }
        Ok(())
    }

    /// Where sorted sets' low ends start, as their pops left them (see `pop_hints`).
    pub fn pop_hints(&self) -> &pop_hints::PopHints {
        &self.pop_hints
    }

    /// A random order of sets' members that SPOP takes from (see `pop_decks`).
    pub fn pop_decks(&self) -> &pop_decks::PopDecks {
        &self.pop_decks
    }

    /// Forgets what `pop_hints` and `pop_decks` know of collections' members: for writes that
    /// do not pass through `Batch` (a full sync, a replicated range delete), and for writes a
    /// pop noted that are never made (a failed write, a script's rollback).
    pub fn forget_pop_notes(&self) {
        self.pop_hints.clear();
        self.pop_decks.clear();
    }

    /// [`Storage::forget_pop_notes`] of the collections stored as `keys` only (a replica's
    /// applied batch, whose every collection change writes the collection's meta record).
    pub fn forget_pop_notes_of<'k>(&self, keys: impl Iterator<Item = (u16, &'k [u8])>) {
        if !self.pop_hints.any() && !self.pop_decks.any() {
            return;
        }
        let parts: Vec<Vec<u8>> = keys
            .map(|(db, key)| {
                let mut p = encoding::data_prefix(db, key, 0);
                p.truncate(p.len() - 8);
                p
            })
            .collect();
        let written: std::collections::HashSet<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        self.pop_hints.forget_keys(&written);
        self.pop_decks.forget_keys(&written);
    }

    /// Group commit's switch and test hook (see `wal`).
    pub fn wal(&self) -> &wal::WalGroup {
        &self.wal
    }

    /// Whether writes are taken (see `health`).
    pub fn health(&self) -> &health::WriteHealth {
        &self.health
    }

    /// The timer's second: reads the free space of the data directory against `floor` bytes
    /// and, after a failed write, probes whether RocksDB takes writes again (see `health`).
    pub fn check_health(&self, floor: u64) {
        self.health.check_space(self.db.path(), floor);
        self.health.probe(&self.db);
    }

    /// The timer's tick: whether RocksDB stalls writes now (writes stopped, delayed, or the
    /// memtables' budget full, where the write buffer manager makes writers wait), for
    /// `health`: I/O threads leave writes to the pool meanwhile.
    pub fn check_stall(&self) {
        let property = |name: &str| self.db.property_int_value(name).ok().flatten().unwrap_or(0);
        let wbm = &self.shared().write_buffers;
        let stalled = property("rocksdb.is-write-stopped") > 0
            || property("rocksdb.actual-delayed-write-rate") > 0
            || (wbm.enabled() && wbm.get_usage() >= wbm.get_buffer_size());
        self.health.set_stalled(stalled);
    }

    /// Whether a write now may wait out a stall: the timer saw one (`check_stall`), or the
    /// memtables are within a sixteenth of their budget, where the write buffer manager makes
    /// writers wait for a flush. Read before each write an I/O thread would run, so a burst
    /// of writes that fills the memtables between two ticks goes to the pool in time.
    pub fn writes_may_stall(&self) -> bool {
        if self.health.stalled() {
            return true;
        }
        let wbm = &self.shared().write_buffers;
        let size = wbm.get_buffer_size();
        wbm.get_usage() >= size - size / 16
    }

    /// `result` of a RocksDB write or WAL flush, noted by `health` on the way.
    fn checked<T>(&self, result: Result<T, rocksdb::Error>) -> Result<T, rocksdb::Error> {
        self.health.note(&result);
        result
    }

    /// Compacts every column family: meta first, then data and score (the members of deleted,
    /// overwritten and expired collections go), then the expiry index (its deleted entries go)
    /// and the counts. Every column family is flushed first, so the WAL files before it become
    /// obsolete (and, for replicas, enter the retention archive).
    pub fn compact_all(&self) {
        for cf in [CF_META, CF_DATA, CF_SCORE, CF_EXPIRY, CF_COUNTS] {
            self.db
                .compact_range_cf(self.cf(cf), None::<&[u8]>, None::<&[u8]>);
        }
    }

    /// A RocksDB integer property summed over the column families, for INFO.
    pub fn property_sum(&self, name: &str) -> u64 {
        [CF_META, CF_DATA, CF_SCORE]
            .iter()
            .filter_map(|cf| {
                self.db
                    .property_int_value_cf(self.cf(cf), name)
                    .ok()
                    .flatten()
            })
            .sum()
    }
}

/// Applies one meta put (`None`: a delete) of a batch to the hot cache, after its RocksDB
/// write (`held`: a transaction's, not written yet, see `Cache::apply_value_held`): the new
/// value where the write knows it, a big collection's edited members, a list's edited head;
/// a put that did not decode, or whose whole value is not known, is treated as a delete:
/// the entry is dropped.
pub(crate) fn update_cache(
    cache: &Cache,
    db: u16,
    key: &[u8],
    put: Option<&Bytes>,
    update: Option<&CollUpdate>,
    held: bool,
) {
    if let (Some(raw), Some(CollUpdate::List(edits))) = (put, update) {
        if let Some(meta) = Meta::decode(raw).filter(|m| m.kind == Kind::List) {
            cache.apply_list(db, key, edits, &meta, held);
            return;
        }
    }
    let value = put.and_then(|v| cached_value(v, update));
    if let (Some(_), Some(CollUpdate::Fields { gen, edits, index })) = (&value, update) {
        // Before the entry is served again: a reader of it then finds the new values (and a
        // sorted set's rank index counts them).
        cache.apply_fields(*gen, edits);
        cache.ranks().apply(*gen, index);
    }
    if held {
        cache.apply_value_held(db, key, value);
    } else {
        cache.apply_value(db, key, value);
    }
}

/// What a committed put of meta record `raw` leaves in the hot cache, with its expiry: a
/// string's value; a collection's new state if the write gave it (`update`) and it agrees with
/// the record (a hash: no field TTLs, same length); nothing for anything else, or a record that
/// does not decode (the entry is dropped).
fn cached_value(raw: &Bytes, update: Option<&CollUpdate>) -> Option<(u64, CachedValue)> {
    // A string needs only its header: the value is the rest of the record, shared, not
    // decoded into a copy (every SET passes here).
    if meta_kind(raw)? == Kind::String {
        let expire_at_ms = meta_expire_at(raw)?;
        return Some((expire_at_ms, CachedValue::Str(raw.slice(META_HEADER_LEN..))));
    }
    let meta = Meta::decode(raw)?;
    let value = match (meta.kind, update) {
        (Kind::Hash, _) if meta.field_ttls => return None,
        (Kind::Hash, Some(CollUpdate::Whole(fields))) if fields.len() as u64 == meta.len => {
            CachedValue::Coll(CollValue::Whole(crate::cache::CachedHash {
                version: meta.version,
                fields: fields.clone(),
            }))
        }
        (Kind::Hash | Kind::Set | Kind::ZSet, Some(CollUpdate::Fields { gen, .. })) => {
            CachedValue::Coll(CollValue::Big(Box::new(crate::cache::BigColl {
                kind: meta.kind,
                version: meta.version,
                len: meta.len,
                gen: *gen,
                field_ttls: false,
            })))
        }
        _ => return None,
    };
    Some((meta.expire_at_ms, value))
}

impl Batch {
    /// Puts `value` under raw key `key` of column family `cf`. Every write of a batch goes
    /// through this, [`Batch::delete_raw`] or [`Batch::delete_range_raw`]: while a transaction
    /// is open the write goes to the batch's log only (the transaction replays it into its own
    /// batch, see `txn`), otherwise into the RocksDB batch.
    /// The key is one the caller built for this write: a buffered write keeps it, uncopied.
    fn put_raw(&mut self, storage: &Storage, cf: &'static str, key: Vec<u8>, value: &[u8]) {
        match &mut self.log {
            Some(log) => log.push(txn::Op::Put(
                cf,
                Bytes::from(key),
                Bytes::copy_from_slice(value),
            )),
            None => rocks(&mut self.inner).put_cf(storage.cf(cf), key, value),
        }
    }

    /// [`Batch::put_raw`] of a key and value the caller keeps too (a meta record and its cache
    /// effect): a buffered write shares them instead of copying.
    fn put_shared(&mut self, storage: &Storage, cf: &'static str, key: &Bytes, value: &Bytes) {
        match &mut self.log {
            Some(log) => log.push(txn::Op::Put(cf, key.clone(), value.clone())),
            None => rocks(&mut self.inner).put_cf(storage.cf(cf), key, value),
        }
    }

    /// [`Batch::delete_raw`] of a key the caller keeps too (see [`Batch::put_shared`]).
    fn delete_shared(&mut self, storage: &Storage, cf: &'static str, key: &Bytes) {
        match &mut self.log {
            Some(log) => log.push(txn::Op::Delete(cf, key.clone())),
            None => rocks(&mut self.inner).delete_cf(storage.cf(cf), key),
        }
    }

    /// Notes that this batch indexes a hash field of `db` expiring at `at` (see `commit`).
    fn field_indexed(&mut self, db: u16, at: u64) {
        match self.field_expiry_min.iter_mut().find(|(d, _)| *d == db) {
            Some((_, min)) => *min = (*min).min(at),
            None => self.field_expiry_min.push((db, at)),
        }
    }

    /// Deletes raw key `key` of column family `cf` (see [`Batch::put_raw`]).
    fn delete_raw(&mut self, storage: &Storage, cf: &'static str, key: Vec<u8>) {
        match &mut self.log {
            Some(log) => log.push(txn::Op::Delete(cf, Bytes::from(key))),
            None => rocks(&mut self.inner).delete_cf(storage.cf(cf), key),
        }
    }

    /// Deletes the raw keys of `cf` from `from` (inclusive) to `to` (exclusive) with one range
    /// tombstone (see [`Batch::put_raw`]).
    fn delete_range_raw(&mut self, storage: &Storage, cf: &'static str, from: &[u8], to: &[u8]) {
        match &mut self.log {
            Some(log) => log.push(txn::Op::DeleteRange(
                cf,
                Bytes::copy_from_slice(from),
                Bytes::copy_from_slice(to),
            )),
            None => rocks(&mut self.inner).delete_range_cf(storage.cf(cf), from, to),
        }
    }

    /// Moves the logged writes into the RocksDB batch, for a batch written on its own (built
    /// while a transaction was open, written outside it: an internal record, say).
    fn materialize(&mut self, storage: &Storage) {
        for op in self.log.take().unwrap_or_default() {
            txn::replay(storage, rocks(&mut self.inner), &op);
        }
    }

    /// Stores `meta` under `key`; on commit, a cached entry of `key` is updated (a string) or
    /// dropped (another kind).
    pub fn put_meta(&mut self, storage: &Storage, db: u16, key: &[u8], meta: &Meta) {
        self.put_meta_with_update(storage, db, key, meta, None);
    }

    /// [`Batch::put_meta`] of a collection the cache holds, whose new state the write knows
    /// (see [`CollUpdate`]): on commit, the cached entry of `key` is updated instead of dropped.
    pub fn put_meta_with_update(
        &mut self,
        storage: &Storage,
        db: u16,
        key: &[u8],
        meta: &Meta,
        update: Option<CollUpdate>,
    ) {
        self.put_encoded_meta(storage, db, key, meta.encode(), update, None);
    }

    /// [`Batch::put_meta`] of a key whose record the caller read under the key's lock, as
    /// `prior` (active expiry of hash fields): the commit takes the key's state from it, not
    /// from a second read.
    pub fn put_meta_known(
        &mut self,
        storage: &Storage,
        db: u16,
        key: &[u8],
        meta: &Meta,
        prior: KeyState,
    ) {
        self.put_encoded_meta(storage, db, key, meta.encode(), None, Some(prior));
    }

    /// [`Batch::put_meta`] of a record already encoded (a string's, straight from its value:
    /// SET's path builds no [`Meta`] and its copy of the value).
    pub fn put_meta_record(&mut self, storage: &Storage, db: u16, key: &[u8], record: Vec<u8>) {
        self.put_encoded_meta(storage, db, key, record, None, None);
    }

    /// Stores meta record `record` under `key`, with its cache effect.
    fn put_encoded_meta(
        &mut self,
        storage: &Storage,
        db: u16,
        key: &[u8],
        record: Vec<u8>,
        update: Option<CollUpdate>,
        prior: Option<KeyState>,
    ) {
        let raw_key = Bytes::from(meta_key(db, key));
        let value = Bytes::from(record);
        self.put_shared(storage, CF_META, &raw_key, &value);
        if db != INTERNAL_DB {
            self.effects.push(CacheEffect {
                raw_key,
                put: Some(value),
                update,
                quiet: false,
                prior,
            });
        }
    }

    /// Deletes `key`; on commit, a cached entry of `key` is dropped.
    pub fn delete_meta(&mut self, storage: &Storage, db: u16, key: &[u8]) {
        self.delete_meta_with(storage, db, key, None);
    }

    /// [`Batch::delete_meta`] of a key whose record the caller read under the key's lock, as
    /// `prior` (active expiry's re-check): the commit takes the key's state from it, not from a
    /// second read.
    pub fn delete_meta_known(&mut self, storage: &Storage, db: u16, key: &[u8], prior: KeyState) {
        self.delete_meta_with(storage, db, key, Some(prior));
    }

    fn delete_meta_with(
        &mut self,
        storage: &Storage,
        db: u16,
        key: &[u8],
        prior: Option<KeyState>,
    ) {
        let raw_key = Bytes::from(meta_key(db, key));
        self.delete_shared(storage, CF_META, &raw_key);
        if db != INTERNAL_DB {
            self.effects.push(CacheEffect {
                raw_key,
                put: None,
                update: None,
                quiet: false,
                prior,
            });
        }
    }

    /// Deletes `key`'s expiry index entry at `at` (active expiry's clean-up of an entry whose
    /// key no longer has that expiry).
    fn delete_index_entry(&mut self, storage: &Storage, db: u16, at: u64, key: &[u8]) {
        self.delete_raw(storage, CF_EXPIRY, expiry_index::key(db, at, key));
    }

    /// The keys whose cache entries this batch will update or drop, as (db, user key).
    pub fn cache_keys(&self) -> impl Iterator<Item = (u16, &[u8])> {
        self.effects
            .iter()
            .filter_map(|e| decode_meta_key(&e.raw_key).map(|(db, _, k)| (db, k)))
    }

    pub fn is_empty(&self) -> bool {
        self.inner.as_ref().is_none_or(|b| b.is_empty())
            && self.log.as_ref().is_none_or(|log| log.is_empty())
    }

    /// Marks the batch as a write Redis 7.0 does not signal as a key modification: consumer
    /// groups, their PELs and XSETID (WATCH and client tracking do not see it).
    pub fn quiet(&mut self) {
        self.quiet = true;
    }
}

#[cfg(test)]
mod cache_effect_tests {
    use super::*;
    use crate::cache::{CachedValue, Known};

    fn cached(s: &Storage, db: u16, key: &[u8]) -> Option<Vec<u8>> {
        s.cache()
            .get(db, key, 1)
            .and_then(Known::present)
            .map(|h| match h.value {
                CachedValue::Str(b) => b.to_vec(),
                CachedValue::Coll(_) => panic!("string expected"),
            })
    }

    fn fill(s: &Storage, db: u16, key: &[u8]) {
        let t = s.cache().fill_token(db, key);
        let meta = s.get_meta(db, key).unwrap().unwrap();
        s.cache().fill(t, db, key, &meta, 1);
    }

    #[test]
    fn commit_applies_the_batch_cache_effects() {
        let dir = tempfile::tempdir().unwrap();
        let s = Storage::open(dir.path()).unwrap();
        let put = |key: &[u8], v: &str| {
            let mut b = Batch::default();
            b.put_meta(&s, 0, key, &Meta::string(v.as_bytes().to_vec(), 0));
            assert_eq!(b.cache_keys().collect::<Vec<_>>(), vec![(0, key)]);
            s.commit(b).unwrap();
        };
        s.cache().set_write_allocate(false);
        put(b"k", "1");
        assert_eq!(
            cached(&s, 0, b"k"),
            None,
            "writes add no keys without write-allocate"
        );
        fill(&s, 0, b"k");
        assert_eq!(cached(&s, 0, b"k"), Some(b"1".to_vec()));
        put(b"k", "2");
        assert_eq!(cached(&s, 0, b"k"), Some(b"2".to_vec()), "a put updates");
        let mut b = Batch::default();
        b.delete_meta(&s, 0, b"k");
        s.commit(b).unwrap();
        assert_eq!(cached(&s, 0, b"k"), None, "a delete drops");
        put(b"k", "3");
        fill(&s, 0, b"k");
        put(b"j", "x");
        fill(&s, 0, b"j");
        s.flush_db(0).unwrap();
        assert_eq!(cached(&s, 0, b"k"), None, "FLUSHDB clears");
        assert_eq!(s.cache().entries(), 0);
        s.cache().set_write_allocate(true);
        put(b"w", "1");
        assert_eq!(cached(&s, 0, b"w"), Some(b"1".to_vec()), "write-allocate");
    }

    /// The counts stay exact when commits take a key's prior state from the hot cache instead
    /// of RocksDB (write-allocate puts every written string there).
    #[test]
    fn counts_stay_exact_with_states_from_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let s = Storage::open(dir.path()).unwrap();
        let put = |key: &[u8], at: u64| {
            let mut b = Batch::default();
            b.put_meta(&s, 0, key, &Meta::string(b"v".to_vec(), at));
            s.commit(b).unwrap();
        };
        let far = crate::clock::unix_ms() + 3_600_000;
        put(b"a", 0);
        put(b"a", 0); // its state now comes from the cache
        put(b"b", far);
        put(b"b", 0);
        put(b"c", far);
        put(b"c", far + 1);
        let mut b = Batch::default();
        b.delete_meta(&s, 0, b"a");
        s.commit(b).unwrap();
        assert_eq!(
            s.cache().cached_state(0, b"c"),
            Some(KeyState::Present(far + 1))
        );
        assert_eq!(s.key_count(0), 2);
        assert_eq!(s.expires_count(0), 1);
    }
}
