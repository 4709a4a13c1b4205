//! Wall-clock time in the units Redis uses for expiry (Unix milliseconds) and for stats.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{SystemTime, UNIX_EPOCH};

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

/// Unix seconds as of the server timer's last tick (see [`tick_coarse`]).
static COARSE_SECS: AtomicU64 = AtomicU64::new(0);

/// Advances the coarse clock (the server timer calls it at `hz`).
pub fn tick_coarse(now_ms: u64) {
    COARSE_SECS.store(now_ms / 1000, Relaxed);
}

/// Unix seconds, to within a timer tick: one load, for hot paths that stamp access times (the
/// hot cache's). Before the first tick, the precise time.
pub fn coarse_secs() -> u64 {
    match COARSE_SECS.load(Relaxed) {
        0 => unix_ms() / 1000,
        s => s,
    }
}
