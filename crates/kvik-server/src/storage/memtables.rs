//! A memtable is flushed once it holds `rocksdb-memtable-max-entries` entries, before its
//! byte size would end it.
//!
//! Role: the timer asks every tick ([`Storage::flush_crowded_memtables`]). The cost of a write
//! into RocksDB's memtable (a skiplist search) grows with the entries it holds, not with their
//! bytes: a search visits nodes spread over the whole arena, and once they outgrow the CPU's
//! caches each step is a cache miss. RocksDB ends a memtable by bytes only
//! (`write_buffer_size`), so one size cannot serve both kinds of data: 64 MiB of small writes
//! (a SET of a few bytes is ~60 bytes in the memtable) is a million entries, and the insert
//! took 40% of the server's CPU under pipelined SETs; 64 MiB of 1 KB values is 64k entries,
//! cheap to search, and a smaller byte limit only makes more L0 files for compaction.
//! Counting entries ends the first kind early and leaves the second alone
//! (docs/benchmarks.md section 29).
//!
//! A memtable that holds a wave of deletions and takes no more writes is flushed too
//! (`rocksdb-tombstone-cleanup`, see `options::TombstoneCleanup`): RocksDB's own trigger, a scan
//! that steps over many deleted entries, only asks for the flush at the column family's next
//! write, which after a mass HDEL or ZPOPMIN may never come; until the tombstones leave the
//! memtable, no compaction can drop them.
//!
//! A flush is asked for only while the column family has no memtable waiting to be flushed,
//! so the request never makes writers wait for a flush (RocksDB's own limit of two memtables
//! per column family); the next tick tries again.

use super::{CF_DATA, CF_EXPIRY, CF_META, CF_SCORE};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The column families whose memtables the timer watches: those commands write and scan.
const WATCHED: [&str; 4] = [CF_META, CF_DATA, CF_SCORE, CF_EXPIRY];

/// What the timer saw of each watched memtable at its last tick, and the flushes it asked for.
#[derive(Default)]
pub struct MemtableWatch {
    /// Entries of each [`WATCHED`] active memtable at the last tick.
    last_entries: [AtomicU64; WATCHED.len()],
    entry_flushes: AtomicU64,
    deletion_flushes: AtomicU64,
}

impl super::Storage {
    /// Asks RocksDB to flush, without waiting, each watched column family whose active memtable
    /// holds at least `max_entries` entries (0: never), or, with `quiet_deletions` (0: never),
    /// at least that many deletions and no write since the last tick. Returns how many it
    /// asked to flush.
    pub fn flush_memtables(&self, max_entries: u64, quiet_deletions: u64) -> usize {
        let watch = &self.memtables;
        let mut asked = 0;
        for (i, name) in WATCHED.into_iter().enumerate() {
            let cf = self.cf(name);
            let property = |p: &str| self.db.property_int_value_cf(cf, p).ok().flatten();
            let Some(entries) = property("rocksdb.num-entries-active-mem-table") else {
                continue;
            };
            let quiet = watch.last_entries[i].swap(entries, Relaxed) == entries;
            let crowded = max_entries > 0 && entries >= max_entries;
            let deletions = quiet_deletions > 0
                && quiet
                && property("rocksdb.num-deletes-active-mem-table")
                    .is_some_and(|n| n >= quiet_deletions);
            if !(crowded || deletions) || property("rocksdb.num-immutable-mem-table") != Some(0) {
                continue;
            }
            let mut opts = rocksdb::FlushOptions::default();
            opts.set_wait(false);
            match self.db.flush_cf_opt(cf, &opts) {
                Ok(()) => {
                    let counter = if crowded {
                        &watch.entry_flushes
                    } else {
                        &watch.deletion_flushes
                    };
                    counter.fetch_add(1, Relaxed);
                    asked += 1;
                }
                Err(e) => tracing::warn!(error = %e, cf = name, "flushing a memtable failed"),
            }
        }
        asked
    }

