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
//!    [`data_filter`] then drops the members of collections that are gone: deleted, overwritten
//!    (a new version), or expired. This is what makes DEL of a big collection O(1).

use super::encoding::{decode_data_key, meta_expire_at, meta_key, Meta};
use super::{Batch, Storage, StorageResult, CF_META};
use crate::clock::unix_ms;
use rocksdb::compaction_filter::Decision;
use rocksdb::DB;

/// Compaction filter for the meta column family: drops records whose expiry has passed.
pub fn meta_filter(_level: u32, _key: &[u8], value: &[u8]) -> Decision {
    match meta_expire_at(value) {
        Some(at) if at != 0 && at <= unix_ms() => Decision::Remove,
        _ => Decision::Keep,
    }
}

/// Compaction filter for the data and score column families: keeps an entry only while its
/// collection's meta record exists, is live, and has the entry's version. A failed metadata read
/// keeps the entry (it is looked at again in a later compaction).
pub fn data_filter(db: &DB, raw_key: &[u8]) -> Decision {
    let Some(k) = decode_data_key(raw_key) else {
        return Decision::Keep;
    };
    let Some(cf) = db.cf_handle(CF_META) else {
        return Decision::Keep;
    };
    match db.get_pinned_cf(cf, meta_key(k.db, k.key)) {
        Ok(Some(raw)) => match Meta::decode(&raw) {
            Some(m) if m.is_collection() && m.version == k.version && !m.is_expired(unix_ms()) => {
                Decision::Keep
            }
            Some(_) => Decision::Remove,
            None => Decision::Keep,
        },
        Ok(None) => Decision::Remove,
        Err(_) => Decision::Keep,
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
