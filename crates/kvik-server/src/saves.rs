//! SAVE and BGSAVE: the state INFO persistence and LASTSAVE report, and the background save
//! thread. A save is a RocksDB checkpoint (`storage::checkpoint`) written to
//! `<dir>/<dbfilename>.checkpoint` (`dbfilename` is Redis's parameter, `dump.rdb` by default):
//! a directory a server can be started from with `kvik-server --restore-from`. kvik needs no
//! save to be durable (every write is in the WAL first); a save is a consistent copy to back up.

use crate::storage::{checkpoint, Storage};
use parking_lot::{Condvar, Mutex};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The suffix of the checkpoint directory after `dbfilename`.
pub const CHECKPOINT_SUFFIX: &str = ".checkpoint";

/// What INFO persistence and LASTSAVE show.
pub struct Saves {
    /// Unix seconds of the last successful save (the start time until the first).
    last_save: AtomicU64,
    /// RocksDB's sequence number at the last successful save (changes since = now - this).
    last_sequence: AtomicU64,
    last_ok: AtomicBool,
    /// Seconds the last background save took, -1 before the first.
    last_bgsave_secs: AtomicI64,
    saves: AtomicU64,
    /// When the running background save started.
    running: Mutex<Option<Instant>>,
    /// The target of the background save asked for and not yet started, and its wakeup (the
    /// `kvik-saver` thread waits on it; see `server::spawn_saver`).
    pending: Mutex<Option<PathBuf>>,
    wakeup: Condvar,
    /// Held while a checkpoint is written (SAVE, or the background thread), so two never
    /// write the same directory at once.
    writing: Mutex<()>,
}

impl Saves {
    pub fn new(storage: &Storage) -> Saves {
        Saves {
            last_save: AtomicU64::new(crate::clock::unix_ms() / 1000),
            last_sequence: AtomicU64::new(storage.sequence()),
            last_ok: AtomicBool::new(true),
            last_bgsave_secs: AtomicI64::new(-1),
            saves: AtomicU64::new(0),
            running: Mutex::new(None),
            writing: Mutex::new(()),
            pending: Mutex::new(None),
            wakeup: Condvar::new(),
        }
    }

    /// Where saves go: `<dir>/<dbfilename>.checkpoint`.
    pub fn target(dir: &Path, dbfilename: &str) -> PathBuf {
        dir.join(format!("{dbfilename}{CHECKPOINT_SUFFIX}"))
    }

    /// Saves now, on this thread (SAVE); `None` if a background save runs (Redis refuses then).
    pub fn save(&self, storage: &Storage, target: &Path) -> Option<Result<(), String>> {
        if self.running.lock().is_some() {
            return None;
        }
        let _writing = self.writing.lock();
        Some(self.run(storage, target))
    }

    /// Starts a background save to `target` (BGSAVE); false if one already runs.
    pub fn begin_background(&self, target: PathBuf) -> bool {
        let mut running = self.running.lock();
        if running.is_some() {
            return false;
        }
        *running = Some(Instant::now());
        *self.pending.lock() = Some(target);
        self.wakeup.notify_one();
        true
    }

    /// The saver thread's wait: the next background save's target, or `None` after `timeout`.
    pub fn next_background(&self, timeout: Duration) -> Option<PathBuf> {
        let mut pending = self.pending.lock();
        if pending.is_none() {
            self.wakeup.wait_for(&mut pending, timeout);
        }
        pending.take()
    }

    /// Runs the background save [`Saves::begin_background`] asked for (on the saver thread).
    pub fn run_background(&self, storage: &Storage, target: &Path) {
        let r = {
            let _writing = self.writing.lock();
            self.run(storage, target)
        };
        let mut running = self.running.lock();
        if let Some(started) = running.take() {
            self.last_bgsave_secs
                .store(started.elapsed().as_secs() as i64, Ordering::Relaxed);
        }
        if let Err(e) = r {
            tracing::warn!("background save failed: {e}");
        }
    }

    fn run(&self, storage: &Storage, target: &Path) -> Result<(), String> {
        self.saves.fetch_add(1, Ordering::Relaxed);
        match checkpoint::create(storage, target) {
            Ok(sequence) => {
                self.last_ok.store(true, Ordering::Relaxed);
                self.last_sequence.store(sequence, Ordering::Relaxed);
                self.last_save
                    .store(crate::clock::unix_ms() / 1000, Ordering::Relaxed);
                tracing::info!("DB saved on disk ({})", target.display());
                Ok(())
            }
            Err(e) => {
                self.last_ok.store(false, Ordering::Relaxed);
                Err(e.to_string())
            }
        }
    }

    pub fn last_save(&self) -> u64 {
        self.last_save.load(Ordering::Relaxed)
    }

    /// The INFO persistence fields of saving, as (name, value).
    pub fn info_fields(&self, storage: &Storage) -> Vec<(&'static str, String)> {
        let running = *self.running.lock();
        let changes = storage
            .sequence()
            .saturating_sub(self.last_sequence.load(Ordering::Relaxed));
        vec![
            ("rdb_changes_since_last_save", changes.to_string()),
            (
                "rdb_bgsave_in_progress",
                u8::from(running.is_some()).to_string(),
            ),
            ("rdb_last_save_time", self.last_save().to_string()),
            (
                "rdb_last_bgsave_status",
                if self.last_ok.load(Ordering::Relaxed) {
                    "ok"
                } else {
                    "err"
                }
                .to_string(),
            ),
            (
                "rdb_last_bgsave_time_sec",
                self.last_bgsave_secs.load(Ordering::Relaxed).to_string(),
            ),
            (
                "rdb_current_bgsave_time_sec",
                running
                    .map_or(-1, |s| s.elapsed().as_secs() as i64)
                    .to_string(),
            ),
            ("rdb_saves", self.saves.load(Ordering::Relaxed).to_string()),
        ]
    }
}