    /// Memtables flushed for their entry count so far (INFO rocksdb `memtable_entry_flushes`).
    pub fn memtable_entry_flushes(&self) -> u64 {
        self.memtables.entry_flushes.load(Relaxed)
    }

    /// Memtables flushed for the deletions they held once writes stopped (INFO rocksdb
    /// `memtable_deletion_flushes`).
    pub fn memtable_deletion_flushes(&self) -> u64 {
        self.memtables.deletion_flushes.load(Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::super::encoding::Meta;
    use super::super::{Batch, Storage, CF_META};

    fn active_entries(s: &Storage) -> u64 {
        s.db.property_int_value_cf(s.cf(CF_META), "rocksdb.num-entries-active-mem-table")
            .unwrap()
            .unwrap()
    }

    fn write_keys(s: &Storage, from: u32, n: u32) {
        let mut b = Batch::default();
        for i in from..from + n {
            let meta = Meta::string(b"v".to_vec(), 0);
            b.put_meta(s, 0, format!("key:{i}").as_bytes(), &meta);
        }
        s.commit(b).unwrap();
    }

    #[test]
    fn a_memtable_past_its_entry_limit_is_flushed_and_one_below_it_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let s = Storage::open(dir.path()).unwrap();
        write_keys(&s, 0, 2_000);
        assert!(active_entries(&s) >= 2_000);

        // Off, and below the limit: nothing asked.
        assert_eq!(s.flush_memtables(0, 0), 0);
        assert_eq!(s.flush_memtables(10_000, 0), 0);
        assert_eq!(s.memtable_entry_flushes(), 0);
        assert!(active_entries(&s) >= 2_000);

        // Past the limit: meta's memtable is switched for a fresh one and flushed.
        assert_eq!(s.flush_memtables(1_000, 0), 1);
        assert_eq!(s.memtable_entry_flushes(), 1);
        assert!(
            active_entries(&s) < 1_000,
            "a fresh memtable after the flush"
        );
        s.db.flush_wal(true).unwrap();

        // Every key still reads back, old memtable or SST.
        write_keys(&s, 2_000, 10);
        for i in [0u32, 1_999, 2_009] {
            let meta = s.get_meta(0, format!("key:{i}").as_bytes()).unwrap();
            assert!(meta.is_some(), "key:{i}");
        }
    }

    #[test]
    fn a_memtable_of_deletions_is_flushed_once_writes_stop() {
        let dir = tempfile::tempdir().unwrap();
        let s = Storage::open(dir.path()).unwrap();
        write_keys(&s, 0, 3_000);
        s.db.flush_cf(s.cf(CF_META)).unwrap();
        let mut b = Batch::default();
        for i in 0..2_500 {
            b.delete_meta(&s, 0, format!("key:{i}").as_bytes());
        }
        s.commit(b).unwrap();
        assert!(active_entries(&s) >= 2_500);

        // Writes since the last tick: not quiet yet.
        assert_eq!(s.flush_memtables(0, 2_000), 0);
        write_keys(&s, 3_000, 1);
        assert_eq!(s.flush_memtables(0, 2_000), 0);
        // Fewer deletions than asked: kept, quiet or not.
        assert_eq!(s.flush_memtables(0, 5_000), 0);
        assert_eq!(s.memtable_deletion_flushes(), 0);
        // Quiet, with enough deletions: flushed.
        assert_eq!(s.flush_memtables(0, 2_000), 1);
        assert_eq!(s.memtable_deletion_flushes(), 1);
        assert_eq!(s.memtable_entry_flushes(), 0);
        assert!(active_entries(&s) < 100, "a fresh memtable after the flush");
        for i in [0u32, 2_499, 2_500, 3_000] {
            let live = s
                .get_meta(0, format!("key:{i}").as_bytes())
                .unwrap()
                .is_some();
            assert_eq!(live, i >= 2_500, "key:{i}");
        }
    }
}
