//! Expiry of keys on disk, in three ways that together keep expired data from piling up:
//!
//! 1. Lazily: every read goes through `Storage::get_live` and treats an expired record as absent;
//!    writes overwrite or delete it under the key lock.
//! 2. Actively: [`ActiveExpiry::run`] is called by the server's timer (never on the worker lists);
//!    it walks the meta column family with a persistent cursor, a bounded number of records per
//!    call, and deletes expired keys under their lock, re-checking after locking so a key that was
//!    rewritten meanwhile survives.
//! 3. At compaction: [`meta_filter`] drops expired meta records. RocksDB turns a filtered record
//!    into a deletion when older versions may exist below, so an older value never resurfaces.

use super::encoding::meta_expire_at;
use super::{Batch, Storage, StorageResult};
use crate::clock::unix_ms;
use rocksdb::compaction_filter::Decision;

/// Compaction filter for the meta column family: drops records whose expiry has passed.
pub fn meta_filter(_level: u32, _key: &[u8], value: &[u8]) -> Decision {
    match meta_expire_at(value) {
        Some(at) if at != 0 && at <= unix_ms() => Decision::Remove,
        _ => Decision::Keep,
    }
}

/// The active expiry cycle's position in the keyspace between timer ticks.
#[derive(Default)]
pub struct ActiveExpiry {
    db: u16,
    after: Option<Vec<u8>>,
}

impl ActiveExpiry {
    /// Visits at most `budget` records, continuing where the last call stopped and moving through
    /// databases `0..databases` in turn. Returns how many keys were deleted.
    pub fn run(&mut self, storage: &Storage, databases: u16, budget: usize) -> StorageResult<u64> {
        let now = unix_ms();
        let mut expired: Vec<Vec<u8>> = Vec::new();
        if self.db >= databases {
            self.db = 0;
            self.after = None;
        }
        let next = storage.scan_meta(self.db, self.after.as_deref(), budget, |key, meta| {
            if meta.is_expired(now) {
                expired.push(key.to_vec());
            }
            true
        })?;
        let db = self.db;
        match next {
            Some(raw) => self.after = Some(raw),
            None => {
                self.after = None;
                self.db = (self.db + 1) % databases.max(1);
            }
        }
        let mut deleted = 0;
        for key in expired {
            let _guard = storage.lock(db, &[&key]);
            if let Some(meta) = storage.get_meta(db, &key)? {
                if meta.is_expired(unix_ms()) {
                    let mut batch = Batch::default();
                    batch.delete_meta(storage, db, &key);
                    storage.commit(batch)?;
                    deleted += 1;
                }
            }
        }
        Ok(deleted)
    }
}
