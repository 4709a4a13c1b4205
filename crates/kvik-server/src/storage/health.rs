//! Whether kvik may take writes: the disk has room, and RocksDB's last write did not fail.
//!
//! Role: the answer behind Redis's MISCONF. Redis refuses write commands (and PING) while its
//! AOF cannot be written, keeps serving reads, and lifts the refusal once a write succeeds
//! again. kvik does the same for two reasons:
//! - **low space**: the timer reads the data directory's free space every second
//!   ([`WriteHealth::check_space`]); below `disk-free-min` writes are refused before RocksDB
//!   meets a full disk, so its memtables can still flush and the refusal ends by itself once
//!   space is freed;
//! - **a failed write**: a write or WAL flush that RocksDB failed with an I/O error or
//!   corruption ([`WriteHealth::note`]). RocksDB then stops taking writes (its background
//!   error); the timer probes with an empty write and a WAL flush each second
//!   ([`WriteHealth::probe`]), and clears the refusal if RocksDB recovered. A full disk is not
//!   something RocksDB recovers from without its SstFileManager, which the C API kvik uses
//!   cannot attach: the refusal then lasts until a restart, and the message says so.
//!
//! Each change is logged once, not per refused write.
//!
//! It also says whether RocksDB is stalling writes (a stop, a delay, or the memtables' budget
//! full), read by the timer every tick ([`WriteHealth::set_stalled`]): an I/O thread then
//! leaves writes to the pool, where waiting is allowed, so its other clients' reads and PINGs
//! are not held behind a stalled write.

use parking_lot::Mutex;
use rocksdb::{ErrorKind, WriteBatch, DB};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering::Relaxed};

const HEALTHY: u8 = 0;
const LOW_SPACE: u8 = 1;
const FAILED: u8 = 2;

/// The refusal state and its message; see the module doc.
#[derive(Default)]
pub struct WriteHealth {
    /// Bit set of [`LOW_SPACE`] and [`FAILED`]; 0 when writes are taken.
    state: AtomicU8,
    /// Why writes are refused, as the MISCONF reply words it (after the code).
    reason: Mutex<String>,
    /// Free bytes on the data directory's file system at the last check, and the floor then.
    free_bytes: AtomicU64,
    floor: AtomicU64,
    /// Writes refused so far (INFO `kvik_writes_refused`).
    pub refused: AtomicU64,
    /// RocksDB stalls writes: I/O threads leave them to the pool.
    stalled: AtomicBool,
    /// Stalls seen by the timer so far (INFO `kvik_write_stalls`).
    stalls: AtomicU64,
}

impl WriteHealth {
    /// The MISCONF message to refuse a write with, if writes are refused.
    pub fn refusal(&self) -> Option<String> {
        if self.state.load(Relaxed) == HEALTHY {
            return None;
        }
        Some(self.reason.lock().clone())
    }

    /// [`WriteHealth::refusal`] for a write being refused now: counts it.
    pub fn refuse(&self) -> Option<String> {
        let why = self.refusal()?;
        self.refused.fetch_add(1, Relaxed);
        Some(why)
    }

    pub fn ok(&self) -> bool {
        self.state.load(Relaxed) == HEALTHY
    }

    /// A RocksDB write failed and RocksDB has not taken one since.
    pub fn failed(&self) -> bool {
        self.state.load(Relaxed) & FAILED != 0
    }

    /// RocksDB stalls writes (see the module doc).
    pub fn stalled(&self) -> bool {
        self.stalled.load(Relaxed)
    }

    pub fn stalls(&self) -> u64 {
        self.stalls.load(Relaxed)
    }

    /// The timer's reading of RocksDB's stall state.
    pub fn set_stalled(&self, on: bool) {
        if self.stalled.swap(on, Relaxed) != on {
            if on {
                self.stalls.fetch_add(1, Relaxed);
            }
            tracing::debug!(stalled = on, "RocksDB write stall");
        }
    }

    pub fn free_bytes(&self) -> u64 {
        self.free_bytes.load(Relaxed)
    }

