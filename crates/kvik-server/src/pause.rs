//! CLIENT PAUSE / UNPAUSE: holds clients' commands for a while (all of them, or only those that
//! may write), as Redis 7.0 does.
//!
//! A held command holds no worker: the dispatcher leaves it unrun and marks the session
//! (`Session::paused`), the worker hands the run back with that command first, and the I/O
//! thread keeps the connection aside, trying it again on each turn of its loop (at least every
//! 100 ms) and when CLIENT UNPAUSE wakes it. CLIENT UNPAUSE is answered on the I/O thread; under
//! PAUSE ALL it is held like every other command, as in Redis, and the deadline ends the pause.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};

/// What a pause holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum PauseMode {
    /// Nothing paused.
    Off = 0,
    /// Commands that may write (write commands, PUBLISH ...), and active expiry.
    Write = 1,
    /// Every command.
    All = 2,
}

#[derive(Default)]
pub struct Pause {
    /// [`PauseMode`] as a byte, and the deadline in Unix ms: read without the lock on every
    /// command.
    mode: AtomicU8,
    until_ms: AtomicU64,
    lock: Mutex<()>,
}

impl Pause {
    /// CLIENT PAUSE: a new pause replaces a shorter or weaker one, never shortens one (Redis
    /// keeps the latest end and the strongest mode).
    pub fn pause(&self, mode: PauseMode, until_ms: u64) {
        let _g = self.lock.lock();
        let now = crate::clock::unix_ms();
        let (old_mode, old_until) = self.current(now);
        let mode = if old_mode == PauseMode::Off {
            mode
        } else {
            mode.max(old_mode)
        };
        self.until_ms.store(until_ms.max(old_until), Relaxed);
        self.mode.store(mode as u8, Relaxed);
    }

    /// CLIENT UNPAUSE: ends the pause (the caller wakes the I/O threads).
    pub fn unpause(&self) {
        let _g = self.lock.lock();
        self.mode.store(PauseMode::Off as u8, Relaxed);
        self.until_ms.store(0, Relaxed);
    }

    /// The pause in force at `now_ms` and its end.
    fn current(&self, now_ms: u64) -> (PauseMode, u64) {
        let until = self.until_ms.load(Relaxed);
        match self.mode.load(Relaxed) {
            _ if until <= now_ms => (PauseMode::Off, 0),
            1 => (PauseMode::Write, until),
            2 => (PauseMode::All, until),
            _ => (PauseMode::Off, 0),
        }
    }

    /// Whether a command is held now: `may_write` says whether it is one PAUSE WRITE holds.
    pub fn holds(&self, may_write: bool) -> bool {
        if self.mode.load(Relaxed) == PauseMode::Off as u8 {
            return false;
        }
        match self.current(crate::clock::unix_ms()).0 {
            PauseMode::Off => false,
            PauseMode::Write => may_write,
            PauseMode::All => true,
        }
    }

    /// Whether writes are paused (active expiry skips its turn).
    pub fn writes_paused(&self) -> bool {
        self.holds(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pause_keeps_the_latest_end_and_the_strongest_mode() {
        let p = Pause::default();
        assert!(!p.holds(true));
        let now = crate::clock::unix_ms();
        p.pause(PauseMode::All, now + 60_000);
        p.pause(PauseMode::Write, now + 1_000);
        assert!(p.holds(false), "ALL stays");
        p.unpause();
        assert!(!p.holds(true));
        p.pause(PauseMode::Write, now + 60_000);
        assert!(p.holds(true) && !p.holds(false));
        p.pause(PauseMode::Write, now.saturating_sub(1));
        assert!(p.holds(true), "a shorter pause does not end it");
        p.unpause();
        assert!(!p.holds(true));
    }
}
