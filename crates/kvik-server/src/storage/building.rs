//! Collection versions built across several commits.
//!
//! A copy of a big collection (RENAME, COPY and MOVE through `write_copy`) commits its entries
//! in batches of a few megabytes before the batch that puts the meta record naming their
//! version, so its memory stays bounded. Until that last batch no key names the version, and
//! the data compaction filter (`expire::DataFilter`) drops entries no meta record names: a
//! compaction that ran in the middle of a million-member RENAME lost a tenth of its members.
//! So the first early batch also puts a marker for the version, the last one deletes it
//! (atomically with the meta put), and the filter keeps the entries of a marked version.
//!
//! ```text
//! counts CF  key:   INTERNAL_DB | b'b' | version (u64 BE)   value: empty
//! ```
//!
//! The markers live beside the internal records of the counts column family, which FLUSHALL
//! keeps, and reach replicas with the batches that carry them. A marker whose copy never ended
//! (the server stopped in between) would keep its entries forever: the primary's timer deletes
//! the markers of versions below the first one this process handed out
//! ([`Storage::clear_abandoned_builds`]), which no copy of this process can be building, and
//! the filter drops those entries at a later compaction.

use super::{Batch, Storage, StorageResult, Wait, CF_COUNTS};
use rocksdb::DB;
use std::sync::atomic::Ordering;

/// The markers' key prefix, and the end of their range.
const PREFIX: [u8; 3] = [0xff, 0xff, b'b'];
const END: [u8; 3] = [0xff, 0xff, b'b' + 1];

fn marker_key(version: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(PREFIX.len() + 8);
    k.extend_from_slice(&PREFIX);
    k.extend_from_slice(&version.to_be_bytes());
    k
}

impl Batch {
    /// Marks `version` as being built: its entries are committed before the meta record that
    /// names it (put this with the first of them).
    pub fn mark_building(&mut self, storage: &Storage, version: u64) {
        self.put_raw(storage, CF_COUNTS, marker_key(version), b"");
    }

    /// Ends [`Batch::mark_building`]: put this in the batch that puts the meta record.
    pub fn unmark_building(&mut self, storage: &Storage, version: u64) {
        self.delete_raw(storage, CF_COUNTS, marker_key(version));
    }
}

/// Whether `version` is marked as being built (for the compaction filter, which has only the
/// database). A failed read says yes: keeping an entry is always safe.
pub(super) fn is_building(db: &DB, version: u64) -> bool {
    let Some(cf) = db.cf_handle(CF_COUNTS) else {
        return true;
    };
    !matches!(db.get_pinned_cf(cf, marker_key(version)), Ok(None))
}

impl Storage {
    /// Deletes the markers of versions below the first this process handed out: copies a
    /// crash or a failover left unfinished. Returns how many it deleted. Only a primary calls
    /// this (a replica's markers are its primary's business).
    pub fn clear_abandoned_builds(&self) -> StorageResult<u64> {
        let first = self.first_version.load(Ordering::SeqCst);
        let cf = self.cf(CF_COUNTS);
        let mut it = self.db.raw_iterator_cf(cf);
        it.seek(PREFIX);
        let mut batch = rocksdb::WriteBatch::default();
        let mut n = 0;
        while let Some(k) = it.key() {
            if k >= &END[..] {
                break;
            }
            let version = k
                .get(PREFIX.len()..)
                .and_then(|v| v.try_into().ok())
                .map(u64::from_be_bytes);
            if version.is_some_and(|v| v < first) {
                batch.delete_cf(cf, k);
                n += 1;
            }
            it.next();
        }
        it.status()?;
        if n > 0 {
            self.write(batch, Wait::Allowed)?;
        }
        Ok(n)
    }
}