    /// Notes the outcome of a RocksDB write or WAL flush: an I/O error or corruption refuses
    /// writes until [`WriteHealth::probe`] sees RocksDB take them again. Other errors (a write
    /// stall met with `no_slowdown`, a shutdown) say nothing about the disk.
    pub fn note<T>(&self, result: &Result<T, rocksdb::Error>) {
        let Err(e) = result else { return };
        if !matches!(e.kind(), ErrorKind::IOError | ErrorKind::Corruption) {
            return;
        }
        // The message is in place before the state refuses with it.
        let mut reason = self.reason.lock();
        if self.state.load(Relaxed) & FAILED == 0 {
            tracing::error!(error = %e, "a write to RocksDB failed; refusing writes (MISCONF) until it takes them again");
            *reason = format!(
                "Errors writing to the WAL: {e}. Writes are refused until a write succeeds \
                 again (after a full disk: free space and restart kvik)"
            );
            self.state.fetch_or(FAILED, Relaxed);
        }
    }

    /// Every second while a write failure stands: an empty write and a WAL flush, which
    /// RocksDB refuses while it holds a background error. Clears the failure if both pass.
    pub fn probe(&self, db: &DB) {
        if self.state.load(Relaxed) & FAILED == 0 {
            return;
        }
        let written = db
            .write(WriteBatch::default())
            .and_then(|()| db.flush_wal(false));
        if written.is_ok() {
            self.state.fetch_and(!FAILED, Relaxed);
            tracing::warn!("RocksDB takes writes again; writes are no longer refused");
            self.restate();
        }
    }

    /// Reads the free space of `dir`'s file system and refuses writes while it is below
    /// `floor` bytes (0: never). Returns the free bytes (None if they could not be read).
    pub fn check_space(&self, dir: &Path, floor: u64) -> Option<u64> {
        let stat = rustix::fs::statvfs(dir).ok()?;
        let free = stat.f_bavail.saturating_mul(stat.f_frsize);
        self.free_bytes.store(free, Relaxed);
        self.floor.store(floor, Relaxed);
        let low = floor > 0 && free < floor;
        let before = if low {
            // The message is in place before the state refuses with it.
            self.restate_low_space();
            self.state.fetch_or(LOW_SPACE, Relaxed)
        } else {
            self.state.fetch_and(!LOW_SPACE, Relaxed)
        };
        match (before & LOW_SPACE != 0, low) {
            (false, true) => {
                tracing::error!(
                    free,
                    floor,
                    dir = %dir.display(),
                    "free disk space is below disk-free-min; refusing writes (MISCONF) until there is more"
                );
            }
            (true, false) => {
                tracing::warn!(
                    free,
                    floor,
                    "free disk space is back above disk-free-min; writes are taken again"
                );
                self.restate();
            }
            (true, true) | (false, false) => {}
        }
        Some(free)
    }

    /// The message of the cause that stands (a failed write wins), after either changed.
    fn restate(&self) {
        if self.state.load(Relaxed) & LOW_SPACE != 0 {
            self.restate_low_space();
        }
    }

    /// The low-space message, unless a failed write's stands.
    fn restate_low_space(&self) {
        let mut reason = self.reason.lock();
        if self.state.load(Relaxed) & FAILED == 0 {
            *reason = format!(
                "Errors writing to the disk: {} MB free, below disk-free-min ({} MB). Writes \
                 are refused until there is more free space",
                self.free_bytes.load(Relaxed) >> 20,
                self.floor.load(Relaxed) >> 20
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_floor_above_the_free_space_refuses_and_lowering_it_lifts_the_refusal() {
        let dir = tempfile::tempdir().unwrap();
        let h = WriteHealth::default();
        assert!(h.refusal().is_none());
        let free = h.check_space(dir.path(), 1).expect("statvfs");
        assert!(free > 0);
        assert!(h.ok());
        h.check_space(dir.path(), u64::MAX);
        let why = h.refusal().expect("refused below the floor");
        assert!(why.starts_with("Errors writing to the disk:"), "{why}");
        assert!(why.contains("disk-free-min"), "{why}");
        h.check_space(dir.path(), 0);
        assert!(h.refusal().is_none());
    }
}
