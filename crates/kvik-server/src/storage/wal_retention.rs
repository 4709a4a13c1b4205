//! The WAL archive's bounds, enforced from kvik's timer.
//!
//! RocksDB moves obsolete WAL files to `<dir>/archive` while `repl-wal-ttl` or
//! `repl-wal-size-limit` is set, so replicas can catch up from them, but applies both bounds at
//! most every 10 minutes: after a big load the archive grew to 10 GB under a much smaller
//! limit. [`Storage::enforce_wal_retention`] runs every second: it deletes the oldest archived
//! files beyond the size limit and those older than the TTL, and nothing while a full sync
//! holds the files (`hold_files`). A replica whose position went with them does one full sync.

use super::Storage;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, SystemTime};

/// The archive as last seen (INFO replication's `kvik_repl_wal_archived_*`).
#[derive(Default)]
pub struct ArchiveStats {
    pub bytes: AtomicU64,
    pub files: AtomicU64,
    /// Files deleted by kvik's enforcement (RocksDB's own purges not counted).
    pub deleted_files: AtomicU64,
}

/// An archived WAL file: its number (RocksDB's order of the files), size and age.
struct Archived {
    number: u64,
    path: PathBuf,
    bytes: u64,
    modified: SystemTime,
}

impl Storage {
    fn archive_dir(&self) -> PathBuf {
        self.db.path().join("archive")
    }

    /// The archived WAL files, oldest first.
    fn archived_wal(&self) -> Vec<Archived> {
        let Ok(dir) = std::fs::read_dir(self.archive_dir()) else {
            return Vec::new(); // no archive (yet)
        };
        let mut files: Vec<Archived> = dir
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name();
                let number = name.to_str()?.strip_suffix(".log")?.parse().ok()?;
                let meta = e.metadata().ok()?;
                Some(Archived {
                    number,
                    path: e.path(),
                    bytes: meta.len(),
                    modified: meta.modified().ok()?,
                })
            })
            .collect();
        files.sort_by_key(|f| f.number);
        files
    }

    /// Deletes the oldest archived WAL files until the rest fit in `size_limit` bytes, and any
    /// older than `ttl` (0 in either: that bound is off), unless file deletions are held.
    /// Updates [`Storage::wal_archive`].
    pub fn enforce_wal_retention(&self, size_limit: u64, ttl: Duration) {
        let held = self.files_held.lock();
        let files = self.archived_wal();
        let mut total: u64 = files.iter().map(|f| f.bytes).sum();
        let mut kept = files.len() as u64;
        if *held == 0 {
            let now = SystemTime::now();
            for f in &files {
                let too_big = size_limit > 0 && total > size_limit;
                let too_old =
                    !ttl.is_zero() && now.duration_since(f.modified).unwrap_or_default() > ttl;
                if !too_big && !too_old {
                    break; // the rest are newer and fit
                }
                match std::fs::remove_file(&f.path) {
                    Ok(()) => {
                        total -= f.bytes;
                        kept -= 1;
                        self.archive.deleted_files.fetch_add(1, Relaxed);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        total -= f.bytes; // RocksDB's purge got it first
                        kept -= 1;
                    }
                    Err(e) => {
                        tracing::warn!(file = %f.path.display(), error = %e, "deleting an archived WAL file failed");
                        break;
                    }
                }
            }
        }
        drop(held);
        self.archive.bytes.store(total, Relaxed);
        self.archive.files.store(kept, Relaxed);
    }

    /// The archive's size and the deletions, as of the last enforcement.
    pub fn wal_archive(&self) -> &ArchiveStats {
        &self.archive
    }
}
