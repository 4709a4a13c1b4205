//! RocksDB storage: column families, key encoding, durability, expiry.
//!
//! Role: the only module that talks to RocksDB. Command handlers read metadata with
//! [`Storage::get_meta`] (no lock), and write by taking the key's stripe lock
//! ([`Storage::lock`]), building a [`Batch`], and committing it with [`Storage::commit`], which
//! writes the WAL and, with `appendfsync always`, syncs it before returning. Every acknowledged
//! write is therefore in the WAL file before the reply leaves, so a `kill -9` loses nothing in any
//! mode; `appendfsync` only decides how much an OS crash or power loss can take (always: nothing,
//! everysec: about a second, no: what the OS had not written).
//!
//! Layout (see `encoding`): `meta` holds one record per user key (a string's value inline), `data`
//! holds collection members, `score` the sorted-set score index. Expired records are removed by
//! the compaction filter in `expire` and by the active expiry cycle.

pub mod encoding;
pub mod expire;
pub mod locks;
#[cfg(test)]
mod tests;

use encoding::{db_prefix, decode_meta_key, meta_key, prefix_successor, Meta};
use locks::{KeyGuard, KeyLocks};
use rocksdb::{BlockBasedOptions, ColumnFamily, ColumnFamilyDescriptor, Options, WriteOptions, DB};
use std::path::Path;
use std::sync::atomic::{AtomicU8, Ordering};

pub use rocksdb::Error as StorageError;
pub type StorageResult<T> = Result<T, StorageError>;

const CF_META: &str = "meta";
const CF_DATA: &str = "data";
const CF_SCORE: &str = "score";

/// Database index reserved for kvik's own records (topology, version floor). User databases are
/// limited to fewer than this, so FLUSHALL's range never reaches it.
pub const INTERNAL_DB: u16 = u16::MAX;

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
#[derive(Default)]
pub struct Batch {
    inner: rocksdb::WriteBatch,
}

pub struct Storage {
    db: DB,
    fsync: AtomicU8,
    locks: KeyLocks,
}

impl Storage {
    /// Opens (or creates) the database under `dir`.
    pub fn open(dir: &Path) -> StorageResult<Storage> {
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        opts.set_max_background_jobs(2);
        opts.set_bytes_per_sync(1 << 20);
        // Writes from many workers join one WAL write (group commit) instead of queueing.
        opts.set_enable_pipelined_write(true);

        let mut table = BlockBasedOptions::default();
        table.set_bloom_filter(10.0, false);
        table.set_block_cache(&rocksdb::Cache::new_lru_cache(64 << 20));
        table.set_cache_index_and_filter_blocks(true);

        let mut meta_opts = opts.clone();
        meta_opts.set_block_based_table_factory(&table);
        meta_opts.set_compaction_filter("kvik-meta-expiry", expire::meta_filter);
        meta_opts.set_compression_type(rocksdb::DBCompressionType::Lz4);
        let mut data_opts = opts.clone();
        data_opts.set_block_based_table_factory(&table);
        data_opts.set_compression_type(rocksdb::DBCompressionType::Lz4);

        let cfs = vec![
            ColumnFamilyDescriptor::new(CF_META, meta_opts),
            ColumnFamilyDescriptor::new(CF_DATA, data_opts.clone()),
            ColumnFamilyDescriptor::new(CF_SCORE, data_opts),
        ];
        let db = DB::open_cf_descriptors(&opts, dir, cfs)?;
        Ok(Storage {
            db,
            fsync: AtomicU8::new(FsyncPolicy::Everysec as u8),
            locks: KeyLocks::default(),
        })
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

    pub fn set_fsync_policy(&self, policy: FsyncPolicy) {
        self.fsync.store(policy as u8, Ordering::Relaxed);
    }

    /// Locks `keys` of database `db` for a read-modify-write; see `locks`.
    pub fn lock<K: AsRef<[u8]>>(&self, db: u16, keys: &[K]) -> KeyGuard<'_> {
        self.locks.lock(db, keys)
    }

    /// Locks keys across databases (MOVE, COPY ... DB).
    pub fn lock_in<'k>(&self, keys: impl Iterator<Item = (u16, &'k [u8])>) -> KeyGuard<'_> {
        self.locks.lock_in(keys)
    }

    /// The metadata of `key`, expired or not; callers decide what expiry means for them.
    pub fn get_meta(&self, db: u16, key: &[u8]) -> StorageResult<Option<Meta>> {
        let raw = self.db.get_pinned_cf(self.meta_cf(), meta_key(db, key))?;
        Ok(raw.and_then(|raw| Meta::decode(&raw)))
    }

    /// The metadata of `key` if it exists and has not expired at `now_ms`.
    pub fn get_live(&self, db: u16, key: &[u8], now_ms: u64) -> StorageResult<Option<Meta>> {
        Ok(self.get_meta(db, key)?.filter(|m| !m.is_expired(now_ms)))
    }

    /// Commits `batch` with the durability `appendfsync` asks for.
    pub fn commit(&self, batch: Batch) -> StorageResult<()> {
        let mut wo = WriteOptions::default();
        wo.set_sync(self.fsync_policy() == FsyncPolicy::Always);
        self.db.write_opt(batch.inner, &wo)
    }

    /// Syncs the WAL to stable storage (the everysec timer and shutdown call this).
    pub fn sync_wal(&self) -> StorageResult<()> {
        self.db.flush_wal(true)
    }

    /// Calls `f(user_key, meta)` for the keys of database `db` in storage order, starting after
    /// the raw meta key `after` (or at the start), until `f` returns false or `limit` records were
    /// visited. Returns the raw meta key of the last record visited, or `None` at the end.
    pub fn scan_meta(
        &self,
        db: u16,
        after: Option<&[u8]>,
        limit: usize,
        mut f: impl FnMut(&[u8], &Meta) -> bool,
    ) -> StorageResult<Option<Vec<u8>>> {
        let prefix = db_prefix(db);
        let mut it = self.db.raw_iterator_cf(self.meta_cf());
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
            if !raw_key.starts_with(&prefix) {
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

    /// Removes every key of database `db`.
    pub fn flush_db(&self, db: u16) -> StorageResult<()> {
        let from = db_prefix(db).to_vec();
        let to = prefix_successor(&from).expect("user db below INTERNAL_DB");
        self.delete_range(&from, &to)
    }

    /// Removes every key of every user database.
    pub fn flush_all(&self) -> StorageResult<()> {
        self.delete_range(&[0, 0], &db_prefix(INTERNAL_DB))
    }

    fn delete_range(&self, from: &[u8], to: &[u8]) -> StorageResult<()> {
        let mut batch = Batch::default();
        for cf in [CF_META, CF_DATA, CF_SCORE] {
            batch.inner.delete_range_cf(self.cf(cf), from, to);
        }
        self.commit(batch)
    }

    /// Compacts the meta column family (runs the expiry compaction filter over everything).
    pub fn compact_all(&self) {
        for cf in [CF_META, CF_DATA, CF_SCORE] {
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

impl Batch {
    pub fn put_meta(&mut self, storage: &Storage, db: u16, key: &[u8], meta: &Meta) {
        self.inner
            .put_cf(storage.meta_cf(), meta_key(db, key), meta.encode());
    }

    pub fn delete_meta(&mut self, storage: &Storage, db: u16, key: &[u8]) {
        self.inner.delete_cf(storage.meta_cf(), meta_key(db, key));
    }

    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }
}
