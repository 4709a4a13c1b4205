//! The full sync's sender-side rate limit (`repl-fullsync-max-bytes-per-sec`): before each
//! chunk the feeder asks [`Throttle::admit`], which sleeps until sending it keeps the average
//! rate since the limit was last (re)set at or under the limit. The limit is read again on
//! every call, so CONFIG SET applies to a transfer already running.

use std::time::{Duration, Instant};

/// Longest single sleep: the limit, the link and shutdown are looked at again after it.
const SLICE: Duration = Duration::from_millis(100);
/// Idle time after which the budget restarts, so a pause is not made up by a burst.
const MAX_CREDIT: Duration = Duration::from_secs(1);

/// Paces one transfer.
pub struct Throttle {
    /// Start of the current window, the bytes admitted in it and the limit it runs under.
    start: Instant,
    bytes: u64,
    limit: u64,
    /// Times `admit` had to wait (INFO's `kvik_fullsync_throttled_waits`).
    pub waits: u64,
}

impl Default for Throttle {
    fn default() -> Throttle {
        Throttle {
            start: Instant::now(),
            bytes: 0,
            limit: 0,
            waits: 0,
        }
    }
}

impl Throttle {
    /// The chunk size to send under `limit` (bytes per second, 0 = none): about an eighth of
    /// a second's worth, so the pace is smooth, between 1 KiB and `max`.
    pub fn chunk(limit: u64, max: usize) -> usize {
        match limit {
            0 => max,
            l => ((l / 8) as usize).clamp(1024, max),
        }
    }

    /// Waits until the bytes admitted so far have had their time at the limit, then admits
    /// `n` more; `limit` gives the current limit and
    /// `keep_going` is asked between slices (false: return at once, false).
    pub fn admit(
        &mut self,
        n: u64,
        limit: impl Fn() -> u64,
        keep_going: impl Fn() -> bool,
    ) -> bool {
        let mut waited = false;
        loop {
            let l = limit();
            let now = Instant::now();
            if l != self.limit {
                self.restart(l, now);
            }
            if l == 0 {
                break;
            }
            // The bytes already admitted must have had their time before the next ones go.
            let due = self.start + Duration::from_secs_f64(self.bytes as f64 / l as f64);
            if now >= due {
                if now - due > MAX_CREDIT {
                    self.restart(l, now);
                }
                break;
            }
            if !keep_going() {
                return false;
            }
            if !waited {
                self.waits += 1;
                waited = true;
            }
            std::thread::sleep((due - now).min(SLICE));
        }
        self.bytes += n;
        true
    }

    fn restart(&mut self, limit: u64, now: Instant) {
        self.limit = limit;
        self.start = now;
        self.bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unlimited_never_waits_and_a_limit_does() {
        let mut t = Throttle::default();
        for _ in 0..100 {
            assert!(t.admit(1 << 20, || 0, || true));
        }
        assert_eq!(t.waits, 0);
        let mut t = Throttle::default();
        for _ in 0..4 {
            assert!(t.admit(16 * 1024, || 64 * 1024, || true));
        }
        assert!(t.waits > 0);
    }

    #[test]
    fn a_stopped_link_ends_the_wait() {
        let mut t = Throttle::default();
        assert!(t.admit(1024, || 1024, || true));
        assert!(!t.admit(1 << 30, || 1024, || false));
    }

    #[test]
    fn chunks_follow_the_limit() {
        assert_eq!(Throttle::chunk(0, 256 * 1024), 256 * 1024);
        assert_eq!(Throttle::chunk(80 * 1024, 256 * 1024), 10 * 1024);
        assert_eq!(Throttle::chunk(10, 256 * 1024), 1024);
        assert_eq!(Throttle::chunk(1 << 40, 256 * 1024), 256 * 1024);
    }
}
