//! Wall-clock time in the units Redis uses for expiry (Unix milliseconds) and for stats.
//!
//! Reading the clock is a few percent of a cached GET's cost, so the hot paths read it as
//! little as they can: a command's expiry time comes from the monotonic reading it takes for
//! its latency ([`unix_ms_at`]), and times only shown in seconds come from the timer's coarse
//! clock ([`coarse_ms`]).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Microseconds since the Unix epoch.
pub fn unix_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// Unix milliseconds as of the server timer's last tick (see [`tick_coarse`]).
static COARSE_MS: AtomicU64 = AtomicU64::new(0);

/// Advances the coarse clock (the server timer calls it at `hz`).
pub fn tick_coarse(now_ms: u64) {
    COARSE_MS.store(now_ms, Relaxed);
}

/// Unix milliseconds, to within a timer tick: one load, for hot paths that stamp times only
/// read in seconds (a client's last interaction, the hot cache's access times). Before the
/// first tick, the precise time.
pub fn coarse_ms() -> u64 {
    match COARSE_MS.load(Relaxed) {
        0 => unix_ms(),
        ms => ms,
    }
}

/// Unix seconds, to within a timer tick (see [`coarse_ms`]).
pub fn coarse_secs() -> u64 {
    coarse_ms() / 1000
}

/// How long a thread pairs one reading of the wall clock with the monotonic one in
/// [`unix_ms_at`]: a step of the wall clock (NTP) shows within this.
const ANCHOR_LIFE: Duration = Duration::from_secs(1);

thread_local! {
    /// A monotonic instant and the Unix microseconds read with it.
    static ANCHOR: Cell<Option<(Instant, u64)>> = const { Cell::new(None) };
}

/// Unix milliseconds at `t`, a monotonic reading the caller took anyway (a command's start):
/// the wall clock is read once a second per thread instead of once per command. A command
/// reads the clock for its latency and for expiry alike; this makes the two one reading.
pub fn unix_ms_at(t: Instant) -> u64 {
    ANCHOR.with(|anchor| {
        let (at, us) = match anchor.get() {
            Some((at, us)) if t.saturating_duration_since(at) < ANCHOR_LIFE => (at, us),
            _ => {
                let fresh = (Instant::now(), unix_us());
                anchor.set(Some(fresh));
                fresh
            }
        };
        // `t` may precede the anchor (taken just before a renewal): count back from it.
        let us = match t.checked_duration_since(at) {
            Some(after) => us + after.as_micros() as u64,
            None => us.saturating_sub(at.duration_since(t).as_micros() as u64),
        };
        us / 1000
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_ms_at_follows_the_wall_clock() {
        let t = Instant::now();
        let before = unix_ms();
        let at = unix_ms_at(t);
        assert!(at.abs_diff(before) <= 1, "{at} {before}");
        std::thread::sleep(Duration::from_millis(30));
        let (now, wall) = (Instant::now(), unix_ms());
        let later = unix_ms_at(now);
        assert!(later.abs_diff(wall) <= 1, "{later} {wall}");
        assert!(later >= at + 30);
        // An instant older than the anchor counts back from it.
        assert!(unix_ms_at(t).abs_diff(at) <= 1);
        assert!(unix_ms_at(Instant::now()).abs_diff(unix_ms()) <= 1);
    }
}
